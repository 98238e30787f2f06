/*
 * metrics.c - GET /metrics: what every operation did, in the Prometheus
 * text format (version 0.0.4).  Counted once per operation, when it ends,
 * from its attempt records and its usage (the library's sg_op_tokens,
 * sg_op_cost); the histograms are named after the OpenTelemetry GenAI
 * client metrics in their Prometheus form
 * (gen_ai.client.operation.duration -> ..._duration_seconds, with the
 * unit suffix; gen_ai.client.token.usage, whose unit {token} is an
 * annotation, without one).  Labelled by route name; and with endpoint
 * health, each upstream it tracks - its state, when it frees, what it
 * held back - read from the library's sg_health_foreach as the page is
 * asked for, labelled by the endpoint (scheme://host:port/path, never a
 * credential) and key_id (which tells two credentials' entries apart).
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

/* gen_ai.client.token.usage's buckets (OpenTelemetry's advice): 1, 4,
 * 16, ... 4^13, then +Inf. */
#define NT 14

struct token_histogram {
    uint64_t buckets[NT]; /* not cumulative */
    uint64_t count;
    uint64_t sum;
};

enum { KIND_INPUT, KIND_OUTPUT, KINDS };
enum { FATE_KEPT, FATE_DISCARDED, FATES };
static const char *const kind_name[KINDS] = {"input", "output"};
static const char *const fate_name[FATES] = {"kept", "discarded"};

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
    uint64_t tokens[FATES][KINDS];
    double cost[FATES];
    bool priced; /* an operation of the route had a price: its cost is said */
    uint64_t unaccounted;
};

/* gen_ai.client.token.usage of a route, with the provider and operation
 * its profile names (a reload may change a route's profile: each keeps
 * its own series). */
struct usage_series {
    char route[64];
    const char *provider, *operation; /* static strings */
    struct token_histogram h[KINDS][FATES];
};

/* One per route name ever served (a reload keeps the counts of a route
 * that keeps its name); the last slot takes every name past the table. */
static struct route_metrics table[MAX_ROUTES + 1];
static int nroutes;
/* The same for the token histograms, by route and profile. */
static struct usage_series series[MAX_ROUTES + 1];
static int nseries;

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

static struct usage_series *series_of(const char *route, const char *profile) {
    const char *provider;
    const char *operation;
    if (!genai_names(profile, &provider, &operation)) {
        provider = "unknown";
        operation = "chat";
    }
    for (int i = 0; i < nseries; i++) {
        if (strcmp(series[i].route, route) == 0 && series[i].provider == provider &&
            series[i].operation == operation) {
            return &series[i];
        }
    }
    if (nseries == MAX_ROUTES + 1) {
        return &series[MAX_ROUTES];
    }
    struct usage_series *u = &series[nseries++];
    snprintf(u->route, sizeof(u->route), "%s", route);
    u->provider = provider;
    u->operation = operation;
    return u;
}

static void observe_tokens(struct token_histogram *h, int64_t n) {
    size_t i = 0;
    while (i < NT && (uint64_t)n > (uint64_t)1 << (2 * i)) {
        i++;
    }
    if (i < NT) {
        h->buckets[i]++;
    }
    h->count++;
    h->sum += (uint64_t)n;
}

/* What @op consumed: the report's usage by kind and fate, its cost, and
 * into gen_ai.client.token.usage each attempt's figures that are wholly
 * the provider's (OpenTelemetry reports no usage it could not read: an
 * estimate is not observed), labelled with the attempt's fate and the
 * provider of its own endpoint (a fallback may be another's). */
