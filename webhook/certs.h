/*
 * certs.h - `reload-agent webhook certs`: the one-shot certificate job of the
 * admission webhook (the kube-webhook-certgen pattern,
 * docs/kubernetes-api.md#webhook-certificates). It makes sure a
 * kubernetes.io/tls Secret holds a CA and a serving
 * certificate for the webhook's Service, then writes that CA into the
 * caBundle of every webhook of the MutatingWebhookConfiguration that does
 * not hold it yet (with the previous CA behind it: webhook/cabundle.h). User documentation: docs/webhook-install.md.
 *
 * The certificates themselves come from webhook/certgen.c; the command line
 * is cmd/cmd_certs.c's.
 */
#ifndef RA_WEBHOOK_CERTS_H
#define RA_WEBHOOK_CERTS_H

#include <stdint.h>

/* What one run of the job does; the strings are the caller's and must stay
 * valid during webhook_certs_run. cmd/cmd_certs.c fills it from the
 * command line and checks it (names, validity range) before the run. */
struct certs_opts {
    const char *ns;         /* namespace of the Secret and Service; NULL: kube/'s default */
    const char *secret;     /* the TLS Secret to create or keep (required) */
    const char *service;    /* the webhook's Service (required): the DNS names */
    const char *mwc;        /* the MutatingWebhookConfiguration, or NULL: Secret only */
    const char *api;        /* API server URL, NULL: in-cluster */
    const char *token_file; /* NULL: the service-account token */
    const char *ca_file;    /* NULL: the service-account ca.crt */
    int64_t validity_s;     /* lifetime of the certificates, in seconds */
    int keep_previous_ca;   /* a new CA keeps the previous one in caBundle (webhook/cabundle.h) */
};

/* Runs the job `reload-agent webhook certs` describes, on its own libuv
 * loop, until done: GET the Secret; if it is absent, generate and create it
 * (on 409 AlreadyExists read the one that won); check it; then PATCH (JSON
 * patch with a test op on metadata.resourceVersion) the caBundle of each
 * webhook of o->mwc that is not current (cabundle_plan with
 * o->keep_previous_ca), and write nothing when all are. A failed test op or a 409 re-reads the configuration and tries
 * again (5 times at most); 5xx answers and requests that got no answer (a
 * timeout, a connection kube/ gave up on) are retried with backoff (kube/
 * already retries 429 and 503, and failures to connect). o is copied. Returns the exit status: 0
 * done, 1 an API or certificate error (logged, naming the object and the
 * HTTP status). */
int webhook_certs_run(const struct certs_opts *o);

#endif
