/*
 * safeopts.c - the safe-reload options' values and combination (see
 * safeopts.h). config/config.c holds their table rows and calls these.
 */
#include "config/safeopts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/exec.h"
#include "base/log.h"
#include "config/config.h"
#include "config/goquote.h"
#include "config/value.h"

#define QMAX 200
#define QV(buf, v) (gq_quote_to((buf), sizeof(buf), (v), strlen(v)), (buf))

/* The actions after which --verify can run in this process: the ones that
 * leave the agent and the pod in place (rollout replaces the pod,
 * restart-pod ends the agent). */
#define IN_PLACE_MASK                                                                              \
    (ACTION_BIT(ACTION_NONE) | ACTION_BIT(ACTION_SIGNAL) | ACTION_BIT(ACTION_HTTP) |               \
     ACTION_BIT(ACTION_EXEC) | ACTION_BIT(ACTION_RESTART))

static int is_url(const char *v)
{
    return strncmp(v, "http://", 7) == 0 || strncmp(v, "https://", 8) == 0;
}

int safeopts_check_verify(const char *v, char *why, size_t n)
{
    if (!*v) return 0;
    if (is_url(v)) {
        for (const char *p = v; *p; p++)
            if ((unsigned char)*p <= ' ') {
                snprintf(why, n, "a URL holds no space or control character");
                return -EINVAL;
            }
        return 0;
    }
    char **argv;
    const char *reason = NULL;
    int rc = exec_split_err(v, &argv, &reason);
    if (rc == -ENOMEM) ra_oom();
    if (rc < 0) {
        snprintf(why, n,
                 "%s (want an http:// or https:// URL, or a command split into words like a "
                 "shell would)",
                 reason);
        return -EINVAL;
    }
    exec_argv_free(argv);
    return 0;
}

int safeopts_check_socket(const char *v, char *why, size_t n)
{
    if (strlen(v) > SAFEOPTS_SOCKET_MAX) {
        snprintf(why, n, "a unix socket path has at most %d bytes", SAFEOPTS_SOCKET_MAX);
        return -EINVAL;
    }
    return 0;
}

int safeopts_storm_limit(const char *v, int uses_rollout, int *max, int64_t *window_ns, char *why,
                         size_t n)
{
    *max = 0;
    *window_ns = 0;
    if (!*v || strcmp(v, "off") == 0) return 0;
    if (strcmp(v, "auto") == 0) {
        if (uses_rollout) {
            *max = SAFEOPTS_STORM_AUTO_MAX;
            *window_ns = SAFEOPTS_STORM_AUTO_WINDOW_NS;
        }
        return 0;
    }
    const char *slash = strchr(v, '/');
    char num[16], dwhy[160];
    uint64_t u;
    int64_t w;
    size_t nlen = slash ? (size_t)(slash - v) : 0;
    if (!slash || nlen == 0 || nlen >= sizeof num) {
        snprintf(why, n, "want N/DURATION (e.g. 5/10m), auto or off");
        return -EINVAL;
    }
    memcpy(num, v, nlen);
    num[nlen] = '\0';
    if (val_uint(num, 1, 1000, &u, dwhy, sizeof dwhy) < 0) {
        snprintf(why, n, "the count %s: %s (want N/DURATION, N from 1 to 1000)", num, dwhy);
        return -EINVAL;
    }
    if (val_duration(slash + 1, &w, dwhy, sizeof dwhy) < 0) {
        snprintf(why, n, "the window: %s", dwhy);
        return -EINVAL;
    }
    if (w < INT64_C(1000000000) || w > INT64_C(86400) * 1000000000) {
        snprintf(why, n, "the window must be 1s to 24h");
        return -EINVAL;
    }
    *max = (int)u;
    *window_ns = w;
    return 0;
}

int safeopts_check_storm_limit(const char *v, char *why, size_t n)
{
    int max;
    int64_t w;
    return safeopts_storm_limit(v, 0, &max, &w, why, n);
}

int safeopts_split_lkg(const char *v, char **src, char **dir)
{
    const char *eq = strchr(v, '=');
    if (!eq || eq == v || !eq[1]) return -EINVAL;
    size_t slen = (size_t)(eq - v);
    while (slen > 1 && v[slen - 1] == '/') slen--;
    *src = strndup(v, slen);
    *dir = ra_strdup(eq + 1);
    if (!*src) ra_oom();
    return 0;
}

/* 1 if path a is b or lies under it (string-wise, as given). */
static int is_under(const char *a, const char *b)
{
    size_t n = strlen(b);
    while (n > 1 && b[n - 1] == '/') n--;
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' || (n == 1 && b[0] == '/'));
}

