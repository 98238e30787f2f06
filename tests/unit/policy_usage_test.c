/*
 * Usage and cost in the policy (docs/report.md, "Usage and cost"), with a
 * hand-driven clock: each attempt's usage as its stream said it, the
 * estimates where it said nothing (output from the text, input from
 * another attempt), the kept and discarded totals and the attempts
 * unaccounted for, the cost at the caller's prices, and how the report
 * and the accessors say them.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#define T0 SG_SEC(1000)

/* Figures as a stream reads them: -1 unknown. */
static const sg_op_usage none = {-1, -1, -1, -1, SG_USAGE_NONE};

/* An attempt's end, as a transport hands it in. */
typedef struct end {
    sg_outcome outcome;
    int status;
    uint64_t items;
    const sg_op_usage *usage; /* NULL: no profile read the stream */
    uint64_t text;
    bool unsent;
} end;

static sg_op_verdict done(sg_op *op, uint32_t n, int64_t now, end e) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.attempt = n;
    r.outcome = e.outcome;
    r.phase = e.unsent      ? SG_PHASE_CONNECT
              : e.items > 0 ? SG_PHASE_STREAMING
                            : SG_PHASE_WAIT_FIRST_ITEM;
    r.sent = !e.unsent;
    r.headers_received = !e.unsent;
    r.http_status = e.status != 0 ? e.status : (e.unsent ? 0 : 200);
    r.items = e.items;
    r.first_item_ns = e.items > 0 ? SG_MS(20) : -1;
    r.usage = e.usage;
    r.text_bytes = e.text;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    return v;
}

/* A GET that may take @attempts attempts, started at T0. */
static void start(sg_op *op, sg_op_options *o, uint32_t attempts) {
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, attempts), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(1), SG_MS(1)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
}

static void next(sg_op *op, int64_t now) {
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, now, &p), 0);
}

static void expect_usage(const sg_op_attempt *a, int64_t in, int64_t out, int64_t cached,
                         int64_t reasoning, sg_usage_source source) {
    assert_int_equal(a->usage.input_tokens, in);
    assert_int_equal(a->usage.output_tokens, out);
    assert_int_equal(a->usage.cached_input_tokens, cached);
    assert_int_equal(a->usage.reasoning_tokens, reasoning);
    assert_int_equal(a->usage.source, source);
}

static void expect_tokens(const sg_op *op, sg_usage_fate fate, int64_t in, int64_t out,
                          int64_t cached, int64_t reasoning) {
    assert_int_equal(sg_op_tokens(op, fate, SG_TOKENS_INPUT), in);
    assert_int_equal(sg_op_tokens(op, fate, SG_TOKENS_OUTPUT), out);
    assert_int_equal(sg_op_tokens(op, fate, SG_TOKENS_CACHED_INPUT), cached);
    assert_int_equal(sg_op_tokens(op, fate, SG_TOKENS_REASONING), reasoning);
}

/* The report has @want in it. */
static void report_has(const sg_op *op, const char *want) {
    static char buf[32768];
    assert_int_equal(sg_op_report_write(op, 0, buf, sizeof(buf), NULL), 0);
    if (strstr(buf, want) == NULL) {
        print_error("missing %s in %s\n", want, buf);
        fail();
    }
}

/* A clean stream that gave its figures: the attempt's usage is the
 * provider's, kept; nothing discarded (exactly 0); nothing unaccounted. */
static void a_clean_stream_keeps_the_providers_figures(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start(op, o, 1);
    next(op, T0);
    const sg_op_usage read = {2006, 300, 1920, 256, SG_USAGE_PROVIDER};
    done(op, 1, T0 + SG_MS(50), (end){SG_OUTCOME_OK, 0, 10, &read, 40, false});
    expect_usage(sg_op_attempt_at(op, 0), 2006, 300, 1920, 256, SG_USAGE_PROVIDER);
    expect_tokens(op, SG_USAGE_KEPT, 2006, 300, 1920, 256);
    expect_tokens(op, SG_USAGE_DISCARDED, 0, 0, 0, 0);
    assert_false(sg_op_tokens_estimated(op, SG_USAGE_KEPT));
    assert_int_equal(sg_op_attempts_unaccounted(op), 0);
    assert_true(sg_op_cost(op, SG_USAGE_KEPT) == -1.0); /* no price, no cost */
    report_has(op, "\"usage\":{\"input_tokens\":2006,\"output_tokens\":300,"
                   "\"cached_input_tokens\":1920,\"reasoning_tokens\":256,"
                   "\"source\":\"provider\"}");
    report_has(op, "\"usage\":{\"kept\":{\"input_tokens\":2006,\"output_tokens\":300,"
                   "\"cached_input_tokens\":1920,\"reasoning_tokens\":256,"
                   "\"estimated\":false},\"discarded\":{\"input_tokens\":0,"
                   "\"output_tokens\":0,\"cached_input_tokens\":0,"
                   "\"reasoning_tokens\":0,\"estimated\":false},"
                   "\"attempts_unaccounted\":0},\"attempts\":");
}

