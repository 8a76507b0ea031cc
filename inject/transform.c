/*
 * transform.c - the sidecar-injection transform (contract in transform.h,
 * user reference in docs/inject.md): where the pod template is, who opted
 * in, the refusals, the agent's configuration judged by the agent's own
 * parser, and the JSON Patch operations of a first injection or of a
 * reinvocation (mirrors of volumes added since). Planning the volumes is
 * volumes.c's, the container sidecar.c's.
 *
 * Order of checks: a Rollout with a workloadRef, opt-in (inject: "true",
 * or opts->all; "false" always refuses), a pod template with containers, a
 * container named reload-agent that was not injected, hostPID, a non-Linux
 * spec.os, already injected (reinvocation), then the plan: env volumes,
 * mirrors, the configuration (a sidecar that would exit 2 is never
 * injected; restart-pod's rule, refused where the cluster would reject it),
 * the sidecar's settings, identity, token, restart's rule on the app
 * (restartrule.c).
 *
 * Fields are read where they are used, each type-checked (a wrong type is
 * -EINVAL naming its path); an object that is not opted in is not looked
 * at beyond its template's annotations.
 */
#include "inject/transform.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/action.h"
#include "base/text.h"
#include "config/annotations.h"
#include "config/config.h"
#include "yamldoc/jsonpatch.h"
#include "inject/transform_int.h"
#include "kube/kinds.h"

#define A_DEFAULT_CONTAINER "kubectl.kubernetes.io/default-container"

/* ---- where the pod template is: the kinds table (kube/kinds.h) ---- */

/* The row of a kind (in apiVersion's group; NULL: the kind alone), or NULL
 * when the table does not know it. */
static const struct kinds_kind *kind_row(const char *api_version, const char *kind)
{
    return api_version ? kinds_find(kind, api_version) : kinds_named(kind);
}

/* The row of a workload: a kind with a pod template, or NULL. */
static const struct kinds_kind *workload_row(const char *api_version, const char *kind)
{
    const struct kinds_kind *k = kind_row(api_version, kind);
    return k && k->template_prefix ? k : NULL;
}

const char *inject_prefix_for(const char *api_version, const char *kind)
{
    const struct kinds_kind *k = workload_row(api_version, kind);
    return k ? k->template_prefix : NULL;
}

void inject_result_free(struct inject_result *r)
{
    cJSON_Delete(r->ops);
    for (size_t i = 0; i < r->nwarnings; i++) free(r->warnings[i]);
    free(r->warnings);
    for (size_t i = 0; i < r->nnotes; i++) free(r->notes[i]);
    free(r->notes);
    memset(r, 0, sizeof *r);
}

/* ---- small helpers ---- */

