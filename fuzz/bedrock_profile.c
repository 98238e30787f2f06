/*
 * Fuzz target for the Bedrock profiles through sg_stream: event-stream
 * messages built from the input (so that most pass the CRCs and reach the
 * classifiers: ConverseStream's event types, InvokeModelWithResponseStream's
 * base64 chunks and the model JSON inside them, exception and error
 * messages), fed whole and in reads whose sizes come from the input.
 *
 * Layout: byte 0 = options (bit 0 bedrock-invoke, else bedrock-converse;
 * bit 1 a damaged CRC in the last message); bytes 1..8 = read sizes
 * (1..64, cycled); the rest is records: a kind byte (0-7: an event type of
 * the table below; 8 exception; 9 error; 10 a chunk whose payload is
 * {"bytes":"<base64 of the record>"}; else an event whose type is the
 * record), a length byte, then that many bytes of payload.
 *
 * Invariants (abort on failure, also in the replay binary):
 *   - fed whole and fed in the chosen reads, the stream delivers the same
 *     items (kinds, types, payloads) and ends the same way;
 *   - item indexes count up from 0, and nothing is delivered after the end
 *     item but what end_at_eof lets through;
 *   - the verdict is one of ok, truncated, protocol_error, provider_error,
 *     and a provider error says so (sg_stream_provider_error);
 *   - the profile reads the same usage (figures, text) whole and split.
 *
 * sg-parts: eventstream (the Bedrock profiles read event streams)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include <streamguard/streamguard.h>

#include "framing/usage.h"
#include "split_feed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    fz_check("bedrock_profile", ok, what);
}

static const char *const event_types[] = {
    "messageStart",
    "contentBlockStart",
    "contentBlockDelta",
    "contentBlockStop",
    "messageStop",
    "metadata",
    "chunk",
    "",
};

typedef struct body {
    unsigned char *b;
    size_t n, cap;
} body;

static void put(body *w, const void *p, size_t n) {
    if (w->n + n > w->cap) {
        size_t cap = (w->cap + n) * 2;
        unsigned char *nb = realloc(w->b, cap);
        check(nb != NULL, "out of memory");
        w->b = nb;
        w->cap = cap;
    }
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void header(unsigned char *h, size_t *hl, const char *name, const char *v,
                   size_t vl) {
    size_t nl = strlen(name);
    h[(*hl)++] = (unsigned char)nl;
    memcpy(h + *hl, name, nl);
    *hl += nl;
    h[(*hl)++] = 7;
    h[(*hl)++] = (unsigned char)(vl >> 8);
    h[(*hl)++] = (unsigned char)vl;
    memcpy(h + *hl, v, vl);
    *hl += vl;
}

/* One message: :message-type @mtype, then @name2 = @v2, then @payload. */
static void message(body *w, const char *mtype, const char *name2, const char *v2,
                    size_t v2len, const void *payload, size_t plen, bool damage) {
    unsigned char h[600];
    size_t hl = 0;
    header(h, &hl, ":message-type", mtype, strlen(mtype));
    header(h, &hl, name2, v2, v2len);
    unsigned char pre[12];
    uint32_t total = (uint32_t)(12 + hl + plen + 4);
    be32(pre, total);
    be32(pre + 4, (uint32_t)hl);
    be32(pre + 8, (uint32_t)crc32(0, pre, 8));
    uLong crc = crc32(0, pre, 12);
    crc = crc32(crc, h, (uInt)hl);
    crc = crc32(crc, payload, (uInt)plen);
    unsigned char tail[4];
    be32(tail, (uint32_t)crc ^ (damage ? 1u : 0u));
    put(w, pre, 12);
    put(w, h, hl);
    put(w, payload, plen);
    put(w, tail, 4);
}

