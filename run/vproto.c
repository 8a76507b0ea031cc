/*
 * vproto.c - the validator protocol's lines (see vproto.h), with cJSON.
 */
#include "run/vproto.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

int vproto_passed(const struct vproto_result *r)
{
    return r->ran && !r->timed_out && !r->term_signal && r->exit_status == 0;
}

/* cJSON's printer, with OOM as the policy says. */
static char *print_line(cJSON *o)
{
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) ra_oom();
    size_t n = strlen(s);
    char *line = realloc(s, n + 2);
    if (!line) ra_oom();
    line[n] = '\n';
    line[n + 1] = '\0';
    return line;
}

char *vproto_request_encode(char *const *argv, uint64_t timeout_ms)
{
    if (!argv || !argv[0]) return NULL;
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "argv");
    if (!o || !a) ra_oom();
    for (size_t i = 0; argv[i]; i++) {
        cJSON *s = cJSON_CreateString(argv[i]);
        if (!s) ra_oom();
        cJSON_AddItemToArray(a, s);
    }
    if (!cJSON_AddNumberToObject(o, "timeout_ms", (double)timeout_ms)) ra_oom();
    char *line = print_line(o);
    if (strlen(line) > VPROTO_REQUEST_MAX) {
        free(line);
        return NULL;
    }
    return line;
}

/* Parses one JSON object line; NULL with why on failure. */
static cJSON *parse_line(const char *line, size_t len, size_t max, char *why, size_t n)
{
    if (len > max) {
        snprintf(why, n, "line exceeds %zu bytes", max);
        return NULL;
    }
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    if (memchr(line, '\0', len)) {
        snprintf(why, n, "line holds a NUL byte");
        return NULL;
    }
    cJSON *o = cJSON_ParseWithLength(line, len);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        snprintf(why, n, "not a JSON object");
        return NULL;
    }
    return o;
}

/* A string of the request holds no NUL: cJSON stops a C string at one, so
 * "\u0000" would cut a word silently. */
static int has_escaped_nul(const char *line, size_t len)
{
    for (size_t i = 0; i + 6 <= len; i++)
        if (line[i] == '\\' && memcmp(line + i + 1, "u0000", 5) == 0) return 1;
    return 0;
}

static int decode_argv(const cJSON *a, char ***argv, char *why, size_t n)
{
    int count = cJSON_GetArraySize(a);
    if (!cJSON_IsArray(a) || count < 1 || count > VPROTO_ARGV_MAX) {
        snprintf(why, n, "\"argv\" must be an array of 1 to %d strings", VPROTO_ARGV_MAX);
        return -EINVAL;
    }
    char **v = calloc((size_t)count + 1, sizeof *v);
    if (!v) ra_oom();
    for (int i = 0; i < count; i++) {
        const cJSON *s = cJSON_GetArrayItem(a, i);
        if (!cJSON_IsString(s) || (i == 0 && !*s->valuestring)) {
            for (int j = 0; j < i; j++) free(v[j]);
            free(v);
            snprintf(why, n, "\"argv\"[%d] must be a%s string", i, i ? "" : " non-empty");
            return -EINVAL;
        }
        v[i] = ra_strdup(s->valuestring);
    }
    *argv = v;
    return 0;
}

int vproto_request_decode(const char *line, size_t len, char ***argv, uint64_t *timeout_ms,
                          char *why, size_t n)
{
    cJSON *o = parse_line(line, len, VPROTO_REQUEST_MAX, why, n);
    if (!o) return -EINVAL;
    int rc = -EINVAL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "timeout_ms");
    if (has_escaped_nul(line, len)) {
        snprintf(why, n, "a string holds a NUL character");
    } else if (!cJSON_IsNumber(t) || t->valuedouble < 1 || t->valuedouble > VPROTO_TIMEOUT_MAX_MS ||
               t->valuedouble != (double)t->valueint) {
        snprintf(why, n, "\"timeout_ms\" must be a whole number from 1 to %d",
                 VPROTO_TIMEOUT_MAX_MS);
    } else if (decode_argv(cJSON_GetObjectItemCaseSensitive(o, "argv"), argv, why, n) == 0) {
        *timeout_ms = (uint64_t)t->valuedouble;
        rc = 0;
    }
    cJSON_Delete(o);
    return rc;
}

char *vproto_reply_encode(const struct vproto_result *r)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) ra_oom();
    if (!r->ran) {
        if (!cJSON_AddStringToObject(o, "error", r->error ? r->error : "could not run")) ra_oom();
        return print_line(o);
    }
    size_t len = r->output_len > VPROTO_OUTPUT_MAX ? VPROTO_OUTPUT_MAX : r->output_len;
    char *out = strndup(r->output ? r->output : "", len);
    if (!out) ra_oom();
    if (!cJSON_AddNumberToObject(o, "exit", (double)r->exit_status) ||
        !cJSON_AddNumberToObject(o, "signal", r->term_signal) ||
        !cJSON_AddBoolToObject(o, "timed_out", r->timed_out) ||
        !cJSON_AddStringToObject(o, "output", out) ||
        !cJSON_AddBoolToObject(o, "truncated", r->output_truncated || len < r->output_len))
        ra_oom();
    free(out);
    return print_line(o);
}

/* The reply of a command that ran: its fields into r, its output into
 * *store. */
static int decode_ran(const cJSON *o, struct vproto_result *r, char **store, char *why, size_t n)
{
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(o, "exit");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(o, "signal");
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(o, "timed_out");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(o, "output");
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(o, "truncated");
    if (!cJSON_IsNumber(ex) || !cJSON_IsNumber(sig) || !cJSON_IsBool(to) || !cJSON_IsString(out)) {
        snprintf(why, n, "a reply needs \"exit\", \"signal\", \"timed_out\" and \"output\"");
        return -EINVAL;
    }
    /* an exit status is a byte (-1 when there is none); a signal is 0 to 64 */
    if (ex->valuedouble < -1 || ex->valuedouble > 255 || sig->valuedouble < 0 ||
        sig->valuedouble > 64) {
        snprintf(why, n, "\"exit\" or \"signal\" is out of range");
        return -EINVAL;
    }
    *store = ra_strdup(out->valuestring);
    r->ran = 1;
    r->exit_status = (int64_t)ex->valuedouble;
    r->term_signal = sig->valueint;
    r->timed_out = cJSON_IsTrue(to);
    r->output = *store;
    r->output_len = strlen(*store);
    r->output_truncated = cJSON_IsTrue(tr);
    return 0;
}

int vproto_reply_decode(const char *line, size_t len, struct vproto_result *r, char **store,
                        char *why, size_t n)
{
    memset(r, 0, sizeof *r);
    *store = NULL;
    cJSON *o = parse_line(line, len, VPROTO_REPLY_MAX, why, n);
    if (!o) return -EINVAL;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(o, "error");
    int rc = 0;
    if (cJSON_IsString(err)) {
        *store = ra_strdup(err->valuestring);
        r->error = *store;
        r->output = "";
    } else {
        rc = decode_ran(o, r, store, why, n);
    }
    cJSON_Delete(o);
    return rc;
}

void vproto_describe(const struct vproto_result *r, uint64_t timeout_ms, char *out, size_t n)
{
    if (!r->ran)
        snprintf(out, n, "%s", r->error ? r->error : "could not run");
    else if (r->timed_out)
        snprintf(out, n, "timed out after %llu ms and was killed", (unsigned long long)timeout_ms);
    else if (r->term_signal)
        snprintf(out, n, "was killed by signal %d", r->term_signal);
    else
        snprintf(out, n, "exited with status %lld", (long long)r->exit_status);
}
