/*
 * safe.c - what the injection adds for safe reload (issue 26,
 * docs/safe-reload.md, docs/staging.md; transform_int.h): the validator
 * container from the app's own image with the agent's binary copied by
 * the install init container, the keep-last-good copies (one emptyDir per
 * kept volume, the app's mounts moved to its live/ copy, the validator's
 * to its candidate/ copy), the agent's args for them, its startup probe,
 * --stage-workload for a workload whose replicas stage, and the lines
 * that say what each step will do (the CLI's report).
 *
 * Read from the template's annotations: keep-last-good ("true" or
 * "false"), validate and verify (a command verify runs in the validator
 * too); the agent reads validate, verify, their timeouts, stage and
 * storm-limit from the same annotations itself, so they are not copied
 * into its args (a live edit applies to the next change).
 */
#include "inject/transform_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "config/config.h"
#include "kube/k8sname.h"
#include "kube/lease.h"

#define A_DEFAULT_CONTAINER "kubectl.kubernetes.io/default-container"
#define A_VALIDATE CFG_ANNOTATION_PREFIX "validate"
#define A_VERIFY CFG_ANNOTATION_PREFIX "verify"

static const char *annot_str(const struct inject__ctx *x, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(x->annots, key);
    return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

/* Sets the refusal's reason in x->err; returns 1 (refused). */
static int refuse(struct inject__ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int refuse(struct inject__ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->err, x->errlen, fmt, ap);
    va_end(ap);
    ra_one_line_fix(x->err, x->errlen);
    return 1;
}

void inject__note(struct inject__ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    inject__vpush(x, &x->notes, &x->nnotes, 1024, fmt, ap); /* two object names fit */
    va_end(ap);
}

/* ---- which container the validator mirrors ---- */

/* The regular app containers (spec.containers) into *n; the one the
 * default-container annotation names into *named (NULL when none). */
static size_t regular_apps(const struct inject__ctx *x, const char *want,
                           const struct inject__app **named, const struct inject__app **first)
{
    size_t n = 0;
    *named = *first = NULL;
    for (size_t i = 0; i < x->napps; i++) {
        if (strncmp(x->apps[i].path, "spec.containers", 15) != 0) continue;
        if (!*first) *first = &x->apps[i];
        if (want && strcmp(x->apps[i].name, want) == 0) *named = &x->apps[i];
        n++;
    }
    return n;
}

/* The app container the validator is made from (x->validator_app): the
 * only one, or the one kubectl.kubernetes.io/default-container names; its
 * image must be a string. Returns 0, or 1 refused (x->err). */
static int pick_validator_app(struct inject__ctx *x, const char *why)
{
    const char *want = annot_str(x, A_DEFAULT_CONTAINER), *image;
    const struct inject__app *named, *first;
    size_t n = regular_apps(x, want, &named, &first);
    if (want && !named)
        return refuse(x,
                      "%s: the validator runs the app's image, and annotation %s names \"%.60s\", "
                      "which is no container of the pod",
                      why, A_DEFAULT_CONTAINER, want);
    if (!want && n > 1)
        return refuse(x,
                      "%s: the validator runs one container's image, and the pod has %zu: name "
                      "the app with annotation %s",
                      why, n, A_DEFAULT_CONTAINER);
    x->validator_app = named ? named : first;
    if (!x->validator_app) return refuse(x, "%s: the pod template has no app container", why);
    const cJSON *img = cJSON_GetObjectItemCaseSensitive(x->validator_app->c, "image");
    image = cJSON_IsString(img) ? img->valuestring : NULL;
    if (!image || !*image)
        return refuse(x, "%s: the validator runs the app's image, and container %s has none", why,
                      x->validator_app->name);
    return 0;
}

/* ---- keep-last-good: the kept volumes ---- */

/* 1 if the volume (spec.volumes item) holds a Secret: a secret volume, a
 * CSI volume (only the Secrets Store driver's are mirrored) or a
 * projection with a secret source. */
static int holds_secret(const cJSON *vol)
{
    if (cJSON_GetObjectItemCaseSensitive(vol, "secret") ||
        cJSON_GetObjectItemCaseSensitive(vol, "csi")) /* the Secrets Store CSI driver's */
        return 1;
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(vol, "projected"), *s;
    const cJSON *sources = cJSON_GetObjectItemCaseSensitive(pj, "sources");
    cJSON_ArrayForEach(s, (cJSON_IsArray(sources) ? sources : NULL))
    {
        if (cJSON_GetObjectItemCaseSensitive(s, "secret")) return 1;
    }
    return 0;
}

/* How the apps mount volume name: *whole set when a regular container
 * mounts it without subPath; returns the first subPath mount's container
 * (and its path in *at) or NULL. The mounts' types were checked by the
 * mirror plan. */
static const struct inject__app *mounts_of_volume(const struct inject__ctx *x, const char *name,
                                                  int *whole, const char **at)
{
    *whole = 0;
    for (size_t i = 0; i < x->napps; i++) {
        const cJSON *m, *ms = cJSON_GetObjectItemCaseSensitive(x->apps[i].c, "volumeMounts");
        int regular = strncmp(x->apps[i].path, "spec.containers", 15) == 0;
        cJSON_ArrayForEach(m, (cJSON_IsArray(ms) ? ms : NULL))
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name");
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(m, "subPath");
            const cJSON *se = cJSON_GetObjectItemCaseSensitive(m, "subPathExpr");
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "mountPath");
            if (!cJSON_IsString(n) || strcmp(n->valuestring, name) != 0) continue;
            if ((cJSON_IsString(sp) && *sp->valuestring) ||
                (cJSON_IsString(se) && *se->valuestring)) {
                *at = cJSON_IsString(p) ? p->valuestring : "";
                return &x->apps[i];
            }
            if (regular) *whole = 1;
        }
    }
    return NULL;
}

