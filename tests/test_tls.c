/*
 * test_tls.c - the built-in HTTP server over real TLS on loopback (net/tls.c
 * with net/httpd.c). A test CA, an intermediate and server certificates are
 * made in the test with OpenSSL's APIs and written as PEM files to a
 * temporary directory. The server runs in a libuv loop on the main thread;
 * a client thread speaks TLS with an in-process OpenSSL client
 * (tests/tlsclient.h) over blocking sockets (5 s send/receive timeouts,
 * every loop bounded), stores what it saw, and wakes the loop through a uv_async_t, which closes the
 * server. A 30 s deadline timer is the backstop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "net/httpd.h"
#include "net/tls.h"
#include "tests/tlsclient.h"

/* ---- test PKI, written once per run ---- */

static char dir[64];
static char ca_file[128], chain_file[128], key_file[128]; /* leaf "one", serial 0x65 */
static char cert2_file[128], key2_file[128];              /* leaf "two", serial 0xCA */
static char cert3_file[128];                              /* leaf "three", own key3 */
static char expired_file[128], future_file[128], garbage_file[128], weak_file[128],
    weak_key_file[128], enc_key_file[128];
static int64_t not_after_one, not_after_two;

static EVP_PKEY *ec_key(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    return k;
}

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    assert_non_null(e);
    assert_int_equal(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

/* A certificate for key, signed by issuer/ikey (self-signed when NULL),
 * valid from now+from_s to now+to_s. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, long serial, X509 *issuer, EVP_PKEY *ikey,
                       int ca, long from_s, long to_s)
{
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
    X509_gmtime_adj(X509_getm_notBefore(x), from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), to_s);
    X509_set_pubkey(x, key);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC, (const unsigned char *)"reload-agent test", -1,
                               -1, 0);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    X509 *iss = issuer ? issuer : x;
    add_ext(x, iss, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
    add_ext(x, iss, NID_key_usage,
            ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature,keyEncipherment");
    add_ext(x, iss, NID_subject_key_identifier, "hash");
    if (!ca) {
        add_ext(x, iss, NID_ext_key_usage, "serverAuth");
        add_ext(x, iss, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1");
    }
    assert_true(X509_sign(x, ikey ? ikey : key, EVP_sha256()) > 0);
    return x;
}

static void write_pem(const char *path, X509 *a, X509 *b, EVP_PKEY *key, const EVP_CIPHER *enc)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    if (a) assert_int_equal(PEM_write_X509(fp, a), 1);
    if (b) assert_int_equal(PEM_write_X509(fp, b), 1);
    if (key)
        assert_int_equal(PEM_write_PrivateKey(fp, key, enc, enc ? (unsigned char *)"secret" : NULL,
                                              enc ? 6 : 0, NULL, NULL),
                         1);
    assert_int_equal(fclose(fp), 0);
}

static int64_t cert_not_after(X509 *x)
{
    struct tm tm;
    assert_int_equal(ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm), 1);
    return (int64_t)timegm(&tm);
}

static int make_pki(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/test_tls.XXXXXX");
    assert_non_null(mkdtemp(dir));
#define P(var, name) snprintf(var, sizeof var, "%s/%s", dir, name)
    P(ca_file, "ca.crt");
    P(chain_file, "one.crt");
    P(key_file, "one.key");
    P(cert2_file, "two.crt");
    P(key2_file, "two.key");
    P(cert3_file, "three.crt");
    P(expired_file, "expired.crt");
    P(future_file, "future.crt");
    P(garbage_file, "garbage.crt");
    P(weak_file, "weak.crt");
    P(weak_key_file, "weak.key");
    P(enc_key_file, "enc.key");
#undef P
    EVP_PKEY *root_key = ec_key(), *int_key = ec_key(), *k1 = ec_key(), *k2 = ec_key(),
             *k3 = ec_key();
    X509 *root = make_cert(root_key, "test root CA", 1, NULL, NULL, 1, -60, 86400);
    X509 *inter = make_cert(int_key, "test intermediate CA", 2, root, root_key, 1, -60, 86400);
    X509 *one = make_cert(k1, "one", 0x65, inter, int_key, 0, -60, 3600);
    X509 *two = make_cert(k2, "two", 0xCA, inter, int_key, 0, -60, 7200);
    X509 *three = make_cert(k3, "three", 3, inter, int_key, 0, -60, 3600);
    X509 *expired = make_cert(k1, "expired", 4, inter, int_key, 0, -7200, -3600);
    X509 *future = make_cert(k1, "future", 5, inter, int_key, 0, 3600, 7200);
    not_after_one = cert_not_after(one);
    not_after_two = cert_not_after(two);
    write_pem(ca_file, root, NULL, NULL, NULL);
    write_pem(chain_file, one, inter, NULL, NULL); /* leaf first, then the intermediate */
    write_pem(key_file, NULL, NULL, k1, NULL);
    write_pem(cert2_file, two, inter, NULL, NULL);
    write_pem(key2_file, NULL, NULL, k2, NULL);
    write_pem(cert3_file, three, inter, NULL, NULL);
    write_pem(expired_file, expired, NULL, NULL, NULL);
    write_pem(future_file, future, NULL, NULL, NULL);
    write_pem(enc_key_file, NULL, NULL, k1, EVP_aes_256_cbc());
    FILE *fp = fopen(garbage_file, "w");
    assert_non_null(fp);
    fputs("this is not a certificate\n", fp);
    fclose(fp);
    /* RSA 1024: below OpenSSL's default security level */
    EVP_PKEY *weak_key = EVP_RSA_gen(1024);
    assert_non_null(weak_key);
    X509 *weak = make_cert(weak_key, "weak", 6, inter, int_key, 0, -60, 3600);
    write_pem(weak_file, weak, NULL, NULL, NULL);
    write_pem(weak_key_file, NULL, NULL, weak_key, NULL);
    X509 *certs[] = {root, inter, one, two, three, expired, future, weak};
    for (size_t i = 0; i < sizeof certs / sizeof certs[0]; i++) X509_free(certs[i]);
    EVP_PKEY *keys[] = {root_key, int_key, k1, k2, k3, weak_key};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) EVP_PKEY_free(keys[i]);
    return 0;
}

