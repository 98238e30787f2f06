/*
 * The OpenTelemetry observer's cost on the loop (issue 38: at most 2 us of
 * CPU per attempt): the CPU time of the thread that drives operations -
 * start, lease, the attempt's headers (the traceparent), its end, the
 * resolution - with and without an sg_otel_trace, side by side in one
 * run.  The operations are driven by hand (no sockets: the cost measured
 * is the policy's and the observer's alone) and the spans go to a real
 * exporter whose collector is down (127.0.0.1:1): its queue takes them and
 * its own thread drops them, or the loop frees one when the queue is full,
 * which is the dearest case the loop can see.
 *
 * Usage: bench_otel_observer [OPERATIONS]   (default 200000)
 * Prints, per shape (1 attempt per operation; 3: two 503s, then a
 * stream), the loop thread's CPU ns per attempt untraced and traced, and
 * the difference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <streamguard/otel.h>
#include <streamguard/otel_trace.h>
#include <streamguard/unstable/op.h>

#include "policy/internal.h" /* struct sg_op_headers, sg__op_attempt_headers */

static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* @ops operations of @attempts attempts each (all but the last a 503);
 * the loop thread's CPU ns. */
static int64_t run(const sg_op_options *o, long ops, int attempts) {
    sg_op *op = NULL;
    if (sg_op_new(&op) != 0) {
        abort();
    }
    sg_op_headers h;
    memset(&h, 0, sizeof(h));
    const sg_op_usage usage = {1200, 300, 1024, -1, SG_USAGE_PROVIDER};
    int64_t now = SG_SEC(1000);
    int64_t t0 = thread_cpu_ns();
    for (long i = 0; i < ops; i++) {
        if (sg_op_start(op, o, now) != 0) {
            abort();
        }
        for (int a = 1; a <= attempts; a++) {
            sg_op_plan p;
            if (sg_op_next_attempt(op, now, &p) != 0) {
                abort();
            }
            sg__op_attempt_headers(op, sg_op_attempt_at(op, p.attempt - 1), &h);
            bool last = a == attempts;
            sg_op_result r;
            memset(&r, 0, sizeof(r));
            r.outcome = last ? SG_OUTCOME_OK : SG_OUTCOME_HTTP_ERROR;
            r.phase = last ? SG_PHASE_STREAMING : SG_PHASE_WAIT_HEADERS;
            r.sent = true;
            r.headers_received = true;
            r.http_status = last ? 200 : 503;
            r.items = last ? 40 : 0;
            r.bytes = last ? 4000 : 0;
            r.first_item_ns = last ? SG_MS(120) : -1;
            r.usage = last ? &usage : NULL;
            now += SG_MS(500);
            sg_op_verdict v;
            if (sg_op_attempt_done(op, now, &r, &v) != 0) {
                abort();
            }
            now = v.decision == SG_OP_RETRY ? v.retry_at : now;
        }
    }
    int64_t spent = thread_cpu_ns() - t0;
    sg__op_headers_release(&h);
    sg_op_free(op);
    return spent;
}

int main(int argc, char **argv) {
    long ops = argc > 1 ? atol(argv[1]) : 200000;
    sg_otel_options *eo = NULL;
    sg_otel *otel = NULL;
    if (sg_otel_options_new(&eo) != 0 ||
        sg_otel_options_set_endpoint(eo, "http://127.0.0.1:1/v1/traces") != 0 ||
        sg_otel_options_set_schedule_delay(eo, SG_MS(100)) != 0 ||
        sg_otel_new(&otel, eo) != 0) {
        fprintf(stderr, "cannot start the exporter\n");
        return 1;
    }
    sg_otel_options_free(eo);
    sg_otel_trace *t = NULL;
    sg_op_options *plain = NULL, *traced = NULL;
    if (sg_otel_trace_new(&t, otel) != 0 || sg_op_options_new(&plain) != 0 ||
        sg_otel_trace_set_genai(t, "openai", "chat", "gpt-4o") != 0 ||
        sg_op_options_set_target(plain, "https://api.openai.com/v1/chat/completions") !=
            0 ||
        sg_op_options_set_idempotency_key(plain, "bench-otel") != 0 ||
        sg_op_options_set_backoff(plain, SG_MS(1), SG_MS(1)) != 0 ||
        sg_op_options_set_first_item_timeout(plain, SG_SEC(5)) != 0 ||
        sg_op_options_dup(&traced, plain) != 0 ||
        sg_op_options_add_observer(traced, sg_otel_observer(t), t) != 0) {
        fprintf(stderr, "setup failed\n");
        return 1;
    }
    printf("%ld operations per run; loop thread CPU ns per attempt (median of 5)\n", ops);
    printf("%-10s %12s %12s %12s\n", "attempts", "untraced", "traced", "observer");
    for (int attempts = 1; attempts <= 3; attempts += 2) {
        int64_t a[5], b[5];
        for (int k = 0; k < 5; k++) { /* interleaved: the same machine state */
            a[k] = run(plain, ops, attempts);
            b[k] = run(traced, ops, attempts);
        }
        for (int i = 0; i < 5; i++) { /* insertion sort: the medians */
            for (int j = i; j > 0 && a[j] < a[j - 1]; j--) {
                int64_t x = a[j];
                a[j] = a[j - 1];
                a[j - 1] = x;
            }
            for (int j = i; j > 0 && b[j] < b[j - 1]; j--) {
                int64_t x = b[j];
                b[j] = b[j - 1];
                b[j - 1] = x;
            }
        }
        double n = (double)ops * attempts;
        printf("%-10d %12.0f %12.0f %12.0f\n", attempts, (double)a[2] / n,
               (double)b[2] / n, (double)(b[2] - a[2]) / n);
    }
    sg_otel_stats st = SG_OTEL_STATS_INIT;
    (void)sg_otel_stats_get(otel, &st);
    printf("spans submitted %llu, dropped (queue full) %llu, failed %llu\n",
           (unsigned long long)st.submitted, (unsigned long long)st.dropped_queue_full,
           (unsigned long long)st.dropped_failed);
    sg_op_options_free(plain);
    sg_op_options_free(traced);
    sg_otel_trace_free(t);
    sg_otel_free(otel);
    return 0;
}
