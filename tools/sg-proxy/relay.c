/*
 * relay.c - the committed attempt's bytes on their way to the client
 * (relay.h).
 */
#include <stdlib.h>
#include <string.h>

#include "relay.h"

void relay_init(struct relay *r, sg_format format) {
    memset(r, 0, sizeof(*r));
    r->format = format;
}

void relay_free(struct relay *r) {
    free(r->buf);
    free(r->data);
    memset(r, 0, sizeof(*r));
}

/* @p[0..@n) into *@b at @len, grown (doubling) as needed: false when the
 * memory is not there. */
static bool append(char **b, size_t *cap, size_t len, const char *p, size_t n) {
    if (len + n > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < len + n) {
            c *= 2;
        }
        char *nb = realloc(*b, c);
        if (nb == NULL) {
            return false;
        }
        *b = nb;
        *cap = c;
    }
    memcpy(*b + len, p, n);
    return true;
}

/* What was handed over leaves the buffer's front when it is at least as
 * much as what is left (so each byte moves at most once, whatever the
 * events' sizes) or when the read would not fit otherwise. */
static void compact(struct relay *r, size_t n) {
    if (r->off == 0 || (r->off < r->len - r->off && r->len + n <= r->cap)) {
        return;
    }
    memmove(r->buf, r->buf + r->off, r->len - r->off);
    r->len -= r->off;
    r->rel -= r->off;
    r->off = 0;
}

bool relay_add(struct relay *r, const void *p, size_t n) {
    if (n == 0) {
        return true;
    }
    compact(r, n);
    if (!append(&r->buf, &r->cap, r->len, p, n)) {
        return false;
    }
    r->len += n;
    return true;
}

const char *relay_held(const struct relay *r, size_t *n) {
    *n = r->len - r->rel;
    return r->buf != NULL ? r->buf + r->rel : NULL;
}

const char *relay_out(const struct relay *r, size_t *n) {
    *n = r->rel - r->off;
    return r->buf != NULL ? r->buf + r->off : NULL;
}

void relay_release(struct relay *r, size_t n) {
    r->rel += n;
}

void relay_discard(struct relay *r) {
    r->len = r->rel;
}

void relay_drop(struct relay *r, size_t n) {
    r->off += n;
    if (r->off == r->len) {
        /* nothing left: the buffer goes, and the next read starts a new
         * one - an open stream that waits for its upstream holds none
         * (one that paused after a 16 KiB read would keep that much for
         * as long as it waits) */
        free(r->buf);
        r->buf = NULL;
        r->off = r->rel = r->len = r->cap = 0;
    }
}

/* Where a read of buf stands: past a byte order mark or not, and whether
 * the line before ended with a CR whose LF may come next. */
struct pos {
    size_t at;
    bool bom_done;
    bool skip_lf;
};

/* The next whole line from @p (its terminator not in it; NDJSON: nor a
 * CR before it), @p moved past it: false when no whole line is left.  The
 * standard's rules, as the library's splitter reads them: a UTF-8 byte
 * order mark first in the stream is dropped; an SSE line ends with CRLF,
 * LF or a bare CR (one last in buf ends its line, and an LF first in the
 * bytes after it is that line's too); an NDJSON line with LF. */
static bool next_line(const struct relay *r, struct pos *p, const char **line,
                      size_t *n) {
    const char *b = r->buf;
    if (!p->bom_done) {
        static const char bom[3] = {'\xEF', '\xBB', '\xBF'};
        size_t k = 0;
        while (k < 3 && p->at + k < r->len && b[p->at + k] == bom[k]) {
            k++;
        }
        if (k < 3 && p->at + k == r->len) {
            return false; /* a mark, or not: the next bytes say */
        }
        p->at += k == 3 ? 3 : 0;
        p->bom_done = true;
    }
    if (p->skip_lf) {
        if (p->at == r->len) {
            return false;
        }
        p->at += b[p->at] == '\n';
        p->skip_lf = false;
    }
    const char *s = b + p->at;
    const char *e = memchr(s, '\n', r->len - p->at);
    if (r->format != SG_FORMAT_NDJSON) {
        const char *cr = memchr(s, '\r', (size_t)((e != NULL ? e : b + r->len) - s));
        e = cr != NULL ? cr : e;
    }
    if (e == NULL) {
        return false;
    }
    *line = s;
    *n = (size_t)(e - s);
    p->at = (size_t)(e - b) + 1;
    if (*e == '\r') {
        p->skip_lf = p->at == r->len; /* its LF, if any, is still to come */
        p->at += p->at < r->len && b[p->at] == '\n';
    } else if (r->format == SG_FORMAT_NDJSON && *n > 0 && s[*n - 1] == '\r') {
        (*n)--;
    }
    return true;
}

