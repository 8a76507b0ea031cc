/*
 * curl_dl.c - dlopen of libcurl on first use (see curl_dl.h).
 */
#include "net/curl_dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define CURL_SONAME "libcurl.so.4"

struct curl_dl curl_dl;

static struct {
    int done;
    int rc;
    char err[512];
} g_load;

/* Resolves one symbol into *slot. Returns 0 or -EIO. */
static int sym(void *lib, const char *name, void *slot)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(g_load.err, sizeof g_load.err, "%s lacks %s: %s", CURL_SONAME, name, dlerror());
        return -EIO;
    }
    memcpy(slot, &p, sizeof p); /* object pointer -> function pointer, as POSIX allows */
    return 0;
}

static int load(void)
{
    void *lib = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(g_load.err, sizeof g_load.err,
                 "cannot load %s (Debian package libcurl4), needed for HTTP requests: %s",
                 CURL_SONAME, dlerror());
        return -ENOENT;
    }
    struct {
        const char *name;
        void *slot;
    } syms[] = {
        {"curl_global_init", &curl_dl.global_init},
        {"curl_easy_init", &curl_dl.easy_init},
        {"curl_easy_setopt", &curl_dl.easy_setopt},
        {"curl_easy_getinfo", &curl_dl.easy_getinfo},
        {"curl_easy_cleanup", &curl_dl.easy_cleanup},
        {"curl_easy_strerror", &curl_dl.easy_strerror},
        {"curl_getdate", &curl_dl.getdate},
        {"curl_multi_init", &curl_dl.multi_init},
        {"curl_multi_setopt", &curl_dl.multi_setopt},
        {"curl_multi_add_handle", &curl_dl.multi_add_handle},
        {"curl_multi_remove_handle", &curl_dl.multi_remove_handle},
        {"curl_multi_assign", &curl_dl.multi_assign},
        {"curl_multi_socket_action", &curl_dl.multi_socket_action},
        {"curl_multi_info_read", &curl_dl.multi_info_read},
        {"curl_multi_cleanup", &curl_dl.multi_cleanup},
        {"curl_slist_append", &curl_dl.slist_append},
        {"curl_slist_free_all", &curl_dl.slist_free_all},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (sym(lib, syms[i].name, syms[i].slot) < 0) return -EIO;
    if (curl_dl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(g_load.err, sizeof g_load.err, "curl_global_init failed");
        return -EIO;
    }
    return 0; /* the library stays loaded for the life of the process */
}

int curl_dl_load(char *err, size_t errlen)
{
    if (!g_load.done) {
        g_load.rc = load();
        g_load.done = 1;
    }
    if (g_load.rc < 0 && err) snprintf(err, errlen, "%s", g_load.err);
    return g_load.rc;
}
