/*
 * The HTTP/2 transport against the real sg-fakemodel, h2c and TLS, over
 * loopback sockets: many guarded streams on one connection, each expired
 * stream cancelled alone (the server's log shows RST_STREAM(CANCEL) for
 * exactly those), refused streams retried, connection loss, TLS checks.
 *
 * Usage: h2_fakemodel_test PATH-TO-sg-fakemodel
 */
#include "h2_test_util.h"
#include "../sg_auto.h"

#include "h2/internal.h" /* one test looks at a link's read state */

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static const char *g_fm_path;

/* --------------------------------------------------------------- a run */

typedef struct expect {
    int tag;
    sg_outcome want;
    bool want_partial;
    bool want_cancel_rst; /* the server must see RST_STREAM(CANCEL) */
    uint64_t items;
    bool discarded;
    bool done;
    sg_h2_op *op;
} expect;

static int count_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    expect *e = ud;
    e->items++;
    return 0;
}

static void on_discard(sg_h2_op *op, uint32_t attempt, sg_outcome outcome, void *ud) {
    (void)op;
    (void)attempt;
    (void)outcome;
    expect *e = ud;
    e->discarded = true;
}

static void on_done(sg_h2_op *op, void *ud) {
    (void)op;
    expect *e = ud;
    e->done = true;
}

static const sg_test_h2_cbs g_cbs = {
    .on_item = count_item, .on_discard = on_discard, .on_done = on_done};
static sg_stream_config g_sse; /* SSE ending at "[DONE]", set in main */

/* One scenario kind of the mixed run: a query and the clocks it meets. */
typedef struct kind {
    const char *query;
    int64_t first_item;
    int64_t idle;
    uint64_t max_items;
    sg_outcome want;
    bool partial;
    bool cancel_rst;
} kind;

static const kind g_kinds[] = {
    /* ok */
    {"n=5&gap=5", SG_SEC(3), SG_SEC(3), 0, SG_OUTCOME_OK, false, false},
    /* mid-stream stall: the idle clock fires */
    {"n=10&gap=5&stall_after=2&stall=forever", SG_SEC(3), SG_MS(300), 0,
     SG_OUTCOME_IDLE_TIMEOUT, true, true},
    /* slow first item: the first-item clock fires */
    {"n=3&first_delay=5000", SG_MS(300), SG_SEC(3), 0, SG_OUTCOME_FIRST_ITEM_TIMEOUT,
     false, true},
    /* keepalive comments do not keep a stalled generation alive */
    {"n=10&gap=5&stall_after=1&stall=forever&keepalive=20", SG_SEC(3), SG_MS(300), 0,
     SG_OUTCOME_IDLE_TIMEOUT, true, true},
    /* runaway generation: the item cap stops it */
    {"runaway=1&gap=1", SG_SEC(3), SG_SEC(3), 20, SG_OUTCOME_CAP_EXCEEDED, true, true},
    /* the server resets the stream mid-body */
    {"n=10&gap=5&drop_after=3&drop=rst", SG_SEC(3), SG_SEC(3), 0, SG_OUTCOME_TRUNCATED,
     true, false},
    /* slow but within its clock */
    {"n=3&first_delay=100", SG_SEC(2), SG_SEC(3), 0, SG_OUTCOME_OK, false, false},
};
#define NKINDS (sizeof(g_kinds) / sizeof(g_kinds[0]))

static void run_mixed(bool tls, int nstreams) {
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    int rv = h2t_connect(&s, tls, &c, err);
    if (rv != 0) {
        print_error("connect: %s: %s\n", sg_errname(rv), err);
    }
    assert_int_equal(rv, 0);

    expect *ex = calloc((size_t)nstreams, sizeof(*ex));
    assert_non_null(ex);
    int64_t t0 = h2t_now();
    for (int i = 0; i < nstreams; i++) {
        const kind *k = &g_kinds[(size_t)i % NKINDS];
        char path[256];
        snprintf(path, sizeof(path), "/v1/chat/completions?%s&_tag=%d", k->query, i);
        SG_AUTO_OPTIONS(po);
        sg_op_options_set_budget(po, SG_SEC(10));
        sg_op_options_set_max_attempts(po, 1);
        sg_op_options_set_first_item_timeout(po, k->first_item);
        sg_op_options_set_idle_timeout(po, k->idle);
        sg_op_options_set_max_items(po, k->max_items);
        sg_test_h2_req req;
        memset(&req, 0, sizeof(req));
        req.method = "GET";
        req.path = path;
        req.deadline_header = true;
        ex[i].tag = i;
        ex[i].want = k->want;
        ex[i].want_partial = k->partial;
        ex[i].want_cancel_rst = k->cancel_rst;
        assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &ex[i], &ex[i].op),
                         0);
    }
    assert_int_equal(sg_h2_conn_running(c), nstreams);
    assert_int_equal(sg_h2_conn_run(c), 0);
    int64_t elapsed = h2t_now() - t0;
    /* Every clock above is at most 3 s and the stalls are forever: nothing
     * may have waited for the 10 s budget (slack for valgrind). */
    assert_true(elapsed < SG_SEC(9));

    /* Wait until the server has logged every reset we sent. */
    int resets = 0;
    for (int i = 0; i < nstreams; i++) {
        resets += ex[i].want_cancel_rst ? 1 : 0;
    }
    char *log = h2t_log_when(&s, "\"h2_error\":\"CANCEL\"", resets);
    assert_non_null(log);
    for (int i = 0; i < nstreams; i++) {
        expect *e = &ex[i];
        assert_true(e->done);
        sg_outcome got = sg_h2_op_outcome(e->op);
        if (got != e->want) {
            print_error("stream %d (%s): %s, want %s (%s)\n", i,
                        g_kinds[(size_t)i % NKINDS].query, sg_outcome_name(got),
                        sg_outcome_name(e->want), sg_h2_op_error(e->op));
        }
        assert_int_equal(got, e->want);
        const sg_op_attempt *a = sg_op_attempt_at(sg_h2_op_policy(e->op), 0);
        assert_non_null(a);
        assert_int_equal(a->partial, e->want_partial);
        assert_int_equal(e->discarded, e->want_partial);
        long id = h2t_log_id_of_tag(log, i);
        assert_true(id > 0);
        int code = h2t_log_gone_code(log, id);
        if (e->want_cancel_rst) {
            if (code != 8) {
                print_error("stream %d: client_gone code %d, want 8\n", i, code);
            }
            assert_int_equal(code, 8); /* NGHTTP2_CANCEL */
        } else {
            assert_int_equal(code, -1); /* no client_gone at all */
        }
        sg_h2_op_free(e->op);
    }
    /* The deadline header was stamped. */
    assert_null(strstr(log, "\"x_deadline_ms\":null"));
    free(log);
    free(ex);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

