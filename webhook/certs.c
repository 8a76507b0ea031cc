/*
 * certs.c - `reload-agent webhook certs` (contract in certs.h): a one-shot
 * job on its own libuv loop that ensures the webhook's TLS Secret and the
 * caBundle of its MutatingWebhookConfiguration, through the agent's own
 * Kubernetes client (kube/kube.h). One request is in flight at a time; each
 * answer moves a small state machine:
 *
 *   GET secret ──404──▶ generate, POST secret ──409──▶ GET secret (the winner's)
 *       │200                 │201                          │200
 *       ▼                    ▼                             ▼
 *   check it ───────────▶ GET mutatingwebhookconfiguration ──▶ PATCH caBundle (only the
 *                                ▲   differing webhooks, behind a test op on
 *                                └── metadata.resourceVersion; a failed test or a
 *                                    409 reads it again)
 */
#include "webhook/certs.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "base/buf.h"
#include "base/b64.h"
#include "base/backoff.h"
#include "base/log.h"
#include "kube/kube.h"
#include "net/httpc.h"
#include "webhook/cabundle.h"
#include "webhook/certgen.h"

#define SERVER_ERROR_TRIES 4 /* 5xx answers of one step, after kube/'s own retries */
#define CONFLICT_TRIES 5     /* re-reads of the configuration after a lost race */
#define CREATE_RACE_TRIES 3  /* Secret re-reads after a 409 on create */
#define SECRET_MAX 65536     /* base64 of one PEM field; ours are < 1 KiB */
#define MWC "mutatingwebhookconfigurations"
#define MWC_GROUP "admissionregistration.k8s.io"
#define RBAC_HINT "(the certs Job's RBAC: manifests/webhook/certgen/rbac.yaml)"

enum step { STEP_GET_SECRET, STEP_CREATE_SECRET, STEP_GET_MWC, STEP_PATCH_MWC };

struct job {
    uv_loop_t loop;
    uv_timer_t timer; /* waits before a retried step */
    struct httpc *hc;
    struct kube *k;
    struct certs_opts o;
    char *dns[4];
    size_t ndns;
    enum step step;
    int server_errors, conflicts, create_races;
    struct certgen_pem pem; /* what the Secret holds (generated or read) */
    char *body;             /* the POST or PATCH body of the step */
    int patched;            /* webhooks whose caBundle the PATCH writes */
    int kept;               /* of those, how many keep the previous CA behind the new */
    int rc;                 /* exit status, -1 while running */
};

static void step_start(struct job *j);

/* ---- small helpers ---- */

static char *b64_encode(const char *s, size_t n)
{
    char *out = ra_b64_encode(s, n);

    if (!out) ra_oom();
    return out;
}

/* Decodes a []byte field of an API object (base/b64.h) into a
 * NUL-terminated malloc'd string; NULL if s is not valid base64 or longer
 * than SECRET_MAX. */
static char *b64_decode(const char *s, size_t *len)
{
    unsigned char *out = NULL;
    long n;

    if (strlen(s) > SECRET_MAX) return NULL;
    n = ra_b64_decode(s, &out);
    if (n == -ENOMEM) ra_oom();
    if (n < 0) return NULL;
    if (len) *len = (size_t)n;
    return (char *)out;
}

static void finish(struct job *j, int rc)
{
    j->rc = rc;
    uv_stop(&j->loop);
}

static int fail(struct job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct job *j, const char *fmt, ...)
{
    char msg[2048];
    RA_VSNPRINTF(msg, fmt);
    log_error("webhook certs: %s", msg);
    finish(j, 1);
    return 1;
}

/* "HTTP 403: <message> <hint>" for a failed answer (kube_resp.error). */
static const char *why(const struct kube_resp *r, char *buf, size_t len)
{
    static const char agent_hint[] = KUBE_RBAC_HINT; /* kube/'s, for the agent */
    const char *e = r->error ? r->error : "", *h;
    int n = (int)strlen(e);

    if (!r->ok) return r->error ? r->error : "no response";
    if (r->status == 403 && (h = strstr(e, agent_hint)) != NULL) n = (int)(h - e);
    snprintf(buf, len, "HTTP %ld: %.*s%s%s", r->status, n, e, r->status == 403 ? " " : "",
             r->status == 403 ? RBAC_HINT : "");
    return buf;
}

