/*
 * The ledger as a policy observer: what an operation's intent, attempts and
 * resolution become in the ledger.  The only part of the ledger that reads
 * an sg_op; the transports never see any of it.
 */
#include "ledger/internal.h"
#include "policy/internal.h"

sg_ledger_resolution sg_ledger_resolution_of(const sg_op *op) {
    if (op == NULL) {
        return SG_LEDGER_UNKNOWN;
    }
    /* Unknown first: an unsafe request that may have taken effect is never
     * "failed", whatever came after it (docs/design.md, retry rule 4). */
    uint32_t n = sg_op_attempt_count(op);
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        if (a != NULL && a->outcome_unknown) {
            return SG_LEDGER_UNKNOWN;
        }
    }
    return sg_op_outcome(op) == SG_OUTCOME_OK ? SG_LEDGER_DONE : SG_LEDGER_FAILED;
}

const char *sg_ledger_op_key(const sg_op *op, const char *fallback) {
    const char *key = sg_op_idempotency_key(op);
    return key != NULL ? key : fallback;
}

int sg_ledger_op_intent(sg_ledger *l, const char *key, const sg_op *op, const char *url) {
    const char *method = sg_op_method(op);
    if (method == NULL || key == NULL || url == NULL) {
        return SG_EINVAL;
    }
    /* The intent comes out of the operation's budget: waiting for another
     * process's lock past what could be leased would only end in a
     * refusal, later.  (The budget is on CLOCK_MONOTONIC, the default
     * clock of every transport, as the lock wait is.) */
    const sg_budget *b = sg_op_budget(op);
    int64_t until = sg_budget_deadline(b) - sg_budget_floor(b);
    return sg__ledger_intent_until(l, key, method, url, until);
}

int sg_ledger_op_attempt(sg_ledger *l, const char *key, const sg_op *op) {
    uint32_t n = sg_op_attempt_count(op);
    if (op == NULL || n == 0) {
        return SG_EINVAL;
    }
    /* the latest that has ended: a hedge started after it may still run */
    for (uint32_t i = n; i > 0; i--) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i - 1);
        if (a != NULL && !a->running) {
            return sg_ledger_attempt_record(l, key, a);
        }
    }
    return SG_EINVAL;
}

int sg_ledger_op_resolve(sg_ledger *l, const char *key, const sg_op *op) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    return sg_ledger_resolve(l, key, sg_ledger_resolution_of(op), sg_op_outcome(op));
}

/* ------------------------------------------------------------ observer */

static int obs_intent(const sg_op *op, const sg_op_intent *intent, void *user_data) {
    const sg_ledger_binding *b = user_data;
    if (b == NULL || b->ledger == NULL) {
        return SG_EINVAL;
    }
    return sg_ledger_op_intent(b->ledger, sg_ledger_op_key(op, b->fallback_key), op,
                               intent->target);
}

/* @rec is the attempt that ended: with a hedge beside it, not the latest
 * started, which is still running. */
static int obs_attempt_end(const sg_op *op, const sg_op_attempt *rec, void *user_data) {
    const sg_ledger_binding *b = user_data;
    return sg_ledger_attempt_record(b->ledger, sg_ledger_op_key(op, b->fallback_key),
                                    rec);
}

static int obs_resolve(const sg_op *op, void *user_data) {
    const sg_ledger_binding *b = user_data;
    return sg_ledger_op_resolve(b->ledger, sg_ledger_op_key(op, b->fallback_key), op);
}

/* The intent off the loop (async.c): the same record, bounded the same
 * way as sg_ledger_op_intent, made by the handle's intent thread. */
static int obs_start_intent(const sg_op *op, const sg_op_intent *intent, void *user_data,
                            sg_op_intent_wait *wait) {
    const sg_ledger_binding *b = user_data;
    const char *key = sg_ledger_op_key(op, b != NULL ? b->fallback_key : NULL);
    if (b == NULL || b->ledger == NULL || key == NULL || intent->target == NULL ||
        intent->method == NULL) {
        return SG_EINVAL;
    }
    const sg_budget *bud = sg_op_budget(op);
    sg__intent_job *j;
    int rv = sg__ledger_intent_start(b->ledger, key, intent->method, intent->target,
                                     sg_budget_deadline(bud) - sg_budget_floor(bud), &j);
    if (rv != 0) {
        return rv;
    }
    wait->fd = sg__ledger_intent_fd(j);
    wait->handle = j;
    return SG_EINPROGRESS;
}

static int obs_poll_intent(const sg_op *op, void *handle, void *user_data) {
    (void)op;
    const sg_ledger_binding *b = user_data;
    return sg__ledger_intent_poll(b->ledger, handle);
}

static void obs_abandon_intent(const sg_op *op, void *handle, sg_outcome outcome,
                               void *user_data) {
    (void)op;
    const sg_ledger_binding *b = user_data;
    sg__ledger_intent_abandon(b->ledger, handle, outcome);
}

/* An observer with static storage: built by the policy's own initializer,
 * so the ledger never names the observer's fields. */
static const sg_op_observer ledger_observer =
    SG__OP_OBSERVER_INIT(obs_intent, NULL, obs_attempt_end, obs_resolve, obs_start_intent,
                         obs_poll_intent, obs_abandon_intent);

const sg_op_observer *sg_ledger_observer(void) {
    return &ledger_observer;
}
