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

/**
 * SG_EXTERN - marks a public function for export.
 *
 * The library is compiled with hidden visibility, so only SG_EXTERN
 * functions are exported from the shared library.  It expands to nothing
 * when SG_STATIC_DEFINE is defined or the compiler is not GCC-compatible
 * (no __GNUC__); the build itself never defines SG_STATIC_DEFINE.
 */
#if defined(SG_STATIC_DEFINE) || !defined(__GNUC__)
#    define SG_EXTERN
#else
#    define SG_EXTERN __attribute__((visibility("default")))
#endif

#define SG_VERSION_MAJOR 0        ///< Major version: incompatible API changes.
#define SG_VERSION_MINOR 1        ///< Minor version: compatible additions.
#define SG_VERSION_PATCH 0        ///< Patch version: fixes only.
#define SG_VERSION_STRING "0.1.0" ///< "MAJOR.MINOR.PATCH" of these headers.

/**
 * sg_version - the version of the library that is linked.
 *
 * Compare with SG_VERSION_STRING to detect a header/library mismatch.
 *
 * Returns a static "MAJOR.MINOR.PATCH" string; never NULL.
 * Thread-safety: pure function.
 */
SG_EXTERN const char *sg_version(void);

/* ------------------------------------------------------------------------
 * Time
 * ------------------------------------------------------------------------ */

/**
 * SG_TIME_NEVER - "no deadline": an instant later than any reachable time
 * (INT64_MAX).  Deadline sums saturate here instead of wrapping.
 */
#define SG_TIME_NEVER INT64_MAX

/* Duration helpers; all durations are int64_t nanoseconds.  They do not
 * saturate: keep arguments within SG_DURATION_MAX. */
#define SG_NS(x) ((int64_t)(x))                      ///< @x nanoseconds.
#define SG_US(x) ((int64_t)(x)*INT64_C(1000))        ///< @x microseconds in ns.
#define SG_MS(x) ((int64_t)(x)*INT64_C(1000000))     ///< @x milliseconds in ns.
#define SG_SEC(x) ((int64_t)(x)*INT64_C(1000000000)) ///< @x seconds in ns.

/**
 * SG_DURATION_MAX - the largest duration any setter accepts: 366 days.
 * Longer values are configuration mistakes (a unit error, an uninitialised
 * variable) and are rejected with SG_ERANGE rather than silently meaning
 * "forever".
 */
#define SG_DURATION_MAX SG_SEC(366LL * 24 * 3600)

/**
 * sg_time_add - saturating addition of a duration to an instant.
 *
 * @t: an instant (monotonic ns), or SG_TIME_NEVER.
 * @d: a duration in ns; may be negative.
 *
 * Returns t + d, or SG_TIME_NEVER when the sum would overflow or when @t is
 * already SG_TIME_NEVER.  A negative @d saturates at INT64_MIN.  Never wraps.
 * Thread-safety: pure function.
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

/**
 * sg_time_since - the duration from @since to @now, saturating: 0 when
 * @now is not after @since, INT64_MAX when the difference would overflow
 * (instants at the two ends of int64).  Never wraps.
 * Thread-safety: pure function.
 */
static inline int64_t sg_time_since(int64_t now, int64_t since) {
    if (now <= since) {
        return 0;
    }
    if (since < 0 && now > INT64_MAX + since) {
        return INT64_MAX;
    }
    return now - since;
}

/**
 * sg_time_min - the earlier of two instants.
 *
 * Returns the smaller of @a and @b (SG_TIME_NEVER is the identity).
 * Thread-safety: pure function.
 */