/* ---- the steps ---- */

static void on_retry_timer(uv_timer_t *t) { step_start(t->data); }

static void on_resp(void *ud, const struct kube_resp *r);

static void step_go(struct job *j, enum step s)
{
    j->step = s;
    j->server_errors = 0;
    step_start(j);
}

static void step_start(struct job *j)
{
    const char *ns = kube_namespace(j->k);
    char path[1024];
    struct kube_req req = {0};
    int rc;

    switch (j->step) {
    case STEP_GET_SECRET:
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets/%s", ns, j->o.secret);
        req = (struct kube_req){
            .verb = "get", .resource = "secrets", .group = "", .method = "GET", .path = path};
        break;
    case STEP_CREATE_SECRET:
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/secrets", ns);
        req = (struct kube_req){.verb = "create",
                                .resource = "secrets",
                                .group = "",
                                .method = "POST",
                                .path = path,
                                .content_type = "application/json",
                                .body = j->body,
                                .body_len = strlen(j->body)};
        break;
    case STEP_GET_MWC:
        snprintf(path, sizeof path, "/apis/%s/v1/%s/%s", MWC_GROUP, MWC, j->o.mwc);
        req = (struct kube_req){
            .verb = "get", .resource = MWC, .group = MWC_GROUP, .method = "GET", .path = path};
        break;
    case STEP_PATCH_MWC:
        snprintf(path, sizeof path, "/apis/%s/v1/%s/%s?fieldManager=reload-agent-webhook-certs",
                 MWC_GROUP, MWC, j->o.mwc);
        req = (struct kube_req){.verb = "patch",
                                .resource = MWC,
                                .group = MWC_GROUP,
                                .method = "PATCH",
                                .path = path,
                                .content_type = "application/json-patch+json",
                                .body = j->body,
                                .body_len = strlen(j->body)};
        break;
    }
    rc = kube_request(j->k, &req, on_resp, j);
    if (rc < 0) fail(j, "cannot start the request %s: %s", path, strerror(-rc));
}

/* A TLS Secret's three fields, decoded; -EINVAL with the reason in err. */
static int secret_read(const cJSON *obj, struct certgen_pem *p, char *err, size_t errlen)
{
    static const char *const keys[] = {"tls.crt", "tls.key", "ca.crt"};
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(obj, "data");
    char **dst[] = {&p->tls_crt, &p->tls_key, &p->ca_crt};

    for (size_t i = 0; i < 3; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(data, keys[i]);

        if (!cJSON_IsString(v) || !v->valuestring[0])
            return ra_errf(err, errlen, -EINVAL, "it has no data.%s", keys[i]);
        *dst[i] = b64_decode(v->valuestring, NULL);
        if (!*dst[i])
            return ra_errf(err, errlen, -EINVAL, "its data.%s is not valid base64", keys[i]);
    }
    return 0;
}

static void secret_got(struct job *j, const struct kube_resp *r)
{
    cJSON *obj = cJSON_ParseWithLength(r->body, r->body_len);
    char err[512];
    time_t na = 0, now = time(NULL);
    int rc;

    if (!obj) {
        fail(j, "Secret %s/%s: the API answered 200 with a body that is not JSON",
             kube_namespace(j->k), j->o.secret);
        return;
    }
    certgen_pem_free(&j->pem);
    rc = secret_read(obj, &j->pem, err, sizeof err);
    cJSON_Delete(obj);
    if (rc == 0)
        rc =
            certgen_check(&j->pem, (const char *const *)j->dns, j->ndns, now, &na, err, sizeof err);
    if (rc < 0) {
        fail(j,
             "Secret %s/%s exists but cannot serve the webhook: %s (delete it and run this job "
             "again to create a new one)",
             kube_namespace(j->k), j->o.secret, err);
        return;
    }
    if (na - now < CERTGEN_WARN_S)
        log_warn("webhook certs: the certificate in Secret %s/%s expires in %lld days; delete "
                 "the Secret and run this job again to renew it",
                 kube_namespace(j->k), j->o.secret, (long long)((na - now) / 86400));
    log_info("webhook certs: Secret %s/%s holds a valid certificate for %s (kept)",
             kube_namespace(j->k), j->o.secret, j->dns[2]);
    if (!j->o.mwc) {
        finish(j, 0);
        return;
    }
    step_go(j, STEP_GET_MWC);
}

