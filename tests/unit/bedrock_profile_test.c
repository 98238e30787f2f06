/*
 * The Bedrock profiles on AWS event streams (the shapes of
 * docs/provider-streams.md), through sg_stream with a hand-driven clock:
 * ConverseStream's events (held metadata, the first contentBlockDelta as
 * the first token, messageStop then metadata as the clean end), the
 * model's own JSON inside InvokeModelWithResponseStream's chunks, and
 * exception and error messages as provider errors (transient only for
 * throttling and unavailable).  Messages are encoded here, their CRCs by
 * zlib; the decoder's own conformance is eventstream_test.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <streamguard/streamguard.h>

#include "es_encode.h"
#include "framing/usage.h"
#include "profile_run.h"

#define T0 SG_SEC(100)

/* ------------------------------------------------------------- encoding */

typedef struct wire {
    unsigned char b[1 << 16];
    size_t n;
} wire;

/* Appends one message: string headers @names[i] = @values[i] (@nh of
 * them), then @payload. */
static void msg(wire *w, size_t nh, const char *const *names, const char *const *values,
                const char *payload) {
    assert_true(w->n + 1024 + strlen(payload) <= sizeof(w->b));
    w->n += es_message(w->b + w->n, nh, names, values, payload, strlen(payload));
}

static void event(wire *w, const char *type, const char *payload) {
    assert_true(w->n + 1024 + strlen(payload) <= sizeof(w->b));
    w->n += es_event(w->b + w->n, type, payload);
}

static void exception(wire *w, const char *type, const char *payload) {
    const char *names[] = {":message-type", ":exception-type", ":content-type"};
    const char *values[] = {"exception", type, "application/json"};
    msg(w, 3, names, values, payload);
}

/* An InvokeModelWithResponseStream chunk: the model's @json, base64. */
static void chunk(wire *w, const char *json) {
    char payload[4096];
    es_chunk_payload(json, payload, sizeof(payload));
    event(w, "chunk", payload);
}

/* ----------------------------------------------------------------- play */

/* Plays @first at T0, then @rest @prefill later, through a stream with
 * @profile (one byte at a time when @bytewise); then the body ends. */
static run play(const char *profile, const wire *first, const wire *rest, int64_t prefill,
                bool bytewise) {
    run r;
    sg_stream s;
    sg_stream_config cfg;
    char *buf = play_begin(&s, &cfg, profile, &r, T0);
    assert_int_equal(sg_stream_config_format(&cfg), SG_FORMAT_EVENTSTREAM);
    const wire *parts[2] = {first, rest};
    for (int k = 0; k < 2 && r.feed_rc == 0; k++) {
        const wire *w = parts[k];
        int64_t at = k == 0 ? T0 : T0 + prefill;
        size_t step = bytewise ? 1 : w->n;
        for (size_t i = 0; i < w->n && r.feed_rc == 0; i += step) {
            size_t len = w->n - i < step ? w->n - i : step;
            r.feed_rc = sg_stream_feed(&s, w->b + i, len, at);
        }
    }
    play_end(&s, buf, &r, T0 + prefill + SG_MS(1));
    return r;
}

/* ------------------------------------------------------ bedrock-converse */

static void converse_start(wire *w) {
    memset(w, 0, sizeof(*w));
    event(w, "messageStart", "{\"p\":\"abcd\",\"role\":\"assistant\"}");
    event(w, "contentBlockStart",
          "{\"contentBlockIndex\":0,\"p\":\"ab\",\"start\":{\"toolUse\":null}}");
}

static void converse_tokens(wire *w, int n) {
    for (int i = 0; i < n; i++) {
        event(
            w, "contentBlockDelta",
            "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"Hello\"},\"p\":\"abcdef\"}");
    }
}

static void converse_end(wire *w, bool metadata) {
    event(w, "contentBlockStop", "{\"contentBlockIndex\":0,\"p\":\"abc\"}");
    event(w, "messageStop", "{\"p\":\"ab\",\"stopReason\":\"end_turn\"}");
    if (metadata) {
        event(w, "metadata",
              "{\"metrics\":{\"latencyMs\":412},\"p\":\"a\",\"usage\":{\"inputTokens\":9,"
              "\"outputTokens\":3,\"totalTokens\":12}}");
    }
}

