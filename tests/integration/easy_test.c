/*
 * The easy handle against the real fault server, over loopback: a clean
 * stream under a profile, and the faults it exists for - a first token
 * that comes too late, a stall after tokens (partial, discarded), a 429
 * twice and then the stream (one idempotency key on every attempt), a
 * provider's in-band error before and after the first token - each read
 * through the outcome, sg_easy_error(), the records and the report, and
 * checked against what the server saw.  Then TLS (verified, with the
 * server's CA and without it), an error response's body, a cancel from the
 * item callback, and calls the handle refuses from inside its callbacks.
 *
 * Usage: easy_test PATH/TO/sg-fakemodel
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "harness.h"

#include <streamguard/easy.h>

static const char *fakemodel_path;
static fm_server server;

/* What the callbacks saw. */
typedef struct seen {
    int items;
    int tokens; /* SG_ITEM_TOKEN or SG_ITEM_END_TOKEN */
    int meta;
    int discards;
    uint32_t discard_attempt;
    sg_outcome discard_outcome;
    int cancel_after; /* on_item returns 1 at this item; 0: never */
    int first_kind;   /* the first item's */
    char first[512];  /* the first item's data */
    sg_easy *self;    /* when set, on_item calls back into it */
    int inner_set;    /* what a setter said from inside on_item */
    int inner_perform;
} seen;

static int on_item(const sg_item *item, void *user_data) {
    seen *s = user_data;
    s->items++;
    if (item->kind == SG_ITEM_TOKEN || item->kind == SG_ITEM_END_TOKEN) {
        s->tokens++;
    } else if (item->kind == SG_ITEM_META) {
        s->meta++;
    }
    if (s->items == 1) {
        s->first_kind = item->kind;
        snprintf(s->first, sizeof(s->first), "%.*s", (int)item->data_len, item->data);
    }
    if (s->self != NULL) {
        s->inner_set = sg_easy_set_idle_timeout(s->self, SG_SEC(1));
        s->inner_perform = sg_easy_perform(s->self);
    }
    return s->cancel_after > 0 && s->items >= s->cancel_after;
}

static void on_discard(uint32_t attempt, sg_outcome outcome, void *user_data) {
    seen *s = user_data;
    s->discards++;
    s->discard_attempt = attempt;
    s->discard_outcome = outcome;
}

/* A handle on base+path (TLS base when @tls) with @profile, a POST body,
 * the callbacks on @s. */
static sg_easy *easy_on(const char *path, const char *profile, bool tls, seen *s) {
    char url[512];
    snprintf(url, sizeof(url), "%s%s", tls ? server.tls_base : server.base, path);
    sg_easy *e = NULL;
    assert_int_equal(sg_easy_new(&e), 0);
    assert_int_equal(sg_easy_set_url(e, url), 0);
    assert_int_equal(sg_easy_set_profile(e, profile), 0);
    assert_int_equal(sg_easy_set_body(e, "{\"stream\":true}", 15), 0);
    assert_int_equal(sg_easy_add_header(e, "Content-Type: application/json"), 0);
    assert_int_equal(sg_easy_set_budget(e, SG_SEC(10)), 0);
    assert_int_equal(sg_easy_set_on_item(e, on_item, s), 0);
    assert_int_equal(sg_easy_set_on_discard(e, on_discard, s), 0);
    return e;
}

/* The report, into a buffer of the size it asks for (freed by the caller). */
static char *report_of(const sg_easy *e) {
    size_t needed = 0;
    assert_int_equal(sg_easy_report(e, NULL, 0, &needed), SG_ENOBUFS);
    char *buf = malloc(needed);
    assert_non_null(buf);
    assert_int_equal(sg_easy_report(e, buf, needed, NULL), 0);
    assert_int_equal(strlen(buf) + 1, needed);
    return buf;
}

static void assert_has(const char *hay, const char *needle) {
    if (strstr(hay, needle) == NULL) {
        fail_msg("'%s' not in: %s", needle, hay);
    }
}

/* Requests the server received with idempotency key @key. */
static int received_with_key(const char *key) {
    char path[256];
    snprintf(path, sizeof(path), "/_log?event=received&key=%s", key);
    char *log = fm_fetch(&server, path, 0);
    assert_non_null(log);
    int n = fm_count(log, "\"event\":\"received\"");
    char want[192];
    snprintf(want, sizeof(want), "\"idempotency_key\":\"%s\"", key);
    assert_int_equal(fm_count(log, want), n); /* the same key on every one */
    free(log);
    return n;
}

