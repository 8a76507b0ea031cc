/*
 * certs.h - `reload-agent webhook certs`: the one-shot certificate job of the
 * admission webhook (the kube-webhook-certgen pattern, spec/injection.md
 * §2.4). It makes sure a kubernetes.io/tls Secret holds a CA and a serving
 * certificate for the webhook's Service, then writes that CA into the
 * caBundle of every webhook of the MutatingWebhookConfiguration whose
 * caBundle differs. User documentation: docs/webhook-install.md.
 *
 * The certificates themselves come from webhook/certgen.c. The exported
 * name keeps the webhook_ prefix the subcommand table expects.
 */
#ifndef RA_WEBHOOK_CERTS_H
#define RA_WEBHOOK_CERTS_H

#include <stdio.h>

/* Prints the usage of `reload-agent webhook certs` to f. */
void webhook_certs_usage(FILE *f);

/* `reload-agent webhook certs [flags]` (argv[0] = "certs"). Runs its own
 * libuv loop until done: GET the Secret; if it is absent, generate and
 * create it (on 409 AlreadyExists read the one that won); check it; then
 * PATCH (JSON patch with a test op on metadata.resourceVersion) the
 * caBundle of each webhook of --webhook-config whose caBundle differs, and
 * write nothing when none differs. A failed test op or a 409 re-reads the
 * configuration and tries again (5 times at most); 5xx answers and
 * requests that got no answer (a timeout, a connection kube/ gave up on)
 * are retried with backoff (kube/ already retries 429 and 503, and failures
 * to connect). Returns the exit
 * status: 0 done, 1 an API or certificate error (logged, naming the object
 * and the HTTP status), 2 a usage error. */
int webhook_certs_main(int argc, char **argv);

#endif