static inline int64_t sg_time_min(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/**
 * sg_clock - an injectable monotonic clock.
 *
 * Transports and programs read time through one of these so that tests can
 * substitute a hand-driven clock.  @now returns CLOCK_MONOTONIC-like
 * nanoseconds and must never go backwards; it is called with @user_data.
 * A NULL @now means the system monotonic clock (see sg_clock_now).
 */
typedef struct sg_clock {
    int64_t (*now)(void *user_data); ///< reads the clock, in ns
    void *user_data;                 ///< passed to @now
} sg_clock;

/**
 * sg_clock_monotonic_now - the system clock.
 *
 * @user_data: ignored (present so the function fits sg_clock.now).
 *
 * Returns clock_gettime(CLOCK_MONOTONIC) in nanoseconds.
 * Thread-safety: safe from any thread.
 */
SG_EXTERN int64_t sg_clock_monotonic_now(void *user_data);

/**
 * sg_clock_now - reads a clock.
 *
 * @clock: the clock to read; NULL (or a clock whose @now is NULL) means the
 *   system monotonic clock.
 *
 * Returns @clock->now(@clock->user_data), or sg_clock_monotonic_now(NULL)
 * when @clock or its @now is NULL.
 * Thread-safety: as the clock's @now function (the system clock is safe
 * from any thread).
 */
SG_EXTERN int64_t sg_clock_now(const sg_clock *clock);

/**
 * sg_manual_clock - a hand-driven clock for tests and simulations.
 * Initialise with {0}, then advance .now_ns; pass sg_manual_clock_as().
 */
typedef struct sg_manual_clock {
    int64_t now_ns; ///< what every read returns; set it by hand
} sg_manual_clock;

/**
 * sg_manual_clock_as - wraps a manual clock as an sg_clock.
 *
 * @mc: the manual clock; must not be NULL when the returned clock is read,
 *   and must outlive it (the returned clock keeps the pointer).
 *
 * Returns an sg_clock whose reads return @mc->now_ns at the time of the
 * read.  Never fails; nothing is read until the clock is.
 * Thread-safety: pure function; reads of the returned clock race with
 * writes to @mc->now_ns unless the caller serialises them.
 */
SG_EXTERN sg_clock sg_manual_clock_as(sg_manual_clock *mc);

/* ------------------------------------------------------------------------
 * Errors: one table makes the enum, sg_strerror() and sg_errname().
 * Every code is negative; 0 is success.
 * ------------------------------------------------------------------------ */

/**
 * SG_ERRNO_MAP - the error table: XX(name, value, text) for every code.
 *
 * It generates enum sg_errno (SG_<name> = value), sg_strerror() (text) and
 * sg_errname() (name).  Every value is negative and stable.  Reserved codes,
 * which no function returns yet: SG_EPROTO (a peer's protocol violation is
 * reported as the outcome protocol_error instead), SG_EHTTP (an error status
 * is the outcome http_error) and SG_ECORRUPT (the ledger skips and counts
 * corrupt records).  docs/api.md lists where each code comes from.
 */
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
    XX(ELOCKED, -26, "resource locked by another process or thread")            \
    XX(ESYS, -27, "system call failed (see errno)")                             \
    XX(ETOOMANY, -28, "too many objects")                                       \
    XX(EUNSUPPORTED, -29, "not supported")                                      \
    XX(EPROVIDER, -30, "the provider reported an error inside the stream")      \
    XX(EUNSAFE, -31, "not safe to repeat: hedging needs an idempotent request") \
    XX(EINPROGRESS, -32, "in progress: the answer comes later")                 \
    XX(EPRELUDE_CRC, -33, "event-stream prelude CRC32 mismatch")                \
    XX(EMESSAGE_CRC, -34, "event-stream message CRC32 mismatch")                \
    XX(EMESSAGE_LENGTH, -35, "event-stream length out of range")                \
    XX(EHEADER, -36, "malformed event-stream header")

/**
 * sg_errno - the negative error codes every int-returning function uses;
 * 0 is success.  Generated from SG_ERRNO_MAP (see it for the reserved codes
 * SG_EPROTO, SG_EHTTP and SG_ECORRUPT).  A negative code means the call
 * itself could not run; how a stream ended is an sg_outcome, not an error.
 */
typedef enum sg_errno {
#define SG__ERR_ENUM(name, value, text) SG_##name = (value),
    SG_ERRNO_MAP(SG__ERR_ENUM)
#undef SG__ERR_ENUM
} sg_errno;

/**
 * sg_strerror - a description of an error code, for messages.
 *
 * @err: 0 or an SG_E* code; any other value is accepted.
 *
 * Returns a static English string: "success" for 0, the table's text for
 * an SG_E* code, "unknown error" for any other value.  Never NULL.
 * Thread-safety: pure function.
 */
SG_EXTERN const char *sg_strerror(int err);

/**
 * sg_errname - the symbolic name of an error code, for logs.
 *
 * @err: 0 or an SG_E* code; any other value is accepted.
 *
 * Returns a static string: the name without its prefix (e.g. "EINVAL"),
 * "OK" for 0, "UNKNOWN" for any other value.  Never NULL.
 * Thread-safety: pure function.
 */
SG_EXTERN const char *sg_errname(int err);

/* ------------------------------------------------------------------------
 * Outcomes and phases.  Their names are a public contract (reports, logs).
 * ------------------------------------------------------------------------ */

/**
 * SG_OUTCOME_MAP - the outcome table: XX(NAME, "name").  It generates enum
 * sg_outcome (SG_OUTCOME_<NAME>) and the names of sg_outcome_name().
 */
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
    XX(PROTOCOL_ERROR, "protocol_error")         \
    XX(PROVIDER_ERROR, "provider_error")

/**
 * sg_outcome - how an attempt (or an operation) ended: exactly one per
 * attempt.  What a caller may conclude from each (use, retry, discard,
 * reconcile) is in docs/outcomes.md.
 *
 * - SG_OUTCOME_OK: ended as the protocol requires (sentinel seen, or a
 *   complete body when none is configured).
 * - SG_OUTCOME_CONNECT_TIMEOUT: no connection within the connect clock.
 * - SG_OUTCOME_FIRST_ITEM_TIMEOUT: no item within the first-item clock.
 * - SG_OUTCOME_IDLE_TIMEOUT: no item within the idle clock after the last
 *   one (always partial).
 * - SG_OUTCOME_STREAM_TIMEOUT: the stream-total clock ran out.
 * - SG_OUTCOME_ATTEMPT_TIMEOUT: the per-attempt ceiling ran out.
 * - SG_OUTCOME_BUDGET_EXHAUSTED: the operation's budget was the limit.
 * - SG_OUTCOME_REFUSED: not dialled: too little budget left above the floor.
 * - SG_OUTCOME_CANCELLED: the consumer or the caller stopped it.
 * - SG_OUTCOME_CAP_EXCEEDED: more items or bytes than the cap (runaway).
 * - SG_OUTCOME_TRUNCATED: the connection or stream ended mid-body, or the
 *   body ended without its terminal sentinel.
 * - SG_OUTCOME_HTTP_ERROR: a non-success HTTP status.
 * - SG_OUTCOME_TRANSPORT_ERROR: connect refused, reset, TLS, DNS, an HTTP/2
 *   stream error before a response.
 * - SG_OUTCOME_PROTOCOL_ERROR: the peer broke the protocol (a line or event
 *   over the limit, malformed HTTP/2).
 * - SG_OUTCOME_PROVIDER_ERROR: the server reported a failure inside the
 *   stream (an in-band error item, as a provider profile recognises it:
 *   vLLM's data: {"error":...}, Anthropic's event: error, ...).
 *
 * SG_OUTCOME_COUNT_ is the number of outcomes, not an outcome.
 */
typedef enum sg_outcome {
#define SG__OUTCOME_ENUM(name, text) SG_OUTCOME_##name,
    SG_OUTCOME_MAP(SG__OUTCOME_ENUM)
#undef SG__OUTCOME_ENUM
        SG_OUTCOME_COUNT_
} sg_outcome;

/**
 * SG_PHASE_MAP - the phase table: XX(NAME, "name").  It generates enum
 * sg_phase (SG_PHASE_<NAME>) and the names of sg_phase_name().
 */
#define SG_PHASE_MAP(XX)                   \
    XX(CONNECT, "connect")                 \
    XX(SEND, "send")                       \
    XX(WAIT_HEADERS, "wait_headers")       \
    XX(WAIT_FIRST_ITEM, "wait_first_item") \
    XX(STREAMING, "streaming")

/**
 * sg_phase - where an attempt was when it ended; phases only move forward.
 * It says whether the server could have seen the request (docs/outcomes.md,
 * "Phases").
 *
 * - SG_PHASE_CONNECT: the attempt started; nothing was sent.
 * - SG_PHASE_SEND: connected; the request is being written.
 * - SG_PHASE_WAIT_HEADERS: the request is written; no status yet.
 * - SG_PHASE_WAIT_FIRST_ITEM: a response status arrived; no item yet.
 * - SG_PHASE_STREAMING: the first item was delivered.
 *
 * SG_PHASE_COUNT_ is the number of phases, not a phase.
 */
typedef enum sg_phase {
#define SG__PHASE_ENUM(name, text) SG_PHASE_##name,
    SG_PHASE_MAP(SG__PHASE_ENUM)
#undef SG__PHASE_ENUM
        SG_PHASE_COUNT_
} sg_phase;

/**
 * sg_outcome_name - the stable snake_case name of an outcome.
 *
 * Returns a static string such as "idle_timeout", or NULL when @outcome is
 * out of range.
 * Thread-safety: pure function.
 */
SG_EXTERN const char *sg_outcome_name(sg_outcome outcome);

/**
 * sg_phase_name - the stable snake_case name of a phase.
 *
 * Returns a static string such as "wait_headers", or NULL when @phase is
 * out of range.
 * Thread-safety: pure function.
 */
SG_EXTERN const char *sg_phase_name(sg_phase phase);

/**
 * sg_outcome_from_name - parses an outcome name (as sg_outcome_name gives).
 *
 * @name: a NUL-terminated name, compared case-sensitively.
 * @out: receives the outcome; unchanged on error.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @name or @out is NULL, or @name names no outcome.
 * Thread-safety: pure function (writes only *@out).
 */
SG_EXTERN int sg_outcome_from_name(const char *name, sg_outcome *out);

/**
 * sg_phase_from_name - parses a phase name (as sg_phase_name gives).
 *
 * @name: a NUL-terminated name, compared case-sensitively.
 * @out: receives the phase; unchanged on error.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @name or @out is NULL, or @name names no phase.
 * Thread-safety: pure function (writes only *@out).
 */
SG_EXTERN int sg_phase_from_name(const char *name, sg_phase *out);

/**
 * sg_outcome_is_timeout - does the outcome mean "a clock or the budget ran
 * out"?
 *
 * Returns true for connect_timeout, first_item_timeout, idle_timeout,
 * stream_timeout, attempt_timeout and budget_exhausted; false for every
 * other value, out-of-range ones included.
 * Thread-safety: pure function.
 */
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
 * @budget: the budget to (re)start; any previous state is overwritten.
 * @now: the current monotonic instant.
 * @total_ns: the operation budget, 1 ns .. SG_DURATION_MAX.
 * @floor_ns: a reserve that is never leased (0 .. SG_DURATION_MAX): when
 *   what remains falls to the floor, leases are refused instead of dialling
 *   out with too little time to succeed.  A floor at or above the total is
 *   allowed - an inbound deadline may leave less than the floor - and then
 *   every lease is refused (the caller reports "refused" without dialling).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @budget is unchanged):
 *   SG_EINVAL  @budget is NULL, @total_ns <= 0 or @floor_ns < 0;
 *   SG_ERANGE  @total_ns or @floor_ns > SG_DURATION_MAX.
 * Thread-safety: touches only @budget.
 */
