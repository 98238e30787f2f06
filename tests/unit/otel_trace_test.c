/*
 * The OpenTelemetry observer (<streamguard/otel_trace.h>): the spans an
 * operation becomes - their parent links, times and attributes - for a
 * clean stream, a retried first-token timeout, a hedge won and lost, a
 * fallback, a partial stream and a caller's probe; the traceparent each attempt carries;
 * and the observer seams it plugs into (several observers per operation,
 * the per-attempt headers).  Time is driven by hand; the spans land in a
 * capture sink in place of the exporter (otel_sink.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <streamguard/op.h>
#include <streamguard/otel_trace.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"
#include "otel_sink.h"
#include "policy/internal.h" /* struct sg_op_headers, sg__op_attempt_headers */

#define T0 SG_SEC(1000)
#define UNIX0 INT64_C(1767225600000000000) /* 2026-01-01T00:00:00Z */

static uint64_t unix_at(int64_t mono) {
    return (uint64_t)(UNIX0 + (mono - T0));
}

/* A trace on the capture sink, its clock pinned: T0 is UNIX0. */
static sg_otel_trace *new_trace(void) {
    otel_sink_reset();
    sg_otel_trace *t = NULL;
    assert_int_equal(sg_otel_trace_new(&t, otel_sink()), 0);
    assert_int_equal(sg_otel_trace_set_clock(t, T0, UNIX0), 0);
    return t;
}

static void teardown_trace(sg_otel_trace *t) {
    sg_otel_trace_free(t);
    otel_sink_reset();
}

/* The headers the observers give attempt @n of @op (as the lifecycle asks
 * for them), into @h; the traceparent's value into @tp (or ""). */
static void headers_of(sg_op *op, uint32_t n, sg_op_headers *h, char *tp, size_t len) {
    sg__op_attempt_headers(op, sg_op_attempt_at(op, n - 1), h);
    tp[0] = '\0';
    for (size_t i = 0; i < h->n; i++) {
        if (strcmp(h->h[i].name, "traceparent") == 0) {
            snprintf(tp, len, "%s", h->h[i].value);
        }
    }
}

static const char *str_attr(const sg__otel_span *s, const char *key) {
    const sg__otel_attr *a = otel_attr(s, key);
    if (a == NULL) {
        return NULL;
    }
    assert_int_equal(a->type, SG__OTEL_STRING);
    return a->v.s;
}

static int64_t int_attr(const sg__otel_span *s, const char *key) {
    const sg__otel_attr *a = otel_attr(s, key);
    assert_non_null(a);
    assert_int_equal(a->type, SG__OTEL_INT);
    return a->v.i;
}

static bool bool_attr(const sg__otel_span *s, const char *key) {
    const sg__otel_attr *a = otel_attr(s, key);
    assert_non_null(a);
    assert_int_equal(a->type, SG__OTEL_BOOL);
    return a->v.b;
}

static double double_attr(const sg__otel_span *s, const char *key) {
    const sg__otel_attr *a = otel_attr(s, key);
    assert_non_null(a);
    assert_int_equal(a->type, SG__OTEL_DOUBLE);
    return a->v.d;
}

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

static void assert_child_of(const sg__otel_span *child, const sg__otel_span *parent) {
    assert_memory_equal(child->trace_id, parent->trace_id, 16);
    assert_memory_equal(child->parent_span_id, parent->span_id, 8);
    assert_memory_not_equal(child->span_id, parent->span_id, 8);
}

/* Attempt @n's result at @now. */
static sg_op_verdict done(sg_op *op, uint32_t n, int64_t now, sg_outcome oc, int status,
                          uint64_t items, int64_t first_ns, const sg_op_usage *u) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.attempt = n;
    r.outcome = oc;
    r.phase = items > 0     ? SG_PHASE_STREAMING
              : status != 0 ? SG_PHASE_WAIT_FIRST_ITEM
                            : SG_PHASE_WAIT_HEADERS;
    r.sent = true;
    r.headers_received = status != 0;
    r.http_status = status;
    r.items = items;
    r.bytes = items * 10;
    r.first_item_ns = items > 0 ? first_ns : -1;
    r.partial = items > 0 && oc != SG_OUTCOME_OK;
    r.usage = u;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    return v;
}

static void base_options(sg_op_options *o, sg_otel_trace *t) {
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(30)), 0);
    assert_int_equal(
        sg_op_options_set_target(o, "https://api.example.com:8443/v1/chat?key=s3cret"),
        0);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "k-otel-1"), 0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(100), SG_MS(100)), 0);
    assert_int_equal(sg_op_options_add_observer(o, sg_otel_observer(t), t), 0);
}

/* ----------------------------------------------------------- scenarios */

