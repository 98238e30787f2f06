/*
 * The bytes under an HTTP/2 session: a non-blocking TCP socket and, for
 * TLS, an SSL object on memory BIOs.  We own every read and write of the
 * socket, so a write to a vanished peer is send(MSG_NOSIGNAL) - never a
 * SIGPIPE - and TLS never blocks inside OpenSSL.
 *
 * Connecting (TCP + handshake) blocks for at most the connect timeout; the
 * rest never blocks.
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

#define SG__H2_READ_CHUNK 65536
/* Bytes read per step at most, so that deadlines are enforced between
 * reads even when the peer sends faster than we parse (~1 ms of work). */
#define SG__H2_READ_BUDGET (4 * SG__H2_READ_CHUNK)
/* Bytes of frames gathered before one send(). */
#define SG__H2_WRITE_BATCH 65536

int64_t sg__h2_now(const sg_h2_conn *conn) {
    return sg_clock_now(conn->has_clock ? &conn->clock : NULL);
}

/* Waits for @events on the socket until @deadline (monotonic, real time). */
static int wait_fd(int fd, short events, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - sg_clock_monotonic_now(NULL);
        if (left <= 0) {
            return SG_ETIMEDOUT;
        }
        struct pollfd p = {fd, events, 0};
        int ms = (int)((left + SG_MS(1) - 1) / SG_MS(1));
        int n = poll(&p, 1, ms);
        if (n > 0) {
            return 0;
        }
        if (n < 0 && errno != EINTR) {
            return SG_ESYS;
        }
    }
}

/* RFC 8305 §5: the "Connection Attempt Delay" before the next address is
 * tried beside a connect still in progress. */
#define SG__H2_ATTEMPT_DELAY SG_MS(250)
/* Connects raced at once, at most. */
#define SG__H2_MAX_RACE 8

/* Addresses in the order to try them: the resolver's first, then the
 * families alternating (RFC 8305 §4), so one unreachable family costs one
 * attempt delay, not every address of it. */
static size_t order_addresses(struct addrinfo *res, struct addrinfo **out, size_t max) {
    struct addrinfo *v6[SG__H2_MAX_RACE * 2], *v4[SG__H2_MAX_RACE * 2];
    size_t n6 = 0, n4 = 0;
    int first = res != NULL ? res->ai_family : AF_INET6;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        if (ai->ai_family == AF_INET6 && n6 < SG__H2_MAX_RACE * 2) {
            v6[n6++] = ai;
        } else if (ai->ai_family == AF_INET && n4 < SG__H2_MAX_RACE * 2) {
            v4[n4++] = ai;
        }
    }
    size_t n = 0, i6 = 0, i4 = 0;
    bool six = first == AF_INET6;
    while (n < max && (i6 < n6 || i4 < n4)) {
        if (six ? i6 < n6 : i4 >= n4) {
            out[n++] = v6[i6++];
        } else {
            out[n++] = v4[i4++];
        }
        six = !six;
    }
    return n;
}

