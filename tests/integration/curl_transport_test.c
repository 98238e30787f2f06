/*
 * The libcurl transport against the real fault server, over real loopback
 * sockets: every scenario's outcome, phase, partial flag, what the server
 * saw (requests, idempotency keys, deadline headers, timestamps), and
 * timing bounds (never early; late by at most a generous slack, so a slow
 * or sanitised machine does not fail the suite).
 *
 * Usage: curl_transport_test PATH/TO/sg-fakemodel
 */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "harness.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <sys/wait.h>
#include <signal.h>

#include <streamguard/curl.h>

#include "../sg_auto.h"

#define SLACK SG_MS(400) /* upper timing bound: generous for ASan/valgrind */

static const char *fakemodel_path;
static fm_server server;

typedef struct spec {
    const char *path; /* path and query, a unique "_t=NAME." tag inside */
    const char *method;
    const char *body;
    const char *key;
    bool idempotent;
    uint32_t attempts;
    int64_t budget, first_item, idle, stream_total, attempt_timeout, connect, floor;
    int64_t backoff_base;
    uint64_t max_items;
    size_t max_event;
    sg_format format;
    const char *terminal_data; /* "[DONE]" unless no_done */
    const char *terminal_type;
    bool no_done;
    bool deadline_header;
    bool tls;
    bool no_cafile;
    long http_version;
    int cancel_after;    /* cancel from on_item after N items; 0 = never */
    int port;            /* 0 = the fault server */
    const char *url;     /* the whole URL as given, in place of path and port */
    bool http_auth;      /* CURLOPT_HTTPAUTH any, with a user and password */
    int64_t hedge_after; /* first-token hedging (one hedge); 0 = off */
    int64_t drain;       /* sg_curl_options_set_drain_timeout; 0 = the default */
} spec;

typedef struct result {
    sg_outcome outcome;
    sg_phase phase;
    bool partial;
    bool unknown;
    uint32_t attempts;
    uint64_t items; /* delivered to on_item */
    int discards;
    int64_t started; /* monotonic instant the operation started */
    int64_t elapsed_ns;
    int http_status;
    sg_op_reason reason;
    char last_event[64];
    char report[32768];
    char error_body[SG_ERROR_BODY_MAX + 1]; /* sg_curl_op_error_body, NUL added */
    size_t error_body_len;
    bool has_error_body;
} result;

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    result *r = ((void **)ud)[0];
    const spec *s = ((void **)ud)[1];
    r->items++;
    size_t n = item->event_len < sizeof(r->last_event) - 1 ? item->event_len
                                                           : sizeof(r->last_event) - 1;
    memcpy(r->last_event, item->event, n);
    r->last_event[n] = '\0';
    return s->cancel_after > 0 && r->items >= (uint64_t)s->cancel_after;
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome o, void *ud) {
    (void)op;
    (void)attempt;
    (void)o;
    result *r = ((void **)ud)[0];
    r->discards++;
}

static void configure(const spec *s, CURL **easy_out, sg_op_options *po,
                      sg_curl_options *co, char *url, size_t url_len) {
    CURL *e = curl_easy_init();
    assert_non_null(e);
    if (s->url != NULL) {
        snprintf(url, url_len, "%s", s->url);
    } else if (s->port != 0) {
        snprintf(url, url_len, "http://127.0.0.1:%d%s", s->port, s->path);
    } else {
        snprintf(url, url_len, "%s%s", s->tls ? server.tls_base : server.base, s->path);
    }
    curl_easy_setopt(e, CURLOPT_URL, url);
    if (s->body != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, s->body);
    }
    if (s->http_version != 0) {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, s->http_version);
    }
    assert_int_equal(sg_op_options_set_method(po, s->method ? s->method : "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(po, s->budget ? s->budget : SG_SEC(10)), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, s->attempts ? s->attempts : 1),
                     0);
    if (s->first_item) {
        sg_op_options_set_first_item_timeout(po, s->first_item);
    }
    if (s->idle) {
        sg_op_options_set_idle_timeout(po, s->idle);
    }
    if (s->stream_total) {
        sg_op_options_set_stream_timeout(po, s->stream_total);
    }
    if (s->attempt_timeout) {
        sg_op_options_set_attempt_timeout(po, s->attempt_timeout);
    }
    if (s->connect) {
        sg_op_options_set_connect_timeout(po, s->connect);
    }
    if (s->floor) {
        sg_op_options_set_floor(po, s->floor);
    }
    if (s->backoff_base) {
        sg_op_options_set_backoff(po, s->backoff_base, s->backoff_base * 4);
    }
    if (s->max_items) {
        sg_op_options_set_max_items(po, s->max_items);
    }
    if (s->key) {
        assert_int_equal(sg_op_options_set_idempotency_key(po, s->key), 0);
    }
    if (s->idempotent) {
        sg_op_options_set_idempotent(po, true);
    }
    sg_stream_config f;
    sg_stream_config_init(&f);
    assert_int_equal(sg_stream_config_set_format(&f, s->format), 0);
    assert_int_equal(
        sg_stream_config_set_terminal_data(
            &f, s->no_done || s->format == SG_FORMAT_NDJSON || s->terminal_type
                    ? s->terminal_data
                    : (s->terminal_data ? s->terminal_data : "[DONE]")),
        0);
    assert_int_equal(sg_stream_config_set_terminal_type(&f, s->terminal_type), 0);
    assert_int_equal(sg_stream_config_set_max_event(&f, s->max_event), 0);
    assert_int_equal(sg_stream_config_set_max_line(&f, s->max_event), 0);
    assert_int_equal(sg_curl_options_set_framing(co, &f), 0);
    assert_int_equal(sg_curl_options_set_deadline_header(co, s->deadline_header), 0);
    assert_int_equal(sg_curl_options_set_drain_timeout(co, s->drain), 0);
    assert_int_equal(
        sg_curl_options_set_cafile(co, s->tls && !s->no_cafile ? server.ca_path : NULL),
        0);
    if (s->http_auth) {
        curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_ANY);
        curl_easy_setopt(e, CURLOPT_USERPWD, "user:secret");
    }
    if (s->hedge_after) {
        assert_int_equal(sg_op_options_set_hedging(po, s->hedge_after, 1), 0);
    }
    *easy_out = e;
}

static void collect(result *r, sg_curl_op *op, int64_t t0) {
    const sg_op *pol = sg_curl_op_policy(op);
    r->outcome = sg_curl_op_outcome(op);
    r->attempts = sg_op_attempt_count(pol);
    r->reason = sg_op_final_reason(pol);
    const sg_op_attempt *last =
        r->attempts ? sg_op_attempt_at(pol, r->attempts - 1) : NULL;
    if (last != NULL) {
        r->phase = last->phase;
        r->partial = last->partial;
        r->unknown = last->outcome_unknown;
        r->http_status = last->http_status;
    }
    r->started = t0;
    assert_int_equal(sg_curl_op_report(op, r->report, sizeof(r->report), NULL), 0);
    size_t n = 99;
    const char *b = sg_curl_op_error_body(op, &n);
    r->has_error_body = b != NULL;
    assert_true(b != NULL ? n > 0 && n <= SG_ERROR_BODY_MAX : n == 0);
    memcpy(r->error_body, b != NULL ? b : "", n);
    r->error_body[n] = '\0';
    r->error_body_len = n;
}

static void run(const spec *s, result *r) {
    CURL *e;
    SG_AUTO_OPTIONS(po);
    SG_AUTO_CURL_OPTIONS(co);
    char url[1024];
    memset(r, 0, sizeof(*r));
    configure(s, &e, po, co, url, sizeof(url));
    void *ud[2] = {r, (void *)s};
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    assert_int_equal(sg_curl_options_set_on_discard(co, on_discard), 0);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, ud), 0);
    int64_t t0 = sg_clock_now(NULL);
    assert_int_equal(sg_curl_perform(op), 0);
    r->elapsed_ns = sg_clock_now(NULL) - t0;
    assert_true(sg_curl_op_done(op));
    collect(r, op, t0);
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
}

/* How many requests with this tag the server received. */
static int received(const char *tag) {
    char *log = fm_fetch(&server, "/_log?event=received", 0);
    assert_non_null(log);
    int n = fm_count(log, tag);
    free(log);
    return n;
}

static void assert_between(int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
        fail_msg("%lld ms not in [%lld, %lld] ms", (long long)(v / SG_MS(1)),
                 (long long)(lo / SG_MS(1)), (long long)(hi / SG_MS(1)));
    }
}

/* ------------------------------------------------------------------ tests */

static void ok_stream_delivers_every_item_and_ends_ok(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=5&gap=5&_t=ok1.", .idle = SG_SEC(2)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    assert_int_equal(r.phase, SG_PHASE_STREAMING);
    assert_false(r.partial);
    assert_int_equal(r.items, 5);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(received("_t=ok1."), 1);
}

static void slow_headers_hit_the_first_item_deadline_in_wait_headers(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?headers_delay=3000&_t=slowhdr.",
              .first_item = SG_MS(200)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "first_item_timeout");
    assert_string_equal(sg_phase_name(r.phase), "wait_headers");
    assert_false(r.partial);
    assert_between(r.elapsed_ns, SG_MS(200), SG_MS(200) + SLACK);
}

static void slow_first_item_hits_the_first_item_deadline(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?first_delay=3000&_t=slowfirst.",
              .first_item = SG_MS(200)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "first_item_timeout");
    assert_string_equal(sg_phase_name(r.phase), "wait_first_item");
    assert_false(r.partial);
    assert_int_equal(r.items, 0);
    assert_between(r.elapsed_ns, SG_MS(200), SG_MS(200) + SLACK);
}