static void an_ok_stream_delivers_its_tokens_and_reports_ok(void **state) {
    (void)state;
    seen s = {0};
    sg_easy *e =
        easy_on("/v1/chat/completions?n=5&gap=10&role_chunk=1", "openai", false, &s);
    assert_int_equal(sg_easy_set_idempotency_key(e, "easy-ok"), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_OK);
    assert_string_equal(sg_easy_error(e), "");
    assert_null(sg_easy_error_body(e, NULL));
    /* the role chunk is metadata, held and delivered before the first token */
    assert_int_equal(s.items, 6);
    assert_int_equal(s.meta, 1);
    assert_int_equal(s.tokens, 5);
    assert_int_equal(s.discards, 0);
    assert_int_equal(s.first_kind, SG_ITEM_META);
    assert_has(s.first, "\"role\":\"assistant\"");

    const sg_op *op = sg_easy_op(e);
    assert_int_equal(sg_op_attempt_count(op), 1);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_OK);
    char *report = report_of(e);
    assert_has(report, "\"finished\":true,\"outcome\":\"ok\",\"phase\":\"streaming\","
                       "\"decision\":\"done\",\"reason\":\"ok\"");
    assert_has(report, "\"method\":\"POST\",\"idempotency_key\":true,");
    assert_has(report, "\"budget_ms\":10000,");
    assert_has(report, "\"http_status\":200,");
    assert_has(report, "\"items\":6,");
    free(report);
    sg_easy_free(e);
    assert_int_equal(received_with_key("easy-ok"), 1);
}

static void a_late_first_token_is_retried_with_the_key_then_reported(void **state) {
    (void)state;
    seen s = {0};
    /* The role chunk comes at once, the first token 2 s later. */
    sg_easy *e = easy_on("/v1/chat/completions?n=3&role_chunk=1&first_delay=2000",
                         "openai", false, &s);
    assert_int_equal(sg_easy_set_first_item_timeout(e, SG_MS(200)), 0);
    assert_int_equal(sg_easy_set_attempts(e, 2), 0);
    assert_int_equal(sg_easy_set_idempotency_key(e, "easy-ttft"), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_string_equal(sg_easy_error(e), "no first item in 200 ms");
    /* The role chunk arrived but is no token: nothing was delivered. */
    assert_int_equal(s.items, 0);
    assert_int_equal(s.discards, 0);

    const sg_op *op = sg_easy_op(e);
    assert_int_equal(sg_op_attempt_count(op), 2);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_ATTEMPTS_EXHAUSTED);
    for (uint32_t i = 0; i < 2; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        assert_int_equal(a->outcome, SG_OUTCOME_FIRST_ITEM_TIMEOUT);
        assert_int_equal(a->phase, SG_PHASE_WAIT_FIRST_ITEM);
        assert_int_equal(a->items, 0);
        assert_false(a->partial);
        assert_true(a->elapsed_ns >= SG_MS(200)); /* never early */
    }
    char *report = report_of(e);
    assert_has(report, "\"first_item\":200,");
    assert_has(report, "\"first_item_ms\":null,\"first_token_ms\":null,");
    /* each attempt names the profile that judged it */
    assert_int_equal(fm_count(report, "\"profile\":\"openai\""), 2);
    free(report);
    sg_easy_free(e);
    assert_int_equal(received_with_key("easy-ttft"), 2);
}

static void a_stall_after_tokens_is_discarded_and_never_retried(void **state) {
    (void)state;
    seen s = {0};
    /* Two tokens, then keepalive comments every 20 ms and nothing else. */
    sg_easy *e = easy_on(
        "/v1/chat/completions?n=9&gap=10&stall_after=2&stall=forever&keepalive=20",
        "openai", false, &s);
    assert_int_equal(sg_easy_set_idle_timeout(e, SG_MS(300)), 0);
    assert_int_equal(sg_easy_set_idempotency_key(e, "easy-stall"), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_IDLE_TIMEOUT);
    assert_string_equal(sg_easy_error(e), "no next item in 300 ms");
    assert_int_equal(s.tokens, 2);
    assert_int_equal(s.discards, 1);
    assert_int_equal(s.discard_attempt, 1);
    assert_int_equal(s.discard_outcome, SG_OUTCOME_IDLE_TIMEOUT);

    const sg_op *op = sg_easy_op(e);
    assert_int_equal(sg_op_attempt_count(op), 1); /* a key, but partial */
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_PARTIAL_STREAM);
    const sg_op_attempt *a = sg_op_attempt_at(op, 0);
    assert_true(a->partial);
    assert_int_equal(a->phase, SG_PHASE_STREAMING);
    assert_true(a->elapsed_ns >= SG_MS(300));
    assert_true(a->bytes > 0); /* the keepalives came, and reset nothing */
    char *report = report_of(e);
    assert_has(report, "\"reason\":\"partial_stream\",\"partial\":true,");
    assert_has(report, "\"idle\":300,");
    free(report);
    sg_easy_free(e);
    assert_int_equal(received_with_key("easy-stall"), 1);
}

