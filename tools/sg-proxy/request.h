/*
 * request.h - one client request, read from bytes with no socket in
 * sight: conn.c gives it what recv() read, the fuzz target
 * fuzz/proxy_request.c the same bytes split anywhere.
 *
 * The head (at most PROXY_MAX_HEAD bytes, SG_FM_H1_MAX_HEADERS fields) is
 * parsed and checked as soon as it is whole - the method, the path, the
 * route, the body's announced length - so that a request that will not be
 * served is answered before its body is read, and Expect: 100-continue is
 * answered only for one that will be.  Then the body, by Content-Length,
 * or chunked and decoded in place in the buffer it arrived in, at most
 * max_body bytes: a request costs its head, its body and one read.
 *
 * What comes out is the route, the method, the body and the header lines
 * for libcurl (upstream.c), or an HTTP status and its reason.
 */
#ifndef SG_PROXY_REQUEST_H
#define SG_PROXY_REQUEST_H

#include "proxy.h"

/* The longest method forwarded: the library's (the retry decision and the
 * report hold the method whole). */
#define PREQ_METHOD_MAX SG_OP_METHOD_MAX

enum preq_state {
    PREQ_HEAD,   /* the head is not whole yet */
    PREQ_BODY,   /* the head is whole and checked; the body is read */
    PREQ_WHOLE,  /* the request is whole: it may be served */
    PREQ_FAILED, /* answer @status with @why; read nothing more */
};

/* The paths the proxy answers itself (GET, the path exactly, any query):
 * never forwarded, whatever the routes. */
enum preq_own {
    PREQ_OWN_NONE,
    PREQ_OWN_METRICS, /* /metrics: Prometheus text */
    PREQ_OWN_HEALTHZ, /* /healthz: live */
    PREQ_OWN_READYZ,  /* /readyz: routes loaded and not draining */
};

struct preq {
    /* in[0..head_len): the head, which the views of @req point into;
     * in[head_len..head_len+body_len): the body, decoded; then what was
     * read and not decoded yet.  Private but for reading. */
    char *in;
    size_t in_len, in_cap;
    size_t head_len, body_len;
    size_t max_body;
    size_t scanned; /* private: how far the head's end was looked for */
    size_t raw;     /* private: where the undecoded chunked bytes start */
    bool over;      /* private: the chunked body passed max_body */
    enum preq_state state;
    sg_fm_h1_request req;     /* once the head is whole */
    sg_fm_h1_chunked chunked; /* private */
    /* once the head is whole and checked */
    char method[PREQ_METHOD_MAX + 1];
    const struct route *route; /* NULL for the proxy's own path */
    enum preq_own own;         /* a path of the proxy's own, or none */
    bool has_body;             /* framed by Content-Length or chunked */
    bool expect_continue;      /* an HTTP/1.1 Expect: 100-continue */
    /* once failed */
    int status;
    const char *why;
    bool all_read; /* the head and the whole body it announced are in */
};

void preq_init(struct preq *q, size_t max_body);
void preq_free(struct preq *q);

/* Where the next read goes: room for at least @want bytes, in *@room.
 * The buffer may move (the head's views move with it).  NULL, failed
 * with 503, when the memory is not there. */
char *preq_room(struct preq *q, size_t want, size_t *room);

/* The request is whole: its buffer shrinks to what it holds (it stays
 * for the operation's life, and a stream may be open for minutes).  The
 * buffer may move, as in preq_room(). */
void preq_fit(struct preq *q);

/* @n bytes were read into the room: parsed as far as they go.  Returns
 * the state (a failure is final: @status and @why say what to answer).
 * The head is routed by @routes. */
enum preq_state preq_got(struct preq *q, size_t n, const struct routes *routes);

/* One header line for libcurl's list: "Name: value", or "Name;" for an
 * empty value (libcurl drops a header whose value is blank, and sends one
 * written with a ';' empty).  @line's return is passed back; -1 when the
 * memory is not there. */
typedef int (*preq_line_fn)(void *ud, const char *line);
int preq_header_line(const sg_fm_h1_header *h, preq_line_fn line, void *ud);

/* Every header line of the upstream request: the client's headers less
 * the hop-by-hop ones (the fixed ones, those its Connection header names)
 * and those the proxy or the library writes itself, then an empty
 * "Accept:", "Content-Type:" and "Expect:" where the client's did not go:
 * libcurl would send its own defaults for them.  Returns 0, or the first
 * non-zero return of @line. */
int preq_header_lines(const struct preq *q, preq_line_fn line, void *ud);

/* true when @h is not forwarded: hop-by-hop (RFC 9110 §7.6.1, or named by
 * a Connection header of @req), or the proxy's or the library's to write. */
bool preq_hop_by_hop(const sg_fm_h1_request *req, const sg_fm_h1_header *h);

/* true when the path of @t[0..@len) (up to its query) has a segment that
 * could leave the route: "." or "..", once percent-decoded (as often as
 * it decodes, at most PREQ_DECODE_ROUNDS times: past that it is refused),
 * with "\" read as "/", each segment read up to a ';' (path parameters),
 * '?', '#' or NUL. */
#define PREQ_DECODE_ROUNDS 8
bool preq_dot_segment(const char *t, size_t len);

/* The route with the longest prefix @target[0..@len) starts with (at a
 * '/' or '?' boundary), or NULL. */
const struct route *routes_match(const struct routes *s, const char *target, size_t len);

/* Room for @need bytes in *@buf (capacity *@cap), doubling from 4 KiB:
 * false when the memory is not there. */
bool grow(char **buf, size_t *cap, size_t need);

#endif
