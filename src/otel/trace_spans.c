/*
 * The spans of the OpenTelemetry observer (observer.c): an attempt's, from
 * its record as it ended, and the operation's, once it has resolved, with
 * their attributes and events - read through the public readers
 * (<streamguard/op.h>) only.
 *
 * Attribute names: docs/otel.md, "Spans and attributes", is the list.
 */
#include <streamguard/health.h>

#include "otel/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTEMPT_ATTRS 48 /* room for an attempt span's attributes */
#define ATTEMPT_EVENTS 1 /* its first chunk (backoffs: the operation span's) */
#define OP_ATTRS 32
#define OP_EVENTS 32 /* backoffs and endpoint waits; more are counted dropped */
#define URL_MAX 256

/* ------------------------------------------------------------ the spans */

static uint64_t unix_of(const sg_otel_trace *t, int64_t mono) {
    int64_t u = mono + t->offset;
    return u > 0 ? (uint64_t)u : 0;
}

static int64_t ms_of(int64_t ns) {
    return ns / SG_MS(1);
}

static double seconds_of(int64_t ns) {
    return (double)ns / 1e9;
}

/* A span of the operation's trace, with its ids, its parent and the
 * caller's tracestate; NULL when out of memory. */
static sg__otel_span *new_span(const sg_otel_trace *t, size_t attrs, size_t events,
                               const uint8_t *parent) {
    sg__otel_span *s = sg__otel_span_new(attrs, events);
    if (s == NULL) {
        return NULL;
    }
    memcpy(s->trace_id, t->trace_id, sizeof(s->trace_id));
    if (parent != NULL) {
        memcpy(s->parent_span_id, parent, sizeof(s->parent_span_id));
    }
    s->flags = 1; /* only sampled spans are built */
    s->kind = SG__OTEL_KIND_CLIENT;
    if (t->tracestate[0] != '\0' &&
        sg__otel_span_set_trace_state(s, t->tracestate) != 0) {
        sg__otel_span_free(s);
        return NULL;
    }
    return s;
}

static void add_str(sg__otel_span *s, const char *key, const char *v, int *rc) {
    if (v != NULL && *rc == 0) {
        *rc = sg__otel_span_add_str(s, key, v);
    }
}

/* The GenAI usage attributes of @u (the figures known). */
static void add_usage(sg__otel_span *s, const sg_op_usage *u, int *rc) {
    if (u->input_tokens >= 0) {
        sg__otel_span_add_int(s, "gen_ai.usage.input_tokens", u->input_tokens);
    }
    if (u->output_tokens >= 0) {
        sg__otel_span_add_int(s, "gen_ai.usage.output_tokens", u->output_tokens);
    }
    if (u->cached_input_tokens >= 0) {
        sg__otel_span_add_int(s, "gen_ai.usage.cache_read.input_tokens",
                              u->cached_input_tokens);
    }
    if (u->reasoning_tokens >= 0) {
        sg__otel_span_add_int(s, "gen_ai.usage.reasoning.output_tokens",
                              u->reasoning_tokens);
    }
    if (u->source != SG_USAGE_NONE) {
        add_str(s, "streamguard.usage.source",
                u->source == SG_USAGE_PROVIDER ? "provider" : "estimate", rc);
    }
}

/* Who set the limit an attempt ran into: the clock its outcome names
 * (after attribution: the budget's, or the caller's attempt ceiling); NULL
 * for an outcome that is no clock's. */
static const char *limit_of(sg_outcome oc) {
    switch (oc) {
    case SG_OUTCOME_BUDGET_EXHAUSTED:
        return "budget";
    case SG_OUTCOME_ATTEMPT_TIMEOUT:
        return "attempt";
    case SG_OUTCOME_CONNECT_TIMEOUT:
        return "connect";
    case SG_OUTCOME_FIRST_ITEM_TIMEOUT:
        return "first_item";
    case SG_OUTCOME_IDLE_TIMEOUT:
        return "idle";
    case SG_OUTCOME_STREAM_TIMEOUT:
        return "stream_total";
    default:
        return NULL;
    }
}

