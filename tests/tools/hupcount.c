/*
 * hupcount.c - a stand-in application for tests and the benchmark: writes
 * its PID to a file, then records the CLOCK_MONOTONIC time (ns) of every
 * signal it receives (default SIGHUP; --signal N). On SIGTERM or SIGINT it
 * prints one line per received signal ("<ns>") to stdout, or to --out FILE,
 * and exits 0. Signals are taken with sigwaitinfo, so the timestamp is taken
 * as soon as the kernel delivers, with no handler races.
 *
 * usage: hupcount --pid-file PATH [--out FILE] [--signal N] [--max N]
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *pid_file = NULL, *out = NULL;
    int sig = SIGHUP;
    size_t max = 100000, n = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--pid-file"))
            pid_file = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            out = argv[i + 1];
        else if (!strcmp(argv[i], "--signal"))
            sig = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--max"))
            max = (size_t)atol(argv[i + 1]);
        else {
            fprintf(stderr, "hupcount: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!pid_file) {
        fprintf(stderr, "usage: hupcount --pid-file PATH [--out FILE] [--signal N] [--max N]\n");
        return 2;
    }
    uint64_t *ts = calloc(max, sizeof *ts);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    if (!ts || sigprocmask(SIG_BLOCK, &set, NULL) < 0) return 1;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", pid_file);
    FILE *pf = fopen(tmp, "w");
    if (!pf || fprintf(pf, "%d\n", (int)getpid()) < 0 || fclose(pf) != 0 || rename(tmp, pid_file)) {
        perror("hupcount: pid file");
        return 1;
    }
    for (;;) {
        siginfo_t si;
        int s = sigwaitinfo(&set, &si);
        if (s < 0) {
            if (errno == EINTR) continue;
            return 1;
        }
        if (s == sig) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (n < max) ts[n++] = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
            continue;
        }
        break;
    }
    FILE *o = out ? fopen(out, "w") : stdout;
    if (!o) return 1;
    for (size_t i = 0; i < n; i++) fprintf(o, "%llu\n", (unsigned long long)ts[i]);
    fclose(o);
    free(ts);
    return 0;
}
