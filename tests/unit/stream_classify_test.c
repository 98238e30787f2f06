/*
 * sg_stream with a classifier (what a provider profile supplies): the
 * first-item clock measures time to the first *token*, metadata before it
 * is held and delivered with it, keepalives are nothing, an end item is
 * the clean end, and without one (when required) the body is truncated.
 * Time is driven by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

#define T0 SG_SEC(100)

typedef struct fixture {
    sg_stream s;
    char *buf;
    int items;
    char seen[512]; /* the data of every item delivered, '|' between */
} fixture;

/* The data's first word says what it is: "meta", "ka", "end", "err TYPE
 * MESSAGE" (TYPE "busy" is transient), else a token. */
static sg_item_kind classify(const sg_item *item, sg_item_error *err, void *ud) {
    (void)ud;
    if (item->data_len >= 4 && memcmp(item->data, "err ", 4) == 0) {
        const char *t = item->data + 4;
        const char *sp = memchr(t, ' ', item->data_len - 4);
        err->type = t;
        err->type_len = sp != NULL ? (size_t)(sp - t) : item->data_len - 4;
        err->message = sp != NULL ? sp + 1 : NULL;
        err->message_len =
            sp != NULL ? item->data_len - (size_t)(sp + 1 - item->data) : 0;
        err->retryable = err->type_len == 4 && memcmp(t, "busy", 4) == 0;
        return SG_ITEM_ERROR;
    }
    if (item->data_len >= 4 && memcmp(item->data, "meta", 4) == 0) {
        return SG_ITEM_META;
    }
    if (item->data_len >= 2 && memcmp(item->data, "ka", 2) == 0) {
        return SG_ITEM_KEEPALIVE;
    }
    if (item->data_len >= 3 && memcmp(item->data, "end", 3) == 0) {
        return SG_ITEM_END;
    }
    if (item->data_len >= 3 && memcmp(item->data, "fin", 3) == 0) {
        return SG_ITEM_END_TOKEN; /* content, and the end */
    }
    return SG_ITEM_TOKEN;
}

static bool g_end_at_eof; /* begin(): the end item, then the body's end */

static int on_item(const sg_item *item, void *ud) {
    fixture *f = ud;
    assert_int_equal(item->index, (uint64_t)f->items);
    f->items++;
    strncat(f->seen, item->data, item->data_len);
    strcat(f->seen, "|");
    return 0;
}

static void begin(fixture *f, sg_format format, bool at_once, bool end_required,
                  size_t max_event, int64_t first, int64_t idle) {
    memset(f, 0, sizeof(*f));
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    assert_int_equal(sg_stream_config_set_format(&cfg, format), 0);
    assert_int_equal(sg_stream_config_set_max_line(&cfg, 256), 0);
    assert_int_equal(sg_stream_config_set_max_event(&cfg, max_event), 0);
    assert_int_equal(sg_stream_config_set_classifier(&cfg, classify, NULL), 0);
    assert_int_equal(sg_stream_config_set_meta_at_once(&cfg, at_once), 0);
    assert_int_equal(sg_stream_config_set_end_required(&cfg, end_required), 0);
    assert_int_equal(sg_stream_config_set_end_at_eof(&cfg, g_end_at_eof), 0);
    size_t n = sg_stream_buffer_size(&cfg);
    sg_stream_config plain = cfg;
    (void)sg_stream_config_set_classifier(&plain, NULL, NULL);
    assert_true(n > sg_stream_buffer_size(&plain)); /* room for the held items */
    f->buf = malloc(n);
    assert_int_equal(sg_stream_init(&f->s, &cfg, on_item, f, f->buf, n - 1), SG_ENOBUFS);
    assert_int_equal(sg_stream_init(&f->s, &cfg, on_item, f, f->buf, n), 0);
    sg_guard_config g;
    sg_guard_config_init(&g);
    sg_guard_config_set_first_item_timeout(&g, first);
    sg_guard_config_set_idle_timeout(&g, idle);
    assert_int_equal(sg_stream_begin(&f->s, &g, NULL, 1, T0), 0);
    assert_int_equal(
        sg_guard_set_phase(sg_stream_guard(&f->s), SG_PHASE_WAIT_FIRST_ITEM, T0), 0);
}

