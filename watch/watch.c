/*
 * watch.c - inotify watching of roots inside the libuv loop (see watch.h).
 *
 * One inotify fd per struct watch, polled by a uv_poll_t. The watcher keeps
 * a flat list of "entries": each says which root a watch descriptor serves
 * and how (the root directory or one of its real subdirectories, the parent
 * directory of a file root or of a symlinked directory root, or the nearest
 * existing ancestor of a missing root). Several entries may share one wd (two file roots in one directory,
 * nested roots, an ancestor that is also a root): watches are always added
 * with IN_MASK_ADD so no owner narrows another's mask, and a wd is removed
 * from the kernel only when its last entry goes.
 *
 * Every state change of a root goes through root_start(): drop all its
 * entries, then arm it again from its path (stat decides directory or file
 * root each time; a missing path watches an ancestor instead). That one path
 * handles first arming, deletion, rename-replace, type change, a missing
 * root appearing, and queue overflow. Events are hints; the caller hashes.
 */
#include "watch/watch.h"

#include "base/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* What a directory root, its subdirectories and a file root's parent get. */
#define DIR_MASK                                                                                   \
    (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE | IN_MODIFY |            \
     IN_DELETE_SELF | IN_MOVE_SELF)
/* What the nearest existing ancestor of a missing root gets. */
#define ANCESTOR_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
/* Events about a named entry inside a watched directory. */
#define CONTENT_MASK                                                                               \
    (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_CLOSE_WRITE | IN_MODIFY)
/* The watched directory itself went away (or its watch did). */
#define SELF_GONE_MASK (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED)

/* Reads per wakeup before yielding to the loop; the poll is level-triggered,
 * so anything left wakes us again on the next iteration. */
#define READS_PER_WAKEUP 64
/* Attempts to arm a root whose path keeps changing under us. */
#define ARM_ATTEMPTS 16

enum ent_kind {
    ENT_DIR,      /* rel "" = the directory root itself, else a real subdirectory */
    ENT_PARENT,   /* the parent directory of a file root; rel = the file's name */
    ENT_LINK,     /* the parent of a directory root that is a symlink; rel = its name */
    ENT_ANCESTOR, /* nearest existing ancestor of a missing root; rel = missing child's name */
};

struct ent {
    int wd;
    enum ent_kind kind;
    size_t root;
    char *rel;
};

struct root {
    char *path; /* as given, trailing '/' removed */
    watch_cb cb;
    void *ud;
    int present; /* armed as a directory or file root */
    int warned;  /* the "waiting for it" line was logged for this absence */
    int why;     /* while waiting: errno of stat(path) (ENOENT, ENOTDIR, ELOOP) */
    int failed;  /* arming failed (e.g. ENOSPC): counted as unwatched, retried */
};

/* A real subdirectory that could not be watched (not a missing one). */
struct unw {
    size_t root;
    char *rel;
};

struct watch {
    uv_poll_t poll;
    int fd;
    int closing;
    struct root *roots;
    size_t nroots, caproots;
    struct ent *ents;
    size_t nents, capents;
    struct unw *unw; /* subdirectories that could not be watched */
    size_t nunw, capunw;
    size_t unw_reported; /* the count unw_cb was last told */
    void (*unw_cb)(void *, size_t);
    void *unw_ud;
    uint64_t events;
    void (*count)(void *ud, uint64_t n); /* push counter, may be NULL */
    void *count_ud;
    void (*done)(void *);
    void *done_ud;
    _Alignas(struct inotify_event) char buf[64 * 1024];
};

/* Allocation failure inside the loop is fatal (docs/errors.md). */
static void *need(void *p)
{
    if (!p) ra_oom();
    return p;
}

/* Returns malloc'd "dir/name" (or "name" when dir is ""), no doubled '/'. */
static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *s = need(malloc(a + b + 2));
    memcpy(s, dir, a);
    if (a && dir[a - 1] != '/') s[a++] = '/';
    memcpy(s + a, name, b + 1);
    return s;
}

