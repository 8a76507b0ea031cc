/*
 * config.h - the one table of options, and the layered configuration built
 * from it: defaults < command-line flags < pod annotations.
 *
 * Every option is one row of the table in config.c (name, type, default,
 * where it is stored, help text). CLI parsing, annotation parsing, --help
 * and --print-config are all derived from that table, so an option exists in
 * all four places or in none.
 *
 * A layer holds raw strings as the user wrote them (flags or annotations);
 * cfg_build parses and validates all layers into a struct config. Live
 * annotation updates build a new config and swap it in only if it is valid.
 */
#ifndef RA_CONFIG_H
#define RA_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "actions/action.h"
#include "config/annotations.h"
#include "config/rules.h"

#define CFG_ANNOTATION_PREFIX "reload-agent.io/"
#define CFG_DEFAULT_ANNOTATIONS_FILE "/etc/podinfo/annotations"

struct strlist {
    char **v;
    size_t n;
};

enum on_start { ON_START_SKIP = 0, ON_START_RELOAD, ON_START_RECONCILE, ON_START_AUTO };

struct rule {
    char *glob;
    enum action action;
};

struct config {
    struct strlist watch;
    struct strlist env_watch; /* --env-watch: roots of config the app reads through env */
    int env_action;           /* enum action: rollout, restart or none */
    int action;               /* enum action */
    struct strlist rule_raw;  /* "GLOB=ACTION" as given */
    struct rule *rules;       /* parsed rule_raw, same order */
    size_t nrules;
    struct strlist ignore;
    /* The path -> action decision of this configuration (--ignore,
     * --env-watch/--env-action, --rule, --action), built by cfg_build. */
    struct path_rules path_rules;
    int64_t debounce_ns;
    int debounce_swaps; /* --debounce-swaps: a ..data swap waits out the debounce too */
    int64_t resync_ns;
    int log_level;  /* enum log_level */
    int log_format; /* enum log_format */
    int dry_run;
    char *annotations; /* downward-API annotations file, "" = none */
    int signal;        /* --signal */
    int signal_all;
    char *process;
    char *pid_file;
    char *http_url;
    char *http_method;
    struct strlist http_header;
    struct strlist http_expect_status; /* "2xx" or codes */
    int64_t http_timeout_ns;
    char *exec_command;
    int64_t exec_timeout_ns;
    int64_t retry_initial_ns;
    int64_t retry_max_ns;
    int64_t min_interval_ns;
    int64_t sched_slice_ns; /* --sched-slice, 0 = the kernel's default */
    int on_start;           /* enum on_start (AUTO resolved by cfg_build) */
    char *listen;
    char *kube_api;
    char *kube_token_file;
    char *kube_ca_file;
    char *pod_name;
    char *namespace_;
    char *hash_annotation;
    int64_t rollout_jitter_ns;
    int events;
    int restart_signal;
    int64_t restart_timeout_ns;
    int fast_sync;                    /* --fast-sync */
    struct strlist fast_sync_objects; /* --fast-sync-objects: "configmap/NAME", "secret/NAME" */
    int64_t fast_sync_confirm_ns;     /* --fast-sync-confirm: the first window after a nudge */
    int64_t restart_delay_ns;   /* --restart-delay: restart and restart-pod are held this long */
    int restart_pod_exit_code;  /* --restart-pod-exit-code */
    char *restart_policy_rules; /* --restart-policy-rules: the container's rules, JSON */
    char *state_dir;            /* --state-dir: a pod-lifetime directory, NULL if unset */
    char *stage;                /* --stage as given: "auto", "off", "N" or "P%" */
    char *stage_workload;       /* --stage-workload KIND/NAME, NULL: the owner chain */
    int64_t stage_ttl_ns;       /* --stage-ttl: a slot not renewed this long expires */
    /* --stage resolved by cfg_build: N at a time (stage_count) or P% of the
     * replicas (stage_percent); both 0: no staging. stage_default: "auto"
     * chose one at a time (restart or restart-pod is in use). */
    int stage_count, stage_percent, stage_default;
    /* Safe reload (docs/safe-reload.md; the checks: config/safeopts.c). */
    char *validate;                /* --validate: the app's checker, NULL if unset */
    int64_t validate_timeout_ns;   /* --validate-timeout */
    char *validator_socket;        /* --validator-socket: run commands there, NULL = here */
    struct strlist keep_last_good; /* --keep-last-good: "SRC=DIR" */
    char *verify;                  /* --verify: an http(s) URL or a command, NULL if unset */
    int64_t verify_timeout_ns;     /* --verify-timeout */
    char *storm_limit;             /* --storm-limit: "auto", "off" or "N/DURATION" */
    int storm_max;                 /* derived from storm_limit: 0 = off */
    int64_t storm_window_ns;       /* derived from storm_limit */
    /* Notifications (run/notify.h, docs/notifications.md). */
    char *notify_url;      /* --notify-url, NULL if unset */
    char *notify_url_file; /* --notify-url-file, NULL if unset */
    int notify_format;     /* enum notify_format (run/notifyfmt.h) */
    int64_t notify_timeout_ns;
    int notify_queue;
    char *notify_ca_file;
    int print_config;
};

