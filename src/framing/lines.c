/*
 * The out-of-line half of the shared line splitter (see lines.h).
 */
#include "framing/lines.h"

#include <stdint.h>

#include "sgx/simd.h"
#include "framing/mem.h"

void sg__lines_init(sg__lines *ls, char *buf, size_t cap) {
    memset(ls, 0, sizeof(*ls));
    ls->buf_ = buf;
    ls->cap_ = cap;
    ls->room_ = cap;
}

void sg__lines_init_mem(sg__lines *ls, const sg_mem *mem, size_t cap) {
    memset(ls, 0, sizeof(*ls));
    ls->cap_ = cap;
    ls->mem_ = mem;
}

int sg__lines_grow(sg__lines *ls, size_t need) {
    char *p = sg__mem_grow(ls->mem_, ls->buf_, &ls->room_, need, ls->cap_);
    if (p == NULL) {
        return SG_ENOMEM;
    }
    ls->buf_ = p;
    return 0;
}

void sg__lines_trim(sg__lines *ls) {
    if (ls->len_ == 0 && ls->mem_ != NULL) {
        ls->buf_ = sg__mem_free(ls->mem_, ls->buf_, &ls->room_);
    }
}

void sg__lines_drop(sg__lines *ls) {
    ls->len_ = 0;
    ls->skip_lf_ = false;
    /* A held BOM prefix is part of the dropped line. */
    ls->bom_ = 3;
    sg__lines_trim(ls);
}

void sg__lines_reset(sg__lines *ls) {
    ls->len_ = 0;
    ls->skip_lf_ = false;
    ls->bom_ = 0;
    sg__lines_trim(ls);
}

bool sg__lines_partial(const sg__lines *ls) {
    return ls->len_ > 0 || (ls->bom_ > 0 && ls->bom_ < 3);
}

sg__lines_eol_fn sg__lines_eol_at(int level) {
#ifdef SG__LINES_WIDE
    if (level >= SGX_SIMD_AVX512BW) {
        return sg__eol_avx512;
    }
    if (level >= SGX_SIMD_AVX2) {
        return sg__eol_avx2;
    }
#endif
    return sg__eol_sse2;
}
