/*
 * kube.c - the asynchronous Kubernetes API client (contract in kube.h).
 *
 * Each kube_request becomes a struct kube_call that owns a copy of the
 * request and one uv_timer_t used to wait between attempts. An attempt is
 * one httpc transfer; its result either ends the call (the caller's callback
 * runs) or arms the timer for the next attempt (connection failure, 429,
 * 503, 500 with Retry-After, or a first 401 after which the token is
 * re-read). A call is unlinked from its client before its callback runs and
 * is freed in the timer's close callback, so callbacks may destroy the
 * client and kube_destroy never frees memory libuv still references.
 *
 * The bearer token is cached with the loop time it was read; it is handed
 * to httpc only as the Authorization header and never logged.
 */
#include "kube/kube.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/backoff.h"
#include "base/log.h"
#include "base/text.h"
#include "kube/k8sname.h"

#define TOKEN_MAX 16384 /* bytes; a bound service-account JWT is ~1 KiB */
#define BACKOFF_BASE_MS 200
#define BACKOFF_CAP_MS 5000
#define RETRY_AFTER_CAP_S 60
#define MESSAGE_MAX 600 /* longest API message quoted in an error */

struct kube_call {
    struct kube *k;
    uv_timer_t timer;        /* waits between attempts */
    struct httpc_xfer *xfer; /* attempt in flight, or NULL */
    kube_cb cb;
    void (*on_cancel)(void *ud);
    void *ud;
    char *verb, *resource, *group, *method, *path, *content_type, *body;
    size_t body_len;
    enum kube_role role;
    int tries, max_tries;
    uint64_t timeout_ms;
    int auth_retried;   /* a 401 was already answered by a re-read */
    unsigned token_gen; /* generation of the token the attempt used */
    struct kube_call *prev, *next;
};

struct kube {
    uv_loop_t *loop;
    struct httpc *hc;
    char *base_url, *namespace_, *pod_name, *token_path, *ca_path;
    char *token;
    uint64_t token_at;  /* uv_now() when read */
    unsigned token_gen; /* bumped on each successful read */
    int token_stale;
    uint64_t timeout_ms;
    struct kube_call *calls;
    struct kube_counters counters;
    struct kube_waiter *waiters; /* waiting for the next answer */
};

/* ---- small helpers ---- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static const char *nonempty(const char *s) { return s && s[0] ? s : NULL; }

/* Reads a small regular file whole (never blocking on a FIFO or device:
 * base/file.h), trims surrounding whitespace. Returns 0 and a malloc'd
 * string, or -errno (-EFBIG if longer than max, -EINVAL/-EISDIR if not a
 * regular file) with err set. */
static int read_trimmed(const char *path, size_t max, char **out, char *err, size_t errlen)
{
    char *buf, *s;
    size_t len;
    int r = ra_read_file(path, max, &buf, &len, err, errlen);

    if (r == -ENOMEM) ra_oom();
    if (r != 0) return r;
    for (s = buf; is_blank(*s); s++, len--) {
    }
    while (len > 0 && is_blank(s[len - 1])) len--;
    memmove(buf, s, len);
    buf[len] = '\0';
    *out = buf;
    return 0;
}

/* Reads and checks the token file. Returns 0 and a malloc'd token or <0. */
static int read_token(const char *path, char **out, char *err, size_t errlen)
{
    char *tok;
    size_t i;
    int r = read_trimmed(path, TOKEN_MAX, &tok, err, errlen);

    if (r < 0) return r;
    if (!tok[0]) {
        snprintf(err, errlen, "the token file %s is empty", path);
        free(tok);
        return -EINVAL;
    }
    for (i = 0; tok[i]; i++) {
        unsigned char ch = (unsigned char)tok[i];

        if (ch < 0x21 || ch == 0x7f) {
            snprintf(err, errlen, "the token file %s contains whitespace or control characters",
                     path);
            explicit_bzero(tok, strlen(tok));
            free(tok);
            return -EINVAL;
        }
    }
    *out = tok;
    return 0;
}

static void token_set(struct kube *k, char *tok)
{
    if (k->token) {
        explicit_bzero(k->token, strlen(k->token));
        free(k->token);
    }
    k->token = tok;
    k->token_at = uv_now(k->loop);
    k->token_gen++;
    k->token_stale = 0;
}

/* Re-reads the token when stale or older than a minute. A failed re-read
 * keeps the previous token (as client-go does) and is logged. */
