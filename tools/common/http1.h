/*
 * The HTTP/1.1 request parser the programs share (sg-fakemodel serves with
 * it, sg-proxy reads its clients' requests with it): request head, chunked
 * request bodies, and the helpers a server needs to read a request target.
 *
 * It allocates nothing and returns views into the caller's buffer (the
 * picohttpparser way), and it depends on libc only, so the fuzz targets
 * fuzz/fakemodel_request.c and fuzz/proxy_request.c include http1.c
 * directly.  Its names keep the sg_fm_ prefix of sg-fakemodel, where it
 * was first written.
 */
#ifndef SG_FAKEMODEL_HTTP1_H
#define SG_FAKEMODEL_HTTP1_H

#include <stddef.h>
#include <stdint.h>

/* Limits.  A head larger than this is answered with 431. */
#define SG_FM_H1_MAX_HEAD 32768
#define SG_FM_H1_MAX_HEADERS 64

/* Return codes of the parser; every negative code maps to one status. */
#define SG_FM_H1_INCOMPLETE 0
#define SG_FM_H1_EBAD (-1)      /* 400: malformed */
#define SG_FM_H1_ETOOLARGE (-2) /* 431: head or a header too large / too many */
#define SG_FM_H1_EVERSION (-3)  /* 505: not HTTP/1.x */
#define SG_FM_H1_ENOTIMPL (-4)  /* 501: a transfer coding other than chunked */

typedef struct {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} sg_fm_h1_header;

typedef struct {
    const char *method;
    size_t method_len;
    const char *target; /* origin-form: path plus optional "?query" */
    size_t target_len;
    int minor_version; /* 0 or 1 */
    sg_fm_h1_header headers[SG_FM_H1_MAX_HEADERS];
    size_t num_headers;
    /* Derived from the headers. */
    int64_t content_length; /* -1 when absent */
    int chunked;            /* Transfer-Encoding: chunked */
    int keep_alive;         /* after the response, read the next request */
} sg_fm_h1_request;

/*
 * Finds the end of a request head in buf[0..len).  *scanned carries the
 * position already searched between calls, so a head arriving one byte at a
 * time costs O(n) in total, not O(n^2).  Returns the head length including
 * the blank line, or 0 when it is not complete yet.
 */
size_t sg_fm_h1_find_head_end(const char *buf, size_t len, size_t *scanned);

/*
 * Parses a complete request head of head_len bytes (as returned by
 * sg_fm_h1_find_head_end).  Returns head_len if it succeeds, or one of the
 * negative SG_FM_H1_E* codes.
 */
int sg_fm_h1_parse_request(const char *buf, size_t head_len, sg_fm_h1_request *req);

/* The value of the first header named `name` (case-insensitive), or NULL. */
const sg_fm_h1_header *sg_fm_h1_find_header(const sg_fm_h1_request *req,
                                            const char *name);

/* Incremental decoder for a chunked request body; the data is discarded
 * unless on_data is set. */
typedef struct {
    /* Optional: called with each piece of decoded body (NULL: discarded). */
    void (*on_data)(void *user_data, const char *data, size_t len);
    void *user_data;
    int state;           /* private */
    uint64_t remaining;  /* private: bytes left in the current chunk */
    size_t line_len;     /* private: bytes of the current size/trailer line */
    uint64_t body_bytes; /* decoded payload bytes so far */
    int done;            /* 1 once the last chunk and the trailers were read */
} sg_fm_h1_chunked;

/*
 * Eats up to len bytes of a chunked body.  Returns the number of bytes
 * consumed (less than len only once `done` is set), or SG_FM_H1_EBAD.
 * Running out of input is not an error.
 */
long sg_fm_h1_chunked_consume(sg_fm_h1_chunked *d, const char *buf, size_t len);

/* The reason phrase of an HTTP status ("Gateway Timeout"; "Status" for
 * one it does not name). */
const char *sg_fm_h1_status_text(int status);

/* The status line reason for the parser's codes (400, 431, 505, 501). */
int sg_fm_h1_error_status(int code);

/* Returns 1 if the two byte strings are equal ignoring ASCII case. */
int sg_fm_h1_iequal(const char *a, size_t alen, const char *b, size_t blen);

#endif
