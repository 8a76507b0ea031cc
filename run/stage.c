/*
 * stage.c - the stage gate: one Lease per workload, watched, written with
 * a compare-and-swap (contract in stage.h; the decisions are the pure ones
 * of run/stagestate.c).
 *
 * One function, kick(), looks at everything after each thing that happens
 * (a new state of the Lease, a reply, a timer, an acquire or a release) and
 * does the one next step: a release to write first (a halt must reach the
 * others), then a renewal that is due, then the pending acquire. At most
 * one request is in flight (s->req); its context's pointer back to s is
 * cleared when s closes, so a late reply, or kube_destroy's on_cancel, only
 * frees the context.
 *
 * Timers: `timer` wakes kick() (the write jitter, the earliest expiry of
 * a slot, the API's grace, a retry); `renew` ticks while a slot is held;
 * `deliver` runs the acquire's callback outside stage_acquire.
 */
#include "run/stage.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/log.h"
#include "base/text.h"
#include "kube/k8sname.h"
#include "kube/kevents.h"
#include "kube/kinds.h"
#include "kube/kube.h"
#include "kube/kwatch.h"
#include "kube/lease.h"
#include "kube/owner.h"
#include "run/metrics.h"
#include "run/stagestate.h"

#define RESOLVE_RETRY_MS 2000
#define RESOLVE_RETRY_CAP_MS 60000
#define CONFLICT_RECHECK_MS 2000 /* a 409 whose new state the watch has not brought yet */
#define RETRY_MS 1000            /* a write that failed, while the grace runs */
#define RELEASE_TRIES 5
#define WATCH_RETRY_CAP_MS 120000
#define MAX_RELEASES 8
#define REPLICAS_UNKNOWN (-1)

enum setup { SETUP_RESOLVING, SETUP_READY, SETUP_NONE };
enum req_what { RQ_ACQUIRE, RQ_RELEASE, RQ_RENEW, RQ_CREATE, RQ_REPLICAS, RQ_LEAVE };

struct stage_req {
    struct stage *s; /* NULL once s is closed */
    enum req_what what;
    unsigned state_gen; /* s->state_gen when it was sent */
    char rv[128];       /* the resourceVersion it was written against */
};

struct seen {
    char *pod;
    uint64_t n;
    uint64_t since; /* uv_now when this renewal count was first seen */
};

/* A verdict on its way to its callback. */
struct delivery {
    struct delivery *next;
    void (*cb)(void *ud, enum stage_verdict);
    void *ud;
    enum stage_verdict v;
};

struct release {
    char hash[STAGESTATE_HASH_MAX + 1];
    int ok;
    char *reason;
    int tries;
};

struct stage {
    uv_loop_t *loop;
    struct kube *k;
    struct kevents *ev;
    struct stage_opts o;
    uint64_t ttl_ms, grace_ms;
    char me[STAGESTATE_POD_MAX + 1];
    /* the workload and its Lease */
    enum setup setup;
    char none_why[512]; /* SETUP_NONE: why there is no coordination */
    char resolve_error[512];
    int resolve_attempt, resolving;
    uint64_t resolve_at; /* the next owner resolution, after a failure */
    const struct kinds_kind *ki;
    char *wl_name, *wl_uid, *wl_path;
    char lease[LEASE_NAME_MAX + 1];
    struct kwatch *w;
    long replicas;
    /* the Lease as last seen */
    int listed, exists;
    unsigned state_gen;
    char rv[128];
    struct stagestate cur;
    int parse_warned;
    struct seen *seen;
    size_t nseen;
    uint64_t api_bad_since; /* 0: the last contact with the API worked */
    char api_error[1024];
    /* the pending acquire */
    int pending;
    char want[STAGESTATE_HASH_MAX + 1];
    void (*cb)(void *ud, enum stage_verdict);
    void *ud;
    uint64_t pending_since, jitter_until;
    int jittered, conflicts, create_sent, replicas_fresh, wait_logged;
    /* the slot held */
    int holding, lost_warned, keep_turn;
    char held[STAGESTATE_HASH_MAX + 1];
    uint64_t held_since;
    int renew_due;
    struct release rel[MAX_RELEASES];
    size_t nrel;
    struct stage_req *req;
    uv_timer_t timer, renew, deliver;
    /* the verdicts on their way to their callbacks, oldest first */
    struct delivery *dq, **dq_tail;
    /* for /status */
    unsigned n_go, n_halted, n_alone, n_conflicts, n_takeovers, n_writes;
    char last_verdict[16], last_hash[STAGESTATE_HASH_MAX + 1], last_why[1024];
    uint64_t last_wait_ms;
    /* closing */
    int closing, closes, handles_closing, final_tries;
    void (*done)(void *);
    void *done_ud;
};

static void kick(struct stage *s);

static uint64_t now_ms(const struct stage *s) { return uv_now(s->loop); }

const char *stage_verdict_name(enum stage_verdict v)
{
    static const char *const n[] = {"go", "halted", "alone"};
    return (unsigned)v < 3 ? n[v] : "?";
}

static void on_timer(uv_timer_t *t) { kick(t->data); }

static void wake_in(struct stage *s, uint64_t ms)
{
    if (!s->closing) uv_timer_start(&s->timer, on_timer, ms, 0);
}

/* ---- the verdict ---- */

/* Runs the oldest verdict's callback; returns 0 when there was none. */
static int deliver_one(struct stage *s)
{
    struct delivery *d = s->dq;
    if (!d) return 0;
    s->dq = d->next;
    if (!s->dq) s->dq_tail = &s->dq;
    void (*cb)(void *, enum stage_verdict) = d->cb;
    void *ud = d->ud;
    enum stage_verdict v = d->v;
    free(d);
    cb(ud, v);
    return 1;
}

