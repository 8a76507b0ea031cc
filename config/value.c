/*
 * value.c - parsers for option values (flags and reload-agent.io/...
 * annotations): Go durations (time.ParseDuration without negatives, and
 * Duration.String for output), signal names and numbers, Go booleans,
 * comma lists and bounded unsigned integers. Reasons go into the caller's
 * err buffer with the offending value quoted Go-style.
 */
#include "config/value.h"

#include "config/goquote.h"
#include "kube/k8sname.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define QUOTED_MAX 72 /* room for a quoted value in an error message */
#define NS_LIMIT ((uint64_t)1 << 63)

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* ---- durations ---------------------------------------------------------- */

static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"ns", 1},
    {"us", 1000},
    {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
    {"\xce\xbcs", 1000}, /* U+03BC Greek mu */
    {"ms", 1000000},
    {"s", 1000000000},
    {"m", UINT64_C(60000000000)},
    {"h", UINT64_C(3600000000000)},
};

static uint64_t unit_ns(const char *u, size_t n)
{
    size_t k;

    for (k = 0; k < sizeof units / sizeof units[0]; k++)
        if (strlen(units[k].name) == n && memcmp(units[k].name, u, n) == 0) return units[k].ns;
    return 0;
}

/* Follows Go's ParseDuration step by step (including its float64 rounding
 * of fractions) so values mean the same as in Go tools. */
int val_duration(const char *s, int64_t *ns, char *err, size_t errlen)
{
    char q[QUOTED_MAX], uq[QUOTED_MAX];
    const char *p = s, *u;
    uint64_t d = 0;

    if (!s || !*s) return fail(err, errlen, "empty duration");
    gq_quote_to(q, sizeof q, s, strlen(s));
    if (*p == '-') return fail(err, errlen, "negative duration %s not allowed", q);
    if (*p == '+') p++;
    if (strcmp(p, "0") == 0) {
        *ns = 0;
        return 0;
    }
    if (!*p) return fail(err, errlen, "invalid duration %s", q);
    while (*p) {
        uint64_t v = 0, f = 0, unit;
        double scale = 1;
        int pre = 0, post = 0, frac_full = 0;

        if (!(*p == '.' || is_digit(*p)))
            return fail(err, errlen, "invalid duration %s: expected a number at offset %td", q,
                        p - s);
        for (; is_digit(*p); p++, pre = 1) {
            if (v > NS_LIMIT / 10) goto overflow;
            v = v * 10 + (uint64_t)(*p - '0');
            if (v > NS_LIMIT) goto overflow;
        }
        if (*p == '.') {
            /* Extra fraction digits stop adding precision, as in Go. */
            for (p++; is_digit(*p); p++, post = 1) {
                if (frac_full || f > (NS_LIMIT - 1) / 10 ||
                    f * 10 + (uint64_t)(*p - '0') > NS_LIMIT) {
                    frac_full = 1;
                    continue;
                }
                f = f * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            }
        }
        if (!pre && !post) return fail(err, errlen, "invalid duration %s: '.' without digits", q);
        for (u = p; *p && *p != '.' && !is_digit(*p); p++) {
        }
        if (p == u) return fail(err, errlen, "missing unit in duration %s", q);
        unit = unit_ns(u, (size_t)(p - u));
        if (!unit) {
            gq_quote_to(uq, sizeof uq, u, (size_t)(p - u));
            return fail(err, errlen, "unknown unit %s in duration %s (valid: ns, us, ms, s, m, h)",
                        uq, q);
        }
        if (v > NS_LIMIT / unit) goto overflow;
        v *= unit;
        if (f > 0) {
            v += (uint64_t)((double)f * ((double)unit / scale));
            if (v > NS_LIMIT) goto overflow;
        }
        if (v > NS_LIMIT - d) goto overflow;
        d += v;
    }
    if (d > NS_LIMIT - 1) goto overflow;
    *ns = (int64_t)d;
    return 0;
overflow:
    return fail(err, errlen, "duration %s is too large (max 2562047h47m16.854775807s)", q);
}

/* Writes the digits of v / 10^prec after a '.' ending at buf[w], dropping
 * trailing zeros (and the '.' if none remain); returns the new start and
 * stores the integer part in *v. */
