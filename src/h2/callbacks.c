/*
 * nghttp2's callbacks into the operations of one connection.
 *
 * Everything here runs inside nghttp2_session_mem_recv or _send: it records
 * what the peer said in the operation's lifecycle and, when that decides
 * an attempt, queues it (sg__h2_decide).  The policy and the user
 * callbacks that may free things run later, from the decided queue.
 */
#include "h2/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static sg_h2_op *op_of(nghttp2_session *session, int32_t stream_id) {
    return nghttp2_session_get_stream_user_data(session, stream_id);
}

/* Whether a HEADERS block is a response.  The first block is RESPONSE;
 * after an interim (1xx) one, nghttp2 files the next - the real response -
 * under HEADERS, as it files trailers: only a block before the final
 * response is a response. */
static bool response_block(const nghttp2_frame *frame, const sg_h2_op *op) {
    return frame->headers.cat == NGHTTP2_HCAT_RESPONSE ||
           (frame->headers.cat == NGHTTP2_HCAT_HEADERS && !op->lc.headers_done);
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *user_data) {
    (void)flags;
    sg__h2_link *l = user_data;
    sg_h2_op *op = op_of(session, stream_id);
    if (op == NULL) {
        return 0; /* a reset stream's tail */
    }
    int64_t now = l->recv_now;
    int rv = sg__lc_feed(&op->lc, data, len, now);
    if (rv < 0) {
        /* Expired, capped, cancelled by the consumer or badly framed: we
         * no longer want this response, and the server should stop. */
        sg__h2_decide(op, now, SG_OUTCOME_TRANSPORT_ERROR, NGHTTP2_CANCEL);
        return 0;
    }
    sg__h2_reschedule(op);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame,
                     const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user_data) {
    (void)flags;
    sg__h2_link *l = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    sg_h2_op *op = op_of(session, frame->hd.stream_id);
    if (op == NULL || op->lc.state != SG__LC_RUNNING) {
        return 0;
    }
    /* RFC 9113 §6.5.2: name + value + 32 per field, over every block. */
    op->header_bytes += namelen + valuelen + 32;
    if (op->header_bytes > l->conn->opts.max_header_list) {
        sg__lc_error(&op->lc, "response header list exceeds %u bytes (max_header_list)",
                     (unsigned)l->conn->opts.max_header_list);
        sg__h2_decide(op, l->recv_now, SG_OUTCOME_PROTOCOL_ERROR, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    if (!response_block(frame, op)) {
        return 0; /* trailers */
    }
    if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
        int status = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++) {
            status = isdigit(value[i]) ? status * 10 + (value[i] - '0') : -1000;
        }
        /* RFC 9110 §15: three digits, 100 .. 599; anything else is a
         * malformed response (-1), never a status the policy must judge. */
        sg__lc_status(&op->lc,
                      valuelen == 3 && status >= 100 && status <= 599 ? status : -1,
                      l->recv_now);
    } else if (namelen == 11 && memcmp(name, "retry-after", 11) == 0) {
        sg__lc_retry_after(&op->lc, (const char *)value, valuelen);
    } else if (namelen == 14 && memcmp(name, "retry-after-ms", 14) == 0) {
        sg__lc_retry_after_ms(&op->lc, (const char *)value, valuelen);
    } else if (namelen == 4 && memcmp(name, "date", 4) == 0) {
        sg__lc_date(&op->lc, (const char *)value, valuelen);
    } else {
        sg__lc_ratelimit(&op->lc, (const char *)name, namelen, (const char *)value,
                         valuelen);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                         void *user_data) {
    sg__h2_link *l = user_data;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        /* nghttp2 closes the streams above last_stream_id with
         * REFUSED_STREAM (on_stream_close); no new stream may open. */
        l->goaway = true;
        l->usable = false; /* new streams go on a new link */
        snprintf(l->errbuf, sizeof(l->errbuf),
                 "GOAWAY from the server (%s, last stream %d)",
                 nghttp2_http2_strerror(frame->goaway.error_code),
                 (int)frame->goaway.last_stream_id);
        return 0;
    }
    if ((frame->hd.type == NGHTTP2_DATA || frame->hd.type == NGHTTP2_HEADERS) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        sg_h2_op *op = op_of(session, frame->hd.stream_id);
        if (op != NULL && op->stream_id == frame->hd.stream_id) {
            op->end_stream = true; /* the body ended: a close now is no reset */
            if (frame->hd.type == NGHTTP2_DATA && op->lc.state == SG__LC_RUNNING &&
                op->lc.body_is_stream &&
                !nghttp2_session_get_stream_local_close(session, frame->hd.stream_id)) {
                /* The response is whole while our request still goes out
                 * (held by flow control, say): the answer needs no more of
                 * it (RFC 9113 §8.1) - the stream's end now, our side
                 * stopped without error, not a wait for a close that the
                 * rest of the upload would have to come first. */
                sg__h2_decide(op, l->recv_now, SG_OUTCOME_OK, NGHTTP2_NO_ERROR);
            }
        }
    }
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    sg_h2_op *op = op_of(session, frame->hd.stream_id);
    if (op == NULL || op->lc.state != SG__LC_RUNNING) {
        return 0;
    }
    if (!response_block(frame, op)) {
        return 0;
    }
    if (op->lc.http_status <= 0) {
        op->lc.http_status = 0;
        sg__lc_error(&op->lc, "malformed response: no valid :status");
        sg__h2_decide(op, l->recv_now, SG_OUTCOME_PROTOCOL_ERROR, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    int64_t now = l->recv_now;
    switch (sg__lc_headers_end(&op->lc, now)) {
    case SG__LC_INTERIM:
        return 0; /* the final response follows */
    case SG__LC_STREAM:
        sg__h2_reschedule(op);
        return 0;
    default: {
        /* The answer is in (no redirects here): http_error now; what the
         * server said comes in its DATA, read while the stream drains. */
        bool ended = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
        if (ended || !sg__lc_error_response(&op->lc, now)) {
            /* ended while our request still goes out: our side stops too
             * (NO_ERROR), or nghttp2 would keep the stream open behind the
             * upload, a slot the link no longer counts */
            int rst =
                !ended ? NGHTTP2_CANCEL
                : nghttp2_session_get_stream_local_close(session, frame->hd.stream_id)
                    ? -1
                    : NGHTTP2_NO_ERROR;
            sg__h2_decide(op, now, SG_OUTCOME_HTTP_ERROR, rst);
            return 0;
        }
        sg__h2_reschedule(op);
        return 0;
    }
    }
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame,
                         void *user_data) {
    sg__h2_link *l = user_data;
    if (frame->hd.type == NGHTTP2_GOAWAY && !l->goaway) {
        if (frame->goaway.error_code != NGHTTP2_NO_ERROR) {
            /* nghttp2 ends the session itself when the server breaks the
             * protocol: every stream on it ends protocol_error. */
            l->peer_broke = true;
            snprintf(l->errbuf, sizeof(l->errbuf),
                     "the server broke the HTTP/2 protocol: this client sent GOAWAY %s",
                     nghttp2_http2_strerror(frame->goaway.error_code));
        } else {
            snprintf(l->errbuf, sizeof(l->errbuf),
                     "connection closed by this client (GOAWAY NO_ERROR)");
        }
        return 0;
    }
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        /* Our own resets detach the stream first; one still attached was
         * reset by nghttp2 for the server's violation on that stream. */
        sg_h2_op *op = op_of(session, frame->hd.stream_id);
        if (op != NULL && op->lc.state == SG__LC_RUNNING &&
            frame->rst_stream.error_code != NGHTTP2_CANCEL &&
            frame->rst_stream.error_code != NGHTTP2_NO_ERROR) {
            sg__lc_error(&op->lc,
                         "the server broke the HTTP/2 protocol on this stream: %s",
                         nghttp2_http2_strerror(frame->rst_stream.error_code));
            sg__h2_decide(op, sg__h2_now(l->conn), SG_OUTCOME_PROTOCOL_ERROR, -1);
        }
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) {
        return 0;
    }
    sg_h2_op *op = op_of(session, frame->hd.stream_id);
    if (op == NULL || op->lc.state != SG__LC_RUNNING) {
        return 0;
    }
    if (frame->hd.type == NGHTTP2_HEADERS) {
        op->lc.sent = true;
    }
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        sg_guard *g = sg__lc_guard(&op->lc);
        if (sg_guard_phase(g) < SG_PHASE_WAIT_HEADERS) {
            sg_guard_set_phase(g, SG_PHASE_WAIT_HEADERS, sg__h2_now(l->conn));
        }
    }
    return 0;
}

