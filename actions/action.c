/*
 * action.c - the table of actions and the lookups over it (see action.h),
 * the parameters' lifetime, and the none action.
 */
#include "actions/action.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

struct action_row {
    const char *name;
    int strength;
    int pod_events;
    const struct action_ops *ops;
};

/* THE table: one row per action. */
static const struct action_row ROWS[ACTION__COUNT] = {
    [ACTION_NONE] = {"none", 0, 0, &action__none_ops},
    [ACTION_SIGNAL] = {"signal", 1, 1, &action__signal_ops},
    [ACTION_HTTP] = {"http", 1, 1, &action__http_ops},
    [ACTION_EXEC] = {"exec", 1, 1, &action__exec_ops},
    [ACTION_RESTART] = {"restart", 2, 1, &action__restart_ops},
    [ACTION_ROLLOUT] = {"rollout", 4, 0, &action__rollout_ops},
    /* no pod Events: the agent exits at once; the one that starts again
     * posts PodRestarted from the record (run/statedir.h) */
    [ACTION_RESTART_POD] = {"restart-pod", 3, 0, &action__restart_pod_ops},
};

static const struct action_ops *g_test_ops[ACTION__COUNT];

static const struct action_ops *ops_of(enum action a)
{
    return g_test_ops[a] ? g_test_ops[a] : ROWS[a].ops;
}

static int valid(int a) { return a >= 0 && a < ACTION__COUNT; }

const char *action_name(int a) { return valid(a) ? ROWS[a].name : "?"; }

int action_by_name(const char *name, enum action *out)
{
    for (int a = 0; a < ACTION__COUNT; a++)
        if (name && strcmp(ROWS[a].name, name) == 0) {
            *out = (enum action)a;
            return 0;
        }
    return -EINVAL;
}

const char *const *action_names(void)
{
    static const char *names[ACTION__COUNT + 1];
    if (!names[0])
        for (int a = 0; a < ACTION__COUNT; a++) names[a] = ROWS[a].name;
    return names;
}

const char *action_names_joined(void)
{
    static char joined[128];
    if (!joined[0]) {
        size_t len = 0;
        for (int a = 0; a < ACTION__COUNT && len < sizeof joined; a++)
            len += (size_t)snprintf(joined + len, sizeof joined - len, "%s%s", a ? "|" : "",
                                    ROWS[a].name);
    }
    return joined;
}

int action_posts_pod_events(enum action a) { return valid(a) && ROWS[a].pod_events; }

unsigned action_strongest(unsigned mask)
{
    int best = -1;
    unsigned set = 0;
    for (int a = 0; a < ACTION__COUNT; a++) {
        if (!(mask & ACTION_BIT(a))) continue;
        if (ROWS[a].strength > best) {
            best = ROWS[a].strength;
            set = 0;
        }
        if (ROWS[a].strength == best) set |= ACTION_BIT(a);
    }
    return set;
}

void action_start(struct action_env *env, enum action a, const struct action_params *p,
                  action_done done, void *ud)
{
    if (!valid(a)) {
        struct action_result r = {-EINVAL, 1, "unknown action", 0};
        done(ud, a, &r);
        return;
    }
    if (p->dry_run) {
        struct action_result r = {0, 0, NULL, 0};
        done(ud, a, &r);
        return;
    }
    ops_of(a)->start(env, p, done, ud);
}

int action_abort(struct action_env *env, enum action a)
{
    if (!valid(a) || !ops_of(a)->abort) return 0;
    ops_of(a)->abort(env);
    return 1;
}

void action_env_release(struct action_env *env)
{
    for (int a = 0; a < ACTION__COUNT; a++)
        if (ops_of((enum action)a)->release) ops_of((enum action)a)->release(env);
}

void action__register_test(enum action a, const struct action_ops *ops)
{
    if (valid(a)) g_test_ops[a] = ops;
}

/* ---- parameters ---- */

static void strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i]);
    free(v);
}

char **action_strv_dup(char *const *v, size_t n)
{
    if (n == 0) return NULL;
    char **out = calloc(n, sizeof *out);
    if (!out) ra_oom();
    for (size_t i = 0; i < n; i++) out[i] = ra_strdup(v[i]);
    return out;
}

void action_params_free(struct action_params *p)
{
    free(p->process);
    free(p->pid_file);
    free(p->http_url);
    free(p->http_method);
    strv_free(p->http_headers, p->nhttp_headers);
    strv_free(p->http_expect, p->nhttp_expect);
    free(p->exec_command);
    free(p->hash_annotation);
    free(p->rollout_files);
    free(p->state_dir);
    free(p->restart_pod_files);
    free(p->restart_pod_record);
    memset(p, 0, sizeof *p);
}

/* ---- the none action: nothing to do, always a success ---- */

static void none_start(struct action_env *env, const struct action_params *p, action_done done,
                       void *ud)
{
    struct action_result r = {0, 0, NULL, 0};
    (void)env;
    (void)p;
    done(ud, ACTION_NONE, &r);
}

const struct action_ops action__none_ops = {none_start, NULL, NULL};