/* A stream that broke after its tokens, before its usage: the output is
 * estimated from the text it delivered, ceil(bytes / 4) (plus a
 * reasoning figure the provider gave); the operation failed, so nothing
 * is kept and the attempt is discarded. */
static void a_cut_stream_has_its_output_estimated(void **state) {
    (void)state;
    static const struct {
        uint64_t text;
        int64_t in, reasoning, out;
    } cases[] = {
        {20, -1, -1, 5},     /* 5 tokens of "tok<i>" */
        {21, -1, -1, 6},     /* rounded up */
        {0, 148, -1, 0},     /* Anthropic cut: its input, no text yet */
        {12, 9, 30, 3 + 30}, /* Gemini's thoughts, counted, not streamed */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        SG_AUTO_OPTIONS(o);
        SG_AUTO_OP(op);
        start(op, o, 1);
        next(op, T0);
        sg_op_usage read = none;
        read.input_tokens = cases[i].in;
        read.reasoning_tokens = cases[i].reasoning;
        done(op, 1, T0 + SG_MS(80),
             (end){SG_OUTCOME_TRUNCATED, 0, 5, &read, cases[i].text, false});
        assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_PARTIAL_STREAM);
        expect_usage(sg_op_attempt_at(op, 0), cases[i].in, cases[i].out, -1,
                     cases[i].reasoning, SG_USAGE_ESTIMATE);
        expect_tokens(op, SG_USAGE_KEPT, -1, -1, -1, -1); /* nothing kept */
        expect_tokens(op, SG_USAGE_DISCARDED, cases[i].in, cases[i].out, -1,
                      cases[i].reasoning);
        assert_true(sg_op_tokens_estimated(op, SG_USAGE_DISCARDED));
        assert_false(sg_op_tokens_estimated(op, SG_USAGE_KEPT));
        assert_int_equal(sg_op_attempts_unaccounted(op), 0);
    }
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start(op, o, 1);
    next(op, T0);
    done(op, 1, T0 + SG_MS(80), (end){SG_OUTCOME_TRUNCATED, 0, 5, &none, 20, false});
    report_has(op, "\"usage\":{\"input_tokens\":null,\"output_tokens\":5,"
                   "\"cached_input_tokens\":null,\"reasoning_tokens\":null,"
                   "\"source\":\"estimate\"}");
    report_has(op, "\"usage\":{\"kept\":null,\"discarded\":{\"input_tokens\":null,"
                   "\"output_tokens\":5,\"cached_input_tokens\":null,"
                   "\"reasoning_tokens\":null,\"estimated\":true},"
                   "\"attempts_unaccounted\":0}");
}

/* A first-token timeout, then a retry that reports its usage: the first
 * attempt's input is the second's (an estimate: the same request's
 * prefill), its output 0 (it delivered nothing), and it is discarded.
 * Its observer saw it as it was when it ended: nothing known. */
static sg_op_usage seen[4];
static int on_end(const sg_op *op, const sg_op_attempt *rec, void *ud) {
    (void)op;
    (void)ud;
    seen[rec->n - 1] = rec->usage;
    return 0;
}

