/*
 * What an attempt's end means (docs/design.md, "Retry rules"): whether the
 * request was sent and is safe to repeat, whether the server's answer
 * settled its effect, and from that the decision and its reason - steps 4
 * and 6 of sg_op_attempt_done (end.h).
 */
#include "end.h"

void sg__classify(const sg_op *op, sg__end *e) {
    const sg_op_result *r = e->r;
    const sg_outcome oc = e->outcome;
    /* Err towards "sent": a request the server may have seen must be
     * treated as seen. */
    const bool sent = r->sent || r->headers_received || r->items > 0 ||
                      r->phase >= SG_PHASE_WAIT_HEADERS;
    e->safe = !sent || sg_op_options_repeatable(sg__op_opts(op));
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
    e->a->sent = sent;
    /* delivered and then broke: never an attempt that ended ok */
    e->a->partial = oc != SG_OUTCOME_OK && (r->partial || r->items > 0);
    e->a->outcome_unknown = sent && !e->safe && !complete;
}

/* A failure the provider reported inside the stream, before the first
 * token (after it, partial caught it): a transient type is worth a retry
 * when the request is safe to repeat; any other the same request would
 * get again. */
static void provider_error(sg__end *e) {
    if (!e->r->provider_retryable) {
        e->reason = SG_OP_REASON_OUTCOME_NOT_RETRYABLE;
    } else if (e->safe) {
        e->retryable = true;
    } else {
        e->reason = SG_OP_REASON_NOT_SAFE_TO_RETRY;
    }
}

static void http_error(const sg_op *op, sg__end *e) {
    const sg_op_result *r = e->r;
    const sg_op_options *o = sg__op_opts(op);
    if (r->http_status == 0 || !r->headers_received) {
        /* No status: the response never completed; like a transport
         * error (safe here, else outcome_unknown). */
        e->retryable = e->safe;
    } else if (!sg__opt_status_retryable(o, r->http_status)) {
        e->decision = SG_OP_DONE;
        e->reason = SG_OP_REASON_FINAL_STATUS;
    } else if (r->provider_final) {
        /* a status worth a retry, but the body says the same request
         * fails until something else changes (a spend limit reached): the
         * provider's final answer */
        e->decision = SG_OP_DONE;
        e->reason = SG_OP_REASON_PROVIDER_FINAL;
    } else if (e->safe) {
        e->retryable = true;
    } else if (!(o->set_ & SG__OPT_NO_REJECTION_RETRY) &&
               (r->http_status == 429 ||
                ((r->http_status == 503 || r->http_status == 529) && e->ra_valid))) {
        /* The server refused before processing: a rate limiter's 429, or
         * an overloaded server's 503 (Anthropic's 529) that names a time
         * to come back. */
        e->retryable = true;
    } else {
        e->reason = SG_OP_REASON_NOT_SAFE_TO_RETRY;
    }
}

void sg__decide(const sg_op *op, sg__end *e) {
    if (e->outcome == SG_OUTCOME_OK) {
        e->decision = SG_OP_DONE;
        e->reason = SG_OP_REASON_OK;
        return;
    }
    if (e->a->partial) {
        e->reason = SG_OP_REASON_PARTIAL_STREAM;
        return;
    }
    if (e->a->outcome_unknown) {
        e->reason = SG_OP_REASON_OUTCOME_UNKNOWN;
        return;
    }
    switch (e->outcome) {
    case SG_OUTCOME_BUDGET_EXHAUSTED:
        e->reason = SG_OP_REASON_BUDGET_EXHAUSTED;
        break;
    case SG_OUTCOME_CANCELLED:
    case SG_OUTCOME_CAP_EXCEEDED:
    case SG_OUTCOME_PROTOCOL_ERROR:
    case SG_OUTCOME_REFUSED:
        /* The caller gave up, the peer ran away or broke the protocol, or
         * the library refused to send what it could not describe truly:
         * the same request would do the same again. */
        e->reason = SG_OP_REASON_OUTCOME_NOT_RETRYABLE;
        break;
    case SG_OUTCOME_PROVIDER_ERROR:
        provider_error(e);
        break;
    case SG_OUTCOME_HTTP_ERROR:
        http_error(op, e);
        break;
    default:
        /* Timeouts, truncated, transport_error: safe here, since a sent
         * unsafe request was caught as outcome_unknown. */
        e->retryable = e->safe;
        if (!e->retryable) {
            e->reason = SG_OP_REASON_NOT_SAFE_TO_RETRY;
        }
        break;
    }
}

void sg__charge_retry_budget(const sg_op *op, sg__end *e) {
    sg_retry_budget *budget = sg__op_opts(op)->retry_budget_;
    if (e->outcome == SG_OUTCOME_OK) {
        sg_retry_budget_on_success(budget);
    } else if (e->retryable && budget != NULL) {
        e->throttled = !sg_retry_budget_on_failure(budget);
    }
}
