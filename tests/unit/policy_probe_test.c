/*
 * A connection the caller tried and lost before the operation started,
 * inside its budget (sg_op_options_set_probe - sg-stream's HTTP/2 probe of
 * an https:// URL): the operation's first attempt in the records and the
 * report, never one of max_attempts, never told to the observer.  Time is
 * driven by hand.
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

static void opts(sg_op_options *o, int64_t budget) {
    assert_int_equal(sg_op_options_set_budget(o, budget), 0);
    assert_int_equal(sg_op_options_set_started_at(o, T0), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(1), SG_MS(1)), 0);
}

static const char *report(const sg_op *op, int64_t now) {
    static char buf[8192];
    assert_int_equal(sg_op_report_write(op, now, buf, sizeof(buf), NULL), 0);
    return buf;
}

/* The probe ran to the end of what the budget could lease (shorter than
 * its 10 s connect clock): the operation's own first lease is refused, and
 * the report holds the probe - budget_exhausted in phase connect, never
 * sent, its error - not "no attempt, phase null". */
static void a_probe_that_used_the_budget_up_is_the_attempt(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts(o, SG_MS(500));
    assert_int_equal(
        sg_op_options_set_probe(o, T0 + SG_MS(500), SG_SEC(10), true,
                                "connect to h:443 timed out (TLS handshake)"),
        0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0 + SG_MS(500)), 0);
    assert_int_equal(sg_op_attempt_count(op), 1);
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(500), &p), SG_EREFUSED);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_BUDGET_EXHAUSTED);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_int_equal(a->n, 1);
    assert_int_equal(a->outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(a->phase, SG_PHASE_CONNECT);
    assert_false(a->sent || a->running || a->outcome_unknown);
    assert_int_equal(a->decision, SG_OP_STOP);
    assert_int_equal(a->reason, SG_OP_REASON_BUDGET_EXHAUSTED);
    assert_int_equal(a->elapsed_ns, SG_MS(500));
    assert_int_equal(a->attempt_timeout_ns, SG_MS(500));
    assert_string_equal(sg_op_attempt_lease_by(op, 0), "budget"); /* not its 10 s */
    assert_int_equal(a->backoff_ns, -1);
    assert_string_equal(a->error, "connect to h:443 timed out (TLS handshake)");
    assert_ptr_equal(sg_op_deciding_attempt(op), a);
    const char *r = report(op, T0 + SG_SEC(1));
    assert_non_null(strstr(r, "\"outcome\":\"budget_exhausted\",\"phase\":\"connect\","));
    assert_non_null(strstr(
        r, "\"attempts\":[{\"n\":1,\"running\":false,\"outcome\":\"budget_exhausted\","
           "\"phase\":\"connect\",\"sent\":false,"));
    assert_non_null(strstr(r, "\"start_ms\":0,\"remaining_ms\":500,\"granted_ms\":{"
                              "\"connect\":500,\"attempt\":500,"));
    assert_non_null(strstr(r,
                           "\"decision\":\"stop\",\"reason\":\"budget_exhausted\","
                           "\"backoff_ms\":null,\"error\":\"connect to h:443 timed out "
                           "(TLS "
                           "handshake)\",\"provider_error\":null,\"usage\":null,"
                           "\"profile\":null,\"probe\":true}]"));
}

/* Its own connect clock cut the probe (300 ms of a 3 s budget): that is its
 * name; the operation's first attempt follows at once, as attempt 2, and
 * max_attempts (1) counts it alone. */
static void a_probe_cut_by_its_clock_then_the_operations_attempt(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    opts(o, SG_SEC(3));
    assert_int_equal(sg_op_options_set_max_attempts(o, 1), 0);
    assert_int_equal(sg_op_options_set_probe(o, T0 + SG_MS(300), SG_MS(300), true, NULL),
                     0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0 + SG_MS(301)), 0);
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(301), &p), 0);
    assert_int_equal(p.attempt, 2);
    assert_int_equal(p.remaining_ns, SG_SEC(3) - SG_MS(301));
    sg_op_result res;
    memset(&res, 0, sizeof(res));
    res.outcome = SG_OUTCOME_CONNECT_TIMEOUT;
    res.phase = SG_PHASE_CONNECT;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, T0 + SG_MS(601), &res, &v), 0);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED); /* one of its own */
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_int_equal(a->outcome, SG_OUTCOME_CONNECT_TIMEOUT);
    assert_int_equal(a->connect_timeout_ns, SG_MS(300));
    assert_string_equal(sg_op_attempt_lease_by(op, 0), "connect"); /* its own clock */
    assert_string_equal(sg_op_attempt_lease_by(op, 1), "budget"); /* no attempt timeout */
    assert_int_equal(a->decision, SG_OP_RETRY);
    assert_int_equal(a->backoff_ns, 0);
    assert_string_equal(a->error, "");
    const char *r = report(op, T0 + SG_SEC(1));
    assert_non_null(strstr(r, "\"max_attempts\":1,"));
    assert_non_null(strstr(r, "\"probe\":true}"));
    assert_non_null(strstr(r, "\"n\":2,"));
    assert_non_null(strstr(r, "\"probe\":false}]"));
}

