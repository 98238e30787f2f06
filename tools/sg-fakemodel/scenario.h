/*
 * Scenario knobs: what one request asks the fake model to do, parsed from
 * the query string (and the X-SG-Scenario header, same syntax).  libc only;
 * the fuzz target includes scenario.c.
 */
#ifndef SG_FAKEMODEL_SCENARIO_H
#define SG_FAKEMODEL_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#define SG_FM_FOREVER INT64_MAX
/* The largest event or line the server will build (event_bytes, line_bytes). */
#define SG_FM_MAX_EVENT_BYTES (64 * 1024 * 1024)

typedef enum {
    SG_FM_FMT_SSE = 0,   /* OpenAI chat.completion.chunk events + data: [DONE] */
    SG_FM_FMT_NDJSON,    /* one JSON object a line, then {"done":true} */
    SG_FM_FMT_ANTHROPIC, /* named events message_start ... message_stop */
    SG_FM_FMT_OLLAMA,    /* NDJSON as Ollama's /api/chat: message.content, done */
    SG_FM_FMT_GEMINI,    /* data: GenerateContentResponse chunks, finishReason last */
    SG_FM_FMT_RESPONSES, /* OpenAI Responses API events ... response.completed */
    /* AWS event-stream framing (application/vnd.amazon.eventstream): */
    SG_FM_FMT_BEDROCK_CONVERSE, /* ConverseStream: messageStart ... metadata */
    SG_FM_FMT_BEDROCK_INVOKE    /* InvokeModelWithResponseStream: chunk events */
} sg_fm_format;

/* Which CRC of an event-stream message bad_crc_at damages. */
typedef enum { SG_FM_CRC_MESSAGE = 0, SG_FM_CRC_PRELUDE } sg_fm_crc_part;

typedef enum { SG_FM_DROP_DEFAULT = 0, SG_FM_DROP_CLOSE, SG_FM_DROP_RST } sg_fm_drop_mode;

/* How an in-band error is sent, beyond each format's usual shape. */
typedef enum {
    SG_FM_ERR_DEFAULT = 0, /* the format's own error event or line */
    SG_FM_ERR_FAILED,      /* Responses API: response.failed, not event: error */
    SG_FM_ERR_BARE         /* Gemini: a bare JSON object outside the SSE framing */
} sg_fm_error_event;

/* What each answer spends of a rate limiter's window (docs: Rate limits),
 * in the order of the rl_* knobs. */
typedef enum {
    SG_FM_RL_REQUESTS = 0, /* rl_requests: one per answer */
    SG_FM_RL_TOKENS,       /* rl_tokens: input + output */
    SG_FM_RL_INPUT,        /* rl_input_tokens (Anthropic style) */
    SG_FM_RL_OUTPUT,       /* rl_output_tokens (Anthropic style) */
    SG_FM_RL_DIMS
} sg_fm_rl_dim;

/* Whose rate-limit headers: by default the format's provider's. */
typedef enum {
    SG_FM_RL_STYLE_BY_FORMAT = 0,
    SG_FM_RL_STYLE_OPENAI,
    SG_FM_RL_STYLE_ANTHROPIC
} sg_fm_rl_style;

