/*
 * certgen.h - the webhook's CA and serving certificate, made and checked
 * with OpenSSL (used by `reload-agent webhook certs`, webhook/certs.c).
 *
 * Keys are EC P-256 (ECDSA with SHA-256): small, fast, accepted by every
 * Kubernetes API server (Go crypto/tls) and by the webhook's OpenSSL. The CA
 * and the serving certificate have the same lifetime (--validity, default
 * 10 years), because nothing renews a stored Secret: a shorter serving
 * certificate would only schedule an outage. Renewal is: delete the Secret,
 * run the job again (docs/webhook-install.md).
 */
#ifndef RA_WEBHOOK_CERTGEN_H
#define RA_WEBHOOK_CERTGEN_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CERTGEN_VALIDITY_S ((int64_t)10 * 365 * 24 * 3600) /* 87600h */
#define CERTGEN_MIN_VALIDITY_S ((int64_t)3600)             /* 1h */
#define CERTGEN_MAX_VALIDITY_S ((int64_t)100 * 365 * 24 * 3600)
#define CERTGEN_BACKDATE_S 300          /* notBefore = now - 5 min (clock skew) */
#define CERTGEN_WARN_S (30 * 24 * 3600) /* warn when a stored cert expires sooner */
#define CERTGEN_MAX_DNS 8

/* PEM text of the three Secret keys, each malloc'd and NUL-terminated. */
struct certgen_pem {
    char *ca_crt;  /* the CA certificate (ca.crt, and the caBundle) */
    char *tls_crt; /* the serving certificate (tls.crt) */
    char *tls_key; /* its private key, PKCS#8 (tls.key) */
};

/* The text a memory BIO (an OpenSSL BIO *) holds, as a malloc'd,
 * NUL-terminated string (aborts on OOM). */
struct bio_st;
char *certgen_bio_text(struct bio_st *b);

/* Frees the three strings (the key is wiped first) and zeroes *p. p may be
 * NULL. */
void certgen_pem_free(struct certgen_pem *p);

/* Fills dns[0..3] with malloc'd names: svc, svc.ns, svc.ns.svc,
 * svc.ns.svc.cluster.local (dns must hold 4). Returns 4. The caller frees
 * each. */
size_t certgen_dns_names(const char *svc, const char *ns, char **dns);

/* Creates a new CA and a serving certificate signed by it, with OpenSSL:
 * EC P-256 keys, random 128-bit serials, notBefore = now - 5 min, notAfter
 * = now + validity_s for both. The CA has basicConstraints CA:TRUE
 * pathlen:0 (critical) and keyUsage keyCertSign, cRLSign (critical); the
 * serving certificate has CN = dns[min(2, ndns-1)], subjectAltName DNS:
 * every name of dns, basicConstraints CA:FALSE, keyUsage digitalSignature
 * (critical), extendedKeyUsage serverAuth, and subject/authority key ids.
 * Returns 0 and *out (owned by the caller: certgen_pem_free), or
 * -EINVAL (no or too many names, validity out of range) / -EIO (an OpenSSL
 * failure) with the reason in err; *out is untouched then. */
int certgen_generate(const char *const *dns, size_t ndns, int64_t validity_s, time_t now,
                     struct certgen_pem *out, char *err, size_t errlen);

/* Checks a stored bundle: tls.crt and ca.crt parse, tls.key parses and
 * belongs to tls.crt, tls.crt verifies against ca.crt alone at time now
 * (X509_verify_cert with the sslserver purpose) and is valid for every
 * name of dns. Returns 0 and, if not_after is not NULL, the serving
 * certificate's notAfter; or -EINVAL with the first problem in err (which
 * names the Secret key, e.g. "tls.crt is not valid for
 * web.ns.svc"). Never logs key material. */
int certgen_check(const struct certgen_pem *p, const char *const *dns, size_t ndns, time_t now,
                  time_t *not_after, char *err, size_t errlen);

#endif
