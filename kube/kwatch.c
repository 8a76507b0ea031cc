/*
 * kwatch.c - list + watch of one object by name, metadata only, within
 * the API budget (contract in kwatch.h).
 *
 * One struct kwatch runs one request at a time on httpc directly (not
 * through kube_request: a watch is streamed, and one backoff here covers
 * both the list and the watch): LIST, then WATCH from the list's
 * resourceVersion, then WATCH again from the last event or bookmark when
 * the server ends the stream; after a 410 or malformed data, LIST again
 * (a Secret: WATCH from resourceVersion 0). Every failure goes through
 * fail(), the one place that counts it, says it through the callback and
 * arms the backoff. Its one uv_timer_t waits the backoff between
 * attempts, and during a watch bounds the response head and a partial
 * event line; while a stream is open and idle no timer runs (libcurl's
 * own is the stream's deadline, timeoutSeconds plus a margin), so an idle
 * watch costs no wake-up until the server sends something (a bookmark
 * about once a minute).
 *
 * The stream is cut into lines (base/lines.h) of at most KWATCH_MAX_EVENT
 * bytes; each line is one JSON event. The buffer is wiped when emptied,
 * since a Secret's metadata may quote its data (kwatch.h).
 */
#include "kube/kwatch.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/backoff.h"
#include "base/lines.h"
#include "base/log.h"
#include "base/text.h"
#include "kube/k8sname.h"
#include "net/httpc.h"

#define CLIENT_MARGIN_S 60 /* the client's deadline beyond the server's timeoutSeconds */
#define LIST_TIMEOUT_MS 10000
#define MAX_FAILURES 1000 /* the count stops here (the delay stopped at the cap long before) */

enum phase { PH_WAIT, PH_LIST, PH_WATCH };

/* The resources a watch may follow: where their collection is. */
struct kw_res {
    const char *resource, *group, *api; /* api: the collection's prefix before /namespaces */
    int table;                          /* Secrets: a Table without objects */
};
static const struct kw_res RESOURCES[] = {
    {"configmaps", "", "/api/v1", 0},
    {"secrets", "", "/api/v1", 1},
    {"leases", "coordination.k8s.io", "/apis/coordination.k8s.io/v1", 0},
};

struct kwatch {
    const struct kw_res *res;
    enum kube_role role; /* the Role a 403 names */
    struct kube *k;
    kwatch_cb cb;
    void *ud;
    char *resource, *name;
    uint64_t timeout_s;
    int table; /* Secrets: a Table without objects, not PartialObjectMetadata */
    struct backoff policy;
    uv_timer_t timer; /* the backoff; during a watch, the head and line deadlines */
    struct httpc_xfer *xfer;
    enum phase phase;
    int fails;      /* failures since the last stream that lasted KWATCH_MIN_STREAM_MS */
    int last_gone;  /* the last of them was a 410 (backoff_watch_step) */
    int listed;     /* the first list succeeded */
    int need_list;  /* the next attempt lists (a Secret: resyncs), after a 410 or bad data */
    int exists;     /* the object's last known state */
    int rv_unknown; /* it exists at a resourceVersion not known (a Table list) */
    int closing;
    int in_data;        /* inside on_data: httpc's reader may not cancel its own transfer */
    unsigned token_gen; /* of the attempt in flight */
    uint64_t started;   /* uv_now of the attempt in flight */
    /* the stream in flight */
    int got_head;      /* its 2xx head arrived */
    int resync;        /* a Secret's watch from resourceVersion 0 */
    int resync_events; /* object events it delivered */
    unsigned events, bookmarks;
    int stream_failed; /* the reader stopped it with an error (why) */
    int stream_gone;   /* that error was a 410 */
    char why[1536];
    struct kwatch__rvs rvs;
    char rv[128];       /* the object's last known resourceVersion */
    char watch_rv[128]; /* where the next watch resumes */
    struct lines lines; /* the partial event line */
    struct kwatch_stats st;
    void (*close_done)(void *);
    void *close_ud;
};

