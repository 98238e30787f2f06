/* The operation budget: start, remaining, lease, child. Time is driven by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

#define T0 SG_SEC(1000) /* an arbitrary monotonic origin */

static void budget_remaining_counts_down_from_the_total(void **state) {
    (void)state;
    sg_budget b;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(500), 0), 0);
    assert_int_equal(sg_budget_remaining(&b, T0), SG_MS(500));
    assert_int_equal(sg_budget_remaining(&b, T0 + SG_MS(200)), SG_MS(300));
    assert_int_equal(sg_budget_deadline(&b), T0 + SG_MS(500));
    assert_int_equal(sg_budget_started_at(&b), T0);
}

static void budget_remaining_is_zero_at_and_after_the_deadline(void **state) {
    (void)state;
    sg_budget b;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(500), 0), 0);
    assert_int_equal(sg_budget_remaining(&b, T0 + SG_MS(500) - 1), 1);
    assert_int_equal(sg_budget_remaining(&b, T0 + SG_MS(500)), 0);
    assert_int_equal(sg_budget_remaining(&b, T0 + SG_SEC(10)), 0);
}

static void budget_rejects_zero_negative_and_absurd_totals(void **state) {
    (void)state;
    sg_budget b;
    assert_int_equal(sg_budget_start(&b, T0, 0, 0), SG_EINVAL);
    assert_int_equal(sg_budget_start(&b, T0, -SG_MS(1), 0), SG_EINVAL);
    assert_int_equal(sg_budget_start(&b, T0, SG_DURATION_MAX + 1, 0), SG_ERANGE);
    assert_int_equal(sg_budget_start(&b, T0, INT64_MAX, 0), SG_ERANGE);
    assert_int_equal(sg_budget_start(NULL, T0, SG_MS(1), 0), SG_EINVAL);
    assert_int_equal(sg_budget_start(&b, T0, SG_DURATION_MAX, 0), 0);
}

static void a_floor_at_or_above_the_total_refuses_every_lease(void **state) {
    (void)state;
    sg_budget b;
    int64_t granted = -1;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(100), -1), SG_EINVAL);
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(100), SG_DURATION_MAX + 1), SG_ERANGE);
    /* an inbound deadline can leave less than the floor: refuse, not fail */
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(5), SG_MS(10)), 0);
    assert_int_equal(sg_budget_lease(&b, T0, SG_MS(1), &granted), SG_EREFUSED);
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(100), SG_MS(100)), 0);
    assert_int_equal(sg_budget_lease(&b, T0, SG_MS(1), &granted), SG_EREFUSED);
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(100), SG_MS(99)), 0);
    assert_int_equal(sg_budget_lease(&b, T0, SG_MS(100), &granted), 0);
    assert_int_equal(granted, SG_MS(1));
}

static void lease_grants_the_smaller_of_wanted_and_remaining_less_floor(void **state) {
    (void)state;
    sg_budget b;
    int64_t granted = -1;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(300), SG_MS(20)), 0);
    assert_int_equal(sg_budget_lease(&b, T0, SG_SEC(2), &granted), 0);
    assert_int_equal(granted, SG_MS(280));
    assert_int_equal(sg_budget_lease(&b, T0, SG_MS(50), &granted), 0);
    assert_int_equal(granted, SG_MS(50));
    assert_int_equal(sg_budget_lease(&b, T0 + SG_MS(100), SG_TIME_NEVER, &granted), 0);
    assert_int_equal(granted, SG_MS(180));
}

static void lease_with_too_little_left_is_refused(void **state) {
    (void)state;
    sg_budget b;
    int64_t granted = -1;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(300), SG_MS(20)), 0);
    /* exactly the floor left: refused */
    assert_int_equal(sg_budget_lease(&b, T0 + SG_MS(280), SG_MS(10), &granted),
                     SG_EREFUSED);
    assert_int_equal(granted, 0);
    /* one nanosecond above the floor: granted exactly that */
    assert_int_equal(sg_budget_lease(&b, T0 + SG_MS(280) - 1, SG_MS(10), &granted), 0);
    assert_int_equal(granted, 1);
    /* past the deadline */
    assert_int_equal(sg_budget_lease(&b, T0 + SG_SEC(1), SG_MS(10), &granted),
                     SG_EREFUSED);
}

