/*
 * AWS event-stream decoder tests: the vectors the AWS SDKs publish
 * (tests/data/eventstream/), every header type, the four checks and their
 * order, limits, views versus the buffer, and the parser contract shared
 * with SSE and NDJSON (any split, sticky errors, end verdict, reset).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include <streamguard/framing.h>

#include "es_desc.h"

#ifndef SG_ES_TEST_DATA
#    error "SG_ES_TEST_DATA must name tests/data/eventstream"
#endif

/* ------------------------------------------------------------ encoder */

/* A message under construction: headers appended, then es_finish(). */
typedef struct es_enc {
    unsigned char *b;
    size_t cap;
    size_t hlen; /* header bytes so far, after the 12-byte prelude */
    size_t n;    /* total once finished */
} es_enc;

static void enc_init(es_enc *e, size_t cap) {
    e->b = calloc(1, cap);
    assert_non_null(e->b);
    e->cap = cap;
    e->hlen = 0;
    e->n = 0;
}

static void put_be(unsigned char *p, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        p[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    }
}

static void enc_raw(es_enc *e, const void *p, size_t n) {
    assert_true(12 + e->hlen + n <= e->cap);
    memcpy(e->b + 12 + e->hlen, p, n);
    e->hlen += n;
}

static void enc_name(es_enc *e, const char *name, size_t len, int type) {
    unsigned char l = (unsigned char)len;
    unsigned char t = (unsigned char)type;
    enc_raw(e, &l, 1);
    enc_raw(e, name, len);
    enc_raw(e, &t, 1);
}

static void hdr_int(es_enc *e, const char *name, int type, int64_t v) {
    static const size_t width[10] = {0, 0, 1, 2, 4, 8, 0, 0, 8, 0};
    unsigned char w[8];
    enc_name(e, name, strlen(name), type);
    put_be(w, (uint64_t)v, width[type]);
    enc_raw(e, w, width[type]);
}

static void hdr_bytes(es_enc *e, const char *name, int type, const void *v, size_t n) {
    unsigned char l[2];
    enc_name(e, name, strlen(name), type);
    if (type != SG_ES_UUID) {
        put_be(l, n, 2);
        enc_raw(e, l, 2);
    }
    enc_raw(e, v, n);
}

static void hdr_str(es_enc *e, const char *name, const char *v) {
    hdr_bytes(e, name, SG_ES_STRING, v, strlen(v));
}

/* Writes a prelude for @total and @hlen with its correct CRC. */
static void put_prelude(unsigned char *p, uint32_t total, uint32_t hlen) {
    put_be(p, total, 4);
    put_be(p + 4, hlen, 4);
    put_be(p + 8, crc32(0, p, 8), 4);
}

/* Appends the payload and both CRCs; the message is e->b[0..e->n). */
static void enc_finish(es_enc *e, const void *payload, size_t plen) {
    size_t total = 12 + e->hlen + plen + 4;
    assert_true(total <= e->cap);
    if (plen > 0) {
        memcpy(e->b + 12 + e->hlen, payload, plen);
    }
    put_prelude(e->b, (uint32_t)total, (uint32_t)e->hlen);
    put_be(e->b + total - 4, crc32(0, e->b, (uInt)(total - 4)), 4);
    e->n = total;
}

/* Re-seals a message whose bytes after the prelude were edited. */
static void enc_reseal(es_enc *e) {
    put_be(e->b + e->n - 4, crc32(0, e->b, (uInt)(e->n - 4)), 4);
}

/* A message with one string header and @payload, in a fresh buffer. */
static void enc_one(es_enc *e, const char *name, const char *value, const void *payload,
                    size_t plen) {
    enc_init(e, 64 + strlen(name) + strlen(value) + plen);
    hdr_str(e, name, value);
    enc_finish(e, payload, plen);
}

/* ------------------------------------------------------------ recorder */

typedef struct rec {
    int n;
    int cancel_at; /* return non-zero at this message (1-based); 0 never */
    /* Called inside the callback, where the message's views are valid. */
    void (*inspect)(const sg_es_message *m, void *ctx);
    void *ctx;
    sg_es_message last; /* its views must not be read after the callback */
    unsigned char payload[256];
    size_t payload_len;
    const unsigned char *payload_ptr;
    size_t header_count;
    char message_type[32];
    char event_type[32];
    char exception_type[48];
    char content_type[48];
} rec;

static void copy_view(char *dst, size_t cap, const char *p, size_t n) {
    if (p == NULL) {
        strcpy(dst, "(none)");
        return;
    }
    assert_true(n < cap);
    memcpy(dst, p, n);
    dst[n] = '\0';
}

static int rec_cb(const sg_es_message *m, void *ud) {
    rec *r = ud;
    r->n++;
    r->last = *m;
    if (r->inspect != NULL) {
        r->inspect(m, r->ctx);
    }
    r->payload_ptr = m->payload;
    r->payload_len = m->payload_len;
    if (m->payload_len <= sizeof(r->payload) && m->payload_len > 0) {
        memcpy(r->payload, m->payload, m->payload_len);
    }
    r->header_count = m->header_count;
    copy_view(r->message_type, sizeof(r->message_type), m->message_type,
              m->message_type_len);
    copy_view(r->event_type, sizeof(r->event_type), m->event_type, m->event_type_len);
    copy_view(r->exception_type, sizeof(r->exception_type), m->exception_type,
              m->exception_type_len);
    copy_view(r->content_type, sizeof(r->content_type), m->content_type,
              m->content_type_len);
    return r->cancel_at != 0 && r->n >= r->cancel_at;
}

