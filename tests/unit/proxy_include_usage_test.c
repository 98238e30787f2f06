/*
 * sg-proxy's include-usage (tools/common/include_usage.c): which
 * request bodies gain "stream_options":{"include_usage":true}, and the
 * exact bytes they become; every other body is left as the client wrote
 * it - not JSON, not streaming, a client that already said what it wants,
 * a stream_options that is not an object.  Each edited body is read again
 * by the same reader: it is JSON still, and a second pass leaves it.
 * And a fallback's model override (body_model): only the top-level
 * "model" string is replaced; a body that is not JSON says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "include_usage.h"

/* The body @in becomes: NULL when it is left as it is. */
static char *edited(const char *in, size_t len) {
    struct iu_edit e;
    if (!include_usage_edit(in, len, &e)) {
        return NULL;
    }
    size_t n = 0;
    char *out = include_usage_apply(in, len, &e, &n);
    assert_non_null(out);
    assert_int_equal(n, strlen(out));
    /* the edited body is JSON that asks for usage: nothing more to add */
    assert_false(include_usage_edit(out, n, &e));
    return out;
}

static void becomes(const char *in, const char *want) {
    char *out = edited(in, strlen(in));
    if (out == NULL) {
        fail_msg("left as it is, wanted: %s\n  body: %s", want, in);
    }
    assert_string_equal(out, want);
    free(out);
}

static void left(const char *in) {
    char *out = edited(in, strlen(in));
    if (out != NULL) {
        fail_msg("edited into %s\n  body: %s", out, in);
    }
}

