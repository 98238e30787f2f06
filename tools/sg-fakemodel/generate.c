/*
 * The body of a streamed response: items in each provider's shape (OpenAI
 * Chat Completions and Responses API, Anthropic, Gemini, Ollama, plain
 * NDJSON), their padding (line_bytes, event_bytes), keepalives, in-band
 * errors and the end, and the pacing that decides when each is due.
 * Generation runs only while the exchange's backlog is below its
 * high-water mark, so a client that stops reading stops its own generation
 * and nobody else's.
 */
#include "server.h"

#include <string.h>

/* A string literal and its length, for sg_fm_buf_append. */
#define LIT(s) s, sizeof(s) - 1

/* Bytes one exchange may generate per timer callback before yielding. */
#define STEP_BUDGET (64 * 1024)

void pend_add(exchange *ex, const char *s, size_t n) {
    sg_fm_buf_append(&ex->pend, s, n);
    ex->bytes += n;
}

static void pend_count_since(exchange *ex, size_t before) {
    ex->bytes += ex->pend.len - before;
}

/* Pads the line begun at line_start with 'x' so that, with a suffix of
 * suffix_len still to come, it is `target` bytes long (see docs: line_bytes). */
static void pad_line(exchange *ex, size_t line_start, size_t suffix_len, int64_t target) {
    if (target <= 0) {
        return;
    }
    size_t have = ex->pend.off + ex->pend.len - line_start + suffix_len;
    if ((size_t)target > have) {
        sg_fm_buf_fill(&ex->pend, 'x', (size_t)target - have);
    }
}

/*
 * Extra `data:` lines, each a JSON member on its own line, so the joined data
 * of the event stays one valid JSON object however large it gets.
 */
static void pad_event(exchange *ex, size_t event_start) {
    if (ex->sc.event_bytes <= 0) {
        sg_fm_buf_append(&ex->pend, "}\n\n", 3);
        return;
    }
    const size_t tail = 10; /* "\ndata: }\n\n" */
    unsigned k = 0;
    for (;;) {
        size_t have = ex->pend.off + ex->pend.len - event_start;
        char head[40];
        int hl = snprintf(head, sizeof(head), "\ndata: ,\"pad%u\":\"", k);
        size_t overhead = (size_t)hl + 1;
        if ((size_t)ex->sc.event_bytes <= have + tail + overhead) {
            break;
        }
        size_t x = (size_t)ex->sc.event_bytes - have - tail - overhead;
        if (x > 4000) {
            x = 4000;
        }
        sg_fm_buf_append(&ex->pend, head, (size_t)hl);
        sg_fm_buf_fill(&ex->pend, 'x', x);
        sg_fm_buf_append(&ex->pend, "\"", 1);
        k++;
    }
    sg_fm_buf_append(&ex->pend, "\ndata: }\n\n", tail);
}

/* Ends an NDJSON item begun at @start: padded (an NDJSON item is one line,
 * so line_bytes and event_bytes mean the same), its suffix, the newline. */
static void end_line(exchange *ex, size_t start, const char *suffix, size_t n) {
    pad_line(ex, start, n,
             ex->sc.line_bytes > ex->sc.event_bytes ? ex->sc.line_bytes
                                                    : ex->sc.event_bytes);
    sg_fm_buf_append(&ex->pend, suffix, n);
    sg_fm_buf_append(&ex->pend, "\n", 1);
}

/* Ends an SSE item whose data line began at @data_start (its event, with
 * any event: line, at @event_start) and stopped inside its text: padded
 * (line_bytes), the rest of the JSON object, the extra data: lines of
 * event_bytes and the blank line. */
static void end_sse_item(exchange *ex, size_t event_start, size_t data_start,
                         const char *suffix, size_t n) {
    pad_line(ex, data_start, n + (ex->sc.event_bytes > 0 ? 0 : 1), ex->sc.line_bytes);
    sg_fm_buf_append(&ex->pend, suffix, n);
    pad_event(ex, event_start);
}

