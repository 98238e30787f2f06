/*
 * Usage and cost (docs/report.md, "Usage and cost"): each attempt's usage
 * as its stream said it - or, where the stream said nothing, an estimate
 * from what the attempt delivered and from the other attempts of the
 * operation - and the operation's totals, kept and discarded, with their
 * cost at the caller's prices.
 */
#include "internal.h"

#include <math.h> /* isfinite: a macro, no libm */
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ prices */

int sg_op_options_set_price(sg_op_options *o, uint32_t endpoint, double input_per_mtok,
                            double output_per_mtok, double cached_input_per_mtok) {
    if (!sg__opt_touch(o) || !isfinite(input_per_mtok) || input_per_mtok < 0 ||
        !isfinite(output_per_mtok) || output_per_mtok < 0 ||
        !isfinite(cached_input_per_mtok)) {
        return SG_EINVAL;
    }
    if (endpoint >= SG_OP_MAX_ENDPOINTS) {
        return SG_ERANGE;
    }
    if (o->prices_ == NULL) {
        o->prices_ = calloc(SG_OP_MAX_ENDPOINTS, sizeof(*o->prices_));
        if (o->prices_ == NULL) {
            return SG_ENOMEM;
        }
    }
    o->prices_[endpoint] =
        (sg__price){input_per_mtok, output_per_mtok,
                    cached_input_per_mtok < 0 ? input_per_mtok : cached_input_per_mtok};
    o->priced_ |= 1u << endpoint;
    return 0;
}

int sg__op_options_copy_prices(sg_op_options *dst, const sg_op_options *src) {
    dst->prices_ = NULL;
    if (src->prices_ == NULL) {
        return 0;
    }
    dst->prices_ = malloc(SG_OP_MAX_ENDPOINTS * sizeof(*dst->prices_));
    if (dst->prices_ == NULL) {
        return SG_ENOMEM;
    }
    memcpy(dst->prices_, src->prices_, SG_OP_MAX_ENDPOINTS * sizeof(*dst->prices_));
    return 0;
}

/* -------------------------------------------------------- one attempt */

void sg__usage_none(sg_op_usage *u) {
    u->input_tokens = u->output_tokens = u->cached_input_tokens = u->reasoning_tokens =
        -1;
    u->source = SG_USAGE_NONE;
}

/* Whether the server may have billed @a: it was sent, and the server did
 * not refuse it with a status of its own (a gateway's 502 or 504 is no
 * answer about what the server behind it did). */
static bool may_bill(const sg_op_attempt *a) {
    if (!a->sent) {
        return false;
    }
    return !(a->outcome == SG_OUTCOME_HTTP_ERROR && a->headers_received &&
             a->http_status >= 400 && a->http_status != 502 && a->http_status != 504);
}

/* A figure the stream gave, or -1. */
static int64_t figure(int64_t v) {
    return v >= 0 ? v : -1;
}

/* The output of @text_bytes of generated text: one token for every 4
 * bytes, rounded up (OpenAI's and Google's rule of thumb), plus the
 * reasoning when the provider counted it (hidden: not in the text). */
static int64_t estimate_output(uint64_t text_bytes, int64_t reasoning) {
    int64_t est = (int64_t)(text_bytes / 4 + (text_bytes % 4 != 0));
    return est + (reasoning > 0 ? reasoning : 0);
}

/* The input another ended attempt of @op on @a's endpoint reported (the
 * provider's own figure): into @a, an estimate.  true when copied. */
static bool copy_input(const sg_op *op, sg_op_attempt *a) {
    for (uint32_t i = 0; i < op->count_; i++) {
        const sg_op_attempt *b = sg__record(op, i);
        if (b == a || b->running || b->endpoint != a->endpoint ||
            !(sg__rec_c(b)->usage_flags & SG__USAGE_IN_OWN)) {
            continue;
        }
        a->usage.input_tokens = b->usage.input_tokens;
        a->usage.cached_input_tokens = b->usage.cached_input_tokens;
        sg__rec_w(a)->usage_flags |= SG__USAGE_IN_COPIED;
        return true;
    }
    return false;
}

/* @a's figures the stream did not give, estimated when there is something
 * to estimate from: its input from another attempt (when it may have been
 * billed), its output from the text it delivered. */
static void estimate(const sg_op *op, sg_op_attempt *a, uint64_t text_bytes) {
    sg_op_usage *u = &a->usage;
    bool estimated = u->input_tokens < 0 && may_bill(a) && copy_input(op, a);
    if (u->output_tokens < 0 && (text_bytes > 0 || estimated || u->input_tokens >= 0)) {
        u->output_tokens = estimate_output(text_bytes, u->reasoning_tokens);
        estimated = true;
    }
    if (estimated) {
        u->source = SG_USAGE_ESTIMATE;
    }
}

