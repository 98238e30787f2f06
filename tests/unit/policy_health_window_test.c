/*
 * Endpoint health's count of a provider's request window
 * (docs/design.md, "Endpoint health"): an answer that says how many
 * requests remain until a reset lets exactly that many more go - less
 * those sent after the request it answers - and then holds the endpoint
 * back until the reset; after the reset, an endpoint whose limit is known
 * lets that many go, not every operation that waited, until an answer
 * names the new window.  Without it, every operation that waited for a
 * reset went at once, and all but the limit drew a 429.  Time is driven by
 * hand; operations through the policy as a transport drives them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/health.h>
#include <streamguard/unstable/op.h>

#define T0 SG_SEC(1000)
#define URL "https://api.example.com/v1/chat/completions"
#define MAXOPS 8

static sg_health *h;
static sg_op_options *o;
static sg_op *ops[MAXOPS];
static bool waited[MAXOPS];

static int setup(void **state) {
    (void)state;
    memset(ops, 0, sizeof(ops));
    memset(waited, 0, sizeof(waited));
    assert_int_equal(sg_health_new(&h), 0);
    assert_int_equal(sg_op_options_new(&o), 0);
    assert_int_equal(sg_op_options_set_target(o, URL), 0);
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(30)), 0);
    assert_int_equal(sg_op_options_set_health(o, h), 0);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    for (int i = 0; i < MAXOPS; i++) {
        sg_op_free(ops[i]);
    }
    sg_op_options_free(o);
    sg_health_free(h);
    return 0;
}

/* Operation @i started at @now: 0 when its attempt may go, else
 * SG_EINPROGRESS with *@p saying why and until when it waits. */
static int plan(int i, int64_t now, sg_op_plan *p) {
    if (ops[i] == NULL) {
        assert_int_equal(sg_op_new(&ops[i]), 0);
        assert_int_equal(sg_op_start(ops[i], o, now), 0);
    }
    return sg_op_next_attempt(ops[i], now, p);
}

static void goes(int i, int64_t now) {
    sg_op_plan p;
    assert_int_equal(plan(i, now, &p), 0);
}

/* Operation @i may not go at @now: the endpoint frees at @frees, and it
 * waits, rate_limited, until then - or, the first time it waits for it, a
 * recheck longer: those that waited before it go first. */
static void waits(int i, int64_t now, int64_t frees) {
    sg_op_plan p;
    assert_int_equal(plan(i, now, &p), SG_EINPROGRESS);
    assert_int_equal(p.reason, SG_OP_REASON_RATE_LIMITED);
    assert_int_equal(p.free_at, frees + (waited[i] ? 0 : SG_HEALTH_RECHECK_NS));
    const uint32_t n = sg_op_health_event_count(ops[i]);
    assert_int_equal(sg_op_health_event_at(ops[i], n - 1)->free_at, frees);
    waited[i] = true;
}

/* Operation @i's attempt ends at @now with a 200 whose OpenAI headers,
 * read at @head (0: not said), say @limit requests a window (NULL: not
 * said), @remaining left, reset in @reset. */
static void answers_at(int i, int64_t head, int64_t now, const char *limit,
                       const char *remaining, const char *reset) {
    sg_op_ratelimit rl;
    memset(&rl, 0, sizeof(rl));
    rl.at = head;
    const char *n[3] = {"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
                        "x-ratelimit-reset-requests"};
    const char *v[3] = {limit, remaining, reset};
    for (int k = 0; k < 3; k++) {
        if (v[k] != NULL) {
            assert_int_equal(
                sg_op_ratelimit_header(&rl, n[k], strlen(n[k]), v[k], strlen(v[k])), 1);
        }
    }
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_OK;
    r.phase = SG_PHASE_STREAMING;
    r.http_status = 200;
    r.headers_received = true;
    r.sent = true;
    r.first_item_ns = SG_MS(1);
    r.items = 1;
    r.ratelimit = &rl;
    sg_op_verdict vd;
    assert_int_equal(sg_op_attempt_done(ops[i], now, &r, &vd), 0);
}

static void answers(int i, int64_t now, const char *limit, const char *remaining,
                    const char *reset) {
    answers_at(i, now, now, limit, remaining, reset);
}

