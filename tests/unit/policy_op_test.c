/*
 * The operation state machine: leases, retry safety, backoff, Retry-After.
 * Time is plain int64 values driven by hand; randomness is seeded or fixed.
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

#define T0 SG_SEC(1000)          /* an arbitrary monotonic origin */
#define WALL INT64_C(1795964400) /* 2026-11-29 15:00:00 UTC */

/* A random source that returns whatever the test put in *ud. */
static uint64_t fixed_random(void *ud) {
    return *(const uint64_t *)ud;
}

static void opts_init(sg_op_options *o, int64_t budget, int64_t floor) {
    assert_int_equal(sg_op_options_set_budget(o, budget), 0);
    assert_int_equal(sg_op_options_set_floor(o, floor), 0);
    assert_int_equal(sg_op_options_set_seed(o, 42), 0);
}

static void plan_ok(sg_op *op, int64_t now, sg_op_plan *plan) {
    int rc = sg_op_next_attempt(op, now, plan);
    if (rc != 0) {
        fail_msg("sg_op_next_attempt: %s (%s)", sg_strerror(rc),
                 sg_op_reason_name(plan->reason));
    }
}

/* Ends the running attempt with the given facts (@ra_ms: its
 * retry-after-ms, NULL none). */
static sg_op_verdict end_attempt_ms(sg_op *op, int64_t now, sg_outcome outcome,
                                    sg_phase phase, bool sent, int status,
                                    const char *retry_after, const char *ra_ms) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = outcome;
    r.phase = phase;
    r.sent = sent;
    r.headers_received = status != 0;
    r.http_status = status;
    r.retry_after = retry_after;
    r.retry_after_len = retry_after != NULL ? strlen(retry_after) : 0;
    r.retry_after_ms_field = ra_ms;
    r.retry_after_ms_field_len = ra_ms != NULL ? strlen(ra_ms) : 0;
    r.wall_now_s = WALL;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    return v;
}

static sg_op_verdict end_attempt(sg_op *op, int64_t now, sg_outcome outcome,
                                 sg_phase phase, bool sent, int status,
                                 const char *retry_after) {
    return end_attempt_ms(op, now, outcome, phase, sent, status, retry_after, NULL);
}

/* ------------------------------------------------------------------ leases */

static void plan_leases_the_attempt_timeout_when_the_budget_allows(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(10), SG_MS(50));
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_SEC(2)), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(o, SG_MS(500)), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    assert_int_equal(p.attempt, 1);
    assert_int_equal(p.attempt_timeout_ns, SG_SEC(2));
    assert_int_equal(sg_guard_config_attempt_timeout(&p.guard_config), SG_SEC(2));
    assert_int_equal(sg_guard_config_first_item_timeout(&p.guard_config), SG_MS(500));
    assert_int_equal(p.remaining_ns, SG_SEC(10));
    assert_int_equal(p.deadline_ms, 2000);
    assert_string_equal(p.deadline_header, "X-Deadline-Ms");
}

static void budget_300ms_with_2s_attempts_grants_at_most_300ms_less_floor(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), SG_MS(20));
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_SEC(2)), 0);
    assert_int_equal(sg_op_options_set_connect_timeout(o, SG_SEC(5)), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(o, SG_SEC(2)), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(o, SG_SEC(1)), 0);
    assert_int_equal(sg_op_options_set_stream_timeout(o, SG_SEC(30)), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    assert_int_equal(p.attempt_timeout_ns, SG_MS(280));
    assert_int_equal(sg_guard_config_attempt_timeout(&p.guard_config), SG_MS(280));
    assert_int_equal(sg_guard_config_connect_timeout(&p.guard_config), SG_MS(280));
    assert_int_equal(sg_guard_config_first_item_timeout(&p.guard_config), SG_MS(280));
    assert_int_equal(sg_guard_config_idle_timeout(&p.guard_config), SG_MS(280));
    assert_int_equal(sg_guard_config_stream_timeout(&p.guard_config), SG_MS(280));
    assert_int_equal(p.deadline_ms, 280);
}

static void clocks_that_are_off_stay_off_and_caps_pass_through(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(5), 0);
    assert_int_equal(sg_op_options_set_max_items(o, 1000), 0);
    assert_int_equal(sg_op_options_set_max_bytes(o, 1 << 20), 0);
    assert_int_equal(sg_op_options_set_deadline_header(o, "grpc-timeout"), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0 + SG_SEC(1), &p);
    /* No attempt timeout: the ceiling is everything that is left. */
    assert_int_equal(p.attempt_timeout_ns, SG_SEC(4));
    assert_int_equal(sg_guard_config_connect_timeout(&p.guard_config), 0);
    assert_int_equal(sg_guard_config_first_item_timeout(&p.guard_config), 0);
    assert_int_equal(sg_guard_config_idle_timeout(&p.guard_config), 0);
    assert_int_equal(sg_guard_config_stream_timeout(&p.guard_config), 0);
    assert_int_equal(sg_guard_config_max_items(&p.guard_config), 1000);
    assert_int_equal(sg_guard_config_max_bytes(&p.guard_config), 1 << 20);
    assert_string_equal(p.deadline_header, "grpc-timeout");
}

static void plan_is_refused_when_remaining_is_at_the_floor(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), SG_MS(50));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(250), &p), SG_EREFUSED);
    assert_int_equal(p.outcome, SG_OUTCOME_REFUSED);
    assert_int_equal(p.reason, SG_OP_REASON_BUDGET_BELOW_FLOOR);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_final_decision(op), SG_OP_STOP);
    assert_int_equal(sg_op_attempt_count(op), 0);
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(250), &p), SG_ESTATE);
}

static void plan_is_budget_exhausted_when_nothing_remains(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), SG_MS(50));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(300), &p), SG_EREFUSED);
    assert_int_equal(p.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(p.reason, SG_OP_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_BUDGET_EXHAUSTED);
}

static void plan_is_refused_below_the_minimum_attempt(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), 0);
    assert_int_equal(sg_op_options_set_min_attempt(o, SG_MS(30)), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(271), &p), SG_EREFUSED);
    assert_int_equal(p.outcome, SG_OUTCOME_REFUSED);
    assert_int_equal(p.reason, SG_OP_REASON_LEASE_TOO_SHORT);
    /* Exactly the minimum is enough. */
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0 + SG_MS(270), &p);
    assert_int_equal(p.attempt_timeout_ns, SG_MS(30));
}

static void minimum_attempt_never_exceeds_the_attempt_timeout(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(1), 0);
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_MS(5)), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p); /* 5 ms < the 10 ms default minimum */
    assert_int_equal(p.attempt_timeout_ns, SG_MS(5));
}

static void tiny_budget_still_gets_its_first_attempt(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(6), SG_MS(1));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p); /* 5 ms leasable < the 10 ms default minimum */
    assert_int_equal(p.attempt_timeout_ns, SG_MS(5));
}

static void calls_out_of_order_are_state_errors(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    sg_op_verdict v;
    sg_op_result r;
    memset(&r, 0, sizeof(r));

    assert_int_equal(sg_op_next_attempt(op, T0, &p), SG_EINVAL);
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    assert_int_equal(sg_op_attempt_done(op, T0, &r, &v), SG_ESTATE);
    plan_ok(op, T0, &p);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), SG_ESTATE);
    r.outcome = SG_OUTCOME_OK;
    assert_int_equal(sg_op_attempt_done(op, T0 + 1, &r, &v), 0);
    assert_int_equal(sg_op_attempt_done(op, T0 + 1, &r, &v), SG_ESTATE);
    assert_int_equal(sg_op_next_attempt(op, T0 + 1, &p), SG_ESTATE);
}

