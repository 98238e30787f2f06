/*
 * The built-in provider profiles on the streams each provider sends (the
 * shapes of docs/provider-streams.md), through sg_stream with a hand-driven
 * clock: what is held, what is the first token, what ends cleanly, what is
 * an in-band error and whether it is transient.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

#include "profile_run.h"

#define T0 SG_SEC(100)

/* Plays @meta at T0, then @rest @prefill later (the wait for the first
 * token), through a stream with @profile; what the stream concluded. */
static run play(const char *profile, const char *meta, const char *rest,
                int64_t prefill) {
    run r;
    sg_stream s;
    sg_stream_config cfg;
    char *buf = play_begin(&s, &cfg, profile, &r, T0);
    r.feed_rc = sg_stream_feed(&s, meta, strlen(meta), T0);
    if (r.feed_rc == 0) {
        r.feed_rc = sg_stream_feed(&s, rest, strlen(rest), T0 + prefill);
    }
    play_end(&s, buf, &r, T0 + prefill + SG_MS(1));
    return r;
}

static void openai(void **state) {
    (void)state;
    const char *role =
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
        "\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n";
    const char *toks =
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
        "\"Hi\"},\"finish_reason\":null}]}\n\n"
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},"
        "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    run r = play("openai", role, toks, SG_MS(400));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(400)); /* the role chunk did not count */
    assert_int_equal(r.items, 3);         /* role (held, then delivered) + 2 */
    /* vLLM: an error, then [DONE] */
    r = play(
        "openai", role,
        "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"code\":500}}"
        "\n\ndata: [DONE]\n\n",
        SG_MS(10));
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_int_equal(r.feed_rc, SG_EPROVIDER);
    assert_string_equal(r.type, "server_error");
    assert_true(r.retryable);
    assert_int_equal(r.items, 0); /* nothing delivered: the role chunk stayed held */
    /* reasoning first (vLLM's delta.reasoning) is a token */
    r = play("openai", "",
             "data: {\"choices\":[{\"delta\":{\"reasoning\":\"hmm\"}}]}\n\n", 0);
    assert_int_equal(r.items, 1);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED); /* no [DONE] */
    /* no token at all (a content filter's end, then usage): [DONE] ends it
     * ok and what was held goes to the consumer with it, as the SDK
     * yields every chunk */
    r = play(
        "openai", role,
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
        "\"content_filter\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"total_tokens\":3}}"
        "\n\ndata: [DONE]\n\n",
        SG_MS(30));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.items, 3);
    assert_int_equal(r.ttft, -1); /* no token came */
    /* event: error - the SDK raises it whatever its data says */
    r = play("openai", role,
             "event: error\ndata: {\"message\":\"boom\",\"type\":\"server_error\"}\n\n"
             "data: [DONE]\n\n",
             SG_MS(10));
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "server_error");
    assert_true(r.retryable);
    /* audio and the legacy function_call are output: the first token */
    r = play("openai", role,
             "data: {\"choices\":[{\"delta\":{\"content\":null,\"audio\":{\"transcript\":"
             "\"Hel\"}}}]}\n\ndata: [DONE]\n\n",
             SG_MS(50));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(50));
    r = play(
        "openai", role,
        "data: {\"choices\":[{\"delta\":{\"function_call\":{\"arguments\":\"{\\\"a\"}}}]}"
        "\n\ndata: [DONE]\n\n",
        SG_MS(60));
    assert_int_equal(r.ttft, SG_MS(60));
    /* transient by the servers' own words (provider-streams.md): llama.cpp's
     * unavailable_error, a numeric code of 408, 429 or 5xx (OpenRouter's
     * code alone, vLLM's InternalServerError with its 500); a 4xx is not */
    static const struct {
        const char *error;
        const char *type;
        bool retryable;
    } errors[] = {
        {"{\"code\":503,\"type\":\"unavailable_error\",\"message\":\"x\"}",
         "unavailable_error", true},
        {"{\"code\":502,\"message\":\"Network connection lost.\",\"metadata\":{}}", "502",
         true},
        {"{\"code\":429,\"message\":\"slow down\"}", "429", true},
        {"{\"code\":408,\"message\":\"timeout\"}", "408", true},
        {"{\"type\":\"InternalServerError\",\"code\":500,\"message\":\"x\"}",
         "InternalServerError", true},
        {"{\"code\":400,\"message\":\"bad\"}", "400", false},
        {"{\"type\":\"BadRequestError\",\"code\":400,\"message\":\"x\"}",
         "BadRequestError", false},
    };
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
        char body[512];
        snprintf(body, sizeof(body), "data: {\"error\":%s}\n\ndata: [DONE]\n\n",
                 errors[i].error);
        r = play("openai", role, body, SG_MS(10));
        assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
        assert_string_equal(r.type, errors[i].type);
        assert_int_equal(r.retryable, errors[i].retryable);
    }
}