static void h2c_100_mixed_streams_each_classified_and_only_expired_reset(void **state) {
    (void)state;
    run_mixed(false, 100);
}

static void tls_100_mixed_streams_each_classified_and_only_expired_reset(void **state) {
    (void)state;
    run_mixed(true, 100);
}

/* ------------------------------------------------------- TLS and ALPN */

static void tls_without_the_ca_fails_verification(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    sg_h2_conn_options o;
    memset(&o, 0, sizeof(o));
    char err[SG_H2_ERROR_SIZE] = "";
    o.host = "localhost";
    o.port = s.port;
    o.tls = true;
    o.errbuf = err;
    sg_h2_conn *c = (sg_h2_conn *)&o; /* must be reset to NULL */
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_ETLS_VERIFY);
    assert_null(c);
    assert_non_null(strstr(err, "verification failed"));

    /* The right CA but the wrong name. */
    o.cafile = s.ca_path;
    o.server_name = "not-the-server.example";
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_ETLS_VERIFY);

    /* The right CA and name. */
    o.server_name = NULL;
    assert_int_equal(sg_h2_conn_new(&c, &o), 0);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

static void tls_server_without_h2_is_refused_clearly(void **state) {
    (void)state;
    fm_server s;
    const char *extra[] = {"--no-h2", NULL};
    assert_int_equal(h2t_start(&s, g_fm_path, extra), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, true, &c, err), SG_EH2);
    assert_non_null(strstr(err, "ALPN"));
    h2t_stop(&s);
}

static void connect_to_a_closed_port_fails(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    int port = s.port;
    h2t_stop(&s);
    sg_h2_conn_options o;
    memset(&o, 0, sizeof(o));
    o.host = "127.0.0.1";
    o.port = port;
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_ECONNECT);
}

/* A stream that waits for a slot under the server's MAX_CONCURRENT_STREAMS
 * is stamped when its request goes, not when it was started: the server
 * is told what is left of the lease then. */
static void a_stream_waiting_for_a_slot_is_stamped_when_it_goes(void **state) {
    (void)state;
    fm_server s;
    const char *extra[] = {"--h2-max-streams", "1", NULL};
    assert_int_equal(h2t_start(&s, g_fm_path, extra), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    for (int i = 0; i < 3; i++) { /* the server's SETTINGS are in */
        sg_h2_conn_step(c, h2t_now(), true, true);
        usleep(10 * 1000);
    }
    expect ex[2];
    memset(ex, 0, sizeof(ex));
    for (int i = 0; i < 2; i++) {
        SG_AUTO_OPTIONS(po);
        sg_op_options_set_budget(po, SG_SEC(5));
        sg_op_options_set_max_attempts(po, 3);
        sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20));
        sg_test_h2_req req;
        memset(&req, 0, sizeof(req));
        req.path = i == 0 ? "/v1/chat/completions?n=2&gap=300&_tag=slot0"
                          : "/v1/chat/completions?n=1&_tag=slot1";
        req.deadline_header = true;
        assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &ex[i], &ex[i].op),
                         0);
    }
    assert_int_equal(sg_h2_conn_run(c), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(sg_h2_op_outcome(ex[i].op), SG_OUTCOME_OK);
    }
    char *log = h2t_log_when(&s, "_tag=slot1", 1);
    assert_non_null(log);
    const char *p = strstr(log, "_tag=slot1");
    assert_non_null(p);
    p = strstr(p, "\"x_deadline_ms\":\"");
    assert_non_null(p);
    long ms = strtol(p + strlen("\"x_deadline_ms\":\""), NULL, 10);
    free(log);
    if (ms > 4800) { /* 5000 less the ~300 ms the first stream held the slot */
        fail_msg("X-Deadline-Ms %ld after about 300 ms of waiting for a slot", ms);
    }
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* A stream started from inside another's on_item (which runs inside
 * nghttp2's callback): its callbacks run after nghttp2 returned, never
 * inside on_item - here one refused at once (floor above its budget),
 * whose on_attempt and on_done are due at its start. */
typedef struct nested {
    sg_h2_conn *c;
    bool in_item;          /* inside the outer op's on_item */
    bool done_inside_item; /* the inner op's on_done ran inside it */
    bool inner_done;
    sg_h2_op *inner;
    uint64_t items;
} nested;

static void inner_done(sg_h2_op *op, void *ud) {
    (void)op;
    nested *n = ud;
    n->inner_done = true;
    n->done_inside_item = n->done_inside_item || n->in_item;
}

static int outer_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    nested *n = ud;
    if (n->items++ > 0) {
        return 0;
    }
    n->in_item = true;
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(1));
    sg_op_options_set_floor(po, SG_SEC(2)); /* nothing to lease: refused */
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions?n=1&_tag=inner";
    static const sg_test_h2_cbs cbs = {.on_done = inner_done};
    assert_int_equal(sg_test_h2_start(n->c, &req, &g_sse, po, &cbs, n, &n->inner), 0);
    n->in_item = false;
    return 0;
}