static void next_attempt_before_the_backoff_ends_is_a_state_error(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(10), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(10), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, "1");
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.retry_at, T0 + SG_MS(10) + SG_SEC(1));
    assert_int_equal(sg_op_next_attempt(op, v.retry_at - 1, &p), SG_ESTATE);
    plan_ok(op, v.retry_at, &p);
    assert_int_equal(p.attempt, 2);
}

static void invalid_results_are_rejected(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    sg_op_verdict v;
    sg_op_result r;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_COUNT_;
    assert_int_equal(sg_op_attempt_done(op, T0, &r, &v), SG_EINVAL);
    r.outcome = SG_OUTCOME_HTTP_ERROR;
    r.http_status = 600;
    assert_int_equal(sg_op_attempt_done(op, T0, &r, &v), SG_EINVAL);
    r.http_status = 99;
    assert_int_equal(sg_op_attempt_done(op, T0, &r, &v), SG_EINVAL);
    r.http_status = 404;
    r.phase = SG_PHASE_COUNT_;
    assert_int_equal(sg_op_attempt_done(op, T0, &r, &v), SG_EINVAL);
    assert_int_equal(sg_op_attempt_done(op, T0, NULL, &v), SG_EINVAL);
    assert_int_equal(sg_op_attempt_done(op, T0, &r, NULL), SG_EINVAL);
}

/* ------------------------------------------------------------------ safety */

static void ok_attempt_is_done(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(3), SG_OUTCOME_OK, SG_PHASE_STREAMING,
                                  true, 200, NULL);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_int_equal(v.reason, SG_OP_REASON_OK);
    assert_false(v.partial || v.retryable || v.outcome_unknown);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_OK);
}

static void never_sent_post_is_always_safe_to_retry(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0); /* default method POST */
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(1), SG_OUTCOME_CONNECT_TIMEOUT,
                                  SG_PHASE_CONNECT, false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_true(v.retryable);
    assert_false(v.outcome_unknown);
    plan_ok(op, v.retry_at, &p);
    v = end_attempt(op, v.retry_at + 5, SG_OUTCOME_TRANSPORT_ERROR, SG_PHASE_SEND, false,
                    0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
}

/* An in-band error (provider_error) before the first token: the server's
 * own answer, so never outcome unknown; a transient type is retried when
 * the request is safe, any other is not; after tokens it is partial. */
static sg_op_verdict provider_error_end(sg_op *op, const char *method, bool retryable,
                                        uint64_t items) {
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(60), 0);
    assert_int_equal(sg_op_options_set_method(o, method), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_PROVIDER_ERROR;
    r.phase = items > 0 ? SG_PHASE_STREAMING : SG_PHASE_WAIT_FIRST_ITEM;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    r.items = items;
    r.partial = items > 0;
    r.error = "Overloaded";
    r.provider_type = "overloaded_error";
    r.provider_retryable = retryable;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(40), &r, &v), 0);
    assert_int_equal(v.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_false(v.outcome_unknown);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_string_equal(a->provider_error_type, "overloaded_error");
    assert_string_equal(a->error, "Overloaded");
    return v;
}

static void a_provider_error_is_retried_only_when_transient_and_safe(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_verdict v = provider_error_end(op, "GET", true, 0);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_true(v.retryable);
    char rep[4096];
    assert_int_equal(sg_op_report_write(op, T0 + SG_MS(41), rep, sizeof(rep), NULL), 0);
    assert_non_null(strstr(rep, "\"provider_error\":{\"type\":\"overloaded_error\","
                                "\"message\":\"Overloaded\"}"));

    v = provider_error_end(op, "POST", true, 0); /* no key: not safe */
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_NOT_SAFE_TO_RETRY);

    v = provider_error_end(op, "GET", false, 0); /* not a transient type */
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_OUTCOME_NOT_RETRYABLE);

    v = provider_error_end(op, "GET", true, 3); /* after tokens */
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_PARTIAL_STREAM);
    assert_true(v.partial);
}

static void unsafe_post_sent_without_answer_is_outcome_unknown(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(5), SG_OUTCOME_ATTEMPT_TIMEOUT,
                                  SG_PHASE_WAIT_HEADERS, true, 0, NULL);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_OUTCOME_UNKNOWN);
    assert_true(v.outcome_unknown);
    assert_false(v.retryable);
    assert_true(sg_op_finished(op));
}

static void post_is_treated_as_sent_once_the_phase_passed_send(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    /* The transport forgot to say "sent"; waiting for headers proves it. */
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(5), SG_OUTCOME_TRUNCATED,
                                  SG_PHASE_WAIT_HEADERS, false, 0, NULL);
    assert_true(v.outcome_unknown);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_true(sg_op_attempt_at(op, 0)->sent);
}

static void cancelled_post_after_send_is_outcome_unknown(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(1), SG_OUTCOME_CANCELLED,
                                  SG_PHASE_WAIT_FIRST_ITEM, true, 0, NULL);
    assert_true(v.outcome_unknown);
    assert_int_equal(v.decision, SG_OP_STOP);
}

static void post_with_idempotency_key_is_retried_after_send(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(30), 0);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "req-7f3a"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(1), SG_OUTCOME_FIRST_ITEM_TIMEOUT,
                                  SG_PHASE_WAIT_FIRST_ITEM, true, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_false(v.outcome_unknown);
    assert_string_equal(sg_op_idempotency_key(op), "req-7f3a");
}

static void declared_idempotent_post_is_retried_after_send(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(30), 0);
    assert_int_equal(sg_op_options_set_idempotent(o, true), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(1), SG_OUTCOME_STREAM_TIMEOUT,
                                  SG_PHASE_WAIT_FIRST_ITEM, true, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_null(sg_op_idempotency_key(op));
}

static void rfc9110_idempotent_methods_are_retried_after_send(void **state) {
    (void)state;
    static const char *const methods[] = {"GET",   "HEAD", "OPTIONS",
                                          "TRACE", "PUT",  "DELETE"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(30), 0);
        assert_int_equal(sg_op_options_set_method(o, methods[i]), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v = end_attempt(op, T0 + SG_SEC(1), SG_OUTCOME_TRANSPORT_ERROR,
                                      SG_PHASE_WAIT_HEADERS, true, 0, NULL);
        if (v.decision != SG_OP_RETRY) {
            fail_msg("%s was not retried", methods[i]);
        }
    }
}

static void other_methods_and_other_casings_are_unsafe(void **state) {
    (void)state;
    static const char *const methods[] = {"POST", "PATCH", "CONNECT",
                                          "get",  "Put",   "QUERY"};
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(30), 0);
        assert_int_equal(sg_op_options_set_method(o, methods[i]), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v = end_attempt(op, T0 + SG_SEC(1), SG_OUTCOME_TRANSPORT_ERROR,
                                      SG_PHASE_WAIT_HEADERS, true, 0, NULL);
        if (v.decision != SG_OP_STOP || !v.outcome_unknown) {
            fail_msg("%s was treated as safe", methods[i]);
        }
    }
}

static void partial_stream_is_never_retried(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(30), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_IDLE_TIMEOUT;
    r.phase = SG_PHASE_STREAMING;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    r.items = 3;
    r.first_item_ns = SG_MS(400);
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_SEC(2), &r, &v), 0);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_PARTIAL_STREAM);
    assert_true(v.partial);
    assert_false(v.retryable);
    assert_false(v.outcome_unknown); /* GET is safe */
    assert_int_equal(sg_op_attempt_at(op, 0)->time_to_first_item_ns, SG_MS(400));
}

