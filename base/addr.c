/*
 * addr.c - parsing the listen address of the agent's HTTP server (see
 * addr.h). It lives on the ground floor because both the option check
 * (config/) and the server (net/) need it.
 */
#include "base/addr.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

int addr_parse_listen(const char *listen, struct sockaddr_storage *out, char *err, size_t errlen)
{
    const char *colon = listen ? strrchr(listen, ':') : NULL;
    if (!colon) {
        snprintf(err, errlen, "listen address \"%s\": expected HOST:PORT, [IPV6]:PORT or :PORT",
                 listen ? listen : "");
        return -EINVAL;
    }
    const char *p = colon + 1;
    size_t nd = strspn(p, "0123456789");
    long port = nd >= 1 && nd <= 5 && p[nd] == '\0' ? strtol(p, NULL, 10) : -1;
    if (port < 0 || port > 65535) {
        snprintf(err, errlen, "listen address \"%s\": port \"%s\" is not a number 0-65535", listen,
                 p);
        return -EINVAL;
    }
    char host[64];
    const char *h = listen;
    size_t hlen = (size_t)(colon - listen);
    int v6 = hlen >= 2 && h[0] == '[' && h[hlen - 1] == ']';
    if (v6) {
        h++;
        hlen -= 2;
    }
    if (hlen >= sizeof host) {
        snprintf(err, errlen, "listen address \"%s\": host is too long", listen);
        return -EINVAL;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memset(out, 0, sizeof *out);
    int rc = v6 ? uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)out)
                : uv_ip4_addr(hlen ? host : "0.0.0.0", (int)port, (struct sockaddr_in *)out);
    if (rc != 0 || (v6 && hlen == 0)) {
        snprintf(err, errlen,
                 "listen address \"%s\": host \"%s\" is not a numeric IPv4 address "
                 "or a [bracketed] IPv6 address",
                 listen, host);
        return -EINVAL;
    }
    return 0;
}
