/*
 * First-token-aware endpoints in the policy (<streamguard/health.h>,
 * docs/design.md "First-token sketch"): what feeds an endpoint's sketch,
 * the hedge delay learned from it (fallback below the sample count,
 * clamps, the endpoint being hedged), and the first attempt ordered by
 * first token.  Operations are driven through the policy as a transport
 * drives them; time is a hand-driven clock (sg_manual_clock).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/health.h>
#include <streamguard/unstable/op.h>

#define A "https://a.example.com/v1/chat/completions"
#define B "https://b.example.com/v1/chat/completions"
#define C "https://c.example.com/v1/chat/completions"

static sg_manual_clock mc;

static int64_t now(void) {
    return sg_manual_clock_now(&mc);
}

static int setup(void **state) {
    (void)state;
    sg_manual_clock_init(&mc, SG_SEC(1000));
    return 0;
}

/* ------------------------------------------------------------- helpers */

static sg_health *new_health(void) {
    sg_health *h = NULL;
    assert_int_equal(sg_health_new(&h), 0);
    return h;
}

/* A GET to @urls (@n of them) sharing @h, hedged after @fixed (0: not),
 * with the learned delay when @learned. */
static sg_op_options *options(sg_health *h, const char *const *urls, uint32_t n,
                              int64_t fixed, bool learned) {
    sg_op_options *o = NULL;
    assert_int_equal(sg_op_options_new(&o), 0);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(o, SG_SEC(30)), 0);
    assert_int_equal(sg_op_options_set_endpoints(o, urls, n), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 4), 0);
    assert_int_equal(sg_op_options_set_health(o, h), 0);
    assert_int_equal(sg_op_options_set_seed(o, 7), 0);
    if (fixed > 0) {
        assert_int_equal(sg_op_options_set_hedging(o, fixed, 2), 0);
    }
    assert_int_equal(sg_op_options_set_hedge_auto(o, learned), 0);
    return o;
}

static sg_op *start(const sg_op_options *o) {
    sg_op *op = NULL;
    assert_int_equal(sg_op_new(&op), 0);
    assert_int_equal(sg_op_start(op, o, now()), 0);
    return op;
}

static sg_op_plan go(sg_op *op) {
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, now(), &p), 0);
    return p;
}

/* A stream whose first token came @ttft after the attempt's start. */
static sg_op_result first_token_after(int64_t ttft) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_OK;
    r.phase = SG_PHASE_STREAMING;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    r.items = 3;
    r.first_item_ns = ttft;
    return r;
}

static sg_op_result nothing(sg_outcome oc, int status) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = oc;
    r.phase = status > 0 ? SG_PHASE_WAIT_FIRST_ITEM : SG_PHASE_CONNECT;
    r.sent = status > 0;
    r.headers_received = status > 0;
    r.http_status = status;
    r.first_item_ns = -1;
    return r;
}

static sg_op_verdict end(sg_op *op, int64_t at, sg_op_result r) {
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, at, &r, &v), 0);
    return v;
}

/* An operation on @url alone, sharing @h, whose one attempt ends with @r
 * @took after now. */
static void one(sg_health *h, const char *url, int64_t took, sg_op_result r) {
    sg_op_options *o = options(h, &url, 1, 0, false);
    sg_op *op = start(o);
    (void)go(op);
    (void)end(op, now() + took, r);
    sg_op_free(op);
    sg_op_options_free(o);
}

/* @n first tokens at @url, spread evenly from @lo to @hi. */
static void feed(sg_health *h, const char *url, int n, int64_t lo, int64_t hi) {
    for (int i = 0; i < n; i++) {
        const int64_t t = lo + (n > 1 ? (hi - lo) * i / (n - 1) : 0);
        one(h, url, t + SG_MS(5), first_token_after(t));
    }
}

typedef struct seen {
    int n;
    sg_health_entry e[4];
} seen;

static int collect(const sg_health_entry *e, void *ud) {
    seen *s = ud;
    if (s->n < 4) {
        s->e[s->n] = *e;
        s->e[s->n].endpoint = NULL;
    }
    s->n++;
    return 0;
}

static seen look(sg_health *h) {
    seen s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(sg_health_foreach(h, now(), collect, &s), 0);
    return s;
}

/* Whether @got is @exact within the sketch's error (1/32). */
static bool near(int64_t got, int64_t exact) {
    const int64_t d = got > exact ? got - exact : exact - got;
    return d * 32 <= exact;
}

