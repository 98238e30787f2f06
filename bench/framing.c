/*
 * Framing benchmark (issue 3).  In one run:
 *
 *   1. throughput of the SSE parser over >= 100 MB of OpenAI-shaped events
 *      (~240 bytes each, "data: {...}\n\n") in one read, beside a plain
 *      memchr scan for LF over the same buffer; printed as a ratio
 *      (target >= 0.25x memchr);
 *   2. the same buffer in 16-byte reads vs one read (target <= 2x slower);
 *   3. one 8 MiB data line arriving in 1,024 reads vs one read (target
 *      <= 1.5x slower).
 *
 * Each figure is the median of several runs.  Build in Release (-O2); the
 * numbers measure, they never fail.
 *
 *   bench_framing [runs]      (default 7)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <streamguard/framing.h>

#include "timing.h"

#define TARGET_BYTES ((size_t)100 * 1000 * 1000)
#define EVENT_SIZE 240
#define BIG_LINE ((size_t)8 << 20)
#define BIG_READS 1024

/* Builds OpenAI chat.completion.chunk events, each padded to EVENT_SIZE. */
static char *make_openai(size_t *len_out, size_t *events_out) {
    size_t n_events = TARGET_BYTES / EVENT_SIZE + 1;
    size_t cap = n_events * EVENT_SIZE;
    char *buf = malloc(cap);
    if (buf == NULL) {
        return NULL;
    }
    static const char words[][8] = {"Hello", " world", ",", " the", " quick", " fox"};
    size_t off = 0;
    for (size_t i = 0; i < n_events; i++) {
        char ev[EVENT_SIZE + 1];
        int n =
            snprintf(ev, sizeof(ev),
                     "data: {\"id\":\"chatcmpl-9x%08zu\",\"object\":\"chat.completion."
                     "chunk\",\"created\":1717000000,\"model\":\"gpt-4o-mini\","
                     "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%s\"},"
                     "\"finish_reason\":null}],\"p\":\"",
                     i, words[i % 6]);
        /* Pad inside a JSON string so every event is exactly EVENT_SIZE. */
        while (n < EVENT_SIZE - 4) {
            ev[n++] = 'x';
        }
        memcpy(ev + n, "\"}\n\n", 4);
        memcpy(buf + off, ev, EVENT_SIZE);
        off += EVENT_SIZE;
    }
    *len_out = off;
    *events_out = n_events;
    return buf;
}

typedef struct sink {
    uint64_t events;
    uint64_t bytes;
} sink;

static int on_event(const sg_sse_event *ev, void *ud) {
    sink *s = ud;
    s->events++;
    s->bytes += ev->data_len;
    return 0;
}

static size_t memchr_lines(const char *buf, size_t len) {
    size_t lines = 0;
    const char *p = buf;
    const char *end = buf + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL) {
            break;
        }
        lines++;
        p = nl + 1;
    }
    return lines;
}

