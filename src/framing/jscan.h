/*
 * A look inside an item's JSON without a parse: one pass over the text,
 * no allocation, bounded depth, that finds the value at a path such as
 * choices[].delta.content or error.type.  Provider profiles use it to tell
 * a token from metadata and to see an in-band error (docs/profiles.md).
 *
 * What it promises: on well-formed JSON (RFC 8259) the value it returns is
 * the one a parser would find first at that path, in document order.  On
 * malformed input it returns "not found" or a span inside the input, never
 * reads outside it, and never takes more than one pass: a hostile item
 * costs what its length costs.  It does not validate: numbers and literals
 * are taken as the bytes up to the next delimiter, and a string's escapes
 * are not decoded (the span is the raw text between the quotes; `escaped`
 * says whether it holds a backslash).
 */
#ifndef SG_FRAMING_JSCAN_H
#define SG_FRAMING_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__) && defined(__GNUC__)
#    include <emmintrin.h>
#    define SG__JSCAN_SSE2 1
#endif
#if defined(__GNUC__)
#    define SG__JSCAN_INLINE static inline __attribute__((always_inline))
#else
#    define SG__JSCAN_INLINE static inline
#endif

/* The most steps in a path (the only recursion: values off the path are
 * skipped by counting brackets, however deep they nest). */
#define SG__JSCAN_MAX_PATH 8

enum sg__jtype {
    SG__JNONE = 0, /* not found */
    SG__JSTRING,   /* p, n: the raw bytes between the quotes */
    SG__JNUMBER,   /* p, n: the bytes of the number */
    SG__JTRUE,
    SG__JFALSE,
    SG__JNULL,
    SG__JOBJECT, /* p, n: from '{' to its '}' inclusive */
    SG__JARRAY,  /* p, n: from '[' to its ']' inclusive */
};

typedef struct sg__jval {
    const char *p;
    size_t n;
    uint8_t type;
    bool escaped; /* a string holding a backslash */
} sg__jval;

/*
 * A path: each step is a key of an object, or "[]" for any element of an
 * array (the first that has the rest of the path).  At most
 * SG__JSCAN_MAX_PATH steps.
 */
typedef struct sg__jpath {
    const char *step[SG__JSCAN_MAX_PATH];
    uint8_t len[SG__JSCAN_MAX_PATH];
    uint8_t n;
} sg__jpath;

/* A path written out at compile time, one step per argument ("[]" for any
 * element): SG__JPATH3("choices", "[]", "delta") - no parse at run time. */
#define SG__JP_LEN(s) ((uint8_t)(sizeof(s) - 1))
#define SG__JPATH1(a) \
    { {a}, {SG__JP_LEN(a)}, 1 }
#define SG__JPATH2(a, b) \
    { {a, b}, {SG__JP_LEN(a), SG__JP_LEN(b)}, 2 }
#define SG__JPATH3(a, b, c) \
    { {a, b, c}, {SG__JP_LEN(a), SG__JP_LEN(b), SG__JP_LEN(c)}, 3 }
#define SG__JPATH4(a, b, c, d) \
    { {a, b, c, d}, {SG__JP_LEN(a), SG__JP_LEN(b), SG__JP_LEN(c), SG__JP_LEN(d)}, 4 }
#define SG__JPATH6(a, b, c, d, e, f)                                       \
    {                                                                      \
        {a, b, c, d, e, f}, {SG__JP_LEN(a), SG__JP_LEN(b), SG__JP_LEN(c),  \
                             SG__JP_LEN(d), SG__JP_LEN(e), SG__JP_LEN(f)}, \
            6                                                              \
    }

/* Builds @path from "a.b[].c" ("[]" may follow a key or stand alone).
 * Returns 0, or -1 when the text has too many steps or an empty key. */
int sg__jpath_parse(sg__jpath *path, const char *text);

/* Finds the first value at @path in [p, p + n).  Returns true and fills
 * *@out when found; false (and out->type SG__JNONE) otherwise. */
bool sg__jscan_find(const char *p, size_t n, const sg__jpath *path, sg__jval *out);

/* The same, the first *present* value (sg__jval_present): where a "[]"
 * step's element holds an empty one ({"text": ""}), the search goes on to
 * the next element ([{"text": ""}, {"text": "Hello"}] has "Hello"). */
bool sg__jscan_find_present(const char *p, size_t n, const sg__jpath *path,
                            sg__jval *out);

/* A quick reject before a scan: false proves that no key @key (unescaped,
 * as the scanner matches keys) is in [p, p + n) at any depth - the bytes
 * "key" in quotes do not occur.  true says only that they do.  16 bytes at
 * a time (a per-item check after the first token costs this, not a scan). */
bool sg__jscan_may_have_key(const char *p, size_t n, const char *key, size_t klen);

/* A key for sg__jscan_may_have: its bytes and length, and the first byte
 * its value must start with (0: any value; 't': true, '{': an object). */
typedef struct sg__jkey {
    const char *key;
    uint8_t len;
    char value;
} sg__jkey;

