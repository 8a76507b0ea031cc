/*
 * cmd_sync.c - `reload-agent sync`: its flags (one table, --help generated
 * from it), the checks of their values, then sync_run (sync/service.c).
 */
#include "cmd/cmd_sync.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cmd/flags.h"
#include "config/value.h"
#include "kube/k8sname.h"
#include "sync/service.h"

enum {
    F_NAMESPACES = 1,
    F_ALL_NAMESPACES,
    F_MAX_NAMESPACES,
    F_NAMESPACE,
    F_LEASE,
    F_IDENTITY,
    F_LEASE_DURATION,
    F_LEASE_RETRY,
    F_QPS,
    F_BURST,
    F_COALESCE,
    F_WATCH_TIMEOUT,
    F_WATCH_RETRY,
    F_WATCH_CAP,
    F_API,
    F_TOKEN,
    F_CA
};

static const struct flag_def FLAGS[] = {
    {F_NAMESPACES, "namespaces", 0, FLAG_STR, "NS[,NS...]", NULL,
     "the namespaces served: their ConfigMaps, Secrets and pods\n"
     "are watched (the flag may repeat; at most 64); this or\n"
     "--all-namespaces is required"},
    {F_ALL_NAMESPACES, "all-namespaces", 0, FLAG_BOOL, NULL, NULL,
     "serve every namespace: one pod watch across the cluster;\n"
     "the ConfigMaps and Secrets of a namespace are watched\n"
     "while it has pods that name objects (needs a ClusterRole\n"
     "bound by a ClusterRoleBinding, docs/sync.md)"},
    {F_MAX_NAMESPACES, "max-namespaces", 0, FLAG_STR, "N", NULL,
     "with --all-namespaces: namespaces watched at once (default\n"
     "and most 1024); one more with pods is logged, not served"},
    {F_NAMESPACE, "namespace", 0, FLAG_STR, "NS", NULL,
     "the service's own namespace, where its Lease is (default\n"
     "$POD_NAMESPACE, then the service-account namespace file)"},
    {F_LEASE, "lease-name", 0, FLAG_STR, "NAME", NULL,
     "the Lease of the leader election (default reload-agent-sync)"},
    {F_IDENTITY, "identity", 0, FLAG_STR, "ID", NULL,
     "this replica's holderIdentity (default $POD_NAME, else\n"
     "the host name and the pid)"},
    {F_LEASE_DURATION, "lease-duration", 0, FLAG_STR, "DURATION", NULL,
     "how long a leader's Lease holds without renewal\n"
     "(default 15s; 2s to 5m)"},
    {F_LEASE_RETRY, "lease-retry", 0, FLAG_STR, "DURATION", NULL,
     "how often the Lease is read and renewed (default 2s;\n"
     "100ms to a third of --lease-duration)"},
    {F_QPS, "qps", 0, FLAG_STR, "N", NULL,
     "pod PATCHes per second at most (default 50; 1 to 1000)"},
    {F_BURST, "burst", 0, FLAG_STR, "N", NULL,
     "PATCHes sent at once before --qps holds (default 100)"},
    {F_COALESCE, "coalesce", 0, FLAG_STR, "DURATION", NULL,
     "a change waits this long for more changes of the same\n"
     "pods (default 50ms; 0 to 10s)"},
    {F_WATCH_TIMEOUT, "watch-timeout", 0, FLAG_STR, "DURATION", NULL,
     "the watches' timeoutSeconds (default a random 30m to 60m)"},
    {F_WATCH_RETRY, "watch-retry-base", 0, FLAG_STR, "DURATION", NULL,
     "the first step of the watches' backoff (default 1s)"},
    {F_WATCH_CAP, "watch-retry-cap", 0, FLAG_STR, "DURATION", NULL,
     "the cap of the watches' backoff (default 8s; --watch-retry-base\n"
     "to 5m): a few watches per cluster, so an API server back\n"
     "after a restart is seen within seconds"},
    {F_API, "kube-api", 0, FLAG_STR, "URL", NULL, "API server (https://; default: in-cluster)"},
    {F_TOKEN, "kube-token-file", 0, FLAG_STR, "PATH", NULL,
     "bearer token (default: the service-account token)"},
    {F_CA, "kube-ca-file", 0, FLAG_STR, "PATH", NULL,
     "CA of the API server (default: the service-account ca.crt)"},
};

