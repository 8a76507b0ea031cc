/*
 * validate.c - one validation of new content (see validate.h) on
 * run/checkrun.h.
 */
#include "run/validate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions/exec.h"
#include "base/log.h"
#include "base/text.h"
#include "run/checkrun.h"

struct validate {
    struct checkrun *run;
    validate_done cb;
    void *ud;
    uint64_t timeout_ms;
    uint64_t t0;
};

void validate_first_lines(const char *out, size_t len, char *buf, size_t n)
{
    size_t used = 0, lines = 0;
    const char *p = out, *end = out + len;
    if (n > VALIDATE_LINES_BYTES + 1) n = VALIDATE_LINES_BYTES + 1;
    buf[0] = '\0';
    while (p < end && lines < VALIDATE_LINES_MAX && used + 4 < n) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        while (l && (p[l - 1] == '\r' || p[l - 1] == ' ' || p[l - 1] == '\t')) l--;
        if (l) {
            if (lines++) used += (size_t)snprintf(buf + used, n - used, " | ");
            used += ra_one_linen(buf + used, n - used, p, l);
        }
        p = nl ? nl + 1 : end;
    }
}

static void on_done(void *ud, const struct vproto_result *r)
{
    struct validate *v = ud;
    char summary[800], lines[VALIDATE_LINES_BYTES + 1];
    struct validate_outcome o = {.summary = summary, .lines = lines};
    vproto_describe(r, v->timeout_ms, summary, sizeof summary);
    validate_first_lines(r->output ? r->output : "", r->output_len, lines, sizeof lines);
    o.verdict = !r->ran ? VALIDATE_ERROR : vproto_passed(r) ? VALIDATE_ACCEPTED : VALIDATE_REJECTED;
    o.seconds = (double)(uv_hrtime() - v->t0) / 1e9;
    validate_done cb = v->cb;
    void *cud = v->ud;
    free(v);
    cb(cud, &o);
}

int validate_start(uv_loop_t *loop, const char *command, uint64_t timeout_ms, const char *socket,
                   validate_done cb, void *ud, struct validate **out)
{
    char **argv;
    int rc = exec_split(command, &argv);
    if (rc < 0) return rc;
    struct validate *v = calloc(1, sizeof *v);
    if (!v) ra_oom();
    *v = (struct validate){.cb = cb, .ud = ud, .timeout_ms = timeout_ms, .t0 = uv_hrtime()};
    rc = checkrun_start(loop, socket, argv, timeout_ms, on_done, v, &v->run);
    exec_argv_free(argv);
    if (rc < 0) {
        free(v);
        return rc;
    }
    *out = v;
    return 0;
}

void validate_cancel(struct validate *v)
{
    checkrun_cancel(v->run);
    free(v);
}
