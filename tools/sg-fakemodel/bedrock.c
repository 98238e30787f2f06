/*
 * Amazon Bedrock's two streaming APIs, in AWS event-stream framing
 * (eventstream.c), as the Bedrock API reference describes their output:
 *
 * ConverseStream (format=bedrock-converse): events whose :event-type is
 * messageStart, contentBlockStart (tool use only: the API's
 * ContentBlockStart union has no text member), contentBlockDelta (the
 * tokens), contentBlockStop, messageStop and metadata, each a JSON payload.
 *
 * InvokeModelWithResponseStream (format=bedrock-invoke): `chunk` events
 * whose payload {"bytes": ...} carries the model's own JSON in base64 -
 * here Anthropic's Messages stream events, as Claude on Bedrock sends them.
 *
 * Every event payload ends with Bedrock's "p" member, a padding string of
 * varying length (deterministic here); event_bytes/line_bytes lengthen it
 * so each token message is that many bytes.  Failures are exception
 * messages (:message-type exception, :exception-type), payload
 * {"message": ...}.
 */
#include "server.h"

#include <openssl/evp.h>
#include <string.h>

/* A string literal and its length, for sg_fm_buf_append. */
#define LIT(s) s, sizeof(s) - 1

static const char pad_chars[] =
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/*
 * Frames @json (a JSON object still open after `"p":"`) as one event of
 * @type: the padding, the closing `"}`, then the message into pend.
 * @target: the message length to pad to (0: none).
 */
static void es_event(exchange *ex, const char *type, sg_fm_buf *json, int64_t target,
                     sg_fm_es_damage damage) {
    sg_fm_es_header h[3] = {
        {":event-type", type},
        {":content-type", "application/json"},
        {":message-type", "event"},
    };
    /* Bedrock varies the padding's length from event to event. */
    size_t plen = 1 + (size_t)((ex->seq * 11) % (int64_t)(sizeof(pad_chars) - 2));
    ex->seq++;
    size_t len = sg_fm_es_message_len(h, 3, json->len + plen + 2);
    sg_fm_buf_append(json, pad_chars, plen);
    if (target > 0 && (size_t)target > len) {
        sg_fm_buf_fill(json, 'x', (size_t)target - len);
    }
    sg_fm_buf_append(json, LIT("\"}"));
    size_t before = ex->pend.len;
    sg_fm_es_message(&ex->pend, h, 3, sg_fm_buf_data(json), json->len, damage);
    ex->bytes += ex->pend.len - before;
}

/* An event whose payload is @head followed by the padding. */
static void es_event_lit(exchange *ex, const char *type, const char *head) {
    sg_fm_buf b = {0};
    sg_fm_buf_append(&b, head, strlen(head));
    es_event(ex, type, &b, 0, SG_FM_ES_INTACT);
    sg_fm_buf_free(&b);
}

/* InvokeModelWithResponseStream: a chunk carrying @model_json, base64. */
static void invoke_chunk(exchange *ex, const char *model_json, size_t len, int64_t target,
                         sg_fm_es_damage damage) {
    sg_fm_buf b = {0};
    sg_fm_buf_append(&b, LIT("{\"bytes\":\""));
    size_t b64 = 4 * ((len + 2) / 3);
    if (sg_fm_buf_reserve(&b, b64 + 1) == 0) {
        int n = EVP_EncodeBlock((unsigned char *)sg_fm_buf_data(&b) + b.len,
                                (const unsigned char *)model_json, (int)len);
        b.len += n > 0 ? (size_t)n : 0;
    }
    sg_fm_buf_append(&b, LIT("\",\"p\":\""));
    es_event(ex, "chunk", &b, target, damage);
    sg_fm_buf_free(&b);
}

static void invoke_chunk_str(exchange *ex, const char *json) {
    invoke_chunk(ex, json, strlen(json), 0, SG_FM_ES_INTACT);
}

/* Milliseconds since the request was complete, for the latency figures. */
static long long latency_ms(const exchange *ex) {
    return (long long)((sg_fm_now() - ex->t_received) / SG_FM_NS_PER_MS);
}

static int64_t pad_target(const exchange *ex) {
    return ex->sc.event_bytes > ex->sc.line_bytes ? ex->sc.event_bytes
                                                  : ex->sc.line_bytes;
}

