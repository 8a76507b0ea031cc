/*
 * redact.h - credentials out of messages: URLs and HTTP headers as they may
 * appear in logs, /status, Events and --print-config.
 *
 * A URL keeps its scheme, host, port, path and query parameter names; its
 * userinfo ("user:pass@") and every query value become "<redacted>", and so
 * does a fragment. A header "Name: value" keeps its name only. The agent
 * never needs the secret to say what went wrong: the endpoint and the
 * parameter names are enough to find the option.
 */
#ifndef RA_REDACT_H
#define RA_REDACT_H

#include <stddef.h>

#define REDACTED "<redacted>"

/* Writes url with its secrets redacted to out (outlen bytes, always
 * NUL-terminated when outlen > 0; truncated if too small). Text that is not
 * a URL is redacted as a URL would be (a '@' before the first '/', '?' or '#'
 * after "scheme://" hides what precedes it). Returns the length the full
 * result needs, like snprintf. url may be NULL (written as ""). */
size_t redact_url(const char *url, char *out, size_t outlen);

/* Writes "Name: <redacted>" for the header line h ("Name: value"), or
 * "<redacted>" when h has no ':'. Returns the length needed, like snprintf. */
size_t redact_header(const char *h, char *out, size_t outlen);

/* Copies text to out with every occurrence of the URL's secrets replaced:
 * the whole URL (by its redacted form), its userinfo and its query. For an
 * error text that may quote the URL (a library's message). Returns the
 * length needed, like snprintf. */
size_t redact_text(const char *text, const char *url, char *out, size_t outlen);

/* The stricter form for a URL that is itself the credential (a Slack,
 * Teams or Google Chat webhook: the secret is in the path): only
 * "scheme://host[:port]", then "/<redacted>" when anything follows.
 * Returns the length needed, like snprintf. */
size_t redact_url_origin(const char *url, char *out, size_t outlen);

/* redact_text with redact_url_origin's rule: the whole URL, its userinfo,
 * and everything after its authority (path, query, fragment) are replaced
 * wherever they occur in text. Returns the length needed, like snprintf. */
size_t redact_text_origin(const char *text, const char *url, char *out, size_t outlen);

#endif