static size_t fmt_frac(char *buf, size_t w, uint64_t *v, int prec)
{
    int print = 0, i;

    for (i = 0; i < prec; i++) {
        char digit = (char)(*v % 10);
        print = print || digit != 0;
        if (print) buf[--w] = (char)('0' + digit);
        *v /= 10;
    }
    if (print) buf[--w] = '.';
    return w;
}

static size_t fmt_int(char *buf, size_t w, uint64_t v)
{
    do {
        buf[--w] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return w;
}

/* Go's Duration.String, byte for byte. */
void val_format_duration(int64_t ns, char *out, size_t outlen)
{
    char buf[32];
    size_t w = sizeof buf;
    uint64_t u = (uint64_t)ns;

    if (ns < 0) u = -u;
    if (u < 1000000000) {
        int prec = 0;
        buf[--w] = 's';
        if (u == 0) {
            buf[--w] = '0';
        } else {
            if (u < 1000) {
                buf[--w] = 'n';
            } else if (u < 1000000) {
                prec = 3;
                w -= 2;
                memcpy(buf + w, "\xc2\xb5", 2);
            } else {
                prec = 6;
                buf[--w] = 'm';
            }
            w = fmt_frac(buf, w, &u, prec);
            w = fmt_int(buf, w, u);
        }
    } else {
        buf[--w] = 's';
        w = fmt_frac(buf, w, &u, 9);
        w = fmt_int(buf, w, u % 60);
        u /= 60;
        if (u > 0) {
            buf[--w] = 'm';
            w = fmt_int(buf, w, u % 60);
            u /= 60;
            if (u > 0) {
                buf[--w] = 'h';
                w = fmt_int(buf, w, u);
            }
        }
    }
    if (ns < 0) buf[--w] = '-';
    if (outlen) snprintf(out, outlen, "%.*s", (int)(sizeof buf - w), buf + w);
}

/* ---- signals ------------------------------------------------------------ */

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"SIGHUP", SIGHUP},   {"SIGINT", SIGINT},       {"SIGQUIT", SIGQUIT}, {"SIGILL", SIGILL},
    {"SIGTRAP", SIGTRAP}, {"SIGABRT", SIGABRT},     {"SIGBUS", SIGBUS},   {"SIGFPE", SIGFPE},
    {"SIGKILL", SIGKILL}, {"SIGUSR1", SIGUSR1},     {"SIGSEGV", SIGSEGV}, {"SIGUSR2", SIGUSR2},
    {"SIGPIPE", SIGPIPE}, {"SIGALRM", SIGALRM},     {"SIGTERM", SIGTERM}, {"SIGSTKFLT", SIGSTKFLT},
    {"SIGCHLD", SIGCHLD}, {"SIGCONT", SIGCONT},     {"SIGSTOP", SIGSTOP}, {"SIGTSTP", SIGTSTP},
    {"SIGTTIN", SIGTTIN}, {"SIGTTOU", SIGTTOU},     {"SIGURG", SIGURG},   {"SIGXCPU", SIGXCPU},
    {"SIGXFSZ", SIGXFSZ}, {"SIGVTALRM", SIGVTALRM}, {"SIGPROF", SIGPROF}, {"SIGWINCH", SIGWINCH},
    {"SIGIO", SIGIO},     {"SIGPOLL", SIGPOLL},     {"SIGPWR", SIGPWR},   {"SIGSYS", SIGSYS},
};

/* Names of SIGRTMIN+k and SIGRTMAX-k, k = 1..16, as `kill -l` prints them. */
static const char *const rtmin_names[] = {
    "SIGRTMIN+1",  "SIGRTMIN+2",  "SIGRTMIN+3",  "SIGRTMIN+4",  "SIGRTMIN+5",  "SIGRTMIN+6",
    "SIGRTMIN+7",  "SIGRTMIN+8",  "SIGRTMIN+9",  "SIGRTMIN+10", "SIGRTMIN+11", "SIGRTMIN+12",
    "SIGRTMIN+13", "SIGRTMIN+14", "SIGRTMIN+15", "SIGRTMIN+16",
};
static const char *const rtmax_names[] = {
    "SIGRTMAX-1",  "SIGRTMAX-2",  "SIGRTMAX-3",  "SIGRTMAX-4",  "SIGRTMAX-5",  "SIGRTMAX-6",
    "SIGRTMAX-7",  "SIGRTMAX-8",  "SIGRTMAX-9",  "SIGRTMAX-10", "SIGRTMAX-11", "SIGRTMAX-12",
    "SIGRTMAX-13", "SIGRTMAX-14", "SIGRTMAX-15", "SIGRTMAX-16",
};

