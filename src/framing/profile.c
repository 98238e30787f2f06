/*
 * Built-in provider profiles: the framing and the item classifier of each
 * model API's stream (docs/profiles.md; the facts, with their sources, are
 * in docs/provider-streams.md).  Each classifier looks inside an item's
 * JSON with the path scanner (jscan.h): after the first token only for an
 * in-band error, behind a quick reject, so a token costs tens of
 * nanoseconds.  Called by a stream with its usage figures as user_data
 * (usage.h), each also reads the attempt's usage and counts the generated
 * text, in the same pass (docs/profiles.md, "Usage").
 */
#include <streamguard/stream.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "framing/internal.h"
#include "framing/jscan.h"
#include "framing/usage.h"

/* ------------------------------------------------------------- helpers */

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static bool is(const char *p, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return n == l && memcmp(p, lit, l) == 0;
}

static bool ends_with(const char *p, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return n >= l && memcmp(p + n - l, lit, l) == 0;
}

/* The paths the profiles look at, written out at compile time. */
static const sg__jpath P_ERROR = SG__JPATH1("error");
static const sg__jpath P_ERROR_TYPE = SG__JPATH2("error", "type");
static const sg__jpath P_ERROR_CODE = SG__JPATH2("error", "code");
static const sg__jpath P_ERROR_STATUS = SG__JPATH2("error", "status");
static const sg__jpath P_ERROR_MESSAGE = SG__JPATH2("error", "message");
static const sg__jpath P_CODE = SG__JPATH1("code");
static const sg__jpath P_MESSAGE = SG__JPATH1("message");
static const sg__jpath P_TYPE = SG__JPATH1("type");
static const sg__jpath P_RESPONSE_ERROR_CODE = SG__JPATH3("response", "error", "code");
static const sg__jpath P_RESPONSE_ERROR_MESSAGE =
    SG__JPATH3("response", "error", "message");
static const sg__jpath P_DONE = SG__JPATH1("done");
static const sg__jpath P_ERROR_DETAILS_CODE =
    SG__JPATH3("error", "details", "error_code");

/* The value at @path. */
static bool at(const sg_item *item, const sg__jpath *path, sg__jval *v) {
    return sg__jscan_find(item->data, item->data_len, path, v);
}

/* Whether any of the @n paths holds something (sg__jval_present). */
static bool any_present(const sg_item *item, const sg__jpath *paths, size_t n) {
    for (size_t i = 0; i < n; i++) {
        sg__jval v;
        if (sg__jscan_find_present(item->data, item->data_len, &paths[i], &v)) {
            return true;
        }
    }
    return false;
}

/* A string at @path into err's type or message (views into the item); a
 * number too when @number (a code such as OpenRouter's 502 names the
 * error by itself). */
static void take_value(const sg_item *item, const sg__jpath *path, bool number,
                       const char **p, size_t *n) {
    sg__jval v;
    if (at(item, path, &v) &&
        (v.type == SG__JSTRING || (number && v.type == SG__JNUMBER))) {
        *p = v.p;
        *n = v.n;
    }
}

static void take_string(const sg_item *item, const sg__jpath *path, const char **p,
                        size_t *n) {
    take_value(item, path, false, p, n);
}

/* An HTTP-like numeric error.code that says "come back later": 408, 429,
 * or 5xx (vLLM's and OpenRouter's errors carry one; provider-streams.md). */
static bool transient_code(const sg_item *item) {
    sg__jval v;
    if (!at(item, &P_ERROR_CODE, &v) || v.type != SG__JNUMBER || v.n != 3) {
        return false;
    }
    int code = (v.p[0] - '0') * 100 + (v.p[1] - '0') * 10 + (v.p[2] - '0');
    return code == 408 || code == 429 || (code >= 500 && code <= 599);
}

static bool one_of(const char *p, size_t n, const char *const *list) {
    for (; *list != NULL; list++) {
        if (is(p, n, *list)) {
            return true;
        }
    }
    return false;
}

/* Error types that say "come back later": overload, rate limit,
 * unavailable, a server-side hiccup. */
static const char *const transient_types[] = {
    "server_error",
    "overloaded_error",
    "rate_limit_error",
    "rate_limit_exceeded",
    "service_unavailable",
    "api_error",
    "timeout_error",
    "unavailable_error",
    "UNAVAILABLE",
    "RESOURCE_EXHAUSTED",
    "INTERNAL",
    "DEADLINE_EXCEEDED",
    "vector_store_timeout",
    NULL,
};

