/*
 * A capture sink in place of the OTLP exporter, for the observer's tests:
 * it defines sg__otel_submit (src/otel/span.h) and keeps every span handed
 * to it, in order, for the test to read.  Not thread-safe (the tests
 * drive operations on one thread).
 */
#ifndef SG_TEST_OTEL_SINK_H
#define SG_TEST_OTEL_SINK_H

#include "otel/span.h"

/* The most spans kept; more are freed and counted (otel_sink_overflow). */
#define OTEL_SINK_MAX 64

/* The stand-in exporter handed to sg_otel_trace_new. */
sg_otel *otel_sink(void);
/* Frees the spans kept. */
void otel_sink_reset(void);
size_t otel_sink_count(void);
size_t otel_sink_overflow(void);
const sg__otel_span *otel_sink_at(size_t i);
/* The span's attribute @key, or NULL. */
const sg__otel_attr *otel_attr(const sg__otel_span *s, const char *key);
/* The event's attribute @key, or NULL. */
const sg__otel_attr *otel_event_attr(const sg__otel_event *e, const char *key);
/* The sampled traceparent that names span @s, into @out (56 bytes). */
void traceparent_of(const sg__otel_span *s, char *out);

#endif
