/*
 * First-token hedging in the policy: when a hedge is due, what it leases,
 * who wins, how losers and failed hedges are recorded, the retry budget
 * and the safety rule.  Time is driven by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/http.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#define T0 SG_SEC(1000)

static void opts(sg_op_options *o, const char *method, uint32_t hedges) {
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(10)), 0);
    assert_int_equal(sg_op_options_set_method(o, method), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 4), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(10), SG_MS(10)), 0);
    assert_int_equal(sg_op_options_set_hedging(o, SG_MS(200), hedges), 0);
}

/* The result of attempt @n at @now (@ra: its Retry-After, NULL none). */
static sg_op_verdict result_ra(sg_op *op, uint32_t n, int64_t now, sg_outcome oc,
                               int status, uint64_t items, const char *ra) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.attempt = n;
    r.outcome = oc;
    r.phase = items > 0 ? SG_PHASE_STREAMING : SG_PHASE_WAIT_FIRST_ITEM;
    r.sent = true;
    r.headers_received = status != 0;
    r.http_status = status;
    r.retry_after = ra;
    r.retry_after_len = ra != NULL ? strlen(ra) : 0;
    r.items = items;
    r.first_item_ns = items > 0 ? SG_MS(20) : -1;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    return v;
}

static sg_op_verdict result(sg_op *op, uint32_t n, int64_t now, sg_outcome oc, int status,
                            uint64_t items) {
    return result_ra(op, n, now, oc, status, items, NULL);
}

/* A GET allowed @hedges hedges: its first attempt at T0, and a hedge
 * 200 ms later (@p its plan). */
static void original_and_hedge(sg_op *op, sg_op_plan *p, uint32_t hedges) {
    SG_AUTO_OPTIONS(o);
    opts(o, "GET", hedges);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, p), 0);
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(200), p), 0);
}

static void only_a_request_safe_to_repeat_is_hedged(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts(o, "POST", 1);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), SG_EUNSAFE);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "k-1"), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    opts(o, "POST", 1);
    assert_int_equal(sg_op_options_set_idempotent(o, true), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    /* bounds */
    assert_int_equal(sg_op_options_set_hedging(o, SG_MS(1), 0), SG_ERANGE);
    assert_int_equal(sg_op_options_set_hedging(o, SG_MS(1), SG_OP_MAX_HEDGES + 1),
                     SG_ERANGE);
    assert_int_equal(sg_op_options_set_hedging(o, -1, 1), SG_ERANGE);
    assert_int_equal(sg_op_options_set_hedging(o, 0, 0), 0); /* off */
    assert_int_equal(sg_op_options_set_hedging(NULL, 0, 0), SG_EINVAL);
}

/* An attempt that ends with a Retry-After while a hedge still runs names
 * the server's time to come back: the retry the hedge's failure decides
 * later waits for it, not for a backoff of its own (one endpoint). */
static void a_retry_after_beside_a_running_hedge_is_kept(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    original_and_hedge(op, &p, 1);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.attempt = 1;
    r.outcome = SG_OUTCOME_HTTP_ERROR;
    r.phase = SG_PHASE_WAIT_HEADERS;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 429;
    r.retry_after = "2";
    r.retry_after_len = 1;
    r.first_item_ns = -1;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(300), &r, &v), 0);
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_RUNNING);
    v = result(op, 2, T0 + SG_MS(1000), SG_OUTCOME_FIRST_ITEM_TIMEOUT, 200, 0);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.retry_at, T0 + SG_MS(300) + SG_SEC(2));
}

/* The hedge wins: the original is the loser, cancelled, hedge_lost; the
 * operation is the hedge's, ok. */
