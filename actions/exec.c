/*
 * exec.c - the exec action: split a command line into argv and run it
 * with uv_spawn, with a timeout (see exec.h).
 *
 * The child runs in its own session (UV_PROCESS_DETACHED only means setsid
 * on Unix; the handle is still watched), so a timeout or exec_kill signals
 * the whole process group: `sh -c '...'` and whatever it started.
 *
 * A job owns two handles, the process and the timer. The job is freed in the
 * last close callback, right after the user's callback, so the callback may
 * free whatever ud points to.
 */
#include "actions/exec.h"

#include "actions/action.h"
#include "base/log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXEC_KILL_GRACE_MS 2000

struct exec_job {
    uv_process_t proc;
    uv_timer_t timer;
    uv_pipe_t out; /* with capture: the read end of stdout and stderr */
    exec_done cb;
    void *ud;
    struct exec_result res;
    int open_handles; /* handles not yet closed */
    int exited;       /* exit_cb ran, or the spawn failed */
    int term_sent;    /* SIGTERM sent because of the timeout */
    int capture;      /* out is open */
    int out_closing;  /* out is closing (EOF, error, or drained) */
    uint64_t timeout_ms;
    char *buf; /* with capture: capture_max + 1 bytes */
    size_t len, max;
    char rbuf[4096];
};

/* A growing byte buffer for the word being built. */
struct word {
    char *s;
    size_t len, cap;
};

static int word_add(struct word *w, char c)
{
    if (w->len + 1 >= w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 32;
        char *ns = realloc(w->s, ncap);
        if (!ns) return -ENOMEM;
        w->s = ns;
        w->cap = ncap;
    }
    w->s[w->len++] = c;
    w->s[w->len] = '\0';
    return 0;
}

/* Appends the finished word (maybe empty, as from '') to the
 * NULL-terminated vector *v of n entries. On failure w still owns its text. */
static int argv_push(char ***v, size_t *n, struct word *w)
{
    if (!w->s && !(w->s = strdup(""))) return -ENOMEM;
    char **nv = realloc(*v, (*n + 2) * sizeof *nv);
    if (!nv) return -ENOMEM;
    nv[(*n)++] = w->s;
    nv[*n] = NULL;
    *v = nv;
    *w = (struct word){0};
    return 0;
}

void exec_argv_free(char **argv)
{
    if (!argv) return;
    for (char **p = argv; *p; p++) free(*p);
    free(argv);
}

int exec_split_err(const char *cmd, char ***argv, const char **why)
{
    const char *reason = NULL;
    char **v = NULL;
    size_t n = 0;
    struct word w = {0};
    int in_word = 0, r = 0;
    const char *p = cmd;

    while (r == 0 && *p) {
        char c = *p++;
        if (c == ' ' || c == '\t' || c == '\n') {
            if (in_word) r = argv_push(&v, &n, &w);
            in_word = 0;
        } else if (c == '\\') {
            if (!*p) {
                reason = "trailing backslash";
                r = -EINVAL;
            } else if (*p == '\n') {
                p++; /* line continuation */
            } else {
                r = word_add(&w, *p++);
                in_word = 1;
            }
        } else if (c == '\'') {
            in_word = 1;
            while (*p && *p != '\'' && r == 0) r = word_add(&w, *p++);
            if (r == 0 && !*p) {
                reason = "unterminated single quote";
                r = -EINVAL;
            } else if (r == 0) {
                p++; /* the closing quote */
            }
        } else if (c == '"') {
            in_word = 1;
            while (*p && *p != '"' && r == 0) {
                /* Inside double quotes backslash escapes only $ ` " \ and newline. */
                if (*p == '\\' && p[1] && strchr("$`\"\\\n", p[1])) {
                    p++;
                    if (*p == '\n') {
                        p++;
                        continue;
                    }
                }
                r = word_add(&w, *p++);
            }
            if (r == 0 && !*p) {
                reason = "unterminated double quote";
                r = -EINVAL;
            } else if (r == 0) {
                p++; /* the closing quote */
            }
        } else {
            r = word_add(&w, c);
            in_word = 1;
        }
    }
    if (r == 0 && in_word) r = argv_push(&v, &n, &w);
    if (r == 0 && n == 0) {
        reason = "empty command";
        r = -EINVAL;
    }
    if (r < 0) {
        free(w.s);
        exec_argv_free(v);
        if (why) *why = reason ? reason : "out of memory";
        return r;
    }
    *argv = v;
    return 0;
}

int exec_split(const char *cmd, char ***argv) { return exec_split_err(cmd, argv, NULL); }

