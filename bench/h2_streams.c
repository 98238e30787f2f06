/*
 * Many guarded streams on one HTTP/2 connection against sg-fakemodel (h2c).
 *
 *   bench_h2_streams PATH-TO-sg-fakemodel [PATH-TO-h2load]
 *
 * For 1,000 and 10,000 concurrent streams on one connection it prints:
 *   - throughput: items/s and CPU per item of this client, with the server
 *     generating as fast as it can (gap=0), next to h2load on the same
 *     server and the same requests as the peer ceiling;
 *   - memory per stream: RSS growth while every stream is open, / streams,
 *     and the heap in use (glibc's mallinfo2) grown meanwhile, / streams:
 *     the allocator's own figure, which a heap warmed by the run before
 *     does not hide as it hides RSS;
 *   - expiry lateness: every stream stalls after a few items and its idle
 *     clock (200 ms) fires; lateness = the instant the expiry is handled
 *     (RST_STREAM(CANCEL) submitted, sent in the same step) - the deadline
 *     (last item + idle).  p50 / p99 / max.
 * It spawns the server and h2load itself and kills them when done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <streamguard/h2.h>

#include "harness.h"

extern char **environ;

#define IDLE_NS SG_MS(200)

static int64_t now_ns(void) {
    return sg_clock_monotonic_now(NULL);
}

static int64_t cpu_ns(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * SG_SEC(1) +
           (int64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, rss = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &size, &rss) != 2) {
            rss = 0;
        }
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static size_t heap_bytes(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* sg-fakemodel for the bench (used over h2c): a small log, room for 20,000
 * concurrent streams. */
static pid_t start_server(const char *path, int *port) {
    static const char *const extra[] = {"--log-cap", "1000", "--h2-max-streams", "20000",
                                        NULL};
    static fm_server server;
    if (fm_start_with(&server, path, extra) != 0) {
        return -1;
    }
    unlink(server.ca_path);
    *port = server.port;
    return server.pid;
}

/* ------------------------------------------------------------- a run */

typedef struct run {
    int n;
    uint64_t items;
    int first_items; /* streams that delivered their first item */
    long rss_all_open;
    size_t heap_all_open;
    int64_t *last_item; /* per stream: instant of its last item */
    int64_t *lateness;
    int nlate;
    int outcomes[SG_OUTCOME_COUNT_];
} run;

typedef struct slot {
    run *r;
    int i;
    bool got_first;
} slot;

static int on_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    slot *s = ud;
    s->r->items++;
    if (s->r->last_item != NULL) {
        s->r->last_item[s->i] = now_ns();
    }
    if (!s->got_first) {
        s->got_first = true;
        if (++s->r->first_items == s->r->n) {
            s->r->rss_all_open = rss_kb(); /* every stream is open now */
            s->r->heap_all_open = heap_bytes();
        }
    }
    return 0;
}

static void on_attempt(sg_h2_op *op, const sg_op_attempt *rec, void *ud) {
    (void)op;
    slot *s = ud;
    if (rec->outcome == SG_OUTCOME_IDLE_TIMEOUT && s->r->lateness != NULL) {
        s->r->lateness[s->r->nlate++] = now_ns() - (s->r->last_item[s->i] + IDLE_NS);
    }
}