static void a_stream_started_inside_on_item_calls_back_after_it(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    nested n;
    memset(&n, 0, sizeof(n));
    assert_int_equal(h2t_connect(&s, false, &n.c, err), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions?n=3&gap=20&_tag=outer";
    static const sg_test_h2_cbs cbs = {.on_item = outer_item};
    sg_h2_op *outer = NULL;
    assert_int_equal(sg_test_h2_start(n.c, &req, &g_sse, po, &cbs, &n, &outer), 0);
    assert_int_equal(sg_h2_conn_run(n.c), 0);
    assert_int_equal(sg_h2_op_outcome(outer), SG_OUTCOME_OK);
    assert_true(n.inner_done);
    assert_false(n.done_inside_item);
    assert_int_equal(sg_h2_op_outcome(n.inner), SG_OUTCOME_REFUSED);
    sg_h2_conn_free(n.c);
    h2t_stop(&s);
}

/* X-Deadline-Ms of the received request tagged @tag in @log (-1 none),
 * and where in the log it was received (@at). */
static long deadline_of(const char *log, const char *tag, const char **at) {
    const char *p = strstr(log, tag);
    *at = p;
    if (p == NULL || (p = strstr(p, "\"x_deadline_ms\":\"")) == NULL) {
        return -1;
    }
    return strtol(p + strlen("\"x_deadline_ms\":\""), NULL, 10);
}

/* Streams started before the connection is up (connect_on_demand), more
 * of them than the server's MAX_CONCURRENT_STREAMS (1): when it is up they
 * go oldest first, as many as the limit nghttp2 knows then allows (100
 * until the server's SETTINGS; the server refuses the excess, never
 * processed, and they go again as slots free, stamped when they go) - not
 * newest first, the oldest one refused. */
static void streams_waiting_for_the_connection_go_as_slots_free(void **state) {
    (void)state;
    fm_server s;
    const char *extra[] = {"--h2-max-streams", "1", NULL};
    assert_int_equal(h2t_start(&s, g_fm_path, extra), 0);
    sg_h2_conn_options o;
    memset(&o, 0, sizeof(o));
    o.host = "127.0.0.1";
    o.port = s.port;
    o.connect_timeout = SG_SEC(5);
    o.connect_on_demand = true;
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, &o), 0);
    expect ex[3];
    memset(ex, 0, sizeof(ex));
    static const char *const paths[] = {
        "/v1/chat/completions?n=2&gap=300&_tag=wait0",
        "/v1/chat/completions?n=2&gap=300&_tag=wait1",
        "/v1/chat/completions?n=1&_tag=wait2",
    };
    for (int i = 0; i < 3; i++) {
        SG_AUTO_OPTIONS(po);
        sg_op_options_set_budget(po, SG_SEC(5));
        sg_test_h2_req req;
        memset(&req, 0, sizeof(req));
        req.path = paths[i];
        req.deadline_header = true;
        assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &ex[i], &ex[i].op),
                         0);
    }
    assert_int_equal(sg_h2_conn_run(c), 0);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sg_h2_op_outcome(ex[i].op), SG_OUTCOME_OK);
    }
    char *log = h2t_log_when(&s, "_tag=wait2", 1);
    assert_non_null(log);
    const char *at[3];
    long ms[3];
    for (int i = 0; i < 3; i++) {
        char tag[16];
        snprintf(tag, sizeof(tag), "_tag=wait%d", i);
        ms[i] = deadline_of(log, tag, &at[i]);
        assert_true(ms[i] > 0);
    }
    free(log);
    /* received oldest first */
    assert_true(at[0] < at[1] && at[1] < at[2]);
    /* each stamped when it went: after ~300 and ~600 ms of waiting */
    if (ms[1] > 4800 || ms[2] > 4500) {
        fail_msg("X-Deadline-Ms %ld, %ld, %ld: not stamped when they went", ms[0], ms[1],
                 ms[2]);
    }
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* A read that stopped at its per-step budget just as the socket drained:
 * the next step reads on (h2.h: "even without @readable"), finds nothing
 * and says so, so the loop sleeps again instead of stepping at once
 * forever. */
static void a_read_stopped_at_its_budget_is_read_on_by_the_next_step(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_max_attempts(po, 1);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions?n=1&first_delay=5000&_tag=budget";
    expect e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    for (int i = 0; i < 3; i++) { /* the request goes; the server says nothing */
        sg_h2_conn_step(c, h2t_now(), true, true);
    }
    c->cur->more_to_read = true; /* as a read that spent SG__H2_READ_BUDGET leaves it */
    int64_t now = h2t_now();
    assert_true(sg_h2_conn_next_deadline(c) <= now);
    sg_h2_conn_step(c, now, false, true);
    assert_false(c->cur->more_to_read);
    assert_true(sg_h2_conn_next_deadline(c) > now + SG_SEC(1));
    sg_h2_op_cancel(e.op);
    assert_int_equal(sg_h2_conn_run(c), 0);
    sg_h2_op_free(e.op);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* A TLS handshake nobody answers (a socket that listens and never
 * accepts: the kernel completes the TCP handshake) is waited for, not
 * spun on: the connect's time is spent asleep until its timeout. */
static void an_unanswered_handshake_is_waited_for_not_spun_on(void **state) {
    (void)state;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(lfd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    sg_h2_conn_options o;
    memset(&o, 0, sizeof(o));
    o.host = "127.0.0.1";
    o.port = ntohs(a.sin_port);
    o.tls = true;
    o.connect_timeout = SG_SEC(1);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_ETIMEDOUT);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    close(lfd);
    int64_t cpu =
        (int64_t)(c1.tv_sec - c0.tv_sec) * SG_SEC(1) + (c1.tv_nsec - c0.tv_nsec);
    /* spinning costs the whole second; a wait asleep the TLS set-up alone
     * (tens of ms, more under the sanitizers) */
    if (cpu > SG_MS(500)) {
        fail_msg("%lld ms of CPU in a 1 s wait for a handshake",
                 (long long)(cpu / SG_MS(1)));
    }
}

/* With connect_on_demand the connection is part of each attempt: a port
 * nobody listens on is three attempts in phase connect, never sent, each
 * leased and reported; a server that is there is an ordinary stream. */
static void an_on_demand_connection_is_part_of_the_attempt(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    int closed_port = 0;
    {
        fm_server gone;
        assert_int_equal(h2t_start(&gone, g_fm_path, NULL), 0);
        closed_port = gone.port;
        h2t_stop(&gone);
    }
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 3);
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(10));
    for (int i = 0; i < 2; i++) {
        sg_h2_conn_options o;
        memset(&o, 0, sizeof(o));
        o.host = "127.0.0.1";
        o.port = i == 0 ? closed_port : s.port;
        o.connect_on_demand = true;
        sg_h2_conn *c = NULL;
        assert_int_equal(sg_h2_conn_new(&c, &o), 0); /* nothing dialled yet */
        assert_false(sg_h2_conn_usable(c));
        expect e;
        memset(&e, 0, sizeof(e));
        sg_test_h2_req req;
        memset(&req, 0, sizeof(req));
        req.path = "/v1/chat/completions?n=3&gap=5&_tag=1";
        assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
        assert_int_equal(sg_h2_conn_run(c), 0);
        const sg_op *pol = sg_h2_op_policy(e.op);
        if (i == 0) {
            assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_TRANSPORT_ERROR);
            assert_int_equal(sg_op_attempt_count(pol), 3);
            for (uint32_t k = 0; k < 3; k++) {
                const sg_op_attempt *a = sg_op_attempt_at(pol, k);
                assert_int_equal(a->phase, SG_PHASE_CONNECT);
                assert_false(a->sent);
                assert_non_null(strstr(a->error, "Connection refused"));
            }
            assert_true(sg_op_finished(pol));
        } else {
            assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_OK);
            assert_int_equal(e.items, 3);
        }
        sg_h2_conn_free(c);
    }
    h2t_stop(&s);
}

