/*
 * request.c - one client request from bytes to a routed, checked request
 * (request.h): the head, its checks, the body, the upstream's header
 * lines.  No sockets, no libcurl calls, nothing global: conn.c and the
 * fuzz target fuzz/proxy_request.c drive it the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "request.h"

bool grow(char **buf, size_t *cap, size_t need) {
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

void preq_init(struct preq *q, size_t max_body) {
    memset(q, 0, sizeof(*q));
    q->max_body = max_body;
    q->state = PREQ_HEAD;
}

void preq_free(struct preq *q) {
    free(q->in);
    q->in = NULL;
    q->in_len = q->in_cap = 0;
}

static enum preq_state refuse(struct preq *q, int status, const char *why) {
    /* refused with its body read (or none announced): the client sends
     * nothing more */
    int64_t cl = q->req.content_length;
    q->all_read = q->head_len > 0 && !q->req.chunked &&
                  q->in_len - q->head_len >= (size_t)(cl > 0 ? cl : 0);
    q->state = PREQ_FAILED;
    q->status = status;
    q->why = why;
    return q->state;
}

/* ------------------------------------------------------------ the buffer */

/* The buffer to @cap bytes (grown as grow() does, or exactly): once the
 * head is parsed its views point into it, and they move with it.  false
 * when the memory is not there (nothing changed then). */
static bool resize(struct preq *q, size_t cap, bool exact) {
    sg_fm_h1_request *r = &q->req;
    const bool views = q->head_len > 0;
    size_t method = 0, target = 0;
    size_t names[SG_FM_H1_MAX_HEADERS], values[SG_FM_H1_MAX_HEADERS];
    if (views) {
        method = (size_t)(r->method - q->in);
        target = (size_t)(r->target - q->in);
        for (size_t i = 0; i < r->num_headers; i++) {
            names[i] = (size_t)(r->headers[i].name - q->in);
            values[i] = (size_t)(r->headers[i].value - q->in);
        }
    }
    if (exact) {
        char *p = realloc(q->in, cap);
        if (p == NULL) {
            return false;
        }
        q->in = p;
        q->in_cap = cap;
    } else if (!grow(&q->in, &q->in_cap, cap)) {
        return false;
    }
    if (views) {
        r->method = q->in + method;
        r->target = q->in + target;
        for (size_t i = 0; i < r->num_headers; i++) {
            r->headers[i].name = q->in + names[i];
            r->headers[i].value = q->in + values[i];
        }
    }
    return true;
}

char *preq_room(struct preq *q, size_t want, size_t *room) {
    if (q->in_len + want > q->in_cap && !resize(q, q->in_len + want, false)) {
        refuse(q, 503, "out of memory");
        return NULL;
    }
    *room = q->in_cap - q->in_len;
    return q->in + q->in_len;
}

void preq_fit(struct preq *q) {
    if (q->in_len > 0 && q->in_len < q->in_cap) {
        (void)resize(q, q->in_len, true); /* else it keeps the room it had */
    }
}

/* ------------------------------------------------------------ the head */

static int hex_digit(unsigned char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = (unsigned char)(c | 0x20);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One round of percent-decoding of @p[0..@n), in place: the new length
 * (@n when nothing decoded). */
static size_t decode_once(char *p, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n; o++) {
        int h = 0;
        int l = 0;
        if (p[i] == '%' && n - i >= 3 && (h = hex_digit((unsigned char)p[i + 1])) >= 0 &&
            (l = hex_digit((unsigned char)p[i + 2])) >= 0) {
            p[o] = (char)(h << 4 | l);
            i += 3;
        } else {
            p[o] = p[i++];
        }
    }
    return o;
}

/* true when @s[0..@n) is "." or "..", up to its first ';', '?', '#' or
 * NUL: what a server that drops path parameters, or a C string's end,
 * reads it as. */
static bool dots(const char *s, size_t n) {
    size_t k = 0;
    while (k < n && s[k] != ';' && s[k] != '?' && s[k] != '#' && s[k] != '\0') {
        k++;
    }
    return (k == 1 && s[0] == '.') || (k == 2 && s[0] == '.' && s[1] == '.');
}