SG_EXTERN int sg_budget_start(sg_budget *budget, int64_t now, int64_t total_ns,
                              int64_t floor_ns);

/**
 * sg_budget_start_until - begin an operation's budget that ends at the
 * absolute instant @deadline, e.g. an inbound deadline turned into a local
 * one with sg_deadline_from_timeout().
 *
 * @now: the current monotonic instant.
 * @deadline: the absolute monotonic deadline; at or before @now is allowed
 *   and gives a budget with nothing left (every lease is refused, and a
 *   guard started under it expires with budget_exhausted at once).
 * @floor_ns: the reserve never leased, 0 .. SG_DURATION_MAX.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @budget is NULL or @floor_ns < 0;
 *   SG_ERANGE  @deadline is more than SG_DURATION_MAX after @now, or
 *              @floor_ns > SG_DURATION_MAX.
 * Thread-safety: touches only @budget.
 */
SG_EXTERN int sg_budget_start_until(sg_budget *budget, int64_t now, int64_t deadline,
                                    int64_t floor_ns);

/**
 * sg_budget_child - a budget whose deadline is min(parent's, now + limit).
 *
 * Use it for a fallback or a sub-operation that must not outlive its
 * parent.  The child starts at @now and keeps the parent's floor when that
 * floor is below the child's own total (deadline - @now); otherwise its
 * floor is 0, so a short child is not refused outright.
 * @parent: a started budget; not modified.
 * @now: the current monotonic instant.
 * @limit_ns: the child's own limit, 1 .. SG_DURATION_MAX, or SG_TIME_NEVER
 *   to inherit the parent's deadline as is.
 * @child: receives the child budget; unchanged on error.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @parent or @child is NULL, @parent not started, or
 *                @limit_ns <= 0;
 *   SG_ERANGE    @limit_ns > SG_DURATION_MAX (and not SG_TIME_NEVER);
 *   SG_EREFUSED  the parent has nothing left at @now.
 * Thread-safety: reads only @parent, touches only @child.
 */
