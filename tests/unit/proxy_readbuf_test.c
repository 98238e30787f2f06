/*
 * sg-proxy's read buffer (tools/sg-proxy/readbuf.c): every plain HTTP/1.1
 * transfer readbuf_share set up reads into one buffer, so an open stream
 * holds none; a transfer not set up reads into its own.  Real libcurl
 * transfers over loopback from a server thread: each read lands in the
 * shared buffer; many transfers at once, their bodies in rounds (chunked
 * and by length, pieces of every size), some paused by their write
 * callback while the others read over the buffer, each get exactly their
 * own bytes.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "readbuf.h"

enum { MAXC = 300 };

/* The server: a connection's request path is "/K" (K its index); its
 * socket is kept in g_fd[K] for the test to write the response into. */
static int g_lfd, g_port;
static int g_fd[MAXC];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t g_thread;

static void *serve(void *arg) {
    (void)arg;
    for (;;) {
        int fd = accept(g_lfd, NULL, NULL);
        if (fd < 0) {
            return NULL; /* the listener closed */
        }
        char req[4096];
        size_t got = 0;
        while (got < sizeof(req) - 1) {
            ssize_t n = recv(fd, req + got, sizeof(req) - 1 - got, 0);
            if (n <= 0) {
                break;
            }
            got += (size_t)n;
            req[got] = '\0';
            if (strstr(req, "\r\n\r\n") != NULL) {
                break;
            }
        }
        req[got] = '\0';
        int k = -1;
        if (sscanf(req, "GET /%d ", &k) != 1 || k < 0 || k >= MAXC) {
            close(fd);
            continue;
        }
        pthread_mutex_lock(&g_lock);
        g_fd[k] = fd;
        pthread_mutex_unlock(&g_lock);
    }
}

static int server_start(void) {
    for (int i = 0; i < MAXC; i++) {
        g_fd[i] = -1;
    }
    g_lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (g_lfd < 0 || bind(g_lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(g_lfd, 1024) != 0 || getsockname(g_lfd, (struct sockaddr *)&a, &al) != 0) {
        return -1;
    }
    g_port = ntohs(a.sin_port);
    return pthread_create(&g_thread, NULL, serve, NULL) == 0 ? 0 : -1;
}

static void server_stop(void) {
    shutdown(g_lfd, SHUT_RDWR);
    close(g_lfd);
    pthread_join(g_thread, NULL);
}

static int fd_of(int k) {
    pthread_mutex_lock(&g_lock);
    int fd = g_fd[k];
    pthread_mutex_unlock(&g_lock);
    return fd;
}

static void send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        assert_true(w > 0);
        c += w;
        n -= (size_t)w;
    }
}

/* Byte @j of transfer @k's body. */
static char body_byte(int k, size_t j) {
    return (char)('!' + (k * 7 + j) % 90);
}

/* One transfer: what its write callback saw. */
typedef struct xfer {
    CURL *e;
    int k;
    bool chunked;
    size_t sent;     /* body bytes the server sent it */
    size_t got;      /* body bytes delivered */
    size_t calls;    /* write callbacks */
    size_t wrong;    /* bytes not its own, or out of place */
    size_t foreign;  /* callbacks whose bytes were not in the shared buffer */
    bool pause_next; /* pause at the next callback (its bytes come again) */
    bool paused;
    size_t pauses;
} xfer;

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
    xfer *x = ud;
    size_t len = size * n;
    const char *b = readbuf_shared();
    if (b == NULL || p < b || p + len > b + READBUF_SHARED_SIZE + 1) {
        x->foreign++;
    }
    if (x->pause_next) {
        x->pause_next = false;
        x->paused = true;
        x->pauses++;
        return CURL_WRITEFUNC_PAUSE;
    }
    x->calls++;
    for (size_t i = 0; i < len; i++) {
        x->wrong += p[i] != body_byte(x->k, x->got + i);
    }
    x->got += len;
    return len;
}

static CURLM *g_multi;