static void stall_after_items_is_an_idle_timeout_partial_and_never_retried(void **state) {
    (void)state;
    spec s = {.path =
                  "/v1/chat/completions?n=10&gap=5&stall_after=2&stall=forever&_t=stall.",
              .idle = SG_MS(150),
              .attempts = 3};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "idle_timeout");
    assert_string_equal(sg_phase_name(r.phase), "streaming");
    assert_true(r.partial);
    assert_int_equal(r.items, 2);
    assert_int_equal(r.discards, 1);
    assert_int_equal(r.attempts, 1);
    assert_string_equal(sg_op_reason_name(r.reason), "partial_stream");
    assert_int_equal(received("_t=stall."), 1);
    assert_between(r.elapsed_ns, SG_MS(150), SG_MS(150) + SLACK);
}

static void keepalive_comments_never_reset_the_idle_clock(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=10&gap=5&stall_after=2&stall=forever&"
                      "keepalive=20&_t=trickle.",
              .idle = SG_MS(200)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "idle_timeout");
    assert_true(r.partial);
    assert_int_equal(r.items, 2);
    assert_between(r.elapsed_ns, SG_MS(200), SG_MS(200) + SLACK);
}

static void keepalive_only_never_counts_as_a_first_item(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?keepalive_only=1&keepalive=20&_t=kaonly.",
              .first_item = SG_MS(250)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "first_item_timeout");
    assert_string_equal(sg_phase_name(r.phase), "wait_first_item");
    assert_int_equal(r.items, 0);
    assert_between(r.elapsed_ns, SG_MS(250), SG_MS(250) + SLACK);
}

static void runaway_generation_is_capped_at_exactly_max_items(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?runaway=1&gap=1&_t=runaway.",
              .max_items = 20};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "cap_exceeded");
    assert_int_equal(r.items, 20);
    assert_true(r.partial);
}

static void runaway_generation_hits_the_stream_total(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?runaway=1&gap=5&_t=runtotal.",
              .stream_total = SG_MS(300)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "stream_timeout");
    assert_true(r.partial);
    assert_between(r.elapsed_ns, SG_MS(300), SG_MS(300) + SLACK);
}

static void abrupt_close_after_items_is_truncated_and_partial(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=10&gap=5&drop_after=2&_t=drop.",
              .attempts = 3};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "truncated");
    assert_true(r.partial);
    assert_int_equal(r.items, 2);
    assert_int_equal(r.attempts, 1);
}

static void clean_end_without_the_sentinel_is_truncated(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=3&gap=5&no_done=1&_t=nodone."};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "truncated");
    assert_true(r.partial);
    assert_int_equal(r.items, 3);
}

static void without_a_sentinel_a_complete_body_is_ok(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=3&gap=5&no_done=1&_t=nodoneok.",
              .no_done = true};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    assert_int_equal(r.items, 3);
}

static void
status_429_then_success_retries_with_one_key_and_a_shrinking_deadline(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?status=429&retry_after=1&fail_first=2&n=2&"
                      "_t=r429.",
              .method = "POST",
              .body = "{\"prompt\":\"hi\"}",
              .key = "it-429-key",
              .attempts = 3,
              .budget = SG_SEC(5),
              .deadline_header = true};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    assert_int_equal(r.attempts, 3);
    assert_false(r.has_error_body); /* the last attempt's answer was no error */
    char *log = fm_fetch(&server, "/_log?event=received&key=it-429-key", 0);
    assert_non_null(log);
    assert_int_equal(fm_count(log, "\"event\":\"received\""), 3);
    assert_int_equal(fm_count(log, "\"idempotency_key\":\"it-429-key\""), 3);
    /* the deadline header, stamped fresh, shrinks across attempts */
    long prev = 5001;
    int seen = 0;
    for (const char *p = log; (p = strstr(p, "\"x_deadline_ms\":\"")) != NULL; seen++) {
        p += strlen("\"x_deadline_ms\":\"");
        long v = strtol(p, NULL, 10);
        assert_true(v > 0);
        assert_true(v < prev);
        prev = v;
    }
    assert_int_equal(seen, 3);
    free(log);
}

/* A server whose clock is an hour off says "come back at HH:MM:SS" by its
 * own clock, and its Date says what that clock reads: the delay is
 * Retry-After minus Date, whatever the local wall clock says. */
static void retry_after_date_is_measured_from_the_servers_date(void **state) {
    (void)state;
    static const char *paths[2] = {
        "/v1/chat/completions?status=503&retry_after_date=1&date_offset=-3600&"
        "fail_first=1&n=2&_t=radate_behind.",
        "/v1/chat/completions?status=503&retry_after_date=1&date_offset=3600&"
        "fail_first=1&n=2&_t=radate_ahead.",
    };
    static const char *keys[2] = {"radate-behind", "radate-ahead"};
    for (int i = 0; i < 2; i++) {
        spec s = {.path = paths[i], .key = keys[i], .attempts = 2, .budget = SG_SEC(10)};
        result r;
        run(&s, &r);
        assert_string_equal(sg_outcome_name(r.outcome), "ok");
        assert_int_equal(r.attempts, 2);
        /* one second by the server's clock (the local one would say 0 s,
         * or an hour) */
        if (strstr(r.report, "\"retry_after_ms\":1000") == NULL) {
            fail_msg("case %d: %s", i, r.report);
        }
    }
}

static void a_retry_after_of_64_bytes_is_reported_malformed(void **state) {
    (void)state;
    spec s = {.path =
                  "/v1/chat/completions?status=503&retry_after="
                  "1111111111111111111111111111111111111111111111111111111111111111111"
                  "&_t=ra_long.",
              .attempts = 1};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "http_error");
    assert_non_null(strstr(r.report, "\"retry_after_malformed\":true"));
    assert_null(strstr(r.report, "\"retry_after\":null"));
}

static void retry_after_beyond_the_budget_stops_at_once(void **state) {
    (void)state;
    spec s = {.path =
                  "/v1/chat/completions?status=503&retry_after=30&fail_first=5&_t=ra30.",
              .key = "it-ra30-key",
              .method = "POST",
              .body = "{}",
              .attempts = 3,
              .budget = SG_SEC(3)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "http_error");
    assert_int_equal(r.http_status, 503);
    assert_int_equal(r.attempts, 1);
    assert_true(r.elapsed_ns < SG_MS(500) + SLACK);
    assert_int_equal(received("_t=ra30."), 1);
}

static void a_final_error_status_is_not_retried(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?status=404&_t=s404.", .attempts = 3};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "http_error");
    assert_int_equal(r.http_status, 404);
    assert_int_equal(r.attempts, 1);
    assert_string_equal(sg_op_reason_name(r.reason), "final_status");
    /* what the server said, kept for the caller; never in the report */
    assert_string_equal(r.error_body,
                        "{\"error\":{\"message\":\"sg-fakemodel scripted "
                        "status 404\",\"type\":\"scripted\",\"code\":404}}\n");
    assert_null(strstr(r.report, "scripted"));
}

/* An error response's body is read after its head - the attempt is
 * http_error from the head on - and kept up to SG_ERROR_BODY_MAX bytes;
 * the rest is drained, so the connection is reused by the next request. */
/* The drain after the terminal sentinel is inside the lease: a server that
 * keeps a finished body open is waited for until the lease's end at most,
 * so the operation ends within its budget (ok: the answer was whole). */
static void the_drain_after_the_end_stays_inside_the_budget(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=1&first_delay=500&linger=5000&_t=linger.",
              .budget = SG_MS(800),
              .drain = SG_SEC(5)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    assert_int_equal(r.items, 1);
    assert_between(r.elapsed_ns, SG_MS(500), SG_MS(800) + SG_MS(150));
    assert_non_null(strstr(r.report, "\"budget_ms\":800"));
}

/* An auth challenge libcurl could answer itself (CURLOPT_HTTPAUTH): the
 * 401 is the attempt's answer, and libcurl's second request never leaves
 * (the policy judged one request, not two). */
static void an_auth_challenge_is_the_answer_and_nothing_more_is_sent(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?status=401&challenge=1&_t=chal.",
              .attempts = 3,
              .http_auth = true};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "http_error");
    assert_int_equal(r.http_status, 401);
    assert_int_equal(r.attempts, 1);
    assert_int_equal(received("_t=chal."), 1);
    /* the status says it: no word of how the body's reading ended */
    assert_non_null(strstr(r.report, "\"error\":null"));
    assert_null(strstr(r.report, "aborted"));
}

/* Beside hedges every attempt is judged the instant it ends: an error
 * response's head is the answer there, and its body is not read. */
static void with_hedging_an_error_head_is_the_answer(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?status=404&_t=hed404.",
              .attempts = 3,
              .hedge_after = SG_SEC(2)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "http_error");
    assert_int_equal(r.http_status, 404);
    assert_int_equal(r.attempts, 1);
    assert_false(r.has_error_body);
}

static void an_error_response_says_why_and_its_connection_is_reused(void **state) {
    (void)state;
    CURL *e = curl_easy_init();
    assert_non_null(e);
    char url[512];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?status=400&error_pad=20000&_t=epad.", server.base);
    curl_easy_setopt(e, CURLOPT_URL, url);
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    result r;
    memset(&r, 0, sizeof(r));
    spec s = {0};
    void *ud[2] = {&r, &s};
    sg_curl_multi *m; /* one multi: its connection cache outlives each op */
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    for (int i = 0; i < 2; i++) {
        sg_curl_op *op;
        assert_int_equal(sg_curl_op_new(&op, e, po, co, ud), 0);
        assert_int_equal(sg_curl_multi_add(m, op), 0);
        assert_int_equal(sg_curl_multi_run(m), 0);
        collect(&r, op, 0);
        sg_curl_op_free(op);
        assert_string_equal(sg_outcome_name(r.outcome), "http_error");
        assert_int_equal(r.http_status, 400);
        assert_int_equal(r.error_body_len, SG_ERROR_BODY_MAX);
        static const char head[] =
            "{\"error\":{\"message\":\"sg-fakemodel scripted status 400";
        assert_memory_equal(r.error_body, head, strlen(head));
        assert_int_equal(strspn(r.error_body + strlen(head), "x"),
                         SG_ERROR_BODY_MAX - strlen(head)); /* cut there */
        long connects = -1;
        curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
        assert_int_equal(connects, i == 0 ? 1 : 0); /* the second: the same connection */
    }
    sg_curl_multi_free(m);
    curl_easy_cleanup(e);
}

