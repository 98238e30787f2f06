/*
 * A provider profile per endpoint, end to end (docs/profiles.md, "A
 * profile per endpoint"): two real sg-fakemodel instances on loopback,
 * one playing a provider's API and the other another's, behind one
 * operation that falls back from the first to the second.  Each attempt
 * is framed and judged by its own endpoint's profile - its clean end, its
 * in-band errors, its first token, its usage - and the report names the
 * profile of each attempt.  With one profile for the whole operation (the
 * only way before sg_curl_options_set_endpoint_framing) the fallback's
 * stream is judged by the primary's rules and fails: the case that shows
 * why.
 *
 * Usage: profile_endpoint_test PATH/TO/sg-fakemodel
 */
#include "harness.h" /* first: it defines _GNU_SOURCE */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <streamguard/curl.h>

#include "../sg_auto.h"

static const char *fakemodel;
static fm_server primary, fallback;

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return fm_start(&primary, fakemodel) == 0 && fm_start(&fallback, fakemodel) == 0 ? 0
                                                                                     : -1;
}

static int teardown(void **state) {
    (void)state;
    fm_stop(&primary);
    fm_stop(&fallback);
    curl_global_cleanup();
    return 0;
}

/* One endpoint: where it is (a path and query on its server) and the
 * profile it is given (NULL: none of its own - the operation's). */
typedef struct endpoint {
    const fm_server *server;
    const char *path;
    const char *profile;
} endpoint;

/* What an operation did. */
typedef struct seen {
    sg_outcome outcome;
    uint32_t attempts;
    sg_op_attempt rec[4];
    int tokens, metas, ends; /* items the consumer got, by kind */
    char report[16384];
} seen;

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    seen *s = ud;
    s->tokens += item->kind == SG_ITEM_TOKEN || item->kind == SG_ITEM_END_TOKEN;
    s->metas += item->kind == SG_ITEM_META;
    s->ends += item->kind == SG_ITEM_END || item->kind == SG_ITEM_END_TOKEN;
    return 0;
}

static void framing_of(const char *profile, sg_stream_config *f) {
    sg_stream_config_init(f);
    assert_int_equal(sg_profile_framing(profile, f), 0);
}

/* Runs one operation under the profile @op_profile, over @n endpoints in
 * order, each with its own profile when it names one, at most @attempts
 * attempts; what it did into @s. */
static void run(const char *op_profile, const endpoint *eps, uint32_t n,
                uint32_t attempts, seen *s) {
    memset(s, 0, sizeof(*s));
    char urls[4][512];
    for (uint32_t i = 0; i < n; i++) {
        snprintf(urls[i], sizeof(urls[i]), "%s%s", eps[i].server->base, eps[i].path);
    }
    CURL *e = curl_easy_init();
    assert_non_null(e);
    curl_easy_setopt(e, CURLOPT_URL, urls[0]);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, "{\"model\":\"m\",\"stream\":true}");
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(20)), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, attempts), 0);
    assert_int_equal(sg_op_options_set_idempotency_key(po, "profile-endpoint-key"), 0);
    assert_int_equal(sg_op_options_set_backoff(po, SG_MS(1), SG_MS(1)), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(po, SG_SEC(5)), 0);
    SG_AUTO_CURL_OPTIONS(co);
    sg_stream_config f;
    framing_of(op_profile, &f);
    assert_int_equal(sg_curl_options_set_framing(co, &f), 0);
    for (uint32_t i = 0; i < n; i++) {
        assert_int_equal(sg_curl_options_add_endpoint(co, urls[i], NULL, NULL, 0), 0);
        if (eps[i].profile != NULL) {
            framing_of(eps[i].profile, &f);
            assert_int_equal(sg_curl_options_set_endpoint_framing(co, i, &f), 0);
        }
    }
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, s), 0);
    assert_int_equal(sg_curl_perform(op), 0);
    assert_true(sg_curl_op_done(op));
    const sg_op *pol = sg_curl_op_policy(op);
    s->outcome = sg_op_outcome(pol);
    s->attempts = sg_op_attempt_count(pol);
    for (uint32_t i = 0; i < s->attempts && i < 4; i++) {
        s->rec[i] = *sg_op_attempt_at(pol, i);
    }
    assert_int_equal(sg_curl_op_report(op, s->report, sizeof(s->report), NULL), 0);
    fprintf(stderr, "%s after %u: %s\n", sg_outcome_name(s->outcome), s->attempts,
            s->report);
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
}

