/*
 * monitor.c - debounce, resync and hash evaluation over the watch roots
 * (see monitor.h).
 *
 * Where the hash runs: a tree whose last manifest was small (at most
 * INLINE_MAX_FILES files and INLINE_MAX_BYTES bytes) is hashed inline on the
 * loop thread, with a budget checked per file before it is read (a stat of
 * its logical path); crossing it abandons the inline attempt and the tree
 * is hashed by a job on a thread of its own, like every tree that was large
 * last time and the first hash (the baseline, size unknown). One hash at a
 * time: while a job runs, the hash cache is the job's, cache invalidations
 * are queued, and an evaluation that falls due is held until the job ends.
 * A job's result comes back through a uv_async_t; its warnings are logged
 * there, on the loop thread. A hint (watch event) during a job makes its
 * result stale: it is dropped and the tree is hashed again.
 *
 * When: a hint (re)arms the debounce, except for the kubelet's ..data swap,
 * AtomicWriter's commit point: when every hint since the last evaluation
 * came from a swap (or from a later event on a root that swapped: the
 * swap's own link changes) and every swapped root shows the committed
 * content (watch/awlayout.h), the evaluation comes MONITOR_SWAP_QUIET_MS
 * after the last event, at most MONITOR_SWAP_CAP_MS after the first swap
 * (the other volumes of the same kubelet sync fold in), not debounce_ns
 * (a debounce shorter than the quiet period is kept).
 */
#include "run/monitor.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "actions/action.h"
#include "run/metrics.h"
#include "base/backoff.h"
#include "base/log.h"
#include "base/permhint.h"
#include "watch/awlayout.h"
#include "watch/watch.h"

#define RETRY_MIN_MS 500
#define RETRY_MAX_MS 30000

/* Hash inline (on the loop thread) only when the last manifest, and this
 * one as far as the per-file budget sees, stay within both: about 1 ms of
 * SHA-256 and walking on this class of machine. */
#define INLINE_MAX_FILES 256
#define INLINE_MAX_BYTES (1024 * 1024)
/* Jobs dropped in a row because the content changed while they ran, before
 * the monitor reports the content as unstable and backs off. */
#define MAX_STALE_RUNS 5
/* While some directory could not be watched, try again this often. */
#define REARM_MS 2000

struct warn_rec {
    enum hash_warning w;
    char *path;
};

/* One hash computation: inline (on the stack, borrowing the monitor's
 * data) or on a worker thread (heap, owning copies). */
struct job {
    pthread_mutex_t mu; /* done and abandoned (worker jobs) */
    int done, abandoned;
    atomic_int cancel; /* set: select leaves every remaining file out */
    uv_async_t *async; /* the monitor's; sent when done unless abandoned */
    const char **roots;
    size_t nroots;
    /* What classifies files: the monitor's (inline) or a copy the job owns
     * (worker), so the worker thread never reads the monitor or the
     * caller's configuration. */
    const struct path_rules *rules;
    struct path_rules rules_copy; /* worker jobs: what rules points to */
    struct hash_cache *cache;
    int owns;       /* roots and rules are copies owned by the job */
    int owns_cache; /* abandoned: the worker frees the cache too */
    int inline_;    /* hashing inline: stop if the budget is crossed */
    int check;      /* stat each file against the budget (see evaluate) */
    uint64_t files, bytes;
    int over; /* the budget was crossed: result incomplete */
    int rc;
    struct hash_manifest out;
    struct hash_error err;
    struct warn_rec *warns;
    size_t nwarns;
};

