/*
 * A half-open breaker's probe (docs/design.md, "Endpoint health"): one
 * attempt at a time tests the endpoint, and every way that attempt can
 * end gives its slot and the probe back - a success, an HTTP error, an
 * in-band error, a first-token or idle timeout, a cancel, a lost hedge,
 * the budget's end, the operation freed or started anew while it runs,
 * the operation freed while it waits, a fallback.  A probe given back
 * lets the next attempt be the probe; one never given back would hold
 * the endpoint back for ever.  And a probe that delivered its first item
 * has answered: the breaker closes then, not when its stream ends
 * minutes later.  Time is driven by hand; operations are driven through
 * the policy as a transport drives them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/health.h>
#include <streamguard/unstable/op.h>

#include "policy/internal.h"

#include "health_run.h"

#define COOL SG_SEC(5)
#define HALF (T0 + COOL) /* half-open from then */

/* A table whose endpoint URL is half-open from HALF: one failure opens
 * it at T0 for COOL. */
static sg_health *half_open(void) {
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_breaker_failures(h, 1), 0);
    assert_int_equal(sg_health_set_breaker_cooldown(h, COOL), 0);
    sg_op_options *o = options(h, SG_SEC(60));
    one(o, T0, status(500));
    sg_op_options_free(o);
    assert_int_equal(state_at(h, HALF), SG_HEALTH_HALF_OPEN);
    return h;
}

/* URL's entry of @h at @now. */
static sg_health_entry entry(sg_health *h, int64_t now) {
    seen s = look(h, now);
    for (int i = 0; i < s.n && i < 4; i++) {
        if (strcmp(s.names[i], NAME) == 0) {
            return s.e[i];
        }
    }
    fail_msg("no entry for %s", NAME);
    return s.e[0];
}

/* While @probe is out at @now, no other attempt goes to the endpoint. */
static void held(sg_health *h, const sg_op_options *o, int64_t now) {
    sg_op *other = start(o, now);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(other, now, &p), SG_EINPROGRESS);
    assert_int_equal(p.reason, SG_OP_REASON_CIRCUIT_OPEN);
    sg_op_free(other);
    assert_int_equal(entry(h, now).inflight, 1);
}

/* Nothing is in flight at @now and the endpoint is @st; when half-open,
 * the next attempt is the probe (it goes, and holds the others back). */
static void given_back(sg_health *h, const sg_op_options *o, int64_t now,
                       sg_health_state st) {
    sg_health_entry e = entry(h, now);
    assert_int_equal(e.inflight, 0);
    assert_int_equal(e.state, st);
    if (st == SG_HEALTH_HALF_OPEN || st == SG_HEALTH_CLOSED) {
        sg_op *next = start(o, now);
        (void)go(next, now);
        if (st == SG_HEALTH_HALF_OPEN) {
            held(h, o, now);
        }
        sg_op_free(next);
        assert_int_equal(entry(h, now).inflight, 0);
    }
}

/* The probe: an operation on @o whose attempt goes at HALF, holding the
 * endpoint back. */
static sg_op *probe_out(sg_health *h, const sg_op_options *o) {
    sg_op *op = start(o, HALF);
    (void)go(op, HALF);
    held(h, o, HALF);
    return op;
}

static sg_op_result items(sg_op_result r, uint64_t n) {
    r.items = n;
    r.first_item_ns = n > 0 ? SG_MS(100) : -1;
    r.partial = n > 0 && r.outcome != SG_OUTCOME_OK;
    return r;
}

