/*
 * An attempt's end: sg_op_attempt_done checks and records what the
 * transport says of one attempt, runs the steps that judge it (end.h) and
 * writes the verdict - in the record, for the caller, to the observer, and
 * for the operation when this end decides it.
 */
#include "health_internal.h"

#include <string.h>

/* Whether @r is a result at all: known outcome and phase, a status in
 * range, a Retry-After duration in range. */
static bool result_valid(const sg_op_result *r) {
    return (unsigned)r->outcome < (unsigned)SG_OUTCOME_COUNT_ &&
           (unsigned)r->phase < (unsigned)SG_PHASE_COUNT_ &&
           (r->http_status == 0 || (r->http_status >= 100 && r->http_status <= 599)) &&
           !(r->retry_after == NULL && r->has_retry_after_ns &&
             (r->retry_after_ns < 0 || r->retry_after_ns > SG_DURATION_MAX));
}

/* 1. The record of the attempt @r ends, into *@out: SG_EINVAL for no
 * result or one naming an attempt never planned, SG_ESTATE when it does
 * not run. */
static int find_attempt(sg_op *op, const sg_op_result *r, const sg_op_verdict *v,
                        sg_op_attempt **out) {
    if (!sg__op_started(op) || r == NULL || v == NULL || !result_valid(r)) {
        return SG_EINVAL;
    }
    if (op->count_ == 0 || r->attempt > op->count_) {
        return r->attempt > op->count_ ? SG_EINVAL : SG_ESTATE;
    }
    sg_op_attempt *a = sg__record_w(op, (r->attempt != 0 ? r->attempt : op->count_) - 1);
    /* a running attempt: the newest, or one beside it (hedging) - also a
     * loser that ends after the winner ended the operation */
    if (!a->running || (op->state_ != SG__OP_RUNNING && op->state_ != SG__OP_FINISHED)) {
        return SG_ESTATE;
    }
    *out = a;
    return 0;
}

/* A NUL-terminated copy of @src into @dst[@cap], cut to fit. */
static void keep_cut(char *dst, size_t cap, const char *src) {
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* 1. What the transport says of the attempt, into its record. */
static void record_result(sg__end *e) {
    const sg_op_result *r = e->r;
    sg_op_attempt *a = e->a;
    a->running = false;
    a->phase = r->phase;
    a->http_status = r->http_status;
    a->headers_received = r->headers_received;
    a->items = r->items;
    a->bytes = r->bytes;
    a->time_to_first_item_ns =
        (r->items > 0 && r->first_item_ns >= 0) ? r->first_item_ns : -1;
    a->elapsed_ns = sg_time_since(e->now, a->started_at);
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
}

/* 9. The verdict, in the record and in *@v, the one place either is
 * written; the observer hears of the end, and the operation ends unless
 * it retries - or goes on, when only this attempt's line stopped. */
static void give_verdict(sg_op *op, const sg__end *e, sg_op_verdict *v) {
    sg_op_attempt *a = e->a;
    a->retryable = e->retryable;
    a->decision = e->decision;
    a->reason = e->reason;
    memset(v, 0, sizeof(*v));
    v->decision = e->decision;
    v->reason = e->reason;
    v->outcome = e->outcome;
    v->retryable = e->retryable;
    v->retry_at = SG_TIME_NEVER;
    if (e->reason == SG_OP_REASON_HEDGE_LOST || e->reason == SG_OP_REASON_HEDGE_RUNNING) {
        /* this line stops; the operation goes on with the attempts beside
         * it, and another end decides it */
        sg__op_observe_attempt(op, a, true);
        return;
    }
    op->decider_ = a->n;
    v->partial = a->partial;
    v->outcome_unknown = a->outcome_unknown;
    if (e->decision == SG_OP_RETRY) {
        a->backoff_ns = e->delay_ns;
        v->delay_ns = e->delay_ns;
        v->retry_at = sg_time_add(e->now, e->delay_ns);
        op->retry_at_ = v->retry_at;
        op->state_ = SG__OP_BACKOFF;
        sg__op_observe_attempt(op, a, true);
    } else {
        sg__op_observe_attempt(op, a, true);
        sg__op_finish(op, e->now, e->outcome, e->decision, e->reason);
    }
}

int sg_op_attempt_done(sg_op *op, int64_t now, const sg_op_result *r, sg_op_verdict *v) {
    sg__end e = {.r = r,
                 .now = now,
                 .ra_ns = -1,
                 .decision = SG_OP_STOP,
                 .reason = SG_OP_REASON_NONE};
    int rc = find_attempt(op, r, v, &e.a);
    if (rc != 0) {
        return rc;
    }
    e.lost = sg__hedge_ended(op, e.a, r);
    record_result(&e);
    e.outcome = sg__attribute(e.a, e.lost ? SG_OUTCOME_CANCELLED : r->outcome);
    e.a->outcome = e.outcome;
    sg__classify(op, &e);
    sg__usage_attempt(op, e.a, r); /* (before any observer sees the record) */
    e.ra_valid = sg__read_retry_after(e.a, r, &e.ra_ns);
    sg__health_feed(op, &e); /* its endpoint's health learns of it */
    if (e.lost) {
        /* cancelled because another attempt delivered first: its line
         * stops, the operation goes on with the winner */
        e.reason = SG_OP_REASON_HEDGE_LOST;
    } else {
        sg__decide(op, &e);
        sg__charge_retry_budget(op, &e);
        if (!sg__hedges_run_on(op, &e) && e.retryable) {
            sg__plan_retry(op, &e);
        }
    }
    give_verdict(op, &e, v);
    return 0;
}
