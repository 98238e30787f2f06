/*
 * streamguard core: time, errors, outcomes, the operation budget and the
 * stream guard (the three clocks).
 *
 * Everything here is sans-I/O and libc only: no function reads a clock, opens
 * a socket or allocates.  Every time argument is a CLOCK_MONOTONIC instant in
 * nanoseconds (int64_t) supplied by the caller, so any event loop can drive
 * the core and tests can drive time by hand.
 *
 * Thread-safety: the functions are reentrant.  An sg_budget or sg_guard is
 * plain data owned by the caller; concurrent calls on the same object need
 * the caller's own lock.  The name and strerror tables are immutable.
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_CORE_H
#define STREAMGUARD_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(SG_STATIC_DEFINE) || !defined(__GNUC__)
#    define SG_EXTERN
#else
#    define SG_EXTERN __attribute__((visibility("default")))
#endif

#define SG_VERSION_MAJOR 0
#define SG_VERSION_MINOR 1
#define SG_VERSION_PATCH 0
#define SG_VERSION_STRING "0.1.0"

/** The library's version string ("MAJOR.MINOR.PATCH"). */
SG_EXTERN const char *sg_version(void);

/* ------------------------------------------------------------------------
 * Time
 * ------------------------------------------------------------------------ */

/** "No deadline": an instant later than any reachable time. */
#define SG_TIME_NEVER INT64_MAX

/** Duration helpers; all durations are int64_t nanoseconds. */
#define SG_NS(x) ((int64_t)(x))
#define SG_US(x) ((int64_t)(x)*INT64_C(1000))
#define SG_MS(x) ((int64_t)(x)*INT64_C(1000000))
#define SG_SEC(x) ((int64_t)(x)*INT64_C(1000000000))

/**
 * The largest duration any setter accepts: 366 days.  Longer values are
 * configuration mistakes (a unit error, an uninitialised variable) and are
 * rejected with SG_ERANGE rather than silently meaning "forever".
 */
#define SG_DURATION_MAX SG_SEC(366LL * 24 * 3600)

/**
 * sg_time_add - saturating addition of a duration to an instant.
 *
 * Returns t + d, or SG_TIME_NEVER when the sum would overflow or when t is
 * already SG_TIME_NEVER.  A negative d saturates at INT64_MIN.  Never wraps.
 */
static inline int64_t sg_time_add(int64_t t, int64_t d) {
    if (t == SG_TIME_NEVER) {
        return SG_TIME_NEVER;
    }
    if (d > 0 && t > INT64_MAX - d) {
        return SG_TIME_NEVER;
    }
    if (d < 0 && t < INT64_MIN - d) {
        return INT64_MIN;
    }
    return t + d;
}

