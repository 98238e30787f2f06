/*
 * The links under a connection.  A link is one TCP connection and its
 * HTTP/2 session, made without blocking the caller's loop: DNS through
 * c-ares, the connect race over the addresses (Happy Eyeballs), the TLS
 * handshake - each moved on by the step whenever its sockets are ready,
 * all of them watched through the connection's one epoll instance.
 *
 * New streams go on the current link.  One that received GOAWAY (or ran
 * out of stream ids) keeps the streams that run on it until they end,
 * while new streams go on a new link beside it; an old link with nothing
 * left on it is closed.  Operations launched while the current link is
 * still connecting wait for it (phase connect, under their own clocks)
 * and are sent the moment it is ready.
 */
#define _GNU_SOURCE
#include "h2/internal.h"

#include <ares.h>
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

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

/* --------------------------------------------------------------- epoll */

static void watch(sg_h2_conn *c, int fd, uint32_t events) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.fd = fd;
    if (epoll_ctl(c->epfd, EPOLL_CTL_MOD, fd, &ev) != 0 && errno == ENOENT) {
        epoll_ctl(c->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
}

/* What epoll reported for @fd in this step (0: nothing). */
static uint32_t readiness(const sg_h2_conn *c, int fd) {
    if (c->nev == SG__H2_ALL_READY) {
        return EPOLLIN | EPOLLOUT;
    }
    for (int i = 0; i < c->nev; i++) {
        if (c->ev[i].data.fd == fd) {
            return c->ev[i].events;
        }
    }
    return 0;
}

/* ------------------------------------------------------------- session */

static int session_open(sg__h2_link *l) {
    sg_h2_conn *c = l->conn;
    if (nghttp2_session_client_new2(&l->session, c->cbs, l, c->h2opt) != 0) {
        l->session = NULL;
        snprintf(l->errbuf, sizeof(l->errbuf), "nghttp2 session setup failed");
        return SG_EH2;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, c->opts.stream_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, c->opts.max_header_list},
    };
    int rv = nghttp2_submit_settings(l->session, NGHTTP2_FLAG_NONE, iv,
                                     sizeof(iv) / sizeof(iv[0]));
    if (rv == 0) {
        /* The connection window is raised with a WINDOW_UPDATE on stream 0
         * (it has no SETTINGS), so long generations never stall on it. */
        rv = nghttp2_session_set_local_window_size(l->session, NGHTTP2_FLAG_NONE, 0,
                                                   (int32_t)c->opts.conn_window);
    }
    if (rv != 0) {
        nghttp2_session_del(l->session);
        l->session = NULL;
        snprintf(l->errbuf, sizeof(l->errbuf), "nghttp2 setup failed: %s",
                 nghttp2_strerror(rv));
        return SG_EH2;
    }
    return 0;
}

/* --------------------------------------------------------- end of a link */

static void resolver_stop(sg__h2_link *l) {
    if (l->ares != NULL) {
        ares_channel ch = l->ares;
        l->ares = NULL; /* on_resolved sees ARES_EDESTRUCTION and returns */
        ares_destroy(ch);
    }
    l->nares = 0; /* closed sockets leave epoll by themselves */
}

/* Closes everything under @l; it is freed once nothing refers to it. */
static void link_close(sg__h2_link *l) {
    sg_h2_conn *c = l->conn;
    resolver_stop(l);
    sg__h2_racer_close(&l->race);
    if (l->session != NULL) {
        nghttp2_session_del(l->session);
        l->session = NULL;
    }
    sg__h2_close_transport(l);
    l->state = SG__H2L_CLOSED;
    l->usable = false;
    if (c->cur == l) {
        c->cur = NULL;
    }
}

/* The link could not be made: every operation waiting for it ends its
 * attempt in phase connect, never sent. */