static void the_first_to_deliver_wins(void **state) {
    (void)state;
    static const char *const eps[] = {"http://a/v1", "http://b/v1"};
    SG_AUTO_OPTIONS(o);
    opts(o, "GET", 1);
    assert_int_equal(sg_op_options_set_endpoints(o, eps, 2), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_hedge_at(op), SG_TIME_NEVER); /* nothing runs yet */
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    assert_int_equal(sg_op_hedge_at(op), T0 + SG_MS(200));
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(199), &p), SG_ESTATE); /* not yet */
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(200), &p), 0);
    assert_true(p.hedge);
    assert_int_equal(p.attempt, 2);
    assert_int_equal(p.endpoint, 1); /* the next endpoint */
    assert_int_equal(p.remaining_ns, SG_SEC(10) - SG_MS(200));
    assert_int_equal(sg_op_running(op), 2);
    assert_int_equal(sg_op_hedge_at(op), SG_TIME_NEVER); /* max_hedges in flight */
    /* the hedge delivers its first item at 250 ms: the original lost */
    assert_int_equal(sg_op_hedge_won(op, 2), 1);
    assert_int_equal(sg_op_hedge_won(op, 1), 0); /* a winner is named once */
    sg_op_verdict v = result(op, 1, T0 + SG_MS(251), SG_OUTCOME_TRANSPORT_ERROR, 200, 0);
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_LOST);
    assert_false(sg_op_finished(op));
    v = result(op, 2, T0 + SG_MS(900), SG_OUTCOME_OK, 200, 5);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_OK);
    const sg_op_attempt *a1 = sg_op_attempt_at(op, 0), *a2 = sg_op_attempt_at(op, 1);
    assert_int_equal(a1->outcome, SG_OUTCOME_CANCELLED);
    assert_int_equal(a1->reason, SG_OP_REASON_HEDGE_LOST);
    assert_false(a1->hedge);
    assert_true(a2->hedge);
    char rep[4096];
    assert_true(sg_op_report_write(op, T0 + SG_SEC(1), rep, sizeof(rep), NULL) >= 0);
    assert_non_null(strstr(rep, "\"outcome\":\"cancelled\""));
    assert_non_null(strstr(rep, "\"reason\":\"hedge_lost\""));
    assert_non_null(strstr(rep, "\"hedge\":true"));
    assert_non_null(strstr(rep, "\"hedge_after_ms\":200"));
}

/* A hedge that fails while the original runs stops its own line only;
 * the original then answers. */
static void a_failed_hedge_leaves_the_original_running(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    original_and_hedge(op, &p, 2);
    sg_op_verdict v = result(op, 2, T0 + SG_MS(230), SG_OUTCOME_HTTP_ERROR, 503, 0);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_RUNNING);
    assert_false(sg_op_finished(op));
    /* a second hedge 200 ms after the newest attempt began */
    assert_int_equal(sg_op_hedge_at(op), T0 + SG_MS(400));
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(400), &p), 0);
    assert_int_equal(p.attempt, 3);
    /* the original delivers (the transport names it the winner) */
    assert_int_equal(sg_op_hedge_won(op, 1), 1);
    v = result(op, 3, T0 + SG_MS(451), SG_OUTCOME_CANCELLED, 0, 0);
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_LOST);
    v = result(op, 1, T0 + SG_SEC(1), SG_OUTCOME_OK, 200, 3);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_int_equal(sg_op_attempt_count(op), 3);
}

/* When every attempt in flight fails, the last one's result decides as
 * always: a retry after the backoff (hedged again). */
static void when_all_fail_the_last_decides(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    original_and_hedge(op, &p, 1);
    sg_op_verdict v = result(op, 1, T0 + SG_MS(300), SG_OUTCOME_HTTP_ERROR, 503, 0);
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_RUNNING);
    v = result(op, 2, T0 + SG_MS(310), SG_OUTCOME_HTTP_ERROR, 503, 0);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    assert_false(p.hedge);
    assert_int_equal(sg_op_hedge_at(op), v.retry_at + SG_MS(200));
}

/* A loser that reports after the winner ended the operation is still
 * recorded, and changes nothing. */
static void a_late_loser_is_recorded_after_the_end(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    original_and_hedge(op, &p, 1);
    sg_op_verdict v = result(op, 2, T0 + SG_MS(300), SG_OUTCOME_OK, 200, 2);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_true(sg_op_finished(op));
    v = result(op, 1, T0 + SG_MS(301), SG_OUTCOME_CANCELLED, 0, 0);
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_LOST);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_OK);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_OK);
    assert_int_equal(sg_op_running(op), 0);
}

/* docs/design.md retry rule 8: a hedge goes only to an endpoint free to be
 * asked now.  One endpoint, two hedges: the first hedge is answered 429
 * Retry-After: 2 while the original runs; the second hedge, due 200 ms
 * after the first began, would go into that Retry-After - it is not sent.
 * Once the Retry-After has passed, the endpoint may be asked again. */
static void a_hedge_never_goes_into_a_retry_after(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    original_and_hedge(op, &p, 2);
    sg_op_verdict v =
        result_ra(op, 2, T0 + SG_MS(250), SG_OUTCOME_HTTP_ERROR, 429, 0, "2");
    assert_int_equal(v.reason, SG_OP_REASON_HEDGE_RUNNING);
    assert_int_equal(sg_op_hedge_at(op), T0 + SG_MS(400));
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(400), &p), SG_EREFUSED);
    assert_int_equal(p.reason, SG_OP_REASON_NO_FREE_ENDPOINT);
    assert_int_equal(sg_op_running(op), 1);
    assert_int_equal(sg_op_attempt_count(op), 2);
    char rep[4096];
    assert_int_equal(sg_op_report_write(op, T0 + SG_MS(401), rep, sizeof(rep), NULL), 0);
    assert_non_null(strstr(rep, "\"hedges_throttled\":0,\"hedges_no_free_endpoint\":1,"));
    /* the server's time has passed: free again */
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(250) + SG_SEC(2) - 1, &p), SG_EREFUSED);
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(250) + SG_SEC(2), &p), 0);
    assert_int_equal(p.attempt, 3);
}

