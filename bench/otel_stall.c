/*
 * bench_otel_stall - does a collector that blackholes move the stall
 * lateness of 1,000 streams?  (issue 38, item 5.)  1,000 libcurl streams
 * against sg-fakemodel on one sg_curl_multi, each stalling after 2 items
 * under a 200 ms idle clock (bench_curl_transport's section 6 shape);
 * lateness is when on_done ran minus (last item + 200 ms).  Three modes,
 * alternating run by run in one process:
 *   untraced   no observer;
 *   live       an sg_otel_trace per operation, exporting to the test
 *              collector (tests/integration/otel_collector.c) on loopback;
 *   blackhole  the same, exporting to a loopback socket whose thread
 *              accepts every connection and never reads or answers.
 * Each traced mode has one exporter for the whole run (the specification's
 * defaults: queue 2,048, batch 512, schedule delay 5 s, export timeout
 * 10 s), as a process would.  Prints each run's lateness p50 / p99 / max
 * and, per traced run, the spans submitted, exported and dropped
 * (sg_otel_stats_get), then the medians over the runs.
 *
 * Usage: bench_otel_stall PATH/TO/sg-fakemodel [rounds]   (default 5, at most 31)
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <streamguard/curl.h>
#include <streamguard/otel.h>
#include <streamguard/otel_trace.h>

#include "harness.h"
#include "otel_collector.h"

#define STREAMS 1000
#define MAX_ROUNDS 31
#define IDLE SG_MS(200)

/* ---- the blackhole: accepts, never reads, never answers ---------------- */

struct blackhole {
    int lfd;
    int stop[2]; /* a pipe: written to stop the thread */
    int fds[256];
    size_t nfds;
    pthread_t thread;
    uint16_t port;
};

static void *blackhole_main(void *ud) {
    struct blackhole *b = ud;
    struct pollfd p[2] = {{b->lfd, POLLIN, 0}, {b->stop[0], POLLIN, 0}};
    while (poll(p, 2, -1) >= 0 && (p[1].revents & POLLIN) == 0) {
        if ((p[0].revents & POLLIN) != 0) {
            int fd = accept(b->lfd, NULL, NULL);
            if (fd >= 0 && b->nfds < sizeof(b->fds) / sizeof(b->fds[0])) {
                b->fds[b->nfds++] = fd; /* held open, never read */
            } else if (fd >= 0) {
                close(fd);
            }
        }
    }
    return NULL;
}

static int blackhole_start(struct blackhole *b) {
    memset(b, 0, sizeof(*b));
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b->lfd < 0 || bind(b->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(b->lfd, 64) != 0 ||
        getsockname(b->lfd, (struct sockaddr *)&a, &len) != 0 ||
        pipe2(b->stop, O_CLOEXEC) != 0 ||
        pthread_create(&b->thread, NULL, blackhole_main, b) != 0) {
        return -1;
    }
    b->port = ntohs(a.sin_port);
    return 0;
}

static void blackhole_stop(struct blackhole *b) {
    if (write(b->stop[1], "x", 1) != 1) {
        abort();
    }
    pthread_join(b->thread, NULL);
    for (size_t i = 0; i < b->nfds; i++) {
        close(b->fds[i]);
    }
    close(b->lfd);
    close(b->stop[0]);
    close(b->stop[1]);
}

/* ---- one run: 1,000 streams stalling together -------------------------- */

static char base[64];

struct conc {
    int64_t last_item;
    int64_t done_at;
    sg_outcome outcome;
};

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    ((struct conc *)ud)->last_item = sg_clock_now(NULL);
    return 0;
}