static void secret_create(struct job *j)
{
    char err[512];
    cJSON *s, *meta, *labels, *data;
    char *b[3];
    int rc;

    certgen_pem_free(&j->pem);
    rc = certgen_generate((const char *const *)j->dns, j->ndns, j->o.validity_s, time(NULL),
                          &j->pem, err, sizeof err);
    if (rc < 0) {
        fail(j, "cannot create the certificates: %s", err);
        return;
    }
    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "apiVersion", "v1");
    cJSON_AddStringToObject(s, "kind", "Secret");
    meta = cJSON_AddObjectToObject(s, "metadata");
    cJSON_AddStringToObject(meta, "name", j->o.secret);
    cJSON_AddStringToObject(meta, "namespace", kube_namespace(j->k));
    labels = cJSON_AddObjectToObject(meta, "labels");
    cJSON_AddStringToObject(labels, "app.kubernetes.io/name", "reload-agent-webhook");
    cJSON_AddStringToObject(labels, "app.kubernetes.io/managed-by", "reload-agent-webhook-certs");
    cJSON_AddStringToObject(s, "type", "kubernetes.io/tls");
    data = cJSON_AddObjectToObject(s, "data");
    b[0] = b64_encode(j->pem.tls_crt, strlen(j->pem.tls_crt));
    b[1] = b64_encode(j->pem.tls_key, strlen(j->pem.tls_key));
    b[2] = b64_encode(j->pem.ca_crt, strlen(j->pem.ca_crt));
    cJSON_AddStringToObject(data, "tls.crt", b[0]);
    cJSON_AddStringToObject(data, "tls.key", b[1]);
    cJSON_AddStringToObject(data, "ca.crt", b[2]);
    explicit_bzero(b[1], strlen(b[1]));
    for (int i = 0; i < 3; i++) free(b[i]);
    if (!meta || !labels || !data) ra_oom();
    free(j->body);
    j->body = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    if (!j->body) ra_oom();
    step_go(j, STEP_CREATE_SECRET);
}

static void secret_created(struct job *j)
{
    explicit_bzero(j->body, strlen(j->body)); /* it held the key */
    log_info("webhook certs: created Secret %s/%s (type kubernetes.io/tls: a new CA and a "
             "serving certificate for %s)",
             kube_namespace(j->k), j->o.secret, j->dns[2]);
    if (!j->o.mwc) {
        finish(j, 0);
        return;
    }
    step_go(j, STEP_GET_MWC);
}

/* Builds the JSON patch for the webhooks whose caBundle is not current
 * (webhook/cabundle.h: the new CA, the previous one kept behind it); sets
 * j->body (NULL when all are current), j->patched and j->kept. */
