/*
 * config.c - the option table and everything derived from it: CLI parsing,
 * annotation parsing, validation, --help and --print-config (see config.h).
 *
 * The table is the single judge of a value: its row gives the type, the
 * range of a duration (RANGE), a check of a string (CHECKED), and whether
 * the option is read only at start (OPT_RESTART_ONLY). Every error leaving
 * this file is one line: values are Go-quoted, and ra_one_line_fix()
 * (base/text.h) escapes what a message still holds raw.
 *
 * To add an option: add a field to struct config, one row to OPTIONS below,
 * and (if it needs one) a cross-field check in validate(). Nothing else.
 */
#include "config/config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "actions/exec.h"
#include "kube/lease.h"
#include "kube/podrefs.h"
#include "kube/restartrules.h"
#include "actions/rollout_decide.h"
#include "base/addr.h"
#include "base/dups.h"
#include "base/log.h"
#include "base/redact.h"
#include "base/text.h"
#include "config/goquote.h"
#include "config/safeopts.h"
#include "config/value.h"

/* A value Go-quoted for an error message: control characters and bytes that
 * are not UTF-8 escaped, so no value can break the message (or the log line
 * or stderr line that carries it); long values are cut with `..."`. */
#define QUOTED_MAX 200
#define QV(buf, v) (gq_quote_to((buf), sizeof(buf), (v), strlen(v)), (buf))

/* OPT_ACTION: an OPT_ENUM whose names are the table of actions' (actions/action.h);
 * --help appends them to the help text. The field holds the enum action;
 * a row's choices, when given, are the subset of action names it accepts. */
/* OPT_INT: a decimal integer in [min, max], held in an int field. */
enum opt_type {
    OPT_STR,
    OPT_LIST,
    OPT_DURATION,
    OPT_SIGNAL,
    OPT_BOOL,
    OPT_ENUM,
    OPT_ACTION,
    OPT_INT
};

#define OPT_REPEAT 1u   /* flag may be repeated; values accumulate */
#define OPT_NO_ANNOT 2u /* cannot be set by annotation */
#define OPT_ZERO_OK 4u  /* OPT_DURATION: 0 (off / the default) is accepted besides [min, max] */
/* Read once, at start (redis's IMMUTABLE_CONFIG): a live change is accepted
 * into the configuration but takes effect when the agent restarts, and is
 * logged as such (cfg_restart_only_changed). */
#define OPT_RESTART_ONLY 8u
/* With OPT_RESTART_ONLY, for a boolean: turning it off applies live (the
 * consumer checks the value), only turning it on needs the restart. */
#define OPT_LIVE_OFF 16u

struct opt_def {
    const char *name;
    enum opt_type type;
    const char *def;            /* default, in the syntax of a value; NULL = unset */
    size_t off;                 /* field in struct config */
    const char *const *choices; /* OPT_ENUM: NULL-terminated names, index = value */
    unsigned flags;
    const char *metavar;
    const char *help;
    int64_t min, max; /* OPT_DURATION: the accepted range in ns (max > 0 always); OPT_INT's */
    /* OPT_STR: judges a value; 0, or -EINVAL with the reason in why. */
    int (*check)(const char *v, char *why, size_t n);
};

#define NS_US INT64_C(1000)
#define NS_MS INT64_C(1000000)
#define NS_S INT64_C(1000000000)
#define NS_H (3600 * NS_S)
#define NS_DAY (24 * NS_H)
#define RANGE(lo, hi) (lo), (hi), NULL
#define NO_RANGE 0, 0, NULL
#define CHECKED(fn) 0, 0, (fn)

/* --exec-command: must split into words the way the exec action will split
 * it (an unterminated quote or a trailing backslash would fail every
 * attempt). "" means unset. */
static int check_command(const char *v, char *why, size_t n)
{
    char **argv;
    const char *reason = NULL;
    if (!*v) return 0;
    int rc = exec_split_err(v, &argv, &reason);
    if (rc == -ENOMEM) ra_oom();
    if (rc < 0) {
        snprintf(why, n, "%s (the command is split into words like a shell would)", reason);
        return -EINVAL;
    }
    exec_argv_free(argv);
    return 0;
}

/* --notify-format: index = enum notify_format (run/notifyfmt.h; a unit
 * test checks that the two lists agree). */
static const char *const NOTIFY_FORMATS[] = {"json", "slack", "teams", "gchat", NULL};

static const char *const ON_START[] = {"skip", "reload", "reconcile", "auto", NULL};
/* --env-action: env is fixed when a container starts, so only actions that
 * start it again (or record the change) can apply. */
static const char *const ENV_ACTIONS[] = {"rollout", "restart", "restart-pod", "none", NULL};

/* --restart-policy-rules: the shape the API accepts (kube/restartrules.h).
 * "" means unset. */
static int check_restart_rules(const char *v, char *why, size_t n)
{
    return *v ? restartrules_check(v, why, n) : 0;
}

/* --stage: "auto", "off", N (1-1000) or P% (1-100). Sets *count or
 * *percent (both 0 for auto and off); returns 0 or -EINVAL. */
static int parse_stage(const char *v, int *count, int *percent, int *is_auto)
{
    *count = *percent = *is_auto = 0;
    if (strcmp(v, "auto") == 0) {
        *is_auto = 1;
        return 0;
    }
    if (strcmp(v, "off") == 0) return 0;
    char *end;
    if (v[0] < '0' || v[0] > '9') return -EINVAL;
    long n = strtol(v, &end, 10);
    if (*end == '%' && end[1] == '\0' && n >= 1 && n <= 100) {
        *percent = (int)n;
        return 0;
    }
    if (*end == '\0' && n >= 1 && n <= 1000) {
        *count = (int)n;
        return 0;
    }
    return -EINVAL;
}

static int check_stage(const char *v, char *why, size_t n)
{
    int c, p, a;
    if (parse_stage(v, &c, &p, &a) == 0) return 0;
    snprintf(why, n,
             "want N (1-1000 replicas at a time), P%% (1-100%% of the replicas), auto or "
             "off");
    return -EINVAL;
}

static int check_stage_workload(const char *v, char *why, size_t n)
{
    const struct kinds_kind *ki;
    const char *name;
    if (!*v || lease_parse_workload(v, &ki, &name) == 0) return 0;
    snprintf(why, n,
             "want KIND/NAME with KIND deployment, statefulset, daemonset or rollout and "
             "NAME an object name");
    return -EINVAL;
}

#define F(field) offsetof(struct config, field)

