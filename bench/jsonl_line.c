/*
 * bench_jsonl_line - what `sg-stream --output jsonl` costs per item beside
 * `--output data` and `--output none`, in this process's CPU time, which a
 * shared machine's load moves far less than the wall clock.
 *
 * The same 1,000,000 OpenAI-shaped events as sg-fakemodel writes (the id
 * and the token's number changing, ~180 bytes each) go through an
 * sg_stream (the SSE parser's fast path, the guard, the item delivery) in
 * 100 KiB reads, each copied into the read buffer first as recv(2) does,
 * to one of three consumers, which append to a 256 KiB batch as sg-stream
 * does (tools/sg-stream/writeout.c; the batch is reset where sg-stream
 * would write it out):
 *   none   no consumer (--output none);
 *   data   the data and a newline (--output data);
 *   jsonl  {"event":"message","data":LITERAL,"id":""} and a newline, the
 *          literal from sgx_json_escaper() (--output jsonl);
 * then the escaper alone, on the first 4,096 events' data again and again,
 * in ns per 32 input bytes.
 * The three consumers alternate, ROUNDS rounds; each figure is the median
 * of its rounds, in ns of CPU per item.
 * Usage: bench_jsonl_line [events] [rounds]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/streamguard.h>

#include "sgx/json.h"
#include "timing.h"

#define BATCH (256u << 10)
#define READ (100u << 10)

enum { NONE, DATA, JSONL, MODES };
static const char *const mode_name[MODES] = {"none", "data", "jsonl"};

static char *batch;
static size_t batch_len;
static sgx_json_escape_fn escape;

static int on_data(const sg_item *item, void *ud) {
    (void)ud;
    char *d = batch + batch_len;
    memcpy(d, item->data, item->data_len);
    d[item->data_len] = '\n';
    batch_len += item->data_len + 1;
    if (batch_len >= BATCH) {
        batch_len = 0;
    }
    return 0;
}

static int on_jsonl(const sg_item *item, void *ud) {
    (void)ud;
    static const char head[] = "{\"event\":\"message\",\"data\":";
    char *start = batch + batch_len;
    char *d = start;
    memcpy(d, head, sizeof(head) - 1);
    d += sizeof(head) - 1;
    d += escape(d, item->data, item->data_len);
    memcpy(d, ",\"id\":\"\"}\n", 10);
    d += 10;
    batch_len += (size_t)(d - start);
    if (batch_len >= BATCH) {
        batch_len = 0;
    }
    return 0;
}

/* ns of CPU per item through an sg_stream fed @total bytes of @buf. */
static double run(int mode, const char *buf, size_t total, size_t n, char *rd) {
    static char parser_buf[SG_SSE_BUFFER_SIZE(65536, 1048576)];
    sg_stream s;
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    sg_stream_config_set_terminal_data(&cfg, "[DONE]");
    sg_stream_config_set_max_line(&cfg, 65536);
    sg_stream_config_set_max_event(&cfg, 1048576);
    sg_stream_init(&s, &cfg,
                   mode == NONE   ? NULL
                   : mode == DATA ? on_data
                                  : on_jsonl,
                   NULL, parser_buf, sizeof(parser_buf));
    sg_guard_config g;
    sg_guard_config_init(&g);
    sg_guard_config_set_idle_timeout(&g, SG_SEC(5));
    sg_budget b;
    sg_budget_start(&b, 1, SG_SEC(300), 0);
    sg_stream_begin(&s, &g, &b, 1, 1);
    batch_len = 0;
    int64_t t = 2;
    double t0 = cpu_seconds();
    for (size_t o = 0; o < total; o += READ, t += 1000) {
        size_t c = total - o < READ ? total - o : READ;
        memcpy(rd, buf + o, c);
        sg_stream_feed(&s, rd, c, t);
    }
    double ns = (cpu_seconds() - t0) * 1e9 / (double)n;
    sg_stream_release(&s);
    return ns;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (n == 0 || rounds <= 0 || rounds > 99) {
        fprintf(stderr, "usage: bench_jsonl_line [events] [rounds <= 99]\n");
        return 2;
    }
    /* sg-fakemodel's chunks: {"id":"chatcmpl-7",...,"content":"tokN"} */
    const size_t most = 256;
    char *buf = malloc(n * most);
    char *rd = malloc(READ);
    size_t *at = malloc(n * sizeof(*at)); /* each event's data: where, how long */
    size_t *len = malloc(n * sizeof(*len));
    batch = malloc(BATCH + SGX_JSON_ESCAPE_MAX(most) + 64);
    if (buf == NULL || rd == NULL || at == NULL || len == NULL || batch == NULL) {
        return 1;
    }
    size_t total = 0;
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        int w =
            snprintf(buf + total, most,
                     "data: {\"id\":\"chatcmpl-7\",\"object\":\"chat.completion.chunk\","
                     "\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{"
                     "\"index\":0,\"delta\":{\"content\":\"tok%zu\"},\"finish_reason\":"
                     "null}]}\n\n",
                     i);
        at[i] = total + 6;
        len[i] = (size_t)w - 8;
        total += (size_t)w;
        bytes += len[i];
    }
    escape = sgx_json_escaper();
    double fig[MODES][99];
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < MODES; m++) {
            fig[m][r] = run(m, buf, total, n, rd);
        }
    }
    /* the escaper alone, n calls on the first 4,096 events again and again
     * (in the caches, as an event is when its item is printed) */
    const size_t warm = n < 4096 ? n : 4096;
    double esc[99];
    double call[99];
    for (int r = 0; r < rounds; r++) {
        batch_len = 0;
        uint64_t in = 0;
        double t0 = cpu_seconds();
        for (size_t i = 0, k = 0; i < n; i++, k = k + 1 == warm ? 0 : k + 1) {
            batch_len += escape(batch + batch_len, buf + at[k], len[k]);
            batch_len = batch_len >= BATCH ? 0 : batch_len;
            in += len[k];
        }
        const double ns = (cpu_seconds() - t0) * 1e9;
        esc[r] = ns / ((double)in / 32);
        call[r] = ns / (double)n;
    }
    printf(
        "%zu events, %.0f bytes of data each, %d rounds (median ns of CPU per item):\n",
        n, (double)bytes / (double)n, rounds);
    double med[MODES];
    for (int m = 0; m < MODES; m++) {
        med[m] = median(fig[m], rounds);
    }
    printf("  none  %6.1f\n", med[NONE]);
    printf("  data  %6.1f  (+%.1f over none)\n", med[DATA], med[DATA] - med[NONE]);
    printf("  jsonl %6.1f  (+%.1f over none, +%.1f over data)\n", med[JSONL],
           med[JSONL] - med[NONE], med[JSONL] - med[DATA]);
    printf("  the escaper alone (sgx_json_escaper, path %d): %.1f ns a call, %.2f per 32 "
           "bytes of data\n",
           sgx_json_escape_path(0), median(call, rounds), median(esc, rounds));
    free(buf);
    free(at);
    free(len);
    free(rd);
    free(batch);
    return 0;
}
