/*
 * bench_otel: what handing a finished span to the OpenTelemetry exporter
 * costs the caller (sg__otel_submit), with the exporter off (the span is
 * only freed), against a live collector on loopback, and against one that
 * accepts and never answers (a blackhole) - plus what building a typical
 * attempt span costs, for scale.
 *
 * Spans are submitted in bursts of BURST at a steady rate (100,000 spans/s
 * by default: a busy proxy's); each burst is timed whole (per span: burst time / BURST)
 * and the median and 99th percentile of the bursts are printed, with
 * thread CPU time per span.  The collector is tests/integration's.
 *
 * Usage: bench_otel [rounds [spans/s]]   (default 5 rounds at 100,000
 * spans/s; one line per mode and round)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <streamguard/otel.h>

#include "otel/internal.h"
#include "otel/span.h"
#include "otel_collector.h"
#include "timing.h"

#define BURST 500
#define BURSTS 200 /* 100,000 spans a round */

static double rate = 100000.0; /* spans per second */

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* An attempt span as the observer makes one: 8 attributes, 2 events. */
static sg__otel_span *attempt_span(unsigned i) {
    sg__otel_span *s = sg__otel_span_new(16, 4);
    if (s == NULL) {
        return NULL;
    }
    memcpy(s->trace_id, "0123456789abcdef", 16);
    memcpy(s->span_id, &i, sizeof i);
    s->span_id[7] = 1;
    memcpy(s->parent_span_id, "opspan01", 8);
    s->kind = SG__OTEL_KIND_CLIENT;
    s->start_unix_nano = 1700000000000000000ULL + i;
    s->end_unix_nano = s->start_unix_nano + 1000000;
    sg__otel_span_set_name(s, "chat gpt-4o");
    sg__otel_span_add_str(s, "gen_ai.system", "openai");
    sg__otel_span_add_str(s, "gen_ai.request.model", "gpt-4o");
    sg__otel_span_add_str(s, "server.address", "api.openai.com");
    sg__otel_span_add_int(s, "http.request.resend_count", 1);
    sg__otel_span_add_str(s, "streamguard.outcome", "ok");
    sg__otel_span_add_str(s, "streamguard.phase", "streaming");
    sg__otel_span_add_double(s, "gen_ai.client.operation.time_to_first_chunk", 0.42);
    sg__otel_span_add_int(s, "gen_ai.usage.output_tokens", 312);
    sg__otel_span_add_event(s, "backoff", s->start_unix_nano + 10);
    sg__otel_span_event_add_int(s, "streamguard.backoff_ms", 250);
    sg__otel_span_add_event(s, "first_token", s->start_unix_nano + 20);
    return s;
}

static void sleep_until(double t) {
    double left = t - now_s();
    if (left > 0) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

static void run(const char *mode, sg_otel *otel, int round, otel_collector *c) {
    static double per[BURSTS];
    static sg__otel_span *spans[BURST];
    double cpu = 0, build = 0;
    double t = now_s();
    for (int b = 0; b < BURSTS; b++) {
        double b0 = now_s();
        for (unsigned i = 0; i < BURST; i++) {
            spans[i] = attempt_span((unsigned)b * BURST + i);
            if (spans[i] == NULL) {
                fprintf(stderr, "out of memory\n");
                exit(1);
            }
        }
        build += now_s() - b0;
        double c0 = cpu_s(), t0 = now_s();
        for (unsigned i = 0; i < BURST; i++) {
            sg__otel_submit(otel, spans[i]);
        }
        per[b] = (now_s() - t0) / BURST * 1e9;
        cpu += cpu_s() - c0;
        t += BURST / rate;
        sleep_until(t);
    }
    double p50 = median(per, BURSTS); /* sorts per[] */
    double p99 = per[BURSTS * 99 / 100];
    sg_otel_stats st = SG_OTEL_STATS_INIT;
    if (otel != NULL) {
        sg_otel_flush(otel, 2000000000LL);
        sg_otel_stats_get(otel, &st);
    }
    printf("| %-9s | %d | %7.0f | %7.0f | %7.0f | %6.0f | %8" PRIu64 " | %8" PRIu64
           " | %8" PRIu64 " | %5zu |\n",
           mode, round, p50, p99, cpu / (BURSTS * BURST) * 1e9,
           build / (BURSTS * BURST) * 1e9, st.exported,
           st.dropped_queue_full + st.dropped_failed + st.dropped_shutdown, st.exports,
           c != NULL ? oc_requests(c) : (size_t)0);
}

static sg_otel *exporter(uint16_t port) {
    sg_otel_options *o = NULL;
    sg_otel *otel = NULL;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", port);
    /* the specification's defaults (queue 2048, batch 512, 5 s delay), a
     * 1 s export timeout */
    if (sg_otel_options_new(&o) != 0 || sg_otel_options_set_endpoint(o, url) != 0 ||
        sg_otel_options_set_export_timeout(o, 1000000000LL) != 0 ||
        sg_otel_new(&otel, o) != 0) {
        fprintf(stderr, "could not make the exporter\n");
        exit(1);
    }
    sg_otel_options_free(o);
    return otel;
}

/* What the export thread pays to encode a batch of 512 attempt spans
 * (best of 50, ns per span), and the bytes per span on the wire. */
static void encode_cost(void) {
    enum { N = 512 };
    static sg__otel_span *spans[N];
    for (unsigned i = 0; i < N; i++) {
        if ((spans[i] = attempt_span(i)) == NULL) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
    const sg__otel_attr res[] = {{"service.name", SG__OTEL_STRING, {.s = "bench"}}};
    double best = 1e9;
    size_t len = 0;
    for (int r = 0; r < 50; r++) {
        uint8_t *buf;
        double t0 = now_s();
        if (sg__otel_encode(res, 1, spans, N, &buf, &len) != 0) {
            fprintf(stderr, "encode failed\n");
            exit(1);
        }
        double t = now_s() - t0;
        best = t < best ? t : best;
        free(buf);
    }
    printf(
        "encode (export thread): %.0f ns per span, %zu bytes per span (batch of %d, best "
        "of 50)\n",
        best / N * 1e9, len / N, N);
    for (unsigned i = 0; i < N; i++) {
        sg__otel_span_free(spans[i]);
    }
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    if (argc > 2 && atof(argv[2]) > 0) {
        rate = atof(argv[2]);
    }
    encode_cost();
    printf("bench_otel: %d spans a round in bursts of %d at %.0f spans/s; ns per span\n",
           BURSTS * BURST, BURST, rate);
    printf(
        "| exporter | round | submit p50 | submit p99 | submit CPU | build | exported | "
        "dropped | exports | requests |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int r = 1; r <= rounds; r++) {
        run("off", NULL, r, NULL);

        otel_collector *live = oc_start(OC_ANSWER);
        if (live == NULL) {
            return 1;
        }
        sg_otel *otel = exporter(oc_port(live));
        run("live", otel, r, live);
        sg_otel_free(otel);
        oc_stop(live);

        otel_collector *hole = oc_start(OC_BLACKHOLE);
        if (hole == NULL) {
            return 1;
        }
        otel = exporter(oc_port(hole));
        run("blackhole", otel, r, hole);
        sg_otel_free(otel);
        oc_stop(hole);
    }
    return 0;
}