static const struct opt_def OPTIONS[] = {
    {"watch", OPT_LIST, NULL, F(watch), NULL, OPT_REPEAT, "PATH",
     "Directory or file to watch (repeatable). ConfigMap/Secret volume mounts, plain trees, "
     "single files.",
     NO_RANGE},
    {"action", OPT_ACTION, "none", F(action), NULL, 0, "ACTION",
     "Action for changed files no --rule matches:", NO_RANGE},
    {"rule", OPT_LIST, NULL, F(rule_raw), NULL, OPT_REPEAT, "GLOB=ACTION",
     "Per-file action: the first rule whose glob matches a changed file's logical path wins "
     "(fnmatch, '*' crosses '/'). Repeatable.",
     NO_RANGE},
    {"ignore", OPT_LIST, NULL, F(ignore), NULL, OPT_REPEAT, "GLOB",
     "Leave matching files out of the content entirely: they never cause a change. "
     "Repeatable.",
     NO_RANGE},
    {"env-watch", OPT_LIST, NULL, F(env_watch), NULL, OPT_REPEAT, "PATH",
     "Directory or file of configuration the app reads through env (a ConfigMap/Secret "
     "mounted for the agent alone; repeatable). Watched like --watch, but every file under "
     "it takes --env-action, before and regardless of --rule.",
     NO_RANGE},
    {"env-action", OPT_ACTION, "rollout", F(env_action), ENV_ACTIONS, 0, "ACTION",
     "Action for changed files under an --env-watch root (env is fixed when a container "
     "starts: rollout rolls the workload, restart restarts the app in place, restart-pod "
     "every container of the pod):",
     NO_RANGE},
    {"debounce", OPT_DURATION, "200ms", F(debounce_ns), NULL, 0, "DURATION",
     "Quiet period after the last filesystem event before the content is hashed; a burst "
     "is one evaluation. Capped at 10x the debounce (at least 1s) from the first event.",
     RANGE(0, NS_H)},
    {"debounce-swaps", OPT_BOOL, "false", F(debounce_swaps), NULL, 0, "BOOL",
     "Wait out --debounce after a kubelet ..data swap too. By default the swap (the "
     "AtomicWriter's commit point) is acted on at once, 10ms after its last event, once the "
     "volume shows the committed content; other writers are debounced.",
     NO_RANGE},
    {"resync", OPT_DURATION, "3m", F(resync_ns), NULL, OPT_ZERO_OK, "DURATION",
     "Rehash everything this often as a safety net (0 disables).", RANGE(100 * NS_MS, 30 * NS_DAY)},
    {"log-format", OPT_ENUM, "text", F(log_format), log_format_names, 0, "FORMAT",
     "Log line format on stderr: text|json.", NO_RANGE},
    {"log-level", OPT_ENUM, "info", F(log_level), log_level_names, 0, "LEVEL",
     "Minimum level logged: debug|info|warn|error.", NO_RANGE},
    {"dry-run", OPT_BOOL, "false", F(dry_run), NULL, 0, "BOOL",
     "Log the action that would run instead of running it.", NO_RANGE},
    {"on-start", OPT_ENUM, "auto", F(on_start), ON_START, 0, "MODE",
     "At start: skip (take the content as applied), reload (act once on the current "
     "content), reconcile (rollout only), auto (reconcile when a rule uses rollout, else skip).",
     NO_RANGE},
    {"signal", OPT_SIGNAL, "HUP", F(signal), NULL, 0, "SIGNAL",
     "Signal sent by the signal action (name or number).", NO_RANGE},
    {"process", OPT_STR, NULL, F(process), NULL, 0, "NAME",
     "Signal target: processes whose /proc/PID/comm or argv[0] basename is NAME; the "
     "topmost match only (the nginx master, not its workers).",
     NO_RANGE},
    {"pid-file", OPT_STR, NULL, F(pid_file), NULL, 0, "PATH",
     "Signal target: the PID in this file (re-read before every delivery).", NO_RANGE},
    {"signal-all", OPT_BOOL, "false", F(signal_all), NULL, 0, "BOOL",
     "Signal every matching process, not only the topmost.", NO_RANGE},
    {"http-url", OPT_STR, NULL, F(http_url), NULL, 0, "URL",
     "Reload endpoint called by the http action, e.g. http://127.0.0.1:9090/-/reload.", NO_RANGE},
    {"http-method", OPT_STR, "POST", F(http_method), NULL, 0, "METHOD",
     "HTTP method of the reload request.", NO_RANGE},
    {"http-header", OPT_LIST, NULL, F(http_header), NULL, OPT_REPEAT, "'NAME: VALUE'",
     "Extra request header (repeatable).", NO_RANGE},
    {"http-expect-status", OPT_LIST, "2xx", F(http_expect_status), NULL, OPT_REPEAT, "CODES",
     "Statuses that mean success: codes and classes like 2xx (repeatable or comma list).",
     NO_RANGE},
    {"http-timeout", OPT_DURATION, "10s", F(http_timeout_ns), NULL, 0, "DURATION",
     "Timeout of one reload request.", RANGE(NS_MS, NS_DAY)},
    {"exec-command", OPT_STR, NULL, F(exec_command), NULL, 0, "COMMAND",
     "Command run by the exec action (split into words like a shell would, no shell is "
     "run); exit status 0 is success.",
     CHECKED(check_command)},
    {"exec-timeout", OPT_DURATION, "30s", F(exec_timeout_ns), NULL, 0, "DURATION",
     "The command is killed (SIGTERM, then SIGKILL) after this long (0: never).", RANGE(0, NS_DAY)},
    {"kube-api", OPT_STR, NULL, F(kube_api), NULL, OPT_RESTART_ONLY, "URL",
     "Kubernetes API server URL (default in a cluster: https://$KUBERNETES_SERVICE_HOST:"
     "$KUBERNETES_SERVICE_PORT).",
     NO_RANGE},
    {"kube-token-file", OPT_STR, NULL, F(kube_token_file), NULL, OPT_RESTART_ONLY, "PATH",
     "Bearer token file, re-read when it rotates (default the service-account token).", NO_RANGE},
    {"kube-ca-file", OPT_STR, NULL, F(kube_ca_file), NULL, OPT_RESTART_ONLY, "PATH",
     "CA bundle that verifies the API server (default the service-account ca.crt).", NO_RANGE},
    {"pod-name", OPT_STR, NULL, F(pod_name), NULL, OPT_RESTART_ONLY, "NAME",
     "The agent's own pod (default $POD_NAME, from the downward API).", NO_RANGE},
    {"namespace", OPT_STR, NULL, F(namespace_), NULL, OPT_RESTART_ONLY, "NS",
     "The pod's namespace (default $POD_NAMESPACE, then the service-account namespace file).",
     NO_RANGE},
    {"hash-annotation", OPT_STR, CFG_ANNOT_CONFIG_HASH, F(hash_annotation), NULL, 0, "KEY",
     "Pod-template annotation the rollout action sets to the rollout hash.",
     CHECKED(val_annotation_key)},
    {"rollout-jitter", OPT_DURATION, "5s", F(rollout_jitter_ns), NULL, 0, "DURATION",
     "Random delay before a rollout, so one replica of many patches and the others see it "
     "done.",
     RANGE(0, NS_H)},
    {"events", OPT_BOOL, "true", F(events), NULL, OPT_RESTART_ONLY | OPT_LIVE_OFF, "BOOL",
     "Post Kubernetes Events about reloads and rollouts (in a cluster).", NO_RANGE},
    {"restart-signal", OPT_SIGNAL, "TERM", F(restart_signal), NULL, 0, "SIGNAL",
     "Signal the restart action sends to the app's main process (found like the signal "
     "action's target); the kubelet then restarts the container in place.",
     NO_RANGE},
    {"restart-timeout", OPT_DURATION, "30s", F(restart_timeout_ns), NULL, 0, "DURATION",
     "How long the restart action waits for the process to exit before reporting failure.",
     RANGE(NS_MS, NS_DAY)},
    {"restart-delay", OPT_DURATION, "1m", F(restart_delay_ns), NULL, 0, "DURATION",
     "restart and restart-pod start this long after the change that first needs them, on the "
     "content of that time, so that a burst of edits costs one restart (restarts are at least "
     "this far apart; the kubelet backs off container restarts, and restarts a pod in place "
     "without any backoff).",
     RANGE(0, NS_H)},
    {"restart-pod-exit-code", OPT_INT, "88", F(restart_pod_exit_code), NULL, 0, "CODE",
     "Exit status of the restart-pod action: the agent's container must carry a "
     "restartPolicyRules rule {action: RestartAllContainers, exitCodes: {operator: In, "
     "values: [CODE]}} (Kubernetes 1.36+), stated by --restart-policy-rules.",
     RANGE(3, 125)},
    {"restart-policy-rules", OPT_STR, NULL, F(restart_policy_rules), NULL, OPT_NO_ANNOT, "JSON",
     "A copy of the agent container's own restartPolicyRules, as JSON (reload-agent inject and "
     "the webhook write both): restart-pod runs only if they restart every container on "
     "--restart-pod-exit-code.",
     CHECKED(check_restart_rules)},
    {"state-dir", OPT_STR, NULL, F(state_dir), NULL, 0, "PATH",
     "A directory that lives as long as the pod (an emptyDir): the agent keeps there the "
     "content it last applied, so an agent container that restarts acts on a change made "
     "while it was away; restart-pod records there why it restarted the pod, and the agent "
     "that starts again reports it.",
     NO_RANGE},
    {"stage", OPT_STR, "auto", F(stage), NULL, OPT_RESTART_ONLY, "N|P%",
     "The replicas of the pod's workload apply a change N (or P% of the replicas, rounded up) "
     "at a time, each after the ones before it verified it; a rejection or a failed "
     "verification anywhere halts the change for the whole workload. Coordinated through one "
     "Lease per workload (its Role: docs/staging.md). auto: 1 when restart or restart-pod is "
     "in use, else off. A pod that cannot reach the API acts alone and says so.",
     CHECKED(check_stage)},
    {"stage-workload", OPT_STR, NULL, F(stage_workload), NULL, OPT_RESTART_ONLY, "KIND/NAME",
     "The workload whose replicas take turns (reload-agent inject writes it), e.g. "
     "deployment/web; default: the pod's owner chain, read from the API.",
     CHECKED(check_stage_workload)},
    {"stage-ttl", OPT_DURATION, "30s", F(stage_ttl_ns), NULL, OPT_RESTART_ONLY, "DURATION",
     "A replica's turn is renewed every third of this; one not renewed this long (its pod "
     "died mid-stage) is taken over by the next replica.",
     RANGE(NS_S, NS_H)},
    {"validate", OPT_STR, NULL, F(validate), NULL, 0, "COMMAND",
     "The app's own checker, run on new content before any action, as the app would read it "
     "(e.g. 'nginx -t'; split into words like --exec-command, no shell): exit 0 accepts; "
     "anything else, or --validate-timeout, rejects the content: no action, the app keeps "
     "what it has, Event ConfigRejected, not retried (a later different content is). See "
     "docs/safe-reload.md.",
     CHECKED(check_command)},
    {"validate-timeout", OPT_DURATION, "10s", F(validate_timeout_ns), NULL, 0, "DURATION",
     "The checker is killed (its process group) after this long, and the content rejected.",
     RANGE(100 * NS_MS, NS_H)},
    {"validator-socket", OPT_STR, NULL, F(validator_socket), NULL, 0, "PATH",
     "Run --validate (and a command --verify) through `reload-agent validator` listening on "
     "this unix socket: the injector's validator container, in the app's own image, with the "
     "app's mounts (default: the agent runs them itself).",
     CHECKED(safeopts_check_socket)},
    {"keep-last-good", OPT_LIST, NULL, F(keep_last_good), NULL,
     OPT_REPEAT | OPT_NO_ANNOT | OPT_RESTART_ONLY, "SRC=DIR",
     "The app reads SRC (a --watch root, the agent's mirror of a ConfigMap or Secret) from "
     "DIR/live, a copy in the kubelet's ..data layout that the agent swaps only to validated "
     "content (checked first in DIR/candidate), and swaps back when --verify fails: a restarted "
     "app starts on the last good content. Repeatable; needs --state-dir; the injector writes it "
     "for the annotation " CFG_ANNOT_KEEP_LAST_GOOD ": \"true\".",
     NO_RANGE},
    {"verify", OPT_STR, NULL, F(verify), NULL, 0, "URL|COMMAND",
     "After an in-place action, the app must answer 2xx to this http(s) URL (GET), or the "
     "command must exit 0, within --verify-timeout (tried every 500ms); if not, with "
     "--keep-last-good the previous copy is restored and the action repeated (Event "
     "ConfigRolledBack), else Event ConfigVerifyFailed.",
     CHECKED(safeopts_check_verify)},
    {"verify-timeout", OPT_DURATION, "10s", F(verify_timeout_ns), NULL, 0, "DURATION",
     "How long --verify may take to pass.", RANGE(100 * NS_MS, NS_H)},
    {"storm-limit", OPT_STR, "auto", F(storm_limit), NULL, 0, "N/DURATION",
     "Storm breaker: after N actions within DURATION the agent stops acting (Event "
     "ReloadStormHalted) until the content has been stable for DURATION, then acts on it "
     "once; off; auto: 5/10m when an action in use is rollout, else off.",
     CHECKED(safeopts_check_storm_limit)},
    {"notify-url", OPT_STR, NULL, F(notify_url), NULL, OPT_RESTART_ONLY, "URL",
     "POST a notification here after each action and each failure, rejection, rollback or "
     "storm halt (docs/notifications.md). A chat webhook URL is a credential: prefer "
     "--notify-url-file. Never logged whole.",
     NO_RANGE},
    {"notify-url-file", OPT_STR, NULL, F(notify_url_file), NULL, OPT_RESTART_ONLY, "PATH",
     "Read the notification URL from this file (a Secret key mounted into the sidecar), "
     "again at each send, so a rotated Secret applies.",
     NO_RANGE},
    {"notify-format", OPT_ENUM, "json", F(notify_format), NOTIFY_FORMATS, OPT_RESTART_ONLY,
     "FORMAT",
     "Body of a notification: json (any webhook), slack, teams (an Adaptive Card, for a "
     "Workflows webhook) or gchat (Google Chat).",
     NO_RANGE},
    {"notify-timeout", OPT_DURATION, "5s", F(notify_timeout_ns), NULL, OPT_RESTART_ONLY, "DURATION",
     "Timeout of one notification send; also how long the agent, when it stops, keeps "
     "sending what is queued.",
     RANGE(100 * NS_MS, 5 * 60 * NS_S)},
    {"notify-queue", OPT_INT, "64", F(notify_queue), NULL, OPT_RESTART_ONLY, "N",
     "Notifications waiting to be sent, at most; a new one beyond is dropped and counted.",
     RANGE(1, 10000)},
    {"notify-ca-file", OPT_STR, NULL, F(notify_ca_file), NULL, OPT_RESTART_ONLY, "PATH",
     "PEM bundle to verify an https notification receiver with (default: the system's).", NO_RANGE},
    {"retry-initial", OPT_DURATION, "500ms", F(retry_initial_ns), NULL, 0, "DURATION",
     "First retry delay after a failed action; doubles per failure, with jitter.",
     RANGE(NS_MS, NS_DAY)},
    {"retry-max", OPT_DURATION, "30s", F(retry_max_ns), NULL, 0, "DURATION",
     "Cap of the retry delay.", RANGE(NS_MS, NS_DAY)},
    {"min-interval", OPT_DURATION, "0s", F(min_interval_ns), NULL, 0, "DURATION",
     "At most one action per this interval; changes in between are coalesced.", RANGE(0, NS_DAY)},
    {"sched-slice", OPT_DURATION, "100us", F(sched_slice_ns), NULL, OPT_ZERO_OK, "DURATION",
     "Scheduler time slice the agent asks for (Linux 6.12+): a short one lets a change "
     "preempt other work on the CPU at once instead of waiting behind it; the agent's "
     "share of the CPU is unchanged. The kernel accepts 100us to 100ms; 0 keeps the "
     "kernel default.",
     RANGE(100 * NS_US, 100 * NS_MS)},
    {"fast-sync", OPT_BOOL, "false", F(fast_sync), NULL, OPT_RESTART_ONLY, "BOOL",
     "Learn of a ConfigMap/Secret edit from the API (a metadata-only watch per object) and "
     "patch the annotation " CFG_ANNOT_SYNC " of the agent's own pod, "
     "so the kubelet refreshes the volumes within about a second instead of at its next "
     "periodic sync (60-90 s). Needs the Role and policy of manifests/fast-sync/ "
     "(reload-agent inject writes the Role; -o rbac prints it for a webhook user).",
     NO_RANGE},
    {"fast-sync-objects", OPT_LIST, NULL, F(fast_sync_objects), NULL, OPT_REPEAT | OPT_RESTART_ONLY,
     "KIND/NAME",
     "The objects fast sync watches, configmap/NAME or secret/NAME (repeatable; default: every "
     "ConfigMap and Secret the pod's spec names, read from the API).",
     NO_RANGE},
    {"fast-sync-confirm", OPT_DURATION, "2s", F(fast_sync_confirm_ns), NULL, OPT_RESTART_ONLY,
     "DURATION",
     "After a nudge, how long fast sync waits for the content to change before it nudges "
     "again; doubles per nudge (capped at 16s), 4 nudges, then the kubelet's periodic sync.",
     RANGE(10 * NS_MS, NS_H)},
    {"listen", OPT_STR, NULL, F(listen), NULL, OPT_RESTART_ONLY, "ADDR:PORT",
     "Serve /healthz, /readyz, /metrics and /status here, e.g. 127.0.0.1:9091 "
     "(default: no server).",
     NO_RANGE},
    {"annotations", OPT_STR, NULL, F(annotations), NULL, OPT_NO_ANNOT, "FILE",
     "Downward-API annotations file to read reload-agent.io/<flag> settings from, watched "
     "for live changes (default " CFG_DEFAULT_ANNOTATIONS_FILE " when it exists; \"\" for none).",
     NO_RANGE},
    {"print-config", OPT_BOOL, "false", F(print_config), NULL, OPT_NO_ANNOT, "",
     "Print the effective configuration with the source of each value, then exit.", NO_RANGE},
};

