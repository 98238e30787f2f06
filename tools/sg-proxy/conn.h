/*
 * conn.h - one client connection, shared by conn.c (the client: its
 * request, its answer's bytes, its limits) and upstream.c (its operation:
 * the upstream request, the commit at the first token, the bytes passed
 * on, the end).
 */
#ifndef SG_PROXY_CONN_H
#define SG_PROXY_CONN_H

#include "proxy.h"
#include "relay.h"
#include "request.h"

enum {
    C_HEAD,      /* reading the request head */
    C_BODY,      /* reading the request body */
    C_UPSTREAM,  /* the operation runs; nothing answered yet */
    C_STREAMING, /* committed: the stream goes through */
    C_CLOSING,   /* the answer is whole: flush, then close */
};

/* One attempt's bytes before the commit. */
struct pending {
    uint32_t attempt; /* 0: free */
    char *p;
    size_t n, cap;
};

struct conn {
    /* every open connection (proxy.conns), both ways: one leaves in O(1),
     * not after a walk of the thousands still open */
    struct conn *next;
    struct conn *prev;
    struct proxy *proxy;
    const struct route *route; /* the request's, once routed */
    struct routes *set;        /* the set it belongs to (counted) */
    int fd;
    int state;
    uint64_t id;
    char peer[64];
    int64_t header_deadline;
    /* what the client has taken of what was sent (sent less the socket's
     * unsent bytes, SIOCOUTQ) at the last look; sent counts every byte
     * handed to the kernel */
    uint64_t sent, taken_seen;
    /* the request as it is read (its route, once routed, is @route): NULL
     * once it is whole and answered or started - its parsed head is 2 KiB
     * of views (SG_FM_H1_MAX_HEADERS) a stream has no use for - with its
     * bytes kept in @in (the body goes upstream from there, in place, on
     * every attempt) */
    struct preq *rq;
    char *in;
    int64_t arrived; /* the head was whole */
    /* the operation */
    CURL *easy;
    sg_curl_op *op;
    sg_otel_trace *trace; /* tracing: the operation's spans (trace.c) */
    struct curl_slist *headers;
    char *url;
    char *body; /* the request body as it goes upstream, when not as read */
    /* the body as it goes to the primary (NULL: none), and its top-level
     * "model" literal (fallback.c: model_len 0 when it names none) */
    const char *up_body;
    size_t up_len;
    size_t model_at, model_len;
    /* the attempts' bytes before the commit, 1 + SG_OP_MAX_HEDGES slots
     * allocated at the first (NULL: none held), freed at the commit */
    struct pending *pend;
    /* its upstream connections' set of shards (NULL: the multi's cache)
     * and shard (pool.h) */
    struct pool *pool;
    uint32_t pool_shard;
    /* the operation was ended by a failure of the proxy's own (out of
     * memory, a limit of its own): its status (500, 503) and why */
    int own_status;
    const char *own_what;
    bool committed;
    uint32_t committed_attempt;
    int64_t committed_at;
    /* the committed attempt's framing and profile: its endpoint's (a
     * fallback's own, else the route's), what its bytes are read by */
    const sg_stream_config *up_framing;
    const char *up_profile;
    /* the committed attempt's bytes not yet given to the client: they go
     * out event by event (line by line, message by message) as the
     * library delivers the item each one carries, so that the client gets
     * exactly the items the clocks and caps accepted, and a stream cut
     * inside an event ends on a whole one before the in-band error */
    struct relay relay;
    bool client_gone;
    bool too_slow;
    /* the operation ended (on_done): the client was told, and the rest -
     * the report line, the metrics, the operation's memory, the
     * connection itself - waits in the proxy's finish queue (conns_finish)
     * so that the clocks due beside it are decided and told first */
    bool finishing;
    struct conn *finish_next;
    int64_t ended_at;
    /* answered before its request was read whole (a limit, a timeout):
     * the end is a half-close, reading on (lingering), not a close */
    bool linger, lingering;
    bool request_whole; /* its body read to the end */
    /* the answer cannot end as it must (its in-band error could not be
     * added): the connection ends with a reset, not a clean close */
    bool cut;
    /* the answer: what waits for the client is out's bytes, then the
     * relay's released ones (sent from there, uncopied) */
    char *out;
    size_t out_len, out_off, out_cap;
    bool want_out; /* EPOLLOUT armed */
    /* released bytes wait for the loop's pass to end (conns_flush): one
     * send for every event the pass's reads released */
    bool dirty;
    struct conn *dirty_next;
};

static inline int64_t now_ns(void) {
    return sg_clock_now(NULL);
}