static void a_clean_stream_is_an_operation_span_with_one_attempt(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    assert_int_equal(sg_otel_trace_set_genai(t, "openai", "chat", "gpt-4o"), 0);
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    assert_int_equal(sg_op_options_set_first_item_timeout(o, SG_SEC(5)), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(1), &p), 0);
    sg_op_headers h = {0};
    char tp[64];
    headers_of(op, 1, &h, tp, sizeof(tp));
    assert_int_equal(h.n, 1); /* no tracestate without a parent's */
    assert_int_equal(strlen(tp), 55);
    sg_op_usage u = {12, 34, 2, -1, SG_USAGE_PROVIDER};
    sg_op_verdict v = done(op, 1, T0 + SG_MS(901), SG_OUTCOME_OK, 200, 5, SG_MS(120), &u);
    assert_int_equal(v.decision, SG_OP_DONE);
    assert_int_equal(otel_sink_count(), 2); /* the attempt's at its end, then the op's */

    const sg__otel_span *os = otel_sink_at(1), *as = otel_sink_at(0);
    assert_ptr_equal(span_of(0), os);
    assert_ptr_equal(span_of(1), as);
    /* links: the operation is a root, the attempt its child; the attempt's
     * traceparent named the attempt's own span */
    assert_true(memcmp(os->parent_span_id, "\0\0\0\0\0\0\0\0", 8) == 0);
    assert_child_of(as, os);
    char want[64];
    traceparent_of(as, want);
    assert_string_equal(tp, want);
    char optp[64];
    assert_int_equal(sg_otel_trace_traceparent(t, optp, sizeof(optp)), 0);
    traceparent_of(os, want);
    assert_string_equal(optp, want);
    assert_int_equal(sg_otel_trace_traceparent(t, optp, 55), SG_ENOBUFS);
    /* times */
    assert_int_equal(os->start_unix_nano, unix_at(T0));
    assert_int_equal(os->end_unix_nano, unix_at(T0 + SG_MS(901)));
    assert_int_equal(as->start_unix_nano, unix_at(T0 + SG_MS(1)));
    assert_int_equal(as->end_unix_nano, unix_at(T0 + SG_MS(901)));
    assert_int_equal(as->nevents, 1);
    assert_string_equal(as->events[0].name, "streamguard.first_chunk");
    assert_int_equal(as->events[0].time_unix_nano, unix_at(T0 + SG_MS(121)));
    /* the operation: GenAI names, kept usage, time to first chunk from its start */
    assert_string_equal(os->name, "chat gpt-4o");
    assert_int_equal(os->kind, SG__OTEL_KIND_CLIENT);
    assert_int_equal(os->status, SG__OTEL_STATUS_UNSET);
    assert_string_equal(str_attr(os, "gen_ai.operation.name"), "chat");
    assert_string_equal(str_attr(os, "gen_ai.provider.name"), "openai");
    assert_string_equal(str_attr(os, "gen_ai.request.model"), "gpt-4o");
    assert_int_equal(int_attr(os, "gen_ai.usage.input_tokens"), 12);
    assert_int_equal(int_attr(os, "gen_ai.usage.output_tokens"), 34);
    assert_int_equal(int_attr(os, "gen_ai.usage.cache_read.input_tokens"), 2);
    assert_null(otel_attr(os, "gen_ai.usage.reasoning.output_tokens")); /* unknown */
    assert_int_equal(int_attr(os, "streamguard.usage.discarded.input_tokens"), 0);
    assert_true(double_attr(os, "gen_ai.response.time_to_first_chunk") == 0.121);
    assert_string_equal(str_attr(os, "streamguard.outcome"), "ok");
    assert_string_equal(str_attr(os, "streamguard.decision"), "done");
    assert_int_equal(int_attr(os, "streamguard.attempts"), 1);
    assert_int_equal(int_attr(os, "streamguard.budget_ms"), 30000);
    assert_null(otel_attr(os, "error.type"));
    /* the attempt: HTTP names, no query (a key may be in it) */
    assert_string_equal(as->name, "POST");
    assert_string_equal(str_attr(as, "http.request.method"), "POST");
    assert_string_equal(str_attr(as, "gen_ai.request.model"), "gpt-4o");
    assert_string_equal(str_attr(as, "url.full"), "https://api.example.com:8443/v1/chat");
    assert_string_equal(str_attr(as, "server.address"), "api.example.com");
    assert_int_equal(int_attr(as, "server.port"), 8443);
    assert_int_equal(int_attr(as, "http.response.status_code"), 200);
    assert_null(otel_attr(as, "http.request.resend_count"));
    assert_true(double_attr(as, "gen_ai.response.time_to_first_chunk") == 0.12);
    assert_int_equal(int_attr(as, "gen_ai.usage.input_tokens"), 12);
    assert_int_equal(int_attr(as, "gen_ai.usage.output_tokens"), 34);
    assert_int_equal(int_attr(as, "gen_ai.usage.cache_read.input_tokens"), 2);
    assert_null(otel_attr(as, "gen_ai.usage.reasoning.output_tokens"));
    assert_string_equal(str_attr(as, "streamguard.usage.source"), "provider");
    assert_string_equal(str_attr(as, "streamguard.outcome"), "ok");
    assert_string_equal(str_attr(as, "streamguard.phase"), "streaming");
    assert_false(bool_attr(as, "streamguard.discarded"));
    assert_false(bool_attr(as, "streamguard.partial"));
    assert_false(bool_attr(as, "streamguard.hedge"));
    assert_int_equal(int_attr(as, "streamguard.granted.first_item_ms"), 5000);
    assert_int_equal(int_attr(as, "streamguard.granted.attempt_ms"), 29999);
    assert_int_equal(int_attr(as, "streamguard.items"), 5);
    assert_null(otel_attr(as, "streamguard.limit")); /* no clock ended it */
    assert_string_equal(str_attr(as, "streamguard.lease_by"), "budget"); /* no ceiling */
    assert_null(otel_attr(as, "error.type"));
    assert_int_equal(as->dropped_attrs, 0);
    assert_int_equal(os->dropped_attrs, 0);
    assert_int_equal(sg_op_observer_error(op), 0);
    sg__op_headers_release(&h);
    teardown_trace(t);
}