SG_EXTERN int sg_budget_child(const sg_budget *parent, int64_t now, int64_t limit_ns,
                              sg_budget *child);

/**
 * sg_budget_deadline - the budget's absolute deadline.
 *
 * Returns the deadline (start + total, saturated) of a started budget, or
 * SG_TIME_NEVER when @budget is NULL or was never started.
 * Thread-safety: reads only @budget.
 */
SG_EXTERN int64_t sg_budget_deadline(const sg_budget *budget);

/**
 * sg_budget_floor - the budget's reserve that is never leased.
 *
 * Returns the floor in ns of a started budget, or 0 when @budget is NULL
 * or was never started.
 * Thread-safety: reads only @budget.
 */
SG_EXTERN int64_t sg_budget_floor(const sg_budget *budget);

/**
 * sg_budget_started_at - the instant the budget started.
 *
 * Returns the @now given to sg_budget_start (or sg_budget_child), or 0
 * when @budget is NULL or was never started (0 is also a valid instant:
 * check the budget was started when that matters).
 * Thread-safety: reads only @budget.
 */
SG_EXTERN int64_t sg_budget_started_at(const sg_budget *budget);

/**
 * sg_budget_remaining - nanoseconds left at @now.
 *
 * Returns deadline - @now (saturating at INT64_MAX), 0 once @now has
 * reached the deadline - never negative - and 0 when @budget is NULL or
 * was never started.
 * Thread-safety: reads only @budget.
 */
