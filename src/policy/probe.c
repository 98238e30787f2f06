/*
 * A connection the caller tried before the operation started, inside its
 * budget, that failed (sg_op_options_set_probe): recorded as the
 * operation's first attempt, so the report accounts for every connection
 * made and for the time it took - never "no attempt" after a probe that
 * used the budget up.
 */
#include "internal.h"

#include <string.h>

uint32_t sg__op_record_cap(const sg_op *op) {
    return sg__opt_max_attempts(sg__op_opts(op)) +
           ((sg__op_opts(op)->set_ & SG__OPT_PROBE) ? 1u : 0u);
}

void sg__record_probe(sg_op *op) {
    const sg_op_options *o = sg__op_opts(op);
    const sg_budget *b = &op->budget_;
    const int64_t t0 = sg_budget_started_at(b);
    const int64_t end = o->probe_end_ > t0 ? o->probe_end_ : t0;
    /* what a lease at its start would have granted: its connect clock,
     * clamped to what the budget could lease */
    const int64_t remaining = sg_budget_remaining(b, t0);
    int64_t leasable = remaining - sg_budget_floor(b);
    leasable = leasable > 0 ? leasable : 0;
    const int64_t connect = o->probe_connect_ns_;
    const bool clamped = connect <= 0 || connect > leasable;
    const int64_t granted = clamped ? leasable : connect;

    sg_op_attempt *a = sg__record_w(op, 0);
    memset(sg__rec_w(a), 0, sizeof(sg__rec));
    a->n = 1;
    a->phase = SG_PHASE_CONNECT;
    a->started_at = t0;
    a->remaining_ns = remaining;
    a->attempt_timeout_ns = granted;
    a->connect_timeout_ns = granted;
    sg__lease_probe(a, clamped);
    a->elapsed_ns = sg_time_since(end, t0);
    a->time_to_first_item_ns = -1;
    a->retry_after_ns = -1;
    a->backoff_ns = 0; /* the operation's own first attempt follows at once */
    sg__usage_none(&a->usage);
    a->decision = SG_OP_RETRY;
    a->reason = SG_OP_REASON_RETRYABLE;
    a->retryable = true; /* never sent */
    /* docs/design.md, "Who set the limit": a connect clock the budget
     * shortened that ran to the end of the lease is the budget's */
    if (!(o->set_ & SG__OPT_PROBE_TIMED_OUT)) {
        a->outcome = SG_OUTCOME_TRANSPORT_ERROR;
    } else if (clamped && a->elapsed_ns >= granted) {
        a->outcome = SG_OUTCOME_BUDGET_EXHAUSTED;
    } else {
        a->outcome = SG_OUTCOME_CONNECT_TIMEOUT;
    }
    if (o->probe_error_ != NULL) {
        size_t n = strnlen(o->probe_error_, sizeof(a->error) - 1);
        memcpy(a->error, o->probe_error_, n);
        a->error[n] = '\0';
    }
    op->count_ = 1;
}

void sg__probe_refused(sg_op *op, sg_op_reason reason) {
    sg_op_attempt *a = sg__record_w(op, 0);
    if (op->count_ == 1 && (sg__op_opts(op)->set_ & SG__OPT_PROBE) &&
        a->decision == SG_OP_RETRY) {
        /* no attempt of its own could follow it: the probe is the last */
        a->decision = SG_OP_STOP;
        a->reason = reason;
        a->backoff_ns = -1;
    }
}

bool sg_op_attempt_probe(const sg_op *op, uint32_t i) {
    /* the probe's record is the first, set as the operation starts */
    return i == 0 && sg_op_attempt_at(op, 0) != NULL &&
           (sg__op_opts(op)->set_ & SG__OPT_PROBE) != 0;
}
