/*
 * HTTP/1.1 request parsing for the programs (RFC 9112), strict where a
 * lenient reading could hide a client bug (Content-Length with
 * Transfer-Encoding, obsolete line folding, control bytes) and lenient where
 * real clients differ harmlessly (bare LF line ends).
 */
#include "http1.h"

#include <string.h>

/* RFC 9110 token characters. */
static int is_tchar(unsigned char ch) {
    if ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
        (ch >= 'A' && ch <= 'Z')) {
        return 1;
    }
    return ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

static unsigned char lower(unsigned char ch) {
    return (ch >= 'A' && ch <= 'Z') ? (unsigned char)(ch + ('a' - 'A')) : ch;
}

int sg_fm_h1_iequal(const char *a, size_t alen, const char *b, size_t blen) {
    if (alen != blen) {
        return 0;
    }
    for (size_t i = 0; i < alen; i++) {
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i])) {
            return 0;
        }
    }
    return 1;
}

size_t sg_fm_h1_find_head_end(const char *buf, size_t len, size_t *scanned) {
    size_t i = *scanned;
    while (i < len) {
        const char *nl = memchr(buf + i, '\n', len - i);
        if (nl == NULL) {
            *scanned = len;
            return 0;
        }
        size_t p = (size_t)(nl - buf);
        /* Resume at this newline next time: its lookahead is not here yet. */
        if (p + 1 >= len) {
            *scanned = p;
            return 0;
        }
        if (buf[p + 1] == '\n') {
            return p + 2;
        }
        if (buf[p + 1] == '\r') {
            if (p + 2 >= len) {
                *scanned = p;
                return 0;
            }
            if (buf[p + 2] == '\n') {
                return p + 3;
            }
        }
        i = p + 1;
    }
    *scanned = len;
    return 0;
}

/* Splits off one line ending in LF or CRLF; the view excludes the ending. */
static int next_line(const char *buf, size_t end, size_t *pos, const char **line,
                     size_t *line_len) {
    const char *nl = memchr(buf + *pos, '\n', end - *pos);
    if (nl == NULL) {
        return -1;
    }
    size_t stop = (size_t)(nl - buf);
    *line = buf + *pos;
    *line_len = stop - *pos;
    if (*line_len > 0 && (*line)[*line_len - 1] == '\r') {
        (*line_len)--;
    }
    *pos = stop + 1;
    return 0;
}

static int parse_request_line(const char *l, size_t n, sg_fm_h1_request *req) {
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)l[i])) {
        i++;
    }
    if (i == 0 || i >= n || l[i] != ' ') {
        return SG_FM_H1_EBAD;
    }
    req->method = l;
    req->method_len = i;
    size_t t = ++i;
    while (i < n && (unsigned char)l[i] > 0x20 && (unsigned char)l[i] < 0x7f) {
        i++;
    }
    if (i == t || i >= n || l[i] != ' ' || l[t] != '/') {
        return SG_FM_H1_EBAD;
    }
    req->target = l + t;
    req->target_len = i - t;
    i++;
    if (n - i != 8 || memcmp(l + i, "HTTP/", 5) != 0 || l[i + 6] != '.' ||
        l[i + 5] < '0' || l[i + 5] > '9' || l[i + 7] < '0' || l[i + 7] > '9') {
        return SG_FM_H1_EBAD;
    }
    if (l[i + 5] != '1') {
        return SG_FM_H1_EVERSION;
    }
    req->minor_version = l[i + 7] == '0' ? 0 : 1;
    return 0;
}

/* Does a comma-separated header value list contain `token`? */
static int has_token(const char *v, size_t n, const char *token) {
    size_t tl = strlen(token);
    size_t i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ',')) {
            i++;
        }
        size_t s = i;
        while (i < n && v[i] != ',') {
            i++;
        }
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t')) {
            e--;
        }
        if (sg_fm_h1_iequal(v + s, e - s, token, tl)) {
            return 1;
        }
    }
    return 0;
}

