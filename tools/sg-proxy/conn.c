/*
 * conn.c - one client connection: its request, its answer's bytes, its
 * limits; its operation upstream is upstream.c's.
 *
 * READ: the head must be whole within the header timeout (else 408), at
 * most 32 KiB and 64 headers (else 431); the body, by Content-Length or
 * chunked, at most max_body (else 413).  Then the request is routed and
 * becomes one operation (upstream.c), or GET /metrics is answered here.
 * WRITE: what is for the client waits in one buffer per connection,
 * written as the socket takes it (never blocking); a paused upstream read
 * resumes when the client has read half of client_buffer.  A client that
 * goes away cancels its operation, whose end frees the connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"

/* ------------------------------------------------------------ plumbing */

static void watch(struct conn *c, bool out) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(c->proxy->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = out;
}

bool grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) {
        return true;
    }
    size_t n = *cap ? *cap : 4096;
    while (n < need) {
        n *= 2;
    }
    char *p = realloc(*buf, n);
    if (p == NULL) {
        return false;
    }
    *buf = p;
    *cap = n;
    return true;
}

bool client_took(struct conn *c) {
    int queued = 0;
    if (ioctl(c->fd, SIOCOUTQ, &queued) != 0 || queued < 0 ||
        (uint64_t)queued > c->sent) {
        return false;
    }
    /* what it took, not the queue's length: the sends since the last look
     * refill the queue while the client drains it */
    uint64_t taken = c->sent - (uint64_t)queued;
    bool took = taken > c->taken_seen;
    c->taken_seen = taken;
    return took;
}

/* Writes what waits for the client (never blocks). */
void flush_out(struct conn *c) {
    while (c->out_off < c->out_len && !c->client_gone) {
        ssize_t w =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w > 0) {
            c->out_off += (size_t)w;
            c->sent += (uint64_t)w;
            if (c->state == C_CLOSING) {
                /* the rest of an answer: --header-timeout bounds a client
                 * that takes nothing, not one that reads */
                c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
            }
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            c->client_gone = true; /* reset, or closed: nobody reads */
        }
    }
    if (c->out_off == c->out_len) {
        c->out_off = c->out_len = 0;
    }
    bool out = c->out_len > 0 && !c->client_gone;
    if (out != c->want_out) {
        watch(c, out);
    }
}

/* Appends @n bytes for the client.  false when the client has fallen more
 * than client_buffer behind (or memory ran out). */
