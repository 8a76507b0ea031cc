/*
 * cleanpath.h - a mountPath as the container runtime reads it: the
 * runtime resolves a volumeMount's path lexically before it mounts
 * ("/etc/./app", "/etc//app" and "/srv/../etc/app" are all /etc/app), so
 * the transform and the stamp compare and write cleaned paths, cleaned as
 * Go's path.Clean cleans them. Pure.
 */
#ifndef RA_INJECT_CLEANPATH_H
#define RA_INJECT_CLEANPATH_H

/* path cleaned like Go's path.Clean: one '/' between elements, no "."
 * element, each ".." with the element before it removed ("/.." is "/"),
 * no trailing '/' ("" is "."). Returns a malloc'd string (the caller frees
 * it), or NULL on OOM. */
char *inject_clean_path(const char *path);

/* 1 if path is already clean (inject_clean_path returns it unchanged), 0
 * if not or on OOM. */
int inject_is_clean_path(const char *path);

#endif
