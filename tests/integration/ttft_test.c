/*
 * First-token-aware endpoints end to end (docs/design.md, "First-token
 * sketch"): two real sg-fakemodel instances on loopback, one that starts
 * its streams after 20 ms and one after 150 ms (first_delay).  What their
 * first tokens teach the endpoint health their operations share: the
 * learned hedge delay follows the endpoint being hedged, and goes where
 * the fixed one would not yet; the first attempt goes to the faster
 * starter.  Both transports: the libcurl one (both endpoints on one
 * multi) and streamguard's HTTP/2 one (a connection to each, one health
 * between them: an HTTP/2 connection serves one origin).
 */
#include "h2_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <streamguard/curl.h>
#include <streamguard/health.h>

#include "../sg_auto.h"
#include "op_run.h"

#define FAST_MS 20
#define SLOW_MS 150
#define WARM 12 /* operations per endpoint: more than the median's 10 */
#define FALLBACK_MS 1000

static const char *fakemodel;
static fm_server fast, slow;

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return h2t_start(&fast, fakemodel, NULL) == 0 &&
                   h2t_start(&slow, fakemodel, NULL) == 0
               ? 0
               : -1;
}

static int teardown(void **state) {
    h2t_stop(&fast);
    h2t_stop(&slow);
    curl_global_cleanup();
    return h2t_teardown(state);
}

/* The path of a stream that starts after the server's delay; @extra
 * more knobs ("" none). */
static void path_of(char *out, size_t cap, const fm_server *s, const char *extra,
                    const char *tag) {
    snprintf(out, cap, "/v1/chat/completions?n=2&gap=1&first_delay=%d%s&_t=%s",
             s == &fast ? FAST_MS : SLOW_MS, extra, tag);
}

/* Options learning the hedge delay at the median (10 observations
 * suffice), falling back to FALLBACK_MS; hedging to @hedges. */
static void learned_options(sg_op_options *po, sg_health *h) {
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(10)), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 3), 0);
    assert_int_equal(sg_op_options_set_health(po, h), 0);
    assert_int_equal(sg_op_options_set_hedging(po, SG_MS(FALLBACK_MS), 1), 0);
    assert_int_equal(sg_op_options_set_hedge_auto(po, true), 0);
    assert_int_equal(sg_op_options_set_hedge_quantile(po, 0.5), 0);
}

/* An endpoint's entry in @h: its sketch's first tokens and median. */
typedef struct sketch {
    const char *port;
    uint32_t first_tokens;
    int64_t median;
} sketch;

static int find(const sg_health_entry *e, void *ud) {
    sketch *k = ud;
    if (strstr(e->endpoint, k->port) != NULL) {
        k->first_tokens = e->first_tokens;
        k->median = e->first_token_median_ns;
    }
    return 0;
}

static sketch sketch_of(sg_health *h, const fm_server *s) {
    char port[16];
    snprintf(port, sizeof(port), ":%d/", s->port);
    sketch k = {port, 0, -1};
    assert_int_equal(sg_health_foreach(h, sg_clock_now(NULL), find, &k), 0);
    k.port = NULL;
    return k;
}

/* ---------------------------------------------------------------- curl */

/* An operation on @m to the servers @eps (@n), each at its path with
 * @extra knobs, added now. */
static sg_curl_op *add(sg_curl_multi *m, const fm_server *const *eps, int n,
                       const char *extra, const char *tag, const sg_op_options *po,
                       run *r, CURL **easy) {
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, on_done), 0);
    for (int i = 0; i < n; i++) {
        char path[256], url[320];
        path_of(path, sizeof(path), eps[i], extra, tag);
        snprintf(url, sizeof(url), "%s%s", eps[i]->base, path);
        assert_int_equal(sg_curl_options_add_endpoint(co, url, NULL, NULL, 0), 0);
    }
    *easy = curl_easy_init();
    sg_curl_op *op = NULL;
    *r = (run){sg_clock_now(NULL), -1, false};
    assert_int_equal(sg_curl_op_new(&op, *easy, po, co, r), 0);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    return op;
}