/* A probe refused (the server was not there): transport_error, its words
 * cut to the record's room; a clock it did not run to is no timeout. */
static void a_refused_probe_is_a_transport_error(void **state) {
    (void)state;
    char longer[300];
    memset(longer, 'e', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = '\0';
    SG_AUTO_OPTIONS(o);
    opts(o, SG_SEC(5));
    assert_int_equal(sg_op_options_set_probe(o, T0 + SG_MS(2), 0, false, longer), 0);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0 + SG_MS(2)), 0);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_int_equal(a->outcome, SG_OUTCOME_TRANSPORT_ERROR);
    assert_int_equal(strlen(a->error), SG_OP_ERROR_MAX);
    assert_int_equal(a->attempt_timeout_ns,
                     SG_SEC(5)); /* no clock: all that could be leased */
}

typedef struct seen {
    uint32_t starts, ends, first_n;
} seen;

static int on_start(const sg_op *op, const sg_op_attempt *rec, void *ud) {
    (void)op;
    seen *s = ud;
    if (s->starts++ == 0) {
        s->first_n = rec->n;
    }
    return 0;
}

static int on_end(const sg_op *op, const sg_op_attempt *rec, void *ud) {
    (void)op;
    (void)rec;
    ((seen *)ud)->ends++;
    return 0;
}

/* The observer hears of the operation's own attempts only (nothing of the
 * probe was sent; its intent comes after the probe), and the records hold
 * max_attempts of them beside the probe: one block more than without. */
static void the_observer_is_not_told_and_the_cap_holds_one_more(void **state) {
    (void)state;
    sg_op_observer *obs;
    assert_int_equal(sg_op_observer_new(&obs), 0);
    assert_int_equal(sg_op_observer_set_on_attempt_start(obs, on_start), 0);
    assert_int_equal(sg_op_observer_set_on_attempt_end(obs, on_end), 0);
    seen s = {0, 0, 0};
    SG_AUTO_OPTIONS(o);
    opts(o, SG_SEC(60));
    assert_int_equal(sg_op_options_set_max_attempts(o, 6), 0);
    assert_int_equal(sg_op_options_set_observer(o, obs, &s), 0);
    assert_int_equal(sg_op_options_set_probe(o, T0 + SG_MS(10), 0, false, "refused"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    int64_t now = T0 + SG_MS(10);
    assert_int_equal(sg_op_start(op, o, now), 0);
    sg_op_verdict v;
    do {
        assert_int_equal(sg_op_next_attempt(op, now, &p), 0);
        sg_op_result res;
        memset(&res, 0, sizeof(res));
        res.outcome = SG_OUTCOME_TRANSPORT_ERROR;
        res.phase = SG_PHASE_CONNECT;
        now += SG_MS(5);
        assert_int_equal(sg_op_attempt_done(op, now, &res, &v), 0);
        now = v.retry_at;
    } while (v.decision == SG_OP_RETRY);
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(sg_op_attempt_count(op), 7);
    assert_int_equal(s.starts, 6);
    assert_int_equal(s.ends, 6);
    assert_int_equal(s.first_n, 2);
    for (uint32_t i = 0; i < 7; i++) {
        assert_int_equal(sg_op_attempt_at(op, i)->n, i + 1);
    }
    /* and at the most attempts there are */
    opts(o, SG_SEC(600));
    assert_int_equal(sg_op_options_set_max_attempts(o, SG_OP_MAX_ATTEMPTS), 0);
    assert_int_equal(sg_op_options_set_probe(o, T0, 0, false, NULL), 0);
    now = T0;
    assert_int_equal(sg_op_start(op, o, now), 0);
    do {
        assert_int_equal(sg_op_next_attempt(op, now, &p), 0);
        sg_op_result res;
        memset(&res, 0, sizeof(res));
        res.outcome = SG_OUTCOME_TRANSPORT_ERROR;
        now += SG_US(10);
        assert_int_equal(sg_op_attempt_done(op, now, &res, &v), 0);
        now = v.retry_at;
    } while (v.decision == SG_OP_RETRY);
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(sg_op_attempt_count(op), SG_OP_MAX_ATTEMPTS + 1);
    assert_int_equal(sg_op_attempt_at(op, SG_OP_MAX_ATTEMPTS)->n, SG_OP_MAX_ATTEMPTS + 1);
    sg_op_observer_free(obs); /* the operation has ended: it calls no more */
}

static void the_setter_checks_its_values(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_probe(NULL, T0, 0, false, NULL), SG_EINVAL);
    assert_int_equal(sg_op_options_set_probe(o, T0, -1, false, NULL), SG_EINVAL);
    assert_int_equal(sg_op_options_set_probe(o, T0, SG_DURATION_MAX + 1, false, NULL),
                     SG_ERANGE);
    /* no probe: no record, no "probe" in the report */
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_attempt_count(op), 0);
    assert_null(strstr(report(op, T0), "probe"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_probe_that_used_the_budget_up_is_the_attempt),
        cmocka_unit_test(a_probe_cut_by_its_clock_then_the_operations_attempt),
        cmocka_unit_test(a_refused_probe_is_a_transport_error),
        cmocka_unit_test(the_observer_is_not_told_and_the_cap_holds_one_more),
        cmocka_unit_test(the_setter_checks_its_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
