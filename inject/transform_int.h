/*
 * transform_int.h - what the files of the injection transform share
 * (inject/transform.c, inject/tjson.c, inject/volumes.c,
 * inject/sidecar.c, inject/names.c, inject/quantity.c, inject/safe.c); not an interface
 * for other files, not even inject/stamp.c and inject/manifests.c, which
 * use transform.h and cleanpath.h. Their internal names carry the
 * folder's prefix inject__.
 *
 * One struct inject__ctx carries a run: the input's parts (borrowed from
 * the caller's object), the plan being built, the warnings, and the first
 * error. Readers check the JSON type of every field they touch and report a
 * wrong one as -EINVAL naming its path (`spec.template.spec.volumes[2].name`).
 * Builders set ctx->oom instead of returning at each allocation; the entry
 * point turns it into -ENOMEM.
 */
#ifndef RA_INJECT_TRANSFORM_INT_H
#define RA_INJECT_TRANSFORM_INT_H

#include <stdarg.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "config/annotations.h"
#include "inject/cleanpath.h"
#include "kube/kinds.h"
#include "kube/podrefs.h"
#include "inject/transform.h"

#define INJECT__PODINFO_VOLUME "reload-agent-podinfo"
#define INJECT__PODINFO_PATH "/etc/podinfo"
#define INJECT__OWN_ROOT "/reload-agent"
#define INJECT__TOKEN_PATH "/var/run/secrets/kubernetes.io/serviceaccount"
/* The image's user (Dockerfile USER), set when the pod's would be root. */
#define INJECT__IMAGE_UID 65532
/* At most this many objects for fast sync: the agent's own limit. */
#define INJECT_FAST_SYNC_MAX PODREFS_MAX

/* ---- names.c: lookups by name ---- */

/* A hash map from strings (borrowed: they must outlive the map) to
 * indices. Zeroed, it is an empty map (get finds nothing). */
struct inject__names {
    const char **keys;
    size_t *vals;
    size_t cap, n;
};

/* Makes m an empty map with room for n keys. Returns 0 or -ENOMEM. */
int inject__names_init(struct inject__names *m, size_t n);
/* Adds key -> val unless key is there. Returns 1 (added), 0 (present:
 * *had, if not NULL, is its value) or -ENOMEM. */
int inject__names_put(struct inject__names *m, const char *key, size_t val, size_t *had);
/* The value of key, or -1. */
long inject__names_get(const struct inject__names *m, const char *key);
/* For a clean path: the value of its nearest proper ancestor in m ("/a/b"
 * for "/a/b/c", then "/a", then "/"), -1 when none is there, or
 * -ENOMEM. */
long inject__names_ancestor(const struct inject__names *m, const char *path);
/* Frees the map (not the keys) and zeroes it. */
void inject__names_free(struct inject__names *m);

/* An app container: a regular container or an init container that is not
 * a native sidecar. */
struct inject__app {
    const cJSON *c;
    const char *name; /* "" when the container has none */
    char path[64];    /* "spec.containers[3]" or "spec.initContainers[0]" */
};

/* One mirror of an app's volume into the sidecar. */
struct inject__mirror {
    const char *volume; /* borrowed from the input */
    char *mount_path;   /* owned */
};

/* One ConfigMap/Secret the app reads through env. */
struct inject__envref {
    int secret;        /* 0: ConfigMap, 1: Secret */
    const char *name;  /* borrowed: the object's name */
    char *volume;      /* owned: reload-agent-env-cm-<name>, ... */
    char *mount_path;  /* owned: /reload-agent/env/configmap/<name>, ... */
    int whole;         /* referenced by envFrom: the whole object */
    int extra;         /* an extra source (extra.c): --watch, not --env-watch */
    int optional;      /* some reference is optional */
    const char **keys; /* keyRef keys, sorted, unique (borrowed strings) */
    size_t nkeys, keys_cap;
};

struct inject__ctx {
    const struct inject_opts *opts;
    const cJSON *obj;            /* the whole object */
    const struct kinds_kind *ki; /* the object's row in the kinds table (kube/kinds.h) */
    char tpath[40]; /* dotted path of the template for messages: "spec.template." or "" */
    const cJSON *meta, *annots, *spec;

