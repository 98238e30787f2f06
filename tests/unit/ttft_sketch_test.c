/*
 * The first-token sketch (src/policy/ttft_sketch.h): buckets within their
 * documented error, quantiles against the exact ones, censoring
 * (Kaplan-Meier) against a direct computation, the window's decay and
 * updates from several threads.  Time is a hand-driven clock
 * (sg_manual_clock).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/core.h>

#include "policy/ttft_sketch.h"

#define HALF SG_SEC(10) /* a window of 20 s */

static sg__ttft_sketch *new_sketch(void) {
    sg__ttft_sketch *s = malloc(sizeof(*s));
    assert_non_null(s);
    sg__ttft_init(s);
    return s;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1du;
}

/* A value from 2^lo to 2^hi ns, uniform in its logarithm's octave and
 * within it. */
static int64_t log_uniform(int lo, int hi) {
    const int e = lo + (int)(next_random() % (uint64_t)(hi - lo));
    return (INT64_C(1) << e) + (int64_t)(next_random() % (UINT64_C(1) << e));
}

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether @got stands for @exact within the documented error: 1/32 of
 * it, or 4.1 us below 131 us. */
static bool within_error(int64_t got, int64_t exact) {
    const int64_t d = got > exact ? got - exact : exact - got;
    return exact < (INT64_C(1) << 17) ? d <= 4096 : d * 32 <= exact;
}

static sg__ttft_view view_at(const sg__ttft_sketch *s, int64_t now) {
    sg__ttft_view v;
    sg__ttft_read(s, HALF, now, &v);
    return v;
}

/* ---------------------------------------------------------------- buckets */

static void every_value_is_within_the_error_of_its_bucket(void **state) {
    (void)state;
    uint32_t last = 0;
    int64_t probes = 0;
    for (int64_t v = 0; v < (INT64_C(1) << 40); v = v < 64 ? v + 1 : v + v / 61 + 1) {
        const uint32_t b = sg__ttft_bucket(v);
        assert_true(b >= last); /* monotonic */
        last = b;
        assert_true(b < SG__TTFT_BUCKETS);
        if (v < (INT64_C(1) << 39)) {
            assert_true(within_error(sg__ttft_value(b), v));
            /* the upper edge: above every value in it, by 1/16 at most
             * (the last bucket's is unbounded: it holds all longer) */
            const int64_t up = sg__ttft_upper(b);
            assert_true(up > v);
            if (b < SG__TTFT_BUCKETS - 1) {
                assert_true(v < (INT64_C(1) << 17) ? up - v <= 8192 : (up - v) * 16 <= v);
            }
            /* the value stands in the bucket it stands for */
            assert_int_equal(sg__ttft_bucket(sg__ttft_value(b)), b);
        }
        probes++;
    }
    for (int i = 0; i < 100000; i++) {
        const int64_t v = log_uniform(0, 39);
        assert_true(within_error(sg__ttft_value(sg__ttft_bucket(v)), v));
    }
    assert_int_equal(sg__ttft_bucket(-5), 0);
    assert_int_equal(sg__ttft_bucket(INT64_MAX), SG__TTFT_BUCKETS - 1);
    assert_int_equal(sg__ttft_bucket(INT64_C(1) << 39), SG__TTFT_BUCKETS - 1);
    print_message("%lld probes, %d buckets\n", (long long)probes, SG__TTFT_BUCKETS);
}

/* --------------------------------------------------------------- quantiles */

/* @n values of @draw added at one instant; each quantile of the sketch
 * within the error of the exact one (the ceil(q n)-th smallest). */
static void check_quantiles(const char *what, int64_t (*draw)(void), int n) {
    sg__ttft_sketch *s = new_sketch();
    int64_t *v = malloc((size_t)n * sizeof(*v));
    assert_non_null(v);
    for (int i = 0; i < n; i++) {
        v[i] = draw();
        sg__ttft_add(s, HALF, SG_SEC(5), v[i], false);
    }
    qsort(v, (size_t)n, sizeof(*v), cmp_i64);
    const sg__ttft_view view = view_at(s, SG_SEC(5));
    assert_int_equal(view.n_first, n);
    static const double qs[] = {0.5, 0.9, 0.95, 0.99, 0.999};
    for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
        size_t rank = (size_t)(qs[i] * n);
        rank += (double)rank < qs[i] * n ? 1 : 0; /* ceil */
        const int64_t exact = v[rank - 1];
        const int64_t got = sg__ttft_quantile(&view, qs[i]);
        print_message("%-12s q=%.3f exact %12lld got %12lld\n", what, qs[i],
                      (long long)exact, (long long)got);
        assert_true(within_error(got, exact));
    }
    free(v);
    free(s);
}

