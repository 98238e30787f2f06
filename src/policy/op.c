/*
 * The operation state machine: its start and intent, attempts leased from
 * one budget, its end, and what a reader asks of it.  What an attempt's
 * end decides - retry safety, backoff and Retry-After - is
 * sg_op_attempt_done's, in steps (end.h).  No clock reads, no global
 * state: everything lives in the caller's sg_op.  The only allocation is
 * the blocks of attempt records past the inline ones (records.c).
 */
#include "health_internal.h"

#include <stdlib.h>
#include <string.h>

#define SG__OP_MAGIC 0x5347504fu /* "SGPO" */

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
    if (opts == NULL) {
        opts = &sg__op_options_defaults;
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
    /* options already frozen (the transport's, shared by the operations
     * it makes from one options object) are held, others copied once */
    op->opts_ = sg__op_options_hold(opts);
    if (op->opts_ == NULL) {
        return SG_ENOMEM;
    }
    int rc = 0;
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
    const uint32_t n_ep = opts->n_endpoints_ > 1 ? opts->n_endpoints_ : 1;
    op->ep_back_ = n_ep > 1 ? malloc(n_ep * sizeof(int64_t)) : &op->ep_back1_;
    if (rc == 0 && op->ep_back_ == NULL) {
        rc = SG_ENOMEM;
    }
    if (rc == 0 && (opts->set_ & SG__OPT_PROBE) && sg__op_record_cap(op) > 1) {
        /* the probe's record is inline: the operation's own first attempt
         * needs the first block, had now or never */
        rc = sg__reserve(op, 1);
    }
    if (rc == 0) {
        rc = sg__health_op_start(op); /* its hold on the shared health */
        sg__ttft_op_start(op);
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
    for (uint32_t e = 0; e < n_ep; e++) {
        op->ep_back_[e] = INT64_MIN; /* any time: a clock may read below 0 */
    }
    op->state_ = SG__OP_READY;
    op->magic_ = SG__OP_MAGIC;
    if (opts->set_ & SG__OPT_PROBE) {
        sg__record_probe(op); /* before the intent: nothing was sent */
    }
    /* Before any attempt can be planned: an observer that refuses (a
     * ledger holding the same unresolved key) means nothing is ever sent.
     * Those that record at once first, in order; the one that may record
     * off the loop last: only it may leave the intent pending. */
    const sg__observer_ref *aref = sg__op_async_observer(opts);
    const char *label = opts->label_;
    sg_op_intent intent = {sg__opt_method(opts), opts->target_, sg_op_idempotency_key(op),
                           label};
    for (uint32_t i = 0; i <= opts->n_observers_; i++) {
        const sg__observer_ref *ref =
            i < opts->n_observers_ ? sg__observer_at(opts, i) : aref;
        if (ref == NULL || (i < opts->n_observers_ && ref == aref)) {
            continue;
        }
        int orc = 0;
        if (ref == aref && fd != NULL) {
            sg_op_intent_wait wait = {-1, NULL};
            orc = ref->obs->start_intent(op, &intent, ref->ud, &wait);
            if (orc == SG_EINPROGRESS) {
                op->state_ = SG__OP_INTENT;
                op->intent_ = wait.handle;
                *fd = wait.fd;
                return SG_EINPROGRESS;
            }
        } else if (ref->obs->on_intent != NULL) {
            orc = ref->obs->on_intent(op, &intent, ref->ud);
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

const sg_op_options *sg__op_options_of(const sg_op *op) {
    return sg__op_started(op) ? sg__op_opts(op) : NULL;
}

const char *sg_op_idempotency_key(const sg_op *op) {
    if (!sg__op_started(op) || sg__op_opts(op)->idempotency_key_ == NULL) {
        return NULL;
    }
    return sg__op_opts(op)->idempotency_key_;
}

const char *sg_op_method(const sg_op *op) {
    if (!sg__op_started(op)) {
        return NULL;
    }
    return sg__opt_method(sg__op_opts(op));
}

/* An observer's failure never changes the operation; the first is kept. */
static void sg__observed(sg_op *op, int rc) {
    if (rc < 0 && op->observer_error_ == 0) {
        op->observer_error_ = rc;
    }
}

void sg__op_observe_attempt(sg_op *op, const sg_op_attempt *a, bool end) {
    const sg_op_options *o = sg__op_opts(op);
    for (uint32_t i = 0; i < o->n_observers_; i++) {
        const sg__observer_ref *ref = sg__observer_at(o, i);
        sg_op_attempt_cb fn = end ? ref->obs->on_attempt_end : ref->obs->on_attempt_start;
        if (fn != NULL) {
            sg__observed(op, fn(op, a, ref->ud));
        }
    }
}

void sg__op_attempt_headers(sg_op *op, const sg_op_attempt *a, sg_op_headers *h) {
    h->n = 0;
    h->used = 0;
    const sg_op_options *o = sg__op_opts(op);
    for (uint32_t i = 0; i < o->n_observers_; i++) {
        const sg__observer_ref *ref = sg__observer_at(o, i);
        if (ref->obs->on_attempt_headers != NULL) {
            sg__observed(op, ref->obs->on_attempt_headers(op, a, h, ref->ud));
        }
    }
}

const sg_op_headers *sg__op_headers_for(sg_op *op, uint32_t attempt, sg_op_headers **h) {
    if (attempt == 0 || attempt > op->count_ || !sg__op_wants_headers(op) ||
        (*h == NULL && sg_op_headers_new(h) != 0)) {
        return NULL;
    }
    sg__op_attempt_headers(op, sg__record(op, attempt - 1), *h);
    return *h;
}

bool sg__op_wants_headers(const sg_op *op) {
    const sg_op_options *o = sg__op_opts(op);
    for (uint32_t i = 0; i < o->n_observers_; i++) {
        if (sg__observer_at(o, i)->obs->on_attempt_headers != NULL) {
            return true;
        }
    }
    return false;
}

int sg_op_attempt_headers(sg_op *op, uint32_t attempt, sg_op_headers *h) {
    if (!sg__op_started(op) || h == NULL || attempt == 0 || attempt > op->count_) {
        return SG_EINVAL;
    }
    sg__op_attempt_headers(op, sg__record(op, attempt - 1), h);
    return (int)h->n;
}

void sg__op_finish(sg_op *op, int64_t now, sg_outcome outcome, sg_op_decision decision,
                   sg_op_reason reason) {
    bool pending = op->state_ == SG__OP_INTENT;
    op->state_ = SG__OP_FINISHED;
    op->outcome_ = (uint8_t)outcome;
    op->decision_ = (uint8_t)decision;
    op->reason_ = (uint8_t)reason;
    op->finished_at_ = now;
    sg__usage_settle(op); /* (the records as on_resolve and the report see them) */
    const sg_op_options *o = sg__op_opts(op);
    const sg__observer_ref *aref = pending ? sg__op_async_observer(o) : NULL;
    for (uint32_t i = 0; i < o->n_observers_; i++) {
        const sg__observer_ref *ref = sg__observer_at(o, i);
        if (ref == aref) {
            /* The intent never landed: this observer hears of the end in
             * place of on_resolve, and records it itself if the intent
             * lands. */
            void *handle = op->intent_;
            op->intent_ = NULL;
            if (handle != NULL) {
                ref->obs->abandon_intent(op, handle, outcome, ref->ud);
            }
        } else if (ref->obs->on_resolve != NULL) {
            sg__observed(op, ref->obs->on_resolve(op, ref->ud));
        }
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
    const sg__observer_ref *aref = sg__op_async_observer(sg__op_opts(op));
    int rc = aref->obs->poll_intent(op, op->intent_, aref->ud);
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

int sg_op_next_attempt(sg_op *op, int64_t now, sg_op_plan *plan) {
    if (!sg__op_started(op) || plan == NULL) {
        return SG_EINVAL;
    }
    memset(plan, 0, sizeof(*plan));
    plan->outcome = SG_OUTCOME_OK;
    plan->reason = SG_OP_REASON_NONE;
    plan->free_at = -1;
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
    uint32_t endpoint = 0;
    int rc = sg__health_plan(op, now, plan, &endpoint); /* free, or wait, or end */
    if (rc == 0) {
        rc = sg__plan_attempt(op, now, plan, endpoint, false);
        sg__health_planned(op, rc, plan);
    }
    return rc;
}

int64_t sg__op_min_attempt(const sg_op *op) {
    int64_t m = sg__opt_min_attempt(sg__op_opts(op));
    const sg_budget *b = &op->budget_;
    const int64_t leasable =
        sg_time_since(sg_budget_deadline(b), sg_budget_started_at(b)) -
        sg_budget_floor(b);
    return leasable > 0 && leasable < m ? leasable : m;
}

void sg__op_end_refused(sg_op *op, int64_t now, const sg_op_plan *plan) {
    /* docs/design.md: the operation ends with its last attempt's outcome, or
     * the refusal's when no attempt could run. */
    sg_outcome final = plan->outcome;
    if (op->count_ > 0) {
        final = sg__record(op, op->count_ - 1)->outcome;
        sg__probe_refused(op, plan->reason);
    }
    sg__op_finish(op, now, final, SG_OP_STOP, plan->reason);
}

/* Leases and records the next attempt (a hedge when @hedge: then a
 * refusal leaves the operation running its other attempts). */
int sg__plan_attempt(sg_op *op, int64_t now, sg_op_plan *plan, uint32_t endpoint,
                     bool hedge) {
    const sg_op_options *o = sg__op_opts(op);

    const int64_t remaining = sg_budget_remaining(&op->budget_, now);
    const int64_t wanted = o->attempt_ns_ > 0 ? o->attempt_ns_ : SG_TIME_NEVER;
    int64_t granted = 0;
    int rc = sg_budget_lease(&op->budget_, now, wanted, &granted);
    if (rc == 0 && granted < sg__op_min_attempt(op)) {
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
        sg__op_end_refused(op, now, plan);
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
    sg__usage_none(&a->usage);
    a->endpoint = endpoint;
    a->hedge = hedge;
    sg__lease_clocks(a, o, granted); /* and who set the limit */
    sg__ttft_hedge_delay(op, a, now);

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
    sg__op_observe_attempt(op, a, false);
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