static int on_frame_not_send(nghttp2_session *session, const nghttp2_frame *frame,
                             int lib_error_code, void *user_data) {
    (void)session;
    sg__h2_link *l = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS) {
        return 0;
    }
    /* The stream never opened (after GOAWAY, or the id space ran out), so
     * nghttp2 holds no user data for it: find the op by id. */
    for (sg_h2_op *op = l->conn->ops; op != NULL; op = op->next) {
        if (op->link == l && op->stream_id == frame->hd.stream_id &&
            op->lc.state == SG__LC_RUNNING) {
            op->lc.not_processed = true;
            sg__lc_error(&op->lc, "stream not opened: %s",
                         nghttp2_strerror(lib_error_code));
            sg__h2_decide(op, sg__h2_now(l->conn), SG_OUTCOME_TRANSPORT_ERROR, -1);
            break;
        }
    }
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id,
                           uint32_t error_code, void *user_data) {
    sg__h2_link *l = user_data;
    sg_h2_op *op = op_of(session, stream_id);
    if (op == NULL || op->stream_id != stream_id) {
        return 0;
    }
    int64_t now = sg__h2_now(l->conn);
    if (op->lc.state == SG__LC_DRAINING) {
        sg__h2_decide(op, now, SG_OUTCOME_OK, -1);
        return 0;
    }
    if (op->lc.state != SG__LC_RUNNING) {
        sg__h2_detach_stream(op);
        return 0;
    }
    sg_outcome how;
    if (error_code == NGHTTP2_NO_ERROR && !op->end_stream && op->lc.body_is_stream) {
        /* RST_STREAM(NO_ERROR) before END_STREAM: the body was cut, not
         * ended (RFC 9113 §8.1 allows it only after a complete response) */
        how = SG_OUTCOME_TRUNCATED;
        sg__lc_error(&op->lc, "%s",
                     "stream reset by the server before its end: NO_ERROR");
    } else if (error_code == NGHTTP2_NO_ERROR) {
        how = op->lc.body_is_stream ? SG_OUTCOME_OK
              : op->lc.headers_done ? SG_OUTCOME_HTTP_ERROR
                                    : SG_OUTCOME_TRANSPORT_ERROR;
        if (how == SG_OUTCOME_TRANSPORT_ERROR) {
            sg__lc_error(&op->lc, "%s", "stream ended without a response");
        }
    } else if (error_code == NGHTTP2_REFUSED_STREAM && !op->lc.headers_done) {
        /* RFC 9113 §8.7: the server did no processing - safe to retry. */
        op->lc.not_processed = true;
        how = SG_OUTCOME_TRANSPORT_ERROR;
        sg__lc_error(&op->lc, "%s",
                     l->goaway ? "stream above GOAWAY's last stream id: never processed"
                               : "REFUSED_STREAM: never processed");
    } else {
        how = op->lc.headers_done ? SG_OUTCOME_TRUNCATED : SG_OUTCOME_TRANSPORT_ERROR;
        sg__lc_error(&op->lc, "stream reset by the server: %s",
                     nghttp2_http2_strerror(error_code));
    }
    sg__h2_decide(op, now, how, -1);
    return 0;
}

ssize_t sg__h2_body_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
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
    const sg__h2_req *req = op->req;
    size_t left = req->body_len - op->body_off;
    size_t n = left < length ? left : length;
    memcpy(buf, req->body + op->body_off, n);
    op->body_off += n;
    if (op->body_off == req->body_len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

void sg__h2_set_callbacks(nghttp2_session_callbacks *cbs) {
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs, on_frame_not_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
}