/* The report's attempt @n (1-based) names @profile (NULL: null). */
static void report_names(const seen *s, uint32_t n, const char *profile) {
    char from[32], want[64];
    snprintf(from, sizeof(from), "{\"n\":%u,", n);
    const char *at = strstr(s->report, from);
    assert_non_null(at);
    snprintf(from, sizeof(from), "{\"n\":%u,", n + 1);
    const char *next = strstr(at, from);
    if (profile != NULL) {
        snprintf(want, sizeof(want), "\"profile\":\"%s\"", profile);
    } else {
        snprintf(want, sizeof(want), "\"profile\":null");
    }
    const char *found = strstr(at, want);
    assert_non_null(found);
    assert_true(next == NULL || found < next);
}

/* -------------------------------------------------------------- tests */

/* An OpenAI-shaped primary reports an overload inside its stream before
 * any token (OpenAI's {"error": ...} chunk: retryable by the openai
 * profile), and the operation falls back to an Anthropic-shaped server
 * judged by the anthropic profile: its message_start held as metadata
 * and its first token the first content_block_delta, its clean end
 * message_stop (no [DONE]), its usage Anthropic's own figures. */
static void an_openai_primary_falls_back_to_an_anthropic_endpoint(void **state) {
    (void)state;
    const endpoint eps[] = {
        {&primary, "/v1/chat/completions?error_at=0&error_type=server_error&_t=oa", NULL},
        {&fallback, "/v1/messages?n=3&gap=1&prompt_tokens=42&_t=an", "anthropic"},
    };
    seen s;
    run("openai", eps, 2, 2, &s);
    assert_int_equal(s.outcome, SG_OUTCOME_OK);
    assert_int_equal(s.attempts, 2);
    assert_int_equal(s.rec[0].endpoint, 0);
    assert_int_equal(s.rec[0].outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(s.rec[0].provider_error_type, "server_error");
    assert_int_equal(s.rec[0].decision, SG_OP_RETRY);
    assert_int_equal(s.rec[1].endpoint, 1);
    assert_int_equal(s.rec[1].outcome, SG_OUTCOME_OK);
    assert_true(s.rec[1].time_to_first_item_ns >= 0);
    assert_true(s.tokens >= 3); /* the deltas, and every event after the first */
    assert_true(s.metas >= 1);  /* message_start, held until the first token */
    assert_int_equal(s.ends, 1);
    assert_int_equal(s.rec[1].usage.source, SG_USAGE_PROVIDER);
    assert_int_equal(s.rec[1].usage.input_tokens, 42);
    assert_int_equal(s.rec[1].usage.output_tokens, 3);
    report_names(&s, 1, "openai");
    report_names(&s, 2, "anthropic");
}

/* The same fallback with one profile for the whole operation: the
 * Anthropic stream is judged by OpenAI's rules - it never sends [DONE],
 * so it is truncated, and its usage is unknown.  What a profile per
 * endpoint is for. */
static void one_profile_for_the_operation_misjudges_the_fallback(void **state) {
    (void)state;
    const endpoint eps[] = {
        {&primary, "/v1/chat/completions?error_at=0&error_type=server_error&_t=oa1",
         NULL},
        {&fallback, "/v1/messages?n=3&gap=1&prompt_tokens=42&_t=an1", NULL},
    };
    seen s;
    run("openai", eps, 2, 2, &s);
    assert_int_equal(s.attempts, 2);
    assert_int_equal(s.rec[0].outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_int_equal(s.rec[1].outcome, SG_OUTCOME_TRUNCATED);
    assert_int_equal(s.outcome, SG_OUTCOME_TRUNCATED);
    assert_int_not_equal(s.rec[1].usage.source, SG_USAGE_PROVIDER);
    report_names(&s, 1, "openai");
    report_names(&s, 2, "openai");
}

/* Another format, and back: an Anthropic primary overloaded inside its
 * stream (event: error, overloaded_error) the first time, an Ollama
 * fallback (NDJSON, not SSE) answering 503, then the primary again -
 * framed by its own profile once more, so its message_stop ends it ok. */
static void the_framing_follows_the_endpoint_there_and_back(void **state) {
    (void)state;
    const endpoint eps[] = {
        {&primary,
         "/v1/messages?n=2&gap=1&error_at=0&error_type=overloaded_error&fail_first=1&"
         "fail_key=back&_t=an2",
         NULL},
        {&fallback, "/api/chat?format=ollama&status=503&_t=ol2", "ollama"},
    };
    seen s;
    run("anthropic", eps, 2, 3, &s);
    assert_int_equal(s.attempts, 3);
    assert_int_equal(s.rec[0].outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(s.rec[0].provider_error_type, "overloaded_error");
    assert_int_equal(s.rec[1].endpoint, 1);
    assert_int_equal(s.rec[1].outcome, SG_OUTCOME_HTTP_ERROR);
    assert_int_equal(s.rec[1].http_status, 503);
    assert_int_equal(s.rec[2].endpoint, 0);
    assert_int_equal(s.rec[2].outcome, SG_OUTCOME_OK);
    assert_int_equal(s.outcome, SG_OUTCOME_OK);
    assert_int_equal(s.rec[2].usage.source, SG_USAGE_PROVIDER);
    assert_int_equal(s.rec[2].usage.output_tokens, 2);
    report_names(&s, 1, "anthropic");
    report_names(&s, 2, "ollama");
    report_names(&s, 3, "anthropic");
}

/* An NDJSON fallback that streams: its lines are items under the ollama
 * profile ("done": true the clean end), after an SSE primary's 503. */
static void an_sse_primary_falls_back_to_an_ndjson_endpoint(void **state) {
    (void)state;
    const endpoint eps[] = {
        {&primary, "/v1/chat/completions?status=503&_t=oa3", NULL},
        {&fallback, "/api/chat?format=ollama&n=4&gap=1&_t=ol3", "ollama"},
    };
    seen s;
    run("openai", eps, 2, 2, &s);
    assert_int_equal(s.outcome, SG_OUTCOME_OK);
    assert_int_equal(s.attempts, 2);
    assert_int_equal(s.rec[0].http_status, 503);
    assert_int_equal(s.rec[1].outcome, SG_OUTCOME_OK);
    assert_int_equal(s.tokens, 4);
    assert_int_equal(s.ends, 1);
    report_names(&s, 1, "openai");
    report_names(&s, 2, "ollama");
}

/* The setter's contract: an endpoint added before; NULL gives the endpoint the
 * operation's framing back; copies survive the options' duplicate. */
static void the_endpoint_framing_setter_checks_what_it_is_given(void **state) {
    (void)state;
    SG_AUTO_CURL_OPTIONS(co);
    sg_stream_config f;
    framing_of("anthropic", &f);
    assert_int_equal(sg_curl_options_set_endpoint_framing(NULL, 0, &f), SG_EINVAL);
    assert_int_equal(sg_curl_options_set_endpoint_framing(co, 0, &f), SG_ERANGE);
    assert_int_equal(
        sg_curl_options_add_endpoint(co, "http://127.0.0.1:1/a", NULL, NULL, 0), 0);
    assert_int_equal(sg_curl_options_set_endpoint_framing(co, 1, &f), SG_ERANGE);
    assert_int_equal(sg_curl_options_set_endpoint_framing(co, 0, &f), 0);
    assert_int_equal(sg_curl_options_set_endpoint_framing(co, 0, NULL), 0);
    assert_int_equal(sg_curl_options_set_endpoint_framing(co, 0, &f), 0);
    sg_curl_options *copy = NULL;
    assert_int_equal(sg_curl_options_dup(&copy, co), 0);
    sg_curl_options_free(copy);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel\n", argv[0]);
        return 2;
    }
    fakemodel = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_openai_primary_falls_back_to_an_anthropic_endpoint),
        cmocka_unit_test(one_profile_for_the_operation_misjudges_the_fallback),
        cmocka_unit_test(the_framing_follows_the_endpoint_there_and_back),
        cmocka_unit_test(an_sse_primary_falls_back_to_an_ndjson_endpoint),
        cmocka_unit_test(the_endpoint_framing_setter_checks_what_it_is_given),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