struct monitor {
    uv_loop_t *loop;
    struct watch *w;
    uv_timer_t debounce;
    uv_timer_t resync;
    uv_timer_t rearm;
    uv_async_t job_done;
    int open_handles;
    char **roots;
    size_t nroots;
    unsigned char *seen; /* root existed at some point */
    struct path_rules rules;
    uint64_t debounce_ms, resync_ms;
    uint64_t burst_start;            /* uv_now of the first hint of the pending burst */
    int pending;                     /* debounce timer armed */
    int overflowed;                  /* an overflow is pending evaluation */
    uint64_t retry_ms;               /* current hash-error backoff, 0 = none */
    uint64_t hold_until;             /* content unstable: no evaluation before this uv_now */
    int retry_n;                     /* hash errors in a row */
    uint64_t err_key, err_logged_at; /* the hash error last logged at error level, when */
    struct hash_manifest cur;
    int have_base;            /* cur is a baseline (or later) taken from the content */
    struct hash_cache *cache; /* resolved roots and listings, kept between evaluations */
    struct job *job;          /* worker job in flight, or NULL */
    int stale;                /* a hint arrived while the job ran */
    int again;                /* an evaluation fell due while the job ran */
    int stale_runs;           /* jobs dropped in a row as stale */
    unsigned char *forget;    /* listings to forget once the job is done, per root */
    int forget_all;
    int swaps, others; /* hints since the last evaluation: ..data swaps, the rest */
    /* The swap path: a root's ..data swapped since the last evaluation;
     * a hint that is no swap's since then; the swap path's timer is armed,
     * since when; the path is off (--debounce-swaps). */
    unsigned char *swapped;
    int slow, fast;
    uint64_t fast_start;
    int debounce_swaps;
    int sized; /* last_files/last_bytes describe a finished hash */
    uint64_t last_files, last_bytes;
    size_t unwatched;
    uint64_t changes;
    monitor_change_cb cb;
    monitor_baseline_cb base_cb;
    void *ud;
    void (*done)(void *);
    void *done_ud;
};

static void *need(void *p)
{
    if (!p) ra_oom();
    return p;
}

/* hash_opts.select; runs on the thread that hashes: the one path -> action
 * decision (config/rules.h) on the job's rules. */
static unsigned select_file(void *ud, const char *path)
{
    struct job *j = ud;
    if (atomic_load(&j->cancel)) return 0;
    int a = path_rules_action(j->rules, path);
    if (a == PATH_RULES_IGNORED) return 0;
    if (j->inline_ && j->check) {
        struct stat st;
        j->files++;
        if (stat(path, &st) == 0) j->bytes += (uint64_t)st.st_size;
        if (j->files > INLINE_MAX_FILES || j->bytes > INLINE_MAX_BYTES) {
            j->over = 1;
            atomic_store(&j->cancel, 1);
            return 0;
        }
    }
    return HASH_CLASS_MAIN | (a == ACTION_ROLLOUT ? HASH_CLASS_SUB : 0);
}

/* hash_opts.warn; runs on the thread that hashes: collected, logged later
 * on the loop thread (the logger is not thread-safe). */
static void collect_warning(void *ud, enum hash_warning w, const char *path)
{
    struct job *j = ud;
    struct warn_rec *v = realloc(j->warns, (j->nwarns + 1) * sizeof *v);
    char *p = strdup(path);
    if (!v || !p) { /* a debug line lost to memory pressure; the hash goes on */
        if (v) j->warns = v;
        free(p);
        return;
    }
    j->warns = v;
    j->warns[j->nwarns++] = (struct warn_rec){w, p};
}

static void log_warnings(const struct job *j)
{
    static const char *const why[] = {"symlink escapes the watch root, not followed",
                                      "symlink loop or directory cycle, not followed",
                                      "dangling symlink, skipped", "not a regular file, skipped"};
    for (size_t i = 0; i < j->nwarns; i++)
        log_debug("%s: %s", j->warns[i].path,
                  (size_t)j->warns[i].w < sizeof why / sizeof why[0] ? why[j->warns[i].w]
                                                                     : "skipped");
}

static void job_clear_result(struct job *j)
{
    hash_manifest_free(&j->out);
    for (size_t i = 0; i < j->nwarns; i++) free(j->warns[i].path);
    free(j->warns);
    j->warns = NULL;
    j->nwarns = 0;
}

