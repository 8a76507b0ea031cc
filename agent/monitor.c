/*
 * monitor.c - debounce, resync and hash evaluation over the watch roots
 * (see monitor.h).
 */
#include "agent/monitor.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/log.h"
#include "watch/watch.h"

#define RETRY_MIN_MS 500
#define RETRY_MAX_MS 30000

struct monitor {
    uv_loop_t *loop;
    struct watch *w;
    uv_timer_t debounce;
    uv_timer_t resync;
    int open_handles;
    char **roots;
    size_t nroots;
    unsigned char *seen; /* root existed at some point */
    char **ignore;
    size_t nignore;
    int (*is_sub)(void *, const char *);
    void *sub_ud;
    uint64_t debounce_ms, resync_ms;
    uint64_t burst_start; /* uv_now of the first hint of the pending burst */
    int pending;          /* debounce timer armed */
    int overflowed;       /* an overflow is pending evaluation */
    uint64_t retry_ms;    /* current hash-error backoff, 0 = none */
    int retry_n;          /* hash errors in a row */
    struct hash_manifest cur;
    struct hash_cache roots_real; /* resolved roots, kept between evaluations */
    uint64_t changes;
    monitor_change_cb cb;
    void *ud;
    void (*done)(void *);
    void *done_ud;
};

static unsigned select_file(void *ud, const char *path)
{
    struct monitor *m = ud;
    for (size_t i = 0; i < m->nignore; i++)
        if (fnmatch(m->ignore[i], path, 0) == 0) return 0;
    unsigned c = HASH_CLASS_MAIN;
    if (m->is_sub && m->is_sub(m->sub_ud, path)) c |= HASH_CLASS_SUB;
    return c;
}

static void hash_warned(void *ud, enum hash_warning w, const char *path)
{
    (void)ud;
    static const char *const why[] = {"symlink escapes the watch root, not followed",
                                      "symlink loop or directory cycle, not followed",
                                      "dangling symlink, skipped", "not a regular file, skipped"};
    log_debug("%s: %s", path, why[w]);
}

/* Hashes the present roots into *out. Returns 0 or <0 (logged). */
static int compute(struct monitor *m, struct hash_manifest *out)
{
    const char **present = calloc(m->nroots ? m->nroots : 1, sizeof *present);
    size_t np = 0;
    struct hash_error err = {0};
    struct hash_opts o = {.select = select_file, .warn = hash_warned, .ud = m,
                          .cache = &m->roots_real};
    if (!present) return -ENOMEM;
    for (size_t i = 0; i < m->nroots; i++)
        if (watch_root_present(m->w, i)) present[np++] = m->roots[i];
    int rc = hash_compute(present, np, &o, out, &err);
    free(present);
    if (rc < 0) {
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_ERROR, "hash-error")) {
            log_rec_str(&r, "path", err.path);
            log_rec_str(&r, "op", err.op ? err.op : "");
            log_rec_str(&r, "error", strerror(-rc));
            log_rec_end(&r, "cannot hash the watched content: %s %s: %s", err.op ? err.op : "",
                        err.path, strerror(-rc));
        }
    }
    return rc;
}


static void on_debounce(uv_timer_t *t);

static void evaluate(struct monitor *m)
{
    struct hash_manifest next = {0};
    struct hash_diff d = {0};
    char hex[HASH_HEX_LEN + 1];
    m->pending = 0;
    for (size_t i = 0; i < m->nroots; i++)
        if (m->seen[i] && !watch_root_present(m->w, i)) {
            log_debug("evaluation deferred: watch root %s is missing", m->roots[i]);
            return;
        }
    if (compute(m, &next) < 0) {
        static const struct backoff policy = {RETRY_MIN_MS, RETRY_MAX_MS, BACKOFF_JITTER_NONE};
        m->retry_ms = backoff_next(&policy, ++m->retry_n, NULL);
        m->pending = 1;
        uv_timer_start(&m->debounce, on_debounce, m->retry_ms, 0);
        return;
    }
    m->retry_ms = 0;
    m->retry_n = 0;
    m->overflowed = 0;
    if (memcmp(next.total, m->cur.total, HASH_LEN) == 0) {
        hash_manifest_free(&next);
        return;
    }
    if (hash_diff(&m->cur, &next, &d) < 0) ra_oom();
    hash_hex(next.total, hex);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "change")) {
        log_rec_str(&r, "hash", hex);
        log_rec_strv(&r, "added", d.added, d.nadded);
        log_rec_strv(&r, "removed", d.removed, d.nremoved);
        log_rec_strv(&r, "modified", d.modified, d.nmodified);
        log_rec_end(&r, "content changed: %zu added, %zu removed, %zu modified", d.nadded,
                    d.nremoved, d.nmodified);
    }
    hash_manifest_free(&m->cur);
    m->cur = next;
    m->changes++;
    if (m->cb) m->cb(m->ud, &m->cur, &d);
    hash_diff_free(&d);
}

static void on_debounce(uv_timer_t *t) { evaluate(t->data); }

static void on_resync(uv_timer_t *t)
{
    struct monitor *m = t->data;
    log_debug("resync: rehashing the watched content");
    hash_cache_forget_listing(&m->roots_real, NULL); /* the safety net reads everything */
    evaluate(m);
}