static void a_retried_first_token_timeout_is_two_attempts_and_a_backoff(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    assert_int_equal(sg_op_options_set_first_item_timeout(o, SG_MS(500)), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_headers h = {0};
    char tp1[64], tp2[64];
    headers_of(op, 1, &h, tp1, sizeof(tp1));
    sg_op_verdict v =
        done(op, 1, T0 + SG_MS(500), SG_OUTCOME_FIRST_ITEM_TIMEOUT, 200, 0, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(otel_sink_count(), 1); /* attempt 1's span, at its end */
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    headers_of(op, 2, &h, tp2, sizeof(tp2));
    assert_string_not_equal(tp1, tp2);
    assert_memory_equal(tp1, tp2, 36); /* one trace: "00-" and the trace id */
    done(op, 2, v.retry_at + SG_MS(800), SG_OUTCOME_OK, 200, 3, SG_MS(200), NULL);
    assert_int_equal(otel_sink_count(), 3);

    const sg__otel_span *os = span_of(0), *a1 = span_of(1), *a2 = span_of(2);
    assert_child_of(a1, os);
    assert_child_of(a2, os);
    char want[64];
    traceparent_of(a1, want);
    assert_string_equal(tp1, want);
    traceparent_of(a2, want);
    assert_string_equal(tp2, want);
    /* the timeout: an error, its clock named, its request discarded */
    assert_int_equal(a1->status, SG__OTEL_STATUS_ERROR);
    assert_string_equal(str_attr(a1, "error.type"), "first_item_timeout");
    assert_string_equal(str_attr(a1, "streamguard.limit"), "first_item");
    assert_string_equal(str_attr(a1, "streamguard.lease_by"), "budget");
    assert_string_equal(str_attr(a2, "streamguard.lease_by"), "budget");
    assert_string_equal(str_attr(a1, "streamguard.phase"), "wait_first_item");
    assert_string_equal(str_attr(a1, "streamguard.decision"), "retry");
    assert_string_equal(str_attr(a1, "streamguard.reason"), "retryable");
    assert_true(bool_attr(a1, "streamguard.discarded"));
    assert_true(bool_attr(a1, "streamguard.retryable"));
    assert_int_equal(int_attr(a1, "streamguard.backoff_ms"), v.delay_ns / SG_MS(1));
    assert_null(otel_attr(a1, "gen_ai.response.time_to_first_chunk"));
    assert_int_equal(a1->end_unix_nano, unix_at(T0 + SG_MS(500)));
    /* the retry */
    assert_int_equal(int_attr(a2, "http.request.resend_count"), 1);
    assert_int_equal(a2->start_unix_nano, unix_at(v.retry_at));
    assert_int_equal(a2->status, SG__OTEL_STATUS_UNSET);
    /* the operation: ok, its first chunk counted from its start, the
     * backoff an event at attempt 1's end */
    assert_int_equal(os->status, SG__OTEL_STATUS_UNSET);
    assert_string_equal(os->name, "streamguard.operation");
    assert_int_equal(int_attr(os, "streamguard.attempts"), 2);
    assert_int_equal(int_attr(os, "streamguard.deciding_attempt"), 2);
    assert_true(double_attr(os, "gen_ai.response.time_to_first_chunk") ==
                (double)(v.retry_at + SG_MS(200) - T0) / 1e9);
    assert_int_equal(os->nevents, 1);
    assert_string_equal(os->events[0].name, "streamguard.backoff");
    assert_int_equal(os->events[0].time_unix_nano, unix_at(T0 + SG_MS(500)));
    assert_int_equal(otel_event_attr(&os->events[0], "streamguard.attempt")->v.i, 1);
    assert_int_equal(otel_event_attr(&os->events[0], "streamguard.backoff_ms")->v.i,
                     v.delay_ns / SG_MS(1));
    sg__op_headers_release(&h);
    teardown_trace(t);
}

static void a_hedge_won_and_lost_are_two_children(void **state) {
    (void)state;
    static const char *const eps[] = {"http://a.example/v1", "http://[::1]:9000/v1"};
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    assert_int_equal(sg_op_options_set_endpoints(o, eps, 2), 0);
    assert_int_equal(sg_op_options_set_hedging(o, SG_MS(200), 1), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    assert_int_equal(sg_op_hedge(op, T0 + SG_MS(200), &p), 0);
    sg_op_headers h = {0};
    char tp1[64], tp2[64];
    headers_of(op, 1, &h, tp1, sizeof(tp1));
    headers_of(op, 2, &h, tp2, sizeof(tp2));
    assert_int_equal(sg_op_hedge_won(op, 2), 1);
    done(op, 1, T0 + SG_MS(251), SG_OUTCOME_CANCELLED, 200, 0, 0, NULL);
    done(op, 2, T0 + SG_MS(900), SG_OUTCOME_OK, 200, 4, SG_MS(50), NULL);
    assert_int_equal(otel_sink_count(), 3);
    const sg__otel_span *os = span_of(0), *lost = span_of(1), *won = span_of(2);
    assert_child_of(lost, os);
    assert_child_of(won, os);
    char want[64];
    traceparent_of(lost, want);
    assert_string_equal(tp1, want);
    traceparent_of(won, want);
    assert_string_equal(tp2, want);
    /* losing a hedge is no error: cancelled by design, discarded */
    assert_int_equal(lost->status, SG__OTEL_STATUS_UNSET);
    assert_null(otel_attr(lost, "error.type"));
    assert_string_equal(str_attr(lost, "streamguard.reason"), "hedge_lost");
    assert_string_equal(str_attr(lost, "streamguard.outcome"), "cancelled");
    assert_string_equal(str_attr(lost, "streamguard.lease_by"), "budget");
    assert_string_equal(str_attr(won, "streamguard.lease_by"), "budget");
    assert_true(bool_attr(lost, "streamguard.discarded"));
    assert_false(bool_attr(lost, "streamguard.hedge"));
    assert_string_equal(str_attr(lost, "url.full"), "http://a.example:80/v1");
    assert_int_equal(int_attr(lost, "streamguard.hedge_after_ms"), 200);
    assert_string_equal(str_attr(lost, "streamguard.hedge_after_source"), "fixed");
    assert_true(bool_attr(won, "streamguard.hedge"));
    assert_false(bool_attr(won, "streamguard.discarded"));
    assert_int_equal(int_attr(won, "streamguard.endpoint"), 1);
    assert_string_equal(str_attr(won, "server.address"), "::1");
    assert_int_equal(int_attr(won, "server.port"), 9000);
    assert_int_equal(int_attr(won, "http.request.resend_count"), 1);
    assert_int_equal(won->start_unix_nano, unix_at(T0 + SG_MS(200)));
    assert_int_equal(int_attr(os, "streamguard.hedges"), 1);
    assert_int_equal(int_attr(os, "streamguard.deciding_attempt"), 2);
    assert_string_equal(str_attr(os, "streamguard.outcome"), "ok");
    sg__op_headers_release(&h);
    teardown_trace(t);
}

static void a_fallback_names_each_attempts_endpoint(void **state) {
    (void)state;
    static const char *const eps[] = {"https://primary.example/v1/messages",
                                      "https://user:pw@backup.example:444/v1/messages"};
    sg_otel_trace *t = new_trace();
    /* the operation asks for one model, its fallback for another */
    assert_int_equal(sg_otel_trace_set_genai(t, "anthropic", "chat", "claude-big"), 0);
    assert_int_equal(sg_otel_trace_set_endpoint_model(t, 1, "claude-small"), 0);
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    assert_int_equal(sg_op_options_set_endpoints(o, eps, 2), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_verdict v = done(op, 1, T0 + SG_MS(40), SG_OUTCOME_HTTP_ERROR, 503, 0, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.delay_ns, 0); /* the other endpoint goes at once */
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    assert_int_equal(p.endpoint, 1);
    done(op, 2, T0 + SG_MS(700), SG_OUTCOME_OK, 200, 2, SG_MS(90), NULL);
    const sg__otel_span *os = span_of(0), *a1 = span_of(1), *a2 = span_of(2);
    assert_child_of(a1, os);
    assert_child_of(a2, os);
    assert_string_equal(str_attr(a1, "url.full"),
                        "https://primary.example:443/v1/messages");
    assert_string_equal(str_attr(a1, "server.address"), "primary.example");
    assert_int_equal(int_attr(a1, "http.response.status_code"), 503);
    assert_string_equal(str_attr(a1, "error.type"), "503"); /* HTTP's convention */
    assert_int_equal(a1->status, SG__OTEL_STATUS_ERROR);
    assert_int_equal(int_attr(a1, "streamguard.endpoint"), 0);
    assert_string_equal(str_attr(a1, "streamguard.lease_by"), "budget");
    assert_string_equal(str_attr(a2, "streamguard.lease_by"), "budget");
    /* no credentials in a span */
    assert_string_equal(str_attr(a2, "url.full"),
                        "https://backup.example:444/v1/messages");
    assert_int_equal(int_attr(a2, "server.port"), 444);
    assert_int_equal(int_attr(a2, "streamguard.endpoint"), 1);
    assert_false(bool_attr(a2, "streamguard.hedge"));
    assert_string_equal(str_attr(os, "streamguard.outcome"), "ok");
    /* the model each asked for; the operation's is the one it was asked */
    assert_string_equal(str_attr(a1, "gen_ai.request.model"), "claude-big");
    assert_string_equal(str_attr(a2, "gen_ai.request.model"), "claude-small");
    assert_string_equal(str_attr(os, "gen_ai.request.model"), "claude-big");
    assert_string_equal(os->name, "chat claude-big");
    /* removed, the fallback's attempt asks for the operation's again */
    otel_sink_reset();
    assert_int_equal(sg_otel_trace_set_endpoint_model(t, 1, NULL), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    v = done(op, 1, T0 + SG_MS(40), SG_OUTCOME_HTTP_ERROR, 503, 0, 0, NULL);
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    done(op, 2, T0 + SG_MS(700), SG_OUTCOME_OK, 200, 2, SG_MS(90), NULL);
    assert_string_equal(str_attr(span_of(2), "gen_ai.request.model"), "claude-big");
    /* one it cannot name ("") is none, never the operation's */
    otel_sink_reset();
    assert_int_equal(sg_otel_trace_set_endpoint_model(t, 1, ""), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    v = done(op, 1, T0 + SG_MS(40), SG_OUTCOME_HTTP_ERROR, 503, 0, 0, NULL);
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    done(op, 2, T0 + SG_MS(700), SG_OUTCOME_OK, 200, 2, SG_MS(90), NULL);
    assert_string_equal(str_attr(span_of(1), "gen_ai.request.model"), "claude-big");
    assert_null(otel_attr(span_of(2), "gen_ai.request.model"));
    assert_int_equal(sg_otel_trace_set_endpoint_model(t, 1, NULL), 0);
    /* and without a model of the operation's, an attempt names none */
    otel_sink_reset();
    assert_int_equal(sg_otel_trace_set_genai(t, "anthropic", "chat", NULL), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    done(op, 1, T0 + SG_MS(40), SG_OUTCOME_OK, 200, 2, SG_MS(9), NULL);
    assert_null(otel_attr(span_of(1), "gen_ai.request.model"));
    char name[SG_OTEL_NAME_MAX + 2];
    memset(name, 'm', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(sg_otel_trace_set_endpoint_model(t, 1, name), SG_ERANGE);
    assert_int_equal(sg_otel_trace_set_endpoint_model(t, SG_OP_MAX_ENDPOINTS, "m"),
                     SG_ERANGE);
    assert_int_equal(sg_otel_trace_set_endpoint_model(NULL, 0, "m"), SG_EINVAL);
    assert_int_equal(sg_otel_trace_set_endpoint_model(t, 0, "kept-until-freed"), 0);
    teardown_trace(t);
}

static void a_partial_stream_is_an_error_with_its_items_discarded(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    assert_int_equal(sg_op_options_set_idle_timeout(o, SG_MS(300)), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_usage u = {40, 7, 32, 5, SG_USAGE_PROVIDER};
    sg_op_verdict v =
        done(op, 1, T0 + SG_MS(800), SG_OUTCOME_IDLE_TIMEOUT, 200, 3, SG_MS(100), &u);
    assert_int_equal(v.decision, SG_OP_STOP);
    assert_int_equal(v.reason, SG_OP_REASON_PARTIAL_STREAM);
    const sg__otel_span *os = span_of(0), *a1 = span_of(1);
    assert_child_of(a1, os);
    assert_true(bool_attr(a1, "streamguard.partial"));
    assert_true(bool_attr(a1, "streamguard.discarded"));
    assert_string_equal(str_attr(a1, "streamguard.limit"), "idle");
    assert_string_equal(str_attr(a1, "streamguard.lease_by"), "budget");
    assert_string_equal(str_attr(a1, "error.type"), "idle_timeout");
    assert_string_equal(str_attr(a1, "streamguard.reason"), "partial_stream");
    assert_true(double_attr(a1, "gen_ai.response.time_to_first_chunk") == 0.1);
    assert_int_equal(os->status, SG__OTEL_STATUS_ERROR);
    assert_string_equal(os->status_message, "idle_timeout (partial_stream)");
    assert_string_equal(str_attr(os, "error.type"), "idle_timeout");
    assert_true(bool_attr(os, "streamguard.partial"));
    assert_string_equal(str_attr(os, "streamguard.limit"), "idle");
    assert_null(otel_attr(os, "gen_ai.response.time_to_first_chunk")); /* nothing kept */
    /* its usage: nothing kept, all of it discarded, every kind */
    assert_null(otel_attr(os, "gen_ai.usage.input_tokens"));
    assert_null(otel_attr(os, "gen_ai.usage.cache_read.input_tokens"));
    assert_int_equal(int_attr(os, "streamguard.usage.discarded.input_tokens"), 40);
    assert_int_equal(int_attr(os, "streamguard.usage.discarded.output_tokens"), 7);
    assert_int_equal(int_attr(os, "streamguard.usage.discarded.cache_read.input_tokens"),
                     32);
    assert_int_equal(int_attr(os, "streamguard.usage.discarded.reasoning.output_tokens"),
                     5);
    assert_int_equal(int_attr(a1, "gen_ai.usage.reasoning.output_tokens"), 5);
    assert_int_equal(os->end_unix_nano, unix_at(T0 + SG_MS(800)));
    teardown_trace(t);
}

/* Who set each attempt's lease is on its span whatever ended it: the
 * caller's attempt timeout while it is the tighter, then the budget. */
static void every_attempt_says_who_set_its_lease(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_SEC(20)), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_verdict v =
        done(op, 1, T0 + SG_SEC(15), SG_OUTCOME_HTTP_ERROR, 503, 0, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0); /* under 15 s left */
    done(op, 2, v.retry_at + SG_SEC(1), SG_OUTCOME_OK, 200, 2, SG_MS(90), NULL);
    const sg__otel_span *a1 = span_of(1), *a2 = span_of(2);
    assert_null(otel_attr(a1, "streamguard.limit"));
    assert_null(otel_attr(a2, "streamguard.limit"));
    assert_string_equal(str_attr(a1, "streamguard.lease_by"), "attempt");
    assert_int_equal(int_attr(a1, "streamguard.granted.attempt_ms"), 20000);
    assert_string_equal(str_attr(a2, "streamguard.lease_by"), "budget");
    assert_true(int_attr(a2, "streamguard.granted.attempt_ms") < 15000);
    teardown_trace(t);
}

/* The caller's probe (sg_op_options_set_probe: a connection it tried
 * before the operation, that failed) sent nothing: it is a span of its own,
 * attempt 1 marked streamguard.probe, before the operation's own first
 * attempt - which is no resend - and the reader says which is which. */
static void a_callers_probe_is_a_marked_span_and_no_resend(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    assert_int_equal(sg_op_options_set_started_at(o, T0), 0);
    assert_int_equal(
        sg_op_options_set_probe(o, T0 + SG_MS(200), SG_SEC(10), false, "refused"), 0);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0 + SG_MS(200)), 0);
    assert_true(sg_op_attempt_probe(op, 0));
    assert_false(sg_op_attempt_probe(op, 1)); /* no such attempt yet */
    assert_false(sg_op_attempt_probe(NULL, 0));
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(200), &p), 0);
    assert_false(sg_op_attempt_probe(op, 1));
    sg_op_headers h = {0};
    char tp[64];
    headers_of(op, 2, &h, tp, sizeof(tp));
    sg_op_verdict v =
        done(op, 2, T0 + SG_MS(300), SG_OUTCOME_HTTP_ERROR, 503, 0, 0, NULL);
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), 0);
    done(op, 3, v.retry_at + SG_MS(100), SG_OUTCOME_OK, 200, 2, SG_MS(50), NULL);
    assert_int_equal(otel_sink_count(), 4);
    const sg__otel_span *os = span_of(0), *a1 = span_of(1), *a2 = span_of(2),
                        *a3 = span_of(3);
    assert_ptr_equal(otel_sink_at(0), a1); /* before the attempt after it */
    assert_child_of(a1, os);
    assert_true(bool_attr(a1, "streamguard.probe"));
    assert_null(otel_attr(a1, "http.request.resend_count"));
    assert_false(bool_attr(a1, "streamguard.sent"));
    assert_false(bool_attr(a1, "streamguard.discarded"));
    assert_string_equal(str_attr(a1, "streamguard.phase"), "connect");
    assert_string_equal(str_attr(a1, "error.type"), "transport_error");
    assert_string_equal(str_attr(a1, "streamguard.error"), "refused");
    assert_int_equal(a1->start_unix_nano, unix_at(T0));
    assert_int_equal(a1->end_unix_nano, unix_at(T0 + SG_MS(200)));
    /* the operation's own first attempt is its first send */
    assert_null(otel_attr(a2, "streamguard.probe"));
    assert_null(otel_attr(a2, "http.request.resend_count"));
    char want[64];
    traceparent_of(a2, want);
    assert_string_equal(tp, want);
    sg__op_headers_release(&h);
    assert_null(otel_attr(a3, "streamguard.probe"));
    assert_int_equal(int_attr(a3, "http.request.resend_count"), 1);
    assert_int_equal(int_attr(os, "streamguard.attempts"), 3);
    teardown_trace(t);

    /* a probe that used the budget up: no attempt follows, and its span
     * goes with the operation's, its decision final */
    t = new_trace();
    SG_AUTO_OPTIONS(o2);
    base_options(o2, t);
    assert_int_equal(sg_op_options_set_budget(o2, SG_MS(500)), 0);
    assert_int_equal(sg_op_options_set_started_at(o2, T0), 0);
    assert_int_equal(
        sg_op_options_set_probe(o2, T0 + SG_MS(500), SG_SEC(10), true, "timed out"), 0);
    SG_AUTO_OP(op2);
    assert_int_equal(sg_op_start(op2, o2, T0 + SG_MS(500)), 0);
    assert_int_equal(sg_op_next_attempt(op2, T0 + SG_MS(500), &p), SG_EREFUSED);
    assert_int_equal(otel_sink_count(), 2);
    a1 = span_of(1);
    assert_ptr_equal(otel_sink_at(0), a1);
    assert_true(bool_attr(a1, "streamguard.probe"));
    assert_string_equal(str_attr(a1, "streamguard.decision"), "stop");
    assert_string_equal(str_attr(a1, "streamguard.outcome"), "budget_exhausted");
    assert_child_of(a1, span_of(0));
    teardown_trace(t);
}

/* ------------------------------------------------------- trace context */

static void an_operation_continues_its_callers_context(void **state) {
    (void)state;
    const char *parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    sg_otel_trace *t = new_trace();
    assert_int_equal(
        sg_otel_trace_set_parent(t, parent, "rojo=00f067aa0ba902b7,congo=t61"), 0);
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_headers h = {0};
    char tp[64];
    headers_of(op, 1, &h, tp, sizeof(tp));
    assert_int_equal(h.n, 2);
    assert_string_equal(h.h[1].name, "tracestate");
    assert_string_equal(h.h[1].value, "rojo=00f067aa0ba902b7,congo=t61");
    assert_memory_equal(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36);
    assert_string_equal(tp + 52, "-01");
    done(op, 1, T0 + SG_MS(100), SG_OUTCOME_OK, 200, 1, SG_MS(10), NULL);
    const sg__otel_span *os = span_of(0), *a1 = span_of(1);
    char want[64];
    traceparent_of(os, want);
    assert_memory_equal(want, parent, 36); /* the caller's trace */
    static const uint8_t pspan[8] = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7};
    assert_memory_equal(os->parent_span_id, pspan, 8);
    assert_child_of(a1, os);
    traceparent_of(a1, want);
    assert_string_equal(tp, want);
    assert_string_equal(os->trace_state, "rojo=00f067aa0ba902b7,congo=t61");
    assert_string_equal(a1->trace_state, "rojo=00f067aa0ba902b7,congo=t61");

    /* a parent that is not sampled: nothing is exported, but each attempt
     * still carries the context, unsampled */
    otel_sink_reset();
    assert_int_equal(
        sg_otel_trace_set_parent(
            t, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", NULL),
        0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    headers_of(op, 1, &h, tp, sizeof(tp));
    assert_int_equal(h.n, 1);
    assert_memory_equal(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-", 36);
    assert_string_equal(tp + 52, "-00");
    assert_memory_not_equal(tp + 36, "00f067aa0ba902b7", 16);
    done(op, 1, T0 + SG_MS(100), SG_OUTCOME_OK, 200, 1, SG_MS(10), NULL);
    assert_int_equal(otel_sink_count(), 0);
    sg__op_headers_release(&h);
    teardown_trace(t);
}

static void a_malformed_parent_is_refused(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    const char *bad[] = {
        "",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   /* uppercase */
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   /* zero trace */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   /* zero span */
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   /* version ff */
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", /* 00 is 55 */
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sg_otel_trace_set_parent(t, bad[i], NULL), SG_EINVAL);
    }
    /* a later version may carry more after its flags */
    assert_int_equal(
        sg_otel_trace_set_parent(
            t, "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-ab", NULL),
        0);
    const char *ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_int_equal(sg_otel_trace_set_parent(t, ok, "a=1\r\nx: y"), SG_EINVAL);
    char big[SG_OTEL_TRACESTATE_MAX + 2];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(sg_otel_trace_set_parent(t, ok, big), SG_ERANGE);
    assert_int_equal(sg_otel_trace_set_parent(NULL, ok, NULL), SG_EINVAL);
    assert_int_equal(sg_otel_trace_set_parent(t, NULL, NULL), 0);
    char name[SG_OTEL_NAME_MAX + 2];
    memset(name, 'm', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(sg_otel_trace_set_genai(t, "openai", "chat", name), SG_ERANGE);
    assert_int_equal(sg_otel_trace_new(NULL, otel_sink()), SG_EINVAL);
    sg_otel_trace *t2 = (sg_otel_trace *)1;
    assert_int_equal(sg_otel_trace_new(&t2, NULL), SG_EINVAL);
    assert_null(t2);
    assert_null(sg_otel_observer(NULL));
    char buf[64];
    assert_int_equal(sg_otel_trace_traceparent(t, buf, sizeof(buf)),
                     SG_EINVAL); /* none yet */
    teardown_trace(t);
}

static void each_operation_of_a_trace_is_a_trace_of_its_own(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    SG_AUTO_OP(op);
    sg_op_plan p;
    uint8_t first[16];
    for (int i = 0; i < 2; i++) {
        otel_sink_reset();
        assert_int_equal(sg_op_start(op, o, T0), 0);
        assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
        done(op, 1, T0 + SG_MS(10), SG_OUTCOME_OK, 200, 1, SG_MS(5), NULL);
        const sg__otel_span *os = span_of(0);
        if (i == 0) {
            memcpy(first, os->trace_id, 16);
        } else {
            assert_memory_not_equal(first, os->trace_id, 16);
        }
        assert_memory_not_equal(os->trace_id, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16);
    }
    teardown_trace(t);
}

/* A forked child (a pre-forking server's worker) draws ids of its own,
 * never its parent's next ones. */
static void a_forked_child_draws_ids_of_its_own(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, T0), 0); /* the generator keyed */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char tp[64] = "";
        int ok = sg_op_start(op, o, T0) == 0 &&
                 sg_otel_trace_traceparent(t, tp, sizeof(tp)) == 0;
        ssize_t w = write(fds[1], tp, sizeof(tp));
        /* _exit runs no scope's cleanup: the child frees its copies */
        sg_op_free(op);
        op = NULL;
        sg_op_options_free(o);
        o = NULL;
        teardown_trace(t);
        _exit(ok && w == (ssize_t)sizeof(tp) ? 0 : 1);
    }
    close(fds[1]);
    char theirs[64] = "", mine[64] = "";
    assert_int_equal(read(fds[0], theirs, sizeof(theirs)), (ssize_t)sizeof(theirs));
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_otel_trace_traceparent(t, mine, sizeof(mine)), 0);
    assert_int_equal(strlen(theirs), 55);
    assert_memory_not_equal(theirs + 3, mine + 3, 32);   /* trace ids */
    assert_memory_not_equal(theirs + 36, mine + 36, 16); /* span ids */
    teardown_trace(t);
}

