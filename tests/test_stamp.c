/*
 * test_stamp.c - the render-time stamp (inject/stamp.c): for a pod template
 * that holds the reload-agent sidecar and the ConfigMaps/Secrets of the
 * same input, the rollout hash the agent will compute in the pod.
 *
 * Expected values are computed here independently of hash/: the manifest
 * text ("<sha256 hex>  <path>\n" per rollout-class file, sorted bytewise)
 * is written out by the test and hashed with OpenSSL's one-shot SHA256().
 * Covered: data and binaryData, Secret stringData over data, items with
 * nested paths (and optional items), projected volumes (merge, a later
 * source winning), optional and missing sources, --ignore, rules that
 * split classes, --env-watch roots and --env-action, annotations over args,
 * a custom --hash-annotation, nested mounts, and the refusals (bad base64,
 * downwardAPI sources, other volume kinds, roots outside any mount, a
 * mount inside a root, configuration errors); and the hash/ helper it
 * folds with, against a walk of the same files.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define OPENSSL_API_COMPAT 0x10101000L
#include <openssl/sha.h>

#include <cjson/cJSON.h>

#include "hash/hash.h"
#include "inject/stamp.h"

struct result {
    int rc;
    char hex[65];
    char key[256];
    char why[1024];
};

/* Runs stamp_compute on a template (JSON text) and sources (a JSON array
 * text, or NULL for none). */
static struct result stamp(const char *tmpl_json, const char *ns, const char *sources_json)
{
    struct result r;
    memset(&r, 0, sizeof r);
    cJSON *tmpl = cJSON_Parse(tmpl_json);
    if (!tmpl) fail_msg("bad template JSON near: %.60s", cJSON_GetErrorPtr());
    cJSON *srcs = sources_json ? cJSON_Parse(sources_json) : cJSON_CreateArray();
    if (!srcs) fail_msg("bad sources JSON near: %.60s", cJSON_GetErrorPtr());
    const cJSON *objs[32], *s;
    size_t n = 0;
    cJSON_ArrayForEach(s, srcs) objs[n++] = s;
    struct stamp_sources src = {objs, n};
    r.rc = stamp_compute(tmpl, ns, &src, r.hex, r.key, sizeof r.key, r.why, sizeof r.why);
    cJSON_Delete(tmpl);
    cJSON_Delete(srcs);
    return r;
}

/* The expected stamp: files (path, content, length; length -1 = strlen)
 * given in bytewise path order. */
struct f {
    const char *path;
    const char *content;
    int len;
};

static void expect_hex(const struct f *files, size_t n, char out[65])
{
    char manifest[8192];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char d[SHA256_DIGEST_LENGTH];
        size_t len = files[i].len < 0 ? strlen(files[i].content) : (size_t)files[i].len;
        SHA256((const unsigned char *)files[i].content, len, d);
        for (int k = 0; k < SHA256_DIGEST_LENGTH; k++)
            o += (size_t)snprintf(manifest + o, sizeof manifest - o, "%02x", d[k]);
        o += (size_t)snprintf(manifest + o, sizeof manifest - o, "  %s\n", files[i].path);
        if (i > 0) assert_true(strcmp(files[i - 1].path, files[i].path) < 0);
    }
    unsigned char t[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)manifest, o, t);
    for (int k = 0; k < SHA256_DIGEST_LENGTH; k++) snprintf(out + 2 * k, 3, "%02x", t[k]);
}

static void assert_stamp(const struct result *r, const struct f *files, size_t n)
{
    char want[65];
    expect_hex(files, n, want);
    if (r->rc != 1) fail_msg("no stamp (rc %d): %s", r->rc, r->why);
    assert_string_equal(r->hex, want);
    assert_string_equal(r->why, "");
}

static void assert_no_stamp(const struct result *r, int rc, const char *words)
{
    if (r->rc != rc) fail_msg("rc %d, want %d (why: %s)", r->rc, rc, r->why);
    if (!strstr(r->why, words)) fail_msg("why \"%s\" does not say \"%s\"", r->why, words);
}

/* The downward-API annotations file, as the injector adds it. */
#define PODINFO_MOUNT "{\"name\":\"reload-agent-podinfo\",\"mountPath\":\"/etc/podinfo\"}"
#define PODINFO_VOLUME                                                                             \
    "{\"name\":\"reload-agent-podinfo\",\"downwardAPI\":{\"items\":[{\"path\":\"annotations\","    \
    "\"fieldRef\":{\"fieldPath\":\"metadata.annotations\"}}]}}"

