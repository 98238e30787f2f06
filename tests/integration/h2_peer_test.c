/*
 * The HTTP/2 transport against peers other than sg-fakemodel:
 *   - nghttpd (Debian package nghttp2-server), a real third-party server,
 *     started by the test on a free loopback port, h2c and TLS;
 *   - a scripted nghttp2 server in a child process, for what neither
 *     sg-fakemodel nor nghttpd does on demand: GOAWAY with a last stream id
 *     below streams in flight, GOAWAY while a long stream still runs, and
 *     an oversized response header list;
 *   - a scripted DNS server on a loopback UDP port, served from the test's
 *     own loop: silent (the resolver must not block the loop, and the
 *     connect timeout ends the wait) or answering (the name resolves
 *     through c-ares and the stream runs).
 *
 * Usage: h2_peer_test [PATH-TO-nghttpd]   (nghttpd tests skip without it)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <nghttp2/nghttp2.h>

#include <streamguard/h2.h>

#include "../sg_auto.h"

extern char **environ;

static const char *g_nghttpd;

/* ---------------------------------------------------------------- common */

typedef struct expect {
    uint64_t items;
    bool done;
    sg_h2_op *op;
    int64_t last_item; /* when the last item arrived */
    int64_t max_gap;   /* the longest wait between two items */
    int64_t done_at;
} expect;

static int count_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    expect *e = ud;
    int64_t now = sg_clock_monotonic_now(NULL);
    if (e->items++ > 0 && now - e->last_item > e->max_gap) {
        e->max_gap = now - e->last_item;
    }
    e->last_item = now;
    return 0;
}

static void on_done(sg_h2_op *op, void *ud) {
    (void)op;
    expect *e = ud;
    e->done = true;
    e->done_at = sg_clock_monotonic_now(NULL);
}

static const sg_test_h2_cbs g_cbs = {.on_item = count_item, .on_done = on_done};

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static int connect_h2(int port, bool tls, const char *cafile, sg_h2_conn **c) {
    char err[SG_H2_ERROR_SIZE] = "";
    SG_AUTO_H2_CONN_OPTIONS(o);
    assert_int_equal(sg_h2_conn_options_set_host(o, tls ? "localhost" : "127.0.0.1"), 0);
    assert_int_equal(sg_h2_conn_options_set_port(o, port), 0);
    assert_int_equal(sg_h2_conn_options_set_tls(o, tls), 0);
    assert_int_equal(sg_h2_conn_options_set_cafile(o, cafile), 0);
    assert_int_equal(sg_h2_conn_options_set_connect_timeout(o, SG_SEC(2)), 0);
    assert_int_equal(sg_h2_conn_options_set_errbuf(o, err), 0);
    int rv = sg_h2_conn_new(c, o);
    if (rv != 0) {
        print_message("connect: %s: %s\n", sg_errname(rv), err);
    }
    return rv;
}

/* ------------------------------------------------------------- nghttpd */

typedef struct nghttpd {
    pid_t pid;
    int port;
    char dir[64];
} nghttpd;

/* A copy of the running nghttpd, stopped by the teardown if a test fails
 * (the test's own variable is gone by then). */
static nghttpd g_live_nghttpd;
static bool g_nghttpd_running;

static void write_file(const char *dir, const char *name, const char *text) {
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int run_cmd(char *const argv[]) {
    pid_t pid;
    if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0) {
        return -1;
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Starts nghttpd on a free port serving a directory with an NDJSON and an
 * SSE file; with @tls, on a self-signed certificate for localhost. */
static int nghttpd_start(nghttpd *d, bool tls, const char *extra) {
    memset(d, 0, sizeof(*d));
    snprintf(d->dir, sizeof(d->dir), "/tmp/sg-h2-nghttpd-XXXXXX");
    if (mkdtemp(d->dir) == NULL) {
        return -1;
    }
    write_file(d->dir, "stream.ndjson",
               "{\"tok\":0}\n{\"tok\":1}\n{\"tok\":2}\n{\"tok\":3}\n{\"done\":true}\n");
    write_file(d->dir, "stream.sse",
               "data: {\"tok\":0}\n\ndata: {\"tok\":1}\n\n: keepalive\n\n"
               "data: {\"tok\":2}\n\ndata: [DONE]\n\n");
    char key[96], cert[96];
    snprintf(key, sizeof(key), "%s/key.pem", d->dir);
    snprintf(cert, sizeof(cert), "%s/cert.pem", d->dir);
    if (tls) {
        char *argv[] = {"openssl",
                        "req",
                        "-x509",
                        "-newkey",
                        "ec",
                        "-pkeyopt",
                        "ec_paramgen_curve:prime256v1",
                        "-nodes",
                        "-keyout",
                        key,
                        "-out",
                        cert,
                        "-days",
                        "2",
                        "-subj",
                        "/CN=localhost",
                        "-addext",
                        "subjectAltName=DNS:localhost",
                        NULL};
        int fd = open("/dev/null", O_WRONLY);
        int saved = dup(STDERR_FILENO);
        dup2(fd, STDERR_FILENO);
        int rv = run_cmd(argv);
        dup2(saved, STDERR_FILENO);
        close(saved);
        close(fd);
        if (rv != 0) {
            return -1;
        }
    }
    for (int tries = 0; tries < 5; tries++) {
        d->port = free_port();
        char port[16];
        snprintf(port, sizeof(port), "%d", d->port);
        char docroot[96];
        snprintf(docroot, sizeof(docroot), "--htdocs=%s", d->dir);
        char *argv[12];
        int n = 0;
        argv[n++] = (char *)g_nghttpd;
        argv[n++] = "--address=127.0.0.1";
        argv[n++] = docroot;
        if (extra != NULL) {
            argv[n++] = (char *)extra;
        }
        if (!tls) {
            argv[n++] = "--no-tls";
            argv[n++] = port;
        } else {
            argv[n++] = port;
            argv[n++] = key;
            argv[n++] = cert;
        }
        argv[n] = NULL;
        if (posix_spawn(&d->pid, g_nghttpd, NULL, NULL, argv, environ) != 0) {
            return -1;
        }
        /* Wait until it listens (or died: the port was taken, try again). */
        g_live_nghttpd = *d;
        g_nghttpd_running = true;
        for (int i = 0; i < 100; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a;
            memset(&a, 0, sizeof(a));
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            a.sin_port = htons((uint16_t)d->port);
            int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
            close(fd);
            if (ok) {
                return 0;
            }
            if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
                break;
            }
            usleep(20 * 1000);
        }
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        g_nghttpd_running = false;
    }
    return -1;
}

static void nghttpd_stop(nghttpd *d) {
    g_nghttpd_running = false;
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
    }
    char *argv[] = {"rm", "-rf", d->dir, NULL};
    run_cmd(argv);
}

