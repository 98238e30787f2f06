/*
 * The capture sink (otel_sink.h): sg__otel_submit keeps the spans.
 */
#include "otel_sink.h"

#include <stdio.h>
#include <string.h>

static sg__otel_span *spans[OTEL_SINK_MAX];
static size_t count, overflow;
static char token; /* what otel_sink() points at: never read */

sg_otel *otel_sink(void) {
    return (sg_otel *)(void *)&token;
}

void sg__otel_submit(sg_otel *otel, sg__otel_span *span) {
    (void)otel;
    if (count == OTEL_SINK_MAX) {
        overflow++;
        sg__otel_span_free(span);
        return;
    }
    spans[count++] = span;
}

void otel_sink_reset(void) {
    for (size_t i = 0; i < count; i++) {
        sg__otel_span_free(spans[i]);
    }
    count = 0;
    overflow = 0;
}

size_t otel_sink_count(void) {
    return count;
}

size_t otel_sink_overflow(void) {
    return overflow;
}

const sg__otel_span *otel_sink_at(size_t i) {
    return i < count ? spans[i] : NULL;
}

const sg__otel_attr *otel_attr(const sg__otel_span *s, const char *key) {
    for (size_t i = 0; i < s->nattrs; i++) {
        if (strcmp(s->attrs[i].key, key) == 0) {
            return &s->attrs[i];
        }
    }
    return NULL;
}

const sg__otel_attr *otel_event_attr(const sg__otel_event *e, const char *key) {
    for (size_t i = 0; i < e->nattrs; i++) {
        if (strcmp(e->attrs[i].key, key) == 0) {
            return &e->attrs[i];
        }
    }
    return NULL;
}

static void hexs(char *out, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        sprintf(out + 2 * i, "%02x", p[i]);
    }
}

void traceparent_of(const sg__otel_span *s, char *out) {
    char tr[2 * SG__OTEL_TRACE_ID_LEN + 1], sp[2 * SG__OTEL_SPAN_ID_LEN + 1];
    hexs(tr, s->trace_id, SG__OTEL_TRACE_ID_LEN);
    hexs(sp, s->span_id, SG__OTEL_SPAN_ID_LEN);
    sprintf(out, "00-%s-%s-01", tr, sp);
}
