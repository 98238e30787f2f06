/*
 * Query knobs -> sg_fm_scenario.  Unknown knobs are an error on purpose: a
 * typo such as "stal_after" must not silently produce a healthy stream and a
 * passing test.
 */
#include "scenario.h"

#include <stdio.h>
#include <string.h>

void sg_fm_scenario_init(sg_fm_scenario *s, sg_fm_format format) {
    memset(s, 0, sizeof(*s));
    s->n = 5;
    s->gap_ms = 10;
    s->stall_after = -1;
    s->stall_ms = SG_FM_FOREVER;
    s->drop_after = -1;
    s->rst_code = -1;
    s->fail_first = -1;
    s->error_at = -1;
    s->bad_crc_at = -1;
    s->cut_at = -1;
    s->prompt_tokens = -1;
    s->rl_window_ms = 60000;
    s->format = format;
}

int sg_fm_query_next(const char **cursor, const char *end, const char **name,
                     size_t *name_len, const char **value, size_t *value_len) {
    const char *p = *cursor;
    while (p < end && *p == '&') {
        p++;
    }
    if (p >= end) {
        *cursor = end;
        return 0;
    }
    const char *amp = memchr(p, '&', (size_t)(end - p));
    const char *stop = amp != NULL ? amp : end;
    const char *eq = memchr(p, '=', (size_t)(stop - p));
    *name = p;
    if (eq != NULL) {
        *name_len = (size_t)(eq - p);
        *value = eq + 1;
        *value_len = (size_t)(stop - eq - 1);
    } else {
        *name_len = (size_t)(stop - p);
        *value = stop;
        *value_len = 0;
    }
    *cursor = stop;
    return 1;
}

static int hexdigit(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

long sg_fm_url_decode(const char *in, size_t len, char *out, size_t outcap) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '%') {
            if (i + 2 >= len) {
                return -1;
            }
            int hi = hexdigit(in[i + 1]);
            int lo = hexdigit(in[i + 2]);
            if (hi < 0 || lo < 0) {
                return -1;
            }
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (o >= outcap) {
            return -1;
        }
        out[o++] = c;
    }
    return (long)o;
}

static int name_is(const char *n, size_t len, const char *want) {
    return strlen(want) == len && memcmp(n, want, len) == 0;
}

/* Non-negative decimal integer no larger than max; "forever" when allowed. */
static int parse_int(const char *v, size_t len, int64_t max, int allow_forever,
                     int64_t *out) {
    if (allow_forever && name_is(v, len, "forever")) {
        *out = SG_FM_FOREVER;
        return 0;
    }
    if (len == 0 || len > 15) {
        return -1;
    }
    int64_t x = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return -1;
        }
        x = x * 10 + (v[i] - '0');
    }
    if (x > max) {
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_bool(const char *v, size_t len, int *out) {
    if (len == 0 || name_is(v, len, "1") || name_is(v, len, "true") ||
        name_is(v, len, "yes")) {
        *out = 1;
        return 0;
    }
    if (name_is(v, len, "0") || name_is(v, len, "false") || name_is(v, len, "no")) {
        *out = 0;
        return 0;
    }
    return -1;
}

/* An enumerated knob: the index of its value among @names. */
static int parse_choice(const char *v, size_t len, const char *const *names, int n,
                        int *out) {
    for (int i = 0; i < n; i++) {
        if (name_is(v, len, names[i])) {
            *out = i;
            return 0;
        }
    }
    return -1;
}

/* A header value's bytes (printable ASCII, 1 .. cap - 1 of them) into
 * @out, NUL-terminated. */
static int parse_printable(const char *v, size_t len, char *out, size_t cap) {
    if (len == 0 || len >= cap) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] >= 0x7f) {
            return -1;
        }
    }
    memcpy(out, v, len);
    out[len] = '\0';
    return 0;
}

/* A name written into a JSON string as it is: letters, digits, '_', '.',
 * '-' (1 .. cap - 1 of them) into @out, NUL-terminated. */
