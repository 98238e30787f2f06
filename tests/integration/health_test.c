/*
 * Endpoint health end to end (docs/design.md, "Endpoint health"): real
 * sockets to the real sg-fakemodel, on both transports.  What one
 * operation learns - a 429's Retry-After, a dead endpoint - holds back
 * the operations sharing its multi or connection, and the server's own
 * log proves what was, and was not, sent.  Each scenario is run with the
 * shared object and without it, and the figures printed.
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

static const char *fakemodel;
static fm_server server;

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return h2t_start(&server, fakemodel, NULL) == 0 ? 0 : -1;
}

static int teardown(void **state) {
    h2t_stop(&server);
    curl_global_cleanup();
    return h2t_teardown(state);
}

/* How many requests carrying @tag the server received. */
static int received(const char *tag) {
    char *log = fm_fetch(&server, "/_log?event=received", 0);
    assert_non_null(log);
    int n = fm_count(log, tag);
    free(log);
    return n;
}

static int state_cb(const sg_health_entry *e, void *ud) {
    *(sg_health_state *)ud = e->state;
    return 0;
}

/* The state of @h's only endpoint now. */
static sg_health_state state_of(sg_health *h) {
    sg_health_state st = SG_HEALTH_STATE_COUNT_;
    assert_int_equal(sg_health_foreach(h, sg_clock_now(NULL), state_cb, &st), 0);
    return st;
}

/* ---------------------------------------------------------------- curl */

/* An operation on @m for @path (with the Authorization @auth, or none),
 * added now. */
static sg_curl_op *add(sg_curl_multi *m, const char *path, const sg_op_options *po,
                       const char *auth, run *r, CURL **easy) {
    char url[512];
    snprintf(url, sizeof(url), "%s%s", server.base, path);
    *easy = curl_easy_init();
    curl_easy_setopt(*easy, CURLOPT_URL, url);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, on_done), 0);
    struct curl_slist *h = NULL;
    if (auth != NULL) {
        h = curl_slist_append(NULL, auth);
        assert_int_equal(sg_curl_options_set_headers(co, h), 0);
    }
    sg_curl_op *op = NULL;
    *r = (run){sg_clock_now(NULL), -1, false};
    assert_int_equal(sg_curl_op_new(&op, *easy, po, co, r), 0);
    curl_slist_free_all(h);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    return op;
}

static void drop(sg_curl_op *op, CURL *easy) {
    sg_curl_op_free(op);
    curl_easy_cleanup(easy);
}

/* One operation that asks once and is answered 429 with Retry-After:
 * @retry_after seconds, on @m. */
static void rate_limit(sg_curl_multi *m, const char *tag, int retry_after,
                       const char *auth) {
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"),
                     0); /* what the easy handle sends */
    assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
    char path[256];
    snprintf(path, sizeof(path), "/v1/chat/completions?status=429&retry_after=%d&%s",
             retry_after, tag);
    run r;
    CURL *e;
    sg_curl_op *op = add(m, path, po, auth, &r, &e);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_true(r.done);
    assert_int_equal(sg_op_attempt_at(sg_curl_op_policy(op), 0)->http_status, 429);
    drop(op, e);
}

enum { BURST = 10 };

/* After one operation's 429 (Retry-After: 3), BURST operations with a
 * 1 s budget on the same multi: how many reached the server. */
