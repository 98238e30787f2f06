/*
 * The bytes under an HTTP/2 session: a non-blocking TCP socket and, for
 * TLS, an SSL object on memory BIOs.  We own every read and write of the
 * socket, so a write to a vanished peer is send(MSG_NOSIGNAL) - never a
 * SIGPIPE - and TLS never blocks inside OpenSSL.
 *
 * Nothing here blocks: the connect race and the TLS handshake move on one
 * step at a time (link.c drives them from the loop), except sg__h2_race,
 * the blocking form of the race.
 */
#define _GNU_SOURCE
#include "h2/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

/* Bytes read per step at most, so that deadlines are enforced between
 * reads even when the peer sends faster than we parse (~1 ms of work). */
#define SG__H2_READ_BUDGET ((size_t)262144)
/* A connection's read buffer: SG__H2_READ_MIN bytes for a recv() at first
 * and while the connection is quiet - its streams open or not, bursts (the
 * first bytes of a thousand responses) included; SG__H2_READ_MAX once a
 * step reads its whole budget (the peer sends faster than we parse: then
 * 4 recv() a step, not 16), until SG__H2_READ_QUIET steps in a row have
 * each read less than SG__H2_READ_MIN.  TLS adds SG__H2_READ_MIN for the
 * plaintext: SSL_read gives one record, 16 KiB at most, per call. */
#define SG__H2_READ_MIN ((size_t)16384)
#define SG__H2_READ_MAX ((size_t)65536)
#define SG__H2_READ_QUIET 8
/* Bytes of frames gathered before one send(). */
#define SG__H2_WRITE_BATCH 65536

int64_t sg__h2_now(const sg_h2_conn *conn) {
    return sg_clock_now(conn->has_clock ? &conn->clock : NULL);
}

/* RFC 8305 §5: the "Connection Attempt Delay" before the next address is
 * tried beside a connect still in progress. */
#define SG__H2_ATTEMPT_DELAY SG_MS(250)

size_t sg__h2_order_addresses(const struct sockaddr *const *in, const socklen_t *in_len,
                              size_t n, const struct sockaddr **out, socklen_t *out_len,
                              size_t max) {
    size_t v6[SG__H2_MAX_RACE * 2], v4[SG__H2_MAX_RACE * 2];
    size_t n6 = 0, n4 = 0;
    int first = n > 0 ? in[0]->sa_family : AF_INET6;
    for (size_t i = 0; i < n; i++) {
        if (in[i]->sa_family == AF_INET6 && n6 < SG__H2_MAX_RACE * 2) {
            v6[n6++] = i;
        } else if (in[i]->sa_family == AF_INET && n4 < SG__H2_MAX_RACE * 2) {
            v4[n4++] = i;
        }
    }
    size_t k = 0, i6 = 0, i4 = 0;
    bool six = first == AF_INET6;
    while (k < max && (i6 < n6 || i4 < n4)) {
        size_t pick =
            six ? (i6 < n6 ? v6[i6++] : v4[i4++]) : (i4 < n4 ? v4[i4++] : v6[i6++]);
        out[k] = in[pick];
        out_len[k++] = in_len[pick];
        six = !six;
    }
    return k;
}

void sg__h2_racer_init(sg__h2_racer *r, const struct sockaddr *const *addrs,
                       const socklen_t *lens, size_t n, int64_t now, int epfd) {
    memset(r, 0, sizeof(*r));
    n = n < SG__H2_MAX_RACE ? n : SG__H2_MAX_RACE;
    for (size_t i = 0; i < n; i++) {
        size_t len = lens[i] <= sizeof(r->addr[i]) ? lens[i] : sizeof(r->addr[i]);
        memcpy(&r->addr[i], addrs[i], len);
        r->len[i] = (socklen_t)len;
    }
    r->n = n;
    r->next_start = now;
    r->epfd = epfd;
}

void sg__h2_racer_close(sg__h2_racer *r) {
    for (size_t i = 0; i < r->nfd; i++) {
        close(r->fd[i]); /* a closed socket leaves epoll by itself */
    }
    r->nfd = 0;
}

