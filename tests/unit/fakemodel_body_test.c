/*
 * sg-fakemodel's request body scanner (tools/sg-fakemodel/reqbody.c):
 * whether a body asks for OpenAI's usage chunk.  Every body is also fed
 * split at each byte and one byte at a time, and must give the same answer
 * - the scanner sees a body as HTTP/1.1 chunks and HTTP/2 frames cut it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../tools/sg-fakemodel/reqbody.c"

static int feed_whole(const char *b, size_t n) {
    sg_fm_body_scan s;
    memset(&s, 0, sizeof(s));
    sg_fm_body_scan_feed(&s, b, n);
    return sg_fm_body_asks_usage(&s);
}

/* The answer for body @b (n bytes), the same however it is cut. */
static int asks_n(const char *b, size_t n) {
    int whole = feed_whole(b, n);
    for (size_t cut = 0; cut <= n; cut++) {
        sg_fm_body_scan s;
        memset(&s, 0, sizeof(s));
        sg_fm_body_scan_feed(&s, b, cut);
        sg_fm_body_scan_feed(&s, b + cut, n - cut);
        assert_int_equal(sg_fm_body_asks_usage(&s), whole);
    }
    sg_fm_body_scan s;
    memset(&s, 0, sizeof(s));
    for (size_t i = 0; i < n; i++) {
        sg_fm_body_scan_feed(&s, b + i, 1);
    }
    assert_int_equal(sg_fm_body_asks_usage(&s), whole);
    return whole;
}

static int asks(const char *b) {
    return asks_n(b, strlen(b));
}

static void include_usage_true_asks(void **state) {
    (void)state;
    assert_true(
        asks("{\"model\":\"gpt-x\",\"messages\":[{\"role\":\"user\",\"content\":"
             "\"hi\"}],\"stream\":true,\"stream_options\":{\"include_usage\":true}}"));
    assert_true(asks("{\"stream_options\":{\"include_usage\":true},\"stream\":true}"));
    /* whitespace wherever JSON allows it */
    assert_true(
        asks(" \r\n\t{ \"stream_options\" :\n { \"include_usage\" : true } }\n "));
    /* other members of stream_options around it */
    assert_true(asks("{\"stream_options\":{\"a\":[1,{\"b\":null}],\"include_usage\":true,"
                     "\"include_obfuscation\":false}}"));
}

static void no_stream_options_does_not_ask(void **state) {
    (void)state;
    assert_false(asks("{\"model\":\"m\",\"stream\":true}"));
    assert_false(asks("{}"));
    assert_false(asks(""));
    assert_false(asks("{\"stream_options\":{}}"));
    assert_false(asks("{\"stream_options\":null}"));
}

static void only_the_literal_true_asks(void **state) {
    (void)state;
    assert_false(asks("{\"stream_options\":{\"include_usage\":false}}"));
    assert_false(asks("{\"stream_options\":{\"include_usage\":\"true\"}}"));
    assert_false(asks("{\"stream_options\":{\"include_usage\":1}}"));
    assert_false(asks("{\"stream_options\":{\"include_usage\":null}}"));
    assert_false(asks("{\"stream_options\":{\"include_usage\":{\"true\":true}}}"));
    assert_false(asks("{\"stream_options\":{\"include_usage\":[true]}}"));
    assert_false(asks("{\"stream_options\":\"include_usage\"}"));
}

/* The words inside a string, or the key elsewhere than at the top level
 * and inside stream_options, are not the option. */
static void the_option_only_where_it_belongs(void **state) {
    (void)state;
    assert_false(
        asks("{\"messages\":[{\"role\":\"user\",\"content\":\"{\\\"stream_options\\\":"
             " {\\\"include_usage\\\": true}}\"}]}"));
    assert_false(asks("{\"metadata\":{\"stream_options\":{\"include_usage\":true}}}"));
    assert_false(asks("{\"stream_options\":{\"x\":{\"include_usage\":true}}}"));
    assert_false(asks("{\"stream_options\":[{\"include_usage\":true}]}"));
    assert_false(asks("{\"other\":{\"include_usage\":true}}"));
    assert_false(asks("{\"include_usage\":true}"));
    /* the option's object is left: a later include_usage is not in it */
    assert_false(asks("{\"stream_options\":{},\"x\":{\"include_usage\":true}}"));
    assert_false(asks("{\"stream_options_x\":{\"include_usage\":true}}"));
    assert_false(asks("{\"stream_option\":{\"include_usage\":true}}"));
    assert_false(asks("{\"stream_options\xc3\xa9\":{\"include_usage\":true}}"));
}

/* Keys are compared decoded, as a JSON parser reads them. */
static void escaped_keys_are_decoded(void **state) {
    (void)state;
    assert_true(asks("{\"stream\\u005foptions\":{\"include\\u005Fusage\":true}}"));
    assert_true(asks("{\"\\u0073tream_options\":{\"include_usag\\u0065\":true}}"));
    assert_false(asks("{\"stream\\u00e9options\":{\"include_usage\":true}}"));
    assert_false(asks("{\"stream\\noptions\":{\"include_usage\":true}}"));
}

