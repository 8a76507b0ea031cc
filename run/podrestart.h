/*
 * podrestart.h - the restart-pod action's other end: at start, the record
 * the previous agent left in --state-dir before it exited to restart the
 * pod (actions/restartpod.h). The kubelet removes the old containers with
 * their logs, so this is where a user learns why the pod restarted: the
 * agent logs it (event "pod-restarted"), posts it as a Normal PodRestarted
 * Event on its pod when it has an API client, and tells the engine that
 * every container has just started with the content now mounted.
 */
#ifndef RA_AGENT_PODRESTART_H
#define RA_AGENT_PODRESTART_H

#include "run/engine.h"
#include "kube/kevents.h"

/* Takes the record from state_dir (NULL or "": none) and reports it as
 * above (ev, pod and ns may be NULL: no Event). A record that cannot be
 * read is logged at warn level and removed. Returns 1 if there was a
 * record, else 0. */
int podrestart_report(const char *state_dir, struct engine *eng, struct kevents *ev,
                      const char *pod, const char *ns);

#endif