/* Plans one kept volume for mirror i. Returns 0, 1 refused, -ENOMEM. */
static int plan_kept(struct inject__ctx *x, size_t i)
{
    const struct inject__mirror *mi = &x->mirrors[i];
    int whole;
    const char *at = NULL;
    const struct inject__app *sub = mounts_of_volume(x, mi->volume, &whole, &at);
    if (sub)
        return refuse(x,
                      "keep-last-good: container %s mounts volume %s with subPath (at %.100s): "
                      "the copy cannot replace part of a volume; mount it whole or drop "
                      "keep-last-good",
                      sub->name, mi->volume, at);
    if (!whole) return 0; /* only init containers read it, before the agent runs */
    struct inject__lkg *k = &x->lkg[x->nlkg];
    char plain[512], hashed[K8S_DNS1123_LABEL_MAX + 1];
    int n = snprintf(plain, sizeof plain, "%s%s", INJECT__LKG_PREFIX, mi->volume);
    const char *pick = plain;
    if (n > K8S_DNS1123_LABEL_MAX || inject__volume(x, plain))
        pick = k8s_hashed_name(plain, K8S_DNS1123_LABEL_MAX, mi->volume, hashed, sizeof hashed);
    if (inject__volume(x, pick))
        return refuse(x, "keep-last-good: the pod already has a volume named %s", pick);
    k->volume = mi->volume;
    k->src = mi->mount_path;
    k->memory = holds_secret(inject__volume(x, mi->volume));
    k->name = strdup(pick);
    k->dir = inject__printf(x, "%s/%s", INJECT__LKG_ROOT, mi->volume);
    if (!k->name || !k->dir) {
        free(k->name);
        free(k->dir);
        return -ENOMEM;
    }
    x->nlkg++;
    return 0;
}

static int plan_lkg(struct inject__ctx *x)
{
    x->lkg = calloc(x->nmirrors ? x->nmirrors : 1, sizeof *x->lkg);
    if (!x->lkg) return -ENOMEM;
    for (size_t i = 0; i < x->nmirrors; i++) {
        int rc = plan_kept(x, i);
        if (rc) return rc;
    }
    if (x->nlkg == 0)
        return refuse(x, "keep-last-good: no ConfigMap, Secret or projected volume is mounted "
                         "whole by an app container (env is read at start: nothing to keep)");
    return 0;
}

/* ---- the plan ---- */

