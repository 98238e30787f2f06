/*
 * The HTTP/2 transport's argument checks and NULL-safe readers: the parts
 * that need no socket.  Everything that talks to a peer is in
 * tests/integration/h2_*_test.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/h2.h>

static sg_h2_conn_options valid_options(void) {
    sg_h2_conn_options o;
    memset(&o, 0, sizeof(o));
    o.host = "127.0.0.1";
    o.port = 443;
    return o;
}

static void conn_new_rejects_bad_options_before_dialling(void **state) {
    (void)state;
    sg_h2_conn *c = (sg_h2_conn *)state; /* must be reset to NULL */
    char err[SG_H2_ERROR_SIZE] = "";
    assert_int_equal(sg_h2_conn_new(NULL, NULL), SG_EINVAL);
    c = (sg_h2_conn *)state;
    assert_int_equal(sg_h2_conn_new(&c, NULL), SG_EINVAL);
    assert_null(c); /* NULL options too */

    sg_h2_conn_options o = valid_options();
    o.errbuf = err;
    o.host = NULL;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);
    assert_null(c);
    assert_string_equal(err, "invalid connection options");

    o = valid_options();
    o.host = "";
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);

    o = valid_options();
    o.port = 0;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);
    o.port = 65536;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);

    o = valid_options();
    o.connect_timeout = -1;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);

    o = valid_options();
    o.stream_window = 1000; /* below the RFC 9113 minimum of 65535 */
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);
    o.stream_window = 0x80000000u;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);

    o = valid_options();
    o.conn_window = 100;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);

    o = valid_options();
    o.max_header_list = 16; /* below any response's head: every one refused */
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);
    o.max_header_list = 0x80000000u;
    assert_int_equal(sg_h2_conn_new(&c, &o), SG_EINVAL);
}

/* RFC 9113 §8.2: what an HTTP/2 request must not carry is refused before
 * anything is sent - connection-specific fields (whatever their case), a
 * TE other than "trailers", a value with whitespace at an end, a path
 * that is not absolute - rather than sent for the server to reset (and
 * the attempt to be judged sent). */
static void stream_start_refuses_what_http2_forbids(void **state) {
    (void)state;
    sg_h2_conn_options o = valid_options();
    o.connect_on_demand = true; /* nothing dialled */
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, &o), 0);
    static const sg_h2_header bad[][1] = {
        {{"connection", "keep-alive"}},
        {{"keep-alive", "timeout=5"}},
        {{"proxy-connection", "x"}},
        {{"transfer-encoding", "chunked"}},
        {{"upgrade", "h2c"}},
        {{"te", "trailers, deflate"}},
        {{"Connection", "close"}},
        {{"x-a", "trailing "}},
        {{"x-a", "\tleading"}},
        {{"x a", "space in the name"}},
        {{"x:a", "colon in the name"}},
        {{"x\xc3\xa9", "a byte from 0x80"}},
        {{"x-a", "cr\rlf"}},
        {{"x-a", "l\nf"}},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sg_h2_request req;
        memset(&req, 0, sizeof(req));
        req.path = "/x";
        req.headers = bad[i];
        req.nheaders = 1;
        sg_h2_op *op = NULL;
        if (sg_h2_stream_start(c, &req, NULL, NULL, NULL, &op) != SG_EINVAL) {
            fail_msg("header '%s: %s' was not refused", bad[i][0].name, bad[i][0].value);
        }
        assert_null(op);
    }
    sg_h2_request req;
    memset(&req, 0, sizeof(req));
    req.path = "x";
    sg_h2_op *op = NULL;
    assert_int_equal(sg_h2_stream_start(c, &req, NULL, NULL, NULL, &op), SG_EINVAL);
    /* a path with a space, an authority with a line break */
    req.path = "/a b";
    assert_int_equal(sg_h2_stream_start(c, &req, NULL, NULL, NULL, &op), SG_EINVAL);
    req.path = "/ok";
    req.authority = "host\r\nx-evil: 1";
    assert_int_equal(sg_h2_stream_start(c, &req, NULL, NULL, NULL, &op), SG_EINVAL);
    req.authority = "host name";
    assert_int_equal(sg_h2_stream_start(c, &req, NULL, NULL, NULL, &op), SG_EINVAL);
    assert_null(op);
    /* what RFC 9113 allows is taken: a tab inside a value, a name in
     * capitals (it goes lowercased) */
    static const sg_h2_header fine[] = {{"X-Trace", "a\tb"}};
    req.authority = NULL;
    req.headers = fine;
    req.nheaders = 1;
    assert_int_equal(sg_h2_stream_start(c, &req, NULL, NULL, NULL, &op), 0);
    assert_non_null(op);
    sg_h2_conn_free(c);
}

static void stream_start_rejects_bad_arguments(void **state) {
    (void)state;
    sg_h2_request req;
    memset(&req, 0, sizeof(req));
    req.path = "/x";
    sg_h2_op *op = (sg_h2_op *)state;
    assert_int_equal(sg_h2_stream_start(NULL, &req, NULL, NULL, NULL, &op), SG_EINVAL);
    assert_null(op);
}

static void readers_are_null_safe(void **state) {
    (void)state;
    assert_int_equal(sg_h2_conn_fd(NULL), -1);
    assert_false(sg_h2_conn_want_write(NULL));
    assert_true(sg_h2_conn_next_deadline(NULL) == SG_TIME_NEVER);
    assert_int_equal(sg_h2_conn_step(NULL, 0, true, true), SG_EINVAL);
    assert_int_equal(sg_h2_conn_run(NULL), SG_EINVAL);
    assert_int_equal(sg_h2_conn_running(NULL), 0);
    assert_false(sg_h2_conn_usable(NULL));
    assert_string_equal(sg_h2_conn_error(NULL), "");
    sg_h2_conn_free(NULL);

    assert_int_equal(sg_h2_op_cancel(NULL), SG_EINVAL);
    sg_h2_op_free(NULL);
    assert_false(sg_h2_op_done(NULL));
    assert_null(sg_h2_op_policy(NULL));
    assert_null(sg_h2_op_user_data(NULL));
    assert_int_equal(sg_h2_op_stream_id(NULL), 0);
    assert_int_equal(sg_h2_op_http_status(NULL), 0);
    assert_string_equal(sg_h2_op_error(NULL), "");
    char buf[16];
    assert_int_equal(sg_h2_op_report(NULL, buf, sizeof(buf), NULL), SG_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conn_new_rejects_bad_options_before_dialling),
        cmocka_unit_test(stream_start_rejects_bad_arguments),
        cmocka_unit_test(stream_start_refuses_what_http2_forbids),
        cmocka_unit_test(readers_are_null_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
