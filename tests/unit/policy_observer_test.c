/*
 * The operation observer: what the policy calls, in which order, with
 * what, and what an observer's refusal or failure does.  Time is driven by
 * hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/http.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#define T0 SG_SEC(1000)

/* Records every call as one letter (I intent, S start, E end, R resolve)
 * and what the calls saw. */
typedef struct rec {
    char log[64];
    size_t n;
    int intent_rc; /* what on_intent returns */
    int later_rc;  /* what the other three return */
    char method[16];
    char target[64];
    char key[32];
    char label[32];
    sg_outcome resolved_outcome;
    sg_op_reason resolved_reason;
    uint32_t last_end_attempt;
    bool end_saw_decision;
} rec;

static void put(rec *r, char c) {
    if (r->n + 1 < sizeof(r->log)) {
        r->log[r->n++] = c;
        r->log[r->n] = '\0';
    }
}

static int on_intent(const sg_op *op, const sg_op_intent *in, void *ud) {
    (void)op;
    rec *r = ud;
    put(r, 'I');
    snprintf(r->method, sizeof(r->method), "%s", in->method ? in->method : "-");
    snprintf(r->target, sizeof(r->target), "%s", in->target ? in->target : "-");
    snprintf(r->key, sizeof(r->key), "%s",
             in->idempotency_key ? in->idempotency_key : "-");
    snprintf(r->label, sizeof(r->label), "%s", in->label ? in->label : "-");
    return r->intent_rc;
}

static int on_start(const sg_op *op, const sg_op_attempt *a, void *ud) {
    (void)op;
    rec *r = ud;
    assert_true(a->running);
    assert_true(a->attempt_timeout_ns > 0);
    put(r, 'S');
    return r->later_rc;
}

static int on_end(const sg_op *op, const sg_op_attempt *a, void *ud) {
    (void)op;
    rec *r = ud;
    put(r, 'E');
    r->last_end_attempt = a->n;
    r->end_saw_decision = !a->running && a->decision != SG_OP_NONE;
    return r->later_rc;
}

static int on_resolve(const sg_op *op, void *ud) {
    rec *r = ud;
    put(r, 'R');
    assert_true(sg_op_finished(op));
    r->resolved_outcome = sg_op_outcome(op);
    r->resolved_reason = sg_op_final_reason(op);
    return r->later_rc;
}

/* The observer that records every call (made once; the process's). */
static const sg_op_observer *recorder(void) {
    static sg_op_observer *obs;
    if (obs == NULL) {
        assert_int_equal(sg_op_observer_new(&obs), 0);
        assert_int_equal(sg_op_observer_set_on_intent(obs, on_intent), 0);
        assert_int_equal(sg_op_observer_set_on_attempt_start(obs, on_start), 0);
        assert_int_equal(sg_op_observer_set_on_attempt_end(obs, on_end), 0);
        assert_int_equal(sg_op_observer_set_on_resolve(obs, on_resolve), 0);
    }
    return obs;
}

static void opts_with(sg_op_options *o, rec *r, int64_t budget) {
    assert_int_equal(sg_op_options_set_budget(o, budget), 0);
    assert_int_equal(sg_op_options_set_seed(o, 7), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(10), SG_MS(10)), 0);
    assert_int_equal(sg_op_options_set_observer(o, recorder(), r), 0);
}

static sg_op_verdict fail_attempt(sg_op *op, int64_t now, sg_outcome oc) {
    sg_op_result res;
    memset(&res, 0, sizeof(res));
    res.outcome = oc;
    res.phase = SG_PHASE_CONNECT;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &res, &v), 0);
    return v;
}

static void observer_sees_intent_each_attempt_and_one_resolution_in_order(void **state) {
    (void)state;
    rec r = {0};
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(10));
    sg_op_options_set_idempotency_key(o, "order-7");
    sg_op_options_set_label(o, "chat");
    sg_op_options_set_target(o, "https://api.example/v1/chat");
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_string_equal(r.log, "I");
    assert_string_equal(r.method, "POST");
    assert_string_equal(r.target, "https://api.example/v1/chat");
    assert_string_equal(r.key, "order-7");
    assert_string_equal(r.label, "chat");

    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    sg_op_verdict v = fail_attempt(op, T0 + SG_MS(5), SG_OUTCOME_TRANSPORT_ERROR);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_string_equal(r.log, "ISE");
    assert_int_equal(r.last_end_attempt, 1);
    assert_true(r.end_saw_decision);

    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &plan), 0);
    sg_op_result ok;
    memset(&ok, 0, sizeof(ok));
    ok.outcome = SG_OUTCOME_OK;
    ok.phase = SG_PHASE_STREAMING;
    ok.sent = true;
    ok.headers_received = true;
    ok.http_status = 200;
    assert_int_equal(sg_op_attempt_done(op, v.retry_at + SG_MS(1), &ok, &v), 0);
    assert_string_equal(r.log, "ISESER");
    assert_int_equal(r.resolved_outcome, SG_OUTCOME_OK);
    assert_int_equal(sg_op_observer_error(op), 0);
}

