/*
 * streamguard health: what operations sharing it have learned about each
 * endpoint they ask (docs/design.md, "Endpoint health").  One sg_health is
 * shared like the retry budget - by the operations of one managed multi or
 * HTTP/2 connection (each has one of its own unless given one), of one
 * sg-proxy process, or any set a caller picks - and is keyed by endpoint
 * (scheme://host:port/path) and a keyed hash of the credential the request
 * carries (never the secret).  Every attempt's end feeds it; every
 * attempt's plan consults it:
 *
 *   - cooling: a provider named an instant to come back - a 429 or 503
 *     (or 529) with Retry-After / retry-after-ms, or any answer whose
 *     rate-limit headers say no requests (or no tokens) remain until a
 *     reset;
 *   - open: consecutive unhealthy ends (connect failures, 5xx, first-token
 *     timeouts, in-band overloads, stalls) opened its circuit breaker for
 *     a cooldown; half-open after it, while one probe tests it (a
 *     probe that streams has answered at its first item: the libcurl
 *     and HTTP/2 transports close the breaker then, not at its end);
 *   - full: it has max_inflight attempts in flight.
 *
 * An endpoint cooling, open (or half-open with its probe out) or full is
 * never asked: the operation goes at once to its next free endpoint, or
 * waits in its budget until the endpoint frees, or ends at once with
 * nothing sent - outcome refused, reason rate_limited, circuit_open or
 * endpoint_busy (docs/design.md, retry rule 6; docs/report.md).
 *
 *   sg_health *h;
 *   if (sg_health_new(&h) != 0) ...
 *   sg_health_set_breaker_failures(h, 3);
 *   sg_op_options_set_health(o, h);      // operations started with o share it
 *   ...
 *   sg_health_free(h);                    // after the operations are gone
 *
 * Thread-safety: every function on an sg_health is thread-safe (the
 * setters too: an option changed while operations run applies to their
 * next attempt).  Planning and ending attempts take no lock (C11 atomics
 * on the endpoint's entry); an operation's first use of an endpoint and
 * sg_health_foreach take the object's mutex, for a table lookup or walk
 * only.  The options setters below follow policy.h's rule (an options
 * object is written by one thread); the readers of an operation follow
 * op.h's (they read it while no thread changes it).
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_HEALTH_H
#define STREAMGUARD_HEALTH_H

#include <streamguard/core.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Bounds and defaults
 * ------------------------------------------------------------------------ */

/** Most endpoints one sg_health tracks (9,320 bytes each on LP64, 8,840
 *  of them its first-token sketch, made as endpoints come: about 9.1 MiB
 *  for all).  When it is full, the least recently used endpoint that no
 *  operation holds and that is closed and idle (nothing known against it;
 *  a breaker opened by a fact from elsewhere, its time over, is as good as
 *  closed) makes room; when none is, a new endpoint is simply not
 *  tracked - asked as if free, never an error. */
#define SG_HEALTH_MAX_ENTRIES 1024
/** Longest endpoint name kept (scheme://host:port/path), not counting the
 *  NUL; a longer one is cut (and keyed as cut). */
#define SG_HEALTH_ENDPOINT_MAX 255
/** How long an operation waits before it looks again at an endpoint that
 *  is full, or half-open with its probe out - no instant is known when it
 *  frees. */
#define SG_HEALTH_RECHECK_NS SG_MS(10)

#define SG_HEALTH_DEFAULT_BREAKER_FAILURES 5
#define SG_HEALTH_DEFAULT_BREAKER_COOLDOWN SG_SEC(5)
#define SG_HEALTH_DEFAULT_BREAKER_COOLDOWN_MAX SG_SEC(60)

/* ------------------------------------------------------------------------
 * The object
 * ------------------------------------------------------------------------ */

/** sg_health - endpoint health shared by operations.  Opaque, thread-safe. */
typedef struct sg_health sg_health;

