/*
 * The request body scanner (reqbody.h): JSON's grammar followed one byte
 * at a time, keeping only the state a byte needs - the nesting (one bit a
 * level), the key being read (the first SG_FM_BODY_KEY_MAX bytes, decoded),
 * a literal's first bytes and where a number is in its grammar.  A string
 * value (the bulk of any body: the messages) is skipped in a tight loop.
 */
#include "reqbody.h"

#include <string.h>

enum {
    ST_VALUE = 0, /* a value is due (the zero state: the body's start) */
    ST_FIRST,     /* after '[': a value or ']' */
    ST_KEY_FIRST, /* after '{': a key or '}' */
    ST_KEY,       /* after ',' in an object: a key */
    ST_COLON,     /* after a key */
    ST_AFTER,     /* after a value: ',' or the container's end */
    ST_STRING,
    ST_WORD,   /* true, false, null */
    ST_NUMBER, /* lit_len holds where it is in the number's grammar */
    ST_DONE,   /* the top-level object is whole: only whitespace may follow */
    ST_ERROR
};

/* What the value about to start is. */
enum { P_NONE = 0, P_OPTIONS, P_INCLUDE };

/* Where a number is (RFC 8259 §6): -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

static int is_ws(unsigned c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_digit(unsigned c) {
    return c >= '0' && c <= '9';
}

static int top_is_object(const sg_fm_body_scan *s) {
    unsigned d = (unsigned)s->depth - 1;
    return (s->objects[d / 8] >> (d % 8)) & 1;
}

/* A value ended at the current depth. */
static void value_done(sg_fm_body_scan *s) {
    s->state = s->depth == 0 ? ST_DONE : ST_AFTER;
}

static void open_container(sg_fm_body_scan *s, int object, int options) {
    if (s->depth == SG_FM_BODY_MAX_DEPTH) {
        s->state = ST_ERROR;
        return;
    }
    unsigned d = s->depth++;
    uint8_t bit = (uint8_t)(1u << (d % 8));
    s->objects[d / 8] =
        (uint8_t)(object ? s->objects[d / 8] | bit : s->objects[d / 8] & ~bit);
    if (s->depth == 2) {
        s->in_options = (uint8_t)(object && options);
    }
    s->state = object ? ST_KEY_FIRST : ST_FIRST;
}

static void close_container(sg_fm_body_scan *s, int object) {
    if (top_is_object(s) != object) {
        s->state = ST_ERROR;
        return;
    }
    if (s->depth == 2) {
        s->in_options = 0;
    }
    s->depth--;
    value_done(s);
}

static void key_char(sg_fm_body_scan *s, unsigned code) {
    if (s->key_len > SG_FM_BODY_KEY_MAX) {
        return;
    }
    if (code >= 0x80 || s->key_len == SG_FM_BODY_KEY_MAX) {
        s->key_len = SG_FM_BODY_KEY_MAX + 1; /* matches no key sought */
        return;
    }
    s->key[s->key_len++] = (char)code;
}

static int key_is(const sg_fm_body_scan *s, const char *want) {
    return s->key_len == strlen(want) && memcmp(s->key, want, s->key_len) == 0;
}

static void key_done(sg_fm_body_scan *s) {
    s->pending = P_NONE;
    if (s->depth == 1 && key_is(s, "stream_options")) {
        s->pending = P_OPTIONS;
    } else if (s->depth == 2 && s->in_options && key_is(s, "include_usage")) {
        s->pending = P_INCLUDE;
    }
    s->state = ST_COLON;
}

static void value_start(sg_fm_body_scan *s, unsigned c) {
    uint8_t p = s->pending;
    s->pending = P_NONE;
    if (p != P_NONE) {
        s->asks = 0; /* a later stream_options or include_usage replaces it */
    }
    if (c == '{' || c == '[') {
        open_container(s, c == '{', p == P_OPTIONS);
    } else if (c == '"') {
        s->state = ST_STRING;
        s->in_str = 1;
    } else if (c >= 'a' && c <= 'z') {
        s->state = ST_WORD;
        s->lit[0] = (char)c;
        s->lit_len = 1;
        s->lit_wants = p == P_INCLUDE;
    } else if (c == '-' || is_digit(c)) {
        s->state = ST_NUMBER;
        s->lit_len = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
    } else {
        s->state = ST_ERROR;
    }
}