void sg__usage_attempt(sg_op *op, sg_op_attempt *a, const sg_op_result *r) {
    sg__rec *rec = sg__rec_w(a);
    sg__usage_none(&a->usage);
    rec->usage_flags = 0;
    if (r->usage == NULL) {
        return; /* nothing read its stream: nothing is known */
    }
    rec->usage_flags = SG__USAGE_READ;
    sg_op_usage *u = &a->usage;
    u->input_tokens = figure(r->usage->input_tokens);
    u->output_tokens = figure(r->usage->output_tokens);
    u->cached_input_tokens = figure(r->usage->cached_input_tokens);
    u->reasoning_tokens = figure(r->usage->reasoning_tokens);
    if (u->input_tokens >= 0) {
        rec->usage_flags |= SG__USAGE_IN_OWN;
    }
    if (u->input_tokens >= 0 || u->output_tokens >= 0 || u->cached_input_tokens >= 0 ||
        u->reasoning_tokens >= 0) {
        u->source = SG_USAGE_PROVIDER;
    }
    estimate(op, a, r->text_bytes);
}

void sg__usage_settle(sg_op *op) {
    /* An attempt that ended before the one that reported the input (a
     * retried first-token timeout, a hedge loser) gets it now; the text
     * it delivered was counted when it ended, and none is 0 bytes.  (When
     * no attempt reported one, one pass: never a search per attempt.) */
    bool reported = false;
    for (uint32_t i = 0; i < op->count_ && !reported; i++) {
        reported = (sg__rec_c(sg__record(op, i))->usage_flags & SG__USAGE_IN_OWN) != 0;
    }
    for (uint32_t i = 0; reported && i < op->count_; i++) {
        sg_op_attempt *a = sg__record_w(op, i);
        if (!a->running && (sg__rec_c(a)->usage_flags & SG__USAGE_READ) &&
            a->usage.input_tokens < 0) {
            estimate(op, a, 0);
        }
    }
}

/* ----------------------------------------------------------- the totals */

/* What the attempts of one fate consumed, and cost. */
typedef struct usage_sum {
    int64_t n[4];     /* by sg_token_kind; -1: no attempt knows it */
    uint32_t counted; /* attempts of the fate */
    bool estimated;
    double cost;
} usage_sum;

/* The attempt whose stream the consumer kept, or NULL. */
static const sg_op_attempt *kept_attempt(const sg_op *op) {
    if (!sg_op_finished(op) || op->outcome_ != SG_OUTCOME_OK) {
        return NULL;
    }
    return sg_op_deciding_attempt(op);
}

/* @a's cost at its endpoint's prices (0 without one). */
static double attempt_cost(const sg_op *op, const sg_op_attempt *a) {
    const sg_op_options *o = sg__op_opts(op);
    if (a->endpoint >= SG_OP_MAX_ENDPOINTS || !(o->priced_ >> a->endpoint & 1)) {
        return 0;
    }
    const sg__price *p = &o->prices_[a->endpoint];
    const sg_op_usage *u = &a->usage;
    double cached = u->cached_input_tokens > 0 ? (double)u->cached_input_tokens : 0;
    double in = u->input_tokens > 0 ? (double)u->input_tokens - cached : 0;
    double out = u->output_tokens > 0 ? (double)u->output_tokens : 0;
    return (in * p->input + cached * p->cached + out * p->output) / 1e6;
}

static void add(usage_sum *s, const sg_op *op, const sg_op_attempt *a) {
    const int64_t v[4] = {a->usage.input_tokens, a->usage.output_tokens,
                          a->usage.cached_input_tokens, a->usage.reasoning_tokens};
    for (int k = 0; k < 4; k++) {
        if (v[k] >= 0) {
            s->n[k] = (s->n[k] < 0 ? 0 : s->n[k]) + v[k];
        }
    }
    s->counted++;
    s->estimated = s->estimated || a->usage.source == SG_USAGE_ESTIMATE;
    s->cost += attempt_cost(op, a);
}

/* The sum of @fate.  Discarded: every other attempt that ended and may
 * have been billed (or says what it consumed) - never one not sent, nor
 * one the server refused with a status of its own; with none, exactly 0
 * of everything. */
static void sum(const sg_op *op, sg_usage_fate fate, usage_sum *s) {
    memset(s, 0, sizeof(*s));
    s->n[0] = s->n[1] = s->n[2] = s->n[3] = -1;
    const sg_op_attempt *kept = kept_attempt(op);
    if (fate == SG_USAGE_KEPT) {
        if (kept != NULL) {
            add(s, op, kept);
        }
        return;
    }
    for (uint32_t i = 0; i < op->count_; i++) {
        const sg_op_attempt *a = sg__record(op, i);
        if (a != kept && !a->running &&
            (may_bill(a) || a->usage.source != SG_USAGE_NONE)) {
            add(s, op, a);
        }
    }
    if (s->counted == 0) {
        s->n[0] = s->n[1] = s->n[2] = s->n[3] = 0;
    }
}

static uint32_t unaccounted(const sg_op *op) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < op->count_; i++) {
        const sg_op_attempt *a = sg__record(op, i);
        n += !a->running && a->usage.source == SG_USAGE_NONE && may_bill(a);
    }
    return n;
}

