/*
 * quantity.c - Kubernetes resource quantities (apimachinery
 * resource.Quantity) for the sidecar's resources: the grammar the API
 * server accepts, and the value, so a memory request above its limit is
 * refused before it reaches the API server (which would reject the pod).
 *
 *   quantity ::= ["+"] number suffix
 *   number   ::= digits | digits "." [digits] | "." digits
 *   suffix   ::= "" | "m" | "k" | "M" | "G" | "T" | "P" | "E"
 *              | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei"
 *              | ("e" | "E") ["+" | "-"] digits
 * Negative quantities are not accepted (resources cannot be negative).
 */
#include "inject/transform_int.h"

#include <errno.h>
#include <math.h>
#include <string.h>

int inject__quantity(const char *s, long double *out)
{
    const char *p = s;
    long double v = 0, scale = 1;
    int digits = 0;
    if (strlen(s) > 64) return -EINVAL;
    if (*p == '+') p++;
    for (; *p >= '0' && *p <= '9'; p++, digits++) v = v * 10 + (*p - '0');
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            scale /= 10;
            v += (*p - '0') * scale;
        }
    }
    if (!digits) return -EINVAL;
    static const struct {
        const char *s;
        long double mult;
    } SUFFIX[] = {
        {"", 1},
        {"m", 1e-3L},
        {"k", 1e3L},
        {"M", 1e6L},
        {"G", 1e9L},
        {"T", 1e12L},
        {"P", 1e15L},
        {"E", 1e18L},
        {"Ki", 1024.0L},
        {"Mi", 1048576.0L},
        {"Gi", 1073741824.0L},
        {"Ti", 1099511627776.0L},
        {"Pi", 1125899906842624.0L},
        {"Ei", 1152921504606846976.0L},
    };
    for (size_t i = 0; i < sizeof SUFFIX / sizeof SUFFIX[0]; i++)
        if (strcmp(p, SUFFIX[i].s) == 0) {
            *out = v * SUFFIX[i].mult;
            return 0;
        }
    if (*p != 'e' && *p != 'E') return -EINVAL;
    p++;
    int neg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    if (!*p) return -EINVAL;
    long exp = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return -EINVAL;
        if (exp < 100000) exp = exp * 10 + (*p - '0');
    }
    *out = v * powl(10.0L, (long double)(neg ? -exp : exp));
    return 0;
}
