/*
 * conn.c - one client connection: its request, its operation upstream,
 * its answer.
 *
 * READ: the head must be whole within the header timeout (else 408), at
 * most 32 KiB and 64 headers (else 431); the body, by Content-Length or
 * chunked, at most max_body (else 413).  UPSTREAM: the request is one
 * guarded operation on the proxy's multi; each attempt's body bytes wait
 * in a buffer of their own (on_bytes) until one of its items comes.  The
 * first item (the first token: a profile holds metadata until it) commits
 * the answer: status and headers, then that attempt's bytes; the others'
 * are dropped, and hedges lose.  STREAMING: the committed attempt's bytes
 * go to the client as they arrive.  The end: ok closes the connection;
 * anything else appends the provider's in-band error first.  A failure
 * before the commit is an HTTP error in the provider's format.
 *
 * A client slower than the stream: once client_buffer bytes wait for it,
 * the upstream read is paused (SG_CURL_BYTES_PAUSE: TCP then pushes back
 * on the upstream) and resumed when the client has read half of them, so
 * memory never grows with a slow reader.  The stream's clocks run on
 * while it waits: a client slower than the idle clock ends the stream as
 * idle_timeout.  Before the commit, what an attempt holds is bounded by
 * client_buffer too (past it the operation is cancelled).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"

enum {
    C_HEAD,      /* reading the request head */
    C_BODY,      /* reading the request body */
    C_UPSTREAM,  /* the operation runs; nothing answered yet */
    C_STREAMING, /* committed: the stream goes through */
    C_CLOSING,   /* the answer is whole: flush, then close */
};

/* One attempt's bytes before the commit. */
struct pending {
    uint32_t attempt; /* 0: free */
    char *p;
    size_t n, cap;
    const char *chunk; /* the read being processed (valid during it) */
    size_t chunk_len;
    size_t chunk_at; /* where it starts in p */
};

struct conn {
    struct conn *next;
    struct proxy *proxy;
    const struct route *route; /* the request's, once routed */
    struct routes *set;        /* the set it belongs to (counted) */
    int fd;
    int state;
    uint64_t id;
    char peer[64];
    int64_t header_deadline;
    /* the request */
    char *in;
    size_t in_len, in_cap, scanned, head_len;
    sg_fm_h1_request req;
    int64_t arrived; /* the head was whole */
    char *body;
    size_t body_len;
    sg_fm_h1_chunked chunked;
    /* the operation */
    CURL *easy;
    sg_curl_op *op;
    struct curl_slist *headers;
    char *url;
    char *fallback_urls[MAX_FALLBACKS];
    sg_curl_endpoint eps[MAX_FALLBACKS + 1];
    struct pending pend[1 + SG_OP_MAX_HEDGES];
    bool committed;
    uint32_t committed_attempt;
    int64_t committed_at;
    /* SSE and NDJSON: the committed attempt's bytes not yet given to the
     * client.  They go out event by event (line by line) as the library
     * delivers the item each one carries, so that the client gets exactly
     * the items the clocks and caps accepted, and a stream cut inside an
     * event ends on a whole one before the in-band error. */
    char *part;
    size_t part_len, part_cap;
    const char *chunk; /* the read being processed, and where it starts */
    size_t chunk_len;
    ptrdiff_t chunk_at;
    bool token_seen; /* held metadata comes with the first token */
    bool client_gone;
    bool too_slow;
    bool paused; /* the upstream read waits for the client (on_bytes) */
    /* the answer */
    char *out;
    size_t out_len, out_off, out_cap;
    bool want_out; /* EPOLLOUT armed */
};

/* ------------------------------------------------------------ plumbing */

static int64_t now_ns(void) {
    return sg_clock_now(NULL);
}

static void watch(struct conn *c, bool out) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN | EPOLLRDHUP | (out ? EPOLLOUT : 0);
    ev.data.ptr = c;
    epoll_ctl(c->proxy->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = out;
}