#define NOPTS (sizeof OPTIONS / sizeof OPTIONS[0])

/* Annotation keys under the prefix that are not options (config.h): the
 * injector's opt-in and per-pod sidecar settings (inject/transform.c), its
 * status record, and the rollout hash the agent itself writes. */
const char *const cfg_injector_annotations[] = {CFG_ANNOT_INJECT,
                                                CFG_ANNOT_INJECT_STATUS,
                                                CFG_ANNOT_CONFIG_HASH,
                                                CFG_ANNOT_SIDECAR_IMAGE,
                                                CFG_ANNOT_SIDECAR_CPU_REQUEST,
                                                CFG_ANNOT_SIDECAR_MEMORY_REQUEST,
                                                CFG_ANNOT_SIDECAR_MEMORY_LIMIT,
                                                CFG_ANNOT_SIDECAR_RUN_AS_USER,
                                                CFG_ANNOT_SYNC,
                                                CFG_ANNOT_SYNC_OBJECTS,
                                                CFG_ANNOT_KEEP_LAST_GOOD,
                                                CFG_ANNOT_EXTRA_SOURCES,
                                                CFG_ANNOT_NOTIFY_SECRET,
                                                NULL};

int cfg_is_injector_annotation(const char *key)
{
    for (const char *const *r = cfg_injector_annotations; *r; r++)
        if (strcmp(*r, key) == 0) return 1;
    return 0;
}

