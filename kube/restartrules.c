/*
 * restartrules.c - a container's restartPolicyRules: the shape the API
 * accepts, and the first-match verdict for an exit code (restartrules.h).
 */
#include "kube/restartrules.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* The reason, naming rule i (-1: the list itself). Returns -EINVAL. */
static int bad(char *why, size_t n, int i, const char *msg)
{
    if (i >= 0)
        snprintf(why, n, "rule [%d]: %s", i, msg);
    else
        snprintf(why, n, "%s", msg);
    return -EINVAL;
}

/* 1 if every key of o is one of names (NULL-terminated); else the first
 * unknown key in *unknown. */
static int only_keys(const cJSON *o, const char *const *names, const char **unknown)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, o)
    {
        int known = 0;
        for (const char *const *p = names; *p && !known; p++) known = strcmp(k->string, *p) == 0;
        if (!known) {
            *unknown = k->string;
            return 0;
        }
    }
    return 1;
}

/* Checks rule i; on success *all says whether its action is
 * RestartAllContainers and *in whether its operator is In. */
static int check_rule(const cJSON *r, int i, int *all, int *in, char *why, size_t n)
{
    static const char *const RULE_KEYS[] = {"action", "exitCodes", NULL};
    static const char *const CODE_KEYS[] = {"operator", "values", NULL};
    const char *unknown;
    if (!cJSON_IsObject(r)) return bad(why, n, i, "not an object");
    if (!only_keys(r, RULE_KEYS, &unknown)) {
        char m[160];
        snprintf(m, sizeof m,
                 "unknown key \"%.60s\" (a rule has action and exitCodes; there is "
                 "no onExit wrapper)",
                 unknown);
        return bad(why, n, i, m);
    }
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(r, "action");
    if (!cJSON_IsString(a) || (strcmp(a->valuestring, "Restart") != 0 &&
                               strcmp(a->valuestring, "RestartAllContainers") != 0))
        return bad(why, n, i, "action must be Restart or RestartAllContainers");
    *all = strcmp(a->valuestring, "RestartAllContainers") == 0;
    const cJSON *ec = cJSON_GetObjectItemCaseSensitive(r, "exitCodes");
    if (!cJSON_IsObject(ec)) return bad(why, n, i, "exitCodes must be an object");
    if (!only_keys(ec, CODE_KEYS, &unknown)) {
        char m[120];
        snprintf(m, sizeof m, "exitCodes: unknown key \"%.60s\"", unknown);
        return bad(why, n, i, m);
    }
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(ec, "operator");
    if (!cJSON_IsString(op) ||
        (strcmp(op->valuestring, "In") != 0 && strcmp(op->valuestring, "NotIn") != 0))
        return bad(why, n, i, "exitCodes.operator must be In or NotIn");
    *in = strcmp(op->valuestring, "In") == 0;
    const cJSON *vals = cJSON_GetObjectItemCaseSensitive(ec, "values"), *v;
    if (!cJSON_IsArray(vals)) return bad(why, n, i, "exitCodes.values must be a list");
    if (cJSON_GetArraySize(vals) > RESTARTRULES_MAX_VALUES)
        return bad(why, n, i, "exitCodes.values holds more than 255 codes");
    cJSON_ArrayForEach(v, vals)
    {
        double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
        if (!cJSON_IsNumber(v) || d != floor(d) || d < 0 || d > 255)
            return bad(why, n, i, "exitCodes.values must be whole numbers 0 to 255");
    }
    return 0;
}

/* Parses json into *out (a list). 0, or -EINVAL with why. */
static int parse(const char *json, cJSON **out, char *why, size_t n)
{
    cJSON *j = json ? cJSON_Parse(json) : NULL;
    *out = NULL;
    if (!j)
        return bad(why, n, -1,
                   "not valid JSON (want a list such as [{\"action\":"
                   "\"RestartAllContainers\",\"exitCodes\":{\"operator\":"
                   "\"In\",\"values\":[88]}}])");
    if (!cJSON_IsArray(j)) {
        cJSON_Delete(j);
        return bad(why, n, -1, "not a list of rules");
    }
    if (cJSON_GetArraySize(j) > RESTARTRULES_MAX_RULES) {
        cJSON_Delete(j);
        return bad(why, n, -1, "more than 20 rules");
    }
    const cJSON *r;
    int i = 0, all, in;
    cJSON_ArrayForEach(r, j)
    {
        if (check_rule(r, i++, &all, &in, why, n) < 0) {
            cJSON_Delete(j);
            return -EINVAL;
        }
    }
    *out = j;
    return 0;
}

int restartrules_check(const char *json, char *why, size_t n)
{
    cJSON *j;
    int rc = parse(json, &j, why, n);
    cJSON_Delete(j);
    return rc;
}

static int has_code(const cJSON *vals, int code)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, vals) if ((int)v->valuedouble == code) return 1;
    return 0;
}

int restartrules_verdict(const char *json, int code, char *why, size_t n)
{
    cJSON *j;
    if (parse(json, &j, why, n) < 0) return -EINVAL;
    const cJSON *r;
    int i = 0, verdict = RESTARTRULES_NO_MATCH;
    cJSON_ArrayForEach(r, j)
    {
        int all = 0, in = 0;
        char ignore[256];
        check_rule(r, i, &all, &in, ignore, sizeof ignore);
        const cJSON *ec = cJSON_GetObjectItemCaseSensitive(r, "exitCodes");
        int hit = has_code(cJSON_GetObjectItemCaseSensitive(ec, "values"), code);
        if (in ? hit : !hit) {
            verdict = all ? RESTARTRULES_RESTART_ALL : RESTARTRULES_RESTART;
            if (!all)
                snprintf(why, n,
                         "rule [%d] (action Restart) is the first to match exit code %d (the "
                         "container alone would restart)",
                         i, code);
            break;
        }
        i++;
    }
    if (verdict == RESTARTRULES_NO_MATCH)
        snprintf(why, n,
                 "no rule matches exit code %d (the container's restartPolicy applies: it "
                 "alone would restart)",
                 code);
    cJSON_Delete(j);
    return verdict;
}

void restartrules_for_code(int code, char *out, size_t n)
{
    snprintf(out, n,
             "[{\"action\":\"RestartAllContainers\",\"exitCodes\":{\"operator\":\"In\","
             "\"values\":[%d]}}]",
             code);
}