static bool grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) {
        return true;
    }
    size_t n = *cap ? *cap : 4096;
    while (n < need) {
        n *= 2;
    }
    char *p = realloc(*buf, n);
    if (p == NULL) {
        return false;
    }
    *buf = p;
    *cap = n;
    return true;
}

/* Writes what waits for the client (never blocks). */
static void flush_out(struct conn *c) {
    while (c->out_off < c->out_len && !c->client_gone) {
        ssize_t w =
            send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
        if (w > 0) {
            c->out_off += (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
        } else {
            c->client_gone = true; /* reset, or closed: nobody reads */
        }
    }
    if (c->out_off == c->out_len) {
        c->out_off = c->out_len = 0;
    }
    bool out = c->out_len > 0 && !c->client_gone;
    if (out != c->want_out) {
        watch(c, out);
    }
}

/* Appends @n bytes for the client.  false when the client has fallen more
 * than client_buffer behind (or memory ran out). */
static bool put(struct conn *c, const void *p, size_t n) {
    if (c->client_gone) {
        return true; /* dropped: the operation is being cancelled */
    }
    /* the streaming bound is twice the buffer: a read is paused once the
     * client is a buffer behind, and the read that crossed it still fits */
    if (c->out_len - c->out_off + n > 2 * c->proxy->client_buffer &&
        c->state != C_CLOSING) {
        return false;
    }
    if (!grow(&c->out, &c->out_cap, c->out_len + n)) {
        return false;
    }
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
    return true;
}

static void put_str(struct conn *c, const char *s) {
    (void)put(c, s, strlen(s));
}

static void free_op(struct conn *c) {
    sg_curl_op_free(c->op);
    c->op = NULL;
    if (c->easy != NULL) {
        curl_easy_cleanup(c->easy);
        c->easy = NULL;
    }
    curl_slist_free_all(c->headers);
    c->headers = NULL;
}

static void conn_free(struct conn *c) {
    struct proxy *p = c->proxy;
    for (struct conn **pp = &p->conns; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    free_op(c);
    routes_unref(c->set);
    close(c->fd); /* leaves epoll by itself */
    free(c->in);
    free(c->body);
    free(c->url);
    for (int i = 0; i < MAX_FALLBACKS; i++) {
        free(c->fallback_urls[i]);
    }
    for (size_t i = 0; i < 1 + SG_OP_MAX_HEDGES; i++) {
        free(c->pend[i].p);
    }
    free(c->out);
    free(c->part);
    free(c);
    p->nconns--;
}

/* A whole answer before any operation (a bad request, a limit, a
 * timeout): status, a short JSON error, then close. */
static void reply(struct conn *c, int status, const char *reason, const char *extra,
                  const char *body) {
    char head[512];
    snprintf(head, sizeof(head),
             "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n%s\r\n",
             status, reason, strlen(body), extra != NULL ? extra : "");
    c->state = C_CLOSING;
    c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
    put_str(c, head);
    put_str(c, body);
    flush_out(c);
}

static void reply_error(struct conn *c, int status, const char *what) {
    char body[256];
    snprintf(body, sizeof(body),
             "{\"error\":{\"message\":\"sg-proxy: %s\",\"type\":\"%s\"}}", what,
             "invalid_request");
    reply(c, status, sg_fm_h1_status_text(status), NULL, body);
}

/* ------------------------------------------------------------ accepting */

void conn_accept(struct proxy *p) {
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        int fd =
            accept4(p->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return; /* EAGAIN, or a client gone before we took it */
        }
        if (p->nconns >= p->max_conns) {
            close(fd); /* over the cap: the others are served */
            continue;
        }
        struct conn *c = calloc(1, sizeof(*c));
        if (c == NULL) {
            close(fd);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->fd = fd;
        c->proxy = p;
        c->id = ++p->next_id;
        c->state = C_HEAD;
        c->header_deadline = sg_time_add(now_ns(), p->header_timeout);
        char ip[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
            port = ntohs(a->sin6_port);
        }
        snprintf(c->peer, sizeof(c->peer), "%s:%d", ip, port);
        struct epoll_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.events = EPOLLIN | EPOLLRDHUP;
        ev.data.ptr = c;
        if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            close(fd);
            free(c);
            continue;
        }
        c->next = p->conns;
        p->conns = c;
        p->nconns++;
    }
}

/* ------------------------------------------------------ the operation */

static struct pending *pending_of(struct conn *c, uint32_t attempt, bool make) {
    struct pending *free_slot = NULL;
    for (size_t i = 0; i < 1 + SG_OP_MAX_HEDGES; i++) {
        if (c->pend[i].attempt == attempt) {
            return &c->pend[i];
        }
        if (c->pend[i].attempt == 0 && free_slot == NULL) {
            free_slot = &c->pend[i];
        }
    }
    if (make && free_slot != NULL) {
        free_slot->attempt = attempt;
        free_slot->n = 0;
    }
    return make ? free_slot : NULL;
}

/* The end of the first whole event (SSE: its blank line, "\n\n" or
 * "\n\r\n") or line (NDJSON) of @b[0..@n) that ends at or after @from:
 * the index after it, or 0 when none. */
static size_t event_end(sg_format f, const char *b, size_t n, size_t from) {
    for (size_t i = from; i < n; i++) {
        if (b[i] != '\n') {
            continue;
        }
        if (f == SG_FORMAT_NDJSON) {
            return i + 1;
        }
        if (i + 1 < n && b[i + 1] == '\n') {
            return i + 2;
        }
        if (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n') {
            return i + 3;
        }
    }
    return 0;
}

static void too_slow(struct conn *c) {
    c->too_slow = !c->client_gone;
}

/* Gives the client @item's event (and what precedes it: comments,
 * keepalives, held metadata), found by where the item's data ends in the
 * read being processed - or, for an item the library assembled elsewhere
 * (an event split across reads), as the next whole event. */
static int release(struct conn *c, const sg_item *item) {
    sg_format f = c->route->framing.format;
    if (f == SG_FORMAT_EVENTSTREAM) {
        return 0; /* passed on as it came */
    }
    if (!c->token_seen && item->kind == SG_ITEM_META) {
        return 0; /* held metadata: it goes with the first token */
    }
    c->token_seen = true;
    size_t from = c->chunk_at > 0 ? (size_t)c->chunk_at : 0;
    const char *dend = item->data + item->data_len;
    if (c->chunk != NULL && item->data >= c->chunk && dend <= c->chunk + c->chunk_len &&
        c->chunk_at + (dend - c->chunk) >= 0) {
        from = (size_t)(c->chunk_at + (dend - c->chunk));
    }
    size_t end = event_end(f, c->part, c->part_len, from);
    if (end == 0) {
        return 0; /* not whole here (a CR-only stream): it goes at the end */
    }
    if (!put(c, c->part, end)) {
        too_slow(c);
        return 1;
    }
    memmove(c->part, c->part + end, c->part_len - end);
    c->part_len -= end;
    c->chunk_at -= (ptrdiff_t)end;
    flush_out(c);
    return 0;
}

/* The committed attempt's bytes: an event stream goes to the client now
 * (what the socket does not take waits in the buffer); SSE and NDJSON wait
 * in @part for their items. */
static int forward(struct conn *c, const char *p, size_t n) {
    if (c->route->framing.format == SG_FORMAT_EVENTSTREAM) {
        if (!put(c, p, n)) {
            too_slow(c);
            return 1;
        }
        flush_out(c);
        return 0;
    }
    if (c->part_len + n > c->proxy->client_buffer ||
        !grow(&c->part, &c->part_cap, c->part_len + n)) {
        too_slow(c);
        return 1;
    }
    c->chunk = p;
    c->chunk_len = n;
    c->chunk_at = (ptrdiff_t)c->part_len;
    memcpy(c->part + c->part_len, p, n);
    c->part_len += n;
    return 0;
}

static int on_bytes(sg_curl_op *op, uint32_t attempt, const void *data, size_t len,
                    void *ud) {
    (void)op;
    struct conn *c = ud;
    if (c->client_gone) {
        return 1; /* nobody to stream to */
    }
    if (c->committed) {
        if (attempt != c->committed_attempt) {
            return 0;
        }
        if (c->out_len - c->out_off >= c->proxy->client_buffer) {
            /* the client is a buffer behind: the upstream read waits, and
             * libcurl gives these bytes again once it has caught up */
            c->paused = true;
            return SG_CURL_BYTES_PAUSE;
        }
        return forward(c, data, len);
    }
    struct pending *pd = pending_of(c, attempt, true);
    if (pd == NULL || pd->n + len > c->proxy->client_buffer ||
        !grow(&pd->p, &pd->cap, pd->n + len)) {
        return 1; /* held bytes past the bound: not a stream worth holding */
    }
    pd->chunk = data;
    pd->chunk_len = len;
    pd->chunk_at = pd->n;
    memcpy(pd->p + pd->n, data, len);
    pd->n += len;
    return 0;
}

/* The first token: the answer's head, and what its attempt sent so far. */
static int commit(struct conn *c, uint32_t attempt) {
    char head[512];
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n"
             "Connection: close\r\nX-SG-Attempt: %u\r\n\r\n",
             answer_content_type(&c->route->framing), attempt);
    c->committed = true;
    c->committed_attempt = attempt;
    c->committed_at = now_ns();
    c->state = C_STREAMING;
    put_str(c, head);
    struct pending *pd = pending_of(c, attempt, false);
    int rv = 0;
    if (pd != NULL && pd->n > 0) {
        rv = forward(c, pd->p, pd->n);
        /* the read being processed is the one in progress, not the copy */
        c->chunk = pd->chunk;
        c->chunk_len = pd->chunk_len;
        c->chunk_at = (ptrdiff_t)pd->chunk_at;
    }
    flush_out(c);
    for (size_t i = 0; i < 1 + SG_OP_MAX_HEDGES; i++) {
        c->pend[i].attempt = 0; /* every other attempt's bytes go */
        c->pend[i].n = 0;
    }
    return rv;
}

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    struct conn *c = ud;
    if (!c->committed && commit(c, item->attempt) != 0) {
        return 1;
    }
    if (c->client_gone || item->attempt != c->committed_attempt) {
        return c->client_gone ? 1 : 0;
    }
    return release(c, item);
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome, void *ud) {
    (void)op;
    (void)outcome;
    struct conn *c = ud;
    struct pending *pd = pending_of(c, attempt, false);
    if (pd != NULL) {
        pd->attempt = 0;
        pd->n = 0;
    }
}

