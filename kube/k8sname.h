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
 * returns 1 or 0.
 */
#ifndef RA_K8SNAME_H
#define RA_K8SNAME_H

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

#endif
