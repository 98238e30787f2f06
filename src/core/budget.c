/* The operation budget: one absolute deadline, leased out, never extended. */
#include "core/internal.h"

#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(sg_budget) == 48, "sg_budget is 48 bytes on LP64 (fixed for 1.x)");
#endif

int sg_budget_start(sg_budget *budget, int64_t now, int64_t total_ns, int64_t floor_ns) {
    if (budget == NULL || total_ns <= 0 || floor_ns < 0) {
        return SG_EINVAL;
    }
    if (total_ns > SG_DURATION_MAX || floor_ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    budget->start_ = now;
    budget->deadline_ = sg_time_add(now, total_ns);
    budget->floor_ = floor_ns;
    budget->magic_ = SG__BUDGET_MAGIC;
    budget->pad_ = 0;
    return 0;
}

int sg_budget_start_until(sg_budget *budget, int64_t now, int64_t deadline,
                          int64_t floor_ns) {
    if (budget == NULL || floor_ns < 0) {
        return SG_EINVAL;
    }
    if (floor_ns > SG_DURATION_MAX ||
        (deadline > now && sg_time_add(now, SG_DURATION_MAX) < deadline)) {
        return SG_ERANGE;
    }
    budget->start_ = now;
    /* A deadline already passed is a budget with nothing left, not an
     * error: an inbound deadline may be spent by the time it arrives. */
    budget->deadline_ = deadline > now ? deadline : now;
    budget->floor_ = floor_ns;
    budget->magic_ = SG__BUDGET_MAGIC;
    budget->pad_ = 0;
    return 0;
}

int sg_budget_child(const sg_budget *parent, int64_t now, int64_t limit_ns,
                    sg_budget *child) {
    if (!sg__budget_started(parent) || child == NULL || limit_ns <= 0) {
        return SG_EINVAL;
    }
    if (limit_ns != SG_TIME_NEVER && limit_ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    int64_t remaining = sg_budget_remaining(parent, now);
    if (remaining <= 0) {
        return SG_EREFUSED;
    }
    int64_t deadline = parent->deadline_;
    if (limit_ns != SG_TIME_NEVER) {
        deadline = sg_time_min(deadline, sg_time_add(now, limit_ns));
    }
    int64_t total = deadline - now; /* > 0: both terms are after now */
    child->start_ = now;
    child->deadline_ = deadline;
    /* A floor as large as the whole child would refuse every lease. */
    child->floor_ = parent->floor_ < total ? parent->floor_ : 0;
    child->magic_ = SG__BUDGET_MAGIC;
    child->pad_ = 0;
    return 0;
}

int64_t sg_budget_deadline(const sg_budget *budget) {
    return sg__budget_started(budget) ? budget->deadline_ : -1;
}

int64_t sg_budget_floor(const sg_budget *budget) {
    return sg__budget_started(budget) ? budget->floor_ : -1;
}

int64_t sg_budget_started_at(const sg_budget *budget) {
    return sg__budget_started(budget) ? budget->start_ : -1;
}

int64_t sg_budget_remaining(const sg_budget *budget, int64_t now) {
    if (!sg__budget_started(budget)) {
        return -1;
    }
    if (now >= budget->deadline_) {
        return 0;
    }
    if (budget->deadline_ == SG_TIME_NEVER) {
        return SG_TIME_NEVER;
    }
    /* now < deadline, but now may be far in the past: saturate. */
    if (now < 0 && budget->deadline_ > INT64_MAX + now) {
        return INT64_MAX;
    }
    return budget->deadline_ - now;
}

int sg_budget_lease(const sg_budget *budget, int64_t now, int64_t wanted_ns,
                    int64_t *granted_ns) {
    if (granted_ns != NULL) {
        *granted_ns = 0;
    }
    if (!sg__budget_started(budget) || granted_ns == NULL || wanted_ns <= 0) {
        return SG_EINVAL;
    }
    if (wanted_ns != SG_TIME_NEVER && wanted_ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    int64_t remaining = sg_budget_remaining(budget, now);
    if (remaining <= budget->floor_) {
        return SG_EREFUSED;
    }
    int64_t available = remaining - budget->floor_;
    *granted_ns = wanted_ns < available ? wanted_ns : available;
    return 0;
}