/* A template whose sidecar runs ARGS (a JSON array body), mounts MOUNTS (a
 * JSON array body) and the annotations file, with VOLUMES (a JSON array
 * body) and annotations ANN (a JSON object body). */
static char *tmpl(const char *ann, const char *args, const char *mounts, const char *volumes)
{
    char *s = NULL;
    int n = asprintf(&s,
                     "{\"metadata\":{\"labels\":{\"app\":\"web\"},\"annotations\":{%s}},"
                     "\"spec\":{\"initContainers\":[{\"name\":\"reload-agent\",\"image\":\"x\","
                     "\"restartPolicy\":\"Always\",\"args\":[\"run\",%s],"
                     "\"volumeMounts\":[%s," PODINFO_MOUNT "]}],\"containers\":[{\"name\":"
                     "\"app\"}],\"volumes\":[%s," PODINFO_VOLUME "]}}",
                     ann, args, mounts, volumes);
    assert_true(n > 0);
    return s;
}

#define CM(name, body)                                                                             \
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"" name                 \
    "\",\"namespace\":\"prod\"}," body "}"
#define SECRET(name, body)                                                                         \
    "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"" name                    \
    "\",\"namespace\":\"prod\"}," body "}"
#define MOUNT(vol, path) "{\"name\":\"" vol "\",\"mountPath\":\"" path "\",\"readOnly\":true}"

/* ConfigMap data and binaryData keys (base64-decoded), every file rollout. */
static void test_data_and_binary_data(void **state)
{
    (void)state;
    char *t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"",
                   MOUNT("cfg", "/etc/app"), "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}");
    struct result r = stamp(t, "prod",
                            "[" CM("app", "\"data\":{\"b.conf\":\"bee\\n\",\"a.conf\":\"ay\"},"
                                          "\"binaryData\":{\"logo.bin\":\"AAEC/w==\"}") "]");
    const struct f want[] = {{"/etc/app/a.conf", "ay", -1},
                             {"/etc/app/b.conf", "bee\n", -1},
                             {"/etc/app/logo.bin", "\x00\x01\x02\xff", 4}};
    assert_stamp(&r, want, 3);
    assert_string_equal(r.key, "reload-agent.io/config-hash");
    free(t);
}

/* A Secret's data is base64; stringData (as in a manifest) wins over it. */
static void test_secret_string_data_overrides_data(void **state)
{
    (void)state;
    char *t =
        tmpl("", "\"--watch\",\"/etc/tls\",\"--action\",\"rollout\"", MOUNT("tls", "/etc/tls"),
             "{\"name\":\"tls\",\"secret\":{\"secretName\":\"tls\"}}");
    struct result r =
        stamp(t, "prod",
              "[" SECRET("tls", "\"type\":\"Opaque\",\"data\":{\"user\":\"YWRtaW4=\","
                                "\"password\":\"b2xk\"},\"stringData\":{\"password\":\"new\","
                                "\"extra\":\"x\"}") "]");
    const struct f want[] = {{"/etc/tls/extra", "x", -1},
                             {"/etc/tls/password", "new", -1},
                             {"/etc/tls/user", "admin", -1}};
    assert_stamp(&r, want, 3);
    free(t);
}

/* items: only the listed keys, at their (cleaned, nested) paths; a missing
 * key is skipped only when the volume is optional. */
static void test_items_with_nested_paths(void **state)
{
    (void)state;
    const char *cm = "[" CM("app", "\"data\":{\"app.yaml\":\"a: 1\\n\",\"jvm\":\"-Xmx1g\","
                                   "\"unused\":\"u\"}") "]";
    char *t =
        tmpl("", "\"--watch\",\"/etc/app/\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app/"),
             "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\",\"items\":["
             "{\"key\":\"app.yaml\",\"path\":\"conf/app.yaml\"},"
             "{\"key\":\"jvm\",\"path\":\"./opts//jvm.options\",\"mode\":256}]}}");
    struct result r = stamp(t, "prod", cm);
    const struct f want[] = {{"/etc/app/conf/app.yaml", "a: 1\n", -1},
                             {"/etc/app/opts/jvm.options", "-Xmx1g", -1}};
    assert_stamp(&r, want, 2);
    free(t);
    /* a root inside the volume: only what lies under it */
    t = tmpl("", "\"--watch\",\"/etc/app/conf\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"),
             "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\",\"items\":["
             "{\"key\":\"app.yaml\",\"path\":\"conf/app.yaml\"},"
             "{\"key\":\"jvm\",\"path\":\"opts/jvm.options\"}]}}");
    r = stamp(t, "prod", cm);
    assert_stamp(&r, want, 1);
    free(t);
    /* a missing key: the kubelet cannot mount it, unless optional */
    t = tmpl(
        "", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"),
        "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\",\"items\":["
        "{\"key\":\"gone\",\"path\":\"gone\"},{\"key\":\"jvm\",\"path\":\"opts/jvm.options\"}]}}");
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "configmap/app has no key gone");
    free(t);
    t = tmpl(
        "", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"),
        "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\",\"optional\":true,\"items\":["
        "{\"key\":\"gone\",\"path\":\"gone\"},{\"key\":\"jvm\",\"path\":\"opts/jvm.options\"}]}}");
    r = stamp(t, "prod", cm);
    assert_stamp(&r, want + 1, 1);
    free(t);
    /* paths the kubelet refuses are malformed input */
    const char *bad[] = {"/abs", "../up", "a/../../b", "..hidden/x", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char vol[256];
        snprintf(vol, sizeof vol,
                 "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\",\"items\":["
                 "{\"key\":\"jvm\",\"path\":\"%s\"}]}}",
                 bad[i]);
        t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"),
                 vol);
        r = stamp(t, "prod", cm);
        assert_no_stamp(&r, -EINVAL, "is not a valid relative path");
        free(t);
    }
}