/* Runs hash_compute for the job, on whichever thread calls it. */
static void job_run(struct job *j)
{
    struct hash_opts o = {
        .select = select_file, .warn = collect_warning, .ud = j, .cache = j->cache};
    j->rc = hash_compute(j->roots, j->nroots, &o, &j->out, &j->err);
}

static void job_free(struct job *j)
{
    job_clear_result(j);
    if (j->owns) {
        for (size_t i = 0; i < j->nroots; i++) free((char *)j->roots[i]);
        path_rules_free(&j->rules_copy);
    }
    free(j->roots);
    if (j->owns_cache) {
        hash_cache_free(j->cache);
        free(j->cache);
    }
    pthread_mutex_destroy(&j->mu);
    free(j);
}

static void *job_thread(void *arg)
{
    struct job *j = arg;
    job_run(j);
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    int abandoned = j->abandoned;
    if (!abandoned) uv_async_send(j->async); /* the loop frees j after this */
    pthread_mutex_unlock(&j->mu);
    if (abandoned) job_free(j);
    return NULL;
}

static void on_debounce(uv_timer_t *t);

/* A failed (or unstable) hash: retry with backoff. hold: the content keeps
 * changing, so hints do not bring the retry forward either. */
static void hash_failed(struct monitor *m, int hold)
{
    static const struct backoff policy = {RETRY_MIN_MS, RETRY_MAX_MS, BACKOFF_JITTER_NONE};
    m->retry_ms = backoff_next(&policy, ++m->retry_n, NULL);
    m->pending = 1;
    uv_timer_start(&m->debounce, on_debounce, m->retry_ms, 0);
    m->hold_until = hold ? uv_now(m->loop) + m->retry_ms : 0;
}

/* A hash error is logged at error level when a run of failures starts,
 * when it is another error than the last one logged so, and at most every
 * HASH_ERROR_LOG_MS while the same one repeats (at debug level between):
 * retries go on, the log does not fill with one line every 30 s. */
#define HASH_ERROR_LOG_MS (10 * 60 * 1000)

static void log_hash_error(struct monitor *m, const struct job *j)
{
    struct log_rec r;
    const char *op = j->err.op ? j->err.op : "";
    uint64_t key = 1469598103934665603ull ^ (uint64_t)(-j->rc), now = uv_now(m->loop);
    for (const char *p = j->err.path; *p; p++) key = (key ^ (unsigned char)*p) * 1099511628211ull;
    for (const char *p = op; *p; p++) key = (key ^ (unsigned char)*p) * 1099511628211ull;
    int loud = m->retry_n == 0 || key != m->err_key || now - m->err_logged_at >= HASH_ERROR_LOG_MS;
    if (loud) {
        m->err_key = key;
        m->err_logged_at = now;
    }
    char hint[512] = "";
    if (j->rc == -EACCES) ra_perm_hint(j->err.path, hint, sizeof hint);
    if (!log_rec_begin(&r, loud ? RA_LOG_ERROR : RA_LOG_DEBUG, "hash-error")) return;
    log_rec_str(&r, "path", j->err.path);
    log_rec_str(&r, "op", op);
    log_rec_str(&r, "error", hash_strerror(j->rc));
    if (*hint) log_rec_str(&r, "hint", hint);
    if (strcmp(op, "rewalk") == 0)
        log_rec_end(&r,
                    "cannot hash the watched content: %s kept changing while it was read "
                    "(%d attempts); retrying with backoff",
                    j->err.path, HASH_MAX_REWALKS + 1);
    else
        log_rec_end(&r, "cannot hash the watched content: %s %s: %s%s%s", op, j->err.path,
                    hash_strerror(j->rc), *hint ? "; " : "", hint);
}

