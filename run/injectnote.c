/*
 * injectnote.c - the injector's warnings from reload-agent.io/inject-status,
 * logged and posted as Events at start (injectnote.h).
 */
#include "run/injectnote.h"

#include <cjson/cJSON.h>

#include "base/log.h"
#include "config/config.h"
#include "inject/transform.h"

size_t injectnote_report(const struct annot_set *a, struct kevents *ev, const char *pod,
                         const char *ns)
{
    const struct annot *st = a ? annot_get(a, CFG_ANNOT_INJECT_STATUS) : NULL;
    if (!st) return 0;
    cJSON *j = cJSON_Parse(st->val);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "warnings"), *v;
    if (!cJSON_IsObject(j) || (w && !cJSON_IsArray(w))) {
        log_warn("annotation %s is not the JSON object reload-agent writes: its warnings, if "
                 "any, are not shown",
                 CFG_ANNOT_INJECT_STATUS);
        cJSON_Delete(j);
        return 0;
    }
    size_t n = 0, len = 0;
    char msg[1024] = ""; /* one Event for all: the same reason posts once per 30 s */
    cJSON_ArrayForEach(v, w)
    {
        if (!cJSON_IsString(v) || n >= INJECT_STATUS_MAX_WARNINGS) continue;
        n++;
        struct log_rec r;
        if (log_rec_begin(&r, RA_LOG_WARN, "inject-warning")) {
            log_rec_str(&r, "warning", v->valuestring);
            log_rec_end(&r, "injection: %s", v->valuestring);
        }
        if (len < sizeof msg - 1) {
            int k = snprintf(msg + len, sizeof msg - len, "%s%s", len ? "; " : "", v->valuestring);
            if (k > 0) len = len + (size_t)k >= sizeof msg ? sizeof msg - 1 : len + (size_t)k;
        }
    }
    struct kev_object obj = {"v1", "Pod", pod, ns, NULL};
    if (n && ev && pod && ns) kev_post(ev, &obj, "Warning", "InjectionWarning", msg);
    cJSON_Delete(j);
    return n;
}
