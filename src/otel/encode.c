/*
 * A batch of spans as one OTLP ExportTraceServiceRequest, through the C
 * that protoc-c generated from the vendored opentelemetry-proto: the
 * messages are laid out in a few arrays sized from the batch (no
 * allocation per attribute), point at the spans' own strings, and are
 * packed once.  Runs on the exporter's thread only.
 */
#include "internal.h"

#include <opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h>

#include <stdlib.h>
#include <string.h>

typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource Resource;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans ResourceSpans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans ScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Trace__V1__Span__Event Event;
typedef Opentelemetry__Proto__Trace__V1__Status Status;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest Request;

/* protobuf-c's messages hold char * and uint8_t * they never write
 * through when packing: the spans' const strings go in as they are. */
static char *str(const char *s) {
    return (char *)(uintptr_t)(s != NULL ? s : "");
}

static ProtobufCBinaryData bytes(const uint8_t *b, size_t n) {
    ProtobufCBinaryData d = {n, (uint8_t *)(uintptr_t)b};
    return d;
}

/* Everything one request points at, in arrays sized once. */
struct layout {
    KeyValue *kv;
    AnyValue *av;
    KeyValue **kvp;
    size_t nkv, usedkv;
    Span *spans;
    Span **spanp;
    Status *status;
    Event *events;
    Event **eventp;
    size_t usedev;
};

static void layout_free(struct layout *l) {
    free(l->kv);
    free(l->av);
    free(l->kvp);
    free(l->spans);
    free(l->spanp);
    free(l->status);
    free(l->events);
    free(l->eventp);
}

/* The next @n attributes of the layout, filled from @attrs. */
static KeyValue **attrs_of(struct layout *l, const sg__otel_attr *attrs, size_t n) {
    KeyValue **out = &l->kvp[l->usedkv];
    for (size_t i = 0; i < n; i++) {
        size_t k = l->usedkv++;
        KeyValue *kv = &l->kv[k];
        AnyValue *av = &l->av[k];
        opentelemetry__proto__common__v1__key_value__init(kv);
        opentelemetry__proto__common__v1__any_value__init(av);
        kv->key = str(attrs[i].key);
        kv->value = av;
        switch (attrs[i].type) {
        case SG__OTEL_BOOL:
            av->value_case =
                OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
            av->bool_value = attrs[i].v.b;
            break;
        case SG__OTEL_INT:
            av->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
            av->int_value = attrs[i].v.i;
            break;
        case SG__OTEL_DOUBLE:
            av->value_case =
                OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE;
            av->double_value = attrs[i].v.d;
            break;
        case SG__OTEL_STRING:
        default:
            av->value_case =
                OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            av->string_value = str(attrs[i].v.s);
            break;
        }
        l->kvp[k] = kv;
    }
    return n > 0 ? out : NULL;
}

static bool is_zero(const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (b[i] != 0) {
            return false;
        }
    }
    return true;
}

static void span_of(struct layout *l, size_t i, const sg__otel_span *s) {
    Span *p = &l->spans[i];
    opentelemetry__proto__trace__v1__span__init(p);
    p->trace_id = bytes(s->trace_id, SG__OTEL_TRACE_ID_LEN);
    p->span_id = bytes(s->span_id, SG__OTEL_SPAN_ID_LEN);
    if (!is_zero(s->parent_span_id, SG__OTEL_SPAN_ID_LEN)) {
        p->parent_span_id = bytes(s->parent_span_id, SG__OTEL_SPAN_ID_LEN);
    }
    p->trace_state = str(s->trace_state);
    p->flags = s->flags;
    p->name = str(s->name);
    p->kind = (Opentelemetry__Proto__Trace__V1__Span__SpanKind)s->kind;
    p->start_time_unix_nano = s->start_unix_nano;
    p->end_time_unix_nano = s->end_unix_nano;
    p->n_attributes = s->nattrs;
    p->attributes = attrs_of(l, s->attrs, s->nattrs);
    p->dropped_attributes_count = s->dropped_attrs;
    p->dropped_events_count = s->dropped_events;
    p->n_events = s->nevents;
    p->events = s->nevents > 0 ? &l->eventp[l->usedev] : NULL;
    for (size_t e = 0; e < s->nevents; e++) {
        size_t k = l->usedev++;
        Event *ev = &l->events[k];
        opentelemetry__proto__trace__v1__span__event__init(ev);
        ev->name = str(s->events[e].name);
        ev->time_unix_nano = s->events[e].time_unix_nano;
        ev->n_attributes = s->events[e].nattrs;
        ev->attributes = attrs_of(l, s->events[e].attrs, s->events[e].nattrs);
        l->eventp[k] = ev;
    }
    if (s->status != SG__OTEL_STATUS_UNSET) {
        Status *st = &l->status[i];
        opentelemetry__proto__trace__v1__status__init(st);
        st->code = (Opentelemetry__Proto__Trace__V1__Status__StatusCode)s->status;
        st->message = str(s->status_message);
        p->status = st;
    }
    l->spanp[i] = p;
}

