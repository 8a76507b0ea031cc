/*
 * hash.h - the canonical content hash of docs/hash.md (contract v2), plus a
 * per-file manifest.
 *
 * For each root: walk the user-visible tree (top-level names starting with
 * ".." are skipped; a symlink is followed only when its resolved target stays
 * inside the root's resolved path; directories are recursed; regular files
 * are hashed; everything else is skipped). A root that is (or resolves to) a
 * regular file is its own logical path. Logical path = root as given with
 * trailing '/' removed, + '/' + path relative to the root through the
 * user-visible names. All files of all roots are sorted bytewise by logical
 * path (exact duplicates from overlapping roots are kept once). The manifest
 * is one line per file exactly as GNU sha256sum prints it (see
 * hash_manifest_line), and the hash is the SHA-256 of the manifest text
 * (of nothing for no files), so `reload-agent hash --list DIR | head -n -1 |
 * sha256sum` reproduces it.
 *
 * Each content byte goes through SHA-256 once: the per-file digests make the
 * total, the sub hash (the same construction over the HASH_CLASS_SUB
 * entries) and the diff. Content is read in chunks (64 KiB, 1 MiB for larger
 * files, freed when the computation ends), so memory is bounded whatever
 * the file size. If a root's "..data" link changes during the walk (a
 * kubelet AtomicWriter swap), or a file vanishes or changes size while it is
 * read, the whole computation is redone, at most HASH_MAX_REWALKS times
 * (with a short, growing pause in between).
 *
 * Threads: hash_compute keeps no state between calls other than the
 * caller's hash_cache, so it may run on any thread (e.g. a libuv worker),
 * several at once as long as each uses its own cache; its callbacks run on
 * the calling thread. A cache is not locked: while a computation that uses
 * it runs, no other thread may touch it (hash_cache_forget_listing
 * included: note what to forget and forget it once the computation has
 * returned, before the next one starts). The test seams are in hash/hash_test.h.
 *
 * Skipped entries (see enum hash_warning) are reported once, after the
 * computation that produced the result, never for discarded attempts.
 * Directory cycles are cut by remembering the (st_dev, st_ino) of every
 * directory on the current walk path, and directories more than
 * HASH_MAX_DEPTH levels below a root are not entered (HASH_WARN_LOOP).
 * The symlink check defends against links in the volume, not against a
 * process racing the walk to swap directories for links.
 */
#ifndef RA_HASH_H
#define RA_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_LEN 32
#define HASH_HEX_LEN 64
#define HASH_MAX_REWALKS 8
#define HASH_MAX_DEPTH 256

struct hash_entry {
    char *path;                     /* logical path, NUL-terminated, owned by the manifest */
    uint64_t size;                  /* content length in bytes */
    unsigned char digest[HASH_LEN]; /* SHA-256 of the content */
    unsigned classes;               /* bitmask returned by the select callback (>= 1) */
};

struct hash_manifest {
    struct hash_entry *v; /* sorted bytewise by path, no duplicates */
    size_t n;
    unsigned char total[HASH_LEN]; /* SHA-256 of the manifest lines of all entries */
    unsigned char sub[HASH_LEN];   /* the same over only the entries with HASH_CLASS_SUB */
    size_t nsub;
};

#define HASH_CLASS_MAIN 1u /* file is part of the content (the manifest and total) */
#define HASH_CLASS_SUB 2u  /* file also feeds manifest.sub (e.g. rollout-class files) */

/* Why something was skipped, reported through hash_opts.warn. */
enum hash_warning {
    HASH_WARN_ESCAPING_SYMLINK, /* symlink target outside the root: not followed */
    HASH_WARN_LOOP,             /* ELOOP, a directory already on the walk path, or too deep */
    HASH_WARN_DANGLING,         /* symlink to nothing (e.g. removed key mid-swap) */
    HASH_WARN_SPECIAL,          /* socket, fifo, device: skipped */
};

/* Remembers each root's resolved path between computations, so an unchanged
 * root costs one stat(2) instead of a realpath(3) per component. Every use
 * checks that the remembered path still names the directory the root names
 * (same st_dev and st_ino); anything else resolves the root again. Owned by
 * one caller and not shared between threads. Zero-initialise it; free it
 * with hash_cache_free. */
struct hash_cache_root;
struct hash_cache {
    struct hash_cache_root *v;
    size_t n;
};

/* Frees the cache's memory and zeroes it. Safe on a zeroed cache. */
void hash_cache_free(struct hash_cache *c);

/* The cache also keeps each directory root's top-level listing (names,
 * entry types, and what top-level symlinks say) from the last stable
 * computation, and the next computations walk that listing instead of
 * reading the directory again, for as long as the root names the same
 * directory. Only "..data" and other ".."-prefixed names may change in
 * between (the kubelet's atomic swap): whoever watches the root must call
 * this as soon as anything else at its top level may have been created,
 * removed, renamed or replaced (and on an inotify overflow, or when unsure),
 * for root, or for every root with root NULL. Contents below the top level
 * and file contents are always read again. */
