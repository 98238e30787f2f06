/*
 * Guarded operations as streams of one HTTP/2 connection.
 *
 * nghttp2 is sans-I/O and has no stream timers of its own: each stream's
 * clocks live in its operation's sg_stream, and the connection keeps its
 * operations in a binary min-heap keyed by their next deadline - the one
 * instant sg_h2_conn_next_deadline reports.  Keys are lazy, as in the curl
 * transport: an item moves an idle deadline later without touching the
 * heap; the key is corrected when the operation reaches the top.  Only a
 * deadline that moves earlier sifts up, O(log n).
 *
 * Decisions taken inside nghttp2 callbacks (a clock refused an item, a
 * stream closed) put the operation on a queue; the policy and the user
 * callbacks that may free things (on_discard, on_attempt, on_done) run
 * from that queue after nghttp2 returned.
 */
#define _GNU_SOURCE
#include "h2/internal.h"
#include "policy/internal.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SG__H2_DEFAULT_CONNECT SG_SEC(10)
#define SG__H2_DEFAULT_STREAM_WINDOW (4u << 20)
#define SG__H2_DEFAULT_CONN_WINDOW (16u << 20)
#define SG__H2_DEFAULT_MAX_HEADER_LIST (64u << 10)
#define SG__H2_DEFAULT_DRAIN SG_MS(200)
/* Request headers we add to the caller's: idempotency-key, the deadline
 * header and grpc-timeout. */
#define SG__H2_EXTRA_HEADERS 3

static void op_queue_decided(sg_h2_op *op);

/* ------------------------------------------------------------------ heap */

static int64_t op_next_deadline(const sg_h2_op *op) {
    switch (op->state) {
    case SG__H2_RUNNING:
        return op->cancel ? INT64_MIN : sg_guard_next_deadline(&op->stream.guard_);
    case SG__H2_DRAINING:
        return op->drain_until;
    case SG__H2_SLEEPING:
        return op->cancel ? INT64_MIN : op->wake_at;
    default:
        return SG_TIME_NEVER;
    }
}

#define OP_OF(n) ((sg_h2_op *)((char *)(n)-offsetof(sg_h2_op, node)))

static int64_t node_deadline(const sg__dheap_node *n) {
    return op_next_deadline(
        (const sg_h2_op *)((const char *)n - offsetof(sg_h2_op, node)));
}

/* The deadline moved: only an earlier one needs the heap (lazy keys). */
static void reschedule(sg_h2_op *op) {
    sg__dheap_reschedule(&op->conn->heap, &op->node);
}

/* The earliest real deadline, correcting stale (too early) keys on top. */
static int64_t heap_top_deadline(sg_h2_conn *c) {
    return sg__dheap_earliest(&c->heap, NULL);
}

/* ----------------------------------------------------- attempt decisions */

static void op_set_error(sg_h2_op *op, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void op_set_error(sg_h2_op *op, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->errbuf, sizeof(op->errbuf), fmt, ap);
    va_end(ap);
}

/* Leaves the stream: no more callbacks of this session reach the op. */
static void detach_stream(sg_h2_op *op) {
    sg_h2_conn *c = op->conn;
    if (op->stream_id > 0) {
        if (c->session != NULL) {
            nghttp2_session_set_stream_user_data(c->session, op->stream_id, NULL);
        }
        op->stream_id = 0;
        c->active--;
    }
}

/*
 * The attempt is decided at @now.  @how is what the transport saw; a first
 * cause latched in the stream (expiry, cap, cancel, framing) wins.  A
 * stream still open is reset with @rst_code (< 0: none).  The policy runs
 * later, from the loop.
 */
static void decide(sg_h2_op *op, int64_t now, sg_outcome how, int rst_code) {
    sg_h2_conn *c = op->conn;
    if (op->stream_id > 0 && rst_code >= 0 && c->session != NULL) {
        nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, op->stream_id,
                                  (uint32_t)rst_code);
    }
    detach_stream(op);
    if (op->state == SG__H2_DRAINING) {
        how = SG_OUTCOME_OK; /* the terminal already decided it */
    }
    if (sg_stream_active(&op->stream)) {
        sg_stream_end(&op->stream, now, how, &op->gr);
    }
    op->state = SG__H2_ENDING;
    op_queue_decided(op);
}

static void op_queue_decided(sg_h2_op *op) {
    sg_h2_conn *c = op->conn;
    if (op->queued) {
        return;
    }
    op->queued = true;
    op->done_next = NULL;
    if (c->done_tail != NULL) {
        c->done_tail->done_next = op;
    } else {
        c->done_head = op;
    }
    c->done_tail = op;
}

/* ------------------------------------------------------ nghttp2 callbacks */

static sg_h2_op *op_of(nghttp2_session *session, int32_t stream_id) {
    return nghttp2_session_get_stream_user_data(session, stream_id);
}

