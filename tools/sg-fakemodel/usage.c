/*
 * The token usage each provider puts in its stream, in its own fields and
 * places (docs/sg-fakemodel.md, "Usage"), from the scenario's figures:
 * the input (prompt_tokens, cached_tokens among them), the output - the
 * items streamed so far plus reasoning_tokens, the hidden reasoning a
 * thinking model bills as output - and the reasoning alone.  The callers
 * (generate.c, bedrock.c) decide when a figure is sent: a stream cut,
 * dropped or stalled before its end sends no final usage, as a provider's
 * would not.
 */
#include "server.h"

/* The figures of one response so far. */
typedef struct {
    long long input;     /* cached included */
    long long cached;    /* read from a cache */
    long long output;    /* reasoning included */
    long long reasoning; /* hidden, not streamed */
} usage;

static usage usage_of(const exchange *ex) {
    usage u;
    u.input = ex->sc.prompt_tokens > 0 ? (long long)ex->sc.prompt_tokens : 0;
    u.cached = (long long)ex->sc.cached_tokens;
    u.reasoning = (long long)ex->sc.reasoning_tokens;
    u.output = (long long)ex->items + u.reasoning;
    return u;
}

void usage_openai_chunk(const exchange *ex, sg_fm_buf *b) {
    usage u = usage_of(ex);
    sg_fm_buf_printf(
        b,
        "data: "
        "{\"id\":\"chatcmpl-%llu\",\"object\":\"chat.completion.chunk\",\"created\":"
        "1700000000,\"model\":\"sg-fakemodel\",\"choices\":[],\"usage\":{"
        "\"prompt_tokens\":%lld,\"completion_tokens\":%lld,\"total_tokens\":%lld,"
        "\"prompt_tokens_details\":{\"cached_tokens\":%lld,\"audio_tokens\":0},"
        "\"completion_tokens_details\":{\"reasoning_tokens\":%lld,\"audio_tokens\":0,"
        "\"accepted_prediction_tokens\":0,\"rejected_prediction_tokens\":0}}}\n\n",
        (unsigned long long)ex->id, u.input, u.output, u.input + u.output, u.cached,
        u.reasoning);
}

void usage_responses(const exchange *ex, sg_fm_buf *b) {
    usage u = usage_of(ex);
    sg_fm_buf_printf(b,
                     "{\"input_tokens\":%lld,\"input_tokens_details\":{\"cached_tokens\":"
                     "%lld},\"output_tokens\":%lld,\"output_tokens_details\":{"
                     "\"reasoning_tokens\":%lld},\"total_tokens\":%lld}",
                     u.input, u.cached, u.output, u.reasoning, u.input + u.output);
}

void usage_anthropic(const exchange *ex, sg_fm_buf *b, bool final) {
    usage u = usage_of(ex);
    /* input_tokens leaves the cache reads out: they are counted apart */
    sg_fm_buf_printf(b,
                     "{\"input_tokens\":%lld,\"cache_creation_input_tokens\":0,"
                     "\"cache_read_input_tokens\":%lld,\"output_tokens\":%lld",
                     u.input - u.cached, u.cached, final ? u.output : 1LL);
    if (final && u.reasoning > 0) {
        sg_fm_buf_printf(b, ",\"output_tokens_details\":{\"thinking_tokens\":%lld}",
                         u.reasoning);
    }
    sg_fm_buf_append(b, "}", 1);
}

size_t usage_gemini_meta(const exchange *ex, int64_t candidates, char *out, size_t cap) {
    usage u = usage_of(ex);
    const struct {
        const char *name;
        long long value;
    } f[] = {
        {"promptTokenCount", u.input},
        {"candidatesTokenCount", (long long)candidates},
        {"totalTokenCount", u.input + (long long)candidates + u.reasoning},
        {"cachedContentTokenCount", u.cached},
        {"thoughtsTokenCount", u.reasoning},
    };
    size_t len = (size_t)snprintf(out, cap, "\"usageMetadata\": {");
    const char *sep = "";
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]) && len < cap; i++) {
        if (f[i].value != 0) {
            len += (size_t)snprintf(out + len, cap - len, "%s\"%s\": %lld", sep,
                                    f[i].name, f[i].value);
            sep = ",";
        }
    }
    if (len < cap) {
        len += (size_t)snprintf(out + len, cap - len,
                                "},\"modelVersion\": \"sg-fakemodel\",\"responseId\": "
                                "\"gemini-%llu\"",
                                (unsigned long long)ex->id);
    }
    return len < cap ? len : cap - 1;
}

void usage_ollama(const exchange *ex, sg_fm_buf *b) {
    usage u = usage_of(ex);
    if (u.input > 0) {
        sg_fm_buf_printf(b, ",\"prompt_eval_count\":%lld", u.input);
    }
    if (u.output > 0) {
        sg_fm_buf_printf(b, ",\"eval_count\":%lld", u.output);
    }
}

/* Bedrock's cache figures, when there are any: the reads, and no writes. */
static void bedrock_cache(sg_fm_buf *b, const usage *u, const char *read,
                          const char *write) {
    if (u->cached > 0) {
        sg_fm_buf_printf(b, ",\"%s\":%lld,\"%s\":0", read, u->cached, write);
    }
}

void usage_converse(const exchange *ex, sg_fm_buf *b) {
    usage u = usage_of(ex);
    sg_fm_buf_printf(b,
                     "{\"inputTokens\":%lld,\"outputTokens\":%lld,\"totalTokens\":%lld",
                     u.input - u.cached, u.output, u.input + u.output);
    bedrock_cache(b, &u, "cacheReadInputTokens", "cacheWriteInputTokens");
    sg_fm_buf_append(b, "}", 1);
}

void usage_invoke_metrics(const exchange *ex, sg_fm_buf *b, long long latency_ms) {
    usage u = usage_of(ex);
    sg_fm_buf_printf(b,
                     "{\"inputTokenCount\":%lld,\"outputTokenCount\":%lld,"
                     "\"invocationLatency\":%lld,\"firstByteLatency\":%lld",
                     u.input - u.cached, u.output, latency_ms, latency_ms);
    bedrock_cache(b, &u, "cacheReadInputTokenCount", "cacheWriteInputTokenCount");
    sg_fm_buf_append(b, "}", 1);
}
