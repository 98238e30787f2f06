/*
 * JSON string literals (RFC 8259 §7) for the report and for programs that
 * print items as JSON lines.  No allocation: into the caller's buffer.
 */
#include <streamguard/core.h>

#include <string.h>

#if defined(__SSE2__)
#    include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#    include <tmmintrin.h>
#    define SG__JSON_SSSE3 1
#    include "json_tables.h"
#endif

/* Length of the valid UTF-8 sequence at @p (1..4), or 0 when invalid
 * (overlong forms, surrogates and code points above U+10FFFF included). */
static size_t utf8_len(const unsigned char *p, size_t n) {
    const unsigned char c = p[0];
    size_t len = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) {
            return 0;
        }
    }
    return len;
}

/* What a byte needs: 0 nothing (copied as it is), 1 a backslash before it
 * ('"' and '\\'), 2 more (a control character or DEL: an escape; >= 0x80:
 * the start of a UTF-8 sequence, or an invalid byte). */
static const unsigned char byte_class[256] =
    {
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, ['"'] = 1, ['\\'] = 1, [0x7f] = 2, [0x80] = 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2, 2, 2,
        2, 2, 2,         2,          2,          2,          2, 2, 2, 2, 2, 2, 2,
};

/* Escapes @u[*@i ..) into @d until *@i reaches @end (a UTF-8 sequence that
 * starts before @end is finished, looking as far as @len).  @d has room
 * for 6 bytes per input byte.  Returns the end of what it wrote. */
static char *escape(char *d, const unsigned char *u, size_t *i, size_t end, size_t len) {
    static const char hex[] = "0123456789abcdef";
    size_t k = *i;
    while (k < end) {
#if defined(__SSE2__)
        /* 16 bytes at a time: stored whole, kept up to the first byte that
         * needs more than a copy (the room for 6 bytes per input byte
         * covers the store) */
        if (k + 16 <= end) {
            const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(u + k));
            const __m128i quote = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                               _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
            /* signed: below 0x20, and every byte from 0x80 */
            const __m128i more = _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                              _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)));
            unsigned qmask = (unsigned)_mm_movemask_epi8(quote);
            const unsigned mmask = (unsigned)_mm_movemask_epi8(more);
            _mm_storeu_si128((__m128i *)(void *)d, v);
            if ((qmask | mmask) == 0) {
                d += 16;
                k += 16;
                continue;
            }
            if (mmask == 0 && k + 32 <= end) {
                /* quotes and backslashes only (JSON inside JSON): each gets
                 * its backslash, the runs between go 16 bytes at a time */
                const unsigned char *src = u + k;
                unsigned prev = 0;
                while (qmask != 0) {
                    const unsigned at = (unsigned)__builtin_ctz(qmask);
                    _mm_storeu_si128(
                        (__m128i *)(void *)d,
                        _mm_loadu_si128((const __m128i *)(const void *)(src + prev)));
                    d += at - prev;
                    d[0] = '\\';
                    d[1] = (char)src[at];
                    d += 2;
                    prev = at + 1;
                    qmask &= qmask - 1;
                }
                _mm_storeu_si128(
                    (__m128i *)(void *)d,
                    _mm_loadu_si128((const __m128i *)(const void *)(src + prev)));
                d += 16 - prev;
                k += 16;
                continue;
            }
            const unsigned n = (unsigned)__builtin_ctz(qmask | mmask);
            d += n;
            k += n;
        }
#endif
        const unsigned char c = u[k];
        const unsigned char cls = byte_class[c];
        if (cls < 2) {
            /* the common case, without a branch on the byte: a quote or a
             * backslash gets its backslash, anything else is copied */
            d[0] = cls ? '\\' : (char)c;
            d[cls] = (char)c;
            d += 1 + cls;
            k++;
            continue;
        }
        if (c >= 0x80) {
            size_t n = utf8_len(u + k, len - k);
            if (n == 0) {
                /* Invalid UTF-8 cannot go into a JSON text; U+FFFD keeps
                 * the position of the damage visible. */
                memcpy(d, "\\ufffd", 6);
                d += 6;
                k++;
            } else {
                memcpy(d, u + k, n);
                d += n;
                k += n;
            }
            continue;
        }
        *d++ = '\\';
        switch (c) {
        case '\n':
            *d++ = 'n';
            break;
        case '\r':
            *d++ = 'r';
            break;
        case '\t':
            *d++ = 't';
            break;
        default:
            memcpy(d, "u00", 3);
            d[3] = hex[c >> 4];
            d[4] = hex[c & 15];
            d += 5;
            break;
        }
        k++;
    }
    *i = k;
    return d;
}

