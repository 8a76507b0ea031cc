/*
 * tls.c - server TLS contexts (load, reload, expiry) and per-connection TLS
 * over memory BIOs, for net/httpd.c. See tls.h and docs/tls.md.
 *
 * The certificate and key files are read whole with ra_read_file (bounded,
 * never blocks on a FIFO) and parsed from memory, so every error can name
 * the file it came from. Each SSL_CTX is reference counted by OpenSSL: the
 * server drops its reference on reload, and the connections made from the
 * old one keep it alive until they are freed.
 */
#include "net/tls.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/file.h"
#include "base/log.h"

#define TLS_FILE_MAX (1u << 20) /* a chain plus a key is a few KiB */
#define TLS_CHAIN_MAX 16        /* certificates in the chain file, the leaf included */
/* A memory BIO keeps the capacity it once grew to; past this, an emptied
 * one is replaced, so an idle connection holds no large buffer. */
#define TLS_BIO_KEEP 4096

/* TLS 1.2 suites (TLS 1.3 uses OpenSSL's default set, all AEAD): forward
 * secret ECDHE with AEAD ciphers only, the Mozilla "intermediate" list. */
#define TLS12_CIPHERS                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"                                   \
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"                                   \
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

struct tls_server {
    SSL_CTX *ctx;
    int64_t not_after;
    char subject[256];
    char serial[80];
    uint64_t failures;
    void (*hook)(void *, const char *);
    void *hook_ud;
};

struct tls_conn {
    struct tls_server *ts;
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    int started;      /* the peer has sent at least one byte */
    int established;
    int counted;    /* a failure has been counted for it */
    int rbio_grown; /* rbio has held more than TLS_BIO_KEEP bytes */
};

/* What a new context describes, kept once it is installed. */
struct leaf_info {
    int64_t not_after;
    char subject[256];
    char serial[80];
};

/* OpenSSL's reason for the most recent error, or fallback; clears the
 * error queue. Returns a static string. */
static const char *ossl_reason(const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : fallback;
}

/* Never prompts for a passphrase: an encrypted key is refused. */
static int no_password(char *buf, int size, int rwflag, void *ud)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)ud;
    return 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof ours - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* no ALPN in the reply: HTTP/1.1 anyway */
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static int64_t asn1_time_unix(const ASN1_TIME *t)
{
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return 0;
    return (int64_t)timegm(&tm);
}

static void fmt_time(int64_t unix_time, char *buf, size_t len)
{
    time_t t = (time_t)unix_time;
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, len, "%lld", (long long)unix_time);
}

static void describe_leaf(X509 *leaf, struct leaf_info *info)
{
    info->not_after = asn1_time_unix(X509_get0_notAfter(leaf));
    info->subject[0] = info->serial[0] = '\0';
    BIO *b = BIO_new(BIO_s_mem());
    if (b) {
        if (X509_NAME_print_ex(b, X509_get_subject_name(leaf), 0, XN_FLAG_RFC2253) >= 0) {
            int n = BIO_read(b, info->subject, (int)sizeof info->subject - 1);
            info->subject[n > 0 ? n : 0] = '\0';
        }
        BIO_free(b);
    }
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    if (hex) snprintf(info->serial, sizeof info->serial, "%s", hex);
    OPENSSL_free(hex);
    BN_free(bn);
    ERR_clear_error();
}

static SSL_CTX *new_ctx(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) ra_oom();
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) ra_oom(); /* only on OOM */
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    return ctx;
}

/* Reads path whole into *buf (what names it in errors: "certificate file"
 * or "key file"). */
static int read_pem(const char *what, const char *path, char **buf, size_t *len, char *err,
                    size_t errlen)
{
    char why[512];
    int rc = ra_read_file(path, TLS_FILE_MAX, buf, len, why, sizeof why);
    if (rc == -ENOMEM) ra_oom();
    if (rc < 0) snprintf(err, errlen, "%s %s", what, why);
    return rc;
}