bool put(struct conn *c, const void *p, size_t n) {
    if (c->client_gone) {
        return true; /* dropped: the operation is being cancelled */
    }
    /* the streaming bound is twice the buffer: a read is paused once the
     * client is a buffer behind, and the read that crossed it still fits;
     * while less than a buffer waits, an event goes in whole whatever its
     * size (the framing's max_event bounds it) */
    const size_t waiting = c->out_len - c->out_off;
    if (waiting + n > 2 * c->proxy->client_buffer && waiting > c->proxy->client_buffer &&
        c->state != C_CLOSING) {
        return false;
    }
    if (!grow(&c->out, &c->out_cap, c->out_len + n)) {
        return false;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return true;
}

void put_str(struct conn *c, const char *s) {
    (void)put(c, s, strlen(s));
}

void free_op(struct conn *c) {
    sg_curl_op_free(c->op);
    c->op = NULL;
    if (c->easy != NULL) {
        curl_easy_cleanup(c->easy);
        c->easy = NULL;
    }
    curl_slist_free_all(c->headers);
    c->headers = NULL;
}

/* The connection ends while its answer is not whole (bytes still wait
 * for the client, or what should end it could not be added): a reset, not
 * a clean close after a cut event - so no client reads a short answer as
 * a complete one.  SO_LINGER 0: close() then sends RST and drops what the
 * kernel still holds. */
static void reset_if_cut(struct conn *c) {
    if (c->client_gone || (c->out_len == c->out_off && !c->cut)) {
        return;
    }
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

void conn_free(struct conn *c) {
    struct proxy *p = c->proxy;
    reset_if_cut(c);
    for (struct conn **pp = &p->conns; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    free_op(c);
    routes_unref(c->set);
    close(c->fd); /* leaves epoll by itself */
    free(c->in);
    free(c->body);
    free(c->url);
    for (int i = 0; i < MAX_FALLBACKS; i++) {
        free(c->fallback_urls[i]);
    }
    for (size_t i = 0; i < 1 + SG_OP_MAX_HEDGES; i++) {
        free(c->pend[i].p);
    }
    free(c->out);
    relay_free(&c->relay);
    free(c);
    p->nconns--;
}

/* A whole answer before any operation (a bad request, a limit, a
 * timeout): status, a short JSON error, then close. */
void reply(struct conn *c, int status, const char *reason, const char *extra,
           const char *body) {
    reply_bytes(c, status, reason, extra, "application/json", body, strlen(body));
}

/* x-should-retry, on every error answer (the OpenAI and Anthropic SDKs
 * obey it before their own retries, which are on by default): true only
 * where the client's retry can help and adds no upstream request the
 * route did not allow - nothing of this request went upstream, and what
 * failed passes (408: the request came too slowly; 503: the proxy was
 * shutting down, or out of memory).  Anything that went upstream had the
 * route's attempts for its retries: false, as for every other error. */
static const char *should_retry(const struct conn *c, int status) {
    if (status < 400) {
        return "";
    }
    return (status == 408 || status == 503) && !upstream_sent(c)
               ? "x-should-retry: true\r\n"
               : "x-should-retry: false\r\n";
}

void reply_bytes(struct conn *c, int status, const char *reason, const char *extra,
                 const char *ctype, const char *body, size_t len) {
    char head[768];
    snprintf(head, sizeof(head),
             "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n%s%s\r\n",
             status, reason, ctype, len, should_retry(c, status),
             extra != NULL ? extra : "");
    /* answered before its request was read whole: the client may still send */
    c->linger = (c->state == C_HEAD || c->state == C_BODY) && !c->request_whole;
    c->state = C_CLOSING;
    c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
    put_str(c, head);
    (void)put(c, body, len);
    flush_out(c);
}

void reply_error(struct conn *c, int status, const char *what) {
    char body[768];
    if (status >= 500) {
        /* the proxy's own failure, not the request's: named so, in the
         * route's provider's format once the request has one */
        enum answer_style style =
            c->route != NULL ? answer_style_of(c->route->profile) : STYLE_OPENAI;
        answer_own_body(style, status, what, body, sizeof(body));
    } else {
        snprintf(body, sizeof(body),
                 "{\"error\":{\"message\":\"sg-proxy: %s\",\"type\":\"%s\"}}", what,
                 "invalid_request");
    }
    reply(c, status, sg_fm_h1_status_text(status), NULL, body);
}

/* The answer is out (or the client gone): the connection ends - at once,
 * or, when its request was not read whole, with a half-close, and what the
 * client still sends read and dropped until it closes or --header-timeout
 * passes: a close with bytes unread resets the connection, and a client
 * still sending would lose the answer to the reset (RFC 9112 §9.6). */
static void conn_end(struct conn *c) {
    if (c->client_gone || !c->linger) {
        conn_free(c);
        return;
    }
    if (!c->lingering) {
        shutdown(c->fd, SHUT_WR);
        c->lingering = true;
        c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
    }
}

/* ------------------------------------------------------------ accepting */

void conn_accept(struct proxy *p) {
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd =
            accept4(p->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return; /* EAGAIN, or a client gone before we took it */
        }
        if (p->nconns >= p->max_conns) {
            close(fd); /* over the cap: the others are served */
            continue;
        }
        struct conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        c->proxy = p;
        c->id = ++p->next_id;
        c->state = C_HEAD;
        c->header_deadline = sg_time_add(now_ns(), p->header_timeout);
        char ip[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
            port = ntohs(a->sin6_port);
        }
        /* an IPv6 address in brackets, as in a URL: [::1]:54908 */
        snprintf(c->peer, sizeof(c->peer), ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d",
                 ip, port);
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.ptr = c;
        if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = p->conns;
        p->conns = c;
        p->nconns++;
    }
}

/* GET /metrics is the proxy's own. */
static bool serve_metrics(struct conn *c) {
    /* the path exactly (paths are case-sensitive), whatever the query */
    const char *t = c->req.target;
    size_t tl = c->req.target_len;
    bool metrics = tl >= 8 && memcmp(t, "/metrics", 8) == 0 && (tl == 8 || t[8] == '?');
    if (!sg_fm_h1_iequal(c->req.method, c->req.method_len, "GET", 3) || !metrics) {
        return false;
    }
    /* whole, however many routes: measured, then written (the loop is
     * single-threaded: nothing changes between the two) */
    size_t n = metrics_text(NULL, 0);
    char *text = malloc(n + 1);
    if (text == NULL) {
        reply_error(c, 503, "out of memory");
        return true;
    }
    n = metrics_text(text, n + 1);
    char head[256];
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n",
             n);
    c->state = C_CLOSING;
    c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
    put_str(c, head);
    (void)put(c, text, n);
    free(text);
    flush_out(c);
    return true;
}

/* The body so far: whole when 1. */
static int read_body(struct conn *c) {
    struct proxy *p = c->proxy;
    const char *b = c->in + c->head_len;
    size_t n = c->in_len - c->head_len;
    if (c->req.chunked) {
        /* decoded into c->body as it comes */
        long used = sg_fm_h1_chunked_consume(&c->chunked, b, n);
        if (used < 0) {
            reply_error(c, 400, "malformed chunked body");
            return -1;
        }
        c->head_len += (size_t)used;
        if (c->body_oom) {
            reply_error(c, 503, "out of memory"); /* the body is not whole here */
            return -1;
        }
        if (c->chunked.body_bytes > p->max_body) {
            reply_error(c, 413, "request body too large");
            return -1;
        }
        return c->chunked.done ? 1 : 0;
    }
    int64_t want = c->req.content_length < 0 ? 0 : c->req.content_length;
    if ((uint64_t)want > p->max_body) {
        reply_error(c, 413, "request body too large");
        return -1;
    }
    if (n < (size_t)want) {
        return 0;
    }
    if (want > 0) {
        c->body = malloc((size_t)want + 1);
        if (c->body == NULL) {
            reply_error(c, 503, "out of memory");
            return -1;
        }
        memcpy(c->body, b, (size_t)want);
        c->body[want] = '\0';
        c->body_len = (size_t)want;
    }
    return 1;
}

static void on_chunk_data(void *ud, const char *data, size_t len) {
    struct conn *c = ud;
    if (c->body_len + len > c->proxy->max_body) {
        return; /* counted in body_bytes: read_body refuses it */
    }
    char *nb = realloc(c->body, c->body_len + len + 1);
    if (nb == NULL) {
        c->body_oom = true; /* never forwarded without these bytes */
        return;
    }
    c->body = nb;
    memcpy(c->body + c->body_len, data, len);
    c->body_len += len;
    c->body[c->body_len] = '\0';
}

static void parse(struct conn *c) {
    if (c->state == C_HEAD) {
        size_t head = sg_fm_h1_find_head_end(c->in, c->in_len, &c->scanned);
        if (head == 0) {
            if (c->in_len > PROXY_MAX_HEAD) {
                reply_error(c, 431, "request head too large");
            }
            return;
        }
        int rv = head > PROXY_MAX_HEAD ? SG_FM_H1_ETOOLARGE
                                       : sg_fm_h1_parse_request(c->in, head, &c->req);
        if (rv < 0) {
            int status = sg_fm_h1_error_status(rv);
            reply_error(c, status, sg_fm_h1_status_text(status));
            return;
        }
        c->head_len = head;
        c->arrived = now_ns();
        c->state = C_BODY;
        /* the body has a window of its own, renewed as it arrives */
        c->header_deadline = sg_time_add(c->arrived, c->proxy->header_timeout);
        if (c->req.chunked) {
            memset(&c->chunked, 0, sizeof(c->chunked));
            c->chunked.on_data = on_chunk_data;
            c->chunked.user_data = c;
        }
    }
    if (c->state == C_BODY) {
        int done = read_body(c);
        c->request_whole = done == 1; /* an answer now is to all of it */
        if (done == 1 && !serve_metrics(c)) {
            start_operation(c);
        }
    }
}

/* Room in @c->in for @need bytes.  Once the head is parsed (the body is
 * being read) the request's views point into @c->in: they move with it. */
static bool grow_in(struct conn *c, size_t need) {
    if (need <= c->in_cap) {
        return true;
    }
    sg_fm_h1_request *r = &c->req;
    const bool views = c->state == C_BODY;
    size_t method = 0, target = 0;
    size_t names[SG_FM_H1_MAX_HEADERS], values[SG_FM_H1_MAX_HEADERS];
    if (views) {
        method = (size_t)(r->method - c->in);
        target = (size_t)(r->target - c->in);
        for (size_t i = 0; i < r->num_headers; i++) {
            names[i] = (size_t)(r->headers[i].name - c->in);
            values[i] = (size_t)(r->headers[i].value - c->in);
        }
    }
    if (!grow(&c->in, &c->in_cap, need)) {
        return false;
    }
    if (views) {
        r->method = c->in + method;
        r->target = c->in + target;
        for (size_t i = 0; i < r->num_headers; i++) {
            r->headers[i].name = c->in + names[i];
            r->headers[i].value = c->in + values[i];
        }
    }
    return true;
}

static void read_client(struct conn *c) {
    for (;;) {
        if (c->state != C_HEAD && c->state != C_BODY) {
            /* a request is being answered: read (and drop) only to see
             * the client go */
            char sink[4096];
            ssize_t n = recv(c->fd, sink, sizeof(sink), 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                c->client_gone = true;
            }
            if (n <= 0) {
                return;
            }
            continue;
        }
        size_t limit = PROXY_MAX_HEAD + c->proxy->max_body + 65536;
        if (c->in_len > limit) {
            reply_error(c, 413, "request too large");
            return;
        }
        if (!grow_in(c, c->in_len + 16384)) {
            reply_error(c, 503, "out of memory");
            return;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            if (c->state == C_BODY) {
                c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
            }
            parse(c);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            c->client_gone = true;
        }
        return;
    }
}

void conn_ready(struct proxy *p, struct conn *c, uint32_t events) {
    (void)p;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        read_client(c);
    }
    if (events & (EPOLLHUP | EPOLLERR)) {
        c->client_gone = true;
    }
    flush_out(c);
    if (c->op != NULL && sg_curl_op_paused(c->op) && !c->client_gone &&
        c->out_len - c->out_off < c->proxy->client_buffer / 2) {
        /* caught up: the upstream read goes on (from the loop, as the
         * library requires: the held bytes may come in this call) */
        c->in_call = true;
        sg_curl_op_resume(c->op);
        c->in_call = false;
        flush_out(c);
    }
    if (c->client_gone || (c->state == C_CLOSING && c->out_len == 0)) {
        if (c->op != NULL) {
            sg_curl_op_cancel(c->op); /* on_done frees the connection */
        } else {
            conn_end(c);
        }
    }
}

