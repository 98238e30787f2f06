/*
 * JSON string literals (RFC 8259 §7) for the report and for programs that
 * print items as JSON lines.  No allocation: into the caller's buffer.
 */
#include "sgx/json.h"

#include <string.h>

#if defined(__SSE2__)
#    include <emmintrin.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#    include <immintrin.h>
#    include <tmmintrin.h>
#    define SG__JSON_SSSE3 1
#    define SG__JSON_AVX512 1
#    include "json_tables.h"
#endif

#include "sgx/simd.h"

#if defined(__GNUC__)
#    define SG__JSON_NOINLINE __attribute__((noinline))
#else
#    define SG__JSON_NOINLINE
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
            /* a run of valid sequences (text in most scripts is one),
             * checked one by one and copied at once */
            size_t run = 0;
            size_t n;
            while ((n = utf8_len(u + k + run, len - k - run)) != 0) {
                run += n;
                if (k + run >= end || u[k + run] < 0x80) {
                    break;
                }
            }
            if (run == 0) {
                /* Invalid UTF-8 cannot go into a JSON text; U+FFFD keeps
                 * the position of the damage visible. */
                memcpy(d, "\\ufffd", 6);
                d += 6;
                k++;
            } else {
                memcpy(d, u + k, run);
                d += run;
                k += run;
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
/* Bytes 0..7 of @v with a backslash before each byte whose bit is set in
 * @q (8 bits), stored whole at @d (16 bytes); returns how many count. */
__attribute__((target("ssse3,popcnt"))) static inline size_t put8(char *d, __m128i v,
                                                                  unsigned q) {
    const __m128i out = _mm_or_si128(
        _mm_shuffle_epi8(v,
                         _mm_load_si128((const __m128i *)(const void *)sg__json_shuf[q])),
        _mm_load_si128((const __m128i *)(const void *)sg__json_bslash[q]));
    _mm_storeu_si128((__m128i *)(void *)d, out);
    return 8 + (size_t)__builtin_popcount(q);
}

/* Bits of the bytes of @v that get a backslash ('"', '\\') and of those
 * that need more than that (below 0x20, DEL, and - signed - every byte
 * from 0x80), 16 each. */
__attribute__((target("ssse3,popcnt"))) static inline void
classify16(__m128i v, unsigned *q, unsigned *more) {
    *q = (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))));
    *more = (unsigned)_mm_movemask_epi8(_mm_or_si128(
        _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)), _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f))));
}

/* 16 bytes of @v whose quotes and backslashes (bits @q) get their
 * backslash, at @d; returns how many count.  The second shuffle's store
 * runs up to 8 bytes past that. */
__attribute__((target("ssse3,popcnt"))) static inline size_t put16(char *d, __m128i v,
                                                                   unsigned q) {
    if (q == 0) {
        _mm_storeu_si128((__m128i *)(void *)d, v);
        return 16;
    }
    size_t n = put8(d, v, q & 0xffu);
    return n + put8(d + n, _mm_srli_si128(v, 8), q >> 8);
}

/*
 * UTF-8 checked 16 or 32 bytes at a time, with the lookup tables of
 * Keiser and Lemire ("Validating UTF-8 In Less Than One Instruction Per
 * Byte", 2021): each byte and the byte before it, by the high nibble of
 * each and the low nibble of the first, index three 16-entry tables, each
 * entry a set of the errors that pair may be; the AND of the three is the
 * errors it is.  A pair of continuation bytes is an error (TWO_CONTS)
 * unless it is the third or fourth byte of a sequence, which the bytes 2
 * and 3 before tell (bit 0x80 of must23), so the XOR of the two leaves
 * the errors.  Blocks start at a sequence's start (what came before is
 * taken as ASCII); a block that ends inside a sequence is cut before it
 * (utf8_cut), so no state crosses from one block to the next.
 */
#    define U8_TOO_SHORT (1 << 0)      /* a lead byte, then no continuation */
#    define U8_TOO_LONG (1 << 1)       /* ASCII, then a continuation */
#    define U8_OVERLONG_3 (1 << 2)     /* E0, then 80 .. 9F */
#    define U8_TOO_LARGE (1 << 3)      /* F4, then 90 .. BF; F5 .. FF */
#    define U8_SURROGATE (1 << 4)      /* ED, then A0 .. BF */
#    define U8_OVERLONG_2 (1 << 5)     /* C0, C1 */
#    define U8_TOO_LARGE_1000 (1 << 6) /* F5 .. FF, then 80 .. 8F */
#    define U8_OVERLONG_4 (1 << 6)     /* F0, then 80 .. 8F */
#    define U8_TWO_CONTS (1 << 7)      /* a continuation after one */
#    define U8_CARRY (U8_TOO_SHORT | U8_TOO_LONG | U8_TWO_CONTS)