/* An unsafe POST over a pooled connection that the server closes without
 * an answer: libcurl would send it again, on a new connection, inside the
 * same attempt (its own retry of a dead reused connection) - a second
 * charge the policy never saw.  It goes once: the attempt ends there,
 * sent, outcome unknown. */
static void an_unsafe_request_is_never_sent_twice_in_one_attempt(void **state) {
    (void)state;
    CURL *e = curl_easy_init();
    assert_non_null(e);
    sg_curl_multi *m; /* one multi: the first op's connection is pooled */
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    result r;
    spec s = {0};
    void *ud[2] = {&r, &s};
    for (int i = 0; i < 2; i++) {
        char url[512];
        snprintf(url, sizeof(url), "%s/v1/chat/completions?%s", server.base,
                 i == 0 ? "n=1&_t=warm." : "refuse=1&_t=twice.");
        curl_easy_setopt(e, CURLOPT_URL, url);
        SG_AUTO_OPTIONS(po);
        assert_int_equal(sg_op_options_set_method(po, i == 0 ? "GET" : "POST"), 0);
        assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
        if (i == 1) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, "{\"charge\":1}");
        }
        memset(&r, 0, sizeof(r));
        sg_curl_op *op;
        assert_int_equal(sg_curl_op_new(&op, e, po, co, ud), 0);
        assert_int_equal(sg_curl_multi_add(m, op), 0);
        assert_int_equal(sg_curl_multi_run(m), 0);
        collect(&r, op, 0);
        sg_curl_op_free(op);
    }
    assert_int_equal(received("_t=twice."), 1);
    assert_true(r.unknown);
    assert_int_equal(r.attempts, 1);
    sg_curl_multi_free(m);
    curl_easy_cleanup(e);
}

/* The easy handle outlives its operation (curl.h allows its reuse once
 * the op is freed): a plain transfer on it afterwards runs none of the
 * op's callbacks on freed memory (the sanitizer build would stop here). */
static void the_easy_handle_is_plain_again_after_the_op_is_freed(void **state) {
    (void)state;
    CURL *e = curl_easy_init();
    assert_non_null(e);
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/chat/completions?n=1&_t=reuse.", server.base);
    curl_easy_setopt(e, CURLOPT_URL, url);
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_curl_op_outcome(op), SG_OUTCOME_OK);
    sg_curl_op_free(op);
    sg_curl_multi_free(m);
    /* a HEAD of the same URL: headers and a pre-request, no body */
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    assert_int_equal(curl_easy_perform(e), CURLE_OK);
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    assert_true(code > 0);
    curl_easy_cleanup(e);
}

static void
a_server_that_never_answers_is_a_first_item_timeout_in_wait_headers(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?hang=1&_t=hang.", .first_item = SG_MS(200)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "first_item_timeout");
    assert_string_equal(sg_phase_name(r.phase), "wait_headers");
    assert_int_equal(received("_t=hang."), 1);
}

static void unsafe_post_that_times_out_after_send_is_outcome_unknown(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?hang=1&_t=unsafe.",
              .method = "POST",
              .body = "{\"charge\":1}",
              .first_item = SG_MS(200),
              .attempts = 3};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "first_item_timeout");
    assert_true(r.unknown);
    assert_int_equal(r.attempts, 1);
    assert_string_equal(sg_op_reason_name(r.reason), "outcome_unknown");
    assert_int_equal(received("_t=unsafe."), 1);
    assert_non_null(strstr(r.report, "\"outcome_unknown\":true"));
}

static void unsafe_post_answered_502_by_a_gateway_is_outcome_unknown(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?status=502&_t=gw502.",
              .method = "POST",
              .body = "{\"charge\":1}",
              .attempts = 3};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "http_error");
    assert_int_equal(r.http_status, 502);
    assert_true(r.unknown);
    assert_int_equal(r.attempts, 1);
    assert_string_equal(sg_op_reason_name(r.reason), "outcome_unknown");
    assert_int_equal(received("_t=gw502."), 1);
}

static void a_method_the_easy_handle_would_not_send_is_refused_unsent(void **state) {
    (void)state;
    /* Declared GET (safe to retry), but POSTFIELDS makes libcurl send a
     * POST: retrying it as a GET would repeat an unsafe request. */
    spec s = {.path = "/v1/chat/completions?n=2&_t=method.",
              .method = "GET",
              .body = "{\"charge\":1}",
              .attempts = 3};
    CURL *e;
    SG_AUTO_OPTIONS(po);
    SG_AUTO_CURL_OPTIONS(co);
    char url[1024];
    configure(&s, &e, po, co, url, sizeof(url));
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
    assert_int_equal(sg_curl_perform(op), 0);
    assert_string_equal(sg_outcome_name(sg_curl_op_outcome(op)), "refused");
    const sg_op *pol = sg_curl_op_policy(op);
    assert_int_equal(sg_op_attempt_count(pol), 1);
    assert_false(sg_op_attempt_at(pol, 0)->sent);
    assert_non_null(
        strstr(sg_curl_op_error(op), "sends POST but the policy's method is GET"));
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    assert_int_equal(received("_t=method."), 0);
}

static void keyed_post_that_times_out_is_retried_with_the_same_key(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?hang=1&_t=keyed.",
              .method = "POST",
              .body = "{}",
              .key = "it-keyed-key",
              .first_item = SG_MS(120),
              .backoff_base = SG_MS(5),
              .attempts = 3};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "first_item_timeout");
    assert_false(r.unknown);
    assert_int_equal(r.attempts, 3);
    char *log = fm_fetch(&server, "/_log?event=received&key=it-keyed-key", 0);
    assert_int_equal(fm_count(log, "\"idempotency_key\":\"it-keyed-key\""), 3);
    free(log);
}

static void no_request_starts_after_the_budget(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?hang=1&_t=budget.",
              .budget = SG_MS(400),
              .attempt_timeout = SG_MS(90),
              .backoff_base = SG_MS(5),
              .attempts = 16};
    result r;
    run(&s, &r);
    assert_true(r.outcome == SG_OUTCOME_BUDGET_EXHAUSTED ||
                r.outcome == SG_OUTCOME_ATTEMPT_TIMEOUT ||
                r.outcome == SG_OUTCOME_REFUSED);
    assert_true(r.attempts >= 2);
    assert_true(r.elapsed_ns < SG_MS(400) + SLACK);
    char *log = fm_fetch(&server, "/_log?event=received", 0);
    int n = 0;
    for (const char *p = log; (p = strstr(p, "_t=budget.")) != NULL; p++) {
        /* find this line's t_ns: the server's monotonic clock is ours */
        const char *line = p;
        while (line > log && line[-1] != '\n') {
            line--;
        }
        const char *t = strstr(line, "\"t_ns\":");
        assert_non_null(t);
        long long t_ns = strtoll(t + 7, NULL, 10);
        assert_true(t_ns < r.started + SG_MS(400));
        n++;
    }
    free(log);
    assert_int_equal(n, (int)r.attempts);
}

static void refused_connection_is_a_transport_error_in_connect_and_retried(void **state) {
    (void)state;
    /* A port that was just free: connect is refused at once. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    spec s = {.path = "/x",
              .method = "POST",
              .body = "{}",
              .port = ntohs(a.sin_port),
              .attempts = 3,
              .backoff_base = SG_MS(5)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "transport_error");
    assert_string_equal(sg_phase_name(r.phase), "connect");
    assert_false(r.unknown);
    assert_int_equal(r.attempts, 3); /* never sent: safe even for a POST */
    /* beside the outcome, libcurl's own words for each attempt */
    assert_int_equal(fm_count(r.report, "\"error\":\"curl 7 "), 3);
}

/* A URL libcurl cannot use (malformed, or a scheme it does not speak) is
 * no network failure: refused, never retried, libcurl's words kept. */
static void a_url_libcurl_cannot_use_is_refused_not_retried(void **state) {
    (void)state;
    const char *urls[] = {"http://", "http://[::1/x", "nosuchscheme://127.0.0.1/x"};
    const char *codes[] = {"\"error\":\"curl 3 ", "\"error\":\"curl 3 ",
                           "\"error\":\"curl 1 "};
    for (int i = 0; i < 3; i++) {
        spec s = {.url = urls[i], .attempts = 3, .backoff_base = SG_MS(5)};
        result r;
        run(&s, &r);
        assert_string_equal(sg_outcome_name(r.outcome), "refused");
        assert_int_equal(r.attempts, 1);
        assert_string_equal(sg_op_reason_name(r.reason), "outcome_not_retryable");
        assert_string_equal(sg_phase_name(r.phase), "connect");
        if (fm_count(r.report, codes[i]) != 1) {
            fail_msg("%s: %s", urls[i], r.report);
        }
    }
}

/* A CONNECT proxy on loopback, in a child process: it accepts one
 * connection, answers "200 Connection established" to a CONNECT for
 * 127.0.0.1, and relays bytes both ways until either side closes.
 * Returns its port; *pid is the child's. */
static int tunnel_proxy_start(pid_t *pid) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    getsockname(lfd, (struct sockaddr *)&a, &len);
    *pid = fork();
    assert_true(*pid >= 0);
    if (*pid > 0) {
        close(lfd);
        return ntohs(a.sin_port);
    }
    alarm(20); /* never outlive the test */
    int c = accept(lfd, NULL, NULL);
    char req[4096];
    size_t got = 0;
    while (got < sizeof(req) - 1) {
        ssize_t n = read(c, req + got, sizeof(req) - 1 - got);
        if (n <= 0) {
            _exit(1);
        }
        got += (size_t)n;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n") != NULL) {
            break;
        }
    }
    int port = 0;
    if (sscanf(req, "CONNECT 127.0.0.1:%d", &port) != 1) {
        _exit(2);
    }
    int up = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in t = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(0x7f000001)};
    if (connect(up, (struct sockaddr *)&t, sizeof(t)) != 0) {
        _exit(3);
    }
    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
    if (write(c, ok, sizeof(ok) - 1) < 0) {
        _exit(4);
    }
    struct pollfd p[2] = {{c, POLLIN, 0}, {up, POLLIN, 0}};
    char buf[16384];
    for (;;) {
        if (poll(p, 2, -1) < 0) {
            _exit(5);
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                ssize_t n = read(p[i].fd, buf, sizeof(buf));
                if (n <= 0 || write(p[1 - i].fd, buf, (size_t)n) != n) {
                    _exit(0);
                }
            }
        }
    }
}