/* The report line: the library's report, the route and the client. */
static void log_report(struct conn *c) {
    struct proxy *p = c->proxy;
    size_t need = 0;
    char small[16384];
    char *buf = small;
    int rv = sg_curl_op_report(c->op, buf, sizeof(small), &need);
    if (rv == SG_ENOBUFS && (buf = malloc(need)) != NULL) {
        rv = sg_curl_op_report(c->op, buf, need, NULL);
    }
    if (rv == 0) {
        fprintf(p->log, "{\"route\":\"%s\",\"client\":\"%s\",\"report\":%s}\n",
                c->route->name, c->peer, buf);
        fflush(p->log);
    }
    if (buf != small) {
        free(buf);
    }
}

/* The upstream's Retry-After, in whole seconds, for a 429 or 503 passed
 * through ("" when it gave none). */
static void retry_after_of(const sg_op_attempt *a, char *out, size_t cap) {
    out[0] = '\0';
    if (a != NULL && a->retry_after_ns >= 0) {
        long long s = (long long)((a->retry_after_ns + SG_SEC(1) - 1) / SG_SEC(1));
        snprintf(out, cap, "Retry-After: %lld\r\n", s);
    }
}

static void answer_failure(struct conn *c, sg_outcome o) {
    const sg_op *pol = sg_curl_op_policy(c->op);
    const sg_op_attempt *a = sg_op_deciding_attempt(pol);
    if (a == NULL) {
        uint32_t n = sg_op_attempt_count(pol);
        a = n > 0 ? sg_op_attempt_at(pol, n - 1) : NULL;
    }
    int upstream = a != NULL ? a->http_status : 0;
    int status = answer_status(o, upstream);
    enum answer_style style = answer_style_of(c->route->profile);
    char body[1400];
    const char *detail = sg_curl_op_error(c->op);
    if (a != NULL && a->provider_error_type[0] != '\0') {
        detail = a->provider_error_type;
    }
    answer_error_body(style, o, status, detail, body, sizeof(body));
    char extra[160];
    char ra[64] = "";
    if (status == 429 || status == 503) {
        retry_after_of(a, ra, sizeof(ra));
    }
    snprintf(extra, sizeof(extra), "X-SG-Outcome: %s\r\n%s", sg_outcome_name(o), ra);
    reply(c, status, sg_fm_h1_status_text(status), extra, body);
}

