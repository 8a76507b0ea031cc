/*
 * restartpod.c - the restart-pod action and its record across the restart
 * (restartpod.h).
 */
#include "actions/restartpod.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "actions/action.h"
#include "base/file.h"
#include "base/log.h"

int restartpod_record_write(const char *dir, const struct restartpod_record *r, char *err,
                            size_t errlen)
{
    char path[4096];
    ra_path_in(dir, RESTARTPOD_RECORD_FILE, path, sizeof path);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "time_ms", (double)r->time_ms);
    cJSON_AddNumberToObject(o, "exit_code", r->exit_code);
    cJSON_AddStringToObject(o, "hash", r->hash);
    cJSON_AddStringToObject(o, "files", r->files ? r->files : "");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) ra_oom();
    int rc = ra_write_file_atomic(path, s, strlen(s), 0600, err, errlen);
    free(s);
    return rc;
}

int restartpod_record_take(const char *dir, struct restartpod_record *out, char *err, size_t errlen)
{
    char path[4096], why[512];
    char *buf = NULL;
    size_t len;
    memset(out, 0, sizeof *out);
    ra_path_in(dir, RESTARTPOD_RECORD_FILE, path, sizeof path);
    int rc = ra_read_file(path, RESTARTPOD_RECORD_MAX, &buf, &len, why, sizeof why);
    if (rc == -ENOENT) return 0;
    if (rc < 0) {
        snprintf(err, errlen, "%s", why);
        (void)unlink(path);
        return rc;
    }
    (void)unlink(path); /* reported once, whatever it holds */
    cJSON *o = cJSON_ParseWithLength(buf, len);
    free(buf);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "time_ms");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "exit_code");
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(o, "hash");
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "files");
    if (!cJSON_IsNumber(t) || !cJSON_IsNumber(c) || !cJSON_IsString(h) ||
        strlen(h->valuestring) >= sizeof out->hash || (f && !cJSON_IsString(f))) {
        cJSON_Delete(o);
        snprintf(err, errlen, "%s: not the record reload-agent writes", path);
        return -EINVAL;
    }
    out->time_ms = (int64_t)t->valuedouble;
    out->exit_code = (int)c->valuedouble;
    snprintf(out->hash, sizeof out->hash, "%s", h->valuestring);
    out->files = f && *f->valuestring ? ra_strdup(f->valuestring) : NULL;
    cJSON_Delete(o);
    return 1;
}

void restartpod_record_free(struct restartpod_record *r)
{
    free(r->files);
    r->files = NULL;
}

/* ---- the action (actions/action.h) ---- */

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static void restartpod_start(struct action_env *env, const struct action_params *p,
                             action_done done, void *ud)
{
    if (!env->exit_request) { /* only the daemon can exit; tests without one */
        struct action_result r = {-ENOTSUP, 1, "restart-pod: this agent cannot exit on request", 0};
        done(ud, ACTION_RESTART_POD, &r);
        return;
    }
    struct restartpod_record rec = {wall_ms(), p->restart_pod_exit_code, "", p->restart_pod_files};
    snprintf(rec.hash, sizeof rec.hash, "%s", p->content_hash);
    int recorded = 0;
    if (p->state_dir && *p->state_dir) {
        char err[4400];
        if (restartpod_record_write(p->state_dir, &rec, err, sizeof err) == 0)
            recorded = 1;
        else
            log_warn("restart-pod: %s; the agent that starts again will not know why", err);
    }
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "restart-pod")) {
        log_rec_int(&r, "exit_code", rec.exit_code);
        log_rec_str(&r, "hash", rec.hash);
        if (rec.files) log_rec_str(&r, "files", rec.files);
        log_rec_bool(&r, "recorded", recorded);
        log_rec_end(&r,
                    "restarting the pod: exiting with code %d, on which the kubelet restarts "
                    "every container of the pod in place (changed: %s)",
                    rec.exit_code, rec.files ? rec.files : "?");
    }
    int code = rec.exit_code; /* p is freed by done */
    struct action_result ok = {0, 0, NULL, 0};
    done(ud, ACTION_RESTART_POD, &ok);
    env->exit_request(env->exit_ud, code);
}

const struct action_ops action__restart_pod_ops = {restartpod_start, NULL, NULL};
