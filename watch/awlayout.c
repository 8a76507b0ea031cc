/*
 * awlayout.c - the kubelet AtomicWriter's layout at its commit point (see
 * awlayout.h): one readdir of ROOT/..data/ and an fstatat of each name in
 * ROOT, no file read.
 */
#include "watch/awlayout.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every entry of the open "..data" directory has a name in rootfd. */
static int every_name_linked(int rootfd, DIR *data)
{
    struct dirent *e;
    struct stat st;
    errno = 0;
    while ((e = readdir(data))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (fstatat(rootfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT) return 0;
            return -errno;
        }
        errno = 0;
    }
    return errno ? -errno : 1;
}

int aw_layout_complete(const char *root)
{
    if (!root || !*root) return -EINVAL;
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) return -errno;
    int rc, fd = openat(rootfd, "..data", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        rc = -errno;
        close(rootfd);
        return rc;
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        rc = -errno;
        close(fd);
        close(rootfd);
        return rc;
    }
    rc = every_name_linked(rootfd, d);
    closedir(d);
    close(rootfd);
    return rc;
}