size_t cfg_option_count(void) { return NOPTS; }

const char *cfg_action_name(int action) { return action_name(action); }

static const char *const *choices_of(const struct opt_def *o)
{
    return o->type == OPT_ACTION && !o->choices ? action_names() : o->choices;
}

static const struct opt_def *find_opt(const char *name, size_t len, size_t *idx)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (strlen(OPTIONS[i].name) == len && memcmp(OPTIONS[i].name, name, len) == 0) {
            if (idx) *idx = i;
            return &OPTIONS[i];
        }
    return NULL;
}

static void strlist_push(struct strlist *l, const char *s)
{
    char **nv = realloc(l->v, (l->n + 2) * sizeof *nv);
    if (!nv) ra_oom();
    l->v = nv;
    l->v[l->n++] = ra_strdup(s);
    l->v[l->n] = NULL;
}

static void strlist_free(struct strlist *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int cfg_layer_init(struct cfg_layer *l, enum cfg_source src)
{
    l->val = calloc(NOPTS, sizeof *l->val);
    l->list = calloc(NOPTS, sizeof *l->list);
    l->src = src;
    l->unknown = (struct strlist){0};
    if (!l->val || !l->list) {
        free(l->val);
        free(l->list);
        l->val = NULL;
        l->list = NULL;
        return -ENOMEM;
    }
    return 0;
}

void cfg_layer_free(struct cfg_layer *l)
{
    if (!l->val) return;
    for (size_t i = 0; i < NOPTS; i++) {
        free(l->val[i]);
        strlist_free(&l->list[i]);
    }
    free(l->val);
    free(l->list);
    l->val = NULL;
    l->list = NULL;
    strlist_free(&l->unknown);
}

const char *cfg_layer_get(const struct cfg_layer *l, const char *name)
{
    size_t i;
    if (!l || !l->val || !find_opt(name, strlen(name), &i)) return NULL;
    return l->val[i];
}

/* Records one raw value in a layer. Repeatable options accumulate. */
static void layer_set(struct cfg_layer *l, size_t i, const char *v)
{
    free(l->val[i]);
    l->val[i] = ra_strdup(v);
    if (OPTIONS[i].flags & OPT_REPEAT) strlist_push(&l->list[i], v);
}

static int parse_args(int argc, char **argv, struct cfg_layer *flags, int *want_help, char *err,
                      size_t errlen);
static int layer_from_annotations(const struct annot_set *a, struct cfg_layer *l, char *err,
                                  size_t errlen);

int cfg_parse_args(int argc, char **argv, struct cfg_layer *flags, int *want_help, char *err,
                   size_t errlen)
{
    int rc = parse_args(argc, argv, flags, want_help, err, errlen);
    if (rc < 0) ra_one_line_fix(err, errlen);
    return rc;
}

int cfg_layer_from_annotations(const struct annot_set *a, struct cfg_layer *l, char *err,
                               size_t errlen)
{
    int rc = layer_from_annotations(a, l, err, errlen);
    if (rc < 0) ra_one_line_fix(err, errlen);
    return rc;
}

static int parse_args(int argc, char **argv, struct cfg_layer *flags, int *want_help, char *err,
                      size_t errlen)
{
    *want_help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *want_help = 1;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            char q[QUOTED_MAX];
            snprintf(err, errlen, "unexpected argument %s (options start with --)", QV(q, a));
            return -EINVAL;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name), idx;
        const struct opt_def *o = find_opt(name, nlen, &idx);
        if (!o) {
            snprintf(err, errlen, "unknown flag --%.*s (see --help)", (int)nlen, name);
            return -EINVAL;
        }
        const char *val;
        if (eq)
            val = eq + 1;
        else if (o->type == OPT_BOOL)
            val = "true";
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            snprintf(err, errlen, "flag --%s needs a value (%s)", o->name, o->metavar);
            return -EINVAL;
        }
        layer_set(flags, idx, val);
    }
    return 0;
}

static int layer_from_annotations(const struct annot_set *a, struct cfg_layer *l, char *err,
                                  size_t errlen)
{
    const size_t plen = strlen(CFG_ANNOTATION_PREFIX);
    for (size_t k = 0; k < a->n; k++) {
        const char *key = a->v[k].key;
        if (strncmp(key, CFG_ANNOTATION_PREFIX, plen) != 0) continue;
        const char *name = key + plen;
        size_t idx;
        if (cfg_is_injector_annotation(key)) continue;
        const struct opt_def *o = find_opt(name, strlen(name), &idx);
        if (!o) { /* the effective --hash-annotation, or an error: cfg_build decides */
            strlist_push(&l->unknown, key);
            continue;
        }
        if (o->flags & OPT_NO_ANNOT) {
            snprintf(err, errlen, "annotation %s: this option cannot be set by annotation", key);
            return -EINVAL;
        }
        if (strlen(a->v[k].val) != a->v[k].vlen) {
            snprintf(err, errlen, "annotation %s: value contains a NUL byte", key);
            return -EINVAL;
        }
        if (o->flags & OPT_REPEAT) {
            char **items;
            size_t n;
            char why[256], q[QUOTED_MAX];
            if (val_list(a->v[k].val, &items, &n, why, sizeof why) < 0) {
                snprintf(err, errlen, "annotation %s: invalid list %s: %s", key, QV(q, a->v[k].val),
                         why);
                return -EINVAL;
            }
            free(l->val[idx]);
            l->val[idx] = ra_strdup(a->v[k].val);
            strlist_free(&l->list[idx]);
            for (size_t j = 0; j < n; j++) strlist_push(&l->list[idx], items[j]);
            val_list_free(items);
        } else {
            layer_set(l, idx, a->v[k].val);
        }
    }
    return 0;
}