static void converse_is_guarded_from_its_first_delta_to_messagestop(void **state) {
    (void)state;
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        wire a, b;
        converse_start(&a);
        memset(&b, 0, sizeof(b));
        converse_tokens(&b, 3);
        converse_end(&b, true);
        run r = play("bedrock-converse", &a, &b, SG_MS(700), bytewise);
        assert_int_equal(r.outcome, SG_OUTCOME_OK);
        /* the two held events come with the first token: time to first
         * token is the delta's, not messageStart's */
        assert_true(r.ttft == SG_MS(700));
        assert_int_equal(r.items, 8);
        assert_int_equal(r.metas, 2);
        assert_int_equal(r.ends, 1);
    }
}

static void converse_ends_cleanly_only_after_messagestop(void **state) {
    (void)state;
    wire a, b;
    converse_start(&a);
    memset(&b, 0, sizeof(b));
    converse_tokens(&b, 2);
    converse_end(&b, false); /* no metadata after messageStop: still ok */
    assert_int_equal(play("bedrock-converse", &a, &b, SG_MS(5), false).outcome,
                     SG_OUTCOME_OK);

    memset(&b, 0, sizeof(b));
    converse_tokens(&b, 2); /* the body ends before messageStop */
    run r = play("bedrock-converse", &a, &b, SG_MS(5), false);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    assert_true(r.partial);

    /* a message cut in half at the body's end: truncated, not ok */
    converse_end(&b, true);
    b.n -= 7;
    assert_int_equal(play("bedrock-converse", &a, &b, SG_MS(5), false).outcome,
                     SG_OUTCOME_TRUNCATED);
}

static void converse_metadata_alone_is_no_first_token(void **state) {
    (void)state;
    wire a, b;
    converse_start(&a);
    memset(&b, 0, sizeof(b));
    event(&b, "contentBlockStop", "{\"contentBlockIndex\":0}");
    run r = play("bedrock-converse", &a, &b, SG_MS(5), false);
    assert_int_equal(r.outcome, SG_OUTCOME_TRUNCATED);
    assert_int_equal(r.items, 0); /* held, never delivered */
    assert_false(r.partial);
    assert_true(r.ttft < 0);
}

/* A message with no content: messageStop (no token) and the usage after
 * it; ok, with no time to first token - the metadata event after the end
 * is not one either - and everything delivered. */
static void converse_without_content_has_no_first_token(void **state) {
    (void)state;
    wire a, b;
    converse_start(&a);
    memset(&b, 0, sizeof(b));
    converse_end(&b, true);
    run r = play("bedrock-converse", &a, &b, SG_MS(60), false);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_true(r.ttft < 0);
    assert_int_equal(r.items, 5); /* start, block start, block stop, stop, metadata */
    assert_int_equal(r.ends, 1);
}

static void
throttling_before_the_first_token_is_a_transient_provider_error(void **state) {
    (void)state;
    wire a, b;
    converse_start(&a);
    memset(&b, 0, sizeof(b));
    exception(&b, "throttlingException",
              "{\"message\":\"Too many requests, please wait before trying again.\"}");
    run r = play("bedrock-converse", &a, &b, SG_MS(5), true);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_int_equal(r.feed_rc, SG_EPROVIDER);
    assert_string_equal(r.type, "throttlingException");
    assert_string_equal(r.message, "Too many requests, please wait before trying again.");
    assert_true(r.retryable);
    assert_int_equal(r.items, 0);
    assert_false(r.partial);

    /* after the first token: the same error, and the stream is partial */
    converse_start(&a);
    converse_tokens(&a, 2);
    r = play("bedrock-converse", &a, &b, SG_MS(5), false);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_true(r.partial);
    assert_int_equal(r.items, 4);
}