static int burst_after_429(sg_curl_multi *m, const char *tag, int *refused) {
    char tag0[32], path[256];
    snprintf(tag0, sizeof(tag0), "_t=%s0", tag);
    rate_limit(m, tag0, 3, NULL); /* 3 s: far past the burst's 1 s budget */
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(1)), 0);
    snprintf(path, sizeof(path), "/v1/chat/completions?n=2&_t=%s1", tag);
    run r[BURST];
    CURL *e[BURST];
    sg_curl_op *ops[BURST];
    for (int i = 0; i < BURST; i++) {
        ops[i] = add(m, path, po, NULL, &r[i], &e[i]);
    }
    assert_int_equal(sg_curl_multi_run(m), 0);
    *refused = 0;
    for (int i = 0; i < BURST; i++) {
        assert_true(r[i].done);
        const sg_op *op = sg_curl_op_policy(ops[i]);
        if (sg_op_final_reason(op) == SG_OP_REASON_RATE_LIMITED) {
            (*refused)++;
            assert_int_equal(sg_op_outcome(op), SG_OUTCOME_REFUSED);
            assert_int_equal(sg_op_attempt_count(op), 0);
            /* it frees 3 s after the 429: more than its budget later */
            const int64_t in = sg_op_endpoint_free_at(op) - sg_op_finished_at(op);
            assert_true(in > SG_SEC(1) && in <= SG_SEC(3));
        } else {
            assert_int_equal(sg_op_outcome(op), SG_OUTCOME_OK);
        }
        drop(ops[i], e[i]);
    }
    char t1[32];
    snprintf(t1, sizeof(t1), "_t=%s1", tag);
    return received(t1);
}

static void a_429_holds_back_every_operation_on_the_multi(void **state) {
    (void)state;
    sg_curl_multi *m;
    int refused = 0;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0); /* its own health */
    const int with = burst_after_429(m, "hw", &refused);
    assert_int_equal(with, 0); /* nothing sent while it cooled */
    assert_int_equal(refused, BURST);
    /* one with the budget to wait: it waits, then goes */
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(5)), 0);
    run r;
    CURL *e;
    rate_limit(m, "_t=hw2", 1, NULL);
    sg_curl_op *op = add(m, "/v1/chat/completions?n=2&_t=hw3", po, NULL, &r, &e);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_curl_op_outcome(op), SG_OUTCOME_OK);
    const sg_op *p = sg_curl_op_policy(op);
    const sg_op_health_event *ev = sg_op_health_event_at(p, 0);
    assert_non_null(ev);
    assert_int_equal(ev->action, SG_OP_HEALTH_WAITED);
    assert_true(r.first_item >= ev->free_at); /* it went once the endpoint freed */
    char report[8192];
    assert_int_equal(sg_curl_op_report(op, report, sizeof(report), NULL), 0);
    assert_non_null(strstr(report, "\"action\":\"waited\",\"reason\":\"rate_limited\""));
    drop(op, e);
    assert_int_equal(received("_t=hw3"), 1);
    sg_curl_multi_free(m);

    /* the same without the shared object: every one of them is sent */
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_set_health(m, NULL), 0);
    const int without = burst_after_429(m, "hn", &refused);
    sg_curl_multi_free(m);
    assert_int_equal(without, BURST);
    assert_int_equal(refused, 0);
    print_message("%d operations while a 429's Retry-After runs: %d sent upstream with "
                  "shared health, %d without\n",
                  BURST, with, without);
}

/* Each credential is its own endpoint: one key's 429 holds back that key
 * only. */
static void each_credential_cools_on_its_own(void **state) {
    (void)state;
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    rate_limit(m, "_t=ck0", 3, "Authorization: Bearer sk-one");
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(1)), 0);
    run r1, r2;
    CURL *e1, *e2;
    sg_curl_op *other = add(m, "/v1/chat/completions?n=2&_t=ck1", po,
                            "Authorization: Bearer sk-two", &r1, &e1);
    sg_curl_op *same = add(m, "/v1/chat/completions?n=2&_t=ck2", po,
                           "authorization: Bearer sk-one", &r2, &e2);
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(sg_curl_op_outcome(other), SG_OUTCOME_OK);
    assert_int_equal(sg_curl_op_outcome(same), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_final_reason(sg_curl_op_policy(same)),
                     SG_OP_REASON_RATE_LIMITED);
    assert_int_equal(received("_t=ck1"), 1);
    assert_int_equal(received("_t=ck2"), 0);
    drop(other, e1);
    drop(same, e2);
    sg_curl_multi_free(m);
}

