/*
 * lease.h - one coordination.k8s.io/v1 Lease used as a small shared
 * record: staging (run/stage.c) keeps the state of a workload's stage in
 * one annotation of the Lease named after the workload.
 *
 * Here: the Lease's name for a workload (the injector names the same Lease
 * in the Role it writes, so both sides call lease_name_for), and the two
 * writes: create the Lease, and set one annotation under a compare-and-
 * swap on the resourceVersion (a JSON merge patch that carries
 * metadata.resourceVersion: the API server answers 409 Conflict when the
 * Lease changed since that version). Reading is kwatch's (kube/kwatch.h:
 * list + watch by name, metadata only), so the Role grants list, watch and
 * patch on that one name, and create only if the agent is to create it.
 */
#ifndef RA_LEASE_H
#define RA_LEASE_H

#include <stddef.h>

#include "kube/kube.h"

#define LEASE_GROUP "coordination.k8s.io"
#define LEASE_RESOURCE "leases"
#define LEASE_PREFIX "reload-agent-stage-"
#define LEASE_NAME_MAX 253

/* Writes the Lease name of the workload kind/name ("Deployment", "web")
 * into out (n bytes): LEASE_PREFIX + the kind in lower case + "-" + name
 * ("reload-agent-stage-deployment-web"). A name too long for 253
 * characters is cut by k8s_hashed_name (keyed by "kind/name"), so cut
 * names stay distinct. Returns 0, or -EINVAL when kind is
 * empty or not letters, name is not an object name (RFC 1123 subdomain),
 * or n is below LEASE_NAME_MAX + 1. */
int lease_name_for(const char *kind, const char *name, char *out, size_t n);

struct kinds_kind;

/* Parses a workload named as KIND/NAME (--stage-workload: "deployment/web";
 * KIND, in any case, one of Deployment, StatefulSet, DaemonSet, Rollout:
 * the kinds whose replicas stage). Returns 0 with *ki its row of the kinds
 * table (kube/kinds.h) and *name pointing into v, or -EINVAL. */
int lease_parse_workload(const char *v, const struct kinds_kind **ki, const char **name);

/* The Lease's API path in kube_namespace(k). malloc'd (aborts on OOM). */
char *lease_path(const struct kube *k, const char *lease);

/* PATCHes the annotation key of Lease lease to value (a string; NULL
 * removes it) if its resourceVersion is still rv: a merge patch
 * {"metadata":{"resourceVersion":rv,"annotations":{key:value}}}. cb gets
 * the reply (200 with the Lease, or 409 when it changed, 404, ...), as
 * kube_request; on_cancel as in struct kube_req. Returns 0 or <0 (cb never
 * runs). */
int lease_cas_annotation(struct kube *k, const char *lease, const char *rv, const char *key,
                         const char *value, kube_cb cb, void *ud, void (*on_cancel)(void *));

/* POSTs a Lease named lease (labels app.kubernetes.io/name: reload-agent,
 * app.kubernetes.io/component: stage) with no annotation; 201, or 409
 * AlreadyExists when another replica was first. Returns 0 or <0 (cb never
 * runs). */
int lease_create(struct kube *k, const char *lease, kube_cb cb, void *ud,
                 void (*on_cancel)(void *));

/* Reads a Lease reply (body, len bytes, need not be terminated): its
 * metadata.resourceVersion into rv (rvlen bytes) and *value, a malloc'd
 * copy of the annotation key (NULL when absent). Returns 0, or -EINVAL (not
 * a JSON object with a resourceVersion that fits). */
int lease_parse_reply(const char *body, size_t len, const char *key, char *rv, size_t rvlen,
                      char **value);

#endif
