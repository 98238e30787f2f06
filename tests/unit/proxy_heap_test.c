/*
 * sg-proxy's heap after a burst (tools/sg-proxy/heap.c): what glibc's
 * per-thread cache held is back in the heap and given back with the rest
 * - the cache left empty, not full of other blocks - and the thread that
 * empties it takes no arena of its own.  Blocks of every cached size
 * allocated and freed as a burst of streams does; the heap read with
 * mallinfo2 (blocks in the cache count as in use there), the address
 * space from /proc/self/status.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "heap.h"

/* These read glibc's own allocator - its per-thread cache, mallinfo2,
 * its arenas.  Under AddressSanitizer or valgrind the heap is theirs:
 * nothing of glibc's is there to measure, and each test is skipped. */
static bool heap_is_glibcs(void) {
#if defined(__SANITIZE_ADDRESS__)
    return false;
#elif defined(__has_feature)
#    if __has_feature(address_sanitizer)
    return false;
#    endif
#endif
    const char *pre = getenv("LD_PRELOAD"); /* valgrind's vgpreload_*.so */
    return pre == NULL || strstr(pre, "vgpreload") == NULL;
}

#define GLIBC_HEAP_ONLY()        \
    do {                         \
        if (!heap_is_glibcs()) { \
            skip();              \
        }                        \
    } while (0)

/* VmSize of this process, KiB. */
static long vm_size_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    assert_non_null(f);
    char line[256];
    long v = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmSize:", 7) == 0) {
            v = atol(line + 7);
        }
    }
    fclose(f);
    return v;
}

/* A burst: 4,000 blocks of the sizes the cache keeps (and larger),
 * written, then freed in another order than made. */
static void burst(void) {
    enum { N = 4000 };
    static void *b[N];
    for (size_t i = 0; i < N; i++) {
        size_t n = 24 + 16 * (i % 70);
        b[i] = malloc(n);
        assert_non_null(b[i]);
        memset(b[i], 1, n);
    }
    for (size_t i = 0; i < N; i += 2) {
        free(b[i]);
    }
    for (size_t i = 1; i < N; i += 2) {
        free(b[i]);
    }
}

/* After a burst the cache holds its last blocks; after the give-back it
 * holds none: the next block of every size it keeps comes from the heap
 * (the heap's free bytes fall), not from the cache (they would not).
 * Before, the cache was swapped for fresh blocks and left full. */
static void the_cache_is_left_empty(void **state) {
    (void)state;
    GLIBC_HEAP_ONLY();
    for (int round = 0; round < 2; round++) {
        burst();
        heap_give_back();
        void *b[64];
        size_t from_cache = 0;
        for (size_t i = 0; i < 64; i++) {
            size_t free_before = mallinfo2().fordblks;
            b[i] = malloc(24 + 16 * i);
            assert_non_null(b[i]);
            from_cache += mallinfo2().fordblks == free_before;
        }
        for (size_t i = 0; i < 64; i++) {
            free(b[i]);
        }
        assert_int_equal(from_cache, 0);
    }
}

/* And what the cache held is in the heap again: in use after the
 * give-back is what was before the burst, not that and ~230 KiB of
 * cached blocks (64 sizes x 7). */
static void the_cache_goes_back_to_the_heap(void **state) {
    (void)state;
    GLIBC_HEAP_ONLY();
    heap_give_back();
    size_t before = mallinfo2().uordblks;
    burst();
    heap_give_back();
    assert_true(mallinfo2().uordblks <= before + 4096);
}

/* What a give-back frees, the heap gives back: free bytes are not left
 * resident inside it beyond the trim's slack. */
static void the_free_heap_is_given_back(void **state) {
    (void)state;
    GLIBC_HEAP_ONLY();
    burst();
    heap_give_back();
    struct mallinfo2 m = mallinfo2();
    /* keepcost: the top's free bytes kept; fordblks: all free bytes */
    assert_true(m.keepcost <= 128 * 1024);
}

/* The thread that empties the cache allocates from the one arena: the
 * address space has not grown by an arena's 64 MB since the start. */
static long g_vm_at_start;

static void no_arena_of_its_own(void **state) {
    (void)state;
    GLIBC_HEAP_ONLY();
    for (int i = 0; i < 3; i++) {
        burst();
        heap_give_back();
    }
    assert_true(vm_size_kib() - g_vm_at_start < 8 * 1024);
}

int main(void) {
    heap_init();
    g_vm_at_start = vm_size_kib();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_cache_is_left_empty),
        cmocka_unit_test(the_cache_goes_back_to_the_heap),
        cmocka_unit_test(the_free_heap_is_given_back),
        cmocka_unit_test(no_arena_of_its_own),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
