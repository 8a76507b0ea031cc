/*
 * cmd_webhook.c - `reload-agent webhook`: parses the flags (cmd/flags.h),
 * sets up logging and the signal handlers, runs the webhook server
 * (webhook/server.c) on its own loop, and stops it gracefully on SIGTERM or
 * SIGINT: a drain of --shutdown-delay (a second signal ends it), then the
 * stop within --shutdown-timeout. `webhook certs` goes to cmd/cmd_certs.c.
 */
#include "cmd/cmd_webhook.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cmd/cmd_certs.h"
#include "cmd/flags.h"
#include "base/addr.h"
#include "base/log.h"
#include "config/value.h"
#include "inject/transform.h"
#include "webhook/kubever.h"
#include "webhook/server.h"
#include "webhook/whmetrics.h"

#define DEFAULT_LISTEN ":8443"
#define DEFAULT_SHUTDOWN_TIMEOUT "5s"
#define DEFAULT_SHUTDOWN_DELAY "5s"
#define DEFAULT_KUBE_REFRESH "10m"

static struct {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    struct webhook_server *srv;
    struct kubever *kv;
    int stopping;
} W;

enum {
    F_LISTEN = 1,
    F_CERT,
    F_KEY,
    F_IMAGE,
    F_SHUTDOWN,
    F_DELAY,
    F_KUBE_VERSION,
    F_KUBE_REFRESH,
    F_KUBE_API,
    F_KUBE_CA,
    F_KUBE_TOKEN
};

static const struct flag_def FLAGS[] = {
    {F_LISTEN, "listen", 0, FLAG_STR, "ADDR:PORT", NULL,
     "address to serve on (default " DEFAULT_LISTEN "; \"[::]:8443\" for IPv6)"},
    {F_CERT, "tls-cert-file", 0, FLAG_STR, "PATH", NULL,
     "PEM certificate chain, leaf first (required)"},
    {F_KEY, "tls-key-file", 0, FLAG_STR, "PATH", NULL, "PEM private key (required)"},
    {F_IMAGE, "image", 0, FLAG_STR, "IMAGE", NULL,
     "sidecar image (default " INJECT_DEFAULT_IMAGE ")"},
    {F_SHUTDOWN, "shutdown-timeout", 0, FLAG_STR, "DURATION", NULL,
     "how long SIGTERM waits for open requests, after the\n"
     "drain (default " DEFAULT_SHUTDOWN_TIMEOUT ")"},
    {F_DELAY, "shutdown-delay", 0, FLAG_STR, "DURATION", NULL,
     "on SIGTERM, before that: /readyz answers 503 while\n"
     "connections are still accepted and served, each reply\n"
     "closing its connection, for this long (default " DEFAULT_SHUTDOWN_DELAY ";\n"
     "0s: none; a second signal ends it)"},
    {F_KUBE_VERSION, "kube-version", 0, FLAG_STR, "VERSION", NULL,
     "the cluster's Kubernetes version, e.g. 1.35, instead of\n"
     "the API server's (GET /version; 1.36 when it cannot be\n"
     "read): below 1.36 restart-pod pods are admitted without\n"
     "the sidecar, below 1.35 restart's rule on the app is left out"},
    {F_KUBE_REFRESH, "kube-version-refresh", 0, FLAG_STR, "DURATION", NULL,
     "how often the API server's version is read again\n"
     "(default " DEFAULT_KUBE_REFRESH "; 30 s after a failure)"},
    {F_KUBE_API, "kube-api", 0, FLAG_STR, "URL", NULL,
     "API server URL (https://) outside a cluster (default: the\n"
     "in-cluster address from KUBERNETES_SERVICE_HOST/PORT)"},
    {F_KUBE_CA, "kube-ca-file", 0, FLAG_STR, "PATH", NULL,
     "the API server's CA bundle (default: the ServiceAccount's ca.crt)"},
    {F_KUBE_TOKEN, "kube-token-file", 0, FLAG_STR, "PATH", NULL,
     "bearer token file (default: the ServiceAccount's token)"},
};

_Static_assert(INJECT_KUBE_MINOR_DEFAULT == 36, "--kube-version's help names the default");
_Static_assert(KUBEVER_REFRESH_MS_DEFAULT == 600000, "--kube-version-refresh's help names it");
_Static_assert(KUBEVER_RETRY_MS == 30000, "--kube-version-refresh's help names the retry");

