/*
 * certgen.c - the webhook's CA and serving certificate (contract in
 * certgen.h), made and checked with OpenSSL's X.509 API. No file is
 * written: everything stays in memory as PEM until the caller stores it in
 * a Secret.
 */
#include "webhook/certgen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "base/log.h"
#include "kube/k8sname.h"

#define CA_CN "reload-agent-webhook-ca"

/* Reports the OpenSSL error queue's oldest entry (then clears it). */
static int ossl_err(char *err, size_t errlen, const char *what)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "";

    if (e) ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return ra_errf(err, errlen, -EIO, "%s failed%s%s", what, buf[0] ? ": " : "", buf);
}

void certgen_pem_free(struct certgen_pem *p)
{
    if (!p) return;
    free(p->ca_crt);
    free(p->tls_crt);
    if (p->tls_key) explicit_bzero(p->tls_key, strlen(p->tls_key));
    free(p->tls_key);
    memset(p, 0, sizeof *p);
}

size_t certgen_dns_names(const char *svc, const char *ns, char **dns)
{
    dns[0] = ra_strdup(svc);
    dns[1] = ra_asprintf("%s.%s", svc, ns);
    dns[2] = ra_asprintf("%s.%s.svc", svc, ns);
    dns[3] = ra_asprintf("%s.%s.svc.cluster.local", svc, ns);
    return 4;
}

char *certgen_bio_text(BIO *b)
{
    char *p = NULL;
    long n = BIO_get_mem_data(b, &p);
    char *s = malloc((size_t)(n > 0 ? n : 0) + 1);

    if (!s) ra_oom();
    if (n > 0) memcpy(s, p, (size_t)n);
    s[n > 0 ? n : 0] = '\0';
    return s;
}

static int set_serial(X509 *x)
{
    unsigned char r[16];
    BIGNUM *bn;
    int ok;

    if (RAND_bytes(r, sizeof r) != 1) return 0;
    r[0] &= 0x7f; /* positive, at most 20 octets (RFC 5280 4.1.2.2) */
    r[0] |= 0x40; /* and never shorter than 16 octets */
    bn = BN_bin2bn(r, sizeof r, NULL);
    ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
    BN_free(bn);
    return ok;
}

/* Adds one extension from its OpenSSL config text (e.g. "critical,CA:TRUE").
 * issuer may be cert itself (self-signed). */
static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509_EXTENSION *ex;
    int ok;

    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!ex) return 0;
    ok = X509_add_ext(cert, ex, -1);
    X509_EXTENSION_free(ex);
    return ok;
}

/* A certificate for key, issued by issuer (NULL: self-signed) and signed
 * with sign_key; extensions are added by the caller before signing. */
static X509 *new_cert(EVP_PKEY *key, X509 *issuer, const char *cn, time_t nb, time_t na)
{
    X509 *x = X509_new();
    X509_NAME *name;

    if (!x) return NULL;
    name = X509_get_subject_name(x);
    if (X509_set_version(x, 2) != 1 || !set_serial(x) ||
        !ASN1_TIME_set(X509_getm_notBefore(x), nb) || !ASN1_TIME_set(X509_getm_notAfter(x), na) ||
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                   0) != 1 ||
        X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) != 1 ||
        X509_set_pubkey(x, key) != 1) {
        X509_free(x);
        return NULL;
    }
    return x;
}

int certgen_generate(const char *const *dns, size_t ndns, int64_t validity_s, time_t now,
                     struct certgen_pem *out, char *err, size_t errlen)
{
    EVP_PKEY *ca_key = NULL, *key = NULL;
    X509 *ca = NULL, *leaf = NULL;
    BIO *b_ca = NULL, *b_crt = NULL, *b_key = NULL;
    char *san = NULL;
    time_t nb = now - CERTGEN_BACKDATE_S, na;
    int r = -EIO;

