/* The stream guard: three clocks, connect and attempt ceilings, caps.
 * Time is an int64 driven by hand; nothing here sleeps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>
#include <streamguard/unstable/op.h>

#define T0 SG_SEC(5000)

static sg_guard_config config(int64_t first, int64_t idle, int64_t total) {
    sg_guard_config c;
    sg_guard_config_init(&c);
    if (first) {
        assert_int_equal(sg_guard_config_set_first_item_timeout(&c, first), 0);
    }
    if (idle) {
        assert_int_equal(sg_guard_config_set_idle_timeout(&c, idle), 0);
    }
    if (total) {
        assert_int_equal(sg_guard_config_set_stream_timeout(&c, total), 0);
    }
    return c;
}

static void start(sg_guard *g, sg_guard_config c, const sg_budget *b) {
    assert_int_equal(sg_guard_start(g, &c, b, T0), 0);
    assert_int_equal(sg_guard_set_phase(g, SG_PHASE_WAIT_FIRST_ITEM, T0), 0);
}

static sg_outcome expired(sg_guard *g, int64_t now) {
    sg_outcome o = SG_OUTCOME_OK;
    assert_int_equal(sg_guard_check(g, now, &o), 1);
    return o;
}

/* ---- first item ---- */

static void first_item_just_before_its_deadline_is_accepted(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(SG_MS(100), 0, 0), NULL);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(100));
    assert_int_equal(sg_guard_check(&g, T0 + SG_MS(100) - 1, NULL), 0);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(100) - 1), 0);
    assert_int_equal(sg_guard_phase(&g), SG_PHASE_STREAMING);
}

static void first_item_exactly_at_its_deadline_is_late(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(SG_MS(100), 0, 0), NULL);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(100)), SG_ETIMEDOUT);
    assert_int_equal(expired(&g, T0 + SG_MS(100)), SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_int_equal(sg_guard_items(&g), 0);
}

static void first_item_after_its_deadline_is_late(void **state) {
    (void)state;
    sg_guard g;
    sg_guard_result r;
    start(&g, config(SG_MS(100), 0, 0), NULL);
    assert_int_equal(expired(&g, T0 + SG_MS(101)), SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(102)), SG_ESTATE);
    assert_int_equal(sg_guard_finish(&g, T0 + SG_MS(103), false, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_int_equal(r.phase, SG_PHASE_WAIT_FIRST_ITEM);
    assert_false(r.partial);
    assert_int_equal(r.first_item_ns, -1);
}

static void first_item_clock_is_disarmed_by_the_first_item(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(SG_MS(100), 0, 0), NULL);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(10)), 0);
    assert_int_equal(sg_guard_next_deadline(&g), SG_TIME_NEVER);
    assert_int_equal(sg_guard_check(&g, T0 + SG_SEC(100), NULL), 0);
}

/* ---- idle ---- */

static void idle_clock_starts_only_after_the_first_item(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(0, SG_MS(50), 0), NULL);
    /* long before any item: no idle deadline */
    assert_int_equal(sg_guard_next_deadline(&g), SG_TIME_NEVER);
    assert_int_equal(sg_guard_check(&g, T0 + SG_SEC(10), NULL), 0);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_SEC(10)), 0);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_SEC(10) + SG_MS(50));
}

static void idle_clock_is_reset_by_each_item(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(0, SG_MS(50), 0), NULL);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(49) * i), 0);
    }
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(49) * 9 + SG_MS(50));
    assert_int_equal(sg_guard_items(&g), 10);
}

static void idle_clock_is_not_reset_by_keepalive_bytes(void **state) {
    (void)state;
    sg_guard g;
    sg_guard_result r;
    start(&g, config(0, SG_MS(50), 0), NULL);
    assert_int_equal(sg_guard_on_item(&g, T0), 0);
    /* ": keepalive\n\n" every 10 ms keeps bytes flowing, never an item */
    for (int i = 1; i < 5; i++) {
        assert_int_equal(sg_guard_on_bytes(&g, T0 + SG_MS(10) * i, 13), 0);
        assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(50));
    }
    assert_int_equal(sg_guard_on_bytes(&g, T0 + SG_MS(50), 13), SG_ETIMEDOUT);
    assert_int_equal(sg_guard_finish(&g, T0 + SG_MS(51), false, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_int_equal(r.phase, SG_PHASE_STREAMING);
    assert_true(r.partial);
    assert_int_equal(r.bytes, 4 * 13);
}

static void idle_timeout_just_before_and_at_the_deadline(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(0, SG_MS(50), 0), NULL);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(5)), 0);
    assert_int_equal(sg_guard_check(&g, T0 + SG_MS(55) - 1, NULL), 0);
    assert_int_equal(expired(&g, T0 + SG_MS(55)), SG_OUTCOME_IDLE_TIMEOUT);
}

