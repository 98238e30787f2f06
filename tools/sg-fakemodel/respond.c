/*
 * What a complete request gets: routing by path (the model endpoints, the
 * reserved /_log, /_stats and /_health), the scenario's verdict (hang,
 * refuse, a scripted status, a stream), response headers on either
 * protocol, and complete non-streamed responses.  The streamed body itself
 * is generate.c's.
 */
#include "server.h"

#include <string.h>
#include <time.h>

/* An IMF-fixdate (RFC 9110 §5.6.7) for unix time @t. */
static void http_date(int64_t t, char *out, size_t len) {
    time_t tt = (time_t)t;
    struct tm tm;
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    if (gmtime_r(&tt, &tm) == NULL) {
        snprintf(out, len, "%s", "Thu, 01 Jan 1970 00:00:00 GMT");
        return;
    }
    snprintf(out, len, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
             tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
             tm.tm_sec);
}

/* Submits (HTTP/2) or writes (HTTP/1.1) response headers. */
static void send_headers(exchange *ex, int status, const char *ctype,
                         int64_t content_length, const char *retry_after) {
    conn *c = ex->c;
    ex->status = status;
    /* date_offset / retry_after_date: a server whose clock differs from
     * the client's, saying when to come back by its own clock. */
    char date[40] = "";
    char ra_date[40];
    if (ex->sc.early_hints) {
        /* An interim response first (RFC 8297): a client must wait for the
         * final one behind it. */
        if (c->mode == M_H2) {
            nghttp2_nv hints[2] = {
                {(uint8_t *)":status", (uint8_t *)"103", 7, 3, NGHTTP2_NV_FLAG_NONE},
                {(uint8_t *)"link", (uint8_t *)"</hint.css>; rel=preload", 4, 24,
                 NGHTTP2_NV_FLAG_NONE},
            };
            nghttp2_submit_headers(c->h2, NGHTTP2_FLAG_NONE, ex->stream_id, NULL, hints,
                                   2, NULL);
        } else if (!ex->h10) {
            sg_fm_buf_printf(&c->out, "HTTP/1.1 103 Early Hints\r\n"
                                      "Link: </hint.css>; rel=preload\r\n\r\n");
        }
    }
    if (ex->sc.has_date) {
        int64_t server_now = (int64_t)time(NULL) + ex->sc.date_offset_s;
        http_date(server_now, date, sizeof(date));
        if (ex->sc.has_retry_after_date) {
            http_date(server_now + ex->sc.retry_after_date_s, ra_date, sizeof(ra_date));
            retry_after = ra_date;
        }
    }
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%llu", (unsigned long long)ex->id);
    /* retry_after_ms: on the scripted status, beside Retry-After or alone
     * (a rate limiter's 429 says its own) */
    const bool ms_header = status >= 400 && status == ex->sc.status &&
                           ex->sc.retry_after_ms[0] != '\0' &&
                           !(ex->rl_judged && !ex->rl.admitted);
    /* a rate limiter's state, on every answer of a request it judged */
    sg_fm_rl_header rl[SG_FM_RL_MAX_HEADERS];
    size_t nrl = limits_headers(ex, rl);
    limits_count_status(ex, status);
    if (c->mode == M_H2) {
        char st[8];
        char cl[24];
        snprintf(st, sizeof(st), "%d", status);
        snprintf(cl, sizeof(cl), "%lld", (long long)content_length);
        nghttp2_nv nva[12 + SG_FM_RL_MAX_HEADERS];
        size_t n = 0;
#define NV(NAME, VALUE)                               \
    do {                                              \
        nva[n].name = (uint8_t *)(uintptr_t)(NAME);   \
        nva[n].namelen = strlen(NAME);                \
        nva[n].value = (uint8_t *)(uintptr_t)(VALUE); \
        nva[n].valuelen = strlen(VALUE);              \
        nva[n].flags = NGHTTP2_NV_FLAG_NONE;          \
        n++;                                          \
    } while (0)
        NV(":status", st);
        NV("content-type", ctype);
        NV("cache-control", "no-cache");
        NV("x-sg-request-id", idbuf);
        if (content_length >= 0) {
            NV("content-length", cl);
        }
        if (retry_after != NULL) {
            NV("retry-after", retry_after);
        }
        if (ms_header) {
            NV("retry-after-ms", ex->sc.retry_after_ms);
        }
        if (date[0] != '\0') {
            NV("date", date);
        }
        if (ex->amzn_error_type != NULL) {
            NV("x-amzn-errortype", ex->amzn_error_type);
        }
        if (status >= 400 && ex->sc.challenge) {
            NV("www-authenticate", "Basic realm=\"sg-fakemodel\"");
        }
        for (size_t i = 0; i < nrl; i++) {
            NV(rl[i].name, rl[i].value);
        }
#undef NV
        nghttp2_data_provider prd;
        prd.source.ptr = ex;
        prd.read_callback = h2_read;
        nghttp2_submit_response(c->h2, ex->stream_id, nva, n, &prd);
    } else {
        int want_close = !ex->keep_alive || ex->h10;
        sg_fm_buf_printf(
            &c->out,
            "HTTP/1.%d %d %s\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n"
            "X-SG-Request-Id: %s\r\n",
            ex->h10 ? 0 : 1, status, sg_fm_h1_status_text(status), ctype, idbuf);
        if (retry_after != NULL) {
            sg_fm_buf_printf(&c->out, "Retry-After: %s\r\n", retry_after);
        }
        if (ms_header) {
            sg_fm_buf_printf(&c->out, "retry-after-ms: %s\r\n", ex->sc.retry_after_ms);
        }
        if (date[0] != '\0') {
            sg_fm_buf_printf(&c->out, "Date: %s\r\n", date);
        }
        if (ex->amzn_error_type != NULL) {
            sg_fm_buf_printf(&c->out, "x-amzn-ErrorType: %s\r\n", ex->amzn_error_type);
        }
        if (status >= 400 && ex->sc.challenge) {
            sg_fm_buf_printf(&c->out,
                             "WWW-Authenticate: Basic realm=\"sg-fakemodel\"\r\n");
        }
        for (size_t i = 0; i < nrl; i++) {
            sg_fm_buf_printf(&c->out, "%s: %s\r\n", rl[i].name, rl[i].value);
        }
        if (content_length >= 0) {
            sg_fm_buf_printf(&c->out, "Content-Length: %lld\r\n",
                             (long long)content_length);
        } else if (!ex->h10) {
            sg_fm_buf_append(&c->out, "Transfer-Encoding: chunked\r\n", 28);
        }
        if (want_close) {
            sg_fm_buf_append(&c->out, "Connection: close\r\n", 19);
            ex->keep_alive = 0;
        }
        sg_fm_buf_append(&c->out, "\r\n", 2);
    }
    char f[64];
    snprintf(f, sizeof(f), "\"status\":%d", status);
    log_ex(ex, SG_FM_EV_HEADERS_SENT, f);
}