static void partial_flag_from_the_guard_is_honoured(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(30), 0);
    assert_int_equal(sg_op_options_set_idempotent(o, true), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_guard_result g = {SG_OUTCOME_TRUNCATED, SG_PHASE_STREAMING, true, 0, 10, -1, 5};
    sg_op_result r;
    sg_op_result_from_guard(&r, &g);
    r.sent = true;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_SEC(2), &r, &v), 0);
    assert_int_equal(v.reason, SG_OP_REASON_PARTIAL_STREAM);
}

static void partial_unsafe_stream_is_partial_and_outcome_unknown(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_TRUNCATED;
    r.phase = SG_PHASE_STREAMING;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    r.items = 12;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_SEC(2), &r, &v), 0);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_PARTIAL_STREAM);
    assert_true(v.partial);
    assert_true(v.outcome_unknown);
}

static void retryable_status_on_a_safe_request_is_retried(void **state) {
    (void)state;
    /* 529: Anthropic's overloaded_error, an overloaded server as 503 is */
    static const int statuses[] = {408, 429, 500, 502, 503, 504, 529};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(30), 0);
        assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                      SG_PHASE_WAIT_HEADERS, true, statuses[i], NULL);
        assert_int_equal(v.decision, SG_OP_RETRY);
        assert_true(v.retryable);
    }
}

static void non_retryable_status_is_a_final_answer(void **state) {
    (void)state;
    static const int statuses[] = {400, 401, 403, 404, 409, 422, 501, 505};
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(30), 0);
        assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                      SG_PHASE_WAIT_HEADERS, true, statuses[i], "1");
        assert_int_equal(v.decision, SG_OP_DONE);
        assert_int_equal(v.reason, SG_OP_REASON_FINAL_STATUS);
        assert_false(v.retryable || v.outcome_unknown);
        assert_int_equal(sg_op_outcome(op), SG_OUTCOME_HTTP_ERROR);
    }
}

/* An unsafe POST answered with an error status: a server's own 408 or 500
 * is a complete answer (stop, not unknown); a gateway's 502 or 504 says
 * nothing about what the upstream did with it: outcome unknown. */
/* An http_error with headers but no status (a transport that could not
 * read one) is no complete answer: an unsafe POST so ended is outcome
 * unknown, with that reason - never a stop with reason none. */
static void an_http_error_without_a_status_is_no_answer(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(10), 0);
    assert_int_equal(sg_op_options_set_method(o, "POST"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 3), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_HTTP_ERROR;
    r.phase = SG_PHASE_WAIT_HEADERS;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 0;
    r.wall_now_s = WALL;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(10), &r, &v), 0);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_true(v.outcome_unknown);
    assert_int_equal(v.reason, SG_OP_REASON_OUTCOME_UNKNOWN);
}

static void
unsafe_post_answered_500_is_final_but_a_gateways_502_504_unknown(void **state) {
    (void)state;
    static const struct {
        int status;
        sg_op_reason reason;
        bool unknown;
    } cases[] = {
        {408, SG_OP_REASON_NOT_SAFE_TO_RETRY, false},
        {500, SG_OP_REASON_NOT_SAFE_TO_RETRY, false},
        {502, SG_OP_REASON_OUTCOME_UNKNOWN, true},
        {504, SG_OP_REASON_OUTCOME_UNKNOWN, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, NULL, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                      SG_PHASE_WAIT_HEADERS, true, cases[i].status, "1");
        assert_int_equal(v.decision, SG_OP_STOP);
        assert_int_equal(v.reason, cases[i].reason);
        assert_false(v.retryable);
        assert_int_equal(v.outcome_unknown, cases[i].unknown);
        assert_int_equal(sg_op_attempt_at(op, 0)->outcome_unknown, cases[i].unknown);
        assert_int_equal(sg_op_outcome(op), SG_OUTCOME_HTTP_ERROR);
    }
}

/* The same statuses on a request safe to repeat are retried as before. */
static void keyed_post_answered_by_a_gateway_is_retried(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(10), 0);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "gw-key"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 504, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_false(v.outcome_unknown);
}

/* An attempt the library refused to send (e.g. a method it could not
 * describe truly) would be refused again: stop. */
static void an_attempt_refused_by_the_transport_is_not_retried(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(10), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(1), SG_OUTCOME_REFUSED, SG_PHASE_CONNECT,
                                  false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_OUTCOME_NOT_RETRYABLE);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_REFUSED);
}

static void unsafe_post_answered_429_is_retried_as_a_rejection(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_true(v.retryable);
}

/* An unsafe POST answered @status: retried when the answer names a valid
 * time to come back (the server refused before processing), else not safe
 * to - the server's own answer, never outcome unknown. */
static void rejection_needs_a_retry_after(int status) {
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, status, "2");
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, SG_SEC(2));

    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, status, NULL);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_NOT_SAFE_TO_RETRY);
    assert_false(v.outcome_unknown);

    /* A Retry-After that does not parse proves nothing either. */
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, status, "soon");
    assert_int_equal(v.decision, SG_OP_STOP);
}

static void unsafe_post_answered_503_is_retried_only_with_retry_after(void **state) {
    (void)state;
    rejection_needs_a_retry_after(503);
}

/* 529 (Anthropic's overloaded_error) is 503's like. */
static void unsafe_post_answered_529_is_treated_as_503(void **state) {
    (void)state;
    rejection_needs_a_retry_after(529);
}

/* A retryable status whose body the provider profile read as a final
 * refusal (Anthropic's spend limit: 429) is the final answer, safe or
 * not; without that word it is retried as ever. */
static void a_final_refusal_in_the_body_is_not_retried(void **state) {
    (void)state;
    for (int safe = 0; safe < 2; safe++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(30), 0);
        if (safe) {
            assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
        }
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_result r;
        memset(&r, 0, sizeof(r));
        r.outcome = SG_OUTCOME_HTTP_ERROR;
        r.phase = SG_PHASE_WAIT_HEADERS;
        r.sent = true;
        r.headers_received = true;
        r.http_status = 429;
        r.provider_final = true;
        sg_op_verdict v;
        assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(20), &r, &v), 0);
        assert_int_equal(v.decision, SG_OP_DONE);
        assert_int_equal(v.reason, SG_OP_REASON_PROVIDER_FINAL);
        assert_false(v.retryable || v.outcome_unknown);
        assert_int_equal(sg_op_outcome(op), SG_OUTCOME_HTTP_ERROR);
        assert_string_equal(sg_op_reason_name(v.reason), "provider_final");
    }
}

static void rejection_retries_can_be_turned_off(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(30), 0);
    assert_int_equal(sg_op_options_set_retry_rejections(o, false), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, "1");
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_NOT_SAFE_TO_RETRY);
}

static void retryable_status_set_is_configurable(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(30), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    const int set[] = {418};
    assert_int_equal(sg_op_options_set_retryable_statuses(o, set, 1), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 503, NULL);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_int_equal(v.reason, SG_OP_REASON_FINAL_STATUS);

    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, 418, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);

    /* The empty set retries no status at all. */
    assert_int_equal(sg_op_options_set_retryable_statuses(o, NULL, 0), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, 429, NULL);
    assert_int_equal(v.decision, SG_OP_DONE);
}

