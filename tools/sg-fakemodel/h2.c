/*
 * The HTTP/2 side of a connection, on nghttp2: the session callbacks that
 * turn HEADERS and DATA into exchanges, the data provider that hands
 * nghttp2 what an exchange generated (or defers, or drops the stream), and
 * feeding and serialising the session.  nghttp2's user_data is the conn.
 */
#include "server.h"

#include <string.h>

/*
 * The data provider of every HTTP/2 response: hands nghttp2 what the
 * exchange generated, or defers until a timer generates more.
 */
ssize_t h2_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                uint32_t *data_flags, nghttp2_data_source *source, void *user_data) {
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
        ex_eol(ex, (char *)buf, n);
        sg_fm_buf_consume(&ex->pend, n);
        if (ex->allow != SIZE_MAX) {
            ex->allow -= n;
        }
        if (ex->blocked && ex->pend.len < PEND_LOW) {
            ex->blocked = 0;
            ex_arm(ex, sg_fm_now());
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
    /* recorded as HTTP/1.1 would carry it: one "name: value" line a field */
    ex_record(ex, name, namelen);
    ex_record(ex, ": ", 2);
    ex_record(ex, value, valuelen);
    ex_record(ex, "\r\n", 2);
    if (namelen > 0 && (name[0] != ':' || name_eq(name, namelen, ":authority"))) {
        ex_keep_header(ex, (const char *)name, namelen, (const char *)value, valuelen);
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
    } else if (name_eq(name, namelen, "traceparent")) {
        set_field(&ex->traceparent, value, valuelen);
    } else if (name_eq(name, namelen, "tracestate")) {
        set_field(&ex->tracestate, value, valuelen);
    } else if (name_eq(name, namelen, "x-sg-scenario")) {
        set_field(&ex->scenario_hdr, value, valuelen);
    }
    return 0;
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                            const uint8_t *data, size_t len, void *user_data) {
    (void)flags;
    (void)user_data;
    exchange *ex = nghttp2_session_get_stream_user_data(session, stream_id);
    if (ex != NULL) {
        ex->body_bytes += len;
        ex_body_data(ex, data, len);
        ex_record(ex, data, len);
    }
    return 0;
}

static int h2_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame,
                            void *user_data) {
    (void)user_data;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (frame->hd.type == NGHTTP2_HEADERS &&
            frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
            /* the fields' end, as a blank line ends an HTTP/1.1 head */
            exchange *ex =
                nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
            if (ex != NULL) {
                ex_record(ex, "\r\n", 2);
            }
        }
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

int h2_init_callbacks(sg_fm_server *srv) {
    if (nghttp2_session_callbacks_new(&srv->h2cb) != 0 ||
        nghttp2_option_new(&srv->h2opt) != 0) {
        return -1;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(srv->h2cb,
                                                            h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(srv->h2cb, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(srv->h2cb,
                                                              h2_on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(srv->h2cb, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(srv->h2cb, h2_on_stream_close);
    /* Closed streams are not kept for priority bookkeeping: memory stays
     * proportional to open streams with thousands of short requests. */
    nghttp2_option_set_no_closed_streams(srv->h2opt, 1);
    return 0;
}

void h2_free_callbacks(sg_fm_server *srv) {
    nghttp2_session_callbacks_del(srv->h2cb);
    nghttp2_option_del(srv->h2opt);
}

int h2_start(conn *c) {
    const sg_fm_server *srv = c->srv;
    c->mode = M_H2;
    if (nghttp2_session_server_new2(&c->h2, srv->h2cb, c, srv->h2opt) != 0) {
        return -1;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, srv->o->h2_max_streams},
    };
    if (nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 1) != 0) {
        return -1;
    }
    return 0;
}

/* Feeds received bytes to nghttp2; a protocol error ends the connection. */
int h2_feed(conn *c, const char *data, size_t len) {
    ssize_t r = nghttp2_session_mem_recv(c->h2, (const uint8_t *)data, len);
    if (r < 0) {
        conn_error(c, "h2", nghttp2_strerror((int)r));
        /* Bad preface or fatal error: nghttp2 may have queued a GOAWAY. */
        c->close_after_flush = 1;
        return -1;
    }
    return 0;
}

/* Serialises queued frames into the connection's output, up to OUT_HIGH. */
void h2_flush(conn *c) {
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