static void set_reason(struct inject_result *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(struct inject_result *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
    ra_one_line_fix(out->reason, sizeof out->reason);
}

/* A refusal: the reason (printf format, made one line) and SKIPPED in
 * out. Returns 0, what the gates return for "refused". */
static int skip(struct inject_result *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int skip(struct inject_result *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
    ra_one_line_fix(out->reason, sizeof out->reason);
    out->outcome = INJECT_SKIPPED;
    return 0;
}

/* The value of annotation key (a string: checked when the annotations were
 * read), or NULL. */
static const char *annot(const struct inject__ctx *x, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->annots, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Every annotation the transform or the agent reads must be a string (or
 * null: absent, as everywhere in the transform). */
static int check_annotations(struct inject__ctx *x)
{
    const cJSON *a;
    cJSON_ArrayForEach(a, x->annots)
    {
        if (!a->string || cJSON_IsString(a) || cJSON_IsNull(a)) continue;
        if (strncmp(a->string, CFG_ANNOTATION_PREFIX, strlen(CFG_ANNOTATION_PREFIX)) != 0 &&
            strcmp(a->string, A_DEFAULT_CONTAINER) != 0)
            continue;
        char path[320];
        snprintf(path, sizeof path, "%smetadata.annotations[%.200s]", x->tpath, a->string);
        return inject__type_error(x, path, "a string", a);
    }
    return 0;
}

/* Walks the prefix ("/spec/template") from obj. *tmpl NULL when a step is
 * absent; -EINVAL when one is not an object. */
static int find_template(struct inject__ctx *x, const cJSON *obj, const char *prefix,
                         const cJSON **tmpl)
{
    char path[128] = "", tok[64];
    const cJSON *cur = obj;
    for (const char *p = prefix; *p && cur;) {
        const char *end = strchr(p + 1, '/');
        size_t len = end ? (size_t)(end - p - 1) : strlen(p + 1);
        snprintf(tok, sizeof tok, "%.*s", (int)len, p + 1);
        const cJSON *next;
        if (inject__get_obj(x, cur, path, tok, &next) < 0) return -EINVAL;
        snprintf(path + strlen(path), sizeof path - strlen(path), "%s%s", *path ? "." : "", tok);
        cur = next;
        p += len + 1;
    }
    *tmpl = cur;
    return 0;
}

/* Is this container a native sidecar (restartPolicy: Always)? */
static int is_sidecar(const cJSON *c)
{
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "restartPolicy");
    return cJSON_IsString(rp) && strcmp(rp->valuestring, "Always") == 0;
}

/* Checks a containers array and finds a container named reload-agent.
 * Returns its index or -1 in *own; 0 or -EINVAL. */
static int scan_containers(struct inject__ctx *x, const cJSON *arr, const char *field, int *own)
{
    const cJSON *c;
    int i = 0;
    *own = -1;
    cJSON_ArrayForEach(c, arr)
    {
        char path[96];
        const char *name;
        snprintf(path, sizeof path, "%sspec.%s[%d]", x->tpath, field, i);
        if (!cJSON_IsObject(c)) return inject__type_error(x, path, "an object", c);
        if (inject__get_str(x, c, path, "name", &name) < 0) return -EINVAL;
        const cJSON *rp = cJSON_GetObjectItemCaseSensitive(c, "restartPolicy");
        if (rp && !cJSON_IsString(rp) && !cJSON_IsNull(rp)) {
            snprintf(path + strlen(path), sizeof path - strlen(path), ".restartPolicy");
            return inject__type_error(x, path, "a string", rp);
        }
        if (name && strcmp(name, INJECT_CONTAINER) == 0 && *own < 0) *own = i;
        i++;
    }
    return 0;
}

static int add_apps(struct inject__ctx *x, const cJSON *arr, const char *field, int init)
{
    const cJSON *c;
    int i = 0;
    cJSON_ArrayForEach(c, arr)
    {
        int idx = i++;
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
        const char *name = cJSON_IsString(n) ? n->valuestring : "";
        if (strcmp(name, INJECT_CONTAINER) == 0 || (init && is_sidecar(c))) continue;
        struct inject__app *a = &x->apps[x->napps++];
        a->c = c;
        a->name = name;
        snprintf(a->path, sizeof a->path, "spec.%s[%d]", field, idx);
    }
    return 0;
}

/* ---- the pod's operating system ---- */

#define OS_LABEL "kubernetes.io/os"
#define OS_LABEL_BETA "beta.kubernetes.io/os"

/* 1 if term (a nodeSelectorTerm at path) admits only nodes whose OS label
 * is not linux, with the values in *os; 0 if not; -EINVAL. */
static int term_excludes_linux(struct inject__ctx *x, const cJSON *term, const char *path,
                               const char **os)
{
    const cJSON *exprs, *e;
    char ep[320];
    if (!cJSON_IsObject(term)) return inject__type_error(x, path, "an object", term);
    if (inject__get_arr(x, term, path, "matchExpressions", &exprs) < 0) return -EINVAL;
    int i = 0;
    cJSON_ArrayForEach(e, exprs)
    {
        const char *key, *op;
        const cJSON *vals, *v;
        snprintf(ep, sizeof ep, "%.240s.matchExpressions[%d]", path, i++);
        if (!cJSON_IsObject(e)) return inject__type_error(x, ep, "an object", e);
        if (inject__get_str(x, e, ep, "key", &key) < 0 ||
            inject__get_str(x, e, ep, "operator", &op) < 0 ||
            inject__get_arr(x, e, ep, "values", &vals) < 0)
            return -EINVAL;
        if (!key || !op || (strcmp(key, OS_LABEL) != 0 && strcmp(key, OS_LABEL_BETA) != 0))
            continue;
        int linux = 0, any = 0;
        cJSON_ArrayForEach(v, vals) if (cJSON_IsString(v))
        {
            linux |= strcmp(v->valuestring, "linux") == 0;
            if (!any) *os = v->valuestring;
            any = 1;
        }
        if (strcmp(op, "In") == 0 && any && !linux) return 1; /* *os: the first value */
        if (strcmp(op, "NotIn") == 0 && linux) {
            *os = "non-linux";
            return 1;
        }
    }
    return 0;
}

/* 1 if the pod can only run on another OS than Linux, with why (the
 * field and the OS) in why: spec.os.name, nodeSelector kubernetes.io/os,
 * or a required node affinity each of whose terms excludes linux; 0 if
 * not; -EINVAL for a field of the wrong type. sp is the spec's path. */
static int other_os(struct inject__ctx *x, const char *sp, char *why, size_t whylen)
{
    const cJSON *os, *sel, *aff, *na, *req, *terms, *t;
    const char *name = NULL, *label = NULL, *beta = NULL;
    char p[224];
    snprintf(p, sizeof p, "%s.os", sp);
    if (inject__get_obj(x, x->spec, sp, "os", &os) < 0 ||
        (os && inject__get_str(x, os, p, "name", &name) < 0))
        return -EINVAL;
    if (name && strcmp(name, "linux") != 0) {
        snprintf(why, whylen, "%.40s pods are not injected (spec.os.name)", name);
        return 1;
    }
    snprintf(p, sizeof p, "%s.nodeSelector", sp);
    if (inject__get_obj(x, x->spec, sp, "nodeSelector", &sel) < 0 ||
        (sel && (inject__get_str(x, sel, p, OS_LABEL, &label) < 0 ||
                 inject__get_str(x, sel, p, OS_LABEL_BETA, &beta) < 0)))
        return -EINVAL;
    if (!label) label = beta;
    if (label && strcmp(label, "linux") != 0) {
        snprintf(why, whylen, "%.40s pods are not injected (nodeSelector %s)", label,
                 beta && label == beta ? OS_LABEL_BETA : OS_LABEL);
        return 1;
    }
    snprintf(p, sizeof p, "%s.affinity", sp);
    if (inject__get_obj(x, x->spec, sp, "affinity", &aff) < 0 ||
        (aff && inject__get_obj(x, aff, p, "nodeAffinity", &na) < 0))
        return -EINVAL;
    if (!aff || !na) return 0;
    snprintf(p, sizeof p, "%s.affinity.nodeAffinity", sp);
    if (inject__get_obj(x, na, p, "requiredDuringSchedulingIgnoredDuringExecution", &req) < 0)
        return -EINVAL;
    snprintf(p, sizeof p, "%s.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
             sp);
    if (!req) return 0;
    if (inject__get_arr(x, req, p, "nodeSelectorTerms", &terms) < 0) return -EINVAL;
    const char *first = NULL;
    int i = 0, n = 0;
    cJSON_ArrayForEach(t, terms)
    {
        char tp[240];
        const char *o = NULL;
        snprintf(tp, sizeof tp, "%.200s.nodeSelectorTerms[%d]", p, i++);
        int rc = term_excludes_linux(x, t, tp, &o);
        if (rc <= 0) return rc;
        if (!first) first = o;
        n++;
    }
    if (n == 0) return 0;
    snprintf(why, whylen, "%.40s pods are not injected (required node affinity on %s)", first,
             OS_LABEL);
    return 1;
}

/* ---- the agent's configuration ---- */

struct effective {
    unsigned actions;          /* ACTION_BIT set */
    size_t nwatch;             /* the effective --watch and --env-watch roots */
    int watch_annotated;       /* reload-agent.io/watch replaces the injected --watch */
    int events_on;             /* reload-agent.io/events is true */
    int restart_signal;        /* --restart-signal (restart's rule on the app) */
    int restart_pod_exit_code; /* --restart-pod-exit-code (the sidecar's rule) */
    int fast_sync;             /* reload-agent.io/fast-sync is true */
    int fast_annotated;        /* reload-agent.io/fast-sync-objects replaces the injected list */
    int dry_run;               /* --dry-run */
    int stage_count, stage_percent, stage_default; /* --stage resolved (config.h) */
};

/* A reload-agent.io/ignore annotation replaces the injected --ignore list
 * (an annotation replaces a list flag whole): warns for each nested
 * mirror whose kubelet-private names it no longer leaves out. */
static void warn_ignore_replaced(struct inject__ctx *x, const struct config *cfg)
{
    struct inject__names paths;
    if (inject__mirror_paths(x, &paths) < 0) {
        x->oom = 1;
        return;
    }
    for (size_t i = 0; i < x->nmirrors && !x->oom; i++) {
        const char *mp = x->mirrors[i].mount_path;
        char *g = inject__nested_ignore(x, mp, &paths);
        if (!g) continue;
        char *probe = inject__printf(x, "%s/..data/k", mp);
        if (probe && !cfg_is_ignored(cfg, probe))
            inject__warn(x,
                         "annotation %signore replaces the injected --ignore list: add %s to "
                         "it, or volume %s's private ..data names change the hash",
                         CFG_ANNOTATION_PREFIX, g, x->mirrors[i].volume);
        free(probe);
        free(g);
    }
    inject__names_free(&paths);
}

/* Builds the configuration the sidecar will run with: its args as flags,
 * the template's annotations as the annotation layer (cfg_build, the
 * agent's own parser). restart-pod is judged with a rule that restarts the
 * pod on any code (INJECT__RULES_PROBE): the injection then gives the
 * sidecar the rule for the code the configuration says. Returns 0, 1 with
 * the agent's error in x->err (the sidecar would exit 2), or -ENOMEM. */
static int judge_config(struct inject__ctx *x, struct effective *eff)
{
    memset(eff, 0, sizeof *eff);
    struct inject__sidecar none = {.run_as_user = -1,
                                   .run_as_group = -1,
                                   .run_as_asked = -1,
                                   .restart_rules = INJECT__RULES_PROBE,
                                   .state_dir = 1};
    size_t nargs = 0;
    char **args = inject__sidecar_args(x, &none, &nargs);
    if (!args) return -ENOMEM;

    struct cfg_layer flags, annots;
    struct annot_set set = {0};
    struct config cfg;
    int help = 0, rc = -ENOMEM;
    if (cfg_layer_init(&flags, CFG_SRC_FLAG) < 0) goto out_args;
    if (cfg_layer_init(&annots, CFG_SRC_ANNOTATION) < 0) goto out_flags;
    if (inject_annot_set(x->annots, &set) < 0) goto out_annots;
    rc = 1;
    if (cfg_parse_args((int)nargs, args, &flags, &help, x->err, x->errlen) < 0 ||
        cfg_layer_from_annotations(&set, &annots, x->err, x->errlen) < 0 ||
        cfg_build(&flags, &annots, &cfg, x->err, x->errlen) < 0)
        goto out_set;
    rc = 0;
    if (cfg_layer_get(&annots, "ignore")) warn_ignore_replaced(x, &cfg);
    eff->actions = cfg_used_actions(&cfg);
    eff->nwatch = cfg.watch.n + cfg.env_watch.n;
    eff->watch_annotated = cfg_layer_get(&annots, "watch") != NULL;
    eff->events_on = cfg_layer_get(&annots, "events") != NULL && cfg.events;
    eff->restart_signal = cfg.restart_signal;
    eff->restart_pod_exit_code = cfg.restart_pod_exit_code;
    eff->fast_sync = cfg.fast_sync;
    eff->fast_annotated = cfg_layer_get(&annots, "fast-sync-objects") != NULL;
    eff->dry_run = cfg.dry_run;
    eff->stage_count = cfg.stage_count;
    eff->stage_percent = cfg.stage_percent;
    eff->stage_default = cfg.stage_default;
    cfg_free(&cfg);
out_set:
    free(set.v);
out_annots:
    cfg_layer_free(&annots);
out_flags:
    cfg_layer_free(&flags);
out_args:
    inject__args_free(args, nargs);
    return rc;
}

/* ---- the sidecar's settings ---- */

/* reload-agent.io/sidecar-run-as-user: a decimal UID 0..2147483647 into
 * *uid (-1 when absent). Returns 0, or 1 with the reason in x->err. */
static int run_as_annotation(struct inject__ctx *x, long *uid)
{
    const char *v = annot(x, CFG_ANNOT_SIDECAR_RUN_AS_USER);
    *uid = -1;
    if (!v) return 0;
    long n = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9' && n <= 2147483647L; p++) n = n * 10 + (*p - '0');
    if (p == v || *p || n > 2147483647L || (v[0] == '0' && v[1])) {
        snprintf(x->err, x->errlen, "invalid %s \"%.64s\": want a UID, a decimal 0..2147483647",
                 CFG_ANNOT_SIDECAR_RUN_AS_USER, v);
        return 1;
    }
    *uid = n;
    return 0;
}

/* The sidecar's image and resources: opts, then the per-pod annotations.
 * Returns 0, or 1 with the reason in x->err. */
static int sidecar_settings(struct inject__ctx *x, struct inject__sidecar *s)
{
    const struct inject_opts *o = x->opts;
    s->image = o->image && *o->image ? o->image : INJECT_DEFAULT_IMAGE;
    s->cpu_request = o->cpu_request && *o->cpu_request ? o->cpu_request : "5m";
    s->memory_request = o->memory_request && *o->memory_request ? o->memory_request : "16Mi";
    s->memory_limit = o->memory_limit && *o->memory_limit ? o->memory_limit : "32Mi";
    if (annot(x, CFG_ANNOT_SIDECAR_IMAGE)) s->image = annot(x, CFG_ANNOT_SIDECAR_IMAGE);
    if (annot(x, CFG_ANNOT_SIDECAR_CPU_REQUEST))
        s->cpu_request = annot(x, CFG_ANNOT_SIDECAR_CPU_REQUEST);
    if (annot(x, CFG_ANNOT_SIDECAR_MEMORY_REQUEST))
        s->memory_request = annot(x, CFG_ANNOT_SIDECAR_MEMORY_REQUEST);
    if (annot(x, CFG_ANNOT_SIDECAR_MEMORY_LIMIT))
        s->memory_limit = annot(x, CFG_ANNOT_SIDECAR_MEMORY_LIMIT);

    int bad_image = !*s->image || strlen(s->image) > 1024;
    for (const char *p = s->image; *p; p++) /* an image reference is printable ASCII */
        bad_image |= (unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f;
    if (bad_image) {
        snprintf(x->err, x->errlen, "invalid sidecar image \"%.100s\": want an image reference",
                 s->image);
        return 1;
    }
    const struct {
        const char *what, *key, *v;
    } Q[] = {{"cpu request", CFG_ANNOT_SIDECAR_CPU_REQUEST, s->cpu_request},
             {"memory request", CFG_ANNOT_SIDECAR_MEMORY_REQUEST, s->memory_request},
             {"memory limit", CFG_ANNOT_SIDECAR_MEMORY_LIMIT, s->memory_limit}};
    long double val[3];
    for (size_t i = 0; i < 3; i++)
        if (inject__quantity(Q[i].v, &val[i]) < 0) {
            snprintf(x->err, x->errlen,
                     "invalid sidecar %s \"%.64s\" (%s): want a quantity such as 5m or 16Mi",
                     Q[i].what, Q[i].v, annot(x, Q[i].key) ? Q[i].key : "options");
            return 1;
        }
    if (val[1] > val[2]) {
        snprintf(x->err, x->errlen, "sidecar memory request %.64s exceeds its limit %.64s",
                 s->memory_request, s->memory_limit);
        return 1;
    }
    if (inject__notify_settings(x, annot(x, CFG_ANNOT_NOTIFY_SECRET),
                                annot(x, CFG_ANNOTATION_PREFIX "notify-url"), s))
        return 1;
    return run_as_annotation(x, &s->run_as_asked);
}

/* The app container: containers[0], or the one
 * kubectl.kubernetes.io/default-container names. */
static const struct inject__app *app_container(struct inject__ctx *x, const cJSON *containers)
{
    const char *want = annot(x, A_DEFAULT_CONTAINER);
    const cJSON *first = cJSON_GetArrayItem(containers, 0);
    const struct inject__app *pick = NULL;
    for (size_t i = 0; i < x->napps && want; i++)
        if (strcmp(x->apps[i].name, want) == 0 &&
            strncmp(x->apps[i].path, "spec.containers", 15) == 0)
            pick = &x->apps[i];
    if (want && !pick)
        inject__warn(x, "annotation %s names \"%.60s\", which is not a container; using the first",
                     A_DEFAULT_CONTAINER, want);
    for (size_t i = 0; i < x->napps && !pick; i++)
        if (x->apps[i].c == first) pick = &x->apps[i];
    return pick;
}

/* runAsUser/runAsGroup of the app container, else of the pod; *non_root
 * is 1 when the container's (else the pod's) runAsNonRoot is true. */
static int app_identity(struct inject__ctx *x, const struct inject__app *app, long *uid, long *gid,
                        long *pod_uid, int *non_root)
{
    char path[128];
    const cJSON *csc = NULL, *psc = NULL;
    long cu = -1, cg = -1, pu = -1, pg = -1;
    int cn = -1, pn = -1;
    snprintf(path, sizeof path, "%s%s", x->tpath, app->path);
    if (inject__get_obj(x, app->c, path, "securityContext", &csc) < 0) return -EINVAL;
    snprintf(path, sizeof path, "%sspec", x->tpath);
    if (inject__get_obj(x, x->spec, path, "securityContext", &psc) < 0) return -EINVAL;
    snprintf(path, sizeof path, "%s%s.securityContext", x->tpath, app->path);
    if (csc && (inject__get_id(x, csc, path, "runAsUser", &cu) < 0 ||
                inject__get_id(x, csc, path, "runAsGroup", &cg) < 0 ||
                inject__get_bool(x, csc, path, "runAsNonRoot", &cn) < 0))
        return -EINVAL;
    snprintf(path, sizeof path, "%sspec.securityContext", x->tpath);
    if (psc && (inject__get_id(x, psc, path, "runAsUser", &pu) < 0 ||
                inject__get_id(x, psc, path, "runAsGroup", &pg) < 0 ||
                inject__get_bool(x, psc, path, "runAsNonRoot", &pn) < 0))
        return -EINVAL;
    *uid = cu >= 0 ? cu : pu;
    *gid = cg >= 0 ? cg : pg;
    *pod_uid = pu;
    *non_root = (cn >= 0 ? cn : pn) == 1;
    return 0;
}

/* The sidecar's UID when signal or restart is effective: the kernel lets a
 * process signal another only with the same UID, and the restricted
 * profile leaves the sidecar no CAP_KILL. The annotation
 * reload-agent.io/sidecar-run-as-user wins; else the app's stated UID (0
 * included: the sidecar then runs as root with every capability dropped,
 * as the app already does); else, unless runAsNonRoot is required, UID 0,
 * the user of an image without USER (the official nginx image's master),
 * with a warning; else a warning. */
static void sidecar_uid(struct inject__ctx *x, struct inject__sidecar *s, const char *app, long uid,
                        long gid, int non_root)
{
    if (s->run_as_asked >= 0) {
        s->run_as_user = s->run_as_asked;
        s->run_as_group = gid >= 0 ? gid : s->run_as_asked;
    } else if (uid >= 0) {
        s->run_as_user = uid;
        s->run_as_group = gid;
    } else if (!non_root) {
        inject__warn(x,
                     "container %s states no runAsUser: sidecar runs as UID 0, no capabilities; "
                     "set runAsUser if the image is not root",
                     app);
        s->run_as_user = 0;
        s->run_as_group = gid >= 0 ? gid : 0;
    } else {
        inject__warn(x,
                     "container %s: signal/restart need the app's UID; set runAsUser on it or %s",
                     app, CFG_ANNOT_SIDECAR_RUN_AS_USER);
    }
}

/* The app container's service-account token mount, or NULL (x->oom set
 * when a path could not be cleaned). */
static const cJSON *token_mount(struct inject__ctx *x, const struct inject__app *app)
{
    const cJSON *m, *mounts = cJSON_GetObjectItemCaseSensitive(app->c, "volumeMounts");
    cJSON_ArrayForEach(m, (cJSON_IsArray(mounts) ? mounts : NULL))
    {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "mountPath");
        char *c = cJSON_IsString(p) ? inject_clean_path(p->valuestring) : NULL;
        if (cJSON_IsString(p) && !c) x->oom = 1;
        int hit = c && strcmp(c, INJECT__TOKEN_PATH) == 0;
        free(c);
        if (hit) return m;
    }
    return NULL;
}

/* ---- the status annotation ---- */

/* The status annotation; state: the state emptyDir was added. */
static char *status_json(struct inject__ctx *x, int state, int notify)
{
    cJSON *st = inject__new_obj(x), *vols = inject__new_arr(x), *mirs = inject__new_arr(x);
    inject__add(x, st, "version", inject__str(x, RA_VERSION));
    inject__add(x, st, "container", inject__str(x, INJECT_CONTAINER));
    inject__push(x, vols, inject__str(x, INJECT__PODINFO_VOLUME));
    for (size_t i = 0; i < x->nenvs; i++) inject__push(x, vols, inject__str(x, x->envs[i].volume));
    if (state) inject__push(x, vols, inject__str(x, INJECT__STATE_VOLUME));
    inject__safe_volume_names(x, vols);
    if (notify) inject__push(x, vols, inject__str(x, INJECT__NOTIFY_VOLUME));
    for (size_t i = 0; i < x->nmirrors; i++)
        inject__push(x, mirs, inject__str(x, x->mirrors[i].volume));
    inject__add(x, st, "volumes", vols);
    inject__add(x, st, "mirrors", mirs);
    /* The warnings travel with the pod: the agent logs them and posts them
     * as Events at start, where a controller-created pod's user sees them
     * (admission warnings go to the controller that created the pod). */
    if (x->nwarnings) {
        cJSON *w = inject__new_arr(x);
        for (size_t i = 0; i < x->nwarnings && i < INJECT_STATUS_MAX_WARNINGS; i++)
            inject__push(x, w, inject__str(x, x->warnings[i]));
        inject__add(x, st, "warnings", w);
    }
    char *s = x->oom ? NULL : cJSON_PrintUnformatted(st);
    if (!s) x->oom = 1;
    cJSON_Delete(st);
    return s;
}

cJSON *inject_annotation_op(const cJSON *meta, const char *prefix, const char *key,
                            const char *value)
{
    const cJSON *annots = cJSON_GetObjectItemCaseSensitive(meta, "annotations");
    char *esc = NULL, *path = NULL;
    cJSON *op = cJSON_CreateObject(), *v;
    if (cJSON_IsObject(annots)) { /* the one member */
        v = cJSON_CreateString(value);
        if ((esc = jsonpointer_escape(key)) &&
            asprintf(&path, "%s/metadata/annotations/%s", prefix, esc) < 0)
            path = NULL;
    } else { /* the whole map, or metadata holding it, when missing */
        int in_meta = cJSON_IsObject(meta);
        cJSON *map = cJSON_CreateObject();
        if (map && !cJSON_AddStringToObject(map, key, value)) {
            cJSON_Delete(map);
            map = NULL;
        }
        if (in_meta || !map) {
            v = map;
        } else if (!(v = cJSON_CreateObject()) || !cJSON_AddItemToObject(v, "annotations", map)) {
            cJSON_Delete(v);
            cJSON_Delete(map);
            v = NULL;
        }
        if (v && asprintf(&path, "%s/metadata%s", prefix, in_meta ? "/annotations" : "") < 0)
            path = NULL;
    }
    if (!op || !v || !path || !cJSON_AddStringToObject(op, "op", "add") ||
        !cJSON_AddStringToObject(op, "path", path) || !cJSON_AddItemToObject(op, "value", v)) {
        cJSON_Delete(op);
        cJSON_Delete(v);
        op = NULL;
    }
    free(esc);
    free(path);
    return op;
}

/* Appends the op that sets annotation key of the template to value. */
static void op_annotation(struct inject__ctx *x, cJSON *ops, const char *prefix, const char *key,
                          const char *value)
{
    inject__push(x, ops, inject_annotation_op(x->meta, prefix, key, value));
}

/* Appends the ops that set the status annotation to st and, when so is not
 * NULL, the sync-objects annotation to so: one op holding both when the
 * template has no annotations yet (a second whole-map add would replace
 * the first). */
static void op_status_annotations(struct inject__ctx *x, cJSON *ops, const char *prefix,
                                  const char *st, const char *so)
{
    cJSON *op = inject_annotation_op(x->meta, prefix, CFG_ANNOT_INJECT_STATUS, st);
    const cJSON *annots = cJSON_GetObjectItemCaseSensitive(x->meta, "annotations");
    if (!so || !op || cJSON_IsObject(annots)) {
        inject__push(x, ops, op);
        if (so) op_annotation(x, ops, prefix, CFG_ANNOT_SYNC_OBJECTS, so);
        return;
    }
    cJSON *v = cJSON_GetObjectItemCaseSensitive(op, "value");
    cJSON *map = cJSON_IsObject(x->meta) ? v : cJSON_GetObjectItemCaseSensitive(v, "annotations");
    if (!cJSON_AddStringToObject(map, CFG_ANNOT_SYNC_OBJECTS, so)) x->oom = 1;
    inject__push(x, ops, op);
}

/* Appends items (owned) to the array field of parent at ppath: one add
 * per item, or the whole array when the field is absent. */
static void op_append(struct inject__ctx *x, cJSON *ops, const cJSON *parent, const char *ppath,
                      const char *field, cJSON **items, size_t n)
{
    const cJSON *cur = cJSON_GetObjectItemCaseSensitive(parent, field);
    if (cJSON_IsArray(cur)) {
        char *path = inject__printf(x, "%s/%s/-", ppath, field);
        for (size_t i = 0; i < n; i++) inject__op(x, ops, "add", path, items[i]);
        free(path);
        return;
    }
    cJSON *arr = inject__new_arr(x);
    for (size_t i = 0; i < n; i++) inject__push(x, arr, items[i]);
    char *path = inject__printf(x, "%s/%s", ppath, field);
    inject__op(x, ops, "add", path, arr);
    free(path);
}

/* The first controller ownerReference of obj (as the agent's owner chain
 * takes it), or NULL. */
static const cJSON *controller_ref(const cJSON *obj)
{
    const cJSON *refs = cJSON_GetObjectItemCaseSensitive(
                    cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "ownerReferences"),
                *r;
    cJSON_ArrayForEach(r, (cJSON_IsArray(refs) ? refs : NULL))
    {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "controller"))) return r;
    }
    return NULL;
}

