/*
 * run.c - the `run` daemon (its command line is cmd/cmd_run.c's). Owns
 * the loop and, in init order: the
 * configuration (defaults < flags < annotations file), the monitor over the
 * watch roots, the watch on the annotations file, and the signal handlers.
 * Shutdown closes them in reverse order and checks uv_loop_close() == 0.
 */
#include "run/run.h"

#include <errno.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/annotations.h"
#include "config/config.h"
#include "run/endpoints.h"
#include "run/engine.h"
#include "run/fastsync.h"
#include "run/injectnote.h"
#include "run/notify.h"
#include "run/stage.h"
#include "run/safestate.h"
#include "net/httpc.h"
#include "net/httpd.h"
#include "kube/kevents.h"
#include "kube/kube.h"
#include "base/backoff.h"
#include "base/log.h"
#include "run/metrics.h"
#include "run/monitor.h"
#include "run/statedir.h"
#include "actions/rollout.h"
#include "base/sched.h"
#include "watch/watch.h"

#define ANNOT_DEBOUNCE_MS 50

static struct {
    uv_loop_t loop;
    struct cfg_layer flags;
    struct config cfg;  /* the configuration in force */
    struct config boot; /* as at start: what restart-only options hold */
    char *annot_path;   /* NULL = no annotations file */
    uv_timer_t annot_timer;
    struct monitor *mon;
    struct engine *eng;
    struct httpc *hc;
    struct httpd *srv;
    struct kube *kube;
    struct kevents *kev;
    struct rollout *ro;
    struct fastsync *fs;     /* --fast-sync, or NULL */
    struct stage *stage;     /* --stage (or its default for restart), or NULL */
    struct notify *notify;   /* --notify-url(-file), or NULL */
    struct annot_set annots; /* the annotations file as last read (pod annotations) */
    struct endpoints_ctx ep;
    int ready;
    int baseline_seen; /* the monitor's first baseline was taken */
    char last_config_error[1024];
    uv_signal_t sigterm, sigint, sighup;
    int stopping;
    int exit_status; /* asked for by an action (restart-pod), 0 if none */
} R;

static void apply_logging(const struct config *c)
{
    log_configure((enum log_level)c->log_level, (enum log_format)c->log_format);
}

/* Asks for the configured scheduler slice when it differs from was (the
 * value in force; -1 at start, where 0 leaves the inherited slice alone). */
static void apply_sched(int64_t was, const struct config *c)
{
    if (c->sched_slice_ns == was || (was < 0 && c->sched_slice_ns == 0)) return;
    int rc = ra_sched_set_slice(c->sched_slice_ns);
    struct log_rec r;
    if (log_rec_begin(&r, rc == 0 ? RA_LOG_DEBUG : RA_LOG_WARN, "sched-slice")) {
        log_rec_int(&r, "slice_ns", c->sched_slice_ns);
        if (rc == 0) {
            log_rec_end(&r, "scheduler slice set to %lld ns", (long long)c->sched_slice_ns);
        } else {
            const char *why = rc == -EPERM ? "not permitted (the agent is not under SCHED_OTHER, "
                                             "or a seccomp filter refuses sched_setattr)"
                                           : strerror(-rc);
            log_rec_str(&r, "error", why);
            log_rec_end(&r,
                        "cannot set the scheduler slice (--sched-slice): %s; the agent works "
                        "on with the slice it has",
                        why);
        }
    }
}

/* Reads the annotations file into an annotation layer. A missing file is an
 * empty layer (the file is watched and may appear later). */
static int load_annotations(struct cfg_layer *l, char *err, size_t errlen)
{
    struct annot_set a = {0};
    char why[512];
    if (cfg_layer_init(l, CFG_SRC_ANNOTATION) < 0) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (!R.annot_path) return 0;
    int rc = annot_parse_file(R.annot_path, &a, why, sizeof why);
    if (rc == -ENOENT) return 0;
    if (rc < 0) {
        snprintf(err, errlen, "annotations file %s: %s", R.annot_path, why);
        return rc;
    }
    rc = cfg_layer_from_annotations(&a, l, err, errlen);
    if (rc == 0) {
        annot_free(&R.annots);
        R.annots = a;
    } else {
        annot_free(&a);
    }
    return rc;
}