typedef struct {
    int64_t n;                /* items before the end; default 5 */
    int64_t gap_ms;           /* between items; default 10 */
    int64_t headers_delay_ms; /* request complete -> response headers */
    int64_t first_delay_ms;   /* headers -> first item */
    int64_t tail_pct;         /* this share of requests (%) waits tail_delay_ms */
    int64_t tail_delay_ms;    /* instead of first_delay_ms (a latency tail) */
    int64_t first_jitter_ms;  /* up to this much more, uniform, by request id */
    int64_t tail_first;       /* the first K requests per key wait tail_delay */
    int64_t stall_after;      /* -1: never; K: after item K (0: after headers) */
    int64_t stall_ms;         /* the stall; SG_FM_FOREVER for "forever" */
    int64_t keepalive_ms;     /* comment interval while waiting; 0: none */
    int keepalive_only;       /* headers, then keepalive comments forever */
    int runaway;              /* items forever; n is ignored */
    int64_t drop_after;       /* -1: never; K: abort when item K+1 is due */
    sg_fm_drop_mode drop_mode;
    int64_t rst_code;      /* HTTP/2 drop=rst error code; -1: INTERNAL_ERROR */
    int refuse;            /* refuse at once: h2 RST_STREAM(REFUSED_STREAM) */
    int goaway;            /* refuse at once: h2 GOAWAY below this stream's id */
    int no_done;           /* end cleanly but without the terminal sentinel */
    int64_t linger_ms;     /* the body stays open this long after its end */
    int eol_cr;            /* SSE lines end with a bare CR, not LF */
    int status;            /* 0: none; else the scripted error status */
    char retry_after[128]; /* Retry-After value, "" for none */
    int64_t error_pad;     /* with status: bytes of 'x' added to the message */
    int challenge;         /* with status: WWW-Authenticate: Basic */
    int early_hints;       /* a 103 Early Hints before the real response */
    int has_date;          /* send a Date header: server time + date_offset_s */
    int64_t date_offset_s;
    int has_retry_after_date; /* Retry-After as the HTTP-date Date + this */
    int64_t retry_after_date_s;
    int64_t fail_first;              /* -1: every request fails (status, refuse,
                                        goaway); K: the first K per key */
    int64_t pass_first;              /* the first K per key are not failed */
    char retry_after_ms[32];         /* retry-after-ms value, "" for none */
    int reset;                       /* abort the connection at once with a TCP RST */
    char fail_key[64];               /* the fail_first counter's name ("": the key's) */
    int64_t rl_limit[SG_FM_RL_DIMS]; /* a rate limit per window; 0: none */
    int64_t rl_window_ms;            /* the window; default 60000 */
    sg_fm_rl_style rl_style;
    char rl_key[64];     /* which limiter ("": the process's one) */
    int rl_knobs;        /* rl_window, rl_style or rl_key was given */
    char error_code[64]; /* Anthropic's error.details.error_code, "" none */
    int hang;            /* never answer */
    sg_fm_format format;
    int64_t event_bytes;     /* pad each SSE event (extra data: lines) to N */
    int64_t line_bytes;      /* pad each item's data line to N bytes */
    int64_t bytes_per_write; /* 0: whole items; N: items released N bytes at a time */
    int64_t write_gap_ms;    /* pause between those pieces */
    int64_t split_at;        /* 0: none; K: each item in two writes, its first K bytes
                                (K < 0: all but its last -K) then the rest */
    int64_t error_at;        /* -1: never; K: an in-band error after K items */
    char error_type[64];     /* its type ("" for the format's default) */
    int error_then_done;     /* the terminal sentinel after the error */
    int role_chunk;          /* OpenAI: a role-only chunk first (empty content) */
    sg_fm_error_event error_event;
    int64_t bad_crc_at;     /* -1: never; K: item K+1 carries a wrong CRC */
    sg_fm_crc_part bad_crc; /* which one: the message's (default) or the prelude's */
    int64_t cut_at;         /* -1: never; K: after K items, half of the next */
    int cut_drop;           /* cut_at then ends abruptly, not cleanly */
    int tool_use;           /* Bedrock: block 0 is a tool use, not text */
    /* The usage the stream reports (docs: Usage).  Output is the items
     * streamed plus reasoning_tokens. */
    int64_t prompt_tokens;    /* input, cached included; -1: from the body */
    int prompt_from_body;     /* prompt_tokens is the body's (set_body) */
    int64_t cached_tokens;    /* of the input, read from a cache */
    int64_t reasoning_tokens; /* hidden reasoning, not streamed */
} sg_fm_scenario;

/* Defaults; `format` depends on the path. */
void sg_fm_scenario_init(sg_fm_scenario *s, sg_fm_format format);

/*
 * Applies a query string ("a=1&b=2", without the '?') to s.  Returns 0 if
 * it succeeds, or -1 with a one-line reason in err for an unknown knob or a
 * bad value.  Names beginning with '_' are ignored (cache busters, tags).
 */
int sg_fm_scenario_parse(sg_fm_scenario *s, const char *q, size_t len, char *err,
                         size_t errlen);

/*
 * The request body's length: a prompt_tokens not given is the body's
 * bytes / 4, rounded up.  Call it before sg_fm_scenario_check.
 */
void sg_fm_scenario_set_body(sg_fm_scenario *s, uint64_t body_bytes);

/*
 * The checks only the whole scenario can make (knobs that need a format,
 * usage figures that contradict each other).  Returns 0, or -1 with a
 * one-line reason in err.
 */
int sg_fm_scenario_check(const sg_fm_scenario *s, char *err, size_t errlen);

/* 1 when the scenario plays a failure (status, refuse, goaway, reset,
 * hang, stall_after, drop_after, error_at, cut_at, bad_crc_at,
 * keepalive_only, no_done, runaway): what fail_first and pass_first
 * count. */
int sg_fm_scenario_fails(const sg_fm_scenario *s);

/* Takes those failures out: a request fail_first lets through streams the
 * healthy rest of its scenario. */
void sg_fm_scenario_heal(sg_fm_scenario *s);

/* 1 when an rl_* limit is set. */
int sg_fm_scenario_rate_limited(const sg_fm_scenario *s);

/* The rate-limit header style the scenario plays: rl_style, else
 * Anthropic's for format=anthropic and OpenAI's for every other format. */
sg_fm_rl_style sg_fm_scenario_rl_style(const sg_fm_scenario *s);

/* 1 for the formats framed as an AWS event stream. */
int sg_fm_format_is_eventstream(sg_fm_format f);

/*
 * Iterates "name=value" pairs of a query string.  Returns 1 and sets the
 * raw (still percent-encoded) views, or 0 at the end.
 */
int sg_fm_query_next(const char **cursor, const char *end, const char **name,
                     size_t *name_len, const char **value, size_t *value_len);

/*
 * Percent-decodes (and '+' -> ' ') into out.  Returns the decoded length,
 * or -1 if it does not fit or an escape is malformed.
 */
long sg_fm_url_decode(const char *in, size_t len, char *out, size_t outcap);

#endif
