/*
 * A small raw-socket client for the sg-fakemodel integration tests, for what
 * the curl command cannot do:
 *
 *   fakemodel_client conc PORT N TARGET   N concurrent HTTP/1.1 connections, each
 *                                         one GET TARGET; all must end in [DONE]
 *   fakemodel_client hold PORT N TARGET MS N connections that send TARGET and
 *                                         never read, held for MS ms
 *   fakemodel_client garbage PORT         hostile bytes over raw sockets
 *   fakemodel_client rst PORT TARGET KEY  h2c request, RST_STREAM(CANCEL) after
 *                                         the first DATA frame
 *
 * Exit status 0 on success; a one-line reason on stderr otherwise.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int dial(int port, int nonblock) {
    int fd = socket(AF_INET, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) {
        return -1;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ------------------------------------------------------------ conc */

typedef struct {
    int fd;
    int sent;
    int done;
    size_t got;
    char tail[16]; /* last bytes seen, to spot the final chunk */
} cconn;

static int cmd_conc(int port, int n, const char *target) {
    raise_nofile();
    int ep = epoll_create1(0);
    cconn *cs = calloc((size_t)n, sizeof(*cs));
    char req[1024];
    int rl = snprintf(req, sizeof(req),
                      "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
                      target);
    int64_t t0 = now_ms();
    for (int i = 0; i < n; i++) {
        cs[i].fd = dial(port, 1);
        if (cs[i].fd < 0) {
            fprintf(stderr, "conc: connect %d failed: %s\n", i, strerror(errno));
            return 1;
        }
        struct epoll_event e = {.events = EPOLLOUT | EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &e);
    }
    int done = 0;
    int ok = 0;
    int64_t deadline = t0 + 30000;
    struct epoll_event evs[256];
    char buf[65536];
    while (done < n && now_ms() < deadline) {
        int k = epoll_wait(ep, evs, 256, 1000);
        for (int j = 0; j < k; j++) {
            cconn *c = &cs[evs[j].data.u32];
            if (c->done) {
                continue;
            }
            if (!c->sent && (evs[j].events & EPOLLOUT)) {
                if (send(c->fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) {
                    fprintf(stderr, "conc: short send\n");
                    return 1;
                }
                c->sent = 1;
                struct epoll_event e = {.events = EPOLLIN, .data.u32 = evs[j].data.u32};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
            }
            if (evs[j].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                for (;;) {
                    ssize_t r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
                    if (r > 0) {
                        c->got += (size_t)r;
                        size_t keep =
                            (size_t)r < sizeof(c->tail) ? (size_t)r : sizeof(c->tail);
                        memmove(c->tail, c->tail + keep, sizeof(c->tail) - keep);
                        memcpy(c->tail + sizeof(c->tail) - keep, buf + r - (ssize_t)keep,
                               keep);
                        continue;
                    }
                    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                        break;
                    }
                    /* EOF or error: the response is over. */
                    c->done = 1;
                    done++;
                    if (memcmp(c->tail + sizeof(c->tail) - 5, "0\r\n\r\n", 5) == 0) {
                        ok++;
                    }
                    close(c->fd);
                    break;
                }
            }
        }
    }
    int64_t t1 = now_ms();
    printf("conc: %d connections, %d complete, %d ended with the final chunk, %lld ms\n",
           n, done, ok, (long long)(t1 - t0));
    free(cs);
    close(ep);
    return ok == n ? 0 : 1;
}

/* ------------------------------------------------------------ hold */