/* Rollout is effective: warns when the agent will refuse to roll, as the
 * kinds table says at run time (kube/kinds.h). A workload is judged by its
 * own row (a ReplicaSet, a Job, a CronJob cannot roll); a pod by its
 * controller's: none, or a kind that may not own a pod, cannot be rolled;
 * a kind that follows its own controller (a ReplicaSet) is left to the
 * chain at run time. */
static void warn_unrollable(struct inject__ctx *x)
{
    const struct kinds_kind *k = x->ki;
    if (!*k->template_prefix) { /* a pod: what rolls is its controller */
        const cJSON *ref = controller_ref(x->obj);
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(ref, "kind");
        const cJSON *api = cJSON_GetObjectItemCaseSensitive(ref, "apiVersion");
        if (!ref) {
            inject__warn(x, "rollout: this pod has no controller to roll; a change is only "
                            "recorded");
            return;
        }
        k = cJSON_IsString(kind)
                ? kind_row(cJSON_IsString(api) ? api->valuestring : NULL, kind->valuestring)
                : NULL;
        if (!k || !k->may_own_pod) {
            inject__warn(x,
                         "rollout: this pod's controller %.60s cannot be rolled; a change is "
                         "only recorded (use restart or none)",
                         cJSON_IsString(kind) ? kind->valuestring : "(no kind)");
            return;
        }
        if (k->follows_controller) return;
    }
    if (!k->can_roll)
        inject__warn(x,
                     "rollout: a %s's pods are never rolled; a change is only recorded (use "
                     "restart or none)",
                     k->title);
}

