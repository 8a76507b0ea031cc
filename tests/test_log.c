/*
 * test_log.c - the logger (base/log.c) in both formats: bytes that are not
 * UTF-8 and control characters are escaped in field values and in the
 * message, a value cannot forge a second line, levels filter, and every JSON
 * line parses back (cJSON) to the values that were logged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "base/log.h"

/* The output of the records written since the last capture_start. */
static FILE *g_tf;

static void capture_start(enum log_level min, enum log_format fmt)
{
    if (g_tf) fclose(g_tf);
    g_tf = tmpfile();
    assert_non_null(g_tf);
    log_set_fd(fileno(g_tf));
    log_configure(min, fmt);
}

/* Returns what was written (malloc'd, NUL-terminated); *n its length. */
static char *capture_end(size_t *n)
{
    long len = lseek(fileno(g_tf), 0, SEEK_CUR);
    assert_true(len >= 0);
    char *buf = calloc(1, (size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(pread(fileno(g_tf), buf, (size_t)len, 0), len);
    log_set_fd(2);
    log_configure(RA_LOG_INFO, RA_LOG_FORMAT_TEXT);
    fclose(g_tf);
    g_tf = NULL;
    if (n) *n = (size_t)len;
    return buf;
}

static size_t count_char(const char *s, size_t n, char c)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == c;
    return k;
}

/* No byte of out is a control character other than the final newline, and
 * none is a raw byte >= 0x80 unless it is part of valid UTF-8 that is not a
 * C1 control or a line/paragraph separator. */
static void assert_clean_line(const char *out, size_t n)
{
    assert_true(n > 0);
    assert_int_equal(out[n - 1], '\n');
    assert_int_equal(count_char(out, n, '\n'), 1);
    for (size_t i = 0; i + 1 < n; i++) {
        unsigned char c = (unsigned char)out[i];
        if (c < 0x20 || c == 0x7f) fail_msg("control byte 0x%02x at %zu in %s", c, i, out);
        if (c == 0xff || c == 0xfe || c == 0xc0 || c == 0xc1)
            fail_msg("invalid UTF-8 byte 0x%02x at %zu in %s", c, i, out);
        if (c == 0xc2 && i + 1 < n && (unsigned char)out[i + 1] >= 0x80 &&
            (unsigned char)out[i + 1] <= 0x9f)
            fail_msg("raw C1 control at %zu in %s", i, out);
        if (c == 0xe2 && i + 2 < n && (unsigned char)out[i + 1] == 0x80 &&
            ((unsigned char)out[i + 2] == 0xa8 || (unsigned char)out[i + 2] == 0xa9))
            fail_msg("raw line/paragraph separator at %zu in %s", i, out);
    }
}

static void test_text_invalid_utf8_is_hex_escaped(void **state)
{
    (void)state;
    struct log_rec r;
    size_t n;
    capture_start(RA_LOG_DEBUG, RA_LOG_FORMAT_TEXT);
    assert_true(log_rec_begin(&r, RA_LOG_INFO, "change"));
    log_rec_str(&r, "path", "/v/caf\xe9.conf"); /* Latin-1 e-acute */
    log_rec_strn(&r, "raw",
                 "a\xff\xfe"
                 "b",
                 4);
    const char *paths[] = {"ok.conf", "bad\xc0\xaf.conf", "\xe6\x97\xa5.conf"};
    log_rec_strv(&r, "modified", paths, 3);
    log_rec_end(&r, "changed %s", "/v/caf\xe9.conf");
    char *out = capture_end(&n);
    assert_clean_line(out, n);
    assert_non_null(strstr(out, "] changed /v/caf\\xe9.conf "));
    assert_non_null(strstr(out, " path=\"/v/caf\\\\xe9.conf\""));
    assert_non_null(strstr(out, " raw=\"a\\\\xff\\\\xfeb\""));
    /* Valid UTF-8 stays as it is, unquoted when nothing else needs quoting. */
    assert_non_null(
        strstr(out, " modified=[ok.conf,\"bad\\\\xc0\\\\xaf.conf\",\xe6\x97\xa5.conf]"));
    free(out);
}

static void test_json_invalid_utf8_parses_back_as_hex_text(void **state)
{
    (void)state;
    struct log_rec r;
    size_t n;
    capture_start(RA_LOG_DEBUG, RA_LOG_FORMAT_JSON);
    assert_true(log_rec_begin(&r, RA_LOG_WARN, "hash-error"));
    log_rec_str(&r, "path", "/v/caf\xe9.conf");
    log_rec_end(&r, "cannot read /v/caf\xe9.conf");
    char *out = capture_end(&n);
    assert_clean_line(out, n);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "path")->valuestring, "/v/caf\\xe9.conf");
    assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "cannot read /v/caf\\xe9.conf");
    cJSON_Delete(j);
    free(out);
}

static void test_control_characters_are_escaped(void **state)
{
    (void)state;
    static const char nasty[] = "a\x01"
                                "b\x1b[31mred\x7f"
                                "c\td\re\xc2\x85"
                                "f\xe2\x80\xa8g";
    for (int fmt = 0; fmt < 2; fmt++) {
        struct log_rec r;
        size_t n;
        capture_start(RA_LOG_DEBUG, (enum log_format)fmt);
        assert_true(log_rec_begin(&r, RA_LOG_ERROR, "config-error"));
        log_rec_str(&r, "error", nasty);
        log_rec_end(&r, "rejected: %s", nasty);
        char *out = capture_end(&n);
        assert_clean_line(out, n);
        if (fmt == RA_LOG_FORMAT_TEXT) {
            assert_non_null(
                strstr(out, "rejected: a\\x01b\\x1b[31mred\\x7fc\\td\\re\\u0085f\\u2028g "));
            assert_non_null(
                strstr(out, " error=\"a\\u0001b\\u001b[31mred\\u007fc\\td\\re\\u0085f\\u2028g\""));
        } else {
            cJSON *j = cJSON_Parse(out);
            assert_non_null(j);
            assert_string_equal(cJSON_GetObjectItem(j, "error")->valuestring, nasty);
            cJSON_Delete(j);
        }
        free(out);
    }
}