/* By the high nibble of the byte before */
static const unsigned char u8_prev_high[16] __attribute__((aligned(16))) = {
    U8_TOO_LONG,
    U8_TOO_LONG,
    U8_TOO_LONG,
    U8_TOO_LONG, /* ASCII */
    U8_TOO_LONG,
    U8_TOO_LONG,
    U8_TOO_LONG,
    U8_TOO_LONG,
    U8_TWO_CONTS,
    U8_TWO_CONTS,
    U8_TWO_CONTS,
    U8_TWO_CONTS,                                                    /* continuation */
    U8_TOO_SHORT | U8_OVERLONG_2,                                    /* C0 .. CF */
    U8_TOO_SHORT,                                                    /* D0 .. DF */
    U8_TOO_SHORT | U8_OVERLONG_3 | U8_SURROGATE,                     /* E0 .. EF */
    U8_TOO_SHORT | U8_TOO_LARGE | U8_TOO_LARGE_1000 | U8_OVERLONG_4, /* F0 .. FF */
};
/* By the low nibble of the byte before */
static const unsigned char u8_prev_low[16] __attribute__((aligned(16))) = {
    U8_CARRY | U8_OVERLONG_3 | U8_OVERLONG_2 | U8_OVERLONG_4, /* _0 */
    U8_CARRY | U8_OVERLONG_2,                                 /* _1 */
    U8_CARRY,
    U8_CARRY,
    U8_CARRY | U8_TOO_LARGE, /* _4 */
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000 | U8_SURROGATE, /* _D */
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
    U8_CARRY | U8_TOO_LARGE | U8_TOO_LARGE_1000,
};
/* By the high nibble of the byte itself */
static const unsigned char u8_this_high[16] __attribute__((aligned(16))) = {
    U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, /* ASCII */
    U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT,
    /* 80 .. 8F */
    U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_OVERLONG_3 | U8_TOO_LARGE_1000 |
        U8_OVERLONG_4,
    /* 90 .. 9F */
    U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_OVERLONG_3 | U8_TOO_LARGE,
    /* A0 .. BF */
    U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE,
    U8_TOO_LONG | U8_OVERLONG_2 | U8_TWO_CONTS | U8_SURROGATE | U8_TOO_LARGE,
    U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, U8_TOO_SHORT, /* leads */
};

/* Where the @n bytes at @b, valid UTF-8 so far, stop being whole
 * sequences: at the last one's lead byte when it needs bytes past @n,
 * else @n.  (In a valid block at most one of the three is a lead.) */
static inline size_t utf8_cut(const unsigned char *b, size_t n) {
    return b[n - 1] >= 0xC0   ? n - 1
           : b[n - 2] >= 0xE0 ? n - 2
           : b[n - 3] >= 0xF0 ? n - 3
                              : n;
}

/* The errors in the 16 bytes of @v, @prev the 16 before them: not 0 where
 * they cannot be UTF-8 (a sequence cut short at the end is not one). */
__attribute__((target("ssse3"))) static inline __m128i utf8_errors16(__m128i v,
                                                                     __m128i prev) {
    const __m128i nib = _mm_set1_epi8(0x0f);
    const __m128i prev1 = _mm_alignr_epi8(v, prev, 15);
    const __m128i prev2 = _mm_alignr_epi8(v, prev, 14);
    const __m128i prev3 = _mm_alignr_epi8(v, prev, 13);
    const __m128i e = _mm_and_si128(
        _mm_and_si128(
            _mm_shuffle_epi8(_mm_load_si128((const __m128i *)(const void *)u8_prev_high),
                             _mm_and_si128(_mm_srli_epi16(prev1, 4), nib)),
            _mm_shuffle_epi8(_mm_load_si128((const __m128i *)(const void *)u8_prev_low),
                             _mm_and_si128(prev1, nib))),
        _mm_shuffle_epi8(_mm_load_si128((const __m128i *)(const void *)u8_this_high),
                         _mm_and_si128(_mm_srli_epi16(v, 4), nib)));
    /* 0x80 where the byte must be a third (E0 .. two before) or fourth
     * (F0 .. three before) */
    const __m128i must23 = _mm_or_si128(_mm_subs_epu8(prev2, _mm_set1_epi8(0xE0 - 0x80)),
                                        _mm_subs_epu8(prev3, _mm_set1_epi8(0xF0 - 0x80)));
    return _mm_xor_si128(_mm_and_si128(must23, _mm_set1_epi8(-128)), e);
}

