/*
 * watch.h - inotify watching of roots inside the libuv loop.
 *
 * One inotify fd per struct watch, polled by a uv_poll_t: no threads, and
 * no timers (an idle watch makes no wakeups). Events are hints: the callback
 * only says "something under root i may have changed"; the caller debounces
 * and hashes.
 *
 * A directory root is watched with IN_CREATE|IN_MOVED_TO|IN_MOVED_FROM|
 * IN_DELETE|IN_CLOSE_WRITE|IN_MODIFY|IN_DELETE_SELF|IN_MOVE_SELF|IN_ONLYDIR.
 * The kubelet AtomicWriter "..data" swap arrives as MOVED_TO "..data" on the
 * root; events about other top-level ".." names (the timestamped dirs,
 * "..data_tmp") are ignored, as the hash ignores those names. Real
 * subdirectories of a plain tree (not top-level ".." names, not symlinks) are
 * watched recursively, including ones created later. A directory root given
 * as a symlink (e.g. a kubelet key directory "conf -> ..data/conf", or a
 * "current -> releases/v2" link) is followed; its parent is watched too, and
 * when the link (or "..data" beside it) changes the root is re-armed on the
 * new target and WATCH_EVENT is reported.
 * A file root is watched through its parent directory, filtered by its name
 * (and by "..data", for a key file of an AtomicWriter volume); the file's own
 * inode is never watched. stat() decides file or directory root each time
 * the root is armed; a file root that is deleted (or replaced by a directory)
 * counts as gone.
 * A root that does not exist (or is deleted, moved away or unmounted) is
 * waited for: the nearest existing ancestor is watched until the path is
 * back, then the root is re-armed and the callback gets WATCH_ROOT_BACK.
 * A rename-replace of a root (mv new root) reports WATCH_ROOT_GONE then
 * WATCH_ROOT_BACK, the new inode being watched.
 * IN_Q_OVERFLOW re-arms every root (new subdirectories) and reports
 * WATCH_OVERFLOW for every root (plus WATCH_ROOT_GONE or WATCH_ROOT_BACK for
 * a root whose presence changed meanwhile).
 *
 * Limits: when a mount point below a root is unmounted its watches are
 * dropped and the directory underneath is not watched; a root whose ancestor
 * directory is renamed keeps watching the moved inode.
 */
#ifndef RA_WATCH_H
#define RA_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

enum watch_why {
    WATCH_EVENT = 0, /* a relevant event under the root */
    WATCH_DATA_LINK, /* only the root directory's "..data" entry changed (an
                         * AtomicWriter swap): its other top-level entries did not */
    WATCH_OVERFLOW,  /* the inotify queue overflowed: rescan needed */
    WATCH_ROOT_GONE, /* the root disappeared; now waiting for it */
    WATCH_ROOT_BACK, /* the root (re)appeared and is armed again */
};

struct watch;

/* Called on the loop thread. `root` is the index watch_add returned. */
typedef void (*watch_cb)(void *ud, size_t root, enum watch_why why);

/* Creates a watcher on loop. Returns 0 and *out, or <0 (-errno/UV_E*).
 * -EMFILE is logged, naming the limit that was hit: the per-user
 * fs.inotify.max_user_instances or the process's open-file limit. */
int watch_create(uv_loop_t *loop, struct watch **out);

/* Adds a root (copied; trailing '/' removed). cb/ud receive its events. Never
 * fails because the path is missing: the root then waits for it
 * (watch_is_root_present() = 0), and a warn-level log line says so, once per
 * absence. Returns 0 and *index (0, 1, 2... in call order), or <0:
 * -EINVAL (NULL or empty path, NULL cb or index), -ENOMEM, or the error that
 * keeps an existing root from being watched (-EACCES, -ENAMETOOLONG, -ENOSPC
 * for the fs.inotify.max_user_watches limit, ...). May be called from a
 * callback. */
int watch_add(struct watch *w, const char *path, watch_cb cb, void *ud, size_t *index);

/* 1 if the root exists and is armed, 0 if it is being waited for. */
int watch_is_root_present(const struct watch *w, size_t index);

/* Total raw inotify events read. */
uint64_t watch_events_total(const struct watch *w);

/* Push counter: fn(ud, n) runs on the loop thread as n raw inotify events
 * are read (the agent's watch_events_total metric). fn NULL: none. */
void watch_set_counter(struct watch *w, void (*fn)(void *ud, uint64_t n), void *ud);

/* Number of distinct inotify watch descriptors in use (for tests and
 * /status; a wd shared by several roots counts once). */
size_t watch_wd_count(const struct watch *w);

/* Why root index is not present: 0 when it is, -ENOENT or -ENOTDIR while it
 * is waited for because a path component is missing, -ELOOP when the path
 * is a symlink loop (also waited for: the links may be fixed), -EIO when
 * arming it failed for another reason (logged; counted as unwatched). */
int watch_root_wait_reason(const struct watch *w, size_t index);

/* Directories that exist but could not be watched (e.g. ENOSPC once
 * fs.inotify.max_user_watches is reached): real subdirectories of a root,
 * plus roots whose arming failed. Changes there are missed until
 * watch_rearm() succeeds. Each is logged once at warn (error for a root). */
size_t watch_unwatched_count(const struct watch *w);

/* Tries to watch every unwatched directory again (a root through a full
 * re-arm). One that is watched now gets WATCH_EVENT (or WATCH_ROOT_BACK for
 * a root), since it may have changed meanwhile. Call it on the loop thread,
 * not from inside a watch_cb. */
void watch_rearm(struct watch *w);

/* cb(ud, n) runs on the loop thread whenever watch_unwatched_count()
 * changes (after the event, watch_add or watch_rearm that changed it).
 * cb may be NULL. */
void watch_set_unwatched_cb(struct watch *w, void (*cb)(void *ud, size_t n), void *ud);

/* Stops watching and closes the handles; w is freed in the last close
 * callback, after which done(done_ud) runs (done may be NULL). No callback
 * for any root runs after this call, which may be made from a callback.
 * Call it once. */
void watch_close(struct watch *w, void (*done)(void *), void *done_ud);

/* Test seams, never set outside tests: when set, they replace
 * inotify_add_watch(2) and inotify_init1(2) (same contract: -1 and errno on
 * failure), so tests can make chosen paths hit ENOSPC or the instance
 * limit. */
extern int (*watch__test_add_watch)(int fd, const char *path, uint32_t mask);
extern int (*watch__test_inotify_init1)(int flags);

#endif