static const struct flags_cmd CMD = {
    .name = "sync",
    .usage = "usage: reload-agent sync --namespaces NS[,NS...] | --all-namespaces [flags]\n"
             "\n"
             "The cluster sync service (docs/sync.md): watches the metadata of the ConfigMaps,\n"
             "Secrets and pods of the namespaces served; when an object changes, PATCHes the\n"
             "annotation reload-agent.io/sync of exactly the pods whose annotation\n"
             "reload-agent.io/sync-objects names it, so the kubelet syncs them now. Replicas\n"
             "elect a leader through a Lease; only the leader PATCHes. Runs until SIGTERM.\n"
             "Exit status: 0 stopped, 1 could not start, 2 a usage error.\n"
             "\n",
    .v = FLAGS,
    .n = sizeof FLAGS / sizeof FLAGS[0],
    .log = 1,
};

struct args {
    struct sync_opts o;
    const char *dur[4]; /* lease-duration, lease-retry, coalesce, watch-timeout */
    const char *retry, *retry_cap, *qps, *burst, *max_ns;
    struct flags_log log;
    char nsbuf[4096];
    size_t nsused;
};

/* Adds the comma-separated namespaces of v. */
static int add_namespaces(struct args *a, const char *v)
{
    for (const char *p = v;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (a->o.nns == SYNC_MAX_NAMESPACES || a->nsused + len + 1 > sizeof a->nsbuf)
            return flags_usage_error(&CMD, "--namespaces: at most %d namespaces",
                                     SYNC_MAX_NAMESPACES);
        char *ns = a->nsbuf + a->nsused;
        memcpy(ns, p, len);
        ns[len] = '\0';
        a->nsused += len + 1;
        if (!k8s_is_dns1123_label(ns))
            return flags_usage_error(&CMD, "--namespaces: \"%s\" is not a namespace name", ns);
        for (size_t i = 0; i < a->o.nns; i++)
            if (!strcmp(a->o.namespaces[i], ns))
                return flags_usage_error(&CMD, "--namespaces: \"%s\" is named twice", ns);
        a->o.namespaces[a->o.nns++] = ns;
        if (!c) return 0;
        p = c + 1;
    }
}

static int on_arg(void *ud, const struct flag_def *def, const char *v, int choice)
{
    struct args *a = ud;
    if (flags_log_take(&a->log, def, choice)) return 0;
    switch (def->id) {
    case F_NAMESPACES: return add_namespaces(a, v);
    case F_ALL_NAMESPACES: a->o.all_namespaces = 1; break;
    case F_MAX_NAMESPACES: a->max_ns = v; break;
    case F_NAMESPACE: a->o.namespace_ = v; break;
    case F_LEASE: a->o.lease = v; break;
    case F_IDENTITY: a->o.identity = v; break;
    case F_LEASE_DURATION: a->dur[0] = v; break;
    case F_LEASE_RETRY: a->dur[1] = v; break;
    case F_COALESCE: a->dur[2] = v; break;
    case F_WATCH_TIMEOUT: a->dur[3] = v; break;
    case F_WATCH_RETRY: a->retry = v; break;
    case F_WATCH_CAP: a->retry_cap = v; break;
    case F_QPS: a->qps = v; break;
    case F_BURST: a->burst = v; break;
    case F_API: a->o.api = v; break;
    case F_TOKEN: a->o.token_file = v; break;
    case F_CA: a->o.ca_file = v; break;
    }
    return 0;
}

