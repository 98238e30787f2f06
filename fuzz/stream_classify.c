/*
 * Fuzz target for sg_stream with a classifier (what provider profiles
 * supply): items held before the first token, keepalives, the end item.
 * Deterministic: configuration, read sizes and time come from the input.
 *
 * Layout: byte 0 = options (bit 0 NDJSON, bit 1 meta_at_once, bit 2
 * end_required, bits 3-4 max_event 64/256/1024/4096, bit 5 end_at_eof);
 * bytes 1..8 = read sizes (1..64, cycled); the rest is the body.  An item
 * whose data starts with 'm' is metadata, 'k' a keepalive, 'e' the end,
 * 'f' content that is the end too, 'x' an in-band error, anything else a
 * token.  Each read advances the hand-driven clock by 1 ms.
 *
 * Invariants (abort on failure, also in the replay binary):
 *   - the body fed whole and in the chosen reads delivers the same items
 *     in the same order, and ends the same way - with a lent buffer, and
 *     with buffers that grow as used (sg_stream_init_mem), which never
 *     hold more than the lent buffer's size and hold nothing after the
 *     end;
 *   - nothing is delivered before the first token unless meta_at_once; a
 *     keepalive is never delivered; item indexes count up from 0;
 *   - the stream's verdict is one of ok, truncated, protocol_error,
 *     first_item_timeout, and an ok end with end_required came with an end
 *     item;
 *   - a time to first token is reported exactly when content was
 *     delivered (a token, an end that carries content, metadata at once)
 *     before any plain end: an end is no token.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/streamguard.h>

#include "count_mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/stream_classify invariant failed: %s\n", what);
        abort();
    }
}

typedef struct run_state {
    uint64_t hash;
    uint64_t delivered;
    bool token_seen; /* a token or end was delivered */
    bool end_seen;
    bool content_seen; /* content delivered before any plain end */
    bool at_once;
} run_state;

static sg_item_kind classify(const sg_item *item, sg_item_error *err, void *ud) {
    (void)ud;
    char c = item->data_len > 0 ? item->data[0] : 't';
    if (c == 'x') { /* an in-band error: the rest of the data is its message */
        err->type = "fuzz";
        err->type_len = 4;
        err->message = item->data + 1;
        err->message_len = item->data_len - 1;
        return SG_ITEM_ERROR;
    }
    return c == 'm'   ? SG_ITEM_META
           : c == 'k' ? SG_ITEM_KEEPALIVE
           : c == 'e' ? SG_ITEM_END
           : c == 'f' ? SG_ITEM_END_TOKEN
                      : SG_ITEM_TOKEN;
}

static int on_item(const sg_item *item, void *ud) {
    run_state *r = ud;
    sg_item_error err;
    sg_item_kind k = classify(item, &err, NULL);
    check(k != SG_ITEM_KEEPALIVE, "a keepalive is never delivered");
    check(k != SG_ITEM_ERROR, "an error item is never delivered");
    check(item->index == r->delivered, "indexes count up from 0");
    check(item->kind == (uint8_t)k, "the item says its kind");
    if (!r->end_seen && (k == SG_ITEM_TOKEN || k == SG_ITEM_END_TOKEN ||
                         (k == SG_ITEM_META && r->at_once && !r->token_seen))) {
        r->content_seen = true;
    }
    if (k != SG_ITEM_META || r->at_once) {
        r->token_seen = true;
    }
    if (k == SG_ITEM_END || k == SG_ITEM_END_TOKEN) {
        r->end_seen = true;
    }
    r->delivered++;
    for (size_t i = 0; i < item->data_len; i++) {
        r->hash = (r->hash ^ (unsigned char)item->data[i]) * 0x100000001b3ULL;
    }
    r->hash = (r->hash ^ item->data_len) * 0x100000001b3ULL;
    return 0;
}

typedef struct verdict {
    run_state r;
    sg_outcome outcome;
    uint64_t items;
} verdict;

