/*
 * src/otel/trace.h - what the observer's files share (internal): the
 * trace's insides (observer.c: the API, ids and callbacks) and the spans
 * built from an operation's records (trace_spans.c).
 */
#ifndef SG_OTEL_TRACE_H
#define SG_OTEL_TRACE_H

#include <streamguard/op.h>
#include <streamguard/otel_trace.h>

#include "span.h"

#include <stdbool.h>
#include <stdint.h>

struct sg_otel_trace {
    sg_otel *otel;
    sg_op_observer *obs;
    /* the caller's context (sg_otel_trace_set_parent) */
    bool has_parent;
    uint8_t parent_trace[SG__OTEL_TRACE_ID_LEN];
    uint8_t parent_span[SG__OTEL_SPAN_ID_LEN];
    uint8_t parent_flags;
    char tracestate[SG_OTEL_TRACESTATE_MAX + 1]; /* "" none */
    /* GenAI (sg_otel_trace_set_genai); "" none */
    char provider[SG_OTEL_NAME_MAX + 1];
    char operation[SG_OTEL_NAME_MAX + 1];
    char model[SG_OTEL_NAME_MAX + 1];
    /* the model each endpoint asks for, when not the operation's
     * (sg_otel_trace_set_endpoint_model); NULL none */
    char *endpoint_model[SG_OP_MAX_ENDPOINTS];
    bool clock_set;
    int64_t offset; /* unix ns - monotonic ns */
    /* the operation it follows */
    bool active;
    bool sampled;
    uint8_t trace_id[SG__OTEL_TRACE_ID_LEN];
    uint8_t op_span[SG__OTEL_SPAN_ID_LEN];
    uint64_t seed;
    bool probe_spanned; /* the caller's probe's span went (observer.c) */
};

/* Attempt @n's span id (a bijection of @n for the operation's seed). */
void sg__otel_attempt_span_id(const sg_otel_trace *t, uint32_t n, uint8_t *out);

/* The span of attempt @a as it ended, and the operation's once it has
 * resolved: NULL when out of memory. */
sg__otel_span *sg__otel_attempt_span(const sg_otel_trace *t, const sg_op *op,
                                     const sg_op_attempt *a);
sg__otel_span *sg__otel_op_span(const sg_otel_trace *t, const sg_op *op);

#endif /* SG_OTEL_TRACE_H */
