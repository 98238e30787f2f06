/*
 * trace.h - what sg-stream and sg-proxy share to trace with
 * libstreamguard-otel (docs/otel.md): the exporter made from a --otlp URL
 * and the OTEL_EXPORTER_OTLP_* environment, and a trace named by the
 * GenAI names of a provider profile.  Compiled into a program only when the library's
 * OpenTelemetry part is built.
 */
#ifndef SG_TOOLS_TRACE_H
#define SG_TOOLS_TRACE_H

#include <stddef.h>

#include <streamguard/otel.h>
#include <streamguard/otel_trace.h>

/* The exporter a program traces with: from the OTEL_EXPORTER_OTLP_*,
 * OTEL_BSP_* and OTEL_SERVICE_NAME variables, with @url (its --otlp; NULL:
 * none) as the traces endpoint over theirs and @service as the service
 * name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names one.
 * The export timeout is 2 s unless OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT
 * says otherwise: a program's exit waits for it at most.  Tracing is on
 * with @url, or with OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
 * OTEL_EXPORTER_OTLP_ENDPOINT set (non-empty) - unless
 * OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER none, which win over
 * @url too (said on stderr, prefixed by @service); else *@out is NULL.
 * Returns 0, or a negative code with @err saying why (a variable or the
 * URL that does not parse: SG_EINVAL, SG_ERANGE, SG_EUNSUPPORTED). */
int tool_otel_new(sg_otel **out, const char *url, const char *service, char *err,
                  size_t errlen);

/* A new trace for one operation on @otel (sg_otel_trace_new), named by
 * the GenAI provider (gen_ai.provider.name) and operation
 * (gen_ai.operation.name) of the built-in provider profile @profile (none
 * for NULL or an unknown one) and the model @model asks for
 * (gen_ai.request.model; NULL, or longer than SG_OTEL_NAME_MAX: none).
 * Returns 0 or a negative code (*@out NULL). */
int tool_trace_new(sg_otel_trace **out, sg_otel *otel, const char *profile,
                   const char *model);

#endif
