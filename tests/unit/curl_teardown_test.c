/*
 * The managed multi's rule for removing a stopped transfer from libcurl
 * (src/curl/teardown.c), on instants chosen by hand: a removal yields to a
 * clock due within the slack, goes when there is room, and never waits
 * longer than its bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "curl/teardown.h"

#define T0 SG_SEC(1000) /* when the attempt stopped */

static void removal_yields_to_a_clock_due_within_the_slack(void **state) {
    (void)state;
    assert_false(sg__curl_teardown_may_run(T0, T0 + 1, T0));
    assert_false(sg__curl_teardown_may_run(T0, T0 + SG_US(500), T0));
    assert_false(
        sg__curl_teardown_may_run(T0 + SG_MS(5), T0 + SG_MS(5) + SG_US(999), T0));
    assert_false(sg__curl_teardown_may_run(T0, T0 + SG__CURL_TEARDOWN_SLACK - 1, T0));
}

static void removal_goes_when_the_next_clock_leaves_room(void **state) {
    (void)state;
    assert_true(sg__curl_teardown_may_run(T0, T0 + SG__CURL_TEARDOWN_SLACK, T0));
    assert_true(sg__curl_teardown_may_run(T0, T0 + SG_MS(50), T0));
    assert_true(sg__curl_teardown_may_run(T0, SG_TIME_NEVER, T0)); /* no clock left */
    /* a clock's own instant far off: no overflow near the end of time */
    assert_true(sg__curl_teardown_may_run(SG_TIME_NEVER - 10, SG_TIME_NEVER, T0));
}

static void removal_waits_no_longer_than_its_bound(void **state) {
    (void)state;
    const int64_t bound = T0 + SG__CURL_TEARDOWN_MAX_WAIT;
    assert_false(sg__curl_teardown_may_run(bound - 1, bound - 1 + SG_US(10), T0));
    assert_true(sg__curl_teardown_may_run(bound, bound + SG_US(10), T0));
    assert_true(sg__curl_teardown_may_run(bound + SG_MS(3), bound + SG_MS(3) + 1, T0));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(removal_yields_to_a_clock_due_within_the_slack),
        cmocka_unit_test(removal_goes_when_the_next_clock_leaves_room),
        cmocka_unit_test(removal_waits_no_longer_than_its_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