/* The service-account token of the sidecar, when the API is needed
 * (rollout, fast sync, or Events asked for). At admission the plugin has
 * run: the app container's token mount is copied. From the CLI the plugin
 * will mount one at pod creation, unless automountServiceAccountToken is
 * false: then only a token mount the app has itself can be copied. A
 * sidecar that requires the API (required: "rollout", "fast sync", or
 * NULL when only Events want it) and has no token would exit 2 at start:
 * refused. Returns 0, 1 (refused: out says why) or -EINVAL. */
static int plan_token(struct inject__ctx *x, const struct inject__app *app, int need_api,
                      const char *required, int stage, struct inject__sidecar *s,
                      struct inject_result *out)
{
    int automount = -1;
    char sp[96];
    snprintf(sp, sizeof sp, "%sspec", x->tpath);
    if (inject__get_bool(x, x->spec, sp, "automountServiceAccountToken", &automount) < 0)
        return -EINVAL;
    int plugin = !x->opts->admission && automount != 0; /* mounts one at creation */
    if (need_api && !plugin) s->token_mount = token_mount(x, app);
    if (x->opts->admission) s->events_off = !s->token_mount;
    s->api = plugin || s->token_mount;
    inject__stage_default_api(x, s->api,
                              x->opts->admission ? " (the webhook mounts no token for it)"
                              : automount == 0   ? " (automountServiceAccountToken is false)"
                                                 : "");
    if (!need_api || plugin || s->token_mount) return 0;
    const char *why = x->opts->admission ? "" : " (automountServiceAccountToken is false)";
    if (required) {
        skip(out,
             "%s needs the Kubernetes API, but container %s has no service-account token "
             "mount to copy%s",
             required, app->name, why);
        return 1;
    }
    if (stage)
        inject__warn(x,
                     "staging needs the API; container %s has no token mount%s: replicas act "
                     "alone",
                     app->name, why);
    else
        inject__warn(x,
                     "Events need the Kubernetes API, but container %s has no token mount%s: "
                     "Events are off",
                     app->name, why);
    return 0;
}