/* A value that imitates a whole log line after a newline: the record stays
 * one line, in the message and in a field, in both formats. */
static void test_forged_line_stays_one_line(void **state)
{
    (void)state;
    static const char forged[] =
        "5x\n2026-12-03T00:00:00.000Z info  [action] forged action=exec result=success\n"
        "{\"time\":\"2026-12-03T00:00:00.000Z\",\"level\":\"info\",\"event\":\"action\"}\r\n";
    for (int fmt = 0; fmt < 2; fmt++) {
        struct log_rec r;
        size_t n;
        capture_start(RA_LOG_DEBUG, (enum log_format)fmt);
        assert_true(log_rec_begin(&r, RA_LOG_ERROR, "config-error"));
        log_rec_str(&r, "error", forged);
        log_rec_end(&r, "invalid value for --debounce: \"%s\"", forged);
        log_msg(RA_LOG_WARN, "plain %s", forged);
        char *out = capture_end(&n);
        assert_int_equal(count_char(out, n, '\n'), 2); /* two records, two lines */
        char *second = strchr(out, '\n') + 1;
        assert_clean_line(out, (size_t)(second - out));
        assert_clean_line(second, n - (size_t)(second - out));
        assert_null(strstr(out, "\n2026-12-03T00:00:00.000Z info"));
        assert_null(strstr(out, "\n{\"time\":\"2026-12-03T00:00:00.000Z\""));
        if (fmt == RA_LOG_FORMAT_JSON) {
            cJSON *j = cJSON_Parse(out);
            assert_non_null(j);
            assert_string_equal(cJSON_GetObjectItem(j, "error")->valuestring, forged);
            cJSON_Delete(j);
        }
        free(out);
    }
}

static void test_level_filtering(void **state)
{
    (void)state;
    struct log_rec r;
    size_t n;
    capture_start(RA_LOG_WARN, RA_LOG_FORMAT_TEXT);
    assert_false(log_is_enabled(RA_LOG_DEBUG));
    assert_false(log_is_enabled(RA_LOG_INFO));
    assert_true(log_is_enabled(RA_LOG_WARN));
    assert_true(log_is_enabled(RA_LOG_ERROR));
    assert_false(log_rec_begin(&r, RA_LOG_INFO, "skipped"));
    log_rec_str(&r, "k", "v"); /* no-ops on an inactive record */
    log_rec_end(&r, "never %s", "written");
    log_debug("debug %d", 1);
    log_info("info %d", 2);
    log_warn("warn %d", 3);
    log_error("error %d", 4);
    char *out = capture_end(&n);
    assert_int_equal(count_char(out, n, '\n'), 2);
    assert_null(strstr(out, "never"));
    assert_null(strstr(out, "debug 1"));
    assert_null(strstr(out, "info 2"));
    assert_non_null(strstr(out, " warn  warn 3\n"));
    assert_non_null(strstr(out, " error error 4\n"));
    free(out);
}

static void test_json_line_is_valid_and_complete(void **state)
{
    (void)state;
    struct log_rec r;
    size_t n;
    capture_start(RA_LOG_DEBUG, RA_LOG_FORMAT_JSON);
    assert_true(log_rec_begin(&r, RA_LOG_INFO, "action"));
    log_rec_str(&r, "action", "exec");
    log_rec_int(&r, "attempt", -3);
    log_rec_num(&r, "ratio", 0.5);
    log_rec_bool(&r, "dry_run", 1);
    log_rec_str(&r, "quote", "say \"hi\" \\ back");
    const char *v[] = {"a", "b\nc", "\xff"};
    log_rec_strv(&r, "files", v, 3);
    log_rec_end(&r, "done in %d ms", 12);
    char *out = capture_end(&n);
    assert_clean_line(out, n);
    cJSON *j = cJSON_Parse(out);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "level")->valuestring, "info");
    assert_string_equal(cJSON_GetObjectItem(j, "event")->valuestring, "action");
    assert_string_equal(cJSON_GetObjectItem(j, "msg")->valuestring, "done in 12 ms");
    assert_true(cJSON_IsString(cJSON_GetObjectItem(j, "time")));
    assert_string_equal(cJSON_GetObjectItem(j, "action")->valuestring, "exec");
    assert_int_equal(cJSON_GetObjectItem(j, "attempt")->valueint, -3);
    assert_true(cJSON_GetObjectItem(j, "ratio")->valuedouble == 0.5);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "dry_run")));
    assert_string_equal(cJSON_GetObjectItem(j, "quote")->valuestring, "say \"hi\" \\ back");
    cJSON *files = cJSON_GetObjectItem(j, "files");
    assert_int_equal(cJSON_GetArraySize(files), 3);
    assert_string_equal(cJSON_GetArrayItem(files, 1)->valuestring, "b\nc");
    assert_string_equal(cJSON_GetArrayItem(files, 2)->valuestring, "\\xff");
    cJSON_Delete(j);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_invalid_utf8_is_hex_escaped),
        cmocka_unit_test(test_json_invalid_utf8_parses_back_as_hex_text),
        cmocka_unit_test(test_control_characters_are_escaped),
        cmocka_unit_test(test_forged_line_stays_one_line),
        cmocka_unit_test(test_level_filtering),
        cmocka_unit_test(test_json_line_is_valid_and_complete),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