/* A byte of a string; the opening quote came before. */
static void string_byte(sg_fm_body_scan *s, unsigned c) {
    int key = s->in_str == 2;
    if (s->escape == 0) {
        if (c == '"') {
            s->in_str = 0;
            if (key) {
                key_done(s);
            } else {
                value_done(s);
            }
        } else if (c == '\\') {
            s->escape = 1;
        } else if (c < 0x20) {
            s->state = ST_ERROR;
        } else if (key) {
            key_char(s, c);
        }
        return;
    }
    if (s->escape == 1) {
        static const char from[] = "\"\\/bfnrt";
        static const char to[] = "\"\\/\b\f\n\r\t";
        const char *e = c != 0 ? strchr(from, (int)c) : NULL;
        if (c == 'u') {
            s->escape = 2;
            s->uhex = 0;
        } else if (e != NULL) {
            s->escape = 0;
            if (key) {
                key_char(s, (unsigned char)to[e - from]);
            }
        } else {
            s->state = ST_ERROR;
        }
        return;
    }
    /* \uXXXX: four hex digits */
    unsigned v = is_digit(c)                              ? c - '0'
                 : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                          : 16;
    if (v == 16) {
        s->state = ST_ERROR;
        return;
    }
    s->uhex = (uint16_t)(s->uhex * 16 + v);
    if (++s->escape == 6) {
        s->escape = 0;
        if (key) {
            key_char(s, s->uhex);
        }
    }
}

/* A byte after a literal's first: 1 if it was the literal's, 0 if the
 * literal ended before it (the byte is then still to be read). */
static int literal_byte(sg_fm_body_scan *s, unsigned c) {
    if (s->state == ST_WORD) {
        if (c >= 'a' && c <= 'z') {
            if (s->lit_len == sizeof(s->lit)) {
                s->state = ST_ERROR;
            } else {
                s->lit[s->lit_len++] = (char)c;
            }
            return 1;
        }
        int t = s->lit_len == 4 && memcmp(s->lit, "true", 4) == 0;
        if (!t && !(s->lit_len == 4 && memcmp(s->lit, "null", 4) == 0) &&
            !(s->lit_len == 5 && memcmp(s->lit, "false", 5) == 0)) {
            s->state = ST_ERROR;
            return 1;
        }
        if (s->lit_wants) {
            s->asks = (uint8_t)t;
        }
        value_done(s);
        return 0;
    }
    uint8_t n = s->lit_len;
    if (is_digit(c)) {
        if (n == N_ZERO) {
            s->state = ST_ERROR; /* a leading 0 takes no digit after it */
        } else if (n == N_MINUS) {
            s->lit_len = c == '0' ? N_ZERO : N_INT;
        } else if (n == N_DOT) {
            s->lit_len = N_FRAC;
        } else if (n == N_E || n == N_ESIGN) {
            s->lit_len = N_EXP;
        }
        return 1;
    }
    if (c == '.' && (n == N_ZERO || n == N_INT)) {
        s->lit_len = N_DOT;
        return 1;
    }
    if ((c == 'e' || c == 'E') && (n == N_ZERO || n == N_INT || n == N_FRAC)) {
        s->lit_len = N_E;
        return 1;
    }
    if ((c == '+' || c == '-') && n == N_E) {
        s->lit_len = N_ESIGN;
        return 1;
    }
    if (n == N_MINUS || n == N_DOT || n == N_E || n == N_ESIGN) {
        s->state = ST_ERROR; /* the number stops where it may not */
        return 1;
    }
    value_done(s);
    return 0;
}

static void step(sg_fm_body_scan *s, unsigned c) {
    if ((s->state == ST_WORD || s->state == ST_NUMBER) && literal_byte(s, c)) {
        return;
    }
    if (s->state == ST_STRING) {
        string_byte(s, c);
        return;
    }
    if (is_ws(c)) {
        return;
    }
    switch (s->state) {
    case ST_FIRST:
        if (c == ']') {
            close_container(s, 0);
        } else {
            value_start(s, c);
        }
        break;
    case ST_VALUE:
        value_start(s, c);
        break;
    case ST_KEY_FIRST:
    case ST_KEY:
        if (c == '"') {
            s->state = ST_STRING;
            s->in_str = 2;
            s->key_len = 0;
        } else if (c == '}' && s->state == ST_KEY_FIRST) {
            close_container(s, 1);
        } else {
            s->state = ST_ERROR;
        }
        break;
    case ST_COLON:
        s->state = c == ':' ? ST_VALUE : ST_ERROR;
        break;
    case ST_AFTER:
        if (c == ',') {
            s->state = top_is_object(s) ? ST_KEY : ST_VALUE;
        } else if (c == '}' || c == ']') {
            close_container(s, c == '}');
        } else {
            s->state = ST_ERROR;
        }
        break;
    case ST_DONE:
    default:
        s->state = ST_ERROR;
        break;
    }
}

void sg_fm_body_scan_feed(sg_fm_body_scan *s, const char *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    size_t i = 0;
    while (i < n && s->state != ST_ERROR) {
        if (s->state == ST_STRING && s->in_str == 1 && s->escape == 0) {
            /* a string value's plain bytes need nothing: skip them whole */
            while (i < n && b[i] != '"' && b[i] != '\\' && b[i] >= 0x20) {
                i++;
            }
            if (i == n) {
                break;
            }
        }
        step(s, b[i]);
        i++;
    }
}

int sg_fm_body_asks_usage(const sg_fm_body_scan *s) {
    return s->state == ST_DONE && s->asks;
}
