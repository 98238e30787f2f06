/*
 * The line splitter shared by the SSE and NDJSON parsers: one piece of code
 * for BOM stripping, CR/LF/CRLF handling across reads, the partial-line
 * buffer and the max-line check.
 *
 * sg__lines_scan() is static inline so each parser gets a copy specialised
 * for its line-end rule and its line callback (no indirect call per line).
 *
 * A line handed to the callback is a view into the caller's chunk, or into
 * the splitter's buffer when it spans reads.  The buffer view stays valid
 * until sg__lines_keep() runs at the end of the feed, so a parser that keeps
 * views across lines (SSE event fields) must copy them out before that.
 */
#ifndef SG_FRAMING_LINES_H
#define SG_FRAMING_LINES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <streamguard/framing.h>

#if defined(__SSE2__) && defined(__GNUC__)
#    include <emmintrin.h>
#    define SG__LINES_SSE2 1
#endif
#if defined(SG__LINES_SSE2) && defined(__x86_64__)
#    include <immintrin.h>
#endif

/* A line callback's "stop here, no error" answer (the SSE terminal). */
#define SG__LINES_STOP 1
/* A line callback's "pause here, no error": the caller looks at the rest
 * of the chunk itself (SSE's fast path after a dispatch), and may call
 * sg__lines_scan() again on it. */
#define SG__LINES_YIELD 2

/* Below this many bytes an inline scan beats two memchr calls. */
#define SG__LINES_SMALL 64

void sg__lines_init(sg__lines *ls, char *buf, size_t cap);
/* A splitter whose buffer grows from @mem as a partial line needs it, up to
 * @cap, and is freed when none is held (mem.h). */
void sg__lines_init_mem(sg__lines *ls, const sg_mem *mem, size_t cap);
/* Room for @need bytes of partial line (@need <= cap_): 0, or SG_ENOMEM. */
int sg__lines_grow(sg__lines *ls, size_t need);
/* A growing buffer that holds no partial line is freed. */
void sg__lines_trim(sg__lines *ls);
/* Drops the partial line and the CR memory; keeps a finished BOM check. */
void sg__lines_drop(sg__lines *ls);
/* Back to the start of a stream (a BOM may follow again). */
void sg__lines_reset(sg__lines *ls);
/* true when bytes of an unterminated line (or of a possible BOM) are held. */
bool sg__lines_partial(const sg__lines *ls);

/* The first CR or LF in [p, end), or end, at the widest vector level the
 * CPU has (sgx_simd_level): 64 bytes per branch, and no byte read past end.
 * Asked once per chunk, called per line. */
typedef const char *(*sg__lines_eol_fn)(const char *p, const char *end);
/* The search for @level (sgx_simd_level()). */
sg__lines_eol_fn sg__lines_eol_at(int level);

#ifdef SG__LINES_SSE2
/* The 16-byte blocks' mask of LF (and of CR when @cr) at @p. */
static inline unsigned sg__lines_mask16(const char *p, bool cr) {
    const __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i m = _mm_cmpeq_epi8(x, _mm_set1_epi8('\n'));
    if (cr) {
        m = _mm_or_si128(m, _mm_cmpeq_epi8(x, _mm_set1_epi8('\r')));
    }
    return (unsigned)_mm_movemask_epi8(m);
}
#endif

/* The first LF (or CR, when @cr) in [p, stop) by SSE2 blocks, four per
 * branch: most of a line has neither.  Returns it, or where the whole
 * blocks ended (fewer than 16 bytes before @stop, not yet looked at). */
static inline const char *sg__lines_blocks(const char *p, const char *stop, bool cr,
                                           bool *found) {
    *found = false;
#ifdef SG__LINES_SSE2
    while (stop - p >= 64) {
        unsigned m0 = sg__lines_mask16(p, cr);
        unsigned m1 = sg__lines_mask16(p + 16, cr);
        unsigned m2 = sg__lines_mask16(p + 32, cr);
        unsigned m3 = sg__lines_mask16(p + 48, cr);
        if ((m0 | m1 | m2 | m3) != 0) {
            uint64_t mask = (uint64_t)m0 | (uint64_t)m1 << 16 | (uint64_t)m2 << 32 |
                            (uint64_t)m3 << 48;
            *found = true;
            return p + __builtin_ctzll(mask);
        }
        p += 64;
    }
    while (stop - p >= 16) {
        unsigned mask = sg__lines_mask16(p, cr);
        if (mask != 0) {
            *found = true;
            return p + __builtin_ctz(mask);
        }
        p += 16;
    }
#else
    (void)stop;
    (void)cr;
#endif
    return p;
}

