/*
 * b64.h - standard base64 (RFC 4648 §4, with padding), as Kubernetes
 * encodes []byte fields (Go's encoding/base64 StdEncoding): the AdmissionReview
 * patch, Secret data, ConfigMap binaryData, a webhook's caBundle.
 */
#ifndef RA_B64_H
#define RA_B64_H

#include <stddef.h>

/* Returns the base64 of p[0..n), NUL-terminated, without line breaks, in a
 * malloc'd string (free it), or NULL when out of memory. */
char *ra_b64_encode(const void *p, size_t n);

/* Decodes s (NUL-terminated) as Go's StdEncoding does: padding required,
 * '\r' and '\n' skipped anywhere, nothing but line breaks after the
 * padding. Returns the decoded length and *out, a malloc'd buffer (free it)
 * with a NUL after the decoded bytes; -EINVAL (not valid base64, *out
 * untouched) or -ENOMEM. */
long ra_b64_decode(const char *s, unsigned char **out);

#endif