static void a_retried_first_token_failure_is_discarded(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    sg_op_observer *obs = NULL;
    assert_int_equal(sg_op_observer_new(&obs), 0);
    assert_int_equal(sg_op_observer_set_on_attempt_end(obs, on_end), 0);
    assert_int_equal(sg_op_options_set_observer(o, obs, NULL), 0);
    start(op, o, 2);
    next(op, T0);
    sg_op_verdict v = done(op, 1, T0 + SG_MS(500),
                           (end){SG_OUTCOME_FIRST_ITEM_TIMEOUT, 0, 0, &none, 0, false});
    assert_int_equal(v.decision, SG_OP_RETRY);
    expect_usage(sg_op_attempt_at(op, 0), -1, -1, -1, -1, SG_USAGE_NONE);
    next(op, v.retry_at);
    const sg_op_usage read = {100, 20, 60, -1, SG_USAGE_PROVIDER};
    done(op, 2, v.retry_at + SG_MS(300), (end){SG_OUTCOME_OK, 0, 20, &read, 80, false});
    expect_usage(sg_op_attempt_at(op, 0), 100, 0, 60, -1, SG_USAGE_ESTIMATE);
    assert_int_equal(seen[0].source, SG_USAGE_NONE);
    assert_int_equal(seen[1].source, SG_USAGE_PROVIDER);
    expect_tokens(op, SG_USAGE_KEPT, 100, 20, 60, -1);
    expect_tokens(op, SG_USAGE_DISCARDED, 100, 0, 60, -1);
    assert_true(sg_op_tokens_estimated(op, SG_USAGE_DISCARDED));
    assert_int_equal(sg_op_attempts_unaccounted(op), 0);
    sg_op_free(op);
    op = NULL;
    sg_op_observer_free(obs);
}

/* An operation that failed before any usage came: nothing kept, nothing
 * known of what was discarded, and every sent attempt unaccounted - but
 * not one never sent, nor one the server refused with a 429. */
static void a_failed_operation_has_nothing_kept(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start(op, o, 4);
    int64_t t = T0;
    next(op, t);
    sg_op_verdict v = done(op, 1, t += SG_MS(5),
                           (end){SG_OUTCOME_CONNECT_TIMEOUT, 0, 0, &none, 0, true});
    next(op, v.retry_at);
    v = done(op, 2, v.retry_at + SG_MS(5),
             (end){SG_OUTCOME_HTTP_ERROR, 429, 0, NULL, 0, false});
    next(op, v.retry_at);
    v = done(op, 3, v.retry_at + SG_MS(500),
             (end){SG_OUTCOME_FIRST_ITEM_TIMEOUT, 0, 0, &none, 0, false});
    next(op, v.retry_at);
    done(op, 4, v.retry_at + SG_MS(500),
         (end){SG_OUTCOME_FIRST_ITEM_TIMEOUT, 0, 0, &none, 0, false});
    assert_true(sg_op_finished(op));
    assert_int_not_equal(sg_op_outcome(op), SG_OUTCOME_OK);
    expect_tokens(op, SG_USAGE_KEPT, -1, -1, -1, -1);
    expect_tokens(op, SG_USAGE_DISCARDED, -1, -1, -1, -1);
    assert_int_equal(sg_op_attempts_unaccounted(op), 2);
    report_has(op, "\"usage\":{\"kept\":null,\"discarded\":{\"input_tokens\":null,"
                   "\"output_tokens\":null,\"cached_input_tokens\":null,"
                   "\"reasoning_tokens\":null,\"estimated\":false},"
                   "\"attempts_unaccounted\":2}");
}

/* Hedging: the loser is cancelled before it delivers; when the winner
 * reports its input, the loser's is that (its prefill), its output what
 * it received - and it is discarded.  A loser that ends after the
 * operation did gets it at its own end. */
static void a_hedge_loser_is_discarded(void **state) {
    (void)state;
    for (int late = 0; late < 2; late++) {
        SG_AUTO_OPTIONS(o);
        SG_AUTO_OP(op);
        assert_int_equal(sg_op_options_set_hedging(o, SG_MS(200), 1), 0);
        start(op, o, 2);
        next(op, T0);
        sg_op_plan p;
        assert_int_equal(sg_op_hedge(op, T0 + SG_MS(200), &p), 0);
        assert_int_equal(sg_op_hedge_won(op, 2), 1); /* the hedge's first token */
        const sg_op_usage read = {500, 40, -1, -1, SG_USAGE_PROVIDER};
        if (!late) {
            done(op, 1, T0 + SG_MS(260),
                 (end){SG_OUTCOME_CANCELLED, 0, 0, &none, 8, false});
            expect_usage(sg_op_attempt_at(op, 0), -1, 2, -1, -1, SG_USAGE_ESTIMATE);
        }
        done(op, 2, T0 + SG_MS(900), (end){SG_OUTCOME_OK, 0, 30, &read, 160, false});
        if (late) {
            done(op, 1, T0 + SG_MS(901),
                 (end){SG_OUTCOME_CANCELLED, 0, 0, &none, 8, false});
        }
        assert_int_equal(sg_op_attempt_at(op, 0)->reason, SG_OP_REASON_HEDGE_LOST);
        expect_usage(sg_op_attempt_at(op, 0), 500, 2, -1, -1, SG_USAGE_ESTIMATE);
        expect_tokens(op, SG_USAGE_KEPT, 500, 40, -1, -1);
        expect_tokens(op, SG_USAGE_DISCARDED, 500, 2, -1, -1);
        assert_int_equal(sg_op_attempts_unaccounted(op), 0);
    }
}