/* Splits path[0..end) (no trailing '/' unless it is "/") into its parent
 * directory (malloc'd, "." for a bare name) and the offset of its last name. */
static char *parent_of(const char *path, size_t end, size_t *name_at)
{
    size_t slash = end, pend;
    while (slash > 0 && path[slash - 1] != '/') slash--;
    *name_at = slash;
    if (slash == 0) return need(strdup("."));
    for (pend = slash; pend > 1 && path[pend - 1] == '/'; pend--) {
    }
    return need(strndup(path, pend));
}

static int is_private(const char *name) { return name[0] == '.' && name[1] == '.'; }

static int is_missing(int err) { return err == ENOENT || err == ENOTDIR || err == ELOOP; }

int (*watch__test_add_watch)(int fd, const char *path, uint32_t mask);
int (*watch__test_inotify_init1)(int flags);

static int unw_find(const struct watch *w, size_t r, const char *rel)
{
    for (size_t i = 0; i < w->nunw; i++)
        if (w->unw[i].root == r && strcmp(w->unw[i].rel, rel) == 0) return (int)i;
    return -1;
}

/* Records directory rel of root r as unwatched; 1 if it was not yet. */
static int unw_add(struct watch *w, size_t r, const char *rel)
{
    if (unw_find(w, r, rel) >= 0) return 0;
    if (w->nunw == w->capunw) {
        w->capunw = w->capunw ? w->capunw * 2 : 8;
        w->unw = need(realloc(w->unw, w->capunw * sizeof *w->unw));
    }
    w->unw[w->nunw++] = (struct unw){r, need(strdup(rel))};
    return 1;
}

static void unw_remove_at(struct watch *w, size_t i)
{
    free(w->unw[i].rel);
    w->unw[i] = w->unw[--w->nunw];
}

/* Forgets the unwatched entries of root r at rel and below ("" = all of r). */
static void unw_drop(struct watch *w, size_t r, const char *rel)
{
    size_t n = strlen(rel);
    for (size_t i = w->nunw; i-- > 0;)
        if (w->unw[i].root == r && (!n || (strncmp(w->unw[i].rel, rel, n) == 0 &&
                                           (w->unw[i].rel[n] == '\0' || w->unw[i].rel[n] == '/'))))
            unw_remove_at(w, i);
}

size_t watch_unwatched_count(const struct watch *w)
{
    size_t n = w->nunw;
    for (size_t r = 0; r < w->nroots; r++) n += w->roots[r].failed != 0;
    return n;
}

/* Tells unw_cb when the count changed since it was last told. */
static void unw_report(struct watch *w)
{
    size_t n = watch_unwatched_count(w);
    if (n == w->unw_reported || w->closing) return;
    w->unw_reported = n;
    if (w->unw_cb) w->unw_cb(w->unw_ud, n);
}

static int wd_in_use(const struct watch *w, int wd)
{
    for (size_t i = 0; i < w->nents; i++)
        if (w->ents[i].wd == wd) return 1;
    return 0;
}

static void ent_add(struct watch *w, size_t root, enum ent_kind kind, const char *rel, int wd)
{
    if (w->nents == w->capents) {
        w->capents = w->capents ? w->capents * 2 : 16;
        w->ents = need(realloc(w->ents, w->capents * sizeof *w->ents));
    }
    w->ents[w->nents++] = (struct ent){wd, kind, root, need(strdup(rel))};
}

/* Removes entry i (order is not kept); the kernel watch goes with its last entry. */
static void ent_remove(struct watch *w, size_t i)
{
    int wd = w->ents[i].wd;
    free(w->ents[i].rel);
    w->ents[i] = w->ents[--w->nents];
    if (!wd_in_use(w, wd)) inotify_rm_watch(w->fd, wd); /* EINVAL if the kernel dropped it */
}

