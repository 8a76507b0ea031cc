/*
 * kevents.c - rate-limited core/v1 Event creation (see kevents.h). Bodies
 * are built with cJSON in the legacy form of docs/kubernetes-api.md#events (no eventTime, so the
 * event namespace must equal the involved object's).
 */
#include "kube/kevents.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define KEV_MEMORY 16 /* remembered (object, reason) pairs */

struct kev_seen {
    char key[320];
    time_t at;
};

struct kevents {
    struct kube *k;
    struct kev_seen seen[KEV_MEMORY];
    size_t next_seen;
    time_t window_start;
    unsigned in_window;
    char host[256];
};

int kev_create(struct kube *k, struct kevents **out)
{
    struct kevents *ev = calloc(1, sizeof *ev);
    if (!ev) return -ENOMEM;
    ev->k = k;
    if (gethostname(ev->host, sizeof ev->host) != 0) ev->host[0] = '\0';
    *out = ev;
    return 0;
}

void kev_destroy(struct kevents *ev) { free(ev); }

/* 1 if this event may be sent now (and records it). */
static int admit(struct kevents *ev, const struct kev_object *o, const char *reason)
{
    time_t now = time(NULL);
    char key[320];
    snprintf(key, sizeof key, "%s/%s/%s", o->kind, o->name, reason);
    for (size_t i = 0; i < KEV_MEMORY; i++)
        if (ev->seen[i].at && strcmp(ev->seen[i].key, key) == 0 &&
            now - ev->seen[i].at < KEV_SAME_REASON_S)
            return 0;
    if (now - ev->window_start >= 60) {
        ev->window_start = now;
        ev->in_window = 0;
    }
    if (ev->in_window >= KEV_BURST) return 0;
    ev->in_window++;
    struct kev_seen *s = &ev->seen[ev->next_seen++ % KEV_MEMORY];
    snprintf(s->key, sizeof s->key, "%s", key);
    s->at = now;
    return 1;
}

/* The first refused Event (403: no "events create" in the agent's Role)
 * is a warning naming the fix; the process logs it once, since Events are
 * fire and forget. Any other failure stays at debug level. */
static int refused_logged;

static void posted(void *ud, const struct kube_resp *r)
{
    (void)ud;
    if (r->ok && r->status < 300) return;
    if (r->ok && r->status == 403 && !refused_logged) {
        refused_logged = 1;
        log_warn("cannot create Kubernetes Events: %s; no Event is posted until that is granted "
                 "(later refusals are logged at debug level)",
                 r->error ? r->error : "HTTP 403");
        return;
    }
    log_debug("could not create a Kubernetes Event: %s", r->error ? r->error : "request failed");
}

void kev_post(struct kevents *ev, const struct kev_object *o, const char *type, const char *reason,
              const char *message)
{
    if (!admit(ev, o, reason)) {
        kube__count_suppressed(ev->k);
        return;
    }
    struct timespec ts;
    char name[320], when[32], msg[1025], path[512];
    clock_gettime(CLOCK_REALTIME, &ts);
    /* client-go's recorder convention: <object>.<hex of UnixNano> */
    snprintf(name, sizeof name, "%s.%llx", o->name,
             (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&ts.tv_sec));
    snprintf(msg, sizeof msg, "%s", message);

    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "apiVersion", "v1");
    cJSON_AddStringToObject(e, "kind", "Event");
    cJSON *md = cJSON_AddObjectToObject(e, "metadata");
    cJSON_AddStringToObject(md, "name", name);
    cJSON_AddStringToObject(md, "namespace", o->namespace_);
    cJSON *io = cJSON_AddObjectToObject(e, "involvedObject");
    cJSON_AddStringToObject(io, "apiVersion", o->api_version);
    cJSON_AddStringToObject(io, "kind", o->kind);
    cJSON_AddStringToObject(io, "name", o->name);
    cJSON_AddStringToObject(io, "namespace", o->namespace_);
    if (o->uid && *o->uid) cJSON_AddStringToObject(io, "uid", o->uid);
    cJSON_AddStringToObject(e, "reason", reason);
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON *src = cJSON_AddObjectToObject(e, "source");
    cJSON_AddStringToObject(src, "component", "reload-agent");
    if (ev->host[0]) cJSON_AddStringToObject(src, "host", ev->host);
    cJSON_AddStringToObject(e, "firstTimestamp", when);
    cJSON_AddStringToObject(e, "lastTimestamp", when);
    cJSON_AddNumberToObject(e, "count", 1);
    cJSON_AddStringToObject(e, "reportingComponent", "reload-agent");
    cJSON_AddStringToObject(e, "reportingInstance", kube_pod_name(ev->k));
    char *body = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    if (!body) return;
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", o->namespace_);
    struct kube_req req = {.verb = "create",
                           .resource = "events",
                           .group = "",
                           .method = "POST",
                           .path = path,
                           .content_type = "application/json",
                           .body = body,
                           .body_len = strlen(body)};
    if (kube_request(ev->k, &req, posted, NULL) < 0) log_debug("could not queue an Event");
    free(body);
}