static void start(xfer *x, int k, bool share, bool chunked) {
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%d", g_port, k);
    memset(x, 0, sizeof(*x));
    x->k = k;
    x->chunked = chunked;
    x->e = curl_easy_init();
    assert_non_null(x->e);
    curl_easy_setopt(x->e, CURLOPT_URL, url);
    curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->e, CURLOPT_WRITEDATA, x);
    if (share) {
        assert_true(readbuf_share(x->e, url));
    }
    assert_int_equal(curl_multi_add_handle(g_multi, x->e), CURLM_OK);
}

/* Runs the multi until every server socket of @xs is there. */
static void wait_connected(xfer *xs, int n) {
    for (int tries = 0; tries < 2000; tries++) {
        int running, ready = 0;
        assert_int_equal(curl_multi_perform(g_multi, &running), CURLM_OK);
        for (int i = 0; i < n; i++) {
            ready += fd_of(xs[i].k) >= 0;
        }
        if (ready == n) {
            return;
        }
        assert_int_equal(curl_multi_poll(g_multi, NULL, 0, 10, NULL), CURLM_OK);
    }
    fail_msg("the transfers did not connect");
}

static void send_head(xfer *x, size_t length) {
    char head[128];
    int n = x->chunked
                ? snprintf(head, sizeof(head),
                           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                : snprintf(head, sizeof(head),
                           "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", length);
    send_all(fd_of(x->k), head, (size_t)n);
}

/* The next @n bytes of @x's body, as its framing says. */
static void send_body(xfer *x, size_t n) {
    char *b = malloc(n + 32);
    assert_non_null(b);
    size_t at = 0;
    if (x->chunked) {
        at = (size_t)sprintf(b, "%zx\r\n", n);
    }
    for (size_t i = 0; i < n; i++) {
        b[at++] = body_byte(x->k, x->sent + i);
    }
    if (x->chunked) {
        memcpy(b + at, "\r\n", 2);
        at += 2;
    }
    send_all(fd_of(x->k), b, at);
    x->sent += n;
    free(b);
}

/* Runs the multi until each of @xs not paused has had what was sent. */
static void run_until_delivered(xfer *xs, int n) {
    for (int tries = 0; tries < 5000; tries++) {
        int running, behind = 0;
        assert_int_equal(curl_multi_perform(g_multi, &running), CURLM_OK);
        for (int i = 0; i < n; i++) {
            behind += !xs[i].paused && xs[i].got < xs[i].sent;
        }
        if (behind == 0) {
            return;
        }
        assert_int_equal(curl_multi_poll(g_multi, NULL, 0, 10, NULL), CURLM_OK);
    }
    fail_msg("the bytes sent did not all come");
}

static void finish(xfer *xs, int n) {
    for (int i = 0; i < n; i++) {
        curl_multi_remove_handle(g_multi, xs[i].e);
        curl_easy_cleanup(xs[i].e);
        close(fd_of(xs[i].k));
        pthread_mutex_lock(&g_lock);
        g_fd[xs[i].k] = -1;
        pthread_mutex_unlock(&g_lock);
    }
}

/* Pages of [p, p + len) resident. */
static int resident(const void *p, size_t len) {
    unsigned char v[64];
    size_t pages = (len + 4095) / 4096;
    assert_true(pages <= sizeof(v));
    assert_int_equal(mincore((void *)p, len, v), 0);
    int n = 0;
    for (size_t i = 0; i < pages; i++) {
        n += v[i] & 1;
    }
    return n;
}

/* 300 streams open at once, each quiet after 100 bytes: every read was
 * into the one buffer (a page of it resident, whatever their number),
 * and each stream got its own bytes. */
static void open_streams_share_one_read_buffer(void **state) {
    (void)state;
    static xfer xs[MAXC];
    for (int i = 0; i < MAXC; i++) {
        start(&xs[i], i, true, false);
    }
    wait_connected(xs, MAXC);
    for (int i = 0; i < MAXC; i++) {
        send_head(&xs[i], 1000);
        send_body(&xs[i], 100);
    }
    run_until_delivered(xs, MAXC);
    for (int i = 0; i < MAXC; i++) {
        assert_int_equal(xs[i].got, 100);
        assert_int_equal(xs[i].wrong, 0);
        assert_int_equal(xs[i].foreign, 0);
    }
    assert_int_equal(resident(readbuf_shared(), READBUF_SHARED_SIZE), 1);
    finish(xs, MAXC);
}

/* A transfer readbuf_share did not set up reads into a buffer of its
 * own; the shared one stays when its transfers are freed, for the next. */
static void a_transfer_not_set_up_reads_into_its_own(void **state) {
    (void)state;
    xfer xs[2];
    start(&xs[0], 0, false, false);
    start(&xs[1], 1, true, true);
    wait_connected(xs, 2);
    for (int i = 0; i < 2; i++) {
        send_head(&xs[i], 10);
        send_body(&xs[i], 10);
    }
    run_until_delivered(xs, 2);
    assert_int_equal(xs[0].foreign, xs[0].calls);
    assert_true(xs[0].calls > 0);
    assert_int_equal(xs[1].foreign, 0);
    assert_int_equal(xs[0].wrong + xs[1].wrong, 0);
    finish(xs, 2);
}

/* 60 streams, half chunked, their bodies in 40 rounds of pieces from 1
 * byte to 40 KiB; every fifth callback pauses its transfer (libcurl keeps
 * those bytes aside and gives them again once it goes on), and it goes on
 * only after the others have read over the buffer: each stream gets its
 * own bytes, whole and in order. */
static void streams_read_in_turn_keep_their_own_bytes(void **state) {
    (void)state;
    enum { N = 60, ROUNDS = 40 };
    static xfer xs[N];
    for (int i = 0; i < N; i++) {
        start(&xs[i], i, true, i % 2 == 0);
    }
    wait_connected(xs, N);
    for (int i = 0; i < N; i++) {
        send_head(&xs[i], (size_t)1 << 30);
    }
    unsigned seed = 7;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 1103515245u + 12345u;
            size_t n = 1 + (seed >> 8) % (r % 4 == 3 ? 40960 : 700);
            send_body(&xs[i], n);
            xs[i].pause_next = (seed >> 20) % 5 == 0;
        }
        run_until_delivered(xs, N);
        for (int i = 0; i < N; i++) {
            if (xs[i].paused) {
                xs[i].paused = false;
                assert_int_equal(curl_easy_pause(xs[i].e, CURLPAUSE_CONT), CURLE_OK);
            }
        }
        run_until_delivered(xs, N);
    }
    size_t pauses = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(xs[i].got, xs[i].sent);
        assert_int_equal(xs[i].wrong, 0);
        pauses += xs[i].pauses;
    }
    assert_true(pauses >= ROUNDS * N / 10); /* a fifth, or about */
    finish(xs, N);
}

