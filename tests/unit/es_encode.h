/*
 * Writing AWS event-stream messages as Bedrock sends them, for the tests
 * and benchmarks that feed the Bedrock profiles: a message of string
 * headers and a payload, its CRCs zlib's, and InvokeModel's chunk payload
 * ({"bytes": base64 of the model's JSON}).  Header-only; the program links
 * zlib.
 */
#ifndef SG_TEST_ES_ENCODE_H
#define SG_TEST_ES_ENCODE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <zlib.h>

static inline void es_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* A string header (type 7) @name = @value at @p; its length. */
static inline size_t es_str_header(unsigned char *p, const char *name,
                                   const char *value) {
    size_t nl = strlen(name), vl = strlen(value);
    p[0] = (unsigned char)nl;
    memcpy(p + 1, name, nl);
    p[1 + nl] = 7;
    p[2 + nl] = (unsigned char)(vl >> 8);
    p[3 + nl] = (unsigned char)vl;
    memcpy(p + 4 + nl, value, vl);
    return 4 + nl + vl;
}

/* One message at @m (room for it): the string headers @names[i] =
 * @values[i] (@nh of them), then @payload[@pl]; its length on the wire. */
static inline size_t es_message(unsigned char *m, size_t nh, const char *const *names,
                                const char *const *values, const void *payload,
                                size_t pl) {
    size_t h = 12;
    for (size_t i = 0; i < nh; i++) {
        h += es_str_header(m + h, names[i], values[i]);
    }
    memcpy(m + h, payload, pl);
    size_t total = h + pl + 4;
    es_be32(m, (uint32_t)total);
    es_be32(m + 4, (uint32_t)(h - 12));
    es_be32(m + 8, (uint32_t)crc32(0, m, 8));
    es_be32(m + total - 4, (uint32_t)crc32(0, m, (uInt)(total - 4)));
    return total;
}

/* An event message of @type carrying the JSON @payload, its headers in
 * Bedrock's order. */
static inline size_t es_event(unsigned char *m, const char *type, const char *payload) {
    const char *names[] = {":event-type", ":content-type", ":message-type"};
    const char *values[] = {type, "application/json", "event"};
    return es_message(m, 3, names, values, payload, strlen(payload));
}

/* InvokeModel's chunk payload for the model's @json into @out[@cap]:
 * {"bytes":"<base64>"}; its length (cut to @cap - 1). */
static inline size_t es_chunk_payload(const char *json, char *out, size_t cap) {
    static const char al[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(json);
    size_t o = (size_t)snprintf(out, cap, "{\"bytes\":\"");
    for (size_t i = 0; i < n && o + 6 < cap; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)json[i] << 16;
        v |= i + 1 < n ? (uint32_t)(unsigned char)json[i + 1] << 8 : 0;
        v |= i + 2 < n ? (uint32_t)(unsigned char)json[i + 2] : 0;
        out[o++] = al[v >> 18 & 63];
        out[o++] = al[v >> 12 & 63];
        out[o++] = i + 1 < n ? al[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? al[v & 63] : '=';
    }
    o += (size_t)snprintf(out + o, cap - o, "\"}");
    return o < cap ? o : cap - 1;
}

#endif
