/*
 * sched.h - the scheduler time slice the agent asks the kernel for.
 */
#ifndef RA_SCHED_H
#define RA_SCHED_H

#include <stdint.h>

/* Asks for a time slice of ns nanoseconds for the calling thread
 * (sched_setattr(2) with SCHED_OTHER's sched_runtime; EEVDF, Linux 6.12
 * and later, clamps it to 0.1-100 ms). A short slice gives the thread's
 * wakeups an early deadline, so a filesystem event preempts other work on
 * the CPU at once instead of queueing behind it; it does not change the
 * thread's share of the CPU. 0 restores the kernel's default slice. The
 * thread's nice value is kept; a thread not under SCHED_OTHER (batch, idle,
 * real-time) is left alone and -EPERM is returned. Older kernels accept and
 * ignore the value. Returns 0 or -errno. */
int ra_sched_set_slice(int64_t ns);

#endif
