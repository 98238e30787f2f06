/*
 * What each provider profile reads of an attempt's usage (docs/profiles.md,
 * "Usage"), through sg_stream with a hand-driven clock: the provider's
 * figures on a clean stream, normalised (input with the cached input,
 * output with the reasoning); what is left of them when the stream is
 * cut; the generated text counted for an estimate; and that the usage
 * events change nothing the clocks or the consumer see (OpenAI's usage
 * chunk is metadata, not a token).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

#include "framing/usage.h"
#include "profile_run.h"

#define T0 SG_SEC(100)

/* A Chat Completions chunk with @delta (a JSON object's members). */
#define OAI(delta)                                                                   \
    "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":" \
    "[{\"index\":0,\"delta\":{" delta "},\"finish_reason\":null}],\"usage\":null}\n\n"

/* With stream_options.include_usage: every chunk has "usage": null, and
 * one more chunk, "choices": [], carries the totals before [DONE].  It is
 * metadata: no token, the clocks as without it, a clean end. */
static void openai_usage_chunk_is_metadata_not_a_token(void **state) {
    (void)state;
    run r;
    sg_stream s;
    sg_stream_config cfg;
    char *buf = play_begin(&s, &cfg, "openai", &r, T0);
    const char *body =
        OAI("\"role\":\"assistant\",\"content\":\"\"") OAI("\"content\":\"Hi\"")
            OAI("\"content\":\" there\"") "data: "
                                          "{\"id\":\"chatcmpl-1\",\"object\":\"chat."
                                          "completion.chunk\",\"choices\":[{"
                                          "\"index\":0,\"delta\":{},\"finish_reason\":"
                                          "\"stop\"}],\"usage\":null}\n\n"
                                          "data: "
                                          "{\"id\":\"chatcmpl-1\",\"object\":\"chat."
                                          "completion.chunk\",\"choices\":[],"
                                          "\"usage\":{\"prompt_tokens\":10,\"completion_"
                                          "tokens\":5,\"total_tokens\":15}}\n\n";
    assert_int_equal(sg_stream_feed(&s, body, strlen(body), T0 + SG_MS(300)), 0);
    assert_int_equal(sg_stream_feed(&s, "data: [DONE]\n\n", 14, T0 + SG_MS(310)), 1);
    play_end(&s, buf, &r, T0 + SG_MS(311));
    assert_int_equal(r.outcome, SG_OUTCOME_OK);
    assert_int_equal(r.ttft, SG_MS(300));
    assert_int_equal(r.items, 5);
    /* the role chunk and the usage chunk; the finish chunk after the first
     * token is an item like a token */
    assert_int_equal(r.metas, 2);
    assert_int_equal(r.tokens, 3);
}

/* What @profile reads of @head then @tail (NULL: none), fed in one read
 * at T0 + 1 ms (or in pieces of @step bytes), then the body's end - which
 * concludes @outcome. */
static sg__usage_read usage_of(const char *profile, const char *head, const char *tail,
                               size_t step, sg_outcome outcome) {
    size_t hn = strlen(head), tn = tail != NULL ? strlen(tail) : 0;
    char *body = malloc(hn + tn + 1);
    assert_non_null(body);
    memcpy(body, head, hn);
    memcpy(body + hn, tail != NULL ? tail : "", tn + 1);
    run r;
    sg_stream s;
    sg_stream_config cfg;
    char *buf = play_begin(&s, &cfg, profile, &r, T0);
    size_t n = strlen(body);
    if (step == 0) {
        step = n;
    }
    for (size_t off = 0; off < n && r.feed_rc == 0; off += step) {
        r.feed_rc = sg_stream_feed(&s, body + off, n - off < step ? n - off : step,
                                   T0 + SG_MS(1));
    }
    play_end(&s, buf, &r, T0 + SG_MS(2));
    free(body);
    assert_int_equal(r.outcome, outcome);
    sg__usage_read u;
    assert_true(sg__stream_usage(sg__stream_of(&s), &u));
    return u;
}

/* The figures read (-1: unknown) and the text counted. */
static void expect(sg__usage_read u, int64_t in, int64_t out, int64_t cached,
                   int64_t reasoning, uint64_t text) {
    assert_int_equal(u.input, in);
    assert_int_equal(u.output, out);
    assert_int_equal(u.cached, cached);
    assert_int_equal(u.reasoning, reasoning);
    assert_int_equal(u.text_bytes, text);
}

#define OK SG_OUTCOME_OK
#define CUT SG_OUTCOME_TRUNCATED

/* Chat Completions: the usage chunk's totals, the details' cached and
 * reasoning figures; the text of content, reasoning_content and tool
 * call arguments (decoded: an escape is the byte it stands for). */
static void openai_reads_the_usage_chunk(void **state) {
    (void)state;
    const char *deltas = OAI("\"role\":\"assistant\",\"content\":\"\"")
        OAI("\"reasoning_content\":\"ab\"") OAI("\"content\":\"Hi\\n\\u00e9\"")
            OAI("\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]");
    const char *usage =
        "data: {\"id\":\"chatcmpl-1\",\"choices\":[],\"usage\":{\"prompt_tokens\":2006,"
        "\"completion_tokens\":300,\"total_tokens\":2306,\"prompt_tokens_details\":{"
        "\"cached_tokens\":1920,\"audio_tokens\":0},\"completion_tokens_details\":{"
        "\"reasoning_tokens\":256,\"audio_tokens\":0}}}\n\ndata: [DONE]\n\n";
    /* "ab", "Hi\n\u00e9" (2 + 1 + 2 bytes), "{}"; read whole or byte by
     * byte */
    expect(usage_of("openai", deltas, usage, 0, OK), 2006, 300, 1920, 256, 2 + 5 + 2);
    expect(usage_of("openai", deltas, usage, 1, OK), 2006, 300, 1920, 256, 9);
    /* without include_usage: no figure, the text only; cut: the same */
    expect(usage_of("openai", deltas, "data: [DONE]\n\n", 0, OK), -1, -1, -1, -1, 9);
    expect(usage_of("openai", deltas, "data: {\"id\":\"chatcm", 0, CUT), -1, -1, -1, -1,
           9);
    /* a server that sends usage on every chunk (vLLM's continuous stats):
     * the last one counts, never a sum */
    expect(usage_of("openai",
                    "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{"
                    "\"prompt_tokens\":7,\"completion_tokens\":1}}\n\n",
                    "data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}],\"usage\":{"
                    "\"prompt_tokens\":7,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
                    0, OK),
           7, 2, -1, -1, 2);
    /* a profile the caller replaced with a classifier of its own reads
     * nothing */
    sg_stream s;
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    assert_int_equal(sg_profile_framing("openai", &cfg), 0);
    assert_int_equal(sg_stream_config_set_classifier(&cfg, NULL, NULL), 0);
    assert_int_equal(sg_stream_init_mem(&s, &cfg, NULL, NULL, NULL), 0);
    sg__usage_read u;
    assert_false(sg__stream_usage(sg__stream_of(&s), &u));
    expect(u, -1, -1, -1, -1, 0);
    sg_stream_release(&s);
}

/* Responses: the terminal event's response.usage; the text of every
 * *.delta but audio's. */
static void openai_responses_reads_the_terminal_event(void **state) {
    (void)state;
    const char *head =
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{"
        "\"status\":\"in_progress\",\"usage\":null}}\n\n"
        "event: response.output_text.delta\ndata: {\"type\":\"response.output_text."
        "delta\",\"delta\":\"Hello\",\"obfuscation\":\"xyzxyz\"}\n\n"
        "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response."
        "reasoning_summary_text.delta\",\"delta\":\"why\"}\n\n"
        "event: response.audio.delta\ndata: {\"type\":\"response.audio.delta\","
        "\"delta\":\"UklGRg==\"}\n\n";
    const char *end =
        "event: response.output_text.done\ndata: {\"type\":\"response.output_text."
        "done\",\"text\":\"Hello\"}\n\n"
        "event: response.completed\ndata: {\"type\":\"response.completed\","
        "\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":13,"
        "\"input_tokens_details\":{\"cached_tokens\":4},\"output_tokens\":12,"
        "\"output_tokens_details\":{\"reasoning_tokens\":3},\"total_tokens\":25}}}\n\n";
    expect(usage_of("openai-responses", head, end, 0, OK), 13, 12, 4, 3, 8);
    expect(usage_of("openai-responses", head, NULL, 0, CUT), -1, -1, -1, -1, 8);
}

/* Anthropic: message_start's input and cache figures (its output_tokens
 * is a placeholder, never read), message_delta's cumulative totals
 * overwriting them; input = input_tokens + cache reads + cache writes. */
static void anthropic_reads_start_and_delta(void **state) {
    (void)state;
    const char *start =
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{"
        "\"content\":[],\"usage\":{\"input_tokens\":40,\"cache_creation_input_tokens\":"
        "8,\"cache_read_input_tokens\":100,\"output_tokens\":1}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
        "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}\n\n"
        "event: ping\ndata: {\"type\": \"ping\"}\n\n"
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \\\"you\\\"\"}}\n\n";
    const char *end =
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
        "\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":6}}\n\n"
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},"
        "\"usage\":{\"input_tokens\":41,\"cache_creation_input_tokens\":null,"
        "\"output_tokens\":15,\"output_tokens_details\":{\"thinking_tokens\":9}}}\n\n"
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    /* cut: the input is the provider's, the output unknown; "hmm" and
     * Hi "you" */
    expect(usage_of("anthropic", start, NULL, 0, CUT), 148, -1, 100, -1, 3 + 8);
    /* a null cache figure leaves the one before */
    expect(usage_of("anthropic", start, end, 0, OK), 41 + 8 + 100, 15, 100, 9, 11);
}

/* Gemini: each chunk's usageMetadata is the running total (never summed):
 * a cut stream keeps the provider's figures up to the cut; output is
 * candidates + thoughts; at the end a zero left out is 0. */
static void gemini_reads_running_totals(void **state) {
    (void)state;
    const char *chunks =
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"tok0\"}],"
        "\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,"
        "\"candidatesTokenCount\": 1,\"cachedContentTokenCount\": 3,\"totalTokenCount\": "
        "40,\"thoughtsTokenCount\": 30},\"modelVersion\": \"m\"}\n\n"
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"tok1\"}],"
        "\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": 9,"
        "\"candidatesTokenCount\": 2,\"cachedContentTokenCount\": 3,\"totalTokenCount\": "
        "41,\"thoughtsTokenCount\": 30},\"modelVersion\": \"m\"}\n\n";
    const char *end =
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],"
        "\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}],"
        "\"usageMetadata\": {\"promptTokenCount\": 9,\"candidatesTokenCount\": 3,"
        "\"totalTokenCount\": 12}}\n\n";
    expect(usage_of("gemini", chunks, NULL, 0, CUT), 9, 2 + 30, 3, 30, 8);
    /* the last chunk left the cache and the thoughts out: zeros */
    expect(usage_of("gemini", chunks, end, 0, OK), 9, 3, 0, 0, 8);
}

