/*
 * trace.c - the tracing the programs share (trace.h).
 */
#include "trace.h"
#include "values.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT_TIMEOUT SG_SEC(2)

static bool set(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0';
}

int tool_otel_new(sg_otel **out, const char *url, const char *service, char *err,
                  size_t errlen) {
    *out = NULL;
    if (url == NULL && !set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") &&
        !set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        return 0;
    }
    sg_otel_options *o = NULL;
    int rv = sg_otel_options_new(&o);
    if (rv == 0) {
        (void)sg_otel_options_set_service_name(o, service);
        (void)sg_otel_options_set_export_timeout(o, EXPORT_TIMEOUT);
        rv = sg_otel_options_from_env(o, err, errlen);
    }
    if (rv == 0 && url != NULL && (rv = sg_otel_options_set_endpoint(o, url)) != 0) {
        snprintf(err, errlen, "--otlp: not an http:// or https:// URL: %s", url);
    }
    if (rv == 0 && (rv = sg_otel_new(out, o)) != 0) {
        snprintf(err, errlen, "cannot start the OTLP exporter: %s", sg_strerror(rv));
    }
    sg_otel_options_free(o);
    return rv;
}

int tool_trace_new(sg_otel_trace **out, sg_otel *otel, const char *profile,
                   const char *model) {
    const char *provider, *operation;
    (void)genai_names(profile, &provider, &operation);
    int rv = sg_otel_trace_new(out, otel);
    if (rv == 0 && model != NULL && strlen(model) > SG_OTEL_NAME_MAX) {
        model = NULL; /* a name too long to keep is none, not a failure */
    }
    if (rv == 0 &&
        (rv = sg_otel_trace_set_genai(*out, provider, operation, model)) != 0) {
        sg_otel_trace_free(*out);
        *out = NULL;
    }
    return rv;
}