static int layout_alloc(struct layout *l, size_t nkv, size_t nev, size_t n) {
    memset(l, 0, sizeof *l);
    size_t kv1 = nkv > 0 ? nkv : 1, ev1 = nev > 0 ? nev : 1;
    l->kv = malloc(kv1 * sizeof *l->kv);
    l->av = malloc(kv1 * sizeof *l->av);
    l->kvp = malloc(kv1 * sizeof *l->kvp);
    l->spans = malloc(n * sizeof *l->spans);
    l->spanp = malloc(n * sizeof *l->spanp);
    l->status = malloc(n * sizeof *l->status);
    l->events = malloc(ev1 * sizeof *l->events);
    l->eventp = malloc(ev1 * sizeof *l->eventp);
    if (l->kv == NULL || l->av == NULL || l->kvp == NULL || l->spans == NULL ||
        l->spanp == NULL || l->status == NULL || l->events == NULL || l->eventp == NULL) {
        layout_free(l);
        return SG_ENOMEM;
    }
    l->nkv = nkv;
    return 0;
}

int sg__otel_encode(const sg__otel_attr *resource, size_t nresource,
                    sg__otel_span *const *spans, size_t n, uint8_t **out, size_t *len) {
    if (out == NULL || len == NULL || (n > 0 && spans == NULL) ||
        (nresource > 0 && resource == NULL)) {
        return SG_EINVAL;
    }
    *out = NULL;
    *len = 0;
    size_t nkv = nresource, nev = 0;
    for (size_t i = 0; i < n; i++) {
        nkv += spans[i]->nattrs;
        nev += spans[i]->nevents;
        for (size_t e = 0; e < spans[i]->nevents; e++) {
            nkv += spans[i]->events[e].nattrs;
        }
    }
    struct layout l;
    if (layout_alloc(&l, nkv, nev, n > 0 ? n : 1) != 0) {
        return SG_ENOMEM;
    }
    Resource res;
    opentelemetry__proto__resource__v1__resource__init(&res);
    res.n_attributes = nresource;
    res.attributes = attrs_of(&l, resource, nresource);
    Scope scope;
    opentelemetry__proto__common__v1__instrumentation_scope__init(&scope);
    scope.name = str("streamguard");
    scope.version = str(SG_OTEL_VERSION);
    for (size_t i = 0; i < n; i++) {
        span_of(&l, i, spans[i]);
    }
    ScopeSpans ss;
    opentelemetry__proto__trace__v1__scope_spans__init(&ss);
    ss.scope = &scope;
    ss.n_spans = n;
    ss.spans = l.spanp;
    ScopeSpans *ssp = &ss;
    ResourceSpans rs;
    opentelemetry__proto__trace__v1__resource_spans__init(&rs);
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    ResourceSpans *rsp = &rs;
    Request req;
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__init(&req);
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;

    size_t size =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            &req);
    uint8_t *buf = malloc(size > 0 ? size : 1);
    int rc = SG_ENOMEM;
    if (buf != NULL) {
        *len =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(
                &req, buf);
        *out = buf;
        rc = 0;
    }
    layout_free(&l);
    return rc;
}