/* 1 (and the reason in out) when the sidecar would watch more than
 * INJECT_MAX_WATCHED things: mirrors, env volumes and the keys those list
 * (plus nargs args it has already). Each adds a mount, an arg or an item
 * to the pod, tens to hundreds of bytes: past that the pod would grow
 * beyond what the API server stores, and a pod that cannot be created is
 * worse than one without the sidecar. */
static int too_many_roots(struct inject__ctx *x, size_t nargs, struct inject_result *out)
{
    size_t n = x->nmirrors + nargs;
    for (size_t i = 0; i < x->nenvs; i++) n += 1 + x->envs[i].nkeys;
    if (n <= INJECT_MAX_WATCHED) return 0;
    skip(out,
         "%zu volumes, env sources and keys to watch, more than %d: not injected (the sidecar "
         "would make the pod too large)",
         n, INJECT_MAX_WATCHED);
    return 1;
}

/* ---- a first injection ---- */

/* What a first injection decided (plan_fresh), for emit_fresh. */
struct fresh {
    struct effective eff;
    struct inject__sidecar s;
    int need_pid; /* signal or restart: the app's UID and its process namespace */
    int rollout;
    int need_api;                     /* rollout, fast sync, Events asked for, or stage */
    int stage;                        /* an explicit --stage: the replicas take turns */
    int spn;                          /* shareProcessNamespace: -1 absent, 0 false, 1 true */
    char pod_rules[128];              /* restart-pod: the sidecar's rules (s.restart_rules) */
    struct inject__app_rule app_rule; /* restart: the app's Restart rule */
};

/* The plans' steps return 1 to go on, 0 when refused (out says why), <0
 * for an error. */

/* The env volumes and the mirrors. */
static int plan_volumes(struct inject__ctx *x, struct inject_result *out)
{
    int rc = inject__plan_mirrors(x, NULL, 0, NULL, 0, 1);
    if (rc < 0) return rc;
    rc = inject__plan_env(x); /* after the mirrors: the extra sources read them */
    if (rc == -EEXIST) return skip(out, "%s", x->err);
    if (rc < 0) return rc;
    if (too_many_roots(x, 0, out)) return 0;
    if (inject__volume(x, INJECT__PODINFO_VOLUME))
        return skip(out, "the pod already has a volume named %s that reload-agent did not add",
                    INJECT__PODINFO_VOLUME);
    if (inject__volume(x, INJECT__STATE_VOLUME))
        return skip(out, "the pod already has a volume named %s that reload-agent did not add",
                    INJECT__STATE_VOLUME);
    return 1;
}

/* restart-pod effective: the sidecar's RestartAllContainers rule for the
 * agent's exit code (refused where the cluster would reject the rule). */
static int plan_restart_pod(struct inject__ctx *x, struct fresh *f, struct inject_result *out)
{
    if (!(f->eff.actions & ACTION_BIT(ACTION_RESTART_POD))) return 1;
    if (!inject__plan_restart_pod(x, f->eff.restart_pod_exit_code, f->pod_rules,
                                  sizeof f->pod_rules))
        return skip(out, "%s", x->err);
    f->s.restart_rules = f->pod_rules;
    return 1;
}

/* The agent's configuration, judged by its own parser, and what follows
 * from its effective actions. */
static int plan_config(struct inject__ctx *x, struct fresh *f, struct inject_result *out)
{
    int rc = judge_config(x, &f->eff);
    if (rc < 0) return rc;
    if (rc == 1 || inject__check_safe(x, f->eff.dry_run)) return skip(out, "%s", x->err);
    if (f->eff.nwatch == 0) {
        if (x->subpath_only)
            return skip(out,
                        "nothing to watch: volume %s is mounted only with subPath (at %s), and "
                        "subPath mounts never update: mount the whole volume",
                        x->subpath_only, x->subpath_at);
        if (x->token_only)
            return skip(out,
                        "nothing to watch: projected volume %s holds a service-account token, "
                        "which is never watched (it rotates hourly)",
                        x->token_only);
        return skip(out, "nothing to watch: the app mounts no ConfigMap, Secret or projected "
                         "volume and reads none through env");
    }
    if (f->eff.watch_annotated && x->nmirrors)
        inject__warn(x, "annotation %swatch replaces the %zu injected --watch roots",
                     CFG_ANNOTATION_PREFIX, x->nmirrors);
    f->need_pid = (f->eff.actions & (ACTION_BIT(ACTION_SIGNAL) | ACTION_BIT(ACTION_RESTART))) != 0;
    f->rollout = (f->eff.actions & ACTION_BIT(ACTION_ROLLOUT)) != 0;
    /* an explicit stage asks for the API; the default of restart uses it
     * where it is there (the CLI's pods get the plugin's token) */
    f->stage = (f->eff.stage_count || f->eff.stage_percent) && !f->eff.stage_default;
    f->need_api = f->rollout || f->eff.fast_sync || f->eff.events_on || f->stage;
    if (f->rollout) warn_unrollable(x);
    inject__plan_stage(x, f->eff.stage_count, f->eff.stage_percent, f->eff.stage_default);
    inject__safe_notes(x);
    if (f->eff.fast_sync) inject__plan_fast_sync(x, f->eff.fast_annotated);
    f->s.fast_sync = f->eff.fast_sync;
    return plan_restart_pod(x, f, out);
}

/* The app container, and the sidecar's UID from it (sidecar_uid when
 * signal or restart needs the app's; never root beside a root pod
 * without reason). */
