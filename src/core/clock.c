/*
 * The injectable clock.  This is the only place in the core that reads the
 * system clock, and no other core function calls it: it exists for the
 * transports and programs, which pass `now` down into the core.
 */
#include <streamguard/core.h>

#include <time.h>

int64_t sg_clock_monotonic_now(void *user_data) {
    (void)user_data;
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail with a valid pointer on Linux. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

int64_t sg_clock_now(const sg_clock *clock) {
    if (clock == NULL || clock->now == NULL) {
        return sg_clock_monotonic_now(NULL);
    }
    return clock->now(clock->user_data);
}

static int64_t manual_now(void *user_data) {
    const sg_manual_clock *mc = user_data;
    return mc->now_ns;
}

sg_clock sg_manual_clock_as(sg_manual_clock *mc) {
    sg_clock c = {manual_now, mc};
    return c;
}