    struct inject__app *apps;
    size_t napps;
    const cJSON *volumes; /* spec.volumes (an array) or NULL */

    struct inject__mirror *mirrors;
    size_t nmirrors;
    struct inject__envref *envs;
    size_t nenvs, envs_cap;
    struct inject__names env_idx[2]; /* ConfigMap, Secret name -> index in envs */
    /* why there may be nothing to watch: the first mirrorable volume the
     * apps mount only with subPath (and at), the first token-only
     * projected volume they mount (kube-api-access-* aside) */
    const char *subpath_only, *subpath_at, *token_only;

    char *extra_text; /* extra.c: the extra-sources value the envs' names point into */

    /* fast sync (fastsync.c): "configmap/NAME", "secret/NAME" (owned) */
    char **fast;
    size_t nfast, fast_over;

    /* safe reload (safe.c) */
    int keep;                                /* keep-last-good: "true" */
    int validator;                           /* the validator container and its socket */
    const struct inject__app *validator_app; /* the container it is made from */
    struct inject__lkg *lkg;                 /* the kept volumes */
    size_t nlkg;
    char *stage_workload; /* --stage-workload's KIND/NAME (owned), or NULL */
    char *stage_lease;    /* its Lease's name, kube/lease.h's (owned), or NULL */
    char *stage_pending;  /* the default stage's note, until the token is known (owned) */
    char **notes;         /* what the safe-reload steps will do (the CLI's report) */
    size_t nnotes;

    char **warnings;
    size_t nwarnings;
    int oom;
    char *err;
    size_t errlen;
};

/* One kept volume of keep-last-good (safe.c). */
struct inject__lkg {
    const char *volume; /* borrowed: the app's volume */
    const char *src;    /* borrowed: its mirror's mount path, the --watch root */
    char *name;         /* owned: the copies' emptyDir, reload-agent-lkg-<volume> */
    char *dir;          /* owned: where the agent and install mount it */
    int memory;         /* it holds a Secret: medium Memory */
};

/* ---- tjson.c: typed, path-checked reads and small builders ---- */

/* Each getter looks up key in obj (an object) and returns 0 with *out set,
 * or with *out NULL/default when the key is absent or JSON null; -EINVAL
 * with "PATH.key: want T, got U" in ctx->err when it has another type.
 * path is the dotted path of obj ("spec.template.spec" or "" for the top). */
int inject__get_obj(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                    const cJSON **out);
int inject__get_arr(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                    const cJSON **out);
int inject__get_str(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                    const char **out);
/* *out: -1 absent, 0 false, 1 true. */
int inject__get_bool(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                     int *out);
/* An integer in [0, 2147483647] (a UID or GID); *out -1 when absent. */
int inject__get_id(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                   long *out);
/* -EINVAL naming path: "PATH: want T, got U". */
int inject__type_error(struct inject__ctx *x, const char *path, const char *want, const cJSON *got);

/* Formats one line into at most max bytes (at most 512; the one-line
 * policy applied) and appends a copy to *list (*n entries); on no memory sets
 * x->oom and appends nothing. The one body of inject__warn and inject__note. */
void inject__vpush(struct inject__ctx *x, char ***list, size_t *n, size_t max, const char *fmt,
                   va_list ap);
/* Appends a warning (printf format, made one line by base/text.h's
 * policy, as every message leaving the transform: warnings, reasons and
 * errors quote names and paths from the input); sets ctx->oom on
 * failure. */