/* A volume or container name safe reload adds that the pod has already. */
static int check_names(struct inject__ctx *x)
{
    const cJSON *containers = cJSON_GetObjectItemCaseSensitive(x->spec, "containers");
    const cJSON *init = cJSON_GetObjectItemCaseSensitive(x->spec, "initContainers");
    static const char *const VOLS[] = {INJECT__BIN_VOLUME, INJECT__SOCKET_VOLUME};
    static const char *const CONTS[] = {INJECT__INSTALL_CONTAINER, INJECT__VALIDATOR_CONTAINER};
    for (size_t i = 0; i < 2; i++)
        if (inject__volume(x, VOLS[i]))
            return refuse(x, "the pod already has a volume named %s that reload-agent did not add",
                          VOLS[i]);
    const cJSON *lists[2] = {containers, init}, *c;
    for (size_t l = 0; l < 2; l++) cJSON_ArrayForEach(c, lists[l])
        {
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(c, "name");
            for (size_t i = 0; i < 2 && cJSON_IsString(n); i++)
                if (strcmp(n->valuestring, CONTS[i]) == 0)
                    return refuse(x, "a container named %s exists and was not injected", CONTS[i]);
        }
    return 0;
}

int inject__plan_safe(struct inject__ctx *x)
{
    const char *lkg = annot_str(x, CFG_ANNOT_KEEP_LAST_GOOD), *validate = annot_str(x, A_VALIDATE);
    const char *verify = annot_str(x, A_VERIFY);
    int verify_cmd =
        verify && strncmp(verify, "http://", 7) != 0 && strncmp(verify, "https://", 8) != 0;
    if (lkg && strcmp(lkg, "true") != 0 && strcmp(lkg, "false") != 0)
        return refuse(x, "invalid %s \"%.40s\": want \"true\" or \"false\"",
                      CFG_ANNOT_KEEP_LAST_GOOD, lkg);
    x->keep = lkg && strcmp(lkg, "true") == 0;
    x->validator = validate || verify_cmd;
    if (!x->keep && !x->validator) return 0;
    int rc = check_names(x);
    if (rc == 0 && x->validator)
        rc = pick_validator_app(x, validate ? "validate" : "a command verify");
    if (rc == 0 && x->keep) rc = plan_lkg(x);
    return rc;
}

void inject__stage_default_api(struct inject__ctx *x, int api, const char *why)
{
    char *note = x->stage_pending;
    if (!note) return;
    x->stage_pending = NULL;
    if (api) {
        inject__note(x, "%s, through Lease %s (Role: docs/staging.md)", note, x->stage_lease);
    } else {
        inject__note(x,
                     "%s, but the sidecar has no API access%s: each replica acts alone (the "
                     "annotation %sstage asks for a token)",
                     note, why, CFG_ANNOTATION_PREFIX);
        free(x->stage_workload);
        x->stage_workload = NULL;
    }
    free(note);
}

/* The checks that need the agent's judgment of its configuration. */
int inject__check_safe(struct inject__ctx *x, int dry_run)
{
    if (x->keep && dry_run)
        return refuse(x, "keep-last-good with dry-run: the agent fills no copy, and the app "
                         "would find its configuration directories empty");
    return 0;
}

void inject__plan_stage(struct inject__ctx *x, int count, int percent, int deflt)
{
    static const char *const KINDS[] = {"Deployment", "StatefulSet", "DaemonSet", "Rollout"};
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(x->obj, "metadata");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
    char width[32];
    if (!count && !percent) return;
    snprintf(width, sizeof width, percent ? "%d%%" : "%d", percent ? percent : count);
    for (size_t i = 0; i < 4 && cJSON_IsString(name) && *name->valuestring; i++) {
        if (strcmp(x->ki->kind, KINDS[i]) != 0) continue;
        char kind[16];
        size_t k = 0;
        for (; KINDS[i][k] && k < sizeof kind - 1; k++)
            kind[k] = (char)(KINDS[i][k] | 0x20); /* ASCII letters: lower case */
        kind[k] = '\0';
        char lease[LEASE_NAME_MAX + 1];
        if (lease_name_for(KINDS[i], name->valuestring, lease, sizeof lease) < 0) {
            inject__note(x,
                         "stage: %s replica(s) at a time%s, but the %s's name is not an object "
                         "name: each acts alone",
                         width, deflt ? " (the default of restart)" : "", KINDS[i]);
            return;
        }
        x->stage_workload = inject__printf(x, "%s/%s", kind, name->valuestring);
        free(x->stage_lease);
        x->stage_lease = inject__printf(x, "%s", lease);
        if (deflt) {
            x->stage_pending =
                inject__printf(x, "stage: %s replica(s) of %s at a time (the default of restart)",
                               width, x->stage_workload);
            return;
        }
        inject__note(x,
                     "stage: %s replica(s) of %s at a time, through Lease %s (Role: "
                     "docs/staging.md)",
                     width, x->stage_workload, x->stage_lease);
        return;
    }
    if (*x->ki->template_prefix)
        inject__note(x,
                     "stage: %s replica(s) at a time%s, but a %s's pods belong to no workload "
                     "that stages: each acts alone",
                     width, deflt ? " (the default of restart)" : "", x->ki->title);
    else
        inject__note(x,
                     "stage: %s replica(s) at a time%s; the agent finds its workload through the "
                     "owner chain (needs get on pods and replicasets) or acts alone",
                     width, deflt ? " (the default of restart)" : "");
}

