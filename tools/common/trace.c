/*
 * trace.c - the tracing the programs share (trace.h).
 */
#include "trace.h"
#include "values.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EXPORT_TIMEOUT SG_SEC(2)

static bool set(const char *name) {
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0';
}

/* The environment's off switches (the OpenTelemetry specification's
 * "General SDK Configuration"): OTEL_SDK_DISABLED true, any case, or
 * OTEL_TRACES_EXPORTER none.  Returns the name of the one that is on,
 * NULL for neither, or NULL with *@rv SG_EINVAL (@err says which) for a
 * value that is neither on nor off: a switch that does not parse is not
 * taken for "on" or "off". */
static const char *off_switch(int *rv, char *err, size_t errlen) {
    *rv = 0;
    const char *v = getenv("OTEL_SDK_DISABLED");
    if (v != NULL && v[0] != '\0') {
        if (strcasecmp(v, "true") == 0) {
            return "OTEL_SDK_DISABLED";
        }
        if (strcasecmp(v, "false") != 0) {
            snprintf(err, errlen, "OTEL_SDK_DISABLED: true or false, not \"%.32s\"", v);
            *rv = SG_EINVAL;
            return NULL;
        }
    }
    /* a list, by the specification: each one must be ours */
    v = getenv("OTEL_TRACES_EXPORTER");
    bool none = false;
    while (v != NULL && *v != '\0') {
        v += strspn(v, " \t,");
        size_t n = strcspn(v, ",");
        size_t w = n;
        while (w > 0 && (v[w - 1] == ' ' || v[w - 1] == '\t')) {
            w--;
        }
        if (w == 4 && strncmp(v, "none", 4) == 0) {
            none = true;
        } else if (w > 0 && !(w == 4 && strncmp(v, "otlp", 4) == 0)) {
            snprintf(err, errlen,
                     "OTEL_TRACES_EXPORTER: %.*s is not an exporter here (otlp or none)",
                     (int)(w < 32 ? w : 32), v);
            *rv = SG_EUNSUPPORTED;
            return NULL;
        }
        v += n;
    }
    return none ? "OTEL_TRACES_EXPORTER" : NULL;
}

int tool_otel_new(sg_otel **out, const char *url, const char *service, char *err,
                  size_t errlen) {
    *out = NULL;
    if (url == NULL && !set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") &&
        !set("OTEL_EXPORTER_OTLP_ENDPOINT")) {
        return 0;
    }
    int rv0;
    const char *off = off_switch(&rv0, err, errlen);
    if (rv0 != 0) {
        return rv0;
    }
    if (off != NULL) {
        if (url != NULL) {
            fprintf(stderr, "%s: tracing off: %s says so (--otlp not used)\n", service,
                    off);
        }
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
