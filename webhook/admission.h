/*
 * admission.h - one AdmissionReview (admission.k8s.io/v1) in, one HTTP
 * answer out: the pure core of `reload-agent webhook` (POST /mutate). No
 * I/O, no global state; the server (webhook/server.c) logs and counts what
 * the returned struct admission_info says.
 *
 * The policy (docs/webhook.md):
 *   - Content-Type must be application/json (parameters such as charset are
 *     allowed), else 415. A body of more than ADMISSION_MAX_VALUES JSON
 *     values (counted before parsing) is allowed unchanged with a warning
 *     (400 when it names no request.uid). A body that is not JSON, an apiVersion other than
 *     admission.k8s.io/v1, a kind other than AdmissionReview, or a missing
 *     request or request.uid get 400 with a one-line text reason.
 *   - Everything else gets 200 and an AdmissionReview v1 whose response
 *     echoes request.uid and is ALWAYS allowed: true. A reload helper never
 *     blocks a pod; any problem becomes a warnings[] entry instead.
 *   - Only CREATE of the pods resource (group "", kind Pod, no subresource)
 *     is mutated; any other request is allowed unchanged (ADMISSION_IGNORED).
 *   - The pod's metadata.managedFields is dropped before the transform runs
 *     (it can be large and the transform never reads it); the namespace
 *     reported is request.namespace (the object's is often empty).
 *   - The transform (inject/transform.h, opts->admission = 1) decides:
 *     INJECTED gives patchType JSONPatch, the base64 RFC 6902 patch, the
 *     transform's warnings and auditAnnotations {"injected":"true"};
 *     UNCHANGED and SKIPPED give no patch (the SKIPPED reason becomes a
 *     warning only when the pod asked for injection: its annotation
 *     reload-agent.io/inject is set to something other than "false");
 *     a transform error, OOM or anything unexpected gives no patch and the
 *     warning "reload-agent: injection failed: ...".
 *   - Warnings start with "reload-agent: ", are at most 120 characters
 *     (longer ones are cut and end in "..."; control characters become
 *     spaces), and at most ADMISSION_MAX_WARNINGS are sent: past that, the
 *     last one reads "reload-agent: ... and N more warnings".
 *   - request.dryRun changes nothing: answering has no side effects beyond
 *     the server's own log line and metrics.
 */
#ifndef RA_WEBHOOK_ADMISSION_H
#define RA_WEBHOOK_ADMISSION_H

#include <stddef.h>

#include "inject/transform.h"

#define ADMISSION_API_VERSION "admission.k8s.io/v1"
/* A review holding more JSON values is not parsed: allowed, not injected,
 * with a warning (about 100 bytes of memory per value once parsed). */
#define ADMISSION_MAX_VALUES 150000
#define ADMISSION_MAX_WARNINGS 10
#define ADMISSION_WARNING_MAX 120 /* characters (UTF-8 code points) */

/* What happened to one review; also the `result` label of
 * reload_agent_webhook_admissions_total. */
enum admission_result {
    ADMISSION_INJECTED = 0, /* 200, allowed, with a patch */
    ADMISSION_UNCHANGED,    /* 200, allowed: already injected, nothing to add */
    ADMISSION_SKIPPED,      /* 200, allowed: not opted in, or refused (reason) */
    ADMISSION_IGNORED,      /* 200, allowed: not a CREATE of a pod */
    ADMISSION_ERROR,        /* 200, allowed, no patch: the injection failed (reason) */
    ADMISSION_BAD_REQUEST,  /* 400 or 415 (the server also counts its own 413s here) */
    ADMISSION_NRESULTS
};

/* The small record the server logs and counts. Never holds the object. */
struct admission_info {
    enum admission_result result;
    int status;            /* the HTTP status answered */
    int dry_run;           /* request.dryRun was true */
    int name_is_generated; /* name holds metadata.generateName (name not known yet) */
    size_t nops;           /* patch operations sent (INJECTED) */
    size_t nwarnings;      /* warnings sent */
    char namespace_[64];   /* request.namespace ("" when absent); cut to fit */
    char name[254];        /* the pod's metadata.name, else generateName; cut to fit */
    char operation[16];    /* request.operation, cut to fit */
    char uid[64];          /* request.uid, cut to fit (for correlating logs) */
    char reason[256];      /* SKIPPED, IGNORED, ERROR, BAD_REQUEST: why */
};

/* The answer. body is malloc'd (the caller frees it); content_type is a
 * static string. */
struct admission_response {
    int status;               /* 200, 400 or 415 */
    const char *content_type; /* "application/json" for 200, text/plain otherwise */
    char *body;
    size_t body_len;
};

/* Returns 1 if content_type (a Content-Type header value, NULL when absent)
 * names application/json: the media type compared case-insensitively,
 * surrounding spaces and any ";parameters" ignored. */
int admission_is_json_type(const char *content_type);

/* Answers one review: body[0..len) as received with its Content-Type
 * (NULL when absent). opts are the transform's options (opts->admission is
 * forced to 1; NULL = defaults). Fills *out and *info (both zeroed first)
 * and returns 0, or returns -ENOMEM when not even the fallback answer
 * (allowed, no patch, an "out of memory" warning) could be allocated: *out
 * is then empty and *info says ADMISSION_ERROR; the caller answers 500 (the
 * API server then applies failurePolicy: Ignore). An injection that runs
 * out of memory itself still gets the fallback answer. */
int admission_review(const char *body, size_t len, const char *content_type,
                     const struct inject_opts *opts, struct admission_response *out,
                     struct admission_info *info);

/* admission_review, and release(ud) (when not NULL) is called once the
 * body has been read, before the transform runs: the caller frees it then
 * (body must not be used after), so that the body and the parsed review
 * are not both held through the review. Called on every path, at most
 * once, except when the body is refused before it is read (Content-Type,
 * empty: the caller frees it afterwards as usual). */
int admission_review_release(const char *body, size_t len, const char *content_type,
                             const struct inject_opts *opts, void (*release)(void *), void *ud,
                             struct admission_response *out, struct admission_info *info);

/* Frees out->body and zeroes *out. */
void admission_response_free(struct admission_response *out);

/* The metric label of r: "injected", "unchanged", "skipped", "ignored",
 * "error" or "bad_request". */
const char *admission_result_name(enum admission_result r);

/* Test seam, never set outside tests: when set, it replaces inject_object
 * (same contract), so tests can drive a transform failure or OOM. */
extern int (*admission__test_inject)(const cJSON *obj, const struct inject_opts *opts,
                                     struct inject_result *out, char *err, size_t errlen);

#endif