static int on_item(const sg_item *item, void *user_data) {
    sg_h2_op *op = user_data;
    if (op->cbs.on_item != NULL) {
        return op->cbs.on_item(op, item, op->user_data);
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *user_data) {
    (void)flags;
    sg_h2_conn *c = user_data;
    sg_h2_op *op = op_of(session, stream_id);
    if (op == NULL || op->state != SG__H2_RUNNING || !op->body_is_stream) {
        return 0; /* draining after the terminal, or a reset stream's tail */
    }
    int64_t now = c->recv_now;
    int rv = sg_stream_feed(&op->stream, data, len, now);
    if (rv < 0) {
        /* Expired, capped, cancelled by the consumer or badly framed: we
         * no longer want this response, and the server should stop. */
        if (rv != SG_ETIMEDOUT && rv != SG_ECAP && rv != SG_ECANCELED) {
            snprintf(op->errbuf, sizeof(op->errbuf), "%s", sg_strerror(rv));
        }
        decide(op, now, SG_OUTCOME_TRANSPORT_ERROR, NGHTTP2_CANCEL);
        return 0;
    }
    if (rv == 1) {
        op->state = SG__H2_DRAINING;
        op->drain_until = sg_time_add(now, op->drain_ns);
    }
    reschedule(op);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame,
                     const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user_data) {
    (void)flags;
    sg_h2_conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    sg_h2_op *op = op_of(session, frame->hd.stream_id);
    if (op == NULL || op->state != SG__H2_RUNNING) {
        return 0;
    }
    /* RFC 9113 §6.5.2: name + value + 32 per field, over every block. */
    op->header_bytes += namelen + valuelen + 32;
    if (op->header_bytes > c->opts.max_header_list) {
        snprintf(op->errbuf, sizeof(op->errbuf),
                 "response header list exceeds %u bytes (max_header_list)",
                 (unsigned)c->opts.max_header_list);
        decide(op, c->recv_now, SG_OUTCOME_PROTOCOL_ERROR, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    if (frame->headers.cat != NGHTTP2_HCAT_RESPONSE &&
        frame->headers.cat != NGHTTP2_HCAT_HEADERS) {
        return 0;
    }
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        int status = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++) {
            status = isdigit(value[i]) ? status * 10 + (value[i] - '0') : -1000;
        }
        /* RFC 9110 §15: three digits, 100 .. 599; anything else is a
         * malformed response (-1), never a status the policy must judge. */
        op->http_status = valuelen == 3 && status >= 100 && status <= 599 ? status : -1;
        op->retry_after_len = 0;
    } else if (namelen == 11 && memcmp(name, "retry-after", 11) == 0 &&
               valuelen < sizeof(op->retry_after)) {
        memcpy(op->retry_after, value, valuelen);
        op->retry_after_len = valuelen;
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                         void *user_data) {
    sg_h2_conn *c = user_data;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        /* nghttp2 closes the streams above last_stream_id with
         * REFUSED_STREAM (on_stream_close); no new stream may open. */
        c->goaway = true;
        c->usable = false;
        snprintf(c->errbuf, sizeof(c->errbuf),
                 "GOAWAY from the server (%s, last stream %d)",
                 nghttp2_http2_strerror(frame->goaway.error_code),
                 (int)frame->goaway.last_stream_id);
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS ||
        frame->headers.cat != NGHTTP2_HCAT_RESPONSE) {
        return 0;
    }
    sg_h2_op *op = op_of(session, frame->hd.stream_id);
    if (op == NULL || op->state != SG__H2_RUNNING) {
        return 0;
    }
    if (op->http_status >= 100 && op->http_status < 200) {
        return 0; /* interim response; the final one follows */
    }
    if (op->http_status <= 0) {
        op->http_status = 0;
        op_set_error(op, "malformed response: no valid :status");
        decide(op, c->recv_now, SG_OUTCOME_PROTOCOL_ERROR, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    op->headers_done = true;
    int64_t now = c->recv_now;
    sg_guard *g = sg_stream_guard(&op->stream);
    if (sg_guard_phase(g) < SG_PHASE_WAIT_HEADERS) {
        sg_guard_set_phase(g, SG_PHASE_WAIT_HEADERS, now);
    }
    if (op->http_status >= 200 && op->http_status < 300) {
        op->body_is_stream = true;
        sg_guard_set_phase(g, SG_PHASE_WAIT_FIRST_ITEM, now);
        reschedule(op);
        return 0;
    }
    /* The answer is in; an error body is not worth reading. */
    bool ended = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
    decide(op, now, SG_OUTCOME_HTTP_ERROR, ended ? -1 : NGHTTP2_CANCEL);
    return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame,
                         void *user_data) {
    sg_h2_conn *c = user_data;
    if (frame->hd.type == NGHTTP2_GOAWAY && !c->goaway) {
        /* nghttp2 ends the session itself when the server breaks the
         * protocol; say so rather than "closed". */
        snprintf(c->errbuf, sizeof(c->errbuf),
                 "connection lost: HTTP/2 error by the server (GOAWAY %s sent)",
                 nghttp2_http2_strerror(frame->goaway.error_code));
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) {
        return 0;
    }
    sg_h2_op *op = op_of(session, frame->hd.stream_id);
    if (op == NULL || op->state != SG__H2_RUNNING) {
        return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS) {
        op->headers_sent = true;
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        sg_guard *g = sg_stream_guard(&op->stream);
        if (sg_guard_phase(g) < SG_PHASE_WAIT_HEADERS) {
            sg_guard_set_phase(g, SG_PHASE_WAIT_HEADERS, sg__h2_now(c));
        }
    }
    return 0;
}

static int on_frame_not_send(nghttp2_session *session, const nghttp2_frame *frame,
                             int lib_error_code, void *user_data) {
    (void)session;
    sg_h2_conn *c = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    /* The stream never opened (after GOAWAY, or the id space ran out), so
     * nghttp2 holds no user data for it: find the op by id. */
    for (sg_h2_op *op = c->ops; op != NULL; op = op->next) {
        if (op->stream_id == frame->hd.stream_id && op->state == SG__H2_RUNNING) {
            op->not_processed = true;
            op_set_error(op, "stream not opened: %s", nghttp2_strerror(lib_error_code));
            decide(op, sg__h2_now(c), SG_OUTCOME_TRANSPORT_ERROR, -1);
            break;
        }
    }
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id,
                           uint32_t error_code, void *user_data) {
    sg_h2_conn *c = user_data;
    sg_h2_op *op = op_of(session, stream_id);
    if (op == NULL || op->stream_id != stream_id) {
        return 0;
    }
    int64_t now = sg__h2_now(c);
    if (op->state == SG__H2_DRAINING) {
        decide(op, now, SG_OUTCOME_OK, -1);
        return 0;
    }
    if (op->state != SG__H2_RUNNING) {
        detach_stream(op);
        return 0;
    }
    sg_outcome how;
    if (error_code == NGHTTP2_NO_ERROR) {
        how = op->body_is_stream ? SG_OUTCOME_OK
              : op->headers_done ? SG_OUTCOME_HTTP_ERROR
                                 : SG_OUTCOME_TRANSPORT_ERROR;
        if (how == SG_OUTCOME_TRANSPORT_ERROR) {
            op_set_error(op, "%s", "stream ended without a response");
        }
    } else if (error_code == NGHTTP2_REFUSED_STREAM && !op->headers_done) {
        /* RFC 9113 §8.7: the server did no processing - safe to retry. */
        op->not_processed = true;
        how = SG_OUTCOME_TRANSPORT_ERROR;
        op_set_error(op, "%s",
                     c->goaway ? "stream above GOAWAY's last stream id: never processed"
                               : "REFUSED_STREAM: never processed");
    } else {
        how = op->headers_done ? SG_OUTCOME_TRUNCATED : SG_OUTCOME_TRANSPORT_ERROR;
        op_set_error(op, "stream reset by the server: %s",
                     nghttp2_http2_strerror(error_code));
    }
    decide(op, now, how, -1);
    return 0;
}

static ssize_t body_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                         size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                         void *user_data) {
    (void)source;
    (void)user_data;
    /* The op is found through the stream, never through source->ptr: an
     * abandoned attempt's stream is detached (its op may be freed). */
    sg_h2_op *op = op_of(session, stream_id);
    if (op == NULL || op->stream_id != stream_id) {
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    size_t left = op->body_len - op->body_off;
    size_t n = left < length ? left : length;
    memcpy(buf, op->body + op->body_off, n);
    op->body_off += n;
    if (op->body_off == op->body_len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

/* ------------------------------------------------------------- session */

static int session_open(sg_h2_conn *c) {
    if (nghttp2_session_client_new2(&c->session, c->cbs, c, c->h2opt) != 0) {
        c->session = NULL;
        snprintf(c->errbuf, sizeof(c->errbuf), "nghttp2 session setup failed");
        return SG_EH2;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, c->opts.stream_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, c->opts.max_header_list},
    };
    int rv = nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv,
                                     sizeof(iv) / sizeof(iv[0]));
    if (rv == 0) {
        /* The connection window is raised with a WINDOW_UPDATE on stream 0
         * (it has no SETTINGS), so long generations never stall on it. */
        rv = nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0,
                                                   (int32_t)c->opts.conn_window);
    }
    if (rv != 0) {
        nghttp2_session_del(c->session);
        c->session = NULL;
        snprintf(c->errbuf, sizeof(c->errbuf), "nghttp2 setup failed: %s",
                 nghttp2_strerror(rv));
        return SG_EH2;
    }
    c->usable = true;
    c->goaway = false;
    c->active = 0;
    return 0;
}

/* The connection is gone: every attempt with a stream on it ends now, in
 * the phase it reached.  Must not be called from an nghttp2 callback. */
static void conn_lose(sg_h2_conn *c) {
    int64_t now = sg__h2_now(c);
    if (c->errbuf[0] == '\0') {
        snprintf(c->errbuf, sizeof(c->errbuf), "connection lost");
    }
    c->usable = false;
    for (sg_h2_op *op = c->ops; op != NULL; op = op->next) {
        if (op->state != SG__H2_RUNNING && op->state != SG__H2_DRAINING) {
            continue;
        }
        /* A request whose HEADERS never left (queued behind the peer's
         * concurrency limit) was never seen by the server. */
        op->not_processed = !op->headers_sent;
        snprintf(op->errbuf, sizeof(op->errbuf), "%s", c->errbuf);
        decide(op, now,
               op->body_is_stream ? SG_OUTCOME_TRUNCATED : SG_OUTCOME_TRANSPORT_ERROR,
               -1);
    }
    if (c->session != NULL) {
        nghttp2_session_del(c->session);
        c->session = NULL;
    }
    c->active = 0;
    sg__h2_close_transport(c);
}

/* ------------------------------------------------------------ attempts */

static int64_t conn_now(const sg_h2_conn *c) {
    return sg__h2_now(c);
}

static void lowercase(char *s) {
    for (; *s != '\0'; s++) {
        *s = (char)tolower((unsigned char)*s);
    }
}

static nghttp2_nv make_nv(const char *name, const char *value) {
    nghttp2_nv nv;
    nv.name = (uint8_t *)(uintptr_t)name;
    nv.value = (uint8_t *)(uintptr_t)value;
    nv.namelen = strlen(name);
    nv.valuelen = strlen(value);
    nv.flags = NGHTTP2_NV_FLAG_NONE;
    return nv;
}

/* The operation ended: leave the heap, then tell the consumer.  After this
 * returns the op may have been freed by on_done. */
static void op_end(sg_h2_op *op) {
    sg_h2_conn *c = op->conn;
    op->state = SG__H2_DONE;
    if (op->intent_recorded) {
        /* never changes the outcome; kept as the op's message when free */
        int rv = sg_ledger_op_resolve(op->ledger, op->ledger_key, &op->policy);
        if (rv != 0 && op->errbuf[0] == '\0') {
            snprintf(op->errbuf, sizeof(op->errbuf), "ledger resolve: %s",
                     sg_strerror(rv));
        }
        op->intent_recorded = false;
    }
    if (op->node.in_heap) {
        sg__dheap_remove(&c->heap, &op->node);
        c->running--;
    }
    if (op->cbs.on_done != NULL) {
        op->cbs.on_done(op, op->user_data);
    }
}

/* Needs a session that may open streams: reconnect when the old one is
 * lost, or has drained after a GOAWAY.  Blocking, at most @timeout_ns. */
static int ensure_session(sg_h2_conn *c, int64_t timeout_ns, sg_outcome *fail) {
    if (c->usable && c->session != NULL) {
        return 0;
    }
    *fail = SG_OUTCOME_TRANSPORT_ERROR;
    if (c->session != NULL && c->active > 0) {
        /* GOAWAY: the old streams still run on the old session. */
        return SG_ESTATE;
    }
    if (c->session != NULL) {
        nghttp2_session_del(c->session);
        c->session = NULL;
    }
    sg__h2_close_transport(c);
    int rv = sg__h2_connect(c, timeout_ns);
    if (rv == SG_ETIMEDOUT) {
        *fail = SG_OUTCOME_CONNECT_TIMEOUT;
    }
    if (rv == 0) {
        rv = session_open(c);
        if (rv != 0) {
            sg__h2_close_transport(c);
        }
    }
    return rv;
}

/* Lease and submit the next attempt.  Leaves the op RUNNING, or ENDING
 * (the attempt failed at once: queued for the loop), or DONE (nothing
 * could be leased; on_done has run and the op may be gone). */
static void begin_attempt(sg_h2_op *op, int64_t now) {
    sg_h2_conn *c = op->conn;
    sg_op_plan plan;
    if (sg_op_next_attempt(&op->policy, now, &plan) != 0) {
        op_end(op);
        return;
    }
    sg_stream_begin(&op->stream, &plan.guard_config, sg_op_budget(&op->policy),
                    plan.attempt, now);
    op->attempt = plan.attempt;
    op->stream_id = 0;
    op->body_off = 0;
    op->http_status = 0;
    op->headers_sent = false;
    op->headers_done = false;
    op->body_is_stream = false;
    op->not_processed = false;
    op->header_bytes = 0;
    op->retry_after_len = 0;
    op->errbuf[0] = '\0';
    op->state = SG__H2_RUNNING;

    sg_outcome fail = SG_OUTCOME_TRANSPORT_ERROR;
    int64_t ct = c->opts.connect_timeout;
    int64_t lease_ct = sg_guard_config_connect(&plan.guard_config);
    if (lease_ct > 0 && lease_ct < ct) {
        ct = lease_ct;
    }
    if (plan.attempt_ns < ct) {
        ct = plan.attempt_ns;
    }
    bool had_session = c->usable && c->session != NULL;
    int rv = ensure_session(c, ct, &fail);
    if (!had_session) {
        now = conn_now(c); /* connecting took real time */
    }
    if (rv != 0) {
        op->not_processed = true;
        snprintf(op->errbuf, sizeof(op->errbuf), "%s",
                 rv == SG_ESTATE ? "connection draining after GOAWAY" : c->errbuf);
        decide(op, now, fail, -1);
        return;
    }
    sg_guard_set_phase(sg_stream_guard(&op->stream), SG_PHASE_SEND, now);

    nghttp2_nv *nva = op->nva;
    size_t n = op->nfixed;
    const char *key = sg_op_idempotency_key(&op->policy);
    if (key != NULL) {
        nva[n++] = make_nv("idempotency-key", key);
    }
    if (op->deadline_header) {
        snprintf(op->dl_value, sizeof(op->dl_value), "%lld", (long long)plan.deadline_ms);
        snprintf(op->dl_name, sizeof(op->dl_name), "%s", plan.deadline_header);
        lowercase(op->dl_name);
        nva[n++] = make_nv(op->dl_name, op->dl_value);
    }
    if (op->grpc_timeout && sg_grpc_timeout_format(plan.attempt_ns, op->grpc_value,
                                                   sizeof(op->grpc_value)) > 0) {
        nva[n++] = make_nv("grpc-timeout", op->grpc_value);
    }
    nghttp2_data_provider prd;
    prd.source.ptr = NULL;
    prd.read_callback = body_read;
    int32_t id = nghttp2_submit_request(c->session, NULL, nva, n,
                                        op->body_len > 0 ? &prd : NULL, op);
    if (id < 0) {
        op->not_processed = true;
        op_set_error(op, "cannot submit the request: %s", nghttp2_strerror(id));
        if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
            c->usable = false; /* ids exhausted: the next attempt reconnects */
        }
        decide(op, now, SG_OUTCOME_TRANSPORT_ERROR, -1);
        return;
    }
    op->stream_id = id;
    c->active++;
    reschedule(op);
}

/* Hand the decided attempt to the policy.  Leaves the op SLEEPING or DONE
 * (on_done not called yet). */
static void end_attempt(sg_h2_op *op, int64_t now) {
    const sg_guard_result *gr = &op->gr;
    sg_op_result r;
    sg_op_verdict v;
    sg_op_result_from_guard(&r, gr);
    r.sent = op->headers_sent;
    r.headers_received = op->headers_done;
    r.http_status = op->headers_done ? op->http_status : 0;
    if (op->not_processed) {
        /* Never processed by the server: report it as not sent, whatever
         * the phase our side reached, so the policy may retry it. */
        r.sent = false;
        if (r.phase > SG_PHASE_SEND) {
            r.phase = SG_PHASE_SEND;
        }
    }
    if (op->retry_after_len > 0 && op->headers_done) {
        r.retry_after = op->retry_after;
        r.retry_after_len = op->retry_after_len;
        r.wall_now_s = (int64_t)time(NULL);
    }
    if (gr->outcome == SG_OUTCOME_OK || gr->outcome == SG_OUTCOME_HTTP_ERROR) {
        if (gr->outcome == SG_OUTCOME_OK) {
            op->errbuf[0] = '\0';
        }
    } else if (op->errbuf[0] == '\0') {
        snprintf(op->errbuf, sizeof(op->errbuf), "%s", sg_outcome_name(gr->outcome));
    }
    if (sg_op_attempt_done(&op->policy, now, &r, &v) != 0) {
        /* Cannot happen with the checks above; still, the policy must
         * record an end, so hand it a result it always accepts. */
        r.http_status = 0;
        r.retry_after = NULL;
        r.outcome = SG_OUTCOME_PROTOCOL_ERROR;
        if (sg_op_attempt_done(&op->policy, now, &r, &v) != 0) {
            op->state = SG__H2_DONE;
            return;
        }
    }
    if (op->intent_recorded) {
        int lrv = sg_ledger_op_attempt(op->ledger, op->ledger_key, &op->policy);
        if (lrv != 0 && op->errbuf[0] == '\0') {
            snprintf(op->errbuf, sizeof(op->errbuf), "ledger attempt: %s",
                     sg_strerror(lrv));
        }
    }
    if (v.partial && op->cbs.on_discard != NULL) {
        op->cbs.on_discard(op, op->attempt, v.outcome, op->user_data);
    }
    if (op->cbs.on_attempt != NULL) {
        const sg_op_attempt *rec =
            sg_op_attempt_at(&op->policy, sg_op_attempt_count(&op->policy) - 1);
        if (rec != NULL) {
            op->cbs.on_attempt(op, rec, op->user_data);
        }
    }
    if (v.decision == SG_OP_RETRY && !op->cancel) {
        op->state = SG__H2_SLEEPING;
        op->wake_at = v.retry_at;
    } else {
        op->state = SG__H2_DONE;
    }
}

/* Runs the policy and the callbacks of every decided attempt. */
static void process_decided(sg_h2_conn *c) {
    while (c->done_head != NULL) {
        sg_h2_op *op = c->done_head;
        c->done_head = op->done_next;
        if (c->done_head == NULL) {
            c->done_tail = NULL;
        }
        op->queued = false;
        end_attempt(op, conn_now(c));
        if (op->state == SG__H2_DONE) {
            op_end(op);
        } else {
            sg__dheap_rekey(&c->heap, &op->node);
        }
    }
}

/* One op's deadline came at @now. */
static void op_tick(sg_h2_op *op, int64_t now) {
    sg_h2_conn *c = op->conn;
    switch (op->state) {
    case SG__H2_RUNNING:
        if (op->cancel) {
            decide(op, now, SG_OUTCOME_CANCELLED, NGHTTP2_CANCEL);
            return;
        }
        if (now < sg_guard_next_deadline(sg_stream_guard(&op->stream)) ||
            sg_guard_check(sg_stream_guard(&op->stream), now, NULL) != 1) {
            return;
        }
        /* A clock expired: this stream alone is reset; the latched expiry
         * is the outcome. */
        decide(op, now, SG_OUTCOME_TRANSPORT_ERROR, NGHTTP2_CANCEL);
        return;
    case SG__H2_DRAINING:
        if (now >= op->drain_until) {
            decide(op, now, SG_OUTCOME_OK, NGHTTP2_CANCEL);
        }
        return;
    case SG__H2_SLEEPING:
        if (op->cancel) {
            op->ended_by_cancel = true;
            op_end(op);
            return;
        }
        if (now >= op->wake_at) {
            begin_attempt(op, now);
        }
        return;
    default:
        (void)c;
        return;
    }
}

/* Everything due at @now. */
static void run_due(sg_h2_conn *c, int64_t now) {
    sg__dheap_node *top;
    while (sg__dheap_earliest(&c->heap, &top) <= now) {
        sg_h2_op *op = OP_OF(top);
        op_tick(op, now);
        process_decided(c);
        /* op may be freed now; re-key whatever sits on top instead. */
        sg__dheap_node *again;
        if (sg__dheap_earliest(&c->heap, &again) <= now && again == top) {
            /* due yet unchanged (nothing to do at this instant): look
             * again shortly rather than spin */
            sg__dheap_set_key(&c->heap, top, sg_time_add(now, SG_MS(1)));
        }
    }
}

/* ------------------------------------------------------------ I/O glue */

static int deliver(sg_h2_conn *c, const uint8_t *data, size_t len) {
    ssize_t r = nghttp2_session_mem_recv(c->session, data, len);
    if (r < 0) {
        snprintf(c->errbuf, sizeof(c->errbuf), "connection lost: HTTP/2 error: %s",
                 nghttp2_strerror((int)r));
        /* nghttp2 may have queued a GOAWAY; give it a chance to leave. */
        sg__h2_flush(c);
        return -1;
    }
    process_decided(c);
    return 0;
}

/* The session has nothing left to do (GOAWAY exchanged, streams done). */
static bool session_finished(const sg_h2_conn *c) {
    return c->session != NULL && !nghttp2_session_want_read(c->session) &&
           !nghttp2_session_want_write(c->session);
}

int sg_h2_conn_step(sg_h2_conn *c, int64_t now, bool readable, bool writable) {
    (void)writable; /* we always try: a full socket just says EAGAIN */
    if (c == NULL) {
        return SG_EINVAL;
    }
    if ((readable || c->more_to_read) && c->session != NULL && c->fd >= 0) {
        if (sg__h2_read(c, deliver) != 0) {
            conn_lose(c);
        }
        process_decided(c);
    }
    run_due(c, now);
    if (c->session != NULL && c->fd >= 0 && sg__h2_flush(c) != 0) {
        conn_lose(c);
    }
    if (session_finished(c)) {
        if (c->goaway) {
            snprintf(c->errbuf, sizeof(c->errbuf),
                     "connection closed after GOAWAY from the server");
        }
        conn_lose(c);
    }
    process_decided(c);
    /* A retry may have reconnected and submitted: push it out now. */
    if (c->session != NULL && c->fd >= 0 && sg__h2_flush(c) != 0) {
        conn_lose(c);
        process_decided(c);
    }
    return c->running;
}

int sg_h2_conn_run(sg_h2_conn *c) {
    if (c == NULL) {
        return SG_EINVAL;
    }
    while (c->running > 0) {
        int64_t now = conn_now(c);
        int64_t next = sg_h2_conn_next_deadline(c);
        struct pollfd p = {c->fd, POLLIN, 0};
        if (sg__h2_want_write(c)) {
            p.events |= POLLOUT;
        }
        struct timespec ts;
        struct timespec *tsp = NULL;
        if (next != SG_TIME_NEVER) {
            int64_t wait = next > now ? next - now : 0;
            ts.tv_sec = (time_t)(wait / SG_SEC(1));
            ts.tv_nsec = (long)(wait % SG_SEC(1));
            tsp = &ts;
        }
        int n = ppoll(&p, c->fd >= 0 ? 1 : 0, tsp, NULL);
        if (n < 0 && errno != EINTR) {
            return SG_ESYS;
        }
        bool rd = n > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
        bool wr = n > 0 && (p.revents & POLLOUT) != 0;
        sg_h2_conn_step(c, conn_now(c), rd, wr);
        if (c->fd < 0 && sg_h2_conn_next_deadline(c) == SG_TIME_NEVER && c->running > 0) {
            /* Cannot happen: every running op has a deadline (its budget).
             * Guard against a hang all the same. */
            return SG_ESTATE;
        }
    }
    return 0;
}

/* ---------------------------------------------------------- connection */

static char *dup_str(const char *s) {
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

static void conn_err_out(const sg_h2_conn_options *opts, const char *msg) {
    if (opts != NULL && opts->errbuf != NULL) {
        snprintf(opts->errbuf, SG_H2_ERROR_SIZE, "%s", msg);
    }
}

int sg_h2_conn_new(sg_h2_conn **out, const sg_h2_conn_options *opts) {
    if (out == NULL || opts == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_h2_conn_options o = *opts;
    if (o.host == NULL || o.host[0] == '\0' || o.port < 1 || o.port > 65535 ||
        o.connect_timeout < 0 || o.connect_timeout > SG_DURATION_MAX ||
        (o.stream_window != 0 &&
         (o.stream_window < 65535 || o.stream_window > 0x7fffffffu)) ||
        (o.conn_window != 0 && (o.conn_window < 65535 || o.conn_window > 0x7fffffffu))) {
        conn_err_out(opts, "invalid connection options");
        return SG_EINVAL;
    }
    if (o.connect_timeout == 0) {
        o.connect_timeout = SG__H2_DEFAULT_CONNECT;
    }
    if (o.stream_window == 0) {
        o.stream_window = SG__H2_DEFAULT_STREAM_WINDOW;
    }
    if (o.conn_window == 0) {
        o.conn_window = SG__H2_DEFAULT_CONN_WINDOW;
    }
    if (o.max_header_list == 0) {
        o.max_header_list = SG__H2_DEFAULT_MAX_HEADER_LIST;
    }
    sg_h2_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        conn_err_out(opts, "out of memory");
        return SG_ENOMEM;
    }
    sg__dheap_init(&c->heap, node_deadline);
    c->fd = -1;
    c->host = dup_str(o.host);
    c->server_name = dup_str(o.server_name != NULL ? o.server_name : o.host);
    c->cafile = dup_str(o.cafile);
    bool default_port = o.port == (o.tls ? 443 : 80);
    size_t alen = strlen(o.host) + 16;
    c->authority = malloc(alen);
    if (c->host == NULL || c->server_name == NULL || c->authority == NULL ||
        (o.cafile != NULL && c->cafile == NULL) ||
        nghttp2_session_callbacks_new(&c->cbs) != 0 ||
        nghttp2_option_new(&c->h2opt) != 0) {
        sg_h2_conn_free(c);
        conn_err_out(opts, "out of memory");
        return SG_ENOMEM;
    }
    bool v6 = strchr(o.host, ':') != NULL;
    if (default_port) {
        snprintf(c->authority, alen, v6 ? "[%s]" : "%s", o.host);
    } else {
        snprintf(c->authority, alen, v6 ? "[%s]:%d" : "%s:%d", o.host, o.port);
    }
    o.host = c->host;
    o.server_name = c->server_name;
    o.cafile = c->cafile;
    o.errbuf = NULL;
    if (o.clock != NULL) {
        c->clock = *o.clock;
        c->has_clock = true;
        o.clock = NULL;
    }
    c->opts = o;
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c->cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_header_callback(c->cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c->cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(c->cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(c->cbs, on_frame_not_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(c->cbs, on_stream_close);
    /* Response headers are bounded by our own max_header_list check. */
    nghttp2_option_set_max_send_header_block_length(c->h2opt, 1u << 20);

    int rv = sg__h2_connect(c, o.connect_timeout);
    if (rv == 0) {
        rv = session_open(c);
    }
    if (rv != 0) {
        conn_err_out(opts, c->errbuf);
        sg_h2_conn_free(c);
        return rv;
    }
    *out = c;
    return 0;
}

static void op_release(sg_h2_op *op) {
    free(op->ledger_key);
    free(op->block);
    free(op->parser_buf);
    free(op);
}

void sg_h2_conn_free(sg_h2_conn *c) {
    if (c == NULL) {
        return;
    }
    while (c->ops != NULL) {
        sg_h2_op *op = c->ops;
        c->ops = op->next;
        if (op->stream_id > 0 && c->session != NULL) {
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, op->stream_id,
                                      NGHTTP2_CANCEL);
            nghttp2_session_set_stream_user_data(c->session, op->stream_id, NULL);
        }
        op_release(op);
    }
    if (c->session != NULL) {
        /* Best effort, never blocking: what is queued (RST_STREAM of the
         * operations just dropped) and a GOAWAY tell the server to stop. */
        if (c->fd >= 0 &&
            nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR) == 0) {
            sg__h2_flush(c);
        }
        nghttp2_session_del(c->session);
    }
    sg__h2_close_transport(c);
    SSL_CTX_free(c->ssl_ctx);
    nghttp2_session_callbacks_del(c->cbs);
    nghttp2_option_del(c->h2opt);
    free(c->out);
    sg__dheap_free(&c->heap);
    free(c->host);
    free(c->server_name);
    free(c->cafile);
    free(c->authority);
    free(c);
}

int sg_h2_conn_fd(const sg_h2_conn *c) {
    return c != NULL ? c->fd : -1;
}

bool sg_h2_conn_want_write(const sg_h2_conn *c) {
    return c != NULL && sg__h2_want_write(c);
}

int64_t sg_h2_conn_next_deadline(sg_h2_conn *c) {
    if (c == NULL) {
        return SG_TIME_NEVER;
    }
    if (c->done_head != NULL || (c->more_to_read && c->fd >= 0)) {
        return INT64_MIN; /* decided attempts, or unread bytes, wait for a step */
    }
    return heap_top_deadline(c);
}

int sg_h2_conn_running(const sg_h2_conn *c) {
    return c != NULL ? c->running : 0;
}

bool sg_h2_conn_usable(const sg_h2_conn *c) {
    return c != NULL && c->usable && c->session != NULL;
}

const char *sg_h2_conn_error(const sg_h2_conn *c) {
    return c != NULL ? c->errbuf : "";
}

/* ---------------------------------------------------------- operations */

static bool token_char_ok(const char *s) {
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f) {
            return false;
        }
    }
    return true;
}

/* Copies the request into one block: the nva array (with room for the
 * headers added per attempt), then every string, then the body. */
static int copy_request(sg_h2_op *op, const sg_h2_conn *c, const sg_h2_request *req,
                        const char *method) {
    const char *authority = req->authority != NULL ? req->authority : c->authority;
    const char *scheme = c->opts.tls ? "https" : "http";
    size_t nva_n = 4 + req->nheaders + SG__H2_EXTRA_HEADERS;
    size_t size = nva_n * sizeof(nghttp2_nv);
    size += strlen(method) + strlen(req->path) + strlen(authority) + 3;
    for (size_t i = 0; i < req->nheaders; i++) {
        size += strlen(req->headers[i].name) + strlen(req->headers[i].value) + 2;
    }
    size += req->body_len;
    uint8_t *block = malloc(size);
    if (block == NULL) {
        return SG_ENOMEM;
    }
    op->block = block;
    op->nva = (nghttp2_nv *)(void *)block;
    char *p = (char *)(block + nva_n * sizeof(nghttp2_nv));
#define SG__COPY(dst, src)           \
    do {                             \
        size_t l_ = strlen(src) + 1; \
        memcpy(p, (src), l_);        \
        (dst) = p;                   \
        p += l_;                     \
    } while (0)
    const char *m, *pa, *au;
    SG__COPY(m, method);
    SG__COPY(pa, req->path);
    SG__COPY(au, authority);
    size_t n = 0;
    op->nva[n++] = make_nv(":method", m);
    op->nva[n++] = make_nv(":scheme", scheme);
    op->nva[n++] = make_nv(":authority", au);
    op->nva[n++] = make_nv(":path", pa);
    for (size_t i = 0; i < req->nheaders; i++) {
        char *name;
        const char *value;
        SG__COPY(name, req->headers[i].name);
        lowercase(name);
        SG__COPY(value, req->headers[i].value);
        op->nva[n++] = make_nv(name, value);
    }
#undef SG__COPY
    op->nfixed = n;
    op->body = (const uint8_t *)p;
    op->body_len = req->body_len;
    if (req->body_len > 0) {
        memcpy(p, req->body, req->body_len);
    }
    return 0;
}

/* The intent, durably, before the first stream is submitted: named by the
 * policy's idempotency key, else the caller's ledger key; the URL defaults
 * to scheme://authority + path. */
static int record_intent(sg_h2_op *op, const sg_h2_conn *c, const sg_h2_request *req) {
    const char *key = sg_ledger_op_key(&op->policy, req->ledger_key);
    if (key == NULL) {
        return SG_EINVAL;
    }
    op->ledger_key = dup_str(key);
    if (op->ledger_key == NULL) {
        return SG_ENOMEM;
    }
    char url[2048];
    const char *u = req->url;
    if (u == NULL) {
        snprintf(url, sizeof(url), "%s://%s%s", c->opts.tls ? "https" : "http",
                 req->authority != NULL ? req->authority : c->authority, req->path);
        u = url;
    }
    int rv = sg_ledger_op_intent(req->ledger, op->ledger_key, &op->policy, u);
    if (rv == 0) {
        op->ledger = req->ledger;
        op->intent_recorded = true;
    }
    return rv;
}

int sg_h2_stream_start(sg_h2_conn *c, const sg_h2_request *req,
                       const sg_op_options *policy, const sg_stream_config *framing,
                       const sg_h2_callbacks *cbs, void *user_data, sg_h2_op **out) {
    if (out != NULL) {
        *out = NULL;
    }
    if (c == NULL || req == NULL || req->path == NULL || req->path[0] == '\0' ||
        req->drain_ns < 0 || (req->headers == NULL && req->nheaders > 0) ||
        (req->body == NULL && req->body_len > 0) || !token_char_ok(req->path)) {
        return SG_EINVAL;
    }
    for (size_t i = 0; i < req->nheaders; i++) {
        const sg_h2_header *h = &req->headers[i];
        if (h->name == NULL || h->value == NULL || h->name[0] == '\0' ||
            h->name[0] == ':' || !token_char_ok(h->name) || !token_char_ok(h->value)) {
            return SG_EINVAL;
        }
    }
    sg_stream_config scfg;
    if (framing != NULL) {
        scfg = *framing;
    } else {
        memset(&scfg, 0, sizeof(scfg));
    }
    if (scfg.format != SG_FORMAT_SSE && scfg.format != SG_FORMAT_NDJSON) {
        return SG_EINVAL;
    }
    size_t buf_size = sg_stream_buffer_size(&scfg);
    if (buf_size == 0) {
        return SG_ERANGE;
    }
    sg_h2_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return SG_ENOMEM;
    }
    if (policy != NULL) {
        op->popts = *policy;
    } else {
        sg_op_options_init(&op->popts);
    }
    if (req->method != NULL) {
        int rv = sg_op_options_set_method(&op->popts, req->method);
        if (rv != 0) {
            free(op);
            return SG_EINVAL;
        }
    }
    op->parser_buf = malloc(buf_size);
    int rv = op->parser_buf != NULL ? 0 : SG_ENOMEM;
    if (rv == 0) {
        rv = sg_stream_init(&op->stream, &scfg, on_item, op, op->parser_buf, buf_size);
    }
    if (rv == 0) {
        /* Without a method of its own the request sends the policy's, so
         * retry safety always follows what went on the wire. */
        rv = copy_request(op, c, req, sg__opt_method(&op->popts));
    }
    if (rv == 0) {
        op->conn = c;
        rv = sg__dheap_push(&c->heap, &op->node);
    }
    if (rv != 0) {
        op_release(op);
        return rv;
    }
    op->conn = c;
    if (cbs != NULL) {
        op->cbs = *cbs;
    }
    op->user_data = user_data;
    op->drain_ns = req->drain_ns > 0 ? req->drain_ns : SG__H2_DEFAULT_DRAIN;
    op->deadline_header = req->deadline_header;
    op->grpc_timeout = req->grpc_timeout;
    op->next = c->ops;
    if (c->ops != NULL) {
        c->ops->prev = op;
    }
    c->ops = op;
    int64_t now = conn_now(c);
    rv = sg_op_start(&op->policy, &op->popts, now);
    if (rv == 0 && req->ledger != NULL) {
        rv = record_intent(op, c, req);
    }
    if (rv != 0) {
        sg__dheap_remove(&c->heap, &op->node);
        sg_h2_op_free(op);
        return rv;
    }
    c->running++;
    if (out != NULL) {
        *out = op;
    }
    begin_attempt(op, now);
    process_decided(c);
    return 0;
}