int sg__h2_race(const struct sockaddr *const *addrs, const socklen_t *lens, size_t n,
                int64_t deadline, int *fd_out, int *last_err) {
    struct pollfd pf[SG__H2_MAX_RACE];
    size_t npf = 0;  /* attempts in flight, packed */
    size_t next = 0; /* the next address to try */
    int64_t next_start = sg_clock_monotonic_now(NULL);
    int winner = -1;
    *last_err = 0;
    n = n < SG__H2_MAX_RACE ? n : SG__H2_MAX_RACE;
    while (winner < 0) {
        int64_t now = sg_clock_monotonic_now(NULL);
        if (now >= deadline) {
            break;
        }
        if (next < n && (now >= next_start || npf == 0)) {
            const struct sockaddr *sa = addrs[next];
            socklen_t len = lens[next++];
            int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) {
                *last_err = errno;
                continue;
            }
            if (connect(fd, sa, len) == 0) {
                winner = fd;
                break;
            }
            if (errno != EINPROGRESS) {
                *last_err = errno;
                close(fd);
                continue; /* failed at once: the next address now */
            }
            pf[npf++] = (struct pollfd){fd, POLLOUT, 0};
            next_start = sg_time_add(now, SG__H2_ATTEMPT_DELAY);
        }
        if (npf == 0) {
            break; /* every address failed */
        }
        int64_t until = next < n ? sg_time_min(next_start, deadline) : deadline;
        int ms = until > now ? (int)((until - now + SG_MS(1) - 1) / SG_MS(1)) : 0;
        int got = poll(pf, (nfds_t)npf, ms);
        if (got < 0 && errno != EINTR) {
            *last_err = errno;
            break;
        }
        for (size_t i = 0; got > 0 && i < npf;) {
            if (pf[i].revents == 0) {
                i++;
                continue;
            }
            int err = 0;
            socklen_t elen = sizeof(err);
            if (getsockopt(pf[i].fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0) {
                err = errno;
            }
            if (err == 0) {
                winner = pf[i].fd;
                pf[i] = pf[--npf];
                break;
            }
            *last_err = err;
            close(pf[i].fd);
            pf[i] = pf[--npf];
            next_start = now; /* a failure starts the next address at once */
        }
    }
    for (size_t i = 0; i < npf; i++) {
        close(pf[i].fd);
    }
    if (winner < 0) {
        return sg_clock_monotonic_now(NULL) >= deadline ? SG_ETIMEDOUT : SG_ECONNECT;
    }
    *fd_out = winner;
    return 0;
}

