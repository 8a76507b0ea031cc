/*
 * injectnote.h - the injector's warnings, delivered where the pod's user
 * looks. `reload-agent inject` and the webhook record their warnings (a
 * subPath mount that never updates, a guessed UID, ...) in the pod's
 * reload-agent.io/inject-status annotation; a pod created by a controller
 * never shows its admission warnings to anyone, so the agent, which reads
 * its pod's annotations file anyway, logs each one at start and posts it as
 * a Warning Event (reason InjectionWarning) on its own pod.
 */
#ifndef RA_AGENT_INJECTNOTE_H
#define RA_AGENT_INJECTNOTE_H

#include <stddef.h>

#include "config/annotations.h"
#include "kube/kevents.h"

/* Reads the warnings of the status annotation in a (the annotations file;
 * NULL or without the annotation: none), logs each one (event
 * "inject-warning", level warn) and, when ev is not NULL, posts it as a
 * Warning Event about pod name/ns. A status that is not the JSON object the
 * injector writes is logged once at warn level and otherwise ignored (it
 * changes nothing the agent does). Returns the number of warnings. */
size_t injectnote_report(const struct annot_set *a, struct kevents *ev, const char *pod,
                         const char *ns);

#endif