/* ------------------------------------------------------------ the seams */

typedef struct counter {
    int intents, starts, headers, ends, resolves;
    int headers_rc;
} counter;

static int c_intent(const sg_op *op, const sg_op_intent *in, void *ud) {
    (void)op;
    (void)in;
    ((counter *)ud)->intents++;
    return 0;
}
static int c_start(const sg_op *op, const sg_op_attempt *a, void *ud) {
    (void)op;
    (void)a;
    ((counter *)ud)->starts++;
    return 0;
}
static int c_headers(const sg_op *op, const sg_op_attempt *a, sg_op_headers *h,
                     void *ud) {
    (void)op;
    counter *c = ud;
    c->headers++;
    char v[16];
    snprintf(v, sizeof(v), "%u", a->n);
    int rc = sg_op_headers_add(h, "X-Tenant-Attempt", v);
    return c->headers_rc != 0 ? c->headers_rc : rc;
}
static int c_end(const sg_op *op, const sg_op_attempt *a, void *ud) {
    (void)op;
    (void)a;
    ((counter *)ud)->ends++;
    return 0;
}
static int c_resolve(const sg_op *op, void *ud) {
    (void)op;
    ((counter *)ud)->resolves++;
    return 0;
}
static int c_start_intent(const sg_op *op, const sg_op_intent *in, void *ud,
                          sg_op_intent_wait *w) {
    (void)op;
    (void)in;
    (void)ud;
    (void)w;
    return 0;
}
static int c_poll(const sg_op *op, void *handle, void *ud) {
    (void)op;
    (void)handle;
    (void)ud;
    return 0;
}
static void c_abandon(const sg_op *op, void *handle, sg_outcome oc, void *ud) {
    (void)op;
    (void)handle;
    (void)oc;
    (void)ud;
}