/* OpenAI: what ends each chunk when the request asks for usage. */
static const char *usage_null(const exchange *ex) {
    return ex->include_usage ? ",\"usage\":null" : "";
}

/* OpenAI: a chunk without a token - the role first, or the finish. */
static void openai_chunk(exchange *ex, const char *delta, const char *finish) {
    sg_fm_buf_printf(
        &ex->pend,
        "data: {\"id\":\"chatcmpl-%llu\",\"object\":\"chat.completion.chunk\","
        "\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{"
        "\"index\":0,\"delta\":%s,\"finish_reason\":%s}]%s}\n\n",
        (unsigned long long)ex->id, delta, finish, usage_null(ex));
}

static void emit_item(exchange *ex) {
    if (sg_fm_format_is_eventstream(ex->sc.format)) {
        bedrock_item(ex);
        return;
    }
    size_t before = ex->pend.len;
    unsigned long long id = (unsigned long long)ex->id;
    long long i = (long long)ex->items;
    size_t start;
    switch (ex->sc.format) {
    case SG_FM_FMT_NDJSON: {
        static const char suffix[] = "\",\"done\":false}";
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(&ex->pend,
                         "{\"id\":\"gen-%llu\",\"index\":%lld,\"content\":\"tok%lld", id,
                         i, i);
        end_line(ex, start, suffix, sizeof(suffix) - 1);
        break;
    }
    case SG_FM_FMT_OLLAMA: {
        static const char suffix[] = "\"},\"done\":false}";
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(
            &ex->pend,
            "{\"model\":\"sg-fakemodel\",\"created_at\":\"2023-11-14T22:13:20Z\","
            "\"message\":{\"role\":\"assistant\",\"content\":\"tok%lld",
            i);
        end_line(ex, start, suffix, sizeof(suffix) - 1);
        break;
    }
    case SG_FM_FMT_ANTHROPIC: {
        static const char suffix[] = "\"}";
        size_t event_start = ex->pend.off + ex->pend.len;
        sg_fm_buf_append(&ex->pend, "event: content_block_delta\n", 27);
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(&ex->pend,
                         "data: {\"type\":\"content_block_delta\",\"index\":0,"
                         "\"delta\":{\"type\":\"text_delta\",\"text\":\"tok%lld",
                         i);
        end_sse_item(ex, event_start, start, suffix, sizeof(suffix) - 1);
        break;
    }
    case SG_FM_FMT_GEMINI: {
        /* every chunk carries the running usage, as Gemini 2.5's do */
        static const char head[] = "\"}],\"role\": \"model\"},\"index\": 0}],";
        char suffix[448];
        memcpy(suffix, head, sizeof(head) - 1);
        size_t sl = sizeof(head) - 1 +
                    usage_gemini_meta(ex, i + 1, suffix + sizeof(head) - 1,
                                      sizeof(suffix) - sizeof(head) + 1);
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(&ex->pend,
                         "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": "
                         "\"tok%lld",
                         i);
        end_sse_item(ex, start, start, suffix, sl);
        break;
    }
    case SG_FM_FMT_RESPONSES: {
        static const char ev[] = "event: response.output_text.delta\n";
        char suffix[64];
        int sl =
            snprintf(suffix, sizeof(suffix),
                     "\",\"logprobs\":[],\"sequence_number\":%lld", (long long)ex->seq++);
        size_t event_start = ex->pend.off + ex->pend.len;
        sg_fm_buf_append(&ex->pend, ev, sizeof(ev) - 1);
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(&ex->pend,
                         "data: {\"type\":\"response.output_text.delta\",\"item_id\":"
                         "\"msg_%llu\",\"output_index\":0,\"content_index\":0,"
                         "\"delta\":\"tok%lld",
                         id, i);
        end_sse_item(ex, event_start, start, suffix, (size_t)sl);
        break;
    }
    case SG_FM_FMT_SSE:
    default: {
        /* The last token says the model finished (OpenAI says it in a
         * chunk of its own, with an empty delta; here n stays the number
         * of events) - openai-node's helper wants a finish_reason.  Every
         * chunk has "usage": null when the request asks for usage. */
        bool last = !ex->sc.runaway && i + 1 == ex->sc.n;
        char suffix[64];
        int sl = snprintf(suffix, sizeof(suffix), "\"},\"finish_reason\":%s}]%s",
                          last ? "\"stop\"" : "null", usage_null(ex));
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(
            &ex->pend,
            "data: {\"id\":\"chatcmpl-%llu\",\"object\":\"chat.completion.chunk\","
            "\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{"
            "\"index\":0,\"delta\":{\"content\":\"tok%lld",
            id, i);
        end_sse_item(ex, start, start, suffix, (size_t)sl);
        break;
    }
    }
    pend_count_since(ex, before);
}

