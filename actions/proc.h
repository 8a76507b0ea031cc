/*
 * proc.h - finding the application's process and signalling it safely.
 *
 * Target selection: a PID file, or a process name matched against
 * /proc/PID/comm or the basename of argv[0]. The agent's own PID and PID 1
 * (the pause process in a shared PID namespace) are never targets. Of the
 * matches, only the topmost are chosen (a match whose parent chain contains
 * another match is dropped: the nginx master, not its workers) unless `all`.
 *
 * Delivery uses pidfd_open + pidfd_send_signal: after opening the pidfd the
 * process identity (start time from /proc/PID/stat) is checked against the
 * one seen by the scan, so a reused PID is never signalled.
 *
 * A PID file can itself outlive its writer: the application dies, the file
 * stays, and an unrelated process gets the PID. A process that started
 * after the pid file was last modified cannot have written it, so such a
 * target is refused as a "stale pid file" (-ESTALE) and never signalled.
 * The rule: stale if start > mtime + PROC_PID_FILE_SLACK_NS, where start is
 * the boot time (CLOCK_REALTIME - CLOCK_BOOTTIME, as the kernel derives
 * btime in /proc/stat) plus starttime (field 22 of /proc/PID/stat, clock
 * ticks since boot). The slack covers the coarse timestamps (starttime is
 * in 10 ms ticks, file times lag by up to one kernel tick) and small steps
 * of the wall clock between the write and the check. The pid file is read
 * through ra_read_file (base/file.h): a FIFO, device or directory is
 * refused (-EINVAL, with a warning naming the path and its kind) instead
 * of blocking the loop.
 */
#ifndef RA_PROC_H
#define RA_PROC_H

#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* How much later than the pid file's mtime its writer may appear to have
 * started (see above): 1 s. */
#define PROC_PID_FILE_SLACK_NS 1000000000LL

struct proc_target {
    const char *pid_file; /* used if non-NULL and non-empty */
    const char *name;     /* else match comm / basename(argv[0]) */
    int all;              /* signal every match, not only the topmost */
};

struct proc_match {
    pid_t pid;
    unsigned long long start_time; /* field 22 of /proc/PID/stat */
};

/* What the scan saw, to explain an empty result. */
struct proc_scan_info {
    size_t visible;         /* processes visible in /proc */
    int only_self_and_init; /* 1 if nothing but us and PID 1 is visible */
};

/* Finds targets. Returns the number of matches written to out (<= max), or
 * <0: -ENOENT (pid file missing/empty), -EINVAL (pid file not a regular
 * file, malformed, or naming PID 1 or ourselves; empty name or a name
 * containing '/'), -ESRCH (the pid file names a process that is not
 * running), -ESTALE (the pid file names a process that started after the
 * file was last written: not its writer; logged with the details), other
 * -errno.
 * Zombies and kernel threads never match. info may be NULL; it is only
 * filled by a name scan (zeroed for a pid file). */
int proc_find(const struct proc_target *t, struct proc_match *out, size_t max,
              struct proc_scan_info *info);

/* Sends sig to the process m refers to. Returns 0, -ESRCH if it is gone or
 * its identity changed (PID reused), -EPERM (not permitted: same UID or
 * CAP_KILL needed), or other -errno. */
int proc_signal(const struct proc_match *m, int sig);

/* Opens a pidfd for m after verifying its identity (caller closes it), for
 * waiting on exit (restart action: the fd polls readable when the process
 * exits). Returns fd >= 0, -ESRCH (gone or PID reused), -ENOSYS (kernel
 * before 5.3), or -errno. */
int proc_pidfd(const struct proc_match *m);

/* Reads a PID file (trimmed positive decimal; not PID 1, not ourselves).
 * Returns 0 and *pid, -ENOENT (missing or empty), -EINVAL (malformed, or
 * not a regular file: never blocks on a FIFO) or another -errno. */
int proc_pid_file_read(const char *path, pid_t *pid);

/* 1 if a process whose /proc/PID/stat starttime is start_ticks started
 * more than PROC_PID_FILE_SLACK_NS after the wall-clock time mtime (so it
 * cannot have written a file last modified then), else 0. */
int proc_started_after(unsigned long long start_ticks, const struct timespec *mtime);

/* 1 if the process a pidfd refers to is still running (not exited, not a
 * zombie), 0 if it exited, <0 on error. One poll(2), no /proc access. */
int proc_pidfd_alive(int pidfd);

/* pidfd_send_signal(pidfd, sig). Returns 0, -ESRCH (gone), -EPERM, ... */
int proc_pidfd_signal(int pidfd, int sig);

/* A one-line explanation for a proc_signal/proc_find error, naming the fix
 * (e.g. EPERM -> run as the app's UID or add CAP_KILL). err 0 means "the
 * scan found nothing"; info (may be NULL) then tells whether that is because
 * the PID namespace is not shared. Static string. */
const char *proc_hint(int err, const struct proc_scan_info *info);

/* Writes ", which runs as UID U while reload-agent runs as UID V" about pid
 * into buf (n bytes, always terminated), for a "cannot signal" message of
 * -EPERM: the UIDs are what the user must make equal. */
void proc_uid_note(pid_t pid, char *buf, size_t n);

#endif