/* Resolves the host, then races connects over its addresses. */
static int tcp_connect(sg_h2_conn *conn, int64_t deadline) {
    char port[16];
    snprintf(port, sizeof(port), "%d", conn->opts.port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(conn->host, port, &hints, &res);
    if (gai != 0) {
        snprintf(conn->errbuf, sizeof(conn->errbuf), "cannot resolve %s: %s", conn->host,
                 gai_strerror(gai));
        return SG_ECONNECT;
    }
    struct addrinfo *ordered[SG__H2_MAX_RACE];
    size_t n = order_addresses(res, ordered, SG__H2_MAX_RACE);
    const struct sockaddr *addrs[SG__H2_MAX_RACE];
    socklen_t lens[SG__H2_MAX_RACE];
    for (size_t i = 0; i < n; i++) {
        addrs[i] = ordered[i]->ai_addr;
        lens[i] = ordered[i]->ai_addrlen;
    }
    int fd = -1;
    int last_err = 0;
    int rv = sg__h2_race(addrs, lens, n, deadline, &fd, &last_err);
    freeaddrinfo(res);
    if (rv == SG_ETIMEDOUT) {
        snprintf(conn->errbuf, sizeof(conn->errbuf), "connect to %s:%d timed out",
                 conn->host, conn->opts.port);
        return rv;
    }
    if (rv != 0) {
        snprintf(conn->errbuf, sizeof(conn->errbuf), "cannot connect to %s:%d: %s",
                 conn->host, conn->opts.port,
                 last_err ? strerror(last_err) : "no usable address");
        return rv;
    }
    int one = 1;
    /* Small frames (RST_STREAM, WINDOW_UPDATE) must not wait for Nagle. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conn->fd = fd;
    conn->errbuf[0] = '\0';
    return 0;
}

/* Appends @len bytes to conn->out, the bytes waiting for the socket. */
static int out_push(sg_h2_conn *conn, const void *data, size_t len) {
    if (conn->out_len + len > conn->out_cap) {
        size_t cap = conn->out_cap ? conn->out_cap : 16384;
        while (cap < conn->out_len + len) {
            cap *= 2;
        }
        uint8_t *p = realloc(conn->out, cap);
        if (p == NULL) {
            return SG_ENOMEM;
        }
        conn->out = p;
        conn->out_cap = cap;
    }
    memcpy(conn->out + conn->out_len, data, len);
    conn->out_len += len;
    return 0;
}

/* Moves TLS output from the write BIO into conn->out. */
static int wbio_drain(sg_h2_conn *conn) {
    uint8_t buf[16384];
    while (conn->wbio != NULL && BIO_ctrl_pending(conn->wbio) > 0) {
        int n = BIO_read(conn->wbio, buf, (int)sizeof(buf));
        if (n <= 0) {
            break;
        }
        if (out_push(conn, buf, (size_t)n) != 0) {
            return SG_ENOMEM;
        }
    }
    return 0;
}

/* Writes conn->out.  Returns 0 when it is empty, 1 when the socket would
 * block, or a negative code when the connection failed. */
static int out_write(sg_h2_conn *conn) {
    while (conn->out_off < conn->out_len) {
        ssize_t n = send(conn->fd, conn->out + conn->out_off,
                         conn->out_len - conn->out_off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 1;
            }
            snprintf(conn->errbuf, sizeof(conn->errbuf), "connection lost: send: %s",
                     strerror(errno));
            return SG_ECONNRESET;
        }
        conn->out_off += (size_t)n;
    }
    conn->out_off = 0;
    conn->out_len = 0;
    return 0;
}

static void tls_error(sg_h2_conn *conn, const char *what) {
    unsigned long e = ERR_get_error();
    char msg[160];
    if (e != 0) {
        ERR_error_string_n(e, msg, sizeof(msg));
    } else {
        snprintf(msg, sizeof(msg), "unexpected end of connection");
    }
    ERR_clear_error();
    snprintf(conn->errbuf, sizeof(conn->errbuf), "%s: %s", what, msg);
}

static bool is_ip_literal(const char *s) {
    unsigned char tmp[16];
    return inet_pton(AF_INET, s, tmp) == 1 || inet_pton(AF_INET6, s, tmp) == 1;
}

static int tls_setup(sg_h2_conn *conn) {
    if (conn->ssl_ctx == NULL) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        if (ctx == NULL) {
            tls_error(conn, "TLS setup");
            return SG_ETLS;
        }
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        /* RFC 9113 §9.2: h2 over TLS 1.2 needs no renegotiation. */
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
        static const unsigned char alpn[] = {2, 'h', '2'};
        SSL_CTX_set_alpn_protos(ctx, alpn, sizeof(alpn));
        if (!conn->opts.insecure) {
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
            int ok = conn->cafile != NULL
                         ? SSL_CTX_load_verify_locations(ctx, conn->cafile, NULL)
                         : SSL_CTX_set_default_verify_paths(ctx);
            if (ok != 1) {
                tls_error(conn, conn->cafile != NULL ? "cannot load CA file"
                                                     : "cannot load CA store");
                SSL_CTX_free(ctx);
                return SG_ETLS;
            }
        }
        conn->ssl_ctx = ctx;
    }
    conn->ssl = SSL_new(conn->ssl_ctx);
    conn->rbio = BIO_new(BIO_s_mem());
    conn->wbio = BIO_new(BIO_s_mem());
    if (conn->ssl == NULL || conn->rbio == NULL || conn->wbio == NULL) {
        BIO_free(conn->rbio);
        BIO_free(conn->wbio);
        conn->rbio = conn->wbio = NULL;
        return SG_ENOMEM;
    }
    /* An empty memory BIO means "would block", not end of file. */
    BIO_set_mem_eof_return(conn->rbio, -1);
    SSL_set_bio(conn->ssl, conn->rbio, conn->wbio);
    SSL_set_connect_state(conn->ssl);
    const char *name = conn->server_name;
    bool ip = is_ip_literal(name);
    if (!ip) {
        /* SNI never carries an IP address (RFC 6066 §3). */
        SSL_set_tlsext_host_name(conn->ssl, conn->server_name);
    }
    if (!conn->opts.insecure) {
        /* RFC 9525 §6.3: the subject alternative names only, never the
         * subject's CN - the same policy as the libcurl transport. */
        X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(conn->ssl),
                                        X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
        int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(conn->ssl), name)
                    : SSL_set1_host(conn->ssl, name);
        if (ok != 1) {
            tls_error(conn, "cannot set the name to verify");
            return SG_ETLS;
        }
    }
    return 0;
}