static void a_callers_observer_and_a_trace_share_an_operation(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    sg_op_observer *mine = NULL;
    assert_int_equal(sg_op_observer_new(&mine), 0);
    sg_op_observer_set_on_intent(mine, c_intent);
    sg_op_observer_set_on_attempt_start(mine, c_start);
    sg_op_observer_set_on_attempt_headers(mine, c_headers);
    sg_op_observer_set_on_attempt_end(mine, c_end);
    sg_op_observer_set_on_resolve(mine, c_resolve);
    counter c = {0};
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_observer(o, mine, &c), 0);
    base_options(o, t); /* adds the trace after it */
    SG_AUTO_OP(op);
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    sg_op_headers h = {0};
    char tp[64];
    headers_of(op, 1, &h, tp, sizeof(tp));
    assert_int_equal(h.n, 2); /* both observers' headers, in their order */
    assert_string_equal(h.h[0].name, "x-tenant-attempt"); /* lowercased */
    assert_string_equal(h.h[0].value, "1");
    assert_string_equal(h.h[1].name, "traceparent");
    done(op, 1, T0 + SG_MS(10), SG_OUTCOME_OK, 200, 1, SG_MS(5), NULL);
    assert_int_equal(c.intents, 1);
    assert_int_equal(c.starts, 1);
    assert_int_equal(c.headers, 1);
    assert_int_equal(c.ends, 1);
    assert_int_equal(c.resolves, 1);
    assert_int_equal(otel_sink_count(), 2);
    /* one observer's error never keeps the others from being called */
    c.headers_rc = SG_EIO;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    headers_of(op, 1, &h, tp, sizeof(tp));
    assert_int_equal(h.n, 2);
    assert_int_equal(strlen(tp), 55);
    assert_int_equal(sg_op_observer_error(op), SG_EIO);
    done(op, 1, T0 + SG_MS(10), SG_OUTCOME_OK, 200, 1, SG_MS(5), NULL);
    /* set_observer replaces them all; clear removes them */
    assert_int_equal(sg_op_options_set_observer(o, mine, &c), 0);
    otel_sink_reset();
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    done(op, 1, T0 + SG_MS(10), SG_OUTCOME_OK, 200, 1, SG_MS(5), NULL);
    assert_int_equal(otel_sink_count(), 0);
    assert_int_equal(c.resolves, 3);
    assert_int_equal(sg_op_options_clear_observers(o), 0);
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    done(op, 1, T0 + SG_MS(10), SG_OUTCOME_OK, 200, 1, SG_MS(5), NULL);
    assert_int_equal(c.resolves, 3);
    sg__op_headers_release(&h);
    sg_op_observer_free(mine);
    teardown_trace(t);
}