static int parse_name(const char *v, size_t len, char *out, size_t cap) {
    if (len == 0 || len >= cap) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        char c = v[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')) {
            return -1;
        }
    }
    memcpy(out, v, len);
    out[len] = '\0';
    return 0;
}

/* A duration knob: milliseconds, at most ~11.5 days. */
#define MAX_MS 1000000000LL
#define MAX_COUNT 1000000000000LL

/*
 * The knobs of an upstream's limits: the rate limiter's (rl_*), the name
 * fail_first counts under (fail_key) and the connection reset (reset).
 * Returns 1 and sets *rc (0, or -1 for a bad value) when @n is one of them.
 */
static int parse_limit_knob(sg_fm_scenario *s, const char *n, size_t nn, const char *v,
                            size_t vn, int *rc) {
    static const char *const limits[SG_FM_RL_DIMS] = {
        "rl_requests", "rl_tokens", "rl_input_tokens", "rl_output_tokens"};
    for (int d = 0; d < SG_FM_RL_DIMS; d++) {
        if (name_is(n, nn, limits[d])) {
            *rc = parse_int(v, vn, MAX_COUNT, 0, &s->rl_limit[d]);
            *rc = *rc == 0 && s->rl_limit[d] == 0 ? -1 : *rc;
            return 1;
        }
    }
    if (name_is(n, nn, "rl_window")) {
        *rc = parse_int(v, vn, MAX_MS, 0, &s->rl_window_ms);
        *rc = *rc == 0 && s->rl_window_ms == 0 ? -1 : *rc;
    } else if (name_is(n, nn, "rl_style")) {
        /* in the order of sg_fm_rl_style, after "by format" */
        static const char *const styles[] = {"openai", "anthropic"};
        int style = 0;
        *rc = parse_choice(v, vn, styles, 2, &style);
        s->rl_style = (sg_fm_rl_style)(style + 1);
    } else if (name_is(n, nn, "rl_key")) {
        *rc = parse_name(v, vn, s->rl_key, sizeof(s->rl_key));
    } else if (name_is(n, nn, "fail_key")) {
        *rc = parse_name(v, vn, s->fail_key, sizeof(s->fail_key));
        return 1;
    } else if (name_is(n, nn, "reset")) {
        *rc = parse_bool(v, vn, &s->reset);
        return 1;
    } else {
        return 0;
    }
    s->rl_knobs = 1;
    return 1;
}