static const char *str_at(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int copy_rv(char *out, size_t n, const char *rv)
{
    if (!rv || !rv[0] || strlen(rv) >= n) return -1;
    /* in practice decimal; nothing that would need quoting in a URL, a
     * JSON string or a log line */
    for (const char *p = rv; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              *p == '-' || *p == '.' || *p == '_'))
            return -1;
    snprintf(out, n, "%s", rv);
    return 0;
}

/* ---- resourceVersions ---- */

/* The form KEP-5504 compares: digits, no leading zero, not "0". */
static int is_comparable(const char *rv)
{
    if (!rv || rv[0] < '1' || rv[0] > '9') return 0;
    for (const char *p = rv; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

int kwatch__rv_compare(const char *a, const char *b, int *cmp)
{
    if (!is_comparable(a) || !is_comparable(b)) return -EINVAL;
    size_t la = strlen(a), lb = strlen(b);
    int c = la != lb ? (la < lb ? -1 : 1) : strcmp(a, b);
    *cmp = c < 0 ? -1 : c > 0 ? 1 : 0;
    return 0;
}

int kwatch__rvs_is_new(const struct kwatch__rvs *r, const char *rv, int strict)
{
    int cmp;
    for (unsigned i = 0; i < r->n; i++)
        if (strcmp(r->seen[i], rv) == 0) return 0;
    if (r->high[0] && kwatch__rv_compare(rv, r->high, &cmp) == 0) return cmp > 0;
    return !strict;
}

void kwatch__rvs_raise(struct kwatch__rvs *r, const char *rv)
{
    int cmp;
    if (!is_comparable(rv) || strlen(rv) >= sizeof r->high) return;
    if (!r->high[0] || (kwatch__rv_compare(rv, r->high, &cmp) == 0 && cmp > 0))
        snprintf(r->high, sizeof r->high, "%s", rv);
}

void kwatch__rvs_note(struct kwatch__rvs *r, const char *rv)
{
    if (!rv[0] || strlen(rv) >= sizeof r->seen[0]) return;
    for (unsigned i = 0; i < r->n; i++)
        if (strcmp(r->seen[i], rv) == 0) return;
    snprintf(r->seen[r->next], sizeof r->seen[0], "%s", rv);
    r->next = (r->next + 1) % KWATCH_SEEN;
    if (r->n < KWATCH_SEEN) r->n++;
    kwatch__rvs_raise(r, rv);
}

/* ---- the parsers ---- */

/* The error for a reply of the wrong kind (what: "a watch event holds",
 * "the list reply is"): the server did not honour the Accept header. */
static void wrong_kind(char *err, size_t errlen, const char *what, const char *kind,
                       const char *want)
{
    char q[80];
    ra_one_line(q, sizeof q, kind ? kind : "(none)");
    snprintf(err, errlen, "%s a %s, not %s: the server ignored the metadata-only Accept header",
             what, q, want);
}

/* Table mode: every row of t (a Table) has a null object, or a
 * PartialObjectMetadata (a bookmark's): includeObject=None was honoured. */
static int rows_hold_no_object(const cJSON *t)
{
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(t, "rows"), *r;
    const cJSON *arr = cJSON_IsArray(rows) ? rows : NULL;
    cJSON_ArrayForEach(r, arr)
    {
        const cJSON *o = cJSON_GetObjectItemCaseSensitive(r, "object");
        const char *k = str_at(o, "kind");
        if (o && !cJSON_IsNull(o) && !(k && strcmp(k, "PartialObjectMetadata") == 0)) return 0;
    }
    return 1;
}

/* The name an event's object carries: its metadata.name, or a Table's
 * one row's first cell; "" for none, several rows, or one too long to be
 * an object name (so a truncated copy can never match). */
static void event_name(const cJSON *obj, int table, char *out, size_t n)
{
    const char *name;
    if (table) {
        const cJSON *rows = cJSON_GetObjectItemCaseSensitive(obj, "rows");
        const cJSON *cells = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rows, 0), "cells");
        const cJSON *cell = cJSON_GetArrayItem(cells, 0);
        name = cJSON_IsArray(rows) && cJSON_GetArraySize(rows) == 1 && cJSON_IsString(cell)
                   ? cell->valuestring
                   : NULL;
    } else {
        name = str_at(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "name");
    }
    snprintf(out, n, "%s", name && strlen(name) < n ? name : "");
}