static void observers_are_bounded_and_one_records_off_the_loop(void **state) {
    (void)state;
    sg_op_observer *plain = NULL, *async1 = NULL, *async2 = NULL;
    assert_int_equal(sg_op_observer_new(&plain), 0);
    assert_int_equal(sg_op_observer_new(&async1), 0);
    assert_int_equal(sg_op_observer_new(&async2), 0);
    assert_int_equal(
        sg_op_observer_set_async_intent(async1, c_start_intent, c_poll, c_abandon), 0);
    assert_int_equal(
        sg_op_observer_set_async_intent(async2, c_start_intent, c_poll, c_abandon), 0);
    SG_AUTO_OPTIONS(o);
    counter c = {0};
    assert_int_equal(sg_op_options_add_observer(NULL, plain, &c), SG_EINVAL);
    assert_int_equal(sg_op_options_add_observer(o, NULL, &c), SG_EINVAL);
    assert_int_equal(sg_op_options_add_observer(o, async1, &c), 0);
    assert_int_equal(sg_op_options_add_observer(o, async2, &c), SG_EINVAL);
    for (int i = 1; i < SG_OP_MAX_OBSERVERS; i++) {
        assert_int_equal(sg_op_options_add_observer(o, plain, &c), 0);
    }
    assert_int_equal(sg_op_options_add_observer(o, plain, &c), SG_ERANGE);
    /* a copy keeps them */
    sg_op_options *d = NULL;
    assert_int_equal(sg_op_options_dup(&d, o), 0);
    assert_int_equal(sg_op_options_add_observer(d, plain, &c), SG_ERANGE);
    sg_op_options_free(d);
    assert_int_equal(sg_op_options_clear_observers(NULL), SG_EINVAL);
    assert_int_equal(sg_op_options_clear_observers(o), 0);
    assert_int_equal(sg_op_options_add_observer(o, async2, &c), 0);
    sg_op_observer_free(plain);
    sg_op_observer_free(async1);
    sg_op_observer_free(async2);
}