    if (ndns == 0 || ndns > CERTGEN_MAX_DNS)
        return ra_errf(err, errlen, -EINVAL, "need 1 to %d DNS names, got %zu", CERTGEN_MAX_DNS,
                       ndns);
    if (validity_s < CERTGEN_MIN_VALIDITY_S || validity_s > CERTGEN_MAX_VALIDITY_S)
        return ra_errf(err, errlen, -EINVAL, "validity must be between 1h and 876000h (100 years)");
    for (size_t i = 0; i < ndns; i++)
        if (!k8s_is_dns_name(dns[i]))
            return ra_errf(err, errlen, -EINVAL, "\"%.253s\" is not a lowercase DNS name", dns[i]);
    na = now + (time_t)validity_s;

    san = ra_asprintf("DNS:%s", dns[0]);
    for (size_t i = 1; i < ndns; i++) {
        char *s = ra_asprintf("%s,DNS:%s", san, dns[i]);

        free(san);
        san = s;
    }

    ca_key = EVP_EC_gen("P-256");
    key = EVP_EC_gen("P-256");
    if (!ca_key || !key) {
        r = ossl_err(err, errlen, "generating an EC P-256 key");
        goto out;
    }
    ca = new_cert(ca_key, NULL, CA_CN, nb, na);
    if (!ca || !add_ext(ca, ca, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
        !add_ext(ca, ca, NID_key_usage, "critical,keyCertSign,cRLSign") ||
        !add_ext(ca, ca, NID_subject_key_identifier, "hash") ||
        !add_ext(ca, ca, NID_authority_key_identifier, "keyid:always") ||
        X509_sign(ca, ca_key, EVP_sha256()) <= 0) {
        r = ossl_err(err, errlen, "making the CA certificate");
        goto out;
    }
    leaf = new_cert(key, ca, dns[ndns > 2 ? 2 : ndns - 1], nb, na);
    if (!leaf || !add_ext(leaf, ca, NID_basic_constraints, "critical,CA:FALSE") ||
        !add_ext(leaf, ca, NID_key_usage, "critical,digitalSignature") ||
        !add_ext(leaf, ca, NID_ext_key_usage, "serverAuth") ||
        !add_ext(leaf, ca, NID_subject_alt_name, san) ||
        !add_ext(leaf, ca, NID_subject_key_identifier, "hash") ||
        !add_ext(leaf, ca, NID_authority_key_identifier, "keyid:always") ||
        X509_sign(leaf, ca_key, EVP_sha256()) <= 0) {
        r = ossl_err(err, errlen, "making the serving certificate");
        goto out;
    }
    b_ca = BIO_new(BIO_s_mem());
    b_crt = BIO_new(BIO_s_mem());
    b_key = BIO_new(BIO_s_mem());
    if (!b_ca || !b_crt || !b_key || PEM_write_bio_X509(b_ca, ca) != 1 ||
        PEM_write_bio_X509(b_crt, leaf) != 1 ||
        PEM_write_bio_PrivateKey(b_key, key, NULL, NULL, 0, NULL, NULL) != 1) {
        r = ossl_err(err, errlen, "writing PEM");
        goto out;
    }
    out->ca_crt = certgen_bio_text(b_ca);
    out->tls_crt = certgen_bio_text(b_crt);
    out->tls_key = certgen_bio_text(b_key);
    r = 0;
out:
    free(san);
    BIO_free(b_ca);
    BIO_free(b_crt);
    BIO_free_all(b_key); /* BIO_s_mem frees (does not wipe) its buffer */
    X509_free(ca);
    X509_free(leaf);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(key);
    return r;
}

/* Every certificate in a PEM text; NULL (with err) if there is none or one
 * does not parse. */
static STACK_OF(X509) * read_certs(const char *pem, const char *what, char *err, size_t errlen)
{
    STACK_OF(X509) *sk = sk_X509_new_null();
    BIO *b = BIO_new_mem_buf(pem, -1);
    X509 *x;

    if (!sk || !b) ra_oom();
    ERR_clear_error();
    while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) sk_X509_push(sk, x);
    /* The loop ends at the end of the text (PEM_R_NO_START_LINE) or at a
     * block that does not parse: only the former is fine. */
    if (ERR_GET_REASON(ERR_peek_last_error()) != PEM_R_NO_START_LINE || sk_X509_num(sk) == 0) {
        char buf[256] = "";
        unsigned long e = ERR_peek_last_error();

        if (e && ERR_GET_REASON(e) != PEM_R_NO_START_LINE) ERR_error_string_n(e, buf, sizeof buf);
        ra_errf(err, errlen, -EINVAL, "%s holds no readable PEM certificate%s%s", what,
                buf[0] ? ": " : "", buf);
        sk_X509_pop_free(sk, X509_free);
        sk = NULL;
    }
    ERR_clear_error();
    BIO_free(b);
    return sk;
}

