/*
 * streamguard policy: one operation's attempts, all leased from one budget;
 * retry safety; capped exponential backoff with full jitter; Retry-After;
 * deadline propagation headers; and the execution report (JSON).
 *
 * Sans-I/O and libc only, on top of <streamguard/core.h>.  No function here
 * reads a clock or sleeps: every instant is a CLOCK_MONOTONIC nanosecond
 * value the caller passes in, and the only wall-clock input is the unix
 * time in seconds needed to turn an HTTP-date into a delay.  The only
 * allocation is an operation's attempt records past the first
 * SG_OP_INLINE_ATTEMPTS (see "Memory" below).
 *
 * How a transport drives an operation:
 *
 *   sg_op_options o;  sg_op_options_init(&o);
 *   sg_op_options_set_budget(&o, SG_SEC(30));
 *   sg_op op;  sg_op_start(&op, &o, now);
 *   for (;;) {
 *       sg_op_plan plan;
 *       if (sg_op_next_attempt(&op, now, &plan) != 0) break;  // refused
 *       sg_guard g;
 *       sg_guard_start(&g, &plan.guard_config, sg_op_budget(&op), now);
 *       ... run the attempt, stamp plan.deadline_ms in the request ...
 *       sg_op_result r;  sg_op_result_from_guard(&r, &guard_result);
 *       r.sent = ...; r.headers_received = ...; r.http_status = ...;
 *       sg_op_verdict v;  sg_op_attempt_done(&op, now, &r, &v);
 *       if (v.decision != SG_OP_RETRY) break;
 *       ... arm a timer for v.retry_at, then loop ...
 *   }
 *   sg_op_report_write(&op, now, buf, sizeof(buf), &needed);
 *   sg_op_release(&op);
 *
 * Memory: an sg_op is data the caller embeds (1640 bytes on LP64) and
 * every attempt it plans is recorded, up to the max_attempts the caller
 * chose (at most SG_OP_MAX_ATTEMPTS).  A record (sg_op_attempt) is 368
 * bytes on LP64.  The first SG_OP_INLINE_ATTEMPTS records live inside the
 * sg_op, so an operation that retries at most once never allocates; the
 * rest are allocated with malloc() in blocks that double (2, 4, 8, ...
 * records), each allocated when a retry first needs it and cut to
 * max_attempts, and never moved, so a record's address stays valid.  An
 * operation therefore holds at most (max_attempts - SG_OP_INLINE_ATTEMPTS)
 * * sizeof(sg_op_attempt) bytes of heap (about 359 KiB at 1000 attempts)
 * in at most 9 blocks (one record more after a probe,
 * sg_op_options_set_probe), and only while it is retrying that far.  When a
 * block cannot be allocated the retry is not taken: the operation stops
 * with reason out_of_memory and the attempt that could not be recorded is
 * never planned (sg_op_attempt_done).  sg_op_release() frees the blocks.
 *
 * Thread-safety: every function is reentrant and there is no global state
 * (the default random source lives in the sg_op).  An sg_op or sg_op_options
 * must not be used by two threads at once without the caller's own lock.
 * The name tables are immutable.
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_POLICY_H
#define STREAMGUARD_POLICY_H

#include <streamguard/core.h>

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Bounds
 * ------------------------------------------------------------------------ */

/** Most attempts one operation may make (and records); gRPC caps at 5.
 *  With a budget and backoff the budget is the real bound: this only keeps
 *  an operation's records (see "Memory") finite. */
#define SG_OP_MAX_ATTEMPTS 1000
/** Attempt records held inside the sg_op; the rest are allocated. */
#define SG_OP_INLINE_ATTEMPTS 2
/* Heap blocks of records past the inline ones: block k holds records
 * SG_OP_INLINE_ATTEMPTS << k up to twice that (0-based), so 9 blocks reach
 * SG_OP_MAX_ATTEMPTS.  Private. */
#define SG__OP_BLOCKS 9
/** Longest method token, not counting the NUL. */
#define SG_OP_METHOD_MAX 31
/** Longest deadline header name, not counting the NUL. */
#define SG_OP_HEADER_NAME_MAX 63
/** Longest idempotency key, not counting the NUL. */
#define SG_OP_IDEMPOTENCY_KEY_MAX 127
/** Longest label, not counting the NUL. */
#define SG_OP_LABEL_MAX 63
/** Bytes of a raw Retry-After value kept per attempt for the report. */
#define SG_OP_RETRY_AFTER_RAW_MAX 31
/** Bytes of a transport's own error message kept per attempt. */
#define SG_OP_ERROR_MAX 127
/** Bytes kept of the body of an error response (a final status of 400 or
 *  more): what the server said, for the caller (sg_curl_op_error_body,
 *  sg_h2_op_error_body); never in the report. */
#define SG_ERROR_BODY_MAX 4096
/** The most hedges in flight beside an operation's attempt. */
#define SG_OP_MAX_HEDGES 4
/** The most endpoints an operation falls back across. */
#define SG_OP_MAX_ENDPOINTS 16
/** Bytes of an in-band error's type kept per attempt (provider_error). */
#define SG_OP_PROVIDER_TYPE_MAX 63

/**
 * sg_random_fn - a random source for backoff jitter (see
 * sg_op_options_set_random).  Called with the user_data given there, on
 * the thread that calls sg_op_attempt_done.
 *
 * Returns 64 uniformly distributed bits per call.
 */
typedef uint64_t (*sg_random_fn)(void *user_data);

/* ------------------------------------------------------------------------
 * Options: one setter per option, each documenting its default.
 * ------------------------------------------------------------------------ */

/**
 * sg_op_options - an operation's configuration.  Zero-initialise it or call
 * sg_op_options_init(): every option then has its documented default.
 * Fields are private.  The options are copied by sg_op_start().
 */
typedef struct sg_op_options {
    int64_t budget_ns_;                 /* private */
    int64_t floor_ns_;                  /* private */
    int64_t connect_ns_;                /* private: 0 = off */
    int64_t attempt_ns_;                /* private: 0 = off */
    int64_t first_item_ns_;             /* private: 0 = off */
    int64_t idle_ns_;                   /* private: 0 = off */
    int64_t stream_total_ns_;           /* private: 0 = off */
    int64_t backoff_base_ns_;           /* private */
    int64_t backoff_cap_ns_;            /* private */
    int64_t max_retry_after_ns_;        /* private */
    int64_t min_attempt_ns_;            /* private */
    int64_t deadline_;                  /* private: absolute, when set */
    uint64_t max_items_;                /* private: 0 = off */
    uint64_t max_bytes_;                /* private: 0 = off */
    uint64_t seed_;                     /* private */
    sg_random_fn random_;               /* private: NULL = built-in xorshift */
    void *random_ud_;                   /* private */
    uint64_t statuses_[8];              /* private: bitmap of status - 100 */
    uint32_t set_;                      /* private: which options were set */
    uint32_t max_attempts_;             /* private */
    char method_[SG_OP_METHOD_MAX + 1]; /* private */
    char deadline_header_[SG_OP_HEADER_NAME_MAX + 1];     /* private */
    char idempotency_key_[SG_OP_IDEMPOTENCY_KEY_MAX + 1]; /* private */
    char label_[SG_OP_LABEL_MAX + 1];                     /* private */
    const struct sg_op_observer *observer_;               /* private: borrowed */
    void *observer_ud_;                                   /* private */
    const char *target_;                                  /* private: borrowed */
    const char *const *endpoints_;                        /* private: borrowed */
    struct sg_retry_budget *retry_budget_;                /* private: borrowed */
    int64_t hedge_after_ns_;                              /* private: 0 = off */
    uint32_t max_hedges_;                                 /* private */
    uint32_t n_endpoints_;                                /* private: 0 = none */
    int64_t started_at_;                                  /* private: when set */
    int64_t probe_end_;                                   /* private: when set */
    int64_t probe_connect_ns_;                            /* private: 0 = none */
    const char *probe_error_;                             /* private: borrowed */
} sg_op_options;

/**
 * sg_op_options_init - resets @o to every default (the same as
 * zero-initialising it).
 *
 * Returns nothing; a NULL @o is ignored.
 * Thread-safety: touches only @o.
 */
SG_EXTERN void sg_op_options_init(sg_op_options *o);