static const char *src_name(enum cfg_source s)
{
    return s == CFG_SRC_FLAG ? "flag" : s == CFG_SRC_ANNOTATION ? "annotation" : "default";
}

/* A duration the way a person types it: Go's form without the zero minutes
 * and seconds Go adds to whole hours ("1h", "720h", "1m", "1m30s"), "us"
 * for micro, "0" for zero. */
static void short_duration(int64_t ns, char *out, size_t n)
{
    char go[32];
    val_format_duration(ns, go, sizeof go);
    char *mu = strstr(go, "\xc2\xb5s");
    if (mu) memcpy(mu, "us", 3);
    if (ns == 0) strcpy(go, "0");
    snprintf(out, n, "%s", go);
    size_t l = strlen(out);
    if (l > 3 && strcmp(out + l - 3, "m0s") == 0) out[l -= 2] = '\0';
    if (l > 3 && strcmp(out + l - 3, "h0m") == 0) out[l -= 2] = '\0';
}

/* The accepted range of a duration or integer option, e.g. "0 or 100ms to
 * 720h", "3 to 125". */
static void range_text(const struct opt_def *o, char *out, size_t n)
{
    char lo[32], hi[32];
    if (o->type == OPT_INT) {
        snprintf(out, n, "%lld to %lld", (long long)o->min, (long long)o->max);
        return;
    }
    short_duration(o->min, lo, sizeof lo);
    short_duration(o->max, hi, sizeof hi);
    snprintf(out, n, "%s%s to %s", o->flags & OPT_ZERO_OK ? "0 or " : "", lo, hi);
}

/* Parses one raw value of option o into the config field. */
static int set_value(struct config *c, const struct opt_def *o, const char *v, enum cfg_source src,
                     char *err, size_t errlen)
{
    char why[256] = "";
    void *field = (char *)c + o->off;
    int rc = 0;
    switch (o->type) {
    case OPT_STR:
        if (o->check && (rc = o->check(v, why, sizeof why)) < 0) break;
        free(*(char **)field);
        *(char **)field = ra_strdup(v);
        break;
    case OPT_DURATION: {
        int64_t ns;
        rc = val_duration(v, &ns, why, sizeof why);
        if (rc == 0 && !(ns == 0 && (o->flags & OPT_ZERO_OK)) && (ns < o->min || ns > o->max)) {
            char range[96];
            range_text(o, range, sizeof range);
            snprintf(why, sizeof why, "out of range: --%s takes %s", o->name, range);
            rc = -EINVAL;
        }
        if (rc == 0) *(int64_t *)field = ns;
        break;
    }
    case OPT_INT: {
        uint64_t u;
        rc = val_uint(v, (uint64_t)o->min, (uint64_t)o->max, &u, why, sizeof why);
        if (rc == 0) *(int *)field = (int)u;
        break;
    }
    case OPT_SIGNAL: rc = val_signal(v, (int *)field, why, sizeof why); break;
    case OPT_BOOL: rc = val_bool(v, (int *)field, why, sizeof why); break;
    case OPT_ENUM:
    case OPT_ACTION:
        rc = -EINVAL;
        for (int i = 0; choices_of(o)[i]; i++)
            if (strcmp(choices_of(o)[i], v) == 0) {
                enum action a = (enum action)i;
                if (o->type == OPT_ACTION && action_by_name(v, &a) < 0) break;
                *(int *)field = (int)a;
                rc = 0;
            }
        if (rc) {
            size_t l = (size_t)snprintf(why, sizeof why, "must be one of");
            for (int i = 0; choices_of(o)[i] && l < sizeof why; i++)
                l += (size_t)snprintf(why + l, sizeof why - l, "%s%s", i ? "|" : " ",
                                      choices_of(o)[i]);
        }
        break;
    case OPT_LIST: /* handled by the caller */ break;
    }
    if (rc < 0) {
        char q[QUOTED_MAX];
        if (src == CFG_SRC_ANNOTATION)
            snprintf(err, errlen, "invalid value for annotation %s%s: %s: %s",
                     CFG_ANNOTATION_PREFIX, o->name, QV(q, v), why);
        else
            snprintf(err, errlen, "invalid value for --%s (%s): %s: %s", o->name, src_name(src),
                     QV(q, v), why);
        return -EINVAL;
    }
    return 0;
}

static int apply_layer(struct config *c, const struct cfg_layer *l, char *err, size_t errlen)
{
    if (!l) return 0;
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt_def *o = &OPTIONS[i];
        if (!l->val[i]) continue;
        if (o->type == OPT_LIST) {
            struct strlist *dst = (struct strlist *)((char *)c + o->off);
            strlist_free(dst);
            for (size_t j = 0; j < l->list[i].n; j++) strlist_push(dst, l->list[i].v[j]);
        } else if (set_value(c, o, l->val[i], l->src, err, errlen) < 0) {
            return -EINVAL;
        }
    }
    return 0;
}

static int check_expect_status(const struct config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < c->http_expect_status.n; i++) {
        const char *e = c->http_expect_status.v[i];
        int ok = strlen(e) == 3 && e[0] >= '1' && e[0] <= '5' &&
                 ((e[1] == 'x' && e[2] == 'x') ||
                  (e[1] >= '0' && e[1] <= '9' && e[2] >= '0' && e[2] <= '9'));
        if (!ok) {
            char q[QUOTED_MAX];
            snprintf(err, errlen,
                     "invalid value for --http-expect-status: %s: want a status code "
                     "100-599 or a class like 2xx",
                     QV(q, e));
            return -EINVAL;
        }
    }
    return 0;
}

/* --fast-sync-objects: the grammar fast sync parses them with
 * (podrefs_parse_spec, kube/podrefs.h), so a value passes here exactly when
 * fast sync takes it. */
static int check_fast_sync_objects(const struct config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < c->fast_sync_objects.n; i++) {
        enum podref_kind kind;
        const char *name;
        char why[512];
        if (podrefs_parse_spec(c->fast_sync_objects.v[i], &kind, &name, why, sizeof why) < 0) {
            snprintf(err, errlen, "invalid value for --fast-sync-objects: %s", why);
            return -EINVAL;
        }
    }
    return 0;
}

/* --notify-url: an http(s) URL, quoted only as scheme://host (the path of a
 * chat webhook is its secret); not with --notify-url-file. */
static int check_notify(const struct config *c, char *err, size_t errlen)
{
    const char *u = c->notify_url;
    if (!u || !*u) return 0;
    if (c->notify_url_file && *c->notify_url_file) {
        snprintf(err, errlen, "--notify-url and --notify-url-file are exclusive: give one");
        return -EINVAL;
    }
    if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
        char red[512];
        redact_url_origin(u, red, sizeof red);
        snprintf(err, errlen,
                 "invalid value for --notify-url: \"%s\": want an http:// or https:// URL", red);
        return -EINVAL;
    }
    return 0;
}

