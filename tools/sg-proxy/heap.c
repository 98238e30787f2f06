/*
 * The C library's free memory given back after a burst of streams
 * (heap.h).
 *
 * glibc keeps what is freed inside its heap, and the main heap shrinks
 * only from its top; malloc_trim(0) gives back every whole free page
 * anywhere in it (madvise).  But glibc's per-thread cache (tcache) keeps
 * up to TCACHE_COUNT freed blocks of each of its TCACHE_BINS sizes (24 to
 * 1,032 bytes asked, 16 apart) out of the heap: to malloc_trim they are in
 * use, and after a burst they are the last blocks its streams freed,
 * scattered over the heap, each pinning its page.  So before the trim the
 * cache is emptied: the calling thread takes TCACHE_COUNT blocks of each
 * size (the cached ones first, then fresh ones from the heap), and a
 * thread of a moment frees them - into its own cache, which glibc empties
 * into the heap as that thread ends - so the trim finds every one, and
 * the loop's cache starts empty.  Before, they were swapped for fresh
 * blocks (the cache full again): 200-250 KiB stayed resident after every
 * trim.  When no thread can be had they go back to the cache, as then.
 * sg-proxy gives back once at start too, and after each burst.
 * (The cache itself could only be turned off from the environment at
 * exec, GLIBC_TUNABLES=glibc.malloc.tcache_count=0: not done.)  These are
 * glibc's defaults; under other counts or another C library this does
 * less, never harm: it is malloc and free.
 */
#include "heap.h"

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define TCACHE_BINS 64
#define TCACHE_COUNT 7

void heap_init(void) {
    mallopt(M_ARENA_MAX, 1);
}

static void *free_blocks(void *blocks) {
    void **b = blocks;
    for (size_t i = 0; i < TCACHE_BINS * TCACHE_COUNT; i++) {
        free(b[i]);
    }
    return NULL;
}

void heap_give_back(void) {
    static void *b[TCACHE_BINS * TCACHE_COUNT];
    for (size_t i = 0; i < TCACHE_BINS * TCACHE_COUNT; i++) {
        b[i] = malloc(24 + 16 * (i / TCACHE_COUNT));
    }
    pthread_attr_t a;
    pthread_t t;
    bool started = false;
    if (pthread_attr_init(&a) == 0) {
        started = pthread_attr_setstacksize(&a, 64 * 1024) == 0 &&
                  pthread_create(&t, &a, free_blocks, b) == 0;
        pthread_attr_destroy(&a);
    }
    if (started) {
        pthread_join(t, NULL);
    } else {
        free_blocks(b);
    }
    malloc_trim(0);
}