static int sidecar_identity(struct inject__ctx *x, const cJSON *containers, struct fresh *f,
                            const struct inject__app **app, struct inject_result *out)
{
    long uid = -1, gid = -1, pod_uid = -1;
    int non_root = 0;
    if (!(*app = app_container(x, containers)))
        return skip(out, "the pod template has no app container");
    if (app_identity(x, *app, &uid, &gid, &pod_uid, &non_root) < 0) return -EINVAL;
    if (f->need_pid) sidecar_uid(x, &f->s, (*app)->name, uid, gid, non_root);
    if (f->s.run_as_user < 0 && pod_uid == 0) f->s.run_as_user = INJECT__IMAGE_UID;
    return 1;
}

/* The API token (plan_token) and the process namespace signal/restart
 * need. */
static int api_access(struct inject__ctx *x, const struct inject__app *app, struct fresh *f,
                      struct inject_result *out)
{
    char sp[96];
    const char *required = f->rollout ? "rollout" : f->eff.fast_sync ? "fast sync" : NULL;
    int rc = plan_token(x, app, f->need_api, required, f->stage, &f->s, out);
    if (rc != 0) return rc < 0 ? rc : 0;
    snprintf(sp, sizeof sp, "%sspec", x->tpath);
    f->spn = -1;
    if (f->need_pid && inject__get_bool(x, x->spec, sp, "shareProcessNamespace", &f->spn) < 0)
        return -EINVAL;
    if (f->need_pid && f->spn == 0)
        inject__warn(x, "shareProcessNamespace was false: set to true, signal/restart need it");
    return 1;
}

/* Safe reload's validator and copies (safe.c). */
static int plan_safe(struct inject__ctx *x, struct inject_result *out)
{
    int rc = inject__plan_safe(x);
    if (rc < 0) return rc;
    return rc ? skip(out, "%s", x->err) : 1;
}

/* Every decision of a first injection, in the order of the header. */
static int plan_fresh(struct inject__ctx *x, const cJSON *containers, struct fresh *f,
                      struct inject_result *out)
{
    const struct inject__app *app = NULL;
    int rc = plan_volumes(x, out);
    if (rc > 0) rc = plan_safe(x, out);
    if (rc > 0) rc = plan_config(x, f, out);
    if (rc > 0 && sidecar_settings(x, &f->s)) rc = skip(out, "%s", x->err);
    if (rc > 0) rc = sidecar_identity(x, containers, f, &app, out);
    if (rc > 0) rc = api_access(x, app, f, out);
    if (rc > 0 && (f->eff.actions & ACTION_BIT(ACTION_RESTART)) &&
        inject__plan_app_rule(x, app, f->eff.restart_signal, &f->app_rule) < 0)
        rc = -EINVAL;
    /* every sidecar keeps its applied state for the agent that may start
     * again in the pod (--state-dir, run/statedir.h) */
    if (rc > 0) f->s.state_dir = 1;
    return rc;
}

/* The downward-API volume of the annotations file (/etc/podinfo). */
static cJSON *podinfo_volume(struct inject__ctx *x)
{
    cJSON *vol = inject__new_obj(x), *dapi = inject__new_obj(x), *items = inject__new_arr(x);
    cJSON *item = inject__new_obj(x), *fr = inject__new_obj(x);
    inject__add(x, vol, "name", inject__str(x, INJECT__PODINFO_VOLUME));
    inject__add(x, item, "path", inject__str(x, "annotations"));
    inject__add(x, fr, "fieldPath", inject__str(x, "metadata.annotations"));
    inject__add(x, item, "fieldRef", fr);
    inject__push(x, items, item);
    inject__add(x, dapi, "items", items);
    inject__add(x, vol, "downwardAPI", dapi);
    return vol;
}

/* The operations of a first injection: the volumes, the sidecar,
 * shareProcessNamespace, the status annotation. */
static int emit_fresh(struct inject__ctx *x, const char *prefix, const struct fresh *f,
                      struct inject_result *out)
{
    cJSON *ops = out->ops;
    char *spec_path = inject__printf(x, "%s/spec", prefix);
    size_t nbase = 1 + x->nenvs + (f->s.state_dir ? 1 : 0);
    size_t nvols = nbase + inject__safe_nvolumes(x) + (f->s.notify_secret ? 1 : 0);
    cJSON **vols = calloc(nvols, sizeof *vols);
    if (!vols || !spec_path) {
        free(vols);
        free(spec_path);
        return -ENOMEM;
    }
    vols[0] = podinfo_volume(x);
    for (size_t i = 0; i < x->nenvs; i++) vols[1 + i] = inject__env_volume(x, &x->envs[i]);
    if (f->s.state_dir) vols[1 + x->nenvs] = inject__state_volume(x);
    inject__safe_volumes(x, vols + nbase);
    if (f->s.notify_secret) vols[nvols - 1] = inject__notify_volume(x, &f->s);
    op_append(x, ops, x->spec, spec_path, "volumes", vols, nvols);
    free(vols);

    /* the install init container, the validator, then the agent: the
     * native sidecars start in order, the validator before the agent that
     * asks it at start */
    cJSON *inits[3];
    size_t ninit = 0;
    if (x->validator || x->keep) inits[ninit++] = inject__install_container(x, &f->s);
    if (x->validator) inits[ninit++] = inject__validator_container(x, &f->s);
    inits[ninit++] = inject__sidecar_container(x, &f->s);
    op_append(x, ops, x->spec, spec_path, "initContainers", inits, ninit);
    inject__safe_app_mounts(x, ops, spec_path);
    if (f->need_pid && f->spn != 1) {
        char *p = inject__printf(x, "%s/shareProcessNamespace", spec_path);
        inject__op(x, ops, "add", p, cJSON_CreateTrue());
        free(p);
    }
    inject__emit_app_rule(x, ops, spec_path, &f->app_rule);
    free(spec_path);
    char *st = status_json(x, f->s.state_dir, f->s.notify_secret != NULL),
         *so = inject__sync_objects(x, NULL);
    if (st) op_status_annotations(x, ops, prefix, st, so);
    free(st);
    free(so);
    if (x->oom) return -ENOMEM;
    out->outcome = INJECT_INJECTED;
    return 0;
}

static int inject_fresh(struct inject__ctx *x, const char *prefix, const cJSON *containers,
                        struct inject_result *out)
{
    struct fresh f = {.s = {.run_as_user = -1, .run_as_group = -1, .run_as_asked = -1},
                      .app_rule = {.index = -1}};
    int rc = plan_fresh(x, containers, &f, out);
    return rc <= 0 ? rc : emit_fresh(x, prefix, &f, out);
}

/* ---- reinvocation: mirrors of volumes added since ---- */

/* The --ignore args a reinvocation adds: for each new mirror inside a
 * watched path of the sidecar (taken: its mounts, ntaken) or another new
 * mirror, and each of those paths inside a new mirror (the sidecar's own
 * mounts never nest with a mirror), into add (room for ntaken + nmirrors
 * items). Args already there are not added again. Returns how many were
 * added (x->oom set on failure). */
static size_t reinvoke_ignores(struct inject__ctx *x, const cJSON *args, const char *const *taken,
                               size_t ntaken, cJSON **add)
{
    struct inject__names newm = {0}, all = {0}, have = {0};
    char **clean = calloc(ntaken + 1, sizeof *clean);
    size_t k = 0;
    const cJSON *a;
    int rc = clean && inject__mirror_paths(x, &newm) == 0 &&
                     inject__names_init(&all, ntaken + x->nmirrors) == 0 &&
                     inject__names_init(&have, 8) == 0
                 ? 0
                 : -ENOMEM;
    for (size_t i = 0; i < ntaken && rc == 0; i++)
        if (!(clean[i] = inject_clean_path(taken[i])) ||
            inject__names_put(&all, clean[i], i, NULL) < 0)
            rc = -ENOMEM;
    for (size_t i = 0; i < x->nmirrors && rc == 0; i++)
        if (inject__names_put(&all, x->mirrors[i].mount_path, i, NULL) < 0) rc = -ENOMEM;
    cJSON_ArrayForEach(a, args) if (rc == 0 && cJSON_IsString(a) &&
                                    inject__names_put(&have, a->valuestring, 0, NULL) < 0) rc =
        -ENOMEM;
    for (size_t i = 0; i < ntaken + x->nmirrors && rc == 0; i++) {
        /* an old path matters only when a new mirror holds it */
        const char *p = i < ntaken ? clean[i] : x->mirrors[i - ntaken].mount_path;
        char *g = inject__nested_ignore(x, p, i < ntaken ? &newm : &all);
        char *arg = g ? inject__printf(x, "--ignore=%s", g) : NULL;
        cJSON *item = arg ? inject__str(x, arg) : NULL;
        free(g);
        free(arg);
        if (item && inject__names_put(&have, item->valuestring, 0, NULL) == 1)
            add[k++] = item;
        else
            cJSON_Delete(item);
    }
    if (rc < 0) x->oom = 1;
    for (size_t i = 0; clean && i < ntaken; i++) free(clean[i]);
    free(clean);
    inject__names_free(&newm);
    inject__names_free(&all);
    inject__names_free(&have);
    return k;
}

