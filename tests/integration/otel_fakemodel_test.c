/*
 * Trace context on the wire, checked at the far side: operations traced
 * by an sg_otel_trace run against the real sg-fakemodel over loopback -
 * the libcurl transport (HTTP/1.1) and the HTTP/2 transport - and the
 * traceparent (and tracestate) each attempt sent, as the server's request
 * log recorded it, names that attempt's own span, a child of the
 * operation's span, in the caller's trace.  The spans land in a capture
 * sink in place of the exporter (tests/unit/otel_sink.c).
 *
 * Usage: otel_fakemodel_test PATH/TO/sg-fakemodel
 */
#include "h2_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <streamguard/curl.h>
#include <streamguard/otel_trace.h>

#include "../sg_auto.h"
#include "otel_sink.h"

static const char *g_fm_path;
static fm_server server;

#define PARENT "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
#define STATE "congo=t61rcWkgMzE"

/* The span whose streamguard.attempt is @n; the operation's when 0. */
static const sg__otel_span *span_of(uint32_t n) {
    for (size_t i = 0; i < otel_sink_count(); i++) {
        const sg__otel_span *s = otel_sink_at(i);
        const sg__otel_attr *a = otel_attr(s, "streamguard.attempt");
        if ((n == 0 && a == NULL) || (a != NULL && a->v.i == (int64_t)n)) {
            return s;
        }
    }
    fail_msg("no span for attempt %u", n);
    return NULL;
}

/* The values of "field":"..." in @log, in order, into @out (at most @max). */
static int values(const char *log, const char *field, char out[][80], int max) {
    char needle[64];
    snprintf(needle, sizeof(needle), "\"%s\":\"", field);
    int n = 0;
    for (const char *p = log; n < max && (p = strstr(p, needle)) != NULL; n++) {
        p += strlen(needle);
        size_t len = strcspn(p, "\"");
        assert_true(len < 80);
        memcpy(out[n], p, len);
        out[n][len] = '\0';
    }
    return n;
}

/* Each attempt's request carried the traceparent of its own span, a child
 * of the operation's span in the caller's trace, and the tracestate. */
static void assert_wire_matches_spans(const char *key, uint32_t attempts) {
    char path[128];
    snprintf(path, sizeof(path), "/_log?event=received&key=%s", key);
    char *log = fm_fetch(&server, path, 0);
    assert_non_null(log);
    char tp[8][80], ts[8][80];
    assert_int_equal(values(log, "traceparent", tp, 8), (int)attempts);
    assert_int_equal(values(log, "tracestate", ts, 8), (int)attempts);
    free(log);
    const sg__otel_span *os = span_of(0);
    assert_memory_equal(os->parent_span_id, "\xb7\xad\x6b\x71\x69\x20\x33\x31", 8);
    for (uint32_t n = 1; n <= attempts; n++) {
        const sg__otel_span *as = span_of(n);
        assert_memory_equal(as->parent_span_id, os->span_id, 8);
        char want[64];
        traceparent_of(as, want);
        /* the server logs in arrival order: a hedge may arrive first */
        bool found = false;
        for (uint32_t i = 0; i < attempts; i++) {
            found = found || strcmp(tp[i], want) == 0;
        }
        if (!found) {
            fail_msg("attempt %u's span %s was sent by no request", n, want);
        }
        assert_memory_equal(want, PARENT, 36); /* the caller's trace */
        assert_string_equal(ts[n - 1], STATE);
        /* who set its lease, on every attempt whatever ended it */
        const sg__otel_attr *by = otel_attr(as, "streamguard.lease_by");
        assert_non_null(by);
        assert_true(strcmp(by->v.s, "budget") == 0 || strcmp(by->v.s, "attempt") == 0);
    }
}

static sg_otel_trace *traced(sg_op_options *po) {
    otel_sink_reset();
    sg_otel_trace *t = NULL;
    assert_int_equal(sg_otel_trace_new(&t, otel_sink()), 0);
    assert_int_equal(sg_otel_trace_set_parent(t, PARENT, STATE), 0);
    assert_int_equal(sg_op_options_add_observer(po, sg_otel_observer(t), t), 0);
    return t;
}

/* libcurl: one operation, its own easy handle. */
static void run_curl(const char *query, const char *key, sg_op_options *po,
                     sg_outcome want) {
    CURL *e = curl_easy_init();
    assert_non_null(e);
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/chat/completions?%s", server.base, query);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "{}");
    assert_int_equal(sg_op_options_set_idempotency_key(po, key), 0);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    sg_curl_op *op = NULL;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
    assert_int_equal(sg_curl_perform(op), 0);
    char rep[4096];
    (void)sg_curl_op_report(op, rep, sizeof(rep), NULL);
    if (sg_curl_op_outcome(op) != want) {
        fail_msg("%s", rep);
    }
    assert_int_equal(sg_op_observer_error(sg_curl_op_policy(op)), 0);
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
}