/* Starts the next address.  Returns a socket connected at once, or -1. */
static int race_start(sg__h2_racer *r, int64_t now) {
    const struct sockaddr *sa = (const struct sockaddr *)&r->addr[r->next];
    socklen_t len = r->len[r->next++];
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        r->last_err = errno;
        return -1;
    }
    if (connect(fd, sa, len) == 0) {
        return fd;
    }
    if (errno != EINPROGRESS) {
        r->last_err = errno;
        close(fd);
        return -1; /* failed at once: the next address now */
    }
    if (r->epfd >= 0) {
        struct epoll_event ev = {.events = EPOLLOUT, .data.fd = fd};
        epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    r->fd[r->nfd++] = fd;
    r->next_start = sg_time_add(now, SG__H2_ATTEMPT_DELAY);
    return -1;
}

int sg__h2_racer_step(sg__h2_racer *r, int64_t now, int *fd_out, int64_t *next) {
    /* which attempts finished (connected or failed) */
    struct pollfd pf[SG__H2_MAX_RACE];
    for (size_t i = 0; i < r->nfd; i++) {
        pf[i] = (struct pollfd){r->fd[i], POLLOUT, 0};
    }
    int got = r->nfd > 0 ? poll(pf, (nfds_t)r->nfd, 0) : 0;
    int winner = -1;
    size_t keep = 0;
    for (size_t i = 0; i < r->nfd; i++) {
        if (got <= 0 || pf[i].revents == 0 || winner >= 0) {
            r->fd[keep++] = r->fd[i];
            continue;
        }
        int err = 0;
        socklen_t elen = sizeof(err);
        if (getsockopt(r->fd[i], SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
            err = errno;
        }
        if (err == 0) {
            winner = r->fd[i];
            continue;
        }
        r->last_err = err;
        close(r->fd[i]);
        r->next_start = now; /* a failure starts the next address at once */
    }
    r->nfd = keep;
    while (winner < 0 && r->next < r->n && (now >= r->next_start || r->nfd == 0)) {
        winner = race_start(r, now);
    }
    if (winner >= 0) {
        sg__h2_racer_close(r);
        *fd_out = winner;
        return 0;
    }
    if (r->nfd == 0) {
        return SG_ECONNECT; /* every address failed */
    }
    *next = r->next < r->n ? r->next_start : SG_TIME_NEVER;
    return 1;
}

int sg__h2_race(const struct sockaddr *const *addrs, const socklen_t *lens, size_t n,
                int64_t deadline, int *fd_out, int *last_err) {
    sg__h2_racer r;
    sg__h2_racer_init(&r, addrs, lens, n, sg_clock_monotonic_now(NULL), -1);
    for (;;) {
        int64_t now = sg_clock_monotonic_now(NULL);
        if (now >= deadline) {
            break;
        }
        int64_t next = SG_TIME_NEVER;
        int rv = sg__h2_racer_step(&r, now, fd_out, &next);
        if (rv != 1) {
            *last_err = r.last_err;
            return rv;
        }
        int64_t until = sg_time_min(next, deadline);
        struct pollfd pf[SG__H2_MAX_RACE];
        for (size_t i = 0; i < r.nfd; i++) {
            pf[i] = (struct pollfd){r.fd[i], POLLOUT, 0};
        }
        int ms = until > now ? (int)((until - now + SG_MS(1) - 1) / SG_MS(1)) : 0;
        (void)poll(pf, (nfds_t)r.nfd, ms);
    }
    *last_err = r.last_err;
    sg__h2_racer_close(&r);
    return SG_ETIMEDOUT;
}

/* The most of l->out kept once it is all written (its first size). */
#define SG__H2_OUT_KEEP ((size_t)16384)

/* Appends @len bytes to l->out, the bytes waiting for the socket. */
static int out_push(sg__h2_link *l, const void *data, size_t len) {
    if (l->out_len + len > l->out_cap) {
        size_t cap = l->out_cap ? l->out_cap : SG__H2_OUT_KEEP;
        while (cap < l->out_len + len) {
            cap *= 2;
        }
        uint8_t *p = realloc(l->out, cap);
        if (p == NULL) {
            return SG_ENOMEM;
        }
        l->out = p;
        l->out_cap = cap;
    }
    memcpy(l->out + l->out_len, data, len);
    l->out_len += len;
    return 0;
}

/* Moves TLS output from the write BIO into l->out. */
static int wbio_drain(sg__h2_link *l) {
    uint8_t buf[16384];
    while (l->wbio != NULL && BIO_ctrl_pending(l->wbio) > 0) {
        int n = BIO_read(l->wbio, buf, (int)sizeof(buf));
        if (n <= 0) {
            break;
        }
        if (out_push(l, buf, (size_t)n) != 0) {
            return SG_ENOMEM;
        }
    }
    return 0;
}

/* Writes l->out.  Returns 0 when it is empty, 1 when the socket would
 * block, or a negative code when the connection failed. */
static int out_write(sg__h2_link *l) {
    while (l->out_off < l->out_len) {
        ssize_t n =
            send(l->fd, l->out + l->out_off, l->out_len - l->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 1;
            }
            snprintf(l->errbuf, sizeof(l->errbuf), "connection lost: send: %s",
                     strerror(errno));
            return SG_ECONNRESET;
        }
        l->out_off += (size_t)n;
    }
    l->out_off = 0;
    l->out_len = 0;
    if (l->out_cap > SG__H2_OUT_KEEP) {
        /* a burst (the requests of thousands of streams at once) grew it:
         * all written, it goes back rather than stay at its peak */
        free(l->out);
        l->out = NULL;
        l->out_cap = 0;
    }
    return 0;
}