#ifdef SG__JSON_SSSE3
/* Quotes and backslashes 8 input bytes at a time, without a branch per
 * byte: one shuffle spreads the bytes apart (json_tables.h), one OR puts a
 * backslash in each gap.  Control characters, DEL and bytes from 0x80 go
 * to escape() a block at a time.  SSSE3 (pshufb) and POPCNT, chosen at run
 * time. */
__attribute__((target("ssse3,popcnt"))) static char *
escape_ssse3(char *d, const unsigned char *u, size_t *i, size_t len) {
    size_t k = *i;
    /* At least 16 bytes left: the 16-byte store runs at most 8 bytes past
     * what this block writes, and the 8 bytes still to come (each 1 byte
     * or more) cover them - nothing is left behind past the literal. */
    while (k + 16 <= len) {
        const __m128i v = _mm_loadl_epi64((const __m128i *)(const void *)(u + k));
        const unsigned q = (unsigned)_mm_movemask_epi8(
                               _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                            _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')))) &
                           0xffu;
        /* signed: below 0x20, and every byte from 0x80 (the upper 8 lanes
         * are zero, and masked off) */
        const unsigned more = (unsigned)_mm_movemask_epi8(
                                  _mm_or_si128(_mm_cmplt_epi8(v, _mm_set1_epi8(0x20)),
                                               _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f)))) &
                              0xffu;
        if (more != 0) {
            d = escape(d, u, &k, k + 8, len); /* k may pass k + 8 (UTF-8) */
            continue;
        }
        const __m128i out = _mm_or_si128(
            _mm_shuffle_epi8(
                v, _mm_load_si128((const __m128i *)(const void *)sg__json_shuf[q])),
            _mm_load_si128((const __m128i *)(const void *)sg__json_bslash[q]));
        _mm_storeu_si128((__m128i *)(void *)d, out);
        d += 8 + (unsigned)__builtin_popcount(q);
        k += 8;
    }
    *i = k;
    return escape(d, u, i, len, len);
}

static bool have_ssse3(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("popcnt");
}
#endif

size_t sg_json_escape(char *dst, size_t cap, const char *p, size_t len) {
    const unsigned char *u = (const unsigned char *)p;
    size_t i = 0;
    if (dst != NULL && cap >= SG_JSON_ESCAPE_MAX(len)) {
        /* room for the worst case: straight into @dst */
        char *d = dst;
        *d++ = '"';
#ifdef SG__JSON_SSSE3
        d = have_ssse3() ? escape_ssse3(d, u, &i, len) : escape(d, u, &i, len, len);
#else
        d = escape(d, u, &i, len, len);
#endif
        *d++ = '"';
        return (size_t)(d - dst);
    }
    /* a bounded @dst: a chunk at a time, what fits is kept, the rest counted */
    char chunk[6 * 64 + 6 * 4];
    size_t pos = 0;
    const size_t room = dst != NULL ? cap : 0;
#define SG__PUT(src, n)                                                  \
    do {                                                                 \
        size_t n_ = (n);                                                 \
        if (pos < room) {                                                \
            memcpy(dst + pos, (src), n_ < room - pos ? n_ : room - pos); \
        }                                                                \
        pos += n_;                                                       \
    } while (0)
    SG__PUT("\"", 1);
    while (i < len) {
        size_t end = len - i > 64 ? i + 64 : len;
        char *e = escape(chunk, u, &i, end, len);
        SG__PUT(chunk, (size_t)(e - chunk));
    }
    SG__PUT("\"", 1);
#undef SG__PUT
    return pos;
}