static void token_refresh(struct kube *k)
{
    char err[512], *tok;

    if (!k->token_stale && uv_now(k->loop) - k->token_at < KUBE_TOKEN_MAX_AGE_MS) return;
    if (read_token(k->token_path, &tok, err, sizeof err) == 0) {
        token_set(k, tok);
        return;
    }
    log_warn("kube: %s; keeping the previous token", err);
    k->token_at = uv_now(k->loop);
    k->token_stale = 0;
}

void kube__wait_answer(struct kube *k, struct kube_waiter *w)
{
    if (w->pprev) return;
    w->next = k->waiters;
    if (w->next) w->next->pprev = &w->next;
    w->pprev = &k->waiters;
    k->waiters = w;
}

void kube__unwait(struct kube_waiter *w)
{
    if (!w->pprev) return;
    *w->pprev = w->next;
    if (w->next) w->next->pprev = w->pprev;
    w->next = NULL;
    w->pprev = NULL;
}

/* Every finished attempt: the counters; an answer (any status) wakes the
 * waiters, each once (a waiter's cb may wait again: it waits for the next). */
static void count_code(struct kube *k, long code)
{
    if (k->counters.response) k->counters.response(k->counters.ud, code);
    if (code <= 0 || !k->waiters) return;
    struct kube_waiter *list = k->waiters;
    list->pprev = &list;
    k->waiters = NULL;
    while (list) {
        struct kube_waiter *w = list;
        kube__unwait(w);
        w->cb(w);
    }
}

void kube_set_counters(struct kube *k, const struct kube_counters *c)
{
    if (c)
        k->counters = *c;
    else
        memset(&k->counters, 0, sizeof k->counters);
}

void kube__count_suppressed(struct kube *k)
{
    if (k->counters.event_suppressed) k->counters.event_suppressed(k->counters.ud);
}

/* ---- configuration ---- */

static int resolve_base(const struct kube_config *cfg, char **out, char *err, size_t errlen)
{
    const char *api = nonempty(cfg->api), *host, *port;
    size_t n;

    if (api) {
        if (strncmp(api, "https://", 8) != 0 || !api[8]) {
            snprintf(err, errlen,
                     "--kube-api %s: the URL must start with https:// (the token "
                     "is never sent unencrypted)",
                     api);
            return -EINVAL;
        }
        *out = ra_strdup(api);
        n = strlen(*out);
        while (n > 8 && (*out)[n - 1] == '/') (*out)[--n] = '\0';
        return 0;
    }
    host = nonempty(getenv("KUBERNETES_SERVICE_HOST"));
    port = nonempty(getenv("KUBERNETES_SERVICE_PORT"));
    if (!host || !port) {
        snprintf(err, errlen,
                 "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are "
                 "not set; use --kube-api");
        return -EINVAL;
    }
    if (strchr(host, ':') && host[0] != '[')
        *out = ra_asprintf("https://[%s]:%s", host, port);
    else
        *out = ra_asprintf("https://%s:%s", host, port);
    return 0;
}

static int resolve_namespace(const struct kube_config *cfg, const char *sa_dir, char **out,
                             char *err, size_t errlen)
{
    const char *ns = nonempty(cfg->namespace_);
    char *path, why[384];
    int r;

    if (!ns) ns = nonempty(getenv("POD_NAMESPACE"));
    if (ns) {
        *out = ra_strdup(ns);
    } else {
        path = ra_asprintf("%s/namespace", sa_dir);
        r = read_trimmed(path, 253, out, why, sizeof why);
        free(path);
        if (r < 0) {
            snprintf(err, errlen, "namespace unknown: set --namespace or POD_NAMESPACE (%s)", why);
            return -EINVAL;
        }
    }
    if (!k8s_is_dns1123_label(*out)) {
        snprintf(err, errlen, "namespace \"%.253s\" is not a valid Kubernetes namespace name",
                 *out);
        free(*out);
        *out = NULL;
        return -EINVAL;
    }
    return 0;
}

static int resolve_file(const char *given, const char *sa_dir, const char *base, const char *what,
                        char **out, char *err, size_t errlen)
{
    char *path = nonempty(given) ? ra_strdup(given) : ra_asprintf("%s/%s", sa_dir, base);

    if (access(path, R_OK) != 0) {
        snprintf(err, errlen, "the %s %s is not readable: %s", what, path, strerror(errno));
        free(path);
        return -EINVAL;
    }
    *out = path;
    return 0;
}

