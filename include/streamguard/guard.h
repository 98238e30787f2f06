/*
 * streamguard guard: the clocks of one attempt - connect, first item, idle,
 * stream total, the attempt's ceiling - and its runaway caps, nested under
 * an operation's budget.  Part of the core (<streamguard/core.h> includes
 * it): sans-I/O, libc only, no allocation, every instant passed in.  An
 * event loop arms one timer for sg_guard_next_deadline() and tells the
 * guard what it saw; the guard says which clock, if any, ended the
 * attempt.  sg_stream (<streamguard/stream.h>) drives one for a body.
 *
 * Thread-safety: as the core's (one guard, one thread at a time).
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_GUARD_H
#define STREAMGUARD_GUARD_H

#include <streamguard/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * sg_guard_config - which clocks and caps a guard enforces.  Embed it;
 * zero-initialised (or after sg_guard_config_init) every clock and cap is
 * off; turn each on with its setter.  Fields are private.
 */
typedef struct sg_guard_config {
    /* private (src/core/guard.c): the clocks, 0 = off; the caps, 0 = none */
    int64_t connect_ns_, first_item_ns_, idle_ns_, stream_total_ns_, attempt_ns_;
    uint64_t max_items_, max_bytes_;
    void *reserved_[4]; /* private: room to grow */
} sg_guard_config;

/** sg_guard_config_init - every clock and cap off (NULL: nothing). */
SG_EXTERN void sg_guard_config_init(sg_guard_config *cfg);

/*
 * The clocks, each named after the outcome it produces.  @ns is 1 ..
 * SG_DURATION_MAX nanoseconds (sg_guard_config_clear_clocks turns them off
 * again).  Default: off.  Each returns 0 if it succeeds, or one of the
 * following negative error codes (and then @cfg is unchanged):
 *   SG_EINVAL  @cfg is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 */

/** sg_guard_config_set_connect_timeout - from the guard's start until the
 *  phase leaves "connect" (sg_guard_set_phase). */
SG_EXTERN int sg_guard_config_set_connect_timeout(sg_guard_config *cfg, int64_t ns);

/** sg_guard_config_set_first_item_timeout - from the guard's start to the
 *  first item (time to first token). */
SG_EXTERN int sg_guard_config_set_first_item_timeout(sg_guard_config *cfg, int64_t ns);

/** sg_guard_config_set_idle_timeout - from each item to the next, from the
 *  first item on; bytes that are not items (keepalives) never reset it. */
SG_EXTERN int sg_guard_config_set_idle_timeout(sg_guard_config *cfg, int64_t ns);

/** sg_guard_config_set_stream_timeout - from the guard's start to the end
 *  of the stream. */
SG_EXTERN int sg_guard_config_set_stream_timeout(sg_guard_config *cfg, int64_t ns);

/** sg_guard_config_set_attempt_timeout - the per-attempt ceiling, from the
 *  guard's start to the end of the attempt. */
SG_EXTERN int sg_guard_config_set_attempt_timeout(sg_guard_config *cfg, int64_t ns);

/** sg_guard_config_clear_clocks - every clock off, the caps kept (NULL:
 *  nothing). */
SG_EXTERN void sg_guard_config_clear_clocks(sg_guard_config *cfg);

/**
 * sg_guard_config_set_max_items - the runaway item cap: with a cap of N
 * the N-th item is accepted and the one after it ends the stream
 * cap_exceeded (sg_guard_on_item returns SG_ECAP).  0 (the default) turns
 * it off; any value is valid.
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @cfg is NULL.
 */
SG_EXTERN int sg_guard_config_set_max_items(sg_guard_config *cfg, uint64_t n);

/**
 * sg_guard_config_set_max_bytes - the runaway byte cap, over every body
 * byte reported to sg_guard_on_bytes: a total of N is accepted, the call
 * that takes it above N ends the stream cap_exceeded (SG_ECAP).  0 (the
 * default) turns it off.
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @cfg is NULL.
 */