/* Through a CONNECT tunnel the proxy's "200 Connection established" is not
 * the server's answer: a server that never answers leaves the attempt in
 * wait_headers, not wait_first_item. */
static void phases_stay_true_through_a_connect_proxy(void **state) {
    (void)state;
    for (int hang = 0; hang < 2; hang++) {
        pid_t pid;
        int pport = tunnel_proxy_start(&pid);
        spec s = {.path = hang ? "/v1/chat/completions?hang=1&_t=proxy_hang."
                               : "/v1/chat/completions?n=3&gap=5&_t=proxy_ok.",
                  .first_item = SG_MS(300)};
        CURL *e;
        SG_AUTO_OPTIONS(po);
        SG_AUTO_CURL_OPTIONS(co);
        char url[1024];
        char proxy[64];
        snprintf(proxy, sizeof(proxy), "http://127.0.0.1:%d", pport);
        configure(&s, &e, po, co, url, sizeof(url));
        curl_easy_setopt(e, CURLOPT_PROXY, proxy);
        curl_easy_setopt(e, CURLOPT_HTTPPROXYTUNNEL, 1L);
        sg_curl_op *op;
        assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
        assert_int_equal(sg_curl_perform(op), 0);
        const sg_op_attempt *a = sg_op_attempt_at(sg_curl_op_policy(op), 0);
        if (hang) {
            assert_string_equal(sg_outcome_name(a->outcome), "first_item_timeout");
            assert_string_equal(sg_phase_name(a->phase), "wait_headers");
            assert_false(a->headers_received);
            assert_int_equal(a->http_status, 0);
        } else {
            assert_string_equal(sg_outcome_name(a->outcome), "ok");
            assert_int_equal(a->http_status, 200);
            assert_int_equal(a->items, 3);
        }
        sg_curl_op_free(op);
        curl_easy_cleanup(e);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* A hostile HTTP/1.1 server in a child process: for each of up to 4
 * connections it reads the request head, writes @resp (@len bytes), then
 * waits for the client to close.  Returns its port. */
static int raw_server_start(const char *resp, size_t len, pid_t *pid) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t alen = sizeof(a);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    getsockname(lfd, (struct sockaddr *)&a, &alen);
    *pid = fork();
    assert_true(*pid >= 0);
    if (*pid > 0) {
        close(lfd);
        return ntohs(a.sin_port);
    }
    alarm(20);
    for (int i = 0; i < 4; i++) {
        int c = accept(lfd, NULL, NULL);
        char req[8192];
        size_t got = 0;
        while (got < sizeof(req) - 1) {
            ssize_t n = read(c, req + got, sizeof(req) - 1 - got);
            if (n <= 0) {
                break;
            }
            got += (size_t)n;
            req[got] = '\0';
            if (strstr(req, "\r\n\r\n") != NULL) {
                break;
            }
        }
        for (size_t off = 0; off < len;) {
            ssize_t n = write(c, resp + off, len - off);
            if (n <= 0) {
                break;
            }
            off += (size_t)n;
        }
        while (read(c, req, sizeof(req)) > 0) {
        }
        close(c);
    }
    _exit(0);
}

/* A cancel while an error response's body is still arriving stops the
 * operation there: the attempt stays http_error (its head decided it), and
 * the retry its 503 would have earned is not made. */
static void a_cancel_during_an_error_body_stops_the_retry(void **state) {
    (void)state;
    static const char resp[] =
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\n"
        "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n"
        "{\"error\":"; /* and the rest never comes */
    pid_t pid;
    int port = raw_server_start(resp, sizeof(resp) - 1, &pid);
    spec s = {.path = "/v1/chat/completions", .port = port, .attempts = 3};
    CURL *e;
    SG_AUTO_OPTIONS(po);
    SG_AUTO_CURL_OPTIONS(co);
    char url[1024];
    configure(&s, &e, po, co, url, sizeof(url));
    /* a long window for the body */
    assert_int_equal(sg_curl_options_set_drain_timeout(co, SG_SEC(5)), 0);
    result r;
    memset(&r, 0, sizeof(r));
    void *ud[2] = {&r, &s};
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    sg_curl_multi *m;
    sg_curl_op *op;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_op_new(&op, e, po, co, ud), 0);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    int64_t until = sg_clock_now(NULL) + SG_SEC(5);
    size_t len = 0;
    while (sg_curl_op_error_body(op, &len) == NULL && sg_clock_now(NULL) < until) {
        assert_true(sg_curl_multi_step(m, SG_MS(5)) >= 0);
    }
    assert_int_equal(len, 9); /* the body's first bytes are in */
    int64_t t_cancel = sg_clock_now(NULL);
    assert_int_equal(sg_curl_op_cancel(op), 0);
    while (sg_curl_multi_running(m) > 0 && sg_clock_now(NULL) < until + SG_SEC(5)) {
        assert_true(sg_curl_multi_step(m, SG_MS(5)) >= 0);
    }
    int64_t took = sg_clock_now(NULL) - t_cancel;
    collect(&r, op, 0);
    sg_curl_op_free(op);
    sg_curl_multi_free(m);
    curl_easy_cleanup(e);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    assert_string_equal(sg_outcome_name(r.outcome), "cancelled");
    assert_int_equal(r.attempts, 1);
    assert_int_equal(r.http_status, 503);
    assert_true(took < SG_MS(500));
}

/* What a server that breaks HTTP/1.1 gets: protocol_error, never retried
 * (the same server would break it again), with libcurl's words kept. */
static void a_server_that_breaks_http_is_a_protocol_error_not_retried(void **state) {
    (void)state;
    static const char chunk[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n"
                                "9\r\ndata: a\n\n\r\nZZ\r\n";
    size_t big_len = 10u << 20;
    char *big = malloc(big_len + 64);
    assert_non_null(big);
    int n = snprintf(big, 64, "HTTP/1.1 200 OK\r\nX-Big: ");
    memset(big + n, 'a', big_len);
    memcpy(big + n + big_len, "\r\n\r\n", 4);
    size_t many_len = 0;
    char *many = malloc(1u << 20);
    assert_non_null(many);
    many_len += (size_t)sprintf(many, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < 2000; i++) { /* 2000 lines of ~45 bytes: 90 KB */
        many_len += (size_t)sprintf(many + many_len, "X-Pad-%04d: %032d\r\n", i, i);
    }
    many_len += (size_t)sprintf(many + many_len, "\r\n");
    struct {
        const char *resp;
        size_t len;
        const char *says;
    } cases[] = {
        {chunk, sizeof(chunk) - 1, "chunked-encoding"},
        {big, (size_t)n + big_len + 4, "header line over libcurl's limit"},
        {many, many_len, "response header exceeds 65536 bytes"},
        /* no status line: libcurl's UNSUPPORTED_PROTOCOL after the request
         * went - the server's doing, not a refusal of ours */
        {"hello, this is no HTTP\r\n\r\n", 26, "HTTP/0.9"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        pid_t pid;
        int port = raw_server_start(cases[i].resp, cases[i].len, &pid);
        spec s = {.path = "/v1/chat/completions", .port = port, .attempts = 3};
        result r;
        run(&s, &r);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (r.outcome != SG_OUTCOME_PROTOCOL_ERROR || r.attempts != 1 ||
            strstr(r.report, cases[i].says) == NULL) {
            fail_msg("case %zu: %s after %u attempts: %.600s", i,
                     sg_outcome_name(r.outcome), r.attempts, r.report);
        }
    }
    free(big);
    free(many);
}

static void a_connect_that_never_completes_is_a_connect_timeout(void **state) {
    (void)state;
    /* A listener that never accepts, its backlog filled: the kernel drops
     * further SYNs, so our connect hangs on loopback. */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
    socklen_t len = sizeof(a);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 0), 0);
    getsockname(lfd, (struct sockaddr *)&a, &len);
    int fillers[8];
    for (int i = 0; i < 8; i++) {
        fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fillers[i], (struct sockaddr *)&a, sizeof(a));
    }
    spec s = {.path = "/x",
              .port = ntohs(a.sin_port),
              .connect = SG_MS(200),
              .first_item = SG_SEC(5)};
    result r;
    run(&s, &r);
    for (int i = 0; i < 8; i++) {
        close(fillers[i]);
    }
    close(lfd);
    assert_string_equal(sg_outcome_name(r.outcome), "connect_timeout");
    assert_string_equal(sg_phase_name(r.phase), "connect");
    assert_false(r.unknown);
    assert_between(r.elapsed_ns, SG_MS(200), SG_MS(200) + SLACK);
    /* in words too, as the HTTP/2 transport says it */
    if (fm_count(r.report, "\"error\":\"connect timed out (TCP connect)\"") != 1) {
        fail_msg("no error text: %s", r.report);
    }
}

static void a_consumer_can_cancel_from_the_item_callback(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=10&gap=5&_t=cancel.",
              .cancel_after = 2,
              .attempts = 3};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "cancelled");
    assert_int_equal(r.items, 2);
    assert_int_equal(r.attempts, 1);
}

static void an_event_over_the_limit_is_a_protocol_error(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=2&event_bytes=100000&_t=huge.",
              .max_event = 4096};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "protocol_error");
}

static void an_interim_response_before_the_stream_is_skipped(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=3&gap=5&early_hints=1&_t=hints."};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    assert_int_equal(r.items, 3);
    assert_int_equal(r.http_status, 200);
}