/* Each action that is in use needs its own options. */
static int check_action_needs(const struct config *c, const int *used, char *err, size_t errlen)
{
    if ((used[ACTION_SIGNAL] || used[ACTION_RESTART]) && !(c->process && *c->process) &&
        !(c->pid_file && *c->pid_file)) {
        snprintf(err, errlen, "the %s action needs --process NAME or --pid-file PATH",
                 action_name(used[ACTION_SIGNAL] ? ACTION_SIGNAL : ACTION_RESTART));
        return -EINVAL;
    }
    if (used[ACTION_HTTP]) {
        if (!c->http_url || strncmp(c->http_url, "http://", 7) != 0) {
            if (!c->http_url || strncmp(c->http_url, "https://", 8) != 0) {
                char url[512];
                redact_url(c->http_url, url, sizeof url);
                snprintf(err, errlen,
                         "the %s action needs --http-url with an http:// or https:// URL "
                         "(got \"%s\")",
                         action_name(ACTION_HTTP), url);
                return -EINVAL;
            }
        }
        for (const char *p = c->http_method; *p; p++)
            if (!((*p >= 'A' && *p <= 'Z') || *p == '-')) {
                snprintf(err, errlen,
                         "invalid value for --http-method: \"%s\": want an "
                         "upper-case method name such as POST",
                         c->http_method);
                return -EINVAL;
            }
        for (size_t i = 0; i < c->http_header.n; i++) {
            const char *h = c->http_header.v[i], *colon = strchr(h, ':');
            if (!colon || colon == h || strpbrk(h, "\r\n")) {
                snprintf(err, errlen,
                         "invalid value for --http-header: \"%s\": want \"Name: value\"", h);
                return -EINVAL;
            }
        }
    }
    if (used[ACTION_EXEC] && !(c->exec_command && *c->exec_command)) {
        snprintf(err, errlen, "the %s action needs --exec-command COMMAND",
                 action_name(ACTION_EXEC));
        return -EINVAL;
    }
    return 0;
}

/* The option that makes action a used, for a message: "--action A",
 * "--env-action A" or "--rule GLOB=A" (the first of them). */
static void user_of(const struct config *c, enum action a, char *what, size_t n)
{
    char q[QUOTED_MAX];
    snprintf(what, n, "--action %s", action_name(a));
    if (c->action != (int)a && c->env_watch.n && c->env_action == (int)a)
        snprintf(what, n, "--env-action %s", action_name(a));
    else
        for (size_t i = 0; c->action != (int)a && i < c->nrules; i++)
            if (c->rules[i].action == a) {
                snprintf(what, n, "--rule %s", QV(q, c->rule_raw.v[i]));
                break;
            }
}

/* restart-pod exits the agent. That restarts every container of the pod
 * only when the agent's container carries a RestartAllContainers rule for
 * the exit code; otherwise the kubelet would restart the agent alone, which
 * then takes the new content as applied: the change would be lost. The
 * agent cannot read its own container's spec without API access, so it is
 * told (--restart-policy-rules, a flag: fixed, like the spec, for the
 * pod's life). Judged at start and on every live update alike. */
static int check_restart_pod(const struct config *c, const int *used, char *err, size_t errlen)
{
    if (!used[ACTION_RESTART_POD]) return 0;
    char what[QUOTED_MAX + 16], rules[128], why[256];
    int code = c->restart_pod_exit_code;
    user_of(c, ACTION_RESTART_POD, what, sizeof what);
    restartrules_for_code(code, rules, sizeof rules);
    if (code == 70) {
        snprintf(err, errlen,
                 "invalid value for --restart-pod-exit-code: 70 is the agent's own exit status "
                 "when it runs out of memory; choose another code");
        return -EINVAL;
    }
    if (!c->restart_policy_rules || !*c->restart_policy_rules) {
        snprintf(err, errlen,
                 "%s: restart-pod needs the agent's container to carry restartPolicyRules that "
                 "restart every container on exit code %d, stated by --restart-policy-rules "
                 "(reload-agent inject and the webhook add both; by hand, the rule %s in the "
                 "container and the same JSON in the flag); without it the exit would restart "
                 "the agent alone",
                 what, code, rules);
        return -EINVAL;
    }
    if (restartrules_verdict(c->restart_policy_rules, code, why, sizeof why) !=
        RESTARTRULES_RESTART_ALL) {
        snprintf(err, errlen,
                 "%s: --restart-policy-rules: %s; restart-pod needs the rule %s, or it would not "
                 "restart the pod",
                 what, why, rules);
        return -EINVAL;
    }
    return 0;
}

/* The rollout action needs the API client; a running agent that has none
 * cannot start one (issue 9 F8: accepted, then failing forever). */
static int check_env(const struct config *c, const struct cfg_env *env, const int *used, char *err,
                     size_t errlen)
{
    if (!env || env->kube != CFG_KUBE_NONE || !used[ACTION_ROLLOUT]) return 0;
    char what[QUOTED_MAX + 16];
    user_of(c, ACTION_ROLLOUT, what, sizeof what);
    snprintf(err, errlen,
             "%s: the rollout action needs the Kubernetes API client, and this agent runs "
             "without one (it is set up at start only, when --action, --env-action or a --rule "
             "uses rollout, or for Events in a cluster); restart the agent to use rollout",
             what);
    return -EINVAL;
}

/* Cross-field validation and derived fields. */
/* A list of roots: no empty path, none given twice. */
static int check_roots(const struct strlist *l, const char *opt, char *err, size_t errlen)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i][0] == '\0') {
            snprintf(err, errlen, "invalid value for --%s: empty path", opt);
            return -EINVAL;
        }
    long d = ra_first_duplicate((const char *const *)l->v, l->n);
    if (d == -2) ra_oom();
    if (d >= 0) {
        char q[QUOTED_MAX];
        snprintf(err, errlen, "invalid value for --%s: %s is given twice", opt, QV(q, l->v[d]));
        return -EINVAL;
    }
    return 0;
}

/* The annotation keys under the prefix that are no option: only the
 * effective --hash-annotation and its files twin (the rollout stamps both on
 * the template, so every pod created after a rollout carries them in its
 * annotations file) are not an error. */
static int check_unknown(const struct config *c, const struct cfg_layer *annots, char *err,
                         size_t errlen)
{
    if (!annots || annots->unknown.n == 0) return 0;
    char *files = rollout__files_key(c->hash_annotation);
    int rc = 0;
    for (size_t i = 0; i < annots->unknown.n && rc == 0; i++)
        if (strcmp(annots->unknown.v[i], c->hash_annotation) != 0 &&
            strcmp(annots->unknown.v[i], files) != 0) {
            snprintf(err, errlen, "annotation %s: no such option", annots->unknown.v[i]);
            rc = -EINVAL;
        }
    free(files);
    return rc;
}

/* --hash-annotation must not name a key the agent or the injector reads
 * (the rollout would overwrite that setting with a hash). */
static int check_hash_annotation(const struct config *c, char *err, size_t errlen)
{
    const size_t plen = strlen(CFG_ANNOTATION_PREFIX);
    const char *k = c->hash_annotation;
    if (strncmp(k, CFG_ANNOTATION_PREFIX, plen) != 0 || strcmp(k, CFG_ANNOT_CONFIG_HASH) == 0)
        return 0;
    if (find_opt(k + plen, strlen(k + plen), NULL) || cfg_is_injector_annotation(k)) {
        char q[QUOTED_MAX];
        snprintf(err, errlen,
                 "invalid value for --hash-annotation: %s is a reload-agent setting; the "
                 "rollout would overwrite it with the hash",
                 QV(q, k));
        return -EINVAL;
    }
    return 0;
}

/* The one path -> action value (config/rules.h), in the order of
 * cfg_action_for: --ignore, the --env-watch roots, the rules, --action. */