bool preq_dot_segment(const char *t, size_t len) {
    size_t end = 0;
    while (end < len && t[end] != '?' && t[end] != '#') {
        end++;
    }
    char small[1024];
    char *p = end <= sizeof(small) ? small : malloc(end);
    if (p == NULL) {
        return true; /* it cannot be looked at: it does not go */
    }
    memcpy(p, t, end);
    /* decoded as often as it decodes: an upstream (or a chain of them)
     * may decode more than once ("%252e" is "." twice decoded) */
    size_t n = end;
    bool refused = false;
    for (int round = 0;; round++) {
        size_t m = decode_once(p, n);
        if (m == n) {
            break;
        }
        if (round == PREQ_DECODE_ROUNDS) {
            refused = true; /* still decoding: no one sends that */
            break;
        }
        n = m;
    }
    for (size_t i = 0; i < n && !refused;) {
        size_t j = i;
        while (j < n && p[j] != '/' && p[j] != '\\') {
            j++;
        }
        refused = dots(p + i, j - i);
        i = j + 1;
    }
    if (p != small) {
        free(p);
    }
    return refused;
}

const struct route *routes_match(const struct routes *s, const char *target, size_t len) {
    const struct route *best = NULL;
    for (int i = 0; i < s->n; i++) {
        const struct route *r = &s->r[i];
        size_t pl = r->prefix_len;
        if (pl > len || memcmp(target, r->prefix, pl) != 0) {
            continue;
        }
        char next = pl < len ? target[pl] : '\0';
        if (pl > 0 && next != '\0' && next != '/' && next != '?') {
            continue; /* "/openai" is not "/openai2" */
        }
        if (best == NULL || pl > best->prefix_len) {
            best = r;
        }
    }
    return best;
}

/* GET /metrics, /healthz and /readyz are the proxy's own: the path
 * exactly (paths are case-sensitive), whatever the query. */
static enum preq_own own_path(const sg_fm_h1_request *r) {
    static const struct {
        const char *path;
        enum preq_own own;
    } own[] = {
        {"/metrics", PREQ_OWN_METRICS},
        {"/healthz", PREQ_OWN_HEALTHZ},
        {"/readyz", PREQ_OWN_READYZ},
    };
    if (!sg_fm_h1_iequal(r->method, r->method_len, "GET", 3)) {
        return PREQ_OWN_NONE;
    }
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        size_t n = strlen(own[i].path);
        if (r->target_len >= n && memcmp(r->target, own[i].path, n) == 0 &&
            (r->target_len == n || r->target[n] == '?')) {
            return own[i].own;
        }
    }
    return PREQ_OWN_NONE;
}

static void on_chunk_data(void *ud, const char *data, size_t len);

/* The head in[0..@head) is whole: parsed and checked, or failed. */
static enum preq_state head_whole(struct preq *q, size_t head,
                                  const struct routes *routes) {
    sg_fm_h1_request *r = &q->req;
    int rv = head > PROXY_MAX_HEAD ? SG_FM_H1_ETOOLARGE
                                   : sg_fm_h1_parse_request(q->in, head, r);
    if (rv < 0) {
        int status = sg_fm_h1_error_status(rv);
        return refuse(q, status, sg_fm_h1_status_text(status));
    }
    q->head_len = head;
    q->raw = head;
    /* forwarded whole or not at all: the library keeps no longer one */
    if (r->method_len > PREQ_METHOD_MAX) {
        return refuse(q, 501, "a method longer than 31 characters");
    }
    memcpy(q->method, r->method, r->method_len);
    q->method[r->method_len] = '\0';
    if (preq_dot_segment(r->target, r->target_len)) {
        return refuse(q, 400, "a path with a '.' or '..' segment");
    }
    q->own = own_path(r);
    q->route =
        q->own != PREQ_OWN_NONE ? NULL : routes_match(routes, r->target, r->target_len);
    if (q->own == PREQ_OWN_NONE && q->route == NULL) {
        return refuse(q, 404, "no route for this path");
    }
    if (r->content_length > 0 && (uint64_t)r->content_length > q->max_body) {
        return refuse(q, 413, "request body too large");
    }
    q->has_body = r->content_length >= 0 || r->chunked;
    const sg_fm_h1_header *e = sg_fm_h1_find_header(r, "expect");
    /* RFC 9110 §10.1.1: an HTTP/1.0 client's expectation is ignored */
    q->expect_continue = e != NULL && r->minor_version == 1 &&
                         sg_fm_h1_iequal(e->value, e->value_len, "100-continue", 12);
    if (r->chunked) {
        memset(&q->chunked, 0, sizeof(q->chunked));
        q->chunked.on_data = on_chunk_data;
        q->chunked.user_data = q;
    }
    q->state = PREQ_BODY;
    return q->state;
}

/* ------------------------------------------------------------ the body */

/* A piece of chunked body, decoded: moved down to the body's end, over
 * the framing already read (it is never ahead of the piece). */
