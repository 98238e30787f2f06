/*
 * The OTLP encoding of a batch of spans (src/otel/encode.c), read back by
 * a peer no one here wrote: Debian's protoc --decode, against the same
 * pinned third_party/opentelemetry-proto definitions.  Each check is on
 * protoc's text with its whitespace folded to single spaces.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "otel/internal.h"
#include "otel/span.h"

#ifndef SG_PROTOC
#    error "SG_PROTOC: the protoc program (tests/CMakeLists.txt)"
#endif

/* protoc's text for @len bytes of @buf, whitespace folded (malloc'd). */
static char *decode(const uint8_t *buf, size_t len) {
    char path[] = "/tmp/sg-otel-encode-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    char cmd[2048];
    snprintf(
        cmd, sizeof cmd,
        "'%s' --decode opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest"
        " -I '%s' opentelemetry/proto/collector/trace/v1/trace_service.proto < '%s'",
        SG_PROTOC, SG_OTEL_PROTO_DIR, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, n = 0;
    char *text = malloc(cap);
    assert_non_null(text);
    int c, last = ' ';
    while ((c = fgetc(p)) != EOF) {
        if (c == ' ' || c == '\n' || c == '\t') {
            if (last == ' ') {
                continue;
            }
            c = ' ';
        }
        if (n + 2 > cap) {
            cap *= 2;
            text = realloc(text, cap);
            assert_non_null(text);
        }
        text[n++] = (char)c;
        last = c;
    }
    text[n] = '\0';
    assert_int_equal(pclose(p), 0); /* protoc parsed every byte */
    unlink(path);
    return text;
}

static size_t count(const char *text, const char *needle) {
    size_t k = 0;
    for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle)) {
        k++;
    }
    return k;
}

#define assert_has(text, needle)                               \
    do {                                                       \
        if (strstr((text), (needle)) == NULL) {                \
            fail_msg("missing: %s\nin: %s", (needle), (text)); \
        }                                                      \
    } while (0)

static const sg__otel_attr resource[] = {
    {"service.name", SG__OTEL_STRING, {.s = "checkout"}},
    {"telemetry.sdk.name", SG__OTEL_STRING, {.s = "streamguard"}},
};

/* The operation span: every attribute type, events with attributes,
 * status, tracestate, and one attribute and one event over its room. */
static sg__otel_span *operation_span(void) {
    sg__otel_span *s = sg__otel_span_new(4, 2);
    assert_non_null(s);
    memcpy(s->trace_id, "0123456789abcdef", 16);
    memcpy(s->span_id, "opspan01", 8);
    s->flags = 1;
    s->kind = SG__OTEL_KIND_CLIENT;
    s->start_unix_nano = 1700000000000000000ULL;
    s->end_unix_nano = 1700000001500000000ULL;
    assert_int_equal(sg__otel_span_set_name(s, "chat gpt-4o"), 0);
    assert_int_equal(sg__otel_span_set_trace_state(s, "vendor=abc,other=x"), 0);
    assert_int_equal(
        sg__otel_span_set_status(s, SG__OTEL_STATUS_ERROR, "first_item_timeout"), 0);
    assert_int_equal(sg__otel_span_add_str(s, "gen_ai.request.model", "gpt-4o"), 0);
    assert_int_equal(sg__otel_span_add_bool(s, "streamguard.partial", true), 0);
    assert_int_equal(sg__otel_span_add_int(s, "gen_ai.usage.input_tokens", -42), 0);
    assert_int_equal(sg__otel_span_add_double(s, "streamguard.ratio", 0.25), 0);
    assert_int_equal(sg__otel_span_add_int(s, "over.the.room", 1), 0); /* dropped */
    assert_int_equal(sg__otel_span_add_event(s, "backoff", 1700000000500000000ULL), 0);
    assert_int_equal(sg__otel_span_event_add_int(s, "streamguard.backoff_ms", 250), 0);
    assert_int_equal(sg__otel_span_event_add_str(s, "streamguard.reason", "retry_after"),
                     0);
    assert_int_equal(sg__otel_span_add_event(s, "hedge", 1700000000600000000ULL), 0);
    assert_int_equal(sg__otel_span_add_event(s, "over", 1700000000700000000ULL), 0);
    assert_int_equal(s->dropped_attrs, 1);
    assert_int_equal(s->dropped_events, 1);
    return s;
}

static sg__otel_span *attempt_span(void) {
    sg__otel_span *s = sg__otel_span_new(1, 0);
    assert_non_null(s);
    memcpy(s->trace_id, "0123456789abcdef", 16);
    memcpy(s->span_id, "attempt1", 8);
    memcpy(s->parent_span_id, "opspan01", 8);
    s->kind = SG__OTEL_KIND_CLIENT;
    s->start_unix_nano = 1700000000100000000ULL;
    s->end_unix_nano = 1700000001400000000ULL;
    assert_int_equal(sg__otel_span_set_name(s, "POST"), 0);
    assert_int_equal(sg__otel_span_set_status(s, SG__OTEL_STATUS_OK, NULL), 0);
    assert_int_equal(sg__otel_span_add_int(s, "http.request.resend_count", 1), 0);
    return s;
}

