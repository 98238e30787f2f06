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
    int rv = SG_ECONNECT;
    snprintf(conn->errbuf, sizeof(conn->errbuf), "cannot connect to %s:%d", conn->host,
             conn->opts.port);
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                        ai->ai_protocol);
        if (fd < 0) {
            continue;
        }
        int err = 0;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
            err = errno;
            if (err == EINPROGRESS) {
                int w = wait_fd(fd, POLLOUT, deadline);
                if (w == SG_ETIMEDOUT) {
                    close(fd);
                    rv = SG_ETIMEDOUT;
                    snprintf(conn->errbuf, sizeof(conn->errbuf),
                             "connect to %s:%d timed out", conn->host, conn->opts.port);
                    break;
                }
                socklen_t len = sizeof(err);
                if (w != 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
                    err = errno;
                }
            }
        }
        if (err != 0) {
            snprintf(conn->errbuf, sizeof(conn->errbuf), "cannot connect to %s:%d: %s",
                     conn->host, conn->opts.port, strerror(err));
            close(fd);
            continue;
        }
        int one = 1;
        /* Small frames (RST_STREAM, WINDOW_UPDATE) must not wait for Nagle. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        conn->fd = fd;
        conn->errbuf[0] = '\0';
        rv = 0;
        break;
    }
    freeaddrinfo(res);
    return rv;
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
