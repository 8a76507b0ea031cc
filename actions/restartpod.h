/*
 * restartpod.h - the restart-pod action: every container of the pod
 * restarted in place by the kubelet (KEP-5532), and the record that carries
 * why across the restart.
 *
 * The agent can restart no other container itself (no shared PID namespace,
 * no API access): it exits with --restart-pod-exit-code, and the kubelet,
 * told by the agent container's restartPolicyRules ({action:
 * RestartAllContainers, exitCodes: {operator: In, values: [N]}}), kills and
 * removes every container of the pod and runs them again: init containers
 * first, then the sidecars, then the app. The sandbox, pod UID, IP and
 * volumes stay; the kubelet mounts the newest ConfigMap and Secret content
 * before any container starts, and env is resolved again. The option
 * parser (config/config.c, kube/restartrules.h) refuses restart-pod
 * unless the rule the agent was given restarts every container on that
 * code, so the exit never restarts the agent alone.
 *
 * The exit itself is the daemon's (run/run.c): the action reports
 * success, then asks for it through env->exit_request. Before that it
 * writes a record into --state-dir (a directory that lives as long as the
 * pod: an emptyDir), because the kubelet removes the old containers, their
 * logs and their termination messages with them: the agent that starts
 * again takes the record (restartpod_record_take), logs it and posts it as
 * an Event.
 */
#ifndef RA_RESTARTPOD_H
#define RA_RESTARTPOD_H

#include <stddef.h>
#include <stdint.h>

#define RESTARTPOD_RECORD_FILE "restart-pod.json"
#define RESTARTPOD_RECORD_MAX (64 * 1024)

/* Why the pod was restarted: what the record holds. */
struct restartpod_record {
    int64_t time_ms; /* wall clock (ms since the epoch) when the agent exited */
    int exit_code;
    char hash[65]; /* the content hash the restart was for (64 hex) */
    char *files;   /* the changed files that needed it, ", "-joined (owned; may be NULL) */
};

/* Writes r into dir/RESTARTPOD_RECORD_FILE atomically (a temporary file,
 * then rename). Returns 0, or -errno with a one-line reason in err. */
int restartpod_record_write(const char *dir, const struct restartpod_record *r, char *err,
                            size_t errlen);

/* Reads dir/RESTARTPOD_RECORD_FILE into *out and removes it, so that it is
 * reported once. Returns 1 when there was a record, 0 when there was none,
 * or -errno with the reason in err (unreadable or malformed: removed too
 * when it can be). Free *out with restartpod_record_free. */
int restartpod_record_take(const char *dir, struct restartpod_record *out, char *err,
                           size_t errlen);

void restartpod_record_free(struct restartpod_record *r);

#endif