static void root_drop(struct watch *w, size_t r)
{
    unw_drop(w, r, "");
    for (size_t i = w->nents; i-- > 0;)
        if (w->ents[i].root == r) ent_remove(w, i);
}

/* Drops the watches of subdirectory rel of root r and everything below it. */
static void tree_drop(struct watch *w, size_t r, const char *rel)
{
    size_t n = strlen(rel);
    unw_drop(w, r, rel);
    for (size_t i = w->nents; i-- > 0;) {
        const struct ent *e = &w->ents[i];
        if (e->root == r && e->kind == ENT_DIR && strncmp(e->rel, rel, n) == 0 &&
            (e->rel[n] == '\0' || e->rel[n] == '/'))
            ent_remove(w, i);
    }
}

static const struct ent *ent_find(const struct watch *w, size_t r, enum ent_kind kind,
                                  const char *rel)
{
    for (size_t i = 0; i < w->nents; i++)
        if (w->ents[i].root == r && w->ents[i].kind == kind && strcmp(w->ents[i].rel, rel) == 0)
            return &w->ents[i];
    return NULL;
}

static int add_watch(struct watch *w, const char *path, uint32_t mask)
{
    int wd = watch__test_add_watch ? watch__test_add_watch(w->fd, path, mask | IN_MASK_ADD)
                                   : inotify_add_watch(w->fd, path, mask | IN_MASK_ADD);
    return wd < 0 ? -errno : wd;
}

/* Watches directory rel of root r ("" = the root, symlinks followed; below
 * it never through symlinks) and every real subdirectory under it that is
 * not yet watched. Returns <0 only when rel itself cannot be watched. A
 * subdirectory that exists but cannot be watched (ENOSPC at the
 * fs.inotify.max_user_watches limit, EACCES...) is recorded as unwatched
 * (logged once) for watch_rearm(); one that vanished is skipped. */
static int tree_add(struct watch *w, size_t r, const char *rel0)
{
    char **queue = need(malloc(sizeof *queue));
    size_t head = 0, n = 1, cap = 1;
    int rc = 0;
    queue[0] = need(strdup(rel0));
    for (; head < n; free(queue[head++])) {
        const char *rel = queue[head];
        char *path = join(w->roots[r].path, rel);
        uint32_t flags = DIR_MASK | IN_ONLYDIR | (rel[0] ? IN_DONT_FOLLOW : 0);
        int wd = add_watch(w, path, flags);
        const struct ent *old = ent_find(w, r, ENT_DIR, rel);
        if (wd < 0) {
            if (head == 0) rc = wd;
            if (rel[0] && !is_missing(-wd) && unw_add(w, r, rel))
                log_warn("cannot watch directory %s: %s%s; changes there are missed until it "
                         "can be watched (retried; /readyz reports not ready meanwhile)",
                         path, strerror(-wd),
                         wd == -ENOSPC ? " (the inotify watch limit fs.inotify.max_user_watches "
                                         "is reached: raise it with sysctl)"
                                       : "");
            free(path);
            continue;
        }
        if (rel[0]) {
            int u = unw_find(w, r, rel);
            if (u >= 0) unw_remove_at(w, (size_t)u);
        }
        if (old && old->wd == wd) { /* already watched, hence already scanned */
            free(path);
            continue;
        }
        if (old) tree_drop(w, r, rel); /* the same name is a new directory now */
        ent_add(w, r, ENT_DIR, rel, wd);
        DIR *d = opendir(path);
        if (!d && !is_missing(errno))
            log_warn("cannot list directory %s: %s", path, strerror(errno));
        for (struct dirent *de; d && (de = readdir(d));) {
            struct stat st;
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            if (!rel[0] && is_private(de->d_name)) continue;
            if (de->d_type != DT_DIR) {
                if (de->d_type != DT_UNKNOWN ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode))
                    continue;
            }
            if (n == cap) queue = need(realloc(queue, (cap *= 2) * sizeof *queue));
            queue[n++] = join(rel, de->d_name);
        }
        if (d) closedir(d);
        free(path);
    }
    free(queue);
    return rc;
}