typedef struct fixture {
    sg_es_decoder d;
    unsigned char *buf;
    size_t buf_len;
    rec r;
} fixture;

/* A config of limits @max_message and @max_headers (0: the default). */
static sg_es_config es_limits(size_t max_message, size_t max_headers) {
    sg_es_config cfg;
    sg_es_config_init(&cfg);
    assert_int_equal(sg_es_config_set_max_message(&cfg, max_message), 0);
    assert_int_equal(sg_es_config_set_max_headers(&cfg, max_headers), 0);
    return cfg;
}

static fixture *fx_new(const sg_es_config *cfg) {
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    sg_es_config c = cfg != NULL ? *cfg : es_limits(0, 0);
    assert_int_equal(sg_es_config_set_on_message(&c, rec_cb), 0);
    f->buf_len = sg_es_buffer_size(&c);
    assert_true(f->buf_len > 0);
    f->buf = malloc(f->buf_len);
    assert_non_null(f->buf);
    assert_int_equal(sg_es_init(&f->d, &c, &f->r, f->buf, f->buf_len), 0);
    return f;
}

static void fx_free(fixture *f) {
    free(f->buf);
    free(f);
}

static ptrdiff_t fx_feed(fixture *f, const void *p, size_t n) {
    /* An exact-size copy, so any over-read is the sanitizers' to catch. */
    unsigned char *c = malloc(n > 0 ? n : 1);
    assert_non_null(c);
    if (n > 0) {
        memcpy(c, p, n);
    }
    ptrdiff_t rc = sg_es_feed(&f->d, c, n);
    free(c);
    return rc;
}

/* Small limits for the loops that decode a message many times: the same
 * code as the defaults, a 4 KiB buffer instead of 16 MiB. */
static const sg_es_config *es_small(void) {
    static sg_es_config cfg;
    static bool made;
    if (!made) {
        cfg = es_limits(4096, 0);
        made = true;
    }
    return &cfg;
}

/* Feeds @m whole, then at every split point, then bytewise, and expects
 * the error @want from each (after exactly @before messages). */
static void expect_error_every_split(const sg_es_config *cfg, const unsigned char *m,
                                     size_t n, ptrdiff_t want, int before) {
    for (size_t cut = 0; cut <= n + 1; cut++) {
        fixture *f = fx_new(cfg);
        ptrdiff_t rc;
        if (cut == 0) {
            rc = es_feed_step(&f->d, m, n, 0);
        } else if (cut == n + 1) {
            rc = es_feed_step(&f->d, m, n, 1);
        } else if (cut < n) {
            rc = es_feed_cuts(&f->d, m, n, &cut, 1);
        } else {
            fx_free(f);
            continue;
        }
        assert_int_equal(rc, want);
        assert_int_equal(f->r.n, before);
        /* Sticky: the same code for any later feed, until reset. */
        assert_int_equal(sg_es_feed(&f->d, m, n), want);
        assert_int_equal(sg_es_feed(&f->d, NULL, 0), want);
        bool clean = true;
        assert_int_equal(sg_es_end(&f->d, &clean), 0);
        assert_false(clean);
        fx_free(f);
    }
}

/* ------------------------------------------------------------ vectors */

static const char *const positive[] = {"all_headers", "empty_message", "int32_header",
                                       "payload_no_headers", "payload_one_str_header"};
static const char *const negative[] = {"corrupted_headers", "corrupted_header_len",
                                       "corrupted_length", "corrupted_payload"};

static unsigned char *read_vector(const char *kind, const char *name, size_t *len) {
    char path[512];
    snprintf(path, sizeof(path), "%s/%s/%s", SG_ES_TEST_DATA, kind, name);
    unsigned char *b = es_read_file(path, len);
    if (b == NULL) {
        fail_msg("cannot read %s", path);
    }
    return b;
}

static void run_positive(const sg_es_config *cfg, const unsigned char *m, size_t n,
                         const es_want *w, const size_t *cuts, size_t n_cuts,
                         size_t step) {
    es_check c = {w, 1, 0, ""};
    size_t blen = sg_es_buffer_size(cfg);
    unsigned char *buf = malloc(blen);
    assert_non_null(buf);
    sg_es_decoder d;
    sg_es_config withcb = cfg != NULL ? *cfg : es_limits(0, 0);
    assert_int_equal(sg_es_config_set_on_message(&withcb, es_check_cb), 0);
    assert_int_equal(sg_es_init(&d, &withcb, &c, buf, blen), 0);
    ptrdiff_t rc =
        step > 0 ? es_feed_step(&d, m, n, step) : es_feed_cuts(&d, m, n, cuts, n_cuts);
    assert_int_equal(rc, 0);
    if (c.why[0] != '\0') {
        fail_msg("%s", c.why);
    }
    assert_int_equal(c.got, 1);
    bool clean = false;
    assert_int_equal(sg_es_end(&d, &clean), 0);
    assert_true(clean);
    sg_es_stats st = SG_ES_STATS_INIT;
    assert_int_equal(sg_es_get_stats(&d, &st), 0);
    assert_int_equal(st.bytes, n);
    assert_int_equal(st.messages, 1);
    free(buf);
}