/* A complete, non-streamed response (errors, /_log, /_stats), with
 * Retry-After when @retry_after is not NULL. */
static void respond_whole(exchange *ex, int status, const char *ctype, const char *body,
                          size_t len, const char *reason, const char *retry_after) {
    ex->st = X_STREAMING;
    ex->reason = reason;
    send_headers(ex, status, ctype, (int64_t)len, retry_after);
    ex->allow = SIZE_MAX;
    pend_add(ex, body, len);
    ex->eof_pending = 1;
    if (ex->c->mode == M_H1) {
        sg_fm_buf_append(&ex->c->out, sg_fm_buf_data(&ex->pend), ex->pend.len);
        sg_fm_buf_consume(&ex->pend, ex->pend.len);
        ex_finish(ex, NULL);
    }
}

static void ex_respond(exchange *ex, int status, const char *ctype, const char *body,
                       size_t len, const char *reason) {
    respond_whole(ex, status, ctype, body, len, reason, NULL);
}

void ex_respond_json_error(exchange *ex, int status, const char *msg,
                           const char *reason) {
    sg_fm_buf b = {0};
    sg_fm_buf_printf(&b, "{\"error\":{\"message\":\"");
    sg_fm_buf_json_str(&b, msg, strlen(msg));
    sg_fm_buf_printf(&b, "\",\"type\":\"%s\",\"code\":%d}}\n", reason, status);
    ex_respond(ex, status, "application/json", sg_fm_buf_data(&b), b.len, reason);
    sg_fm_buf_free(&b);
}