static void a_429_twice_then_the_stream_goes_with_one_key(void **state) {
    (void)state;
    seen s = {0};
    /* The first two requests with a key are answered 429 (retry-after-ms
     * 100); the server counts per key, so a changed key would fail again. */
    sg_easy *e = easy_on(
        "/v1/chat/completions?n=3&gap=10&status=429&retry_after_ms=100&fail_first=2",
        "openai", false, &s);
    assert_int_equal(sg_easy_set_idempotency_key(e, "easy-429"), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_OK);
    assert_int_equal(s.tokens, 3);

    const sg_op *op = sg_easy_op(e);
    assert_int_equal(sg_op_attempt_count(op), 3);
    for (uint32_t i = 0; i < 2; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        assert_int_equal(a->outcome, SG_OUTCOME_HTTP_ERROR);
        assert_int_equal(a->http_status, 429);
        assert_int_equal(a->decision, SG_OP_RETRY);
        assert_int_equal(a->retry_after_ns, SG_MS(100));
        assert_int_equal(a->backoff_ns, SG_MS(100)); /* as the server asked */
    }
    char *report = report_of(e);
    assert_has(report, "\"retry_after_ms\":100,");
    assert_has(report, "\"retry_after_source\":\"retry-after-ms\"");
    assert_has(report, "\"outcome\":\"ok\"");
    free(report);
    sg_easy_free(e);
    assert_int_equal(received_with_key("easy-429"), 3);
}

static void a_providers_in_band_error_is_provider_error(void **state) {
    (void)state;
    /* Before the first token: overloaded_error is transient and the request
     * has a key, so each attempt is retried; nothing was delivered. */
    seen s = {0};
    sg_easy *e = easy_on("/v1/messages?n=5&gap=10&error_at=0", "anthropic", false, &s);
    assert_int_equal(sg_easy_set_idempotency_key(e, "easy-overloaded"), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(sg_easy_error(e), "overloaded_error: scripted failure");
    assert_int_equal(s.items, 0); /* message_start was held, never given */
    assert_int_equal(sg_op_attempt_count(sg_easy_op(e)), 3);
    char *report = report_of(e);
    assert_has(report, "\"outcome\":\"provider_error\",\"phase\":\"wait_first_item\"");
    assert_has(report, "\"reason\":\"attempts_exhausted\"");
    assert_has(report, "\"provider_error\":{\"type\":\"overloaded_error\","
                       "\"message\":\"scripted failure\"}");
    free(report);
    sg_easy_free(e);
    assert_int_equal(received_with_key("easy-overloaded"), 3);

    /* After two tokens: partial, discarded, never retried. */
    seen m = {0};
    e = easy_on("/v1/messages?n=5&gap=10&error_at=2&error_type=rate_limit_error",
                "anthropic", false, &m);
    assert_int_equal(sg_easy_set_idempotency_key(e, "easy-midstream"), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(sg_easy_error(e), "rate_limit_error: scripted failure");
    assert_int_equal(m.tokens, 2);
    assert_int_equal(m.meta, 2); /* message_start, content_block_start */
    assert_int_equal(m.discards, 1);
    assert_int_equal(m.discard_outcome, SG_OUTCOME_PROVIDER_ERROR);
    const sg_op_attempt *a = sg_op_attempt_at(sg_easy_op(e), 0);
    assert_string_equal(a->provider_error_type, "rate_limit_error");
    assert_int_equal(a->reason, SG_OP_REASON_PARTIAL_STREAM);
    sg_easy_free(e);
    assert_int_equal(received_with_key("easy-midstream"), 1);
}

static void tls_is_verified_with_the_ca_file_and_without_it_refused(void **state) {
    (void)state;
    seen s = {0};
    sg_easy *e = easy_on("/v1/chat/completions?n=3&gap=5", "openai", true, &s);
    assert_int_equal(sg_easy_set_ca_file(e, server.ca_path), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_OK);
    assert_int_equal(s.tokens, 3);

    /* The same handle without the test CA: libcurl's bundle does not know
     * the server's, so no attempt gets a stream. */
    seen t = {0};
    assert_int_equal(sg_easy_set_on_item(e, on_item, &t), 0);
    assert_int_equal(sg_easy_set_ca_file(e, NULL), 0);
    assert_int_equal(sg_easy_set_attempts(e, 1), 0);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_TRANSPORT_ERROR);
    assert_has(sg_easy_error(e), "certificate");
    assert_int_equal(t.items, 0);
    sg_easy_free(e);
}

static void an_error_status_keeps_what_the_server_said(void **state) {
    (void)state;
    seen s = {0};
    sg_easy *e = easy_on("/v1/chat/completions?status=401", "openai", false, &s);
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_HTTP_ERROR);
    assert_string_equal(sg_easy_error(e), "HTTP 401");
    size_t len = 0;
    const char *body = sg_easy_error_body(e, &len);
    assert_non_null(body);
    char copy[256];
    assert_true(len < sizeof(copy));
    memcpy(copy, body, len);
    copy[len] = '\0';
    assert_has(copy, "scripted status 401");
    char *report = report_of(e);
    assert_has(report, "\"reason\":\"final_status\"");
    assert_null(strstr(report, "scripted status")); /* never in the report */
    free(report);
    sg_easy_free(e);
}