/* server.address and server.port of an endpoint named
 * scheme://host:port/path (sg_op_endpoint_name). */
static void add_server(sg__otel_span *s, const char *url, int *rc) {
    const char *sep = strstr(url, "://");
    if (sep == NULL) {
        return;
    }
    const char *host = sep + 3;
    size_t alen = strcspn(host, "/");
    const char *colon = NULL;
    for (const char *q = host; q < host + alen; q++) {
        if (*q == ':') {
            colon = q;
        } else if (*q == ']') {
            colon = NULL;
        }
    }
    size_t hlen = colon != NULL ? (size_t)(colon - host) : alen;
    if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
        host++; /* an IPv6 literal, without its brackets */
        hlen -= 2;
    }
    char name[URL_MAX];
    if (hlen == 0 || hlen >= sizeof(name)) {
        return;
    }
    memcpy(name, host, hlen);
    name[hlen] = '\0';
    add_str(s, "server.address", name, rc);
    if (colon != NULL) {
        sg__otel_span_add_int(s, "server.port", strtol(colon + 1, NULL, 10));
    }
}

static void add_ms(sg__otel_span *s, const char *key, int64_t ns) {
    if (ns > 0) {
        sg__otel_span_add_int(s, key, ms_of(ns));
    }
}

/* The attempt's span, from its record as it ended. */
sg__otel_span *sg__otel_attempt_span(const sg_otel_trace *t, const sg_op *op,
                                     const sg_op_attempt *a) {
    sg__otel_span *s = new_span(t, ATTEMPT_ATTRS, ATTEMPT_EVENTS, t->op_span);
    if (s == NULL) {
        return NULL;
    }
    sg__otel_attempt_span_id(t, a->n, s->span_id);
    s->start_unix_nano = unix_of(t, a->started_at);
    s->end_unix_nano = unix_of(t, a->started_at + a->elapsed_ns);
    const char *method = sg_op_method(op);
    int rc = sg__otel_span_set_name(s, method != NULL ? method : "HTTP");
    bool lost = a->reason == SG_OP_REASON_HEDGE_LOST;
    bool ok = a->outcome == SG_OUTCOME_OK;
    add_str(s, "http.request.method", method, &rc);
    /* the model this attempt asked for: its endpoint's own, else the
     * operation's */
    const char *model =
        a->endpoint < SG_OP_MAX_ENDPOINTS ? t->endpoint_model[a->endpoint] : NULL;
    if (model == NULL && t->model[0] != '\0') {
        model = t->model;
    } else if (model != NULL && model[0] == '\0') {
        model = NULL; /* its endpoint asks for one that cannot be named */
    }
    add_str(s, "gen_ai.request.model", model, &rc);
    char url[URL_MAX];
    if (sg_op_endpoint_name(op, a->endpoint, url, sizeof(url)) > 0) {
        add_str(s, "url.full", url, &rc);
        add_server(s, url, &rc);
    }
    /* the caller's probe (attempt 1, when there is one) sent nothing: the
     * operation's own first attempt is its first send, no resend */
    bool probe = sg_op_attempt_probe(op, a->n - 1);
    uint32_t resends = a->n - 1 - (!probe && sg_op_attempt_probe(op, 0) ? 1u : 0u);
    if (resends > 0) {
        sg__otel_span_add_int(s, "http.request.resend_count", resends);
    }
    if (a->http_status > 0) {
        sg__otel_span_add_int(s, "http.response.status_code", a->http_status);
    }
    char status[16];
    if (!ok && !lost) {
        if (a->outcome == SG_OUTCOME_HTTP_ERROR && a->http_status > 0) {
            snprintf(status, sizeof(status), "%d", a->http_status);
            add_str(s, "error.type", status, &rc);
        } else {
            add_str(s, "error.type", sg_outcome_name(a->outcome), &rc);
        }
    }
    if (a->time_to_first_item_ns >= 0) {
        sg__otel_span_add_double(s, "gen_ai.response.time_to_first_chunk",
                                 seconds_of(a->time_to_first_item_ns));
    }
    add_usage(s, &a->usage, &rc);
    sg__otel_span_add_int(s, "streamguard.attempt", a->n);
    sg__otel_span_add_int(s, "streamguard.endpoint", a->endpoint);
    sg__otel_span_add_bool(s, "streamguard.hedge", a->hedge);
    if (probe) {
        sg__otel_span_add_bool(s, "streamguard.probe", true);
    }
    add_str(s, "streamguard.outcome", sg_outcome_name(a->outcome), &rc);
    add_str(s, "streamguard.phase", sg_phase_name(a->phase), &rc);
    add_str(s, "streamguard.decision", sg_op_decision_name(a->decision), &rc);
    add_str(s, "streamguard.reason", sg_op_reason_name(a->reason), &rc);
    add_str(s, "streamguard.limit", limit_of(a->outcome), &rc);
    /* who set its lease: every attempt has one, whatever ended it */
    add_str(s, "streamguard.lease_by", sg_op_attempt_lease_by(op, a->n - 1), &rc);
    sg__otel_span_add_bool(s, "streamguard.sent", a->sent);
    sg__otel_span_add_bool(s, "streamguard.partial", a->partial);
    sg__otel_span_add_bool(s, "streamguard.retryable", a->retryable);
    sg__otel_span_add_bool(s, "streamguard.outcome_unknown", a->outcome_unknown);
    /* the stream the consumer kept is the one of an ok end the policy
     * took as the answer; every other attempt that was sent is discarded */
    bool kept = ok && a->decision == SG_OP_DONE;
    sg__otel_span_add_bool(s, "streamguard.discarded", a->sent && !kept);
    sg__otel_span_add_int(s, "streamguard.remaining_ms", ms_of(a->remaining_ns));
    add_ms(s, "streamguard.granted.attempt_ms", a->attempt_timeout_ns);
    add_ms(s, "streamguard.granted.connect_ms", a->connect_timeout_ns);
    add_ms(s, "streamguard.granted.first_item_ms", a->first_item_timeout_ns);
    add_ms(s, "streamguard.granted.idle_ms", a->idle_timeout_ns);
    add_ms(s, "streamguard.granted.stream_total_ms", a->stream_timeout_ns);
    sg__otel_span_add_int(s, "streamguard.items", (int64_t)a->items);
    sg__otel_span_add_int(s, "streamguard.bytes", (int64_t)a->bytes);
    if (a->retry_after_ns >= 0) {
        sg__otel_span_add_int(s, "streamguard.retry_after_ms", ms_of(a->retry_after_ns));
    }
    if (a->backoff_ns >= 0) {
        sg__otel_span_add_int(s, "streamguard.backoff_ms", ms_of(a->backoff_ns));
    }
    if (a->hedge_source != SG_HEDGE_SOURCE_NONE) {
        sg__otel_span_add_int(s, "streamguard.hedge_after_ms", ms_of(a->hedge_after_ns));
        add_str(s, "streamguard.hedge_after_source",
                sg_hedge_source_name(a->hedge_source), &rc);
    }
    if (a->provider_error_type[0] != '\0') {
        add_str(s, "streamguard.provider_error_type", a->provider_error_type, &rc);
    }
    if (a->error[0] != '\0') {
        add_str(s, "streamguard.error", a->error, &rc);
    }
    if (a->time_to_first_item_ns >= 0) {
        sg__otel_span_add_event(s, "streamguard.first_chunk",
                                unix_of(t, a->started_at + a->time_to_first_item_ns));
    }
    if (rc == 0 && !ok && !lost) {
        rc = sg__otel_span_set_status(s, SG__OTEL_STATUS_ERROR,
                                      a->error[0] != '\0' ? a->error
                                                          : sg_outcome_name(a->outcome));
    }
    if (rc != 0) {
        sg__otel_span_free(s);
        return NULL;
    }
    return s;
}