/* Parses @len bytes in reads of @step (0 = one read); returns seconds. */
static double parse(const sg_sse_config *cfg, char *mem, size_t mem_len, const char *in,
                    size_t len, size_t step, sink *s) {
    sg_sse_config with_cb = *cfg;
    sg_sse_config_set_on_event(&with_cb, on_event);
    sg_sse_parser p;
    memset(s, 0, sizeof(*s));
    if (sg_sse_init(&p, &with_cb, s, mem, mem_len) != 0) {
        fprintf(stderr, "init failed\n");
        exit(1);
    }
    double t0 = now_s();
    if (step == 0) {
        if (sg_sse_feed(&p, in, len) != (ptrdiff_t)len) {
            fprintf(stderr, "feed failed\n");
            exit(1);
        }
    } else {
        for (size_t off = 0; off < len; off += step) {
            size_t n = len - off < step ? len - off : step;
            if (sg_sse_feed(&p, in + off, n) != (ptrdiff_t)n) {
                fprintf(stderr, "feed failed\n");
                exit(1);
            }
        }
    }
    double t = now_s() - t0;
    bool clean;
    sg_sse_end(&p, &clean);
    return t;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 101) {
        runs = 7;
    }
    size_t len;
    size_t n_events;
    char *buf = make_openai(&len, &n_events);
    sg_sse_config cfg;
    sg_sse_config_init(&cfg);
    sg_sse_config_set_max_line(&cfg, 64 * 1024);
    sg_sse_config_set_max_event(&cfg, 1024 * 1024);
    sg_sse_config_set_terminal_data(&cfg, "[DONE]");
    size_t mem_len = sg_sse_buffer_size(&cfg);
    char *mem = malloc(mem_len);
    if (buf == NULL || mem == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    double *t_memchr = calloc((size_t)runs, sizeof(double));
    double *t_one = calloc((size_t)runs, sizeof(double));
    double *t_16 = calloc((size_t)runs, sizeof(double));
    double *t_big1 = calloc((size_t)runs, sizeof(double));
    double *t_bigN = calloc((size_t)runs, sizeof(double));
    volatile size_t keep = 0;
    sink s;

    /* Warm the pages once so the first run does not pay for page faults. */
    keep += memchr_lines(buf, len);

    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        keep += memchr_lines(buf, len);
        t_memchr[r] = now_s() - t0;

        t_one[r] = parse(&cfg, mem, mem_len, buf, len, 0, &s);
        if (s.events != n_events) {
            fprintf(stderr, "one read: %llu events, want %zu\n",
                    (unsigned long long)s.events, n_events);
            return 1;
        }
        t_16[r] = parse(&cfg, mem, mem_len, buf, len, 16, &s);
        if (s.events != n_events) {
            fprintf(stderr, "16-byte reads: wrong event count\n");
            return 1;
        }
    }

    /* One 8 MiB data line, then the blank line. */
    size_t big_len = 6 + BIG_LINE + 2;
    char *big = malloc(big_len);
    sg_sse_config big_cfg;
    sg_sse_config_init(&big_cfg);
    sg_sse_config_set_max_line(&big_cfg, BIG_LINE + 64);
    sg_sse_config_set_max_event(&big_cfg, BIG_LINE + 64);
    size_t big_mem_len = sg_sse_buffer_size(&big_cfg);
    char *big_mem = malloc(big_mem_len);
    if (big == NULL || big_mem == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    memcpy(big, "data: ", 6);
    memset(big + 6, 'x', BIG_LINE);
    memcpy(big + 6 + BIG_LINE, "\n\n", 2);
    size_t step = (big_len + BIG_READS - 1) / BIG_READS;
    /* Touch the parser's buffer once, as a long-lived parser would have. */
    memset(big_mem, 0, big_mem_len);
    for (int r = 0; r < runs; r++) {
        t_big1[r] = parse(&big_cfg, big_mem, big_mem_len, big, big_len, 0, &s);
        if (s.events != 1 || s.bytes != BIG_LINE) {
            fprintf(stderr, "big line: wrong result\n");
            return 1;
        }
        t_bigN[r] = parse(&big_cfg, big_mem, big_mem_len, big, big_len, step, &s);
        if (s.events != 1 || s.bytes != BIG_LINE) {
            fprintf(stderr, "big line split: wrong result\n");
            return 1;
        }
    }

    double mc = median(t_memchr, runs);
    double one = median(t_one, runs);
    double s16 = median(t_16, runs);
    double b1 = median(t_big1, runs);
    double bn = median(t_bigN, runs);
    double mb = (double)len / 1e6;
    double big_mb = (double)big_len / 1e6;

    printf("streamguard framing bench: %d runs, medians\n", runs);
    printf("buffer: %.1f MB, %zu OpenAI-shaped events of %d bytes\n", mb, n_events,
           EVENT_SIZE);
    printf("%-34s %9.1f MB/s\n", "memchr scan for LF", mb / mc);
    printf("%-34s %9.1f MB/s  %.2fx memchr  (target >= 0.25x) %s\n", "sse, one read",
           mb / one, mc / one, mc / one >= 0.25 ? "ok" : "MISSED");
    printf("%-34s %9.1f MB/s  %.2fx slower  (target <= 2x)    %s\n", "sse, 16-byte reads",
           mb / s16, s16 / one, s16 / one <= 2.0 ? "ok" : "MISSED");
    printf("%-34s %9.1f MB/s\n", "sse, 8 MiB line, one read", big_mb / b1);
    printf("%-34s %9.1f MB/s  %.2fx slower  (target <= 1.5x)  %s\n",
           "sse, 8 MiB line, 1024 reads", big_mb / bn, bn / b1,
           bn / b1 <= 1.5 ? "ok" : "MISSED");
    printf("(checksum %zu)\n", (size_t)keep);

    free(t_memchr);
    free(t_one);
    free(t_16);
    free(t_big1);
    free(t_bigN);
    free(big);
    free(big_mem);
    free(mem);
    free(buf);
    return 0;
}
