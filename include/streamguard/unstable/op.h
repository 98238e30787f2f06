/*
 * streamguard unstable/op: driving an operation from a transport of your
 * own - the state machine the libcurl and HTTP/2 transports drive.
 *
 * UNSTABLE: what this header declares may change in a minor release
 * (docs/api.md, "Stability").  The stable way to run an operation is a
 * transport (<streamguard/curl.h>, <streamguard/h2.h>); to read one,
 * <streamguard/op.h>.
 *
 * Sans-I/O: no function here reads a clock or sleeps.  Every instant is a
 * CLOCK_MONOTONIC nanosecond value the caller passes in, and the only
 * wall-clock input is the unix time needed to turn an HTTP-date into a
 * delay.  How a transport drives an operation:
 *
 *   sg_op_options *o;  sg_op_options_new(&o);
 *   sg_op_options_set_budget(o, SG_SEC(30));
 *   sg_op *op;  sg_op_new(&op);  sg_op_start(op, o, now);
 *   for (;;) {
 *       sg_op_plan plan;
 *       int rc = sg_op_next_attempt(op, now, &plan);
 *       if (rc == SG_EINPROGRESS) { ... wait until plan.free_at; continue; }
 *       if (rc != 0) break;  // refused (endpoint health too: nothing sent)
 *       sg_guard g;
 *       sg_guard_start(&g, &plan.guard_config, sg_op_budget(op), now);
 *       ... run the attempt, stamp plan.deadline_ms in the request ...
 *       sg_op_result r;  sg_op_result_from_guard(&r, &guard_result);
 *       r.sent = ...; r.headers_received = ...; r.http_status = ...;
 *       sg_op_verdict v;  sg_op_attempt_done(op, now, &r, &v);
 *       if (v.decision != SG_OP_RETRY) break;
 *       ... arm a timer for v.retry_at, then loop ...
 *   }
 *   sg_op_report_write(op, now, buf, sizeof(buf), &needed);
 *   sg_op_free(op);  sg_op_options_free(o);
 *
 * Memory: sg_op_new allocates the operation, sg_op_start a copy of its
 * options; every attempt is recorded, the first two inside the operation
 * and the rest in blocks allocated as retries need them (docs/api.md,
 * "Memory of an operation").  When a block cannot be allocated the retry
 * is not taken: the operation stops with reason out_of_memory and the
 * attempt that could not be recorded is never planned.
 *
 * The structs below (sg_op_plan, sg_op_result, sg_op_verdict) are filled
 * by the caller or the library on the stack, so their layout is part of
 * this unstable API: rebuild against the headers of the library you run.
 *
 * Thread-safety: an sg_op must not be used by two threads at once without
 * the caller's own lock; distinct operations are independent.
 */
#ifndef STREAMGUARD_UNSTABLE_OP_H
#define STREAMGUARD_UNSTABLE_OP_H

#include <streamguard/core.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * sg_op_new - an operation never started: every reader answers "never
 * started" until sg_op_start.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is NULL):
 *   SG_EINVAL  @out is NULL;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_op_new(sg_op **out);

/**
 * sg_op_free - frees @op and its records (NULL is fine).  An operation
 * freed while its intent is pending (sg_op_intent_pending) first hands the
 * observer its handle back: abandon_intent, as cancelled.
 */
SG_EXTERN void sg_op_free(sg_op *op);

/**
 * sg_op_start - begin an operation at @now: copies @opts (NULL = all
 * defaults) and starts its budget (at @now, or at an earlier instant given
 * by sg_op_options_set_started_at).  An @op that was started before is
 * started anew: its records are freed first (pointers to them are gone).
 *
 * A floor at or above the budget is allowed: the first sg_op_next_attempt
 * is then refused (outcome refused) without any request being made.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (then @op is not started):
 *   SG_EINVAL  @op is NULL;
 *   SG_EUNSAFE @opts hedges a request that is not safe to repeat;
 *   SG_ENOMEM  no memory for the copy of @opts;
 *   the observer's on_intent code when it refused the operation (nothing
 *              may be sent).
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
 */
SG_EXTERN int sg_op_start_async(sg_op *op, const sg_op_options *opts, int64_t now,
                                int *fd);

/**
 * sg_op_intent_pending - true while @op waits for its observer's intent.
 */
SG_EXTERN bool sg_op_intent_pending(const sg_op *op);

/**
 * sg_op_intent_deadline - the instant a pending intent is given up: the
 * budget's deadline less its floor, when the first lease would be refused
 * anyway.  SG_TIME_NEVER when no intent is pending; -1 when @op is NULL or
 * was never started.
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
 */
