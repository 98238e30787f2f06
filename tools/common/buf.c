/* Growable byte buffer: append at the end, consume from the front. */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sg_fm_buf_reserve(sg_fm_buf *b, size_t more) {
    if (b->cap - b->off - b->len >= more) {
        return 0;
    }
    /* Reclaim the consumed front first: cheaper than growing. */
    if (b->off > 0 && b->cap - b->len >= more) {
        memmove(b->p, b->p + b->off, b->len);
        b->off = 0;
        return 0;
    }
    size_t need = b->len + more;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < need) {
        cap *= 2;
    }
    char *np = malloc(cap);
    if (np == NULL) {
        return -1;
    }
    if (b->len > 0) {
        memcpy(np, b->p + b->off, b->len);
    }
    free(b->p);
    b->p = np;
    b->off = 0;
    b->cap = cap;
    return 0;
}

int sg_fm_buf_append(sg_fm_buf *b, const void *data, size_t len) {
    if (len == 0) {
        return 0;
    }
    if (sg_fm_buf_reserve(b, len) != 0) {
        return -1;
    }
    memcpy(b->p + b->off + b->len, data, len);
    b->len += len;
    return 0;
}

int sg_fm_buf_fill(sg_fm_buf *b, char ch, size_t n) {
    if (sg_fm_buf_reserve(b, n) != 0) {
        return -1;
    }
    memset(b->p + b->off + b->len, ch, n);
    b->len += n;
    return 0;
}

int sg_fm_buf_printf(sg_fm_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0) {
        return -1;
    }
    if ((size_t)n < sizeof(small)) {
        return sg_fm_buf_append(b, small, (size_t)n);
    }
    if (sg_fm_buf_reserve(b, (size_t)n + 1) != 0) {
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->off + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void sg_fm_buf_consume(sg_fm_buf *b, size_t n) {
    if (n >= b->len) {
        b->off = 0;
        b->len = 0;
        return;
    }
    b->off += n;
    b->len -= n;
}

void sg_fm_buf_free(sg_fm_buf *b) {
    free(b->p);
    memset(b, 0, sizeof(*b));
}

int sg_fm_buf_json_str(sg_fm_buf *b, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[6];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            if (sg_fm_buf_append(b, esc, 2) != 0) {
                return -1;
            }
        } else if (c < 0x20 || c >= 0x7f) {
            /* Bytes, not characters: the log must stay valid JSON even for
             * invalid UTF-8, so every non-ASCII byte becomes \u00XX. */
            esc[0] = '\\';
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            if (sg_fm_buf_append(b, esc, 6) != 0) {
                return -1;
            }
        } else if (sg_fm_buf_append(b, &s[i], 1) != 0) {
            return -1;
        }
    }
    return 0;
}
