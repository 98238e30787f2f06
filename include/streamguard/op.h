/*
 * streamguard op: reading an operation - while it runs and once it has
 * ended - on any transport: its outcome, the decision that ended it and
 * why, the record of every attempt, and the execution report (JSON,
 * docs/report.md); and the observer, what the policy calls as an
 * operation forms its intent, starts and ends each attempt, and resolves.
 *
 * An sg_op is opaque.  A transport hands it out (sg_curl_op_policy,
 * sg_h2_op_policy) and its observer receives it; driving one by hand is
 * <streamguard/unstable/op.h>.  Every reader answers for NULL and for an
 * operation never started with a value no running operation gives:
 * SG_OUTCOME_NONE, -1 for an instant, NULL for a pointer (each says).
 *
 * Records (sg_op_attempt, sg_op_intent) are the library's: read them
 * through the pointer given, never allocate or copy one by sizeof - they
 * may grow at the end in a minor release.
 *
 * Thread-safety: the readers only read the operation; they may run while
 * no thread changes it (the thread that drives it, or any thread after it
 * ended).  The name tables are immutable.
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_OP_H
#define STREAMGUARD_OP_H

#include <streamguard/core.h>
#include <streamguard/policy.h>

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes of a transport's own error message kept per attempt. */
#define SG_OP_ERROR_MAX 127
/** Bytes of an in-band error's type kept per attempt (provider_error). */
#define SG_OP_PROVIDER_TYPE_MAX 63
/** Bytes kept of the body of an error response (a final status of 400 or
 *  more): what the server said, for the caller (sg_curl_op_error_body,
 *  sg_h2_op_error_body); never in the report. */
#define SG_ERROR_BODY_MAX 4096

/** sg_op - one operation: its budget, its attempts, their records.
 *  Opaque. */
typedef struct sg_op sg_op;

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
    XX(PROVIDER_FINAL, "provider_final")                         \
    XX(RATE_LIMITED, "rate_limited")                             \
    XX(CIRCUIT_OPEN, "circuit_open")                             \
    XX(ENDPOINT_BUSY, "endpoint_busy")

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
 * Usage: what an attempt consumed (docs/report.md, "Usage and cost")
 * ------------------------------------------------------------------------ */

/** Where an attempt's usage figures come from. */
typedef enum sg_usage_source {
    /** Nothing is known: the report says "usage": null. */
    SG_USAGE_NONE = 0,
    /** The provider's own figures, read from the stream by its profile
     *  (docs/profiles.md, "Usage"). */
    SG_USAGE_PROVIDER,
    /** At least one figure is an estimate, made from what the attempt
     *  delivered or copied from another attempt of the operation
     *  (docs/report.md); the others are the provider's. */
    SG_USAGE_ESTIMATE
} sg_usage_source;

/**
 * sg_op_usage - the tokens one attempt consumed, normalised as
 * OpenTelemetry's GenAI conventions count them: input includes the cached
 * input (and cache writes), output includes the reasoning.  -1 for a
 * figure not known.
 */
typedef struct sg_op_usage {
    int64_t input_tokens;        ///< -1: unknown
    int64_t output_tokens;       ///< -1: unknown
    int64_t cached_input_tokens; ///< -1: unknown; part of input_tokens
    int64_t reasoning_tokens;    ///< -1: unknown; part of output_tokens
    sg_usage_source source;
} sg_op_usage;

/** Whose the tokens of an operation were: the attempt whose stream the
 *  consumer kept, or every other attempt that was sent. */
typedef enum sg_usage_fate { SG_USAGE_KEPT = 0, SG_USAGE_DISCARDED = 1 } sg_usage_fate;

/** Which count of an sg_op_usage. */
typedef enum sg_token_kind {
    SG_TOKENS_INPUT = 0,
    SG_TOKENS_OUTPUT,
    SG_TOKENS_CACHED_INPUT,
    SG_TOKENS_REASONING
} sg_token_kind;

/* ------------------------------------------------------------------------
 * Attempt records
 * ------------------------------------------------------------------------ */

/** Where an attempt's hedge delay came from (<streamguard/health.h>,
 *  sg_op_options_set_hedge_auto); the names are the report's. */