/* Each end of the probe's attempt, by what it says of the endpoint. */
static void every_end_gives_the_probe_back(void **state) {
    (void)state;
    static const struct {
        const char *what;
        sg_op_result r;
        sg_health_state after;
    } ends[] = {
        {"ok", {.outcome = SG_OUTCOME_OK}, SG_HEALTH_CLOSED},
        {"503", {.outcome = SG_OUTCOME_HTTP_ERROR}, SG_HEALTH_OPEN},
        {"404", {.outcome = SG_OUTCOME_HTTP_ERROR}, SG_HEALTH_HALF_OPEN},
        {"in-band overload", {.outcome = SG_OUTCOME_PROVIDER_ERROR}, SG_HEALTH_OPEN},
        {"in-band final", {.outcome = SG_OUTCOME_PROVIDER_ERROR}, SG_HEALTH_HALF_OPEN},
        {"first-token timeout",
         {.outcome = SG_OUTCOME_FIRST_ITEM_TIMEOUT},
         SG_HEALTH_OPEN},
        {"idle timeout", {.outcome = SG_OUTCOME_IDLE_TIMEOUT}, SG_HEALTH_OPEN},
        {"attempt timeout, nothing",
         {.outcome = SG_OUTCOME_ATTEMPT_TIMEOUT},
         SG_HEALTH_OPEN},
        {"cancelled", {.outcome = SG_OUTCOME_CANCELLED}, SG_HEALTH_HALF_OPEN},
        {"budget out", {.outcome = SG_OUTCOME_BUDGET_EXHAUSTED}, SG_HEALTH_HALF_OPEN},
        {"connect timeout", {.outcome = SG_OUTCOME_CONNECT_TIMEOUT}, SG_HEALTH_OPEN},
        {"no connection", {.outcome = SG_OUTCOME_TRANSPORT_ERROR}, SG_HEALTH_OPEN},
        {"cap", {.outcome = SG_OUTCOME_CAP_EXCEEDED}, SG_HEALTH_HALF_OPEN},
        {"protocol error", {.outcome = SG_OUTCOME_PROTOCOL_ERROR}, SG_HEALTH_HALF_OPEN},
    };
    for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
        print_message("the probe ends: %s\n", ends[i].what);
        sg_health *h = half_open();
        sg_op_options *o = options(h, SG_SEC(60));
        sg_op *probe = probe_out(h, o);
        sg_op_result r = res(ends[i].r.outcome, SG_PHASE_WAIT_FIRST_ITEM, 0);
        switch (ends[i].r.outcome) {
        case SG_OUTCOME_OK:
            r = items(status(200), 3);
            break;
        case SG_OUTCOME_HTTP_ERROR:
            r = status(ends[i].after == SG_HEALTH_OPEN ? 503 : 404);
            break;
        case SG_OUTCOME_PROVIDER_ERROR:
            r = res(SG_OUTCOME_PROVIDER_ERROR, SG_PHASE_STREAMING, 200);
            r.provider_type = ends[i].after == SG_HEALTH_OPEN ? "overloaded_error"
                                                              : "invalid_request_error";
            r.provider_retryable = ends[i].after == SG_HEALTH_OPEN;
            break;
        case SG_OUTCOME_IDLE_TIMEOUT:
            r = items(res(SG_OUTCOME_IDLE_TIMEOUT, SG_PHASE_STREAMING, 200), 2);
            break;
        case SG_OUTCOME_CONNECT_TIMEOUT:
        case SG_OUTCOME_TRANSPORT_ERROR:
            r = res(ends[i].r.outcome, SG_PHASE_CONNECT, 0);
            break;
        case SG_OUTCOME_CAP_EXCEEDED:
            r = items(res(SG_OUTCOME_CAP_EXCEEDED, SG_PHASE_STREAMING, 200), 5);
            break;
        default:
            break;
        }
        const int64_t t = HALF + SG_SEC(1);
        (void)end(probe, t, r);
        given_back(h, o, t, ends[i].after);
        if (ends[i].after == SG_HEALTH_OPEN) {
            /* open for twice the cooldown: then the next one is the probe */
            given_back(h, o, t + 2 * COOL, SG_HEALTH_HALF_OPEN);
        }
        sg_op_free(probe);
        assert_int_equal(entry(h, t).inflight, 0);
        sg_op_options_free(o);
        sg_health_free(h);
    }
}

/* The operation freed while its probe runs (sg_curl_op_free mid-stream),
 * or before the request was ever sent (planned, never launched), or
 * started anew: what the attempt held goes back with it. */
