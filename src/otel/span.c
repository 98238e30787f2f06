/*
 * Building a span for the exporter (span.h): a fixed room for attributes
 * and events, decided when the span is made, and the copies of its
 * strings in chunks the span owns.  What does not fit is counted as
 * dropped, as OTLP's dropped_attributes_count and dropped_events_count
 * say.
 */
#include "span.h"

#include <streamguard/core.h>

#include <stdlib.h>
#include <string.h>

#define EVENT_ATTRS 8  /* attributes per event */
#define CHUNK_MIN 1024 /* bytes of strings per chunk, at least */

struct chunk {
    struct chunk *next;
    size_t used, size;
    char data[];
};

struct event_room {
    sg__otel_attr attrs[EVENT_ATTRS];
};

struct span_impl {
    sg__otel_span pub; /* first: a span's address is its impl's */
    sg__otel_attr *attrs;
    size_t max_attrs;
    sg__otel_event *events;
    struct event_room *event_attrs;
    size_t max_events;
    struct chunk *chunks;
};

static struct span_impl *impl_of(sg__otel_span *span) {
    return (struct span_impl *)span;
}

sg__otel_span *sg__otel_span_new(size_t max_attrs, size_t max_events) {
    struct span_impl *s = calloc(1, sizeof *s);
    if (s == NULL) {
        return NULL;
    }
    s->attrs = max_attrs > 0 ? calloc(max_attrs, sizeof *s->attrs) : NULL;
    s->events = max_events > 0 ? calloc(max_events, sizeof *s->events) : NULL;
    s->event_attrs = max_events > 0 ? calloc(max_events, sizeof *s->event_attrs) : NULL;
    if ((max_attrs > 0 && s->attrs == NULL) ||
        (max_events > 0 && (s->events == NULL || s->event_attrs == NULL))) {
        sg__otel_span_free(&s->pub);
        return NULL;
    }
    s->max_attrs = max_attrs;
    s->max_events = max_events;
    s->pub.kind = SG__OTEL_KIND_INTERNAL;
    s->pub.status = SG__OTEL_STATUS_UNSET;
    s->pub.attrs = s->attrs;
    s->pub.events = s->events;
    return &s->pub;
}

void sg__otel_span_free(sg__otel_span *span) {
    if (span == NULL) {
        return;
    }
    struct span_impl *s = impl_of(span);
    struct chunk *c = s->chunks;
    while (c != NULL) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    free(s->attrs);
    free(s->events);
    free(s->event_attrs);
    free(s);
}

/* A copy of @str in the span's storage, or NULL when out of memory. */
static const char *keep(struct span_impl *s, const char *str) {
    size_t n = strlen(str) + 1;
    struct chunk *c = s->chunks;
    if (c == NULL || c->size - c->used < n) {
        size_t size = n > CHUNK_MIN ? n : CHUNK_MIN;
        c = malloc(sizeof *c + size);
        if (c == NULL) {
            return NULL;
        }
        c->next = s->chunks;
        c->used = 0;
        c->size = size;
        s->chunks = c;
    }
    char *out = c->data + c->used;
    memcpy(out, str, n);
    c->used += n;
    return out;
}

int sg__otel_span_set_name(sg__otel_span *span, const char *name) {
    const char *copy = keep(impl_of(span), name);
    if (copy == NULL) {
        return SG_ENOMEM;
    }
    span->name = copy;
    return 0;
}

int sg__otel_span_set_status(sg__otel_span *span, enum sg__otel_status status,
                             const char *message) {
    const char *copy = NULL;
    if (message != NULL && (copy = keep(impl_of(span), message)) == NULL) {
        return SG_ENOMEM;
    }
    span->status = status;
    span->status_message = copy;
    return 0;
}

int sg__otel_span_set_trace_state(sg__otel_span *span, const char *trace_state) {
    const char *copy = NULL;
    if (trace_state != NULL && (copy = keep(impl_of(span), trace_state)) == NULL) {
        return SG_ENOMEM;
    }
    span->trace_state = copy;
    return 0;
}

