/*
 * Fuzz target for the SSE parser.  Deterministic: the configuration and the
 * read boundaries come from the input's first bytes.
 *
 * Layout: byte 0 = options (bits 0-1 max_line, 2-3 max_event, 4 data
 * sentinel "[DONE]", 5 type sentinel "message_stop", or "message" with bit
 * 7, 6 the split feed at the portable vector level); bytes 1..8 = read
 * sizes (each 1..64, cycled); the rest is the body.
 *
 * Invariants checked (abort on failure, also in the replay binary):
 *   - the body fed whole, fed in the chosen reads, and (when short) fed one
 *     byte at a time yields the same events, comments, retries, final
 *     status, end verdict and counters, whatever the vector level;
 *   - a feed returns its length or a negative code, never anything else;
 *   - items never exceed the dispatched events, views stay inside limits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/framing.h>

#include "sgx/simd.h"
#include "split_feed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct digest {
    uint64_t hash;
    uint64_t events;
    uint64_t comments;
    uint64_t retries;
    size_t max_line;
    size_t max_event;
} digest;

static void check(int ok, const char *what) {
    fz_check("sse", ok, what);
}

static ptrdiff_t feed(void *parser, const void *data, size_t len) {
    return sg_sse_feed(parser, data, len);
}

static void mix(digest *d, const void *p, size_t n) {
    fz_mix(&d->hash, p, n);
}

static int on_event(const sg_sse_event *ev, void *ud) {
    digest *d = ud;
    check(ev->data_len <= d->max_event, "data within max_event");
    check(ev->type_len <= d->max_line && ev->id_len <= d->max_line,
          "fields within a line");
    check(ev->type_len > 0, "type never empty");
    d->events++;
    mix(d, "E", 1);
    mix(d, ev->type, ev->type_len);
    mix(d, ev->data, ev->data_len);
    mix(d, ev->id, ev->id_len);
    mix(d, &ev->terminal, sizeof(ev->terminal));
    return 0;
}

static int on_comment(const char *text, size_t len, void *ud) {
    digest *d = ud;
    d->comments++;
    mix(d, "C", 1);
    mix(d, text, len);
    return 0;
}

static int on_other(const char *line, size_t len, void *ud) {
    digest *d = ud;
    check(len > 0 && line[0] != ':', "an other line is neither blank nor a comment");
    check(len <= d->max_line, "an other line within max_line");
    mix(d, "O", 1);
    mix(d, line, len);
    return 0;
}

static int on_retry(uint64_t ms, void *ud) {
    digest *d = ud;
    d->retries++;
    mix(d, "R", 1);
    mix(d, &ms, sizeof(ms));
    return 0;
}

typedef struct outcome {
    digest d;
    ptrdiff_t status; /* first negative feed result, or 0 */
    bool clean;
    bool terminal;
    sg_sse_stats stats;
    const char *id;
    size_t id_len;
    char id_copy[4096];
} outcome;

/* Feeds @body in reads of the sizes in @sizes (cycled; NULL = one read). */
/* @cfg's limits are @max_line and @max_event. */
static void run(const sg_sse_config *cfg, size_t max_line, size_t max_event,
                const uint8_t *body, size_t n, const uint8_t *sizes, size_t n_sizes,
                outcome *out) {
    size_t need = sg_sse_buffer_size(cfg);
    check(need > 0, "buffer size");
    char *buf = malloc(need);
    check(buf != NULL, "malloc");
    sg_sse_parser p;
    memset(out, 0, sizeof(*out));
    out->d.hash = 0xcbf29ce484222325ULL;
    out->d.max_line = max_line;
    out->d.max_event = max_event;
    check(sg_sse_init(&p, cfg, &out->d, buf, need) == 0, "init");
    out->status = fz_feed_split("sse", &p, feed, body, n, sizes, n_sizes);
    check(sg_sse_end(&p, &out->clean) == 0, "end");
    check(sg_sse_feed(&p, "x", 1) == (out->status != 0 ? out->status : SG_EDONE),
          "feed after end");
    out->terminal = sg_sse_terminal_seen(&p);
    out->stats = (sg_sse_stats)SG_SSE_STATS_INIT;
    check(sg_sse_get_stats(&p, &out->stats) == 0, "stats");
    check(sg_sse_last_event_id(&p, &out->id, &out->id_len) == 0, "last id");
    check(out->id_len <= sizeof(out->id_copy), "id fits");
    memcpy(out->id_copy, out->id, out->id_len);
    check(out->stats.items == out->d.events, "items == events delivered");
    check(out->stats.comments == out->d.comments, "comments counted");
    check(out->stats.bytes <= n, "bytes counted");
    check(sg_sse_reset(&p) == 0, "reset");
    free(buf);
}

static void same(const outcome *a, const outcome *b) {
    check(a->d.hash == b->d.hash, "same events, comments, retries");
    check(a->d.events == b->d.events, "same event count");
    check(a->status == b->status, "same status");
    check(a->clean == b->clean, "same end verdict");
    check(a->terminal == b->terminal, "same terminal flag");
    check(a->stats.lines == b->stats.lines, "same line count");
    check(a->stats.bytes_after_terminal == b->stats.bytes_after_terminal,
          "same bytes after terminal");
    check(a->id_len == b->id_len && memcmp(a->id_copy, b->id_copy, a->id_len) == 0,
          "same last event id");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t lines[4] = {16, 64, 256, 4096};
    static const size_t events[4] = {1, 64, 1024, 65536};
    static outcome whole;
    static outcome split;
    static outcome bytewise;
    if (size < 9) {
        return 0;
    }
    size_t max_line = lines[data[0] & 3], max_event = events[(data[0] >> 2) & 3];
    sg_sse_config cfg;
    sg_sse_config_init(&cfg);
    check(sg_sse_config_set_max_line(&cfg, max_line) == 0 &&
              sg_sse_config_set_max_event(&cfg, max_event) == 0 &&
              sg_sse_config_set_terminal_data(&cfg, (data[0] & 16) ? "[DONE]" : NULL) ==
                  0 &&
              sg_sse_config_set_terminal_type(
                  &cfg, (data[0] & 32) ? (data[0] & 128) ? "message" : "message_stop"
                                       : NULL) == 0,
          "config");
    sg_sse_config_set_on_event(&cfg, on_event);
    sg_sse_config_set_on_comment(&cfg, on_comment);
    sg_sse_config_set_on_retry(&cfg, on_retry);
    sg_sse_config_set_on_other(&cfg, on_other);
    const uint8_t *sizes = data + 1;
    const uint8_t *body = data + 9;
    size_t n = size - 9;

    run(&cfg, max_line, max_event, body, n, NULL, 0, &whole);
    sgx_simd_limit((data[0] & 64) ? SGX_SIMD_SSE2 : 0);
    run(&cfg, max_line, max_event, body, n, sizes, 8, &split);
    sgx_simd_limit(0);
    same(&whole, &split);
    if (n <= 4096) {
        static const uint8_t one[1] = {0};
        run(&cfg, max_line, max_event, body, n, one, 1, &bytewise);
        same(&whole, &bytewise);
    }
    return 0;
}