/* How many of the 16 bytes at @b (in @v, a sequence's start) are whole
 * valid UTF-8 sequences: 16, 13..15 (cut before the last one's lead), or
 * 0 when they hold an error. */
__attribute__((target("ssse3"))) static inline size_t utf8_valid16(const unsigned char *b,
                                                                   __m128i v) {
    const __m128i e = utf8_errors16(v, _mm_setzero_si128());
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(e, _mm_setzero_si128())) != 0xffff) {
        return 0;
    }
    return utf8_cut(b, 16);
}

/* The 16-byte block at *@k (and 8 bytes more) of escape_ssse3's that has
 * a byte below 0x20, DEL or from 0x80, at @d: when its bytes from 0x80
 * are whole valid sequences and the others need at most a backslash, as
 * put16 writes a block, as far as the last whole sequence (its bytes from
 * there on are a lead and continuations, no quote; what put16 writes past
 * that, what follows writes over: 24 - 13 bytes of input at least); else
 * escape() takes it.  Apart, so the loop keeps its registers for the
 * rest.  Moves *@k past what it took, returns the end of what it wrote. */
__attribute__((target("ssse3,popcnt"))) static SG__JSON_NOINLINE char *
escape_odd16(char *d, const unsigned char *u, size_t *k, size_t len) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(u + *k));
    unsigned q, more;
    classify16(v, &q, &more);
    size_t m;
    if (more != (unsigned)_mm_movemask_epi8(v) || (m = utf8_valid16(u + *k, v)) == 0) {
        return escape(d, u, k, *k + 16, len); /* *k may pass *k + 16 (UTF-8) */
    }
    *k += m;
    return d + put16(d, v, q) - (16 - m);
}

/* Whether @v0 and @v1 (their bits @m0, @m1 from classify16) need at most a
 * backslash but for bytes from 0x80, which are valid UTF-8 to the end of
 * @v1 (a sequence cut short there is an error). */
__attribute__((target("ssse3,popcnt"))) static SG__JSON_NOINLINE int
utf8_only32(__m128i v0, __m128i v1, unsigned m0, unsigned m1) {
    if (m0 != (unsigned)_mm_movemask_epi8(v0) || m1 != (unsigned)_mm_movemask_epi8(v1)) {
        return 0;
    }
    const __m128i e =
        _mm_or_si128(utf8_errors16(v0, _mm_setzero_si128()), utf8_errors16(v1, v0));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(e, _mm_setzero_si128())) == 0xffff;
}

/* Quotes and backslashes 16 input bytes at a time without a branch per
 * byte: a shuffle per 8 bytes spreads them apart (json_tables.h), an OR
 * puts a backslash in each gap.  A block with a byte from 0x80 is checked
 * as UTF-8 and, valid, goes the same way (escape_odd16); one with a
 * control character, DEL or invalid UTF-8 goes to escape().  A block's stores run up to 8
 * bytes past what it writes, so the loop leaves the last 8 to 23 bytes to a padded copy
 * escaped in a scratch buffer and copied exactly: nothing is written past the literal.
 * @dend is the end of the room (6 bytes per input byte keeps it 32 bytes away while 24
 * input bytes are left).  SSSE3 (pshufb) and POPCNT, chosen at run time. */