/* Adds the certificates after the leaf in b (the chain, if any) to ctx.
 * Returns 0, or -EINVAL with err set. */
static int add_chain(SSL_CTX *ctx, BIO *b, const char *cert_file, char *err, size_t errlen)
{
    for (int i = 2;; i++) {
        if (i > TLS_CHAIN_MAX) {
            snprintf(err, errlen, "certificate file %s: more than %d certificates", cert_file,
                     TLS_CHAIN_MAX);
            return -EINVAL;
        }
        X509 *ca = PEM_read_bio_X509(b, NULL, no_password, NULL);
        if (!ca) {
            unsigned long e = ERR_peek_last_error();
            if (ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE) {
                ERR_clear_error(); /* end of file */
                return 0;
            }
            snprintf(err, errlen,
                     "certificate file %s: certificate %d of the chain is not valid PEM "
                     "(OpenSSL: %s)",
                     cert_file, i, ossl_reason("bad certificate"));
            return -EINVAL;
        }
        if (SSL_CTX_add0_chain_cert(ctx, ca) != 1) {
            X509_free(ca);
            snprintf(err, errlen,
                     "certificate file %s: certificate %d of the chain refused "
                     "(OpenSSL: %s)",
                     cert_file, i, ossl_reason("bad certificate"));
            return -EINVAL;
        }
    }
}

/* 0 if the leaf is inside its validity period now, else 1 with err saying
 * why (expired, or not valid yet). */
static int validity(X509 *leaf, const struct leaf_info *info, const char *cert_file, char *err,
                    size_t errlen)
{
    char when[32];
    if (X509_cmp_current_time(X509_get0_notAfter(leaf)) <= 0) {
        fmt_time(info->not_after, when, sizeof when);
        snprintf(err, errlen, "certificate file %s: the certificate (%s) expired at %s", cert_file,
                 info->subject, when);
        return 1;
    }
    if (X509_cmp_current_time(X509_get0_notBefore(leaf)) >= 0) {
        fmt_time(asn1_time_unix(X509_get0_notBefore(leaf)), when, sizeof when);
        snprintf(err, errlen, "certificate file %s: the certificate (%s) is not valid before %s",
                 cert_file, info->subject, when);
        return 1;
    }
    return 0;
}

/* Builds a context from the two files. Returns 0 (or 1: loaded, but the
 * leaf is outside its validity period; err says so) with *out and *info,
 * or <0 with err set and nothing allocated. */
static int load_ctx(const char *cert_file, const char *key_file, SSL_CTX **out,
                    struct leaf_info *info, char *err, size_t errlen)
{
    char *cbuf = NULL, *kbuf = NULL;
    size_t clen = 0, klen = 0;
    X509 *leaf = NULL;
    EVP_PKEY *key = NULL;
    SSL_CTX *ctx = NULL;
    BIO *b = NULL;
    int rc = -EINVAL;
    if (errlen > 0) err[0] = '\0';
    if (!cert_file || !key_file) {
        snprintf(err, errlen, "a certificate file and a key file are both needed");
        return -EINVAL;
    }
    ERR_clear_error();
    if ((rc = read_pem("certificate file", cert_file, &cbuf, &clen, err, errlen)) < 0) goto out;
    if ((rc = read_pem("key file", key_file, &kbuf, &klen, err, errlen)) < 0) goto out;
    rc = -EINVAL;