int kube_create(uv_loop_t *loop, struct httpc *hc, const struct kube_config *cfg, struct kube **out,
                char *err, size_t errlen)
{
    const char *sa_dir = nonempty(cfg->sa_dir) ? cfg->sa_dir : KUBE_SA_DIR;
    const char *pod = nonempty(cfg->pod_name);
    struct kube *k = calloc(1, sizeof *k);
    char *tok;
    int r;

    if (!k) ra_oom();
    k->loop = loop;
    k->hc = hc;
    k->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : KUBE_TIMEOUT_MS;
    if (!pod) pod = nonempty(getenv("POD_NAME"));
    r = resolve_base(cfg, &k->base_url, err, errlen);
    if (r == 0) r = resolve_namespace(cfg, sa_dir, &k->namespace_, err, errlen);
    if (r == 0 && !pod) {
        snprintf(err, errlen,
                 "pod name unknown: set --pod-name or the POD_NAME environment "
                 "variable (downward API metadata.name)");
        r = -EINVAL;
    }
    if (r == 0 && !k8s_is_dns1123_subdomain(pod)) {
        snprintf(err, errlen, "pod name \"%.253s\" is not a valid Kubernetes object name", pod);
        r = -EINVAL;
    }
    if (r == 0) k->pod_name = ra_strdup(pod);
    if (r == 0)
        r = resolve_file(cfg->token_file, sa_dir, "token", "token file", &k->token_path, err,
                         errlen);
    if (r == 0)
        r = resolve_file(cfg->ca_file, sa_dir, "ca.crt", "CA file", &k->ca_path, err, errlen);
    if (r == 0 && (r = read_token(k->token_path, &tok, err, errlen)) == 0) token_set(k, tok);
    if (r != 0) {
        kube_destroy(k);
        return r < 0 ? r : -EINVAL;
    }
    *out = k;
    return 0;
}

const char *kube_namespace(const struct kube *k) { return k->namespace_; }
const char *kube_pod_name(const struct kube *k) { return k->pod_name; }
const char *kube_token_path(const struct kube *k) { return k->token_path; }
const char *kube_base_url(const struct kube *k) { return k->base_url; }

void kube_token_stale(struct kube *k) { k->token_stale = 1; }

/* ---- calls ---- */

static void call_free_cb(uv_handle_t *h)
{
    struct kube_call *c = h->data;

    free(c->verb);
    free(c->resource);
    free(c->group);
    free(c->method);
    free(c->path);
    free(c->content_type);
    free(c->body);
    free(c);
}

static void call_unlink(struct kube_call *c)
{
    struct kube *k = c->k;

    if (c->prev)
        c->prev->next = c->next;
    else
        k->calls = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Ends the call: the callback runs once, then the call is freed. */
static void call_finish(struct kube_call *c, const struct kube_resp *r)
{
    call_unlink(c); /* first: the callback may destroy the client */
    c->cb(c->ud, r);
    uv_close((uv_handle_t *)&c->timer, call_free_cb);
}

static void finish_error(struct kube_call *c, const char *msg)
{
    struct kube_resp r = {.ok = 0, .body = "", .error = msg, .tries = c->tries};

    call_finish(c, &r);
}

/* Copies s[0..n) into out as one line: only what comes before its first
 * newline (the length rule: an API message's first line says what went
 * wrong), without trailing blanks, under the one-line policy of
 * base/text.h, at most MESSAGE_MAX bytes. */
static void one_line(char *out, size_t outlen, const char *s, size_t n)
{
    const char *nl = memchr(s, '\n', n);

    if (nl) n = (size_t)(nl - s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    ra_one_linen(out, outlen < MESSAGE_MAX + 1 ? outlen : MESSAGE_MAX + 1, s, n);
}

/* The Status object in a response body, or NULL. */
static cJSON *parse_status(const struct httpc_result *res)
{
    cJSON *j;

    if (res->body_len == 0 || res->body[0] != '{') return NULL;
    j = cJSON_ParseWithLength(res->body, res->body_len);
    if (j && !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        j = NULL;
    }
    return j;
}

/* Seconds to wait before retrying, from the Retry-After header or the
 * Status body's details.retryAfterSeconds; -1 when neither is given. */
static int64_t retry_after(const struct httpc_result *res, const cJSON *status)
{
    const cJSON *ra = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(status, "details"), "retryAfterSeconds");
    int64_t s = res->retry_after_s;

    if (s < 0 && cJSON_IsNumber(ra) && ra->valuedouble >= 0) s = (int64_t)ra->valuedouble;
    if (s > RETRY_AFTER_CAP_S) s = RETRY_AFTER_CAP_S;
    return s;
}

/* 200 ms x 2^(tries-1), capped at 5 s, then scaled by a random 75..125 %. */
static uint64_t backoff_ms(struct kube *k, int tries)
{
    static const struct backoff policy = {BACKOFF_BASE_MS, BACKOFF_CAP_MS, BACKOFF_JITTER_SPREAD};
    (void)k;
    return backoff_next(&policy, tries, ra_rng_process());
}

/* Transport failures worth another attempt: nothing reached the server, or
 * the connection broke. Timeouts and TLS verification failures are final. */
static int is_transient(int curl_code)
{
    switch (curl_code) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: return 1;
    default: return 0;
    }
}