SG_EXTERN int sg_op_intent_poll(sg_op *op, int64_t now);

/**
 * sg_op_plan - what the next attempt may use.  On a refusal only outcome
 * and reason are meaningful.
 */
typedef struct sg_op_plan {
    uint32_t attempt;             ///< 1-based attempt number
    sg_guard_config guard_config; ///< leased clocks and caps for sg_guard_start
    int64_t attempt_timeout_ns;   ///< the granted lease = the attempt ceiling
    int64_t remaining_ns;         ///< budget remaining when it was planned
    int64_t deadline_ms;          ///< attempt_timeout_ns in whole ms, rounded down
    const char *deadline_header;  ///< header name for deadline_ms (in the op)
    sg_outcome outcome;           ///< on refusal: refused or budget_exhausted
    sg_op_reason reason;          ///< on refusal: why
    uint32_t endpoint;            ///< 0-based: which of the endpoints (0 without)
    const char *endpoint_url;     ///< its URL (borrowed), NULL without endpoints
    bool hedge;                   ///< planned by sg_op_hedge
    /** Endpoint health (<streamguard/health.h>): on SG_EINPROGRESS the
     *  instant to ask again (the endpoint frees then - or, for an
     *  operation's first wait for a rate limit, SG_HEALTH_RECHECK_NS
     *  later: those waiting before it go first); on a refusal with
     *  reason rate_limited, circuit_open or endpoint_busy the instant it
     *  frees; else -1. */
    int64_t free_at;
} sg_op_plan;

/**
 * sg_op_next_attempt - lease the next attempt at @now.
 *
 * The attempt asks for the attempt timeout (or everything when it is off)
 * and is granted min(that, remaining - floor); its ceiling is the grant and
 * every other configured clock is clamped to it.  Propagate deadline_ms (or
 * a grpc-timeout made from attempt_timeout_ns): it is when this client gives up.
 *
 * When nothing (or less than the minimum attempt) can be leased the
 * operation ends: plan->outcome is budget_exhausted when nothing remains at
 * all, refused otherwise, and plan->reason says why (budget_exhausted,
 * budget_below_floor or lease_too_short).  The operation's own outcome
 * stays its last attempt's when one ran.
 *
 * With endpoint health (sg_op_options_set_health), the attempt's endpoint
 * is consulted first: when it is cooling, open (or half-open with its
 * probe out) or full, the attempt goes at once to the next endpoint that
 * is free; when none is, the operation waits until the first frees if
 * that instant plus the minimum attempt fits the budget (SG_EINPROGRESS:
 * call again at plan->free_at), else it ends with nothing sent (outcome
 * refused when no attempt ran, reason rate_limited, circuit_open or
 * endpoint_busy, plan->free_at the instant the endpoint frees).
 * @plan: zeroed, then filled; written on every return but SG_EINVAL.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL      @op or @plan is NULL, or @op was never started;
 *   SG_ESTATE      an attempt is running, the operation has ended, or @now
 *                  is before the end of the leased backoff sleep (or of a
 *                  wait for an endpoint);
 *   SG_EINPROGRESS its endpoint is not free yet: nothing was planned, the
 *                  operation waits in its budget until plan->free_at;
 *   SG_EREFUSED    no attempt could be leased (the operation has ended).
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
    /** What the attempt's stream said it consumed - a provider profile's
     *  reading of its usage events (-1 for a figure it did not give; the
     *  source is ignored) - or NULL when nothing read the stream (no
     *  profile): the record's usage is then unknown.  Copied. */
    const sg_op_usage *usage;
    /** With @usage: the bytes of generated text the attempt received,
     *  decoded; an output the stream did not give is estimated from it
     *  (docs/report.md, "Usage and cost"). */
    uint64_t text_bytes;
    /** The response's rate-limit headers (sg_op_ratelimit_header), NULL =
     *  none; read with headers_received, for endpoint health.  An
     *  absolute reset is measured from wall_now_s. */
    const struct sg_op_ratelimit *ratelimit;
} sg_op_result;

/**
 * The rate-limit header families a response may carry: requests, tokens
 * (OpenAI's x-ratelimit-*-tokens, Anthropic's anthropic-ratelimit-tokens-*),
 * and Anthropic's input and output tokens.
 */
enum {
    SG_RATELIMIT_REQUESTS = 0,
    SG_RATELIMIT_TOKENS,
    SG_RATELIMIT_INPUT_TOKENS,
    SG_RATELIMIT_OUTPUT_TOKENS,
    SG_RATELIMIT_COUNT_
};