static void build_path_rules(struct config *c)
{
    struct path_rules *r = &c->path_rules;
    path_rules_free(r);
    path_rules_init(r, c->action);
    for (size_t i = 0; i < c->ignore.n; i++) path_rules_add_ignore(r, c->ignore.v[i]);
    for (size_t i = 0; i < c->env_watch.n; i++)
        path_rules_add_root(r, c->env_watch.v[i], c->env_action);
    for (size_t i = 0; i < c->nrules; i++)
        path_rules_add_glob(r, c->rules[i].glob, c->rules[i].action);
}

/* --stage resolved: auto is one at a time when restart or restart-pod is
 * in use; an explicit stage needs an in-place action (the rollout action
 * is staged by the workload's controller, maxUnavailable). */
static int check_stage_use(struct config *c, const int *used, char *err, size_t errlen)
{
    int is_auto;
    if (parse_stage(c->stage ? c->stage : "auto", &c->stage_count, &c->stage_percent, &is_auto) < 0)
        return -EINVAL; /* the row's check said so already */
    c->stage_default = is_auto && (used[ACTION_RESTART] || used[ACTION_RESTART_POD]);
    if (c->stage_default) c->stage_count = 1;
    int in_place = 0;
    for (int a = 0; a < ACTION__COUNT; a++)
        in_place |= used[a] && a != ACTION_ROLLOUT && a != ACTION_NONE;
    if ((c->stage_count || c->stage_percent) && !is_auto && !in_place) {
        snprintf(err, errlen,
                 "--stage %s needs an action that acts in place (signal, http, exec, restart, "
                 "restart-pod): the rollout action is staged by the workload's controller "
                 "(maxUnavailable)",
                 c->stage);
        return -EINVAL;
    }
    return 0;
}

static int validate(struct config *c, const struct cfg_env *env, char *err, size_t errlen)
{
    /* --env-watch roots may overlap --watch roots: the env root wins for
     * its files (cfg_action_for). */
    if (check_roots(&c->watch, "watch", err, errlen) < 0 ||
        check_roots(&c->env_watch, "env-watch", err, errlen) < 0)
        return -EINVAL;
    c->rules = calloc(c->rule_raw.n ? c->rule_raw.n : 1, sizeof *c->rules);
    if (!c->rules) ra_oom();
    for (size_t i = 0; i < c->rule_raw.n; i++) {
        const char *r = c->rule_raw.v[i], *eq = strrchr(r, '=');
        enum action a;
        if (!eq || eq == r || action_by_name(eq + 1, &a) < 0) {
            snprintf(err, errlen,
                     "invalid value for --rule: \"%s\": want GLOB=ACTION with ACTION one of %s", r,
                     action_names_joined());
            return -EINVAL;
        }
        c->rules[i].glob = strndup(r, (size_t)(eq - r));
        if (!c->rules[i].glob) ra_oom();
        c->rules[i].action = a;
        c->nrules++;
    }
    int used[ACTION__COUNT] = {0};
    unsigned mask = cfg_used_actions(c);
    for (int a = 0; a < ACTION__COUNT; a++) used[a] = (mask & ACTION_BIT(a)) != 0;
    if (check_expect_status(c, err, errlen) < 0 || check_action_needs(c, used, err, errlen) < 0 ||
        check_env(c, env, used, err, errlen) < 0 || check_restart_pod(c, used, err, errlen) < 0 ||
        check_hash_annotation(c, err, errlen) < 0 || check_fast_sync_objects(c, err, errlen) < 0)
        return -EINVAL;
    if (c->listen && *c->listen) {
        struct sockaddr_storage ss;
        char why[256];
        if (addr_parse_listen(c->listen, &ss, why, sizeof why) < 0) {
            snprintf(err, errlen, "invalid value for --listen: %s", why);
            return -EINVAL;
        }
    }
    if (c->retry_initial_ns <= 0 || c->retry_max_ns < c->retry_initial_ns) {
        snprintf(err, errlen, "--retry-initial must be > 0 and <= --retry-max");
        return -EINVAL;
    }
    if (check_stage_use(c, used, err, errlen) < 0 || check_notify(c, err, errlen) < 0)
        return -EINVAL;
    if (c->on_start == ON_START_AUTO)
        c->on_start = used[ACTION_ROLLOUT] ? ON_START_RECONCILE : ON_START_SKIP;
    if (c->on_start == ON_START_RECONCILE && !used[ACTION_ROLLOUT]) {
        snprintf(err, errlen,
                 "--on-start reconcile needs a rule, --action or --env-action (with an "
                 "--env-watch root) that uses rollout");
        return -EINVAL;
    }
    if (safeopts_validate(c, mask, err, errlen) < 0) return -EINVAL;
    build_path_rules(c);
    return 0;
}

int cfg_build(const struct cfg_layer *flags, const struct cfg_layer *annots, struct config *out,
              char *err, size_t errlen)
{
    return cfg_build_env(flags, annots, NULL, out, err, errlen);
}

int cfg_build_env(const struct cfg_layer *flags, const struct cfg_layer *annots,
                  const struct cfg_env *env, struct config *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt_def *o = &OPTIONS[i];
        if (!o->def) continue;
        if (o->type == OPT_LIST) {
            char **items, why[128];
            size_t n;
            if (val_list(o->def, &items, &n, why, sizeof why) < 0) ra_oom();
            for (size_t j = 0; j < n; j++)
                strlist_push((struct strlist *)((char *)out + o->off), items[j]);
            val_list_free(items);
        } else if (set_value(out, o, o->def, CFG_SRC_DEFAULT, err, errlen) < 0) {
            goto fail; /* a bad default is our bug, but report it anyway */
        }
    }
    if (apply_layer(out, flags, err, errlen) < 0 || apply_layer(out, annots, err, errlen) < 0 ||
        check_unknown(out, annots, err, errlen) < 0 || validate(out, env, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    cfg_free(out);
    ra_one_line_fix(err, errlen);
    return -EINVAL;
}

void cfg_free(struct config *c)
{
    for (size_t i = 0; i < NOPTS; i++) {
        void *field = (char *)c + OPTIONS[i].off;
        if (OPTIONS[i].type == OPT_LIST)
            strlist_free(field);
        else if (OPTIONS[i].type == OPT_STR) {
            free(*(char **)field);
            *(char **)field = NULL;
        }
    }
    for (size_t i = 0; i < c->nrules; i++) free(c->rules[i].glob);
    free(c->rules);
    c->rules = NULL;
    c->nrules = 0;
    path_rules_free(&c->path_rules);
}

static int same_list(const struct strlist *a, const struct strlist *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i], b->v[i]) != 0) return 0;
    return 1;
}

int cfg_is_same_watch(const struct config *a, const struct config *b)
{
    return same_list(&a->watch, &b->watch) && same_list(&a->env_watch, &b->env_watch);
}

const char **cfg_watch_roots(const struct config *c, size_t *n)
{
    const char **v = calloc(c->watch.n + c->env_watch.n + 1, sizeof *v);
    if (!v) ra_oom();
    *n = 0;
    for (size_t i = 0; i < c->watch.n; i++) v[(*n)++] = c->watch.v[i];
    for (size_t i = 0; i < c->env_watch.n; i++) {
        int dup = 0;
        for (size_t j = 0; j < c->watch.n && !dup; j++)
            dup = !strcmp(c->watch.v[j], c->env_watch.v[i]);
        if (!dup) v[(*n)++] = c->env_watch.v[i];
    }
    return v;
}

int cfg_is_ignored(const struct config *c, const char *path)
{
    return path_rules_is_ignored(&c->path_rules, path);
}

int cfg_action_for(const struct config *c, const char *path)
{
    return path_rules_action(&c->path_rules, path);
}

unsigned cfg_used_actions(const struct config *c)
{
    unsigned mask = ACTION_BIT(c->action);
    for (size_t i = 0; i < c->nrules; i++) mask |= ACTION_BIT(c->rules[i].action);
    if (c->env_watch.n) mask |= ACTION_BIT(c->env_action);
    return mask;
}

