/*
 * streamguard policy: how one operation may spend its budget - the budget,
 * the clocks of each attempt, retries (safety, backoff, Retry-After),
 * fallback endpoints, hedging, a retry budget shared by many operations,
 * and the observer that records what it does.  What a caller configures,
 * on any transport:
 *
 *   sg_op_options *o;
 *   if (sg_op_options_new(&o) != 0) ...
 *   sg_op_options_set_budget(o, SG_SEC(30));
 *   sg_op_options_set_first_item_timeout(o, SG_SEC(10));
 *   sg_op_options_set_idle_timeout(o, SG_SEC(5));
 *   sg_op_options_set_idempotency_key(o, key);  // a POST safe to retry
 *   ... sg_curl_op_new(&op, easy, o, ...) or sg_h2_op_new(&op, conn, o, ...)
 *   sg_op_options_free(o);                        // the operation has a copy
 *
 * An sg_op_options is opaque: made by sg_op_options_new (every option at
 * its documented default), changed by one setter per option - each
 * validates its value at once, and one that fails leaves the object as it
 * was - and freed by sg_op_options_free.  Ownership (docs/design.md,
 * "Ownership"): values given to a setter are copied (numbers, strings,
 * URL lists); handles (an observer, a retry budget, a random source's
 * user_data) are borrowed and must outlive every operation started with
 * the options.  Whatever takes an sg_op_options (an operation's _new,
 * sg_op_start) copies it: it may be changed or freed right after.
 *
 * Retries - attempts, backoff and its jitter, Retry-After, the statuses
 * retried, hedging and the retry budget - are in <streamguard/retry.h>,
 * which this file includes.  Reading an operation and its report:
 * <streamguard/op.h>.  Driving one from a transport of your own:
 * <streamguard/unstable/op.h>.
 *
 * Thread-safety: an sg_op_options may be read by several threads at once
 * (operations made from it on any thread), never written while read; each
 * setter touches only its object.  A retry budget is thread-safe.
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_POLICY_H
#define STREAMGUARD_POLICY_H

#include <streamguard/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Bounds
 * ------------------------------------------------------------------------ */

/** Most attempts one operation may make (and records); gRPC caps at 5.
 *  With a budget and backoff the budget is the real bound: this only keeps
 *  an operation's records finite (docs/api.md,
 *  "Memory of an operation"). */
#define SG_OP_MAX_ATTEMPTS 1000
/** Longest method token, not counting the NUL. */
#define SG_OP_METHOD_MAX 31
/** Longest deadline header name, not counting the NUL. */
#define SG_OP_HEADER_NAME_MAX 63
/** Longest idempotency key, not counting the NUL. */
#define SG_OP_IDEMPOTENCY_KEY_MAX 127
/** Longest label, not counting the NUL. */
#define SG_OP_LABEL_MAX 63
/** The most hedges in flight beside an operation's attempt. */
#define SG_OP_MAX_HEDGES 4
/** The most endpoints an operation falls back across. */
#define SG_OP_MAX_ENDPOINTS 16

/* ------------------------------------------------------------------------
 * Options: one setter per option, each documenting its default.
 * ------------------------------------------------------------------------ */

/** sg_op_options - an operation's configuration.  Opaque. */
typedef struct sg_op_options sg_op_options;

/**
 * sg_op_options_new - options with every option at its default.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is NULL):
 *   SG_EINVAL  @out is NULL;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_op_options_new(sg_op_options **out);

/**
 * sg_op_options_dup - a copy of @src (its strings copied, its handles
 * shared), e.g. to give each route of a proxy its own policy from a common
 * one.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is NULL):
 *   SG_EINVAL  @out or @src is NULL;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_op_options_dup(sg_op_options **out, const sg_op_options *src);

/** sg_op_options_free - frees @o (NULL is fine).  Operations made from it
 *  keep their own copy. */
SG_EXTERN void sg_op_options_free(sg_op_options *o);

/**
 * sg_op_options_set_budget - the operation's total budget: every attempt,
 * every backoff sleep is leased from it.  Default: 60 s.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
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
 *   copied.  Do not put credentials in it.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @connect_ns < 0;
 *   SG_ERANGE  @connect_ns > SG_DURATION_MAX;
 *   SG_ENOMEM  no memory for the copy of @error (@o is unchanged).
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
 */
SG_EXTERN int sg_op_options_set_floor(sg_op_options *o, int64_t ns);

/*
 * The clocks of each attempt (docs/design.md, "Clock semantics"), named
 * after the outcome each produces.  For each: @ns is 1 .. SG_DURATION_MAX
 * nanoseconds, or 0 to turn the clock off (the default).  Each attempt
 * gets min(@ns, its granted lease); when the lease is the shorter and the
 * clock fires at the lease's end, the attempt is recorded as
 * budget_exhausted (docs/design.md, "Who set the limit").  Each returns 0
 * if it succeeds, or one of the following negative error codes (and then
 * @o is unchanged):
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 */