static void freed_or_restarted_mid_attempt(void **state) {
    (void)state;
    sg_health *h = half_open();
    sg_op_options *o = options(h, SG_SEC(60));
    sg_op *probe = probe_out(h, o);
    sg_op_free(probe); /* mid-stream, or never sent: the same to the policy */
    given_back(h, o, HALF, SG_HEALTH_HALF_OPEN);

    probe = probe_out(h, o);
    assert_int_equal(sg_op_start(probe, o, HALF + SG_SEC(1)), 0); /* anew */
    given_back(h, o, HALF + SG_SEC(1), SG_HEALTH_HALF_OPEN);
    (void)go(probe, HALF + SG_SEC(1)); /* its own attempt is the probe now */
    held(h, o, HALF + SG_SEC(1));
    sg_op_free(probe);
    given_back(h, o, HALF + SG_SEC(1), SG_HEALTH_HALF_OPEN);

    /* an operation waiting for the probe holds nothing when freed */
    probe = probe_out(h, o);
    sg_op *waiting = start(o, HALF);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(waiting, HALF, &p), SG_EINPROGRESS);
    sg_op_free(waiting);
    assert_int_equal(entry(h, HALF).inflight, 1);
    (void)end(probe, HALF, res(SG_OUTCOME_CANCELLED, SG_PHASE_WAIT_HEADERS, 0));
    given_back(h, o, HALF, SG_HEALTH_HALF_OPEN);
    sg_op_free(probe);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* A hedge that is the probe and loses, a probe whose hedge wins: the
 * loser's end (cancelled, hedge_lost) says nothing and gives it back. */
static void a_hedge_loser_gives_the_probe_back(void **state) {
    (void)state;
    sg_health *h = half_open();
    sg_op_options *o = options(h, SG_SEC(60));
    sg_op_options *ho = options(h, SG_SEC(60));
    const char *urls[] = {URL2, URL};
    assert_int_equal(sg_op_options_set_endpoints(ho, urls, 2), 0);
    assert_int_equal(sg_op_options_set_method(ho, "GET"), 0);
    assert_int_equal(sg_op_options_set_hedging(ho, SG_SEC(1), 1), 0);

    /* the first attempt on URL2 (closed), the hedge on URL: the probe */
    sg_op *op = start(ho, HALF);
    sg_op_plan p = go(op, HALF);
    assert_int_equal(p.endpoint, 0);
    assert_int_equal(sg_op_hedge(op, HALF + SG_SEC(1), &p), 0);
    assert_int_equal(p.endpoint, 1);
    held(h, o, HALF + SG_SEC(1));
    assert_int_equal(sg_op_hedge_won(op, 1), 1); /* the first delivers first */
    sg_op_result r = items(status(200), 4);
    r.attempt = 1;
    (void)end(op, HALF + SG_SEC(2), r); /* the winner ends the operation */
    assert_true(sg_op_finished(op));
    r = res(SG_OUTCOME_CANCELLED, SG_PHASE_WAIT_HEADERS, 0);
    r.attempt = 2;
    sg_op_verdict v = end(op, HALF + SG_SEC(2), r); /* the loser, cancelled */
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_LOST);
    given_back(h, o, HALF + SG_SEC(2), SG_HEALTH_HALF_OPEN);
    sg_op_free(op);

    /* the loser never recorded: freed with the operation */
    op = start(ho, HALF);
    (void)go(op, HALF);
    assert_int_equal(sg_op_hedge(op, HALF + SG_SEC(1), &p), 0);
    held(h, o, HALF + SG_SEC(1));
    assert_int_equal(sg_op_hedge_won(op, 1), 1);
    r = items(status(200), 4);
    r.attempt = 1;
    (void)end(op, HALF + SG_SEC(2), r);
    sg_op_free(op);
    given_back(h, o, HALF + SG_SEC(2), SG_HEALTH_HALF_OPEN);

    sg_op_options_free(ho);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* The probe fails and its operation retries: the retry goes to the
 * fallback (the endpoint is open again), holding nothing of the first. */