static int feed(fixture *f, const char *text, int64_t at) {
    return sg_stream_feed(&f->s, text, strlen(text), at);
}

static void done(fixture *f) {
    free(f->buf);
}

/* Metadata at once, then a prefill longer than the first-token clock: the
 * metadata does not satisfy it - first_item_timeout - and nothing was
 * delivered, so the attempt is not partial. */
static void metadata_does_not_satisfy_the_first_token_clock(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, false, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: meta start\n\ndata: meta block\n\n", T0 + SG_MS(1)),
                     0);
    assert_int_equal(f.items, 0); /* held */
    assert_int_equal(feed(&f, "data: tok\n\n", T0 + SG_MS(600)), SG_ETIMEDOUT);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(600), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    assert_int_equal(r.outcome, SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_int_equal(r.items, 0);
    assert_false(r.partial);
    assert_int_equal(f.items, 0);
    done(&f);
}

/* The first token delivers the held metadata first, in order; the idle
 * clock starts at the token, not at the metadata. */
static void the_first_token_delivers_what_was_held(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, false, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "id: 7\ndata: meta a\n\ndata: ka\n\ndata: meta b\n\n", T0),
                     0);
    /* 300 ms of prefill after the metadata: longer than the idle clock */
    assert_int_equal(feed(&f, "data: tok1\n\n", T0 + SG_MS(300)), 0);
    assert_string_equal(f.seen, "meta a|meta b|tok1|");
    assert_int_equal(feed(&f, "data: tok2\n\n", T0 + SG_MS(450)), 0);
    assert_int_equal(feed(&f, "data: end\n\n", T0 + SG_MS(500)), 1);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_SEC(3), SG_OUTCOME_TRUNCATED, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.first_item_ns, SG_MS(300)); /* time to first token */
    assert_string_equal(f.seen, "meta a|meta b|tok1|tok2|end|");
    /* the result counts what the consumer got, held metadata included */
    assert_int_equal(r.items, 5);
    done(&f);
}

/* Keepalives are nothing: not delivered, and no clock (the idle clock
 * still fires through them). */
static void keepalives_keep_nothing_alive(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, false, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: tok\n\n", T0 + SG_MS(10)), 0);
    assert_int_equal(feed(&f, "data: ka\n\n", T0 + SG_MS(150)), 0);
    assert_int_equal(feed(&f, "data: ka\n\n", T0 + SG_MS(300)), SG_ETIMEDOUT);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(300), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    assert_int_equal(r.outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_string_equal(f.seen, "tok|");
    done(&f);
}

/* An end item is the clean end even as the very first item (an empty
 * answer), and it is delivered with what was held. */
static void an_end_item_ends_cleanly(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_NDJSON, false, true, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(
        feed(&f, "meta {}\nend {\"done\":true}\n{\"late\":1}\n", T0 + SG_MS(5)), 1);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_SEC(1), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_string_equal(f.seen, "meta {}|end {\"done\":true}|");
    assert_int_equal(r.items, 2);
    done(&f);
}

/* With end_required, a body that simply stops is truncated, even after
 * tokens; without it, the same body ends ok. */
static void without_the_end_item_the_body_is_truncated(void **state) {
    (void)state;
    for (int required = 0; required < 2; required++) {
        fixture f;
        sg_guard_result r;
        begin(&f, SG_FORMAT_NDJSON, false, required, 1024, SG_MS(500), SG_MS(200));
        assert_int_equal(feed(&f, "tok a\ntok b\n", T0 + SG_MS(5)), 0);
        assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(10), SG_OUTCOME_OK, &r), 0);
        assert_int_equal(r.outcome, required ? SG_OUTCOME_TRUNCATED : SG_OUTCOME_OK);
        done(&f);
    }
}

/* Asking for metadata at once: it is delivered and counts as the first
 * item, so a failure after it is partial - the rule as without a profile. */
