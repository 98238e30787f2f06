/*
 * SSE parser tests: the conformance table (sse_cases.h) fed whole, split at
 * every offset, and one byte at a time; then limits, errors, the terminal
 * sentinel, the BOM, CR/LF across reads and the API's edges.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/framing.h>

#include "sgx/simd.h"
#include "framing/lines.h"
#include "sse_cases.h"

/* ------------------------------------------------------------ recorder */

#define REC_MAX_EVENTS 64
#define REC_BYTES (64 * 1024)

typedef struct rec_ev {
    size_t type_off, type_len, data_off, data_len, id_off, id_len;
    bool terminal;
    const char *data_ptr; /* where the parser's view pointed */
} rec_ev;

typedef struct rec {
    char bytes[REC_BYTES];
    size_t used;
    rec_ev ev[REC_MAX_EVENTS];
    int n_ev;
    uint64_t retries[16];
    int n_retries;
    int n_comments;
    size_t comment_bytes;
    int cancel_after;            /* cancel on this event number (1-based); 0 = never */
    int n_other;                 /* lines the standard ignores (on_other) */
    size_t other_off, other_len; /* the last of them */
} rec;

/* Copies a view; one too big to keep (the 4 MiB line) is only measured. */
static size_t rec_put(rec *r, const char *s, size_t n) {
    size_t off = r->used;
    if (n > REC_BYTES - r->used) {
        return off;
    }
    if (n > 0) {
        memcpy(r->bytes + off, s, n);
    }
    r->used += n;
    return off;
}

static int rec_on_event(const sg_sse_event *ev, void *ud) {
    rec *r = ud;
    assert_true(r->n_ev < REC_MAX_EVENTS);
    rec_ev *e = &r->ev[r->n_ev++];
    e->type_off = rec_put(r, ev->type, ev->type_len);
    e->type_len = ev->type_len;
    e->data_off = rec_put(r, ev->data, ev->data_len);
    e->data_len = ev->data_len;
    e->id_off = rec_put(r, ev->id, ev->id_len);
    e->id_len = ev->id_len;
    e->terminal = ev->terminal;
    e->data_ptr = ev->data;
    return r->cancel_after != 0 && r->n_ev >= r->cancel_after;
}

static int rec_on_comment(const char *text, size_t len, void *ud) {
    rec *r = ud;
    (void)text;
    r->n_comments++;
    r->comment_bytes += len;
    return 0;
}

static int rec_on_retry(uint64_t ms, void *ud) {
    rec *r = ud;
    assert_true(r->n_retries < 16);
    r->retries[r->n_retries++] = ms;
    return 0;
}

static int rec_on_other(const char *line, size_t len, void *ud) {
    rec *r = ud;
    r->n_other++;
    r->other_off = rec_put(r, line, len);
    r->other_len = len;
    return 0;
}

/* @cfg with the recording callbacks. */
static void rec_callbacks(sg_sse_config *cfg) {
    assert_int_equal(sg_sse_config_set_on_event(cfg, rec_on_event), 0);
    assert_int_equal(sg_sse_config_set_on_comment(cfg, rec_on_comment), 0);
    assert_int_equal(sg_sse_config_set_on_retry(cfg, rec_on_retry), 0);
    assert_int_equal(sg_sse_config_set_on_other(cfg, rec_on_other), 0);
}

/* A config of limits @max_line and @max_event (0: the default). */
static sg_sse_config limits(size_t max_line, size_t max_event) {
    sg_sse_config cfg;
    sg_sse_config_init(&cfg);
    assert_int_equal(sg_sse_config_set_max_line(&cfg, max_line), 0);
    assert_int_equal(sg_sse_config_set_max_event(&cfg, max_event), 0);
    return cfg;
}

/* One parser and its buffer, sized for small limits so tests stay fast. */
typedef struct fixture {
    sg_sse_parser p;
    sg_sse_config cfg;
    char *buf;
    rec r;
} fixture;

static fixture *fx_new(size_t max_line, size_t max_event, const char *term_data,
                       const char *term_type) {
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->cfg = limits(max_line, max_event);
    assert_int_equal(sg_sse_config_set_terminal_data(&f->cfg, term_data), 0);
    assert_int_equal(sg_sse_config_set_terminal_type(&f->cfg, term_type), 0);
    rec_callbacks(&f->cfg);
    size_t n = sg_sse_buffer_size(&f->cfg);
    assert_true(n > 0);
    f->buf = malloc(n);
    assert_non_null(f->buf);
    assert_int_equal(sg_sse_init(&f->p, &f->cfg, &f->r, f->buf, n), 0);
    return f;
}

static void fx_free(fixture *f) {
    free(f->buf);
    free(f);
}

static void feed_ok(fixture *f, const char *s, size_t n) {
    assert_int_equal(sg_sse_feed(&f->p, s, n), (ptrdiff_t)n);
}

#define FEED(f, lit) feed_ok((f), (lit), sizeof(lit) - 1)

static void assert_view(const rec *r, size_t off, size_t len, sse_sv want,
                        const char *what, const char *name, int i) {
    if (len != want.n || memcmp(r->bytes + off, want.s, len) != 0) {
        print_error("case \"%s\": event %d %s differs (got %zu bytes, want %zu)\n", name,
                    i, what, len, want.n);
        fail();
    }
}