/* The next attribute slot of the span, or NULL (counted as dropped). */
static sg__otel_attr *span_slot(sg__otel_span *span, const char *key) {
    struct span_impl *s = impl_of(span);
    if (span->nattrs == s->max_attrs) {
        span->dropped_attrs++;
        return NULL;
    }
    sg__otel_attr *a = &s->attrs[span->nattrs];
    a->key = key;
    return a;
}

/* The next attribute slot of the last event, or NULL (nothing to hold it,
 * or full: the extra attribute is lost, events carry no dropped count
 * here). */
static sg__otel_attr *event_slot(sg__otel_span *span, const char *key) {
    struct span_impl *s = impl_of(span);
    if (span->nevents == 0) {
        return NULL;
    }
    size_t i = span->nevents - 1;
    sg__otel_event *e = &s->events[i];
    if (e->nattrs == EVENT_ATTRS) {
        return NULL;
    }
    sg__otel_attr *a = &s->event_attrs[i].attrs[e->nattrs];
    a->key = key;
    return a;
}

/* Fill @a (when there is one) with a copy of @value and count it. */
static int set_str(sg__otel_span *span, sg__otel_attr *a, size_t *count,
                   const char *value) {
    if (a == NULL) {
        return 0;
    }
    const char *copy = keep(impl_of(span), value != NULL ? value : "");
    if (copy == NULL) {
        return SG_ENOMEM;
    }
    a->type = SG__OTEL_STRING;
    a->v.s = copy;
    (*count)++;
    return 0;
}

int sg__otel_span_add_str(sg__otel_span *span, const char *key, const char *value) {
    return set_str(span, span_slot(span, key), &span->nattrs, value);
}

int sg__otel_span_add_bool(sg__otel_span *span, const char *key, bool value) {
    sg__otel_attr *a = span_slot(span, key);
    if (a != NULL) {
        a->type = SG__OTEL_BOOL;
        a->v.b = value;
        span->nattrs++;
    }
    return 0;
}

int sg__otel_span_add_int(sg__otel_span *span, const char *key, int64_t value) {
    sg__otel_attr *a = span_slot(span, key);
    if (a != NULL) {
        a->type = SG__OTEL_INT;
        a->v.i = value;
        span->nattrs++;
    }
    return 0;
}

int sg__otel_span_add_double(sg__otel_span *span, const char *key, double value) {
    sg__otel_attr *a = span_slot(span, key);
    if (a != NULL) {
        a->type = SG__OTEL_DOUBLE;
        a->v.d = value;
        span->nattrs++;
    }
    return 0;
}

int sg__otel_span_add_event(sg__otel_span *span, const char *name,
                            uint64_t time_unix_nano) {
    struct span_impl *s = impl_of(span);
    if (span->nevents == s->max_events) {
        span->dropped_events++;
        return 0;
    }
    size_t i = span->nevents++;
    s->events[i].name = name;
    s->events[i].time_unix_nano = time_unix_nano;
    s->events[i].attrs = s->event_attrs[i].attrs;
    s->events[i].nattrs = 0;
    return 0;
}

int sg__otel_span_event_add_str(sg__otel_span *span, const char *key, const char *value) {
    sg__otel_attr *a = event_slot(span, key);
    if (a == NULL) {
        return 0;
    }
    sg__otel_event *e = &impl_of(span)->events[span->nevents - 1];
    return set_str(span, a, &e->nattrs, value);
}

int sg__otel_span_event_add_int(sg__otel_span *span, const char *key, int64_t value) {
    sg__otel_attr *a = event_slot(span, key);
    if (a != NULL) {
        a->type = SG__OTEL_INT;
        a->v.i = value;
        impl_of(span)->events[span->nevents - 1].nattrs++;
    }
    return 0;
}