/* ------------------------------------------------ the CR-or-LF search */

/* Portable (SSE2 is x86-64's baseline): 64 bytes per branch, then 16,
 * then bytes. */
static inline const char *sg__eol_sse2(const char *p, const char *end) {
    bool found;
    p = sg__lines_blocks(p, end, true, &found);
    if (found) {
        return p;
    }
    for (; p < end; p++) {
        if (*p == '\n' || *p == '\r') {
            return p;
        }
    }
    return end;
}

#if defined(SG__LINES_SSE2) && defined(__x86_64__)
#    define SG__LINES_WIDE 1

/* AVX2: 64 bytes per branch in two registers; the tail to the SSE2 code. */
__attribute__((target("avx2,bmi2"))) static inline const char *
sg__eol_avx2(const char *p, const char *end) {
    const __m256i vlf = _mm256_set1_epi8('\n');
    const __m256i vcr = _mm256_set1_epi8('\r');
    while (end - p >= 64) {
        __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)p);
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
        __m256i ma =
            _mm256_or_si256(_mm256_cmpeq_epi8(a, vlf), _mm256_cmpeq_epi8(a, vcr));
        __m256i mb =
            _mm256_or_si256(_mm256_cmpeq_epi8(b, vlf), _mm256_cmpeq_epi8(b, vcr));
        if (!_mm256_testz_si256(_mm256_or_si256(ma, mb), _mm256_or_si256(ma, mb))) {
            uint64_t mask = (uint64_t)(uint32_t)_mm256_movemask_epi8(ma) |
                            (uint64_t)(uint32_t)_mm256_movemask_epi8(mb) << 32;
            return p + __builtin_ctzll(mask);
        }
        p += 64;
    }
    return sg__eol_sse2(p, end);
}

/* AVX-512BW: 64 bytes per compare into a mask; the tail by a masked load,
 * which reads nothing past @end. */
__attribute__((target("avx512f,avx512bw,bmi2"))) static inline const char *
sg__eol_avx512(const char *p, const char *end) {
    const __m512i vlf = _mm512_set1_epi8('\n');
    const __m512i vcr = _mm512_set1_epi8('\r');
    while (end - p >= 64) {
        __m512i x = _mm512_loadu_si512((const void *)p);
        __mmask64 m = _mm512_cmpeq_epi8_mask(x, vlf) | _mm512_cmpeq_epi8_mask(x, vcr);
        if (m != 0) {
            return p + __builtin_ctzll(m);
        }
        p += 64;
    }
    if (p < end) {
        __m512i x = _mm512_maskz_loadu_epi8(_bzhi_u64(~0ULL, (unsigned)(end - p)), p);
        __mmask64 m = _mm512_cmpeq_epi8_mask(x, vlf) | _mm512_cmpeq_epi8_mask(x, vcr);
        if (m != 0) {
            return p + __builtin_ctzll(m);
        }
    }
    return end;
}
#endif

/* ------------------------------------- the CR-or-LF mask of a block */

/*
 * The CR and LF bytes of the 64-byte block at @p as a mask: bit i for
 * p[i], for the bytes before @end only (@p < @end), and nothing read at or
 * past @end.  The SSE fast path walks a chunk's line ends by these masks,
 * each block's made once: the next line end is then a shift and a count on
 * a mask already made, not a search that must wait for the line before to
 * be found (which is what a search per line costs on a stream of short
 * events: its load, compare and count, one after the other, per event).
 */
typedef uint64_t (*sg__lines_mask_fn)(const char *p, const char *end);

/* Byte by byte: the tail of a chunk, and CPUs without SSE2. */
static inline uint64_t sg__eolmask_bytes(const char *p, const char *end) {
    const size_t n = end - p < 64 ? (size_t)(end - p) : 64;
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n' || p[i] == '\r') {
            m |= (uint64_t)1 << i;
        }
    }
    return m;
}

#ifdef SG__LINES_SSE2
static inline uint64_t sg__eolmask_sse2(const char *p, const char *end) {
    if (end - p < 64) {
        return sg__eolmask_bytes(p, end); /* once per chunk */
    }
    return (uint64_t)sg__lines_mask16(p, true) |
           (uint64_t)sg__lines_mask16(p + 16, true) << 16 |
           (uint64_t)sg__lines_mask16(p + 32, true) << 32 |
           (uint64_t)sg__lines_mask16(p + 48, true) << 48;
}
#endif