/* The --help marker of a restart-only option ("" for the others). */
static const char *restart_marker(const struct opt_def *o)
{
    if (!(o->flags & OPT_RESTART_ONLY)) return "";
    return o->flags & OPT_LIVE_OFF ? " [restart-only to turn on]" : " [restart-only]";
}

/* 1 if option o has the same value in a and b. */
static int same_value(const struct opt_def *o, const struct config *a, const struct config *b)
{
    const void *fa = (const char *)a + o->off, *fb = (const char *)b + o->off;
    switch (o->type) {
    case OPT_STR: {
        const char *x = *(char *const *)fa, *y = *(char *const *)fb;
        return strcmp(x ? x : "", y ? y : "") == 0;
    }
    case OPT_LIST: {
        const struct strlist *x = fa, *y = fb;
        if (x->n != y->n) return 0;
        for (size_t i = 0; i < x->n; i++)
            if (strcmp(x->v[i], y->v[i]) != 0) return 0;
        return 1;
    }
    case OPT_DURATION: return *(const int64_t *)fa == *(const int64_t *)fb;
    case OPT_INT:
    case OPT_SIGNAL:
    case OPT_BOOL:
    case OPT_ENUM:
    case OPT_ACTION: return *(const int *)fa == *(const int *)fb;
    }
    return 1;
}

int cfg_is_same(const struct config *a, const struct config *b)
{
    for (size_t i = 0; i < NOPTS; i++)
        if (!same_value(&OPTIONS[i], a, b)) return 0;
    return 1;
}

size_t cfg_restart_only_changed(const struct config *boot, const struct config *prev,
                                const struct config *next, char *names, size_t n)
{
    size_t count = 0, len = 0;
    if (n) names[0] = '\0';
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt_def *o = &OPTIONS[i];
        if (!(o->flags & OPT_RESTART_ONLY) || same_value(o, boot, next)) continue;
        if (o->flags & OPT_LIVE_OFF && !*(const int *)((const char *)next + o->off)) continue;
        if (prev && same_value(o, prev, next)) continue;
        if (n > len)
            len += (size_t)snprintf(names + len, n - len, "%s--%s", count ? ", " : "", o->name);
        count++;
    }
    return count;
}

void cfg_dup(const struct config *src, struct config *dst)
{
    *dst = *src;
    for (size_t i = 0; i < NOPTS; i++) {
        void *field = (char *)dst + OPTIONS[i].off;
        if (OPTIONS[i].type == OPT_STR) {
            *(char **)field = ra_strdup(*(char **)field);
        } else if (OPTIONS[i].type == OPT_LIST) {
            const struct strlist *from =
                (const struct strlist *)((const char *)src + OPTIONS[i].off);
            struct strlist *to = field;
            to->v = NULL;
            to->n = 0;
            for (size_t j = 0; j < from->n; j++) strlist_push(to, from->v[j]);
        }
    }
    dst->rules = calloc(src->nrules ? src->nrules : 1, sizeof *dst->rules);
    if (!dst->rules) ra_oom();
    for (size_t i = 0; i < src->nrules; i++) {
        dst->rules[i].glob = ra_strdup(src->rules[i].glob);
        dst->rules[i].action = src->rules[i].action;
    }
    path_rules_copy(&dst->path_rules, &src->path_rules);
}

void cfg_print_help(FILE *f)
{
    for (size_t i = 0; i < NOPTS; i++) {
        const struct opt_def *o = &OPTIONS[i];
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", o->name, o->metavar[0] ? " " : "", o->metavar);
        fprintf(f, "  %-26s %s", head, o->help);
        for (int c = 0; o->type == OPT_ACTION && choices_of(o)[c]; c++)
            fprintf(f, "%s%s%s", c ? "|" : " ", choices_of(o)[c], choices_of(o)[c + 1] ? "" : ".");
        if (o->def) fprintf(f, " (default %s", o->def);
        if (o->type == OPT_DURATION || o->type == OPT_INT) {
            char range[96];
            range_text(o, range, sizeof range);
            fprintf(f, "%srange %s", o->def ? "; " : " (", range);
        }
        if (o->def || o->type == OPT_DURATION || o->type == OPT_INT) fputc(')', f);
        fputs(restart_marker(o), f);
        fputc('\n', f);
    }
    fprintf(f, "  %-26s %s\n", "-h, --help", "Show this help.");
    fprintf(f, "\nEvery option except --annotations and --print-config can also be set with the "
               "pod annotation\n" CFG_ANNOTATION_PREFIX "<flag-name> (lists comma-separated); "
               "annotations win over flags.\nDurations are Go-style (250ms, 1m30s).\n"
               "Options marked [restart-only] are read once, at start: a live annotation change "
               "of one is\naccepted and logged, and takes effect when the agent restarts.\n");
}

/* Renders a field's current value. */
static void format_value(const struct config *c, const struct opt_def *o, char *out, size_t n)
{
    const void *field = (const char *)c + o->off;
    switch (o->type) {
    case OPT_STR: snprintf(out, n, "%s", *(char *const *)field ? *(char *const *)field : ""); break;
    case OPT_DURATION: val_format_duration(*(const int64_t *)field, out, n); break;
    case OPT_INT: snprintf(out, n, "%d", *(const int *)field); break;
    case OPT_SIGNAL: {
        const char *s = val_signal_name(*(const int *)field);
        snprintf(out, n, "%s", s ? s : "?");
        break;
    }
    case OPT_BOOL: snprintf(out, n, "%s", *(const int *)field ? "true" : "false"); break;
    case OPT_ENUM: snprintf(out, n, "%s", choices_of(o)[*(const int *)field]); break;
    case OPT_ACTION: snprintf(out, n, "%s", action_name(*(const int *)field)); break;
    case OPT_LIST: {
        const struct strlist *l = field;
        size_t len = 0;
        out[0] = '\0';
        for (size_t i = 0; i < l->n && len < n; i++)
            len += (size_t)snprintf(out + len, n - len, "%s%s", i ? "," : "", l->v[i]);
        break;
    }
    }
}

/* A value for a --print-config line: Go-quoted (in place) unless the
 * one-line policy of base/text.h keeps it as it is, so that each option
 * stays one line. */
static const char *one_line_value(char *buf)
{
    char q[4096];
    if (ra_text_is_one_line(buf, strlen(buf))) return buf;
    gq_quote_to(q, sizeof q, buf, strlen(buf));
    memcpy(buf, q, strlen(q) + 1);
    return buf;
}

void cfg_print(FILE *f, const struct config *c, const struct cfg_layer *flags,
               const struct cfg_layer *annots)
{
    for (size_t i = 0; i < NOPTS; i++) {
        char buf[4096];
        const char *src = "default";
        if (annots && annots->val[i])
            src = "annotation";
        else if (flags && flags->val[i])
            src = "flag";
        format_value(c, &OPTIONS[i], buf, sizeof buf);
        /* credentials in the reload endpoint's URL and headers are not shown */
        if (OPTIONS[i].off == F(http_url)) {
            redact_url(c->http_url, buf, sizeof buf);
        } else if (OPTIONS[i].off == F(notify_url)) {
            redact_url_origin(c->notify_url, buf, sizeof buf);
        } else if (OPTIONS[i].off == F(http_header)) {
            size_t len = 0;
            buf[0] = '\0';
            for (size_t h = 0; h < c->http_header.n && len < sizeof buf; h++) {
                char one[512];
                redact_header(c->http_header.v[h], one, sizeof one);
                len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", h ? "," : "", one);
            }
        }
        fprintf(f, "%-16s = %-30s # %s%s\n", OPTIONS[i].name, one_line_value(buf), src,
                OPTIONS[i].flags & OPT_RESTART_ONLY ? ", restart-only" : "");
    }
}