/* Whether a learned delay @got is right for the exact quantile @exact:
 * its bucket's upper edge - never before it, later by 1/16 at most. */
static bool edge_of(int64_t got, int64_t exact) {
    return got >= exact && (got - exact) * 16 <= exact;
}

/* The report of @op, into a static buffer. */
static const char *report(const sg_op *op) {
    static char buf[16384];
    assert_int_equal(sg_op_report_write(op, now(), buf, sizeof(buf), NULL), 0);
    return buf;
}

/* ------------------------------------------------------------- options */

static void the_setters_check_their_values(void **state) {
    (void)state;
    sg_op_options *o = NULL;
    assert_int_equal(sg_op_options_new(&o), 0);
    assert_int_equal(sg_op_options_set_hedge_auto(NULL, true), SG_EINVAL);
    assert_int_equal(sg_op_options_set_hedge_quantile(NULL, 0.9), SG_EINVAL);
    assert_int_equal(sg_op_options_set_hedge_quantile(o, 0.49), SG_ERANGE);
    assert_int_equal(sg_op_options_set_hedge_quantile(o, 1.0), SG_ERANGE);
    assert_int_equal(sg_op_options_set_hedge_quantile(o, 0.0 / 0.0), SG_ERANGE);
    assert_int_equal(sg_op_options_set_hedge_quantile(o, 0.5), 0);
    assert_int_equal(sg_op_options_set_hedge_quantile(o, 0.999), 0);
    assert_int_equal(sg_op_options_set_hedge_floor(o, -1), SG_EINVAL);
    assert_int_equal(sg_op_options_set_hedge_floor(o, SG_DURATION_MAX + 1), SG_ERANGE);
    assert_int_equal(sg_op_options_set_hedge_floor(o, 0), 0);
    assert_int_equal(sg_op_options_set_endpoint_order(o, SG_ENDPOINT_ORDER_COUNT_),
                     SG_ERANGE);
    assert_int_equal(sg_op_options_set_endpoint_order(NULL, 0), SG_EINVAL);
    assert_string_equal(sg_endpoint_order_name(SG_ENDPOINT_ORDER_FIRST_TOKEN),
                        "first_token");
    assert_string_equal(sg_endpoint_order_name(SG_ENDPOINT_ORDER_CONFIGURED),
                        "configured");
    assert_null(sg_endpoint_order_name(SG_ENDPOINT_ORDER_COUNT_));
    static const char *const names[] = {"none", "fixed", "auto", "auto_fallback"};
    for (int i = 0; i < SG_HEDGE_SOURCE_COUNT_; i++) {
        assert_string_equal(sg_hedge_source_name((sg_hedge_source)i), names[i]);
    }
    assert_null(sg_hedge_source_name(SG_HEDGE_SOURCE_COUNT_));
    assert_int_equal(sg_first_token_min_samples(SG_HEDGE_DEFAULT_QUANTILE), 100);
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_first_token_window(h, 1), SG_EINVAL);
    assert_int_equal(sg_health_set_first_token_window(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_health_set_first_token_window(h, SG_DURATION_MAX + 1), SG_ERANGE);
    assert_int_equal(sg_health_set_first_token_window(h, SG_SEC(1)), 0);
    sg_health_free(h);
    sg_op_options_free(o);
}

/* ---------------------------------------------------------------- feed */

/* First tokens are samples; a first-token timeout and a lost hedge are
 * censored at their clock; a failure says nothing of the first token. */