/* The notes of validate, verify and keep-last-good. */
void inject__safe_notes(struct inject__ctx *x)
{
    const char *validate = annot_str(x, A_VALIDATE), *verify = annot_str(x, A_VERIFY);
    const cJSON *img =
        x->validator_app ? cJSON_GetObjectItemCaseSensitive(x->validator_app->c, "image") : NULL;
    if (validate)
        inject__note(x,
                     "validate: `%.120s` runs in container %s (image %.100s, container %s's "
                     "mounts and env) before every action; a rejected content is not acted on",
                     validate, INJECT__VALIDATOR_CONTAINER,
                     cJSON_IsString(img) ? img->valuestring : "?", x->validator_app->name);
    for (size_t i = 0; i < x->nlkg; i++)
        inject__note(x,
                     "keep-last-good: the app reads volume %s from %s/live (emptyDir %s), "
                     "swapped only to validated content",
                     x->lkg[i].volume, x->lkg[i].dir, x->lkg[i].name);
    if (x->nlkg)
        inject__note(x, "keep-last-good: the app starts once the copies hold validated content "
                        "(the agent's startupProbe `reload-agent ready`)");
    if (verify)
        inject__note(x, "verify: after each in-place action, %s must %s within verify-timeout; %s",
                     strncmp(verify, "http", 4) == 0 ? "the URL" : "the command (in the validator)",
                     strncmp(verify, "http", 4) == 0 ? "answer 2xx" : "exit 0",
                     x->keep ? "else the last good copy is restored and the action repeated"
                             : "else Event ConfigVerifyFailed (nothing to roll back to)");
}

/* ---- args, volumes, mounts ---- */

size_t inject__safe_args(struct inject__ctx *x, char **v)
{
    size_t k = 0;
    if (x->validator) v[k++] = inject__printf(x, "--validator-socket=%s", INJECT__SOCKET_PATH);
    for (size_t i = 0; i < x->nlkg; i++)
        v[k++] = inject__printf(x, "--keep-last-good=%s=%s", x->lkg[i].src, x->lkg[i].dir);
    if (x->stage_workload) v[k++] = inject__printf(x, "--stage-workload=%s", x->stage_workload);
    return k;
}

static cJSON *empty_dir(struct inject__ctx *x, const char *name, int memory)
{
    cJSON *vol = inject__new_obj(x), *ed = inject__new_obj(x);
    inject__add(x, vol, "name", inject__str(x, name));
    if (memory) inject__add(x, ed, "medium", inject__str(x, "Memory"));
    inject__add(x, vol, "emptyDir", ed);
    return vol;
}

size_t inject__safe_nvolumes(const struct inject__ctx *x)
{
    return (x->validator || x->keep ? 1 : 0) + (x->validator ? 1 : 0) + x->nlkg;
}

size_t inject__safe_volumes(struct inject__ctx *x, cJSON **v)
{
    size_t k = 0;
    if (x->validator || x->keep) v[k++] = empty_dir(x, INJECT__BIN_VOLUME, 0);
    if (x->validator) v[k++] = empty_dir(x, INJECT__SOCKET_VOLUME, 0);
    for (size_t i = 0; i < x->nlkg; i++) v[k++] = empty_dir(x, x->lkg[i].name, x->lkg[i].memory);
    return k;
}

void inject__safe_volume_names(struct inject__ctx *x, cJSON *names)
{
    if (x->validator || x->keep) inject__push(x, names, inject__str(x, INJECT__BIN_VOLUME));
    if (x->validator) inject__push(x, names, inject__str(x, INJECT__SOCKET_VOLUME));
    for (size_t i = 0; i < x->nlkg; i++) inject__push(x, names, inject__str(x, x->lkg[i].name));
}

