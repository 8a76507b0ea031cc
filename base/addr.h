/*
 * addr.h - the listen address syntax of --listen: "HOST:PORT" with a
 * numeric IPv4 host, "[V6]:PORT", or ":PORT" (all IPv4 interfaces). No name
 * lookups: a sidecar's listener must not depend on DNS.
 */
#ifndef RA_ADDR_H
#define RA_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

/* Parses a listen address, PORT 0..65535. Returns 0 and *out, or -EINVAL
 * with a reason naming the bad value in err (errlen bytes, NUL-terminated). */
int addr_parse_listen(const char *listen, struct sockaddr_storage *out, char *err, size_t errlen);

#endif