static void what_feeds_the_sketch(void **state) {
    (void)state;
    sg_health *h = new_health();
    one(h, A, SG_MS(300), first_token_after(SG_MS(120)));
    one(h, A, SG_SEC(2), nothing(SG_OUTCOME_FIRST_ITEM_TIMEOUT, 200));
    one(h, A, SG_MS(40), nothing(SG_OUTCOME_HTTP_ERROR, 503));
    one(h, A, SG_MS(10), nothing(SG_OUTCOME_TRANSPORT_ERROR, 0));
    one(h, A, SG_MS(10), nothing(SG_OUTCOME_OK, 200)); /* an empty stream */
    seen s = look(h);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.e[0].first_tokens, 1);
    assert_int_equal(s.e[0].first_token_censored, 1);
    assert_true(near(s.e[0].first_token_median_ns, SG_MS(120)));
    /* half of what was seen timed out at 2 s: the p95 is later than that */
    assert_int_equal(s.e[0].first_token_p95_ns, -1);

    /* a hedge that lost: cancelled before its first token, censored */
    const char *urls[] = {A, B};
    sg_op_options *o = options(h, urls, 2, SG_MS(200), false);
    sg_op *op = start(o);
    (void)go(op);
    sg_op_plan p;
    assert_int_equal(sg_op_hedge(op, now() + SG_MS(200), &p), 0);
    assert_int_equal(p.endpoint, 1);
    assert_int_equal(sg_op_hedge_won(op, 1), 1);
    sg_op_result won = first_token_after(SG_MS(240));
    won.attempt = 1;
    (void)end(op, now() + SG_MS(250), won);
    sg_op_result lost = nothing(SG_OUTCOME_CANCELLED, 0);
    lost.attempt = 2;
    (void)end(op, now() + SG_MS(250), lost);
    s = look(h);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.e[0].first_tokens, 2);
    assert_int_equal(s.e[1].first_tokens, 0);
    assert_int_equal(s.e[1].first_token_censored, 1);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* --------------------------------------------------------- hedge delay */

/* Below sg_first_token_min_samples(0.95) = 100 observations the fixed
 * delay; from the 100th the endpoint's 95th percentile. */
static void below_the_sample_count_the_fixed_delay_is_used(void **state) {
    (void)state;
    sg_health *h = new_health();
    const char *urls[] = {A};
    sg_op_options *o = options(h, urls, 1, SG_MS(300), true);
    feed(h, A, 99, SG_MS(100), SG_MS(1080)); /* 10 ms apart */

    sg_op *op = start(o);
    sg_op_plan p = go(op);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_int_equal(a->hedge_source, SG_HEDGE_SOURCE_AUTO_FALLBACK);
    assert_int_equal(a->hedge_after_ns, SG_MS(300));
    assert_int_equal(sg_op_hedge_at(op), now() + SG_MS(300));
    assert_non_null(strstr(report(op), "\"hedge_after_ms\":300,\"hedge_after_source\":"
                                       "\"auto_fallback\",\"hedge_samples\":99"));
    (void)p;
    sg_op_free(op);

    feed(h, A, 1, SG_MS(1090), SG_MS(1090)); /* the 100th */
    op = start(o);
    (void)go(op);
    a = sg_op_attempt_at(op, 0);
    assert_int_equal(a->hedge_source, SG_HEDGE_SOURCE_AUTO);
    /* the 95th of 100 first tokens 100 .. 1090 ms, 10 apart: 1040 ms */
    print_message("learned %lld ns\n", (long long)a->hedge_after_ns);
    assert_true(edge_of(a->hedge_after_ns, SG_MS(1040)));
    assert_int_equal(sg_op_hedge_at(op), now() + a->hedge_after_ns);
    const char *r = report(op);
    assert_non_null(strstr(r, "\"hedge_after_source\":\"auto\",\"hedge_samples\":100"));
    assert_non_null(strstr(
        r, "\"hedge_auto\":{\"quantile\":0.95,\"floor_ms\":10,\"min_samples\":100}"));
    sg_op_free(op);

    /* the fixed delay alone: no sketch read, "fixed" */
    assert_int_equal(sg_op_options_set_hedge_auto(o, false), 0);
    op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source, SG_HEDGE_SOURCE_FIXED);
    assert_null(strstr(report(op), "hedge_samples"));
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* The learned delay hedges no more than its share: with first tokens
 * spread evenly over 300 .. 400 ms (a narrow band, where a delay a few ms
 * early hedges many more), at most 5 % of them come after the p95 delay -
 * and it is late by at most a bucket (1/16). */