/**
 * sg_op_ratelimit - what one response's rate-limit headers said, per
 * family; zero-initialise it (nothing known) and feed it the response's
 * headers with sg_op_ratelimit_header.  A bit of @known says which fields
 * hold a value: SG_RATELIMIT_REMAINING(f), SG_RATELIMIT_RESET(f) (a reset
 * relative to the response: reset_ns), SG_RATELIMIT_RESET_AT(f) (an
 * absolute one: reset_at_ms, unix milliseconds), SG_RATELIMIT_LIMIT(f)
 * (the most a window holds: limit).  @at is the monotonic instant the
 * response's headers were read, which a relative reset counts from (0:
 * not said - the attempt's end then, late by its stream); the transports'
 * lifecycle sets it.
 */
typedef struct sg_op_ratelimit {
    uint32_t known;
    int64_t remaining[SG_RATELIMIT_COUNT_];
    int64_t reset_ns[SG_RATELIMIT_COUNT_];
    int64_t reset_at_ms[SG_RATELIMIT_COUNT_];
    int64_t limit[SG_RATELIMIT_COUNT_];
    int64_t at;
} sg_op_ratelimit;

#define SG_RATELIMIT_REMAINING(f) (1u << (f))
#define SG_RATELIMIT_RESET(f) (1u << (8 + (f)))
#define SG_RATELIMIT_RESET_AT(f) (1u << (16 + (f)))
#define SG_RATELIMIT_LIMIT(f) (1u << (24 + (f)))

/**
 * sg_op_ratelimit_header - reads one response header into @rl when it is a
 * rate-limit header (names compared case-insensitively):
 *   x-ratelimit-{limit,remaining,reset}-{requests,tokens} (OpenAI, Azure);
 *   anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
 *   {limit,remaining,reset} (Anthropic).
 * A limit or a remaining count is an integer; a negative one (Azure's -1)
 * says nothing and is not kept.  A reset is a Go duration as OpenAI sends it
 * ("1s", "6m0s", "33.023s", "2m52.8s", "12ms", units h m s ms us µs ns), a
 * bare number of seconds (Azure's "64", "1.5"), or an RFC 3339 instant
 * (Anthropic's "2025-08-21T12:40:59Z", with a fraction or an offset).
 *
 * Returns 1 when the header was taken, 0 when it is none of these, or one
 * of the following negative error codes (@rl unchanged):
 *   SG_EINVAL      @rl, @name or @value is NULL;
 *   SG_EMALFORMED  a rate-limit header whose value is none of the above.
 * Thread-safety: touches only @rl.
 */
SG_EXTERN int sg_op_ratelimit_header(sg_op_ratelimit *rl, const char *name,
                                     size_t name_len, const char *value,
                                     size_t value_len);

/**
 * sg_op_set_endpoint_identity - what endpoint health keys endpoint
 * @endpoint (0-based) of a started operation by: @url, named as
 * scheme://host:port/path (no userinfo, query or fragment), and the value
 * of the credential header its request carries - Authorization, x-api-key,
 * api-key or x-goog-api-key - of which only a keyed hash is kept (an AWS
 * SigV4 Authorization, which changes per request, is keyed by its access
 * key id).  Call it after sg_op_start and before the first attempt; the
 * transports do.  Without it an operation keys each endpoint by its own
 * URL (sg_op_options_set_endpoints, else the target) and no credential,
 * and one with neither is not tracked.  Nothing is done for an operation
 * without health.
 * @credential: NULL (none) or @credential_len bytes; never kept.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL or never started, @url is NULL, or @endpoint
 *              is not one of its endpoints;
 *   SG_ESTATE  an attempt was planned already.
 */
SG_EXTERN int sg_op_set_endpoint_identity(sg_op *op, uint32_t endpoint, const char *url,
                                          const char *credential, size_t credential_len);

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
 * - A retry past the first two attempts may need a new
 *   block of records; when it cannot be allocated: STOP (out_of_memory,
 *   the attempt stays retryable), so the attempt that could not be
 *   recorded is never planned nor sent.
 * - RETRY leaves the operation sleeping until v->retry_at; DONE and STOP
 *   end it.
 * - The record's usage is @r->usage's figures, and where the stream gave
 *   none an estimate (docs/report.md, "Usage and cost").
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  a NULL pointer, @op never started, or @r holds an outcome
 *              or phase out of range, a status outside 0 and 100 .. 599,
 *              or a parsed Retry-After outside 0 .. SG_DURATION_MAX;
 *   SG_ESTATE  no attempt is running.
 * It may call the random source of sg_op_options_set_random.
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
 */