static bool fate_ok(const sg_op *op, sg_usage_fate fate) {
    return sg_op_finished(op) && (fate == SG_USAGE_KEPT || fate == SG_USAGE_DISCARDED);
}

int64_t sg_op_tokens(const sg_op *op, sg_usage_fate fate, sg_token_kind kind) {
    if (!fate_ok(op, fate) || (unsigned)kind > (unsigned)SG_TOKENS_REASONING) {
        return -1;
    }
    usage_sum s;
    sum(op, fate, &s);
    return s.n[kind];
}

bool sg_op_tokens_estimated(const sg_op *op, sg_usage_fate fate) {
    if (!fate_ok(op, fate)) {
        return false;
    }
    usage_sum s;
    sum(op, fate, &s);
    return s.estimated;
}

uint32_t sg_op_attempts_unaccounted(const sg_op *op) {
    return sg_op_finished(op) ? unaccounted(op) : 0;
}

double sg_op_cost(const sg_op *op, sg_usage_fate fate) {
    if (!fate_ok(op, fate) || sg__op_opts(op)->priced_ == 0) {
        return -1.0;
    }
    usage_sum s;
    sum(op, fate, &s);
    return s.cost;
}

/* ----------------------------------------------------------- the report */

static void count(sg__sink *s, const char *k, int64_t v, bool *first) {
    sg__sink_key(s, k, first);
    if (v < 0) {
        sg__sink_puts(s, "null");
    } else {
        sg__sink_i64(s, v);
    }
}

/* The four counts, as the report names them. */
static void counts(sg__sink *s, const int64_t n[4], bool *first) {
    count(s, "input_tokens", n[0], first);
    count(s, "output_tokens", n[1], first);
    count(s, "cached_input_tokens", n[2], first);
    count(s, "reasoning_tokens", n[3], first);
}

/* A cost (or any non-negative number: the report's quantile) to the
 * nanounit, rounded; never in exponent form, never with a locale's
 * decimal comma (no printf), and without libm. */
void sg__sink_decimal(sg__sink *s, double v) {
    if (!(v > 0)) {
        sg__sink_puts(s, "0");
        return;
    }
    uint64_t w = v < 1.8e19 ? (uint64_t)v : UINT64_MAX; /* truncated: floor */
    uint64_t frac = v < 1.8e19 ? (uint64_t)((v - (double)w) * 1e9 + 0.5) : 0;
    if (frac >= 1000000000u) {
        w++;
        frac -= 1000000000u;
    }
    sg__sink_u64(s, w);
    if (frac == 0) {
        return;
    }
    char digits[10];
    for (int i = 8; i >= 0; i--) {
        digits[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    size_t n = 9;
    while (digits[n - 1] == '0') {
        n--;
    }
    sg__sink_put(s, ".", 1);
    sg__sink_put(s, digits, n);
}

void sg__report_attempt_usage(sg__sink *s, const sg_op_attempt *a, bool *first) {
    sg__sink_key(s, "usage", first);
    if (a->running || a->usage.source == SG_USAGE_NONE) {
        sg__sink_puts(s, "null");
        return;
    }
    const int64_t n[4] = {a->usage.input_tokens, a->usage.output_tokens,
                          a->usage.cached_input_tokens, a->usage.reasoning_tokens};
    bool f = true;
    sg__sink_put(s, "{", 1);
    counts(s, n, &f);
    sg__sink_key(s, "source", &f);
    sg__sink_puts(s,
                  a->usage.source == SG_USAGE_PROVIDER ? "\"provider\"" : "\"estimate\"");
    sg__sink_put(s, "}", 1);
}

void sg__report_usage(sg__sink *s, const sg_op *op, bool *first) {
    usage_sum fate[2];
    sum(op, SG_USAGE_KEPT, &fate[0]);
    sum(op, SG_USAGE_DISCARDED, &fate[1]);
    static const char *const names[2] = {"kept", "discarded"};
    sg__sink_key(s, "usage", first);
    bool f = true;
    sg__sink_put(s, "{", 1);
    for (int k = 0; k < 2; k++) {
        sg__sink_key(s, names[k], &f);
        if (k == 0 && kept_attempt(op) == NULL) {
            sg__sink_puts(s, "null");
            continue;
        }
        bool g = true;
        sg__sink_put(s, "{", 1);
        counts(s, fate[k].n, &g);
        sg__sink_key(s, "estimated", &g);
        sg__sink_puts(s, fate[k].estimated ? "true" : "false");
        sg__sink_put(s, "}", 1);
    }
    count(s, "attempts_unaccounted", unaccounted(op), &f);
    sg__sink_put(s, "}", 1);
    if (sg__op_opts(op)->priced_ != 0) {
        sg__sink_key(s, "cost", first);
        f = true;
        sg__sink_put(s, "{", 1);
        for (int k = 0; k < 2; k++) {
            sg__sink_key(s, names[k], &f);
            sg__sink_decimal(s, fate[k].cost);
        }
        sg__sink_put(s, "}", 1);
    }
}
