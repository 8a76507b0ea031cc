/*
 * fakeapi_client.h - what the C tests of the Kubernetes client share to
 * drive the fake API server (tests/lib/fakeapi.py, a test double): start it
 * as a child process (it exits when its stdin closes, so it cannot outlive
 * a crashed test), stop it by PID, and call its control API with one
 * blocking libcurl request. Included by tests/test_kube.c and
 * tests/test_owner.c (each a separate binary); the functions are static.
 * Run the tests from the repository root.
 */
#ifndef RA_TESTS_FAKEAPI_CLIENT_H
#define RA_TESTS_FAKEAPI_CLIENT_H

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "tests/helper_proc.h"

struct fake {
    struct helper proc;
    int port, control;
    char ca[320], ca_bundle[320], other_ca[320], token_file[320], ns[64], pod[128];
};

static struct fake g_fake; /* the fake ctl() talks to */

static int json_str(const cJSON *o, const char *key, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!cJSON_IsString(v) || strlen(v->valuestring) >= n) return -1;
    strcpy(out, v->valuestring);
    return 0;
}

/* Starts fakeapi.py and parses the JSON line it prints (at most 30 s). */
static int fake_start(struct fake *f, const char *state, const char *fixture)
{
    const char *argv[] = {"python3", "tests/lib/fakeapi.py", "--state", state, "--fixture", fixture,
                          "--ipv6",  "--exit-on-stdin-eof",  NULL};
    char buf[4096];
    int rc = -1;
    cJSON *j, *pods;

    if (access(argv[1], R_OK) != 0) {
        fprintf(stderr, "fakeapi: cannot read %s (run from the repository root)\n", argv[1]);
        return -1;
    }
    helper_start(&f->proc, argv, buf, sizeof buf, 30000);
    j = cJSON_Parse(buf);
    pods = cJSON_GetObjectItemCaseSensitive(j, "pods");
    f->port = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "port"));
    f->control = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "control"));
    if (f->port > 0 && f->control > 0 && json_str(j, "ca", f->ca, sizeof f->ca) == 0 &&
        json_str(j, "ca_bundle", f->ca_bundle, sizeof f->ca_bundle) == 0 &&
        json_str(j, "token_file", f->token_file, sizeof f->token_file) == 0 &&
        json_str(j, "namespace", f->ns, sizeof f->ns) == 0 &&
        cJSON_IsString(cJSON_GetArrayItem(pods, 0)) &&
        strlen(cJSON_GetArrayItem(pods, 0)->valuestring) < sizeof f->pod) {
        strcpy(f->pod, cJSON_GetArrayItem(pods, 0)->valuestring);
        snprintf(f->other_ca, sizeof f->other_ca, "%s/other-ca.crt", state);
        rc = 0;
    }
    cJSON_Delete(j);
    if (rc != 0) fprintf(stderr, "fakeapi.py did not start: %s\n", buf);
    return rc;
}

static void fake_stop(struct fake *f) { helper_stop(&f->proc, 5000); }

static size_t collect(char *p, size_t size, size_t n, void *ud)
{
    char **buf = ud;
    size_t old = *buf ? strlen(*buf) : 0;
    char *grown = realloc(*buf, old + size * n + 1);

    if (!grown) return 0;
    memcpy(grown + old, p, size * n);
    grown[old + size * n] = '\0';
    *buf = grown;
    return size * n;
}

/* One blocking call to the control API of g_fake; returns its JSON reply
 * (or NULL, with the reason on stderr). */
static cJSON *ctl(const char *method, const char *path, const char *body)
{
    CURL *e = curl_easy_init();
    char url[256], *reply = NULL;
    long status = 0;
    cJSON *j = NULL;

    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", g_fake.control, path);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(e, CURLOPT_TIMEOUT, 10L);
    if (body) curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &reply);
    CURLcode rc = curl_easy_perform(e);

    if (rc == CURLE_OK) curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(e);
    if (status == 200 && reply) j = cJSON_Parse(reply);
    if (!j)
        fprintf(stderr, "control %s %s failed (%s, HTTP %ld): %s\n", method, path,
                curl_easy_strerror(rc), status, reply ? reply : "");
    free(reply);
    return j;
}

static void ctl_ok(const char *method, const char *path, const char *body)
{
    cJSON *j = ctl(method, path, body);

    assert_non_null(j);
    cJSON_Delete(j);
}

#endif