enum { SERIAL = 8 };

/* SERIAL operations one after the other, each with a dead first endpoint
 * (it never answers: a first-item timeout) and a live fallback: the time
 * to first token of each, in *@ttft; how many began on the fallback, in
 * *@direct; how many requests the dead one got. */
static int dead_endpoint(sg_health *h, const char *tag, int64_t *ttft, int *direct) {
    char dead[256], live[256], dtag[32];
    snprintf(dead, sizeof(dead), "%s/v1/chat/completions?hang=1&_t=%sd", server.base,
             tag);
    snprintf(live, sizeof(live), "%s/stream?n=3&_t=%sl", server.base, tag);
    snprintf(dtag, sizeof(dtag), "_t=%sd", tag);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_set_health(m, h), 0);
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(po, SG_MS(300)), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(5)), 0);
    *direct = 0;
    for (int i = 0; i < SERIAL; i++) {
        SG_AUTO_CURL_OPTIONS(co);
        sg_test_curl_done(co);
        assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
        assert_int_equal(sg_curl_options_set_on_done(co, on_done), 0);
        assert_int_equal(sg_curl_options_add_endpoint(co, dead, NULL, NULL, 0), 0);
        assert_int_equal(sg_curl_options_add_endpoint(co, live, NULL, NULL, 0), 0);
        CURL *e = curl_easy_init();
        sg_curl_op *op = NULL;
        run r = {sg_clock_now(NULL), -1, false};
        assert_int_equal(sg_curl_op_new(&op, e, po, co, &r), 0);
        assert_int_equal(sg_curl_multi_add(m, op), 0);
        assert_int_equal(sg_curl_multi_run(m), 0);
        assert_int_equal(sg_curl_op_outcome(op), SG_OUTCOME_OK);
        ttft[i] = r.first_item - r.start;
        *direct += sg_op_attempt_at(sg_curl_op_policy(op), 0)->endpoint == 1;
        drop(op, e);
    }
    sg_curl_multi_free(m);
    return received(dtag);
}

static int cmp64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void an_open_breaker_sends_the_next_operations_to_the_fallback(void **state) {
    (void)state;
    sg_health *h;
    assert_int_equal(sg_health_new(&h), 0);
    assert_int_equal(sg_health_set_breaker_failures(h, 3), 0);
    assert_int_equal(sg_health_set_breaker_cooldown(h, SG_SEC(30)), 0);
    int64_t with[SERIAL], without[SERIAL];
    int direct_with, direct_without;
    const int dead_with = dead_endpoint(h, "bw", with, &direct_with);
    const int dead_without = dead_endpoint(NULL, "bn", without, &direct_without);
    sg_health_free(h);
    /* three first-token timeouts open it; after them the dead endpoint
     * is never asked again, and each operation starts on the fallback */
    assert_int_equal(dead_with, 3);
    assert_int_equal(direct_with, SERIAL - 3);
    assert_int_equal(dead_without, SERIAL);
    assert_int_equal(direct_without, 0);
    qsort(with, SERIAL, sizeof(with[0]), cmp64);
    qsort(without, SERIAL, sizeof(without[0]), cmp64);
    print_message(
        "dead endpoint, %d operations: asked %d times with the breaker, %d "
        "without; time to first token p50 %lld ms vs %lld ms, max %lld vs %lld\n",
        SERIAL, dead_with, dead_without, (long long)(with[SERIAL / 2] / SG_MS(1)),
        (long long)(without[SERIAL / 2] / SG_MS(1)),
        (long long)(with[SERIAL - 1] / SG_MS(1)),
        (long long)(without[SERIAL - 1] / SG_MS(1)));
    assert_true(with[SERIAL / 2] < without[SERIAL / 2]);
}

