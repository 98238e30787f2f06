/*
 * Endpoint health (<streamguard/health.h>, docs/design.md "Endpoint
 * health"): the state machine of one endpoint driven by attempt ends, and
 * what an operation's plan does about it - go, go to a free fallback,
 * wait in the budget, or end with nothing sent.  Time is driven by hand
 * (sg_manual_clock); operations are driven through the policy as a
 * transport drives them.  The keyed hash is checked against FIPS 180-4
 * and RFC 4231.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/health.h>
#include <streamguard/unstable/op.h>

#include "policy/health_internal.h"
#include "policy/sha256.h"

#include <sched.h>

#include "health_run.h"

/* @h's only endpoint at T0: cooling for @cools from T0, or (0) closed. */
static void assert_cools(sg_health *h, int64_t cools) {
    seen s = look(h, T0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.e[0].state, cools > 0 ? SG_HEALTH_COOLING : SG_HEALTH_CLOSED);
    assert_int_equal(s.e[0].free_at, cools > 0 ? T0 + cools : -1);
}

/* ------------------------------------------------------- the keyed hash */

static void hex(const uint8_t *p, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) {
        sprintf(out + 2 * i, "%02x", p[i]);
    }
}

static void sha256_and_hmac_match_the_standards(void **state) {
    (void)state;
    uint8_t out[32];
    char text[65];
    sg__sha256 c;
    /* FIPS 180-4 examples (NIST's SHA256.pdf) */
    sg__sha256_init(&c);
    sg__sha256_update(&c, "abc", 3);
    sg__sha256_final(&c, out);
    hex(out, 32, text);
    assert_string_equal(
        text, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sg__sha256_init(&c);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    for (size_t i = 0; i < strlen(two); i++) { /* byte by byte: the buffering */
        sg__sha256_update(&c, two + i, 1);
    }
    sg__sha256_final(&c, out);
    hex(out, 32, text);
    assert_string_equal(
        text, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    sg__sha256_init(&c);
    sg__sha256_final(&c, out);
    hex(out, 32, text);
    assert_string_equal(
        text, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* RFC 4231 test case 2, the message in two parts */
    const void *parts[] = {"what do ya want ", "for nothing?"};
    const size_t lens[] = {16, 12};
    sg__hmac_sha256((const uint8_t *)"Jefe", 4, parts, lens, 2, out);
    hex(out, 32, text);
    assert_string_equal(
        text, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    /* RFC 4231 test case 6: a key longer than the block */
    uint8_t key[131];
    memset(key, 0xaa, sizeof(key));
    const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
    const void *p6[] = {msg};
    const size_t l6[] = {strlen(msg)};
    sg__hmac_sha256(key, sizeof(key), p6, l6, 1, out);
    hex(out, 32, text);
    assert_string_equal(
        text, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* -------------------------------------------------------------- cooling */

/* One operation's 429 with Retry-After holds every other operation that
 * shares the table until that instant: it waits when that fits its
 * budget, or ends at once with nothing sent. */
static void a_429_retry_after_cools_the_endpoint_for_every_operation(void **state) {
    (void)state;
    sg_manual_clock clk;
    sg_manual_clock_init(&clk, T0);
    sg_health *h = new_health();
    sg_op_options *o = options(h, SG_SEC(30));
    sg_op_options *tight = options(h, SG_MS(900));

    sg_op *a = start(o, T0);
    (void)go(a, T0);
    sg_op_verdict v = end(a, T0, with_retry_after(status(429), "2"));
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(state_at(h, T0), SG_HEALTH_COOLING);

    sg_manual_clock_advance(&clk, SG_SEC(1));
    const int64_t t1 = sg_manual_clock_now(&clk);
    sg_op *b = start(o, t1);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(b, t1, &p), SG_EINPROGRESS);
    /* it frees at T0 + 2 s; b waits a recheck more, after any operation
     * that was waiting for it before (none here) */
    assert_int_equal(p.free_at, T0 + SG_SEC(2) + SG_HEALTH_RECHECK_NS);
    assert_int_equal(p.reason, SG_OP_REASON_RATE_LIMITED);
    assert_int_equal(sg_op_attempt_count(b), 0); /* nothing planned, nothing sent */
    assert_false(sg_op_finished(b));
    assert_int_equal(sg_op_next_attempt(b, t1 + SG_MS(500), &p), SG_ESTATE);
    const sg_op_health_event *ev = sg_op_health_event_at(b, 0);
    assert_non_null(ev);
    assert_int_equal(ev->action, SG_OP_HEALTH_WAITED);
    assert_int_equal(ev->reason, SG_OP_REASON_RATE_LIMITED);
    assert_int_equal(ev->before_attempt, 1);
    assert_int_equal(ev->free_at, T0 + SG_SEC(2));
    assert_int_equal(ev->waited_ns, SG_SEC(1) + SG_HEALTH_RECHECK_NS);

    sg_op *c = start(tight, t1); /* 0.9 s: a wait of 1 s does not fit */
    assert_int_equal(sg_op_next_attempt(c, t1, &p), SG_EREFUSED);
    assert_true(sg_op_finished(c));
    assert_int_equal(sg_op_outcome(c), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_final_reason(c), SG_OP_REASON_RATE_LIMITED);
    assert_int_equal(sg_op_attempt_count(c), 0);
    assert_int_equal(sg_op_endpoint_free_at(c), T0 + SG_SEC(2));
    assert_int_equal(p.free_at, T0 + SG_SEC(2));
    char buf[4096];
    assert_int_equal(sg_op_report_write(c, t1, buf, sizeof(buf), NULL), 0);
    assert_non_null(strstr(buf, "\"reason\":\"rate_limited\""));
    assert_non_null(strstr(
        buf, "\"endpoint_health\":[{\"endpoint\":\"" NAME "\",\"action\":\"refused\","
             "\"reason\":\"rate_limited\",\"before_attempt\":1,\"hedge\":false,"
             "\"at_ms\":0,\"free_in_ms\":1000,\"waited_ms\":null}],"
             "\"endpoint_health_dropped\":0,\"endpoint_free_in_ms\":1000"));

    /* at the instant it frees, the first one's own retry goes (after its
     * Retry-After), and the waiting operation a recheck later */
    const int64_t t2 = T0 + SG_SEC(2);
    assert_int_equal(state_at(h, t2), SG_HEALTH_CLOSED);
    (void)go(a, t2);
    (void)end(a, t2, status(200));
    (void)go(b, t2 + SG_HEALTH_RECHECK_NS);
    (void)end(b, t2 + SG_HEALTH_RECHECK_NS, status(200));

    seen s = look(h, t2);
    assert_int_equal(s.n, 1);
    assert_string_equal(s.names[0], NAME);
    assert_int_equal(s.e[0].waited[SG_HEALTH_RATE_LIMITED], 1);
    assert_int_equal(s.e[0].refused[SG_HEALTH_RATE_LIMITED], 1);
    assert_int_equal(s.e[0].inflight, 0);
    sg_op_free(a);
    sg_op_free(b);
    sg_op_free(c);
    sg_op_options_free(o);
    sg_op_options_free(tight);
    sg_health_free(h);
}

/* 503 and 529 with a time to come back cool as a 429 does, and
 * retry-after-ms wins over Retry-After as the SDKs read it; a 500 with
 * Retry-After, and a spend limit's 429, do not. */
static void what_cools_and_what_does_not(void **state) {
    (void)state;
    struct {
        int status;
        const char *ra;
        const char *ra_ms;
        bool final;
        int64_t cools;
    } cases[] = {
        {503, "3", NULL, false, SG_SEC(3)},
        {529, "3", "1500", false, SG_MS(1500)},
        {429, "3", "250", false, SG_MS(250)},
        {429, "3", "soon", false, SG_SEC(3)}, /* malformed ms: Retry-After */
        {500, "3", NULL, false, 0},
        {429, "3", NULL, true, 0}, /* enforced_spend_limit_reached */
        {429, NULL, NULL, false, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sg_health *h = new_health();
        sg_op_options *o = options(h, SG_SEC(30));
        sg_op_result r = status(cases[i].status);
        if (cases[i].ra != NULL) {
            r = with_retry_after(r, cases[i].ra);
        }
        if (cases[i].ra_ms != NULL) {
            r.retry_after_ms_field = cases[i].ra_ms;
            r.retry_after_ms_field_len = strlen(cases[i].ra_ms);
        }
        r.provider_final = cases[i].final;
        one(o, T0, r);
        print_message("%d %s/%s final %d: %s\n", cases[i].status, cases[i].ra,
                      cases[i].ra_ms, cases[i].final,
                      sg_health_state_name(state_at(h, T0)));
        assert_cools(h, cases[i].cools);
        sg_op_options_free(o);
        sg_health_free(h);
    }
}

/* A success whose rate-limit headers say nothing remains cools the
 * endpoint until the reset they name: OpenAI's relative resets, and
 * Anthropic's instants read against the response's Date. */
static void a_success_saying_nothing_remains_cools_until_the_reset(void **state) {
    (void)state;
    struct {
        const char *name, *value;
        const char *name2, *value2;
        int64_t cools;
    } cases[] = {
        {"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1.5s",
         SG_MS(1500)},
        {"x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "6m0s",
         SG_SEC(360)},
        {"x-ratelimit-remaining-requests", "1", "x-ratelimit-reset-requests", "1s", 0},
        {"x-ratelimit-remaining-requests", "-1", "x-ratelimit-reset-requests", "1s", 0},
        {"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "0s", 0},
        {"anthropic-ratelimit-requests-remaining", "0",
         "anthropic-ratelimit-requests-reset", "2025-08-21T12:41:09Z", SG_SEC(10)},
        {"anthropic-ratelimit-output-tokens-remaining", "0",
         "anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:41:01.25Z",
         SG_MS(2250)},
        {"anthropic-ratelimit-input-tokens-remaining", "0",
         "anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:00Z", 0}, /* past */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sg_health *h = new_health();
        sg_op_options *o = options(h, SG_SEC(30));
        sg_op_ratelimit rl;
        memset(&rl, 0, sizeof(rl));
        assert_int_equal(sg_op_ratelimit_header(&rl, cases[i].name, strlen(cases[i].name),
                                                cases[i].value, strlen(cases[i].value)),
                         1);
        assert_int_equal(sg_op_ratelimit_header(&rl, cases[i].name2,
                                                strlen(cases[i].name2), cases[i].value2,
                                                strlen(cases[i].value2)),
                         1);
        sg_op_result r = status(200);
        r.ratelimit = &rl;
        r.wall_now_s = INT64_C(1755780059); /* Date: 2025-08-21T12:40:59Z */
        one(o, T0, r);
        assert_cools(h, cases[i].cools);
        sg_op_options_free(o);
        sg_health_free(h);
    }
}

/* Where the request's size is known (sg_op_options_set_token_estimate), an
 * endpoint with fewer tokens left than it needs holds it back until the
 * reset - and only it. */
static void too_few_tokens_hold_back_a_request_that_needs_more(void **state) {
    (void)state;
    sg_health *h = new_health();
    sg_op_options *o = options(h, SG_SEC(30));
    sg_op_options *big = options(h, SG_SEC(30));
    assert_int_equal(sg_op_options_set_token_estimate(big, 400, 200), 0);
    sg_op_ratelimit rl;
    memset(&rl, 0, sizeof(rl));
    const char *n1 = "x-ratelimit-remaining-tokens", *n2 = "x-ratelimit-reset-tokens";
    assert_int_equal(sg_op_ratelimit_header(&rl, n1, strlen(n1), "500", 3), 1);
    assert_int_equal(sg_op_ratelimit_header(&rl, n2, strlen(n2), "10s", 3), 1);
    sg_op_result r = status(200);
    r.ratelimit = &rl;
    one(o, T0, r);
    assert_int_equal(state_at(h, T0), SG_HEALTH_CLOSED); /* 500 remain: not for all */

    sg_op *small = start(o, T0 + 1);
    (void)go(small, T0 + 1); /* it needs no more than there is (unknown) */
    sg_op *large = start(big, T0 + 1);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(large, T0 + 1, &p), SG_EINPROGRESS);
    assert_int_equal(p.reason, SG_OP_REASON_RATE_LIMITED);
    assert_int_equal(p.free_at, T0 + SG_SEC(10) + SG_HEALTH_RECHECK_NS); /* a newcomer */
    (void)go(large, T0 + SG_SEC(10) + SG_HEALTH_RECHECK_NS);
    sg_op_free(small);
    sg_op_free(large);
    sg_op_options_free(o);
    sg_op_options_free(big);
    sg_health_free(h);
}

/* -------------------------------------------------------------- breaker */

/* Each kind of end the breaker counts opens a breaker of one failure;
 * each it never counts leaves it closed. */
static void what_the_breaker_counts(void **state) {
    (void)state;
    sg_op_result stall = res(SG_OUTCOME_IDLE_TIMEOUT, SG_PHASE_STREAMING, 200);
    stall.items = 3;
    stall.first_item_ns = SG_MS(5);
    sg_op_result overload = res(SG_OUTCOME_PROVIDER_ERROR, SG_PHASE_WAIT_FIRST_ITEM, 200);
    overload.provider_type = "overloaded_error";
    overload.provider_retryable = true;
    sg_op_result limited = overload;
    limited.provider_type = "rate_limit_error";
    sg_op_result garbled = res(SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS, 0);
    garbled.sent = true;
    sg_op_result lost = res(SG_OUTCOME_TRANSPORT_ERROR, SG_PHASE_WAIT_HEADERS, 0);
    sg_op_result capped = res(SG_OUTCOME_CAP_EXCEEDED, SG_PHASE_STREAMING, 200);
    capped.items = 10;
    const struct {
        const char *what;
        sg_op_result r;
        bool counts;
    } cases[] = {
        {"connect_timeout", res(SG_OUTCOME_CONNECT_TIMEOUT, SG_PHASE_CONNECT, 0), true},
        {"connect refused", res(SG_OUTCOME_TRANSPORT_ERROR, SG_PHASE_CONNECT, 0), true},
        {"lost before an answer", lost, true},
        {"500", status(500), true},
        {"502", status(502), true},
        {"503", status(503), true},
        {"529", status(529), true},
        {"no status", garbled, true},
        {"first_item_timeout",
         res(SG_OUTCOME_FIRST_ITEM_TIMEOUT, SG_PHASE_WAIT_FIRST_ITEM, 200), true},
        {"first_item_timeout before headers",
         res(SG_OUTCOME_FIRST_ITEM_TIMEOUT, SG_PHASE_WAIT_HEADERS, 0), true},
        {"in-band overload", overload, true},
        {"stall after the headers", stall, true},
        {"attempt_timeout, nothing",
         res(SG_OUTCOME_ATTEMPT_TIMEOUT, SG_PHASE_WAIT_HEADERS, 0), true},
        {"ok", status(200), false},
        {"cancelled", res(SG_OUTCOME_CANCELLED, SG_PHASE_WAIT_HEADERS, 0), false},
        {"400", status(400), false},
        {"404", status(404), false},
        {"429", status(429), false},
        {"in-band rate limit", limited, false},
        {"cap", capped, false},
        {"budget_exhausted", res(SG_OUTCOME_BUDGET_EXHAUSTED, SG_PHASE_WAIT_HEADERS, 0),
         false},
        {"truncated", res(SG_OUTCOME_TRUNCATED, SG_PHASE_WAIT_FIRST_ITEM, 200), false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sg_health *h = new_health();
        assert_int_equal(sg_health_set_breaker_failures(h, 1), 0);
        sg_op_options *o = options(h, SG_SEC(30));
        one(o, T0, cases[i].r);
        const sg_health_state st = state_at(h, T0);
        print_message("%-34s -> %s\n", cases[i].what, sg_health_state_name(st));
        assert_int_equal(st, cases[i].counts ? SG_HEALTH_OPEN : SG_HEALTH_CLOSED);
        sg_op_options_free(o);
        sg_health_free(h);
    }
}

/* Consecutive: an ok between two failures starts the count again; 0
 * turns the breaker off. */
static void only_consecutive_failures_open_it(void **state) {
    (void)state;
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_breaker_failures(h, 3), 0);
    sg_op_options *o = options(h, SG_SEC(30));
    one(o, T0, status(500));
    one(o, T0, status(500));
    one(o, T0, status(200));
    one(o, T0, status(500));
    one(o, T0, status(500));
    assert_int_equal(state_at(h, T0), SG_HEALTH_CLOSED);
    assert_int_equal(look(h, T0).e[0].failures, 2);
    one(o, T0, status(404)); /* neither resets nor counts */
    assert_int_equal(look(h, T0).e[0].failures, 2);
    one(o, T0, status(500));
    assert_int_equal(state_at(h, T0), SG_HEALTH_OPEN);
    assert_int_equal(look(h, T0).e[0].free_at, T0 + SG_HEALTH_DEFAULT_BREAKER_COOLDOWN);
    sg_op_options_free(o);
    sg_health_free(h);

    h = new_health();
    assert_int_equal(sg_health_set_breaker_failures(h, 0), 0);
    o = options(h, SG_SEC(30));
    for (int i = 0; i < 50; i++) {
        one(o, T0, status(503));
    }
    assert_int_equal(state_at(h, T0), SG_HEALTH_CLOSED);
    sg_op_options_free(o);
    sg_health_free(h);
    assert_int_equal(sg_health_set_breaker_failures(NULL, 1), SG_EINVAL);
    assert_int_equal(sg_health_set_breaker_cooldown(NULL, 1), SG_EINVAL);
}

/* Open for the cooldown, then one probe at a time: its success closes,
 * its failure re-opens for twice as long (capped), a probe that says
 * nothing lets the next one through. */
static void open_then_half_open_with_one_probe(void **state) {
    (void)state;
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_breaker_failures(h, 2), 0);
    assert_int_equal(sg_health_set_breaker_cooldown(h, SG_SEC(5)), 0);
    assert_int_equal(sg_health_set_breaker_cooldown_max(h, SG_SEC(12)), 0);
    assert_int_equal(sg_health_set_breaker_cooldown(h, 0), SG_EINVAL);
    assert_int_equal(sg_health_set_breaker_cooldown_max(h, SG_DURATION_MAX + 1),
                     SG_ERANGE);
    sg_op_options *o = options(h, SG_SEC(60));
    one(o, T0, status(500));
    one(o, T0, status(500));
    assert_int_equal(state_at(h, T0), SG_HEALTH_OPEN);

    sg_op_plan p;
    sg_op *w = start(o, T0 + SG_SEC(1)); /* waits for the cooldown's end */
    assert_int_equal(sg_op_next_attempt(w, T0 + SG_SEC(1), &p), SG_EINPROGRESS);
    assert_int_equal(p.reason, SG_OP_REASON_CIRCUIT_OPEN);
    assert_int_equal(p.free_at, T0 + SG_SEC(5));

    int64_t t = T0 + SG_SEC(5);
    assert_int_equal(state_at(h, t), SG_HEALTH_HALF_OPEN);
    sg_op *probe = start(o, t);
    (void)go(probe, t);                                             /* the probe */
    assert_int_equal(sg_op_next_attempt(w, t, &p), SG_EINPROGRESS); /* one at a time */
    assert_int_equal(p.reason, SG_OP_REASON_CIRCUIT_OPEN);
    assert_int_equal(p.free_at, t + SG_HEALTH_RECHECK_NS);
    (void)end(probe, t + SG_SEC(1), status(502)); /* fails: 10 s now */
    sg_op_free(probe);
    t += SG_SEC(1);
    assert_int_equal(state_at(h, t), SG_HEALTH_OPEN);
    assert_int_equal(look(h, t).e[0].free_at, t + SG_SEC(10));
    assert_int_equal(look(h, t).e[0].opens, 2);

    t += SG_SEC(10);
    probe = start(o, t);
    (void)go(probe, t);
    (void)end(probe, t, status(503)); /* fails again: 20 s, capped at 12 */
    sg_op_free(probe);
    assert_int_equal(look(h, t).e[0].free_at, t + SG_SEC(12));

    t += SG_SEC(12);
    probe = start(o, t);
    (void)go(probe, t);
    (void)end(probe, t, status(404)); /* says nothing: the probe is free again */
    sg_op_free(probe);
    assert_int_equal(state_at(h, t), SG_HEALTH_HALF_OPEN);
    probe = start(o, t);
    (void)go(probe, t);
    (void)end(probe, t, status(200)); /* closes */
    sg_op_free(probe);
    assert_int_equal(state_at(h, t), SG_HEALTH_CLOSED);
    assert_int_equal(look(h, t).e[0].opens, 0);
    (void)go(w, t); /* the one that waited goes */
    (void)end(w, t, status(200));
    assert_int_equal(sg_op_health_event_count(w),
                     1); /* one wait (open, then probe out) */
    assert_int_equal(sg_op_health_event_at(w, 0)->waited_ns,
                     SG_SEC(4) + SG_HEALTH_RECHECK_NS);
    sg_op_free(w);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* ------------------------------------------------------------ admission */

static void beyond_max_inflight_an_attempt_waits_or_is_refused(void **state) {
    (void)state;
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_max_inflight(h, 2), 0);
    sg_op_options *o = options(h, SG_SEC(30));
    sg_op_options *tight = options(h, SG_MS(15));
    sg_op *a = start(o, T0);
    sg_op *b = start(o, T0);
    (void)go(a, T0);
    (void)go(b, T0);
    assert_int_equal(look(h, T0).e[0].inflight, 2);

    sg_op_plan p;
    sg_op *c = start(o, T0);
    assert_int_equal(sg_op_next_attempt(c, T0, &p), SG_EINPROGRESS);
    assert_int_equal(p.reason, SG_OP_REASON_ENDPOINT_BUSY);
    assert_int_equal(p.free_at, T0 + SG_HEALTH_RECHECK_NS);
    int64_t t = p.free_at;
    assert_int_equal(sg_op_next_attempt(c, t, &p), SG_EINPROGRESS); /* still full */
    assert_int_equal(sg_op_health_event_count(c), 1);               /* one wait */
    assert_int_equal(sg_op_health_event_at(c, 0)->waited_ns, 2 * SG_HEALTH_RECHECK_NS);

    sg_op *d = start(tight, t); /* 10 ms of waiting + 10 ms minimum > 15 ms */
    assert_int_equal(sg_op_next_attempt(d, t, &p), SG_EREFUSED);
    assert_int_equal(sg_op_final_reason(d), SG_OP_REASON_ENDPOINT_BUSY);
    assert_int_equal(sg_op_outcome(d), SG_OUTCOME_REFUSED);

    (void)end(a, t, status(200));
    (void)go(c, t + SG_HEALTH_RECHECK_NS);
    seen s = look(h, t);
    assert_int_equal(s.e[0].inflight, 2);
    assert_int_equal(s.e[0].waited[SG_HEALTH_ENDPOINT_BUSY], 1);
    assert_int_equal(s.e[0].refused[SG_HEALTH_ENDPOINT_BUSY], 1);
    sg_op_free(a);
    sg_op_free(b); /* freed while running: its slot goes back */
    sg_op_free(c);
    sg_op_free(d);
    assert_int_equal(look(h, t).e[0].inflight, 0);
    sg_op_options_free(o);
    sg_op_options_free(tight);
    sg_health_free(h);
}

/* ------------------------------------------------------------ fallbacks */

static void a_fallback_goes_at_once_when_its_endpoint_is_not_free(void **state) {
    (void)state;
    sg_health *h = new_health();
    sg_op_options *o = options(h, SG_SEC(30));
    const char *urls[] = {URL, URL2};
    assert_int_equal(sg_op_options_set_endpoints(o, urls, 2), 0);
    one(o, T0, with_retry_after(status(429), "5")); /* the first cools 5 s */

    sg_op *op = start(o, T0 + SG_SEC(1));
    sg_op_plan p = go(op, T0 + SG_SEC(1));
    assert_int_equal(p.endpoint, 1); /* at once, to the second */
    const sg_op_health_event *ev = sg_op_health_event_at(op, 0);
    assert_int_equal(ev->action, SG_OP_HEALTH_SKIPPED);
    assert_int_equal(ev->endpoint, 0);
    assert_int_equal(ev->reason, SG_OP_REASON_RATE_LIMITED);
    /* it fails too (its own 429, 2 s): the retry goes back to the first,
     * which has no wait of the operation's own - but its health's: the
     * operation waits for it (the second backs off from its own failure) */
    sg_op_verdict v = end(op, T0 + SG_SEC(1), with_retry_after(status(429), "2"));
    assert_int_equal(v.decision, SG_OP_RETRY);
    assert_int_equal(v.retry_at, T0 + SG_SEC(1));
    assert_int_equal(sg_op_next_attempt(op, v.retry_at, &p), SG_EINPROGRESS);
    /* it frees at 5 s; the operation never waited for it before: a
     * recheck after those that did */
    assert_int_equal(p.free_at, T0 + SG_SEC(5) + SG_HEALTH_RECHECK_NS);
    assert_int_equal(p.reason, SG_OP_REASON_RATE_LIMITED);
    p = go(op, T0 + SG_SEC(5) + SG_HEALTH_RECHECK_NS);
    assert_int_equal(p.endpoint, 0);
    (void)end(op, T0 + SG_SEC(5) + SG_HEALTH_RECHECK_NS, status(200));
    assert_int_equal(sg_op_health_event_count(op), 2); /* skipped, then waited */
    assert_int_equal(sg_op_health_event_at(op, 1)->action, SG_OP_HEALTH_WAITED);
    assert_int_equal(sg_op_health_event_at(op, 1)->before_attempt, 2);
    seen s = look(h, T0 + SG_SEC(5));
    assert_int_equal(s.n, 2);
    assert_int_equal(s.e[0].skipped[SG_HEALTH_RATE_LIMITED], 1);
    assert_int_equal(s.e[0].waited[SG_HEALTH_RATE_LIMITED], 1);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* A hedge goes only to an endpoint its health lets be asked; it never
 * waits: with none free it is refused, and the report says why. */
static void a_hedge_obeys_the_same_rules(void **state) {
    (void)state;
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_breaker_failures(h, 1), 0);
    assert_int_equal(sg_health_set_max_inflight(h, 1), 0);
    sg_op_options *other = options(h, SG_SEC(30));
    assert_int_equal(sg_op_options_set_target(other, URL2), 0);
    one(other, T0, status(503)); /* the second endpoint opens */

    sg_op_options *o = options(h, SG_SEC(30));
    const char *urls[] = {URL, URL2};
    assert_int_equal(sg_op_options_set_endpoints(o, urls, 2), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_hedging(o, SG_SEC(1), 1), 0);
    sg_op *op = start(o, T0);
    (void)go(op, T0); /* on the first: it is full now */
    sg_op_plan p;
    assert_int_equal(sg_op_hedge(op, T0 + SG_SEC(1), &p), SG_EREFUSED);
    assert_int_equal(p.reason, SG_OP_REASON_ENDPOINT_BUSY);
    assert_int_equal(sg_op_health_event_count(op), 2);
    assert_int_equal(sg_op_health_event_at(op, 0)->reason, SG_OP_REASON_CIRCUIT_OPEN);
    assert_true(sg_op_health_event_at(op, 0)->hedge);
    assert_int_equal(sg_op_health_event_at(op, 1)->reason, SG_OP_REASON_ENDPOINT_BUSY);
    assert_int_equal(sg_op_running(op), 1);
    (void)end(op, T0 + SG_SEC(2), status(200));
    sg_op_free(op);
    sg_op_options_free(o);
    sg_op_options_free(other);
    sg_health_free(h);
}

static void a_wait_never_runs_past_the_deadline(void **state) {
    (void)state;
    sg_health *h = new_health();
    sg_op_options *o = options(h, SG_SEC(30));
    one(o, T0, with_retry_after(status(429), "10"));
    sg_op_options *short_budget = options(h, SG_SEC(5));
    sg_op *op = start(short_budget, T0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0, &p), SG_EREFUSED);
    assert_int_equal(p.outcome, SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_endpoint_free_at(op), T0 + SG_SEC(10));
    assert_int_equal(sg_op_finished_at(op), T0); /* at once, not at the deadline */
    sg_op_free(op);
    /* exactly fits: the wait (to a recheck after the instant it frees: it
     * never waited for it before) plus the minimum attempt */
    const int64_t wake = T0 + SG_SEC(10) + SG_HEALTH_RECHECK_NS;
    assert_int_equal(sg_op_options_set_budget(short_budget, wake - T0 + SG_MS(10)), 0);
    op = start(short_budget, T0);
    assert_int_equal(sg_op_next_attempt(op, T0, &p), SG_EINPROGRESS);
    p = go(op, wake);
    assert_int_equal(p.attempt_timeout_ns, SG_MS(10));
    sg_op_free(op);
    sg_op_options_free(o);
    sg_op_options_free(short_budget);
    sg_health_free(h);
}

/* ---------------------------------------------------------- identities */

static void credentials_key_entries_and_never_show(void **state) {
    (void)state;
    sg_health *h = new_health();
    sg_op_options *o = options(h, SG_SEC(30));
    sg_op *a = start(o, T0);
    const char *ka = "Bearer sk-AAAA", *kb = "Bearer sk-BBBB";
    assert_int_equal(
        sg_op_set_endpoint_identity(a, 0, URL "?key=sk-AAAA", ka, strlen(ka)), 0);
    (void)go(a, T0);
    assert_int_equal(sg_op_set_endpoint_identity(a, 0, URL, ka, strlen(ka)), SG_ESTATE);
    (void)end(a, T0, with_retry_after(status(429), "5"));
    sg_op_free(a);

    sg_op *b = start(o, T0); /* another key: its own limits */
    assert_int_equal(sg_op_set_endpoint_identity(b, 0, URL, kb, strlen(kb)), 0);
    (void)go(b, T0);
    sg_op *c = start(o, T0); /* the same key: cooling */
    assert_int_equal(sg_op_set_endpoint_identity(c, 0, URL, ka, strlen(ka)), 0);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(c, T0, &p), SG_EINPROGRESS);
    /* an AWS SigV4 Authorization is keyed by its access key id alone */
    const char *s1 =
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/bedrock/"
        "aws4_request, SignedHeaders=host, Signature=5d672d79c15b13162d9279b0";
    const char *s2 =
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150831/us-east-1/bedrock/"
        "aws4_request, SignedHeaders=host, Signature=fe5f80f77d5fa3beca038a24";
    sg_op *d = start(o, T0);
    assert_int_equal(sg_op_set_endpoint_identity(d, 0, URL2, s1, strlen(s1)), 0);
    (void)go(d, T0);
    (void)end(d, T0, with_retry_after(status(429), "5"));
    sg_op_free(d);
    d = start(o, T0);
    assert_int_equal(sg_op_set_endpoint_identity(d, 0, URL2, s2, strlen(s2)), 0);
    assert_int_equal(sg_op_next_attempt(d, T0, &p), SG_EINPROGRESS);
    sg_op_free(d);

    seen s = look(h, T0);
    assert_int_equal(s.n, 3);
    for (int i = 0; i < s.n; i++) {
        assert_null(strstr(s.names[i], "sk-"));
        assert_null(strstr(s.names[i], "?"));
    }
    assert_string_equal(s.names[0], s.names[1]);
    assert_true(s.e[0].key_id != s.e[1].key_id);
    assert_int_equal(sg_op_set_endpoint_identity(b, 1, URL, NULL, 0), SG_EINVAL);
    assert_int_equal(sg_op_set_endpoint_identity(NULL, 0, URL, NULL, 0), SG_EINVAL);
    sg_op_free(b);
    sg_op_free(c);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* An operation without a URL to name its endpoint by is not tracked;
 * without health nothing happens at all. */
static void nothing_to_name_nothing_tracked(void **state) {
    (void)state;
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_max_inflight(h, 1), 0);
    sg_op_options *o = options(h, SG_SEC(30));
    assert_int_equal(sg_op_options_set_target(o, NULL), 0);
    sg_op *a = start(o, T0), *b = start(o, T0);
    (void)go(a, T0);
    (void)go(b, T0);
    assert_int_equal(look(h, T0).n, 0);
    sg_op_free(a);
    sg_op_free(b);
    sg_op_options_free(o);
    sg_health_free(h);
    assert_int_equal(sg_op_options_set_health(NULL, NULL), SG_EINVAL);
    assert_int_equal(sg_op_health_event_count(NULL), 0);
    assert_null(sg_op_health_event_at(NULL, 0));
    assert_int_equal(sg_op_endpoint_free_at(NULL), -1);
    assert_null(sg_health_state_name(SG_HEALTH_STATE_COUNT_));
    assert_string_equal(sg_health_state_name(SG_HEALTH_HALF_OPEN), "half_open");
    assert_int_equal(sg_health_foreach(NULL, 0, collect, NULL), SG_EINVAL);
}

/* --------------------------------------------------------------- memory */

static int count_entries(const sg_health_entry *e, void *ud) {
    (void)e;
    (*(int *)ud)++;
    return 0;
}

static int entries(sg_health *h, int64_t now) {
    int n = 0;
    assert_int_equal(sg_health_foreach(h, now, count_entries, &n), 0);
    return n;
}

/* SG_HEALTH_MAX_ENTRIES at most: the least recently used idle endpoint
 * makes room; when every one is held, a new endpoint is not tracked. */
static void the_table_holds_at_most_its_maximum(void **state) {
    (void)state;
    sg_health *h = new_health();
    sg_op_options *o = options(h, SG_SEC(30));
    char url[128];
    sg_op **held = calloc(SG_HEALTH_MAX_ENTRIES, sizeof(*held));
    for (int i = 0; i < SG_HEALTH_MAX_ENTRIES + 10; i++) {
        snprintf(url, sizeof(url), "http://e%d.example/x", i);
        assert_int_equal(sg_op_options_set_target(o, url), 0);
        one(o, T0 + i, status(200)); /* ended: idle */
    }
    assert_int_equal(entries(h, T0), SG_HEALTH_MAX_ENTRIES);
    /* held by running operations: nothing can go */
    for (int i = 0; i < SG_HEALTH_MAX_ENTRIES; i++) {
        snprintf(url, sizeof(url), "http://held%d.example/x", i);
        assert_int_equal(sg_op_options_set_target(o, url), 0);
        held[i] = start(o, T0 + SG_SEC(1));
        (void)go(held[i], T0 + SG_SEC(1));
    }
    assert_int_equal(entries(h, T0), SG_HEALTH_MAX_ENTRIES);
    assert_int_equal(sg_health_set_max_inflight(h, 1), 0);
    assert_int_equal(sg_op_options_set_target(o, "http://late.example/x"), 0);
    sg_op *a = start(o, T0 + SG_SEC(2)), *b = start(o, T0 + SG_SEC(2));
    (void)go(a, T0 + SG_SEC(2)); /* not tracked: asked as if free */
    (void)go(b, T0 + SG_SEC(2));
    sg_op_free(a);
    sg_op_free(b);
    for (int i = 0; i < SG_HEALTH_MAX_ENTRIES; i++) {
        sg_op_free(held[i]);
    }
    free(held);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* An operation may outlive the caller's hold on the table (a multi's,
 * freed first): the last one to go frees it. */
static void operations_keep_the_table_alive(void **state) {
    (void)state;
    sg_health *h = new_health();
    sg_op_options *o = options(h, SG_SEC(30));
    sg_op *op = start(o, T0);
    (void)go(op, T0);
    sg_health_free(h);
    (void)end(op, T0, status(500));
    sg_op_free(op); /* frees the table (ASan and valgrind would see it not) */
    sg_op_options_free(o);
}

/* -------------------------------------------------------------- threads */

typedef struct shared {
    sg_health *h;
    sg_op_options *o;
    _Atomic int64_t clock;
    _Atomic int admitted; /* attempts between their plan and their end */
    _Atomic int most;     /* the most at once */
    _Atomic int probes;   /* probes out */
    _Atomic int most_probes;
    _Atomic int refused;   /* plans refused */
    _Atomic int completed; /* attempts ended */
} shared;

static void raise_to(_Atomic int *most, int v) {
    int m = atomic_load(most);
    while (v > m && !atomic_compare_exchange_weak(most, &m, v)) {
    }
}

static void *worker(void *ud) {
    shared *sh = ud;
    uint64_t x = (uint64_t)(uintptr_t)&x;
    for (int i = 0; i < 3000; i++) {
        const int64_t now = atomic_fetch_add(&sh->clock, SG_US(50));
        sg_op *op = NULL;
        assert_int_equal(sg_op_new(&op), 0);
        assert_int_equal(sg_op_start(op, sh->o, now), 0);
        sg_op_plan p;
        int rc = sg_op_next_attempt(op, now, &p);
        if (rc == 0) {
            raise_to(&sh->most, atomic_fetch_add(&sh->admitted, 1) + 1);
            const bool probe =
                (sg__rec_c(sg_op_attempt_at(op, 0))->health & SG__HREC_PROBE) != 0;
            if (probe) {
                raise_to(&sh->most_probes, atomic_fetch_add(&sh->probes, 1) + 1);
            }
            for (int k = 0; k < 3; k++) {
                sched_yield(); /* hold the slot a while: the others meet it */
            }
            if (probe) {
                atomic_fetch_sub(&sh->probes, 1);
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            atomic_fetch_sub(&sh->admitted, 1);
            sg_op_result r = status((x % 3) == 0 ? 503 : 200);
            sg_op_verdict v;
            assert_int_equal(sg_op_attempt_done(op, atomic_load(&sh->clock), &r, &v), 0);
            atomic_fetch_add(&sh->completed, 1);
        } else {
            atomic_fetch_add(&sh->refused, 1);
        }
        sg_op_free(op);
    }
    return NULL;
}

/* Four threads plan and end attempts on one endpoint at once: never more
 * in flight than allowed, never two probes, every slot given back. */
static void threads_share_one_table(void **state) {
    (void)state;
    shared sh;
    memset(&sh, 0, sizeof(sh));
    sh.h = new_health();
    assert_int_equal(sg_health_set_max_inflight(sh.h, 2), 0);
    assert_int_equal(sg_health_set_breaker_failures(sh.h, 3), 0);
    assert_int_equal(sg_health_set_breaker_cooldown(sh.h, SG_MS(1)), 0);
    sh.o = options(sh.h, SG_MS(5)); /* waits rarely fit: refusals */
    atomic_init(&sh.clock, T0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, worker, &sh), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
    }
    print_message("completed %d, refused %d, at most %d at once (%d probes)\n",
                  atomic_load(&sh.completed), atomic_load(&sh.refused),
                  atomic_load(&sh.most), atomic_load(&sh.most_probes));
    assert_true(atomic_load(&sh.most) <= 2);
    assert_true(atomic_load(&sh.most_probes) <= 1); /* one probe at a time */
    assert_int_equal(atomic_load(&sh.completed) + atomic_load(&sh.refused), 4 * 3000);
    assert_true(atomic_load(&sh.completed) > 0);
    seen s = look(sh.h, atomic_load(&sh.clock));
    assert_int_equal(s.n, 1);
    assert_int_equal(s.e[0].inflight, 0);
    assert_int_equal(s.e[0].operations, 0);
    sg_op_options_free(sh.o);
    sg_health_free(sh.h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sha256_and_hmac_match_the_standards),
        cmocka_unit_test(a_429_retry_after_cools_the_endpoint_for_every_operation),
        cmocka_unit_test(what_cools_and_what_does_not),
        cmocka_unit_test(a_success_saying_nothing_remains_cools_until_the_reset),
        cmocka_unit_test(too_few_tokens_hold_back_a_request_that_needs_more),
        cmocka_unit_test(what_the_breaker_counts),
        cmocka_unit_test(only_consecutive_failures_open_it),
        cmocka_unit_test(open_then_half_open_with_one_probe),
        cmocka_unit_test(beyond_max_inflight_an_attempt_waits_or_is_refused),
        cmocka_unit_test(a_fallback_goes_at_once_when_its_endpoint_is_not_free),
        cmocka_unit_test(a_hedge_obeys_the_same_rules),
        cmocka_unit_test(a_wait_never_runs_past_the_deadline),
        cmocka_unit_test(credentials_key_entries_and_never_show),
        cmocka_unit_test(nothing_to_name_nothing_tracked),
        cmocka_unit_test(the_table_holds_at_most_its_maximum),
        cmocka_unit_test(operations_keep_the_table_alive),
        cmocka_unit_test(threads_share_one_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
