/*
 * The out-of-line half of the shared line splitter (see lines.h).
 */
#include "framing/lines.h"

#include <stdint.h>

#include "core/internal.h"

void sg__lines_init(sg__lines *ls, char *buf, size_t cap) {
    memset(ls, 0, sizeof(*ls));
    ls->buf_ = buf;
    ls->cap_ = cap;
}

void sg__lines_drop(sg__lines *ls) {
    ls->len_ = 0;
    ls->skip_lf_ = false;
    /* A held BOM prefix is part of the dropped line. */
    ls->bom_ = 3;
}

void sg__lines_reset(sg__lines *ls) {
    ls->len_ = 0;
    ls->skip_lf_ = false;
    ls->bom_ = 0;
}

bool sg__lines_partial(const sg__lines *ls) {
    return ls->len_ > 0 || (ls->bom_ > 0 && ls->bom_ < 3);
}

/* ------------------------------------------------ the CR-or-LF search */

/* Portable (SSE2 is x86-64's baseline): 64 bytes per branch, then 16,
 * then bytes. */
static const char *eol_sse2(const char *p, const char *end) {
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
#    include <immintrin.h>
#    define SG__LINES_WIDE 1

/* AVX2: 64 bytes per branch in two registers; the tail to the SSE2 code. */
__attribute__((target("avx2,bmi2"))) static const char *eol_avx2(const char *p,
                                                                 const char *end) {
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
    return eol_sse2(p, end);
}

/* AVX-512BW: 64 bytes per compare into a mask; the tail by a masked load,
 * which reads nothing past @end. */
__attribute__((target("avx512f,avx512bw,bmi2"))) static const char *
eol_avx512(const char *p, const char *end) {
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

sg__lines_eol_fn sg__lines_eol(void) {
#ifdef SG__LINES_WIDE
    int level = sg__simd_level();
    if (level >= SG__SIMD_AVX512BW) {
        return eol_avx512;
    }
    if (level >= SG__SIMD_AVX2) {
        return eol_avx2;
    }
#endif
    return eol_sse2;
}
