/*
 * permhint.c - the hint for a file this process may not read (see
 * permhint.h): the kubelet writes ConfigMap and Secret volumes as root with
 * the volume's mode (default 0644), and makes them group-readable for the
 * pod's fsGroup when it has one; a non-root agent reads a mode 0400 file
 * only through one of those.
 */
#include "base/permhint.h"

#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int ra_perm_hint(const char *path, char *buf, size_t len)
{
    struct stat st;
    if (len) buf[0] = '\0';
    if (stat(path, &st) != 0 || len == 0) return 0;
    gid_t groups[16];
    int n = getgroups(sizeof groups / sizeof groups[0], groups);
    char gl[160] = "";
    size_t o = 0;
    for (int i = 0; i < n && o + 16 < sizeof gl; i++)
        o += (size_t)snprintf(gl + o, sizeof gl - o, "%s%u", i ? "," : "", (unsigned)groups[i]);
    snprintf(buf, len,
             "the agent runs as uid %u gid %u%s%s%s and %s is mode %04o, owner %u:%u: give the "
             "pod a securityContext.fsGroup, or the volume a mode readable by others (0444)",
             (unsigned)geteuid(), (unsigned)getegid(), n > 0 ? " (groups " : "", gl,
             n > 0 ? ")" : "", S_ISDIR(st.st_mode) ? "the directory" : "the file",
             (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid, (unsigned)st.st_gid);
    return 1;
}