typedef enum sg_hedge_source {
    SG_HEDGE_SOURCE_NONE = 0, ///< "none": no hedging
    SG_HEDGE_SOURCE_FIXED,    ///< "fixed": the delay of sg_op_options_set_hedging
    SG_HEDGE_SOURCE_AUTO,     ///< "auto": its endpoint's first-token quantile, clamped
    SG_HEDGE_SOURCE_AUTO_FALLBACK, ///< "auto_fallback": learned too little yet: the fixed
                                   ///< one
    SG_HEDGE_SOURCE_COUNT_
} sg_hedge_source;

/** sg_hedge_source_name - "none", "fixed", "auto", "auto_fallback"; NULL
 *  out of range.  Thread-safety: pure function. */
SG_EXTERN const char *sg_hedge_source_name(sg_hedge_source s);

/**
 * sg_op_attempt - the record of one attempt; read-only, read through the
 * pointer the library gives (it may grow at the end).  Durations are
 * nanoseconds; a granted clock of 0 was off.
 */
typedef struct sg_op_attempt {
    uint32_t n;         ///< 1-based attempt number
    sg_outcome outcome; ///< after budget attribution (docs/design.md)
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
    bool retry_after_present;      ///< Retry-After or retry-after-ms present
    bool retry_after_malformed;    ///< present but none usable: ignored
    bool hedge;                    ///< started beside a running attempt
    uint32_t endpoint;             ///< 0-based (sg_op_options_set_endpoints)
    int64_t started_at;            ///< monotonic instant of the plan
    int64_t remaining_ns;          ///< budget remaining at the start
    int64_t connect_timeout_ns;    ///< the granted clocks, 0 = off
    int64_t first_item_timeout_ns; ///<
    int64_t idle_timeout_ns;       ///<
    int64_t stream_timeout_ns;     ///<
    int64_t attempt_timeout_ns;    ///< the lease: the attempt's ceiling
    int64_t elapsed_ns;            ///< start -> result
    int64_t time_to_first_item_ns; ///< -1 when no item arrived
    uint64_t items;
    uint64_t bytes;
    int64_t retry_after_ns; ///< parsed Retry-After, -1 when none
    int64_t backoff_ns;     ///< leased sleep after it, -1 when none
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
    /** What the attempt consumed, as its stream said (source provider)
     *  or estimated (docs/report.md, "Usage and cost"); source NONE and
     *  every figure -1 while it runs and when nothing is known.  An input
     *  copied from another attempt of the operation (an estimate) is
     *  filled in when that attempt reports it, at the latest when the
     *  operation ends: on_attempt_end sees the record as it was when the
     *  attempt ended. */
    sg_op_usage usage;
    /** With hedging: how long after this attempt's start the next hedge
     *  beside it goes (its lease when that is shorter, which it then
     *  never reaches), decided when it was planned, and where that came
     *  from; -1 and SG_HEDGE_SOURCE_NONE without hedging. */
    int64_t hedge_after_ns;
    sg_hedge_source hedge_source; ///<
} sg_op_attempt;

/* ------------------------------------------------------------------------
 * Reading an operation
 * ------------------------------------------------------------------------ */

/**
 * sg_op_outcome - the operation's outcome: once it has ended, its last
 * attempt's outcome as recorded (with hedging, the deciding attempt's), or
 * the refusal's (refused, budget_exhausted) when no attempt ran, or
 * cancelled.
 *
 * Returns SG_OUTCOME_NONE until it has ended (while it runs or sleeps
 * before a retry; each attempt's own outcome is in its record), and when
 * @op is NULL or was never started.
 */
SG_EXTERN sg_outcome sg_op_outcome(const sg_op *op);

/**
 * sg_op_final_decision - the decision that ended the operation: DONE or
 * STOP (STOP after a refusal).  SG_OP_NONE while it runs, and when @op is
 * NULL or was never started.
 */
SG_EXTERN sg_op_decision sg_op_final_decision(const sg_op *op);

/**
 * sg_op_final_reason - the reason of the decision that ended the
 * operation (docs/report.md).  SG_OP_REASON_NONE while it runs, and when
 * @op is NULL or was never started.
 */