__attribute__((target("ssse3,popcnt"))) static char *
escape_ssse3(char *d, const char *dend, const unsigned char *u, size_t len) {
    size_t k = 0;
    while (k + 24 <= len && dend - d >= 32) {
        const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(u + k));
        unsigned q, more;
        classify16(v, &q, &more);
        if (more != 0) {
            d = escape_odd16(d, u, &k, len);
            continue;
        }
        d += put16(d, v, q);
        k += 16;
    }
    const size_t r = len - k;
    if (r > 0 && r < 32) {
        unsigned char in[32];
        char out[2 * 32 + 16];
        memset(in, 'a', sizeof(in)); /* padding that needs nothing */
        memcpy(in, u + k, r);
        const __m128i v0 = _mm_loadu_si128((const __m128i *)(const void *)in);
        const __m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(in + 16));
        unsigned q0, m0, q1, m1;
        classify16(v0, &q0, &m0);
        classify16(v1, &q1, &m1);
        if ((m0 | m1) == 0 || utf8_only32(v0, v1, m0, m1)) {
            /* the padding's bits are 0: it adds its 'a's after the rest */
            size_t n = put16(out, v0, q0);
            n += r > 16 ? put16(out + n, v1, q1) : 0;
            n -= (r > 16 ? 32 : 16) - r;
            memcpy(d, out, n);
            return d + n;
        }
    }
    return escape(d, u, &k, len, len);
}

/* The 32 bytes of @v (a sequence's start; those before taken as ASCII)
 * checked as utf8_errors16 does 16: true when they hold no error. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx2"))) static inline int
utf8_ok32(__m256i v) {
    const __m256i nib = _mm256_set1_epi8(0x0f);
    /* v moved up by 1, 2, 3 bytes across the lanes, 0s coming in */
    const __m256i lo = _mm256_permute2x128_si256(v, v, 0x08); /* 0, v's low lane */
    const __m256i prev1 = _mm256_alignr_epi8(v, lo, 15);
    const __m256i prev2 = _mm256_alignr_epi8(v, lo, 14);
    const __m256i prev3 = _mm256_alignr_epi8(v, lo, 13);
    const __m256i e = _mm256_and_si256(
        _mm256_and_si256(
            _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_load_si128(
                                    (const __m128i *)(const void *)u8_prev_high)),
                                _mm256_and_si256(_mm256_srli_epi16(prev1, 4), nib)),
            _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_load_si128(
                                    (const __m128i *)(const void *)u8_prev_low)),
                                _mm256_and_si256(prev1, nib))),
        _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_load_si128(
                                (const __m128i *)(const void *)u8_this_high)),
                            _mm256_and_si256(_mm256_srli_epi16(v, 4), nib)));
    const __m256i must23 =
        _mm256_or_si256(_mm256_subs_epu8(prev2, _mm256_set1_epi8(0xE0 - 0x80)),
                        _mm256_subs_epu8(prev3, _mm256_set1_epi8(0xF0 - 0x80)));
    const __m256i err =
        _mm256_xor_si256(_mm256_and_si256(must23, _mm256_set1_epi8(-128)), e);
    return _mm256_testz_si256(err, err);
}

/* The bytes of @raw packed from the first on, a backslash before each
 * whose bit is set in @q: each byte widened to 16 bits becomes the pair
 * (byte, 0) or, in @q, ('\\', byte) (@bslash: '\\' in each 16 bits), and
 * one compress keeps the bytes that are not 0 (a 0 byte of @raw is a
 * control character, which escape() takes, or past the input). */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi2"))) static inline __m512i
quoted32(__m256i raw, __mmask32 q, __m512i bslash) {
    const __m512i w = _mm512_cvtepu8_epi16(raw);
    /* little-endian pairs: the low byte goes first */
    const __m512i pairs =
        _mm512_mask_blend_epi16(q, w, _mm512_or_si512(_mm512_slli_epi16(w, 8), bslash));
    return _mm512_maskz_compress_epi8(_mm512_test_epi8_mask(pairs, pairs), pairs);
}