static void the_learned_delay_hedges_no_more_than_its_share(void **state) {
    (void)state;
    sg_health *h = new_health();
    feed(h, A, 1000, SG_MS(300), SG_MS(400));
    const char *urls[] = {A};
    sg_op_options *o = options(h, urls, 1, SG_MS(900), true);
    sg_op *op = start(o);
    (void)go(op);
    const int64_t d = sg_op_attempt_at(op, 0)->hedge_after_ns;
    int after = 0;
    for (int i = 0; i < 1000; i++) {
        after += SG_MS(300) + SG_MS(100) * i / 999 > d;
    }
    print_message("p95 delay %lld ns: %d of 1000 first tokens after it\n", (long long)d,
                  after);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_true(after <= 50);
    assert_true(d <= SG_MS(395) + SG_MS(395) / 16);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* Another quantile asks for more observations first (0.99: 500). */
static void the_quantile_is_the_callers(void **state) {
    (void)state;
    sg_health *h = new_health();
    const char *urls[] = {A};
    sg_op_options *o = options(h, urls, 1, SG_MS(300), true);
    feed(h, A, 100, SG_MS(100), SG_MS(1090));
    assert_int_equal(sg_op_options_set_hedge_quantile(o, 0.5), 0);
    sg_op *op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_true(edge_of(sg_op_attempt_at(op, 0)->hedge_after_ns, SG_MS(590)));
    sg_op_free(op);
    assert_int_equal(sg_op_options_set_hedge_quantile(o, 0.99), 0);
    op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source,
                     SG_HEDGE_SOURCE_AUTO_FALLBACK);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* A quantile below the floor is raised to it; one beyond the lease is
 * cut to it (a hedge due after the lease never goes). */
static void the_learned_delay_is_clamped_between_floor_and_lease(void **state) {
    (void)state;
    sg_health *h = new_health();
    feed(h, A, 100, SG_MS(1), SG_MS(3));
    feed(h, B, 100, SG_SEC(4), SG_SEC(6));
    const char *a_url[] = {A}, *b_url[] = {B};
    sg_op_options *o = options(h, a_url, 1, SG_MS(300), true);
    sg_op *op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_after_ns, SG_HEDGE_DEFAULT_FLOOR);
    sg_op_free(op);
    assert_int_equal(sg_op_options_set_hedge_floor(o, SG_MS(50)), 0);
    op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_after_ns, SG_MS(50));
    sg_op_free(op);
    sg_op_options_free(o);

    o = options(h, b_url, 1, SG_MS(300), true);
    assert_int_equal(sg_op_options_set_attempt_timeout(o, SG_SEC(2)), 0);
    op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_after_ns, SG_SEC(2));
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* Each attempt's delay is its own endpoint's: the first on A waits A's
 * p95; the hedge on B - the one a second hedge would hedge - B's. */
static void the_delay_follows_the_endpoint_being_hedged(void **state) {
    (void)state;
    sg_health *h = new_health();
    feed(h, A, 100, SG_MS(50), SG_MS(149));
    feed(h, B, 100, SG_MS(400), SG_MS(1390));
    const char *urls[] = {A, B};
    sg_op_options *o = options(h, urls, 2, SG_MS(300), true);
    sg_op *op = start(o);
    (void)go(op);
    const sg_op_attempt *first = sg_op_attempt_at(op, 0);
    assert_true(edge_of(first->hedge_after_ns, SG_MS(144)));
    const int64_t at = sg_op_hedge_at(op);
    assert_int_equal(at, now() + first->hedge_after_ns);
    sg_op_plan p;
    assert_int_equal(sg_op_hedge(op, at - 1, &p), SG_ESTATE); /* not yet */
    assert_int_equal(sg_op_hedge(op, at, &p), 0);
    assert_int_equal(p.endpoint, 1);
    const sg_op_attempt *hedge = sg_op_attempt_at(op, 1);
    assert_int_equal(hedge->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_true(edge_of(hedge->hedge_after_ns, SG_MS(1340)));
    assert_int_equal(sg_op_hedge_at(op), at + hedge->hedge_after_ns);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* 100 observations, but a fifth timed out at 2 s: the p95 is later than
 * anything seen - unknown - and the fixed delay is used, never 2 s or
 * a fast one. */
static void a_quantile_beyond_the_timeouts_falls_back(void **state) {
    (void)state;
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_breaker_failures(h, 0), 0); /* (they would open it) */
    feed(h, A, 80, SG_MS(100), SG_MS(179));
    for (int i = 0; i < 20; i++) {
        one(h, A, SG_SEC(2), nothing(SG_OUTCOME_FIRST_ITEM_TIMEOUT, 200));
    }
    const char *urls[] = {A};
    sg_op_options *o = options(h, urls, 1, SG_MS(300), true);
    sg_op *op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source,
                     SG_HEDGE_SOURCE_AUTO_FALLBACK);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_after_ns, SG_MS(300));
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* What the window no longer holds is not learned: once it has passed
 * without a first token, the fixed delay again. */
