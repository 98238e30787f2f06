/*
 * What an open HTTP/2 stream costs: the heap the library (and nghttp2 under
 * it) holds per guarded stream while many are open on one connection,
 * against the real sg-fakemodel over loopback h2c.
 *
 * Each stream is a POST with a chat-sized JSON body, an Authorization
 * header and a profile-less SSE framing; the server sends one item and then
 * stalls, so every stream is open, past its first item and quiet when the
 * heap is read (glibc's mallinfo2: bytes in use, mmapped chunks included).
 * The heap is read before the operations are made, on a connection that
 * already carried one such stream, so the connection's own buffers are not
 * counted.
 *
 * Usage: h2_memory_test PATH-TO-sg-fakemodel
 */
#include "h2_test_util.h"

#include "h2/internal.h"     /* which request copy an operation holds */
#include "policy/internal.h" /* and which options */

#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *g_fm_path;

/* Heap bytes per open stream, at most: what the library holds today with
 * a little room (it held 6,292 before its request copy was shared and its
 * rarely used parts were allocated only when used, 3,395 before the
 * policy's options were shared too, 2,887 before the operation's fields
 * were packed and its stamped headers made when it is submitted, 2,759
 * before the body's state was kept smaller than the public sg_stream, the
 * hedge slots and an endpoint's name held only when used, and a burst's
 * write buffer let go once written, 2,208 before the SSE parser's and the
 * attempt record's smaller forms, 2,048 before the operation found its
 * connection through its request copy and its root through its
 * lifecycle: 2,032 at 1,000 streams, 2,019 at 4,000 since).  The goal of
 * issue 37 is 2 KiB per stream. */
#define HEAP_PER_STREAM_MAX 2040

typedef struct mem_run {
    int n;           /* streams */
    int first;       /* streams that delivered their first item */
    int done;        /* operations ended */
    size_t heap0;    /* before the operations were made */
    size_t heap_all; /* when every stream had delivered its first item */
    sg_h2_op **ops;
} mem_run;

static size_t heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

typedef struct mem_slot {
    mem_run *r;
    bool got_first;
} mem_slot;

static int on_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    mem_slot *s = ud;
    if (!s->got_first) {
        s->got_first = true;
        if (++s->r->first == s->r->n) {
            s->r->heap_all = heap_in_use();
            for (int i = 0; i < s->r->n; i++) {
                sg_h2_op_cancel(s->r->ops[i]); /* read: now end them all */
            }
        }
    }
    return 0;
}

static void on_done(sg_h2_op *op, void *ud) {
    (void)op;
    mem_slot *s = ud;
    s->r->done++;
}

/* A chat request as an SDK sends it. */
static const char k_body[] =
    "{\"model\":\"gpt-4o-mini\",\"stream\":true,\"stream_options\":{\"include_usage\":"
    "true},\"messages\":[{\"role\":\"system\",\"content\":\"You are a helpful "
    "assistant. Answer briefly.\"},{\"role\":\"user\",\"content\":\"Write one "
    "sentence about the sea, then one about the mountains, and then stop.\"}],"
    "\"temperature\":0.2,\"max_tokens\":256}";

static sg_h2_request *make_request(const char *query) {
    char path[256];
    snprintf(path, sizeof(path), "/v1/chat/completions?%s", query);
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    sg_stream_config_set_terminal_data(&framing, "[DONE]");
    sg_h2_request *req = NULL;
    assert_int_equal(sg_h2_request_new(&req), 0);
    assert_int_equal(sg_h2_request_set_method(req, "POST"), 0);
    assert_int_equal(sg_h2_request_set_path(req, path), 0);
    assert_int_equal(sg_h2_request_set_framing(req, &framing), 0);
    assert_int_equal(
        sg_h2_request_add_header(req, "Authorization",
                                 "Bearer sk-test-0123456789abcdefghijklmnopqrstuvwxyz"),
        0);
    assert_int_equal(sg_h2_request_add_header(req, "Content-Type", "application/json"),
                     0);
    assert_int_equal(sg_h2_request_set_body(req, k_body, sizeof(k_body) - 1), 0);
    assert_int_equal(sg_h2_request_set_on_item(req, on_item), 0);
    assert_int_equal(sg_h2_request_set_on_done(req, on_done), 0);
    return req;
}

static sg_op_options *make_policy(void) {
    sg_op_options *po = NULL;
    assert_int_equal(sg_op_options_new(&po), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(60)), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(po, SG_SEC(30)), 0);
    /* a POST declared safe to repeat, up to three attempts: the policy
     * keeps room for retries it never makes */
    assert_int_equal(sg_op_options_set_idempotent(po, true), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 3), 0);
    return po;
}

