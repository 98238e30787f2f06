/*
 * The HTTP/1.1 side of a connection: frames the input buffer into requests
 * (http1.c does the parsing), counts and discards their bodies, answers what
 * cannot be parsed, and hands each complete request to ex_begin.  One
 * exchange runs at a time; pipelined requests wait in the input buffer.
 */
#include "server.h"

#include <string.h>

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
        {"traceparent", offsetof(exchange, traceparent)},
        {"tracestate", offsetof(exchange, tracestate)},
        {"x-sg-scenario", offsetof(exchange, scenario_hdr)},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const sg_fm_h1_header *h = sg_fm_h1_find_header(r, fields[i].name);
        if (h != NULL) {
            char **dst = (char **)(void *)((char *)ex + fields[i].off);
            *dst = dup_cut(h->value, h->value_len, FIELD_MAX);
        }
    }
    for (size_t i = 0; i < r->num_headers; i++) {
        ex_keep_header(ex, r->headers[i].name, r->headers[i].name_len,
                       r->headers[i].value, r->headers[i].value_len);
    }
    const sg_fm_h1_header *e = sg_fm_h1_find_header(r, "expect");
    ex->expect_continue =
        e != NULL && sg_fm_h1_iequal(e->value, e->value_len, "100-continue", 12);
    ex->h10 = r->minor_version == 0;
    ex->keep_alive = r->keep_alive;
}

static void on_chunk_data(void *user_data, const char *data, size_t len) {
    ex_body_data(user_data, data, len);
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
int h1_process(conn *c) {
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
        ex_record(ex, sg_fm_buf_data(&c->in), head);
        sg_fm_buf_consume(&c->in, head);
        c->head_scanned = 0;
        if (req.content_length > 0 &&
            (uint64_t)req.content_length > c->srv->o->max_body) {
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
        c->chunk.on_data = on_chunk_data;
        c->chunk.user_data = ex;
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
            ex_record(ex, sg_fm_buf_data(&c->in), (size_t)r);
            sg_fm_buf_consume(&c->in, (size_t)r);
            ex->body_bytes = c->chunk.body_bytes;
            if (ex->body_bytes > c->srv->o->max_body) {
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
            ex_body_data(ex, sg_fm_buf_data(&c->in), take);
            ex_record(ex, sg_fm_buf_data(&c->in), take);
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
