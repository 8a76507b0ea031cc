/*
 * sidecar.c - the injected reload-agent container (transform_int.h): a
 * native sidecar (init container with restartPolicy: Always) with the
 * agent's args, POD_NAME/POD_NAMESPACE from the downward API, small
 * resources, a hardened securityContext, its volumeMounts (mirrors,
 * env volumes, the annotations file, restart-pod's state directory, the
 * copied token mount) and, for restart-pod, its restartPolicyRules
 * (restartrule.c). Key order is fixed, so the operations are byte-stable.
 */
#include "inject/transform_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "kube/k8sname.h"

void inject__args_free(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++) free(v[i]);
    free(v);
}

int inject__mirror_paths(const struct inject__ctx *x, struct inject__names *m)
{
    if (inject__names_init(m, x->nmirrors) < 0) return -ENOMEM;
    for (size_t i = 0; i < x->nmirrors; i++)
        if (inject__names_put(m, x->mirrors[i].mount_path, i, NULL) < 0) {
            inject__names_free(m);
            return -ENOMEM;
        }
    return 0;
}

char *inject__nested_ignore(struct inject__ctx *x, const char *path,
                            const struct inject__names *within)
{
    long up = inject__names_ancestor(within, path);
    if (up == -ENOMEM) x->oom = 1;
    if (up < 0) return NULL;
    size_t len = strlen(path);
    char *g = malloc(2 * len + sizeof "/..*");
    if (!g) {
        x->oom = 1;
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (strchr("*?[\\", path[i])) g[o++] = '\\';
        g[o++] = path[i];
    }
    memcpy(g + o, "/..*", sizeof "/..*");
    return g;
}

char **inject__sidecar_args(struct inject__ctx *x, const struct inject__sidecar *s, size_t *n)
{
    /* the mirrors' --watch and --ignore, the env volumes', --events, the
     * restart rules, --state-dir, --fast-sync and its objects */
    size_t cap = 2 * x->nmirrors + x->nenvs + 5 + x->nfast + 2 + x->nlkg, k = 0;
    char **v = calloc(cap, sizeof *v);
    struct inject__names paths;
    if (!v || inject__mirror_paths(x, &paths) < 0) {
        free(v);
        x->oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < x->nmirrors; i++)
        v[k++] = inject__printf(x, "--watch=%s", x->mirrors[i].mount_path);
    for (size_t i = 0; i < x->nenvs; i++)
        v[k++] = inject__printf(x, "%s=%s", x->envs[i].extra ? "--watch" : "--env-watch",
                                x->envs[i].mount_path);
    for (size_t i = 0; i < x->nmirrors; i++) {
        char *g = inject__nested_ignore(x, x->mirrors[i].mount_path, &paths);
        if (g) v[k++] = inject__printf(x, "--ignore=%s", g);
        free(g);
    }
    inject__names_free(&paths);
    if (s->events_off) v[k++] = inject__printf(x, "--events=false");
    if (s->restart_rules) v[k++] = inject__printf(x, "--restart-policy-rules=%s", s->restart_rules);
    if (s->state_dir) v[k++] = inject__printf(x, "--state-dir=%s", INJECT__STATE_PATH);
    if (s->fast_sync) k += inject__fast_sync_args(x, v + k);
    k += inject__safe_args(x, v + k);
    if (s->notify_secret)
        v[k++] =
            inject__printf(x, "--notify-url-file=%s/%s", INJECT__NOTIFY_PATH, INJECT__NOTIFY_FILE);
    *n = k;
    if (x->oom) {
        inject__args_free(v, k);
        return NULL;
    }
    return v;
}

cJSON *inject__mount(struct inject__ctx *x, const char *name, const char *path)
{
    cJSON *m = inject__new_obj(x);
    inject__add(x, m, "name", inject__str(x, name));
    inject__add(x, m, "mountPath", inject__str(x, path));
    inject__add(x, m, "readOnly", cJSON_CreateTrue());
    return m;
}

static cJSON *field_env(struct inject__ctx *x, const char *name, const char *field)
{
    cJSON *e = inject__new_obj(x), *vf = inject__new_obj(x), *fr = inject__new_obj(x);
    inject__add(x, e, "name", inject__str(x, name));
    inject__add(x, fr, "fieldPath", inject__str(x, field));
    inject__add(x, vf, "fieldRef", fr);
    inject__add(x, e, "valueFrom", vf);
    return e;
}

