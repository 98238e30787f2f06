/*
 * include_usage.c - where "stream_options":{"include_usage":true} goes in
 * a request body (include_usage.h).
 *
 * The body is whole in memory (the proxy reads a request whole before it
 * starts its operation), so this is a recursive-descent reader of JSON's
 * grammar over it, keeping only what the edit needs: whether the last
 * top-level "stream" is true, where the top-level object's last member
 * ends, and of the last top-level "stream_options" its kind, where it
 * starts, where its last member ends and whether it has "include_usage".
 * The same pass finds the last top-level "model" string, which a
 * fallback's model override replaces (body_model).  A body that is not
 * JSON is never edited, so the reader is strict: a string's bytes must be
 * UTF-8 and its escapes JSON's, a number RFC 8259's.  One pass, no
 * allocation; recursion bounded by IU_MAX_DEPTH.
 */
#include "include_usage.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the object being read is. */
enum role { R_PLAIN, R_TOP, R_OPTIONS };

/* The kind of the last top-level stream_options. */
enum { O_NONE, O_NULL, O_OBJECT, O_OTHER };

/* A key as far as it is compared: the keys sought are ASCII and short. */
#define KEY_MAX 16

struct scan {
    const unsigned char *p;
    size_t len;
    size_t i;
    unsigned depth;
    bool stream;                /* the last top-level "stream" is the literal true */
    size_t top_end;             /* after the top-level object's last member */
    int opt;                    /* the last top-level stream_options: O_* */
    size_t opt_at;              /* where its value starts */
    size_t opt_end;             /* an object: after its last member, or its '{' */
    bool opt_empty;             /* an object with no member */
    bool opt_has;               /* an object with "include_usage" */
    bool model;                 /* the last top-level "model" is a string: */
    size_t model_at, model_end; /* its literal, quotes included */
};

static bool value(struct scan *s, enum role role);

static void ws(struct scan *s) {
    while (s->i < s->len && (s->p[s->i] == ' ' || s->p[s->i] == '\t' ||
                             s->p[s->i] == '\n' || s->p[s->i] == '\r')) {
        s->i++;
    }
}

static bool at(const struct scan *s, unsigned char c) {
    return s->i < s->len && s->p[s->i] == c;
}

static bool in(unsigned char c, unsigned char lo, unsigned char hi) {
    return c >= lo && c <= hi;
}

/* The length of the well-formed UTF-8 sequence at @p (@n bytes left), 0
 * when it is not one (RFC 3629: no overlong form, no surrogate, nothing
 * past U+10FFFF). */