static void positive_vectors_decode_whole_split_everywhere_and_bytewise(void **state) {
    (void)state;
    for (size_t v = 0; v < sizeof(positive) / sizeof(positive[0]); v++) {
        size_t n;
        size_t dn;
        unsigned char *m = read_vector("encoded/positive", positive[v], &n);
        char name[128];
        snprintf(name, sizeof(name), "%s.json", positive[v]);
        unsigned char *desc = read_vector("decoded/positive", name, &dn);
        es_want w;
        assert_int_equal(es_want_parse((const char *)desc, dn, &w), 0);
        assert_string_equal(w.label, positive[v]);
        assert_int_equal(w.total, n);
        /* The default limits, and a small buffer for the many splits. */
        run_positive(NULL, m, n, &w, NULL, 0, 0);
        run_positive(NULL, m, n, &w, NULL, 0, 1);
        run_positive(es_small(), m, n, &w, NULL, 0, 0);
        for (size_t cut = 1; cut < n; cut++) {
            run_positive(es_small(), m, n, &w, &cut, 1, 0);
        }
        /* Every pair of cuts, too, for the small vectors: a prelude or a
         * header cut twice. */
        if (n <= 64) {
            for (size_t a = 1; a < n; a++) {
                for (size_t b = a + 1; b < n; b++) {
                    size_t cuts[2] = {a, b};
                    run_positive(es_small(), m, n, &w, cuts, 2, 0);
                }
            }
        }
        es_want_free(&w);
        free(desc);
        free(m);
    }
}

static void negative_vectors_fail_with_their_code_however_split(void **state) {
    (void)state;
    for (size_t v = 0; v < sizeof(negative) / sizeof(negative[0]); v++) {
        size_t n;
        size_t en;
        unsigned char *m = read_vector("encoded/negative", negative[v], &n);
        unsigned char *e = read_vector("decoded/negative", negative[v], &en);
        char want[32];
        assert_true(en > 1 && en < sizeof(want));
        memcpy(want, e, en);
        want[en - 1] = '\0'; /* the trailing LF */
        fixture *f = fx_new(NULL);
        ptrdiff_t rc = fx_feed(f, m, n);
        assert_true(rc < 0);
        assert_string_equal(sg_errname((int)rc), want);
        assert_int_equal(f->r.n, 0);
        fx_free(f);
        expect_error_every_split(es_small(), m, n, rc, 0);
        free(e);
        free(m);
    }
}

/* ------------------------------------------------------------ views */

static void a_message_in_one_feed_is_a_view_into_the_callers_bytes(void **state) {
    (void)state;
    es_enc e;
    enc_init(&e, 256);
    hdr_str(&e, ":message-type", "event");
    hdr_str(&e, ":event-type", "contentBlockDelta");
    hdr_str(&e, ":content-type", "application/json");
    const char *payload = "{\"delta\":{\"text\":\"Hi\"},\"contentBlockIndex\":0}";
    enc_finish(&e, payload, strlen(payload));
    fixture *f = fx_new(NULL);
    assert_int_equal(sg_es_feed(&f->d, e.b, e.n), (ptrdiff_t)e.n);
    assert_int_equal(f->r.n, 1);
    assert_ptr_equal(f->r.payload_ptr, e.b + e.n - 4 - strlen(payload));
    assert_ptr_equal(f->r.last.headers, e.b + 12);
    assert_int_equal(f->r.last.headers_len, e.hlen);
    assert_int_equal(f->r.last.total_len, e.n);
    assert_int_equal(f->r.last.message_crc, crc32(0, e.b, (uInt)(e.n - 4)));
    assert_memory_equal(f->r.payload, payload, strlen(payload));
    assert_string_equal(f->r.message_type, "event");
    assert_string_equal(f->r.event_type, "contentBlockDelta");
    assert_string_equal(f->r.content_type, "application/json");
    assert_string_equal(f->r.exception_type, "(none)");
    assert_int_equal(f->r.header_count, 3);
    sg_es_stats st = SG_ES_STATS_INIT;
    assert_int_equal(sg_es_get_stats(&f->d, &st), 0);
    assert_int_equal(st.copied, 0);
    assert_int_equal(st.messages, 1);
    fx_free(f);
    free(e.b);
}

static void a_message_split_across_feeds_is_copied_once_into_the_buffer(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, ":message-type", "event", "abcdefgh", 8);
    /* A whole message, then one cut in its headers, in one feed each. */
    unsigned char two[512];
    memcpy(two, e.b, e.n);
    memcpy(two + e.n, e.b, e.n);
    fixture *f = fx_new(NULL);
    size_t first = e.n + 20;
    assert_int_equal(sg_es_feed(&f->d, two, first), (ptrdiff_t)first);
    assert_int_equal(f->r.n, 1);
    assert_int_equal(sg_es_feed(&f->d, two + first, 2 * e.n - first),
                     (ptrdiff_t)(2 * e.n - first));
    assert_int_equal(f->r.n, 2);
    assert_ptr_equal(f->r.last.headers, f->buf);
    assert_memory_equal(f->r.payload, "abcdefgh", 8);
    sg_es_stats st = SG_ES_STATS_INIT;
    assert_int_equal(sg_es_get_stats(&f->d, &st), 0);
    assert_int_equal(st.copied, e.n - 12);
    assert_int_equal(st.bytes, 2 * e.n);
    fx_free(f);
    free(e.b);
}