static void answer_in_band_error(struct conn *c, sg_outcome o) {
    enum answer_style style = answer_style_of(c->route->profile);
    /* what the client got ends on a whole event or line (the rest of a cut
     * one is dropped): the error is an event of its own */
    c->part_len = 0;
    char buf[1600];
    const char *detail = sg_curl_op_error(c->op);
    size_t n = answer_in_band(style, o, detail, buf, sizeof(buf));
    (void)put(c, buf, n);
}

static void on_done(sg_curl_op *op, void *ud) {
    struct conn *c = ud;
    sg_outcome o = sg_curl_op_outcome(op);
    log_report(c);
    int64_t end = now_ns();
    metrics_observe(c->route->name, sg_curl_op_policy(op),
                    (double)(end - c->arrived) / 1e9,
                    c->committed ? (double)(c->committed_at - c->arrived) / 1e9 : -1.0);
    if (!c->client_gone) {
        if (c->committed) {
            c->state = C_CLOSING;
            if (o != SG_OUTCOME_OK) {
                answer_in_band_error(c, o);
            } else if (c->part_len > 0) {
                /* a clean end after bytes with no event end (a terminal
                 * without its blank line): they are the stream's too */
                (void)put(c, c->part, c->part_len);
                c->part_len = 0;
            }
            flush_out(c);
        } else {
            answer_failure(c, o);
        }
    }
    c->state = C_CLOSING;
    /* what is left for the client has as long as a request head had */
    c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
    /* the multi has let go of it: free it here, as the library allows */
    free_op(c);
    if (c->client_gone || c->out_len == 0) {
        conn_free(c);
    }
}