/* What a reinvocation reads from the sidecar it injected before. */
struct injected {
    const cJSON *side, *mounts, *args;
    cJSON *status;      /* owned: the parsed status annotation (an object) */
    const cJSON *mirs;  /* its "mirrors" (an array), or NULL */
    const char **done;  /* the volumes mirrored already (status, mounts) */
    const char **taken; /* the sidecar's mount paths */
    size_t ndone, ntaken;
};

static void injected_free(struct injected *w)
{
    free(w->done);
    free(w->taken);
    cJSON_Delete(w->status);
    memset(w, 0, sizeof *w);
}

/* Reads the injected sidecar (init[own]) and the status annotation.
 * Returns 1, 0 (refused: a status reload-agent did not write) or <0. */
static int read_injected(struct inject__ctx *x, const cJSON *init, int own, struct injected *w,
                         struct inject_result *out)
{
    const cJSON *m, *v;
    char sp[96];
    w->side = cJSON_GetArrayItem(init, own);
    snprintf(sp, sizeof sp, "%sspec.initContainers[%d]", x->tpath, own);
    if (inject__get_arr(x, w->side, sp, "volumeMounts", &w->mounts) < 0 ||
        inject__get_arr(x, w->side, sp, "args", &w->args) < 0)
        return -EINVAL;
    w->status = cJSON_Parse(annot(x, CFG_ANNOT_INJECT_STATUS));
    w->mirs = cJSON_GetObjectItemCaseSensitive(w->status, "mirrors");
    if (!w->status) { /* malformed, or out of memory: cJSON_Parse says NULL for both */
        cJSON *probe = cJSON_CreateObject();
        if (!probe) return -ENOMEM;
        cJSON_Delete(probe);
    }
    if (!cJSON_IsObject(w->status) || (w->mirs && !cJSON_IsArray(w->mirs)))
        return skip(out, "annotation %s is not the JSON object reload-agent writes",
                    CFG_ANNOT_INJECT_STATUS);
    size_t cap = (size_t)cJSON_GetArraySize(w->mirs) + (size_t)cJSON_GetArraySize(w->mounts) + 1;
    w->done = calloc(cap, sizeof *w->done);
    w->taken = calloc(cap, sizeof *w->taken);
    if (!w->done || !w->taken) return -ENOMEM;
    cJSON_ArrayForEach(v, w->mirs) if (cJSON_IsString(v)) w->done[w->ndone++] = v->valuestring;
    cJSON_ArrayForEach(m, w->mounts)
    {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "mountPath");
        if (cJSON_IsString(n)) w->done[w->ndone++] = n->valuestring;
        if (cJSON_IsString(p)) w->taken[w->ntaken++] = p->valuestring;
    }
    return 1;
}

/* The operations that add the new mirrors (x->mirrors) to the sidecar:
 * mounts, --watch and --ignore args, the status's mirrors. */
static int emit_reinvoke(struct inject__ctx *x, const char *prefix, int own, struct injected *w,
                         struct inject_result *out)
{
    char *cpath = inject__printf(x, "%s/spec/initContainers/%d", prefix, own);
    cJSON **newm = calloc(x->nmirrors, sizeof *newm),
          **newa = calloc(2 * x->nmirrors + w->ntaken + INJECT_FAST_SYNC_MAX, sizeof *newa);
    if (!cpath || !newm || !newa) {
        free(cpath);
        free(newm);
        free(newa);
        return -ENOMEM;
    }
    cJSON *newlist = w->mirs ? NULL : inject__new_arr(x);
    for (size_t i = 0; i < x->nmirrors; i++) {
        newm[i] = inject__mount(x, x->mirrors[i].volume, x->mirrors[i].mount_path);
        char *arg = inject__printf(x, "--watch=%s", x->mirrors[i].mount_path);
        newa[i] = inject__str(x, arg);
        free(arg);
        inject__push(x, w->mirs ? (cJSON *)w->mirs : newlist, inject__str(x, x->mirrors[i].volume));
    }
    if (newlist) inject__add(x, w->status, "mirrors", newlist);
    op_append(x, out->ops, w->side, cpath, "volumeMounts", newm, x->nmirrors);
    size_t nign = reinvoke_ignores(x, w->args, w->taken, w->ntaken, newa + x->nmirrors);
    nign += inject__fast_sync_reinvoke_args(x, w->args, newa + x->nmirrors + nign);
    op_append(x, out->ops, w->side, cpath, "args", newa, x->nmirrors + nign);
    free(cpath);
    free(newm);
    free(newa);
    char *st = x->oom ? NULL : cJSON_PrintUnformatted(w->status);
    if (!st) x->oom = 1;
    char *so = inject__sync_objects(x, annot(x, CFG_ANNOT_SYNC_OBJECTS));
    if (st) op_status_annotations(x, out->ops, prefix, st, so);
    free(st);
    free(so);
    if (x->oom) return -ENOMEM;
    out->outcome = INJECT_INJECTED;
    return 0;
}

/* Already injected: mirrors of the volumes added since, or UNCHANGED. */
static int reinvoke(struct inject__ctx *x, const char *prefix, const cJSON *init, int own,
                    struct inject_result *out)
{
    struct injected w = {0};
    int rc = read_injected(x, init, own, &w, out);
    if (rc > 0 && (rc = inject__plan_mirrors(x, w.done, w.ndone, w.taken, w.ntaken, 0)) == 0) {
        if (too_many_roots(x, (size_t)cJSON_GetArraySize(w.args), out))
            rc = 0;
        else if (x->nmirrors == 0)
            out->outcome = INJECT_UNCHANGED;
        else
            rc = emit_reinvoke(x, prefix, own, &w, out);
    }
    injected_free(&w);
    return rc > 0 ? 0 : rc;
}

/* ---- the entry point ---- */

enum inject_opt_in inject_opt_in(const cJSON *annotations)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(annotations, CFG_ANNOT_INJECT);
    if (!v || cJSON_IsNull(v)) return INJECT_OPT_UNSET;
    if (!cJSON_IsString(v)) return INJECT_OPT_INVALID;
    if (strcmp(v->valuestring, "true") == 0) return INJECT_OPT_IN;
    if (strcmp(v->valuestring, "false") == 0) return INJECT_OPT_OUT;
    return INJECT_OPT_INVALID;
}

/* 1 if the template opted in (inject_opt_in, or opts->all for a template
 * that says nothing); else 0 with the reason in out. */
static int check_opt_in(struct inject__ctx *x, struct inject_result *out)
{
    switch (inject_opt_in(x->annots)) {
    case INJECT_OPT_IN: return 1;
    case INJECT_OPT_UNSET:
        if (x->opts->all) return 1;
        return skip(out, "not opted in: %s is not \"true\"", CFG_ANNOT_INJECT);
    case INJECT_OPT_OUT: return skip(out, "%s is \"false\"", CFG_ANNOT_INJECT);
    case INJECT_OPT_INVALID: break;
    }
    const char *v = annot(x, CFG_ANNOT_INJECT); /* a string: check_annotations ran */
    return skip(out, "%s is \"%.60s\": want \"true\" (or \"false\")", CFG_ANNOT_INJECT, v ? v : "");
}

