/*
 * curl_dl.h - libcurl, loaded on first use with dlopen.
 *
 * An agent whose actions never make an HTTP request (signal, exec,
 * restart, none) should not map libcurl and the ~20 libraries it pulls in
 * (TLS, Kerberos, LDAP, ...): they cost about 4.4 MiB of resident memory,
 * more than the agent's whole budget. So the binary does not link libcurl;
 * httpc loads "libcurl.so.4" (the Debian libcurl4 package) the first time a
 * client is created and calls it through this table.
 */
#ifndef RA_CURL_DL_H
#define RA_CURL_DL_H

#include <curl/curl.h>
#include <stddef.h>
#include <time.h>

struct curl_dl {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *h, CURLoption o, ...);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO i, ...);
    void (*easy_cleanup)(CURL *h);
    const char *(*easy_strerror)(CURLcode c);
    time_t (*getdate)(const char *s, const time_t *unused);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_setopt)(CURLM *m, CURLMoption o, ...);
    CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
    CURLMcode (*multi_assign)(CURLM *m, curl_socket_t s, void *p);
    CURLMcode (*multi_socket_action)(CURLM *m, curl_socket_t s, int ev, int *running);
    CURLMsg *(*multi_info_read)(CURLM *m, int *left);
    CURLMcode (*multi_cleanup)(CURLM *m);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
};

/* The loaded functions; valid after curl_dl_load() returned 0. */
extern struct curl_dl curl_dl;

/* Loads libcurl once per process and calls curl_global_init. Returns 0,
 * or -ENOENT/-EIO with a message naming the library and dlerror() in err.
 * Later calls return the first result. Call on the loop thread. */
int curl_dl_load(char *err, size_t errlen);

#endif