/* Runs @n streams at once on @c, each one item then a stall; fills @r. */
static void run_open_streams(sg_h2_conn *c, int n, mem_run *r) {
    memset(r, 0, sizeof(*r));
    r->n = n;
    r->ops = calloc((size_t)n, sizeof(*r->ops));
    mem_slot *slots = calloc((size_t)n, sizeof(*slots));
    assert_non_null(r->ops);
    assert_non_null(slots);
    sg_h2_request *req = make_request("n=100&gap=10&stall_after=1&stall=forever");
    sg_op_options *po = make_policy();
    r->heap0 = heap_in_use();
    for (int i = 0; i < n; i++) {
        slots[i].r = r;
        assert_int_equal(sg_h2_op_new(&r->ops[i], c, po, req, &slots[i]), 0);
    }
    sg_op_options_free(po);
    sg_h2_request_free(req);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(r->first, n);
    assert_int_equal(r->done, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(sg_h2_op_outcome(r->ops[i]), SG_OUTCOME_CANCELLED);
        sg_h2_op_free(r->ops[i]);
    }
    free(slots);
    free(r->ops);
    r->ops = NULL;
}

/* The heap an open, quiet stream holds, the library's and nghttp2's
 * together, stays within HEAP_PER_STREAM_MAX at 1,000 streams and at
 * 4,000 on one connection. */
static void open_stream_heap_is_bounded(void **state) {
    (void)state;
    static const char *const extra[] = {"--log-cap", "100", "--h2-max-streams", "20000",
                                        NULL};
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, extra), 0);
    static const int sizes[] = {1000, 4000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        /* a connection each: the server limits how many streams a client
         * may reset on one (rapid-reset protection), and each run resets
         * all of its own */
        char err[SG_H2_ERROR_SIZE] = "";
        sg_h2_conn *c = NULL;
        assert_int_equal(h2t_connect(&s, false, &c, err), 0);
        mem_run r;
        run_open_streams(c, 1, &r); /* the connection's buffers, once */
        run_open_streams(c, sizes[k], &r);
        double per = ((double)r.heap_all - (double)r.heap0) / sizes[k];
        printf("%d open streams: heap %+.0f bytes = %.0f bytes per stream\n", sizes[k],
               (double)r.heap_all - (double)r.heap0, per);
        assert_true(per <= HEAP_PER_STREAM_MAX);
        sg_h2_conn_free(c);
    }
    h2t_stop(&s);
}

/* The largest read buffer an item was read from, in run_one. */
static size_t g_rbuf_max;

static int on_item_rbuf(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)item;
    (void)ud;
    const sg_h2_conn *c = SG__H2_CONN_OF(op);
    if (c->rbuf_size > g_rbuf_max) {
        g_rbuf_max = c->rbuf_size;
    }
    return 0;
}

/* Runs one stream of @query on @c to its end (OK). */
static void run_one(sg_h2_conn *c, const char *query) {
    g_rbuf_max = 0;
    sg_h2_request *req = NULL;
    assert_int_equal(sg_h2_request_new(&req), 0);
    char path[256];
    snprintf(path, sizeof(path), "/v1/chat/completions?%s", query);
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    sg_stream_config_set_terminal_data(&framing, "[DONE]");
    assert_int_equal(sg_h2_request_set_method(req, "GET"), 0);
    assert_int_equal(sg_h2_request_set_path(req, path), 0);
    assert_int_equal(sg_h2_request_set_framing(req, &framing), 0);
    assert_int_equal(sg_h2_request_set_on_item(req, on_item_rbuf), 0);
    sg_op_options *po = NULL;
    assert_int_equal(sg_op_options_new(&po), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(60)), 0);
    sg_h2_op *op = NULL;
    assert_int_equal(sg_h2_op_new(&op, c, po, req, NULL), 0);
    sg_op_options_free(po);
    sg_h2_request_free(req);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(op), SG_OUTCOME_OK);
    sg_h2_op_free(op);
}

/* A connection reads into 16 KiB while it is quiet (64 KiB only while
 * its peer sends faster than it parses) and lets the large buffer go once
 * it is quiet again: a quiet connection holds less than 96 KiB in all (the
 * read buffer, nghttp2's session, the health of its endpoint; the read
 * buffer alone was 64 KiB for the connection's life). */