/* Whether the provider said retrying cannot help until something outside
 * the request changes (and OpenAI's insufficient_quota, read from the
 * type in named_error).  Anthropic's spend limits: a rate_limit_error (429)
 * whose error.details.error_code is enforced_spend_limit_reached (the
 * tier's monthly cap: "Retrying, including the SDKs' automatic retries,
 * fails until" the month turns - Anthropic's API reference, Rate limits)
 * or contract_spend_limit_reached, and a linked organization's (402);
 * @anthropic-ai/sdk 1.15.0 reads the same field (src/client.ts
 * makeStatusError) into its *SpendLimitReachedError classes
 * (src/core/error-classes.ts). */
static bool final_error(const sg_item *item) {
    sg__jval v;
    return at(item, &P_ERROR_DETAILS_CODE, &v) && v.type == SG__JSTRING &&
           ends_with(v.p, v.n, "_spend_limit_reached");
}

/* The error's type and message at two paths (unless found already), and
 * whether the type is a transient one (never when the provider said its
 * refusal is final). */
static sg_item_kind named_error(const sg_item *item, sg_item_error *err,
                                const sg__jpath *type_path,
                                const sg__jpath *message_path) {
    if (err->type == NULL) {
        take_value(item, type_path, type_path == &P_ERROR_CODE, &err->type,
                   &err->type_len);
    }
    if (err->message == NULL) {
        take_string(item, message_path, &err->message, &err->message_len);
    }
    /* OpenAI's insufficient_quota: a 429 no wait lets through (its
     * platform docs, "Error codes"), final as a spend limit is */
    err->final = final_error(item) || (err->type != NULL && is(err->type, err->type_len,
                                                               "insufficient_quota"));
    err->retryable =
        !err->final &&
        ((err->type != NULL && one_of(err->type, err->type_len, transient_types)) ||
         transient_code(item));
    return SG_ITEM_ERROR;
}

/* A top-level "error" member: an in-band error, its type and message
 * (the caller's quick reject said "error" may be there). */
static bool top_error_scan(const sg_item *item, sg_item_error *err,
                           const sg__jpath *type_path, const sg__jpath *message_path) {
    sg__jval v;
    if (!at(item, &P_ERROR, &v) || v.type == SG__JNULL) {
        return false;
    }
    if (v.type == SG__JSTRING) { /* {"error": "message"} (Ollama, some servers) */
        err->message = v.p;
        err->message_len = v.n;
        err->type = "error";
        err->type_len = 5;
        err->retryable = false;
        return true;
    }
    named_error(item, err, type_path, message_path);
    return true;
}

static bool top_error(const sg_item *item, sg_item_error *err, const sg__jpath *type_path,
                      const sg__jpath *message_path) {
    return sg__jscan_may_have_key(item->data, item->data_len, "error", 5) &&
           top_error_scan(item, err, type_path, message_path);
}

/* --------------------------------------------------------------- openai */

/* Chat Completions (and the servers that copy it: vLLM, llama.cpp, ...):
 * data: chunks, [DONE]; the first token is the first chunk with content,
 * a tool call (or the legacy function_call), a refusal, reasoning or
 * audio; an error is {"error": {...}}, or an event named error (the SDK
 * raises it whatever its data). */
static const sg__jpath openai_tokens[] = {
    SG__JPATH4("choices", "[]", "delta", "content"),
    SG__JPATH4("choices", "[]", "delta", "tool_calls"),
    SG__JPATH4("choices", "[]", "delta", "refusal"),
    SG__JPATH4("choices", "[]", "delta", "reasoning_content"),
    SG__JPATH4("choices", "[]", "delta", "reasoning"),
    SG__JPATH4("choices", "[]", "delta", "audio"),
    SG__JPATH4("choices", "[]", "delta", "function_call"),
};

/* An {"error": ...} chunk: its type at error.type, else error.code. */
static sg_item_kind openai_error(const sg_item *item, sg_item_error *err) {
    return err->type == NULL ? named_error(item, err, &P_ERROR_CODE, &P_ERROR_MESSAGE)
                             : SG_ITEM_ERROR;
}

/* Chat Completions read for usage too: the quick reject looks for the
 * usage object beside the error (the last non-null one holds the
 * request's totals; the chunk stream_options.include_usage asks for,
 * "choices": [], is metadata, not a token); a sample of the chunks has
 * the text of its deltas counted. */
