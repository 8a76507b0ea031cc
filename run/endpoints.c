/*
 * endpoints.c - /healthz, /readyz, /metrics and /status (see endpoints.h).
 * /status is built with cJSON; paths and hashes are the only content shown
 * (never file contents).
 */
#include "run/endpoints.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "run/metrics.h"

static void text(struct httpd_resp *resp, int status, const char *body)
{
    resp->status = status;
    resp->body = strdup(body);
    resp->body_len = resp->body ? strlen(body) : 0;
}

/* The safe-reload steps (docs/safe-reload.md): what was refused, and the
 * storm breaker. */
static void add_safe_reload(cJSON *root, const struct engine_status *st)
{
    cJSON *sr = cJSON_AddObjectToObject(root, "safe_reload");
    cJSON_AddStringToObject(sr, "rejected_hash", st->rejected_hash);
    cJSON_AddStringToObject(sr, "rejected_reason", st->rejected_reason);
    cJSON_AddStringToObject(sr, "verify_failed_hash", st->verify_failed_hash);
    cJSON_AddStringToObject(sr, "verify_error", st->verify_error);
    cJSON_AddStringToObject(sr, "rolled_back_hash", st->rolled_back_hash);
    cJSON_AddStringToObject(sr, "halted_hash", st->halted_hash);
    cJSON_AddBoolToObject(sr, "keep_last_good", st->keep_last_good);
    cJSON_AddBoolToObject(sr, "copies_ready", st->copies_ready);
    cJSON *storm = cJSON_AddObjectToObject(sr, "storm");
    cJSON_AddNumberToObject(storm, "limit", st->storm_limit);
    cJSON_AddNumberToObject(storm, "window_ms", (double)st->storm_window_ms);
    cJSON_AddNumberToObject(storm, "actions_in_window", st->storm_actions);
    cJSON_AddBoolToObject(storm, "halted", st->storm_halted);
    cJSON_AddNumberToObject(storm, "resume_in_ms", (double)st->storm_resume_in_ms);
}

static char *status_json(const struct endpoints_ctx *c)
{
    cJSON *root = cJSON_CreateObject(), *roots = cJSON_AddArrayToObject(root, "roots");
    struct monitor *m = *c->mon;
    char hex[HASH_HEX_LEN + 1] = "";
    cJSON_AddBoolToObject(root, "ready", *c->ready && m && monitor_is_ready(m));
    if (m) {
        for (size_t i = 0; i < monitor_root_count(m); i++) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "path", monitor_root(m, i));
            cJSON_AddBoolToObject(r, "present", monitor_is_root_present(m, i));
            cJSON_AddItemToArray(roots, r);
        }
        const struct hash_manifest *cur = monitor_current(m);
        hash_hex(cur->total, hex);
        cJSON_AddStringToObject(root, "hash", hex);
        /* the rollout hash: the same over the rollout-class files only */
        hash_hex(cur->sub, hex);
        cJSON_AddStringToObject(root, "rollout_hash", hex);
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
        cJSON_AddStringToObject(root, "phase", st.phase);
        cJSON_AddStringToObject(root, "rejected_hash", st.rejected_hash);
        add_safe_reload(root, &st);
    }
    cJSON_AddStringToObject(root, "last_config_error", c->last_config_error);
    if (c->fs && *c->fs) fastsync_status(*c->fs, root);
    if (c->stage && *c->stage) stage_status(*c->stage, root);
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

void endpoints_handle(void *ud, const struct httpd_req *req, struct httpd_resp *resp)
{
    const struct endpoints_ctx *c = ud;
    if (strcmp(req->path, "/healthz") == 0) {
        text(resp, 200, "ok\n");
    } else if (strcmp(req->path, "/readyz") == 0) {
        int ready = *c->ready && *c->mon && monitor_is_ready(*c->mon);
        text(resp, ready ? 200 : 503, ready ? "ready\n" : "not ready\n");
    } else if (strcmp(req->path, "/metrics") == 0) {
        resp->status = 200;
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        resp->body = metrics_render(&resp->body_len);
        if (!resp->body) text(resp, 500, "out of memory\n");
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
