/*
 * kube.h - a small asynchronous Kubernetes API client on the libuv loop
 * (libcurl multi through httpc). No call blocks.
 *
 * Configuration (docs/kubernetes-api.md#in-cluster-access): in a cluster the base URL is
 * https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (IPv6 hosts
 * bracketed), the token and CA come from the service-account directory;
 * outside, --kube-api (https:// only) / --kube-token-file / --kube-ca-file.
 * TLS is always verified (the CA file may hold several certificates).
 *
 * The bearer token is re-read when older than 60 s, when kube_token_stale()
 * is called (the agent watches the token's directory for the ..data swap),
 * and once after a 401 (then the request is retried once). It is never
 * logged.
 *
 * Every request has a timeout (10 s, or its own timeout_ms). 429, 503, 500
 * with Retry-After, and connection failures (refused, reset, dropped) are
 * retried inside kube_request, up to KUBE_MAX_TRIES attempts (or its own
 * max_tries; 1 for none) (a timeout or a TLS
 * verification failure is final at once), waiting
 * Retry-After when given (plain-text and Status bodies alike send the
 * header; details.retryAfterSeconds is read from a Status body too), else
 * exponential backoff with jitter from 200 ms. A 403 produces an error
 * naming the RBAC rule that is missing (verb, resource, API group).
 */
#ifndef RA_KUBE_H
#define RA_KUBE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "net/httpc.h"

/* How the hint appended to a 403's message begins: it names the Role that
 * grants every request the agent makes (manifests/role.yaml) and the
 * command that binds it to the ServiceAccount the API server named. */
#define KUBE_RBAC_HINT " (grant it the Role in manifests/role.yaml"
/* The same for fast sync's requests (the watches, its pod's GET and
 * PATCH): the Role `reload-agent inject` writes for the workload (or
 * --output rbac prints for a webhook user), else manifests/fast-sync/. */
#define KUBE_RBAC_HINT_FAST_SYNC " (grant it fast sync's Role, with the objects as resourceNames"
/* The same for staging's requests (the Lease list, watch, patch and
 * create, the workload's GET): the Role `reload-agent inject -o rbac`
 * writes with the Lease (docs/staging.md). */
#define KUBE_RBAC_HINT_STAGE " (grant it staging's Role, with the Lease as resourceName"

/* Which Role a 403's hint names. */
enum kube_role {
    KUBE_ROLE_AGENT,     /* manifests/role.yaml: rollout, Events, the owner chain */
    KUBE_ROLE_FAST_SYNC, /* manifests/fast-sync/role.yaml, or the one inject writes */
    KUBE_ROLE_STAGE,     /* staging's: the one inject -o rbac writes beside the Lease */
};

#define KUBE_MAX_TRIES 6
#define KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBE_TIMEOUT_MS 10000 /* per attempt */
#define KUBE_TOKEN_MAX_AGE_MS 60000

struct kube;

struct kube_config {
    const char *api;        /* base URL, NULL/"" = in-cluster from the environment */
    const char *token_file; /* NULL/"" = KUBE_SA_DIR/token */
    const char *ca_file;    /* NULL/"" = KUBE_SA_DIR/ca.crt */
    const char *pod_name;   /* NULL/"" = $POD_NAME */
    const char *namespace_; /* NULL/"" = $POD_NAMESPACE, then KUBE_SA_DIR/namespace */
    const char *sa_dir;     /* NULL/"" = KUBE_SA_DIR (tests point it elsewhere) */
    uint64_t timeout_ms;    /* per attempt; 0 = KUBE_TIMEOUT_MS */
};

/* What a request needs, for error messages (RBAC hints). */
struct kube_req {
    const char *verb;         /* RBAC verb: "get", "patch", "create" */
    const char *resource;     /* plural: "pods", "deployments" */
    const char *group;        /* "" for core, "apps", "batch", "argoproj.io" */
    const char *method;       /* HTTP method */
    const char *path;         /* absolute path with query, e.g. "/api/v1/namespaces/ns/pods/p" */
    const char *content_type; /* for PATCH/POST, else NULL */
    const char *body;         /* may be NULL */
    size_t body_len;
    void (*on_cancel)(void *ud); /* may be NULL: runs (inside kube_destroy)
                                    instead of cb when the request is cancelled,
                                    so the caller can free what ud holds */
    enum kube_role role;         /* the Role a 403's hint names (zero: the agent's) */
    int max_tries;               /* attempts at most (0: KUBE_MAX_TRIES); 1: no retry
                                    inside, for a caller that retries on its own clock
                                    (the sync service's leader election) */
    uint64_t timeout_ms;         /* per attempt (0: the client's, KUBE_TIMEOUT_MS) */
};