static sg_item_kind openai_usage(const sg_item *item, sg_item_error *err, uint32_t *u) {
    static const sg__jkey keys[] = {{"error", 5, 0}, {"usage", 5, '{'}};
    static const sg__jkey texts[] = {
        {"content", 7, '"'}, {"reasoning_content", 17, '"'}, {"reasoning", 9, '"'},
        {"refusal", 7, '"'}, {"arguments", 9, '"'},
    };
    static const sg__jpath usage = SG__JPATH1("usage");
    static const sg__ufield fields[] = {
        {SG__JPATH1("prompt_tokens"), SG__U_IN},
        {SG__JPATH1("completion_tokens"), SG__U_OUT},
        {SG__JPATH2("prompt_tokens_details", "cached_tokens"), SG__U_CREAD},
        {SG__JPATH2("completion_tokens_details", "reasoning_tokens"), SG__U_REASON},
    };
    unsigned may = sg__jscan_may_have(item->data, item->data_len, keys, COUNT(keys));
    if ((may & 1) && top_error_scan(item, err, &P_ERROR_TYPE, &P_ERROR_MESSAGE)) {
        return openai_error(item, err);
    }
    sg__jval v;
    if ((may & 2) && at(item, &usage, &v) && v.type == SG__JOBJECT) {
        sg__usage_fields(u, v.p, v.n, fields, COUNT(fields), 0);
        if (!any_present(item, openai_tokens, COUNT(openai_tokens))) {
            return SG_ITEM_META; /* the usage chunk: no delta */
        }
    }
    sg__usage_text(u, item, texts, COUNT(texts));
    if (item->index > 0) {
        return SG_ITEM_TOKEN;
    }
    return any_present(item, openai_tokens, COUNT(openai_tokens)) ? SG_ITEM_TOKEN
                                                                  : SG_ITEM_META;
}

static sg_item_kind classify_openai(const sg_item *item, sg_item_error *err, void *ud) {
    if (is(item->event, item->event_len, "error")) {
        (void)top_error(item, err, &P_ERROR_TYPE, &P_ERROR_MESSAGE);
        return named_error(item, err, &P_TYPE, &P_MESSAGE);
    }
    if (ud != NULL) {
        return openai_usage(item, err, ud);
    }
    if (top_error(item, err, &P_ERROR_TYPE, &P_ERROR_MESSAGE)) {
        return openai_error(item, err);
    }
    if (item->index > 0) {
        return SG_ITEM_TOKEN; /* past the first token, only errors matter */
    }
    return any_present(item, openai_tokens, COUNT(openai_tokens)) ? SG_ITEM_TOKEN
                                                                  : SG_ITEM_META;
}

/* ------------------------------------------------------------ anthropic */

/* Messages API: named events; ping is a keepalive; content_block_delta
 * bears the tokens; message_stop is the end; event: error the failure. */
/* The text of a Messages content_block_delta (text_delta, thinking_delta,
 * input_json_delta), and its usage events (message_start's input and
 * cache figures, message_delta's cumulative totals) - the same events
 * inside Bedrock's InvokeModel chunks. */
static void anthropic_usage_events(const sg_item *item, const char *t, size_t n,
                                   uint32_t *u) {
    static const sg__jpath start = SG__JPATH2("message", "usage");
    static const sg__jpath delta = SG__JPATH1("usage");
    sg__jval v;
    if (is(t, n, "message_start") && at(item, &start, &v) && v.type == SG__JOBJECT) {
        sg__usage_anthropic(u, v.p, v.n, true);
    } else if (is(t, n, "message_delta") && at(item, &delta, &v) &&
               v.type == SG__JOBJECT) {
        sg__usage_anthropic(u, v.p, v.n, false);
    }
}

static const sg__jkey anthropic_texts[] = {
    {"text", 4, '"'}, {"thinking", 8, '"'}, {"partial_json", 12, '"'}};

static sg_item_kind classify_anthropic(const sg_item *item, sg_item_error *err,
                                       void *ud) {
    const char *t = item->event;
    size_t n = item->event_len;
    if (is(t, n, "ping")) {
        return SG_ITEM_KEEPALIVE;
    }
    if (is(t, n, "error")) {
        return named_error(item, err, &P_ERROR_TYPE, &P_ERROR_MESSAGE);
    }
    if (is(t, n, "content_block_delta")) {
        if (ud != NULL) {
            sg__usage_text(ud, item, anthropic_texts, COUNT(anthropic_texts));
        }
        return SG_ITEM_TOKEN;
    }
    if (ud != NULL) {
        anthropic_usage_events(item, t, n, ud);
    }
    if (is(t, n, "message_stop")) {
        return SG_ITEM_END;
    }
    return item->index > 0 ? SG_ITEM_TOKEN : SG_ITEM_META;
}

