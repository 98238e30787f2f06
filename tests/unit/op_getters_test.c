/*
 * Nothing is never something: every getter of <streamguard/op.h> answers
 * "none" - SG_OUTCOME_NONE, the NONE decision and reason, -1 for an
 * instant, NULL for a pointer, SG_EINVAL for an error slot - for NULL, for
 * an operation never started, and (for what only an end sets) for one
 * that runs.  A caller can never read ok, transport_error or 0 ns there.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>
#include <string.h>

#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#define T0 SG_SEC(1000)

/* What an operation that has not ended says, whatever its state. */
static void says_not_ended(const sg_op *op) {
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_NONE);
    assert_int_equal(sg_op_final_decision(op), SG_OP_NONE);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_NONE);
    assert_false(sg_op_finished(op));
    assert_int_equal(sg_op_finished_at(op), -1);
}

/* What an operation that never started says besides. */
static void says_never_started(const sg_op *op) {
    says_not_ended(op);
    assert_int_equal(sg_op_attempt_count(op), 0);
    assert_null(sg_op_attempt_at(op, 0));
    assert_null(sg_op_deciding_attempt(op));
    assert_null(sg_op_budget(op));
    assert_null(sg_op_method(op));
    assert_null(sg_op_idempotency_key(op));
    assert_int_equal(sg_op_observer_error(op), SG_EINVAL);
    char buf[64];
    assert_int_equal(sg_op_report_write(op, T0, buf, sizeof(buf), NULL), SG_EINVAL);
}

static void null_is_none(void **state) {
    (void)state;
    says_never_started(NULL);
}

static void a_new_operation_is_none(void **state) {
    (void)state;
    sg_op *op = NULL;
    assert_int_equal(sg_op_new(&op), 0);
    says_never_started(op);
    sg_op_free(op);
}

static void a_running_operation_has_no_end_yet(void **state) {
    (void)state;
    sg_op_options *o = NULL;
    sg_op *op = NULL;
    assert_int_equal(sg_op_options_new(&o), 0);
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(5)), 0);
    assert_int_equal(sg_op_new(&op), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    says_not_ended(op); /* started, nothing planned */
    assert_non_null(sg_op_budget(op));
    assert_string_equal(sg_op_method(op), "POST");
    assert_null(sg_op_idempotency_key(op));
    assert_int_equal(sg_op_observer_error(op), 0);
    assert_null(sg_op_deciding_attempt(op));

    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(op, T0, &plan), 0);
    says_not_ended(op); /* an attempt running */
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_non_null(a);
    assert_true(a->running);
    assert_int_equal(a->decision, SG_OP_NONE);
    assert_int_equal(a->time_to_first_item_ns, -1);
    assert_null(sg_op_attempt_at(op, 1));

    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_OK;
    r.phase = SG_PHASE_STREAMING;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(10), &r, &v), 0);
    /* once it ended, each says what ended it */
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_OK);
    assert_int_equal(sg_op_final_decision(op), SG_OP_DONE);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_OK);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_finished_at(op), T0 + SG_MS(10));
    sg_op_free(op);
    sg_op_options_free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_is_none),
        cmocka_unit_test(a_new_operation_is_none),
        cmocka_unit_test(a_running_operation_has_no_end_yet),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
