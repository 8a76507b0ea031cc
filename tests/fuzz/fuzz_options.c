/*
 * fuzz_options.c - libFuzzer target that drives the option table end to end
 * (issue 9): parse, validate, convert, print.
 *
 * Input: byte 0 picks what the running agent has (cfg_env: none given / no
 * API client / a client); the rest, up to the first NUL, is the command
 * line, one argument per '\n'-separated piece; after the NUL comes a
 * downward-API annotations file. Both layers are parsed (cfg_parse_args,
 * annot_parse + cfg_layer_from_annotations) and built (cfg_build_env).
 *
 * Invariants: an error is one non-empty line; an accepted configuration has
 * every duration inside its documented range, and each converts to whole
 * milliseconds (rounded up, the engine's and the monitor's arithmetic) and
 * to Go text and back without loss; --print-config writes one line per
 * option with its source; --help prints; a copy (cfg_dup) equals the
 * original for the restart-only comparison.
 */
#include "base/backoff.h"
#include "config/annotations.h"
#include "config/config.h"
#include "config/value.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) __builtin_trap();                                                                \
    } while (0)

#define MS INT64_C(1000000)
#define SEC (1000 * MS)
#define HOUR (3600 * SEC)
#define DAY (24 * HOUR)

/* The documented ranges (docs/configuration.md flags table, --help). */
static const struct {
    size_t off;
    int64_t min, max;
    int zero_ok;
} DURATIONS[] = {
    {offsetof(struct config, debounce_ns), 0, HOUR, 0},
    {offsetof(struct config, resync_ns), 100 * MS, 30 * DAY, 1},
    {offsetof(struct config, http_timeout_ns), MS, DAY, 0},
    {offsetof(struct config, exec_timeout_ns), 0, DAY, 0},
    {offsetof(struct config, rollout_jitter_ns), 0, HOUR, 0},
    {offsetof(struct config, restart_timeout_ns), MS, DAY, 0},
    {offsetof(struct config, retry_initial_ns), MS, DAY, 0},
    {offsetof(struct config, retry_max_ns), MS, DAY, 0},
    {offsetof(struct config, min_interval_ns), 0, DAY, 0},
    {offsetof(struct config, sched_slice_ns), 100 * 1000, 100 * MS, 1},
    {offsetof(struct config, validate_timeout_ns), 100 * MS, HOUR, 0},
    {offsetof(struct config, verify_timeout_ns), 100 * MS, HOUR, 0},
};

static void check_error(const char *err)
{
    CHECK(err[0] != '\0');
    for (const char *p = err; *p; p++) CHECK(*p != '\n' && *p != '\r');
}

static void check_durations(const struct config *c)
{
    for (size_t i = 0; i < sizeof DURATIONS / sizeof DURATIONS[0]; i++) {
        int64_t ns = *(const int64_t *)((const char *)c + DURATIONS[i].off), back = -1;
        char text[40], err[160];
        CHECK((ns == 0 && DURATIONS[i].zero_ok) ||
              (ns >= DURATIONS[i].min && ns <= DURATIONS[i].max));
        uint64_t ms = ra_ms_of_ns(ns); /* the conversion the agent uses */
        CHECK(ms * 1000000 >= (uint64_t)ns && (ms == 0 || (ms - 1) * 1000000 < (uint64_t)ns));
        val_format_duration(ns, text, sizeof text);
        CHECK(val_duration(text, &back, err, sizeof err) == 0 && back == ns);
    }
    CHECK(c->retry_initial_ns <= c->retry_max_ns);
}

static void check_print(const struct config *c, const struct cfg_layer *flags,
                        const struct cfg_layer *annots)
{
    char *buf = NULL;
    size_t len = 0, lines = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    cfg_print(f, c, flags, annots);
    CHECK(fclose(f) == 0);
    for (char *line = buf, *nl; (nl = memchr(line, '\n', len - (size_t)(line - buf)));
         line = nl + 1) {
        *nl = '\0';
        CHECK(strstr(line, " = ") != NULL);
        CHECK(strstr(line, "# default") || strstr(line, "# flag") || strstr(line, "# annotation"));
        lines++;
    }
    CHECK(lines == cfg_option_count()); /* a value with a '\n' is quoted */
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int help_done;
    struct cfg_layer flags, annots;
    struct cfg_env env;
    const struct cfg_env *envp = NULL;
    struct config cfg;
    char err[1024];
    int want_help = 0;

    if (!help_done) { /* the help text is input-independent: print it once */
        FILE *f = fopen("/dev/null", "w");
        CHECK(f != NULL);
        cfg_print_help(f);
        fclose(f);
        help_done = 1;
    }
    if (size < 1) return 0;
    if (data[0] % 3) {
        env.kube = data[0] % 3 == 1 ? CFG_KUBE_NONE : CFG_KUBE_READY;
        envp = &env;
    }
    data++;
    size--;
    const uint8_t *nul = memchr(data, '\0', size);
    size_t alen = nul ? (size_t)(nul - data) : size;
    const char *afile = nul ? (const char *)nul + 1 : "";
    size_t aflen = nul ? size - alen - 1 : 0;

    /* The command line: '\n'-separated pieces, each one argument. */
    char *args = malloc(alen + 1), *argv[64];
    int argc = 0;
    CHECK(args != NULL);
    memcpy(args, data, alen);
    args[alen] = '\0';
    for (char *p = args; alen && argc < 64;) {
        argv[argc++] = p;
        char *nl = strchr(p, '\n');
        if (!nl) break;
        *nl = '\0';
        p = nl + 1;
    }

    CHECK(cfg_layer_init(&flags, CFG_SRC_FLAG) == 0);
    CHECK(cfg_layer_init(&annots, CFG_SRC_ANNOTATION) == 0);
    err[0] = '\0';
    int rc = cfg_parse_args(argc, argv, &flags, &want_help, err, sizeof err);
    if (rc < 0) check_error(err);
    if (rc == 0 && aflen) {
        struct annot_set set = {0};
        char why[512];
        if (annot_parse(afile, aflen, &set, why, sizeof why) == 0) {
            rc = cfg_layer_from_annotations(&set, &annots, err, sizeof err);
            if (rc < 0) check_error(err);
            annot_free(&set);
        }
    }
    if (rc == 0) {
        rc = cfg_build_env(&flags, &annots, envp, &cfg, err, sizeof err);
        if (rc < 0) {
            check_error(err);
        } else {
            struct config copy;
            char names[256];
            check_durations(&cfg);
            check_print(&cfg, &flags, &annots);
            cfg_dup(&cfg, &copy);
            CHECK(cfg_restart_only_changed(&cfg, NULL, &copy, names, sizeof names) == 0);
            CHECK(copy.nrules == cfg.nrules);
            cfg_free(&copy);
            if (envp && envp->kube == CFG_KUBE_NONE) {
                CHECK(cfg.action != ACTION_ROLLOUT);
                for (size_t i = 0; i < cfg.nrules; i++)
                    CHECK(cfg.rules[i].action != ACTION_ROLLOUT);
            }
            cfg_free(&cfg);
        }
    }
    cfg_layer_free(&flags);
    cfg_layer_free(&annots);
    free(args);
    return 0;
}
