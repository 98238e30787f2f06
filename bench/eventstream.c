/*
 * Event-stream decoder benchmark (issue 19): the AWS event-stream decoder
 * beside the SSE parser on the same token payloads, in one run.
 *
 * The payloads are Bedrock ConverseStream contentBlockDelta bodies
 * ({"contentBlockIndex":0,"delta":{"text":"..."},"p":"..."}, "p" being
 * Bedrock's padding), ~100 bytes each, the same bytes framed two ways:
 *
 *   event stream: a message with Bedrock's three headers (:event-type,
 *                 :content-type, :message-type), both CRC32s;
 *   SSE:          "event: contentBlockDelta\ndata: <payload>\n\n".
 *
 * About 100 MB of wire bytes each, fed in one read, in 4 KiB reads and in
 * 16-byte reads.  Printed: wire MB/s, payload MB/s and ns per message, and
 * a plain zlib crc32() pass over the event-stream buffer for scale (the
 * decoder hashes every byte once).  Each figure is the median of several
 * runs.  Build in Release; the numbers measure, they never fail.
 *
 *   bench_eventstream [runs]      (default 7)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include <streamguard/framing.h>

#include "es_encode.h"
#include "timing.h"

#define TARGET_BYTES ((size_t)100 * 1000 * 1000)

/* The i-th token payload; returns its length. */
static size_t payload(char *out, size_t cap, size_t i) {
    static const char words[][8] = {"Hello", " world", ",", " the", " quick", " fox"};
    static const char pad[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ";
    int n = snprintf(
        out, cap, "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"%s\"},\"p\":\"%.*s\"}",
        words[i % 6], (int)(8 + i % 24), pad);
    return (size_t)n;
}

typedef struct corpus {
    unsigned char *es;
    size_t es_len;
    char *sse;
    size_t sse_len;
    size_t messages;
    uint64_t payload_bytes;
} corpus;

static int make_corpus(corpus *c) {
    size_t per = 200; /* at most, either framing, per message */
    size_t n = TARGET_BYTES / 160;
    c->es = malloc(n * per);
    c->sse = malloc(n * per);
    if (c->es == NULL || c->sse == NULL) {
        return -1;
    }
    size_t eo = 0;
    size_t so = 0;
    c->payload_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        char p[128];
        size_t pl = payload(p, sizeof(p), i);
        c->payload_bytes += pl;
        static const char *const names[] = {":event-type", ":content-type",
                                            ":message-type"};
        static const char *const values[] = {"contentBlockDelta", "application/json",
                                             "event"};
        eo += es_message(c->es + eo, 3, names, values, p, pl);
        int sl = snprintf(c->sse + so, per, "event: contentBlockDelta\ndata: %.*s\n\n",
                          (int)pl, p);
        so += (size_t)sl;
    }
    c->es_len = eo;
    c->sse_len = so;
    c->messages = n;
    return 0;
}

typedef struct sink {
    uint64_t messages;
    uint64_t bytes;
} sink;

static int on_es(const sg_es_message *m, void *ud) {
    sink *s = ud;
    /* What a profile reads: the event type and the payload. */
    s->messages += m->event_type_len > 0;
    s->bytes += m->payload_len;
    return 0;
}

static int on_sse(const sg_sse_event *ev, void *ud) {
    sink *s = ud;
    s->messages += ev->type_len > 0;
    s->bytes += ev->data_len;
    return 0;
}

static void die(const char *what) {
    fprintf(stderr, "bench_eventstream: %s\n", what);
    exit(1);
}

static double run_es(unsigned char *mem, size_t mem_len, const corpus *c, size_t step) {
    sg_es_config cfg;
    sg_es_config_init(&cfg);
    sg_es_config_set_on_message(&cfg, on_es);
    sg_es_decoder d;
    sink s = {0, 0};
    if (sg_es_init(&d, &cfg, &s, mem, mem_len) != 0) {
        die("sg_es_init");
    }
    double t0 = now_s();
    for (size_t off = 0; off < c->es_len; off += step) {
        size_t n = c->es_len - off < step ? c->es_len - off : step;
        if (sg_es_feed(&d, c->es + off, n) != (ptrdiff_t)n) {
            die("sg_es_feed");
        }
    }
    double t = now_s() - t0;
    if (s.messages != c->messages || s.bytes != c->payload_bytes) {
        die("event stream: wrong result");
    }
    return t;
}

