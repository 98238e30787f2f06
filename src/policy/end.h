/*
 * An attempt's end, in steps.  sg_op_attempt_done (attempt.c) takes the
 * result of one attempt and runs these in order, each in the file of its
 * concern, on one sg__end that carries what the steps before worked out:
 *
 *   1. the result checked and recorded ........................ attempt.c
 *   2. the hedges beside it: one fewer runs, did it lose ........ hedge.c
 *   3. who set the limit: the outcome as recorded ......... attribution.c
 *   4. sent, safe, complete: partial, outcome unknown ........... decide.c
 *   5. the server's time to come back (Retry-After) ............ backoff.c
 *   6. the reason, and the retry budget's say ................... decide.c
 *   7. hedges still running: this line stops ..................... hedge.c
 *   8. a retry: the endpoint's not-before, a sleep that fits ... backoff.c
 *   9. the verdict, written once ............................... attempt.c
 */
#ifndef STREAMGUARD_POLICY_END_H
#define STREAMGUARD_POLICY_END_H

#include "internal.h"

typedef struct sg__end {
    const sg_op_result *r; /* what the transport says of the attempt */
    int64_t now;
    sg_op_attempt *a;   /* its record */
    sg_outcome outcome; /* as recorded: after who set the limit */
    bool lost;          /* another attempt delivered first: it lost a hedge */
    bool safe;          /* to repeat: not sent, or a repeatable request */
    bool ra_valid;      /* the server named a valid time to come back, */
    int64_t ra_ns;      /* this long from now */
    bool retryable;
    bool throttled; /* the retry budget denied a retry */
    sg_op_decision decision;
    sg_op_reason reason;
    int64_t delay_ns; /* the sleep before the retry */
} sg__end;

/* 2. One fewer attempt runs; true when @a lost a hedge (another delivered
 * first), and @a is the winner when it is the first to deliver (hedge.c). */
bool sg__hedge_ended(sg_op *op, const sg_op_attempt *a, const sg_op_result *r);

/* 3. @oc, as recorded for attempt @a: a clock the lease shortened that
 * fired at the lease's end is named after whoever set the lease
 * (attribution.c). */
sg_outcome sg__attribute(const sg_op_attempt *a, sg_outcome oc);

/* 4. Whether the request was sent and is safe to repeat, and whether the
 * server's answer settled its effect: the record's sent, partial and
 * outcome_unknown, and @e->safe (decide.c). */
void sg__classify(const sg_op *op, sg__end *e);

/* 5. The server's time to come back, into @a: true with *@ra_ns when a
 * valid one was given (backoff.c). */
bool sg__read_retry_after(sg_op_attempt *a, const sg_op_result *r, int64_t *ra_ns);

/* 6. The decision, the reason and whether the end is worth a retry
 * (decide.c). */
void sg__decide(const sg_op *op, sg__end *e);
/* 6. The retry budget shared with other operations: a success gives back,
 * a retryable failure takes, and below half the retry is denied
 * (@e->throttled; decide.c). */
void sg__charge_retry_budget(const sg_op *op, sg__end *e);

/* 7. When hedged attempts still run beside a failed one, its line stops
 * and the operation waits for them: true then, with the decision and
 * reason set (hedge.c). */
bool sg__hedges_run_on(sg_op *op, sg__end *e);

/* 8. A retryable end: this endpoint's not-before, and the retry to the
 * next endpoint when a record is left, the retry budget allows it and its
 * wait fits the budget - else the reason it cannot run (backoff.c). */
void sg__plan_retry(sg_op *op, sg__end *e);

/* Endpoint @e may be tried again from @at (@ra: the server's Retry-After
 * named it, of @ra_ns; else a backoff) - never earlier than a time already
 * set (backoff.c). */
void sg__back_until(sg_op *op, uint32_t e, int64_t at, bool ra, int64_t ra_ns);

#endif /* STREAMGUARD_POLICY_END_H */
