/*
 * The sg-fakemodel event loop: one thread, one epoll instance, level
 * triggered, non-blocking sockets, and one min-heap of timers.  No fixed
 * tick: epoll_wait sleeps exactly until the earliest timer.
 *
 * One listening port serves everything; the first bytes of each connection
 * choose the protocol (conn.c):
 *   0x16 (TLS handshake record)  -> TLS; ALPN "h2" -> HTTP/2, else HTTP/1.1
 *   "PRI " (HTTP/2 preface)      -> h2c with prior knowledge
 *   anything else                -> HTTP/1.1 cleartext
 *
 * This file holds the setup (listeners, signalfd, TLS, nghttp2), accepting,
 * the loop itself and the shutdown.  The server context is a local of
 * sg_fm_serve(), handed down explicitly: SIGTERM and SIGINT arrive on a
 * signalfd, so no signal handler needs a global to reach it.
 */
#include "server.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ------------------------------------------------------------ accepting */

static void set_listeners(sg_fm_server *srv, uint32_t events) {
    for (int i = 0; i < srv->nlisteners; i++) {
        struct epoll_event e = {.events = events, .data.ptr = &srv->listeners[i]};
        epoll_ctl(srv->epfd, EPOLL_CTL_MOD, srv->listeners[i].fd, &e);
    }
}

/* The accept timer, embedded in the server: listen again after a pause. */
static void accept_resume(sg_fm_timer *t) {
    sg_fm_server *srv =
        (sg_fm_server *)(void *)((char *)t - offsetof(sg_fm_server, accept_timer));
    set_listeners(srv, EPOLLIN);
}

static void on_accept(sg_fm_server *srv, ep_item *l) {
    for (int i = 0; i < 256; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                /* Out of descriptors: a level-triggered listener would spin,
                 * so stop listening briefly instead. */
                fprintf(stderr, "sg-fakemodel: accept: %s (pausing 100 ms)\n",
                        strerror(errno));
                set_listeners(srv, 0);
                sg_fm_timer_arm(&srv->timers, &srv->accept_timer,
                                sg_fm_now() + 100 * SG_FM_NS_PER_MS);
            }
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* On failure conn_open has closed fd: this client is dropped. */
        (void)conn_open(srv, fd);
    }
}

/* ------------------------------------------------------------ setup */

static int listen_on(int family, int port) {
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (family == AF_INET6) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        a6.sin6_addr = in6addr_loopback;
        rc = bind(fd, (struct sockaddr *)&a6, sizeof(a6));
    } else {
        struct sockaddr_in a4;
        memset(&a4, 0, sizeof(a4));
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        rc = bind(fd, (struct sockaddr *)&a4, sizeof(a4));
    }
    if (rc != 0 || listen(fd, 65535) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int bound_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        return -1;
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int add_ep(sg_fm_server *srv, ep_item *it, ep_tag tag, int fd) {
    it->tag = tag;
    it->fd = fd;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = it};
    return epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &e);
}

static void shutdown_all(sg_fm_server *srv) {
    while (srv->conns != NULL) {
        conn_close(srv->conns, 1);
    }
    conn_free_dead(srv);
    for (int i = 0; i < srv->nlisteners; i++) {
        close(srv->listeners[i].fd);
    }
    if (srv->sig.fd >= 0) {
        close(srv->sig.fd);
    }
    if (srv->epfd >= 0) {
        close(srv->epfd);
    }
    sg_fm_timers_free(&srv->timers);
    SSL_CTX_free(srv->ssl_ctx);
    h2_free_callbacks(srv);
    sg_fm_log_free();
    sg_fm_keys_reset();
    sg_fm_map_clear(&srv->limiters);
}