static void observer_refusal_leaves_the_operation_unstarted(void **state) {
    (void)state;
    rec r = {.intent_rc = SG_EEXIST};
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(10));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), SG_EEXIST);
    sg_op_plan plan;
    /* nothing can be planned, so nothing can be sent */
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), SG_EINVAL);
    assert_false(sg_op_finished(op));
    assert_string_equal(r.log, "I");
}

static void observer_refusal_with_a_positive_value_is_refused(void **state) {
    (void)state;
    rec r = {.intent_rc = 1};
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(10));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), SG_EREFUSED);
}

static void
observer_failures_never_change_the_outcome_and_the_first_is_kept(void **state) {
    (void)state;
    rec r = {.later_rc = SG_EIO};
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(10));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    r.later_rc = SG_ENOMEM; /* a later, different failure is not kept */
    sg_op_verdict v = fail_attempt(op, T0 + SG_MS(1), SG_OUTCOME_PROTOCOL_ERROR);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_PROTOCOL_ERROR);
    assert_int_equal(sg_op_observer_error(op), SG_EIO);
    assert_string_equal(r.log, "ISER");
}

static void a_refused_lease_resolves_once_without_an_attempt(void **state) {
    (void)state;
    rec r = {0};
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(1));
    sg_op_options_set_floor(o, SG_SEC(1));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), SG_EREFUSED);
    assert_string_equal(r.log, "IR");
    assert_int_equal(r.resolved_outcome, SG_OUTCOME_REFUSED);
}

static void cancel_while_sleeping_ends_cancelled_and_resolves(void **state) {
    (void)state;
    rec r = {0};
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(10));
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    /* a running attempt is cancelled by its transport, not here */
    assert_int_equal(sg_op_cancel(op, T0), SG_ESTATE);
    sg_op_verdict v = fail_attempt(op, T0 + SG_MS(1), SG_OUTCOME_CONNECT_TIMEOUT);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(sg_op_cancel(op, T0 + SG_MS(2)), 0);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_CANCELLED);
    assert_int_equal(sg_op_final_decision(op), SG_OP_STOP);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_CANCELLED);
    assert_string_equal(sg_op_reason_name(SG_OP_REASON_CANCELLED), "cancelled");
    assert_string_equal(r.log, "ISER");
    assert_int_equal(r.resolved_reason, SG_OP_REASON_CANCELLED);
    /* ended: no further attempt, no second resolution */
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &plan), SG_ESTATE);
    assert_int_equal(sg_op_cancel(op, T0 + SG_MS(3)), SG_ESTATE);
    assert_string_equal(r.log, "ISER");
    assert_int_equal(sg_op_cancel(NULL, T0), SG_EINVAL);
}

static void removing_the_observer_stops_the_calls(void **state) {
    (void)state;
    rec r = {0};
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(10));
    assert_int_equal(sg_op_options_set_observer(o, NULL, &r), 0);
    assert_int_equal(sg_op_options_set_observer(NULL, recorder(), &r), SG_EINVAL);
    assert_int_equal(sg_op_options_set_target(NULL, "x"), SG_EINVAL);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    fail_attempt(op, T0 + SG_MS(1), SG_OUTCOME_PROTOCOL_ERROR);
    assert_string_equal(r.log, "");
    assert_string_equal(sg_op_options_method(o), "POST");
    assert_null(sg_op_options_target(o));
}

/* ------------------------------------------------- the intent off the loop
 * An observer that answers later: start_intent says "in progress" (the
 * fd is only a number here: nothing polls it), poll_intent answers what
 * the test put in `answer`, abandon_intent records the outcome. */
typedef struct later {
    rec r;
    int start_rc; /* what start_intent returns */
    int answer;   /* what poll_intent returns */
    int polls;
    int abandons;
    sg_outcome abandoned_at;
    int token; /* the handle given out */
} later;

static int l_start(const sg_op *op, const sg_op_intent *in, void *ud,
                   sg_op_intent_wait *w) {
    later *l = ud;
    (void)on_intent(op, in, &l->r); /* records 'I' and what it saw */
    w->fd = 42;
    w->handle = &l->token;
    return l->start_rc;
}

