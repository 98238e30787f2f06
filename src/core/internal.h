/* Private helpers shared by the core's translation units. */
#ifndef SG_CORE_INTERNAL_H
#define SG_CORE_INTERNAL_H

#include <stdbool.h>
#include <string.h>

#include <streamguard/core.h>

/* Marks a started budget, so a zeroed one is refused instead of being read
 * as "deadline 0, everything expired". */
#define SG__BUDGET_MAGIC 0x53474275u /* "SGBu" */

static inline bool sg__budget_started(const sg_budget *b) {
    return b != NULL && b->magic_ == SG__BUDGET_MAGIC;
}

/* A token's byte (tchar, RFC 9110 §5.6.2): HTTP methods, field names. */
static inline bool sg__tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        return true;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

#endif
