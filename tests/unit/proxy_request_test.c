/*
 * sg-proxy's request side (tools/sg-proxy/request.c) with no socket: a
 * request fed as conn.c feeds it, in reads of every size, and what comes
 * out - refused with the right status before its body is read, or routed,
 * its method whole, its body decoded in place, its header lines for
 * libcurl exactly the client's less the hop-by-hop ones, with libcurl's
 * defaults suppressed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../tools/common/http1.c"
#include "../../tools/sg-proxy/request.c"

static struct routes rs;

static int setup(void **state) {
    (void)state;
    static const char *const prefixes[] = {"/up", "/up/v1", "/a"};
    rs.n = 3;
    for (int i = 0; i < rs.n; i++) {
        rs.r[i].name = prefixes[i];
        rs.r[i].prefix = prefixes[i];
        rs.r[i].prefix_len = strlen(prefixes[i]);
    }
    return 0;
}

/* Feeds @req[0..@len) in reads of @step bytes (0: as much as the room
 * holds), asking for @want bytes of room each time, until the request is
 * whole or failed or the bytes run out. */
static enum preq_state feed_n(struct preq *q, const char *req, size_t len, size_t step,
                              size_t want) {
    size_t off = 0;
    while (off < len && (q->state == PREQ_HEAD || q->state == PREQ_BODY)) {
        size_t room;
        char *at = preq_room(q, want, &room);
        assert_non_null(at);
        size_t n = step == 0 || step > room ? room : step;
        n = n < len - off ? n : len - off;
        memcpy(at, req + off, n);
        off += n;
        preq_got(q, n, &rs);
    }
    return q->state;
}

static enum preq_state feed(struct preq *q, const char *req) {
    return feed_n(q, req, strlen(req), 0, 16384);
}

/* The status @req is refused with under @max_body (0: not refused), and
 * whether it was all in then. */
static int refused(const char *req, size_t max_body, bool *all_read) {
    struct preq q;
    preq_init(&q, max_body);
    int status = feed(&q, req) == PREQ_FAILED ? q.status : 0;
    *all_read = q.all_read;
    preq_free(&q);
    return status;
}

/* ------------------------------------------------------------ the method */

static void method_of_31_characters_goes_whole(void **state) {
    (void)state;
    struct preq q;
    preq_init(&q, 1000);
    assert_int_equal(feed(&q, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE /up/x HTTP/1.1\r\n\r\n"),
                     PREQ_WHOLE);
    assert_string_equal(q.method, "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDE");
    preq_free(&q);
}

static void method_longer_than_31_is_501_never_cut(void **state) {
    (void)state;
    bool all;
    assert_int_equal(
        refused("ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEF /up/x HTTP/1.1\r\n\r\n", 1000, &all),
        501);
    assert_true(all);
}

static void method_not_a_token_is_400(void **state) {
    (void)state;
    bool all;
    assert_int_equal(refused("PO\"ST /up/x HTTP/1.1\r\n\r\n", 1000, &all), 400);
}

/* ------------------------------------------------------------ the path */

static void segments_that_could_leave_the_route_are_refused(void **state) {
    (void)state;
    static const char *const out[] = {
        "/up/../x",           "/up/./x",          "/up/%2E%2E/x",   "/up/.%2e/x",
        "/up/..;/admin",      "/up/..%2fadmin",   "/up/..%2Fadmin", "/up/..\\admin",
        "/up/%2e%2e;x/admin", "/up/%252e%252e/x", "/up/.;/x",       "/up/%2e%2e%5cx",
        "/up/x/..",           "/up/x/..?q=1",     "/up/..%00/x",    "/up/..%3f/x",
        "/up/%25252E./x",
    };
    for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
        if (!preq_dot_segment(out[i], strlen(out[i]))) {
            fail_msg("%s was not refused", out[i]);
        }
    }
}