static double run_sse(char *mem, size_t mem_len, const corpus *c, size_t step) {
    sg_sse_config cfg;
    sg_sse_config_init(&cfg);
    sg_sse_config_set_on_event(&cfg, on_sse);
    sg_sse_parser p;
    sink s = {0, 0};
    if (sg_sse_init(&p, &cfg, &s, mem, mem_len) != 0) {
        die("sg_sse_init");
    }
    double t0 = now_s();
    for (size_t off = 0; off < c->sse_len; off += step) {
        size_t n = c->sse_len - off < step ? c->sse_len - off : step;
        if (sg_sse_feed(&p, c->sse + off, n) != (ptrdiff_t)n) {
            die("sg_sse_feed");
        }
    }
    double t = now_s() - t0;
    if (s.messages != c->messages || s.bytes != c->payload_bytes) {
        die("sse: wrong result");
    }
    return t;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 7;
    if (runs < 1 || runs > 101) {
        runs = 7;
    }
    corpus c;
    if (make_corpus(&c) != 0) {
        die("out of memory");
    }
    size_t es_mem_len = sg_es_buffer_size(NULL);
    size_t sse_mem_len = sg_sse_buffer_size(NULL);
    unsigned char *es_mem = malloc(es_mem_len);
    char *sse_mem = malloc(sse_mem_len);
    if (es_mem == NULL || sse_mem == NULL) {
        die("out of memory");
    }
    /* Touch the buffers once, as a long-lived stream would have. */
    memset(es_mem, 0, es_mem_len);
    memset(sse_mem, 0, sse_mem_len);

    static const size_t steps[3] = {0, 4096, 16};
    static const char *const step_names[3] = {"one read", "4 KiB reads", "16-byte reads"};
    double *t[7];
    for (int k = 0; k < 7; k++) {
        t[k] = calloc((size_t)runs, sizeof(double));
        if (t[k] == NULL) {
            die("out of memory");
        }
    }
    volatile unsigned long keep = 0;
    keep += crc32(0, c.es, (uInt)c.es_len); /* warm the pages */
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        keep += crc32(0, c.es, (uInt)c.es_len);
        t[6][r] = now_s() - t0;
        for (int k = 0; k < 3; k++) {
            size_t es_step = steps[k] ? steps[k] : c.es_len;
            size_t sse_step = steps[k] ? steps[k] : c.sse_len;
            t[2 * k][r] = run_es(es_mem, es_mem_len, &c, es_step);
            t[2 * k + 1][r] = run_sse(sse_mem, sse_mem_len, &c, sse_step);
        }
    }

    double pay_mb = (double)c.payload_bytes / 1e6;
    double es_mb = (double)c.es_len / 1e6;
    double sse_mb = (double)c.sse_len / 1e6;
    double msgs = (double)c.messages;
    printf("streamguard event-stream bench: %d runs, medians\n", runs);
    printf("%zu messages, the same %.1f MB of token payloads (%.1f bytes each) framed "
           "two ways:\n",
           c.messages, pay_mb, (double)c.payload_bytes / msgs);
    printf("  event stream %.1f MB (%.1f bytes/message), SSE %.1f MB (%.1f "
           "bytes/message)\n",
           es_mb, (double)c.es_len / msgs, sse_mb, (double)c.sse_len / msgs);
    printf("%-30s %10s %12s %10s\n", "", "wire MB/s", "payload MB/s", "ns/message");
    for (int k = 0; k < 3; k++) {
        double te = median(t[2 * k], runs);
        double ts = median(t[2 * k + 1], runs);
        char name[64];
        snprintf(name, sizeof(name), "event stream, %s", step_names[k]);
        printf("%-30s %10.1f %12.1f %10.1f\n", name, es_mb / te, pay_mb / te,
               te * 1e9 / msgs);
        snprintf(name, sizeof(name), "SSE, %s", step_names[k]);
        printf("%-30s %10.1f %12.1f %10.1f   (event stream %.2fx the time)\n", name,
               sse_mb / ts, pay_mb / ts, ts * 1e9 / msgs, te / ts);
    }
    double tc = median(t[6], runs);
    printf("%-30s %10.1f %12s %10.1f\n", "zlib crc32() over the ES bytes", es_mb / tc, "",
           tc * 1e9 / msgs);
    printf("(checksum %lu)\n", (unsigned long)keep);

    for (int k = 0; k < 7; k++) {
        free(t[k]);
    }
    free(es_mem);
    free(sse_mem);
    free(c.es);
    free(c.sse);
    return 0;
}
