/*
 * conn.c - one client connection: its request, its answer's bytes, its
 * limits; its operation upstream is upstream.c's.
 *
 * READ: the head must be whole within the header timeout (else 408); the
 * body's reads at most that far apart.  What the bytes make is request.c's:
 * the head checked and routed as soon as it is whole (a request that will
 * not be served is answered then, before its body; one that will be gets
 * 100 Continue if it asked), then the body.  The whole request becomes one
 * operation (upstream.c), or the proxy's own path (GET /metrics,
 * /healthz, /readyz) is answered here.
 * WRITE: the stream's events wait in the relay where they were read, and
 * go out in one send per connection at the end of each pass of the loop
 * (conns_flush: every event the pass's upstream reads released, never a
 * send per event); what the proxy says itself (the head, an error) waits
 * in one buffer per connection, before them or after them in order.
 * Both are written as the socket takes them (never blocking); a paused
 * upstream read resumes when the client has read half of client_buffer.  A client that
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

void conn_deadline(struct conn *c, int64_t at) {
    c->header_deadline = at;
    if (at < c->proxy->expire_at) {
        c->proxy->expire_at = at;
    }
}

void conn_wake(struct conn *c) {
    c->proxy->expire_at = INT64_MIN;
}

static void watch(struct conn *c, bool out) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(c->proxy->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = out;
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

/* Sends @n bytes at @p: how many the socket took (never blocks). */
static size_t send_some(struct conn *c, const char *p, size_t n) {
    size_t done = 0;
    while (done < n && !c->client_gone) {
        ssize_t w = send(c->fd, p + done, n - done, MSG_NOSIGNAL);
        if (w > 0) {
            done += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            c->client_gone = true; /* reset, or closed: nobody reads */
            conn_wake(c);
        }
    }
    c->sent += done;
    if (done > 0 && c->state == C_CLOSING) {
        /* the rest of an answer: --header-timeout bounds a client that
         * takes nothing, not one that reads */
        conn_deadline(c, sg_time_add(now_ns(), c->proxy->header_timeout));
    }
    return done;
}

size_t client_waiting(const struct conn *c) {
    size_t n;
    (void)relay_out(&c->relay, &n);
    return c->out_len - c->out_off + n;
}

/* Writes what waits for the client (never blocks): out's bytes, then the
 * relay's released ones straight from where they were read. */
void flush_out(struct conn *c) {
    if (c->out_off < c->out_len) {
        c->out_off += send_some(c, c->out + c->out_off, c->out_len - c->out_off);
    }
    if (c->out_off == c->out_len) {
        /* out carries the head and what the proxy says: between them an
         * open stream keeps no buffer of its own */
        free(c->out);
        c->out = NULL;
        c->out_off = c->out_len = c->out_cap = 0;
        size_t n;
        const char *r = relay_out(&c->relay, &n);
        if (n > 0) {
            relay_drop(&c->relay, send_some(c, r, n));
        }
    }
    bool out = client_waiting(c) > 0 && !c->client_gone;
    if (out != c->want_out) {
        watch(c, out);
    }
}

void conn_dirty(struct conn *c) {
    if (!c->dirty) {
        c->dirty = true;
        c->dirty_next = c->proxy->dirty;
        c->proxy->dirty = c;
    }
}

void conns_flush(struct proxy *p) {
    while (p->dirty != NULL) {
        struct conn *c = p->dirty;
        p->dirty = c->dirty_next;
        c->dirty = false;
        c->dirty_next = NULL;
        /* as a writable socket would: the socket may take all of it, and
         * a read paused meanwhile then resumes here (no EPOLLOUT would
         * come for it), or the answer is whole */
        conn_ready(p, c, 0);
    }
}

/* Appends @n bytes for the client, after the relay's released bytes (they
 * came first).  false when the client has fallen more than client_buffer
 * behind (or memory ran out). */