enum field { F_BLANK, F_COMMENT, F_DATA, F_EVENT, F_KNOWN, F_OTHER };

/* What an SSE line is, as the library's parser takes it (a colon looked
 * for in the first six bytes; one space after it dropped), and its
 * value. */
static enum field field_of(const char *l, size_t n, const char **v, size_t *vn) {
    if (n == 0) {
        return F_BLANK;
    }
    if (l[0] == ':') {
        return F_COMMENT;
    }
    const char *colon = memchr(l, ':', n < 6 ? n : 6);
    if (colon == NULL && n > 5) {
        return F_OTHER;
    }
    size_t fl = colon != NULL ? (size_t)(colon - l) : n;
    *v = colon != NULL ? colon + 1 : l + n;
    *vn = n - (size_t)(*v - l);
    if (*vn > 0 && **v == ' ') {
        (*v)++;
        (*vn)--;
    }
    if (fl == 4 && memcmp(l, "data", 4) == 0) {
        return F_DATA;
    }
    if (fl == 5 && memcmp(l, "event", 5) == 0) {
        return F_EVENT;
    }
    if ((fl == 5 && memcmp(l, "retry", 5) == 0) || (fl == 2 && memcmp(l, "id", 2) == 0)) {
        return F_KNOWN;
    }
    return F_OTHER;
}

/* One event (SSE: one the standard dispatches, its data not empty) or
 * line (NDJSON: not empty), as the library delivers it. */
struct event {
    const char *type; /* SSE: "message" unless named; NDJSON: "" */
    size_t type_len;
    const char *data;
    size_t data_len;
    size_t end; /* where it ends in buf */
};

/* SSE lines outside any field (other_json: a JSON object a server wrote
 * bare into the stream), joined by LF as the library gathers them. */
struct other {
    char *text;
    size_t len, cap;
    size_t end; /* where they end in buf (a blank line after them too) */
};

static bool gather(struct other *o, const char *l, size_t n, size_t end) {
    if (o->len > 0) {
        if (!append(&o->text, &o->cap, o->len, "\n", 1)) {
            return false;
        }
        o->len++;
    }
    if (!append(&o->text, &o->cap, o->len, l, n)) {
        return false;
    }
    o->len += n;
    o->end = end;
    return true;
}

/* An event's data line @v: the first stays a view into buf; the next
 * ones are joined to it by LF in r->data.  false: out of memory. */
static bool add_data(struct relay *r, struct event *ev, bool more, const char *v,
                     size_t vn) {
    if (!more) {
        ev->data = v;
        ev->data_len = vn;
        return true;
    }
    if (ev->data != r->data &&
        !append(&r->data, &r->data_cap, 0, ev->data, ev->data_len)) {
        return false;
    }
    if (!append(&r->data, &r->data_cap, ev->data_len, "\n", 1) ||
        !append(&r->data, &r->data_cap, ev->data_len + 1, v, vn)) {
        return false;
    }
    ev->data = r->data;
    ev->data_len += 1 + vn;
    return true;
}

/* The next event from @p into @ev: 1, or 0 when none is whole yet, or -1
 * when the memory for its data ran out.  With @o, the lines outside any
 * field are gathered there. */
static int next_event(struct relay *r, struct pos *p, struct event *ev, struct other *o) {
    const char *l;
    size_t n;
    bool has_data = false;
    *ev = (struct event){"message", 7, NULL, 0, 0};
    while (next_line(r, p, &l, &n)) {
        if (r->format == SG_FORMAT_NDJSON) {
            if (n > 0) {
                *ev = (struct event){"", 0, l, n, p->at};
                return 1;
            }
            continue;
        }
        const char *v = NULL;
        size_t vn = 0;
        switch (field_of(l, n, &v, &vn)) {
        case F_BLANK:
            if (has_data) {
                ev->end = p->at;
                return 1;
            }
            ev->type = "message"; /* no data: no event, its type forgotten */
            ev->type_len = 7;
            if (o != NULL && o->len > 0) {
                o->end = p->at; /* the blank line closes the bare lines too */
            }
            break;
        case F_DATA:
            if (!add_data(r, ev, has_data, v, vn)) {
                return -1;
            }
            has_data = true;
            break;
        case F_EVENT:
            ev->type = vn > 0 ? v : "message";
            ev->type_len = vn > 0 ? vn : 7;
            break;
        case F_OTHER:
            if (o != NULL && !gather(o, l, n, p->at)) {
                return -1;
            }
            break;
        default: /* a comment, id, retry */
            break;
        }
    }
    return 0;
}