static int remove_pki(void **state)
{
    (void)state;
    const char *files[] = {ca_file,      chain_file, key_file,      cert2_file,
                           key2_file,    cert3_file, expired_file,  future_file,
                           garbage_file, weak_file,  weak_key_file, enc_key_file};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) unlink(files[i]);
    rmdir(dir);
    return 0;
}

/* ---- fixture: server on the loop thread, client on another ---- */

#define MAX_REASONS 16

struct fx {
    uv_loop_t loop;
    struct srv_run run; /* the client thread and the deadline */
    struct httpd *srv;
    struct tls_server *ts;
    struct httpd_opts opts;
    int port;
    int handler_calls;
    void (*client)(struct fx *);
    char *res[16];
    int val[16];
    char info[8][200];
    int graceful; /* srv_run closes the server with httpd_shutdown */
    int nreasons;
    char reasons[MAX_REASONS][100];
};

static void hook(void *ud, const char *reason)
{
    struct fx *f = ud;
    if (f->nreasons < MAX_REASONS)
        snprintf(f->reasons[f->nreasons], sizeof f->reasons[0], "%s", reason);
    f->nreasons++;
}

static void handler(void *ud, const struct httpd_req *req, struct httpd_resp *resp)
{
    struct fx *f = ud;
    f->handler_calls++;
    int n = 0;
    if (strcmp(req->path, "/hello") == 0) {
        n = asprintf(&resp->body, "hello");
    } else if (strcmp(req->path, "/post") == 0) {
        uint32_t h = 2166136261u; /* FNV-1a of long bodies */
        for (size_t i = 0; i < req->body_len; i++)
            h = (h ^ (unsigned char)req->body[i]) * 16777619u;
        char sum[16];
        snprintf(sum, sizeof sum, "%08x", h);
        n = asprintf(&resp->body, "%s %s %zu:%s", req->method,
                     req->content_type ? req->content_type : "-", req->body_len,
                     req->body_len <= 64 ? req->body : sum);
    } else if (strcmp(req->path, "/reload") == 0 || strcmp(req->path, "/reload-bad") == 0) {
        int good = strcmp(req->path, "/reload") == 0;
        char err[512];
        int rc = tls_server_reload(f->ts, good ? cert2_file : cert3_file,
                                   good ? key2_file : key_file, err, sizeof err);
        n = asprintf(&resp->body, "rc=%d err=%s", rc, err);
    } else {
        resp->status = 404;
        n = asprintf(&resp->body, "not found");
    }
    resp->body_len = n > 0 ? (size_t)n : 0;
}

static void run_client(void *arg)
{
    struct fx *f = arg;
    f->client(f);
}

/* Runs client against a TLS server with f->opts (tls filled in here) and
 * the certificate "one". */
static void run(struct fx *f, void (*client)(struct fx *))
{
    char err[512];
    assert_int_equal(tls_server_create(chain_file, key_file, &f->ts, err, sizeof err), 0);
    assert_string_equal(err, "");
    tls_server_set_failure_hook(f->ts, hook, f);
    f->opts.tls = f->ts;
    if (!f->opts.methods) f->opts.methods = HTTPD_GET | HTTPD_HEAD | HTTPD_POST;
    assert_int_equal(uv_loop_init(&f->loop), 0);
    assert_int_equal(httpd_start_opts(&f->loop, "127.0.0.1:0", &f->opts, handler, f, &f->srv), 0);
    f->port = httpd_port(f->srv);
    f->client = client;
    srv_run(&f->run, &f->loop, 30000, f, run_client, f->srv, f->graceful);
    assert_int_equal(uv_loop_close(&f->loop), 0);
}

static void fx_free(struct fx *f)
{
    for (size_t i = 0; i < sizeof f->res / sizeof f->res[0]; i++) free(f->res[i]);
    tls_server_destroy(f->ts);
}

/* ---- client side ---- */

/* A client context trusting the test root (or nothing, trust == 0), for
 * protocol versions min..max (0 = OpenSSL's defaults). */
static SSL_CTX *client_ctx(int trust, int min, int max)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    assert_non_null(c);
    if (trust) assert_int_equal(SSL_CTX_load_verify_locations(c, ca_file, NULL), 1);
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    if (min || max) {
        SSL_CTX_set_security_level(c, 0); /* lets the client offer TLS 1.1 */
        SSL_CTX_set_cipher_list(c, "DEFAULT:@SECLEVEL=0");
    }
    if (min) SSL_CTX_set_min_proto_version(c, min);
    if (max) SSL_CTX_set_max_proto_version(c, max);
    return c;
}

enum { END_NOTIFY = 1, END_OTHER = 2 };

/* Reads to the end of the connection; *end is END_NOTIFY when the server
 * closed it with close_notify. */
static char *tls_read_all(struct tc *t, int *end)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap + 1);
    for (int i = 0; i < 10000; i++) {
        if (len == cap) buf = realloc(buf, (cap *= 2) + 1);
        int r = SSL_read(t->ssl, buf + len, (int)(cap - len));
        if (r > 0) {
            len += (size_t)r;
            continue;
        }
        *end = SSL_get_error(t->ssl, r) == SSL_ERROR_ZERO_RETURN ? END_NOTIFY : END_OTHER;
        ERR_clear_error();
        break;
    }
    buf[len] = '\0';
    return buf;
}

/* Reads one response (the head byte by byte, then Content-Length bytes);
 * returns its body, or NULL. */
