/*
 * exec.h - running the exec action's command with uv_spawn.
 *
 * The command line is split into argv like a POSIX shell would split words
 * (whitespace separates; single quotes, double quotes and backslash escape),
 * but no shell is run: write `sh -c '...'` yourself to use one. stdin is
 * /dev/null; stdout and stderr are inherited. Exit status 0 is success. On
 * timeout the process gets SIGTERM, then SIGKILL 2 s later. The command runs
 * in a session of its own and these signals go to its whole process group,
 * so children of `sh -c` are ended too.
 *
 * exec_run runs an argv vector the same way and can capture what it writes:
 * stdout and stderr then share one pipe, of which the first capture_max
 * bytes are kept (the rest is read and dropped, so the command never blocks
 * on a full pipe). That is how the safe-reload checks (run/validate.c,
 * run/verify.c, the validator) keep a checker's output bounded.
 */
#ifndef RA_EXEC_H
#define RA_EXEC_H

#include <stdint.h>
#include <uv.h>

struct exec_job;

struct exec_result {
    int spawn_error; /* 0, or the UV_E* from uv_spawn (e.g. UV_ENOENT) */
    int64_t exit_status;
    int term_signal; /* signal that ended it, 0 if none */
    int timed_out;   /* 1 if killed because of the timeout */
    /* exec_run with capture_max: the first bytes of stdout and stderr
     * (NUL-terminated, never NULL there; NULL without capture), valid
     * during the callback; truncated when more was written. */
    const char *output;
    size_t output_len;
    int output_truncated;
};

typedef void (*exec_done)(void *ud, const struct exec_result *res);

/* Splits cmd into argv. Returns 0 and a malloc'd NULL-terminated vector
 * (free with exec_argv_free), or -EINVAL (unterminated quote, empty). */
int exec_split(const char *cmd, char ***argv);
/* The same; on failure *why (if why is non-NULL) names what was wrong:
 * "unterminated single quote", "unterminated double quote", "trailing
 * backslash", "empty command" (static strings). */
int exec_split_err(const char *cmd, char ***argv, const char **why);
void exec_argv_free(char **argv);

/* Starts cmd. cb runs exactly once, on the loop, after the process has
 * exited and all handles are closed; this is so even if the spawn itself
 * failed (spawn_error set, reported asynchronously). Returns 0, or
 * -EINVAL if cmd does not split (cb never runs then). timeout_ms 0 means no
 * timeout. *job is valid until cb runs and is freed right after it. */
int exec_start(uv_loop_t *loop, const char *cmd, uint64_t timeout_ms, exec_done cb, void *ud,
               struct exec_job **job);

/* How exec_run runs a command. */
struct exec_opts {
    char *const *argv;   /* NULL-terminated, argv[0] looked up in PATH; read during the call */
    uint64_t timeout_ms; /* 0: none */
    size_t capture_max;  /* 0: stdout and stderr are inherited; else captured as above */
};

/* Starts o->argv like exec_start starts a command line: cb runs exactly
 * once, on the loop, after the process has exited (and, with capture, its
 * output pipe was read to the end or for at most EXEC_DRAIN_MS after the
 * exit: a background child that keeps it open does not hold the result);
 * a spawn failure is reported there too. Returns 0, or -EINVAL for an
 * empty argv, -errno if the pipe cannot be made (cb never runs then). */
int exec_run(uv_loop_t *loop, const struct exec_opts *o, exec_done cb, void *ud,
             struct exec_job **job);

#define EXEC_DRAIN_MS 200

/* Kills the job now (SIGKILL to its process group); its callback still
 * runs once. A no-op if the process already exited or never started; must
 * not be called once the callback has run. */
void exec_kill(struct exec_job *job);

#endif