static void anthropic(void **state) {
    (void)state;
    const char *meta =
        "event: message_start\ndata: {\"type\":\"message_start\"}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\"}\n\n"
        "event: ping\ndata: {\"type\": \"ping\"}\n\n";
    run r = play("anthropic", meta,
                 "event: content_block_delta\ndata: {\"type\":\"content_block_delta\","
                 "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
                 "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
                 SG_MS(250));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(250));
    assert_int_equal(r.items, 4); /* the ping is nothing */
    /* each item says what it is: two held metadata, a token, the end */
    assert_int_equal(r.metas, 2);
    assert_int_equal(r.tokens, 1);
    assert_int_equal(r.ends, 1);
    r = play("anthropic", meta,
             "event: error\ndata: "
             "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
             "\"message\":\"Overloaded\"}}\n\n",
             SG_MS(5));
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "overloaded_error");
    assert_true(r.retryable);
    r = play("anthropic", meta,
             "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
             "\"invalid_request_error\",\"message\":\"no\"}}\n\n",
             SG_MS(5));
    assert_false(r.retryable);
    /* the spend limit: rate_limit_error, but error.details.error_code says
     * retrying fails until the month turns (Anthropic's API reference,
     * "Rate limits"; @anthropic-ai/sdk's EnforcedSpendLimitReachedError) */
    static const char *const spend[] = {"enforced_spend_limit_reached",
                                        "contract_spend_limit_reached"};
    for (size_t i = 0; i < 2; i++) {
        char ev[512];
        snprintf(ev, sizeof(ev),
                 "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                 "\"rate_limit_error\",\"message\":\"You have reached your API usage "
                 "limits\",\"details\":{\"error_code\":\"%s\"}},\"request_id\":"
                 "\"req_1\"}\n\n",
                 spend[i]);
        r = play("anthropic", meta, ev, SG_MS(5));
        assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
        assert_string_equal(r.type, "rate_limit_error");
        assert_false(r.retryable);
    }
    /* a plain rate limit stays one, details or not */
    r = play("anthropic", meta,
             "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
             "\"rate_limit_error\",\"message\":\"slow down\",\"details\":"
             "{\"error_code\":\"ramp_limit_exceeded\"}}}\n\n",
             SG_MS(5));
    assert_true(r.retryable);
    /* no content at all, then the end: ok, and no time to first token */
    r = play("anthropic", meta,
             "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", SG_MS(40));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, -1);
    assert_int_equal(r.metas, 2); /* delivered with the end */
    assert_int_equal(r.ends, 1);
    /* a stream cut before message_stop */
    r = play("anthropic", meta,
             "event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n",
             0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
}