static int is_tls_verify(int curl_code)
{
    return curl_code == CURLE_PEER_FAILED_VERIFICATION || curl_code == CURLE_SSL_CACERT_BADFILE;
}

/* The fast-sync hint: the Role inject writes for the workload (-o rbac
 * prints it alone), else the template and its binding; the policy. */
static void rbac_hint_fast_sync(const char *ns, int nslen, const char *sa, int salen, char *out,
                                size_t outlen)
{
    if (!ns) {
        snprintf(out, outlen,
                 KUBE_RBAC_HINT_FAST_SYNC ": `reload-agent inject -o rbac` writes it and its "
                                          "RoleBinding for the workload; and "
                                          "manifests/fast-sync/policy.yaml once per cluster)");
        return;
    }
    snprintf(out, outlen,
             KUBE_RBAC_HINT_FAST_SYNC
             ": `reload-agent inject -o rbac` writes it for the workload; or kubectl -n %.*s "
             "apply -f manifests/fast-sync/role.yaml && kubectl -n %.*s create rolebinding "
             "reload-agent-fast-sync --role=reload-agent-fast-sync --serviceaccount=%.*s; and "
             "manifests/fast-sync/policy.yaml once per cluster)",
             nslen, ns, nslen, ns, salen, sa);
}

/* The RBAC hint for a 403 whose message (one line) names the refused user:
 * the Role and, for a ServiceAccount, the exact binding command. */
static void rbac_hint(const char *msg, enum kube_role role, char *out, size_t outlen)
{
    static const char sa[] = "User \"system:serviceaccount:";
    const char *p = strstr(msg, sa), *q = p ? strchr(p + sizeof sa - 1, '"') : NULL;
    if (p) p += sizeof sa - 1;
    const char *colon = p && q ? memchr(p, ':', (size_t)(q - p)) : NULL;
    int known = colon && colon > p && q - colon > 1 && q - p < 320;
    if (role == KUBE_ROLE_STAGE)
        snprintf(out, outlen,
                 KUBE_RBAC_HINT_STAGE ": `reload-agent inject -o rbac` writes it, its RoleBinding "
                                      "and the Lease for the workload; docs/staging.md)");
    else if (role == KUBE_ROLE_FAST_SYNC)
        rbac_hint_fast_sync(known ? p : NULL, known ? (int)(colon - p) : 0, p,
                            known ? (int)(q - p) : 0, out, outlen);
    else if (known)
        snprintf(out, outlen,
                 KUBE_RBAC_HINT ": kubectl -n %.*s apply -f manifests/role.yaml && kubectl -n %.*s "
                                "create rolebinding reload-agent --role=reload-agent "
                                "--serviceaccount=%.*s)",
                 (int)(colon - p), p, (int)(colon - p), p, (int)(q - p), p);
    else
        snprintf(out, outlen, KUBE_RBAC_HINT " and bind it to the agent's ServiceAccount)");
}

/* Builds the one-line error for a final HTTP status >= 400 of the request
 * described by verb ... path (status: the parsed Status body, or NULL). */