static void on_change(void *ud, const struct hash_manifest *cur, const struct hash_diff *d)
{
    (void)ud;
    (void)d;
    metrics_change();
    if (R.fs) fastsync_content_changed(R.fs);
    if (R.eng) engine_observe(R.eng, cur);
}

static int uses_rollout(const struct config *c)
{
    return (cfg_used_actions(c) & ACTION_BIT(ACTION_ROLLOUT)) != 0;
}

/* At start, once the pod is read: warn about subPath mounts (they never
 * update) and, for --on-start reconcile without an annotations file, compare
 * the pod's template hash. */
static void on_pod_read(void *ud, const struct owner_info *o)
{
    int reconcile = ud != NULL;
    if (o->have_pod)
        for (size_t i = 0; i < o->pod.nsubpath_mounts; i++) {
            const struct owner_mount *m = &o->pod.subpath_mounts[i];
            struct log_rec r;
            if (log_rec_begin(&r, RA_LOG_WARN, "subpath")) {
                log_rec_str(&r, "container", m->container);
                log_rec_str(&r, "volume", m->volume);
                log_rec_str(&r, "mount_path", m->mount_path);
                log_rec_end(&r,
                            "container %s mounts volume %s at %s with subPath: the kubelet "
                            "never updates subPath mounts, so that container will not see "
                            "changes; mount the whole volume instead",
                            m->container, m->volume, m->mount_path);
            }
        }
    if (reconcile && R.eng)
        engine_reconcile(R.eng,
                         o->have_pod ? owner_pod_annotation(o, R.cfg.hash_annotation) : NULL);
}

/* --on-start reconcile: the pod's template hash comes from the annotations
 * file when there is one, else from the pod itself (GET). The pod is read
 * at start in any case when there is an API client. */
static void start_reconcile(void)
{
    int reconcile = R.cfg.on_start == ON_START_RECONCILE && R.eng;
    int from_file = R.annot_path && access(R.annot_path, R_OK) == 0;
    if (reconcile && from_file) {
        const struct annot *a = annot_get(&R.annots, R.cfg.hash_annotation);
        engine_reconcile(R.eng, a ? a->val : NULL);
    }
    if (R.ro && rollout_resolve(R.ro, on_pod_read, reconcile && !from_file ? &R : NULL) < 0)
        log_warn("cannot read the agent's own pod from the API");
}

static void on_token_event(void *ud, size_t root, enum watch_why why)
{
    (void)ud;
    (void)root;
    (void)why;
    if (R.kube) kube_token_stale(R.kube);
}

static int staged(const struct config *c) { return c->stage_count || c->stage_percent; }

/* The Kubernetes client: required by rollout and fast sync, optional for
 * Events and staging. */
static int start_kube(char *err, size_t errlen)
{
    int need = uses_rollout(&R.cfg) || R.cfg.fast_sync;
    int want_events = (R.cfg.events || staged(&R.cfg)) &&
                      ((R.cfg.kube_api && *R.cfg.kube_api) || getenv("KUBERNETES_SERVICE_HOST"));
    if (!need && !want_events) return 0;
    int rc = httpc_create(&R.loop, &R.hc);
    if (rc < 0) {
        snprintf(err, errlen, "cannot create the HTTP client (libcurl could not be initialised)");
        if (need) return rc;
        log_info("Kubernetes Events off: %s", err);
        return 0;
    }
    struct kube_config kc = {.api = R.cfg.kube_api,
                             .token_file = R.cfg.kube_token_file,
                             .ca_file = R.cfg.kube_ca_file,
                             .pod_name = R.cfg.pod_name,
                             .namespace_ = R.cfg.namespace_};
    rc = kube_create(&R.loop, R.hc, &kc, &R.kube, err, errlen);
    if (rc < 0) {
        if (need) return rc;
        log_info("Kubernetes Events off: %s", err);
        return 0;
    }
    struct kube_counters counters = {.response = metrics_api_response,
                                     .event_suppressed = metrics_event_suppressed};
    kube_set_counters(R.kube, &counters);
    metrics_api_enabled();
    if (R.cfg.events && kev_create(R.kube, &R.kev) < 0) ra_oom();
    if (rollout_create(&R.loop, R.kube, R.kev, &R.ro) < 0) ra_oom();
    engine_set_kube(R.eng, R.kube, R.ro, R.kev);
    if (R.cfg.fast_sync) {
        struct fastsync_opts fo = {.objects = (const char *const *)R.cfg.fast_sync_objects.v,
                                   .nobjects = R.cfg.fast_sync_objects.n,
                                   .confirm_ms = ra_ms_of_ns(R.cfg.fast_sync_confirm_ns)};
        if ((rc = fastsync_start(R.kube, &fo, &R.fs, err, errlen)) < 0) return rc;
        metrics_fast_sync_enabled();
    }
    return 0;
}

