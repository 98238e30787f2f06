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
#include <zlib.h>

#include "proxy.h"

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
    switch (framing->format) {
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
        (upstream_status == 429 || upstream_status == 503)) {
        return upstream_status; /* the client may retry: say when */
    }
    if (outcome == SG_OUTCOME_REFUSED) {
        return 503; /* not enough budget to try at all */
    }
    if (outcome == SG_OUTCOME_CANCELLED) {
        return 503; /* the proxy is shutting down */
    }
    return 502;
}

/* @s as the inside of a JSON string (the detail is ours or the library's
 * plain text; quotes, backslashes and controls are escaped). */
static size_t json_text(char *out, size_t cap, const char *s) {
    size_t o = 0;
    for (; s != NULL && *s != '\0' && o + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return o;
}

/* "sg-proxy: OUTCOME (detail)" as JSON string content. */
static void message_of(sg_outcome outcome, const char *detail, char *out, size_t cap) {
    char plain[400];
    if (detail != NULL && *detail != '\0' &&
        strcmp(detail, sg_outcome_name(outcome)) != 0) {
        snprintf(plain, sizeof(plain), "sg-proxy: %s (%s)", sg_outcome_name(outcome),
                 detail);
    } else {
        snprintf(plain, sizeof(plain), "sg-proxy: %s", sg_outcome_name(outcome));
    }
    json_text(out, cap, plain);
}

static size_t cut(int n, size_t cap) {
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t answer_error_body(enum answer_style style, sg_outcome outcome, int status,
                         const char *detail, char *buf, size_t cap) {
    char msg[900];
    message_of(outcome, detail, msg, sizeof(msg));
    const char *name = sg_outcome_name(outcome);
    int n;
    switch (style) {
    case STYLE_ANTHROPIC:
        n = snprintf(
            buf, cap,
            "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}", name,
            msg);
        break;
    case STYLE_GEMINI:
        n = snprintf(buf, cap,
                     "{\"error\":{\"code\":%d,\"message\":\"%s\",\"status\":\"%s\"}}",
                     status, msg, name);
        break;
    case STYLE_OLLAMA:
        n = snprintf(buf, cap, "{\"error\":\"%s\"}", msg);
        break;
    case STYLE_BEDROCK:
        n = snprintf(buf, cap, "{\"message\":\"%s\"}", msg);
        break;
    default: /* OpenAI, and the Responses API's error object */
        n = snprintf(buf, cap,
                     "{\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"code\":\"%s\"}}",
                     msg, name, name);
        break;
    }
    return cut(n, cap);
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static size_t put_header(unsigned char *h, const char *name, const char *value) {
    size_t nl = strlen(name);
    size_t vl = strlen(value);
    size_t o = 0;
    h[o++] = (unsigned char)nl;
    memcpy(h + o, name, nl);
    o += nl;
    h[o++] = 7; /* string */
    h[o++] = (unsigned char)(vl >> 8);
    h[o++] = (unsigned char)vl;
    memcpy(h + o, value, vl);
    return o + vl;
}

/* An AWS event-stream exception message: the SDK raises it by its type
 * (internalServerException: the outcome is in its message). */
static size_t bedrock_exception(const char *msg, char *buf, size_t cap) {
    unsigned char h[160];
    size_t hl = put_header(h, ":message-type", "exception");
    hl += put_header(h + hl, ":exception-type", "internalServerException");
    hl += put_header(h + hl, ":content-type", "application/json");
    char payload[1000];
    int pn = snprintf(payload, sizeof(payload), "{\"message\":\"%s\"}", msg);
    size_t pl = cut(pn, sizeof(payload));
    size_t total = 12 + hl + pl + 4;
    if (total > cap) {
        return 0;
    }
    unsigned char *m = (unsigned char *)buf;
    put_be32(m, (uint32_t)total);
    put_be32(m + 4, (uint32_t)hl);
    put_be32(m + 8, (uint32_t)crc32(0, m, 8));
    memcpy(m + 12, h, hl);
    memcpy(m + 12 + hl, payload, pl);
    put_be32(m + 12 + hl + pl, (uint32_t)crc32(0, m, (uInt)(12 + hl + pl)));
    return total;
}

size_t answer_in_band(enum answer_style style, sg_outcome outcome, const char *detail,
                      char *buf, size_t cap) {
    char msg[900];
    message_of(outcome, detail, msg, sizeof(msg));
    const char *name = sg_outcome_name(outcome);
    int n;
    switch (style) {
    case STYLE_ANTHROPIC:
        n = snprintf(buf, cap,
                     "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"%s\","
                     "\"message\":\"%s\"}}\n\n",
                     name, msg);
        break;
    case STYLE_RESPONSES:
        n = snprintf(
            buf, cap,
            "event: error\ndata: {\"type\":\"error\",\"code\":\"%s\",\"message\":"
            "\"%s\",\"param\":null}\n\n",
            name, msg);
        break;
    case STYLE_GEMINI:
        n = snprintf(
            buf, cap,
            "data: {\"error\":{\"code\":504,\"message\":\"%s\",\"status\":\"%s\"}}\n\n",
            msg, name);
        break;
    case STYLE_OLLAMA:
        n = snprintf(buf, cap, "{\"error\":\"%s\"}\n", msg);
        break;
    case STYLE_BEDROCK:
        return bedrock_exception(msg, buf, cap);
    default:
        n = snprintf(
            buf, cap,
            "data: {\"error\":{\"message\":\"%s\",\"type\":\"%s\",\"code\":\"%s\"}}\n\n",
            msg, name, name);
        break;
    }
    return cut(n, cap);
}
