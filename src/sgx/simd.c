/*
 * The x86-64 vector level the scanners run at, asked of the CPU once
 * (GCC/Clang's __builtin_cpu_supports), capped for tests.
 */
#include "sgx/simd.h"

int sgx_simd_now;       /* the level in use; 0: not asked yet */
static int level_limit; /* 0: no limit */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
static int best_level(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("popcnt")) {
        return SGX_SIMD_SSE2;
    }
    if (__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2")) {
        return __builtin_cpu_supports("avx512vbmi2") ? SGX_SIMD_AVX512VBMI2
                                                     : SGX_SIMD_AVX512BW;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2")) {
        return SGX_SIMD_AVX2;
    }
    return __builtin_cpu_supports("ssse3") ? SGX_SIMD_SSSE3 : SGX_SIMD_SSE2;
}
#else
static int best_level(void) {
    return SGX_SIMD_SSE2; /* the portable code only */
}
#endif

/* A race asks twice, and both store the same. */
int sgx_simd_ask(void) {
    int best = best_level();
    int lim = __atomic_load_n(&level_limit, __ATOMIC_RELAXED);
    int level = lim != 0 && lim < best ? lim : best;
    __atomic_store_n(&sgx_simd_now, level, __ATOMIC_RELAXED);
    return level;
}

int sgx_simd_limit(int max) {
    __atomic_store_n(&level_limit, max, __ATOMIC_RELAXED);
    return sgx_simd_ask();
}