static void metadata_at_once_is_an_item(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, true, false, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: meta start\n\n", T0 + SG_MS(20)), 0);
    assert_int_equal(f.items, 1);
    assert_int_equal(feed(&f, "data: ka\n\n", T0 + SG_MS(300)), SG_ETIMEDOUT);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(300), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    assert_int_equal(r.outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_true(r.partial);
    assert_int_equal(r.first_item_ns, SG_MS(20));
    done(&f);
}

/* What is held is bounded: more than max_event bytes, or more than
 * SG_STREAM_HOLD_MAX_ITEMS items, before the first token is a protocol
 * error - never unbounded memory. */
static void what_is_held_is_bounded(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, false, 256, SG_SEC(5), SG_SEC(5));
    char ev[200];
    memset(ev, 'x', sizeof(ev));
    memcpy(ev, "data: meta", 10);
    memcpy(ev + sizeof(ev) - 3, "\n\n", 3);
    assert_int_equal(feed(&f, ev, T0 + SG_MS(1)), 0);
    assert_int_equal(feed(&f, ev, T0 + SG_MS(2)), SG_EEVENT_TOO_LARGE);
    /* and says so in its own words: no token came (the wrong profile?) */
    const char *why = sg_stream_error_text(&f.s);
    assert_non_null(why);
    assert_non_null(strstr(why, "before the first token"));
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(3), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROTOCOL_ERROR);
    assert_int_equal(f.items, 0);
    done(&f);

    begin(&f, SG_FORMAT_NDJSON, false, false, 1 << 16, SG_SEC(5), SG_SEC(5));
    int rv = 0;
    for (int i = 0; i <= SG_STREAM_HOLD_MAX_ITEMS && rv == 0; i++) {
        rv = feed(&f, "meta\n", T0 + SG_MS(1));
    }
    assert_int_equal(rv, SG_EEVENT_TOO_LARGE);
    done(&f);
}

/* An in-band error ends the attempt provider_error, at its arrival, with
 * the provider's type and message; before the first token nothing was
 * delivered (the held metadata stays held). */
static void an_error_item_ends_the_attempt_as_provider_error(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, false, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f,
                          "data: meta start\n\ndata: err busy Overloaded, try later\n\n",
                          T0 + SG_MS(30)),
                     SG_EPROVIDER);
    assert_int_equal(feed(&f, "data: tok\n\n", T0 + SG_MS(40)),
                     SG_EPROVIDER); /* sticky */
    const char *type = NULL, *msg = NULL;
    bool retryable = false;
    assert_true(sg_stream_provider_error(&f.s, &type, &msg, &retryable));
    assert_string_equal(type, "busy");
    assert_string_equal(msg, "Overloaded, try later");
    assert_true(retryable);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_SEC(2), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_int_equal(r.elapsed_ns, SG_MS(30)); /* decided when the error came */
    assert_false(r.partial);
    assert_int_equal(f.items, 0);
    done(&f);

    /* after tokens: partial, and a long message is cut, never overrun */
    begin(&f, SG_FORMAT_NDJSON, false, false, 1024, SG_MS(500), SG_MS(200));
    char line[260]; /* a line under max_line (256), a message over 127 */
    memset(line, 'm', sizeof(line));
    memcpy(line, "tok\nerr fatal ", 14);
    line[sizeof(line) - 2] = '\n';
    line[sizeof(line) - 1] = '\0';
    assert_int_equal(feed(&f, line, T0 + SG_MS(5)), SG_EPROVIDER);
    assert_true(sg_stream_provider_error(&f.s, &type, &msg, &retryable));
    assert_false(retryable);
    assert_int_equal(strlen(msg), SG_STREAM_ERROR_MESSAGE_MAX);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(6), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_true(r.partial);
    done(&f);
}

/* A new attempt starts with nothing held and no token yet. */
static void each_attempt_starts_afresh(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, false, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: meta old\n\n", T0), 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(10), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    sg_guard_config g;
    sg_guard_config_init(&g);
    sg_guard_config_set_first_item_timeout(&g, SG_MS(500));
    assert_false(sg_stream_provider_error(&f.s, NULL, NULL, NULL));
    assert_int_equal(sg_stream_begin(&f.s, &g, NULL, 2, T0 + SG_SEC(1)), 0);
    f.items = 0;
    f.seen[0] = '\0';
    assert_int_equal(feed(&f, "data: meta new\n\ndata: tok\n\n", T0 + SG_SEC(1)), 0);
    assert_string_equal(f.seen, "meta new|tok|");
    done(&f);
}

