/*
 * bench_guard - cost of the stream guard's hot path.
 *
 * Measures nanoseconds per (sg_guard_on_item + sg_guard_next_deadline), the
 * pair a transport runs for every item, with all three clocks and a budget
 * armed; prints sizeof(sg_guard) and counts heap allocations made during the
 * timed loop (through a counting malloc interposed in this program).
 * Prints the median of 7 runs.  Usage: bench_guard [items-per-run]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <streamguard/streamguard.h>

/* Every malloc in the process passes through here while the bench runs. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static unsigned long allocations;
void *malloc(size_t n) {
    allocations++;
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    allocations++;
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    allocations++;
    return __libc_realloc(p, n);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double run(long items, unsigned long *allocs) {
    sg_budget budget;
    sg_guard_config cfg;
    sg_guard guard;
    sg_guard_result r;
    int64_t now = SG_SEC(10);
    volatile int64_t sink = 0;

    sg_budget_start(&budget, now, SG_DURATION_MAX, SG_MS(10));
    sg_guard_config_init(&cfg);
    sg_guard_config_set_first_item_timeout(&cfg, SG_SEC(5));
    sg_guard_config_set_idle_timeout(&cfg, SG_SEC(1));
    sg_guard_config_set_stream_timeout(&cfg, SG_DURATION_MAX);
    sg_guard_start(&guard, &cfg, &budget, now);
    sg_guard_set_phase(&guard, SG_PHASE_WAIT_FIRST_ITEM, now);

    unsigned long before = allocations;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < items; i++) {
        now += 1000; /* an item every microsecond */
        if (sg_guard_on_item(&guard, now) != 0) {
            abort();
        }
        sink += sg_guard_next_deadline(&guard);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    *allocs = allocations - before;
    sg_guard_finish(&guard, now, true, &r);
    (void)sink;
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    return ns / (double)items;
}

int main(int argc, char **argv) {
    long items = argc > 1 ? atol(argv[1]) : 50000000L;
    double samples[7];
    unsigned long allocs = 0, total_allocs = 0;
    for (int i = 0; i < 7; i++) {
        samples[i] = run(items, &allocs);
        total_allocs += allocs;
    }
    qsort(samples, 7, sizeof(samples[0]), cmp);
    printf("guard hot path: %.2f ns per on_item+next_deadline (median of 7 x %ld items;"
           " min %.2f, max %.2f)\n",
           samples[3], items, samples[0], samples[6]);
    printf("sizeof(sg_guard) = %zu bytes, sizeof(sg_budget) = %zu bytes\n",
           sizeof(sg_guard), sizeof(sg_budget));
    printf("heap allocations during %ld items: %lu\n", 7 * items, total_allocs);
    return 0;
}