int certgen_check(const struct certgen_pem *p, const char *const *dns, size_t ndns, time_t now,
                  time_t *not_after, char *err, size_t errlen)
{
    STACK_OF(X509) *cas = NULL, *chain = NULL;
    X509_STORE *store = NULL;
    X509_STORE_CTX *ctx = NULL;
    EVP_PKEY *key = NULL;
    X509 *leaf;
    BIO *b = NULL;
    struct tm tm;
    int r = -EINVAL;

    if (!p->ca_crt || !p->tls_crt || !p->tls_key)
        return ra_errf(err, errlen, -EINVAL, "%s is missing",
                       !p->tls_crt   ? "tls.crt"
                       : !p->tls_key ? "tls.key"
                                     : "ca.crt");
    if (!(cas = read_certs(p->ca_crt, "ca.crt", err, errlen))) goto out;
    if (!(chain = read_certs(p->tls_crt, "tls.crt", err, errlen))) goto out;
    leaf = sk_X509_value(chain, 0);
    b = BIO_new_mem_buf(p->tls_key, -1);
    if (!b) ra_oom();
    key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    ERR_clear_error();
    if (!key) {
        ra_errf(err, errlen, -EINVAL, "tls.key holds no readable PEM private key");
        goto out;
    }
    if (X509_check_private_key(leaf, key) != 1) {
        ERR_clear_error();
        ra_errf(err, errlen, -EINVAL, "tls.key is not the key of the certificate in tls.crt");
        goto out;
    }
    store = X509_STORE_new();
    ctx = X509_STORE_CTX_new();
    if (!store || !ctx) ra_oom();
    for (int i = 0; i < sk_X509_num(cas); i++) X509_STORE_add_cert(store, sk_X509_value(cas, i));
    if (X509_STORE_CTX_init(ctx, store, leaf, chain) != 1 ||
        X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER) != 1) {
        r = ossl_err(err, errlen, "setting up the verification");
        goto out;
    }
    X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), now);
    if (X509_verify_cert(ctx) != 1) {
        ERR_clear_error();
        ra_errf(err, errlen, -EINVAL, "tls.crt does not verify against ca.crt: %s",
                X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
        goto out;
    }
    for (size_t i = 0; i < ndns; i++)
        if (X509_check_host(leaf, dns[i], 0, 0, NULL) != 1) {
            ra_errf(err, errlen, -EINVAL, "tls.crt is not valid for %s", dns[i]);
            goto out;
        }
    if (not_after) {
        if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) != 1) {
            ra_errf(err, errlen, -EINVAL, "tls.crt has an unreadable notAfter");
            goto out;
        }
        *not_after = timegm(&tm);
    }
    r = 0;
out:
    ERR_clear_error();
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    EVP_PKEY_free(key);
    BIO_free(b);
    sk_X509_pop_free(cas, X509_free);
    sk_X509_pop_free(chain, X509_free);
    return r;
}