/* A hash of request id @id under @salt (splitmix64's finalizer): the same
 * every run, and independent for each salt. */
static uint64_t id_hash(uint64_t id, uint64_t salt) {
    uint64_t h = (id ^ salt) * UINT64_C(0x9e3779b97f4a7c15);
    h ^= h >> 31;
    h *= UINT64_C(0xbf58476d1ce4e5b9);
    h ^= h >> 29;
    return h;
}

/* The wait before the first item: first_delay, or for tail_pct percent of
 * requests (chosen by a hash of the request id: the same every run)
 * tail_delay - a latency tail; either with up to first_jitter more,
 * uniform, drawn from another hash of the id - a spread of first tokens,
 * whose quantiles are not one value. */
static int64_t first_delay(const struct exchange *ex) {
    int64_t d = ex->sc.first_delay_ms;
    if (ex->tail) {
        d = ex->sc.tail_delay_ms; /* one of the first tail_first of its key */
    } else if (ex->sc.tail_pct > 0 &&
               (int64_t)(id_hash(ex->id, 0) % 100) < ex->sc.tail_pct) {
        d = ex->sc.tail_delay_ms;
    }
    if (ex->sc.first_jitter_ms > 0) {
        d += (int64_t)(id_hash(ex->id, UINT64_C(0x6a09e667f3bcc909)) %
                       (uint64_t)(ex->sc.first_jitter_ms + 1));
    }
    return d;
}

/* A status's names in the providers' errors: Anthropic's error type, the
 * google.rpc.Code the Gemini API gives (the last row: any other). */
static const struct error_names {
    int status;
    const char *anthropic;
    const char *gemini;
} error_names[] = {
    {400, "invalid_request_error", "INVALID_ARGUMENT"},
    {401, "authentication_error", "UNAUTHENTICATED"},
    {403, "permission_error", "PERMISSION_DENIED"},
    {404, "not_found_error", "NOT_FOUND"},
    {413, "request_too_large", "UNKNOWN"},
    {429, "rate_limit_error", "RESOURCE_EXHAUSTED"},
    {500, "api_error", "INTERNAL"},
    {503, "api_error", "UNAVAILABLE"},
    {504, "api_error", "DEADLINE_EXCEEDED"},
    {529, "overloaded_error", "UNKNOWN"},
    {0, "api_error", "UNKNOWN"},
};

static const struct error_names *names_of(int status) {
    const struct error_names *e = error_names;
    while (e->status != 0 && e->status != status) {
        e++;
    }
    return e;
}

/* An error body in the shape of @format's provider, cut in two around its
 * message: OpenAI's {"error": {message, type, code}}, Anthropic's {"type":
 * "error", "error": {type, message}}, Gemini's {"error": {code, message,
 * status}}, Ollama's {"error": "..."}, Bedrock's {"message": "..."}. */
static void error_shape_open(sg_fm_buf *b, int format, int status) {
    switch (format) {
    case SG_FM_FMT_ANTHROPIC:
        sg_fm_buf_printf(b,
                         "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"",
                         names_of(status)->anthropic);
        break;
    case SG_FM_FMT_GEMINI:
        sg_fm_buf_printf(b, "{\"error\":{\"code\":%d,\"message\":\"", status);
        break;
    case SG_FM_FMT_OLLAMA:
    case SG_FM_FMT_NDJSON:
        sg_fm_buf_printf(b, "{\"error\":\"");
        break;
    case SG_FM_FMT_BEDROCK_CONVERSE:
    case SG_FM_FMT_BEDROCK_INVOKE:
        sg_fm_buf_printf(b, "{\"message\":\"");
        break;
    default:
        sg_fm_buf_printf(b, "{\"error\":{\"message\":\"");
        break;
    }
}