/* A URL of half the buffer's size or more is not shared: no part of it
 * libcurl copies can have the buffer's size. */
static void a_long_url_is_not_shared(void **state) {
    (void)state;
    size_t n = READBUF_SHARED_SIZE / 2;
    char *url = malloc(n + 1);
    assert_non_null(url);
    memcpy(url, "http://127.0.0.1/", 17);
    memset(url + 17, 'a', n - 17);
    url[n] = '\0';
    CURL *e = curl_easy_init();
    assert_false(readbuf_share(e, url));
    url[n - 1] = '\0';
    assert_true(readbuf_share(e, url));
    curl_easy_cleanup(e);
    free(url);
}

int main(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (readbuf_init() != 0 || (g_multi = curl_multi_init()) == NULL ||
        server_start() != 0) {
        return 1;
    }
    int rv = 0;
    if (readbuf_enabled()) {
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(open_streams_share_one_read_buffer),
            cmocka_unit_test(a_transfer_not_set_up_reads_into_its_own),
            cmocka_unit_test(streams_read_in_turn_keep_their_own_bytes),
            cmocka_unit_test(a_long_url_is_not_shared),
        };
        rv = cmocka_run_group_tests(tests, NULL, NULL);
    } else {
        printf("libcurl keeps one read buffer per multi itself: nothing to test\n");
    }
    server_stop();
    curl_multi_cleanup(g_multi);
    readbuf_cleanup();
    return rv;
}