static char *tls_read_body(struct tc *t)
{
    char head[1024];
    size_t i = 0;
    while (i < sizeof head - 1) {
        if (SSL_read(t->ssl, head + i, 1) != 1) return NULL;
        head[++i] = '\0';
        if (i >= 4 && strcmp(head + i - 4, "\r\n\r\n") == 0) break;
    }
    const char *cl = strstr(head, "Content-Length: ");
    if (!cl) return NULL;
    size_t n = strtoul(cl + 16, NULL, 10);
    return n < 4096 ? tls_read_n(t, n) : NULL;
}

static char *resp(const char *body, int keep)
{
    char *s;
    assert_true(asprintf(&s,
                         "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         "Content-Length: %zu\r\nConnection: %s\r\n\r\n%s",
                         strlen(body), keep ? "keep-alive" : "close", body) > 0);
    return s;
}

/* One keep-alive request r on t; 1 if the reply is exactly body. */
static int exchange(struct tc *t, const char *r, const char *body)
{
    char *want = resp(body, 1);
    char *got = tls_send(t, r) == 0 ? tls_read_n(t, strlen(want)) : NULL;
    int ok = got && strcmp(got, want) == 0;
    free(got);
    free(want);
    return ok;
}

static long peer_serial(struct tc *t)
{
    X509 *x = SSL_get1_peer_certificate(t->ssl);
    if (!x) return -1;
    long s = ASN1_INTEGER_get(X509_get0_serialNumber(x));
    X509_free(x);
    return s;
}

static void peer_cn(struct tc *t, char *buf, size_t len)
{
    X509 *x = SSL_get1_peer_certificate(t->ssl);
    buf[0] = '\0';
    if (!x) return;
    X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, (int)len);
    X509_free(x);
}

/* 1 if the server closed fd (EOF or reset) within ms. */
static int closed_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c[512];
    for (int i = 0; i < 100; i++) { /* skip an alert, if any, before the EOF */
        if (poll(&p, 1, ms) != 1) return 0;
        ssize_t r = recv(fd, c, sizeof c, MSG_DONTWAIT);
        if (r <= 0) return 1;
    }
    return 0;
}

/* ---- tests ---- */

static const char *post_req = "POST /post HTTP/1.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: 7\r\n\r\n{\"a\":1}";

static int tickets; /* NewSessionTicket messages the client received */

static int new_session(SSL *ssl, SSL_SESSION *sess)
{
    (void)ssl;
    (void)sess;
    __atomic_add_fetch(&tickets, 1, __ATOMIC_SEQ_CST);
    return 0; /* not kept */
}

static void client_basic(struct fx *f)
{
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT);
    SSL_CTX_sess_set_new_cb(ctx, new_session);
    struct tc t;
    if (tls_open(f->port, ctx, NULL, &t) == 0) {
        snprintf(f->info[0], sizeof f->info[0], "%s", SSL_get_version(t.ssl));
        const unsigned char *alpn;
        unsigned alen;
        SSL_get0_alpn_selected(t.ssl, &alpn, &alen);
        snprintf(f->info[1], sizeof f->info[1], "%.*s", (int)alen, (const char *)alpn);
        f->val[0] = exchange(&t, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", "hello");
        f->val[1] = exchange(&t, post_req, "POST application/json 7:{\"a\":1}");
        /* pipelined: two POSTs and a final GET in one TLS record */
        const char *pipe = "POST /post HTTP/1.1\r\nContent-Length: 3\r\n\r\none"
                           "POST /post HTTP/1.1\r\nContent-Type: t/2\r\nTransfer-Encoding: "
                           "chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n"
                           "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n";
        int end = 0;
        if (tls_send(&t, pipe) == 0) f->res[0] = tls_read_all(&t, &end);
        f->val[2] = end;
        f->val[3] = (int)peer_serial(&t);
        tls_close(&t);
    }
    /* TLS 1.2: the server's first ECDHE-ECDSA AEAD suite, no compression,
     * and no session resumption (no tickets, no cache) */
    SSL_CTX *ctx12 = client_ctx(1, TLS1_2_VERSION, TLS1_2_VERSION);
    SSL_CTX_set_cipher_list(ctx12, "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384:"
                                   "ECDHE-ECDSA-AES128-GCM-SHA256:AES128-SHA");
    SSL_SESSION *sess = NULL;
    if (tls_open(f->port, ctx12, NULL, &t) == 0) {
        snprintf(f->info[2], sizeof f->info[2], "%s", SSL_get_version(t.ssl));
        snprintf(f->info[3], sizeof f->info[3], "%s", SSL_get_cipher_name(t.ssl));
        f->val[4] = SSL_get_current_compression(t.ssl) == NULL;
        f->val[5] = exchange(&t, "GET /hello HTTP/1.1\r\n\r\n", "hello");
        /* a clean end on both sides (close_notify each way), so that
         * neither side drops the session as unclean */
        int end = 0;
        if (tls_send(&t, "GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n") == 0)
            free(tls_read_all(&t, &end));
        f->val[11] = end == END_NOTIFY && SSL_shutdown(t.ssl) >= 0;
        sess = SSL_get1_session(t.ssl);
        f->val[12] = sess && SSL_SESSION_is_resumable(sess);
        tls_close(&t);
    }
    if (sess && tls_open(f->port, ctx12, sess, &t) == 0) {
        f->val[6] = 1 + SSL_session_reused(t.ssl); /* 1: a full handshake */
        f->val[7] = exchange(&t, "GET /hello HTTP/1.1\r\n\r\n", "hello");
        tls_close(&t);
    }
    SSL_SESSION_free(sess);
    /* TLS 1.2 renegotiation is refused (a no_renegotiation alert) */
    if (tls_open(f->port, ctx12, NULL, &t) == 0) {
        f->val[8] = exchange(&t, "GET /hello HTTP/1.1\r\n\r\n", "hello");
        if (SSL_renegotiate(t.ssl) == 1) {
            f->val[9] = SSL_do_handshake(t.ssl);
            const char *why = ERR_reason_error_string(ERR_peek_last_error());
            snprintf(f->info[4], sizeof f->info[4], "%s", why ? why : "");
        }
        tls_close(&t);
    }
    SSL_CTX_free(ctx12);
    SSL_CTX_free(ctx);
}

