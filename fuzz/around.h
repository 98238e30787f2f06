/*
 * An input with bytes put around it, for the fuzz targets that check an
 * answer is the same with whitespace around a body, and that a byte
 * after it spoils it: fuzz/proxy_include_usage.c, fuzz/proxy_model.c.
 */
#ifndef SG_FUZZ_AROUND_H
#define SG_FUZZ_AROUND_H

#include <stdlib.h>
#include <string.h>

/* @b[0..@n) with @pre before it and @post after it, in a new buffer of
 * *@len bytes (the caller frees it); aborts without memory. */
static inline char *around(const char *pre, const char *b, size_t n, const char *post,
                           size_t *len) {
    size_t a = strlen(pre);
    size_t z = strlen(post);
    char *w = malloc(a + n + z + 1);
    if (w == NULL) {
        abort();
    }
    memcpy(w, pre, a);
    if (n > 0) {
        memcpy(w + a, b, n);
    }
    memcpy(w + a + n, post, z);
    *len = a + n + z;
    return w;
}

#endif
