/* SPDX-License-Identifier: MIT */
/*
 * src/otel/span.h - a finished span, as the OpenTelemetry observer hands it
 * to the OTLP exporter (internal).
 *
 * The observer (src/otel/observer.c) builds one sg__otel_span per
 * operation and per attempt from the policy's callbacks; the exporter
 * (src/otel/export.c) queues it without blocking, batches it on its own
 * thread and encodes it as an OTLP ExportTraceServiceRequest
 * (src/otel/encode.c, from the vendored third_party/opentelemetry-proto).
 *
 * Ownership: a span is one allocation (sg__otel_span_new) holding its
 * strings, attributes and events; sg__otel_submit takes it in every case
 * (queued, or freed and counted as dropped).
 */
#ifndef SG_OTEL_SPAN_H
#define SG_OTEL_SPAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sg_otel sg_otel; /* the exporter and its settings */

#define SG__OTEL_TRACE_ID_LEN 16
#define SG__OTEL_SPAN_ID_LEN 8

/* OTLP Span.SpanKind values */
enum sg__otel_kind {
    SG__OTEL_KIND_INTERNAL = 1,
    SG__OTEL_KIND_SERVER = 2,
    SG__OTEL_KIND_CLIENT = 3,
};

/* OTLP Status.StatusCode values */
enum sg__otel_status {
    SG__OTEL_STATUS_UNSET = 0,
    SG__OTEL_STATUS_OK = 1,
    SG__OTEL_STATUS_ERROR = 2,
};

enum sg__otel_value_type {
    SG__OTEL_STRING,
    SG__OTEL_BOOL,
    SG__OTEL_INT,
    SG__OTEL_DOUBLE,
};

/* One attribute: key and string values point into the span's own
 * storage (or at string literals). */
typedef struct sg__otel_attr {
    const char *key;
    enum sg__otel_value_type type;
    union {
        const char *s;
        bool b;
        int64_t i;
        double d;
    } v;
} sg__otel_attr;

/* One span event (a backoff sleep, an endpoint wait, a hedge launched). */
typedef struct sg__otel_event {
    const char *name;
    uint64_t time_unix_nano;
    const sg__otel_attr *attrs;
    size_t nattrs;
} sg__otel_event;

typedef struct sg__otel_span {
    uint8_t trace_id[SG__OTEL_TRACE_ID_LEN];
    uint8_t span_id[SG__OTEL_SPAN_ID_LEN];
    uint8_t parent_span_id[SG__OTEL_SPAN_ID_LEN]; /* all zero: a root */
    const char *trace_state;                      /* W3C tracestate, or NULL */
    uint32_t flags;                               /* W3C trace flags (sampled: 1) */
    const char *name;
    enum sg__otel_kind kind;
    uint64_t start_unix_nano;
    uint64_t end_unix_nano;
    enum sg__otel_status status;
    const char *status_message; /* NULL unless status is ERROR */
    const sg__otel_attr *attrs;
    size_t nattrs;
    const sg__otel_event *events;
    size_t nevents;
    uint32_t dropped_attrs; /* past the span's limits, as OTLP counts them */
    uint32_t dropped_events;
} sg__otel_span;

/* Building a span: sg__otel_span_new gives an empty span (ids zero,
 * kind INTERNAL, status UNSET) with room for @max_attrs attributes and
 * @max_events events; each adder copies its strings into the span (keys
 * and event names must be string literals: they are kept as pointers).
 * An attribute or event past the room is counted in dropped_attrs or
 * dropped_events, as OTLP does; an event's attributes go to the last
 * event added.  Each returns 0, or SG_ENOMEM (the span stays valid).
 * Not thread-safe: one span, one builder. */
sg__otel_span *sg__otel_span_new(size_t max_attrs, size_t max_events);
int sg__otel_span_set_name(sg__otel_span *span, const char *name);
int sg__otel_span_set_status(sg__otel_span *span, enum sg__otel_status status,
                             const char *message);
int sg__otel_span_set_trace_state(sg__otel_span *span, const char *trace_state);
int sg__otel_span_add_str(sg__otel_span *span, const char *key, const char *value);
int sg__otel_span_add_bool(sg__otel_span *span, const char *key, bool value);
int sg__otel_span_add_int(sg__otel_span *span, const char *key, int64_t value);
int sg__otel_span_add_double(sg__otel_span *span, const char *key, double value);
int sg__otel_span_add_event(sg__otel_span *span, const char *name,
                            uint64_t time_unix_nano);
int sg__otel_span_event_add_str(sg__otel_span *span, const char *key, const char *value);
int sg__otel_span_event_add_int(sg__otel_span *span, const char *key, int64_t value);

/* Free a span (NULL is fine). */
void sg__otel_span_free(sg__otel_span *span);

/* Hand a finished span to the exporter: never blocks, never fails the
 * caller.  The exporter owns @span from here (freed by sg__otel_span_free
 * once exported, or at once when its queue is full: counted as dropped).
 * Thread-safe. */
void sg__otel_submit(sg_otel *otel, sg__otel_span *span);

#endif /* SG_OTEL_SPAN_H */
