/*
 * answer.c - what a client is told when its operation fails, in the
 * provider's own format, so that its SDK raises the error it knows:
 * before the commit an HTTP status with the provider's error body, after
 * it an in-band error in the provider's stream format.  Every message
 * names the outcome, and says sg-proxy ended the stream.  No upstream
 * bytes, header or body of the request are ever quoted.
 */
#include <stdio.h>
#include <string.h>

#include "proxy.h"

#include "../common/eventstream.h"

enum answer_style answer_style_of(const char *profile) {
    if (profile == NULL) {
        return STYLE_OPENAI;
    }
    if (strcmp(profile, "anthropic") == 0) {
        return STYLE_ANTHROPIC;
    }
    if (strcmp(profile, "openai-responses") == 0) {
        return STYLE_RESPONSES;
    }
    if (strcmp(profile, "gemini") == 0) {
        return STYLE_GEMINI;
    }
    if (strcmp(profile, "ollama") == 0) {
        return STYLE_OLLAMA;
    }
    if (strncmp(profile, "bedrock-", 8) == 0) {
        return STYLE_BEDROCK;
    }
    return STYLE_OPENAI;
}

const char *answer_content_type(const sg_stream_config *framing) {
    switch (sg_stream_config_format(framing)) {
    case SG_FORMAT_NDJSON:
        return "application/x-ndjson";
    case SG_FORMAT_EVENTSTREAM:
        return "application/vnd.amazon.eventstream";
    default:
        return "text/event-stream";
    }
}

static bool is_timeout(sg_outcome o) {
    return o == SG_OUTCOME_CONNECT_TIMEOUT || o == SG_OUTCOME_FIRST_ITEM_TIMEOUT ||
           o == SG_OUTCOME_IDLE_TIMEOUT || o == SG_OUTCOME_STREAM_TIMEOUT ||
           o == SG_OUTCOME_ATTEMPT_TIMEOUT || o == SG_OUTCOME_BUDGET_EXHAUSTED;
}

int answer_status(sg_outcome outcome, int upstream_status) {
    if (is_timeout(outcome)) {
        return 504;
    }
    if (outcome == SG_OUTCOME_HTTP_ERROR &&
        (upstream_status == 429 || upstream_status == 503 || upstream_status == 529)) {
        /* the upstream will take requests again (529: Anthropic's
         * overloaded_error, its 503): say when */
        return upstream_status;
    }
    if (outcome == SG_OUTCOME_HTTP_ERROR && upstream_status >= 400 &&
        upstream_status < 500) {
        /* the upstream refused the request as the client's error (its key,
         * its model, its parameters): a 502 would blame the proxy, and an
         * SDK would send the same request again */
        return upstream_status;
    }
    if (outcome == SG_OUTCOME_REFUSED) {
        return 503; /* not enough budget to try at all */
    }
    if (outcome == SG_OUTCOME_CANCELLED) {
        return 503; /* the proxy is shutting down */
    }
    return 502;
}

/* "sg-proxy: WHAT (detail)" as a JSON string literal, quotes included
 * (at most MESSAGE_PLAIN bytes of text, so that the literal fits @out). */
#define MESSAGE_PLAIN 200
#define MESSAGE_MAX (SGX_JSON_ESCAPE_MAX(MESSAGE_PLAIN) + 1)
static void message_of(const char *what, const char *detail, char *out, size_t cap) {
    char plain[MESSAGE_PLAIN];
    if (detail != NULL && *detail != '\0' && strcmp(detail, what) != 0) {
        snprintf(plain, sizeof(plain), "sg-proxy: %s (%s)", what, detail);
    } else {
        snprintf(plain, sizeof(plain), "sg-proxy: %s", what);
    }
    size_t n = sgx_json_escape(out, cap - 1, plain, strlen(plain));
    out[n < cap - 1 ? n : cap - 1] = '\0';
}

static size_t cut(int n, size_t cap) {
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

/* The error body in @style: @type names the failure (OpenAI's type,
 * Anthropic's type, Gemini's status), @code OpenAI's code (NULL: @type),
 * @msg a JSON string. */
static size_t body_of(enum answer_style style, const char *type, const char *code,
                      int status, const char *msg, char *buf, size_t cap) {
    int n;
    switch (style) {
    case STYLE_ANTHROPIC:
        n = snprintf(buf, cap,
                     "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":%s}}",
                     type, msg);
        break;
    case STYLE_GEMINI:
        n = snprintf(buf, cap,
                     "{\"error\":{\"code\":%d,\"message\":%s,\"status\":\"%s\"}}", status,
                     msg, type);
        break;
    case STYLE_OLLAMA:
        n = snprintf(buf, cap, "{\"error\":%s}", msg);
        break;
    case STYLE_BEDROCK:
        n = snprintf(buf, cap, "{\"message\":%s}", msg);
        break;
    default: /* OpenAI, and the Responses API's error object */
        n = snprintf(buf, cap,
                     "{\"error\":{\"message\":%s,\"type\":\"%s\",\"code\":\"%s\"}}", msg,
                     type, code != NULL ? code : type);
        break;
    }
    return cut(n, cap);
}

