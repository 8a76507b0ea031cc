/*
 * validator.h - `reload-agent validator`: the server end of the validator
 * protocol (run/vproto.h). It runs in the injector's validator container,
 * a native sidecar made from the app's own image with the app's
 * securityContext, env and mounts, so a checker such as `nginx -t` sees the
 * files as the app would, with no privilege at all (docs/safe-reload.md).
 *
 * One command at a time: a request that arrives while one runs is answered
 * {"error":"busy ..."} at once. Each command runs in a session of its own
 * with the time limit the request gives (at most VPROTO_TIMEOUT_MAX_MS):
 * then its process group gets SIGTERM, and SIGKILL 2 s later. Its output is
 * bounded (VPROTO_OUTPUT_MAX kept); a request line is bounded
 * (VPROTO_REQUEST_MAX) and must arrive within VALIDATOR_REQUEST_MS of the
 * connection; at most VALIDATOR_CONNS_MAX connections are open at once; a
 * client that goes away gets its command killed. SIGTERM or SIGINT stop it.
 */
#ifndef RA_VALIDATOR_H
#define RA_VALIDATOR_H

#define VALIDATOR_REQUEST_MS 10000
#define VALIDATOR_CONNS_MAX 16

struct validator_opts {
    const char *socket; /* the unix socket to listen on (its directory must exist) */
};

/* Serves until SIGTERM or SIGINT. A stale socket at the path (left by a
 * validator that ended) is replaced; anything else there is an error. The
 * socket is made mode 0666: the agent's container may run as another user,
 * and only the containers that mount its emptyDir can reach it. Returns the
 * exit status: 0 after a signal, 1 when it cannot listen (logged). */
int validator_main(const struct validator_opts *o);

#endif