static sg_h2_op *get(sg_h2_conn *c, const char *path, const sg_stream_config *framing,
                     expect *e, uint32_t attempts) {
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_op_options_set_first_item_timeout(po, SG_SEC(2));
    sg_op_options_set_idle_timeout(po, SG_SEC(2));
    sg_op_options_set_max_attempts(po, attempts);
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20));
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.path = path;
    sg_h2_op *op = NULL;
    assert_int_equal(sg_test_h2_start(c, &req, framing, po, &g_cbs, e, &op), 0);
    e->op = op;
    return op;
}

/* NDJSON; SSE ending at "[DONE]": set in main */
static sg_stream_config g_nd, g_sse;

/* A POST without an idempotency key: unsafe to repeat once sent. */
static sg_h2_op *post(sg_h2_conn *c, expect *e, uint32_t attempts, int64_t budget) {
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, budget);
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20));
    sg_op_options_set_max_attempts(po, attempts);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions";
    req.body = "{}";
    req.body_len = 2;
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, e, &e->op), 0);
    return e->op;
}

static void nghttpd_case(bool tls) {
    if (g_nghttpd == NULL || g_nghttpd[0] == '\0') {
        skip();
    }
    nghttpd d;
    assert_int_equal(nghttpd_start(&d, tls, NULL), 0);
    char cafile[128];
    snprintf(cafile, sizeof(cafile), "%s/cert.pem", d.dir);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(d.port, tls, tls ? cafile : NULL, &c), 0);
    expect e[3];
    memset(e, 0, sizeof(e));
    get(c, "/stream.ndjson", &g_nd, &e[0], 1);
    get(c, "/stream.sse", &g_sse, &e[1], 1);
    get(c, "/absent.sse", &g_sse, &e[2], 1);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e[0].op), SG_OUTCOME_OK);
    assert_int_equal(e[0].items, 5);
    assert_int_equal(sg_h2_op_outcome(e[1].op), SG_OUTCOME_OK);
    assert_int_equal(e[1].items, 3);
    assert_int_equal(sg_h2_op_outcome(e[2].op), SG_OUTCOME_HTTP_ERROR);
    assert_int_equal(sg_h2_op_http_status(e[2].op), 404);
    assert_int_equal(e[2].items, 0);
    sg_h2_conn_free(c);
    nghttpd_stop(&d);
}

static void nghttpd_h2c_static_files_stream_ok_and_404_is_http_error(void **state) {
    (void)state;
    nghttpd_case(false);
}

static void nghttpd_tls_static_files_stream_ok_and_404_is_http_error(void **state) {
    (void)state;
    nghttpd_case(true);
}

/* nghttpd (nghttp2) refuses streams above its MAX_CONCURRENT_STREAMS that
 * arrive before we acknowledged it: never processed, retried, all ok. */
static void nghttpd_refused_streams_are_retried(void **state) {
    (void)state;
    if (g_nghttpd == NULL || g_nghttpd[0] == '\0') {
        skip();
    }
    nghttpd d;
    assert_int_equal(nghttpd_start(&d, false, "--max-concurrent-streams=3"), 0);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(d.port, false, NULL, &c), 0);
    enum { N = 12 };
    expect e[N];
    memset(e, 0, sizeof(e));
    for (int i = 0; i < N; i++) {
        get(c, "/stream.ndjson", &g_nd, &e[i], 4);
    }
    /* Write the whole first flight before reading anything: once the
     * server's SETTINGS are read, nghttp2 would respect its limit. */
    sg_h2_conn_step(c, sg_clock_monotonic_now(NULL), false, true);
    assert_int_equal(sg_h2_conn_run(c), 0);
    int retried = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(sg_h2_op_outcome(e[i].op), SG_OUTCOME_OK);
        const sg_op *p = sg_h2_op_policy(e[i].op);
        if (sg_op_attempt_count(p) > 1) {
            retried++;
            assert_false(sg_op_attempt_at(p, 0)->sent);
        }
    }
    print_message("nghttpd refused and retried: %d of %d\n", retried, N);
    assert_true(retried > 0);
    sg_h2_conn_free(c);
    nghttpd_stop(&d);
}

/* -------------------------------------------- the scripted nghttp2 peer */

enum peer_mode {
    PEER_GOAWAY,       /* 1st connection: GOAWAY(last=5) once 6 requests arrived */
    PEER_BIG_HEADERS,  /* every response carries a 16 KiB header list */
    PEER_PING_FLOOD,   /* headers, then 30,000 PINGs written as fast as it can */
    PEER_HUGE_FIELD,   /* a response with one 1 MiB header field */
    PEER_PLAIN,        /* every request: three items and [DONE] */
    PEER_SLOW,         /* every request: SLOW_ITEMS items, one per SLOW_GAP_MS */
    PEER_GOAWAY_DRAIN, /* 1st connection: GOAWAY(last=1) right after the
                          response headers of stream 1, which then runs on
                          as PEER_SLOW; later connections: PEER_PLAIN */
    PEER_FLOOD_ONE,    /* MAX_CONCURRENT_STREAMS 1, then as PEER_PING_FLOOD */
    PEER_GOAWAY_ONE,   /* as PEER_GOAWAY_DRAIN, the 1st connection with
                          MAX_CONCURRENT_STREAMS 1 */
    PEER_RST_NO_ERROR, /* every request: two NDJSON lines without
                          END_STREAM, then RST_STREAM(NO_ERROR) */
    PEER_EARLY_ANSWER, /* answers on the request's HEADERS, whole (two NDJSON
                          lines, END_STREAM), and grants no window for the
                          body: the client's upload stays blocked */
    PEER_STOP_READING, /* 1st connection: windows wide open, then it stops
                          reading once a request begins (a zero TCP window
                          for the client); later connections: PEER_PLAIN */
};

