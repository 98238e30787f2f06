/*
 * sg-stream - stream one guarded operation from the command line.
 *
 * A curl-like client built on the public streamguard API only: it sets up
 * the policy (budget, clocks, retries), runs the operation over libcurl or
 * streamguard's own HTTP/2 transport, prints each item as it arrives
 * (batched per transport read, written before the next wait), and writes
 * the execution report; Ctrl-C cancels and still reports.  The exit status says which
 * family of outcomes ended it (see usage()).  This file only parses, dispatches and
 * returns that status; sg_stream.h says which file does what.  docs/sg-stream.md is the
 * manual.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sg_stream.h"

/* --http2, or https:// without a version flag and a server that negotiates
 * h2: streamguard's own HTTP/2 transport; every other run, libcurl. */
static int run(struct config *c) {
    /* The budget starts when the command does: whatever runs before the
     * operation (the HTTP/2 probe of an https:// URL) is spent from it. */
    int64_t started = sg_clock_now(NULL);
    c->deadline = sg_time_add(started, c->budget_ns ? c->budget_ns : SG_SEC(60));
    sg_op_options_set_started_at(c->policy, started); /* elapsed_ms from here */
    if (signals_install() != 0) {
        fprintf(stderr, "%s: cannot handle SIGINT/SIGTERM: Ctrl-C will not report\n",
                prog);
    }
    out_init(&c->run.out);
    c->run.event_raw_len = SIZE_MAX; /* no event type seen yet */
    c->run.escape = sgx_json_escaper();
    /* fallback endpoints are followed, and --aws-sigv4 signed, by the
     * libcurl transport only */
    bool probe = !c->http2 && !c->http11 && c->nfallback == 0 && c->aws_sigv4 == NULL &&
                 strncasecmp(c->url, "https://", 8) == 0;
    int code = otel_start(c);
    if (code != 0) {
        out_free(&c->run.out);
        return code;
    }
    code = -1;
    if (c->http2 || probe) {
        code = run_h2(c, probe);
    }
    if (code < 0) {
        code = run_curl(c);
    }
    otel_stop(c);
    out_free(&c->run.out);
    return code;
}

#ifndef SG_HAVE_OTEL
/* A build without OpenTelemetry (SG_WITH_OTEL=OFF): otel.c is not built. */
int otel_start(struct config *c) {
    if (c->otlp != NULL) {
        fprintf(stderr, "%s: --otlp: this sg-stream was built without OpenTelemetry\n",
                prog);
        return EXIT_USAGE;
    }
    return 0;
}

void otel_stop(struct config *c) {
    (void)c;
}
#endif

int main(int argc, char **argv) {
    struct config c;
    int code = config_parse(&c, argc, argv);
    if (code == 0) {
        code = config_is_ledger_command(&c) ? ledger_command(&c) : run(&c);
    }
    config_free(&c);
    return code < 0 ? EXIT_OK : code;
}