static int mwc_plan(struct job *j, const cJSON *obj, char *err, size_t errlen)
{
    const cJSON *hooks = cJSON_GetObjectItemCaseSensitive(obj, "webhooks");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion");
    cJSON *ops;
    int i = 0;

    free(j->body);
    j->body = NULL;
    j->patched = j->kept = 0;
    if (!cJSON_IsString(rv))
        return ra_errf(err, errlen, -EINVAL, "it has no metadata.resourceVersion");
    if (hooks && !cJSON_IsArray(hooks))
        return ra_errf(err, errlen, -EINVAL, "its webhooks is not a list");
    ops = cJSON_CreateArray();
    if (!ops) ra_oom();
    {
        cJSON *t = cJSON_CreateObject();

        cJSON_AddStringToObject(t, "op", "test");
        cJSON_AddStringToObject(t, "path", "/metadata/resourceVersion");
        cJSON_AddStringToObject(t, "value", rv->valuestring);
        cJSON_AddItemToArray(ops, t);
    }
    for (const cJSON *h = hooks ? hooks->child : NULL; h; h = h->next, i++) {
        const cJSON *cc = cJSON_GetObjectItemCaseSensitive(h, "clientConfig");
        const cJSON *cur = cJSON_GetObjectItemCaseSensitive(cc, "caBundle");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(h, "name");
        char *have = NULL, *want, *want_b64, path[64];
        size_t have_len = 0;
        int rc, kept;

        if (!cJSON_IsObject(cc)) {
            cJSON_Delete(ops);
            return ra_errf(err, errlen, -EINVAL, "webhooks[%d] has no clientConfig", i);
        }
        if (cJSON_IsString(cur)) have = b64_decode(cur->valuestring, &have_len);
        rc = cabundle_plan(have, have_len, j->pem.ca_crt, j->o.keep_previous_ca, time(NULL), &want,
                           &kept, err, errlen);
        free(have);
        if (rc < 0) {
            cJSON_Delete(ops);
            return rc;
        }
        if (rc == 0) continue;
        want_b64 = b64_encode(want, strlen(want));
        free(want);
        snprintf(path, sizeof path, "/webhooks/%d/clientConfig/caBundle", i);
        {
            cJSON *op = cJSON_CreateObject();

            cJSON_AddStringToObject(op, "op", "add"); /* add replaces an existing member */
            cJSON_AddStringToObject(op, "path", path);
            cJSON_AddStringToObject(op, "value", want_b64);
            cJSON_AddItemToArray(ops, op);
        }
        free(want_b64);
        if (kept) j->kept++;
        log_debug("webhook certs: webhook %s (webhooks[%d]) needs the caBundle",
                  cJSON_IsString(name) ? name->valuestring : "?", i);
        j->patched++;
    }
    if (j->patched) {
        j->body = cJSON_PrintUnformatted(ops);
        if (!j->body) ra_oom();
    }
    cJSON_Delete(ops);
    return i;
}

static void mwc_got(struct job *j, const struct kube_resp *r)
{
    cJSON *obj = cJSON_ParseWithLength(r->body, r->body_len);
    char err[256];
    int n;

    if (!obj) {
        fail(j,
             "MutatingWebhookConfiguration %s: the API answered 200 with a body that is not "
             "JSON",
             j->o.mwc);
        return;
    }
    n = mwc_plan(j, obj, err, sizeof err);
    cJSON_Delete(obj);
    if (n < 0) {
        fail(j, "MutatingWebhookConfiguration %s: %s", j->o.mwc, err);
        return;
    }
    if (n == 0)
        log_warn("webhook certs: MutatingWebhookConfiguration %s has no webhooks", j->o.mwc);
    if (!j->body) {
        log_info("webhook certs: MutatingWebhookConfiguration %s: the caBundle of its %d "
                 "webhook(s) is current; nothing written",
                 j->o.mwc, n);
        finish(j, 0);
        return;
    }
    step_go(j, STEP_PATCH_MWC);
}

static int is_conflict(const struct kube_resp *r)
{
    /* 409, or 422 from a failed test op (the configuration changed since
     * it was read) */
    return r->status == 409 || (r->status == 422 && r->error && strstr(r->error, "test"));
}

