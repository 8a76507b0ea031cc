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
 * root. Real subdirectories of a plain tree (not top-level ".." names, not
 * symlinks) are watched recursively, including ones created later.
 * A file root is watched through its parent directory, filtered by its name
 * (and by "..data", for a key file of an AtomicWriter volume); the file's own
 * inode is never watched.
 * A root that does not exist (or is deleted, moved away or unmounted) is
 * waited for: the nearest existing ancestor is watched until the path is
 * back, then the root is re-armed and the callback gets WATCH_ROOT_BACK.
 * IN_Q_OVERFLOW re-arms every root (new subdirectories) and reports
 * WATCH_OVERFLOW for every root.
 */
#ifndef RA_WATCH_H
#define RA_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

enum watch_why {
    WATCH_EVENT = 0,    /* a relevant event under the root */
    WATCH_OVERFLOW,     /* the inotify queue overflowed: rescan needed */
    WATCH_ROOT_GONE,    /* the root disappeared; now waiting for it */
    WATCH_ROOT_BACK,    /* the root (re)appeared and is armed again */
};

struct watch;

/* Called on the loop thread. `root` is the index watch_add returned. */
typedef void (*watch_cb)(void *ud, size_t root, enum watch_why why);

/* Creates a watcher on loop. Returns 0 and *out, or <0 (-errno/UV_E*). */
int watch_create(uv_loop_t *loop, struct watch **out);

/* Adds a root (copied). cb/ud receive its events. Never fails because the
 * path is missing: the root then waits for it (watch_root_present() = 0),
 * and a warn-level log line says so. Returns 0 and *index, or <0. */
int watch_add(struct watch *w, const char *path, watch_cb cb, void *ud, size_t *index);

/* 1 if the root exists and is armed, 0 if it is being waited for. */
int watch_root_present(const struct watch *w, size_t index);

/* Total raw inotify events read (for the watch_events_total metric). */
uint64_t watch_events_total(const struct watch *w);

/* Number of inotify watch descriptors in use (for tests and /status). */
size_t watch_wd_count(const struct watch *w);

/* Stops watching and closes the handles; w is freed in the last close
 * callback, after which done(done_ud) runs (done may be NULL). No callback
 * for any root runs after this call. */
void watch_close(struct watch *w, void (*done)(void *), void *done_ud);

#endif
