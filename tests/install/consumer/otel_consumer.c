/* A tiny program that uses an installed libstreamguard-otel (pkg-config
 * streamguard-otel, or CMake's streamguard::streamguard_otel): options
 * made, read from an environment that sets nothing, freed; an exporter
 * made from them and a trace added to an operation's options as its
 * observer (nothing is run: nothing is sent). */
#include <stdio.h>

#include <streamguard/otel.h>
#include <streamguard/otel_trace.h>

int main(void) {
    sg_otel_options *o = NULL;
    char err[128];
    int rc = sg_otel_options_new(&o);
    if (rc == 0) {
        rc = sg_otel_options_set_service_name(o, "consumer");
    }
    if (rc == 0) {
        rc = sg_otel_options_from_env(o, err, sizeof err);
    }
    sg_otel *otel = NULL;
    sg_otel_trace *t = NULL;
    sg_op_options *po = NULL;
    if (rc == 0) {
        rc = sg_otel_new(&otel, o);
    }
    if (rc == 0) {
        rc = sg_otel_trace_new(&t, otel);
    }
    if (rc == 0) {
        rc = sg_op_options_new(&po);
    }
    if (rc == 0) {
        rc = sg_op_options_add_observer(po, sg_otel_observer(t), t);
    }
    sg_op_options_free(po);
    sg_otel_trace_free(t);
    sg_otel_free(otel);
    sg_otel_options_free(o);
    if (rc != 0) {
        fprintf(stderr, "otel consumer: %s\n", sg_strerror(rc));
        return 1;
    }
    printf("otel consumer: options ok\n");
    return 0;
}