static void link_fail(sg__h2_link *l, int rv, int64_t now) {
    sg_h2_conn *c = l->conn;
    l->fail_rv = rv;
    c->fail_rv = rv;
    snprintf(c->errbuf, sizeof(c->errbuf), "%s", l->errbuf);
    sg_outcome how =
        rv == SG_ETIMEDOUT ? SG_OUTCOME_CONNECT_TIMEOUT : SG_OUTCOME_TRANSPORT_ERROR;
    for (sg_h2_op *op = c->ops; op != NULL; op = op->next) {
        if (op->link == l && op->waiting) {
            op->lc.not_processed = true;
            sg__lc_error(&op->lc, "%s", l->errbuf);
            sg__h2_decide(op, now, how, -1);
        }
    }
    link_close(l);
}

/* The connection is gone: every attempt with a stream on it ends now, in
 * the phase it reached.  Must not be called from an nghttp2 callback. */
static void link_lose(sg__h2_link *l) {
    sg_h2_conn *c = l->conn;
    int64_t now = sg__h2_now(c);
    if (l->errbuf[0] == '\0') {
        snprintf(l->errbuf, sizeof(l->errbuf), "connection lost");
    }
    snprintf(c->errbuf, sizeof(c->errbuf), "%s", l->errbuf);
    l->usable = false;
    for (sg_h2_op *op = c->ops; op != NULL; op = op->next) {
        if (op->link != l ||
            (op->lc.state != SG__LC_RUNNING && op->lc.state != SG__LC_DRAINING)) {
            continue;
        }
        /* A request whose HEADERS never left (queued behind the peer's
         * concurrency limit) was never seen by the server: however the
         * server broke the connection, it broke nothing of that request,
         * which is unsent and retried like any never sent. */
        op->lc.not_processed = !op->lc.sent;
        sg__lc_error(&op->lc, "%s", l->errbuf);
        sg__h2_decide(op, now,
                      !op->lc.sent            ? SG_OUTCOME_TRANSPORT_ERROR
                      : l->peer_broke         ? SG_OUTCOME_PROTOCOL_ERROR
                      : op->lc.body_is_stream ? SG_OUTCOME_TRUNCATED
                                              : SG_OUTCOME_TRANSPORT_ERROR,
                      -1);
    }
    link_close(l);
}

void sg__h2_link_free(sg__h2_link *l) {
    if (l == NULL) {
        return;
    }
    if (l->session != NULL && l->fd >= 0 &&
        nghttp2_session_terminate_session(l->session, NGHTTP2_NO_ERROR) == 0) {
        /* Best effort, never blocking: what is queued (RST_STREAM of the
         * operations just dropped) and a GOAWAY tell the server to stop. */
        sg__h2_flush(l);
    }
    link_close(l);
    free(l->out);
    free(l);
}

/* ----------------------------------------------------------- connecting */

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_lib_rc;

static void ares_lib_init(void) {
    ares_lib_rc = ares_library_init(ARES_LIB_INIT_ALL);
}

/* c-ares says which of its sockets to watch. */
static void on_ares_socket(void *data, ares_socket_t fd, int readable, int writable) {
    sg__h2_link *l = data;
    size_t i = 0;
    while (i < l->nares && l->ares_fd[i] != fd) {
        i++;
    }
    if (!readable && !writable) {
        epoll_ctl(l->conn->epfd, EPOLL_CTL_DEL, fd, NULL);
        if (i < l->nares) {
            l->ares_fd[i] = l->ares_fd[--l->nares];
        }
        return;
    }
    if (i == l->nares) {
        if (l->nares == SG__H2_ARES_FDS) {
            return; /* cannot happen (ARES_GETSOCK_MAXNUM); its timeout still runs */
        }
        l->ares_fd[l->nares++] = fd;
    }
    watch(l->conn, fd, (readable ? EPOLLIN : 0) | (writable ? EPOLLOUT : 0));
}

static void race_begin(sg__h2_link *l, const struct sockaddr *const *addrs,
                       const socklen_t *lens, size_t n) {
    const struct sockaddr *ordered[SG__H2_MAX_RACE];
    socklen_t olen[SG__H2_MAX_RACE];
    n = sg__h2_order_addresses(addrs, lens, n, ordered, olen, SG__H2_MAX_RACE);
    sg__h2_racer_init(&l->race, ordered, olen, n, sg__h2_now(l->conn), l->conn->epfd);
    l->state = SG__H2L_CONNECTING;
}

