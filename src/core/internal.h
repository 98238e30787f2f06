/* Private helpers shared by the core's translation units. */
#ifndef SG_CORE_INTERNAL_H
#define SG_CORE_INTERNAL_H

#include <streamguard/core.h>

/* Marks a started budget, so a zeroed one is refused instead of being read
 * as "deadline 0, everything expired". */
#define SG__BUDGET_MAGIC 0x53474275u /* "SGBu" */

static inline bool sg__budget_started(const sg_budget *b) {
    return b != NULL && b->magic_ == SG__BUDGET_MAGIC;
}

/* The sg_json_escape path in use: 1 SSE2 (and bytes), 2 SSSE3, 3 AVX-512.
 * @max > 0 limits it to that one at most (for tests and benchmarks, set
 * while nothing escapes); 0 lifts the limit.  Returns the path now used. */
int sg__json_escape_path(int max);

#endif