/* Checks what a case fed into @f produced, then sg_sse_end's verdict. */
static void check_case(fixture *f, const sse_case *c) {
    rec *r = &f->r;
    if (r->n_ev != c->n_events) {
        print_error("case \"%s\": %d events, want %d\n", c->name, r->n_ev, c->n_events);
        fail();
    }
    for (int i = 0; i < c->n_events; i++) {
        assert_view(r, r->ev[i].type_off, r->ev[i].type_len, c->events[i].type, "type",
                    c->name, i);
        assert_view(r, r->ev[i].data_off, r->ev[i].data_len, c->events[i].data, "data",
                    c->name, i);
        assert_view(r, r->ev[i].id_off, r->ev[i].id_len, c->events[i].id, "id", c->name,
                    i);
    }
    if (r->n_retries != c->n_retries) {
        print_error("case \"%s\": %d retries, want %d\n", c->name, r->n_retries,
                    c->n_retries);
        fail();
    }
    for (int i = 0; i < c->n_retries; i++) {
        assert_int_equal(r->retries[i], c->retries[i]);
    }
    if (c->comments >= 0 && r->n_comments != c->comments) {
        print_error("case \"%s\": %d comments, want %d\n", c->name, r->n_comments,
                    c->comments);
        fail();
    }
    const char *id;
    size_t id_len;
    assert_int_equal(sg_sse_last_event_id(&f->p, &id, &id_len), 0);
    if (id_len != c->last_id.n || memcmp(id, c->last_id.s, id_len) != 0) {
        print_error("case \"%s\": last event id differs\n", c->name);
        fail();
    }
    bool clean;
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    if (clean != c->clean) {
        print_error("case \"%s\": clean=%d, want %d\n", c->name, clean, c->clean);
        fail();
    }
}

static fixture *case_fixture(const sse_case *c) {
    /* Large enough for every case (the longest line is 2 KiB). */
    return fx_new(4096, 8192, c->terminal_data, c->terminal_type);
}

/* Feeds @c in pieces: cut at @a and @b (a <= b), each piece copied to its
 * own heap block so the parser cannot read past a read's end unnoticed. */
static void feed_pieces(fixture *f, const sse_case *c, size_t a, size_t b) {
    size_t cuts[3] = {a, b, c->input.n};
    size_t from = 0;
    for (int i = 0; i < 3; i++) {
        size_t n = cuts[i] - from;
        char *piece = malloc(n > 0 ? n : 1);
        assert_non_null(piece);
        memcpy(piece, c->input.s + from, n);
        assert_int_equal(sg_sse_feed(&f->p, piece, n), (ptrdiff_t)n);
        free(piece);
        from = cuts[i];
    }
}

/* ------------------------------------------------------- conformance */

static void conformance_cases_parse_as_expected_in_one_read(void **state) {
    (void)state;
    for (size_t k = 0; k < SSE_N_CASES; k++) {
        fixture *f = case_fixture(&sse_cases[k]);
        feed_pieces(f, &sse_cases[k], 0, 0);
        check_case(f, &sse_cases[k]);
        fx_free(f);
    }
}

/* Every case in two reads, cut at each offset in turn. */
static void split_every_case_at_every_offset(void) {
    for (size_t k = 0; k < SSE_N_CASES; k++) {
        const sse_case *c = &sse_cases[k];
        for (size_t at = 0; at <= c->input.n; at++) {
            fixture *f = case_fixture(c);
            feed_pieces(f, c, at, at);
            check_case(f, c);
            fx_free(f);
        }
    }
}

static void conformance_cases_give_identical_events_split_at_every_offset(void **state) {
    (void)state;
    split_every_case_at_every_offset();
}

static void conformance_cases_give_identical_events_split_at_every_pair(void **state) {
    (void)state;
    for (size_t k = 0; k < SSE_N_CASES; k++) {
        const sse_case *c = &sse_cases[k];
        if (c->input.n > 200) {
            continue; /* quadratic in the input; the long cases are covered above */
        }
        for (size_t a = 0; a <= c->input.n; a++) {
            for (size_t b = a; b <= c->input.n; b++) {
                fixture *f = case_fixture(c);
                feed_pieces(f, c, a, b);
                check_case(f, c);
                fx_free(f);
            }
        }
    }
}

static void conformance_cases_give_identical_events_one_byte_at_a_time(void **state) {
    (void)state;
    for (size_t k = 0; k < SSE_N_CASES; k++) {
        const sse_case *c = &sse_cases[k];
        fixture *f = case_fixture(c);
        for (size_t i = 0; i < c->input.n; i++) {
            char byte = c->input.s[i];
            assert_int_equal(sg_sse_feed(&f->p, &byte, 1), 1);
        }
        check_case(f, c);
        fx_free(f);
    }
}

/* ----------------------------------------------------- line endings, BOM */

static void cr_ending_one_read_and_lf_starting_the_next_are_one_terminator(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "data: A\r\n");
    FEED(f, "data: B\r");
    FEED(f, "\n");
    FEED(f, "data: C\r\n");
    assert_int_equal(f->r.n_ev, 0);
    FEED(f, "\n");
    assert_int_equal(f->r.n_ev, 1);
    assert_int_equal(f->r.ev[0].data_len, 5);
    assert_memory_equal(f->r.bytes + f->r.ev[0].data_off, "A\nB\nC", 5);
    fx_free(f);
}

static void cr_at_end_of_read_completes_the_line_at_once(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "data: x\r\r");
    /* No waiting for a possible LF: the blank line already dispatched. */
    assert_int_equal(f->r.n_ev, 1);
    FEED(f, "\n");
    assert_int_equal(f->r.n_ev, 1);
    fx_free(f);
}