#ifdef SG__LINES_WIDE
__attribute__((target("avx2,bmi2"))) static inline uint64_t
sg__eolmask_avx2(const char *p, const char *end) {
    if (end - p < 64) {
        return sg__eolmask_bytes(p, end); /* once per chunk */
    }
    const __m256i vlf = _mm256_set1_epi8('\n');
    const __m256i vcr = _mm256_set1_epi8('\r');
    __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)p);
    __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(p + 32));
    __m256i ma = _mm256_or_si256(_mm256_cmpeq_epi8(a, vlf), _mm256_cmpeq_epi8(a, vcr));
    __m256i mb = _mm256_or_si256(_mm256_cmpeq_epi8(b, vlf), _mm256_cmpeq_epi8(b, vcr));
    return (uint64_t)(uint32_t)_mm256_movemask_epi8(ma) |
           (uint64_t)(uint32_t)_mm256_movemask_epi8(mb) << 32;
}

/* The last block by a masked load: its bytes past @end read as 0. */
__attribute__((target("avx512f,avx512bw,bmi2"))) static inline uint64_t
sg__eolmask_avx512(const char *p, const char *end) {
    const __m512i x =
        end - p >= 64 ? _mm512_loadu_si512((const void *)p)
                      : _mm512_maskz_loadu_epi8(_bzhi_u64(~0ULL, (unsigned)(end - p)), p);
    return _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('\n')) |
           _mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8('\r'));
}
#endif

/* The first LF in [p, end), or end.  Lines of a few hundred bytes (a
 * model's chunk) are found sooner by 16-byte blocks than by a library call
 * per line; memchr takes over for a line longer than that. */
static inline const char *sg__lines_find_lf(const char *p, const char *end) {
    bool found;
    p = sg__lines_blocks(p, end - p > 512 ? p + 512 : end, false, &found);
    if (found) {
        return p;
    }
    const char *f = memchr(p, '\n', (size_t)(end - p));
    return f != NULL ? f : end;
}

/*
 * Finds the first CR or LF in [p, end) when @cr_eol, or the first LF else;
 * returns end when there is none.  A long span goes to @eol (the CR-or-LF
 * search of sg__lines_eol_at; required when @cr_eol) or to
 * sg__lines_find_lf.
 */
static inline const char *sg__lines_find(const char *p, const char *end, bool cr_eol,
                                         sg__lines_eol_fn eol) {
    if ((size_t)(end - p) < SG__LINES_SMALL) {
        /* Short reads (a token at a time) are common; a call would cost
         * more than looking at a few bytes. */
#ifdef SG__LINES_SSE2
        /* SSE2 is baseline on x86-64: 16 bytes per step, both bytes at
         * once.  Only whole blocks inside [p, end) are loaded. */
        while (end - p >= 16) {
            unsigned mask = sg__lines_mask16(p, cr_eol);
            if (mask != 0) {
                return p + __builtin_ctz(mask);
            }
            p += 16;
        }
#endif
        for (; p < end; p++) {
            if (*p == '\n' || (cr_eol && *p == '\r')) {
                return p;
            }
        }
        return end;
    }
    return cr_eol ? eol(p, end) : sg__lines_find_lf(p, end);
}

/*
 * The fast path for a short read that ends no line (a token at a time):
 * when [data, data + len) holds no CR/LF (no LF when !@cr_eol) and the
 * splitter is in its plain state, appends it to the partial line and
 * returns true.  Returns false, having changed nothing, in every other case
 * (a line end, a pending BOM or CR decision, or too little room); the caller
 * then takes the general path, which also reports the errors.
 */
static inline bool sg__lines_append_small(sg__lines *ls, const char *data, size_t len,
                                          bool cr_eol) {
    if (len > 16 || ls->bom_ != 3 || ls->skip_lf_ || len > ls->room_ - ls->len_) {
        return false; /* (room_ <= cap_: a growing buffer grows elsewhere) */
    }
#ifdef SG__LINES_SSE2
    if (len == 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)data);
        __m128i m = _mm_cmpeq_epi8(x, _mm_set1_epi8('\n'));
        if (cr_eol) {
            m = _mm_or_si128(m, _mm_cmpeq_epi8(x, _mm_set1_epi8('\r')));
        }
        if (_mm_movemask_epi8(m) != 0) {
            return false;
        }
        _mm_storeu_si128((__m128i *)(void *)(ls->buf_ + ls->len_), x);
        ls->len_ += 16;
        return true;
    }
#endif
    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\n' || (cr_eol && data[i] == '\r')) {
            return false;
        }
    }
    memcpy(ls->buf_ + ls->len_, data, len);
    ls->len_ += len;
    return true;
}