/* A hint arrived: (re)start the quiet period, capped from the burst start. */
static void hint(struct monitor *m)
{
    uint64_t now = uv_now(m->loop), delay = m->debounce_ms;
    if (!m->pending) {
        m->pending = 1;
        m->burst_start = now;
    } else {
        uint64_t cap = m->debounce_ms * 10 > 1000 ? m->debounce_ms * 10 : 1000;
        uint64_t deadline = m->burst_start + cap;
        if (now + delay > deadline) delay = deadline > now ? deadline - now : 0;
    }
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
    if (why != WATCH_DATA_LINK) hash_cache_forget_listing(&m->roots_real, m->roots[root]);
    switch (why) {
    case WATCH_EVENT:
    case WATCH_DATA_LINK:
        break;
    case WATCH_OVERFLOW:
        if (!m->overflowed) {
            struct log_rec r;
            m->overflowed = 1;
            if (log_rec_begin(&r, RA_LOG_WARN, "overflow"))
                log_rec_end(&r, "inotify queue overflowed: rescanning everything");
        }
        break;
    case WATCH_ROOT_GONE:
        log_root("root-gone", RA_LOG_WARN, m->roots[root],
                 "disappeared; waiting for it (no action while it is missing)");
        return;
    case WATCH_ROOT_BACK:
        m->seen[root] = 1;
        log_root("root-back", RA_LOG_INFO, m->roots[root], "is present again");
        break;
    }
    hint(m);
}

int monitor_start(uv_loop_t *loop, const struct monitor_opts *o, monitor_change_cb cb, void *ud,
                  struct monitor **out)
{
    struct monitor *m = calloc(1, sizeof *m);
    int rc = -ENOMEM;
    if (!m) return -ENOMEM;
    m->loop = loop;
    m->cb = cb;
    m->ud = ud;
    m->is_sub = o->is_sub;
    m->sub_ud = o->sub_ud;
    m->debounce_ms = ra_ms_of_ns(o->debounce_ns);
    m->resync_ms = ra_ms_of_ns(o->resync_ns);
    m->roots = calloc(o->nroots + 1, sizeof *m->roots);
    m->seen = calloc(o->nroots + 1, 1);
    m->ignore = calloc(o->nignore + 1, sizeof *m->ignore);
    if (!m->roots || !m->seen || !m->ignore) goto fail;
    for (size_t i = 0; i < o->nroots; i++, m->nroots++)
        if (!(m->roots[i] = strdup(o->roots[i]))) goto fail;
    for (size_t i = 0; i < o->nignore; i++, m->nignore++)
        if (!(m->ignore[i] = strdup(o->ignore[i]))) goto fail;
    hash_empty(m->cur.total);
    if ((rc = watch_create(loop, &m->w)) < 0) goto fail;
    for (size_t i = 0; i < m->nroots; i++) {
        size_t idx;
        if ((rc = watch_add(m->w, m->roots[i], on_watch, m, &idx)) < 0) goto fail_watch;
        m->seen[i] = (unsigned char)watch_root_present(m->w, i);
        if (!m->seen[i])
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
    uv_timer_init(loop, &m->debounce);
    uv_timer_init(loop, &m->resync);
    m->debounce.data = m->resync.data = m;
    m->open_handles = 2;

    /* The baseline. A hash error here is logged; the first evaluation retries. */
    struct hash_manifest base = {0};
    char hex[HASH_HEX_LEN + 1];
    if (compute(m, &base) == 0) {
        hash_manifest_free(&m->cur);
        m->cur = base;
    } else {
        hint(m);
    }
    hash_hex(m->cur.total, hex);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "baseline")) {
        log_rec_str(&r, "hash", hex);
        log_rec_int(&r, "files", (long long)m->cur.n);
        log_rec_end(&r, "baseline content hash over %zu files", m->cur.n);
    }
    if (m->resync_ms) uv_timer_start(&m->resync, on_resync, m->resync_ms, m->resync_ms);
    *out = m;
    return 0;
fail_watch:
    watch_close(m->w, NULL, NULL);
fail:
    for (size_t i = 0; i < m->nroots; i++) free(m->roots[i]);
    for (size_t i = 0; i < m->nignore; i++) free(m->ignore[i]);
    free(m->roots);
    free(m->seen);
    free(m->ignore);
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

void monitor_kick(struct monitor *m)
{
    m->pending = 1;
    uv_timer_start(&m->debounce, on_debounce, 0, 0);
}

uint64_t monitor_watch_events(const struct monitor *m) { return watch_events_total(m->w); }
uint64_t monitor_changes(const struct monitor *m) { return m->changes; }
size_t monitor_root_count(const struct monitor *m) { return m->nroots; }
const char *monitor_root(const struct monitor *m, size_t i) { return m->roots[i]; }
int monitor_root_present(const struct monitor *m, size_t i) { return watch_root_present(m->w, i); }

static void maybe_free(struct monitor *m)
{
    if (m->open_handles > 0) return;
    void (*done)(void *) = m->done;
    void *dud = m->done_ud;
    for (size_t i = 0; i < m->nroots; i++) free(m->roots[i]);
    for (size_t i = 0; i < m->nignore; i++) free(m->ignore[i]);
    free(m->roots);
    free(m->seen);
    free(m->ignore);
    hash_manifest_free(&m->cur);
    hash_cache_free(&m->roots_real);
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

void monitor_close(struct monitor *m, void (*done)(void *), void *ud)
{
    m->done = done;
    m->done_ud = ud;
    m->open_handles++; /* the watch */
    watch_close(m->w, on_watch_closed, m);
    uv_close((uv_handle_t *)&m->debounce, on_closed);
    uv_close((uv_handle_t *)&m->resync, on_closed);
}
