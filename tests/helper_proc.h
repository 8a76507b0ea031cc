/*
 * helper_proc.h - helper processes for the C tests (test servers written in
 * Python): start one with its stdin and stdout on pipes, read the first line
 * it prints (its port, or a JSON description), and stop it by PID. A helper
 * that watches its stdin exits by itself when the test dies. Static
 * functions: each test binary that includes this gets its own copy.
 */
#ifndef RA_TESTS_HELPER_PROC_H
#define RA_TESTS_HELPER_PROC_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

struct helper {
    pid_t pid;
    int stdin_fd; /* closing it tells the helper to exit */
};

/* Starts argv (argv[0] looked up in PATH) and reads its first output line
 * (NUL-terminated, newline kept) into line[n], waiting at most timeout_ms.
 * Returns 0, or -1 if it could not start or printed nothing in time (the
 * process, if any, is left for helper_stop). */
static int helper_start(struct helper *h, const char *const *argv, char *line, size_t n,
                        uint64_t timeout_ms)
{
    int in[2], out[2];
    size_t got = 0;
    uint64_t deadline = uv_hrtime() + timeout_ms * 1000000ULL;

    h->pid = 0;
    h->stdin_fd = -1;
    line[0] = '\0';
    if (pipe2(in, O_CLOEXEC) != 0) return -1;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    h->pid = fork();
    if (h->pid < 0) return -1;
    if (h->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    h->stdin_fd = in[1];
    while (got < n - 1 && !memchr(line, '\n', got) && uv_hrtime() < deadline) {
        struct pollfd p = {.fd = out[0], .events = POLLIN};
        ssize_t r;

        if (poll(&p, 1, 200) <= 0) continue;
        r = read(out[0], line + got, n - 1 - got);
        if (r <= 0) break;
        got += (size_t)r;
        line[got] = '\0';
    }
    close(out[0]);
    return memchr(line, '\n', got) ? 0 : -1;
}

/* The test servers are on loopback: no proxy from the environment may be
 * involved (libcurl honours these variables). */
static void no_proxy_env(void)
{
    static const char *const vars[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
                                       "HTTPS_PROXY", "all_proxy",  "ALL_PROXY"};

    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* SIGTERM, up to grace_ms for it to exit, then SIGKILL; reaps it. */
static void helper_stop(struct helper *h, unsigned grace_ms)
{
    int i, status, steps = (int)(grace_ms / 20);

    if (h->pid <= 0) return;
    kill(h->pid, SIGTERM);
    for (i = 0; i < steps && waitpid(h->pid, &status, WNOHANG) == 0; i++) usleep(20000);
    if (i == steps) {
        kill(h->pid, SIGKILL);
        waitpid(h->pid, &status, 0);
    }
    if (h->stdin_fd >= 0) close(h->stdin_fd);
    h->pid = 0;
    h->stdin_fd = -1;
}

#endif
