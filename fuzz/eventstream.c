/*
 * Fuzz target for the AWS event-stream decoder.  Deterministic: the limits,
 * the read boundaries and whether the CRCs are sealed come from the input's
 * first bytes.
 *
 * Layout: byte 0 = options (bits 0-1 max_message 16 / 64 / 4096 / the
 * default, bits 2-3 max_headers the default / 8 / 64 / 1024, bit 4 "seal":
 * before decoding, every prelude CRC and message CRC the body's lengths
 * frame is rewritten to the right value, so that mutations reach the
 * length and header checks instead of stopping at a CRC); bytes 1..8 = read
 * sizes (each 1..64, cycled); the rest is the body.
 *
 * Invariants checked (abort on failure, also in the replay binary):
 *   - the body fed whole, fed in the chosen reads, and (when short) fed one
 *     byte at a time yields the same messages, headers, final status, end
 *     verdict and counters;
 *   - a feed returns its length or a negative code, never anything else;
 *   - a delivered message is within the limits, its parts add up to its
 *     length, its header block walks to its end with header_count headers,
 *     and the reserved-header views lie inside the block.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include <streamguard/framing.h>

#include "split_feed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct digest {
    uint64_t hash;
    uint64_t messages;
    size_t max_message;
    size_t max_headers;
} digest;

static void check(int ok, const char *what) {
    fz_check("eventstream", ok, what);
}

static ptrdiff_t feed(void *dec, const void *data, size_t len) {
    return sg_es_feed(dec, data, len);
}

static void mix(digest *d, const void *p, size_t n) {
    fz_mix(&d->hash, p, n);
}

static void check_view(const sg_es_message *m, const char *v, size_t n) {
    const char *lo = (const char *)m->headers;
    check((v == NULL && n == 0) || (v != NULL && v >= lo && n <= m->headers_len &&
                                    (size_t)(v - lo) <= m->headers_len - n),
          "reserved view inside the header block");
}

static int on_message(const sg_es_message *m, void *ud) {
    digest *d = ud;
    check(m->total_len >= SG_ES_MIN_MESSAGE && m->total_len <= d->max_message,
          "total within limits");
    check(m->headers_len <= d->max_headers, "headers within max_headers");
    check(m->headers_len + m->payload_len + 16 == m->total_len, "parts add up");
    check(m->payload == m->headers + m->headers_len, "payload follows the headers");
    size_t pos = 0;
    size_t count = 0;
    sg_es_header h;
    int rc;
    d->messages++;
    mix(d, "M", 1);
    while ((rc = sg_es_header_next(m, &pos, &h)) == 1) {
        count++;
        check(h.type <= SG_ES_UUID, "known type");
        mix(d, h.name, h.name_len);
        mix(d, &h.type, sizeof(h.type));
        mix(d, &h.integer, sizeof(h.integer));
        mix(d, h.value, h.value_len);
    }
    check(rc == 0 && pos == m->headers_len, "a delivered block walks to its end");
    check(count == m->header_count, "header_count");
    check_view(m, m->message_type, m->message_type_len);
    check_view(m, m->event_type, m->event_type_len);
    check_view(m, m->exception_type, m->exception_type_len);
    check_view(m, m->content_type, m->content_type_len);
    if (m->event_type != NULL) {
        check(sg_es_header_find(m, ":event-type", 11, &h) == 1 &&
                  h.value == (const unsigned char *)m->event_type,
              "find agrees with the event-type view");
    }
    mix(d, m->payload, m->payload_len);
    mix(d, &m->message_crc, sizeof(m->message_crc));
    return 0;
}

typedef struct outcome {
    digest d;
    ptrdiff_t status; /* first negative feed result, or 0 */
    bool clean;
    sg_es_stats stats;
} outcome;

