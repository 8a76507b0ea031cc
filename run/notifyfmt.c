/*
 * notifyfmt.c - the four notification bodies (see notifyfmt.h): plain JSON,
 * Slack, Microsoft Teams and Google Chat, built with cJSON (so every value
 * is escaped as JSON wants) from one struct notify_event.
 */
#include "run/notifyfmt.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/buf.h"
#include "base/log.h"

const char *const notify_format_names[] = {"json", "slack", "teams", "gchat", NULL};

static int set(const char *s) { return s && *s; }

const char *notify_result(const struct notify_event *ev) { return ev->ok ? "success" : "failure"; }

/* What the event is, in words: "signal reload succeeded", "content rejected". */
static void headline(const struct notify_event *ev, char *out, size_t n)
{
    const char *e = set(ev->event) ? ev->event : "reload";
    const char *a = set(ev->action) ? ev->action : "";
    if (strcmp(e, "reload") == 0)
        snprintf(out, n, "%s%sreload %s", a, *a ? " " : "", ev->ok ? "succeeded" : "failed");
    else if (strcmp(e, "rejected") == 0)
        snprintf(out, n, "new content rejected by --validate, not acted on");
    else if (strcmp(e, "rollback") == 0)
        snprintf(out, n, "new content failed --verify: rolled back to the last good copy");
    else if (strcmp(e, "verify-failed") == 0)
        snprintf(out, n, "new content applied but failed --verify");
    else if (strcmp(e, "storm-halted") == 0)
        snprintf(out, n, "reload storm: the agent stopped acting");
    else if (strcmp(e, "stage-halted") == 0)
        snprintf(out, n, "change halted for the workload by the stage gate");
    else
        snprintf(out, n, "%s", e);
}

void notifyfmt_summary(const struct notify_event *ev, char *out, size_t n)
{
    char h[160];
    headline(ev, h, sizeof h);
    snprintf(out, n, "%s%s on pod %s%s%s%s%s%s", ev->dry_run ? "[dry run] " : "", h,
             set(ev->namespace_) ? ev->namespace_ : "", set(ev->namespace_) ? "/" : "",
             set(ev->pod) ? ev->pod : "(unknown)", set(ev->workload) ? " (" : "",
             set(ev->workload) ? ev->workload : "", set(ev->workload) ? ")" : "");
}

static void rfc3339(int64_t ms, char *out, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (ms <= 0 || !gmtime_r(&t, &tm) || !strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, n, "%s", "");
}

/* The files, ", "-joined, with "and N more"; "" when none. */
static void files_text(const struct notify_event *ev, struct buf *b)
{
    for (size_t i = 0; i < ev->nfiles; i++) buf_printf(b, "%s%s", i ? ", " : "", ev->files[i]);
    if (ev->files_more) buf_printf(b, " and %zu more", ev->files_more);
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (set(v) && !cJSON_AddStringToObject(o, k, v)) ra_oom();
}

/* {"source": "reload-agent", "event", "result", "summary", ...}: every
 * field of the event, for any receiver. */
static cJSON *render_json(const struct notify_event *ev, const char *summary)
{
    char ts[40];
    cJSON *o = cJSON_CreateObject(), *files = cJSON_CreateArray();
    if (!o || !files) ra_oom();
    add_str(o, "source", "reload-agent");
    add_str(o, "event", set(ev->event) ? ev->event : "reload");
    add_str(o, "result", notify_result(ev));
    add_str(o, "summary", summary);
    add_str(o, "action", ev->action);
    add_str(o, "pod", ev->pod);
    add_str(o, "namespace", ev->namespace_);
    add_str(o, "workload", ev->workload);
    for (size_t i = 0; i < ev->nfiles; i++) {
        cJSON *s = cJSON_CreateString(ev->files[i]);
        if (!s) ra_oom();
        cJSON_AddItemToArray(files, s);
    }
    cJSON_AddItemToObject(o, "files", files);
    if (ev->files_more && !cJSON_AddNumberToObject(o, "filesMore", (double)ev->files_more))
        ra_oom();
    add_str(o, "oldHash", ev->old_hash);
    add_str(o, "newHash", ev->new_hash);
    add_str(o, "detail", ev->detail);
    if (ev->attempt && !cJSON_AddNumberToObject(o, "attempt", ev->attempt)) ra_oom();
    if (ev->dry_run && !cJSON_AddBoolToObject(o, "dryRun", 1)) ra_oom();
    rfc3339(ev->time_unix_ms, ts, sizeof ts);
    add_str(o, "time", ts);
    return o;
}

/* The facts every chat format shows, as (name, value) pairs; returns how
 * many. The values point into ev or into hold (files). */
static size_t facts(const struct notify_event *ev, struct buf *hold, const char *name[8],
                    const char *val[8])
{
    size_t n = 0;
    char *f;
    const char *names[] = {"Pod", "Namespace", "Workload", "Action", "Old hash", "New hash"};
    const char *vals[] = {ev->pod,    ev->namespace_, ev->workload,
                          ev->action, ev->old_hash,   ev->new_hash};
    for (size_t i = 0; i < 6; i++)
        if (set(vals[i])) name[n] = names[i], val[n++] = vals[i];
    files_text(ev, hold);
    f = hold->len ? hold->p : NULL;
    if (set(f)) name[n] = "Files", val[n++] = f;
    if (set(ev->detail)) name[n] = ev->ok ? "Detail" : "Error", val[n++] = ev->detail;
    return n;
}

/* Slack's mrkdwn wants &, < and > escaped; Slack's limits: 3000 bytes in a
 * section's text, 2000 in a field. */
