/*
 * Expected event-stream messages, read from the JSON description that the
 * vectors (tests/data/eventstream/decoded/positive/) and the cross-check
 * against the reference codec (tests/sdk/eventstream_gen.mjs) share - one
 * object a line, documented in tests/data/eventstream/README.md - and a
 * checker that compares what the decoder delivers with it, message by
 * message.  Shared by tests/unit/eventstream_test.c and
 * tests/sdk/eventstream_check.c.
 *
 * The reader takes only that format: objects, arrays, strings without
 * escapes (names and values are hex), decimal integers.  Anything else is a
 * parse error, never a guess.
 */
#ifndef SG_TEST_ES_DESC_H
#define SG_TEST_ES_DESC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/framing.h>

typedef struct es_want_header {
    unsigned char *name;
    size_t name_len;
    int type;
    int64_t integer;
    unsigned char *value; /* types 6, 7, 9 */
    size_t value_len;
} es_want_header;

typedef struct es_want {
    char label[64];
    size_t total;
    es_want_header *headers;
    size_t n_headers;
    unsigned char *payload;
    size_t payload_len;
} es_want;

typedef struct es_rd {
    const char *p;
    const char *end;
} es_rd;

static inline void es_rd_ws(es_rd *r) {
    while (r->p < r->end &&
           (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t')) {
        r->p++;
    }
}

static inline bool es_rd_char(es_rd *r, char c) {
    es_rd_ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return true;
    }
    return false;
}

/* A string without escapes: sets *s, *n to the bytes between the quotes. */
static inline bool es_rd_str(es_rd *r, const char **s, size_t *n) {
    if (!es_rd_char(r, '"')) {
        return false;
    }
    const char *q = memchr(r->p, '"', (size_t)(r->end - r->p));
    if (q == NULL || memchr(r->p, '\\', (size_t)(q - r->p)) != NULL) {
        return false;
    }
    *s = r->p;
    *n = (size_t)(q - r->p);
    r->p = q + 1;
    return true;
}

static inline bool es_parse_i64(const char *s, size_t n, int64_t *out) {
    bool neg = n > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;
    uint64_t v = 0;
    if (i == n) {
        return false;
    }
    for (; i < n; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
        return false;
    }
    /* -(2^63) has no positive twin: negate in unsigned arithmetic. */
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

static inline bool es_rd_uint(es_rd *r, size_t *out) {
    es_rd_ws(r);
    const char *s = r->p;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        r->p++;
    }
    int64_t v;
    if (!es_parse_i64(s, (size_t)(r->p - s), &v) || v < 0) {
        return false;
    }
    *out = (size_t)v;
    return true;
}

static inline int es_hexval(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* Lowercase hex into a fresh heap block (at least 1 byte). */
static inline bool es_unhex(const char *s, size_t n, unsigned char **out, size_t *len) {
    if (n % 2 != 0) {
        return false;
    }
    unsigned char *b = malloc(n / 2 + 1);
    if (b == NULL) {
        return false;
    }
    for (size_t i = 0; i < n / 2; i++) {
        int hi = es_hexval(s[2 * i]);
        int lo = es_hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(b);
            return false;
        }
        b[i] = (unsigned char)(hi * 16 + lo);
    }
    *out = b;
    *len = n / 2;
    return true;
}

static inline bool es_rd_key(es_rd *r, const char *key) {
    const char *s;
    size_t n;
    return es_rd_str(r, &s, &n) && n == strlen(key) && memcmp(s, key, n) == 0 &&
           es_rd_char(r, ':');
}

static inline void es_want_free(es_want *w) {
    for (size_t i = 0; i < w->n_headers; i++) {
        free(w->headers[i].name);
        free(w->headers[i].value);
    }
    free(w->headers);
    free(w->payload);
    memset(w, 0, sizeof(*w));
}

static inline bool es_rd_header(es_rd *r, es_want_header *h) {
    const char *s;
    size_t n;
    size_t t;
    if (!es_rd_char(r, '{') || !es_rd_key(r, "n") || !es_rd_str(r, &s, &n) ||
        !es_unhex(s, n, &h->name, &h->name_len) || !es_rd_char(r, ',') ||
        !es_rd_key(r, "t") || !es_rd_uint(r, &t) || t > 9 || !es_rd_char(r, ',')) {
        return false;
    }
    h->type = (int)t;
    bool bytes = t == SG_ES_BYTES || t == SG_ES_STRING || t == SG_ES_UUID;
    if (!es_rd_key(r, bytes ? "v" : "i") || !es_rd_str(r, &s, &n)) {
        return false;
    }
    if (bytes) {
        if (!es_unhex(s, n, &h->value, &h->value_len)) {
            return false;
        }
    } else if (!es_parse_i64(s, n, &h->integer)) {
        return false;
    }
    return es_rd_char(r, '}');
}

