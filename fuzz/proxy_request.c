/*
 * Fuzz target for sg-proxy's request side (tools/sg-proxy/request.c),
 * driven the way conn.c drives it: the bytes go into the room
 * preq_room() makes (the buffer growing and moving under the parsed
 * head: under ASan every realloc moves, so a view left behind is a
 * use-after-free), in reads whose sizes come from the input, each read
 * handed to preq_got(); then what upstream.c takes of a whole request -
 * the method, the route, the body, the header lines for libcurl - is
 * checked against what the bytes said, by references written here.
 *
 * The input: four parameter bytes, read sizes, then the request.
 *   [0] max_body: 0..127, or (b & 0x7f) KiB from 128
 *   [1] the room asked for each read: 1 + 64 * b (255: conn.c's 16 KiB)
 *   [2] how many read sizes follow (1..16); each is 1..64 bytes, or from
 *       0xC0 as much as the room holds
 *   [3] bit 0: a route with the empty prefix (everything routes; else a
 *       path outside the prefixes is 404)
 * The request may repeat a byte: 0xFE HI LO writes the byte before it
 * HI*256+LO more times (0xFE 0xFE is one 0xFE), so that heads past
 * 32 KiB, chunk extensions and trailers past 4 KiB and bodies near the
 * limit come from inputs of a few bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/common/http1.c"
#include "../tools/sg-proxy/request.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define EXPANDED_MAX (256 * 1024)

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/proxy_request invariant failed: %s\n", what);
        abort();
    }
}

/* The request, its repetitions written out: the number of bytes. */
static size_t expand(const uint8_t *t, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n && o < EXPANDED_MAX;) {
        if (t[i] != 0xFE || i + 1 >= n) {
            out[o++] = (char)t[i++];
        } else if (t[i + 1] == 0xFE) {
            out[o++] = (char)0xFE;
            i += 2;
        } else if (i + 2 < n) {
            size_t k = (size_t)t[i + 1] << 8 | t[i + 2];
            char b = o > 0 ? out[o - 1] : 'a';
            for (; k > 0 && o < EXPANDED_MAX; k--) {
                out[o++] = b;
            }
            i += 3;
        } else {
            out[o++] = (char)t[i++];
        }
    }
    return o;
}

/* ------------------------------------------------------------ references */

static int ref_hex(unsigned char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
        return (c | 0x20) - 'a' + 10;
    }
    return -1;
}

/* The path of @t decoded until nothing decodes (into @p): how many rounds
 * changed it; and whether a segment is then "." or "..". */
static int ref_dots(const char *t, size_t len, char *p, bool *dots) {
    size_t n = 0;
    while (n < len && t[n] != '?' && t[n] != '#') {
        p[n] = t[n];
        n++;
    }
    /* past PREQ_DECODE_ROUNDS + 1 it makes no difference: refused */
    int rounds = 0;
    for (bool changed = true; changed && rounds <= PREQ_DECODE_ROUNDS;) {
        changed = false;
        size_t o = 0;
        for (size_t i = 0; i < n; o++) {
            if (p[i] == '%' && n - i >= 3 && ref_hex((unsigned char)p[i + 1]) >= 0 &&
                ref_hex((unsigned char)p[i + 2]) >= 0) {
                p[o] = (char)(ref_hex((unsigned char)p[i + 1]) * 16 +
                              ref_hex((unsigned char)p[i + 2]));
                i += 3;
                changed = true;
            } else {
                p[o] = p[i++];
            }
        }
        n = o;
        rounds += changed;
    }
    *dots = false;
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '/' || p[i] == '\\') {
            size_t k = seg;
            while (k < i && p[k] != ';' && p[k] != '?' && p[k] != '#' && p[k] != '\0') {
                k++;
            }
            size_t l = k - seg;
            *dots = *dots || (l == 1 && p[seg] == '.') ||
                    (l == 2 && p[seg] == '.' && p[seg + 1] == '.');
            seg = i + 1;
        }
    }
    return rounds;
}

struct collect {
    char *p;
    size_t n, cap;
    bool over;
};

