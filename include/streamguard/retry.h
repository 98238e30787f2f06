/*
 * streamguard retry: what an operation does after an attempt fails, and
 * what bounds its retries - how many attempts it may make, the backoff
 * between them (capped exponential with full jitter, and the jitter's
 * random source), how long a Retry-After it honours, which HTTP statuses
 * and rejections are retried, the shortest attempt worth starting,
 * first-token hedging, and the retry budget (sg_retry_budget) that
 * throttles retries across many operations (docs/design.md, "Retry
 * rules").  Setters of an sg_op_options, as those of
 * <streamguard/policy.h>, which includes this file.
 *
 * Thread-safety: as the policy's - an sg_op_options may be read by several
 * threads at once, never written while read; each setter touches only its
 * object.  A retry budget is thread-safe (lock-free).
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_RETRY_H
#define STREAMGUARD_RETRY_H

#include <streamguard/core.h>
#include <streamguard/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Retries: how many attempts, how far apart, after which failures
 * ------------------------------------------------------------------------ */

/**
 * sg_random_fn - a random source for backoff jitter (see
 * sg_op_options_set_random).  Called with the user_data given there, on
 * the thread that calls sg_op_attempt_done.
 *
 * Returns 64 uniformly distributed bits per call.
 */
typedef uint64_t (*sg_random_fn)(void *user_data);

/**
 * sg_op_options_set_max_attempts - how many attempts an operation may
 * make, the first included.  Default: 3.
 *
 * @n: 1 .. SG_OP_MAX_ATTEMPTS (1 = never retry).  Every attempt is
 *   recorded: past the second an operation that retries holds up to
 *   (@n - 2) records of heap (docs/api.md, "Memory of an operation").  A
 *   budget with backoff bounds the retries in time; @n bounds them in
 *   count and memory.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @n == 0;
 *   SG_ERANGE  @n > SG_OP_MAX_ATTEMPTS.
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
 */
SG_EXTERN int sg_op_options_set_retry_rejections(sg_op_options *o, bool enable);

/**
 * sg_op_options_set_random - the random source for jitter; NULL restores the
 * built-in xorshift64* generator held inside each operation.  @user_data
 * is borrowed (handed to @fn).  Default: built-in.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 */
SG_EXTERN int sg_op_options_set_random(sg_op_options *o, sg_random_fn fn,
                                       void *user_data);

/**
 * sg_op_options_set_seed - seeds the built-in generator, for reproducible
 * jitter.  Default: derived from the start instant and the operation's address,
 * so that operations started together do not jitter in lockstep.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL.
 */
SG_EXTERN int sg_op_options_set_seed(sg_op_options *o, uint64_t seed);

/* ------------------------------------------------------------------------
 * Hedging: a second attempt beside a slow first one
 * ------------------------------------------------------------------------ */

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
 */
SG_EXTERN int sg_op_options_set_hedging(sg_op_options *o, int64_t after_ns,
                                        uint32_t max_hedges);

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
 */
SG_EXTERN int sg_op_options_set_retry_budget(sg_op_options *o, sg_retry_budget *b);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_RETRY_H */
