/*
 * permhint.h - what to change when this process may not read a file: the
 * file's mode and owner beside the process's own user and groups, in words
 * a pod's author can act on (a Secret volume of mode 0400 is owned by root,
 * and the agent never runs as root).
 */
#ifndef RA_PERMHINT_H
#define RA_PERMHINT_H

#include <stddef.h>

/* For path, which this process could not read (EACCES): writes a one-line
 * hint into buf (len bytes, NUL-terminated) naming the file's mode and
 * owner, the process's uid, gid and groups, and the fix ("the pod's
 * securityContext.fsGroup, or a volume mode readable by others such as
 * 0444"). Returns 1 with the hint; 0 when the file cannot be stat'ed
 * (buf is then ""). Safe on any thread. */
int ra_perm_hint(const char *path, char *buf, size_t len);

#endif