static void on_deliver(uv_timer_t *t)
{
    struct stage *s = t->data;
    /* a callback may close s: stage_close then runs the rest itself */
    while (!s->closing && deliver_one(s)) {
    }
}

static void queue_verdict(struct stage *s, enum stage_verdict v)
{
    struct delivery *d = calloc(1, sizeof *d);
    if (!d) ra_oom();
    *d = (struct delivery){NULL, s->cb, s->ud, v};
    *s->dq_tail = d;
    s->dq_tail = &d->next;
    if (!s->closing) uv_timer_start(&s->deliver, on_deliver, 0, 0);
}

static void log_verdict(struct stage *s, enum stage_verdict v, const char *why)
{
    int quiet = v == STAGE_ALONE && s->o.is_default;
    enum log_level lvl = v == STAGE_GO ? RA_LOG_INFO : quiet ? RA_LOG_INFO : RA_LOG_WARN;
    struct log_rec r;
    if (!log_rec_begin(&r, lvl, "stage")) return;
    log_rec_str(&r, "verdict", stage_verdict_name(v));
    log_rec_str(&r, "hash", s->want);
    log_rec_int(&r, "waited_ms", (long long)s->last_wait_ms);
    if (s->lease[0]) log_rec_str(&r, "lease", s->lease);
    if (why && *why) log_rec_str(&r, "reason", why);
    if (v == STAGE_GO)
        log_rec_end(&r, "stage: applying %.12s (width %d, waited %llu ms)", s->want, s->cur.width,
                    (unsigned long long)s->last_wait_ms);
    else if (v == STAGE_HALTED)
        log_rec_end(&r, "stage: not applying %.12s: %s", s->want, why);
    else
        log_rec_end(&r, "stage: acting alone on %.12s: %s", s->want, why);
}

static void on_renew(uv_timer_t *t)
{
    struct stage *s = t->data;
    if (!s->holding) return;
    if (now_ms(s) - s->held_since >= STAGE_MAX_HOLD_MS) {
        uv_timer_stop(&s->renew);
        log_warn("stage: this pod has held its slot for %.12s %d min without a release; it "
                 "stops renewing it, so the other replicas take it over after --stage-ttl",
                 s->held, STAGE_MAX_HOLD_MS / 60000);
        return;
    }
    s->renew_due = 1;
    kick(s);
}

/* A held slot is renewed every third of its lifetime. */
static void start_renewing(struct stage *s)
{
    uint64_t ttl = s->cur.ttl_ms && s->cur.ttl_ms < s->ttl_ms ? s->cur.ttl_ms : s->ttl_ms;
    uint64_t period = ttl / 3 ? ttl / 3 : 1;
    uv_timer_start(&s->renew, on_renew, period, period);
}

static void stop_holding(struct stage *s)
{
    s->holding = 0;
    s->renew_due = 0;
    uv_timer_stop(&s->renew);
}

/* The pending acquire ends with v; its callback runs from `deliver`. */
static void finish(struct stage *s, enum stage_verdict v, const char *why)
{
    s->pending = 0;
    s->last_wait_ms = now_ms(s) - s->pending_since;
    snprintf(s->last_verdict, sizeof s->last_verdict, "%s", stage_verdict_name(v));
    snprintf(s->last_hash, sizeof s->last_hash, "%s", s->want);
    snprintf(s->last_why, sizeof s->last_why, "%s", why ? why : "");
    if (v == STAGE_GO) {
        s->n_go++;
        s->holding = 1;
        s->lost_warned = 0;
        s->renew_due = 0;
        memcpy(s->held, s->want, sizeof s->held);
        s->held_since = now_ms(s);
        start_renewing(s);
    } else {
        v == STAGE_HALTED ? s->n_halted++ : s->n_alone++;
    }
    metrics_stage((int)v, (double)s->last_wait_ms / 1000.0);
    log_verdict(s, v, why);
    queue_verdict(s, v);
}

/* ---- what this agent has seen of the slots (expiry by its own clock) ---- */

static struct seen *seen_of(struct stage *s, const char *pod)
{
    for (size_t i = 0; i < s->nseen; i++)
        if (strcmp(s->seen[i].pod, pod) == 0) return &s->seen[i];
    return NULL;
}

/* Notes when each slot's renewal count was first seen; forgets the pods
 * that hold no slot any more. */
