/*
 * The managed multi's transfers whose read buffer goes back to the system
 * while they are quiet (sg_curl_global_init; readbuf.c says why that is
 * sound), in the order of their last read.
 *
 * A read moves its transfer to the tail, stamped with the time of the
 * read, so with a clock that never goes back the head is always the one
 * quiet longest: a touch, a removal and taking what is due are O(1), and
 * a loop that gives back every buffer quiet for quiet_ns visits only
 * those, never every open stream.
 */
#include "curl/internal.h"

#include "curl/readbuf.h"

void sg__curl_quiet_init(sg__curl_quiet *q) {
    q->head = q->tail = NULL;
    q->ns = SG__CURL_QUIET_DEFAULT;
    q->yield = false;
}

void sg__curl_quiet_set(sg__curl_quiet *q, int64_t ns) {
    q->ns = ns;
    while (ns == SG_TIME_NEVER && q->head != NULL) {
        sg__curl_quiet_remove(q, q->head);
    }
}

void sg__curl_quiet_remove(sg__curl_quiet *q, sg_curl_op *op) {
    if (!op->quiet_in) {
        return;
    }
    if (op->quiet_prev != NULL) {
        op->quiet_prev->quiet_next = op->quiet_next;
    } else {
        q->head = op->quiet_next;
    }
    if (op->quiet_next != NULL) {
        op->quiet_next->quiet_prev = op->quiet_prev;
    } else {
        q->tail = op->quiet_prev;
    }
    op->quiet_prev = op->quiet_next = NULL;
    op->quiet_in = false;
}

/* To the tail, stamped @now (no earlier than the tail's). */
bool sg__curl_quiet_touch(sg__curl_quiet *q, sg_curl_op *op, int64_t now) {
    if (q->ns == SG_TIME_NEVER) {
        return false;
    }
    sg__curl_quiet_remove(q, op);
    if (q->tail != NULL && now < q->tail->quiet_at) {
        now = q->tail->quiet_at;
    }
    op->quiet_at = now;
    op->quiet_prev = q->tail;
    op->quiet_next = NULL;
    if (q->tail != NULL) {
        q->tail->quiet_next = op;
    } else {
        q->head = op;
    }
    q->tail = op;
    op->quiet_in = true;
    return q->head == op;
}

/* When the transfer quiet longest is due to give its buffer back. */
static int64_t due(const sg__curl_quiet *q) {
    return q->head != NULL ? sg_time_add(q->head->quiet_at, q->ns) : SG_TIME_NEVER;
}

/* Half a quiet spell after the head is due, so that one wake-up gives
 * back every buffer due meanwhile (a give-back is no deadline; each
 * wake-up costs about what a give-back does); steps that run anyway give
 * back what is due by then.  One that yielded waits for the clock. */
int64_t sg__curl_quiet_wake(const sg__curl_quiet *q, int64_t clocks) {
    int64_t at = sg_time_add(due(q), q->ns / 2);
    return q->yield && at < clocks ? clocks : at;
}

/* A give-back (madvise and, at the next read, a page fault: a few us)
 * yields to a clock due within SG__CURL_TEARDOWN_SLACK, as removals do, up
 * to SG__CURL_TEARDOWN_MAX_WAIT: a thousand streams gone quiet together
 * do not delay a clock. */
void sg__curl_quiet_give_back(sg__curl_quiet *q, const sg_clock *clock, sg__dheap *heap) {
    q->yield = false;
    for (;;) {
        sg_curl_op *op = q->head;
        int64_t t = sg_clock_now(clock), at = due(q);
        if (op == NULL || at > t) {
            return;
        }
        if (!sg__curl_teardown_may_run(t, sg__dheap_earliest(heap, NULL), at)) {
            q->yield = true;
            return;
        }
        sg__curl_quiet_remove(q, op);
        /* only between calls into libcurl (the multi's step), only a
         * transfer still in it and not stopped */
        if (op->in_multi && !op->detach_pending && op->at.rbuf != NULL) {
            sg__curl_readbuf_give_back(op->at.rbuf);
        }
    }
}