static void gemini(void **state) {
    (void)state;
    run r = play("gemini", "",
                 "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}],"
                 "\"role\":\"model\"}}]}\n\n"
                 "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"!\"}]},"
                 "\"finishReason\":\"STOP\"}]}\n\n",
                 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.items, 2);
    assert_int_equal(r.tokens, 1);
    assert_int_equal(r.end_tokens, 1); /* the last text comes with the end */
    /* a short answer in one chunk: its text and its finishReason - the
     * first token, and the end */
    r = play("gemini", "",
             "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]},"
             "\"finishReason\":\"STOP\"}]}\n\n",
             SG_MS(80));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(80));
    assert_int_equal(r.end_tokens, 1);
    /* an empty part before the text: the chunk is still the first token */
    r = play("gemini",
             "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"}]}}]}\n\n",
             "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\"},"
             "{\"text\":\"Hello\"}]}}]}\n\n"
             "data: {\"candidates\":[{\"finishReason\":\"STOP\"}]}\n\n",
             SG_MS(90));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(90));
    /* the end item is the terminal signal (sg_stream_terminal_seen), as
     * before and after the body's end */
    {
        sg_stream st;
        sg_stream_config cfg;
        run rr;
        char *buf = play_begin(&st, &cfg, "gemini", &rr, T0);
        const char *end = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":"
                          "\"Hi\"}]},\"finishReason\":\"STOP\"}]}\n\n";
        assert_false(sg_stream_terminal_seen(&st));
        assert_int_equal(sg_stream_feed(&st, end, strlen(end), T0), 0);
        assert_true(sg_stream_terminal_seen(&st));
        sg_guard_result gr;
        assert_int_equal(sg_stream_end(&st, T0 + 1, SG_OUTCOME_OK, &gr), 0);
        assert_int_equal(gr.outcome, SG_OUTCOME_OK);
        assert_true(sg_stream_terminal_seen(&st));
        free(buf);
    }
    /* an end with no text (a blocked prompt): ok, no first token */
    r = play("gemini", "", "data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}\n\n",
             SG_MS(80));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, -1);
    assert_int_equal(r.ends, 1);
    /* no finishReason: a stream that simply stops is truncated */
    r = play("gemini", "",
             "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}]}}]}\n\n",
             0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    r = play("gemini", "",
             "data: {\"error\":{\"code\":503,\"message\":\"overloaded\",\"status\":"
             "\"UNAVAILABLE\"}}\n\n",
             0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "UNAVAILABLE");
    assert_true(r.retryable);
    /* the error object written bare, outside any data line, as the live
     * API has sent it: before the first token (nothing delivered, and
     * transient) ... */
    const char *bare = "{\n  \"error\": {\n    \"code\": 503,\n    \"message\": "
                       "\"The model is overloaded.\",\n    \"status\": \"UNAVAILABLE\"\n"
                       "  }\n}\n";
    r = play("gemini", "", bare, 0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "UNAVAILABLE");
    assert_true(r.retryable);
    assert_int_equal(r.items, 0);
    /* on one line, the body ending without its LF: the same */
    r = play("gemini", "",
             "{\"error\":{\"code\":503,\"message\":\"x\",\"status\":\"UNAVAILABLE\"}}",
             0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "UNAVAILABLE");
    assert_true(r.retryable);
    /* ... and after a finishReason chunk: the end item waits for the
     * body's end, and the error after it is the outcome */
    const char *stop = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":"
                       "\"Hi\"}]},\"finishReason\":\"STOP\"}]}\n\n";
    r = play("gemini", stop, bare, SG_MS(3));
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "UNAVAILABLE");
    assert_int_equal(r.items, 1);
    /* an error in a data line after it, the same */
    r = play("gemini", stop,
             "data: {\"error\":{\"code\":500,\"message\":\"x\",\"status\":"
             "\"INTERNAL\"}}\n\n",
             SG_MS(3));
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "INTERNAL");
    /* lines outside SSE that are no error are dropped, as SSE drops them */
    r = play("gemini", "", "junk line\n{\"x\": 1}\n", 0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    r = play("gemini", "junk\n\n", stop, 0);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.items, 1);
    /* an image or code the model runs is output: the first token */
    static const char *const parts[] = {
        "{\"inlineData\":{\"mimeType\":\"image/png\",\"data\":\"iVBO\"}}",
        "{\"executableCode\":{\"language\":\"PYTHON\",\"code\":\"print(1)\"}}",
    };
    for (size_t i = 0; i < 2; i++) {
        char chunk[256];
        snprintf(chunk, sizeof(chunk),
                 "data: {\"candidates\":[{\"content\":{\"parts\":[%s]}}]}\n\n", parts[i]);
        r = play("gemini", "", chunk, SG_MS(15));
        assert_int_equal(r.ttft, SG_MS(15));
    }
}