SG_EXTERN sg_op_reason sg_op_final_reason(const sg_op *op);

/**
 * sg_op_finished - true once the operation has ended (DONE, STOP or a
 * refusal); false while it runs or sleeps between attempts, and when @op
 * is NULL or was never started.
 */
SG_EXTERN bool sg_op_finished(const sg_op *op);

/**
 * sg_op_finished_at - the instant the operation ended: the end of its
 * report's elapsed_ms, measured like it from sg_budget_started_at() of
 * sg_op_budget().
 *
 * Returns CLOCK_MONOTONIC nanoseconds, or -1 until it has ended, and when
 * @op is NULL or was never started.
 */
SG_EXTERN int64_t sg_op_finished_at(const sg_op *op);

/**
 * sg_op_attempt_count - attempts planned so far, the running ones
 * included: 0 .. max_attempts (one more with a probe,
 * sg_op_options_set_probe); 0 when @op is NULL or was never started.
 */
SG_EXTERN uint32_t sg_op_attempt_count(const sg_op *op);

/**
 * sg_op_attempt_at - the record of attempt @i (0-based).
 *
 * Returns a pointer inside @op (valid until @op is freed or started again;
 * later attempts never move it; a running attempt's record has running =
 * true and changes when its result is handed in), or NULL when @op is
 * NULL, never started, or @i >= sg_op_attempt_count(@op).
 */
SG_EXTERN const sg_op_attempt *sg_op_attempt_at(const sg_op *op, uint32_t i);

/**
 * sg_op_attempt_lease_by - who set the lease of attempt @i (0-based, as
 * sg_op_attempt_at counts): the ceiling its every clock was clamped to,
 * and so who would be named had it run into it (docs/design.md, "Who set
 * the limit").  "budget" when the operation's budget did - no attempt
 * timeout, or one longer than what remained less the floor - and
 * "attempt" when the caller's attempt timeout did (equal to what
 * remained included: the budget is named only when strictly tighter);
 * for the caller's failed probe (sg_op_options_set_probe), "connect" when
 * its own connect timeout did.  Known from the attempt's plan on, whether
 * or not a clock ended it.
 *
 * Returns a static string, or NULL when @op is NULL, never started, or
 * @i >= sg_op_attempt_count(@op).
 */
SG_EXTERN const char *sg_op_attempt_lease_by(const sg_op *op, uint32_t i);

/**
 * sg_op_attempt_probe - whether attempt @i (0-based, as sg_op_attempt_at
 * counts) is the caller's failed probe (sg_op_options_set_probe): a
 * connection tried before the operation started, recorded as its attempt
 * 1 (n == 1) so that the report accounts for its time - but nothing was
 * sent on it, so the operation's own attempts begin at attempt 2 and the
 * first of them is no resend.  The report's "probe" field and an attempt
 * span's streamguard.probe (docs/otel.md) say the same.
 *
 * Returns false for every other attempt, and when @op is NULL, never
 * started, or @i >= sg_op_attempt_count(@op).
 */
SG_EXTERN bool sg_op_attempt_probe(const sg_op *op, uint32_t i);

/**
 * sg_op_deciding_attempt - the attempt the operation's outcome speaks of:
 * the last one whose end the policy decided on (done, retry or stop) -
 * with hedging, the winner, not a loser recorded after it; without, the
 * newest.  The newest while none has been decided; NULL when none ran (or
 * @op is NULL or was never started).  The report's top-level phase,
 * partial, retryable and outcome_unknown are this attempt's.
 */
SG_EXTERN const sg_op_attempt *sg_op_deciding_attempt(const sg_op *op);

/**
 * sg_op_budget - the operation's budget: read it with sg_budget_deadline,
 * sg_budget_started_at (where elapsed_ms is measured from),
 * sg_budget_remaining.
 *
 * Returns a pointer inside @op, valid as long as @op; NULL when @op is
 * NULL or was never started.
 */
SG_EXTERN const sg_budget *sg_op_budget(const sg_op *op);

/**
 * sg_op_method - the request method the operation was started with ("POST"
 * by default); NULL when @op is NULL or was never started.
 */