static void test_tls_get_post(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_basic);
    assert_string_equal(f.info[0], "TLSv1.3");
    assert_int_equal(tickets, 0); /* TLS 1.3: no session tickets either */
    assert_string_equal(f.info[1], "http/1.1");
    assert_int_equal(f.val[0], 1);
    assert_int_equal(f.val[1], 1);
    char *a = resp("POST - 3:one", 1), *b = resp("POST t/2 3:two", 1), *c = resp("hello", 0), *w;
    assert_true(asprintf(&w, "%s%s%s", a, b, c) > 0);
    assert_non_null(f.res[0]);
    assert_string_equal(f.res[0], w);
    free(a);
    free(b);
    free(c);
    free(w);
    assert_int_equal(f.val[2], END_NOTIFY); /* close_notify after the final reply */
    assert_int_equal(f.val[3], 0x65);
    assert_string_equal(f.info[2], "TLSv1.2");
    assert_string_equal(f.info[3], "ECDHE-ECDSA-AES128-GCM-SHA256"); /* server preference */
    assert_int_equal(f.val[4], 1);
    assert_int_equal(f.val[5], 1);
    assert_int_equal(f.val[11], 1);
    assert_int_equal(f.val[12], 0); /* no session id, no ticket */
    assert_int_equal(f.val[6], 1);  /* a full handshake */
    assert_int_equal(f.val[7], 1);
    assert_int_equal(f.val[8], 1);
    assert_int_equal(f.val[9], -1);
    assert_string_equal(f.info[4], "no renegotiation");
    assert_int_equal(f.handler_calls, 9);
    assert_int_equal(tls_server_handshake_failures(f.ts), 0);
    assert_int_equal(f.nreasons, 0);
    fx_free(&f);
}

static void client_refused(struct fx *f)
{
    /* TLS 1.1 only */
    SSL_CTX *old = client_ctx(1, TLS1_1_VERSION, TLS1_1_VERSION);
    struct tc t;
    f->val[0] = tls_open(f->port, old, NULL, &t);
    if (f->val[0] == 0) tls_close(&t);
    SSL_CTX_free(old);
    /* a client that does not trust the server's CA aborts the handshake */
    SSL_CTX *untrusting = client_ctx(0, 0, 0);
    f->val[1] = tls_open(f->port, untrusting, NULL, &t);
    if (f->val[1] == 0) tls_close(&t);
    SSL_CTX_free(untrusting);
    /* plain HTTP to the TLS port: no HTTP reply, the connection is closed */
    int fd = cli_connect(AF_INET, f->port);
    if (fd >= 0) {
        const char *r = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
        if (send(fd, r, strlen(r), MSG_NOSIGNAL) == (ssize_t)strlen(r)) {
            char buf[4096] = {0};
            ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
            f->val[2] = n >= 0 && !strstr(buf, "HTTP/");
            f->val[3] = closed_within(fd, 5000) || n == 0;
        }
        close(fd);
    }
    /* then a good client is served */
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    if (tls_open(f->port, ctx, NULL, &t) == 0) {
        f->val[4] = exchange(&t, "GET /hello HTTP/1.1\r\n\r\n", "hello");
        tls_close(&t);
    }
    SSL_CTX_free(ctx);
}

static void test_tls_refused_clients(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_refused);
    assert_int_equal(f.val[0], -1);
    assert_int_equal(f.val[1], -1);
    assert_int_equal(f.val[2], 1);
    assert_int_equal(f.val[3], 1);
    assert_int_equal(f.val[4], 1);
    assert_int_equal(tls_server_handshake_failures(f.ts), 3);
    assert_int_equal(f.nreasons, 3);
    /* in any order: the server may see the last two in one loop iteration */
    static const char *const want[] = {"unsupported protocol", "tlsv1 alert unknown ca",
                                       "http request"};
    for (int w = 0; w < 3; w++) {
        int seen = 0;
        for (int i = 0; i < 3; i++) seen += strcmp(f.reasons[i], want[w]) == 0;
        assert_int_equal(seen, 1);
    }
    assert_int_equal(f.handler_calls, 1);
    fx_free(&f);
}

/* The first flight of a TLS client (its ClientHello), made in memory. */
static size_t client_hello(char *buf, size_t cap)
{
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    SSL *ssl = SSL_new(ctx);
    BIO *r = BIO_new(BIO_s_mem()), *w = BIO_new(BIO_s_mem());
    SSL_set_bio(ssl, r, w);
    SSL_set_connect_state(ssl);
    (void)SSL_do_handshake(ssl); /* wants to read the ServerHello */
    int n = BIO_read(w, buf, (int)cap);
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return n > 0 ? (size_t)n : 0;
}

static void client_slow(struct fx *f)
{
    char hello[4096];
    size_t hlen = client_hello(hello, sizeof hello);
    f->val[0] = hlen > 100;
    int silent = cli_connect(AF_INET, f->port); /* connects, sends nothing */
    int half = cli_connect(AF_INET, f->port);   /* sends half a ClientHello */
    if (silent < 0 || half < 0) return;
    f->val[1] = send(half, hello, hlen / 2, MSG_NOSIGNAL) == (ssize_t)(hlen / 2);
    /* meanwhile another client is served */
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    struct tc t;
    if (tls_open(f->port, ctx, NULL, &t) == 0) {
        f->val[2] = exchange(&t, "GET /hello HTTP/1.1\r\n\r\n", "hello");
        tls_close(&t);
    }
    SSL_CTX_free(ctx);
    /* both slow ones are cut off at the 300 ms read timeout (the default
     * 5 s would not close them within 3 s) */
    f->val[3] = closed_within(silent, 3000);
    f->val[4] = closed_within(half, 3000);
    close(silent);
    close(half);
}