/** sg_op_options_set_connect_timeout - from the attempt's start until it
 *  is connected (the phase leaves "connect"): connect_timeout. */
SG_EXTERN int sg_op_options_set_connect_timeout(sg_op_options *o, int64_t ns);

/** sg_op_options_set_first_item_timeout - from the attempt's start to its
 *  first item (time to first token, under a profile): first_item_timeout. */
SG_EXTERN int sg_op_options_set_first_item_timeout(sg_op_options *o, int64_t ns);

/** sg_op_options_set_idle_timeout - from each item to the next, starting
 *  at the first item; keepalives never reset it: idle_timeout. */
SG_EXTERN int sg_op_options_set_idle_timeout(sg_op_options *o, int64_t ns);

/** sg_op_options_set_stream_timeout - from the attempt's start to the end
 *  of its stream: stream_timeout. */
SG_EXTERN int sg_op_options_set_stream_timeout(sg_op_options *o, int64_t ns);

/** sg_op_options_set_attempt_timeout - the per-attempt ceiling, what each
 *  attempt asks to lease (off: all that may be leased, the remaining
 *  budget less the floor); each retry gets a fresh one: attempt_timeout. */
SG_EXTERN int sg_op_options_set_attempt_timeout(sg_op_options *o, int64_t ns);

/**
 * sg_op_options_set_max_items - the runaway item cap handed to every
 * attempt's guard (see sg_guard_config_set_max_items).  Default: 0 (off).
 *
 * @n: the cap; 0 turns it off.  Any value is valid.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
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
 */
SG_EXTERN int sg_op_options_set_max_bytes(sg_op_options *o, uint64_t n);

/**
 * sg_op_options_set_method - the request method, a token (RFC 9110 §5.6.2)
 * of at most SG_OP_METHOD_MAX characters, compared case-sensitively.  GET,
 * HEAD, OPTIONS, TRACE, PUT and DELETE are idempotent (RFC 9110 §9.2.2).
 * Default: "POST" (AI streams are POSTs, and an unknown method is unsafe).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o or @method is NULL, @method is empty or not a token;
 *   SG_ERANGE  @method is longer than SG_OP_METHOD_MAX.
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
 *   SG_ERANGE  @key is longer than SG_OP_IDEMPOTENCY_KEY_MAX;
 *   SG_ENOMEM  out of memory (the key before stays).
 */
SG_EXTERN int sg_op_options_set_idempotency_key(sg_op_options *o, const char *key);

/**
 * sg_op_options_set_idempotent - the caller declares the request idempotent
 * whatever its method.  Default: false.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 */
SG_EXTERN int sg_op_options_set_idempotent(sg_op_options *o, bool idempotent);

/**
 * sg_op_options_set_deadline_header - the name of the outbound header that
 * carries plan.deadline_ms; a token of at most SG_OP_HEADER_NAME_MAX
 * characters.  Default: "X-Deadline-Ms".
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o or @name is NULL, @name is empty or not a token;
 *   SG_ERANGE  @name is longer than SG_OP_HEADER_NAME_MAX;
 *   SG_ENOMEM  out of memory (the name before stays).
 */
SG_EXTERN int sg_op_options_set_deadline_header(sg_op_options *o, const char *name);

/**
 * sg_op_options_set_label - a free-form label for the report (an endpoint,
 * a model name).  Any bytes up to SG_OP_LABEL_MAX; the report escapes them.
 * Do not put secrets here.  NULL (or "") removes it.  Default: none.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL;
 *   SG_ERANGE  @label is longer than SG_OP_LABEL_MAX;
 *   SG_ENOMEM  out of memory (the label before stays).
 */
SG_EXTERN int sg_op_options_set_label(sg_op_options *o, const char *label);

/**
 * sg_op_options_set_target - what the operation is about: the URL (or any
 * name) of its request, as an observer's intent record shows it.  Never
 * sent by the policy; the transports do not read it to decide where to
 * connect.  Do not put credentials in it.  Copied.  NULL removes it.
 * Default: none (the HTTP/2 transport fills in scheme://authority/path
 * when it is unset).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL;
 *   SG_ENOMEM  no memory for the copy (@o is unchanged).
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
 * @urls: @n URLs, copied; @n in 1 .. SG_OP_MAX_ENDPOINTS.  NULL and 0
 *   remove them (one endpoint: the target).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL, a URL is NULL, or @urls is NULL with @n > 0;
 *   SG_ERANGE  @n > SG_OP_MAX_ENDPOINTS;
 *   SG_ENOMEM  no memory for the copies (@o is unchanged).
 */