/* The stage gate: with the client; without one only when asked for
 * (it then says it acts alone), not for the default of restart. */
static int start_stage(char *err, size_t errlen)
{
    if (!staged(&R.cfg) || (!R.kube && R.cfg.stage_default)) return 0;
    struct stage_opts so = {.count = R.cfg.stage_count,
                            .percent = R.cfg.stage_percent,
                            .is_default = R.cfg.stage_default,
                            .workload = R.cfg.stage_workload,
                            .ttl_ms = ra_ms_of_ns(R.cfg.stage_ttl_ns)};
    int rc = stage_create(&R.loop, R.kube, R.kev, &so, &R.stage, err, errlen);
    if (rc == 0) engine_set_stage(R.eng, R.stage);
    return rc;
}

static void on_annot_event(void *ud, size_t root, enum watch_why why);

/* The agent is ready: the baseline is taken and (with --keep-last-good)
 * the copies the app reads hold validated content. Once. */
static void mark_ready(void)
{
    char err[512];
    if (R.ready || R.stopping) return;
    start_reconcile();
    struct log_rec r;
    R.ready = 1;
    if (R.cfg.state_dir && *R.cfg.state_dir &&
        safestate_set_ready(R.cfg.state_dir, 1, err, sizeof err) < 0)
        log_warn("%s; `reload-agent ready` will not see this agent ready", err);
    if (log_rec_begin(&r, RA_LOG_INFO, "ready")) {
        log_rec_str(&r, "action", cfg_action_name(R.cfg.action));
        if (R.srv) log_rec_int(&r, "port", httpd_port(R.srv));
        log_rec_end(&r, "watching %zu roots", R.mon ? monitor_root_count(R.mon) : 0);
    }
}

/* The engine filled the --keep-last-good copies. */
static void on_engine_ready(void *ud)
{
    (void)ud;
    if (R.baseline_seen) mark_ready();
}

/* The monitor's baseline is taken (at start, or after a --watch change):
 * the engine starts from it; the first one makes the agent ready, unless
 * the engine still fills the copies the app reads. */
static void on_baseline(void *ud, const struct hash_manifest *base)
{
    (void)ud;
    if (R.eng) engine_start(R.eng, base);
    R.baseline_seen = 1;
    if (!R.eng || engine_is_ready(R.eng)) mark_ready();
}

static int start_monitor(void)
{
    struct monitor_extra extra[2];
    size_t nextra = 0;
    if (R.annot_path) extra[nextra++] = (struct monitor_extra){R.annot_path, on_annot_event, NULL};
    if (R.kube)
        extra[nextra++] = (struct monitor_extra){kube_token_path(R.kube), on_token_event, NULL};
    /* The monitor classifies files on its hashing thread with a copy of the
     * configuration's one path -> action value (ignored files, the
     * rollout-class files of the rollout hash); the --env-watch roots are
     * watched beside the --watch roots. */
    size_t nroots;
    const char **roots = cfg_watch_roots(&R.cfg, &nroots);
    struct monitor_opts o = {
        .extra = extra,
        .nextra = nextra,
        .rules = &R.cfg.path_rules,
        .baseline = on_baseline,
        .roots = roots,
        .nroots = nroots,
        .debounce_ns = R.cfg.debounce_ns,
        .debounce_swaps = R.cfg.debounce_swaps,
        .resync_ns = R.cfg.resync_ns,
    };
    int rc = monitor_start(&R.loop, &o, on_change, NULL, &R.mon);
    free(roots);
    if (rc < 0) {
        R.mon = NULL;
        log_error("cannot start watching: %s", uv_strerror(rc));
        return rc;
    }
    return 0;
}

static void on_old_monitor_closed(void *ud)
{
    (void)ud;
    if (!R.stopping && start_monitor() < 0) uv_stop(&R.loop);
}

