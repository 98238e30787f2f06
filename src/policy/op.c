/*
 * The operation state machine: attempts leased from one budget, retry
 * safety, backoff and Retry-After.  No clock reads, no global state:
 * everything lives in the caller's sg_op.  The only allocation is the
 * blocks of attempt records past the inline ones (the records section).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SG__OP_MAGIC 0x5347504fu /* "SGPO" */

/* Bits of sg__rec.budget_limited: clocks the lease clamped.
 * SG__CLAMP_ATTEMPT also says who set the lease: set, the budget did (the
 * attempt timeout is off or longer than what remained); clear, the
 * caller's attempt timeout did. */
enum {
    SG__CLAMP_CONNECT = 1u << 0,
    SG__CLAMP_ATTEMPT = 1u << 1,
    SG__CLAMP_FIRST_ITEM = 1u << 2,
    SG__CLAMP_IDLE = 1u << 3,
    SG__CLAMP_STREAM = 1u << 4
};

/* ------------------------------------------------------------------ names */

static const char *const sg__decision_names[] = {
#define SG__NAME(name, text) text,
    SG_OP_DECISION_MAP(SG__NAME)
#undef SG__NAME
};

static const char *const sg__reason_names[] = {
#define SG__NAME(name, text) text,
    SG_OP_REASON_MAP(SG__NAME)
#undef SG__NAME
};

const char *sg_op_decision_name(sg_op_decision d) {
    if ((unsigned)d >= (unsigned)SG_OP_DECISION_COUNT_) {
        return NULL;
    }
    return sg__decision_names[d];
}

const char *sg_op_reason_name(sg_op_reason r) {
    if ((unsigned)r >= (unsigned)SG_OP_REASON_COUNT_) {
        return NULL;
    }
    return sg__reason_names[r];
}

/* ------------------------------------------------------------------ random */