enum { SLOW_ITEMS = 8, SLOW_GAP_MS = 50 };

typedef struct peer {
    int fd;
    enum peer_mode mode;
    int conn_no;
    int requests;
    int32_t ids[64];
    bool goaway_sent;
    nghttp2_session *s;
    int32_t slow_id; /* the slow stream, 0: none */
    int32_t rst_id;  /* PEER_RST_NO_ERROR: the stream to reset once sent */
    bool rst_due;    /* its lines are out */
    bool stop;       /* PEER_STOP_READING: read nothing more */
    int slow_ready;  /* items it may send so far */
    int slow_sent;
} peer;

/* The slow stream's body: one item per tick, deferred in between. */
static ssize_t peer_slow_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                              uint32_t *flags, nghttp2_data_source *src, void *ud) {
    (void)s;
    (void)id;
    (void)ud;
    peer *p = src->ptr;
    if (p->slow_sent == p->slow_ready) {
        return NGHTTP2_ERR_DEFERRED;
    }
    int n = p->slow_sent < SLOW_ITEMS
                ? snprintf((char *)buf, len, "data: t%d\n\n", p->slow_sent)
                : snprintf((char *)buf, len, "data: [DONE]\n\n");
    if (++p->slow_sent == SLOW_ITEMS + 1) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        p->slow_id = 0;
    }
    return n;
}

static bool slow_mode(const peer *p) {
    return p->mode == PEER_SLOW ||
           ((p->mode == PEER_GOAWAY_DRAIN || p->mode == PEER_GOAWAY_ONE) &&
            p->conn_no == 1);
}

static ssize_t peer_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                         uint32_t *flags, nghttp2_data_source *src, void *ud) {
    (void)s;
    (void)id;
    (void)ud;
    static const char body[] = "data: a\n\ndata: b\n\ndata: c\n\ndata: [DONE]\n\n";
    size_t *off = src->ptr;
    size_t left = sizeof(body) - 1 - *off;
    size_t n = left < len ? left : len;
    memcpy(buf, body + *off, n);
    *off += n;
    if (*off == sizeof(body) - 1) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

/* Two NDJSON lines, the DATA without END_STREAM (a reset ends it). */
static ssize_t peer_cut_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                             uint32_t *flags, nghttp2_data_source *src, void *ud) {
    (void)s;
    (void)id;
    (void)ud;
    peer *p = src->ptr;
    int n = snprintf((char *)buf, len, "{\"a\":1}\n{\"a\":2}\n");
    *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
    p->rst_due = true;
    return n;
}

static size_t g_offsets[256];

/* Two NDJSON lines and END_STREAM. */
static ssize_t peer_lines_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t len,
                               uint32_t *flags, nghttp2_data_source *src, void *ud) {
    (void)s;
    (void)id;
    (void)ud;
    (void)src;
    int n = snprintf((char *)buf, len, "{\"a\":1}\n{\"a\":2}\n");
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return n;
}
static pid_t g_peer_pid; /* killed even when an assertion fails */

static void peer_respond(peer *p, int32_t id) {
    static char big[1024];
    memset(big, 'x', sizeof(big) - 1);
    nghttp2_nv nva[20];
    size_t n = 0;
#define NV(nm, v)                                                                   \
    nva[n++] = (nghttp2_nv){(uint8_t *)(nm), (uint8_t *)(v), strlen(nm), strlen(v), \
                            NGHTTP2_NV_FLAG_NONE}
    NV(":status", "200");
    NV("content-type", "text/event-stream");
    if (p->mode == PEER_BIG_HEADERS) {
        for (int i = 0; i < 16; i++) {
            NV("x-padding", big);
        }
    }
    static char huge[1u << 20];
    if (p->mode == PEER_HUGE_FIELD) {
        memset(huge, 'h', sizeof(huge) - 1);
        NV("x-huge", huge);
    }
#undef NV
    if (slow_mode(p) && p->slow_id == 0) {
        p->slow_id = id;
        p->slow_ready = p->slow_sent = 0;
        nghttp2_data_provider prd;
        prd.source.ptr = p;
        prd.read_callback = peer_slow_body;
        nghttp2_submit_response(p->s, id, nva, n, &prd);
        if (p->mode == PEER_GOAWAY_DRAIN || p->mode == PEER_GOAWAY_ONE) {
            /* stream 1 is processed; the client must open new ones elsewhere */
            nghttp2_submit_goaway(p->s, NGHTTP2_FLAG_NONE, id, NGHTTP2_NO_ERROR, NULL, 0);
        }
        return;
    }
    if (p->mode == PEER_EARLY_ANSWER) {
        nghttp2_data_provider prd;
        prd.source.ptr = p;
        prd.read_callback = peer_lines_body;
        nghttp2_submit_response(p->s, id, nva, n, &prd);
        return;
    }
    if (p->mode == PEER_RST_NO_ERROR) {
        nghttp2_data_provider prd;
        prd.source.ptr = p;
        prd.read_callback = peer_cut_body;
        p->rst_id = id;
        nghttp2_submit_response(p->s, id, nva, n, &prd);
        return;
    }
    if (p->mode == PEER_PING_FLOOD || p->mode == PEER_FLOOD_ONE) {
        /* headers only: the stream stays open under the flood */
        nghttp2_submit_headers(p->s, NGHTTP2_FLAG_NONE, id, NULL, nva, n, NULL);
        return;
    }
    g_offsets[id & 255] = 0;
    nghttp2_data_provider prd;
    prd.source.ptr = &g_offsets[id & 255];
    prd.read_callback = peer_body;
    nghttp2_submit_response(p->s, id, nva, n, &prd);
}

