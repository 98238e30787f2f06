/*
 * The retry budget (gRFC A6 retry throttling): the bucket's arithmetic, its
 * bounds, its use from many threads at once, and the policy stopping a
 * retry it denies with reason retry_throttled.  Time is driven by hand.
 */
#include <pthread.h>
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

static void the_bucket_counts_as_grpc_does(void **state) {
    (void)state;
    sg_retry_budget *b = NULL;
    assert_int_equal(sg_retry_budget_new(&b, 4, 0.5), 0);
    assert_true(sg_retry_budget_tokens(b) == 4.0);
    assert_true(sg_retry_budget_on_failure(b));  /* 3 > 2 */
    assert_false(sg_retry_budget_on_failure(b)); /* 2: at half, no retry */
    assert_false(sg_retry_budget_allows(b));
    sg_retry_budget_on_success(b); /* 2.5 */
    assert_true(sg_retry_budget_allows(b));
    for (int i = 0; i < 20; i++) {
        sg_retry_budget_on_success(b);
    }
    assert_true(sg_retry_budget_tokens(b) == 4.0); /* never above max */
    for (int i = 0; i < 20; i++) {
        (void)sg_retry_budget_on_failure(b);
    }
    assert_true(sg_retry_budget_tokens(b) == 0.0); /* never below 0 */
    sg_retry_budget_free(b);
    /* three decimals, rounded down */
    assert_int_equal(sg_retry_budget_new(&b, 10, 0.1239), 0);
    for (int i = 0; i < 5; i++) {
        (void)sg_retry_budget_on_failure(b);
    }
    sg_retry_budget_on_success(b);
    assert_true(sg_retry_budget_tokens(b) > 5.1229 && sg_retry_budget_tokens(b) < 5.1231);
    sg_retry_budget_free(b);
    /* bounds */
    assert_int_equal(sg_retry_budget_new(&b, 0, 0.1), SG_ERANGE);
    assert_null(b);
    assert_int_equal(sg_retry_budget_new(&b, SG_RETRY_BUDGET_MAX_TOKENS + 1, 0.1),
                     SG_ERANGE);
    assert_int_equal(sg_retry_budget_new(&b, 10, 0.0), SG_ERANGE);
    assert_int_equal(sg_retry_budget_new(&b, 10, 1.5), SG_ERANGE);
    assert_int_equal(sg_retry_budget_new(&b, 10, 0.0 / 0.0), SG_ERANGE);
    assert_int_equal(sg_retry_budget_new(NULL, 10, 0.1), SG_EINVAL);
    /* NULL is no budget: everything allowed */
    assert_true(sg_retry_budget_on_failure(NULL));
    assert_true(sg_retry_budget_allows(NULL));
    sg_retry_budget_free(NULL);
}

static void *fail_many(void *ud) {
    for (int i = 0; i < 200; i++) {
        (void)sg_retry_budget_on_failure(ud);
    }
    return NULL;
}

/* Four threads take 800 tokens from 1000 at once: none is lost. */
static void threads_share_one_bucket(void **state) {
    (void)state;
    sg_retry_budget *b = NULL;
    assert_int_equal(sg_retry_budget_new(&b, 1000, 0.1), 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, fail_many, b), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    assert_true(sg_retry_budget_tokens(b) == 200.0);
    sg_retry_budget_free(b);
}

/* Ends the running attempt: @status answered, @items delivered. */
static sg_op_verdict finish(sg_op *op, int64_t now, sg_outcome outcome, int status,
                            uint64_t items) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = outcome;
    r.phase = items > 0 ? SG_PHASE_STREAMING : SG_PHASE_WAIT_HEADERS;
    r.sent = true;
    r.headers_received = true;
    r.http_status = status;
    r.items = items;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    return v;
}

static sg_op_verdict fail_503(sg_op *op, int64_t now) {
    return finish(op, now, SG_OUTCOME_HTTP_ERROR, 503, 0);
}

/* Operations sharing a budget: once half is spent, the next retry is
 * denied and says so; a success gives back. */
static void the_policy_stops_a_throttled_retry(void **state) {
    (void)state;
    sg_retry_budget *b = NULL;
    assert_int_equal(sg_retry_budget_new(&b, 4, 1.0), 0);
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(60)), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 10), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(1), SG_MS(1)), 0);
    assert_int_equal(sg_op_options_set_retry_budget(o, b), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_verdict v = fail_503(op, T0 + SG_MS(1)); /* 4 -> 3 */
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    v = fail_503(op, v.retry_at + SG_MS(1)); /* 3 -> 2: denied */
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_RETRY_THROTTLED);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_RETRY_THROTTLED);
    assert_string_equal(sg_op_reason_name(SG_OP_REASON_RETRY_THROTTLED),
                        "retry_throttled");
    char rep[4096];
    assert_true(sg_op_report_write(op, T0 + SG_MS(5), rep, sizeof(rep), NULL) >= 0);
    assert_non_null(strstr(rep, "\"reason\":\"retry_throttled\""));
    /* another operation on the same budget: its first attempt goes (never
     * throttled), succeeds, and gives a token back */
    assert_int_equal(sg_op_start(op, o, T0 + SG_SEC(1)), 0);
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_SEC(1), &p), 0);
    (void)finish(op, T0 + SG_SEC(2), SG_OUTCOME_OK, 200, 3);
    assert_true(sg_retry_budget_tokens(b) == 3.0);
    assert_true(sg_retry_budget_allows(b));
    sg_retry_budget_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_bucket_counts_as_grpc_does),
        cmocka_unit_test(threads_share_one_bucket),
        cmocka_unit_test(the_policy_stops_a_throttled_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
