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

#include "../sg_auto.h"

/* Options good enough to make a connection on demand (nothing dialled). */
static void valid_options(sg_h2_conn_options *o) {
    assert_int_equal(sg_h2_conn_options_set_host(o, "127.0.0.1"), 0);
    assert_int_equal(sg_h2_conn_options_set_port(o, 443), 0);
}

/* Each value is refused where it is set, and the options keep the last
 * good one; a connection needs a host and a port. */
static void conn_options_refuse_bad_values_where_they_are_set(void **state) {
    (void)state;
    sg_h2_conn *c = (sg_h2_conn *)state; /* must be reset to NULL */
    char err[SG_H2_ERROR_SIZE] = "";
    assert_int_equal(sg_h2_conn_new(NULL, NULL), SG_EINVAL);
    c = (sg_h2_conn *)state;
    assert_int_equal(sg_h2_conn_new(&c, NULL), SG_EINVAL);
    assert_null(c); /* NULL options too */

    SG_AUTO_H2_CONN_OPTIONS(o);
    assert_int_equal(sg_h2_conn_options_set_errbuf(o, err), 0);
    assert_int_equal(sg_h2_conn_new(&c, o), SG_EINVAL); /* no host, no port */
    assert_null(c);
    assert_string_equal(err, "no host or port set");

    assert_int_equal(sg_h2_conn_options_set_host(o, NULL), SG_EINVAL);
    assert_int_equal(sg_h2_conn_options_set_host(o, ""), SG_EINVAL);
    assert_int_equal(sg_h2_conn_options_set_port(o, 0), SG_ERANGE);
    assert_int_equal(sg_h2_conn_options_set_port(o, 65536), SG_ERANGE);
    assert_int_equal(sg_h2_conn_options_set_connect_timeout(o, -1), SG_EINVAL);
    assert_int_equal(sg_h2_conn_options_set_connect_timeout(o, SG_DURATION_MAX + 1),
                     SG_ERANGE);
    /* below the RFC 9113 minimum of 65535, above 2^31-1 */
    assert_int_equal(sg_h2_conn_options_set_stream_window(o, 1000), SG_ERANGE);
    assert_int_equal(sg_h2_conn_options_set_stream_window(o, 0x80000000u), SG_ERANGE);
    assert_int_equal(sg_h2_conn_options_set_conn_window(o, 100), SG_ERANGE);
    /* below any response's head: every one would be refused */
    assert_int_equal(sg_h2_conn_options_set_max_header_list(o, 16), SG_ERANGE);
    assert_int_equal(sg_h2_conn_options_set_max_header_list(o, 0x80000000u), SG_ERANGE);
    assert_int_equal(sg_h2_conn_options_set_server_name(o, ""), SG_EINVAL);
    assert_int_equal(sg_h2_conn_options_set_dns_servers(o, ""), SG_EINVAL);
    assert_int_equal(sg_h2_conn_options_set_tls(NULL, true), SG_EINVAL);

    /* the refused values left nothing behind: a good host and port and it
     * is made (on demand: nothing dialled) */
    valid_options(o);
    assert_int_equal(sg_h2_conn_options_set_connect_on_demand(o, true), 0);
    assert_int_equal(sg_h2_conn_new(&c, o), 0);
    sg_h2_conn_free(c);
}

/* RFC 9113 §8.2: what an HTTP/2 request must not carry is refused when it
 * is set - connection-specific fields (whatever their case), a TE other
 * than "trailers", a value with whitespace at an end, a path that is not
 * absolute - rather than sent for the server to reset (and the attempt to
 * be judged sent). */