static void a_stream_without_stream_options_gains_it_after_its_last_member(void **state) {
    (void)state;
    becomes("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            "\"stream\":true}",
            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
            "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    /* whitespace around is kept where it was: the field follows the value */
    becomes(
        " \r\n{ \"stream\" : true \n}\n ",
        " \r\n{ \"stream\" : true,\"stream_options\":{\"include_usage\":true} \n}\n ");
    becomes("{\"stream\":true,\"n\":-1.5e+3,\"x\":[[],{}],\"t\":\"a\\\"}\"}",
            "{\"stream\":true,\"n\":-1.5e+3,\"x\":[[],{}],\"t\":\"a\\\"}\","
            "\"stream_options\":{\"include_usage\":true}}");
}

static void stream_options_without_include_usage_gains_the_field(void **state) {
    (void)state;
    becomes("{\"stream\":true,\"stream_options\":{}}",
            "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    becomes("{\"stream\":true,\"stream_options\":{ }}",
            "{\"stream\":true,\"stream_options\":{ \"include_usage\":true}}");
    becomes("{\"stream_options\":{\"include_obfuscation\":false},\"stream\":true}",
            "{\"stream_options\":{\"include_obfuscation\":false,\"include_usage\":true},"
            "\"stream\":true}");
    /* a key named so deeper inside is not the option's */
    becomes("{\"stream\":true,\"stream_options\":{\"x\":{\"include_usage\":false}}}",
            "{\"stream\":true,\"stream_options\":{\"x\":{\"include_usage\":false},"
            "\"include_usage\":true}}");
    /* null is no options: replaced */
    becomes("{\"stream\":true,\"stream_options\":null}",
            "{\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
}

static void a_client_that_said_what_it_wants_is_left_alone(void **state) {
    (void)state;
    left("{\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    left("{\"stream\":true,\"stream_options\":{\"include_usage\":false}}");
    left("{\"stream\":true,\"stream_options\":{\"include_usage\":null}}");
    left(
        "{\"stream\":true,\"stream_options\":{\"a\":1,\"include_usage\":false,\"b\":2}}");
    /* escaped, the key is the same key */
    left("{\"stream\":true,\"stream_options\":{\"include\\u005fusage\":false}}");
}

static void a_body_that_does_not_stream_is_left_alone(void **state) {
    (void)state;
    left("{\"model\":\"m\"}");
    left("{}");
    left("{\"stream\":false}");
    left("{\"stream\":\"true\"}");
    left("{\"stream\":1}");
    left("{\"stream\":null}");
    left("{\"x\":{\"stream\":true}}");
    left("[{\"stream\":true}]");
    /* the last of repeated keys counts, as JSON.parse has it */
    left("{\"stream\":true,\"stream\":false}");
    becomes(
        "{\"stream\":false,\"stream\":true}",
        "{\"stream\":false,\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    /* keys are compared decoded */
    becomes("{\"str\\u0065am\":true}",
            "{\"str\\u0065am\":true,\"stream_options\":{\"include_usage\":true}}");
    left("{\"stream \":true}");
    left("{\"Stream\":true}");
}

static void the_last_stream_options_counts(void **state) {
    (void)state;
    left("{\"stream\":true,\"stream_options\":{},\"stream_options\":{\"include_usage\":"
         "true}}");
    becomes("{\"stream\":true,\"stream_options\":{\"include_usage\":true},\"stream_"
            "options\":{}}",
            "{\"stream\":true,\"stream_options\":{\"include_usage\":true},"
            "\"stream_options\":{\"include_usage\":true}}");
    /* one that is not an object is the upstream's to refuse */
    left("{\"stream\":true,\"stream_options\":\"x\"}");
    left("{\"stream\":true,\"stream_options\":[]}");
    left("{\"stream\":true,\"stream_options\":true}");
    left("{\"stream\":true,\"stream_options\":{},\"stream_options\":1}");
}

static void a_body_that_is_not_json_is_left_alone(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",
        " ",
        "{\"stream\":true",
        "{\"stream\":true,}",
        "{\"stream\":true}}",
        "{\"stream\":true} {}",
        "{\"stream\":true}x",
        "{\"stream\":tru}",
        "{\"stream\":true,\"a\":01}",
        "{\"stream\":true,\"a\":1.}",
        "{\"stream\":true,\"a\":.5}",
        "{\"stream\":true,\"a\":+1}",
        "{\"stream\":true,\"a\":1e}",
        "{\"stream\":true,\"a\":NaN}",
        "{\"stream\":true,\"a\":\"\\x\"}",
        "{\"stream\":true,\"a\":\"\\u12g4\"}",
        "{\"stream\":true,\"a\":\"tab\there\"}",
        "{\"stream\":true,\"a\":[1,]}",
        "{\"stream\":true,\"a\":[1 2]}",
        "{\"stream\":true,'a':1}",
        "{\"stream\":true,a:1}",
        "{\"stream\":true,\"a\"1}",
        "{\"stream\":true,\"stream_options\":{\"a\"}}",
        "{\"stream\":true,\"stream_options\":{,}}",
        "\xef\xbb\xbf{\"stream\":true}",                /* a byte order mark */
        "{\"stream\":true,\"a\":\"\xc0\xaf\"}",         /* overlong '/' */
        "{\"stream\":true,\"a\":\"\xed\xa0\x80\"}",     /* a surrogate */
        "{\"stream\":true,\"a\":\"\xf4\x90\x80\x80\"}", /* past U+10FFFF */
        "{\"stream\":true,\"a\":\"\xe2\x82\"}",         /* cut short */
        "{\"stream\":true,\"a\":\"\xff\"}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        left(bad[i]);
    }
    /* a NUL inside is no JSON either (the length is the body's) */
    static const char nul[] = "{\"stream\":true,\"a\":\"\0\"}";
    assert_null(edited(nul, sizeof(nul) - 1));
    /* UTF-8 that is well-formed, and escapes of every kind, are JSON */
    becomes("{\"stream\":true,\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\","
            "\"b\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"}",
            "{\"stream\":true,\"a\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\","
            "\"b\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\","
            "\"stream_options\":{\"include_usage\":true}}");
}

/* [[...{"stream":true}...]] nested @depth deep in all: within the limit
 * it is read (and the field goes at the top level only when the top level
 * streams), past it left alone. */
static char *nested(size_t depth, bool top_streams) {
    size_t cap = 2 * depth + 64;
    char *b = malloc(cap);
    assert_non_null(b);
    size_t n =
        (size_t)snprintf(b, cap, "{%s\"a\":", top_streams ? "\"stream\":true," : "");
    for (size_t i = 1; i < depth; i++) {
        b[n++] = '[';
    }
    for (size_t i = 1; i < depth; i++) {
        b[n++] = ']';
    }
    b[n++] = '}';
    b[n] = '\0';
    return b;
}

static void nesting_is_read_to_its_limit_and_no_further(void **state) {
    (void)state;
    char *ok = nested(IU_MAX_DEPTH, true);
    char *out = edited(ok, strlen(ok));
    assert_non_null(out);
    size_t n = strlen(ok);
    assert_memory_equal(out, ok, n - 1);
    assert_string_equal(out + n - 1, ",\"stream_options\":{\"include_usage\":true}}");
    free(out);
    free(ok);
    char *deep = nested(IU_MAX_DEPTH + 1, true);
    left(deep);
    free(deep);
    char *quiet = nested(IU_MAX_DEPTH, false);
    left(quiet);
    free(quiet);
}

/* @in with its top-level model replaced by the literal @lit: NULL when
 * there is none to replace; *@rv body_model's answer. */
static char *with_model(const char *in, const char *lit, int *rv) {
    struct iu_edit e;
    *rv = body_model(in, strlen(in), &e);
    if (*rv != 1) {
        return NULL;
    }
    assert_null(e.text);
    e.text = lit;
    size_t n = 0;
    char *out = include_usage_apply(in, strlen(in), &e, &n);
    assert_non_null(out);
    assert_int_equal(n, strlen(out));
    /* JSON still, and its model now the literal */
    struct iu_edit again;
    assert_int_equal(body_model(out, n, &again), 1);
    assert_int_equal(again.cut, strlen(lit));
    assert_memory_equal(out + again.at, lit, again.cut);
    return out;
}

static void model_becomes(const char *in, const char *want) {
    int rv;
    char *out = with_model(in, "\"gpt-4o-mini\"", &rv);
    if (out == NULL) {
        fail_msg("no model replaced (%d), wanted: %s\n  body: %s", rv, want, in);
    }
    assert_string_equal(out, want);
    free(out);
}

static void the_top_level_model_string_alone_is_replaced(void **state) {
    (void)state;
    model_becomes("{\"model\":\"gpt-4o\",\"stream\":true}",
                  "{\"model\":\"gpt-4o-mini\",\"stream\":true}");
    /* whitespace, and every other member, kept byte for byte */
    model_becomes(
        " {\n \"messages\" : [ {\"role\":\"user\",\"content\":\"the model\"} ] ,"
        "\n \"model\" :\t\"gpt-4o\" \n} \n",
        " {\n \"messages\" : [ {\"role\":\"user\",\"content\":\"the model\"} ] ,"
        "\n \"model\" :\t\"gpt-4o-mini\" \n} \n");
    /* a nested "model" and a "model" inside a string are not the top level */
    model_becomes("{\"tools\":[{\"model\":\"x\"}],\"meta\":{\"model\":\"y\"},"
                  "\"s\":\"\\\"model\\\":\\\"z\\\"\",\"model\":\"gpt-4o\"}",
                  "{\"tools\":[{\"model\":\"x\"}],\"meta\":{\"model\":\"y\"},"
                  "\"s\":\"\\\"model\\\":\\\"z\\\"\",\"model\":\"gpt-4o-mini\"}");
    /* escapes in the value and in the key (compared decoded) */
    model_becomes("{\"mod\\u0065l\":\"a\\\"b\\\\c\\u00e9\",\"n\":1}",
                  "{\"mod\\u0065l\":\"gpt-4o-mini\",\"n\":1}");
    /* the last of repeated keys counts, as JSON.parse has it */
    model_becomes("{\"model\":\"a\",\"model\":\"b\"}",
                  "{\"model\":\"a\",\"model\":\"gpt-4o-mini\"}");
}

static void a_body_without_a_top_level_model_string_is_left_alone(void **state) {
    (void)state;
    static const char *const none[] = {
        "{}",
        "{\"stream\":true}",
        "{\"meta\":{\"model\":\"nested\"}}",
        "{\"x\":\"\\\"model\\\":\\\"in a string\\\"\"}",
        "{\"model\":null}",
        "{\"model\":[\"a\"]}",
        "{\"model\":\"a\",\"model\":7}", /* the last is not a string */
        "[{\"model\":\"in an array\"}]",
        "\"model\"",
        "42",
    };
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++) {
        int rv;
        char *out = with_model(none[i], "\"m\"", &rv);
        if (out != NULL || rv != 0) {
            fail_msg("not 0 (%d) for %s", rv, none[i]);
        }
    }
}

static void a_body_that_is_not_json_is_said_to_be_not_json(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",
        "{\"model\":\"gpt-4o\"",     /* cut short */
        "{\"model\":\"gpt-4o\"} {}", /* two texts */
        "{\"model\":\"gpt-4o\",}",   /* a trailing comma */
        "{'model':'gpt-4o'}",        /* not JSON's quotes */
        "{\"model\":\"a\\qb\"}",     /* not one of JSON's escapes */
        "{\"model\":\"\xff\"}",      /* not UTF-8 */
        "{\"model\":\"a\nb\"}",      /* a raw control character */
        "model=gpt-4o&stream=true",  /* a form */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct iu_edit e;
        if (body_model(bad[i], strlen(bad[i]), &e) != -1) {
            fail_msg("not -1 for %s", bad[i]);
        }
    }
    char *deep = nested(IU_MAX_DEPTH + 1, true);
    struct iu_edit e;
    assert_int_equal(body_model(deep, strlen(deep), &e), -1);
    free(deep);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_stream_without_stream_options_gains_it_after_its_last_member),
        cmocka_unit_test(stream_options_without_include_usage_gains_the_field),
        cmocka_unit_test(a_client_that_said_what_it_wants_is_left_alone),
        cmocka_unit_test(a_body_that_does_not_stream_is_left_alone),
        cmocka_unit_test(the_last_stream_options_counts),
        cmocka_unit_test(a_body_that_is_not_json_is_left_alone),
        cmocka_unit_test(nesting_is_read_to_its_limit_and_no_further),
        cmocka_unit_test(the_top_level_model_string_alone_is_replaced),
        cmocka_unit_test(a_body_without_a_top_level_model_string_is_left_alone),
        cmocka_unit_test(a_body_that_is_not_json_is_said_to_be_not_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