/* Reads one description from @line[0..@n).  Returns 0, or -1 (and frees
 * what it had read) when the text is not of the format. */
static inline int es_want_parse(const char *line, size_t n, es_want *w) {
    es_rd r = {line, line + n};
    const char *s;
    size_t len;
    size_t cap = 0;
    memset(w, 0, sizeof(*w));
    if (!es_rd_char(&r, '{') || !es_rd_key(&r, "name") || !es_rd_str(&r, &s, &len) ||
        len >= sizeof(w->label)) {
        goto bad;
    }
    memcpy(w->label, s, len);
    w->label[len] = '\0';
    if (!es_rd_char(&r, ',') || !es_rd_key(&r, "total") || !es_rd_uint(&r, &w->total) ||
        !es_rd_char(&r, ',') || !es_rd_key(&r, "headers") || !es_rd_char(&r, '[')) {
        goto bad;
    }
    if (!es_rd_char(&r, ']')) {
        do {
            if (w->n_headers == cap) {
                cap = cap ? 2 * cap : 8;
                es_want_header *nh = realloc(w->headers, cap * sizeof(*nh));
                if (nh == NULL) {
                    goto bad;
                }
                w->headers = nh;
            }
            es_want_header *h = &w->headers[w->n_headers];
            memset(h, 0, sizeof(*h));
            w->n_headers++;
            if (!es_rd_header(&r, h)) {
                goto bad;
            }
        } while (es_rd_char(&r, ','));
        if (!es_rd_char(&r, ']')) {
            goto bad;
        }
    }
    if (!es_rd_char(&r, ',') || !es_rd_key(&r, "payload") || !es_rd_str(&r, &s, &len) ||
        !es_unhex(s, len, &w->payload, &w->payload_len) || !es_rd_char(&r, '}')) {
        goto bad;
    }
    es_rd_ws(&r);
    if (r.p != r.end) {
        goto bad;
    }
    return 0;
bad:
    es_want_free(w);
    return -1;
}

/* The last header named @name in @w, or NULL. */
static const es_want_header *es_want_last(const es_want *w, const char *name) {
    const es_want_header *found = NULL;
    size_t n = strlen(name);
    for (size_t i = 0; i < w->n_headers; i++) {
        if (w->headers[i].name_len == n && memcmp(w->headers[i].name, name, n) == 0) {
            found = &w->headers[i];
        }
    }
    return found;
}

static inline bool es_view_is(const char *p, size_t n, const es_want_header *h) {
    if (h == NULL) {
        return p == NULL && n == 0;
    }
    return p != NULL && h->type == SG_ES_STRING && n == h->value_len &&
           memcmp(p, h->value, n) == 0;
}

/*
 * Compares a delivered message with its description.  Returns NULL when
 * they are identical, else a static sentence naming the first difference.
 */