static cJSON *security_context(struct inject__ctx *x, const struct inject__sidecar *s)
{
    cJSON *sc = inject__new_obj(x), *caps = inject__new_obj(x), *drop = inject__new_arr(x);
    cJSON *secc = inject__new_obj(x);
    /* UID 0 only when the app runs as root (transform.c, sidecar_uid). */
    inject__add(x, sc, "runAsNonRoot", cJSON_CreateBool(s->run_as_user != 0));
    if (s->run_as_user >= 0) inject__add(x, sc, "runAsUser", cJSON_CreateNumber(s->run_as_user));
    if (s->run_as_group >= 0) inject__add(x, sc, "runAsGroup", cJSON_CreateNumber(s->run_as_group));
    inject__add(x, sc, "readOnlyRootFilesystem", cJSON_CreateTrue());
    inject__add(x, sc, "allowPrivilegeEscalation", cJSON_CreateFalse());
    inject__push(x, drop, inject__str(x, "ALL"));
    inject__add(x, caps, "drop", drop);
    inject__add(x, sc, "capabilities", caps);
    inject__add(x, secc, "type", inject__str(x, "RuntimeDefault"));
    inject__add(x, sc, "seccompProfile", secc);
    return sc;
}

/* The state volume's mount (writable), at INJECT__STATE_PATH. */
static cJSON *state_mount(struct inject__ctx *x)
{
    cJSON *m = inject__new_obj(x);
    inject__add(x, m, "name", inject__str(x, INJECT__STATE_VOLUME));
    inject__add(x, m, "mountPath", inject__str(x, INJECT__STATE_PATH));
    return m;
}

/* The sidecar's resources. */
static cJSON *resources(struct inject__ctx *x, const struct inject__sidecar *s)
{
    cJSON *res = inject__new_obj(x), *req = inject__new_obj(x), *lim = inject__new_obj(x);
    inject__add(x, req, "cpu", inject__str(x, s->cpu_request));
    inject__add(x, req, "memory", inject__str(x, s->memory_request));
    inject__add(x, lim, "memory", inject__str(x, s->memory_limit));
    inject__add(x, res, "requests", req);
    inject__add(x, res, "limits", lim);
    return res;
}

cJSON *inject__sidecar_container(struct inject__ctx *x, const struct inject__sidecar *s)
{
    cJSON *c = inject__new_obj(x);
    inject__add(x, c, "name", inject__str(x, INJECT_CONTAINER));
    inject__add(x, c, "image", inject__str(x, s->image));

    cJSON *args = inject__new_arr(x);
    size_t n = 0;
    char **v = inject__sidecar_args(x, s, &n);
    inject__push(x, args, inject__str(x, "run"));
    for (size_t i = 0; v && i < n; i++) inject__push(x, args, inject__str(x, v[i]));
    inject__args_free(v, n);
    inject__add(x, c, "args", args);

    cJSON *env = inject__new_arr(x);
    inject__push(x, env, field_env(x, "POD_NAME", "metadata.name"));
    inject__push(x, env, field_env(x, "POD_NAMESPACE", "metadata.namespace"));
    inject__add(x, c, "env", env);

    inject__add(x, c, "resources", resources(x, s));
    inject__add(x, c, "securityContext", security_context(x, s));

    cJSON *mounts = inject__new_arr(x);
    for (size_t i = 0; i < x->nmirrors; i++)
        inject__push(x, mounts, inject__mount(x, x->mirrors[i].volume, x->mirrors[i].mount_path));
    for (size_t i = 0; i < x->nenvs; i++)
        inject__push(x, mounts, inject__mount(x, x->envs[i].volume, x->envs[i].mount_path));
    inject__push(x, mounts, inject__mount(x, INJECT__PODINFO_VOLUME, INJECT__PODINFO_PATH));
    if (s->state_dir) inject__push(x, mounts, state_mount(x));
    inject__safe_agent_mounts(x, mounts);
    if (s->notify_secret)
        inject__push(x, mounts, inject__mount(x, INJECT__NOTIFY_VOLUME, INJECT__NOTIFY_PATH));
    if (s->token_mount) {
        cJSON *tm = cJSON_Duplicate(s->token_mount, 1);
        if (!tm) x->oom = 1;
        inject__push(x, mounts, tm);
    }
    inject__add(x, c, "volumeMounts", mounts);
    inject__add(x, c, "restartPolicy", inject__str(x, "Always"));
    inject__safe_probe(x, c);
    if (s->restart_rules) { /* our own JSON: NULL only when out of memory */
        cJSON *rules = cJSON_Parse(s->restart_rules);
        if (!rules) x->oom = 1;
        inject__add(x, c, "restartPolicyRules", rules);
    }
    if (x->oom) {
        cJSON_Delete(c);
        return NULL;
    }
    return c;
}