/* A transport driven by hand asks for the same headers through the
 * unstable API, and sends them with its request. */
static void a_transport_of_its_own_gets_the_traceparent_too(void **state) {
    (void)state;
    sg_otel_trace *t = new_trace();
    SG_AUTO_OPTIONS(o);
    base_options(o, t);
    SG_AUTO_OP(op);
    sg_op_headers *h = NULL;
    assert_int_equal(sg_op_headers_new(&h), 0);
    assert_int_equal(sg_op_attempt_headers(op, 1, h), SG_EINVAL); /* not started */
    sg_op_plan p;
    assert_int_equal(sg_op_start(op, o, T0), 0);
    assert_int_equal(sg_op_attempt_headers(op, 1, h), SG_EINVAL); /* none planned */
    assert_int_equal(sg_op_next_attempt(op, T0, &p), 0);
    assert_int_equal(sg_op_attempt_headers(NULL, 1, h), SG_EINVAL);
    assert_int_equal(sg_op_attempt_headers(op, 1, NULL), SG_EINVAL);
    assert_int_equal(sg_op_attempt_headers(op, 2, h), SG_EINVAL);
    assert_int_equal(sg_op_attempt_headers(op, p.attempt, h), 1);
    assert_string_equal(sg_op_headers_name(h, 0), "traceparent");
    char tp[64];
    snprintf(tp, sizeof(tp), "%s", sg_op_headers_value(h, 0));
    assert_null(sg_op_headers_name(h, 1));
    assert_null(sg_op_headers_value(NULL, 0));
    done(op, 1, T0 + SG_MS(10), SG_OUTCOME_OK, 200, 1, SG_MS(5), NULL);
    char want[64];
    traceparent_of(span_of(1), want);
    assert_string_equal(tp, want);
    sg_op_headers_free(h);
    sg_op_headers_free(NULL);
    assert_int_equal(sg_op_headers_new(NULL), SG_EINVAL);
    teardown_trace(t);
}