SG_EXTERN int64_t sg_budget_remaining(const sg_budget *budget, int64_t now);

/**
 * sg_budget_lease - grant time for an attempt or a sleep.
 *
 * granted = min(@wanted_ns, remaining - floor).  The budget is not
 * changed: every lease is computed from the one deadline at @now.
 * @wanted_ns: 1 .. SG_DURATION_MAX, or SG_TIME_NEVER for "as much as may be
 *   leased".
 * @granted_ns: receives the grant.
 *
 * Returns 0 and sets *@granted_ns (> 0) if it succeeds, or one of the
 * following negative error codes (and then *@granted_ns, when non-NULL, is
 * set to 0):
 *   SG_EINVAL    @budget or @granted_ns is NULL, a budget never started, or
 *                @wanted_ns <= 0;
 *   SG_ERANGE    @wanted_ns > SG_DURATION_MAX (and not SG_TIME_NEVER);
 *   SG_EREFUSED  remaining <= floor: nothing may be leased.
 * Thread-safety: reads only @budget.
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

/**
 * sg_guard_config_init - resets @cfg so every clock and cap is off (the
 * same as zero-initialising it).
 *
 * Returns nothing; a NULL @cfg is ignored.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN void sg_guard_config_init(sg_guard_config *cfg);

/**
 * sg_guard_config_set_connect - the connect timeout: from guard start until
 * the phase leaves "connect" (sg_guard_set_phase).  Default: off.
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds.  Use sg_guard_config_clear_clocks
 *   to turn clocks off again.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @cfg is unchanged):
 *   SG_EINVAL  @cfg is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_guard_config_set_connect(sg_guard_config *cfg, int64_t ns);

/**
 * sg_guard_config_set_first_item - the first-item deadline: from guard
 * start to the first item (time to first token).  Default: off.
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @cfg is unchanged):
 *   SG_EINVAL  @cfg is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_guard_config_set_first_item(sg_guard_config *cfg, int64_t ns);

/**
 * sg_guard_config_set_idle - the idle timeout: from each item to the next;
 * it starts at the first item.  Bytes that are not items (keepalive
 * comments) never reset it.  Default: off.
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @cfg is unchanged):
 *   SG_EINVAL  @cfg is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_guard_config_set_idle(sg_guard_config *cfg, int64_t ns);

/**
 * sg_guard_config_set_stream_total - the stream-total clock: from guard
 * start to the end of the stream.  Default: off.
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @cfg is unchanged):
 *   SG_EINVAL  @cfg is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_guard_config_set_stream_total(sg_guard_config *cfg, int64_t ns);

/**
 * sg_guard_config_set_attempt - the per-attempt ceiling: from guard start
 * to the end of the attempt.  Default: off.
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @cfg is unchanged):
 *   SG_EINVAL  @cfg is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_guard_config_set_attempt(sg_guard_config *cfg, int64_t ns);

/**
 * sg_guard_config_clear_clocks - turns every clock off; the caps are kept.
 *
 * Returns nothing; a NULL @cfg is ignored.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN void sg_guard_config_clear_clocks(sg_guard_config *cfg);

/**
 * sg_guard_config_set_max_items - the runaway item cap.  With a cap of N
 * the N-th item is accepted and the one after it ends the stream with
 * cap_exceeded (sg_guard_on_item returns SG_ECAP).  Default: 0 (off).
 *
 * @n: the cap; 0 turns it off.  Any value is valid.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @cfg is NULL.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_guard_config_set_max_items(sg_guard_config *cfg, uint64_t n);

/**
 * sg_guard_config_set_max_bytes - the runaway byte cap, counted over every
 * body byte reported to sg_guard_on_bytes.  With a cap of N a total of N
 * bytes is accepted, and the call that takes the total above N ends the
 * stream with cap_exceeded (it returns SG_ECAP).  Default: 0 (off).
 *
 * @n: the cap; 0 turns it off.  Any value is valid.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @cfg is NULL.
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_guard_config_set_max_bytes(sg_guard_config *cfg, uint64_t n);

/**
 * sg_guard_config_connect - the configured connect timeout.
 *
 * Returns the duration in ns, or 0 when it is off or @cfg is NULL.
 * Thread-safety: reads only @cfg.
 */