/* 1 if root (as given, trailing '/' ignored) equals path. */
static int same_root(const char *root, const char *path)
{
    size_t n = strlen(root), m = strlen(path);
    while (n > 1 && root[n - 1] == '/') n--;
    return n == m && strncmp(root, path, n) == 0;
}

/* One --keep-last-good value against the roots and the values before it. */
static int check_one_lkg(const struct config *c, size_t i, const char *src, const char *dir,
                         char *err, size_t errlen)
{
    char q[QMAX];
    const char *v = c->keep_last_good.v[i];
    int found = 0;
    for (size_t w = 0; w < c->watch.n; w++) found |= same_root(c->watch.v[w], src);
    for (size_t w = 0; w < c->env_watch.n; w++)
        if (same_root(c->env_watch.v[w], src))
            return ra_errf(err, errlen, -EINVAL,
                           "invalid value for --keep-last-good: %s: %s is an --env-watch root "
                           "(env is read at container start; there is no file to keep)",
                           QV(q, v), src);
    if (!found)
        return ra_errf(err, errlen, -EINVAL,
                       "invalid value for --keep-last-good: %s: SRC must be one of the --watch "
                       "roots, as given (the agent's own mount of the ConfigMap or Secret)",
                       QV(q, v));
    if (dir[0] != '/')
        return ra_errf(err, errlen, -EINVAL,
                       "invalid value for --keep-last-good: %s: DIR must be an absolute path",
                       QV(q, v));
    const char **roots;
    size_t nroots;
    roots = cfg_watch_roots(c, &nroots);
    for (size_t r = 0; r < nroots; r++)
        if (is_under(dir, roots[r]) || is_under(roots[r], dir)) {
            char root[QMAX];
            snprintf(root, sizeof root, "%s", roots[r]);
            free(roots);
            return ra_errf(err, errlen, -EINVAL,
                           "invalid value for --keep-last-good: %s: DIR and the watched root %s "
                           "overlap (the copies would be watched as content)",
                           QV(q, v), root);
        }
    free(roots);
    for (size_t j = 0; j < i; j++) {
        char *s2, *d2;
        if (safeopts_split_lkg(c->keep_last_good.v[j], &s2, &d2) < 0) continue;
        int clash = strcmp(s2, src) == 0 || is_under(dir, d2) || is_under(d2, dir);
        free(s2);
        free(d2);
        if (clash)
            return ra_errf(err, errlen, -EINVAL,
                           "invalid value for --keep-last-good: %s: its SRC or DIR is given "
                           "twice (or one DIR lies in another)",
                           QV(q, v));
    }
    return 0;
}

static int check_lkg(const struct config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < c->keep_last_good.n; i++) {
        char *src, *dir, q[QMAX];
        if (safeopts_split_lkg(c->keep_last_good.v[i], &src, &dir) < 0)
            return ra_errf(err, errlen, -EINVAL,
                           "invalid value for --keep-last-good: %s: want SRC=DIR (a --watch "
                           "root, and the directory that holds live/ and candidate/)",
                           QV(q, c->keep_last_good.v[i]));
        int rc = check_one_lkg(c, i, src, dir, err, errlen);
        free(src);
        free(dir);
        if (rc < 0) return rc;
    }
    if (c->keep_last_good.n && !(c->state_dir && *c->state_dir))
        return ra_errf(err, errlen, -EINVAL,
                       "--keep-last-good needs --state-dir: the agent keeps there what the app "
                       "was last given and whether the copies are ready (reload-agent ready)");
    return 0;
}

int safeopts_validate(struct config *c, unsigned used_mask, char *err, size_t errlen)
{
    char why[256], q[QMAX];
    if (check_lkg(c, err, errlen) < 0) return -EINVAL;
    if (c->verify && *c->verify && !(used_mask & IN_PLACE_MASK))
        return ra_errf(err, errlen, -EINVAL,
                       "--verify %s: verification runs after an in-place action (none, signal, "
                       "http, exec, restart), and the actions in use only %s",
                       QV(q, c->verify),
                       used_mask & ACTION_BIT(ACTION_ROLLOUT)
                           ? "roll the workload (its controller's readiness checks the new pods)"
                           : "restart the pod (the agent restarts with it)");
    int rollout = (used_mask & ACTION_BIT(ACTION_ROLLOUT)) != 0;
    if (safeopts_storm_limit(c->storm_limit ? c->storm_limit : "", rollout, &c->storm_max,
                             &c->storm_window_ns, why, sizeof why) < 0)
        return ra_errf(err, errlen, -EINVAL, "invalid value for --storm-limit: %s: %s",
                       QV(q, c->storm_limit), why);
    return 0;
}
