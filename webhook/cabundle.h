/*
 * cabundle.h - the caBundle a webhook of the MutatingWebhookConfiguration
 * should hold once the CA in the TLS Secret changed (`webhook certs`,
 * webhook/certs.c). A renewal makes a new CA, but each webhook replica
 * serves the old certificate until the kubelet refreshes its Secret volume
 * (about a minute): a caBundle of the new CA alone would fail every call to
 * those replicas meanwhile. So the new CA goes first and the one it replaces
 * stays behind it, until the next renewal drops it (at most two CAs; an
 * expired one is dropped at once). docs/webhook-install.md#renewal.
 */
#ifndef RA_WEBHOOK_CABUNDLE_H
#define RA_WEBHOOK_CABUNDLE_H

#include <stddef.h>
#include <time.h>

/* Plans one webhook's caBundle. have (have_len bytes, may be NULL or not
 * PEM at all) is its caBundle now, decoded from base64; ca_pem the CA of
 * the Secret (PEM, NUL-terminated).
 * Returns 0 when nothing is to be written: have holds ca_pem's certificate
 * (anywhere in it) and, unless keep_previous, nothing else. Otherwise
 * returns 1 with *want (malloc'd PEM, the caller frees) = ca_pem's
 * certificate, then, when keep_previous is set and have does not hold it
 * yet, the first other certificate of have that is not expired at now
 * (*kept = 1; else 0): with keep_previous unset the CA stands alone.
 * Returns -EINVAL when ca_pem holds no certificate (the reason in err). */
int cabundle_plan(const char *have, size_t have_len, const char *ca_pem, int keep_previous,
                  time_t now, char **want, int *kept, char *err, size_t errlen);

#endif