/*
 * Appends the unterminated tail of a chunk to the partial line.  Returns 0
 * or SG_ELINE_TOO_LONG, caught before the terminator arrives so memory stays
 * bounded even when a peer never ends its line.  Inline, with fixed-size
 * copies for short tails: with one small read per token this runs per read.
 */
static inline int sg__lines_keep(sg__lines *ls, const char *tail, size_t n) {
    if (n == 0) {
        return 0; /* (a growing buffer may be NULL: no offset from it) */
    }
    if (n > ls->cap_ - ls->len_) {
        return SG_ELINE_TOO_LONG;
    }
    if (n > ls->room_ - ls->len_ && sg__lines_grow(ls, ls->len_ + n) != 0) {
        return SG_ENOMEM;
    }
    char *dst = ls->buf_ + ls->len_;
    if (n >= 8 && n <= 16) {
        /* Two overlapping 8-byte moves; the compiler emits plain loads. */
        memcpy(dst, tail, 8);
        memcpy(dst + n - 8, tail + n - 8, 8);
    } else if (n < 8) {
        for (size_t i = 0; i < n; i++) {
            dst[i] = tail[i];
        }
    } else {
        memcpy(dst, tail, n);
    }
    ls->len_ += n;
    return 0;
}

/*
 * Splits [data, data + len) into lines and calls on_line(ctx, line, n) for
 * each complete one (terminator excluded).  Stops early when on_line returns
 * non-zero and returns that value; returns 0 when the input ran out.  In
 * both cases *done is the offset of the first byte not yet consumed: the
 * caller passes [done, len) to sg__lines_keep() after a 0 return; after
 * SG__LINES_YIELD it may scan [done, len) again.  @eol: sg__lines_find's.
 *
 * @cr_eol: a lone CR ends a line (SSE).  Else only LF does (NDJSON).
 * Errors: SG_ELINE_TOO_LONG for a complete line longer than the cap.
 */
static inline int sg__lines_scan(sg__lines *ls, const char *data, size_t len, bool cr_eol,
                                 int (*on_line)(void *ctx, const char *line, size_t n),
                                 void *ctx, size_t *done, sg__lines_eol_fn eol) {
    static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
    const char *p = data;
    const char *end = data + len;

    if (len == 0) {
        *done = 0;
        return 0;
    }
    if (ls->bom_ < 3) {
        /* The BOM may itself be split across reads, so match it byte by
         * byte and hold the matched prefix until it is decided. */
        while (p < end && ls->bom_ < 3 && (unsigned char)*p == bom[ls->bom_]) {
            ls->bom_++;
            p++;
        }
        if (ls->bom_ < 3) {
            if (p == end) {
                *done = len;
                return 0;
            }
            /* Not a BOM: the held bytes start the first line. */
            if (ls->bom_ > ls->room_ - ls->len_ &&
                sg__lines_grow(ls, ls->len_ + ls->bom_) != 0) {
                return SG_ENOMEM;
            }
            if (ls->bom_ > 0) {
                memcpy(ls->buf_ + ls->len_, bom, ls->bom_);
                ls->len_ += ls->bom_;
            }
            ls->bom_ = 3;
        }
    }
    if (ls->skip_lf_) {
        /* The previous read ended in CR: a leading LF completes that CRLF
         * and is not a blank line. */
        ls->skip_lf_ = false;
        if (p < end && *p == '\n') {
            p++;
        }
    }
    while (p < end) {
        const char *at = sg__lines_find(p, end, cr_eol, eol);
        if (at == end) {
            break;
        }
        size_t n = (size_t)(at - p);
        const char *after = at + 1;
        if (*at == '\r') {
            if (after < end) {
                if (*after == '\n') {
                    after++;
                }
            } else {
                ls->skip_lf_ = true;
            }
        }
        const char *line = p;
        if (ls->len_ > 0) {
            if (n > ls->cap_ - ls->len_) {
                return SG_ELINE_TOO_LONG;
            }
            if (n > ls->room_ - ls->len_ && sg__lines_grow(ls, ls->len_ + n) != 0) {
                return SG_ENOMEM;
            }
            memcpy(ls->buf_ + ls->len_, p, n);
            line = ls->buf_;
            n += ls->len_;
            ls->len_ = 0;
        } else if (n > ls->cap_) {
            return SG_ELINE_TOO_LONG;
        }
        p = after;
        int rc = on_line(ctx, line, n);
        if (rc != 0) {
            *done = (size_t)(p - data);
            return rc;
        }
    }
    *done = (size_t)(p - data);
    return 0;
}

#endif /* SG_FRAMING_LINES_H */