/* A writable volumeMount. */
static cJSON *rw_mount(struct inject__ctx *x, const char *name, const char *path)
{
    cJSON *m = inject__new_obj(x);
    inject__add(x, m, "name", inject__str(x, name));
    inject__add(x, m, "mountPath", inject__str(x, path));
    return m;
}

/* A read-only subPath mount of a kept volume's copy. */
static cJSON *copy_mount(struct inject__ctx *x, const char *name, const char *path, const char *sub)
{
    cJSON *m = inject__new_obj(x);
    inject__add(x, m, "name", inject__str(x, name));
    inject__add(x, m, "mountPath", inject__str(x, path));
    inject__add(x, m, "subPath", inject__str(x, sub));
    inject__add(x, m, "readOnly", cJSON_CreateTrue());
    return m;
}

void inject__safe_agent_mounts(struct inject__ctx *x, cJSON *mounts)
{
    for (size_t i = 0; i < x->nlkg; i++)
        inject__push(x, mounts, rw_mount(x, x->lkg[i].name, x->lkg[i].dir));
    if (x->validator)
        inject__push(x, mounts, rw_mount(x, INJECT__SOCKET_VOLUME, INJECT__SOCKET_DIR));
}

void inject__safe_probe(struct inject__ctx *x, cJSON *c)
{
    if (!x->nlkg) return;
    cJSON *p = inject__new_obj(x), *ex = inject__new_obj(x), *cmd = inject__new_arr(x);
    static const char *const ARGV[] = {INJECT__AGENT_BINARY, "ready", "--state-dir",
                                       INJECT__STATE_PATH};
    for (size_t i = 0; i < 4; i++) inject__push(x, cmd, inject__str(x, ARGV[i]));
    inject__add(x, ex, "command", cmd);
    inject__add(x, p, "exec", ex);
    inject__add(x, p, "periodSeconds", cJSON_CreateNumber(1));
    inject__add(x, p, "timeoutSeconds", cJSON_CreateNumber(5));
    inject__add(x, p, "failureThreshold", cJSON_CreateNumber(INJECT__STARTUP_FAILURES));
    inject__add(x, c, "startupProbe", p);
}

/* The kept volume named name, or NULL. */
static const struct inject__lkg *kept(const struct inject__ctx *x, const cJSON *m)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(m, "name");
    for (size_t i = 0; i < x->nlkg && cJSON_IsString(n); i++)
        if (strcmp(x->lkg[i].volume, n->valuestring) == 0) return &x->lkg[i];
    return NULL;
}

void inject__safe_app_mounts(struct inject__ctx *x, cJSON *ops, const char *spec_path)
{
    for (size_t a = 0; a < x->napps && x->nlkg; a++) {
        const struct inject__app *app = &x->apps[a];
        if (strncmp(app->path, "spec.containers[", 16) != 0) continue;
        int ci = atoi(app->path + 16), j = 0;
        const cJSON *m, *ms = cJSON_GetObjectItemCaseSensitive(app->c, "volumeMounts");
        cJSON_ArrayForEach(m, (cJSON_IsArray(ms) ? ms : NULL))
        {
            const struct inject__lkg *k = kept(x, m);
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "mountPath");
            if (k && cJSON_IsString(p)) {
                char *path =
                    inject__printf(x, "%s/containers/%d/volumeMounts/%d", spec_path, ci, j);
                inject__op(x, ops, "replace", path, copy_mount(x, k->name, p->valuestring, "live"));
                free(path);
            }
            j++;
        }
    }
}

/* The validator's mounts: the app's (kept volumes at their candidate
 * copy), the binary, the socket. */
static cJSON *validator_mounts(struct inject__ctx *x, const cJSON *app)
{
    cJSON *out = inject__new_arr(x);
    const cJSON *m, *ms = cJSON_GetObjectItemCaseSensitive(app, "volumeMounts");
    cJSON_ArrayForEach(m, (cJSON_IsArray(ms) ? ms : NULL))
    {
        const struct inject__lkg *k = kept(x, m);
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(m, "mountPath");
        cJSON *c = k && cJSON_IsString(p) ? copy_mount(x, k->name, p->valuestring, "candidate")
                                          : cJSON_Duplicate(m, 1);
        if (!c) x->oom = 1;
        inject__push(x, out, c);
    }
    inject__push(x, out, inject__mount(x, INJECT__BIN_VOLUME, INJECT__BIN_PATH));
    inject__push(x, out, rw_mount(x, INJECT__SOCKET_VOLUME, INJECT__SOCKET_DIR));
    return out;
}

