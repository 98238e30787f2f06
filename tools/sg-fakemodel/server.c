/*
 * The sg-fakemodel event loop: one thread, one epoll instance, level
 * triggered, non-blocking sockets, and one min-heap of timers.  No fixed
 * tick: epoll_wait sleeps exactly until the earliest timer.
 *
 * One listening port serves everything; the first bytes of each connection
 * choose the protocol:
 *   0x16 (TLS handshake record)  -> TLS; ALPN "h2" -> HTTP/2, else HTTP/1.1
 *   "PRI " (HTTP/2 preface)      -> h2c with prior knowledge
 *   anything else                -> HTTP/1.1 cleartext
 *
 * Memory per connection is bounded: output is generated only while the
 * connection's output buffer (HTTP/1.1) or the stream's pending buffer
 * (HTTP/2, behind nghttp2's flow control) is below a high-water mark, so a
 * client that stops reading stops its own generation and nobody else's.
 */
#include "fakemodel.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>

/* Per-connection output buffer: stop generating above HIGH, resume below LOW. */
#define OUT_HIGH (256 * 1024)
#define OUT_LOW (64 * 1024)
/* Per-HTTP/2-stream pending bytes, same idea. */
#define PEND_HIGH (64 * 1024)
#define PEND_LOW (16 * 1024)
/* Bytes one exchange may generate per timer callback before yielding. */
#define STEP_BUDGET (64 * 1024)
/* HTTP/1.1 input kept while a response is running (pipelined requests). */
#define IN_MAX (SG_FM_H1_MAX_HEAD + 16 * 1024)
/* Request strings kept for the log are cut to this. */
#define FIELD_MAX 256

#define NS_PER_MS 1000000LL

/* ------------------------------------------------------------ types */

typedef enum { TAG_LISTENER = 1, TAG_SIGNAL, TAG_CONN } ep_tag;

typedef struct {
    ep_tag tag;
    int fd;
} ep_item;

typedef enum { M_DETECT, M_TLS_HS, M_H1, M_H2 } conn_mode;
typedef enum { H1_HEAD, H1_BODY, H1_RESPONDING, H1_CLOSING } h1_state;
typedef enum { X_READING, X_WAIT_HEADERS, X_STREAMING, X_HANG, X_DONE } ex_state;

typedef struct conn conn;
typedef struct exchange exchange;

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
    char *scenario_hdr;
    int expect_continue;
    uint64_t body_bytes;
    int64_t t_received;
    /* The response. */
    sg_fm_scenario sc;
    int status;
    int64_t items;
    uint64_t bytes;
    int64_t next_item_at;
    int64_t last_emit_at;
    sg_fm_buf pend;
    size_t allow; /* bytes that may leave pend now; SIZE_MAX: no limit */
    int eof_pending;
    int drop_pending;
    int blocked;  /* waiting for its output to drain */
    int deferred; /* HTTP/2 data provider returned NGHTTP2_ERR_DEFERRED */
    int finished;
    const char *reason;
};

struct conn {
    ep_item ep; /* first: epoll data points here */
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

static struct {
    const sg_fm_options *o;
    int epfd;
    ep_item sig;
    ep_item listeners[2];
    int nlisteners;
    SSL_CTX *ssl_ctx;
    sg_fm_timer **heap;
    size_t heap_len;
    size_t heap_cap;
    uint64_t timer_seq;
    sg_fm_timer accept_timer;
    conn *conns;
    conn *dead;
    uint64_t next_conn_id;
    uint64_t next_req_id;
    size_t n_conns;
    size_t n_exchanges;
    uint64_t conns_total;
    uint64_t requests_total;
    int stop;
    nghttp2_session_callbacks *h2cb;
    nghttp2_option *h2opt;
} g;

/* ------------------------------------------------------------ time, timers */

int64_t sg_fm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t add_ms(int64_t t, int64_t ms) {
    if (ms == SG_FM_FOREVER || ms > (INT64_MAX - t) / NS_PER_MS) {
        return SG_FM_FOREVER;
    }
    return t + ms * NS_PER_MS;
}

void sg_fm_timer_init(sg_fm_timer *t, void (*cb)(sg_fm_timer *t)) {
    t->due = 0;
    t->seq = 0;
    t->idx = SIZE_MAX;
    t->cb = cb;
}

static int timer_less(const sg_fm_timer *a, const sg_fm_timer *b) {
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_set(size_t i, sg_fm_timer *t) {
    g.heap[i] = t;
    t->idx = i;
}

static void heap_up(size_t i) {
    sg_fm_timer *t = g.heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!timer_less(t, g.heap[p])) {
            break;
        }
        heap_set(i, g.heap[p]);
        i = p;
    }
    heap_set(i, t);
}

static void heap_down(size_t i) {
    sg_fm_timer *t = g.heap[i];
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= g.heap_len) {
            break;
        }
        size_t m = l;
        if (l + 1 < g.heap_len && timer_less(g.heap[l + 1], g.heap[l])) {
            m = l + 1;
        }
        if (!timer_less(g.heap[m], t)) {
            break;
        }
        heap_set(i, g.heap[m]);
        i = m;
    }
    heap_set(i, t);
}

void sg_fm_timer_disarm(sg_fm_timer *t) {
    if (t->idx == SIZE_MAX) {
        return;
    }
    size_t i = t->idx;
    t->idx = SIZE_MAX;
    g.heap_len--;
    if (i == g.heap_len) {
        return;
    }
    heap_set(i, g.heap[g.heap_len]);
    heap_up(i);
    heap_down(g.heap[i]->idx);
}

/* O(log n); a timer already armed is moved, never duplicated. */
int sg_fm_timer_arm(sg_fm_timer *t, int64_t due) {
    sg_fm_timer_disarm(t);
    if (due == SG_FM_FOREVER) {
        return 0;
    }
    if (g.heap_len == g.heap_cap) {
        size_t cap = g.heap_cap ? g.heap_cap * 2 : 256;
        sg_fm_timer **nh = realloc(g.heap, cap * sizeof(*nh));
        if (nh == NULL) {
            return -1;
        }
        g.heap = nh;
        g.heap_cap = cap;
    }
    t->due = due;
    t->seq = g.timer_seq++;
    heap_set(g.heap_len++, t);
    heap_up(t->idx);
    return 0;
}

/*
 * Runs the timers due now, but only those armed before this pass began: a
 * callback that re-arms itself for "now" (a runaway stream yielding) runs on
 * the next loop turn, after epoll has had its say.
 */
static void run_timers(void) {
    int64_t now = sg_fm_now();
    uint64_t snapshot = g.timer_seq;
    while (g.heap_len > 0 && g.heap[0]->due <= now && g.heap[0]->seq < snapshot) {
        sg_fm_timer *t = g.heap[0];
        sg_fm_timer_disarm(t);
        t->cb(t);
    }
}