static void base64(const uint8_t *p, size_t n, char *out) {
    static const char al[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        v |= i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0;
        v |= i + 2 < n ? (uint32_t)p[i + 2] : 0;
        out[o++] = al[v >> 18 & 63];
        out[o++] = al[v >> 12 & 63];
        out[o++] = i + 1 < n ? al[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? al[v & 63] : '=';
    }
    out[o] = '\0';
}

/* The body the records describe. */
static void build(body *w, const uint8_t *p, size_t n, bool damage_last) {
    size_t i = 0;
    while (i + 2 <= n) {
        uint8_t kind = p[i];
        size_t len = p[i + 1];
        const uint8_t *pl = p + i + 2;
        len = len < n - i - 2 ? len : n - i - 2;
        i += 2 + len;
        bool last = i + 2 > n;
        bool damage = damage_last && last;
        if (kind < 8) {
            const char *t = event_types[kind];
            message(w, "event", ":event-type", t, strlen(t), pl, len, damage);
        } else if (kind == 8) {
            message(w, "exception", ":exception-type", "throttlingException", 19, pl, len,
                    damage);
        } else if (kind == 9) {
            message(w, "error", ":error-code", (const char *)pl, len < 64 ? len : 64, "",
                    0, damage);
        } else if (kind == 10) {
            char payload[16 + 4 * 86 + 8];
            strcpy(payload, "{\"bytes\":\"");
            base64(pl, len, payload + strlen(payload));
            strcat(payload, "\"}");
            message(w, "event", ":event-type", "chunk", 5, payload, strlen(payload),
                    damage);
        } else {
            message(w, "event", ":event-type", (const char *)pl, len < 64 ? len : 64, pl,
                    len, damage);
        }
    }
}

typedef struct run_state {
    uint64_t hash;
    uint64_t next_index;
    uint64_t delivered;
} run_state;

static int on_item(const sg_item *item, void *ud) {
    run_state *r = ud;
    check(item->index == r->next_index, "item indexes count up from 0");
    r->next_index++;
    r->delivered++;
    fz_mix(&r->hash, &item->kind, 1);
    fz_mix(&r->hash, item->event, item->event_len);
    fz_mix(&r->hash, item->data, item->data_len);
    return 0;
}

typedef struct verdict {
    sg_outcome outcome;
    uint64_t hash;
    uint64_t delivered;
    sg__usage_read usage; /* what the profile read of the attempt's usage */
} verdict;

static verdict play(const char *profile, const body *w, const uint8_t *sizes,
                    size_t nsz) {
    sg_stream_config cfg;
    sg_stream_config_init(&cfg); /* the profile leaves the limits as they are */
    check(sg_profile_framing(profile, &cfg) == 0, "the profile exists");
    check(sg_stream_config_set_max_event(&cfg, 4096) == 0, "max_event");
    size_t bn = sg_stream_buffer_size(&cfg);
    void *buf = malloc(bn);
    check(buf != NULL, "out of memory");
    run_state r;
    memset(&r, 0, sizeof(r));
    r.hash = 0xcbf29ce484222325ULL;
    sg_stream s;
    check(sg_stream_init(&s, &cfg, on_item, &r, buf, bn) == 0, "init");
    sg_guard_config g;
    sg_guard_config_init(&g);
    check(sg_stream_begin(&s, &g, NULL, 1, 0) == 0, "begin");
    size_t off = 0;
    size_t k = 0;
    int64_t now = 0;
    while (off < w->n) {
        size_t len = w->n - off;
        if (sizes != NULL) {
            size_t want = (size_t)(sizes[k++ % nsz] % 64) + 1;
            len = want < len ? want : len;
        }
        int rv = sg_stream_feed(&s, w->b + off, len, now += SG_MS(1));
        off += len;
        if (rv != 0) {
            break;
        }
    }
    sg_guard_result gr;
    check(sg_stream_end(&s, now + 1, SG_OUTCOME_OK, &gr) == 0, "end");
    const char *type = NULL;
    if (gr.outcome == SG_OUTCOME_PROVIDER_ERROR) {
        check(sg_stream_provider_error(&s, &type, NULL, NULL) && type != NULL,
              "a provider error has a type");
    }
    check(gr.outcome == SG_OUTCOME_OK || gr.outcome == SG_OUTCOME_TRUNCATED ||
              gr.outcome == SG_OUTCOME_PROTOCOL_ERROR ||
              gr.outcome == SG_OUTCOME_PROVIDER_ERROR,
          "the verdict is ok, truncated, protocol_error or provider_error");
    verdict v = {gr.outcome, r.hash, r.delivered, {0, 0, 0, 0, 0}};
    check(sg__stream_usage(sg__stream_of(&s), &v.usage), "the profile reads usage");
    free(buf);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 9) {
        return 0;
    }
    const char *profile = (data[0] & 1) ? "bedrock-invoke" : "bedrock-converse";
    body w = {NULL, 0, 0};
    build(&w, data + 9, size - 9, (data[0] & 2) != 0);
    verdict whole = play(profile, &w, NULL, 0);
    verdict split = play(profile, &w, data + 1, 8);
    check(whole.outcome == split.outcome, "the same verdict whole and split");
    check(whole.hash == split.hash && whole.delivered == split.delivered,
          "the same items whole and split");
    check(memcmp(&whole.usage, &split.usage, sizeof(whole.usage)) == 0,
          "the same usage whole and split");
    free(w.b);
    return 0;
}