static void update_seen(struct stage *s)
{
    uint64_t now = now_ms(s);
    for (size_t i = 0; i < s->nseen;) {
        if (stagestate_find_slot(&s->cur, s->seen[i].pod) < 0) {
            free(s->seen[i].pod);
            s->seen[i] = s->seen[--s->nseen];
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < s->cur.nactive; i++) {
        const struct stagestate_slot *sl = &s->cur.active[i];
        struct seen *e = seen_of(s, sl->pod);
        if (!e) {
            s->seen = realloc(s->seen, (s->nseen + 1) * sizeof *s->seen);
            if (!s->seen) ra_oom();
            e = &s->seen[s->nseen++];
            *e = (struct seen){ra_strdup(sl->pod), sl->n, now};
        } else if (e->n != sl->n) {
            e->n = sl->n;
            e->since = now;
        }
    }
}

static uint64_t slot_ttl(const struct stage *s)
{
    return s->cur.ttl_ms ? s->cur.ttl_ms : s->ttl_ms;
}

static int is_expired(void *ud, const char *pod, uint64_t n)
{
    struct stage *s = ud;
    const struct seen *e = seen_of(s, pod);
    if (!e || e->n != n) return 0;
    return now_ms(s) - e->since >= slot_ttl(s);
}

/* The time until the first slot of another pod expires, or 0 if none. */
static uint64_t next_expiry(struct stage *s)
{
    uint64_t best = 0, now = now_ms(s), ttl = slot_ttl(s);
    for (size_t i = 0; i < s->nseen; i++) {
        if (strcmp(s->seen[i].pod, s->me) == 0) continue;
        uint64_t at = s->seen[i].since + ttl;
        uint64_t in = at > now ? at - now : 1;
        if (!best || in < best) best = in;
    }
    return best;
}

/* ---- the Lease's state ---- */

static void api_ok(struct stage *s) { s->api_bad_since = 0; }

static void api_bad(struct stage *s, const char *error)
{
    if (!s->api_bad_since) s->api_bad_since = now_ms(s) ? now_ms(s) : 1;
    ra_one_line(s->api_error, sizeof s->api_error, error);
}

/* A new state of the Lease (rv; json: its annotation, or NULL). */
static void take_state(struct stage *s, const char *rv, const char *json)
{
    struct stagestate st;
    char err[256];
    if (stagestate_parse(json, &st, err, sizeof err) < 0) {
        if (!s->parse_warned++)
            log_warn("stage: the Lease %s holds an annotation %s that is not a stage record "
                     "(%s); it is taken as empty and replaced by the next write",
                     s->lease, STAGESTATE_ANNOTATION, err);
        memset(&st, 0, sizeof st);
    }
    stagestate_free(&s->cur);
    s->cur = st;
    snprintf(s->rv, sizeof s->rv, "%s", rv);
    s->state_gen++;
    update_seen(s);
    if (s->holding && !s->closing &&
        (strcmp(s->cur.hash, s->held) != 0 || stagestate_find_slot(&s->cur, s->me) < 0) &&
        !s->lost_warned++)
        log_warn("stage: another replica took over this pod's slot for %.12s (its renewals did "
                 "not reach the Lease %s for --stage-ttl); it goes on with its action",
                 s->held, s->lease);
}

static void on_watch(void *ud, const struct kwatch_event *ev)
{
    struct stage *s = ud;
    if (s->closing && ev->what == KWATCH_ERROR) return;
    if (ev->what == KWATCH_ERROR) {
        api_bad(s, ev->error);
        log_debug("stage: the watch of the Lease %s: %s", s->lease, ev->error);
        kick(s);
        return;
    }
    api_ok(s);
    s->listed = 1;
    s->exists = ev->exists;
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(ev->meta, "annotations");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(ann, STAGESTATE_ANNOTATION);
    take_state(s, ev->exists ? ev->rv : "", cJSON_IsString(v) ? v->valuestring : NULL);
    kick(s);
}

/* ---- requests ---- */

static void on_reply(void *ud, const struct kube_resp *r);
static void on_req_cancel(void *ud) { free(ud); }

static struct stage_req *new_req(struct stage *s, enum req_what what)
{
    struct stage_req *q = calloc(1, sizeof *q);
    if (!q) ra_oom();
    q->s = s;
    q->what = what;
    q->state_gen = s->state_gen;
    snprintf(q->rv, sizeof q->rv, "%s", s->rv);
    s->req = q;
    return q;
}

/* A request could not even start (cb never runs). */
static void req_failed_to_start(struct stage *s, int rc)
{
    free(s->req);
    s->req = NULL;
    char why[128];
    snprintf(why, sizeof why, "cannot start a request: %s", strerror(-rc));
    api_bad(s, why);
    wake_in(s, RETRY_MS);
}

/* Writes next with a compare-and-swap on the resourceVersion last seen. */
static void write_state(struct stage *s, enum req_what what, const struct stagestate *next)
{
    char *json = stagestate_print(next);
    struct stage_req *q = new_req(s, what);
    int rc = lease_cas_annotation(s->k, s->lease, s->rv, STAGESTATE_ANNOTATION, json, on_reply, q,
                                  on_req_cancel);
    free(json);
    if (rc < 0) {
        req_failed_to_start(s, rc);
        return;
    }
    s->n_writes++;
}

static void send_create(struct stage *s)
{
    struct stage_req *q = new_req(s, RQ_CREATE);
    s->create_sent = 1;
    int rc = lease_create(s->k, s->lease, on_reply, q, on_req_cancel);
    if (rc < 0) req_failed_to_start(s, rc);
}

/* "25%": the workload's replicas now (a DaemonSet: its desired pods). */
static void send_replicas(struct stage *s)
{
    struct stage_req *q = new_req(s, RQ_REPLICAS);
    struct kube_req req = {.verb = "get",
                           .resource = s->ki->resource,
                           .group = s->ki->group,
                           .method = "GET",
                           .path = s->wl_path,
                           .on_cancel = on_req_cancel,
                           .role = KUBE_ROLE_STAGE};
    int rc = kube_request(s->k, &req, on_reply, q);
    if (rc < 0) req_failed_to_start(s, rc);
}

static void replicas_done(struct stage *s, const struct kube_resp *r)
{
    s->replicas_fresh = 1;
    if (!r->ok || r->status != 200) {
        log_warn("stage: cannot read the replicas of %s %s (%s); the width of a new stage is "
                 "taken from %s",
                 s->ki->kind, s->wl_name, r->error ? r->error : "no response",
                 s->replicas > 0 ? "the last count read" : "1 replica");
        return;
    }
    cJSON *j = cJSON_ParseWithLength(r->body, r->body_len);
    int ds = strcmp(s->ki->kind, "DaemonSet") == 0;
    const cJSON *part = cJSON_GetObjectItemCaseSensitive(j, ds ? "status" : "spec");
    const cJSON *n =
        cJSON_GetObjectItemCaseSensitive(part, ds ? "desiredNumberScheduled" : "replicas");
    if (cJSON_IsNumber(n) && n->valuedouble >= 0 && n->valuedouble < 1e6)
        s->replicas = (long)n->valuedouble;
    else if (!ds && part && !n)
        s->replicas = 1; /* spec.replicas defaults to 1 */
    cJSON_Delete(j);
}

/* The handlers of replies return 1 to decide again now, 0 when a timer
 * or the watch will. */
static int create_done(struct stage *s, const struct kube_resp *r)
{
    if (r->ok && (r->status == 201 || r->status == 200 || r->status == 409)) {
        api_ok(s);
        wake_in(s, CONFLICT_RECHECK_MS); /* the watch brings it; this is a fallback */
        return 0;
    }
    const char *err = r->error ? r->error : "no response";
    if (r->ok && r->status == 403 && s->pending) {
        char why[1536];
        snprintf(why, sizeof why,
                 "the Lease %s does not exist and this pod may not create it (%s); "
                 "`reload-agent inject -o rbac` writes the Lease with its Role",
                 s->lease, err);
        finish(s, STAGE_ALONE, why);
        return 1;
    }
    s->create_sent = 0;
    api_bad(s, err);
    wake_in(s, RETRY_MS);
    return 0;
}

/* The written state came back: it is the newest the agent knows unless
 * the watch brought another since the write was sent. */
static void take_reply_state(struct stage *s, const struct stage_req *q, const struct kube_resp *r)
{
    char rv[128], *val = NULL;
    if (q->state_gen != s->state_gen) return;
    if (lease_parse_reply(r->body, r->body_len, STAGESTATE_ANNOTATION, rv, sizeof rv, &val) == 0)
        take_state(s, rv, val);
    free(val);
}

static void pop_release(struct stage *s)
{
    free(s->rel[0].reason);
    memmove(s->rel, s->rel + 1, (s->nrel - 1) * sizeof s->rel[0]);
    s->nrel--;
}

static int write_failed(struct stage *s, const struct stage_req *q, const struct kube_resp *r)
{
    const char *err = r->error ? r->error : "no response";
    api_bad(s, err);
    if (q->what == RQ_ACQUIRE && s->pending && r->ok && r->status == 403) {
        finish(s, STAGE_ALONE, err);
        return 1;
    }
    if (q->what == RQ_RELEASE && s->nrel && ++s->rel[0].tries >= RELEASE_TRIES) {
        log_error("stage: could not write to the Lease %s that this pod %s %.12s (%s)%s", s->lease,
                  s->rel[0].ok ? "verified" : "halted", s->rel[0].hash, err,
                  s->rel[0].ok ? "; its slot expires after --stage-ttl"
                               : "; the other replicas will not learn of the halt");
        pop_release(s);
    }
    if (q->what == RQ_RENEW) s->renew_due = 0; /* the next tick tries again */
    wake_in(s, RETRY_MS);
    return 0;
}

static int write_done(struct stage *s, const struct stage_req *q, const struct kube_resp *r)
{
    if (r->ok && r->status == 200) {
        api_ok(s);
        take_reply_state(s, q, r);
        if (q->what == RQ_ACQUIRE && s->pending) finish(s, STAGE_GO, NULL);
        if (q->what == RQ_RELEASE && s->nrel) pop_release(s);
        if (q->what == RQ_RENEW) s->renew_due = 0;
        return 1;
    }
    if (r->ok && r->status == 409) { /* someone wrote first: decide again on the new state */
        api_ok(s);
        s->n_conflicts++;
        if (q->what == RQ_ACQUIRE) s->conflicts++;
        if (strcmp(q->rv, s->rv) != 0) return 1; /* the watch brought it already */
        wake_in(s, CONFLICT_RECHECK_MS);
        return 0;
    }
    if (r->ok && r->status == 404) { /* the Lease was deleted */
        api_ok(s);
        s->exists = 0;
        s->create_sent = 0;
        return 1;
    }
    return write_failed(s, q, r);
}

static void closing_reply(struct stage *s, struct stage_req *q, const struct kube_resp *r);

static void on_reply(void *ud, const struct kube_resp *r)
{
    struct stage_req *q = ud;
    struct stage *s = q->s;
    if (!s) {
        free(q);
        return;
    }
    s->req = NULL;
    if (s->closing) {
        closing_reply(s, q, r);
        return;
    }
    int now = 1;
    if (q->what == RQ_REPLICAS)
        replicas_done(s, r);
    else if (q->what == RQ_CREATE)
        now = create_done(s, r);
    else
        now = write_done(s, q, r);
    free(q);
    if (now) kick(s);
}

/* ---- deciding ---- */

/* The write jitter's window: spreads the replicas that want the same free
 * slot, so that about one writes and the others see its write; wider
 * after conflicts. */
static uint64_t jitter_window(const struct stage *s)
{
    if (s->o.jitter_ms) return s->o.jitter_ms;
    long n = s->replicas > 1 ? s->replicas : 4;
    uint64_t w = (uint64_t)n * STAGE_JITTER_STEP_MS;
    if (w > STAGE_JITTER_MAX_MS) w = STAGE_JITTER_MAX_MS;
    int c = s->conflicts < 2 ? s->conflicts : 2;
    return w << c;
}

/* Without a usable Lease (still resolving, never listed, or the API
 * failing): acting alone once the acquire has waited the grace
 * (STAGE_API_GRACE_MS). Returns 1 when the acquire must not go on now (it
 * finished, or a timer will look again); else 0 with *left the grace left
 * while the API fails (0: it does not). */
static int out_of_grace(struct stage *s, uint64_t *left)
{
    uint64_t now = now_ms(s), from = s->pending_since;
    int blind = s->setup == SETUP_RESOLVING || !s->listed;
    *left = 0;
    if (!blind && !s->api_bad_since) return 0;
    if (s->api_bad_since > from) from = s->api_bad_since;
    if (now - from < s->grace_ms) {
        *left = s->grace_ms - (now - from);
        if (blind) wake_in(s, *left);
        return blind;
    }
    char why[1536];
    if (s->setup == SETUP_RESOLVING)
        snprintf(why, sizeof why, "the pod's workload could not be read from the API: %s",
                 s->resolve_error[0] ? s->resolve_error : "no answer yet");
    else
        snprintf(why, sizeof why,
                 "the API server did not answer for %llu ms about the Lease %s: %s",
                 (unsigned long long)s->grace_ms, s->lease,
                 s->api_error[0] ? s->api_error : "no answer yet");
    finish(s, STAGE_ALONE, why);
    return 1;
}

static void log_wait(struct stage *s, const struct stagestate_acq *a)
{
    if (s->wait_logged++) return;
    char holders[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < s->cur.nactive && n + 2 < sizeof holders; i++)
        n += (size_t)snprintf(holders + n, sizeof holders - n, "%s%s", i ? ", " : "",
                              s->cur.active[i].pod);
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "stage-wait")) {
        log_rec_str(&r, "hash", s->want);
        log_rec_str(&r, "staging", s->cur.hash);
        log_rec_str(&r, "holders", holders);
        log_rec_int(&r, "width", s->cur.width);
        log_rec_end(&r, "stage: waiting for a slot for %.12s: %s hold%s %s (%zu of %d)", s->want,
                    holders, s->cur.nactive == 1 ? "s" : "", s->cur.hash[0] ? s->cur.hash : "-",
                    a->live, s->cur.width);
    }
}