static void error_shape_close(sg_fm_buf *b, int format, const error_answer *a) {
    switch (format) {
    case SG_FM_FMT_ANTHROPIC:
        if (a->code[0] != '\0') {
            /* what Anthropic's spend limits add (error.details.error_code) */
            sg_fm_buf_printf(b, "\",\"details\":{\"error_code\":\"%s\"}}}\n", a->code);
        } else {
            sg_fm_buf_printf(b, "\"}}\n");
        }
        break;
    case SG_FM_FMT_GEMINI:
        sg_fm_buf_printf(b, "\",\"status\":\"%s\"}}\n", names_of(a->status)->gemini);
        break;
    case SG_FM_FMT_OLLAMA:
    case SG_FM_FMT_NDJSON:
    case SG_FM_FMT_BEDROCK_CONVERSE:
    case SG_FM_FMT_BEDROCK_INVOKE:
        sg_fm_buf_printf(b, "\"}\n");
        break;
    default:
        if (a->rl_type != NULL) {
            /* OpenAI's rate-limit error: the limit by name, and its code */
            sg_fm_buf_printf(b,
                             "\",\"type\":\"%s\",\"param\":null,\"code\":"
                             "\"rate_limit_exceeded\"}}\n",
                             a->rl_type);
        } else {
            sg_fm_buf_printf(b, "\",\"type\":\"scripted\",\"code\":%d}}\n", a->status);
        }
        break;
    }
}

void ex_respond_error(exchange *ex, const error_answer *a) {
    sg_fm_buf b = {0};
    error_shape_open(&b, ex->sc.format, a->status);
    sg_fm_buf_json_str(&b, a->message, strlen(a->message));
    /* error_pad: that many 'x' end the message (a long error body) */
    if (a->pad > 0) {
        sg_fm_buf_fill(&b, 'x', (size_t)a->pad);
    }
    error_shape_close(&b, ex->sc.format, a);
    if (sg_fm_format_is_eventstream(ex->sc.format)) {
        ex->amzn_error_type = bedrock_error_type_for_status(a->status);
    }
    respond_whole(ex, a->status, "application/json", sg_fm_buf_data(&b), b.len, a->reason,
                  a->retry_after);
    sg_fm_buf_free(&b);
}

static void start_stream_response(exchange *ex) {
    int64_t now = sg_fm_now();
    int es = sg_fm_format_is_eventstream(ex->sc.format);
    const char *ctype =
        ex->sc.format == SG_FM_FMT_NDJSON || ex->sc.format == SG_FM_FMT_OLLAMA
            ? "application/x-ndjson"
        : es ? "application/vnd.amazon.eventstream"
             : "text/event-stream";
    if (ex->status > 0 && ex->status != 200) {
        /* The scripted failure: status, Retry-After, and the error body
         * in the provider's own shape, with x-amzn-ErrorType for the
         * Bedrock formats. */
        char msg[48];
        snprintf(msg, sizeof(msg), "sg-fakemodel scripted status %d", ex->status);
        error_answer a = {.status = ex->status,
                          .message = msg,
                          .pad = ex->sc.error_pad,
                          .code = ex->sc.error_code,
                          .retry_after =
                              ex->sc.retry_after[0] ? ex->sc.retry_after : NULL,
                          .reason = "status"};
        ex_respond_error(ex, &a);
        return;
    }
    ex->st = X_STREAMING;
    send_headers(ex, 200, ctype, -1, NULL);
    emit_prelude(ex);
    ex->last_emit_at = now;
    if (ex->sc.keepalive_only) {
        if (ex->sc.keepalive_ms == 0) {
            ex->sc.keepalive_ms = 1000;
        }
        ex->next_item_at = SG_FM_FOREVER;
    } else {
        ex->first_due_ms = first_delay(ex);
        schedule_next(ex, now, ex->first_due_ms);
    }
    ex_step(ex);
}