static void test_tls_slow_handshake_cut_off(void **state)
{
    (void)state;
    struct fx f = {.opts = {.timeout_ms = 300}};
    run(&f, client_slow);
    for (int i = 0; i < 5; i++) assert_int_equal(f.val[i], 1);
    /* only the one that started a handshake counts as a failure */
    assert_int_equal(tls_server_handshake_failures(f.ts), 1);
    assert_int_equal(f.nreasons, 1);
    assert_string_equal(f.reasons[0], "timeout");
    fx_free(&f);
}

static void client_reload(struct fx *f)
{
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    struct tc k, n, m;
    if (tls_open(f->port, ctx, NULL, &k) != 0) goto out;
    f->val[0] = exchange(&k, "GET /hello HTTP/1.1\r\n\r\n", "hello");
    f->val[1] = (int)peer_serial(&k);
    /* reload to "two", on the loop, from a request on this connection */
    const char *r = "GET /reload HTTP/1.1\r\n\r\n";
    f->val[2] = exchange(&k, r, "rc=0 err=");
    if (tls_open(f->port, ctx, NULL, &n) == 0) { /* a new connection sees "two" */
        f->val[3] = (int)peer_serial(&n);
        peer_cn(&n, f->info[0], sizeof f->info[0]);
        f->val[4] = exchange(&n, post_req, "POST application/json 7:{\"a\":1}");
        tls_close(&n);
    }
    /* the existing connection keeps working with "one" */
    f->val[5] = exchange(&k, "GET /hello HTTP/1.1\r\n\r\n", "hello");
    f->val[6] = (int)peer_serial(&k);
    /* a reload with a key that does not match: refused, "two" stays */
    char *body = tls_send(&k, "GET /reload-bad HTTP/1.1\r\n\r\n") == 0 ? tls_read_body(&k) : NULL;
    if (body) snprintf(f->info[1], sizeof f->info[1], "%s", body);
    free(body);
    if (tls_open(f->port, ctx, NULL, &m) == 0) {
        f->val[7] = (int)peer_serial(&m);
        tls_close(&m);
    }
    f->val[8] = exchange(&k, "GET /hello HTTP/1.1\r\n\r\n", "hello");
    tls_close(&k);
out:
    SSL_CTX_free(ctx);
}

static void test_tls_reload(void **state)
{
    (void)state;
    struct fx f = {0};
    run(&f, client_reload);
    assert_int_equal(f.val[0], 1);
    assert_int_equal(f.val[1], 0x65);
    assert_int_equal(f.val[2], 1);
    assert_int_equal(f.val[3], 0xCA);
    assert_string_equal(f.info[0], "two");
    assert_int_equal(f.val[4], 1);
    assert_int_equal(f.val[5], 1);
    assert_int_equal(f.val[6], 0x65);
    assert_non_null(strstr(f.info[1], "rc=-22 err=key file "));
    assert_non_null(strstr(f.info[1], key_file));
    assert_non_null(strstr(f.info[1], "does not match the certificate in"));
    assert_non_null(strstr(f.info[1], cert3_file));
    assert_non_null(strstr(f.info[1], "key values mismatch"));
    assert_int_equal(f.val[7], 0xCA);
    assert_int_equal(f.val[8], 1);
    assert_int_equal(tls_server_not_after(f.ts), not_after_two);
    assert_string_equal(tls_server_serial(f.ts), "CA");
    assert_non_null(strstr(tls_server_subject(f.ts), "CN=two"));
    assert_int_equal(tls_server_handshake_failures(f.ts), 0);
    fx_free(&f);
}

#define CROWD 70
#define THREADS 8
#define PER_THREAD 25

static void *burst_thread(void *arg)
{
    struct fx *f = arg;
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    long ok = 0;
    for (int i = 0; i < PER_THREAD; i++) {
        struct tc t;
        if (tls_open(f->port, ctx, NULL, &t) != 0) continue;
        char *want = resp("POST - 1:x", 0);
        int end = 0;
        char *got = tls_send(&t, "POST /post HTTP/1.1\r\nContent-Length: 1\r\nConnection: close\r\n"
                                 "\r\nx") == 0
                        ? tls_read_all(&t, &end)
                        : NULL;
        ok += got && strcmp(got, want) == 0 && end == END_NOTIFY;
        free(got);
        free(want);
        tls_close(&t);
    }
    SSL_CTX_free(ctx);
    return (void *)ok;
}

static void client_crowd(struct fx *f)
{
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    struct tc t[CROWD];
    int n = 0, served = 0;
    for (; n < CROWD; n++) {
        if (tls_open(f->port, ctx, NULL, &t[n]) != 0) break;
        served += exchange(&t[n], "GET /hello HTTP/1.1\r\n\r\n", "hello");
    }
    f->val[0] = n;
    f->val[1] = served;
    /* the limit is 64: the six oldest (idle) connections were closed */
    int closed = 0, oldest_closed = 1;
    for (int i = 0; i < n; i++) {
        int c = closed_within(t[i].fd, i < CROWD - 64 ? 5000 : 0);
        closed += c;
        if (i < CROWD - 64) oldest_closed &= c;
    }
    f->val[2] = closed;
    f->val[3] = oldest_closed;
    int still = 0;
    for (int i = CROWD - 64; i < n; i++)
        still += exchange(&t[i], "GET /hello HTTP/1.1\r\n\r\n", "hello");
    f->val[4] = still;
    for (int i = 0; i < n; i++) tls_close(&t[i]);
    SSL_CTX_free(ctx);
    /* then THREADS clients at once, each making PER_THREAD connections */
    pthread_t th[THREADS];
    long total = 0;
    int started = 0;
    for (int i = 0; i < THREADS; i++) started += pthread_create(&th[i], NULL, burst_thread, f) == 0;
    for (int i = 0; i < started; i++) {
        void *r;
        pthread_join(th[i], &r);
        total += (long)r;
    }
    f->val[5] = (int)total;
}