/* Where a value came from, for --print-config. */
enum cfg_source { CFG_SRC_DEFAULT = 0, CFG_SRC_FLAG, CFG_SRC_ANNOTATION };

/* Raw values of one layer, indexed by option row. */
struct cfg_layer {
    char **val;           /* [nopts] last value given, or NULL */
    struct strlist *list; /* [nopts] accumulated values of repeatable options */
    enum cfg_source src;
    struct strlist unknown; /* annotation keys under the prefix that are no option:
                             * cfg_build accepts only the effective --hash-annotation */
};

/* The annotation keys under CFG_ANNOTATION_PREFIX that are not options,
 * each written once here: the injector's opt-in (read by inject_opt_in,
 * inject/transform.h), its status record, the per-pod sidecar settings
 * (inject/transform.c), and the rollout hash the agent writes (the default
 * of --hash-annotation) and the one fast sync patches on its own pod
 * (run/fastsync.c: its value changes on every nudge, so the kubelet syncs
 * the pod). */
#define CFG_ANNOT_INJECT CFG_ANNOTATION_PREFIX "inject"
#define CFG_ANNOT_INJECT_STATUS CFG_ANNOTATION_PREFIX "inject-status"
#define CFG_ANNOT_CONFIG_HASH CFG_ANNOTATION_PREFIX "config-hash"
#define CFG_ANNOT_SIDECAR_IMAGE CFG_ANNOTATION_PREFIX "sidecar-image"
#define CFG_ANNOT_SIDECAR_CPU_REQUEST CFG_ANNOTATION_PREFIX "sidecar-cpu-request"
#define CFG_ANNOT_SIDECAR_MEMORY_REQUEST CFG_ANNOTATION_PREFIX "sidecar-memory-request"
#define CFG_ANNOT_SIDECAR_MEMORY_LIMIT CFG_ANNOTATION_PREFIX "sidecar-memory-limit"
#define CFG_ANNOT_SIDECAR_RUN_AS_USER CFG_ANNOTATION_PREFIX "sidecar-run-as-user"
#define CFG_ANNOT_SYNC CFG_ANNOTATION_PREFIX "sync"
/* The objects a pod depends on ("configmap/a,secret/b"), written by the
 * injector and read by the cluster sync service (sync/, docs/sync.md),
 * which so never reads a pod spec. */
#define CFG_ANNOT_SYNC_OBJECTS CFG_ANNOTATION_PREFIX "sync-objects"
/* keep-last-good: "true" asks the injector for the copies the app reads
 * (docs/safe-reload.md); the agent's own flag --keep-last-good SRC=DIR,
 * which the injector writes, cannot be set by annotation. */
#define CFG_ANNOT_KEEP_LAST_GOOD CFG_ANNOTATION_PREFIX "keep-last-good"
/* extra-sources: "configmap/a,secret/b", objects the app neither mounts nor
 * reads through env, mirrored into the sidecar only (inject/extra.c,
 * docs/extra-sources.md). */
#define CFG_ANNOT_EXTRA_SOURCES CFG_ANNOTATION_PREFIX "extra-sources"
/* notify-secret: "NAME/KEY", a Secret key holding the notification URL
 * (docs/notifications.md): the injector mounts that key into the sidecar
 * alone and passes --notify-url-file. */
#define CFG_ANNOT_NOTIFY_SECRET CFG_ANNOTATION_PREFIX "notify-secret"

/* Every CFG_ANNOT_* key above (whole keys), NULL-terminated. The agent
 * skips them in the annotations file. */
extern const char *const cfg_injector_annotations[];

/* 1 if key (a whole annotation key, e.g. "reload-agent.io/inject") is one
 * of cfg_injector_annotations, else 0. */
int cfg_is_injector_annotation(const char *key);

/* Number of options in the table. */
size_t cfg_option_count(void);

/* Returns the action's name ("none", "signal", ...): action_name(), from
 * the table of actions. */
const char *cfg_action_name(int action);

/* Initialises an empty layer. Returns 0 or -ENOMEM. */
int cfg_layer_init(struct cfg_layer *l, enum cfg_source src);
void cfg_layer_free(struct cfg_layer *l);

/* Parses command-line options argv[0..argc) (argv[0] is NOT skipped: pass
 * the arguments after the subcommand) into a flag layer. Recognises
 * `--name value`, `--name=value`, and for booleans `--name` alone.
 * `--help` sets *want_help (and stops parsing). Returns 0, or -EINVAL with
 * a message naming the flag in err. Positional arguments are an error. */
int cfg_parse_args(int argc, char **argv, struct cfg_layer *flags, int *want_help, char *err,
                   size_t errlen);

/* Returns the raw value of option `name` in layer l, or NULL if unset. */
const char *cfg_layer_get(const struct cfg_layer *l, const char *name);