SG_EXTERN const char *sg_op_method(const sg_op *op);

/**
 * sg_op_idempotency_key - the idempotency key sent on every attempt
 * (NUL-terminated, inside @op, valid while @op is); NULL when it has none,
 * or @op is NULL or was never started.
 */
SG_EXTERN const char *sg_op_idempotency_key(const sg_op *op);

/**
 * sg_op_endpoint_name - endpoint @i (0-based, as sg_op_options_set_endpoints
 * orders them) as the report names it - scheme://host:port/path, without
 * userinfo, query or fragment - into @out (NUL-terminated, cut at @cap);
 * without endpoints, endpoint 0 is the target (sg_op_options_set_target)
 * named the same way.
 *
 * Returns the length written, or 0 (and @out, when @cap > 0, is "") when
 * @op is NULL or was never started, @i names no endpoint, there is no
 * target, or @out is NULL or @cap is 0.
 */
SG_EXTERN size_t sg_op_endpoint_name(const sg_op *op, uint32_t i, char *out, size_t cap);

/**
 * sg_op_observer_error - the first error an observer's on_attempt_start,
 * on_attempt_headers, on_attempt_end or on_resolve returned for @op (it never changed the
 * operation), or the code of an intent refused while it was pending.
 *
 * Returns 0 when there was none, that negative SG_E* code, or SG_EINVAL
 * when @op is NULL or was never started.
 */
SG_EXTERN int sg_op_observer_error(const sg_op *op);

/* ------------------------------------------------------------------------
 * What an operation consumed, once it has ended (docs/report.md, "Usage
 * and cost").  Kept: the attempt whose stream the consumer kept - the
 * deciding attempt of an operation that ended ok; none when it failed.
 * Discarded: every other attempt that was sent (partial streams, hedge
 * losers, attempts cut before their first token, errors).  A sum counts
 * the figures its attempts know: a lower bound when some do not.
 * ------------------------------------------------------------------------ */

/**
 * sg_op_tokens - the tokens of @kind the attempts of @fate consumed.
 *
 * Returns the count (0 for DISCARDED when no other attempt was sent), or
 * -1: nothing kept (the operation failed), none of those attempts knows
 * that count, @op is NULL, never started or has not ended, or @fate or
 * @kind is out of range.
 */
SG_EXTERN int64_t sg_op_tokens(const sg_op *op, sg_usage_fate fate, sg_token_kind kind);

/**
 * sg_op_tokens_estimated - whether any part of @fate's counts is an
 * estimate (an attempt's usage whose source is SG_USAGE_ESTIMATE).  false
 * when @op is NULL, never started or has not ended.
 */
SG_EXTERN bool sg_op_tokens_estimated(const sg_op *op, sg_usage_fate fate);

/**
 * sg_op_attempts_unaccounted - the attempts that were sent, whose usage is
 * unknown (SG_USAGE_NONE) and that may have been billed: a first-token
 * timeout's prefill, an outcome-unknown request, a hedge loser nothing
 * was learned of; never one that was not sent, nor one the server
 * answered with an error status (other than a gateway's 502 or 504).  0
 * when @op is NULL, never started or has not ended.
 */
SG_EXTERN uint32_t sg_op_attempts_unaccounted(const sg_op *op);

/**
 * sg_op_cost - what the attempts of @fate cost at the prices given
 * (sg_op_options_set_price): per attempt (input - cached) x input price +
 * cached x cached price + output x output price, per million tokens, at
 * its endpoint's prices; a figure not known, or an endpoint without a
 * price, adds nothing (the cost is then a lower bound).  In the caller's
 * unit (no currency is assumed).
 *
 * Returns the cost (0 for KEPT when the operation failed), or -1.0 when
 * no price was given, @op is NULL, never started or has not ended, or
 * @fate is out of range.
 */
SG_EXTERN double sg_op_cost(const sg_op *op, sg_usage_fate fate);

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
 * Thread-safety: as stdio's for @f.
 */
SG_EXTERN int sg_op_report_fwrite(const sg_op *op, int64_t now, FILE *f);

