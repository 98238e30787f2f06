/*
 * The x86-64 vector level the scanners run at (simd.c): the framing's
 * line and SSE scanners and the JSON escaping, in the library and in the
 * programs alike.  Part of src/sgx/: code the library and its programs
 * share, compiled into both and never exported (docs/design.md, Layers).
 */
#ifndef SGX_SIMD_H
#define SGX_SIMD_H

/* The levels the scanners choose from at run time, slowest first
 * (elsewhere, SSE2 names the portable code).  Each includes the ones
 * before it, and from SSSE3 on also POPCNT; AVX2 also BMI2, AVX512BW also
 * AVX512VL. */
enum {
    SGX_SIMD_SSE2 = 1,
    SGX_SIMD_SSSE3,
    SGX_SIMD_AVX2,
    SGX_SIMD_AVX512BW,
    SGX_SIMD_AVX512VBMI2,
};

/* The level in use: the CPU's best (asked once), or the limit if lower.
 * Inline: a scanner may ask per call. */
extern int sgx_simd_now; /* 0: not asked yet */
int sgx_simd_ask(void);
static inline int sgx_simd_level(void) {
    int level = __atomic_load_n(&sgx_simd_now, __ATOMIC_RELAXED);
    return level != 0 ? level : sgx_simd_ask();
}

/* Caps the level at @max (> 0; for tests and benchmarks, set while nothing
 * scans), 0 lifts the cap.  Returns the level now in use. */
int sgx_simd_limit(int max);

#endif