static void an_ndjson_stream_is_one_item_per_line(void **state) {
    (void)state;
    spec s = {.path = "/ndjson?n=4&gap=5&_t=nd.", .format = SG_FORMAT_NDJSON};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    assert_true(r.items >= 4);
}

static void an_anthropic_stream_ends_cleanly_at_message_stop(void **state) {
    (void)state;
    spec s = {.path = "/v1/messages?n=3&gap=5&_t=anth.", .terminal_type = "message_stop"};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    assert_string_equal(r.last_event, "message_stop");
    assert_true(r.items >= 3);
}

static void tls_is_verified_against_the_given_ca(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=2&_t=tls.", .tls = true};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    spec bad = {
        .path = "/v1/chat/completions?n=2&_t=tlsbad.", .tls = true, .no_cafile = true};
    run(&bad, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "transport_error");
    assert_string_equal(sg_phase_name(r.phase), "connect");
    assert_int_equal(received("_t=tlsbad."), 0);
}

static void http2_through_libcurl_works_over_h2c_and_tls(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=3&gap=5&_t=h2c.",
              .http_version = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE,
              .idle = SG_MS(500)};
    result r;
    run(&s, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "ok");
    spec t = {.path =
                  "/v1/chat/completions?n=3&gap=5&stall_after=1&stall=forever&_t=h2tls.",
              .tls = true,
              .http_version = CURL_HTTP_VERSION_2TLS,
              .idle = SG_MS(150)};
    run(&t, &r);
    assert_string_equal(sg_outcome_name(r.outcome), "idle_timeout");
    char *log = fm_fetch(&server, "/_log?event=received", 0);
    const char *line = strstr(log, "_t=h2tls.");
    assert_non_null(line);
    while (line > log && line[-1] != '\n') {
        line--;
    }
    assert_non_null(strstr(line, "\"proto\":\"h2\""));
    free(log);
}

/* ---- many operations on the managed multi, and the caller's own multi ---- */

struct multi_case {
    const char *path;
    const char *want;
    sg_outcome got;
    uint64_t items;
    bool done;
};

/* ------------------------------------------------------------ observers */

/* A caller's own observer: one letter per call (Intent, Start, End,
 * Resolve); on_intent answers intent_rc. */
typedef struct watch {
    char log[32];
    int intent_rc;
    char target[256];
} watch;

static void watch_put(watch *w, char c) {
    size_t n = strlen(w->log);
    if (n + 1 < sizeof(w->log)) {
        w->log[n] = c;
        w->log[n + 1] = '\0';
    }
}

static int w_intent(const sg_op *op, const sg_op_intent *in, void *ud) {
    (void)op;
    watch *w = ud;
    watch_put(w, 'I');
    snprintf(w->target, sizeof(w->target), "%s", in->target ? in->target : "");
    return w->intent_rc;
}
static int w_start(const sg_op *op, const sg_op_attempt *a, void *ud) {
    (void)op;
    (void)a;
    watch_put(ud, 'S');
    return 0;
}
static int w_end(const sg_op *op, const sg_op_attempt *a, void *ud) {
    (void)op;
    (void)a;
    watch_put(ud, 'E');
    return 0;
}
static int w_resolve(const sg_op *op, void *ud) {
    (void)op;
    watch_put(ud, 'R');
    return 0;
}
/* The observer that watches every call (made once; the process's). */
static const sg_op_observer *watcher(void) {
    static sg_op_observer *obs;
    if (obs == NULL) {
        assert_int_equal(sg_op_observer_new(&obs), 0);
        assert_int_equal(sg_op_observer_set_on_intent(obs, w_intent), 0);
        assert_int_equal(sg_op_observer_set_on_attempt_start(obs, w_start), 0);
        assert_int_equal(sg_op_observer_set_on_attempt_end(obs, w_end), 0);
        assert_int_equal(sg_op_observer_set_on_resolve(obs, w_resolve), 0);
    }
    return obs;
}

/* Runs @path as a GET under @po with the watcher; returns the op's
 * outcome, and the error of sg_curl_perform in *@rv. */
static sg_outcome watched_run(const char *path, sg_op_options *po, watch *w,
                              sg_curl_attempt_cb on_attempt, int *rv) {
    char url[256];
    snprintf(url, sizeof(url), "%s%s", server.base, path);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_backoff(po, SG_MS(10), SG_MS(20));
    sg_op_options_set_target(po, url);
    sg_op_options_set_observer(po, watcher(), w);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_attempt(co, on_attempt), 0);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
    *rv = sg_curl_perform(op);
    sg_outcome o = sg_curl_op_outcome(op);
    if (*rv != 0) {
        char buf[64];
        assert_int_equal(sg_curl_op_report(op, buf, sizeof(buf), NULL), SG_EINVAL);
    }
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    return o;
}

/* An observer whose intent takes 300 ms (a slow disk under the ledger's
 * fsync): that time is spent from the budget, and the first attempt's
 * deadline header says what is left, not the whole budget. */
static int slow_intent(const sg_op *op, const sg_op_intent *in, void *ud) {
    (void)op;
    (void)in;
    (void)ud;
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL); /* the blocking work itself, not a wait for a timeout */
    return 0;
}

/* The X-Deadline-Ms the server received with the request tagged @tag. */
static long received_deadline_ms(const char *tag) {
    char *log = fm_fetch(&server, "/_log?event=received", 0);
    assert_non_null(log);
    const char *p = strstr(log, tag);
    assert_non_null(p);
    p = strstr(p, "\"x_deadline_ms\":\"");
    assert_non_null(p);
    long ms = strtol(p + strlen("\"x_deadline_ms\":\""), NULL, 10);
    free(log);
    return ms;
}

static void the_first_lease_is_measured_after_a_blocking_intent(void **state) {
    (void)state;
    static sg_op_observer *slow; /* made once; the process's */
    if (slow == NULL) {
        assert_int_equal(sg_op_observer_new(&slow), 0);
        assert_int_equal(sg_op_observer_set_on_intent(slow, slow_intent), 0);
    }
    spec s = {.path = "/v1/chat/completions?n=1&_t=slow_intent.",
              .budget = SG_SEC(2),
              .deadline_header = true};
    CURL *e;
    SG_AUTO_OPTIONS(po);
    SG_AUTO_CURL_OPTIONS(co);
    char url[1024];
    configure(&s, &e, po, co, url, sizeof(url));
    sg_op_options_set_observer(po, slow, NULL);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
    assert_int_equal(sg_curl_perform(op), 0);
    assert_string_equal(sg_outcome_name(sg_curl_op_outcome(op)), "ok");
    const sg_op_attempt *a = sg_op_attempt_at(sg_curl_op_policy(op), 0);
    assert_true(a->remaining_ns <= SG_MS(1700));
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    long ms = received_deadline_ms("_t=slow_intent.");
    if (ms > 1700) {
        fail_msg("X-Deadline-Ms: %ld, but 300 of the 2000 ms went to the intent", ms);
    }
}

/* libcurl's debug callback: the request head as sent, into @ud (8 KiB). */
static int keep_header_out(CURL *h, curl_infotype type, char *data, size_t n, void *ud) {
    (void)h;
    char *buf = ud;
    if (type == CURLINFO_HEADER_OUT) {
        size_t have = strlen(buf);
        size_t take = n < 8192 - have - 1 ? n : 8192 - have - 1;
        memcpy(buf + have, data, take);
        buf[have + take] = '\0';
    }
    return 0;
}

/* A connection that takes 300 ms to open (the socket's own callback
 * blocks: the slow connect itself, not a wait for a timeout). */
static curl_socket_t slow_socket(void *clientp, curlsocktype purpose,
                                 struct curl_sockaddr *a) {
    (void)clientp;
    (void)purpose;
    struct timespec ts = {0, 300 * 1000 * 1000L};
    nanosleep(&ts, NULL);
    return socket(a->family, a->socktype, a->protocol);
}

/* The deadline is stamped when the request goes, after the connection
 * was made: the server is told what is left of the lease then, not what
 * was leased before the connect. */
static void the_deadline_is_stamped_after_the_connection_is_made(void **state) {
    (void)state;
    spec s = {.path = "/v1/chat/completions?n=1&_t=slow_connect.",
              .budget = SG_SEC(2),
              .deadline_header = true};
    CURL *e;
    SG_AUTO_OPTIONS(po);
    SG_AUTO_CURL_OPTIONS(co);
    char url[1024];
    configure(&s, &e, po, co, url, sizeof(url));
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, slow_socket);
    char sent[8192] = "";
    curl_easy_setopt(e, CURLOPT_DEBUGFUNCTION, keep_header_out);
    curl_easy_setopt(e, CURLOPT_DEBUGDATA, sent);
    curl_easy_setopt(e, CURLOPT_VERBOSE, 1L);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
    assert_int_equal(sg_curl_perform(op), 0);
    assert_string_equal(sg_outcome_name(sg_curl_op_outcome(op)), "ok");
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    long ms = received_deadline_ms("_t=slow_connect.");
    /* the header as it left, from libcurl's own account: the value alone,
     * none of the room it was written with */
    const char *h = strstr(sent, "X-Deadline-Ms: ");
    assert_non_null(h);
    h += strlen("X-Deadline-Ms: ");
    while (*h >= '0' && *h <= '9') {
        h++;
    }
    assert_true(h[0] == '\r' && h[1] == '\n');
    if (ms > 1700 || ms < 1000) {
        fail_msg("X-Deadline-Ms: %ld, but 300 of the 2000 ms went to the connect", ms);
    }
}

static void a_callers_observer_sees_every_attempt_of_a_retried_operation(void **state) {
    (void)state;
    watch w = {0};
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_idempotency_key(po, "obs1-key"); /* its own fail_first count */
    int rv;
    sg_outcome o = watched_run(
        "/v1/chat/completions?status=503&fail_first=1&n=2&_t=obs1.", po, &w, NULL, &rv);
    assert_int_equal(rv, 0);
    assert_string_equal(sg_outcome_name(o), "ok");
    assert_string_equal(w.log, "ISESER");
    assert_non_null(strstr(w.target, "_t=obs1."));
    assert_int_equal(received("_t=obs1."), 2);
}