static void a_retry_over_http1_sends_each_attempts_own_span(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_attempt_timeout(po, SG_SEC(5));
    sg_op_options_set_backoff(po, SG_MS(10), SG_MS(10));
    sg_otel_trace *t = traced(po);
    run_curl("status=503&fail_first=1&n=3&_t=otel503.", "otel-503", po, SG_OUTCOME_OK);
    assert_int_equal(otel_sink_count(), 3);
    assert_wire_matches_spans("otel-503", 2);
    const sg__otel_span *a1 = span_of(1);
    assert_int_equal(otel_attr(a1, "http.response.status_code")->v.i, 503);
    /* the caller's 5 s ceiling set both leases: a 503 and a clean end */
    assert_string_equal(otel_attr(a1, "streamguard.lease_by")->v.s, "attempt");
    assert_string_equal(otel_attr(span_of(2), "streamguard.lease_by")->v.s, "attempt");
    assert_null(otel_attr(span_of(2), "streamguard.limit"));
    sg_otel_trace_free(t);
    otel_sink_reset();
}

static void a_hedge_over_http1_sends_its_own_span_beside_the_loser(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_hedging(po, SG_MS(200), 1);
    sg_otel_trace *t = traced(po);
    /* the first request of the key waits 5 s for its first item, the
     * hedge beside it does not */
    run_curl("n=3&tail_first=1&tail_delay=5000&_t=otelhedge.", "otel-hedge", po,
             SG_OUTCOME_OK);
    assert_int_equal(otel_sink_count(), 3);
    assert_wire_matches_spans("otel-hedge", 2);
    assert_true(otel_attr(span_of(2), "streamguard.hedge")->v.b);
    assert_string_equal(otel_attr(span_of(1), "streamguard.reason")->v.s, "hedge_lost");
    assert_string_equal(otel_attr(span_of(1), "streamguard.lease_by")->v.s, "budget");
    assert_null(otel_attr(span_of(1), "streamguard.limit")); /* cancelled, no clock */
    sg_otel_trace_free(t);
    otel_sink_reset();
}

/* A stream the server cut after two items: partial, no clock ended it,
 * and its span still says who set its lease. */
static void a_stream_the_server_cut_says_who_set_its_lease(void **state) {
    (void)state;
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_otel_trace *t = traced(po);
    run_curl("n=5&drop_after=2&_t=otelcut.", "otel-cut", po, SG_OUTCOME_TRUNCATED);
    assert_int_equal(otel_sink_count(), 2);
    assert_wire_matches_spans("otel-cut", 1);
    const sg__otel_span *a1 = span_of(1);
    assert_true(otel_attr(a1, "streamguard.partial")->v.b);
    assert_null(otel_attr(a1, "streamguard.limit"));
    assert_string_equal(otel_attr(a1, "streamguard.lease_by")->v.s, "budget");
    sg_otel_trace_free(t);
    otel_sink_reset();
}

/* The HTTP/2 transport: the headers go lowercase on the stream. */
static int on_h2_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    (void)ud;
    return 0;
}

static void a_retry_over_http2_sends_each_attempts_own_span(void **state) {
    (void)state;
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&server, false, &c, err), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_backoff(po, SG_MS(10), SG_MS(10));
    assert_int_equal(sg_op_options_set_idempotency_key(po, "otel-h2"), 0);
    sg_otel_trace *t = traced(po);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "POST";
    req.path = "/v1/chat/completions?status=503&fail_first=1&n=3&_t=otelh2.";
    req.body = "{}";
    req.body_len = 2;
    static const sg_test_h2_cbs cbs = {.on_item = on_h2_item};
    sg_stream_config f = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    sg_h2_op *op = NULL;
    assert_int_equal(sg_test_h2_start(c, &req, &f, po, &cbs, NULL, &op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(op), SG_OUTCOME_OK);
    assert_int_equal(otel_sink_count(), 3);
    assert_wire_matches_spans("otel-h2", 2);
    sg_h2_op_free(op);
    sg_h2_conn_free(c);
    sg_otel_trace_free(t);
    otel_sink_reset();
}

static int setup(void **state) {
    (void)state;
    return h2t_start(&server, g_fm_path, NULL);
}

static int teardown(void **state) {
    (void)state;
    h2t_stop(&server);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel\n", argv[0]);
        return 2;
    }
    g_fm_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_retry_over_http1_sends_each_attempts_own_span),
        cmocka_unit_test(a_hedge_over_http1_sends_its_own_span_beside_the_loser),
        cmocka_unit_test(a_stream_the_server_cut_says_who_set_its_lease),
        cmocka_unit_test(a_retry_over_http2_sends_each_attempts_own_span),
    };
    return cmocka_run_group_tests_name("otel_fakemodel", tests, setup, teardown);
}