static int cmd_hold(int port, int n, const char *target, int ms) {
    raise_nofile();
    int *fds = calloc((size_t)n, sizeof(int));
    char req[1024];
    int rl =
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", target);
    for (int i = 0; i < n; i++) {
        fds[i] = dial(port, 0);
        /* A tiny receive buffer makes "not reading" bite sooner. */
        int small = 4096;
        setsockopt(fds[i], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
        if (fds[i] < 0 || send(fds[i], req, (size_t)rl, MSG_NOSIGNAL) != rl) {
            fprintf(stderr, "hold: connect/send failed\n");
            return 1;
        }
    }
    printf("hold: %d connections not reading\n", n);
    fflush(stdout);
    usleep((useconds_t)ms * 1000);
    for (int i = 0; i < n; i++) {
        close(fds[i]);
    }
    free(fds);
    return 0;
}

/* ------------------------------------------------------------ garbage */

static void send_and_drain(int port, const void *data, size_t len, char *resp,
                           size_t respcap, int wait_ms) {
    int fd = dial(port, 0);
    if (fd < 0) {
        return;
    }
    resp[0] = '\0';
    struct timeval tv = {.tv_sec = wait_ms / 1000, .tv_usec = (wait_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, (const char *)data + off, len - off, MSG_NOSIGNAL);
        if (w <= 0) {
            break;
        }
        off += (size_t)w;
    }
    size_t got = 0;
    for (;;) {
        ssize_t r = recv(fd, resp + got, respcap - 1 - got, 0);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
        if (got == respcap - 1) {
            break;
        }
    }
    resp[got] = '\0';
    close(fd);
}

static int cmd_garbage(int port) {
    /* sizeof, not strlen: some cases carry NUL bytes. */
#define CASE(S) \
    { S, sizeof(S) - 1 }
    static const struct {
        const char *p;
        size_t len;
    } cases[] = {
        CASE("\x00\x01\x02\x03\xff\xfe garbage\r\n\r\n"),
        CASE("GET\r\n\r\n"),
        CASE("GET / HTTP/9.9\r\n\r\n"),
        CASE("GET /stream HTTP/1.1\r\nNo colon here\r\n\r\n"),
        CASE("GET /stream HTTP/1.1\r\n folded: header\r\n\r\n"),
        CASE("GET /stream HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: "
             "chunked\r\n\r\n"),
        CASE("GET /stream HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
        CASE("GET /stream HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"),
        CASE("POST /stream HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n"),
        CASE("POST /stream HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
        CASE("POST /stream HTTP/1.1\r\nTransfer-Encoding: "
             "chunked\r\n\r\nffffffffffffffffffff\r\n"),
        CASE("GET /stream?n=abc HTTP/1.1\r\n\r\n"),
        CASE("GET /stream?n=%zz HTTP/1.1\r\n\r\n"),
        CASE("GET http://x/ HTTP/1.1\r\n\r\n"),
        CASE("GET /a\x01b HTTP/1.1\r\n\r\n"),
        CASE("GET /stream HTTP/1.1\r\nX: a\x01b\r\n\r\n"),
        CASE("PRI * "
             "HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x07\x00\x00\x00\x00\x00garbage!!"),
        CASE("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"),
        CASE("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff\xff\x01\x05\x00\x00\x00\x01"),
        CASE("\x16\x03\x01\x00\x05hello"),
        CASE("\x16\x03\x03\xff\xff this is not a client hello at all"),
    };
#undef CASE
    char resp[4096];
    int bad = 0;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        send_and_drain(port, cases[i].p, cases[i].len, resp, sizeof(resp), 1000);
        int is_h1 = memcmp(cases[i].p, "PRI", 3) != 0 && cases[i].p[0] != '\x16';
        if (is_h1 && strncmp(resp, "HTTP/1.1 4", 10) != 0 &&
            strncmp(resp, "HTTP/1.1 5", 10) != 0) {
            fprintf(stderr, "garbage case %zu: expected a 4xx/5xx, got '%.40s'\n", i,
                    resp);
            bad++;
        }
    }
    /* An oversize head: 431. */
    size_t big = 40000;
    char *huge = malloc(big + 64);
    int n = snprintf(huge, 64, "GET /stream HTTP/1.1\r\nX-Big: ");
    memset(huge + n, 'a', big);
    memcpy(huge + n + big, "\r\n\r\n", 4);
    send_and_drain(port, huge, (size_t)n + big + 4, resp, sizeof(resp), 1000);
    if (strncmp(resp, "HTTP/1.1 431", 12) != 0) {
        fprintf(stderr, "oversize head: expected 431, got '%.40s'\n", resp);
        bad++;
    }
    free(huge);
    /* Random bytes, deterministic. */
    unsigned s = 12345;
    char rnd[2048];
    for (int round = 0; round < 200; round++) {
        size_t len = 1 + (s % sizeof(rnd));
        for (size_t k = 0; k < len; k++) {
            s = s * 1103515245u + 12345u;
            rnd[k] = (char)(s >> 16);
        }
        /* Every few rounds, a valid start and a garbage tail. */
        if (round % 4 == 1 && len > 20) {
            memcpy(rnd, "GET /stream HTTP/1.1\r\n", 20);
        } else if (round % 4 == 2 && len > 24) {
            memcpy(rnd, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
        } else if (round % 4 == 3) {
            rnd[0] = 0x16;
        }
        send_and_drain(port, rnd, len, resp, 64, 20);
    }
    printf("garbage: %zu crafted cases + 1 oversize head + 200 random inputs, %d "
           "unexpected\n",
           sizeof(cases) / sizeof(cases[0]), bad);
    return bad == 0 ? 0 : 1;
}

/* ------------------------------------------------------------ rst */

typedef struct {
    int fd;
    int32_t stream_id;
    int reset;
    int closed;
} rst_state;

static ssize_t rst_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags,
                        void *ud) {
    (void)s;
    (void)flags;
    rst_state *st = ud;
    ssize_t w = send(st->fd, data, len, MSG_NOSIGNAL);
    return w < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : w;
}

static int rst_on_data(nghttp2_session *s, uint8_t flags, int32_t stream_id,
                       const uint8_t *data, size_t len, void *ud) {
    (void)flags;
    (void)data;
    (void)len;
    rst_state *st = ud;
    if (!st->reset) {
        st->reset = 1;
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, stream_id, NGHTTP2_CANCEL);
    }
    return 0;
}

static int rst_on_close(nghttp2_session *s, int32_t stream_id, uint32_t code, void *ud) {
    (void)s;
    (void)stream_id;
    (void)code;
    rst_state *st = ud;
    st->closed = 1;
    return 0;
}

static int cmd_rst(int port, const char *target, const char *key) {
    rst_state st = {.fd = dial(port, 0)};
    if (st.fd < 0) {
        fprintf(stderr, "rst: connect failed\n");
        return 1;
    }
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_send_callback(cb, rst_send);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, rst_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, rst_on_close);
    nghttp2_session *s;
    nghttp2_session_client_new(&s, cb, &st);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, NULL, 0);