static void on_done(sg_curl_op *op, void *ud) {
    struct conc *c = ud;
    c->done_at = sg_clock_now(NULL);
    c->outcome = sg_curl_op_outcome(op);
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One run of STREAMS streams, traced by @traces (one per operation) or not
 * (NULL): the lateness samples (ms) sorted into @late; returns how many
 * streams ended on their idle clock. */
static size_t run(sg_otel_trace **traces, double *late) {
    static struct conc cs[STREAMS];
    static CURL *easy[STREAMS];
    static sg_curl_op *ops[STREAMS];
    char url[256];
    snprintf(
        url, sizeof(url),
        "%s/v1/chat/completions?n=10&gap=20&stall_after=2&stall=forever&_t=otelstall",
        base);
    sg_stream_config f;
    sg_stream_config_init(&f);
    sg_curl_options *co = NULL;
    sg_curl_multi *m = NULL;
    if (sg_stream_config_set_terminal_data(&f, "[DONE]") != 0 ||
        sg_stream_config_set_max_line(&f, 4096) != 0 ||
        sg_stream_config_set_max_event(&f, 4096) != 0 || sg_curl_options_new(&co) != 0 ||
        sg_curl_options_set_framing(co, &f) != 0 ||
        sg_curl_options_set_on_item(co, on_item) != 0 ||
        sg_curl_options_set_on_done(co, on_done) != 0 ||
        sg_curl_multi_new(&m, NULL) != 0) {
        fprintf(stderr, "bench_otel_stall: cannot make the options\n");
        exit(1);
    }
    for (int i = 0; i < STREAMS; i++) {
        memset(&cs[i], 0, sizeof(cs[i]));
        sg_op_options *po = NULL;
        if (sg_op_options_new(&po) != 0 || sg_op_options_set_method(po, "GET") != 0 ||
            sg_op_options_set_max_attempts(po, 1) != 0 ||
            sg_op_options_set_first_item_timeout(po, SG_SEC(10)) != 0 ||
            sg_op_options_set_idle_timeout(po, IDLE) != 0 ||
            sg_op_options_set_target(po, url) != 0 ||
            (traces != NULL && sg_op_options_add_observer(po, sg_otel_observer(traces[i]),
                                                          traces[i]) != 0)) {
            fprintf(stderr, "bench_otel_stall: cannot make the policy\n");
            exit(1);
        }
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        if (easy[i] == NULL || sg_curl_op_new(&ops[i], easy[i], po, co, &cs[i]) != 0 ||
            sg_curl_multi_add(m, ops[i]) != 0) {
            fprintf(stderr, "bench_otel_stall: cannot start stream %d\n", i);
            exit(1);
        }
        sg_op_options_free(po); /* the operation has its own copy */
    }
    sg_curl_options_free(co);
    sg_curl_multi_run(m);
    size_t k = 0;
    for (int i = 0; i < STREAMS; i++) {
        if (cs[i].outcome == SG_OUTCOME_IDLE_TIMEOUT) {
            late[k++] = (double)(cs[i].done_at - (cs[i].last_item + IDLE)) / 1e6;
        }
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
    qsort(late, k, sizeof(double), cmpd);
    return k;
}

/* ---- the modes ---------------------------------------------------------- */

struct mode {
    const char *name;
    sg_otel *otel; /* NULL: untraced */
    sg_otel_trace *traces[STREAMS];
    sg_otel_stats last; /* the counters after the previous run */
    double p50[MAX_ROUNDS], p99[MAX_ROUNDS], max[MAX_ROUNDS];
    double exported[MAX_ROUNDS], dropped[MAX_ROUNDS];
};

static sg_otel *exporter(uint16_t port) {
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/v1/traces", (unsigned)port);
    sg_otel_options *o = NULL;
    sg_otel *otel = NULL;
    if (sg_otel_options_new(&o) != 0 || sg_otel_options_set_endpoint(o, url) != 0 ||
        sg_otel_options_set_service_name(o, "bench_otel_stall") != 0 ||
        sg_otel_new(&otel, o) != 0) {
        fprintf(stderr, "bench_otel_stall: cannot start the exporter\n");
        exit(1);
    }
    sg_otel_options_free(o);
    return otel;
}

static void mode_init(struct mode *md, const char *name, sg_otel *otel) {
    memset(md, 0, sizeof(*md));
    md->name = name;
    md->otel = otel;
    md->last = (sg_otel_stats)SG_OTEL_STATS_INIT;
    for (int i = 0; otel != NULL && i < STREAMS; i++) {
        if (sg_otel_trace_new(&md->traces[i], otel) != 0 ||
            sg_otel_trace_set_genai(md->traces[i], "openai", "chat", "gpt-4o") != 0) {
            fprintf(stderr, "bench_otel_stall: cannot make the traces\n");
            exit(1);
        }
    }
}

static void mode_run(struct mode *md, int round, double *late) {
    size_t k = run(md->otel != NULL ? md->traces : NULL, late);
    md->p50[round] = k > 0 ? late[k / 2] : -1;
    md->p99[round] = k > 0 ? late[k * 99 / 100] : -1;
    md->max[round] = k > 0 ? late[k - 1] : -1;
    printf("| %d | %s | %zu | %.3f | %.3f | %.3f |", round + 1, md->name, k,
           md->p50[round], md->p99[round], md->max[round]);
    if (md->otel != NULL) {
        sg_otel_stats st = SG_OTEL_STATS_INIT;
        (void)sg_otel_stats_get(md->otel, &st);
        uint64_t dropped = st.dropped_queue_full + st.dropped_failed;
        uint64_t dropped0 = md->last.dropped_queue_full + md->last.dropped_failed;
        md->exported[round] = (double)(st.exported - md->last.exported);
        md->dropped[round] = (double)(dropped - dropped0);
        printf(" %llu | %llu | %llu | %llu |\n",
               (unsigned long long)(st.submitted - md->last.submitted),
               (unsigned long long)(st.exported - md->last.exported),
               (unsigned long long)(st.dropped_queue_full - md->last.dropped_queue_full),
               (unsigned long long)(st.dropped_failed - md->last.dropped_failed));
        md->last = st;
    } else {
        printf(" - | - | - | - |\n");
    }
    fflush(stdout);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), cmpd);
    return v[n / 2];
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel [rounds]\n", argv[0]);
        return 2;
    }
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    static fm_server server;
    if (fm_start(&server, argv[1]) != 0) {
        fprintf(stderr, "could not start %s\n", argv[1]);
        return 1;
    }
    snprintf(base, sizeof(base), "%s", server.base);
    otel_collector *live = oc_start(OC_ANSWER);
    struct blackhole hole;
    if (live == NULL || blackhole_start(&hole) != 0) {
        fprintf(stderr, "bench_otel_stall: cannot start the collectors\n");
        return 1;
    }
    static struct mode modes[3];
    mode_init(&modes[0], "untraced", NULL);
    mode_init(&modes[1], "live", exporter(oc_port(live)));
    mode_init(&modes[2], "blackhole", exporter(hole.port));

    printf("bench_otel_stall: %d streams stalling under a %d ms idle clock, %d rounds; "
           "libcurl %s\n",
           STREAMS, (int)(IDLE / SG_MS(1)), rounds,
           curl_version_info(CURLVERSION_NOW)->version);
    printf("| round | mode | idle_timeout | lateness p50 ms | p99 ms | max ms | spans "
           "submitted | exported | dropped (queue full) | dropped (failed) |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    static double late[STREAMS];
    for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < 3; j++) { /* the order rotates round by round */
            mode_run(&modes[(r + j) % 3], r, late);
        }
    }
    printf(
        "\nmedians over %d rounds:\n| mode | lateness p50 ms | p99 ms | max ms | spans "
        "exported a run | dropped a run |\n| --- | --- | --- | --- | --- | --- |\n",
        rounds);
    for (int j = 0; j < 3; j++) {
        struct mode *md = &modes[j];
        printf("| %s | %.3f | %.3f | %.3f |", md->name, median(md->p50, rounds),
               median(md->p99, rounds), median(md->max, rounds));
        if (md->otel != NULL) {
            printf(" %.0f | %.0f |\n", median(md->exported, rounds),
                   median(md->dropped, rounds));
        } else {
            printf(" - | - |\n");
        }
    }
    for (int j = 1; j < 3; j++) {
        sg_otel_stats st = SG_OTEL_STATS_INIT;
        (void)sg_otel_stats_get(modes[j].otel, &st);
        printf("%s exporter in all: %llu spans submitted, %llu exported, %llu dropped "
               "(queue full), %llu dropped (failed), %llu exports, %llu failed exports\n",
               modes[j].name, (unsigned long long)st.submitted,
               (unsigned long long)st.exported, (unsigned long long)st.dropped_queue_full,
               (unsigned long long)st.dropped_failed, (unsigned long long)st.exports,
               (unsigned long long)st.failed_exports);
    }
    for (int j = 1; j < 3; j++) {
        for (int i = 0; i < STREAMS; i++) {
            sg_otel_trace_free(modes[j].traces[i]);
        }
        sg_otel_free(modes[j].otel); /* the blackhole's: after its export timeout */
    }
    oc_stop(live);
    blackhole_stop(&hole);
    fm_stop(&server);
    curl_global_cleanup();
    return 0;
}