static void a_batch_decodes_with_every_field_in_place(void **state) {
    (void)state;
    sg__otel_span *spans[2] = {operation_span(), attempt_span()};
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sg__otel_encode(resource, 2, spans, 2, &buf, &len), 0);
    assert_true(len > 0);
    char *t = decode(buf, len);

    assert_has(t,
               "resource_spans { resource { attributes { key: \"service.name\" value { "
               "string_value: \"checkout\" } } attributes { key: \"telemetry.sdk.name\" "
               "value { string_value: \"streamguard\" } } }");
    assert_has(t, "scope_spans { scope { name: \"streamguard\" version: \"");
    assert_int_equal(count(t, " spans { "), 2);
    /* the operation: a root (no parent_span_id), in its fields' order */
    assert_has(t, "spans { trace_id: \"0123456789abcdef\" span_id: \"opspan01\" "
                  "trace_state: \"vendor=abc,other=x\" name: \"chat gpt-4o\" "
                  "kind: SPAN_KIND_CLIENT start_time_unix_nano: 1700000000000000000 "
                  "end_time_unix_nano: 1700000001500000000 ");
    assert_has(t, "attributes { key: \"gen_ai.request.model\" value { string_value: "
                  "\"gpt-4o\" } }");
    assert_has(t,
               "attributes { key: \"streamguard.partial\" value { bool_value: true } }");
    assert_has(
        t, "attributes { key: \"gen_ai.usage.input_tokens\" value { int_value: -42 } }");
    assert_has(t,
               "attributes { key: \"streamguard.ratio\" value { double_value: 0.25 } }");
    assert_null(strstr(t, "over.the.room"));
    assert_has(t, "dropped_attributes_count: 1 ");
    assert_has(t,
               "events { time_unix_nano: 1700000000500000000 name: \"backoff\" "
               "attributes { key: \"streamguard.backoff_ms\" value { int_value: 250 } } "
               "attributes { key: \"streamguard.reason\" value { string_value: "
               "\"retry_after\" } } }");
    assert_has(t, "events { time_unix_nano: 1700000000600000000 name: \"hedge\" }");
    assert_null(strstr(t, "name: \"over\""));
    assert_has(t, "dropped_events_count: 1 ");
    assert_has(t, "status { message: \"first_item_timeout\" code: STATUS_CODE_ERROR }");
    assert_has(t, "flags: 1 ");
    /* the attempt: parented on the operation */
    assert_has(t, "spans { trace_id: \"0123456789abcdef\" span_id: \"attempt1\" "
                  "parent_span_id: \"opspan01\" name: \"POST\" ");
    assert_has(
        t, "attributes { key: \"http.request.resend_count\" value { int_value: 1 } }");
    assert_has(t, "status { code: STATUS_CODE_OK }");
    assert_int_equal(count(t, "parent_span_id"), 1);
    free(t);
    free(buf);
    sg__otel_span_free(spans[0]);
    sg__otel_span_free(spans[1]);
}

static void an_empty_batch_is_a_resource_alone(void **state) {
    (void)state;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sg__otel_encode(resource, 1, NULL, 0, &buf, &len), 0);
    char *t = decode(buf, len);
    assert_has(t, "string_value: \"checkout\"");
    assert_null(strstr(t, " spans {"));
    free(t);
    free(buf);
}

static void a_large_batch_keeps_every_span(void **state) {
    (void)state;
    enum { N = 1000 };
    sg__otel_span **spans = calloc(N, sizeof *spans);
    assert_non_null(spans);
    for (int i = 0; i < N; i++) {
        spans[i] = sg__otel_span_new(2, 1);
        assert_non_null(spans[i]);
        memcpy(spans[i]->trace_id, "0123456789abcdef", 16);
        snprintf((char *)spans[i]->span_id, 8, "s%06d", i);
        assert_int_equal(sg__otel_span_set_name(spans[i], "attempt"), 0);
        assert_int_equal(sg__otel_span_add_int(spans[i], "i", i), 0);
        assert_int_equal(sg__otel_span_add_event(spans[i], "e", 1), 0);
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sg__otel_encode(resource, 2, spans, N, &buf, &len), 0);
    char *t = decode(buf, len);
    assert_int_equal(count(t, " spans { "), N);
    assert_has(t, "key: \"i\" value { int_value: 999 }");
    assert_int_equal(count(t, "name: \"e\""), N);
    free(t);
    free(buf);
    for (int i = 0; i < N; i++) {
        sg__otel_span_free(spans[i]);
    }
    free(spans);
}

static void bad_arguments_are_refused(void **state) {
    (void)state;
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(sg__otel_encode(resource, 1, NULL, 1, &buf, &len), SG_EINVAL);
    assert_int_equal(sg__otel_encode(NULL, 1, NULL, 0, &buf, &len), SG_EINVAL);
    assert_int_equal(sg__otel_encode(resource, 1, NULL, 0, NULL, &len), SG_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_batch_decodes_with_every_field_in_place),
        cmocka_unit_test(an_empty_batch_is_a_resource_alone),
        cmocka_unit_test(a_large_batch_keeps_every_span),
        cmocka_unit_test(bad_arguments_are_refused),
    };
    return cmocka_run_group_tests_name("otel_encode", tests, NULL, NULL);
}
