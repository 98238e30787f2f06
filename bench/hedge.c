/*
 * bench_hedge - the tail of time to first item, with and without
 * first-token hedging, side by side in one run.
 *
 * One sg-fakemodel on loopback answers every request with its first item
 * after 50 ms - or, for 10 % of requests (chosen by the server from a hash
 * of its request id, so every request, a hedge too, draws anew), after 2 s
 * (`first_delay=50&tail_pct=10&tail_delay=2000`).  OPS operations run on
 * one managed multi, CONC at a time, three ways in turn: no hedging; hedge
 * after 200 ms with one hedge in flight; with two.  For each: time to the
 * first item the consumer saw (p50, p99, max) and the requests the server
 * received beyond one per operation.  The target: p99 under
 * 2.5 x the hedge delay plus the fast path (550 ms), at most 15 % extra.
 *
 * Usage: bench_hedge PATH/TO/sg-fakemodel [OPS [CONC]]   (1000, 100)
 */
#include "harness.h"

#include <inttypes.h>

#include <curl/curl.h>
#include <streamguard/curl.h>

typedef struct job {
    CURL *easy;
    sg_curl_op *op;
    int64_t start;
    int64_t first; /* -1 until the first item */
    bool done;
    char url[256];
} job;

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    job *j = ud;
    if (j->first < 0) {
        j->first = sg_clock_now(NULL) - j->start;
    }
    return 0;
}

static void on_done(sg_curl_op *op, void *ud) {
    (void)op;
    ((job *)ud)->done = true;
}

static int cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Runs @ops operations, @conc at a time, hedging after @hedge_ns with
 * @hedges in flight (0: none); prints one row. */
static void run(const fm_server *s, const char *name, int ops, int conc, int64_t hedge_ns,
                uint32_t hedges, int round) {
    job *jobs = calloc((size_t)ops, sizeof(*jobs));
    int64_t *ttfi = calloc((size_t)ops, sizeof(*ttfi));
    sg_curl_multi *m = NULL;
    if (jobs == NULL || ttfi == NULL || sg_curl_multi_new(&m, NULL) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    sg_op_options *po = NULL;
    sg_op_options_new(&po);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_budget(po, SG_SEC(30));
    sg_op_options_set_max_attempts(po, 1 + hedges);
    if (hedges > 0) {
        sg_op_options_set_hedging(po, hedge_ns, hedges);
    }
    sg_stream_config sse;
    sg_stream_config_init(&sse);
    sg_stream_config_set_terminal_data(&sse, "[DONE]");
    sg_curl_options *co = NULL;
    if (sg_curl_options_new(&co) != 0 || sg_curl_options_set_framing(co, &sse) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    sg_curl_options_set_on_item(co, on_item);
    sg_curl_options_set_on_done(co, on_done);
    int next = 0, finished = 0, running = 0;
    uint64_t attempts = 0;
    while (finished < ops) {
        while (running < conc && next < ops) {
            job *j = &jobs[next];
            snprintf(j->url, sizeof(j->url),
                     "%s/v1/chat/completions?n=3&gap=1&first_delay=50&tail_pct=10&"
                     "tail_delay=2000&_t=hb.%u.%d.%d",
                     s->base, hedges, round, next);
            j->easy = curl_easy_init();
            curl_easy_setopt(j->easy, CURLOPT_URL, j->url);
            j->first = -1;
            j->start = sg_clock_now(NULL);
            if (sg_curl_op_new(&j->op, j->easy, po, co, j) != 0 ||
                sg_curl_multi_add(m, j->op) != 0) {
                fprintf(stderr, "could not start operation %d\n", next);
                exit(1);
            }
            next++;
            running++;
        }
        if (sg_curl_multi_step(m, -1) < 0) {
            fprintf(stderr, "multi step failed\n");
            exit(1);
        }
        for (int i = 0; i < next; i++) {
            job *j = &jobs[i];
            if (j->done && j->op != NULL) {
                attempts += sg_op_attempt_count(sg_curl_op_policy(j->op));
                sg_curl_op_free(j->op);
                curl_easy_cleanup(j->easy);
                j->op = NULL;
                finished++;
                running--;
            }
        }
    }
    int got = 0;
    for (int i = 0; i < ops; i++) {
        if (jobs[i].first >= 0) {
            ttfi[got++] = jobs[i].first;
        }
    }
    qsort(ttfi, (size_t)got, sizeof(*ttfi), cmp);
    double ms = 1e6;
    printf("| %-22s | %5d | %8.1f | %8.1f | %8.1f | %6" PRIu64 " | %5.1f %% |\n", name,
           got, got ? (double)ttfi[got / 2] / ms : 0.0,
           got ? (double)ttfi[(got * 99) / 100 - (got >= 100 ? 1 : 0)] / ms : 0.0,
           got ? (double)ttfi[got - 1] / ms : 0.0, attempts - (uint64_t)ops,
           100.0 * (double)(attempts - (uint64_t)ops) / ops);
    sg_curl_multi_free(m);
    sg_op_options_free(po);
    sg_curl_options_free(co);
    free(jobs);
    free(ttfi);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel [OPS [CONC]]\n", argv[0]);
        return 2;
    }
    int ops = argc > 2 ? atoi(argv[2]) : 1000;
    int conc = argc > 3 ? atoi(argv[3]) : 100;
    if (ops <= 0 || conc <= 0) {
        fprintf(stderr, "OPS and CONC must be positive\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fm_server s;
    if (fm_start(&s, argv[1]) != 0) {
        return 1;
    }
    printf("bench_hedge: %d operations, %d at a time; first item after 50 ms, or 2 s for "
           "10 %% of requests\n\n",
           ops, conc);
    printf("| %-22s | %5s | %8s | %8s | %8s | %6s | %7s |\n", "hedging", "ops", "p50 ms",
           "p99 ms", "max ms", "extra", "extra");
    printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    run(&s, "none", ops, conc, 0, 0, 0);
    run(&s, "after 200 ms, 1 hedge", ops, conc, SG_MS(200), 1, 0);
    run(&s, "after 200 ms, 2 hedges", ops, conc, SG_MS(200), 2, 0);
    fm_stop(&s);
    curl_global_cleanup();
    return 0;
}
