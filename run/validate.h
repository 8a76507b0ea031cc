/*
 * validate.h - the validation step of a change (--validate): the app's own
 * checker run on the new content as the app would read it (through the
 * validator at --validator-socket, or here), judged: exit 0 accepts,
 * anything else rejects (a timeout too), and a command that could not be
 * run at all is an error (retried, never a rejection: the content is not
 * to blame).
 */
#ifndef RA_VALIDATE_H
#define RA_VALIDATE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

enum validate_verdict { VALIDATE_ACCEPTED, VALIDATE_REJECTED, VALIDATE_ERROR };

/* The first lines of a checker's output kept for the Event, the log and
 * /status: at most this many lines and bytes. */
#define VALIDATE_LINES_MAX 6
#define VALIDATE_LINES_BYTES 700

struct validate_outcome {
    enum validate_verdict verdict;
    const char *summary; /* one line: "exited with status 1", "timed out ...", or the error */
    const char *lines;   /* the output's first lines, " | "-joined, one line; "" if none */
    double seconds;
};

struct validate;

typedef void (*validate_done)(void *ud, const struct validate_outcome *o);

/* Runs command (split into words like --exec-command) with timeout_ms,
 * through socket when not NULL. cb runs exactly once on the loop (unless
 * cancelled); o is valid during the call. Returns 0 and *out, or -EINVAL
 * when command does not split (cb never runs). */
int validate_start(uv_loop_t *loop, const char *command, uint64_t timeout_ms, const char *socket,
                   validate_done cb, void *ud, struct validate **out);

/* Gives the run up; cb never runs. */
void validate_cancel(struct validate *v);

/* The first non-empty lines of out[0..len) (at most VALIDATE_LINES_MAX),
 * each under the one-line policy of base/text.h, joined with " | ", cut to
 * n bytes (at most VALIDATE_LINES_BYTES). */
void validate_first_lines(const char *out, size_t len, char *buf, size_t n);

#endif
