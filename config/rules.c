/*
 * rules.c - the path -> action decision as one immutable value (see
 * rules.h). Its matching is the only fnmatch(3) of the program.
 */
#include "config/rules.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

void path_rules_init(struct path_rules *r, int dflt)
{
    memset(r, 0, sizeof *r);
    r->dflt = dflt;
}

void path_rules_add_ignore(struct path_rules *r, const char *glob)
{
    char **v = realloc(r->ignore, (r->nignore + 1) * sizeof *v);
    if (!v) ra_oom();
    r->ignore = v;
    r->ignore[r->nignore++] = ra_strdup(glob);
}

static void add_rule(struct path_rules *r, const char *glob, int root, int action)
{
    struct path_rule *v = realloc(r->v, (r->n + 1) * sizeof *v);
    if (!v) ra_oom();
    r->v = v;
    r->v[r->n++] = (struct path_rule){ra_strdup(glob), root, action};
}

void path_rules_add_root(struct path_rules *r, const char *root, int action)
{
    add_rule(r, root, 1, action);
}

void path_rules_add_glob(struct path_rules *r, const char *glob, int action)
{
    add_rule(r, glob, 0, action);
}

void path_rules_copy(struct path_rules *dst, const struct path_rules *src)
{
    path_rules_init(dst, src->dflt);
    for (size_t i = 0; i < src->nignore; i++) path_rules_add_ignore(dst, src->ignore[i]);
    for (size_t i = 0; i < src->n; i++)
        add_rule(dst, src->v[i].glob, src->v[i].root, src->v[i].action);
}

void path_rules_free(struct path_rules *r)
{
    for (size_t i = 0; i < r->nignore; i++) free(r->ignore[i]);
    for (size_t i = 0; i < r->n; i++) free(r->v[i].glob);
    free(r->ignore);
    free(r->v);
    path_rules_init(r, 0);
}

int path_rules_is_under(const char *root, const char *path)
{
    size_t l = strlen(root);
    while (l > 0 && root[l - 1] == '/') l--;
    return strncmp(path, root, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

int path_rules_is_ignored(const struct path_rules *r, const char *path)
{
    for (size_t i = 0; i < r->nignore; i++)
        if (fnmatch(r->ignore[i], path, 0) == 0) return 1;
    return 0;
}

int path_rules_action(const struct path_rules *r, const char *path)
{
    if (path_rules_is_ignored(r, path)) return PATH_RULES_IGNORED;
    for (size_t i = 0; i < r->n; i++) {
        const struct path_rule *u = &r->v[i];
        if (u->root ? path_rules_is_under(u->glob, path) : fnmatch(u->glob, path, 0) == 0)
            return u->action;
    }
    return r->dflt;
}