/* A hash finished and its result is current: act on it. */
static void finish(struct monitor *m, struct job *j)
{
    struct hash_diff d = {0};
    char hex[HASH_HEX_LEN + 1];
    log_warnings(j);
    if (j->rc < 0) {
        log_hash_error(m, j);
        hash_failed(m, j->err.op && strcmp(j->err.op, "rewalk") == 0);
        return;
    }
    m->retry_ms = 0;
    m->retry_n = 0;
    m->hold_until = 0;
    m->overflowed = 0;
    m->sized = 1;
    m->last_files = j->out.n;
    m->last_bytes = 0;
    for (size_t i = 0; i < j->out.n; i++) m->last_bytes += j->out.v[i].size;
    if (!m->have_base) {
        struct log_rec r;
        hash_manifest_free(&m->cur);
        m->cur = j->out;
        memset(&j->out, 0, sizeof j->out);
        m->have_base = 1;
        hash_hex(m->cur.total, hex);
        if (log_rec_begin(&r, RA_LOG_INFO, "baseline")) {
            log_rec_str(&r, "hash", hex);
            log_rec_int(&r, "files", (long long)m->cur.n);
            log_rec_end(&r, "baseline content hash over %zu files", m->cur.n);
        }
        if (m->base_cb) m->base_cb(m->ud, &m->cur);
        return;
    }
    if (memcmp(j->out.total, m->cur.total, HASH_LEN) == 0) return;
    if (hash_diff(&m->cur, &j->out, &d) < 0) ra_oom();
    hash_hex(j->out.total, hex);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "change")) {
        log_rec_str(&r, "hash", hex);
        log_rec_strv(&r, "added", d.added, d.nadded);
        log_rec_strv(&r, "removed", d.removed, d.nremoved);
        log_rec_strv(&r, "modified", d.modified, d.nmodified);
        log_rec_end(&r, "content changed: %zu added, %zu removed, %zu modified", d.nadded,
                    d.nremoved, d.nmodified);
    }
    struct hash_manifest old = m->cur; /* the diff points into it until the callback returns */
    m->cur = j->out;
    memset(&j->out, 0, sizeof j->out);
    m->changes++;
    if (m->cb) m->cb(m->ud, &m->cur, &d);
    hash_diff_free(&d);
    hash_manifest_free(&old);
}

/* Hands the job to a thread of its own. */
static void start_job(struct monitor *m, const char *const *present, size_t np)
{
    struct job *j = need(calloc(1, sizeof *j));
    sigset_t all, old;
    pthread_attr_t attr;
    pthread_t t;
    pthread_mutex_init(&j->mu, NULL);
    j->owns = 1;
    j->roots = need(calloc(np ? np : 1, sizeof *j->roots));
    for (; j->nroots < np; j->nroots++) j->roots[j->nroots] = ra_strdup(present[j->nroots]);
    path_rules_copy(&j->rules_copy, &m->rules);
    j->rules = &j->rules_copy;
    j->cache = m->cache;
    j->async = &m->job_done;
    m->job = j;
    m->stale = 0;
    sigfillset(&all); /* signals stay with the loop thread */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, job_thread, j);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) { /* no thread: hash here, as before there were threads */
        log_warn("cannot start a hashing thread (%s): hashing on the loop thread", strerror(rc));
        m->job = NULL;
        job_run(j);
        finish(m, j);
        job_free(j);
    }
}

