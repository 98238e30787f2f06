/*
 * The easy handle's argument checks, its answers before any outcome, and
 * its defaults.  The defaults are read from the report of an operation
 * whose every connection is refused (a loopback port bound by this test,
 * never listening): nothing needs a server, and nothing waits on a clock.
 * Streams, faults and callbacks against sg-fakemodel are in
 * tests/integration/easy_test.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <streamguard/easy.h>

/* A loopback TCP socket bound to a port of the kernel's choice: listening
 * when @listening (connections queue, unanswered), else refusing every
 * connection.  Writes the port to *@port. */
static int loopback_socket(bool listening, int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t len = sizeof(a);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    if (listening) {
        assert_int_equal(listen(fd, 8), 0);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static void url_of(char *buf, size_t len, int port) {
    snprintf(buf, len, "http://127.0.0.1:%d/v1/chat/completions", port);
}

static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    return n;
}

static void new_and_free_take_null(void **state) {
    (void)state;
    assert_int_equal(sg_easy_new(NULL), SG_EINVAL);
    sg_easy_free(NULL);
}

static void every_setter_refuses_a_null_handle(void **state) {
    (void)state;
    assert_int_equal(sg_easy_set_url(NULL, "http://127.0.0.1/"), SG_EINVAL);
    assert_int_equal(sg_easy_set_profile(NULL, "openai"), SG_EINVAL);
    assert_int_equal(sg_easy_set_body(NULL, "x", 1), SG_EINVAL);
    assert_int_equal(sg_easy_add_header(NULL, "A: b"), SG_EINVAL);
    assert_int_equal(sg_easy_set_ca_file(NULL, "/x.pem"), SG_EINVAL);
    assert_int_equal(sg_easy_set_budget(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_easy_set_connect_timeout(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_easy_set_first_item_timeout(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_easy_set_idle_timeout(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_easy_set_stream_timeout(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_easy_set_attempts(NULL, 1), SG_EINVAL);
    assert_int_equal(sg_easy_set_idempotency_key(NULL, "k"), SG_EINVAL);
    assert_int_equal(sg_easy_set_on_item(NULL, NULL, NULL), SG_EINVAL);
    assert_int_equal(sg_easy_set_on_discard(NULL, NULL, NULL), SG_EINVAL);
    assert_int_equal(sg_easy_perform(NULL), SG_EINVAL);
}

static void before_any_outcome_nothing_passes_for_one(void **state) {
    (void)state;
    sg_easy *e = NULL;
    assert_int_equal(sg_easy_new(&e), 0);
    assert_non_null(e);

    /* The outcome is none of the outcomes: "none", not a timeout. */
    for (int o = 0; o < SG_OUTCOME_COUNT_; o++) {
        assert_int_not_equal(SG_OUTCOME_NONE, (sg_outcome)o);
    }
    assert_string_equal(sg_outcome_name(SG_OUTCOME_NONE), "none");
    assert_false(sg_outcome_is_timeout(SG_OUTCOME_NONE));
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_NONE);
    assert_int_equal(sg_easy_outcome(NULL), SG_OUTCOME_NONE);

    assert_string_equal(sg_easy_error(e), "");
    assert_string_equal(sg_easy_error(NULL), "");
    size_t len = 99;
    assert_null(sg_easy_error_body(e, &len));
    assert_int_equal(len, 0);
    len = 99;
    assert_null(sg_easy_error_body(NULL, &len));
    assert_int_equal(len, 0);
    assert_null(sg_easy_error_body(e, NULL));
    assert_null(sg_easy_op(e));
    assert_null(sg_easy_op(NULL));

    char buf[64] = "untouched";
    size_t needed = 7;
    assert_int_equal(sg_easy_report(e, buf, sizeof(buf), &needed), SG_ESTATE);
    assert_int_equal(sg_easy_report(e, NULL, 0, &needed), SG_ESTATE);
    assert_int_equal(sg_easy_report(e, NULL, 8, &needed), SG_EINVAL);
    assert_int_equal(sg_easy_report(NULL, buf, sizeof(buf), &needed), SG_EINVAL);

    /* No URL: the call cannot run, and still no outcome. */
    assert_int_equal(sg_easy_perform(e), SG_EINVAL);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_NONE);
    assert_null(sg_easy_op(e));
    sg_easy_free(e);
}

/* Each case runs on a fresh handle: a failed setter marks the handle. */
static void check_setter(int want, int (*set)(sg_easy *, const void *), const void *arg) {
    sg_easy *e;
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(set(e, arg), want);
    sg_easy_free(e);
}

static int set_url(sg_easy *e, const void *v) {
    return sg_easy_set_url(e, v);
}

static int set_profile(sg_easy *e, const void *v) {
    return sg_easy_set_profile(e, v);
}

static int add_header(sg_easy *e, const void *v) {
    return sg_easy_add_header(e, v);
}

static int set_key(sg_easy *e, const void *v) {
    return sg_easy_set_idempotency_key(e, v);
}

static int set_ca(sg_easy *e, const void *v) {
    return sg_easy_set_ca_file(e, v);
}

static void url_must_be_absolute_http_or_https(void **state) {
    (void)state;
    check_setter(SG_EINVAL, set_url, NULL);
    check_setter(SG_EINVAL, set_url, "");
    check_setter(SG_EINVAL, set_url, "not a url");
    check_setter(SG_EINVAL, set_url, "127.0.0.1:8080/v1/chat"); /* no scheme */
    check_setter(SG_EINVAL, set_url, "/v1/chat/completions");
    check_setter(SG_EINVAL, set_url, "ftp://127.0.0.1/file");
    check_setter(SG_EINVAL, set_url, "file:///etc/passwd");
    check_setter(SG_EINVAL, set_url, "http://exa mple.com/");
    check_setter(0, set_url, "http://127.0.0.1:1/v1/chat/completions");
    check_setter(0, set_url, "https://api.example.com/v1/messages?beta=true");
    check_setter(0, set_url, "HTTPS://API.EXAMPLE.COM/");
}

static void profile_must_be_a_built_in_one(void **state) {
    (void)state;
    check_setter(SG_EINVAL, set_profile, "openia");
    check_setter(SG_EINVAL, set_profile, "");
    check_setter(SG_EINVAL, set_profile, "OpenAI");
    check_setter(0, set_profile, NULL); /* none: the default */
    const char *const *names = sg_profile_names();
    assert_non_null(names[0]);
    for (size_t i = 0; names[i] != NULL; i++) {
        check_setter(0, set_profile, names[i]);
    }
}

static void header_lines_cannot_smuggle_another(void **state) {
    (void)state;
    check_setter(SG_EINVAL, add_header, NULL);
    check_setter(SG_EINVAL, add_header, "");
    check_setter(SG_EINVAL, add_header, "NoColon");
    check_setter(SG_EINVAL, add_header, ": value");
    check_setter(SG_EINVAL, add_header, "Bad Name: value");
    check_setter(SG_EINVAL, add_header, "X-A: 1\r\nX-Injected: 2");
    check_setter(SG_EINVAL, add_header, "X-A: 1\nX-Injected: 2");
    check_setter(SG_EINVAL, add_header, "X-A: 1\r");
    check_setter(SG_EINVAL, add_header, "X-A: bell\a");
    check_setter(SG_EINVAL, add_header, "X-A: del\x7f");
    check_setter(0, add_header, "X-A: tab\tis fine");
    check_setter(SG_EINVAL, add_header, "X(): 1");
    check_setter(SG_EINVAL, add_header, "X-Empty;"); /* only "Name: value" */
    check_setter(0, add_header, "Authorization: Bearer sk-test");
    check_setter(0, add_header, "X-Trace:x"); /* no space needed */
    check_setter(0, add_header, "Accept:");   /* libcurl's: drop that header */
}

static void body_key_and_ca_file_are_checked(void **state) {
    (void)state;
    sg_easy *e;
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_body(e, NULL, 0), 0); /* none: a GET */
    assert_int_equal(sg_easy_set_body(e, "", 0), 0);   /* an empty POST */
    assert_int_equal(sg_easy_set_body(e, "{\"a\":1}", 7), 0);
    sg_easy_free(e);
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_body(e, NULL, 5), SG_EINVAL);
    sg_easy_free(e);

    char long_key[SG_OP_IDEMPOTENCY_KEY_MAX + 2];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    check_setter(SG_ERANGE, set_key, long_key);
    long_key[SG_OP_IDEMPOTENCY_KEY_MAX] = '\0';
    check_setter(0, set_key, long_key);
    check_setter(SG_EINVAL, set_key, "");
    check_setter(SG_EINVAL, set_key, "two words");
    check_setter(SG_EINVAL, set_key, "tab\there");
    check_setter(0, set_key, NULL); /* none: the default */
    check_setter(0, set_key, "order-7f3a");

    check_setter(SG_EINVAL, set_ca, "");
    check_setter(0, set_ca, NULL);
    check_setter(0, set_ca, "/etc/ssl/certs/ca-certificates.crt");
}

static void clocks_budget_and_attempts_are_checked(void **state) {
    (void)state;
    int (*clocks[])(sg_easy *, int64_t) = {
        sg_easy_set_connect_timeout, sg_easy_set_first_item_timeout,
        sg_easy_set_idle_timeout, sg_easy_set_stream_timeout};
    for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
        sg_easy *e;
        assert_int_equal(sg_easy_new(&e), 0);
        assert_int_equal(clocks[i](e, 0), 0); /* off */
        assert_int_equal(clocks[i](e, 1), 0);
        assert_int_equal(clocks[i](e, SG_DURATION_MAX), 0);
        assert_int_equal(clocks[i](e, SG_DURATION_MAX + 1), SG_ERANGE);
        sg_easy_free(e);
        assert_int_equal(sg_easy_new(&e), 0);
        assert_int_equal(clocks[i](e, -1), SG_EINVAL);
        sg_easy_free(e);
    }
    sg_easy *e;
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_budget(e, SG_MS(1)), 0);
    assert_int_equal(sg_easy_set_budget(e, SG_DURATION_MAX), 0);
    assert_int_equal(sg_easy_set_attempts(e, 1), 0);
    assert_int_equal(sg_easy_set_attempts(e, SG_OP_MAX_ATTEMPTS), 0);
    sg_easy_free(e);
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_budget(e, 0), SG_EINVAL);
    sg_easy_free(e);
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_budget(e, SG_DURATION_MAX + 1), SG_ERANGE);
    sg_easy_free(e);
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_attempts(e, 0), SG_EINVAL);
    sg_easy_free(e);
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_attempts(e, SG_OP_MAX_ATTEMPTS + 1), SG_ERANGE);
    sg_easy_free(e);
}