static int peer_on_frame(nghttp2_session *s, const nghttp2_frame *f, void *ud) {
    (void)s;
    peer *p = ud;
    if (p->mode == PEER_EARLY_ANSWER && f->hd.type == NGHTTP2_HEADERS &&
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        peer_respond(p, f->hd.stream_id); /* before the body: it needs none */
        return 0;
    }
    if (p->mode == PEER_STOP_READING && p->conn_no == 1 &&
        f->hd.type == NGHTTP2_HEADERS) {
        p->stop = true; /* its body, megabytes of it, is never read */
        return 0;
    }
    /* A request is complete at END_STREAM, on HEADERS or on its body. */
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        return 0;
    }
    if (p->requests < 64) {
        p->ids[p->requests++] = f->hd.stream_id;
    }
    if (p->mode == PEER_GOAWAY && p->conn_no == 1) {
        if (p->requests == 6 && !p->goaway_sent) {
            /* Streams 1, 3, 5 are processed; 7, 9, 11 never will be. */
            nghttp2_submit_goaway(p->s, NGHTTP2_FLAG_NONE, 5, NGHTTP2_NO_ERROR, NULL, 0);
            p->goaway_sent = true;
            for (int i = 0; i < p->requests; i++) {
                if (p->ids[i] <= 5) {
                    peer_respond(p, p->ids[i]);
                }
            }
        }
        return 0;
    }
    peer_respond(p, f->hd.stream_id);
    return 0;
}

static void peer_serve_conn(peer *p) {
    nghttp2_session_callbacks *cb;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, peer_on_frame);
    nghttp2_option *opt;
    nghttp2_option_new(&opt);
    nghttp2_option_set_max_send_header_block_length(opt, 4u << 20);
    if (p->mode == PEER_EARLY_ANSWER) {
        nghttp2_option_set_no_auto_window_update(opt, 1); /* the body waits */
    }
    nghttp2_session_server_new2(&p->s, cb, p, opt);
    nghttp2_option_del(opt);
    nghttp2_settings_entry one = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 1};
    nghttp2_submit_settings(
        p->s, NGHTTP2_FLAG_NONE, &one,
        p->mode == PEER_FLOOD_ONE || (p->mode == PEER_GOAWAY_ONE && p->conn_no == 1) ? 1
                                                                                     : 0);
    if (p->mode == PEER_STOP_READING) {
        /* every window wide open: the client's DATA is held by TCP alone */
        nghttp2_settings_entry wide = {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0x7fffffff};
        nghttp2_submit_settings(p->s, NGHTTP2_FLAG_NONE, &wide, 1);
        nghttp2_submit_window_update(p->s, NGHTTP2_FLAG_NONE, 0, 0x7fffffff - 65535);
    }
    uint8_t buf[16384];
    for (;;) {
        const uint8_t *out;
        ssize_t n;
        while ((n = nghttp2_session_mem_send(p->s, &out)) > 0) {
            if (send(p->fd, out, (size_t)n, MSG_NOSIGNAL) != n) {
                goto done;
            }
        }
        if (p->stop) {
            sleep(20); /* reads nothing: the client's sends fill the socket */
            goto done;
        }
        if (p->rst_due && p->rst_id != 0) {
            /* the lines are out: end the stream by a reset, not END_STREAM */
            nghttp2_submit_rst_stream(p->s, NGHTTP2_FLAG_NONE, p->rst_id,
                                      NGHTTP2_NO_ERROR);
            p->rst_id = 0;
            p->rst_due = false;
            continue;
        }
        if ((p->mode == PEER_PING_FLOOD || p->mode == PEER_FLOOD_ONE) &&
            p->requests > 0) {
            /* Raw PING frames (length 8, type 6, stream 0), each wanting
             * an ACK, far faster than any client may answer them. */
            static uint8_t pings[30000 * 17];
            for (size_t i = 0; i < 30000; i++) {
                uint8_t *f = pings + i * 17;
                memset(f, 0, 17);
                f[2] = 8;
                f[3] = NGHTTP2_PING;
            }
            for (size_t off = 0; off < sizeof(pings);) {
                ssize_t w = send(p->fd, pings + off, sizeof(pings) - off, MSG_NOSIGNAL);
                if (w <= 0) {
                    goto done;
                }
                off += (size_t)w;
            }
            goto done;
        }
        if (!nghttp2_session_want_read(p->s) && !nghttp2_session_want_write(p->s)) {
            break;
        }
        if (p->slow_id != 0) {
            /* the next item of the slow stream is due every SLOW_GAP_MS */
            struct pollfd pf = {p->fd, POLLIN, 0};
            if (poll(&pf, 1, SLOW_GAP_MS) == 0) {
                p->slow_ready++;
                nghttp2_session_resume_data(p->s, p->slow_id);
                continue;
            }
        }
        ssize_t r = recv(p->fd, buf, sizeof(buf), 0);
        if (r <= 0 || nghttp2_session_mem_recv(p->s, buf, (size_t)r) < 0) {
            break;
        }
    }
done:
    nghttp2_session_del(p->s);
    nghttp2_session_callbacks_del(cb);
    /* A graceful close: closing with unread input would send a TCP RST,
     * which may destroy responses the client has not read yet. */
    shutdown(p->fd, SHUT_WR);
    struct pollfd pf = {p->fd, POLLIN, 0};
    while (poll(&pf, 1, 10000) > 0 && recv(p->fd, buf, sizeof(buf), 0) > 0) {
    }
    close(p->fd);
}

/* Forks a server on a free port; returns its pid and sets *port. */
static pid_t peer_start(enum peer_mode mode, int *port) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 8), 0);
    getsockname(lfd, (struct sockaddr *)&a, &len);
    *port = ntohs(a.sin_port);
    pid_t pid = fork();
    if (pid == 0) {
        /* One process per connection, so connections run side by side;
         * one process group, so peer_stop ends them all. */
        setpgid(0, 0);
        for (int conn_no = 1; conn_no <= 4; conn_no++) {
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0) {
                _exit(1);
            }
            if (fork() == 0) {
                close(lfd);
                peer p;
                memset(&p, 0, sizeof(p));
                p.fd = fd;
                p.mode = mode;
                p.conn_no = conn_no;
                peer_serve_conn(&p);
                _exit(0);
            }
            close(fd);
        }
        while (wait(NULL) > 0) {
        }
        _exit(0);
    }
    setpgid(pid, pid); /* also here: no race with the child's own call */
    close(lfd);
    g_peer_pid = pid;
    return pid;
}