static const struct flags_cmd CMD = {
    .name = "webhook",
    .usage = "usage: reload-agent webhook --tls-cert-file PATH --tls-key-file PATH [flags]\n"
             "       reload-agent webhook certs ...   (see reload-agent webhook certs --help)\n"
             "\n"
             "Serves the mutating admission webhook that injects the reload-agent sidecar into\n"
             "pods annotated reload-agent.io/inject: \"true\" (POST /mutate, AdmissionReview v1),\n"
             "over HTTPS. It never rejects a pod: on any problem the pod is admitted unchanged\n"
             "with a warning. The certificate and key are reloaded when their files change.\n"
             "\n"
             "Flags:\n",
    .footer =
        "\n"
        "Endpoints: POST /mutate, GET /healthz, /readyz, /metrics.\n"
        "On SIGTERM/SIGINT: the drain (--shutdown-delay), then the stop (--shutdown-timeout).\n"
        "Exit status: 0 after SIGTERM/SIGINT, 2 for a usage error or a certificate or key\n"
        "that cannot be loaded, 1 when the address cannot be bound.\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
    .log = 1,
};

/* What the command line asks for. */
struct args {
    const char *listen, *cert, *key, *image, *shutdown, *delay, *kube_version;
    const char *kube_refresh, *kube_api, *kube_ca, *kube_token;
    struct flags_log log;
    uint64_t grace_ms, delay_ms, refresh_ms;
    int kube_minor; /* --kube-version's minor, 0 when not given */
};

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    struct args *a = ud;
    if (flags_log_take(&a->log, def, choice)) return 0;
    switch (def->id) {
    case F_LISTEN: a->listen = v; break;
    case F_CERT: a->cert = v; break;
    case F_KEY: a->key = v; break;
    case F_IMAGE: a->image = v; break;
    case F_SHUTDOWN: a->shutdown = v; break;
    case F_DELAY: a->delay = v; break;
    case F_KUBE_VERSION: a->kube_version = v; break;
    case F_KUBE_REFRESH: a->kube_refresh = v; break;
    case F_KUBE_API: a->kube_api = v; break;
    case F_KUBE_CA: a->kube_ca = v; break;
    case F_KUBE_TOKEN: a->kube_token = v; break;
    }
    return 0;
}

/* What the flags cannot say alone: 0, or the exit status 2 of a usage
 * error (printed). Sets a->grace_ms, a->delay_ms and a->refresh_ms. */
static int check_flags(struct args *a)
{
    char err[512];
    if (!a->cert || !*a->cert) return flags_usage_error(&CMD, "--tls-cert-file is required");
    if (!a->key || !*a->key) return flags_usage_error(&CMD, "--tls-key-file is required");
    if (a->image && !*a->image) return flags_usage_error(&CMD, "--image must not be empty");
    struct sockaddr_storage sa;
    if (addr_parse_listen(a->listen, &sa, err, sizeof err) != 0)
        return flags_usage_error(&CMD, "--listen: %s", err);
    if (a->kube_version && inject_parse_kube_version(a->kube_version, &a->kube_minor) < 0)
        return flags_usage_error(&CMD,
                                 "--kube-version: \"%s\" is not a Kubernetes version (want 1.N or "
                                 "v1.N.P)",
                                 a->kube_version);
    int64_t ns;
    if (val_duration(a->shutdown, &ns, err, sizeof err) != 0)
        return flags_usage_error(&CMD, "--shutdown-timeout: %s", err);
    a->grace_ms = (uint64_t)(ns / 1000000);
    if (val_duration(a->delay, &ns, err, sizeof err) != 0)
        return flags_usage_error(&CMD, "--shutdown-delay: %s", err);
    a->delay_ms = (uint64_t)(ns / 1000000);
    if (val_duration(a->kube_refresh, &ns, err, sizeof err) != 0)
        return flags_usage_error(&CMD, "--kube-version-refresh: %s", err);
    if (ns < 1000000000LL)
        return flags_usage_error(&CMD, "--kube-version-refresh: \"%s\" is under 1s",
                                 a->kube_refresh);
    a->refresh_ms = (uint64_t)(ns / 1000000);
    if (a->kube_api && *a->kube_api && strncmp(a->kube_api, "https://", 8) != 0)
        return flags_usage_error(&CMD, "--kube-api: \"%s\" is not an https:// URL", a->kube_api);
    return 0;
}

static void on_closed(uv_handle_t *h) { (void)h; }

static void on_server_done(void *ud)
{
    (void)ud;
    W.srv = NULL;
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "stopped")) log_rec_end(&r, "webhook stopped");
}

static uint64_t grace_ms, delay_ms;

/* The drain is over (at once without one): a further signal is no longer
 * ours, as it was not before the drain existed (the default action ends
 * the process). */
static void close_signals(void *ud)
{
    (void)ud;
    uv_close((uv_handle_t *)&W.sigterm, on_closed);
    uv_close((uv_handle_t *)&W.sigint, on_closed);
}

