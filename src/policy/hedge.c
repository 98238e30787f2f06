/*
 * First-token hedging in the policy (docs/design.md, retry rule 8): when a
 * hedge is due beside the attempts running, leasing it, and naming the
 * winner.  Results of every attempt, hedges included, are sg_op_attempt_done's
 * (attempt.c); what an end means for the attempts beside it is here
 * (steps 2 and 7, end.h).
 */
#include "health_internal.h"

#include <string.h>

/* Whether one more attempt may be hedged beside those running. */
static bool hedge_open(const sg_op *op) {
    const sg_op_options *o = sg__op_opts(op);
    return op->state_ == SG__OP_RUNNING && o->hedge_after_ns_ > 0 && op->winner_ == 0 &&
           op->running_ < 1 + o->max_hedges_ && op->count_ < sg__op_record_cap(op);
}

/* The endpoint a hedge goes to: the first after the newest attempt's,
 * round the list (the same one when there is one: a new request, on a new
 * connection where the transport can), whose own clock - its Retry-After
 * or its backoff after a failure - lets it be asked at @now, and whose
 * shared health does (then holding its slot; else *@why says why not);
 * -1 when none does.  O(endpoints). */
static int free_endpoint(sg_op *op, int64_t now, sg_op_reason *why) {
    const uint32_t n_ep = sg__op_n_endpoints(op);
    const uint32_t newest = sg__record(op, op->count_ - 1)->endpoint;
    for (uint32_t k = 1; k <= n_ep; k++) {
        const uint32_t e = sg__ep_after(op, newest, k);
        if (op->ep_back_[e] <= now && sg__health_hedge_try(op, e, now, why)) {
            return (int)e;
        }
    }
    return -1;
}

int64_t sg_op_hedge_at(const sg_op *op) {
    if (!sg__op_started(op)) {
        return -1;
    }
    if (!hedge_open(op)) {
        return SG_TIME_NEVER;
    }
    const sg_op_attempt *newest = sg__record(op, op->count_ - 1);
    return sg_time_add(newest->started_at, newest->hedge_after_ns); /* ttft_op.c */
}

int sg_op_hedge(sg_op *op, int64_t now, sg_op_plan *plan) {
    if (!sg__op_started(op) || plan == NULL) {
        return SG_EINVAL;
    }
    memset(plan, 0, sizeof(*plan));
    plan->outcome = SG_OUTCOME_OK;
    plan->reason = SG_OP_REASON_NONE;
    plan->free_at = -1;
    if (!hedge_open(op) || now < sg_op_hedge_at(op)) {
        return SG_ESTATE;
    }
    /* docs/design.md retry rules 6 and 8: only to an endpoint free to be
     * asked now - one still waiting for its Retry-After or its backoff is
     * not, nor one its shared health holds back (a hedge never waits) */
    sg_op_reason why = SG_OP_REASON_NO_FREE_ENDPOINT;
    const int endpoint = free_endpoint(op, now, &why);
    if (endpoint < 0) {
        /* never silently: the report counts it (saturating) */
        if (op->hedges_no_free_ < UINT16_MAX) {
            op->hedges_no_free_++;
        }
        plan->reason = why;
        return SG_EREFUSED;
    }
    int rc = SG_EREFUSED;
    if (!sg_retry_budget_allows(sg__op_opts(op)->retry_budget_)) {
        /* never silently: counted, and the report says so */
        if (op->hedges_throttled_ < UINT16_MAX) {
            op->hedges_throttled_++;
        }
        plan->reason = SG_OP_REASON_RETRY_THROTTLED;
    } else if (sg__reserve(op, op->count_) != 0) {
        plan->reason = SG_OP_REASON_OUT_OF_MEMORY;
    } else {
        rc = sg__plan_attempt(op, now, plan, (uint32_t)endpoint, true);
    }
    sg__health_planned(op, rc, plan); /* the slot to the hedge, or back */
    return rc;
}

uint32_t sg_op_hedge_won(sg_op *op, uint32_t attempt) {
    if (!sg__op_started(op) || op->state_ != SG__OP_RUNNING || attempt == 0 ||
        attempt > op->count_ || !sg__record(op, attempt - 1)->running ||
        op->winner_ != 0) {
        return 0;
    }
    op->winner_ = attempt;
    return op->running_ - 1;
}

bool sg__hedge_ended(sg_op *op, const sg_op_attempt *a, const sg_op_result *r) {
    op->running_--;
    const bool lost = op->winner_ != 0 && a->n != op->winner_;
    if (op->winner_ == 0 && (r->items > 0 || r->outcome == SG_OUTCOME_OK)) {
        op->winner_ = a->n; /* it delivered: any other still running lost */
    }
    return lost;
}

bool sg__hedges_run_on(sg_op *op, sg__end *e) {
    if (op->running_ == 0 || e->outcome == SG_OUTCOME_OK || e->a->partial ||
        e->a->outcome_unknown) {
        return false;
    }
    /* A time to come back its server named is kept for the retry the
     * attempts still running may yet decide. */
    if (e->retryable && e->ra_valid && e->outcome == SG_OUTCOME_HTTP_ERROR) {
        sg__back_until(op, e->a->endpoint, sg_time_add(e->now, e->ra_ns), true, e->ra_ns);
    }
    e->decision = SG_OP_STOP;
    e->reason = SG_OP_REASON_HEDGE_RUNNING;
    return true;
}