static void on_resp(void *ud, const struct kube_resp *r)
{
    struct job *j = ud;
    const char *ns = kube_namespace(j->k);
    char buf[1536];

    /* a 5xx, or no answer at all (a request that hung until its timeout:
     * kube/ retries only failures to connect), is tried again */
    if ((!r->ok || r->status >= 500) && j->server_errors < SERVER_ERROR_TRIES - 1) {
        static const struct backoff policy = {500, 4000, BACKOFF_JITTER_SPREAD};
        uint64_t ms = backoff_next(&policy, ++j->server_errors, ra_rng_process());

        if (r->ok)
            log_warn("webhook certs: HTTP %ld (%s); retrying in %llu ms", r->status,
                     r->error ? r->error : "", (unsigned long long)ms);
        else
            log_warn("webhook certs: no answer (%s); retrying in %llu ms",
                     r->error ? r->error : "no response", (unsigned long long)ms);
        uv_timer_start(&j->timer, on_retry_timer, ms, 0);
        return;
    }
    switch (j->step) {
    case STEP_GET_SECRET:
        if (r->ok && r->status == 200) {
            secret_got(j, r);
        } else if (r->ok && r->status == 404 && j->create_races < CREATE_RACE_TRIES) {
            log_info("webhook certs: Secret %s/%s does not exist; creating it", ns, j->o.secret);
            secret_create(j);
        } else {
            fail(j, "cannot get Secret %s/%s: %s", ns, j->o.secret, why(r, buf, sizeof buf));
        }
        return;
    case STEP_CREATE_SECRET:
        if (r->ok && (r->status == 201 || r->status == 200)) {
            secret_created(j);
        } else if (r->ok && r->status == 409 && ++j->create_races <= CREATE_RACE_TRIES) {
            log_info("webhook certs: Secret %s/%s was created meanwhile (409 AlreadyExists); "
                     "using the stored one",
                     ns, j->o.secret);
            certgen_pem_free(&j->pem);
            step_go(j, STEP_GET_SECRET);
        } else {
            fail(j, "cannot create Secret %s/%s: %s", ns, j->o.secret, why(r, buf, sizeof buf));
        }
        return;
    case STEP_GET_MWC:
        if (r->ok && r->status == 200)
            mwc_got(j, r);
        else
            fail(j, "cannot get MutatingWebhookConfiguration %s: %s", j->o.mwc,
                 why(r, buf, sizeof buf));
        return;
    case STEP_PATCH_MWC:
        if (r->ok && r->status == 200) {
            log_info("webhook certs: MutatingWebhookConfiguration %s: wrote the caBundle of %d "
                     "webhook(s)%s",
                     j->o.mwc, j->patched,
                     j->kept ? "; the previous CA stays behind the new one until the next "
                               "renewal, so replicas still serving its certificate verify"
                             : "");
            finish(j, 0);
        } else if (r->ok && is_conflict(r) && ++j->conflicts < CONFLICT_TRIES) {
            log_info("webhook certs: MutatingWebhookConfiguration %s changed meanwhile (HTTP "
                     "%ld); reading it again",
                     j->o.mwc, r->status);
            step_go(j, STEP_GET_MWC);
        } else {
            fail(j, "cannot patch MutatingWebhookConfiguration %s: %s", j->o.mwc,
                 why(r, buf, sizeof buf));
        }
        return;
    }
}

/* ---- the command ---- */

static void on_close(uv_handle_t *h) { (void)h; }

int webhook_certs_run(const struct certs_opts *o)
{
    struct job *j = calloc(1, sizeof *j);
    struct kube_config kc = {0};
    char err[512];
    int rc;

    if (!j) ra_oom();
    j->rc = -1;
    j->o = *o;
    uv_loop_init(&j->loop);
    uv_timer_init(&j->loop, &j->timer);
    j->timer.data = j;
    if (httpc_create(&j->loop, &j->hc) < 0) {
        log_error("webhook certs: cannot start the HTTP client");
        rc = 1;
        goto out;
    }
    kc.api = j->o.api;
    kc.token_file = j->o.token_file;
    kc.ca_file = j->o.ca_file;
    kc.namespace_ = j->o.ns;
    /* kube/ wants a pod name (for the agent's own pod); this command never
     * uses it, so a Job without POD_NAME gets a fixed stand-in. */
    kc.pod_name = getenv("POD_NAME") && getenv("POD_NAME")[0] ? NULL : "reload-agent-webhook-certs";
    if (kube_create(&j->loop, j->hc, &kc, &j->k, err, sizeof err) < 0) {
        log_error("webhook certs: %s", err);
        rc = 1;
        goto out;
    }
    j->ndns = certgen_dns_names(j->o.service, kube_namespace(j->k), j->dns);
    step_go(j, STEP_GET_SECRET);
    if (j->rc < 0) uv_run(&j->loop, UV_RUN_DEFAULT);
    rc = j->rc < 0 ? 1 : j->rc;
out:
    kube_destroy(j->k);
    if (j->hc) httpc_close(j->hc, NULL, NULL);
    uv_close((uv_handle_t *)&j->timer, on_close);
    uv_run(&j->loop, UV_RUN_DEFAULT);
    uv_loop_close(&j->loop);
    for (size_t i = 0; i < j->ndns; i++) free(j->dns[i]);
    certgen_pem_free(&j->pem);
    if (j->body) explicit_bzero(j->body, strlen(j->body));
    free(j->body);
    free(j);
    return rc;
}
