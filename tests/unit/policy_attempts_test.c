/*
 * Many attempts: the budget bounds retries, max_attempts (up to
 * SG_OP_MAX_ATTEMPTS = 1000) bounds their count and memory, and every
 * attempt planned is recorded - in sg_op_attempt_at, for the observer and in
 * the report.  Records past the inline ones live in heap blocks; a block
 * that cannot be allocated stops the operation (out_of_memory) before the
 * attempt it was for is planned.  Time comes from a hand-driven clock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/http.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#include "policy/internal.h"

#define T0 SG_SEC(1000) /* an arbitrary monotonic origin */

/* A random source that returns whatever the test put in *ud. */
static uint64_t fixed_random(void *ud) {
    return *(const uint64_t *)ud;
}

/* A counting allocator for the record blocks; fails the allocation whose
 * 1-based number is fail_at (0 = never). */
typedef struct alloc_log {
    int allocs;
    int frees;
    int fail_at;
    size_t bytes; /* requested by the allocations that succeeded */
} alloc_log;

static void *counting_alloc(void *ud, void *p, size_t size) {
    alloc_log *log = ud;
    if (size == 0) {
        log->frees++;
        free(p);
        return NULL;
    }
    if (++log->allocs == log->fail_at) {
        return NULL;
    }
    log->bytes += size;
    return malloc(size);
}

/* Counts the observer's calls. */
typedef struct seen {
    uint32_t starts;
    uint32_t ends;
    uint32_t resolves;
    uint32_t last_n;
    bool out_of_order;
} seen;

static int on_start(const sg_op *op, const sg_op_attempt *rec, void *ud) {
    (void)op;
    seen *s = ud;
    s->out_of_order |= rec->n != s->starts + 1 || !rec->running;
    s->starts++;
    return 0;
}

static int on_end(const sg_op *op, const sg_op_attempt *rec, void *ud) {
    (void)op;
    seen *s = ud;
    s->out_of_order |= rec->n != s->starts || rec->running;
    s->ends++;
    s->last_n = rec->n;
    return 0;
}

static int on_resolve(const sg_op *op, void *ud) {
    (void)op;
    ((seen *)ud)->resolves++;
    return 0;
}

/* The observer that counts (made once; the process's). */
static const sg_op_observer *observer(void) {
    static sg_op_observer *obs;
    if (obs == NULL) {
        assert_int_equal(sg_op_observer_new(&obs), 0);
        assert_int_equal(sg_op_observer_set_on_attempt_start(obs, on_start), 0);
        assert_int_equal(sg_op_observer_set_on_attempt_end(obs, on_end), 0);
        assert_int_equal(sg_op_observer_set_on_resolve(obs, on_resolve), 0);
    }
    return obs;
}

/* One operation on a hand-driven clock, its blocks from counting_alloc. */
typedef struct fixture {
    sg_op_options *o;
    sg_manual_clock clk;
    sg_op *op;
    alloc_log log;
} fixture;

/* A GET (safe to retry) with @budget, backoff @base .. @cap, @max attempts:
 * set more options on f->o, then fx_start(). */
static void fx_init(fixture *f, int64_t budget, int64_t base, int64_t cap, uint32_t max) {
    memset(f, 0, sizeof(*f));
    assert_int_equal(sg_op_options_new(&f->o), 0);
    assert_int_equal(sg_op_new(&f->op), 0);
    assert_int_equal(sg_op_options_set_budget(f->o, budget), 0);
    assert_int_equal(sg_op_options_set_method(f->o, "GET"), 0);
    assert_int_equal(sg_op_options_set_backoff(f->o, base, cap), 0);
    assert_int_equal(sg_op_options_set_max_attempts(f->o, max), 0);
    assert_int_equal(sg_op_options_set_seed(f->o, 7), 0);
    sg_manual_clock_set(&f->clk, T0);
}

/* Frees the operation (its blocks through f->log) and the options. */
static void fx_end(fixture *f) {
    sg_op_free(f->op);
    f->op = NULL;
    sg_op_options_free(f->o);
    f->o = NULL;
}