/* The TLS handshake of an on-demand connection runs in the loop: without
 * the CA every attempt ends in phase connect, never sent, saying why; with
 * it the stream runs. */
static void an_on_demand_tls_handshake_is_part_of_the_attempt(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 2);
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(10));
    for (int with_ca = 0; with_ca < 2; with_ca++) {
        sg_h2_conn_options o;
        memset(&o, 0, sizeof(o));
        o.host = "localhost"; /* through the resolver, then the race */
        o.port = s.port;
        o.tls = true;
        o.cafile = with_ca ? s.ca_path : NULL;
        o.connect_on_demand = true;
        sg_h2_conn *c = NULL;
        assert_int_equal(sg_h2_conn_new(&c, &o), 0);
        expect e;
        memset(&e, 0, sizeof(e));
        sg_test_h2_req req;
        memset(&req, 0, sizeof(req));
        req.path = "/v1/chat/completions?n=2&gap=5";
        assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
        assert_int_equal(sg_h2_conn_run(c), 0);
        const sg_op *pol = sg_h2_op_policy(e.op);
        if (!with_ca) {
            assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_TRANSPORT_ERROR);
            assert_int_equal(sg_op_attempt_count(pol), 2);
            for (uint32_t k = 0; k < 2; k++) {
                const sg_op_attempt *a = sg_op_attempt_at(pol, k);
                assert_int_equal(a->phase, SG_PHASE_CONNECT);
                assert_false(a->sent);
                assert_non_null(strstr(a->error, "verification failed"));
            }
            assert_false(sg_h2_conn_usable(c));
            assert_non_null(strstr(sg_h2_conn_error(c), "verification failed"));
        } else {
            assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_OK);
            assert_int_equal(e.items, 2);
            assert_true(sg_h2_conn_usable(c));
        }
        sg_h2_conn_free(c);
    }
    h2t_stop(&s);
}

/* Happy Eyeballs (RFC 8305): "localhost" resolves to ::1 first here, and
 * [::1] on the server's port is a listener whose backlog is full (the
 * kernel drops the SYN: the connect hangs).  The IPv4 address must be
 * tried after the attempt delay, not after the whole connect timeout. */
static void an_unreachable_first_address_costs_one_attempt_delay(void **state) {
    (void)state;
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo("localhost", "80", &hints, &res) != 0 || res == NULL ||
        res->ai_family != AF_INET6 || res->ai_next == NULL) {
        print_message("skipped: localhost does not resolve to ::1 first, then more\n");
        if (res != NULL) {
            freeaddrinfo(res);
        }
        return;
    }
    freeaddrinfo(res);
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    int lfd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a6;
    memset(&a6, 0, sizeof(a6));
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    a6.sin6_port = htons((uint16_t)s.port);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a6, sizeof(a6)) != 0 ||
        listen(lfd, 0) != 0) {
        print_message("skipped: cannot listen on [::1]:%d\n", s.port);
        if (lfd >= 0) {
            close(lfd);
        }
        h2t_stop(&s);
        return;
    }
    int fillers[8];
    for (int i = 0; i < 8; i++) {
        fillers[i] = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fillers[i], (struct sockaddr *)&a6, sizeof(a6));
    }
    sg_h2_conn_options o;
    memset(&o, 0, sizeof(o));
    o.host = "localhost";
    o.port = s.port;
    o.connect_timeout = SG_SEC(3);
    sg_h2_conn *c = NULL;
    int64_t t0 = h2t_now();
    int rv = sg_h2_conn_new(&c, &o);
    int64_t took = h2t_now() - t0;
    for (int i = 0; i < 8; i++) {
        close(fillers[i]);
    }
    close(lfd);
    assert_int_equal(rv, 0);
    print_message("connected over IPv4 after %.1f ms\n", (double)took / 1e6);
    assert_true(took >= SG_MS(240));
    assert_true(took < SG_MS(1500));
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* ------------------------------------------------------ connection loss */