/* With fallbacks a hedge skips an endpoint still waiting for its
 * Retry-After and goes to the next free one (here back to the first). */
static void a_hedge_skips_an_endpoint_that_must_wait(void **state) {
    (void)state;
    static const char *const eps[] = {"http://a/v1", "http://b/v1"};
    SG_AUTO_OPTIONS(o);
    opts(o, "GET", 3);
    assert_int_equal(sg_op_options_set_endpoints(o, eps, 2), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(200), &p), 0);
    assert_int_equal(p.endpoint, 1);
    (void)result_ra(op, 2, T0 + SG_MS(250), SG_OUTCOME_HTTP_ERROR, 429, 0, "30");
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(400), &p), 0);
    assert_int_equal(p.endpoint, 0); /* after b comes a: free */
    /* after a comes b: it said 30 s, 350 ms ago - a again */
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(600), &p), 0);
    assert_int_equal(p.endpoint, 0);
}

/* A random source that always draws @ud's value. */
static uint64_t fixed_bits(void *ud) {
    return *(const uint64_t *)ud;
}

/* An endpoint's backoff clock holds a hedge back as its Retry-After does:
 * a fails (503), the retry goes to b at once, and the hedge beside it
 * does not go to a, still backing off for 900 ms: it goes to b. */
static void a_hedge_waits_for_an_endpoints_backoff_too(void **state) {
    (void)state;
    static const char *const eps[] = {"http://a/v1", "http://b/v1"};
    static const uint64_t bits = SG_MS(900);
    SG_AUTO_OPTIONS(o);
    opts(o, "GET", 1);
    assert_int_equal(sg_op_options_set_endpoints(o, eps, 2), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_SEC(1), SG_SEC(1)), 0);
    assert_int_equal(sg_op_options_set_random(o, fixed_bits, (void *)&bits), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_verdict v = result(op, 1, T0 + SG_MS(50), SG_OUTCOME_HTTP_ERROR, 503, 0);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, 0); /* b has not failed: at once */
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(50), &p), 0);
    assert_int_equal(p.endpoint, 1);
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(250), &p), 0);
    assert_int_equal(p.endpoint, 1); /* a backs off until 950 ms */
}

/* The retry budget denies a hedge: not sent, counted, the original runs on. */
static void the_retry_budget_throttles_hedges(void **state) {
    (void)state;
    sg_retry_budget *b = NULL;
    assert_int_equal(sg_retry_budget_new(&b, 2, 0.1), 0);
    (void)sg_retry_budget_on_failure(b); /* 1: at half */
    SG_AUTO_OPTIONS(o);
    opts(o, "GET", 1);
    assert_int_equal(sg_op_options_set_retry_budget(o, b), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(200), &p), SG_EREFUSED);
    assert_int_equal(p.reason, SG_OP_REASON_RETRY_THROTTLED);
    assert_int_equal(sg_op_running(op), 1);
    char rep[4096];
    assert_true(sg_op_report_write(op, T0 + SG_MS(201), rep, sizeof(rep), NULL) >= 0);
    assert_non_null(strstr(rep, "\"hedges_throttled\":1"));
    sg_op_verdict v = result(op, 1, T0 + SG_MS(500), SG_OUTCOME_OK, 200, 1);
    assert_int_equal(v.decision, SG_OP_DONE);
    sg_retry_budget_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(only_a_request_safe_to_repeat_is_hedged),
        cmocka_unit_test(the_first_to_deliver_wins),
        cmocka_unit_test(a_retry_after_beside_a_running_hedge_is_kept),
        cmocka_unit_test(a_failed_hedge_leaves_the_original_running),
        cmocka_unit_test(when_all_fail_the_last_decides),
        cmocka_unit_test(a_late_loser_is_recorded_after_the_end),
        cmocka_unit_test(the_retry_budget_throttles_hedges),
        cmocka_unit_test(a_hedge_never_goes_into_a_retry_after),
        cmocka_unit_test(a_hedge_skips_an_endpoint_that_must_wait),
        cmocka_unit_test(a_hedge_waits_for_an_endpoints_backoff_too),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