static const char *es_want_differs(const es_want *w, const sg_es_message *m) {
    if (m->total_len != w->total) {
        return "total length";
    }
    if (m->payload_len != w->payload_len ||
        (w->payload_len > 0 && memcmp(m->payload, w->payload, w->payload_len) != 0)) {
        return "payload";
    }
    if (m->header_count != w->n_headers) {
        return "header count";
    }
    size_t pos = 0;
    sg_es_header h;
    for (size_t i = 0; i < w->n_headers; i++) {
        const es_want_header *x = &w->headers[i];
        if (sg_es_header_next(m, &pos, &h) != 1) {
            return "header walk ended early";
        }
        if (h.name_len != x->name_len || memcmp(h.name, x->name, x->name_len) != 0) {
            return "header name";
        }
        if ((int)h.type != x->type) {
            return "header type";
        }
        bool bytes =
            x->type == SG_ES_BYTES || x->type == SG_ES_STRING || x->type == SG_ES_UUID;
        if (bytes) {
            if (h.value_len != x->value_len ||
                (x->value_len > 0 && memcmp(h.value, x->value, x->value_len) != 0)) {
                return "header value bytes";
            }
            if (h.integer != 0) {
                return "integer of a byte-valued header";
            }
        } else if (h.integer != x->integer) {
            return "header integer value";
        }
        sg_es_header f;
        if (sg_es_header_find(m, (const char *)x->name, x->name_len, &f) != 1) {
            return "header_find misses a header";
        }
        const es_want_header *last = NULL;
        for (size_t j = 0; j < w->n_headers; j++) {
            if (w->headers[j].name_len == x->name_len &&
                memcmp(w->headers[j].name, x->name, x->name_len) == 0) {
                last = &w->headers[j];
            }
        }
        if ((int)f.type != last->type ||
            (f.value_len > 0 && f.value_len == last->value_len &&
             memcmp(f.value, last->value, f.value_len) != 0) ||
            (f.type != SG_ES_BYTES && f.type != SG_ES_STRING && f.type != SG_ES_UUID &&
             f.integer != last->integer)) {
            return "header_find is not the last of its name";
        }
    }
    if (sg_es_header_next(m, &pos, &h) != 0 || pos != m->headers_len) {
        return "header walk did not end at the block's end";
    }
    if (!es_view_is(m->message_type, m->message_type_len,
                    es_want_last(w, ":message-type")) ||
        !es_view_is(m->event_type, m->event_type_len, es_want_last(w, ":event-type")) ||
        !es_view_is(m->exception_type, m->exception_type_len,
                    es_want_last(w, ":exception-type")) ||
        !es_view_is(m->content_type, m->content_type_len,
                    es_want_last(w, ":content-type"))) {
        return "a reserved-header lookup";
    }
    return NULL;
}

/* The checker: an on_message callback that compares message k with
 * want[k] and records the first difference. */
typedef struct es_check {
    const es_want *want;
    size_t n_want;
    size_t got;
    char why[160];
} es_check;

static inline int es_check_cb(const sg_es_message *m, void *ud) {
    es_check *c = ud;
    if (c->why[0] != '\0') {
        return 0;
    }
    if (c->got >= c->n_want) {
        snprintf(c->why, sizeof(c->why), "message %zu: more messages than described",
                 c->got);
    } else {
        const char *d = es_want_differs(&c->want[c->got], m);
        if (d != NULL) {
            snprintf(c->why, sizeof(c->why), "message %zu (%s): %s differs", c->got,
                     c->want[c->got].label, d);
        }
    }
    c->got++;
    return 0;
}

/*
 * Feeds @data[0..@n) to @dec in pieces cut at the offsets @cuts[0..@n_cuts)
 * (ascending, each in 1..@n-1), each piece in an exact-size heap copy so an
 * over-read is caught by the sanitizers.  Returns 0, or the first negative
 * feed result; -1000 when a feed returned anything else.
 */
static inline ptrdiff_t es_feed_cuts(sg_es_decoder *dec, const unsigned char *data,
                                     size_t n, const size_t *cuts, size_t n_cuts) {
    size_t off = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t stop = i < n_cuts ? cuts[i] : n;
        size_t len = stop - off;
        unsigned char *piece = malloc(len > 0 ? len : 1);
        if (piece == NULL) {
            return -1000;
        }
        if (len > 0) {
            memcpy(piece, data + off, len);
        }
        ptrdiff_t rc = sg_es_feed(dec, piece, len);
        free(piece);
        if (rc < 0) {
            return rc;
        }
        if (rc != (ptrdiff_t)len) {
            return -1000;
        }
        off = stop;
    }
    return 0;
}

/* Feeds @data in pieces of @step bytes (0: one piece). */
static inline ptrdiff_t es_feed_step(sg_es_decoder *dec, const unsigned char *data,
                                     size_t n, size_t step) {
    if (step == 0 || step >= n) {
        return es_feed_cuts(dec, data, n, NULL, 0);
    }
    for (size_t off = 0; off < n; off += step) {
        size_t len = n - off < step ? n - off : step;
        ptrdiff_t rc = es_feed_cuts(dec, data + off, len, NULL, 0);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* Reads a whole file into a fresh heap block of exactly its size (1 byte
 * for an empty file).  Returns NULL on failure. */
static unsigned char *es_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    unsigned char *b = NULL;
    size_t cap = 0;
    size_t n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            unsigned char *nb = realloc(b, cap);
            if (nb == NULL) {
                free(b);
                fclose(f);
                return NULL;
            }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(b);
        return NULL;
    }
    unsigned char *exact = malloc(n > 0 ? n : 1);
    if (exact != NULL && n > 0) {
        memcpy(exact, b, n);
    }
    free(b);
    *len = n;
    return exact;
}

#endif