static void many_messages_in_one_feed_are_all_views(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, ":event-type", "chunk", "x", 1);
    size_t n = 100 * e.n;
    unsigned char *all = malloc(n);
    assert_non_null(all);
    for (int i = 0; i < 100; i++) {
        memcpy(all + (size_t)i * e.n, e.b, e.n);
    }
    fixture *f = fx_new(NULL);
    assert_int_equal(sg_es_feed(&f->d, all, n), (ptrdiff_t)n);
    assert_int_equal(f->r.n, 100);
    assert_ptr_equal(f->r.payload_ptr, all + n - 5);
    sg_es_stats st = SG_ES_STATS_INIT;
    assert_int_equal(sg_es_get_stats(&f->d, &st), 0);
    assert_int_equal(st.copied, 0);
    assert_int_equal(st.messages, 100);
    bool clean = false;
    assert_int_equal(sg_es_end(&f->d, &clean), 0);
    assert_true(clean);
    fx_free(f);
    free(all);
    free(e.b);
}

static void a_large_message_in_many_reads_is_copied_once(void **state) {
    (void)state;
    size_t plen = (size_t)1 << 20;
    unsigned char *payload = malloc(plen);
    assert_non_null(payload);
    for (size_t i = 0; i < plen; i++) {
        payload[i] = (unsigned char)(i * 31 + 7);
    }
    es_enc e;
    enc_init(&e, plen + 256);
    hdr_str(&e, ":message-type", "event");
    enc_finish(&e, payload, plen);
    fixture *f = fx_new(NULL);
    assert_int_equal(es_feed_step(&f->d, e.b, e.n, 4096), 0);
    assert_int_equal(f->r.n, 1);
    assert_int_equal(f->r.payload_len, plen);
    assert_ptr_equal(f->r.payload_ptr, f->buf + e.hlen);
    sg_es_stats st = SG_ES_STATS_INIT;
    assert_int_equal(sg_es_get_stats(&f->d, &st), 0);
    assert_int_equal(st.copied, e.n - 12);
    fx_free(f);
    free(e.b);
    free(payload);
}

/* ------------------------------------------------------------ headers */

static const unsigned char uuid16[16] = {0xde, 0xad, 0xbe, 0xef, 0, 1, 2,  3,
                                         4,    5,    6,    7,    8, 9, 10, 0xff};

static const struct {
    const char *name; /* NULL: the 255-byte name */
    int type;
    int64_t integer;
    size_t value_len;
} every_type[] = {
    {"t", SG_ES_BOOL_TRUE, 1, 0},
    {"f", SG_ES_BOOL_FALSE, 0, 0},
    {"b-", SG_ES_BYTE, -128, 1},
    {"b+", SG_ES_BYTE, 127, 1},
    {"s-", SG_ES_SHORT, -32768, 2},
    {"s+", SG_ES_SHORT, 32767, 2},
    {"i-", SG_ES_INTEGER, INT32_MIN, 4},
    {"i+", SG_ES_INTEGER, INT32_MAX, 4},
    {"l-", SG_ES_LONG, INT64_MIN, 8},
    {"l+", SG_ES_LONG, INT64_MAX, 8},
    {"ts", SG_ES_TIMESTAMP, -1, 8},
    {"empty", SG_ES_BYTES, 0, 0},
    {"big", SG_ES_BYTES, 0, 65535},
    {"str", SG_ES_STRING, 0, 5},
    {"uuid", SG_ES_UUID, 0, 16},
    {NULL, SG_ES_BOOL_TRUE, 1, 0},
    {"", SG_ES_STRING, 0, 0},
};

typedef struct every_ctx {
    const char *name255;
    const unsigned char *big;
    int inspected;
} every_ctx;

static void inspect_every_type(const sg_es_message *m, void *ctx) {
    every_ctx *c = ctx;
    size_t n = sizeof(every_type) / sizeof(every_type[0]);
    assert_int_equal(m->header_count, n);
    size_t pos = 0;
    sg_es_header h;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sg_es_header_next(m, &pos, &h), 1);
        const char *wn = every_type[i].name != NULL ? every_type[i].name : c->name255;
        assert_int_equal(h.name_len, strlen(wn));
        assert_memory_equal(h.name, wn, h.name_len);
        assert_int_equal(h.type, every_type[i].type);
        assert_true(h.integer == every_type[i].integer);
        assert_int_equal(h.value_len, every_type[i].value_len);
    }
    assert_int_equal(sg_es_header_next(m, &pos, &h), 0);
    assert_int_equal(pos, m->headers_len);
    assert_int_equal(sg_es_header_find(m, "uuid", 4, &h), 1);
    assert_memory_equal(h.value, uuid16, 16);
    assert_int_equal(sg_es_header_find(m, "big", 3, &h), 1);
    assert_memory_equal(h.value, c->big, 65535);
    assert_int_equal(sg_es_header_find(m, "str", 3, &h), 1);
    assert_memory_equal(h.value, "caf\xc3\xa9", 5);
    assert_int_equal(sg_es_header_find(m, "s+", 2, &h), 1);
    assert_memory_equal(h.value, "\x7f\xff", 2);
    assert_int_equal(sg_es_header_find(m, "absent", 6, &h), 0);
    assert_int_equal(sg_es_header_find(m, "", 0, &h), 1);
    assert_int_equal(h.type, SG_ES_STRING);
    c->inspected++;
}