/* An input is copied only from an attempt on the same endpoint (another
 * endpoint may carry another body, another model), and never a copy of a
 * copy. */
static void input_is_copied_from_the_same_endpoint_only(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    const char *urls[] = {"https://a.example/v1", "https://b.example/v1"};
    assert_int_equal(sg_op_options_set_endpoints(o, urls, 2), 0);
    start(op, o, 3);
    next(op, T0); /* endpoint 0 */
    sg_op_verdict v = done(op, 1, T0 + SG_MS(500),
                           (end){SG_OUTCOME_FIRST_ITEM_TIMEOUT, 0, 0, &none, 0, false});
    next(op, v.retry_at); /* endpoint 1 */
    const sg_op_usage read = {100, 20, -1, -1, SG_USAGE_PROVIDER};
    done(op, 2, v.retry_at + SG_MS(300), (end){SG_OUTCOME_OK, 0, 20, &read, 80, false});
    assert_int_equal(sg_op_attempt_at(op, 1)->endpoint, 1);
    expect_usage(sg_op_attempt_at(op, 0), -1, -1, -1, -1, SG_USAGE_NONE);
    assert_int_equal(sg_op_attempts_unaccounted(op), 1);
}

/* Without a profile nothing is read: no usage, and an attempt sent is
 * unaccounted for. */
static void without_a_profile_nothing_is_known(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start(op, o, 1);
    next(op, T0);
    done(op, 1, T0 + SG_MS(50), (end){SG_OUTCOME_OK, 0, 10, NULL, 400, false});
    expect_usage(sg_op_attempt_at(op, 0), -1, -1, -1, -1, SG_USAGE_NONE);
    expect_tokens(op, SG_USAGE_KEPT, -1, -1, -1, -1);
    assert_int_equal(sg_op_attempts_unaccounted(op), 1);
    report_has(op, "\"provider_error\":null,\"usage\":null,\"profile\":null}");
}

/* Prices per endpoint: (input - cached) x in + cached x cached + output x
 * out per million, figures chosen so that the sums are exact in binary. */
static void prices_give_the_expected_cost(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    const char *urls[] = {"https://a.example/v1", "https://b.example/v1"};
    assert_int_equal(sg_op_options_set_endpoints(o, urls, 2), 0);
    /* endpoint 0: cached at the input price; endpoint 1: its own */
    assert_int_equal(sg_op_options_set_price(o, 0, 2.0, 8.0, -1), 0);
    assert_int_equal(sg_op_options_set_price(o, 1, 4.0, 16.0, 1.0), 0);
    start(op, o, 2);
    next(op, T0); /* endpoint 0, cut after tokens: partial - no retry */
    const sg_op_usage cut = {31250, -1, 15625, -1, SG_USAGE_PROVIDER};
    done(op, 1, T0 + SG_MS(100),
         (end){SG_OUTCOME_TRUNCATED, 0, 3, &cut, 4 * 15625, false});
    /* (31250 - 15625) x 2 + 15625 x 2 + 15625 (estimated) x 8 = 187500 */
    assert_true(sg_op_cost(op, SG_USAGE_DISCARDED) == 0.1875);
    assert_true(sg_op_cost(op, SG_USAGE_KEPT) == 0.0); /* nothing kept */
    report_has(op, "\"cost\":{\"kept\":0,\"discarded\":0.1875}");

    SG_AUTO_OP(op2);
    assert_int_equal(sg_op_start(op2, o, T0), 0);
    next(op2, T0); /* endpoint 0: a first-token timeout */
    sg_op_verdict v = done(op2, 1, T0 + SG_MS(500),
                           (end){SG_OUTCOME_FIRST_ITEM_TIMEOUT, 0, 0, &none, 0, false});
    next(op2, v.retry_at); /* endpoint 1 */
    const sg_op_usage ok = {62500, 31250, 31250, -1, SG_USAGE_PROVIDER};
    done(op2, 2, v.retry_at + SG_MS(100), (end){SG_OUTCOME_OK, 0, 9, &ok, 36, false});
    /* (62500 - 31250) x 4 + 31250 x 1 + 31250 x 16 = 656250 */
    assert_true(sg_op_cost(op2, SG_USAGE_KEPT) == 0.65625);
    assert_true(sg_op_cost(op2, SG_USAGE_DISCARDED) == 0.0); /* nothing known */
    report_has(op2, "\"cost\":{\"kept\":0.65625,\"discarded\":0}");
}

