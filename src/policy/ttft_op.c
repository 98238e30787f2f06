/*
 * First-token-aware endpoints (docs/design.md, "First-token sketch"): what
 * an attempt's end tells its endpoint's sketch (ttft_sketch.h), the hedge
 * delay learned from it, and the order of endpoints by how fast they
 * start.  Sketches live in the endpoint health an operation shares
 * (health.c); without one nothing is learned.
 */
#include "health_internal.h"

#include <string.h>

/* ------------------------------------------------------------- options */

int sg_op_options_set_hedge_auto(sg_op_options *o, bool learned) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->hedge_auto_ = learned;
    return 0;
}

int sg_op_options_set_hedge_quantile(sg_op_options *o, double q) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    if (!(q >= 0.5 && q <= 0.999)) {
        return SG_ERANGE;
    }
    o->hedge_q_ = q;
    return 0;
}

int sg_op_options_set_hedge_floor(sg_op_options *o, int64_t ns) {
    if (!sg__opt_touch(o) || ns < 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    o->hedge_floor_ns_ = ns;
    o->set_ |= SG__OPT_HEDGE_FLOOR;
    return 0;
}

int sg_op_options_set_endpoint_order(sg_op_options *o, sg_endpoint_order order) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    if ((unsigned)order >= (unsigned)SG_ENDPOINT_ORDER_COUNT_) {
        return SG_ERANGE;
    }
    o->order_ = (uint8_t)order;
    return 0;
}

const char *sg_endpoint_order_name(sg_endpoint_order order) {
    static const char *const names[] = {"configured", "first_token"};
    return (unsigned)order < (unsigned)SG_ENDPOINT_ORDER_COUNT_ ? names[order] : NULL;
}

const char *sg_hedge_source_name(sg_hedge_source s) {
    static const char *const names[] = {"none", "fixed", "auto", "auto_fallback"};
    return (unsigned)s < (unsigned)SG_HEDGE_SOURCE_COUNT_ ? names[s] : NULL;
}

uint32_t sg_first_token_min_samples(double q) {
    return sg__ttft_min_samples(q);
}

static double hedge_q(const sg_op_options *o) {
    return o->hedge_q_ > 0 ? o->hedge_q_ : SG_HEDGE_DEFAULT_QUANTILE;
}

static int64_t hedge_floor(const sg_op_options *o) {
    return (o->set_ & SG__OPT_HEDGE_FLOOR) ? o->hedge_floor_ns_ : SG_HEDGE_DEFAULT_FLOOR;
}

/* ---------------------------------------------------------------- feed */

/* Whether an attempt that ended @oc before any item says only that its
 * first token would have come later: a clock ran out, or it was
 * cancelled (a hedge lost, the caller gave up).  A failure - an error
 * status, a refused connection, a broken stream - says nothing of it. */
static bool censors(sg_outcome oc) {
    switch (oc) {
    case SG_OUTCOME_CONNECT_TIMEOUT:
    case SG_OUTCOME_FIRST_ITEM_TIMEOUT:
    case SG_OUTCOME_ATTEMPT_TIMEOUT:
    case SG_OUTCOME_STREAM_TIMEOUT:
    case SG_OUTCOME_BUDGET_EXHAUSTED:
    case SG_OUTCOME_CANCELLED:
        return true;
    default:
        return false;
    }
}

void sg__ttft_feed(const sg_health *h, sg__hentry *ent, const sg__end *e) {
    const sg_op_attempt *a = e->a;
    int64_t half = 0;
    sg__ttft_sketch *s = sg__hentry_ttft(ent, h, &half);
    if (a->time_to_first_item_ns >= 0) {
        /* the true first token: under a profile the first item that bears
         * one, what came before it held and not counted */
        sg__ttft_add(s, half, e->now, a->time_to_first_item_ns, false);
    } else if (a->items == 0 && censors(e->outcome)) {
        /* never a fast sample: "none by then", at its clock */
        sg__ttft_add(s, half, e->now, a->elapsed_ns, true);
    }
}

