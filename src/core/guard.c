/*
 * The stream guard: the clocks of one attempt under its operation's budget.
 *
 * Cost model: the guard keeps the earliest live deadline cached in next_, so
 * the hot calls (on_item, on_bytes, next_deadline) are a compare and a few
 * mins; which clock expired is worked out only on the cold path, once.
 * An item stamps the idle deadline (a timestamp per item) instead of
 * re-arming any timer: the event loop reads next_deadline when it waits.
 */
#include "core/internal.h"

#include <string.h>

/*
 * sg_guard's private fields (core.h): next_ the earliest live deadline
 * (cached); start_ the guard's start; connect_dl_, first_dl_, idle_dl_
 * (last item + idle), stream_dl_, attempt_dl_ and budget_dl_ the
 * deadlines; idle_ns_ the idle duration (0 = off); fixed_ min(stream,
 * attempt, budget); first_item_at_ the first item's instant (-1 none);
 * items_, bytes_ and the caps; state_ (below), phase_, outcome_ (latched),
 * flags_ (HAS_IDLE).
 */
enum {
    GUARD_IDLE = 0, /* zeroed, never started */
    GUARD_RUNNING = 1,
    GUARD_STOPPED = 2, /* an expiry or a cap is latched in outcome_ */
    GUARD_FINISHED = 3,
};

enum {
    HAS_IDLE = 1u << 0,
};

/* Layout matters: the guard is embedded per stream.  The sizes of the
 * structs a caller embeds are the ABI's, fixed for 1.x
 * (tests/unit/abi_sizes_test.c prints them). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(sg_guard) == 160, "sg_guard is 160 bytes on LP64");
_Static_assert(sizeof(sg_guard_config) == 88, "sg_guard_config is 88 bytes on LP64");
#endif

void sg_guard_config_init(sg_guard_config *cfg) {
    if (cfg != NULL) {
        memset(cfg, 0, sizeof(*cfg));
    }
}

static int check_duration(int64_t ns) {
    if (ns <= 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    return 0;
}

/* One setter body for every clock: validate, then store. */
static int set_clock(sg_guard_config *cfg, int64_t *field, int64_t ns) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    int rv = check_duration(ns);
    if (rv == 0) {
        *field = ns;
    }
    return rv;
}

int sg_guard_config_set_connect_timeout(sg_guard_config *cfg, int64_t ns) {
    return set_clock(cfg, cfg ? &cfg->connect_ns_ : NULL, ns);
}

int sg_guard_config_set_first_item_timeout(sg_guard_config *cfg, int64_t ns) {
    return set_clock(cfg, cfg ? &cfg->first_item_ns_ : NULL, ns);
}

int sg_guard_config_set_idle_timeout(sg_guard_config *cfg, int64_t ns) {
    return set_clock(cfg, cfg ? &cfg->idle_ns_ : NULL, ns);
}

int sg_guard_config_set_stream_timeout(sg_guard_config *cfg, int64_t ns) {
    return set_clock(cfg, cfg ? &cfg->stream_total_ns_ : NULL, ns);
}

int sg_guard_config_set_attempt_timeout(sg_guard_config *cfg, int64_t ns) {
    return set_clock(cfg, cfg ? &cfg->attempt_ns_ : NULL, ns);
}

void sg_guard_config_clear_clocks(sg_guard_config *cfg) {
    if (cfg == NULL) {
        return;
    }
    cfg->connect_ns_ = 0;
    cfg->first_item_ns_ = 0;
    cfg->idle_ns_ = 0;
    cfg->stream_total_ns_ = 0;
    cfg->attempt_ns_ = 0;
}

int sg_guard_config_set_max_items(sg_guard_config *cfg, uint64_t n) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    cfg->max_items_ = n;
    return 0;
}

int sg_guard_config_set_max_bytes(sg_guard_config *cfg, uint64_t n) {
    if (cfg == NULL) {
        return SG_EINVAL;
    }
    cfg->max_bytes_ = n;
    return 0;
}

int64_t sg_guard_config_connect_timeout(const sg_guard_config *cfg) {
    return cfg ? cfg->connect_ns_ : -1;
}

int64_t sg_guard_config_first_item_timeout(const sg_guard_config *cfg) {
    return cfg ? cfg->first_item_ns_ : -1;
}

int64_t sg_guard_config_idle_timeout(const sg_guard_config *cfg) {
    return cfg ? cfg->idle_ns_ : -1;
}

int64_t sg_guard_config_stream_timeout(const sg_guard_config *cfg) {
    return cfg ? cfg->stream_total_ns_ : -1;
}

int64_t sg_guard_config_attempt_timeout(const sg_guard_config *cfg) {
    return cfg ? cfg->attempt_ns_ : -1;
}

uint64_t sg_guard_config_max_items(const sg_guard_config *cfg) {
    return cfg ? cfg->max_items_ : 0;
}

uint64_t sg_guard_config_max_bytes(const sg_guard_config *cfg) {
    return cfg ? cfg->max_bytes_ : 0;
}