static int l_poll(const sg_op *op, void *handle, void *ud) {
    (void)op;
    later *l = ud;
    assert_ptr_equal(handle, &l->token);
    l->polls++;
    put(&l->r, 'P');
    return l->answer;
}

static void l_abandon(const sg_op *op, void *handle, sg_outcome outcome, void *ud) {
    (void)op;
    later *l = ud;
    assert_ptr_equal(handle, &l->token);
    l->abandons++;
    l->abandoned_at = outcome;
    put(&l->r, 'A');
}

static int l_resolve(const sg_op *op, void *ud) {
    return on_resolve(op, &((later *)ud)->r);
}

/* An observer that records its intents later, off the caller's thread. */
static const sg_op_observer *answers_later(void) {
    static sg_op_observer *obs;
    if (obs == NULL) {
        assert_int_equal(sg_op_observer_new(&obs), 0);
        assert_int_equal(sg_op_observer_set_on_resolve(obs, l_resolve), 0);
        assert_int_equal(sg_op_observer_set_async_intent(obs, l_start, l_poll, l_abandon),
                         0);
    }
    return obs;
}

static void later_opts(sg_op_options *o, later *l, int64_t budget) {
    memset(l, 0, sizeof(*l));
    l->start_rc = SG_EINPROGRESS;
    l->answer = SG_EINPROGRESS;
    assert_int_equal(sg_op_options_set_budget(o, budget), 0);
    assert_int_equal(sg_op_options_set_target(o, "https://h/x"), 0);
    assert_int_equal(sg_op_options_set_observer(o, answers_later(), l), 0);
}

/* @op started at T0 with its intent pending on @l's observer. */
static void start_pending(sg_op *op, sg_op_options *o, later *l, int64_t budget) {
    later_opts(o, l, budget);
    int fd;
    assert_int_equal(sg_op_start_async(op, o, T0, &fd), SG_EINPROGRESS);
}

static void a_pending_intent_plans_nothing_until_it_lands(void **state) {
    (void)state;
    later l;
    SG_AUTO_OPTIONS(o);
    later_opts(o, &l, SG_SEC(2));
    SG_AUTO_OP(op);
    int fd = 0;
    assert_int_equal(sg_op_start_async(op, o, T0, &fd), SG_EINPROGRESS);
    assert_int_equal(fd, 42);
    assert_true(sg_op_intent_pending(op));
    assert_true(sg_op_intent_deadline(op) == T0 + SG_SEC(2));
    assert_string_equal(l.r.target, "https://h/x");
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), SG_ESTATE);
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_MS(300)), SG_EINPROGRESS);
    l.answer = 0;
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_MS(400)), 0);
    assert_false(sg_op_intent_pending(op));
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_MS(400)), SG_ESTATE);
    /* the wait was spent from the budget: 1.6 s are left to lease */
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(400), &plan), 0);
    assert_true(plan.attempt_timeout_ns == SG_MS(1600));
    sg_op_result res;
    memset(&res, 0, sizeof(res));
    res.outcome = SG_OUTCOME_OK;
    res.phase = SG_PHASE_STREAMING;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(500), &res, &v), 0);
    assert_string_equal(l.r.log, "IPPR"); /* resolved once, never abandoned */
    assert_int_equal(l.abandons, 0);
}

/* An operation discarded with its intent in flight gives the observer its
 * handle back (abandon_intent, as cancelled), once. */
static void releasing_a_pending_intent_abandons_it(void **state) {
    (void)state;
    later l;
    SG_AUTO_OPTIONS(o);
    sg_op *op;
    assert_int_equal(sg_op_new(&op), 0);
    start_pending(op, o, &l, SG_SEC(2));
    assert_int_equal(l.abandons, 0);
    sg_op_free(op);
    assert_int_equal(l.abandons, 1);
    assert_int_equal(l.abandoned_at, SG_OUTCOME_CANCELLED);
    /* started again while pending: abandoned the same way, once */
    SG_AUTO_OP(again);
    start_pending(again, o, &l, SG_SEC(2));
    assert_int_equal(sg_op_start(again, o, T0 + SG_MS(1)), 0);
    assert_int_equal(l.abandons, 1);
}

static void a_refusal_that_comes_later_ends_the_operation_refused(void **state) {
    (void)state;
    later l;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start_pending(op, o, &l, SG_SEC(2));
    l.answer = SG_EEXIST;
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_MS(5)), 1);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_INTENT_REFUSED);
    assert_int_equal(sg_op_observer_error(op), SG_EEXIST);
    assert_int_equal(sg_op_attempt_count(op), 0);
    /* never recorded: neither abandoned nor resolved */
    assert_string_equal(l.r.log, "IP");
}