SG_EXTERN int sg_op_options_set_endpoints(sg_op_options *o, const char *const *urls,
                                          uint32_t n);

/**
 * sg_op_observer - what the policy calls as an operation forms its intent,
 * starts and ends each attempt, and resolves (<streamguard/op.h>).
 */
typedef struct sg_op_observer sg_op_observer;

/** The most observers one operation has (sg_op_options_add_observer). */
#define SG_OP_MAX_OBSERVERS 4

/**
 * sg_op_options_set_observer - the one observer of every operation started
 * with @o, called with @user_data (<streamguard/op.h>): it replaces every
 * observer set or added before.  Borrowed: @obs and what @user_data
 * points to must outlive those operations.  NULL removes them all.
 * Default: none.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 */
SG_EXTERN int sg_op_options_set_observer(sg_op_options *o, const sg_op_observer *obs,
                                         void *user_data);

/**
 * sg_op_options_add_observer - one more observer of every operation
 * started with @o, after those set or added before: a caller's own
 * observer, the intent ledger and an OpenTelemetry trace
 * (<streamguard/otel_trace.h>) side by side.  Borrowed, as with
 * sg_op_options_set_observer.
 *
 * Each callback runs for every observer in the order they were added,
 * with the observer's own @user_data; one observer's error never keeps
 * the others from being called (the first error is sg_op_observer_error).
 * Intents: the observers that record at once (on_intent) are asked first,
 * in order - the first to refuse ends the start, and those after it are
 * not asked - then the one that records off the loop
 * (sg_op_observer_set_async_intent; at most one per operation), which
 * alone may leave the intent pending, and alone gets poll_intent and
 * abandon_intent.  The others hear the end of an operation whose intent
 * never landed through on_resolve.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (then @o is unchanged):
 *   SG_EINVAL  @o or @obs is NULL, or @obs records intents off the loop
 *              and an observer of @o already does;
 *   SG_ERANGE  @o has SG_OP_MAX_OBSERVERS observers already;
 *   SG_ENOMEM  no memory for the room of the observers after the first.
 */
SG_EXTERN int sg_op_options_add_observer(sg_op_options *o, const sg_op_observer *obs,
                                         void *user_data);

/**
 * sg_op_options_clear_observers - @o has no observer any more (as
 * sg_op_options_set_observer with NULL).
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @o is NULL.
 */
SG_EXTERN int sg_op_options_clear_observers(sg_op_options *o);

/**
 * sg_op_options_set_price - the prices of endpoint @endpoint (0-based, as
 * sg_op_options_set_endpoints orders them; 0 without endpoints), per
 * million tokens of input, output and cached input (@cached_input_per_mtok
 * below 0: the input price), in whatever unit the caller uses - the
 * report names no currency.  With a price set, the report has a "cost"
 * and sg_op_cost() answers (docs/report.md, "Usage and cost"); an
 * endpoint without one adds nothing to it.  Default: no price, no cost.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL, or a price is negative (the cached one aside)
 *              or not a finite number;
 *   SG_ERANGE  @endpoint >= SG_OP_MAX_ENDPOINTS;
 *   SG_ENOMEM  no memory for the prices (@o is unchanged).
 */
SG_EXTERN int sg_op_options_set_price(sg_op_options *o, uint32_t endpoint,
                                      double input_per_mtok, double output_per_mtok,
                                      double cached_input_per_mtok);

/**
 * sg_op_options_repeatable - whether a request of operations started with
 * @o is safe to repeat (docs/design.md, retry rule 1): an idempotent method
 * (RFC 9110 §9.2.2), an idempotency key, or declared idempotent.  A retry
 * of a request that may have been sent, and every hedge, needs it.
 * Returns false when @o is NULL.
 */
SG_EXTERN bool sg_op_options_repeatable(const sg_op_options *o);

/**
 * sg_op_options_method - the method operations started with @o will use:
 * the one set with sg_op_options_set_method, else "POST".
 *
 * Returns a string inside @o (valid while @o is unchanged), or NULL when
 * @o is NULL.
 */
SG_EXTERN const char *sg_op_options_method(const sg_op_options *o);

/**
 * sg_op_options_target - the target set with sg_op_options_set_target.
 *
 * Returns the copy inside @o (valid while @o is unchanged), or NULL when none is set or
 * @o is NULL.
 */
SG_EXTERN const char *sg_op_options_target(const sg_op_options *o);

#ifdef __cplusplus
}
#endif

/* Retries - attempts, backoff, Retry-After, hedging, the retry budget -
 * in a header of their own. */
#include <streamguard/retry.h>

#endif /* STREAMGUARD_POLICY_H */