static void run(uint8_t opt, const uint8_t *sizes, size_t n_sizes, const uint8_t *body,
                size_t n, bool grow, verdict *out) {
    static const size_t events[4] = {64, 256, 1024, 4096};
    bool at_once = (opt & 2) != 0, end_required = (opt & 4) != 0;
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    check(sg_stream_config_set_format(&cfg, (opt & 1) ? SG_FORMAT_NDJSON
                                                      : SG_FORMAT_SSE) == 0 &&
              sg_stream_config_set_max_line(&cfg, 4096) == 0 &&
              sg_stream_config_set_max_event(&cfg, events[(opt >> 3) & 3]) == 0 &&
              sg_stream_config_set_classifier(&cfg, classify, NULL) == 0 &&
              sg_stream_config_set_meta_at_once(&cfg, at_once) == 0 &&
              sg_stream_config_set_end_required(&cfg, end_required) == 0 &&
              sg_stream_config_set_end_at_eof(&cfg, (opt & 32) != 0) == 0,
          "config");
    size_t need = sg_stream_buffer_size(&cfg);
    check(need > 0, "buffer size");
    char *buf = grow ? NULL : malloc(need);
    check(grow || buf != NULL, "malloc");
    memset(out, 0, sizeof(*out));
    out->r.at_once = at_once;
    sg_stream s;
    count_mem mem = {0, 0, 0};
    sg_mem m;
    sg_mem_init(&m, count_mem_resize, &mem);
    check((grow ? sg_stream_init_mem(&s, &cfg, on_item, &out->r, &m)
                : sg_stream_init(&s, &cfg, on_item, &out->r, buf, need)) == 0,
          "init");
    sg_guard_config g;
    sg_guard_config_init(&g);
    sg_guard_config_set_first_item_timeout(&g,
                                           SG_SEC(10)); /* never fires: 1 ms per read */
    int64_t now = SG_SEC(1);
    check(sg_stream_begin(&s, &g, NULL, 1, now) == 0, "begin");
    sg_guard_set_phase(sg_stream_guard(&s), SG_PHASE_WAIT_FIRST_ITEM, now);
    size_t off = 0, k = 0;
    while (off < n) {
        size_t len = sizes == NULL ? n : (size_t)(sizes[k++ % n_sizes] % 64) + 1;
        len = len < n - off ? len : n - off;
        char *chunk = malloc(len); /* exact size: ASan sees an over-read */
        memcpy(chunk, body + off, len);
        now += SG_MS(1);
        int rv = sg_stream_feed(&s, chunk, len, now);
        free(chunk);
        off += len;
        if (!out->r.token_seen && !out->r.at_once) {
            check(out->r.delivered == 0, "nothing delivered before the first token");
        }
        if (rv != 0) {
            break;
        }
    }
    sg_guard_result res;
    check(sg_stream_end(&s, now, SG_OUTCOME_OK, &res) == 0, "end");
    out->outcome = res.outcome;
    out->items = res.items;
    check(res.outcome == SG_OUTCOME_OK || res.outcome == SG_OUTCOME_TRUNCATED ||
              res.outcome == SG_OUTCOME_PROTOCOL_ERROR ||
              res.outcome == SG_OUTCOME_PROVIDER_ERROR,
          "a known verdict");
    const char *msg = NULL;
    if (sg_stream_provider_error(&s, NULL, &msg, NULL)) {
        check(res.outcome == SG_OUTCOME_PROVIDER_ERROR,
              "an error item is provider_error");
        check(strlen(msg) <= SG_STREAM_ERROR_MESSAGE_MAX, "the message is bounded");
    }
    if (res.outcome == SG_OUTCOME_OK && end_required) {
        check(out->r.end_seen, "ok with end_required means an end item");
    }
    check((res.first_item_ns >= 0) == out->r.content_seen,
          "a time to first token exactly when content was delivered");
    check(mem.live == 0, "a growing stream holds nothing after its end");
    check(mem.peak <= need, "a growing stream holds at most the lent buffer's size");
    sg_stream_release(&s);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 9 || size > 65536) {
        return 0;
    }
    verdict whole, split, grown;
    run(data[0], NULL, 0, data + 9, size - 9, false, &whole);
    run(data[0], data + 1, 8, data + 9, size - 9, false, &split);
    run(data[0], data + 1, 8, data + 9, size - 9, true, &grown);
    check(whole.r.hash == split.r.hash && whole.r.delivered == split.r.delivered,
          "the same items whatever the reads");
    check(whole.outcome == split.outcome, "the same verdict whatever the reads");
    check(whole.r.hash == grown.r.hash && whole.r.delivered == grown.r.delivered &&
              whole.outcome == grown.outcome,
          "growing buffers give what the lent buffer gives");
    return 0;
}