static void bom_split_across_three_reads_is_stripped(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "\xEF");
    FEED(f, "\xBB");
    FEED(f, "\xBF");
    FEED(f, "data:1\n\n");
    assert_int_equal(f->r.n_ev, 1);
    fx_free(f);
}

static void bom_prefix_that_is_not_a_bom_starts_the_first_line(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "\xEF\xBB");
    FEED(f, "data:1\n\ndata:2\n\n");
    /* "\xEF\xBB" "data" is an unknown field, so only the second event. */
    assert_int_equal(f->r.n_ev, 1);
    assert_memory_equal(f->r.bytes + f->r.ev[0].data_off, "2", 1);
    fx_free(f);
}

static void second_bom_after_reset_is_stripped_again(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "\xEF\xBB\xBF"
            "data:1\n\n");
    assert_int_equal(sg_sse_reset(&f->p), 0);
    FEED(f, "\xEF\xBB\xBF"
            "data:2\n\n");
    assert_int_equal(f->r.n_ev, 2);
    fx_free(f);
}

static void invalid_utf8_passes_through_unchanged(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "event: \xFF\xC0\nid: \xED\xA0\x80\ndata: \x80\xFE\xC3\n\n");
    assert_int_equal(f->r.n_ev, 1);
    rec_ev *e = &f->r.ev[0];
    assert_int_equal(e->type_len, 2);
    assert_memory_equal(f->r.bytes + e->type_off, "\xFF\xC0", 2);
    assert_int_equal(e->id_len, 3);
    assert_memory_equal(f->r.bytes + e->id_off, "\xED\xA0\x80", 3);
    assert_int_equal(e->data_len, 3);
    assert_memory_equal(f->r.bytes + e->data_off, "\x80\xFE\xC3", 3);
    fx_free(f);
}

/* ------------------------------------------------------------- limits */

static void line_longer_than_max_line_returns_line_too_long(void **state) {
    (void)state;
    fixture *f = fx_new(16, 1024, NULL, NULL);
    FEED(f, "data: 0123456789\n"); /* exactly 16 bytes: accepted */
    assert_int_equal(sg_sse_feed(&f->p, "data: 01234567890\n", 18), SG_ELINE_TOO_LONG);
    fx_free(f);
}

static void unterminated_line_is_refused_as_soon_as_it_passes_max_line(void **state) {
    (void)state;
    fixture *f = fx_new(16, 1024, NULL, NULL);
    FEED(f, "data: 0123456789");
    /* One more byte, no terminator yet: refused now, not when LF comes. */
    assert_int_equal(sg_sse_feed(&f->p, "x", 1), SG_ELINE_TOO_LONG);
    fx_free(f);
}

static void comment_longer_than_max_line_returns_line_too_long(void **state) {
    (void)state;
    fixture *f = fx_new(16, 1024, NULL, NULL);
    assert_int_equal(sg_sse_feed(&f->p, ": 0123456789abcdefg\n", 20), SG_ELINE_TOO_LONG);
    fx_free(f);
}

static void event_larger_than_max_event_returns_event_too_large(void **state) {
    (void)state;
    fixture *f = fx_new(64, 8, NULL, NULL);
    FEED(f, "data: 1234\ndata: 567\n\n"); /* "1234\n567" = 8 bytes: accepted */
    assert_int_equal(f->r.n_ev, 1);
    assert_int_equal(sg_sse_feed(&f->p, "data: 1234\ndata: 5678\n\n", 24),
                     SG_EEVENT_TOO_LARGE);
    assert_int_equal(f->r.n_ev, 1);
    fx_free(f);
}

static void single_data_line_larger_than_max_event_is_refused(void **state) {
    (void)state;
    fixture *f = fx_new(64, 8, NULL, NULL);
    assert_int_equal(sg_sse_feed(&f->p, "data: 123456789\n", 16), SG_EEVENT_TOO_LARGE);
    fx_free(f);
}

static void error_is_sticky_until_reset(void **state) {
    (void)state;
    fixture *f = fx_new(16, 1024, NULL, NULL);
    assert_int_equal(sg_sse_feed(&f->p, "data: 0123456789abc\n", 20), SG_ELINE_TOO_LONG);
    assert_int_equal(sg_sse_feed(&f->p, "data: ok\n\n", 10), SG_ELINE_TOO_LONG);
    assert_int_equal(f->r.n_ev, 0);
    bool clean = true;
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    assert_false(clean);
    fx_free(f);
}

static void reset_after_error_parses_a_fresh_stream(void **state) {
    (void)state;
    fixture *f = fx_new(16, 1024, NULL, NULL);
    FEED(f, "id: 7\n\ndata: half");
    assert_int_equal(sg_sse_feed(&f->p, "0123456789abc", 13), SG_ELINE_TOO_LONG);
    assert_int_equal(sg_sse_reset(&f->p), 0);
    FEED(f, "data: ok\n\n");
    assert_int_equal(f->r.n_ev, 1);
    /* Nothing of the failed stream leaks in: no half line, no old id. */
    assert_int_equal(f->r.ev[0].data_len, 2);
    assert_int_equal(f->r.ev[0].id_len, 0);
    fx_free(f);
}

static void long_line_in_one_byte_reads_costs_linear_time(void **state) {
    (void)state;
    /* 4 MiB one byte at a time: a parser that rescans its buffered tail
     * would do ~8e12 byte steps and hit the test timeout. */
    const size_t n = (size_t)4 << 20;
    fixture *f = fx_new(n + 16, n + 16, NULL, NULL);
    FEED(f, "data: ");
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(sg_sse_feed(&f->p, "y", 1), 1);
    }
    f->r.used = 0;
    FEED(f, "\n\n");
    assert_int_equal(f->r.n_ev, 1);
    assert_int_equal(f->r.ev[0].data_len, n);
    fx_free(f);
}