/* --------------------------------------------------------------- ollama */

/* The done line's counts: prompt_eval_count (cached prompt tokens
 * included), eval_count (thinking included); a zero is left out
 * (omitempty). */
static void ollama_done_usage(const sg_item *item, uint32_t *u) {
    static const sg__ufield fields[] = {
        {SG__JPATH1("prompt_eval_count"), SG__U_IN},
        {SG__JPATH1("eval_count"), SG__U_OUT},
    };
    sg__usage_fields(u, item->data, item->data_len, fields, COUNT(fields),
                     SG__UF_ABSENT_ZERO);
}

/* /api/chat, /api/generate: NDJSON; "done": true is the end (and may carry
 * the last token); {"error": "..."} the failure (no type: not retried).
 * Read for usage, a sample of the lines has its text counted. */
static sg_item_kind classify_ollama(const sg_item *item, sg_item_error *err, void *ud) {
    static const sg__jkey texts[] = {
        {"content", 7, '"'}, {"thinking", 8, '"'}, {"response", 8, '"'}};
    /* one pass proves most lines hold neither an error nor "done": true
     * ("done" itself is in every line) */
    static const sg__jkey keys[] = {{"error", 5, 0}, {"done", 4, 't'}};
    unsigned may = sg__jscan_may_have(item->data, item->data_len, keys, COUNT(keys));
    if ((may & 1) && top_error_scan(item, err, &P_ERROR_TYPE, &P_ERROR_MESSAGE)) {
        err->retryable = false; /* a message only: transient or not is unknown */
        return SG_ITEM_ERROR;
    }
    if (ud != NULL) {
        sg__usage_text(ud, item, texts, COUNT(texts));
    }
    static const sg__jpath tokens[] = {
        SG__JPATH2("message", "content"),    SG__JPATH1("response"),
        SG__JPATH2("message", "thinking"),   SG__JPATH1("thinking"),
        SG__JPATH2("message", "tool_calls"),
    };
    sg__jval v;
    if ((may & 2) && at(item, &P_DONE, &v) && v.type == SG__JTRUE) {
        if (ud != NULL) {
            ollama_done_usage(item, ud);
        }
        /* the done line usually has "" for content; when it carries text
         * it is a token too */
        return any_present(item, tokens, COUNT(tokens)) ? SG_ITEM_END_TOKEN : SG_ITEM_END;
    }
    return item->index > 0 || any_present(item, tokens, COUNT(tokens)) ? SG_ITEM_TOKEN
                                                                       : SG_ITEM_META;
}

/* --------------------------------------------------------------- gemini */

/* usageMetadata, the running totals of the request so far: the whole of
 * it at the first chunk that has it and at the end (where a zero left out
 * is 0, as proto3 writes JSON); in between only candidatesTokenCount,
 * the one that grows, found by the chunk's quick reject. */
static void gemini_usage_object(const sg_item *item, bool end, uint32_t *u) {
    static const sg__jpath usage = SG__JPATH1("usageMetadata");
    static const sg__ufield fields[] = {
        {SG__JPATH1("promptTokenCount"), SG__U_IN},
        {SG__JPATH1("candidatesTokenCount"), SG__U_OUT},
        {SG__JPATH1("cachedContentTokenCount"), SG__U_CREAD},
        {SG__JPATH1("thoughtsTokenCount"), SG__U_REASON},
    };
    sg__jval v;
    if (at(item, &usage, &v) && v.type == SG__JOBJECT) {
        u[SG__U_SDATA] |= SG__U_OUT_EXCL; /* output = candidates + thoughts */
        sg__usage_fields(u, v.p, v.n, fields, COUNT(fields),
                         end ? SG__UF_ABSENT_ZERO : 0);
    }
}

/* The quick reject of a chunk read for usage (bits as without: error,
 * finishReason, blockReason), and its usage and text.  Every chunk's
 * usageMetadata is the running total, but finding it in each costs more
 * than the 5 ns a chunk may spend on usage (+13-20 ns): it is read whole
 * at the first chunk that has it and at the end, and its running output
 * on the chunks of the text's sample (sg__usage_carrier) - on any other
 * the output is unknown again, so that a stream cut there has it
 * estimated, never a stale figure passed for the provider's. */
