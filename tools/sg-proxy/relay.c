/*
 * relay.c - the committed attempt's bytes on their way to the client
 * (relay.h).
 */
#include <stdlib.h>
#include <string.h>

#include "relay.h"

void relay_init(struct relay *r, sg_format format) {
    memset(r, 0, sizeof(*r));
    r->format = format;
}

void relay_free(struct relay *r) {
    free(r->buf);
    r->buf = NULL;
    r->len = r->cap = 0;
}

bool relay_add(struct relay *r, const void *p, size_t n) {
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n) {
            cap *= 2;
        }
        char *b = realloc(r->buf, cap);
        if (b == NULL) {
            return false;
        }
        r->buf = b;
        r->cap = cap;
    }
    r->chunk = p;
    r->chunk_len = n;
    r->chunk_at = (ptrdiff_t)r->len;
    memcpy(r->buf + r->len, p, n);
    r->len += n;
    return true;
}

void relay_drop(struct relay *r, size_t n) {
    memmove(r->buf, r->buf + n, r->len - n);
    r->len -= n;
    r->chunk_at -= (ptrdiff_t)n;
}

/* The end of the first whole event (SSE: its blank line; a line ends
 * with CRLF, LF or a bare CR) or line (NDJSON) of @b[0..@n) that ends at
 * or after @from, which is inside a line: the index after it, or 0 when
 * none. */
static size_t event_end(sg_format f, const char *b, size_t n, size_t from) {
    size_t line = SIZE_MAX; /* where the current line began: not known */
    for (size_t i = from; i < n; i++) {
        if (b[i] != '\n' && b[i] != '\r') {
            continue;
        }
        if (f == SG_FORMAT_NDJSON) {
            if (b[i] == '\n') {
                return i + 1;
            }
            continue;
        }
        /* a CR last in @b ends its line: an LF after it, in later
         * bytes, is read with them as the same line end (the standard's
         * parser reads the stream, not its reads) */
        size_t eol = b[i] == '\r' && i + 1 < n && b[i + 1] == '\n' ? 2 : 1;
        if (i == line) {
            return i + eol; /* a blank line: the event's end */
        }
        line = i + eol;
        i += eol - 1;
    }
    return 0;
}

/* Found by where the item's data ends in the read being processed - or,
 * for an item the library assembled elsewhere (an event split across
 * reads), as the next whole event. */
size_t relay_item(struct relay *r, const sg_item *item) {
    size_t from = r->chunk_at > 0 ? (size_t)r->chunk_at : 0;
    const char *dend = item->data + item->data_len;
    if (r->chunk != NULL && item->data >= r->chunk && dend <= r->chunk + r->chunk_len &&
        r->chunk_at + (dend - r->chunk) >= 0) {
        from = (size_t)(r->chunk_at + (dend - r->chunk));
    }
    return event_end(r->format, r->buf, r->len, from);
}

/* By each prelude's total length (the library checks the rest): a stream
 * cut inside a message keeps that half back, so the exception that ends
 * it is read as one.  A length that cannot be a message is held too - the
 * library fails the stream, and the exception follows what went before. */
size_t relay_messages(const struct relay *r) {
    size_t off = 0;
    while (r->len - off >= 16) {
        const unsigned char *q = (const unsigned char *)r->buf + off;
        size_t total = (size_t)q[0] << 24 | (size_t)q[1] << 16 | (size_t)q[2] << 8 | q[3];
        if (total < 16 || r->len - off < total) {
            break;
        }
        off += total;
    }
    return off;
}
