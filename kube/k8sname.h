/*
 * k8sname.h - the Kubernetes name and key rules, in one place: what the
 * API server accepts as a namespace, an object name, a volume or Service
 * name, a ConfigMap or Secret key. Each predicate mirrors one function of
 * apimachinery's pkg/util/validation/validation.go
 * (staging/src/k8s.io/apimachinery in the kubernetes tree) and is named
 * after it, so a rule is checked against its source by name.
 *
 * Pure: no I/O, no allocation, no globals; safe on any thread. Every
 * predicate takes a NUL-terminated string (NULL is never valid) and
 * returns 1 or 0. One function makes a name rather than judging one:
 * k8s_hashed_name, the stable short form of a name built from parts.
 */
#ifndef RA_K8SNAME_H
#define RA_K8SNAME_H

#include <stddef.h>

#define K8S_DNS1123_LABEL_MAX 63      /* DNS1123LabelMaxLength */
#define K8S_DNS1123_SUBDOMAIN_MAX 253 /* DNS1123SubdomainMaxLength */
#define K8S_DNS1035_LABEL_MAX 63      /* DNS1035LabelMaxLength */
/* qualifiedNameMaxLength: the name part of a qualified name ([prefix/]name:
 * annotation and label keys), which config/value.c checks with its own
 * messages. */
#define K8S_QUALIFIED_NAME_MAX 63

/* IsDNS1123Label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 bytes. A
 * namespace, a volume name, a container name. */
int k8s_is_dns1123_label(const char *s);

/* IsDNS1123Subdomain: DNS-1123 labels joined by '.', at most 253 bytes in
 * all (apimachinery sets no per-label limit here). The name of most
 * objects: a pod, a ConfigMap, a Secret, a webhook configuration. */
int k8s_is_dns1123_subdomain(const char *s);

/* IsDNS1035Label: [a-z]([-a-z0-9]*[a-z0-9])?, at most 63 bytes (a letter
 * first). A Service name. */
int k8s_is_dns1035_label(const char *s);

/* IsConfigMapKey: [-._a-zA-Z0-9]+, at most 253 bytes, not "." or "..", and
 * not starting with ".." (hasChDirPrefix). A ConfigMap or Secret key. */
int k8s_is_configmap_key(const char *s);

/* A DNS name as a certificate carries it: a DNS-1123 subdomain each of
 * whose labels is a DNS-1123 label (at most 63 bytes): the label rule of
 * IsFullyQualifiedDomainName, without its two-label minimum ("svc" is a
 * name in a cluster). */
int k8s_is_dns_name(const char *s);

/* Bytes k8s_hashed_name adds: '-' and 8 hex digits. */
#define K8S_HASHED_SUFFIX 9

/* The short form of a name made of parts (a prefix and an object's name)
 * that is too long for its rule's max (K8S_DNS1123_LABEL_MAX,
 * K8S_DNS1123_SUBDOMAIN_MAX), or taken: name cut to at most
 * max - K8S_HASHED_SUFFIX bytes, any '.' at the end of the cut dropped
 * (a label never starts with '-'), then '-' and the first 8 hex digits
 * of the SHA-256 of key. Stable: the same name and key give the same
 * result in every run and program; a name that was a DNS-1123 label or
 * subdomain stays one. Writes out (outsize bytes, at least
 * max + 1 for the whole result; NUL-terminated). Returns out. */
char *k8s_hashed_name(const char *name, size_t max, const char *key, char *out, size_t outsize);

#endif
