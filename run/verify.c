/*
 * verify.c - polling --verify until it passes or --verify-timeout (see
 * verify.h). A verify owns one timer and at most one try in flight (an
 * httpc transfer or a checkrun); it is freed in the timer's close callback.
 */
#include "run/verify.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/exec.h"
#include "base/log.h"
#include "base/redact.h"
#include "net/httpc.h"
#include "run/checkrun.h"

struct verify {
    uv_loop_t *loop;
    uv_timer_t timer;
    struct verify_opts o;
    char **argv; /* a command */
    struct httpc_xfer *xfer;
    struct checkrun *run;
    verify_done cb;
    void *ud;
    uint64_t t0_ms, deadline_ms;
    int tries;
    int finished; /* cb ran, or cancelled: the timer is closing */
    char detail[1100];
};

int verify_is_url(const char *t)
{
    return t && (strncmp(t, "http://", 7) == 0 || strncmp(t, "https://", 8) == 0);
}

static void on_closed(uv_handle_t *h)
{
    struct verify *v = h->data;
    exec_argv_free(v->argv);
    free((char *)v->o.target);
    free((char *)v->o.socket);
    free(v);
}

static void finish(struct verify *v, int ok)
{
    v->finished = 1;
    uv_update_time(v->loop);
    v->cb(v->ud, ok, ok ? "" : v->detail, (double)(uv_now(v->loop) - v->t0_ms) / 1e3, v->tries);
    uv_close((uv_handle_t *)&v->timer, on_closed);
}

static void try_once(uv_timer_t *t);

/* A try failed: the next one, or the end when no time is left. */
static void try_failed(struct verify *v)
{
    uv_update_time(v->loop);
    uint64_t now = uv_now(v->loop);
    if (now + VERIFY_INTERVAL_MS >= v->deadline_ms) {
        finish(v, 0);
        return;
    }
    uv_timer_start(&v->timer, try_once, VERIFY_INTERVAL_MS, 0);
}

static void on_http(void *ud, const struct httpc_result *res)
{
    struct verify *v = ud;
    char url[512], why[512];
    v->xfer = NULL;
    redact_url(v->o.target, url, sizeof url);
    if (res->ok && res->status >= 200 && res->status < 300) {
        finish(v, 1);
        return;
    }
    if (res->ok) {
        snprintf(v->detail, sizeof v->detail, "GET %s: status %ld", url, res->status);
    } else {
        redact_text(res->error ? res->error : "request failed", v->o.target, why, sizeof why);
        snprintf(v->detail, sizeof v->detail, "GET %s: %s", url, why);
    }
    try_failed(v);
}

static void on_command(void *ud, const struct vproto_result *r)
{
    struct verify *v = ud;
    char what[600];
    v->run = NULL;
    if (vproto_passed(r)) {
        finish(v, 1);
        return;
    }
    vproto_describe(r, 0, what, sizeof what);
    snprintf(v->detail, sizeof v->detail, "%s %s", v->argv[0], what);
    try_failed(v);
}

static void try_once(uv_timer_t *t)
{
    struct verify *v = t->data;
    uv_update_time(v->loop);
    uint64_t now = uv_now(v->loop), left = v->deadline_ms > now ? v->deadline_ms - now : 1;
    int rc;
    v->tries++;
    if (v->argv) {
        rc = checkrun_start(v->loop, v->o.socket, v->argv, left, on_command, v, &v->run);
    } else {
        struct httpc_req req = {.method = "GET",
                                .url = v->o.target,
                                .timeout_ms = left < VERIFY_TRY_MAX_MS ? left : VERIFY_TRY_MAX_MS,
                                .max_body = 4096};
        rc = httpc_request(v->o.hc, &req, on_http, v, &v->xfer);
    }
    if (rc < 0) {
        snprintf(v->detail, sizeof v->detail, "cannot start a try: %s", strerror(-rc));
        try_failed(v);
    }
}

int verify_start(uv_loop_t *loop, const struct verify_opts *o, verify_done cb, void *ud,
                 struct verify **out)
{
    char **argv = NULL;
    if (verify_is_url(o->target)) {
        if (!o->hc) return -EINVAL;
    } else if (exec_split(o->target, &argv) < 0) {
        return -EINVAL;
    }
    struct verify *v = calloc(1, sizeof *v);
    if (!v) ra_oom();
    v->loop = loop;
    v->o = *o;
    v->o.target = ra_strdup(o->target);
    v->o.socket = ra_strdup(o->socket);
    v->argv = argv;
    v->cb = cb;
    v->ud = ud;
    uv_timer_init(loop, &v->timer);
    v->timer.data = v;
    uv_update_time(loop);
    v->t0_ms = uv_now(loop);
    v->deadline_ms = v->t0_ms + o->timeout_ms;
    snprintf(v->detail, sizeof v->detail, "no try passed");
    uint64_t first = o->timeout_ms > VERIFY_INTERVAL_MS ? VERIFY_INTERVAL_MS : o->timeout_ms / 2;
    uv_timer_start(&v->timer, try_once, first, 0);
    *out = v;
    return 0;
}

void verify_cancel(struct verify *v)
{
    if (v->finished) return;
    v->finished = 1;
    if (v->xfer) httpc_cancel(v->xfer);
    if (v->run) checkrun_cancel(v->run);
    uv_close((uv_handle_t *)&v->timer, on_closed);
}