static void collect_data(void *ud, const char *d, size_t len) {
    struct collect *c = ud;
    if (c->n + len > c->cap) {
        c->over = true;
        return;
    }
    memcpy(c->p + c->n, d, len);
    c->n += len;
}

struct lines {
    const struct preq *q;
    size_t n;      /* lines seen */
    size_t client; /* of them the client's */
    size_t next;   /* the client's header the next line must be */
    bool accept, ctype, expect;
};

static bool ref_forwarded(const sg_fm_h1_request *r, const sg_fm_h1_header *h) {
    static const char *const own[] = {"host",
                                      "content-length",
                                      "connection",
                                      "keep-alive",
                                      "proxy-connection",
                                      "te",
                                      "trailer",
                                      "transfer-encoding",
                                      "upgrade",
                                      "proxy-authorization",
                                      "expect",
                                      "x-deadline-ms",
                                      "grpc-timeout",
                                      "idempotency-key",
                                      "accept-encoding"};
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        if (sg_fm_h1_iequal(h->name, h->name_len, own[i], strlen(own[i]))) {
            return false;
        }
    }
    for (size_t i = 0; i < r->num_headers; i++) {
        const sg_fm_h1_header *c = &r->headers[i];
        if (!sg_fm_h1_iequal(c->name, c->name_len, "connection", 10)) {
            continue;
        }
        /* the name as one of its comma- or space-separated tokens */
        for (size_t s = 0; s + h->name_len <= c->value_len; s++) {
            bool start = s == 0 || strchr(", \t", c->value[s - 1]) != NULL;
            size_t e = s + h->name_len;
            bool end = e == c->value_len || strchr(", \t", c->value[e]) != NULL;
            if (start && end &&
                sg_fm_h1_iequal(c->value + s, h->name_len, h->name, h->name_len)) {
                return false;
            }
        }
    }
    return true;
}

/* Each line: the next forwarded client header, written whole (or the
 * empty "Name;"), then the three suppressions, each once, Expect last. */
static int on_line(void *ud, const char *line) {
    struct lines *L = ud;
    const sg_fm_h1_request *r = &L->q->req;
    size_t len = strlen(line);
    for (size_t i = 0; i < len; i++) {
        check(line[i] != '\r' && line[i] != '\n', "a header line holds no line end");
    }
    L->n++;
    while (L->next < r->num_headers && !ref_forwarded(r, &r->headers[L->next])) {
        L->next++;
    }
    if (!L->accept && !L->ctype && !L->expect && L->next < r->num_headers) {
        const sg_fm_h1_header *h = &r->headers[L->next++];
        check(len == h->name_len + (h->value_len ? 2 + h->value_len : 1) &&
                  memcmp(line, h->name, h->name_len) == 0,
              "a forwarded header is the client's, whole");
        if (h->value_len == 0) {
            check(line[h->name_len] == ';', "an empty header is written Name;");
        } else {
            check(memcmp(line + h->name_len, ": ", 2) == 0 &&
                      memcmp(line + h->name_len + 2, h->value, h->value_len) == 0,
                  "a forwarded header keeps its value");
        }
        L->client++;
        return 0;
    }
    check(!L->expect, "Expect: is the last line");
    if (strcmp(line, "Accept:") == 0) {
        check(!L->accept && !L->ctype, "Accept: once, first");
        L->accept = true;
    } else if (strcmp(line, "Content-Type:") == 0) {
        check(!L->ctype, "Content-Type: once");
        L->ctype = true;
    } else {
        check(strcmp(line, "Expect:") == 0, "no other line of the proxy's");
        L->expect = true;
    }
    return 0;
}

static void check_lines(const struct preq *q) {
    struct lines L = {.q = q};
    check(preq_header_lines(q, on_line, &L) == 0, "the lines are all given");
    bool accept = false;
    bool ctype = false;
    size_t fwd = 0;
    for (size_t i = 0; i < q->req.num_headers; i++) {
        const sg_fm_h1_header *h = &q->req.headers[i];
        if (ref_forwarded(&q->req, h)) {
            fwd++;
            accept = accept || sg_fm_h1_iequal(h->name, h->name_len, "accept", 6);
            ctype = ctype || sg_fm_h1_iequal(h->name, h->name_len, "content-type", 12);
        }
    }
    check(L.client == fwd, "every header not hop-by-hop is forwarded");
    check(L.accept == !accept && L.ctype == !ctype && L.expect,
          "libcurl's defaults are suppressed exactly where the client's do not go");
}