static void the_window_forgets(void **state) {
    (void)state;
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_first_token_window(h, SG_SEC(10)), 0);
    feed(h, A, 100, SG_MS(100), SG_MS(199));
    const char *urls[] = {A};
    sg_op_options *o = options(h, urls, 1, SG_MS(300), true);
    sg_op *op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source, SG_HEDGE_SOURCE_AUTO);
    sg_op_free(op);
    sg_manual_clock_advance(&mc, SG_SEC(10));
    op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source,
                     SG_HEDGE_SOURCE_AUTO_FALLBACK);
    assert_int_equal(look(h).e[0].first_tokens, 0);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* Without endpoint health there is nothing to learn from. */
static void without_health_the_fixed_delay(void **state) {
    (void)state;
    const char *urls[] = {A};
    sg_op_options *o = options(NULL, urls, 1, SG_MS(300), true);
    sg_op *op = start(o);
    (void)go(op);
    assert_int_equal(sg_op_attempt_at(op, 0)->hedge_source,
                     SG_HEDGE_SOURCE_AUTO_FALLBACK);
    assert_int_equal(sg_op_hedge_at(op), now() + SG_MS(300));
    sg_op_free(op);
    sg_op_options_free(o);
}

/* --------------------------------------------------------------- order */

static sg_op_options *ordered(sg_health *h) {
    static const char *const urls[] = {A, B, C};
    sg_op_options *o = options(h, urls, 3, 0, false);
    assert_int_equal(sg_op_options_set_endpoint_order(o, SG_ENDPOINT_ORDER_FIRST_TOKEN),
                     0);
    assert_int_equal(sg_op_options_set_backoff(o, SG_MS(1), SG_MS(1)), 0);
    return o;
}

/* The endpoints of @op's attempts after its first fails each time. */
static void assert_endpoints(sg_op *op, const uint32_t *want, int n) {
    for (int i = 0; i < n; i++) {
        sg_op_plan p;
        int rc;
        while ((rc = sg_op_next_attempt(op, now(), &p)) == SG_ESTATE) {
            sg_manual_clock_advance(&mc, SG_MS(1)); /* its backoff */
        }
        assert_int_equal(rc, 0);
        assert_int_equal(p.endpoint, want[i]);
        (void)end(op, now(), nothing(SG_OUTCOME_HTTP_ERROR, 500));
    }
}

/* The first attempt goes to the fastest starter (B); the fallbacks keep
 * their configured order (A, then C). */
