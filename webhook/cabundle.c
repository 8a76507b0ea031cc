/*
 * cabundle.c - the caBundle overlap of a CA renewal (contract in
 * cabundle.h): the new CA first, the previous one behind it while it is
 * unexpired, so replicas still serving the old certificate verify until the
 * kubelet refreshes their Secret volume. Certificates are compared by
 * content (X509_cmp), so a bundle that only differs in PEM line breaks or
 * order is still current.
 */
#include "webhook/cabundle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "base/log.h"
#include "webhook/certgen.h"

#define MAX_CERTS 16 /* certificates read from one caBundle */

/* The certificates of PEM text s (n bytes), at most max, in order; what is
 * not PEM is skipped. Returns how many were read into out. */
static int read_certs(const char *s, size_t n, X509 **out, int max)
{
    int k = 0;

    if (!s || n == 0 || n > (size_t)0x7fffffff) return 0;
    BIO *b = BIO_new_mem_buf(s, (int)n);
    if (!b) ra_oom();
    while (k < max) {
        X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
        if (!x) break;
        out[k++] = x;
    }
    ERR_clear_error(); /* the end of the text reads as an error */
    BIO_free(b);
    return k;
}

static void free_certs(X509 **v, int n)
{
    for (int i = 0; i < n; i++) X509_free(v[i]);
}

/* PEM of ca, then of prev (may be NULL), malloc'd. */
static char *bundle_pem(X509 *ca, X509 *prev)
{
    BIO *b = BIO_new(BIO_s_mem());
    if (!b || !PEM_write_bio_X509(b, ca) || (prev && !PEM_write_bio_X509(b, prev))) ra_oom();
    char *out = certgen_bio_text(b);
    BIO_free(b);
    return out;
}

int cabundle_plan(const char *have, size_t have_len, const char *ca_pem, int keep_previous,
                  time_t now, char **want, int *kept, char *err, size_t errlen)
{
    X509 *ca = NULL, *old[MAX_CERTS], *prev = NULL;
    int n, found = 0;

    *want = NULL;
    *kept = 0;
    if (read_certs(ca_pem, ca_pem ? strlen(ca_pem) : 0, &ca, 1) != 1)
        return ra_errf(err, errlen, -EINVAL, "the Secret's ca.crt holds no PEM certificate");
    n = read_certs(have, have_len, old, MAX_CERTS);
    for (int i = 0; i < n; i++) {
        if (X509_cmp(old[i], ca) == 0)
            found = 1;
        else if (!prev && keep_previous && X509_cmp_time(X509_get0_notAfter(old[i]), &now) > 0)
            prev = old[i];
    }
    if (found && (keep_previous || n == 1)) {
        free_certs(old, n);
        X509_free(ca);
        return 0;
    }
    *want = bundle_pem(ca, prev);
    *kept = prev != NULL;
    free_certs(old, n);
    X509_free(ca);
    return 1;
}