/* WARM operations to @s alone on @m, all at once: each ends ok. */
static void warm(sg_curl_multi *m, sg_health *h, const fm_server *s) {
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_health(po, h), 0);
    run r[WARM];
    CURL *e[WARM];
    sg_curl_op *ops[WARM];
    const fm_server *const eps[] = {s};
    for (int i = 0; i < WARM; i++) {
        ops[i] = add(m, eps, 1, "", "tw", po, &r[i], &e[i]);
    }
    assert_int_equal(sg_curl_multi_run(m), 0);
    for (int i = 0; i < WARM; i++) {
        assert_int_equal(sg_curl_op_outcome(ops[i]), SG_OUTCOME_OK);
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(e[i]);
    }
}

/* The hedge delay of an operation's first attempt on @s alone, and where
 * it came from; run to its end. */
static const sg_op_attempt *first_delay(sg_curl_multi *m, sg_health *h,
                                        const fm_server *s, sg_curl_op **op,
                                        CURL **easy) {
    SG_AUTO_OPTIONS(po);
    learned_options(po, h);
    run r;
    const fm_server *const eps[] = {s};
    *op = add(m, eps, 1, "", "td", po, &r, easy);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_curl_op_outcome(*op), SG_OUTCOME_OK);
    return sg_op_attempt_at(sg_curl_op_policy(*op), 0);
}

/* A managed multi sharing a new endpoint health, *@h. */
static sg_curl_multi *multi_with_health(sg_health **h) {
    assert_int_equal(sg_health_new(h), 0);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_set_health(m, *h), 0);
    return m;
}

static void curl_the_hedge_delay_follows_the_endpoint(void **state) {
    (void)state;
    sg_health *h;
    sg_curl_multi *m = multi_with_health(&h);
    /* nothing learned yet: the fixed delay, and the report says why */
    sg_curl_op *op;
    CURL *e;
    const sg_op_attempt *a = first_delay(m, h, &fast, &op, &e);
    assert_int_equal(a->hedge_source, SG_HEDGE_SOURCE_AUTO_FALLBACK);
    assert_int_equal(a->hedge_after_ns, SG_MS(FALLBACK_MS));
    sg_curl_op_free(op);
    curl_easy_cleanup(e);

    warm(m, h, &fast);
    warm(m, h, &slow);
    const sketch kf = sketch_of(h, &fast), ks = sketch_of(h, &slow);
    assert_true(kf.first_tokens >= WARM && ks.first_tokens >= WARM);
    const sg_op_attempt *af = first_delay(m, h, &fast, &op, &e);
    const int64_t df = af->hedge_after_ns;
    assert_int_equal(af->hedge_source, SG_HEDGE_SOURCE_AUTO);
    char report[8192];
    assert_int_equal(sg_curl_op_report(op, report, sizeof(report), NULL), 0);
    assert_non_null(strstr(report, "\"hedge_after_source\":\"auto\""));
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    const sg_op_attempt *as = first_delay(m, h, &slow, &op, &e);
    const int64_t ds = as->hedge_after_ns;
    assert_int_equal(as->hedge_source, SG_HEDGE_SOURCE_AUTO);
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    print_message("curl: learned hedge delay %lld ms on the fast endpoint (median %lld), "
                  "%lld ms on the slow one (median %lld)\n",
                  (long long)(df / SG_MS(1)), (long long)(kf.median / SG_MS(1)),
                  (long long)(ds / SG_MS(1)), (long long)(ks.median / SG_MS(1)));
    /* each its own endpoint's median: the server's delay and loopback's
     * cost (the bucket within 1/32 below) */
    assert_true(df >= SG_MS(FAST_MS) * 31 / 32 && ds >= SG_MS(SLOW_MS) * 31 / 32);
    assert_true(ds - df >= SG_MS(SLOW_MS - FAST_MS) / 2);
    assert_true(df < SG_MS(FALLBACK_MS) && ds < SG_MS(FALLBACK_MS));

    /* in action: a slow first attempt (its stream 3 s away) is hedged
     * after the slow endpoint's learned delay, not the fixed second, and
     * the hedge (the second request of its counter: 150 ms) wins */
    SG_AUTO_OPTIONS(po);
    learned_options(po, h);
    run r;
    const fm_server *const eps[] = {&slow};
    op = add(m, eps, 1, "&tail_first=1&tail_delay=3000&fail_key=ttft_curl_tail", "tt", po,
             &r, &e);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_curl_op_outcome(op), SG_OUTCOME_OK);
    const sg_op *p = sg_curl_op_policy(op);
    assert_int_equal(sg_op_attempt_count(p), 2);
    assert_int_equal(sg_op_attempt_at(p, 0)->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_true(sg_op_attempt_at(p, 1)->hedge);
    const int64_t ttft = r.first_item - r.start;
    print_message("curl: hedged after %lld ms, first token at %lld ms (fixed: %d ms)\n",
                  (long long)(sg_op_attempt_at(p, 1)->started_at - r.start) / SG_MS(1),
                  (long long)(ttft / SG_MS(1)), FALLBACK_MS);
    assert_true(ttft < SG_MS(FALLBACK_MS));
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    sg_curl_multi_free(m);
    sg_health_free(h);
}