static int tls_handshake(sg_h2_conn *conn, int64_t deadline) {
    uint8_t buf[16384];
    for (;;) {
        ERR_clear_error();
        int r = SSL_connect(conn->ssl);
        int err = r == 1 ? SSL_ERROR_NONE : SSL_get_error(conn->ssl, r);
        if (wbio_drain(conn) != 0) {
            return SG_ENOMEM;
        }
        while (conn->out_len > 0) {
            int w = out_write(conn);
            if (w < 0) {
                return SG_ETLS;
            }
            if (w == 1) {
                int rv = wait_fd(conn->fd, POLLOUT, deadline);
                if (rv != 0) {
                    snprintf(conn->errbuf, sizeof(conn->errbuf),
                             "TLS handshake timed out");
                    return rv;
                }
            }
        }
        if (err == SSL_ERROR_NONE) {
            break;
        }
        if (err != SSL_ERROR_WANT_READ) {
            long vr = SSL_get_verify_result(conn->ssl);
            if (vr != X509_V_OK) {
                snprintf(conn->errbuf, sizeof(conn->errbuf),
                         "TLS certificate verification failed: %s",
                         X509_verify_cert_error_string(vr));
                ERR_clear_error();
                return SG_ETLS_VERIFY;
            }
            tls_error(conn, "TLS handshake failed");
            return SG_ETLS;
        }
        int rv = wait_fd(conn->fd, POLLIN, deadline);
        if (rv != 0) {
            snprintf(conn->errbuf, sizeof(conn->errbuf), "TLS handshake timed out");
            return rv;
        }
        ssize_t n = recv(conn->fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            snprintf(conn->errbuf, sizeof(conn->errbuf),
                     "TLS handshake failed: connection closed by the server");
            return SG_ETLS;
        }
        if (n > 0) {
            BIO_write(conn->rbio, buf, (int)n);
        }
    }
    const unsigned char *alpn = NULL;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(conn->ssl, &alpn, &alpn_len);
    if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0) {
        snprintf(conn->errbuf, sizeof(conn->errbuf),
                 "the server did not select ALPN h2 (selected: %.*s)", (int)alpn_len,
                 alpn_len > 0 ? (const char *)alpn : "none");
        return SG_EH2;
    }
    return 0;
}

void sg__h2_close_transport(sg_h2_conn *conn) {
    if (conn->ssl != NULL) {
        SSL_free(conn->ssl); /* frees both BIOs */
        conn->ssl = NULL;
        conn->rbio = conn->wbio = NULL;
    }
    if (conn->fd >= 0) {
        close(conn->fd);
        conn->fd = -1;
    }
    conn->out_len = conn->out_off = 0;
    conn->more_to_read = false;
}

int sg__h2_connect(sg_h2_conn *conn, int64_t timeout_ns) {
    /* Connecting waits on real time whatever clock is injected. */
    int64_t deadline = sg_time_add(sg_clock_monotonic_now(NULL), timeout_ns);
    conn->errbuf[0] = '\0';
    int rv = tcp_connect(conn, deadline);
    if (rv == 0 && conn->opts.tls) {
        rv = tls_setup(conn);
        if (rv == 0) {
            rv = tls_handshake(conn, deadline);
        }
    }
    if (rv != 0) {
        sg__h2_close_transport(conn);
    }
    return rv;
}