static void an_observer_that_refuses_sends_nothing(void **state) {
    (void)state;
    watch w = {.intent_rc = SG_EEXIST};
    SG_AUTO_OPTIONS(po);
    int rv;
    watched_run("/v1/chat/completions?n=2&_t=obs_refused.", po, &w, NULL, &rv);
    assert_int_equal(rv, SG_EEXIST);
    assert_string_equal(w.log, "I");
    assert_int_equal(received("_t=obs_refused."), 0);
}

static void cancel_on_attempt(sg_curl_op *op, const sg_op_attempt *rec, void *ud) {
    (void)rec;
    (void)ud;
    assert_int_equal(sg_curl_op_cancel(op), 0);
}

static void a_cancel_before_the_retry_ends_the_operation_cancelled(void **state) {
    (void)state;
    watch w = {0};
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_idempotency_key(po, "obs-cancel-key");
    int rv;
    sg_outcome o =
        watched_run("/v1/chat/completions?status=503&fail_first=5&n=2&_t=obs_cancel.", po,
                    &w, cancel_on_attempt, &rv);
    assert_int_equal(rv, 0);
    assert_string_equal(sg_outcome_name(o), "cancelled");
    assert_string_equal(w.log, "ISER"); /* one attempt, resolved once */
    assert_int_equal(received("_t=obs_cancel."), 1);
}

static int count_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    ((struct multi_case *)ud)->items++;
    return 0;
}

static void mark_done(sg_curl_op *op, void *ud) {
    struct multi_case *c = ud;
    c->done = true;
    c->got = sg_curl_op_outcome(op);
}

/* The managed multi inside the caller's own poll() loop: the loop sleeps
 * on sg_curl_multi_fd() alone (no timeout of its own) and steps only when
 * it wakes.  Each stream sends items, then stalls; the idle clock must cut
 * it, which only the multi's timer can wake the loop for. */
struct embedded_case {
    int64_t last_item;
    int64_t done_at;
    sg_outcome got;
    bool done;
};

static int embedded_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    ((struct embedded_case *)ud)->last_item = sg_clock_now(NULL);
    return 0;
}

static void embedded_done(sg_curl_op *op, void *ud) {
    struct embedded_case *c = ud;
    c->done = true;
    c->done_at = sg_clock_now(NULL);
    c->got = sg_curl_op_outcome(op);
}

static void a_callers_poll_loop_on_the_multi_fd_sees_a_stall_cut(void **state) {
    (void)state;
    /* A 10 s first-item clock that the first item swaps for a 200 ms idle
     * clock: the timer must move earlier, then fire after the last item. */
    const char *paths[2] = {
        "/v1/chat/completions?n=50&gap=10&stall_after=3&stall=forever&_t=emb1.",
        "/v1/chat/completions?n=50&gap=30&stall_after=5&stall=forever&_t=emb2.",
    };
    struct embedded_case c[2];
    memset(c, 0, sizeof(c));
    CURL *easy[2];
    sg_curl_op *ops[2];
    char urls[2][256];
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 1);
    sg_op_options_set_first_item_timeout(po, SG_SEC(10));
    sg_op_options_set_idle_timeout(po, SG_MS(200));
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, embedded_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, embedded_done), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(urls[i], sizeof(urls[i]), "%s%s", server.base, paths[i]);
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, urls[i]);
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &c[i]), 0);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    struct pollfd p = {sg_curl_multi_fd(m), POLLIN, 0};
    while (!(c[0].done && c[1].done)) {
        /* No timeout of our own: only the multi's fd may wake us (the 5 s
         * is a safety net, and reaching it is the failure). */
        int n = poll(&p, 1, 5000);
        if (n == 0) {
            fail_msg("nothing woke the caller's loop in 5 s");
        }
        assert_true(sg_curl_multi_step(m, 0) >= 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_string_equal(sg_outcome_name(c[i].got), "idle_timeout");
        int64_t late = c[i].done_at - c[i].last_item - SG_MS(200);
        if (late < 0 || late > SG_MS(50)) {
            fail_msg("stream %d cut %lld us after its idle clock", i,
                     (long long)(late / SG_US(1)));
        }
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
}

static void many_operations_run_concurrently_on_one_thread(void **state) {
    (void)state;
    enum { N = 60 };
    static const char *paths[3][2] = {
        {"/v1/chat/completions?n=5&gap=10&_t=m_ok.", "ok"},
        {"/v1/chat/completions?n=5&gap=10&stall_after=1&stall=forever&_t=m_stall.",
         "idle_timeout"},
        {"/v1/chat/completions?first_delay=5000&_t=m_slow.", "first_item_timeout"},
    };
    struct multi_case cases[N];
    CURL *easy[N];
    sg_curl_op *ops[N];
    sg_curl_multi *m;
    char urls[N][256];
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 1);
    sg_op_options_set_first_item_timeout(po, SG_MS(300));
    sg_op_options_set_idle_timeout(po, SG_MS(200));
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, count_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, mark_done), 0);
    int64_t t0 = sg_clock_now(NULL);
    for (int i = 0; i < N; i++) {
        cases[i] = (struct multi_case){paths[i % 3][0], paths[i % 3][1], 0, 0, false};
        snprintf(urls[i], sizeof(urls[i]), "%s%s", server.base, cases[i].path);
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, urls[i]);
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &cases[i]), 0);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    assert_int_equal(sg_curl_multi_run(m), 0);
    int64_t elapsed = sg_clock_now(NULL) - t0;
    for (int i = 0; i < N; i++) {
        assert_true(cases[i].done);
        assert_string_equal(sg_outcome_name(cases[i].got), cases[i].want);
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    /* concurrent, not one after another */
    assert_true(elapsed < SG_MS(300) + SLACK + SG_MS(600));
    sg_curl_multi_free(m);
}

static void a_caller_driven_multi_enforces_the_clocks(void **state) {
    (void)state;
    CURLM *multi = curl_multi_init();
    struct multi_case c[2] = {
        {"/v1/chat/completions?n=4&gap=10&_t=own_ok.", "ok", 0, 0, false},
        {"/v1/chat/completions?n=4&gap=10&stall_after=1&stall=forever&_t=own_stall.",
         "idle_timeout", 0, 0, false},
    };
    CURL *easy[2];
    sg_curl_op *ops[2];
    char urls[2][256];
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_idle_timeout(po, SG_MS(150));
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, count_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, mark_done), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(urls[i], sizeof(urls[i]), "%s%s", server.base, c[i].path);
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, urls[i]);
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &c[i]), 0);
        assert_int_equal(sg_curl_op_attach(ops[i], multi, sg_clock_now(NULL)), 0);
    }
    /* The caller's loop: poll no longer than the earliest op deadline. */
    while (!(c[0].done && c[1].done)) {
        int64_t now = sg_clock_now(NULL);
        int64_t next = sg_time_min(sg_curl_op_next_deadline(ops[0]),
                                   sg_curl_op_next_deadline(ops[1]));
        int wait_ms = next == SG_TIME_NEVER ? 100 : (int)((next - now) / SG_MS(1)) + 1;
        if (wait_ms < 0) {
            wait_ms = 0;
        }
        int running;
        curl_multi_poll(multi, NULL, 0, wait_ms, NULL);
        curl_multi_perform(multi, &running);
        CURLMsg *msg;
        int left;
        now = sg_clock_now(NULL);
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            for (int i = 0; i < 2; i++) {
                if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy[i]) {
                    assert_int_equal(sg_curl_op_complete(ops[i], msg->data.result, now),
                                     0);
                }
            }
        }
        for (int i = 0; i < 2; i++) {
            bool was_done = c[i].done;
            int ended = sg_curl_op_tick(ops[i], now);
            assert_true(ended == 0 || ended == 1);
            /* 1 exactly when this tick ended it */
            assert_int_equal(ended, !was_done && c[i].done);
        }
    }
    for (int i = 0; i < 2; i++) {
        assert_string_equal(sg_outcome_name(c[i].got), c[i].want);
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    curl_multi_cleanup(multi);
}

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return fm_start(&server, fakemodel_path);
}

static int teardown(void **state) {
    (void)state;
    fm_stop(&server);
    curl_global_cleanup();
    return 0;
}

/* The line of @log holding @needle, into @out. */
static bool log_line(const char *log, const char *needle, char *out, size_t cap) {
    const char *at = strstr(log, needle);
    if (at == NULL) {
        return false;
    }
    const char *b = at;
    while (b > log && b[-1] != '\n') {
        b--;
    }
    const char *e = strchr(at, '\n');
    size_t n = e != NULL ? (size_t)(e - b) : strlen(b);
    n = n < cap - 1 ? n : cap - 1;
    memcpy(out, b, n);
    out[n] = '\0';
    return true;
}

/* Fallback to another provider's request: each endpoint with its own URL,
 * headers and body; the server's log shows what each was sent. */
