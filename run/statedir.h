/*
 * statedir.h - --state-dir, the directory the run daemon keeps across its
 * own restarts, and the one module that knows it: the file names, their
 * size caps, their formats, and how they are written (atomically, through
 * ra_record_write) and read (no file is no record).
 *
 * --state-dir is an emptyDir: it lives as long as the pod, so a new pod
 * starts without records (its containers read the content at start), and
 * an agent restarted inside the same pod (a crash, an OOM kill, a kubelet
 * restart, or the pod restart it asked for) finds what the previous one
 * left. Two records live there:
 *
 * - applied.json, the engine's applied state: without it, a new agent takes
 *   the content it finds as its baseline, and a change the kubelet wrote
 *   while no agent ran is never acted on (with --on-start skip).
 *   {"version": 2, "pod", "files": [{"path", "size", "sha256", "classes"}]}.
 * - restart-pod.json, why the previous agent restarted the pod (the
 *   restart-pod action, actions/restartpod.c): the kubelet removes the old
 *   containers with their logs, so the agent that starts again reports it
 *   (event "pod-restarted", a Normal PodRestarted Event on its pod when it
 *   has an API client) and the engine takes its baseline as applied.
 *   {"version": 2, "pod", "time_ms", "exit_code", "hash", "files"}.
 *
 * Every record names the pod that wrote it, "pod": {"name", "uid",
 * "sandbox"}: --pod-name or $POD_NAME, $POD_UID (when the pod sets it from
 * the downward API, metadata.uid), and the sandbox (the node's boot id and
 * the pod's network namespace, which its containers share and keep across
 * their restarts). A record whose pod differs from this agent's in a field
 * both know (self: the --pod-name option, NULL or "" for $POD_NAME) is
 * another pod's, or this pod's from before its sandbox was made again (when
 * every container started anew): it is not used (docs/restart.md). Every
 * number is checked (whole, in range) before it is used.
 */
#ifndef RA_STATEDIR_H
#define RA_STATEDIR_H

#include <stddef.h>
#include <stdint.h>

#include "hash/hash.h"

#define STATEDIR_APPLIED "applied.json"
#define STATEDIR_APPLIED_MAX (16 * 1024 * 1024)
/* The largest applied state written: the injected state emptyDir is 1Mi of
 * memory (inject/sidecar.c) and holds the record and its temporary copy at
 * once. */
#define STATEDIR_APPLIED_WRITE_MAX (384 * 1024)
#define STATEDIR_RESTART_POD "restart-pod.json"
#define STATEDIR_RESTART_POD_MAX (64 * 1024)

/* Writes m as dir/STATEDIR_APPLIED, replacing any record. Returns 0, or
 * -errno with the reason (naming the file) in err; -EFBIG when the record
 * would exceed STATEDIR_APPLIED_WRITE_MAX (thousands of files), and then
 * the old record is removed, so that no stale state is read back. */
int statedir_applied_save(const char *dir, const char *self, const struct hash_manifest *m,
                          char *err, size_t errlen);

/* Reads dir/STATEDIR_APPLIED into *out (free with hash_manifest_free).
 * Returns 1 when there was a record of this pod, 0 when there was none, or
 * -errno with the reason (naming the file and what is wrong) in err:
 * unreadable, too large, -EINVAL not the format above, -ESTALE another
 * pod's. On 0 and on failure *out is left empty. */
int statedir_applied_load(const char *dir, const char *self, struct hash_manifest *out, char *err,
                          size_t errlen);

/* Why the pod was restarted: what restart-pod.json holds. */
struct statedir_restart {
    int64_t time_ms; /* wall clock (ms since the epoch) when the restart was decided */
    int exit_code;
    char hash[65]; /* the content hash the restart was for (64 hex) */
    char *files;   /* the changed files that needed it, ", "-joined (owned; may be NULL) */
};

/* The record the restart-pod action writes into dir/STATEDIR_RESTART_POD
 * before it exits with exit_code for content hash (64 hex), files (may be
 * NULL) being the changed files that need it; stamped with the time now.
 * JSON text, malloc'd: the caller frees it. */
char *statedir_restart_render(const char *self, int exit_code, const char *hash, const char *files);

/* Reads dir/STATEDIR_RESTART_POD into *out and removes it, so that it is
 * reported once. Returns 1 when there was a record of this pod, 0 when
 * there was none, or -errno with the reason in err (unreadable, -EINVAL
 * malformed, -ESTALE another pod's: removed too when it can be). Free *out
 * with statedir_restart_free. */
int statedir_restart_take(const char *dir, const char *self, struct statedir_restart *out,
                          char *err, size_t errlen);

void statedir_restart_free(struct statedir_restart *r);

struct kevents;

/* At start: takes the restart-pod record of this pod from dir (NULL or "": none) and
 * reports it (log event "pod-restarted"; a Normal PodRestarted Event when
 * ev, pod and ns are all non-NULL). A record that cannot be read is logged
 * at warn level and removed. Returns 1 if there was a record (this start
 * is the pod restart the previous agent asked for: every container started
 * with the content now mounted), with the content hash it restarted for in
 * hash (hashlen bytes; NULL: not wanted; the stage gate's turn of that hash
 * ends with it), else 0. */
int statedir_restart_report(const char *dir, const char *self, struct kevents *ev, const char *pod,
                            const char *ns, char *hash, size_t hashlen);

#endif