static void losing_the_connection_ends_every_stream_in_its_phase(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    enum { N = 12 };
    expect ex[N];
    memset(ex, 0, sizeof(ex));
    for (int i = 0; i < N; i++) {
        char path[160];
        /* Two thirds stream slowly; one third waits for headers. */
        snprintf(path, sizeof(path), "/v1/chat/completions?n=1000&gap=20%s&_tag=%d",
                 i % 3 == 2 ? "&headers_delay=10000" : "", i);
        SG_AUTO_OPTIONS(po);
        sg_op_options_set_budget(po, SG_SEC(10));
        sg_op_options_set_max_attempts(po, 1);
        sg_test_h2_req req;
        memset(&req, 0, sizeof(req));
        req.path = path;
        req.body = "{}";
        req.body_len = 2;
        assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &ex[i], &ex[i].op),
                         0);
    }
    /* Drive it from our own loop (the embedding API) until items flow. */
    int64_t until = h2t_now() + SG_MS(300);
    while (h2t_now() < until) {
        struct pollfd p = {sg_h2_conn_fd(c), POLLIN, 0};
        if (sg_h2_conn_want_write(c)) {
            p.events |= POLLOUT;
        }
        int64_t next = sg_h2_conn_next_deadline(c);
        int64_t now = h2t_now();
        int64_t wait = until - now;
        if (next - now < wait) {
            wait = next > now ? next - now : 0;
        }
        int n = poll(&p, 1, (int)(wait / SG_MS(1)) + 1);
        assert_true(n >= 0);
        sg_h2_conn_step(c, h2t_now(), n > 0 && (p.revents & (POLLIN | POLLHUP)),
                        n > 0 && (p.revents & POLLOUT));
    }
    assert_int_equal(sg_h2_conn_running(c), N);
    h2t_track(&s, false);
    kill(s.pid, SIGKILL);
    waitpid(s.pid, NULL, 0);
    s.pid = 0;
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_false(sg_h2_conn_usable(c));
    for (int i = 0; i < N; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(sg_h2_op_policy(ex[i].op), 0);
        assert_true(ex[i].done);
        if (i % 3 == 2) {
            assert_int_equal(sg_h2_op_outcome(ex[i].op), SG_OUTCOME_TRANSPORT_ERROR);
            assert_int_equal(a->phase, SG_PHASE_WAIT_HEADERS);
            assert_false(a->partial);
            assert_true(a->sent);
            /* POST without a key, sent, no answer: not safe to retry. */
            assert_true(a->outcome_unknown);
        } else {
            assert_int_equal(sg_h2_op_outcome(ex[i].op), SG_OUTCOME_TRUNCATED);
            assert_int_equal(a->phase, SG_PHASE_STREAMING);
            assert_true(a->partial);
            assert_true(ex[i].discarded);
            assert_true(ex[i].items > 0);
        }
        assert_non_null(strstr(sg_h2_op_error(ex[i].op), "connection lost"));
    }
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

static void a_retry_after_connection_loss_reconnects(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    expect e;
    memset(&e, 0, sizeof(e));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_backoff(po, SG_MS(10), SG_MS(20));
    sg_op_options_set_idempotency_key(po, "key-reconnect-1");
    sg_op_options_set_max_attempts(po, 2);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    /* The server closes the whole connection after the response headers,
     * before any item: truncated, not partial, safe with the key.  The
     * retry reconnects (and meets the same fate). */
    req.path = "/v1/chat/completions?n=4&gap=5&drop_after=0&drop=close";
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    const sg_op *pol = sg_h2_op_policy(e.op);
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_TRUNCATED);
    assert_int_equal(sg_op_attempt_count(pol), 2);
    assert_int_equal(sg_op_attempt_at(pol, 0)->outcome, SG_OUTCOME_TRUNCATED);
    assert_int_equal(sg_op_attempt_at(pol, 0)->decision, SG_OP_RETRY);
    assert_false(sg_op_attempt_at(pol, 0)->partial);

    /* A new operation on the same handle reconnects and succeeds. */
    expect e2;
    memset(&e2, 0, sizeof(e2));
    req.path = "/v1/chat/completions?n=4&gap=5";
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e2, &e2.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e2.op), SG_OUTCOME_OK);
    assert_int_equal(e2.items, 4);
    char *log = fm_fetch(&s, "/_log", 0);
    assert_non_null(log);
    assert_non_null(strstr(log, "\"conn\":3,")); /* three TCP connections */
    free(log);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* ------------------------------------------------------- REFUSED_STREAM */

/*
 * sg-fakemodel has no knob that sends REFUSED_STREAM on demand, but nghttp2
 * (its HTTP/2 engine) refuses streams above SETTINGS_MAX_CONCURRENT_STREAMS
 * that arrive before the client acknowledged that setting.  Our first
 * flight carries 20 requests (nghttp2 assumes 100 until the server's
 * SETTINGS arrive) against a limit of 5: 15 are refused, never processed,
 * and retried - POSTs without an idempotency key included.
 */
static void refused_streams_are_recorded_unsent_and_retried(void **state) {
    (void)state;
    fm_server s;
    const char *extra[] = {"--h2-max-streams", "5", NULL};
    assert_int_equal(h2t_start(&s, g_fm_path, extra), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    enum { N = 20 };
    expect ex[N];
    memset(ex, 0, sizeof(ex));
    for (int i = 0; i < N; i++) {
        char path[128];
        snprintf(path, sizeof(path), "/v1/chat/completions?n=3&gap=5&_tag=%d", i);
        SG_AUTO_OPTIONS(po);
        sg_op_options_set_budget(po, SG_SEC(10));
        sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20));
        sg_test_h2_req req;
        memset(&req, 0, sizeof(req));
        req.path = path; /* POST, no key: only "never processed" is safe */
        req.body = "{}";
        req.body_len = 2;
        assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &ex[i], &ex[i].op),
                         0);
    }
    /* Write the whole first flight before reading anything: once the
     * server's SETTINGS are read, nghttp2 would respect its limit. */
    sg_h2_conn_step(c, h2t_now(), false, true);
    assert_int_equal(sg_h2_conn_run(c), 0);
    int refused = 0;
    for (int i = 0; i < N; i++) {
        const sg_op *pol = sg_h2_op_policy(ex[i].op);
        assert_int_equal(sg_h2_op_outcome(ex[i].op), SG_OUTCOME_OK);
        if (sg_op_attempt_count(pol) > 1) {
            const sg_op_attempt *a = sg_op_attempt_at(pol, 0);
            refused++;
            assert_int_equal(a->outcome, SG_OUTCOME_TRANSPORT_ERROR);
            assert_false(a->sent);
            assert_false(a->outcome_unknown);
            assert_int_equal(a->decision, SG_OP_RETRY);
        }
    }
    print_message("refused and retried: %d of %d\n", refused, N);
    assert_true(refused > 0);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* ----------------------------------------------------------- the rest */