/* Sets up everything but the loop; on failure, says why and returns 1. */
static int setup(sg_fm_server *srv, const sigset_t *mask) {
    const sg_fm_options *o = srv->o;
    if (sg_fm_log_init(o->log_cap, o->log_file) != 0) {
        fprintf(stderr, "sg-fakemodel: cannot set up the log%s%s\n",
                o->log_file ? " file " : "", o->log_file ? o->log_file : "");
        return 1;
    }
    if (h2_init_callbacks(srv) != 0) {
        fprintf(stderr, "sg-fakemodel: nghttp2 setup failed\n");
        shutdown_all(srv);
        return 1;
    }
    if (o->tls) {
        srv->ssl_ctx = sg_fm_tls_new(&o->tls_opts);
        if (srv->ssl_ctx == NULL) {
            shutdown_all(srv);
            return 1;
        }
    }
    srv->epfd = epoll_create1(EPOLL_CLOEXEC);
    int sfd = signalfd(-1, mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (srv->epfd < 0 || sfd < 0 || add_ep(srv, &srv->sig, TAG_SIGNAL, sfd) != 0) {
        fprintf(stderr, "sg-fakemodel: epoll/signalfd: %s\n", strerror(errno));
        if (sfd >= 0 && srv->sig.fd < 0) {
            close(sfd);
        }
        shutdown_all(srv);
        return 1;
    }
    int fd4 = listen_on(AF_INET, o->port);
    if (fd4 < 0) {
        fprintf(stderr, "sg-fakemodel: cannot listen on 127.0.0.1:%d: %s\n", o->port,
                strerror(errno));
        shutdown_all(srv);
        return 1;
    }
    add_ep(srv, &srv->listeners[srv->nlisteners++], TAG_LISTENER, fd4);
    int port = bound_port(fd4);
    if (o->ipv6) {
        int fd6 = listen_on(AF_INET6, port);
        if (fd6 < 0) {
            fprintf(stderr, "sg-fakemodel: cannot listen on [::1]:%d: %s\n", port,
                    strerror(errno));
            shutdown_all(srv);
            return 1;
        }
        add_ep(srv, &srv->listeners[srv->nlisteners++], TAG_LISTENER, fd6);
    }
    /* The contract with scripts: the first stdout line is the port alone. */
    printf("%d\n", port);
    fflush(stdout);
    if (!o->quiet) {
        fprintf(stderr,
                "sg-fakemodel %s: listening on 127.0.0.1:%d%s (http/1.1, h2c%s%s)\n",
                SG_FM_VERSION, port, o->ipv6 ? " and [::1]" : "", o->tls ? ", TLS" : "",
                o->tls ? (o->no_h2 ? " http/1.1" : " h2+http/1.1") : "");
    }
    return 0;
}

/* ------------------------------------------------------------ the loop */

static void dispatch(sg_fm_server *srv, ep_item *it, uint32_t events) {
    switch (it->tag) {
    case TAG_LISTENER:
        on_accept(srv, it);
        break;
    case TAG_SIGNAL: {
        struct signalfd_siginfo si;
        while (read(srv->sig.fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            srv->stop = 1;
        }
        break;
    }
    case TAG_CONN: {
        conn *c = (conn *)it;
        if (!c->dead) {
            conn_on_event(c, events);
        }
        break;
    }
    default:
        break;
    }
}

int sg_fm_serve(const sg_fm_options *o) {
    sg_fm_server srv;
    memset(&srv, 0, sizeof(srv));
    srv.o = o;
    srv.epfd = -1;
    srv.sig.fd = -1;
    srv.limiters = (sg_fm_map)SG_FM_RL_MAP_INIT;
    sg_fm_timer_init(&srv.accept_timer, accept_resume);
    /* Blocked first: a SIGTERM during start-up waits for the signalfd and
     * still ends in a clean shutdown. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    if (setup(&srv, &mask) != 0) {
        return 1;
    }
    struct epoll_event evs[256];
    while (!srv.stop) {
        int n = epoll_wait(srv.epfd, evs, 256, sg_fm_timers_timeout_ms(&srv.timers));
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "sg-fakemodel: epoll_wait: %s\n", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            dispatch(&srv, evs[i].data.ptr, evs[i].events);
        }
        sg_fm_timers_run(&srv.timers);
        conn_free_dead(&srv);
    }
    if (!o->quiet) {
        fprintf(stderr, "sg-fakemodel: shutting down (%zu connections open)\n",
                srv.n_conns);
    }
    shutdown_all(&srv);
    return 0;
}