static void peer_stop(pid_t pid) {
    if (pid > 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    g_peer_pid = 0;
}

static int teardown(void **state) {
    (void)state;
    peer_stop(g_peer_pid);
    if (g_nghttpd_running) {
        nghttpd_stop(&g_live_nghttpd);
    }
    return 0;
}

static void goaway_above_last_stream_id_is_never_processed_and_retried(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_GOAWAY, &port);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(port, false, NULL, &c), 0);
    enum { N = 6 };
    expect e[N];
    memset(e, 0, sizeof(e));
    for (int i = 0; i < N; i++) {
        /* POST without a key: only "never processed" makes a retry safe. */
        post(c, &e[i], 4, SG_SEC(5));
        assert_int_equal(sg_h2_op_stream_id(e[i].op), 2 * i + 1);
    }
    assert_int_equal(sg_h2_conn_run(c), 0);
    for (int i = 0; i < N; i++) {
        const sg_op *p = sg_h2_op_policy(e[i].op);
        if (sg_h2_op_outcome(e[i].op) != SG_OUTCOME_OK) {
            char rep[8192];
            sg_h2_op_report(e[i].op, rep, sizeof(rep), NULL);
            print_error("op %d: %s\n%s\n", i, sg_h2_op_error(e[i].op), rep);
        }
        assert_int_equal(sg_h2_op_outcome(e[i].op), SG_OUTCOME_OK);
        assert_int_equal(e[i].items, 3);
        if (i < 3) {
            assert_int_equal(sg_op_attempt_count(p), 1);
        } else {
            /* Refused by GOAWAY, retried on a new connection. */
            const sg_op_attempt *a = sg_op_attempt_at(p, 0);
            assert_true(sg_op_attempt_count(p) >= 2);
            assert_int_equal(a->outcome, SG_OUTCOME_TRANSPORT_ERROR);
            assert_false(a->sent);
            assert_false(a->outcome_unknown);
            assert_int_equal(a->decision, SG_OP_RETRY);
        }
    }
    sg_h2_conn_free(c);
    peer_stop(pid);
}

static void oversized_response_header_list_is_protocol_error(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_BIG_HEADERS, &port);
    SG_AUTO_H2_CONN_OPTIONS(o);
    assert_int_equal(sg_h2_conn_options_set_host(o, "127.0.0.1"), 0);
    assert_int_equal(sg_h2_conn_options_set_port(o, port), 0);
    assert_int_equal(sg_h2_conn_options_set_max_header_list(o, 4096), 0);
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, o), 0);
    expect e;
    memset(&e, 0, sizeof(e));
    get(c, "/big", &g_sse, &e, 3);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_PROTOCOL_ERROR);
    /* protocol_error stops: never retried. */
    assert_int_equal(sg_op_attempt_count(sg_h2_op_policy(e.op)), 1);
    assert_non_null(strstr(sg_h2_op_error(e.op), "max_header_list"));
    /* The connection survives for other streams. */
    assert_true(sg_h2_conn_usable(c));
    sg_h2_conn_free(c);
    peer_stop(pid);
}

/* A server that breaks HTTP/2 - a PING flood, a header field nghttp2 will
 * not inflate - gets protocol_error on the streams it broke, never a
 * retryable transport_error that would make the client come back. */
static void a_server_that_breaks_http2_is_a_protocol_error(void **state) {
    (void)state;
    enum peer_mode modes[2] = {PEER_PING_FLOOD, PEER_HUGE_FIELD};
    for (int i = 0; i < 2; i++) {
        int port;
        pid_t pid = peer_start(modes[i], &port);
        sg_h2_conn *c = NULL;
        assert_int_equal(connect_h2(port, false, NULL, &c), 0);
        expect e;
        memset(&e, 0, sizeof(e));
        get(c, "/hostile", &g_sse, &e, 3);
        assert_int_equal(sg_h2_conn_run(c), 0);
        if (sg_h2_op_outcome(e.op) != SG_OUTCOME_PROTOCOL_ERROR) {
            fail_msg("mode %d: %s: %s", i, sg_outcome_name(sg_h2_op_outcome(e.op)),
                     sg_h2_op_error(e.op));
        }
        assert_int_equal(sg_op_attempt_count(sg_h2_op_policy(e.op)), 1);
        assert_non_null(strstr(sg_h2_op_error(e.op), "broke"));
        sg_h2_conn_free(c);
        peer_stop(pid);
    }
}

/* The server breaks HTTP/2 with a request of ours queued behind its
 * MAX_CONCURRENT_STREAMS 1: the stream it saw is protocol_error, the one
 * that never left is no protocol error of its (never seen, never
 * processed) - transport_error, unsent, and retried. */
static void a_stream_the_breaking_server_never_saw_is_retried(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_FLOOD_ONE, &port);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(port, false, NULL, &c), 0);
    expect seen, queued;
    memset(&seen, 0, sizeof(seen));
    memset(&queued, 0, sizeof(queued));
    get(c, "/hostile-1", &g_sse, &seen, 1);
    get(c, "/hostile-2", &g_sse, &queued, 2);
    assert_int_equal(sg_h2_conn_run(c), 0);
    assert_int_equal(sg_h2_op_outcome(seen.op), SG_OUTCOME_PROTOCOL_ERROR);
    const sg_op *pol = sg_h2_op_policy(queued.op);
    assert_true(sg_op_attempt_count(pol) >= 1);
    const sg_op_attempt *first = sg_op_attempt_at(pol, 0);
    if (first->outcome != SG_OUTCOME_TRANSPORT_ERROR || first->sent) {
        fail_msg("the queued stream's first attempt: %s, sent %d",
                 sg_outcome_name(first->outcome), (int)first->sent);
    }
    assert_int_equal(sg_op_attempt_count(pol), 2); /* retried: it was never sent */
    sg_h2_conn_free(c);
    peer_stop(pid);
}

/* --------------------------------------------- the scripted DNS server */

typedef struct dns_server {
    int fd;
    int port;
    bool answer; /* false: read every query, answer none */
    int queries;
} dns_server;

static void dns_open(dns_server *d, bool answer) {
    memset(d, 0, sizeof(*d));
    d->answer = answer;
    d->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    assert_int_equal(bind(d->fd, (struct sockaddr *)&a, sizeof(a)), 0);
    getsockname(d->fd, (struct sockaddr *)&a, &len);
    d->port = ntohs(a.sin_port);
}

/* Reads the queries waiting; when answering, A queries get 127.0.0.1 and
 * every other type an empty NOERROR answer (RFC 1035 §4.1). */