/* Backoff sleeps (after each attempt that was retried) and what endpoint
 * health made the operation do, as events of its span. */
static void op_events(const sg_otel_trace *t, const sg_op *op, sg__otel_span *s,
                      int *rc) {
    uint32_t n = sg_op_attempt_count(op);
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        if (a == NULL || a->running || a->decision != SG_OP_RETRY || a->backoff_ns < 0) {
            continue;
        }
        sg__otel_span_add_event(s, "streamguard.backoff",
                                unix_of(t, a->started_at + a->elapsed_ns));
        sg__otel_span_event_add_int(s, "streamguard.attempt", a->n);
        sg__otel_span_event_add_int(s, "streamguard.backoff_ms", ms_of(a->backoff_ns));
        if (a->retry_after_ns >= 0) {
            sg__otel_span_event_add_int(s, "streamguard.retry_after_ms",
                                        ms_of(a->retry_after_ns));
        }
    }
    static const char *const names[] = {"streamguard.endpoint_skipped",
                                        "streamguard.endpoint_wait",
                                        "streamguard.endpoint_refused"};
    uint32_t ne = sg_op_health_event_count(op);
    for (uint32_t i = 0; i < ne && *rc == 0; i++) {
        const sg_op_health_event *e = sg_op_health_event_at(op, i);
        if (e == NULL || (unsigned)e->action > SG_OP_HEALTH_REFUSED) {
            continue;
        }
        sg__otel_span_add_event(s, names[e->action], unix_of(t, e->at));
        sg__otel_span_event_add_int(s, "streamguard.endpoint", e->endpoint);
        sg__otel_span_event_add_int(s, "streamguard.attempt", e->before_attempt);
        *rc = sg__otel_span_event_add_str(s, "streamguard.reason",
                                          sg_op_reason_name(e->reason));
        if (e->action == SG_OP_HEALTH_WAITED) {
            sg__otel_span_event_add_int(s, "streamguard.waited_ms", ms_of(e->waited_ns));
        }
    }
    s->dropped_events += sg_op_health_events_dropped(op);
}