static void attempt_headers_are_checked_and_bounded(void **state) {
    (void)state;
    sg_op_headers h = {0};
    assert_int_equal(sg_op_headers_add(NULL, "a", "b"), SG_EINVAL);
    assert_int_equal(sg_op_headers_add(&h, NULL, "b"), SG_EINVAL);
    assert_int_equal(sg_op_headers_add(&h, "a", NULL), SG_EINVAL);
    assert_int_equal(sg_op_headers_add(&h, "", "b"), SG_EINVAL);
    assert_int_equal(sg_op_headers_add(&h, "a b", "b"), SG_EINVAL);
    assert_int_equal(sg_op_headers_add(&h, "a:", "b"), SG_EINVAL);
    assert_int_equal(sg_op_headers_add(&h, "a", "b\r\nx-injected: 1"), SG_EINVAL);
    assert_int_equal(sg_op_headers_add(&h, "a", "b\n"), SG_EINVAL);
    char name[SG_OP_HEADER_NAME_MAX + 2];
    memset(name, 'n', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    assert_int_equal(sg_op_headers_add(&h, name, "v"), SG_ERANGE);
    assert_int_equal(h.n, 0);
    assert_int_equal(sg_op_headers_add(&h, "Empty", ""), 0);
    assert_int_equal(sg_op_headers_add(&h, "Tab", "a\tb"), 0);
    assert_string_equal(h.h[0].name, "empty");
    assert_string_equal(h.h[1].value, "a\tb");
    /* bytes: a value that does not fit is refused whole */
    char big[SG_OP_HEADERS_BYTES];
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(sg_op_headers_add(&h, "big", big), SG_ENOBUFS);
    assert_int_equal(sg_op_headers_add(&h, "c", "3"), 0);
    assert_int_equal(sg_op_headers_add(&h, "d", "4"), 0);
    assert_int_equal(h.n, SG_OP_HEADERS_MAX);
    assert_int_equal(sg_op_headers_add(&h, "e", "5"), SG_ENOBUFS);
    assert_string_equal(h.h[3].value, "4");
    sg__op_headers_release(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_clean_stream_is_an_operation_span_with_one_attempt),
        cmocka_unit_test(a_retried_first_token_timeout_is_two_attempts_and_a_backoff),
        cmocka_unit_test(a_hedge_won_and_lost_are_two_children),
        cmocka_unit_test(a_fallback_names_each_attempts_endpoint),
        cmocka_unit_test(a_partial_stream_is_an_error_with_its_items_discarded),
        cmocka_unit_test(every_attempt_says_who_set_its_lease),
        cmocka_unit_test(a_callers_probe_is_a_marked_span_and_no_resend),
        cmocka_unit_test(an_operation_continues_its_callers_context),
        cmocka_unit_test(a_malformed_parent_is_refused),
        cmocka_unit_test(each_operation_of_a_trace_is_a_trace_of_its_own),
        cmocka_unit_test(a_forked_child_draws_ids_of_its_own),
        cmocka_unit_test(a_callers_observer_and_a_trace_share_an_operation),
        cmocka_unit_test(observers_are_bounded_and_one_records_off_the_loop),
        cmocka_unit_test(a_transport_of_its_own_gets_the_traceparent_too),
        cmocka_unit_test(attempt_headers_are_checked_and_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
