/* sg_stream: body bytes -> framed, timed items.  Time is driven by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

#define T0 SG_SEC(100)

typedef struct fixture {
    sg_stream s;
    char buf[SG_SSE_BUFFER_SIZE(256, 1024)];
    int items;
    int cancel_at;
    char last[64];
} fixture;

static int on_item(const sg_item *item, void *ud) {
    fixture *f = ud;
    f->items++;
    size_t n =
        item->data_len < sizeof(f->last) - 1 ? item->data_len : sizeof(f->last) - 1;
    memcpy(f->last, item->data, n);
    f->last[n] = '\0';
    assert_int_equal(item->index, (uint64_t)(f->items - 1));
    assert_int_equal(item->attempt, 1);
    return f->cancel_at > 0 && f->items >= f->cancel_at;
}

/* A config of @format ending at @done (NULL: none), with limits. */
static sg_stream_config config(sg_format format, const char *done, size_t max_line,
                               size_t max_event) {
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    assert_int_equal(sg_stream_config_set_format(&cfg, format), 0);
    assert_int_equal(sg_stream_config_set_terminal_data(&cfg, done), 0);
    assert_int_equal(sg_stream_config_set_max_line(&cfg, max_line), 0);
    assert_int_equal(sg_stream_config_set_max_event(&cfg, max_event), 0);
    return cfg;
}

static void begin(fixture *f, sg_format format, const char *done, int64_t first,
                  int64_t idle, uint64_t max_items) {
    memset(f, 0, sizeof(*f));
    sg_stream_config cfg = config(format, done, 256, 1024);
    assert_true(sg_stream_buffer_size(&cfg) <= sizeof(f->buf));
    assert_int_equal(sg_stream_init(&f->s, &cfg, on_item, f, f->buf, sizeof(f->buf)), 0);
    sg_guard_config g;
    sg_guard_config_init(&g);
    if (first) {
        sg_guard_config_set_first_item_timeout(&g, first);
    }
    if (idle) {
        sg_guard_config_set_idle_timeout(&g, idle);
    }
    sg_guard_config_set_max_items(&g, max_items);
    assert_int_equal(sg_stream_begin(&f->s, &g, NULL, 1, T0), 0);
    assert_int_equal(
        sg_guard_set_phase(sg_stream_guard(&f->s), SG_PHASE_WAIT_FIRST_ITEM, T0), 0);
}

static int feed(fixture *f, const char *text, int64_t at) {
    return sg_stream_feed(&f->s, text, strlen(text), at);
}

static void items_are_delivered_and_the_sentinel_ends_cleanly(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, "[DONE]", SG_MS(100), SG_MS(50), 0);
    assert_int_equal(feed(&f, "data: a\n\ndata: b\n\n", T0 + SG_MS(10)), 0);
    assert_int_equal(f.items, 2);
    assert_int_equal(feed(&f, "data: [DONE]\n\n", T0 + SG_MS(20)), 1);
    assert_true(sg_stream_terminal_seen(&f.s));
    /* bytes after the sentinel are ignored; the attempt stays decided */
    assert_int_equal(feed(&f, "data: late\n\n", T0 + SG_SEC(5)), 1);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_SEC(9), SG_OUTCOME_TRUNCATED, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.elapsed_ns, SG_MS(20)); /* decided when the sentinel came */
    assert_int_equal(f.items, 2);
}

static void an_ndjson_terminal_line_is_the_clean_end_and_not_delivered(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_NDJSON, "{\"done\":true}", 0, SG_MS(50), 0);
    /* split across reads, CRLF, and a look-alike with a space */
    assert_int_equal(feed(&f, "{\"t\":1}\r\n{\"done\": true}\n{\"do", T0 + SG_MS(1)), 0);
    assert_int_equal(f.items, 2);
    assert_int_equal(feed(&f, "ne\":true}\r\n{\"after\":1}\n", T0 + SG_MS(2)), 1);
    assert_int_equal(f.items, 2); /* the terminal and what follows are not items */
    assert_true(sg_stream_terminal_seen(&f.s));
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_SEC(1), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.elapsed_ns, SG_MS(2));
}

