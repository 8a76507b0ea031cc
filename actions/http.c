/*
 * http.c - the http action: one request to the app's reload endpoint
 * (--http-url, --http-method, --http-header) with --http-timeout; the reply
 * status decides (--http-expect-status). The HTTP client (libcurl) is
 * created on first use and kept in the action's state, so agents without
 * an http action never initialise libcurl. Its messages show the URL with
 * userinfo and query values redacted (base/redact.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/action.h"
#include "base/log.h"
#include "base/redact.h"
#include "net/httpc.h"

#define HTTP_MAX_BODY (64 * 1024)

/* One request in flight. */
struct http_run {
    const struct action_params *p;
    action_done done;
    void *ud;
};

/* 1 if status matches one of the --http-expect-status entries. */
static int is_expected(const struct action_params *p, long status)
{
    for (size_t i = 0; i < p->nhttp_expect; i++) {
        const char *e = p->http_expect[i];
        if (strlen(e) == 3 && e[1] == 'x' && e[2] == 'x') {
            if (status / 100 == e[0] - '0') return 1;
        } else if (strtol(e, NULL, 10) == status) {
            return 1;
        }
    }
    return 0;
}

static void report(action_done done, void *ud, int status, const char *err)
{
    struct action_result r = {status, 0, status < 0 ? err : NULL, 0};
    done(ud, ACTION_HTTP, &r);
}

static void http_done(void *ud, const struct httpc_result *res)
{
    struct http_run run = *(struct http_run *)ud;
    const struct action_params *p = run.p;
    char buf[1200], url[512], why[512];
    free(ud);
    /* credentials in the URL never reach a message (logs, /status, Events) */
    redact_url(p->http_url, url, sizeof url);
    if (!res->ok) {
        redact_text(res->error ? res->error : "request failed", p->http_url, why, sizeof why);
        snprintf(buf, sizeof buf, "%s %s: %s", p->http_method, url, why);
        report(run.done, run.ud, -EIO, buf);
    } else if (!is_expected(p, res->status)) {
        snprintf(buf, sizeof buf, "%s %s: unexpected status %ld", p->http_method, url, res->status);
        report(run.done, run.ud, -EIO, buf);
    } else {
        report(run.done, run.ud, 0, NULL);
    }
}

static void http_start(struct action_env *env, const struct action_params *p, action_done done,
                       void *ud)
{
    struct httpc *hc = env->state[ACTION_HTTP];
    char buf[256];
    struct httpc_req req = {
        .method = p->http_method,
        .url = p->http_url,
        .headers = (const char *const *)p->http_headers,
        .nheaders = p->nhttp_headers,
        .timeout_ms = p->http_timeout_ms,
        .max_body = HTTP_MAX_BODY,
    };
    int rc = hc ? 0 : httpc_create(env->loop, &hc);
    if (rc < 0) {
        report(done, ud, rc, "cannot create the HTTP client (libcurl could not be initialised)");
        return;
    }
    env->state[ACTION_HTTP] = hc;
    struct http_run *run = malloc(sizeof *run);
    if (!run) ra_oom();
    *run = (struct http_run){p, done, ud};
    rc = httpc_request(hc, &req, http_done, run, NULL);
    if (rc < 0) {
        free(run);
        snprintf(buf, sizeof buf, "cannot start the request: %s", strerror(-rc));
        report(done, ud, rc, buf);
    }
}

static void http_release(struct action_env *env)
{
    struct httpc *hc = env->state[ACTION_HTTP];
    env->state[ACTION_HTTP] = NULL;
    if (hc) httpc_close(hc, NULL, NULL);
}

const struct action_ops action__http_ops = {http_start, NULL, http_release};
