/*
 * A request an HTTP/2 server says it never processed (RFC 9113 §8.7:
 * RST_STREAM(REFUSED_STREAM), or a stream above a GOAWAY's last stream id)
 * is never sent in the outcome-unknown sense, on both transports: an
 * unsafe POST (no idempotency key) so refused is an attempt recorded
 * unsent (phase send, not outcome_unknown), the policy's retry of it is a
 * new attempt, and every request that reached the server is an attempt in
 * the report.  Against the real sg-fakemodel over TLS with ALPN h2
 * (refuse=1, goaway=1), on a fresh connection and on a pooled one, and
 * with another stream running beside it.
 *
 * And what must stay as it was: a pooled connection that dies as the
 * request goes (HTTP/2 reset by the peer, HTTP/1.1 closed without an
 * answer) is outcome unknown and libcurl's own resend of it is stopped.
 *
 * Usage: refused_stream_test PATH/TO/sg-fakemodel
 */
#define _GNU_SOURCE
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <streamguard/curl.h>

#include "h2_test_util.h"
#include "../sg_auto.h"

static const char *g_fm_path;
static fm_server g_srv;

/* What one operation ended with, on either transport. */
typedef struct seen {
    sg_outcome outcome;
    uint32_t attempts;
    sg_op_attempt first;
    char report[16384];
} seen;

static void see(seen *v, const sg_op *pol, int rc_report) {
    assert_int_equal(rc_report, 0);
    v->outcome = sg_op_outcome(pol);
    v->attempts = sg_op_attempt_count(pol);
    assert_true(v->attempts > 0);
    v->first = *sg_op_attempt_at(pol, 0);
}

/* How many requests carrying @tag the server received. */
static int received(const char *tag) {
    char *log = fm_fetch(&g_srv, "/_log?event=received", 0);
    assert_non_null(log);
    int n = fm_count(log, tag);
    free(log);
    return n;
}

/* The "conn" (connection number) of the first request with @tag the
 * server received, and its "stream_id" in @sid; -1 when absent. */
static long conn_of(const char *tag, long *sid) {
    char *log = fm_fetch(&g_srv, "/_log?event=received", 0);
    assert_non_null(log);
    const char *at = strstr(log, tag);
    long conn = -1;
    if (at != NULL) {
        while (at > log && at[-1] != '\n') {
            at--;
        }
        const char *c = strstr(at, "\"conn\":");
        const char *st = strstr(at, "\"stream_id\":");
        conn = c != NULL ? atol(c + 7) : -1;
        *sid = st != NULL ? atol(st + 12) : -1;
    }
    free(log);
    return conn;
}

/* A fresh count for fail_first: requests without a key share one. */
static void reset_log(void) {
    free(fm_fetch(&g_srv, "/_log/reset", 1));
}

/* The attempt was refused by the server before any processing: recorded
 * unsent, in phase send, never outcome unknown, and retryable. */
static void assert_never_processed(const sg_op_attempt *a) {
    if (a->outcome != SG_OUTCOME_TRANSPORT_ERROR || a->sent || a->outcome_unknown ||
        a->phase != SG_PHASE_SEND || !a->retryable ||
        strstr(a->error, "never processed") == NULL) {
        fail_msg(
            "attempt %u: %s, phase %s, sent %d, outcome_unknown %d, retryable %d: %s",
            a->n, sg_outcome_name(a->outcome), sg_phase_name(a->phase), a->sent,
            a->outcome_unknown, a->retryable, a->error);
    }
}

/* ------------------------------------------------------------- libcurl */

static int count_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    (*(int *)ud)++;
    return 0;
}

/* An operation for @url on @e: a POST without an idempotency key (unsafe)
 * when @body, else a GET; over @version. */
static sg_curl_op *curl_op(CURL *e, const char *url, const char *body, long version,
                           uint32_t attempts, int *items) {
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, version);
    if (body != NULL) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    } else {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
    }
    SG_AUTO_OPTIONS(po);
    assert_int_equal(sg_op_options_set_method(po, body != NULL ? "POST" : "GET"), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(10)), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, attempts), 0);
    assert_int_equal(sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20)), 0);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_cafile(co, g_srv.ca_path), 0);
    assert_int_equal(sg_curl_options_set_on_item(co, count_item), 0);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, e, po, co, items), 0);
    return op;
}