static void an_ndjson_stream_without_its_terminal_line_is_truncated(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_NDJSON, "{\"done\":true}", 0, 0, 0);
    assert_int_equal(feed(&f, "{\"t\":1}\n{\"t\":2}\n", T0 + SG_MS(1)), 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(5), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    assert_true(r.partial);
    /* without a terminal line configured, the same body ends ok */
    begin(&f, SG_FORMAT_NDJSON, NULL, 0, 0, 0);
    assert_int_equal(feed(&f, "{\"t\":1}\n{\"t\":2}\n", T0 + SG_MS(1)), 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(5), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
}

static void keepalive_comments_never_reset_the_idle_clock(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, "[DONE]", 0, SG_MS(50), 0);
    assert_int_equal(feed(&f, "data: a\n\n", T0), 0);
    assert_int_equal(feed(&f, ": keepalive\n\n", T0 + SG_MS(30)), 0);
    assert_int_equal(sg_guard_next_deadline(sg_stream_guard(&f.s)), T0 + SG_MS(50));
    assert_int_equal(feed(&f, ": keepalive\n\n", T0 + SG_MS(50)), SG_ETIMEDOUT);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(51), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    assert_int_equal(r.outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_true(r.partial);
}

static void an_item_arriving_late_is_not_delivered(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, NULL, SG_MS(100), 0, 0);
    /* the bytes come exactly at the deadline: late */
    assert_int_equal(feed(&f, "data: a\n\n", T0 + SG_MS(100)), SG_ETIMEDOUT);
    assert_int_equal(f.items, 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(100), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_false(r.partial);
}

static void an_item_split_across_reads_is_timed_when_it_completes(void **state) {
    (void)state;
    fixture f;
    begin(&f, SG_FORMAT_SSE, NULL, SG_MS(100), 0, 0);
    assert_int_equal(feed(&f, "data: a", T0 + SG_MS(10)), 0);
    assert_int_equal(f.items, 0);
    /* the event completes after the first-item deadline: late */
    assert_int_equal(feed(&f, "\n\n", T0 + SG_MS(150)), SG_ETIMEDOUT);
    assert_int_equal(f.items, 0);
}

static void the_item_cap_stops_the_stream(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_NDJSON, NULL, 0, 0, 2);
    assert_int_equal(feed(&f, "{}\n{}\n{}\n", T0 + 1), SG_ECAP);
    assert_int_equal(f.items, 2);
    assert_int_equal(feed(&f, "{}\n", T0 + 2), SG_ESTATE);
    assert_int_equal(sg_stream_end(&f.s, T0 + 3, SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_CAP_EXCEEDED);
}

static void the_consumer_can_cancel(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_NDJSON, NULL, 0, 0, 0);
    f.cancel_at = 1;
    assert_int_equal(feed(&f, "{\"a\":1}\n{\"a\":2}\n", T0 + 1), SG_ECANCELED);
    assert_int_equal(f.items, 1);
    assert_int_equal(sg_stream_end(&f.s, T0 + 2, SG_OUTCOME_TRUNCATED, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_CANCELLED);
    assert_true(r.partial);
}

static void a_cancel_before_a_deadline_stays_a_cancel_when_reported_late(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_NDJSON, NULL, 0, SG_MS(50), 0);
    f.cancel_at = 1;
    assert_int_equal(feed(&f, "{}\n", T0 + SG_MS(10)), SG_ECANCELED);
    /* the transport reports the end after the idle deadline has passed */
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(500), SG_OUTCOME_TRUNCATED, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_CANCELLED);
    assert_int_equal(r.elapsed_ns, SG_MS(10));
}