/* One server, one connection, one expectation, default policy: the setup
 * most single-stream tests share. */
typedef struct single {
    fm_server s;
    sg_h2_conn *c;
    expect e;
    sg_op_options *po;
} single;

static void single_begin(single *t, bool tls) {
    memset(t, 0, sizeof(*t));
    assert_int_equal(h2t_start(&t->s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    assert_int_equal(h2t_connect(&t->s, tls, &t->c, err), 0);
    assert_int_equal(sg_op_options_new(&t->po), 0);
}

static void single_end(single *t) {
    sg_op_options_free(t->po);
    sg_h2_conn_free(t->c);
    h2t_stop(&t->s);
}

/* Retry-After as an HTTP-date is measured from the response's Date (the
 * server's clock, an hour behind the local one here). */
static void retry_after_date_is_measured_from_the_date_header(void **state) {
    (void)state;
    single t;
    single_begin(&t, true);
    sg_op_options_set_budget(t.po, SG_SEC(5));
    sg_op_options_set_max_attempts(t.po, 1);
    sg_op_options_set_method(t.po, "GET");
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path =
        "/v1/chat/completions?status=503&retry_after_date=2&date_offset=-3600&_tag=1";
    assert_int_equal(sg_test_h2_start(t.c, &req, &g_sse, t.po, &g_cbs, &t.e, &t.e.op), 0);
    assert_int_equal(sg_h2_conn_run(t.c), 0);
    const sg_op_attempt *a = sg_op_attempt_at(sg_h2_op_policy(t.e.op), 0);
    assert_true(a->retry_after_present);
    assert_false(a->retry_after_malformed);
    assert_int_equal(a->retry_after_ns, SG_SEC(2));
    single_end(&t);
}

/* A 103 Early Hints before the response: the real response behind it is
 * the answer, its stream the items. */
static void an_interim_response_is_followed_by_the_real_one(void **state) {
    (void)state;
    single t;
    single_begin(&t, false);
    sg_op_options_set_budget(t.po, SG_SEC(5));
    sg_op_options_set_method(t.po, "GET");
    sg_op_options_set_max_attempts(t.po, 1);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions?n=4&gap=5&early_hints=1&_tag=1";
    assert_int_equal(sg_test_h2_start(t.c, &req, &g_sse, t.po, &g_cbs, &t.e, &t.e.op), 0);
    assert_int_equal(sg_h2_conn_run(t.c), 0);
    if (sg_h2_op_outcome(t.e.op) != SG_OUTCOME_OK) {
        fail_msg("outcome %s: %s", sg_outcome_name(sg_h2_op_outcome(t.e.op)),
                 sg_h2_op_error(t.e.op));
    }
    assert_int_equal(sg_h2_op_http_status(t.e.op), 200);
    assert_int_equal(t.e.items, 4);
    single_end(&t);
}

static void cancel_on_attempt(sg_h2_op *op, const sg_op_attempt *rec, void *ud) {
    (void)rec;
    (void)ud;
    assert_int_equal(sg_h2_op_cancel(op), 0);
}

/* Cancelled as it goes to sleep before a retry: the operation ends there,
 * cancelled, and its policy is finished (the report says so). */
static void cancel_during_the_backoff_finishes_the_operation(void **state) {
    (void)state;
    single t;
    single_begin(&t, false);
    sg_op_options_set_budget(t.po, SG_SEC(10));
    sg_op_options_set_method(t.po, "GET");
    sg_op_options_set_max_attempts(t.po, 3);
    sg_op_options_set_backoff(t.po, SG_SEC(2), SG_SEC(2));
    sg_test_h2_cbs cbs = g_cbs;
    cbs.on_attempt = cancel_on_attempt;
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions?status=503&fail_first=5&_tag=1";
    int64_t t0 = h2t_now();
    assert_int_equal(sg_test_h2_start(t.c, &req, &g_sse, t.po, &cbs, &t.e, &t.e.op), 0);
    assert_int_equal(sg_h2_conn_run(t.c), 0);
    assert_true(h2t_now() - t0 < SG_SEC(1)); /* it did not sleep the backoff */
    assert_true(t.e.done);
    const sg_op *pol = sg_h2_op_policy(t.e.op);
    assert_true(sg_op_finished(pol));
    assert_int_equal(sg_h2_op_outcome(t.e.op), SG_OUTCOME_CANCELLED);
    assert_int_equal(sg_op_final_reason(pol), SG_OP_REASON_CANCELLED);
    assert_int_equal(sg_op_attempt_count(pol), 1);
    char report[8192];
    assert_int_equal(sg_h2_op_report(t.e.op, report, sizeof(report), NULL), 0);
    assert_non_null(strstr(report, "\"finished\":true"));
    single_end(&t);
}

static void error_status_is_http_error_and_headers_are_stamped(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, true, &c, err), 0);
    expect e;
    memset(&e, 0, sizeof(e));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_op_options_set_max_attempts(po, 1);
    sg_op_options_set_idempotency_key(po, "key-429");
    sg_test_h2_header hdr[] = {{"Authorization", "Bearer test"}};
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions?status=429&retry_after=1&_tag=1";
    req.headers = hdr;
    req.nheaders = 1;
    req.deadline_header = true;
    req.grpc_timeout = true;
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_HTTP_ERROR);
    assert_int_equal(sg_h2_op_http_status(e.op), 429);
    const sg_op_attempt *a = sg_op_attempt_at(sg_h2_op_policy(e.op), 0);
    assert_true(a->retry_after_present);
    /* what the server said, from the DATA after the head */
    size_t blen = 0;
    const char *body = sg_h2_op_error_body(e.op, &blen);
    static const char said[] = "{\"error\":{\"message\":\"sg-fakemodel scripted status "
                               "429\",\"type\":\"scripted\",\"code\":429}}\n";
    assert_non_null(body);
    assert_int_equal(blen, strlen(said));
    assert_memory_equal(body, said, blen);
    char *log = fm_fetch(&s, "/_log", 0);
    assert_non_null(log);
    assert_non_null(strstr(log, "\"idempotency_key\":\"key-429\""));
    assert_null(strstr(log, "\"x_deadline_ms\":null"));
    assert_null(strstr(log, "\"grpc_timeout\":null"));
    free(log);
    char report[8192];
    assert_int_equal(sg_h2_op_report(e.op, report, sizeof(report), NULL), 0);
    assert_non_null(strstr(report, "http_error"));
    assert_null(strstr(report, "scripted")); /* never in the report */
    sg_h2_op_free(e.op);

    /* a long one: SG_ERROR_BODY_MAX bytes kept, the rest drained; the
     * connection goes on */
    memset(&e, 0, sizeof(e));
    req.path = "/v1/chat/completions?status=400&error_pad=20000&_tag=2";
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_HTTP_ERROR);
    body = sg_h2_op_error_body(e.op, &blen);
    assert_non_null(body);
    assert_int_equal(blen, SG_ERROR_BODY_MAX);
    assert_int_equal(body[SG_ERROR_BODY_MAX - 1], 'x');
    sg_h2_op_free(e.op);
    memset(&e, 0, sizeof(e));
    req.path = "/v1/chat/completions?n=2&_tag=3";
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_OK);
    assert_null(sg_h2_op_error_body(e.op, &blen));
    assert_int_equal(blen, 0);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