static void dns_serve(dns_server *d) {
    uint8_t q[512], r[600];
    struct sockaddr_in from;
    socklen_t flen = sizeof(from);
    ssize_t n;
    while ((n = recvfrom(d->fd, q, sizeof(q), 0, (struct sockaddr *)&from, &flen)) > 12) {
        d->queries++;
        size_t pos = 12;
        while (pos < (size_t)n && q[pos] != 0) {
            pos += (size_t)q[pos] + 1;
        }
        if (!d->answer || pos + 5 > (size_t)n) {
            continue;
        }
        size_t qend = pos + 5;
        bool type_a = q[pos + 1] == 0 && q[pos + 2] == 1;
        memcpy(r, q, qend);
        r[2] = 0x81; /* response, recursion desired */
        r[3] = 0x80; /* recursion available, NOERROR */
        r[4] = 0, r[5] = 1;
        r[6] = 0, r[7] = type_a ? 1 : 0;
        memset(r + 8, 0, 4); /* no authority, no additional (EDNS dropped) */
        size_t len = qend;
        if (type_a) {
            static const uint8_t rr[] = {0xc0, 0x0c, 0, 1, 0,   1, 0, 0,
                                         0,    60,   0, 4, 127, 0, 0, 1};
            memcpy(r + len, rr, sizeof(rr));
            len += sizeof(rr);
        }
        sendto(d->fd, r, len, 0, (struct sockaddr *)&from, flen);
    }
}

/* Drives @n connections (and the DNS server) from one poll loop, as an
 * application's loop would, until every expectation is done or 5 s. */
static void drive(sg_h2_conn **cs, size_t n, dns_server *d, expect *const *es,
                  size_t ne) {
    int64_t give_up = sg_clock_monotonic_now(NULL) + SG_SEC(5);
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < ne; i++) {
            all = all && es[i]->done;
        }
        int64_t now = sg_clock_monotonic_now(NULL);
        if (all || now >= give_up) {
            return;
        }
        struct pollfd pf[4];
        int64_t next = give_up;
        for (size_t i = 0; i < n; i++) {
            pf[i] = (struct pollfd){sg_h2_conn_fd(cs[i]), POLLIN, 0};
            next = sg_time_min(next, sg_h2_conn_next_deadline(cs[i]));
        }
        size_t np = n;
        if (d != NULL) {
            pf[np++] = (struct pollfd){d->fd, POLLIN, 0};
        }
        int ms = next > now ? (int)((next - now + SG_MS(1) - 1) / SG_MS(1)) : 0;
        poll(pf, (nfds_t)np, ms);
        if (d != NULL) {
            dns_serve(d);
        }
        for (size_t i = 0; i < n; i++) {
            sg_h2_conn_step(cs[i], sg_clock_monotonic_now(NULL), true, true);
        }
    }
}

static sg_h2_conn *on_demand(const char *host, int port, const char *dns,
                             int64_t connect_timeout) {
    char err[SG_H2_ERROR_SIZE] = "";
    SG_AUTO_H2_CONN_OPTIONS(o);
    assert_int_equal(sg_h2_conn_options_set_host(o, host), 0);
    assert_int_equal(sg_h2_conn_options_set_port(o, port), 0);
    assert_int_equal(sg_h2_conn_options_set_connect_on_demand(o, true), 0);
    assert_int_equal(sg_h2_conn_options_set_dns_servers(o, dns), 0);
    assert_int_equal(sg_h2_conn_options_set_connect_timeout(o, connect_timeout), 0);
    assert_int_equal(sg_h2_conn_options_set_errbuf(o, err), 0);
    sg_h2_conn *c = NULL;
    if (sg_h2_conn_new(&c, o) != 0) {
        fail_msg("sg_h2_conn_new: %s", err);
    }
    return c;
}

/* A server sends GOAWAY while a long stream runs: that stream finishes on
 * the old connection while a new operation opens a new one, at once - not
 * after the old stream ends, and never as a failure. */
static void
after_goaway_new_streams_open_a_new_connection_while_the_old_drains(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_GOAWAY_DRAIN, &port);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(port, false, NULL, &c), 0);
    expect a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    get(c, "/slow", &g_sse, &a, 1);
    int64_t give_up = sg_clock_monotonic_now(NULL) + SG_SEC(3);
    while (a.items == 0 && !a.done && sg_clock_monotonic_now(NULL) < give_up) {
        struct pollfd pf = {sg_h2_conn_fd(c), POLLIN, 0};
        poll(&pf, 1, 10);
        sg_h2_conn_step(c, sg_clock_monotonic_now(NULL), true, true);
    }
    assert_int_equal(a.items, 1);
    assert_false(sg_h2_conn_usable(c)); /* the GOAWAY came with the headers */

    /* a POST without a key, one attempt: no retry could hide a failure */
    post(c, &b, 1, SG_SEC(3));
    assert_int_equal(sg_h2_conn_run(c), 0);
    if (sg_h2_op_outcome(b.op) != SG_OUTCOME_OK) {
        fail_msg("new op after GOAWAY: %s: %s", sg_outcome_name(sg_h2_op_outcome(b.op)),
                 sg_h2_op_error(b.op));
    }
    assert_int_equal(b.items, 3);
    assert_int_equal(sg_op_attempt_count(sg_h2_op_policy(b.op)), 1);
    assert_int_equal(sg_h2_op_outcome(a.op), SG_OUTCOME_OK);
    assert_int_equal(a.items, SLOW_ITEMS);
    assert_int_equal(sg_op_attempt_count(sg_h2_op_policy(a.op)), 1);
    /* side by side: the new one ended while the old one still streamed */
    assert_true(b.done_at < a.done_at);
    assert_true(sg_h2_conn_usable(c)); /* the new connection */
    sg_h2_conn_free(c);
    peer_stop(pid);
}

/* A request waiting for a slot (the server's MAX_CONCURRENT_STREAMS 1)
 * when the server sends GOAWAY: it goes at once on a new connection, as a
 * new one would, one attempt - not held for the old connection's slot and
 * then refused there. */
