/*
 * podrefs.h - the ConfigMaps and Secrets a pod spec refers to: its volumes
 * (configMap, secret, and the sources of projected volumes) and the env of
 * every container (env valueFrom configMapKeyRef/secretKeyRef, envFrom).
 * A projected volume with a serviceAccountToken source (the kubelet's
 * kube-api-access-* volume and its kube-root-ca.crt) is left out.
 * Fast sync watches exactly these (run/fastsync.c). Pure: JSON in, names
 * out; no I/O.
 */
#ifndef RA_PODREFS_H
#define RA_PODREFS_H

#include <stddef.h>

#define PODREFS_MAX 64 /* objects one pod may name for fast sync */

enum podref_kind { PODREF_CONFIGMAP, PODREF_SECRET };

struct podref {
    enum podref_kind kind;
    char *name;
};

struct podrefs {
    struct podref *v;
    size_t n;
    size_t skipped; /* references beyond PODREFS_MAX or with an invalid name */
};

/* The plural resource of a kind: "configmaps" or "secrets". */
const char *podrefs_resource(enum podref_kind k);

/* Adds (kind, name) unless already there; an invalid object name, or one
 * past PODREFS_MAX, only counts in skipped. Aborts on OOM. */
void podrefs_add(struct podrefs *r, enum podref_kind kind, const char *name);

/* The one grammar of a --fast-sync-objects value (config/config.c checks
 * the flag with it, fast sync parses it with it): "configmap/NAME" or
 * "secret/NAME", NAME an object name (k8s_is_dns1123_subdomain). The kind
 * is singular, as the injector writes it and as the Role of
 * `reload-agent inject` reads it (inject/rbac.c). Pure. Returns 0 with
 * *kind and *name (pointing into spec), or -EINVAL with a one-line reason
 * that quotes spec in err. */
int podrefs_parse_spec(const char *spec, enum podref_kind *kind, const char **name, char *err,
                       size_t errlen);

/* podrefs_parse_spec, then podrefs_add. Returns 0, or -EINVAL with a
 * one-line reason in err (the value, or more than PODREFS_MAX objects). */
int podrefs_add_spec(struct podrefs *r, const char *spec, char *err, size_t errlen);

/* Collects the references of the pod in json (a Pod object, len bytes).
 * Returns 0 and fills r (which must be zeroed or hold earlier entries), or
 * -EINVAL with a one-line reason in err (not a JSON object, no spec). */
int podrefs_from_pod(const char *json, size_t len, struct podrefs *r, char *err, size_t errlen);

void podrefs_free(struct podrefs *r);

#endif