static void on_done(sg_h2_op *op, void *ud) {
    slot *s = ud;
    s->r->outcomes[sg_h2_op_outcome(op)]++;
    sg_h2_op_free(op);
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Runs @n streams of @query on one new connection. */
static int run_streams(int port, int n, const char *query, bool idle, run *r,
                       double *wall_s, double *cpu_s, long *rss_before,
                       size_t *heap_before) {
    memset(r, 0, sizeof(*r));
    r->n = n;
    if (idle) {
        r->last_item = calloc((size_t)n, sizeof(int64_t));
        r->lateness = calloc((size_t)n, sizeof(int64_t));
    }
    slot *slots = calloc((size_t)n, sizeof(slot));
    char err[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn_options *o = NULL;
    sg_h2_conn *c = NULL;
    int rv = sg_h2_conn_options_new(&o);
    if (rv == 0 && ((rv = sg_h2_conn_options_set_host(o, "127.0.0.1")) != 0 ||
                    (rv = sg_h2_conn_options_set_port(o, port)) != 0 ||
                    (rv = sg_h2_conn_options_set_errbuf(o, err)) != 0)) {
        snprintf(err, sizeof(err), "%s", sg_strerror(rv));
    }
    if (rv == 0) {
        rv = sg_h2_conn_new(&c, o);
    }
    sg_h2_conn_options_free(o);
    if (rv != 0) {
        fprintf(stderr, "connect: %s\n", err);
        return rv;
    }
    char path[256];
    snprintf(path, sizeof(path), "/v1/chat/completions?%s", query);
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    sg_stream_config_set_terminal_data(&framing, "[DONE]");
    sg_h2_request *req = NULL;
    if (sg_h2_request_new(&req) != 0 || sg_h2_request_set_method(req, "GET") != 0 ||
        sg_h2_request_set_path(req, path) != 0 ||
        sg_h2_request_set_framing(req, &framing) != 0) {
        fprintf(stderr, "out of memory\n");
        return SG_ENOMEM;
    }
    sg_h2_request_set_on_item(req, on_item);
    sg_h2_request_set_on_attempt(req, on_attempt);
    sg_h2_request_set_on_done(req, on_done);
    sg_op_options *po = NULL;
    sg_op_options_new(&po);
    sg_op_options_set_budget(po, SG_SEC(120));
    sg_op_options_set_max_attempts(po, 1);
    if (idle) {
        sg_op_options_set_idle_timeout(po, IDLE_NS);
    }
    *rss_before = rss_kb();
    *heap_before = heap_bytes();
    int64_t c0 = cpu_ns();
    int64_t t0 = now_ns();
    for (int i = 0; i < n; i++) {
        slots[i].r = r;
        slots[i].i = i;
        rv = sg_h2_op_new(NULL, c, po, req, &slots[i]);
        if (rv != 0) {
            fprintf(stderr, "sg_h2_op_new: %s\n", sg_strerror(rv));
            return rv;
        }
    }
    sg_op_options_free(po);
    sg_h2_request_free(req);
    rv = sg_h2_conn_run(c);
    *wall_s = (double)(now_ns() - t0) / 1e9;
    *cpu_s = (double)(cpu_ns() - c0) / 1e9;
    sg_h2_conn_free(c);
    free(slots);
    return rv;
}

/* h2load on the same server and requests: req/s, or -1. */
static double h2load_rps(const char *h2load, int port, int n, const char *query) {
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "%s -n %d -c 1 -m %d 'http://127.0.0.1:%d/v1/chat/completions?%s' 2>&1",
             h2load, n, n, port, query);
    FILE *p = popen(cmd, "r");
    if (p == NULL) {
        return -1;
    }
    char line[512];
    double rps = -1;
    while (fgets(line, sizeof(line), p) != NULL) {
        const char *f = strstr(line, "finished in ");
        if (f != NULL) {
            const char *comma = strchr(f, ',');
            if (comma != NULL) {
                rps = atof(comma + 1);
            }
        }
    }
    pclose(p);
    return rps;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH-TO-sg-fakemodel [PATH-TO-h2load]\n", argv[0]);
        return 2;
    }
    const char *h2load = argc > 2 ? argv[2] : "h2load";
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int port = 0;
    pid_t srv = start_server(argv[1], &port);
    if (srv < 0) {
        fprintf(stderr, "cannot start %s\n", argv[1]);
        return 1;
    }
    enum { ITEMS = 100 };
    char fast[64];
    /* gap=1: sg-fakemodel stalls many concurrent gap=0 streams (h2load too). */
    snprintf(fast, sizeof(fast), "n=%d&gap=1", ITEMS);
    const char *stall = "n=1000&gap=10&stall_after=5&stall=forever";
    printf("sg-fakemodel h2c on 127.0.0.1:%d, one connection per run, %s\n", port,
           sg_version());
    int sizes[] = {1000, 10000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        int n = sizes[k];
        run r;
        double wall, cpu;
        long rss0;
        size_t heap0;
        /* 1. throughput and CPU per item (server unpaced: gap=0) */
        if (run_streams(port, n, fast, false, &r, &wall, &cpu, &rss0, &heap0) != 0) {
            break;
        }
        double ips = (double)r.items / wall;
        double rps = h2load_rps(h2load, port, n, fast);
        printf("\n== %d concurrent streams, %d items each (%s)\n", n, ITEMS, fast);
        printf("streamguard h2: %llu items, ok %d/%d, %.3f s wall, %.0f items/s, "
               "CPU %.0f ns/item\n",
               (unsigned long long)r.items, r.outcomes[SG_OUTCOME_OK], n, wall, ips,
               cpu * 1e9 / (double)(r.items ? r.items : 1));
        if (rps > 0) {
            printf("h2load -c 1 -m %d: %.1f req/s = %.0f items/s (peer ceiling); "
                   "streamguard = %.0f%% of it\n",
                   n, rps, rps * ITEMS, 100.0 * ips / (rps * ITEMS));
        } else {
            printf("h2load: not available\n");
        }
        /* 2. memory per stream and expiry lateness (every stream stalls) */
        if (run_streams(port, n, stall, true, &r, &wall, &cpu, &rss0, &heap0) != 0) {
            break;
        }
        qsort(r.lateness, (size_t)r.nlate, sizeof(int64_t), cmp64);
        printf("stall after 5 items, idle clock %lld ms: idle_timeout %d/%d\n",
               (long long)(IDLE_NS / SG_MS(1)), r.outcomes[SG_OUTCOME_IDLE_TIMEOUT], n);
        printf("memory: RSS +%ld KiB with all %d streams open = %.1f KiB/stream\n",
               r.rss_all_open - rss0, n, (double)(r.rss_all_open - rss0) / n);
        printf("memory: heap +%.0f bytes with all %d streams open = %.0f bytes/stream\n",
               (double)r.heap_all_open - (double)heap0, n,
               ((double)r.heap_all_open - (double)heap0) / n);
        if (r.nlate > 0) {
            printf(
                "expiry lateness: p50 %.3f ms, p99 %.3f ms, max %.3f ms (%d expiries)\n",
                (double)r.lateness[r.nlate / 2] / 1e6,
                (double)r.lateness[(size_t)((double)r.nlate * 0.99)] / 1e6,
                (double)r.lateness[r.nlate - 1] / 1e6, r.nlate);
        }
        free(r.last_item);
        free(r.lateness);
    }
    kill(srv, SIGTERM);
    waitpid(srv, NULL, 0);
    return 0;
}
