/*
 * The exporter end to end (integration.otel_export): libstreamguard-otel
 * against a test collector on real loopback sockets
 * (otel_collector.c) that decodes what it receives.
 *
 *  - batches arrive whole, in order, with their parent links, the
 *    configured header and the OTLP content type;
 *  - a batch that is not full goes after the schedule delay;
 *  - a 503 is sent again (after its Retry-After), a 400 is not;
 *  - four threads submitting at once: every span exported once or counted;
 *  - a collector that accepts and never answers, and a port that refuses:
 *    submitting stays cheap (its mean cost measured per call, bounded at a
 *    generous 1 ms), the spans that do not fit are dropped and counted,
 *    and sg_otel_free returns within the export timeout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <streamguard/otel.h>

#include "otel/span.h"
#include "otel_collector.h"

#define MS ((int64_t)1000000)

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Span @i of operation @op: the operation itself when @attempt is 0, else
 * its attempt, parented on it. */
static sg__otel_span *make_span(unsigned op, unsigned attempt) {
    sg__otel_span *s = sg__otel_span_new(4, 1);
    assert_non_null(s);
    snprintf((char *)s->trace_id, 16, "trace-%09u", op);
    s->span_id[0] = (uint8_t)'s';
    memcpy(s->span_id + 1, &op, 4);
    s->span_id[5] = (uint8_t)attempt;
    s->span_id[7] = 1;
    if (attempt > 0) {
        memcpy(s->parent_span_id, s->span_id, 8);
        s->parent_span_id[5] = 0;
    }
    s->kind = SG__OTEL_KIND_CLIENT;
    s->start_unix_nano = 1700000000000000000ULL + op * 1000ULL + attempt;
    s->end_unix_nano = s->start_unix_nano + 500;
    assert_int_equal(sg__otel_span_set_name(s, attempt > 0 ? "attempt" : "operation"), 0);
    assert_int_equal(sg__otel_span_add_int(s, "streamguard.attempt", attempt), 0);
    assert_int_equal(sg__otel_span_add_str(s, "gen_ai.request.model", "m"), 0);
    assert_int_equal(sg__otel_span_add_event(s, "backoff", s->start_unix_nano + 1), 0);
    return s;
}