/**
 * sg_health_new - an empty table with every option at its default: a
 * breaker that opens after 5 consecutive unhealthy ends for 5 s (doubling
 * on each re-open, up to 60 s), no in-flight limit.  Its credential key
 * (HMAC-SHA-256) is 32 random bytes from the system (getrandom(2)).
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is NULL):
 *   SG_EINVAL  @out is NULL;
 *   SG_ENOMEM  out of memory;
 *   SG_ESYS    the system gave no random bytes (errno says why).
 */
SG_EXTERN int sg_health_new(sg_health **out);

/**
 * sg_health_free - gives up the caller's hold on @h (NULL is fine).  Free
 * it after every operation, multi and connection it was given to is gone;
 * operations that still hold it (a multi's, freed before its operations)
 * keep it alive until they are freed, and it goes with the last.
 */
SG_EXTERN void sg_health_free(sg_health *h);

/**
 * sg_health_set_breaker_failures - how many consecutive unhealthy attempt
 * ends open an endpoint's breaker; 0 turns the breaker off.  Default: 5.
 * Any value is valid.
 *
 * Returns 0, or SG_EINVAL when @h is NULL.
 */
SG_EXTERN int sg_health_set_breaker_failures(sg_health *h, uint32_t n);

/**
 * sg_health_set_breaker_cooldown - how long a breaker stays open the first
 * time; each re-open (its probe failed) doubles it, up to the maximum.
 * Default: 5 s.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @h is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_health_set_breaker_cooldown(sg_health *h, int64_t ns);

/**
 * sg_health_set_breaker_cooldown_max - the cap of the doubling cooldown
 * (a cap below the cooldown caps it too).  Default: 60 s.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @h is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_health_set_breaker_cooldown_max(sg_health *h, int64_t ns);

/**
 * sg_health_set_max_inflight - the most attempts in flight to one endpoint
 * (counted from their plan to their end, hedges included); 0: no limit
 * (the default).  Beyond it an attempt waits in its budget (looking again
 * every SG_HEALTH_RECHECK_NS) or is refused (endpoint_busy).
 *
 * Returns 0, or SG_EINVAL when @h is NULL.
 */
SG_EXTERN int sg_health_set_max_inflight(sg_health *h, uint32_t n);

/**
 * sg_health_state - an endpoint's state at an instant.  A full endpoint
 * (at max_inflight) is in any state, its in-flight count says it.
 */
typedef enum sg_health_state {
    SG_HEALTH_CLOSED = 0, ///< asked freely
    SG_HEALTH_COOLING,    ///< a provider named an instant to come back
    SG_HEALTH_OPEN,       ///< its breaker opened; not asked until the cooldown ends
    SG_HEALTH_HALF_OPEN,  ///< the cooldown ended: one probe at a time
    SG_HEALTH_STATE_COUNT_
} sg_health_state;

/** sg_health_state_name - "closed", "cooling", "open", "half_open"; NULL
 *  out of range.  Thread-safety: pure function. */
SG_EXTERN const char *sg_health_state_name(sg_health_state s);

/** Why an endpoint was not asked: the index of the counters of
 *  sg_health_entry (the reasons rate_limited, circuit_open,
 *  endpoint_busy). */
typedef enum sg_health_why {
    SG_HEALTH_RATE_LIMITED = 0,
    SG_HEALTH_CIRCUIT_OPEN,
    SG_HEALTH_ENDPOINT_BUSY,
    SG_HEALTH_WHY_COUNT_
} sg_health_why;

/**
 * sg_health_entry - one endpoint as sg_health_foreach shows it: read it
 * through the pointer given, during the call only (it may grow at its
 * end).  Never a credential: two entries of one endpoint asked with two
 * credentials differ in key_id only.
 */