static unsigned gemini_scan(const sg_item *item, uint32_t *u) {
    static const sg__jkey keys[] = {
        {"error", 5, 0}, {"finishReason", 12, 0}, {"blockReason", 11, 0}};
    static const sg__jkey texts[] = {{"text", 4, '"'}};
    unsigned may = sg__jscan_may_have(item->data, item->data_len, keys, COUNT(keys));
    bool sampled = sg__usage_carrier(u, item);
    if (sampled) {
        sg__usage_text_of(u, item, texts, COUNT(texts));
    }
    uint64_t n = 0;
    if (!sg__usage_known(u, SG__U_IN) || (may & 6)) {
        gemini_usage_object(item, (may & 6) != 0, u);
    } else if (sampled && sg__usage_last_count(item->data, item->data_len,
                                               "candidatesTokenCount", 20, &n)) {
        sg__usage_set(u, SG__U_OUT, n);
    } else {
        sg__usage_forget(u, SG__U_OUT);
    }
    return may;
}

/* streamGenerateContent?alt=sse: data: chunks, no sentinel; a chunk with a
 * finishReason (or a blocked prompt) is the end; {"error": {...}} the
 * failure, its status the type. */
static sg_item_kind classify_gemini(const sg_item *item, sg_item_error *err, void *ud) {
    /* one pass proves most chunks hold no error and no end */
    static const sg__jkey keys[] = {
        {"error", 5, 0}, {"finishReason", 12, 0}, {"blockReason", 11, 0}};
    unsigned may =
        ud != NULL ? gemini_scan(item, ud)
                   : sg__jscan_may_have(item->data, item->data_len, keys, COUNT(keys));
    if ((may & 1) && top_error_scan(item, err, &P_ERROR_STATUS, &P_ERROR_MESSAGE)) {
        return SG_ITEM_ERROR;
    }
    static const sg__jpath ends[] = {
        SG__JPATH3("candidates", "[]", "finishReason"),
        SG__JPATH2("promptFeedback", "blockReason"),
    };
    static const sg__jpath tokens[] = {
        SG__JPATH6("candidates", "[]", "content", "parts", "[]", "text"),
        SG__JPATH6("candidates", "[]", "content", "parts", "[]", "functionCall"),
        /* image output and code execution are output too */
        SG__JPATH6("candidates", "[]", "content", "parts", "[]", "inlineData"),
        SG__JPATH6("candidates", "[]", "content", "parts", "[]", "executableCode"),
        SG__JPATH6("candidates", "[]", "content", "parts", "[]", "codeExecutionResult"),
    };
    if ((may & 6) && any_present(item, ends, COUNT(ends))) {
        /* the last chunk often carries the last text beside its reason */
        return any_present(item, tokens, COUNT(tokens)) ? SG_ITEM_END_TOKEN : SG_ITEM_END;
    }
    return item->index > 0 || any_present(item, tokens, COUNT(tokens)) ? SG_ITEM_TOKEN
                                                                       : SG_ITEM_META;
}

/* ------------------------------------------------------ openai-responses */

/* The Responses API's usage: the whole response's, in the terminal event
 * (response.completed, .incomplete, .failed). */
static void responses_usage(const sg_item *item, uint32_t *u) {
    static const sg__jpath usage = SG__JPATH2("response", "usage");
    static const sg__ufield fields[] = {
        {SG__JPATH1("input_tokens"), SG__U_IN},
        {SG__JPATH1("output_tokens"), SG__U_OUT},
        {SG__JPATH2("input_tokens_details", "cached_tokens"), SG__U_CREAD},
        {SG__JPATH2("output_tokens_details", "reasoning_tokens"), SG__U_REASON},
    };
    sg__jval v;
    if (u != NULL && at(item, &usage, &v) && v.type == SG__JOBJECT) {
        sg__usage_fields(u, v.p, v.n, fields, COUNT(fields), 0);
    }
}

/* Responses API: named events; *.delta bears the tokens; completed or
 * incomplete is the end; response.failed and error the failure.  Read for
 * usage, the "delta" string of a *.delta event is its text (output text,
 * reasoning, refusal, function call arguments - not audio, whose delta is
 * base64). */
