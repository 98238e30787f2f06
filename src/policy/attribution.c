/*
 * Who set the limit (docs/design.md): a lease clamps the clocks the caller
 * configured to what the budget grants, and remembers which it clamped; a
 * clock that then fires at the lease's end is named after whoever set the
 * lease - the operation budget (budget_exhausted) or the caller's
 * per-attempt ceiling (attempt_timeout).
 */
#include "end.h"

/* Bits of sg__rec.budget_limited: clocks the lease clamped.
 * SG__CLAMP_ATTEMPT also says who set the lease: set, the budget did (the
 * attempt timeout is off or longer than what remained); clear, the
 * caller's attempt timeout did. */
enum {
    SG__CLAMP_CONNECT = 1u << 0,
    SG__CLAMP_ATTEMPT = 1u << 1,
    SG__CLAMP_FIRST_ITEM = 1u << 2,
    SG__CLAMP_IDLE = 1u << 3,
    SG__CLAMP_STREAM = 1u << 4,
    /* the probe's (probe.c): its own connect timeout set its lease */
    SG__LEASE_PROBE_CONNECT = 1u << 5
};

/* Clamps a configured clock (0 = off) to the grant; records the clamp. */
static int64_t clamp(int64_t configured, int64_t granted, uint8_t bit, uint8_t *clamped) {
    if (configured <= 0) {
        return 0;
    }
    if (configured > granted) {
        *clamped |= bit;
        return granted;
    }
    return configured;
}

void sg__lease_clocks(sg_op_attempt *a, const sg_op_options *o, int64_t granted) {
    uint8_t clamped = 0;
    if (o->attempt_ns_ <= 0 || o->attempt_ns_ > granted) {
        /* The ceiling is the budget's, not the caller's attempt clock. */
        clamped |= SG__CLAMP_ATTEMPT;
    }
    a->connect_timeout_ns = clamp(o->connect_ns_, granted, SG__CLAMP_CONNECT, &clamped);
    a->first_item_timeout_ns =
        clamp(o->first_item_ns_, granted, SG__CLAMP_FIRST_ITEM, &clamped);
    a->idle_timeout_ns = clamp(o->idle_ns_, granted, SG__CLAMP_IDLE, &clamped);
    a->stream_timeout_ns =
        clamp(o->stream_total_ns_, granted, SG__CLAMP_STREAM, &clamped);
    sg__rec_w(a)->budget_limited = clamped;
}

void sg__lease_probe(sg_op_attempt *a, bool budget) {
    sg__rec_w(a)->budget_limited =
        budget ? SG__CLAMP_ATTEMPT | SG__CLAMP_CONNECT : SG__LEASE_PROBE_CONNECT;
}

const char *sg_op_attempt_lease_by(const sg_op *op, uint32_t i) {
    const sg_op_attempt *a = sg_op_attempt_at(op, i);
    return a != NULL ? sg__attempt_lease_by(a) : NULL;
}

const char *sg__attempt_lease_by(const sg_op_attempt *a) {
    const uint8_t lim = sg__rec_c(a)->budget_limited;
    return (lim & SG__CLAMP_ATTEMPT)         ? "budget"
           : (lim & SG__LEASE_PROBE_CONNECT) ? "connect"
                                             : "attempt";
}

/* The clamp bit of the clock whose expiry @oc is; false for an outcome
 * that is no clock's. */
static bool clock_bit(sg_outcome oc, uint8_t *bit) {
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

sg_outcome sg__attribute(const sg_op_attempt *a, sg_outcome oc) {
    /* A clock that fired before the lease's end (a transport's own
     * connect timeout) keeps its name. */
    uint8_t bit = 0;
    const uint8_t lim = sg__rec_c(a)->budget_limited;
    if (clock_bit(oc, &bit) && (lim & bit) && a->elapsed_ns >= a->attempt_timeout_ns) {
        return (lim & SG__CLAMP_ATTEMPT) ? SG_OUTCOME_BUDGET_EXHAUSTED
                                         : SG_OUTCOME_ATTEMPT_TIMEOUT;
    }
    return oc;
}
