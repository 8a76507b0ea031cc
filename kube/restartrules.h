/*
 * restartrules.h - what the kubelet does when a container exits with a given
 * code, from a copy of that container's restartPolicyRules (KEP-5307
 * ContainerRestartRules; the RestartAllContainers action is KEP-5532).
 *
 * The field, as the API has it (k8s.io/api core/v1, 1.35+; no "onExit"
 * wrapper, whatever the KEP text shows):
 *
 *   [{"action": "Restart" | "RestartAllContainers",
 *     "exitCodes": {"operator": "In" | "NotIn", "values": [0..255, ...]}}, ...]
 *
 * At most 20 rules, at most 255 values each. The rules are evaluated in
 * order and the first whose exitCodes match decides; when none matches, the
 * container's restartPolicy applies. The restart-pod action exits only when
 * the first match for its exit code is RestartAllContainers: anything else
 * would restart the agent alone.
 *
 * Pure: no I/O, no state; parsing is bounded by the limits above.
 */
#ifndef RA_RESTARTRULES_H
#define RA_RESTARTRULES_H

#include <stddef.h>

#define RESTARTRULES_MAX_RULES 20
#define RESTARTRULES_MAX_VALUES 255

/* What the first matching rule does. */
enum restartrules_verdict {
    RESTARTRULES_NO_MATCH = 0, /* no rule matches: the container's restartPolicy applies */
    RESTARTRULES_RESTART,      /* "Restart": the container alone restarts */
    RESTARTRULES_RESTART_ALL,  /* "RestartAllContainers": every container of the pod */
};

/* Checks that json is a restartPolicyRules list as the API accepts it
 * (the shape above; unknown keys are errors, as a typo would otherwise
 * pass). Returns 0, or -EINVAL with a one-line reason in why. */
int restartrules_check(const char *json, char *why, size_t n);

/* The verdict for a container that exits with code, under the rules in
 * json (which restartrules_check accepts). Returns the verdict (>= 0), or
 * -EINVAL with the reason in why when json is not valid. When the verdict
 * is not RESTARTRULES_RESTART_ALL, why says which rule decided (or that
 * none matched). */
int restartrules_verdict(const char *json, int code, char *why, size_t n);

/* The rule list the injector writes for the restart-pod action with exit
 * code code: [{"action":"RestartAllContainers","exitCodes":{"operator":"In",
 * "values":[code]}}] into out (at least 96 bytes). */
void restartrules_for_code(int code, char *out, size_t n);

#endif
