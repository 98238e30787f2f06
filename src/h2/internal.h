/* Private state shared by the HTTP/2 transport's translation units. */
#ifndef SG_H2_INTERNAL_H
#define SG_H2_INTERNAL_H

#include <streamguard/h2.h>

#include "transport/dheap.h"
#include "transport/lifecycle.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

struct sg_h2_op {
    sg__lifecycle lc; /* the operation: policy, body, attempt state */
    sg_h2_conn *conn;
    sg_h2_op *prev, *next; /* the connection's list of operations */
    sg_h2_op *done_next;   /* the connection's queue of decided attempts */
    sg__dheap_node node;   /* in the connection's deadline heap */
    bool queued;           /* in the decided queue */
    sg_h2_callbacks cbs;
    void *user_data;

    /* the request, copied into one block at start */
    void *block;
    nghttp2_nv *nva; /* fixed part: pseudo-headers + caller's headers */
    size_t nfixed;   /* entries of nva filled at start */
    const uint8_t *body;
    size_t body_len;
    char *target; /* scheme://authority/path, for the observer's intent */
    char stamp_names[SG__LC_STAMP_MAX][SG_OP_HEADER_NAME_MAX + 1]; /* lowercased */

    /* the running attempt's stream */
    int32_t stream_id; /* 0: no stream of ours is open on the session */
    size_t body_off;
    size_t header_bytes; /* response header list size, RFC 9113 §6.5.2 */
};

struct sg_h2_conn {
    sg_h2_conn_options opts; /* strings point into the copies below */
    char *host;
    char *server_name;
    char *cafile;
    char *authority; /* default :authority */
    sg_clock clock;
    bool has_clock;

    int fd;
    SSL_CTX *ssl_ctx;
    SSL *ssl;
    BIO *rbio; /* TLS: ciphertext in (memory BIO; we own the socket) */
    BIO *wbio; /* TLS: ciphertext out */
    nghttp2_session *session;
    nghttp2_session_callbacks *cbs;
    nghttp2_option *h2opt;
    bool usable;     /* may open new streams */
    bool goaway;     /* the peer sent GOAWAY on the current session */
    bool peer_broke; /* the peer broke HTTP/2 on the current session */
    int active;      /* operations with a stream on the current session */

    uint8_t *rbuf; /* read buffers (ciphertext, plaintext), allocated once */
    uint8_t *out;  /* bytes for the socket not written yet */
    size_t out_len;
    size_t out_off;
    size_t out_cap;

    int64_t recv_now;  /* instant of the bytes being handed to nghttp2 */
    bool more_to_read; /* the last read stopped at its budget, not EAGAIN */

    sg_h2_op *ops; /* every operation not freed */
    sg_h2_op *done_head;
    sg_h2_op *done_tail;
    sg__dheap heap; /* every running operation, by next deadline */
    int running;

    char errbuf[SG_H2_ERROR_SIZE];
};

/* op.c: operations on the connection. */
#define SG__H2_OP_OF(l) ((sg_h2_op *)((char *)(l)-offsetof(sg_h2_op, lc)))
int64_t sg__h2_op_deadline(const sg__dheap_node *n);
/* The op's deadline may have moved earlier. */
void sg__h2_reschedule(sg_h2_op *op);
/* Leaves the stream: no more callbacks of this session reach the op. */
void sg__h2_detach_stream(sg_h2_op *op);
/* Decides the running attempt at @now (see sg__lc_decide); a stream still
 * open is reset with @rst_code (< 0: none).  The policy runs later, from
 * sg__h2_process_decided, outside nghttp2's callbacks. */
void sg__h2_decide(sg_h2_op *op, int64_t now, sg_outcome how, int rst_code);
/* Runs the policy and the callbacks of every decided attempt. */
void sg__h2_process_decided(sg_h2_conn *c);
/* Everything due at @now. */
void sg__h2_run_due(sg_h2_conn *c, int64_t now);
/* Frees an op's memory only (it is unlinked already). */
void sg__h2_op_release(sg_h2_op *op);

/* callbacks.c: nghttp2's callbacks into the operations. */
void sg__h2_set_callbacks(nghttp2_session_callbacks *cbs);
/* The body of a request (nghttp2 data provider). */
ssize_t sg__h2_body_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                         size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                         void *user_data);

/* session.c: the session on the connection. */
char *sg__h2_strdup(const char *s); /* NULL for NULL or out of memory */
int sg__h2_session_open(sg_h2_conn *c);
/* Needs a session that may open streams: reconnects when the old one is
 * lost, or has drained after a GOAWAY.  Blocking, at most @timeout_ns. */
int sg__h2_ensure_session(sg_h2_conn *c, int64_t timeout_ns, sg_outcome *fail);

/* io.c: the socket and TLS under a session. */
/* Races non-blocking connects over @n addresses in order (Happy Eyeballs,
 * RFC 8305 §5): the next starts 250 ms after the last, or at once when an
 * attempt fails; the first to connect wins, the rest are closed.  0 and
 * *@fd_out, or SG_ETIMEDOUT at @deadline, or SG_ECONNECT when every
 * address failed (*@last_err: the last errno). */
int sg__h2_race(const struct sockaddr *const *addrs, const socklen_t *lens, size_t n,
                int64_t deadline, int *fd_out, int *last_err);
int64_t sg__h2_now(const sg_h2_conn *conn);
int sg__h2_connect(sg_h2_conn *conn, int64_t timeout_ns);
void sg__h2_close_transport(sg_h2_conn *conn);
/* Reads until the socket would block or the per-step budget is spent
 * (then more_to_read is set), handing plaintext to @deliver.
 * Returns 0, or -1 when the connection is gone (errbuf says why). */
int sg__h2_read(sg_h2_conn *conn, int (*deliver)(sg_h2_conn *, const uint8_t *, size_t));
/* Writes what nghttp2 and TLS have queued until the socket would block.
 * Returns 0, or -1 when the connection is gone. */
int sg__h2_flush(sg_h2_conn *conn);
bool sg__h2_want_write(const sg_h2_conn *conn);

#endif