/* A copy of field key of app into c, when present. */
static void copy_field(struct inject__ctx *x, cJSON *c, const cJSON *app, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(app, key);
    if (!v || cJSON_IsNull(v)) return;
    cJSON *d = cJSON_Duplicate(v, 1);
    if (!d) x->oom = 1;
    inject__add(x, c, key, d);
}

/* The validator's resources: the sidecar's requests (each lowered to the
 * app's limit when that is below), the app's limits. */
static cJSON *validator_resources(struct inject__ctx *x, const struct inject__sidecar *s,
                                  const cJSON *app)
{
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(app, "resources");
    const cJSON *lim = cJSON_GetObjectItemCaseSensitive(res, "limits");
    cJSON *r = inject__new_obj(x), *req = inject__new_obj(x);
    const char *want[2][2] = {{"cpu", s->cpu_request}, {"memory", s->memory_request}};
    for (size_t i = 0; i < 2; i++) {
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(lim, want[i][0]);
        long double lv, rv;
        const char *pick = want[i][1];
        if (cJSON_IsString(l) && inject__quantity(l->valuestring, &lv) == 0 &&
            inject__quantity(pick, &rv) == 0 && lv < rv)
            pick = l->valuestring;
        inject__add(x, req, want[i][0], inject__str(x, pick));
    }
    inject__add(x, r, "requests", req);
    if (cJSON_IsObject(lim)) {
        cJSON *d = cJSON_Duplicate(lim, 1);
        if (!d) x->oom = 1;
        inject__add(x, r, "limits", d);
    }
    return r;
}

cJSON *inject__validator_container(struct inject__ctx *x, const struct inject__sidecar *s)
{
    const cJSON *app = x->validator_app->c;
    cJSON *c = inject__new_obj(x), *cmd = inject__new_arr(x), *args = inject__new_arr(x);
    inject__add(x, c, "name", inject__str(x, INJECT__VALIDATOR_CONTAINER));
    copy_field(x, c, app, "image");
    copy_field(x, c, app, "imagePullPolicy");
    inject__push(x, cmd, inject__str(x, INJECT__BIN_PATH "/reload-agent"));
    inject__add(x, c, "command", cmd);
    inject__push(x, args, inject__str(x, "validator"));
    inject__push(x, args, inject__str(x, "--socket=" INJECT__SOCKET_PATH));
    inject__add(x, c, "args", args);
    copy_field(x, c, app, "workingDir");
    copy_field(x, c, app, "env");
    copy_field(x, c, app, "envFrom");
    inject__add(x, c, "resources", validator_resources(x, s, app));
    copy_field(x, c, app, "securityContext");
    inject__add(x, c, "volumeMounts", validator_mounts(x, app));
    inject__add(x, c, "restartPolicy", inject__str(x, "Always"));
    return c;
}

void inject__safe_install_args(struct inject__ctx *x, cJSON *args, cJSON *mounts)
{
    inject__push(x, args, inject__str(x, "copy-self"));
    inject__push(x, args, inject__str(x, INJECT__BIN_PATH "/reload-agent"));
    for (size_t i = 0; i < x->nlkg; i++) {
        char *a = inject__printf(x, "--prepare=%s", x->lkg[i].dir);
        inject__push(x, args, inject__str(x, a));
        free(a);
    }
    inject__push(x, mounts, rw_mount(x, INJECT__BIN_VOLUME, INJECT__BIN_PATH));
    for (size_t i = 0; i < x->nlkg; i++)
        inject__push(x, mounts, rw_mount(x, x->lkg[i].name, x->lkg[i].dir));
}

void inject__safe_free(struct inject__ctx *x)
{
    for (size_t i = 0; i < x->nlkg; i++) {
        free(x->lkg[i].name);
        free(x->lkg[i].dir);
    }
    free(x->lkg);
    x->lkg = NULL;
    x->nlkg = 0;
    free(x->stage_workload);
    x->stage_workload = NULL;
    free(x->stage_lease);
    x->stage_lease = NULL;
    free(x->stage_pending);
    x->stage_pending = NULL;
    for (size_t i = 0; i < x->nnotes; i++) free(x->notes[i]);
    free(x->notes);
    x->notes = NULL;
    x->nnotes = 0;
}
