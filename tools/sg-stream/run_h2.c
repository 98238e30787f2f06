/*
 * run_h2.c - the operation on streamguard's own HTTP/2 transport.
 *
 * With --http2, or for an https:// URL without a version flag, the operation
 * runs as one stream of streamguard's HTTP/2 connection (nghttp2): h2c with
 * prior knowledge for http://, TLS with ALPN h2 for https://.  An expired
 * clock resets only that stream.  The URL is split here and the -H headers
 * are lowercased for HTTP/2.  With --http2 the connection is made by the
 * first attempt, inside its lease; the probe of an https:// URL connects
 * first (in the loop, so a signal is heard), within what the budget could
 * lease (probe_bound()).  The loop is
 * ours: items leave in one write per step, and a signal or a broken stdout
 * cancels the operation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_stream.h"

#define MAX_HEADERS 64

static int h2_on_item(sg_h2_op *op, const sg_item *item, void *user_data) {
    (void)op;
    return print_item(user_data, item);
}

static void h2_on_discard(sg_h2_op *op, uint32_t attempt, sg_outcome outcome,
                          void *user_data) {
    (void)op;
    note_discard(user_data, attempt, outcome);
}

/* Splits an http(s) URL into host, port and path (with its query). */
static int split_url(const char *url, bool *tls, char *host, size_t host_len, int *port,
                     const char **path) {
    const char *p;
    if (strncmp(url, "https://", 8) == 0) {
        *tls = true;
        p = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        *tls = false;
        p = url + 7;
    } else {
        return -1;
    }
    const char *end = p + strcspn(p, "/?#");
    const char *colon = NULL;
    const char *h = p;
    const char *he;
    if (*p == '[') { /* [v6 address] */
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (close == NULL) {
            return -1;
        }
        h = p + 1;
        he = close;
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        he = colon != NULL ? colon : end;
    }
    if (he == h || (size_t)(he - h) >= host_len) {
        return -1;
    }
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = '\0';
    *port = *tls ? 443 : 80;
    if (colon != NULL) {
        char *pe;
        long v = strtol(colon + 1, &pe, 10);
        if (pe != end || v < 1 || v > 65535) {
            return -1;
        }
        *port = (int)v;
    }
    *path = *end == '\0' ? "/" : end;
    return (*path)[0] == '/' || (*path)[0] == '?' ? 0 : -1;
}

/* Request headers: "Name: value" -> lowercase name, trimmed value.  The
 * names are copied into @names; the values point into c->headers. */
static int h2_headers(const struct config *c, sg_h2_header hdrs[MAX_HEADERS],
                      char names[MAX_HEADERS][128], size_t *count) {
    size_t nh = 0;
    for (const struct curl_slist *h = c->headers; h != NULL; h = h->next) {
        const char *colon = strchr(h->data, ':');
        size_t nlen = (size_t)(colon - h->data);
        if (nh == MAX_HEADERS || nlen == 0 || nlen >= sizeof(names[0])) {
            return usage_error("header '%s' not usable over HTTP/2", h->data);
        }
        for (size_t k = 0; k < nlen; k++) {
            char ch = h->data[k];
            names[nh][k] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        }
        names[nh][nlen] = '\0';
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t') {
            v++;
        }
        hdrs[nh].name = names[nh];
        hdrs[nh].value = v;
        nh++;
    }
    *count = nh;
    return 0;
}

/* The probe of an https:// URL connects before the operation starts: it
 * may spend only what the budget could lease (its end less the floor), and
 * at most the connect timeout (10 s when not given).  0: nothing can be
 * leased - no probe, no dialling. */
static int64_t probe_bound(const struct config *c) {
    int64_t connect = c->connect_ns ? c->connect_ns : SG_SEC(10);
    int64_t leasable = c->deadline - sg_clock_now(NULL) - c->floor_ns;
    if (leasable <= 0) {
        return 0;
    }
    return connect < leasable ? connect : leasable;
}

/* The probe, in the run's own loop (a signal is heard at once): 0 when the
 * connection speaks h2, -1 when it failed (libcurl takes over).  A signal
 * during the probe commits the run to HTTP/2: the operation then starts
 * and is cancelled at once, in phase connect, never sent. */