void ex_on_timer(sg_fm_timer *t) {
    exchange *ex = (exchange *)t;
    conn *c = ex->c;
    switch (ex->st) {
    case X_WAIT_HEADERS:
        start_stream_response(ex);
        break;
    case X_STREAMING:
        ex->blocked = 0;
        ex_step(ex);
        break;
    case X_READING:
    case X_HANG:
    case X_DONE:
    default:
        break;
    }
    conn_after(c);
}

static sg_fm_format path_format(const char *path, size_t len) {
    static const struct {
        const char *path;
        sg_fm_format fmt;
    } routes[] = {
        {"/stream", SG_FM_FMT_SSE},          {"/v1/chat/completions", SG_FM_FMT_SSE},
        {"/v1/completions", SG_FM_FMT_SSE},  {"/v1/messages", SG_FM_FMT_ANTHROPIC},
        {"/ndjson", SG_FM_FMT_NDJSON},       {"/api/chat", SG_FM_FMT_NDJSON},
        {"/api/generate", SG_FM_FMT_NDJSON}, {"/v1/responses", SG_FM_FMT_RESPONSES},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strlen(routes[i].path) == len && memcmp(routes[i].path, path, len) == 0) {
            return routes[i].fmt;
        }
    }
    /* Gemini names the model in the path: /v1beta/models/{model}:
     * streamGenerateContent (Vertex AI: .../publishers/google/models/...). */
    static const struct {
        const char *suffix;
        sg_fm_format fmt;
    } suffixes[] = {
        {":streamGenerateContent", SG_FM_FMT_GEMINI},
        /* Bedrock: /model/{modelId}/converse-stream and
         * /model/{modelId}/invoke-with-response-stream */
        {"/converse-stream", SG_FM_FMT_BEDROCK_CONVERSE},
        {"/invoke-with-response-stream", SG_FM_FMT_BEDROCK_INVOKE},
    };
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        size_t sl = strlen(suffixes[i].suffix);
        if (len > sl && path[0] == '/' &&
            memcmp(path + len - sl, suffixes[i].suffix, sl) == 0) {
            return suffixes[i].fmt;
        }
    }
    return (sg_fm_format)-1;
}

/*
 * --sigv4-key: the request must be signed by the key.  Returns 0 if it is;
 * else answers 403 as Bedrock does (x-amzn-ErrorType, {"message": ...}) and
 * returns -1.  Neither the log nor the answer names the signature.
 */
static int check_sigv4(exchange *ex, const char *q, size_t qlen) {
    const sg_fm_options *o = ex->c->srv->o;
    char body_hex[65];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (ex->body_md != NULL && EVP_DigestFinal_ex(ex->body_md, md, &mdlen) == 1 &&
        mdlen == 32) {
        static const char hex[] = "0123456789abcdef";
        for (unsigned i = 0; i < 32; i++) {
            body_hex[2 * i] = hex[md[i] >> 4];
            body_hex[2 * i + 1] = hex[md[i] & 15];
        }
        body_hex[64] = '\0';
    } else {
        sg_fm_sha256_hex("", 0, body_hex);
    }
    sg_fm_sigv4_request r = {ex->method, ex->target, ex->path_len, q,
                             qlen,       ex->hdrs,   ex->n_hdrs,   body_hex};
    char why[160];
    sg_fm_sigv4_result res = sg_fm_sigv4_verify(&r, o->sigv4_akid, o->sigv4_secret,
                                                (int64_t)time(NULL), why, sizeof(why));
    if (res == SG_FM_SIGV4_OK) {
        return 0;
    }
    const char *msg = why;
    switch (res) {
    case SG_FM_SIGV4_MISSING:
        ex->amzn_error_type = "MissingAuthenticationTokenException";
        msg = "Missing Authentication Token";
        break;
    case SG_FM_SIGV4_UNKNOWN_KEY:
        ex->amzn_error_type = "UnrecognizedClientException";
        msg = "The security token included in the request is invalid.";
        break;
    case SG_FM_SIGV4_MISMATCH:
        ex->amzn_error_type = "InvalidSignatureException";
        msg = "The request signature we calculated does not match the signature you "
              "provided. Check your AWS Secret Access Key and signing method. Consult "
              "the service documentation for details.";
        break;
    case SG_FM_SIGV4_MALFORMED:
    case SG_FM_SIGV4_SKEWED:
    default:
        ex->amzn_error_type = "InvalidSignatureException";
        break;
    }
    /* literals: ex->reason is read when the response ends, maybe later */
    const char *reason = res == SG_FM_SIGV4_MISSING       ? "sigv4_missing"
                         : res == SG_FM_SIGV4_UNKNOWN_KEY ? "sigv4_unknown_key"
                         : res == SG_FM_SIGV4_SKEWED      ? "sigv4_skewed"
                         : res == SG_FM_SIGV4_MALFORMED   ? "sigv4_malformed"
                                                          : "sigv4_mismatch";
    sg_fm_buf b = {0};
    sg_fm_buf_append(&b, "{\"message\":\"", 12);
    sg_fm_buf_json_str(&b, msg, strlen(msg));
    sg_fm_buf_append(&b, "\"}\n", 3);
    ex_respond(ex, 403, "application/json", sg_fm_buf_data(&b), b.len, reason);
    sg_fm_buf_free(&b);
    return -1;
}

