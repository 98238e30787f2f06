/*
 * The connection under the operations: the step, the blocking run loop,
 * and the connection's life.  Its links (TCP connections and their
 * sessions) are in link.c, the socket and TLS in io.c, the operations in
 * op.c.
 */
#define _GNU_SOURCE
#include "h2/internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SG__H2_DEFAULT_CONNECT SG_SEC(10)
#define SG__H2_DEFAULT_STREAM_WINDOW (4u << 20)
#define SG__H2_DEFAULT_CONN_WINDOW (16u << 20)
#define SG__H2_DEFAULT_MAX_HEADER_LIST (64u << 10)

/* The one READY link, when it is the only one (the common case). */
static const sg__h2_link *only_link(const sg_h2_conn *c) {
    const sg__h2_link *l = c->links;
    return l != NULL && l->next == NULL && l->state == SG__H2L_READY ? l : NULL;
}

/* Moves every link on at @now, with this instant's readiness (asked of
 * epoll, without waiting), then forgets it. */
static void links_step(sg_h2_conn *c, int64_t now, bool readable) {
    if (only_link(c) != NULL) {
        /* One socket (the common case): no need to ask which is ready. */
        c->nev = SG__H2_ALL_READY;
    } else {
        c->nev = epoll_wait(c->epfd, c->ev, SG__H2_MAX_EVENTS, 0);
        c->nev = c->nev < 0 ? 0 : c->nev;
    }
    sg__h2_links_step(c, now, readable);
    c->nev = 0;
}

int sg_h2_conn_step(sg_h2_conn *c, int64_t now, bool readable, bool writable) {
    (void)writable; /* the epoll instance says which socket is ready */
    if (c == NULL) {
        return SG_EINVAL;
    }
    links_step(c, now, readable);
    sg__h2_process_decided(c);
    sg__h2_run_intents(c, now);
    sg__h2_run_due(c, now);
    sg__h2_links_flush(c);
    sg__h2_process_decided(c);
    /* A retry may have submitted, or a link failed: push it out now. */
    sg__h2_links_flush(c);
    sg__h2_process_decided(c);
    return c->running;
}

/* Waits until @until (SG_TIME_NEVER: no limit) on the epoll instance - or,
 * with one READY link, on its socket itself, which spares the kernel a
 * level of wake-ups.  Returns 1 when ready, 0 when the time is up, or
 * SG_ESYS. */
static int wait_until(sg_h2_conn *c, int64_t now, int64_t until) {
    /* the intents' fds are watched in epfd only */
    const sg__h2_link *l = c->intents.n == 0 ? only_link(c) : NULL;
    struct pollfd p = {c->epfd, POLLIN, 0};
    if (l != NULL) {
        p.fd = l->fd;
        p.events = POLLIN | (sg__h2_want_write(l) ? POLLOUT : 0);
    }
    struct timespec ts;
    struct timespec *tsp = NULL;
    if (until != SG_TIME_NEVER) {
        int64_t wait = until > now ? until - now : 0;
        ts.tv_sec = (time_t)(wait / SG_SEC(1));
        ts.tv_nsec = (long)(wait % SG_SEC(1));
        tsp = &ts;
    }
    int n = ppoll(&p, 1, tsp, NULL);
    if (n < 0 && errno != EINTR) {
        return SG_ESYS;
    }
    return n > 0;
}

int sg_h2_conn_run(sg_h2_conn *c) {
    if (c == NULL) {
        return SG_EINVAL;
    }
    while (c->running > 0) {
        int64_t next = sg_h2_conn_next_deadline(c);
        if (next == SG_TIME_NEVER && c->links == NULL) {
            /* Cannot happen: every running op has a deadline (its budget).
             * Guard against a hang all the same. */
            return SG_ESTATE;
        }
        int ready = wait_until(c, sg__h2_now(c), next);
        if (ready < 0) {
            return SG_ESYS;
        }
        sg_h2_conn_step(c, sg__h2_now(c), ready > 0, true);
    }
    return 0;
}

/* ---------------------------------------------------------- connection */

static void conn_err_out(const sg_h2_conn_options *opts, const char *msg) {
    if (opts != NULL && opts->errbuf != NULL) {
        snprintf(opts->errbuf, SG_H2_ERROR_SIZE, "%s", msg);
    }
}

int sg_h2_conn_connect(sg_h2_conn *c) {
    if (c == NULL) {
        return SG_EINVAL;
    }
    return sg__h2_link_for_streams(c, sg__h2_now(c)) != NULL ? 0 : SG_ENOMEM;
}

bool sg_h2_conn_connecting(const sg_h2_conn *c) {
    return c != NULL && c->cur != NULL && c->cur->state < SG__H2L_READY;
}

/* sg_h2_conn_new without connect_on_demand: the first link, made now
 * (the loop is ours until it is READY or failed). */