static void log_takeover(struct stage *s, const struct stagestate_acq *a)
{
    s->n_takeovers += (unsigned)a->taken_over;
    log_warn("stage: taking over the slot of pod %s for %.12s: no renewal seen for %llu ms "
             "(the pod died, or cannot reach the API server)%s",
             a->taken_pod, s->cur.hash, (unsigned long long)slot_ttl(s),
             a->taken_over > 1 ? ", and of other expired slots" : "");
}

static void decide_write(struct stage *s, struct stagestate_acq *a)
{
    uint64_t now = now_ms(s);
    if (!a->resumed) {
        if (now < s->jitter_until) {
            wake_in(s, s->jitter_until - now);
            return;
        }
        if (!s->jittered) {
            s->jittered = 1;
            s->jitter_until = now + ra_rng_below(ra_rng_process(), jitter_window(s) + 1);
            wake_in(s, s->jitter_until - now);
            return;
        }
    }
    s->jittered = 0;
    if (a->taken_over) log_takeover(s, a);
    write_state(s, RQ_ACQUIRE, &a->next);
}

static void decide(struct stage *s)
{
    if (s->setup == SETUP_NONE) {
        finish(s, STAGE_ALONE, s->none_why);
        return;
    }
    uint64_t left;
    if (out_of_grace(s, &left)) return;
    if (s->o.percent && !s->replicas_fresh) {
        send_replicas(s);
        return;
    }
    if (!s->exists) {
        if (!s->create_sent)
            send_create(s);
        else if (left)
            wake_in(s, left);
        return;
    }
    struct stagestate_acq a;
    int width = stagestate_width(s->o.count, s->o.percent, s->replicas);
    stagestate_acquire(&s->cur, s->me, s->want, width, s->ttl_ms, is_expired, s, &a);
    if (a.verdict == STAGESTATE_HALTED) {
        char why[1024];
        snprintf(why, sizeof why, "pod %s halted it for the workload: %s", a.halt->pod,
                 a.halt->reason[0] ? a.halt->reason : "(no reason given)");
        finish(s, STAGE_HALTED, why);
    } else if (a.verdict == STAGESTATE_WAIT) {
        s->jittered = 0; /* the next free slot is jittered for afresh */
        log_wait(s, &a);
        uint64_t in = next_expiry(s);
        if (in) in += 10;
        if (left && (!in || left < in)) in = left;
        if (in) wake_in(s, in);
    } else {
        decide_write(s, &a);
    }
    stagestate_acq_free(&a);
}