/* Parses 1-3 decimal digits filling all of s; -1 otherwise. */
static int small_number(const char *s)
{
    size_t n = strlen(s), k;
    int v = 0;

    if (n == 0 || n > 3) return -1;
    for (k = 0; k < n; k++) {
        if (!is_digit(s[k])) return -1;
        v = v * 10 + (s[k] - '0');
    }
    return v;
}

/* "RTMIN", "RTMIN+n", "RTMAX", "RTMAX-n" (SIG already stripped); returns the
 * signal, 0 if name is no RT name, -1 if the offset is bad or out of range. */
static int rt_signal(const char *name)
{
    int base, off = 0, sig;

    if (strncasecmp(name, "RTMIN", 5) == 0)
        base = SIGRTMIN;
    else if (strncasecmp(name, "RTMAX", 5) == 0)
        base = SIGRTMAX;
    else
        return 0;
    if (name[5]) {
        if (name[5] != (base == SIGRTMIN ? '+' : '-')) return -1;
        off = small_number(name + 6);
        if (off < 0) return -1;
    }
    sig = base == SIGRTMIN ? base + off : base - off;
    return sig >= SIGRTMIN && sig <= SIGRTMAX ? sig : -1;
}

int val_signal(const char *s, int *sig, char *err, size_t errlen)
{
    char q[QUOTED_MAX];
    const char *name;
    size_t k;
    int v;

    if (!s || !*s) return fail(err, errlen, "empty signal");
    gq_quote_to(q, sizeof q, s, strlen(s));
    if (strspn(s, "0123456789") == strlen(s)) {
        v = small_number(s); /* -1 for more than 3 digits */
        if (v < 1 || v > 64) return fail(err, errlen, "signal number %s out of range 1..64", q);
        *sig = v;
        return 0;
    }
    name = strncasecmp(s, "SIG", 3) == 0 ? s + 3 : s;
    for (k = 0; k < sizeof signals / sizeof signals[0]; k++) {
        if (strcasecmp(name, signals[k].name + 3) == 0) {
            *sig = signals[k].sig;
            return 0;
        }
    }
    v = rt_signal(name);
    if (v > 0) {
        *sig = v;
        return 0;
    }
    if (v < 0)
        return fail(err, errlen, "invalid real-time signal %s (SIGRTMIN..SIGRTMAX is %d..%d)", q,
                    SIGRTMIN, SIGRTMAX);
    return fail(err, errlen,
                "unknown signal %s (use a name like HUP or SIGUSR1, or a number 1..64)", q);
}

const char *val_signal_name(int sig)
{
    size_t k;

    for (k = 0; k < sizeof signals / sizeof signals[0]; k++)
        if (signals[k].sig == sig) return signals[k].name;
    if (sig == SIGRTMIN) return "SIGRTMIN";
    if (sig == SIGRTMAX) return "SIGRTMAX";
    if (sig < SIGRTMIN || sig > SIGRTMAX) return NULL;
    k = (size_t)(sig - SIGRTMIN);
    if (k <= (size_t)(SIGRTMAX - sig)) return k <= 16 ? rtmin_names[k - 1] : NULL;
    k = (size_t)(SIGRTMAX - sig);
    return k <= 16 ? rtmax_names[k - 1] : NULL;
}

/* ---- booleans, lists, integers ------------------------------------------ */

int val_bool(const char *s, int *b, char *err, size_t errlen)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    char q[QUOTED_MAX];
    size_t k;

    if (!s) s = "";
    for (k = 0; k < sizeof yes / sizeof yes[0]; k++) {
        if (strcmp(s, yes[k]) == 0) {
            *b = 1;
            return 0;
        }
        if (strcmp(s, no[k]) == 0) {
            *b = 0;
            return 0;
        }
    }
    gq_quote_to(q, sizeof q, s, strlen(s));
    return fail(err, errlen, "invalid boolean %s (use true or false)", q);
}