/* The block at *@k of escape_avx512's (32 bytes, or the last ones) that
 * has a byte below 0x20, DEL or from 0x80, at @d: when its bytes from
 * 0x80 are whole valid sequences and the others need at most a backslash,
 * as escape_avx512 writes a block, as far as the last whole sequence (its
 * bytes from there on are a lead and continuations, no quote; the 0s
 * loaded past the input make a sequence cut short there an error); else
 * escape() takes it.  Apart, so the loop keeps its registers for the
 * rest.  Moves *@k past what it took, returns the end of what it wrote. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi2,avx2,bmi2,"
                      "popcnt"))) static SG__JSON_NOINLINE char *
escape_odd32(char *d, const unsigned char *u, size_t *k, size_t len) {
    const size_t r = len - *k < 32 ? len - *k : 32;
    const __mmask32 in = (__mmask32)_bzhi_u32(~0u, (unsigned)r);
    const __m256i raw = _mm256_maskz_loadu_epi8(in, u + *k);
    const __mmask32 odd = _mm256_mask_cmpge_epu8_mask(
        in, _mm256_sub_epi8(raw, _mm256_set1_epi8(0x20)), _mm256_set1_epi8(0x5f));
    if (odd != _mm256_movepi8_mask(raw) || !utf8_ok32(raw)) {
        return escape(d, u, k, *k + r, len); /* *k may pass *k + r (UTF-8) */
    }
    const size_t m = r == 32 ? utf8_cut(u + *k, 32) : r;
    const __mmask32 q = _mm256_cmpeq_epi8_mask(raw, _mm256_set1_epi8('"')) |
                        _mm256_cmpeq_epi8_mask(raw, _mm256_set1_epi8('\\'));
    const __m512i out = quoted32(raw, q, _mm512_set1_epi16('\\'));
    const size_t n = m + (size_t)__builtin_popcount(q);
    *k += m;
    /* whole as escape_avx512 stores a block (what follows writes over the
     * rest), or exactly */
    if (len - *k + 1 + n >= 64) {
        _mm512_storeu_si512((void *)d, out);
    } else {
        _mm512_mask_storeu_epi8(d, _bzhi_u64(~0ULL, (unsigned)n), out);
    }
    return d + n;
}

/* Quotes and backslashes 32 input bytes at a time with AVX-512: each byte
 * widened to 16 bits becomes the pair (byte, -) or, when it needs a
 * backslash, ('\\', byte); one compress keeps the bytes that count.  A
 * whole block is loaded whole and stored whole (64 bytes) while what
 * follows overwrites the excess; the last ones, and the last bytes, are
 * loaded and stored masked, so nothing is written past the literal and no
 * byte read past the input.  A block with a byte from 0x80 is checked as
 * UTF-8 and, valid, goes the same way (escape_odd32); one with a control
 * character, DEL or invalid UTF-8 goes to escape().  AVX512BW/VL/VBMI2 (vpcompressb),
 * chosen at run time. */
__attribute__((
    target("avx512f,avx512bw,avx512vl,avx512vbmi2,avx2,bmi2,popcnt"))) static char *
escape_avx512(char *d, const unsigned char *u, size_t len) {
    const __m256i quote = _mm256_set1_epi8('"');
    const __m256i space = _mm256_set1_epi8(0x20);
    const __m256i span = _mm256_set1_epi8(0x5f); /* 0x20 .. 0x7e, less 0x20 */
    __m512i bslash = _mm512_set1_epi16('\\');
    __m256i bslash8 = _mm256_set1_epi8('\\');
#    if defined(__GNUC__)
    /* kept in registers, not rebuilt in each block */
    __asm__("" : "+v"(bslash), "+v"(bslash8));
#    endif
    size_t k = 0;
    /* whole blocks: loaded whole, and stored whole (64 bytes) while what
     * follows writes over the rest - each byte still to come and the
     * closing quote take one at least - so nothing lands past the literal */
    while (len - k >= 32) {
        const __m256i raw = _mm256_loadu_si256((const __m256i *)(const void *)(u + k));
        /* the bytes' classes on 32 bytes, before widening: below 0x20, DEL
         * and from 0x80 are the bytes outside 0x20 .. 0x7e */
        if (_mm256_cmpge_epu8_mask(_mm256_sub_epi8(raw, space), span) != 0) {
            size_t at = k; /* k itself stays in a register */
            d = escape_odd32(d, u, &at, len);
            k = at;
            continue;
        }
        const __mmask32 q =
            _mm256_cmpeq_epi8_mask(raw, quote) | _mm256_cmpeq_epi8_mask(raw, bslash8);
        const __m512i out = quoted32(raw, q, bslash);
        const size_t n = 32 + (size_t)__builtin_popcount(q);
        k += 32;
        if (len - k + 1 + n >= 64) {
            _mm512_storeu_si512((void *)d, out);
        } else {
            _mm512_mask_storeu_epi8(d, _bzhi_u64(~0ULL, (unsigned)n), out);
        }
        d += n;
    }
    if (k == len) {
        return d;
    }
    /* the last bytes: loaded and stored masked */
    const size_t r = len - k;
    const __mmask32 in = (__mmask32)_bzhi_u32(~0u, (unsigned)r);
    const __m256i raw = _mm256_maskz_loadu_epi8(in, u + k);
    if (_mm256_mask_cmpge_epu8_mask(in, _mm256_sub_epi8(raw, space), span) != 0) {
        size_t at = k; /* k itself stays in a register */
        return escape_odd32(d, u, &at, len);
    }
    const __mmask32 q =
        _mm256_cmpeq_epi8_mask(raw, quote) | _mm256_cmpeq_epi8_mask(raw, bslash8);
    const __m512i out = quoted32(raw, q, bslash); /* the 0s past the input: left out */
    const size_t n = r + (size_t)__builtin_popcount(q);
    _mm512_mask_storeu_epi8(d, _bzhi_u64(~0ULL, (unsigned)n), out);
    return d + n;
}