static int path_is(const exchange *ex, const char *p) {
    return ex->target != NULL && strlen(p) == ex->path_len &&
           memcmp(ex->target, p, ex->path_len) == 0;
}

static void serve_stats(exchange *ex) {
    const sg_fm_server *srv = ex->c->srv;
    sg_fm_buf b = {0};
    sg_fm_buf_printf(&b,
                     "{\"connections\":%zu,\"exchanges\":%zu,\"connections_total\":%llu,"
                     "\"requests_total\":%llu,\"timers\":%zu,\"log_events\":%zu,"
                     "\"log_dropped\":%llu",
                     srv->n_conns, srv->n_exchanges, (unsigned long long)srv->conns_total,
                     (unsigned long long)srv->requests_total, srv->timers.len,
                     sg_fm_log_count(), (unsigned long long)sg_fm_log_dropped());
    limits_stats(srv, &b);
    sg_fm_buf_append(&b, "}\n", 2);
    ex_respond(ex, 200, "application/json", sg_fm_buf_data(&b), b.len, "stats");
    sg_fm_buf_free(&b);
}

/* What a server does before any work when it will not take the request.
 * HTTP/2 says the request was never processed (RFC 9113 §8.7), safe to
 * retry: refuse resets the stream with REFUSED_STREAM; goaway sends GOAWAY
 * whose last stream id is the one before this stream, so this stream (and
 * any the client opened after it) is above it - nghttp2 closes them when
 * the frame leaves, and the connection once the streams at or below it
 * are done.  HTTP/1.1 can only close the connection.  reset, on either
 * protocol, aborts the connection with a TCP RST: a crashed upstream, or
 * a middlebox that gave up, which says nothing of what was processed. */
static void refuse_at_once(exchange *ex) {
    ex->st = X_STREAMING;
    if (ex->sc.reset && !ex->sc.refuse && !ex->sc.goaway) {
        ex->c->abort_after_flush = 1;
        ex->c->rst_on_close = 1;
        ex_finish(ex, "reset");
        return;
    }
    if (ex->c->mode == M_H2 && ex->sc.refuse) {
        nghttp2_submit_rst_stream(ex->c->h2, NGHTTP2_FLAG_NONE, ex->stream_id,
                                  NGHTTP2_REFUSED_STREAM);
    } else if (ex->c->mode == M_H2) {
        int32_t last = ex->stream_id > 2 ? ex->stream_id - 2 : 0;
        nghttp2_submit_goaway(ex->c->h2, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR, NULL,
                              0);
    } else {
        ex->c->abort_after_flush = 1;
    }
    ex_finish(ex, ex->sc.refuse ? "refused" : "goaway");
}

