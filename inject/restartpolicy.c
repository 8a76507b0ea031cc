/*
 * restartrule.c - the container restart rules the injection adds
 * (transform_int.h), so that the kubelet restarts what the agent's actions
 * need restarted:
 *
 *   - restart-pod (KEP-5532): the sidecar carries [{action:
 *     RestartAllContainers, exitCodes: {operator: In, values: [N]}}] for
 *     the agent's exit code N; the agent gets the same JSON as
 *     --restart-policy-rules and a pod-lifetime --state-dir (an emptyDir).
 *     A sidecar may carry rules only where RestartAllContainers is on (beta,
 *     on by default from 1.36): elsewhere the API server rejects the pod, so
 *     the injection is refused below it, with the field and the version.
 *   - restart (KEP-5307): in a pod whose restartPolicy is Never or OnFailure
 *     (every Job's), the app container gets restartPolicy (the pod's) and
 *     [{action: Restart, exitCodes: {operator: In, values: [128+signo]}}],
 *     the code the runtime reports for a process the restart signal
 *     killed: the app is restarted in place instead of ending the pod.
 *     Below 1.35 the API server drops the field (its gate is off), so it is
 *     left out with a warning.
 *
 * Field shapes and rules as the API validates them (k8s.io/kubernetes
 * pkg/apis/core/validation, validateContainerRestartPolicy): a container
 * with rules must state its restartPolicy; at most 20 rules of at most 255
 * codes; the first rule that matches decides.
 */
#include "inject/transform_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/restartrules.h"

int inject_parse_kube_version(const char *s, int *minor)
{
    if (!s) return -EINVAL;
    if (*s == 'v') s++;
    if (strncmp(s, "1.", 2) != 0) return -EINVAL;
    s += 2;
    int n = 0, digits = 0;
    for (; *s >= '0' && *s <= '9' && digits < 4; s++, digits++) n = n * 10 + (*s - '0');
    /* after the minor: the end, or ".PATCH" and anything a build appends */
    if (!digits || digits > 3 || (*s && *s != '.') ||
        (s[0] == '.' && !(s[1] >= '0' && s[1] <= '9')))
        return -EINVAL;
    if (n < 20) return -EINVAL; /* no release before native sidecars is a target */
    *minor = n;
    return 0;
}

/* The Kubernetes minor version the injection is for (opts->kube_minor, or
 * INJECT_KUBE_MINOR_DEFAULT). */
static int target_minor(const struct inject__ctx *x)
{
    return x->opts->kube_minor > 0 ? x->opts->kube_minor : INJECT_KUBE_MINOR_DEFAULT;
}

/* Where the version came from, for the messages. */
static const char *kube_from(const struct inject__ctx *x)
{
    return x->opts->kube_from ? x->opts->kube_from : "--kube-version";
}

int inject__plan_restart_pod(struct inject__ctx *x, int code, char *rules, size_t n)
{
    int minor = target_minor(x);
    if (minor < INJECT__KUBE_MINOR_RESTART_ALL) {
        snprintf(x->err, x->errlen,
                 "restart-pod: Kubernetes 1.%d (%s) rejects restartPolicyRules on "
                 "the sidecar; RestartAllContainers (KEP-5532) is on by default from 1.%d",
                 minor, kube_from(x), INJECT__KUBE_MINOR_RESTART_ALL);
        return 0;
    }
    restartrules_for_code(code, rules, n);
    return 1;
}

/* A rule list [{action, exitCodes: {operator: In, values: [code]}}]. */
static cJSON *rule_list(struct inject__ctx *x, const char *action, int code)
{
    cJSON *list = inject__new_arr(x), *rule = inject__new_obj(x), *ec = inject__new_obj(x);
    cJSON *vals = inject__new_arr(x);
    inject__add(x, rule, "action", inject__str(x, action));
    inject__add(x, ec, "operator", inject__str(x, "In"));
    inject__push(x, vals, cJSON_CreateNumber(code));
    inject__add(x, ec, "values", vals);
    inject__add(x, rule, "exitCodes", ec);
    inject__push(x, list, rule);
    return list;
}

/* The app's own rules decide (they are the user's, never changed): warns
 * when the first match for code does not restart the container. */
static void check_own_rules(struct inject__ctx *x, const struct inject__app *app,
                            const cJSON *rules, int code)
{
    char why[256] = "";
    char *json = cJSON_PrintUnformatted(rules);
    if (!json) {
        x->oom = 1;
        return;
    }
    int v = restartrules_verdict(json, code, why, sizeof why);
    cJSON_free(json);
    if (v == RESTARTRULES_RESTART || v == RESTARTRULES_RESTART_ALL) return;
    inject__warn(x,
                 "container %s's own restartPolicyRules do not restart it on exit code %d: the "
                 "restart action would end it",
                 app->name, code);
}

int inject__plan_app_rule(struct inject__ctx *x, const struct inject__app *app, int signo,
                          struct inject__app_rule *r)
{
    char sp[96], cp[160];
    const char *pod_policy = NULL, *own_policy = NULL;
    const cJSON *own_rules = NULL;
    r->index = -1;
    r->code = 128 + signo;
    r->policy = NULL;
    snprintf(sp, sizeof sp, "%sspec", x->tpath);
    snprintf(cp, sizeof cp, "%s%s", x->tpath, app->path);
    if (inject__get_str(x, x->spec, sp, "restartPolicy", &pod_policy) < 0 ||
        inject__get_str(x, app->c, cp, "restartPolicy", &own_policy) < 0 ||
        inject__get_arr(x, app->c, cp, "restartPolicyRules", &own_rules) < 0)
        return -EINVAL;
    const char *policy = own_policy ? own_policy : pod_policy ? pod_policy : "Always";
    if (strcmp(policy, "Always") == 0) return 0; /* the kubelet restarts it on any exit */
    if (own_rules) {
        check_own_rules(x, app, own_rules, r->code);
        return 0;
    }
    int minor = target_minor(x);
    if (minor < INJECT__KUBE_MINOR_RESTART_RULES) {
        inject__warn(x,
                     "restart: Kubernetes 1.%d (%s) has no restartPolicyRules (1.%d+): "
                     "container %s (restartPolicy %.20s) ends when restarted",
                     minor, kube_from(x), INJECT__KUBE_MINOR_RESTART_RULES, app->name, policy);
        return 0;
    }
    if (sscanf(app->path, "spec.containers[%d]", &r->index) != 1) r->index = -1;
    r->policy = own_policy ? NULL : policy;
    return 0;
}

void inject__emit_app_rule(struct inject__ctx *x, cJSON *ops, const char *spec_path,
                           const struct inject__app_rule *r)
{
    if (r->index < 0) return;
    if (r->policy) {
        char *p = inject__printf(x, "%s/containers/%d/restartPolicy", spec_path, r->index);
        inject__op(x, ops, "add", p, inject__str(x, r->policy));
        free(p);
    }
    char *p = inject__printf(x, "%s/containers/%d/restartPolicyRules", spec_path, r->index);
    inject__op(x, ops, "add", p, rule_list(x, "Restart", r->code));
    free(p);
}
