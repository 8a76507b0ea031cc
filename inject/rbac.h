/*
 * rbac.h - the RBAC objects fast sync needs (issue 18 item 4), and those
 * of staging (issue 26: a Role, its RoleBinding and the Lease; below), for
 * `reload-agent inject`: per injected workload whose sidecar runs
 * --fast-sync=true, a Role in the workload's namespace and a RoleBinding
 * of it to the pod template's ServiceAccount, both named
 * RBAC_FAST_SYNC_PREFIX "<kind>-<name>" ("reload-agent-fast-sync-
 * deployment-web"); a name over 253 bytes (a workload name over 219) is
 * cut to 244 and ends in '-' and 8 hex digits of the SHA-256 of the whole
 * name, so it stays an object name and stable across runs. The Role holds the rules of
 * manifests/fast-sync/role.yaml, with resourceNames of exactly the
 * objects of the sidecar's --fast-sync-objects (what the agent watches is
 * what RBAC grants). The policy that makes the pod patch self-only
 * (manifests/fast-sync/policy.yaml) is cluster-scoped and applied once per
 * cluster: it is not written here. Pure: JSON in, JSON out.
 */
#ifndef RA_INJECT_RBAC_H
#define RA_INJECT_RBAC_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define RBAC_FAST_SYNC_PREFIX "reload-agent-fast-sync-"
#define RBAC_FAST_SYNC_POLICY "manifests/fast-sync/policy.yaml"

/* For the injected workload obj (its operations applied) whose pod
 * template is at prefix ("" for a Pod): when the template's
 * reload-agent container has the arg --fast-sync=true, returns 1 with
 * *role and *binding new objects (the caller owns them); 0 when it has
 * not; -EINVAL with the reason in why when they cannot be written (no
 * metadata.name, or no metadata.namespace, which the RoleBinding's
 * ServiceAccount subject needs); -ENOMEM. */
int rbac_fast_sync(const cJSON *obj, const char *prefix, cJSON **role, cJSON **binding, char *why,
                   size_t whylen);

/* Staging's objects (docs/staging.md) for the injected workload obj (its
 * operations applied), whose pod template is at prefix: when the
 * template's reload-agent container has the arg
 * --stage-workload=KIND/NAME, returns 1 with *role, *binding and *lease new
 * objects (the caller owns them), all named lease_name_for(KIND, NAME)
 * ("reload-agent-stage-deployment-web"): the Role grants list, watch and
 * patch on that one Lease, get on the workload, create on Events; the
 * RoleBinding binds it to the template's ServiceAccount; the Lease exists
 * so that the agent needs no create. 0 without the arg; -EINVAL with the
 * reason in why (no metadata.namespace, or an arg that names no workload);
 * -ENOMEM. */
int rbac_stage(const cJSON *obj, const char *prefix, cJSON **role, cJSON **binding, cJSON **lease,
               char *why, size_t whylen);

#endif