/**
 * sg_op_options_set_budget - the operation's total budget: every attempt,
 * every backoff sleep is leased from it.  Default: 60 s.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_budget(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_deadline - an absolute monotonic instant the operation
 * must also end by, e.g. a caller's inbound deadline turned into a local one
 * with sg_deadline_from_timeout().  The budget then ends at
 * min(start + budget, @deadline); a deadline already passed when the
 * operation starts leaves nothing, and the first attempt is refused with
 * budget_exhausted without any request being made.  Default: none.
 * @o: the options.
 * @deadline: CLOCK_MONOTONIC nanoseconds (the same clock the transports read).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_deadline(sg_op_options *o, int64_t deadline);

/**
 * sg_op_options_set_started_at - the instant the operation's budget began,
 * when the caller spent time on the operation before starting it: a
 * protocol probe, a wait in a queue.  The budget is then counted from @at,
 * not from the start - it ends at @at + budget (or the deadline, if
 * earlier), the first lease gets only what is left, and the report's
 * elapsed_ms and each attempt's start_ms are measured from @at, so the
 * time before the first attempt shows as its start_ms.  An @at later than
 * the start is the start.  Default: the start.
 * @o: the options.
 * @at: CLOCK_MONOTONIC nanoseconds (the transports' clock).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_started_at(sg_op_options *o, int64_t at);

/**
 * sg_op_options_set_probe - a connection the caller tried and lost before
 * the operation started, inside its budget: a protocol probe (sg-stream's
 * HTTP/2 probe of an https:// URL) that failed.  The time from the budget's
 * start (sg_op_options_set_started_at, which should be set: without it the
 * budget starts at sg_op_start and the probe took no time of it) to
 * @ended_at was spent on it, and the operation records it as its first
 * attempt: phase connect, never sent, granted min(@connect_ns, what the
 * budget could lease), its outcome connect_timeout when @timed_out - or
 * budget_exhausted when it ran to the end of what could be leased and that
 * was shorter than @connect_ns (docs/design.md, "Who set the limit") - else
 * transport_error, with @error as its error; decided retry (backoff 0) when
 * the operation's own first attempt follows, else stop with the refusal's
 * reason.  So a probe that used the budget up leaves a report with that
 * attempt, not none.  It is not one of max_attempts (the attempts after it
 * are), its record is one more than max_attempts allows, and the observer
 * is not told of it (nothing was sent; the intent comes after it).  In the
 * report every attempt then says whether it is the probe ("probe").
 * @ended_at: CLOCK_MONOTONIC nanoseconds (the transports' clock).
 * @connect_ns: the connect clock the probe had, before the budget clamped
 *   it; 0: none (the budget alone bounded it).
 * @error: what failed, NUL-terminated (cut to SG_OP_ERROR_MAX), or NULL;
 *   borrowed: it must stay valid until every operation started with @o
 *   has started.  Do not put credentials in it.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @connect_ns < 0;
 *   SG_ERANGE  @connect_ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_probe(sg_op_options *o, int64_t ended_at,
                                      int64_t connect_ns, bool timed_out,
                                      const char *error);

/**
 * sg_op_options_set_floor - the reserve that is never leased (see
 * sg_budget_lease).  At or above the budget, every attempt is refused.
 * Default: 0.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_floor(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_connect_timeout - the connect timeout of each attempt:
 * from the attempt's start until it is connected (phase leaves "connect").
 * Default: 0 (off).
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds, or 0 to turn the clock off.  Each
 *   attempt gets min(@ns, granted lease); when the lease is the shorter and
 *   the clock fires at the lease's end, the attempt is recorded as
 *   budget_exhausted (see sg_op_attempt_done).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @o is unchanged):
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_connect_timeout(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_attempt_timeout - the per-attempt ceiling: what each
 * attempt asks to lease.  Off: each attempt asks for all that may be
 * leased (remaining budget less the floor).
 * Default: 0 (off).
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds, or 0 to turn the clock off.  Each
 *   attempt gets min(@ns, granted lease); when the lease is the shorter and
 *   the clock fires at the lease's end, the attempt is recorded as
 *   budget_exhausted (see sg_op_attempt_done).
 *   Each retry gets a fresh ceiling.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @o is unchanged):
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_attempt_timeout(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_first_item_timeout - the first-item deadline of each
 * attempt: from the attempt's start to its first item (time to first
 * token).
 * Default: 0 (off).
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds, or 0 to turn the clock off.  Each
 *   attempt gets min(@ns, granted lease); when the lease is the shorter and
 *   the clock fires at the lease's end, the attempt is recorded as
 *   budget_exhausted (see sg_op_attempt_done).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @o is unchanged):
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_first_item_timeout(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_idle_timeout - the idle timeout of each attempt: from
 * each item to the next, starting at the first item.  Keepalives never
 * reset it.
 * Default: 0 (off).
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds, or 0 to turn the clock off.  Each
 *   attempt gets min(@ns, granted lease); when the lease is the shorter and
 *   the clock fires at the lease's end, the attempt is recorded as
 *   budget_exhausted (see sg_op_attempt_done).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @o is unchanged):
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_idle_timeout(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_stream_timeout - the stream-total clock of each attempt:
 * from the attempt's start to the end of its stream.
 * Default: 0 (off).
 *
 * @ns: 1 .. SG_DURATION_MAX nanoseconds, or 0 to turn the clock off.  Each
 *   attempt gets min(@ns, granted lease); when the lease is the shorter and
 *   the clock fires at the lease's end, the attempt is recorded as
 *   budget_exhausted (see sg_op_attempt_done).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @o is unchanged):
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_stream_timeout(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_max_items - the runaway item cap handed to every
 * attempt's guard (see sg_guard_config_set_max_items).  Default: 0 (off).
 *
 * @n: the cap; 0 turns it off.  Any value is valid.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_max_items(sg_op_options *o, uint64_t n);

/**
 * sg_op_options_set_max_bytes - the runaway byte cap handed to every
 * attempt's guard (see sg_guard_config_set_max_bytes).  Default: 0 (off).
 *
 * @n: the cap; 0 turns it off.  Any value is valid.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_max_bytes(sg_op_options *o, uint64_t n);

/**
 * sg_op_options_set_max_attempts - how many attempts an operation may
 * make, the first included.  Default: 3.
 *
 * @n: 1 .. SG_OP_MAX_ATTEMPTS (1 = never retry).  Every attempt is
 *   recorded: past SG_OP_INLINE_ATTEMPTS an operation that retries holds up
 *   to (@n - SG_OP_INLINE_ATTEMPTS) * sizeof(sg_op_attempt) bytes of heap
 *   until sg_op_release() (see "Memory" at the top of this header).  A
 *   budget with backoff bounds the retries in time; @n bounds them in
 *   count and memory.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @n == 0;
 *   SG_ERANGE  @n > SG_OP_MAX_ATTEMPTS.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_max_attempts(sg_op_options *o, uint32_t n);

/**
 * sg_op_options_set_backoff - capped exponential backoff with full jitter:
 * after the n-th failed attempt (n from 1) the sleep is uniform in
 * [0, min(@cap_ns, @base_ns * 2^(n-1))].  Default: base 100 ms, cap 10 s.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL, @base_ns <= 0 or @cap_ns < @base_ns;
 *   SG_ERANGE  @cap_ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_backoff(sg_op_options *o, int64_t base_ns,
                                        int64_t cap_ns);

/**
 * sg_op_options_set_max_retry_after - the longest Retry-After the operation
 * honours.  A valid Retry-After replaces the computed backoff; one longer
 * than this stops the operation (reason retry_after_exceeds_max) rather
 * than retrying sooner than the server asked.  Default: 60 s.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_max_retry_after(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_min_attempt - the shortest attempt worth starting.  A
 * lease shorter than this is refused, and a backoff sleep is only taken if
 * at least this (plus the floor) is left after it.  The effective value is
 * min(this, attempt timeout when set, budget - floor), the budget being the
 * operation's own (an absolute deadline, sg_op_options_set_deadline, may
 * make it less than the one set; time spent before an earlier start,
 * sg_op_options_set_started_at, is spent from it, not taken off it), so
 * neither a short attempt timeout nor a small budget refuses every
 * attempt.
 * Default: 10 ms.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_min_attempt(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_retryable_statuses - replaces the set of HTTP statuses
 * whose http_error may be retried (when the retry is safe, see
 * sg_op_attempt_done).  @n == 0 means no status is retried.
 * Default: 408, 429, 500, 502, 503, 504, 529 (Anthropic's overloaded_error:
 * an overloaded server, as 503 is).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL, or @statuses is NULL while @n > 0;
 *   SG_ERANGE  a status is outside 100 .. 599 (nothing is changed).
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_retryable_statuses(sg_op_options *o, const int *statuses,
                                                   size_t n);

/**
 * sg_op_options_set_retry_rejections - whether an unsafe request that was
 * answered 429, or 503 (or Anthropic's 529) with a valid Retry-After, may
 * be retried.  Those answers say the server refused the request before
 * processing it (a rate limiter or an overloaded server asking to come
 * back later).  A 503 or 529 without Retry-After is not trusted: proxies
 * send 503 when the upstream reset mid-request.  The status must still be in the
 * retryable set. Default: true.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_retry_rejections(sg_op_options *o, bool enable);

/**
 * sg_op_options_set_method - the request method, a token (RFC 9110 §5.6.2)
 * of at most SG_OP_METHOD_MAX characters, compared case-sensitively.  GET,
 * HEAD, OPTIONS, TRACE, PUT and DELETE are idempotent (RFC 9110 §9.2.2).
 * Default: "POST" (AI streams are POSTs, and an unknown method is unsafe).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o or @method is NULL, @method is empty or not a token;
 *   SG_ERANGE  @method is longer than SG_OP_METHOD_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_method(sg_op_options *o, const char *method);

/**
 * sg_op_options_set_idempotency_key - the key the transport sends, the same
 * on every attempt (read it back with sg_op_idempotency_key()).  A request
 * with a key is safe to retry.  Printable ASCII (0x21 .. 0x7E), 1 ..
 * SG_OP_IDEMPOTENCY_KEY_MAX characters; NULL removes it.  The report says
 * only whether a key was present, never its value.  Default: none.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL, or @key is empty or holds other characters;
 *   SG_ERANGE  @key is longer than SG_OP_IDEMPOTENCY_KEY_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_idempotency_key(sg_op_options *o, const char *key);

/**
 * sg_op_options_set_idempotent - the caller declares the request idempotent
 * whatever its method.  Default: false.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_idempotent(sg_op_options *o, bool idempotent);

/**
 * sg_op_options_set_random - the random source for jitter; NULL restores the
 * built-in xorshift64* generator held inside the sg_op.  Default: built-in.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_random(sg_op_options *o, sg_random_fn fn,
                                       void *user_data);

/**
 * sg_op_options_set_seed - seeds the built-in generator, for reproducible
 * jitter.  Default: derived from the start instant and the sg_op's address,
 * so that operations started together do not jitter in lockstep.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_seed(sg_op_options *o, uint64_t seed);

/**
 * sg_op_options_set_deadline_header - the name of the outbound header that
 * carries plan.deadline_ms; a token of at most SG_OP_HEADER_NAME_MAX
 * characters.  Default: "X-Deadline-Ms".
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o or @name is NULL, @name is empty or not a token;
 *   SG_ERANGE  @name is longer than SG_OP_HEADER_NAME_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_deadline_header(sg_op_options *o, const char *name);

/**
 * sg_op_options_set_label - a free-form label for the report (an endpoint,
 * a model name).  Any bytes up to SG_OP_LABEL_MAX; the report escapes them.
 * Do not put secrets here.  NULL removes it.  Default: none.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL;
 *   SG_ERANGE  @label is longer than SG_OP_LABEL_MAX.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_label(sg_op_options *o, const char *label);

/**
 * sg_op_options_set_target - what the operation is about: the URL (or any
 * name) of its request, as an observer's intent record shows it.  Never
 * sent by the policy; the transports do not read it to decide where to
 * connect.  Do not put credentials in it.  Borrowed, not copied: the
 * string must outlive every operation started with @o.  NULL removes it.
 * Default: none (the HTTP/2 transport fills in scheme://authority/path
 * when it is unset).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_target(sg_op_options *o, const char *target);

/**
 * sg_op_options_set_endpoints - the endpoints an operation falls back
 * across, in order: @urls[0] is the first attempt's, and a retryable
 * failure moves the next attempt to the next one (after the last, the
 * first again).  Every attempt on every endpoint is leased from the same
 * budget, counts toward the same attempt limit and obeys the same retry
 * rules (never after a partial stream, never an unsafe request that may
 * have taken effect).  Each endpoint keeps its own clock for coming back:
 * a failure there sets it to the backoff sleep, or to the endpoint's
 * Retry-After, and the next attempt waits only for its own endpoint's
 * (so a fallback to another endpoint goes at once, and a Retry-After
 * beyond the budget or the maximum stops the operation only when its
 * endpoint is the one to wait for).  The plan of each attempt names its
 * endpoint (sg_op_plan.endpoint); the transports that take a list of
 * endpoints set this themselves.  The report names each attempt's
 * endpoint as scheme://host:port/path (no credentials, no query).
 *
 * @urls: @n URLs, borrowed (the array and its strings must outlive every
 *   operation started with @o); @n in 1 .. SG_OP_MAX_ENDPOINTS.  NULL and
 *   0 remove them (one endpoint: the target).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL, a URL is NULL, or @urls is NULL with @n > 0;
 *   SG_ERANGE  @n > SG_OP_MAX_ENDPOINTS.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_endpoints(sg_op_options *o, const char *const *urls,
                                          uint32_t n);

/* ------------------------------------------------------------------------
 * The retry budget: retries throttled across operations (gRFC A6)
 * ------------------------------------------------------------------------ */