static void
after_goaway_a_stream_waiting_for_a_slot_goes_on_a_new_connection(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_GOAWAY_ONE, &port);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(port, false, NULL, &c), 0);
    for (int i = 0; i < 5; i++) { /* the server's SETTINGS are in */
        struct pollfd pf = {sg_h2_conn_fd(c), POLLIN, 0};
        poll(&pf, 1, 10);
        sg_h2_conn_step(c, sg_clock_monotonic_now(NULL), true, true);
    }
    expect a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    get(c, "/slow", &g_sse, &a, 1);
    post(c, &b, 1, SG_SEC(3)); /* waits for the one slot */
    assert_int_equal(sg_h2_conn_run(c), 0);
    if (sg_h2_op_outcome(b.op) != SG_OUTCOME_OK) {
        fail_msg("the waiting op after GOAWAY: %s: %s",
                 sg_outcome_name(sg_h2_op_outcome(b.op)), sg_h2_op_error(b.op));
    }
    assert_int_equal(b.items, 3);
    assert_int_equal(sg_op_attempt_count(sg_h2_op_policy(b.op)), 1);
    assert_int_equal(sg_h2_op_outcome(a.op), SG_OUTCOME_OK);
    assert_int_equal(a.items, SLOW_ITEMS);
    /* side by side: it ended while the old connection's stream still ran */
    assert_true(b.done_at < a.done_at);
    sg_h2_conn_free(c);
    peer_stop(pid);
}

/* RST_STREAM(NO_ERROR) before END_STREAM ends a body that was not
 * finished: an NDJSON stream without a terminal line, cut that way after
 * two lines, is truncated (partial), not a clean end. */
static void rst_stream_no_error_before_the_end_is_truncated(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_RST_NO_ERROR, &port);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(port, false, NULL, &c), 0);
    expect a;
    memset(&a, 0, sizeof(a));
    get(c, "/cut.ndjson", &g_nd, &a, 1);
    assert_int_equal(sg_h2_conn_run(c), 0);
    if (sg_h2_op_outcome(a.op) != SG_OUTCOME_TRUNCATED) {
        fail_msg("a body reset with NO_ERROR: %s (%s)",
                 sg_outcome_name(sg_h2_op_outcome(a.op)),
                 sg_h2_op_error(a.op) != NULL ? sg_h2_op_error(a.op) : "");
    }
    assert_int_equal(a.items, 2);
    const sg_op_attempt *r = sg_op_attempt_at(sg_h2_op_policy(a.op), 0);
    assert_true(r->partial);
    sg_h2_conn_free(c);
    peer_stop(pid);
}

/* The server answers whole (two NDJSON lines, END_STREAM) on the request's
 * HEADERS and grants no window for its 1 MiB body: the answer is the
 * stream's end - ok at once, our side stopped - not an idle timeout while
 * the upload waits for a window that never comes. */
static void a_whole_answer_before_the_request_body_ends_the_stream(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_EARLY_ANSWER, &port);
    sg_h2_conn *c = NULL;
    assert_int_equal(connect_h2(port, false, NULL, &c), 0);
    static char body[1 << 20];
    memset(body, 'b', sizeof(body));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(5));
    sg_op_options_set_idle_timeout(po, SG_MS(800));
    sg_op_options_set_max_attempts(po, 1);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/upload.ndjson";
    req.body = body;
    req.body_len = sizeof(body);
    expect a;
    memset(&a, 0, sizeof(a));
    int64_t t0 = sg_clock_monotonic_now(NULL);
    assert_int_equal(sg_test_h2_start(c, &req, &g_nd, po, &g_cbs, &a, &a.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    int64_t took = sg_clock_monotonic_now(NULL) - t0;
    if (sg_h2_op_outcome(a.op) != SG_OUTCOME_OK) {
        fail_msg("a whole answer before the body: %s: %s",
                 sg_outcome_name(sg_h2_op_outcome(a.op)),
                 sg_h2_op_error(a.op) != NULL ? sg_h2_op_error(a.op) : "");
    }
    assert_int_equal(a.items, 2);
    assert_true(took < SG_MS(800));
    sg_h2_conn_free(c);
    peer_stop(pid);
}

/* A server that stops reading (a zero TCP window): after connect_timeout
 * without progress the connection is lost, and the retry goes on a new
 * one - not back onto the stalled connection, attempt after attempt,
 * until the budget is gone. */
static void a_connection_the_server_stopped_reading_is_given_up(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_STOP_READING, &port);
    SG_AUTO_H2_CONN_OPTIONS(o);
    assert_int_equal(sg_h2_conn_options_set_host(o, "127.0.0.1"), 0);
    assert_int_equal(sg_h2_conn_options_set_port(o, port), 0);
    assert_int_equal(sg_h2_conn_options_set_connect_timeout(o, SG_MS(500)), 0);
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, o), 0);
    static char body[64 << 20]; /* far more than the sockets hold */
    memset(body, 'b', sizeof(body));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_first_item_timeout(po, SG_SEC(4));
    sg_op_options_set_max_attempts(po, 3);
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20));
    sg_op_options_set_idempotency_key(po, "stall-1");
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.path = "/v1/chat/completions";
    req.body = body;
    req.body_len = sizeof(body);
    expect a;
    memset(&a, 0, sizeof(a));
    int64_t t0 = sg_clock_monotonic_now(NULL);
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &a, &a.op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    int64_t took = sg_clock_monotonic_now(NULL) - t0;
    if (sg_h2_op_outcome(a.op) != SG_OUTCOME_OK) {
        fail_msg("after the server stopped reading: %s: %s",
                 sg_outcome_name(sg_h2_op_outcome(a.op)), sg_h2_op_error(a.op));
    }
    assert_int_equal(sg_op_attempt_count(sg_h2_op_policy(a.op)), 2);
    /* given up by the connection's bound, not by the first-item clock */
    assert_true(took < SG_SEC(4));
    sg_h2_conn_free(c);
    peer_stop(pid);
}

/* DNS that never answers: the lookup runs inside the loop (c-ares), other
 * streams on the same loop keep their pace, and the connect timeout ends
 * the wait - an attempt in phase connect, never sent. */
