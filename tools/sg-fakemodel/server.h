/*
 * The server core's shared types and entry points: the server context,
 * connections and exchanges, used by loop.c, conn.c, h1conn.c, h2.c,
 * respond.c, generate.c and exchange.c.  The rest of sg-fakemodel (log,
 * TLS, buffers, parsers) needs only fakemodel.h.
 *
 * There is no global server state: the server owns its connections, a
 * connection owns its exchanges (one at a time on HTTP/1.1, one a stream on
 * HTTP/2), and every connection points back at its server, so anything
 * holding a connection or an exchange reaches the context through c->srv.
 */
#ifndef SG_FAKEMODEL_SERVER_H
#define SG_FAKEMODEL_SERVER_H

#include <stdbool.h>
#include "fakemodel.h"
#include "namemap.h"
#include "ratelimit.h"
#include "reqbody.h"
#include "sigv4.h"

#include <openssl/evp.h>

#include <stddef.h>
#include <stdint.h>

/*
 * Memory per connection is bounded: output is generated only while the
 * connection's output buffer (HTTP/1.1) or the stream's pending buffer
 * (HTTP/2, behind nghttp2's flow control) is below a high-water mark.
 */
/* Per-connection output buffer: stop generating above HIGH, resume below LOW. */
#define OUT_HIGH (256 * 1024)
#define OUT_LOW (64 * 1024)
/* Per-HTTP/2-stream pending bytes, same idea. */
#define PEND_HIGH (64 * 1024)
#define PEND_LOW (16 * 1024)
/* Request strings kept for the log are cut to this. */
#define FIELD_MAX 256

/* ------------------------------------------------------------ types */

/* What an epoll event's data.ptr points at: the first member of its owner. */
typedef enum { TAG_LISTENER = 1, TAG_SIGNAL, TAG_CONN } ep_tag;

typedef struct {
    ep_tag tag;
    int fd;
} ep_item;

/* M_DETECT: the first bytes have not chosen the protocol yet. */
typedef enum { M_DETECT, M_TLS_HS, M_H1, M_H2 } conn_mode;
typedef enum { H1_HEAD, H1_BODY, H1_RESPONDING, H1_CLOSING } h1_state;
typedef enum { X_READING, X_WAIT_HEADERS, X_STREAMING, X_HANG, X_DONE } ex_state;

typedef struct sg_fm_server sg_fm_server;
typedef struct conn conn;
typedef struct exchange exchange;

/* One request and its response: an HTTP/1.1 exchange or an HTTP/2 stream. */
struct exchange {
    sg_fm_timer timer; /* first: the timer callback casts back */
    conn *c;
    exchange *prev;
    exchange *next;
    uint64_t id;
    int32_t stream_id; /* HTTP/2 only */
    ex_state st;
    int h10;        /* HTTP/1.0 request: no chunked, close at the end */
    int keep_alive; /* HTTP/1.x */
    int nolog;      /* /_log and friends are not logged */
    int received_logged;
    /* The request, as much as the log and the routing need. */
    char method[16];
    char *target; /* path and query */
    size_t path_len;
    char *key;
    char *deadline_ms;
    char *grpc_timeout;
    char *traceparent; /* W3C trace context, logged as received */
    char *tracestate;
    char *scenario_hdr;
    int expect_continue;
    uint64_t body_bytes;
    sg_fm_body_scan body_scan; /* does the body ask for OpenAI's usage chunk */
    int include_usage;         /* it did (set when the request is complete) */
    uint64_t header_bytes;     /* the request's field names and values, summed */
    int64_t t_received;
    /* The response. */
    sg_fm_scenario sc;
    int status;
    int64_t items;
    int64_t first_due_ms; /* the wait drawn before the first item */
    int64_t seq;          /* Responses API: the next event's sequence_number */
    uint64_t bytes;
    int64_t next_item_at;
    int64_t last_emit_at;
    sg_fm_buf pend;
    size_t allow;      /* bytes that may leave pend now; SIZE_MAX: no limit */
    int64_t split_due; /* split_at: when an item's rest may go; 0: none waits */
    int eof_pending;
    int lingering; /* linger: the end is sent, the body not yet ended */
    int drop_pending;
    int blocked;  /* waiting for its output to drain */
    int deferred; /* HTTP/2 data provider returned NGHTTP2_ERR_DEFERRED */
    int finished;
    const char *reason;
    bool tail; /* tail_first: this request waits tail_delay */
    /* the rate limiter's verdict, whose headers every answer carries */
    bool rl_judged;
    sg_fm_rl_verdict rl;
    /* x-amzn-ErrorType of the response (Bedrock's errors), NULL for none */
    const char *amzn_error_type;
    /* --sigv4-key only: every request header, and the body's SHA-256 */
    sg_fm_sigv4_header *hdrs;
    size_t n_hdrs;
    size_t cap_hdrs;
    EVP_MD_CTX *body_md;
    /* --record: DIR/<id>.req, open while the request arrives (-1: not
     * yet, -2: it could not be written) */
    int record_fd;
};