static void fallback_endpoints_send_their_own_headers_and_body(void **state) {
    (void)state;
    char a[256], b[256];
    snprintf(a, sizeof(a), "%s/v1/chat/completions?status=503&_t=epb.a", server.base);
    snprintf(b, sizeof(b), "%s/v1/chat/completions?n=2&_t=epb.b", server.base);
    struct curl_slist *hb = curl_slist_append(NULL, "X-Deadline-Ms: 4242");
    CURL *easy = curl_easy_init();
    curl_easy_setopt(easy, CURLOPT_URL, a);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, "ignored");
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_method(po, "POST");
    sg_op_options_set_idempotency_key(po, "epb-key");
    sg_op_options_set_max_attempts(po, 2);
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(5));
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_add_endpoint(co, a, NULL, "{\"a\":1}", 7), 0);
    assert_int_equal(sg_curl_options_add_endpoint(co, b, hb, "{\"bb\":22}", 9), 0);
    curl_slist_free_all(hb); /* copied */
    struct multi_case c = {NULL, "ok", 0, 0, false};
    assert_int_equal(sg_curl_options_set_on_item(co, count_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, mark_done), 0);
    sg_curl_op *op = NULL;
    assert_int_equal(sg_curl_op_new(&op, easy, po, co, &c), 0);
    sg_curl_multi *m = NULL;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_true(c.done);
    assert_int_equal(c.got, SG_OUTCOME_OK);
    assert_int_equal(c.items, 2);
    assert_int_equal(sg_op_attempt_count(sg_curl_op_policy(op)), 2);
    char *log = fm_fetch(&server, "/_log?event=received&limit=100000", 0);
    assert_non_null(log);
    /* the log has one event a line: each request's own line */
    char la[1024], lb[1024];
    assert_true(log_line(log, "_t=epb.a", la, sizeof(la)));
    assert_true(log_line(log, "_t=epb.b", lb, sizeof(lb)));
    assert_non_null(strstr(la, "\"body_bytes\":7"));
    assert_null(strstr(la, "4242")); /* B's header never went to A */
    assert_non_null(strstr(lb, "\"body_bytes\":9"));
    assert_non_null(strstr(lb, "\"x_deadline_ms\":\"4242\""));
    free(log);
    /* a body on some endpoints but not all is refused, and changes nothing */
    assert_int_equal(sg_curl_options_add_endpoint(co, b, NULL, NULL, 0), SG_EINVAL);
    sg_curl_op *bad = (sg_curl_op *)&c; /* reset to NULL on every error */
    assert_int_equal(sg_curl_op_new(&bad, NULL, po, co, &c), SG_EINVAL);
    assert_null(bad);
    sg_curl_op_free(op);
    sg_curl_multi_free(m);
    curl_easy_cleanup(easy);
}

/* 100 operations against a server that answers 503 to everything, each
 * allowed 5 attempts, side by side on one managed multi: without a retry
 * budget the server is asked 500 times; with one shared budget (10
 * tokens, 0.1 back per success: the documented defaults) it is asked
 * little more than once per operation, and every operation says why it
 * stopped - retry_throttled, or attempts_exhausted for the few retried
 * before the budget ran down. */
static int run_failing(const char *tag, sg_retry_budget *budget, int *throttled,
                       int *exhausted) {
    enum { N = 100 };
    struct multi_case cases[N];
    CURL *easy[N];
    sg_curl_op *ops[N];
    char urls[N][256];
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_set_retry_budget(m, budget), 0);
    /* the retry budget alone: the multi's endpoint health would open its
     * breaker on the one endpoint every operation asks */
    assert_int_equal(sg_curl_multi_set_health(m, NULL), 0);
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 5);
    sg_op_options_set_budget(po, SG_SEC(20));
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20));
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, count_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, mark_done), 0);
    for (int i = 0; i < N; i++) {
        cases[i] = (struct multi_case){NULL, "http_error", 0, 0, false};
        snprintf(urls[i], sizeof(urls[i]), "%s/v1/chat/completions?status=503&_t=%s.%d",
                 server.base, tag, i);
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, urls[i]);
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &cases[i]), 0);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    assert_int_equal(sg_curl_multi_run(m), 0);
    int attempts = 0;
    *throttled = *exhausted = 0;
    for (int i = 0; i < N; i++) {
        assert_true(cases[i].done);
        assert_int_equal(cases[i].got, SG_OUTCOME_HTTP_ERROR);
        const sg_op *op = sg_curl_op_policy(ops[i]);
        attempts += (int)sg_op_attempt_count(op);
        sg_op_reason r = sg_op_final_reason(op);
        *throttled += r == SG_OP_REASON_RETRY_THROTTLED;
        *exhausted += r == SG_OP_REASON_ATTEMPTS_EXHAUSTED;
        assert_true(r == SG_OP_REASON_RETRY_THROTTLED ||
                    r == SG_OP_REASON_ATTEMPTS_EXHAUSTED);
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
    return attempts;
}

static void a_retry_budget_spares_a_failing_server(void **state) {
    (void)state;
    int throttled, exhausted;
    int without = run_failing("thr_off", NULL, &throttled, &exhausted);
    assert_int_equal(without, 500);
    assert_int_equal(exhausted, 100);
    sg_retry_budget *b = NULL;
    assert_int_equal(sg_retry_budget_new(&b, SG_RETRY_BUDGET_DEFAULT_MAX_TOKENS,
                                         SG_RETRY_BUDGET_DEFAULT_TOKEN_RATIO),
                     0);
    int with = run_failing("thr_on", b, &throttled, &exhausted);
    /* 10 tokens, retries only above 5: at most 4 retries in all */
    assert_true(with >= 100 && with <= 104);
    assert_int_equal(throttled + exhausted, 100);
    assert_true(throttled >= 96);
    char *log = fm_fetch(&server, "/_log?event=received&limit=100000", 0);
    assert_non_null(log);
    assert_int_equal(fm_count(log, "_t=thr_on."), with); /* the server saw as many */
    assert_int_equal(fm_count(log, "_t=thr_off."), 500);
    free(log);
    print_message("retry budget: %d requests without, %d with (%d throttled)\n", without,
                  with, throttled);
    sg_retry_budget_free(b);
}

/* on_bytes: each attempt's streaming body as it arrived, before the items
 * it completes; an error status's body is no stream and not given. */
typedef struct tap {
    char buf[16384];
    size_t len;
    uint32_t attempts_seen[4]; /* attempt numbers on_bytes was called for */
    size_t n_attempts;
    size_t searched; /* where the next item's data must appear after */
    int items;
    int cancel_after_bytes; /* non-zero: stop from on_bytes */
} tap;

static int tap_bytes(sg_curl_op *op, uint32_t attempt, const void *data, size_t len,
                     void *ud) {
    (void)op;
    tap *t = ud;
    if (t->n_attempts == 0 || t->attempts_seen[t->n_attempts - 1] != attempt) {
        assert_true(t->n_attempts < 4);
        t->attempts_seen[t->n_attempts++] = attempt;
    }
    assert_true(t->len + len <= sizeof(t->buf));
    memcpy(t->buf + t->len, data, len);
    t->len += len;
    return t->cancel_after_bytes != 0;
}

static int tap_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    tap *t = ud;
    t->items++;
    /* the item's bytes came through on_bytes first, in order */
    char want[512];
    snprintf(want, sizeof(want), "data: %.*s\n", (int)item->data_len, item->data);
    t->buf[t->len] = '\0';
    char *at = strstr(t->buf + t->searched, want);
    assert_non_null(at);
    t->searched = (size_t)(at - t->buf) + strlen(want);
    return 0;
}

static sg_outcome run_tap(const char *path, uint32_t attempts, tap *t) {
    /* its own key: fail_first counts per Idempotency-Key */
    spec s = {.path = path, .attempts = attempts, .backoff_base = SG_MS(5), .key = path};
    CURL *e;
    SG_AUTO_OPTIONS(po);
    SG_AUTO_CURL_OPTIONS(co);
    char url[1024];
    configure(&s, &e, po, co, url, sizeof(url));
    assert_int_equal(sg_curl_options_set_on_item(co, tap_item), 0);
    assert_int_equal(sg_curl_options_set_on_bytes(co, tap_bytes), 0);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, t), 0);
    assert_int_equal(sg_curl_perform(op), 0);
    sg_outcome o = sg_curl_op_outcome(op);
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    return o;
}

static void on_bytes_gives_the_stream_as_received_before_its_items(void **state) {
    (void)state;
    tap *t = calloc(1, sizeof(*t));
    assert_int_equal(run_tap("/v1/chat/completions?n=5&_t=tap1.", 1, t), SG_OUTCOME_OK);
    assert_int_equal(t->items, 5);
    assert_int_equal(t->n_attempts, 1);
    assert_int_equal(t->attempts_seen[0], 1);
    /* the whole body, up to and with its terminal */
    assert_true(t->len > 14);
    assert_memory_equal(t->buf + t->len - 14, "data: [DONE]\n\n", 14);
    assert_memory_equal(t->buf, "data: ", 6);

    /* a 503 first: its body is no stream, only attempt 2's bytes come */
    memset(t, 0, sizeof(*t));
    assert_int_equal(
        run_tap("/v1/chat/completions?n=2&status=503&fail_first=1&_t=tap2.", 3, t),
        SG_OUTCOME_OK);
    assert_int_equal(t->n_attempts, 1);
    assert_int_equal(t->attempts_seen[0], 2);
    assert_int_equal(t->items, 2);

    /* a non-zero return cancels, as from on_item: nothing is delivered */
    memset(t, 0, sizeof(*t));
    t->cancel_after_bytes = 1;
    assert_int_equal(run_tap("/v1/chat/completions?n=5&_t=tap3.", 3, t),
                     SG_OUTCOME_CANCELLED);
    assert_int_equal(t->items, 0);
    free(t);
}

/* SG_CURL_BYTES_PAUSE: the read waits until sg_curl_op_resume, and the
 * same bytes come again - none lost, none twice; the clocks run on. */
typedef struct pauser {
    tap t;
    int pauses;      /* times on_bytes paused */
    int pause_every; /* pause at every Nth call (0: never) */
    int calls;
    bool never_resume;
} pauser;

static int pause_bytes(sg_curl_op *op, uint32_t attempt, const void *data, size_t len,
                       void *ud) {
    pauser *pz = ud;
    if (pz->pause_every > 0 && ++pz->calls % pz->pause_every == 0) {
        pz->pauses++;
        return SG_CURL_BYTES_PAUSE; /* not taken: they come again */
    }
    return tap_bytes(op, attempt, data, len, &pz->t);
}

static int pause_item(sg_curl_op *op, const sg_item *item, void *ud) {
    return tap_item(op, item, &((pauser *)ud)->t);
}