static void cancelled_cap_exceeded_and_protocol_error_are_never_retried(void **state) {
    (void)state;
    static const sg_outcome outcomes[] = {SG_OUTCOME_CANCELLED, SG_OUTCOME_CAP_EXCEEDED,
                                          SG_OUTCOME_PROTOCOL_ERROR};
    for (size_t i = 0; i < sizeof(outcomes) / sizeof(outcomes[0]); i++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(30), 0);
        assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), outcomes[i],
                                      SG_PHASE_WAIT_FIRST_ITEM, true, 0, NULL);
        assert_int_equal(v.decision, SG_OP_STOP);
        assert_int_equal(v.reason, SG_OP_REASON_OUTCOME_NOT_RETRYABLE);
        assert_false(v.retryable);
    }
}

static void attempts_are_bounded_by_max_attempts(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(60), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 2), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(5), SG_OUTCOME_CONNECT_TIMEOUT,
                                  SG_PHASE_CONNECT, false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    plan_ok(op, v.retry_at, &p);
    v = end_attempt(op, v.retry_at + SG_MS(5), SG_OUTCOME_CONNECT_TIMEOUT,
                    SG_PHASE_CONNECT, false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    assert_true(v.retryable);
    assert_int_equal(sg_op_attempt_count(op), 2);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_CONNECT_TIMEOUT);
}

static void operation_outcome_is_the_last_attempts(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(5), SG_OUTCOME_CONNECT_TIMEOUT,
                                  SG_PHASE_CONNECT, false, 0, NULL);
    plan_ok(op, v.retry_at, &p);
    v = end_attempt(op, v.retry_at + SG_MS(5), SG_OUTCOME_HTTP_ERROR,
                    SG_PHASE_WAIT_HEADERS, true, 404, NULL);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_HTTP_ERROR);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_FINAL_STATUS);
}

/* ------------------------------------------------------------------ backoff */

static void backoff_is_full_jitter_under_a_doubling_capped_ceiling(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(60), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 6), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(100), SG_MS(500)), 0);
    /* Returning the ceiling itself makes the jitter draw its maximum. */
    uint64_t draw = 0;
    assert_int_equal(sg_op_options_set_random(o, fixed_random, &draw), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    const int64_t want[] = {SG_MS(100), SG_MS(200), SG_MS(400), SG_MS(500), SG_MS(500)};
    int64_t now = T0;
    for (size_t i = 0; i < 5; i++) {
        plan_ok(op, now, &p);
        draw = (uint64_t)want[i];
        sg_op_verdict v = end_attempt(op, now, SG_OUTCOME_CONNECT_TIMEOUT,
                                      SG_PHASE_CONNECT, false, 0, NULL);
        assert_int_equal(v.decision, SG_OP_RETRY);
        assert_int_equal(v.delay_ns, want[i]);
        assert_int_equal(sg_op_attempt_at(op, (uint32_t)i)->backoff_ns, want[i]);
        now = v.retry_at;
    }
    plan_ok(op, now, &p);
    (void)end_attempt(op, now, SG_OUTCOME_OK, SG_PHASE_STREAMING, true, 200, NULL);

    /* One past each ceiling wraps to 0: the ceilings are exactly these. */
    assert_int_equal(sg_op_start(op, o, T0), 0);
    now = T0;
    for (size_t i = 0; i < 5; i++) {
        plan_ok(op, now, &p);
        draw = (uint64_t)want[i] + 1u;
        sg_op_verdict v = end_attempt(op, now, SG_OUTCOME_CONNECT_TIMEOUT,
                                      SG_PHASE_CONNECT, false, 0, NULL);
        assert_int_equal(v.decision, SG_OP_RETRY);
        assert_int_equal(v.delay_ns, 0);
        now = v.retry_at;
    }
}

static void jitter_can_draw_zero(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(60), 0);
    uint64_t draw = 0;
    assert_int_equal(sg_op_options_set_random(o, fixed_random, &draw), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(3), SG_OUTCOME_CONNECT_TIMEOUT,
                                  SG_PHASE_CONNECT, false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, 0);
    assert_int_equal(v.retry_at, T0 + SG_MS(3));
}

static void seeded_backoff_is_reproducible_and_within_the_ceiling(void **state) {
    (void)state;
    int64_t first[4] = {0};
    for (int run = 0; run < 2; run++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(600), 0);
        assert_int_equal(sg_op_options_set_max_attempts(o, 5), 0);
        assert_int_equal(sg_op_options_set_backoff(o, SG_SEC(1), SG_SEC(30)), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        int64_t now = T0;
        for (uint32_t i = 0; i < 4; i++) {
            plan_ok(op, now, &p);
            sg_op_verdict v = end_attempt(op, now, SG_OUTCOME_CONNECT_TIMEOUT,
                                          SG_PHASE_CONNECT, false, 0, NULL);
            assert_int_equal(v.decision, SG_OP_RETRY);
            assert_true(v.delay_ns >= 0 && v.delay_ns <= (SG_SEC(1) << i));
            if (run == 0) {
                first[i] = v.delay_ns;
            } else {
                assert_int_equal(v.delay_ns, first[i]);
            }
            now = v.retry_at;
        }
    }
}

static void backoff_never_sleeps_past_the_deadline(void **state) {
    (void)state;
    /* Many seeds, a tight budget, long backoffs: every sleep taken leaves
     * at least the minimum attempt above the floor, and every refused one
     * stops at once. */
    for (uint64_t seed = 1; seed <= 500; seed++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_MS(900), SG_MS(40));
        assert_int_equal(sg_op_options_set_seed(o, seed), 0);
        assert_int_equal(sg_op_options_set_max_attempts(o, SG_OP_MAX_ATTEMPTS), 0);
        assert_int_equal(sg_op_options_set_backoff(o, SG_MS(50), SG_SEC(2)), 0);
        assert_int_equal(sg_op_options_set_min_attempt(o, SG_MS(25)), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        const int64_t deadline = T0 + SG_MS(900);
        int64_t now = T0;
        for (;;) {
            plan_ok(op, now, &p);
            assert_true(now + p.attempt_timeout_ns <= deadline - SG_MS(40));
            now += SG_MS(30); /* the attempt fails fast */
            sg_op_verdict v = end_attempt(op, now, SG_OUTCOME_TRANSPORT_ERROR,
                                          SG_PHASE_CONNECT, false, 0, NULL);
            if (v.decision != SG_OP_RETRY) {
                assert_int_equal(v.decision, SG_OP_STOP);
                assert_true(v.reason == SG_OP_REASON_BACKOFF_EXCEEDS_BUDGET ||
                            v.reason == SG_OP_REASON_ATTEMPTS_EXHAUSTED);
                break;
            }
            assert_true(v.retry_at + SG_MS(25) <= deadline - SG_MS(40));
            now = v.retry_at;
        }
    }
}

static void backoff_that_does_not_fit_stops_at_once(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), SG_MS(20));
    assert_int_equal(sg_op_options_set_backoff(o, SG_SEC(1), SG_SEC(1)), 0);
    uint64_t draw = (uint64_t)SG_SEC(1);
    assert_int_equal(sg_op_options_set_random(o, fixed_random, &draw), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(10), SG_OUTCOME_CONNECT_TIMEOUT,
                                  SG_PHASE_CONNECT, false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_BACKOFF_EXCEEDS_BUDGET);
    assert_true(v.retryable);
    assert_int_equal(v.delay_ns, 0);
    assert_int_equal(v.retry_at, SG_TIME_NEVER);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_CONNECT_TIMEOUT);
    assert_int_equal(sg_op_attempt_at(op, 0)->backoff_ns, -1);
}