int sg_h2_op_cancel(sg_h2_op *op) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    if (op->state == SG__H2_RUNNING || op->state == SG__H2_SLEEPING) {
        op->cancel = true;
        reschedule(op); /* due at once */
    }
    return 0;
}

void sg_h2_op_free(sg_h2_op *op) {
    if (op == NULL) {
        return;
    }
    sg_h2_conn *c = op->conn;
    if (c != NULL) {
        if (op->stream_id > 0 && c->session != NULL) {
            nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, op->stream_id,
                                      NGHTTP2_CANCEL);
        }
        detach_stream(op);
        if (op->node.in_heap) {
            sg__dheap_remove(&c->heap, &op->node);
            c->running--;
        }
        if (op->queued) {
            /* unlink from the decided queue */
            sg_h2_op **pp = &c->done_head;
            sg_h2_op *prev = NULL;
            while (*pp != NULL && *pp != op) {
                prev = *pp;
                pp = &(*pp)->done_next;
            }
            if (*pp == op) {
                *pp = op->done_next;
                if (c->done_tail == op) {
                    c->done_tail = prev;
                }
            }
        }
        if (op->prev != NULL) {
            op->prev->next = op->next;
        } else if (c->ops == op) {
            c->ops = op->next;
        }
        if (op->next != NULL) {
            op->next->prev = op->prev;
        }
    }
    op_release(op);
}