static void fx_start(fixture *f) {
    assert_int_equal(sg_op_start(f->op, f->o, sg_manual_clock_now(&f->clk)), 0);
    sg__op_set_alloc(f->op, counting_alloc, &f->log);
}

/*
 * Runs attempts as a transport would, on @clk: each leases its clocks, runs
 * a real guard, fails to connect @fail_ns later, and the next begins at the
 * leased retry instant.  Returns the last verdict.
 */
static sg_op_verdict run_until_done(sg_op *op, sg_manual_clock *clk, int64_t fail_ns) {
    const sg_clock c = sg_manual_clock_as(clk);
    sg_op_verdict v;
    memset(&v, 0, sizeof(v));
    for (;;) {
        sg_op_plan plan;
        if (sg_op_next_attempt(op, sg_clock_now(&c), &plan) != 0) {
            return v; /* refused: the operation ended */
        }
        sg_guard g;
        assert_int_equal(
            sg_guard_start(&g, &plan.guard_config, sg_op_budget(op), sg_clock_now(&c)),
            0);
        sg_manual_clock_advance(clk, fail_ns);
        sg_guard_result gr;
        assert_int_equal(
            sg_guard_fail(&g, sg_clock_now(&c), SG_OUTCOME_TRANSPORT_ERROR, &gr), 0);
        sg_op_result r;
        sg_op_result_from_guard(&r, &gr);
        r.error = "connection refused";
        assert_int_equal(sg_op_attempt_done(op, sg_clock_now(&c), &r, &v), 0);
        if (v.decision != SG_OP_RETRY) {
            return v;
        }
        assert_true(v.retry_at <= sg_budget_deadline(sg_op_budget(op)));
        sg_manual_clock_set(clk, v.retry_at); /* the timer fires */
    }
}

/* The report of @op, in a buffer the caller frees. */
static char *report_of(const sg_op *op, int64_t now) {
    size_t need = 0;
    assert_int_equal(sg_op_report_write(op, now, NULL, 0, &need), SG_ENOBUFS);
    char *doc = malloc(need);
    assert_non_null(doc);
    assert_int_equal(sg_op_report_write(op, now, doc, need, NULL), 0);
    assert_int_equal(strlen(doc) + 1, need);
    return doc;
}

/* The report lists attempts 1 .. @n, in order, and no other. */
static void report_lists_every_attempt(const sg_op *op, int64_t now, uint32_t n) {
    char *doc = report_of(op, now);
    const char *at = strstr(doc, "\"attempts\":[");
    assert_non_null(at);
    for (uint32_t i = 1; i <= n; i++) {
        char key[32];
        snprintf(key, sizeof(key), "{\"n\":%u,", (unsigned)i);
        const char *next = strstr(at, key);
        if (next == NULL) {
            fail_msg("attempt %u is missing from the report", (unsigned)i);
        }
        at = next + 1;
    }
    assert_null(strstr(at, "{\"n\":"));
    free(doc);
}

/* ------------------------------------------------------------------ count */

static void fifty_attempts_run_and_are_all_recorded(void **state) {
    (void)state;
    fixture f;
    fx_init(&f, SG_SEC(1), SG_MS(50), SG_MS(200), 50);
    uint64_t draw = 1; /* the jitter draws 1 ns: only the count can stop it */
    assert_int_equal(sg_op_options_set_random(f.o, fixed_random, &draw), 0);
    seen s = {0};
    assert_int_equal(sg_op_options_set_observer(f.o, observer(), &s), 0);
    fx_start(&f);

    sg_op_verdict v = run_until_done(f.op, &f.clk, SG_MS(2));
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(sg_op_attempt_count(f.op), 50);
    for (uint32_t i = 0; i < 50; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(f.op, i);
        assert_non_null(a);
        assert_int_equal(a->n, i + 1);
        assert_false(a->running);
        assert_int_equal(a->outcome, SG_OUTCOME_TRANSPORT_ERROR);
        assert_int_equal(a->elapsed_ns, SG_MS(2));
        assert_string_equal(a->error, "connection refused");
        assert_int_equal(a->decision, i + 1 < 50 ? SG_OP_RETRY : SG_OP_STOP);
    }
    assert_null(sg_op_attempt_at(f.op, 50));
    assert_int_equal(s.starts, 50);
    assert_int_equal(s.ends, 50);
    assert_int_equal(s.resolves, 1);
    assert_false(s.out_of_order);
    report_lists_every_attempt(f.op, sg_manual_clock_now(&f.clk), 50);
    fx_end(&f);
    assert_int_equal(f.log.frees, f.log.allocs);
}

