/*
 * The first-token sketch (ttft_sketch.h): log-linear buckets of first
 * tokens and censored observations in three rotating half-window slots,
 * and the Kaplan-Meier quantile of what the live ones hold.
 */
#include "ttft_sketch.h"

#include <string.h>

#define LINEAR_SHIFT (SG__TTFT_LOW_EXP - SG__TTFT_SUB_BITS) /* 8.2 us buckets */
#define NEVER INT64_MIN

static void clear(sg__ttft_slot *sl) {
    for (uint32_t i = 0; i < SG__TTFT_BUCKETS; i++) {
        atomic_store_explicit(&sl->first[i], 0, memory_order_relaxed);
        atomic_store_explicit(&sl->censored[i], 0, memory_order_relaxed);
    }
}

void sg__ttft_init(sg__ttft_sketch *s) {
    for (int k = 0; k < SG__TTFT_SLOTS; k++) {
        clear(&s->slot[k]);
    }
    atomic_store(&s->epoch, NEVER);
}

uint32_t sg__ttft_bucket(int64_t ns) {
    const uint64_t v = ns > 0 ? (uint64_t)ns : 0;
    if (v < (UINT64_C(1) << SG__TTFT_LOW_EXP)) {
        return (uint32_t)(v >> LINEAR_SHIFT);
    }
    const int e = 63 - __builtin_clzll(v);
    if (e >= SG__TTFT_HIGH_EXP) {
        return SG__TTFT_BUCKETS - 1;
    }
    const uint32_t sub = (uint32_t)(v >> (e - SG__TTFT_SUB_BITS)) & (SG__TTFT_SUB - 1);
    return (uint32_t)(SG__TTFT_SUB * (1 + e - SG__TTFT_LOW_EXP)) + sub;
}

/* Bucket @i's lower edge and width. */
static void bounds(uint32_t i, int64_t *lo, int64_t *width) {
    if (i < SG__TTFT_SUB) {
        *width = INT64_C(1) << LINEAR_SHIFT;
        *lo = (int64_t)i * *width;
        return;
    }
    const int e = SG__TTFT_LOW_EXP + (int)(i / SG__TTFT_SUB) - 1;
    *width = INT64_C(1) << (e - SG__TTFT_SUB_BITS);
    *lo = (INT64_C(1) << e) + (int64_t)(i % SG__TTFT_SUB) * *width;
}

int64_t sg__ttft_value(uint32_t i) {
    int64_t lo, width;
    bounds(i, &lo, &width);
    return lo + width / 2;
}

int64_t sg__ttft_upper(uint32_t i) {
    if (i >= SG__TTFT_BUCKETS - 1) {
        return INT64_MAX; /* everything longer is in it */
    }
    int64_t lo, width;
    bounds(i, &lo, &width);
    return lo + width;
}

static uint32_t slot_of(int64_t epoch) {
    return (uint32_t)(((epoch % SG__TTFT_SLOTS) + SG__TTFT_SLOTS) % SG__TTFT_SLOTS);
}

static int64_t epoch_of(int64_t half, int64_t now) {
    return (now > 0 ? now : 0) / (half > 0 ? half : 1);
}

/* Moves @s to half @e when it is later (or far earlier: the window was
 * changed).  The one whose compare-and-swap wins clears: the slot after
 * @e for a step of one half (writers reach it only a half later), every
 * slot for a jump (nothing in them is live any more). */
static void rotate(sg__ttft_sketch *s, int64_t e) {
    int64_t cur = atomic_load(&s->epoch);
    while (cur == NEVER || e > cur || e < cur - 1) {
        if (atomic_compare_exchange_weak(&s->epoch, &cur, e)) {
            if (cur != NEVER && e == cur + 1) {
                clear(&s->slot[slot_of(e + 1)]);
            } else {
                for (int k = 0; k < SG__TTFT_SLOTS; k++) {
                    clear(&s->slot[k]);
                }
            }
            return;
        }
    }
}

void sg__ttft_add(sg__ttft_sketch *s, int64_t half, int64_t now, int64_t ns,
                  bool censored) {
    const int64_t e = epoch_of(half, now);
    rotate(s, e);
    /* @e is the current half or the one before (a writer that read its
     * clock just before a rotation): both are live */
    sg__ttft_slot *sl = &s->slot[slot_of(e)];
    _Atomic uint32_t *c =
        censored ? &sl->censored[sg__ttft_bucket(ns)] : &sl->first[sg__ttft_bucket(ns)];
    atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

static void add_slot(sg__ttft_view *v, const sg__ttft_slot *sl) {
    for (uint32_t i = 0; i < SG__TTFT_BUCKETS; i++) {
        const uint32_t f = atomic_load_explicit(&sl->first[i], memory_order_relaxed);
        const uint32_t c = atomic_load_explicit(&sl->censored[i], memory_order_relaxed);
        v->first[i] += f;
        v->censored[i] += c;
        v->n_first += f;
        v->n_censored += c;
    }
}

void sg__ttft_read(const sg__ttft_sketch *s, int64_t half, int64_t now,
                   sg__ttft_view *v) {
    memset(v, 0, sizeof(*v));
    const int64_t cur = atomic_load(&s->epoch);
    if (cur == NEVER) {
        return;
    }
    const int64_t e = epoch_of(half, now);
    if (e <= cur + 1) {
        /* the newest half written (the one @now is in, or the one just
         * before a half nobody has written yet) */
        add_slot(v, &s->slot[slot_of(cur)]);
    }
    if (e <= cur) {
        add_slot(v, &s->slot[slot_of(cur - 1)]); /* and the one before it */
    }
}

int sg__ttft_quantile_at(const sg__ttft_view *v, double q) {
    if (v->n_first == 0 || !(q > 0 && q < 1)) {
        return -1;
    }
    /* Kaplan-Meier: S drops by d/n at each bucket with first tokens, n
     * those still at risk; at a tie the first tokens come before the
     * censored (which leave the risk set after them) */
    uint64_t at_risk = v->n_first + v->n_censored;
    double surv = 1.0;
    for (uint32_t i = 0; i < SG__TTFT_BUCKETS && at_risk > 0; i++) {
        if (v->first[i] > 0) {
            surv *= 1.0 - (double)v->first[i] / (double)at_risk;
            if (1.0 - surv >= q - 1e-9) {
                return (int)i;
            }
        }
        at_risk -= (uint64_t)v->first[i] + v->censored[i];
    }
    return -1;
}

int64_t sg__ttft_quantile(const sg__ttft_view *v, double q) {
    const int i = sg__ttft_quantile_at(v, q);
    return i < 0 ? -1 : sg__ttft_value((uint32_t)i);
}

uint32_t sg__ttft_min_samples(double q) {
    if (!(q > 0 && q < 1)) {
        return 0;
    }
    const double n = 5.0 / (1.0 - q) + 0.5;
    if (n >= 4e9) {
        return UINT32_MAX;
    }
    return n < 10 ? 10 : (uint32_t)n;
}