/* ------------------------------------------------------------------------
 * The observer (docs/design.md, "Where the observer and the transports
 * plug in")
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
 * sg_op_intent_wait - what an observer's start_intent fills in when it
 * answers SG_EINPROGRESS.  The library sets every field before the call
 * (fd -1, handle NULL), so an observer built for a smaller struct leaves
 * the rest as it is.
 */
typedef struct sg_op_intent_wait {
    int fd;       ///< readable (and stays so) once poll_intent has an answer
    void *handle; ///< the observer's own token for this intent
} sg_op_intent_wait;

/**
 * The observer's functions.  Each runs on the thread that drives the
 * operation, synchronously, inside the policy call named on its setter:
 * keep it short, and never call back into the same sg_op.  Each gets the
 * user_data given to sg_op_options_set_observer (or _add_observer).
 */
typedef int (*sg_op_intent_cb)(const sg_op *op, const sg_op_intent *intent,
                               void *user_data);
typedef int (*sg_op_attempt_cb)(const sg_op *op, const sg_op_attempt *rec,
                                void *user_data);
typedef int (*sg_op_resolve_cb)(const sg_op *op, void *user_data);
typedef int (*sg_op_start_intent_cb)(const sg_op *op, const sg_op_intent *intent,
                                     void *user_data, sg_op_intent_wait *wait);
typedef int (*sg_op_poll_intent_cb)(const sg_op *op, void *handle, void *user_data);
typedef void (*sg_op_abandon_intent_cb)(const sg_op *op, void *handle, sg_outcome outcome,
                                        void *user_data);

/**
 * sg_op_headers - the request headers observers add to one attempt
 * (on_attempt_headers): W3C trace context, a tenant's tag.  Opaque: the
 * transport owns it; an observer only adds to it (sg_op_headers_add).
 */
typedef struct sg_op_headers sg_op_headers;
/** The most headers the observers of one operation add to an attempt. */
#define SG_OP_HEADERS_MAX 4
/** Bytes of those headers' names and values together (each with a NUL):
 *  room for a traceparent and a 512-byte tracestate. */
#define SG_OP_HEADERS_BYTES 1024

typedef int (*sg_op_headers_cb)(const sg_op *op, const sg_op_attempt *rec,
                                sg_op_headers *headers, void *user_data);

/**
 * sg_op_headers_add - adds the header @name: @value to the request of the
 * attempt whose on_attempt_headers call gave @h, after the caller's
 * headers and the ones the library stamps (Idempotency-Key, the deadline
 * header, grpc-timeout).  Both are copied; the name is sent lowercased
 * (HTTP field names are case-insensitive, and HTTP/2 requires it).
 * @name: a token (RFC 9110 §5.6.2) of 1 .. SG_OP_HEADER_NAME_MAX
 *   characters.
 * @value: visible ASCII, spaces and tabs (no CR, LF or other control
 *   character), possibly empty.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (then nothing is added):
 *   SG_EINVAL   @h, @name or @value is NULL, or either is malformed;
 *   SG_ERANGE   @name is longer than SG_OP_HEADER_NAME_MAX;
 *   SG_ENOBUFS  the attempt has SG_OP_HEADERS_MAX such headers, or they
 *               would pass SG_OP_HEADERS_BYTES;
 *   SG_ENOMEM   no memory for the copies.
 * Thread-safety: only inside the on_attempt_headers call that gave @h.
 */
SG_EXTERN int sg_op_headers_add(sg_op_headers *h, const char *name, const char *value);

/**
 * sg_op_observer_new - an observer that does nothing yet: give it the
 * functions it needs with the setters below.  Opaque (typedef in
 * <streamguard/policy.h>); set it on options with
 * sg_op_options_set_observer, which borrows it: keep it alive, and do not
 * change it, while operations started with it run.  One observer may
 * serve any number of operations (its user_data says which).
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is NULL):
 *   SG_EINVAL  @out is NULL;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_op_observer_new(sg_op_observer **out);

/** sg_op_observer_free - frees @obs (NULL is fine); no operation may use
 *  it any more. */
SG_EXTERN void sg_op_observer_free(sg_op_observer *obs);