typedef struct sg_health_entry {
    const char *endpoint;  ///< scheme://host:port/path
    uint64_t key_id;       ///< the first 8 bytes of its keyed hash (tells entries apart)
    sg_health_state state; ///< at the instant given
    int64_t free_at;       ///< monotonic instant it frees (cooling, open); -1: free now
    uint32_t inflight;     ///< attempts in flight
    uint32_t failures;     ///< consecutive unhealthy ends counted toward the breaker
    uint32_t opens;        ///< times its breaker re-opened in a row (0: closed)
    uint32_t operations;   ///< operations holding it now
    uint64_t refused[SG_HEALTH_WHY_COUNT_]; ///< operations ended with nothing sent
    uint64_t waited[SG_HEALTH_WHY_COUNT_];  ///< waits for it to free
    uint64_t skipped[SG_HEALTH_WHY_COUNT_]; ///< passed over for a free fallback
    /* its first-token sketch at the instant given (sg_op_options_set_hedge_auto) */
    uint32_t first_tokens;         ///< attempts whose first token came, in the window
    uint32_t first_token_censored; ///< attempts timed out or cancelled before one
    int64_t first_token_median_ns; ///< -1: not known (see sg_op_options_set_hedge_auto)
    int64_t first_token_p95_ns;    ///< -1: not known
} sg_health_entry;

/**
 * sg_health_foreach - calls @cb for every endpoint @h tracks, with its
 * state at @now (CLOCK_MONOTONIC ns), under @h's mutex: @cb must not call
 * a function on @h.  It stops at the first non-zero return of @cb.
 *
 * Returns 0, that non-zero return, or SG_EINVAL when @h or @cb is NULL.
 */
SG_EXTERN int sg_health_foreach(sg_health *h, int64_t now,
                                int (*cb)(const sg_health_entry *e, void *user_data),
                                void *user_data);

/* ------------------------------------------------------------------------
 * Sharing with other processes
 *
 * What one sg_health learns can be told to others, and what others learned
 * applied to it: <streamguard/health_pg.h> does both through PostgreSQL
 * (docs/health.md).  The seam is two calls - a listener told of every
 * fact learned here, and sg_health_apply for a fact learned elsewhere -
 * and the credential key, which must be the same in every process for
 * their keys to match.
 * ------------------------------------------------------------------------ */

/** Bytes of an endpoint's key: the keyed hash of its name and credential. */
#define SG_HEALTH_KEY_SIZE 16
/** Fewest and most bytes of a credential key (sg_health_set_credential_key). */
#define SG_HEALTH_CREDENTIAL_KEY_MIN 16
#define SG_HEALTH_CREDENTIAL_KEY_MAX 4096
/** The longest a fact from elsewhere holds an endpoint back, by default
 *  (sg_health_set_shared_max). */
#define SG_HEALTH_DEFAULT_SHARED_MAX SG_SEC(300)
/** A cooling pushed later by less than this is not told again (the
 *  listener heard it start; answers still in flight each move it a
 *  little). */
#define SG_HEALTH_FACT_EXTEND_NS SG_MS(100)

/**
 * sg_health_set_credential_key - the key of the keyed hash (HMAC-SHA-256)
 * that names an endpoint's credential, instead of the random one
 * sg_health_new drew.  Processes that share what they learn need the same
 * key (and only they should have it: with it, a key in a shared table
 * confirms a guessed secret).  Copied; never stored elsewhere, logged or
 * reported.  Call it before any operation uses @h: keys already made stay
 * as they were.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @h or @key is NULL, or @len < SG_HEALTH_CREDENTIAL_KEY_MIN;
 *   SG_ERANGE  @len > SG_HEALTH_CREDENTIAL_KEY_MAX;
 *   SG_ESTATE  @h tracks endpoints already (an operation used it).
 */
SG_EXTERN int sg_health_set_credential_key(sg_health *h, const void *key, size_t len);

/**
 * sg_health_set_shared_max - the longest a fact applied from elsewhere
 * (sg_health_apply) holds an endpoint back, from the instant it is
 * applied: a cooling at most this long, an open breaker at most this and
 * breaker_cooldown_max.  Default: SG_HEALTH_DEFAULT_SHARED_MAX (300 s).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @h is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_health_set_shared_max(sg_health *h, int64_t ns);

/**
 * sg_health_fact - one thing @h learned from an attempt's end, as its
 * listener is told it: read it through the pointer given, during the call
 * only (it may grow at its end).  Never a credential.
 */