/* ---- stream total, connect, attempt ---- */

static void stream_total_counts_from_the_start_not_the_first_item(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(0, SG_MS(100), SG_MS(300)), NULL);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(300));
    for (int i = 1; i <= 5; i++) {
        assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(50) * i), 0);
    }
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(300));
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(300)), SG_ETIMEDOUT);
    assert_int_equal(expired(&g, T0 + SG_MS(300)), SG_OUTCOME_STREAM_TIMEOUT);
}

static void connect_clock_fires_only_while_connecting(void **state) {
    (void)state;
    sg_guard_config c;
    sg_guard g;
    sg_guard_result r;
    sg_guard_config_init(&c);
    assert_int_equal(sg_guard_config_set_connect_timeout(&c, SG_MS(20)), 0);
    assert_int_equal(sg_guard_config_set_first_item_timeout(&c, SG_MS(500)), 0);

    assert_int_equal(sg_guard_start(&g, &c, NULL, T0), 0);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(20));
    assert_int_equal(sg_guard_check(&g, T0 + SG_MS(20), NULL), 1);
    assert_int_equal(sg_guard_finish(&g, T0 + SG_MS(20), false, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_CONNECT_TIMEOUT);
    assert_int_equal(r.phase, SG_PHASE_CONNECT);

    assert_int_equal(sg_guard_start(&g, &c, NULL, T0), 0);
    assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_SEND, T0 + SG_MS(19)), 0);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(500));
    assert_int_equal(sg_guard_check(&g, T0 + SG_MS(100), NULL), 0);
}

static void attempt_ceiling_bounds_the_whole_attempt(void **state) {
    (void)state;
    sg_guard_config c = config(SG_MS(100), SG_MS(100), 0);
    sg_guard g;
    assert_int_equal(sg_guard_config_set_attempt_timeout(&c, SG_MS(250)), 0);
    start(&g, c, NULL);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(90)), 0);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(180)), 0);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(250));
    assert_int_equal(expired(&g, T0 + SG_MS(250)), SG_OUTCOME_ATTEMPT_TIMEOUT);
}

static void phases_only_move_forward(void **state) {
    (void)state;
    sg_guard g;
    start(&g, config(0, 0, 0), NULL);
    assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_SEND, T0), SG_ESTATE);
    assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_STREAMING, T0), SG_EINVAL);
    assert_int_equal(sg_guard_set_phase(&g, (sg_phase)99, T0), SG_EINVAL);
    assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_WAIT_FIRST_ITEM, T0), 0);
}

/* ---- budget clamping ---- */