static int next_timeout_ms(void) {
    if (g.heap_len == 0) {
        return -1;
    }
    int64_t d = g.heap[0]->due - sg_fm_now();
    if (d <= 0) {
        return 0;
    }
    /* Rounded up: waking early would only spin. */
    int64_t ms = (d + NS_PER_MS - 1) / NS_PER_MS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* ------------------------------------------------------------ helpers */

static char *dup_cut(const char *s, size_t len, size_t max) {
    if (len > max) {
        len = max;
    }
    char *d = malloc(len + 1);
    if (d != NULL) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

static const char *status_text(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 529:
        return "Overloaded";
    default:
        return "Status";
    }
}

static const char *h2_error_name(uint32_t code) {
    switch (code) {
    case NGHTTP2_NO_ERROR:
        return "NO_ERROR";
    case NGHTTP2_PROTOCOL_ERROR:
        return "PROTOCOL_ERROR";
    case NGHTTP2_INTERNAL_ERROR:
        return "INTERNAL_ERROR";
    case NGHTTP2_FLOW_CONTROL_ERROR:
        return "FLOW_CONTROL_ERROR";
    case NGHTTP2_SETTINGS_TIMEOUT:
        return "SETTINGS_TIMEOUT";
    case NGHTTP2_STREAM_CLOSED:
        return "STREAM_CLOSED";
    case NGHTTP2_FRAME_SIZE_ERROR:
        return "FRAME_SIZE_ERROR";
    case NGHTTP2_REFUSED_STREAM:
        return "REFUSED_STREAM";
    case NGHTTP2_CANCEL:
        return "CANCEL";
    case NGHTTP2_COMPRESSION_ERROR:
        return "COMPRESSION_ERROR";
    case NGHTTP2_CONNECT_ERROR:
        return "CONNECT_ERROR";
    case NGHTTP2_ENHANCE_YOUR_CALM:
        return "ENHANCE_YOUR_CALM";
    case NGHTTP2_INADEQUATE_SECURITY:
        return "INADEQUATE_SECURITY";
    case NGHTTP2_HTTP_1_1_REQUIRED:
        return "HTTP_1_1_REQUIRED";
    default:
        return "UNKNOWN";
    }
}

/* ------------------------------------------------------------ logging */

static const char *proto_name(const exchange *ex) {
    return ex->c->mode == M_H2 ? "h2" : "h1";
}

static void log_ex(exchange *ex, sg_fm_event_type type, const char *fields) {
    if (ex->nolog) {
        return;
    }
    int64_t now = sg_fm_now();
    sg_fm_log_event(ex->id, type, now, type == SG_FM_EV_RECEIVED ? 0 : ex->t_received,
                    ex->key, fields);
}

static void json_field(sg_fm_buf *b, const char *name, const char *v) {
    sg_fm_buf_printf(b, ",\"%s\":", name);
    if (v == NULL) {
        sg_fm_buf_append(b, "null", 4);
        return;
    }
    sg_fm_buf_append(b, "\"", 1);
    sg_fm_buf_json_str(b, v, strlen(v));
    sg_fm_buf_append(b, "\"", 1);
}

static void log_received(exchange *ex, const char *error) {
    if (ex->received_logged) {
        return;
    }
    ex->received_logged = 1;
    if (ex->nolog) {
        return;
    }
    sg_fm_buf b = {0};
    sg_fm_buf_printf(&b, "\"proto\":\"%s\",\"tls\":%s,\"conn\":%llu", proto_name(ex),
                     ex->c->ssl != NULL ? "true" : "false",
                     (unsigned long long)ex->c->id);
    if (ex->c->mode == M_H2) {
        sg_fm_buf_printf(&b, ",\"stream_id\":%d", ex->stream_id);
    }
    json_field(&b, "method", ex->method[0] ? ex->method : NULL);
    char *path = ex->target != NULL ? dup_cut(ex->target, ex->path_len, FIELD_MAX) : NULL;
    json_field(&b, "path", path);
    free(path);
    const char *q = ex->target != NULL && ex->target[ex->path_len] == '?'
                        ? ex->target + ex->path_len + 1
                        : NULL;
    char *qd = q != NULL ? dup_cut(q, strlen(q), 2 * FIELD_MAX) : NULL;
    json_field(&b, "query", qd);
    free(qd);
    json_field(&b, "idempotency_key", ex->key);
    json_field(&b, "x_deadline_ms", ex->deadline_ms);
    json_field(&b, "grpc_timeout", ex->grpc_timeout);
    if (ex->scenario_hdr != NULL) {
        json_field(&b, "x_sg_scenario", ex->scenario_hdr);
    }
    sg_fm_buf_printf(&b, ",\"body_bytes\":%llu", (unsigned long long)ex->body_bytes);
    if (error != NULL) {
        json_field(&b, "error", error);
    }
    sg_fm_buf_append(&b, "", 1);
    sg_fm_log_event(ex->id, SG_FM_EV_RECEIVED, ex->t_received, 0, ex->key,
                    sg_fm_buf_data(&b));
    sg_fm_buf_free(&b);
}

/* ------------------------------------------------------------ exchanges */

static void ex_on_timer(sg_fm_timer *t);
static void conn_after(conn *c);
static ssize_t h2_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                       size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                       void *user_data);

static exchange *ex_new(conn *c, int32_t stream_id) {
    exchange *ex = calloc(1, sizeof(*ex));
    if (ex == NULL) {
        return NULL;
    }
    sg_fm_timer_init(&ex->timer, ex_on_timer);
    ex->c = c;
    ex->id = ++g.next_req_id;
    ex->stream_id = stream_id;
    ex->st = X_READING;
    ex->allow = SIZE_MAX;
    ex->next = c->exs;
    if (c->exs != NULL) {
        c->exs->prev = ex;
    }
    c->exs = ex;
    g.n_exchanges++;
    g.requests_total++;
    return ex;
}

static void ex_free(exchange *ex) {
    sg_fm_timer_disarm(&ex->timer);
    conn *c = ex->c;
    if (ex->prev != NULL) {
        ex->prev->next = ex->next;
    } else {
        c->exs = ex->next;
    }
    if (ex->next != NULL) {
        ex->next->prev = ex->prev;
    }
    if (c->cur == ex) {
        c->cur = NULL;
    }
    free(ex->target);
    free(ex->key);
    free(ex->deadline_ms);
    free(ex->grpc_timeout);
    free(ex->scenario_hdr);
    sg_fm_buf_free(&ex->pend);
    free(ex);
    g.n_exchanges--;
}

static void ex_finish(exchange *ex, const char *reason) {
    if (ex->finished) {
        return;
    }
    ex->finished = 1;
    ex->st = X_DONE;
    sg_fm_timer_disarm(&ex->timer);
    if (reason != NULL) {
        ex->reason = reason;
    }
    if (!ex->nolog && ex->received_logged) {
        char f[256];
        snprintf(f, sizeof(f),
                 "\"reason\":\"%s\",\"status\":%d,\"items\":%lld,\"bytes\":%llu",
                 ex->reason != NULL ? ex->reason : "done", ex->status,
                 (long long)ex->items, (unsigned long long)ex->bytes);
        log_ex(ex, SG_FM_EV_FINISHED, f);
    }
}

/* The peer went away (connection closed, RST_STREAM) before we finished. */
static void ex_gone(exchange *ex, const char *reason, int h2_code) {
    if (ex->finished) {
        return;
    }
    ex->finished = 1;
    ex->st = X_DONE;
    sg_fm_timer_disarm(&ex->timer);
    if (!ex->nolog && ex->received_logged) {
        char f[256];
        if (h2_code >= 0) {
            snprintf(
                f, sizeof(f),
                "\"reason\":\"%s\",\"items\":%lld,\"bytes\":%llu,\"h2_error_code\":%d,"
                "\"h2_error\":\"%s\"",
                reason, (long long)ex->items, (unsigned long long)ex->bytes, h2_code,
                h2_error_name((uint32_t)h2_code));
        } else {
            snprintf(f, sizeof(f), "\"reason\":\"%s\",\"items\":%lld,\"bytes\":%llu",
                     reason, (long long)ex->items, (unsigned long long)ex->bytes);
        }
        log_ex(ex, SG_FM_EV_CLIENT_GONE, f);
    }
}

static size_t ex_backlog(const exchange *ex) {
    return ex->pend.len + (ex->c->mode == M_H1 ? ex->c->out.len : 0);
}

static size_t ex_backlog_high(const exchange *ex) {
    return ex->c->mode == M_H1 ? OUT_HIGH : PEND_HIGH;
}

/*
 * Moves generated bytes towards the client.  HTTP/1.1: into the connection
 * buffer as chunks.  HTTP/2: wakes the data provider, which pulls from pend
 * when nghttp2 sends (flow control permitting).
 */