struct conn {
    ep_item ep; /* first: epoll data points here */
    sg_fm_server *srv;
    uint64_t id;
    conn_mode mode;
    SSL *ssl;
    int ssl_wants_write;
    sg_fm_buf in;
    sg_fm_buf out;
    uint32_t events;
    int read_eof;
    int close_after_flush;
    int abort_after_flush; /* drop: no TLS close_notify, no final chunk */
    int rst_on_close;      /* reset: close with a TCP RST, not a FIN */
    int dead;
    sg_fm_timer kick; /* re-runs reading when TLS holds decrypted bytes */
    /* HTTP/1.1 */
    h1_state h1;
    size_t head_scanned;
    exchange *cur;
    int64_t body_left;
    int body_chunked;
    sg_fm_h1_chunked chunk;
    /* HTTP/2 */
    nghttp2_session *h2;
    exchange *exs;
    conn *prev;
    conn *next;
    conn *dead_next;
};

/* Everything one sg_fm_serve() call runs on; it lives on that call's stack. */
struct sg_fm_server {
    const sg_fm_options *o;
    int epfd;
    ep_item sig;
    ep_item listeners[2];
    int nlisteners;
    SSL_CTX *ssl_ctx;
    sg_fm_timers timers;
    sg_fm_timer accept_timer;
    conn *conns;
    conn *dead; /* closed this loop turn, freed at its end */
    uint64_t next_conn_id;
    uint64_t next_req_id;
    size_t n_conns;
    size_t n_exchanges;
    uint64_t conns_total;
    uint64_t requests_total;
    int stop;
    nghttp2_session_callbacks *h2cb;
    nghttp2_option *h2opt;
    /* The rate limiters (rl_key), shared by every connection and protocol:
     * one loop, so unlocked.  Reset with the log. */
    sg_fm_map limiters;
    /* What /_stats counts of the model paths since start or the last
     * /_log/reset: requests received, answers by status, the rate
     * limiter's 429s. */
    uint64_t received;
    uint64_t rate_limited;
    uint64_t statuses[600];
};

/* ------------------------------------------------------------ exchange.c */

/* A NUL-terminated copy of at most max bytes of s, or NULL. */
char *dup_cut(const char *s, size_t len, size_t max);
exchange *ex_new(conn *c, int32_t stream_id);
void ex_free(exchange *ex);
/* Arms the exchange's timer on its server's heap. */
void ex_arm(exchange *ex, int64_t due);
void ex_finish(exchange *ex, const char *reason);
/* The peer went away; h2_code is the RST_STREAM code, or -1. */
void ex_gone(exchange *ex, const char *reason, int h2_code);
/* eol=cr: the LFs of @p[0..@n) (SSE bytes on their way out) become CRs. */
void ex_eol(const exchange *ex, char *p, size_t n);
size_t ex_backlog(const exchange *ex);
size_t ex_backlog_high(const exchange *ex);
void ex_pump(exchange *ex);
void log_ex(exchange *ex, sg_fm_event_type type, const char *fields);
void log_received(exchange *ex, const char *error);
/* --sigv4-key: keeps a request header, hashes request body bytes (both do
 * nothing when no signature is checked); every body byte is also scanned
 * for OpenAI's stream_options.include_usage (reqbody.h). */
void ex_keep_header(exchange *ex, const char *name, size_t nlen, const char *value,
                    size_t vlen);
void ex_body_data(exchange *ex, const void *data, size_t len);
/* --record DIR: @p[0..@n) of the request as it arrived, appended to
 * DIR/<id>.req (nothing without --record). */
void ex_record(exchange *ex, const void *p, size_t n);

/* ------------------------------------------------------------ generate.c */

void pend_add(exchange *ex, const char *s, size_t n);
void emit_prelude(exchange *ex);
void schedule_next(exchange *ex, int64_t now, int64_t normal_ms);
void ex_step(exchange *ex);