static void an_intent_past_its_deadline_is_abandoned_as_the_budget_ends(void **state) {
    (void)state;
    later l;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start_pending(op, o, &l, SG_SEC(1));
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_SEC(1) - 1), SG_EINPROGRESS);
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_SEC(1)), 1);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(l.abandons, 1);
    assert_int_equal(l.abandoned_at, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_string_equal(l.r.log, "IPPA");

    /* with a floor the intent's deadline is the floor, and what is left
     * there is refused, as a lease would be */
    later_opts(o, &l, SG_SEC(1));
    assert_int_equal(sg_op_options_set_floor(o, SG_MS(200)), 0);
    int fd;
    assert_int_equal(sg_op_start_async(op, o, T0, &fd), SG_EINPROGRESS);
    assert_true(sg_op_intent_deadline(op) == T0 + SG_MS(800));
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_MS(800)), 1);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_BUDGET_BELOW_FLOOR);
    assert_int_equal(l.abandoned_at, SG_OUTCOME_REFUSED);
}

static void an_intent_that_times_out_early_is_judged_at_its_deadline(void **state) {
    (void)state;
    later l;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start_pending(op, o, &l, SG_SEC(1));
    /* the database gave up 5 ms before our deadline */
    l.answer = SG_ETIMEDOUT;
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_MS(995)), 1);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_observer_error(op), SG_ETIMEDOUT);
    assert_int_equal(l.abandons, 0); /* answered: nothing to abandon */
    assert_string_equal(l.r.log, "IP");
}

static void cancel_while_the_intent_waits_abandons_it(void **state) {
    (void)state;
    later l;
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    start_pending(op, o, &l, SG_SEC(1));
    assert_int_equal(sg_op_cancel(op, T0 + SG_MS(10)), 0);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_CANCELLED);
    assert_int_equal(l.abandons, 1);
    assert_int_equal(l.abandoned_at, SG_OUTCOME_CANCELLED);
    assert_string_equal(l.r.log, "IA"); /* no on_resolve */
    assert_int_equal(sg_op_intent_poll(op, T0 + SG_MS(20)), SG_ESTATE);
}

static void start_async_without_the_async_calls_waits_in_on_intent(void **state) {
    (void)state;
    rec r;
    memset(&r, 0, sizeof(r));
    SG_AUTO_OPTIONS(o);
    opts_with(o, &r, SG_SEC(1));
    SG_AUTO_OP(op);
    int fd = 7;
    assert_int_equal(sg_op_start_async(op, o, T0, &fd), 0);
    assert_int_equal(fd, -1);
    assert_false(sg_op_intent_pending(op));
    assert_string_equal(r.log, "I");
    r.intent_rc = SG_EEXIST;
    assert_int_equal(sg_op_start_async(op, o, T0, &fd), SG_EEXIST);
    assert_int_equal(sg_op_start_async(op, o, T0, NULL), SG_EINVAL);

    /* an intent recorded at once: ready, nothing pending */
    later l;
    later_opts(o, &l, SG_SEC(1));
    l.start_rc = 0;
    assert_int_equal(sg_op_start_async(op, o, T0, &fd), 0);
    assert_false(sg_op_intent_pending(op));
    /* and the plain sg_op_start never asks start_intent */
    later_opts(o, &l, SG_SEC(1));
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_string_equal(l.r.log, "");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(observer_sees_intent_each_attempt_and_one_resolution_in_order),
        cmocka_unit_test(observer_refusal_leaves_the_operation_unstarted),
        cmocka_unit_test(observer_refusal_with_a_positive_value_is_refused),
        cmocka_unit_test(
            observer_failures_never_change_the_outcome_and_the_first_is_kept),
        cmocka_unit_test(a_refused_lease_resolves_once_without_an_attempt),
        cmocka_unit_test(cancel_while_sleeping_ends_cancelled_and_resolves),
        cmocka_unit_test(removing_the_observer_stops_the_calls),
        cmocka_unit_test(a_pending_intent_plans_nothing_until_it_lands),
        cmocka_unit_test(releasing_a_pending_intent_abandons_it),
        cmocka_unit_test(a_refusal_that_comes_later_ends_the_operation_refused),
        cmocka_unit_test(an_intent_past_its_deadline_is_abandoned_as_the_budget_ends),
        cmocka_unit_test(an_intent_that_times_out_early_is_judged_at_its_deadline),
        cmocka_unit_test(cancel_while_the_intent_waits_abandons_it),
        cmocka_unit_test(start_async_without_the_async_calls_waits_in_on_intent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
