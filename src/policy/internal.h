/*
 * Internal helpers of the policy layer (sg__ names: not exported from the
 * shared library, reachable by unit tests through the static one).
 */
#ifndef STREAMGUARD_POLICY_INTERNAL_H
#define STREAMGUARD_POLICY_INTERNAL_H

#include <streamguard/health.h>
#include <streamguard/http.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/unstable/op.h>

#include <stdio.h>

/* Attempt records held inside the sg_op: the first attempt's, which every
 * operation makes; the rest are allocated only when an operation retries
 * or hedges. */
#define SG__OP_INLINE_ATTEMPTS 1
/* Heap blocks of records past the inline one: block k holds records
 * SG__OP_INLINE_ATTEMPTS << k up to twice that (0-based), so 10 blocks
 * (1, 2, 4, ... 512 records) reach SG_OP_MAX_ATTEMPTS and a probe's. */
#define SG__OP_BLOCKS 10
/* Bytes of a raw Retry-After value kept per attempt for the report. */
#define SG__OP_RETRY_AFTER_RAW_MAX 31

/*
 * The definitions of the policy's opaque objects.  Only the policy reads
 * their fields; the layers above use the accessors below.
 */
struct sg_op_options {
    int64_t budget_ns_;
    int64_t floor_ns_;
    int64_t connect_ns_;      /* 0 = off */
    int64_t attempt_ns_;      /* 0 = off */
    int64_t first_item_ns_;   /* 0 = off */
    int64_t idle_ns_;         /* 0 = off */
    int64_t stream_total_ns_; /* 0 = off */
    int64_t backoff_base_ns_;
    int64_t backoff_cap_ns_;
    int64_t max_retry_after_ns_;
    int64_t min_attempt_ns_;
    int64_t deadline_;   /* absolute, when set */
    uint64_t max_items_; /* 0 = off */
    uint64_t max_bytes_; /* 0 = off */
    uint64_t seed_;
    sg_random_fn random_; /* NULL = built-in xorshift */
    void *random_ud_;
    uint64_t statuses_[8]; /* bitmap of status - 100 */
    uint32_t set_;         /* which options were set (SG__OPT_*) */
    uint32_t max_attempts_;
    char method_[SG_OP_METHOD_MAX + 1];
    char *deadline_header_; /* owned; NULL: the default */
    char *idempotency_key_; /* owned; NULL: none */
    char *label_;           /* owned; NULL: none */
    /* the observers, called in this order (sg_op_options_add_observer;
     * sg__observer_at): the first here, the others in an array the
     * options own, allocated at the second; each borrowed */
    struct sg__observer_ref {
        const sg_op_observer *obs;
        void *ud;
    } observer_;
    struct sg__observer_ref *observers_more_; /* SG_OP_MAX_OBSERVERS - 1, or NULL */
    uint32_t n_observers_;
    sg_retry_budget *retry_budget_; /* borrowed */
    int64_t hedge_after_ns_;        /* 0 = off */
    uint32_t max_hedges_;
    uint32_t n_endpoints_;     /* 0 = none */
    int64_t started_at_;       /* when set */
    int64_t probe_end_;        /* when set */
    int64_t probe_connect_ns_; /* 0 = none */
    uint32_t priced_;          /* bit e: endpoint e has a price (prices_[e]) */
    /* owned copies (sg__op_options_copy makes them, _clear frees them) */
    char *target_;
    char *probe_error_;
    char **endpoints_;         /* n_endpoints_ URLs */
    struct sg__price *prices_; /* SG_OP_MAX_ENDPOINTS, or NULL: none set */
    sg_health *health_;        /* borrowed; endpoint health (health_op.c) */
    uint64_t tokens_in_;       /* sg_op_options_set_token_estimate; 0 unknown */
    uint64_t tokens_out_;
    double hedge_q_;         /* sg_op_options_set_hedge_quantile; 0: the default */
    int64_t hedge_floor_ns_; /* with SG__OPT_HEDGE_FLOOR */
    bool hedge_auto_;        /* sg_op_options_set_hedge_auto (ttft_op.c) */
    uint8_t order_;          /* sg_endpoint_order */
    /* What was set, as a number no other version of any options object
     * ever had (process-wide): every setter makes a new one, through
     * sg__opt_touch, so a copy made from one version (a transport's,
     * shared by the operations it makes from it) is never mistaken for
     * another's.  tests/unit/policy_options_version_test.c calls each
     * setter the headers declare. */
    uint64_t version_;
    /* A frozen copy (sg__op_options_hold): read-only, shared by the
     * operations that hold it, freed with the last (sg__op_options_unhold).
     * 0 in every object a caller has. */
    size_t refs_;
};