/* A projected volume is the union of its ConfigMap and Secret sources, each
 * with its items; a later source wins on the same path. */
static void test_projected_merge(void **state)
{
    (void)state;
    char *t =
        tmpl("", "\"--watch\",\"/etc/all\",\"--action\",\"rollout\"", MOUNT("all", "/etc/all"),
             "{\"name\":\"all\",\"projected\":{\"defaultMode\":420,\"sources\":["
             "{\"configMap\":{\"name\":\"app\"}},"
             "{\"secret\":{\"name\":\"tls\",\"items\":[{\"key\":\"tls.crt\",\"path\":"
             "\"certs/tls.crt\"},{\"key\":\"shared\",\"path\":\"shared\"}]}}]}}");
    struct result r =
        stamp(t, "prod",
              "[" CM("app", "\"data\":{\"app.conf\":\"c\",\"shared\":\"from-cm\"}") "," SECRET(
                  "tls", "\"data\":{\"tls.crt\":\"Y2VydA==\",\"shared\":\"ZnJvbS1zZWNyZXQ=\","
                         "\"tls.key\":\"a2V5\"}") "]");
    const struct f want[] = {{"/etc/all/app.conf", "c", -1},
                             {"/etc/all/certs/tls.crt", "cert", -1},
                             {"/etc/all/shared", "from-secret", -1}};
    assert_stamp(&r, want, 3);
    free(t);
    /* a downward-API or token source under a watch root: only known in the pod */
    const char *others[] = {
        ("{\"downwardAPI\":{\"items\":[{\"path\":\"labels\",\"fieldRef\":{\"fieldPath\":"
         "\"metadata.labels\"}}]}}"),
        "{\"serviceAccountToken\":{\"path\":\"token\"}}",
        "{\"clusterTrustBundle\":{\"path\":\"ca.pem\",\"name\":\"x\"}}"};
    const char *kinds[] = {"downwardAPI", "serviceAccountToken", "clusterTrustBundle"};
    for (int i = 0; i < 3; i++) {
        char vol[512];
        snprintf(vol, sizeof vol,
                 "{\"name\":\"all\",\"projected\":{\"sources\":[{\"configMap\":{\"name\":\"app\"}},"
                 "%s]}}",
                 others[i]);
        t = tmpl("", "\"--watch\",\"/etc/all\",\"--action\",\"rollout\"", MOUNT("all", "/etc/all"),
                 vol);
        r = stamp(t, "prod", "[" CM("app", "\"data\":{\"app.conf\":\"c\"}") "]");
        assert_no_stamp(&r, 0, "projected volume all has a");
        assert_non_null(strstr(r.why, kinds[i]));
        free(t);
    }
}

/* optional and missing: the kubelet mounts an empty directory; a required
 * one missing from the input cannot be stamped. */