static int probe_h2(struct config *c, sg_h2_conn *conn) {
    if (sg_h2_conn_connect(conn) != 0) {
        return -1;
    }
    bool readable = false;
    for (;;) {
        sg_h2_conn_step(conn, sg_clock_now(NULL), readable, true);
        if (!sg_h2_conn_connecting(conn)) {
            return sg_h2_conn_usable(conn) ? 0 : -1;
        }
        if (signals_first() != 0) {
            return 0;
        }
        readable = run_wait(&c->run, sg_h2_conn_fd(conn), sg_h2_conn_next_deadline(conn));
    }
}

/* Runs the operation on streamguard's HTTP/2 transport.  With @probe (an
 * https:// URL and no version flag), a server that does not negotiate h2,
 * or any connect failure, returns -1 without a word: libcurl takes over. */
int run_h2(struct config *c, bool probe) {
    char host[256];
    char errbuf[SG_H2_ERROR_SIZE] = "";
    bool tls = false;
    int port = 0;
    const char *path = NULL;
    if (split_url(c->url, &tls, host, sizeof(host), &port, &path) != 0) {
        return usage_error("--http2 needs an http:// or https:// URL, not '%s'", c->url);
    }
    sg_h2_header hdrs[MAX_HEADERS];
    char names[MAX_HEADERS][128];
    size_t nh = 0;
    int code = h2_headers(c, hdrs, names, &nh);
    if (code != 0) {
        return code;
    }
    sg_h2_request req = {.method = c->method,
                         .path = path,
                         .headers = hdrs,
                         .nheaders = nh,
                         .body = c->body,
                         .body_len = c->body_len,
                         .deadline_header = c->copts.deadline_header,
                         .grpc_timeout = c->copts.grpc_timeout,
                         .framing = c->copts.framing};
    sg_h2_callbacks cbs = {.on_item = h2_on_item, .on_discard = h2_on_discard};
    /* With --http2 the connection is part of each attempt (leased from the
     * budget, reported, retried when safe); the probe must connect first to
     * learn whether the server speaks h2 at all. */
    int64_t bound = probe ? probe_bound(c) : (c->connect_ns ? c->connect_ns : SG_SEC(10));
    if (probe && bound == 0) {
        return -1; /* libcurl refuses it without dialling */
    }
    sg_h2_conn_options co = {.host = host,
                             .port = port,
                             .tls = tls,
                             .cafile = c->copts.cafile,
                             .connect_timeout = bound,
                             .errbuf = errbuf,
                             .connect_on_demand = true};
    int64_t t0 = sg_clock_now(NULL);
    sg_h2_conn *conn = NULL;
    int rv = sg_h2_conn_new(&conn, &co);
    if (rv == 0 && probe) {
        rv = probe_h2(c, conn);
    }
    if (rv != 0 && probe) {
        /* no h2 here: libcurl runs with what is left, and a run that fails
         * says where the time went */
        c->probe_ns = sg_clock_now(NULL) - t0;
        const char *why = conn != NULL ? sg_h2_conn_error(conn) : NULL;
        if (why == NULL || why[0] == '\0') {
            why = errbuf[0] != '\0' ? errbuf : "the server did not negotiate h2";
        }
        snprintf(c->probe_error, sizeof(c->probe_error), "%s", why);
        sg_h2_conn_free(conn);
        return -1;
    }
    if (rv != 0) {
        return run_failed(c, rv, errbuf);
    }
    sg_h2_op *op = NULL;
    code = ledger_open_for_run(c);
    if (code != 0) {
        goto out;
    }
    rv = sg_h2_stream_start(conn, &req, &c->policy, &cbs, &c->run, &op);
    for (bool readable = false; rv == 0;) {
        int running = sg_h2_conn_step(conn, sg_clock_now(NULL), readable, true);
        out_flush(&c->run.out);
        if (running <= 0) {
            break;
        }
        if (run_interrupted(&c->run)) {
            sg_h2_op_cancel(op); /* RST_STREAM(CANCEL) at the next step */
            readable = false;
            continue;
        }
        readable = run_wait(&c->run, sg_h2_conn_fd(conn), sg_h2_conn_next_deadline(conn));
    }
    if (rv == 0 && op != NULL) {
        output_end(c);
        size_t said_len = 0;
        const char *said = sg_h2_op_error_body(op, &said_len);
        code = conclude(c, sg_h2_op_policy(op), sg_h2_op_error(op), said, said_len);
    } else {
        code = run_failed(c, rv, NULL);
    }
out:
    sg_h2_op_free(op);
    sg_h2_conn_free(conn);
    ledger_close_for_run(c);
    return code;
}