/** The largest max_tokens of a retry budget (gRPC's bound). */
#define SG_RETRY_BUDGET_MAX_TOKENS 1000
/** The suggested settings (gRFC A6's example), documented in docs/design.md
 *  (retry rule 7); sg_retry_budget_init takes its values explicitly. */
#define SG_RETRY_BUDGET_DEFAULT_MAX_TOKENS 10
#define SG_RETRY_BUDGET_DEFAULT_TOKEN_RATIO 0.1

/**
 * sg_retry_budget - a token bucket shared by any number of operations, on
 * any threads, so that a failing provider is not hammered by every
 * operation retrying at once.  gRPC's retry throttling: the bucket starts
 * full at max_tokens; every attempt that fails in a way the policy would
 * retry takes one token, every attempt that ends ok gives back
 * token_ratio (never above max_tokens); a retry (or a hedge) is allowed
 * only while more than half of max_tokens remain.  A first attempt is
 * never throttled.  A retry the budget denies ends the operation with
 * reason retry_throttled (never silently).  Opaque; lock-free (C11
 * atomics): every function is thread-safe.
 */
typedef struct sg_retry_budget sg_retry_budget;

/**
 * sg_retry_budget_new - a full bucket of @max_tokens (1 ..
 * SG_RETRY_BUDGET_MAX_TOKENS) that gives back @token_ratio (0.001 .. 1, to
 * three decimals, rounded down) per success.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (*@out is then NULL):
 *   SG_EINVAL  @out is NULL;
 *   SG_ERANGE  @max_tokens or @token_ratio out of range;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_retry_budget_new(sg_retry_budget **out, uint32_t max_tokens,
                                  double token_ratio);

/** Frees @b (NULL: nothing); no operation may use it any more. */
SG_EXTERN void sg_retry_budget_free(sg_retry_budget *b);

/**
 * sg_retry_budget_on_failure - takes a token for a failed attempt; returns
 * whether a retry is still allowed (true for NULL).  The policy calls it;
 * a caller that retries outside the policy may too.
 */
SG_EXTERN bool sg_retry_budget_on_failure(sg_retry_budget *b);

/** sg_retry_budget_on_success - gives back token_ratio (NULL: nothing). */
SG_EXTERN void sg_retry_budget_on_success(sg_retry_budget *b);

/** Whether a retry would be allowed now (a snapshot; true for NULL). */
SG_EXTERN bool sg_retry_budget_allows(const sg_retry_budget *b);

/** The tokens in the bucket now (0 for NULL). */
SG_EXTERN double sg_retry_budget_tokens(const sg_retry_budget *b);

/**
 * sg_op_options_set_retry_budget - operations started with @o take their
 * retries (and hedges) from @b.  Borrowed: @b must outlive them.  NULL:
 * none (the default: only the attempt limit and the budget bound retries).
 * The managed multi and the HTTP/2 connection give their operations one of
 * their own when set there (sg_curl_multi_set_retry_budget,
 * sg_h2_conn_set_retry_budget) and the operation has none.
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_retry_budget(sg_op_options *o, sg_retry_budget *b);

/**
 * sg_op_options_set_hedging - first-token hedging: when an attempt has
 * delivered no item @after_ns after it started, a hedge - a second attempt
 * of the same request, on the next endpoint free to be asked (or on a new
 * connection to the same one; never to one still waiting for its
 * Retry-After or backoff, see sg_op_hedge) - starts beside it, up to @max_hedges (1 ..
 * SG_OP_MAX_HEDGES) beside the first, each @after_ns after the one before.  The first
 * attempt to deliver an item wins; every other is cancelled at once,
 * before it delivers anything, and is recorded as cancelled with reason
 * hedge_lost (a loser costs its server the work it did until then: its
 * prefill).  Hedges are attempts: each is leased from the budget, counts
 * toward the attempt limit (so allow at least 1 + @max_hedges:
 * sg_op_options_set_max_attempts), goes only while the retry budget allows
 * (sg_op_options_set_retry_budget; a denied hedge is counted in the
 * report's hedges_throttled) and follows the retry rules.  Only a request
 * safe to repeat may be hedged - an idempotent method, an idempotency key
 * (the same on every hedge) or one declared idempotent: sg_op_start
 * refuses any other with SG_EUNSAFE.  @after_ns 0 turns hedging off (the
 * default).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL;
 *   SG_ERANGE  @after_ns negative or above SG_DURATION_MAX, or @max_hedges
 *              not in 1 .. SG_OP_MAX_HEDGES while @after_ns > 0.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_hedging(sg_op_options *o, int64_t after_ns,
                                        uint32_t max_hedges);

/**
 * sg_op_options_repeatable - whether a request of operations started with
 * @o is safe to repeat (docs/design.md, retry rule 1): an idempotent method
 * (RFC 9110 §9.2.2), an idempotency key, or declared idempotent.  A retry
 * of a request that may have been sent, and every hedge, needs it.
 * Returns false when @o is NULL.
 * Thread-safety: reads only @o.
 */