static size_t utf8(const unsigned char *p, size_t n) {
    unsigned char c = p[0];
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    size_t k;
    if (in(c, 0xC2, 0xDF)) {
        k = 2;
    } else if (in(c, 0xE0, 0xEF)) {
        k = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (in(c, 0xF0, 0xF4)) {
        k = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (n < k || !in(p[1], lo, hi)) {
        return 0;
    }
    for (size_t j = 2; j < k; j++) {
        if (!in(p[j], 0x80, 0xBF)) {
            return 0;
        }
    }
    return k;
}

static int hex(unsigned char c) {
    return in(c, '0', '9')   ? c - '0'
           : in(c, 'a', 'f') ? c - 'a' + 10
           : in(c, 'A', 'F') ? c - 'A' + 10
                             : -1;
}

/* Appends the decoded byte @c to @key (NULL: not kept); a key longer than
 * KEY_MAX, or with a character outside ASCII, matches nothing. */
static void key_put(char *key, size_t *klen, unsigned code) {
    if (key == NULL || *klen > KEY_MAX) {
        return;
    }
    if (code > 0x7f || *klen == KEY_MAX) {
        *klen = KEY_MAX + 1;
        return;
    }
    key[(*klen)++] = (char)code;
}

/* An escape after its '\': false when it is not one of JSON's. */
static bool escape(struct scan *s, char *key, size_t *klen) {
    static const char from[] = "\"\\/bfnrt";
    static const char to[] = "\"\\/\b\f\n\r\t";
    if (s->i >= s->len) {
        return false;
    }
    unsigned char c = s->p[s->i++];
    const char *e = c != 0 ? strchr(from, c) : NULL;
    if (e != NULL) {
        key_put(key, klen, (unsigned char)to[e - from]);
        return true;
    }
    if (c != 'u' || s->len - s->i < 4) {
        return false;
    }
    unsigned code = 0;
    for (int j = 0; j < 4; j++) {
        int h = hex(s->p[s->i++]);
        if (h < 0) {
            return false;
        }
        code = code << 4 | (unsigned)h;
    }
    key_put(key, klen, code); /* past ASCII: matches nothing, whatever it is */
    return true;
}

/* A string at its '"'; its decoded start into @key (KEY_MAX bytes, NULL:
 * not kept) with its length in *@klen. */
static bool string(struct scan *s, char *key, size_t *klen) {
    if (!at(s, '"')) {
        return false;
    }
    s->i++;
    *klen = 0;
    while (s->i < s->len) {
        unsigned char c = s->p[s->i];
        if (c == '"') {
            s->i++;
            return true;
        }
        if (c < 0x20) {
            return false;
        }
        if (c == '\\') {
            s->i++;
            if (!escape(s, key, klen)) {
                return false;
            }
        } else if (c < 0x80) {
            key_put(key, klen, c);
            s->i++;
        } else {
            size_t k = utf8(s->p + s->i, s->len - s->i);
            if (k == 0) {
                return false;
            }
            key_put(key, klen, 0x80); /* not ASCII */
            s->i += k;
        }
    }
    return false;
}

static size_t digits(struct scan *s) {
    size_t n = 0;
    while (s->i < s->len && in(s->p[s->i], '0', '9')) {
        s->i++;
        n++;
    }
    return n;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool number(struct scan *s) {
    if (at(s, '-')) {
        s->i++;
    }
    if (at(s, '0')) {
        s->i++;
    } else if (digits(s) == 0) {
        return false;
    }
    if (at(s, '.')) {
        s->i++;
        if (digits(s) == 0) {
            return false;
        }
    }
    if (at(s, 'e') || at(s, 'E')) {
        s->i++;
        if (at(s, '+') || at(s, '-')) {
            s->i++;
        }
        if (digits(s) == 0) {
            return false;
        }
    }
    return true;
}

static bool word(struct scan *s, const char *w) {
    size_t n = strlen(w);
    if (s->len - s->i < n || memcmp(s->p + s->i, w, n) != 0) {
        return false;
    }
    s->i += n;
    return true;
}

static bool is_key(const char *key, size_t klen, const char *want) {
    return klen == strlen(want) && memcmp(key, want, klen) == 0;
}

/* One member's value, by what its key is to the edit. */
static bool member(struct scan *s, enum role role, const char *key, size_t klen) {
    size_t v = s->i;
    if (role == R_TOP && is_key(key, klen, "stream")) {
        if (!value(s, R_PLAIN)) {
            return false;
        }
        s->stream = s->p[v] == 't'; /* the only value starting so is true */
        return true;
    }
    if (role == R_TOP && is_key(key, klen, "model")) {
        if (!value(s, R_PLAIN)) {
            return false;
        }
        /* the last one counts: a string, or nothing to replace */
        s->model = s->p[v] == '"';
        s->model_at = v;
        s->model_end = s->i;
        return true;
    }
    if (role == R_TOP && is_key(key, klen, "stream_options")) {
        /* the last one counts: what an earlier one said goes */
        s->opt = at(s, '{') ? O_OBJECT : at(s, 'n') ? O_NULL : O_OTHER;
        s->opt_at = v;
        s->opt_has = false;
        s->opt_empty = false;
        return value(s, s->opt == O_OBJECT ? R_OPTIONS : R_PLAIN);
    }
    if (role == R_OPTIONS && is_key(key, klen, "include_usage")) {
        s->opt_has = true;
    }
    return value(s, R_PLAIN);
}

/* After a container's '{' or '[' (@close its end), or after one of its
 * members: true with *@more when another member follows (after its ','),
 * with !*@more when the container ended; false when neither is next. */
static bool next(struct scan *s, unsigned char close, bool first, bool *more) {
    ws(s);
    *more = false;
    if (at(s, close)) {
        s->i++;
        return true;
    }
    if (first) {
        *more = true;
        return true;
    }
    if (!at(s, ',')) {
        return false;
    }
    s->i++;
    ws(s);
    *more = true;
    return true;
}

static bool object(struct scan *s, enum role role) {
    bool more;
    s->i++; /* '{' */
    if (!next(s, '}', true, &more)) {
        return false;
    }
    if (!more && role == R_OPTIONS) {
        s->opt_empty = true;
        s->opt_end = s->i - 1; /* at its '}' */
    }
    while (more) {
        char key[KEY_MAX];
        size_t klen;
        if (!string(s, role != R_PLAIN ? key : NULL, &klen)) {
            return false;
        }
        ws(s);
        if (!at(s, ':')) {
            return false;
        }
        s->i++;
        ws(s);
        if (!member(s, role, key, klen)) {
            return false;
        }
        if (role == R_TOP) {
            s->top_end = s->i;
        } else if (role == R_OPTIONS) {
            s->opt_end = s->i;
        }
        if (!next(s, '}', false, &more)) {
            return false;
        }
    }
    return true;
}

static bool array(struct scan *s) {
    bool more;
    s->i++; /* '[' */
    if (!next(s, ']', true, &more)) {
        return false;
    }
    while (more) {
        if (!value(s, R_PLAIN) || !next(s, ']', false, &more)) {
            return false;
        }
    }
    return true;
}

static bool value(struct scan *s, enum role role) {
    if (s->i >= s->len) {
        return false;
    }
    size_t klen;
    bool ok;
    switch (s->p[s->i]) {
    case '{':
    case '[':
        if (s->depth == IU_MAX_DEPTH) {
            return false;
        }
        s->depth++;
        ok = s->p[s->i] == '{' ? object(s, role) : array(s);
        s->depth--;
        return ok;
    case '"':
        return string(s, NULL, &klen);
    case 't':
        return word(s, "true");
    case 'f':
        return word(s, "false");
    case 'n':
        return word(s, "null");
    default:
        return number(s);
    }
}

/* @body[0..@len) read whole into *@s: false when it is not one JSON
 * text (nothing but whitespace around it). */
static bool scan_body(struct scan *s, const char *body, size_t len) {
    memset(s, 0, sizeof(*s));
    s->p = (const unsigned char *)body;
    s->len = len;
    ws(s);
    if (!value(s, R_TOP)) {
        return false;
    }
    ws(s);
    return s->i == len;
}

bool include_usage_edit(const char *body, size_t len, struct iu_edit *e) {
    struct scan s;
    if (!scan_body(&s, body, len) || !s.stream) {
        return false; /* not one JSON text, or no stream */
    }
    e->cut = 0;
    switch (s.opt) {
    case O_NONE:
        e->at = s.top_end;
        e->text = ",\"stream_options\":{\"include_usage\":true}";
        return true;
    case O_NULL:
        e->at = s.opt_at;
        e->cut = 4;
        e->text = "{\"include_usage\":true}";
        return true;
    case O_OBJECT:
        e->at = s.opt_end;
        e->text = s.opt_empty ? "\"include_usage\":true" : ",\"include_usage\":true";
        return !s.opt_has;
    default:
        return false; /* not an object: the upstream's to refuse */
    }
}

int body_model(const char *body, size_t len, struct iu_edit *e) {
    struct scan s;
    if (!scan_body(&s, body, len)) {
        return -1;
    }
    if (!s.model) {
        return 0;
    }
    e->at = s.model_at;
    e->cut = s.model_end - s.model_at;
    e->text = NULL;
    return 1;
}

static int hex4(const char *p) {
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) {
            return -1;
        }
        v = v << 4 | d;
    }
    return v;
}

size_t body_json_text(const char *lit, size_t n, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 1; i + 1 < n; i++) {
        unsigned long cp = (unsigned char)lit[i];
        if (lit[i] == '\\') {
            char e = i + 2 < n ? lit[++i] : '\0';
            static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
            const char *k = e != '\0' ? strchr(from, e) : NULL;
            if (k != NULL) {
                cp = (unsigned char)to[k - from];
            } else if (e == 'u' && i + 5 < n) {
                int hi = hex4(lit + i + 1), lo = -1;
                i += 4;
                if (hi >= 0xD800 && hi <= 0xDBFF && i + 7 < n && lit[i + 1] == '\\' &&
                    lit[i + 2] == 'u') {
                    lo = hex4(lit + i + 3);
                    i += 6;
                }
                if (hi < 0 || (hi >= 0xDC00 && hi <= 0xDFFF) ||
                    (hi >= 0xD800 && hi <= 0xDBFF && (lo < 0xDC00 || lo > 0xDFFF))) {
                    return 0;
                }
                cp = hi >= 0xD800 && hi <= 0xDBFF
                         ? 0x10000 + (((unsigned long)hi - 0xD800) << 10) +
                               ((unsigned long)lo - 0xDC00)
                         : (unsigned long)hi;
                /* UTF-8 */
                char u[4];
                size_t ul = 0;
                if (cp < 0x80) {
                    u[ul++] = (char)cp;
                } else if (cp < 0x800) {
                    u[ul++] = (char)(0xC0 | cp >> 6);
                    u[ul++] = (char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    u[ul++] = (char)(0xE0 | cp >> 12);
                    u[ul++] = (char)(0x80 | (cp >> 6 & 0x3F));
                    u[ul++] = (char)(0x80 | (cp & 0x3F));
                } else {
                    u[ul++] = (char)(0xF0 | cp >> 18);
                    u[ul++] = (char)(0x80 | (cp >> 12 & 0x3F));
                    u[ul++] = (char)(0x80 | (cp >> 6 & 0x3F));
                    u[ul++] = (char)(0x80 | (cp & 0x3F));
                }
                if (cp == 0 || o + ul >= cap) {
                    return 0;
                }
                memcpy(out + o, u, ul);
                o += ul;
                continue;
            } else {
                return 0;
            }
        }
        if (cp == 0 || o + 1 >= cap) {
            return 0;
        }
        out[o++] = (char)cp;
    }
    out[o] = '\0';
    return o;
}

size_t body_model_name(const char *body, size_t len, char *out, size_t cap) {
    struct iu_edit e;
    if (cap == 0 || body_model(body, len, &e) != 1) {
        return 0;
    }
    return body_json_text(body + e.at, e.cut, out, cap);
}

char *include_usage_apply(const char *body, size_t len, const struct iu_edit *e,
                          size_t *out_len) {
    size_t tl = strlen(e->text);
    size_t n = len - e->cut + tl;
    char *out = malloc(n + 1);
    if (out == NULL) {
        return NULL;
    }
    memcpy(out, body, e->at);
    memcpy(out + e->at, e->text, tl);
    memcpy(out + e->at + tl, body + e->at + e->cut, len - e->at - e->cut);
    out[n] = '\0';
    *out_len = n;
    return out;
}
