/*
 * sg-proxy's quiet list (tools/sg-proxy/quiet.h): the read buffers given
 * back after READBUF_QUIET_NS of quiet are found in the order their
 * streams went quiet, on a hand-driven clock, and finding them visits
 * only those due - never every open stream on each pass, which at 10,000
 * streams reading every 500 ms was a walk of all of them nearly every
 * pass of the proxy's loop.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

#include "quiet.h"

#define QUIET SG_MS(500)
#define T0 SG_SEC(100)

static int index_of(const struct quiet_link *base, const struct quiet_link *e) {
    return (int)(e - base);
}

/* Touched in order, each due QUIET after its last touch, in that order. */
static void due_in_touch_order(void **state) {
    (void)state;
    struct quiet_list l = {0};
    struct quiet_link e[4] = {{0}};
    assert_int_equal(quiet_next(&l, QUIET), SG_TIME_NEVER);
    for (int i = 0; i < 4; i++) {
        quiet_touch(&l, &e[i], T0 + SG_MS(10) * i);
    }
    /* 1 read again later: it goes last */
    quiet_touch(&l, &e[1], T0 + SG_MS(100));
    assert_int_equal(quiet_next(&l, QUIET), T0 + QUIET);
    assert_null(quiet_take_due(&l, T0 + QUIET - 1, QUIET));
    const int order[4] = {0, 2, 3, 1};
    const int64_t due[4] = {T0, T0 + SG_MS(20), T0 + SG_MS(30), T0 + SG_MS(100)};
    for (int k = 0; k < 4; k++) {
        struct quiet_link *x = quiet_take_due(&l, due[k] + QUIET, QUIET);
        assert_non_null(x);
        assert_int_equal(index_of(e, x), order[k]);
        assert_false(x->in);
        if (k < 3) {
            assert_int_equal(quiet_next(&l, QUIET), due[k + 1] + QUIET);
        }
    }
    assert_null(quiet_take_due(&l, SG_TIME_NEVER - 1, QUIET));
    assert_int_equal(quiet_next(&l, QUIET), SG_TIME_NEVER);
}

/* Removed at the head, the middle and the tail, and removed twice: the
 * rest stay in order; a touch with an earlier clock read keeps order. */
static void removal_and_a_clock_read_earlier(void **state) {
    (void)state;
    struct quiet_list l = {0};
    struct quiet_link e[5] = {{0}};
    for (int i = 0; i < 5; i++) {
        quiet_touch(&l, &e[i], T0 + i);
    }
    quiet_remove(&l, &e[0]);
    quiet_remove(&l, &e[2]);
    quiet_remove(&l, &e[4]);
    quiet_remove(&l, &e[4]);
    assert_ptr_equal(l.head, &e[1]);
    assert_ptr_equal(l.tail, &e[3]);
    /* read with a clock taken before the tail's touch: stamped as the tail */
    quiet_touch(&l, &e[0], T0);
    assert_int_equal(e[0].at, T0 + 3);
    const int order[3] = {1, 3, 0};
    for (int k = 0; k < 3; k++) {
        struct quiet_link *x = quiet_take_due(&l, T0 + 3 + QUIET, QUIET);
        assert_non_null(x);
        assert_int_equal(index_of(e, x), order[k]);
    }
    assert_null(l.head);
    assert_null(l.tail);
}

/* 10,000 streams, each reading every 500 ms at its own phase, on a
 * clock moved by hand in 5 ms passes: each pass visits only the buffers
 * due in it (here none stays quiet, so none), and a stream that stops
 * reading is given back 500 ms after its last read, in the first pass after. */
static void a_pass_visits_only_what_is_due(void **state) {
    (void)state;
    enum { N = 10000 };
    struct quiet_list l = {0};
    struct quiet_link *e = calloc(N, sizeof(*e));
    assert_non_null(e);
    int64_t last[N];
    for (int i = 0; i < N; i++) {
        last[i] = T0 + (int64_t)i * QUIET / N;
        quiet_touch(&l, &e[i], last[i]);
    }
    const int stopped = 1234; /* reads no more after its first */
    const int64_t pass = SG_MS(5);
    int64_t given_back_at = -1;
    long visits = 0;
    for (int64_t now = T0; now <= T0 + SG_MS(1500); now += pass) {
        for (int i = 0; i < N; i++) {
            if (i != stopped && now >= last[i] + QUIET - pass) {
                last[i] = now;
                quiet_touch(&l, &e[i], now);
            }
        }
        struct quiet_link *x;
        while ((x = quiet_take_due(&l, now, QUIET)) != NULL) {
            visits++;
            assert_int_equal(index_of(e, x), stopped);
            given_back_at = now;
        }
    }
    assert_int_equal(visits, 1);
    assert_true(given_back_at >= last[stopped] + QUIET);
    assert_true(given_back_at < last[stopped] + QUIET + pass);
    free(e);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(due_in_touch_order),
        cmocka_unit_test(removal_and_a_clock_read_earlier),
        cmocka_unit_test(a_pass_visits_only_what_is_due),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