SG_EXTERN int sg_op_cancel(sg_op *op, int64_t now);

/**
 * sg_op_hedge_at - when the next hedge is due: the newest attempt's start
 * plus the hedge delay, while hedging is on, no attempt has delivered an
 * item (sg_op_hedge_won), fewer than 1 + max_hedges attempts run and the
 * attempt limit allows one more; SG_TIME_NEVER otherwise, and -1 when @op
 * is NULL or was never started.  A transport
 * arms a timer for it and calls sg_op_hedge when it fires.  After a hedge
 * was refused (SG_EREFUSED) the instant stays what it was: the policy
 * never retries a hedge by itself, so the transport stops asking until the
 * next attempt starts (as the built-in ones do), or it would spin.
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
 */
SG_EXTERN uint32_t sg_op_hedge_won(sg_op *op, uint32_t attempt);

/** How many attempts are running (planned, without a result). */
SG_EXTERN uint32_t sg_op_running(const sg_op *op);

/* ------------------------------------------------------------------------
 * The observers' request headers (on_attempt_headers), for a transport of
 * your own: what the library's transports stamp beside the deadline.
 * ------------------------------------------------------------------------ */

/**
 * sg_op_headers_new - an empty set of attempt headers (sg_op_headers,
 * <streamguard/op.h>), to fill with sg_op_attempt_headers; reuse it from
 * one attempt to the next.  Its room (SG_OP_HEADERS_BYTES) is allocated
 * at the first header an observer adds.
 *
 * Returns 0 and sets *@out, or SG_EINVAL (@out is NULL), SG_ENOMEM.
 */
SG_EXTERN int sg_op_headers_new(sg_op_headers **out);

/** sg_op_headers_free - frees @h (NULL is fine). */
SG_EXTERN void sg_op_headers_free(sg_op_headers *h);

/**
 * sg_op_attempt_headers - empties @h and asks every observer of @op for the
 * request headers of attempt @attempt (1-based, as sg_op_plan.attempt):
 * call it once the attempt is planned (sg_op_next_attempt, sg_op_hedge)
 * and send what @h then holds with its request - an OpenTelemetry trace's
 * traceparent among them.  An observer's error is kept for
 * sg_op_observer_error(), never more.
 *
 * Returns the number of headers in @h (0 .. SG_OP_HEADERS_MAX), or
 * SG_EINVAL (@op or @h is NULL, @op was never started, or no attempt
 * @attempt was planned).
 */
SG_EXTERN int sg_op_attempt_headers(sg_op *op, uint32_t attempt, sg_op_headers *h);

/** sg_op_headers_name, sg_op_headers_value - header @i (0-based) of @h,
 *  its name lowercased; NUL-terminated, valid until @h is filled again or
 *  freed.  NULL when @h is NULL or @i is past its headers. */
SG_EXTERN const char *sg_op_headers_name(const sg_op_headers *h, size_t i);
SG_EXTERN const char *sg_op_headers_value(const sg_op_headers *h, size_t i);

/* ------------------------------------------------------------------------
 * What a plan's guard_config holds (sg_guard_config is the core's,
 * <streamguard/guard.h>): the clocks a transport arms outside the guard
 * (libcurl's own connect timeout), in ns - 0 when off, -1 for a NULL
 * @cfg - and the caps (0 when off or for NULL).
 * ------------------------------------------------------------------------ */

/** The connect clock of @cfg. */
SG_EXTERN int64_t sg_guard_config_connect_timeout(const sg_guard_config *cfg);
/** The first-item clock of @cfg. */
SG_EXTERN int64_t sg_guard_config_first_item_timeout(const sg_guard_config *cfg);
/** The idle clock of @cfg. */
SG_EXTERN int64_t sg_guard_config_idle_timeout(const sg_guard_config *cfg);
/** The stream-total clock of @cfg. */
SG_EXTERN int64_t sg_guard_config_stream_timeout(const sg_guard_config *cfg);
/** The per-attempt ceiling of @cfg. */
SG_EXTERN int64_t sg_guard_config_attempt_timeout(const sg_guard_config *cfg);
/** The item cap of @cfg. */
SG_EXTERN uint64_t sg_guard_config_max_items(const sg_guard_config *cfg);
/** The byte cap of @cfg. */
SG_EXTERN uint64_t sg_guard_config_max_bytes(const sg_guard_config *cfg);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_UNSTABLE_OP_H */
