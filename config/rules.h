/*
 * rules.h - the one decision of which action a logical path needs.
 *
 * A struct path_rules is the whole decision as a value: the --ignore globs,
 * then the rules in order (each --env-watch root, matched by lying under
 * it, with --env-action; then each --rule glob, matched by fnmatch with no
 * flags, so '*' crosses '/'), and the default (--action). cfg_build makes
 * one per configuration (struct config.path_rules); whoever needs the
 * decision elsewhere, such as the monitor's hashing thread, takes a copy
 * (path_rules_copy). Once built it is never changed, holds no globals and
 * does no I/O, so reading it is safe on any thread.
 *
 * This is the only module that calls fnmatch(3).
 */
#ifndef RA_RULES_H
#define RA_RULES_H

#include <stddef.h>

/* What path_rules_action returns for an ignored path. */
#define PATH_RULES_IGNORED (-1)

struct path_rule {
    char *glob; /* a --rule glob, or with root set an --env-watch root */
    int root;   /* 1: matches paths that lie under glob (path_rules_is_under) */
    int action; /* enum action */
};

struct path_rules {
    char **ignore; /* --ignore globs */
    size_t nignore;
    struct path_rule *v; /* in the order added: the first match wins */
    size_t n;
    int dflt; /* enum action of a path no rule matches (--action) */
};

/* Starts an empty value in r (nothing ignored, no rules) whose default is
 * dflt. A zeroed struct path_rules is the same with ACTION_NONE. */
void path_rules_init(struct path_rules *r, int dflt);

/* Building, before the value is shared: each call appends a copy of its
 * string (the caller keeps its own). Rules match in the order added.
 * Abort through ra_oom() when out of memory. */
void path_rules_add_ignore(struct path_rules *r, const char *glob);
void path_rules_add_root(struct path_rules *r, const char *root, int action);
void path_rules_add_glob(struct path_rules *r, const char *glob, int action);

/* A deep copy of src into dst (free with path_rules_free); aborts on
 * OOM. */
void path_rules_copy(struct path_rules *dst, const struct path_rules *src);

/* Frees what r holds and leaves it empty (as path_rules_init(r, 0)). */
void path_rules_free(struct path_rules *r);

/* 1 if an ignore glob matches the logical path (fnmatch, no flags): the
 * file is left out of the content entirely. */
int path_rules_is_ignored(const struct path_rules *r, const char *path);

/* The action of a logical path: PATH_RULES_IGNORED when an ignore glob
 * matches it; else the action of the first rule that matches it; else the
 * default. */
int path_rules_action(const struct path_rules *r, const char *path);

/* 1 if logical path `path` is root itself or lies under it (path starts
 * with root + "/"); root is taken as given with trailing '/' removed, as
 * logical paths are built (docs/hash.md, the content hash), so "/" holds
 * every absolute path. Pure: safe on any thread. */
int path_rules_is_under(const char *root, const char *path);

#endif