/**
 * sg_op_observer_set_on_intent - called from sg_op_start, after the budget
 * started and before any attempt can be planned.  It returns 0 to let the
 * operation go on, or a negative SG_E* code to refuse it: sg_op_start then
 * fails with that code and the operation is not started (nothing is ever
 * sent).  The intent ledger refuses this way while the same key is
 * unresolved.  Default: none.
 *
 * Each setter of the observer returns 0, or SG_EINVAL when @obs is NULL
 * (and, for sg_op_observer_set_async_intent, when some of the three are
 * NULL but not all).  NULL removes a function.
 */
SG_EXTERN int sg_op_observer_set_on_intent(sg_op_observer *obs, sg_op_intent_cb fn);

/** sg_op_observer_set_on_attempt_start - called from sg_op_next_attempt
 *  (and sg_op_hedge) once an attempt was leased: @rec->running is true,
 *  the clocks it was granted are set.  Default: none. */
SG_EXTERN int sg_op_observer_set_on_attempt_start(sg_op_observer *obs,
                                                  sg_op_attempt_cb fn);

/** sg_op_observer_set_on_attempt_end - called from sg_op_attempt_done once
 *  the attempt's outcome and the decision are recorded in @rec.  Default:
 *  none. */
SG_EXTERN int sg_op_observer_set_on_attempt_end(sg_op_observer *obs, sg_op_attempt_cb fn);

/**
 * sg_op_observer_set_on_attempt_headers - called by a transport (the
 * libcurl and HTTP/2 ones, sg_easy) for each attempt it sends, after
 * on_attempt_start and before its request goes, where it stamps the
 * attempt's deadline header: @headers takes what the observer adds with
 * sg_op_headers_add - an OpenTelemetry trace puts the W3C traceparent
 * that names the attempt's own span there.  A transport of your own asks
 * for them with sg_op_attempt_headers (<streamguard/unstable/op.h>).  Its
 * return value is kept as on_attempt_start's.  Default: none.
 */
SG_EXTERN int sg_op_observer_set_on_attempt_headers(sg_op_observer *obs,
                                                    sg_op_headers_cb fn);

/**
 * sg_op_observer_set_on_resolve - called once, when the operation ends,
 * whatever ended it (a final attempt, a refused lease, sg_op_cancel): the
 * outcome, decision and reason are final.  Default: none.
 *
 * It, on_attempt_start, on_attempt_headers and on_attempt_end return 0,
 * or a negative SG_E* code that never changes the operation: the first such code is kept
 * for sg_op_observer_error().
 */
SG_EXTERN int sg_op_observer_set_on_resolve(sg_op_observer *obs, sg_op_resolve_cb fn);

/**
 * sg_op_observer_set_async_intent - the intent without waiting (all three
 * or none).  An event loop that drives many operations must not stop for
 * one observer's disk or database: sg_op_start_async() (what the managed
 * sg_curl_multi and sg_h2_conn use) asks @start instead of on_intent, and
 * the operation waits for its intent in a state of its own while the loop
 * runs the others.  Default: none.
 *
 * @start:   from sg_op_start_async, where on_intent would run.  Returns 0
 *           when the intent is recorded already, a negative code to refuse
 *           (as on_intent), or SG_EINPROGRESS after filling @wait.
 * @poll:    from sg_op_intent_poll: 0 once the intent is recorded (the
 *           operation goes on to its first attempt), SG_EINPROGRESS while
 *           it is not, or a negative code: it was refused (SG_ETIMEDOUT:
 *           it could not be recorded within the budget).  After any answer
 *           but SG_EINPROGRESS the handle and its fd are the observer's
 *           again (closed or reused).
 * @abandon: the operation ended while its intent was pending (cancelled,
 *           or its budget ran out first), at @outcome; nothing was or will
 *           be sent.  In place of on_resolve: if the intent lands after
 *           all, the observer records the end itself.  The handle is the
 *           observer's again.
 */
SG_EXTERN int sg_op_observer_set_async_intent(sg_op_observer *obs,
                                              sg_op_start_intent_cb start,
                                              sg_op_poll_intent_cb poll,
                                              sg_op_abandon_intent_cb abandon);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_OP_H */