void inject__warn(struct inject__ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A malloc'd printf result, or NULL with ctx->oom set. */
char *inject__printf(struct inject__ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Builders: each sets ctx->oom and returns NULL (or does nothing) on
 * failure; the cJSON adders accept a NULL item and drop it. */
cJSON *inject__str(struct inject__ctx *x, const char *s);
void inject__add(struct inject__ctx *x, cJSON *obj, const char *key, cJSON *item);
void inject__push(struct inject__ctx *x, cJSON *arr, cJSON *item);
cJSON *inject__new_obj(struct inject__ctx *x);
cJSON *inject__new_arr(struct inject__ctx *x);
/* A JSON Patch operation {"op":op,"path":path,"value":value} appended to
 * ops (value owned; NULL for none). */
void inject__op(struct inject__ctx *x, cJSON *ops, const char *op, const char *path, cJSON *value);

/* ---- quantity.c ---- */

/* Parses a Kubernetes resource quantity ("5m", "16Mi", "1.5G", "2e3") into
 * its value. Returns 0, or -EINVAL when s is not one (or negative). */
int inject__quantity(const char *s, long double *out);

/* ---- volumes.c: which volumes the sidecar mounts ---- */

/* The volume with this name in x->volumes, or NULL. */
const cJSON *inject__volume(const struct inject__ctx *x, const char *name);

/* Plans the mirrors: every mirrorable volume an app mounts without subPath
 * (in volume order) that is not in skip (names already mirrored, n of
 * them), at the app's first mountPath, or under /reload-agent/volumes/
 * when that path is in taken (ntaken) or another mirror's, or clashes
 * with the sidecar's own mounts. subPath mounts are warned about when
 * warn_subpath. Fills x->mirrors. Returns 0, -EINVAL (a malformed field)
 * or -ENOMEM. */
int inject__plan_mirrors(struct inject__ctx *x, const char *const *skip, size_t nskip,
                         const char *const *taken, size_t ntaken, int warn_subpath);

/* Plans the env volumes from the apps' envFrom and valueFrom references,
 * then the extra sources (inject__plan_extra; after inject__plan_mirrors,
 * which it reads). Fills x->envs. Returns 0, -EINVAL, -ENOMEM, or -EEXIST
 * with the reason in x->err when refused: a name cannot be made unique, or
 * the extra-sources annotation is not valid. */
int inject__plan_env(struct inject__ctx *x);

/* The env reference of (secret, name) in x->envs, added (zeroed but for
 * secret and name, which is borrowed) when it is not there: *out. Returns
 * 1 (added), 0 (there) or -ENOMEM. */
int inject__envref_add(struct inject__ctx *x, int secret, const char *name,
                       struct inject__envref **out);

/* ---- extra.c: reload-agent.io/extra-sources ---- */

/* Adds one env reference per entry of the annotation (extra, whole,
 * optional); an object already in x->envs or in a mirror (x->mirrors) is
 * warned about instead. Returns 0, -ENOMEM, or -EEXIST with the reason in
 * x->err (a bad entry, too many). */
int inject__plan_extra(struct inject__ctx *x);

/* The volume of one env reference (a new cJSON object, or NULL on OOM). */
cJSON *inject__env_volume(struct inject__ctx *x, const struct inject__envref *e);

void inject__plan_free(struct inject__ctx *x);

/* ---- csi.c: Secrets Store CSI volumes ---- */

/* The driver whose volumes are mirrored (docs/csi-secrets.md). */
#define INJECT_CSI_SECRETS_DRIVER "secrets-store.csi.k8s.io"

/* 1 if vol (a pod volume) is a csi volume of INJECT_CSI_SECRETS_DRIVER:
 * mirrored into the sidecar as a ConfigMap volume is (the app's own
 * volume, read-only); 0 for anything else. */
int inject__is_csi_secrets(const cJSON *vol);

/* ---- fastsync.c: fast sync's objects ---- */

/* Fills x->fast with the objects fast sync watches: the ConfigMaps and
 * Secrets of the mirrors (x->mirrors: configMap, secret, projected
 * sources) and of the env volumes (x->envs), each once, in that order, at
 * most INJECT_FAST_SYNC_MAX (warned beyond); an invalid name is warned
 * about and left out; annotated (reload-agent.io/fast-sync-objects
 * replaces the list) is warned about. Sets x->oom on failure. */
void inject__plan_fast_sync(struct inject__ctx *x, int annotated);

/* Writes "--fast-sync=true" and one "--fast-sync-objects=OBJ" per
 * x->fast into v (room for 1 + x->nfast); returns how many (an entry is
 * NULL with x->oom set on failure). */
size_t inject__fast_sync_args(struct inject__ctx *x, char **v);

/* At reinvocation, when args (the injected sidecar's) hold
 * --fast-sync=true: the --fast-sync-objects args (new cJSON strings) of
 * the objects the new mirrors (x->mirrors) name that args lack, into add
 * (room for INJECT_FAST_SYNC_MAX); returns how many (x->oom set on
 * failure). Uses x->fast. */
size_t inject__fast_sync_reinvoke_args(struct inject__ctx *x, const cJSON *args, cJSON **add);

/* Frees x->fast. */
void inject__fast_sync_free(struct inject__ctx *x);

/* The value of the sync-objects annotation (CFG_ANNOT_SYNC_OBJECTS, for
 * the cluster sync service, docs/sync.md): had (the annotation's value
 * before, or NULL) then "configmap/NAME" and "secret/NAME" of every mirror
 * of x->mirrors and every env volume not in it, comma-separated, each
 * once; names that are not object names are left out (the API server
 * refuses the pod anyway). malloc'd; NULL when it would be empty or equal
 * to had, on OOM (x->oom), and when the pod has per-pod fast sync (x->fast
 * set: its own agent nudges it, so the service must not nudge it twice).
 * Call it after inject__plan_fast_sync or inject__fast_sync_reinvoke_args. */
char *inject__sync_objects(struct inject__ctx *x, const char *had);

/* ---- sidecar.c: the container ---- */

struct inject__sidecar {
    const char *image, *cpu_request, *memory_request, *memory_limit;
    long run_as_user, run_as_group; /* -1: not set; run_as_user 0: root, no capabilities */
    long run_as_asked;              /* reload-agent.io/sidecar-run-as-user, or -1 */
    const cJSON *token_mount;       /* copied volumeMount, or NULL */
    int api;        /* the sidecar can reach the API (a token mount or the plugin's) */
    int events_off; /* add --events=false */
    /* restart-pod (restartrule.c): the sidecar's restartPolicyRules, as
     * JSON, also given to the agent as --restart-policy-rules; NULL when
     * restart-pod is not effective */
    const char *restart_rules;
    int state_dir; /* add --state-dir and mount the state emptyDir */
    int fast_sync; /* add --fast-sync=true and x->fast's --fast-sync-objects */
    /* reload-agent.io/notify-secret NAME/KEY (inject__notify_settings):
     * notify_secret NULL when not asked; both point into notify_ref */
    const char *notify_secret, *notify_key;
    char notify_ref[520];
};

/* Reads reload-agent.io/notify-secret (value: the annotation's string, or
 * NULL) into s. Returns 0, or 1 with the reason in x->err (not NAME/KEY, a
 * bad name or key, with reload-agent.io/notify-url too, or the pod already
 * has a volume named INJECT__NOTIFY_VOLUME). */
int inject__notify_settings(struct inject__ctx *x, const char *value, const char *url_annot,
                            struct inject__sidecar *s);

/* The Secret volume of reload-agent.io/notify-secret: the one key as
 * INJECT__NOTIFY_FILE, optional (a missing Secret never keeps the pod from
 * starting: the agent's sends fail, logged, until it exists). */
cJSON *inject__notify_volume(struct inject__ctx *x, const struct inject__sidecar *s);

/* The sidecar's args after "run": --watch per mirror, --env-watch per env
 * volume, --ignore=<mountPath>/..* per mirror nested in another (see
 * inject__nested_ignore), then --events=false if asked, then fast sync's
 * (inject__fast_sync_args) when s->fast_sync. A malloc'd array
 * of malloc'd strings (*n of them), or NULL with x->oom set. */
char **inject__sidecar_args(struct inject__ctx *x, const struct inject__sidecar *s, size_t *n);
void inject__args_free(char **v, size_t n);

/* The mirrors' mount paths (clean) -> their index, into *m (free with
 * inject__names_free). Returns 0 or -ENOMEM. */
int inject__mirror_paths(const struct inject__ctx *x, struct inject__names *m);

/* For a mirror at path (clean) that lies strictly inside a watched path
 * of within (a map of clean paths; path itself may be in it): the --ignore
 * glob "<path>/..*" (fnmatch specials in path escaped), malloc'd, or NULL
 * when it is not nested (or on OOM, x->oom set). The outer root's walk
 * enters the inner volume below its top level, where the kubelet's
 * "..data" and "..<timestamp>" names are not skipped; the glob (no
 * FNM_PATHNAME: '*' crosses '/') leaves them out, so the walk yields
 * exactly the inner volume's user-visible files. One lookup per element
 * of path. */
char *inject__nested_ignore(struct inject__ctx *x, const char *path,
                            const struct inject__names *within);

/* The container object (restartPolicyRules parsed from s->restart_rules
 * when set). */
cJSON *inject__sidecar_container(struct inject__ctx *x, const struct inject__sidecar *s);

/* A read-only volumeMount {name, mountPath, readOnly: true}. */
cJSON *inject__mount(struct inject__ctx *x, const char *name, const char *path);

/* ---- restartrule.c: the rules the kubelet restarts by (KEP-5307, KEP-5532) ---- */

/* The emptyDir where restart-pod keeps its record across the restart
 * (--state-dir): it lives as long as the pod. */
#define INJECT__STATE_VOLUME "reload-agent-state"
#define INJECT__STATE_PATH INJECT__OWN_ROOT "/state"
/* reload-agent.io/notify-secret's volume: the one key, as the file url */
#define INJECT__NOTIFY_VOLUME "reload-agent-notify"
#define INJECT__NOTIFY_PATH INJECT__OWN_ROOT "/notify"
#define INJECT__NOTIFY_FILE "url"
/* The first Kubernetes minor versions where the fields are on by default:
 * RestartAllContainers on a sidecar (KEP-5532, beta in 1.36), restartPolicy
 * and restartPolicyRules on a regular container (KEP-5307, beta in 1.35). */
#define INJECT__KUBE_MINOR_RESTART_ALL 36
#define INJECT__KUBE_MINOR_RESTART_RULES 35
/* What judge_config gives the agent's parser as --restart-policy-rules
 * before the exit code is known: a rule that restarts every container on
 * any code, so that restart-pod is judged on everything else; the real
 * rule is then made for the code the configuration says. */
#define INJECT__RULES_PROBE                                                                        \
    "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"NotIn\",\"values\":[]}}]"

/* The Restart rule a first injection adds to the app container for the
 * restart action (KEP-5307), so that a pod whose restartPolicy is Never or
 * OnFailure (a Job's) restarts the app in place instead of ending it. */
struct inject__app_rule {
    int index;          /* the app's index in spec.containers, or -1: nothing to add */
    int code;           /* the exit code the restart signal gives: 128 + signo */
    const char *policy; /* the container restartPolicy to add, or NULL when it has one */
};

/* restart-pod is effective with exit code code: the sidecar's rule list
 * for it into rules (at least 128 bytes). Returns 1, or 0 (refused, the
 * reason in x->err) when the cluster version is below
 * INJECT__KUBE_MINOR_RESTART_ALL: its API server would reject the pod. */
int inject__plan_restart_pod(struct inject__ctx *x, int code, char *rules, size_t n);

/* restart is effective with signal signo: plans the app container's
 * Restart rule into *r (r->index -1 when none is needed: the pod restarts
 * the container anyway, the container has rules of its own (warned when
 * they end it on the code), or the cluster version predates the field
 * (warned)). app is the app container (app->path "spec.containers[i]").
 * Returns 0 or -EINVAL (a field of the wrong type). */
int inject__plan_app_rule(struct inject__ctx *x, const struct inject__app *app, int signo,
                          struct inject__app_rule *r);

/* The operations that add r to the app container of the spec at
 * spec_path ("/spec/template/spec"). */
void inject__emit_app_rule(struct inject__ctx *x, cJSON *ops, const char *spec_path,
                           const struct inject__app_rule *r);

/* The state emptyDir (memory, 1Mi). */
cJSON *inject__state_volume(struct inject__ctx *x);

/* ---- safe.c: safe reload's containers, volumes and mounts (docs/safe-reload.md) ---- */

#define INJECT__VALIDATOR_CONTAINER "reload-agent-validator"
#define INJECT__INSTALL_CONTAINER "reload-agent-install"
#define INJECT__BIN_VOLUME "reload-agent-bin"
#define INJECT__BIN_PATH INJECT__OWN_ROOT "/bin"
#define INJECT__SOCKET_VOLUME "reload-agent-validator"
#define INJECT__SOCKET_DIR INJECT__OWN_ROOT "/validator"
#define INJECT__SOCKET_PATH INJECT__SOCKET_DIR "/validator.sock"
#define INJECT__LKG_PREFIX "reload-agent-lkg-"
#define INJECT__LKG_ROOT INJECT__OWN_ROOT "/lkg"
/* The agent's binary in its image (Dockerfile), for the exec probe. */
#define INJECT__AGENT_BINARY "/usr/local/bin/reload-agent"
/* The startup probe runs every second: the app waits at most this long
 * for validated copies before the kubelet restarts the agent. */
#define INJECT__STARTUP_FAILURES 300

/* Appends a note (one line): what a step will do, for the CLI's report. */
void inject__note(struct inject__ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reads keep-last-good, validate and verify from the annotations and
 * plans the validator (x->validator, x->validator_app: the only regular
 * container, or the one kubectl.kubernetes.io/default-container names)
 * and the kept volumes (x->lkg: every mirror a regular container mounts
 * whole; a subPath mount of one is refused). Needs the mirrors planned.
 * Returns 0, 1 refused (the reason in x->err) or -ENOMEM. */
int inject__plan_safe(struct inject__ctx *x);
/* What needs the agent's judgment: keep-last-good with dry-run is refused.
 * Returns 0 or 1 (x->err). */
int inject__check_safe(struct inject__ctx *x, int dry_run);
/* The agent stages (count or percent from its configuration; deflt: by
 * the default of restart): --stage-workload for a Deployment,
 * StatefulSet, DaemonSet or Rollout (x->stage_workload), and a note. */
void inject__plan_stage(struct inject__ctx *x, int count, int percent, int deflt);
/* The default stage of restart needs the API, which it does not ask for:
 * once the token is planned (api: the sidecar can reach the API), its note
 * says the Lease, or, without API access, that each replica acts alone
 * (and --stage-workload goes: no Role nor Lease to write). */
void inject__stage_default_api(struct inject__ctx *x, int api, const char *why);
/* The notes of validate, keep-last-good and verify. */
void inject__safe_notes(struct inject__ctx *x);
/* The agent's args: --validator-socket, --keep-last-good per kept volume,
 * --stage-workload, into v (room for 2 + x->nlkg); returns how many. */
size_t inject__safe_args(struct inject__ctx *x, char **v);
/* How many volumes safe reload adds; inject__safe_volumes writes them
 * into v (returns how many), inject__safe_volume_names their names into
 * the array names (the status annotation's). */
size_t inject__safe_nvolumes(const struct inject__ctx *x);
size_t inject__safe_volumes(struct inject__ctx *x, cJSON **v);
void inject__safe_volume_names(struct inject__ctx *x, cJSON *names);
/* The agent's mounts of the copies and the socket; its startupProbe. */
void inject__safe_agent_mounts(struct inject__ctx *x, cJSON *mounts);
void inject__safe_probe(struct inject__ctx *x, cJSON *c);
/* The replace operations that move the regular containers' mounts of kept
 * volumes to the live copy (spec_path: "/spec/template/spec"). */
void inject__safe_app_mounts(struct inject__ctx *x, cJSON *ops, const char *spec_path);
/* The validator container (x->validator_app's image, securityContext,
 * env and mounts; s: the sidecar's requests). */
cJSON *inject__validator_container(struct inject__ctx *x, const struct inject__sidecar *s);
/* The install container's args (copy-self, --prepare) and mounts. */
void inject__safe_install_args(struct inject__ctx *x, cJSON *args, cJSON *mounts);
/* The install init container (sidecar.c: the sidecar's image, resources
 * and securityContext, so the copies' directories are the agent's). */
cJSON *inject__install_container(struct inject__ctx *x, const struct inject__sidecar *s);
void inject__safe_free(struct inject__ctx *x);

#endif