uint64_t sg__splitmix64(uint64_t *state) {
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

uint64_t sg__xorshift64s(uint64_t *state) {
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * UINT64_C(0x2545f4914f6cdd1d);
}

int64_t sg__uniform(uint64_t bits, int64_t hi) {
    if (hi <= 0) {
        return 0;
    }
    if (hi == INT64_MAX) {
        return (int64_t)(bits >> 1);
    }
    /* The modulo bias is below 2^-30 for any hi <= SG_DURATION_MAX. */
    return (int64_t)(bits % ((uint64_t)hi + 1u));
}

int64_t sg__backoff_ceiling(int64_t base, int64_t cap, uint32_t exp) {
    int64_t v = base;
    for (uint32_t i = 0; i < exp; i++) {
        if (v > cap / 2) {
            return cap;
        }
        v *= 2;
    }
    return v < cap ? v : cap;
}

/* ------------------------------------------------------------------ the op */

bool sg__op_started(const sg_op *op) {
    return op != NULL && op->magic_ == SG__OP_MAGIC;
}

static int sg__op_begin(sg_op *op, const sg_op_options *opts, int64_t now, int *fd) {
    if (fd != NULL) {
        *fd = -1;
    }
    if (op == NULL) {
        return SG_EINVAL;
    }
    static const sg_op_options defaults; /* zero: every option at its default */
    if (opts == NULL) {
        opts = &defaults;
    }
    if (opts->hedge_after_ns_ > 0 && !sg_op_options_repeatable(opts)) {
        return SG_EUNSAFE; /* a hedge repeats the request: it must be safe to */
    }
    const int64_t budget = sg__opt_budget(opts);
    const int64_t floor_ns = sg__opt_floor(opts);
    /* A floor at or above the budget is not a configuration error: the
     * first lease is refused and the operation reports "refused" without
     * dialling out (an inbound deadline may leave less than the floor). */
    sg__op_reset(op); /* started before: started anew */
    int rc = sg__op_options_copy(&op->opts_, opts);
    if (rc != 0) {
        return rc;
    }
    /* the budget's own start: the caller's time before the operation is
     * its too (sg_op_options_set_started_at) */
    const int64_t t0 = (opts->set_ & SG__OPT_STARTED_AT) && opts->started_at_ < now
                           ? opts->started_at_
                           : now;
    if (opts->set_ & SG__OPT_DEADLINE) {
        /* min(start + budget, the caller's absolute deadline); a deadline
         * already passed leaves nothing and the first lease is refused. */
        int64_t end = sg_time_min(sg_time_add(t0, budget), opts->deadline_);
        rc = sg_budget_start_until(&op->budget_, t0, end, floor_ns);
    } else {
        rc = sg_budget_start(&op->budget_, t0, budget, floor_ns);
    }
    if (rc != 0) {
        sg__op_reset(op);
        return rc;
    }
    /* Without an explicit seed, mix the start instant with the object's
     * address: operations started together must not jitter in lockstep,
     * and there is no global state to draw entropy from. */
    uint64_t seed = (opts->set_ & SG__OPT_SEED) ? opts->seed_
                                                : (uint64_t)now ^ (uint64_t)(uintptr_t)op;
    op->rng_ = sg__splitmix64(&seed);
    if (op->rng_ == 0) {
        op->rng_ = UINT64_C(0x9e3779b97f4a7c15);
    }
    op->retry_at_ = now;
    op->finished_at_ = -1;
    for (uint32_t e = 0; e < SG_OP_MAX_ENDPOINTS; e++) {
        op->ep_back_[e] = INT64_MIN; /* any time: a clock may read below 0 */
    }
    op->state_ = SG__OP_READY;
    op->magic_ = SG__OP_MAGIC;
    if (opts->set_ & SG__OPT_PROBE) {
        sg__record_probe(op); /* before the intent: nothing was sent */
    }
    const sg_op_observer *obs = opts->observer_;
    bool async = fd != NULL && obs != NULL && obs->start_intent != NULL &&
                 obs->poll_intent != NULL && obs->abandon_intent != NULL;
    if (obs != NULL && (async || obs->on_intent != NULL)) {
        /* Before any attempt can be planned: an observer that refuses
         * (a ledger holding the same unresolved key) means nothing is
         * ever sent. */
        const char *label = opts->label_[0] != '\0' ? opts->label_ : NULL;
        sg_op_intent intent = {sg__opt_method(opts), opts->target_,
                               sg_op_idempotency_key(op), label};
        sg_op_intent_wait wait = {-1, NULL};
        int orc = async ? obs->start_intent(op, &intent, opts->observer_ud_, &wait)
                        : obs->on_intent(op, &intent, opts->observer_ud_);
        if (async && orc == SG_EINPROGRESS) {
            op->state_ = SG__OP_INTENT;
            op->intent_ = wait.handle;
            *fd = wait.fd;
            return SG_EINPROGRESS;
        }
        if (orc != 0) {
            sg__op_reset(op);
            return orc < 0 ? orc : SG_EREFUSED;
        }
    }
    return 0;
}

int sg_op_start(sg_op *op, const sg_op_options *opts, int64_t now) {
    return sg__op_begin(op, opts, now, NULL);
}

int sg_op_start_async(sg_op *op, const sg_op_options *opts, int64_t now, int *fd) {
    if (fd == NULL) {
        return SG_EINVAL;
    }
    return sg__op_begin(op, opts, now, fd);
}

bool sg_op_intent_pending(const sg_op *op) {
    return sg__op_started(op) && op->state_ == SG__OP_INTENT;
}

int64_t sg_op_intent_deadline(const sg_op *op) {
    if (!sg__op_started(op)) {
        return -1;
    }
    if (op->state_ != SG__OP_INTENT) {
        return SG_TIME_NEVER;
    }
    return sg_budget_deadline(&op->budget_) - sg_budget_floor(&op->budget_);
}

const sg_budget *sg_op_budget(const sg_op *op) {
    return sg__op_started(op) ? &op->budget_ : NULL;
}

const char *sg_op_idempotency_key(const sg_op *op) {
    if (!sg__op_started(op) || op->opts_.idempotency_key_[0] == '\0') {
        return NULL;
    }
    return op->opts_.idempotency_key_;
}

const char *sg_op_method(const sg_op *op) {
    if (!sg__op_started(op)) {
        return NULL;
    }
    return sg__opt_method(&op->opts_);
}

/* An observer's failure never changes the operation; the first is kept. */
static void sg__observed(sg_op *op, int rc) {
    if (rc < 0 && op->observer_error_ == 0) {
        op->observer_error_ = rc;
    }
}

static void sg__observe_attempt(sg_op *op, const sg_op_attempt *a, bool end) {
    const sg_op_observer *obs = op->opts_.observer_;
    if (obs == NULL) {
        return;
    }
    int (*fn)(const sg_op *, const sg_op_attempt *, void *) =
        end ? obs->on_attempt_end : obs->on_attempt_start;
    if (fn != NULL) {
        sg__observed(op, fn(op, a, op->opts_.observer_ud_));
    }
}

static void sg__op_finish(sg_op *op, int64_t now, sg_outcome outcome,
                          sg_op_decision decision, sg_op_reason reason) {
    bool pending = op->state_ == SG__OP_INTENT;
    op->state_ = SG__OP_FINISHED;
    op->outcome_ = (uint8_t)outcome;
    op->decision_ = (uint8_t)decision;
    op->reason_ = (uint8_t)reason;
    op->finished_at_ = now;
    const sg_op_observer *obs = op->opts_.observer_;
    if (pending) {
        /* The intent never landed: the observer hears of the end in place
         * of on_resolve, and records it itself if the intent lands. */
        void *handle = op->intent_;
        op->intent_ = NULL;
        if (handle != NULL) {
            obs->abandon_intent(op, handle, outcome, op->opts_.observer_ud_);
        }
    } else if (obs != NULL && obs->on_resolve != NULL) {
        sg__observed(op, obs->on_resolve(op, op->opts_.observer_ud_));
    }
}

/* The end of an operation whose intent used up what could be leased, as
 * the first lease would have ended it at the intent's deadline
 * (sg__plan_attempt): budget_exhausted, or refused when a floor is left.
 * (An intent that timed out a little early - the server's statement
 * timeout runs short of ours - is judged at its deadline all the same.) */
static void sg__op_finish_unleased(sg_op *op, int64_t now) {
    int64_t due = sg_op_intent_deadline(op);
    int64_t at = now > due ? now : due;
    bool exhausted = sg_budget_remaining(&op->budget_, at) == 0;
    sg__op_finish(
        op, now, exhausted ? SG_OUTCOME_BUDGET_EXHAUSTED : SG_OUTCOME_REFUSED, SG_OP_STOP,
        exhausted ? SG_OP_REASON_BUDGET_EXHAUSTED : SG_OP_REASON_BUDGET_BELOW_FLOOR);
}

int sg_op_intent_poll(sg_op *op, int64_t now) {
    if (!sg__op_started(op)) {
        return SG_EINVAL;
    }
    if (op->state_ != SG__OP_INTENT) {
        return SG_ESTATE;
    }
    const sg_op_observer *obs = op->opts_.observer_;
    int rc = obs->poll_intent(op, op->intent_, op->opts_.observer_ud_);
    if (rc == SG_EINPROGRESS) {
        if (now < sg_op_intent_deadline(op)) {
            return SG_EINPROGRESS;
        }
        sg__op_finish_unleased(op, now); /* abandons the intent */
        return 1;
    }
    op->intent_ = NULL; /* answered: the handle is the observer's again */
    if (rc == 0) {
        op->state_ = SG__OP_READY;
        return 0;
    }
    /* Never recorded: still "pending" with no handle, so the end calls
     * neither abandon_intent nor on_resolve. */
    op->observer_error_ = rc < 0 ? rc : SG_EREFUSED;
    if (rc == SG_ETIMEDOUT) {
        sg__op_finish_unleased(op, now);
    } else {
        sg__op_finish(op, now, SG_OUTCOME_REFUSED, SG_OP_STOP,
                      SG_OP_REASON_INTENT_REFUSED);
    }
    return 1;
}

/* A NUL-terminated copy of @src into @dst[@cap], cut to fit. */
static void keep_cut(char *dst, size_t cap, const char *src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Clamps a configured clock (0 = off) to the grant; records the clamp. */
static int64_t sg__clamp(int64_t configured, int64_t granted, uint8_t bit,
                         uint8_t *clamped) {
    if (configured <= 0) {
        return 0;
    }
    if (configured > granted) {
        *clamped |= bit;
        return granted;
    }
    return configured;
}

int sg_op_next_attempt(sg_op *op, int64_t now, sg_op_plan *plan) {
    if (!sg__op_started(op) || plan == NULL) {
        return SG_EINVAL;
    }
    memset(plan, 0, sizeof(*plan));
    plan->outcome = SG_OUTCOME_OK;
    plan->reason = SG_OP_REASON_NONE;
    if (op->state_ == SG__OP_RUNNING || op->state_ == SG__OP_FINISHED ||
        op->state_ == SG__OP_INTENT) {
        return SG_ESTATE;
    }
    if (op->state_ == SG__OP_BACKOFF && now < op->retry_at_) {
        /* The sleep was leased; starting early would spend budget the
         * backoff was meant to give the server. */
        return SG_ESTATE;
    }
    if (op->count_ >= sg__op_record_cap(op)) {
        return SG_ESTATE;
    }
    op->winner_ = 0; /* a new line of attempts: nothing delivered yet */
    return sg__plan_attempt(op, now, plan, op->ep_next_, false);
}

/* The minimum attempt of this operation: the option's, never more than
 * its own budget could ever lease above the floor (an absolute deadline
 * may leave less than the budget configured). */
static int64_t min_attempt(const sg_op *op) {
    int64_t m = sg__opt_min_attempt(&op->opts_);
    const sg_budget *b = &op->budget_;
    const int64_t leasable =
        sg_time_since(sg_budget_deadline(b), sg_budget_started_at(b)) -
        sg_budget_floor(b);
    return leasable > 0 && leasable < m ? leasable : m;
}

/* Leases and records the next attempt (a hedge when @hedge: then a
 * refusal leaves the operation running its other attempts). */
int sg__plan_attempt(sg_op *op, int64_t now, sg_op_plan *plan, uint32_t endpoint,
                     bool hedge) {
    const sg_op_options *o = &op->opts_;

    const int64_t remaining = sg_budget_remaining(&op->budget_, now);
    const int64_t wanted = o->attempt_ns_ > 0 ? o->attempt_ns_ : SG_TIME_NEVER;
    int64_t granted = 0;
    int rc = sg_budget_lease(&op->budget_, now, wanted, &granted);
    if (rc == 0 && granted < min_attempt(op)) {
        rc = SG_EREFUSED;
        plan->reason = SG_OP_REASON_LEASE_TOO_SHORT;
    } else if (rc == SG_EREFUSED) {
        plan->reason = remaining == 0 ? SG_OP_REASON_BUDGET_EXHAUSTED
                                      : SG_OP_REASON_BUDGET_BELOW_FLOOR;
    } else if (rc != 0) {
        return rc;
    }
    if (rc == SG_EREFUSED) {
        plan->outcome = remaining == 0 ? SG_OUTCOME_BUDGET_EXHAUSTED : SG_OUTCOME_REFUSED;
        if (hedge) {
            return SG_EREFUSED; /* the attempts running go on */
        }
        /* docs/design.md: the operation ends with its last attempt's outcome, or
         * the refusal's when no attempt could run. */
        sg_outcome final = plan->outcome;
        if (op->count_ > 0) {
            final = sg__record(op, op->count_ - 1)->outcome;
            sg__probe_refused(op, plan->reason);
        }
        sg__op_finish(op, now, final, SG_OP_STOP, plan->reason);
        return SG_EREFUSED;
    }

    /* Storage was reserved when the retry was decided (sg_op_attempt_done);
     * the first SG__OP_INLINE_ATTEMPTS are inline. */
    sg_op_attempt *a = sg__record_w(op, op->count_);
    memset(sg__rec_w(a), 0, sizeof(sg__rec)); /* its private part too */
    a->n = ++op->count_;
    a->outcome = SG_OUTCOME_OK;
    a->phase = SG_PHASE_CONNECT;
    a->decision = SG_OP_NONE;
    a->reason = SG_OP_REASON_NONE;
    a->running = true;
    a->started_at = now;
    a->remaining_ns = remaining;
    a->attempt_timeout_ns = granted;
    a->time_to_first_item_ns = -1;
    a->retry_after_ns = -1;
    a->backoff_ns = -1;
    a->endpoint = endpoint;
    a->hedge = hedge;
    uint8_t clamped = 0;
    if (o->attempt_ns_ <= 0 || o->attempt_ns_ > granted) {
        /* The ceiling is the budget's, not the caller's attempt clock. */
        clamped |= SG__CLAMP_ATTEMPT;
    }
    a->connect_timeout_ns =
        sg__clamp(o->connect_ns_, granted, SG__CLAMP_CONNECT, &clamped);
    a->first_item_timeout_ns =
        sg__clamp(o->first_item_ns_, granted, SG__CLAMP_FIRST_ITEM, &clamped);
    a->idle_timeout_ns = sg__clamp(o->idle_ns_, granted, SG__CLAMP_IDLE, &clamped);
    a->stream_timeout_ns =
        sg__clamp(o->stream_total_ns_, granted, SG__CLAMP_STREAM, &clamped);
    sg__rec_w(a)->budget_limited = clamped;

    sg_guard_config *g = &plan->guard_config;
    sg_guard_config_init(g);
    /* Every value below is in 1 .. SG_DURATION_MAX (a lease never exceeds
     * the budget), so the setters cannot fail. */
    (void)sg_guard_config_set_attempt_timeout(g, granted);
    if (a->connect_timeout_ns > 0) {
        (void)sg_guard_config_set_connect_timeout(g, a->connect_timeout_ns);
    }
    if (a->first_item_timeout_ns > 0) {
        (void)sg_guard_config_set_first_item_timeout(g, a->first_item_timeout_ns);
    }
    if (a->idle_timeout_ns > 0) {
        (void)sg_guard_config_set_idle_timeout(g, a->idle_timeout_ns);
    }
    if (a->stream_timeout_ns > 0) {
        (void)sg_guard_config_set_stream_timeout(g, a->stream_timeout_ns);
    }
    (void)sg_guard_config_set_max_items(g, o->max_items_);
    (void)sg_guard_config_set_max_bytes(g, o->max_bytes_);

    plan->attempt = a->n;
    plan->attempt_timeout_ns = granted;
    plan->endpoint = a->endpoint;
    plan->endpoint_url = o->n_endpoints_ > 0 ? o->endpoints_[a->endpoint] : NULL;
    plan->remaining_ns = remaining;
    plan->deadline_ms = granted / SG_MS(1);
    plan->deadline_header = sg__opt_deadline_header(o);
    plan->hedge = hedge;
    op->state_ = SG__OP_RUNNING;
    op->running_++;
    sg__observe_attempt(op, a, false);
    return 0;
}

const sg_op_attempt *sg_op_deciding_attempt(const sg_op *op) {
    if (!sg__op_started(op) || op->count_ == 0) {
        return NULL;
    }
    return sg__record(op, (op->decider_ != 0 ? op->decider_ : op->count_) - 1);
}

uint32_t sg_op_running(const sg_op *op) {
    return sg__op_started(op) ? op->running_ : 0;
}

void sg_op_result_from_guard(sg_op_result *r, const sg_guard_result *g) {
    if (r == NULL) {
        return;
    }
    memset(r, 0, sizeof(*r));
    if (g == NULL) {
        return;
    }
    r->outcome = g->outcome;
    r->phase = g->phase;
    r->partial = g->partial;
    r->items = g->items;
    r->bytes = g->bytes;
    r->first_item_ns = g->first_item_ns;
}

static bool sg__clock_timeout(sg_outcome oc, uint8_t *bit) {
    switch (oc) {
    case SG_OUTCOME_CONNECT_TIMEOUT:
        *bit = SG__CLAMP_CONNECT;
        return true;
    case SG_OUTCOME_FIRST_ITEM_TIMEOUT:
        *bit = SG__CLAMP_FIRST_ITEM;
        return true;
    case SG_OUTCOME_IDLE_TIMEOUT:
        *bit = SG__CLAMP_IDLE;
        return true;
    case SG_OUTCOME_STREAM_TIMEOUT:
        *bit = SG__CLAMP_STREAM;
        return true;
    case SG_OUTCOME_ATTEMPT_TIMEOUT:
        *bit = SG__CLAMP_ATTEMPT;
        return true;
    default:
        *bit = 0;
        return false;
    }
}

static uint64_t sg__op_random(sg_op *op) {
    if (op->opts_.random_ != NULL) {
        return op->opts_.random_(op->opts_.random_ud_);
    }
    return sg__xorshift64s(&op->rng_);
}

/* ep_ra_: bit e, ep_back_[e] is a Retry-After; bit 16 + e, one beyond
 * max_retry_after (it stops the operation when e is the one to wait for,
 * however much of it has passed by then). */
#define EP_RA_OVER(e) (1u << (16 + (e)))

/* Endpoint @e may be tried again from @at (@ra: the server's Retry-After
 * named it, of @ra_ns; else a backoff) - never earlier than a time already
 * set: a hedge's failure does not shorten the Retry-After of the attempt
 * beside it. */
static void back_until(sg_op *op, uint32_t e, int64_t at, bool ra, int64_t ra_ns) {
    if (at < op->ep_back_[e]) {
        return;
    }
    op->ep_back_[e] = at;
    op->ep_ra_ &= ~((1u << e) | EP_RA_OVER(e));
    if (ra) {
        op->ep_ra_ |= 1u << e;
        if (ra_ns > sg__opt_max_retry_after(&op->opts_)) {
            op->ep_ra_ |= EP_RA_OVER(e);
        }
    }
}

/* The server's time to come back, into @a: its retry-after-ms (OpenAI's
 * and Azure's milliseconds) when that holds a valid value, else its
 * Retry-After - the order the openai and @anthropic-ai/sdk clients read
 * them in (their retryRequest).  Only a response says it.  true with
 * *@ra_ns when one is valid. */
static bool read_retry_after(sg_op_attempt *a, const sg_op_result *r, int64_t *ra_ns) {
    if (!r->headers_received) {
        return false;
    }
    bool valid = false;
    sg__rec *rec = sg__rec_w(a);
    if (r->retry_after_ms_field != NULL) {
        a->retry_after_present = true;
        valid = sg_retry_after_ms_parse(r->retry_after_ms_field,
                                        r->retry_after_ms_field_len, ra_ns) == 0;
        if (valid) {
            rec->retry_after_flags |= SG__RA_FROM_MS;
        }
    }
    int64_t d = -1;
    if (r->retry_after != NULL) {
        a->retry_after_present = true;
        size_t keep = r->retry_after_len < SG__OP_RETRY_AFTER_RAW_MAX
                          ? r->retry_after_len
                          : SG__OP_RETRY_AFTER_RAW_MAX;
        memcpy(rec->retry_after_raw, r->retry_after, keep);
        rec->retry_after_raw[keep] = '\0';
        rec->retry_after_raw_len = (uint8_t)keep;
        rec->retry_after_flags |= SG__RA_RAW_GIVEN;
        if (sg_retry_after_parse(r->retry_after, r->retry_after_len, r->wall_now_s, &d) ==
                0 &&
            !valid) {
            valid = true;
            *ra_ns = d;
        }
    } else if (r->has_retry_after_ns) {
        a->retry_after_present = true;
        if (!valid) {
            valid = true;
            *ra_ns = r->retry_after_ns;
        }
    }
    a->retry_after_malformed = a->retry_after_present && !valid;
    a->retry_after_ns = valid ? *ra_ns : -1;
    return valid;
}

int sg_op_attempt_done(sg_op *op, int64_t now, const sg_op_result *r, sg_op_verdict *v) {
    if (!sg__op_started(op) || r == NULL || v == NULL) {
        return SG_EINVAL;
    }
    if ((unsigned)r->outcome >= (unsigned)SG_OUTCOME_COUNT_ ||
        (unsigned)r->phase >= (unsigned)SG_PHASE_COUNT_ ||
        (r->http_status != 0 && (r->http_status < 100 || r->http_status > 599)) ||
        (r->retry_after == NULL && r->has_retry_after_ns &&
         (r->retry_after_ns < 0 || r->retry_after_ns > SG_DURATION_MAX))) {
        return SG_EINVAL;
    }
    if (op->count_ == 0 || r->attempt > op->count_) {
        return r->attempt > op->count_ ? SG_EINVAL : SG_ESTATE;
    }
    const sg_op_options *o = &op->opts_;
    sg_op_attempt *a = sg__record_w(op, (r->attempt != 0 ? r->attempt : op->count_) - 1);
    /* a running attempt: the newest, or one beside it (hedging) - also a
     * loser that ends after the winner ended the operation */
    if (!a->running || (op->state_ != SG__OP_RUNNING && op->state_ != SG__OP_FINISHED)) {
        return SG_ESTATE;
    }
    op->running_--;
    const bool lost = op->winner_ != 0 && a->n != op->winner_;
    if (op->winner_ == 0 && (r->items > 0 || r->outcome == SG_OUTCOME_OK)) {
        op->winner_ = a->n; /* it delivered: any other still running lost */
    }

    a->running = false;
    a->phase = r->phase;
    a->http_status = r->http_status;
    a->headers_received = r->headers_received;
    a->items = r->items;
    a->bytes = r->bytes;
    a->time_to_first_item_ns =
        (r->items > 0 && r->first_item_ns >= 0) ? r->first_item_ns : -1;
    a->elapsed_ns = sg_time_since(now, a->started_at);
    /* bounded: the transport's and the server's words, cut to fit, never
     * trusted */
    if (r->error != NULL) {
        keep_cut(a->error, sizeof(a->error), r->error);
    }
    a->provider_error_type[0] = '\0';
    if (r->outcome == SG_OUTCOME_PROVIDER_ERROR && r->provider_type != NULL) {
        keep_cut(a->provider_error_type, sizeof(a->provider_error_type),
                 r->provider_type);
    }

    /* docs/design.md, "Who set the limit": a clock the lease shortened fires
     * at the lease's end, and is named after whoever set the lease - the
     * operation budget (budget_exhausted) or the caller's per-attempt
     * ceiling (attempt_timeout, retryable while budget remains).  A clock
     * that fired before the lease's end (a transport's own connect
     * timeout) keeps its name. */
    sg_outcome oc = lost ? SG_OUTCOME_CANCELLED : r->outcome; /* it lost a hedge */
    uint8_t bit = 0, lim = sg__rec_c(a)->budget_limited;
    if (sg__clock_timeout(oc, &bit) && (lim & bit) &&
        a->elapsed_ns >= a->attempt_timeout_ns) {
        oc = (lim & SG__CLAMP_ATTEMPT) ? SG_OUTCOME_BUDGET_EXHAUSTED
                                       : SG_OUTCOME_ATTEMPT_TIMEOUT;
    }
    a->outcome = oc;

    /* Err towards "sent": a request the server may have seen must be
     * treated as seen. */
    const bool sent = r->sent || r->headers_received || r->items > 0 ||
                      r->phase >= SG_PHASE_WAIT_HEADERS;
    const bool safe = !sent || sg_op_options_repeatable(o);
    /* A 502 or 504 is a gateway's answer, not the upstream's: the request
     * may have reached it and taken effect before it failed or timed out,
     * so it says nothing about the effect (docs/design.md, "outcome
     * unknown"). */
    const bool gateway = r->http_status == 502 || r->http_status == 504;
    /* The server's own answer settles the effect: a final status (one
     * read: headers without a status are no answer), or a failure it
     * reported inside the stream (provider_error). */
    const bool complete = oc == SG_OUTCOME_OK || oc == SG_OUTCOME_PROVIDER_ERROR ||
                          (oc == SG_OUTCOME_HTTP_ERROR && r->headers_received &&
                           r->http_status > 0 && !gateway);
    a->sent = sent;
    /* delivered and then broke: never an attempt that ended ok */
    a->partial = oc != SG_OUTCOME_OK && (r->partial || r->items > 0);
    a->outcome_unknown = sent && !safe && !complete;

    int64_t ra_ns = -1;
    const bool ra_valid = read_retry_after(a, r, &ra_ns);

    sg_op_decision decision = SG_OP_STOP;
    sg_op_reason reason = SG_OP_REASON_NONE;
    bool retryable = false;
    if (lost) {
        /* cancelled because another attempt delivered first: its line
         * stops, the operation goes on with the winner */
        a->decision = SG_OP_STOP;
        a->reason = SG_OP_REASON_HEDGE_LOST;
        memset(v, 0, sizeof(*v));
        v->decision = SG_OP_STOP;
        v->reason = SG_OP_REASON_HEDGE_LOST;
        v->outcome = oc;
        v->retry_at = SG_TIME_NEVER;
        sg__observe_attempt(op, a, true);
        return 0;
    }
    if (oc == SG_OUTCOME_OK) {
        decision = SG_OP_DONE;
        reason = SG_OP_REASON_OK;
    } else if (a->partial) {
        reason = SG_OP_REASON_PARTIAL_STREAM;
    } else if (a->outcome_unknown) {
        reason = SG_OP_REASON_OUTCOME_UNKNOWN;
    } else {
        switch (oc) {
        case SG_OUTCOME_BUDGET_EXHAUSTED:
            reason = SG_OP_REASON_BUDGET_EXHAUSTED;
            break;
        case SG_OUTCOME_CANCELLED:
        case SG_OUTCOME_CAP_EXCEEDED:
        case SG_OUTCOME_PROTOCOL_ERROR:
        case SG_OUTCOME_REFUSED:
            /* The caller gave up, the peer ran away or broke the protocol,
             * or the library refused to send what it could not describe
             * truly: the same request would do the same again. */
            reason = SG_OP_REASON_OUTCOME_NOT_RETRYABLE;
            break;
        case SG_OUTCOME_PROVIDER_ERROR:
            /* Before the first token (after it, partial caught it above):
             * a transient type is worth a retry when the request is safe
             * to repeat; any other the same request would get again. */
            if (!r->provider_retryable) {
                reason = SG_OP_REASON_OUTCOME_NOT_RETRYABLE;
            } else if (safe) {
                retryable = true;
            } else {
                reason = SG_OP_REASON_NOT_SAFE_TO_RETRY;
            }
            break;
        case SG_OUTCOME_HTTP_ERROR:
            if (r->http_status == 0 || !r->headers_received) {
                /* No status: the response never completed; like a
                 * transport error (safe here, else outcome_unknown). */
                retryable = safe;
            } else if (!sg__opt_status_retryable(o, r->http_status)) {
                decision = SG_OP_DONE;
                reason = SG_OP_REASON_FINAL_STATUS;
            } else if (r->provider_final) {
                /* a status worth a retry, but the body says the same
                 * request fails until something else changes (a spend
                 * limit reached): the provider's final answer */
                decision = SG_OP_DONE;
                reason = SG_OP_REASON_PROVIDER_FINAL;
            } else if (safe) {
                retryable = true;
            } else if (!(o->set_ & SG__OPT_NO_REJECTION_RETRY) &&
                       (r->http_status == 429 ||
                        ((r->http_status == 503 || r->http_status == 529) && ra_valid))) {
                /* The server refused before processing: a rate limiter's
                 * 429, or an overloaded server's 503 (Anthropic's 529)
                 * that names a time to come back. */
                retryable = true;
            } else {
                reason = SG_OP_REASON_NOT_SAFE_TO_RETRY;
            }
            break;
        default:
            /* Timeouts, truncated, transport_error: safe here,
             * since a sent unsafe request was caught as outcome_unknown. */
            retryable = safe;
            if (!retryable) {
                reason = SG_OP_REASON_NOT_SAFE_TO_RETRY;
            }
            break;
        }
    }
    a->retryable = retryable;

    /* The retry budget shared with other operations: a success gives back,
     * a retryable failure takes, and below half the retry is denied. */
    bool throttled = false;
    if (oc == SG_OUTCOME_OK) {
        sg_retry_budget_on_success(o->retry_budget_);
    } else if (retryable && o->retry_budget_ != NULL) {
        throttled = !sg_retry_budget_on_failure(o->retry_budget_);
    }

    int64_t delay = 0;
    if (op->running_ > 0 && oc != SG_OUTCOME_OK && !a->partial && !a->outcome_unknown) {
        /* hedged attempts of this operation still run: this line stops,
         * the operation waits for them - and a time to come back its
         * server named is kept for the retry they may still decide */
        if (retryable && ra_valid && oc == SG_OUTCOME_HTTP_ERROR) {
            back_until(op, a->endpoint, sg_time_add(now, ra_ns), true, ra_ns);
        }
        a->decision = SG_OP_STOP;
        a->reason = SG_OP_REASON_HEDGE_RUNNING;
        memset(v, 0, sizeof(*v));
        v->decision = SG_OP_STOP;
        v->reason = SG_OP_REASON_HEDGE_RUNNING;
        v->outcome = oc;
        v->retryable = a->retryable;
        v->retry_at = SG_TIME_NEVER;
        sg__observe_attempt(op, a, true);
        return 0;
    }
    if (retryable) {
        if (op->count_ >= sg__op_record_cap(op)) {
            reason = SG_OP_REASON_ATTEMPTS_EXHAUSTED;
        } else if (throttled) {
            reason = SG_OP_REASON_RETRY_THROTTLED;
        } else {
            /* This endpoint may be tried again after its backoff sleep, or
             * after its Retry-After; the next attempt goes to the next
             * endpoint (the same one when there is one) and waits for that
             * endpoint's own time only. */
            const uint32_t e = a->endpoint;
            const uint32_t n_ep = o->n_endpoints_ > 0 ? o->n_endpoints_ : 1;
            const uint32_t next = (e + 1) % n_ep;
            const bool ra = ra_valid && oc == SG_OUTCOME_HTTP_ERROR;
            int64_t wait = ra_ns;
            if (!ra) {
                const int64_t ceil = sg__backoff_ceiling(
                    sg__opt_backoff_base(o), sg__opt_backoff_cap(o), op->count_ - 1);
                wait = sg__uniform(sg__op_random(op), ceil);
            }
            back_until(op, e, sg_time_add(now, wait), ra, wait);
            delay = op->ep_back_[next] > now ? op->ep_back_[next] - now : 0;
            const bool ra_wait = (op->ep_ra_ >> next & 1) != 0;
            sg_op_reason too_long = ra_wait ? SG_OP_REASON_RETRY_AFTER_EXCEEDS_BUDGET
                                            : SG_OP_REASON_BACKOFF_EXCEEDS_BUDGET;
            /* The sleep fits when, after it, an attempt of at least the
             * minimum can still be leased above the floor. */
            const int64_t avail =
                sg_budget_remaining(&op->budget_, now) - sg_budget_floor(&op->budget_);
            const int64_t after = avail - delay; /* both in 0 .. DURATION_MAX */
            if (ra_wait && (delay > sg__opt_max_retry_after(o) ||
                            (op->ep_ra_ & EP_RA_OVER(next)) != 0)) {
                reason = SG_OP_REASON_RETRY_AFTER_EXCEEDS_MAX;
            } else if (after <= 0 || after < min_attempt(op)) {
                reason = too_long;
            } else if (sg__reserve(op, op->count_) != 0) {
                /* The next attempt could not be recorded: it is not sent,
                 * since the report and the observer must see every one. */
                reason = SG_OP_REASON_OUT_OF_MEMORY;
            } else {
                decision = SG_OP_RETRY;
                reason = SG_OP_REASON_RETRYABLE;
                op->ep_next_ = next;
            }
        }
    }

    a->decision = decision;
    a->reason = reason;
    op->decider_ = a->n;
    memset(v, 0, sizeof(*v));
    v->decision = decision;
    v->reason = reason;
    v->outcome = oc;
    v->partial = a->partial;
    v->retryable = a->retryable;
    v->outcome_unknown = a->outcome_unknown;
    v->retry_at = SG_TIME_NEVER;
    if (decision == SG_OP_RETRY) {
        a->backoff_ns = delay;
        v->delay_ns = delay;
        v->retry_at = sg_time_add(now, delay);
        op->retry_at_ = v->retry_at;
        op->state_ = SG__OP_BACKOFF;
        sg__observe_attempt(op, a, true);
    } else {
        sg__observe_attempt(op, a, true);
        sg__op_finish(op, now, oc, decision, reason);
    }
    return 0;
}

int sg_op_cancel(sg_op *op, int64_t now) {
    if (!sg__op_started(op)) {
        return SG_EINVAL;
    }
    if (op->state_ == SG__OP_RUNNING || op->state_ == SG__OP_FINISHED) {
        return SG_ESTATE;
    }
    sg__op_finish(op, now, SG_OUTCOME_CANCELLED, SG_OP_STOP, SG_OP_REASON_CANCELLED);
    return 0;
}

int sg_op_observer_error(const sg_op *op) {
    return sg__op_started(op) ? op->observer_error_ : SG_EINVAL;
}

bool sg_op_finished(const sg_op *op) {
    return sg__op_started(op) && op->state_ == SG__OP_FINISHED;
}

int64_t sg_op_finished_at(const sg_op *op) {
    return sg_op_finished(op) ? op->finished_at_ : -1;
}

sg_outcome sg_op_outcome(const sg_op *op) {
    return sg_op_finished(op) ? (sg_outcome)op->outcome_ : SG_OUTCOME_NONE;
}

sg_op_decision sg_op_final_decision(const sg_op *op) {
    if (!sg__op_started(op) || op->state_ != SG__OP_FINISHED) {
        return SG_OP_NONE;
    }
    return (sg_op_decision)op->decision_;
}

sg_op_reason sg_op_final_reason(const sg_op *op) {
    if (!sg__op_started(op) || op->state_ != SG__OP_FINISHED) {
        return SG_OP_REASON_NONE;
    }
    return (sg_op_reason)op->reason_;
}

uint32_t sg_op_attempt_count(const sg_op *op) {
    return sg__op_started(op) ? op->count_ : 0;
}

const sg_op_attempt *sg_op_attempt_at(const sg_op *op, uint32_t i) {
    if (!sg__op_started(op) || i >= op->count_) {
        return NULL;
    }
    return sg__record(op, i);
}
