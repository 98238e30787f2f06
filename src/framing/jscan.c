/*
 * The JSON path scanner (jscan.h): recursive descent along the path only,
 * everything else skipped by bracket counting, strings found 16 bytes at a
 * time.
 */
#include "framing/jscan.h"

#include <string.h>

int sg__jpath_parse(sg__jpath *path, const char *text) {
    memset(path, 0, sizeof(*path));
    const char *p = text;
    while (*p != '\0') {
        if (path->n == SG__JSCAN_MAX_PATH) {
            return -1;
        }
        if (p[0] == '[' && p[1] == ']') {
            path->step[path->n] = "[]";
            path->len[path->n++] = 2;
            p += 2;
        } else {
            size_t k = strcspn(p, ".[");
            if (k == 0 || k > 255) {
                return -1;
            }
            path->step[path->n] = p;
            path->len[path->n++] = (uint8_t)k;
            p += k;
        }
        if (*p == '.') {
            p++;
            if (*p == '\0') {
                return -1;
            }
        }
    }
    return path->n > 0 ? 0 : -1;
}

static inline bool is_ws(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

static inline const char *skip_ws(const char *p, const char *e) {
    while (p < e && is_ws(*p)) {
        p++;
    }
    return p;
}

/* From just after an opening quote: the closing quote, or @e. */
static const char *string_end(const char *p, const char *e, bool *escaped) {
    for (;;) {
#ifdef SG__JSCAN_SSE2
        while (e - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
            unsigned m = (unsigned)_mm_movemask_epi8(
                _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                             _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
            if (m != 0) {
                p += __builtin_ctz(m);
                break;
            }
            p += 16;
        }
#endif
        while (p < e && *p != '"' && *p != '\\') {
            p++;
        }
        if (p >= e) {
            return e;
        }
        if (*p == '"') {
            return p;
        }
        *escaped = true;
        p += 2; /* the backslash and the byte it escapes */
        if (p >= e) {
            return e;
        }
    }
}

/* A number or a literal: up to the next delimiter (any structural byte). */
static const char *scalar_end(const char *p, const char *e) {
    while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ':' && *p != '"' &&
           *p != '{' && *p != '[' && !is_ws(*p)) {
        p++;
    }
    return p;
}

/* From a '{' or '[': just after the bracket that closes it, or @e. */
static const char *container_end(const char *p, const char *e) {
    size_t depth = 0;
    bool escaped = false;
    while (p < e) {
#ifdef SG__JSCAN_SSE2
        /* to the next quote or bracket, 16 bytes at a time */
        while (e - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i m = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                             _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('[')),
                                          _mm_cmpeq_epi8(x, _mm_set1_epi8(']')))),
                _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('{')),
                             _mm_cmpeq_epi8(x, _mm_set1_epi8('}'))));
            unsigned mask = (unsigned)_mm_movemask_epi8(m);
            if (mask != 0) {
                p += __builtin_ctz(mask);
                break;
            }
            p += 16;
        }
        if (p >= e) {
            return e;
        }
#endif
        char c = *p;
        if (c == '"') {
            p = string_end(p + 1, e, &escaped);
            if (p >= e) {
                return e;
            }
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                return p + 1;
            }
        }
        p++;
    }
    return e;
}

/* Any value at @p (whitespace skipped): just after it. */
static const char *value_end(const char *p, const char *e) {
    if (p >= e) {
        return e;
    }
    if (*p == '"') {
        bool escaped = false;
        const char *q = string_end(p + 1, e, &escaped);
        return q < e ? q + 1 : e;
    }
    if (*p == '{' || *p == '[') {
        return container_end(p, e);
    }
    return scalar_end(p, e);
}

static void fill(const char *p, const char *e, sg__jval *out) {
    memset(out, 0, sizeof(*out));
    if (p >= e) {
        return;
    }
    switch (*p) {
    case '"': {
        const char *q = string_end(p + 1, e, &out->escaped);
        if (q >= e) {
            return; /* unterminated: not a value */
        }
        out->type = SG__JSTRING;
        out->p = p + 1;
        out->n = (size_t)(q - p - 1);
        return;
    }
    case '{':
    case '[': {
        const char *q = container_end(p, e);
        out->type = *p == '{' ? SG__JOBJECT : SG__JARRAY;
        out->p = p;
        out->n = (size_t)(q - p);
        return;
    }
    default: {
        const char *q = scalar_end(p, e);
        size_t n = (size_t)(q - p);
        out->p = p;
        out->n = n;
        if (n == 4 && memcmp(p, "true", 4) == 0) {
            out->type = SG__JTRUE;
        } else if (n == 5 && memcmp(p, "false", 5) == 0) {
            out->type = SG__JFALSE;
        } else if (n == 4 && memcmp(p, "null", 4) == 0) {
            out->type = SG__JNULL;
        } else if (n > 0 && (*p == '-' || (*p >= '0' && *p <= '9'))) {
            out->type = SG__JNUMBER;
        } else {
            out->p = NULL;
            out->n = 0;
        }
        return;
    }
    }
}

