/*
 * An operation's life and its attempt records: SG__OP_INLINE_ATTEMPTS
 * inline, the rest in blocks allocated as retries need them (docs/api.md,
 * "Memory of an operation").
 */
#include "health_internal.h"

#include <stdlib.h>
#include <string.h>

/* Records past the inline ones live in blocks that double: block k holds
 * the 0-based records [I << k, I << (k + 1)), I = SG__OP_INLINE_ATTEMPTS,
 * cut to max_attempts.  A block is never moved, so a record's address
 * holds for the operation's life, and finding one costs at most
 * SG__OP_BLOCKS steps. */
_Static_assert(((uint64_t)SG__OP_INLINE_ATTEMPTS << SG__OP_BLOCKS) >=
                   SG_OP_MAX_ATTEMPTS + 1,
               "SG__OP_BLOCKS blocks must reach SG_OP_MAX_ATTEMPTS and a probe's record");

/* The block of record @i (>= SG__OP_INLINE_ATTEMPTS) and its first record. */
static unsigned sg__block_of(uint32_t i, uint32_t *first) {
    unsigned k = 0;
    uint32_t lo = SG__OP_INLINE_ATTEMPTS;
    while (k + 1 < SG__OP_BLOCKS && i >= 2 * lo) {
        lo *= 2;
        k++;
    }
    *first = lo;
    return k;
}

/* Record @i (>= SG__OP_INLINE_ATTEMPTS) in its block; NULL when the block
 * was not allocated. */
static sg__rec *sg__in_block(const sg_op *op, uint32_t i) {
    uint32_t first = 0;
    unsigned k = sg__block_of(i, &first);
    return op->blocks_ != NULL && op->blocks_[k] != NULL ? op->blocks_[k] + (i - first)
                                                         : NULL;
}

const sg_op_attempt *sg__record(const sg_op *op, uint32_t i) {
    const sg__rec *r = i < SG__OP_INLINE_ATTEMPTS ? &op->inline_[i] : sg__in_block(op, i);
    return r != NULL ? &r->pub : NULL;
}

sg_op_attempt *sg__record_w(sg_op *op, uint32_t i) {
    sg__rec *r = i < SG__OP_INLINE_ATTEMPTS ? &op->inline_[i] : sg__in_block(op, i);
    return r != NULL ? &r->pub : NULL;
}

void sg__op_attempt_set_profile(sg_op *op, uint32_t attempt, const char *name) {
    sg_op_attempt *a =
        attempt > 0 && attempt <= op->count_ ? sg__record_w(op, attempt - 1) : NULL;
    if (a != NULL) {
        sg__rec_w(a)->profile = name;
    }
}

static void *sg__op_alloc(const sg_op *op, void *p, size_t size) {
    if (op->alloc_ != NULL) {
        return op->alloc_(op->alloc_ud_, p, size);
    }
    if (size == 0) {
        free(p);
        return NULL;
    }
    return malloc(size);
}

void sg__op_set_alloc(sg_op *op, void *(*fn)(void *ud, void *p, size_t size), void *ud) {
    op->alloc_ = fn;
    op->alloc_ud_ = ud;
}

/* Gives record @i storage: 0, or SG_ENOMEM when its block cannot be had
 * (nothing changes then). */
int sg__reserve(sg_op *op, uint32_t i) {
    if (sg__record(op, i) != NULL) {
        return 0;
    }
    uint32_t first = 0;
    unsigned k = sg__block_of(i, &first);
    const uint32_t max = sg__op_record_cap(op);
    const uint32_t n = max - first < first ? max - first : first; /* i < max */
    if (op->blocks_ == NULL &&
        (op->blocks_ = calloc(SG__OP_BLOCKS, sizeof(*op->blocks_))) == NULL) {
        return SG_ENOMEM;
    }
    sg__rec *b = sg__op_alloc(op, NULL, (size_t)n * sizeof(*b));
    if (b == NULL) {
        return SG_ENOMEM;
    }
    op->blocks_[k] = b;
    return 0;
}

void sg__op_reset(sg_op *op) {
    sg__health_op_reset(op); /* before its records go: their slots */
    if (sg_op_intent_pending(op) && op->intent_ != NULL) {
        /* discarded with its intent in flight: the observer gets its handle
         * back (as when the operation is cancelled there), never a leak */
        void *handle = op->intent_;
        op->intent_ = NULL;
        const sg__observer_ref *aref = sg__op_async_observer(sg__op_opts(op));
        aref->obs->abandon_intent(op, handle, SG_OUTCOME_CANCELLED, aref->ud);
    }
    for (uint32_t i = 0; i < op->count_; i++) {
        sg_op_attempt *a = sg__record_w(op, i);
        if (a != NULL) {
            free(sg__rec_w(a)->retry_after_raw);
        }
    }
    for (unsigned k = 0; op->blocks_ != NULL && k < SG__OP_BLOCKS; k++) {
        if (op->blocks_[k] != NULL) {
            (void)sg__op_alloc(op, op->blocks_[k], 0);
        }
    }
    free(op->blocks_);
    if (op->ep_back_ != &op->ep_back1_) {
        free(op->ep_back_); /* more than one endpoint (NULL: none) */
    }
    sg__op_options_unhold(op->opts_);
    void *(*alloc)(void *, void *, size_t) = op->alloc_;
    void *alloc_ud = op->alloc_ud_;
    memset(op, 0, sizeof(*op));
    op->alloc_ = alloc; /* the test seam outlives a restart */
    op->alloc_ud_ = alloc_ud;
}

int sg_op_new(sg_op **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out)); /* zero: never started */
    return *out != NULL ? 0 : SG_ENOMEM;
}

void sg_op_free(sg_op *op) {
    if (op != NULL) {
        sg__op_reset(op);
        free(op);
    }
}