static sg_item_kind classify_responses(const sg_item *item, sg_item_error *err,
                                       void *ud) {
    static const sg__jkey delta[] = {{"delta", 5, '"'}};
    const char *t = item->event;
    size_t n = item->event_len;
    if (n == 0 || is(t, n, "message")) {
        /* no event: line (a server that writes data: lines alone): the
         * event's own "type", as the SDK reads it */
        take_string(item, &P_TYPE, &t, &n);
    }
    if (is(t, n, "keepalive")) {
        return SG_ITEM_KEEPALIVE;
    }
    if (is(t, n, "response.completed") || is(t, n, "response.incomplete")) {
        responses_usage(item, ud);
        return SG_ITEM_END;
    }
    if (is(t, n, "response.failed")) {
        responses_usage(item, ud);
        return named_error(item, err, &P_RESPONSE_ERROR_CODE, &P_RESPONSE_ERROR_MESSAGE);
    }
    if (is(t, n, "error")) {
        /* flat in the schema, nested in some SDK fixtures: both */
        take_string(item, &P_CODE, &err->type, &err->type_len);
        take_string(item, &P_MESSAGE, &err->message, &err->message_len);
        return named_error(item, err, &P_ERROR_CODE, &P_ERROR_MESSAGE);
    }
    if (ends_with(t, n, ".delta")) {
        if (ud != NULL && !ends_with(t, n, "audio.delta")) {
            sg__usage_text(ud, item, delta, 1);
        }
        return SG_ITEM_TOKEN;
    }
    return item->index > 0 ? SG_ITEM_TOKEN : SG_ITEM_META;
}

/* -------------------------------------------------------------- bedrock */

/* ConverseStream's usage: the metadata event's, whose inputTokens leave
 * the cache out. */
static void converse_usage(const sg_item *item, uint32_t *u) {
    static const sg__jpath usage = SG__JPATH1("usage");
    static const sg__ufield fields[] = {
        {SG__JPATH1("inputTokens"), SG__U_IN},
        {SG__JPATH1("outputTokens"), SG__U_OUT},
        {SG__JPATH1("cacheReadInputTokens"), SG__U_CREAD},
        {SG__JPATH1("cacheWriteInputTokens"), SG__U_CWRITE},
    };
    sg__jval v;
    if (at(item, &usage, &v) && v.type == SG__JOBJECT) {
        u[SG__U_SDATA] |= SG__U_IN_EXCL;
        sg__usage_fields(u, v.p, v.n, fields, COUNT(fields), 0);
    }
}

/* ConverseStream (application/vnd.amazon.eventstream; exceptions are
 * handled by the framing): messageStart, contentBlockStart,
 * contentBlockDelta (the tokens: text, tool use, reasoning),
 * contentBlockStop, messageStop (the end), then metadata (usage).  Read
 * for usage, a contentBlockDelta's text is its delta.text (reasoning's
 * reasoningContent.text too) or a tool use's input. */
static sg_item_kind classify_converse(const sg_item *item, sg_item_error *err, void *ud) {
    static const sg__jkey texts[] = {{"text", 4, '"'}, {"input", 5, '"'}};
    (void)err;
    const char *t = item->event;
    size_t n = item->event_len;
    if (is(t, n, "contentBlockDelta")) {
        if (ud != NULL) {
            sg__usage_text(ud, item, texts, COUNT(texts));
        }
        return SG_ITEM_TOKEN;
    }
    if (ud != NULL && is(t, n, "metadata")) {
        converse_usage(item, ud);
    }
    if (is(t, n, "messageStop")) {
        return SG_ITEM_END; /* metadata may follow: the end is the body's */
    }
    return item->index > 0 ? SG_ITEM_TOKEN : SG_ITEM_META;
}

/* The standard base64 alphabet's value of @c, or -1. */
static int b64(unsigned char c) {
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes base64 @p[@n] (padding optional, nothing else allowed) into
 * @out[@cap].  Returns the decoded length, or -1 when @n is not base64 or
 * does not fit. */
static ptrdiff_t unbase64(const char *p, size_t n, char *out, size_t cap) {
    while (n > 0 && p[n - 1] == '=') {
        n--;
    }
    if (n % 4 == 1 || n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0) > cap) {
        return -1;
    }
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64((unsigned char)p[i]);
        if (v < 0) {
            return -1;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)(acc >> bits & 0xff);
        }
    }
    return (ptrdiff_t)o;
}

/* A decoded InvokeModel chunk's usage: Claude's own usage events; a
 * sample of the chunks has its text counted (Anthropic's deltas, the
 * other families' text fields). */