static void other_exceptions_and_error_messages_are_not_transient(void **state) {
    (void)state;
    static const char *const kinds[][2] = {
        {"modelStreamErrorException", "false"},  {"validationException", "false"},
        {"internalServerException", "false"},    {"modelTimeoutException", "false"},
        {"serviceUnavailableException", "true"},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        wire a, b;
        converse_start(&a);
        memset(&b, 0, sizeof(b));
        exception(&b, kinds[i][0], "{\"message\":\"m\"}");
        run r = play("bedrock-converse", &a, &b, SG_MS(5), false);
        assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
        assert_string_equal(r.type, kinds[i][0]);
        assert_int_equal(r.retryable, strcmp(kinds[i][1], "true") == 0);
    }
    /* an error message: its code and message in headers */
    wire a, b;
    converse_start(&a);
    memset(&b, 0, sizeof(b));
    const char *names[] = {":message-type", ":error-code", ":error-message"};
    const char *values[] = {"error", "InternalFailure", "the service broke"};
    msg(&b, 3, names, values, "");
    run r = play("bedrock-converse", &a, &b, SG_MS(5), false);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "InternalFailure");
    assert_string_equal(r.message, "the service broke");
    assert_false(r.retryable);
}

static void a_damaged_message_is_a_protocol_error(void **state) {
    (void)state;
    wire a, b;
    converse_start(&a);
    memset(&b, 0, sizeof(b));
    converse_tokens(&b, 1);
    b.b[b.n - 6] ^= 0x20; /* a payload byte: the message CRC fails */
    run r = play("bedrock-converse", &a, &b, SG_MS(5), false);
    assert_int_equal(r.feed_rc, SG_EMESSAGE_CRC);
    assert_int_equal(r.outcome, SG_OUTCOME_PROTOCOL_ERROR);
    b.b[b.n - 6] ^= 0x20;
    b.b[b.n - b.n + 1] ^= 0x01; /* the first prelude's length */
    r = play("bedrock-converse", &a, &b, SG_MS(5), false);
    assert_int_equal(r.feed_rc, SG_EPRELUDE_CRC);
    assert_int_equal(r.outcome, SG_OUTCOME_PROTOCOL_ERROR);
}

/* -------------------------------------------------------- bedrock-invoke */

static void invoke_reads_anthropic_events_inside_the_chunks(void **state) {
    (void)state;
    wire a, b;
    memset(&a, 0, sizeof(a));
    chunk(&a, "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"role\":"
              "\"assistant\",\"stop_reason\":null}}");
    chunk(&a, "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
              "{\"type\":\"text\",\"text\":\"\"}}");
    memset(&b, 0, sizeof(b));
    chunk(&b, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
              "\"text_delta\",\"text\":\"Hi\"}}");
    chunk(&b, "{\"type\":\"content_block_stop\",\"index\":0}");
    chunk(&b, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
              "\"usage\":{\"output_tokens\":2}}");
    chunk(&b, "{\"type\":\"message_stop\",\"amazon-bedrock-invocationMetrics\":"
              "{\"inputTokenCount\":9,\"outputTokenCount\":2}}");
    for (int bytewise = 0; bytewise < 2; bytewise++) {
        run r = play("bedrock-invoke", &a, &b, SG_MS(300), bytewise);
        assert_int_equal(r.outcome, SG_OUTCOME_OK);
        assert_true(r.ttft == SG_MS(300));
        assert_int_equal(r.items, 6);
        assert_int_equal(r.metas, 2);
        assert_int_equal(r.ends, 1);
    }
    /* without the model's end: truncated */
    b.n = 0;
    chunk(&b, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
              "\"text_delta\",\"text\":\"Hi\"}}");
    assert_int_equal(play("bedrock-invoke", &a, &b, SG_MS(5), false).outcome,
                     SG_OUTCOME_TRUNCATED);
}