static void format_error(const struct kube *k, const char *verb, const char *resource,
                         const char *group, const char *method, const char *path,
                         enum kube_role role, int tries, long code, const char *body,
                         size_t body_len, const cJSON *status, char *out, size_t outlen)
{
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(status, "message");
    char msg[MESSAGE_MAX + 1];
    size_t n;

    if (code == 401) {
        snprintf(out, outlen, "Unauthorized: the token in %s was rejected", k->token_path);
        return;
    }
    if (cJSON_IsString(m) && m->valuestring[0])
        one_line(msg, sizeof msg, m->valuestring, strlen(m->valuestring));
    else
        one_line(msg, sizeof msg, body, body_len);
    if (!msg[0]) snprintf(msg, sizeof msg, "HTTP %ld with an empty body", code);
    snprintf(out, outlen, "%s", msg);
    n = strlen(out);
    char hint[1024];
    if (code == 403) rbac_hint(msg, role, hint, sizeof hint);
    if (code == 403 && verb && resource)
        snprintf(out + n, outlen - n,
                 "; RBAC: the service account needs verb \"%s\" on resource \"%s\" in API group "
                 "\"%s\"%s",
                 verb, resource, group ? group : "", hint);
    else if (code == 403)
        snprintf(out + n, outlen - n, "; RBAC: the service account may not %s %s%s", method, path,
                 hint);
    else if (tries >= KUBE_MAX_TRIES && (code == 429 || code >= 500))
        snprintf(out + n, outlen - n, " (gave up after %d attempts)", tries);
}

static void http_error(const struct kube_call *c, const struct httpc_result *res,
                       const cJSON *status, char *out, size_t outlen)
{
    format_error(c->k, c->verb, c->resource, c->group, c->method, c->path, c->role, c->tries,
                 res->status, res->body, res->body_len, status, out, outlen);
}

void kube__http_error(const struct kube *k, const struct kube_req *req, long code, const char *body,
                      size_t body_len, char *out, size_t outlen)
{
    cJSON *status = NULL;

    if (body_len > 0 && body[0] == '{') status = cJSON_ParseWithLength(body, body_len);
    if (status && !cJSON_IsObject(status)) {
        cJSON_Delete(status);
        status = NULL;
    }
    format_error(k, nonempty(req->verb), nonempty(req->resource), req->group, req->method,
                 req->path, req->role, 1, code, body, body_len, status, out, outlen);
    cJSON_Delete(status);
}

const char *kube__token(struct kube *k, unsigned *gen)
{
    token_refresh(k);
    if (gen) *gen = k->token_gen;
    return k->token;
}

void kube__token_rejected(struct kube *k, unsigned gen)
{
    if (gen == k->token_gen) k->token_stale = 1;
}

const char *kube__ca_path(const struct kube *k) { return k->ca_path; }
uv_loop_t *kube__loop(const struct kube *k) { return k->loop; }
struct httpc *kube__httpc(const struct kube *k) { return k->hc; }
void kube__count_response(struct kube *k, long code) { count_code(k, code); }

static int attempt_start(struct kube_call *c);

static void on_retry_timer(uv_timer_t *t)
{
    struct kube_call *c = t->data;
    int r = attempt_start(c);
    char msg[128];

    if (r < 0) {
        snprintf(msg, sizeof msg, "cannot start the request: %s", strerror(-r));
        finish_error(c, msg);
    }
}

static void retry_later(struct kube_call *c, uint64_t delay_ms)
{
    log_debug("kube %s %s: attempt %d failed, retrying in %llu ms", c->method, c->path, c->tries,
              (unsigned long long)delay_ms);
    uv_timer_start(&c->timer, on_retry_timer, delay_ms, 0);
}

static void on_attempt_done(void *ud, const struct httpc_result *res)
{
    struct kube_call *c = ud;
    struct kube *k = c->k;
    char err[1536 + MESSAGE_MAX];
    cJSON *status = NULL;
    int64_t ra = -1;

    c->xfer = NULL;
    count_code(k, res->ok ? res->status : 0);
    log_debug("kube %s %s -> %ld (attempt %d)", c->method, c->path, res->ok ? res->status : 0L,
              c->tries);
    if (!res->ok) {
        if (is_transient(res->curl_code) && c->tries < c->max_tries) {
            retry_later(c, backoff_ms(k, c->tries));
            return;
        }
        if (is_tls_verify(res->curl_code))
            snprintf(err, sizeof err, "TLS verification against the CA file %s failed: %s",
                     k->ca_path, res->error);
        else if (is_transient(res->curl_code) && c->max_tries > 1)
            snprintf(err, sizeof err, "%s (gave up after %d attempts)", res->error, c->tries);
        else
            snprintf(err, sizeof err, "%s", res->error);
        finish_error(c, err);
        return;
    }
    if (res->status == 401 && !c->auth_retried) {
        c->auth_retried = 1;
        if (c->token_gen == k->token_gen) k->token_stale = 1; /* else already re-read */
        retry_later(c, 0);
        return;
    }
    if (res->status >= 400) status = parse_status(res);
    if (res->status == 429 || res->status == 503 || res->status == 500)
        ra = retry_after(res, status);
    if (c->tries < c->max_tries &&
        (res->status == 429 || res->status == 503 || (res->status == 500 && ra >= 0))) {
        cJSON_Delete(status);
        retry_later(c, ra >= 0 ? (uint64_t)ra * 1000 : backoff_ms(k, c->tries));
        return;
    }
    {
        struct kube_resp r = {.ok = 1,
                              .status = res->status,
                              .body = res->body,
                              .body_len = res->body_len,
                              .tries = c->tries};

        if (res->status >= 400) {
            http_error(c, res, status, err, sizeof err);
            r.error = err;
        }
        cJSON_Delete(status);
        call_finish(c, &r);
    }
}