static int apply_header(sg_fm_h1_request *req, const sg_fm_h1_header *h) {
    if (sg_fm_h1_iequal(h->name, h->name_len, "content-length", 14)) {
        if (h->value_len == 0 || h->value_len > 18) {
            return SG_FM_H1_EBAD;
        }
        int64_t v = 0;
        for (size_t i = 0; i < h->value_len; i++) {
            if (h->value[i] < '0' || h->value[i] > '9') {
                return SG_FM_H1_EBAD;
            }
            v = v * 10 + (h->value[i] - '0');
        }
        /* Repeated Content-Length is only tolerable when the values agree. */
        if (req->content_length >= 0 && req->content_length != v) {
            return SG_FM_H1_EBAD;
        }
        req->content_length = v;
    } else if (sg_fm_h1_iequal(h->name, h->name_len, "transfer-encoding", 17)) {
        if (req->chunked || !sg_fm_h1_iequal(h->value, h->value_len, "chunked", 7)) {
            return SG_FM_H1_ENOTIMPL;
        }
        req->chunked = 1;
    } else if (sg_fm_h1_iequal(h->name, h->name_len, "connection", 10)) {
        if (has_token(h->value, h->value_len, "close")) {
            req->keep_alive = 0;
        } else if (has_token(h->value, h->value_len, "keep-alive")) {
            req->keep_alive = 1;
        }
    }
    return 0;
}

int sg_fm_h1_parse_request(const char *buf, size_t head_len, sg_fm_h1_request *req) {
    memset(req, 0, sizeof(*req));
    req->content_length = -1;
    if (head_len > SG_FM_H1_MAX_HEAD) {
        return SG_FM_H1_ETOOLARGE;
    }
    size_t pos = 0;
    const char *line;
    size_t n;
    if (next_line(buf, head_len, &pos, &line, &n) != 0) {
        return SG_FM_H1_EBAD;
    }
    int rc = parse_request_line(line, n, req);
    if (rc != 0) {
        return rc;
    }
    req->keep_alive = req->minor_version == 1;
    for (;;) {
        if (next_line(buf, head_len, &pos, &line, &n) != 0) {
            return SG_FM_H1_EBAD;
        }
        if (n == 0) {
            break;
        }
        if (req->num_headers == SG_FM_H1_MAX_HEADERS) {
            return SG_FM_H1_ETOOLARGE;
        }
        size_t i = 0;
        while (i < n && is_tchar((unsigned char)line[i])) {
            i++;
        }
        /* No name, whitespace before the colon, or obs-fold: all rejected. */
        if (i == 0 || i >= n || line[i] != ':') {
            return SG_FM_H1_EBAD;
        }
        sg_fm_h1_header *h = &req->headers[req->num_headers++];
        h->name = line;
        h->name_len = i;
        i++;
        while (i < n && (line[i] == ' ' || line[i] == '\t')) {
            i++;
        }
        size_t e = n;
        while (e > i && (line[e - 1] == ' ' || line[e - 1] == '\t')) {
            e--;
        }
        for (size_t k = i; k < e; k++) {
            unsigned char ch = (unsigned char)line[k];
            if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
                return SG_FM_H1_EBAD;
            }
        }
        h->value = line + i;
        h->value_len = e - i;
        rc = apply_header(req, h);
        if (rc != 0) {
            return rc;
        }
    }
    if (pos != head_len) {
        return SG_FM_H1_EBAD;
    }
    /* Both framings at once is the classic request-smuggling shape. */
    if (req->chunked && req->content_length >= 0) {
        return SG_FM_H1_EBAD;
    }
    if (req->chunked && req->minor_version == 0) {
        return SG_FM_H1_EBAD;
    }
    return (int)head_len;
}

const sg_fm_h1_header *sg_fm_h1_find_header(const sg_fm_h1_request *req,
                                            const char *name) {
    size_t nl = strlen(name);
    for (size_t i = 0; i < req->num_headers; i++) {
        if (sg_fm_h1_iequal(req->headers[i].name, req->headers[i].name_len, name, nl)) {
            return &req->headers[i];
        }
    }
    return NULL;
}

enum {
    CH_SIZE = 0,
    CH_EXT,
    CH_SIZE_LF,
    CH_DATA,
    CH_DATA_CR,
    CH_DATA_LF,
    CH_TRAILER_START,
    CH_TRAILER,
    CH_TRAILER_END_LF,
    CH_DONE
};

/* Extensions and trailers are skipped, but only this much of them. */
#define SG_FM_H1_MAX_CHUNK_LINE 4096

