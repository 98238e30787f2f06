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
#include <strings.h>

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

/* An http(s) URL as libcurl parses it (the one parser check_url used):
 * host (no brackets), port (the scheme's by default) and path with its
 * query, which the caller frees; the fragment is never sent.  *@creds when
 * it has user information, which this transport does not send.  0, or -1
 * when it is not a URL this transport can dial. */
static int split_url(const char *url, bool *tls, char *host, size_t host_len, int *port,
                     char **path, bool *creds) {
    CURLU *u = curl_url();
    char *scheme = NULL, *h = NULL, *pt = NULL, *pa = NULL, *q = NULL, *user = NULL;
    int rv = -1;
    if (u != NULL && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &pt, CURLU_DEFAULT_PORT) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PATH, &pa, 0) == CURLUE_OK) {
        (void)curl_url_get(u, CURLUPART_QUERY, &q, 0); /* none: q stays NULL */
        *creds = curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK;
        *tls = strcasecmp(scheme, "https") == 0;
        size_t hl = strlen(h);
        const char *hp = h;
        if (hl >= 2 && h[0] == '[') { /* [v6 address] */
            hp++;
            hl -= 2;
        }
        char *pe;
        long v = strtol(pt, &pe, 10);
        size_t plen = strlen(pa) + (q != NULL ? 1 + strlen(q) : 0) + 1;
        *path = (*tls || strcasecmp(scheme, "http") == 0) && hl > 0 && hl < host_len &&
                        *pe == '\0' && v >= 1 && v <= 65535
                    ? malloc(plen)
                    : NULL;
        if (*path != NULL) {
            memcpy(host, hp, hl);
            host[hl] = '\0';
            *port = (int)v;
            snprintf(*path, plen, "%s%s%s", pa, q != NULL ? "?" : "", q != NULL ? q : "");
            rv = 0;
        }
    }
    curl_free(scheme);
    curl_free(h);
    curl_free(pt);
    curl_free(pa);
    curl_free(q);
    curl_free(user);
    curl_url_cleanup(u);
    return rv;
}

/* Request headers: "Name: value" -> lowercase name, trimmed value.  The
 * names are copied into @names; the values point into c->headers. */
typedef struct h2_field {
    const char *name;
    const char *value;
} h2_field;

static int h2_headers(const struct config *c, h2_field hdrs[MAX_HEADERS],
                      char names[MAX_HEADERS][128], size_t *count) {
    size_t nh = 0;
    for (const struct curl_slist *h = c->headers; h != NULL; h = h->next) {
        char *colon = strchr(h->data, ':');
        size_t nlen = (size_t)(colon - h->data);
        if (nh == MAX_HEADERS) {
            return usage_error("--http2 takes %d headers at most", MAX_HEADERS);
        }
        if (nlen == 0 || nlen >= sizeof(names[0])) {
            return usage_error("header '%.*s' not usable over HTTP/2 (a name of 1 to %zu "
                               "bytes)",
                               (int)header_name_len(h->data), h->data,
                               sizeof(names[0]) - 1);
        }
        for (size_t k = 0; k < nlen; k++) {
            char ch = h->data[k];
            names[nh][k] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        }
        names[nh][nlen] = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t') {
            v++;
        }
        size_t vl = strlen(v);
        while (vl > 0 && (v[vl - 1] == ' ' || v[vl - 1] == '\t')) {
            v[--vl] = '\0'; /* HTTP/2 takes no whitespace at a value's end */
        }
        if (sgx_h2_connection_specific(names[nh], v)) {
            continue; /* HTTP/1.1's own: left out, as curl does over h2 */
        }
        hdrs[nh].name = names[nh];
        hdrs[nh].value = v;
        nh++;
    }
    *count = nh;
    return 0;
}

/* The probe's own connect clock: --connect-timeout, 10 s when not given. */
static int64_t probe_connect(const struct config *c) {
    return c->connect_ns ? c->connect_ns : SG_SEC(10);
}

/* The probe of an https:// URL connects before the operation starts: it
 * may spend only what the budget could lease (its end less the floor), and
 * at most the connect timeout (10 s when not given).  0: nothing can be
 * leased - no probe, no dialling. */