/* ------------------------------------------------------ the request */

static bool hop_by_hop(const sg_fm_h1_header *h) {
    static const char *const drop[] = {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "x-deadline-ms",
        "grpc-timeout",
        "idempotency-key",
        "accept-encoding",
        "expect",
        NULL,
    };
    for (const char *const *d = drop; *d != NULL; d++) {
        if (sg_fm_h1_iequal(h->name, h->name_len, *d, strlen(*d))) {
            return true;
        }
    }
    return false;
}

/* base + the client's target, or NULL. */
static char *join(const char *base, size_t base_len, const char *target, size_t tlen) {
    char *u = malloc(base_len + tlen + 1);
    if (u != NULL) {
        memcpy(u, base, base_len);
        memcpy(u + base_len, target, tlen);
        u[base_len + tlen] = '\0';
    }
    return u;
}

/* The inbound budget (X-Deadline-Ms, or grpc-timeout), as a deadline. */
static bool inbound_deadline(struct conn *c, int64_t *deadline) {
    int64_t ns = -1;
    const sg_fm_h1_header *h = sg_fm_h1_find_header(&c->req, "x-deadline-ms");
    if (h != NULL && sg_deadline_ms_parse(h->value, h->value_len, &ns) != 0) {
        ns = -1;
    }
    const sg_fm_h1_header *g = sg_fm_h1_find_header(&c->req, "grpc-timeout");
    int64_t gns;
    if (g != NULL && sg_grpc_timeout_parse(g->value, g->value_len, &gns) == 0 &&
        (ns < 0 || gns < ns)) {
        ns = gns;
    }
    if (ns < 0) {
        return false;
    }
    return sg_deadline_from_timeout(c->arrived, ns, c->proxy->transit_allowance,
                                    deadline) == 0;
}