/* The object's metadata.namespace ("" when absent or too long). */
static void event_ns(const cJSON *obj, char *out, size_t n)
{
    const char *ns = str_at(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "namespace");
    snprintf(out, n, "%s", ns && strlen(ns) < n ? ns : "");
}

int kwatch__parse_event(const char *line, size_t len, int table, struct kwatch__event *ev,
                        char *err, size_t errlen)
{
    return kwatch__parse_event_meta(line, len, table, ev, NULL, err, errlen);
}

/* Detaches obj's metadata into *meta (when meta is not NULL). */
static void take_meta(cJSON *obj, cJSON **meta)
{
    if (!meta) return;
    *meta = cJSON_DetachItemFromObjectCaseSensitive(obj, "metadata");
}

int kwatch__parse_event_meta(const char *line, size_t len, int table, struct kwatch__event *ev,
                             cJSON **meta, char *err, size_t errlen)
{
    const char *want = table ? "Table" : "PartialObjectMetadata";
    static const char *const types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    cJSON *j = cJSON_ParseWithLength(line, len);
    cJSON *obj = cJSON_GetObjectItemCaseSensitive(j, "object");
    const char *type = str_at(j, "type");
    int rc = -EINVAL;

    memset(ev, 0, sizeof *ev);
    if (meta) *meta = NULL;
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "a watch event is not a JSON object (%zu bytes)", len);
        goto out;
    }
    if (!type || !cJSON_IsObject(obj)) {
        snprintf(err, errlen, "a watch event has no \"type\" or no \"object\"");
        goto out;
    }
    size_t i;
    for (i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(type, types[i]) == 0) break;
    if (i == sizeof types / sizeof types[0]) {
        char q[80];
        ra_one_line(q, sizeof q, type);
        snprintf(err, errlen, "a watch event has the unknown type \"%s\"", q);
        goto out;
    }
    ev->type = (enum kwatch__type)i;
    if (ev->type == KWATCH__ERROR) {
        const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
        const char *msg = str_at(obj, "message");
        /* an HTTP-like status; anything else (a huge number: a double that
         * does not fit a long) is no code */
        ev->code = cJSON_IsNumber(code) && code->valuedouble >= 0 && code->valuedouble < 1000
                       ? (long)code->valuedouble
                       : 0;
        ra_one_line(ev->message, sizeof ev->message, msg && msg[0] ? msg : "(no message)");
        rc = 0;
        goto out;
    }
    const char *kind = str_at(obj, "kind");
    if (ev->type != KWATCH__BOOKMARK && (!kind || strcmp(kind, want) != 0)) {
        wrong_kind(err, errlen, "a watch event holds", kind, want);
        goto out;
    }
    if (table && !rows_hold_no_object(obj)) {
        snprintf(err, errlen,
                 "a watch event's Table row holds an object: the server ignored "
                 "includeObject=None");
        goto out;
    }
    if (copy_rv(ev->rv, sizeof ev->rv,
                str_at(cJSON_GetObjectItemCaseSensitive(obj, "metadata"), "resourceVersion")) < 0) {
        snprintf(err, errlen, "a %s watch event has no valid metadata.resourceVersion", type);
        goto out;
    }
    if (ev->type != KWATCH__BOOKMARK) event_name(obj, table, ev->name, sizeof ev->name);
    if (ev->type != KWATCH__BOOKMARK && !table) event_ns(obj, ev->ns, sizeof ev->ns);
    if (!table && (ev->type == KWATCH__ADDED || ev->type == KWATCH__MODIFIED)) take_meta(obj, meta);
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

/* Table mode: the list is a Table whose rows' first cell is the name. */
static int table_list(const cJSON *j, const char *name, int *exists, char *err, size_t errlen)
{
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows"), *r;
    if (rows && !cJSON_IsArray(rows) && !cJSON_IsNull(rows)) {
        snprintf(err, errlen, "the list reply's rows is not an array");
        return -EINVAL;
    }
    if (!rows_hold_no_object(j)) {
        snprintf(err, errlen,
                 "the list reply's Table rows hold objects: the server ignored includeObject=None");
        return -EINVAL;
    }
    const cJSON *arr = cJSON_IsArray(rows) ? rows : NULL;
    cJSON_ArrayForEach(r, arr)
    {
        const cJSON *cell = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "cells"), 0);
        if (cJSON_IsString(cell) && strcmp(cell->valuestring, name) == 0) *exists = 1;
    }
    return 0;
}