cJSON *inject__install_container(struct inject__ctx *x, const struct inject__sidecar *s)
{
    cJSON *c = inject__new_obj(x), *args = inject__new_arr(x), *mounts = inject__new_arr(x);
    inject__add(x, c, "name", inject__str(x, INJECT__INSTALL_CONTAINER));
    inject__add(x, c, "image", inject__str(x, s->image));
    inject__safe_install_args(x, args, mounts);
    inject__add(x, c, "args", args);
    inject__add(x, c, "resources", resources(x, s));
    inject__add(x, c, "securityContext", security_context(x, s));
    inject__add(x, c, "volumeMounts", mounts);
    return c;
}

/* The state emptyDir of --state-dir (run/statedir.h: the applied state
 * and the restart-pod record), in memory and small: the agent writes at
 * most STATEDIR_APPLIED_WRITE_MAX there. */
cJSON *inject__state_volume(struct inject__ctx *x)
{
    cJSON *vol = inject__new_obj(x), *ed = inject__new_obj(x);
    inject__add(x, vol, "name", inject__str(x, INJECT__STATE_VOLUME));
    inject__add(x, ed, "medium", inject__str(x, "Memory"));
    inject__add(x, ed, "sizeLimit", inject__str(x, "1Mi"));
    inject__add(x, vol, "emptyDir", ed);
    return vol;
}

int inject__notify_settings(struct inject__ctx *x, const char *value, const char *url_annot,
                            struct inject__sidecar *s)
{
    const char *slash = value ? strchr(value, '/') : NULL;
    size_t n = value ? strlen(value) : 0;
    if (!value) return 0;
    if (url_annot) {
        snprintf(x->err, x->errlen,
                 "annotations %s and %s: give one (a URL kept in a Secret, or "
                 "one in the clear)",
                 CFG_ANNOT_NOTIFY_SECRET, CFG_ANNOTATION_PREFIX "notify-url");
        return 1;
    }
    if (slash && n < sizeof s->notify_ref) {
        memcpy(s->notify_ref, value, n + 1);
        s->notify_ref[slash - value] = '\0';
        s->notify_key = s->notify_ref + (slash - value) + 1;
        if (k8s_is_dns1123_subdomain(s->notify_ref) && k8s_is_configmap_key(s->notify_key)) {
            if (inject__volume(x, INJECT__NOTIFY_VOLUME)) {
                snprintf(x->err, x->errlen,
                         "the pod already has a volume named %s that reload-agent did not add",
                         INJECT__NOTIFY_VOLUME);
                return 1;
            }
            s->notify_secret = s->notify_ref;
            return 0;
        }
    }
    snprintf(x->err, x->errlen,
             "invalid annotation %s \"%.100s\": want NAME/KEY, a Secret's name and one of its keys",
             CFG_ANNOT_NOTIFY_SECRET, value);
    s->notify_key = NULL;
    return 1;
}

cJSON *inject__notify_volume(struct inject__ctx *x, const struct inject__sidecar *s)
{
    cJSON *vol = inject__new_obj(x), *sec = inject__new_obj(x), *items = inject__new_arr(x);
    cJSON *item = inject__new_obj(x);
    inject__add(x, vol, "name", inject__str(x, INJECT__NOTIFY_VOLUME));
    inject__add(x, sec, "secretName", inject__str(x, s->notify_secret));
    inject__add(x, item, "key", inject__str(x, s->notify_key));
    inject__add(x, item, "path", inject__str(x, INJECT__NOTIFY_FILE));
    inject__push(x, items, item);
    inject__add(x, sec, "items", items);
    inject__add(x, sec, "optional", cJSON_CreateTrue());
    inject__add(x, vol, "secret", sec);
    return vol;
}
