/*
 * cmd_certs.c - `reload-agent webhook certs`: its flags (one table, --help
 * generated from it), the checks of their values, then webhook_certs_run
 * (webhook/certs.c) with the options.
 */
#include "cmd/cmd_certs.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cmd/flags.h"
#include "base/log.h"
#include "config/value.h"
#include "kube/k8sname.h"
#include "webhook/certgen.h"
#include "webhook/certs.h"

enum { F_NAMESPACE = 1, F_SECRET, F_SERVICE, F_MWC, F_VALIDITY, F_PREVIOUS, F_API, F_TOKEN, F_CA };

static const struct flag_def FLAGS[] = {
    {F_NAMESPACE, "namespace", 0, FLAG_STR, "NS", NULL,
     "namespace of the Secret and the Service (default\n"
     "$POD_NAMESPACE, then the service-account namespace file)"},
    {F_SECRET, "secret-name", 0, FLAG_STR, "NAME", NULL,
     "the TLS Secret to create or keep (required)"},
    {F_SERVICE, "service-name", 0, FLAG_STR, "NAME", NULL,
     "the webhook's Service; the certificate is valid for NAME,\n"
     "NAME.NS, NAME.NS.svc, NAME.NS.svc.cluster.local (required)"},
    {F_MWC, "webhook-config", 0, FLAG_STR, "NAME", NULL,
     "the MutatingWebhookConfiguration whose caBundle to write\n"
     "(without it only the Secret is ensured)"},
    {F_VALIDITY, "validity", 0, FLAG_STR, "DURATION", NULL,
     "lifetime of the CA and the serving certificate, both\n"
     "EC P-256 (default 87600h = 10 years; 1h to 876000h)"},
    {F_PREVIOUS, "previous-ca", 0, FLAG_STR, "keep|drop", NULL,
     "when the CA changed: keep the previous CA in caBundle behind\n"
     "the new one until the next renewal, so replicas still serving\n"
     "the old certificate verify (default keep); drop it after a\n"
     "key compromise"},
    {F_API, "kube-api", 0, FLAG_STR, "URL", NULL, "API server (https://; default: in-cluster)"},
    {F_TOKEN, "kube-token-file", 0, FLAG_STR, "PATH", NULL,
     "bearer token (default: the service-account token)"},
    {F_CA, "kube-ca-file", 0, FLAG_STR, "PATH", NULL,
     "CA of the API server (default: the service-account ca.crt)"},
};

static const struct flags_cmd CMD = {
    .name = "webhook certs",
    .usage =
        "usage: reload-agent webhook certs --secret-name NAME --service-name NAME\n"
        "                                  [--webhook-config NAME] [flags]\n"
        "\n"
        "Makes sure Secret NAME (type kubernetes.io/tls: tls.crt, tls.key, ca.crt) holds a CA\n"
        "and a serving certificate for the webhook's Service, then writes that CA into the\n"
        "caBundle of every webhook of the MutatingWebhookConfiguration that lacks it (the\n"
        "previous CA stays behind it, --previous-ca).\n"
        "An existing Secret is kept (and checked); nothing is written when all is current.\n"
        "Run it as a Job (manifests/webhook/certgen). Exit status: 0 done, 1 an API or\n"
        "certificate error, 2 a usage error.\n"
        "\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
    .log = 1,
};

struct args {
    struct certs_opts o;
    const char *validity, *previous;
    struct flags_log log;
};

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    struct args *a = ud;
    if (flags_log_take(&a->log, def, choice)) return 0;
    switch (def->id) {
    case F_NAMESPACE: a->o.ns = v; break;
    case F_SECRET: a->o.secret = v; break;
    case F_SERVICE: a->o.service = v; break;
    case F_MWC: a->o.mwc = v; break;
    case F_VALIDITY: a->validity = v; break;
    case F_PREVIOUS: a->previous = v; break;
    case F_API: a->o.api = v; break;
    case F_TOKEN: a->o.token_file = v; break;
    case F_CA: a->o.ca_file = v; break;
    }
    return 0;
}

/* The checks of the values: 0, or the exit status 2 of a usage error
 * (printed). Sets a->o.validity_s. */
static int check_args(struct args *a)
{
    const struct certs_opts *o = &a->o;
    char err[256];

    if (!o->secret || !o->secret[0]) return flags_usage_error(&CMD, "--secret-name is required");
    if (!k8s_is_dns1123_subdomain(o->secret))
        return flags_usage_error(&CMD, "--secret-name \"%s\" is not a valid Secret name",
                                 o->secret);
    if (!o->service || !o->service[0]) return flags_usage_error(&CMD, "--service-name is required");
    if (!k8s_is_dns1035_label(o->service))
        return flags_usage_error(&CMD,
                                 "--service-name \"%s\" is not a valid Service name (a lowercase "
                                 "RFC 1035 label)",
                                 o->service);
    if (o->mwc && !k8s_is_dns1123_subdomain(o->mwc))
        return flags_usage_error(&CMD, "--webhook-config \"%s\" is not a valid object name",
                                 o->mwc);
    a->o.keep_previous_ca = !a->previous || strcmp(a->previous, "keep") == 0;
    if (a->previous && !a->o.keep_previous_ca && strcmp(a->previous, "drop") != 0)
        return flags_usage_error(&CMD, "--previous-ca \"%s\": must be keep or drop", a->previous);
    a->o.validity_s = CERTGEN_VALIDITY_S;
    if (a->validity) {
        int64_t ns;

        if (val_duration(a->validity, &ns, err, sizeof err) < 0)
            return flags_usage_error(&CMD, "--validity: %s", err);
        if (ns / 1000000000 < CERTGEN_MIN_VALIDITY_S || ns / 1000000000 > CERTGEN_MAX_VALIDITY_S)
            return flags_usage_error(&CMD, "--validity \"%s\": must be between 1h and 876000h",
                                     a->validity);
        a->o.validity_s = ns / 1000000000;
    }
    return 0;
}

int cmd_certs(int argc, char **argv)
{
    struct args a = {.log = {RA_LOG_INFO, RA_LOG_FORMAT_TEXT}};
    int status;

    if (flags_parse(&CMD, argc, argv, on_arg, &a, &status)) return status;
    log_configure(a.log.level, a.log.format);
    if ((status = check_args(&a)) != 0) return status;
    return webhook_certs_run(&a.o);
}