/* "2 remain" lets two more go, then the third waits for the reset. */
static void what_remains_goes_then_the_endpoint_waits_for_the_reset(void **state) {
    (void)state;
    goes(0, T0);
    answers(0, T0, "3", "2", "1s");
    goes(1, T0 + 1);
    goes(2, T0 + 2);
    waits(3, T0 + 3, T0 + SG_SEC(1));
    assert_int_equal(sg_op_health_event_at(ops[3], 0)->action, SG_OP_HEALTH_WAITED);
    goes(3, T0 + SG_SEC(1) + SG_HEALTH_RECHECK_NS); /* the window is over */
}

/* An answer counts the requests sent after the one it answers: they are
 * not in its count yet. */
static void an_answer_counts_what_was_sent_after_it(void **state) {
    (void)state;
    goes(0, T0);
    goes(1, T0);
    goes(2, T0);                         /* three in flight */
    answers(0, T0 + 5, "10", "3", "1s"); /* 3 left when the first came: two since */
    goes(3, T0 + 6);
    waits(4, T0 + 6, T0 + 5 + SG_SEC(1));
    /* a later answer of the same window says the same: still none, and
     * the window ends when the latest of its answers said */
    answers(1, T0 + 7, "10", "2", "999ms");
    waits(5, T0 + 8, T0 + 5 + SG_SEC(1));
}

/* After the reset, a limit the provider named lets that many go - not
 * every operation that waited - until an answer names the new window. */
static void after_the_reset_only_the_limit_goes(void **state) {
    (void)state;
    goes(0, T0);
    answers(0, T0, "2", "0", "1s");
    waits(1, T0, T0 + SG_SEC(1));
    waits(2, T0, T0 + SG_SEC(1));
    waits(3, T0, T0 + SG_SEC(1));
    /* they wake a recheck after the reset (none had waited before) */
    const int64_t t = T0 + SG_SEC(1) + SG_HEALTH_RECHECK_NS;
    goes(1, t);
    goes(2, t);
    /* the new window's reset is not known yet: look again soon (it waited
     * before: no longer) */
    waits(3, t, t + SG_HEALTH_RECHECK_NS);
    answers(1, t + SG_MS(50), "2", "1", "950ms"); /* one sent since: none left */
    waits(3, t + SG_MS(50), t + SG_MS(1000));
    goes(3, t + SG_MS(1000));
    /* one that comes now waits a recheck after those that waited */
    goes(4, t + SG_MS(1000));
    waits(5, t + SG_MS(1000), t + SG_MS(1000) + SG_HEALTH_RECHECK_NS);
}

/* The window assumed after a reset never holds an endpoint back with
 * nothing in flight to answer for it. */
static void an_assumed_window_with_nothing_in_flight_lets_go(void **state) {
    (void)state;
    goes(0, T0);
    answers(0, T0, "1", "0", "1s");
    const int64_t t = T0 + SG_SEC(1);
    goes(1, t);
    waits(2, t, t + SG_HEALTH_RECHECK_NS);
    sg_op_free(ops[1]); /* it ended with no answer (cancelled, freed) */
    ops[1] = NULL;
    goes(2, t + 2 * SG_HEALTH_RECHECK_NS);
}

/* Without a limit, a reset lets everyone go, as before; an answer from a
 * window already over counts for nothing. */
static void no_limit_no_count_after_the_reset(void **state) {
    (void)state;
    goes(0, T0);
    goes(1, T0);
    answers(0, T0, NULL, "0", "1s");
    const int64_t t = T0 + SG_SEC(1);
    for (int i = 2; i < MAXOPS; i++) {
        goes(i, t);
    }
    answers(1, t + 1, NULL, "0", "0s"); /* its window ended as it came */
    sg_op_free(ops[2]);
    ops[2] = NULL;
    goes(2, t + 2);
}

/* A reset counts from the answer's head, not from the end of its stream:
 * a stream of 30 s whose head said "1s" does not hold the endpoint back
 * for 31 s. */
static void a_reset_counts_from_the_head(void **state) {
    (void)state;
    goes(0, T0);
    answers_at(0, T0 + SG_MS(10), T0 + SG_SEC(30), NULL, "0", "1s");
    goes(1, T0 + SG_SEC(30)); /* long over */
    const int64_t t = T0 + SG_SEC(60);
    goes(2, t);
    answers_at(2, t + SG_MS(10), t + SG_MS(500), NULL, "0", "1s");
    waits(3, t + SG_MS(500), t + SG_MS(1010));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            what_remains_goes_then_the_endpoint_waits_for_the_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(an_answer_counts_what_was_sent_after_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(after_the_reset_only_the_limit_goes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_assumed_window_with_nothing_in_flight_lets_go,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(no_limit_no_count_after_the_reset, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_reset_counts_from_the_head, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