/* ---------------------------------------------------- terminal sentinel */

static void data_sentinel_is_not_an_item_and_ends_clean(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, "[DONE]", NULL);
    FEED(f, "data: a\n\ndata: [DONE]\n\n");
    assert_int_equal(f->r.n_ev, 1);
    assert_true(sg_sse_terminal_seen(&f->p));
    sg_sse_stats st = SG_SSE_STATS_INIT;
    assert_int_equal(sg_sse_get_stats(&f->p, &st), 0);
    assert_int_equal(st.items, 1);
    bool clean = false;
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    assert_true(clean);
    fx_free(f);
}

static void stream_without_its_configured_sentinel_is_not_clean(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, "[DONE]", NULL);
    FEED(f, "data: a\n\n");
    bool clean = true;
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    assert_false(clean);
    assert_false(sg_sse_terminal_seen(&f->p));
    fx_free(f);
}

static void terminal_type_event_is_delivered_flagged_as_terminal(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, "message_stop");
    FEED(f, "event: content_block_delta\ndata: {}\n\nevent: message_stop\ndata: {}\n\n");
    assert_int_equal(f->r.n_ev, 2);
    assert_false(f->r.ev[0].terminal);
    assert_true(f->r.ev[1].terminal);
    assert_true(sg_sse_terminal_seen(&f->p));
    fx_free(f);
}

static void bytes_after_terminal_are_counted_and_not_parsed(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, "[DONE]", NULL);
    FEED(f, "data: [DONE]\n\r");
    FEED(f, "\ndata: late\n\n");
    FEED(f, "xyz");
    assert_int_equal(f->r.n_ev, 0);
    sg_sse_stats st = SG_SSE_STATS_INIT;
    assert_int_equal(sg_sse_get_stats(&f->p, &st), 0);
    /* The LF completing the terminal's CRLF is not "after" it. */
    assert_int_equal(st.bytes_after_terminal, 12 + 3);
    assert_int_equal(st.bytes, 14 + 13 + 3);
    fx_free(f);
}

static void data_sentinel_matches_whatever_the_event_type(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, "[DONE]", NULL);
    FEED(f, "event: done\ndata: [DONE]\n\n");
    assert_int_equal(f->r.n_ev, 0);
    assert_true(sg_sse_terminal_seen(&f->p));
    fx_free(f);
}

static void empty_sentinel_is_rejected(void **state) {
    (void)state;
    sg_sse_config cfg = limits(64, 64);
    assert_int_equal(sg_sse_config_set_terminal_data(&cfg, ""), SG_EINVAL);
    assert_int_equal(sg_sse_config_set_terminal_type(&cfg, ""), SG_EINVAL);
    assert_int_equal(sg_sse_config_set_terminal_data(NULL, "x"), SG_EINVAL);
}

/* ------------------------------------------------ callbacks and views */

static void nonzero_from_on_event_stops_the_feed_with_canceled(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    f->r.cancel_after = 1;
    assert_int_equal(sg_sse_feed(&f->p, "data: a\n\ndata: b\n\n", 18), SG_ECANCELED);
    assert_int_equal(f->r.n_ev, 1);
    assert_int_equal(sg_sse_feed(&f->p, "data: c\n\n", 9), SG_ECANCELED);
    assert_int_equal(f->r.n_ev, 1);
    fx_free(f);
}

static int cancel_comment(const char *t, size_t n, void *ud) {
    (void)t;
    (void)n;
    (void)ud;
    return 1;
}

static void nonzero_from_on_comment_stops_the_feed_with_canceled(void **state) {
    (void)state;
    sg_sse_parser p;
    char buf[SG_SSE_BUFFER_SIZE(64, 64)];
    sg_sse_config cfg = limits(64, 64);
    assert_int_equal(sg_sse_config_set_on_comment(&cfg, cancel_comment), 0);
    assert_int_equal(sg_sse_init(&p, &cfg, NULL, buf, sizeof(buf)), 0);
    assert_int_equal(sg_sse_feed(&p, ": ka\n", 5), SG_ECANCELED);
}

static void comments_are_reported_and_never_counted_as_items(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, ": keepalive\n\n: keepalive\n\n");
    assert_int_equal(f->r.n_comments, 2);
    assert_int_equal(f->r.comment_bytes, 2 * strlen(" keepalive"));
    assert_int_equal(f->r.n_ev, 0);
    sg_sse_stats st = SG_SSE_STATS_INIT;
    assert_int_equal(sg_sse_get_stats(&f->p, &st), 0);
    assert_int_equal(st.items, 0);
    assert_int_equal(st.comments, 2);
    assert_int_equal(st.lines, 4);
    fx_free(f);
}

/* Lines the standard ignores go to on_other, whole and nothing else:
 * unknown fields (short, long, no colon, wrong case), a bare JSON line;
 * known fields, comments and blank lines never do. */