static void ex_pump(exchange *ex) {
    conn *c = ex->c;
    if (c->mode == M_H2) {
        if (ex->deferred && ((ex->pend.len > 0 && ex->allow > 0) || ex->eof_pending ||
                             ex->drop_pending)) {
            ex->deferred = 0;
            nghttp2_session_resume_data(c->h2, ex->stream_id);
        }
        return;
    }
    size_t n = ex->pend.len < ex->allow ? ex->pend.len : ex->allow;
    if (n > 0) {
        if (!ex->h10) {
            sg_fm_buf_printf(&c->out, "%zx\r\n", n);
        }
        sg_fm_buf_append(&c->out, sg_fm_buf_data(&ex->pend), n);
        if (!ex->h10) {
            sg_fm_buf_append(&c->out, "\r\n", 2);
        }
        sg_fm_buf_consume(&ex->pend, n);
        if (ex->allow != SIZE_MAX) {
            ex->allow -= n;
        }
    }
    if (ex->pend.len > 0) {
        return;
    }
    if (ex->eof_pending) {
        if (ex->h10) {
            c->close_after_flush = 1;
        } else {
            sg_fm_buf_append(&c->out, "0\r\n\r\n", 5);
        }
        ex_finish(ex, NULL);
    } else if (ex->drop_pending) {
        /* Abrupt: no terminating chunk, no close_notify. */
        c->abort_after_flush = 1;
        ex_finish(ex, "dropped");
    }
}

static void pend_add(exchange *ex, const char *s, size_t n) {
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

static void emit_item(exchange *ex) {
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
        /* An NDJSON item is one line: event_bytes means the same. */
        pad_line(ex, start, sizeof(suffix) - 1,
                 ex->sc.line_bytes > ex->sc.event_bytes ? ex->sc.line_bytes
                                                        : ex->sc.event_bytes);
        sg_fm_buf_append(&ex->pend, suffix, sizeof(suffix) - 1);
        sg_fm_buf_append(&ex->pend, "\n", 1);
        break;
    }
    case SG_FM_FMT_ANTHROPIC: {
        static const char suffix[] = "\"}";
        sg_fm_buf_append(&ex->pend, "event: content_block_delta\n", 27);
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(&ex->pend,
                         "data: {\"type\":\"content_block_delta\",\"index\":0,"
                         "\"delta\":{\"type\":\"text_delta\",\"text\":\"tok%lld",
                         i);
        pad_line(ex, start, sizeof(suffix) - 1 + (ex->sc.event_bytes > 0 ? 0 : 1),
                 ex->sc.line_bytes);
        sg_fm_buf_append(&ex->pend, suffix, sizeof(suffix) - 1);
        pad_event(ex, start - 27);
        break;
    }
    case SG_FM_FMT_SSE:
    default: {
        static const char suffix[] = "\"},\"finish_reason\":null}]";
        start = ex->pend.off + ex->pend.len;
        sg_fm_buf_printf(
            &ex->pend,
            "data: {\"id\":\"chatcmpl-%llu\",\"object\":\"chat.completion.chunk\","
            "\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{"
            "\"index\":0,\"delta\":{\"content\":\"tok%lld",
            id, i);
        pad_line(ex, start, sizeof(suffix) - 1 + (ex->sc.event_bytes > 0 ? 0 : 1),
                 ex->sc.line_bytes);
        sg_fm_buf_append(&ex->pend, suffix, sizeof(suffix) - 1);
        pad_event(ex, start);
        break;
    }
    }
    pend_count_since(ex, before);
}

