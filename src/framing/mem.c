/* Buffers that grow as they are used (see mem.h). */
#include "framing/mem.h"

#include <stdlib.h>

void *sg__mem_std(void *ptr, size_t size, void *user_data) {
    (void)user_data;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

void *sg__mem_grow(const sg_mem *mem, void *buf, size_t *room, size_t need,
                   size_t limit) {
    if (mem == NULL || need > limit) {
        return NULL;
    }
    /* doubling keeps a line that arrives a byte at a time linear */
    size_t n = *room == 0 ? SG__MEM_MIN : *room > limit / 2 ? limit : 2 * *room;
    n = n > limit ? limit : n;
    n = n < need ? need : n;
    void *p = mem->resize_(buf, n, mem->user_data_);
    if (p != NULL) {
        *room = n;
    }
    return p;
}

void *sg__mem_free(const sg_mem *mem, void *buf, size_t *room) {
    if (mem == NULL) {
        return buf;
    }
    if (buf != NULL) {
        (void)mem->resize_(buf, 0, mem->user_data_);
    }
    *room = 0;
    return NULL;
}