/* ------------------------------------------------- OpenAI Responses API */

/* The text so far, tok0tok1..., as the API repeats it in its *.done events
 * (without line_bytes/event_bytes padding).  O(items). */
static void responses_text(exchange *ex) {
    for (long long i = 0; i < (long long)ex->items; i++) {
        sg_fm_buf_printf(&ex->pend, "tok%lld", i);
    }
}

static void responses_part(exchange *ex) {
    sg_fm_buf_append(&ex->pend, LIT("{\"type\":\"output_text\",\"text\":\""));
    responses_text(ex);
    sg_fm_buf_append(&ex->pend, LIT("\",\"annotations\":[]}"));
}

/* The output message: in progress with no content yet, or completed. */
static void responses_message(exchange *ex, int completed) {
    sg_fm_buf_printf(&ex->pend,
                     "{\"id\":\"msg_%llu\",\"type\":\"message\",\"status\":\"%s\","
                     "\"role\":\"assistant\",\"content\":[",
                     (unsigned long long)ex->id, completed ? "completed" : "in_progress");
    if (completed) {
        responses_part(ex);
    }
    sg_fm_buf_append(&ex->pend, LIT("]}"));
}

/* The response object of response.created/in_progress ("in_progress"),
 * response.completed ("completed": the message and the usage) and
 * response.failed ("failed": the scripted error). */
static void responses_object(exchange *ex, const char *status) {
    int completed = strcmp(status, "completed") == 0;
    sg_fm_buf_printf(&ex->pend,
                     "{\"id\":\"resp_%llu\",\"object\":\"response\",\"created_at\":"
                     "1700000000,\"status\":\"%s\",\"error\":",
                     (unsigned long long)ex->id, status);
    if (strcmp(status, "failed") == 0) {
        sg_fm_buf_printf(&ex->pend, "{\"code\":\"%s\",\"message\":\"scripted failure\"}",
                         ex->sc.error_type[0] ? ex->sc.error_type : "server_error");
    } else {
        sg_fm_buf_append(&ex->pend, LIT("null"));
    }
    sg_fm_buf_append(
        &ex->pend,
        LIT(",\"incomplete_details\":null,\"model\":\"sg-fakemodel\",\"output\":["));
    if (completed) {
        responses_message(ex, 1);
        sg_fm_buf_append(&ex->pend, LIT("],\"usage\":"));
        usage_responses(ex, &ex->pend);
        sg_fm_buf_append(&ex->pend, LIT("}"));
    } else {
        sg_fm_buf_append(&ex->pend, LIT("],\"usage\":null}"));
    }
}

/* Begins an event whose data is {"type": @name, ...: the caller writes the
 * other members, then responses_close(). */
static void responses_open(exchange *ex, const char *name) {
    sg_fm_buf_printf(&ex->pend, "event: %s\ndata: {\"type\":\"%s\"", name, name);
}

static void responses_close(exchange *ex) {
    sg_fm_buf_printf(&ex->pend, ",\"sequence_number\":%lld}\n\n", (long long)ex->seq++);
}