#define MKNV(N, V)                                                               \
    {(uint8_t *)(uintptr_t)(N), (uint8_t *)(uintptr_t)(V), strlen(N), strlen(V), \
     NGHTTP2_NV_FLAG_NONE}
    nghttp2_nv nva[] = {MKNV(":method", "GET"), MKNV(":scheme", "http"),
                        MKNV(":authority", "127.0.0.1"), MKNV(":path", target),
                        MKNV("idempotency-key", key)};
    st.stream_id = nghttp2_submit_request(s, NULL, nva, 5, NULL, NULL);
    int64_t deadline = now_ms() + 5000;
    while (!st.closed && now_ms() < deadline) {
        if (nghttp2_session_send(s) != 0) {
            break;
        }
        struct pollfd p = {.fd = st.fd, .events = POLLIN};
        if (poll(&p, 1, 100) > 0) {
            uint8_t buf[16384];
            ssize_t r = recv(st.fd, buf, sizeof(buf), 0);
            if (r <= 0 || nghttp2_session_mem_recv(s, buf, (size_t)r) < 0) {
                break;
            }
        }
    }
    nghttp2_session_send(s);
    /* Keep the connection open a moment: the server must see the RST, not EOF. */
    usleep(200000);
    nghttp2_session_del(s);
    close(st.fd);
    printf("rst: reset=%d closed=%d\n", st.reset, st.closed);
    return st.reset ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 6 && strcmp(argv[1], "hold") == 0) {
        return cmd_hold(atoi(argv[2]), atoi(argv[3]), argv[4], atoi(argv[5]));
    }
    if (argc >= 5 && strcmp(argv[1], "conc") == 0) {
        return cmd_conc(atoi(argv[2]), atoi(argv[3]), argv[4]);
    }
    if (argc >= 3 && strcmp(argv[1], "garbage") == 0) {
        return cmd_garbage(atoi(argv[2]));
    }
    if (argc >= 5 && strcmp(argv[1], "rst") == 0) {
        return cmd_rst(atoi(argv[2]), argv[3], argv[4]);
    }
    fprintf(stderr, "usage: fakemodel_client conc|hold|garbage|rst PORT ...\n");
    return 2;
}
