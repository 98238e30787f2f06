/*
 * When an endpoint may be asked again: after a failure worth a retry, its
 * backoff sleep (exponential, full jitter), or the Retry-After its server
 * named - each endpoint its own not-before - and whether the wait for the
 * next one still fits the budget.  Steps 5 and 8 of sg_op_attempt_done
 * (end.h); the hedges read the same not-before (hedge.c).
 */
#include "end.h"

#include <stdlib.h>
#include <string.h>

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

static uint64_t op_random(sg_op *op) {
    if (sg__op_opts(op)->random_ != NULL) {
        return sg__op_opts(op)->random_(sg__op_opts(op)->random_ud_);
    }
    return sg__xorshift64s(&op->rng_);
}

/* ------------------------------------------------------------ not-before */

/* ep_ra_: bit e, ep_back_[e] is a Retry-After; bit 16 + e, one beyond
 * max_retry_after (it stops the operation when e is the one to wait for,
 * however much of it has passed by then). */
#define EP_RA_OVER(e) (1u << (16 + (e)))

/* A hedge's failure does not shorten the Retry-After of the attempt
 * beside it: a time already set stands. */
void sg__back_until(sg_op *op, uint32_t e, int64_t at, bool ra, int64_t ra_ns) {
    if (at < op->ep_back_[e]) {
        return;
    }
    op->ep_back_[e] = at;
    op->ep_ra_ &= ~((1u << e) | EP_RA_OVER(e));
    if (ra) {
        op->ep_ra_ |= 1u << e;
        if (ra_ns > sg__opt_max_retry_after(sg__op_opts(op))) {
            op->ep_ra_ |= EP_RA_OVER(e);
        }
    }
}

/* The server's time to come back: its retry-after-ms (OpenAI's and
 * Azure's milliseconds) when that holds a valid value, else its
 * Retry-After - the order the openai and @anthropic-ai/sdk clients read
 * them in (their retryRequest).  Only a response says it. */
bool sg__read_retry_after(sg_op_attempt *a, const sg_op_result *r, int64_t *ra_ns) {
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
        _Static_assert(SG__OP_RETRY_AFTER_RAW_MAX <= UINT8_MAX, "its length in a byte");
        free(rec->retry_after_raw); /* (none: an attempt ends once) */
        rec->retry_after_raw = malloc(keep + 2);
        if (rec->retry_after_raw != NULL) { /* (else the report says null) */
            rec->retry_after_raw[0] = (char)(unsigned char)keep;
            memcpy(rec->retry_after_raw + 1, r->retry_after, keep);
            rec->retry_after_raw[keep + 1] = '\0';
        }
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

/* ----------------------------------------------------------------- retry */

/* This endpoint may be tried again after its backoff sleep, or after its
 * Retry-After; the next attempt goes to the next endpoint (the same one
 * when there is one) and waits for that endpoint's own time only: it is
 * returned, and that wait is @e->delay_ns. */
static uint32_t back_off(sg_op *op, sg__end *e) {
    const sg_op_options *o = sg__op_opts(op);
    const uint32_t ep = e->a->endpoint;
    const uint32_t next = sg__ep_after(op, ep, 1);
    const bool ra = e->ra_valid && e->outcome == SG_OUTCOME_HTTP_ERROR;
    int64_t wait = e->ra_ns;
    if (!ra) {
        const int64_t ceil = sg__backoff_ceiling(sg__opt_backoff_base(o),
                                                 sg__opt_backoff_cap(o), op->count_ - 1);
        wait = sg__uniform(op_random(op), ceil);
    }
    sg__back_until(op, ep, sg_time_add(e->now, wait), ra, wait);
    e->delay_ns = op->ep_back_[next] > e->now ? op->ep_back_[next] - e->now : 0;
    return next;
}

/* Why the wait for endpoint @next does not fit, or SG_OP_REASON_NONE:
 * the sleep fits when, after it, an attempt of at least the minimum can
 * still be leased above the floor. */
static sg_op_reason wait_refused(const sg_op *op, const sg__end *e, uint32_t next) {
    const bool ra_wait = (op->ep_ra_ >> next & 1) != 0;
    const int64_t avail =
        sg_budget_remaining(&op->budget_, e->now) - sg_budget_floor(&op->budget_);
    const int64_t after = avail - e->delay_ns; /* both in 0 .. DURATION_MAX */
    if (ra_wait && (e->delay_ns > sg__opt_max_retry_after(sg__op_opts(op)) ||
                    (op->ep_ra_ & EP_RA_OVER(next)) != 0)) {
        return SG_OP_REASON_RETRY_AFTER_EXCEEDS_MAX;
    }
    if (after <= 0 || after < sg__op_min_attempt(op)) {
        return ra_wait ? SG_OP_REASON_RETRY_AFTER_EXCEEDS_BUDGET
                       : SG_OP_REASON_BACKOFF_EXCEEDS_BUDGET;
    }
    return SG_OP_REASON_NONE;
}

void sg__plan_retry(sg_op *op, sg__end *e) {
    if (op->count_ >= sg__op_record_cap(op)) {
        e->reason = SG_OP_REASON_ATTEMPTS_EXHAUSTED;
        return;
    }
    if (e->throttled) {
        e->reason = SG_OP_REASON_RETRY_THROTTLED;
        return;
    }
    const uint32_t next = back_off(op, e);
    const sg_op_reason refused = wait_refused(op, e, next);
    if (refused != SG_OP_REASON_NONE) {
        e->reason = refused;
    } else if (sg__reserve(op, op->count_) != 0) {
        /* The next attempt could not be recorded: it is not sent, since
         * the report and the observer must see every one. */
        e->reason = SG_OP_REASON_OUT_OF_MEMORY;
    } else {
        e->decision = SG_OP_RETRY;
        e->reason = SG_OP_REASON_RETRYABLE;
        op->ep_next_ = next;
    }
}