static void every_header_type_decodes_with_its_value(void **state) {
    (void)state;
    char name255[256];
    memset(name255, 'n', 255);
    name255[255] = '\0';
    unsigned char *big = malloc(65535);
    assert_non_null(big);
    memset(big, 0xa5, 65535);
    es_enc e;
    enc_init(&e, 70000 + 512);
    hdr_int(&e, "t", SG_ES_BOOL_TRUE, 0);
    hdr_int(&e, "f", SG_ES_BOOL_FALSE, 0);
    hdr_int(&e, "b-", SG_ES_BYTE, -128);
    hdr_int(&e, "b+", SG_ES_BYTE, 127);
    hdr_int(&e, "s-", SG_ES_SHORT, -32768);
    hdr_int(&e, "s+", SG_ES_SHORT, 32767);
    hdr_int(&e, "i-", SG_ES_INTEGER, INT32_MIN);
    hdr_int(&e, "i+", SG_ES_INTEGER, INT32_MAX);
    hdr_int(&e, "l-", SG_ES_LONG, INT64_MIN);
    hdr_int(&e, "l+", SG_ES_LONG, INT64_MAX);
    hdr_int(&e, "ts", SG_ES_TIMESTAMP, -1);
    hdr_bytes(&e, "empty", SG_ES_BYTES, "", 0);
    hdr_bytes(&e, "big", SG_ES_BYTES, big, 65535);
    hdr_str(&e, "str", "caf\xc3\xa9");
    hdr_bytes(&e, "uuid", SG_ES_UUID, uuid16, 16);
    enc_name(&e, name255, 255, SG_ES_BOOL_TRUE);
    enc_name(&e, "", 0, SG_ES_STRING); /* an empty name is allowed */
    enc_raw(&e, "\0\0", 2);
    enc_finish(&e, NULL, 0);

    /* In place (one feed), from the buffer (a byte at a time), and split
     * inside the 64 KiB value. */
    every_ctx c = {name255, big, 0};
    for (size_t step = 0; step <= 2; step++) {
        fixture *f = fx_new(NULL);
        f->r.inspect = inspect_every_type;
        f->r.ctx = &c;
        size_t s = step == 0 ? 0 : step == 1 ? 1 : 4096;
        assert_int_equal(es_feed_step(&f->d, e.b, e.n, s), 0);
        assert_int_equal(f->r.n, 1);
        fx_free(f);
    }
    assert_int_equal(c.inspected, 3);
    free(e.b);
    free(big);
}

static void inspect_last_x(const sg_es_message *m, void *ctx) {
    sg_es_header h;
    assert_int_equal(sg_es_header_find(m, "x", 1, &h), 1);
    *(int64_t *)ctx = h.integer;
}

static void reserved_headers_are_looked_up_and_the_last_of_a_name_counts(void **state) {
    (void)state;
    es_enc e;
    enc_init(&e, 512);
    hdr_str(&e, ":message-type", "event");
    hdr_str(&e, ":message-type", "exception");
    hdr_str(&e, ":exception-type", "throttlingException");
    hdr_str(&e, ":content-type", "application/json");
    hdr_int(&e, "x", SG_ES_INTEGER, 1);
    hdr_int(&e, "x", SG_ES_INTEGER, 2);
    enc_finish(&e, "{\"message\":\"slow down\"}", 23);
    fixture *f = fx_new(NULL);
    int64_t x = 0;
    f->r.inspect = inspect_last_x;
    f->r.ctx = &x;
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    assert_int_equal(f->r.n, 1);
    assert_string_equal(f->r.message_type, "exception");
    assert_string_equal(f->r.exception_type, "throttlingException");
    assert_string_equal(f->r.event_type, "(none)");
    assert_string_equal(f->r.content_type, "application/json");
    assert_int_equal(x, 2);
    fx_free(f);
    free(e.b);
}

static void a_reserved_header_that_is_not_a_string_is_malformed(void **state) {
    (void)state;
    static const char *const names[] = {":message-type", ":event-type", ":exception-type",
                                        ":content-type"};
    for (size_t i = 0; i < 4; i++) {
        es_enc e;
        enc_init(&e, 128);
        hdr_int(&e, names[i], SG_ES_INTEGER, 7);
        enc_finish(&e, "p", 1);
        expect_error_every_split(es_small(), e.b, e.n, SG_EHEADER, 0);
        free(e.b);
    }
    /* A near-miss of a reserved name is an ordinary header. */
    es_enc e;
    enc_init(&e, 128);
    hdr_int(&e, ":message-types", SG_ES_INTEGER, 7);
    enc_finish(&e, "p", 1);
    fixture *f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    assert_string_equal(f->r.message_type, "(none)");
    fx_free(f);
    free(e.b);
}

static void an_unknown_header_type_is_malformed(void **state) {
    (void)state;
    for (int t = 10; t <= 255; t += 245) {
        es_enc e;
        enc_init(&e, 128);
        hdr_str(&e, "ok", "v");
        enc_name(&e, "bad", 3, t);
        enc_finish(&e, "payload", 7);
        expect_error_every_split(es_small(), e.b, e.n, SG_EHEADER, 0);
        free(e.b);
    }
}