int kwatch__parse_list(const char *body, size_t len, const char *name, int table, char *list_rv,
                       size_t rvlen, int *exists, char *obj_rv, char *err, size_t errlen)
{
    return kwatch__parse_list_meta(body, len, name, table, list_rv, rvlen, exists, obj_rv, NULL,
                                   err, errlen);
}

int kwatch__parse_list_meta(const char *body, size_t len, const char *name, int table,
                            char *list_rv, size_t rvlen, int *exists, char *obj_rv, cJSON **meta,
                            char *err, size_t errlen)
{
    const char *want = table ? "Table" : "PartialObjectMetadataList";
    cJSON *j = cJSON_ParseWithLength(body, len);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
    cJSON *it, *found = NULL;
    const char *kind = str_at(j, "kind");
    int rc = -EINVAL;

    *exists = 0;
    obj_rv[0] = '\0';
    if (meta) *meta = NULL;
    if (!cJSON_IsObject(j)) {
        snprintf(err, errlen, "the list reply is not a JSON object (%zu bytes)", len);
        goto out;
    }
    if (!kind || strcmp(kind, want) != 0) {
        wrong_kind(err, errlen, "the list reply is", kind, want);
        goto out;
    }
    if (copy_rv(list_rv, rvlen,
                str_at(cJSON_GetObjectItemCaseSensitive(j, "metadata"), "resourceVersion")) < 0) {
        snprintf(err, errlen, "the list reply has no valid metadata.resourceVersion");
        goto out;
    }
    if (table) {
        rc = table_list(j, name, exists, err, errlen);
        goto out;
    }
    if (items && !cJSON_IsArray(items) && !cJSON_IsNull(items)) {
        snprintf(err, errlen, "the list reply's items is not an array");
        goto out;
    }
    const cJSON *arr = cJSON_IsArray(items) ? items : NULL;
    cJSON_ArrayForEach(it, arr)
    {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(it, "metadata");
        const char *n = str_at(m, "name");
        if (!n || strcmp(n, name) != 0) continue; /* the field selector should have left it out */
        if (copy_rv(obj_rv, rvlen, str_at(m, "resourceVersion")) < 0) {
            snprintf(err, errlen, "the listed object has no valid metadata.resourceVersion");
            goto out;
        }
        *exists = 1;
        found = it;
    }
    if (found) take_meta(found, meta);
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

/* ---- the attempts ---- */

static void attempt(struct kwatch *w);

static void report_state(struct kwatch *w, int changed, int initial, int relist, const cJSON *meta)
{
    struct kwatch_event ev = {.what = KWATCH_STATE,
                              .exists = w->exists,
                              .rv = w->exists ? w->rv : "",
                              .rv_unknown = w->exists && w->rv_unknown,
                              .initial = initial,
                              .relist = relist,
                              .changed = changed && w->exists && !initial,
                              .meta = w->exists ? meta : NULL};
    w->cb(w->ud, &ev);
}

static void on_timer(uv_timer_t *t) { attempt(t->data); }

/* The one place a failure goes: counts it, reports it through the
 * callback with the delay, then (unless the callback closed w) waits that
 * step of the backoff before the next attempt, whose kind (list, resync or
 * watch) the state decides. gone: a 410, which relists. */
static void fail(struct kwatch *w, int gone, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct kwatch *w, int gone, const char *fmt, ...)
{
    char raw[2048], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    ra_one_line(msg, sizeof msg, raw);
    if (w->fails < MAX_FAILURES) w->fails++;
    uint64_t ms = backoff_next(&w->policy, backoff_watch_step(w->fails, gone, &w->last_gone),
                               ra_rng_process());
    w->st.errors++;
    w->phase = PH_WAIT;
    struct kwatch_event ev = {
        .what = KWATCH_ERROR, .error = msg, .failures = w->fails, .retry_ms = ms, .gone = gone};
    w->cb(w->ud, &ev);
    if (w->closing) return;
    uv_timer_start(&w->timer, on_timer, ms, 0);
}

/* A list or watch (verb) that got no response or a status other than 200:
 * the transfer's error, a rejected token (re-read before the next
 * request), or the API server's Status with the RBAC hint of fast sync. */
static void fail_reply(struct kwatch *w, const char *verb, const struct httpc_result *res)
{
    if (!res->ok) {
        fail(w, 0, "%s %s %s: %s", verb, w->resource, w->name, res->error);
        return;
    }
    if (res->status == 401) {
        kube__token_rejected(w->k, w->token_gen);
        fail(w, 0, "%s %s %s: Unauthorized: the token was rejected", verb, w->resource, w->name);
        return;
    }
    char path[512], err[1536];
    snprintf(path, sizeof path, "%s/namespaces/%s/%s", w->res->api, kube_namespace(w->k),
             w->resource);
    struct kube_req req = {.verb = verb,
                           .resource = w->resource,
                           .group = w->res->group,
                           .method = "GET",
                           .path = path,
                           .role = w->role};
    kube__http_error(w->k, &req, res->status, res->body, res->body_len, err, sizeof err);
    fail(w, 0, "%s %s %s: %s", verb, w->resource, w->name, err);
}

/* The list's state: a change only when it was already listed and the
 * object is at a version never seen (a Table says none: never). */
static void list_state(struct kwatch *w, const char *list_rv, int exists, const char *obj_rv,
                       const cJSON *meta)
{
    int initial = !w->listed;
    int changed = !initial && exists && !w->table && kwatch__rvs_is_new(&w->rvs, obj_rv, 0);
    w->listed = 1;
    w->need_list = 0;
    snprintf(w->watch_rv, sizeof w->watch_rv, "%s", list_rv);
    if (exists && !w->table) kwatch__rvs_note(&w->rvs, obj_rv);
    kwatch__rvs_raise(&w->rvs, list_rv); /* the object is at list_rv or older */
    w->exists = exists;
    snprintf(w->rv, sizeof w->rv, "%s", exists ? obj_rv : "");
    w->rv_unknown = w->table && exists; /* a Table row has no resourceVersion */
    report_state(w, changed, initial, !initial, meta);
}

static void on_list_done(void *ud, const struct httpc_result *res)
{
    struct kwatch *w = ud;
    char err[1536], list_rv[128], obj_rv[128];
    int exists;
    cJSON *meta = NULL;

    w->xfer = NULL;
    kube__count_response(w->k, res->ok ? res->status : 0);
    if (!res->ok || res->status != 200) {
        fail_reply(w, "list", res);
        return;
    }
    if (kwatch__parse_list_meta(res->body, res->body_len, w->name, w->table, list_rv,
                                sizeof list_rv, &exists, obj_rv, &meta, err, sizeof err) < 0) {
        fail(w, 0, "list %s %s: %s", w->resource, w->name, err);
        return;
    }
    list_state(w, list_rv, exists, obj_rv, meta);
    cJSON_Delete(meta);
    if (!w->closing) attempt(w); /* the watch of the same step */
}

/* Stops the stream in flight with why as its failure (seen when it ends). */
static int stream_fail(struct kwatch *w, int relist, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int stream_fail(struct kwatch *w, int relist, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof w->why, fmt, ap);
    va_end(ap);
    w->stream_failed = 1;
    if (relist) w->need_list = 1; /* what was missed is unknown: start over */
    return 1;
}

/* ADDED, MODIFIED or DELETED: checked against the watched name; a change
 * when its version is new (the first event of a resync may be the old
 * state: only a version known to be newer is a change). */
static int on_object_event(struct kwatch *w, const struct kwatch__event *ev, const cJSON *meta)
{
    if (strcmp(ev->name, w->name) != 0) {
        char q[300];
        ra_one_line(q, sizeof q, ev->name[0] ? ev->name : "(no single object)");
        return stream_fail(w, 0,
                           "watch %s %s: an event for \"%s\", not \"%s\": the server ignored the "
                           "field selector",
                           w->resource, w->name, q, w->name);
    }
    int first_of_resync = w->resync && w->resync_events++ == 0;
    int exists = ev->type != KWATCH__DELETED;
    int changed = exists && kwatch__rvs_is_new(&w->rvs, ev->rv, first_of_resync);
    w->st.events++;
    w->events++;
    kwatch__rvs_note(&w->rvs, ev->rv);
    if (!first_of_resync) { /* a resume point (a resync's first may be long compacted) */
        snprintf(w->watch_rv, sizeof w->watch_rv, "%s", ev->rv);
        w->need_list = 0;
    }
    w->exists = exists;
    snprintf(w->rv, sizeof w->rv, "%s", exists ? ev->rv : "");
    w->rv_unknown = 0;
    report_state(w, changed, 0, first_of_resync, meta);
    return w->closing ? 1 : 0;
}

/* One event line of the stream. Returns 0 to read on, 1 to stop (a 410,
 * an error, a malformed event or one for another object: the state is set
 * for the next attempt, and on_watch_done counts the failure). */
static int on_line(void *ud, const char *line, size_t len)
{
    struct kwatch *w = ud;
    struct kwatch__event ev;
    char err[1536];
    cJSON *meta = NULL;

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
    if (len == 0) return 0;
    if (kwatch__parse_event_meta(line, len, w->table, &ev, &meta, err, sizeof err) < 0)
        return stream_fail(w, 1, "watch %s %s: %s", w->resource, w->name, err);
    switch (ev.type) {
    case KWATCH__BOOKMARK:
        w->st.bookmarks++;
        w->bookmarks++;
        snprintf(w->watch_rv, sizeof w->watch_rv, "%s", ev.rv);
        w->need_list = 0; /* a resync has its resume point */
        return 0;
    case KWATCH__ERROR:
        if (ev.code == 410) {
            w->st.gone++;
            w->stream_gone = 1;
            return stream_fail(w, 1, "watch %s %s: 410 Gone (%s): relisting", w->resource, w->name,
                               ev.message);
        }
        return stream_fail(w, 0, "watch %s %s: the server sent an error (code %ld): %s",
                           w->resource, w->name, ev.code, ev.message);
    default: {
        int stop = on_object_event(w, &ev, meta);
        cJSON_Delete(meta);
        return stop;
    }
    }
}

static int on_data_lines(struct kwatch *w, const char *data, size_t n);
static void on_stall(uv_timer_t *t);

/* Every piece of the stream, the first (maybe empty) when its head is
 * complete. A partial line left in the buffer arms the line deadline; an
 * empty buffer (an idle stream) leaves no timer running. */
static int on_data(void *ud, const char *data, size_t n)
{
    struct kwatch *w = ud;

    w->in_data = 1;
    if (!w->got_head) {
        w->got_head = 1;
        w->st.streaming = 1;
        uv_timer_stop(&w->timer);
    }
    int stop = on_data_lines(w, data, n);
    w->in_data = 0;
    if (stop || w->closing) return 1;
    if (w->lines.len == 0)
        uv_timer_stop(&w->timer);
    else if (!uv_is_active((uv_handle_t *)&w->timer))
        uv_timer_start(&w->timer, on_stall, KWATCH_LINE_TIMEOUT_MS, 0);
    return 0;
}

static int on_data_lines(struct kwatch *w, const char *data, size_t n)
{
    enum lines_result r = lines_feed(&w->lines, data, n, on_line, w);
    if (r != LINES_LONG) return r == LINES_STOP;
    return stream_fail(w, 1, "watch %s %s: an event exceeds %d bytes", w->resource, w->name,
                       KWATCH_MAX_EVENT);
}

/* The shortest stream resumed at once, and the one that resets the count:
 * KWATCH_MIN_STREAM_MS, or the whole timeoutSeconds if asked for less. */
static uint64_t min_stream_ms(const struct kwatch *w)
{
    return w->timeout_s * 1000 < KWATCH_MIN_STREAM_MS ? w->timeout_s * 1000 : KWATCH_MIN_STREAM_MS;
}

/* The stream in flight is over (ended or cut): its deadlines stop, its
 * partial line is dropped (the next watch resumes before it), and one that
 * lasted long enough starts the failure count over. Returns how long it
 * lasted. */
static uint64_t stream_over(struct kwatch *w)
{
    uint64_t lasted = uv_now(kube__loop(w->k)) - w->started;
    w->xfer = NULL;
    w->st.streaming = 0;
    if (!w->closing) uv_timer_stop(&w->timer);
    lines_wipe(&w->lines);
    if (w->got_head && lasted >= min_stream_ms(w)) w->fails = w->last_gone = 0;
    return lasted;
}

/* The head did not come in time, or a line stays partial: the stream is
 * cut (its callback never runs) and the failure counted. */
static void on_stall(uv_timer_t *t)
{
    struct kwatch *w = t->data;

    if (w->phase != PH_WATCH || !w->xfer) return;
    httpc_cancel(w->xfer);
    int got_head = w->got_head;
    stream_over(w);
    kube__count_response(w->k, 0);
    if (!got_head)
        fail(w, 0,
             "watch %s %s: no 2xx response head within %d s (a slow or trickling API server "
             "or proxy): fast sync waits for this object until a watch starts",
             w->resource, w->name, KWATCH_HEAD_TIMEOUT_MS / 1000);
    else
        fail(w, 0, "watch %s %s: an event line did not complete within %d s", w->resource, w->name,
             KWATCH_LINE_TIMEOUT_MS / 1000);
}

static void on_watch_done(void *ud, const struct httpc_result *res)
{
    struct kwatch *w = ud;
    uint64_t lasted = stream_over(w);

    kube__count_response(w->k, res->ok ? res->status : 0);
    if (w->closing) return;
    if (w->stream_failed) {
        fail(w, w->stream_gone, "%s", w->why);
        return;
    }
    if (res->ok && res->status == 200) {
        if (lasted >= min_stream_ms(w)) { /* the server's timeoutSeconds: resume */
            attempt(w);
            return;
        }
        fail(w, 0,
             "watch %s %s: the server ended the stream after %llu ms (%u events, %u bookmarks); "
             "only a stream of %llu s is resumed at once",
             w->resource, w->name, (unsigned long long)lasted, w->events, w->bookmarks,
             (unsigned long long)min_stream_ms(w) / 1000);
        return;
    }
    if (res->ok && res->status == 410) {
        w->st.gone++;
        w->need_list = 1;
        fail(w, 1, "watch %s %s: 410 Gone: relisting", w->resource, w->name);
        return;
    }
    fail_reply(w, "watch", res);
}

/* The URL of the attempt: the list, or the watch from rv. */
static char *attempt_url(const struct kwatch *w, int list, const char *rv)
{
    const char *base = kube_base_url(w->k), *ns = kube_namespace(w->k);
    const char *none = w->table ? "&includeObject=None" : "";
    if (list)
        return ra_asprintf("%s%s/namespaces/%s/%s?fieldSelector=metadata.name%%3D%s%s", base,
                           w->res->api, ns, w->resource, w->name, none);
    return ra_asprintf("%s%s/namespaces/%s/%s?fieldSelector=metadata.name%%3D%s%s&watch=1"
                       "&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%llu",
                       base, w->res->api, ns, w->resource, w->name, none, rv,
                       (unsigned long long)w->timeout_s);
}

/* Starts the list, the resync or the watch, whichever is due. */
static void attempt(struct kwatch *w)
{
    int list = !w->listed || (w->need_list && !w->table);
    int resync = !list && w->need_list; /* a Secret: its state from a watch */
    char *url = attempt_url(w, list, resync ? "0" : w->watch_rv);
    char accept[128];
    snprintf(accept, sizeof accept, "Accept: %s",
             w->table ? KWATCH_ACCEPT_TABLE
             : list   ? KWATCH_ACCEPT_LIST
                      : KWATCH_ACCEPT_WATCH);
    const char *headers[] = {accept, "User-Agent: reload-agent"};
    struct httpc_req req = {
        .method = "GET",
        .url = url,
        .headers = headers,
        .nheaders = 2,
        .timeout_ms = list ? LIST_TIMEOUT_MS : (w->timeout_s + CLIENT_MARGIN_S) * 1000,
        .ca_file = kube__ca_path(w->k),
        .whole_body = 1,
        .bearer_token = kube__token(w->k, &w->token_gen),
        .on_data = list ? NULL : on_data,
        .data_ud = w,
    };
    w->phase = list ? PH_LIST : PH_WATCH;
    w->started = uv_now(kube__loop(w->k));
    w->got_head = w->stream_failed = w->stream_gone = w->resync_events = 0;
    w->events = w->bookmarks = 0;
    w->resync = resync;
    if (list)
        w->st.lists++;
    else
        w->st.watches++;
    if (resync) w->st.resyncs++;
    int r =
        httpc_request(kube__httpc(w->k), &req, list ? on_list_done : on_watch_done, w, &w->xfer);
    free(url);
    if (r < 0) {
        w->xfer = NULL;
        fail(w, 0, "%s %s %s: cannot start the request: %s", list ? "list" : "watch", w->resource,
             w->name, strerror(-r));
        return;
    }
    if (!list) uv_timer_start(&w->timer, on_stall, KWATCH_HEAD_TIMEOUT_MS, 0);
}

/* ---- public ---- */

int kwatch_start(struct kube *k, const struct kwatch_opts *o, kwatch_cb cb, void *ud,
                 struct kwatch **out)
{
    if (!k || !o || !cb || !o->resource || !o->name) return -EINVAL;
    const struct kw_res *res = NULL;
    for (size_t i = 0; i < sizeof RESOURCES / sizeof RESOURCES[0]; i++)
        if (strcmp(o->resource, RESOURCES[i].resource) == 0) res = &RESOURCES[i];
    if (!res) return -EINVAL;
    if (!k8s_is_dns1123_subdomain(o->name)) return -EINVAL;
    struct kwatch *w = calloc(1, sizeof *w);
    if (!w) ra_oom();
    w->k = k;
    w->cb = cb;
    w->ud = ud;
    w->resource = ra_strdup(o->resource);
    w->name = ra_strdup(o->name);
    w->lines.max = KWATCH_MAX_EVENT;
    w->res = res;
    w->role = o->role;
    w->table = res->table;
    w->timeout_s =
        o->watch_timeout_s ? o->watch_timeout_s : 1800 + ra_rng_below(ra_rng_process(), 1801);
    w->policy = (struct backoff){o->retry_base_ms ? o->retry_base_ms : KWATCH_RETRY_BASE_MS,
                                 o->retry_cap_ms ? o->retry_cap_ms : KWATCH_RETRY_CAP_MS,
                                 BACKOFF_JITTER_SPREAD};
    w->need_list = 1;
    uv_timer_init(kube__loop(k), &w->timer);
    w->timer.data = w;
    w->phase = PH_WAIT;
    uv_timer_start(&w->timer, on_timer, 0, 0); /* never from inside this call */
    *out = w;
    return 0;
}

void kwatch_get_stats(const struct kwatch *w, struct kwatch_stats *s)
{
    *s = w->st;
    s->failures = w->fails;
    s->rv = w->rv;
    s->watch_rv = w->watch_rv;
}

static void on_closed(uv_handle_t *h)
{
    struct kwatch *w = h->data;
    void (*done)(void *) = w->close_done;
    void *ud = w->close_ud;

    lines_free(&w->lines);
    free(w->resource);
    free(w->name);
    free(w);
    if (done) done(ud);
}

void kwatch_close(struct kwatch *w, void (*done)(void *), void *ud)
{
    if (!w || w->closing) return;
    w->closing = 1;
    w->close_done = done;
    w->close_ud = ud;
    /* From inside on_data the reader stops its stream by returning 1 (its
     * done callback then sees closing); elsewhere the transfer is cancelled
     * (a no-op from inside its own done callback). */
    if (w->xfer && !w->in_data) {
        httpc_cancel(w->xfer);
        w->xfer = NULL;
    }
    uv_close((uv_handle_t *)&w->timer, on_closed);
}
