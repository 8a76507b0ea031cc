/*
 * podrestart.c - the record of a pod restart, reported by the agent that
 * starts again (podrestart.h).
 */
#include "run/podrestart.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

#include "actions/restartpod.h"
#include "base/log.h"

int podrestart_report(const char *state_dir, struct engine *eng, struct kevents *ev,
                      const char *pod, const char *ns)
{
    struct restartpod_record rec;
    char err[4400], when[32] = "?";
    if (!state_dir || !*state_dir) return 0;
    int rc = restartpod_record_take(state_dir, &rec, err, sizeof err);
    if (rc < 0) log_warn("restart-pod record: %s", err);
    if (rc <= 0) return 0;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    int64_t ago = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000 - rec.time_ms;
    time_t secs = (time_t)(rec.time_ms / 1000);
    struct tm tm;
    if (gmtime_r(&secs, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    const char *files = rec.files ? rec.files : "?";
    struct log_rec r;
    if (log_rec_begin(&r, RA_LOG_INFO, "pod-restarted")) {
        log_rec_str(&r, "at", when);
        log_rec_int(&r, "ago_ms", (long long)ago);
        log_rec_int(&r, "exit_code", rec.exit_code);
        log_rec_str(&r, "hash", rec.hash);
        log_rec_str(&r, "files", files);
        log_rec_end(&r,
                    "the pod was restarted in place by reload-agent at %s (exit code %d) for "
                    "content %.12s, changed: %s; every container started with the content now "
                    "mounted",
                    when, rec.exit_code, rec.hash, files);
    }
    if (eng) engine_pod_restarted(eng);
    if (ev && pod && ns) {
        char msg[2400];
        struct kev_object obj = {"v1", "Pod", pod, ns, NULL};
        snprintf(msg, sizeof msg,
                 "restarted every container in place (exit code %d) for content hash %.12s; "
                 "changed: %s",
                 rec.exit_code, rec.hash, files);
        kev_post(ev, &obj, "Normal", "PodRestarted", msg);
    }
    restartpod_record_free(&rec);
    return 1;
}