/* Fields that hold a duration in the config and may be set directly by a
 * caller who bypassed the setters: 0 is "off", anything else must be sane. */
static bool config_valid(const sg_guard_config *cfg) {
    const int64_t clocks[] = {cfg->connect_ns_, cfg->first_item_ns_, cfg->idle_ns_,
                              cfg->stream_total_ns_, cfg->attempt_ns_};
    for (size_t i = 0; i < sizeof(clocks) / sizeof(clocks[0]); i++) {
        if (clocks[i] != 0 && check_duration(clocks[i]) != 0) {
            return false;
        }
    }
    return true;
}

static int64_t deadline_of(int64_t start, int64_t ns) {
    return ns > 0 ? sg_time_add(start, ns) : SG_TIME_NEVER;
}

/* The earliest deadline that can still fire.  Before the first item the
 * first-item clock (and, while connecting, the connect clock) is live; after
 * it, the idle clock.  The rest are in fixed_. */
static void recompute_next(sg_guard *g) {
    int64_t next = g->fixed_;
    if (g->items_ == 0) {
        next = sg_time_min(next, g->first_dl_);
        if (g->phase_ == SG_PHASE_CONNECT) {
            next = sg_time_min(next, g->connect_dl_);
        }
    } else {
        next = sg_time_min(next, g->idle_dl_);
    }
    g->next_ = next;
}

int sg_guard_start(sg_guard *guard, const sg_guard_config *cfg, const sg_budget *budget,
                   int64_t now) {
    if (guard == NULL || cfg == NULL || !config_valid(cfg)) {
        return SG_EINVAL;
    }
    int64_t budget_dl = SG_TIME_NEVER;
    if (budget != NULL) {
        if (!sg__budget_started(budget)) {
            return SG_EINVAL;
        }
        budget_dl = budget->deadline_;
    }
    memset(guard, 0, sizeof(*guard));
    guard->start_ = now;
    guard->connect_dl_ = deadline_of(now, cfg->connect_ns_);
    guard->first_dl_ = deadline_of(now, cfg->first_item_ns_);
    guard->idle_dl_ = SG_TIME_NEVER;
    guard->idle_ns_ = cfg->idle_ns_;
    guard->stream_dl_ = deadline_of(now, cfg->stream_total_ns_);
    guard->attempt_dl_ = deadline_of(now, cfg->attempt_ns_);
    guard->budget_dl_ = budget_dl;
    guard->fixed_ =
        sg_time_min(sg_time_min(guard->stream_dl_, guard->attempt_dl_), budget_dl);
    guard->first_item_at_ = -1;
    guard->max_items_ = cfg->max_items_;
    guard->max_bytes_ = cfg->max_bytes_;
    guard->state_ = GUARD_RUNNING;
    guard->phase_ = SG_PHASE_CONNECT;
    guard->outcome_ = SG_OUTCOME_OK;
    guard->flags_ = cfg->idle_ns_ > 0 ? HAS_IDLE : 0;
    recompute_next(guard);
    return 0;
}

/*
 * Cold path: which limit expired by `now`?  The earliest live deadline wins;
 * on a tie the order below decides, with the budget last, so a clock whose
 * own deadline coincides with the budget's reports its own name.
 */
static sg_outcome classify_expiry(const sg_guard *g) {
    struct {
        int64_t deadline;
        sg_outcome outcome;
    } live[6];
    size_t n = 0;
    if (g->items_ == 0) {
        if (g->phase_ == SG_PHASE_CONNECT) {
            live[n].deadline = g->connect_dl_;
            live[n++].outcome = SG_OUTCOME_CONNECT_TIMEOUT;
        }
        live[n].deadline = g->first_dl_;
        live[n++].outcome = SG_OUTCOME_FIRST_ITEM_TIMEOUT;
    } else {
        live[n].deadline = g->idle_dl_;
        live[n++].outcome = SG_OUTCOME_IDLE_TIMEOUT;
    }
    live[n].deadline = g->stream_dl_;
    live[n++].outcome = SG_OUTCOME_STREAM_TIMEOUT;
    live[n].deadline = g->attempt_dl_;
    live[n++].outcome = SG_OUTCOME_ATTEMPT_TIMEOUT;
    live[n].deadline = g->budget_dl_;
    live[n++].outcome = SG_OUTCOME_BUDGET_EXHAUSTED;

    size_t best = 0;
    for (size_t i = 1; i < n; i++) {
        if (live[i].deadline < live[best].deadline) {
            best = i;
        }
    }
    return live[best].outcome;
}

static void latch(sg_guard *g, sg_outcome outcome) {
    g->state_ = GUARD_STOPPED;
    g->outcome_ = (uint8_t)outcome;
    g->next_ = SG_TIME_NEVER;
}