int sg_fm_scenario_parse(sg_fm_scenario *s, const char *q, size_t len, char *err,
                         size_t errlen) {
    const char *cur = q;
    const char *end = q + len;
    const char *rn;
    const char *rv;
    size_t rnl;
    size_t rvl;
    while (sg_fm_query_next(&cur, end, &rn, &rnl, &rv, &rvl)) {
        char n[32];
        char v[128];
        long nl = sg_fm_url_decode(rn, rnl, n, sizeof(n));
        long vl = sg_fm_url_decode(rv, rvl, v, sizeof(v) - 1);
        if (nl < 0) {
            snprintf(err, errlen, "bad query parameter name");
            return -1;
        }
        if (nl == 0 || n[0] == '_') {
            continue;
        }
        if (vl < 0) {
            snprintf(err, errlen, "bad value for '%.*s'", (int)nl, n);
            return -1;
        }
        v[vl] = '\0';
        size_t nn = (size_t)nl;
        size_t vn = (size_t)vl;
        int rc = 0;
        int64_t x = 0;
        if (name_is(n, nn, "n")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->n);
        } else if (name_is(n, nn, "gap")) {
            rc = parse_int(v, vn, MAX_MS, 0, &s->gap_ms);
        } else if (name_is(n, nn, "headers_delay")) {
            rc = parse_int(v, vn, MAX_MS, 0, &s->headers_delay_ms);
        } else if (name_is(n, nn, "first_delay")) {
            rc = parse_int(v, vn, MAX_MS, 0, &s->first_delay_ms);
        } else if (name_is(n, nn, "first_jitter")) {
            rc = parse_int(v, vn, MAX_MS, 0, &s->first_jitter_ms);
        } else if (name_is(n, nn, "tail_pct")) {
            rc = parse_int(v, vn, 100, 0, &s->tail_pct);
        } else if (name_is(n, nn, "tail_delay")) {
            rc = parse_int(v, vn, MAX_MS, 0, &s->tail_delay_ms);
        } else if (name_is(n, nn, "tail_first")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->tail_first);
        } else if (name_is(n, nn, "stall_after")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->stall_after);
        } else if (name_is(n, nn, "eol")) {
            if (vn == 2 && memcmp(v, "cr", 2) == 0) {
                s->eol_cr = 1;
            } else if (vn == 2 && memcmp(v, "lf", 2) == 0) {
                s->eol_cr = 0;
            } else {
                rc = -1;
            }
        } else if (name_is(n, nn, "linger")) {
            rc = parse_int(v, vn, MAX_MS, 1, &s->linger_ms);
        } else if (name_is(n, nn, "stall")) {
            rc = parse_int(v, vn, MAX_MS, 1, &s->stall_ms);
        } else if (name_is(n, nn, "keepalive")) {
            rc = parse_int(v, vn, MAX_MS, 0, &s->keepalive_ms);
            if (rc == 0 && s->keepalive_ms == 0) {
                rc = -1;
            }
        } else if (name_is(n, nn, "keepalive_only")) {
            rc = parse_bool(v, vn, &s->keepalive_only);
        } else if (name_is(n, nn, "runaway")) {
            rc = parse_bool(v, vn, &s->runaway);
        } else if (name_is(n, nn, "drop_after")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->drop_after);
        } else if (name_is(n, nn, "drop")) {
            if (name_is(v, vn, "close")) {
                s->drop_mode = SG_FM_DROP_CLOSE;
            } else if (name_is(v, vn, "rst")) {
                s->drop_mode = SG_FM_DROP_RST;
            } else {
                rc = -1;
            }
        } else if (name_is(n, nn, "rst_code")) {
            rc = parse_int(v, vn, 0xffffffffLL, 0, &s->rst_code);
        } else if (name_is(n, nn, "refuse")) {
            rc = parse_bool(v, vn, &s->refuse);
        } else if (name_is(n, nn, "goaway")) {
            rc = parse_bool(v, vn, &s->goaway);
        } else if (name_is(n, nn, "no_done")) {
            rc = parse_bool(v, vn, &s->no_done);
        } else if (name_is(n, nn, "status")) {
            rc = parse_int(v, vn, 599, 0, &x);
            if (rc == 0 && x < 200) {
                rc = -1;
            }
            s->status = (int)x;
        } else if (name_is(n, nn, "challenge")) {
            rc = parse_bool(v, vn, &s->challenge);
        } else if (name_is(n, nn, "error_pad")) {
            rc = parse_int(v, vn, 1 << 20, 0, &s->error_pad);
        } else if (name_is(n, nn, "retry_after")) {
            rc = parse_printable(v, vn, s->retry_after, sizeof(s->retry_after));
        } else if (name_is(n, nn, "early_hints")) {
            rc = parse_bool(v, vn, &s->early_hints);
        } else if (name_is(n, nn, "date_offset")) {
            /* signed seconds: the server's clock, as its Date header says */
            size_t neg = vn > 0 && v[0] == '-' ? 1 : 0;
            rc = parse_int(v + neg, vn - neg, 10LL * 365 * 86400, 0, &s->date_offset_s);
            s->date_offset_s = neg ? -s->date_offset_s : s->date_offset_s;
            s->has_date = 1;
        } else if (name_is(n, nn, "retry_after_date")) {
            rc = parse_int(v, vn, 86400, 0, &s->retry_after_date_s);
            s->has_retry_after_date = 1;
            s->has_date = 1;
        } else if (name_is(n, nn, "fail_first")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->fail_first);
        } else if (name_is(n, nn, "pass_first")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->pass_first);
        } else if (name_is(n, nn, "retry_after_ms")) {
            rc = parse_printable(v, vn, s->retry_after_ms, sizeof(s->retry_after_ms));
        } else if (name_is(n, nn, "hang")) {
            rc = parse_bool(v, vn, &s->hang);
        } else if (name_is(n, nn, "format")) {
            if (name_is(v, vn, "sse") || name_is(v, vn, "openai")) {
                s->format = SG_FM_FMT_SSE;
            } else if (name_is(v, vn, "ndjson")) {
                s->format = SG_FM_FMT_NDJSON;
            } else if (name_is(v, vn, "anthropic")) {
                s->format = SG_FM_FMT_ANTHROPIC;
            } else if (name_is(v, vn, "ollama")) {
                s->format = SG_FM_FMT_OLLAMA;
            } else if (name_is(v, vn, "gemini")) {
                s->format = SG_FM_FMT_GEMINI;
            } else if (name_is(v, vn, "openai-responses")) {
                s->format = SG_FM_FMT_RESPONSES;
            } else if (name_is(v, vn, "bedrock-converse")) {
                s->format = SG_FM_FMT_BEDROCK_CONVERSE;
            } else if (name_is(v, vn, "bedrock-invoke")) {
                s->format = SG_FM_FMT_BEDROCK_INVOKE;
            } else {
                rc = -1;
            }
        } else if (name_is(n, nn, "error_at")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->error_at);
        } else if (name_is(n, nn, "error_type")) {
            rc = parse_name(v, vn, s->error_type, sizeof(s->error_type));
        } else if (name_is(n, nn, "error_code")) {
            rc = parse_name(v, vn, s->error_code, sizeof(s->error_code));
        } else if (name_is(n, nn, "error_event")) {
            if (name_is(v, vn, "response.failed")) {
                s->error_event = SG_FM_ERR_FAILED;
            } else if (name_is(v, vn, "bare")) {
                s->error_event = SG_FM_ERR_BARE;
            } else if (name_is(v, vn, "default")) {
                s->error_event = SG_FM_ERR_DEFAULT;
            } else {
                rc = -1;
            }
        } else if (name_is(n, nn, "alt")) {
            /* Gemini's own parameter (its clients always send alt=sse); the
             * JSON-array body it asks for otherwise is not played. */
            rc = name_is(v, vn, "sse") ? 0 : -1;
        } else if (name_is(n, nn, "error_then_done")) {
            rc = parse_bool(v, vn, &s->error_then_done);
        } else if (name_is(n, nn, "role_chunk")) {
            rc = parse_bool(v, vn, &s->role_chunk);
        } else if (name_is(n, nn, "event_bytes")) {
            rc = parse_int(v, vn, SG_FM_MAX_EVENT_BYTES, 0, &s->event_bytes);
        } else if (name_is(n, nn, "line_bytes")) {
            rc = parse_int(v, vn, SG_FM_MAX_EVENT_BYTES, 0, &s->line_bytes);
        } else if (name_is(n, nn, "bytes_per_write")) {
            rc = parse_int(v, vn, SG_FM_MAX_EVENT_BYTES, 0, &s->bytes_per_write);
        } else if (name_is(n, nn, "write_gap")) {
            rc = parse_int(v, vn, MAX_MS, 0, &s->write_gap_ms);
        } else if (name_is(n, nn, "split_at")) {
            /* signed: from the item's start, or (negative) from its end */
            size_t neg = vn > 0 && v[0] == '-' ? 1 : 0;
            rc = parse_int(v + neg, vn - neg, SG_FM_MAX_EVENT_BYTES, 0, &s->split_at);
            s->split_at = neg ? -s->split_at : s->split_at;
        } else if (name_is(n, nn, "bad_crc_at")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->bad_crc_at);
        } else if (name_is(n, nn, "bad_crc")) {
            /* in the order of sg_fm_crc_part */
            static const char *const parts[] = {"message", "prelude"};
            int part = 0;
            rc = parse_choice(v, vn, parts, 2, &part);
            s->bad_crc = (sg_fm_crc_part)part;
        } else if (name_is(n, nn, "cut_at")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->cut_at);
        } else if (name_is(n, nn, "cut")) {
            static const char *const ends[] = {"end", "drop"};
            rc = parse_choice(v, vn, ends, 2, &s->cut_drop);
        } else if (name_is(n, nn, "tool_use")) {
            rc = parse_bool(v, vn, &s->tool_use);
        } else if (name_is(n, nn, "prompt_tokens")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->prompt_tokens);
        } else if (name_is(n, nn, "cached_tokens")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->cached_tokens);
        } else if (name_is(n, nn, "reasoning_tokens")) {
            rc = parse_int(v, vn, MAX_COUNT, 0, &s->reasoning_tokens);
        } else if (parse_limit_knob(s, n, nn, v, vn, &rc)) {
            /* rc says */
        } else {
            snprintf(err, errlen, "unknown query parameter '%.*s'", (int)nn, n);
            return -1;
        }
        if (rc != 0) {
            snprintf(err, errlen, "bad value for '%.*s'", (int)nn, n);
            return -1;
        }
    }
    return 0;
}

