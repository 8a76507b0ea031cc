/*
 * k8sname.c - the Kubernetes name and key rules (contract in k8sname.h),
 * written as the character classes of apimachinery's regular expressions,
 * and the one way a derived name is shortened (k8s_hashed_name).
 */
#include "kube/k8sname.h"

#include <openssl/sha.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

/* s[0..n) matches [a-z0-9]([-a-z0-9]*[a-z0-9])?, or with letter_first
 * [a-z]([-a-z0-9]*[a-z0-9])?. */
static int is_label(const char *s, size_t n, int letter_first)
{
    if (n == 0) return 0;
    if (letter_first ? !(s[0] >= 'a' && s[0] <= 'z') : !is_lower_alnum(s[0])) return 0;
    if (!is_lower_alnum(s[n - 1])) return 0;
    for (size_t i = 1; i + 1 < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-') return 0;
    return 1;
}

/* s is labels joined by '.', each matching is_label, none longer than
 * label_max (0: no limit), and at most K8S_DNS1123_SUBDOMAIN_MAX in all. */
static int is_labels(const char *s, size_t label_max)
{
    if (!s || strlen(s) > K8S_DNS1123_SUBDOMAIN_MAX) return 0;
    for (;;) {
        size_t n = strcspn(s, ".");
        if (!is_label(s, n, 0) || (label_max && n > label_max)) return 0;
        if (!s[n]) return 1;
        s += n + 1;
    }
}

int k8s_is_dns1123_label(const char *s)
{
    return s && strlen(s) <= K8S_DNS1123_LABEL_MAX && is_label(s, strlen(s), 0);
}

int k8s_is_dns1123_subdomain(const char *s) { return is_labels(s, 0); }

int k8s_is_dns1035_label(const char *s)
{
    return s && strlen(s) <= K8S_DNS1035_LABEL_MAX && is_label(s, strlen(s), 1);
}

int k8s_is_dns_name(const char *s) { return is_labels(s, K8S_DNS1123_LABEL_MAX); }

int k8s_is_configmap_key(const char *s)
{
    if (!s) return 0;
    size_t n = strlen(s);
    if (n == 0 || n > K8S_DNS1123_SUBDOMAIN_MAX || strncmp(s, "..", 2) == 0 || strcmp(s, ".") == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

char *k8s_hashed_name(const char *name, size_t max, const char *key, char *out, size_t outsize)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    SHA256((const unsigned char *)key, strlen(key), md);
    size_t cut = strlen(name), keep = max > K8S_HASHED_SUFFIX ? max - K8S_HASHED_SUFFIX : 0;
    if (cut > keep) cut = keep;
    while (cut > 0 && name[cut - 1] == '.') cut--;
    snprintf(out, outsize, "%.*s-%02x%02x%02x%02x", (int)cut, name, md[0], md[1], md[2], md[3]);
    return out;
}