static void a_header_that_runs_past_its_block_is_malformed(void **state) {
    (void)state;
    /* Each header block is cut short inside one field of its last header;
     * the payload follows, the lengths and both CRCs are right. */
    static const struct {
        const char *what;
        unsigned char bytes[8];
        size_t n;
    } cuts[] = {
        {"name length past the name", {5, 'a', 'b'}, 3},
        {"name without its type", {2, 'a', 'b'}, 3},
        {"short without its value", {1, 'a', SG_ES_SHORT, 0}, 4},
        {"long cut short", {1, 'a', SG_ES_LONG, 0, 0, 0, 0}, 7},
        {"string length cut", {1, 'a', SG_ES_STRING, 0}, 4},
        {"string past the block", {1, 'a', SG_ES_STRING, 0, 9, 'x'}, 6},
        {"bytes past the block", {1, 'a', SG_ES_BYTES, 0, 2, 'x'}, 6},
        {"uuid cut short", {1, 'a', SG_ES_UUID, 1, 2, 3}, 6},
        {"timestamp cut short", {1, 'a', SG_ES_TIMESTAMP, 1}, 4},
    };
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        es_enc e;
        enc_init(&e, 128);
        hdr_str(&e, ":message-type", "event");
        enc_raw(&e, cuts[i].bytes, cuts[i].n);
        enc_finish(&e, "{\"p\":1}", 7);
        print_message("case: %s\n", cuts[i].what);
        expect_error_every_split(es_small(), e.b, e.n, SG_EHEADER, 0);
        free(e.b);
    }
}

/* ------------------------------------------------------------ lengths */

/* A message of @total bytes whose prelude says @total and @hlen, with
 * correct CRCs, for the length checks. */
static unsigned char *raw_message(uint32_t total, uint32_t hlen, size_t alloc) {
    unsigned char *m = calloc(1, alloc);
    assert_non_null(m);
    put_prelude(m, total, hlen);
    if (alloc >= 16 && total == alloc) {
        put_be(m + alloc - 4, crc32(0, m, (uInt)(alloc - 4)), 4);
    }
    return m;
}

static void a_total_length_under_16_is_out_of_range(void **state) {
    (void)state;
    for (uint32_t total = 0; total < 16; total++) {
        unsigned char *m = raw_message(total, 0, 16);
        expect_error_every_split(es_small(), m, 16, SG_EMESSAGE_LENGTH, 0);
        /* Seen at the prelude, before any more bytes arrive. */
        fixture *f = fx_new(NULL);
        assert_int_equal(fx_feed(f, m, 12), SG_EMESSAGE_LENGTH);
        fx_free(f);
        free(m);
    }
}

static void a_total_length_over_max_message_is_out_of_range(void **state) {
    (void)state;
    /* The default (AWS's 16 MiB) and a caller's smaller limit. */
    unsigned char *m = raw_message((uint32_t)SG_ES_MAX_MESSAGE + 1, 0, 12);
    fixture *f = fx_new(NULL);
    assert_int_equal(fx_feed(f, m, 12), SG_EMESSAGE_LENGTH);
    fx_free(f);
    free(m);
    m = raw_message(UINT32_MAX, 0, 12);
    f = fx_new(NULL);
    assert_int_equal(fx_feed(f, m, 12), SG_EMESSAGE_LENGTH);
    fx_free(f);
    free(m);

    sg_es_config cfg = es_limits(64, 0);
    m = raw_message(65, 0, 65);
    expect_error_every_split(&cfg, m, 65, SG_EMESSAGE_LENGTH, 0);
    free(m);
    /* Exactly the limit is accepted. */
    m = raw_message(64, 0, 64);
    f = fx_new(&cfg);
    assert_int_equal(es_feed_step(&f->d, m, 64, 1), 0);
    assert_int_equal(f->r.n, 1);
    assert_int_equal(f->r.payload_len, 48);
    fx_free(f);
    free(m);
}

static void a_headers_length_over_its_limit_or_its_message_is_out_of_range(void **state) {
    (void)state;
    /* More header bytes than the message leaves. */
    unsigned char *m = raw_message(32, 17, 32);
    expect_error_every_split(es_small(), m, 32, SG_EMESSAGE_LENGTH, 0);
    free(m);
    /* All of what it leaves is fine (an empty payload)... */
    es_enc e;
    enc_one(&e, "k", "v", NULL, 0);
    fixture *f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    assert_int_equal(f->r.n, 1);
    assert_int_equal(f->r.payload_len, 0);
    fx_free(f);
    free(e.b);
    /* ...and over the caller's max_headers is not, nor over AWS's 128 KiB. */
    sg_es_config cfg = es_limits(0, 16);
    m = raw_message(64, 17, 64);
    expect_error_every_split(&cfg, m, 64, SG_EMESSAGE_LENGTH, 0);
    free(m);
    m = raw_message(200000, (uint32_t)SG_ES_MAX_HEADERS + 1, 12);
    f = fx_new(NULL);
    assert_int_equal(fx_feed(f, m, 12), SG_EMESSAGE_LENGTH);
    fx_free(f);
    free(m);
}

/* ------------------------------------------------------------ CRCs */

static void a_bad_prelude_crc_is_seen_before_the_rest_arrives(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, ":message-type", "event", "x", 1);
    for (size_t byte = 0; byte < 12; byte++) {
        e.b[byte] ^= 0x01;
        fixture *f = fx_new(NULL);
        assert_int_equal(fx_feed(f, e.b, 12), SG_EPRELUDE_CRC);
        fx_free(f);
        e.b[byte] ^= 0x01;
    }
    fixture *f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    fx_free(f);
    free(e.b);
}