void sg__ttft_describe(const sg__ttft_sketch *s, int64_t half, int64_t now,
                       sg_health_entry *out) {
    sg__ttft_view v;
    sg__ttft_read(s, half, now, &v);
    out->first_tokens = v.n_first > UINT32_MAX ? UINT32_MAX : (uint32_t)v.n_first;
    out->first_token_censored =
        v.n_censored > UINT32_MAX ? UINT32_MAX : (uint32_t)v.n_censored;
    out->first_token_median_ns = sg__ttft_quantile(&v, 0.5);
    out->first_token_p95_ns = sg__ttft_quantile(&v, 0.95);
}

/* -------------------------------------------------------------- reading */

/* The @q-quantile of endpoint @ep's first tokens at @now, when its window
 * holds enough observations (their count in *@n): its bucket's midpoint,
 * or (@edge) its upper edge - by which at least a fraction @q of them
 * came; -1 when not known. */
static int64_t learned(sg_op *op, uint32_t ep, int64_t now, double q, bool edge,
                       uint32_t *n) {
    *n = 0;
    sg__hentry *ent = sg__health_entry(op, ep, now);
    if (ent == NULL) {
        return -1; /* no health, or the endpoint is not tracked */
    }
    int64_t half = 0;
    const sg__ttft_sketch *s = sg__hentry_ttft(ent, sg__op_opts(op)->health_, &half);
    sg__ttft_view v;
    sg__ttft_read(s, half, now, &v);
    const uint64_t seen = v.n_first + v.n_censored;
    *n = seen > UINT32_MAX ? UINT32_MAX : (uint32_t)seen;
    const int b = *n >= sg__ttft_min_samples(q) ? sg__ttft_quantile_at(&v, q) : -1;
    if (b < 0) {
        return -1;
    }
    return edge ? sg__ttft_upper((uint32_t)b) : sg__ttft_value((uint32_t)b);
}

/* ---------------------------------------------------------- hedge delay */

void sg__ttft_hedge_delay(sg_op *op, sg_op_attempt *a, int64_t now) {
    const sg_op_options *o = sg__op_opts(op);
    a->hedge_after_ns = -1;
    a->hedge_source = SG_HEDGE_SOURCE_NONE;
    if (o->hedge_after_ns_ <= 0) {
        return;
    }
    a->hedge_after_ns = o->hedge_after_ns_;
    a->hedge_source = SG_HEDGE_SOURCE_FIXED;
    if (!o->hedge_auto_) {
        return;
    }
    /* the endpoint being hedged: this attempt's; the quantile's upper
     * edge, so that no more than 1 - q of its attempts are hedged (the
     * midpoint, up to 1/32 early, hedged 5.8 % of a 100 ms band at p95) */
    int64_t d =
        learned(op, a->endpoint, now, hedge_q(o), true, &sg__rec_w(a)->hedge_samples);
    if (d < 0) {
        /* too few observations yet, or the quantile is beyond what timed
         * out: the configured delay */
        a->hedge_source = SG_HEDGE_SOURCE_AUTO_FALLBACK;
        return;
    }
    const int64_t floor_ns = hedge_floor(o);
    d = d < floor_ns ? floor_ns : d;
    /* never past the lease: a hedge due after it never goes */
    a->hedge_after_ns = d < a->attempt_timeout_ns ? d : a->attempt_timeout_ns;
    a->hedge_source = SG_HEDGE_SOURCE_AUTO;
}

/* ---------------------------------------------------------------- order */

void sg__ttft_op_start(sg_op *op) {
    op->order_first_ = -1;
    op->order_median_ns_ = -1;
    op->order_open_ = sg__op_opts(op)->order_ == SG_ENDPOINT_ORDER_FIRST_TOKEN &&
                      op->health_ != NULL && sg__op_n_endpoints(op) > 1;
}

uint32_t sg__ep_after(const sg_op *op, uint32_t e, uint32_t k) {
    const uint32_t n = sg__op_n_endpoints(op);
    if (!op->ordered_) {
        return (e + k) % n;
    }
    uint32_t pos = 0;
    while (pos + 1 < n && op->ep_order_[pos] != e) {
        pos++;
    }
    return op->ep_order_[(pos + k) % n];
}