/* Past the sample's first items Gemini's running output is read on the
 * sampled chunks only: a stream cut after one of them has the provider's
 * figure, one cut after any other has none (it is estimated then) - never
 * the figure of a chunk before, stale, passed for the provider's. */
static void gemini_never_keeps_a_stale_running_output(void **state) {
    (void)state;
    static char body[1 << 15];
    int sampled = 0, unsampled = 0;
    for (int n = SG__U_EXACT + 1; n <= SG__U_EXACT + 40; n++) {
        size_t o = 0;
        for (int i = 0; i < n; i++) {
            o += (size_t)snprintf(body + o, sizeof(body) - o,
                                  "data: {\"candidates\": [{\"content\": {\"parts\": "
                                  "[{\"text\": \"tok\"}],\"role\": \"model\"},\"index\": "
                                  "0}],\"usageMetadata\": {\"promptTokenCount\": 9,"
                                  "\"candidatesTokenCount\": %d,\"totalTokenCount\": %d}}"
                                  "\n\n",
                                  i + 1, i + 10);
        }
        sg__usage_read u = usage_of("gemini", body, NULL, 0, CUT);
        assert_int_equal(u.input, 9);
        if (sg__usage_in_sample((uint64_t)n - 1)) {
            assert_int_equal(u.output, n);
            sampled++;
        } else {
            assert_int_equal(u.output, -1);
            unsampled++;
        }
    }
    assert_true(sampled > 0 && unsampled > 0);
}

