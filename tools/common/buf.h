/*
 * A growable byte buffer the programs share: append at the end, consume
 * from the front (buf.c).  libc only.  Its names keep the sg_fm_ prefix
 * of sg-fakemodel, where it was first written.
 */
#ifndef SG_TOOLS_BUF_H
#define SG_TOOLS_BUF_H

#include <stddef.h>

typedef struct {
    char *p;
    size_t off; /* start of unread bytes */
    size_t len; /* unread bytes */
    size_t cap;
} sg_fm_buf;

int sg_fm_buf_reserve(sg_fm_buf *b, size_t more);
int sg_fm_buf_append(sg_fm_buf *b, const void *data, size_t len);
int sg_fm_buf_printf(sg_fm_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
int sg_fm_buf_fill(sg_fm_buf *b, char ch, size_t n);
void sg_fm_buf_consume(sg_fm_buf *b, size_t n);
void sg_fm_buf_free(sg_fm_buf *b);
static inline char *sg_fm_buf_data(const sg_fm_buf *b) {
    return b->p + b->off;
}
/* Appends s as the inside of a JSON string (no quotes), escaping as needed. */
int sg_fm_buf_json_str(sg_fm_buf *b, const char *s, size_t len);

#endif