/* Watches the parent directory of root r, filtered by the root's name. */
static int arm_parent(struct watch *w, size_t r, enum ent_kind kind)
{
    const char *path = w->roots[r].path;
    size_t name_at;
    char *parent = parent_of(path, strlen(path), &name_at);
    int wd = add_watch(w, parent, DIR_MASK | IN_ONLYDIR);
    free(parent);
    if (wd < 0) return wd;
    ent_add(w, r, kind, path + name_at, wd);
    return 0;
}

/* Finds the nearest existing directory above the missing path: returns it
 * malloc'd and sets *name_at to the offset of the name below it that is
 * missing (or not a directory). NULL if not even "." exists. */
static char *ancestor_of(const char *path, size_t *name_at)
{
    size_t end = strlen(path);
    for (;;) {
        struct stat st;
        char *dir = parent_of(path, end, name_at);
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) return dir;
        free(dir);
        if (*name_at == 0 || end <= 1) return NULL;
        for (end = *name_at; end > 1 && path[end - 1] == '/'; end--) {
        }
    }
}

/* Watches the nearest existing ancestor of missing root r. Returns 0, or
 * -EAGAIN when the tree changed meanwhile (arm again), or <0. */
static int arm_ancestor(struct watch *w, size_t r)
{
    const char *path = w->roots[r].path;
    size_t at, at2;
    struct stat st;
    char *dir = ancestor_of(path, &at), *again;
    if (!dir) return -ENOENT;
    int wd = add_watch(w, dir, ANCESTOR_MASK | IN_ONLYDIR);
    if (wd < 0) {
        free(dir);
        return is_missing(-wd) ? -EAGAIN : wd;
    }
    char *name = strndup(path + at, strcspn(path + at, "/"));
    ent_add(w, r, ENT_ANCESTOR, need(name), wd);
    free(name);
    /* Something created between the walk and the watch gives no event: look again. */
    again = stat(path, &st) == 0 ? NULL : ancestor_of(path, &at2);
    int stable = again && at2 == at && strcmp(again, dir) == 0;
    free(dir);
    free(again);
    return stable ? 0 : -EAGAIN;
}

/* Arms root r, which has no entries. Returns 1 when armed, 0 when waiting
 * for it (an ancestor is watched), or <0. */
static int root_arm(struct watch *w, size_t r)
{
    int rc = -EAGAIN;
    for (int i = 0; i < ARM_ATTEMPTS && rc == -EAGAIN; i++) {
        struct stat st, lst;
        root_drop(w, r);
        if (stat(w->roots[r].path, &st) == 0) {
            int link = lstat(w->roots[r].path, &lst) == 0 && S_ISLNK(lst.st_mode);
            rc = S_ISDIR(st.st_mode) ? tree_add(w, r, "") : arm_parent(w, r, ENT_PARENT);
            if (rc == 0 && link && S_ISDIR(st.st_mode)) rc = arm_parent(w, r, ENT_LINK);
            if (rc == 0) return 1;
            if (is_missing(-rc)) rc = -EAGAIN; /* gone or changed type meanwhile */
        } else if (!is_missing(errno)) {
            rc = -errno;
        } else {
            rc = arm_ancestor(w, r);
        }
    }
    if (rc < 0) root_drop(w, r);
    return rc;
}

/* Drops and re-arms root r from its path. Returns root_arm's result. */
static int root_start(struct watch *w, size_t r)
{
    root_drop(w, r);
    int rc = root_arm(w, r);
    struct root *ro = &w->roots[r];
    struct stat st;
    ro->present = rc == 1;
    ro->failed = rc < 0;
    ro->why = rc == 0 ? (stat(ro->path, &st) == 0 ? ENOENT : errno) : 0;
    if (rc == 0 && !ro->warned)
        log_debug("watch root %s %s; waiting for it", ro->path,
                  ro->why == ELOOP ? "is a symlink loop" : "does not exist yet");
    ro->warned = rc == 0;
    return rc;
}

