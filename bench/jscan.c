/*
 * What a provider profile's look inside each item costs: the JSON path
 * scanner (src/framing/jscan.h) on OpenAI-shaped chunks of 240 bytes - the
 * token path, the in-band error check (a top-level key that is absent, so
 * every top-level value is skipped), and both - per item, median of 7 runs.
 * Beside it, the plain SSE parser's own cost per event of the same chunks,
 * so the ratio is the profile's overhead.
 *
 * Usage: bench_jscan [ITEMS]   (default 400000)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/framing.h>

#include "framing/jscan.h"

static int64_t now_ns(void) {
    return sg_clock_monotonic_now(NULL);
}

static int cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t g_sink;

static int on_event(const sg_sse_event *ev, void *ud) {
    (void)ud;
    g_sink += ev->data_len;
    return 0;
}

int main(int argc, char **argv) {
    size_t items = argc > 1 ? strtoul(argv[1], NULL, 10) : 400000;
    /* one chunk, padded to 240 bytes with a longer id */
    char chunk[256];
    int base = snprintf(
        chunk, sizeof(chunk),
        "{\"id\":\"chatcmpl-%s\",\"object\":\"chat.completion.chunk\","
        "\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{"
        "\"index\":0,\"delta\":{\"content\":\"tok42\"},\"finish_reason\":null}]}",
        "");
    int pad = 240 - base;
    char id[128];
    memset(id, 'x', (size_t)pad);
    id[pad] = '\0';
    int n = snprintf(
        chunk, sizeof(chunk),
        "{\"id\":\"chatcmpl-%s\",\"object\":\"chat.completion.chunk\","
        "\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{"
        "\"index\":0,\"delta\":{\"content\":\"tok42\"},\"finish_reason\":null}]}",
        id);
    sg__jpath token, error;
    sg__jpath_parse(&token, "choices[].delta.content");
    sg__jpath_parse(&error, "error");

    /* the SSE stream of the same chunks, for the plain parser */
    size_t ev_len = (size_t)n + 8;
    char *stream = malloc(ev_len * items);
    for (size_t i = 0; i < items; i++) {
        memcpy(stream + i * ev_len, "data: ", 6);
        memcpy(stream + i * ev_len + 6, chunk, (size_t)n);
        memcpy(stream + i * ev_len + 6 + n, "\n\n", 2);
    }
    enum { RUNS = 7 };
    int64_t t[5][RUNS];
    for (int r = 0; r < RUNS; r++) {
        sg__jval v;
        int64_t t0 = now_ns();
        for (size_t i = 0; i < items; i++) {
            g_sink += sg__jscan_find(chunk, (size_t)n, &token, &v) ? v.n : 0;
            __asm__ volatile("" ::: "memory");
        }
        int64_t t1 = now_ns();
        for (size_t i = 0; i < items; i++) {
            g_sink += sg__jscan_find(chunk, (size_t)n, &error, &v);
            __asm__ volatile("" ::: "memory");
        }
        int64_t t2 = now_ns();
        for (size_t i = 0; i < items; i++) {
            g_sink += sg__jscan_find(chunk, (size_t)n, &error, &v);
            g_sink += sg__jscan_find(chunk, (size_t)n, &token, &v) ? v.n : 0;
            __asm__ volatile("" ::: "memory");
        }
        int64_t t3 = now_ns();
        sg_sse_parser p;
        sg_sse_config cfg;
        sg_sse_config_init(&cfg);
        sg_sse_config_set_on_event(&cfg, on_event);
        static char *mem;
        size_t mem_len = sg_sse_buffer_size(&cfg);
        mem = mem != NULL ? mem : malloc(mem_len);
        if (sg_sse_init(&p, &cfg, NULL, mem, mem_len) != 0) {
            fprintf(stderr, "sg_sse_init failed\n");
            return 1;
        }
        int64_t t4 = now_ns();
        for (size_t off = 0; off < ev_len * items; off += 65536) {
            size_t len = ev_len * items - off < 65536 ? ev_len * items - off : 65536;
            sg_sse_feed(&p, stream + off, len);
        }
        int64_t t5 = now_ns();
        t[0][r] = t1 - t0;
        t[1][r] = t2 - t1;
        t[2][r] = t3 - t2;
        t[3][r] = t5 - t4;
        int64_t t6 = now_ns();
        for (size_t i = 0; i < items; i++) {
            /* what a profile does per item after the first token */
            if (sg__jscan_may_have_key(chunk, (size_t)n, "error", 5)) {
                g_sink += sg__jscan_find(chunk, (size_t)n, &error, &v);
            }
            __asm__ volatile("" ::: "memory");
        }
        t[4][r] = now_ns() - t6;
    }
    const char *names[5] = {"jscan choices[].delta.content", "jscan error (absent)",
                            "jscan both", "plain SSE parser, per event",
                            "quick reject, then error"};
    printf("streamguard jscan bench: %zu items of %d bytes, %d runs, medians\n", items, n,
           RUNS);
    double plain = 0;
    for (int k = 4; k >= 0; k--) {
        qsort(t[k], RUNS, sizeof(int64_t), cmp);
        double per = (double)t[k][RUNS / 2] / (double)items;
        if (k == 3) {
            plain = per;
        }
        (void)per;
    }
    for (int k = 0; k < 5; k++) {
        double per = (double)t[k][RUNS / 2] / (double)items;
        printf("%-32s %7.1f ns/item  %5.2fx the plain parser\n", names[k], per,
               per / plain);
    }
    printf("(sink %llu)\n", (unsigned long long)(g_sink & 0xff));
    free(stream);
    return 0;
}
