/*
 * The AWS event-stream encoder (application/vnd.amazon.eventstream), as
 * smithy.io's "Amazon Event Stream" specifies a message:
 *
 *   total length   u32 big-endian   the whole message, these 4 bytes included
 *   headers length u32 big-endian
 *   prelude CRC    u32 big-endian   CRC32 of the 8 bytes above
 *   headers        name length u8, name, value type u8, value
 *                  (type 7, a string: u16 big-endian length, bytes)
 *   payload
 *   message CRC    u32 big-endian   CRC32 of every byte before it
 *
 * The CRC is zlib's crc32 (the IEEE 802.3 polynomial the format names),
 * never one written here.  Only string headers are written: Bedrock's
 * streams carry nothing else.
 */
#include "eventstream.h"

#include <stdint.h>
#include <string.h>
#include <zlib.h>

static void put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t crc_of(uint32_t crc, const unsigned char *p, size_t n) {
    /* zlib takes uInt lengths: feed a large payload in pieces */
    while (n > 0) {
        uInt step = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, step);
        p += step;
        n -= step;
    }
    return crc;
}

size_t sg_fm_es_headers_len(const sg_fm_es_header *h, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        len += 1 + strlen(h[i].name) + 1 + 2 + strlen(h[i].value);
    }
    return len;
}

size_t sg_fm_es_message_len(const sg_fm_es_header *h, size_t n, size_t payload_len) {
    return 12 + sg_fm_es_headers_len(h, n) + payload_len + 4;
}

int sg_fm_es_message(sg_fm_buf *out, const sg_fm_es_header *h, size_t n,
                     const char *payload, size_t payload_len, sg_fm_es_damage damage) {
    size_t hlen = sg_fm_es_headers_len(h, n);
    size_t total = 12 + hlen + payload_len + 4;
    if (total > UINT32_MAX || sg_fm_buf_reserve(out, total) != 0) {
        return -1;
    }
    unsigned char *start = (unsigned char *)sg_fm_buf_data(out) + out->len;
    unsigned char *p = start;
    put_u32(p, (uint32_t)total);
    put_u32(p + 4, (uint32_t)hlen);
    uint32_t prelude_crc = crc_of((uint32_t)crc32(0L, Z_NULL, 0), p, 8);
    if (damage == SG_FM_ES_BAD_PRELUDE_CRC) {
        prelude_crc ^= 0x1u;
    }
    put_u32(p + 8, prelude_crc);
    p += 12;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(h[i].name);
        size_t vl = strlen(h[i].value);
        *p++ = (unsigned char)nl;
        memcpy(p, h[i].name, nl);
        p += nl;
        *p++ = 7; /* string */
        *p++ = (unsigned char)(vl >> 8);
        *p++ = (unsigned char)vl;
        memcpy(p, h[i].value, vl);
        p += vl;
    }
    if (payload_len > 0) {
        memcpy(p, payload, payload_len);
        p += payload_len;
    }
    /* The message CRC covers the prelude CRC as sent: a damaged prelude
     * CRC alone leaves this one valid, so each variant is one fault. */
    uint32_t msg_crc = crc_of((uint32_t)crc32(0L, Z_NULL, 0), start, (size_t)(p - start));
    if (damage == SG_FM_ES_BAD_MESSAGE_CRC) {
        msg_crc ^= 0x1u;
    }
    put_u32(p, msg_crc);
    out->len += total;
    return 0;
}
