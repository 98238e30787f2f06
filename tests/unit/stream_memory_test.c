/*
 * A stream whose buffers grow as used (sg_stream_init_mem): the same items
 * and errors as one with a lent buffer, however the reads fall; nothing
 * held between items; never more than the limits; no memory is a clear
 * error.  The allocator here counts what is live.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include <streamguard/streamguard.h>

#include "../../fuzz/count_mem.h"

/* ------------------------------------------- items, as one string each */

typedef struct seen {
    char text[16384];
    size_t len;
} seen;

static int on_item(const sg_item *it, void *ud) {
    seen *s = ud;
    int n = snprintf(s->text + s->len, sizeof(s->text) - s->len, "[%.*s|%.*s|%.*s|%u]",
                     (int)it->event_len, it->event, (int)it->data_len, it->data,
                     (int)it->id_len, it->id, (unsigned)it->kind);
    assert_true(n > 0 && (size_t)n < sizeof(s->text) - s->len);
    s->len += (size_t)n;
    return 0;
}

typedef struct run {
    seen items;
    int last_feed; /* the first negative feed, or the last return */
    sg_outcome outcome;
} run;

static sg_guard_config no_clocks(void) {
    sg_guard_config g;
    sg_guard_config_init(&g);
    return g;
}

/* Feeds @in in reads cut at @cuts (ascending offsets), then ends the body;
 * a growing stream (with @c) or one with a lent buffer (@c NULL). */
static void run_stream(const sg_stream_config *cfg, count_mem *c, const char *in,
                       size_t len, const size_t *cuts, size_t ncuts, run *r) {
    static char lent[8 << 20];
    memset(r, 0, sizeof(*r));
    sg_stream s;
    sg_mem m;
    sg_mem_init(&m, count_mem_resize, c);
    if (c != NULL) {
        assert_int_equal(sg_stream_init_mem(&s, cfg, on_item, &r->items, &m), 0);
        assert_int_equal(c->live, 0); /* nothing reserved */
    } else {
        size_t need = sg_stream_buffer_size(cfg);
        assert_true(need > 0 && need <= sizeof(lent));
        assert_int_equal(sg_stream_init(&s, cfg, on_item, &r->items, lent, need), 0);
    }
    sg_guard_config g = no_clocks();
    assert_int_equal(sg_stream_begin(&s, &g, NULL, 1, 0), 0);
    size_t at = 0;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts[k] : len;
        int rv = sg_stream_feed(&s, in + at, end - at, 1);
        r->last_feed = rv;
        at = end;
        if (rv != 0) {
            break;
        }
    }
    sg_guard_result res;
    assert_int_equal(sg_stream_end(&s, 2, SG_OUTCOME_OK, &res), 0);
    r->outcome = res.outcome;
    if (c != NULL) {
        assert_int_equal(c->live, 0); /* nothing of the body past its end */
    }
    sg_stream_release(&s);
}

/* Every split of @in into two reads and into reads of one byte: the
 * growing stream gives what the lent buffer gives. */
static void same_as_lent(const sg_stream_config *cfg, const char *in, size_t len,
                         size_t *peak) {
    run want;
    run got;
    count_mem c = {0, 0, 0};
    run_stream(cfg, NULL, in, len, NULL, 0, &want);
    for (size_t cut = 0; cut <= len; cut++) {
        run_stream(cfg, &c, in, len, &cut, 1, &got);
        assert_int_equal(got.outcome, want.outcome);
        assert_int_equal(got.last_feed, want.last_feed);
        assert_int_equal(got.items.len, want.items.len);
        assert_memory_equal(got.items.text, want.items.text, want.items.len);
    }
    size_t *ones = malloc(len * sizeof(*ones));
    assert_non_null(ones);
    for (size_t i = 0; i < len; i++) {
        ones[i] = i + 1;
    }
    run_stream(cfg, &c, in, len, ones, len > 0 ? len - 1 : 0, &got);
    free(ones);
    assert_int_equal(got.outcome, want.outcome);
    assert_int_equal(got.items.len, want.items.len);
    assert_memory_equal(got.items.text, want.items.text, want.items.len);
    *peak = c.peak;
}

/* ---------------------------------------------------------------- tests */

static const char SSE_MIXED[] =
    "\xEF\xBB\xBF: hello\r\n"
    "id: 7\r\n"
    "event: first\r\n"
    "data: a\r\n"
    "data: b\r\n"
    "\r\n"
    "retry: 10\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"
    "unknown: field\n"
    "id\n"
    "data:\n\n"
    "event: e2\rdata: c\r\r"
    "id: 8\n"
    "data: last\n\n";