/* The object's row in the kinds table, its template (*tmpl, NULL when a
 * step to it is absent) and the template's annotations, type-checked.
 * Returns 1, 0 when the object is not a workload (out says so), or
 * -EINVAL. */
static int read_template(struct inject__ctx *x, const cJSON *obj, const cJSON **tmpl,
                         struct inject_result *out)
{
    const char *kind, *api;
    if (inject__get_str(x, obj, "", "kind", &kind) < 0 ||
        inject__get_str(x, obj, "", "apiVersion", &api) < 0)
        return -EINVAL;
    const struct kinds_kind *ki = workload_row(api, kind);
    if (!ki) {
        out->outcome = INJECT_NOT_WORKLOAD;
        set_reason(out, "%.60s%s%.100s is not a workload with a pod template",
                   kind ? kind : "(no kind)", api ? " " : "", api ? api : "");
        return 0;
    }
    out->prefix = ki->template_prefix;
    snprintf(x->tpath, sizeof x->tpath, "%s%s", ki->template_path, *ki->template_path ? "." : "");
    x->obj = obj;
    x->ki = ki;
    char mp[96];
    snprintf(mp, sizeof mp, "%smetadata", x->tpath);
    if (find_template(x, obj, ki->template_prefix, tmpl) < 0 ||
        (*tmpl && (inject__get_obj(x, *tmpl, ki->template_path, "metadata", &x->meta) < 0 ||
                   (x->meta && inject__get_obj(x, x->meta, mp, "annotations", &x->annots) < 0))) ||
        check_annotations(x) < 0)
        return -EINVAL;
    return 1;
}

/* The pod spec's lists the gates and the plan read. */
struct pod {
    const cJSON *containers, *init;
    int own_init;       /* index of the initContainer named reload-agent, or -1 */
    const char *status; /* the status annotation: already injected */
};

/* The pod spec of tmpl into x->spec and p. Returns 1, 0 (refused: no
 * template, no spec) or -EINVAL. */
static int read_pod(struct inject__ctx *x, const cJSON *tmpl, struct pod *p,
                    struct inject_result *out)
{
    char sp[96];
    const cJSON *spec;
    if (!tmpl) return skip(out, "no pod template (%s is missing)", x->ki->template_path);
    snprintf(sp, sizeof sp, "%sspec", x->tpath);
    if (inject__get_obj(x, tmpl, x->ki->template_path, "spec", &spec) < 0) return -EINVAL;
    if (!spec) return skip(out, "no pod spec (%s is missing)", sp);
    x->spec = spec;
    if (inject__get_arr(x, spec, sp, "containers", &p->containers) < 0 ||
        inject__get_arr(x, spec, sp, "initContainers", &p->init) < 0 ||
        inject__get_arr(x, spec, sp, "volumes", &x->volumes) < 0)
        return -EINVAL;
    p->status = annot(x, CFG_ANNOT_INJECT_STATUS);
    return 1;
}

/* The pods never injected: no containers, a reload-agent container the
 * injector did not add (or a status without one), hostPID, another OS
 * than Linux. Returns 1, 0 (refused) or -EINVAL. */
static int check_pod_refusals(struct inject__ctx *x, struct pod *p, struct inject_result *out)
{
    char sp[96], os_why[160];
    int own_main, host_pid;
    snprintf(sp, sizeof sp, "%sspec", x->tpath);
    if (cJSON_GetArraySize(p->containers) == 0)
        return skip(out, "the pod template has no containers");
    if (scan_containers(x, p->containers, "containers", &own_main) < 0 ||
        scan_containers(x, p->init, "initContainers", &p->own_init) < 0)
        return -EINVAL;
    if (own_main >= 0 || (p->own_init >= 0 && !p->status))
        return skip(out, "a container named %s exists and was not injected", INJECT_CONTAINER);
    if (p->status && p->own_init < 0)
        return skip(out, "annotation %s is set but there is no %s container (remove it to inject)",
                    CFG_ANNOT_INJECT_STATUS, INJECT_CONTAINER);
    if (inject__get_bool(x, x->spec, sp, "hostPID", &host_pid) < 0) return -EINVAL;
    if (host_pid == 1) return skip(out, "hostPID pods are not injected");
    int rc = other_os(x, sp, os_why, sizeof os_why);
    if (rc < 0) return rc;
    if (rc == 1) /* its securityContext would be rejected, or its image never run */
        return skip(out, "%s: the agent runs on Linux", os_why);
    return 1;
}

/* The gates in the header's order, then a reinvocation or a first
 * injection. */
static int run(struct inject__ctx *x, const cJSON *obj, struct inject_result *out)
{
    const cJSON *tmpl;
    const char *ref_name;
    struct pod p = {0};
    int rc = read_template(x, obj, &tmpl, out);
    if (rc <= 0) return rc;
    out->outcome = INJECT_SKIPPED;
    if (!tmpl && x->ki->workload_ref && kinds_workload_ref(obj, &ref_name) != 0)
        return skip(out, "the %s has a workloadRef: inject the referenced workload instead",
                    x->ki->kind);
    if (!check_opt_in(x, out)) return 0;
    if ((rc = read_pod(x, tmpl, &p, out)) <= 0 || (rc = check_pod_refusals(x, &p, out)) <= 0)
        return rc;

    size_t nc = (size_t)cJSON_GetArraySize(p.containers) + (size_t)cJSON_GetArraySize(p.init);
    x->apps = calloc(nc, sizeof *x->apps);
    if (!x->apps) return -ENOMEM;
    add_apps(x, p.containers, "containers", 0);
    add_apps(x, p.init, "initContainers", 1);
    const char *prefix = x->ki->template_prefix;
    if (p.status) return reinvoke(x, prefix, p.init, p.own_init, out);
    return inject_fresh(x, prefix, p.containers, out);
}

int inject_object(const cJSON *obj, const struct inject_opts *opts, struct inject_result *out,
                  char *err, size_t errlen)
{
    static const struct inject_opts DEFAULTS = {0};
    /* messages are built in ebuf, whatever the caller's buffer: a reason
     * taken from one (the agent's error) must not depend on errlen */
    char ebuf[512] = "";
    struct inject__ctx x = {.opts = opts ? opts : &DEFAULTS, .err = ebuf, .errlen = sizeof ebuf};
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(obj)) {
        snprintf(ebuf, sizeof ebuf, "the object is not a JSON object");
        rc = -EINVAL;
    } else if (!(out->ops = cJSON_CreateArray())) {
        rc = -ENOMEM;
    } else {
        rc = run(&x, obj, out);
    }
    if (rc == 0 && x.oom) rc = -ENOMEM;
    if (rc == 0 && out->outcome != INJECT_INJECTED && cJSON_GetArraySize(out->ops) > 0) {
        cJSON_Delete(out->ops); /* a refusal after a partial plan: no operations */
        out->ops = cJSON_CreateArray();
        if (!out->ops) rc = -ENOMEM;
    }
    if (rc == 0 && out->outcome == INJECT_INJECTED) { /* the notes belong to an injection */
        out->notes = x.notes;
        out->nnotes = x.nnotes;
        x.notes = NULL;
        x.nnotes = 0;
    }
    inject__safe_free(&x);
    inject__plan_free(&x);
    inject__fast_sync_free(&x);
    free(x.apps);
    if (rc < 0 || out->outcome != INJECT_INJECTED) { /* warnings belong to an injection */
        for (size_t i = 0; i < x.nwarnings; i++) free(x.warnings[i]);
        free(x.warnings);
        x.warnings = NULL;
        x.nwarnings = 0;
    }
    if (rc < 0) {
        inject_result_free(out);
        if (rc == -ENOMEM) snprintf(ebuf, sizeof ebuf, "out of memory");
        ra_one_line_fix(ebuf, sizeof ebuf);
        if (err && errlen) snprintf(err, errlen, "%s", ebuf);
        return rc;
    }
    if (err && errlen) err[0] = '\0';
    out->warnings = x.warnings;
    out->nwarnings = x.nwarnings;
    return 0;
}