static void test_optional_and_missing_sources(void **state)
{
    (void)state;
    const char *mounts = MOUNT("cfg", "/etc/app") "," MOUNT("extra", "/etc/extra");
    char *t = tmpl(
        "", "\"--watch\",\"/etc/app\",\"--watch\",\"/etc/extra\",\"--action\",\"rollout\"", mounts,
        "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},"
        "{\"name\":\"extra\",\"secret\":{\"secretName\":\"extra\",\"optional\":true}}");
    const char *cm = "[" CM("app", "\"data\":{\"k\":\"v\"}") "]";
    struct result r = stamp(t, "prod", cm);
    const struct f want[] = {{"/etc/app/k", "v", -1}};
    assert_stamp(&r, want, 1);
    free(t);
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--watch\",\"/etc/extra\",\"--action\",\"rollout\"",
             mounts,
             "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},"
             "{\"name\":\"extra\",\"secret\":{\"secretName\":\"extra\"}}");
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "secret/extra is not in the input");
    free(t);
    /* only in another namespace: not the workload's, and the reason says
     * where it is (issue 16.13) */
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"),
             "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}");
    r = stamp(t, "staging", cm);
    assert_no_stamp(&r, 0,
                    "configmap/app is not in the input for namespace staging: the input has it in "
                    "namespace prod");
    r = stamp(t, NULL, cm);
    assert_no_stamp(&r, 0,
                    "configmap/app is not in the input for namespace (none): the input has it in "
                    "namespace prod");
    /* neither gave a namespace: the same one (kubectl's current) */
    r = stamp(t, "",
              "[{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"app\"},\"data\":{\"k\":"
              "\"v\"}}]");
    assert_stamp(&r, want, 1);
    /* every file optional and absent: nothing to roll */
    free(t);
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"),
             "{\"name\":\"cfg\",\"configMap\":{\"name\":\"nope\",\"optional\":true}}");
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "no rollout-class content");
    free(t);
}

/* --ignore drops files, rules split the classes: only rollout-class files
 * are stamped; without rollout in any action there is no stamp. */
static void test_ignore_and_rules_split_classes(void **state)
{
    (void)state;
    const char *cm = "[" CM("app", "\"data\":{\"app.conf\":\"c\",\"jvm.options\":\"-X\","
                                   "\"notes.bak\":\"n\",\"tls.pem\":\"p\"}") "]";
    const char *vol = "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}";
    char *t = tmpl("",
                   "\"--watch\",\"/etc/app\",\"--action\",\"rollout\",\"--ignore\",\"*.bak\","
                   "\"--rule\",\"*.conf=signal\",\"--rule\",\"*.pem=exec\",\"--process\","
                   "\"app\",\"--exec-command\",\"true\"",
                   MOUNT("cfg", "/etc/app"), vol);
    struct result r = stamp(t, "prod", cm);
    const struct f want[] = {{"/etc/app/jvm.options", "-X", -1}};
    assert_stamp(&r, want, 1);
    free(t);
    /* rollout by rule only */
    t = tmpl("",
             "\"--watch\",\"/etc/app\",\"--action\",\"signal\",\"--process\",\"app\","
             "\"--rule\",\"*/jvm.options=rollout\"",
             MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_stamp(&r, want, 1);
    free(t);
    /* no action is rollout */
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"signal\",\"--process\",\"app\"",
             MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "no rollout-class content");
    free(t);
    /* rollout is used, but every file present is in-place */
    t = tmpl("",
             "\"--watch\",\"/etc/app\",\"--action\",\"signal\",\"--process\",\"app\","
             "\"--rule\",\"*.yaml=rollout\"",
             MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "no rollout-class content");
    free(t);
}

/* Annotations are the agent's annotation layer: they win over args (the
 * rules, the hash annotation key); --annotations "" turns them off. */
static void test_annotations_over_args(void **state)
{
    (void)state;
    const char *cm = "[" CM("app", "\"data\":{\"app.conf\":\"c\",\"jvm.options\":\"-X\"}") "]";
    const char *vol = "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}";
    char *t = tmpl("\"reload-agent.io/inject\":\"true\",\"reload-agent.io/config-hash\":\"old\","
                   "\"reload-agent.io/rule\":\"*.conf=signal\","
                   "\"reload-agent.io/hash-annotation\":\"example.com/cfg\",\"team\":\"a\"",
                   "\"--watch\",\"/etc/app\",\"--action\",\"rollout\",\"--process\",\"app\"",
                   MOUNT("cfg", "/etc/app"), vol);
    struct result r = stamp(t, "prod", cm);
    const struct f want[] = {{"/etc/app/jvm.options", "-X", -1}};
    assert_stamp(&r, want, 1);
    assert_string_equal(r.key, "example.com/cfg");
    free(t);
    t = tmpl("\"reload-agent.io/rule\":\"*.conf=signal\"",
             "\"--watch\",\"/etc/app\",\"--action\",\"rollout\",\"--annotations\",\"\"",
             MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    const struct f both[] = {{"/etc/app/app.conf", "c", -1}, {"/etc/app/jvm.options", "-X", -1}};
    assert_stamp(&r, both, 2);
    free(t);
    /* a configuration error is the agent's: no stamp, with its message */
    t = tmpl("\"reload-agent.io/action\":\"reboot\"", "\"--watch\",\"/etc/app\"",
             MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "reload-agent.io/action");
    free(t);
    t = tmpl("\"reload-agent.io/debunce\":\"1s\"", "\"--watch\",\"/etc/app\"",
             MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "no such option");
    free(t);
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--bogus\"", MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "unknown flag --bogus");
    free(t);
}