/* The price setter checks what it is given; a copy of the options keeps
 * the prices. */
static void prices_are_checked_and_copied(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_price(NULL, 0, 1, 1, 1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_price(o, 0, -1, 1, 1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_price(o, 0, 1, -0.5, 1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_price(o, 0, NAN, 1, 1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_price(o, 0, 1, INFINITY, 1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_price(o, 0, 1, 1, NAN), SG_EINVAL);
    assert_int_equal(sg_op_options_set_price(o, SG_OP_MAX_ENDPOINTS, 1, 1, 1), SG_ERANGE);
    assert_int_equal(sg_op_options_set_price(o, 15, 0.5, 1, -1), 0);
    sg_op_options *copy = NULL;
    assert_int_equal(sg_op_options_dup(&copy, o), 0);
    sg_op_options_free(o);
    o = NULL; /* the copy holds its own prices */
    SG_AUTO_OP(op);
    const char *urls[16];
    for (int i = 0; i < 16; i++) {
        urls[i] = "https://a.example/";
    }
    assert_int_equal(sg_op_options_set_endpoints(copy, urls, 16), 0);
    assert_int_equal(sg_op_options_set_max_attempts(copy, 1), 0);
    assert_int_equal(sg_op_start(op, copy, T0), 0);
    next(op, T0);
    const sg_op_usage read = {1000000, 0, -1, -1, SG_USAGE_PROVIDER};
    done(op, 1, T0 + SG_MS(1), (end){SG_OUTCOME_OK, 0, 1, &read, 0, false});
    /* endpoint 0 has no price: its attempt adds nothing */
    assert_true(sg_op_cost(op, SG_USAGE_KEPT) == 0.0);
    sg_op_options_free(copy);
}

/* Nothing answers plausibly before the end, or for nothing. */
static void the_accessors_say_none_for_nothing(void **state) {
    (void)state;
    assert_int_equal(sg_op_tokens(NULL, SG_USAGE_KEPT, SG_TOKENS_INPUT), -1);
    assert_false(sg_op_tokens_estimated(NULL, SG_USAGE_KEPT));
    assert_int_equal(sg_op_attempts_unaccounted(NULL), 0);
    assert_true(sg_op_cost(NULL, SG_USAGE_KEPT) == -1.0);
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_price(o, 0, 1, 1, 1), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_tokens(op, SG_USAGE_DISCARDED, SG_TOKENS_INPUT), -1);
    start(op, o, 1);
    next(op, T0);
    /* running: not ended */
    assert_int_equal(sg_op_tokens(op, SG_USAGE_DISCARDED, SG_TOKENS_INPUT), -1);
    assert_true(sg_op_cost(op, SG_USAGE_DISCARDED) == -1.0);
    const sg_op_usage read = {7, 3, -1, -1, SG_USAGE_PROVIDER};
    done(op, 1, T0 + SG_MS(1), (end){SG_OUTCOME_OK, 0, 1, &read, 12, false});
    assert_int_equal(sg_op_tokens(op, (sg_usage_fate)2, SG_TOKENS_INPUT), -1);
    assert_int_equal(sg_op_tokens(op, SG_USAGE_KEPT, (sg_token_kind)4), -1);
    assert_true(sg_op_cost(op, (sg_usage_fate)2) == -1.0);
    assert_int_equal(sg_op_tokens(op, SG_USAGE_KEPT, SG_TOKENS_INPUT), 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_clean_stream_keeps_the_providers_figures),
        cmocka_unit_test(a_cut_stream_has_its_output_estimated),
        cmocka_unit_test(a_retried_first_token_failure_is_discarded),
        cmocka_unit_test(a_failed_operation_has_nothing_kept),
        cmocka_unit_test(a_hedge_loser_is_discarded),
        cmocka_unit_test(input_is_copied_from_the_same_endpoint_only),
        cmocka_unit_test(without_a_profile_nothing_is_known),
        cmocka_unit_test(prices_give_the_expected_cost),
        cmocka_unit_test(prices_are_checked_and_copied),
        cmocka_unit_test(the_accessors_say_none_for_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