static void the_first_attempt_goes_to_the_fastest_starter(void **state) {
    (void)state;
    sg_health *h = new_health();
    feed(h, A, 10, SG_MS(480), SG_MS(520));
    feed(h, B, 10, SG_MS(100), SG_MS(100));
    feed(h, C, 10, SG_MS(280), SG_MS(320));
    sg_op_options *o = ordered(h);
    sg_op *op = start(o);
    static const uint32_t want[] = {1, 0, 2};
    assert_endpoints(op, want, 3);
    static const char chose[] = "\"endpoint_order\":{\"by\":\"first_token\","
                                "\"first\":\"https://b.example.com:443/v1/chat/"
                                "completions\",\"median_ms\":";
    const char *r = strstr(report(op), chose);
    assert_non_null(r);
    assert_true(near(SG_MS(atoll(r + strlen(chose))), SG_MS(100)) ||
                near(SG_MS(atoll(r + strlen(chose)) + 1), SG_MS(100)));
    sg_op_free(op);

    /* configured: as given */
    assert_int_equal(sg_op_options_set_endpoint_order(o, SG_ENDPOINT_ORDER_CONFIGURED),
                     0);
    op = start(o);
    static const uint32_t as_given[] = {0, 1, 2};
    assert_endpoints(op, as_given, 3);
    assert_null(strstr(report(op), "endpoint_order"));
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* Only a free endpoint is first: B cooling, the next fastest (C) goes
 * first, B is skipped; A and B then follow in their configured order. */
static void the_fastest_free_starter(void **state) {
    (void)state;
    sg_health *h = new_health();
    feed(h, A, 10, SG_MS(480), SG_MS(520));
    feed(h, B, 10, SG_MS(80), SG_MS(120));
    feed(h, C, 10, SG_MS(280), SG_MS(320));
    sg_op_result r = nothing(SG_OUTCOME_HTTP_ERROR, 429);
    r.retry_after = "1";
    r.retry_after_len = 1;
    one(h, B, SG_MS(5), r); /* B cools 1 s */
    sg_op_options *o = ordered(h);
    sg_op *op = start(o);
    sg_op_plan p = go(op);
    assert_int_equal(p.endpoint, 2);
    assert_int_equal(sg_op_health_event_count(op), 1);
    assert_int_equal(sg_op_health_event_at(op, 0)->endpoint, 1);
    assert_int_equal(sg_op_health_event_at(op, 0)->action, SG_OP_HEALTH_SKIPPED);
    (void)end(op, now(), nothing(SG_OUTCOME_HTTP_ERROR, 500));
    sg_manual_clock_advance(&mc, SG_SEC(2)); /* B free again */
    static const uint32_t then[] = {0, 1};
    assert_endpoints(op, then, 2);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* An endpoint with too few observations for a median comes after those
 * with one; ties keep the configured order; with none known, as given. */
static void unknown_medians_and_ties(void **state) {
    (void)state;
    sg_health *h = new_health();
    sg_op_options *o = ordered(h);
    sg_op *op = start(o);
    assert_int_equal(go(op).endpoint, 0); /* nothing known */
    sg_op_free(op);
    feed(h, A, 9, SG_MS(10), SG_MS(10)); /* one short of a median */
    feed(h, C, 10, SG_MS(300), SG_MS(300));
    op = start(o);
    assert_int_equal(go(op).endpoint, 2);
    sg_op_free(op);
    feed(h, B, 10, SG_MS(300), SG_MS(300)); /* as fast as C: configured first */
    op = start(o);
    assert_int_equal(go(op).endpoint, 1);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* Ordered and hedged: the hedge goes to the next in the new order - for
 * two endpoints, the slower one. */
static void a_hedge_follows_the_order(void **state) {
    (void)state;
    sg_health *h = new_health();
    feed(h, A, 10, SG_MS(500), SG_MS(500));
    feed(h, B, 10, SG_MS(50), SG_MS(50));
    const char *urls[] = {A, B};
    sg_op_options *o = options(h, urls, 2, SG_MS(200), false);
    assert_int_equal(sg_op_options_set_endpoint_order(o, SG_ENDPOINT_ORDER_FIRST_TOKEN),
                     0);
    sg_op *op = start(o);
    assert_int_equal(go(op).endpoint, 1);
    sg_op_plan p;
    assert_int_equal(sg_op_hedge(op, now() + SG_MS(200), &p), 0);
    assert_int_equal(p.endpoint, 0);
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* Without endpoint health: the configured order. */
static void without_health_as_configured(void **state) {
    (void)state;
    sg_op_options *o = ordered(NULL);
    sg_op *op = start(o);
    static const uint32_t as_given[] = {0, 1, 2};
    assert_endpoints(op, as_given, 3);
    assert_non_null(strstr(report(op), "\"endpoint_order\":{\"by\":\"first_token\","
                                       "\"first\":null,\"median_ms\":null}"));
    sg_op_free(op);
    sg_op_options_free(o);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(the_setters_check_their_values, setup),
        cmocka_unit_test_setup(what_feeds_the_sketch, setup),
        cmocka_unit_test_setup(below_the_sample_count_the_fixed_delay_is_used, setup),
        cmocka_unit_test_setup(the_learned_delay_hedges_no_more_than_its_share, setup),
        cmocka_unit_test_setup(the_quantile_is_the_callers, setup),
        cmocka_unit_test_setup(the_learned_delay_is_clamped_between_floor_and_lease,
                               setup),
        cmocka_unit_test_setup(the_delay_follows_the_endpoint_being_hedged, setup),
        cmocka_unit_test_setup(a_quantile_beyond_the_timeouts_falls_back, setup),
        cmocka_unit_test_setup(the_window_forgets, setup),
        cmocka_unit_test_setup(without_health_the_fixed_delay, setup),
        cmocka_unit_test_setup(the_first_attempt_goes_to_the_fastest_starter, setup),
        cmocka_unit_test_setup(the_fastest_free_starter, setup),
        cmocka_unit_test_setup(unknown_medians_and_ties, setup),
        cmocka_unit_test_setup(a_hedge_follows_the_order, setup),
        cmocka_unit_test_setup(without_health_as_configured, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