static void an_oversize_line_is_a_protocol_error(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    char big[600];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    begin(&f, SG_FORMAT_SSE, NULL, 0, 0, 0);
    assert_int_equal(feed(&f, big, T0 + 1), SG_ELINE_TOO_LONG);
    assert_int_equal(sg_stream_end(&f.s, T0 + 2, SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROTOCOL_ERROR);
}

/* A length no parser takes is refused as documented - and no byte of it is
 * counted: nothing was read. */
static void a_length_above_ptrdiff_max_is_refused_and_counts_nothing(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, NULL, 0, 0, 0);
    assert_int_equal(feed(&f, "data: a\n\n", T0 + 1), 0);
    assert_int_equal(sg_stream_feed(&f.s, "x", (size_t)PTRDIFF_MAX + 1, T0 + 2),
                     SG_EINVAL);
    assert_int_equal(sg_guard_bytes(sg_stream_guard(&f.s)), 9);
    assert_int_equal(sg_stream_end(&f.s, T0 + 3, SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROTOCOL_ERROR);
    assert_int_equal(r.bytes, 9);
}

static void end_of_body_without_the_sentinel_is_truncated(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, "[DONE]", 0, 0, 0);
    assert_int_equal(feed(&f, "data: a\n\n", T0 + 1), 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + 2, SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    assert_true(r.partial);
}

static void without_a_sentinel_a_complete_body_is_ok(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_NDJSON, NULL, 0, 0, 0);
    assert_int_equal(feed(&f, "{\"a\":1}\r\n{\"a\":2}\n", T0 + 1), 0);
    assert_string_equal(f.last, "{\"a\":2}");
    assert_int_equal(sg_stream_end(&f.s, T0 + 2, SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.items, 2);
    /* a second end is a state error; a new attempt starts clean */
    assert_int_equal(sg_stream_end(&f.s, T0 + 3, SG_OUTCOME_OK, &r), SG_ESTATE);
}

static void the_transport_view_decides_when_nothing_else_did(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, "[DONE]", 0, 0, 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + 2, SG_OUTCOME_HTTP_ERROR, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_HTTP_ERROR);
    assert_false(r.partial);
}

static void skipped_event_types_are_not_items_and_never_reset_idle(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    static const char *const skip[] = {"ping", NULL};
    memset(&f, 0, sizeof(f));
    sg_stream_config cfg = config(SG_FORMAT_SSE, NULL, 256, 1024);
    assert_int_equal(sg_stream_config_set_terminal_type(&cfg, "message_stop"), 0);
    assert_int_equal(sg_stream_config_set_skip_types(&cfg, skip), 0);
    assert_int_equal(sg_stream_init(&f.s, &cfg, on_item, &f, f.buf, sizeof(f.buf)), 0);
    sg_guard_config g;
    sg_guard_config_init(&g);
    sg_guard_config_set_idle_timeout(&g, SG_MS(50));
    assert_int_equal(sg_stream_begin(&f.s, &g, NULL, 1, T0), 0);
    assert_int_equal(feed(&f, "event: content_block_delta\ndata: {}\n\n", T0), 0);
    /* Anthropic's keepalive is an event, not a comment: still not progress */
    assert_int_equal(
        feed(&f, "event: ping\ndata: {\"type\":\"ping\"}\n\n", T0 + SG_MS(30)), 0);
    assert_int_equal(f.items, 1);
    assert_int_equal(sg_guard_next_deadline(sg_stream_guard(&f.s)), T0 + SG_MS(50));
    assert_int_equal(feed(&f, "event: ping\ndata: {}\n\n", T0 + SG_MS(50)), SG_ETIMEDOUT);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(50), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_int_equal(r.items, 1);
}

