/*
 * kwatch.c - list + watch of one object by name, metadata only (contract
 * in kwatch.h).
 *
 * One struct kwatch runs one request at a time on httpc directly (not
 * through kube_request: a watch is streamed, and one backoff here covers
 * both the list and the watch): LIST, then WATCH from the list's
 * resourceVersion, then WATCH again from the last event or bookmark when
 * the server ends the stream, and LIST again after a 410. Between a
 * failure and the next attempt its one uv_timer_t waits the backoff; while
 * a stream is open no timer runs (libcurl's own is the stream's deadline,
 * timeoutSeconds plus a margin), so an idle watch costs no wake-up until
 * the server sends something (a bookmark about once a minute).
 *
 * The stream is cut into lines in a buffer of at most KWATCH_MAX_EVENT
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
#include "base/log.h"
#include "base/text.h"
#include "kube/k8sname.h"
#include "net/httpc.h"

#define CLIENT_MARGIN_S 60 /* the client's deadline beyond the server's timeoutSeconds */
#define LIST_TIMEOUT_MS 10000
#define QUICK_END_MS 5000 /* a clean end this soon, with nothing read, counts as a failure */

enum phase { PH_WAIT, PH_LIST, PH_WATCH };

struct kwatch {
    struct kube *k;
    kwatch_cb cb;
    void *ud;
    char *resource, *name;
    uint64_t timeout_s;
    int table; /* Secrets: a Table without objects, not PartialObjectMetadata */
    struct backoff policy;
    uv_timer_t timer;
    struct httpc_xfer *xfer;
    enum phase phase;
    int attempt;    /* failures in a row (the backoff's attempt number) */
    int listed;     /* the first list succeeded */
    int need_list;  /* the next attempt lists (first, or after a 410) */
    int rv_unknown; /* it exists at a resourceVersion not known (a Table list) */
    int closing;
    int in_data;        /* inside on_data: httpc's reader may not cancel its own transfer */
    unsigned token_gen; /* of the attempt in flight */
    uint64_t started;   /* uv_now of the attempt in flight */
    int got_any;        /* the stream delivered at least one line */
    int stream_failed;  /* the reader stopped the stream with an error */
    char rv[128];       /* the object's last known resourceVersion */
    char watch_rv[128]; /* where the next watch resumes */
    char *line;         /* partial event line */
    size_t line_len, line_cap;
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

int kwatch__parse_event(const char *line, size_t len, int table, struct kwatch__event *ev,
                        char *err, size_t errlen)
{
    const char *want = table ? "Table" : "PartialObjectMetadata";
    static const char *const types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    cJSON *j = cJSON_ParseWithLength(line, len);
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(j, "object");
    const char *type = str_at(j, "type");
    int rc = -EINVAL;

    memset(ev, 0, sizeof *ev);
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
    const char *want = table ? "Table" : "PartialObjectMetadataList";
    cJSON *j = cJSON_ParseWithLength(body, len);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items"), *it;
    const char *kind = str_at(j, "kind");
    int rc = -EINVAL;

    *exists = 0;
    obj_rv[0] = '\0';
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
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(it, "metadata");
        const char *n = str_at(meta, "name");
        if (!n || strcmp(n, name) != 0) continue; /* the field selector should have left it out */
        if (copy_rv(obj_rv, rvlen, str_at(meta, "resourceVersion")) < 0) {
            snprintf(err, errlen, "the listed object has no valid metadata.resourceVersion");
            goto out;
        }
        *exists = 1;
    }
    rc = 0;
out:
    cJSON_Delete(j);
    return rc;
}

/* ---- the attempts ---- */

static void attempt(struct kwatch *w);

static void report_state(struct kwatch *w, int exists, int initial, int relist)
{
    struct kwatch_event ev = {.what = KWATCH_STATE,
                              .exists = exists,
                              .rv = exists ? w->rv : "",
                              .rv_unknown = exists && w->rv_unknown,
                              .initial = initial,
                              .relist = relist};
    w->cb(w->ud, &ev);
}