static sg_otel *exporter(uint16_t port, size_t queue, size_t batch, int64_t delay_ns,
                         int64_t timeout_ns, const char *header) {
    sg_otel_options *o = NULL;
    assert_int_equal(sg_otel_options_new(&o), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/traces", port);
    assert_int_equal(sg_otel_options_set_endpoint(o, url), 0);
    assert_int_equal(sg_otel_options_set_max_queue_size(o, queue), 0);
    assert_int_equal(sg_otel_options_set_max_export_batch_size(o, batch), 0);
    assert_int_equal(sg_otel_options_set_schedule_delay(o, delay_ns), 0);
    assert_int_equal(sg_otel_options_set_export_timeout(o, timeout_ns), 0);
    assert_int_equal(sg_otel_options_set_service_name(o, "otel-export-test"), 0);
    if (header != NULL) {
        assert_int_equal(sg_otel_options_add_header(o, header), 0);
    }
    sg_otel *otel = NULL;
    assert_int_equal(sg_otel_new(&otel, o), 0);
    sg_otel_options_free(o); /* copied */
    return otel;
}

static sg_otel_stats stats_of(sg_otel *otel) {
    sg_otel_stats st = SG_OTEL_STATS_INIT;
    assert_int_equal(sg_otel_stats_get(otel, &st), 0);
    return st;
}

static void batches_arrive_whole_with_their_links(void **state) {
    (void)state;
    otel_collector *c = oc_start(OC_ANSWER);
    assert_non_null(c);
    /* a long delay: only full batches and the flush send */
    sg_otel *otel =
        exporter(oc_port(c), 100, 10, 60000 * MS, 5000 * MS, "X-Api-Key: k-123");
    for (unsigned op = 0; op < 5; op++) {
        for (unsigned a = 0; a < 5; a++) {
            sg__otel_submit(otel, make_span(op, a));
        }
    }
    assert_int_equal(sg_otel_flush(otel, 20000 * MS), 0);
    assert_int_equal(oc_wait_spans(c, 25, 5000), 25);
    assert_int_equal(oc_requests(c), 3); /* 10, 10, and the flush's 5 */
    assert_true(oc_last_head_has(c, "POST /v1/traces HTTP/1.1\r\n"));
    assert_true(oc_last_head_has(c, "\r\nContent-Type: application/x-protobuf\r\n"));
    assert_true(oc_last_head_has(c, "\r\nX-Api-Key: k-123\r\n"));
    size_t n;
    oc_span *spans = oc_spans(c, &n);
    assert_int_equal(n, 25);
    for (size_t i = 0; i < n; i++) {
        unsigned op = (unsigned)(i / 5), a = (unsigned)(i % 5);
        oc_span *s = &spans[i];
        char trace[17] = {0};
        memcpy(trace, s->trace_id, 16);
        char want[17];
        snprintf(want, sizeof want, "trace-%09u", op);
        assert_string_equal(trace, want); /* in the order submitted */
        assert_int_equal(s->span_id[5], a);
        assert_string_equal(s->name, a > 0 ? "attempt" : "operation");
        assert_int_equal(s->has_parent, a > 0);
        if (a > 0) {
            /* the parent is the operation's span, sent before it */
            assert_memory_equal(s->parent_span_id, spans[i - a].span_id, 8);
            assert_memory_equal(s->trace_id, spans[i - a].trace_id, 16);
        }
        assert_int_equal(s->end_unix_nano - s->start_unix_nano, 500);
        assert_int_equal(s->nattrs, 2);
        assert_int_equal(s->nevents, 1);
    }
    free(spans);
    sg_otel_stats st = stats_of(otel);
    assert_int_equal(st.submitted, 25);
    assert_int_equal(st.exported, 25);
    assert_int_equal(st.exports, 3);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.dropped_queue_full + st.dropped_failed + st.dropped_shutdown, 0);
    sg_otel_free(otel);
    oc_stop(c);
}

static void a_partial_batch_goes_after_the_schedule_delay(void **state) {
    (void)state;
    otel_collector *c = oc_start(OC_ANSWER);
    assert_non_null(c);
    sg_otel *otel = exporter(oc_port(c), 2048, 512, 50 * MS, 5000 * MS, NULL);
    for (unsigned a = 0; a < 3; a++) {
        sg__otel_submit(otel, make_span(7, a));
    }
    /* no flush: the delay sends them (within 10 s, whatever the load) */
    assert_int_equal(oc_wait_spans(c, 3, 10000), 3);
    assert_int_equal(oc_requests(c), 1);
    sg_otel_free(otel);
    oc_stop(c);
}

static void a_503_is_sent_again_and_a_400_is_not(void **state) {
    (void)state;
    otel_collector *c = oc_start(OC_ANSWER);
    assert_non_null(c);
    oc_script(c, (const int[]){503}, 1, "0");
    sg_otel *otel = exporter(oc_port(c), 100, 50, 60000 * MS, 5000 * MS, NULL);
    for (unsigned a = 0; a < 4; a++) {
        sg__otel_submit(otel, make_span(1, a));
    }
    assert_int_equal(sg_otel_flush(otel, 20000 * MS), 0);
    assert_int_equal(oc_requests(c), 2);
    assert_int_equal(oc_wait_spans(c, 4, 5000), 4);
    sg_otel_stats st = stats_of(otel);
    assert_int_equal(st.retries, 1);
    assert_int_equal(st.exported, 4);
    assert_int_equal(st.failed_exports, 0);
    sg_otel_free(otel);
    oc_stop(c);

    c = oc_start(OC_ANSWER);
    assert_non_null(c);
    oc_script(c, (const int[]){400}, 1, "0");
    otel = exporter(oc_port(c), 100, 50, 60000 * MS, 5000 * MS, NULL);
    for (unsigned a = 0; a < 4; a++) {
        sg__otel_submit(otel, make_span(2, a));
    }
    assert_int_equal(sg_otel_flush(otel, 20000 * MS), 0); /* done: failed */
    assert_int_equal(oc_requests(c), 1);
    st = stats_of(otel);
    assert_int_equal(st.retries, 0);
    assert_int_equal(st.exported, 0);
    assert_int_equal(st.failed_exports, 1);
    assert_int_equal(st.dropped_failed, 4);
    sg_otel_free(otel);
    oc_stop(c);
}