static void
the_next_deadline_is_the_running_guards_and_none_before_or_after(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    sg_stream never;
    memset(&never, 0, sizeof(never));
    assert_int_equal(sg_stream_next_deadline(NULL), -1);
    assert_int_equal(sg_stream_next_deadline(&never), -1); /* not initialised */
    begin(&f, SG_FORMAT_SSE, "[DONE]", SG_MS(100), SG_MS(50), 0);
    assert_int_equal(sg_stream_next_deadline(&f.s), T0 + SG_MS(100));
    assert_int_equal(feed(&f, "data: a\n\n", T0 + SG_MS(10)), 0);
    assert_int_equal(sg_stream_next_deadline(&f.s), T0 + SG_MS(60)); /* idle */
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(20), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(sg_stream_next_deadline(&f.s), SG_TIME_NEVER);
}

static void bad_arguments_are_rejected(void **state) {
    (void)state;
    sg_stream s;
    char buf[64];
    sg_stream_config bad;
    sg_stream_config_init(&bad);
    sg_guard_result r;
    /* refused where they are set, the config left as it was */
    assert_int_equal(sg_stream_config_set_format(&bad, (sg_format)7), SG_EINVAL);
    assert_int_equal(sg_stream_config_format(&bad), SG_FORMAT_SSE);
    assert_int_equal(sg_stream_config_set_max_line(&bad, 8), SG_ERANGE);
    assert_int_equal(sg_stream_config_set_max_event(&bad, SG_FRAMING_MAX_LIMIT + 1),
                     SG_ERANGE);
    assert_int_equal(sg_stream_config_set_format(NULL, SG_FORMAT_SSE), SG_EINVAL);
    assert_int_equal(sg_stream_buffer_size(&bad), sg_stream_buffer_size(NULL));
    sg_stream_config small = config(SG_FORMAT_SSE, NULL, 256, 1024);
    assert_int_equal(sg_stream_init(&s, &small, NULL, NULL, buf, sizeof(buf)),
                     SG_ENOBUFS);
    /* an empty sentinel could never match: refused, for NDJSON as for SSE */
    sg_stream_config empty = config(SG_FORMAT_NDJSON, NULL, 1024, 1024);
    assert_int_equal(sg_stream_config_set_terminal_data(&empty, ""), SG_EINVAL);
    assert_int_equal(sg_stream_config_set_terminal_type(&empty, ""), SG_EINVAL);
    sg_stream zero = {0};
    assert_int_equal(sg_stream_feed(&zero, "x", 1, T0), SG_EINVAL);
    assert_int_equal(sg_stream_end(&zero, T0, SG_OUTCOME_OK, &r), SG_EINVAL);
    assert_false(sg_stream_active(&zero));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(items_are_delivered_and_the_sentinel_ends_cleanly),
        cmocka_unit_test(
            the_next_deadline_is_the_running_guards_and_none_before_or_after),
        cmocka_unit_test(keepalive_comments_never_reset_the_idle_clock),
        cmocka_unit_test(an_ndjson_terminal_line_is_the_clean_end_and_not_delivered),
        cmocka_unit_test(an_ndjson_stream_without_its_terminal_line_is_truncated),
        cmocka_unit_test(an_item_arriving_late_is_not_delivered),
        cmocka_unit_test(an_item_split_across_reads_is_timed_when_it_completes),
        cmocka_unit_test(the_item_cap_stops_the_stream),
        cmocka_unit_test(the_consumer_can_cancel),
        cmocka_unit_test(a_cancel_before_a_deadline_stays_a_cancel_when_reported_late),
        cmocka_unit_test(an_oversize_line_is_a_protocol_error),
        cmocka_unit_test(a_length_above_ptrdiff_max_is_refused_and_counts_nothing),
        cmocka_unit_test(end_of_body_without_the_sentinel_is_truncated),
        cmocka_unit_test(without_a_sentinel_a_complete_body_is_ok),
        cmocka_unit_test(the_transport_view_decides_when_nothing_else_did),
        cmocka_unit_test(skipped_event_types_are_not_items_and_never_reset_idle),
        cmocka_unit_test(bad_arguments_are_rejected),
    };
    return cmocka_run_group_tests_name("stream", tests, NULL, NULL);
}