/* A half-open breaker's probe that streams (10 tokens 200 ms apart)
 * answers at its first token: the operation held back behind it goes
 * then, not when the probe's stream ends 2 s later - with a long answer
 * (or a slow client reading it), every other request would wait minutes. */
static void the_probe_answers_at_its_first_token(void **state) {
    (void)state;
    sg_health *h;
    assert_int_equal(sg_health_new(&h), 0);
    assert_int_equal(sg_health_set_breaker_failures(h, 1), 0);
    assert_int_equal(sg_health_set_breaker_cooldown(h, SG_SEC(1)), 0);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_set_health(m, h), 0);
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(10)), 0);
    run r0, r[2];
    CURL *e0, *e[2];
    sg_curl_op *opener = add(m, "/v1/chat/completions?status=500&_t=pa0", po, NULL, &r0,
                             &e0); /* a 500 opens it for 1 s */
    assert_int_equal(sg_curl_multi_run(m), 0);
    assert_int_equal(state_of(h), SG_HEALTH_OPEN);
    drop(opener, e0);
    sg_curl_op *ops[2];
    ops[0] = add(m, "/v1/chat/completions?n=10&gap=200&_t=pa1", po, NULL, &r[0], &e[0]);
    ops[1] = add(m, "/v1/chat/completions?n=10&gap=200&_t=pa2", po, NULL, &r[1], &e[1]);
    assert_int_equal(sg_curl_multi_run(m), 0);
    const sg_op *a = sg_curl_op_policy(ops[0]), *b = sg_curl_op_policy(ops[1]);
    assert_int_equal(sg_op_outcome(a), SG_OUTCOME_OK);
    assert_int_equal(sg_op_outcome(b), SG_OUTCOME_OK);
    if (sg_op_attempt_at(b, 0)->started_at < sg_op_attempt_at(a, 0)->started_at) {
        const sg_op *t = a; /* a: the probe, the first to go */
        a = b;
        b = t;
    }
    const int64_t b_went = sg_op_attempt_at(b, 0)->started_at;
    const int64_t a_went = sg_op_attempt_at(a, 0)->started_at;
    print_message("the probe went, its stream ended %lld ms later; the one held back "
                  "went %lld ms after the probe\n",
                  (long long)((sg_op_finished_at(a) - a_went) / SG_MS(1)),
                  (long long)((b_went - a_went) / SG_MS(1)));
    assert_true(b_went < sg_op_finished_at(a) - SG_SEC(1));
    assert_int_equal(state_of(h), SG_HEALTH_CLOSED);
    drop(ops[0], e[0]);
    drop(ops[1], e[1]);
    sg_curl_multi_free(m);
    sg_health_free(h);
}

/* ------------------------------------------------------------------ h2 */

static void h2_done(sg_h2_op *op, void *ud) {
    (void)op;
    ((run *)ud)->done = true;
}

static sg_h2_op *h2_add(sg_h2_conn *c, const char *path, const sg_op_options *po,
                        run *r) {
    sg_test_h2_req t = {.method = "GET", .path = path};
    sg_test_h2_cbs cbs = {.on_done = h2_done};
    sg_stream_config f = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    sg_h2_op *op = NULL;
    *r = (run){sg_clock_now(NULL), -1, false};
    assert_int_equal(sg_test_h2_start(c, &t, &f, po, &cbs, r, &op), 0);
    return op;
}

/* The three streams of an HTTP/2 case, run: the first went; @refused
 * ended at once (@why) with nothing sent (no request tagged @rtag); @waits
 * waited and went once (@wtag).  Then all of them and @c are freed. */
