/*
 * kubever.c - the API server's version for the webhook (see kubever.h):
 * one kube client of its own, one timer for the next lookup and one for
 * the readiness wait.
 */
#include "webhook/kubever.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "kube/kube.h"
#include "kube/kversion.h"
#include "net/httpc.h"
#include "webhook/whmetrics.h"

struct kubever {
    uv_loop_t *loop;
    struct webhook_server *srv;
    struct httpc *hc;
    struct kube *k;
    uv_timer_t next;  /* the next lookup */
    uv_timer_t ready; /* the readiness wait */
    uint64_t refresh_ms, retry_ms;
    int known;    /* a version was read */
    int answered; /* the first lookup has ended */
    int open;     /* timers still to close */
};

static void set_minor(struct kubever *kv, int minor, const char *source, const char *git)
{
    int before = webhook_server_kube_minor(kv->srv);
    int first = !kv->answered;
    webhook_server_set_kube_minor(kv->srv, minor, "the API server's /version");
    whmetrics_set_kube_version(minor, source);
    if (minor == before && !first) return;
    struct log_rec r;
    if (!log_rec_begin(&r, RA_LOG_INFO, "kube-version")) return;
    log_rec_int(&r, "minor", minor);
    log_rec_str(&r, "source", source);
    if (git && git[0]) log_rec_str(&r, "git_version", git);
    log_rec_end(&r, "Kubernetes 1.%d in force for injection (the API server says %s)", minor,
                git && git[0] ? git : "1.x");
}

static void release_ready(struct kubever *kv)
{
    kv->answered = 1;
    webhook_server_hold_ready(kv->srv, NULL);
    uv_timer_stop(&kv->ready);
}

static void on_next(uv_timer_t *t);

static void on_version(void *ud, const struct kversion *v, const char *err)
{
    struct kubever *kv = ud;
    if (v) {
        set_minor(kv, v->minor, "server", v->git);
        kv->known = 1;
        release_ready(kv);
        uv_timer_start(&kv->next, on_next, kv->refresh_ms, 0);
        return;
    }
    int minor = webhook_server_kube_minor(kv->srv);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "kube-version")) {
        log_rec_str(&r, "error", err);
        log_rec_int(&r, "minor", minor);
        log_rec_int(&r, "retry_ms", (long long)kv->retry_ms);
        log_rec_end(&r,
                    "cannot read the API server's version: %s; Kubernetes 1.%d %s (--kube-version "
                    "sets it); trying again in %llu s",
                    err, minor, kv->known ? "stays, as read before" : "assumed, the default",
                    (unsigned long long)(kv->retry_ms / 1000));
    }
    if (!kv->known) whmetrics_set_kube_version(minor, "default");
    release_ready(kv);
    uv_timer_start(&kv->next, on_next, kv->retry_ms, 0);
}

static void on_next(uv_timer_t *t)
{
    struct kubever *kv = t->data;
    if (kversion_fetch(kv->k, on_version, kv) < 0) on_version(kv, NULL, "cannot start the request");
}

static void on_ready_wait(uv_timer_t *t)
{
    struct kubever *kv = t->data;
    if (kv->answered) return;
    log_warn("the API server's version is not known after %u s: ready with Kubernetes 1.%d "
             "meanwhile",
             KUBEVER_READY_WAIT_MS / 1000, webhook_server_kube_minor(kv->srv));
    webhook_server_hold_ready(kv->srv, NULL);
}

/* The stand-ins kube_create wants and this client never uses: the pod's
 * name, and a namespace outside a cluster. */
static void client_config(const struct kubever_opts *o, struct kube_config *kc)
{
    memset(kc, 0, sizeof *kc);
    kc->api = o->api;
    kc->ca_file = o->ca_file;
    kc->token_file = o->token_file;
    const char *pod = getenv("POD_NAME");
    if (!pod || !pod[0]) kc->pod_name = "reload-agent-webhook";
    const char *ns = getenv("POD_NAMESPACE");
    if ((!ns || !ns[0]) && access(KUBE_SA_DIR "/namespace", R_OK) != 0) kc->namespace_ = "default";
}

struct kubever *kubever_start(uv_loop_t *loop, const struct kubever_opts *o,
                              struct webhook_server *s)
{
    struct kubever *kv = calloc(1, sizeof *kv);
    if (!kv) ra_oom();
    kv->loop = loop;
    kv->srv = s;
    kv->refresh_ms = o->refresh_ms ? o->refresh_ms : KUBEVER_REFRESH_MS_DEFAULT;
    kv->retry_ms = kv->refresh_ms < KUBEVER_RETRY_MS ? kv->refresh_ms : KUBEVER_RETRY_MS;
    char err[512] = "libcurl could not be initialised";
    struct kube_config kc;
    client_config(o, &kc);
    if (httpc_create(loop, &kv->hc) < 0 ||
        kube_create(loop, kv->hc, &kc, &kv->k, err, sizeof err) < 0) {
        int minor = webhook_server_kube_minor(s);
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_WARN, "kube-version")) {
            log_rec_str(&r, "error", err);
            log_rec_int(&r, "minor", minor);
            log_rec_end(&r,
                        "cannot ask the API server for its version: %s; Kubernetes 1.%d assumed, "
                        "the default (--kube-version sets it)",
                        err, minor);
        }
        whmetrics_set_kube_version(minor, "default");
        if (kv->hc) httpc_close(kv->hc, NULL, NULL);
        free(kv);
        return NULL;
    }
    uv_timer_init(loop, &kv->next);
    uv_timer_init(loop, &kv->ready);
    kv->next.data = kv->ready.data = kv;
    kv->open = 2;
    webhook_server_hold_ready(s, "waiting for the API server's version");
    uv_timer_start(&kv->ready, on_ready_wait, KUBEVER_READY_WAIT_MS, 0);
    on_next(&kv->next);
    return kv;
}

static void on_closed(uv_handle_t *h)
{
    struct kubever *kv = h->data;
    if (--kv->open == 0) free(kv);
}

void kubever_stop(struct kubever *kv)
{
    if (!kv) return;
    kube_destroy(kv->k);
    kv->k = NULL;
    httpc_close(kv->hc, NULL, NULL);
    kv->hc = NULL;
    uv_close((uv_handle_t *)&kv->next, on_closed);
    uv_close((uv_handle_t *)&kv->ready, on_closed);
}