static void the_request_refuses_what_http2_forbids(void **state) {
    (void)state;
    static const char *const bad[][2] = {
        {"connection", "keep-alive"},
        {"keep-alive", "timeout=5"},
        {"proxy-connection", "x"},
        {"transfer-encoding", "chunked"},
        {"upgrade", "h2c"},
        {"te", "trailers, deflate"},
        {"Connection", "close"},
        {"x-a", "trailing "},
        {"x-a", "\tleading"},
        {"x a", "space in the name"},
        {"x:a", "colon in the name"},
        {"x\xc3\xa9", "a byte from 0x80"},
        {"x-a", "cr\rlf"},
        {"x-a", "l\nf"},
    };
    SG_AUTO_H2_REQUEST(req);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (sg_h2_request_add_header(req, bad[i][0], bad[i][1]) != SG_EINVAL) {
            fail_msg("header '%s: %s' was not refused", bad[i][0], bad[i][1]);
        }
    }
    assert_int_equal(sg_h2_request_add_header(req, NULL, "x"), SG_EINVAL);
    assert_int_equal(sg_h2_request_set_path(req, "x"), SG_EINVAL);
    /* a path with a space, an authority with a line break or a space */
    assert_int_equal(sg_h2_request_set_path(req, "/a b"), SG_EINVAL);
    assert_int_equal(sg_h2_request_set_authority(req, "host\r\nx-evil: 1"), SG_EINVAL);
    assert_int_equal(sg_h2_request_set_authority(req, "host name"), SG_EINVAL);
    assert_int_equal(sg_h2_request_set_authority(req, ""), SG_EINVAL);
    assert_int_equal(sg_h2_request_set_method(req, "GE T"), SG_EINVAL);
    assert_int_equal(sg_h2_request_set_body(req, NULL, 3), SG_EINVAL);
    assert_int_equal(sg_h2_request_set_drain_timeout(req, -1), SG_EINVAL);

    /* no path yet: no operation */
    SG_AUTO_H2_CONN_OPTIONS(o);
    valid_options(o);
    assert_int_equal(sg_h2_conn_options_set_connect_on_demand(o, true), 0);
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, o), 0);
    sg_h2_op *op = (sg_h2_op *)state;
    assert_int_equal(sg_h2_op_new(&op, c, NULL, req, NULL), SG_EINVAL);
    assert_null(op);
    /* what RFC 9113 allows is taken: a tab inside a value, a name in
     * capitals (it goes lowercased) */
    assert_int_equal(sg_h2_request_set_path(req, "/ok"), 0);
    assert_int_equal(sg_h2_request_add_header(req, "X-Trace", "a\tb"), 0);
    assert_int_equal(sg_h2_op_new(&op, c, NULL, req, NULL), 0);
    assert_non_null(op);
    sg_h2_conn_free(c);
}

static void op_new_rejects_bad_arguments(void **state) {
    (void)state;
    SG_AUTO_H2_REQUEST(req);
    assert_int_equal(sg_h2_request_set_path(req, "/x"), 0);
    sg_h2_op *op = (sg_h2_op *)state;
    assert_int_equal(sg_h2_op_new(&op, NULL, NULL, req, NULL), SG_EINVAL);
    assert_null(op);
    assert_int_equal(sg_h2_request_new(NULL), SG_EINVAL);
    assert_int_equal(sg_h2_conn_options_new(NULL), SG_EINVAL);
    sg_h2_request_free(NULL);
    sg_h2_conn_options_free(NULL);
}

/* The readers of NULL answer what no connection or operation does. */
static void readers_are_null_safe(void **state) {
    (void)state;
    assert_int_equal(sg_h2_conn_fd(NULL), -1);
    assert_false(sg_h2_conn_want_write(NULL));
    assert_true(sg_h2_conn_next_deadline(NULL) == -1);
    assert_int_equal(sg_h2_conn_step(NULL, 0, true, true), SG_EINVAL);
    assert_int_equal(sg_h2_conn_run(NULL), SG_EINVAL);
    assert_int_equal(sg_h2_conn_running(NULL), SG_EINVAL);
    assert_int_equal(sg_h2_conn_failure(NULL), SG_EINVAL);
    assert_false(sg_h2_conn_usable(NULL));
    assert_string_equal(sg_h2_conn_error(NULL), "");
    sg_h2_conn_free(NULL);

    assert_int_equal(sg_h2_op_cancel(NULL), SG_EINVAL);
    sg_h2_op_free(NULL);
    assert_false(sg_h2_op_done(NULL));
    assert_int_equal(sg_h2_op_outcome(NULL), SG_OUTCOME_NONE);
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
        cmocka_unit_test(conn_options_refuse_bad_values_where_they_are_set),
        cmocka_unit_test(op_new_rejects_bad_arguments),
        cmocka_unit_test(the_request_refuses_what_http2_forbids),
        cmocka_unit_test(readers_are_null_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