static int64_t uniform_50_500ms(void) {
    return SG_MS(50) + (int64_t)(next_random() % (uint64_t)SG_MS(450));
}
static int64_t log_spread(void) {
    return log_uniform(12, 36); /* 4 us .. 69 s */
}
static int64_t two_point(void) {
    return next_random() % 100 < 90 ? SG_MS(50) + (int64_t)(next_random() % SG_MS(5))
                                    : SG_SEC(2) + (int64_t)(next_random() % SG_MS(50));
}

static void quantiles_are_within_the_documented_error(void **state) {
    (void)state;
    check_quantiles("uniform", uniform_50_500ms, 10000);
    check_quantiles("log spread", log_spread, 10000);
    check_quantiles("two point", two_point, 1000);
    check_quantiles("few", uniform_50_500ms, 7);
}

static void nothing_known_is_no_quantile(void **state) {
    (void)state;
    sg__ttft_sketch *s = new_sketch();
    sg__ttft_view v = view_at(s, SG_SEC(1));
    assert_int_equal(sg__ttft_quantile(&v, 0.5), -1);
    /* censored alone: no first token yet, nothing to say */
    sg__ttft_add(s, HALF, SG_SEC(1), SG_SEC(2), true);
    v = view_at(s, SG_SEC(1));
    assert_int_equal(v.n_censored, 1);
    assert_int_equal(sg__ttft_quantile(&v, 0.5), -1);
    sg__ttft_add(s, HALF, SG_SEC(1), SG_MS(100), false);
    v = view_at(s, SG_SEC(1));
    assert_int_equal(sg__ttft_quantile(&v, 0), -1);
    assert_int_equal(sg__ttft_quantile(&v, 1), -1);
    assert_true(within_error(sg__ttft_quantile(&v, 0.5), SG_MS(100)));
    free(s);
}

static void min_samples_follow_the_quantile(void **state) {
    (void)state;
    assert_int_equal(sg__ttft_min_samples(0.95), 100);
    assert_int_equal(sg__ttft_min_samples(0.5), 10);
    assert_int_equal(sg__ttft_min_samples(0.9), 50);
    assert_int_equal(sg__ttft_min_samples(0.99), 500);
    assert_int_equal(sg__ttft_min_samples(0.999), 5000);
    assert_int_equal(sg__ttft_min_samples(0.1), 10);
    assert_int_equal(sg__ttft_min_samples(0), 0);
    assert_int_equal(sg__ttft_min_samples(1), 0);
}

/* -------------------------------------------------------------- censoring */

/* A first-token timeout is "none by 2 s", never a sample: with a fifth of
 * attempts timed out the median is the fast one's, and the 95th
 * percentile is unknown (later than 2 s) - not 2 s, and not fast. */
static void a_timeout_is_censored_never_a_fast_sample(void **state) {
    (void)state;
    sg__ttft_sketch *s = new_sketch();
    for (int i = 0; i < 80; i++) {
        sg__ttft_add(s, HALF, SG_SEC(1), SG_MS(100), false);
    }
    for (int i = 0; i < 20; i++) {
        sg__ttft_add(s, HALF, SG_SEC(1), SG_SEC(2), true);
    }
    sg__ttft_view v = view_at(s, SG_SEC(1));
    assert_int_equal(v.n_first, 80);
    assert_int_equal(v.n_censored, 20);
    assert_true(within_error(sg__ttft_quantile(&v, 0.5), SG_MS(100)));
    assert_true(within_error(sg__ttft_quantile(&v, 0.8), SG_MS(100)));
    assert_int_equal(sg__ttft_quantile(&v, 0.95), -1);
    free(s);
}