SG_EXTERN bool sg_op_options_repeatable(const sg_op_options *o);

/**
 * sg_op_options_method - the method operations started with @o will use:
 * the one set with sg_op_options_set_method, else "POST".
 *
 * Returns a string inside @o (valid while @o is unchanged), or NULL when
 * @o is NULL.
 * Thread-safety: reads only @o.
 */
SG_EXTERN const char *sg_op_options_method(const sg_op_options *o);

/**
 * sg_op_options_target - the target set with sg_op_options_set_target.
 *
 * Returns the borrowed string, or NULL when none is set or @o is NULL.
 * Thread-safety: reads only @o.
 */
SG_EXTERN const char *sg_op_options_target(const sg_op_options *o);

/**
 * sg_op_options_has_observer - whether @o has an observer.
 *
 * Returns true when sg_op_options_set_observer set one; false otherwise and
 * when @o is NULL.
 * Thread-safety: reads only @o.
 */
SG_EXTERN bool sg_op_options_has_observer(const sg_op_options *o);

/* ------------------------------------------------------------------------
 * Decisions and reasons.  Their names are a public contract (reports).
 * ------------------------------------------------------------------------ */

/**
 * SG_OP_DECISION_MAP - the decision table: XX(NAME, "name").  It generates
 * enum sg_op_decision (SG_OP_<NAME>) and the names of sg_op_decision_name().
 */
#define SG_OP_DECISION_MAP(XX) \
    XX(NONE, "none")           \
    XX(DONE, "done")           \
    XX(RETRY, "retry")         \
    XX(STOP, "stop")

/**
 * sg_op_decision - what to do after an attempt.  NONE: no decision yet
 * (the attempt or the operation is still running).  DONE: the operation has
 * its answer (ok, or a final HTTP status).  RETRY: sleep delay_ns (already
 * leased from the budget), then ask for the next attempt.  STOP: give up
 * now without a usable answer; the reason says why.
 * SG_OP_DECISION_COUNT_ is the number of decisions, not a decision.
 */
typedef enum sg_op_decision {
#define SG__OP_DECISION_ENUM(name, text) SG_OP_##name,
    SG_OP_DECISION_MAP(SG__OP_DECISION_ENUM)
#undef SG__OP_DECISION_ENUM
        SG_OP_DECISION_COUNT_
} sg_op_decision;

/**
 * SG_OP_REASON_MAP - the reason table: XX(NAME, "name").  It generates enum
 * sg_op_reason (SG_OP_REASON_<NAME>) and the names of sg_op_reason_name().
 */
#define SG_OP_REASON_MAP(XX)                                     \
    XX(NONE, "none")                                             \
    XX(OK, "ok")                                                 \
    XX(FINAL_STATUS, "final_status")                             \
    XX(RETRYABLE, "retryable")                                   \
    XX(PARTIAL_STREAM, "partial_stream")                         \
    XX(OUTCOME_UNKNOWN, "outcome_unknown")                       \
    XX(NOT_SAFE_TO_RETRY, "not_safe_to_retry")                   \
    XX(OUTCOME_NOT_RETRYABLE, "outcome_not_retryable")           \
    XX(BUDGET_EXHAUSTED, "budget_exhausted")                     \
    XX(BUDGET_BELOW_FLOOR, "budget_below_floor")                 \
    XX(LEASE_TOO_SHORT, "lease_too_short")                       \
    XX(ATTEMPTS_EXHAUSTED, "attempts_exhausted")                 \
    XX(BACKOFF_EXCEEDS_BUDGET, "backoff_exceeds_budget")         \
    XX(RETRY_AFTER_EXCEEDS_BUDGET, "retry_after_exceeds_budget") \
    XX(RETRY_AFTER_EXCEEDS_MAX, "retry_after_exceeds_max")       \
    XX(CANCELLED, "cancelled")                                   \
    XX(OUT_OF_MEMORY, "out_of_memory")                           \
    XX(RETRY_THROTTLED, "retry_throttled")                       \
    XX(HEDGE_LOST, "hedge_lost")                                 \
    XX(HEDGE_RUNNING, "hedge_running")                           \
    XX(INTENT_REFUSED, "intent_refused")                         \
    XX(NO_FREE_ENDPOINT, "no_free_endpoint")                     \
    XX(PROVIDER_FINAL, "provider_final")

/**
 * sg_op_reason - why a decision was made; docs/report.md ("Decisions and
 * reasons") explains each.  SG_OP_REASON_NONE: no decision yet.
 * SG_OP_REASON_COUNT_ is the number of reasons, not a reason.
 */
typedef enum sg_op_reason {
#define SG__OP_REASON_ENUM(name, text) SG_OP_REASON_##name,
    SG_OP_REASON_MAP(SG__OP_REASON_ENUM)
#undef SG__OP_REASON_ENUM
        SG_OP_REASON_COUNT_
} sg_op_reason;

/**
 * sg_op_decision_name - the stable name of a decision, as in the report.
 *
 * Returns a static string such as "retry", or NULL when @d is out of range.
 * Thread-safety: pure function.
 */
SG_EXTERN const char *sg_op_decision_name(sg_op_decision d);

/**
 * sg_op_reason_name - the stable name of a reason, as in the report.
 *
 * Returns a static string such as "not_safe_to_retry", or NULL when @r is
 * out of range.
 * Thread-safety: pure function.
 */
SG_EXTERN const char *sg_op_reason_name(sg_op_reason r);

/* ------------------------------------------------------------------------
 * The operation
 * ------------------------------------------------------------------------ */

/**
 * sg_op_attempt - the record of one attempt; read-only for the caller.
 * Durations are nanoseconds; a granted clock of 0 was off.
 */
typedef struct sg_op_attempt {
    uint32_t n;         ///< 1-based attempt number
    sg_outcome outcome; ///< after budget attribution (see sg_op_attempt_done)
    sg_phase phase;
    sg_op_decision decision; ///< NONE while the attempt runs
    sg_op_reason reason;
    int http_status; ///< 0 when none
    bool running;    ///< planned, no result yet
    bool sent;
    bool headers_received;
    bool partial;
    bool retryable;
    bool outcome_unknown;
    bool retry_after_present;   ///< Retry-After or retry-after-ms present
    bool retry_after_malformed; ///< present but none usable: ignored
    int64_t started_at;         ///< monotonic instant of the plan
    int64_t remaining_ns;       ///< budget remaining at the start
    int64_t connect_ns;         ///< granted clocks, 0 = off
    int64_t attempt_ns;
    int64_t first_item_ns;
    int64_t idle_ns;
    int64_t stream_total_ns;
    int64_t elapsed_ns;            ///< start -> result
    int64_t time_to_first_item_ns; ///< -1 when no item arrived
    uint64_t items;
    uint64_t bytes;
    int64_t retry_after_ns;       ///< parsed Retry-After, -1 when none
    int64_t backoff_ns;           ///< leased sleep after it, -1 when none
    uint32_t endpoint;            ///< 0-based endpoint (sg_op_options_set_endpoints)
    bool hedge;                   ///< started beside a running attempt (sg_op_hedge)
    uint8_t budget_limited_;      /* private: clocks the lease clamped */
    uint8_t retry_after_raw_len_; /* private */
    uint8_t retry_after_flags_;   /* private: SG__RA_* (policy/internal.h) */
    char retry_after_raw_[SG_OP_RETRY_AFTER_RAW_MAX + 1]; /* private */
    /** The transport's own error for this attempt, beside the outcome:
     *  what libcurl, nghttp2, TLS or the system said ("curl 7 Couldn't
     *  connect to server: ...", "stream reset by the server: CANCEL").
     *  NUL-terminated, at most SG_OP_ERROR_MAX bytes (longer ones are cut),
     *  any bytes (the report escapes them); "" when there was none. */
    char error[SG_OP_ERROR_MAX + 1];
    /** provider_error: the type the server gave its in-band error
     *  ("overloaded_error"); its message is @error.  NUL-terminated, at
     *  most SG_OP_PROVIDER_TYPE_MAX bytes; "" otherwise. */
    char provider_error_type[SG_OP_PROVIDER_TYPE_MAX + 1];
} sg_op_attempt;

