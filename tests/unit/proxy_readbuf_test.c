/*
 * sg-proxy's read buffers (tools/sg-proxy/readbuf.c): libcurl's read
 * buffer of each running transfer on pages of its own, found from the
 * bytes a write callback got, and given back (its pages no longer
 * resident) while its stream is quiet.  Real libcurl HTTP/1.1 transfers
 * over loopback from a server thread that sends 100 bytes of each body
 * and then nothing (open and quiet, as a model thinking); residency read
 * with mincore(2).
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

enum { HANDLES = 600 };

typedef struct seen {
    const char *at; /* where the last write callback's bytes were */
    size_t len, total, xs;
} seen;

static size_t on_write(char *p, size_t size, size_t n, void *ud) {
    seen *s = ud;
    s->at = p;
    s->len = size * n;
    s->total += size * n;
    for (size_t i = 0; i < size * n; i++) {
        s->xs += p[i] == 'x';
    }
    return size * n;
}

static CURLM *g_multi;

/* The server: every connection gets a response head announcing 1,000
 * bytes and 100 of them, then nothing more - an open, quiet stream - until
 * server_close. */
static int g_lfd, g_port;
static int g_conns[HANDLES + 8];
static int g_nconns;
static pthread_t g_thread;

static void *serve(void *arg) {
    (void)arg;
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
    char body[100];
    memset(body, 'x', sizeof(body));
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
        (void)!write(fd, head, sizeof(head) - 1);
        (void)!write(fd, body, sizeof(body));
        if (g_nconns < (int)(sizeof(g_conns) / sizeof(g_conns[0]))) {
            g_conns[g_nconns++] = fd;
        } else {
            close(fd);
        }
    }
}

static int server_start(void) {
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
    for (int i = 0; i < g_nconns; i++) {
        close(g_conns[i]);
    }
}

/* Starts a transfer on @e, run until its first 100 body bytes came: the
 * read buffer they were read into.  The transfer stays open and quiet. */
static void *transfer(CURL *e, seen *s) {
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", g_port);
    memset(s, 0, sizeof(*s));
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    assert_int_equal(curl_multi_add_handle(g_multi, e), CURLM_OK);
    int running = 1;
    while (s->total < 100) {
        assert_int_equal(curl_multi_perform(g_multi, &running), CURLM_OK);
        assert_int_equal(curl_multi_poll(g_multi, NULL, 0, 100, NULL), CURLM_OK);
    }
    return readbuf_of(s->at, s->len);
}

static void cleanup(CURL *e) {
    curl_multi_remove_handle(g_multi, e);
    curl_easy_cleanup(e);
}

/* Pages of [p, p + len) resident. */
static int resident(const void *p, size_t len) {
    unsigned char v[8];
    size_t pages = (len + 4095) / 4096;
    assert_true(pages <= sizeof(v));
    assert_int_equal(mincore((void *)p, len, v), 0);
    int n = 0;
    for (size_t i = 0; i < pages; i++) {
        n += v[i] & 1;
    }
    return n;
}

/* The bytes a read wrote are in a buffer of its own pages; given back,
 * they are no longer resident (and read as zeros). */
static void a_quiet_buffer_gives_its_pages_back(void **state) {
    (void)state;
    assert_true(readbuf_enabled());
    CURL *e = curl_easy_init();
    seen s;
    void *buf = transfer(e, &s);
    assert_non_null(buf);
    assert_int_equal((uintptr_t)buf % 4096, 0);
    assert_true(s.at >= (const char *)buf && s.at + s.len <= (const char *)buf + 16385);
    assert_int_equal(resident(buf, 16384), 1); /* what the read wrote */
    readbuf_give_back(buf);
    assert_int_equal(resident(buf, 16384), 0);
    assert_int_equal(s.at[0], '\0'); /* a page of zeros, faulted in */
    assert_int_equal(s.xs, 100);     /* what it delivered was whole */
    cleanup(e);
}

/* A pointer into no read buffer finds none; a buffer freed with its
 * handle is found no more, and giving it back then touches nothing. */
static void only_live_read_buffers_are_found(void **state) {
    (void)state;
    char *heap = malloc(16385);
    assert_non_null(heap);
    assert_null(readbuf_of(heap + 100, 10));
    free(heap);
    CURL *e = curl_easy_init();
    seen s;
    void *buf = transfer(e, &s);
    assert_non_null(buf);
    assert_null(readbuf_of(s.at, 16385 + 1)); /* past its end */
    cleanup(e);                               /* libcurl frees it with the transfer */
    assert_null(readbuf_of(s.at, s.len));
    readbuf_give_back(buf); /* no longer a read buffer: left alone */
}

/* Many handles at once, freed in another order than made: every one
 * still alive is found, every freed one is not. */
static void many_buffers_are_tracked_as_handles_come_and_go(void **state) {
    (void)state;
    CURL **e = calloc(HANDLES, sizeof(*e));
    void **buf = calloc(HANDLES, sizeof(*buf));
    const char **at = calloc(HANDLES, sizeof(*at));
    seen *ss = calloc(HANDLES, sizeof(*ss));
    assert_non_null(ss);
    assert_non_null(e);
    assert_non_null(buf);
    assert_non_null(at);
    for (int i = 0; i < HANDLES; i++) {
        e[i] = curl_easy_init();
        buf[i] = transfer(e[i], &ss[i]);
        at[i] = ss[i].at;
        assert_non_null(buf[i]);
    }
    for (int i = 0; i < HANDLES; i += 3) { /* every third goes */
        cleanup(e[i]);
        e[i] = NULL;
    }
    for (int i = 0; i < HANDLES; i++) {
        if (e[i] != NULL) {
            assert_ptr_equal(readbuf_of(at[i], 1), buf[i]);
        } else {
            assert_null(readbuf_of(at[i], 1));
        }
    }
    for (int i = HANDLES - 1; i >= 0; i--) {
        if (e[i] != NULL) {
            cleanup(e[i]);
        }
    }
    free(ss);
    free(at);
    free(buf);
    free(e);
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
            cmocka_unit_test(a_quiet_buffer_gives_its_pages_back),
            cmocka_unit_test(only_live_read_buffers_are_found),
            cmocka_unit_test(many_buffers_are_tracked_as_handles_come_and_go),
        };
        rv = cmocka_run_group_tests(tests, NULL, NULL);
    } else {
        printf("libcurl keeps no read buffer per transfer: nothing to test\n");
    }
    server_stop();
    curl_multi_cleanup(g_multi);
    readbuf_cleanup();
    return rv;
}