static void notify(struct watch *w, size_t r, enum watch_why why)
{
    if (!w->closing) w->roots[r].cb(w->roots[r].ud, r, why);
}

/* root_start() at event time: errors are logged, a new arrival reported. */
static void root_restart(struct watch *w, size_t r)
{
    int was = w->roots[r].present, failed = w->roots[r].failed, rc = root_start(w, r);
    if (rc < 0 && !failed) /* once per failure, not at every retry */
        log_error("cannot watch %s: %s%s; its changes are missed until it can be watched "
                  "(retried; /readyz reports not ready meanwhile)",
                  w->roots[r].path, strerror(-rc),
                  rc == -ENOSPC ? " (the inotify watch limit fs.inotify.max_user_watches is "
                                  "reached: raise it with sysctl)"
                                : "");
    if (rc == 1 && !was) {
        log_debug("watch root %s is present", w->roots[r].path);
        notify(w, r, WATCH_ROOT_BACK);
    }
}

static void root_gone(struct watch *w, size_t r)
{
    log_debug("watch root %s was removed, replaced or unmounted; re-arming", w->roots[r].path);
    root_drop(w, r);
    w->roots[r].present = 0;
    notify(w, r, WATCH_ROOT_GONE);
    if (!w->closing) root_restart(w, r);
}

static void overflow(struct watch *w)
{
    size_t n = w->nroots;
    log_debug("inotify event queue overflowed (fs.inotify.max_queued_events); rescanning %zu "
              "watch roots",
              n);
    for (size_t r = 0; r < n && !w->closing; r++) {
        int was = w->roots[r].present;
        root_restart(w, r); /* reports WATCH_ROOT_BACK itself */
        notify(w, r, WATCH_OVERFLOW);
        if (was && !w->roots[r].present) notify(w, r, WATCH_ROOT_GONE);
    }
}

/* One event for one entry (a copy: handling may change the entry list). */
static void on_entry_event(struct watch *w, const struct ent *e, const struct inotify_event *ev)
{
    uint32_t m = ev->mask;
    const char *name = ev->len ? ev->name : "";
    switch (e->kind) {
    case ENT_ANCESTOR:
        if ((m & SELF_GONE_MASK) ||
            ((m & (IN_CREATE | IN_MOVED_TO)) && (!strcmp(name, e->rel) || !strcmp(name, "..data"))))
            root_restart(w, e->root);
        return;
    case ENT_PARENT:
    case ENT_LINK: {
        struct stat st;
        if (m & SELF_GONE_MASK) {
            root_gone(w, e->root);
            return;
        }
        if (!(m & CONTENT_MASK) || (strcmp(name, e->rel) && strcmp(name, "..data"))) return;
        if (e->kind == ENT_LINK) { /* the link may point elsewhere now: follow it */
            int was = w->roots[e->root].present;
            root_restart(w, e->root);
            if (w->roots[e->root].present)
                notify(w, e->root, WATCH_EVENT);
            else if (was)
                notify(w, e->root, WATCH_ROOT_GONE);
            return;
        }
        int gone = stat(w->roots[e->root].path, &st) < 0 && is_missing(errno);
        if (gone || (!strcmp(name, e->rel) && (m & IN_ISDIR))) /* deleted, or a directory now */
            root_gone(w, e->root);
        else
            notify(w, e->root, WATCH_EVENT);
        return;
    }
    case ENT_DIR:
        if (!e->rel[0] && (m & SELF_GONE_MASK)) {
            root_gone(w, e->root);
            return;
        }
        if (m & (IN_DELETE_SELF | IN_UNMOUNT | IN_IGNORED)) {
            tree_drop(w, e->root, e->rel);
            return;
        }
        /* IN_MOVE_SELF of a subdirectory: its parent's IN_MOVED_FROM handles it. */
        if (!(m & CONTENT_MASK) || !*name ||
            (!e->rel[0] && is_private(name) && strcmp(name, "..data")))
            return;
        if (m & IN_ISDIR) {
            char *child = join(e->rel, name);
            if (m & (IN_CREATE | IN_MOVED_TO))
                tree_add(w, e->root, child);
            else if (m & (IN_MOVED_FROM | IN_DELETE))
                tree_drop(w, e->root, child);
            free(child);
        }
        notify(w, e->root, !e->rel[0] && !strcmp(name, "..data") ? WATCH_DATA_LINK : WATCH_EVENT);
        return;
    }
}