/* ------------------------------------------------------------ the checks */

static const struct route *ref_route(const struct routes *s, const char *t, size_t n) {
    const struct route *best = NULL;
    for (int i = 0; i < s->n; i++) {
        const struct route *r = &s->r[i];
        size_t pl = r->prefix_len;
        bool at = pl <= n && memcmp(t, r->prefix, pl) == 0 &&
                  (pl == 0 || pl == n || t[pl] == '/' || t[pl] == '?');
        if (at && (best == NULL || pl > best->prefix_len)) {
            best = r;
        }
    }
    return best;
}

/* The head was accepted: what it says, and what upstream.c takes of it. */
static void check_head(const struct preq *q, const char *req, const struct routes *rs,
                       char *scratch) {
    const sg_fm_h1_request *r = &q->req;
    check(q->head_len > 0 && q->head_len <= PROXY_MAX_HEAD, "a head within its limit");
    check(memcmp(q->in, req, q->head_len) == 0,
          "the head's bytes are never written over");
    check(r->method_len <= PREQ_METHOD_MAX && strlen(q->method) == r->method_len &&
              memcmp(q->method, r->method, r->method_len) == 0,
          "the method goes whole");
    check(r->target >= q->in && r->target + r->target_len <= q->in + q->head_len,
          "the target is a view into the head");
    bool dots = false;
    int rounds = ref_dots(r->target, r->target_len, scratch, &dots);
    check(!dots && rounds <= PREQ_DECODE_ROUNDS, "no accepted path can leave its route");
    check(q->own != PREQ_OWN_NONE || q->route == ref_route(rs, r->target, r->target_len),
          "the route is the longest prefix at a boundary");
    check(r->content_length <= (int64_t)q->max_body, "a Content-Length within max_body");
    check(q->has_body == (r->content_length >= 0 || r->chunked), "a body iff framed");
    const sg_fm_h1_header *e = sg_fm_h1_find_header(r, "expect");
    check(q->expect_continue ==
              (e != NULL && r->minor_version == 1 && e->value_len == 12 &&
               sg_fm_h1_iequal(e->value, 12, "100-continue", 12)),
          "Expect: 100-continue is seen exactly");
    check_lines(q);
}

/* The chunked body after the head of @req[0..@len) decoded in one piece
 * into @c (at most max_body bytes, past them @c->over; @c->p to free):
 * the decoder's return, and in *@done whether it reached the end. */
static long decode_whole(const struct preq *q, const char *req, size_t len,
                         struct collect *c, bool *done) {
    *c = (struct collect){.p = malloc(q->max_body + 1), .cap = q->max_body};
    check(c->p != NULL, "malloc");
    sg_fm_h1_chunked d;
    memset(&d, 0, sizeof(d));
    d.on_data = collect_data;
    d.user_data = c;
    long used = sg_fm_h1_chunked_consume(&d, req + q->head_len, len - q->head_len);
    *done = d.done;
    return used;
}

/* The request is whole: its body is the one the bytes framed. */
static void check_body(const struct preq *q, const char *req, size_t len) {
    const sg_fm_h1_request *r = &q->req;
    const char *body = q->in + q->head_len;
    check(q->body_len <= q->max_body, "a body within max_body");
    if (!r->chunked) {
        size_t want = r->content_length > 0 ? (size_t)r->content_length : 0;
        check(q->body_len == want && q->head_len + want <= len &&
                  memcmp(body, req + q->head_len, want) == 0,
              "a Content-Length body as sent");
        return;
    }
    struct collect c;
    bool done = false;
    long used = decode_whole(q, req, len, &c, &done);
    check(used >= 0 && done && !c.over && c.n == q->body_len &&
              memcmp(c.p, body, c.n) == 0,
          "a chunked body decoded in place as in one piece");
    free(c.p);
}

