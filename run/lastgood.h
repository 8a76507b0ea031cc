/*
 * lastgood.h - the copies of --keep-last-good, in the kubelet's own
 * AtomicWriter layout (k8s.io/kubernetes pkg/volume/util/atomic_writer.go),
 * so that the app reads them exactly as it would read its ConfigMap or
 * Secret volume:
 *
 *   DIR/live/..2026_12_05_10_00_00.Ab12Cd/nginx.conf   the files of one version
 *   DIR/live/..data -> ..2026_12_05_10_00_00.Ab12Cd    swapped by rename(2)
 *   DIR/live/nginx.conf -> ..data/nginx.conf           one link per top-level name
 *
 * A write makes a new timestamped directory, writes the files there, points
 * a "..data_tmp" link at it and renames that over "..data" (the one atomic
 * step: a reader sees the old version or the new one, never a mix), then
 * adds the top-level links of new names and removes those of names that
 * are gone, then (unless kept for a rollback) removes the old directory.
 *
 * What is copied is exactly the content the engine decided on: the entries
 * of a manifest (hash/hash.h) under one watch root, each read from `from`
 * and checked against its digest, so a copy never holds content that was
 * not hashed (and, for live/, validated). Blocking file I/O, on the loop:
 * ConfigMaps and Secrets are at most 1 MiB.
 */
#ifndef RA_LASTGOOD_H
#define RA_LASTGOOD_H

#include <stddef.h>

#include "hash/hash.h"

#define LASTGOOD_LIVE "live"
#define LASTGOOD_CANDIDATE "candidate"
#define LASTGOOD_TS_MAX 64            /* room for a timestamped directory's name */
#define LASTGOOD_FILE_MAX (64u << 20) /* the largest file copied */

/* Writes the entries of m whose logical path lies under root (the --watch
 * root as given, without trailing '/') into dir as a new version: each
 * file root/REL is read from from/REL and must still hold the digest m
 * gives it. dir is created if missing. When old_ts is not NULL, the
 * previous version's directory is kept and its name written there ("" if
 * there was none), for lastgood_restore or lastgood_drop; else it is
 * removed. Returns 0; -EAGAIN when a file no longer holds its digest (the
 * content moved on since it was hashed: nothing was swapped); -ENOTDIR when
 * root is a file root; or -errno of the failing call, with a one-line
 * reason naming the path in err. On any failure dir still shows the
 * previous version. */
int lastgood_write(const struct hash_manifest *m, const char *root, const char *from,
                   const char *dir, char *old_ts, size_t old_ts_len, char *err, size_t errlen);

/* Points dir's ..data back at the version old_ts (as lastgood_write kept
 * it), fixes the top-level links, and removes the version it replaced.
 * Returns 0 or -errno with the reason in err. */
int lastgood_restore(const char *dir, const char *old_ts, char *err, size_t errlen);

/* Removes the kept version old_ts of dir (nothing for ""). */
void lastgood_drop(const char *dir, const char *old_ts);

/* 1 if dir holds a version (a ..data link to a directory), else 0. */
int lastgood_has_copy(const char *dir);

/* Removes the timestamped directories of dir that ..data does not point at
 * (left by an agent that stopped between two steps), and a "..data_tmp". */
void lastgood_tidy(const char *dir);

/* base with its entries under root replaced by the version dir shows
 * (its paths rewritten from dir to root): what the app reads, in the
 * engine's terms. Classes are kept from base where a path is in both, else
 * MAIN. Returns 0 and *out (free with hash_manifest_free), or -errno with
 * the reason in err. */
int lastgood_manifest(const struct hash_manifest *base, const char *root, const char *dir,
                      struct hash_manifest *out, char *err, size_t errlen);

#endif