static void fifty_allowed_within_a_1s_budget_end_by_the_budget(void **state) {
    (void)state;
    /* sg-stream --attempts 50 --budget 1s --backoff-base 50ms
     * --backoff-max 200ms: the seeded jitter sleeps about 100 ms a retry,
     * so the budget, not the count, ends the operation. */
    fixture f;
    fx_init(&f, SG_SEC(1), SG_MS(50), SG_MS(200), 50);
    fx_start(&f);

    sg_op_verdict v = run_until_done(f.op, &f.clk, SG_MS(2));
    const uint32_t n = sg_op_attempt_count(f.op);
    assert_true(sg_op_finished(f.op));
    assert_true(n > SG__OP_INLINE_ATTEMPTS && n < 50);
    assert_true(sg_op_final_reason(f.op) == SG_OP_REASON_BACKOFF_EXCEEDS_BUDGET ||
                sg_op_final_reason(f.op) == SG_OP_REASON_LEASE_TOO_SHORT);
    assert_true(v.retryable);
    assert_true(sg_manual_clock_now(&f.clk) <= T0 + SG_SEC(1));
    int64_t prev_start = -1;
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(f.op, i);
        assert_int_equal(a->n, i + 1);
        assert_true(a->started_at > prev_start);
        assert_true(a->backoff_ns <= SG_MS(200));
        prev_start = a->started_at;
    }
    report_lists_every_attempt(f.op, sg_manual_clock_now(&f.clk), n);
    fx_end(&f);
}

static void a_thousand_attempts_are_all_recorded_at_stable_addresses(void **state) {
    (void)state;
    fixture f;
    fx_init(&f, SG_SEC(60), SG_MS(1), SG_MS(1), SG_OP_MAX_ATTEMPTS);
    uint64_t draw = 0; /* no sleep between attempts */
    assert_int_equal(sg_op_options_set_random(f.o, fixed_random, &draw), 0);
    assert_int_equal(sg_op_options_set_min_attempt(f.o, SG_MS(1)), 0);
    fx_start(&f);

    /* Three attempts, then hold a pointer into the first block. */
    for (int i = 0; i < 3; i++) {
        sg_op_plan plan;
        assert_int_equal(sg_op_next_attempt(f.op, sg_manual_clock_now(&f.clk), &plan), 0);
        sg_op_result r;
        memset(&r, 0, sizeof(r));
        r.outcome = SG_OUTCOME_CONNECT_TIMEOUT;
        sg_manual_clock_advance(&f.clk, SG_MS(1));
        sg_op_verdict v;
        assert_int_equal(sg_op_attempt_done(f.op, sg_manual_clock_now(&f.clk), &r, &v),
                         0);
        assert_int_equal(v.decision, SG_OP_RETRY);
    }
    const sg_op_attempt *third = sg_op_attempt_at(f.op, 2);
    assert_non_null(third);

    sg_op_verdict v = run_until_done(f.op, &f.clk, SG_MS(1));
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(sg_op_attempt_count(f.op), 1000);
    assert_ptr_equal(sg_op_attempt_at(f.op, 2), third);
    assert_int_equal(third->n, 3);
    for (uint32_t i = 0; i < 1000; i++) {
        assert_int_equal(sg_op_attempt_at(f.op, i)->n, i + 1);
    }
    /* The memory stated in policy.h: 9 blocks holding exactly the records
     * past the inline ones. */
    assert_int_equal(f.log.allocs, SG__OP_BLOCKS);
    assert_int_equal(f.log.bytes, (1000 - SG__OP_INLINE_ATTEMPTS) * sizeof(sg__rec));
    report_lists_every_attempt(f.op, sg_manual_clock_now(&f.clk), 1000);

    fx_end(&f);
    assert_int_equal(f.log.frees, SG__OP_BLOCKS);
}