static void emit_prelude(exchange *ex) {
    if (ex->sc.format != SG_FM_FMT_ANTHROPIC) {
        return;
    }
    size_t before = ex->pend.len;
    sg_fm_buf_printf(
        &ex->pend,
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{"
        "\"id\":\"msg_%llu\",\"type\":\"message\",\"role\":\"assistant\","
        "\"model\":\"sg-fakemodel\",\"content\":[],\"stop_reason\":null,"
        "\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n"
        "event: content_block_start\ndata: {\"type\":\"content_block_start\","
        "\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        (unsigned long long)ex->id);
    pend_count_since(ex, before);
}

static void emit_end(exchange *ex) {
    if (ex->sc.no_done) {
        return;
    }
    size_t before = ex->pend.len;
    switch (ex->sc.format) {
    case SG_FM_FMT_NDJSON:
        sg_fm_buf_printf(&ex->pend, "{\"id\":\"gen-%llu\",\"done\":true}\n",
                         (unsigned long long)ex->id);
        break;
    case SG_FM_FMT_ANTHROPIC:
        sg_fm_buf_printf(
            &ex->pend,
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\","
            "\"index\":0}\n\n"
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{"
            "\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{"
            "\"output_tokens\":%lld}}\n\n"
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            (long long)ex->items);
        break;
    case SG_FM_FMT_SSE:
    default:
        sg_fm_buf_append(&ex->pend, "data: [DONE]\n\n", 14);
        break;
    }
    pend_count_since(ex, before);
}

static void emit_keepalive(exchange *ex) {
    if (ex->sc.format == SG_FM_FMT_NDJSON) {
        /* NDJSON has no comments; an empty line is what parsers skip. */
        pend_add(ex, "\n", 1);
    } else {
        pend_add(ex, ": keepalive\n\n", 13);
    }
}

/* When the wait after item `ex->items` is the stall, log it and use it. */
static void schedule_next(exchange *ex, int64_t now, int64_t normal_ms) {
    if (ex->sc.stall_after >= 0 && ex->items == ex->sc.stall_after) {
        char f[64];
        snprintf(f, sizeof(f), "\"items\":%lld,\"stall_ms\":%lld", (long long)ex->items,
                 ex->sc.stall_ms == SG_FM_FOREVER ? -1LL : (long long)ex->sc.stall_ms);
        log_ex(ex, SG_FM_EV_STALL_STARTED, f);
        ex->next_item_at = add_ms(now, ex->sc.stall_ms);
    } else {
        ex->next_item_at = add_ms(now, normal_ms);
    }
}

static void ex_arm_next(exchange *ex) {
    int64_t due = ex->next_item_at;
    if (ex->sc.keepalive_ms > 0) {
        int64_t ka = add_ms(ex->last_emit_at, ex->sc.keepalive_ms);
        if (ka < due) {
            due = ka;
        }
    }
    sg_fm_timer_arm(&ex->timer, due);
}

/* Generates whatever is due, as far as the client's reading allows. */
static void ex_step(exchange *ex) {
    if (ex->st != X_STREAMING || ex->finished) {
        return;
    }
    int64_t now = sg_fm_now();
    if (ex->sc.bytes_per_write > 0 && ex->pend.len > 0) {
        ex->allow = (size_t)ex->sc.bytes_per_write;
        ex_pump(ex);
        if (ex->pend.len > 0) {
            sg_fm_timer_arm(&ex->timer, add_ms(now, ex->sc.write_gap_ms));
            return;
        }
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
            if (ex->sc.drop_after >= 0 && ex->items == ex->sc.drop_after) {
                ex->drop_pending = 1;
                ex_pump(ex);
                return;
            }
            emit_item(ex);
            ex->items++;
            ex->last_emit_at = now;
            if (ex->items == 1) {
                log_ex(ex, SG_FM_EV_FIRST_ITEM_SENT, "\"items\":1");
            }
            if (!ex->sc.runaway && ex->items >= ex->sc.n) {
                emit_end(ex);
                ex->reason = ex->sc.no_done ? "no_done" : "done";
                ex->eof_pending = 1;
                if (ex->sc.bytes_per_write > 0) {
                    ex->allow = (size_t)ex->sc.bytes_per_write;
                    ex_pump(ex);
                    if (ex->pend.len > 0) {
                        sg_fm_timer_arm(&ex->timer, add_ms(now, ex->sc.write_gap_ms));
                    }
                    return;
                }
                ex_pump(ex);
                return;
            }
            /* Count the gap from when this item was due, not from when the
             * timer fired: epoll's millisecond rounding must not accumulate
             * over a long stream.  A writer far behind (a slow reader) starts
             * afresh instead of bursting to catch up. */
            int64_t due = ex->next_item_at;
            int64_t base =
                (due <= now && now - due < add_ms(0, ex->sc.gap_ms)) ? due : now;
            schedule_next(ex, base, ex->sc.gap_ms);
            if (ex->sc.bytes_per_write > 0) {
                ex->allow = (size_t)ex->sc.bytes_per_write;
                ex_pump(ex);
                if (ex->pend.len > 0) {
                    sg_fm_timer_arm(&ex->timer, add_ms(now, ex->sc.write_gap_ms));
                    return;
                }
                continue;
            }
            if (ex->bytes - budget_start >= STEP_BUDGET) {
                /* Yield to the other connections; come back next turn. */
                ex_pump(ex);
                sg_fm_timer_arm(&ex->timer, now);
                return;
            }
            continue;
        }
        if (ex->sc.keepalive_ms > 0 &&
            now >= add_ms(ex->last_emit_at, ex->sc.keepalive_ms)) {
            emit_keepalive(ex);
            ex->last_emit_at = now;
            continue;
        }
        break;
    }
    ex_pump(ex);
    ex_arm_next(ex);
}

/* Submits (HTTP/2) or writes (HTTP/1.1) response headers. */
static void send_headers(exchange *ex, int status, const char *ctype,
                         int64_t content_length, const char *retry_after) {
    conn *c = ex->c;
    ex->status = status;
    char idbuf[24];
    snprintf(idbuf, sizeof(idbuf), "%llu", (unsigned long long)ex->id);
    if (c->mode == M_H2) {
        char st[8];
        char cl[24];
        snprintf(st, sizeof(st), "%d", status);
        snprintf(cl, sizeof(cl), "%lld", (long long)content_length);
        nghttp2_nv nva[6];
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
            ex->h10 ? 0 : 1, status, status_text(status), ctype, idbuf);
        if (retry_after != NULL) {
            sg_fm_buf_printf(&c->out, "Retry-After: %s\r\n", retry_after);
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

/* A complete, non-streamed response (errors, /_log, /_stats). */
static void ex_respond(exchange *ex, int status, const char *ctype, const char *body,
                       size_t len, const char *reason) {
    ex->st = X_STREAMING;
    ex->reason = reason;
    send_headers(ex, status, ctype, (int64_t)len, NULL);
    ex->allow = SIZE_MAX;
    sg_fm_buf_append(&ex->pend, body, len);
    ex->eof_pending = 1;
    if (ex->c->mode == M_H1) {
        sg_fm_buf_append(&ex->c->out, sg_fm_buf_data(&ex->pend), ex->pend.len);
        sg_fm_buf_consume(&ex->pend, ex->pend.len);
        ex_finish(ex, NULL);
    }
}

static void ex_respond_json_error(exchange *ex, int status, const char *msg,
                                  const char *reason) {
    sg_fm_buf b = {0};
    sg_fm_buf_printf(&b, "{\"error\":{\"message\":\"");
    sg_fm_buf_json_str(&b, msg, strlen(msg));
    sg_fm_buf_printf(&b, "\",\"type\":\"%s\",\"code\":%d}}\n", reason, status);
    ex_respond(ex, status, "application/json", sg_fm_buf_data(&b), b.len, reason);
    sg_fm_buf_free(&b);
}

static void start_stream_response(exchange *ex) {
    int64_t now = sg_fm_now();
    const char *ctype =
        ex->sc.format == SG_FM_FMT_NDJSON ? "application/x-ndjson" : "text/event-stream";
    if (ex->status > 0 && ex->status != 200) {
        /* The scripted failure: status, Retry-After, a JSON error body. */
        sg_fm_buf b = {0};
        sg_fm_buf_printf(&b,
                         "{\"error\":{\"message\":\"sg-fakemodel scripted status %d\","
                         "\"type\":\"scripted\",\"code\":%d}}\n",
                         ex->status, ex->status);
        int st = ex->status;
        ex->st = X_STREAMING;
        send_headers(ex, st, "application/json", (int64_t)b.len,
                     ex->sc.retry_after[0] ? ex->sc.retry_after : NULL);
        ex->reason = "status";
        pend_add(ex, sg_fm_buf_data(&b), b.len);
        sg_fm_buf_free(&b);
        ex->eof_pending = 1;
        if (ex->c->mode == M_H1) {
            sg_fm_buf_append(&ex->c->out, sg_fm_buf_data(&ex->pend), ex->pend.len);
            sg_fm_buf_consume(&ex->pend, ex->pend.len);
            ex_finish(ex, NULL);
        }
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
        schedule_next(ex, now, ex->sc.first_delay_ms);
    }
    ex_step(ex);
}

static void ex_on_timer(sg_fm_timer *t) {
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
        {"/api/generate", SG_FM_FMT_NDJSON},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        if (strlen(routes[i].path) == len && memcmp(routes[i].path, path, len) == 0) {
            return routes[i].fmt;
        }
    }
    return (sg_fm_format)-1;
}

static int path_is(const exchange *ex, const char *p) {
    return ex->target != NULL && strlen(p) == ex->path_len &&
           memcmp(ex->target, p, ex->path_len) == 0;
}

static void serve_stats(exchange *ex) {
    char body[512];
    int n = snprintf(body, sizeof(body),
                     "{\"connections\":%zu,\"exchanges\":%zu,\"connections_total\":%llu,"
                     "\"requests_total\":%llu,\"timers\":%zu,\"log_events\":%zu,"
                     "\"log_dropped\":%llu}\n",
                     g.n_conns, g.n_exchanges, (unsigned long long)g.conns_total,
                     (unsigned long long)g.requests_total, g.heap_len, sg_fm_log_count(),
                     (unsigned long long)sg_fm_log_dropped());
    ex_respond(ex, 200, "application/json", body, (size_t)n, "stats");
}

/* The request is complete: log it and decide what to play. */
static void ex_begin(exchange *ex) {
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
            sg_fm_keys_reset();
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
    if (ex->body_bytes > g.o->max_body) {
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
    sg_fm_scenario_init(&ex->sc, fmt);
    char err[128];
    if ((q != NULL && sg_fm_scenario_parse(&ex->sc, q, qlen, err, sizeof(err)) != 0) ||
        (ex->scenario_hdr != NULL &&
         sg_fm_scenario_parse(&ex->sc, ex->scenario_hdr, strlen(ex->scenario_hdr), err,
                              sizeof(err)) != 0)) {
        ex_respond_json_error(ex, 400, err, "bad_scenario");
        return;
    }
    if (ex->sc.status > 0 && ex->sc.status != 200) {
        uint64_t count = sg_fm_key_count(ex->key);
        if (ex->sc.fail_first < 0 || count <= (uint64_t)ex->sc.fail_first) {
            ex->status = ex->sc.status;
        }
    }
    if (ex->sc.hang) {
        ex->st = X_HANG;
        return;
    }
    if (ex->sc.refuse) {
        /* What an overloaded server does before any work: HTTP/2 refuses the
         * stream (safe to retry, RFC 9113 §8.7); HTTP/1.1 can only close. */
        ex->st = X_STREAMING;
        if (ex->c->mode == M_H2) {
            nghttp2_submit_rst_stream(ex->c->h2, NGHTTP2_FLAG_NONE, ex->stream_id,
                                      NGHTTP2_REFUSED_STREAM);
        } else {
            ex->c->abort_after_flush = 1;
        }
        ex_finish(ex, "refused");
        return;
    }
    ex->st = X_WAIT_HEADERS;
    if (ex->sc.headers_delay_ms > 0) {
        sg_fm_timer_arm(&ex->timer, add_ms(ex->t_received, ex->sc.headers_delay_ms));
    } else {
        start_stream_response(ex);
    }
}

/* ------------------------------------------------------------ HTTP/2 */

/*
 * The data provider of every HTTP/2 response: hands nghttp2 what the
 * exchange generated, or defers until a timer generates more.
 */
static ssize_t h2_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                       size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                       void *user_data) {
    (void)user_data;
    exchange *ex = source->ptr;
    size_t n = ex->pend.len;
    if (n > length) {
        n = length;
    }
    if (n > ex->allow) {
        n = ex->allow;
    }
    if (n > 0) {
        memcpy(buf, sg_fm_buf_data(&ex->pend), n);
        sg_fm_buf_consume(&ex->pend, n);
        if (ex->allow != SIZE_MAX) {
            ex->allow -= n;
        }
        if (ex->blocked && ex->pend.len < PEND_LOW) {
            ex->blocked = 0;
            sg_fm_timer_arm(&ex->timer, sg_fm_now());
        }
    }
    if (ex->pend.len == 0) {
        if (ex->eof_pending) {
            *data_flags |= NGHTTP2_DATA_FLAG_EOF;
            ex_finish(ex, NULL);
            return (ssize_t)n;
        }
        if (ex->drop_pending && n == 0) {
            if (ex->sc.drop_mode == SG_FM_DROP_CLOSE) {
                ex->c->abort_after_flush = 1;
                ex_finish(ex, "dropped");
                ex->deferred = 1;
                return NGHTTP2_ERR_DEFERRED;
            }
            ex_finish(ex, "dropped");
            if (ex->sc.rst_code < 0) {
                /* nghttp2 answers this with RST_STREAM(INTERNAL_ERROR), after
                 * the DATA already handed over: the client sees the items,
                 * then the reset. */
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
            }
            /* Every DATA frame of this stream is serialised already, so the
             * reset queued now still follows them. */
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream_id,
                                      (uint32_t)ex->sc.rst_code);
            ex->deferred = 1;
            return NGHTTP2_ERR_DEFERRED;
        }
    }
    if (n == 0) {
        ex->deferred = 1;
        return NGHTTP2_ERR_DEFERRED;
    }
    return (ssize_t)n;
}

static int h2_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame,
                               void *user_data) {
    conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    exchange *ex = ex_new(c, frame->hd.stream_id);
    if (ex == NULL) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, ex);
    return 0;
}