static void evaluate(struct monitor *m)
{
    const char *small[8], **present = small;
    size_t np = 0;
    m->pending = 0;
    m->slow = m->fast = 0;
    memset(m->swapped, 0, m->nroots);
    if (m->job) { /* one hash at a time: this one runs when the job is done */
        m->again = 1;
        return;
    }
    m->again = 0;
    for (size_t i = 0; i < m->nroots; i++)
        if (m->seen[i] && !watch_is_root_present(m->w, i)) {
            log_debug("evaluation deferred: watch root %s is missing", m->roots[i]);
            return;
        }
    if (m->nroots > sizeof small / sizeof small[0])
        present = need(malloc(m->nroots * sizeof *present));
    for (size_t i = 0; i < m->nroots; i++)
        if (watch_is_root_present(m->w, i)) present[np++] = m->roots[i];
    /* Only kubelet ..data swaps since last time: the volume holds API
     * objects (ConfigMaps and Secrets are capped at 1 MiB each), so a small
     * tree stays small and the per-file stat (a path walk through the key
     * links, about 10 us per file on a cold cache) is skipped. */
    int swaps_only = m->swaps && !m->others;
    m->swaps = m->others = 0;
    if (m->sized && m->last_files <= INLINE_MAX_FILES && m->last_bytes <= INLINE_MAX_BYTES) {
        struct job j = {.roots = present,
                        .nroots = np,
                        .rules = &m->rules,
                        .cache = m->cache,
                        .inline_ = 1,
                        .check = !swaps_only};
        job_run(&j);
        if (!j.over) {
            finish(m, &j);
            job_clear_result(&j);
            goto out;
        }
        log_debug("the watched content grew past the inline limit (%d files, %d bytes): "
                  "hashing it on a worker thread",
                  INLINE_MAX_FILES, INLINE_MAX_BYTES);
        job_clear_result(&j);
    }
    start_job(m, present, np);
out:
    if (present != small) free(present);
}

static void forget_listing(struct monitor *m, size_t root, int all)
{
    if (m->job) { /* the job owns the cache now: later */
        if (all)
            m->forget_all = 1;
        else
            m->forget[root] = 1;
        return;
    }
    hash_cache_forget_listing(m->cache, all ? NULL : m->roots[root]);
}

static void on_job_done(uv_async_t *a)
{
    struct monitor *m = a->data;
    struct job *j = m->job;
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int done = j->done;
    pthread_mutex_unlock(&j->mu);
    if (!done) return;
    m->job = NULL;
    if (m->forget_all) hash_cache_forget_listing(m->cache, NULL);
    for (size_t i = 0; i < m->nroots && !m->forget_all; i++)
        if (m->forget[i]) hash_cache_forget_listing(m->cache, m->roots[i]);
    m->forget_all = 0;
    memset(m->forget, 0, m->nroots);
    /* The hash itself gave up on a file that kept changing (bounded
     * re-walks): that is the answer, stale or not. */
    int gave_up = j->rc < 0 && j->err.op && strcmp(j->err.op, "rewalk") == 0;
    if (m->stale && !gave_up) {
        m->stale = 0;
        if (++m->stale_runs >= MAX_STALE_RUNS) {
            struct log_rec r;
            if (log_rec_begin(&r, RA_LOG_ERROR, "hash-error")) {
                log_rec_str(&r, "op", "unstable");
                log_rec_end(&r,
                            "cannot hash the watched content: it changed during each of "
                            "the last %d hashes; retrying with backoff",
                            MAX_STALE_RUNS);
            }
            m->stale_runs = 0;
            hash_failed(m, 1);
        } else {
            log_debug("the watched content changed while it was hashed: hashing it again");
        }
    } else {
        m->stale = 0;
        m->stale_runs = 0;
        finish(m, j);
    }
    job_free(j);
    if (m->again && !m->pending) evaluate(m);
}

static void on_debounce(uv_timer_t *t) { evaluate(t->data); }

static void on_resync(uv_timer_t *t)
{
    struct monitor *m = t->data;
    log_debug("resync: rehashing the watched content");
    forget_listing(m, 0, 1); /* the safety net reads everything */
    watch_rearm(m->w);
    evaluate(m);
}

static void on_rearm(uv_timer_t *t)
{
    struct monitor *m = t->data;
    watch_rearm(m->w);
}

static void on_unwatched(void *ud, size_t n)
{
    struct monitor *m = ud;
    size_t was = m->unwatched;
    m->unwatched = n;
    metrics_set_unwatched_directories((uint64_t)n);
    if (n && !uv_is_active((uv_handle_t *)&m->rearm))
        uv_timer_start(&m->rearm, on_rearm, REARM_MS, REARM_MS);
    if (!n) uv_timer_stop(&m->rearm);
    if (was && !n) {
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_INFO, "watch-rearmed"))
            log_rec_end(&r, "every directory under the watch roots is watched again");
    }
}

