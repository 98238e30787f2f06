/*
 * NDJSON framing tests: one item per non-empty line, CRLF tolerated, every
 * split equivalent, limits, errors and the end verdict.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/framing.h>

typedef struct rec {
    char bytes[4096];
    size_t used;
    size_t len[64];
    int n;
    int cancel_after;
} rec;

static int rec_item(const char *line, size_t len, void *ud) {
    rec *r = ud;
    assert_true(r->n < 64);
    assert_true(len <= sizeof(r->bytes) - r->used);
    memcpy(r->bytes + r->used, line, len);
    r->used += len;
    r->len[r->n++] = len;
    return r->cancel_after != 0 && r->n >= r->cancel_after;
}

typedef struct fixture {
    sg_ndjson_parser p;
    char buf[1024];
    rec r;
} fixture;

static fixture *fx_new(size_t max_line) {
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    sg_ndjson_config cfg;
    sg_ndjson_config_init(&cfg);
    assert_int_equal(sg_ndjson_config_set_max_line(&cfg, max_line), 0);
    assert_int_equal(sg_ndjson_config_set_on_item(&cfg, rec_item), 0);
    assert_true(sg_ndjson_buffer_size(&cfg) <= sizeof(f->buf));
    assert_int_equal(sg_ndjson_init(&f->p, &cfg, &f->r, f->buf, sizeof(f->buf)), 0);
    return f;
}

static void feed_ok(fixture *f, const char *s, size_t n) {
    assert_int_equal(sg_ndjson_feed(&f->p, s, n), (ptrdiff_t)n);
}

#define FEED(f, lit) feed_ok((f), (lit), sizeof(lit) - 1)

/* The items, joined by '|', for comparing whole runs. */
static void items_as_text(const rec *r, char *out, size_t cap) {
    size_t o = 0;
    size_t off = 0;
    for (int i = 0; i < r->n; i++) {
        assert_true(o + r->len[i] + 2 < cap);
        memcpy(out + o, r->bytes + off, r->len[i]);
        o += r->len[i];
        off += r->len[i];
        out[o++] = '|';
    }
    out[o] = '\0';
}

static const char ollama[] =
    "{\"model\":\"llama3\",\"response\":\"Hel\",\"done\":false}\n"
    "{\"model\":\"llama3\",\"response\":\"lo\",\"done\":false}\r\n"
    "\n"
    "\r\n"
    "{\"model\":\"llama3\",\"response\":\"\",\"done\":true}\n";
static const char ollama_items[] =
    "{\"model\":\"llama3\",\"response\":\"Hel\",\"done\":false}|"
    "{\"model\":\"llama3\",\"response\":\"lo\",\"done\":false}|"
    "{\"model\":\"llama3\",\"response\":\"\",\"done\":true}|";

static void each_non_empty_line_is_one_item(void **state) {
    (void)state;
    fixture *f = fx_new(256);
    FEED(f, ollama);
    char got[1024];
    items_as_text(&f->r, got, sizeof(got));
    assert_string_equal(got, ollama_items);
    sg_ndjson_stats st = SG_NDJSON_STATS_INIT;
    assert_int_equal(sg_ndjson_get_stats(&f->p, &st), 0);
    assert_int_equal(st.items, 3);
    assert_int_equal(st.lines, 5);
    assert_int_equal(st.bytes, sizeof(ollama) - 1);
    free(f);
}

static void every_split_gives_identical_items(void **state) {
    (void)state;
    const size_t n = sizeof(ollama) - 1;
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b += 7) {
            fixture *f = fx_new(256);
            feed_ok(f, ollama, a);
            feed_ok(f, ollama + a, b - a);
            feed_ok(f, ollama + b, n - b);
            char got[1024];
            items_as_text(&f->r, got, sizeof(got));
            assert_string_equal(got, ollama_items);
            bool clean = false;
            assert_int_equal(sg_ndjson_end(&f->p, &clean), 0);
            assert_true(clean);
            free(f);
        }
    }
}

static void one_byte_reads_give_identical_items(void **state) {
    (void)state;
    fixture *f = fx_new(256);
    for (size_t i = 0; i + 1 < sizeof(ollama); i++) {
        feed_ok(f, ollama + i, 1);
    }
    char got[1024];
    items_as_text(&f->r, got, sizeof(got));
    assert_string_equal(got, ollama_items);
    free(f);
}

static void crlf_split_between_reads_is_removed(void **state) {
    (void)state;
    fixture *f = fx_new(64);
    FEED(f, "{\"a\":1}\r");
    FEED(f, "\n");
    assert_int_equal(f->r.n, 1);
    assert_int_equal(f->r.len[0], 7);
    free(f);
}

static void lone_cr_is_kept_inside_the_line(void **state) {
    (void)state;
    fixture *f = fx_new(64);
    FEED(f, "{\"a\":\r1}\n");
    assert_int_equal(f->r.n, 1);
    assert_int_equal(f->r.len[0], 8);
    assert_memory_equal(f->r.bytes, "{\"a\":\r1}", 8);
    free(f);
}