SG_EXTERN int64_t sg_guard_config_connect(const sg_guard_config *cfg);

/**
 * sg_guard_config_first_item - the configured first-item deadline.
 *
 * Returns the duration in ns, or 0 when it is off or @cfg is NULL.
 * Thread-safety: reads only @cfg.
 */
SG_EXTERN int64_t sg_guard_config_first_item(const sg_guard_config *cfg);

/**
 * sg_guard_config_idle - the configured idle timeout.
 *
 * Returns the duration in ns, or 0 when it is off or @cfg is NULL.
 * Thread-safety: reads only @cfg.
 */
SG_EXTERN int64_t sg_guard_config_idle(const sg_guard_config *cfg);

/**
 * sg_guard_config_stream_total - the configured stream-total clock.
 *
 * Returns the duration in ns, or 0 when it is off or @cfg is NULL.
 * Thread-safety: reads only @cfg.
 */
SG_EXTERN int64_t sg_guard_config_stream_total(const sg_guard_config *cfg);

/**
 * sg_guard_config_attempt - the configured per-attempt ceiling.
 *
 * Returns the duration in ns, or 0 when it is off or @cfg is NULL.
 * Thread-safety: reads only @cfg.
 */
SG_EXTERN int64_t sg_guard_config_attempt(const sg_guard_config *cfg);

/**
 * sg_guard_config_max_items - the configured item cap.
 *
 * Returns the cap, or 0 when it is off or @cfg is NULL.
 * Thread-safety: reads only @cfg.
 */
SG_EXTERN uint64_t sg_guard_config_max_items(const sg_guard_config *cfg);

/**
 * sg_guard_config_max_bytes - the configured byte cap.
 *
 * Returns the cap, or 0 when it is off or @cfg is NULL.
 * Thread-safety: reads only @cfg.
 */
SG_EXTERN uint64_t sg_guard_config_max_bytes(const sg_guard_config *cfg);