static void dots_that_are_no_segment_go(void **state) {
    (void)state;
    static const char *const in[] = {
        "/up/...",       "/up/a..b/c",     "/up/%2e%2e%2e/x",
        "/up/x?y=../..", "/up/x?..%2f..;", "/up/.well-known/x",
        "/up/v1/chat",   "/up/%2541/x",    "/up/x#/../y",
    };
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        if (preq_dot_segment(in[i], strlen(in[i]))) {
            fail_msg("%s was refused", in[i]);
        }
    }
}

static void path_still_decoding_after_8_rounds_is_refused(void **state) {
    (void)state;
    /* "%2541" decodes to "%41" then "A": two rounds; "%25" nested nine
     * times around "41" needs ten */
    char p[64] = "/up/%";
    for (int i = 0; i < 9; i++) {
        strcat(p, "25");
    }
    strcat(p, "41");
    assert_true(preq_dot_segment(p, strlen(p)));
    strcpy(p, "/up/%");
    for (int i = 0; i < 7; i++) {
        strcat(p, "25");
    }
    strcat(p, "41");
    assert_false(preq_dot_segment(p, strlen(p)));
}

static void refused_path_is_400_at_the_head(void **state) {
    (void)state;
    bool all;
    /* the body is announced, not sent: refused on the head alone */
    assert_int_equal(
        refused("POST /up/..;/admin HTTP/1.1\r\nContent-Length: 10\r\n\r\n", 1000, &all),
        400);
    assert_false(all);
}

/* ------------------------------------------------------------ routing */

static void longest_prefix_at_a_boundary_routes(void **state) {
    (void)state;
    struct preq q;
    preq_init(&q, 1000);
    assert_int_equal(feed(&q, "GET /up/v1/chat HTTP/1.1\r\n\r\n"), PREQ_WHOLE);
    assert_string_equal(q.route->prefix, "/up/v1");
    preq_free(&q);
    preq_init(&q, 1000);
    assert_int_equal(feed(&q, "GET /up/v1x HTTP/1.1\r\n\r\n"), PREQ_WHOLE);
    assert_string_equal(q.route->prefix, "/up");
    preq_free(&q);
    bool all;
    assert_int_equal(refused("GET /upx HTTP/1.1\r\n\r\n", 1000, &all), 404);
    assert_true(all);
    preq_init(&q, 1000);
    assert_int_equal(feed(&q, "GET /metrics?x HTTP/1.1\r\n\r\n"), PREQ_WHOLE);
    assert_int_equal(q.own, PREQ_OWN_METRICS);
    assert_null(q.route);
    preq_free(&q);
    /* the probes are the proxy's too, the path exactly; anything else
     * under them goes by the routes */
    static const struct {
        const char *head;
        enum preq_own own;
    } probes[] = {
        {"GET /healthz HTTP/1.1\r\n\r\n", PREQ_OWN_HEALTHZ},
        {"GET /readyz?verbose HTTP/1.1\r\n\r\n", PREQ_OWN_READYZ},
        {"GET /healthzx HTTP/1.1\r\n\r\n", PREQ_OWN_NONE},
        {"GET /readyz/x HTTP/1.1\r\n\r\n", PREQ_OWN_NONE},
        {"POST /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n", PREQ_OWN_NONE},
    };
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        preq_init(&q, 1000);
        enum preq_state st = feed(&q, probes[i].head);
        assert_int_equal(q.own, probes[i].own);
        if (probes[i].own != PREQ_OWN_NONE) {
            assert_int_equal(st, PREQ_WHOLE);
            assert_null(q.route);
        }
        preq_free(&q);
    }
}

/* ------------------------------------------------------------ the body */

static void content_length_past_max_body_is_413_at_the_head(void **state) {
    (void)state;
    bool all;
    assert_int_equal(refused("POST /up HTTP/1.1\r\nContent-Length: 17\r\n"
                             "Expect: 100-continue\r\n\r\n",
                             16, &all),
                     413);
    assert_false(all);
}

static const char chunked[] =
    "POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
    "X-A: b\r\n\r\n"
    "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-T: t\r\n\r\n";