static void ignored_lines_go_to_on_other(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "data: a\nfoo: 1\nData: x\n\n");
    assert_int_equal(f->r.n_other, 2);
    assert_int_equal(f->r.n_ev, 1);
    assert_int_equal(f->r.other_len, 7);
    assert_memory_equal(f->r.bytes + f->r.other_off, "Data: x", 7);
    FEED(f, "  \"error\": {\nevent: e\nid: 1\nretry: 5\n: c\n\n");
    assert_int_equal(f->r.n_other, 3);
    assert_int_equal(f->r.other_len, 12);
    assert_memory_equal(f->r.bytes + f->r.other_off, "  \"error\": {", 12);
    FEED(f, "longfieldname\nx\n");
    assert_int_equal(f->r.n_other, 5);
    assert_int_equal(f->r.other_len, 1);
    fx_free(f);
}

static void event_within_one_read_is_delivered_without_a_copy(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    static const char in[] = "data: {\"x\":1}\n\n";
    FEED(f, in);
    assert_int_equal(f->r.n_ev, 1);
    assert_ptr_equal(f->r.ev[0].data_ptr, in + 6);
    fx_free(f);
}

static void event_spanning_reads_survives_the_callers_buffer_being_reused(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    char chunk[32];
    memcpy(chunk, "event: t\nid: 9\ndata: ab", 23);
    feed_ok(f, chunk, 23);
    memset(chunk, '#', sizeof(chunk));
    memcpy(chunk, "c\ndata: d\n\n", 11);
    feed_ok(f, chunk, 11);
    assert_int_equal(f->r.n_ev, 1);
    rec_ev *e = &f->r.ev[0];
    assert_memory_equal(f->r.bytes + e->type_off, "t", 1);
    assert_memory_equal(f->r.bytes + e->id_off, "9", 1);
    assert_int_equal(e->data_len, 5);
    assert_memory_equal(f->r.bytes + e->data_off, "abc\nd", 5);
    fx_free(f);
}

static void retry_value_past_uint64_saturates(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "retry: 99999999999999999999999\n");
    assert_int_equal(f->r.n_retries, 1);
    assert_true(f->r.retries[0] == UINT64_MAX);
    fx_free(f);
}

static void last_event_id_is_not_moved_by_an_undispatched_block(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "id: 1\ndata: a\n\nid: 2\ndata: b\n");
    const char *id;
    size_t n;
    assert_int_equal(sg_sse_last_event_id(&f->p, &id, &n), 0);
    assert_int_equal(n, 1);
    assert_memory_equal(id, "1", 1);
    bool clean;
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    assert_int_equal(sg_sse_last_event_id(&f->p, &id, &n), 0);
    assert_memory_equal(id, "1", 1);
    fx_free(f);
}

/* ------------------------------------------------------------- the API */

static void feed_after_end_returns_done(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    bool clean;
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    assert_true(clean);
    assert_int_equal(sg_sse_feed(&f->p, "data: a\n\n", 9), SG_EDONE);
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    assert_true(clean);
    fx_free(f);
}

static void end_with_a_partial_line_is_not_clean(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, ": trailing comment without its newline");
    bool clean = true;
    assert_int_equal(sg_sse_end(&f->p, &clean), 0);
    assert_false(clean);
    fx_free(f);
}

static void init_rejects_a_buffer_smaller_than_needed(void **state) {
    (void)state;
    sg_sse_parser p;
    sg_sse_config cfg = limits(64, 64);
    char buf[SG_SSE_BUFFER_SIZE(64, 64)];
    assert_int_equal(sg_sse_buffer_size(&cfg), sizeof(buf));
    assert_int_equal(sg_sse_init(&p, &cfg, NULL, buf, sizeof(buf) - 1), SG_ENOBUFS);
    assert_int_equal(sg_sse_init(&p, &cfg, NULL, buf, sizeof(buf)), 0);
}

static void setters_reject_out_of_range_limits(void **state) {
    (void)state;
    sg_sse_config cfg;
    sg_sse_config_init(&cfg);
    assert_int_equal(sg_sse_config_set_max_line(&cfg, SG_FRAMING_MIN_LINE - 1),
                     SG_ERANGE);
    assert_int_equal(sg_sse_config_set_max_line(&cfg, SG_FRAMING_MAX_LIMIT + 1),
                     SG_ERANGE);
    assert_int_equal(sg_sse_config_set_max_event(&cfg, SG_FRAMING_MAX_LIMIT + 1),
                     SG_ERANGE);
    /* a refused value leaves the config as it was: the defaults */
    assert_int_equal(sg_sse_buffer_size(&cfg), sg_sse_buffer_size(NULL));
    assert_int_equal(
        sg_sse_buffer_size(NULL),
        SG_SSE_BUFFER_SIZE(SG_FRAMING_DEFAULT_MAX_LINE, SG_FRAMING_DEFAULT_MAX_EVENT));
}

/* Statistics are the caller's, size first: an older caller's smaller
 * struct is filled as far as its size says, never past it. */
static void stats_fill_only_what_the_callers_struct_holds(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    FEED(f, "data: a\n\n: ka\n");
    sg_sse_stats full = SG_SSE_STATS_INIT;
    assert_int_equal(sg_sse_get_stats(&f->p, &full), 0);
    assert_int_equal(full.size, sizeof(sg_sse_stats));
    assert_int_equal(full.bytes, 14);
    assert_int_equal(full.items, 1);
    assert_int_equal(full.comments, 1);
    sg_sse_stats older;
    memset(&older, 0x5a, sizeof(older));
    older.size = offsetof(sg_sse_stats, lines); /* it knew of bytes only */
    assert_int_equal(sg_sse_get_stats(&f->p, &older), 0);
    assert_int_equal(older.size, offsetof(sg_sse_stats, lines));
    assert_int_equal(older.bytes, 14);
    assert_int_equal(older.items, UINT64_C(0x5a5a5a5a5a5a5a5a)); /* untouched */
    sg_sse_stats unsized;
    memset(&unsized, 0, sizeof(unsized));
    assert_int_equal(sg_sse_get_stats(&f->p, &unsized), SG_EINVAL);
    assert_int_equal(sg_sse_get_stats(&f->p, NULL), SG_EINVAL);
    fx_free(f);
}

