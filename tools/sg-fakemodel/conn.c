/*
 * One client connection from accept to close: socket and TLS I/O, the
 * TLS handshake, choosing the protocol from the first bytes, reading into
 * the HTTP/1.1 or HTTP/2 side, writing the output buffer, and the
 * bookkeeping after each event (conn_after) that decides what runs, what
 * is written and whether the connection ends.
 */
#include "server.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

/* HTTP/1.1 input kept while a response is running (pipelined requests). */
#define IN_MAX (SG_FM_H1_MAX_HEAD + 16 * 1024)

/* A conn_error log event: it belongs to no request. */
void conn_error(conn *c, const char *proto, const char *detail) {
    sg_fm_buf b = {0};
    sg_fm_buf_printf(&b, "\"conn\":%llu,\"proto\":\"%s\",\"detail\":\"",
                     (unsigned long long)c->id, proto);
    sg_fm_buf_json_str(&b, detail, strlen(detail));
    sg_fm_buf_append(&b, "\"", 2);
    sg_fm_log_event(0, SG_FM_EV_CONN_ERROR, sg_fm_now(), 0, NULL, sg_fm_buf_data(&b));
    sg_fm_buf_free(&b);
}

/* ------------------------------------------------------------ I/O */

/* Bytes read, 0 at the end of input, -1: try again later, -2: broken. */
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

/* Bytes written, -1: try again later, -2: broken. */
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

void conn_close(conn *c, int by_server) {
    sg_fm_server *srv = c->srv;
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
    sg_fm_timer_disarm(&srv->timers, &c->kick);
    epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->ep.fd, NULL);
    if (c->ssl != NULL) {
        if (!c->abort_after_flush && !c->read_eof && SSL_is_init_finished(c->ssl)) {
            SSL_shutdown(c->ssl);
        }
        SSL_free(c->ssl);
        c->ssl = NULL;
    }
    if (c->rst_on_close) {
        /* reset: a zero linger makes close() send RST, dropping what the
         * socket still holds */
        struct linger now = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->ep.fd, SOL_SOCKET, SO_LINGER, &now, sizeof(now));
    } else if (c->abort_after_flush) {
        /* FIN after the last byte is what a crashed upstream behind a
         * proxy usually looks like (reset plays the RST). */
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
        srv->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    c->dead_next = srv->dead;
    srv->dead = c;
    srv->n_conns--;
}

void conn_free_dead(sg_fm_server *srv) {
    while (srv->dead != NULL) {
        conn *c = srv->dead;
        srv->dead = c->dead_next;
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
        epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->ep.fd, &e);
        c->events = ev;
    }
    /* Decrypted bytes inside OpenSSL do not make the socket readable. */
    if (can_read && c->ssl != NULL && c->mode != M_TLS_HS && SSL_pending(c->ssl) > 0) {
        sg_fm_timer_arm(&c->srv->timers, &c->kick, sg_fm_now());
    }
}

/*
 * Everything that follows an event on a connection: start pipelined
 * requests, serialise HTTP/2 frames, write, close when done, and re-arm
 * epoll interest.
 */
void conn_after(conn *c) {
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
        ex_arm(c->cur, sg_fm_now());
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
    if (c->mode == M_DETECT && c->in.len == 0 && c->srv->ssl_ctx != NULL) {
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
            c->ssl = SSL_new(c->srv->ssl_ctx);
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

/* The kick timer: OpenSSL holds decrypted bytes epoll cannot see. */
static void conn_kick(sg_fm_timer *t) {
    conn *c = (conn *)(void *)((char *)t - offsetof(conn, kick));
    conn_read(c);
    conn_after(c);
}

/* ------------------------------------------------------------ lifecycle */

conn *conn_open(sg_fm_server *srv, int fd) {
    conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return NULL;
    }
    c->ep.tag = TAG_CONN;
    c->ep.fd = fd;
    c->srv = srv;
    c->id = ++srv->next_conn_id;
    c->mode = M_DETECT;
    sg_fm_timer_init(&c->kick, conn_kick);
    c->events = EPOLLIN;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &c->ep};
    if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &e) != 0) {
        close(fd);
        free(c);
        return NULL;
    }
    c->next = srv->conns;
    if (srv->conns != NULL) {
        srv->conns->prev = c;
    }
    srv->conns = c;
    srv->n_conns++;
    srv->conns_total++;
    return c;
}

void conn_on_event(conn *c, uint32_t events) {
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
