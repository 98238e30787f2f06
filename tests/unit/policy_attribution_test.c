/*
 * Who set the limit names the outcome (docs/design.md, "Who set the
 * limit"), for every pair of limits: connect, first item, idle, stream
 * total, the per-attempt ceiling and the operation budget.  Each case
 * leases an attempt from the policy, drives a real guard with the granted
 * clocks on a hand-driven clock to its first expiry, hands the result back
 * and checks the recorded outcome and whether it may be retried.
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

typedef struct clock_case {
    const char *name;
    /* milliseconds; 0 = off (budget: required) */
    int budget, floor, attempt, connect, first, idle, total;
    int item_at;     /* an item at T0 + item_at ms, -1 none */
    bool connecting; /* stay in phase connect (else wait_first_item at T0) */
    int fires_at;    /* expected expiry, ms after T0 */
    sg_outcome want;
    bool retried; /* the verdict is RETRY */
} clock_case;

#define ITEM_NONE (-1)

static const clock_case cases[] = {
    /* connect vs the others */
    {"connect tie first_item", 1000, 0, 0, 100, 100, 0, 0, ITEM_NONE, true, 100,
     SG_OUTCOME_CONNECT_TIMEOUT, true},
    {"first_item tighter than connect", 1000, 0, 0, 100, 50, 0, 0, ITEM_NONE, true, 50,
     SG_OUTCOME_FIRST_ITEM_TIMEOUT, true},
    {"connect tie stream_total", 1000, 0, 0, 100, 0, 0, 100, ITEM_NONE, true, 100,
     SG_OUTCOME_CONNECT_TIMEOUT, true},
    {"connect tie attempt", 1000, 0, 100, 100, 0, 0, 0, ITEM_NONE, true, 100,
     SG_OUTCOME_CONNECT_TIMEOUT, true},
    {"connect shortened by attempt", 1000, 0, 100, 200, 0, 0, 0, ITEM_NONE, true, 100,
     SG_OUTCOME_ATTEMPT_TIMEOUT, true},
    {"connect tie budget", 100, 0, 0, 100, 0, 0, 0, ITEM_NONE, true, 100,
     SG_OUTCOME_CONNECT_TIMEOUT, false},
    {"connect shortened by budget", 100, 0, 0, 200, 0, 0, 0, ITEM_NONE, true, 100,
     SG_OUTCOME_BUDGET_EXHAUSTED, false},
    /* first item vs the others */
    {"first_item before idle can run", 1000, 0, 0, 0, 100, 50, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_FIRST_ITEM_TIMEOUT, true},
    {"first_item tie stream_total", 1000, 0, 0, 0, 100, 0, 100, ITEM_NONE, false, 100,
     SG_OUTCOME_FIRST_ITEM_TIMEOUT, true},
    {"stream_total tighter than first_item", 1000, 0, 0, 0, 100, 0, 60, ITEM_NONE, false,
     60, SG_OUTCOME_STREAM_TIMEOUT, true},
    {"first_item tie attempt", 1000, 0, 100, 0, 100, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_FIRST_ITEM_TIMEOUT, true},
    {"first_item shortened by attempt", 60000, 0, 100, 0, 200, 0, 0, ITEM_NONE, false,
     100, SG_OUTCOME_ATTEMPT_TIMEOUT, true},
    {"first_item tighter than attempt", 1000, 0, 200, 0, 100, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_FIRST_ITEM_TIMEOUT, true},
    {"first_item tie budget", 100, 0, 0, 0, 100, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_FIRST_ITEM_TIMEOUT, false},
    {"first_item shortened by budget", 100, 0, 0, 0, 200, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_BUDGET_EXHAUSTED, false},
    /* idle vs the others (after one item at 10 ms; partial, never retried) */
    {"idle after the first item", 1000, 0, 0, 0, 100, 50, 0, 10, false, 60,
     SG_OUTCOME_IDLE_TIMEOUT, false},
    {"idle tie stream_total", 1000, 0, 0, 0, 0, 50, 60, 10, false, 60,
     SG_OUTCOME_IDLE_TIMEOUT, false},
    {"stream_total tighter than idle", 1000, 0, 0, 0, 0, 100, 60, 10, false, 60,
     SG_OUTCOME_STREAM_TIMEOUT, false},
    {"idle tie attempt", 1000, 0, 60, 0, 0, 50, 0, 10, false, 60, SG_OUTCOME_IDLE_TIMEOUT,
     false},
    {"idle cut by attempt", 1000, 0, 100, 0, 0, 200, 0, 10, false, 100,
     SG_OUTCOME_ATTEMPT_TIMEOUT, false},
    {"idle cut by budget", 100, 0, 0, 0, 0, 200, 0, 10, false, 100,
     SG_OUTCOME_BUDGET_EXHAUSTED, false},
    /* stream total vs the ceiling and the budget */
    {"stream_total tie attempt", 1000, 0, 100, 0, 0, 0, 100, ITEM_NONE, false, 100,
     SG_OUTCOME_STREAM_TIMEOUT, true},
    {"stream_total shortened by attempt", 1000, 0, 100, 0, 0, 0, 200, ITEM_NONE, false,
     100, SG_OUTCOME_ATTEMPT_TIMEOUT, true},
    {"stream_total tie budget", 100, 0, 0, 0, 0, 0, 100, ITEM_NONE, false, 100,
     SG_OUTCOME_STREAM_TIMEOUT, false},
    {"stream_total shortened by budget", 100, 0, 0, 0, 0, 0, 200, ITEM_NONE, false, 100,
     SG_OUTCOME_BUDGET_EXHAUSTED, false},
    /* the ceiling vs the budget */
    {"attempt tie budget", 100, 0, 100, 0, 0, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_ATTEMPT_TIMEOUT, false},
    {"attempt tighter than budget", 1000, 0, 100, 0, 0, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_ATTEMPT_TIMEOUT, true},
    {"attempt longer than budget", 100, 0, 200, 0, 0, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_BUDGET_EXHAUSTED, false},
    {"no attempt timeout: the budget's end", 100, 0, 0, 0, 0, 0, 0, ITEM_NONE, false, 100,
     SG_OUTCOME_BUDGET_EXHAUSTED, false},
    {"no attempt timeout, a floor: the lease's end", 100, 20, 0, 0, 0, 0, 0, ITEM_NONE,
     false, 80, SG_OUTCOME_BUDGET_EXHAUSTED, false},
    {"endless stream, no attempt timeout", 1000, 0, 0, 0, 0, 0, 0, 10, false, 1000,
     SG_OUTCOME_BUDGET_EXHAUSTED, false},
};