typedef struct sg_health_fact {
    const char *endpoint;            ///< scheme://host:port/path
    uint8_t key[SG_HEALTH_KEY_SIZE]; ///< the entry's keyed hash (name and credential)
    sg_health_state state;           ///< COOLING, OPEN, or CLOSED (its breaker closed)
    int64_t at;    ///< the instant it was learned (the operations' clock)
    int64_t until; ///< the instant it frees (COOLING, OPEN); -1 for CLOSED
} sg_health_fact;

/** sg_health_listener - told of a fact learned here.  Called on the thread
 *  of the attempt that taught it, lock-free and on the hot path: it must
 *  return at once (queue the fact, never wait for I/O), and must not call
 *  sg_health_set_listener. */
typedef void (*sg_health_listener)(const sg_health_fact *fact, void *user_data);

/**
 * sg_health_set_listener - @fn (NULL: none, the default) is told of every
 * fact learned from an attempt's end: an endpoint starts cooling (or its
 * cooling is pushed SG_HEALTH_FACT_EXTEND_NS or more later), its breaker
 * opens (or re-opens), its breaker closes.  Never of a fact given by
 * sg_health_apply: what came from elsewhere is not told back.
 *
 * Thread-safe: when it returns, no call of the listener it replaced is
 * running (it waits for those), so that listener's @user_data may go.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @h is NULL;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_health_set_listener(sg_health *h, sg_health_listener fn,
                                     void *user_data);

/**
 * sg_health_apply - a fact learned elsewhere: endpoint @endpoint
 * (scheme://host:port/path) with key @key (its keyed hash, under the same
 * credential key) is, as of @now (the operations' clock):
 *   SG_HEALTH_COOLING  cooling until @until: it never cools less than it
 *                      did, and at most shared_max from @now;
 *   SG_HEALTH_OPEN     open until @until (then half-open: this process
 *                      sends its own probe), at most the smaller of
 *                      shared_max and breaker_cooldown_max from @now;
 *                      nothing when the breaker is off;
 *   SG_HEALTH_CLOSED   closed - only a breaker a fact from elsewhere
 *                      opened: what this process learned itself stays.
 * A fact from elsewhere only ever makes an endpoint less available, for at
 * most the time it names, and is never told to the listener.  An endpoint
 * not yet tracked is made (as an operation's first use makes one); an
 * @until at or before @now changes nothing.  Thread-safe; takes @h's mutex.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @h, @endpoint or @key is NULL; @endpoint is empty, longer
 *                than SG_HEALTH_ENDPOINT_MAX or holds a control byte; @state
 *                is SG_HEALTH_HALF_OPEN or out of range;
 *   SG_ETOOMANY  the table is full of entries it cannot let go (the fact is
 *                not kept, as a new endpoint is then not tracked).
 */
SG_EXTERN int sg_health_apply(sg_health *h, const char *endpoint,
                              const uint8_t key[SG_HEALTH_KEY_SIZE],
                              sg_health_state state, int64_t until, int64_t now);

/* ------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------ */

/**
 * sg_op_options_set_health - operations started with @o share @h.
 * Borrowed: @h must outlive them (sg_health_free).  NULL: none.  The
 * managed multi and the HTTP/2 connection give their operations their own
 * when the operation has none (sg_curl_multi_set_health,
 * sg_h2_conn_set_health).  Default: none.
 *
 * Returns 0, or SG_EINVAL when @o is NULL.
 */
SG_EXTERN int sg_op_options_set_health(sg_op_options *o, sg_health *h);

/**
 * sg_op_options_set_token_estimate - what the request will cost in tokens,
 * when the caller knows it: @input_tokens (the prompt) and @output_tokens
 * (its max_tokens).  An endpoint whose last answer said fewer tokens remain
 * than that - the tokens family (input + output), or input-tokens or
 * output-tokens (Anthropic) - is treated as cooling until that family's
 * reset, for these operations only.  0, 0: unknown (the default: only an
 * exhausted family, 0 remaining, holds an endpoint back).
 *
 * Returns 0, or SG_EINVAL when @o is NULL.
 */
