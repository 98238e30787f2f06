/*
 * The first-token sketch: one endpoint's recent times to first token, in
 * bounded memory, updated without a lock, forgetting what is older than
 * its window (docs/design.md, "First-token sketch").
 *
 * Buckets are log-linear (HdrHistogram's shape, integer arithmetic, no
 * libm): below 2^17 ns (131 us) 16 linear buckets of 8.2 us; above it 16
 * buckets an octave up to 2^39 ns (550 s), everything longer in the last
 * one.  A bucket's midpoint is within 1/32 (3.2 %) of every value in it
 * (4.1 us below 131 us): the quantiles' documented error.
 *
 * Each bucket counts first tokens and censored observations apart: an
 * attempt that ran out of its clock, or was cancelled, before its first
 * token says only "later than this" - it leaves the risk set at its time
 * (Kaplan-Meier), never counts as a fast sample.
 *
 * Decay: three slots of half a window each.  Writers add to the slot of
 * the current half (now / half); the rotation to the next half - one
 * compare-and-swap, by whoever sees the new half first - clears the slot
 * after it, which no writer uses until the half after.  A reader sums the
 * current slot and the one before: a sample counts from when it is added
 * until between W/2 and W later.  Memory: 3 x 368 x 2 x 4 bytes (8.6 KiB)
 * and the epoch.  Pure functions of the caller's now; tests drive it by
 * hand (tests/unit/ttft_sketch_test.c).
 */
#ifndef STREAMGUARD_POLICY_TTFT_SKETCH_H
#define STREAMGUARD_POLICY_TTFT_SKETCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define SG__TTFT_SUB_BITS 4 /* 16 buckets an octave */
#define SG__TTFT_SUB (1 << SG__TTFT_SUB_BITS)
#define SG__TTFT_LOW_EXP 17  /* 2^17 ns: linear below */
#define SG__TTFT_HIGH_EXP 39 /* 2^39 ns: the last bucket from there on */
#define SG__TTFT_BUCKETS (SG__TTFT_SUB * (1 + SG__TTFT_HIGH_EXP - SG__TTFT_LOW_EXP))
#define SG__TTFT_SLOTS 3

typedef struct sg__ttft_slot {
    _Atomic uint32_t first[SG__TTFT_BUCKETS];    /* first tokens, at their time */
    _Atomic uint32_t censored[SG__TTFT_BUCKETS]; /* none by this time */
} sg__ttft_slot;

typedef struct sg__ttft_sketch {
    _Atomic int64_t epoch; /* the half writers use (slot epoch % 3); INT64_MIN: none */
    sg__ttft_slot slot[SG__TTFT_SLOTS];
} sg__ttft_sketch;

/* What a reader sees of a sketch at an instant: the live halves summed. */
typedef struct sg__ttft_view {
    uint32_t first[SG__TTFT_BUCKETS];
    uint32_t censored[SG__TTFT_BUCKETS];
    uint64_t n_first;    /* first tokens */
    uint64_t n_censored; /* censored observations */
} sg__ttft_view;

/* Empty (not thread-safe: before any use). */
void sg__ttft_init(sg__ttft_sketch *s);

/* The bucket of @ns (>= 0; longer than 2^39 ns: the last one), the value
 * that stands for bucket @i (its midpoint), and its upper edge: every
 * value in it is below, by at most 1/16 of it (8.2 us below 131 us; the
 * last bucket's: INT64_MAX). */
uint32_t sg__ttft_bucket(int64_t ns);
int64_t sg__ttft_value(uint32_t i);
int64_t sg__ttft_upper(uint32_t i);

/* Adds at @now one observation of @ns: a first token after @ns, or
 * (@censored) none by @ns.  @half: half the window (> 0).  Lock-free. */
void sg__ttft_add(sg__ttft_sketch *s, int64_t half, int64_t now, int64_t ns,
                  bool censored);

/* What @s holds at @now, into @v.  Lock-free; it writes nothing. */
void sg__ttft_read(const sg__ttft_sketch *s, int64_t half, int64_t now, sg__ttft_view *v);

/* The bucket of the Kaplan-Meier @q-quantile of @v (0 < q < 1): the
 * first by whose end a fraction @q of first tokens came; -1 when @v has
 * no first token, or when what was censored leaves @q beyond what was
 * seen (the quantile is later than the last censored time: unknown). */
int sg__ttft_quantile_at(const sg__ttft_view *v, double q);
/* Its value (the bucket's midpoint: within 1/32), -1 when unknown. */
int64_t sg__ttft_quantile(const sg__ttft_view *v, double q);

/* Observations a @q-quantile needs before it is trusted: 5 / (1 - q)
 * rounded - about five expected beyond it - and at least 10 (p95: 100,
 * median: 10, p99: 500).  0 for a @q out of (0, 1). */
uint32_t sg__ttft_min_samples(double q);

#endif /* STREAMGUARD_POLICY_TTFT_SKETCH_H */