static int64_t probe_bound(const struct config *c) {
    int64_t connect = probe_connect(c);
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

/* The request: the run's method, path, headers, body, stamps and framing.
 * 0, or the code of the setter that refused it (a header HTTP/2 cannot
 * carry: SG_EINVAL). */
static int h2_request(const struct config *c, const char *path, const h2_field *hdrs,
                      size_t nh, sg_h2_request **out) {
    sg_h2_request *r = NULL;
    int rv = sg_h2_request_new(&r);
    if (rv == 0) {
        /* --output none prints nothing: no call per item */
        (void)sg_h2_request_set_on_item(r, c->run.output == OUT_NONE ? NULL : h2_on_item);
        (void)sg_h2_request_set_on_discard(r, h2_on_discard);
        (void)sg_h2_request_set_deadline_header(r, c->deadline_header);
        (void)sg_h2_request_set_grpc_timeout(r, c->grpc_timeout);
        rv = sg_h2_request_set_method(r, c->method);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_path(r, path);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_body(r, c->body, c->body_len);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_framing(r, &c->framing);
    }
    for (size_t i = 0; rv == 0 && i < nh; i++) {
        rv = sg_h2_request_add_header(r, hdrs[i].name, hdrs[i].value);
    }
    if (rv != 0) {
        sg_h2_request_free(r);
        r = NULL;
    }
    *out = r;
    return rv;
}

/* The connection, made on demand (the probe or the first attempt makes
 * it), bounded by @bound; its error in @errbuf. */
static int h2_connect(const struct config *c, const char *host, int port, bool tls,
                      int64_t bound, char *errbuf, sg_h2_conn **out) {
    sg_h2_conn_options *o = NULL;
    int rv = sg_h2_conn_options_new(&o);
    if (rv == 0) {
        (void)sg_h2_conn_options_set_tls(o, tls);
        (void)sg_h2_conn_options_set_errbuf(o, errbuf);
        (void)sg_h2_conn_options_set_connect_on_demand(o, true);
        rv = sg_h2_conn_options_set_host(o, host);
    }
    if (rv == 0) {
        rv = sg_h2_conn_options_set_port(o, port);
    }
    if (rv == 0) {
        rv = sg_h2_conn_options_set_cafile(o, c->cafile);
    }
    if (rv == 0) {
        rv = sg_h2_conn_options_set_connect_timeout(o, bound);
    }
    if (rv == 0) {
        rv = sg_h2_conn_new(out, o);
    }
    if (rv == 0) {
        /* one operation: no endpoint health to share (as run_curl.c) */
        rv = sg_h2_conn_set_health(*out, NULL);
    }
    sg_h2_conn_options_free(o);
    return rv;
}

/* Runs the operation on streamguard's HTTP/2 transport.  With @probe (an
 * https:// URL and no version flag), a server that does not negotiate h2,
 * or any connect failure, returns -1 without a word: libcurl takes over. */
int run_h2(struct config *c, bool probe) {
    char host[256];
    char errbuf[SG_H2_ERROR_SIZE] = "";
    bool tls = false;
    bool creds = false;
    int port = 0;
    char *path = NULL;
    if (split_url(c->url, &tls, host, sizeof(host), &port, &path, &creds) != 0) {
        /* check_url passed it: a host this transport cannot take */
        return probe ? -1
                     : usage_error("--http2 cannot dial this URL's host (%zu bytes "
                                   "at most)",
                                   sizeof(host) - 1);
    }
    if (creds) {
        free(path);
        /* libcurl sends them (no probe); this transport does not */
        return probe ? -1
                     : usage_error("--http2 does not send the URL's credentials: give "
                                   "them as -H 'Authorization: ...'%s",
                                   "");
    }
    h2_field hdrs[MAX_HEADERS];
    char names[MAX_HEADERS][128];
    size_t nh = 0;
    int code = h2_headers(c, hdrs, names, &nh);
    if (code != 0) {
        free(path);
        return code;
    }
    /* With --http2 the connection is part of each attempt (leased from the
     * budget, reported, retried when safe); the probe must connect first to
     * learn whether the server speaks h2 at all. */
    int64_t bound =
        probe ? probe_bound(c) : (c->connect_ns ? c->connect_ns : SG_DURATION_MAX);
    if (probe && bound == 0) {
        free(path);
        return -1; /* libcurl refuses it without dialling */
    }
    int64_t t0 = sg_clock_now(NULL);
    sg_h2_conn *conn = NULL;
    int rv = h2_connect(c, host, port, tls, bound, errbuf, &conn);
    if (rv == 0 && probe) {
        rv = probe_h2(c, conn);
    }
    if (rv != 0 && probe) {
        /* no h2 here: libcurl runs with what is left, and a run that fails
         * says where the time went */
        int64_t ended = sg_clock_now(NULL);
        c->probe_ns = ended - t0;
        const char *why = conn != NULL ? sg_h2_conn_error(conn) : NULL;
        if (why == NULL || why[0] == '\0') {
            why = errbuf[0] != '\0' ? errbuf : "the server did not negotiate h2";
        }
        snprintf(c->probe_error, sizeof(c->probe_error), "%s", why);
        /* A connection that could not be made (not one made to a server
         * that speaks no h2) is an attempt the report must show: the
         * operation's first, in phase connect, never sent - its time
         * and its error there, not on stderr alone. */
        int fail = sg_h2_conn_failure(conn);
        if (fail != 0 && fail != SG_EH2) {
            (void)sg_op_options_set_probe(c->policy, ended, probe_connect(c),
                                          fail == SG_ETIMEDOUT, c->probe_error);
        }
        sg_h2_conn_free(conn);
        free(path);
        return -1;
    }
    if (rv != 0) {
        free(path);
        return run_failed(c, rv, errbuf);
    }
    sg_h2_op *op = NULL;
    code = ledger_open_for_run(c);
    if (code != 0) {
        goto out;
    }
    sg_h2_request *req = NULL;
    rv = h2_request(c, path, hdrs, nh, &req);
    if (rv == 0) {
        rv = sg_h2_op_new(&op, conn, c->policy, req, &c->run);
    }
    sg_h2_request_free(req); /* the operation has its own copy */
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
        ledger_settle(c); /* before the report, which says if its end was recorded */
        size_t said_len = 0;
        const char *said = sg_h2_op_error_body(op, &said_len);
        code = conclude(c, sg_h2_op_policy(op), sg_h2_op_error(op), said, said_len);
    } else {
        code = run_failed(c, rv, NULL);
    }
out:
    sg_h2_op_free(op);
    sg_h2_conn_free(conn);
    free(path);
    ledger_close_for_run(c);
    return code;
}