static void invoke_reads_other_model_families(void **state) {
    (void)state;
    /* Amazon Titan, Meta Llama: a text field, then a stop field */
    static const char *const streams[][3] = {
        {"{\"outputText\":\"\",\"index\":0,\"completionReason\":null}",
         "{\"outputText\":\"Hello\",\"index\":0,\"completionReason\":null}",
         "{\"outputText\":\"\",\"completionReason\":\"FINISH\"}"},
        {"{\"generation\":\"\",\"stop_reason\":null}",
         "{\"generation\":\"Hi\",\"prompt_token_count\":null,\"stop_reason\":null}",
         "{\"generation\":\"\",\"stop_reason\":\"stop\",\"amazon-bedrock-"
         "invocationMetrics\":{\"outputTokenCount\":1}}"},
        /* Amazon Nova: the Converse shapes inside the chunks */
        {"{\"messageStart\":{\"role\":\"assistant\"}}",
         "{\"contentBlockDelta\":{\"delta\":{\"text\":\"Hello\"},\"contentBlockIndex\":0}"
         "}",
         "{\"messageStop\":{\"stopReason\":\"end_turn\"}}"},
        /* OpenAI-shaped models (gpt-oss): choices[].delta */
        {"{\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},"
         "\"finish_reason\":null}]}",
         "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":"
         "null}]}",
         "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}"},
    };
    for (size_t i = 0; i < 4; i++) {
        wire a, b;
        memset(&a, 0, sizeof(a));
        chunk(&a, streams[i][0]); /* no text yet: metadata */
        memset(&b, 0, sizeof(b));
        chunk(&b, streams[i][1]);
        chunk(&b, streams[i][2]);
        run r = play("bedrock-invoke", &a, &b, SG_MS(40), false);
        assert_int_equal(r.outcome, SG_OUTCOME_OK);
        assert_true(r.ttft == SG_MS(40));
        assert_int_equal(r.metas, 1);
        assert_int_equal(r.ends, 1);
    }
    /* the whole answer in the chunk that stops: the first token, and the end */
    wire a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    chunk(&b, "{\"outputText\":\"Hi\",\"completionReason\":\"FINISH\"}");
    run r = play("bedrock-invoke", &a, &b, SG_MS(25), false);
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_true(r.ttft == SG_MS(25));
    assert_int_equal(r.end_tokens, 1);
}

static void invoke_sees_the_models_own_error_and_the_streams_exceptions(void **state) {
    (void)state;
    wire a, b;
    memset(&a, 0, sizeof(a));
    chunk(&a, "{\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}");
    memset(&b, 0, sizeof(b));
    chunk(&b, "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
              "\"Overloaded\"}}");
    run r = play("bedrock-invoke", &a, &b, SG_MS(5), false);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "overloaded_error");
    assert_string_equal(r.message, "Overloaded");
    assert_true(r.retryable);

    memset(&b, 0, sizeof(b));
    exception(&b, "modelTimeoutException", "{\"message\":\"Model timed out\"}");
    r = play("bedrock-invoke", &a, &b, SG_MS(5), false);
    assert_int_equal(r.outcome, SG_OUTCOME_PROVIDER_ERROR);
    assert_string_equal(r.type, "modelTimeoutException");
    assert_false(r.retryable);
}

/* ----------------------------------------------------------------- usage */

/* What @profile reads of the usage in @w, fed at once, when the stream
 * concludes @outcome: the figures (-1 unknown) and the text. */
static void expect_usage(const char *profile, const wire *w, sg_outcome outcome,
                         int64_t in, int64_t out, int64_t cached, uint64_t text) {
    run r;
    sg_stream s;
    sg_stream_config cfg;
    char *buf = play_begin(&s, &cfg, profile, &r, T0);
    r.feed_rc = sg_stream_feed(&s, w->b, w->n, T0 + SG_MS(1));
    play_end(&s, buf, &r, T0 + SG_MS(2));
    assert_int_equal(r.outcome, outcome);
    sg__usage_read u;
    assert_true(sg__stream_usage(sg__stream_of(&s), &u));
    assert_int_equal(u.input, in);
    assert_int_equal(u.output, out);
    assert_int_equal(u.cached, cached);
    assert_int_equal(u.text_bytes, text);
    assert_int_equal(u.reasoning, -1);
}

/* ConverseStream: the metadata event's usage, whose inputTokens leave the
 * cache out (input = inputTokens + cache reads + cache writes); the text
 * of the deltas, a tool use's input too.  Cut before it: the text only. */