/* Every setter's first step: @o is about to change (its version is new).
 * Returns false for NULL, which every setter refuses with SG_EINVAL. */
bool sg__opt_touch(sg_op_options *o);
/* @o's version (0 for NULL: the defaults). */
uint64_t sg__op_options_version(const sg_op_options *o);
/* A frozen copy of @o to keep: @o itself, held once more, when it is one
 * already; else a new copy of it (NULL: the defaults), held once.  NULL
 * when out of memory.  Not thread-safe for one frozen copy: the
 * operations that hold it are driven by one thread (an HTTP/2
 * connection's); sg_op_start freezes a copy of its own otherwise. */
const sg_op_options *sg__op_options_hold(const sg_op_options *o);
/* Lets go of a hold; the last frees the copy.  NULL is fine. */
void sg__op_options_unhold(const sg_op_options *o);
/* What a transport keeps of an operation's options until its start:
 * @src held when frozen (nothing of it changes before the start, which
 * holds it again), else a copy of its own (a new object for NULL), which
 * the transport may still set.  0 or SG_ENOMEM. */
int sg__op_options_take(sg_op_options **out, const sg_op_options *src);
/* Frees what sg__op_options_take gave (NULL is fine). */
void sg__op_options_drop(sg_op_options *o);
/* Whether @o is a frozen copy (no setter may change it). */
static inline bool sg__op_options_frozen(const sg_op_options *o) {
    return o != NULL && o->refs_ > 0;
}
/* The defaults (every option at its default), frozen never. */
extern const sg_op_options sg__op_options_defaults;

/* An endpoint's prices per million tokens (sg_op_options_set_price). */
typedef struct sg__price {
    double input, output, cached;
} sg__price;

/* Copies @src into @dst (uninitialised), its strings too: 0 or SG_ENOMEM
 * (then @dst holds nothing to free). */
int sg__op_options_copy(sg_op_options *dst, const sg_op_options *src);
/* Frees what a copy owns and zeroes @o (every option at its default). */
void sg__op_options_clear(sg_op_options *o);

struct sg_op_observer {
    sg_op_intent_cb on_intent;
    sg_op_attempt_cb on_attempt_start;
    sg_op_attempt_cb on_attempt_end;
    sg_op_resolve_cb on_resolve;
    sg_op_start_intent_cb start_intent;
    sg_op_poll_intent_cb poll_intent;
    sg_op_abandon_intent_cb abandon_intent;
    sg_op_headers_cb on_attempt_headers;
};

typedef struct sg__observer_ref sg__observer_ref;

/* Observer @i (0-based, < n_observers_) of @o. */
static inline const sg__observer_ref *sg__observer_at(const sg_op_options *o,
                                                      uint32_t i) {
    return i == 0 ? &o->observer_ : &o->observers_more_[i - 1];
}
/* Whether an observer of @op adds request headers (on_attempt_headers). */
bool sg__op_wants_headers(const sg_op *op);
/* For a transport: attempt @attempt's headers from @op's observers, in
 * *@h (made at the first call of an operation whose observers add any,
 * kept for the next; the caller frees it with sg_op_headers_free).  NULL
 * when none adds headers (or out of memory: the attempt goes without). */
const sg_op_headers *sg__op_headers_for(sg_op *op, uint32_t attempt, sg_op_headers **h);

/* The observer of @o that records its intent off the loop (all three
 * async functions set): the first such, or NULL.  Only it may leave an
 * intent pending; it is asked last (op.c). */
const sg__observer_ref *sg__op_async_observer(const sg_op_options *o);

/* The headers observers add to one attempt's request (on_attempt_headers):
 * at most SG_OP_HEADERS_MAX, their names lowercased and their values in
 * one buffer of SG_OP_HEADERS_BYTES allocated at the first add and kept
 * for the next attempt (sg__op_headers_release frees it).  Zero-initialised:
 * empty.  The strings stay valid until the next sg__op_attempt_headers on
 * the same object. */
