/*
 * appliedstate.h - the engine's applied state kept in --state-dir, so that an
 * agent container that restarts (a crash, an OOM kill, a kubelet restart)
 * still acts on a change that landed while it was away.
 *
 * Without it, the new agent takes the content it finds as its baseline and
 * a change the kubelet wrote while the agent was down is never acted on
 * (with --on-start skip). --state-dir is an emptyDir: it lives as long as
 * the pod, so a new pod starts without a record (its app read the content
 * at start), and an agent restarted inside the same pod finds the state the
 * previous one had applied.
 *
 * The record is one JSON file, written atomically (a temporary file, then
 * rename): {"version": 1, "files": [{"path", "size", "sha256", "classes"}]}.
 */
#ifndef RA_APPLIEDSTATE_H
#define RA_APPLIEDSTATE_H

#include <stddef.h>

#include "hash/hash.h"

#define APPLIEDSTATE_FILE "applied.json"
#define APPLIEDSTATE_MAX (16 * 1024 * 1024)
/* The largest record written: the injected state emptyDir is 1Mi of memory
 * (inject/sidecar.c) and holds the record and its temporary copy at once. */
#define APPLIEDSTATE_WRITE_MAX (384 * 1024)

/* Writes m as dir/APPLIEDSTATE_FILE, replacing any record. Returns 0, or
 * -errno with the reason (naming the file) in err; -EFBIG when the record
 * would exceed APPLIEDSTATE_WRITE_MAX (thousands of files), and then the
 * old record is removed, so that no stale state is read back. */
int appliedstate_save(const char *dir, const struct hash_manifest *m, char *err, size_t errlen);

/* Reads dir/APPLIEDSTATE_FILE into *out (free with hash_manifest_free).
 * Returns 1 when there was a record, 0 when there was none, or -errno with
 * the reason (naming the file and what is wrong) in err: unreadable, too
 * large, not the format above. On 0 and on failure *out is left empty. */
int appliedstate_load(const char *dir, struct hash_manifest *out, char *err, size_t errlen);

#endif