static void sleep_must_leave_the_minimum_attempt_above_the_floor(void **state) {
    (void)state;
    /* Budget 1 s, floor 100 ms, min attempt 50 ms, attempt ends at 200 ms:
     * 700 ms are leasable, so a sleep of 650 ms fits and 650 ms + 1 ns does
     * not. */
    for (int over = 0; over <= 1; over++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(1), SG_MS(100));
        assert_int_equal(sg_op_options_set_min_attempt(o, SG_MS(50)), 0);
        assert_int_equal(sg_op_options_set_backoff(o, SG_SEC(1), SG_SEC(1)), 0);
        uint64_t draw = (uint64_t)(SG_MS(650) + over);
        assert_int_equal(sg_op_options_set_random(o, fixed_random, &draw), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v = end_attempt(op, T0 + SG_MS(200), SG_OUTCOME_CONNECT_TIMEOUT,
                                      SG_PHASE_CONNECT, false, 0, NULL);
        if (over == 0) {
            assert_int_equal(v.decision, SG_OP_RETRY);
            plan_ok(op, v.retry_at, &p);
            assert_int_equal(p.attempt_timeout_ns, SG_MS(50));
        } else {
            assert_int_equal(v.decision, SG_OP_STOP);
            assert_int_equal(v.reason, SG_OP_REASON_BACKOFF_EXCEEDS_BUDGET);
        }
    }
}

/* ------------------------------------------------------------------ Retry-After */

static void retry_after_replaces_the_computed_backoff(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, "3");
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, SG_SEC(3));
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_int_equal(a->retry_after_ns, SG_SEC(3));
    assert_int_equal(a->backoff_ns, SG_SEC(3));
}

static void parsed_retry_after_from_the_transport_is_honoured(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_HTTP_ERROR;
    r.phase = SG_PHASE_WAIT_HEADERS;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 503;
    r.has_retry_after_ns = true;
    r.retry_after_ns = SG_SEC(4);
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(20), &r, &v), 0);
    assert_int_equal(v.decision, SG_OP_RETRY); /* 503 + Retry-After: a rejection */
    assert_int_equal(v.delay_ns, SG_SEC(4));

    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    r.retry_after_ns = -1;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(20), &r, &v), SG_EINVAL);
}

/* retry-after-ms wins over Retry-After when valid (the order the openai
 * and Anthropic SDKs read them in); a malformed one leaves Retry-After;
 * alone it replaces the backoff; both malformed: the backoff, flagged. */
static void retry_after_ms_wins_over_retry_after_when_valid(void **state) {
    (void)state;
    static const struct {
        const char *ra, *ra_ms;
        int64_t delay;
        bool from_ms, malformed;
    } cases[] = {
        {"30", "1500", SG_MS(1500), true, false},
        {"30", "soon", SG_SEC(30), false, false},
        {NULL, "250.5", SG_MS(250) + SG_US(500), true, false},
        {"2", NULL, SG_SEC(2), false, false},
        {"later", "soon", -1, false, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        SG_AUTO_OPTIONS(o);
        opts_init(o, SG_SEC(60), 0);
        assert_int_equal(sg_op_options_set_backoff(o, SG_MS(1), SG_MS(1)), 0);
        SG_AUTO_OP(op);
        sg_op_plan p;
        assert_int_equal(sg_op_start(op, o, T0), 0);
        plan_ok(op, T0, &p);
        sg_op_verdict v =
            end_attempt_ms(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                           SG_PHASE_WAIT_HEADERS, true, 429, cases[i].ra, cases[i].ra_ms);
        assert_int_equal(v.decision, SG_OP_RETRY);
        const sg_op_attempt *a = sg_op_attempt_at(op, 0);
        assert_true(a->retry_after_present);
        assert_int_equal(a->retry_after_malformed, cases[i].malformed);
        if (cases[i].delay >= 0) {
            assert_int_equal(v.delay_ns, cases[i].delay);
            assert_int_equal(a->retry_after_ns, cases[i].delay);
        } else {
            assert_true(v.delay_ns <= SG_MS(1)); /* the backoff */
            assert_int_equal(a->retry_after_ns, -1);
        }
        char rep[2048];
        assert_int_equal(sg_op_report_write(op, T0 + SG_MS(21), rep, sizeof(rep), NULL),
                         0);
        const char *src = cases[i].delay < 0 ? "\"retry_after_source\":null"
                          : cases[i].from_ms ? "\"retry_after_source\":\"retry-after-ms\""
                                             : "\"retry_after_source\":\"retry-after\"";
        assert_non_null(strstr(rep, src));
    }
    /* only a response says it */
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_TRANSPORT_ERROR;
    r.retry_after_ms_field = "5";
    r.retry_after_ms_field_len = 1;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(5), &r, &v), 0);
    assert_false(sg_op_attempt_at(op, 0)->retry_after_present);
}

static void retry_after_http_date_is_measured_on_the_wall_clock(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v =
        end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, 503, "Sun, 29 Nov 2026 15:00:07 GMT");
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, SG_SEC(7));
}

static void retry_after_longer_than_remaining_stops_at_once(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(5), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_SEC(1), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, "10");
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_RETRY_AFTER_EXCEEDS_BUDGET);
    assert_true(v.retryable);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_HTTP_ERROR);
}

static void retry_after_longer_than_the_maximum_stops(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(600), 0);
    assert_int_equal(sg_op_options_set_max_retry_after(o, SG_SEC(30)), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, "31");
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_RETRY_AFTER_EXCEEDS_MAX);

    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, 429, "30");
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, SG_SEC(30));
}

static void malformed_retry_after_falls_back_to_the_backoff(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(60), 0);
    uint64_t draw = 12345;
    assert_int_equal(sg_op_options_set_random(o, fixed_random, &draw), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, "-5");
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, 12345);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_true(a->retry_after_present);
    assert_true(a->retry_after_malformed);
    assert_int_equal(a->retry_after_ns, -1);
}

/* ------------------------------------------------------------------ budget attribution
 */

static void clamped_ceiling_firing_is_recorded_as_budget_exhausted(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), 0);
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_SEC(2)), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(300), SG_OUTCOME_ATTEMPT_TIMEOUT,
                                  SG_PHASE_WAIT_FIRST_ITEM, true, 200, NULL);
    assert_int_equal(v.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_BUDGET_EXHAUSTED);
}

static void own_attempt_timeout_keeps_its_name_and_is_retried(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(10), 0);
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_MS(100)), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(100), SG_OUTCOME_ATTEMPT_TIMEOUT,
                                  SG_PHASE_WAIT_FIRST_ITEM, true, 200, NULL);
    assert_int_equal(v.outcome, SG_OUTCOME_ATTEMPT_TIMEOUT);
    assert_int_equal(v.decision, SG_OP_RETRY);
}

static void clamped_clock_that_fired_early_keeps_its_name(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), 0);
    assert_int_equal(sg_op_options_set_connect_timeout(o, SG_SEC(5)), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    /* The OS gave up connecting at 100 ms: not the budget's doing. */
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(100), SG_OUTCOME_CONNECT_TIMEOUT,
                                  SG_PHASE_CONNECT, false, 0, NULL);
    assert_int_equal(v.outcome, SG_OUTCOME_CONNECT_TIMEOUT);
}

static void plan_drives_a_real_guard_to_budget_exhausted(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_MS(300), SG_MS(20));
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_SEC(2)), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(o, SG_SEC(2)), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_guard g;
    assert_int_equal(sg_guard_start(&g, &p.guard_config, sg_op_budget(op), T0), 0);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(280));
    assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_SEND, T0 + SG_MS(5)), 0);
    assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_WAIT_HEADERS, T0 + SG_MS(6)), 0);
    sg_outcome fired = SG_OUTCOME_OK;
    assert_int_equal(sg_guard_check(&g, T0 + SG_MS(280), &fired), 1);
    sg_guard_result gr;
    assert_int_equal(sg_guard_finish(&g, T0 + SG_MS(280), false, &gr), 0);
    sg_op_result r;
    sg_op_result_from_guard(&r, &gr);
    r.sent = true;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(280), &r, &v), 0);
    assert_int_equal(v.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(v.decision, SG_OP_STOP);
}

