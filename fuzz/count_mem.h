/*
 * An sg_mem allocator that counts the bytes live and their peak, for the
 * checks that a growing stream (sg_stream_init_mem) holds what it should:
 * fuzz/stream_classify.c and tests/unit/stream_memory_test.c.  With a
 * limit, an allocation past it fails (no memory).  Each block carries its
 * size in 16 bytes before it.
 */
#ifndef SG_FUZZ_COUNT_MEM_H
#define SG_FUZZ_COUNT_MEM_H

#include <stdlib.h>
#include <string.h>

typedef struct count_mem {
    size_t live;  /* bytes allocated now */
    size_t peak;  /* the most at once */
    size_t limit; /* past this many live bytes: no memory (0: none) */
} count_mem;

static inline void *count_mem_resize(void *ptr, size_t size, void *ud) {
    count_mem *c = ud;
    size_t old = 0;
    unsigned char *base = NULL;
    if (ptr != NULL) {
        base = (unsigned char *)ptr - 16;
        memcpy(&old, base, sizeof(old));
    }
    if (size == 0) {
        c->live -= old;
        free(base);
        return NULL;
    }
    if (c->limit != 0 && c->live - old + size > c->limit) {
        return NULL;
    }
    unsigned char *p = realloc(base, size + 16);
    if (p == NULL) {
        return NULL;
    }
    memcpy(p, &size, sizeof(size));
    c->live = c->live - old + size;
    c->peak = c->live > c->peak ? c->live : c->peak;
    return p + 16;
}

#endif /* SG_FUZZ_COUNT_MEM_H */