/* The template's annotations count only when the sidecar gets them: the
 * downward-API file at --annotations (default /etc/podinfo/annotations). */
static void test_annotations_only_through_the_file(void **state)
{
    (void)state;
    const char *cm = "[" CM("app", "\"data\":{\"app.conf\":\"c\",\"jvm.options\":\"-X\"}") "]";
    const struct f one[] = {{"/etc/app/jvm.options", "-X", -1}};
    const struct f both[] = {{"/etc/app/app.conf", "c", -1}, {"/etc/app/jvm.options", "-X", -1}};
    /* no annotations volume: the rule in the annotations is not seen */
    struct result r = stamp(
        "{\"metadata\":{\"annotations\":{\"reload-agent.io/rule\":\"*.conf=none\"}},\"spec\":{"
        "\"initContainers\":[{\"name\":\"reload-agent\",\"args\":[\"run\",\"--watch\",\"/etc/app\","
        "\"--action\",\"rollout\"],\"volumeMounts\":[" MOUNT(
            "cfg", "/etc/app") "]}],\"volumes\":["
                               "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}]}}",
        "prod", cm);
    assert_stamp(&r, both, 2);
    /* a custom path, from a projected downwardAPI source */
    r = stamp(
        "{\"metadata\":{\"annotations\":{\"reload-agent.io/rule\":\"*.conf=none\"}},\"spec\":{"
        "\"initContainers\":[{\"name\":\"reload-agent\",\"args\":[\"run\",\"--watch\","
        "\"/etc/app\",\"--action\",\"rollout\",\"--annotations\",\"/meta/pod/ann\"],"
        "\"volumeMounts\":[" MOUNT("cfg", "/etc/app") "," MOUNT(
            "meta", "/meta/") "]}],\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":"
                              "\"app\"}},{\"name\":\"meta\",\"projected\":{\"sources\":[{"
                              "\"downwardAPI\":{\"items\":[{\"path\":\"pod/ann\","
                              "\"fieldRef\":{\"fieldPath\":\"metadata.annotations\"}}]}}]}}]}}",
        "prod", cm);
    assert_stamp(&r, one, 1);
    /* the file holds the labels, not the annotations */
    r = stamp(
        "{\"metadata\":{\"annotations\":{\"reload-agent.io/rule\":\"*.conf=none\"}},\"spec\":{"
        "\"initContainers\":[{\"name\":\"reload-agent\",\"args\":[\"run\",\"--watch\","
        "\"/etc/app\",\"--action\",\"rollout\"],\"volumeMounts\":[" MOUNT(
            "cfg", "/etc/app") "," MOUNT("pi", "/etc/podinfo") "]}],\"volumes\":[{\"name\":"
                                                               "\"cfg\",\"configMap\":{"
                                                               "\"name\":\"app\"}},{\"name\":"
                                                               "\"pi\",\"downwardAPI\":{"
                                                               "\"items\":[{\"path\":"
                                                               "\"annotations\",\"fieldRef\":"
                                                               "{\"fieldPath\":\"metadata."
                                                               "labels\"}}]}}]}}",
        "prod", cm);
    assert_stamp(&r, both, 2);
    /* $(VAR) in the args: only the kubelet knows the value */
    r = stamp("{\"spec\":{\"initContainers\":[{\"name\":\"reload-agent\",\"args\":[\"run\","
              "\"--watch\",\"$(CFG_DIR)\",\"--action\",\"rollout\"]}]}}",
              "prod", cm);
    assert_no_stamp(&r, 0, "$(VAR)");
}

/* --env-watch roots: their files take --env-action (rollout by default)
 * before any rule; with restart they are not stamped. */
