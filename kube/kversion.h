/*
 * kversion.h - the API server's version: GET /version (the JSON of
 * k8s.io/apimachinery/pkg/version.Info) read and parsed. /version is
 * readable by every authenticated user (ClusterRole
 * system:public-info-viewer, bound to system:authenticated and
 * system:unauthenticated), so any ServiceAccount token will do.
 *
 * What is read: "major" ("1") and "minor" ("36", or "36+" on managed
 * clusters whose build differs from upstream: EKS, GKE); when minor is
 * empty or unreadable (a development build), the minor of "gitVersion"
 * ("v1.36.3", "v1.29.3-eks-adc7111"). Kubernetes 1.x only.
 */
#ifndef RA_KUBE_KVERSION_H
#define RA_KUBE_KVERSION_H

#include <stddef.h>

#include "kube/kube.h"

#define KVERSION_GIT_MAX 64 /* longest gitVersion kept (longer ones are cut) */

struct kversion {
    int major, minor;               /* 1, 36 */
    char git[KVERSION_GIT_MAX + 1]; /* gitVersion as served (one line), "" when absent */
};

/* Parses a /version body (len bytes, need not be NUL-terminated). Returns 0
 * and *out; or -EINVAL and err naming what was wrong (not JSON, not an
 * object, major not "1", no minor in "minor" or "gitVersion"). */
int kversion_parse(const char *body, size_t len, struct kversion *out, char *err, size_t errlen);

/* Called once with the version (err NULL), or v NULL and err a one-line
 * reason (the API server's answer, a 403 naming the ClusterRole, a body
 * that does not parse). Runs on the loop; valid only during the call. */
typedef void (*kversion_cb)(void *ud, const struct kversion *v, const char *err);

/* Starts GET /version through k (its retries and timeout, kube.h). Returns
 * 0 (cb runs exactly once, unless k is destroyed first: then never), or <0
 * (cb never runs). */
int kversion_fetch(struct kube *k, kversion_cb cb, void *ud);

#endif