static void refusal_after_a_retry_keeps_the_last_attempts_outcome(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(2), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 429, "1");
    assert_int_equal(v.decision, SG_OP_RETRY);
    /* The caller's timer fired very late: nothing is left. */
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_SEC(2), &p), SG_EREFUSED);
    assert_int_equal(p.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_HTTP_ERROR);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_final_decision(op), SG_OP_STOP);
}

/* ------------------------------------------------------------------ options */

static void defaults_are_the_documented_values(void **state) {
    (void)state;
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, NULL, T0), 0);
    plan_ok(op, T0, &p);
    assert_int_equal(p.attempt_timeout_ns, SG_SEC(60));
    assert_string_equal(p.deadline_header, "X-Deadline-Ms");
    /* Default max attempts: 3. */
    sg_op_verdict v;
    for (int i = 0; i < 3; i++) {
        if (i > 0) {
            plan_ok(op, v.retry_at, &p);
        }
        v = end_attempt(op, i == 0 ? T0 : v.retry_at, SG_OUTCOME_CONNECT_TIMEOUT,
                        SG_PHASE_CONNECT, false, 0, NULL);
    }
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    /* Default backoff: base 100 ms, so the first sleep is <= 100 ms. */
    assert_true(sg_op_attempt_at(op, 0)->backoff_ns <= SG_MS(100));
    assert_true(sg_op_attempt_at(op, 1)->backoff_ns <= SG_MS(200));
}

static void option_setters_validate_their_values(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_budget(o, 0), SG_EINVAL);
    assert_int_equal(sg_op_options_set_budget(o, SG_DURATION_MAX + 1), SG_ERANGE);
    assert_int_equal(sg_op_options_set_budget(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_op_options_set_floor(o, -1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_connect_timeout(o, -1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_idle_timeout(o, SG_DURATION_MAX + 1), SG_ERANGE);
    assert_int_equal(sg_op_options_set_stream_timeout(o, 0), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(NULL, 1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_max_attempts(o, 0), SG_EINVAL);
    assert_int_equal(sg_op_options_set_max_attempts(o, SG_OP_MAX_ATTEMPTS + 1),
                     SG_ERANGE);
    assert_int_equal(sg_op_options_set_backoff(o, 0, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_op_options_set_backoff(o, SG_SEC(2), SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_op_options_set_backoff(o, 1, SG_DURATION_MAX + 1), SG_ERANGE);
    assert_int_equal(sg_op_options_set_max_retry_after(o, -1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_min_attempt(o, -1), SG_EINVAL);
    const int bad[] = {503, 600};
    assert_int_equal(sg_op_options_set_retryable_statuses(o, bad, 2), SG_ERANGE);
    assert_int_equal(sg_op_options_set_retryable_statuses(o, NULL, 1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_method(o, "PO ST"), SG_EINVAL);
    assert_int_equal(sg_op_options_set_method(o, ""), SG_EINVAL);
    assert_int_equal(sg_op_options_set_method(o, NULL), SG_EINVAL);
    assert_int_equal(sg_op_options_set_method(o, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG"),
                     SG_ERANGE);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "a b"), SG_EINVAL);
    assert_int_equal(sg_op_options_set_idempotency_key(o, ""), SG_EINVAL);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "k\n"), SG_EINVAL);
    char long_key[SG_OP_IDEMPOTENCY_KEY_MAX + 2];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    assert_int_equal(sg_op_options_set_idempotency_key(o, long_key), SG_ERANGE);
    long_key[SG_OP_IDEMPOTENCY_KEY_MAX] = '\0';
    assert_int_equal(sg_op_options_set_idempotency_key(o, long_key), 0);
    assert_int_equal(sg_op_options_set_idempotency_key(o, NULL), 0);
    assert_int_equal(sg_op_options_set_deadline_header(o, "X-Deadline: Ms"), SG_EINVAL);
    char long_label[SG_OP_LABEL_MAX + 2];
    memset(long_label, 'l', sizeof(long_label) - 1);
    long_label[sizeof(long_label) - 1] = '\0';
    assert_int_equal(sg_op_options_set_label(o, long_label), SG_ERANGE);
}

static void floor_at_or_above_the_budget_is_refused_without_an_attempt(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_budget(o, SG_MS(5)), 0);
    assert_int_equal(sg_op_options_set_floor(o, SG_MS(10)), 0);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), SG_EREFUSED);
    assert_int_equal(plan.outcome, SG_OUTCOME_REFUSED);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_attempt_count(op), 0);
    assert_int_equal(sg_op_start(NULL, o, T0), SG_EINVAL);
}

static void
an_absolute_deadline_tighter_than_the_budget_bounds_the_operation(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(60)), 0);
    assert_int_equal(sg_op_options_set_deadline(o, T0 + SG_MS(400)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_budget_deadline(sg_op_budget(op)), T0 + SG_MS(400));
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(100), &plan), 0);
    assert_int_equal(plan.attempt_timeout_ns, SG_MS(300));
    assert_int_equal(sg_op_options_set_deadline(NULL, T0), SG_EINVAL);
}

/* An inbound deadline that leaves less than the minimum attempt: the
 * minimum is never more than this operation's own budget could lease, so
 * the first attempt is leased what there is, not refused. */
