/*
 * The read-splitting driver shared by the parser fuzz targets: the body is
 * fed in reads whose sizes come from the input itself (deterministic), each
 * read in its own exact-size heap block so that an over-read is caught by
 * the sanitizers.
 */
#ifndef SG_FUZZ_SPLIT_FEED_H
#define SG_FUZZ_SPLIT_FEED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef ptrdiff_t (*fz_feed_fn)(void *parser, const void *data, size_t len);

static void fz_check(const char *target, int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/%s invariant failed: %s\n", target, what);
        abort();
    }
}

/* Mixes @p[0..@n) into the digest *@hash: FNV-1a, plus the length so
 * ("ab","c") differs from ("a","bc"). */
static inline void fz_mix(uint64_t *hash, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        *hash = (*hash ^ b[i]) * 0x100000001b3ULL;
    }
    *hash = (*hash ^ (uint64_t)n) * 0x100000001b3ULL;
}

/*
 * Feeds @body[0..@n) to @feed in reads of the sizes in @sizes (each 1..64,
 * cycled; NULL = one read), checking that every feed returns its length or
 * an error and that an error is sticky.  Returns 0, or the first error.
 */
static ptrdiff_t fz_feed_split(const char *target, void *parser, fz_feed_fn feed,
                               const uint8_t *body, size_t n, const uint8_t *sizes,
                               size_t n_sizes) {
    size_t off = 0;
    size_t k = 0;
    while (off < n) {
        size_t len = n - off;
        if (sizes != NULL) {
            size_t want = (size_t)(sizes[k++ % n_sizes] % 64) + 1;
            len = want < len ? want : len;
        }
        char *piece = malloc(len);
        fz_check(target, piece != NULL, "malloc");
        memcpy(piece, body + off, len);
        ptrdiff_t rc = feed(parser, piece, len);
        free(piece);
        fz_check(target, rc == (ptrdiff_t)len || rc < 0,
                 "feed returns its length or an error");
        if (rc < 0) {
            fz_check(target, feed(parser, "x", 1) == rc, "errors are sticky");
            return rc;
        }
        off += len;
    }
    return 0;
}

#endif