/* A hint arrived: (re)start the quiet period, capped from the burst start. */
static void hint(struct monitor *m)
{
    uint64_t now = uv_now(m->loop), delay = m->debounce_ms;
    if (m->job) m->stale = 1;
    if (!m->pending) {
        m->pending = 1;
        m->burst_start = now;
    } else {
        uint64_t cap = m->debounce_ms * 10 > 1000 ? m->debounce_ms * 10 : 1000;
        uint64_t deadline = m->burst_start + cap;
        if (now + delay > deadline) delay = deadline > now ? deadline - now : 0;
    }
    if (m->hold_until > now + delay) delay = m->hold_until - now;
    uv_timer_start(&m->debounce, on_debounce, delay, 0);
}

/* Every hint since the last evaluation is a swap's, and every root that
 * swapped shows its committed content. */
static int swaps_committed(const struct monitor *m)
{
    int any = 0;
    if (m->debounce_swaps || m->slow) return 0;
    for (size_t i = 0; i < m->nroots; i++) {
        if (!m->swapped[i]) continue;
        if (aw_layout_complete(m->roots[i]) != 1) return 0;
        any = 1;
    }
    return any;
}

/* A swap's hint with the content committed: evaluate after the short quiet
 * period, capped from the first swap, instead of the debounce. */
static void swap_hint(struct monitor *m)
{
    uint64_t now = uv_now(m->loop), delay = MONITOR_SWAP_QUIET_MS;
    if (m->debounce_ms < delay) { /* never later than the debounce would be */
        hint(m);
        return;
    }
    if (m->job) m->stale = 1;
    if (!m->pending) {
        m->pending = 1;
        m->burst_start = now;
    }
    if (!m->fast) {
        m->fast = 1;
        m->fast_start = now;
        log_debug("kubelet ..data swap committed: evaluating without the debounce");
    }
    uint64_t deadline = m->fast_start + MONITOR_SWAP_CAP_MS;
    if (now + delay > deadline) delay = deadline > now ? deadline - now : 0;
    if (m->hold_until > now + delay) delay = m->hold_until - now;
    uv_timer_start(&m->debounce, on_debounce, delay, 0);
}

static void log_root(const char *event, enum log_level lvl, const char *root, const char *msg)
{
    struct log_rec r;
    if (log_rec_begin(&r, lvl, event)) {
        log_rec_str(&r, "root", root);
        log_rec_end(&r, "watch root %s %s", root, msg);
    }
}

static void on_watch(void *ud, size_t root, enum watch_why why)
{
    struct monitor *m = ud;
    /* anything but a ..data swap may have changed the root's top level */
    if (why != WATCH_DATA_LINK) forget_listing(m, root, 0);
    if (why == WATCH_DATA_LINK) {
        m->swaps++;
        m->swapped[root] = 1;
    } else {
        m->others++;
        if (why != WATCH_EVENT || !m->swapped[root]) m->slow = 1;
    }
    switch (why) {
    case WATCH_EVENT:
    case WATCH_DATA_LINK: break;
    case WATCH_OVERFLOW:
        if (!m->overflowed) {
            struct log_rec r;
            m->overflowed = 1;
            if (log_rec_begin(&r, RA_LOG_WARN, "overflow"))
                log_rec_end(&r, "inotify queue overflowed: rescanning everything");
        }
        break;
    case WATCH_ROOT_GONE:
        if (m->job) m->stale = 1;
        log_root("root-gone", RA_LOG_WARN, m->roots[root],
                 "disappeared; waiting for it (no action while it is missing)");
        return;
    case WATCH_ROOT_BACK:
        m->seen[root] = 1;
        log_root("root-back", RA_LOG_INFO, m->roots[root], "is present again");
        break;
    }
    if (swaps_committed(m))
        swap_hint(m);
    else
        hint(m);
}

/* The per-root arrays and the root copies; -ENOMEM leaves what it made for
 * monitor_start's fail path. */