/* The operation's tokens of @fate, each kind it knows, under @keys (in
 * the order of sg_token_kind: input, output, cached input, reasoning). */
static void add_tokens(sg__otel_span *s, const sg_op *op, sg_usage_fate fate,
                       const char *const keys[4]) {
    static const sg_token_kind kinds[4] = {SG_TOKENS_INPUT, SG_TOKENS_OUTPUT,
                                           SG_TOKENS_CACHED_INPUT, SG_TOKENS_REASONING};
    for (size_t i = 0; i < 4; i++) {
        int64_t n = sg_op_tokens(op, fate, kinds[i]);
        if (n >= 0) {
            sg__otel_span_add_int(s, keys[i], n);
        }
    }
}

/* The operation's span, once it has ended. */
sg__otel_span *sg__otel_op_span(const sg_otel_trace *t, const sg_op *op) {
    sg__otel_span *s =
        new_span(t, OP_ATTRS, OP_EVENTS, t->has_parent ? t->parent_span : NULL);
    if (s == NULL) {
        return NULL;
    }
    memcpy(s->span_id, t->op_span, sizeof(s->span_id));
    const sg_budget *b = sg_op_budget(op);
    int64_t t0 = sg_budget_started_at(b);
    s->start_unix_nano = unix_of(t, t0);
    s->end_unix_nano = unix_of(t, sg_op_finished_at(op));
    char name[2 * SG_OTEL_NAME_MAX + 2];
    if (t->operation[0] != '\0') {
        snprintf(name, sizeof(name), "%s%s%s", t->operation,
                 t->model[0] != '\0' ? " " : "", t->model);
    } else {
        snprintf(name, sizeof(name), "streamguard.operation");
    }
    int rc = sg__otel_span_set_name(s, name);
    add_str(s, "gen_ai.operation.name", t->operation[0] != '\0' ? t->operation : NULL,
            &rc);
    add_str(s, "gen_ai.provider.name", t->provider[0] != '\0' ? t->provider : NULL, &rc);
    add_str(s, "gen_ai.request.model", t->model[0] != '\0' ? t->model : NULL, &rc);
    sg_outcome oc = sg_op_outcome(op);
    bool ok = oc == SG_OUTCOME_OK;
    if (!ok) {
        add_str(s, "error.type", sg_outcome_name(oc), &rc);
    }
    const sg_op_attempt *d = sg_op_deciding_attempt(op);
    if (ok && d != NULL && d->time_to_first_item_ns >= 0) {
        /* from the operation's start: retries and waits before it count */
        sg__otel_span_add_double(
            s, "gen_ai.response.time_to_first_chunk",
            seconds_of(d->started_at + d->time_to_first_item_ns - t0));
    }
    static const char *const kept_keys[4] = {
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.reasoning.output_tokens"};
    static const char *const discarded_keys[4] = {
        "streamguard.usage.discarded.input_tokens",
        "streamguard.usage.discarded.output_tokens",
        "streamguard.usage.discarded.cache_read.input_tokens",
        "streamguard.usage.discarded.reasoning.output_tokens"};
    add_tokens(s, op, SG_USAGE_KEPT, kept_keys);
    add_tokens(s, op, SG_USAGE_DISCARDED, discarded_keys);
    if (sg_op_tokens_estimated(op, SG_USAGE_KEPT) ||
        sg_op_tokens_estimated(op, SG_USAGE_DISCARDED)) {
        sg__otel_span_add_bool(s, "streamguard.usage.estimated", true);
    }
    uint32_t unaccounted = sg_op_attempts_unaccounted(op);
    if (unaccounted > 0) {
        sg__otel_span_add_int(s, "streamguard.attempts_unaccounted", unaccounted);
    }
    double kept = sg_op_cost(op, SG_USAGE_KEPT);
    if (kept >= 0) {
        sg__otel_span_add_double(s, "streamguard.cost.kept", kept);
        sg__otel_span_add_double(s, "streamguard.cost.discarded",
                                 sg_op_cost(op, SG_USAGE_DISCARDED));
    }
    add_str(s, "streamguard.outcome", sg_outcome_name(oc), &rc);
    add_str(s, "streamguard.decision", sg_op_decision_name(sg_op_final_decision(op)),
            &rc);
    add_str(s, "streamguard.reason", sg_op_reason_name(sg_op_final_reason(op)), &rc);
    uint32_t n = sg_op_attempt_count(op);
    uint32_t hedges = 0;
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(op, i);
        hedges += a != NULL && a->hedge;
    }
    sg__otel_span_add_int(s, "streamguard.attempts", n);
    if (hedges > 0) {
        sg__otel_span_add_int(s, "streamguard.hedges", hedges);
    }
    if (d != NULL) {
        sg__otel_span_add_int(s, "streamguard.deciding_attempt", d->n);
        add_str(s, "streamguard.phase", sg_phase_name(d->phase), &rc);
        sg__otel_span_add_bool(s, "streamguard.partial", d->partial);
        sg__otel_span_add_bool(s, "streamguard.outcome_unknown", d->outcome_unknown);
        add_str(s, "streamguard.limit", limit_of(d->outcome), &rc);
    }
    sg__otel_span_add_int(s, "streamguard.budget_ms",
                          ms_of(sg_budget_deadline(b) - sg_budget_started_at(b)));
    op_events(t, op, s, &rc);
    if (rc == 0 && !ok) {
        char msg[96];
        snprintf(msg, sizeof(msg), "%s (%s)", sg_outcome_name(oc),
                 sg_op_reason_name(sg_op_final_reason(op)));
        rc = sg__otel_span_set_status(s, SG__OTEL_STATUS_ERROR, msg);
    }
    if (rc != 0) {
        sg__otel_span_free(s);
        return NULL;
    }
    return s;
}