static void test_env_roots(void **state)
{
    (void)state;
    const char *src = "[" CM("app", "\"data\":{\"app.conf\":\"c\"}") "," CM(
        "env", "\"data\":{\"LOG_LEVEL\":\"debug\",\"FEATURE\":\"on\"}") "]";
    const char *mounts = MOUNT("cfg", "/etc/app") "," MOUNT("reload-agent-env-cm-env",
                                                            "/reload-agent/env/configmap/env");
    const char *vols = "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}},"
                       "{\"name\":\"reload-agent-env-cm-env\",\"configMap\":{\"name\":\"env\"}}";
    const char *args =
        "\"--watch\",\"/etc/app\",\"--env-watch\",\"/reload-agent/env/configmap/env\","
        "\"--action\",\"signal\",\"--process\",\"app\",\"--rule\",\"*=signal\"";
    char *t = tmpl("", args, mounts, vols);
    struct result r = stamp(t, "prod", src);
    const struct f want[] = {{"/reload-agent/env/configmap/env/FEATURE", "on", -1},
                             {"/reload-agent/env/configmap/env/LOG_LEVEL", "debug", -1}};
    assert_stamp(&r, want, 2);
    free(t);
    t = tmpl("\"reload-agent.io/env-action\":\"restart\"", args, mounts, vols);
    r = stamp(t, "prod", src);
    assert_no_stamp(&r, 0, "no rollout-class content");
    free(t);
}

/* Malformed sources are errors naming what was wrong. */
static void test_bad_base64_is_einval(void **state)
{
    (void)state;
    char *t =
        tmpl("", "\"--watch\",\"/etc/tls\",\"--action\",\"rollout\"", MOUNT("tls", "/etc/tls"),
             "{\"name\":\"tls\",\"secret\":{\"secretName\":\"tls\"}}");
    const char *bad[] = {"not base64!", "YWJj=", "YW=j", "YWJ", "YQ==YQ=="};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char src[256];
        snprintf(src, sizeof src, "[" SECRET("tls", "\"data\":{\"tls.key\":\"%s\"}") "]", bad[i]);
        struct result r = stamp(t, "prod", src);
        assert_no_stamp(&r, -EINVAL, "secret/tls: data.tls.key is not valid base64");
    }
    /* line breaks inside are accepted, as Go's decoder does */
    struct result r = stamp(t, "prod", "[" SECRET("tls", "\"data\":{\"k\":\"YW\\nJj\\r\\n\"}") "]");
    const struct f want[] = {{"/etc/tls/k", "abc", -1}};
    assert_stamp(&r, want, 1);
    /* null is the empty value, as Go's decoding leaves it */
    r = stamp(t, "prod", "[" SECRET("tls", "\"data\":{\"k\":null}") "]");
    const struct f empty[] = {{"/etc/tls/k", "", -1}};
    assert_stamp(&r, empty, 1);
    r = stamp(t, "prod", "[" SECRET("tls", "\"data\":{\"k\":42}") "]");
    assert_no_stamp(&r, -EINVAL, "data.k is not a string");
    r = stamp(t, "prod", "[" SECRET("tls", "\"data\":{\"a/b\":\"YQ==\"}") "]");
    assert_no_stamp(&r, -EINVAL, "invalid key \"a/b\"");
    /* a key is at most 253 bytes (apimachinery's IsConfigMapKey), as the
     * transform's own check of env keys says */
    char key[255], big[600];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    snprintf(big, sizeof big, "[" SECRET("tls", "\"data\":{\"%s\":\"YQ==\"}") "]", key);
    r = stamp(t, "prod", big);
    assert_no_stamp(&r, -EINVAL, "has an invalid key");
    key[sizeof key - 2] = '\0'; /* 253 bytes: a key */
    snprintf(big, sizeof big, "[" SECRET("tls", "\"data\":{\"%s\":\"YQ==\"}") "]", key);
    r = stamp(t, "prod", big);
    assert_int_equal(r.rc, 1);
    free(t);
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"),
             "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}");
    r = stamp(t, "prod", "[" CM("app", "\"binaryData\":{\"b\":\"%%%\"}") "]");
    assert_no_stamp(&r, -EINVAL, "configmap/app: binaryData.b is not valid base64");
    free(t);
}

