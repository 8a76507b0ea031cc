/*
 * manifests.h - the manifest pipeline of `reload-agent inject`, from bytes
 * in memory to bytes in memory: parse every input (YAML streams or JSON, with libyaml),
 * run the transform on each workload (and each item of a List), stamp the
 * config hash, and render the result as the input's own text with the
 * changes spliced in (YAML), as JSON, or as patches. All or nothing: on any
 * error no output is produced. Reading files and writing them is the
 * caller's (cmd/cmd_inject.c).
 */
#ifndef RA_INJECT_MANIFESTS_H
#define RA_INJECT_MANIFESTS_H

#include <stddef.h>

#include "inject/transform.h"

enum manifests_output {
    MANIFESTS_OUT_YAML,  /* --output yaml: each input in its own format, changes spliced in */
    MANIFESTS_OUT_JSON,  /* --output json: one indented JSON document per document */
    MANIFESTS_OUT_PATCH, /* --output patch: kustomize patches (YAML), or JSON for JSON input */
    MANIFESTS_OUT_RBAC,  /* --output rbac: only the Roles and RoleBindings fast sync needs (YAML) */
};

struct manifests_input {
    const char *name; /* for messages: the path, or "<stdin>" */
    const char *data; /* the content, len bytes (borrowed) */
    size_t len;
    /* set by manifests_run on success: */
    char *out; /* the input's rendering (MANIFESTS_OUT_YAML / JSON), malloc'd */
    size_t outlen;
    int changed; /* out differs from data */
};

struct manifests_opts {
    struct inject_opts inject;
    enum manifests_output output;
};

struct manifests_result {
    char *out; /* everything for stdout (the inputs' renderings joined, or the patches) */
    size_t outlen;
    char *report; /* the report for stderr: one line per object, then warnings */
    size_t reportlen;
};

/* Processes inputs in[0..n) with opts. Returns 0 and fills *res and each
 * in[i].out / outlen / changed (free with manifests_free). On failure returns
 * -EINVAL with one line in err naming the input, the document number and,
 * for syntax errors, the line ("FILE: document 2, line 7: ..."), or
 * -ENOMEM; nothing is left to free then. */
int manifests_run(struct manifests_input *in, size_t n, const struct manifests_opts *opts,
                  struct manifests_result *res, char *err, size_t errlen);

/* Frees what manifests_run set in res and in in[0..n). */
void manifests_free(struct manifests_input *in, size_t n, struct manifests_result *res);

#endif