/* GET /metrics is the proxy's own. */
static bool serve_metrics(struct conn *c) {
    if (!sg_fm_h1_iequal(c->req.method, c->req.method_len, "GET", 3) ||
        !sg_fm_h1_iequal(c->req.target, c->req.target_len, "/metrics", 8)) {
        return false;
    }
    static char text[65536];
    size_t n = metrics_text(text, sizeof(text));
    char head[256];
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
             "Content-Length: %zu\r\nConnection: close\r\n\r\n",
             n);
    c->state = C_CLOSING;
    c->header_deadline = sg_time_add(now_ns(), c->proxy->header_timeout);
    put_str(c, head);
    (void)put(c, text, n);
    flush_out(c);
    return true;
}

static void start_operation(struct conn *c) {
    struct proxy *p = c->proxy;
    const struct route *r = routes_match(p->routes, c->req.target, c->req.target_len);
    if (r == NULL) {
        reply_error(c, 404, "no route for this path");
        return;
    }
    c->route = r;
    c->set = p->routes;
    c->set->refs++; /* a reload must not free it under this stream */
    const char *target = c->req.target + r->prefix_len;
    size_t target_len = c->req.target_len - r->prefix_len;
    c->state = C_UPSTREAM;
    c->url = join(r->upstream, r->upstream_len, target, target_len);
    c->easy = curl_easy_init();
    if (c->url == NULL || c->easy == NULL) {
        reply_error(c, 502, "out of memory");
        return;
    }
    char method[32];
    size_t ml =
        c->req.method_len < sizeof(method) - 1 ? c->req.method_len : sizeof(method) - 1;
    memcpy(method, c->req.method, ml);
    method[ml] = '\0';
    CURL *e = c->easy;
    curl_easy_setopt(e, CURLOPT_URL, c->url);
    curl_easy_setopt(e, CURLOPT_USERAGENT, NULL); /* the client's, forwarded */
    bool has_body = c->body != NULL || strcmp(method, "POST") == 0;
    if (has_body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, c->body != NULL ? c->body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
    }
    if (strcmp(method, has_body ? "POST" : "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    if (r->cafile != NULL) {
        curl_easy_setopt(e, CURLOPT_CAINFO, r->cafile);
    }
    if (strncmp(c->url, "https://", 8) == 0) {
        /* wait for a connection being made to say whether it multiplexes
         * (ALPN h2) rather than open one more beside it: concurrent
         * requests then share one HTTP/2 connection */
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
    }
    /* the client's headers, less what is the proxy's to decide */
    for (size_t i = 0; i < c->req.num_headers; i++) {
        const sg_fm_h1_header *h = &c->req.headers[i];
        if (hop_by_hop(h)) {
            continue;
        }
        char line[8192];
        int n = snprintf(line, sizeof(line), "%.*s: %.*s", (int)h->name_len, h->name,
                         (int)h->value_len, h->value);
        if (n > 0 && (size_t)n < sizeof(line)) {
            struct curl_slist *s = curl_slist_append(c->headers, line);
            if (s != NULL) {
                c->headers = s;
            }
        }
    }
    struct curl_slist *s = curl_slist_append(c->headers, "Expect:");
    c->headers = s != NULL ? s : c->headers;

    sg_op_options po = r->policy;
    sg_op_options_set_method(&po, method);
    sg_op_options_set_target(&po, c->url);
    const sg_fm_h1_header *key = sg_fm_h1_find_header(&c->req, "idempotency-key");
    if (key != NULL && key->value_len > 0 && key->value_len < 256) {
        char k[256];
        memcpy(k, key->value, key->value_len);
        k[key->value_len] = '\0';
        (void)sg_op_options_set_idempotency_key(&po, k); /* a bad key: none */
    }
    int64_t deadline;
    if (inbound_deadline(c, &deadline)) {
        sg_op_options_set_deadline(&po, deadline); /* the tighter of the two */
    }
    sg_curl_options co;
    memset(&co, 0, sizeof(co));
    co.framing = r->framing;
    co.headers = c->headers;
    co.deadline_header = true;
    co.cafile = r->cafile;
    if (r->nfallback > 0) {
        c->eps[0].url = c->url;
        for (int i = 0; i < r->nfallback; i++) {
            c->fallback_urls[i] =
                join(r->fallback[i], r->fallback_len[i], target, target_len);
            if (c->fallback_urls[i] == NULL) {
                reply_error(c, 502, "out of memory");
                return;
            }
            c->eps[i + 1].url = c->fallback_urls[i];
        }
        co.endpoints = c->eps;
        co.n_endpoints = (uint32_t)r->nfallback + 1;
    }
    sg_curl_callbacks cbs = {.on_item = on_item,
                             .on_discard = on_discard,
                             .on_done = on_done,
                             .on_bytes = on_bytes};
    int rv = sg_curl_op_new(&c->op, e, &po, &co, &cbs, c);
    if (rv == 0) {
        rv = sg_curl_multi_add(p->multi, c->op);
    }
    if (rv != 0) {
        char what[128];
        snprintf(what, sizeof(what), "cannot start the operation (%s)", sg_strerror(rv));
        free_op(c);
        reply_error(c, 502, what);
    }
}

/* The body so far: whole when 1. */
static int read_body(struct conn *c) {
    struct proxy *p = c->proxy;
    const char *b = c->in + c->head_len;
    size_t n = c->in_len - c->head_len;
    if (c->req.chunked) {
        /* decoded into c->body as it comes */
        long used = sg_fm_h1_chunked_consume(&c->chunked, b, n);
        if (used < 0) {
            reply_error(c, 400, "malformed chunked body");
            return -1;
        }
        c->head_len += (size_t)used;
        if (c->chunked.body_bytes > p->max_body) {
            reply_error(c, 413, "request body too large");
            return -1;
        }
        return c->chunked.done ? 1 : 0;
    }
    int64_t want = c->req.content_length < 0 ? 0 : c->req.content_length;
    if ((uint64_t)want > p->max_body) {
        reply_error(c, 413, "request body too large");
        return -1;
    }
    if (n < (size_t)want) {
        return 0;
    }
    if (want > 0) {
        c->body = malloc((size_t)want + 1);
        if (c->body == NULL) {
            reply_error(c, 413, "request body too large");
            return -1;
        }
        memcpy(c->body, b, (size_t)want);
        c->body[want] = '\0';
        c->body_len = (size_t)want;
    }
    return 1;
}

static void on_chunk_data(void *ud, const char *data, size_t len) {
    struct conn *c = ud;
    if (c->body_len + len > c->proxy->max_body) {
        return; /* counted in body_bytes: read_body refuses it */
    }
    char *nb = realloc(c->body, c->body_len + len + 1);
    if (nb == NULL) {
        return;
    }
    c->body = nb;
    memcpy(c->body + c->body_len, data, len);
    c->body_len += len;
    c->body[c->body_len] = '\0';
}

static void parse(struct conn *c) {
    if (c->state == C_HEAD) {
        size_t head = sg_fm_h1_find_head_end(c->in, c->in_len, &c->scanned);
        if (head == 0) {
            if (c->in_len > PROXY_MAX_HEAD) {
                reply_error(c, 431, "request head too large");
            }
            return;
        }
        int rv = head > PROXY_MAX_HEAD ? SG_FM_H1_ETOOLARGE
                                       : sg_fm_h1_parse_request(c->in, head, &c->req);
        if (rv < 0) {
            int status = sg_fm_h1_error_status(rv);
            reply_error(c, status, sg_fm_h1_status_text(status));
            return;
        }
        c->head_len = head;
        c->arrived = now_ns();
        c->state = C_BODY;
        if (c->req.chunked) {
            memset(&c->chunked, 0, sizeof(c->chunked));
            c->chunked.on_data = on_chunk_data;
            c->chunked.user_data = c;
        }
    }
    if (c->state == C_BODY) {
        int done = read_body(c);
        if (done == 1 && !serve_metrics(c)) {
            start_operation(c);
        }
    }
}

static void read_client(struct conn *c) {
    for (;;) {
        if (c->state != C_HEAD && c->state != C_BODY) {
            /* a request is being answered: read (and drop) only to see
             * the client go */
            char sink[4096];
            ssize_t n = recv(c->fd, sink, sizeof(sink), 0);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
                c->client_gone = true;
            }
            if (n <= 0) {
                return;
            }
            continue;
        }
        size_t limit = PROXY_MAX_HEAD + c->proxy->max_body + 65536;
        if (!grow(&c->in, &c->in_cap, c->in_len + 16384) || c->in_len > limit) {
            reply_error(c, 413, "request too large");
            return;
        }
        ssize_t n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        if (n > 0) {
            c->in_len += (size_t)n;
            parse(c);
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            c->client_gone = true;
        }
        return;
    }
}