/* What the stamp cannot know from the input. */
static void test_refusals(void **state)
{
    (void)state;
    const char *cm = "[" CM("app", "\"data\":{\"k\":\"v\"}") "]";
    const char *vol = "{\"name\":\"cfg\",\"configMap\":{\"name\":\"app\"}}";
    /* no sidecar */
    struct result r =
        stamp("{\"metadata\":{},\"spec\":{\"containers\":[{\"name\":\"app\"}]}}", "prod", cm);
    assert_no_stamp(&r, 0, "no reload-agent sidecar");
    r = stamp("{\"metadata\":{}}", "prod", cm);
    assert_no_stamp(&r, -EINVAL, "no spec");
    /* a root outside every mount (the image's files) */
    char *t =
        tmpl("", "\"--watch\",\"/etc\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "volume cfg is mounted at /etc/app, inside watch root /etc");
    free(t);
    t = tmpl("", "\"--watch\",\"/srv\",\"--action\",\"rollout\"", MOUNT("cfg", "/etc/app"), vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "watch root /srv is not inside a volume");
    free(t);
    /* a volume of another kind under a root */
    t = tmpl("", "\"--watch\",\"/data\",\"--action\",\"rollout\"", MOUNT("scratch", "/data"),
             "{\"name\":\"scratch\",\"emptyDir\":{}}");
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "volume scratch (emptyDir)");
    free(t);
    /* a subPath mount */
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"",
             "{\"name\":\"cfg\",\"mountPath\":\"/etc/app\",\"subPath\":\"k\"}", vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, 0, "subPath");
    free(t);
    /* a sidecar that does not run the agent */
    r = stamp("{\"spec\":{\"initContainers\":[{\"name\":\"reload-agent\",\"command\":["
              "\"/reload-agent\",\"hash\"],\"args\":[\"/etc/app\"],\"volumeMounts\":[" MOUNT(
                  "cfg", "/etc/app") "]}],\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":"
                                     "\"app\"}}]}}",
              "prod", cm);
    assert_no_stamp(&r, 0, "not the run subcommand");
    /* the command's argv[0] is dropped; flags may follow it without "run" */
    r = stamp("{\"spec\":{\"initContainers\":[{\"name\":\"reload-agent\",\"command\":["
              "\"/reload-agent\",\"--watch\",\"/etc/app\"],\"args\":[\"--action\",\"rollout\"],"
              "\"volumeMounts\":[" MOUNT("cfg", "/etc/app") "]}],\"volumes\":[{\"name\":\"cfg\","
                                                            "\"configMap\":{\"name\":\"app\"}}]}}",
              "prod", cm);
    const struct f want[] = {{"/etc/app/k", "v", -1}};
    assert_stamp(&r, want, 1);
    /* a mount of an undefined volume is a malformed pod */
    t = tmpl("", "\"--watch\",\"/etc/app\",\"--action\",\"rollout\"", MOUNT("ghost", "/etc/app"),
             vol);
    r = stamp(t, "prod", cm);
    assert_no_stamp(&r, -EINVAL, "volume ghost");
    free(t);
}

/* A deeper mount hides what the outer volume has under its path; mounts
 * not under a watch root (the annotations volume, tokens) never matter. */
static void test_nested_mounts(void **state)
{
    (void)state;
    const char *mounts = MOUNT("outer", "/etc/app") "," MOUNT("inner", "/etc/app/tls") "," MOUNT(
        "token", "/var/run/secrets/kubernetes.io/serviceaccount");
    const char *vols =
        "{\"name\":\"outer\",\"configMap\":{\"name\":\"app\",\"items\":[{\"key\":\"k\",\"path\":"
        "\"tls/k\"},{\"key\":\"k\",\"path\":\"k\"}]}},"
        "{\"name\":\"inner\",\"secret\":{\"secretName\":\"tls\"}},"
        "{\"name\":\"token\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{\"path\":"
        "\"token\"}}]}}";
    const char *src = "[" CM("app", "\"data\":{\"k\":\"outer\"}") "," SECRET(
        "tls", "\"data\":{\"tls.crt\":\"aW5uZXI=\"}") "]";
    char *t = tmpl("", "\"--watch\",\"/etc/app/tls\",\"--action\",\"rollout\"", mounts, vols);
    struct result r = stamp(t, "prod", src);
    const struct f want[] = {{"/etc/app/tls/tls.crt", "inner", -1}};
    assert_stamp(&r, want, 1);
    free(t);

    /* the outer volume watched too (as the injector mirrors both): the
     * inner mount lies inside a root, counted once its private names are
     * ignored; the outer volume's tls/k stays hidden under it */
    const struct f both[] = {{"/etc/app/k", "outer", -1}, {"/etc/app/tls/tls.crt", "inner", -1}};
    const char *argsets[] = {
        "\"--watch\",\"/etc/app\",\"--watch\",\"/etc/app/tls\",\"--ignore=/etc/app/tls/..*\","
        "\"--action\",\"rollout\"",
        "\"--watch\",\"/etc/app\",\"--ignore=/etc/app/tls/..*\",\"--action\",\"rollout\"",
        "\"--watch\",\"/etc/app/\",\"--watch\",\"/etc/app/tls/\",\"--ignore=/etc/app/tls/..*\","
        "\"--action\",\"rollout\"",
    };
    for (size_t i = 0; i < sizeof argsets / sizeof argsets[0]; i++) {
        t = tmpl("", argsets[i], mounts, vols);
        r = stamp(t, "prod", src);
        assert_stamp(&r, both, 2);
        free(t);
    }
    /* without the --ignore (or with one that misses the timestamped
     * names), the walk there would hash the kubelet's private names */
    const char *bad[] = {
        "\"--watch\",\"/etc/app\",\"--watch\",\"/etc/app/tls\",\"--action\",\"rollout\"",
        "\"--watch\",\"/etc/app\",\"--ignore=/etc/app/tls/..data*\",\"--action\",\"rollout\"",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        t = tmpl("", bad[i], mounts, vols);
        r = stamp(t, "prod", src);
        assert_no_stamp(&r, 0,
                        "volume inner is mounted at /etc/app/tls, inside watch root /etc/app: the "
                        "hash there includes the kubelet's private timestamped names (unless "
                        "--ignore=/etc/app/tls/..* leaves them out)");
        free(t);
    }
    /* issue 16.4: a mount written unclean is where the runtime puts it (the
     * clean path); a watch root written unclean gives the agent logical
     * paths that are not the container's: no stamp, and why */
    const char *unclean = MOUNT("outer", "/etc/app") "," MOUNT("inner", "/etc//app/./tls/");
    t = tmpl("", argsets[0], unclean, vols);
    r = stamp(t, "prod", src);
    assert_stamp(&r, both, 2);
    free(t);
    t = tmpl(
        "",
        "\"--watch\",\"/etc/app\",\"--watch\",\"/etc/app/./tls\",\"--ignore=/etc/app/tls/..*\","
        "\"--action\",\"rollout\"",
        mounts, vols);
    r = stamp(t, "prod", src);
    assert_no_stamp(&r, 0, "watch root /etc/app/./tls is not a clean path");
    free(t);
}