static void observe_usage(struct route_metrics *mm, const struct route *r,
                          const sg_op *op) {
    static const sg_token_kind kinds[KINDS] = {SG_TOKENS_INPUT, SG_TOKENS_OUTPUT};
    static const sg_usage_fate fates[FATES] = {SG_USAGE_KEPT, SG_USAGE_DISCARDED};
    for (int f = 0; f < FATES; f++) {
        for (int k = 0; k < KINDS; k++) {
            int64_t n = sg_op_tokens(op, fates[f], kinds[k]);
            mm->tokens[f][k] += n > 0 ? (uint64_t)n : 0;
        }
        double c = sg_op_cost(op, fates[f]);
        if (c >= 0) {
            mm->priced = true;
            mm->cost[f] += c;
        }
    }
    mm->unaccounted += sg_op_attempts_unaccounted(op);
    const sg_op_attempt *kept =
        sg_op_outcome(op) == SG_OUTCOME_OK ? sg_op_deciding_attempt(op) : NULL;
    uint32_t n = sg_op_attempt_count(op);
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        if (a == NULL || a->usage.source != SG_USAGE_PROVIDER) {
            continue;
        }
        struct usage_series *u = series_of(r->name, endpoint_profile(r, a->endpoint));
        int f = a == kept ? FATE_KEPT : FATE_DISCARDED;
        if (a->usage.input_tokens >= 0) {
            observe_tokens(&u->h[KIND_INPUT][f], a->usage.input_tokens);
        }
        if (a->usage.output_tokens >= 0) {
            observe_tokens(&u->h[KIND_OUTPUT][f], a->usage.output_tokens);
        }
    }
}