bool put(struct conn *c, const void *p, size_t n) {
    if (c->client_gone) {
        return true; /* dropped: the operation is being cancelled */
    }
    /* the streaming bound is twice the buffer: a read is paused once the
     * client is a buffer behind, and the read that crossed it still fits;
     * while less than a buffer waits, an event goes in whole whatever its
     * size (the framing's max_event bounds it) */
    const size_t waiting = client_waiting(c);
    if (waiting + n > 2 * c->proxy->client_buffer && waiting > c->proxy->client_buffer &&
        c->state != C_CLOSING) {
        return false;
    }
    size_t rn;
    const char *r = relay_out(&c->relay, &rn);
    if (!grow(&c->out, &c->out_cap, c->out_len + rn + n)) {
        return false;
    }
    if (rn > 0) {
        memcpy(c->out + c->out_len, r, rn);
        c->out_len += rn;
        relay_drop(&c->relay, rn);
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
    trace_free(c); /* after the operation it observed */
    if (c->easy != NULL) {
        curl_easy_cleanup(c->easy);
        c->easy = NULL;
    }
    pool_leave(c); /* after its handle: upstream.c */
    curl_slist_free_all(c->headers);
    c->headers = NULL;
}

/* The connection ends while its answer is not whole (bytes still wait
 * for the client, or what should end it could not be added): a reset, not
 * a clean close after a cut event - so no client reads a short answer as
 * a complete one.  SO_LINGER 0: close() then sends RST and drops what the
 * kernel still holds. */
static void reset_if_cut(struct conn *c) {
    if (c->client_gone || (client_waiting(c) == 0 && !c->cut)) {
        return;
    }
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

void conn_free(struct conn *c) {
    struct proxy *p = c->proxy;
    reset_if_cut(c);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        p->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    for (struct conn **pp = &p->dirty; c->dirty && *pp != NULL; pp = &(*pp)->dirty_next) {
        if (*pp == c) {
            *pp = c->dirty_next;
            break;
        }
    }
    /* never in the finish queue here: conns_finish takes a connection out
     * before it ends it, and conns_free drains the queue first */
    free_op(c);
    routes_unref(c->set);
    close(c->fd); /* leaves epoll by itself */
    if (c->rq != NULL) {
        preq_free(c->rq);
        free(c->rq);
    }
    free(c->in);
    free(c->url);
    free(c->body);
    pending_release(c);
    free(c->out);
    relay_free(&c->relay);
    free(c);
    p->nconns--;
}

void conn_finish_later(struct conn *c) {
    struct proxy *p = c->proxy;
    c->finishing = true;
    c->finish_next = NULL;
    if (p->finish_tail != NULL) {
        p->finish_tail->finish_next = c;
    } else {
        p->finish_head = c;
    }
    p->finish_tail = c;
}

void conns_finish(struct proxy *p, int64_t slice) {
    const int64_t until = sg_time_add(now_ns(), slice);
    while (p->finish_head != NULL) {
        struct conn *c = p->finish_head;
        p->finish_head = c->finish_next;
        if (p->finish_head == NULL) {
            p->finish_tail = NULL;
        }
        c->finish_next = NULL;
        finish_operation(c); /* may free c */
        if (now_ns() >= until) {
            break;
        }
    }
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
 * shutting down, or out of memory; 429 and 503: endpoint health held the
 * upstream back, until the Retry-After given).  Anything that went
 * upstream had the route's attempts for its retries: false, as for every
 * other error. */
static const char *should_retry(const struct conn *c, int status) {
    if (status < 400) {
        return "";
    }
    return (status == 408 || status == 429 || status == 503) && !upstream_sent(c)
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
    conn_deadline(c, sg_time_add(now_ns(), c->proxy->header_timeout));
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
        conn_deadline(c, sg_time_add(now_ns(), c->proxy->header_timeout));
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
        struct preq *rq = malloc(sizeof(*rq));
        if (c == NULL || rq == NULL) {
            free(c);
            free(rq);
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        c->proxy = p;
        c->id = ++p->next_id;
        c->state = C_HEAD;
        c->rq = rq;
        preq_init(c->rq, p->max_body);
        conn_deadline(c, sg_time_add(now_ns(), p->header_timeout));
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
            free(c->rq);
            free(c);
            continue;
        }
        c->next = p->conns;
        c->prev = NULL;
        if (p->conns != NULL) {
            p->conns->prev = c;
        }
        p->conns = c;
        p->nconns++;
    }
}

/* GET /healthz: the process answers (live) - while it drains too.  GET
 * /readyz: it takes requests - routes loaded, not draining - else 503. */
static void serve_health(struct conn *c) {
    const struct proxy *p = c->proxy;
    if (c->rq->own == PREQ_OWN_HEALTHZ) {
        reply(c, 200, "OK", NULL, "{\"status\":\"live\"}");
        return;
    }
    char body[96];
    if (p->draining || p->routes == NULL || p->routes->n == 0) {
        snprintf(body, sizeof(body), "{\"status\":\"%s\"}",
                 p->draining ? "draining" : "no routes");
        reply(c, 503, "Service Unavailable", NULL, body);
        return;
    }
    snprintf(body, sizeof(body), "{\"status\":\"ready\",\"routes\":%d}", p->routes->n);
    reply(c, 200, "OK", NULL, body);
}

/* GET /metrics, /healthz and /readyz are the proxy's own. */
static bool serve_own(struct conn *c) {
    if (c->rq->own == PREQ_OWN_NONE) {
        return false;
    }
    if (c->rq->own != PREQ_OWN_METRICS) {
        serve_health(c);
        return true;
    }
    /* whole, however many routes: measured, then written (the loop is
     * single-threaded: nothing changes between the two) */
    sg_health *h = health_in_force(c->proxy);
    const int64_t now = now_ns();
    struct health_share_figures fig;
    const struct health_share_figures *share =
        health_share_figures(c->proxy, &fig) ? &fig : NULL;
    size_t n = metrics_text(h, now, share, NULL, 0);
    char *text = malloc(n + 1);
    if (text == NULL) {
        reply_error(c, 503, "out of memory");
        return true;
    }
    n = metrics_text(h, now, share, text, n + 1);
    char head[256];
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n",
             n);
    c->state = C_CLOSING;
    conn_deadline(c, sg_time_add(now_ns(), c->proxy->header_timeout));
    put_str(c, head);
    (void)put(c, text, n);
    free(text);
    flush_out(c);
    return true;
}