/* Feeds @body in reads of the sizes in @sizes (cycled; NULL = one read). */
/* @cfg's limits are @max_message and @max_headers (0: the defaults). */
static void run(const sg_es_config *cfg, size_t max_message, size_t max_headers,
                const uint8_t *body, size_t n, const uint8_t *sizes, size_t n_sizes,
                outcome *out) {
    /* An exact-size buffer, so the sanitizers see a write past it; the
     * default's 16 MiB one is made once (a fresh one per run would cost
     * more than the decode). */
    static unsigned char *default_buf;
    size_t need = sg_es_buffer_size(cfg);
    check(need > 0, "buffer size");
    bool is_default = need == sg_es_buffer_size(NULL);
    if (is_default && default_buf == NULL) {
        default_buf = malloc(need);
    }
    unsigned char *buf = is_default ? default_buf : malloc(need);
    check(buf != NULL, "malloc");
    sg_es_decoder dec;
    memset(out, 0, sizeof(*out));
    out->d.hash = 0xcbf29ce484222325ULL;
    out->d.max_message = max_message != 0 ? max_message : SG_ES_MAX_MESSAGE;
    out->d.max_headers = max_headers != 0 ? max_headers : SG_ES_MAX_HEADERS;
    check(sg_es_init(&dec, cfg, &out->d, buf, need) == 0, "init");
    out->status = fz_feed_split("eventstream", &dec, feed, body, n, sizes, n_sizes);
    check(sg_es_end(&dec, &out->clean) == 0, "end");
    check(!out->clean || out->status == 0, "an error is never a clean end");
    check(sg_es_feed(&dec, "x", 1) == (out->status != 0 ? out->status : SG_EDONE),
          "feed after end");
    out->stats = (sg_es_stats)SG_ES_STATS_INIT;
    check(sg_es_get_stats(&dec, &out->stats) == 0, "stats");
    check(out->stats.messages == out->d.messages, "messages == delivered");
    check(out->stats.bytes <= n, "bytes counted");
    check(sg_es_reset(&dec) == 0, "reset");
    if (!is_default) {
        free(buf);
    }
}

static void same(const outcome *a, const outcome *b) {
    check(a->d.hash == b->d.hash, "same messages and headers");
    check(a->d.messages == b->d.messages, "same message count");
    check(a->status == b->status, "same status");
    check(a->clean == b->clean, "same end verdict");
}

static void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* Rewrites the CRCs of every message the lengths frame, as far as they go. */
static void seal(uint8_t *b, size_t n) {
    size_t off = 0;
    while (n - off >= 12) {
        uint8_t *m = b + off;
        uint32_t total =
            (uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 | (uint32_t)m[2] << 8 | m[3];
        put_be32(m + 8, (uint32_t)crc32(0, m, 8));
        if (total < 16 || total > n - off) {
            return;
        }
        put_be32(m + total - 4, (uint32_t)crc32(0, m, total - 4));
        off += total;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const size_t messages[4] = {16, 64, 4096, 0};
    static const size_t headers[4] = {0, 8, 64, 1024};
    static outcome whole;
    static outcome split;
    static outcome bytewise;
    if (size < 9) {
        return 0;
    }
    size_t max_message = messages[data[0] & 3], max_headers = headers[(data[0] >> 2) & 3];
    sg_es_config cfg;
    sg_es_config_init(&cfg);
    check(sg_es_config_set_max_message(&cfg, max_message) == 0 &&
              sg_es_config_set_max_headers(&cfg, max_headers) == 0,
          "config");
    sg_es_config_set_on_message(&cfg, on_message);
    const uint8_t *sizes = data + 1;
    size_t n = size - 9;
    uint8_t *body = malloc(n > 0 ? n : 1);
    check(body != NULL, "malloc");
    memcpy(body, data + 9, n);
    if (data[0] & 16) {
        seal(body, n);
    }

    run(&cfg, max_message, max_headers, body, n, NULL, 0, &whole);
    run(&cfg, max_message, max_headers, body, n, sizes, 8, &split);
    same(&whole, &split);
    if (n <= 4096) {
        static const uint8_t one[1] = {0};
        run(&cfg, max_message, max_headers, body, n, one, 1, &bytewise);
        same(&whole, &bytewise);
    }
    free(body);
    return 0;
}