/* Ollama: the done line's prompt_eval_count and eval_count (a zero left
 * out is 0); no cached or reasoning figure. */
static void ollama_reads_the_done_line(void **state) {
    (void)state;
    const char *lines =
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"Hel\"},"
        "\"done\":false}\n"
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\","
        "\"thinking\":\"so\"},\"done\":false}\n";
    const char *done =
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"lo\"},"
        "\"done_reason\":\"stop\",\"done\":true,\"total_duration\":1,"
        "\"eval_count\":282,\"eval_duration\":4}\n";
    expect(usage_of("ollama", lines, NULL, 0, CUT), -1, -1, -1, -1, 5);
    expect(usage_of("ollama", lines, done, 0, OK), 0, 282, -1, -1, 7);
}

/* @n chunks whose tokens cycle through @words (the 1st, the 2nd, ...)
 * into @body; the bytes of their text. */
static uint64_t chunks(char *body, size_t cap, int n, const char *const *words,
                       size_t nwords) {
    size_t o = 0;
    uint64_t text = 0;
    for (int i = 0; i < n; i++) {
        const char *w = words[(size_t)i % nwords];
        o += (size_t)snprintf(body + o, cap - o, OAI("\"content\":\"%s\""), w);
        text += strlen(w);
    }
    return text;
}