typedef struct curl_case {
    const char *base; /* NULL: the server's TLS base */
    const char *query;
    long version;
    uint32_t attempts;
    bool warm; /* a GET first on the same multi: the POST goes pooled */
    int relay; /* the relay's control fd, armed after the warm GET; -1 none */
} curl_case;

/* Asks the relay (below) to reset the next request that goes through it,
 * and waits until it is ready. */
static void arm_relay(int fd) {
    char b = 'a';
    assert_int_equal(write(fd, &b, 1), 1);
    assert_int_equal(read(fd, &b, 1), 1);
}

/* Runs the case's POST on one managed multi (so a warm GET's connection
 * is pooled for it, as in sg-proxy) and reads what it ended with. */
static void curl_post(const curl_case *k, seen *v) {
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    CURL *e = curl_easy_init();
    assert_non_null(e);
    const char *base = k->base != NULL ? k->base : g_srv.tls_base;
    char url[512];
    int items = 0;
    if (k->warm) {
        snprintf(url, sizeof(url), "%s/v1/chat/completions?n=1&_t=warm.", base);
        sg_curl_op *w = curl_op(e, url, NULL, k->version, 1, &items);
        assert_int_equal(sg_curl_multi_add(m, w), 0);
        assert_int_equal(sg_curl_multi_run(m), 0);
        assert_int_equal(sg_curl_op_outcome(w), SG_OUTCOME_OK);
        sg_curl_op_free(w);
        if (k->relay >= 0) {
            arm_relay(k->relay);
        }
    }
    snprintf(url, sizeof(url), "%s/v1/chat/completions?%s", base, k->query);
    sg_curl_op *op = curl_op(e, url, "{\"charge\":1}", k->version, k->attempts, &items);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    assert_int_equal(sg_curl_multi_run(m), 0);
    see(v, sg_curl_op_policy(op),
        sg_curl_op_report(op, v->report, sizeof(v->report), NULL));
    sg_curl_op_free(op);
    sg_curl_multi_free(m);
    curl_easy_cleanup(e);
}

/* The query of an unsafe POST that the server refuses (@how: refuse or
 * goaway) and its tag in @tag: with more than one attempt only the first
 * request is refused (fail_first=1), so the retry is served. */
enum { QUERY_MAX = 128, TAG_MAX = 32 };

static void refused_query(char *q, char *tag, const char *who, const char *how, bool warm,
                          uint32_t attempts) {
    snprintf(tag, TAG_MAX, "_t=%s%s%d%u.", who, how, warm, attempts);
    snprintf(q, QUERY_MAX, "n=2&%s=1&%s%s", how, attempts > 1 ? "fail_first=1&" : "",
             tag);
    reset_log(); /* a fresh count for fail_first */
}

/* What that POST ended with, on either transport: with more than one
 * attempt, ok after two - the first never processed and retried; with one,
 * that attempt, never sent.  Either way every request that reached the
 * server is an attempt in the report (none was sent by libcurl alone). */
static void assert_refused_run(const seen *v, const char *tag, uint32_t attempts) {
    uint32_t want = attempts > 1 ? 2 : 1;
    sg_outcome end = attempts > 1 ? SG_OUTCOME_OK : SG_OUTCOME_TRANSPORT_ERROR;
    if (v->outcome != end || v->attempts != want) {
        fail_msg("%s: %s after %u attempts: %s", tag, sg_outcome_name(v->outcome),
                 v->attempts, v->report);
    }
    assert_never_processed(&v->first);
    assert_int_equal(v->first.decision, attempts > 1 ? SG_OP_RETRY : SG_OP_STOP);
    if (attempts == 1) {
        assert_int_equal(v->first.reason, SG_OP_REASON_ATTEMPTS_EXHAUSTED);
        assert_non_null(strstr(v->report, "\"sent\":false"));
        assert_null(strstr(v->report, "\"outcome_unknown\":true"));
    }
    assert_int_equal(received(tag), (int)want);
}

static void curl_refused(const char *how, bool warm, uint32_t attempts) {
    char q[QUERY_MAX], tag[TAG_MAX];
    refused_query(q, tag, "c", how, warm, attempts);
    curl_case k = {.query = q,
                   .version = CURL_HTTP_VERSION_2TLS,
                   .attempts = attempts,
                   .warm = warm,
                   .relay = -1};
    seen v;
    curl_post(&k, &v);
    assert_refused_run(&v, tag, attempts);
}

/* On a fresh connection and on a pooled one (a GET before it), with
 * attempts to retry and with one. */
