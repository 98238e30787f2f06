/*
 * Structs a caller allocates for the library to fill begin with size_t
 * size (the caller's sizeof): the library fills what that size holds, so
 * a caller built against an older, smaller struct keeps working.
 */
#include "core/internal.h"

#include <string.h>

int sg__stats_copy(void *dst, const void *src, size_t full) {
    size_t want = 0;
    if (dst == NULL) {
        return SG_EINVAL;
    }
    memcpy(&want, dst, sizeof(want));
    if (want < sizeof(size_t)) {
        return SG_EINVAL; /* a caller that never said how big its struct is */
    }
    /* an older caller's struct is smaller: fill only what it has; its size
     * stays what it said */
    size_t n = want < full ? want : full;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t),
           n - sizeof(size_t));
    return 0;
}