static void on_event(struct watch *w, const struct inotify_event *ev)
{
    struct ent *copy = NULL;
    size_t n = 0;
    w->events++;
    if (w->count) w->count(w->count_ud, 1);
    if (ev->wd == -1) {
        if (ev->mask & IN_Q_OVERFLOW) overflow(w);
        unw_report(w);
        return;
    }
    for (size_t i = 0; i < w->nents; i++)
        if (w->ents[i].wd == ev->wd) {
            copy = need(realloc(copy, (n + 1) * sizeof *copy));
            copy[n] = w->ents[i];
            copy[n++].rel = need(strdup(w->ents[i].rel));
        }
    for (size_t i = 0; i < n; i++) {
        const struct ent *cur = ent_find(w, copy[i].root, copy[i].kind, copy[i].rel);
        if (!w->closing && cur && cur->wd == ev->wd) on_entry_event(w, &copy[i], ev);
        free(copy[i].rel);
    }
    free(copy);
    unw_report(w);
}

static void stop_reading(struct watch *w, const char *what, int err)
{
    log_error("inotify %s failed: %s; file watching stopped", what, strerror(err));
    uv_poll_stop(&w->poll);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct watch *w = h->data;
    (void)events;
    if (status < 0) {
        stop_reading(w, "poll", -status);
        return;
    }
    for (int i = 0; i < READS_PER_WAKEUP && !w->closing; i++) {
        ssize_t len = read(w->fd, w->buf, sizeof w->buf);
        if (len < 0 && errno == EINTR) continue;
        if (len < 0 && errno == EAGAIN) return;
        if (len <= 0) {
            stop_reading(w, "read", len < 0 ? errno : EIO);
            return;
        }
        for (ssize_t off = 0; off < len && !w->closing;) {
            const struct inotify_event *ev = (const void *)(w->buf + off);
            off += (ssize_t)(sizeof *ev + ev->len);
            on_event(w, ev);
        }
        /* A read that left room for another whole event emptied the queue;
         * the poll is level-triggered, so later events wake us again. */
        if ((size_t)len + sizeof(struct inotify_event) + NAME_MAX + 1 <= sizeof w->buf) return;
    }
}

int watch_create(uv_loop_t *loop, struct watch **out)
{
    struct watch *w = calloc(1, sizeof *w);
    int rc;
    if (!w) return -ENOMEM;
    w->fd = watch__test_inotify_init1 ? watch__test_inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
                                      : inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        rc = -errno;
        free(w);
        if (rc == -EMFILE) { /* two limits give EMFILE: tell which one */
            int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (probe >= 0) close(probe);
            log_error(
                "cannot create an inotify instance: %s",
                probe >= 0
                    ? "the per-user limit on inotify instances is reached (sysctl "
                      "fs.inotify.max_user_instances; every process of this user that "
                      "watches files holds some): raise it, or run fewer watchers as this user"
                    : "the process's open-file limit is reached (ulimit -n)");
        }
        return rc;
    }
    if ((rc = uv_poll_init(loop, &w->poll, w->fd)) < 0) {
        close(w->fd);
        free(w);
        return rc;
    }
    w->poll.data = w;
    if ((rc = uv_poll_start(&w->poll, UV_READABLE, on_readable)) < 0) {
        watch_close(w, NULL, NULL); /* freed in the close callback */
        return rc;
    }
    *out = w;
    return 0;
}