static void chunked_body_is_decoded_in_place_whatever_the_reads(void **state) {
    (void)state;
    for (size_t step = 1; step <= sizeof(chunked); step++) {
        struct preq q;
        preq_init(&q, 11);
        /* the room asked for one byte at a time: the buffer grows (and
         * moves, under ASan) under the parsed head again and again */
        assert_int_equal(feed_n(&q, chunked, strlen(chunked), step, 1), PREQ_WHOLE);
        assert_int_equal(q.body_len, 11);
        assert_memory_equal(q.in + q.head_len, "hello world", 11);
        const sg_fm_h1_header *h = sg_fm_h1_find_header(&q.req, "x-a");
        assert_non_null(h);
        assert_int_equal(h->value_len, 1);
        assert_memory_equal(h->value, "b", 1);
        /* read framing is not kept: the buffer holds the head, the body
         * and at most one read */
        assert_true(q.in_len <= q.head_len + q.body_len + step + 2);
        preq_free(&q);
    }
}

static void chunked_body_past_max_body_is_413(void **state) {
    (void)state;
    struct preq q;
    preq_init(&q, 10);
    assert_int_equal(feed_n(&q, chunked, strlen(chunked), 3, 16), PREQ_FAILED);
    assert_int_equal(q.status, 413);
    preq_free(&q);
}