static void a_bad_message_crc_is_an_error_wherever_the_flip_is(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, ":message-type", "event", "payload", 7);
    for (size_t byte = 12; byte < e.n; byte++) {
        e.b[byte] ^= 0x80;
        fixture *f = fx_new(NULL);
        assert_int_equal(es_feed_step(&f->d, e.b, e.n, 5), SG_EMESSAGE_CRC);
        assert_int_equal(f->r.n, 0);
        fx_free(f);
        e.b[byte] ^= 0x80;
    }
    free(e.b);
}

static void the_message_crc_is_checked_before_the_headers(void **state) {
    (void)state;
    es_enc e;
    enc_init(&e, 128);
    enc_name(&e, "bad", 3, 42);
    enc_finish(&e, "x", 1);
    fixture *f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), SG_EHEADER);
    fx_free(f);
    e.b[e.n - 1] ^= 1;
    f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), SG_EMESSAGE_CRC);
    fx_free(f);
    /* A fixed block and a resealed CRC decode again. */
    e.b[12 + 4] = SG_ES_BOOL_TRUE;
    enc_reseal(&e);
    f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    assert_int_equal(f->r.n, 1);
    fx_free(f);
    free(e.b);
}

/* ------------------------------------------------------------ contract */

static void errors_are_sticky_until_reset(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, ":event-type", "messageStop", "{}", 2);
    fixture *f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    unsigned char bad[16] = {0};
    put_prelude(bad, 0, 0);
    assert_int_equal(fx_feed(f, bad, 16), SG_EMESSAGE_LENGTH);
    assert_int_equal(fx_feed(f, e.b, e.n), SG_EMESSAGE_LENGTH);
    sg_es_stats st = SG_ES_STATS_INIT;
    assert_int_equal(sg_es_get_stats(&f->d, &st), 0);
    assert_int_equal(st.messages, 1);
    assert_int_equal(sg_es_reset(&f->d), 0);
    assert_int_equal(sg_es_get_stats(&f->d, &st), 0);
    assert_int_equal(st.messages, 0);
    assert_int_equal(st.bytes, 0);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    assert_int_equal(f->r.n, 2);
    /* A reset also drops a partial message. */
    assert_int_equal(fx_feed(f, e.b, 7), 7);
    assert_int_equal(sg_es_reset(&f->d), 0);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    assert_int_equal(f->r.n, 3);
    fx_free(f);
    free(e.b);
}

static void the_end_is_clean_only_between_messages(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, ":event-type", "metadata", "{}", 2);
    for (size_t cut = 0; cut <= e.n; cut++) {
        fixture *f = fx_new(NULL);
        assert_int_equal(fx_feed(f, e.b, cut), (ptrdiff_t)cut);
        bool clean = cut != 0 && cut != e.n;
        assert_int_equal(sg_es_end(&f->d, &clean), 0);
        assert_int_equal(clean, cut == 0 || cut == e.n);
        /* The same answer again, and no more feeds. */
        bool again = !clean;
        assert_int_equal(sg_es_end(&f->d, &again), 0);
        assert_int_equal(again, clean);
        assert_int_equal(fx_feed(f, e.b, e.n), SG_EDONE);
        assert_int_equal(f->r.n, cut == e.n ? 1 : 0);
        fx_free(f);
    }
    free(e.b);
}

static void a_callback_that_returns_non_zero_cancels(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, ":event-type", "contentBlockDelta", "{}", 2);
    unsigned char three[512];
    for (int i = 0; i < 3; i++) {
        memcpy(three + (size_t)i * e.n, e.b, e.n);
    }
    fixture *f = fx_new(NULL);
    f->r.cancel_at = 2;
    assert_int_equal(fx_feed(f, three, 3 * e.n), SG_ECANCELED);
    assert_int_equal(f->r.n, 2);
    assert_int_equal(fx_feed(f, e.b, e.n), SG_ECANCELED);
    fx_free(f);
    free(e.b);
}