static void curl_refused_stream_is_never_sent_and_retried(void **state) {
    (void)state;
    for (int i = 0; i < 4; i++) {
        curl_refused("refuse", i & 1, i & 2 ? 1 : 3);
    }
}

static void curl_stream_above_goaway_last_id_is_never_sent_and_retried(void **state) {
    (void)state;
    for (int i = 0; i < 4; i++) {
        curl_refused("goaway", i & 1, i & 2 ? 1 : 3);
    }
}

/* A GOAWAY that keeps a running stream (the last stream id is its) and
 * sends ours away: libcurl reads our stream's close as a refused stream
 * while the connection still works, and resends it - another path through
 * libcurl than a GOAWAY that leaves the connection idle (CURLE_HTTP2). */
static void curl_goaway_beside_a_running_stream_is_never_sent(void **state) {
    (void)state;
    reset_log();
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    CURL *long_e = curl_easy_init();
    CURL *e = curl_easy_init();
    char url[512];
    snprintf(url, sizeof(url), "%s/v1/chat/completions?n=20&gap=25&_t=long.",
             g_srv.tls_base);
    int long_items = 0;
    sg_curl_op *lop = curl_op(long_e, url, NULL, CURL_HTTP_VERSION_2TLS, 1, &long_items);
    assert_int_equal(sg_curl_multi_add(m, lop), 0);
    /* its connection is up and speaks h2 once an item came: the POST goes
     * on it, beside the running stream */
    for (int i = 0; i < 500 && long_items == 0; i++) {
        assert_true(sg_curl_multi_step(m, SG_MS(10)) >= 0);
    }
    assert_true(long_items > 0);
    snprintf(url, sizeof(url), "%s/v1/chat/completions?n=2&goaway=1&fail_first=1&_t=gb.",
             g_srv.tls_base);
    int items = 0;
    sg_curl_op *op = curl_op(e, url, "{\"charge\":1}", CURL_HTTP_VERSION_2TLS, 3, &items);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    assert_int_equal(sg_curl_multi_run(m), 0);
    seen v;
    see(&v, sg_curl_op_policy(op),
        sg_curl_op_report(op, v.report, sizeof(v.report), NULL));
    if (v.outcome != SG_OUTCOME_OK || v.attempts != 2) {
        fail_msg("%s after %u attempts: %s", sg_outcome_name(v.outcome), v.attempts,
                 v.report);
    }
    assert_never_processed(&v.first);
    assert_int_equal(received("_t=gb."), 2);
    /* it went beside the running stream, on its connection */
    long sid_long = -1, sid = -1;
    long conn = conn_of("_t=long.", &sid_long);
    assert_true(conn > 0);
    assert_int_equal(conn_of("_t=gb.", &sid), conn);
    assert_true(sid > sid_long);
    /* the running stream went on to its end on the old connection */
    assert_int_equal(sg_curl_op_outcome(lop), SG_OUTCOME_OK);
    assert_int_equal(long_items, 20);
    sg_curl_op_free(op);
    sg_curl_op_free(lop);
    sg_curl_multi_free(m);
    curl_easy_cleanup(e);
    curl_easy_cleanup(long_e);
}

/* HTTP/1.1 over TLS: a server that closes a pooled connection without
 * answering may have processed the request.  libcurl would send it again
 * on a new connection; it goes once, outcome unknown. */
static void curl_http1_connection_closed_unanswered_stays_unknown(void **state) {
    (void)state;
    curl_case k = {.query = "refuse=1&_t=h1tls.",
                   .version = CURL_HTTP_VERSION_1_1,
                   .attempts = 3,
                   .warm = true,
                   .relay = -1};
    seen v;
    curl_post(&k, &v);
    assert_int_equal(v.attempts, 1);
    assert_true(v.first.sent);
    assert_true(v.first.outcome_unknown);
    assert_int_equal(received("_t=h1tls."), 1);
}

/* Cleartext HTTP/2 (prior knowledge): libcurl gives no sign a callback
 * can read of which protocol the connection speaks, so its resend after a
 * refused stream cannot be told from its resend on a dead HTTP/1.1
 * connection: it stays outcome unknown (docs/design.md, retry rule 1). */
static void curl_cleartext_h2_refused_stream_stays_unknown(void **state) {
    (void)state;
    curl_case k = {.base = g_srv.base,
                   .query = "refuse=1&_t=h2c.",
                   .version = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE,
                   .attempts = 3,
                   .relay = -1};
    seen v;
    curl_post(&k, &v);
    assert_int_equal(v.attempts, 1);
    assert_true(v.first.outcome_unknown);
    assert_int_equal(received("_t=h2c."), 1);
}

