/* Private state shared by the HTTP/2 transport's translation units. */
#ifndef SG_H2_INTERNAL_H
#define SG_H2_INTERNAL_H

#include <streamguard/h2.h>

#include "framing/internal.h"
#include "transport/dheap.h"
#include "transport/lifecycle.h"
#include "transport/watch.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

typedef struct sg__h2_link sg__h2_link;

/* sg_h2_conn_options (options.c); a connection keeps a resolved copy
 * whose strings point into its own copies. */
struct sg_h2_conn_options {
    char *host;
    int port;
    bool tls;
    char *cafile;
    bool insecure;
    char *server_name;
    int64_t connect_timeout; /* 0 = default */
    uint32_t stream_window;  /* 0 = default */
    uint32_t conn_window;    /* 0 = default */
    uint32_t max_header_list;
    sg_clock clock;
    bool has_clock;
    char *errbuf; /* borrowed */
    bool connect_on_demand;
    char *dns_servers;
};

/* An operation's callbacks (from its sg_h2_request). */
typedef struct sg__h2_cbs {
    sg_h2_item_cb on_item;
    sg_h2_discard_cb on_discard;
    sg_h2_attempt_cb on_attempt;
    sg_h2_done_cb on_done;
    sg_h2_bytes_cb on_bytes;
} sg__h2_cbs;

/* One request header, owned. */
typedef struct sg__h2_field {
    char *name;
    char *value;
} sg__h2_field;

/* sg_h2_request (options.c): every string its own. */
struct sg_h2_request {
    sg_stream_config framing; /* its strings in framing_block */
    void *framing_block;
    char *method;
    char *path;
    char *authority;
    sg__h2_field *headers;
    size_t nheaders, cap;
    void *body;
    size_t body_len;
    bool deadline_header;
    bool grpc_timeout;
    int64_t drain_ns;
    sg__h2_cbs cbs;
    uint64_t version; /* new at every setter: which copy a connection may share */
};

/* A new request version, never given before (process-wide). */
uint64_t sg__h2_request_version(void);

/* The request as a connection sends it: copied once, in one block, from
 * one version of an sg_h2_request (and the method the policy sends), and
 * shared by every operation made from that version on the connection, and
 * by their hedge slots; freed with the last of them. */
typedef struct sg__h2_req {
    size_t refs;
    uint64_t version;
    sg_h2_conn *conn; /* whose req_cache may point here */
    nghttp2_nv *nva;  /* pseudo-headers + caller's, then room for the stamp */
    size_t nfixed;    /* entries filled; SG__LC_STAMP_MAX more are room */
    const uint8_t *body;
    size_t body_len;
    char *target;             /* scheme://authority/path, for the observer */
    sg_stream_config framing; /* its strings in framing_block */
    void *framing_block;
    sg__h2_cbs cbs;
    int64_t drain_ns;
    bool deadline_header;
    bool grpc_timeout;
    sg__lc_key key; /* endpoint health's key of its target and credential */
    /* the policy's options as the operations made from this copy start
     * them (the caller's with the connection's retry budget and health,
     * this method and target), frozen: made from one version of one
     * sg_op_options (opts_version; 0 for none) under the connection's
     * retry budget and health then, the last one asked for */
    const sg_op_options *opts;
    uint64_t opts_version;
    const sg_retry_budget *opts_budget;
    const sg_health *opts_health;
} sg__h2_req;

struct sg_h2_op {
    sg__lifecycle lc;      /* the operation: policy, body, attempt state */
    sg_h2_op *prev, *next; /* the connection's list of operations */
    sg_h2_op *done_next;   /* the connection's queue of decided attempts */
    sg_h2_op *ended_next;  /* the queue of on_done calls held while in_recv */
    sg__dheap_node node;   /* in the connection's deadline heap */
    void *user_data;
    /* the request, shared (one reference of it is ours); its conn is the
     * operation's connection (SG__H2_CONN_OF).  Hedging: a hedge slot's
     * lifecycle has its operation's as primary (its root: root_of in
     * op.c); it shares the request and runs attempts on the root's policy
     * as streams of its own; the root's lifecycle keeps its slots */
    sg__h2_req *req;

    /* the running attempt */
    sg__h2_link *link; /* the link its stream is on, or that it waits for */
    size_t body_off;
    size_t header_bytes; /* response header list size, RFC 9113 §6.5.2 */
    int32_t stream_id;   /* 0: no stream of ours is open on the session */
    bool waiting;        /* launched while the link was still connecting */
    bool end_stream;     /* the response's END_STREAM arrived */
    bool queued;         /* in the decided queue */
    /* when it is submitted it stamps the library's headers
     * (sg__lc_stamp_lib), then the first stamp_obs of the lifecycle's
     * obs_headers (the observers', lowercase already) */
    uint8_t stamp_obs;
};

/* Addresses to connect to, at most this many. */
#define SG__H2_MAX_RACE 8

/* A non-blocking connect race over addresses (Happy Eyeballs, RFC 8305
 * §5): the next address starts 250 ms after the last, or at once when an
 * attempt fails; the first to connect wins, the rest are closed. */