static void a_fallback_after_the_probe_holds_nothing_of_it(void **state) {
    (void)state;
    sg_health *h = half_open();
    sg_op_options *o = options(h, SG_SEC(60));
    sg_op_options *fo = options(h, SG_SEC(60));
    const char *urls[] = {URL, URL2};
    assert_int_equal(sg_op_options_set_endpoints(fo, urls, 2), 0);
    assert_int_equal(sg_op_options_set_method(fo, "GET"), 0);
    sg_op *op = start(fo, HALF);
    sg_op_plan p = go(op, HALF);
    assert_int_equal(p.endpoint, 0);
    held(h, o, HALF);
    sg_op_verdict v = end(op, HALF, status(503));
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(entry(h, HALF).state, SG_HEALTH_OPEN);
    p = go(op, v.retry_at);
    assert_int_equal(p.endpoint, 1);
    assert_int_equal(entry(h, v.retry_at).inflight, 0);
    (void)end(op, v.retry_at, items(status(200), 2));
    sg_op_free(op);
    given_back(h, o, HALF + 2 * COOL, SG_HEALTH_HALF_OPEN);
    sg_op_options_free(fo);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* A probe that delivered its first item has answered: the breaker closes
 * then, and the others go while its stream runs on (for minutes, a long
 * answer read by a slow client).  Its end then counts as any attempt's. */
static void the_probe_answers_at_its_first_item(void **state) {
    (void)state;
    sg_health *h = half_open();
    sg_op_options *o = options(h, SG_SEC(600));
    sg_op *probe = probe_out(h, o);
    assert_true(sg__op_probe_out(probe, 1));
    sg__op_first_item(probe, 1, HALF + SG_MS(300));
    assert_false(sg__op_probe_out(probe, 1));
    sg_health_entry e = entry(h, HALF + SG_MS(300));
    assert_int_equal(e.state, SG_HEALTH_CLOSED);
    assert_int_equal(e.inflight, 1); /* still streaming */
    assert_int_equal(e.opens, 0);
    sg_op *other = start(o, HALF + SG_SEC(1));
    (void)go(other, HALF + SG_SEC(1)); /* goes: not held back */
    assert_int_equal(entry(h, HALF + SG_SEC(1)).inflight, 2);
    (void)end(other, HALF + SG_SEC(2), items(status(200), 3));
    sg_op_free(other);
    /* minutes later it stalls: one failure (breaker_failures 1) opens it
     * again, for the first cooldown - it is no probe now */
    const int64_t t = HALF + SG_SEC(300);
    (void)end(probe, t, items(res(SG_OUTCOME_IDLE_TIMEOUT, SG_PHASE_STREAMING, 200), 9));
    e = entry(h, t);
    assert_int_equal(e.state, SG_HEALTH_OPEN);
    assert_int_equal(e.inflight, 0);
    assert_int_equal(e.free_at, t + COOL);
    sg_op_free(probe);
    given_back(h, o, t + COOL, SG_HEALTH_HALF_OPEN);

    /* the next probe: told once; an attempt that is no probe, or none,
     * changes nothing */
    sg_op *a = start(o, t + COOL);
    (void)go(a, t + COOL);
    held(h, o, t + COOL);
    sg__op_first_item(a, 1, t + COOL + SG_MS(10));
    assert_int_equal(entry(h, t + COOL + SG_MS(10)).state, SG_HEALTH_CLOSED);
    sg_op *b = start(o, t + COOL + SG_MS(10));
    (void)go(b, t + COOL + SG_MS(10)); /* closed: no probe */
    assert_false(sg__op_probe_out(b, 1));
    sg__op_first_item(b, 1, t + COOL + SG_MS(20));
    sg__op_first_item(a, 1, t + COOL + SG_MS(20)); /* once only */
    assert_false(sg__op_probe_out(a, 1));
    assert_false(sg__op_probe_out(a, 2)); /* never planned */
    assert_int_equal(entry(h, t + COOL + SG_MS(20)).inflight, 2);
    (void)end(a, t + COOL + SG_SEC(1), items(status(200), 3));
    (void)end(b, t + COOL + SG_SEC(1), items(status(200), 3));
    sg_op_free(a);
    sg_op_free(b);
    assert_int_equal(entry(h, t + COOL + SG_SEC(1)).inflight, 0);
    sg_op_options_free(o);
    sg_health_free(h);
}

int main(void) {
    (void)with_retry_after; /* health_run.h's, not needed here */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_end_gives_the_probe_back),
        cmocka_unit_test(freed_or_restarted_mid_attempt),
        cmocka_unit_test(a_hedge_loser_gives_the_probe_back),
        cmocka_unit_test(a_fallback_after_the_probe_holds_nothing_of_it),
        cmocka_unit_test(the_probe_answers_at_its_first_item),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