SG_EXTERN int sg_op_options_set_token_estimate(sg_op_options *o, uint64_t input_tokens,
                                               uint64_t output_tokens);

/** What an operation did about an endpoint's health before an attempt. */
typedef enum sg_op_health_action {
    SG_OP_HEALTH_SKIPPED = 0, ///< went at once to a free fallback instead
    SG_OP_HEALTH_WAITED,      ///< waited in its budget for it to free
    SG_OP_HEALTH_REFUSED,     ///< ended with nothing sent
} sg_op_health_action;

/**
 * sg_op_health_event - one endpoint an operation skipped, waited for or
 * was refused by; read through the pointer given (it may grow at its end).
 */
typedef struct sg_op_health_event {
    uint32_t before_attempt;    ///< the attempt planned next (1-based)
    uint32_t endpoint;          ///< 0-based (sg_op_options_set_endpoints)
    sg_op_health_action action; ///<
    sg_op_reason reason;        ///< rate_limited, circuit_open or endpoint_busy
    bool hedge;                 ///< while a hedge was being planned
    int64_t at;                 ///< monotonic instant it was decided
    int64_t free_at;            ///< the instant it frees (a recheck for busy)
    int64_t waited_ns;          ///< WAITED: how long (consecutive waits merged); else 0
} sg_op_health_event;

/** The most events an operation keeps; later ones are counted
 *  (sg_op_health_events_dropped), not kept. */
#define SG_OP_MAX_HEALTH_EVENTS 32

/** sg_op_health_event_count - events kept (0 for NULL, never started, or
 *  no health). */
SG_EXTERN uint32_t sg_op_health_event_count(const sg_op *op);

/** sg_op_health_events_dropped - events past SG_OP_MAX_HEALTH_EVENTS. */
SG_EXTERN uint32_t sg_op_health_events_dropped(const sg_op *op);

/** sg_op_health_event_at - event @i (0-based) inside @op, valid while @op
 *  is; NULL when @i >= sg_op_health_event_count(@op). */
SG_EXTERN const sg_op_health_event *sg_op_health_event_at(const sg_op *op, uint32_t i);

/**
 * sg_op_endpoint_free_at - for an operation that endpoint health ended
 * (reason rate_limited, circuit_open or endpoint_busy): the monotonic
 * instant its endpoint frees (for endpoint_busy and a half-open probe out,
 * when it would look again) - what a proxy turns into Retry-After.  -1
 * otherwise, and for NULL or an operation never started.
 */
SG_EXTERN int64_t sg_op_endpoint_free_at(const sg_op *op);

/* ------------------------------------------------------------------------
 * First tokens: the hedge delay learned, endpoints ordered by how fast
 * they start (docs/design.md, "First-token sketch")
 * ------------------------------------------------------------------------ */

/** The default of sg_health_set_first_token_window. */
#define SG_HEALTH_DEFAULT_FIRST_TOKEN_WINDOW SG_SEC(30)
/** The default of sg_op_options_set_hedge_quantile. */
#define SG_HEDGE_DEFAULT_QUANTILE 0.95
/** The default of sg_op_options_set_hedge_floor. */
#define SG_HEDGE_DEFAULT_FLOOR SG_MS(10)

/**
 * sg_health_set_first_token_window - how long each endpoint's first-token
 * sketch remembers: it keeps two halves of @ns, so an attempt's time to
 * first token counts from when the attempt ends until between @ns / 2 and
 * @ns later - an endpoint that got faster (or slower) is seen so within
 * @ns.  Default: 30 s (SG_HEALTH_DEFAULT_FIRST_TOKEN_WINDOW).  Changed
 * while operations run, what the sketches hold is forgotten at their next
 * use.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @h is NULL or @ns < 2;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_health_set_first_token_window(sg_health *h, int64_t ns);

/**
 * sg_first_token_min_samples - how many observations (first tokens and
 * censored attempts) an endpoint's window must hold before its
 * @q-quantile is used: 5 / (1 - @q) rounded - about five expected beyond
 * the quantile - and at least 10.  For 0.95: 100 (the 95 % confidence
 * interval of an empirical p95 of 100 is about p91 .. p99); the median:
 * 10; 0.99: 500.  0 for @q outside (0, 1).  Thread-safety: pure function.
 */
