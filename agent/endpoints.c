/*
 * endpoints.c - /healthz, /readyz, /metrics and /status (see endpoints.h).
 * /status is built with cJSON; paths and hashes are the only content shown
 * (never file contents).
 */
#include "agent/endpoints.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube.h"
#include "agent/metrics.h"

static void text(struct httpd_resp *resp, int status, const char *body)
{
    resp->status = status;
    resp->body = strdup(body);
    resp->body_len = resp->body ? strlen(body) : 0;
}

static char *status_json(const struct endpoints_ctx *c)
{
    cJSON *root = cJSON_CreateObject(), *roots = cJSON_AddArrayToObject(root, "roots");
    struct monitor *m = *c->mon;
    char hex[HASH_HEX_LEN + 1] = "";
    cJSON_AddBoolToObject(root, "ready", *c->ready && m && monitor_ready(m));
    if (m) {
        for (size_t i = 0; i < monitor_root_count(m); i++) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "path", monitor_root(m, i));
            cJSON_AddBoolToObject(r, "present", monitor_root_present(m, i));
            cJSON_AddItemToArray(roots, r);
        }
        const struct hash_manifest *cur = monitor_current(m);
        hash_hex(cur->total, hex);
        cJSON_AddStringToObject(root, "hash", hex);
        cJSON_AddNumberToObject(root, "files", (double)cur->n);
        cJSON_AddNumberToObject(root, "changes", (double)monitor_changes(m));
        cJSON_AddBoolToObject(root, "baseline", monitor_has_baseline(m));
        cJSON_AddBoolToObject(root, "hashing", monitor_hashing(m));
        cJSON_AddNumberToObject(root, "unwatched_directories", (double)monitor_unwatched(m));
    }
    if (*c->eng) {
        struct engine_status st;
        engine_get_status(*c->eng, &st);
        cJSON_AddStringToObject(root, "applied_hash", st.applied);
        cJSON *la = cJSON_AddObjectToObject(root, "last_action");
        cJSON_AddStringToObject(la, "action", st.last_action);
        cJSON_AddStringToObject(la, "result", st.last_result);
        cJSON *pr = cJSON_AddObjectToObject(root, "pending_retry");
        cJSON_AddBoolToObject(pr, "pending", st.retry_pending && st.attempt > 0);
        cJSON_AddNumberToObject(pr, "attempt", st.attempt);
        cJSON_AddNumberToObject(pr, "due_in_ms", (double)st.retry_in_ms);
        cJSON_AddBoolToObject(root, "action_in_flight", st.inflight);
        cJSON_AddStringToObject(root, "last_error", st.last_error);
    }
    cJSON_AddStringToObject(root, "last_config_error", c->last_config_error);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

struct codes {
    char *buf;
    size_t len;
    int failed;
};

static void add_code(void *ud, long code, uint64_t n)
{
    struct codes *c = ud;
    char line[128];
    int l = snprintf(line, sizeof line, "reload_agent_api_requests_total{code=\"%ld\"} %llu\n",
                     code, (unsigned long long)n);
    char *nb = realloc(c->buf, c->len + (size_t)l + 1);
    if (!nb) {
        c->failed = 1;
        return;
    }
    memcpy(nb + c->len, line, (size_t)l + 1);
    c->buf = nb;
    c->len += (size_t)l;
}

/* Appends the Kubernetes API request counters (by HTTP status; 0 = no
 * response) to a rendered metrics body. */
static void append_api_codes(const struct endpoints_ctx *c, struct httpd_resp *resp)
{
    static const char head[] =
        "# HELP reload_agent_api_requests_total Kubernetes API requests by HTTP status code "
        "(0: no response).\n# TYPE reload_agent_api_requests_total counter\n";
    struct codes codes = {0};
    if (!c->kube || !*c->kube) return;
    kube_foreach_code(*c->kube, add_code, &codes);
    char *nb = codes.failed ? NULL
                            : realloc(resp->body, resp->body_len + sizeof head + codes.len + 1);
    if (nb) {
        memcpy(nb + resp->body_len, head, sizeof head - 1);
        memcpy(nb + resp->body_len + sizeof head - 1, codes.buf ? codes.buf : "", codes.len);
        resp->body = nb;
        resp->body_len += sizeof head - 1 + codes.len;
        resp->body[resp->body_len] = '\0';
    }
    free(codes.buf);
}

void endpoints_handle(void *ud, const struct httpd_req *req, struct httpd_resp *resp)
{
    const struct endpoints_ctx *c = ud;
    if (strcmp(req->path, "/healthz") == 0) {
        text(resp, 200, "ok\n");
    } else if (strcmp(req->path, "/readyz") == 0) {
        int ready = *c->ready && *c->mon && monitor_ready(*c->mon);
        text(resp, ready ? 200 : 503, ready ? "ready\n" : "not ready\n");
    } else if (strcmp(req->path, "/metrics") == 0) {
        struct monitor *m = *c->mon;
        resp->status = 200;
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp->body = metrics_render(m ? monitor_changes(m) : 0, m ? monitor_watch_events(m) : 0,
                                    &resp->body_len);
        if (!resp->body) text(resp, 500, "out of memory\n");
        else append_api_codes(c, resp);
    } else if (strcmp(req->path, "/status") == 0) {
        resp->status = 200;
        resp->content_type = "application/json";
        resp->body = status_json(c);
        resp->body_len = resp->body ? strlen(resp->body) : 0;
        if (!resp->body) text(resp, 500, "out of memory\n");
    } else {
        text(resp, 404, "not found\n");
    }
}