/* Configured slow first: with the first-token order the first attempt
 * goes to the faster starter; as configured (or with nothing learned)
 * to the slow one. */
static void curl_ordering_picks_the_faster_starter(void **state) {
    (void)state;
    sg_health *h;
    sg_curl_multi *m = multi_with_health(&h);
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_endpoint_order(po, SG_ENDPOINT_ORDER_FIRST_TOKEN),
                     0);
    const fm_server *const eps[] = {&slow, &fast};
    run r;
    CURL *e;
    sg_curl_op *op = add(m, eps, 2, "", "to0", po, &r, &e);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_op_attempt_at(sg_curl_op_policy(op), 0)->endpoint, 0);
    sg_curl_op_free(op);
    curl_easy_cleanup(e);

    warm(m, h, &fast);
    warm(m, h, &slow);
    op = add(m, eps, 2, "", "to1", po, &r, &e);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_curl_op_outcome(op), SG_OUTCOME_OK);
    assert_int_equal(sg_op_attempt_at(sg_curl_op_policy(op), 0)->endpoint, 1);
    char report[8192], want[128];
    assert_int_equal(sg_curl_op_report(op, report, sizeof(report), NULL), 0);
    snprintf(want, sizeof(want),
             "\"endpoint_order\":{\"by\":\"first_token\",\"first\":"
             "\"http://127.0.0.1:%d/v1/chat/completions\"",
             fast.port);
    assert_non_null(strstr(report, want));
    print_message("curl: ordered by first token, the first attempt went to the fast "
                  "endpoint: first token after %lld ms\n",
                  (long long)((r.first_item - r.start) / SG_MS(1)));
    assert_true(r.first_item - r.start < SG_MS(SLOW_MS));
    sg_curl_op_free(op);
    curl_easy_cleanup(e);

    assert_int_equal(sg_op_options_set_endpoint_order(po, SG_ENDPOINT_ORDER_CONFIGURED),
                     0);
    op = add(m, eps, 2, "", "to2", po, &r, &e);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_op_attempt_at(sg_curl_op_policy(op), 0)->endpoint, 0);
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    sg_curl_multi_free(m);
    sg_health_free(h);
}

/* ------------------------------------------------------------------ h2 */

static int h2_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    run_item(ud);
    return 0;
}

static void h2_done(sg_h2_op *op, void *ud) {
    (void)op;
    ((run *)ud)->done = true;
}

static sg_h2_op *h2_add(sg_h2_conn *c, const fm_server *s, const char *extra,
                        const char *tag, const sg_op_options *po, run *r) {
    char path[256];
    path_of(path, sizeof(path), s, extra, tag);
    sg_test_h2_req t = {.method = "GET", .path = path};
    sg_test_h2_cbs cbs = {.on_item = h2_item, .on_done = h2_done};
    sg_stream_config f = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    sg_h2_op *op = NULL;
    *r = (run){sg_clock_now(NULL), -1, false};
    assert_int_equal(sg_test_h2_start(c, &t, &f, po, &cbs, r, &op), 0);
    return op;
}