static void test_tls_many_clients(void **state)
{
    (void)state;
    struct fx f = {.opts = {.timeout_ms = 15000}}; /* no idle timeout mid-test */
    run(&f, client_crowd);
    assert_int_equal(f.val[0], CROWD);
    assert_int_equal(f.val[1], CROWD);
    assert_int_equal(f.val[2], CROWD - 64);
    assert_int_equal(f.val[3], 1);
    assert_int_equal(f.val[4], 64);
    assert_int_equal(f.val[5], THREADS * PER_THREAD);
    assert_int_equal(tls_server_handshake_failures(f.ts), 0);
    fx_free(&f);
}

/* Loading: each bad input is refused with an error naming the file and
 * the reason; a refused reload keeps the certificate in use. */
static void test_tls_load_errors(void **state)
{
    (void)state;
    char err[512];
    struct tls_server *ts = NULL;
    char missing[160];
    snprintf(missing, sizeof missing, "%s/missing.crt", dir);
    assert_int_equal(tls_server_create(missing, key_file, &ts, err, sizeof err), -ENOENT);
    assert_null(ts);
    assert_non_null(strstr(err, "certificate file "));
    assert_non_null(strstr(err, missing));
    assert_int_equal(tls_server_create(chain_file, missing, &ts, err, sizeof err), -ENOENT);
    assert_non_null(strstr(err, "key file "));
    assert_int_equal(tls_server_create(dir, key_file, &ts, err, sizeof err), -EISDIR);
    assert_int_equal(tls_server_create(garbage_file, key_file, &ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, garbage_file));
    assert_non_null(strstr(err, "no PEM certificate found"));
    /* a broken certificate after the leaf, and a chain that never ends */
    char broken[160], longchain[160];
    snprintf(broken, sizeof broken, "%s/broken.crt", dir);
    snprintf(longchain, sizeof longchain, "%s/long.crt", dir);
    char *pem = NULL;
    size_t pem_len = 0;
    FILE *in = fopen(ca_file, "r");
    assert_non_null(in);
    assert_true(getdelim(&pem, &pem_len, '\0', in) > 0);
    fclose(in);
    FILE *out = fopen(broken, "w");
    assert_non_null(out);
    fprintf(out, "%s-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", pem);
    fclose(out);
    out = fopen(longchain, "w");
    assert_non_null(out);
    for (int i = 0; i < 17; i++) fputs(pem, out);
    fclose(out);
    free(pem);
    assert_int_equal(tls_server_create(broken, key_file, &ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "certificate 2 of the chain is not valid PEM"));
    assert_int_equal(tls_server_create(longchain, key_file, &ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "more than 16 certificates"));
    unlink(broken);
    unlink(longchain);
    assert_int_equal(tls_server_create(chain_file, chain_file, &ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "no unencrypted PEM private key"));
    assert_int_equal(tls_server_create(chain_file, enc_key_file, &ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, enc_key_file));
    assert_int_equal(tls_server_create(cert3_file, key_file, &ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, "does not match"));
    assert_int_equal(tls_server_create(weak_file, weak_key_file, &ts, err, sizeof err), -EINVAL);
    assert_non_null(strstr(err, weak_file));
    assert_non_null(strstr(err, "too small"));
    assert_null(ts);
    /* expired and not-yet-valid load, and say so */
    assert_int_equal(tls_server_create(expired_file, key_file, &ts, err, sizeof err), 1);
    assert_non_null(ts);
    assert_non_null(strstr(err, "expired at "));
    assert_true(tls_server_not_after(ts) < (int64_t)time(NULL));
    assert_int_equal(tls_server_reload(ts, future_file, key_file, err, sizeof err), 1);
    assert_non_null(strstr(err, "not valid before "));
    /* a good one, then refused reloads keep it */
    assert_int_equal(tls_server_reload(ts, chain_file, key_file, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(tls_server_not_after(ts), not_after_one);
    assert_string_equal(tls_server_serial(ts), "65");
    assert_int_equal(tls_server_reload(ts, cert2_file, key_file, err, sizeof err), -EINVAL);
    assert_int_equal(tls_server_reload(ts, missing, key2_file, err, sizeof err), -ENOENT);
    assert_int_equal(tls_server_reload(ts, garbage_file, key2_file, err, sizeof err), -EINVAL);
    assert_int_equal(tls_server_not_after(ts), not_after_one);
    assert_string_equal(tls_server_serial(ts), "65");
    assert_non_null(strstr(tls_server_subject(ts), "CN=one"));
    tls_server_destroy(ts);
    tls_server_destroy(NULL);
}

#define MIB3 (3u << 20)

static uint32_t fnv(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* POSTs len bytes of body (chunked or with Content-Length) on a new TLS
 * connection with Connection: close; returns what came back. */
static char *tls_post(struct fx *f, SSL_CTX *ctx, const char *body, size_t len, int chunked,
                      int *end)
{
    struct tc t;
    if (tls_open(f->port, ctx, NULL, &t) != 0) return NULL;
    char head[200];
    if (chunked)
        snprintf(head, sizeof head,
                 "POST /post HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    else
        snprintf(head, sizeof head,
                 "POST /post HTTP/1.1\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", len);
    int ok = tls_send(&t, head) == 0;
    for (size_t off = 0; ok && off < len;) {
        size_t n = len - off < 65536 ? len - off : 65536;
        if (chunked) {
            char sz[32];
            snprintf(sz, sizeof sz, "%zx\r\n", n);
            ok = tls_send(&t, sz) == 0;
        }
        ok = ok && SSL_write(t.ssl, body + off, (int)n) == (int)n;
        if (chunked) ok = ok && tls_send(&t, "\r\n") == 0;
        off += n;
    }
    if (ok && chunked) ok = tls_send(&t, "0\r\n\r\n") == 0;
    ERR_clear_error();
    char *got = tls_read_all(&t, end);
    tls_close(&t);
    return got;
}

static char *big;

static void client_big(struct fx *f)
{
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    f->res[0] = tls_post(f, ctx, big, MIB3, 0, &f->val[0]);
    f->res[1] = tls_post(f, ctx, big, MIB3, 1, &f->val[1]);
    f->res[2] = tls_post(f, ctx, big, MIB3 + 1, 1, &f->val[2]);
    f->res[3] = tls_post(f, ctx, big, 0, 0, &f->val[3]);
    /* Expect: 100-continue over TLS: the interim reply, then the body */
    struct tc c;
    if (tls_open(f->port, ctx, NULL, &c) == 0) {
        const char *cont = "HTTP/1.1 100 Continue\r\n\r\n";
        if (tls_send(&c, "POST /post HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n"
                         "Connection: close\r\n\r\n") == 0)
            f->res[5] = tls_read_n(&c, strlen(cont));
        if (f->res[5] && tls_send(&c, "ok") == 0) f->res[6] = tls_read_all(&c, &f->val[6]);
        tls_close(&c);
    }
    /* over the limit by Content-Length: 413 on the head alone */
    struct tc t;
    if (tls_open(f->port, ctx, NULL, &t) == 0) {
        char head[100];
        snprintf(head, sizeof head, "POST /post HTTP/1.1\r\nContent-Length: %u\r\n\r\n", MIB3 + 1);
        if (tls_send(&t, head) == 0) f->res[4] = tls_read_all(&t, &f->val[4]);
        tls_close(&t);
    }
    SSL_CTX_free(ctx);
}

static void test_tls_3mib_bodies(void **state)
{
    (void)state;
    struct fx f = {.opts = {.methods = HTTPD_POST, .max_body = MIB3}};
    big = malloc(MIB3 + 1);
    for (size_t i = 0; i < MIB3 + 1; i++) big[i] = (char)('A' + i % 29);
    run(&f, client_big);
    char sum[80];
    snprintf(sum, sizeof sum, "POST - %u:%08x", MIB3, fnv(big, MIB3));
    char *ok = resp(sum, 0);
    const char *too_large = "HTTP/1.1 413 Payload Too Large\r\nContent-Type: text/plain; "
                            "charset=utf-8\r\nContent-Length: 18\r\nConnection: close\r\n\r\n"
                            "request too large\n";
    char *empty = resp("POST - 0:", 0);
    assert_non_null(f.res[0]);
    assert_string_equal(f.res[0], ok);
    assert_non_null(f.res[1]);
    assert_string_equal(f.res[1], ok);
    assert_non_null(f.res[2]);
    assert_string_equal(f.res[2], too_large);
    assert_non_null(f.res[3]);
    assert_string_equal(f.res[3], empty);
    assert_non_null(f.res[4]);
    assert_string_equal(f.res[4], too_large);
    assert_int_equal(f.val[0], END_NOTIFY);
    assert_int_equal(f.val[1], END_NOTIFY);
    assert_int_equal(f.val[3], END_NOTIFY);
    assert_int_equal(f.val[4], END_NOTIFY);
    assert_non_null(f.res[5]);
    assert_string_equal(f.res[5], "HTTP/1.1 100 Continue\r\n\r\n");
    char *two = resp("POST - 2:ok", 0);
    assert_non_null(f.res[6]);
    assert_string_equal(f.res[6], two);
    free(two);
    assert_int_equal(f.handler_calls, 4);
    free(ok);
    free(empty);
    free(big);
    fx_free(&f);
}

/* Graceful shutdown over TLS: the idle connection and the one still in its
 * handshake are closed, the request that is arriving is answered with
 * Connection: close and close_notify. */
static void client_graceful(struct fx *f)
{
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    struct tc idle, busy;
    if (tls_open(f->port, ctx, NULL, &idle) != 0) goto out;
    if (tls_open(f->port, ctx, NULL, &busy) != 0) {
        tls_close(&idle);
        goto out;
    }
    int raw = cli_connect(AF_INET, f->port); /* never starts its handshake */
    /* The partial request goes first: by the time the server has answered
     * on idle, it has read what was already there on busy (one epoll wait
     * saw both). */
    f->val[1] = tls_send(&busy, "GET /hello HTTP/1.1\r\nHost: x\r\n") == 0;
    f->val[0] = exchange(&idle, "GET /hello HTTP/1.1\r\n\r\n", "hello");
    srv_signal_close(&f->run);
    f->val[2] = closed_within(idle.fd, 5000);
    f->val[3] = raw >= 0 && closed_within(raw, 5000);
    if (tls_send(&busy, "\r\n") == 0) f->res[0] = tls_read_all(&busy, &f->val[4]);
    if (raw >= 0) close(raw);
    tls_close(&idle);
    tls_close(&busy);
out:
    SSL_CTX_free(ctx);
}

static void test_tls_graceful_shutdown(void **state)
{
    (void)state;
    struct fx f = {.graceful = 1};
    run(&f, client_graceful);
    for (int i = 0; i < 4; i++) assert_int_equal(f.val[i], 1);
    char *want = resp("hello", 0);
    assert_non_null(f.res[0]);
    assert_string_equal(f.res[0], want);
    assert_int_equal(f.val[4], END_NOTIFY);
    free(want);
    fx_free(&f);
}

/* Runs cmd (curl) and returns its stdout (at most cap-1 bytes) in out, and
 * its exit status, or -1. */
static int run_cmd(const char *cmd, char *out, size_t cap)
{
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* An independent client: the curl CLI (Debian's, on OpenSSL). */
static void client_curl(struct fx *f)
{
    char body_file[160], cmd[1024], base[400];
    snprintf(body_file, sizeof body_file, "%s/body.json", dir);
    FILE *fp = fopen(body_file, "w");
    if (!fp) return;
    for (int i = 0; i < 102400; i++) fputc('a' + i % 26, fp);
    fclose(fp);
    snprintf(base, sizeof base,
             "curl -sS --max-time 20 --resolve localhost:%d:127.0.0.1 --cacert %s", f->port,
             ca_file);
    snprintf(cmd, sizeof cmd, "%s https://localhost:%d/hello", base, f->port);
    f->val[0] = run_cmd(cmd, f->info[0], sizeof f->info[0]);
    snprintf(cmd, sizeof cmd,
             "%s -H 'Content-Type: application/json' --data-binary @%s https://localhost:%d/post",
             base, body_file, f->port);
    f->val[1] = run_cmd(cmd, f->info[1], sizeof f->info[1]);
    /* curl's own view: HTTP/1.1 over TLS 1.3 with a verified certificate */
    snprintf(cmd, sizeof cmd,
             "%s -o /dev/null -w '%%{http_version} %%{ssl_verify_result}' "
             "https://localhost:%d/hello",
             base, f->port);
    f->val[2] = run_cmd(cmd, f->info[2], sizeof f->info[2]);
    /* refused: TLS 1.1 only, and a client without our CA */
    snprintf(cmd, sizeof cmd,
             "%s --tlsv1.1 --tls-max 1.1 --ciphers DEFAULT@SECLEVEL=0 https://localhost:%d/hello "
             "2>/dev/null",
             base, f->port);
    f->val[3] = run_cmd(cmd, f->info[3], sizeof f->info[3]);
    /* the system's CA bundle, without our test root */
    snprintf(cmd, sizeof cmd,
             "curl -sS --max-time 20 --resolve localhost:%d:127.0.0.1 https://localhost:%d/hello "
             "2>/dev/null",
             f->port, f->port);
    f->val[4] = run_cmd(cmd, f->info[4], sizeof f->info[4]);
    unlink(body_file);
}

static void test_tls_curl(void **state)
{
    (void)state;
    struct fx f = {.opts = {.max_body = 1 << 20}};
    run(&f, client_curl);
    assert_int_equal(f.val[0], 0);
    assert_string_equal(f.info[0], "hello");
    assert_int_equal(f.val[1], 0);
    char *body = malloc(102400);
    for (int i = 0; i < 102400; i++) body[i] = (char)('a' + i % 26);
    char want[100];
    snprintf(want, sizeof want, "POST application/json 102400:%08x", fnv(body, 102400));
    free(body);
    assert_string_equal(f.info[1], want);
    assert_int_equal(f.val[2], 0);
    assert_string_equal(f.info[2], "1.1 0");
    assert_int_not_equal(f.val[3], 0);
    assert_string_equal(f.info[3], "");
    assert_int_not_equal(f.val[4], 0);
    assert_string_equal(f.info[4], "");
    assert_int_equal(f.handler_calls, 3);
    assert_int_equal(tls_server_handshake_failures(f.ts), 2);
    fx_free(&f);
}

#define STALLED 8 /* the connection limit in this test */

/* Stalled handshakes hold every slot: a real client still gets through,
 * and the stalled connection that has waited longest makes room. */
static void client_stalled_crowd(struct fx *f)
{
    char hello[4096];
    size_t hlen = client_hello(hello, sizeof hello);
    int fds[STALLED], n = 0;
    for (; n < STALLED; n++) {
        if ((fds[n] = cli_connect(AF_INET, f->port)) < 0) break;
        if (send(fds[n], hello, hlen / 2, MSG_NOSIGNAL) != (ssize_t)(hlen / 2)) break;
    }
    f->val[0] = n;
    SSL_CTX *ctx = client_ctx(1, 0, 0);
    struct tc t;
    if (tls_open(f->port, ctx, NULL, &t) == 0) {
        f->val[1] = exchange(&t, "GET /hello HTTP/1.1\r\n\r\n", "hello");
        tls_close(&t);
    }
    SSL_CTX_free(ctx);
    f->val[2] = n == STALLED && closed_within(fds[0], 5000);
    int others_open = 1;
    for (int i = 1; i < n; i++) others_open &= !closed_within(fds[i], 0);
    f->val[3] = others_open;
    /* the server closes the rest itself (which is not counted) */
    srv_signal_close(&f->run);
    for (int i = 1; i < n; i++) f->val[4] += closed_within(fds[i], 5000);
    for (int i = 0; i < n; i++) close(fds[i]);
}

static void test_tls_stalled_handshakes_evicted(void **state)
{
    (void)state;
    struct fx f = {.opts = {.max_conns = STALLED, .timeout_ms = 15000}};
    run(&f, client_stalled_crowd);
    assert_int_equal(f.val[0], STALLED);
    for (int i = 1; i < 4; i++) assert_int_equal(f.val[i], 1);
    assert_int_equal(f.val[4], STALLED - 1);
    assert_int_equal(tls_server_handshake_failures(f.ts), 1);
    assert_string_equal(f.reasons[0], "evicted at the connection limit");
    fx_free(&f);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as the agent does; see httpd.h */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_load_errors),
        cmocka_unit_test(test_tls_get_post),
        cmocka_unit_test(test_tls_refused_clients),
        cmocka_unit_test(test_tls_slow_handshake_cut_off),
        cmocka_unit_test(test_tls_reload),
        cmocka_unit_test(test_tls_many_clients),
        cmocka_unit_test(test_tls_3mib_bodies),
        cmocka_unit_test(test_tls_graceful_shutdown),
        cmocka_unit_test(test_tls_curl),
        cmocka_unit_test(test_tls_stalled_handshakes_evicted),
    };
    return cmocka_run_group_tests(tests, make_pki, remove_pki);
}
