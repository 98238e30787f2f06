/*
 * The connection under the operations: its nghttp2 session (open, lost,
 * re-opened after a GOAWAY), the step that moves bytes between the socket
 * and nghttp2, the blocking run loop, and the connection's life.  The
 * socket and TLS are in io.c; the operations in op.c.
 */
#define _GNU_SOURCE
#include "h2/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SG__H2_DEFAULT_CONNECT SG_SEC(10)
#define SG__H2_DEFAULT_STREAM_WINDOW (4u << 20)
#define SG__H2_DEFAULT_CONN_WINDOW (16u << 20)
#define SG__H2_DEFAULT_MAX_HEADER_LIST (64u << 10)

/* ------------------------------------------------------------- session */

int sg__h2_session_open(sg_h2_conn *c) {
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
    c->peer_broke = false;
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
        if (op->lc.state != SG__LC_RUNNING && op->lc.state != SG__LC_DRAINING) {
            continue;
        }
        /* A request whose HEADERS never left (queued behind the peer's
         * concurrency limit) was never seen by the server. */
        op->lc.not_processed = !op->lc.sent;
        sg__lc_error(&op->lc, "%s", c->errbuf);
        sg__h2_decide(op, now,
                      c->peer_broke           ? SG_OUTCOME_PROTOCOL_ERROR
                      : op->lc.body_is_stream ? SG_OUTCOME_TRUNCATED
                                              : SG_OUTCOME_TRANSPORT_ERROR,
                      -1);
    }
    if (c->session != NULL) {
        nghttp2_session_del(c->session);
        c->session = NULL;
    }
    c->active = 0;
    sg__h2_close_transport(c);
}

int sg__h2_ensure_session(sg_h2_conn *c, int64_t timeout_ns, sg_outcome *fail) {
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
        rv = sg__h2_session_open(c);
        if (rv != 0) {
            sg__h2_close_transport(c);
        }
    }
    return rv;
}

/* ------------------------------------------------------------ I/O glue */

static int deliver(sg_h2_conn *c, const uint8_t *data, size_t len) {
    ssize_t r = nghttp2_session_mem_recv(c->session, data, len);
    if (r < 0) {
        /* Out of memory, or a callback of ours, is not the server's doing;
         * anything else nghttp2 refuses (a flood, bad framing) is. */
        if (r != NGHTTP2_ERR_NOMEM && r != NGHTTP2_ERR_CALLBACK_FAILURE) {
            c->peer_broke = true;
        }
        snprintf(c->errbuf, sizeof(c->errbuf), "%s: %s",
                 c->peer_broke ? "the server broke the HTTP/2 protocol"
                               : "connection lost: HTTP/2 error",
                 nghttp2_strerror((int)r));
        /* nghttp2 may have queued a GOAWAY; give it a chance to leave. */
        sg__h2_flush(c);
        return -1;
    }
    sg__h2_process_decided(c);
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
        sg__h2_process_decided(c);
    }
    sg__h2_run_due(c, now);
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
    sg__h2_process_decided(c);
    /* A retry may have reconnected and submitted: push it out now. */
    if (c->session != NULL && c->fd >= 0 && sg__h2_flush(c) != 0) {
        conn_lose(c);
        sg__h2_process_decided(c);
    }
    return c->running;
}

int sg_h2_conn_run(sg_h2_conn *c) {
    if (c == NULL) {
        return SG_EINVAL;
    }
    while (c->running > 0) {
        int64_t now = sg__h2_now(c);
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
        sg_h2_conn_step(c, sg__h2_now(c), rd, wr);
        if (c->fd < 0 && sg_h2_conn_next_deadline(c) == SG_TIME_NEVER && c->running > 0) {
            /* Cannot happen: every running op has a deadline (its budget).
             * Guard against a hang all the same. */
            return SG_ESTATE;
        }
    }
    return 0;
}

/* ---------------------------------------------------------- connection */

char *sg__h2_strdup(const char *s) {
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
    sg__dheap_init(&c->heap, sg__h2_op_deadline);
    c->fd = -1;
    c->host = sg__h2_strdup(o.host);
    c->server_name = sg__h2_strdup(o.server_name != NULL ? o.server_name : o.host);
    c->cafile = sg__h2_strdup(o.cafile);
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
    sg__h2_set_callbacks(c->cbs);
    /* Response headers are bounded by our own max_header_list check. */
    nghttp2_option_set_max_send_header_block_length(c->h2opt, 1u << 20);

    int rv = 0;
    if (!o.connect_on_demand) {
        rv = sg__h2_connect(c, o.connect_timeout);
        if (rv == 0) {
            rv = sg__h2_session_open(c);
        }
    }
    if (rv != 0) {
        conn_err_out(opts, c->errbuf);
        sg_h2_conn_free(c);
        return rv;
    }
    *out = c;
    return 0;
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
        sg__h2_op_release(op);
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
    free(c->rbuf);
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
    return sg__dheap_earliest(&c->heap, NULL);
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
