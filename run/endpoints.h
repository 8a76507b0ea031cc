/*
 * endpoints.h - the routes of the built-in server: /healthz, /readyz,
 * /metrics (Prometheus text 0.0.4) and /status (JSON). Read-only views of
 * the agent's state; they never change it.
 */
#ifndef RA_ENDPOINTS_H
#define RA_ENDPOINTS_H

#include "run/engine.h"
#include "run/fastsync.h"
#include "net/httpd.h"
#include "run/monitor.h"
#include "run/stage.h"

/* What the routes read. The pointers are re-read on every request, so the
 * owner may replace the monitor (live --watch change) at any time. */
struct endpoints_ctx {
    struct monitor **mon;
    struct engine **eng;
    const int *ready;              /* 1 once the first baseline is done; /readyz also asks
                                 * the monitor (baseline taken, every directory watched) */
    const char *last_config_error; /* "" if none */
    struct fastsync **fs;          /* may be NULL, or point to NULL: no fast sync */
    struct stage **stage;          /* may be NULL, or point to NULL: no staging */
};

/* An httpd_handler; ud is a struct endpoints_ctx. */
void endpoints_handle(void *ud, const struct httpd_req *req, struct httpd_resp *resp);

#endif