/* The most keys sg__jscan_may_have looks for in one pass. */
#define SG__JKEYS_MAX 4

/* The quick reject for up to SG__JKEYS_MAX keys in one pass: bit k of the
 * answer is 0 when it is proven that no key @keys[k] (with a value that
 * starts as it asks) is in [p, p + n) at any depth, 1 when it may be.
 * Inline, so that each caller's constant keys make a loop of its own. */
/* After a key's closing quote at @q: whitespace, a colon, whitespace -
 * where the value begins (it may be @end), or NULL without the colon. */
SG__JSCAN_INLINE const char *sg__jcolon(const char *q, const char *end) {
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) {
        q++;
    }
    if (q == end || *q++ != ':') {
        return NULL;
    }
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) {
        q++;
    }
    return q;
}

/* Whether @keys[k] may be at @at (a quote): the key, a quote, and - when
 * the key asks for one - whitespace, a colon, whitespace and the value's
 * first byte, all inside [.., @end). */
SG__JSCAN_INLINE bool sg__jkey_at(const char *at, const char *end, const sg__jkey *key) {
    size_t klen = key->len;
    if ((size_t)(end - at) < klen + 2 || memcmp(at + 1, key->key, klen) != 0 ||
        at[klen + 1] != '"') {
        return false;
    }
    if (key->value == 0) {
        return true;
    }
    const char *q = sg__jcolon(at + klen + 2, end);
    return q != NULL && q < end && *q == key->value;
}

/* The keys not found yet that are at @at (a quote) join *@found. */
SG__JSCAN_INLINE void sg__jkeys_at(const char *at, const char *end, const sg__jkey *keys,
                                   unsigned nkeys, unsigned *found) {
    for (unsigned k = 0; k < nkeys; k++) {
        if (!(*found >> k & 1) && sg__jkey_at(at, end, &keys[k])) {
            *found |= 1u << k;
        }
    }
}

#ifdef SG__JSCAN_SSE2
/* Bits of the 16 bytes at @q that are a quote followed by one of the keys'
 * first bytes @f (the first @nkeys of them; a constant when inlined). */
SG__JSCAN_INLINE unsigned sg__jkeys_block(const char *q, const __m128i *f,
                                          unsigned nkeys) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(q + 1));
    __m128i any = _mm_cmpeq_epi8(b, f[0]);
    for (unsigned k = 1; k < nkeys; k++) {
        any = _mm_or_si128(any, _mm_cmpeq_epi8(b, f[k]));
    }
    const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)q);
    return (unsigned)_mm_movemask_epi8(
        _mm_and_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8('"')), any));
}
#endif

SG__JSCAN_INLINE unsigned sg__jscan_may_have(const char *p, size_t n,
                                             const sg__jkey *keys, unsigned nkeys) {
    unsigned found = 0;
    const unsigned all = (1u << nkeys) - 1;
    if (nkeys > SG__JKEYS_MAX) {
        return (1u << SG__JKEYS_MAX) - 1; /* no quick answer: every one may be */
    }
    if (p == NULL || n < 2 || nkeys == 0) {
        return 0;
    }
    const char *end = p + n;
    const char *last = end - 2; /* a quote and one byte at least */
    const char *q = p;
#ifdef SG__JSCAN_SSE2
    if (last - p >= 16) {
        __m128i f[SG__JKEYS_MAX];
        for (unsigned k = 0; k < nkeys; k++) {
            f[k] = _mm_set1_epi8(keys[k].len > 0 ? keys[k].key[0] : '"');
        }
        /* 64 bytes, one branch: most items have no candidate at all */
        while (last - q >= 64) {
            uint64_t m = (uint64_t)sg__jkeys_block(q, f, nkeys) |
                         (uint64_t)sg__jkeys_block(q + 16, f, nkeys) << 16 |
                         (uint64_t)sg__jkeys_block(q + 32, f, nkeys) << 32 |
                         (uint64_t)sg__jkeys_block(q + 48, f, nkeys) << 48;
            for (; m != 0; m &= m - 1) {
                sg__jkeys_at(q + __builtin_ctzll(m), end, keys, nkeys, &found);
                if (found == all) {
                    return found;
                }
            }
            q += 64;
        }
        while (q <= last) {
            /* the last block overlaps the one before: its bytes already
             * looked at are masked off */
            const char *b = last - q >= 16 ? q : last - 15;
            unsigned m = sg__jkeys_block(b, f, nkeys) & (0xffffu << (q - b));
            for (; m != 0; m &= m - 1) {
                sg__jkeys_at(b + __builtin_ctz(m), end, keys, nkeys, &found);
                if (found == all) {
                    return found;
                }
            }
            q = b + 16;
        }
        return found;
    }
#endif
    for (; q <= last; q++) {
        if (q[0] == '"') {
            sg__jkeys_at(q, end, keys, nkeys, &found);
            if (found == all) {
                break;
            }
        }
    }
    return found;
}