static void on_resolved(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
    (void)timeouts;
    sg__h2_link *l = arg;
    if (status == ARES_EDESTRUCTION || status == ARES_ECANCELLED || l->ares == NULL) {
        ares_freeaddrinfo(res);
        return; /* the link is going away */
    }
    l->resolved = true;
    const struct sockaddr *addrs[SG__H2_MAX_RACE * 2];
    socklen_t lens[SG__H2_MAX_RACE * 2];
    size_t n = 0;
    for (struct ares_addrinfo_node *ai = res != NULL ? res->nodes : NULL;
         ai != NULL && n < SG__H2_MAX_RACE * 2; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6) {
            addrs[n] = ai->ai_addr;
            lens[n++] = (socklen_t)ai->ai_addrlen;
        }
    }
    if (status != ARES_SUCCESS || n == 0) {
        snprintf(l->errbuf, sizeof(l->errbuf), "cannot resolve %s: %s", l->conn->host,
                 status != ARES_SUCCESS ? ares_strerror(status) : "no address");
    } else {
        race_begin(l, addrs, lens, n); /* copies the addresses */
    }
    ares_freeaddrinfo(res);
}

/* An IP literal needs no resolver. */
static bool numeric_host(const sg_h2_conn *c, struct sockaddr_storage *ss,
                         socklen_t *len) {
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, c->host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)c->opts.port);
        *len = sizeof(*v4);
        return true;
    }
    if (inet_pton(AF_INET6, c->host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)c->opts.port);
        *len = sizeof(*v6);
        return true;
    }
    return false;
}