int watch_add(struct watch *w, const char *path, watch_cb cb, void *ud, size_t *index)
{
    if (!path || !*path || !cb || !index) return -EINVAL;
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    if (w->nroots == w->caproots) {
        size_t cap = w->caproots ? w->caproots * 2 : 4;
        struct root *v = realloc(w->roots, cap * sizeof *v);
        if (!v) return -ENOMEM;
        w->roots = v;
        w->caproots = cap;
    }
    char *copy = strndup(path, len);
    if (!copy) return -ENOMEM;
    size_t r = w->nroots++;
    w->roots[r] = (struct root){.path = copy, .cb = cb, .ud = ud};
    int rc = root_start(w, r);
    if (rc < 0) {
        root_drop(w, r);
        free(copy);
        w->nroots--;
        return rc;
    }
    *index = r;
    unw_report(w);
    return 0;
}

int watch_root_wait_reason(const struct watch *w, size_t index)
{
    if (index >= w->nroots || w->roots[index].present) return 0;
    return w->roots[index].failed ? -EIO : -(w->roots[index].why ? w->roots[index].why : ENOENT);
}

void watch_set_unwatched_cb(struct watch *w, void (*cb)(void *ud, size_t n), void *ud)
{
    w->unw_cb = cb;
    w->unw_ud = ud;
}

void watch_rearm(struct watch *w)
{
    for (size_t r = 0; r < w->nroots && !w->closing; r++)
        if (w->roots[r].failed) root_restart(w, r); /* reports WATCH_ROOT_BACK itself */
    /* tree_add changes the list: work on a snapshot */
    size_t n = w->nunw;
    struct unw *snap = need(malloc((n ? n : 1) * sizeof *snap));
    for (size_t i = 0; i < n; i++)
        snap[i] = (struct unw){w->unw[i].root, need(strdup(w->unw[i].rel))};
    for (size_t i = 0; i < n; i++) {
        if (!w->closing && unw_find(w, snap[i].root, snap[i].rel) >= 0 &&
            w->roots[snap[i].root].present) {
            tree_add(w, snap[i].root, snap[i].rel);
            if (unw_find(w, snap[i].root, snap[i].rel) < 0) {
                log_info("directory %s/%s is watched now", w->roots[snap[i].root].path,
                         snap[i].rel);
                notify(w, snap[i].root, WATCH_EVENT); /* it may have changed meanwhile */
            }
        }
        free(snap[i].rel);
    }
    free(snap);
    unw_report(w);
}

int watch_is_root_present(const struct watch *w, size_t index)
{
    return index < w->nroots && w->roots[index].present;
}

uint64_t watch_events_total(const struct watch *w) { return w->events; }

void watch_set_counter(struct watch *w, void (*fn)(void *ud, uint64_t n), void *ud)
{
    w->count = fn;
    w->count_ud = ud;
}

size_t watch_wd_count(const struct watch *w)
{
    size_t n = 0;
    for (size_t i = 0; i < w->nents; i++) {
        size_t j = 0;
        while (j < i && w->ents[j].wd != w->ents[i].wd) j++;
        n += j == i;
    }
    return n;
}

static void on_closed(uv_handle_t *h)
{
    struct watch *w = h->data;
    void (*done)(void *) = w->done;
    void *done_ud = w->done_ud;
    close(w->fd); /* drops every kernel watch */
    for (size_t i = 0; i < w->nents; i++) free(w->ents[i].rel);
    for (size_t i = 0; i < w->nunw; i++) free(w->unw[i].rel);
    for (size_t i = 0; i < w->nroots; i++) free(w->roots[i].path);
    free(w->unw);
    free(w->ents);
    free(w->roots);
    free(w);
    if (done) done(done_ud);
}

void watch_close(struct watch *w, void (*done)(void *), void *done_ud)
{
    if (w->closing) return;
    w->closing = 1;
    w->done = done;
    w->done_ud = done_ud;
    uv_close((uv_handle_t *)&w->poll, on_closed);
}
