/*
 * cmd_webhook.c - `reload-agent webhook`: parses the flags, sets up logging
 * and the signal handlers, runs the webhook server (webhook/server.c) on
 * its own loop, and stops it gracefully on SIGTERM or SIGINT.
 */
#include "agent/cmd_webhook.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/addr.h"
#include "base/log.h"
#include "config/value.h"
#include "webhook/server.h"
#include "webhook/whmetrics.h"

#define DEFAULT_LISTEN ":8443"
#define DEFAULT_SHUTDOWN_TIMEOUT "5s"

static struct {
    uv_loop_t loop;
    uv_signal_t sigterm, sigint;
    struct webhook_server *srv;
    int stopping;
} W;

void cmd_webhook_usage(FILE *f)
{
    fprintf(
        f,
        "usage: reload-agent webhook --tls-cert-file PATH --tls-key-file PATH [flags]\n"
        "\n"
        "Serves the mutating admission webhook that injects the reload-agent sidecar into\n"
        "pods annotated reload-agent.io/inject: \"true\" (POST /mutate, AdmissionReview v1),\n"
        "over HTTPS. It never rejects a pod: on any problem the pod is admitted unchanged\n"
        "with a warning. The certificate and key are reloaded when their files change.\n"
        "\n"
        "Flags:\n"
        "  --listen ADDR:PORT          address to serve on (default %s; \"[::]:8443\" for IPv6)\n"
        "  --tls-cert-file PATH        PEM certificate chain, leaf first (required)\n"
        "  --tls-key-file PATH         PEM private key (required)\n"
        "  --image IMAGE               sidecar image (default %s)\n"
        "  --log-format text|json      log line format (default text)\n"
        "  --log-level LEVEL           debug, info, warn or error (default info)\n"
        "  --shutdown-timeout DURATION how long SIGTERM waits for open requests (default %s)\n"
        "  -h, --help                  this text\n"
        "\n"
        "Endpoints: POST /mutate, GET /healthz, /readyz, /metrics.\n"
        "Exit status: 0 after SIGTERM/SIGINT, 2 for a usage error or a certificate or key\n"
        "that cannot be loaded, 1 when the address cannot be bound.\n",
        DEFAULT_LISTEN, INJECT_DEFAULT_IMAGE, DEFAULT_SHUTDOWN_TIMEOUT);
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "reload-agent webhook: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(see reload-agent webhook --help)\n");
    return 2;
}

static void on_closed(uv_handle_t *h) { (void)h; }

static void on_server_done(void *ud)
{
    (void)ud;
    W.srv = NULL;
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "stopped")) log_rec_end(&r, "webhook stopped");
}

static uint64_t grace_ms;

static void on_signal(uv_signal_t *sig, int signum)
{
    (void)sig;
    if (W.stopping) return;
    W.stopping = 1;
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "shutdown")) {
        log_rec_str(&r, "signal", signum == SIGTERM ? "SIGTERM" : "SIGINT");
        log_rec_end(&r, "stopping: no new connections; open requests get %llu ms to finish",
                    (unsigned long long)grace_ms);
    }
    uv_close((uv_handle_t *)&W.sigterm, on_closed);
    uv_close((uv_handle_t *)&W.sigint, on_closed);
    if (W.srv) webhook_server_shutdown(W.srv, grace_ms, on_server_done, NULL);
}

int cmd_webhook(int argc, char **argv)
{
    enum { O_LISTEN = 256, O_CERT, O_KEY, O_IMAGE, O_LOG_FORMAT, O_LOG_LEVEL, O_SHUTDOWN };
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, O_LISTEN},
        {"tls-cert-file", required_argument, NULL, O_CERT},
        {"tls-key-file", required_argument, NULL, O_KEY},
        {"image", required_argument, NULL, O_IMAGE},
        {"log-format", required_argument, NULL, O_LOG_FORMAT},
        {"log-level", required_argument, NULL, O_LOG_LEVEL},
        {"shutdown-timeout", required_argument, NULL, O_SHUTDOWN},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen = DEFAULT_LISTEN, *cert = NULL, *key = NULL, *image = NULL;
    const char *shutdown = DEFAULT_SHUTDOWN_TIMEOUT;
    enum log_format fmt = RA_LOG_FORMAT_TEXT;
    enum log_level lvl = RA_LOG_INFO;
    char err[512];

    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        switch (c) {
        case O_LISTEN: listen = optarg; break;
        case O_CERT: cert = optarg; break;
        case O_KEY: key = optarg; break;
        case O_IMAGE: image = optarg; break;
        case O_LOG_FORMAT:
            if (strcmp(optarg, "text") == 0)
                fmt = RA_LOG_FORMAT_TEXT;
            else if (strcmp(optarg, "json") == 0)
                fmt = RA_LOG_FORMAT_JSON;
            else
                return usage_error("--log-format: \"%s\" is not text or json", optarg);
            break;
        case O_LOG_LEVEL: {
            int found = 0;
            for (int l = RA_LOG_DEBUG; l <= RA_LOG_ERROR; l++)
                if (strcmp(optarg, log_level_name((enum log_level)l)) == 0) {
                    lvl = (enum log_level)l;
                    found = 1;
                }
            if (!found)
                return usage_error("--log-level: \"%s\" is not debug, info, warn or error", optarg);
            break;
        }
        case O_SHUTDOWN: shutdown = optarg; break;
        case 'h': cmd_webhook_usage(stdout); return 0;
        case ':': return usage_error("%s needs a value", argv[optind - 1]);
        default: return usage_error("unknown flag %s", argv[optind - 1]);
        }
    }
    if (optind < argc) return usage_error("unexpected argument \"%s\"", argv[optind]);
    if (!cert || !*cert) return usage_error("%s", "--tls-cert-file is required");
    if (!key || !*key) return usage_error("%s", "--tls-key-file is required");
    if (image && !*image) return usage_error("%s", "--image must not be empty");
    struct sockaddr_storage sa;
    if (addr_parse_listen(listen, &sa, err, sizeof err) != 0)
        return usage_error("--listen: %s", err);
    int64_t ns;
    if (val_duration(shutdown, &ns, err, sizeof err) != 0)
        return usage_error("--shutdown-timeout: %s", err);
    grace_ms = (uint64_t)(ns / 1000000);

    log_configure(lvl, fmt);
    signal(SIGPIPE, SIG_IGN);
    memset(&W, 0, sizeof W);
    whmetrics_reset();
    uv_loop_init(&W.loop);
    uv_signal_init(&W.loop, &W.sigterm);
    uv_signal_init(&W.loop, &W.sigint);
    uv_signal_start(&W.sigterm, on_signal, SIGTERM);
    uv_signal_start(&W.sigint, on_signal, SIGINT);

    struct webhook_opts o = {.listen = listen, .cert_file = cert, .key_file = key};
    o.inject.image = image;
    enum webhook_fail fail;
    int rc = webhook_server_start(&W.loop, &o, &W.srv, &fail, err, sizeof err);
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
            log_rec_str(&r, "listen", listen);
            log_rec_end(&r, "webhook serving HTTPS on %s (port %d)", listen,
                        webhook_server_port(W.srv));
        }
    }
    uv_run(&W.loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&W.loop) != 0) {
        log_error("internal error: handles left open at exit");
        status = 1;
    }
    return status;
}