typedef struct sg__h2_racer {
    struct sockaddr_storage addr[SG__H2_MAX_RACE];
    socklen_t len[SG__H2_MAX_RACE];
    size_t n, next;          /* addresses; the next one to try */
    int fd[SG__H2_MAX_RACE]; /* attempts in flight */
    size_t nfd;
    int64_t next_start; /* when the next address starts */
    int last_err;       /* errno of the last failed attempt */
    int epfd;           /* sockets are watched here (-1: none) */
} sg__h2_racer;

/* The states of a link: one TCP connection and its session. */
enum sg__h2_link_state {
    SG__H2L_RESOLVING = 0, /* DNS (c-ares), non-blocking */
    SG__H2L_CONNECTING,    /* the connect race */
    SG__H2L_HANDSHAKING,   /* TLS */
    SG__H2L_READY,         /* the session runs */
    SG__H2L_CLOSED,        /* failed or lost; freed once nothing refers to it */
};

/* Room for the sockets c-ares uses at once (ARES_GETSOCK_MAXNUM). */
#define SG__H2_ARES_FDS 16

struct sg__h2_link {
    sg_h2_conn *conn;
    sg__h2_link *next; /* the connection's links, newest first */
    int state;
    int64_t connect_deadline; /* until READY: the connect timeout's end */
    int fail_rv;              /* CLOSED before READY: why (SG_E*) */
    bool started;             /* RESOLVING: the lookup was started */

    void *ares; /* RESOLVING: the c-ares channel (ares_channel) */
    int ares_fd[SG__H2_ARES_FDS];
    size_t nares;
    bool resolved;
    sg__h2_racer race; /* CONNECTING */

    int fd;             /* the connected socket, -1 before and after */
    uint32_t fd_events; /* what epoll watches on it */
    SSL *ssl;
    BIO *rbio; /* TLS: ciphertext in (memory BIO; we own the socket) */
    BIO *wbio; /* TLS: ciphertext out */
    nghttp2_session *session;
    bool usable;     /* may open new streams */
    bool goaway;     /* the peer sent GOAWAY */
    bool peer_broke; /* the peer broke HTTP/2 */
    int active;      /* operations with a stream on the session */
    int waiting;     /* operations waiting for the link to be READY */

    uint8_t *out; /* bytes for the socket not written yet */
    size_t out_len;
    size_t out_off;
    size_t out_cap;
    int64_t recv_now;  /* instant of the bytes being handed to nghttp2 */
    bool more_to_read; /* the last read stopped at its budget, not EAGAIN */

    char errbuf[SG_H2_ERROR_SIZE];
};

/* Readiness reported by epoll in one step, at most. */
#define SG__H2_MAX_EVENTS 32
/* c->nev when the step did not ask epoll (one READY link): try it. */
#define SG__H2_ALL_READY (-1)

struct sg_h2_conn {
    sg_h2_conn_options opts; /* strings point into the copies below */
    char *host;
    char *server_name;
    char *cafile;
    char *dns_servers;
    char *authority; /* default :authority */
    sg_clock clock;
    bool has_clock;
    sg_retry_budget *retry_budget; /* for operations without their own */
    sg__health_slot health;        /* for operations without their own */

    int epfd;          /* every socket of every link: the fd the caller polls */
    int in_recv;       /* inside nghttp2_session_mem_recv (its callbacks) */
    sg__watch intents; /* operations waiting for their intent (in epfd) */
    SSL_CTX *ssl_ctx;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *h2opt;
    sg__h2_link *links; /* newest first */
    sg__h2_link *cur;   /* where new streams go (NULL: make a link) */
    uint8_t *rbuf;      /* read buffer (TLS: then the plaintext's), see io.c */
    size_t rbuf_size;   /* bytes a recv() may fill in rbuf (0: none yet) */
    int rbuf_quiet;     /* reads in a row that found little to read */
    struct epoll_event ev[SG__H2_MAX_EVENTS]; /* this step's readiness */
    int nev;                                  /* entries of ev, or SG__H2_ALL_READY */

    sg__h2_req *req_cache; /* the request copy made last, while in use */
    sg_h2_op *ops;         /* every operation not freed */
    sg_h2_op *done_head;
    sg_h2_op *done_tail;
    sg_h2_op *ended_head; /* ops ended inside nghttp2: on_done after it */
    sg_h2_op *ended_tail;
    sg__dheap heap; /* every running operation, by next deadline */
    int running;

    int fail_rv; /* why a connection was last refused (SG_E*), 0 never */
    char errbuf[SG_H2_ERROR_SIZE];
};

/* op.c: operations on the connection. */
#define SG__H2_OP_OF(l) ((sg_h2_op *)((char *)(l)-offsetof(sg_h2_op, lc)))
/* The connection of operation @op (its request copy's: one per connection;
 * kept there, not in each of thousands of operations). */
#define SG__H2_CONN_OF(op) ((op)->req->conn)
int64_t sg__h2_op_deadline(const sg__dheap_node *n);
/* The op's deadline may have moved earlier. */
void sg__h2_reschedule(sg_h2_op *op);
/* Leaves the link: no more callbacks of its session reach the op. */
void sg__h2_detach_stream(sg_h2_op *op);
/* Decides the running attempt at @now (see sg__lc_decide); a stream still
 * open is reset with @rst_code (< 0: none).  The policy runs later, from
 * sg__h2_process_decided, outside nghttp2's callbacks. */