/* Applies a new valid configuration built from a live annotations update. */
static void apply_config(struct config *next)
{
    int rewatch = !cfg_is_same_watch(&R.cfg, next) ||
                  R.cfg.ignore.n != next->ignore.n; /* ignore set changes the hash */
    for (size_t i = 0; !rewatch && i < next->ignore.n; i++)
        rewatch = strcmp(R.cfg.ignore.v[i], next->ignore.v[i]) != 0;
    char names[256];
    if (cfg_restart_only_changed(&R.boot, &R.cfg, next, names, sizeof names) > 0)
        log_warn("%s changed: read once at start, the new value takes effect when the agent "
                 "restarts",
                 names);
    int64_t slice_was = R.cfg.sched_slice_ns;
    int same = cfg_is_same(&R.cfg, next); /* e.g. only fast sync's nudge annotation changed */
    cfg_free(&R.cfg);
    R.cfg = *next;
    apply_logging(&R.cfg);
    apply_sched(slice_was, &R.cfg);
    struct log_rec r;
    if (log_rec_begin(&r, same ? RA_LOG_DEBUG : RA_LOG_INFO, "config")) {
        log_rec_str(&r, "action", cfg_action_name(R.cfg.action));
        log_rec_bool(&r, "rewatch", rewatch);
        log_rec_end(&r, "configuration updated from %s", R.annot_path);
    }
    if (rewatch) {
        struct monitor *old = R.mon;
        R.mon = NULL;
        monitor_close(old, on_old_monitor_closed, NULL);
    } else if (R.mon) {
        monitor_set_timing(R.mon, R.cfg.debounce_ns, R.cfg.resync_ns);
        monitor_set_debounce_swaps(R.mon, R.cfg.debounce_swaps);
        monitor_set_rules(R.mon, &R.cfg.path_rules);
    }
    engine_config_changed(R.eng);
}

static void reload_annotations(uv_timer_t *t)
{
    (void)t;
    struct cfg_layer annots;
    struct config next;
    char err[1024];
    int rc = load_annotations(&annots, err, sizeof err);
    struct cfg_env env = {.kube = R.ro ? CFG_KUBE_READY : CFG_KUBE_NONE};
    if (rc == 0) rc = cfg_build_env(&R.flags, &annots, &env, &next, err, sizeof err);
    if (rc == 0 && next.watch.n + next.env_watch.n == 0) {
        snprintf(err, sizeof err,
                 "no --watch or --env-watch roots left after the annotations update");
        cfg_free(&next);
        rc = -EINVAL;
    }
    cfg_layer_free(&annots);
    if (rc < 0) {
        struct log_rec r;
        metrics_config_error();
        snprintf(R.last_config_error, sizeof R.last_config_error, "%s", err);
        if (log_rec_begin(&r, RA_LOG_ERROR, "config-error")) {
            log_rec_str(&r, "error", err);
            log_rec_end(&r,
                        "rejected the annotations update, keeping the last good "
                        "configuration: %s",
                        err);
        }
        return;
    }
    R.last_config_error[0] = '\0';
    apply_config(&next);
}

static void on_annot_event(void *ud, size_t root, enum watch_why why)
{
    (void)ud;
    (void)root;
    (void)why;
    uv_timer_start(&R.annot_timer, reload_annotations, ANNOT_DEBOUNCE_MS, 0);
}

static void on_closed_noop(uv_handle_t *h) { (void)h; }

/* The stage gate is gone: the client and Events go next (kube_destroy
 * cancels the requests still pending, whose replies the rollout and the
 * gate already ignore). */
static void on_stage_closed(void *ud)
{
    (void)ud;
    if (R.kev) kev_destroy(R.kev);
    R.kev = NULL;
    if (R.kube) kube_destroy(R.kube);
    R.kube = NULL;
    if (R.hc) httpc_close(R.hc, NULL, NULL);
    R.hc = NULL;
}

/* --notify-url or --notify-url-file: the notifier, given to the engine. */
static int start_notify(void)
{
    const struct config *c = &R.cfg;
    if (!(c->notify_url && *c->notify_url) && !(c->notify_url_file && *c->notify_url_file))
        return 0;
    struct notify_opts o = {.url = c->notify_url,
                            .url_file = c->notify_url_file,
                            .format = (enum notify_format)c->notify_format,
                            .timeout_ms = ra_ms_of_ns(c->notify_timeout_ns),
                            .queue_max = (size_t)c->notify_queue,
                            .ca_file = c->notify_ca_file};
    int rc = notify_create(&R.loop, &o, &R.notify);
    if (rc < 0) {
        log_error("cannot start notifications: %s", uv_strerror(rc));
        return rc;
    }
    engine_set_notify(R.eng, R.notify);
    return 0;
}