    ctx = new_ctx();
    if (!(b = BIO_new_mem_buf(cbuf, (int)clen))) ra_oom();
    if (!(leaf = PEM_read_bio_X509_AUX(b, NULL, no_password, NULL))) {
        snprintf(err, errlen, "certificate file %s: no PEM certificate found (OpenSSL: %s)",
                 cert_file, ossl_reason("no certificate"));
        goto out;
    }
    if (SSL_CTX_use_certificate(ctx, leaf) != 1) {
        snprintf(err, errlen, "certificate file %s: certificate refused (OpenSSL: %s)", cert_file,
                 ossl_reason("unusable certificate"));
        goto out;
    }
    if (add_chain(ctx, b, cert_file, err, errlen) < 0) goto out;
    BIO_free(b);
    if (!(b = BIO_new_mem_buf(kbuf, (int)klen))) ra_oom();
    if (!(key = PEM_read_bio_PrivateKey(b, NULL, no_password, NULL))) {
        snprintf(err, errlen, "key file %s: no unencrypted PEM private key found (OpenSSL: %s)",
                 key_file, ossl_reason("no key"));
        goto out;
    }
    if (SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "key file %s does not match the certificate in %s (OpenSSL: %s)",
                 key_file, cert_file, ossl_reason("key values mismatch"));
        goto out;
    }
    describe_leaf(leaf, info);
    rc = validity(leaf, info, cert_file, err, errlen);
    *out = ctx;
    ctx = NULL;
out:
    ERR_clear_error();
    BIO_free(b);
    X509_free(leaf);
    EVP_PKEY_free(key);
    SSL_CTX_free(ctx);
    free(cbuf);
    if (kbuf) {
        OPENSSL_cleanse(kbuf, klen);
        free(kbuf);
    }
    return rc;
}

static void install(struct tls_server *ts, SSL_CTX *ctx, const struct leaf_info *info)
{
    SSL_CTX_free(ts->ctx); /* connections made from it hold their own references */
    ts->ctx = ctx;
    ts->not_after = info->not_after;
    memcpy(ts->subject, info->subject, sizeof ts->subject);
    memcpy(ts->serial, info->serial, sizeof ts->serial);
}

int tls_server_create(const char *cert_file, const char *key_file, struct tls_server **out,
                      char *err, size_t errlen)
{
    SSL_CTX *ctx = NULL;
    struct leaf_info info;
    int rc = load_ctx(cert_file, key_file, &ctx, &info, err, errlen);
    if (rc < 0) return rc;
    struct tls_server *ts = calloc(1, sizeof *ts);
    if (!ts) ra_oom();
    install(ts, ctx, &info);
    *out = ts;
    return rc;
}

int tls_server_reload(struct tls_server *ts, const char *cert_file, const char *key_file, char *err,
                      size_t errlen)
{
    SSL_CTX *ctx = NULL;
    struct leaf_info info;
    int rc = load_ctx(cert_file, key_file, &ctx, &info, err, errlen);
    if (rc < 0) return rc;
    install(ts, ctx, &info);
    return rc;
}

int64_t tls_server_not_after(const struct tls_server *ts) { return ts->not_after; }

const char *tls_server_subject(const struct tls_server *ts) { return ts->subject; }

const char *tls_server_serial(const struct tls_server *ts) { return ts->serial; }

uint64_t tls_server_handshake_failures(const struct tls_server *ts) { return ts->failures; }

void tls_server_set_failure_hook(struct tls_server *ts, void (*hook)(void *ud, const char *reason),
                                 void *ud)
{
    ts->hook = hook;
    ts->hook_ud = ud;
}

void tls_server_destroy(struct tls_server *ts)
{
    if (!ts) return;
    SSL_CTX_free(ts->ctx);
    free(ts);
}

/* ---- connections ---- */

static void count_failure(struct tls_conn *tc, const char *reason)
{
    if (tc->counted || tc->established || !tc->started) return;
    tc->counted = 1;
    tc->ts->failures++;
    log_debug("tls: handshake failed: %s", reason);
    if (tc->ts->hook) tc->ts->hook(tc->ts->hook_ud, reason);
}

struct tls_conn *tls_conn_new(struct tls_server *ts)
{
    struct tls_conn *tc = calloc(1, sizeof *tc);
    if (!tc) ra_oom();
    tc->ts = ts;
    tc->ssl = SSL_new(ts->ctx);
    tc->rbio = BIO_new(BIO_s_mem());
    tc->wbio = BIO_new(BIO_s_mem());
    if (!tc->ssl || !tc->rbio || !tc->wbio) ra_oom();
    BIO_set_mem_eof_return(tc->rbio, -1); /* empty: "retry", not EOF */
    SSL_set_bio(tc->ssl, tc->rbio, tc->wbio);
    SSL_set_accept_state(tc->ssl);
    return tc;
}