void metrics_observe(const struct route *r, const sg_op *op, double duration_s,
                     double ttfc_s) {
    struct route_metrics *mm = of(r->name);
    observe_usage(mm, r, op);
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

/* A metric's HELP and TYPE lines. */
static void head(char *b, size_t cap, size_t *o, const char *name, const char *type,
                 const char *help) {
    add(b, cap, o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void histogram(char *b, size_t cap, size_t *o, const char *name, const char *help,
                      size_t field) {
    head(b, cap, o, name, "histogram", help);
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
    head(b, cap, o, name, "counter", help);
    for (int r = 0; r < nroutes; r++) {
        uint64_t v = *(const uint64_t *)((const char *)&table[r] + field);
        add(b, cap, o, "%s{route=\"%s\"} %llu\n", name, table[r].name,
            (unsigned long long)v);
    }
}

static void tokens_text(char *b, size_t cap, size_t *o) {
    head(b, cap, o, "sg_proxy_tokens_total", "counter",
         "Tokens the operations consumed, by kind and fate (the reports' usage, "
         "estimates included).");
    for (int r = 0; r < nroutes; r++) {
        for (int kf = 0; kf < KINDS * FATES; kf++) {
            add(b, cap, o,
                "sg_proxy_tokens_total{route=\"%s\",kind=\"%s\",fate=\"%s\"} %llu\n",
                table[r].name, kind_name[kf / FATES], fate_name[kf % FATES],
                (unsigned long long)table[r].tokens[kf % FATES][kf / FATES]);
        }
    }
    head(b, cap, o, "sg_proxy_cost_total", "counter",
         "What the operations cost at the route's prices, by fate (routes with a "
         "price).");
    for (int r = 0; r < nroutes; r++) {
        for (int f = 0; f < FATES && table[r].priced; f++) {
            char v[64];
            add(b, cap, o, "sg_proxy_cost_total{route=\"%s\",fate=\"%s\"} %s\n",
                table[r].name, fate_name[f], money(v, sizeof(v), table[r].cost[f]));
        }
    }
}

/* One line of gen_ai_client_token_usage: NAME{LABELS@le} @v. */
static void token_line(char *b, size_t cap, size_t *o, const char *suffix,
                       const struct usage_series *u, int k, int f, const char *le,
                       uint64_t v) {
    add(b, cap, o,
        "gen_ai_client_token_usage%s{route=\"%s\",gen_ai_operation_name=\"%s\","
        "gen_ai_provider_name=\"%s\",gen_ai_token_type=\"%s\","
        "streamguard_usage_fate=\"%s\"%s} %llu\n",
        suffix, u->route, u->operation, u->provider, kind_name[k], fate_name[f], le,
        (unsigned long long)v);
}

/* The histogram of series @u's token type @k and fate @f. */
static void token_histogram(char *b, size_t cap, size_t *o, const struct usage_series *u,
                            int k, int f) {
    const struct token_histogram *h = &u->h[k][f];
    uint64_t cum = 0;
    for (size_t i = 0; i < NT; i++) {
        char le[32];
        snprintf(le, sizeof(le), ",le=\"%llu\"", 1ull << (2 * i));
        cum += h->buckets[i];
        token_line(b, cap, o, "_bucket", u, k, f, le, cum);
    }
    token_line(b, cap, o, "_bucket", u, k, f, ",le=\"+Inf\"", h->count);
    token_line(b, cap, o, "_sum", u, k, f, "", h->sum);
    token_line(b, cap, o, "_count", u, k, f, "", h->count);
}

/* gen_ai_client_token_usage: one histogram a series, token type and fate. */
static void token_histograms(char *b, size_t cap, size_t *o) {
    head(b, cap, o, "gen_ai_client_token_usage", "histogram",
         "Number of input and output tokens used, per attempt upstream, as the provider "
         "counted them.");
    const int each = KINDS * FATES;
    for (int i = 0; i < nseries * each; i++) {
        token_histogram(b, cap, o, &series[i / each], i % each / FATES, i % FATES);
    }
}

/* ----------------------------------------------------- upstreams' health */

enum upstream_family { U_STATE, U_FREE_IN, U_INFLIGHT, U_REFUSED, U_WAITED, U_SKIPPED };

struct upstream_walk {
    char *b;
    size_t cap;
    size_t *o;
    enum upstream_family what;
    int64_t now;
};

/* A Prometheus label value: backslash, double quote and newline escaped
 * (a client's path is in the endpoint). */
static void label_value(char *out, size_t cap, const char *v) {
    size_t n = 0;
    for (; *v != '\0' && n + 2 < cap; v++) {
        if (*v == '\\' || *v == '"' || *v == '\n') {
            out[n++] = '\\';
            out[n++] = *v == '\n' ? 'n' : *v;
        } else {
            out[n++] = *v;
        }
    }
    out[n] = '\0';
}

/* The counts of one action, by reason. */
static void upstream_counts(const struct upstream_walk *w, const char *name,
                            const char *labels, const uint64_t *counts) {
    static const sg_op_reason why[SG_HEALTH_WHY_COUNT_] = {
        [SG_HEALTH_RATE_LIMITED] = SG_OP_REASON_RATE_LIMITED,
        [SG_HEALTH_CIRCUIT_OPEN] = SG_OP_REASON_CIRCUIT_OPEN,
        [SG_HEALTH_ENDPOINT_BUSY] = SG_OP_REASON_ENDPOINT_BUSY,
    };
    for (int r = 0; r < SG_HEALTH_WHY_COUNT_; r++) {
        add(w->b, w->cap, w->o, "%s{%s,reason=\"%s\"} %llu\n", name, labels,
            sg_op_reason_name(why[r]), (unsigned long long)counts[r]);
    }
}

/* One upstream's lines of the family the walk writes. */
static int upstream_lines(const sg_health_entry *e, void *ud) {
    const struct upstream_walk *w = ud;
    char ep[2 * SG_HEALTH_ENDPOINT_MAX + 1];
    label_value(ep, sizeof(ep), e->endpoint);
    char labels[sizeof(ep) + 64];
    snprintf(labels, sizeof(labels), "upstream=\"%s\",key_id=\"%016llx\"", ep,
             (unsigned long long)e->key_id);
    switch (w->what) {
    case U_STATE:
        for (int st = 0; st < SG_HEALTH_STATE_COUNT_; st++) {
            add(w->b, w->cap, w->o, "sg_proxy_upstream_state{%s,state=\"%s\"} %d\n",
                labels, sg_health_state_name((sg_health_state)st),
                e->state == (sg_health_state)st);
        }
        break;
    case U_FREE_IN:
        add(w->b, w->cap, w->o, "sg_proxy_upstream_free_in_seconds{%s} %.3f\n", labels,
            e->free_at > w->now ? (double)(e->free_at - w->now) / 1e9 : 0.0);
        break;
    case U_INFLIGHT:
        add(w->b, w->cap, w->o, "sg_proxy_upstream_inflight{%s} %u\n", labels,
            e->inflight);
        break;
    case U_REFUSED:
        upstream_counts(w, "sg_proxy_upstream_refused_total", labels, e->refused);
        break;
    case U_WAITED:
        upstream_counts(w, "sg_proxy_upstream_waited_total", labels, e->waited);
        break;
    default:
        upstream_counts(w, "sg_proxy_upstream_skipped_total", labels, e->skipped);
        break;
    }
    return 0;
}

/* Every upstream @h tracks, family by family (the format groups a
 * family's lines). */
static void upstreams_text(sg_health *h, int64_t now, char *b, size_t cap, size_t *o) {
    static const struct {
        const char *name, *type, *help;
    } family[] = {
        [U_STATE] = {"sg_proxy_upstream_state", "gauge",
                     "1 for the upstream's endpoint-health state (closed, cooling, open, "
                     "half_open), 0 for the others."},
        [U_FREE_IN] = {"sg_proxy_upstream_free_in_seconds", "gauge",
                       "Seconds until a cooling or open upstream frees (0: free)."},
        [U_INFLIGHT] = {"sg_proxy_upstream_inflight", "gauge",
                        "Attempts in flight to the upstream."},
        [U_REFUSED] =
            {"sg_proxy_upstream_refused_total", "counter",
             "Requests answered at once, nothing sent, as the upstream was held "
             "back, by reason."},
        [U_WAITED] = {"sg_proxy_upstream_waited_total", "counter",
                      "Waits in a request's budget for the upstream to free, by reason."},
        [U_SKIPPED] = {"sg_proxy_upstream_skipped_total", "counter",
                       "Times the upstream was passed over for a free fallback, by "
                       "reason."},
    };
    struct upstream_walk w = {.b = b, .cap = cap, .o = o, .now = now};
    for (size_t f = 0; f < sizeof(family) / sizeof(family[0]); f++) {
        head(b, cap, o, family[f].name, family[f].type, family[f].help);
        w.what = (enum upstream_family)f;
        (void)sg_health_foreach(h, now, upstream_lines, &w);
    }
}

/* What sharing endpoint health with the other proxies did. */
static void share_text(const struct health_share_figures *f, char *b, size_t cap,
                       size_t *o) {
    head(b, cap, o, "sg_proxy_health_share_connected", "gauge",
         "1 while connected to the database endpoint health is shared through.");
    add(b, cap, o, "sg_proxy_health_share_connected %d\n", f->connected ? 1 : 0);
    head(b, cap, o, "sg_proxy_health_share_queued", "gauge",
         "Facts learned here waiting for the database.");
    add(b, cap, o, "sg_proxy_health_share_queued %u\n", (unsigned)f->queued);
    head(b, cap, o, "sg_proxy_health_share_facts_total", "counter",
         "Facts (an upstream cooling, its breaker open or closed): learned here, "
         "published, dropped, expired; received from other proxies, applied, ignored.");
    const struct {
        const char *event;
        uint64_t n;
    } facts[] = {{"learned", f->learned},   {"published", f->published},
                 {"dropped", f->dropped},   {"expired", f->expired},
                 {"received", f->received}, {"applied", f->applied},
                 {"ignored", f->ignored}};
    for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
        add(b, cap, o, "sg_proxy_health_share_facts_total{event=\"%s\"} %llu\n",
            facts[i].event, (unsigned long long)facts[i].n);
    }
    head(b, cap, o, "sg_proxy_health_share_losses_total", "counter",
         "Times the database was lost, or could not be reached.");
    add(b, cap, o, "sg_proxy_health_share_losses_total %llu\n",
        (unsigned long long)f->losses);
}

size_t metrics_text(sg_health *health, int64_t now,
                    const struct health_share_figures *share, char *b, size_t cap) {
    size_t o = 0;
    if (b != NULL && cap > 0) {
        b[0] = '\0';
    }
    head(b, cap, &o, "sg_proxy_requests_total", "counter",
         "Operations ended, by outcome.");
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
    tokens_text(b, cap, &o);
    counter(b, cap, &o, "sg_proxy_attempts_unaccounted_total",
            "Attempts sent that may have been billed, whose usage is unknown.",
            F(unaccounted));
    histogram(b, cap, &o, "gen_ai_client_operation_duration_seconds",
              "Request arrival to the end of its answer.", F(duration));
    histogram(b, cap, &o, "gen_ai_client_operation_time_to_first_chunk_seconds",
              "Request arrival to the first token sent to the client.", F(ttfc));
    histogram(b, cap, &o, "gen_ai_client_operation_time_per_output_chunk_seconds",
              "Mean time between chunks after the first, per operation.", F(tpoc));
    token_histograms(b, cap, &o);
    if (health != NULL) {
        upstreams_text(health, now, b, cap, &o);
    }
    if (share != NULL) {
        share_text(share, b, cap, &o);
    }
#undef F
    return o;
}