enum { SUBMITS = 20000 };

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Submits SUBMITS spans as fast as they come, timing each call alone;
 * asserts the mean is under 1 ms and prints the distribution. */
static void submit_many(sg_otel *otel, const char *what) {
    int64_t *cost = calloc(SUBMITS, sizeof *cost);
    assert_non_null(cost);
    int64_t total = 0;
    for (unsigned i = 0; i < SUBMITS; i++) {
        sg__otel_span *s = make_span(i, i % 3);
        int64_t t0 = now_ns();
        sg__otel_submit(otel, s);
        cost[i] = now_ns() - t0;
        total += cost[i];
    }
    qsort(cost, SUBMITS, sizeof *cost, cmp64);
    double mean = (double)total / SUBMITS;
    printf(
        "# %s: submit mean %.0f ns, p50 %lld ns, p99 %lld ns, max %lld ns (%d calls)\n",
        what, mean, (long long)cost[SUBMITS / 2], (long long)cost[SUBMITS * 99 / 100],
        (long long)cost[SUBMITS - 1], SUBMITS);
    assert_true(mean < 1e6);
    free(cost);
}

/* sg_otel_free's time, which must stay within the export timeout (plus a
 * margin for a loaded machine). */
static void free_within(sg_otel *otel, int64_t timeout_ns, const char *what) {
    int64_t t0 = now_ns();
    sg_otel_free(otel);
    int64_t took = now_ns() - t0;
    printf("# %s: sg_otel_free took %lld ms (export timeout %lld ms)\n", what,
           (long long)(took / MS), (long long)(timeout_ns / MS));
    assert_true(took < timeout_ns + 1500 * MS);
}

static void a_blackhole_costs_only_drops(void **state) {
    (void)state;
    otel_collector *c = oc_start(OC_BLACKHOLE);
    assert_non_null(c);
    const int64_t timeout = 400 * MS;
    sg_otel *otel = exporter(oc_port(c), 64, 16, 10 * MS, timeout, NULL);
    submit_many(otel, "blackhole");
    sg_otel_stats st = stats_of(otel);
    assert_int_equal(st.submitted, SUBMITS);
    assert_true(st.dropped_queue_full >= SUBMITS - 64 - 16 * (st.failed_exports + 1));
    assert_true(st.queued <= 64);
    assert_int_equal(st.exported, 0);
    /* a flush cannot finish against it: it gives up at its own timeout */
    int64_t t0 = now_ns();
    assert_int_equal(sg_otel_flush(otel, 100 * MS), SG_ETIMEDOUT);
    assert_true(now_ns() - t0 < 100 * MS + 1500 * MS);
    assert_true(oc_requests(c) >= 1); /* it did receive, and never answered */
    free_within(otel, timeout, "blackhole");
    oc_stop(c);
}

static void a_refusing_port_costs_only_drops(void **state) {
    (void)state;
    /* a port that was just free: nothing listens there */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    const int64_t timeout = 400 * MS;
    sg_otel *otel = exporter(ntohs(a.sin_port), 64, 16, 10 * MS, timeout, NULL);
    submit_many(otel, "refused");
    assert_int_equal(sg_otel_flush(otel, 20000 * MS), 0); /* each export fails fast */
    sg_otel_stats st = stats_of(otel);
    assert_int_equal(st.submitted, SUBMITS);
    assert_int_equal(st.exported, 0);
    assert_true(st.failed_exports >= 1);
    assert_int_equal(st.queued, 0);
    /* every span is accounted for */
    assert_int_equal(st.dropped_queue_full + st.dropped_failed, SUBMITS);
    free_within(otel, timeout, "refused");
}

struct submitter {
    sg_otel *otel;
    unsigned first, count;
};