static void calls_on_an_uninitialised_parser_return_einval(void **state) {
    (void)state;
    sg_sse_parser p;
    memset(&p, 0, sizeof(p));
    bool clean;
    const char *id;
    size_t n;
    sg_sse_stats st = SG_SSE_STATS_INIT;
    assert_int_equal(sg_sse_feed(&p, "x", 1), SG_EINVAL);
    assert_int_equal(sg_sse_end(&p, &clean), SG_EINVAL);
    assert_int_equal(sg_sse_reset(&p), SG_EINVAL);
    assert_int_equal(sg_sse_last_event_id(&p, &id, &n), SG_EINVAL);
    assert_int_equal(sg_sse_get_stats(&p, &st), SG_EINVAL);
    assert_false(sg_sse_terminal_seen(&p));
    assert_int_equal(sg_sse_feed(NULL, "x", 1), SG_EINVAL);
}

static void null_data_with_zero_length_is_a_no_op(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, NULL);
    assert_int_equal(sg_sse_feed(&f->p, NULL, 0), 0);
    assert_int_equal(sg_sse_feed(&f->p, NULL, 1), SG_EINVAL);
    fx_free(f);
}

/* ------------------------------------------- vector levels, fast path */

/* The first CR or LF by a byte loop: what every level must find. */
static const char *ref_eol(const char *p, const char *end) {
    for (; p < end; p++) {
        if (*p == '\n' || *p == '\r') {
            return p;
        }
    }
    return end;
}

static void eol_search_finds_what_a_byte_loop_does_at_every_level(void **state) {
    (void)state;
    int best = sgx_simd_limit(0);
    unsigned seed = 7;
    for (int level = SGX_SIMD_SSE2; level <= best; level++) {
        assert_int_equal(sgx_simd_limit(level), level);
        sg__lines_eol_fn eol = sg__lines_eol_at(level);
        for (size_t n = 0; n <= 300; n++) {
            /* exactly n bytes on the heap: a read past the end is caught */
            char *buf = malloc(n > 0 ? n : 1);
            assert_non_null(buf);
            for (size_t at = 0; at <= n; at++) {
                for (size_t i = 0; i < n; i++) {
                    seed = seed * 1103515245u + 12345u;
                    char c = (char)(seed >> 16);
                    buf[i] = c == '\n' || c == '\r' ? 'x' : c;
                }
                if (at < n) {
                    buf[at] = at % 2 ? '\r' : '\n';
                    if (at + 7 < n) {
                        buf[at + 7] = '\n'; /* a later one never wins */
                    }
                }
                assert_ptr_equal(eol(buf, buf + n), ref_eol(buf, buf + n));
            }
            free(buf);
        }
    }
    sgx_simd_limit(0);
}

static void conformance_cases_parse_alike_at_every_vector_level(void **state) {
    (void)state;
    int best = sgx_simd_limit(0);
    for (int level = SGX_SIMD_SSE2; level <= best; level++) {
        assert_int_equal(sgx_simd_limit(level), level);
        split_every_case_at_every_offset();
    }
    sgx_simd_limit(0);
}

/* "message" as the typed terminal: the first untyped event is it, even
 * in the one-line shape the fast path takes. */
static void terminal_type_message_ends_at_the_first_untyped_event(void **state) {
    (void)state;
    fixture *f = fx_new(64, 64, NULL, "message");
    FEED(f, "data: a\n\ndata: b\n\n");
    assert_int_equal(f->r.n_ev, 1);
    assert_true(f->r.ev[0].terminal);
    assert_true(sg_sse_terminal_seen(&f->p));
    sg_sse_stats st = SG_SSE_STATS_INIT;
    assert_int_equal(sg_sse_get_stats(&f->p, &st), 0);
    assert_int_equal(st.items, 1);
    assert_int_equal(st.bytes_after_terminal, 9); /* "data: b\n\n" */
    fx_free(f);
}

/* One-line events in one read, among others: the same events and counters
 * as one byte at a time (the general path only). */
static void one_line_events_count_as_the_general_path_counts(void **state) {
    (void)state;
    static const char body[] = "data: a\n\ndata: bb\n\nid: 7\ndata: c\n\n: ping\n\n"
                               "data: d\r\n\r\ndata:e\n\ndata: f\ndata: g\n\n"
                               "data: h\n\ndata: [DONE]\n\ndata: late\n\n";
    sg_sse_stats whole = SG_SSE_STATS_INIT;
    sg_sse_stats bytes = SG_SSE_STATS_INIT;
    fixture *f = fx_new(64, 64, "[DONE]", NULL);
    FEED(f, body);
    assert_int_equal(f->r.n_ev, 7);
    assert_int_equal(sg_sse_get_stats(&f->p, &whole), 0);
    fixture *g = fx_new(64, 64, "[DONE]", NULL);
    for (size_t i = 0; i < sizeof(body) - 1; i++) {
        assert_int_equal(sg_sse_feed(&g->p, body + i, 1), 1);
    }
    assert_int_equal(sg_sse_get_stats(&g->p, &bytes), 0);
    assert_int_equal(g->r.n_ev, f->r.n_ev);
    for (int i = 0; i < f->r.n_ev; i++) {
        assert_int_equal(f->r.ev[i].data_len, g->r.ev[i].data_len);
        assert_memory_equal(f->r.bytes + f->r.ev[i].data_off,
                            g->r.bytes + g->r.ev[i].data_off, f->r.ev[i].data_len);
        assert_int_equal(f->r.ev[i].id_len, g->r.ev[i].id_len);
    }
    /* the id set by the third event stays on the ones after it */
    assert_int_equal(f->r.ev[3].id_len, 1);
    assert_memory_equal(f->r.bytes + f->r.ev[6].id_off, "7", 1);
    assert_int_equal(whole.lines, bytes.lines);
    assert_int_equal(whole.items, bytes.items);
    assert_int_equal(whole.comments, bytes.comments);
    assert_int_equal(whole.bytes_after_terminal, bytes.bytes_after_terminal);
    assert_int_equal(whole.items, 7);
    fx_free(f);
    fx_free(g);
}