static int resolve_start(sg__h2_link *l) {
    sg_h2_conn *c = l->conn;
    l->started = true;
    struct sockaddr_storage ss;
    socklen_t len;
    if (numeric_host(c, &ss, &len)) {
        const struct sockaddr *sa = (const struct sockaddr *)&ss;
        race_begin(l, &sa, &len, 1);
        return 0;
    }
    pthread_once(&ares_once, ares_lib_init);
    struct ares_options o;
    memset(&o, 0, sizeof(o));
    o.sock_state_cb = on_ares_socket;
    o.sock_state_cb_data = l;
    ares_channel ch;
    int rc = ares_lib_rc;
    if (rc == ARES_SUCCESS) {
        rc = ares_init_options(&ch, &o, ARES_OPT_SOCK_STATE_CB);
    }
    if (rc != ARES_SUCCESS) {
        snprintf(l->errbuf, sizeof(l->errbuf), "cannot start the resolver: %s",
                 ares_strerror(rc));
        return SG_ECONNECT;
    }
    l->ares = ch;
    if (c->dns_servers != NULL &&
        (rc = ares_set_servers_ports_csv(ch, c->dns_servers)) != ARES_SUCCESS) {
        snprintf(l->errbuf, sizeof(l->errbuf), "invalid DNS servers \"%s\": %s",
                 c->dns_servers, ares_strerror(rc));
        return SG_ECONNECT;
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", c->opts.port);
    struct ares_addrinfo_hints hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    /* may answer at once (a name in /etc/hosts) */
    ares_getaddrinfo(ch, c->host, port, &hints, on_resolved, l);
    return 0;
}

/* DNS: start it, or hand c-ares what its sockets have, and its timeouts. */
static int resolve_step(sg__h2_link *l) {
    if (!l->started) {
        int rv = resolve_start(l);
        if (rv != 0) {
            return rv;
        }
    }
    if (l->ares != NULL && !l->resolved) {
        ares_socket_t rd[SG__H2_ARES_FDS], wr[SG__H2_ARES_FDS];
        size_t n = 0;
        for (size_t i = 0; i < l->nares; i++) {
            uint32_t ev = readiness(l->conn, l->ares_fd[i]);
            if (ev != 0) {
                rd[n] = (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) ? l->ares_fd[i]
                                                               : ARES_SOCKET_BAD;
                wr[n++] = (ev & EPOLLOUT) ? l->ares_fd[i] : ARES_SOCKET_BAD;
            }
        }
        for (size_t i = 0; i < n && !l->resolved; i++) {
            ares_process_fd(l->ares, rd[i], wr[i]);
        }
        if (!l->resolved) {
            ares_process_fd(l->ares, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* timeouts */
        }
    }
    if (l->resolved || l->state != SG__H2L_RESOLVING) {
        resolver_stop(l);
        if (l->state == SG__H2L_RESOLVING) {
            return SG_ECONNECT; /* on_resolved said why */
        }
    }
    return 0;
}

static void admit_waiting(sg__h2_link *l);

static void link_ready(sg__h2_link *l, int64_t now) {
    sg_h2_conn *c = l->conn;
    int rv = session_open(l);
    if (rv != 0) {
        link_fail(l, rv, now);
        return;
    }
    l->state = SG__H2L_READY;
    l->usable = true;
    l->errbuf[0] = '\0';
    /* oldest first, as slots allow; the rest wait for a slot (phase send) */
    admit_waiting(l);
    for (sg_h2_op *op = c->ops; op != NULL; op = op->next) {
        if (op->link == l && op->waiting) {
            sg_guard_set_phase(sg__lc_guard(&op->lc), SG_PHASE_SEND, now);
        }
    }
}

static const char *connect_stage(const sg__h2_link *l) {
    switch (l->state) {
    case SG__H2L_RESOLVING:
        return "resolving the name";
    case SG__H2L_CONNECTING:
        return "TCP connect";
    default:
        return "TLS handshake";
    }
}

/* Moves a link that is not READY on; it may become READY or CLOSED. */
static void connect_step(sg__h2_link *l, int64_t now) {
    sg_h2_conn *c = l->conn;
    int rv = 0;
    if (l->state == SG__H2L_RESOLVING) {
        rv = resolve_step(l);
    }
    if (rv == 0 && l->state == SG__H2L_CONNECTING) {
        int64_t next;
        int fd = -1;
        rv = sg__h2_racer_step(&l->race, now, &fd, &next);
        if (rv == SG_ECONNECT) {
            snprintf(l->errbuf, sizeof(l->errbuf), "cannot connect to %s:%d: %s", c->host,
                     c->opts.port,
                     l->race.last_err ? strerror(l->race.last_err) : "no usable address");
        } else if (rv == 0) {
            int one = 1;
            /* Small frames (RST_STREAM, WINDOW_UPDATE) must not wait for Nagle. */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            /* A server that stops reading (a zero window) or a path that
             * went dark: once what we sent waits unacknowledged, or unsent,
             * connect_timeout long, the kernel ends the connection, and it
             * is lost - retries and new streams go on a new one instead of
             * queueing behind it. */
            int64_t ms = c->opts.connect_timeout / SG_MS(1);
            unsigned int ut =
                ms > (int64_t)UINT_MAX ? UINT_MAX : (unsigned int)(ms > 0 ? ms : 1);
            setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
            l->fd = fd;
            l->fd_events = EPOLLIN | EPOLLOUT;
            watch(c, fd, l->fd_events);
            if (c->opts.tls) {
                rv = sg__h2_tls_setup(l);
                l->state = SG__H2L_HANDSHAKING;
            } else {
                link_ready(l, now);
                return;
            }
        } else {
            rv = 0; /* still racing */
        }
    }
    if (rv == 0 && l->state == SG__H2L_HANDSHAKING) {
        rv = sg__h2_tls_step(l);
        if (rv == 0) {
            link_ready(l, now);
            return;
        }
        rv = rv == 1 ? 0 : rv;
    }
    if (rv == 0 && now >= l->connect_deadline) {
        snprintf(l->errbuf, sizeof(l->errbuf), "connect to %s:%d timed out (%s)", c->host,
                 c->opts.port, connect_stage(l));
        rv = SG_ETIMEDOUT;
    }
    if (rv != 0) {
        link_fail(l, rv, now);
    }
}

/* ------------------------------------------------------------- the step */

static int deliver(sg__h2_link *l, const uint8_t *data, size_t len) {
    sg_h2_conn *c = l->conn;
    c->in_recv++;
    ssize_t r = nghttp2_session_mem_recv(l->session, data, len);
    c->in_recv--;
    sg__h2_run_ended(c);
    if (r < 0) {
        /* Out of memory, or a callback of ours, is not the server's doing;
         * anything else nghttp2 refuses (a flood, bad framing) is. */
        if (r != NGHTTP2_ERR_NOMEM && r != NGHTTP2_ERR_CALLBACK_FAILURE) {
            l->peer_broke = true;
        }
        snprintf(l->errbuf, sizeof(l->errbuf), "%s: %s",
                 l->peer_broke ? "the server broke the HTTP/2 protocol"
                               : "connection lost: HTTP/2 error",
                 nghttp2_strerror((int)r));
        /* nghttp2 may have queued a GOAWAY; give it a chance to leave. */
        sg__h2_flush(l);
        return -1;
    }
    sg__h2_process_decided(l->conn);
    return 0;
}

sg__h2_link *sg__h2_link_for_streams(sg_h2_conn *c, int64_t now) {
    sg__h2_link *l = c->cur;
    if (l != NULL &&
        (l->state < SG__H2L_READY || (l->state == SG__H2L_READY && l->usable))) {
        return l;
    }
    /* The old link (GOAWAY, ids exhausted) drains beside the new one and
     * is closed once nothing runs on it. */
    c->cur = NULL;
    l = calloc(1, sizeof(*l));
    if (l == NULL) {
        snprintf(c->errbuf, sizeof(c->errbuf), "out of memory");
        return NULL;
    }
    l->conn = c;
    l->fd = -1;
    l->race.epfd = -1;
    l->state = SG__H2L_RESOLVING;
    l->connect_deadline = sg_time_add(now, c->opts.connect_timeout);
    l->next = c->links;
    c->links = l;
    c->cur = l;
    return l;
}

void sg__h2_links_step(sg_h2_conn *c, int64_t now, bool read) {
    for (sg__h2_link *l = c->links; l != NULL; l = l->next) {
        if (l->state < SG__H2L_READY) {
            connect_step(l, now);
        } else if (l->state == SG__H2L_READY && l->session != NULL &&
                   (l->more_to_read || (read && readiness(c, l->fd) != 0))) {
            /* a read that stopped at its budget reads on whatever this
             * step was told: the socket may hold more, or be empty (then
             * the read says so, and nothing is due at once any more) */
            if (sg__h2_read(l, deliver) != 0) {
                link_lose(l);
            }
            sg__h2_process_decided(c);
        }
    }
}

/* The session has nothing left to do (GOAWAY exchanged, streams done). */
static bool session_finished(const sg__h2_link *l) {
    return l->session != NULL && !nghttp2_session_want_read(l->session) &&
           !nghttp2_session_want_write(l->session);
}

/* The operation started first (c->ops is newest first), NULL when none:
 * waiting streams go oldest first from here, along ->prev. */
static sg_h2_op *oldest_op(const sg_h2_conn *c) {
    sg_h2_op *last = NULL;
    for (sg_h2_op *op = c->ops; op != NULL; op = op->next) {
        last = op;
    }
    return last;
}

/* Streams that wait for a slot on READY link @l go as slots free, in the
 * order they were started, each stamped now. */
static void admit_waiting(sg__h2_link *l) {
    sg_h2_conn *c = l->conn;
    if (l->state != SG__H2L_READY || l->waiting == 0 || !sg__h2_link_has_room(l)) {
        return;
    }
    /* c->ops is newest first: the oldest waiting goes first */
    sg_h2_op *last = oldest_op(c);
    int64_t now = sg__h2_now(c);
    for (sg_h2_op *op = last; op != NULL && sg__h2_link_has_room(l); op = op->prev) {
        if (op->link == l && op->waiting) {
            sg__h2_submit_waiting(op, now);
        }
    }
}

/* Streams waiting for a slot on READY link @l, which takes no new stream
 * now (GOAWAY, stream ids spent), oldest first: to the link new streams go
 * on, as one started now would (sent at once when it has room, else
 * waiting there; a new link's connect is part of their attempt). */
static void move_waiting(sg__h2_link *l) {
    sg_h2_conn *c = l->conn;
    sg_h2_op *last = oldest_op(c);
    int64_t now = sg__h2_now(c);
    for (sg_h2_op *op = last; op != NULL && l->waiting > 0; op = op->prev) {
        if (op->link != l || !op->waiting) {
            continue;
        }
        sg__h2_link *to = sg__h2_link_for_streams(c, now);
        if (to == NULL || to == l) {
            break; /* (no other link to be had: they wait here) */
        }
        l->waiting--;
        op->link = to;
        to->waiting++;
        if (to->state == SG__H2L_READY && sg__h2_link_has_room(to)) {
            sg__h2_submit_waiting(op, now);
        }
    }
}

void sg__h2_links_flush(sg_h2_conn *c) {
    /* first, so the walk below sees any link this opens (at the head) */
    for (sg__h2_link *l = c->links; l != NULL; l = l->next) {
        if (l->state == SG__H2L_READY && !l->usable && l->waiting > 0) {
            move_waiting(l);
        }
    }
    sg__h2_link **pp = &c->links;
    while (*pp != NULL) {
        sg__h2_link *l = *pp;
        admit_waiting(l);
        if (l->state == SG__H2L_READY && l != c->cur && l->active == 0) {
            /* an old link with nothing left on it: say goodbye */
            nghttp2_session_terminate_session(l->session, NGHTTP2_NO_ERROR);
        }
        if (l->state == SG__H2L_READY && sg__h2_flush(l) != 0) {
            link_lose(l);
        }
        if (l->state == SG__H2L_READY && session_finished(l)) {
            if (l->goaway) {
                snprintf(l->errbuf, sizeof(l->errbuf),
                         "connection closed after GOAWAY from the server");
            }
            if (l->active > 0 || l == c->cur) {
                link_lose(l);
            } else {
                link_close(l); /* done with: not a loss */
            }
        }
        if (l->state == SG__H2L_READY || l->state == SG__H2L_HANDSHAKING) {
            uint32_t want = EPOLLIN | (sg__h2_want_write(l) ? EPOLLOUT : 0);
            if (want != l->fd_events) {
                l->fd_events = want;
                watch(c, l->fd, want);
            }
        }
        if (l->state == SG__H2L_CLOSED && l->active == 0 && l->waiting == 0) {
            *pp = l->next;
            sg__h2_link_free(l);
            continue;
        }
        pp = &l->next;
    }
}

int64_t sg__h2_links_deadline(const sg_h2_conn *c, int64_t now) {
    int64_t at = SG_TIME_NEVER;
    for (const sg__h2_link *l = c->links; l != NULL; l = l->next) {
        if (l->state >= SG__H2L_READY) {
            continue;
        }
        if (l->state == SG__H2L_RESOLVING && !l->started) {
            return INT64_MIN; /* to be started by the next step */
        }
        at = sg_time_min(at, l->connect_deadline);
        if (l->state == SG__H2L_RESOLVING && l->ares != NULL) {
            struct timeval tv;
            if (ares_timeout(l->ares, NULL, &tv) != NULL) {
                at = sg_time_min(at,
                                 sg_time_add(now, SG_SEC(tv.tv_sec) + SG_US(tv.tv_usec)));
            }
        }
        if (l->state == SG__H2L_CONNECTING && l->race.next < l->race.n) {
            at = sg_time_min(at, l->race.next_start);
        }
    }
    return at;
}

bool sg__h2_links_more_to_read(const sg_h2_conn *c) {
    for (const sg__h2_link *l = c->links; l != NULL; l = l->next) {
        if (l->state == SG__H2L_READY && l->more_to_read) {
            return true;
        }
    }
    return false;
}