/* A setter that failed is not forgotten: perform refuses with its code and
 * dials nothing, even after later setters succeeded. */
static void failed_setter_stops_perform_before_anything_is_sent(void **state) {
    (void)state;
    int port;
    int fd = loopback_socket(true, &port);
    char url[128];
    url_of(url, sizeof(url), port);
    sg_easy *e;
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_url(e, url), 0);
    assert_int_equal(sg_easy_set_idle_timeout(e, -5), SG_EINVAL);
    assert_int_equal(sg_easy_set_profile(e, "no-such-profile"), SG_EINVAL);
    assert_int_equal(sg_easy_set_idle_timeout(e, SG_SEC(1)), 0);
    assert_int_equal(sg_easy_perform(e), SG_EINVAL); /* the first failure's */
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_NONE);
    assert_int_equal(sg_easy_perform(e), SG_EINVAL); /* and again */
    sg_easy_free(e);

    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_url(e, url), 0);
    assert_int_equal(sg_easy_set_attempts(e, SG_OP_MAX_ATTEMPTS + 1), SG_ERANGE);
    assert_int_equal(sg_easy_perform(e), SG_ERANGE);
    sg_easy_free(e);

    /* Nobody connected to the listener. */
    int c = accept(fd, NULL, NULL);
    assert_int_equal(c, -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    close(fd);
}