static void h2_expect(sg_h2_conn *c, sg_h2_op *first, sg_h2_op *refused, sg_h2_op *waits,
                      sg_op_reason why, const char *rtag, const char *wtag) {
    assert_int_equal(sg_h2_op_outcome(refused), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_final_reason(sg_h2_op_policy(refused)), why);
    assert_int_equal(sg_h2_op_outcome(waits), SG_OUTCOME_OK);
    assert_int_equal(sg_op_health_event_at(sg_h2_op_policy(waits), 0)->action,
                     SG_OP_HEALTH_WAITED);
    assert_int_equal(received(rtag), 0);
    assert_int_equal(received(wtag), 1);
    sg_h2_op_free(first);
    sg_h2_op_free(refused);
    sg_h2_op_free(waits);
    sg_h2_conn_free(c);
}

static void a_429_holds_back_the_next_stream_on_the_connection(void **state) {
    (void)state;
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c;
    assert_int_equal(h2t_connect(&server, false, &c, err), 0); /* its own health */
    SG_AUTO_OPTIONS(once);
    assert_int_equal(sg_op_options_set_max_attempts(once, 1), 0);
    run r0, r1, r2;
    sg_h2_op *first =
        h2_add(c, "/v1/chat/completions?status=429&retry_after=2&_t=h2a", once, &r0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_http_status(first), 429);
    SG_AUTO_OPTIONS(tight);
    assert_int_equal(sg_op_options_set_budget(tight, SG_SEC(1)), 0);
    sg_h2_op *refused = h2_add(c, "/v1/chat/completions?n=2&_t=h2b", tight, &r1);
    SG_AUTO_OPTIONS(patient);
    assert_int_equal(sg_op_options_set_budget(patient, SG_SEC(5)), 0);
    sg_h2_op *waits = h2_add(c, "/v1/chat/completions?n=2&_t=h2c", patient, &r2);
    assert_int_equal(sg_h2_conn_run(c), 0);
    h2_expect(c, first, refused, waits, SG_OP_REASON_RATE_LIMITED, "_t=h2b", "_t=h2c");
}

/* The connection's health with an in-flight limit of one: a stream
 * beyond it waits for the one in flight, or is refused at once when its
 * budget cannot wait - nothing sent. */
static void beyond_max_inflight_a_stream_waits_or_is_refused(void **state) {
    (void)state;
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c;
    assert_int_equal(h2t_connect(&server, false, &c, err), 0);
    sg_health *h;
    assert_int_equal(sg_health_new(&h), 0);
    assert_int_equal(sg_health_set_max_inflight(h, 1), 0);
    assert_int_equal(sg_h2_conn_set_health(c, h), 0);
    SG_AUTO_OPTIONS(po);
    SG_AUTO_OPTIONS(tight);
    assert_int_equal(sg_op_options_set_budget(tight, SG_MS(15)), 0);
    run r0, r1, r2;
    sg_h2_op *slow =
        h2_add(c, "/v1/chat/completions?n=2&first_delay=400&_t=h2d", po, &r0);
    sg_h2_op *refused = h2_add(c, "/v1/chat/completions?n=2&_t=h2e", tight, &r1);
    sg_h2_op *waits = h2_add(c, "/v1/chat/completions?n=2&_t=h2f", po, &r2);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(slow), SG_OUTCOME_OK);
    assert_true(sg_clock_now(NULL) - r2.start >= SG_MS(350)); /* after the slow one */
    h2_expect(c, slow, refused, waits, SG_OP_REASON_ENDPOINT_BUSY, "_t=h2e", "_t=h2f");
    sg_health_free(h);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SG_FAKEMODEL\n", argv[0]);
        return 2;
    }
    fakemodel = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_429_holds_back_every_operation_on_the_multi),
        cmocka_unit_test(each_credential_cools_on_its_own),
        cmocka_unit_test(an_open_breaker_sends_the_next_operations_to_the_fallback),
        cmocka_unit_test(the_probe_answers_at_its_first_token),
        cmocka_unit_test(a_429_holds_back_the_next_stream_on_the_connection),
        cmocka_unit_test(beyond_max_inflight_a_stream_waits_or_is_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