static int name_eq(const uint8_t *n, size_t len, const char *want) {
    return strlen(want) == len && memcmp(n, want, len) == 0;
}

static void set_field(char **dst, const uint8_t *v, size_t len) {
    if (*dst == NULL) {
        *dst = dup_cut((const char *)v, len, FIELD_MAX);
    }
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame,
                        const uint8_t *name, size_t namelen, const uint8_t *value,
                        size_t valuelen, uint8_t flags, void *user_data) {
    (void)flags;
    (void)user_data;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
        return 0;
    }
    exchange *ex = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (ex == NULL) {
        return 0;
    }
    if (name_eq(name, namelen, ":method")) {
        size_t n = valuelen < sizeof(ex->method) - 1 ? valuelen : sizeof(ex->method) - 1;
        memcpy(ex->method, value, n);
        ex->method[n] = '\0';
    } else if (name_eq(name, namelen, ":path")) {
        if (ex->target == NULL) {
            ex->target = dup_cut((const char *)value, valuelen, 8192);
            if (ex->target != NULL) {
                const char *qm = strchr(ex->target, '?');
                ex->path_len =
                    qm != NULL ? (size_t)(qm - ex->target) : strlen(ex->target);
            }
        }
    } else if (name_eq(name, namelen, "idempotency-key")) {
        set_field(&ex->key, value, valuelen);
    } else if (name_eq(name, namelen, "x-deadline-ms")) {
        set_field(&ex->deadline_ms, value, valuelen);
    } else if (name_eq(name, namelen, "grpc-timeout")) {
        set_field(&ex->grpc_timeout, value, valuelen);
    } else if (name_eq(name, namelen, "x-sg-scenario")) {
        set_field(&ex->scenario_hdr, value, valuelen);
    }
    return 0;
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                            const uint8_t *data, size_t len, void *user_data) {
    (void)flags;
    (void)data;
    (void)user_data;
    exchange *ex = nghttp2_session_get_stream_user_data(session, stream_id);
    if (ex != NULL) {
        ex->body_bytes += len;
    }
    return 0;
}

static int h2_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                            void *user_data) {
    (void)user_data;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
            exchange *ex =
                nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
            if (ex != NULL && ex->st == X_READING) {
                ex_begin(ex);
            }
        }
        break;
    default:
        break;
    }
    return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t stream_id,
                              uint32_t error_code, void *user_data) {
    (void)user_data;
    exchange *ex = nghttp2_session_get_stream_user_data(session, stream_id);
    if (ex == NULL) {
        return 0;
    }
    if (!ex->finished && ex->st != X_READING) {
        ex_gone(ex, "rst_stream", (int)error_code);
    }
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    ex_free(ex);
    return 0;
}