static sg_outcome run_paused(const char *path, int64_t idle, pauser *pz) {
    spec s = {.path = path, .idle = idle};
    CURL *e;
    SG_AUTO_OPTIONS(po);
    SG_AUTO_CURL_OPTIONS(co);
    char url[1024];
    configure(&s, &e, po, co, url, sizeof(url));
    assert_int_equal(sg_curl_options_set_on_item(co, pause_item), 0);
    assert_int_equal(sg_curl_options_set_on_bytes(co, pause_bytes), 0);
    sg_curl_op *op;
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_op_new(&op, e, po, co, pz), 0);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    int64_t until = sg_clock_now(NULL) + SG_SEC(10);
    while (sg_curl_multi_running(m) > 0 && sg_clock_now(NULL) < until) {
        assert_true(sg_curl_multi_step(m, SG_MS(5)) >= 0);
        if (sg_curl_op_paused(op) && !pz->never_resume) {
            assert_int_equal(sg_curl_op_resume(op), 0); /* from the loop */
        }
    }
    sg_outcome o = sg_curl_op_outcome(op);
    assert_true(sg_curl_op_done(op));
    assert_false(sg_curl_op_paused(op)); /* ended: nothing is held any more */
    sg_curl_op_free(op);
    sg_curl_multi_free(m);
    curl_easy_cleanup(e);
    return o;
}

static void a_paused_read_gives_the_same_bytes_again_and_the_clocks_run(void **state) {
    (void)state;
    pauser *pz = calloc(1, sizeof(*pz));
    pz->pause_every = 2; /* every other read waits for a resume */
    assert_int_equal(run_paused("/v1/chat/completions?n=8&gap=5&_t=pause1.", 0, pz),
                     SG_OUTCOME_OK);
    assert_true(pz->pauses >= 2);
    assert_int_equal(pz->t.items, 8); /* each item once, in order */
    assert_memory_equal(pz->t.buf + pz->t.len - 14, "data: [DONE]\n\n", 14);
    /* the whole body: eight events and the terminal, nothing twice */
    int events = 0;
    for (const char *p = pz->t.buf; (p = strstr(p, "data: ")) != NULL; p++) {
        events++;
    }
    assert_int_equal(events, 9);

    /* a pause the idle clock outlasts ends the attempt: idle_timeout */
    memset(pz, 0, sizeof(*pz));
    pz->pause_every = 2;
    pz->never_resume = true;
    int64_t t0 = sg_clock_now(NULL);
    assert_int_equal(
        run_paused("/v1/chat/completions?n=8&gap=5&_t=pause2.", SG_MS(200), pz),
        SG_OUTCOME_IDLE_TIMEOUT);
    assert_true(sg_clock_now(NULL) - t0 < SG_MS(200) + SLACK);
    free(pz);
}

/* A cancel while the request, sent whole, waits for its headers: the
 * attempt says wait_headers (the server may have it), not send - and a
 * POST so cancelled may have taken effect. */
static void a_cancel_after_the_request_was_sent_says_wait_headers(void **state) {
    (void)state;
    const char *methods[] = {"GET", "POST"};
    for (int i = 0; i < 2; i++) {
        spec s = {.path = i == 0 ? "/v1/chat/completions?headers_delay=3000&_t=cxl_wh0."
                                 : "/v1/chat/completions?headers_delay=3000&_t=cxl_wh1.",
                  .method = methods[i],
                  .body = i == 0 ? NULL : "{\"a\":1}"};
        CURL *e;
        SG_AUTO_OPTIONS(po);
        SG_AUTO_CURL_OPTIONS(co);
        char url[1024];
        configure(&s, &e, po, co, url, sizeof(url));
        sg_curl_op *op;
        sg_curl_multi *m;
        assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
        assert_int_equal(sg_curl_op_new(&op, e, po, co, NULL), 0);
        assert_int_equal(sg_curl_multi_add(m, op), 0);
        /* until the server has the request, then a little longer */
        const char *tag = i == 0 ? "_t=cxl_wh0." : "_t=cxl_wh1.";
        int64_t until = sg_clock_now(NULL) + SG_SEC(5);
        while (received(tag) == 0 && sg_clock_now(NULL) < until) {
            assert_true(sg_curl_multi_step(m, SG_MS(5)) >= 0);
        }
        assert_int_equal(received(tag), 1);
        int64_t t_cancel = sg_clock_now(NULL) + SG_MS(50);
        while (sg_clock_now(NULL) < t_cancel) {
            assert_true(sg_curl_multi_step(m, SG_MS(5)) >= 0);
        }
        assert_int_equal(sg_curl_op_cancel(op), 0);
        while (sg_curl_multi_running(m) > 0 && sg_clock_now(NULL) < until) {
            assert_true(sg_curl_multi_step(m, SG_MS(5)) >= 0);
        }
        assert_string_equal(sg_outcome_name(sg_curl_op_outcome(op)), "cancelled");
        const sg_op_attempt *a = sg_op_attempt_at(sg_curl_op_policy(op), 0);
        assert_non_null(a);
        assert_string_equal(sg_phase_name(a->phase), "wait_headers");
        assert_true(a->sent);
        sg_curl_op_free(op);
        sg_curl_multi_free(m);
        curl_easy_cleanup(e);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel\n", argv[0]);
        return 2;
    }
    fakemodel_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ok_stream_delivers_every_item_and_ends_ok),
        cmocka_unit_test(slow_headers_hit_the_first_item_deadline_in_wait_headers),
        cmocka_unit_test(slow_first_item_hits_the_first_item_deadline),
        cmocka_unit_test(stall_after_items_is_an_idle_timeout_partial_and_never_retried),
        cmocka_unit_test(keepalive_comments_never_reset_the_idle_clock),
        cmocka_unit_test(keepalive_only_never_counts_as_a_first_item),
        cmocka_unit_test(runaway_generation_is_capped_at_exactly_max_items),
        cmocka_unit_test(runaway_generation_hits_the_stream_total),
        cmocka_unit_test(abrupt_close_after_items_is_truncated_and_partial),
        cmocka_unit_test(clean_end_without_the_sentinel_is_truncated),
        cmocka_unit_test(without_a_sentinel_a_complete_body_is_ok),
        cmocka_unit_test(
            status_429_then_success_retries_with_one_key_and_a_shrinking_deadline),
        cmocka_unit_test(retry_after_beyond_the_budget_stops_at_once),
        cmocka_unit_test(retry_after_date_is_measured_from_the_servers_date),
        cmocka_unit_test(a_retry_after_of_64_bytes_is_reported_malformed),
        cmocka_unit_test(a_final_error_status_is_not_retried),
        cmocka_unit_test(a_retry_budget_spares_a_failing_server),
        cmocka_unit_test(fallback_endpoints_send_their_own_headers_and_body),
        cmocka_unit_test(
            a_server_that_never_answers_is_a_first_item_timeout_in_wait_headers),
        cmocka_unit_test(unsafe_post_that_times_out_after_send_is_outcome_unknown),
        cmocka_unit_test(unsafe_post_answered_502_by_a_gateway_is_outcome_unknown),
        cmocka_unit_test(a_method_the_easy_handle_would_not_send_is_refused_unsent),
        cmocka_unit_test(keyed_post_that_times_out_is_retried_with_the_same_key),
        cmocka_unit_test(no_request_starts_after_the_budget),
        cmocka_unit_test(refused_connection_is_a_transport_error_in_connect_and_retried),
        cmocka_unit_test(a_url_libcurl_cannot_use_is_refused_not_retried),
        cmocka_unit_test(an_error_response_says_why_and_its_connection_is_reused),
        cmocka_unit_test(an_unsafe_request_is_never_sent_twice_in_one_attempt),
        cmocka_unit_test(the_easy_handle_is_plain_again_after_the_op_is_freed),
        cmocka_unit_test(an_auth_challenge_is_the_answer_and_nothing_more_is_sent),
        cmocka_unit_test(the_drain_after_the_end_stays_inside_the_budget),
        cmocka_unit_test(the_deadline_is_stamped_after_the_connection_is_made),
        cmocka_unit_test(with_hedging_an_error_head_is_the_answer),
        cmocka_unit_test(a_connect_that_never_completes_is_a_connect_timeout),
        cmocka_unit_test(phases_stay_true_through_a_connect_proxy),
        cmocka_unit_test(a_server_that_breaks_http_is_a_protocol_error_not_retried),
        cmocka_unit_test(a_cancel_during_an_error_body_stops_the_retry),
        cmocka_unit_test(a_consumer_can_cancel_from_the_item_callback),
        cmocka_unit_test(a_callers_observer_sees_every_attempt_of_a_retried_operation),
        cmocka_unit_test(an_observer_that_refuses_sends_nothing),
        cmocka_unit_test(the_first_lease_is_measured_after_a_blocking_intent),
        cmocka_unit_test(a_cancel_before_the_retry_ends_the_operation_cancelled),
        cmocka_unit_test(a_cancel_after_the_request_was_sent_says_wait_headers),
        cmocka_unit_test(an_event_over_the_limit_is_a_protocol_error),
        cmocka_unit_test(an_ndjson_stream_is_one_item_per_line),
        cmocka_unit_test(an_interim_response_before_the_stream_is_skipped),
        cmocka_unit_test(an_anthropic_stream_ends_cleanly_at_message_stop),
        cmocka_unit_test(tls_is_verified_against_the_given_ca),
        cmocka_unit_test(http2_through_libcurl_works_over_h2c_and_tls),
        cmocka_unit_test(many_operations_run_concurrently_on_one_thread),
        cmocka_unit_test(a_callers_poll_loop_on_the_multi_fd_sees_a_stall_cut),
        cmocka_unit_test(a_caller_driven_multi_enforces_the_clocks),
        cmocka_unit_test(on_bytes_gives_the_stream_as_received_before_its_items),
        cmocka_unit_test(a_paused_read_gives_the_same_bytes_again_and_the_clocks_run),
    };
    return cmocka_run_group_tests_name("curl_transport", tests, setup, teardown);
}