SG_EXTERN int sg_guard_config_set_max_bytes(sg_guard_config *cfg, uint64_t n);

/**
 * sg_guard - the state of one attempt's clocks.  Embed it; fields are
 * private.  A zero-initialised guard is "never started": every call but
 * sg_guard_start fails with SG_ESTATE, and the getters say so.
 */
typedef struct sg_guard {
    /* private (src/core/guard.c says what each holds) */
    int64_t next_, start_, connect_dl_, first_dl_, idle_dl_, idle_ns_, stream_dl_;
    int64_t attempt_dl_, budget_dl_, fixed_, first_item_at_;
    uint64_t items_, bytes_, max_items_, max_bytes_;
    uint8_t state_, phase_, outcome_, flags_; /* state_ 0: never started */
    uint32_t pad_;
    void *reserved_[4]; /* private: room to grow */
} sg_guard;

/** sg_guard_result - what a finished attempt's guard concludes (a record:
 *  read it where the library fills it). */
typedef struct sg_guard_result {
    sg_outcome outcome;    ///< how the attempt ended (docs/outcomes.md)
    sg_phase phase;        ///< phase the attempt ended in
    bool partial;          ///< items > 0 and the outcome is not ok: discard
    uint64_t items;        ///< items accepted (caps: at most the cap)
    uint64_t bytes;        ///< bytes reported through sg_guard_on_bytes
    int64_t first_item_ns; ///< start -> first item, -1 when none
    int64_t elapsed_ns;    ///< start -> finish (0 if the end preceded the start)
} sg_guard_result;

/**
 * sg_guard_start - arm the clocks of one attempt at @now under @budget
 * (NULL: none): every configured clock is clamped by the budget's
 * deadline.  The guard starts in phase "connect".  @cfg is copied.  A
 * guard may be started again for a new attempt at any time.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @guard is unchanged):
 *   SG_EINVAL  @guard or @cfg is NULL, @budget was never started, or @cfg
 *              holds a clock that is negative or above SG_DURATION_MAX.
 */
SG_EXTERN int sg_guard_start(sg_guard *guard, const sg_guard_config *cfg,
                             const sg_budget *budget, int64_t now);

/**
 * sg_guard_set_phase - the transport reports progress before the first
 * item: connect -> send -> wait_headers -> wait_first_item.  Phases only
 * move forward (skipping is allowed; the current one again is a no-op);
 * "streaming" is entered by the first item.  Leaving "connect" disarms the
 * connect clock.  No deadline is checked here: use sg_guard_check.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @guard is NULL or @phase is out of range or "streaming";
 *   SG_ESTATE  the guard is not running, or @phase is behind the current
 *              one.
 */
SG_EXTERN int sg_guard_set_phase(sg_guard *guard, sg_phase phase, int64_t now);

/**
 * sg_guard_on_item - one item (an SSE event, an NDJSON line) arrived at
 * @now.  The deadlines are checked first: an item at or after one is late,
 * and the clock that expired is latched.  Otherwise the item is counted,
 * the first one starts the idle clock and enters "streaming", and each one
 * re-arms the idle clock at @now + idle.  O(1); no timer to re-arm.
 *
 * Returns 0 when the item is accepted (deliver it), or one of the
 * following negative error codes (do not deliver it; sg_guard_finish):
 *   SG_ETIMEDOUT  a clock or the budget had expired by @now (latched);
 *   SG_ECAP       the item cap is exceeded (latched: cap_exceeded);
 *   SG_ESTATE     the guard is not running;
 *   SG_EINVAL     @guard is NULL.
 */
SG_EXTERN int sg_guard_on_item(sg_guard *guard, int64_t now);

/**
 * sg_guard_on_bytes - @n body bytes arrived at @now (items and keepalives
 * alike).  They count toward the byte cap and the report, and NEVER reset
 * the idle clock, so keepalives cannot keep a dead generation alive.
 * Deadlines are checked first, as in sg_guard_on_item; the bytes of a call
 * over the cap are still counted (saturating at UINT64_MAX).
 *
 * Returns 0, or SG_ETIMEDOUT, SG_ECAP, SG_ESTATE or SG_EINVAL as
 * sg_guard_on_item (stop reading; sg_guard_finish).
 */