static int is_space(char c) { return c == ' ' || c == '\t'; }

void val_list_free(char **items)
{
    size_t k;

    if (!items) return;
    for (k = 0; items[k]; k++) free(items[k]);
    free(items);
}

int val_list(const char *s, char ***items, size_t *n, char *err, size_t errlen)
{
    char q[QUOTED_MAX];
    const char *p, *end, *a, *b;
    size_t count = 1, k = 0;
    char **v;

    *items = NULL;
    *n = 0;
    if (!s) s = "";
    for (p = s; *p; p++) count += *p == ',';
    v = calloc(count + 1, sizeof *v);
    if (!v) {
        fail(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (p = s; is_space(*p); p++) {
    }
    if (!*p) { /* empty or only spaces: empty list */
        *items = v;
        return 0;
    }
    for (p = s;; p = end + 1) {
        end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        for (a = p; a < end && is_space(*a); a++) {
        }
        for (b = end; b > a && is_space(b[-1]); b--) {
        }
        if (a == b) {
            val_list_free(v);
            gq_quote_to(q, sizeof q, s, strlen(s));
            return fail(err, errlen, "empty item %zu in list %s", k + 1, q);
        }
        v[k] = strndup(a, (size_t)(b - a));
        if (!v[k]) {
            val_list_free(v);
            fail(err, errlen, "out of memory");
            return -ENOMEM;
        }
        k++;
        if (!*end) break;
    }
    *items = v;
    *n = k;
    return 0;
}

int val_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out, char *err, size_t errlen)
{
    char q[QUOTED_MAX];
    uint64_t v = 0;
    const char *p;

    if (!s || !*s) return fail(err, errlen, "empty number");
    gq_quote_to(q, sizeof q, s, strlen(s));
    for (p = s; *p; p++) {
        if (!is_digit(*p)) return fail(err, errlen, "invalid unsigned integer %s", q);
        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10) goto range;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < min || v > max) goto range;
    *out = v;
    return 0;
range:
    return fail(err, errlen, "number %s out of range %" PRIu64 "..%" PRIu64, q, min, max);
}

/* ---- annotation keys --------------------------------------------------- */

static int is_alnum(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* The prefix s[0..n) as a DNS-1123 subdomain (kube/k8sname.h), compared
 * lower-cased (ValidateAnnotations lowers the key): NULL, or which rule it
 * breaks. */
static const char *subdomain_error(const char *s, size_t n)
{
    char low[K8S_DNS1123_SUBDOMAIN_MAX + 1];

    if (n > K8S_DNS1123_SUBDOMAIN_MAX) return "its prefix is longer than 253 characters";
    for (size_t k = 0; k < n; k++) low[k] = (char)tolower((unsigned char)s[k]);
    low[n] = '\0';
    if (!k8s_is_dns1123_subdomain(low)) return "its prefix is not a DNS subdomain (example.com)";
    return NULL;
}

int val_annotation_key(const char *s, char *err, size_t errlen)
{
    char q[QUOTED_MAX];
    const char *slash, *name, *why = NULL;
    size_t n, k;

    if (!s || !*s) return fail(err, errlen, "empty annotation key");
    gq_quote_to(q, sizeof q, s, strlen(s));
    slash = strchr(s, '/');
    name = slash ? slash + 1 : s;
    if (slash && strchr(name, '/'))
        why = "it holds more than one '/'";
    else if (slash && slash == s)
        why = "the prefix before '/' is empty";
    else if (slash)
        why = subdomain_error(s, (size_t)(slash - s));
    n = strlen(name);
    if (!why && n == 0)
        why = "the name after '/' is empty";
    else if (!why && n > K8S_QUALIFIED_NAME_MAX)
        why = "its name part is longer than 63 characters";
    for (k = 0; !why && k < n; k++)
        if (!(is_alnum(name[k]) ||
              ((name[k] == '-' || name[k] == '_' || name[k] == '.') && k > 0 && k + 1 < n)))
            why = "its name must be [-_.A-Za-z0-9], starting and ending with a letter or digit";
    if (why)
        return fail(
            err, errlen,
            "invalid annotation key %s: %s ([prefix/]name, like reload-agent.io/config-hash)", q,
            why);
    return 0;
}