/* Hedges that lost, cancelled 30 ms in, say only "later than 30 ms": the
 * median of the endpoint stays its first tokens' (200 .. 400 ms), where
 * counting them as samples would make it 30 ms. */
static void early_cancels_leave_the_risk_set_without_pulling_it_down(void **state) {
    (void)state;
    sg__ttft_sketch *s = new_sketch();
    for (int i = 0; i < 50; i++) {
        sg__ttft_add(s, HALF, SG_SEC(1), SG_MS(200) + i * SG_MS(4), false);
        sg__ttft_add(s, HALF, SG_SEC(1), SG_MS(30), true);
    }
    sg__ttft_view v = view_at(s, SG_SEC(1));
    const int64_t med = sg__ttft_quantile(&v, 0.5);
    print_message("median %lld ns\n", (long long)med);
    /* the 25th of the 50 first tokens: 296 ms */
    assert_true(within_error(med, SG_MS(200) + 24 * SG_MS(4)));
    free(s);
}

/* Kaplan-Meier on the bucketed observations, computed directly: sort,
 * first tokens before censored at a tie, S *= 1 - 1/at_risk at each. */
typedef struct obs {
    uint32_t b;
    int censored;
} obs;

static int cmp_obs(const void *a, const void *b) {
    const obs *x = a, *y = b;
    if (x->b != y->b) {
        return x->b < y->b ? -1 : 1;
    }
    return x->censored - y->censored;
}

static int64_t direct_km(obs *o, size_t n, double q) {
    qsort(o, n, sizeof(*o), cmp_obs);
    double surv = 1.0;
    for (size_t i = 0; i < n; i++) {
        if (!o[i].censored) {
            /* bucket-wise: all first tokens of a bucket leave at once */
            size_t d = 0, j = i;
            while (j < n && o[j].b == o[i].b && !o[j].censored) {
                d++;
                j++;
            }
            surv *= 1.0 - (double)d / (double)(n - i);
            if (1.0 - surv >= q - 1e-9) {
                return sg__ttft_value(o[i].b);
            }
            i = j - 1;
        }
    }
    return -1;
}

static void censored_quantiles_match_kaplan_meier(void **state) {
    (void)state;
    for (int round = 0; round < 50; round++) {
        sg__ttft_sketch *s = new_sketch();
        const size_t n = 50 + next_random() % 500;
        obs *o = calloc(n, sizeof(*o));
        assert_non_null(o);
        for (size_t i = 0; i < n; i++) {
            const int64_t t = SG_MS(20) + (int64_t)(next_random() % SG_MS(2000));
            o[i].censored = next_random() % 4 == 0; /* a quarter censored */
            o[i].b = sg__ttft_bucket(t);
            sg__ttft_add(s, HALF, SG_SEC(3), t, o[i].censored);
        }
        sg__ttft_view v = view_at(s, SG_SEC(3));
        static const double qs[] = {0.5, 0.75, 0.9, 0.95};
        for (size_t k = 0; k < 4; k++) {
            assert_int_equal(sg__ttft_quantile(&v, qs[k]), direct_km(o, n, qs[k]));
        }
        free(o);
        free(s);
    }
}

/* ------------------------------------------------------------------ decay */

/* A window of 20 s in two halves: a sample counts until between 10 and
 * 20 s after it came - here it came at 5 s, so it counts until 20 s. */
static void what_is_older_than_the_window_is_forgotten(void **state) {
    (void)state;
    sg_manual_clock mc;
    sg_manual_clock_init(&mc, SG_SEC(5));
    sg__ttft_sketch *s = new_sketch();
    for (int i = 0; i < 100; i++) {
        sg__ttft_add(s, HALF, sg_manual_clock_now(&mc), SG_SEC(1), false);
    }
    static const struct {
        int64_t at;
        uint64_t seen;
    } steps[] = {{SG_SEC(9), 100},
                 {SG_SEC(10), 100},
                 {SG_SEC(20) - 1, 100},
                 {SG_SEC(20), 0},
                 {SG_SEC(1000), 0}};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        sg_manual_clock_set(&mc, steps[i].at);
        sg__ttft_view v = view_at(s, sg_manual_clock_now(&mc));
        assert_int_equal(v.n_first, steps[i].seen);
    }
    /* reading wrote nothing; the next add after a long idle starts anew */
    sg__ttft_add(s, HALF, sg_manual_clock_now(&mc), SG_MS(7), false);
    sg__ttft_view v = view_at(s, sg_manual_clock_now(&mc));
    assert_int_equal(v.n_first, 1);
    assert_true(within_error(sg__ttft_quantile(&v, 0.5), SG_MS(7)));
    free(s);
}