/**
 * sg_op - one operation.  Data the caller embeds; start it with
 * sg_op_start() (a zero-initialised sg_op is valid only for that call and
 * for sg_op_release()), and release it with sg_op_release() when it is
 * discarded: once it retries after its SG_OP_INLINE_ATTEMPTS-th attempt it
 * holds heap blocks of attempt records (see "Memory" at the top of this
 * header).  Fields are private.
 *
 * Never copy an sg_op by value (struct assignment, memcpy): the copy
 * would share the original's heap blocks, and releasing either leaves the
 * other pointing at freed memory.  Keep it in one place and pass pointers.
 */
typedef struct sg_op {
    sg_op_options opts_;        /* private */
    sg_budget budget_;          /* private */
    uint64_t rng_;              /* private: xorshift64* state */
    int64_t retry_at_;          /* private */
    int64_t finished_at_;       /* private */
    uint32_t count_;            /* private: attempts planned */
    uint32_t magic_;            /* private */
    uint8_t state_;             /* private */
    uint8_t outcome_;           /* private */
    uint8_t decision_;          /* private */
    uint8_t reason_;            /* private */
    int32_t observer_error_;    /* private: first failure, 0 none */
    uint32_t ep_next_;          /* private: the next attempt's endpoint */
    uint32_t running_;          /* private: attempts planned, no result yet */
    uint32_t winner_;           /* private: the attempt that delivered first, 0 none */
    uint16_t hedges_throttled_; /* private: hedges the retry budget denied */
    uint16_t hedges_no_free_;   /* private: hedges with no endpoint to go to */
    uint32_t decider_;          /* private: the attempt whose end decided, 0 none */
    uint32_t ep_ra_;            /* private: bit e: ep_back_[e] is a Retry-After */
    void *intent_;              /* private: the observer's pending intent */
    int64_t ep_back_[SG_OP_MAX_ENDPOINTS]; /* private: not before (INT64_MIN: any time) */
    /* private: the allocator of the blocks; NULL = malloc/free */
    void *(*alloc_)(void *ud, void *p, size_t size);
    void *alloc_ud_;                              /* private */
    sg_op_attempt inline_[SG_OP_INLINE_ATTEMPTS]; /* private */
    sg_op_attempt *blocks_[SG__OP_BLOCKS];        /* private: NULL = none */
} sg_op;

/* ------------------------------------------------------------------------
 * Observers: what the policy calls as an operation forms its intent,
 * starts and ends each attempt, and resolves (docs/design.md, "observer").
 * ------------------------------------------------------------------------ */

/**
 * sg_op_intent - what an operation is about to do, as its observer sees it
 * before anything is sent.  Every string is valid during the call only.
 */
typedef struct sg_op_intent {
    const char *method;          ///< the request method ("POST" by default)
    const char *target;          ///< sg_op_options_set_target, or NULL
    const char *idempotency_key; ///< the key sent on every attempt, or NULL
    const char *label;           ///< sg_op_options_set_label, or NULL
} sg_op_intent;

/**
 * sg_op_observer - a table of functions the policy calls; every pointer
 * may be NULL.  The table and its user_data are borrowed (see
 * sg_op_options_set_observer).  Each function runs on the thread that
 * drives the operation, synchronously, inside the policy call named below:
 * keep it short, and never call back into the same sg_op.
 *
 * on_intent:        from sg_op_start, after the budget started and before
 *                   any attempt can be planned.  Return 0 to let the
 *                   operation go on, or a negative SG_E* code to refuse it:
 *                   sg_op_start then fails with that code and the operation
 *                   is not started (nothing is ever sent).  The intent
 *                   ledger refuses this way while the same key is
 *                   unresolved.
 * on_attempt_start: from sg_op_next_attempt, once an attempt was leased
 *                   (@rec->running is true; the clocks it was granted are
 *                   set).
 * on_attempt_end:   from sg_op_attempt_done, once the attempt's outcome and
 *                   the decision are recorded in @rec.
 * on_resolve:       once, when the operation ends, whatever ended it (a
 *                   final attempt, a refused lease, sg_op_cancel): the
 *                   outcome, decision and reason are final.
 * The last three return 0, or a negative SG_E* code that never changes the
 * operation: the first such code is kept for sg_op_observer_error().
 *
 * The intent without waiting (optional; all three or none).  An event loop
 * that drives many operations must not stop for one observer's disk or
 * database: sg_op_start_async() asks start_intent instead of on_intent,
 * and the operation waits for its intent in a state of its own while the
 * loop runs the others.
 *
 * start_intent:     from sg_op_start_async, where on_intent would run.
 *                   Return 0 when the intent is recorded already, a
 *                   negative code to refuse (as on_intent), or
 *                   SG_EINPROGRESS after setting @wait: wait->fd an fd
 *                   that becomes readable (and stays so) once poll_intent
 *                   has an answer, wait->handle the observer's own token
 *                   for this intent, given back to the two below.
 * poll_intent:      from sg_op_intent_poll: 0 once the intent is recorded
 *                   (the operation goes on to its first attempt),
 *                   SG_EINPROGRESS while it is not, or a negative code: it
 *                   was refused (SG_ETIMEDOUT: it could not be recorded
 *                   within the budget).  After any answer but
 *                   SG_EINPROGRESS the handle and its fd are the
 *                   observer's again (closed or reused).
 * abandon_intent:   the operation ended while its intent was pending
 *                   (cancelled, or its budget ran out first), at
 *                   @outcome; nothing was or will be sent.  In place of
 *                   on_resolve: if the intent lands after all, the
 *                   observer records the end itself.  The handle is the
 *                   observer's again.
 */
typedef struct sg_op_intent_wait {
    int fd;       /**< readable once poll_intent has an answer */
    void *handle; /**< the observer's token for this intent */
} sg_op_intent_wait;

typedef struct sg_op_observer {
    int (*on_intent)(const sg_op *op, const sg_op_intent *intent, void *user_data);
    int (*on_attempt_start)(const sg_op *op, const sg_op_attempt *rec, void *user_data);
    int (*on_attempt_end)(const sg_op *op, const sg_op_attempt *rec, void *user_data);
    int (*on_resolve)(const sg_op *op, void *user_data);
    int (*start_intent)(const sg_op *op, const sg_op_intent *intent, void *user_data,
                        sg_op_intent_wait *wait);
    int (*poll_intent)(const sg_op *op, void *handle, void *user_data);
    void (*abandon_intent)(const sg_op *op, void *handle, sg_outcome outcome,
                           void *user_data);
} sg_op_observer;

/**
 * sg_op_options_set_observer - the observer of every operation started
 * with @o, called with @user_data.  Borrowed: @obs and what @user_data
 * points to must outlive those operations.  NULL removes it.  Default:
 * none.  One observer per operation; an observer that fans out to several
 * (a ledger and a metrics sink) is the caller's to write.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_op_options_set_observer(sg_op_options *o, const sg_op_observer *obs,
                                         void *user_data);

/**
 * sg_op_start - begin an operation at @now: copies @opts (NULL = all
 * defaults) and starts its budget (at @now, or at an earlier instant given
 * by sg_op_options_set_started_at).  @op may be uninitialised: it is never
 * read, so any previous state is discarded without being freed.  To start
 * an sg_op again for a new operation, sg_op_release() it first, or the
 * blocks of its old records (if it grew any) leak.
 *
 * A floor at or above the budget is allowed: the first sg_op_next_attempt
 * is then refused (outcome refused) without any request being made.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL.
 * Thread-safety: touches only @op; reads @opts.
 */
SG_EXTERN int sg_op_start(sg_op *op, const sg_op_options *opts, int64_t now);

/**
 * sg_op_start_async - sg_op_start() for an event loop: when the observer
 * records intents without waiting (start_intent), the operation starts
 * with its intent pending instead of waiting for it.  The wait is spent
 * from the budget either way.
 * @fd: set to the fd to watch while the intent is pending, else -1.
 *
 * Returns 0 when the operation is ready for its first attempt (no
 * observer, one that waits in on_intent, or an intent recorded at once);
 * SG_EINPROGRESS when the intent is pending: watch *@fd for readability,
 * call sg_op_intent_poll() when it is readable or at
 * sg_op_intent_deadline(), and plan no attempt before it says 0;
 * SG_EINVAL when @fd is NULL; or any error of sg_op_start() (a refusal:
 * the operation is not started).  The budget starts at @now, or at the
 * instant of sg_op_options_set_started_at when that is earlier.
 * Thread-safety: touches only @op; reads @opts.
 */