/* Past the first SG__U_EXACT items one in SG__U_EVERY has its text
 * counted, and the rest is extrapolated from the data bytes: exact when
 * the items carry the same text, within a few per cent when their texts
 * vary as a model's tokens do (the ratio holds as long as the text's share
 * of the items does not drift). */
static void text_past_the_sample_is_extrapolated(void **state) {
    (void)state;
    static char body[1 << 17];
    static const char *const same[] = {"tok5"};
    static const char *const varied[] = {" the", " answer", ",", " is",     " forty",
                                         "-",    "two",     ".", " Indeed", " so"};
    uint64_t real = chunks(body, sizeof(body), SG__U_EXACT, varied, 10);
    expect(usage_of("openai", body, "data: [DONE]\n\n", 0, OK), -1, -1, -1, -1, real);
    real = chunks(body, sizeof(body), 500, same, 1);
    expect(usage_of("openai", body, "data: [DONE]\n\n", 0, OK), -1, -1, -1, -1, real);
    real = chunks(body, sizeof(body), 500, varied, 10);
    sg__usage_read u = usage_of("openai", body, "data: [DONE]\n\n", 0, OK);
    print_message("500 chunks of varied text: %llu bytes counted for %llu\n",
                  (unsigned long long)u.text_bytes, (unsigned long long)real);
    assert_true(u.text_bytes * 100 >= real * 95 && u.text_bytes * 100 <= real * 105);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(openai_usage_chunk_is_metadata_not_a_token),
        cmocka_unit_test(openai_reads_the_usage_chunk),
        cmocka_unit_test(openai_responses_reads_the_terminal_event),
        cmocka_unit_test(anthropic_reads_start_and_delta),
        cmocka_unit_test(gemini_reads_running_totals),
        cmocka_unit_test(gemini_never_keeps_a_stale_running_output),
        cmocka_unit_test(ollama_reads_the_done_line),
        cmocka_unit_test(text_past_the_sample_is_extrapolated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