static void blocks_are_cut_to_max_attempts(void **state) {
    (void)state;
    /* max 5: blocks of 1 (attempt 2), 2 (attempts 3 and 4) and 1 (attempt
     * 5, cut). */
    fixture f;
    fx_init(&f, SG_SEC(60), SG_MS(1), SG_MS(1), 5);
    fx_start(&f);
    sg_op_verdict v = run_until_done(f.op, &f.clk, SG_MS(1));
    assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    assert_int_equal(sg_op_attempt_count(f.op), 5);
    assert_int_equal(f.log.allocs, 3);
    assert_int_equal(f.log.bytes, 4 * sizeof(sg__rec));
    fx_end(&f);
    assert_int_equal(f.log.frees, 3);
}

static void the_sizes_the_docs_state_hold_on_lp64(void **state) {
    (void)state;
    /* docs/api.md ("Memory of an operation") and docs/sg-stream.md state
     * them. */
    if (sizeof(void *) != 8 || sizeof(long) != 8) {
        skip();
    }
    print_message("record %zu, operation %zu bytes\n", sizeof(sg__rec),
                  sizeof(struct sg_op));
    assert_int_equal(sizeof(sg__rec), 424);
    assert_int_equal(sizeof(struct sg_op), 632);
    assert_int_equal(sizeof(struct sg_op_options), 448);
    assert_int_equal(SG__OP_INLINE_ATTEMPTS, 1);
}

static void max_attempts_accepts_1_to_1000(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(o);
    assert_int_equal(SG_OP_MAX_ATTEMPTS, 1000);
    assert_int_equal(sg_op_options_set_max_attempts(o, 1), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 50), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 1000), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 1001), SG_ERANGE);
    assert_int_equal(sg_op_options_set_max_attempts(o, UINT32_MAX), SG_ERANGE);
    assert_int_equal(sg_op_options_set_max_attempts(o, 0), SG_EINVAL);
    /* A refused value leaves the last good one. */
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    char doc[4096];
    assert_int_equal(sg_op_report_write(op, T0, doc, sizeof(doc), NULL), 0);
    assert_non_null(strstr(doc, "\"max_attempts\":1000,"));
}

/* ------------------------------------------------------------------ memory */

static void a_block_that_cannot_be_allocated_stops_before_the_attempt(void **state) {
    (void)state;
    fixture f;
    fx_init(&f, SG_SEC(60), SG_MS(1), SG_MS(1), 50);
    seen s = {0};
    assert_int_equal(sg_op_options_set_observer(f.o, observer(), &s), 0);
    f.log.fail_at = 1;
    fx_start(&f);

    /* The inline attempt needs nothing; the second needs the first block. */
    sg_op_verdict v = run_until_done(f.op, &f.clk, SG_MS(2));
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_OUT_OF_MEMORY);
    assert_int_equal(v.outcome, SG_OUTCOME_TRANSPORT_ERROR);
    assert_true(v.retryable);
    assert_int_equal(v.retry_at, SG_TIME_NEVER);
    assert_int_equal(f.log.allocs, 1);
    assert_int_equal(sg_op_attempt_count(f.op), SG__OP_INLINE_ATTEMPTS);
    assert_true(sg_op_finished(f.op));
    assert_int_equal(sg_op_outcome(f.op), SG_OUTCOME_TRANSPORT_ERROR);
    assert_int_equal(sg_op_final_decision(f.op), SG_OP_STOP);
    assert_int_equal(sg_op_final_reason(f.op), SG_OP_REASON_OUT_OF_MEMORY);
    const sg_op_attempt *last = sg_op_attempt_at(f.op, SG__OP_INLINE_ATTEMPTS - 1);
    assert_int_equal(last->reason, SG_OP_REASON_OUT_OF_MEMORY);
    assert_int_equal(last->backoff_ns, -1);
    /* Nothing more was planned, so nothing more can be sent. */
    sg_op_plan plan;
    assert_int_equal(sg_op_next_attempt(f.op, sg_manual_clock_now(&f.clk), &plan),
                     SG_ESTATE);
    assert_int_equal(s.starts, SG__OP_INLINE_ATTEMPTS);
    assert_int_equal(s.ends, SG__OP_INLINE_ATTEMPTS);
    assert_int_equal(s.resolves, 1);

    char *doc = report_of(f.op, sg_manual_clock_now(&f.clk));
    assert_non_null(strstr(doc, "\"decision\":\"stop\",\"reason\":\"out_of_memory\","));
    free(doc);
    report_lists_every_attempt(f.op, sg_manual_clock_now(&f.clk), SG__OP_INLINE_ATTEMPTS);
    assert_string_equal(sg_op_reason_name(SG_OP_REASON_OUT_OF_MEMORY), "out_of_memory");
    fx_end(&f);
    assert_int_equal(f.log.frees, 0);
}