SG_EXTERN int sg_op_start_async(sg_op *op, const sg_op_options *opts, int64_t now,
                                int *fd);

/**
 * sg_op_intent_pending - true while @op waits for its observer's intent.
 * Thread-safety: reads only @op.
 */
SG_EXTERN bool sg_op_intent_pending(const sg_op *op);

/**
 * sg_op_intent_deadline - the instant a pending intent is given up: the
 * budget's deadline less its floor, when the first lease would be refused
 * anyway.  SG_TIME_NEVER when no intent is pending.
 * Thread-safety: reads only @op.
 */
SG_EXTERN int64_t sg_op_intent_deadline(const sg_op *op);

/**
 * sg_op_intent_poll - asks the observer about the pending intent at @now.
 * At or past sg_op_intent_deadline() a pending intent is abandoned
 * (abandon_intent) and the operation ends as its first lease would have:
 * budget_exhausted, or refused when budget is left below the floor.  A
 * refused intent ends it as refused, reason intent_refused, with the
 * observer's code in sg_op_observer_error() (SG_ETIMEDOUT ends it as the
 * deadline does).  An operation ended here never calls on_resolve: its
 * intent was never recorded.
 *
 * Returns 0 when the intent is recorded (plan the first attempt),
 * SG_EINPROGRESS while it is pending, 1 when the operation ended, or one
 * of the following negative error codes:
 *   SG_EINVAL  @op is NULL or was never started;
 *   SG_ESTATE  no intent is pending.
 * Thread-safety: touches only @op.
 */
SG_EXTERN int sg_op_intent_poll(sg_op *op, int64_t now);

/**
 * sg_op_release - frees the heap blocks of @op's attempt records and
 * leaves @op as if zero-initialised: every reader then answers as for an
 * operation never started, and sg_op_start() may start it again.  Call it
 * whenever an sg_op that may have retried is discarded (or before starting
 * it again); without it an operation that retried after its
 * SG_OP_INLINE_ATTEMPTS-th attempt leaks its blocks, up to
 * (max_attempts - SG_OP_INLINE_ATTEMPTS) * sizeof(sg_op_attempt) bytes.
 * The transports release the sg_op they hold when their operation is
 * freed (sg_curl_op_free, sg_h2_op_free, sg_h2_conn_free).  Harmless on an
 * operation that never grew a block, and idempotent: calling it twice is
 * the same as once.  Records from sg_op_attempt_at() are gone afterwards.
 * An operation released while its intent is pending (sg_op_intent_pending)
 * first hands the observer its handle back: abandon_intent, as cancelled.
 * @op: a started, released or zero-initialised sg_op (never uninitialised
 *   memory), or NULL (ignored).
 *
 * Returns nothing.
 * Thread-safety: touches only @op.
 */
SG_EXTERN void sg_op_release(sg_op *op);

/**
 * sg_op_budget - the operation's budget, for sg_guard_start().
 *
 * Returns a pointer into @op, valid as long as @op; NULL when @op is NULL.
 * For a zero-initialised @op that was never started the budget is not
 * started either (sg_guard_start refuses it with SG_EINVAL).
 * Thread-safety: reads only @op.
 */
SG_EXTERN const sg_budget *sg_op_budget(const sg_op *op);

/**
 * sg_op_method - the request method the operation was started with.
 * @op: a started operation.
 *
 * Returns the method ("POST" by default), or NULL when @op is NULL or was
 * never started.
 * Thread-safety: reads only @op.
 */
SG_EXTERN const char *sg_op_method(const sg_op *op);

/**
 * sg_op_idempotency_key - the idempotency key to send on every attempt.
 *
 * Returns the key (NUL-terminated, inside @op, valid until @op is started
 * again or goes away), or NULL when @op is NULL or has no key (a
 * zero-initialised @op has none).
 * Thread-safety: reads only @op.
 */
SG_EXTERN const char *sg_op_idempotency_key(const sg_op *op);

/**
 * sg_op_plan - what the next attempt may use.  On a refusal only outcome
 * and reason are meaningful.
 */
typedef struct sg_op_plan {
    uint32_t attempt;             ///< 1-based attempt number
    sg_guard_config guard_config; ///< leased clocks and caps for sg_guard_start
    int64_t attempt_ns;           ///< the granted lease = the attempt ceiling
    int64_t remaining_ns;         ///< budget remaining when it was planned
    int64_t deadline_ms;          ///< attempt_ns in whole ms, rounded down
    const char *deadline_header;  ///< header name for deadline_ms (in the op)
    sg_outcome outcome;           ///< on refusal: refused or budget_exhausted
    sg_op_reason reason;          ///< on refusal: why
    uint32_t endpoint;            ///< 0-based: which of the endpoints (0 without)
    const char *endpoint_url;     ///< its URL (borrowed), NULL without endpoints
    bool hedge;                   ///< planned by sg_op_hedge
} sg_op_plan;

/**
 * sg_op_next_attempt - lease the next attempt at @now.
 *
 * The attempt asks for the attempt timeout (or everything when it is off)
 * and is granted min(that, remaining - floor); its ceiling is the grant and
 * every other configured clock is clamped to it.  Propagate deadline_ms (or
 * a grpc-timeout made from attempt_ns): it is when this client gives up.
 *
 * When nothing (or less than the minimum attempt) can be leased the
 * operation ends: plan->outcome is budget_exhausted when nothing remains at
 * all, refused otherwise, and plan->reason says why (budget_exhausted,
 * budget_below_floor or lease_too_short).  The operation's own outcome
 * stays its last attempt's when one ran.
 * @plan: zeroed, then filled; written on every return but SG_EINVAL.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @op or @plan is NULL, or @op was never started;
 *   SG_ESTATE    an attempt is running, the operation has ended, or @now is
 *                before the end of the leased backoff sleep;
 *   SG_EREFUSED  no attempt could be leased (the operation has ended).
 * Thread-safety: touches only @op and @plan.
 */
SG_EXTERN int sg_op_next_attempt(sg_op *op, int64_t now, sg_op_plan *plan);

/**
 * sg_op_result - what the transport knows about a finished attempt.
 * Zero-initialise it or fill it with sg_op_result_from_guard(), then set
 * the transport's own facts.
 */
typedef struct sg_op_result {
    sg_outcome outcome;      ///< the attempt's outcome (from the guard)
    sg_phase phase;          ///< the phase it ended in
    bool sent;               ///< any byte of the request may have been written
    bool headers_received;   ///< a final response status line/HEADERS arrived
    bool partial;            ///< OR-ed with items > 0; never for ok
    int http_status;         ///< 0 when no response
    const char *retry_after; ///< raw Retry-After field value, NULL = none
    size_t retry_after_len;
    /** raw retry-after-ms field value (milliseconds: OpenAI, Azure), NULL =
     *  none; when valid it wins over Retry-After (sg_op_attempt_done) */
    const char *retry_after_ms_field;
    size_t retry_after_ms_field_len;
    int64_t wall_now_s; ///< unix seconds an HTTP-date is measured from (the response's
                        ///< Date when valid); <= 0 unknown
    bool has_retry_after_ns; ///< retry_after_ns is set (e.g. CURLINFO_RETRY_AFTER)
    int64_t retry_after_ns;  ///< parsed delay, 0 .. max; used when retry_after is NULL
    uint64_t items;
    uint64_t bytes;
    int64_t first_item_ns; ///< start -> first item; ignored when items == 0
    const char *error;     ///< the transport's own message (NUL-terminated), NULL = none
    /** provider_error: the in-band error's type (NUL-terminated), NULL =
     *  none; and whether that type is transient (overload, rate limit,
     *  unavailable): retried before the first token when safe. */
    const char *provider_type;
    bool provider_retryable;
    /** http_error: the response's body says the refusal is final - the
     *  provider profile's classifier read it so (sg_item_error.final,
     *  sg_stream_classify_error_body: Anthropic's spend limits).  A status
     *  that would be retried is then the final answer (provider_final). */
    bool provider_final;
    /** Which attempt (sg_op_plan.attempt) this is the result of; 0 = the
     *  newest.  Needed only while hedges run beside it. */
    uint32_t attempt;
} sg_op_result;

/**
 * sg_op_result_from_guard - fills @r from a guard's result.
 *
 * Copies outcome, phase, partial, items, bytes and first_item_ns from @g;
 * every other field of @r is zeroed (set the transport's facts after).
 * Returns nothing: a NULL @r is ignored; a NULL @g leaves @r all zero
 * (outcome ok, phase connect).
 * Thread-safety: touches only @r; reads @g.
 */