static void cancel_resets_only_that_stream(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    expect e[2];
    memset(e, 0, sizeof(e));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.path = "/v1/chat/completions?n=30&gap=10&_tag=0";
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e[0], &e[0].op), 0);
    req.path = "/v1/chat/completions?n=10000&gap=10&_tag=1";
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e[1], &e[1].op), 0);
    int64_t until = h2t_now() + SG_MS(100);
    while (h2t_now() < until) {
        struct pollfd p = {sg_h2_conn_fd(c), POLLIN, 0};
        poll(&p, 1, 5);
        sg_h2_conn_step(c, h2t_now(), true, true);
    }
    assert_int_equal(sg_h2_op_cancel(e[1].op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e[0].op), SG_OUTCOME_OK);
    assert_int_equal(sg_h2_op_outcome(e[1].op), SG_OUTCOME_CANCELLED);
    char *log = h2t_log_when(&s, "\"h2_error\":\"CANCEL\"", 1);
    assert_int_equal(h2t_log_gone_code(log, h2t_log_id_of_tag(log, 1)), 8);
    assert_int_equal(h2t_log_gone_code(log, h2t_log_id_of_tag(log, 0)), -1);
    free(log);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

typedef struct flood {
    sg_h2_op *flooder;
    int64_t started;
    int64_t ended;
    uint64_t items;
} flood;

/* A slow consumer (20 us per item): the server always outruns it, so the
 * socket never runs dry while the flood lasts. */
static int flood_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    ((flood *)ud)->items++;
    int64_t until = h2t_now() + SG_US(20);
    while (h2t_now() < until) {
    }
    return 0;
}

static void quiet_done(sg_h2_op *op, void *ud) {
    flood *f = ud;
    f->ended = h2t_now();
    /* The clock that had to fire has fired: stop the flood from here. */
    sg_h2_op_cancel(f->flooder);
    (void)op;
}

/*
 * One stream floods the connection (the server writes as fast as it can);
 * another stream's first-item clock must still fire on time: a step reads
 * at most a bounded amount before it enforces the clocks.
 */
static void a_flooding_stream_does_not_delay_other_clocks(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, true, &c, err), 0);
    flood f;
    memset(&f, 0, sizeof(f));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_max_attempts(po, 1);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.path = "/v1/chat/completions?runaway=1&gap=0&line_bytes=2000";
    sg_test_h2_cbs flood_cbs = {.on_item = flood_item};
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &flood_cbs, &f, &f.flooder),
                     0);
    sg_op_options_set_first_item_timeout(po, SG_MS(300));
    req.path = "/v1/chat/completions?n=3&first_delay=5000";
    sg_test_h2_cbs quiet_cbs = {.on_done = quiet_done};
    sg_h2_op *quiet = NULL;
    f.started = h2t_now();
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &quiet_cbs, &f, &quiet), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(quiet), SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_int_equal(sg_h2_op_outcome(f.flooder), SG_OUTCOME_CANCELLED);
    int64_t late = f.ended - (f.started + SG_MS(300));
    print_message(
        "flood: %llu items; the quiet stream's clock was handled %.3f ms late\n",
        (unsigned long long)f.items, (double)late / 1e6);
    assert_true(f.items > 0);
    /* One read budget of slow items (~3 ms natively, ~40 ms under
     * valgrind), not the whole flood (seconds under valgrind before). */
    assert_true(late < SG_MS(100));
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

