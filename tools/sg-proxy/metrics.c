/*
 * metrics.c - GET /metrics: what every operation did, in the Prometheus
 * text format (version 0.0.4).  Counted once per operation, when it ends,
 * from its attempt records; the histograms are named after the
 * OpenTelemetry GenAI client metrics in their Prometheus form
 * (gen_ai.client.operation.duration -> ..._duration_seconds, with the
 * unit suffix).  Labelled by route name.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "proxy.h"

/* Upper bounds of the histograms' buckets, seconds (OpenTelemetry's
 * advice for GenAI durations, from 10 ms to 82 s). */
static const double bounds[] = {0.01, 0.02, 0.04, 0.08,  0.16,  0.32,  0.64,
                                1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92};
#define NB (sizeof(bounds) / sizeof(bounds[0]))

struct histogram {
    uint64_t buckets[NB]; /* not cumulative: one per bound */
    uint64_t count;
    double sum;
};

struct route_metrics {
    char name[64];
    uint64_t outcomes[SG_OUTCOME_COUNT_];
    uint64_t partial;
    uint64_t attempts;
    uint64_t retries;
    uint64_t hedges;
    uint64_t fallbacks;
    uint64_t throttled;
    struct histogram duration;
    struct histogram ttfc; /* time to first chunk: the commit */
    struct histogram tpoc; /* time per output chunk after the first */
};

/* One per route name ever served (a reload keeps the counts of a route
 * that keeps its name); the last slot takes every name past the table. */
static struct route_metrics table[MAX_ROUTES + 1];
static int nroutes;

static struct route_metrics *of(const char *route) {
    for (int i = 0; i < nroutes; i++) {
        if (strcmp(table[i].name, route) == 0) {
            return &table[i];
        }
    }
    if (nroutes == MAX_ROUTES + 1) {
        return &table[MAX_ROUTES];
    }
    struct route_metrics *m = &table[nroutes++];
    snprintf(m->name, sizeof(m->name), "%s", route);
    return m;
}

static void observe(struct histogram *h, double s) {
    for (size_t i = 0; i < NB; i++) {
        if (s <= bounds[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->sum += s;
}

void metrics_observe(const char *route, const sg_op *op, double duration_s,
                     double ttfc_s) {
    struct route_metrics *mm = of(route);
    sg_outcome o = sg_op_outcome(op);
    if ((unsigned)o < SG_OUTCOME_COUNT_) {
        mm->outcomes[o]++;
    }
    uint32_t n = sg_op_attempt_count(op);
    mm->attempts += n;
    bool any_partial = false;
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        if (a == NULL) {
            continue;
        }
        any_partial = any_partial || a->partial;
        if (a->hedge) {
            mm->hedges++;
        } else if (i > 0) {
            mm->retries++;
        }
        if (a->endpoint > 0) {
            mm->fallbacks++;
        }
        if (a->reason == SG_OP_REASON_RETRY_THROTTLED) {
            mm->throttled++;
        }
    }
    mm->partial += any_partial;
    observe(&mm->duration, duration_s);
    if (ttfc_s >= 0) {
        observe(&mm->ttfc, ttfc_s);
        const sg_op_attempt *d = sg_op_deciding_attempt(op);
        if (d != NULL && d->items > 1 && duration_s > ttfc_s) {
            observe(&mm->tpoc, (duration_s - ttfc_s) / (double)(d->items - 1));
        }
    }
}

/* Appends printf output to @b at *@o, as far as @cap allows, and counts
 * it whole in *@o either way (@b may be NULL: counted only). */
__attribute__((format(printf, 4, 5))) static void add(char *b, size_t cap, size_t *o,
                                                      const char *fmt, ...) {
    char *dst = b != NULL && *o < cap ? b + *o : NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(dst, dst != NULL ? cap - *o : 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        *o += (size_t)n;
    }
}

static void histogram(char *b, size_t cap, size_t *o, const char *name, const char *help,
                      size_t field) {
    add(b, cap, o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (int r = 0; r < nroutes; r++) {
        const struct histogram *h =
            (const struct histogram *)((const char *)&table[r] + field);
        const char *rn = table[r].name;
        uint64_t cum = 0;
        for (size_t i = 0; i < NB; i++) {
            cum += h->buckets[i];
            add(b, cap, o, "%s_bucket{route=\"%s\",le=\"%g\"} %llu\n", name, rn,
                bounds[i], (unsigned long long)cum);
        }
        add(b, cap, o,
            "%s_bucket{route=\"%s\",le=\"+Inf\"} %llu\n%s_sum{route=\"%s\"} %.6f\n"
            "%s_count{route=\"%s\"} %llu\n",
            name, rn, (unsigned long long)h->count, name, rn, h->sum, name, rn,
            (unsigned long long)h->count);
    }
}

static void counter(char *b, size_t cap, size_t *o, const char *name, const char *help,
                    size_t field) {
    add(b, cap, o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int r = 0; r < nroutes; r++) {
        uint64_t v = *(const uint64_t *)((const char *)&table[r] + field);
        add(b, cap, o, "%s{route=\"%s\"} %llu\n", name, table[r].name,
            (unsigned long long)v);
    }
}

size_t metrics_text(char *b, size_t cap) {
    size_t o = 0;
    if (b != NULL && cap > 0) {
        b[0] = '\0';
    }
    add(b, cap, &o,
        "# HELP sg_proxy_requests_total Operations ended, by outcome.\n"
        "# TYPE sg_proxy_requests_total counter\n");
    for (int r = 0; r < nroutes; r++) {
        for (int i = 0; i < SG_OUTCOME_COUNT_; i++) {
            add(b, cap, &o, "sg_proxy_requests_total{route=\"%s\",outcome=\"%s\"} %llu\n",
                table[r].name, sg_outcome_name((sg_outcome)i),
                (unsigned long long)table[r].outcomes[i]);
        }
    }
#define F(x) offsetof(struct route_metrics, x)
    counter(b, cap, &o, "sg_proxy_partial_streams_total",
            "Operations with an attempt that delivered items, then failed.", F(partial));
    counter(b, cap, &o, "sg_proxy_attempts_total", "Attempts made upstream.",
            F(attempts));
    counter(b, cap, &o, "sg_proxy_retries_total",
            "Attempts after the first that were not hedges.", F(retries));
    counter(b, cap, &o, "sg_proxy_hedges_total", "Hedged attempts.", F(hedges));
    counter(b, cap, &o, "sg_proxy_fallbacks_total",
            "Attempts sent to a fallback upstream.", F(fallbacks));
    counter(b, cap, &o, "sg_proxy_retries_throttled_total",
            "Retries the retry budget refused.", F(throttled));
    histogram(b, cap, &o, "gen_ai_client_operation_duration_seconds",
              "Request arrival to the end of its answer.", F(duration));
    histogram(b, cap, &o, "gen_ai_client_operation_time_to_first_chunk_seconds",
              "Request arrival to the first token sent to the client.", F(ttfc));
    histogram(b, cap, &o, "gen_ai_client_operation_time_per_output_chunk_seconds",
              "Mean time between chunks after the first, per operation.", F(tpoc));
#undef F
    return o;
}