static void converse_reads_the_metadata_usage(void **state) {
    (void)state;
    wire w;
    converse_start(&w);
    converse_tokens(&w, 2); /* "Hello" twice */
    event(
        &w, "contentBlockDelta",
        "{\"contentBlockIndex\":1,\"delta\":{\"toolUse\":{\"input\":\"{\\\"a\\\":1}\"}},"
        "\"p\":\"x\"}");
    /* cut: the text only, {"a":1} decoded */
    expect_usage("bedrock-converse", &w, SG_OUTCOME_TRUNCATED, -1, -1, -1, 10 + 7);
    event(&w, "contentBlockStop", "{\"contentBlockIndex\":0,\"p\":\"abc\"}");
    event(&w, "messageStop", "{\"p\":\"ab\",\"stopReason\":\"end_turn\"}");
    event(&w, "metadata",
          "{\"metrics\":{\"latencyMs\":412},\"p\":\"a\",\"usage\":{\"inputTokens\":9,"
          "\"outputTokens\":3,\"totalTokens\":32,\"cacheReadInputTokens\":20,"
          "\"cacheWriteInputTokens\":0}}");
    expect_usage("bedrock-converse", &w, SG_OUTCOME_OK, 29, 3, 20, 17);
}

/* InvokeModelWithResponseStream: Claude's own usage events inside the
 * chunks; Bedrock's invocationMetrics on the last one fill in only what
 * they did not say; another family's text and its metrics alone. */
static void invoke_reads_claude_usage_and_the_invocation_metrics(void **state) {
    (void)state;
    wire w;
    memset(&w, 0, sizeof(w));
    chunk(&w,
          "{\"type\":\"message_start\",\"message\":{\"content\":[],\"usage\":{"
          "\"input_tokens\":660,\"cache_read_input_tokens\":20,\"output_tokens\":1}}}");
    chunk(&w, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
              "\"text_delta\",\"text\":\"Hello\"}}");
    expect_usage("bedrock-invoke", &w, SG_OUTCOME_TRUNCATED, 680, -1, 20, 5);
    chunk(&w, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
              "\"usage\":{\"output_tokens\":38}}");
    chunk(&w, "{\"type\":\"message_stop\",\"amazon-bedrock-invocationMetrics\":{"
              "\"inputTokenCount\":999,\"outputTokenCount\":999,\"invocationLatency\":"
              "1798,\"firstByteLatency\":1507,\"cacheWriteInputTokenCount\":4}}");
    /* Claude's figures stand; the metrics add the cache write they alone
     * gave */
    expect_usage("bedrock-invoke", &w, SG_OUTCOME_OK, 684, 38, 20, 5);
    memset(&w, 0, sizeof(w));
    chunk(&w, "{\"generation\":\"Hi there\",\"stop_reason\":null}");
    chunk(&w, "{\"generation\":\"!\",\"stop_reason\":\"stop\","
              "\"amazon-bedrock-invocationMetrics\":{\"inputTokenCount\":12,"
              "\"outputTokenCount\":4,\"invocationLatency\":9,\"firstByteLatency\":5}}");
    expect_usage("bedrock-invoke", &w, SG_OUTCOME_OK, 12, 4, -1, 9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(converse_is_guarded_from_its_first_delta_to_messagestop),
        cmocka_unit_test(converse_ends_cleanly_only_after_messagestop),
        cmocka_unit_test(converse_metadata_alone_is_no_first_token),
        cmocka_unit_test(converse_without_content_has_no_first_token),
        cmocka_unit_test(throttling_before_the_first_token_is_a_transient_provider_error),
        cmocka_unit_test(other_exceptions_and_error_messages_are_not_transient),
        cmocka_unit_test(a_damaged_message_is_a_protocol_error),
        cmocka_unit_test(invoke_reads_anthropic_events_inside_the_chunks),
        cmocka_unit_test(invoke_reads_other_model_families),
        cmocka_unit_test(converse_reads_the_metadata_usage),
        cmocka_unit_test(invoke_reads_claude_usage_and_the_invocation_metrics),
        cmocka_unit_test(invoke_sees_the_models_own_error_and_the_streams_exceptions),
    };
    return cmocka_run_group_tests_name("bedrock profiles", tests, NULL, NULL);
}
