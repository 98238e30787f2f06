/*
 * streamguard core: time, clocks, errors, outcomes and phases, the
 * operation budget and the stream guard (the clocks of one attempt,
 * <streamguard/guard.h>, which this header includes).
 * Sans-I/O and libc only: nothing here reads a clock (but sg_clock_now),
 * opens a socket or allocates; every instant is CLOCK_MONOTONIC
 * nanoseconds (int64_t) the caller passes in.
 *
 * The structs here are embedded by the caller: their fields are private,
 * set through their _init/_start functions and setters, and each ends with
 * reserved room so that its size stays the same for every 1.x release (the
 * library pins each size).  Their setters copy what they are given.
 *
 * Thread-safety: reentrant functions that touch only the objects given;
 * one object needs the caller's own lock if two threads use it.
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
 * SG_EXTERN - marks a public function for export.  The library is
 * compiled with hidden visibility, so only SG_EXTERN functions are
 * exported.  Empty when SG_STATIC_DEFINE is defined or the compiler is not
 * GCC-compatible; the build itself never defines SG_STATIC_DEFINE.
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

/** sg_version - the linked library's "MAJOR.MINOR.PATCH" (static, never
 *  NULL); compare with SG_VERSION_STRING to detect a header/library
 *  mismatch. */
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
 * variable) and are rejected with SG_ERANGE rather than meaning "forever".
 */
#define SG_DURATION_MAX SG_SEC(366LL * 24 * 3600)

/**
 * sg_time_add - @t + @d, saturating: SG_TIME_NEVER when the sum would
 * overflow or @t is SG_TIME_NEVER, INT64_MIN when a negative @d would
 * underflow.  Never wraps.
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
 * @now is not after @since, INT64_MAX when the difference would overflow.
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

/** sg_time_min - the earlier of two instants (SG_TIME_NEVER is the
 *  identity). */