/* Every connection refused: transport_error in phase connect, never sent,
 * so retried up to the default attempts; the report shows the defaults. */
static void defaults_show_in_the_report_of_a_refused_connection(void **state) {
    (void)state;
    int port;
    int fd = loopback_socket(false, &port);
    char url[128];
    url_of(url, sizeof(url), port);
    sg_easy *e;
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_url(e, url), 0);
    assert_int_equal(sg_easy_perform(e), 0); /* it ran: an outcome */
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_TRANSPORT_ERROR);
    assert_non_null(strstr(sg_easy_error(e), "curl 7 "));
    assert_null(sg_easy_error_body(e, NULL));

    size_t needed = 0;
    assert_int_equal(sg_easy_report(e, NULL, 0, &needed), SG_ENOBUFS);
    assert_true(needed > 100);
    char small[16];
    assert_int_equal(sg_easy_report(e, small, sizeof(small), NULL), SG_ENOBUFS);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    char report[8192];
    assert_true(needed <= sizeof(report));
    assert_int_equal(sg_easy_report(e, report, sizeof(report), NULL), 0);
    assert_int_equal(strlen(report) + 1, needed);
    /* budget 60 s, 3 attempts, no key, a GET without a body, every clock
     * off, no label */
    assert_non_null(strstr(report, "\"label\":null"));
    assert_non_null(
        strstr(report, "\"outcome\":\"transport_error\",\"phase\":\"connect\""));
    assert_non_null(strstr(report, "\"reason\":\"attempts_exhausted\""));
    assert_non_null(strstr(report, "\"method\":\"GET\",\"idempotency_key\":false,"
                                   "\"declared_idempotent\":false,\"budget_ms\":60000,"
                                   "\"floor_ms\":0,"));
    assert_non_null(strstr(report, "\"max_attempts\":3,"));
    assert_int_equal(count_of(report, "\"granted_ms\":{\"connect\":null,"), 3);
    assert_int_equal(count_of(report, "\"first_item\":null,\"idle\":null,"
                                      "\"stream_total\":null}"),
                     3);
    assert_int_equal(count_of(report, "\"sent\":false"), 3);

    const sg_op *op = sg_easy_op(e);
    assert_non_null(op);
    assert_int_equal(sg_op_attempt_count(op), 3);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_non_null(a);
    assert_false(a->sent);
    assert_int_equal(a->phase, SG_PHASE_CONNECT);

    /* With a body it is a POST, and perform runs a new operation each time:
     * one attempt now, the records of the last one gone. */
    assert_int_equal(sg_easy_set_body(e, "{}", 2), 0);
    assert_int_equal(sg_easy_set_attempts(e, 1), 0);
    assert_int_equal(sg_easy_set_idempotency_key(e, "unit-1"), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_TRANSPORT_ERROR);
    assert_int_equal(sg_op_attempt_count(sg_easy_op(e)), 1);
    assert_int_equal(sg_easy_report(e, report, sizeof(report), NULL), 0);
    assert_non_null(strstr(report, "\"method\":\"POST\",\"idempotency_key\":true,"));
    assert_non_null(strstr(report, "\"max_attempts\":1,"));
    assert_null(strstr(report, "unit-1")); /* never the key itself */
    sg_easy_free(e);
    close(fd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(new_and_free_take_null),
        cmocka_unit_test(every_setter_refuses_a_null_handle),
        cmocka_unit_test(before_any_outcome_nothing_passes_for_one),
        cmocka_unit_test(url_must_be_absolute_http_or_https),
        cmocka_unit_test(profile_must_be_a_built_in_one),
        cmocka_unit_test(header_lines_cannot_smuggle_another),
        cmocka_unit_test(body_key_and_ca_file_are_checked),
        cmocka_unit_test(clocks_budget_and_attempts_are_checked),
        cmocka_unit_test(failed_setter_stops_perform_before_anything_is_sent),
        cmocka_unit_test(defaults_show_in_the_report_of_a_refused_connection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