static unsigned select_pem(void *ud, const char *path)
{
    (void)ud;
    size_t l = strlen(path);
    return HASH_CLASS_MAIN | (l > 4 && !strcmp(path + l - 4, ".pem") ? HASH_CLASS_SUB : 0);
}

/* hash_manifest_from_entries folds entries given in any order exactly as
 * hash_compute folds a walk of the same files; a path given twice is
 * refused. */
static void test_manifest_from_entries_equals_walk(void **state)
{
    (void)state;
    char dir[64], p[128];
    snprintf(dir, sizeof dir, "/tmp/ra-test-stamp-%d", (int)getpid());
    assert_int_equal(mkdir(dir, 0755), 0);
    const char *names[] = {"b.pem", "a.conf", "c.pem"};
    const char *contents[] = {"bee", "ay", "\n"};
    struct hash_entry ents[3];
    char paths[3][128];
    for (int i = 0; i < 3; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/%s", dir, names[i]);
        FILE *f = fopen(paths[i], "w");
        assert_non_null(f);
        fputs(contents[i], f);
        fclose(f);
        ents[i] = (struct hash_entry){.path = paths[i], .size = strlen(contents[i])};
        hash_bytes(contents[i], strlen(contents[i]), ents[i].digest);
        ents[i].classes = select_pem(NULL, paths[i]);
    }
    struct hash_manifest walked = {0}, built = {0};
    const char *roots[] = {dir};
    struct hash_opts o = {.select = select_pem};
    assert_int_equal(hash_compute(roots, 1, &o, &walked, NULL), 0);
    assert_int_equal(hash_manifest_from_entries(ents, 3, &built), 0);
    assert_int_equal(built.n, 3);
    assert_int_equal(built.nsub, 2);
    assert_memory_equal(built.total, walked.total, HASH_LEN);
    assert_memory_equal(built.sub, walked.sub, HASH_LEN);
    assert_string_equal(built.v[0].path, paths[1]); /* sorted */
    hash_manifest_free(&built);
    ents[2].path = paths[0];
    assert_int_equal(hash_manifest_from_entries(ents, 3, &built), -EINVAL);
    assert_int_equal(built.n, 0);
    hash_manifest_free(&walked);
    for (int i = 0; i < 3; i++) unlink(paths[i]);
    snprintf(p, sizeof p, "%s", dir);
    assert_int_equal(rmdir(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_and_binary_data),
        cmocka_unit_test(test_secret_string_data_overrides_data),
        cmocka_unit_test(test_items_with_nested_paths),
        cmocka_unit_test(test_projected_merge),
        cmocka_unit_test(test_optional_and_missing_sources),
        cmocka_unit_test(test_ignore_and_rules_split_classes),
        cmocka_unit_test(test_annotations_over_args),
        cmocka_unit_test(test_annotations_only_through_the_file),
        cmocka_unit_test(test_env_roots),
        cmocka_unit_test(test_bad_base64_is_einval),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_nested_mounts),
        cmocka_unit_test(test_manifest_from_entries_equals_walk),
    };
    return cmocka_run_group_tests_name("stamp", tests, NULL, NULL);
}
