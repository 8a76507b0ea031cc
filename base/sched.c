/*
 * sched.c - asks the kernel for a short scheduler time slice (see sched.h).
 */
#include "base/sched.h"

#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* struct sched_attr of sched_setattr(2), version 0 (48 bytes); glibc 2.36
 * has neither the structure nor a wrapper. */
struct ra_sched_attr {
    uint32_t size;
    uint32_t sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime;
    uint64_t sched_deadline;
    uint64_t sched_period;
};

int ra_sched_set_slice(int64_t ns)
{
    if (ns < 0) return -EINVAL;
    int policy = sched_getscheduler(0);
    if (policy < 0) return -errno;
    if (policy != SCHED_OTHER) return -EPERM;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (nice == -1 && errno) return -errno;
    struct ra_sched_attr a = {
        .size = sizeof a,
        .sched_policy = SCHED_OTHER,
        .sched_nice = nice,
        .sched_runtime = (uint64_t)ns,
    };
    return syscall(SYS_sched_setattr, 0, &a, 0) == 0 ? 0 : -errno;
}