static void a_silent_dns_server_does_not_block_the_loop(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_SLOW, &port);
    sg_h2_conn *cs[2] = {NULL, NULL};
    assert_int_equal(connect_h2(port, false, NULL, &cs[0]), 0);
    dns_server d;
    dns_open(&d, false);
    char servers[32];
    snprintf(servers, sizeof(servers), "127.0.0.1:%d", d.port);
    cs[1] = on_demand("model.test", port, servers, SG_MS(400));
    expect a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    get(cs[0], "/slow", &g_sse, &a, 1);
    int64_t t0 = sg_clock_monotonic_now(NULL);
    get(cs[1], "/v1/x", &g_sse, &b, 1);
    expect *es[2] = {&a, &b};
    drive(cs, 2, &d, es, 2);

    assert_true(d.queries >= 1); /* asked our server, through c-ares */
    assert_int_equal(sg_h2_op_outcome(b.op), SG_OUTCOME_CONNECT_TIMEOUT);
    const sg_op_attempt *at = sg_op_attempt_at(sg_h2_op_policy(b.op), 0);
    assert_int_equal(at->phase, SG_PHASE_CONNECT);
    assert_false(at->sent);
    assert_non_null(strstr(sg_h2_op_error(b.op), "resolving"));
    int64_t took = b.done_at - t0;
    print_message("connect timeout 400 ms ended after %.1f ms; other stream's longest "
                  "gap %.1f ms (items every %d ms)\n",
                  (double)took / 1e6, (double)a.max_gap / 1e6, SLOW_GAP_MS);
    assert_true(took >= SG_MS(400));
    assert_true(took < SG_MS(500));
    assert_int_equal(sg_h2_op_outcome(a.op), SG_OUTCOME_OK);
    assert_int_equal(a.items, SLOW_ITEMS);
    assert_true(a.max_gap < SG_MS(SLOW_GAP_MS + 60));
    sg_h2_conn_free(cs[0]);
    sg_h2_conn_free(cs[1]);
    close(d.fd);
    peer_stop(pid);
}

/* A connect timeout longer than what is left of the budget: the budget
 * ends the wait, and says so (budget_exhausted, phase connect). */
static void the_budget_bounds_a_connection_being_made(void **state) {
    (void)state;
    dns_server d;
    dns_open(&d, false);
    char servers[32];
    snprintf(servers, sizeof(servers), "127.0.0.1:%d", d.port);
    sg_h2_conn *c = on_demand("model.test", 443, servers, SG_MS(4500));
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_MS(300));
    sg_op_options_set_max_attempts(po, 3);
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    req.method = "GET";
    req.path = "/v1/x";
    expect e;
    memset(&e, 0, sizeof(e));
    int64_t t0 = sg_clock_monotonic_now(NULL);
    assert_int_equal(sg_test_h2_start(c, &req, &g_sse, po, &g_cbs, &e, &e.op), 0);
    expect *es[1] = {&e};
    drive(&c, 1, &d, es, 1);
    int64_t took = e.done_at - t0;
    assert_int_equal(sg_h2_op_outcome(e.op), SG_OUTCOME_BUDGET_EXHAUSTED);
    const sg_op *p = sg_h2_op_policy(e.op);
    assert_int_equal(sg_op_attempt_count(p), 1);
    assert_int_equal(sg_op_attempt_at(p, 0)->phase, SG_PHASE_CONNECT);
    assert_true(took >= SG_MS(300) && took < SG_MS(400));
    sg_h2_conn_free(c);
    close(d.fd);
}

static void a_name_resolves_through_the_dns_servers_given(void **state) {
    (void)state;
    int port;
    pid_t pid = peer_start(PEER_PLAIN, &port);
    dns_server d;
    dns_open(&d, true);
    char servers[32];
    snprintf(servers, sizeof(servers), "127.0.0.1:%d", d.port);
    sg_h2_conn *c = on_demand("model.test", port, servers, SG_SEC(2));
    expect e;
    memset(&e, 0, sizeof(e));
    get(c, "/v1/x", &g_sse, &e, 1);
    expect *es[1] = {&e};
    drive(&c, 1, &d, es, 1);
    assert_true(d.queries >= 1);
    if (sg_h2_op_outcome(e.op) != SG_OUTCOME_OK) {
        fail_msg("%s: %s", sg_outcome_name(sg_h2_op_outcome(e.op)), sg_h2_op_error(e.op));
    }
    assert_int_equal(e.items, 3);
    assert_true(sg_h2_conn_usable(c));
    sg_h2_conn_free(c);
    close(d.fd);
    peer_stop(pid);
}

int main(int argc, char **argv) {
    g_nghttpd = argc > 1 ? argv[1] : NULL;
    g_nd = sg_test_framing(SG_FORMAT_NDJSON, NULL);
    g_sse = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    signal(SIGPIPE, SIG_IGN); /* the scripted peer writes to closed sockets */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(
            nghttpd_h2c_static_files_stream_ok_and_404_is_http_error, teardown),
        cmocka_unit_test_teardown(
            nghttpd_tls_static_files_stream_ok_and_404_is_http_error, teardown),
        cmocka_unit_test_teardown(nghttpd_refused_streams_are_retried, teardown),
        cmocka_unit_test_teardown(
            goaway_above_last_stream_id_is_never_processed_and_retried, teardown),
        cmocka_unit_test_teardown(
            after_goaway_new_streams_open_a_new_connection_while_the_old_drains,
            teardown),
        cmocka_unit_test_teardown(
            after_goaway_a_stream_waiting_for_a_slot_goes_on_a_new_connection, teardown),
        cmocka_unit_test_teardown(rst_stream_no_error_before_the_end_is_truncated,
                                  teardown),
        cmocka_unit_test_teardown(a_connection_the_server_stopped_reading_is_given_up,
                                  teardown),
        cmocka_unit_test_teardown(a_whole_answer_before_the_request_body_ends_the_stream,
                                  teardown),
        cmocka_unit_test_teardown(a_silent_dns_server_does_not_block_the_loop, teardown),
        cmocka_unit_test_teardown(the_budget_bounds_a_connection_being_made, teardown),
        cmocka_unit_test_teardown(a_name_resolves_through_the_dns_servers_given,
                                  teardown),
        cmocka_unit_test_teardown(oversized_response_header_list_is_protocol_error,
                                  teardown),
        cmocka_unit_test_teardown(a_stream_the_breaking_server_never_saw_is_retried,
                                  teardown),
        cmocka_unit_test_teardown(a_server_that_breaks_http2_is_a_protocol_error,
                                  teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