static int alloc_roots(struct monitor *m, const struct monitor_opts *o)
{
    m->roots = calloc(o->nroots + 1, sizeof *m->roots);
    m->seen = calloc(o->nroots + 1, 1);
    m->swapped = calloc(o->nroots + 1, 1);
    m->forget = calloc(o->nroots + 1, 1);
    m->cache = calloc(1, sizeof *m->cache);
    if (!m->roots || !m->seen || !m->swapped || !m->forget || !m->cache) return -ENOMEM;
    for (size_t i = 0; i < o->nroots; i++, m->nroots++)
        if (!(m->roots[i] = strdup(o->roots[i]))) return -ENOMEM;
    return 0;
}

int monitor_start(uv_loop_t *loop, const struct monitor_opts *o, monitor_change_cb cb, void *ud,
                  struct monitor **out)
{
    struct monitor *m = calloc(1, sizeof *m);
    int rc = -ENOMEM;
    if (!m) return -ENOMEM;
    m->loop = loop;
    m->cb = cb;
    m->base_cb = o->baseline;
    m->ud = ud;
    m->debounce_ms = ra_ms_of_ns(o->debounce_ns);
    m->resync_ms = ra_ms_of_ns(o->resync_ns);
    m->debounce_swaps = o->debounce_swaps;
    if (alloc_roots(m, o) < 0) goto fail;
    if (o->rules) path_rules_copy(&m->rules, o->rules);
    hash_empty(m->cur.total);
    metrics_set_unwatched_directories(0);
    if ((rc = watch_create(loop, &m->w)) < 0) goto fail;
    watch_set_unwatched_cb(m->w, on_unwatched, m);
    watch_set_counter(m->w, metrics_watch_events, NULL);
    uv_timer_init(loop, &m->debounce);
    uv_timer_init(loop, &m->resync);
    uv_timer_init(loop, &m->rearm);
    uv_async_init(loop, &m->job_done, on_job_done);
    m->debounce.data = m->resync.data = m->rearm.data = m->job_done.data = m;
    m->open_handles = 4;
    for (size_t i = 0; i < m->nroots; i++) {
        size_t idx;
        if ((rc = watch_add(m->w, m->roots[i], on_watch, m, &idx)) < 0) {
            log_error("cannot watch %s: %s%s", m->roots[i], strerror(-rc),
                      rc == -ENOSPC ? " (the inotify watch limit fs.inotify.max_user_watches "
                                      "is reached: raise it with sysctl)"
                                    : "");
            goto fail_watch;
        }
        m->seen[i] = (unsigned char)watch_is_root_present(m->w, i);
        if (!m->seen[i] && watch_root_wait_reason(m->w, i) == -ELOOP)
            log_root("waiting", RA_LOG_WARN, m->roots[i],
                     "is a symlink loop (ELOOP); waiting for its links to be fixed (left out "
                     "of the hash until then)");
        else if (!m->seen[i])
            log_root("waiting", RA_LOG_WARN, m->roots[i],
                     "does not exist yet; waiting for it (left out of the hash until then)");
    }
    for (size_t i = 0; i < o->nextra; i++) {
        size_t idx;
        if ((rc = watch_add(m->w, o->extra[i].path, o->extra[i].cb, o->extra[i].ud, &idx)) < 0) {
            log_error("cannot watch %s: %s", o->extra[i].path, strerror(-rc));
            goto fail_watch;
        }
    }
    /* The baseline: the first evaluation, off the loop (its size is unknown). */
    m->pending = 1;
    uv_timer_start(&m->debounce, on_debounce, 0, 0);
    if (m->resync_ms) uv_timer_start(&m->resync, on_resync, m->resync_ms, m->resync_ms);
    *out = m;
    return 0;
fail_watch:
    /* handles are open: close like monitor_close, without done */
    watch_set_unwatched_cb(m->w, NULL, NULL);
    monitor_close(m, NULL, NULL);
    return rc;
fail:
    for (size_t i = 0; i < m->nroots; i++) free(m->roots[i]);
    free(m->roots);
    free(m->seen);
    free(m->swapped);
    free(m->forget);
    free(m->cache);
    path_rules_free(&m->rules);
    free(m);
    return rc;
}