uint32_t sg__ttft_rank(sg_op *op, int64_t now) {
    if (!op->order_open_) {
        return op->ep_next_;
    }
    const uint32_t n = sg__op_n_endpoints(op);
    int64_t med[SG_OP_MAX_ENDPOINTS];
    for (uint32_t i = 0; i < n; i++) {
        uint32_t seen = 0;
        const int64_t m = learned(op, i, now, 0.5, false, &seen);
        med[i] = m >= 0 ? m : INT64_MAX; /* none known: after those known */
    }
    /* insertion sort, stable: ties keep the configured order */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t j = i;
        while (j > 0 && med[op->ep_order_[j - 1]] > med[i]) {
            op->ep_order_[j] = op->ep_order_[j - 1];
            j--;
        }
        op->ep_order_[j] = (uint8_t)i;
    }
    op->ordered_ = true;
    op->order_median_ns_ =
        med[op->ep_order_[0]] == INT64_MAX ? -1 : med[op->ep_order_[0]];
    return op->ep_order_[0];
}

void sg__ttft_chosen(sg_op *op, uint32_t e, int64_t now) {
    if (!op->order_open_) {
        return;
    }
    op->order_open_ = false;
    op->order_first_ = (int32_t)e;
    uint32_t seen = 0;
    op->order_median_ns_ = learned(op, e, now, 0.5, false, &seen);
    /* e first, the others in the configured order */
    const uint32_t n = sg__op_n_endpoints(op);
    op->ep_order_[0] = (uint8_t)e;
    for (uint32_t i = 0, k = 1; i < n; i++) {
        if (i != e) {
            op->ep_order_[k++] = (uint8_t)i;
        }
    }
}

/* --------------------------------------------------------------- report */

void sg__ttft_report(sg__sink *s, const sg_op *op, bool *first) {
    const sg_op_options *o = sg__op_opts(op);
    if (o->hedge_after_ns_ > 0 && o->hedge_auto_) {
        const double q = hedge_q(o);
        sg__sink_key(s, "hedge_auto", first);
        sg__sink_puts(s, "{\"quantile\":");
        sg__sink_decimal(s, q);
        sg__sink_puts(s, ",\"floor_ms\":");
        sg__sink_i64(s, hedge_floor(o) / SG_MS(1));
        sg__sink_puts(s, ",\"min_samples\":");
        sg__sink_u64(s, sg__ttft_min_samples(q));
        sg__sink_puts(s, "}");
    }
    if (o->order_ == SG_ENDPOINT_ORDER_FIRST_TOKEN) {
        sg__sink_key(s, "endpoint_order", first);
        sg__sink_puts(s, "{\"by\":\"first_token\",\"first\":");
        if (op->order_first_ >= 0) {
            char name[SG_HEALTH_ENDPOINT_MAX + 1];
            size_t n =
                sg__endpoint_name(o->endpoints_[op->order_first_], name, sizeof(name));
            sg__sink_json_string(s, name, n);
        } else {
            sg__sink_puts(s, "null");
        }
        sg__sink_puts(s, ",\"median_ms\":");
        if (op->order_median_ns_ >= 0) {
            sg__sink_i64(s, op->order_median_ns_ / SG_MS(1));
        } else {
            sg__sink_puts(s, "null");
        }
        sg__sink_puts(s, "}");
    }
}

void sg__ttft_report_attempt(sg__sink *s, const sg_op *op, const sg_op_attempt *a,
                             bool *first) {
    const sg_op_options *o = sg__op_opts(op);
    if (o->hedge_after_ns_ <= 0) {
        return;
    }
    sg__sink_key(s, "hedge_after_ms", first);
    sg__sink_i64(s, a->hedge_after_ns / SG_MS(1));
    sg__sink_key(s, "hedge_after_source", first);
    sg__sink_puts(s, "\"");
    sg__sink_puts(s, sg_hedge_source_name(a->hedge_source));
    sg__sink_puts(s, "\"");
    if (o->hedge_auto_) {
        sg__sink_key(s, "hedge_samples", first);
        sg__sink_u64(s, sg__rec_c(a)->hedge_samples);
    }
}