static void tls_error(sg__h2_link *l, const char *what) {
    unsigned long e = ERR_get_error();
    char msg[160];
    if (e != 0) {
        ERR_error_string_n(e, msg, sizeof(msg));
    } else {
        snprintf(msg, sizeof(msg), "unexpected end of connection");
    }
    ERR_clear_error();
    snprintf(l->errbuf, sizeof(l->errbuf), "%s: %s", what, msg);
}

static bool is_ip_literal(const char *s) {
    unsigned char tmp[16];
    return inet_pton(AF_INET, s, tmp) == 1 || inet_pton(AF_INET6, s, tmp) == 1;
}

int sg__h2_tls_setup(sg__h2_link *l) {
    if (l->conn->ssl_ctx == NULL) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        if (ctx == NULL) {
            tls_error(l, "TLS setup");
            return SG_ETLS;
        }
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        /* RFC 9113 §9.2: h2 over TLS 1.2 needs no renegotiation. */
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
        static const unsigned char alpn[] = {2, 'h', '2'};
        SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn));
        if (!l->conn->opts.insecure) {
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
            int ok = l->conn->cafile != NULL
                         ? SSL_CTX_load_verify_locations(ctx, l->conn->cafile, NULL)
                         : SSL_CTX_set_default_verify_paths(ctx);
            if (ok != 1) {
                tls_error(l, l->conn->cafile != NULL ? "cannot load CA file"
                                                     : "cannot load CA store");
                SSL_CTX_free(ctx);
                return SG_ETLS;
            }
        }
        l->conn->ssl_ctx = ctx;
    }
    l->ssl = SSL_new(l->conn->ssl_ctx);
    l->rbio = BIO_new(BIO_s_mem());
    l->wbio = BIO_new(BIO_s_mem());
    if (l->ssl == NULL || l->rbio == NULL || l->wbio == NULL) {
        BIO_free(l->rbio);
        BIO_free(l->wbio);
        l->rbio = l->wbio = NULL;
        return SG_ENOMEM;
    }
    /* An empty memory BIO means "would block", not end of file. */
    BIO_set_mem_eof_return(l->rbio, -1);
    SSL_set_bio(l->ssl, l->rbio, l->wbio);
    SSL_set_connect_state(l->ssl);
    const char *name = l->conn->server_name;
    bool ip = is_ip_literal(name);
    if (!ip) {
        /* SNI never carries an IP address (RFC 6066 §3). */
        SSL_set_tlsext_host_name(l->ssl, l->conn->server_name);
    }
    if (!l->conn->opts.insecure) {
        /* RFC 9525 §6.3: the subject alternative names only, never the
         * subject's CN - the same policy as the libcurl transport. */
        X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(l->ssl),
                                        X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(l->ssl), name)
                    : SSL_set1_host(l->ssl, name);
        if (ok != 1) {
            tls_error(l, "cannot set the name to verify");
            return SG_ETLS;
        }
    }
    return 0;
}