/* ---- a TCP relay that resets a pooled connection as a request goes --- */

typedef struct relay {
    pid_t pid;
    int port;
    int ctl; /* the test's end of the control socket */
} relay;

/* Copies what is readable on @from to @to; false when @from ended. */
static bool pump(int from, int to) {
    char buf[16384];
    ssize_t n = read(from, buf, sizeof(buf));
    if (n <= 0) {
        return false;
    }
    return write(to, buf, (size_t)n) == n;
}

static int dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* The relay's loop (a child process): every connection is relayed to the
 * server; once armed, the next bytes a client sends are not relayed -
 * that client's connection is reset instead (SO_LINGER 0: an RST), as a
 * peer that died under a pooled connection. */
static void relay_loop(int lfd, int ctl, int server_port) {
    enum { MAXC = 8 };
    int cli[MAXC], up[MAXC], n = 0;
    int armed = 0; /* 1: told to arm, waiting for quiet; 2: armed */
    for (;;) {
        struct pollfd p[2 + 2 * MAXC];
        p[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = ctl, .events = POLLIN};
        for (int i = 0; i < n; i++) {
            p[2 + 2 * i] = (struct pollfd){.fd = cli[i], .events = POLLIN};
            p[3 + 2 * i] = (struct pollfd){.fd = up[i], .events = POLLIN};
        }
        /* armed: a quiet 50 ms first, so nothing sent before the arming
         * (a window update after the last answer) is taken for the
         * request */
        int polled = n;
        int rc = poll(p, (nfds_t)(2 + 2 * polled), armed == 1 ? 50 : -1);
        if (rc == 0 && armed == 1) {
            char b = 'r';
            if (write(ctl, &b, 1) != 1) {
                _exit(1);
            }
            armed = 2;
            continue;
        }
        if (p[1].revents) {
            char b;
            if (read(ctl, &b, 1) != 1) {
                _exit(0); /* the test is done */
            }
            armed = 1;
            continue;
        }
        if ((p[0].revents & POLLIN) && n < MAXC) {
            cli[n] = accept(lfd, NULL, NULL);
            up[n] = cli[n] >= 0 ? dial(server_port) : -1;
            if (up[n] >= 0) {
                n++;
            } else if (cli[n] >= 0) {
                close(cli[n]);
            }
        }
        for (int i = 0; i < polled; i++) {
            bool ok = true;
            if (p[2 + 2 * i].revents && armed == 2) {
                struct linger l = {.l_onoff = 1, .l_linger = 0};
                setsockopt(cli[i], SOL_SOCKET, SO_LINGER, &l, sizeof(l));
                armed = 0;
                ok = false;
            } else if (p[2 + 2 * i].revents) {
                ok = pump(cli[i], up[i]);
            }
            if (ok && p[3 + 2 * i].revents) {
                ok = pump(up[i], cli[i]);
            }
            if (!ok) {
                close(cli[i]);
                close(up[i]);
                cli[i] = cli[n - 1];
                up[i] = up[n - 1];
                n--;
                break; /* the poll set changed */
            }
        }
    }
}

static void relay_start(relay *r, int server_port) {
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(lfd, 8), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    r->port = ntohs(a.sin_port);
    r->pid = fork();
    assert_true(r->pid >= 0);
    if (r->pid == 0) {
        close(sv[0]);
        relay_loop(lfd, sv[1], server_port);
        _exit(0);
    }
    close(lfd);
    close(sv[1]);
    r->ctl = sv[0];
}

static void relay_stop(relay *r) {
    close(r->ctl); /* the relay exits when its control socket ends */
    waitpid(r->pid, NULL, 0);
}

/* HTTP/2 over TLS, a pooled connection reset by the peer as the POST goes
 * on it: libcurl would resend it on a new connection (its retry of a dead
 * reused connection), and this is no refused stream - libcurl said why
 * ("Recv failure: Connection reset by peer").  Not sent again: outcome
 * unknown, and the server never saw it (the relay dropped it), so a
 * resend would show as one request received. */