static int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    ch = lower(ch);
    if (ch >= 'a' && ch <= 'f') {
        return ch - 'a' + 10;
    }
    return -1;
}

long sg_fm_h1_chunked_consume(sg_fm_h1_chunked *d, const char *buf, size_t len) {
    size_t i = 0;
    while (i < len && d->state != CH_DONE) {
        unsigned char ch = (unsigned char)buf[i];
        switch (d->state) {
        case CH_SIZE: {
            int v = hexval(ch);
            if (v >= 0) {
                /* 2^60 bytes is absurd already; refuse before it can wrap. */
                if (d->remaining >> 56) {
                    return SG_FM_H1_EBAD;
                }
                d->remaining = d->remaining * 16 + (uint64_t)v;
                d->line_len++;
            } else if (d->line_len == 0) {
                return SG_FM_H1_EBAD;
            } else if (ch == ';' || ch == ' ' || ch == '\t') {
                d->state = CH_EXT;
            } else if (ch == '\r') {
                d->state = CH_SIZE_LF;
            } else if (ch == '\n') {
                d->state = d->remaining == 0 ? CH_TRAILER_START : CH_DATA;
            } else {
                return SG_FM_H1_EBAD;
            }
            i++;
            break;
        }
        case CH_EXT:
            if (++d->line_len > SG_FM_H1_MAX_CHUNK_LINE) {
                return SG_FM_H1_EBAD;
            }
            if (ch == '\r') {
                d->state = CH_SIZE_LF;
            } else if (ch == '\n') {
                d->state = d->remaining == 0 ? CH_TRAILER_START : CH_DATA;
            }
            i++;
            break;
        case CH_SIZE_LF:
            if (ch != '\n') {
                return SG_FM_H1_EBAD;
            }
            d->state = d->remaining == 0 ? CH_TRAILER_START : CH_DATA;
            d->line_len = 0;
            i++;
            break;
        case CH_DATA: {
            uint64_t take = len - i;
            if (take > d->remaining) {
                take = d->remaining;
            }
            if (d->on_data != NULL && take > 0) {
                d->on_data(d->user_data, buf + i, (size_t)take);
            }
            d->remaining -= take;
            d->body_bytes += take;
            i += (size_t)take;
            if (d->remaining == 0) {
                d->state = CH_DATA_CR;
            }
            break;
        }
        case CH_DATA_CR:
            if (ch == '\r') {
                d->state = CH_DATA_LF;
            } else if (ch == '\n') {
                d->state = CH_SIZE;
                d->line_len = 0;
            } else {
                return SG_FM_H1_EBAD;
            }
            i++;
            break;
        case CH_DATA_LF:
            if (ch != '\n') {
                return SG_FM_H1_EBAD;
            }
            d->state = CH_SIZE;
            d->line_len = 0;
            i++;
            break;
        case CH_TRAILER_START:
            d->line_len = 0;
            if (ch == '\r') {
                d->state = CH_TRAILER_END_LF;
            } else if (ch == '\n') {
                d->state = CH_DONE;
            } else {
                d->state = CH_TRAILER;
                d->line_len = 1;
            }
            i++;
            break;
        case CH_TRAILER:
            if (++d->line_len > SG_FM_H1_MAX_CHUNK_LINE) {
                return SG_FM_H1_EBAD;
            }
            if (ch == '\n') {
                d->state = CH_TRAILER_START;
            }
            i++;
            break;
        case CH_TRAILER_END_LF:
            if (ch != '\n') {
                return SG_FM_H1_EBAD;
            }
            d->state = CH_DONE;
            i++;
            break;
        default:
            return SG_FM_H1_EBAD;
        }
    }
    if (d->state == CH_DONE) {
        d->done = 1;
    }
    return (long)i;
}

int sg_fm_h1_error_status(int code) {
    switch (code) {
    case SG_FM_H1_ETOOLARGE:
        return 431;
    case SG_FM_H1_EVERSION:
        return 505;
    case SG_FM_H1_ENOTIMPL:
        return 501;
    case SG_FM_H1_EBAD:
    default:
        return 400;
    }
}

const char *sg_fm_h1_status_text(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 529:
        return "Overloaded";
    default:
        return "Status";
    }
}
