/* Private helpers shared by the core's translation units. */
#ifndef SG_CORE_INTERNAL_H
#define SG_CORE_INTERNAL_H

#include <stdbool.h>
#include <string.h>

#include <streamguard/core.h>

/* Marks a started budget, so a zeroed one is refused instead of being read
 * as "deadline 0, everything expired". */
/*
 * The whole body of a setter whose option needs no check: SG_EINVAL for a
 * NULL @obj, else @value into @obj->@field and 0.  The public setters are
 * many and alike (one per option); this keeps each to its signature and
 * one line.
 */
#define SG__SET(obj, field, value) \
    do {                           \
        if ((obj) == NULL) {       \
            return SG_EINVAL;      \
        }                          \
        (obj)->field = (value);    \
        return 0;                  \
    } while (0)

/* Copies counters (@src, @full bytes, its size field first) into the
 * caller's size-first struct @dst: as much as @dst's own size holds (an
 * older caller's struct is smaller).  0, or SG_EINVAL (@dst NULL or its
 * size too small to hold even the size). */
int sg__stats_copy(void *dst, const void *src, size_t full);

#define SG__BUDGET_MAGIC 0x53474275u /* "SGBu" */

static inline bool sg__budget_started(const sg_budget *b) {
    return b != NULL && b->magic_ == SG__BUDGET_MAGIC;
}

/* The getters of a guard config: public in <streamguard/unstable/op.h>
 * (for transports), which the core's own view does not see; declared here
 * the same way so the definitions have their prototypes (a unit that sees
 * both checks that they agree). */
SG_EXTERN int64_t sg_guard_config_connect_timeout(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_first_item_timeout(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_idle_timeout(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_stream_timeout(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_attempt_timeout(const sg_guard_config *cfg);
SG_EXTERN uint64_t sg_guard_config_max_items(const sg_guard_config *cfg);
SG_EXTERN uint64_t sg_guard_config_max_bytes(const sg_guard_config *cfg);

/* Whether @c names a function of its own (else it is the system clock). */
static inline bool sg__clock_custom(const sg_clock *c) {
    return c != NULL && c->now_ != NULL;
}

/* A guard sg_guard_start ever started (a zeroed one has state 0). */
static inline bool sg__guard_started(const sg_guard *g) {
    return g != NULL && g->state_ != 0;
}

/* The x86-64 vector levels the scanners choose from at run time, slowest
 * first (elsewhere, SSE2 names the portable code).  Each includes the ones
 * before it, and from SSSE3 on also POPCNT; AVX2 also BMI2, AVX512BW also
 * AVX512VL. */
enum {
    SG__SIMD_SSE2 = 1,
    SG__SIMD_SSSE3,
    SG__SIMD_AVX2,
    SG__SIMD_AVX512BW,
    SG__SIMD_AVX512VBMI2,
};
/* The level in use: the CPU's best (asked once), or the limit if lower.
 * Inline: a scanner may ask per call. */
extern int sg__simd_now; /* 0: not asked yet */
int sg__simd_ask(void);
static inline int sg__simd_level(void) {
    int level = __atomic_load_n(&sg__simd_now, __ATOMIC_RELAXED);
    return level != 0 ? level : sg__simd_ask();
}
/* Caps the level at @max (> 0; for tests and benchmarks, set while nothing
 * scans), 0 lifts the cap.  Returns the level now in use. */
int sg__simd_limit(int max);

/* The sg_json_escape path in use: 1 SSE2 (and bytes), 2 SSSE3, 3 AVX-512.
 * @max > 0 limits it to that one at most (for tests and benchmarks, set
 * while nothing escapes); 0 lifts the limit.  Returns the path now used. */
int sg__json_escape_path(int max);

/* A token's byte (tchar, RFC 9110 §5.6.2): HTTP methods, field names. */
static inline bool sg__tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        return true;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

#endif