static void a_deadline_below_the_minimum_attempt_still_leases_it(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(60)), 0);
    assert_int_equal(sg_op_options_set_floor(o, 0), 0);
    assert_int_equal(sg_op_options_set_deadline(o, T0 + SG_MS(8)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    assert_int_equal(plan.attempt_timeout_ns, SG_MS(8));
}

static void
a_deadline_already_passed_is_budget_exhausted_without_an_attempt(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    assert_int_equal(sg_op_options_set_deadline(o, T0 - SG_MS(1)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), SG_EREFUSED);
    assert_int_equal(plan.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_attempt_count(op), 0);
}

/* Time the caller spent on the operation before starting it (a protocol
 * probe, a queue) is the budget's: counted from the instant given, in the
 * lease, the report's elapsed_ms and the first attempt's start_ms. */
static void a_budget_started_before_the_operation_counts_the_time_before(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(1)), 0);
    assert_int_equal(sg_op_options_set_started_at(o, T0 - SG_MS(300)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_budget_started_at(sg_op_budget(op)), T0 - SG_MS(300));
    assert_int_equal(sg_budget_deadline(sg_op_budget(op)), T0 + SG_MS(700));
    plan_ok(op, T0, &plan);
    assert_int_equal(plan.attempt_timeout_ns, SG_MS(700));
    (void)end_attempt(op, T0 + SG_MS(100), SG_OUTCOME_OK, SG_PHASE_STREAMING, true, 200,
                      NULL);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_finished_at(op), T0 + SG_MS(100));
    char rep[4096];
    assert_true(sg_op_report_write(op, T0 + SG_MS(100), rep, sizeof(rep), NULL) >= 0);
    assert_non_null(strstr(rep, "\"budget_ms\":1000,"));
    assert_non_null(strstr(rep, "\"elapsed_ms\":400,"));
    assert_non_null(strstr(rep, "\"remaining_ms\":600,"));
    assert_non_null(strstr(rep, "\"start_ms\":300,"));

    /* with an absolute deadline too: the earlier end of the two */
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(1)), 0);
    assert_int_equal(sg_op_options_set_deadline(o, T0 + SG_MS(500)), 0);
    assert_int_equal(sg_op_options_set_started_at(o, T0 - SG_MS(300)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_budget_deadline(sg_op_budget(op)), T0 + SG_MS(500));
    /* the time before spent it all: no attempt, budget_exhausted */
    assert_int_equal(sg_op_options_set_budget(o, SG_MS(200)), 0);
    assert_int_equal(sg_op_options_set_started_at(o, T0 - SG_MS(300)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), SG_EREFUSED);
    assert_int_equal(plan.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_finished_at(op), T0);
    assert_true(sg_op_report_write(op, T0, rep, sizeof(rep), NULL) >= 0);
    assert_non_null(strstr(rep, "\"budget_ms\":200,"));
    assert_non_null(strstr(rep, "\"elapsed_ms\":300,"));
    /* an instant after the start is the start */
    assert_int_equal(sg_op_options_set_started_at(o, T0 + SG_SEC(5)), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_budget_started_at(sg_op_budget(op)), T0);
    assert_int_equal(sg_op_finished_at(op), -1); /* not ended */
    assert_int_equal(sg_op_options_set_started_at(NULL, T0), SG_EINVAL);
    assert_int_equal(sg_op_finished_at(NULL), -1);
    /* the ends of int64: the report's durations saturate, never wrap */
    assert_int_equal(sg_op_options_set_started_at(o, INT64_MIN), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_true(sg_op_report_write(op, INT64_MAX, rep, sizeof(rep), NULL) >= 0);
    assert_non_null(strstr(rep, "\"elapsed_ms\":9223372036854,"));
}

/* partial is "delivered, then broke": an attempt that ended ok never is,
 * whatever the transport's flag says. */
static void an_ok_attempt_is_never_partial(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(5), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_OK;
    r.phase = SG_PHASE_STREAMING;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    r.items = 3;
    r.partial = true;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(10), &r, &v), 0);
    assert_false(v.partial);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_false(sg_op_attempt_at(op, 0)->partial);
}

static void names_are_stable(void **state) {
    (void)state;
    assert_string_equal(sg_op_decision_name(SG_OP_RETRY), "retry");
    assert_string_equal(sg_op_reason_name(SG_OP_REASON_OUTCOME_UNKNOWN),
                        "outcome_unknown");
    assert_null(sg_op_decision_name(SG_OP_DECISION_COUNT_));
    assert_null(sg_op_reason_name(SG_OP_REASON_COUNT_));
    for (int r = 0; r < SG_OP_REASON_COUNT_; r++) {
        assert_non_null(sg_op_reason_name((sg_op_reason)r));
    }
}

/* ---------------------------------------------------------------- fallback */

/* A clock that reads below zero (a caller's own, or an injected one): an
 * endpoint that never failed has no time of its own to wait for. */
static void a_fresh_endpoint_waits_for_nothing_on_a_negative_clock(void **state) {
    (void)state;
    static const char *const two[] = {"http://a/", "http://b/"};
    const int64_t t0 = -SG_SEC(10);
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(60), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 2), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_endpoints(o, two, 2), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, t0), 0);
    sg_op_plan p;
    plan_ok(op, t0, &p);
    sg_op_verdict v = end_attempt(op, t0 + SG_MS(10), SG_OUTCOME_TRANSPORT_ERROR,
                                  SG_PHASE_CONNECT, false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, 0);
    plan_ok(op, t0 + SG_MS(10), &p);
    assert_int_equal(p.endpoint, 1);
}

/* A Retry-After beyond the maximum stops the operation when its endpoint
 * is the one to wait for, however long ago it was given: a's 90 s (the
 * maximum 60 s) still stops it after b failed 40 s later, when only 50 s
 * of it are left - not a 50 s sleep that honours all 90. */
static void a_retry_after_beyond_the_maximum_stops_later_too(void **state) {
    (void)state;
    static const char *const two[] = {"http://a/", "http://b/"};
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(300), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 5), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_retry_after(o, SG_SEC(60)), 0);
    assert_int_equal(sg_op_options_set_endpoints(o, two, 2), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(10), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 503, "90");
    assert_int_equal(v.decision, SG_OP_RETRY); /* b, at once */
    assert_int_equal(v.delay_ns, 0);
    plan_ok(op, T0 + SG_MS(10), &p);
    assert_int_equal(p.endpoint, 1);
    v = end_attempt(op, T0 + SG_SEC(40), SG_OUTCOME_TRANSPORT_ERROR, SG_PHASE_CONNECT,
                    false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_RETRY_AFTER_EXCEEDS_MAX);
}

/* Three endpoints: each retryable failure moves to the next, at once when
 * that endpoint has no time of its own to wait for; all from one budget
 * and one attempt count; back on an endpoint, its own backoff or
 * Retry-After is what is waited for. */