static char *slack_escape(const char *s, size_t max)
{
    struct buf b = {0};
    for (; *s && b.len < max; s++) {
        if (*s == '&')
            buf_puts(&b, "&amp;");
        else if (*s == '<')
            buf_puts(&b, "&lt;");
        else if (*s == '>')
            buf_puts(&b, "&gt;");
        else
            buf_putc(&b, *s);
    }
    char *r = buf_take(&b, NULL);
    if (!r) ra_oom();
    return r;
}

static cJSON *mrkdwn(const char *text)
{
    cJSON *t = cJSON_CreateObject();
    if (!t) ra_oom();
    add_str(t, "type", "mrkdwn");
    add_str(t, "text", text);
    return t;
}

/* {"text": summary, "blocks": [a section with the summary, a section with
 * up to 10 fields]}. */
static cJSON *render_slack(const struct notify_event *ev, const char *summary)
{
    const char *name[8], *val[8];
    struct buf hold = {0};
    size_t n = facts(ev, &hold, name, val);
    cJSON *o = cJSON_CreateObject(), *blocks = cJSON_CreateArray();
    cJSON *head = cJSON_CreateObject(), *body = cJSON_CreateObject(), *fields = cJSON_CreateArray();
    if (!o || !blocks || !head || !body || !fields || hold.oom) ra_oom();
    add_str(o, "text", summary);
    char *es = slack_escape(summary, 2900), line[3000];
    snprintf(line, sizeof line, "%s *%s*", ev->ok ? ":white_check_mark:" : ":warning:", es);
    free(es);
    add_str(head, "type", "section");
    cJSON_AddItemToObject(head, "text", mrkdwn(line));
    cJSON_AddItemToArray(blocks, head);
    for (size_t i = 0; i < n; i++) {
        char *ev_ = slack_escape(val[i], 1900);
        snprintf(line, sizeof line, "*%s*\n%s", name[i], ev_);
        free(ev_);
        cJSON_AddItemToArray(fields, mrkdwn(line));
    }
    add_str(body, "type", "section");
    cJSON_AddItemToObject(body, "fields", fields);
    cJSON_AddItemToArray(blocks, body);
    cJSON_AddItemToObject(o, "blocks", blocks);
    buf_free(&hold);
    return o;
}

static cJSON *text_block(const char *text, int bold)
{
    cJSON *t = cJSON_CreateObject();
    if (!t) ra_oom();
    add_str(t, "type", "TextBlock");
    add_str(t, "text", text);
    if (!cJSON_AddBoolToObject(t, "wrap", 1)) ra_oom();
    if (bold) add_str(t, "weight", "Bolder");
    return t;
}

/* {"type": "message", "attachments": [{"contentType":
 * "application/vnd.microsoft.card.adaptive", "content": an AdaptiveCard
 * with the summary and a FactSet}]}. */
static cJSON *render_teams(const struct notify_event *ev, const char *summary)
{
    const char *name[8], *val[8];
    struct buf hold = {0};
    size_t n = facts(ev, &hold, name, val);
    cJSON *o = cJSON_CreateObject(), *atts = cJSON_CreateArray(), *att = cJSON_CreateObject();
    cJSON *card = cJSON_CreateObject(), *body = cJSON_CreateArray();
    cJSON *set_ = cJSON_CreateObject(), *fs = cJSON_CreateArray();
    if (!o || !atts || !att || !card || !body || !set_ || !fs || hold.oom) ra_oom();
    add_str(o, "type", "message");
    add_str(att, "contentType", "application/vnd.microsoft.card.adaptive");
    add_str(card, "$schema", "http://adaptivecards.io/schemas/adaptive-card.json");
    add_str(card, "type", "AdaptiveCard");
    add_str(card, "version", "1.4");
    cJSON_AddItemToArray(body, text_block(summary, 1));
    for (size_t i = 0; i < n; i++) {
        cJSON *f = cJSON_CreateObject();
        if (!f) ra_oom();
        add_str(f, "title", name[i]);
        add_str(f, "value", val[i]);
        cJSON_AddItemToArray(fs, f);
    }
    add_str(set_, "type", "FactSet");
    cJSON_AddItemToObject(set_, "facts", fs);
    cJSON_AddItemToArray(body, set_);
    cJSON_AddItemToObject(card, "body", body);
    cJSON_AddItemToObject(att, "content", card);
    cJSON_AddItemToArray(atts, att);
    cJSON_AddItemToObject(o, "attachments", atts);
    buf_free(&hold);
    return o;
}

/* {"text": "*summary*\nName: value\n..."}: Google Chat's simple text. */
static cJSON *render_gchat(const struct notify_event *ev, const char *summary)
{
    const char *name[8], *val[8];
    struct buf hold = {0}, t = {0};
    size_t n = facts(ev, &hold, name, val);
    buf_printf(&t, "*%s*", summary);
    for (size_t i = 0; i < n; i++) buf_printf(&t, "\n%s: %s", name[i], val[i]);
    cJSON *o = cJSON_CreateObject();
    if (!o || hold.oom || t.oom) ra_oom();
    add_str(o, "text", t.p);
    buf_free(&hold);
    buf_free(&t);
    return o;
}

char *notifyfmt_render(enum notify_format f, const struct notify_event *ev, size_t *len)
{
    char summary[600];
    cJSON *o;
    notifyfmt_summary(ev, summary, sizeof summary);
    switch (f) {
    case NOTIFY_JSON: o = render_json(ev, summary); break;
    case NOTIFY_SLACK: o = render_slack(ev, summary); break;
    case NOTIFY_TEAMS: o = render_teams(ev, summary); break;
    case NOTIFY_GCHAT: o = render_gchat(ev, summary); break;
    default: return NULL;
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) ra_oom();
    if (len) *len = strlen(s);
    return s;
}