/* ------------------------------------------------------------ bedrock.c */

void bedrock_prelude(exchange *ex);
void bedrock_item(exchange *ex);
void bedrock_end(exchange *ex);
void bedrock_error(exchange *ex);
/* The x-amzn-ErrorType Bedrock pairs with an HTTP status. */
const char *bedrock_error_type_for_status(int status);

/* ------------------------------------------------------------ usage.c */

/* Each appends the usage of @ex so far in one provider's shape. */
/* OpenAI Chat Completions: the whole chunk after the last token (choices
 * [], the stream's id), when the request asks for it. */
void usage_openai_chunk(const exchange *ex, sg_fm_buf *b);
/* The Responses API: the `usage` object of response.completed. */
void usage_responses(const exchange *ex, sg_fm_buf *b);
/* Anthropic's usage object: message_start's (@final false: output_tokens
 * the API's placeholder 1) or message_delta's cumulative one. */
void usage_anthropic(const exchange *ex, sg_fm_buf *b, bool final);
/* Gemini: `"usageMetadata": {...}` for @candidates tokens so far (running
 * totals, zeros left out), then modelVersion and responseId, into @out
 * (NUL-terminated; cap >= 384).  Returns its length. */
size_t usage_gemini_meta(const exchange *ex, int64_t candidates, char *out, size_t cap);
/* Ollama: the done line's `,"prompt_eval_count":N,"eval_count":N` (zeros
 * left out, as Ollama omits them). */
void usage_ollama(const exchange *ex, sg_fm_buf *b);
/* Bedrock ConverseStream: the metadata event's `usage` object. */
void usage_converse(const exchange *ex, sg_fm_buf *b);
/* Bedrock InvokeModelWithResponseStream: amazon-bedrock-invocationMetrics. */
void usage_invoke_metrics(const exchange *ex, sg_fm_buf *b, long long latency_ms);

/* ------------------------------------------------------------ respond.c */

void ex_begin(exchange *ex);
void ex_on_timer(sg_fm_timer *t);
void ex_respond_json_error(exchange *ex, int status, const char *msg, const char *reason);

/* An error answer in the shape of the exchange's format's provider. */
typedef struct {
    int status;
    const char *message;
    int64_t pad;             /* bytes of 'x' ending the message */
    const char *code;        /* Anthropic's error.details.error_code; "": none */
    const char *rl_type;     /* a rate limiter's refusal: OpenAI's error.type and
                                code rate_limit_exceeded; NULL: a scripted one */
    const char *retry_after; /* Retry-After, or NULL */
    const char *reason;      /* the finished event's */
} error_answer;
void ex_respond_error(exchange *ex, const error_answer *a);

/* ------------------------------------------------------------ limits.c */

/* The rate limiter's verdict on a request with rl_* knobs.  Returns false
 * when it refused it (the 429 is on its way), true when it may go on. */
bool limits_admit(exchange *ex);
/* fail_first, pass_first and tail_first: whether this request of its
 * counter plays the scenario's failures (else they are healed). */
void limits_count(exchange *ex);
/* The rate-limit headers of the exchange's answer; returns how many. */
size_t limits_headers(const exchange *ex, sg_fm_rl_header *out);
/* Counts an answer's status (/_stats). */
void limits_count_status(exchange *ex, int status);
/* POST /_log/reset: the windows, counters and /_stats counts restart. */
void limits_reset(sg_fm_server *srv);
/* /_stats's fields of them: ,"received":N,... */
void limits_stats(const sg_fm_server *srv, sg_fm_buf *b);

/* ------------------------------------------------------------ h2.c */

int h2_init_callbacks(sg_fm_server *srv);
void h2_free_callbacks(sg_fm_server *srv);
int h2_start(conn *c);
int h2_feed(conn *c, const char *data, size_t len);
void h2_flush(conn *c);
ssize_t h2_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                uint32_t *data_flags, nghttp2_data_source *source, void *user_data);

/* ------------------------------------------------------------ h1conn.c */

int h1_process(conn *c);

/* ------------------------------------------------------------ conn.c */

/* Takes over an accepted socket; NULL (and fd closed) on failure. */
conn *conn_open(sg_fm_server *srv, int fd);
void conn_on_event(conn *c, uint32_t events);
void conn_after(conn *c);
void conn_close(conn *c, int by_server);
void conn_free_dead(sg_fm_server *srv);
void conn_error(conn *c, const char *proto, const char *detail);

#endif