/* The request is complete: log it and decide what to play. */
void ex_begin(exchange *ex) {
    ex->t_received = sg_fm_now();
    const char *q = NULL;
    size_t qlen = 0;
    if (ex->target != NULL && ex->target[ex->path_len] == '?') {
        q = ex->target + ex->path_len + 1;
        qlen = strlen(q);
    }
    int is_get = strcmp(ex->method, "GET") == 0;
    int is_post = strcmp(ex->method, "POST") == 0;
    /* Reserved paths: served, never logged. */
    if (ex->target != NULL && ex->path_len >= 2 && memcmp(ex->target, "/_", 2) == 0) {
        ex->nolog = 1;
        ex->received_logged = 1;
        if (path_is(ex, "/_log") && is_get) {
            sg_fm_buf b = {0};
            if (sg_fm_log_render(&b, q != NULL ? q : "", qlen) != 0) {
                ex_respond_json_error(ex, 400,
                                      "bad /_log query (key, id, since, event, limit)",
                                      "bad_request");
            } else {
                ex_respond(ex, 200, "application/json", sg_fm_buf_data(&b), b.len, "log");
            }
            sg_fm_buf_free(&b);
        } else if ((path_is(ex, "/_log/reset") && is_post) ||
                   (path_is(ex, "/_log") && strcmp(ex->method, "DELETE") == 0)) {
            sg_fm_log_reset();
            limits_reset(ex->c->srv);
            ex_respond(ex, 200, "application/json", "{\"ok\":true}\n", 12, "log_reset");
        } else if (path_is(ex, "/_stats") && is_get) {
            serve_stats(ex);
        } else if (path_is(ex, "/_health") && is_get) {
            ex_respond(ex, 200, "text/plain", "ok\n", 3, "health");
        } else {
            ex_respond_json_error(ex, 404, "no such reserved path", "not_found");
        }
        return;
    }
    log_received(ex, NULL);
    if (ex->body_bytes > ex->c->srv->o->max_body) {
        ex_respond_json_error(ex, 413, "request body too large", "body_too_large");
        return;
    }
    sg_fm_format fmt =
        ex->target != NULL ? path_format(ex->target, ex->path_len) : (sg_fm_format)-1;
    if ((int)fmt < 0) {
        ex_respond_json_error(ex, 404, "unknown path; see docs/sg-fakemodel.md",
                              "not_found");
        return;
    }
    if (!is_get && !is_post) {
        ex_respond_json_error(ex, 405, "use GET or POST", "method_not_allowed");
        return;
    }
    if (ex->c->srv->o->sigv4_akid != NULL && check_sigv4(ex, q, qlen) != 0) {
        return;
    }
    sg_fm_scenario_init(&ex->sc, fmt);
    char err[128];
    bool bad =
        (q != NULL && sg_fm_scenario_parse(&ex->sc, q, qlen, err, sizeof(err)) != 0) ||
        (ex->scenario_hdr != NULL &&
         sg_fm_scenario_parse(&ex->sc, ex->scenario_hdr, strlen(ex->scenario_hdr), err,
                              sizeof(err)) != 0);
    if (!bad) {
        sg_fm_scenario_set_body(&ex->sc, ex->body_bytes); /* the default prompt */
        bad = sg_fm_scenario_check(&ex->sc, err, sizeof(err)) != 0;
    }
    if (bad) {
        ex_respond_json_error(ex, 400, err, "bad_scenario");
        return;
    }
    /* OpenAI's usage chunk only when the body asks for it, as OpenAI */
    ex->include_usage =
        ex->sc.format == SG_FM_FMT_SSE && sg_fm_body_asks_usage(&ex->body_scan);
    /* the rate limiter first, as a provider's gateway: what it refuses
     * plays nothing of the scenario */
    if (!limits_admit(ex)) {
        return;
    }
    limits_count(ex);
    if (ex->sc.status > 0 && ex->sc.status != 200) {
        ex->status = ex->sc.status;
    }
    if (ex->sc.hang) {
        ex->st = X_HANG;
        return;
    }
    if (ex->sc.refuse || ex->sc.goaway || ex->sc.reset) {
        refuse_at_once(ex);
        return;
    }
    ex->st = X_WAIT_HEADERS;
    if (ex->sc.headers_delay_ms > 0) {
        ex_arm(ex, sg_fm_add_ms(ex->t_received, ex->sc.headers_delay_ms));
    } else {
        start_stream_response(ex);
    }
}