static void a_quiet_connection_reads_into_16_kib(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    size_t heap0 = heap_in_use();
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    run_one(c, "n=20&gap=2");
    assert_int_equal(g_rbuf_max, 16384);
    assert_int_equal(c->rbuf_size, 16384);
    size_t quiet = heap_in_use() - heap0;
    printf("a quiet connection: heap +%zu bytes\n", quiet);
    assert_true(quiet < 96 * 1024);
    /* 20,000 items unpaced: when a step reads its whole budget (most
     * runs; not when the server is the slower one) the items that follow
     * are read 64 KiB at a time */
    run_one(c, "n=20000&gap=0");
    printf("unpaced: items read from up to %zu bytes\n", g_rbuf_max);
    assert_true(g_rbuf_max == 16384 || g_rbuf_max == 65536);
    run_one(c, "n=60&gap=2"); /* 60 quiet reads and more */
    assert_int_equal(c->rbuf_size, 16384);
    size_t again = heap_in_use() - heap0;
    printf("quiet again: heap +%zu bytes\n", again);
    assert_true(again < 96 * 1024);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

static void on_done_count(sg_h2_op *op, void *ud) {
    (void)op;
    (*(int *)ud)++;
}

/* Operations made from one request share its copy; a request changed in
 * between (any setter) is copied anew, and each operation sends its own
 * version. */
static void a_request_is_shared_until_it_changes(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    sg_h2_request *req = NULL;
    assert_int_equal(sg_h2_request_new(&req), 0);
    assert_int_equal(sg_h2_request_set_method(req, "GET"), 0);
    assert_int_equal(sg_h2_request_set_on_done(req, on_done_count), 0);
    assert_int_equal(sg_h2_request_set_path(req, "/v1/chat/completions?n=2&_tag=1"), 0);
    int done = 0;
    sg_h2_op *a = NULL, *b = NULL, *d = NULL;
    assert_int_equal(sg_h2_op_new(&a, c, NULL, req, &done), 0);
    assert_int_equal(sg_h2_op_new(&b, c, NULL, req, &done), 0);
    assert_ptr_equal(a->req, b->req);
    assert_int_equal(a->req->refs, 2);
    assert_int_equal(sg_h2_request_set_path(req, "/v1/chat/completions?n=2&_tag=2"), 0);
    assert_int_equal(sg_h2_op_new(&d, c, NULL, req, &done), 0);
    assert_ptr_not_equal(d->req, a->req);
    sg_h2_request_free(req); /* the operations keep their copies */
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(done, 3);
    assert_int_equal(sg_h2_op_outcome(a), SG_OUTCOME_OK);
    assert_int_equal(sg_h2_op_outcome(d), SG_OUTCOME_OK);
    sg_h2_op_free(a);
    sg_h2_op_free(b);
    sg_h2_op_free(d);
    sg_h2_conn_free(c);
    char *log = h2t_log_when(&s, "\"event\":\"received\"", 3);
    assert_non_null(log);
    assert_int_equal(fm_count(log, "_tag=1"), 2 * fm_count(log, "_tag=2"));
    assert_true(h2t_log_id_of_tag(log, 2) >= 0);
    free(log);
    h2t_stop(&s);
}

static const sg_op_options *options_of(const sg_h2_op *op) {
    return sg__op_options_of(sg_h2_op_policy(op));
}

/* Operations made on one connection from one request and one options
 * object share one frozen copy of the options; a setter called in between
 * (any: tests/unit/policy_options_version_test.c), or the connection's
 * retry budget changed, makes the next operation a copy of its own, and
 * each operation runs by the options it was made with: the one made after
 * a stream timeout was set is cut by it, the two before it are not. */
static void options_are_shared_until_they_change(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    sg_h2_request *req = NULL;
    assert_int_equal(sg_h2_request_new(&req), 0);
    assert_int_equal(sg_h2_request_set_method(req, "GET"), 0);
    assert_int_equal(sg_h2_request_set_on_done(req, on_done_count), 0);
    /* 20 items 20 ms apart: about 400 ms */
    assert_int_equal(sg_h2_request_set_path(req, "/v1/chat/completions?n=20&gap=20"), 0);
    sg_op_options *po = NULL;
    assert_int_equal(sg_op_options_new(&po), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(10)), 0);
    int done = 0;
    sg_h2_op *a = NULL, *b = NULL, *d = NULL, *e = NULL;
    assert_int_equal(sg_h2_op_new(&a, c, po, req, &done), 0);
    assert_int_equal(sg_h2_op_new(&b, c, po, req, &done), 0);
    assert_ptr_equal(options_of(a), options_of(b));
    assert_int_equal(sg_op_options_set_stream_timeout(po, SG_MS(100)), 0);
    assert_int_equal(sg_h2_op_new(&d, c, po, req, &done), 0);
    assert_ptr_not_equal(options_of(d), options_of(a));
    sg_retry_budget *rb = NULL;
    assert_int_equal(sg_retry_budget_new(&rb, 10, 0.1), 0);
    assert_int_equal(sg_h2_conn_set_retry_budget(c, rb), 0);
    assert_int_equal(sg_h2_op_new(&e, c, po, req, &done), 0);
    assert_ptr_not_equal(options_of(e), options_of(d));
    sg_op_options_free(po); /* the operations keep their copies */
    sg_h2_request_free(req);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(done, 4);
    assert_int_equal(sg_h2_op_outcome(a), SG_OUTCOME_OK);
    assert_int_equal(sg_h2_op_outcome(b), SG_OUTCOME_OK);
    assert_int_equal(sg_h2_op_outcome(d), SG_OUTCOME_STREAM_TIMEOUT);
    assert_int_equal(sg_h2_op_outcome(e), SG_OUTCOME_STREAM_TIMEOUT);
    sg_h2_op_free(a);
    sg_h2_op_free(b);
    sg_h2_op_free(d);
    sg_h2_op_free(e);
    sg_h2_conn_free(c);
    sg_retry_budget_free(rb);
    h2t_stop(&s);
}