static void each_clock_against_a_tighter_budget_reports_budget_exhausted(void **state) {
    (void)state;
    sg_budget b;
    sg_guard g;
    sg_guard_result r;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(80), 0), 0);

    /* first-item 100 ms > budget 80 ms */
    start(&g, config(SG_MS(100), 0, 0), &b);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(80));
    assert_int_equal(expired(&g, T0 + SG_MS(80)), SG_OUTCOME_BUDGET_EXHAUSTED);

    /* idle 100 ms after an item at 10 ms: budget at 80 ms is tighter */
    start(&g, config(0, SG_MS(100), 0), &b);
    assert_int_equal(sg_guard_on_item(&g, T0 + SG_MS(10)), 0);
    assert_int_equal(sg_guard_next_deadline(&g), T0 + SG_MS(80));
    assert_int_equal(sg_guard_finish(&g, T0 + SG_MS(80), true, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_true(r.partial);

    /* stream total 1 s */
    start(&g, config(0, 0, SG_SEC(1)), &b);
    assert_int_equal(expired(&g, T0 + SG_MS(80)), SG_OUTCOME_BUDGET_EXHAUSTED);
}

static void a_clock_tighter_than_the_budget_keeps_its_own_name(void **state) {
    (void)state;
    sg_budget b;
    sg_guard g;
    assert_int_equal(sg_budget_start(&b, T0, SG_SEC(10), 0), 0);
    start(&g, config(SG_MS(100), 0, 0), &b);
    assert_int_equal(expired(&g, T0 + SG_MS(100)), SG_OUTCOME_FIRST_ITEM_TIMEOUT);
}

static void a_clock_tied_with_the_budget_keeps_its_own_name(void **state) {
    (void)state;
    sg_budget b;
    sg_guard g;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(100), 0), 0);
    start(&g, config(SG_MS(100), 0, 0), &b);
    assert_int_equal(expired(&g, T0 + SG_MS(100)), SG_OUTCOME_FIRST_ITEM_TIMEOUT);
}

static void two_guards_under_one_budget_both_clamp_to_it(void **state) {
    (void)state;
    sg_budget b;
    sg_guard g1;
    sg_guard g2;
    sg_guard_config c = config(SG_SEC(5), SG_SEC(5), SG_SEC(50));
    assert_int_equal(sg_budget_start(&b, T0, SG_SEC(1), 0), 0);
    assert_int_equal(sg_guard_start(&g1, &c, &b, T0), 0);
    assert_int_equal(sg_guard_start(&g2, &c, &b, T0 + SG_MS(600)), 0);
    assert_int_equal(sg_guard_next_deadline(&g1), T0 + SG_SEC(1));
    assert_int_equal(sg_guard_next_deadline(&g2), T0 + SG_SEC(1));
    assert_int_equal(sg_guard_on_item(&g2, T0 + SG_MS(700)), 0);
    assert_int_equal(sg_guard_next_deadline(&g2), T0 + SG_SEC(1));
    assert_int_equal(expired(&g1, T0 + SG_SEC(1)), SG_OUTCOME_BUDGET_EXHAUSTED);
    assert_int_equal(expired(&g2, T0 + SG_SEC(1)), SG_OUTCOME_BUDGET_EXHAUSTED);
}

/* ---- unset clocks, saturation, validation ---- */