/* Writes the first queued release that changes the Lease. Returns 1 when a
 * request went out. */
static int do_release(struct stage *s)
{
    while (s->nrel) {
        struct release *rl = &s->rel[0];
        if (!s->exists) {
            if (!rl->ok && !s->create_sent) {
                send_create(s);
                return 1;
            }
            pop_release(s);
            continue;
        }
        struct stagestate next;
        if (stagestate_release(&s->cur, s->me, rl->hash, rl->ok, rl->reason, &next)) {
            write_state(s, RQ_RELEASE, &next);
            stagestate_free(&next);
            return 1;
        }
        pop_release(s);
    }
    return 0;
}

static int do_renew(struct stage *s)
{
    struct stagestate next;
    if (!stagestate_renew(&s->cur, s->me, s->held, &next)) {
        s->renew_due = 0;
        return 0;
    }
    write_state(s, RQ_RENEW, &next);
    stagestate_free(&next);
    return 1;
}

static void resolve(struct stage *s);

/* The one next step (see the top of the file). */
static void kick(struct stage *s)
{
    if (s->closing || s->req) return;
    if (s->setup == SETUP_RESOLVING && !s->resolving) resolve(s);
    if (s->setup == SETUP_READY && s->listed) {
        if (do_release(s)) return;
        if (s->holding && s->renew_due && do_renew(s)) return;
    }
    if (s->pending && !s->req) decide(s);
}