/* The head is whole and checked (request.c; the request is whole when
 * @whole): its body's window opens, and the route is held (a reload must
 * not free it under the request). */
static bool head_read(struct conn *c, bool whole) {
    struct proxy *p = c->proxy;
    c->arrived = now_ns();
    c->state = C_BODY;
    conn_deadline(c, sg_time_add(c->arrived, p->header_timeout));
    if (c->rq->route != NULL) {
        c->route = c->rq->route;
        c->set = p->routes;
        c->set->refs++;
    }
    if (p->draining && c->rq->own != PREQ_OWN_HEALTHZ && c->rq->own != PREQ_OWN_READYZ) {
        /* a request that came after SIGTERM, on a connection from before
         * it: no new work while the proxy drains (said in its route's
         * provider's format); the probes say how it is */
        c->request_whole = whole;
        reply_error(c, 503, "shutting down");
        return false;
    }
    return true;
}

/* The request is whole, and answered or its operation started: the
 * parsed head goes, its bytes stay (in @c->in) for the operation's life. */
static void request_done(struct conn *c) {
    c->in = c->rq->in;
    c->rq->in = NULL;
    preq_free(c->rq);
    free(c->rq);
    c->rq = NULL;
}

/* @n more bytes of the request were read. */
static void received(struct conn *c, size_t n) {
    const enum preq_state was = c->rq->state;
    const enum preq_state now = preq_got(c->rq, n, c->proxy->routes);
    if (now == PREQ_FAILED) {
        /* answered when the head is whole, before the body is read (a
         * client that sent Expect: 100-continue never sends it): the
         * connection lingers unless the request is all in */
        c->request_whole = c->rq->all_read;
        reply_error(c, c->rq->status, c->rq->why);
        return;
    }
    const bool head = was == PREQ_HEAD && now != PREQ_HEAD;
    if (head && !head_read(c, now == PREQ_WHOLE)) {
        return;
    }
    if (head && now == PREQ_BODY && c->rq->expect_continue) {
        /* the request will be read: the client may send its body (RFC
         * 9110 §10.1.1; curl waits a second for this before sending one
         * over 1 MiB) - unless it came with the head already */
        put_str(c, "HTTP/1.1 100 Continue\r\n\r\n");
        flush_out(c);
    }
    if (now == PREQ_WHOLE) {
        c->request_whole = true; /* an answer now is to all of it */
        preq_fit(c->rq);
        if (!serve_own(c)) {
            start_operation(c);
        }
        request_done(c);
    }
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
        /* the request's bytes are bounded by request.c: a head, a body,
         * and a read (the room doubles as a large body comes) */
        size_t room;
        char *at = preq_room(c->rq, 2048, &room);
        if (at == NULL) {
            reply_error(c, c->rq->status, c->rq->why);
            return;
        }
        ssize_t n = recv(c->fd, at, room, 0);
        if (n > 0) {
            if (c->state == C_BODY) {
                conn_deadline(c, sg_time_add(now_ns(), c->proxy->header_timeout));
            }
            received(c, (size_t)n);
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
    if (op_running(c) && sg_curl_op_paused(c->op) && !c->client_gone &&
        client_waiting(c) < c->proxy->client_buffer / 2) {
        /* caught up: the upstream read goes on (from the loop, as the
         * library requires: the held bytes may come in this call, and
         * the operation may end in it) */
        sg_curl_op_resume(c->op);
        flush_out(c);
    }
    if (c->finishing) {
        return; /* ended: the finish queue frees it (conns_finish) */
    }
    if (c->client_gone || (c->state == C_CLOSING && client_waiting(c) == 0)) {
        if (c->op != NULL) {
            sg_curl_op_cancel(c->op); /* on_done frees the connection */
        } else {
            conn_end(c);
        }
    }
}

int64_t conns_expire(struct proxy *p, int64_t now) {
    if (now < p->expire_at) {
        return p->expire_at; /* nothing due: no walk */
    }
    p->expire_at = SG_TIME_NEVER; /* lowered by what the walk sets */
    int64_t next = SG_TIME_NEVER;
    struct conn *c = p->conns;
    while (c != NULL) {
        struct conn *n = c->next;
        if (c->finishing) {
            /* ended: the finish queue frees it (conns_finish) */
        } else if (c->op != NULL && (c->too_slow || c->client_gone)) {
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
                conn_deadline(c, sg_time_add(now, c->proxy->header_timeout));
            }
            if (now >= c->header_deadline) {
                /* a client that takes nothing of its answer: said, not
                 * silently (the operation's own report was written at
                 * its end) */
                fprintf(stderr,
                        "sg-proxy: %s took nothing of its answer for %lld ms: the last "
                        "%zu bytes dropped, the connection reset\n",
                        c->peer, (long long)(c->proxy->header_timeout / SG_MS(1)),
                        client_waiting(c));
                conn_free(c);
            } else if (c->header_deadline < next) {
                next = c->header_deadline;
            }
        }
        c = n;
    }
    p->expire_at = sg_time_min(p->expire_at, next);
    return p->expire_at;
}

void conns_cancel_all(struct proxy *p) {
    for (struct conn *c = p->conns; c != NULL; c = c->next) {
        if (op_running(c)) {
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
    conns_finish(p, SG_TIME_NEVER); /* every ended operation's report */
    while (p->conns != NULL) {
        conn_free(p->conns);
    }
}