/* The CR-or-LF mask of a 64-byte block, at every level the CPU has:
 * what a byte loop makes, for every length to the read's end (the buffer
 * ends exactly there: a read past it is caught under the sanitizers). */
static void eol_masks_are_what_a_byte_loop_makes_at_every_level(void **state) {
    (void)state;
    int best = sgx_simd_limit(0);
    unsigned seed = 11;
    for (size_t n = 1; n <= 140; n++) {
        char *buf = malloc(n);
        assert_non_null(buf);
        for (int round = 0; round < 8; round++) {
            for (size_t i = 0; i < n; i++) {
                seed = seed * 1103515245u + 12345u;
                unsigned r = seed >> 16;
                buf[i] = r % 9 == 0 ? '\n' : r % 11 == 0 ? '\r' : (char)(r >> 4);
            }
            for (size_t at = 0; at < n; at++) {
                uint64_t want = 0;
                for (size_t i = 0; i < 64 && at + i < n; i++) {
                    if (buf[at + i] == '\n' || buf[at + i] == '\r') {
                        want |= (uint64_t)1 << i;
                    }
                }
                const char *p = buf + at;
                const char *end = buf + n;
                assert_int_equal(sg__eolmask_bytes(p, end), want);
#ifdef SG__LINES_SSE2
                assert_int_equal(sg__eolmask_sse2(p, end), want);
#endif
#ifdef SG__LINES_WIDE
                if (best >= SGX_SIMD_AVX2) {
                    assert_int_equal(sg__eolmask_avx2(p, end), want);
                }
                if (best >= SGX_SIMD_AVX512BW) {
                    assert_int_equal(sg__eolmask_avx512(p, end), want);
                }
#endif
            }
        }
        free(buf);
    }
    (void)best;
}

/* What a parser delivered: how many events, and a hash of each one's
 * data and id in order. */
typedef struct tally {
    uint64_t n, hash;
} tally;

static uint64_t mix(uint64_t h, const char *p, size_t n) {
    h = (h ^ n) * 1099511628211u;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (unsigned char)p[i]) * 1099511628211u;
    }
    return h;
}

static int tally_event(const sg_sse_event *ev, void *ud) {
    tally *t = ud;
    t->n++;
    t->hash = mix(mix(t->hash, ev->data, ev->data_len), ev->id, ev->id_len);
    return 0;
}

/* @body fed in reads of @chunk bytes at vector level @level: its tally,
 * and the parser's counters in @st. */
static tally tally_body(const char *body, size_t len, size_t chunk, int level,
                        sg_sse_stats *st) {
    assert_int_equal(sgx_simd_limit(level), level);
    sg_sse_config cfg = limits(4096, 4096);
    assert_int_equal(sg_sse_config_set_terminal_data(&cfg, "[DONE]"), 0);
    assert_int_equal(sg_sse_config_set_on_event(&cfg, tally_event), 0);
    size_t n = sg_sse_buffer_size(&cfg);
    char *buf = malloc(n);
    assert_non_null(buf);
    tally t = {0, 14695981039346656037u};
    sg_sse_parser p;
    assert_int_equal(sg_sse_init(&p, &cfg, &t, buf, n), 0);
    for (size_t o = 0; o < len; o += chunk) {
        size_t k = len - o < chunk ? len - o : chunk;
        assert_int_equal(sg_sse_feed(&p, body + o, k), (ptrdiff_t)k);
    }
    bool clean;
    assert_int_equal(sg_sse_end(&p, &clean), 0);
    assert_true(clean);
    *st = (sg_sse_stats)SG_SSE_STATS_INIT;
    assert_int_equal(sg_sse_get_stats(&p, st), 0);
    free(buf);
    sgx_simd_limit(0);
    return t;
}

/* One-line events of every length from 0 to 200 bytes, so that their line
 * ends fall at every place in the 64-byte blocks the fast path masks, with
 * CR-ended, two-line and id-setting events and comments among them: in one
 * read and in reads that cut them, at every vector level, the same events
 * and counters as one byte at a time (the general path alone). */