sg_outcome sg_h2_op_outcome(const sg_h2_op *op) {
    if (op == NULL) {
        return SG_OUTCOME_TRANSPORT_ERROR;
    }
    if (op->ended_by_cancel) {
        return SG_OUTCOME_CANCELLED;
    }
    return sg_op_outcome(&op->policy);
}

bool sg_h2_op_done(const sg_h2_op *op) {
    return op != NULL && op->state == SG__H2_DONE;
}

const sg_op *sg_h2_op_policy(const sg_h2_op *op) {
    return op != NULL ? &op->policy : NULL;
}

void *sg_h2_op_user_data(const sg_h2_op *op) {
    return op != NULL ? op->user_data : NULL;
}

int32_t sg_h2_op_stream_id(const sg_h2_op *op) {
    return op != NULL ? op->stream_id : 0;
}

int sg_h2_op_http_status(const sg_h2_op *op) {
    return op != NULL ? op->http_status : 0;
}

const char *sg_h2_op_error(const sg_h2_op *op) {
    return op != NULL ? op->errbuf : "";
}

int sg_h2_op_report(const sg_h2_op *op, char *buf, size_t len, size_t *needed) {
    if (op == NULL || op->conn == NULL) {
        return SG_EINVAL;
    }
    return sg_op_report_write(&op->policy, conn_now(op->conn), buf, len, needed);
}
