/*
 * tls.h - server-side TLS for the built-in HTTP server (net/httpd.c), with
 * OpenSSL (Debian libssl-dev, linked statically).
 *
 * A struct tls_server holds the current SSL_CTX, built from a PEM
 * certificate chain file (leaf first, then intermediates) and a PEM private
 * key file. Settings (docs/tls.md says why): TLS 1.2 minimum (TLS 1.3
 * preferred), ECDHE with AES-GCM or ChaCha20-Poly1305 only for TLS 1.2, the
 * server's cipher order, no compression, no renegotiation, no session
 * tickets and no session cache (every connection does a full handshake; the
 * API server keeps its connections alive), ALPN "http/1.1" when offered.
 *
 * tls_server_reload() builds a new SSL_CTX and swaps it in for NEW
 * connections only: each SSL holds a reference on the SSL_CTX it was made
 * from, so existing connections keep theirs until they close. On failure
 * the old one stays.
 *
 * A struct tls_conn is one connection's TLS state over two memory BIOs: the
 * caller feeds the ciphertext it read from the socket (tls_conn_feed),
 * pulls plaintext (tls_conn_read, which also drives the server handshake),
 * pushes plaintext (tls_conn_write) and takes the ciphertext to send
 * (tls_conn_take). Nothing here touches a socket or blocks, so it runs
 * inside the libuv loop. Loop objects: out of memory aborts (ra_oom).
 *
 * Handshake failures (a TLS error such as a refused protocol version or an
 * unknown CA, or a client that went away or timed out after starting the
 * handshake) are counted per server and reported to an optional hook, for
 * metrics; a connection that closes before sending a byte (a TCP probe) is
 * not counted.
 */
#ifndef RA_TLS_H
#define RA_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct tls_server;
struct tls_conn;

/* Loads cert_file (PEM chain, leaf first) and key_file (PEM key) into a new
 * server. Returns 0 and *out; 1 and *out when the files are loaded but the
 * leaf is expired or not yet valid (err says which and when; TLS clients
 * will refuse it, but a server that starts lets a rotation fix it); or <0
 * and nothing allocated, err naming the file and the reason:
 *   -errno    the file cannot be read (-ENOENT, -EACCES, ...; ra_read_file);
 *   -EINVAL   not PEM, no certificate / no key in it, or OpenSSL refused it
 *             (OpenSSL's reason is quoted), the key does not match the
 *             certificate, or a key too weak for OpenSSL's security level.
 * err (errlen bytes) is "" after a plain success. */
int tls_server_create(const char *cert_file, const char *key_file, struct tls_server **out,
                      char *err, size_t errlen);

/* Builds a new SSL_CTX from cert_file and key_file and makes it the one new
 * connections use; connections already open keep theirs. Returns as
 * tls_server_create (0, 1 = loaded but outside its validity period, <0 =
 * not loaded: the previous certificate stays in use and err says why). */
int tls_server_reload(struct tls_server *ts, const char *cert_file, const char *key_file, char *err,
                      size_t errlen);

/* The current leaf certificate's notAfter, as a Unix time. */
int64_t tls_server_not_after(const struct tls_server *ts);

/* The current leaf certificate's subject (one line, RFC 2253) and serial
 * (hex), for logs. Static storage owned by ts, valid until the next
 * successful reload or destroy. */
const char *tls_server_subject(const struct tls_server *ts);
const char *tls_server_serial(const struct tls_server *ts);

/* Handshakes that failed or were abandoned (see above), since creation. */
uint64_t tls_server_handshake_failures(const struct tls_server *ts);

/* Calls hook(ud, reason) on each counted handshake failure, on the loop
 * thread, from inside the httpd read or timer callback. reason is a short
 * static or OpenSSL string ("timeout", "eof", "unsupported protocol", ...),
 * valid during the call. hook may be NULL to remove it. */
void tls_server_set_failure_hook(struct tls_server *ts, void (*hook)(void *ud, const char *reason),
                                 void *ud);

/* Frees ts. Connections made from it must have been freed first (the
 * httpd that uses it must have finished closing). NULL is a no-op. */
void tls_server_destroy(struct tls_server *ts);

/* ---- one connection (used by net/httpd.c) ---- */

/* A new server-side connection with the current SSL_CTX. Never NULL. */
struct tls_conn *tls_conn_new(struct tls_server *ts);

/* Frees tc (NULL is a no-op). If its handshake had started but not
 * finished, counts a failure with reason why (e.g. "timeout"), unless why
 * is NULL (the server itself is closing). */
void tls_conn_free(struct tls_conn *tc, const char *why);

/* Appends len bytes of ciphertext read from the peer. */
void tls_conn_feed(struct tls_conn *tc, const char *data, size_t len);

/* Drives the handshake and decrypts into buf (cap bytes). Returns the
 * number of plaintext bytes (>0); 0 when more ciphertext is needed;
 * TLS_CONN_EOF when the peer sent close_notify; TLS_CONN_ERROR on a TLS
 * failure (a handshake failure is counted; OpenSSL's error queue is
 * cleared). Either way, call tls_conn_take afterwards: the handshake or an
 * alert may have produced bytes to send. */
#define TLS_CONN_EOF (-1)
#define TLS_CONN_ERROR (-2)
long tls_conn_read(struct tls_conn *tc, char *buf, size_t cap);

/* 1 once the handshake has completed. */
int tls_conn_is_established(const struct tls_conn *tc);

/* Encrypts len bytes (the handshake must have completed). Returns 0, or
 * TLS_CONN_ERROR. The ciphertext is then available through tls_conn_take. */
int tls_conn_write(struct tls_conn *tc, const char *data, size_t len);

/* Queues a close_notify alert (then tls_conn_take). */
void tls_conn_shutdown(struct tls_conn *tc);

/* Moves the pending ciphertext out: returns its length and *out (malloc'd,
 * the caller frees it), or 0 and *out = NULL when there is none. */
size_t tls_conn_take(struct tls_conn *tc, char **out);

#endif