static void on_chunk_data(void *ud, const char *data, size_t len) {
    struct preq *q = ud;
    if (q->over || len > q->max_body - q->body_len) {
        q->over = true; /* refused once the piece's read is done */
        return;
    }
    memmove(q->in + q->head_len + q->body_len, data, len);
    q->body_len += len;
}

static enum preq_state read_body(struct preq *q) {
    if (!q->req.chunked) {
        size_t want = q->req.content_length > 0 ? (size_t)q->req.content_length : 0;
        size_t have = q->in_len - q->head_len;
        q->body_len = have < want ? have : want;
        if (have >= want) {
            q->state = PREQ_WHOLE;
        }
        return q->state;
    }
    long used = sg_fm_h1_chunked_consume(&q->chunked, q->in + q->raw, q->in_len - q->raw);
    if (used < 0) {
        return refuse(q, 400, "malformed chunked body");
    }
    if (q->over) {
        return refuse(q, 413, "request body too large");
    }
    if (q->chunked.done) {
        q->state = PREQ_WHOLE;
        return q->state;
    }
    /* all of it was read (only the end stops short): the framing goes,
     * and the next read lands right after the body */
    q->in_len = q->raw = q->head_len + q->body_len;
    return q->state;
}

enum preq_state preq_got(struct preq *q, size_t n, const struct routes *routes) {
    if (q->state == PREQ_FAILED || q->state == PREQ_WHOLE) {
        return q->state;
    }
    q->in_len += n;
    if (q->state == PREQ_HEAD) {
        size_t head = sg_fm_h1_find_head_end(q->in, q->in_len, &q->scanned);
        if (head == 0) {
            return q->in_len > PROXY_MAX_HEAD ? refuse(q, 431, "request head too large")
                                              : q->state;
        }
        if (head_whole(q, head, routes) != PREQ_BODY) {
            return q->state;
        }
    }
    return read_body(q);
}

/* ------------------------------------------------------------ upstream */

bool preq_hop_by_hop(const sg_fm_h1_request *req, const sg_fm_h1_header *h) {
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
    /* a header the client's Connection header names (RFC 9110 §7.6.1):
     * as hop-by-hop as the fixed ones, whatever it is called */
    for (size_t i = 0; i < req->num_headers; i++) {
        const sg_fm_h1_header *c = &req->headers[i];
        if (!sg_fm_h1_iequal(c->name, c->name_len, "connection", 10)) {
            continue;
        }
        const char *p = c->value;
        const char *end = c->value + c->value_len;
        while (p < end) {
            while (p < end && (*p == ' ' || *p == '\t' || *p == ',')) {
                p++;
            }
            const char *t = p;
            while (p < end && *p != ',' && *p != ' ' && *p != '\t') {
                p++;
            }
            if (p > t && sg_fm_h1_iequal(h->name, h->name_len, t, (size_t)(p - t))) {
                return true;
            }
        }
    }
    return false;
}

int preq_header_line(const sg_fm_h1_header *h, preq_line_fn line, void *ud) {
    size_t n = h->name_len + 2 + h->value_len + 1;
    char small[1024];
    char *l = n <= sizeof(small) ? small : malloc(n);
    if (l == NULL) {
        return -1;
    }
    memcpy(l, h->name, h->name_len);
    if (h->value_len == 0) {
        memcpy(l + h->name_len, ";", 2);
    } else {
        memcpy(l + h->name_len, ": ", 2);
        memcpy(l + h->name_len + 2, h->value, h->value_len);
        l[h->name_len + 2 + h->value_len] = '\0';
    }
    int rv = line(ud, l);
    if (l != small) {
        free(l);
    }
    return rv;
}

int preq_header_lines(const struct preq *q, preq_line_fn line, void *ud) {
    const sg_fm_h1_request *r = &q->req;
    bool accept = false;
    bool ctype = false;
    for (size_t i = 0; i < r->num_headers; i++) {
        const sg_fm_h1_header *h = &r->headers[i];
        if (preq_hop_by_hop(r, h)) {
            continue;
        }
        accept = accept || sg_fm_h1_iequal(h->name, h->name_len, "accept", 6);
        ctype = ctype || sg_fm_h1_iequal(h->name, h->name_len, "content-type", 12);
        int rv = preq_header_line(h, line, ud);
        if (rv != 0) {
            return rv;
        }
    }
    /* libcurl's own defaults, unless a line of the same name is given:
     * Accept: * / * on every request, a form Content-Type on a body, and
     * Expect: 100-continue on a large one (the client's was answered
     * here: the body is read already) */
    int rv = accept ? 0 : line(ud, "Accept:");
    if (rv == 0 && !ctype) {
        rv = line(ud, "Content-Type:");
    }
    return rv != 0 ? rv : line(ud, "Expect:");
}