static void on_close(uv_handle_t *h)
{
    struct exec_job *job = h->data;
    if (--job->open_handles > 0) return;
    if (job->capture) {
        job->buf[job->len] = '\0';
        job->res.output = job->buf;
        job->res.output_len = job->len;
    }
    job->cb(job->ud, &job->res);
    free(job->buf);
    free(job);
}

/* The output pipe is done (EOF, a read error, or the drain time after the
 * exit ran out). */
static void close_out(struct exec_job *job)
{
    if (!job->capture || job->out_closing) return;
    job->out_closing = 1;
    uv_close((uv_handle_t *)&job->out, on_close);
    if (job->exited) uv_close((uv_handle_t *)&job->timer, on_close);
}

static void on_drained(uv_timer_t *t) { close_out(t->data); }

/* The process is gone: its handle closes; the timer too, unless the output
 * pipe is still being read (then it bounds that, EXEC_DRAIN_MS). */
static void finish(struct exec_job *job)
{
    job->exited = 1;
    uv_close((uv_handle_t *)&job->proc, on_close);
    if (job->capture && !job->out_closing) {
        uv_timer_start(&job->timer, on_drained, EXEC_DRAIN_MS, 0);
        return;
    }
    uv_close((uv_handle_t *)&job->timer, on_close);
}

static void on_proc_exit(uv_process_t *proc, int64_t exit_status, int term_signal)
{
    struct exec_job *job = proc->data;
    job->res.exit_status = exit_status;
    job->res.term_signal = term_signal;
    finish(job);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct exec_job *job = h->data;
    (void)suggested;
    *b = uv_buf_init(job->rbuf, sizeof job->rbuf);
}

/* Keeps the first max bytes; the rest is read and dropped. */
static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct exec_job *job = s->data;
    if (n < 0) {
        close_out(job);
        return;
    }
    size_t take = (size_t)n <= job->max - job->len ? (size_t)n : job->max - job->len;
    memcpy(job->buf + job->len, b->base, take);
    job->len += take;
    if (take < (size_t)n) job->res.output_truncated = 1;
}

/* Signals the child's process group, or the child alone if it left it.
 * Only called while the child has not been reaped, so its PID (which is
 * also the group's ID) cannot have been reused. */
static void send_signal(struct exec_job *job, int sig)
{
    if (job->proc.pid > 0 && kill(-job->proc.pid, sig) < 0) uv_process_kill(&job->proc, sig);
}

static void on_timer(uv_timer_t *t)
{
    struct exec_job *job = t->data;
    if (!job->term_sent) {
        log_warn("command timed out after %llu ms: sending SIGTERM to pid %d",
                 (unsigned long long)job->timeout_ms, job->proc.pid);
        job->res.timed_out = 1;
        job->term_sent = 1;
        send_signal(job, SIGTERM);
        uv_timer_start(&job->timer, on_timer, EXEC_KILL_GRACE_MS, 0);
    } else {
        log_warn("command still running %d ms after SIGTERM: sending SIGKILL to pid %d",
                 EXEC_KILL_GRACE_MS, job->proc.pid);
        send_signal(job, SIGKILL);
    }
}

/* The pipe both stdout and stderr of the child write into: fds[0] becomes
 * job->out (counted in open_handles once initialised), fds[1] goes to the
 * child only. Returns 0 or a UV_E* code (then nothing is left open but
 * job->out, when job->capture says it was initialised). */
static int open_capture(uv_loop_t *loop, struct exec_job *job, size_t max, uv_file fds[2])
{
    int rc = uv_pipe(fds, UV_NONBLOCK_PIPE, 0);
    if (rc < 0) return rc;
    job->buf = malloc(max + 1);
    if (!job->buf) ra_oom();
    job->max = max;
    uv_pipe_init(loop, &job->out, 0);
    job->out.data = job;
    job->capture = 1;
    job->open_handles++;
    if ((rc = uv_pipe_open(&job->out, fds[0])) < 0) {
        close(fds[0]);
        close(fds[1]);
    }
    return rc;
}