static void openai_responses(void **state) {
    (void)state;
    const char *meta =
        "event: response.created\ndata: {\"type\":\"response.created\"}\n\n"
        "event: response.in_progress\ndata: {\"type\":\"response.in_progress\"}\n\n";
    run r = play("openai-responses", meta,
                 "event: response.output_text.delta\ndata: {\"type\":"
                 "\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
                 "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n",
                 SG_MS(120));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(120));
    assert_int_equal(r.items, 4);
    r = play("openai-responses", meta,
             "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{"
             "\"error\":{\"code\":\"server_error\",\"message\":\"x\"}}}\n\n",
             0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "server_error");
    /* without event: lines, the data's own "type" names each event */
    r = play("openai-responses", "data: {\"type\":\"response.created\"}\n\n",
             "data: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
             "data: {\"type\":\"response.completed\"}\n\n",
             SG_MS(40));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(40));
    r = play("openai-responses", "data: {\"type\":\"response.created\"}\n\n",
             "data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":"
             "\"server_error\",\"message\":\"x\"}}}\n\n",
             0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "server_error");
    /* the SDK's transient codes: server_error, rate_limit_exceeded and
     * vector_store_timeout */
    r = play("openai-responses", meta,
             "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{"
             "\"error\":{\"code\":\"vector_store_timeout\",\"message\":\"x\"}}}\n\n",
             0);
    assert_string_equal(r.type, "vector_store_timeout");
    assert_true(r.retryable);
    /* a tool-heavy start: 20 web searches, five events each, before the
     * first delta - all held, none an error */
    static const char step[] =
        "event: response.output_item.added\ndata: "
        "{\"type\":\"response.output_item.added\"}\n\n"
        "event: response.web_search_call.in_progress\ndata: {\"type\":\"x\"}\n\n"
        "event: response.web_search_call.searching\ndata: {\"type\":\"x\"}\n\n"
        "event: response.web_search_call.completed\ndata: {\"type\":\"x\"}\n\n"
        "event: response.output_item.done\ndata: "
        "{\"type\":\"response.output_item.done\"}\n\n";
    char *many = malloc(strlen(meta) + 20 * strlen(step) + 1);
    assert_non_null(many);
    strcpy(many, meta);
    for (int i = 0; i < 20; i++) {
        strcat(many, step);
    }
    r = play("openai-responses", many,
             "event: response.output_text.delta\ndata: {\"type\":"
             "\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"
             "event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n",
             SG_MS(70));
    free(many);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(70));
    assert_int_equal(r.items, 2 + 100 + 2);
    /* response.completed repeats the whole answer on one line: 200 KB of
     * it is no line too long under the profile's default limits (a line
     * may be as long as an event) */
    static const char head[] =
        "event: response.completed\ndata: {\"type\":\"response.completed\","
        "\"response\":{\"output\":[{\"content\":[{\"text\":\"";
    static const char tail[] = "\"}]}]}}\n\n";
    size_t body = 200 * 1024;
    char *done = malloc(sizeof(head) + body + sizeof(tail));
    assert_non_null(done);
    memcpy(done, head, sizeof(head) - 1);
    memset(done + sizeof(head) - 1, 'a', body);
    memcpy(done + sizeof(head) - 1 + body, tail, sizeof(tail));
    r = play("openai-responses", meta,
             "event: response.output_text.delta\ndata: {\"type\":"
             "\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n",
             SG_MS(20));
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED); /* (no end yet) */
    char *all = malloc(strlen(meta) + 200 + strlen(done) + 1);
    assert_non_null(all);
    strcpy(all, "event: response.output_text.delta\ndata: {\"type\":"
                "\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n");
    strcat(all, done);
    r = play("openai-responses", meta, all, SG_MS(20));
    free(all);
    free(done);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.items, 2 + 2);
}

static void ollama(void **state) {
    (void)state;
    run r =
        play("ollama",
             "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
             "\"done\":false}\n",
             "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"Hi\"},"
             "\"done\":false}\n{\"model\":\"m\",\"message\":{\"role\":\"assistant\","
             "\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\"}\n",
             SG_MS(90));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(90));
    assert_int_equal(r.items, 3);
    r = play("ollama", "", "{\"error\":\"model not found\"}\n", 0);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "error");
    assert_false(r.retryable);
    r = play("ollama", "", "{\"message\":{\"content\":\"Hi\"},\"done\":false}\n", 0);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED); /* no done: true */
    /* the whole answer on the done line: the first token, and the end */
    r = play("ollama", "", "{\"response\":\"Hi\",\"done\":true}\n", SG_MS(30));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(30));
    assert_int_equal(r.end_tokens, 1);
    /* an empty answer: the done line alone is no token */
    r = play("ollama", "", "{\"message\":{\"content\":\"\"},\"done\":true}\n", SG_MS(30));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, -1);
    assert_int_equal(r.ends, 1);
}

