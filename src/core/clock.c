/*
 * The injectable clock.  This is the only place in the core that reads the
 * system clock, and no other core function calls it: it exists for the
 * transports and programs, which pass `now` down into the core.
 */
#include "core/internal.h"

#include <string.h>
#include <time.h>

/* The sizes of the structs a caller embeds are the ABI's: fixed for 1.x
 * (tests/unit/abi_sizes_test.c prints them). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(sg_clock) == 32, "sg_clock is 32 bytes on LP64");
_Static_assert(sizeof(sg_manual_clock) == 24, "sg_manual_clock is 24 bytes on LP64");
_Static_assert(sizeof(sg_mem) == 32, "sg_mem is 32 bytes on LP64");
#endif

int64_t sg_clock_monotonic_now(void *user_data) {
    (void)user_data;
    struct timespec ts;
    /* CLOCK_MONOTONIC cannot fail with a valid pointer on Linux. */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * INT64_C(1000000000) + (int64_t)ts.tv_nsec;
}

int sg_clock_init(sg_clock *clock, int64_t (*now)(void *user_data), void *user_data) {
    if (clock == NULL) {
        return SG_EINVAL;
    }
    memset(clock, 0, sizeof(*clock));
    clock->now_ = now;
    clock->user_data_ = now != NULL ? user_data : NULL;
    return 0;
}

int64_t sg_clock_now(const sg_clock *clock) {
    if (clock == NULL || clock->now_ == NULL) {
        return sg_clock_monotonic_now(NULL);
    }
    return clock->now_(clock->user_data_);
}

void sg_manual_clock_init(sg_manual_clock *mc, int64_t now) {
    if (mc != NULL) {
        memset(mc, 0, sizeof(*mc));
        mc->now_ = now;
    }
}

void sg_manual_clock_set(sg_manual_clock *mc, int64_t now) {
    if (mc != NULL) {
        mc->now_ = now;
    }
}

void sg_manual_clock_advance(sg_manual_clock *mc, int64_t ns) {
    if (mc != NULL) {
        mc->now_ = sg_time_add(mc->now_, ns);
    }
}

int64_t sg_manual_clock_now(const sg_manual_clock *mc) {
    return mc != NULL ? mc->now_ : -1;
}

static int64_t manual_now(void *user_data) {
    return sg_manual_clock_now(user_data);
}

sg_clock sg_manual_clock_as(sg_manual_clock *mc) {
    sg_clock c;
    (void)sg_clock_init(&c, manual_now, mc);
    return c;
}

void sg_mem_init(sg_mem *mem, void *(*resize)(void *ptr, size_t size, void *user_data),
                 void *user_data) {
    if (mem != NULL) {
        memset(mem, 0, sizeof(*mem));
        mem->resize_ = resize;
        mem->user_data_ = resize != NULL ? user_data : NULL;
    }
}