static void sse_items_match_the_lent_buffer_at_every_split(void **state) {
    (void)state;
    sg_stream_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    size_t peak = 0;
    same_as_lent(&cfg, SSE_MIXED, sizeof(SSE_MIXED) - 1, &peak);
    print_message("SSE, plain: peak %zu bytes held\n", peak);
    assert_true(peak <= 4096);
}

static const char OPENAI[] =
    "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
    ": keepalive\n\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n"
    "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
    "data: [DONE]\n\n";

static void profile_stream_holds_little_and_nothing_between_items(void **state) {
    (void)state;
    sg_stream_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(sg_profile_framing("openai", &cfg), 0);
    size_t peak = 0;
    same_as_lent(&cfg, OPENAI, sizeof(OPENAI) - 1, &peak);
    /* a lent buffer for this profile: over 6 MiB */
    print_message("openai profile: peak %zu bytes held (a lent buffer: %zu)\n", peak,
                  sg_stream_buffer_size(&cfg));
    assert_true(peak <= 4096);

    /* fed whole events, a read each: nothing held after any of them */
    count_mem c = {0, 0, 0};
    sg_mem m;
    sg_mem_init(&m, count_mem_resize, &c);
    sg_stream s;
    seen items = {{0}, 0};
    assert_int_equal(sg_stream_init_mem(&s, &cfg, on_item, &items, &m), 0);
    sg_guard_config g = no_clocks();
    assert_int_equal(sg_stream_begin(&s, &g, NULL, 1, 0), 0);
    const char *p = OPENAI;
    const char *end = OPENAI + sizeof(OPENAI) - 1;
    for (int k = 0; p < end; k++) {
        const char *e = strstr(p, "\n\n") + 2;
        int rv = sg_stream_feed(&s, p, (size_t)(e - p), 1);
        assert_true(rv == 0 || rv == 1);
        /* the role-only chunk is held (metadata) until the first token,
         * the third event; then nothing */
        if (k < 2) {
            assert_true(c.live > 0);
        } else {
            assert_int_equal(c.live, 0);
        }
        p = e;
    }
    sg_guard_result res;
    assert_int_equal(sg_stream_end(&s, 2, SG_OUTCOME_OK, &res), 0);
    assert_int_equal(res.outcome, SG_OUTCOME_OK);
    sg_stream_release(&s);
    assert_int_equal(c.live, 0);
}

static void ndjson_items_match_the_lent_buffer_at_every_split(void **state) {
    (void)state;
    static const char in[] = "{\"message\":{\"content\":\"a\"},\"done\":false}\r\n"
                             "\n"
                             "{\"message\":{\"content\":\"b\"},\"done\":false}\n"
                             "{\"done\":true}\n";
    sg_stream_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    size_t peak = 0;
    (void)sg_stream_config_set_format(&cfg, SG_FORMAT_NDJSON);
    same_as_lent(&cfg, in, sizeof(in) - 1, &peak);
    assert_true(peak <= 4096);
    assert_int_equal(sg_profile_framing("ollama", &cfg), 0);
    same_as_lent(&cfg, in, sizeof(in) - 1, &peak);
    assert_true(peak <= 4096);
}

/* An event-stream message (prelude, no headers, @payload, CRCs). */
static size_t es_message(unsigned char *out, const char *payload) {
    size_t pl = strlen(payload);
    uint32_t total = (uint32_t)(16 + pl);
    unsigned char *p = out;
    p[0] = (unsigned char)(total >> 24);
    p[1] = (unsigned char)(total >> 16);
    p[2] = (unsigned char)(total >> 8);
    p[3] = (unsigned char)total;
    memset(p + 4, 0, 4);
    uint32_t crc = (uint32_t)crc32(0, p, 8);
    for (int i = 0; i < 4; i++) {
        p[8 + i] = (unsigned char)(crc >> (24 - 8 * i));
    }
    memcpy(p + 12, payload, pl);
    crc = (uint32_t)crc32(0, p, (uInt)(12 + pl));
    for (int i = 0; i < 4; i++) {
        p[12 + pl + i] = (unsigned char)(crc >> (24 - 8 * i));
    }
    return total;
}

static void eventstream_items_match_the_lent_buffer_at_every_split(void **state) {
    (void)state;
    unsigned char in[512];
    size_t n = es_message(in, "{\"a\":1}");
    n += es_message(in + n, "{\"b\":\"two\"}");
    n += es_message(in + n, "");
    sg_stream_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    (void)sg_stream_config_set_format(&cfg, SG_FORMAT_EVENTSTREAM);
    size_t peak = 0;
    same_as_lent(&cfg, (const char *)in, n, &peak);
    assert_true(peak <= 4096);
}