/* A repeated key: the last one counts, as JSON.parse has it. */
static void the_last_of_repeated_keys_counts(void **state) {
    (void)state;
    assert_false(
        asks("{\"stream_options\":{\"include_usage\":true},\"stream_options\":null}"));
    assert_false(asks("{\"stream_options\":{\"include_usage\":true},"
                      "\"stream_options\":{}}"));
    assert_true(
        asks("{\"stream_options\":null,\"stream_options\":{\"include_usage\":true}}"));
    assert_true(
        asks("{\"stream_options\":{\"include_usage\":false,\"include_usage\":true}}"));
    assert_false(
        asks("{\"stream_options\":{\"include_usage\":true,\"include_usage\":false}}"));
}

/* Every other value JSON has, before and after the option. */
static void values_of_every_kind_are_followed(void **state) {
    (void)state;
    assert_true(
        asks("{\"a\":-0.5e+10,\"b\":0,\"c\":1E3,\"d\":[],\"e\":{},\"f\":false,"
             "\"g\":null,\"h\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00ff\",\"i\":[[1],[{}]],"
             "\"stream_options\":{\"include_usage\":true},\"j\":-0,\"k\":12.25e-1}"));
}

/* What is not one whole JSON object asks for nothing. */
static void a_body_that_is_not_json_asks_for_nothing(void **state) {
    (void)state;
    static const char *const bad[] = {
        "{\"stream_options\":{\"include_usage\":true}",    /* cut short */
        "{\"stream_options\":{\"include_usage\":true}}x",  /* trailing bytes */
        "{\"stream_options\":{\"include_usage\":true}}{}", /* two values */
        "[{\"stream_options\":{\"include_usage\":true}}]", /* not an object */
        "{\"stream_options\":{\"include_usage\":tru}}",    /* not a literal */
        "{\"stream_options\":{\"include_usage\":truee}}",
        "{\"stream_options\":{\"include_usage\":true,}}",         /* trailing comma */
        "{\"stream_options\":{\"include_usage\":true]}",          /* wrong closer */
        "{\"a\":01,\"stream_options\":{\"include_usage\":true}}", /* leading zero */
        "{\"a\":-,\"stream_options\":{\"include_usage\":true}}",
        "{\"a\":1.,\"stream_options\":{\"include_usage\":true}}",
        "{\"a\":1e,\"stream_options\":{\"include_usage\":true}}",
        "{\"a\":+1,\"stream_options\":{\"include_usage\":true}}",
        "{\"a\":[1,],\"stream_options\":{\"include_usage\":true}}",
        "{\"a\":\"\\x\",\"stream_options\":{\"include_usage\":true}}", /* bad escape */
        "{\"a\":\"\\u12g4\",\"stream_options\":{\"include_usage\":true}}",
        "{\"a\":\"tab\there\",\"stream_options\":{\"include_usage\":true}}", /* control */
        "{\"a\" 1,\"stream_options\":{\"include_usage\":true}}", /* no colon */
        "{\"stream_options\":{\"include_usage\":true}}}",
        "{,\"stream_options\":{\"include_usage\":true}}",
        "{\"stream_options\"::{\"include_usage\":true}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (asks(bad[i])) {
            fail_msg("asked for usage: %s", bad[i]);
        }
    }
    /* a NUL byte is not JSON either */
    static const char nul[] =
        "{\"a\":\"x\0y\",\"stream_options\":{\"include_usage\":true}}";
    assert_false(asks_n(nul, sizeof(nul) - 1));
}

/* Nesting is followed to SG_FM_BODY_MAX_DEPTH levels; deeper, nothing. */
static void nesting_deeper_than_the_limit_asks_for_nothing(void **state) {
    (void)state;
    static const char opt[] = ",\"stream_options\":{\"include_usage\":true}}";
    for (int extra = 0; extra <= 1; extra++) {
        /* the top-level object is one level: the array adds the rest */
        size_t levels = SG_FM_BODY_MAX_DEPTH - 1 + (size_t)extra;
        size_t n = 5 + 2 * levels + sizeof(opt) - 1;
        char *b = malloc(n + 1);
        assert_non_null(b);
        memcpy(b, "{\"a\":", 5);
        memset(b + 5, '[', levels);
        memset(b + 5 + levels, ']', levels);
        memcpy(b + 5 + 2 * levels, opt, sizeof(opt));
        assert_int_equal(feed_whole(b, n), !extra);
        free(b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(include_usage_true_asks),
        cmocka_unit_test(no_stream_options_does_not_ask),
        cmocka_unit_test(only_the_literal_true_asks),
        cmocka_unit_test(the_option_only_where_it_belongs),
        cmocka_unit_test(escaped_keys_are_decoded),
        cmocka_unit_test(the_last_of_repeated_keys_counts),
        cmocka_unit_test(values_of_every_kind_are_followed),
        cmocka_unit_test(a_body_that_is_not_json_asks_for_nothing),
        cmocka_unit_test(nesting_deeper_than_the_limit_asks_for_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