/* The request failed: for the reasons the bytes give. */
static void check_failed(const struct preq *q, const char *req, size_t len) {
    const int s = q->status;
    check(q->why != NULL, "a failure says why");
    check(s == 400 || s == 404 || s == 413 || s == 431 || s == 501 || s == 503 ||
              s == 505,
          "a failure's status is one of the documented ones");
    if (s == 501 && q->head_len > 0) {
        check(q->req.method_len > PREQ_METHOD_MAX, "501 is a method too long");
    }
    if (s == 413 && !q->req.chunked) {
        check(q->req.content_length > (int64_t)q->max_body,
              "413: Content-Length past max_body");
    }
    if (s == 413 && q->req.chunked) {
        /* the same bytes in one piece decode past max_body */
        struct collect c;
        bool done = false;
        (void)decode_whole(q, req, len, &c, &done);
        check(c.over, "413: a chunked body past max_body");
        free(c.p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) {
        return 0;
    }
    size_t max_body = data[0] < 0x80 ? data[0] : (size_t)(data[0] & 0x7f) << 10;
    size_t want = data[1] == 0xff ? 16384 : 1 + 64 * (size_t)data[1];
    size_t nsizes = (size_t)(data[2] % 16) + 1;
    if (size < 4 + nsizes) {
        return 0;
    }
    const uint8_t *sizes = data + 4;
    static struct routes rs;
    static const char *const prefixes[] = {"/up", "/up/v1", "/a", ""};
    rs.n = (data[3] & 1) ? 4 : 3;
    for (int i = 0; i < rs.n; i++) {
        rs.r[i].name = prefixes[i];
        rs.r[i].prefix = prefixes[i];
        rs.r[i].prefix_len = strlen(prefixes[i]);
    }
    char *req = malloc(EXPANDED_MAX);
    char *scratch = malloc(EXPANDED_MAX);
    check(req != NULL && scratch != NULL, "malloc");
    size_t len = expand(data + 4 + nsizes, size - 4 - nsizes, req);

    struct preq q;
    preq_init(&q, max_body);
    size_t off = 0;
    size_t k = 0;
    bool head_checked = false;
    while (off < len && (q.state == PREQ_HEAD || q.state == PREQ_BODY)) {
        size_t room = 0;
        char *at = preq_room(&q, want, &room);
        if (at == NULL) {
            check(q.state == PREQ_FAILED && q.status == 503, "no room is a 503");
            break;
        }
        check(room >= want, "the room asked for");
        uint8_t sz = sizes[k++ % nsizes];
        size_t take = sz >= 0xC0 ? room : (size_t)(sz % 64) + 1;
        take = take < room ? take : room;
        take = take < len - off ? take : len - off;
        memcpy(at, req + off, take);
        off += take;
        enum preq_state was = q.state;
        enum preq_state st = preq_got(&q, take, &rs);
        check(st == q.state, "the state returned is the state");
        check(st == PREQ_FAILED || st >= was, "the state only moves on");
        if (st == PREQ_HEAD) {
            check(q.in_len <= PROXY_MAX_HEAD, "a head past its limit is refused");
        } else if (st == PREQ_BODY && q.req.chunked) {
            check(q.in_len == q.head_len + q.body_len, "read framing is not kept");
        } else if (st == PREQ_BODY) {
            check(q.in_len - q.head_len < (size_t)q.req.content_length,
                  "a body is read to its length");
        }
        if ((st == PREQ_BODY || st == PREQ_WHOLE) && !head_checked) {
            check_head(&q, req, &rs, scratch);
            head_checked = true;
        }
    }
    if (q.state == PREQ_WHOLE) {
        check_body(&q, req, len);
        check(preq_got(&q, 0, &rs) == PREQ_WHOLE, "whole stays whole");
    } else if (q.state == PREQ_FAILED) {
        check_failed(&q, req, len);
        check(preq_got(&q, 0, &rs) == PREQ_FAILED, "a failure is final");
    }
    preq_free(&q);
    free(req);
    free(scratch);
    return 0;
}