/* With the headers: the response exists, is in progress, and has a message
 * with one text part - four events, no token among them. */
static void responses_prelude(exchange *ex) {
    size_t before = ex->pend.len;
    unsigned long long id = (unsigned long long)ex->id;
    responses_open(ex, "response.created");
    sg_fm_buf_append(&ex->pend, LIT(",\"response\":"));
    responses_object(ex, "in_progress");
    responses_close(ex);
    responses_open(ex, "response.in_progress");
    sg_fm_buf_append(&ex->pend, LIT(",\"response\":"));
    responses_object(ex, "in_progress");
    responses_close(ex);
    responses_open(ex, "response.output_item.added");
    sg_fm_buf_append(&ex->pend, LIT(",\"output_index\":0,\"item\":"));
    responses_message(ex, 0);
    responses_close(ex);
    responses_open(ex, "response.content_part.added");
    sg_fm_buf_printf(
        &ex->pend,
        ",\"item_id\":\"msg_%llu\",\"output_index\":0,\"content_index\":0,"
        "\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[]}",
        id);
    responses_close(ex);
    pend_count_since(ex, before);
}

/* The end: the text, the part and the message done, then response.completed
 * (which no_done leaves out: the three *.done events are not the end). */
static void responses_end(exchange *ex) {
    size_t before = ex->pend.len;
    unsigned long long id = (unsigned long long)ex->id;
    responses_open(ex, "response.output_text.done");
    sg_fm_buf_printf(&ex->pend,
                     ",\"item_id\":\"msg_%llu\",\"output_index\":0,\"content_index\":0,"
                     "\"text\":\"",
                     id);
    responses_text(ex);
    sg_fm_buf_append(&ex->pend, LIT("\",\"logprobs\":[]"));
    responses_close(ex);
    responses_open(ex, "response.content_part.done");
    sg_fm_buf_printf(&ex->pend,
                     ",\"item_id\":\"msg_%llu\",\"output_index\":0,\"content_index\":0,"
                     "\"part\":",
                     id);
    responses_part(ex);
    responses_close(ex);
    responses_open(ex, "response.output_item.done");
    sg_fm_buf_append(&ex->pend, LIT(",\"output_index\":0,\"item\":"));
    responses_message(ex, 1);
    responses_close(ex);
    if (!ex->sc.no_done) {
        responses_open(ex, "response.completed");
        sg_fm_buf_append(&ex->pend, LIT(",\"response\":"));
        responses_object(ex, "completed");
        responses_close(ex);
    }
    pend_count_since(ex, before);
}

/* --------------------------------------------------------------- Gemini */

/* The HTTP status Google pairs with a canonical status name (the error
 * object carries both; @google/genai throws only for 400-599). */
static int gemini_code(const char *status) {
    static const struct {
        const char *status;
        int code;
    } codes[] = {
        {"INVALID_ARGUMENT", 400},   {"FAILED_PRECONDITION", 400},
        {"PERMISSION_DENIED", 403},  {"NOT_FOUND", 404},
        {"RESOURCE_EXHAUSTED", 429}, {"CANCELLED", 499},
        {"INTERNAL", 500},           {"UNAVAILABLE", 503},
        {"DEADLINE_EXCEEDED", 504},
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        if (strcmp(codes[i].status, status) == 0) {
            return codes[i].code;
        }
    }
    return 500;
}