/* A duration flag in ms within [min, max]; def when not given. */
static int duration_ms(const char *flag, const char *v, uint64_t def, uint64_t min, uint64_t max,
                       uint64_t *out)
{
    char err[256];
    int64_t ns;
    if (!v) {
        *out = def;
        return 0;
    }
    if (val_duration(v, &ns, err, sizeof err) < 0)
        return flags_usage_error(&CMD, "--%s: %s", flag, err);
    if (ns / 1000000 < (int64_t)min || ns / 1000000 > (int64_t)max)
        return flags_usage_error(&CMD, "--%s \"%s\": out of range", flag, v);
    *out = (uint64_t)(ns / 1000000);
    return 0;
}

static int number(const char *flag, const char *v, uint64_t def, uint64_t min, uint64_t max,
                  uint64_t *out)
{
    char err[256];
    if (!v) {
        *out = def;
        return 0;
    }
    if (val_uint(v, min, max, out, err, sizeof err) < 0)
        return flags_usage_error(&CMD, "--%s: %s", flag, err);
    return 0;
}

/* Exactly one of --namespaces and --all-namespaces; --max-namespaces
 * with the latter only. */
static int check_scope(struct args *a)
{
    struct sync_opts *o = &a->o;
    uint64_t max = 0;
    if (o->nns && o->all_namespaces)
        return flags_usage_error(&CMD, "--namespaces and --all-namespaces exclude each other: "
                                       "give one");
    if (!o->nns && !o->all_namespaces)
        return flags_usage_error(&CMD, "--namespaces NS[,NS...] or --all-namespaces is required");
    if (a->max_ns && !o->all_namespaces)
        return flags_usage_error(&CMD, "--max-namespaces needs --all-namespaces");
    int rc = number("max-namespaces", a->max_ns, SYNC_MAX_WATCHED_NS, 1, SYNC_MAX_WATCHED_NS, &max);
    o->max_watched_ns = (size_t)max;
    return rc;
}

static int check_args(struct args *a)
{
    struct sync_opts *o = &a->o;
    uint64_t qps = 0, burst = 0, wt = 0;
    int rc = check_scope(a);
    if (rc) return rc;
    if (!o->lease) o->lease = "reload-agent-sync";
    if (!k8s_is_dns1123_subdomain(o->lease))
        return flags_usage_error(&CMD, "--lease-name \"%s\" is not a valid object name", o->lease);
    if (o->identity && !o->identity[0]) return flags_usage_error(&CMD, "--identity is empty");
    rc = duration_ms("lease-duration", a->dur[0], 15000, 2000, 300000, &o->lease_ms);
    if (!rc)
        rc = duration_ms("lease-retry", a->dur[1], 2000, 100, o->lease_ms / 3, &o->lease_retry_ms);
    if (!rc) rc = duration_ms("coalesce", a->dur[2], 50, 0, 10000, &o->coalesce_ms);
    if (!rc && a->dur[3]) rc = duration_ms("watch-timeout", a->dur[3], 0, 1000, 3600000, &wt);
    if (!rc) rc = duration_ms("watch-retry-base", a->retry, 0, 10, 60000, &o->watch_retry_base_ms);
    if (!rc)
        rc = duration_ms("watch-retry-cap", a->retry_cap, SYNC_WATCH_RETRY_CAP_MS,
                         o->watch_retry_base_ms ? o->watch_retry_base_ms : 1000, 300000,
                         &o->watch_retry_cap_ms);
    if (!rc) rc = number("qps", a->qps, 50, 1, 1000, &qps);
    if (!rc) rc = number("burst", a->burst, 100, 1, 10000, &burst);
    o->watch_timeout_s = wt ? (wt + 999) / 1000 : 0;
    o->qps = (double)qps;
    o->burst = (unsigned)burst;
    return rc;
}

int cmd_sync(int argc, char **argv)
{
    static struct args a;
    int status;
    memset(&a, 0, sizeof a);
    a.log = (struct flags_log){RA_LOG_INFO, RA_LOG_FORMAT_TEXT};
    if (flags_parse(&CMD, argc, argv, on_arg, &a, &status)) return status;
    log_configure(a.log.level, a.log.format);
    if ((status = check_args(&a)) != 0) return status;
    return sync_run(&a.o);
}