/* conn.c: the client side. */
/* Sets @c's header deadline to @at (the proxy's next walk no later). */
void conn_deadline(struct conn *c, int64_t at);
/* @c has an operation to cancel (its client gone or too slow): the
 * proxy's next pass walks the connections. */
void conn_wake(struct conn *c);
/* Whether the client took any of what was sent since the last look (the
 * bytes sent less the socket's unsent ones, SIOCOUTQ); the look is kept. */
bool client_took(struct conn *c);
/* Writes what waits for the client (never blocks). */
void flush_out(struct conn *c);
/* The bytes that wait for the client: out's and the relay's released. */
size_t client_waiting(const struct conn *c);
/* @c has released bytes: they go at the end of the loop's pass. */
void conn_dirty(struct conn *c);
/* Appends @n bytes for the client (after the relay's released ones):
 * false when the client has fallen more than twice client_buffer behind
 * (or memory ran out). */
bool put(struct conn *c, const void *p, size_t n);
void put_str(struct conn *c, const char *s);
/* A whole answer (status, extra header lines, a JSON body), then close. */
void reply(struct conn *c, int status, const char *reason, const char *extra,
           const char *body);
/* The same with any body: @len bytes of type @ctype (one header value). */
void reply_bytes(struct conn *c, int status, const char *reason, const char *extra,
                 const char *ctype, const char *body, size_t len);
/* An error of the proxy's: a 4xx the request's, a 5xx the proxy's own
 * (in the route's provider's format, of its type for a server failure). */
void reply_error(struct conn *c, int status, const char *what);
void free_op(struct conn *c);
/* Frees what every attempt held before the commit, and the slots. */
void pending_release(struct conn *c);
void conn_free(struct conn *c);
/* @c's operation ended (on_done, its client told): the rest of its end
 * joins the proxy's finish queue (conns_finish). */
void conn_finish_later(struct conn *c);

/* fallback.c: each fallback's own headers and model (docs/sg-proxy.md,
 * "FALLBACKS"). */
/* Reads @c's body as it goes to the primary (@body NULL: none): its
 * top-level model, for the report.  0, or -1 when the route has a
 * fallback's model to put in and the body is not JSON (answered 400). */
int fallback_read_body(struct conn *c, const char *body, size_t len);
/* Adds the endpoints of @c's route to @o (when it has fallbacks): the
 * primary at @c->url, then each fallback at its URL joined to @target,
 * with its own headers and its model.  0, or a negative code. */
int fallback_endpoints(struct conn *c, sg_curl_options *o, const char *target,
                       size_t target_len);
/* The framing and profile name of attempt @attempt (1-based) of @c's
 * operation: its fallback's own, else the route's (also for no such
 * attempt).  Both valid as long as @c's route. */
void fallback_framing(const struct conn *c, uint32_t attempt,
                      const sg_stream_config **framing, const char **profile);
/* The report line's "models": the model each attempt asked for, in the
 * report's order of attempts (null where the body named none). */
void fallback_models_fwrite(FILE *f, const struct conn *c);
/* The model endpoint @ep (0 the primary, i fallback i) of @c's operation
 * asks for - the report line's, decoded from the body's JSON when it is
 * the client's - into @out, NUL-terminated: its length, or 0 when the
 * body named none or it does not fit @cap - 1 bytes (for tracing). */
size_t fallback_model(const struct conn *c, uint32_t ep, char *out, size_t cap);
/* base + the client's target, or NULL (upstream.c). */
char *url_join(const char *base, size_t base_len, const char *target, size_t tlen);

/* Whether @c's operation still runs: it has one, and its end (on_done)
 * has not come.  An ended one is the finish queue's to free. */
static inline bool op_running(const struct conn *c) {
    return c->op != NULL && !c->finishing;
}

/* upstream.c: the request, read whole, becomes one guarded operation on
 * the proxy's multi (or an error answer: no route, out of memory). */
void start_operation(struct conn *c);
/* pool.c: @c's request goes through the lowest shard with room of
 * @pool (p->pool for an HTTP/1.x route, p->pool_h2 for a TLS route that
 * may multiplex; out of memory, the multi's cache); it leaves after its
 * handle's cleanup. */
void pool_join(struct conn *c, CURL *e, struct pool *pool);
void pool_leave(struct conn *c);
/* What an ended operation leaves to do, after the pass that ended it:
 * its report line and metrics, its memory, and (when nothing waits for
 * the client) the connection. */
void finish_operation(struct conn *c);
/* Whether any attempt of @c's operation sent its request upstream (false
 * without an operation). */
bool upstream_sent(const struct conn *c);

#endif