static void unset_clocks_give_no_deadline(void **state) {
    (void)state;
    sg_guard g;
    sg_guard_result r;
    start(&g, config(0, 0, 0), NULL);
    assert_int_equal(sg_guard_next_deadline(&g), SG_TIME_NEVER);
    assert_int_equal(sg_guard_on_item(&g, INT64_MAX - 1), 0);
    assert_int_equal(sg_guard_next_deadline(&g), SG_TIME_NEVER);
    assert_int_equal(sg_guard_finish(&g, INT64_MAX - 1, true, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
}

static void huge_values_saturate_instead_of_overflowing(void **state) {
    (void)state;
    sg_guard_config c = config(SG_DURATION_MAX, SG_DURATION_MAX, SG_DURATION_MAX);
    sg_guard g;
    int64_t late = INT64_MAX - SG_SEC(1);
    assert_int_equal(sg_guard_start(&g, &c, NULL, late), 0);
    /* start + max saturates to "never" instead of wrapping into the past */
    assert_int_equal(sg_guard_next_deadline(&g), SG_TIME_NEVER);
    assert_int_equal(sg_guard_check(&g, late + 1, NULL), 0);
    assert_int_equal(sg_guard_on_item(&g, late + 2), 0);
    assert_int_equal(sg_guard_next_deadline(&g), SG_TIME_NEVER);
    assert_int_equal(sg_guard_on_bytes(&g, late + 3, UINT64_MAX), 0);
    assert_int_equal(sg_guard_on_bytes(&g, late + 4, UINT64_MAX), 0);
    assert_int_equal(sg_guard_bytes(&g), UINT64_MAX);
}

static void zero_negative_and_absurd_durations_are_rejected(void **state) {
    (void)state;
    sg_guard_config c;
    sg_guard_config_init(&c);
    int (*setters[])(sg_guard_config *, int64_t) = {
        sg_guard_config_set_connect_timeout, sg_guard_config_set_first_item_timeout,
        sg_guard_config_set_idle_timeout, sg_guard_config_set_stream_timeout,
        sg_guard_config_set_attempt_timeout};
    for (size_t i = 0; i < sizeof(setters) / sizeof(setters[0]); i++) {
        assert_int_equal(setters[i](&c, 0), SG_EINVAL);
        assert_int_equal(setters[i](&c, -1), SG_EINVAL);
        assert_int_equal(setters[i](&c, INT64_MIN), SG_EINVAL);
        assert_int_equal(setters[i](&c, SG_DURATION_MAX + 1), SG_ERANGE);
        assert_int_equal(setters[i](&c, INT64_MAX), SG_ERANGE);
        assert_int_equal(setters[i](NULL, SG_MS(1)), SG_EINVAL);
    }
    /* nothing was stored by a rejected call */
    assert_int_equal(sg_guard_config_first_item_timeout(&c), 0);
    assert_int_equal(sg_guard_config_idle_timeout(&c), 0);
    assert_string_equal(sg_strerror(SG_ERANGE), "value out of range");
}

static void start_rejects_a_config_corrupted_behind_the_setters(void **state) {
    (void)state;
    sg_guard_config c;
    sg_guard g;
    sg_budget never_started = {0};
    sg_guard_config_init(&c);
    c.idle_ns_ = -5;
    assert_int_equal(sg_guard_start(&g, &c, NULL, T0), SG_EINVAL);
    sg_guard_config_init(&c);
    assert_int_equal(sg_guard_start(&g, &c, &never_started, T0), SG_EINVAL);
    assert_int_equal(sg_guard_start(NULL, &c, NULL, T0), SG_EINVAL);
    assert_int_equal(sg_guard_start(&g, NULL, NULL, T0), SG_EINVAL);
}

/* ---- partial ---- */

static void
partial_is_set_iff_items_were_delivered_and_the_end_was_unclean(void **state) {
    (void)state;
    sg_guard g;
    sg_guard_result r;

    start(&g, config(0, 0, 0), NULL); /* no items, unclean */
    assert_int_equal(sg_guard_finish(&g, T0 + 1, false, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    assert_false(r.partial);

    start(&g, config(0, 0, 0), NULL); /* items, clean */
    assert_int_equal(sg_guard_on_item(&g, T0 + 1), 0);
    assert_int_equal(sg_guard_finish(&g, T0 + 2, true, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_false(r.partial);
    assert_int_equal(r.first_item_ns, 1);
    assert_int_equal(r.elapsed_ns, 2);

    start(&g, config(0, 0, 0), NULL); /* items, unclean */
    assert_int_equal(sg_guard_on_item(&g, T0 + 1), 0);
    assert_int_equal(sg_guard_finish(&g, T0 + 2, false, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    assert_true(r.partial);

    start(&g, config(0, 0, 0), NULL); /* items, then the transport failed */
    assert_int_equal(sg_guard_on_item(&g, T0 + 1), 0);
    assert_int_equal(sg_guard_fail(&g, T0 + 2, SG_OUTCOME_TRANSPORT_ERROR, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRANSPORT_ERROR);
    assert_true(r.partial);

    start(&g, config(0, 0, 0), NULL); /* no items, cancelled */
    assert_int_equal(sg_guard_fail(&g, T0 + 2, SG_OUTCOME_CANCELLED, &r), 0);
    assert_false(r.partial);
}

static void a_latched_expiry_wins_over_a_later_failure(void **state) {
    (void)state;
    sg_guard g;
    sg_guard_result r;
    start(&g, config(SG_MS(10), 0, 0), NULL);
    assert_int_equal(sg_guard_fail(&g, T0 + SG_MS(11), SG_OUTCOME_TRANSPORT_ERROR, &r),
                     0);
    assert_int_equal(r.outcome, SG_OUTCOME_FIRST_ITEM_TIMEOUT);
}

static void finish_twice_is_a_state_error(void **state) {
    (void)state;
    sg_guard g;
    sg_guard_result r;
    start(&g, config(0, 0, 0), NULL);
    assert_int_equal(sg_guard_finish(&g, T0, true, &r), 0);
    assert_int_equal(sg_guard_finish(&g, T0, true, &r), SG_ESTATE);
    assert_int_equal(sg_guard_on_item(&g, T0), SG_ESTATE);
    assert_int_equal(sg_guard_check(&g, T0, NULL), SG_ESTATE);
    assert_int_equal(sg_guard_fail(&g, T0, SG_OUTCOME_OK, &r), SG_EINVAL);
    sg_guard zero = {0};
    assert_int_equal(sg_guard_on_item(&zero, T0), SG_ESTATE);
    assert_int_equal(sg_guard_finish(&zero, T0, true, &r), SG_ESTATE);
}

/* A guard never started answers with values no started guard gives: no
 * phase, no deadline (-1); NULL likewise. */
static void a_guard_never_started_is_told_apart(void **state) {
    (void)state;
    sg_guard zero = {0};
    assert_int_equal(sg_guard_phase(&zero), SG_PHASE_NONE);
    assert_int_equal(sg_guard_phase(NULL), SG_PHASE_NONE);
    assert_string_equal(sg_phase_name(SG_PHASE_NONE), "none");
    sg_phase back = SG_PHASE_CONNECT;
    assert_int_equal(sg_phase_from_name("none", &back), SG_EINVAL);
    assert_int_equal(sg_guard_next_deadline(&zero), -1);
    assert_false(sg_guard_running(&zero));
    sg_guard g;
    start(&g, config(0, 0, 0), NULL);
    assert_int_equal(sg_guard_phase(&g), SG_PHASE_WAIT_FIRST_ITEM);
    assert_int_equal(sg_guard_next_deadline(&g), SG_TIME_NEVER);
    assert_int_equal(sg_guard_config_connect_timeout(NULL), -1);
    assert_int_equal(sg_guard_config_max_items(NULL), 0);
}

/* ---- caps ---- */

static void item_cap_fires_on_the_item_after_the_nth(void **state) {
    (void)state;
    sg_guard_config c = config(0, 0, 0);
    sg_guard g;
    sg_guard_result r;
    assert_int_equal(sg_guard_config_set_max_items(&c, 3), 0);
    start(&g, c, NULL);
    for (int i = 1; i <= 3; i++) {
        assert_int_equal(sg_guard_on_item(&g, T0 + i), 0);
    }
    assert_int_equal(sg_guard_on_item(&g, T0 + 4), SG_ECAP);
    assert_int_equal(sg_guard_finish(&g, T0 + 5, true, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_CAP_EXCEEDED);
    assert_int_equal(r.items, 3);
    assert_true(r.partial);
}

static void a_stream_of_exactly_the_cap_ends_ok(void **state) {
    (void)state;
    sg_guard_config c = config(0, 0, 0);
    sg_guard g;
    sg_guard_result r;
    assert_int_equal(sg_guard_config_set_max_items(&c, 2), 0);
    start(&g, c, NULL);
    assert_int_equal(sg_guard_on_item(&g, T0 + 1), 0);
    assert_int_equal(sg_guard_on_item(&g, T0 + 2), 0);
    assert_int_equal(sg_guard_finish(&g, T0 + 3, true, &r), 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
}

static void byte_cap_fires_past_exactly_n_bytes(void **state) {
    (void)state;
    sg_guard_config c = config(0, 0, 0);
    sg_guard g;
    sg_outcome o;
    assert_int_equal(sg_guard_config_set_max_bytes(&c, 100), 0);
    start(&g, c, NULL);
    assert_int_equal(sg_guard_on_bytes(&g, T0 + 1, 60), 0);
    assert_int_equal(sg_guard_on_bytes(&g, T0 + 2, 40), 0);
    assert_int_equal(sg_guard_on_bytes(&g, T0 + 3, 1), SG_ECAP);
    assert_int_equal(sg_guard_check(&g, T0 + 4, &o), 1);
    assert_int_equal(o, SG_OUTCOME_CAP_EXCEEDED);
}

/* Any instant is one (a hand-driven clock may start below zero, or at the
 * ends of int64): the first item is the first item, and durations saturate
 * rather than wrap. */
static void instants_anywhere_in_int64_give_true_durations(void **state) {
    (void)state;
    sg_guard_config c;
    sg_guard g;
    sg_guard_result r;
    sg_guard_config_init(&c);
    assert_int_equal(sg_guard_start(&g, &c, NULL, -SG_SEC(10)), 0);
    assert_int_equal(sg_guard_set_phase(&g, SG_PHASE_WAIT_FIRST_ITEM, -SG_SEC(10)), 0);
    assert_int_equal(sg_guard_on_item(&g, -SG_SEC(10) + SG_MS(20)), 0);
    assert_int_equal(sg_guard_on_item(&g, -SG_SEC(10) + SG_MS(30)), 0);
    assert_int_equal(sg_guard_finish(&g, -SG_SEC(9), true, &r), 0);
    assert_int_equal(r.items, 2);
    assert_int_equal(r.first_item_ns, SG_MS(20));
    assert_int_equal(r.elapsed_ns, SG_SEC(1));

    assert_int_equal(sg_guard_start(&g, &c, NULL, INT64_MIN), 0);
    assert_int_equal(sg_guard_on_item(&g, INT64_MAX - 1), 0);
    assert_int_equal(sg_guard_finish(&g, INT64_MAX - 1, true, &r), 0);
    assert_int_equal(r.first_item_ns, INT64_MAX);
    assert_int_equal(r.elapsed_ns, INT64_MAX);
    assert_int_equal(sg_time_since(5, 7), 0);
    assert_int_equal(sg_time_since(7, 5), 2);
    assert_int_equal(sg_time_since(INT64_MAX, INT64_MIN), INT64_MAX);
    assert_int_equal(sg_time_since(-1, INT64_MIN), INT64_MAX);
    assert_int_equal(sg_time_since(0, INT64_MIN), INT64_MAX);
    assert_int_equal(sg_time_since(-2, INT64_MIN + 1), INT64_MAX - 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(first_item_just_before_its_deadline_is_accepted),
        cmocka_unit_test(instants_anywhere_in_int64_give_true_durations),
        cmocka_unit_test(first_item_exactly_at_its_deadline_is_late),
        cmocka_unit_test(first_item_after_its_deadline_is_late),
        cmocka_unit_test(first_item_clock_is_disarmed_by_the_first_item),
        cmocka_unit_test(idle_clock_starts_only_after_the_first_item),
        cmocka_unit_test(idle_clock_is_reset_by_each_item),
        cmocka_unit_test(idle_clock_is_not_reset_by_keepalive_bytes),
        cmocka_unit_test(idle_timeout_just_before_and_at_the_deadline),
        cmocka_unit_test(stream_total_counts_from_the_start_not_the_first_item),
        cmocka_unit_test(connect_clock_fires_only_while_connecting),
        cmocka_unit_test(attempt_ceiling_bounds_the_whole_attempt),
        cmocka_unit_test(phases_only_move_forward),
        cmocka_unit_test(each_clock_against_a_tighter_budget_reports_budget_exhausted),
        cmocka_unit_test(a_clock_tighter_than_the_budget_keeps_its_own_name),
        cmocka_unit_test(a_clock_tied_with_the_budget_keeps_its_own_name),
        cmocka_unit_test(two_guards_under_one_budget_both_clamp_to_it),
        cmocka_unit_test(unset_clocks_give_no_deadline),
        cmocka_unit_test(huge_values_saturate_instead_of_overflowing),
        cmocka_unit_test(zero_negative_and_absurd_durations_are_rejected),
        cmocka_unit_test(a_guard_never_started_is_told_apart),
        cmocka_unit_test(start_rejects_a_config_corrupted_behind_the_setters),
        cmocka_unit_test(partial_is_set_iff_items_were_delivered_and_the_end_was_unclean),
        cmocka_unit_test(a_latched_expiry_wins_over_a_later_failure),
        cmocka_unit_test(finish_twice_is_a_state_error),
        cmocka_unit_test(item_cap_fires_on_the_item_after_the_nth),
        cmocka_unit_test(a_stream_of_exactly_the_cap_ends_ok),
        cmocka_unit_test(byte_cap_fires_past_exactly_n_bytes),
    };
    return cmocka_run_group_tests_name("guard", tests, NULL, NULL);
}