static void oversized_event_is_protocol_error(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    expect e;
    memset(&e, 0, sizeof(e));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_stream_config small = g_sse;
    assert_int_equal(sg_stream_config_set_max_line(&small, 1024), 0);
    assert_int_equal(sg_stream_config_set_max_event(&small, 4096), 0);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.path = "/v1/chat/completions?n=5&gap=5&event_bytes=100000";
    assert_int_equal(sg_test_h2_start(c, &req, &small, po, &g_cbs, &e, &e.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_PROTOCOL_ERROR);
    assert_int_equal(sg_op_attempt_count(sg_h2_op_policy(e.op)), 1);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* First-token hedging on one connection: the first request (per key) is
 * slow, its hedge 150 ms later is fast and wins; the slow stream alone is
 * reset with RST_STREAM(CANCEL) once the hedge's first item is in, and the
 * consumer sees the hedge's items only. */
static void a_hedge_wins_and_the_slow_stream_is_reset_alone(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 2);
    sg_op_options_set_idempotency_key(po, "h2-hedge-1");
    assert_int_equal(sg_op_options_set_hedging(po, SG_MS(150), 1), 0);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.path = "/v1/chat/completions?n=4&gap=5&tail_first=1&tail_delay=5000&_tag=7001";
    expect e;
    memset(&e, 0, sizeof(e));
    int64_t t0 = h2t_now();
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    int64_t took = h2t_now() - t0;
    assert_true(e.done);
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_OK);
    assert_int_equal(e.items, 4); /* one stream: the hedge's */
    assert_true(took < SG_SEC(2));
    const sg_op *op = sg_h2_op_policy(e.op);
    assert_int_equal(sg_op_attempt_count(op), 2);
    const sg_op_attempt *a1 = sg_op_attempt_at(op, 0), *a2 = sg_op_attempt_at(op, 1);
    assert_int_equal(a1->outcome, SG_OUTCOME_CANCELLED);
    assert_int_equal(a1->reason, SG_OP_REASON_HEDGE_LOST);
    assert_true(a2->hedge);
    assert_int_equal(a2->outcome, SG_OUTCOME_OK);
    /* the server: the slow stream reset with CANCEL, the hedge ran to its end */
    char *log = h2t_log_when(&s, "\"h2_error\":\"CANCEL\"", 1);
    assert_non_null(log);
    assert_non_null(strstr(log, "\"reason\":\"rst_stream\""));
    assert_int_equal(fm_count(log, "\"event\":\"client_gone\""), 1);
    free(log);
    sg_h2_op_free(e.op);
    /* an unsafe request is not hedged */
    sg_op_options_set_idempotency_key(po, NULL);
    sg_op_options_set_method(po, "POST");
    req.method = "POST";
    sg_h2_op *bad = NULL;
    memset(&e, 0, sizeof(e));
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &bad), SG_EUNSAFE);
    assert_null(bad);
    sg_h2_conn_free(c);
    h2t_stop(&s);
}

/* The connection's retry budget is every stream's: after one failure the
 * budget (2 tokens) is at half and the retry is denied, retry_throttled. */
static void the_connections_retry_budget_throttles_its_streams(void **state) {
    (void)state;
    fm_server s;
    assert_int_equal(h2t_start(&s, g_fm_path, NULL), 0);
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&s, false, &c, err), 0);
    sg_retry_budget *b = NULL;
    assert_int_equal(sg_retry_budget_new(&b, 2, 0.1), 0);
    assert_int_equal(sg_h2_conn_set_retry_budget(c, b), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 3);
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(5));
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.path = "/v1/chat/completions?status=503&_tag=7101";
    expect e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_true(e.done);
    const sg_op *op = sg_h2_op_policy(e.op);
    assert_int_equal(sg_op_attempt_count(op), 1);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_RETRY_THROTTLED);
    assert_true(sg_retry_budget_tokens(b) == 1.0);
    sg_h2_op_free(e.op);
    sg_h2_conn_free(c);
    sg_retry_budget_free(b);
    h2t_stop(&s);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-sg-fakemodel\n", argv[0]);
        return 2;
    }
    g_fm_path = argv[1];
    g_sse = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            h2c_100_mixed_streams_each_classified_and_only_expired_reset, h2t_teardown),
        cmocka_unit_test_teardown(
            tls_100_mixed_streams_each_classified_and_only_expired_reset, h2t_teardown),
        cmocka_unit_test_teardown(tls_without_the_ca_fails_verification, h2t_teardown),
        cmocka_unit_test_teardown(an_on_demand_tls_handshake_is_part_of_the_attempt,
                                  h2t_teardown),
        cmocka_unit_test_teardown(tls_server_without_h2_is_refused_clearly, h2t_teardown),
        cmocka_unit_test_teardown(connect_to_a_closed_port_fails, h2t_teardown),
        cmocka_unit_test_teardown(an_unanswered_handshake_is_waited_for_not_spun_on,
                                  h2t_teardown),
        cmocka_unit_test_teardown(
            a_read_stopped_at_its_budget_is_read_on_by_the_next_step, h2t_teardown),
        cmocka_unit_test_teardown(a_stream_waiting_for_a_slot_is_stamped_when_it_goes,
                                  h2t_teardown),
        cmocka_unit_test_teardown(streams_waiting_for_the_connection_go_as_slots_free,
                                  h2t_teardown),
        cmocka_unit_test_teardown(a_stream_started_inside_on_item_calls_back_after_it,
                                  h2t_teardown),
        cmocka_unit_test_teardown(an_on_demand_connection_is_part_of_the_attempt,
                                  h2t_teardown),
        cmocka_unit_test_teardown(an_unreachable_first_address_costs_one_attempt_delay,
                                  h2t_teardown),
        cmocka_unit_test_teardown(losing_the_connection_ends_every_stream_in_its_phase,
                                  h2t_teardown),
        cmocka_unit_test_teardown(a_retry_after_connection_loss_reconnects, h2t_teardown),
        cmocka_unit_test_teardown(a_hedge_wins_and_the_slow_stream_is_reset_alone,
                                  h2t_teardown),
        cmocka_unit_test_teardown(the_connections_retry_budget_throttles_its_streams,
                                  h2t_teardown),
        cmocka_unit_test_teardown(refused_streams_are_recorded_unsent_and_retried,
                                  h2t_teardown),
        cmocka_unit_test_teardown(error_status_is_http_error_and_headers_are_stamped,
                                  h2t_teardown),
        cmocka_unit_test_teardown(retry_after_date_is_measured_from_the_date_header,
                                  h2t_teardown),
        cmocka_unit_test_teardown(an_interim_response_is_followed_by_the_real_one,
                                  h2t_teardown),
        cmocka_unit_test_teardown(cancel_during_the_backoff_finishes_the_operation,
                                  h2t_teardown),
        cmocka_unit_test_teardown(cancel_resets_only_that_stream, h2t_teardown),
        cmocka_unit_test_teardown(oversized_event_is_protocol_error, h2t_teardown),
        cmocka_unit_test_teardown(a_flooding_stream_does_not_delay_other_clocks,
                                  h2t_teardown),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rv;
}
