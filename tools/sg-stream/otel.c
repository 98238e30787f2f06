/*
 * otel.c - sg-stream's tracing: with --otlp URL, or with the standard
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT set,
 * the run's operation becomes OpenTelemetry spans - one for it, one per
 * attempt (docs/otel.md, "Spans and attributes") - sent over OTLP/HTTP by
 * libstreamguard-otel, and each attempt's request carries the traceparent
 * of its own span.  TRACEPARENT and TRACESTATE in the environment (the
 * carriers a shell script or a CI job hands its children) make the
 * operation a child of the caller's span.  The spans name the model the
 * request body asks for (its top-level "model").  Only built with the library's
 * OpenTelemetry part; main.c says so otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include <streamguard/otel.h>
#include <streamguard/otel_trace.h>

#include "sg_stream.h"
#include "../common/include_usage.h"
#include "../common/trace.h"

int otel_start(struct config *c) {
    char err[256] = "";
    int rv = tool_otel_new(&c->otel, c->otlp, "sg-stream", err, sizeof(err));
    if (rv != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return rv == SG_EINVAL || rv == SG_ERANGE || rv == SG_EUNSUPPORTED
                   ? EXIT_USAGE
                   : EXIT_INTERNAL;
    }
    if (c->otel == NULL) {
        return 0; /* not tracing */
    }
    /* gen_ai.request.model: the body's top-level "model" string, read as
     * sg-proxy reads it; none when the body is not JSON or names none */
    char model[SG_OTEL_NAME_MAX + 1];
    size_t ml =
        c->body != NULL ? body_model_name(c->body, c->body_len, model, sizeof(model)) : 0;
    rv = tool_trace_new(&c->trace, c->otel, c->profile, ml > 0 ? model : NULL);
    const char *parent = getenv("TRACEPARENT");
    if (rv == 0 && parent != NULL && parent[0] != '\0' &&
        sg_otel_trace_set_parent(c->trace, parent, getenv("TRACESTATE")) != 0) {
        /* a context that does not parse is no parent: a trace of its own */
        fprintf(stderr, "%s: TRACEPARENT is not a W3C traceparent: ignored\n", prog);
    }
    if (rv == 0 && sg_op_options_target(c->policy) == NULL) {
        /* what the spans name the endpoint by (url.full: no userinfo, no
         * query); the HTTP/2 transport would set it, libcurl does not */
        rv = sg_op_options_set_target(c->policy, c->url);
    }
    if (rv == 0) {
        rv = sg_op_options_add_observer(c->policy, sg_otel_observer(c->trace), c->trace);
    }
    if (rv != 0) {
        fprintf(stderr, "%s: tracing: %s\n", prog, sg_strerror(rv));
        otel_stop(c);
        return EXIT_INTERNAL;
    }
    return 0;
}

void otel_stop(struct config *c) {
    sg_otel_trace_free(c->trace);
    c->trace = NULL;
    sg_otel_free(c->otel); /* the spans still queued go, within the export timeout */
    c->otel = NULL;
}