/* ---- the workload and its Lease ---- */

/* The workload is known: name its Lease and watch it. */
static void set_workload(struct stage *s, const struct kinds_kind *ki, const char *name,
                         const char *uid)
{
    s->ki = ki;
    s->wl_name = ra_strdup(name);
    s->wl_uid = uid && *uid ? ra_strdup(uid) : NULL;
    s->wl_path = ra_asprintf("/apis/%s/%s/namespaces/%s/%s/%s", ki->group, ki->version,
                             kube_namespace(s->k), ki->resource, name);
    if (lease_name_for(ki->kind, name, s->lease, sizeof s->lease) < 0) {
        snprintf(s->none_why, sizeof s->none_why, "%s %s has no name a Lease can carry", ki->kind,
                 name);
        s->setup = SETUP_NONE;
        return;
    }
    /* a failing watch (no Role yet, say) retries at most every 2 min */
    struct kwatch_opts wo = {.resource = LEASE_RESOURCE,
                             .name = s->lease,
                             .role = KUBE_ROLE_STAGE,
                             .retry_cap_ms = WATCH_RETRY_CAP_MS};
    if (kwatch_start(s->k, &wo, on_watch, s, &s->w) < 0) {
        s->w = NULL;
        snprintf(s->none_why, sizeof s->none_why, "cannot watch the Lease %s", s->lease);
        s->setup = SETUP_NONE;
        return;
    }
    s->setup = SETUP_READY;
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "stage-setup")) {
        log_rec_str(&r, "workload", name);
        log_rec_str(&r, "kind", ki->kind);
        log_rec_str(&r, "lease", s->lease);
        log_rec_end(&r, "stage: the replicas of %s %s take turns through the Lease %s", ki->kind,
                    name, s->lease);
    }
}

static void no_workload(struct stage *s, const char *why)
{
    s->setup = SETUP_NONE;
    snprintf(s->none_why, sizeof s->none_why, "%s", why);
    struct log_rec r;
    if (log_rec_begin(&r, s->o.is_default ? RA_LOG_INFO : RA_LOG_WARN, "stage-setup")) {
        log_rec_str(&r, "reason", why);
        log_rec_end(&r, "stage: no coordination, this pod acts alone: %s", why);
    }
}

static void on_owner(void *ud, struct owner_info *o)
{
    struct stage *s = ud;
    s->resolving = 0;
    if (s->closing) {
        owner_info_free(o);
        return;
    }
    const char *kind = o->via_kind ? o->via_kind : o->kind;
    const char *name = o->via_kind ? o->via_name : o->name;
    const char *uid = o->via_kind ? o->via_uid : o->uid;
    const char *apiv = o->via_kind ? o->via_api_version : o->api_version;
    const struct kinds_kind *ki = kind && apiv ? kinds_find(kind, apiv) : NULL;
    if (o->status == OWNER_API_ERROR) {
        ra_one_line(s->resolve_error, sizeof s->resolve_error, o->error ? o->error : "failed");
        struct backoff p = {RESOLVE_RETRY_MS, RESOLVE_RETRY_CAP_MS, BACKOFF_JITTER_EQUAL};
        s->resolve_at = now_ms(s) + backoff_next(&p, ++s->resolve_attempt, ra_rng_process());
        log_debug("stage: reading the pod's workload: %s", s->resolve_error);
    } else if (ki && name && (o->status == OWNER_OK || o->via_kind)) {
        set_workload(s, ki, name, uid);
    } else {
        char why[1024];
        snprintf(why, sizeof why,
                 "the pod belongs to no Deployment, StatefulSet, DaemonSet or Argo Rollout (%s)",
                 o->error ? o->error : "no controller");
        no_workload(s, why);
    }
    owner_info_free(o);
    kick(s);
}

static void resolve(struct stage *s)
{
    uint64_t now = now_ms(s);
    if (now < s->resolve_at) {
        wake_in(s, s->resolve_at - now);
        return;
    }
    s->resolving = 1;
    if (owner_resolve(s->k, on_owner, s) < 0) {
        s->resolving = 0;
        snprintf(s->resolve_error, sizeof s->resolve_error, "cannot start the request");
        s->resolve_at = now + RESOLVE_RETRY_MS;
        wake_in(s, RESOLVE_RETRY_MS);
    }
}

/* ---- the gate ---- */

int stage_create(uv_loop_t *loop, struct kube *k, struct kevents *ev, const struct stage_opts *o,
                 struct stage **out, char *err, size_t errlen)
{
    const struct kinds_kind *ki = NULL;
    const char *name = NULL;
    if (o->workload && *o->workload && lease_parse_workload(o->workload, &ki, &name) < 0) {
        snprintf(err, errlen,
                 "invalid --stage-workload: want KIND/NAME with KIND deployment, statefulset, "
                 "daemonset or rollout and NAME an object name");
        return -EINVAL;
    }
    struct stage *s = calloc(1, sizeof *s);
    if (!s) ra_oom();
    s->loop = loop;
    s->k = k;
    s->ev = ev;
    s->o = *o;
    s->o.workload = NULL; /* not kept */
    s->ttl_ms = o->ttl_ms ? o->ttl_ms : STAGE_TTL_MS;
    s->grace_ms = o->grace_ms ? o->grace_ms : STAGE_API_GRACE_MS;
    s->replicas = REPLICAS_UNKNOWN;
    uv_timer_init(loop, &s->timer);
    uv_timer_init(loop, &s->renew);
    uv_timer_init(loop, &s->deliver);
    s->timer.data = s->renew.data = s->deliver.data = s;
    s->dq_tail = &s->dq;
    metrics_stage_enabled();
    const char *pod = k ? kube_pod_name(k) : NULL;
    if (!k)
        no_workload(s, "no Kubernetes API client (not in a cluster, or --kube-api unset)");
    else if (!pod || !*pod || strlen(pod) > STAGESTATE_POD_MAX)
        no_workload(s, "the pod's name is unknown: set POD_NAME from the downward API, or "
                       "--pod-name");
    else
        snprintf(s->me, sizeof s->me, "%s", pod);
    if (s->setup != SETUP_NONE) {
        if (ki)
            set_workload(s, ki, name, NULL);
        else
            resolve(s);
    }
    *out = s;
    return 0;
}