int64_t conns_expire(struct proxy *p, int64_t now) {
    int64_t next = SG_TIME_NEVER;
    struct conn *c = p->conns;
    while (c != NULL) {
        struct conn *n = c->next;
        if (c->op != NULL && (c->too_slow || c->client_gone)) {
            sg_curl_op_cancel(c->op); /* the client cannot keep up, or left */
        } else if (c->state == C_HEAD || c->state == C_BODY) {
            if (now >= c->header_deadline) {
                reply_error(c, 408, "request not received in time");
                if (c->out_len == 0 || c->client_gone) {
                    conn_end(c);
                }
            } else if (c->header_deadline < next) {
                next = c->header_deadline;
            }
        } else if (c->lingering) {
            if (now >= c->header_deadline) {
                conn_free(c); /* answered; what it still sends is not read */
            } else if (c->header_deadline < next) {
                next = c->header_deadline;
            }
        } else if (c->state == C_CLOSING && c->op == NULL) {
            if (now >= c->header_deadline && client_took(c)) {
                /* the client took some of what the kernel holds for it: it
                 * reads, however slowly - it gets the whole answer */
                c->header_deadline = sg_time_add(now, c->proxy->header_timeout);
            }
            if (now >= c->header_deadline) {
                /* a client that takes nothing of its answer: said, not
                 * silently (the operation's own report was written at
                 * its end) */
                fprintf(stderr,
                        "sg-proxy: %s took nothing of its answer for %lld ms: the last "
                        "%zu bytes dropped, the connection reset\n",
                        c->peer, (long long)(c->proxy->header_timeout / SG_MS(1)),
                        c->out_len - c->out_off);
                conn_free(c);
            } else if (c->header_deadline < next) {
                next = c->header_deadline;
            }
        }
        c = n;
    }
    return next;
}

void conns_cancel_all(struct proxy *p) {
    for (struct conn *c = p->conns; c != NULL; c = c->next) {
        if (c->op != NULL) {
            sg_curl_op_cancel(c->op);
        }
    }
}

void conns_close_idle(struct proxy *p) {
    struct conn *c = p->conns;
    while (c != NULL) {
        struct conn *n = c->next;
        if (c->op == NULL && (c->state == C_HEAD || c->state == C_BODY)) {
            conn_free(c); /* no request yet, or not whole: nothing to answer */
        }
        c = n;
    }
}

void conns_free(struct proxy *p) {
    while (p->conns != NULL) {
        conn_free(p->conns);
    }
}