int sg__h2_tls_step(sg__h2_link *l) {
    uint8_t buf[16384];
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(l->ssl);
        int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(l->ssl, r);
        if (wbio_drain(l) != 0) {
            snprintf(l->errbuf, sizeof(l->errbuf), "out of memory");
            return SG_ENOMEM;
        }
        if (out_write(l) < 0) {
            return SG_ETLS;
        }
        if (err == SSL_ERROR_NONE) {
            break;
        }
        if (err != SSL_ERROR_WANT_READ) {
            long vr = SSL_get_verify_result(l->ssl);
            if (vr != X509_V_OK) {
                snprintf(l->errbuf, sizeof(l->errbuf),
                         "TLS certificate verification failed: %s",
                         X509_verify_cert_error_string(vr));
                ERR_clear_error();
                return SG_ETLS_VERIFY;
            }
            tls_error(l, "TLS handshake failed");
            return SG_ETLS;
        }
        ssize_t n = recv(l->fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            return 1; /* the server's next flight is not here yet */
        }
        if (n <= 0) {
            snprintf(l->errbuf, sizeof(l->errbuf), "TLS handshake failed: %s",
                     n == 0 ? "connection closed by the server" : strerror(errno));
            return SG_ETLS;
        }
        BIO_write(l->rbio, buf, (int)n);
    }
    const unsigned char *alpn = NULL;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(l->ssl, &alpn, &alpn_len);
    if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0) {
        snprintf(l->errbuf, sizeof(l->errbuf),
                 "the server did not select ALPN h2 (selected: %.*s)", (int)alpn_len,
                 alpn_len > 0 ? (const char *)alpn : "none");
        return SG_EH2;
    }
    return 0;
}

void sg__h2_close_transport(sg__h2_link *l) {
    if (l->ssl != NULL) {
        SSL_free(l->ssl); /* frees both BIOs */
        l->ssl = NULL;
        l->rbio = l->wbio = NULL;
    }
    if (l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
    l->out_len = l->out_off = 0;
    l->more_to_read = false;
}

/* Makes conn->rbuf @size bytes for a recv() (and the plaintext's room
 * under TLS).  Its bytes are dead between reads: nothing is copied. */
static int rbuf_resize(sg_h2_conn *c, size_t size) {
    uint8_t *p = malloc(size + (c->opts.tls ? SG__H2_READ_MIN : 0));
    if (p == NULL) {
        return -1;
    }
    free(c->rbuf);
    c->rbuf = p;
    c->rbuf_size = size;
    return 0;
}

int sg__h2_read(sg__h2_link *l, int (*deliver)(sg__h2_link *, const uint8_t *, size_t)) {
    sg_h2_conn *c = l->conn;
    /* on the heap, once per connection and then when its size changes -
     * never 64 KiB on a caller's (perhaps small) stack */
    if (c->rbuf == NULL && rbuf_resize(c, SG__H2_READ_MIN) != 0) {
        snprintf(l->errbuf, sizeof(l->errbuf), "connection lost: out of memory");
        return -1;
    }
    size_t budget = SG__H2_READ_BUDGET;
    size_t got = 0; /* bytes this step */
    l->more_to_read = false;
    for (;;) {
        if (l->fd < 0) {
            return -1;
        }
        if (budget == 0) {
            /* A peer that sends faster than we parse must not starve the
             * clocks: stop here, let the step expire and flush, and say
             * that more is waiting (next deadline = now). */
            l->more_to_read = true;
            c->rbuf_quiet = 0;
            if (c->rbuf_size < SG__H2_READ_MAX) {
                /* (kept small when the large one cannot be had) */
                (void)rbuf_resize(c, SG__H2_READ_MAX);
            }
            return 0;
        }
        uint8_t *buf = c->rbuf;
        uint8_t *plain = c->opts.tls ? c->rbuf + c->rbuf_size : NULL;
        ssize_t n = recv(l->fd, buf, c->rbuf_size, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                c->rbuf_quiet = got < SG__H2_READ_MIN ? c->rbuf_quiet + 1 : 0;
                if (c->rbuf_quiet >= SG__H2_READ_QUIET &&
                    c->rbuf_size > SG__H2_READ_MIN) {
                    /* quiet again: the large buffer goes back (kept when
                     * the small one cannot be had) */
                    (void)rbuf_resize(c, SG__H2_READ_MIN);
                }
                return 0;
            }
            snprintf(l->errbuf, sizeof(l->errbuf), "connection lost: recv: %s",
                     strerror(errno));
            return -1;
        }
        if (n == 0) {
            snprintf(l->errbuf, sizeof(l->errbuf),
                     "connection lost: closed by the server");
            return -1;
        }
        got += (size_t)n;
        budget -= (size_t)n < budget ? (size_t)n : budget;
        l->recv_now = sg__h2_now(l->conn);
        if (l->ssl == NULL) {
            if (deliver(l, buf, (size_t)n) != 0) {
                return -1;
            }
            continue;
        }
        BIO_write(l->rbio, buf, (int)n);
        for (;;) {
            ERR_clear_error();
            int r = SSL_read(l->ssl, plain, (int)SG__H2_READ_MIN);
            if (r > 0) {
                if (deliver(l, plain, (size_t)r) != 0) {
                    return -1;
                }
                continue;
            }
            int err = SSL_get_error(l->ssl, r);
            if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
                break;
            }
            if (err == SSL_ERROR_ZERO_RETURN) {
                snprintf(l->errbuf, sizeof(l->errbuf),
                         "connection lost: TLS close_notify from the server");
            } else {
                tls_error(l, "connection lost: TLS");
            }
            return -1;
        }
    }
}