void hash_cache_forget_listing(struct hash_cache *c, const char *root);

struct hash_opts {
    /* The callbacks run on the thread that calls hash_compute, before it
     * returns. */
    /* Optional: classify a logical path. Return 0 to leave the file out
     * entirely (e.g. --ignore), else a mask of HASH_CLASS_* bits, which
     * must include HASH_CLASS_MAIN (it is added if missing). NULL means
     * every file is MAIN. Called once per file, in sorted order (again
     * when the computation is redone). */
    unsigned (*select)(void *ud, const char *logical_path);
    /* Optional: told about each skipped entry, by its logical path. */
    void (*warn)(void *ud, enum hash_warning w, const char *logical_path);
    void *ud;
    /* Optional: resolved roots remembered from earlier computations. */
    struct hash_cache *cache;
};

/* Error detail for a failed computation. */
struct hash_error {
    int code;        /* the negative errno of the system call that failed (never
                          * one left behind by a later call); hash_strerror says it */
    const char *op;  /* "stat", "opendir", "readdir", "realpath", "readlink", "open",
                          * "read", "walk" (path too long), "malloc", "sha256", or "rewalk"
                          * (still changing after HASH_MAX_REWALKS; path = last change) */
    char path[4096]; /* the path that failed (as walked), NUL-terminated */
};

/* Computes the manifest of roots[0..nroots). opts and err may be NULL.
 * On success returns 0 and *out owns its memory (free with
 * hash_manifest_free). On failure returns <0 (-errno), fills *err, and *out
 * is left empty (safe to free). A root that does not exist is an error
 * (-ENOENT, op "stat"). The root "/" gives logical paths "/etc/...".
 * Blocking (it reads every file): run it off the event loop for big trees. */
int hash_compute(const char *const *roots, size_t nroots, const struct hash_opts *opts,
                 struct hash_manifest *out, struct hash_error *err);

/* The message for a hash_compute error code (a negative errno): EMFILE and
 * ENFILE name the limit that was reached, "too many open files in this
 * process (RLIMIT_NOFILE)" and "too many open files in the system
 * (fs.file-max)"; any other code gives the C library's description. Returns
 * a static string; safe on any thread. */
const char *hash_strerror(int code);

/* Frees the manifest's memory and zeroes it. Safe on a zeroed manifest. */
void hash_manifest_free(struct hash_manifest *m);

/* Writes e's manifest line exactly as GNU sha256sum prints it: the content
 * digest in lowercase hex, two spaces, the logical path, a newline; when
 * the path holds a backslash or a newline, the line starts with a
 * backslash, and each backslash in the path is written as \\ and each
 * newline as \n (two characters each). The line is passed to put(ud,
 * bytes, n) in pieces, in order, before this returns. */
void hash_manifest_line(const struct hash_entry *e, void (*put)(void *ud, const void *p, size_t n),
                        void *ud);

/* Writes 64 lowercase hex digits and a NUL into out. */
void hash_hex(const unsigned char d[HASH_LEN], char out[HASH_HEX_LEN + 1]);

/* Hash of zero files (the SHA-256 of the empty manifest). */
void hash_empty(unsigned char out[HASH_LEN]);

/* Difference between two manifests. The path pointers point into the
 * manifests, which must outlive the diff. */
struct hash_diff {
    const char **added;
    size_t nadded;
    const char **removed;
    size_t nremoved;
    const char **modified;
    size_t nmodified;
};

/* Computes old -> new. Either manifest may be empty. Returns 0 or -ENOMEM. */
int hash_diff(const struct hash_manifest *old, const struct hash_manifest *new_,
              struct hash_diff *out);
void hash_diff_free(struct hash_diff *d);

/* Deep copy of a manifest. Returns 0 or -ENOMEM. */
int hash_manifest_copy(const struct hash_manifest *src, struct hash_manifest *dst);

/* The SHA-256 of p[0..n) into out (a file's digest, for entries built in
 * memory). */
void hash_bytes(const void *p, size_t n, unsigned char out[HASH_LEN]);

/* Builds a manifest from entries held in memory (e.g. files laid out from
 * Kubernetes objects rather than walked): v[0..n) with path, size, digest
 * and classes (HASH_CLASS_MAIN is added) is copied, sorted bytewise by path
 * and folded exactly as hash_compute folds a walk (total, sub, nsub).
 * Returns 0 and *out (free with hash_manifest_free), -EINVAL when two
 * entries have the same path, or -ENOMEM; on failure *out is left empty. */
int hash_manifest_from_entries(const struct hash_entry *v, size_t n, struct hash_manifest *out);

#endif