/* The AVX-512 path with its quotes and no checks (sgx_json_escaper, and
 * sgx_json_escape's): one call per string, the blocks inline. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi2,bmi2,popcnt"))) static size_t
escape_lit_avx512(char *dst, const char *p, size_t len) {
    char *d = dst;
    *d++ = '"';
    if (len > 0) {
        d = escape_avx512(d, (const unsigned char *)p, len);
    }
    *d++ = '"';
    return (size_t)(d - dst);
}

/* The escape paths, slowest first, from the library's vector level. */
enum { PATH_SSE2 = 1, PATH_SSSE3, PATH_AVX512 };
static int path_limit; /* 0: no limit (sgx_json_escape_path) */

static int path_of(int level) {
    return level >= SGX_SIMD_AVX512VBMI2 ? PATH_AVX512
           : level >= SGX_SIMD_SSSE3     ? PATH_SSSE3
                                         : PATH_SSE2;
}

static inline int escape_path(void) {
    int p = path_of(sgx_simd_level());
    int lim = __atomic_load_n(&path_limit, __ATOMIC_RELAXED);
    return lim != 0 && lim < p ? lim : p;
}

int sgx_json_escape_path(int max) {
    __atomic_store_n(&path_limit, max, __ATOMIC_RELAXED);
    return escape_path();
}
#else
int sgx_json_escape_path(int max) {
    (void)max;
    return 1; /* PATH_SSE2: the one path here */
}
#endif

/* A bounded @dst: a chunk at a time, what fits is kept, the rest counted.
 * Apart, so the call with room for the worst case keeps a small frame. */
static SG__JSON_NOINLINE size_t escape_bounded(char *dst, size_t cap,
                                               const unsigned char *u, size_t len) {
    char chunk[6 * 64 + 6 * 4];
    size_t i = 0;
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

/* Any other path: sgx_json_escape with the room it always has. */
static size_t escape_lit_any(char *dst, const char *p, size_t len) {
    return sgx_json_escape(dst, SGX_JSON_ESCAPE_MAX(len), p, len);
}

sgx_json_escape_fn sgx_json_escaper(void) {
#ifdef SG__JSON_SSSE3
    if (escape_path() == PATH_AVX512) {
        return escape_lit_avx512;
    }
#endif
    return escape_lit_any;
}

size_t sgx_json_escape(char *dst, size_t cap, const char *p, size_t len) {
    const unsigned char *u = (const unsigned char *)p;
    if (dst == NULL || cap < SGX_JSON_ESCAPE_MAX(len)) {
        return escape_bounded(dst, cap, u, len);
    }
    /* room for the worst case: straight into @dst */
    if (len == 0) {
        memcpy(dst, "\"\"", 2);
        return 2;
    }
#ifdef SG__JSON_SSSE3
    const int path = escape_path();
    if (path == PATH_AVX512) {
        return escape_lit_avx512(dst, p, len); /* its one caller: inline */
    }
#endif
    char *d = dst;
    *d++ = '"';
#ifdef SG__JSON_SSSE3
    /* the closing quote's byte is not room for the blocks */
    switch (path) {
    case PATH_SSSE3:
        d = escape_ssse3(d, dst + cap - 1, u, len);
        break;
    default: {
        size_t i = 0;
        d = escape(d, u, &i, len, len);
        break;
    }
    }
#else
    size_t i = 0;
    d = escape(d, u, &i, len, len);
#endif
    *d++ = '"';
    return (size_t)(d - dst);
}
