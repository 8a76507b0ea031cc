/*
 * test_redact.c - credentials out of messages (base/redact.h): URL userinfo,
 * query values and fragments, header values, secrets quoted inside another
 * message, and truncation into small buffers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/redact.h"

static void url_is(const char *in, const char *want)
{
    char out[512];
    size_t n = redact_url(in, out, sizeof out);
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void test_url(void **s)
{
    (void)s;
    url_is("http://127.0.0.1:9090/-/reload", "http://127.0.0.1:9090/-/reload");
    url_is("http://bob:pw@127.0.0.1:9090/-/reload", "http://<redacted>@127.0.0.1:9090/-/reload");
    url_is("https://tok@h/", "https://<redacted>@h/");
    url_is("http://h/r?token=abc", "http://h/r?token=<redacted>");
    url_is("http://h/r?token=abc&x=1&flag", "http://h/r?token=<redacted>&x=<redacted>&flag");
    url_is("http://u:p@h:1/a?b=c#frag", "http://<redacted>@h:1/a?b=<redacted>#<redacted>");
    url_is("http://h?k=v", "http://h?k=<redacted>");
    url_is("http://h/p#only", "http://h/p#<redacted>");
    /* an '@' in the path is not userinfo; the last '@' of the authority is */
    url_is("http://h/a@b", "http://h/a@b");
    url_is("http://a@b:c@h/", "http://<redacted>@h/");
    url_is("", "");
    url_is(NULL, "");
    /* not a URL: redacted as one would be */
    url_is("ftp://bob:pw@h/?t=1", "ftp://<redacted>@h/?t=<redacted>");
    url_is("bob:pw@h", "<redacted>@h");
}

static void test_header(void **s)
{
    (void)s;
    char out[128];
    assert_int_equal(redact_header("Authorization: Bearer abc", out, sizeof out),
                     strlen("Authorization: <redacted>"));
    assert_string_equal(out, "Authorization: <redacted>");
    redact_header("X-Token:abc", out, sizeof out);
    assert_string_equal(out, "X-Token: <redacted>");
    redact_header("no colon here", out, sizeof out);
    assert_string_equal(out, "<redacted>");
    redact_header(NULL, out, sizeof out);
    assert_string_equal(out, "<redacted>");
}

static void test_text(void **s)
{
    (void)s;
    char out[512];
    const char *url = "http://bob:pw99@h:1/r?token=t0k";
    redact_text("Failed to connect to h port 1", url, out, sizeof out);
    assert_string_equal(out, "Failed to connect to h port 1");
    redact_text("URL rejected: http://bob:pw99@h:1/r?token=t0k is bad", url, out, sizeof out);
    assert_string_equal(out, "URL rejected: http://<redacted>@h:1/r?token=<redacted> is bad");
    redact_text("login bob:pw99 refused", url, out, sizeof out);
    assert_string_equal(out, "login <redacted> refused");
    redact_text("query ?token=t0k", url, out, sizeof out);
    assert_string_equal(out, "query ?<redacted>");
    redact_text("no url", NULL, out, sizeof out);
    assert_string_equal(out, "no url");
}

static void test_truncation(void **s)
{
    (void)s;
    char out[12];
    memset(out, 'X', sizeof out);
    size_t n = redact_url("http://bob:pw@host/path?q=1", out, sizeof out);
    assert_int_equal(n, strlen("http://<redacted>@host/path?q=<redacted>"));
    assert_int_equal(strlen(out), sizeof out - 1);
    assert_memory_equal(out, "http://<red", 11);
    /* a prefix of the redacted form: never a prefix of the secret */
    assert_null(strstr(out, "pw"));
    char one[1] = {'X'};
    redact_header("A: b", one, 1);
    assert_int_equal(one[0], '\0');
    assert_int_equal(redact_url("http://h", NULL, 0), strlen("http://h"));
}

/* A chat webhook's URL is its secret: only scheme://host[:port] stays. */
static void test_origin(void **s)
{
    (void)s;
    char out[512];
    redact_url_origin("https://hooks.slack.com/services/T0/B0/XyZ", out, sizeof out);
    assert_string_equal(out, "https://hooks.slack.com/<redacted>");
    redact_url_origin("http://u:pw@127.0.0.1:8080/hook?k=v#f", out, sizeof out);
    assert_string_equal(out, "http://127.0.0.1:8080/<redacted>");
    redact_url_origin("http://h:1", out, sizeof out);
    assert_string_equal(out, "http://h:1");
    redact_url_origin("http://h/", out, sizeof out);
    assert_string_equal(out, "http://h");
    redact_url_origin("http://h?token=1", out, sizeof out);
    assert_string_equal(out, "http://h/<redacted>");
    redact_url_origin(NULL, out, sizeof out);
    assert_string_equal(out, "");
    const char *u = "https://chat.googleapis.com/v1/spaces/AAA/messages?key=K&token=T";
    redact_text_origin("POST https://chat.googleapis.com/v1/spaces/AAA/messages?key=K&token=T "
                       "failed; path /v1/spaces/AAA/messages?key=K&token=T",
                       u, out, sizeof out);
    assert_string_equal(out,
                        "POST https://chat.googleapis.com/<redacted> failed; path /<redacted>");
    assert_null(strstr(out, "AAA"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url),    cmocka_unit_test(test_header),
        cmocka_unit_test(test_text),   cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_origin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