bool sg__h2_want_write(const sg__h2_link *l) {
    if (l->fd < 0) {
        return false;
    }
    return l->out_len > l->out_off ||
           (l->wbio != NULL && BIO_ctrl_pending(l->wbio) > 0) ||
           (l->session != NULL && nghttp2_session_want_write(l->session));
}

int sg__h2_flush(sg__h2_link *l) {
    if (l->fd < 0) {
        return -1;
    }
    for (;;) {
        if (l->ssl != NULL && wbio_drain(l) != 0) {
            snprintf(l->errbuf, sizeof(l->errbuf), "out of memory");
            return -1;
        }
        int w = out_write(l);
        if (w < 0) {
            return -1;
        }
        if (w == 1) {
            return 0; /* the socket is full; poll for POLLOUT */
        }
        if (l->session == NULL) {
            return 0;
        }
        /* l->out is empty: gather what nghttp2 has queued, up to one
         * batch, so many small frames (HEADERS, RST_STREAM, WINDOW_UPDATE)
         * leave in one send() - and, under TLS, in full-size records. */
        while (l->out_len < SG__H2_WRITE_BATCH) {
            const uint8_t *data = NULL;
            ssize_t n = nghttp2_session_mem_send(l->session, &data);
            if (n < 0) {
                snprintf(l->errbuf, sizeof(l->errbuf), "connection lost: nghttp2: %s",
                         nghttp2_strerror((int)n));
                return -1;
            }
            if (n == 0) {
                break;
            }
            if (out_push(l, data, (size_t)n) != 0) {
                snprintf(l->errbuf, sizeof(l->errbuf), "out of memory");
                return -1;
            }
        }
        if (l->out_len == 0) {
            return 0;
        }
        if (l->ssl != NULL) {
            /* Plaintext in, ciphertext out: into the memory BIO, SSL_write
             * completes in full; wbio_drain brings it back into out. */
            ERR_clear_error();
            int len = (int)l->out_len;
            l->out_len = 0;
            if (SSL_write(l->ssl, l->out, len) != len) {
                tls_error(l, "connection lost: TLS write");
                return -1;
            }
        }
    }
}