int sg_fm_scenario_fails(const sg_fm_scenario *s) {
    return (s->status > 0 && s->status != 200) || s->refuse || s->goaway || s->reset ||
           s->hang || s->stall_after >= 0 || s->drop_after >= 0 || s->error_at >= 0 ||
           s->cut_at >= 0 || s->bad_crc_at >= 0 || s->keepalive_only || s->no_done ||
           s->runaway;
}

void sg_fm_scenario_heal(sg_fm_scenario *s) {
    s->status = 0;
    s->refuse = s->goaway = s->reset = s->hang = 0;
    s->stall_after = s->drop_after = s->error_at = s->cut_at = s->bad_crc_at = -1;
    s->keepalive_only = s->no_done = s->runaway = 0;
}

int sg_fm_scenario_rate_limited(const sg_fm_scenario *s) {
    for (int d = 0; d < SG_FM_RL_DIMS; d++) {
        if (s->rl_limit[d] > 0) {
            return 1;
        }
    }
    return 0;
}

sg_fm_rl_style sg_fm_scenario_rl_style(const sg_fm_scenario *s) {
    if (s->rl_style != SG_FM_RL_STYLE_BY_FORMAT) {
        return s->rl_style;
    }
    return s->format == SG_FM_FMT_ANTHROPIC ? SG_FM_RL_STYLE_ANTHROPIC
                                            : SG_FM_RL_STYLE_OPENAI;
}