static void leading_bom_is_stripped(void **state) {
    (void)state;
    fixture *f = fx_new(64);
    FEED(f, "\xEF\xBB");
    FEED(f, "\xBF{}\n");
    assert_int_equal(f->r.n, 1);
    assert_int_equal(f->r.len[0], 2);
    free(f);
}

static void line_longer_than_max_line_returns_line_too_long(void **state) {
    (void)state;
    fixture *f = fx_new(16);
    FEED(f, "0123456789abcdef\r\n"); /* 16 bytes + CRLF: accepted */
    assert_int_equal(sg_ndjson_feed(&f->p, "0123456789abcdefg\n", 18), SG_ELINE_TOO_LONG);
    assert_int_equal(f->r.n, 1);
    free(f);
}

static void unterminated_line_is_refused_once_past_max_line(void **state) {
    (void)state;
    fixture *f = fx_new(16);
    FEED(f, "0123456789abcdef");
    FEED(f, "\r"); /* might still be a CRLF */
    assert_int_equal(sg_ndjson_feed(&f->p, "x", 1), SG_ELINE_TOO_LONG);
    free(f);
    /* one byte past max_line that is no CR: refused at once, not held */
    f = fx_new(16);
    FEED(f, "0123456789abcdef");
    assert_int_equal(sg_ndjson_feed(&f->p, "g", 1), SG_ELINE_TOO_LONG);
    free(f);
    f = fx_new(16);
    assert_int_equal(sg_ndjson_feed(&f->p, "0123456789abcdefg", 17), SG_ELINE_TOO_LONG);
    free(f);
}

static void error_is_sticky_until_reset(void **state) {
    (void)state;
    fixture *f = fx_new(16);
    assert_int_equal(sg_ndjson_feed(&f->p, "0123456789abcdefgh\n", 19),
                     SG_ELINE_TOO_LONG);
    assert_int_equal(sg_ndjson_feed(&f->p, "{}\n", 3), SG_ELINE_TOO_LONG);
    bool clean = true;
    assert_int_equal(sg_ndjson_end(&f->p, &clean), 0);
    assert_false(clean);
    assert_int_equal(sg_ndjson_reset(&f->p), 0);
    FEED(f, "{}\n");
    assert_int_equal(f->r.n, 1);
    free(f);
}

static void final_line_without_newline_is_discarded_and_unclean(void **state) {
    (void)state;
    fixture *f = fx_new(64);
    FEED(f, "{\"a\":1}\n{\"b\":");
    bool clean = true;
    assert_int_equal(sg_ndjson_end(&f->p, &clean), 0);
    assert_false(clean);
    assert_int_equal(f->r.n, 1);
    assert_int_equal(sg_ndjson_feed(&f->p, "2}\n", 3), SG_EDONE);
    free(f);
}

static void nonzero_from_callback_returns_canceled(void **state) {
    (void)state;
    fixture *f = fx_new(64);
    f->r.cancel_after = 1;
    assert_int_equal(sg_ndjson_feed(&f->p, "{}\n{}\n", 6), SG_ECANCELED);
    assert_int_equal(f->r.n, 1);
    free(f);
}

static void init_validates_its_arguments(void **state) {
    (void)state;
    sg_ndjson_parser p;
    char buf[64];
    sg_ndjson_config cfg;
    sg_ndjson_config_init(&cfg);
    assert_int_equal(sg_ndjson_config_set_max_line(&cfg, 63), 0);
    assert_int_equal(sg_ndjson_buffer_size(&cfg), 64);
    assert_int_equal(sg_ndjson_init(&p, &cfg, NULL, buf, 63), SG_ENOBUFS);
    assert_int_equal(sg_ndjson_init(&p, &cfg, NULL, NULL, 64), SG_EINVAL);
    /* a limit out of range is refused where it is set: the config keeps 63 */
    assert_int_equal(sg_ndjson_config_set_max_line(&cfg, 1), SG_ERANGE);
    assert_int_equal(sg_ndjson_config_set_max_line(NULL, 64), SG_EINVAL);
    assert_int_equal(sg_ndjson_buffer_size(&cfg), 64);
    memset(&p, 0, sizeof(p));
    assert_int_equal(sg_ndjson_feed(&p, "{}\n", 3), SG_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_non_empty_line_is_one_item),
        cmocka_unit_test(every_split_gives_identical_items),
        cmocka_unit_test(one_byte_reads_give_identical_items),
        cmocka_unit_test(crlf_split_between_reads_is_removed),
        cmocka_unit_test(lone_cr_is_kept_inside_the_line),
        cmocka_unit_test(leading_bom_is_stripped),
        cmocka_unit_test(line_longer_than_max_line_returns_line_too_long),
        cmocka_unit_test(unterminated_line_is_refused_once_past_max_line),
        cmocka_unit_test(error_is_sticky_until_reset),
        cmocka_unit_test(final_line_without_newline_is_discarded_and_unclean),
        cmocka_unit_test(nonzero_from_callback_returns_canceled),
        cmocka_unit_test(init_validates_its_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
