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

/* A token's byte (tchar, RFC 9110 §5.6.2): HTTP methods, field names. */
static inline bool sg__tchar(unsigned char c) {
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        return true;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

#endif