static void invoke_usage(const sg_item *model, const sg__jval *type, uint32_t *u) {
    static const sg__jkey texts[] = {
        {"text", 4, '"'},        {"thinking", 8, '"'},    {"partial_json", 12, '"'},
        {"outputText", 10, '"'}, {"generation", 10, '"'}, {"completion", 10, '"'},
        {"content", 7, '"'},
    };
    if (type != NULL) {
        anthropic_usage_events(model, type->p, type->n, u);
    }
    sg__usage_text(u, model, texts, COUNT(texts));
}

/* Bedrock's amazon-bedrock-invocationMetrics (@v, the last chunk's), for
 * what the model's own events did not say; its inputTokenCount leaves the
 * cache out. */
static void invoke_metrics(const sg__jval *v, uint32_t *u) {
    static const sg__ufield metrics[] = {
        {SG__JPATH1("inputTokenCount"), SG__U_IN},
        {SG__JPATH1("outputTokenCount"), SG__U_OUT},
        {SG__JPATH1("cacheReadInputTokenCount"), SG__U_CREAD},
        {SG__JPATH1("cacheWriteInputTokenCount"), SG__U_CWRITE},
    };
    if (v->type == SG__JOBJECT) {
        u[SG__U_SDATA] |= SG__U_IN_EXCL;
        sg__usage_fields(u, v->p, v->n, metrics, COUNT(metrics), SG__UF_FILL);
    }
}

/* The largest chunk whose model JSON is looked into (decoded into a
 * buffer of the thread's); a larger one carries content. */
#define INVOKE_CHUNK_MAX 16384

/* InvokeModelWithResponseStream: each "chunk" event's payload is
 * {"bytes": "<base64 of the model's own stream event>"}.  Decoded, that
 * JSON says the rest, whichever model family wrote it: Anthropic's
 * messages events (content_block_delta the tokens, message_stop the end,
 * type "error" a failure); others' text fields (Amazon Titan outputText,
 * Meta generation, Mistral outputs[].text, Cohere text, Claude's older
 * completion; Amazon Nova's contentBlockDelta, the Converse shape; the
 * OpenAI-shaped models' choices[].delta) and stop fields
 * (completionReason, stop_reason, a non-null finish, Nova's messageStop,
 * choices[].finish_reason).  Bedrock adds amazon-bedrock-invocationMetrics to a stream's
 * last chunk: an end too. */
static sg_item_kind classify_invoke(const sg_item *item, sg_item_error *err, void *ud) {
    static const sg__jpath p_bytes = SG__JPATH1("bytes");
    static const sg__jpath p_type = SG__JPATH1("type");
    sg__jval v;
    if (!is(item->event, item->event_len, "chunk") || !at(item, &p_bytes, &v) ||
        v.type != SG__JSTRING) {
        return item->index > 0 ? SG_ITEM_TOKEN : SG_ITEM_META;
    }
    /* per thread, not on the stack: an error's views into it must outlive
     * this call until the stream copies them, right after it returns */
    static _Thread_local char buf[INVOKE_CHUNK_MAX];
    ptrdiff_t len = unbase64(v.p, v.n, buf, sizeof(buf));
    if (len < 0) {
        return SG_ITEM_TOKEN; /* too large to be anything but content */
    }
    sg_item model = *item;
    model.data = buf;
    model.data_len = (size_t)len;
    static const sg__jpath ends[] = {
        SG__JPATH1("amazon-bedrock-invocationMetrics"),
        SG__JPATH1("completionReason"),
        SG__JPATH1("stop_reason"),
        SG__JPATH3("outputs", "[]", "stop_reason"),
        SG__JPATH1("finish_reason"),
        SG__JPATH1("is_finished"),
        SG__JPATH1("messageStop"),                    /* Amazon Nova */
        SG__JPATH3("choices", "[]", "finish_reason"), /* OpenAI-shaped models */
    };
    sg__jval t;
    bool typed = at(&model, &p_type, &t) && t.type == SG__JSTRING;
    if (ud != NULL) {
        invoke_usage(&model, typed ? &t : NULL, ud);
    }
    if (typed && is(t.p, t.n, "error")) {
        /* the model's own error event (Anthropic's shape) */
        return named_error(&model, err, &P_ERROR_TYPE, &P_ERROR_MESSAGE);
    }
    if (typed && is(t.p, t.n, "message_stop")) {
        sg__jval m;
        if (ud != NULL && at(&model, &ends[0], &m)) {
            invoke_metrics(&m, ud);
        }
        return SG_ITEM_END;
    }
    if (typed && is(t.p, t.n, "content_block_delta")) {
        return SG_ITEM_TOKEN;
    }
    static const sg__jpath texts[] = {
        SG__JPATH2("delta", "text"),
        SG__JPATH1("outputText"),
        SG__JPATH1("generation"),
        SG__JPATH3("outputs", "[]", "text"),
        SG__JPATH1("text"),
        SG__JPATH1("completion"),
        SG__JPATH2("delta", "partial_json"),
        SG__JPATH3("contentBlockDelta", "delta", "text"), /* Amazon Nova */
        SG__JPATH3("contentBlockDelta", "delta", "toolUse"),
        SG__JPATH3("contentBlockDelta", "delta", "reasoningContent"),
        SG__JPATH4("choices", "[]", "delta", "content"), /* OpenAI-shaped models */
        SG__JPATH4("choices", "[]", "delta", "tool_calls"),
        SG__JPATH4("choices", "[]", "delta", "reasoning_content"),
        SG__JPATH3("choices", "[]", "text"),
    };
    for (size_t i = 0; i < COUNT(ends); i++) {
        sg__jval e;
        if (at(&model, &ends[i], &e) && sg__jval_present(&e) && e.type != SG__JFALSE) {
            if (i == 0 && ud != NULL) {
                invoke_metrics(&e, ud); /* ends[0]: the invocation's metrics */
            }
            /* Titan, Llama, Mistral, Cohere: the last text and the stop
             * reason in one chunk */
            return any_present(&model, texts, COUNT(texts)) ? SG_ITEM_END_TOKEN
                                                            : SG_ITEM_END;
        }
    }
    if (item->index > 0) {
        return SG_ITEM_TOKEN;
    }
    return any_present(&model, texts, COUNT(texts)) ? SG_ITEM_TOKEN : SG_ITEM_META;
}