static int h2_init_callbacks(void) {
    if (nghttp2_session_callbacks_new(&g.h2cb) != 0 ||
        nghttp2_option_new(&g.h2opt) != 0) {
        return -1;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(g.h2cb, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(g.h2cb, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(g.h2cb, h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(g.h2cb, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(g.h2cb, h2_on_stream_close);
    /* Closed streams are not kept for priority bookkeeping: memory stays
     * proportional to open streams with thousands of short requests. */
    nghttp2_option_set_no_closed_streams(g.h2opt, 1);
    return 0;
}

static int h2_start(conn *c) {
    c->mode = M_H2;
    if (nghttp2_session_server_new2(&c->h2, g.h2cb, c, g.h2opt) != 0) {
        return -1;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, g.o->h2_max_streams},
    };
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 1) != 0) {
        return -1;
    }
    return 0;
}

static void conn_error(conn *c, const char *proto, const char *detail) {
    sg_fm_buf b = {0};
    sg_fm_buf_printf(&b, "\"conn\":%llu,\"proto\":\"%s\",\"detail\":\"",
                     (unsigned long long)c->id, proto);
    sg_fm_buf_json_str(&b, detail, strlen(detail));
    sg_fm_buf_append(&b, "\"", 2);
    sg_fm_log_event(0, SG_FM_EV_CONN_ERROR, sg_fm_now(), 0, NULL, sg_fm_buf_data(&b));
    sg_fm_buf_free(&b);
}

/* Feeds received bytes to nghttp2; a protocol error ends the connection. */
static int h2_feed(conn *c, const char *data, size_t len) {
    ssize_t r = nghttp2_session_mem_recv(c->h2, (const uint8_t *)data, len);
    if (r < 0) {
        conn_error(c, "h2", nghttp2_strerror((int)r));
        /* Bad preface or fatal error: nghttp2 may have queued a GOAWAY. */
        c->close_after_flush = 1;
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ connections */

static int io_read(conn *c, char *buf, size_t cap) {
    if (cap > INT_MAX) {
        cap = INT_MAX;
    }
    if (c->ssl != NULL) {
        ERR_clear_error();
        int r = SSL_read(c->ssl, buf, (int)cap);
        if (r > 0) {
            return r;
        }
        switch (SSL_get_error(c->ssl, r)) {
        case SSL_ERROR_WANT_READ:
            return -1;
        case SSL_ERROR_WANT_WRITE:
            c->ssl_wants_write = 1;
            return -1;
        case SSL_ERROR_ZERO_RETURN:
            return 0;
        default:
            return -2;
        }
    }
    ssize_t r = recv(c->ep.fd, buf, cap, 0);
    if (r > 0) {
        return (int)r;
    }
    if (r == 0) {
        return 0;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        return -1;
    }
    return -2;
}

static int io_write(conn *c, const char *buf, size_t len) {
    if (len > INT_MAX) {
        len = INT_MAX;
    }
    if (c->ssl != NULL) {
        ERR_clear_error();
        int r = SSL_write(c->ssl, buf, (int)len);
        if (r > 0) {
            return r;
        }
        switch (SSL_get_error(c->ssl, r)) {
        case SSL_ERROR_WANT_WRITE:
        case SSL_ERROR_WANT_READ:
            return -1;
        default:
            return -2;
        }
    }
    ssize_t r = send(c->ep.fd, buf, len, MSG_NOSIGNAL);
    if (r >= 0) {
        return (int)r;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        return -1;
    }
    return -2;
}

static void conn_close(conn *c, int by_server) {
    if (c->dead) {
        return;
    }
    c->dead = 1;
    while (c->exs != NULL) {
        exchange *ex = c->exs;
        if (!ex->finished && ex->st != X_READING) {
            if (by_server) {
                ex_finish(ex, "server_closed");
            } else {
                ex_gone(ex, "connection_closed", -1);
            }
        }
        ex_free(ex);
    }
    sg_fm_timer_disarm(&c->kick);
    epoll_ctl(g.epfd, EPOLL_CTL_DEL, c->ep.fd, NULL);
    if (c->ssl != NULL) {
        if (!c->abort_after_flush && !c->read_eof && SSL_is_init_finished(c->ssl)) {
            SSL_shutdown(c->ssl);
        }
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->abort_after_flush) {
        /* RST rather than FIN would also do; FIN after the last byte is
         * what a crashed upstream behind a proxy usually looks like. */
        shutdown(c->ep.fd, SHUT_RDWR);
    }
    close(c->ep.fd);
    c->ep.fd = -1;
    if (c->h2 != NULL) {
        nghttp2_session_del(c->h2);
        c->h2 = NULL;
    }
    sg_fm_buf_free(&c->in);
    sg_fm_buf_free(&c->out);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        g.conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    c->dead_next = g.dead;
    g.dead = c;
    g.n_conns--;
}

static void free_dead(void) {
    while (g.dead != NULL) {
        conn *c = g.dead;
        g.dead = c->dead_next;
        free(c);
    }
}

/* Writes as much buffered output as the socket takes.  -1: connection broken. */
static int conn_write(conn *c) {
    c->ssl_wants_write = 0;
    while (c->out.len > 0) {
        int r = io_write(c, sg_fm_buf_data(&c->out), c->out.len);
        if (r == -1) {
            return 0;
        }
        if (r < 0) {
            return -1;
        }
        sg_fm_buf_consume(&c->out, (size_t)r);
    }
    return 0;
}

static void update_events(conn *c) {
    uint32_t ev = 0;
    int can_read = !c->read_eof;
    if (c->mode == M_H1 || c->mode == M_DETECT) {
        can_read = can_read && c->in.len < IN_MAX;
    } else if (c->mode == M_H2) {
        can_read = can_read && c->out.len < OUT_HIGH;
    }
    if (can_read) {
        ev |= EPOLLIN;
    }
    if (c->out.len > 0 || c->ssl_wants_write) {
        ev |= EPOLLOUT;
    }
    if (ev != c->events) {
        struct epoll_event e = {.events = ev, .data.ptr = &c->ep};
        epoll_ctl(g.epfd, EPOLL_CTL_MOD, c->ep.fd, &e);
        c->events = ev;
    }
    /* Decrypted bytes inside OpenSSL do not make the socket readable. */
    if (can_read && c->ssl != NULL && c->mode != M_TLS_HS && SSL_pending(c->ssl) > 0) {
        sg_fm_timer_arm(&c->kick, sg_fm_now());
    }
}

static void copy_h1_request(exchange *ex, const sg_fm_h1_request *r) {
    size_t ml =
        r->method_len < sizeof(ex->method) - 1 ? r->method_len : sizeof(ex->method) - 1;
    memcpy(ex->method, r->method, ml);
    ex->method[ml] = '\0';
    ex->target = dup_cut(r->target, r->target_len, r->target_len);
    if (ex->target != NULL) {
        const char *qm = strchr(ex->target, '?');
        ex->path_len = qm != NULL ? (size_t)(qm - ex->target) : strlen(ex->target);
    }
    static const struct {
        const char *name;
        size_t off;
    } fields[] = {
        {"idempotency-key", offsetof(exchange, key)},
        {"x-deadline-ms", offsetof(exchange, deadline_ms)},
        {"grpc-timeout", offsetof(exchange, grpc_timeout)},
        {"x-sg-scenario", offsetof(exchange, scenario_hdr)},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const sg_fm_h1_header *h = sg_fm_h1_find_header(r, fields[i].name);
        if (h != NULL) {
            char **dst = (char **)(void *)((char *)ex + fields[i].off);
            *dst = dup_cut(h->value, h->value_len, FIELD_MAX);
        }
    }
    const sg_fm_h1_header *e = sg_fm_h1_find_header(r, "expect");
    ex->expect_continue =
        e != NULL && sg_fm_h1_iequal(e->value, e->value_len, "100-continue", 12);
    ex->h10 = r->minor_version == 0;
    ex->keep_alive = r->keep_alive;
}

/* A request that cannot be parsed: answered, logged, and the connection closed. */
static void h1_reject(conn *c, int status, const char *why) {
    exchange *ex = ex_new(c, 0);
    if (ex == NULL) {
        c->close_after_flush = 1;
        return;
    }
    c->cur = ex;
    c->h1 = H1_CLOSING;
    ex->t_received = sg_fm_now();
    log_received(ex, why);
    ex->keep_alive = 0;
    ex_respond_json_error(ex, status, why, "bad_request");
    c->close_after_flush = 1;
}

/* Parses what it can of the input.  Returns 1 if it made progress. */
static int h1_process(conn *c) {
    if (c->h1 == H1_HEAD) {
        /* RFC 9112 §2.2: ignore empty lines before a request line. */
        size_t skip = 0;
        while (skip < c->in.len && (sg_fm_buf_data(&c->in)[skip] == '\r' ||
                                    sg_fm_buf_data(&c->in)[skip] == '\n')) {
            skip++;
        }
        if (skip > 0) {
            sg_fm_buf_consume(&c->in, skip);
            c->head_scanned = 0;
        }
        if (c->in.len == 0) {
            return 0;
        }
        size_t head =
            sg_fm_h1_find_head_end(sg_fm_buf_data(&c->in), c->in.len, &c->head_scanned);
        if (head == 0) {
            if (c->in.len > SG_FM_H1_MAX_HEAD) {
                h1_reject(c, 431, "request head too large");
                return 1;
            }
            return 0;
        }
        sg_fm_h1_request req;
        int rc = sg_fm_h1_parse_request(sg_fm_buf_data(&c->in), head, &req);
        if (rc < 0) {
            static const char *const why[] = {
                "", "malformed request", "request head too large",
                "unsupported HTTP version", "unsupported transfer coding"};
            h1_reject(c, sg_fm_h1_error_status(rc), why[-rc]);
            return 1;
        }
        exchange *ex = ex_new(c, 0);
        if (ex == NULL) {
            c->close_after_flush = 1;
            return 0;
        }
        c->cur = ex;
        copy_h1_request(ex, &req);
        sg_fm_buf_consume(&c->in, head);
        c->head_scanned = 0;
        if (req.content_length > 0 && (uint64_t)req.content_length > g.o->max_body) {
            ex->body_bytes = (uint64_t)req.content_length;
            ex->keep_alive = 0;
            c->h1 = H1_CLOSING;
            c->close_after_flush = 1;
            ex_begin(ex);
            return 1;
        }
        if (ex->expect_continue && (req.content_length > 0 || req.chunked)) {
            sg_fm_buf_append(&c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        }
        c->body_chunked = req.chunked;
        c->body_left = req.content_length > 0 ? req.content_length : 0;
        memset(&c->chunk, 0, sizeof(c->chunk));
        c->h1 = (req.chunked || c->body_left > 0) ? H1_BODY : H1_RESPONDING;
        if (c->h1 == H1_RESPONDING) {
            ex_begin(ex);
        }
        return 1;
    }
    if (c->h1 == H1_BODY) {
        exchange *ex = c->cur;
        if (c->body_chunked) {
            long r =
                sg_fm_h1_chunked_consume(&c->chunk, sg_fm_buf_data(&c->in), c->in.len);
            if (r < 0) {
                ex_free(ex);
                h1_reject(c, 400, "malformed chunked body");
                return 1;
            }
            sg_fm_buf_consume(&c->in, (size_t)r);
            ex->body_bytes = c->chunk.body_bytes;
            if (ex->body_bytes > g.o->max_body) {
                ex->keep_alive = 0;
                c->close_after_flush = 1;
                c->h1 = H1_CLOSING;
                ex_begin(ex);
                return 1;
            }
            if (!c->chunk.done) {
                return r > 0;
            }
        } else {
            size_t take = c->in.len;
            if ((int64_t)take > c->body_left) {
                take = (size_t)c->body_left;
            }
            sg_fm_buf_consume(&c->in, take);
            c->body_left -= (int64_t)take;
            ex->body_bytes += take;
            if (c->body_left > 0) {
                return take > 0;
            }
        }
        c->h1 = H1_RESPONDING;
        ex_begin(ex);
        return 1;
    }
    return 0;
}

static void h2_flush(conn *c) {
    while (c->out.len < OUT_HIGH) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(c->h2, &data);
        if (n < 0) {
            conn_error(c, "h2", nghttp2_strerror((int)n));
            c->abort_after_flush = 1;
            return;
        }
        if (n == 0) {
            return;
        }
        sg_fm_buf_append(&c->out, data, (size_t)n);
    }
}

/*
 * Everything that follows an event on a connection: start pipelined
 * requests, serialise HTTP/2 frames, write, close when done, and re-arm
 * epoll interest.
 */
static void conn_after(conn *c) {
    if (c->dead) {
        return;
    }
    for (int guard = 0; guard < 10000 && c->mode == M_H1; guard++) {
        if (c->cur != NULL && c->cur->finished) {
            int keep =
                c->cur->keep_alive && !c->close_after_flush && !c->abort_after_flush;
            ex_free(c->cur);
            c->h1 = keep ? H1_HEAD : H1_CLOSING;
            if (!keep) {
                c->close_after_flush = 1;
            }
            continue;
        }
        if ((c->h1 == H1_HEAD || c->h1 == H1_BODY) && c->in.len > 0 &&
            c->out.len < OUT_HIGH && h1_process(c)) {
            continue;
        }
        break;
    }
    /* HTTP/2: serialise and write until the socket pushes back or nghttp2
     * has nothing left.  EPOLLOUT is armed only while bytes wait in out, so
     * stopping at OUT_HIGH with a socket that took everything would leave
     * the remaining frames with nobody to wake them. */
    for (;;) {
        if (c->mode == M_H2 && c->h2 != NULL) {
            h2_flush(c);
        }
        if (conn_write(c) != 0) {
            conn_close(c, 0);
            return;
        }
        if (c->mode != M_H2 || c->h2 == NULL || c->out.len > 0 || c->abort_after_flush ||
            !nghttp2_session_want_write(c->h2)) {
            break;
        }
    }
    if (c->out.len == 0 && (c->close_after_flush || c->abort_after_flush)) {
        conn_close(c, 1);
        return;
    }
    if (c->mode == M_H2 && c->out.len == 0 && !nghttp2_session_want_read(c->h2) &&
        !nghttp2_session_want_write(c->h2)) {
        conn_close(c, 1);
        return;
    }
    if (c->read_eof) {
        /* The client closed its side: whatever is running, it has gone. */
        conn_close(c, 0);
        return;
    }
    if (c->mode == M_H1 && c->cur != NULL && c->cur->blocked &&
        ex_backlog(c->cur) < OUT_LOW) {
        c->cur->blocked = 0;
        sg_fm_timer_arm(&c->cur->timer, sg_fm_now());
    }
    update_events(c);
}

static void tls_handshake(conn *c) {
    ERR_clear_error();
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        const unsigned char *alpn = NULL;
        unsigned int alpn_len = 0;
        SSL_get0_alpn_selected(c->ssl, &alpn, &alpn_len);
        if (alpn_len == 2 && memcmp(alpn, "h2", 2) == 0) {
            if (h2_start(c) != 0) {
                c->abort_after_flush = 1;
            }
        } else {
            c->mode = M_H1;
            c->h1 = H1_HEAD;
        }
        return;
    }
    switch (SSL_get_error(c->ssl, r)) {
    case SSL_ERROR_WANT_READ:
        break;
    case SSL_ERROR_WANT_WRITE:
        c->ssl_wants_write = 1;
        break;
    default: {
        unsigned long e = ERR_peek_error();
        const char *why = e != 0 ? ERR_reason_error_string(e) : NULL;
        char msg[160];
        snprintf(msg, sizeof(msg), "TLS handshake failed: %s",
                 why != NULL ? why : "connection closed or not TLS");
        ERR_clear_error();
        conn_error(c, "tls", msg);
        c->read_eof = 1;
        c->abort_after_flush = 1;
        break;
    }
    }
}

static void conn_read(conn *c) {
    if (c->mode == M_DETECT && c->in.len == 0 && g.ssl_ctx != NULL) {
        unsigned char first;
        ssize_t r = recv(c->ep.fd, &first, 1, MSG_PEEK);
        if (r == 0) {
            c->read_eof = 1;
            return;
        }
        if (r < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                c->read_eof = 1;
            }
            return;
        }
        if (first == 0x16) {
            c->ssl = SSL_new(g.ssl_ctx);
            if (c->ssl == NULL || SSL_set_fd(c->ssl, c->ep.fd) != 1) {
                c->read_eof = 1;
                return;
            }
            SSL_set_accept_state(c->ssl);
            c->mode = M_TLS_HS;
        }
    }
    if (c->mode == M_TLS_HS) {
        tls_handshake(c);
        if (c->mode == M_TLS_HS || c->read_eof) {
            return;
        }
    }
    for (int rounds = 0; rounds < 64 && !c->read_eof; rounds++) {
        if (c->mode == M_H2) {
            if (c->out.len >= OUT_HIGH) {
                return;
            }
            char tmp[16384];
            int r = io_read(c, tmp, sizeof(tmp));
            if (r == -1) {
                return;
            }
            if (r <= 0) {
                c->read_eof = 1;
                return;
            }
            if (h2_feed(c, tmp, (size_t)r) != 0) {
                c->read_eof = 1;
                return;
            }
            h2_flush(c);
            continue;
        }
        if (c->in.len >= IN_MAX) {
            return;
        }
        size_t space = IN_MAX - c->in.len;
        if (sg_fm_buf_reserve(&c->in, space) != 0) {
            c->read_eof = 1;
            return;
        }
        int r = io_read(c, c->in.p + c->in.off + c->in.len, space);
        if (r == -1) {
            return;
        }
        if (r <= 0) {
            c->read_eof = 1;
            return;
        }
        c->in.len += (size_t)r;
        if (c->mode == M_DETECT) {
            static const char preface[] = "PRI ";
            size_t n = c->in.len < 4 ? c->in.len : 4;
            if (memcmp(sg_fm_buf_data(&c->in), preface, n) == 0) {
                if (n < 4) {
                    continue;
                }
                if (h2_start(c) != 0) {
                    c->read_eof = 1;
                    return;
                }
                int fr = h2_feed(c, sg_fm_buf_data(&c->in), c->in.len);
                sg_fm_buf_free(&c->in);
                if (fr != 0) {
                    return;
                }
                h2_flush(c);
                continue;
            }
            c->mode = M_H1;
            c->h1 = H1_HEAD;
        }
        /* Parse as we go so a pipelined burst cannot fill the buffer first. */
        conn_after(c);
        if (c->dead) {
            return;
        }
    }
}

static void conn_kick(sg_fm_timer *t) {
    conn *c = (conn *)(void *)((char *)t - offsetof(conn, kick));
    conn_read(c);
    conn_after(c);
}

static void set_listeners(uint32_t events) {
    for (int i = 0; i < g.nlisteners; i++) {
        struct epoll_event e = {.events = events, .data.ptr = &g.listeners[i]};
        epoll_ctl(g.epfd, EPOLL_CTL_MOD, g.listeners[i].fd, &e);
    }
}

static void accept_resume(sg_fm_timer *t) {
    (void)t;
    set_listeners(EPOLLIN);
}

static void on_accept(ep_item *l) {
    for (int i = 0; i < 256; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                /* Out of descriptors: a level-triggered listener would spin,
                 * so stop listening briefly instead. */
                fprintf(stderr, "sg-fakemodel: accept: %s (pausing 100 ms)\n",
                        strerror(errno));
                set_listeners(0);
                sg_fm_timer_arm(&g.accept_timer, sg_fm_now() + 100 * NS_PER_MS);
            }
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        c->ep.tag = TAG_CONN;
        c->ep.fd = fd;
        c->id = ++g.next_conn_id;
        c->mode = M_DETECT;
        sg_fm_timer_init(&c->kick, conn_kick);
        c->events = EPOLLIN;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = &c->ep};
        if (epoll_ctl(g.epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = g.conns;
        if (g.conns != NULL) {
            g.conns->prev = c;
        }
        g.conns = c;
        g.n_conns++;
        g.conns_total++;
    }
}

static void on_conn_event(conn *c, uint32_t events) {
    if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        conn_read(c);
    }
    /* HUP and ERR are reported even while reading is paused; after the read
     * above took what was there, the peer is gone, and waiting would spin. */
    if (events & (EPOLLHUP | EPOLLERR)) {
        c->read_eof = 1;
    }
    if (!c->dead && c->mode == M_TLS_HS && (events & EPOLLOUT)) {
        tls_handshake(c);
    }
    conn_after(c);
}

/* ------------------------------------------------------------ setup */

static int listen_on(int family, int port) {
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        a6.sin6_addr = in6addr_loopback;
        rc = bind(fd, (struct sockaddr *)&a6, sizeof(a6));
    } else {
        struct sockaddr_in a4;
        memset(&a4, 0, sizeof(a4));
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = bind(fd, (struct sockaddr *)&a4, sizeof(a4));
    }
    if (rc != 0 || listen(fd, 65535) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int bound_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        return -1;
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int add_ep(ep_item *it, int tag, int fd) {
    it->tag = tag;
    it->fd = fd;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = it};
    return epoll_ctl(g.epfd, EPOLL_CTL_ADD, fd, &e);
}

static void shutdown_all(void) {
    while (g.conns != NULL) {
        conn_close(g.conns, 1);
    }
    free_dead();
    for (int i = 0; i < g.nlisteners; i++) {
        close(g.listeners[i].fd);
    }
    if (g.sig.fd >= 0) {
        close(g.sig.fd);
    }
    if (g.epfd >= 0) {
        close(g.epfd);
    }
    free(g.heap);
    g.heap = NULL;
    SSL_CTX_free(g.ssl_ctx);
    nghttp2_session_callbacks_del(g.h2cb);
    nghttp2_option_del(g.h2opt);
    sg_fm_log_free();
    sg_fm_keys_reset();
}

int sg_fm_serve(const sg_fm_options *o) {
    memset(&g, 0, sizeof(g));
    g.o = o;
    g.epfd = -1;
    g.sig.fd = -1;
    sg_fm_timer_init(&g.accept_timer, accept_resume);
    /* Blocked first: a SIGTERM during start-up waits for the signalfd and
     * still ends in a clean shutdown. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    if (sg_fm_log_init(o->log_cap, o->log_file) != 0) {
        fprintf(stderr, "sg-fakemodel: cannot set up the log%s%s\n",
                o->log_file ? " file " : "", o->log_file ? o->log_file : "");
        return 1;
    }
    if (h2_init_callbacks() != 0) {
        fprintf(stderr, "sg-fakemodel: nghttp2 setup failed\n");
        shutdown_all();
        return 1;
    }
    if (o->tls) {
        g.ssl_ctx = sg_fm_tls_new(&o->tls_opts);
        if (g.ssl_ctx == NULL) {
            shutdown_all();
            return 1;
        }
    }
    g.epfd = epoll_create1(EPOLL_CLOEXEC);
    int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (g.epfd < 0 || sfd < 0 || add_ep(&g.sig, TAG_SIGNAL, sfd) != 0) {
        fprintf(stderr, "sg-fakemodel: epoll/signalfd: %s\n", strerror(errno));
        if (sfd >= 0 && g.sig.fd < 0) {
            close(sfd);
        }
        shutdown_all();
        return 1;
    }
    int fd4 = listen_on(AF_INET, o->port);
    if (fd4 < 0) {
        fprintf(stderr, "sg-fakemodel: cannot listen on 127.0.0.1:%d: %s\n", o->port,
                strerror(errno));
        shutdown_all();
        return 1;
    }
    add_ep(&g.listeners[g.nlisteners++], TAG_LISTENER, fd4);
    int port = bound_port(fd4);
    if (o->ipv6) {
        int fd6 = listen_on(AF_INET6, port);
        if (fd6 < 0) {
            fprintf(stderr, "sg-fakemodel: cannot listen on [::1]:%d: %s\n", port,
                    strerror(errno));
            shutdown_all();
            return 1;
        }
        add_ep(&g.listeners[g.nlisteners++], TAG_LISTENER, fd6);
    }
    /* The contract with scripts: the first stdout line is the port alone. */
    printf("%d\n", port);
    fflush(stdout);
    if (!o->quiet) {
        fprintf(stderr,
                "sg-fakemodel %s: listening on 127.0.0.1:%d%s (http/1.1, h2c%s%s)\n",
                SG_FM_VERSION, port, o->ipv6 ? " and [::1]" : "", o->tls ? ", TLS" : "",
                o->tls ? (o->no_h2 ? " http/1.1" : " h2+http/1.1") : "");
    }
    struct epoll_event evs[256];
    while (!g.stop) {
        int n = epoll_wait(g.epfd, evs, 256, next_timeout_ms());
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "sg-fakemodel: epoll_wait: %s\n", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            ep_item *it = evs[i].data.ptr;
            switch (it->tag) {
            case TAG_LISTENER:
                on_accept(it);
                break;
            case TAG_SIGNAL: {
                struct signalfd_siginfo si;
                while (read(g.sig.fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    g.stop = 1;
                }
                break;
            }
            case TAG_CONN: {
                conn *c = (conn *)it;
                if (!c->dead) {
                    on_conn_event(c, evs[i].events);
                }
                break;
            }
            default:
                break;
            }
        }
        run_timers();
        free_dead();
    }
    if (!o->quiet) {
        fprintf(stderr, "sg-fakemodel: shutting down (%zu connections open)\n",
                g.n_conns);
    }
    shutdown_all();
    return 0;
}