void sg__h2_decide(sg_h2_op *op, int64_t now, sg_outcome how, int rst_code);
/* Sends the request of an op that waited for its link, now READY. */
void sg__h2_submit_waiting(sg_h2_op *op, int64_t now);
/* Whether READY link @l may open one more stream under the server's
 * MAX_CONCURRENT_STREAMS (nghttp2's view of it). */
bool sg__h2_link_has_room(const sg__h2_link *l);
/* Runs the policy and the callbacks of every decided attempt. */
void sg__h2_process_decided(sg_h2_conn *c);
/* The on_done calls held while inside nghttp2 (in_recv), now. */
void sg__h2_run_ended(sg_h2_conn *c);
/* Every operation whose intent's answer is in: its first attempt goes, or it
 * ends. */
void sg__h2_run_intents(sg_h2_conn *c, int64_t now);
/* Everything due at @now. */
void sg__h2_run_due(sg_h2_conn *c, int64_t now);
/* Frees an op's memory only (it is unlinked already). */
void sg__h2_op_release(sg_h2_op *op);

/* callbacks.c: nghttp2's callbacks into the operations (user_data: the
 * link). */
void sg__h2_set_callbacks(nghttp2_session_callbacks *cbs);
/* The body of a request (nghttp2 data provider). */
ssize_t sg__h2_body_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                         size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                         void *user_data);

/* link.c: the links under the connection. */
char *sg__h2_strdup(const char *s); /* NULL for NULL or out of memory */
/* The link new streams go on: the current one when it is READY and usable
 * or still connecting, else a new one (the old one, if streams still run
 * on it after a GOAWAY, drains beside it).  NULL when out of memory (then
 * c->errbuf says so). */
sg__h2_link *sg__h2_link_for_streams(sg_h2_conn *c, int64_t now);
/* Moves every link on at @now: DNS, connect, handshake, and with @read
 * the reads (using this step's readiness in c->ev). */
void sg__h2_links_step(sg_h2_conn *c, int64_t now, bool read);
/* Writes what every READY link has queued; ends links whose session is
 * over; frees closed links nothing refers to; updates what epoll watches. */
void sg__h2_links_flush(sg_h2_conn *c);
/* The earliest instant a link must be stepped (SG_TIME_NEVER: none). */
int64_t sg__h2_links_deadline(const sg_h2_conn *c, int64_t now);
/* Whether a link stopped reading at its per-step budget. */
bool sg__h2_links_more_to_read(const sg_h2_conn *c);
void sg__h2_link_free(sg__h2_link *l);

/* io.c: the socket and TLS under a link. */
int64_t sg__h2_now(const sg_h2_conn *conn);
void sg__h2_racer_init(sg__h2_racer *r, const struct sockaddr *const *addrs,
                       const socklen_t *lens, size_t n, int64_t now, int epfd);
/* Moves the race on at @now: starts what is due, collects what finished.
 * Returns 0 with the connected socket in *@fd_out (the race holds nothing
 * more), 1 while it runs (*@next: when to call again at the latest), or
 * SG_ECONNECT when every address failed (r->last_err: the last errno). */
int sg__h2_racer_step(sg__h2_racer *r, int64_t now, int *fd_out, int64_t *next);
void sg__h2_racer_close(sg__h2_racer *r);
/* The race, blocking until @deadline (real time): 0 and *@fd_out, or
 * SG_ETIMEDOUT, or SG_ECONNECT (*@last_err: the last errno). */
int sg__h2_race(const struct sockaddr *const *addrs, const socklen_t *lens, size_t n,
                int64_t deadline, int *fd_out, int *last_err);
/* Orders resolved addresses for the race (RFC 8305 §4: the resolver's
 * first family, then alternating).  Returns how many of @n went to @out. */
size_t sg__h2_order_addresses(const struct sockaddr *const *in, const socklen_t *in_len,
                              size_t n, const struct sockaddr **out, socklen_t *out_len,
                              size_t max);
/* TLS on the connected socket: setup, then one non-blocking step of the
 * handshake.  0 when done (ALPN h2 checked), 1 while it runs, or a
 * negative code (l->errbuf says why). */
int sg__h2_tls_setup(sg__h2_link *l);
int sg__h2_tls_step(sg__h2_link *l);
void sg__h2_close_transport(sg__h2_link *l);
/* Reads until the socket would block or the per-step budget is spent
 * (then more_to_read is set), handing plaintext to @deliver.
 * Returns 0, or -1 when the connection is gone (errbuf says why). */
int sg__h2_read(sg__h2_link *l, int (*deliver)(sg__h2_link *, const uint8_t *, size_t));
/* Writes what nghttp2 and TLS have queued until the socket would block.
 * Returns 0, or -1 when the connection is gone. */
int sg__h2_flush(sg__h2_link *l);
bool sg__h2_want_write(const sg__h2_link *l);

#endif