static inline int64_t sg_time_min(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* ------------------------------------------------------------------------
 * Clocks
 * ------------------------------------------------------------------------ */

/**
 * sg_clock - an injectable monotonic clock: what the transports and
 * programs read time through, so that tests can substitute a hand-driven
 * one.  Embed it; set it with sg_clock_init (a zero-initialised sg_clock is
 * the system monotonic clock).  Where a transport takes one it keeps a
 * copy of the struct and borrows its user_data.
 */
typedef struct sg_clock {
    int64_t (*now_)(void *user_data); /* private: NULL = the system clock */
    void *user_data_;                 /* private */
    void *reserved_[2];               /* private: room to grow */
} sg_clock;

/**
 * sg_clock_init - @clock reads @now(@user_data), which returns
 * CLOCK_MONOTONIC-like nanoseconds and never goes backwards; a NULL @now
 * is the system monotonic clock.  @user_data is borrowed.
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @clock is NULL.
 */
SG_EXTERN int sg_clock_init(sg_clock *clock, int64_t (*now)(void *user_data),
                            void *user_data);

/** sg_clock_monotonic_now - clock_gettime(CLOCK_MONOTONIC) in ns
 *  (@user_data is ignored).  Safe from any thread. */
SG_EXTERN int64_t sg_clock_monotonic_now(void *user_data);

/**
 * sg_clock_now - reads @clock; NULL (or a clock without a function) is the
 * system monotonic clock.  Thread-safety: as the clock's function.
 */
SG_EXTERN int64_t sg_clock_now(const sg_clock *clock);

/**
 * sg_manual_clock - a hand-driven clock for tests and simulations.  Embed
 * it; a zero-initialised one (or sg_manual_clock_init) reads 0.  Read it
 * through sg_manual_clock_as().
 */
typedef struct sg_manual_clock {
    int64_t now_;       /* private: what every read returns */
    void *reserved_[2]; /* private: room to grow */
} sg_manual_clock;

/** sg_manual_clock_init - @mc reads @now from here on (NULL: nothing). */
SG_EXTERN void sg_manual_clock_init(sg_manual_clock *mc, int64_t now);

/** sg_manual_clock_set - every later read returns @now (NULL: nothing). */
SG_EXTERN void sg_manual_clock_set(sg_manual_clock *mc, int64_t now);

/** sg_manual_clock_advance - moves @mc @ns forward, saturating
 *  (sg_time_add; NULL: nothing). */
SG_EXTERN void sg_manual_clock_advance(sg_manual_clock *mc, int64_t ns);

/** sg_manual_clock_now - what @mc reads now; -1 when @mc is NULL. */
SG_EXTERN int64_t sg_manual_clock_now(const sg_manual_clock *mc);

/**
 * sg_manual_clock_as - an sg_clock that reads @mc at each read.  It keeps
 * the pointer: @mc must outlive it.  Reads race with sg_manual_clock_set
 * unless the caller serialises them.
 */
SG_EXTERN sg_clock sg_manual_clock_as(sg_manual_clock *mc);

/* ------------------------------------------------------------------------
 * Errors: one table makes the enum, sg_strerror() and sg_errname().
 * Every code is negative; 0 is success.
 * ------------------------------------------------------------------------ */

/**
 * SG_ERRNO_MAP - the error table: XX(name, value, text) for every code.
 * It generates enum sg_errno (SG_<name> = value), sg_strerror() (text) and
 * sg_errname() (name).  Every value is negative and stable.  Reserved
 * codes, which no function returns yet: SG_EPROTO (a peer's protocol
 * violation is the outcome protocol_error), SG_EHTTP (an error status is
 * the outcome http_error) and SG_ECORRUPT (the ledger skips and counts
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

/** sg_strerror - a static English description of @err: "success" for 0,
 *  the table's text for an SG_E* code, "unknown error" for any other
 *  value.  Never NULL. */
SG_EXTERN const char *sg_strerror(int err);

/** sg_errname - the static symbolic name of @err, for logs: the name
 *  without its prefix ("EINVAL"), "OK" for 0, "UNKNOWN" for any other
 *  value.  Never NULL. */
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
 * attempt.  Each one's meaning, and what a caller may conclude from it
 * (use, retry, discard, reconcile), is in docs/outcomes.md: a clock's
 * name when that clock ran out (connect_timeout .. attempt_timeout),
 * budget_exhausted when the operation's budget was the limit, refused
 * when nothing was dialled, cancelled, cap_exceeded (runaway), truncated,
 * http_error, transport_error, protocol_error, provider_error (the server
 * reported a failure inside the stream), and ok.
 *
 * SG_OUTCOME_NONE (-1, outside SG_OUTCOME_MAP) is no outcome: what a
 * getter returns when there is none to give (NULL, never started, not
 * ended yet); sg_outcome_name() names it "none", which names no outcome
 * anywhere else (reports, the ledger).  SG_OUTCOME_COUNT_ is the number of
 * outcomes, not an outcome.
 */
typedef enum sg_outcome {
    SG_OUTCOME_NONE = -1,
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
 * SG_PHASE_NONE (-1, outside SG_PHASE_MAP, named "none") is no phase:
 * what a getter returns for a guard never started.  SG_PHASE_COUNT_ is the
 * number of phases, not a phase.
 */
typedef enum sg_phase {
    SG_PHASE_NONE = -1,
#define SG__PHASE_ENUM(name, text) SG_PHASE_##name,
    SG_PHASE_MAP(SG__PHASE_ENUM)
#undef SG__PHASE_ENUM
        SG_PHASE_COUNT_
} sg_phase;

/**
 * sg_outcome_name, sg_phase_name - the stable snake_case name ("idle_timeout",
 * "wait_headers"), static; "none" for SG_OUTCOME_NONE / SG_PHASE_NONE;
 * NULL for any other value out of range.
 */
SG_EXTERN const char *sg_outcome_name(sg_outcome outcome);
/** sg_phase_name - see sg_outcome_name. */
SG_EXTERN const char *sg_phase_name(sg_phase phase);

/**
 * sg_outcome_from_name, sg_phase_from_name - parse a name as the functions
 * above give it (case-sensitive) into *@out.  Returns 0, or SG_EINVAL when
 * @name or @out is NULL or @name names none ("none" included: it names no
 * outcome or phase); *@out is unchanged on error.
 */
SG_EXTERN int sg_outcome_from_name(const char *name, sg_outcome *out);
/** sg_phase_from_name - see sg_outcome_from_name. */
SG_EXTERN int sg_phase_from_name(const char *name, sg_phase *out);

/** sg_outcome_is_timeout - true for connect_timeout, first_item_timeout,
 *  idle_timeout, stream_timeout, attempt_timeout and budget_exhausted (a
 *  clock or the budget ran out); false for any other value. */
SG_EXTERN bool sg_outcome_is_timeout(sg_outcome outcome);

/* ------------------------------------------------------------------------
 * Budget: one absolute deadline per operation, never extended.
 * ------------------------------------------------------------------------ */

/**
 * sg_budget - an operation's budget.  Embed it; its fields are private.  A
 * zero-initialised budget is "never started": every call but the two
 * _start functions refuses it (SG_EINVAL) or answers -1.
 */
typedef struct sg_budget {
    int64_t start_, deadline_, floor_; /* private (src/core/budget.c) */
    uint32_t magic_, pad_;             /* private */
    void *reserved_[2];                /* private: room to grow */
} sg_budget;

/**
 * sg_budget_start - begin an operation's budget at @now: @total_ns (1 ..
 * SG_DURATION_MAX) from now, with a reserve that is never leased,
 * @floor_ns (0 .. SG_DURATION_MAX): when what remains falls to the floor,
 * leases are refused instead of dialling out with too little time to
 * succeed.  A floor at or above the total is allowed (an inbound deadline
 * may leave less than the floor): every lease is then refused.  Any
 * previous state of @budget is overwritten.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @budget is unchanged):
 *   SG_EINVAL  @budget is NULL, @total_ns <= 0 or @floor_ns < 0;
 *   SG_ERANGE  @total_ns or @floor_ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_budget_start(sg_budget *budget, int64_t now, int64_t total_ns,
                              int64_t floor_ns);

/**
 * sg_budget_start_until - begin a budget at @now that ends at the absolute
 * instant @deadline (e.g. an inbound deadline, sg_deadline_from_timeout);
 * at or before @now gives one with nothing left.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @budget is NULL or @floor_ns < 0;
 *   SG_ERANGE  @deadline is more than SG_DURATION_MAX after @now, or
 *              @floor_ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_budget_start_until(sg_budget *budget, int64_t now, int64_t deadline,
                                    int64_t floor_ns);

/**
 * sg_budget_child - a budget for a sub-operation that must not outlive its
 * parent: it starts at @now and ends at min(@parent's deadline, @now +
 * @limit_ns); @limit_ns is 1 .. SG_DURATION_MAX, or SG_TIME_NEVER for the
 * parent's deadline as is.  It keeps the parent's floor when that is below
 * its own total, else its floor is 0 (a short child is not refused
 * outright).  *@child is unchanged on error.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @parent or @child is NULL, @parent not started, or
 *                @limit_ns <= 0;
 *   SG_ERANGE    @limit_ns > SG_DURATION_MAX (and not SG_TIME_NEVER);
 *   SG_EREFUSED  the parent has nothing left at @now.
 */
SG_EXTERN int sg_budget_child(const sg_budget *parent, int64_t now, int64_t limit_ns,
                              sg_budget *child);

/* The readers of a budget answer -1 for NULL or a budget never started. */

/** sg_budget_deadline - the absolute deadline (start + total, saturated). */
SG_EXTERN int64_t sg_budget_deadline(const sg_budget *budget);

/** sg_budget_floor - the reserve that is never leased. */
SG_EXTERN int64_t sg_budget_floor(const sg_budget *budget);

/** sg_budget_started_at - the instant the budget started (the @now given to
 *  its _start, or to sg_budget_child). */
SG_EXTERN int64_t sg_budget_started_at(const sg_budget *budget);

/** sg_budget_remaining - what is left at @now: 0 once the deadline is
 *  reached, never negative for a started budget (saturating). */
SG_EXTERN int64_t sg_budget_remaining(const sg_budget *budget, int64_t now);

/**
 * sg_budget_lease - grant time for an attempt or a sleep at @now:
 * min(@wanted_ns, remaining - floor).  The budget is not changed: every
 * lease is computed from the one deadline.  @wanted_ns is 1 ..
 * SG_DURATION_MAX, or SG_TIME_NEVER for all that may be leased.
 *
 * Returns 0 and sets *@granted_ns (> 0) if it succeeds, or one of the
 * following negative error codes (then *@granted_ns, when @granted_ns is
 * not NULL, is 0):
 *   SG_EINVAL    @budget or @granted_ns is NULL, a budget never started,
 *                or @wanted_ns <= 0;
 *   SG_ERANGE    @wanted_ns > SG_DURATION_MAX (and not SG_TIME_NEVER);
 *   SG_EREFUSED  remaining <= floor: nothing may be leased.
 */
SG_EXTERN int sg_budget_lease(const sg_budget *budget, int64_t now, int64_t wanted_ns,
                              int64_t *granted_ns);

/**
 * sg_mem - where buffers that grow as they are used get their memory (the
 * framing buffers of sg_stream_init_mem): one function with realloc's
 * contract - @ptr NULL allocates; @size 0 frees @ptr and returns NULL; NULL
 * for a non-zero @size means no memory, and @ptr is then left as it was -
 * and its user_data.  Embed it; set it with sg_mem_init (zero-initialised,
 * or a NULL function: the C library's realloc and free).  The core never
 * allocates; this only describes an allocator for the layers above it.
 */
typedef struct sg_mem {
    void *(*resize_)(void *ptr, size_t size, void *user_data); /* private */
    void *user_data_;                                          /* private */
    void *reserved_[2];                                        /* private: room to grow */
} sg_mem;

/** sg_mem_init - @mem allocates through @resize(ptr, size, @user_data)
 *  (NULL: realloc and free); @user_data is borrowed.  NULL @mem: nothing. */
SG_EXTERN void sg_mem_init(sg_mem *mem,
                           void *(*resize)(void *ptr, size_t size, void *user_data),
                           void *user_data);

#ifdef __cplusplus
}
#endif

/* The stream guard - the clocks of one attempt - is part of the core, in a
 * header of its own. */
#include <streamguard/guard.h>

#endif /* STREAMGUARD_CORE_H */