/* Read from where the last release ended (or the stream's start), the
 * first event that is @item ends where its bytes end.  Every event before
 * it is one the library delivered no item for (a comment, a keepalive, a
 * skipped type, held metadata), so it goes too. */
size_t relay_item(struct relay *r, const sg_item *item) {
    if (r->format == SG_FORMAT_EVENTSTREAM) {
        return 0; /* passed on as it came (relay_messages) */
    }
    if (!r->token_seen && item->kind == SG_ITEM_META) {
        return 0; /* held metadata: it goes with the first token */
    }
    r->token_seen = true;
    struct pos p = {r->rel, r->bom_done, r->skip_lf};
    struct event ev;
    while (next_event(r, &p, &ev, NULL) == 1) {
        bool type = r->format == SG_FORMAT_NDJSON ||
                    (ev.type_len == item->event_len &&
                     memcmp(ev.type, item->event, ev.type_len) == 0);
        if (type && ev.data_len == item->data_len &&
            memcmp(ev.data, item->data, ev.data_len) == 0) {
            r->bom_done = p.bom_done;
            r->skip_lf = p.skip_lf;
            return ev.end - r->rel;
        }
    }
    return 0; /* not whole yet, or not found: it waits for a later item */
}

/* Whether the profile's classifier calls this an in-band error. */
static bool is_error(const sg_stream_config *cfg, const char *type, size_t type_len,
                     const char *data, size_t data_len) {
    sg_item it = {type, type_len, data, data_len, "", 0, 0, 0, SG_ITEM_TOKEN};
    return sg_stream_config_classify(cfg, &it, NULL) == SG_ITEM_ERROR;
}

/* The library reads no further than the error: every event before it is
 * one it delivered no item for, and the error is the first event (or run
 * of bare lines, settled as the library settles them: when an event
 * follows, or at the body's end) its classifier calls one. */
size_t relay_error_end(struct relay *r, const sg_stream_config *cfg) {
    if (r->format == SG_FORMAT_EVENTSTREAM) {
        return 0; /* (without a classifier nothing below is an error) */
    }
    struct pos p = {r->rel, r->bom_done, r->skip_lf};
    struct other o = {NULL, 0, 0, 0};
    struct other *op =
        sg_stream_config_other_json(cfg) && r->format == SG_FORMAT_SSE ? &o : NULL;
    struct event ev;
    size_t end = 0;
    int k;
    while (end == 0 && (k = next_event(r, &p, &ev, op)) == 1) {
        if (o.len > 0) {
            end = is_error(cfg, "", 0, o.text, o.len) ? o.end : 0;
            o.len = 0;
        }
        if (end == 0 && !sg_stream_config_skips(cfg, ev.type, ev.type_len) &&
            is_error(cfg, ev.type, ev.type_len, ev.data, ev.data_len)) {
            end = ev.end;
        }
    }
    if (end == 0 && k == 0 && o.len > 0 && is_error(cfg, "", 0, o.text, o.len)) {
        end = o.end;
    }
    free(o.text);
    return end > 0 ? end - r->rel : 0;
}

/* By each prelude's total length (the library checks the rest): a stream
 * cut inside a message keeps that half back, so the exception that ends
 * it is read as one.  A length that cannot be a message is held too - the
 * library fails the stream, and the exception follows what went before. */
size_t relay_messages(const struct relay *r) {
    size_t off = r->rel;
    while (r->len - off >= 16) {
        const unsigned char *q = (const unsigned char *)r->buf + off;
        size_t total = (size_t)q[0] << 24 | (size_t)q[1] << 16 | (size_t)q[2] << 8 | q[3];
        if (total < 16 || r->len - off < total) {
            break;
        }
        off += total;
    }
    return off - r->rel;
}