static void curl_h2_pooled_connection_reset_stays_unknown(void **state) {
    (void)state;
    relay r;
    relay_start(&r, g_srv.port);
    char base[64];
    snprintf(base, sizeof(base), "https://localhost:%d", r.port);
    curl_case k = {.base = base,
                   .query = "n=1&_t=h2reset.",
                   .version = CURL_HTTP_VERSION_2TLS,
                   .attempts = 3,
                   .warm = true,
                   .relay = r.ctl};
    seen v;
    curl_post(&k, &v);
    relay_stop(&r);
    if (v.attempts != 1 || !v.first.outcome_unknown || !v.first.sent) {
        fail_msg("%u attempts: %s", v.attempts, v.report);
    }
    assert_int_equal(received("_t=h2reset."), 0);
}

/* ------------------------------------------------ streamguard's HTTP/2 */

static int h2_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    (*(int *)ud)++;
    return 0;
}

static const sg_test_h2_cbs g_h2cbs = {.on_item = h2_item};

/* One unsafe POST on @c (TLS h2); with @warm a GET before it on the same
 * connection, so a GOAWAY's last stream id is that GET's. */
static void h2_post(sg_h2_conn *c, const char *query, uint32_t attempts, bool warm,
                    seen *v) {
    sg_stream_config sse = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    int items = 0;
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_backoff(po, SG_MS(5), SG_MS(20));
    sg_test_h2_req req;
    memset(&req, 0, sizeof(req));
    if (warm) {
        sg_op_options_set_method(po, "GET");
        sg_op_options_set_max_attempts(po, 1);
        req.path = "/v1/chat/completions?n=1&_t=h2warm.";
        sg_h2_op *w;
        assert_int_equal(sg_test_h2_start(c, &req, &sse, po, &g_h2cbs, &items, &w), 0);
        assert_int_equal(sg_h2_conn_run(c), 0);
        assert_int_equal(sg_h2_op_outcome(w), SG_OUTCOME_OK);
        sg_h2_op_free(w);
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/chat/completions?%s", query);
    sg_op_options_set_method(po, "POST"); /* no key: unsafe */
    sg_op_options_set_max_attempts(po, attempts);
    req.path = path;
    req.body = "{\"charge\":1}";
    req.body_len = strlen(req.body);
    sg_h2_op *op;
    assert_int_equal(sg_test_h2_start(c, &req, &sse, po, &g_h2cbs, &items, &op), 0);
    assert_int_equal(sg_h2_conn_run(c), 0);
    see(v, sg_h2_op_policy(op), sg_h2_op_report(op, v->report, sizeof(v->report), NULL));
    sg_h2_op_free(op);
}

/* As curl_refused, on streamguard's HTTP/2 transport: one connection for
 * both runs (after a GOAWAY the transport opens a new one). */
static void h2_refused(const char *how, bool warm) {
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn *c = NULL;
    assert_int_equal(h2t_connect(&g_srv, true, &c, err), 0);
    for (int i = 0; i < 2; i++) {
        uint32_t attempts = i == 0 ? 3 : 1;
        char q[QUERY_MAX], tag[TAG_MAX];
        refused_query(q, tag, "h", how, warm, attempts);
        seen v;
        h2_post(c, q, attempts, warm, &v);
        assert_refused_run(&v, tag, attempts);
    }
    sg_h2_conn_free(c);
}

static void h2_refused_stream_is_never_sent_and_retried(void **state) {
    (void)state;
    h2_refused("refuse", false);
    h2_refused("refuse", true);
}

static void h2_stream_above_goaway_last_id_is_never_sent_and_retried(void **state) {
    (void)state;
    h2_refused("goaway", false);
    h2_refused("goaway", true);
}

static int setup(void **state) {
    (void)state;
    return fm_start(&g_srv, g_fm_path);
}

static int teardown(void **state) {
    (void)state;
    fm_stop(&g_srv);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel\n", argv[0]);
        return 2;
    }
    g_fm_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curl_refused_stream_is_never_sent_and_retried),
        cmocka_unit_test(curl_stream_above_goaway_last_id_is_never_sent_and_retried),
        cmocka_unit_test(curl_goaway_beside_a_running_stream_is_never_sent),
        cmocka_unit_test(curl_http1_connection_closed_unanswered_stays_unknown),
        cmocka_unit_test(curl_cleartext_h2_refused_stream_stays_unknown),
        cmocka_unit_test(curl_h2_pooled_connection_reset_stays_unknown),
        cmocka_unit_test(h2_refused_stream_is_never_sent_and_retried),
        cmocka_unit_test(h2_stream_above_goaway_last_id_is_never_sent_and_retried),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