int sg__h2_read(sg_h2_conn *conn, int (*deliver)(sg_h2_conn *, const uint8_t *, size_t)) {
    if (conn->rbuf == NULL) {
        /* Ciphertext and plaintext, 64 KiB each: once per connection, on
         * the heap - never 128 KiB on a caller's (perhaps small) stack. */
        conn->rbuf = malloc(2 * SG__H2_READ_CHUNK);
        if (conn->rbuf == NULL) {
            snprintf(conn->errbuf, sizeof(conn->errbuf),
                     "connection lost: out of memory");
            return -1;
        }
    }
    uint8_t *buf = conn->rbuf;
    uint8_t *plain = conn->rbuf + SG__H2_READ_CHUNK;
    size_t budget = SG__H2_READ_BUDGET;
    conn->more_to_read = false;
    for (;;) {
        if (conn->fd < 0) {
            return -1;
        }
        if (budget == 0) {
            /* A peer that sends faster than we parse must not starve the
             * clocks: stop here, let the step expire and flush, and say
             * that more is waiting (next deadline = now). */
            conn->more_to_read = true;
            return 0;
        }
        ssize_t n = recv(conn->fd, buf, SG__H2_READ_CHUNK, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return 0;
            }
            snprintf(conn->errbuf, sizeof(conn->errbuf), "connection lost: recv: %s",
                     strerror(errno));
            return -1;
        }
        if (n == 0) {
            snprintf(conn->errbuf, sizeof(conn->errbuf),
                     "connection lost: closed by the server");
            return -1;
        }
        budget -= (size_t)n < budget ? (size_t)n : budget;
        conn->recv_now = sg__h2_now(conn);
        if (conn->ssl == NULL) {
            if (deliver(conn, buf, (size_t)n) != 0) {
                return -1;
            }
            continue;
        }
        BIO_write(conn->rbio, buf, (int)n);
        for (;;) {
            ERR_clear_error();
            int r = SSL_read(conn->ssl, plain, SG__H2_READ_CHUNK);
            if (r > 0) {
                if (deliver(conn, plain, (size_t)r) != 0) {
                    return -1;
                }
                continue;
            }
            int err = SSL_get_error(conn->ssl, r);
            if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
                break;
            }
            if (err == SSL_ERROR_ZERO_RETURN) {
                snprintf(conn->errbuf, sizeof(conn->errbuf),
                         "connection lost: TLS close_notify from the server");
            } else {
                tls_error(conn, "connection lost: TLS");
            }
            return -1;
        }
    }
}

bool sg__h2_want_write(const sg_h2_conn *conn) {
    if (conn->fd < 0) {
        return false;
    }
    return conn->out_len > conn->out_off ||
           (conn->wbio != NULL && BIO_ctrl_pending(conn->wbio) > 0) ||
           (conn->session != NULL && nghttp2_session_want_write(conn->session));
}

int sg__h2_flush(sg_h2_conn *conn) {
    if (conn->fd < 0) {
        return -1;
    }
    for (;;) {
        if (conn->ssl != NULL && wbio_drain(conn) != 0) {
            snprintf(conn->errbuf, sizeof(conn->errbuf), "out of memory");
            return -1;
        }
        int w = out_write(conn);
        if (w < 0) {
            return -1;
        }
        if (w == 1) {
            return 0; /* the socket is full; poll for POLLOUT */
        }
        if (conn->session == NULL) {
            return 0;
        }
        /* conn->out is empty: gather what nghttp2 has queued, up to one
         * batch, so many small frames (HEADERS, RST_STREAM, WINDOW_UPDATE)
         * leave in one send() - and, under TLS, in full-size records. */
        while (conn->out_len < SG__H2_WRITE_BATCH) {
            const uint8_t *data = NULL;
            ssize_t n = nghttp2_session_mem_send(conn->session, &data);
            if (n < 0) {
                snprintf(conn->errbuf, sizeof(conn->errbuf),
                         "connection lost: nghttp2: %s", nghttp2_strerror((int)n));
                return -1;
            }
            if (n == 0) {
                break;
            }
            if (out_push(conn, data, (size_t)n) != 0) {
                snprintf(conn->errbuf, sizeof(conn->errbuf), "out of memory");
                return -1;
            }
        }
        if (conn->out_len == 0) {
            return 0;
        }
        if (conn->ssl != NULL) {
            /* Plaintext in, ciphertext out: into the memory BIO, SSL_write
             * completes in full; wbio_drain brings it back into out. */
            ERR_clear_error();
            int len = (int)conn->out_len;
            conn->out_len = 0;
            if (SSL_write(conn->ssl, conn->out, len) != len) {
                tls_error(conn, "connection lost: TLS write");
                return -1;
            }
        }
    }
}
