/*
 * restartpod.c - the restart-pod action: every container of the pod
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
 * writes the record the engine gave it (params restart_pod_record, named
 * restart_pod_record_name: run/statedir.h owns both) into --state-dir, a
 * directory that lives as long as the pod (an emptyDir), because the
 * kubelet removes the old containers, their logs and their termination
 * messages with them: the agent that starts again takes the record, logs
 * it, posts it as an Event and takes it for the pod restart. A record that
 * cannot be written (a full or read-only directory) fails the action, and
 * the agent does not exit: the engine retries with its backoff (issue 24
 * G11: exiting anyway was a pod restart loop).
 *
 * Its ops are the table's row (action__restart_pod_ops, actions/action.h):
 * nothing else is exported.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "actions/action.h"
#include "base/file.h"
#include "base/log.h"

static void restartpod_start(struct action_env *env, const struct action_params *p,
                             action_done done, void *ud)
{
    if (!env->exit_request) { /* only the daemon can exit; tests without one */
        struct action_result r = {-ENOTSUP, 1, "restart-pod: this agent cannot exit on request", 0};
        done(ud, ACTION_RESTART_POD, &r);
        return;
    }
    int recorded = 0, code = p->restart_pod_exit_code;
    if (p->state_dir && p->restart_pod_record) {
        char err[4400], msg[4600];
        const char *rec = p->restart_pod_record;
        int rc = ra_record_write(p->state_dir, p->restart_pod_record_name, rec, strlen(rec), err,
                                 sizeof err);
        if (rc < 0) {
            /* Without its record the agent that starts again cannot tell the
             * pod restart from a crash: it would act on the change again and
             * restart the pod again, and again. Not exiting is the failure. */
            snprintf(msg, sizeof msg, "%s; not restarting the pod without it", err);
            struct action_result r = {rc, 0, msg, 0};
            done(ud, ACTION_RESTART_POD, &r);
            return;
        }
        recorded = 1;
    }
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_WARN, "restart-pod")) {
        log_rec_int(&r, "exit_code", code);
        log_rec_str(&r, "hash", p->content_hash);
        if (p->restart_pod_files) log_rec_str(&r, "files", p->restart_pod_files);
        log_rec_bool(&r, "recorded", recorded);
        log_rec_end(&r,
                    "restarting the pod: exiting with code %d, on which the kubelet restarts "
                    "every container of the pod in place (changed: %s)",
                    code, p->restart_pod_files ? p->restart_pod_files : "?");
    }
    /* p is freed by done */
    struct action_result ok = {0, 0, NULL, 0};
    done(ud, ACTION_RESTART_POD, &ok);
    env->exit_request(env->exit_ud, code);
}

const struct action_ops action__restart_pod_ops = {restartpod_start, NULL, NULL};