void stage_acquire(struct stage *s, const char *hash, void (*cb)(void *ud, enum stage_verdict),
                   void *ud)
{
    if (s->pending) { /* superseded: its callback still runs, once */
        log_debug("stage: the acquire of %.12s is superseded by one of %.12s", s->want, hash);
        queue_verdict(s, STAGE_HALTED);
        s->pending = 0;
    }
    s->cb = cb;
    s->ud = ud;
    s->pending = 1;
    s->pending_since = now_ms(s);
    s->jittered = s->conflicts = s->create_sent = s->wait_logged = 0;
    s->jitter_until = 0;
    s->replicas_fresh = !s->o.percent;
    if (!stagestate_is_hash(hash)) {
        snprintf(s->want, sizeof s->want, "%s", "");
        finish(s, STAGE_ALONE, "not a content hash (internal error)");
        return;
    }
    snprintf(s->want, sizeof s->want, "%s", hash);
    if (s->holding) {
        if (strcmp(s->held, hash) == 0) { /* a retry of the action: the slot is still ours */
            finish(s, STAGE_GO, NULL);
            return;
        }
        stop_holding(s); /* the acquire gives the old slot up */
    }
    kick(s);
}

/* ConfigHalted on the workload. */
static void post_halted(struct stage *s, const char *hash, const char *reason)
{
    if (!s->ev || !s->ki || !s->wl_name) return;
    char apiv[96], msg[1024];
    snprintf(apiv, sizeof apiv, "%s/%s", s->ki->group, s->ki->version);
    struct kev_object obj = {apiv, s->ki->kind, s->wl_name, kube_namespace(s->k), s->wl_uid};
    snprintf(msg, sizeof msg, "pod %s halted content hash %.12s for the workload: %s", s->me, hash,
             reason && *reason ? reason : "(no reason given)");
    kev_post(s->ev, &obj, "Warning", "ConfigHalted", msg);
}

void stage_release(struct stage *s, const char *hash, int ok, const char *reason)
{
    if (!s || s->closing || !stagestate_is_hash(hash)) return;
    if (s->holding && strcmp(s->held, hash) == 0) stop_holding(s);
    if (!ok) {
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_WARN, "stage-halt")) {
            log_rec_str(&r, "hash", hash);
            log_rec_str(&r, "reason", reason ? reason : "");
            log_rec_end(&r, "stage: halting %.12s for the workload: %s", hash,
                        reason ? reason : "");
        }
        post_halted(s, hash, reason);
    }
    if (s->setup == SETUP_NONE) return;
    if (s->nrel == MAX_RELEASES) {
        log_warn("stage: too many releases queued; the oldest (%.12s) is dropped", s->rel[0].hash);
        pop_release(s);
    }
    struct release *rl = &s->rel[s->nrel++];
    memset(rl, 0, sizeof *rl);
    snprintf(rl->hash, sizeof rl->hash, "%s", hash);
    rl->ok = ok;
    rl->reason = ra_strdup(reason ? reason : "");
    kick(s);
}

void stage_keep_turn(struct stage *s)
{
    if (s) s->keep_turn = 1;
}

/* ---- /status ---- */

static const char *state_name(const struct stage *s)
{
    if (s->pending) return s->setup == SETUP_NONE ? "alone" : "waiting";
    if (s->holding) return "holding";
    return s->setup == SETUP_NONE ? "alone" : s->setup == SETUP_RESOLVING ? "resolving" : "idle";
}

static void lease_status(const struct stage *s, cJSON *st)
{
    cJSON *l = cJSON_AddObjectToObject(st, "lease_state");
    cJSON_AddStringToObject(l, "hash", s->cur.hash);
    cJSON_AddNumberToObject(l, "width", s->cur.width);
    cJSON *a = cJSON_AddArrayToObject(l, "active");
    for (size_t i = 0; i < s->cur.nactive; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(s->cur.active[i].pod));
    cJSON_AddNumberToObject(l, "verified", (double)s->cur.nverified);
    cJSON *h = cJSON_AddArrayToObject(l, "halted");
    for (size_t i = 0; i < s->cur.nhalted; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "hash", s->cur.halted[i].hash);
        cJSON_AddStringToObject(o, "pod", s->cur.halted[i].pod);
        cJSON_AddStringToObject(o, "reason", s->cur.halted[i].reason);
        cJSON_AddItemToArray(h, o);
    }
}