const struct hash_manifest *monitor_current(const struct monitor *m) { return &m->cur; }

void monitor_set_timing(struct monitor *m, int64_t debounce_ns, int64_t resync_ns)
{
    m->debounce_ms = ra_ms_of_ns(debounce_ns);
    uint64_t rs = ra_ms_of_ns(resync_ns);
    if (rs != m->resync_ms) {
        m->resync_ms = rs;
        uv_timer_stop(&m->resync);
        if (rs) uv_timer_start(&m->resync, on_resync, rs, rs);
    }
}

void monitor_set_debounce_swaps(struct monitor *m, int on) { m->debounce_swaps = on; }

void monitor_set_rules(struct monitor *m, const struct path_rules *rules)
{
    path_rules_free(&m->rules);
    path_rules_copy(&m->rules, rules);
}

void monitor_kick(struct monitor *m)
{
    m->pending = 1;
    uv_timer_start(&m->debounce, on_debounce, 0, 0);
}

uint64_t monitor_changes(const struct monitor *m) { return m->changes; }
size_t monitor_root_count(const struct monitor *m) { return m->nroots; }
const char *monitor_root(const struct monitor *m, size_t i) { return m->roots[i]; }
int monitor_is_root_present(const struct monitor *m, size_t i)
{
    return watch_is_root_present(m->w, i);
}
size_t monitor_unwatched(const struct monitor *m) { return m->unwatched; }
int monitor_has_baseline(const struct monitor *m) { return m->have_base; }
int monitor_hashing(const struct monitor *m) { return m->job != NULL; }
int monitor_is_ready(const struct monitor *m) { return m->have_base && m->unwatched == 0; }

static void maybe_free(struct monitor *m)
{
    if (m->open_handles > 0) return;
    void (*done)(void *) = m->done;
    void *dud = m->done_ud;
    for (size_t i = 0; i < m->nroots; i++) free(m->roots[i]);
    free(m->roots);
    free(m->seen);
    free(m->swapped);
    free(m->forget);
    path_rules_free(&m->rules);
    hash_manifest_free(&m->cur);
    if (m->cache) hash_cache_free(m->cache);
    free(m->cache);
    free(m);
    if (done) done(dud);
}

static void on_closed(uv_handle_t *h)
{
    struct monitor *m = h->data;
    m->open_handles--;
    maybe_free(m);
}

static void on_watch_closed(void *ud)
{
    struct monitor *m = ud;
    m->open_handles--;
    maybe_free(m);
}

/* Stops waiting for the job: its result is dropped. A job still running
 * stops at its next file and frees itself (and the cache, which it is
 * using) on its own thread. */
static void abandon_job(struct monitor *m)
{
    struct job *j = m->job;
    m->job = NULL;
    pthread_mutex_lock(&j->mu);
    j->abandoned = 1;
    atomic_store(&j->cancel, 1);
    int done = j->done;
    if (!done) {
        j->owns_cache = 1;
        m->cache = NULL;
    }
    pthread_mutex_unlock(&j->mu);
    log_debug("%s",
              done ? "dropping the result of a finished hash" : "abandoning the hash in progress");
    if (done) job_free(j);
}

void monitor_close(struct monitor *m, void (*done)(void *), void *ud)
{
    m->done = done;
    m->done_ud = ud;
    if (m->job) abandon_job(m);
    m->open_handles++; /* the watch */
    watch_close(m->w, on_watch_closed, m);
    uv_close((uv_handle_t *)&m->debounce, on_closed);
    uv_close((uv_handle_t *)&m->resync, on_closed);
    uv_close((uv_handle_t *)&m->rearm, on_closed);
    uv_close((uv_handle_t *)&m->job_done, on_closed);
}
