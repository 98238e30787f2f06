/*
 * trace.c - sg-proxy's tracing (docs/sg-proxy.md, "Tracing"): with --otlp
 * URL, or the OTEL_EXPORTER_OTLP_* endpoint variables, each request's
 * operation and its attempts become OpenTelemetry spans (docs/otel.md),
 * exported by libstreamguard-otel off the loop.  A client's W3C
 * traceparent (and tracestate) makes the operation its child; upstream,
 * each attempt sends the traceparent of its own span in their place.
 * Only built with the library's OpenTelemetry part (health.c says so
 * otherwise).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <streamguard/otel.h>
#include <streamguard/otel_trace.h>

#include "../common/trace.h"
#include "conn.h"
#include "proxy.h"

int trace_start(struct proxy *p, const char *url, char *err, size_t errlen) {
    return tool_otel_new(&p->otel, url, "sg-proxy", err, errlen);
}

void trace_stop(struct proxy *p) {
    sg_otel_free(p->otel); /* after every operation: what is queued goes */
    p->otel = NULL;
}

/* A header's value as a string (at most @cap - 1 bytes: longer is none). */
static const char *value_of(const struct conn *c, const char *name, char *buf,
                            size_t cap) {
    const sg_fm_h1_header *h = sg_fm_h1_find_header(&c->rq->req, name);
    if (h == NULL || h->value_len >= cap) {
        return NULL;
    }
    memcpy(buf, h->value, h->value_len);
    buf[h->value_len] = '\0';
    return buf;
}

int trace_request(struct conn *c, sg_op_options *po) {
    if (c->proxy->otel == NULL) {
        return 0;
    }
    /* gen_ai.request.model: the operation's span the model the client
     * asked for, each attempt's the model its endpoint asked for (a
     * fallback's own: the report line's "models") */
    char model[SG_OTEL_NAME_MAX + 1];
    size_t ml = fallback_model(c, 0, model, sizeof(model));
    int rv = tool_trace_new(&c->trace, c->proxy->otel, c->route->profile,
                            ml > 0 ? model : NULL);
    for (int i = 1; rv == 0 && i <= c->route->nfallback; i++) {
        if (c->route->fb_model[i - 1] != NULL && c->model_len > 0) {
            /* one too long to keep is none, never the client's */
            size_t n = fallback_model(c, (uint32_t)i, model, sizeof(model));
            rv = sg_otel_trace_set_endpoint_model(c->trace, (uint32_t)i,
                                                  n > 0 ? model : "");
        }
    }
    char tp[64], ts[SG_OTEL_TRACESTATE_MAX + 1];
    const char *parent = value_of(c, "traceparent", tp, sizeof(tp));
    if (rv == 0 && parent != NULL) {
        /* a client's context that does not parse (or a tracestate too
         * long to pass on) is none: the operation begins a trace */
        (void)sg_otel_trace_set_parent(c->trace, parent,
                                       value_of(c, "tracestate", ts, sizeof(ts)));
    }
    if (rv == 0) {
        rv = sg_op_options_add_observer(po, sg_otel_observer(c->trace), c->trace);
    }
    return rv;
}

void trace_free(struct conn *c) {
    sg_otel_trace_free(c->trace);
    c->trace = NULL;
}

bool trace_owns(const struct proxy *p, const char *line) {
    return p->otel != NULL && (strncasecmp(line, "traceparent:", 12) == 0 ||
                               strncasecmp(line, "tracestate:", 11) == 0);
}