/**
 * sg_guard - the state of one attempt's clocks; plain data the caller embeds
 * (at most 128 bytes), zero-initialisable, fields private.  A
 * zero-initialised guard is "never started": every call but sg_guard_start
 * and the getters fails with SG_ESTATE.
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

/** sg_guard_result - what a finished attempt's guard concludes. */
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
 * sg_guard_start - arm the clocks of one attempt at @now under @budget.
 *
 * Every configured clock is clamped by the budget's deadline; @budget may be
 * NULL for a stream with no operation budget.  The guard starts in phase
 * "connect".  @cfg is copied; it need not outlive the call.  A guard may be
 * started again for a new attempt at any time: its previous state is
 * discarded.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @guard is unchanged):
 *   SG_EINVAL  @guard or @cfg is NULL, @budget was never started, or @cfg
 *              holds a clock that is negative or above SG_DURATION_MAX.
 * Thread-safety: touches only @guard; reads @cfg and @budget.
 */
SG_EXTERN int sg_guard_start(sg_guard *guard, const sg_guard_config *cfg,
                             const sg_budget *budget, int64_t now);

/**
 * sg_guard_set_phase - the transport reports progress before the first item:
 * connect -> send -> wait_headers -> wait_first_item.  Phases only move
 * forward (skipping is allowed; the current phase again is a no-op);
 * "streaming" is entered by the first item.  Leaving "connect" disarms the
 * connect clock.  No deadline is checked here (@now is unused): use
 * sg_guard_check.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @guard is NULL or @phase is out of range or is "streaming";
 *   SG_ESTATE  the guard is not running (never started, expired, capped or
 *              finished), or @phase is behind the current one (every phase
 *              is, once the first item entered "streaming").
 * Thread-safety: touches only @guard.
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
 *   SG_ETIMEDOUT  a clock or the budget had expired by @now (latched);
 *   SG_ECAP       the item cap is exceeded (latched: cap_exceeded);
 *   SG_ESTATE     the guard is not running (never started, or finished, or
 *                 already expired or capped);
 *   SG_EINVAL     @guard is NULL.
 * Thread-safety: touches only @guard.
 */
SG_EXTERN int sg_guard_on_item(sg_guard *guard, int64_t now);

/**
 * sg_guard_on_bytes - @n bytes arrived at @now (all received body bytes,
 * items and keepalives alike).  Counts toward the byte cap and the report;
 * it NEVER resets the idle clock, so keepalive comments cannot keep a dead
 * generation alive.  Deadlines are checked first, as in sg_guard_on_item.
 * The bytes of a call that exceeds the cap are still counted (the byte
 * count saturates at UINT64_MAX).
 *
 * Returns 0 when the bytes are accepted, or one of the following negative
 * error codes (stop reading; call sg_guard_finish):
 *   SG_ETIMEDOUT  a clock or the budget had expired by @now (latched);
 *   SG_ECAP       the byte total now exceeds the byte cap (latched:
 *                 cap_exceeded);
 *   SG_ESTATE     the guard is not running (never started, or finished, or
 *                 already expired or capped);
 *   SG_EINVAL     @guard is NULL.
 * Thread-safety: touches only @guard.
 */
SG_EXTERN int sg_guard_on_bytes(sg_guard *guard, int64_t now, uint64_t n);

/**
 * sg_guard_next_deadline - the one absolute instant an event loop should arm
 * a timer for.  O(1).
 *
 * @guard: must not be NULL (static inline: it is read directly).
 *
 * Returns, for a running guard, the earliest live deadline, or
 * SG_TIME_NEVER when no clock is configured and there is no budget.
 * Returns SG_TIME_NEVER once the guard has expired, been capped or finished.
 * For a zero-initialised guard that was never started it returns 0 (not
 * SG_TIME_NEVER): check sg_guard_running first.
 * Thread-safety: reads only @guard.
 */
static inline int64_t sg_guard_next_deadline(const sg_guard *guard) {
    return guard->next_;
}