/* An end before any token is no token: the first-token clock was never
 * satisfied (no time to first token in the result), yet the stream ended
 * cleanly - ok, with the held metadata and the end delivered. */
static void an_end_before_any_token_is_no_first_token(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, true, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: meta a\n\n", T0 + SG_MS(10)), 0);
    assert_int_equal(feed(&f, "data: end\n\n", T0 + SG_MS(50)), 1);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(60), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.first_item_ns, -1);
    assert_int_equal(r.phase, SG_PHASE_STREAMING); /* an item came: the end */
    assert_string_equal(f.seen, "meta a|end|");
    assert_int_equal(r.items, 2);
    assert_false(r.partial);
    done(&f);
    /* an end that comes after the first-token clock ran out is too late */
    begin(&f, SG_FORMAT_SSE, false, true, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: end\n\n", T0 + SG_MS(600)), SG_ETIMEDOUT);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(600), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_int_equal(f.items, 0);
    done(&f);
}

/* Content that also ends the stream (SG_ITEM_END_TOKEN) is the first
 * token when none came before, and the clean end. */
static void content_that_ends_the_stream_is_a_token(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    begin(&f, SG_FORMAT_SSE, false, true, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: meta a\n\n", T0 + SG_MS(10)), 0);
    assert_int_equal(feed(&f, "data: fin Hi\n\n", T0 + SG_MS(70)), 1);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(80), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.first_item_ns, SG_MS(70));
    assert_string_equal(f.seen, "meta a|fin Hi|");
    assert_int_equal(r.items, 2);
    done(&f);
}

/* With end_at_eof the stream reads on after the end: what follows an end
 * that came before any token is no first token either (Bedrock's usage
 * metadata after messageStop), and a failure after them is partial - the
 * consumer has items. */
static void after_an_end_without_a_token_nothing_is_a_first_token(void **state) {
    (void)state;
    fixture f;
    sg_guard_result r;
    g_end_at_eof = true;
    begin(&f, SG_FORMAT_SSE, false, true, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: meta a\n\ndata: end\n\n", T0 + SG_MS(10)), 0);
    assert_int_equal(feed(&f, "data: usage\n\n", T0 + SG_MS(20)), 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(30), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.first_item_ns, -1);
    assert_string_equal(f.seen, "meta a|end|usage|");
    assert_int_equal(r.items, 3);
    done(&f);
    begin(&f, SG_FORMAT_SSE, false, true, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: end\n\n", T0 + SG_MS(10)), 0);
    assert_int_equal(feed(&f, "data: err boom x\n\n", T0 + SG_MS(20)), SG_EPROVIDER);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(30), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_int_equal(r.items, 1);
    assert_true(r.partial); /* the end was delivered: never retried */
    done(&f);
    /* the end just inside the first-token clock, the body's end after it:
     * the rest of the body runs on the idle clock, not the first-token
     * one - ok */
    begin(&f, SG_FORMAT_SSE, false, true, 1024, SG_MS(500), SG_MS(200));
    assert_int_equal(feed(&f, "data: end\n\n", T0 + SG_MS(490)), 0);
    assert_int_equal(feed(&f, "data: usage\n\n", T0 + SG_MS(550)), 0);
    assert_int_equal(sg_stream_end(&f.s, T0 + SG_MS(600), SG_OUTCOME_OK, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.first_item_ns, -1);
    assert_int_equal(r.items, 2);
    done(&f);
    g_end_at_eof = false;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(metadata_does_not_satisfy_the_first_token_clock),
        cmocka_unit_test(the_first_token_delivers_what_was_held),
        cmocka_unit_test(an_end_before_any_token_is_no_first_token),
        cmocka_unit_test(content_that_ends_the_stream_is_a_token),
        cmocka_unit_test(after_an_end_without_a_token_nothing_is_a_first_token),
        cmocka_unit_test(keepalives_keep_nothing_alive),
        cmocka_unit_test(an_end_item_ends_cleanly),
        cmocka_unit_test(without_the_end_item_the_body_is_truncated),
        cmocka_unit_test(metadata_at_once_is_an_item),
        cmocka_unit_test(what_is_held_is_bounded),
        cmocka_unit_test(an_error_item_ends_the_attempt_as_provider_error),
        cmocka_unit_test(each_attempt_starts_afresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