void stage_status(const struct stage *s, cJSON *root)
{
    char mode[32];
    if (s->o.percent)
        snprintf(mode, sizeof mode, "%d%%", s->o.percent);
    else
        snprintf(mode, sizeof mode, "%d", s->o.count);
    cJSON *st = cJSON_AddObjectToObject(root, "stage");
    cJSON_AddStringToObject(st, "mode", mode);
    cJSON_AddBoolToObject(st, "default", s->o.is_default);
    cJSON_AddStringToObject(st, "state", state_name(s));
    if (s->setup == SETUP_NONE) cJSON_AddStringToObject(st, "alone_reason", s->none_why);
    if (s->ki) {
        char wl[400];
        snprintf(wl, sizeof wl, "%s/%s", s->ki->kind, s->wl_name);
        cJSON_AddStringToObject(st, "workload", wl);
    }
    cJSON_AddStringToObject(st, "lease", s->lease);
    if (s->pending) {
        cJSON_AddStringToObject(st, "hash", s->want);
        cJSON_AddNumberToObject(st, "waiting_ms", (double)(now_ms(s) - s->pending_since));
    } else if (s->holding) {
        cJSON_AddStringToObject(st, "hash", s->held);
    }
    if (s->api_bad_since) cJSON_AddStringToObject(st, "api_error", s->api_error);
    cJSON *last = cJSON_AddObjectToObject(st, "last");
    cJSON_AddStringToObject(last, "verdict", s->last_verdict);
    cJSON_AddStringToObject(last, "hash", s->last_hash);
    cJSON_AddNumberToObject(last, "waited_ms", (double)s->last_wait_ms);
    cJSON_AddStringToObject(last, "reason", s->last_why);
    cJSON *n = cJSON_AddObjectToObject(st, "counts");
    cJSON_AddNumberToObject(n, "go", s->n_go);
    cJSON_AddNumberToObject(n, "halted", s->n_halted);
    cJSON_AddNumberToObject(n, "alone", s->n_alone);
    cJSON_AddNumberToObject(n, "writes", s->n_writes);
    cJSON_AddNumberToObject(n, "conflicts", s->n_conflicts);
    cJSON_AddNumberToObject(n, "takeovers", s->n_takeovers);
    if (s->listed) lease_status(s, st);
}

/* ---- closing ---- */

static void on_closed(uv_handle_t *h)
{
    struct stage *s = h->data;
    if (--s->closes > 0) return;
    void (*done)(void *) = s->done;
    void *ud = s->done_ud;
    stagestate_free(&s->cur);
    for (size_t i = 0; i < s->nseen; i++) free(s->seen[i].pod);
    free(s->seen);
    while (s->nrel) pop_release(s);
    free(s->wl_name);
    free(s->wl_uid);
    free(s->wl_path);
    free(s);
    if (done) done(ud);
}

static void on_watch_closed(void *ud) { on_closed((uv_handle_t *)&((struct stage *)ud)->timer); }

static void close_handles(struct stage *s)
{
    if (s->handles_closing++) return;
    if (s->req) s->req->s = NULL; /* its reply, or on_cancel, frees it */
    s->req = NULL;
    s->closes = 3 + (s->w ? 1 : 0);
    if (s->w) kwatch_close(s->w, on_watch_closed, s);
    s->w = NULL;
    uv_close((uv_handle_t *)&s->timer, on_closed);
    uv_close((uv_handle_t *)&s->renew, on_closed);
    uv_close((uv_handle_t *)&s->deliver, on_closed);
}

static void on_leave_timeout(uv_timer_t *t) { close_handles(t->data); }

/* At close: the Lease with every release not yet written applied and this
 * pod's turn given back (a pod deleted or scaled down mid-stage: the next
 * replica need not wait for it to expire), unless it is kept over a pod
 * restart. Writes it; returns 1 when the write went out. */
static int final_write(struct stage *s)
{
    if (s->setup != SETUP_READY || !s->listed || !s->exists) return 0;
    struct stagestate acc, tmp;
    int changed = 0;
    stagestate_copy(&s->cur, &acc);
    for (size_t i = 0; i < s->nrel; i++) {
        const struct release *rl = &s->rel[i];
        if (stagestate_release(&acc, s->me, rl->hash, rl->ok, rl->reason, &tmp)) {
            stagestate_free(&acc);
            acc = tmp;
            changed = 1;
        }
    }
    if (!s->keep_turn && stagestate_leave(&acc, s->me, &tmp)) {
        stagestate_free(&acc);
        acc = tmp;
        changed = 1;
    }
    if (changed) write_state(s, RQ_LEAVE, &acc);
    stagestate_free(&acc);
    return changed && s->req;
}

/* A reply that arrives while s closes: the final write once the request in
 * flight is done (and once more on a conflict), then the handles. */
static void closing_reply(struct stage *s, struct stage_req *q, const struct kube_resp *r)
{
    int ok = r->ok && r->status == 200;
    enum req_what what = q->what;
    if (ok && what != RQ_REPLICAS && what != RQ_CREATE) take_reply_state(s, q, r);
    free(q);
    if (ok && what == RQ_RELEASE && s->nrel) pop_release(s);
    if (what == RQ_LEAVE) {
        if (ok) {
            while (s->nrel) pop_release(s);
            log_info("stage: this pod's releases and turn are in the Lease as it stops");
        } else if (r->ok && r->status == 409 && s->final_tries++ < 2 && final_write(s)) {
            return; /* once more, on the newer state the watch brought */
        } else {
            log_warn("stage: writing the Lease as this pod stops failed (%s)%s",
                     r->error ? r->error : "no response",
                     s->holding ? "; its turn expires after --stage-ttl" : "");
        }
        close_handles(s);
        return;
    }
    if (!final_write(s)) close_handles(s);
}

void stage_close(struct stage *s, void (*done)(void *), void *ud)
{
    if (!s || s->closing) return;
    if (s->pending) { /* the agent stops: the engine gets its answer, and ignores it */
        s->pending = 0;
        queue_verdict(s, STAGE_HALTED);
    }
    s->closing = 1;
    while (deliver_one(s)) {
    }
    s->done = done;
    s->done_ud = ud;
    uv_timer_start(&s->timer, on_leave_timeout, STAGE_LEAVE_WAIT_MS, 0);
    if (s->req) return; /* its reply goes on (closing_reply) */
    if (!final_write(s)) close_handles(s);
}