struct sg_op_headers {
    struct {
        const char *name;
        const char *value;
    } h[SG_OP_HEADERS_MAX];
    size_t n;
    char *buf;
    size_t used;
};
/* Empties @h and asks every observer of @op for attempt @a's headers (an
 * observer's error is kept as sg_op_observer_error, never more). */
void sg__op_attempt_headers(sg_op *op, const sg_op_attempt *a, sg_op_headers *h);
void sg__op_headers_release(sg_op_headers *h);

/* An observer with static storage, for a layer that provides one (the
 * ledger): its functions in the order of struct sg_op_observer (the ones
 * after them none). */
#define SG__OP_OBSERVER_INIT(intent, attempt_start, attempt_end, resolve, start, poll, \
                             abandon)                                                  \
    { intent, attempt_start, attempt_end, resolve, start, poll, abandon, NULL }

/* One attempt's record: what readers see, and what only the policy and
 * its report read. */
typedef struct sg__rec {
    sg_op_attempt pub;         /* first: a pointer to it is one to the record */
    uint32_t hedge_samples;    /* observations its learned hedge delay saw */
    uint8_t budget_limited;    /* clocks the lease clamped (attribution.c) */
    uint8_t retry_after_flags; /* SG__RA_* */
    uint8_t usage_flags;       /* SG__USAGE_* (usage.c) */
    uint8_t health;            /* SG__HREC_*: what it holds of its endpoint's health */
    uint64_t hseq;             /* its number in its endpoint's request window count */
    const char *profile;       /* the provider profile framing it (static), NULL none */
    /* the raw Retry-After its response gave (NULL: none), allocated
     * then: its length in the first byte, then its bytes (at most
     * SG__OP_RETRY_AFTER_RAW_MAX) and a NUL; NULL when none (most
     * attempts: a record is one per open stream) */
    char *retry_after_raw;
} sg__rec;

static inline const sg__rec *sg__rec_c(const sg_op_attempt *a) {
    return (const sg__rec *)(const void *)a;
}
static inline sg__rec *sg__rec_w(sg_op_attempt *a) {
    return (sg__rec *)(void *)a;
}
/* The raw Retry-After @r kept, its length in *@len. */
static inline const char *sg__rec_retry_after_raw(const sg__rec *r, size_t *len) {
    *len = (unsigned char)r->retry_after_raw[0];
    return r->retry_after_raw + 1;
}

struct sg_op {
    /* the options it was started with, frozen (sg__op_options_hold):
     * NULL before the start (sg__op_opts reads the defaults then) */
    const sg_op_options *opts_;
    sg_budget budget_;
    uint64_t rng_; /* xorshift64* state */
    int64_t retry_at_;
    int64_t finished_at_;
    uint32_t count_; /* attempts planned */
    uint32_t magic_; /* SG__OP_MAGIC while started */
    uint8_t state_;
    uint8_t outcome_;
    uint8_t decision_;
    uint8_t reason_;
    int32_t observer_error_;    /* first failure, 0 none */
    uint32_t ep_next_;          /* the next attempt's endpoint */
    uint32_t running_;          /* attempts planned, no result yet */
    uint32_t winner_;           /* the attempt that delivered first, 0 none */
    uint16_t hedges_throttled_; /* hedges the retry budget denied */
    uint16_t hedges_no_free_;   /* hedges with no endpoint to go to */
    uint32_t decider_;          /* the attempt whose end decided, 0 none */
    uint32_t ep_ra_;            /* bit e: ep_back_[e] is a Retry-After */
    void *intent_;              /* the observer's pending intent */
    /* per endpoint, not before (INT64_MIN: any time): ep_back1_ for one
     * endpoint, else an array allocated at the start, one per endpoint */
    int64_t *ep_back_;
    int64_t ep_back1_;
    /* the allocator of the blocks; NULL = malloc/free */
    void *(*alloc_)(void *ud, void *p, size_t size);
    void *alloc_ud_;
    sg__rec inline_[SG__OP_INLINE_ATTEMPTS];
    /* SG__OP_BLOCKS blocks (NULL = none), the table itself allocated at
     * the first block: an operation that never retries holds none */
    sg__rec **blocks_;
    struct sg__op_health *health_; /* with endpoint health: health_op.c */
    /* the order endpoints are asked in, when not the configured one
     * (ttft_op.c: the fastest starter first) */
    uint8_t ep_order_[SG_OP_MAX_ENDPOINTS];
    bool ordered_;            /* ep_order_ holds it */
    bool order_open_;         /* the first attempt's endpoint is still to choose */
    int32_t order_first_;     /* the endpoint so chosen, -1 none */
    int64_t order_median_ns_; /* and its median first token then, -1 unknown */
};

