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
 * Last, the escaper alone on chunks of text (texts()): the same chunk
 * JSON with content in ASCII, in Latin with accents (2-byte UTF-8), in
 * CJK (3-byte) and in emoji (4-byte), 170-400 bytes each, on every path
 * the CPU has (sgx_json_escape_path), in ns per call and per byte.
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

/* Model chunks whose content is text in one script: a few lines each,
 * cut to a different length per chunk (at a character's end). */
enum { TEXT_KINDS = 4, TEXT_CHUNKS = 64 };
static const char *const text_name[TEXT_KINDS] = {"ascii", "latin", "cjk", "emoji"};
static const char *const text_body[TEXT_KINDS] = {
    "The quick brown fox jumps over the lazy dog while the model keeps on "
    "writing plain English sentences, one token after another, ",
    "Ça a été très agréable: déjà vu, naïve façade, Ærø, Łódź, Straße, "
    "São Paulo, Curaçao, Škoda, Jürgen Müller, Ørsted, señor, ",
    "你好，世界。今天的天气很好，我们去公园散步吧。"
    "日本語のテキストも少し混ぜます。ひらがなとカタカナ。"
    "한국어 문장도 있습니다. 감사합니다. ",
    "😀😃😄😁😆😅🤣😂🙂🙃😉😊😇🥰😍🤩😘😗☺😚😙🥲😋😛😜🤪😝🤑🤗"
    "🤭"
    " "
    "🚀🔥✨🎉 "};

/* @n chunks of kind @kind at @buf (@most bytes each): where, how long. */
static void make_texts(int kind, char *buf, size_t most, size_t *at, size_t *len,
                       size_t n) {
    const char *body = text_body[kind];
    const size_t blen = strlen(body);
    for (size_t i = 0; i < n; i++) {
        /* 10 .. 60 % of the body's bytes, then to the character's end */
        size_t c = blen * (10 + (i * 37) % 51) / 100;
        while (c < blen && ((unsigned char)body[c] & 0xC0) == 0x80) {
            c++;
        }
        int w =
            snprintf(buf + i * most, most,
                     "{\"id\":\"chatcmpl-%zu\",\"object\":\"chat.completion.chunk\","
                     "\"created\":1700000000,\"model\":\"sg-fakemodel\",\"choices\":[{"
                     "\"index\":0,\"delta\":{\"content\":\"%.*s\"},\"finish_reason\":"
                     "null}]}",
                     i, (int)c, body);
        at[i] = i * most;
        len[i] = (size_t)w;
    }
}

/* The escaper alone on each kind of text, on each path, @calls calls a
 * round: median ns a call and a byte. */
static void texts(size_t calls, int rounds) {
    const size_t most = 640;
    char *buf = malloc(TEXT_CHUNKS * most);
    char *out = malloc(SGX_JSON_ESCAPE_MAX(most) * 64);
    size_t at[TEXT_CHUNKS], len[TEXT_CHUNKS];
    if (buf == NULL || out == NULL) {
        exit(1);
    }
    const int best = sgx_json_escape_path(0);
    printf("the escaper alone on chunks of text, %zu calls a round (median ns):\n",
           calls);
    for (int kind = 0; kind < TEXT_KINDS; kind++) {
        make_texts(kind, buf, most, at, len, TEXT_CHUNKS);
        size_t lo = SIZE_MAX, hi = 0, sum = 0;
        for (size_t i = 0; i < TEXT_CHUNKS; i++) {
            lo = len[i] < lo ? len[i] : lo;
            hi = len[i] > hi ? len[i] : hi;
            sum += len[i];
        }
        printf("  %-5s %zu-%zu bytes (mean %zu):", text_name[kind], lo, hi,
               sum / TEXT_CHUNKS);
        for (int path = 1; path <= best; path++) {
            sgx_json_escape_path(path);
            sgx_json_escape_fn fn = sgx_json_escaper();
            double call[99], byte[99];
            for (int r = 0; r < rounds; r++) {
                uint64_t in = 0;
                size_t o = 0;
                double t0 = cpu_seconds();
                for (size_t i = 0, k = 0; i < calls; i++, k = (k + 1) % TEXT_CHUNKS) {
                    fn(out + o, buf + at[k], len[k]);
                    o = o + SGX_JSON_ESCAPE_MAX(most) == SGX_JSON_ESCAPE_MAX(most) * 64
                            ? 0
                            : o + SGX_JSON_ESCAPE_MAX(most);
                    in += len[k];
                }
                const double ns = (cpu_seconds() - t0) * 1e9;
                call[r] = ns / (double)calls;
                byte[r] = ns / (double)in;
            }
            printf("  path %d %6.1f ns %5.3f ns/B", path, median(call, rounds),
                   median(byte, rounds));
        }
        printf("\n");
    }
    sgx_json_escape_path(0);
    free(buf);
    free(out);
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
    texts(n / 5 > 0 ? n / 5 : 1, rounds);
    free(buf);
    free(at);
    free(len);
    free(rd);
    free(batch);
    return 0;
}
