/*
 * stamp.h - the render-time rollout hash (issue 10, the KEP-27 idea): for
 * an injected pod template and the ConfigMaps and Secrets of the same
 * input, the value the agent will compute in the pod for its rollout hash
 * (manifest.sub of hash.h: only the files whose action is rollout), so
 * `reload-agent inject` can stamp it as the template annotation
 * reload-agent.io/config-hash (or the pod's --hash-annotation).
 *
 * The agent's configuration is rebuilt exactly as the pod will build it:
 * the sidecar's args are parsed as flags, the template's annotations as the
 * annotation layer (config/config.h, cfg_build), and each file's class is
 * decided by the agent's own rule code. Files are laid out as the kubelet
 * writes the volumes: every key of data/binaryData (ConfigMap) or
 * data/stringData (Secret), or only the items' key -> path mappings, under
 * the sidecar's mountPath of that volume.
 */
#ifndef RA_INJECT_STAMP_H
#define RA_INJECT_STAMP_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* The ConfigMaps and Secrets of one input, looked up by namespace and name. */
struct stamp_sources {
    const cJSON **objs; /* ConfigMap or Secret objects, borrowed */
    size_t n;
};

/* Computes the stamp for the pod template tmpl ({metadata, spec}, already
 * injected: it holds the reload-agent sidecar) of a workload in namespace
 * ns (NULL or "" = the input gave none: a source matches only when it gave
 * none either, or "default" on both sides). Returns:
 *    1 and the 64 lowercase hex digits plus NUL in hex, and the annotation
 *      key to stamp in key (keylen bytes);
 *    0 when there is nothing to stamp or it cannot be known, with the reason
 *      in why ("no rollout-class content", "configmap/app-config is not in
 *      the input", "projected volume cfg has a downwardAPI source", ...);
 *   <0 (-EINVAL with why: a malformed source such as bad base64, -ENOMEM). */
int stamp_compute(const cJSON *tmpl, const char *ns, const struct stamp_sources *src, char hex[65],
                  char *key, size_t keylen, char *why, size_t whylen);

#endif