static void one_line_events_of_every_length_parse_alike_at_every_level(void **state) {
    (void)state;
    size_t cap = 200 * 260 + 64;
    char *body = malloc(cap);
    assert_non_null(body);
    size_t len = 0;
    for (int k = 0; k <= 200; k++) {
        if (k % 29 == 5) {
            len += (size_t)snprintf(body + len, cap - len, "id: %d\n", k);
        }
        if (k % 37 == 7) {
            len += (size_t)snprintf(body + len, cap - len, "data: cr%d\r\n\r\n", k);
        }
        if (k % 53 == 11) {
            len += (size_t)snprintf(body + len, cap - len, "data: a\ndata: b\n\n");
        }
        if (k % 71 == 13) {
            len += (size_t)snprintf(body + len, cap - len, ": ping\n\n");
        }
        memcpy(body + len, "data: ", 6);
        len += 6;
        for (int i = 0; i < k; i++) {
            body[len++] = (char)(i % 7 == 3 ? '"' : 'a' + (k + i) % 26);
        }
        memcpy(body + len, "\n\n", 2);
        len += 2;
    }
    len += (size_t)snprintf(body + len, cap - len, "data: [DONE]\n\n");
    assert_true(len < cap);
    int best = sgx_simd_limit(0);
    sg_sse_stats ref_st;
    const tally ref = tally_body(body, len, 1, SGX_SIMD_SSE2, &ref_st);
    assert_int_equal(ref.n, 201 + 6 + 4); /* the CR-ended and two-line ones too */
    static const size_t chunks[] = {100000, 4096, 1000, 193, 64, 63};
    for (int level = SGX_SIMD_SSE2; level <= best; level++) {
        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
            sg_sse_stats st;
            tally t = tally_body(body, len, chunks[c], level, &st);
            if (t.n != ref.n || t.hash != ref.hash) {
                print_error("level %d, reads of %zu: %llu events, want %llu\n", level,
                            chunks[c], (unsigned long long)t.n,
                            (unsigned long long)ref.n);
                fail();
            }
            assert_int_equal(st.lines, ref_st.lines);
            assert_int_equal(st.items, ref_st.items);
            assert_int_equal(st.comments, ref_st.comments);
        }
    }
    free(body);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conformance_cases_parse_as_expected_in_one_read),
        cmocka_unit_test(conformance_cases_give_identical_events_split_at_every_offset),
        cmocka_unit_test(conformance_cases_give_identical_events_split_at_every_pair),
        cmocka_unit_test(conformance_cases_give_identical_events_one_byte_at_a_time),
        cmocka_unit_test(cr_ending_one_read_and_lf_starting_the_next_are_one_terminator),
        cmocka_unit_test(cr_at_end_of_read_completes_the_line_at_once),
        cmocka_unit_test(bom_split_across_three_reads_is_stripped),
        cmocka_unit_test(bom_prefix_that_is_not_a_bom_starts_the_first_line),
        cmocka_unit_test(second_bom_after_reset_is_stripped_again),
        cmocka_unit_test(invalid_utf8_passes_through_unchanged),
        cmocka_unit_test(line_longer_than_max_line_returns_line_too_long),
        cmocka_unit_test(unterminated_line_is_refused_as_soon_as_it_passes_max_line),
        cmocka_unit_test(comment_longer_than_max_line_returns_line_too_long),
        cmocka_unit_test(event_larger_than_max_event_returns_event_too_large),
        cmocka_unit_test(single_data_line_larger_than_max_event_is_refused),
        cmocka_unit_test(error_is_sticky_until_reset),
        cmocka_unit_test(reset_after_error_parses_a_fresh_stream),
        cmocka_unit_test(long_line_in_one_byte_reads_costs_linear_time),
        cmocka_unit_test(data_sentinel_is_not_an_item_and_ends_clean),
        cmocka_unit_test(stream_without_its_configured_sentinel_is_not_clean),
        cmocka_unit_test(terminal_type_event_is_delivered_flagged_as_terminal),
        cmocka_unit_test(bytes_after_terminal_are_counted_and_not_parsed),
        cmocka_unit_test(data_sentinel_matches_whatever_the_event_type),
        cmocka_unit_test(empty_sentinel_is_rejected),
        cmocka_unit_test(nonzero_from_on_event_stops_the_feed_with_canceled),
        cmocka_unit_test(nonzero_from_on_comment_stops_the_feed_with_canceled),
        cmocka_unit_test(comments_are_reported_and_never_counted_as_items),
        cmocka_unit_test(event_within_one_read_is_delivered_without_a_copy),
        cmocka_unit_test(event_spanning_reads_survives_the_callers_buffer_being_reused),
        cmocka_unit_test(retry_value_past_uint64_saturates),
        cmocka_unit_test(last_event_id_is_not_moved_by_an_undispatched_block),
        cmocka_unit_test(feed_after_end_returns_done),
        cmocka_unit_test(end_with_a_partial_line_is_not_clean),
        cmocka_unit_test(init_rejects_a_buffer_smaller_than_needed),
        cmocka_unit_test(setters_reject_out_of_range_limits),
        cmocka_unit_test(stats_fill_only_what_the_callers_struct_holds),
        cmocka_unit_test(calls_on_an_uninitialised_parser_return_einval),
        cmocka_unit_test(null_data_with_zero_length_is_a_no_op),
        cmocka_unit_test(ignored_lines_go_to_on_other),
        cmocka_unit_test(eol_search_finds_what_a_byte_loop_does_at_every_level),
        cmocka_unit_test(conformance_cases_parse_alike_at_every_vector_level),
        cmocka_unit_test(terminal_type_message_ends_at_the_first_untyped_event),
        cmocka_unit_test(one_line_events_count_as_the_general_path_counts),
        cmocka_unit_test(eol_masks_are_what_a_byte_loop_makes_at_every_level),
        cmocka_unit_test(one_line_events_of_every_length_parse_alike_at_every_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