/* The value at @p, looked into along path steps k..: just after it, with
 * *@found when the path ended inside it (on a present value, when
 * @present: an empty one lets the search go on to the next element). */
static const char *find(const char *p, const char *e, const sg__jpath *path, unsigned k,
                        bool present, sg__jval *out, bool *found) {
    p = skip_ws(p, e);
    if (p >= e) {
        return e;
    }
    if (k == path->n) {
        fill(p, e, out);
        *found = present ? sg__jval_present(out) : out->type != SG__JNONE;
        /* found: the caller stops at once; else on past this value */
        return *found ? e : value_end(p, e);
    }
    bool any = path->len[k] == 2 && path->step[k][0] == '[' && path->step[k][1] == ']';
    if (*p != (any ? '[' : '{')) {
        return value_end(p, e); /* not the container the path needs */
    }
    p++;
    for (;;) {
        p = skip_ws(p, e);
        if (p >= e) {
            return e;
        }
        if (*p == (any ? ']' : '}')) {
            return p + 1;
        }
        if (*p == ',') {
            p++;
            continue;
        }
        if (any) {
            const char *next = find(p, e, path, k + 1, present, out, found);
            if (next <= p) {
                return e; /* malformed (a stray ':'): no progress, give up */
            }
            p = next;
        } else {
            if (*p != '"') {
                return e; /* malformed: give up */
            }
            bool escaped = false;
            const char *key = p + 1;
            const char *q = string_end(key, e, &escaped);
            if (q >= e) {
                return e;
            }
            bool match = !escaped && (size_t)(q - key) == path->len[k] &&
                         memcmp(key, path->step[k], path->len[k]) == 0;
            p = skip_ws(q + 1, e);
            if (p >= e || *p != ':') {
                return e;
            }
            p++;
            p = match ? find(p, e, path, k + 1, present, out, found)
                      : value_end(skip_ws(p, e), e);
        }
        if (*found) {
            return e;
        }
    }
}

static bool find_from(const char *p, size_t n, const sg__jpath *path, bool present,
                      sg__jval *out) {
    memset(out, 0, sizeof(*out));
    bool found = false;
    if (p != NULL && path != NULL && path->n > 0) {
        (void)find(p, p + n, path, 0, present, out, &found);
    }
    if (!found) {
        memset(out, 0, sizeof(*out));
    }
    return found;
}

bool sg__jscan_find(const char *p, size_t n, const sg__jpath *path, sg__jval *out) {
    return find_from(p, n, path, false, out);
}

bool sg__jscan_find_present(const char *p, size_t n, const sg__jpath *path,
                            sg__jval *out) {
    return find_from(p, n, path, true, out);
}

bool sg__jval_present(const sg__jval *v) {
    switch (v->type) {
    case SG__JSTRING:
        return v->n > 0;
    case SG__JOBJECT:
    case SG__JARRAY:
        return v->n > 2; /* not "{}" or "[]" (whitespace inside counts) */
    case SG__JNUMBER:
    case SG__JTRUE:
        return true;
    default:
        return false;
    }
}

bool sg__jscan_may_have_key(const char *p, size_t n, const char *key, size_t klen) {
    if (klen > UINT8_MAX) {
        return true; /* no quick answer: the scan decides */
    }
    const sg__jkey k = {key, (uint8_t)klen, 0};
    return sg__jscan_may_have(p, n, &k, 1) != 0;
}

const char *sg__jstr_end(const char *p, const char *e, bool *escaped) {
    return string_end(p, e, escaped);
}

/* A hex digit's value, or -1. */
static int hexdigit(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    char lower = (char)(c | 0x20);
    return lower >= 'a' && lower <= 'f' ? lower - 'a' + 10 : -1;
}

/* The code point of the \u escape's 4 hex digits at @p, or -1. */
static long hex4(const char *p) {
    int d0 = hexdigit(p[0]), d1 = hexdigit(p[1]), d2 = hexdigit(p[2]),
        d3 = hexdigit(p[3]);
    if ((d0 | d1 | d2 | d3) < 0) {
        return -1;
    }
    return (long)d0 << 12 | (long)d1 << 8 | (long)d2 << 4 | (long)d3;
}

size_t sg__jstr_decoded_len(const char *p, size_t n) {
    size_t len = 0;
    size_t i = 0;
    while (i < n) {
        if (p[i] != '\\' || i + 1 == n) {
            len++;
            i++;
            continue;
        }
        if (p[i + 1] != 'u') {
            len++; /* \n, \", \\ ...: one byte */
            i += 2;
            continue;
        }
        long cp = n - i >= 6 ? hex4(p + i + 2) : -1;
        if (cp < 0) {
            len += 2; /* malformed: its bytes as they are, from the 'u' on */
            i += 2;
            continue;
        }
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF && n - i >= 6 && p[i] == '\\' &&
            p[i + 1] == 'u') {
            long lo = hex4(p + i + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                len += 4; /* a surrogate pair: one code point above U+FFFF */
                i += 6;
                continue;
            }
        }
        len += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
    }
    return len;
}