static void fallback_moves_to_the_next_endpoint(void **state) {
    (void)state;
    static const char *const eps[] = {"https://a.example/v1", "https://b.example/v1",
                                      "https://c.example/v1"};
    SG_AUTO_OPTIONS(o);
    opts_init(o, SG_SEC(60), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 5), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(100), SG_MS(100)), 0);
    assert_int_equal(sg_op_options_set_endpoints(o, eps, 3), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan p;
    plan_ok(op, T0, &p);
    assert_int_equal(p.endpoint, 0);
    assert_string_equal(p.endpoint_url, eps[0]);
    /* a 503 with a Retry-After far beyond the budget: endpoint a is out,
     * the fallback goes at once */
    sg_op_verdict v = end_attempt(op, T0 + SG_MS(10), SG_OUTCOME_HTTP_ERROR,
                                  SG_PHASE_WAIT_HEADERS, true, 503, "3600");
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, 0);
    plan_ok(op, T0 + SG_MS(10), &p);
    assert_int_equal(p.endpoint, 1);
    assert_string_equal(p.endpoint_url, eps[1]);
    assert_int_equal(p.remaining_ns, SG_SEC(60) - SG_MS(10)); /* the same budget */
    v = end_attempt(op, T0 + SG_MS(30), SG_OUTCOME_TRANSPORT_ERROR, SG_PHASE_CONNECT,
                    false, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, 0);
    plan_ok(op, T0 + SG_MS(30), &p);
    assert_int_equal(p.endpoint, 2);
    v = end_attempt(op, T0 + SG_MS(40), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, 502, NULL);
    /* back to a, whose Retry-After is beyond the maximum (and the budget):
     * stop, and say so */
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_RETRY_AFTER_EXCEEDS_MAX);
    assert_int_equal(sg_op_attempt_count(op), 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(sg_op_attempt_at(op, i)->endpoint, i);
    }

    /* with backoff only, wrapping round waits for what is left of the
     * first endpoint's own sleep */
    uint64_t half = UINT64_MAX / 2; /* the middle of the jitter: 50 ms */
    assert_int_equal(sg_op_options_set_random(o, fixed_random, &half), 0);
    static const char *const two[] = {"http://a/", "http://b/"};
    assert_int_equal(sg_op_options_set_endpoints(o, two, 2), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    v = end_attempt(op, T0 + SG_MS(10), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, 503, NULL);
    assert_int_equal(v.delay_ns, 0); /* b at once */
    plan_ok(op, T0 + SG_MS(10), &p);
    assert_int_equal(p.endpoint, 1);
    v = end_attempt(op, T0 + SG_MS(20), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
                    true, 503, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    int64_t a_back = sg_op_attempt_at(op, 0)->backoff_ns; /* 0: went at once */
    assert_int_equal(a_back, 0);
    assert_true(v.delay_ns > 0 && v.delay_ns <= SG_MS(50)); /* a's sleep, less 10 ms */
    plan_ok(op, T0 + SG_MS(20) + v.delay_ns, &p);
    assert_int_equal(p.endpoint, 0);

    /* the report names each attempt's endpoint, never its credentials or
     * query */
    static const char *const secret[] = {"https://user:pw@api.example/v1/chat?key=s3cret",
                                         "http://[::1]:8080/x#frag"};
    assert_int_equal(sg_op_options_set_endpoints(o, secret, 2), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    plan_ok(op, T0, &p);
    v = end_attempt(op, T0 + SG_MS(1), SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS, true,
                    503, NULL);
    plan_ok(op, T0 + SG_MS(1) + v.delay_ns, &p);
    char rep[4096];
    assert_true(sg_op_report_write(op, T0 + SG_MS(2), rep, sizeof(rep), NULL) >= 0);
    assert_non_null(strstr(rep, "\"endpoint\":\"https://api.example:443/v1/chat\""));
    assert_non_null(strstr(rep, "\"endpoint\":\"http://[::1]:8080/x\""));
    assert_null(strstr(rep, "s3cret"));
    assert_null(strstr(rep, "pw@"));

    /* bad lists */
    assert_int_equal(sg_op_options_set_endpoints(o, NULL, 1), SG_EINVAL);
    static const char *const holes[] = {"http://a/", NULL};
    assert_int_equal(sg_op_options_set_endpoints(o, holes, 2), SG_EINVAL);
    assert_int_equal(sg_op_options_set_endpoints(o, eps, SG_OP_MAX_ENDPOINTS + 1),
                     SG_ERANGE);
    assert_int_equal(sg_op_options_set_endpoints(o, NULL, 0), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_leases_the_attempt_timeout_when_the_budget_allows),
        cmocka_unit_test(budget_300ms_with_2s_attempts_grants_at_most_300ms_less_floor),
        cmocka_unit_test(clocks_that_are_off_stay_off_and_caps_pass_through),
        cmocka_unit_test(plan_is_refused_when_remaining_is_at_the_floor),
        cmocka_unit_test(plan_is_budget_exhausted_when_nothing_remains),
        cmocka_unit_test(plan_is_refused_below_the_minimum_attempt),
        cmocka_unit_test(minimum_attempt_never_exceeds_the_attempt_timeout),
        cmocka_unit_test(tiny_budget_still_gets_its_first_attempt),
        cmocka_unit_test(calls_out_of_order_are_state_errors),
        cmocka_unit_test(next_attempt_before_the_backoff_ends_is_a_state_error),
        cmocka_unit_test(invalid_results_are_rejected),
        cmocka_unit_test(ok_attempt_is_done),
        cmocka_unit_test(a_provider_error_is_retried_only_when_transient_and_safe),
        cmocka_unit_test(fallback_moves_to_the_next_endpoint),
        cmocka_unit_test(a_retry_after_beyond_the_maximum_stops_later_too),
        cmocka_unit_test(an_http_error_without_a_status_is_no_answer),
        cmocka_unit_test(a_fresh_endpoint_waits_for_nothing_on_a_negative_clock),
        cmocka_unit_test(never_sent_post_is_always_safe_to_retry),
        cmocka_unit_test(unsafe_post_sent_without_answer_is_outcome_unknown),
        cmocka_unit_test(post_is_treated_as_sent_once_the_phase_passed_send),
        cmocka_unit_test(cancelled_post_after_send_is_outcome_unknown),
        cmocka_unit_test(post_with_idempotency_key_is_retried_after_send),
        cmocka_unit_test(declared_idempotent_post_is_retried_after_send),
        cmocka_unit_test(rfc9110_idempotent_methods_are_retried_after_send),
        cmocka_unit_test(other_methods_and_other_casings_are_unsafe),
        cmocka_unit_test(partial_stream_is_never_retried),
        cmocka_unit_test(partial_flag_from_the_guard_is_honoured),
        cmocka_unit_test(partial_unsafe_stream_is_partial_and_outcome_unknown),
        cmocka_unit_test(retryable_status_on_a_safe_request_is_retried),
        cmocka_unit_test(non_retryable_status_is_a_final_answer),
        cmocka_unit_test(
            unsafe_post_answered_500_is_final_but_a_gateways_502_504_unknown),
        cmocka_unit_test(keyed_post_answered_by_a_gateway_is_retried),
        cmocka_unit_test(an_attempt_refused_by_the_transport_is_not_retried),
        cmocka_unit_test(unsafe_post_answered_429_is_retried_as_a_rejection),
        cmocka_unit_test(unsafe_post_answered_503_is_retried_only_with_retry_after),
        cmocka_unit_test(unsafe_post_answered_529_is_treated_as_503),
        cmocka_unit_test(a_final_refusal_in_the_body_is_not_retried),
        cmocka_unit_test(rejection_retries_can_be_turned_off),
        cmocka_unit_test(retryable_status_set_is_configurable),
        cmocka_unit_test(cancelled_cap_exceeded_and_protocol_error_are_never_retried),
        cmocka_unit_test(attempts_are_bounded_by_max_attempts),
        cmocka_unit_test(operation_outcome_is_the_last_attempts),
        cmocka_unit_test(backoff_is_full_jitter_under_a_doubling_capped_ceiling),
        cmocka_unit_test(jitter_can_draw_zero),
        cmocka_unit_test(seeded_backoff_is_reproducible_and_within_the_ceiling),
        cmocka_unit_test(backoff_never_sleeps_past_the_deadline),
        cmocka_unit_test(backoff_that_does_not_fit_stops_at_once),
        cmocka_unit_test(sleep_must_leave_the_minimum_attempt_above_the_floor),
        cmocka_unit_test(retry_after_replaces_the_computed_backoff),
        cmocka_unit_test(parsed_retry_after_from_the_transport_is_honoured),
        cmocka_unit_test(retry_after_ms_wins_over_retry_after_when_valid),
        cmocka_unit_test(retry_after_http_date_is_measured_on_the_wall_clock),
        cmocka_unit_test(retry_after_longer_than_remaining_stops_at_once),
        cmocka_unit_test(retry_after_longer_than_the_maximum_stops),
        cmocka_unit_test(malformed_retry_after_falls_back_to_the_backoff),
        cmocka_unit_test(clamped_ceiling_firing_is_recorded_as_budget_exhausted),
        cmocka_unit_test(own_attempt_timeout_keeps_its_name_and_is_retried),
        cmocka_unit_test(clamped_clock_that_fired_early_keeps_its_name),
        cmocka_unit_test(plan_drives_a_real_guard_to_budget_exhausted),
        cmocka_unit_test(refusal_after_a_retry_keeps_the_last_attempts_outcome),
        cmocka_unit_test(defaults_are_the_documented_values),
        cmocka_unit_test(option_setters_validate_their_values),
        cmocka_unit_test(floor_at_or_above_the_budget_is_refused_without_an_attempt),
        cmocka_unit_test(
            an_absolute_deadline_tighter_than_the_budget_bounds_the_operation),
        cmocka_unit_test(a_deadline_below_the_minimum_attempt_still_leases_it),
        cmocka_unit_test(
            a_deadline_already_passed_is_budget_exhausted_without_an_attempt),
        cmocka_unit_test(a_budget_started_before_the_operation_counts_the_time_before),
        cmocka_unit_test(an_ok_attempt_is_never_partial),
        cmocka_unit_test(names_are_stable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