static void lease_rejects_zero_negative_and_absurd_wants(void **state) {
    (void)state;
    sg_budget b;
    int64_t granted = -1;
    assert_int_equal(sg_budget_start(&b, T0, SG_MS(300), 0), 0);
    assert_int_equal(sg_budget_lease(&b, T0, 0, &granted), SG_EINVAL);
    assert_int_equal(sg_budget_lease(&b, T0, -5, &granted), SG_EINVAL);
    assert_int_equal(sg_budget_lease(&b, T0, SG_DURATION_MAX + 1, &granted), SG_ERANGE);
    assert_int_equal(sg_budget_lease(&b, T0, SG_MS(1), NULL), SG_EINVAL);
}

static void a_budget_never_started_is_rejected_everywhere(void **state) {
    (void)state;
    sg_budget b = {0};
    sg_budget child;
    int64_t granted = -1;
    assert_int_equal(sg_budget_lease(&b, T0, SG_MS(1), &granted), SG_EINVAL);
    /* the readers answer -1: no started budget has a negative remaining,
     * floor, start or deadline to mistake it for */
    assert_int_equal(sg_budget_remaining(&b, T0), -1);
    assert_int_equal(sg_budget_deadline(&b), -1);
    assert_int_equal(sg_budget_floor(&b), -1);
    assert_int_equal(sg_budget_started_at(&b), -1);
    assert_int_equal(sg_budget_remaining(NULL, T0), -1);
    assert_int_equal(sg_budget_deadline(NULL), -1);
    assert_int_equal(sg_budget_child(&b, T0, SG_MS(10), &child), SG_EINVAL);
}

static void a_budget_can_end_at_an_absolute_deadline(void **state) {
    (void)state;
    sg_budget b;
    int64_t granted = 0;
    assert_int_equal(sg_budget_start_until(&b, T0, T0 + SG_MS(250), SG_MS(10)), 0);
    assert_int_equal(sg_budget_remaining(&b, T0), SG_MS(250));
    assert_int_equal(sg_budget_lease(&b, T0, SG_SEC(1), &granted), 0);
    assert_int_equal(granted, SG_MS(240));
    /* spent before it arrived: nothing left, not an error */
    assert_int_equal(sg_budget_start_until(&b, T0, T0 - SG_MS(5), 0), 0);
    assert_int_equal(sg_budget_remaining(&b, T0), 0);
    assert_int_equal(sg_budget_lease(&b, T0, SG_MS(1), &granted), SG_EREFUSED);
    assert_int_equal(sg_budget_start_until(&b, T0, T0 + SG_DURATION_MAX + 1, 0),
                     SG_ERANGE);
    assert_int_equal(sg_budget_start_until(NULL, T0, T0 + 1, 0), SG_EINVAL);
    assert_int_equal(sg_budget_start_until(&b, T0, T0 + 1, -1), SG_EINVAL);
}

static void child_deadline_is_the_minimum_of_parent_and_limit(void **state) {
    (void)state;
    sg_budget parent;
    sg_budget child;
    assert_int_equal(sg_budget_start(&parent, T0, SG_SEC(1), SG_MS(10)), 0);
    /* a tighter limit wins */
    assert_int_equal(sg_budget_child(&parent, T0 + SG_MS(100), SG_MS(200), &child), 0);
    assert_int_equal(sg_budget_deadline(&child), T0 + SG_MS(300));
    assert_int_equal(sg_budget_floor(&child), SG_MS(10));
    /* a looser limit is clamped by the parent */
    assert_int_equal(sg_budget_child(&parent, T0 + SG_MS(100), SG_SEC(5), &child), 0);
    assert_int_equal(sg_budget_deadline(&child), T0 + SG_SEC(1));
    /* no limit: the parent's deadline as is */
    assert_int_equal(sg_budget_child(&parent, T0, SG_TIME_NEVER, &child), 0);
    assert_int_equal(sg_budget_deadline(&child), T0 + SG_SEC(1));
}