/* The rollout is gone: the stage gate next (it may still be reading the
 * owner chain: its requests end with the client, right after it). */
static void on_rollout_closed(void *ud)
{
    (void)ud;
    struct stage *s = R.stage;
    R.stage = NULL;
    if (s)
        stage_close(s, on_stage_closed, NULL);
    else
        on_stage_closed(NULL);
}

static void on_engine_closed(void *ud)
{
    (void)ud;
    R.eng = NULL;
    /* the last action's notification is still sent, within --notify-timeout */
    if (R.notify) notify_close(R.notify, NULL, NULL);
    R.notify = NULL;
    struct rollout *ro = R.ro;
    R.ro = NULL;
    if (ro)
        rollout_close(ro, on_rollout_closed, NULL);
    else
        on_rollout_closed(NULL);
}

static void shutdown_all(void)
{
    if (R.stopping) return;
    R.stopping = 1;
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "shutdown")) log_rec_end(&r, "stopping");
    uv_close((uv_handle_t *)&R.annot_timer, on_closed_noop);
    if (R.fs) fastsync_close(R.fs, NULL, NULL); /* before the client goes */
    R.fs = NULL;
    if (R.srv) httpd_close(R.srv, NULL, NULL);
    R.srv = NULL;
    if (R.mon) monitor_close(R.mon, NULL, NULL);
    R.mon = NULL;
    /* An action in flight finishes or times out, then the client closes. */
    if (R.eng)
        engine_close(R.eng, on_engine_closed, NULL);
    else
        on_engine_closed(NULL);
    uv_close((uv_handle_t *)&R.sigterm, on_closed_noop);
    uv_close((uv_handle_t *)&R.sigint, on_closed_noop);
    uv_close((uv_handle_t *)&R.sighup, on_closed_noop);
}

static void on_signal(uv_signal_t *s, int signum)
{
    if (signum == SIGHUP) {
        log_info("SIGHUP: rehashing now");
        if (R.mon) monitor_kick(R.mon);
        return;
    }
    (void)s;
    shutdown_all();
}

/* The restart-pod action asks to exit with its code: the kubelet restarts
 * every container of the pod on it. */
static void on_exit_request(void *ud, int code)
{
    (void)ud;
    /* the turn of the stage stays with the pod: its next agent ends it */
    if (R.stage) stage_keep_turn(R.stage);
    R.exit_status = code;
    shutdown_all();
}

static int fatal_config(const char *err)
{
    fprintf(stderr, "reload-agent: %s\n", err);
    return 2;
}

/* The configuration at start: the annotations file (if any) over the
 * flags. Returns 0 to run; else the exit status: 0 after --print-config, 2
 * for an invalid configuration (printed). */
static int load_config(void)
{
    char err[1024];
    struct cfg_layer annots;
    const char *ap = cfg_layer_get(&R.flags, "annotations");
    if (ap && *ap)
        R.annot_path = ra_strdup(ap);
    else if (!ap && access(CFG_DEFAULT_ANNOTATIONS_FILE, F_OK) == 0)
        R.annot_path = ra_strdup(CFG_DEFAULT_ANNOTATIONS_FILE);

    int rc = load_annotations(&annots, err, sizeof err);
    if (rc == 0) rc = cfg_build(&R.flags, &annots, &R.cfg, err, sizeof err);
    if (rc == 0 && R.cfg.print_config) {
        cfg_print(stdout, &R.cfg, &R.flags, &annots);
        cfg_layer_free(&annots);
        cfg_free(&R.cfg);
        return -1;
    }
    cfg_layer_free(&annots);
    if (rc == 0 && R.cfg.watch.n + R.cfg.env_watch.n == 0) {
        snprintf(err, sizeof err,
                 "nothing to watch: give at least one --watch PATH (or --env-watch PATH)");
        cfg_free(&R.cfg);
        rc = -EINVAL;
    }
    if (rc < 0) return fatal_config(err);
    return 0;
}

/* Opens the loop and starts everything in init order; on a failure what
 * was started is shut down (the loop then runs it out). Returns 0 or the
 * exit status. */