/* Past a limit: the same error as with a lent buffer, whatever grew. */
static void limits_stay_the_bound(void **state) {
    (void)state;
    char in[600];
    sg_stream_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    (void)sg_stream_config_set_max_line(&cfg, 100);
    (void)sg_stream_config_set_max_event(&cfg, 150);
    size_t peak = 0;
    /* a line of 101 bytes: SG_ELINE_TOO_LONG, protocol_error */
    memset(in, 'x', sizeof(in));
    memcpy(in, "data: ", 6);
    in[101] = '\n';
    same_as_lent(&cfg, in, 102, &peak);
    assert_true(peak <= sg_stream_buffer_size(&cfg));
    run r;
    count_mem c = {0, 0, 0};
    run_stream(&cfg, &c, in, 102, NULL, 0, &r);
    assert_int_equal(r.last_feed, SG_ELINE_TOO_LONG);
    assert_int_equal(r.outcome, SG_OUTCOME_PROTOCOL_ERROR);
    /* an event of two lines of 90: SG_EEVENT_TOO_LARGE */
    snprintf(in, sizeof(in), "data: %090d\ndata: %090d\n\n", 1, 2);
    same_as_lent(&cfg, in, strlen(in), &peak);
    assert_true(peak <= sg_stream_buffer_size(&cfg));
    run_stream(&cfg, &c, in, strlen(in), NULL, 0, &r);
    assert_int_equal(r.last_feed, SG_EEVENT_TOO_LARGE);
    /* a line that never ends, one byte a read: refused at max_line + 1,
     * having held no more than the line */
    memset(in, 'y', sizeof(in));
    size_t cuts[599];
    for (size_t i = 0; i < 599; i++) {
        cuts[i] = i + 1;
    }
    c.peak = 0;
    run_stream(&cfg, &c, in, sizeof(in), cuts, 599, &r);
    assert_int_equal(r.last_feed, SG_ELINE_TOO_LONG);
    assert_true(c.peak <= cfg.max_line_);
}

static void no_memory_is_transport_error_and_frees_all(void **state) {
    (void)state;
    sg_stream_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(sg_profile_framing("openai", &cfg), 0);
    count_mem c = {0, 0, 0};
    c.limit = 300; /* less than the role chunk's record, split below */
    run r;
    size_t cut = 10; /* the first event spans two reads: a partial line */
    char big[1024];
    snprintf(big, sizeof(big),
             "data: {\"choices\":[{\"delta\":{\"content\":\"%0400d\"}}]}\n\n", 1);
    run_stream(&cfg, &c, big, strlen(big), &cut, 1, &r);
    assert_int_equal(r.last_feed, SG_ENOMEM);
    assert_int_equal(r.outcome, SG_OUTCOME_TRANSPORT_ERROR);
    assert_int_equal(c.live, 0);
    assert_int_equal(r.items.len, 0);
}

static void release_frees_a_pending_event_and_the_last_id(void **state) {
    (void)state;
    count_mem c = {0, 0, 0};
    sg_mem m;
    sg_mem_init(&m, count_mem_resize, &c);
    sg_stream s;
    seen items = {{0}, 0};
    assert_int_equal(sg_stream_init_mem(&s, NULL, on_item, &items, &m), 0);
    sg_guard_config g = no_clocks();
    assert_int_equal(sg_stream_begin(&s, &g, NULL, 1, 0), 0);
    static const char in[] = "id: 42\ndata: one\n\nevent: t\ndata: two\ndata: thr";
    assert_int_equal(sg_stream_feed(&s, in, sizeof(in) - 1, 1), 0);
    assert_true(c.live > 0); /* the id, the pending event, its partial line */
    sg_stream_release(&s);
    assert_int_equal(c.live, 0);
    sg_guard_result res;
    assert_int_equal(sg_stream_end(&s, 2, SG_OUTCOME_OK, &res), SG_EINVAL);
    sg_stream_release(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sse_items_match_the_lent_buffer_at_every_split),
        cmocka_unit_test(profile_stream_holds_little_and_nothing_between_items),
        cmocka_unit_test(ndjson_items_match_the_lent_buffer_at_every_split),
        cmocka_unit_test(eventstream_items_match_the_lent_buffer_at_every_split),
        cmocka_unit_test(limits_stay_the_bound),
        cmocka_unit_test(no_memory_is_transport_error_and_frees_all),
        cmocka_unit_test(release_frees_a_pending_event_and_the_last_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