static void the_item_callback_cancels_and_cannot_reenter(void **state) {
    (void)state;
    seen s = {0};
    s.cancel_after = 2;
    sg_easy *e = easy_on("/v1/chat/completions?n=9&gap=10", "openai", false, &s);
    s.self = e;
    assert_int_equal(sg_easy_perform(e), 0);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_CANCELLED);
    assert_int_equal(s.items, 2);
    assert_int_equal(s.inner_set, SG_ESTATE);
    assert_int_equal(s.inner_perform, SG_ESTATE);
    assert_int_equal(s.discards, 1); /* it delivered, then did not end ok */
    assert_int_equal(sg_op_attempt_count(sg_easy_op(e)), 1);
    /* The setter refused from inside is remembered: no second run, and
     * no outcome left to mistake for this one's. */
    assert_int_equal(sg_easy_perform(e), SG_ESTATE);
    assert_int_equal(sg_easy_outcome(e), SG_OUTCOME_NONE);
    assert_null(sg_easy_op(e));
    sg_easy_free(e);
}

typedef struct worker {
    pthread_t thread;
    seen s;
    int made; /* sg_easy_new's answer */
    int rv;   /* sg_easy_perform's */
    sg_outcome outcome;
} worker;

/* A whole life of a handle, new to free, on a thread of its own. */
static void *work(void *arg) {
    worker *w = arg;
    sg_easy *e = NULL;
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/chat/completions?n=20&gap=10", server.base);
    w->made = sg_easy_new(&e);
    if (w->made == 0) {
        w->rv = sg_easy_set_url(e, url);
        if (w->rv == 0) {
            w->rv = sg_easy_set_profile(e, "openai");
        }
        if (w->rv == 0) {
            w->rv = sg_easy_set_on_item(e, on_item, &w->s);
        }
        if (w->rv == 0) {
            w->rv = sg_easy_perform(e);
        }
        w->outcome = sg_easy_outcome(e);
    }
    sg_easy_free(e);
    return NULL;
}

/* Handles on distinct threads perform at once, each on its own multi:
 * their streams overlap (20 tokens 10 ms apart each). */
static void handles_on_distinct_threads_perform_at_once(void **state) {
    (void)state;
    worker w[4];
    memset(w, 0, sizeof(w));
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(pthread_create(&w[i].thread, NULL, work, &w[i]), 0);
    }
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(w[i].thread, NULL), 0);
    }
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(w[i].made, 0);
        assert_int_equal(w[i].rv, 0);
        assert_int_equal(w[i].outcome, SG_OUTCOME_OK);
        assert_int_equal(w[i].s.tokens, 20);
    }
}

static int setup(void **state) {
    (void)state;
    return fm_start(&server, fakemodel_path);
}

static int teardown(void **state) {
    (void)state;
    fm_stop(&server);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel\n", argv[0]);
        return 2;
    }
    fakemodel_path = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_ok_stream_delivers_its_tokens_and_reports_ok),
        cmocka_unit_test(a_late_first_token_is_retried_with_the_key_then_reported),
        cmocka_unit_test(a_stall_after_tokens_is_discarded_and_never_retried),
        cmocka_unit_test(a_429_twice_then_the_stream_goes_with_one_key),
        cmocka_unit_test(a_providers_in_band_error_is_provider_error),
        cmocka_unit_test(tls_is_verified_with_the_ca_file_and_without_it_refused),
        cmocka_unit_test(an_error_status_keeps_what_the_server_said),
        cmocka_unit_test(the_item_callback_cancels_and_cannot_reenter),
        cmocka_unit_test(handles_on_distinct_threads_perform_at_once),
    };
    return cmocka_run_group_tests_name("easy", tests, setup, teardown);
}
