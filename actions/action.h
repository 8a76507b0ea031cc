/*
 * action.h - what an action is: the one interface every action implements,
 * the one table of actions, the one result shape, and the parameters one
 * attempt owns.
 *
 * The table has a row per action: its name (the option parser's names come
 * from here), its strength (none < signal = http = exec < restart <
 * restart-pod < rollout: the strongest required action runs, several in-place actions of
 * equal strength all run), whether it posts pod Events (Reloaded /
 * ReloadFailed), and its start and abort. Adding an action means one file
 * in actions/ with its ops, one row in action.c, its option rows in
 * config/config.c and docs/detection.md (Actions) and docs/configuration.md.
 *
 * An action never sees struct config: the engine copies what an attempt
 * reads into a struct action_params when the attempt starts (a live
 * configuration change never reaches an attempt in flight) and frees it
 * when the attempt ends.
 */
#ifndef RA_ACTION_H
#define RA_ACTION_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Values are stable: they index the table and the metrics. */
enum action {
    ACTION_NONE = 0,
    ACTION_SIGNAL,
    ACTION_HTTP,
    ACTION_EXEC,
    ACTION_RESTART,
    ACTION_ROLLOUT,
    ACTION_RESTART_POD,
    ACTION__COUNT
};

#define ACTION_BIT(a) (1u << (a))

/* The outcome of one run of one action. */
struct action_result {
    int status;        /* 0 on success, else a negative errno (-EIO if nothing better) */
    int permanent;     /* a retry cannot help: wait for the next content change */
    const char *error; /* one line when status < 0 (else NULL); valid during the callback */
    int held;          /* the action was held back by the storm limit shared by the replicas
               * (rollout: the workload's own count): the engine's breaker takes over */
};

/* Runs exactly once per started run, on the loop. */
typedef void (*action_done)(void *ud, enum action a, const struct action_result *res);

/* What one attempt's actions read, fixed when the attempt starts. Strings
 * and vectors are owned (malloc'd); action_params_free releases them. */
struct action_params {
    int dry_run; /* --dry-run: report success without acting */
    int events;  /* --events: post Kubernetes Events */
    /* signal (and the restart action's target) */
    int signal;     /* --signal */
    char *process;  /* --process, NULL if unset */
    char *pid_file; /* --pid-file, NULL if unset */
    int signal_all; /* --signal-all */
    /* http */
    char *http_url;
    char *http_method;
    char **http_headers; /* "Name: value" */
    size_t nhttp_headers;
    char **http_expect; /* --http-expect-status: "200", "2xx", ... */
    size_t nhttp_expect;
    uint64_t http_timeout_ms;
    /* exec */
    char *exec_command;
    uint64_t exec_timeout_ms;
    /* restart */
    int restart_signal;
    uint64_t restart_timeout_ms;
    /* rollout */
    char *hash_annotation;
    uint64_t rollout_jitter_ms;
    uint64_t min_interval_ms;
    char rollout_hash[65];    /* 64 hex of the content's rollout hash */
    char *rollout_files;      /* JSON map path -> digest prefix, or NULL */
    int storm_max;            /* --storm-limit N, 0 = off: the workload's count of rollouts */
    uint64_t storm_window_ms; /* --storm-limit's window */
    /* restart-pod */
    int restart_pod_exit_code; /* --restart-pod-exit-code */
    char *state_dir;           /* --state-dir, NULL if unset */
    char *restart_pod_files;   /* the changed files that need it, ", "-joined, or NULL */
    /* the record to write into state_dir before the exit, under that name
     * (run/statedir.h renders it; the name is static, not freed) */
    const char *restart_pod_record_name;
    char *restart_pod_record;
    char content_hash[65]; /* 64 hex of the target content's hash */
};

/* Frees what p owns and zeroes it. */
void action_params_free(struct action_params *p);

/* Duplicates n strings (n may be 0: returns NULL). Aborts on OOM. */
char **action_strv_dup(char *const *v, size_t n);

struct rollout;
struct owner_info;

/* What the actions share across attempts; owned by the engine. */
struct action_env {
    uv_loop_t *loop;
    struct rollout *ro;         /* the rollout's state: NULL without a Kubernetes client */
    void *state[ACTION__COUNT]; /* each action's own state, created by it on first use */
    /* Asks the daemon to exit with status code once it has shut down (the
     * restart-pod action, after its done ran); NULL where nothing may exit
     * (the action then fails). */
    void (*exit_request)(void *ud, int code);
    void *exit_ud;
};

/* One action's behaviour. */
struct action_ops {
    /* Starts a run with p (valid until done runs). Never fails
     * synchronously: done runs exactly once, possibly before start returns
     * (an action that completes at once), else later on the loop. */
    void (*start)(struct action_env *env, const struct action_params *p, action_done done,
                  void *ud);
    /* Ends the run in flight now; its done runs before abort returns. NULL:
     * the run finishes or times out on its own (bounded by its timeout). */
    void (*abort)(struct action_env *env);
    /* Releases env->state[a] (NULL if the action keeps none). Called once,
     * with no run in flight; handles may finish closing on the loop later. */
    void (*release)(struct action_env *env);
};

/* The action's name ("none", "signal", ...), "?" if out of range. */
const char *action_name(int a);

/* The action named name: 0 and *out, or -EINVAL. */
int action_by_name(const char *name, enum action *out);

/* The names in table order, NULL-terminated (for the option parser). */
const char *const *action_names(void);

/* The names joined with '|': "none|signal|http|exec|restart|rollout|restart-pod". */
const char *action_names_joined(void);

/* 1 if the action posts Reloaded / ReloadFailed Events on the pod. */
int action_posts_pod_events(enum action a);

/* The actions of mask (ACTION_BIT set) that run: those of the highest
 * strength present. 0 for 0. */
unsigned action_strongest(unsigned mask);

/* Starts action a with p (see action_ops.start): with p->dry_run, done
 * reports success at once without acting. */
void action_start(struct action_env *env, enum action a, const struct action_params *p,
                  action_done done, void *ud);

/* Aborts a's run in flight if a has an abort (see action_ops.abort);
 * returns 1 if it did. */
int action_abort(struct action_env *env, enum action a);

/* Releases every action's state in env (see action_ops.release). */
void action_env_release(struct action_env *env);

/* The pod and workload the rollout resolved (for the pod's Events), or NULL
 * before a successful resolution or without a Kubernetes client. */
const struct owner_info *action_env_owner(const struct action_env *env);

/* ---- internal: the actions' ops and the test seam ---- */

extern const struct action_ops action__none_ops;
extern const struct action_ops action__signal_ops;
extern const struct action_ops action__http_ops;
extern const struct action_ops action__exec_ops;
extern const struct action_ops action__restart_ops;
extern const struct action_ops action__rollout_ops;
extern const struct action_ops action__restart_pod_ops;

/* Tests only: a's row uses ops instead of its own (NULL restores it). */
void action__register_test(enum action a, const struct action_ops *ops);

#endif