static int start_all(void)
{
    char err[1024];
    int rc;
    signal(SIGPIPE, SIG_IGN);
    if ((rc = uv_loop_init(&R.loop)) < 0) {
        log_error("cannot initialise the loop: %s", uv_strerror(rc));
        return -1;
    }
    /* a ready marker is this agent's to write (one left by an agent that
     * ran before in the pod says nothing about this one) */
    if (R.cfg.state_dir && *R.cfg.state_dir &&
        safestate_set_ready(R.cfg.state_dir, 0, err, sizeof err) < 0)
        log_warn("%s", err);
    uv_timer_init(&R.loop, &R.annot_timer);
    uv_signal_init(&R.loop, &R.sigterm);
    uv_signal_init(&R.loop, &R.sigint);
    uv_signal_init(&R.loop, &R.sighup);
    uv_signal_start(&R.sigterm, on_signal, SIGTERM);
    uv_signal_start(&R.sigint, on_signal, SIGINT);
    uv_signal_start(&R.sighup, on_signal, SIGHUP);

    R.ep.mon = &R.mon;
    R.ep.eng = &R.eng;
    R.ep.ready = &R.ready;
    R.ep.last_config_error = R.last_config_error;
    R.ep.fs = &R.fs;
    R.ep.stage = &R.stage;
    if ((rc = engine_create(&R.loop, &R.cfg, &R.eng)) < 0) {
        log_error("cannot initialise: %s", uv_strerror(rc));
        rc = 1;
    } else if (R.cfg.listen && *R.cfg.listen &&
               (rc = httpd_start(&R.loop, R.cfg.listen, endpoints_handle, &R.ep, &R.srv)) < 0) {
        log_error("cannot listen on %s: %s", R.cfg.listen, uv_strerror(rc));
        rc = 1;
    } else if ((rc = start_kube(err, sizeof err)) < 0) {
        fprintf(stderr, "reload-agent: %s needs the Kubernetes API: %s\n",
                R.cfg.fast_sync && !uses_rollout(&R.cfg) ? "--fast-sync" : "the rollout action",
                err);
        rc = 2;
    } else if ((rc = start_stage(err, sizeof err)) < 0) {
        fprintf(stderr, "reload-agent: %s\n", err);
        rc = 2;
    } else if (start_notify() < 0) {
        rc = 1;
    } else {
        engine_set_exit(R.eng, on_exit_request, NULL);
        engine_set_ready_cb(R.eng, on_engine_ready, NULL);
        char hash[HASH_HEX_LEN + 1];
        /* after a restart-pod, every container started on the content: the
         * stage turn the previous agent kept ends here */
        if (statedir_restart_report(R.cfg.state_dir, R.cfg.pod_name, R.kev,
                                    R.kube ? kube_pod_name(R.kube) : NULL,
                                    R.kube ? kube_namespace(R.kube) : NULL, hash, sizeof hash)) {
            engine_pod_restarted(R.eng);
            if (R.stage) stage_release(R.stage, hash, 1, "");
        }
        if (start_monitor() < 0) rc = 1;
    }
    if (rc != 0) {
        shutdown_all();
        return rc;
    }
    injectnote_report(R.annot_path ? &R.annots : NULL, R.kev, R.kube ? kube_pod_name(R.kube) : NULL,
                      R.kube ? kube_namespace(R.kube) : NULL);
    return 0;
}

int run_main(struct cfg_layer *flags)
{
    memset(&R, 0, sizeof R);
    R.flags = *flags; /* taken */
    int rc = load_config();
    if (rc != 0) {
        annot_free(&R.annots);
        cfg_layer_free(&R.flags);
        free(R.annot_path);
        return rc < 0 ? 0 : rc;
    }
    cfg_dup(&R.cfg, &R.boot);
    apply_logging(&R.cfg);
    apply_sched(-1, &R.cfg);
    rc = start_all();
    if (rc >= 0) {
        /* "ready" is logged when the monitor's baseline is taken (on_baseline). */
        uv_run(&R.loop, UV_RUN_DEFAULT);
        int lc = uv_loop_close(&R.loop);
        if (lc != 0) {
            log_error("internal error: handles left open at exit (%s)", uv_strerror(lc));
            rc = 1;
        } else if (R.exit_status) {
            rc = R.exit_status;
        }
    }
    annot_free(&R.annots);
    cfg_free(&R.cfg);
    cfg_free(&R.boot);
    cfg_layer_free(&R.flags);
    free(R.annot_path);
    return rc < 0 ? 1 : rc;
}