/* true for a value that says "something": a non-empty string, a non-empty
 * array or object, a number, true.  (Empty content is not a token.) */
bool sg__jval_present(const sg__jval *v);

/* From just after an opening quote in [.., @e): its closing quote, or @e
 * when there is none; *@escaped is set when a backslash came before it. */
const char *sg__jstr_end(const char *p, const char *e, bool *escaped);

/* The bytes the JSON string body [p, p + n) (between its quotes, escapes
 * undone) holds as UTF-8: \n is 1, \u00e9 is 2, a surrogate pair 4.  A
 * malformed escape counts its bytes as they are. */
size_t sg__jstr_decoded_len(const char *p, size_t n);

/*
 * One pass for the keys of a provider profile's item: where each is, and
 * how much generated text the item carries.  For sg__jscan_keys, a key's
 * value byte says what its value must start with - 0 any value, '"' a
 * string, '{' an object, 't' true, '#' a number - and a key in the @text
 * mask must have a string value, whose decoded length is added for every
 * occurrence (the scan then goes on after the string: its bytes are never
 * taken for keys).
 */
#define SG__JKEYS_SCAN_MAX 8

typedef struct sg__jfound {
    unsigned mask;                      /* bit k: key k found */
    const char *at[SG__JKEYS_SCAN_MAX]; /* where key k's first value begins */
    uint64_t text;                      /* decoded bytes of the text keys' values */
} sg__jfound;

/* Whether @keys[k]'s value may start at @v: what its value byte asks. */
SG__JSCAN_INLINE bool sg__jvalue_is(char want, char v) {
    switch (want) {
    case 0:
        return true;
    case '#':
        return v == '-' || (v >= '0' && v <= '9');
    default:
        return v == want;
    }
}

/* The key of @keys at @at (a quote), if any: its index and, in *@v, where
 * its value begins; -1 when none of them is there. */
SG__JSCAN_INLINE int sg__jkey_value(const char *at, const char *end, const sg__jkey *keys,
                                    unsigned nkeys, const char **v) {
    for (unsigned k = 0; k < nkeys; k++) {
        /* the closing quote first: it turns most other keys away without
         * a compare of their bytes */
        size_t klen = keys[k].len;
        if (at[1] != keys[k].key[0] || (size_t)(end - at) < klen + 3 ||
            at[klen + 1] != '"' || memcmp(at + 1, keys[k].key, klen) != 0) {
            continue;
        }
        const char *q = sg__jcolon(at + klen + 2, end);
        if (q == NULL || q == end || !sg__jvalue_is(keys[k].value, *q)) {
            return -1;
        }
        *v = q;
        return (int)k;
    }
    return -1;
}

/* A key found at @at: recorded in @f; returns where the scan goes on when
 * the key was a text key (just after its string), else NULL. */
SG__JSCAN_INLINE const char *sg__jkey_take(const char *at, const char *end,
                                           const sg__jkey *keys, unsigned nkeys,
                                           unsigned text, sg__jfound *f) {
    const char *v = NULL;
    int k = sg__jkey_value(at, end, keys, nkeys, &v);
    if (k < 0) {
        return NULL;
    }
    if (!(f->mask >> k & 1)) {
        f->mask |= 1u << k;
        f->at[k] = v;
    }
    if (!(text >> k & 1)) {
        return NULL;
    }
    bool escaped = false;
    const char *q = sg__jstr_end(v + 1, end, &escaped);
    size_t n = (size_t)(q - v - 1);
    f->text += escaped ? sg__jstr_decoded_len(v + 1, n) : n;
    return q < end ? q + 1 : end;
}

SG__JSCAN_INLINE void sg__jscan_keys(const char *p, size_t n, const sg__jkey *keys,
                                     unsigned nkeys, unsigned text, sg__jfound *f) {
    f->mask = 0;
    f->text = 0;
    if (p == NULL || n < 3 || nkeys == 0 || nkeys > SG__JKEYS_SCAN_MAX) {
        return;
    }
    const char *end = p + n;
    const char *last = end - 3; /* a quote, a key byte and its closing quote */
    const char *q = p;
#ifdef SG__JSCAN_SSE2
    __m128i fb[SG__JKEYS_SCAN_MAX];
    for (unsigned k = 0; k < nkeys; k++) {
        fb[k] = _mm_set1_epi8(keys[k].key[0]);
    }
    while (last - q >= 16) {
        unsigned m = sg__jkeys_block(q, fb, nkeys);
        const char *resume = NULL;
        for (; m != 0 && resume == NULL; m &= m - 1) {
            resume = sg__jkey_take(q + __builtin_ctz(m), end, keys, nkeys, text, f);
        }
        q = resume != NULL ? resume : q + 16;
    }
#endif
    while (q <= last) {
        const char *resume = NULL;
        if (*q == '"') {
            resume = sg__jkey_take(q, end, keys, nkeys, text, f);
        }
        q = resume != NULL ? resume : q + 1;
    }
}

#endif