/* Spawns the child; a failure is reported through the callback. */
static void spawn(uv_loop_t *loop, struct exec_job *job, const struct exec_opts *o, uv_file wfd)
{
    uv_stdio_container_t stdio[3] = {
        {.flags = UV_IGNORE}, /* libuv opens /dev/null for an ignored stdin */
        {.flags = UV_INHERIT_FD, .data.fd = job->capture ? wfd : 1},
        {.flags = UV_INHERIT_FD, .data.fd = job->capture ? wfd : 2},
    };
    uv_process_options_t opt = {
        .exit_cb = on_proc_exit,
        .file = o->argv[0],
        .args = (char **)o->argv,
        .flags = UV_PROCESS_DETACHED,
        .stdio_count = 3,
        .stdio = stdio,
    };
    job->open_handles++; /* uv_spawn initialises the handle even when it fails */
    int r = uv_spawn(loop, &job->proc, &opt);
    if (job->capture) {
        close(wfd); /* the child holds its copy: EOF comes when the last writer ends */
        uv_read_start((uv_stream_t *)&job->out, on_alloc, on_read);
    }
    if (r < 0) {
        /* The close callbacks run on a later loop iteration: that is the
         * asynchronous report of the spawn failure. */
        job->res.spawn_error = r;
        close_out(job);
        finish(job);
    } else if (o->timeout_ms > 0) {
        uv_update_time(loop); /* count from now, not from the loop's cached time */
        uv_timer_start(&job->timer, on_timer, o->timeout_ms, 0);
    }
}

int exec_run(uv_loop_t *loop, const struct exec_opts *o, exec_done cb, void *ud,
             struct exec_job **jobp)
{
    uv_file fds[2] = {-1, -1};
    if (!o->argv || !o->argv[0]) return -EINVAL;
    struct exec_job *job = calloc(1, sizeof *job);
    if (!job) ra_oom();
    job->cb = cb;
    job->ud = ud;
    job->timeout_ms = o->timeout_ms;
    job->open_handles = 1; /* the timer; the pipe and the process count when made */
    uv_timer_init(loop, &job->timer);
    job->timer.data = job;
    job->proc.data = job;
    int r = o->capture_max ? open_capture(loop, job, o->capture_max, fds) : 0;
    if (r < 0) {
        /* reported like a spawn failure, through the callback */
        job->res.spawn_error = r;
        job->exited = 1;
        if (job->capture) {
            job->out_closing = 1;
            uv_close((uv_handle_t *)&job->out, on_close);
        }
        uv_close((uv_handle_t *)&job->timer, on_close);
    } else {
        spawn(loop, job, o, fds[1]);
    }
    *jobp = job;
    return 0;
}

int exec_start(uv_loop_t *loop, const char *cmd, uint64_t timeout_ms, exec_done cb, void *ud,
               struct exec_job **jobp)
{
    char **argv;
    int r = exec_split(cmd, &argv);
    if (r < 0) return r;
    struct exec_opts o = {.argv = argv, .timeout_ms = timeout_ms};
    r = exec_run(loop, &o, cb, ud, jobp);
    exec_argv_free(argv);
    return r;
}

void exec_kill(struct exec_job *job)
{
    if (job->exited) return;
    uv_timer_stop(&job->timer);
    send_signal(job, SIGKILL);
}

/* ---- the exec action (actions/action.h) ---- */

struct exec_run {
    const struct action_params *p;
    action_done done;
    void *ud;
};

static void exec_run_done(void *ud, const struct exec_result *res)
{
    struct exec_run run = *(struct exec_run *)ud;
    const char *cmd = run.p->exec_command;
    char buf[768];
    int status = -EIO;
    free(ud);
    if (res->spawn_error) {
        snprintf(buf, sizeof buf, "cannot run \"%s\": %s", cmd, uv_strerror(res->spawn_error));
        status = res->spawn_error;
    } else if (res->timed_out) {
        snprintf(buf, sizeof buf, "\"%s\" timed out and was killed", cmd);
        status = -ETIMEDOUT;
    } else if (res->term_signal) {
        snprintf(buf, sizeof buf, "\"%s\" was killed by signal %d", cmd, res->term_signal);
    } else if (res->exit_status != 0) {
        snprintf(buf, sizeof buf, "\"%s\" exited with status %lld", cmd,
                 (long long)res->exit_status);
    } else {
        status = 0;
    }
    struct action_result r = {status, 0, status < 0 ? buf : NULL, 0};
    run.done(run.ud, ACTION_EXEC, &r);
}

static void exec_action_start(struct action_env *env, const struct action_params *p,
                              action_done done, void *ud)
{
    struct exec_run *run = malloc(sizeof *run);
    if (!run) ra_oom();
    *run = (struct exec_run){p, done, ud};
    struct exec_job *job;
    int rc = exec_start(env->loop, p->exec_command, p->exec_timeout_ms, exec_run_done, run, &job);
    if (rc < 0) {
        char buf[768];
        free(run);
        snprintf(buf, sizeof buf, "cannot parse --exec-command \"%s\"", p->exec_command);
        struct action_result r = {rc, 1, buf, 0};
        done(ud, ACTION_EXEC, &r);
    }
}

const struct action_ops action__exec_ops = {exec_action_start, NULL, NULL};