int sg_fm_format_is_eventstream(sg_fm_format f) {
    return f == SG_FM_FMT_BEDROCK_CONVERSE || f == SG_FM_FMT_BEDROCK_INVOKE;
}

void sg_fm_scenario_set_body(sg_fm_scenario *s, uint64_t body_bytes) {
    if (s->prompt_tokens < 0) {
        s->prompt_tokens = (int64_t)(body_bytes / 4 + (body_bytes % 4 != 0));
        s->prompt_from_body = 1;
    }
}

/* The usage knobs against the format: each figure needs a field of the
 * provider's to carry it, and the cached part of the input cannot exceed
 * the input. */
static int check_usage(const sg_fm_scenario *s, char *err, size_t errlen) {
    int explicit_prompt = s->prompt_tokens >= 0 && !s->prompt_from_body;
    if (s->format == SG_FM_FMT_NDJSON &&
        (explicit_prompt || s->cached_tokens > 0 || s->reasoning_tokens > 0)) {
        snprintf(err, errlen,
                 "format=ndjson reports no usage (prompt_tokens, cached_tokens, "
                 "reasoning_tokens)");
        return -1;
    }
    if (s->format == SG_FM_FMT_OLLAMA && s->cached_tokens > 0) {
        snprintf(err, errlen, "cached_tokens: Ollama reports no cached tokens");
        return -1;
    }
    if ((s->format == SG_FM_FMT_OLLAMA || s->format == SG_FM_FMT_BEDROCK_CONVERSE) &&
        s->reasoning_tokens > 0) {
        snprintf(err, errlen, "reasoning_tokens: %s reports no reasoning tokens",
                 s->format == SG_FM_FMT_OLLAMA ? "Ollama" : "bedrock-converse");
        return -1;
    }
    if (s->prompt_tokens >= 0 && s->cached_tokens > s->prompt_tokens) {
        snprintf(err, errlen, "cached_tokens=%lld is more than prompt_tokens=%lld%s",
                 (long long)s->cached_tokens, (long long)s->prompt_tokens,
                 s->prompt_from_body ? " (the request body's bytes / 4, rounded up)"
                                     : "");
        return -1;
    }
    return 0;
}