/* Fills an annotation layer from parsed annotations: every key
 * "reload-agent.io/<option>" sets that option (list options are
 * comma-separated). Keys under the prefix that are not options (except
 * cfg_injector_annotations) are kept in l->unknown for cfg_build, which
 * accepts only the effective --hash-annotation key among them (a custom
 * key such as reload-agent.io/web-hash is stamped on the template, so the
 * annotations file carries it). Returns 0 or -EINVAL naming the
 * annotation. */
int cfg_layer_from_annotations(const struct annot_set *a, struct cfg_layer *l, char *err,
                               size_t errlen);

/* Builds the effective configuration defaults < flags < annots (either
 * layer may be NULL), parsing and validating every value (durations within
 * the option's range, strings through the option's check) and the
 * combination, and the annotation layer's unknown keys (any but the
 * effective --hash-annotation is "annotation KEY: no such option").
 * Returns 0 and *out (free with cfg_free), or -EINVAL with a one-line
 * message naming the option, its source and the (Go-quoted) value. */
int cfg_build(const struct cfg_layer *flags, const struct cfg_layer *annots, struct config *out,
              char *err, size_t errlen);

/* What the running agent has set up, for the checks that depend on it. */
enum cfg_kube {
    CFG_KUBE_UNKNOWN = 0, /* at start: the client is created after the configuration */
    CFG_KUBE_NONE,        /* running without a Kubernetes API client */
    CFG_KUBE_READY,       /* running with one */
};
struct cfg_env {
    enum cfg_kube kube;
};

/* cfg_build, plus the checks against what the running agent has (env; NULL
 * = as at start, nothing known): with CFG_KUBE_NONE, a rule or --action
 * that uses rollout is an error (the client is only set up at start). Live
 * updates pass the env so that they are judged like a start would be. */
int cfg_build_env(const struct cfg_layer *flags, const struct cfg_layer *annots,
                  const struct cfg_env *env, struct config *out, char *err, size_t errlen);

void cfg_free(struct config *c);

/* A deep copy of src into dst (free with cfg_free); aborts on OOM. */
void cfg_dup(const struct config *src, struct config *dst);

/* The options marked restart-only in the table (--listen, the Kubernetes
 * client's --kube-*, --pod-name, --namespace; --events only when turned on)
 * whose value in next differs from boot, the configuration the agent
 * started with (what is in force for them), and, if prev is not NULL, also
 * from prev (so a pending change is reported once). Writes their flag names
 * ("--listen, --kube-api") into names[n] and returns how many there are. */
size_t cfg_restart_only_changed(const struct config *boot, const struct config *prev,
                                const struct config *next, char *names, size_t n);

/* 1 if both configurations watch the same roots (--watch and --env-watch)
 * in the same order. */
int cfg_is_same_watch(const struct config *a, const struct config *b);

/* 1 if every option has the same value in a and b (the annotations file
 * changed, but not in an option: fast sync's nudge annotation), else 0. */
int cfg_is_same(const struct config *a, const struct config *b);

/* Every root the agent watches, in order: the --watch roots, then the
 * --env-watch roots (one equal to a --watch root is listed once). Returns a
 * malloc'd array of pointers into c (free the array only; it dies with c)
 * and its length in *n; aborts on OOM. */
const char **cfg_watch_roots(const struct config *c, size_t *n);

/* 1 if a --ignore glob matches the logical path (fnmatch, no flags: '*'
 * crosses '/'): the file is left out of the content entirely.
 * path_rules_is_ignored(&c->path_rules, path). */
int cfg_is_ignored(const struct config *c, const char *path);

/* What cfg_action_for returns for an ignored path. */
#define CFG_ACTION_IGNORED PATH_RULES_IGNORED

/* The one decision of a logical path's action, for the whole program:
 * path_rules_action(&c->path_rules, path) (config/rules.h), that is
 *   CFG_ACTION_IGNORED when an --ignore glob matches it; else
 *   --env-action when it lies under an --env-watch root (env is fixed at
 *     container start, so no --rule can make it in-place; an env root that
 *     lies inside a --watch root wins for its files); else
 *   the action of the first --rule whose glob matches it (fnmatch, no
 *     flags); else
 *   --action.
 * The engine and the render-time stamp (inject/stamp.c) call this; the
 * monitor's hashing thread reads a copy of c->path_rules. */
int cfg_action_for(const struct config *c, const char *path);

/* The actions a configuration can require: --action, every rule's action,
 * and --env-action when there is an --env-watch root. A mask of
 * ACTION_BIT()s. */
unsigned cfg_used_actions(const struct config *c);

/* Writes the option reference (for --help) to f. */
void cfg_print_help(FILE *f);

/* Writes the effective configuration, one `name = value  # source` line
 * per option, to f. */
void cfg_print(FILE *f, const struct config *c, const struct cfg_layer *flags,
               const struct cfg_layer *annots);

#endif