static int attempt_start(struct kube_call *c)
{
    struct kube *k = c->k;
    char *url = ra_asprintf("%s%s", k->base_url, c->path);
    char *ctype = c->content_type ? ra_asprintf("Content-Type: %s", c->content_type) : NULL;
    const char *headers[] = {"Accept: application/json", "User-Agent: reload-agent", ctype};
    struct httpc_req req = {
        .method = c->method,
        .url = url,
        .headers = headers,
        .nheaders = ctype ? 3 : 2,
        .body = c->body,
        .body_len = c->body_len,
        .timeout_ms = c->timeout_ms ? c->timeout_ms : k->timeout_ms,
        .ca_file = k->ca_path,
        .whole_body = 1, /* a cut JSON reply is an error, not a reply */
    };
    int r;

    token_refresh(k);
    req.bearer_token = k->token;
    c->token_gen = k->token_gen;
    c->tries++;
    r = httpc_request(k->hc, &req, on_attempt_done, c, &c->xfer);
    free(url);
    free(ctype);
    return r;
}

int kube_request(struct kube *k, const struct kube_req *req, kube_cb cb, void *ud)
{
    struct kube_call *c;
    int r;

    if (!k || !req || !cb || !nonempty(req->method) || !req->path || req->path[0] != '/')
        return -EINVAL;
    if (req->body_len > 0 && !req->body) return -EINVAL;
    c = calloc(1, sizeof *c);
    if (!c) ra_oom();
    c->k = k;
    c->cb = cb;
    c->on_cancel = req->on_cancel;
    c->ud = ud;
    c->verb = ra_strdup(nonempty(req->verb));
    c->role = req->role;
    c->max_tries = req->max_tries > 0 ? req->max_tries : KUBE_MAX_TRIES;
    c->timeout_ms = req->timeout_ms;
    c->resource = ra_strdup(nonempty(req->resource));
    c->group = ra_strdup(req->group);
    c->method = ra_strdup(req->method);
    c->path = ra_strdup(req->path);
    c->content_type = ra_strdup(nonempty(req->content_type));
    if (req->body) {
        c->body = malloc(req->body_len + 1);
        if (!c->body) ra_oom();
        memcpy(c->body, req->body, req->body_len);
        c->body[req->body_len] = '\0';
        c->body_len = req->body_len;
        if (!c->content_type) c->content_type = ra_strdup("application/json");
    }
    uv_timer_init(k->loop, &c->timer);
    c->timer.data = c;
    r = attempt_start(c);
    if (r < 0) {
        uv_close((uv_handle_t *)&c->timer, call_free_cb);
        return r;
    }
    c->next = k->calls;
    if (k->calls) k->calls->prev = c;
    k->calls = c;
    return 0;
}

void kube_destroy(struct kube *k)
{
    if (!k) return;
    while (k->waiters) kube__unwait(k->waiters);
    while (k->calls) {
        struct kube_call *c = k->calls;

        call_unlink(c);
        if (c->xfer) httpc_cancel(c->xfer);
        uv_timer_stop(&c->timer);
        if (c->on_cancel) c->on_cancel(c->ud);
        uv_close((uv_handle_t *)&c->timer, call_free_cb);
    }
    free(k->base_url);
    free(k->namespace_);
    free(k->pod_name);
    free(k->token_path);
    free(k->ca_path);
    if (k->token) explicit_bzero(k->token, strlen(k->token));
    free(k->token);
    free(k);
}
