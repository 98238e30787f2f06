/*
 * A test OTLP/HTTP collector on loopback (tests/integration/otel_collector.c):
 * one thread that accepts POSTs of ExportTraceServiceRequest, decodes them
 * with the C protoc-c generated from the same pinned definitions, and keeps
 * what the tests check - the spans, their links, the request's headers.
 * It can answer scripted statuses first (503 with Retry-After, 400), or
 * read every request and never answer (a blackhole).
 */
#ifndef SG_OTEL_COLLECTOR_H
#define SG_OTEL_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum oc_mode {
    OC_ANSWER,    /* scripted statuses first, then 200 */
    OC_BLACKHOLE, /* reads the request, never answers, keeps the connection */
};

typedef struct oc_span {
    char name[64];
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    bool has_parent;
    uint64_t start_unix_nano, end_unix_nano;
    size_t nattrs, nevents;
} oc_span;

typedef struct otel_collector otel_collector;

/* Starts a collector on 127.0.0.1, an ephemeral port.  Returns NULL on
 * failure. */
otel_collector *oc_start(enum oc_mode mode);
/* Its first @n responses are @statuses (with "Retry-After: @retry_after"
 * when not NULL), then 200.  Before any request. */
void oc_script(otel_collector *c, const int *statuses, size_t n, const char *retry_after);
uint16_t oc_port(const otel_collector *c);
/* Waits up to @timeout_ms until @want spans were accepted (answered 200);
 * returns how many were. */
size_t oc_wait_spans(otel_collector *c, size_t want, int timeout_ms);
/* Requests received (answered or not). */
size_t oc_requests(otel_collector *c);
/* A copy of the accepted spans (malloc'd; *@n of them). */
oc_span *oc_spans(otel_collector *c, size_t *n);
/* Whether the last request's head holds @text (case-sensitive). */
bool oc_last_head_has(otel_collector *c, const char *text);
/* Stops the thread, closes every connection, frees. */
void oc_stop(otel_collector *c);

#endif /* SG_OTEL_COLLECTOR_H */