static int connect_now(sg_h2_conn *c) {
    /* Real time bounds the wait whatever clock is injected. */
    int64_t real_end = sg_time_add(sg_clock_monotonic_now(NULL), c->opts.connect_timeout);
    sg__h2_link *l = sg__h2_link_for_streams(c, sg__h2_now(c));
    if (l == NULL) {
        return SG_ENOMEM;
    }
    for (;;) {
        int64_t now = sg__h2_now(c);
        links_step(c, now, true);
        if (l->state == SG__H2L_READY) {
            return 0;
        }
        if (l->state == SG__H2L_CLOSED) {
            return l->fail_rv;
        }
        /* what the socket is watched for, as a step's flush narrows it: a
         * handshake waiting for the server waits for it to be readable,
         * not for a socket that is always writable (the link, neither
         * ready nor closed, stays) */
        sg__h2_links_flush(c);
        int64_t left = real_end - sg_clock_monotonic_now(NULL);
        if (left <= 0) {
            snprintf(c->errbuf, sizeof(c->errbuf), "connect to %s:%d timed out", c->host,
                     c->opts.port);
            return SG_ETIMEDOUT;
        }
        int64_t until =
            sg_time_min(sg__h2_links_deadline(c, now), sg_time_add(now, left));
        if (wait_until(c, now, until) < 0) {
            return SG_ESYS;
        }
    }
}

int sg_h2_conn_new(sg_h2_conn **out, const sg_h2_conn_options *opts) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL; /* on every error */
    if (opts == NULL) {
        return SG_EINVAL;
    }
    sg_h2_conn_options o = *opts;
    if (o.host == NULL || o.port == 0) {
        conn_err_out(opts, "no host or port set"); /* the setters checked the rest */
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
    sg__watch_init(&c->intents);
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    c->host = sg__h2_strdup(o.host);
    c->server_name = sg__h2_strdup(o.server_name != NULL ? o.server_name : o.host);
    c->cafile = sg__h2_strdup(o.cafile);
    c->dns_servers = sg__h2_strdup(o.dns_servers);
    bool default_port = o.port == (o.tls ? 443 : 80);
    size_t alen = strlen(o.host) + 16;
    c->authority = malloc(alen);
    if (c->epfd < 0) {
        sg_h2_conn_free(c);
        conn_err_out(opts, "epoll_create1 failed");
        return SG_ESYS;
    }
    if (c->host == NULL || c->server_name == NULL || c->authority == NULL ||
        (o.cafile != NULL && c->cafile == NULL) ||
        (o.dns_servers != NULL && c->dns_servers == NULL) ||
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
    o.dns_servers = c->dns_servers;
    o.errbuf = NULL;
    c->clock = o.clock;
    c->has_clock = o.has_clock;
    c->opts = o;
    sg__h2_set_callbacks(c->cbs);
    /* Response headers are bounded by our own max_header_list check. */
    nghttp2_option_set_max_send_header_block_length(c->h2opt, 1u << 20);

    int rv = o.connect_on_demand ? 0 : connect_now(c);
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
        sg__h2_link *l = op->link;
        if (l != NULL && op->stream_id > 0 && l->session != NULL) {
            nghttp2_submit_rst_stream(l->session, NGHTTP2_FLAG_NONE, op->stream_id,
                                      NGHTTP2_CANCEL);
            nghttp2_session_set_stream_user_data(l->session, op->stream_id, NULL);
        }
        sg__h2_op_release(op);
    }
    while (c->links != NULL) {
        sg__h2_link *l = c->links;
        c->links = l->next;
        sg__h2_link_free(l);
    }
    sg__watch_close(&c->intents);
    if (c->epfd >= 0) {
        close(c->epfd);
    }
    SSL_CTX_free(c->ssl_ctx);
    nghttp2_session_callbacks_del(c->cbs);
    nghttp2_option_del(c->h2opt);
    free(c->rbuf);
    sg__dheap_free(&c->heap);
    free(c->host);
    free(c->server_name);
    free(c->cafile);
    free(c->dns_servers);
    free(c->authority);
    sg__health_slot_free(&c->health); /* streams still holding it keep it */
    free(c);
}

int sg_h2_conn_set_health(sg_h2_conn *c, sg_health *h) {
    if (c == NULL) {
        return SG_EINVAL;
    }
    sg__health_slot_set(&c->health, h);
    return 0;
}

int sg_h2_conn_set_retry_budget(sg_h2_conn *c, sg_retry_budget *b) {
    if (c == NULL) {
        return SG_EINVAL;
    }
    c->retry_budget = b;
    return 0;
}

int sg_h2_conn_fd(const sg_h2_conn *c) {
    return c != NULL ? c->epfd : -1;
}

bool sg_h2_conn_want_write(const sg_h2_conn *c) {
    if (c == NULL) {
        return false;
    }
    for (const sg__h2_link *l = c->links; l != NULL; l = l->next) {
        if (sg__h2_want_write(l)) {
            return true;
        }
    }
    return false;
}

int64_t sg_h2_conn_next_deadline(sg_h2_conn *c) {
    if (c == NULL) {
        return -1;
    }
    if (c->done_head != NULL || sg__h2_links_more_to_read(c)) {
        return INT64_MIN; /* decided attempts, or unread bytes, wait for a step */
    }
    return sg_time_min(sg__dheap_earliest(&c->heap, NULL),
                       sg__h2_links_deadline(c, sg__h2_now(c)));
}

int sg_h2_conn_running(const sg_h2_conn *c) {
    return c != NULL ? c->running : SG_EINVAL;
}

bool sg_h2_conn_usable(const sg_h2_conn *c) {
    return c != NULL && c->cur != NULL && c->cur->state == SG__H2L_READY &&
           c->cur->usable;
}

const char *sg_h2_conn_error(const sg_h2_conn *c) {
    return c != NULL ? c->errbuf : "";
}

int sg_h2_conn_failure(const sg_h2_conn *c) {
    return c != NULL ? c->fail_rv : SG_EINVAL;
}