/* The options @op was started with, or the defaults before its start. */
static inline const sg_op_options *sg__op_opts(const sg_op *op) {
    return op->opts_ != NULL ? op->opts_ : &sg__op_options_defaults;
}

/* How many endpoints @op's attempts go to: its list's, or its one target. */
static inline uint32_t sg__op_n_endpoints(const sg_op *op) {
    const sg_op_options *o = sg__op_opts(op);
    return o->n_endpoints_ > 0 ? o->n_endpoints_ : 1;
}

/* Frees @op's records and copy of its options and leaves it never started
 * (its allocator kept); a pending intent is abandoned first, cancelled. */
void sg__op_reset(sg_op *op);

/* Option bits of sg_op_options.set_: a zero bit means "use the default". */
enum {
    SG__OPT_BUDGET = 1u << 0,
    SG__OPT_FLOOR = 1u << 1,
    SG__OPT_BACKOFF = 1u << 2,
    SG__OPT_MAX_RETRY_AFTER = 1u << 3,
    SG__OPT_MIN_ATTEMPT = 1u << 4,
    SG__OPT_STATUSES = 1u << 5,
    SG__OPT_MAX_ATTEMPTS = 1u << 6,
    SG__OPT_SEED = 1u << 7,
    SG__OPT_IDEMPOTENT = 1u << 8,
    SG__OPT_NO_REJECTION_RETRY = 1u << 9,
    SG__OPT_DEADLINE = 1u << 10,
    SG__OPT_STARTED_AT = 1u << 11,
    SG__OPT_PROBE = 1u << 12,           /* sg_op_options_set_probe: attempt 1 */
    SG__OPT_PROBE_TIMED_OUT = 1u << 13, /* and its connect clock ran out */
    SG__OPT_HEDGE_FLOOR = 1u << 14
};

#define SG__DEFAULT_BUDGET_NS SG_SEC(60)
#define SG__DEFAULT_BACKOFF_BASE_NS SG_MS(100)
#define SG__DEFAULT_BACKOFF_CAP_NS SG_SEC(10)
#define SG__DEFAULT_MAX_RETRY_AFTER_NS SG_SEC(60)
#define SG__DEFAULT_MIN_ATTEMPT_NS SG_MS(10)
#define SG__DEFAULT_MAX_ATTEMPTS 3u
#define SG__DEFAULT_METHOD "POST"
#define SG__DEFAULT_DEADLINE_HEADER "X-Deadline-Ms"

/* Resolved option values (defaults applied). */
int64_t sg__opt_budget(const sg_op_options *o);
int64_t sg__opt_floor(const sg_op_options *o);
int64_t sg__opt_min_attempt(const sg_op_options *o);
int64_t sg__opt_backoff_base(const sg_op_options *o);
int64_t sg__opt_backoff_cap(const sg_op_options *o);
int64_t sg__opt_max_retry_after(const sg_op_options *o);
uint32_t sg__opt_max_attempts(const sg_op_options *o);
const char *sg__opt_method(const sg_op_options *o);
const char *sg__opt_deadline_header(const sg_op_options *o);
bool sg__opt_status_retryable(const sg_op_options *o, int status);

/* The most records @op may hold: max_attempts, and the probe's before
 * them (sg_op_options_set_probe). */
uint32_t sg__op_record_cap(const sg_op *op);
/* Writes the probe's record, attempt 1 (probe.c), at the operation's
 * start; and what it became when the first lease was refused. */
void sg__record_probe(sg_op *op);
void sg__probe_refused(sg_op *op, sg_op_reason reason);

/* Attempt @attempt (1-based, planned) is framed by the provider profile
 * @name - a string that outlives the operation (a built-in profile's
 * name), or NULL for none: the report's "profile" (records.c). */