static int count_entry(const sg_health_entry *e, void *ud) {
    uint64_t *ids = ud; /* [0]: how many, then their key ids */
    if (ids[0] < 7) {
        ids[1 + ids[0]] = e->key_id;
    }
    ids[0]++;
    return 0;
}

/* Operations made from one request key their endpoint once (the
 * connection keeps the key with the request's copy) and land on the entry
 * a fresh key names: a request with another credential on another entry,
 * one with the first credential again - a new copy, keyed anew - on the
 * first. */
static void a_request_keys_its_endpoint_once_and_rightly(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    sg_health *h = NULL;
    assert_int_equal(sg_health_new(&h), 0);
    assert_int_equal(sg_h2_conn_set_health(c, h), 0);
    static const char *const creds[] = {"Bearer sk-one", "Bearer sk-two",
                                        "Bearer sk-one"};
    sg_h2_op *ops[9] = {NULL};
    int done = 0;
    for (int k = 0; k < 3; k++) {
        sg_h2_request *req = NULL;
        assert_int_equal(sg_h2_request_new(&req), 0);
        assert_int_equal(sg_h2_request_set_method(req, "GET"), 0);
        assert_int_equal(sg_h2_request_set_on_done(req, on_done_count), 0);
        assert_int_equal(sg_h2_request_set_path(req, "/v1/chat/completions?n=2"), 0);
        assert_int_equal(sg_h2_request_add_header(req, "Authorization", creds[k]), 0);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(sg_h2_op_new(&ops[3 * k + i], c, NULL, req, &done), 0);
        }
        assert_true(ops[3 * k]->req->key.set); /* made by the first, kept */
        assert_ptr_equal(ops[3 * k + 2]->req, ops[3 * k]->req);
        sg_h2_request_free(req);
    }
    assert_memory_not_equal(ops[0]->req->key.key, ops[3]->req->key.key, 16);
    assert_memory_equal(ops[0]->req->key.key, ops[6]->req->key.key, 16);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(done, 9);
    uint64_t ids[8] = {0};
    assert_int_equal(sg_health_foreach(h, h2t_now(), count_entry, ids), 0);
    assert_int_equal(ids[0], 2); /* one entry per credential */
    for (int i = 0; i < 9; i++) {
        assert_int_equal(sg_h2_op_outcome(ops[i]), SG_OUTCOME_OK);
        sg_h2_op_free(ops[i]);
    }
    sg_h2_conn_free(c);
    sg_health_free(h);
    h2t_stop(&s);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-sg-fakemodel\n", argv[0]);
        return 2;
    }
    g_fm_path = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(open_stream_heap_is_bounded, h2t_teardown),
        cmocka_unit_test_teardown(a_quiet_connection_reads_into_16_kib, h2t_teardown),
        cmocka_unit_test_teardown(a_request_is_shared_until_it_changes, h2t_teardown),
        cmocka_unit_test_teardown(options_are_shared_until_they_change, h2t_teardown),
        cmocka_unit_test_teardown(a_request_keys_its_endpoint_once_and_rightly,
                                  h2t_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
