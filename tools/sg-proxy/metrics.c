/*
 * metrics.c - GET /metrics: what every operation did, in the Prometheus
 * text format (version 0.0.4).  Counted once per operation, when it ends,
 * from its attempt records; the histograms are named after the
 * OpenTelemetry GenAI client metrics in their Prometheus form
 * (gen_ai.client.operation.duration -> ..._duration_seconds, with the
 * unit suffix).  One route in this slice: route="default".
 */
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

static struct {
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
} m;

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

void metrics_observe(const sg_op *op, double duration_s, double ttfc_s) {
    sg_outcome o = sg_op_outcome(op);
    if ((unsigned)o < SG_OUTCOME_COUNT_) {
        m.outcomes[o]++;
    }
    uint32_t n = sg_op_attempt_count(op);
    m.attempts += n;
    bool any_partial = false;
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        if (a == NULL) {
            continue;
        }
        any_partial = any_partial || a->partial;
        if (a->hedge) {
            m.hedges++;
        } else if (i > 0) {
            m.retries++;
        }
        if (a->endpoint > 0) {
            m.fallbacks++;
        }
        if (a->reason == SG_OP_REASON_RETRY_THROTTLED) {
            m.throttled++;
        }
    }
    m.partial += any_partial;
    observe(&m.duration, duration_s);
    if (ttfc_s >= 0) {
        observe(&m.ttfc, ttfc_s);
        const sg_op_attempt *d = sg_op_deciding_attempt(op);
        if (d != NULL && d->items > 1 && duration_s > ttfc_s) {
            observe(&m.tpoc, (duration_s - ttfc_s) / (double)(d->items - 1));
        }
    }
}

static size_t histogram(char *b, size_t cap, const char *name, const char *help,
                        const struct histogram *h) {
    size_t o = 0;
    o += (size_t)snprintf(b + o, cap - o, "# HELP %s %s\n# TYPE %s histogram\n", name,
                          help, name);
    uint64_t cum = 0;
    for (size_t i = 0; i < NB && o < cap; i++) {
        cum += h->buckets[i];
        o += (size_t)snprintf(b + o, cap - o,
                              "%s_bucket{route=\"default\",le=\"%g\"} %llu\n", name,
                              bounds[i], (unsigned long long)cum);
    }
    if (o < cap) {
        o += (size_t)snprintf(b + o, cap - o,
                              "%s_bucket{route=\"default\",le=\"+Inf\"} %llu\n"
                              "%s_sum{route=\"default\"} %.6f\n"
                              "%s_count{route=\"default\"} %llu\n",
                              name, (unsigned long long)h->count, name, h->sum, name,
                              (unsigned long long)h->count);
    }
    return o < cap ? o : cap - 1;
}

static size_t counter(char *b, size_t cap, const char *name, const char *help,
                      uint64_t v) {
    int n =
        snprintf(b, cap, "# HELP %s %s\n# TYPE %s counter\n%s{route=\"default\"} %llu\n",
                 name, help, name, name, (unsigned long long)v);
    return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t metrics_text(char *b, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(b + o, cap - o,
                          "# HELP sg_proxy_requests_total Operations ended, by outcome.\n"
                          "# TYPE sg_proxy_requests_total counter\n");
    for (int i = 0; i < SG_OUTCOME_COUNT_ && o < cap; i++) {
        o += (size_t)snprintf(
            b + o, cap - o,
            "sg_proxy_requests_total{route=\"default\",outcome=\"%s\"} %llu\n",
            sg_outcome_name((sg_outcome)i), (unsigned long long)m.outcomes[i]);
    }
    if (o >= cap) {
        return cap - 1;
    }
    o += counter(b + o, cap - o, "sg_proxy_partial_streams_total",
                 "Operations with an attempt that delivered items, then failed.",
                 m.partial);
    o += counter(b + o, cap - o, "sg_proxy_attempts_total", "Attempts made upstream.",
                 m.attempts);
    o += counter(b + o, cap - o, "sg_proxy_retries_total",
                 "Attempts after the first that were not hedges.", m.retries);
    o += counter(b + o, cap - o, "sg_proxy_hedges_total", "Hedged attempts.", m.hedges);
    o += counter(b + o, cap - o, "sg_proxy_fallbacks_total",
                 "Attempts sent to a fallback upstream.", m.fallbacks);
    o += counter(b + o, cap - o, "sg_proxy_retries_throttled_total",
                 "Retries the retry budget refused.", m.throttled);
    o += histogram(b + o, cap - o, "gen_ai_client_operation_duration_seconds",
                   "Request arrival to the end of its answer.", &m.duration);
    o += histogram(b + o, cap - o, "gen_ai_client_operation_time_to_first_chunk_seconds",
                   "Request arrival to the first token sent to the client.", &m.ttfc);
    o +=
        histogram(b + o, cap - o, "gen_ai_client_operation_time_per_output_chunk_seconds",
                  "Mean time between chunks after the first, per operation.", &m.tpoc);
    return o;
}