static void log_shutdown(int signum)
{
    struct log_rec r;
    if (!log_rec_begin(&r, RA_LOG_INFO, "shutdown")) return;
    log_rec_str(&r, "signal", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    if (delay_ms == 0) {
        log_rec_end(&r, "stopping: no new connections; open requests get %llu ms to finish",
                    (unsigned long long)grace_ms);
        return;
    }
    log_rec_end(&r,
                "stopping: a %llu ms drain (a second signal ends it), then open requests get "
                "%llu ms to finish",
                (unsigned long long)delay_ms, (unsigned long long)grace_ms);
}

/* The first signal starts the drain; a second one during it ends it. */
static void on_signal(uv_signal_t *sig, int signum)
{
    (void)sig;
    if (W.stopping) {
        if (W.srv) webhook_server_end_delay(W.srv);
        return;
    }
    W.stopping = 1;
    log_shutdown(signum);
    kubever_stop(W.kv);
    W.kv = NULL;
    if (!W.srv) {
        close_signals(NULL);
        return;
    }
    struct webhook_stop st = {.delay_ms = delay_ms,
                              .grace_ms = grace_ms,
                              .stopped = close_signals,
                              .done = on_server_done};
    webhook_server_shutdown(W.srv, &st);
}

/* The version injection is for: --kube-version, else the API server's
 * (webhook/kubever.h). */
static void start_kube_version(const struct args *a)
{
    if (a->kube_minor > 0) {
        whmetrics_set_kube_version(a->kube_minor, "flag");
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_INFO, "kube-version")) {
            log_rec_int(&r, "minor", a->kube_minor);
            log_rec_str(&r, "source", "flag");
            log_rec_end(&r, "Kubernetes 1.%d in force for injection (--kube-version)",
                        a->kube_minor);
        }
        return;
    }
    struct kubever_opts ko = {.api = a->kube_api,
                              .ca_file = a->kube_ca,
                              .token_file = a->kube_token,
                              .refresh_ms = a->refresh_ms};
    W.kv = kubever_start(&W.loop, &ko, W.srv);
}

/* Serves until SIGTERM/SIGINT; the exit status (cmd_webhook.h). */
static int serve(const struct args *a)
{
    char err[512];
    int rc;

    grace_ms = a->grace_ms;
    delay_ms = a->delay_ms;
    log_configure(a->log.level, a->log.format);
    signal(SIGPIPE, SIG_IGN);
    memset(&W, 0, sizeof W);
    whmetrics_reset();
    if ((rc = uv_loop_init(&W.loop)) < 0) {
        log_error("cannot initialise the loop: %s", uv_strerror(rc));
        return 1;
    }
    uv_signal_init(&W.loop, &W.sigterm);
    uv_signal_init(&W.loop, &W.sigint);
    uv_signal_start(&W.sigterm, on_signal, SIGTERM);
    uv_signal_start(&W.sigint, on_signal, SIGINT);

    struct webhook_opts o = {.listen = a->listen, .cert_file = a->cert, .key_file = a->key};
    o.inject.image = a->image;
    o.inject.kube_minor = a->kube_minor;
    enum webhook_fail fail;
    rc = webhook_server_start(&W.loop, &o, &W.srv, &fail, err, sizeof err);
    int status = 0;
    if (rc < 0) {
        W.srv = NULL;
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_ERROR, "fatal")) {
            log_rec_str(&r, "error", err);
            log_rec_end(&r, "%s", err);
        }
        status = fail == WEBHOOK_FAIL_CERT ? 2 : 1;
        W.stopping = 1;
        uv_close((uv_handle_t *)&W.sigterm, on_closed);
        uv_close((uv_handle_t *)&W.sigint, on_closed);
    } else {
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_INFO, "ready")) {
            log_rec_int(&r, "port", webhook_server_port(W.srv));
            log_rec_str(&r, "listen", a->listen);
            log_rec_end(&r, "webhook serving HTTPS on %s (port %d)", a->listen,
                        webhook_server_port(W.srv));
        }
        start_kube_version(a);
    }
    uv_run(&W.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&W.loop) != 0) {
        log_error("internal error: handles left open at exit");
        status = 1;
    }
    return status;
}

int cmd_webhook(int argc, char **argv)
{
    struct args a;
    int status;

    if (argc >= 2 && strcmp(argv[1], "certs") == 0) return cmd_certs(argc - 1, argv + 1);
    a = (struct args){.listen = DEFAULT_LISTEN,
                      .shutdown = DEFAULT_SHUTDOWN_TIMEOUT,
                      .delay = DEFAULT_SHUTDOWN_DELAY,
                      .kube_refresh = DEFAULT_KUBE_REFRESH,
                      .log = {RA_LOG_INFO, RA_LOG_FORMAT_TEXT}};
    if (flags_parse(&CMD, argc, argv, on_arg, &a, &status)) return status;
    if ((status = check_flags(&a)) != 0) return status;
    return serve(&a);
}