/* The shared prologue of the hot calls: running, and no deadline passed. */
static int admit(sg_guard *g, int64_t now) {
    if (g == NULL) {
        return SG_EINVAL;
    }
    if (g->state_ != GUARD_RUNNING) {
        return SG_ESTATE;
    }
    if (now >= g->next_) {
        latch(g, classify_expiry(g));
        return SG_ETIMEDOUT;
    }
    return 0;
}

int sg_guard_set_phase(sg_guard *guard, sg_phase phase, int64_t now) {
    (void)now;
    if (guard == NULL || (unsigned)phase >= (unsigned)SG_PHASE_STREAMING) {
        return SG_EINVAL;
    }
    if (guard->state_ != GUARD_RUNNING || (unsigned)phase < guard->phase_) {
        return SG_ESTATE;
    }
    if (guard->items_ == 0) {
        guard->phase_ = (uint8_t)phase;
        recompute_next(guard);
    }
    return 0;
}

int sg_guard_on_item(sg_guard *guard, int64_t now) {
    int rv = admit(guard, now);
    if (rv != 0) {
        return rv;
    }
    if (guard->max_items_ != 0 && guard->items_ >= guard->max_items_) {
        latch(guard, SG_OUTCOME_CAP_EXCEEDED);
        return SG_ECAP;
    }
    if (guard->items_++ == 0) {
        guard->first_item_at_ = now;
        guard->phase_ = SG_PHASE_STREAMING;
    }
    if (guard->flags_ & HAS_IDLE) {
        guard->idle_dl_ = sg_time_add(now, guard->idle_ns_);
    }
    guard->next_ = sg_time_min(guard->idle_dl_, guard->fixed_);
    return 0;
}

int sg_guard_on_bytes(sg_guard *guard, int64_t now, uint64_t n) {
    int rv = admit(guard, now);
    if (rv != 0) {
        return rv;
    }
    guard->bytes_ = guard->bytes_ > UINT64_MAX - n ? UINT64_MAX : guard->bytes_ + n;
    if (guard->max_bytes_ != 0 && guard->bytes_ > guard->max_bytes_) {
        latch(guard, SG_OUTCOME_CAP_EXCEEDED);
        return SG_ECAP;
    }
    return 0;
}

int sg_guard_check(sg_guard *guard, int64_t now, sg_outcome *outcome) {
    if (guard == NULL) {
        return SG_EINVAL;
    }
    if (guard->state_ == GUARD_RUNNING) {
        int rv = admit(guard, now);
        if (rv == 0) {
            return 0;
        }
    }
    if (guard->state_ != GUARD_STOPPED) {
        return SG_ESTATE;
    }
    if (outcome != NULL) {
        *outcome = (sg_outcome)guard->outcome_;
    }
    return 1;
}

static int end(sg_guard *g, int64_t now, sg_outcome outcome, sg_guard_result *result) {
    if (g == NULL || result == NULL) {
        return SG_EINVAL;
    }
    if (g->state_ == GUARD_RUNNING) {
        (void)admit(g, now); /* a deadline that passed is the first cause */
    }
    if (g->state_ == GUARD_STOPPED) {
        outcome = (sg_outcome)g->outcome_;
    } else if (g->state_ != GUARD_RUNNING) {
        return SG_ESTATE;
    }
    g->state_ = GUARD_FINISHED;
    g->outcome_ = (uint8_t)outcome;
    g->next_ = SG_TIME_NEVER;

    result->outcome = outcome;
    result->phase = (sg_phase)g->phase_;
    result->partial = g->items_ > 0 && outcome != SG_OUTCOME_OK;
    result->items = g->items_;
    result->bytes = g->bytes_;
    /* any instant is one (a hand-driven clock may run below zero): "an item
     * came" is the count's to say, and durations saturate */
    result->first_item_ns =
        g->items_ > 0 ? sg_time_since(g->first_item_at_, g->start_) : -1;
    result->elapsed_ns = sg_time_since(now, g->start_);
    return 0;
}

int sg_guard_finish(sg_guard *guard, int64_t now, bool clean, sg_guard_result *result) {
    return end(guard, now, clean ? SG_OUTCOME_OK : SG_OUTCOME_TRUNCATED, result);
}

int sg_guard_fail(sg_guard *guard, int64_t now, sg_outcome outcome,
                  sg_guard_result *result) {
    if (outcome == SG_OUTCOME_OK || (unsigned)outcome >= (unsigned)SG_OUTCOME_COUNT_) {
        return SG_EINVAL;
    }
    return end(guard, now, outcome, result);
}

sg_phase sg_guard_phase(const sg_guard *guard) {
    return sg__guard_started(guard) ? (sg_phase)guard->phase_ : SG_PHASE_NONE;
}

uint64_t sg_guard_items(const sg_guard *guard) {
    return guard ? guard->items_ : 0;
}

uint64_t sg_guard_bytes(const sg_guard *guard) {
    return guard ? guard->bytes_ : 0;
}

bool sg_guard_running(const sg_guard *guard) {
    return guard != NULL && guard->state_ == GUARD_RUNNING;
}