SG_EXTERN void sg_op_result_from_guard(sg_op_result *r, const sg_guard_result *g);

/** sg_op_verdict - what sg_op_attempt_done concludes. */
typedef struct sg_op_verdict {
    sg_op_decision decision; ///< DONE, RETRY or STOP
    sg_op_reason reason;     ///< why (docs/report.md)
    sg_outcome outcome;      ///< the attempt's outcome as recorded
    int64_t delay_ns;        ///< RETRY: the leased sleep; else 0
    int64_t retry_at;        ///< RETRY: @now + delay_ns; else SG_TIME_NEVER
    bool partial;            ///< items > 0 and not ok: discard them
    bool retryable;          ///< the rules allow a retry (budget/attempts aside)
    bool outcome_unknown;    ///< may have taken effect; reconcile, never retried
} sg_op_verdict;

/**
 * sg_op_attempt_done - hand back the running attempt's result at @now and
 * get the decision.  The rules (docs/report.md has the full table):
 *
 * - sent = @r->sent, or headers arrived, or items arrived, or the phase is
 *   wait_headers or later.  A request never sent is always safe; a sent one
 *   is safe when its method is idempotent, it carries an idempotency key,
 *   or the caller declared it idempotent.
 * - partial = items > 0 and not ok: never retried.
 * - outcome_unknown = sent, not safe, not ok and no complete answer (an
 *   http_error with headers is a complete answer, except a gateway's 502
 *   or 504): never retried.
 * - ok -> DONE.  http_error whose status is not retryable -> DONE
 *   (final_status); whose status is retryable but whose body the provider
 *   profile read as a final refusal (provider_final in @r) -> DONE
 *   (provider_final).  cancelled, cap_exceeded, protocol_error, refused (the
 *   transport refused to send the attempt) -> STOP.
 *   budget_exhausted -> STOP.  Timeouts, truncated and transport_error
 *   are retryable when safe.  A retryable status is retryable when
 *   safe, or for 429 / 503-or-529-with-Retry-After (see
 *   set_retry_rejections).
 *   An http_error without a received status is treated like a transport
 *   error (retryable when safe).
 * - A clock timeout whose clock the lease clamped (the lease was shorter
 *   than the configured clock; for attempt_timeout also when the attempt
 *   timeout is off) and that fired at the lease's end (elapsed >= lease) is
 *   recorded as budget_exhausted: the clock alone would not have fired
 *   (docs/design.md).
 * - A Retry-After is used only when headers_received; it replaces the
 *   backoff only for http_error.  A retry-after-ms field (OpenAI's and
 *   Azure's milliseconds, sg_retry_after_ms_parse) that holds a valid value
 *   wins over Retry-After (as the openai and @anthropic-ai/sdk clients
 *   read them); one that does not is ignored and Retry-After is used.  A retry sleeps
 * that Retry-After (longer than max_retry_after: STOP) or the jittered backoff, and is
 * taken only when, after the sleep, at least the minimum attempt (and more than 0) is
 * left above the floor; otherwise STOP now.  With no attempts left: STOP
 * (attempts_exhausted).
 * - A retry past the first SG_OP_INLINE_ATTEMPTS attempts may need a new
 *   block of records; when it cannot be allocated: STOP (out_of_memory,
 *   the attempt stays retryable), so the attempt that could not be
 *   recorded is never planned nor sent.
 * - RETRY leaves the operation sleeping until v->retry_at; DONE and STOP
 *   end it.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  a NULL pointer, @op never started, or @r holds an outcome
 *              or phase out of range, a status outside 0 and 100 .. 599,
 *              or a parsed Retry-After outside 0 .. SG_DURATION_MAX;
 *   SG_ESTATE  no attempt is running.
 * Thread-safety: touches only @op and @v; may call the random source of
 * sg_op_options_set_random on the calling thread.
 */
SG_EXTERN int sg_op_attempt_done(sg_op *op, int64_t now, const sg_op_result *r,
                                 sg_op_verdict *v);

/**
 * sg_op_cancel - ends an operation that has no attempt running (before the
 * first attempt, or sleeping between two) at @now: outcome cancelled,
 * decision stop, reason cancelled.  The observer's on_resolve runs (its
 * abandon_intent instead while the intent is pending).  A
 * running attempt is cancelled by its transport instead, which hands in
 * its result with outcome cancelled.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL or was never started;
 *   SG_ESTATE  an attempt is running, or the operation has ended.
 * Thread-safety: touches only @op.
 */
SG_EXTERN int sg_op_cancel(sg_op *op, int64_t now);

/**
 * sg_op_hedge_at - when the next hedge is due: the newest attempt's start
 * plus the hedge delay, while hedging is on, no attempt has delivered an
 * item (sg_op_hedge_won), fewer than 1 + max_hedges attempts run and the
 * attempt limit allows one more; SG_TIME_NEVER otherwise.  A transport
 * arms a timer for it and calls sg_op_hedge when it fires.  After a hedge
 * was refused (SG_EREFUSED) the instant stays what it was: the policy
 * never retries a hedge by itself, so the transport stops asking until the
 * next attempt starts (as the built-in ones do), or it would spin.
 * Thread-safety: reads only @op.
 */
SG_EXTERN int64_t sg_op_hedge_at(const sg_op *op);

/**
 * sg_op_hedge - lease a hedge at @now, beside the attempts running (see
 * sg_op_options_set_hedging).  @plan as sg_op_next_attempt fills it, with
 * hedge set and the endpoint: the first after the newest attempt's, round
 * the list, that is free to be asked at @now - one whose failure set it a
 * time to come back (its Retry-After, or its backoff sleep) that has not
 * come yet is skipped (docs/design.md, retry rule 8).  A hedge that
 * cannot be leased leaves the running attempts alone.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @op or @plan is NULL, or @op was never started;
 *   SG_ESTATE    no hedge is due (sg_op_hedge_at is later than @now or
 *                SG_TIME_NEVER);
 *   SG_EREFUSED  no hedge: plan->reason says why - no_free_endpoint (every
 *                endpoint waits for its Retry-After or backoff; counted in
 *                the report's hedges_no_free_endpoint), retry_throttled
 *                (the retry budget is at half or below; counted in the
 *                report), budget_exhausted, budget_below_floor,
 *                lease_too_short or out_of_memory.
 * Thread-safety: touches only @op.
 */
SG_EXTERN int sg_op_hedge(sg_op *op, int64_t now, sg_op_plan *plan);

/**
 * sg_op_hedge_won - attempt @attempt delivered the operation's first item:
 * it is the one the consumer sees.  Every other attempt still running has
 * lost: cancel each at once and give its result to sg_op_attempt_done
 * (with sg_op_result.attempt set); it is recorded as cancelled, reason
 * hedge_lost, whatever outcome the result names.  No hedge starts after.
 *
 * Returns how many other attempts are running (to cancel); 0 when there
 * are none or the call does not apply (not running, not a running attempt,
 * or a winner already named).
 * Thread-safety: touches only @op.
 */
SG_EXTERN uint32_t sg_op_hedge_won(sg_op *op, uint32_t attempt);

/**
 * sg_op_deciding_attempt - the attempt the operation's outcome speaks of:
 * the last one whose end the policy decided on (done, retry or stop) -
 * with hedging, the winner, not a loser recorded after it; without, the
 * newest.  The newest while none has been decided; NULL when none ran.
 * The report's top-level phase, partial, retryable and outcome_unknown
 * are this attempt's.
 * Thread-safety: reads only @op.
 */
SG_EXTERN const sg_op_attempt *sg_op_deciding_attempt(const sg_op *op);

/** How many attempts are running (planned, without a result). */
SG_EXTERN uint32_t sg_op_running(const sg_op *op);

/**
 * sg_op_observer_error - the first error an observer's on_attempt_start,
 * on_attempt_end or on_resolve returned for @op.
 *
 * Returns 0 when there was none (or @op is NULL or never started), else
 * that negative SG_E* code.
 * Thread-safety: reads only @op.
 */
SG_EXTERN int sg_op_observer_error(const sg_op *op);

/**
 * sg_op_finished - has the operation ended?
 *
 * Returns true once it has ended (DONE, STOP or a refusal); false while it
 * runs or sleeps between attempts, and when @op is NULL or never started.
 * Thread-safety: reads only @op.
 */
SG_EXTERN bool sg_op_finished(const sg_op *op);

/**
 * sg_op_finished_at - the instant the operation ended: the end of its
 * report's elapsed_ms, measured like it from sg_budget_started_at() of
 * sg_op_budget().
 *
 * Returns CLOCK_MONOTONIC nanoseconds, or SG_TIME_NEVER while it runs or
 * sleeps, and when @op is NULL or never started.
 * Thread-safety: reads only @op.
 */