void emit_prelude(exchange *ex) {
    if (sg_fm_format_is_eventstream(ex->sc.format)) {
        bedrock_prelude(ex);
        return;
    }
    if (ex->sc.format == SG_FM_FMT_SSE && ex->sc.role_chunk) {
        /* OpenAI's first chunk: the role, no content yet */
        size_t before = ex->pend.len;
        openai_chunk(ex, "{\"role\":\"assistant\",\"content\":\"\"}", "null");
        pend_count_since(ex, before);
        return;
    }
    if (ex->sc.format == SG_FM_FMT_RESPONSES) {
        responses_prelude(ex);
        return;
    }
    if (ex->sc.format != SG_FM_FMT_ANTHROPIC) {
        return;
    }
    size_t before = ex->pend.len;
    sg_fm_buf_printf(
        &ex->pend,
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{"
        "\"id\":\"msg_%llu\",\"type\":\"message\",\"role\":\"assistant\","
        "\"model\":\"sg-fakemodel\",\"content\":[],\"stop_reason\":null,"
        "\"usage\":",
        (unsigned long long)ex->id);
    usage_anthropic(ex, &ex->pend, false);
    sg_fm_buf_append(&ex->pend,
                     LIT("}}\n\nevent: content_block_start\ndata: {\"type\":"
                         "\"content_block_start\",\"index\":0,\"content_block\":{"
                         "\"type\":\"text\",\"text\":\"\"}}\n\n"));
    pend_count_since(ex, before);
}

/* OpenAI's end: the finish in a chunk of its own when no token carried
 * it (an empty answer), the usage chunk when the request asks for it,
 * [DONE] (not with no_done).  After an in-band error only the [DONE] that
 * error_then_done asks for. */
static void openai_end(exchange *ex, bool after_error) {
    if (!after_error && ex->items == 0) {
        openai_chunk(ex, "{}", "\"stop\"");
    }
    if (!after_error && ex->include_usage) {
        usage_openai_chunk(ex, &ex->pend);
    }
    if (!ex->sc.no_done) {
        sg_fm_buf_append(&ex->pend, LIT("data: [DONE]\n\n"));
    }
}

/* The end of the stream, with the final usage where the format has it;
 * @after_error: after an in-band error (error_then_done). */
static void emit_end(exchange *ex, bool after_error) {
    if (sg_fm_format_is_eventstream(ex->sc.format)) {
        bedrock_end(ex);
        return;
    }
    if (ex->sc.format == SG_FM_FMT_RESPONSES) {
        responses_end(ex);
        return;
    }
    size_t before = ex->pend.len;
    if (ex->sc.format == SG_FM_FMT_SSE) {
        openai_end(ex, after_error);
        pend_count_since(ex, before);
        return;
    }
    if (ex->sc.no_done) {
        return;
    }
    switch (ex->sc.format) {
    case SG_FM_FMT_GEMINI: {
        /* the last chunk: no text, a finishReason, the final usage */
        char meta[384];
        usage_gemini_meta(ex, ex->items, meta, sizeof(meta));
        sg_fm_buf_printf(
            &ex->pend,
            "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": "
            "\"\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": "
            "0}],%s}\n\n",
            meta);
        break;
    }
    case SG_FM_FMT_NDJSON:
        sg_fm_buf_printf(&ex->pend, "{\"id\":\"gen-%llu\",\"done\":true}\n",
                         (unsigned long long)ex->id);
        break;
    case SG_FM_FMT_OLLAMA:
        sg_fm_buf_append(&ex->pend, LIT("{\"model\":\"sg-fakemodel\",\"created_at\":"
                                        "\"2023-11-14T22:13:20Z\",\"message\":{\"role\":"
                                        "\"assistant\",\"content\":\"\"},\"done\":true,"
                                        "\"done_reason\":\"stop\""));
        usage_ollama(ex, &ex->pend);
        sg_fm_buf_append(&ex->pend, LIT("}\n"));
        break;
    case SG_FM_FMT_ANTHROPIC:
        /* message_delta's usage is cumulative: the whole message's */
        sg_fm_buf_append(&ex->pend,
                         LIT("event: content_block_stop\ndata: {\"type\":"
                             "\"content_block_stop\",\"index\":0}\n\n"
                             "event: message_delta\ndata: {\"type\":\"message_delta\","
                             "\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":"
                             "null},\"usage\":"));
        usage_anthropic(ex, &ex->pend, true);
        sg_fm_buf_append(&ex->pend, LIT("}\n\nevent: message_stop\ndata: {\"type\":"
                                        "\"message_stop\"}\n\n"));
        break;
    default:
        break;
    }
    pend_count_since(ex, before);
}

/* An in-band error in the format's own shape (the HTTP status stays 200). */
static void emit_error(exchange *ex) {
    if (sg_fm_format_is_eventstream(ex->sc.format)) {
        bedrock_error(ex);
        return;
    }
    size_t before = ex->pend.len;
    const char *t = ex->sc.error_type;
    switch (ex->sc.format) {
    case SG_FM_FMT_NDJSON:
    case SG_FM_FMT_OLLAMA:
        /* Ollama: {"error":"message"} */
        sg_fm_buf_printf(&ex->pend, "{\"error\":\"%s: scripted failure\"}\n",
                         t[0] ? t : "server_error");
        break;
    case SG_FM_FMT_GEMINI: {
        const char *status = t[0] ? t : "UNAVAILABLE";
        if (ex->sc.error_event == SG_FM_ERR_BARE) {
            /* as two captures of live streams show it (vercel/ai#5217,
             * diegosouzapw/OmniRoute#4177): pretty-printed, not in a data:
             * line (an SSE parser sees fields with odd names), a blank line */
            sg_fm_buf_printf(&ex->pend,
                             "{\n  \"error\": {\n    \"code\": %d,\n    \"message\": "
                             "\"scripted failure\",\n    \"status\": \"%s\"\n  }\n}\n\n",
                             gemini_code(status), status);
        } else {
            sg_fm_buf_printf(&ex->pend,
                             "data: {\"error\": {\"code\": %d,\"message\": \"scripted "
                             "failure\",\"status\": \"%s\"}}\n\n",
                             gemini_code(status), status);
        }
        break;
    }
    case SG_FM_FMT_RESPONSES:
        if (ex->sc.error_event == SG_FM_ERR_FAILED) {
            responses_open(ex, "response.failed");
            sg_fm_buf_append(&ex->pend, LIT(",\"response\":"));
            responses_object(ex, "failed");
        } else {
            responses_open(ex, "error");
            sg_fm_buf_printf(&ex->pend,
                             ",\"code\":\"%s\",\"message\":\"scripted failure\","
                             "\"param\":null",
                             t[0] ? t : "server_error");
        }
        responses_close(ex);
        break;
    case SG_FM_FMT_ANTHROPIC:
        sg_fm_buf_printf(&ex->pend,
                         "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                         "\"%s\",\"message\":\"scripted failure\"}}\n\n",
                         t[0] ? t : "overloaded_error");
        break;
    case SG_FM_FMT_SSE:
    default:
        sg_fm_buf_printf(&ex->pend,
                         "data: {\"error\":{\"message\":\"scripted failure\",\"type\":"
                         "\"%s\",\"param\":null,\"code\":null}}\n\n",
                         t[0] ? t : "server_error");
        break;
    }
    pend_count_since(ex, before);
}

static void emit_keepalive(exchange *ex) {
    if (ex->sc.format == SG_FM_FMT_NDJSON || ex->sc.format == SG_FM_FMT_OLLAMA) {
        /* NDJSON has no comments; an empty line is what parsers skip. */
        pend_add(ex, "\n", 1);
    } else if (ex->sc.format == SG_FM_FMT_ANTHROPIC) {
        /* Anthropic's keepalive is an event of its own */
        static const char ping[] = "event: ping\ndata: {\"type\": \"ping\"}\n\n";
        pend_add(ex, ping, sizeof(ping) - 1);
    } else {
        pend_add(ex, ": keepalive\n\n", 13);
    }
}

/* When the wait after item `ex->items` is the stall, log it and use it. */
void schedule_next(exchange *ex, int64_t now, int64_t normal_ms) {
    if (ex->sc.stall_after >= 0 && ex->items == ex->sc.stall_after) {
        char f[64];
        snprintf(f, sizeof(f), "\"items\":%lld,\"stall_ms\":%lld", (long long)ex->items,
                 ex->sc.stall_ms == SG_FM_FOREVER ? -1LL : (long long)ex->sc.stall_ms);
        log_ex(ex, SG_FM_EV_STALL_STARTED, f);
        ex->next_item_at = sg_fm_add_ms(now, ex->sc.stall_ms);
    } else {
        ex->next_item_at = sg_fm_add_ms(now, normal_ms);
    }
}

static void ex_arm_next(exchange *ex) {
    int64_t due = ex->next_item_at;
    if (ex->split_due != 0 && ex->split_due < due) {
        due = ex->split_due;
    }
    if (ex->sc.keepalive_ms > 0) {
        int64_t ka = sg_fm_add_ms(ex->last_emit_at, ex->sc.keepalive_ms);
        if (ka < due) {
            due = ka;
        }
    }
    ex_arm(ex, due);
}

/*
 * bytes_per_write: lets the next piece of pend go and, while more waits,
 * arms the timer for the piece after it.  Returns 1 if more waits.
 */
static int release_piece(exchange *ex, int64_t now) {
    ex->allow = (size_t)ex->sc.bytes_per_write;
    ex_pump(ex);
    if (ex->pend.len > 0) {
        ex_arm(ex, sg_fm_add_ms(now, ex->sc.write_gap_ms));
        return 1;
    }
    return 0;
}

/*
 * split_at: the item just generated (pend's bytes from @before) leaves in
 * two writes - its first split_at bytes (negative: all but its last
 * -split_at) now, with what waited before it, and the rest write_gap
 * later, when nothing else is generated meanwhile.
 */
static void split_item(exchange *ex, size_t before, int64_t now) {
    size_t len = ex->pend.len - before;
    int64_t k = ex->sc.split_at;
    size_t first = k > 0 ? ((size_t)k < len ? (size_t)k : len)
                         : ((size_t)-k < len ? len - (size_t)-k : 0);
    ex->allow = before + first;
    ex->split_due = sg_fm_add_ms(now, ex->sc.write_gap_ms);
}

/* split_at: true while an item's rest waits for its time (what may go
 * now is pumped); once due, every byte may go again. */
static bool split_waits(exchange *ex, int64_t now) {
    if (ex->split_due == 0) {
        return false;
    }
    if (now < ex->split_due) {
        ex_pump(ex);
        ex_arm(ex, ex->split_due);
        return true;
    }
    ex->split_due = 0;
    ex->allow = SIZE_MAX;
    return false;
}

/* The body's last bytes are generated (eof_pending or drop_pending is
 * set): lets them go, piece by piece under bytes_per_write. */
static void let_end_go(exchange *ex, int64_t now) {
    if (ex->sc.bytes_per_write > 0) {
        release_piece(ex, now);
        return;
    }
    ex_pump(ex);
    if (ex->split_due != 0) {
        ex_arm(ex, ex->split_due); /* the last item's rest, then the end */
    }
}

/* The end is out: the body ends now, or (linger) stays open until the
 * linger's end, keepalives going on.  true when it lingers. */
static bool end_body(exchange *ex, int64_t now) {
    if (ex->sc.linger_ms > 0) {
        ex->lingering = 1;
        ex->next_item_at = sg_fm_add_ms(now, ex->sc.linger_ms);
        return true;
    }
    ex->eof_pending = 1;
    let_end_go(ex, now);
    return false;
}

/* Generates whatever is due, as far as the client's reading allows. */
void ex_step(exchange *ex) {
    if (ex->st != X_STREAMING || ex->finished) {
        return;
    }
    int64_t now = sg_fm_now();
    if (ex->sc.bytes_per_write > 0 && ex->pend.len > 0 && release_piece(ex, now)) {
        return;
    }
    if (split_waits(ex, now)) {
        return;
    }
    if (ex->eof_pending || ex->drop_pending) {
        ex_pump(ex);
        return;
    }
    size_t budget_start = ex->bytes;
    for (;;) {
        if (ex_backlog(ex) >= ex_backlog_high(ex)) {
            ex->blocked = 1;
            ex_pump(ex);
            return;
        }
        if (now >= ex->next_item_at) {
            if (ex->lingering) {
                ex->eof_pending = 1; /* linger is over: the body ends */
                let_end_go(ex, now);
                return;
            }
            if (ex->sc.error_at >= 0 && ex->items == ex->sc.error_at) {
                /* a failure reported inside the stream, then its end */
                emit_error(ex);
                if (ex->sc.error_then_done) {
                    emit_end(ex, true);
                }
                ex->reason = "in_band_error";
                ex->eof_pending = 1;
                ex_pump(ex);
                return;
            }
            if (ex->sc.drop_after >= 0 && ex->items == ex->sc.drop_after) {
                ex->drop_pending = 1;
                ex_pump(ex);
                return;
            }
            if (ex->sc.cut_at >= 0 && ex->items == ex->sc.cut_at) {
                /* half of the next item, then the end: a message (event,
                 * line) cut in the middle */
                size_t before = ex->pend.len;
                uint64_t bytes = ex->bytes;
                emit_item(ex);
                size_t keep = (ex->pend.len - before) / 2;
                ex->pend.len = before + keep;
                ex->bytes = bytes + keep;
                ex->reason = "cut";
                if (ex->sc.cut_drop) {
                    ex->drop_pending = 1;
                } else {
                    ex->eof_pending = 1;
                }
                let_end_go(ex, now);
                return;
            }
            if (!ex->sc.runaway && ex->sc.n == 0) {
                /* n=0: an empty answer - the prelude, then the end */
                emit_end(ex, false);
                ex->reason = ex->sc.no_done ? "no_done" : "done";
                if (end_body(ex, now)) {
                    break; /* lingering: on to the timers */
                }
                return;
            }
            size_t before = ex->pend.len;
            emit_item(ex);
            if (ex->sc.split_at != 0) {
                split_item(ex, before, now);
            }
            ex->items++;
            ex->last_emit_at = now;
            if (ex->items == 1) {
                char f[64];
                snprintf(f, sizeof(f), "\"items\":1,\"first_due_ms\":%lld",
                         (long long)ex->first_due_ms);
                log_ex(ex, SG_FM_EV_FIRST_ITEM_SENT, f);
            }
            if (!ex->sc.runaway && ex->items >= ex->sc.n) {
                emit_end(ex, false);
                ex->reason = ex->sc.no_done ? "no_done" : "done";
                if (end_body(ex, now)) {
                    break; /* lingering: on to the timers */
                }
                return;
            }
            /* Count the gap from when this item was due, not from when the
             * timer fired: epoll's millisecond rounding must not accumulate
             * over a long stream.  A writer far behind (a slow reader) starts
             * afresh instead of bursting to catch up. */
            int64_t due = ex->next_item_at;
            int64_t base =
                (due <= now && now - due < sg_fm_add_ms(0, ex->sc.gap_ms)) ? due : now;
            schedule_next(ex, base, ex->sc.gap_ms);
            if (ex->split_due != 0) {
                break; /* the item's rest goes first */
            }
            if (ex->sc.bytes_per_write > 0) {
                if (release_piece(ex, now)) {
                    return;
                }
                continue;
            }
            if (ex->bytes - budget_start >= STEP_BUDGET) {
                /* Yield to the other connections; come back next turn. */
                ex_pump(ex);
                ex_arm(ex, now);
                return;
            }
            continue;
        }
        if (ex->sc.keepalive_ms > 0 &&
            now >= sg_fm_add_ms(ex->last_emit_at, ex->sc.keepalive_ms)) {
            emit_keepalive(ex);
            ex->last_emit_at = now;
            continue;
        }
        break;
    }
    ex_pump(ex);
    ex_arm_next(ex);
}