/**
 * sg_guard_check - has a deadline passed at @now?
 *
 * An expiry is latched: later checks and sg_guard_finish report the same
 * outcome.  When two limits fall on the same instant the clock's own name
 * wins over budget_exhausted (the clock alone would have fired).
 * @outcome: may be NULL; set only when 1 is returned.
 *
 * Returns 0 while the attempt may go on; 1 when the guard has stopped: a
 * clock expired by @now or earlier (then *@outcome says which:
 * connect_timeout, first_item_timeout, idle_timeout, stream_timeout,
 * attempt_timeout, or budget_exhausted when the budget was the tighter
 * limit), or a cap was exceeded earlier (*@outcome is cap_exceeded); or one
 * of the following negative error codes:
 *   SG_EINVAL  @guard is NULL;
 *   SG_ESTATE  the guard was never started or has finished.
 * Thread-safety: touches only @guard.
 */
SG_EXTERN int sg_guard_check(sg_guard *guard, int64_t now, sg_outcome *outcome);

/**
 * sg_guard_finish - the stream ended at @now; @clean says whether it ended
 * as the protocol requires (terminal sentinel seen, or a complete body when
 * none is configured).
 *
 * Outcome: a latched expiry or cap wins; else a deadline that passed by @now
 * (checked here); else ok when @clean, truncated otherwise.  partial =
 * items > 0 and outcome != ok.  The guard is then finished.
 * @result: receives the result; untouched on error.
 *
 * Returns 0 and fills *@result if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL  @guard or @result is NULL;
 *   SG_ESTATE  the guard was never started or has already finished.
 * Thread-safety: touches only @guard and @result.
 */
SG_EXTERN int sg_guard_finish(sg_guard *guard, int64_t now, bool clean,
                              sg_guard_result *result);

/**
 * sg_guard_fail - the attempt ended at @now for a reason only the transport
 * knows: cancelled, http_error, transport_error, protocol_error,
 * connect_timeout (from the OS), truncated.  The first cause is the true
 * one: a clock expiry or cap latched earlier wins, and so does a deadline
 * that passed by @now (checked here, as in sg_guard_finish).  The guard is
 * then finished.
 * @outcome: any outcome but ok.
 * @result: receives the result; untouched on error.
 *
 * Returns 0 and fills *@result if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL  @guard or @result is NULL, or @outcome is ok or out of range;
 *   SG_ESTATE  the guard was never started or has already finished.
 * Thread-safety: touches only @guard and @result.
 */
SG_EXTERN int sg_guard_fail(sg_guard *guard, int64_t now, sg_outcome outcome,
                            sg_guard_result *result);

/**
 * sg_guard_phase - the guard's current phase.
 *
 * Returns the phase; after the attempt ended, the phase it ended in.
 * Returns SG_PHASE_CONNECT when @guard is NULL or was never started.
 * Thread-safety: reads only @guard.
 */
SG_EXTERN sg_phase sg_guard_phase(const sg_guard *guard);

/**
 * sg_guard_items - items accepted so far (a late or over-cap item is not
 * counted).
 *
 * Returns the count, which is kept after the attempt ended; 0 when @guard
 * is NULL or never started.
 * Thread-safety: reads only @guard.
 */
SG_EXTERN uint64_t sg_guard_items(const sg_guard *guard);

/**
 * sg_guard_bytes - bytes reported through sg_guard_on_bytes so far.
 *
 * Returns the count (saturating at UINT64_MAX), which is kept after the
 * attempt ended; 0 when @guard is NULL or never started.
 * Thread-safety: reads only @guard.
 */
SG_EXTERN uint64_t sg_guard_bytes(const sg_guard *guard);

/**
 * sg_guard_running - is the attempt still live?
 *
 * Returns true between sg_guard_start and the first expiry, cap, finish or
 * fail; false when @guard is NULL or never started.
 * Thread-safety: reads only @guard.
 */
SG_EXTERN bool sg_guard_running(const sg_guard *guard);

/**
 * sg_mem - where buffers that grow as they are used get their memory (the
 * framing buffers of sg_stream_init_mem): one function with realloc's
 * contract - @ptr NULL allocates; @size 0 frees @ptr and returns NULL; NULL
 * for a non-zero @size means no memory, and @ptr is then left as it was -
 * and the user_data handed to it.  resize NULL means the C library's
 * realloc and free.  The core never allocates; this only describes an
 * allocator for the layers above it.
 */
typedef struct sg_mem {
    void *(*resize)(void *ptr, size_t size, void *user_data);
    void *user_data;
} sg_mem;

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_CORE_H */