SG_EXTERN uint32_t sg_first_token_min_samples(double q);

/**
 * sg_op_options_set_hedge_auto - the hedge delay learned from the
 * endpoint's own first tokens (with hedging on, sg_op_options_set_hedging):
 * when an attempt is planned, the next hedge beside it waits the
 * quantile (sg_op_options_set_hedge_quantile) of its endpoint's recent
 * times to first token - by which at least that fraction of them came,
 * at most 1/16 later than the exact quantile - in the operations'
 * endpoint health
 * (sg_op_options_set_health, or the multi's or connection's), clamped
 * between the floor (sg_op_options_set_hedge_floor) and the attempt's
 * lease.  Until the endpoint's window holds sg_first_token_min_samples()
 * observations - or when the quantile is beyond what timed out, or there
 * is no health, or the endpoint is not tracked - the fixed delay of
 * sg_op_options_set_hedging is used.  Each attempt's record says the
 * delay and where it came from (hedge_after_ns, hedge_source; the
 * report's hedge_after_ms, hedge_after_source).  Default: false (the
 * fixed delay).
 *
 * Returns 0, or SG_EINVAL when @o is NULL.
 */
SG_EXTERN int sg_op_options_set_hedge_auto(sg_op_options *o, bool learned);

/**
 * sg_op_options_set_hedge_quantile - the quantile of first tokens a
 * learned hedge delay waits ("The Tail at Scale": after the 95th
 * percentile, about 5 % more requests).  Default: 0.95.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL;
 *   SG_ERANGE  @q not in [0.5, 0.999] (or not a number).
 */
SG_EXTERN int sg_op_options_set_hedge_quantile(sg_op_options *o, double q);

/**
 * sg_op_options_set_hedge_floor - the shortest learned hedge delay: a
 * quantile below it is raised to it.  Default: 10 ms (below, the
 * sketch's resolution and the transports' timers make the delay noise,
 * and a near-zero quantile would double the requests).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 */
SG_EXTERN int sg_op_options_set_hedge_floor(sg_op_options *o, int64_t ns);

/** The order in which an operation asks its endpoints. */
typedef enum sg_endpoint_order {
    SG_ENDPOINT_ORDER_CONFIGURED = 0, ///< "configured": as given
    SG_ENDPOINT_ORDER_FIRST_TOKEN,    ///< "first_token": the fastest starter first
    SG_ENDPOINT_ORDER_COUNT_
} sg_endpoint_order;

/** sg_endpoint_order_name - "configured", "first_token"; NULL out of
 *  range.  Thread-safety: pure function. */
SG_EXTERN const char *sg_endpoint_order_name(sg_endpoint_order order);

/**
 * sg_op_options_set_endpoint_order - with SG_ENDPOINT_ORDER_FIRST_TOKEN,
 * an operation's first attempt goes to the endpoint with the lowest
 * recent median first token (its window holding at least
 * sg_first_token_min_samples(0.5) observations) among those free to be
 * asked (not cooling, open or full); endpoints with none known come after
 * those with one, ties in the configured order.  Its fallbacks and hedges
 * then follow the configured order without it.  Without endpoint health
 * there is nothing to order by: the configured order.  The report says
 * what was chosen (endpoint_order).  Default: SG_ENDPOINT_ORDER_CONFIGURED.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @o is NULL;
 *   SG_ERANGE  @order is not an sg_endpoint_order.
 */
SG_EXTERN int sg_op_options_set_endpoint_order(sg_op_options *o, sg_endpoint_order order);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_HEALTH_H */
