/*
 * test_curl_build.c - the libcurl the agent links is the one
 * scripts/build-curl.sh builds (docs/lean.md), not the system's: HTTP and
 * HTTPS only, OpenSSL 3 as its TLS backend, the threaded resolver, IPv6 and
 * HTTPS proxies; and none of the optional libraries Debian's libcurl4 maps
 * (nghttp2, idn2, psl, zlib, brotli, zstd, GSS-API, ssh, rtmp, LDAP). The
 * header the code was compiled with and the library linked agree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

static const curl_version_info_data *info(void)
{
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    assert_non_null(v);
    return v;
}

static void test_header_matches_library(void **state)
{
    (void)state;
    assert_string_equal(info()->version, LIBCURL_VERSION);
    assert_int_equal(info()->version_num, LIBCURL_VERSION_NUM);
}

static void test_http_and_https_only(void **state)
{
    const char *const *p = info()->protocols;
    int http = 0, https = 0, n = 0;

    (void)state;
    for (; *p; p++, n++) {
        if (!strcmp(*p, "http"))
            http = 1;
        else if (!strcmp(*p, "https"))
            https = 1;
        else
            fail_msg("protocol %s is built in", *p);
    }
    assert_int_equal(n, 2);
    assert_true(http && https);
}

static void test_openssl_backend(void **state)
{
    (void)state;
    assert_non_null(info()->ssl_version);
    assert_memory_equal(info()->ssl_version, "OpenSSL/3.", strlen("OpenSSL/3."));
    assert_true(info()->features & CURL_VERSION_SSL);
}

static void test_features_the_agent_needs(void **state)
{
    int f = info()->features;

    (void)state;
    assert_true(f & CURL_VERSION_ASYNCHDNS); /* the threaded resolver: no blocking lookup */
    assert_true(f & CURL_VERSION_IPV6);
    assert_true(f & CURL_VERSION_HTTPS_PROXY);
    assert_true(f & CURL_VERSION_THREADSAFE);
}

static void test_no_optional_libraries(void **state)
{
    const curl_version_info_data *v = info();
    int f = v->features;

    (void)state;
    assert_false(f & CURL_VERSION_HTTP2);
    assert_false(f & CURL_VERSION_HTTP3);
    assert_false(f & CURL_VERSION_IDN);
    assert_false(f & CURL_VERSION_PSL);
    assert_false(f & CURL_VERSION_LIBZ);
    assert_false(f & CURL_VERSION_BROTLI);
    assert_false(f & CURL_VERSION_ZSTD);
    assert_false(f & CURL_VERSION_GSSAPI);
    assert_false(f & CURL_VERSION_KERBEROS5);
    assert_false(f & CURL_VERSION_SPNEGO);
    assert_false(f & CURL_VERSION_NTLM);
    assert_false(f & CURL_VERSION_ALTSVC);
    assert_false(f & CURL_VERSION_HSTS);
    assert_null(v->libz_version);
    assert_null(v->libidn);
    assert_null(v->libssh_version);
    assert_null(v->nghttp2_version);
    assert_null(v->brotli_version);
    assert_null(v->zstd_version);
    assert_null(v->ares);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_matches_library),
        cmocka_unit_test(test_http_and_https_only),
        cmocka_unit_test(test_openssl_backend),
        cmocka_unit_test(test_features_the_agent_needs),
        cmocka_unit_test(test_no_optional_libraries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