void conn_ready(struct proxy *p, struct conn *c, uint32_t events) {
    (void)p;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
        read_client(c);
    }
    if (events & (EPOLLHUP | EPOLLERR)) {
        c->client_gone = true;
    }
    flush_out(c);
    if (c->paused && c->op != NULL && !c->client_gone &&
        c->out_len - c->out_off < c->proxy->client_buffer / 2) {
        /* caught up: the upstream read goes on (from the loop, as the
         * library requires: the held bytes may come in this call) */
        c->paused = false;
        sg_curl_op_resume(c->op);
        flush_out(c);
    }
    if (c->client_gone || (c->state == C_CLOSING && c->out_len == 0)) {
        if (c->op != NULL) {
            sg_curl_op_cancel(c->op); /* on_done frees the connection */
        } else {
            conn_free(c);
        }
    }
}

int64_t conns_expire(struct proxy *p, int64_t now) {
    int64_t next = SG_TIME_NEVER;
    struct conn *c = p->conns;
    while (c != NULL) {
        struct conn *n = c->next;
        if (c->op != NULL && (c->too_slow || c->client_gone)) {
            sg_curl_op_cancel(c->op); /* the client cannot keep up, or left */
        } else if (c->state == C_HEAD || c->state == C_BODY) {
            if (now >= c->header_deadline) {
                reply_error(c, 408, "request not received in time");
                if (c->out_len == 0 || c->client_gone) {
                    conn_free(c);
                }
            } else if (c->header_deadline < next) {
                next = c->header_deadline;
            }
        } else if (c->state == C_CLOSING && c->op == NULL) {
            if (now >= c->header_deadline) {
                conn_free(c); /* a client that does not read its answer */
            } else if (c->header_deadline < next) {
                next = c->header_deadline;
            }
        }
        c = n;
    }
    return next;
}

void conns_cancel_all(struct proxy *p) {
    for (struct conn *c = p->conns; c != NULL; c = c->next) {
        if (c->op != NULL) {
            sg_curl_op_cancel(c->op);
        }
    }
}

void conns_free(struct proxy *p) {
    while (p->conns != NULL) {
        conn_free(p->conns);
    }
}