static sg_h2_conn *h2_conn(const fm_server *s, sg_health *h) {
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c;
    assert_int_equal(h2t_connect(s, false, &c, err), 0);
    assert_int_equal(sg_h2_conn_set_health(c, h), 0);
    return c;
}

static void h2_warm(sg_h2_conn *c, const fm_server *s) {
    run r[WARM];
    sg_h2_op *ops[WARM];
    SG_AUTO_OPTIONS(po);
    for (int i = 0; i < WARM; i++) {
        ops[i] = h2_add(c, s, "", "tw2", po, &r[i]);
    }
    assert_int_equal(sg_h2_conn_run(c), 0);
    for (int i = 0; i < WARM; i++) {
        assert_int_equal(sg_h2_op_outcome(ops[i]), SG_OUTCOME_OK);
        sg_h2_op_free(ops[i]);
    }
}

/* One health for both connections: each stream's hedge waits its own
 * endpoint's median; a slow first attempt is hedged (a new stream on its
 * connection) after the learned delay. */
static void h2_the_hedge_delay_follows_the_endpoint(void **state) {
    (void)state;
    sg_health *h;
    assert_int_equal(sg_health_new(&h), 0);
    sg_h2_conn *cf = h2_conn(&fast, h), *cs = h2_conn(&slow, h);
    h2_warm(cf, &fast);
    h2_warm(cs, &slow);
    SG_AUTO_OPTIONS(po);
    learned_options(po, NULL); /* the connection's health */
    run rf, rs;
    sg_h2_op *of = h2_add(cf, &fast, "", "th2f", po, &rf);
    sg_h2_op *os = h2_add(cs, &slow, "", "th2s", po, &rs);
    assert_int_equal(sg_h2_conn_run(cf), 0);
    assert_int_equal(sg_h2_conn_run(cs), 0);
    const sg_op_attempt *af = sg_op_attempt_at(sg_h2_op_policy(of), 0);
    const sg_op_attempt *as = sg_op_attempt_at(sg_h2_op_policy(os), 0);
    print_message("h2: learned hedge delay %lld ms on the fast endpoint, %lld ms on the "
                  "slow one\n",
                  (long long)(af->hedge_after_ns / SG_MS(1)),
                  (long long)(as->hedge_after_ns / SG_MS(1)));
    assert_int_equal(af->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_int_equal(as->hedge_source, SG_HEDGE_SOURCE_AUTO);
    assert_true(af->hedge_after_ns >= SG_MS(FAST_MS) * 31 / 32);
    assert_true(as->hedge_after_ns - af->hedge_after_ns >= SG_MS(SLOW_MS - FAST_MS) / 2);
    sg_h2_op_free(of);
    sg_h2_op_free(os);

    run r;
    sg_h2_op *op = h2_add(
        cs, &slow, "&tail_first=1&tail_delay=3000&fail_key=ttft_h2_tail", "th2t", po, &r);
    assert_int_equal(sg_h2_conn_run(cs), 0);
    assert_int_equal(sg_h2_op_outcome(op), SG_OUTCOME_OK);
    const sg_op *p = sg_h2_op_policy(op);
    assert_int_equal(sg_op_attempt_count(p), 2);
    assert_true(sg_op_attempt_at(p, 1)->hedge);
    print_message("h2: hedged after %lld ms, first token at %lld ms (fixed: %d ms)\n",
                  (long long)(sg_op_attempt_at(p, 1)->started_at - r.start) / SG_MS(1),
                  (long long)((r.first_item - r.start) / SG_MS(1)), FALLBACK_MS);
    assert_true(r.first_item - r.start < SG_MS(FALLBACK_MS));
    sg_h2_op_free(op);
    sg_h2_conn_free(cf);
    sg_h2_conn_free(cs);
    sg_health_free(h);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SG_FAKEMODEL\n", argv[0]);
        return 2;
    }
    fakemodel = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curl_the_hedge_delay_follows_the_endpoint),
        cmocka_unit_test(curl_ordering_picks_the_faster_starter),
        cmocka_unit_test(h2_the_hedge_delay_follows_the_endpoint),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
