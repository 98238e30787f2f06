/*
 * The retry budget: gRPC's retry throttling (gRFC A6, "Retry Throttling")
 * as a token bucket that any number of operations share, lock-free.
 *
 * Tokens are kept in thousandths (token_ratio has three decimals, as in
 * gRPC), so every update is one integer compare-and-swap.
 */
#include <streamguard/policy.h>

#include <stdatomic.h>
#include <stdlib.h>

struct sg_retry_budget {
    _Atomic int64_t milli; /* tokens x 1000, in 0 .. max */
    int64_t max;           /* max_tokens x 1000 */
    int64_t ratio;         /* token_ratio x 1000, >= 1 */
};

int sg_retry_budget_new(sg_retry_budget **out, uint32_t max_tokens, double token_ratio) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    if (max_tokens == 0 || max_tokens > SG_RETRY_BUDGET_MAX_TOKENS ||
        !(token_ratio >= 0.001 && token_ratio <= 1.0)) { /* NaN fails too */
        return SG_ERANGE;
    }
    sg_retry_budget *b = malloc(sizeof(*b));
    if (b == NULL) {
        return SG_ENOMEM;
    }
    b->max = (int64_t)max_tokens * 1000;
    b->ratio = (int64_t)(token_ratio * 1000.0 + 1e-9); /* three decimals, down */
    atomic_init(&b->milli, b->max);
    *out = b;
    return 0;
}

void sg_retry_budget_free(sg_retry_budget *b) {
    free(b);
}

/* Adds @delta (negative for a failure), kept within 0 .. max. */
static int64_t add(sg_retry_budget *b, int64_t delta) {
    int64_t cur = atomic_load_explicit(&b->milli, memory_order_relaxed);
    for (;;) {
        int64_t next = cur + delta;
        next = next < 0 ? 0 : next > b->max ? b->max : next;
        if (atomic_compare_exchange_weak_explicit(
                &b->milli, &cur, next, memory_order_relaxed, memory_order_relaxed)) {
            return next;
        }
    }
}

bool sg_retry_budget_on_failure(sg_retry_budget *b) {
    if (b == NULL) {
        return true;
    }
    return add(b, -1000) * 2 > b->max; /* retries only above half */
}

void sg_retry_budget_on_success(sg_retry_budget *b) {
    if (b != NULL) {
        (void)add(b, b->ratio);
    }
}

bool sg_retry_budget_allows(const sg_retry_budget *b) {
    if (b == NULL) {
        return true;
    }
    return atomic_load_explicit(&b->milli, memory_order_relaxed) * 2 > b->max;
}

double sg_retry_budget_tokens(const sg_retry_budget *b) {
    if (b == NULL) {
        return 0;
    }
    return (double)atomic_load_explicit(&b->milli, memory_order_relaxed) / 1000.0;
}
