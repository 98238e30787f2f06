/*
 * Fuzz target for the NDJSON parser.  Deterministic: byte 0 picks max_line,
 * bytes 1..8 are the read sizes (each 1..64, cycled); the rest is the body.
 *
 * Invariants (abort on failure, also in the replay binary): the body fed
 * whole, in the chosen reads, and one byte at a time (when short) gives the
 * same items, status, end verdict and counters; no item is empty, ends in
 * LF, or is longer than max_line; a feed returns its length or an error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/framing.h>

#include "split_feed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct outcome {
    uint64_t hash;
    uint64_t items;
    size_t max_line;
    ptrdiff_t status;
    bool clean;
    sg_ndjson_stats stats;
} outcome;

static void check(int ok, const char *what) {
    fz_check("ndjson", ok, what);
}

static ptrdiff_t feed(void *parser, const void *data, size_t len) {
    return sg_ndjson_feed(parser, data, len);
}

static int on_item(const char *line, size_t len, void *ud) {
    outcome *o = ud;
    check(len > 0, "no empty item");
    check(len <= o->max_line, "item within max_line");
    check(memchr(line, '\n', len) == NULL, "no LF inside an item");
    o->items++;
    for (size_t i = 0; i < len; i++) {
        o->hash = (o->hash ^ (unsigned char)line[i]) * 0x100000001b3ULL;
    }
    o->hash = (o->hash ^ (uint64_t)len) * 0x100000001b3ULL;
    return 0;
}

static void run(size_t max_line, const uint8_t *body, size_t n, const uint8_t *sizes,
                size_t n_sizes, outcome *out) {
    sg_ndjson_config cfg;
    sg_ndjson_config_init(&cfg);
    check(sg_ndjson_config_set_max_line(&cfg, max_line) == 0, "config");
    sg_ndjson_config_set_on_item(&cfg, on_item);
    size_t need = sg_ndjson_buffer_size(&cfg);
    char *buf = malloc(need);
    check(buf != NULL, "malloc");
    sg_ndjson_parser p;
    memset(out, 0, sizeof(*out));
    out->hash = 0xcbf29ce484222325ULL;
    out->max_line = max_line;
    check(sg_ndjson_init(&p, &cfg, out, buf, need) == 0, "init");
    out->status = fz_feed_split("ndjson", &p, feed, body, n, sizes, n_sizes);
    check(sg_ndjson_end(&p, &out->clean) == 0, "end");
    out->stats = (sg_ndjson_stats)SG_NDJSON_STATS_INIT;
    check(sg_ndjson_get_stats(&p, &out->stats) == 0, "stats");
    check(out->stats.items == out->items, "items counted");
    check(out->stats.items <= out->stats.lines, "items <= lines");
    free(buf);
}

static void same(const outcome *a, const outcome *b) {
    check(a->hash == b->hash && a->items == b->items, "same items");
    check(a->status == b->status, "same status");
    check(a->clean == b->clean, "same end verdict");
    check(a->stats.lines == b->stats.lines, "same line count");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t lines[4] = {16, 64, 256, 4096};
    outcome whole;
    outcome split;
    outcome bytewise;
    if (size < 9) {
        return 0;
    }
    size_t max_line = lines[data[0] & 3];
    const uint8_t *body = data + 9;
    size_t n = size - 9;
    run(max_line, body, n, NULL, 0, &whole);
    run(max_line, body, n, data + 1, 8, &split);
    same(&whole, &split);
    if (n <= 4096) {
        static const uint8_t one[1] = {0};
        run(max_line, body, n, one, 1, &bytewise);
        same(&whole, &bytewise);
    }
    return 0;
}