static void run_case(const clock_case *c) {
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_budget(o, SG_MS(c->budget)), 0);
    assert_int_equal(sg_op_options_set_floor(o, SG_MS(c->floor)), 0);
    assert_int_equal(sg_op_options_set_min_attempt(o, SG_MS(1)), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0); /* safe to retry */
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(1), SG_MS(1)), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 3), 0);
    if (c->attempt) {
        assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_MS(c->attempt)), 0);
    }
    if (c->connect) {
        assert_int_equal(sg_op_options_set_connect_timeout(o, SG_MS(c->connect)), 0);
    }
    if (c->first) {
        assert_int_equal(sg_op_options_set_first_item_timeout(o, SG_MS(c->first)), 0);
    }
    if (c->idle) {
        assert_int_equal(sg_op_options_set_idle_timeout(o, SG_MS(c->idle)), 0);
    }
    if (c->total) {
        assert_int_equal(sg_op_options_set_stream_timeout(o, SG_MS(c->total)), 0);
    }
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    sg_guard g;
    assert_int_equal(sg_guard_start(&g, &plan.guard_config, sg_op_budget(op), T0), 0);
    if (!c->connecting) {
        assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_WAIT_FIRST_ITEM, T0), 0);
    }
    if (c->item_at >= 0) {
        assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(c->item_at)), 0);
    }
    int64_t at = sg_guard_next_deadline(&g);
    if (at != T0 + SG_MS(c->fires_at)) {
        fail_msg("%s: fires at %lld ms, expected %d", c->name,
                 (long long)((at - T0) / SG_MS(1)), c->fires_at);
    }
    assert_int_equal(sg_guard_check(&g, at - 1, NULL), 0);
    assert_int_equal(sg_guard_check(&g, at, NULL), 1);
    sg_guard_result gr;
    assert_int_equal(sg_guard_fail(&g, at, SG_OUTCOME_TRANSPORT_ERROR, &gr), 0);
    sg_op_result r;
    sg_op_result_from_guard(&r, &gr);
    r.sent = !c->connecting;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, at, &r, &v), 0);
    if (v.outcome != c->want || (v.decision == SG_OP_RETRY) != c->retried) {
        fail_msg("%s: recorded %s (%s), expected %s (%s)", c->name,
                 sg_outcome_name(v.outcome), sg_op_decision_name(v.decision),
                 sg_outcome_name(c->want), c->retried ? "retry" : "no retry");
    }
    /* who set the lease, whatever fired: the caller's attempt timeout when
     * it was no longer than what could be leased (a tie is the attempt's),
     * else the budget */
    bool by_attempt = c->attempt > 0 && c->attempt <= c->budget - c->floor;
    const char *lease_by = sg_op_attempt_lease_by(op, 0);
    if (lease_by == NULL || strcmp(lease_by, by_attempt ? "attempt" : "budget") != 0) {
        fail_msg("%s: lease set by %s, expected %s", c->name,
                 lease_by != NULL ? lease_by : "(null)",
                 by_attempt ? "attempt" : "budget");
    }
    assert_null(sg_op_attempt_lease_by(op, 1));
    assert_null(sg_op_attempt_lease_by(NULL, 0));
}

static void every_pair_of_limits_is_named_after_who_set_it(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_case(&cases[i]);
    }
}

/* The same end of the lease, judged a little late (the loop read the clock
 * after the expiry), is still the lease's end: lateness never renames it. */
static void a_late_judgement_keeps_the_name(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_budget(o, SG_MS(100)), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_ATTEMPT_TIMEOUT;
    r.phase = SG_PHASE_STREAMING;
    r.items = 5;
    r.first_item_ns = SG_MS(1);
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(103), &r, &v), 0);
    assert_int_equal(v.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_pair_of_limits_is_named_after_who_set_it),
        cmocka_unit_test(a_late_judgement_keeps_the_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