static void *submit_thread(void *arg) {
    struct submitter *t = arg;
    for (unsigned i = 0; i < t->count; i++) {
        sg__otel_submit(t->otel, make_span(t->first + i, 0));
    }
    return NULL;
}

/* The exporter shared by four submitting threads: every span is exported
 * or counted as dropped, and the collector receives exactly the exported
 * ones, each once. */
static void four_threads_share_one_exporter(void **state) {
    (void)state;
    enum { THREADS = 4, EACH = 5000 };
    otel_collector *c = oc_start(OC_ANSWER);
    assert_non_null(c);
    sg_otel *otel = exporter(oc_port(c), 1024, 256, 5 * MS, 5000 * MS, NULL);
    pthread_t th[THREADS];
    struct submitter sub[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        sub[i] = (struct submitter){otel, i * EACH, EACH};
        assert_int_equal(pthread_create(&th[i], NULL, submit_thread, &sub[i]), 0);
    }
    for (unsigned i = 0; i < THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
    }
    assert_int_equal(sg_otel_flush(otel, 20000 * MS), 0);
    sg_otel_stats st = stats_of(otel);
    assert_int_equal(st.submitted, THREADS * EACH);
    assert_int_equal(st.queued, 0);
    assert_int_equal(st.exported + st.dropped_queue_full + st.dropped_failed,
                     THREADS * EACH);
    assert_int_equal(st.dropped_failed, 0);
    assert_true(st.exported > 0);
    assert_int_equal(oc_wait_spans(c, (size_t)st.exported, 5000), st.exported);
    size_t n;
    oc_span *spans = oc_spans(c, &n);
    assert_int_equal(n, st.exported);
    /* each span once: its operation number is in its span id */
    unsigned char *seen = calloc(THREADS * EACH, 1);
    assert_non_null(seen);
    for (size_t i = 0; i < n; i++) {
        unsigned op;
        memcpy(&op, spans[i].span_id + 1, 4);
        assert_true(op < THREADS * EACH);
        assert_int_equal(seen[op], 0);
        seen[op] = 1;
    }
    printf("# four threads: %llu exported, %llu dropped (queue full) of %d\n",
           (unsigned long long)st.exported, (unsigned long long)st.dropped_queue_full,
           THREADS * EACH);
    free(seen);
    free(spans);
    sg_otel_free(otel);
    oc_stop(c);
}

static void null_and_bad_arguments(void **state) {
    (void)state;
    sg__otel_submit(NULL, make_span(1, 0)); /* freed, not leaked */
    sg__otel_submit(NULL, NULL);
    sg_otel_free(NULL);
    sg_otel *otel = NULL;
    assert_int_equal(sg_otel_new(&otel, NULL), SG_EINVAL);
    assert_int_equal(sg_otel_flush(NULL, 0), SG_EINVAL);
    sg_otel_stats st = SG_OTEL_STATS_INIT;
    assert_int_equal(sg_otel_stats_get(NULL, &st), SG_EINVAL);
    st.size = 1;
    otel_collector *c = oc_start(OC_ANSWER);
    assert_non_null(c);
    otel = exporter(oc_port(c), 8, 8, 60000 * MS, 1000 * MS, NULL);
    assert_int_equal(sg_otel_stats_get(otel, &st), SG_EINVAL);
    assert_int_equal(sg_otel_flush(otel, -1), SG_EINVAL);
    assert_int_equal(sg_otel_flush(otel, 0), 0); /* nothing queued */
    sg_otel_free(otel);
    oc_stop(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(batches_arrive_whole_with_their_links),
        cmocka_unit_test(a_partial_batch_goes_after_the_schedule_delay),
        cmocka_unit_test(a_503_is_sent_again_and_a_400_is_not),
        cmocka_unit_test(a_blackhole_costs_only_drops),
        cmocka_unit_test(a_refusing_port_costs_only_drops),
        cmocka_unit_test(four_threads_share_one_exporter),
        cmocka_unit_test(null_and_bad_arguments),
    };
    return cmocka_run_group_tests_name("otel_export", tests, NULL, NULL);
}