static void report_error(struct kwatch *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void report_error(struct kwatch *w, const char *fmt, ...)
{
    char raw[2048], msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    ra_one_line(msg, sizeof msg, raw);
    w->st.errors++;
    struct kwatch_event ev = {.what = KWATCH_ERROR, .error = msg};
    w->cb(w->ud, &ev);
}

static void on_timer(uv_timer_t *t) { attempt(t->data); }

/* The next attempt after a failure: the backoff, then the same phase. */
static void retry_later(struct kwatch *w)
{
    w->attempt++;
    uint64_t ms = backoff_next(&w->policy, w->attempt, ra_rng_process());
    w->phase = PH_WAIT;
    uv_timer_start(&w->timer, on_timer, ms, 0);
}

static void line_wipe(struct kwatch *w)
{
    if (w->line) explicit_bzero(w->line, w->line_cap);
    w->line_len = 0;
}

/* Reports a list or watch (verb) that got no response or a status other
 * than 200: the transfer's error, a rejected token (re-read before the next
 * request), or the API server's Status with the RBAC hint of fast sync. */
static void report_failed_reply(struct kwatch *w, const char *verb, const struct httpc_result *res)
{
    if (!res->ok) {
        report_error(w, "%s %s %s: %s", verb, w->resource, w->name, res->error);
        return;
    }
    if (res->status == 401) {
        kube__token_rejected(w->k, w->token_gen);
        report_error(w, "%s %s %s: Unauthorized: the token was rejected", verb, w->resource,
                     w->name);
        return;
    }
    char path[512], err[1536];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/%s", kube_namespace(w->k), w->resource);
    struct kube_req req = {.verb = verb,
                           .resource = w->resource,
                           .group = "",
                           .method = "GET",
                           .path = path,
                           .role = KUBE_ROLE_FAST_SYNC};
    kube__http_error(w->k, &req, res->status, res->body, res->body_len, err, sizeof err);
    report_error(w, "%s %s %s: %s", verb, w->resource, w->name, err);
}

static void on_list_done(void *ud, const struct httpc_result *res)
{
    struct kwatch *w = ud;
    char err[1536], list_rv[128], obj_rv[128];
    int exists;

    w->xfer = NULL;
    kube__count_response(w->k, res->ok ? res->status : 0);
    if (!res->ok || res->status != 200) {
        report_failed_reply(w, "list", res);
    } else if (kwatch__parse_list(res->body, res->body_len, w->name, w->table, list_rv,
                                  sizeof list_rv, &exists, obj_rv, err, sizeof err) < 0) {
        report_error(w, "list %s %s: %s", w->resource, w->name, err);
    } else {
        int initial = !w->listed;
        w->listed = 1;
        w->need_list = 0;
        w->attempt = 0;
        snprintf(w->watch_rv, sizeof w->watch_rv, "%s", list_rv);
        snprintf(w->rv, sizeof w->rv, "%s", exists ? obj_rv : "");
        w->rv_unknown = w->table && exists; /* a Table row has no resourceVersion */
        report_state(w, exists, initial, !initial);
        if (w->closing) return;
        attempt(w);
        return;
    }
    if (!w->closing) retry_later(w);
}

/* One event line of the stream. Returns 0 to read on, 1 to stop (a 410
 * or a malformed event: the state is set for the next attempt). */
static int on_line(struct kwatch *w, const char *line, size_t len)
{
    struct kwatch__event ev;
    char err[1536];

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
    if (len == 0) return 0;
    w->got_any = 1;
    if (kwatch__parse_event(line, len, w->table, &ev, err, sizeof err) < 0) {
        w->stream_failed = 1;
        w->need_list = 1; /* what was missed is unknown: start over */
        report_error(w, "watch %s %s: %s", w->resource, w->name, err);
        return 1;
    }
    switch (ev.type) {
    case KWATCH__BOOKMARK:
        w->st.bookmarks++;
        snprintf(w->watch_rv, sizeof w->watch_rv, "%s", ev.rv);
        return 0;
    case KWATCH__ERROR:
        if (ev.code == 410) {
            w->st.gone++;
            w->need_list = 1;
            log_debug("watch %s %s: 410 Gone (%s): relisting", w->resource, w->name, ev.message);
            return 1;
        }
        w->stream_failed = 1;
        report_error(w, "watch %s %s: the server sent an error (code %ld): %s", w->resource,
                     w->name, ev.code, ev.message);
        return 1;
    default:
        w->st.events++;
        w->attempt = 0;
        snprintf(w->watch_rv, sizeof w->watch_rv, "%s", ev.rv);
        snprintf(w->rv, sizeof w->rv, "%s", ev.type == KWATCH__DELETED ? "" : ev.rv);
        w->rv_unknown = 0;
        report_state(w, ev.type != KWATCH__DELETED, 0, 0);
        return w->closing ? 1 : 0;
    }
}

static int on_data_lines(struct kwatch *w, const char *data, size_t n);

static int on_data(void *ud, const char *data, size_t n)
{
    struct kwatch *w = ud;

    w->in_data = 1;
    int stop = on_data_lines(w, data, n);
    w->in_data = 0;
    return stop || w->closing;
}

static int on_data_lines(struct kwatch *w, const char *data, size_t n)
{
    while (n > 0) {
        const char *nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;
        if (w->line_len + take > KWATCH_MAX_EVENT) {
            line_wipe(w);
            w->stream_failed = 1;
            w->need_list = 1;
            report_error(w, "watch %s %s: an event exceeds %d bytes", w->resource, w->name,
                         KWATCH_MAX_EVENT);
            return 1;
        }
        if (w->line_len + take + 1 > w->line_cap) {
            size_t cap = w->line_cap ? w->line_cap : 4096;
            while (cap < w->line_len + take + 1) cap *= 2;
            char *p = malloc(cap);
            if (!p) ra_oom();
            if (w->line) {
                memcpy(p, w->line, w->line_len);
                explicit_bzero(w->line, w->line_cap);
                free(w->line);
            }
            w->line = p;
            w->line_cap = cap;
        }
        memcpy(w->line + w->line_len, data, take);
        w->line_len += take;
        data += take;
        n -= take;
        if (!nl) break;
        data++, n--; /* the newline */
        int stop = on_line(w, w->line, w->line_len);
        line_wipe(w);
        if (stop) return 1;
    }
    return 0;
}

static void on_watch_done(void *ud, const struct httpc_result *res)
{
    struct kwatch *w = ud;
    uint64_t lasted = uv_now(kube__loop(w->k)) - w->started;

    w->xfer = NULL;
    w->st.streaming = 0;
    line_wipe(w); /* a partial last line is dropped: the next watch resumes before it */
    kube__count_response(w->k, res->ok ? res->status : 0);
    if (w->closing) return;
    if (w->need_list && !w->stream_failed) { /* a 410 in the stream */
        attempt(w);
        return;
    }
    if (w->stream_failed) {
        retry_later(w);
        return;
    }
    if (res->ok && res->status == 200) {
        /* the server ended the stream (timeoutSeconds): resume, unless it
         * ends at once again and again with nothing read */
        if (!w->got_any && lasted < QUICK_END_MS) {
            report_error(w,
                         "watch %s %s: the server ended the stream after %llu ms without an "
                         "event",
                         w->resource, w->name, (unsigned long long)lasted);
            if (!w->closing) retry_later(w);
            return;
        }
        attempt(w);
        return;
    }
    if (res->ok && res->status == 410) {
        w->st.gone++;
        w->need_list = 1;
        attempt(w);
        return;
    }
    report_failed_reply(w, "watch", res);
    if (!w->closing) retry_later(w);
}

/* Starts the list or the watch, whichever is due. */
static void attempt(struct kwatch *w)
{
    int list = w->need_list || !w->listed;
    char *url;
    const char *base = kube_base_url(w->k), *ns = kube_namespace(w->k);

    const char *none = w->table ? "&includeObject=None" : "";
    if (list)
        url = ra_asprintf("%s/api/v1/namespaces/%s/%s?fieldSelector=metadata.name%%3D%s%s", base,
                          ns, w->resource, w->name, none);
    else
        url = ra_asprintf("%s/api/v1/namespaces/%s/%s?fieldSelector=metadata.name%%3D%s%s&watch=1"
                          "&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%llu",
                          base, ns, w->resource, w->name, none, w->watch_rv,
                          (unsigned long long)w->timeout_s);
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
    w->got_any = 0;
    w->stream_failed = 0;
    if (list)
        w->st.lists++;
    else
        w->st.watches++;
    int r =
        httpc_request(kube__httpc(w->k), &req, list ? on_list_done : on_watch_done, w, &w->xfer);
    free(url);
    if (r < 0) {
        w->xfer = NULL;
        report_error(w, "%s %s %s: cannot start the request: %s", list ? "list" : "watch",
                     w->resource, w->name, strerror(-r));
        if (!w->closing) retry_later(w);
        return;
    }
    if (!list) w->st.streaming = 1;
}

/* ---- public ---- */

int kwatch_start(struct kube *k, const struct kwatch_opts *o, kwatch_cb cb, void *ud,
                 struct kwatch **out)
{
    if (!k || !o || !cb || !o->resource || !o->name) return -EINVAL;
    if (strcmp(o->resource, "configmaps") != 0 && strcmp(o->resource, "secrets") != 0)
        return -EINVAL;
    if (!k8s_is_dns1123_subdomain(o->name)) return -EINVAL;
    struct kwatch *w = calloc(1, sizeof *w);
    if (!w) ra_oom();
    w->k = k;
    w->cb = cb;
    w->ud = ud;
    w->resource = ra_strdup(o->resource);
    w->name = ra_strdup(o->name);
    w->table = strcmp(o->resource, "secrets") == 0;
    w->timeout_s =
        o->watch_timeout_s ? o->watch_timeout_s : 1800 + ra_rng_below(ra_rng_process(), 1801);
    w->policy = (struct backoff){o->retry_base_ms ? o->retry_base_ms : 1000,
                                 o->retry_cap_ms ? o->retry_cap_ms : 30000, BACKOFF_JITTER_SPREAD};
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
    s->rv = w->rv;
    s->watch_rv = w->watch_rv;
}

static void on_closed(uv_handle_t *h)
{
    struct kwatch *w = h->data;
    void (*done)(void *) = w->close_done;
    void *ud = w->close_ud;

    if (w->line) {
        explicit_bzero(w->line, w->line_cap);
        free(w->line);
    }
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
