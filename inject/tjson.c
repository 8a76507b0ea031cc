/*
 * tjson.c - the transform's JSON helpers (transform_int.h): typed reads
 * that name the path of a field of the wrong type, warnings, builders that
 * record OOM in the context instead of failing at each call, and the
 * annotation set the agent would read. Internal names of the inject/
 * folder carry the prefix inject__.
 */
#include "inject/transform_int.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "config/config.h"

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an invalid value";
}

int inject__type_error(struct inject__ctx *x, const char *path, const char *want, const cJSON *got)
{
    if (x->errlen) snprintf(x->err, x->errlen, "%s: want %s, got %s", path, want, type_name(got));
    return -EINVAL;
}

/* The member key of obj, or NULL when absent or JSON null. */
static const cJSON *lookup(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNull(v) ? NULL : v;
}

/* The type error of member key of obj at path: "PATH.key: want ...". The
 * path is only built here, for an error (the getters run for every field). */
static int member_error(struct inject__ctx *x, const char *path, const char *key, const char *want,
                        const cJSON *got)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s%s", path, *path ? "." : "", key);
    return inject__type_error(x, full, want, got);
}

int inject__get_obj(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                    const cJSON **out)
{
    const cJSON *v = lookup(obj, key);
    *out = NULL;
    if (v && !cJSON_IsObject(v)) return member_error(x, path, key, "an object", v);
    *out = v;
    return 0;
}

int inject__get_arr(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                    const cJSON **out)
{
    const cJSON *v = lookup(obj, key);
    *out = NULL;
    if (v && !cJSON_IsArray(v)) return member_error(x, path, key, "an array", v);
    *out = v;
    return 0;
}

int inject__get_str(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                    const char **out)
{
    const cJSON *v = lookup(obj, key);
    *out = NULL;
    if (v && !cJSON_IsString(v)) return member_error(x, path, key, "a string", v);
    if (v) *out = v->valuestring;
    return 0;
}

int inject__get_bool(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                     int *out)
{
    const cJSON *v = lookup(obj, key);
    *out = -1;
    if (v && !cJSON_IsBool(v)) return member_error(x, path, key, "a boolean", v);
    if (v) *out = cJSON_IsTrue(v);
    return 0;
}

int inject__get_id(struct inject__ctx *x, const cJSON *obj, const char *path, const char *key,
                   long *out)
{
    const cJSON *v = lookup(obj, key);
    *out = -1;
    if (!v) return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!cJSON_IsNumber(v) || !(d >= 0 && d <= 2147483647.0) || floor(d) != d)
        return member_error(x, path, key, "an integer 0..2147483647", v);
    *out = (long)d;
    return 0;
}

void inject__vpush(struct inject__ctx *x, char ***list, size_t *n, size_t max, const char *fmt,
                   va_list ap)
{
    char buf[1024];
    size_t cap = max < sizeof buf ? max : sizeof buf;
    vsnprintf(buf, cap, fmt, ap);
    ra_one_line_fix(buf, cap);
    char **nv = realloc(*list, (*n + 1) * sizeof *nv);
    char *copy = strdup(buf);
    if (!nv || !copy) {
        if (nv) *list = nv;
        free(copy);
        x->oom = 1;
        return;
    }
    *list = nv;
    (*list)[(*n)++] = copy;
}

void inject__warn(struct inject__ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    inject__vpush(x, &x->warnings, &x->nwarnings, 512, fmt, ap);
    va_end(ap);
}

char *inject__printf(struct inject__ctx *x, const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        x->oom = 1;
        return NULL;
    }
    return s;
}

cJSON *inject__str(struct inject__ctx *x, const char *s)
{
    cJSON *v = s ? cJSON_CreateString(s) : NULL;
    if (!v) x->oom = 1;
    return v;
}

cJSON *inject__new_obj(struct inject__ctx *x)
{
    cJSON *v = cJSON_CreateObject();
    if (!v) x->oom = 1;
    return v;
}

cJSON *inject__new_arr(struct inject__ctx *x)
{
    cJSON *v = cJSON_CreateArray();
    if (!v) x->oom = 1;
    return v;
}

void inject__add(struct inject__ctx *x, cJSON *obj, const char *key, cJSON *item)
{
    if (!obj || !item) {
        cJSON_Delete(item);
        x->oom = 1;
        return;
    }
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        x->oom = 1;
    }
}

void inject__push(struct inject__ctx *x, cJSON *arr, cJSON *item)
{
    if (!arr || !item) {
        cJSON_Delete(item);
        x->oom = 1;
        return;
    }
    cJSON_AddItemToArray(arr, item);
}

void inject__op(struct inject__ctx *x, cJSON *ops, const char *op, const char *path, cJSON *value)
{
    cJSON *o = inject__new_obj(x);
    inject__add(x, o, "op", inject__str(x, op));
    inject__add(x, o, "path", inject__str(x, path));
    if (value) inject__add(x, o, "value", value);
    inject__push(x, ops, o);
}

static int cmp_annot(const void *a, const void *b)
{
    return strcmp(((const struct annot *)a)->key, ((const struct annot *)b)->key);
}

int inject_annot_set(const cJSON *map, struct annot_set *set)
{
    const cJSON *a;
    size_t n = 0;
    set->v = calloc((size_t)cJSON_GetArraySize(map) + 1, sizeof *set->v);
    set->n = 0;
    if (!set->v) return -ENOMEM;
    cJSON_ArrayForEach(a, map)
    {
        if (!a->string || !cJSON_IsString(a) ||
            strncmp(a->string, CFG_ANNOTATION_PREFIX, strlen(CFG_ANNOTATION_PREFIX)) != 0)
            continue;
        if (cJSON_GetObjectItemCaseSensitive(map, a->string) != a) continue; /* a dup */
        set->v[n].key = a->string;
        set->v[n].val = a->valuestring;
        set->v[n].vlen = strlen(a->valuestring);
        n++;
    }
    set->n = n;
    qsort(set->v, n, sizeof *set->v, cmp_annot);
    return 0;
}
