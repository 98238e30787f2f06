/* Private state shared by the HTTP/2 transport's translation units. */
#ifndef SG_H2_INTERNAL_H
#define SG_H2_INTERNAL_H

#include <streamguard/h2.h>
#include <streamguard/ledger.h>

#include "core/dheap.h"

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

enum sg__h2_op_state {
    SG__H2_NEW = 0,  /* created, not started */
    SG__H2_RUNNING,  /* an attempt's stream is submitted or open */
    SG__H2_DRAINING, /* terminal seen: decided ok, waiting for END_STREAM */
    SG__H2_ENDING,   /* attempt decided inside a callback; the loop reports it */
    SG__H2_SLEEPING, /* backoff before the next attempt */
    SG__H2_DONE,
};

struct sg_h2_op {
    sg_h2_conn *conn;
    sg_h2_op *prev, *next; /* the connection's list of operations */
    sg_h2_op *done_next;   /* the connection's queue of decided attempts */
    sg__dheap_node node;   /* in the connection's deadline heap */
    bool queued;           /* in the decided queue */
    bool cancel;           /* sg_h2_op_cancel was called */
    bool ended_by_cancel;
    int state;

    sg_op_options popts;
    sg_op policy;
    sg_stream stream; /* the body: framing + the attempt's guard */
    sg_h2_callbacks cbs;
    void *user_data;

    /* the request, copied into one block at start */
    void *block;
    nghttp2_nv *nva; /* fixed part: pseudo-headers + caller's headers */
    size_t nfixed;   /* entries of nva filled at start */
    const uint8_t *body;
    size_t body_len;
    int64_t drain_ns;
    bool deadline_header;
    bool grpc_timeout;
    char dl_name[SG_OP_HEADER_NAME_MAX + 1]; /* lowercased policy header name */
    char dl_value[SG_DEADLINE_VALUE_MAX];
    char grpc_value[SG_DEADLINE_VALUE_MAX];

    /* the running attempt */
    uint32_t attempt;
    int32_t stream_id; /* 0: no stream of ours is open on the session */
    size_t body_off;
    int http_status;
    bool headers_sent;   /* our HEADERS frame went out */
    bool headers_done;   /* a final (non-1xx) response header block ended */
    bool body_is_stream; /* 2xx: the body is parsed into items */
    bool not_processed;  /* REFUSED_STREAM / above GOAWAY / never sent */
    size_t header_bytes; /* response header list size, RFC 9113 §6.5.2 */
    int64_t drain_until;
    int64_t wake_at;
    sg_guard_result gr; /* the decided attempt's result (ENDING) */
    char retry_after[64];
    size_t retry_after_len;
    void *parser_buf;
    char errbuf[SG_H2_ERROR_SIZE];

    struct sg_ledger *ledger; /* borrowed; NULL when none */
    char *ledger_key;         /* copied */
    bool intent_recorded;
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
    bool usable; /* may open new streams */
    bool goaway; /* the peer sent GOAWAY on the current session */
    int active;  /* operations with a stream on the current session */

    uint8_t *out; /* bytes for the socket not written yet */
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

/* io.c: the socket and TLS under a session. */
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
