/*
 * stagedrive.c - one replica's stage gate (run/stage.c) driven alone, for
 * the staging tests against the API double (tests/lib/fakeapi.py): several
 * of these processes are the replicas of one workload. It does what the
 * engine does around an action: stage_acquire(HASH), and on GO holds its
 * "action" for --hold (the action and its verification), then
 * stage_release(HASH, ok) (ok unless --fail). Every step is one JSON line
 * on stdout with the monotonic time in ms:
 *
 *   {"event":"verdict","verdict":"go|halted|alone","hash":H,"t":MS}
 *   {"event":"release","ok":true|false,"hash":H,"t":MS}
 *
 * --hold -1 never releases (a replica that hangs, or is killed, mid-stage).
 * --hash may be given several times: the next acquire starts after the
 * previous one's release (or verdict other than go). It runs until SIGTERM
 * (then closes the gate and the client and exits 0), or --exit-after MS
 * after the last release.
 *
 * usage: stagedrive --kube-api URL --kube-token-file F --kube-ca-file F
 *        --pod-name P --namespace NS --stage N|P% --hash H [--hash H2 ...]
 *        [--workload KIND/NAME] [--ttl MS] [--grace MS] [--jitter MS]
 *        [--hold MS] [--fail] [--exit-after MS]
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "base/backoff.h"
#include "base/log.h"
#include "kube/kevents.h"
#include "kube/kube.h"
#include "net/httpc.h"
#include "run/stage.h"

#define MAX_HASHES 8

static struct {
    uv_loop_t *loop;
    struct httpc *hc;
    struct kube *k;
    struct kevents *ev;
    struct stage *s;
    uv_timer_t hold, quit;
    uv_signal_t term;
    const char *hashes[MAX_HASHES];
    int nhashes, next;
    long hold_ms, exit_after;
    int fail;
} D;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void on_verdict(void *ud, enum stage_verdict v);
static void on_quit(uv_timer_t *t);

static void next_or_quit(void)
{
    if (D.next < D.nhashes) {
        stage_acquire(D.s, D.hashes[D.next], on_verdict, NULL);
        return;
    }
    if (D.exit_after >= 0) uv_timer_start(&D.quit, on_quit, (uint64_t)D.exit_after, 0);
}

static void on_hold(uv_timer_t *t)
{
    (void)t;
    const char *h = D.hashes[D.next++];
    printf("{\"event\":\"release\",\"ok\":%s,\"hash\":\"%s\",\"t\":%ld}\n",
           D.fail ? "false" : "true", h, now_ms());
    fflush(stdout);
    stage_release(D.s, h, !D.fail, D.fail ? "verify: the app answered 500" : NULL);
    next_or_quit();
}

static void on_verdict(void *ud, enum stage_verdict v)
{
    (void)ud;
    printf("{\"event\":\"verdict\",\"verdict\":\"%s\",\"hash\":\"%s\",\"t\":%ld}\n",
           stage_verdict_name(v), D.hashes[D.next], now_ms());
    fflush(stdout);
    if (v == STAGE_GO) {
        if (D.hold_ms >= 0) uv_timer_start(&D.hold, on_hold, (uint64_t)D.hold_ms, 0);
        return;
    }
    D.next++;
    next_or_quit();
}

static void on_stage_closed(void *ud)
{
    (void)ud;
    if (D.ev) kev_destroy(D.ev);
    kube_destroy(D.k);
    httpc_close(D.hc, NULL, NULL);
}

static void stop(void)
{
    uv_close((uv_handle_t *)&D.hold, NULL);
    uv_close((uv_handle_t *)&D.quit, NULL);
    uv_close((uv_handle_t *)&D.term, NULL);
    stage_close(D.s, on_stage_closed, NULL);
}

static void on_term(uv_signal_t *s, int sig)
{
    (void)s;
    (void)sig;
    stop();
}

static void on_quit(uv_timer_t *t)
{
    (void)t;
    stop();
}

static int usage(const char *why)
{
    fprintf(stderr, "stagedrive: %s\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    struct kube_config kc = {0};
    struct stage_opts so = {0};
    const char *stage = NULL;
    D.hold_ms = 200;
    D.exit_after = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--fail")) {
            D.fail = 1;
            continue;
        }
        if (!v) return usage("a flag without its value");
        i++;
        if (!strcmp(a, "--kube-api"))
            kc.api = v;
        else if (!strcmp(a, "--kube-token-file"))
            kc.token_file = v;
        else if (!strcmp(a, "--kube-ca-file"))
            kc.ca_file = v;
        else if (!strcmp(a, "--pod-name"))
            kc.pod_name = v;
        else if (!strcmp(a, "--namespace"))
            kc.namespace_ = v;
        else if (!strcmp(a, "--stage"))
            stage = v;
        else if (!strcmp(a, "--workload"))
            so.workload = v;
        else if (!strcmp(a, "--ttl"))
            so.ttl_ms = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--grace"))
            so.grace_ms = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--jitter"))
            so.jitter_ms = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--hold"))
            D.hold_ms = strtol(v, NULL, 10);
        else if (!strcmp(a, "--exit-after"))
            D.exit_after = strtol(v, NULL, 10);
        else if (!strcmp(a, "--hash") && D.nhashes < MAX_HASHES)
            D.hashes[D.nhashes++] = v;
        else
            return usage("unknown flag");
    }
    if (!stage || !D.nhashes) return usage("--stage and --hash are needed");
    size_t n = strlen(stage);
    if (n && stage[n - 1] == '%')
        so.percent = atoi(stage);
    else
        so.count = atoi(stage);
    log_configure(RA_LOG_DEBUG, RA_LOG_FORMAT_JSON);
    ra_rng_seed_process(); /* as the agent's main does: replicas must not jitter alike */
    signal(SIGPIPE, SIG_IGN);
    D.loop = uv_default_loop();
    char err[1024];
    if (httpc_create(D.loop, &D.hc) < 0) return usage("cannot create the HTTP client");
    if (kube_create(D.loop, D.hc, &kc, &D.k, err, sizeof err) < 0) return usage(err);
    if (kev_create(D.k, &D.ev) < 0) return usage("out of memory");
    if (stage_create(D.loop, D.k, D.ev, &so, &D.s, err, sizeof err) < 0) return usage(err);
    uv_timer_init(D.loop, &D.hold);
    uv_timer_init(D.loop, &D.quit);
    uv_signal_init(D.loop, &D.term);
    uv_signal_start(&D.term, on_term, SIGTERM);
    stage_acquire(D.s, D.hashes[0], on_verdict, NULL);
    uv_run(D.loop, UV_RUN_DEFAULT);
    return uv_loop_close(D.loop) == 0 ? 0 : 1;
}