void sg__op_attempt_set_profile(sg_op *op, uint32_t attempt, const char *name);

/* true for an sg_op that sg_op_start() set up. */
bool sg__op_started(const sg_op *op);

/*
 * Accessors for the layers above (the transports): they read and change
 * an sg_op_options only through these and the public setters, never its
 * fields (docs/design.md, "Layers").
 */
/* The hedge delay (sg_op_options_set_hedging); 0: no hedging. */
int64_t sg__op_options_hedge_after(const sg_op_options *o);
/* How many endpoints sg_op_options_set_endpoints gave; 0: none. */
uint32_t sg__op_options_endpoint_count(const sg_op_options *o);
/* The retry budget operations started with @o take retries from, or NULL. */
sg_retry_budget *sg__op_options_retry_budget(const sg_op_options *o);
/* Whether an observer is set (sg_op_options_set_observer). */
bool sg__op_options_has_observer(const sg_op_options *o);
/* The endpoint health operations started with @o share, or NULL
 * (health_op.c). */
sg_health *sg__op_options_health(const sg_op_options *o);
/* A driver's endpoint health (a managed multi's, an HTTP/2
 * connection's): the caller's, or one of its own made at its first
 * operation and freed with it (health.c).  Zero-initialised: not chosen. */
typedef struct sg__health_slot {
    sg_health *h;
    bool chosen; /* set, made, or none on purpose */
    bool own;
} sg__health_slot;
/* The slot's health: made when none was chosen (NULL when it cannot be:
 * nothing is held back then). */
sg_health *sg__health_slot_get(sg__health_slot *s);
/* The caller's @h (NULL: none) in place of the slot's own. */
void sg__health_slot_set(sg__health_slot *s, sg_health *h);
/* The slot's own health given up (operations holding it keep it). */
void sg__health_slot_free(sg__health_slot *s);
/* Which credential header @name (@len bytes, any case) is, in the order
 * endpoint health prefers them: 0 Authorization, 1 x-api-key, 2 api-key,
 * 3 x-goog-api-key; -1 for any other header (health_op.c). */
int sg__credential_rank(const char *name, size_t len);
/* The options @op was started with - its own copy, which sg_op_start
 * made - or NULL when @op is NULL or was never started. */
const sg_op_options *sg__op_options_of(const sg_op *op);

/* Bits of sg__rec.retry_after_flags: the raw Retry-After was
 * given (retry_after_raw holds it); retry_after_ns came from the
 * retry-after-ms field (the report's retry_after_source). */
enum { SG__RA_FROM_MS = 1u << 1 };

/* An sg_op's state (op->state_). */
enum { SG__OP_READY = 1, SG__OP_RUNNING, SG__OP_BACKOFF, SG__OP_FINISHED, SG__OP_INTENT };

/* Attempt record @i (0-based) of @op, NULL when it has no storage yet
 * (records.c); sg__rec_c / sg__rec_w give the whole sg__rec. */
const sg_op_attempt *sg__record(const sg_op *op, uint32_t i);
sg_op_attempt *sg__record_w(sg_op *op, uint32_t i);
/* Gives record @i storage: 0, or SG_ENOMEM (nothing changes then). */
int sg__reserve(sg_op *op, uint32_t i);
/* Leases and records the next attempt on @endpoint (a hedge when @hedge:
 * then a refusal leaves the operation running its other attempts). */
int sg__plan_attempt(sg_op *op, int64_t now, sg_op_plan *plan, uint32_t endpoint,
                     bool hedge);
/* The minimum attempt of this operation: the option's, never more than
 * its own budget could ever lease above the floor (an absolute deadline
 * may leave less than the budget configured). */
int64_t sg__op_min_attempt(const sg_op *op);
/* The clocks of attempt @a, which leased @granted: each configured in @o,
 * clamped to the grant, and which were clamped - and whether the budget
 * or the caller's attempt timeout set the lease - for the attribution of
 * its end (attribution.c). */
void sg__lease_clocks(sg_op_attempt *a, const sg_op_options *o, int64_t granted);
/* The same for the caller's probe (probe.c): the budget (@budget) or the
 * probe's own connect timeout set its lease. */