/* ------------------------------------------------------------- the table */

typedef struct profile {
    const char *name;
    sg_format format;
    const char *terminal_data;
    sg_classify_cb classify;
    bool end_required;
    bool end_at_eof; /* the end item, then the body's end (Gemini) */
    bool other_json; /* an error may come outside any data line (Gemini) */
} profile;

static const profile profiles[] = {
    {"openai", SG_FORMAT_SSE, "[DONE]", classify_openai, false, false, false},
    {"openai-responses", SG_FORMAT_SSE, NULL, classify_responses, true, false, false},
    {"anthropic", SG_FORMAT_SSE, NULL, classify_anthropic, true, false, false},
    {"gemini", SG_FORMAT_SSE, NULL, classify_gemini, true, true, true},
    {"ollama", SG_FORMAT_NDJSON, NULL, classify_ollama, true, false, false},
    {"bedrock-converse", SG_FORMAT_EVENTSTREAM, NULL, classify_converse, true, true,
     false},
    {"bedrock-invoke", SG_FORMAT_EVENTSTREAM, NULL, classify_invoke, true, true, false},
};

static const char *const profile_names[] = {
    "openai", "openai-responses", "anthropic",      "gemini",
    "ollama", "bedrock-converse", "bedrock-invoke", NULL,
};

const char *const *sg_profile_names(void) {
    return profile_names;
}

const char *sg__profile_name(const sg_stream_config *cfg) {
    for (size_t i = 0; cfg != NULL && cfg->classify_ != NULL && i < COUNT(profiles);
         i++) {
        if (profiles[i].classify == cfg->classify_) {
            return profiles[i].name;
        }
    }
    return NULL;
}

int sg_profile_framing(const char *name, sg_stream_config *cfg) {
    if (name == NULL || cfg == NULL) {
        return SG_EINVAL;
    }
    for (size_t i = 0; i < COUNT(profiles); i++) {
        const profile *p = &profiles[i];
        if (strcmp(p->name, name) == 0) {
            cfg->format_ = p->format;
            cfg->terminal_data_ = p->terminal_data;
            cfg->terminal_type_ = NULL;
            cfg->classify_ = p->classify;
            cfg->classify_data_ = NULL;
            /* the same classifier, given the stream's usage figures */
            cfg->usage_classify_ = p->classify;
            cfg->end_required_ = p->end_required;
            cfg->end_at_eof_ = p->end_at_eof;
            cfg->other_json_ = p->other_json;
            return 0;
        }
    }
    return SG_ENOTFOUND;
}