static void a_later_block_that_fails_keeps_every_record_before_it(void **state) {
    (void)state;
    fixture f;
    fx_init(&f, SG_SEC(60), SG_MS(1), SG_MS(1), 100);
    f.log.fail_at = 4; /* blocks of 1, 2 and 4 come; 8 does not */
    fx_start(&f);
    sg_op_verdict v = run_until_done(f.op, &f.clk, SG_MS(1));
    assert_int_equal(v.reason, SG_OP_REASON_OUT_OF_MEMORY);
    assert_int_equal(sg_op_attempt_count(f.op), 8);
    for (uint32_t i = 0; i < 8; i++) {
        assert_int_equal(sg_op_attempt_at(f.op, i)->n, i + 1);
    }
    report_lists_every_attempt(f.op, sg_manual_clock_now(&f.clk), 8);
    fx_end(&f);
    assert_int_equal(f.log.frees, 3);
}

static void a_restart_or_free_releases_the_records_and_null_is_harmless(void **state) {
    (void)state;
    sg_op_free(NULL);
    SG_AUTO_OP(fresh);
    assert_int_equal(sg_op_attempt_count(fresh), 0);
    assert_null(sg_op_attempt_at(fresh, 0));
    assert_int_equal(sg_op_report_write(fresh, T0, NULL, 0, NULL), SG_EINVAL);

    /* Grown, then started again (its blocks freed first) and grown again;
     * freed at the end. */
    fixture f;
    fx_init(&f, SG_SEC(60), SG_MS(1), SG_MS(1), 10);
    for (int round = 0; round < 2; round++) {
        fx_start(&f);
        sg_op_verdict v = run_until_done(f.op, &f.clk, SG_MS(1));
        assert_int_equal(v.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
        assert_int_equal(sg_op_attempt_count(f.op), 10);
        assert_int_equal(f.log.frees, round * 4); /* the last round's blocks */
    }
    fx_end(&f);
    assert_int_equal(f.log.allocs, 8); /* blocks of 1, 2, 4 and 2 (cut), twice */
    assert_int_equal(f.log.frees, 8);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fifty_attempts_run_and_are_all_recorded),
        cmocka_unit_test(fifty_allowed_within_a_1s_budget_end_by_the_budget),
        cmocka_unit_test(a_thousand_attempts_are_all_recorded_at_stable_addresses),
        cmocka_unit_test(blocks_are_cut_to_max_attempts),
        cmocka_unit_test(the_sizes_the_docs_state_hold_on_lp64),
        cmocka_unit_test(max_attempts_accepts_1_to_1000),
        cmocka_unit_test(a_block_that_cannot_be_allocated_stops_before_the_attempt),
        cmocka_unit_test(a_later_block_that_fails_keeps_every_record_before_it),
        cmocka_unit_test(a_restart_or_free_releases_the_records_and_null_is_harmless),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