static void init_checks_its_arguments_and_limits(void **state) {
    (void)state;
    sg_es_decoder d;
    unsigned char small[64];
    assert_int_equal(sg_es_buffer_size(NULL), SG_ES_MAX_MESSAGE - 12);
    sg_es_config cfg = es_limits(16, 0);
    assert_int_equal(sg_es_buffer_size(&cfg), 4);
    /* a limit out of range is refused where it is set: the config keeps 16 */
    assert_int_equal(sg_es_config_set_max_message(&cfg, 15), SG_ERANGE);
    assert_int_equal(sg_es_config_set_max_message(&cfg, SG_ES_MAX_MESSAGE + 1),
                     SG_ERANGE);
    assert_int_equal(sg_es_config_set_max_headers(&cfg, SG_ES_MAX_HEADERS + 1),
                     SG_ERANGE);
    assert_int_equal(sg_es_config_set_max_message(NULL, 64), SG_EINVAL);
    assert_int_equal(sg_es_buffer_size(&cfg), 4);
    cfg = es_limits(64, 0);
    assert_int_equal(sg_es_init(NULL, &cfg, NULL, small, sizeof(small)), SG_EINVAL);
    assert_int_equal(sg_es_init(&d, &cfg, NULL, NULL, sizeof(small)), SG_EINVAL);
    assert_int_equal(sg_es_init(&d, &cfg, NULL, small, 51), SG_ENOBUFS);
    assert_int_equal(sg_es_init(&d, &cfg, NULL, small, 52), 0);
    assert_int_equal(sg_es_feed(&d, NULL, 1), SG_EINVAL);
    assert_int_equal(sg_es_feed(&d, small, (size_t)PTRDIFF_MAX + 1), SG_EINVAL);
    assert_int_equal(sg_es_feed(&d, NULL, 0), 0);
    assert_int_equal(sg_es_end(&d, NULL), SG_EINVAL);
    assert_int_equal(sg_es_get_stats(&d, NULL), SG_EINVAL);

    /* Uninitialised (zeroed) and NULL decoders are refused everywhere. */
    sg_es_decoder z;
    memset(&z, 0, sizeof(z));
    bool clean;
    sg_es_stats st = SG_ES_STATS_INIT;
    assert_int_equal(sg_es_feed(&z, small, 1), SG_EINVAL);
    assert_int_equal(sg_es_feed(NULL, small, 1), SG_EINVAL);
    assert_int_equal(sg_es_end(&z, &clean), SG_EINVAL);
    assert_int_equal(sg_es_reset(&z), SG_EINVAL);
    assert_int_equal(sg_es_reset(NULL), SG_EINVAL);
    assert_int_equal(sg_es_get_stats(&z, &st), SG_EINVAL);

    /* Without a callback messages are still checked and counted. */
    es_enc e;
    enc_init(&e, 64);
    enc_finish(&e, "abc", 3);
    assert_int_equal(sg_es_feed(&d, e.b, e.n), (ptrdiff_t)e.n);
    assert_int_equal(sg_es_get_stats(&d, &st), 0);
    assert_int_equal(st.messages, 1);
    free(e.b);
}

static void the_header_walk_checks_its_arguments(void **state) {
    (void)state;
    es_enc e;
    enc_one(&e, "k", "value", NULL, 0);
    fixture *f = fx_new(NULL);
    assert_int_equal(fx_feed(f, e.b, e.n), (ptrdiff_t)e.n);
    fx_free(f);
    /* A message made by hand over e.b's block, as a caller could. */
    sg_es_message m;
    memset(&m, 0, sizeof(m));
    m.headers = e.b + 12;
    m.headers_len = e.hlen;
    sg_es_header h;
    size_t pos = 0;
    assert_int_equal(sg_es_header_next(NULL, &pos, &h), SG_EINVAL);
    assert_int_equal(sg_es_header_next(&m, NULL, &h), SG_EINVAL);
    assert_int_equal(sg_es_header_next(&m, &pos, NULL), SG_EINVAL);
    pos = e.hlen + 1;
    assert_int_equal(sg_es_header_next(&m, &pos, &h), SG_EINVAL);
    pos = 1; /* inside the name: "k" read as a name length of 107 */
    assert_int_equal(sg_es_header_next(&m, &pos, &h), SG_EHEADER);
    assert_int_equal(sg_es_header_find(NULL, "k", 1, &h), SG_EINVAL);
    assert_int_equal(sg_es_header_find(&m, NULL, 1, &h), SG_EINVAL);
    assert_int_equal(sg_es_header_find(&m, "k", 1, NULL), SG_EINVAL);
    assert_int_equal(sg_es_header_find(&m, "k", 1, &h), 1);
    assert_memory_equal(h.value, "value", 5);
    m.headers_len = e.hlen - 1;
    assert_int_equal(sg_es_header_find(&m, "k", 1, &h), SG_EHEADER);
    free(e.b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(positive_vectors_decode_whole_split_everywhere_and_bytewise),
        cmocka_unit_test(negative_vectors_fail_with_their_code_however_split),
        cmocka_unit_test(a_message_in_one_feed_is_a_view_into_the_callers_bytes),
        cmocka_unit_test(a_message_split_across_feeds_is_copied_once_into_the_buffer),
        cmocka_unit_test(many_messages_in_one_feed_are_all_views),
        cmocka_unit_test(a_large_message_in_many_reads_is_copied_once),
        cmocka_unit_test(every_header_type_decodes_with_its_value),
        cmocka_unit_test(reserved_headers_are_looked_up_and_the_last_of_a_name_counts),
        cmocka_unit_test(a_reserved_header_that_is_not_a_string_is_malformed),
        cmocka_unit_test(an_unknown_header_type_is_malformed),
        cmocka_unit_test(a_header_that_runs_past_its_block_is_malformed),
        cmocka_unit_test(a_total_length_under_16_is_out_of_range),
        cmocka_unit_test(a_total_length_over_max_message_is_out_of_range),
        cmocka_unit_test(a_headers_length_over_its_limit_or_its_message_is_out_of_range),
        cmocka_unit_test(a_bad_prelude_crc_is_seen_before_the_rest_arrives),
        cmocka_unit_test(a_bad_message_crc_is_an_error_wherever_the_flip_is),
        cmocka_unit_test(the_message_crc_is_checked_before_the_headers),
        cmocka_unit_test(errors_are_sticky_until_reset),
        cmocka_unit_test(the_end_is_clean_only_between_messages),
        cmocka_unit_test(a_callback_that_returns_non_zero_cancels),
        cmocka_unit_test(init_checks_its_arguments_and_limits),
        cmocka_unit_test(the_header_walk_checks_its_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