/* The rate limiter's knobs: the rest need a limit to shape, and OpenAI's
 * headers have no separate input and output limits. */
static int check_limits(const sg_fm_scenario *s, char *err, size_t errlen) {
    if (s->rl_knobs && !sg_fm_scenario_rate_limited(s)) {
        snprintf(err, errlen,
                 "rl_window, rl_style and rl_key need a limit (rl_requests, rl_tokens, "
                 "rl_input_tokens, rl_output_tokens)");
        return -1;
    }
    if (sg_fm_scenario_rl_style(s) == SG_FM_RL_STYLE_OPENAI &&
        (s->rl_limit[SG_FM_RL_INPUT] > 0 || s->rl_limit[SG_FM_RL_OUTPUT] > 0)) {
        snprintf(err, errlen,
                 "rl_input_tokens and rl_output_tokens are Anthropic's: they need "
                 "rl_style=anthropic (or format=anthropic)");
        return -1;
    }
    return 0;
}

int sg_fm_scenario_check(const sg_fm_scenario *s, char *err, size_t errlen) {
    int es = sg_fm_format_is_eventstream(s->format);
    if (check_usage(s, err, errlen) != 0 || check_limits(s, err, errlen) != 0) {
        return -1;
    }
    if (!es && s->bad_crc_at >= 0) {
        snprintf(err, errlen, "bad_crc_at needs an event-stream format (bedrock-*)");
        return -1;
    }
    if (s->split_at != 0 && s->bytes_per_write > 0) {
        snprintf(err, errlen,
                 "split_at and bytes_per_write cut the same writes: one of them");
        return -1;
    }
    if (s->error_code[0] != '\0' && s->format != SG_FM_FMT_ANTHROPIC) {
        snprintf(err, errlen, "error_code needs format=anthropic");
        return -1;
    }
    if (s->tool_use && s->format != SG_FM_FMT_BEDROCK_CONVERSE) {
        snprintf(err, errlen, "tool_use needs format=bedrock-converse");
        return -1;
    }
    if (s->eol_cr && s->format != SG_FM_FMT_SSE && s->format != SG_FM_FMT_ANTHROPIC &&
        s->format != SG_FM_FMT_GEMINI && s->format != SG_FM_FMT_RESPONSES) {
        snprintf(err, errlen, "eol=cr needs an SSE format");
        return -1;
    }
    /* A keepalive would be bytes outside any message: event streams have
     * none (a client would read them as a broken prelude). */
    if (es && (s->keepalive_ms > 0 || s->keepalive_only)) {
        snprintf(err, errlen,
                 "an event stream has no keepalive (keepalive, "
                 "keepalive_only)");
        return -1;
    }
    return 0;
}