SG_EXTERN int64_t sg_op_finished_at(const sg_op *op);

/**
 * sg_op_outcome - the operation's outcome.
 *
 * Returns, once it has ended, its last attempt's outcome (as recorded, see
 * sg_op_attempt_done), or the refusal's (refused or budget_exhausted) when
 * no attempt ran.  Before that: ok while an attempt runs or before the
 * first one (and when @op is NULL or never started), and during a backoff
 * sleep the outcome of the attempt that failed.
 * Thread-safety: reads only @op.
 */
SG_EXTERN sg_outcome sg_op_outcome(const sg_op *op);

/**
 * sg_op_final_decision - the decision that ended the operation.
 *
 * Returns DONE or STOP once the operation has ended (STOP after a
 * refusal); SG_OP_NONE while it runs, and when @op is NULL or never
 * started.
 * Thread-safety: reads only @op.
 */
SG_EXTERN sg_op_decision sg_op_final_decision(const sg_op *op);

/**
 * sg_op_final_reason - the reason of the decision that ended the operation.
 *
 * Returns the reason once the operation has ended; SG_OP_REASON_NONE while
 * it runs, and when @op is NULL or never started.
 * Thread-safety: reads only @op.
 */
SG_EXTERN sg_op_reason sg_op_final_reason(const sg_op *op);

/**
 * sg_op_attempt_count - attempts planned so far, the running one included.
 *
 * Returns 0 .. max_attempts (sg_op_options_set_max_attempts); 0 when @op
 * is NULL or never started.
 * Thread-safety: reads only @op.
 */
SG_EXTERN uint32_t sg_op_attempt_count(const sg_op *op);

/**
 * sg_op_attempt_at - the record of attempt @i (0-based).
 *
 * Returns a pointer into @op or one of its heap blocks (valid until @op is
 * released, started again or goes away; later attempts never move it; a
 * running attempt's record has running = true and changes when its result
 * is handed in), or NULL when @op is NULL, never started, or
 * @i >= sg_op_attempt_count(@op).
 * Thread-safety: reads only @op.
 */
SG_EXTERN const sg_op_attempt *sg_op_attempt_at(const sg_op *op, uint32_t i);

/* ------------------------------------------------------------------------
 * The execution report: one JSON document per operation (docs/report.md).
 * ------------------------------------------------------------------------ */

/**
 * sg_op_report_write - writes the report as of @now (the end instant when
 * the operation has ended) into @buf, NUL-terminated.  Never allocates.
 * *@needed (when non-NULL) receives the size the document needs, NUL
 * included, whether or not it fitted.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @op is NULL or was never started, or @buf is NULL while
 *               @len > 0;
 *   SG_ENOBUFS  @len is smaller than the document (@buf holds a truncated,
 *               NUL-terminated prefix when @len > 0).
 * Thread-safety: reads only @op; touches only @buf and *@needed.
 */
SG_EXTERN int sg_op_report_write(const sg_op *op, int64_t now, char *buf, size_t len,
                                 size_t *needed);

/**
 * sg_op_report_fwrite - writes the report as of @now to @f, without a
 * trailing newline.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op or @f is NULL, or @op was never started;
 *   SG_EIO     writing to @f failed (part of the report may be written).
 * Thread-safety: reads only @op; as stdio's for @f.
 */
SG_EXTERN int sg_op_report_fwrite(const sg_op *op, int64_t now, FILE *f);

/* ------------------------------------------------------------------------
 * Retry-After and HTTP-date (RFC 9110 §10.2.3, §5.6.7).  Pure functions.
 * Values are field values as RFC 9110 defines them: without the leading or
 * trailing whitespace, which is therefore malformed here.
 * ------------------------------------------------------------------------ */

/**
 * sg_http_date_parse - parses an HTTP-date in any of the three formats:
 * IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
 * "Sunday, 06-Nov-94 08:49:37 GMT" and asctime "Sun Nov  6 08:49:37 1994".
 * Names are case-sensitive; the day name must be the date's weekday; the
 * day must exist in its month; seconds may be 60 (leap second).  A two-digit
 * RFC 850 year is placed in the century of @wall_now_s's year, less 100
 * when that is more than 50 years ahead (RFC 9110 §5.6.7).
 *
 * Returns 0 and sets *@unix_s if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL      @value or @unix_s is NULL, or an RFC 850 date is given
 *                  while @wall_now_s <= 0 (the century is unknown);
 *   SG_EMALFORMED  @value is not an HTTP-date.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_http_date_parse(const char *value, size_t len, int64_t wall_now_s,
                                 int64_t *unix_s);

/**
 * sg_retry_after_parse - parses a Retry-After value into a delay: delta
 * seconds (1*DIGIT; values beyond SG_DURATION_MAX saturate there), or an
 * HTTP-date minus @wall_now_s (a date in the past is a delay of 0).
 *
 * Returns 0 and sets *@delay_ns if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL      @value or @delay_ns is NULL, or the value is an HTTP-date
 *                  and @wall_now_s <= 0;
 *   SG_EMALFORMED  neither delta-seconds nor an HTTP-date.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_retry_after_parse(const char *value, size_t len, int64_t wall_now_s,
                                   int64_t *delay_ns);

/**
 * sg_retry_after_ms_parse - parses a retry-after-ms value (the milliseconds
 * OpenAI's and Azure's servers send beside Retry-After) into a delay:
 * 1*DIGIT, optionally "." 1*DIGIT (a fraction of a millisecond, kept to
 * the nanosecond; further digits are dropped).  Values beyond
 * SG_DURATION_MAX saturate there.  No sign, exponent or whitespace.
 *
 * Returns 0 and sets *@delay_ns if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL      @value or @delay_ns is NULL;
 *   SG_EMALFORMED  anything else.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_retry_after_ms_parse(const char *value, size_t len, int64_t *delay_ns);

/* ------------------------------------------------------------------------
 * Deadline propagation.  Pure functions.
 * ------------------------------------------------------------------------ */

/** Room for any sg_deadline_ms_format or sg_grpc_timeout_format output,
 *  NUL included. */
#define SG_DEADLINE_VALUE_MAX 24

/**
 * sg_deadline_ms_format - writes @ns as whole milliseconds, rounded down
 * (never promise more than is left), e.g. "4213", NUL-terminated.
 *
 * Returns the length written (NUL not counted) if it succeeds, or one of
 * the following negative error codes:
 *   SG_EINVAL   @buf is NULL or @ns < 0;
 *   SG_ENOBUFS  @len is too small (SG_DEADLINE_VALUE_MAX always fits).
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_deadline_ms_format(int64_t ns, char *buf, size_t len);

/**
 * sg_deadline_ms_parse - parses a whole-millisecond value (1*DIGIT, no sign,
 * no space) into nanoseconds; values beyond SG_DURATION_MAX saturate there.
 *
 * Returns 0 and sets *@ns if it succeeds, or one of the following negative
 * error codes:
 *   SG_EINVAL      @value or @ns is NULL;
 *   SG_EMALFORMED  empty, a non-digit (sign, space, dot), or a number too
 *                  large for 64 bits.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_deadline_ms_parse(const char *value, size_t len, int64_t *ns);

/**
 * sg_grpc_timeout_format - writes @ns as a grpc-timeout value: at most 8
 * digits and the finest unit that fits (n, u, m, S, M, H), rounded down.
 *
 * Returns the length written (NUL not counted) if it succeeds, or one of
 * the following negative error codes:
 *   SG_EINVAL   @buf is NULL or @ns < 0;
 *   SG_ENOBUFS  @len is too small (SG_DEADLINE_VALUE_MAX always fits).
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_grpc_timeout_format(int64_t ns, char *buf, size_t len);

/**
 * sg_grpc_timeout_parse - parses a grpc-timeout value (1 to 8 digits, then
 * one of H M S m u n) into nanoseconds; values beyond SG_DURATION_MAX
 * saturate there.
 *
 * Returns 0 and sets *@ns if it succeeds, or one of the following negative
 * error codes:
 *   SG_EINVAL      @value or @ns is NULL;
 *   SG_EMALFORMED  empty, no digits, more than 8 digits, a sign or space,
 *                  or a missing or unknown unit.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_grpc_timeout_parse(const char *value, size_t len, int64_t *ns);

/**
 * sg_deadline_from_timeout - turns an inbound timeout into a local
 * monotonic deadline: @now + @timeout_ns - @allowance_ns (transit and clock
 * skew), never before @now, saturating.
 *
 * Returns 0 and sets *@deadline if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL  @deadline is NULL, or @timeout_ns or @allowance_ns < 0.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_deadline_from_timeout(int64_t now, int64_t timeout_ns,
                                       int64_t allowance_ns, int64_t *deadline);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_POLICY_H */