void sg__lease_probe(sg_op_attempt *a, bool budget);
/* Who set @a's lease: "budget", "attempt" or "connect" (the reader
 * sg_op_attempt_lease_by() and the report's "lease_by"). */
const char *sg__attempt_lease_by(const sg_op_attempt *a);
/* Tells @op's observer that attempt @a started (@end false) or ended. */
void sg__op_observe_attempt(sg_op *op, const sg_op_attempt *a, bool end);
/* Ends @op at @now, no attempt planned, for the reason of @plan (its
 * outcome when none ran; else the last attempt's). */
void sg__op_end_refused(sg_op *op, int64_t now, const sg_op_plan *plan);
/* Ends @op at @now with @outcome, @decision and @reason; the observer hears
 * of it (on_resolve), or of a pending intent's end (abandon_intent). */
void sg__op_finish(sg_op *op, int64_t now, sg_outcome outcome, sg_op_decision decision,
                   sg_op_reason reason);

/*
 * The allocator of @op's record blocks (a seam for tests that make an
 * allocation fail): @fn(ud, NULL, size) allocates, @fn(ud, p, 0) frees p.
 * NULL restores malloc/free.  Call it before the first block is
 * allocated; sg_op_start keeps it.
 */
void sg__op_set_alloc(sg_op *op, void *(*fn)(void *ud, void *p, size_t size), void *ud);

/* RFC 9110 §9.2.2 idempotent methods, case-sensitive. */
bool sg__method_idempotent(const char *method);

/* The random numbers of the backoff's jitter (backoff.c). */
/* splitmix64 step: a good seed mixer (Vigna). */
uint64_t sg__splitmix64(uint64_t *state);
/* xorshift64*: *state must not be 0. */
uint64_t sg__xorshift64s(uint64_t *state);
/* Uniform in [0, hi] from 64 random bits (hi >= 0). */
int64_t sg__uniform(uint64_t bits, int64_t hi);
/* min(cap, base * 2^exp), saturating. */
int64_t sg__backoff_ceiling(int64_t base, int64_t cap, uint32_t exp);

/* Days since 1970-01-01 of a proleptic Gregorian date (Hinnant). */
int64_t sg__days_from_civil(int64_t y, unsigned m, unsigned d);
/* Days in month @m (1 .. 12) of year @y. */
unsigned sg__days_in_month(int64_t y, unsigned m);
/* 1*DIGIT ["." 1*DIGIT] at @v, in units of @unit ns (a fraction kept to
 * the ns), saturating at SG_DURATION_MAX, into *@out: the bytes it took,
 * 0 (nothing written) when there is no such number (retry_after.c). */
size_t sg__decimal(const char *v, size_t len, int64_t unit, int64_t *out);
/* An RFC 3339 date-time ("2025-08-21T12:40:59Z", a fraction, an offset)
 * into unix milliseconds: 0 or SG_EMALFORMED (retry_after.c). */
int sg__rfc3339_parse(const char *value, size_t len, int64_t *unix_ms);
/* A Go duration ("1s", "6m0s", "2m52.8s", "12ms"; units h m s ms us µs
 * ns) or a bare number of seconds ("64", "1.5"): 0 or SG_EMALFORMED
 * (ratelimit.c). */
int sg__reset_duration_parse(const char *value, size_t len, int64_t *ns);

/*
 * A JSON output sink: writes into a buffer (counting what does not fit) or
 * to a FILE.  pos counts every byte produced, saturating.
 */
typedef struct sg__sink {
    char *buf;
    size_t cap;
    size_t pos;
    FILE *f;
    bool failed;
} sg__sink;

void sg__sink_put(sg__sink *s, const char *p, size_t n);
void sg__sink_puts(sg__sink *s, const char *p);
void sg__sink_i64(sg__sink *s, int64_t v);
void sg__sink_u64(sg__sink *s, uint64_t v);
/* A member's key: "key": (after a comma unless *@first, which it clears). */
void sg__sink_key(sg__sink *s, const char *key, bool *first);
/*
 * Writes @p[0..n) as a JSON string with quotes.  '"' '\\' and control
 * characters are escaped, DEL as \u007f, valid UTF-8 passes through, and
 * every byte of an invalid UTF-8 sequence becomes \ufffd.
 */
void sg__sink_json_string(sg__sink *s, const char *p, size_t n);

