/*
 * cli.h - the processing of `reload-agent inject` from bytes in memory to
 * bytes in memory: parse every input (YAML streams or JSON, with libyaml),
 * run the transform on each workload (and each item of a List), stamp the
 * config hash, and render the result as the input's own text with the
 * changes spliced in (YAML), as JSON, or as patches. All or nothing: on any
 * error no output is produced. Reading files and writing them is the
 * caller's (agent/cmd_inject.c).
 */
#ifndef RA_INJECT_CLI_H
#define RA_INJECT_CLI_H

#include <stddef.h>

#include "inject/transform.h"

enum cli_output {
    CLI_OUT_MANIFEST, /* --output yaml: each input in its own format, changes spliced in */
    CLI_OUT_JSON,     /* --output json: one indented JSON document per document */
    CLI_OUT_PATCH,    /* --output patch: kustomize patches (YAML), or JSON for JSON input */
};

struct cli_input {
    const char *name; /* for messages: the path, or "<stdin>" */
    const char *data; /* the content, len bytes (borrowed) */
    size_t len;
    /* set by cli_run on success: */
    char *out; /* the input's rendering (CLI_OUT_MANIFEST / JSON), malloc'd */
    size_t outlen;
    int changed; /* out differs from data */
};

struct cli_opts {
    struct inject_opts inject;
    enum cli_output output;
};

struct cli_result {
    char *out; /* everything for stdout (the inputs' renderings joined, or the patches) */
    size_t outlen;
    char *report; /* the report for stderr: one line per object, then warnings */
    size_t reportlen;
};

/* Processes inputs in[0..n) with opts. Returns 0 and fills *res and each
 * in[i].out / outlen / changed (free with cli_free). On failure returns
 * -EINVAL with one line in err naming the input, the document number and,
 * for syntax errors, the line ("FILE: document 2, line 7: ..."), or
 * -ENOMEM; nothing is left to free then. */
int cli_run(struct cli_input *in, size_t n, const struct cli_opts *opts, struct cli_result *res,
            char *err, size_t errlen);

/* Frees what cli_run set in res and in in[0..n). */
void cli_free(struct cli_input *in, size_t n, struct cli_result *res);

#endif
