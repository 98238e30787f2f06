/*
 * bench_stream - what guarding costs per item, without any I/O.
 *
 * The same 1,000,000 OpenAI-shaped events (~190 bytes), fed in 16 KiB reads
 * (libcurl's default buffer), through (a) the SSE parser alone and (b) an
 * sg_stream: the same parser plus the guard (three clocks and a budget
 * checked for every item, bytes counted) and the item delivery a transport
 * uses; (c) the same sg_stream with growing buffers (sg_stream_init_mem, what
 * the transports use); then (b) and (c) again in 64-byte reads, where every
 * event spans reads.  Prints the median of 5 runs of each and the ratio.
 * Usage: bench_stream [events]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <streamguard/streamguard.h>

static uint64_t count;

static int on_event(const sg_sse_event *ev, void *ud) {
    (void)ev;
    (void)ud;
    count++;
    return 0;
}

static int on_item(const sg_item *item, void *ud) {
    (void)item;
    (void)ud;
    count++;
    return 0;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char parser_buf[SG_SSE_BUFFER_SIZE(65536, 1048576)];

/* ns per item through an sg_stream fed @total bytes of @buf in @chunk-byte
 * reads: with a lent buffer (@grow false), or growing buffers
 * (sg_stream_init_mem, what the transports use). */
static double guarded_run(const char *buf, size_t total, size_t chunk, size_t n,
                          bool grow) {
    sg_stream s;
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    sg_stream_config_set_terminal_data(&cfg, "[DONE]");
    sg_stream_config_set_max_line(&cfg, 65536);
    sg_stream_config_set_max_event(&cfg, 1048576);
    if (grow) {
        sg_stream_init_mem(&s, &cfg, on_item, NULL, NULL);
    } else {
        sg_stream_init(&s, &cfg, on_item, NULL, parser_buf, sizeof(parser_buf));
    }
    sg_guard_config g;
    sg_guard_config_init(&g);
    sg_guard_config_set_first_item_timeout(&g, SG_SEC(10));
    sg_guard_config_set_idle_timeout(&g, SG_SEC(5));
    sg_guard_config_set_stream_timeout(&g, SG_SEC(300));
    sg_budget b;
    sg_budget_start(&b, 1, SG_SEC(300), 0);
    sg_stream_begin(&s, &g, &b, 1, 1);
    count = 0;
    int64_t t = 2;
    double t0 = now_ns();
    for (size_t o = 0; o < total; o += chunk, t += 1000) {
        sg_stream_feed(&s, buf + o, o + chunk <= total ? chunk : total - o, t);
    }
    double ns = (now_ns() - t0) / (double)n;
    sg_stream_release(&s);
    if (count != n) {
        fprintf(stderr, "item count mismatch\n");
        exit(1);
    }
    return ns;
}

int main(int argc, char **argv) {
    static const char event[] =
        "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":"
        "1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{\"index\":0,\"delta\":"
        "{\"content\":\"tok0\"},\"finish_reason\":null}]}\n\n";
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1000000;
    size_t len = sizeof(event) - 1, total = len * n, chunk = 16384, small = 64;
    char *buf = malloc(total);
    if (buf == NULL) {
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(buf + i * len, event, len);
    }
    double parse[5], guarded[5], grown[5], guarded_small[5], grown_small[5];
    for (int r = 0; r < 5; r++) {
        sg_sse_parser p;
        sg_sse_config sc;
        sg_sse_config_init(&sc);
        sg_sse_config_set_max_line(&sc, 65536);
        sg_sse_config_set_max_event(&sc, 1048576);
        sg_sse_config_set_terminal_data(&sc, "[DONE]");
        sg_sse_config_set_on_event(&sc, on_event);
        sg_sse_init(&p, &sc, NULL, parser_buf, sizeof(parser_buf));
        count = 0;
        double t0 = now_ns();
        for (size_t o = 0; o < total; o += chunk) {
            sg_sse_feed(&p, buf + o, o + chunk <= total ? chunk : total - o);
        }
        parse[r] = (now_ns() - t0) / (double)n;
        if (count != n) {
            fprintf(stderr, "item count mismatch\n");
            return 1;
        }
        guarded[r] = guarded_run(buf, total, chunk, n, false);
        grown[r] = guarded_run(buf, total, chunk, n, true);
        guarded_small[r] = guarded_run(buf, total, small, n, false);
        grown_small[r] = guarded_run(buf, total, small, n, true);
    }
    qsort(parse, 5, sizeof(double), cmp);
    qsort(guarded, 5, sizeof(double), cmp);
    qsort(grown, 5, sizeof(double), cmp);
    qsort(guarded_small, 5, sizeof(double), cmp);
    qsort(grown_small, 5, sizeof(double), cmp);
    printf("%zu events of %zu bytes (median of 5):\n"
           "  %zu-byte reads:\n"
           "  SSE parser alone               %6.1f ns/item\n"
           "  sg_stream (parser + guard)     %6.1f ns/item  %+.1f%%\n"
           "  sg_stream, growing buffers     %6.1f ns/item  %+.1f%%\n"
           "  %zu-byte reads (every event spans reads):\n"
           "  sg_stream (parser + guard)     %6.1f ns/item\n"
           "  sg_stream, growing buffers     %6.1f ns/item  %+.1f%%\n",
           n, len, chunk, parse[2], guarded[2], (guarded[2] / parse[2] - 1) * 100,
           grown[2], (grown[2] / parse[2] - 1) * 100, small, guarded_small[2],
           grown_small[2], (grown_small[2] / guarded_small[2] - 1) * 100);
    free(buf);
    return 0;
}
