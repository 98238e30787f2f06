/* A tiny program that uses an installed libstreamguard-otel (pkg-config
 * streamguard-otel, or CMake's streamguard::streamguard_otel): options
 * made, read from an environment that sets nothing, freed. */
#include <stdio.h>

#include <streamguard/otel.h>

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
    sg_otel_options_free(o);
    if (rc != 0) {
        fprintf(stderr, "otel consumer: %s\n", sg_strerror(rc));
        return 1;
    }
    printf("otel consumer: options ok\n");
    return 0;
}