/* Endpoint health's half-open probe (health_op.c): whether running
 * attempt @attempt of @op holds it - the transport then tells the
 * policy of the attempt's first item, sg__op_first_item, at @now: the
 * probe has answered, the breaker closes, and the attempts held back go
 * while its stream runs on (its end then counts as any attempt's).
 * Nothing for an attempt that holds no probe, or told twice. */
bool sg__op_probe_out(const sg_op *op, uint32_t attempt);
void sg__op_first_item(sg_op *op, uint32_t attempt, int64_t now);
/* Endpoint health's key of an operation's endpoint @i, for a transport
 * that keeps it for its next operations of the same request
 * (sg__op_set_endpoint_key): 0 with the key and its secret's generation,
 * or SG_ESTATE when the operation has no key for it (no health, not named
 * or not keyed yet). */
int sg__op_endpoint_key(const sg_op *op, uint32_t i, uint64_t *gen, uint8_t key[16]);
/* sg_op_set_endpoint_identity with the key a transport kept: 0, or
 * SG_ESTATE when @gen is not the generation of the operation's health's
 * secret (then nothing changes: identify it anew), or what
 * sg_op_set_endpoint_identity says of @op and @i. */
int sg__op_set_endpoint_key(sg_op *op, uint32_t i, const char *url, uint64_t gen,
                            const uint8_t key[16]);

/* @url as the report names an endpoint: scheme://host:port/path, without
 * userinfo, query or fragment (report.c). */
size_t sg__endpoint_name(const char *url, char *out, size_t cap);
/* A non-negative number with up to 9 decimals, rounded, never in exponent
 * form nor with a locale's comma (usage.c). */
void sg__sink_decimal(sg__sink *s, double v);

/*
 * First-token-aware endpoints (ttft_op.c; docs/design.md, "First-token
 * sketch").
 */
/* sg_op_start: whether the first attempt's endpoint is to be chosen by
 * first tokens. */
void sg__ttft_op_start(sg_op *op);
/* The endpoint @k places after endpoint @e in the order @op asks them
 * (round the list): the configured one, or the fastest starter's. */
uint32_t sg__ep_after(const sg_op *op, uint32_t e, uint32_t k);
/* Attempt @a, planned at @now: the delay of the next hedge beside it,
 * and where it came from. */
void sg__ttft_hedge_delay(sg_op *op, sg_op_attempt *a, int64_t now);
/* The report's "hedge_auto" and "endpoint_order" (top level), and an
 * attempt's "hedge_after_ms", "hedge_after_source", "hedge_samples". */
void sg__ttft_report(sg__sink *s, const sg_op *op, bool *first);
void sg__ttft_report_attempt(sg__sink *s, const sg_op *op, const sg_op_attempt *a,
                             bool *first);

/*
 * Usage and cost (usage.c; docs/report.md, "Usage and cost").
 */
/* Bits of sg__rec.usage_flags. */
enum {
    SG__USAGE_READ = 1u << 0,     /* a profile read the attempt's stream */
    SG__USAGE_IN_OWN = 1u << 1,   /* its input is the provider's figure */
    SG__USAGE_IN_COPIED = 1u << 2 /* its input is another attempt's */
};
/* @u unknown: every figure -1, source NONE. */
void sg__usage_none(sg_op_usage *u);
/* Attempt @a ended with @r: its usage, the stream's figures and where
 * they lack an estimate. */
void sg__usage_attempt(sg_op *op, sg_op_attempt *a, const sg_op_result *r);
/* @op ends: an input reported by one attempt is copied to the others
 * that may have been billed and know none. */
void sg__usage_settle(sg_op *op);
/* Copies what @src's prices hold into @dst (prices_ already copied as a
 * pointer): 0, or SG_ENOMEM (then dst->prices_ is NULL). */
int sg__op_options_copy_prices(sg_op_options *dst, const sg_op_options *src);
/* The report's per-attempt "usage", and its top-level "usage" and
 * "cost" (key and value, after a comma unless *@first). */
void sg__report_attempt_usage(sg__sink *s, const sg_op_attempt *a, bool *first);
void sg__report_usage(sg__sink *s, const sg_op *op, bool *first);

#endif /* STREAMGUARD_POLICY_INTERNAL_H */