/** The earlier of two instants (SG_TIME_NEVER is the identity). */
static inline int64_t sg_time_min(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/**
 * sg_clock - an injectable monotonic clock.
 *
 * Transports and programs read time through one of these so that tests can
 * substitute a hand-driven clock.  @now returns CLOCK_MONOTONIC-like
 * nanoseconds and must never go backwards.
 */
typedef struct sg_clock {
    int64_t (*now)(void *user_data);
    void *user_data;
} sg_clock;

/** The system clock: clock_gettime(CLOCK_MONOTONIC) in nanoseconds. */
SG_EXTERN int64_t sg_clock_monotonic_now(void *user_data);

/** Reads @clock, or the system monotonic clock when @clock is NULL. */
SG_EXTERN int64_t sg_clock_now(const sg_clock *clock);

/**
 * sg_manual_clock - a hand-driven clock for tests and simulations.
 * Initialise with {0}, then advance .now_ns; pass sg_manual_clock_as().
 */
typedef struct sg_manual_clock {
    int64_t now_ns;
} sg_manual_clock;

/** Wraps @mc as an sg_clock whose reads return mc->now_ns. */
SG_EXTERN sg_clock sg_manual_clock_as(sg_manual_clock *mc);

/* ------------------------------------------------------------------------
 * Errors: one table makes the enum, sg_strerror() and sg_errname().
 * Every code is negative; 0 is success.
 * ------------------------------------------------------------------------ */

#define SG_ERRNO_MAP(XX)                                                        \
    XX(EINVAL, -1, "invalid argument")                                          \
    XX(ERANGE, -2, "value out of range")                                        \
    XX(EREFUSED, -3, "refused: remaining budget is at or below the floor")      \
    XX(ESTATE, -4, "call not valid in the object's current state")              \
    XX(ENOMEM, -5, "out of memory")                                             \
    XX(ENOBUFS, -6, "output buffer too small")                                  \
    XX(EMALFORMED, -7, "malformed value")                                       \
    XX(ELINE_TOO_LONG, -8, "line exceeds the configured maximum line size")     \
    XX(EEVENT_TOO_LARGE, -9, "event exceeds the configured maximum event size") \
    XX(EPROTO, -10, "protocol violation by the peer")                           \
    XX(ETIMEDOUT, -11, "a stream clock or the budget expired")                  \
    XX(ECAP, -12, "item or byte cap exceeded")                                  \
    XX(ECANCELED, -13, "cancelled by the caller")                               \
    XX(EDONE, -14, "stream already ended")                                      \
    XX(EIO, -15, "I/O error")                                                   \
    XX(ECONNECT, -16, "could not connect")                                      \
    XX(ECONNRESET, -17, "connection lost")                                      \
    XX(ETLS, -18, "TLS error")                                                  \
    XX(ETLS_VERIFY, -19, "TLS certificate verification failed")                 \
    XX(ECURL, -20, "libcurl error")                                             \
    XX(EH2, -21, "HTTP/2 error")                                                \
    XX(EHTTP, -22, "HTTP error status")                                         \
    XX(ENOTFOUND, -23, "not found")                                             \
    XX(EEXIST, -24, "already exists")                                           \
    XX(ECORRUPT, -25, "corrupt record")                                         \
    XX(ELOCKED, -26, "resource locked by another process")                      \
    XX(ESYS, -27, "system call failed (see errno)")                             \
    XX(ETOOMANY, -28, "too many objects")                                       \
    XX(EUNSUPPORTED, -29, "not supported")

typedef enum sg_errno {
#define SG__ERR_ENUM(name, value, text) SG_##name = (value),
    SG_ERRNO_MAP(SG__ERR_ENUM)
#undef SG__ERR_ENUM
} sg_errno;

/** A static English description of @err; "unknown error" for other values. */
SG_EXTERN const char *sg_strerror(int err);
/** The code's symbolic name without prefix, e.g. "EINVAL"; "UNKNOWN" else. */
SG_EXTERN const char *sg_errname(int err);

/* ------------------------------------------------------------------------
 * Outcomes and phases.  Their names are a public contract (reports, logs).
 * ------------------------------------------------------------------------ */

#define SG_OUTCOME_MAP(XX)                       \
    XX(OK, "ok")                                 \
    XX(CONNECT_TIMEOUT, "connect_timeout")       \
    XX(FIRST_ITEM_TIMEOUT, "first_item_timeout") \
    XX(IDLE_TIMEOUT, "idle_timeout")             \
    XX(STREAM_TIMEOUT, "stream_timeout")         \
    XX(ATTEMPT_TIMEOUT, "attempt_timeout")       \
    XX(BUDGET_EXHAUSTED, "budget_exhausted")     \
    XX(REFUSED, "refused")                       \
    XX(CANCELLED, "cancelled")                   \
    XX(CAP_EXCEEDED, "cap_exceeded")             \
    XX(TRUNCATED, "truncated")                   \
    XX(HTTP_ERROR, "http_error")                 \
    XX(TRANSPORT_ERROR, "transport_error")       \
    XX(PROTOCOL_ERROR, "protocol_error")

typedef enum sg_outcome {
#define SG__OUTCOME_ENUM(name, text) SG_OUTCOME_##name,
    SG_OUTCOME_MAP(SG__OUTCOME_ENUM)
#undef SG__OUTCOME_ENUM
        SG_OUTCOME_COUNT_
} sg_outcome;

#define SG_PHASE_MAP(XX)                   \
    XX(CONNECT, "connect")                 \
    XX(SEND, "send")                       \
    XX(WAIT_HEADERS, "wait_headers")       \
    XX(WAIT_FIRST_ITEM, "wait_first_item") \
    XX(STREAMING, "streaming")

typedef enum sg_phase {
#define SG__PHASE_ENUM(name, text) SG_PHASE_##name,
    SG_PHASE_MAP(SG__PHASE_ENUM)
#undef SG__PHASE_ENUM
        SG_PHASE_COUNT_
} sg_phase;

/** The stable snake_case name of @outcome, or NULL when out of range. */
SG_EXTERN const char *sg_outcome_name(sg_outcome outcome);
/** The stable name of @phase, or NULL when out of range. */
SG_EXTERN const char *sg_phase_name(sg_phase phase);
/**
 * Parses an outcome name.  Returns 0 and sets *@out, or SG_EINVAL when @name
 * is NULL or names no outcome.
 */
SG_EXTERN int sg_outcome_from_name(const char *name, sg_outcome *out);
/** Parses a phase name.  Returns 0 and sets *@out, or SG_EINVAL. */
SG_EXTERN int sg_phase_from_name(const char *name, sg_phase *out);
/** true for the outcomes that mean "a clock or the budget ran out". */
SG_EXTERN bool sg_outcome_is_timeout(sg_outcome outcome);

/* ------------------------------------------------------------------------
 * Budget: one absolute deadline per operation, never extended.
 * ------------------------------------------------------------------------ */

/**
 * sg_budget - zero-initialisable plain data; fields are private, use the
 * functions.  A zero-initialised budget that was never started is invalid
 * for every call but sg_budget_start().
 */
typedef struct sg_budget {
    int64_t start_;    /* private: instant the operation started */
    int64_t deadline_; /* private: absolute deadline (saturated) */
    int64_t floor_;    /* private: reserve never leased */
    uint32_t magic_;   /* private: set by sg_budget_start */
    uint32_t pad_;     /* private */
} sg_budget;

/**
 * sg_budget_start - begin an operation's budget.
 *
 * @now: the current monotonic instant.
 * @total_ns: the operation budget, 1 ns .. SG_DURATION_MAX.
 * @floor_ns: a reserve that is never leased (0 .. SG_DURATION_MAX): when
 *   what remains falls to the floor, leases are refused instead of dialling
 *   out with too little time to succeed.  A floor at or above the total is
 *   allowed - an inbound deadline may leave less than the floor - and then
 *   every lease is refused (the caller reports "refused" without dialling).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @budget is NULL, @total_ns <= 0 or @floor_ns < 0;
 *   SG_ERANGE  @total_ns or @floor_ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_budget_start(sg_budget *budget, int64_t now, int64_t total_ns,
                              int64_t floor_ns);

/**
 * sg_budget_child - a budget whose deadline is min(parent's, now + limit).
 *
 * The child keeps the parent's floor (clamped below its own total).  Use it
 * for a fallback or a sub-operation that must not outlive its parent.
 * @limit_ns may be SG_TIME_NEVER to inherit the parent's deadline as is.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    a NULL pointer, @parent not started, or @limit_ns <= 0;
 *   SG_ERANGE    @limit_ns > SG_DURATION_MAX (and not SG_TIME_NEVER);
 *   SG_EREFUSED  the parent has nothing left at @now.
 */
SG_EXTERN int sg_budget_child(const sg_budget *parent, int64_t now, int64_t limit_ns,
                              sg_budget *child);

/** The absolute deadline of a started budget. */
SG_EXTERN int64_t sg_budget_deadline(const sg_budget *budget);
/** The floor of a started budget. */
SG_EXTERN int64_t sg_budget_floor(const sg_budget *budget);
/** The instant the budget started. */
SG_EXTERN int64_t sg_budget_started_at(const sg_budget *budget);

/**
 * sg_budget_remaining - nanoseconds left at @now; 0 once expired, never
 * negative.  Returns 0 for a budget that was never started.
 */
SG_EXTERN int64_t sg_budget_remaining(const sg_budget *budget, int64_t now);

/**
 * sg_budget_lease - grant time for an attempt or a sleep.
 *
 * granted = min(@wanted_ns, remaining - floor).  Pass SG_TIME_NEVER as
 * @wanted_ns for "as much as may be leased".
 *
 * Returns 0 and sets *@granted_ns (> 0) if it succeeds, or one of the
 * following negative error codes (and then *@granted_ns is set to 0):
 *   SG_EINVAL    a NULL pointer, a budget never started, or @wanted_ns <= 0;
 *   SG_ERANGE    @wanted_ns > SG_DURATION_MAX (and not SG_TIME_NEVER);
 *   SG_EREFUSED  remaining <= floor: nothing may be leased.
 */
SG_EXTERN int sg_budget_lease(const sg_budget *budget, int64_t now, int64_t wanted_ns,
                              int64_t *granted_ns);

/* ------------------------------------------------------------------------
 * Stream guard: the three clocks (plus connect and per-attempt ceilings
 * and runaway caps) of one attempt, nested under a budget.
 * ------------------------------------------------------------------------ */

/**
 * sg_guard_config - which clocks and caps a guard enforces.
 *
 * Zero-initialise it (or call sg_guard_config_init): every clock and cap is
 * then off.  Turn each on with its setter, which validates the value.
 * Fields are private.
 */
typedef struct sg_guard_config {
    int64_t connect_ns_;      /* private: attempt start -> connected */
    int64_t first_item_ns_;   /* private: attempt start -> first item */
    int64_t idle_ns_;         /* private: item -> next item */
    int64_t stream_total_ns_; /* private: attempt start -> end of stream */
    int64_t attempt_ns_;      /* private: per-attempt ceiling */
    uint64_t max_items_;      /* private: 0 = no cap */
    uint64_t max_bytes_;      /* private: 0 = no cap */
} sg_guard_config;

/** Resets @cfg so every clock and cap is off. */
SG_EXTERN void sg_guard_config_init(sg_guard_config *cfg);

/*
 * Clock setters.  Each takes a duration in nanoseconds, 1 .. SG_DURATION_MAX.
 * Default: off.  Each returns 0 if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL  @cfg is NULL or the duration is <= 0;
 *   SG_ERANGE  the duration is > SG_DURATION_MAX.
 * sg_guard_config_clear_clocks() turns every clock off again.
 */
/** Connect timeout: from guard start until the phase leaves "connect". */
SG_EXTERN int sg_guard_config_set_connect(sg_guard_config *cfg, int64_t ns);
/** First-item deadline: from guard start to the first item. */
SG_EXTERN int sg_guard_config_set_first_item(sg_guard_config *cfg, int64_t ns);
/** Idle timeout: from each item to the next; starts at the first item.
 *  Bytes that are not items (keepalive comments) never reset it. */
SG_EXTERN int sg_guard_config_set_idle(sg_guard_config *cfg, int64_t ns);
/** Stream total: from guard start to the end of the stream. */
SG_EXTERN int sg_guard_config_set_stream_total(sg_guard_config *cfg, int64_t ns);
/** Per-attempt ceiling: from guard start to the end of the attempt. */
SG_EXTERN int sg_guard_config_set_attempt(sg_guard_config *cfg, int64_t ns);
/** Turns every clock off (caps are kept). */
SG_EXTERN void sg_guard_config_clear_clocks(sg_guard_config *cfg);

/**
 * Runaway caps.  @n = 0 turns the cap off (default).  With a cap of N, the
 * N-th item (or byte) is accepted and the one after it ends the stream with
 * cap_exceeded.  Returns 0, or SG_EINVAL when @cfg is NULL.
 */
SG_EXTERN int sg_guard_config_set_max_items(sg_guard_config *cfg, uint64_t n);
SG_EXTERN int sg_guard_config_set_max_bytes(sg_guard_config *cfg, uint64_t n);

/** Getters: the configured value, 0 when off. */
SG_EXTERN int64_t sg_guard_config_connect(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_first_item(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_idle(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_stream_total(const sg_guard_config *cfg);
SG_EXTERN int64_t sg_guard_config_attempt(const sg_guard_config *cfg);
SG_EXTERN uint64_t sg_guard_config_max_items(const sg_guard_config *cfg);
SG_EXTERN uint64_t sg_guard_config_max_bytes(const sg_guard_config *cfg);

/**
 * sg_guard - the state of one attempt's clocks; plain data the caller embeds
 * (at most 128 bytes), zero-initialisable, fields private.
 */
typedef struct sg_guard {
    int64_t next_;          /* private: earliest live deadline (cached) */
    int64_t start_;         /* private: guard start instant */
    int64_t connect_dl_;    /* private: connect deadline */
    int64_t first_dl_;      /* private: first-item deadline */
    int64_t idle_dl_;       /* private: idle deadline (last item + idle) */
    int64_t idle_ns_;       /* private: idle duration, 0 = off */
    int64_t stream_dl_;     /* private: stream-total deadline */
    int64_t attempt_dl_;    /* private: per-attempt ceiling deadline */
    int64_t budget_dl_;     /* private: the budget's deadline */
    int64_t fixed_;         /* private: min(stream, attempt, budget) */
    int64_t first_item_at_; /* private: instant of the first item, -1 none */
    uint64_t items_;        /* private */
    uint64_t bytes_;        /* private */
    uint64_t max_items_;    /* private */
    uint64_t max_bytes_;    /* private */
    uint8_t state_;         /* private */
    uint8_t phase_;         /* private */
    uint8_t outcome_;       /* private: latched outcome */
    uint8_t flags_;         /* private */
    uint32_t pad_;          /* private */
} sg_guard;

/** What a finished attempt's guard concludes. */
typedef struct sg_guard_result {
    sg_outcome outcome;
    sg_phase phase;        /* phase the attempt ended in */
    bool partial;          /* items > 0 and the end was not clean */
    uint64_t items;        /* items accepted (caps: at most the cap) */
    uint64_t bytes;        /* bytes reported through sg_guard_on_bytes */
    int64_t first_item_ns; /* start -> first item, -1 when none */
    int64_t elapsed_ns;    /* start -> finish */
} sg_guard_result;

/**
 * sg_guard_start - arm the clocks of one attempt at @now under @budget.
 *
 * Every configured clock is clamped by the budget's deadline; @budget may be
 * NULL for a stream with no operation budget.  The guard starts in phase
 * "connect".  @cfg is copied; it need not outlive the call.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @guard or @cfg is NULL, @budget was never started, or @cfg
 *              holds a negative or out-of-range value.
 */
SG_EXTERN int sg_guard_start(sg_guard *guard, const sg_guard_config *cfg,
                             const sg_budget *budget, int64_t now);

/**
 * sg_guard_set_phase - the transport reports progress before the first item:
 * connect -> send -> wait_headers -> wait_first_item.  Phases only move
 * forward; "streaming" is entered by the first item.  Leaving "connect"
 * disarms the connect clock.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @guard is NULL or @phase is out of range or is "streaming";
 *   SG_ESTATE  the guard is not running, or @phase is behind the current one.
 */
SG_EXTERN int sg_guard_set_phase(sg_guard *guard, sg_phase phase, int64_t now);

/**
 * sg_guard_on_item - one item (an SSE event, an NDJSON line) arrived at @now.
 *
 * It first checks the deadlines: an item that arrives at or after a deadline
 * is late, and the clock that expired is latched.  Otherwise the item is
 * counted, the first item starts the idle clock and enters "streaming", and
 * every item re-arms the idle clock at @now + idle.  Cost: O(1), a few
 * comparisons; no re-arming of any timer is needed, only next_deadline.
 *
 * Returns 0 when the item is accepted (deliver it), or one of the following
 * negative error codes (do not deliver it; call sg_guard_finish):
 *   SG_ETIMEDOUT  a clock or the budget had expired by @now;
 *   SG_ECAP       the item cap is exceeded;
 *   SG_ESTATE     the guard is not running (never started, or finished, or
 *                 already expired);
 *   SG_EINVAL     @guard is NULL.
 */
SG_EXTERN int sg_guard_on_item(sg_guard *guard, int64_t now);

/**
 * sg_guard_on_bytes - @n bytes arrived at @now (all received body bytes,
 * items and keepalives alike).  Counts toward the byte cap and the report;
 * it NEVER resets the idle clock, so keepalive comments cannot keep a dead
 * generation alive.  Deadlines are checked as in sg_guard_on_item.
 *
 * Returns 0, or SG_ETIMEDOUT, SG_ECAP, SG_ESTATE, SG_EINVAL as above.
 */
SG_EXTERN int sg_guard_on_bytes(sg_guard *guard, int64_t now, uint64_t n);

/**
 * sg_guard_next_deadline - the one absolute instant an event loop should arm
 * a timer for: the earliest live deadline, or SG_TIME_NEVER when none is
 * configured and there is no budget (or the guard is not running).  O(1).
 */
static inline int64_t sg_guard_next_deadline(const sg_guard *guard) {
    return guard->next_;
}

/**
 * sg_guard_check - has a deadline passed at @now?
 *
 * Returns 0 while the attempt may go on, 1 when a clock has expired (then
 * *@outcome, when non-NULL, says which: connect_timeout, first_item_timeout,
 * idle_timeout, stream_timeout, attempt_timeout, or budget_exhausted when
 * the budget was the tighter limit), or SG_EINVAL / SG_ESTATE.
 * An expiry is latched: later checks and sg_guard_finish report the same
 * outcome.  When two limits fall on the same instant the clock's own name
 * wins over budget_exhausted (the clock alone would have fired).
 */
SG_EXTERN int sg_guard_check(sg_guard *guard, int64_t now, sg_outcome *outcome);

/**
 * sg_guard_finish - the stream ended at @now; @clean says whether it ended
 * as the protocol requires (terminal sentinel seen, or a complete body when
 * none is configured).
 *
 * Outcome: a latched expiry or cap wins; else a deadline that passed by @now
 * (checked here); else ok when @clean, truncated otherwise.  partial =
 * items > 0 and outcome != ok.
 *
 * Returns 0 and fills *@result, or SG_EINVAL (NULL pointer) or SG_ESTATE
 * (never started or already finished).
 */
SG_EXTERN int sg_guard_finish(sg_guard *guard, int64_t now, bool clean,
                              sg_guard_result *result);

/**
 * sg_guard_fail - the attempt ended at @now for a reason only the transport
 * knows: cancelled, http_error, transport_error, protocol_error,
 * connect_timeout (from the OS), truncated.  A clock expiry or cap latched
 * earlier wins (the first cause is the true one).  @outcome must not be ok.
 *
 * Returns 0 and fills *@result, or SG_EINVAL / SG_ESTATE as sg_guard_finish.
 */
SG_EXTERN int sg_guard_fail(sg_guard *guard, int64_t now, sg_outcome outcome,
                            sg_guard_result *result);

/** The guard's current phase. */
SG_EXTERN sg_phase sg_guard_phase(const sg_guard *guard);
/** Items accepted so far. */
SG_EXTERN uint64_t sg_guard_items(const sg_guard *guard);
/** Bytes reported so far. */
SG_EXTERN uint64_t sg_guard_bytes(const sg_guard *guard);
/** true between sg_guard_start and the first expiry, cap or finish. */
SG_EXTERN bool sg_guard_running(const sg_guard *guard);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_CORE_H */