/* An HTTP error's body, as the providers send it with a 4xx or 5xx: the
 * profile's classifier reads it as an error event, and says when the
 * refusal is final (Anthropic's spend limit, the body its API reference
 * shows for the monthly cap). */
static void error_bodies_are_read_by_the_profile(void **state) {
    (void)state;
    run r;
    sg_stream s;
    sg_stream_config cfg;
    char *buf = play_begin(&s, &cfg, "anthropic", &r, T0);
    static const char spend[] =
        "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
        "\"You have reached your API usage limits: your organization has crossed its "
        "monthly API usage threshold, set based on your organization's API tier. You "
        "will regain access on 2026-09-01 at 00:00 UTC.\",\"details\":{\"error_code\":"
        "\"enforced_spend_limit_reached\"}},\"request_id\":\"req_"
        "018EeWyXxfu5pfWkrYcMdjWG\"}";
    sg_item_error err;
    assert_true(sg_stream_classify_error_body(&s, spend, strlen(spend), &err));
    assert_true(err.final);
    assert_false(err.retryable);
    assert_int_equal(err.type_len, strlen("rate_limit_error"));
    static const char plain[] =
        "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":"
        "\"Number of request tokens has exceeded your per-minute rate limit\"}}";
    assert_true(sg_stream_classify_error_body(&s, plain, strlen(plain), &err));
    assert_false(err.final);
    assert_true(err.retryable);
    /* a gateway's page: an error (it came as one) that names nothing */
    assert_true(sg_stream_classify_error_body(&s, "<html>502</html>", 16, &err));
    assert_null(err.type);
    assert_false(err.final);
    assert_false(sg_stream_classify_error_body(&s, NULL, 0, &err));
    assert_false(sg_stream_classify_error_body(NULL, plain, strlen(plain), &err));
    assert_false(sg_stream_classify_error_body(&s, plain, strlen(plain), NULL));
    play_end(&s, buf, &r, T0);
    /* OpenAI's body names its type in the error object too */
    buf = play_begin(&s, &cfg, "openai", &r, T0);
    static const char oai[] = "{\"error\":{\"message\":\"Rate limit reached\",\"type\":"
                              "\"requests\",\"code\":\"rate_limit_exceeded\"}}";
    assert_true(sg_stream_classify_error_body(&s, oai, strlen(oai), &err));
    assert_false(err.final);
    /* and its quota: the same 429, but no wait lets it through until the
     * account is paid up (platform.openai.com/docs/guides/error-codes) */
    static const char quota[] =
        "{\"error\":{\"message\":\"You exceeded your current quota, please check your "
        "plan and billing details.\",\"type\":\"insufficient_quota\",\"param\":null,"
        "\"code\":\"insufficient_quota\"}}";
    assert_true(sg_stream_classify_error_body(&s, quota, strlen(quota), &err));
    assert_true(err.final);
    assert_false(err.retryable);
    play_end(&s, buf, &r, T0);
    /* without a classifier: nothing to say */
    sg_stream plain_s;
    sg_stream_config none;
    memset(&none, 0, sizeof(none));
    size_t pn = sg_stream_buffer_size(&none);
    char *pbuf = malloc(pn);
    assert_non_null(pbuf);
    assert_int_equal(sg_stream_init(&plain_s, &none, on_item, &r, pbuf, pn), 0);
    assert_false(sg_stream_classify_error_body(&plain_s, spend, strlen(spend), &err));
    free(pbuf);
}

static void names(void **state) {
    (void)state;
    const char *const *n = sg_profile_names();
    int count = 0;
    for (; *n != NULL; n++, count++) {
        sg_stream_config cfg;
        memset(&cfg, 0, sizeof(cfg));
        assert_int_equal(sg_profile_framing(*n, &cfg), 0);
        assert_non_null(cfg.classify_);
    }
    assert_int_equal(count, 7);
    sg_stream_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(sg_profile_framing("nosuch", &cfg), SG_ENOTFOUND);
    assert_null(cfg.classify_);
    assert_int_equal(sg_profile_framing(NULL, &cfg), SG_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(openai), cmocka_unit_test(anthropic),
        cmocka_unit_test(gemini), cmocka_unit_test(openai_responses),
        cmocka_unit_test(ollama), cmocka_unit_test(error_bodies_are_read_by_the_profile),
        cmocka_unit_test(names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