void tls_conn_free(struct tls_conn *tc, const char *why)
{
    if (!tc) return;
    if (why) count_failure(tc, why);
    SSL_free(tc->ssl);
    free(tc);
}

void tls_conn_feed(struct tls_conn *tc, const char *data, size_t len)
{
    if (len == 0) return;
    tc->started = 1;
    while (len > 0) {
        int chunk = len > INT_MAX ? INT_MAX : (int)len;
        int n = BIO_write(tc->rbio, data, chunk);
        if (n <= 0) ra_oom(); /* a memory BIO only fails without memory */
        data += n;
        len -= (size_t)n;
    }
    if (BIO_ctrl_pending(tc->rbio) > TLS_BIO_KEEP) tc->rbio_grown = 1;
}

/* Called when all input has been consumed: gives back the record buffers
 * (OpenSSL keeps a 16 KiB read buffer while it waits for the next record)
 * and a read BIO that has grown. */
static void trim(struct tls_conn *tc)
{
    (void)SSL_free_buffers(tc->ssl); /* 0 (kept) if they still hold data */
    if (tc->rbio_grown && BIO_ctrl_pending(tc->rbio) == 0) {
        BIO *b = BIO_new(BIO_s_mem());
        if (!b) ra_oom();
        BIO_set_mem_eof_return(b, -1);
        SSL_set0_rbio(tc->ssl, b); /* frees the old one */
        tc->rbio = b;
        tc->rbio_grown = 0;
    }
}

long tls_conn_read(struct tls_conn *tc, char *buf, size_t cap)
{
    ERR_clear_error();
    int n = SSL_read(tc->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    if (!tc->established && SSL_is_init_finished(tc->ssl)) tc->established = 1;
    if (n > 0) return n;
    switch (SSL_get_error(tc->ssl, n)) {
    case SSL_ERROR_WANT_READ: trim(tc); return 0;
    case SSL_ERROR_ZERO_RETURN: return TLS_CONN_EOF;
    default: {
        const char *reason = ossl_reason("TLS error");
        if (tc->established) log_debug("tls: connection failed: %s", reason);
        count_failure(tc, reason);
        return TLS_CONN_ERROR;
    }
    }
}

int tls_conn_is_established(const struct tls_conn *tc) { return tc->established; }

int tls_conn_write(struct tls_conn *tc, const char *data, size_t len)
{
    while (len > 0) {
        int chunk = len > (1u << 30) ? (1 << 30) : (int)len;
        ERR_clear_error();
        int n = SSL_write(tc->ssl, data, chunk);
        if (n <= 0) {
            log_debug("tls: write failed: %s", ossl_reason("TLS error"));
            return TLS_CONN_ERROR;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

void tls_conn_shutdown(struct tls_conn *tc)
{
    ERR_clear_error();
    if (tc->established) (void)SSL_shutdown(tc->ssl);
    ERR_clear_error();
}

size_t tls_conn_take(struct tls_conn *tc, char **out)
{
    size_t n = BIO_ctrl_pending(tc->wbio);
    *out = NULL;
    if (n == 0) return 0;
    char *buf = malloc(n);
    if (!buf) ra_oom();
    int got = BIO_read(tc->wbio, buf, n > INT_MAX ? INT_MAX : (int)n);
    if (got <= 0) {
        free(buf);
        return 0;
    }
    if (n > TLS_BIO_KEEP && BIO_ctrl_pending(tc->wbio) == 0) { /* emptied: shrink it */
        BIO *b = BIO_new(BIO_s_mem());
        if (!b) ra_oom();
        SSL_set0_wbio(tc->ssl, b); /* frees the old one */
        tc->wbio = b;
    }
    *out = buf;
    return (size_t)got;
}