/* A chunked request whose extension (or trailer) is @n bytes long. */
static char *long_line(bool trailer, size_t n) {
    char *r = malloc(n + 200);
    assert_non_null(r);
    strcpy(r, "POST /up HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    strcat(r, trailer ? "1\r\nx\r\n0\r\nX-T: " : "1;");
    size_t at = strlen(r);
    memset(r + at, 'a', n);
    strcpy(r + at + n, trailer ? "\r\n\r\n" : "\r\nx\r\n0\r\n\r\n");
    return r;
}

static void chunk_extension_and_trailer_past_4_kib_are_400(void **state) {
    (void)state;
    for (int trailer = 0; trailer <= 1; trailer++) {
        struct preq q;
        char *r = long_line(trailer, 4000);
        preq_init(&q, 100);
        assert_int_equal(feed_n(&q, r, strlen(r), 100, 16384), PREQ_WHOLE);
        preq_free(&q);
        free(r);
        r = long_line(trailer, 4200);
        preq_init(&q, 100);
        assert_int_equal(feed_n(&q, r, strlen(r), 100, 16384), PREQ_FAILED);
        assert_int_equal(q.status, 400);
        preq_free(&q);
        free(r);
    }
}

static void content_length_body_is_the_bytes_sent(void **state) {
    (void)state;
    const char *r = "PUT /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcdeEXTRA";
    for (size_t step = 1; step < 12; step++) {
        struct preq q;
        preq_init(&q, 5);
        assert_int_equal(feed_n(&q, r, strlen(r), step, 1), PREQ_WHOLE);
        assert_true(q.has_body);
        assert_int_equal(q.body_len, 5);
        assert_memory_equal(q.in + q.head_len, "abcde", 5);
        preq_free(&q);
    }
}

static void head_past_32_kib_is_431(void **state) {
    (void)state;
    size_t n = PROXY_MAX_HEAD + 100;
    char *r = malloc(n + 1);
    assert_non_null(r);
    memset(r, 'a', n);
    memcpy(r, "GET /up HTTP/1.1\r\nX: ", 21);
    r[n] = '\0';
    struct preq q;
    preq_init(&q, 0);
    assert_int_equal(feed_n(&q, r, n, 4096, 4096), PREQ_FAILED);
    assert_int_equal(q.status, 431);
    preq_free(&q);
    free(r);
}

/* ------------------------------------------------------------ Expect */

static void expect_continue_is_seen_on_http_1_1_only(void **state) {
    (void)state;
    struct preq q;
    preq_init(&q, 100);
    assert_int_equal(feed(&q, "POST /up HTTP/1.1\r\nExpect: 100-Continue\r\n"
                              "Content-Length: 3\r\n\r\n"),
                     PREQ_BODY);
    assert_true(q.expect_continue);
    preq_free(&q);
    preq_init(&q, 100);
    assert_int_equal(feed(&q, "POST /up HTTP/1.0\r\nExpect: 100-continue\r\n"
                              "Content-Length: 3\r\n\r\n"),
                     PREQ_BODY);
    assert_false(q.expect_continue);
    preq_free(&q);
}

/* ------------------------------------------------------------ headers */

struct got {
    char lines[16][128];
    int n;
};

static int keep(void *ud, const char *line) {
    struct got *g = ud;
    assert_true(g->n < 16);
    snprintf(g->lines[g->n++], sizeof(g->lines[0]), "%s", line);
    return 0;
}

static void lines_of(const char *req, struct got *g) {
    struct preq q;
    preq_init(&q, 100);
    assert_int_equal(feed(&q, req), PREQ_WHOLE);
    memset(g, 0, sizeof(*g));
    assert_int_equal(preq_header_lines(&q, keep, g), 0);
    preq_free(&q);
}

static void header_lines_are_the_clients_and_no_libcurl_default(void **state) {
    (void)state;
    struct got g;
    lines_of("POST /up HTTP/1.1\r\nHost: h\r\nx-lower: a\r\nX-Empty:\r\n"
             "Authorization: Bearer k\r\nConnection: close, X-Gone\r\nX-Gone: 1\r\n"
             "Idempotency-Key: k1\r\nX-Deadline-Ms: 50\r\nKeep-Alive: 5\r\n"
             "TE: trailers\r\nAccept-Encoding: gzip\r\nExpect: 100-continue\r\n"
             "Content-Length: 2\r\n\r\n{}",
             &g);
    static const char *const want[] = {
        "x-lower: a", "X-Empty;",      "Authorization: Bearer k",
        "Accept:",    "Content-Type:", "Expect:"};
    assert_int_equal(g.n, 6);
    for (int i = 0; i < 6; i++) {
        assert_string_equal(g.lines[i], want[i]);
    }
}

static void clients_accept_and_content_type_replace_the_suppression(void **state) {
    (void)state;
    struct got g;
    lines_of("POST /up HTTP/1.1\r\nAccept: text/event-stream\r\n"
             "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
             &g);
    assert_int_equal(g.n, 3);
    assert_string_equal(g.lines[0], "Accept: text/event-stream");
    assert_string_equal(g.lines[1], "Content-Type: application/json");
    assert_string_equal(g.lines[2], "Expect:");
    /* a Content-Type the Connection header names goes, and is not
     * replaced by libcurl's form type */
    lines_of("POST /up HTTP/1.1\r\nContent-Type: application/json\r\n"
             "Connection: Content-Type\r\nContent-Length: 2\r\n\r\n{}",
             &g);
    assert_int_equal(g.n, 3);
    assert_string_equal(g.lines[0], "Accept:");
    assert_string_equal(g.lines[1], "Content-Type:");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(method_of_31_characters_goes_whole),
        cmocka_unit_test(method_longer_than_31_is_501_never_cut),
        cmocka_unit_test(method_not_a_token_is_400),
        cmocka_unit_test(segments_that_could_leave_the_route_are_refused),
        cmocka_unit_test(dots_that_are_no_segment_go),
        cmocka_unit_test(path_still_decoding_after_8_rounds_is_refused),
        cmocka_unit_test(refused_path_is_400_at_the_head),
        cmocka_unit_test(longest_prefix_at_a_boundary_routes),
        cmocka_unit_test(content_length_past_max_body_is_413_at_the_head),
        cmocka_unit_test(chunked_body_is_decoded_in_place_whatever_the_reads),
        cmocka_unit_test(chunked_body_past_max_body_is_413),
        cmocka_unit_test(chunk_extension_and_trailer_past_4_kib_are_400),
        cmocka_unit_test(content_length_body_is_the_bytes_sent),
        cmocka_unit_test(head_past_32_kib_is_431),
        cmocka_unit_test(expect_continue_is_seen_on_http_1_1_only),
        cmocka_unit_test(header_lines_are_the_clients_and_no_libcurl_default),
        cmocka_unit_test(clients_accept_and_content_type_replace_the_suppression),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