size_t answer_error_body(enum answer_style style, sg_outcome outcome, int status,
                         const char *detail, char *buf, size_t cap) {
    char msg[MESSAGE_MAX];
    message_of(sg_outcome_name(outcome), detail, msg, sizeof(msg));
    return body_of(style, sg_outcome_name(outcome), NULL, status, msg, buf, cap);
}

/* The provider's own name for a failure of the server's (not the
 * client's request): what sg-proxy's own failures are called. */
static const char *server_type(enum answer_style style, int status) {
    switch (style) {
    case STYLE_ANTHROPIC:
        return "api_error";
    case STYLE_GEMINI:
        return status == 503 ? "UNAVAILABLE" : "INTERNAL";
    default:
        return "server_error";
    }
}

size_t answer_own_body(enum answer_style style, int status, const char *what, char *buf,
                       size_t cap) {
    char msg[MESSAGE_MAX];
    message_of(what, NULL, msg, sizeof(msg));
    return body_of(style, server_type(style, status), NULL, status, msg, buf, cap);
}

size_t answer_refused_body(enum answer_style style, sg_op_reason why, int status,
                           const char *detail, char *buf, size_t cap) {
    char msg[MESSAGE_MAX];
    message_of("refused", detail, msg, sizeof(msg));
    /* the providers' own: OpenAI's requests-limit 429 (its type the limit,
     * its code rate_limit_exceeded) and its 503 server_error, Anthropic's
     * rate_limit_error and overloaded_error, Gemini's RESOURCE_EXHAUSTED
     * and UNAVAILABLE; the SDKs raise them by status (RateLimitError, an
     * InternalServerError) */
    const bool limit = status == 429;
    const char *type;
    switch (style) {
    case STYLE_ANTHROPIC:
        type = limit ? "rate_limit_error" : "overloaded_error";
        break;
    case STYLE_GEMINI:
        type = limit ? "RESOURCE_EXHAUSTED" : "UNAVAILABLE";
        break;
    default:
        type = limit ? "requests" : "server_error";
        break;
    }
    return body_of(style, type, limit ? "rate_limit_exceeded" : sg_op_reason_name(why),
                   status, msg, buf, cap);
}

/* An AWS event-stream exception message (tools/common's encoder): the SDK
 * raises it by its type (internalServerException: the outcome is in its
 * message).  0 when it does not fit @cap. */
static size_t bedrock_exception(const char *msg, char *buf, size_t cap) {
    static const sg_fm_es_header h[] = {
        {":message-type", "exception"},
        {":exception-type", "internalServerException"},
        {":content-type", "application/json"},
    };
    char payload[MESSAGE_MAX + 16];
    size_t pl =
        cut(snprintf(payload, sizeof(payload), "{\"message\":%s}", msg), sizeof(payload));
    sg_fm_buf out = {0};
    size_t n = 0;
    if (sg_fm_es_message(&out, h, 3, payload, pl, SG_FM_ES_INTACT) == 0 &&
        out.len <= cap) {
        memcpy(buf, sg_fm_buf_data(&out), out.len);
        n = out.len;
    }
    sg_fm_buf_free(&out);
    return n;
}

/* The in-band error in @style: @type and @code as in body_of. */
static size_t in_band_of(enum answer_style style, const char *type, int code,
                         const char *msg, char *buf, size_t cap) {
    int n;
    switch (style) {
    case STYLE_ANTHROPIC:
        n = snprintf(buf, cap,
                     "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"%s\","
                     "\"message\":%s}}\n\n",
                     type, msg);
        break;
    case STYLE_RESPONSES:
        n = snprintf(
            buf, cap,
            "event: error\ndata: {\"type\":\"error\",\"code\":\"%s\",\"message\":"
            "%s,\"param\":null}\n\n",
            type, msg);
        break;
    case STYLE_GEMINI:
        n = snprintf(
            buf, cap,
            "data: {\"error\":{\"code\":%d,\"message\":%s,\"status\":\"%s\"}}\n\n", code,
            msg, type);
        break;
    case STYLE_OLLAMA:
        n = snprintf(buf, cap, "{\"error\":%s}\n", msg);
        break;
    case STYLE_BEDROCK:
        return bedrock_exception(msg, buf, cap);
    default:
        n = snprintf(
            buf, cap,
            "data: {\"error\":{\"message\":%s,\"type\":\"%s\",\"code\":\"%s\"}}\n\n", msg,
            type, type);
        break;
    }
    return cut(n, cap);
}

size_t answer_in_band(enum answer_style style, sg_outcome outcome, const char *detail,
                      char *buf, size_t cap) {
    char msg[MESSAGE_MAX];
    message_of(sg_outcome_name(outcome), detail, msg, sizeof(msg));
    return in_band_of(style, sg_outcome_name(outcome), 504, msg, buf, cap);
}

size_t answer_own_in_band(enum answer_style style, const char *what, char *buf,
                          size_t cap) {
    char msg[MESSAGE_MAX];
    message_of(what, NULL, msg, sizeof(msg));
    return in_band_of(style, server_type(style, 500), 500, msg, buf, cap);
}
