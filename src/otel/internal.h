/* SPDX-License-Identifier: MIT */
/*
 * src/otel/internal.h - what the exporter's files share (internal): the
 * options' insides, the OTLP encoding of a batch, and the retry rules of
 * an export.
 */
#ifndef SG_OTEL_INTERNAL_H
#define SG_OTEL_INTERNAL_H

#include "span.h"

#include <streamguard/otel.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SG__OTEL_DEFAULT_ENDPOINT "http://localhost:4318/v1/traces"
#define SG__OTEL_DEFAULT_SERVICE "unknown_service"
#define SG__OTEL_MAX_SPANS ((size_t)1 << 20)
#define SG__OTEL_MS ((int64_t)1000000)
#define SG__OTEL_MAX_DURATION (3600 * 1000 * SG__OTEL_MS)

struct sg_otel_options {
    char *endpoint;
    char *headers[SG_OTEL_MAX_HEADERS]; /* "Name: value" lines */
    size_t nheaders;
    char *service_name;
    size_t max_queue;
    size_t max_batch;
    int64_t schedule_delay_ns;
    int64_t export_timeout_ns;
};

/* A copy of @src (all of it, or SG_ENOMEM: *@dst then NULL). */
int sg__otel_options_copy(const sg_otel_options *src, sg_otel_options **dst);

/*
 * Encodes @n spans as one OTLP ExportTraceServiceRequest: one
 * ResourceSpans (@resource: string attributes, service.name among them),
 * one ScopeSpans (scope "streamguard"), the spans in order.  *@out is a
 * malloc'd buffer of *@len bytes the caller frees.  Returns 0, or
 * SG_EINVAL, SG_ENOMEM.
 */
int sg__otel_encode(const sg__otel_attr *resource, size_t nresource,
                    sg__otel_span *const *spans, size_t n, uint8_t **out, size_t *len);

/* OTLP/HTTP: whether a response status may be retried (429, 502, 503,
 * 504; the specification's list). */
bool sg__otel_status_retryable(long status);

/* The wait before retry @retry (0 for the first) in ns: a Retry-After of
 * @retry_after_s seconds when >= 0, else exponential from 1 s (x1.5, at
 * most 5 s) with jitter from @random (uniform 64 bits): 50 % to 100 %. */
int64_t sg__otel_backoff(unsigned retry, int64_t retry_after_s, uint64_t random);

/* A Retry-After header value in delta-seconds, or -1 (absent, an
 * HTTP-date, malformed). */
int64_t sg__otel_retry_after(const char *value, size_t len);

#endif /* SG_OTEL_INTERNAL_H */