static void child_of_an_exhausted_parent_is_refused(void **state) {
    (void)state;
    sg_budget parent;
    sg_budget child;
    assert_int_equal(sg_budget_start(&parent, T0, SG_MS(100), 0), 0);
    assert_int_equal(sg_budget_child(&parent, T0 + SG_MS(100), SG_MS(10), &child),
                     SG_EREFUSED);
    assert_int_equal(sg_budget_child(&parent, T0, 0, &child), SG_EINVAL);
    assert_int_equal(sg_budget_child(&parent, T0, SG_DURATION_MAX + 1, &child),
                     SG_ERANGE);
}

static void child_floor_larger_than_the_child_is_dropped(void **state) {
    (void)state;
    sg_budget parent;
    sg_budget child;
    int64_t granted = 0;
    assert_int_equal(sg_budget_start(&parent, T0, SG_SEC(1), SG_MS(50)), 0);
    assert_int_equal(sg_budget_child(&parent, T0, SG_MS(30), &child), 0);
    assert_int_equal(sg_budget_floor(&child), 0);
    assert_int_equal(sg_budget_lease(&child, T0, SG_SEC(1), &granted), 0);
    assert_int_equal(granted, SG_MS(30));
}

static void budget_near_the_end_of_time_saturates(void **state) {
    (void)state;
    sg_budget b;
    int64_t granted = 0;
    int64_t late = INT64_MAX - SG_MS(1);
    assert_int_equal(sg_budget_start(&b, late, SG_SEC(10), 0), 0);
    assert_int_equal(sg_budget_deadline(&b), SG_TIME_NEVER);
    assert_true(sg_budget_remaining(&b, late) > 0);
    assert_int_equal(sg_budget_lease(&b, late, SG_SEC(1), &granted), 0);
    assert_int_equal(granted, SG_SEC(1));
}

static void time_add_saturates_instead_of_wrapping(void **state) {
    (void)state;
    assert_int_equal(sg_time_add(INT64_MAX - 5, 10), SG_TIME_NEVER);
    assert_int_equal(sg_time_add(SG_TIME_NEVER, -10), SG_TIME_NEVER);
    assert_int_equal(sg_time_add(INT64_MIN + 5, -10), INT64_MIN);
    assert_int_equal(sg_time_add(100, 23), 123);
    assert_int_equal(sg_time_min(SG_TIME_NEVER, 7), 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(budget_remaining_counts_down_from_the_total),
        cmocka_unit_test(budget_remaining_is_zero_at_and_after_the_deadline),
        cmocka_unit_test(budget_rejects_zero_negative_and_absurd_totals),
        cmocka_unit_test(a_floor_at_or_above_the_total_refuses_every_lease),
        cmocka_unit_test(lease_grants_the_smaller_of_wanted_and_remaining_less_floor),
        cmocka_unit_test(lease_with_too_little_left_is_refused),
        cmocka_unit_test(lease_rejects_zero_negative_and_absurd_wants),
        cmocka_unit_test(a_budget_never_started_is_rejected_everywhere),
        cmocka_unit_test(a_budget_can_end_at_an_absolute_deadline),
        cmocka_unit_test(child_deadline_is_the_minimum_of_parent_and_limit),
        cmocka_unit_test(child_of_an_exhausted_parent_is_refused),
        cmocka_unit_test(child_floor_larger_than_the_child_is_dropped),
        cmocka_unit_test(budget_near_the_end_of_time_saturates),
        cmocka_unit_test(time_add_saturates_instead_of_wrapping),
    };
    return cmocka_run_group_tests_name("budget", tests, NULL, NULL);
}