SG_EXTERN int sg_guard_on_bytes(sg_guard *guard, int64_t now, uint64_t n);

/**
 * sg_guard_next_deadline - the one instant an event loop arms a timer for:
 * the earliest live deadline of a running guard (SG_TIME_NEVER when no
 * clock is configured and there is no budget, and once it has expired,
 * been capped or finished); -1 for a guard never started.  O(1), inline.
 * @guard must not be NULL.
 */
static inline int64_t sg_guard_next_deadline(const sg_guard *guard) {
    return guard->state_ != 0 ? guard->next_ : -1;
}

/**
 * sg_guard_check - has a deadline passed at @now?  An expiry is latched:
 * later checks and sg_guard_finish report the same outcome.  When two
 * limits fall on the same instant the clock's own name wins over
 * budget_exhausted.
 *
 * Returns 0 while the attempt may go on; 1 when the guard has stopped - a
 * clock expired by @now (*@outcome, when @outcome is not NULL, says which:
 * connect_timeout, first_item_timeout, idle_timeout, stream_timeout,
 * attempt_timeout, or budget_exhausted when the budget was the tighter
 * limit) or a cap was exceeded earlier (cap_exceeded); or SG_EINVAL
 * (@guard is NULL) or SG_ESTATE (never started, or finished).
 */
SG_EXTERN int sg_guard_check(sg_guard *guard, int64_t now, sg_outcome *outcome);

/**
 * sg_guard_finish - the stream ended at @now; @clean says whether it ended
 * as the protocol requires (terminal sentinel seen, or a complete body
 * when none is configured).  Outcome: a latched expiry or cap wins; else a
 * deadline that passed by @now; else ok when @clean, truncated otherwise.
 * partial = items > 0 and outcome != ok.  The guard is then finished.
 *
 * Returns 0 and fills *@result if it succeeds, or one of the following
 * negative error codes (*@result untouched):
 *   SG_EINVAL  @guard or @result is NULL;
 *   SG_ESTATE  the guard was never started or has already finished.
 */
SG_EXTERN int sg_guard_finish(sg_guard *guard, int64_t now, bool clean,
                              sg_guard_result *result);

/**
 * sg_guard_fail - the attempt ended at @now for a reason only the
 * transport knows (@outcome: cancelled, http_error, transport_error,
 * protocol_error, connect_timeout from the OS, truncated - any but ok).
 * The first cause is the true one: a latched expiry or cap wins, and so
 * does a deadline that passed by @now.  The guard is then finished.
 *
 * Returns 0 and fills *@result if it succeeds, or one of the following
 * negative error codes (*@result untouched):
 *   SG_EINVAL  @guard or @result is NULL, or @outcome is ok or out of range;
 *   SG_ESTATE  the guard was never started or has already finished.
 */
SG_EXTERN int sg_guard_fail(sg_guard *guard, int64_t now, sg_outcome outcome,
                            sg_guard_result *result);

/** sg_guard_phase - the current phase (after the end, the phase it ended
 *  in); SG_PHASE_NONE when @guard is NULL or was never started. */
SG_EXTERN sg_phase sg_guard_phase(const sg_guard *guard);

/** sg_guard_items - items accepted so far (a late or over-cap item is not
 *  counted), kept after the end; 0 when @guard is NULL or never started. */
SG_EXTERN uint64_t sg_guard_items(const sg_guard *guard);

/** sg_guard_bytes - bytes reported through sg_guard_on_bytes so far
 *  (saturating), kept after the end; 0 when @guard is NULL or never
 *  started. */
SG_EXTERN uint64_t sg_guard_bytes(const sg_guard *guard);

/** sg_guard_running - true between sg_guard_start and the first expiry,
 *  cap, finish or fail; false when @guard is NULL or never started. */
SG_EXTERN bool sg_guard_running(const sg_guard *guard);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_GUARD_H */