/* An endpoint slow for a while, then fast: within the window (20 s) of
 * the change its median is the fast one, while before it, the slow. */
static void an_endpoint_that_got_faster_is_seen_so_within_the_window(void **state) {
    (void)state;
    sg_manual_clock mc;
    sg_manual_clock_init(&mc, 0);
    sg__ttft_sketch *s = new_sketch();
    int64_t change = SG_SEC(60);
    for (; sg_manual_clock_now(&mc) < SG_SEC(120);
         sg_manual_clock_advance(&mc, SG_MS(100))) {
        const int64_t now = sg_manual_clock_now(&mc);
        sg__ttft_add(s, HALF, now, now < change ? SG_MS(800) : SG_MS(80), false);
        sg__ttft_view v = view_at(s, now);
        const int64_t med = sg__ttft_quantile(&v, 0.5);
        if (now < change) {
            assert_true(within_error(med, SG_MS(800)));
        } else if (now >= change + 2 * HALF) {
            assert_true(within_error(med, SG_MS(80)));
            assert_true(within_error(sg__ttft_quantile(&v, 0.99), SG_MS(80)));
        }
    }
    free(s);
}

/* A writer whose clock read just before a rotation adds to the half
 * before, still live; a clock far behind the sketch (its window was
 * made longer) starts it anew rather than writing into the past. */
static void late_writers_and_a_changed_window(void **state) {
    (void)state;
    sg__ttft_sketch *s = new_sketch();
    sg__ttft_add(s, HALF, SG_SEC(25), SG_MS(10), false); /* half 2 */
    sg__ttft_add(s, HALF, SG_SEC(19), SG_MS(10), false); /* half 1: late */
    sg__ttft_view v = view_at(s, SG_SEC(25));
    assert_int_equal(v.n_first, 2);
    /* the window ten times longer: half 2 of old is far ahead of half 0 */
    sg__ttft_add(s, 10 * HALF, SG_SEC(25), SG_MS(10), false);
    sg__ttft_read(s, 10 * HALF, SG_SEC(25), &v);
    assert_int_equal(v.n_first, 1);
    free(s);
}

/* ---------------------------------------------------------------- threads */

typedef struct worker_arg {
    sg__ttft_sketch *s;
    int id;
} worker_arg;

static void *worker(void *ud) {
    worker_arg *w = ud;
    for (int i = 0; i < 100000; i++) {
        sg__ttft_add(w->s, HALF, SG_SEC(3), SG_MS(1 + (i + w->id) % 500), i % 7 == 0);
    }
    return NULL;
}

static void threads_add_without_losing_a_count(void **state) {
    (void)state;
    sg__ttft_sketch *s = new_sketch();
    pthread_t t[4];
    worker_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (worker_arg){s, i};
        assert_int_equal(pthread_create(&t[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    sg__ttft_view v = view_at(s, SG_SEC(3));
    assert_int_equal(v.n_first + v.n_censored, 400000);
    assert_int_equal(v.n_censored, 4 * (100000 / 7 + 1));
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_value_is_within_the_error_of_its_bucket),
        cmocka_unit_test(quantiles_are_within_the_documented_error),
        cmocka_unit_test(nothing_known_is_no_quantile),
        cmocka_unit_test(min_samples_follow_the_quantile),
        cmocka_unit_test(a_timeout_is_censored_never_a_fast_sample),
        cmocka_unit_test(early_cancels_leave_the_risk_set_without_pulling_it_down),
        cmocka_unit_test(censored_quantiles_match_kaplan_meier),
        cmocka_unit_test(what_is_older_than_the_window_is_forgotten),
        cmocka_unit_test(an_endpoint_that_got_faster_is_seen_so_within_the_window),
        cmocka_unit_test(late_writers_and_a_changed_window),
        cmocka_unit_test(threads_add_without_losing_a_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