struct kube_resp {
    int ok;           /* 1 if a final HTTP response arrived (any status) */
    long status;      /* HTTP status */
    const char *body; /* response body, valid during the callback */
    size_t body_len;
    const char *error; /* when !ok or status >= 400: a one-line explanation
                             (Status.message, plus the RBAC hint for 403) */
    int tries;         /* attempts made */
};

typedef void (*kube_cb)(void *ud, const struct kube_resp *r);

/* Resolves the configuration (reads env, namespace file, token and CA
 * existence). Returns 0 and *out, or -EINVAL with a message in err naming
 * what is missing (e.g. "not in a cluster: KUBERNETES_SERVICE_HOST and
 * KUBERNETES_SERVICE_PORT are not set; use --kube-api"). */
int kube_create(uv_loop_t *loop, struct httpc *hc, const struct kube_config *cfg, struct kube **out,
                char *err, size_t errlen);

const char *kube_namespace(const struct kube *k);
const char *kube_pod_name(const struct kube *k);
const char *kube_token_path(const struct kube *k);

/* Marks the cached token stale (re-read before the next request). */
void kube_token_stale(struct kube *k);

/* Starts a request; cb runs exactly once on the loop. All of req is copied.
 * Returns 0, or <0 (cb never runs). */
int kube_request(struct kube *k, const struct kube_req *req, kube_cb cb, void *ud);

/* Push counters: kube/ calls them at the event, on the loop thread; the
 * agent registers its metrics (kube/ keeps no counts of its own). A NULL
 * member is skipped. */
struct kube_counters {
    /* One finished attempt: its HTTP status, 0 = no response (connection,
     * TLS or timeout failure). Every attempt counts (a retried 429 each time). */
    void (*response)(void *ud, long code);
    /* One Event dropped by kevents' rate limit. */
    void (*event_suppressed)(void *ud);
    void *ud;
};

/* Registers the counters (copied); NULL unregisters. */
void kube_set_counters(struct kube *k, const struct kube_counters *c);

/* For kube/ modules (kevents.c): counts one suppressed Event on k's hook. */
void kube__count_suppressed(struct kube *k);

/* ---- internal: for kube/ modules that run their own transfers (kwatch.c) ---- */

/* The current bearer token (re-read first when stale or older than a
 * minute, as for a request); *gen (may be NULL) gets its generation. The
 * string is valid until the next call into k. Never log it. */
const char *kube__token(struct kube *k, unsigned *gen);
/* The API server rejected the token of generation gen (401): re-read it
 * before the next request unless a newer one was read meanwhile. */
void kube__token_rejected(struct kube *k, unsigned gen);
const char *kube__ca_path(const struct kube *k);
uv_loop_t *kube__loop(const struct kube *k);
struct httpc *kube__httpc(const struct kube *k);
/* Counts one finished attempt on the registered counters (0: no response). */
void kube__count_response(struct kube *k, long code);
/* A wait for the API server to answer again (kcwatch.c: a watch that got
 * no answer waits its backoff step, but the first answer to any request of
 * k - the sync service's Lease read every retry period - says the server
 * is back). Embedded in its owner; zeroed = not waiting. */
struct kube_waiter {
    struct kube_waiter *next, **pprev;
    void (*cb)(struct kube_waiter *); /* once, on the next attempt of k that got
                                         an HTTP status; not waiting any more then */
};
/* Waits w (its cb set) for the next answer; a w already waiting stays as it is. */
void kube__wait_answer(struct kube *k, struct kube_waiter *w);
/* Stops waiting (no-op when w is not waiting). Call it before freeing w. */
void kube__unwait(struct kube_waiter *w);

/* The one-line error kube_request would give for a final status code >= 400
 * of req with this body (the Status message, the RBAC hint for 403). */
void kube__http_error(const struct kube *k, const struct kube_req *req, long code, const char *body,
                      size_t body_len, char *out, size_t outlen);

/* The base URL requests go to (no trailing slash). */
const char *kube_base_url(const struct kube *k);

/* Cancels pending requests (their callbacks do not run; each on_cancel
 * does), frees k. Must be called before the httpc is closed. The retry
 * timers of cancelled requests are closed here and freed in their close
 * callbacks, so the loop must run once more before uv_loop_close (it does
 * anyway to close the httpc). Safe to call from inside a kube_cb. */
void kube_destroy(struct kube *k);

#endif