void bedrock_prelude(exchange *ex) {
    if (ex->sc.format == SG_FM_FMT_BEDROCK_CONVERSE) {
        es_event_lit(ex, "messageStart", "{\"role\":\"assistant\",\"p\":\"");
        if (ex->sc.tool_use) {
            char head[192];
            snprintf(head, sizeof(head),
                     "{\"contentBlockIndex\":0,\"start\":{\"toolUse\":{\"name\":"
                     "\"sg_tool\",\"toolUseId\":\"tooluse_%llu\"}},\"p\":\"",
                     (unsigned long long)ex->id);
            es_event_lit(ex, "contentBlockStart", head);
        }
        return;
    }
    /* Claude's own usage rides inside, as on Anthropic's API */
    sg_fm_buf b = {0};
    sg_fm_buf_printf(&b,
                     "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_bdrk_%llu\","
                     "\"type\":\"message\",\"role\":\"assistant\",\"model\":"
                     "\"sg-fakemodel\",\"content\":[],\"stop_reason\":null,"
                     "\"stop_sequence\":null,\"usage\":",
                     (unsigned long long)ex->id);
    usage_anthropic(ex, &b, false);
    sg_fm_buf_append(&b, LIT("}}"));
    invoke_chunk(ex, sg_fm_buf_data(&b), b.len, 0, SG_FM_ES_INTACT);
    sg_fm_buf_free(&b);
    invoke_chunk_str(ex, "{\"type\":\"content_block_start\",\"index\":0,"
                         "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
}

void bedrock_item(exchange *ex) {
    long long i = (long long)ex->items;
    sg_fm_es_damage damage = SG_FM_ES_INTACT;
    if (ex->sc.bad_crc_at >= 0 && ex->items == ex->sc.bad_crc_at) {
        damage = ex->sc.bad_crc == SG_FM_CRC_PRELUDE ? SG_FM_ES_BAD_PRELUDE_CRC
                                                     : SG_FM_ES_BAD_MESSAGE_CRC;
    }
    if (ex->sc.format == SG_FM_FMT_BEDROCK_CONVERSE) {
        sg_fm_buf b = {0};
        if (ex->sc.tool_use) {
            sg_fm_buf_printf(&b,
                             "{\"contentBlockIndex\":0,\"delta\":{\"toolUse\":{"
                             "\"input\":\"tok%lld\"}},\"p\":\"",
                             i);
        } else {
            sg_fm_buf_printf(&b,
                             "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"tok%lld\"},"
                             "\"p\":\"",
                             i);
        }
        es_event(ex, "contentBlockDelta", &b, pad_target(ex), damage);
        sg_fm_buf_free(&b);
        return;
    }
    char json[160];
    int n = snprintf(json, sizeof(json),
                     "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
                     "\"text_delta\",\"text\":\"tok%lld\"}}",
                     i);
    invoke_chunk(ex, json, (size_t)n, pad_target(ex), damage);
}

void bedrock_end(exchange *ex) {
    if (ex->sc.no_done) {
        return;
    }
    sg_fm_buf b = {0};
    if (ex->sc.format == SG_FM_FMT_BEDROCK_CONVERSE) {
        es_event_lit(ex, "contentBlockStop", "{\"contentBlockIndex\":0,\"p\":\"");
        es_event_lit(ex, "messageStop",
                     ex->sc.tool_use ? "{\"stopReason\":\"tool_use\",\"p\":\""
                                     : "{\"stopReason\":\"end_turn\",\"p\":\"");
        sg_fm_buf_append(&b, LIT("{\"usage\":"));
        usage_converse(ex, &b);
        sg_fm_buf_printf(&b, ",\"metrics\":{\"latencyMs\":%lld},\"p\":\"",
                         latency_ms(ex));
        es_event(ex, "metadata", &b, 0, SG_FM_ES_INTACT);
        sg_fm_buf_free(&b);
        return;
    }
    invoke_chunk_str(ex, "{\"type\":\"content_block_stop\",\"index\":0}");
    sg_fm_buf_append(&b, LIT("{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
                             "\"end_turn\",\"stop_sequence\":null},\"usage\":"));
    usage_anthropic(ex, &b, true);
    sg_fm_buf_append(&b, LIT("}"));
    invoke_chunk(ex, sg_fm_buf_data(&b), b.len, 0, SG_FM_ES_INTACT);
    /* Bedrock's own figures join the model's last event */
    b.len = 0;
    sg_fm_buf_append(&b, LIT("{\"type\":\"message_stop\",\"amazon-bedrock-"
                             "invocationMetrics\":"));
    usage_invoke_metrics(ex, &b, latency_ms(ex));
    sg_fm_buf_append(&b, LIT("}"));
    invoke_chunk(ex, sg_fm_buf_data(&b), b.len, 0, SG_FM_ES_INTACT);
    sg_fm_buf_free(&b);
}

void bedrock_error(exchange *ex) {
    const char *type = ex->sc.error_type[0] ? ex->sc.error_type : "throttlingException";
    sg_fm_es_header h[3] = {
        {":exception-type", type},
        {":content-type", "application/json"},
        {":message-type", "exception"},
    };
    static const char payload[] = "{\"message\":\"sg-fakemodel scripted failure\"}";
    size_t before = ex->pend.len;
    sg_fm_es_message(&ex->pend, h, 3, payload, sizeof(payload) - 1, SG_FM_ES_INTACT);
    ex->bytes += ex->pend.len - before;
}

const char *bedrock_error_type_for_status(int status) {
    switch (status) {
    case 400:
        return "ValidationException";
    case 403:
        return "AccessDeniedException";
    case 404:
        return "ResourceNotFoundException";
    case 408:
        return "ModelTimeoutException";
    case 424:
        return "ModelErrorException";
    case 429:
        return "ThrottlingException";
    case 503:
        return "ServiceUnavailableException";
    default:
        return "InternalServerException";
    }
}
