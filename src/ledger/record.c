/*
 * The ledger's record codec and file scanner: CRC32C, encoding, decoding
 * with full validation, and a scanner that skips corruption without ever
 * reading an invalid record.  No locking and no state: the ledger, the tests
 * and the fuzz target drive it.
 */
#define _GNU_SOURCE
#include "ledger/internal.h"
#include "core/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78): better error
 * detection than CRC32 at the same cost, the checksum of iSCSI, ext4
 * metadata and LevelDB's log.  Table-driven, one byte per step: records are
 * small, so the table beats a slicing variant's cache footprint. */
static const uint32_t crc32c_table[256] = {
    0x00000000u, 0xf26b8303u, 0xe13b70f7u, 0x1350f3f4u, 0xc79a971fu, 0x35f1141cu,
    0x26a1e7e8u, 0xd4ca64ebu, 0x8ad958cfu, 0x78b2dbccu, 0x6be22838u, 0x9989ab3bu,
    0x4d43cfd0u, 0xbf284cd3u, 0xac78bf27u, 0x5e133c24u, 0x105ec76fu, 0xe235446cu,
    0xf165b798u, 0x030e349bu, 0xd7c45070u, 0x25afd373u, 0x36ff2087u, 0xc494a384u,
    0x9a879fa0u, 0x68ec1ca3u, 0x7bbcef57u, 0x89d76c54u, 0x5d1d08bfu, 0xaf768bbcu,
    0xbc267848u, 0x4e4dfb4bu, 0x20bd8edeu, 0xd2d60dddu, 0xc186fe29u, 0x33ed7d2au,
    0xe72719c1u, 0x154c9ac2u, 0x061c6936u, 0xf477ea35u, 0xaa64d611u, 0x580f5512u,
    0x4b5fa6e6u, 0xb93425e5u, 0x6dfe410eu, 0x9f95c20du, 0x8cc531f9u, 0x7eaeb2fau,
    0x30e349b1u, 0xc288cab2u, 0xd1d83946u, 0x23b3ba45u, 0xf779deaeu, 0x05125dadu,
    0x1642ae59u, 0xe4292d5au, 0xba3a117eu, 0x4851927du, 0x5b016189u, 0xa96ae28au,
    0x7da08661u, 0x8fcb0562u, 0x9c9bf696u, 0x6ef07595u, 0x417b1dbcu, 0xb3109ebfu,
    0xa0406d4bu, 0x522bee48u, 0x86e18aa3u, 0x748a09a0u, 0x67dafa54u, 0x95b17957u,
    0xcba24573u, 0x39c9c670u, 0x2a993584u, 0xd8f2b687u, 0x0c38d26cu, 0xfe53516fu,
    0xed03a29bu, 0x1f682198u, 0x5125dad3u, 0xa34e59d0u, 0xb01eaa24u, 0x42752927u,
    0x96bf4dccu, 0x64d4cecfu, 0x77843d3bu, 0x85efbe38u, 0xdbfc821cu, 0x2997011fu,
    0x3ac7f2ebu, 0xc8ac71e8u, 0x1c661503u, 0xee0d9600u, 0xfd5d65f4u, 0x0f36e6f7u,
    0x61c69362u, 0x93ad1061u, 0x80fde395u, 0x72966096u, 0xa65c047du, 0x5437877eu,
    0x4767748au, 0xb50cf789u, 0xeb1fcbadu, 0x197448aeu, 0x0a24bb5au, 0xf84f3859u,
    0x2c855cb2u, 0xdeeedfb1u, 0xcdbe2c45u, 0x3fd5af46u, 0x7198540du, 0x83f3d70eu,
    0x90a324fau, 0x62c8a7f9u, 0xb602c312u, 0x44694011u, 0x5739b3e5u, 0xa55230e6u,
    0xfb410cc2u, 0x092a8fc1u, 0x1a7a7c35u, 0xe811ff36u, 0x3cdb9bddu, 0xceb018deu,
    0xdde0eb2au, 0x2f8b6829u, 0x82f63b78u, 0x709db87bu, 0x63cd4b8fu, 0x91a6c88cu,
    0x456cac67u, 0xb7072f64u, 0xa457dc90u, 0x563c5f93u, 0x082f63b7u, 0xfa44e0b4u,
    0xe9141340u, 0x1b7f9043u, 0xcfb5f4a8u, 0x3dde77abu, 0x2e8e845fu, 0xdce5075cu,
    0x92a8fc17u, 0x60c37f14u, 0x73938ce0u, 0x81f80fe3u, 0x55326b08u, 0xa759e80bu,
    0xb4091bffu, 0x466298fcu, 0x1871a4d8u, 0xea1a27dbu, 0xf94ad42fu, 0x0b21572cu,
    0xdfeb33c7u, 0x2d80b0c4u, 0x3ed04330u, 0xccbbc033u, 0xa24bb5a6u, 0x502036a5u,
    0x4370c551u, 0xb11b4652u, 0x65d122b9u, 0x97baa1bau, 0x84ea524eu, 0x7681d14du,
    0x2892ed69u, 0xdaf96e6au, 0xc9a99d9eu, 0x3bc21e9du, 0xef087a76u, 0x1d63f975u,
    0x0e330a81u, 0xfc588982u, 0xb21572c9u, 0x407ef1cau, 0x532e023eu, 0xa145813du,
    0x758fe5d6u, 0x87e466d5u, 0x94b49521u, 0x66df1622u, 0x38cc2a06u, 0xcaa7a905u,
    0xd9f75af1u, 0x2b9cd9f2u, 0xff56bd19u, 0x0d3d3e1au, 0x1e6dcdeeu, 0xec064eedu,
    0xc38d26c4u, 0x31e6a5c7u, 0x22b65633u, 0xd0ddd530u, 0x0417b1dbu, 0xf67c32d8u,
    0xe52cc12cu, 0x1747422fu, 0x49547e0bu, 0xbb3ffd08u, 0xa86f0efcu, 0x5a048dffu,
    0x8ecee914u, 0x7ca56a17u, 0x6ff599e3u, 0x9d9e1ae0u, 0xd3d3e1abu, 0x21b862a8u,
    0x32e8915cu, 0xc083125fu, 0x144976b4u, 0xe622f5b7u, 0xf5720643u, 0x07198540u,
    0x590ab964u, 0xab613a67u, 0xb831c993u, 0x4a5a4a90u, 0x9e902e7bu, 0x6cfbad78u,
    0x7fab5e8cu, 0x8dc0dd8fu, 0xe330a81au, 0x115b2b19u, 0x020bd8edu, 0xf0605beeu,
    0x24aa3f05u, 0xd6c1bc06u, 0xc5914ff2u, 0x37faccf1u, 0x69e9f0d5u, 0x9b8273d6u,
    0x88d28022u, 0x7ab90321u, 0xae7367cau, 0x5c18e4c9u, 0x4f48173du, 0xbd23943eu,
    0xf36e6f75u, 0x0105ec76u, 0x12551f82u, 0xe03e9c81u, 0x34f4f86au, 0xc69f7b69u,
    0xd5cf889du, 0x27a40b9eu, 0x79b737bau, 0x8bdcb4b9u, 0x988c474du, 0x6ae7c44eu,
    0xbe2da0a5u, 0x4c4623a6u, 0x5f16d052u, 0xad7d5351u,
};

uint32_t sg__crc32c(uint32_t crc, const void *p, size_t n) {
    const uint8_t *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc = crc32c_table[(crc ^ b[i]) & 0xFFu] ^ (crc >> 8);
    }
    return ~crc;
}

/* ------------------------------------------------------------ field checks */

int sg__ledger_check_key(const char *s, size_t len) {
    if (len == 0) {
        return SG_EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7E) {
            return SG_EINVAL;
        }
    }
    return len > SG_LEDGER_KEY_MAX ? SG_ERANGE : 0;
}

int sg__ledger_check_method(const char *s, size_t len) {
    if (len == 0) {
        return SG_EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        if (!sg__tchar((unsigned char)s[i])) {
            return SG_EINVAL;
        }
    }
    return len > SG_LEDGER_METHOD_MAX ? SG_ERANGE : 0;
}

/* No control byte, no space: the unresolved listing separates fields with
 * spaces, and 0x1E (the magic's first byte) must never occur in a field. */
int sg__ledger_check_url(const char *s, size_t len) {
    if (len == 0) {
        return SG_EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7F) {
            return SG_EINVAL;
        }
    }
    return len > SG_LEDGER_URL_MAX ? SG_ERANGE : 0;
}

int sg__ledger_check_note(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7F) {
            return SG_EINVAL;
        }
    }
    return len > SG_LEDGER_NOTE_MAX ? SG_ERANGE : 0;
}

/* ---------------------------------------------------------------- encoding */

typedef struct wbuf {
    uint8_t *p;
    size_t len;
    size_t cap;
} wbuf;

static void put(wbuf *w, const void *src, size_t n) {
    /* Callers size-check the fields first; this is the last line. */
    if (w->len + n <= w->cap) {
        memcpy(w->p + w->len, src, n);
    }
    w->len += n;
}

static void put_u8(wbuf *w, uint8_t v) {
    put(w, &v, 1);
}

static void put_u16(wbuf *w, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(w, b, 2);
}

static void put_u32(wbuf *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
                    (uint8_t)(v >> 24)};
    put(w, b, 4);
}

static void put_u64(wbuf *w, uint64_t v) {
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

static uint32_t get_u32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

/* One record of @rec->type into @buf[@cap]: its size, or SG_EINVAL /
 * SG_ERANGE. */
static int encode_one(const sg__ledger_rec *rec, uint8_t *buf, size_t cap) {
    int rv = 0;
    wbuf w = {buf, SG__LEDGER_HDR, cap};
    put_u64(&w, (uint64_t)rec->wall_ns);
    put_u8(&w, (uint8_t)rec->key_len);
    put(&w, rec->key, rec->key_len);
    switch (rec->type) {
    case SG__LREC_INTENT:
        if ((rv = sg__ledger_check_method(rec->method, rec->method_len)) != 0 ||
            (rv = sg__ledger_check_url(rec->url, rec->url_len)) != 0) {
            return rv;
        }
        put_u32(&w, (uint32_t)rec->pid);
        put_u8(&w, (uint8_t)rec->method_len);
        put(&w, rec->method, rec->method_len);
        put_u16(&w, (uint16_t)rec->url_len);
        put(&w, rec->url, rec->url_len);
        break;
    case SG__LREC_ATTEMPT:
        put_u32(&w, rec->n);
        put_u8(&w, rec->outcome);
        put_u8(&w, rec->phase);
        put_u8(&w, rec->flags);
        put_u16(&w, rec->http_status);
        break;
    case SG__LREC_RESOLVE:
        put_u8(&w, rec->resolution);
        put_u8(&w, rec->outcome);
        break;
    case SG__LREC_RECONCILE:
        if ((rv = sg__ledger_check_note(rec->note, rec->note_len)) != 0) {
            return rv;
        }
        put_u16(&w, (uint16_t)rec->note_len);
        put(&w, rec->note, rec->note_len);
        break;
    case SG__LREC_USAGE:
        put_u32(&w, rec->n);
        put_u8(&w, rec->usage_source);
        for (int k = 0; k < 4; k++) {
            put_u64(&w, (uint64_t)(rec->usage[k] >= 0 ? rec->usage[k] : -1));
        }
        break;
    default:
        return SG_EINVAL;
    }
    size_t payload = w.len - SG__LEDGER_HDR;
    if (w.len > cap || payload > SG__LEDGER_PAYLOAD_MAX) {
        return SG_ERANGE;
    }
    buf[0] = SG__LEDGER_MAGIC0;
    buf[1] = 'S';
    buf[2] = 'G';
    buf[3] = 'L';
    buf[4] = SG__LEDGER_VERSION;
    buf[5] = rec->type;
    buf[6] = 0;
    buf[7] = 0;
    wbuf h = {buf + 8, 0, 8};
    put_u32(&h, (uint32_t)payload);
    uint32_t crc = sg__crc32c(0, buf, 12);
    crc = sg__crc32c(crc, buf + SG__LEDGER_HDR, payload);
    put_u32(&h, crc);
    return (int)w.len;
}

void sg__ledger_rec_usage(sg__ledger_rec *r, const sg_op_usage *u) {
    r->usage_source = 0;
    for (int k = 0; k < 4; k++) {
        r->usage[k] = -1;
    }
    if (u == NULL || (u->source != SG_USAGE_PROVIDER && u->source != SG_USAGE_ESTIMATE)) {
        return;
    }
    r->usage_source = (uint8_t)u->source;
    const int64_t v[4] = {u->input_tokens, u->output_tokens, u->cached_input_tokens,
                          u->reasoning_tokens};
    for (int k = 0; k < 4; k++) {
        r->usage[k] = v[k] >= 0 ? v[k] : -1;
    }
}

int sg__ledger_encode(const sg__ledger_rec *rec, uint8_t *buf, size_t cap) {
    int rv = sg__ledger_check_key(rec->key, rec->key_len);
    if (rv != 0) {
        return rv;
    }
    if (cap < SG__LEDGER_REC_MAX) {
        return SG_ENOBUFS;
    }
    if (rec->type == SG__LREC_USAGE) {
        return SG_EINVAL; /* written only after its attempt */
    }
    int n = encode_one(rec, buf, cap);
    if (n < 0 || rec->type != SG__LREC_ATTEMPT || rec->usage_source == 0) {
        return n;
    }
    /* the attempt's usage, in a record of its own right after it (one
     * write): a reader that knows no usage skips it and keeps the attempt */
    sg__ledger_rec u = *rec;
    u.type = SG__LREC_USAGE;
    int m = encode_one(&u, buf + n, cap - (size_t)n);
    return m < 0 ? m : n + m;
}

/* ---------------------------------------------------------------- decoding */

typedef struct rbuf {
    const uint8_t *p;
    size_t len;
    size_t at;
    bool bad;
} rbuf;

static const uint8_t *take(rbuf *r, size_t n) {
    if (r->bad || r->len - r->at < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p + r->at;
    r->at += n;
    return p;
}

static uint8_t take_u8(rbuf *r) {
    const uint8_t *p = take(r, 1);
    return p != NULL ? p[0] : 0;
}

static uint16_t take_u16(rbuf *r) {
    const uint8_t *p = take(r, 2);
    return p != NULL ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

static uint32_t take_u32(rbuf *r) {
    const uint8_t *p = take(r, 4);
    return p != NULL ? get_u32(p) : 0;
}

static const char *take_str(rbuf *r, size_t n) {
    return (const char *)take(r, n);
}

/* A usage record's fields: the attempt (>= 1), a source (none is never
 * written), each count >= -1.  0, or -1 when not valid. */
static int decode_usage(rbuf *r, sg__ledger_rec *rec) {
    rec->n = take_u32(r);
    rec->usage_source = take_u8(r);
    for (int k = 0; k < 4; k++) {
        uint32_t lo = take_u32(r);
        uint32_t hi = take_u32(r);
        rec->usage[k] = (int64_t)((uint64_t)hi << 32 | lo);
        if (rec->usage[k] < -1) {
            return -1;
        }
    }
    return r->bad || rec->n == 0 || rec->usage_source == SG_USAGE_NONE ? -1 : 0;
}

/* The payload of a record whose checksum held: every field is checked as
 * the API checks it, so a record the decoder accepts is one the API could
 * have written. */
static int decode_payload(uint8_t type, const uint8_t *p, size_t len,
                          sg__ledger_rec *rec) {
    rbuf r = {p, len, 0, false};
    bool newer = false;
    memset(rec, 0, sizeof(*rec));
    rec->type = type;
    if (type < SG__LREC_INTENT || type > SG__LREC_USAGE) {
        return 0; /* a newer writer's type: skipped, not corrupt */
    }
    uint32_t lo = take_u32(&r);
    uint32_t hi = take_u32(&r);
    rec->wall_ns = (int64_t)((uint64_t)hi << 32 | lo);
    rec->key_len = take_u8(&r);
    rec->key = take_str(&r, rec->key_len);
    if (r.bad || sg__ledger_check_key(rec->key, rec->key_len) != 0) {
        return -1;
    }
    switch (type) {
    case SG__LREC_INTENT:
        rec->pid = (int32_t)take_u32(&r);
        rec->method_len = take_u8(&r);
        rec->method = take_str(&r, rec->method_len);
        rec->url_len = take_u16(&r);
        rec->url = take_str(&r, rec->url_len);
        if (r.bad || sg__ledger_check_method(rec->method, rec->method_len) != 0 ||
            sg__ledger_check_url(rec->url, rec->url_len) != 0) {
            return -1;
        }
        break;
    case SG__LREC_ATTEMPT:
        rec->n = take_u32(&r);
        rec->outcome = take_u8(&r);
        rec->phase = take_u8(&r);
        rec->flags = take_u8(&r);
        rec->http_status = take_u16(&r);
        if (r.bad || rec->n == 0 ||
            (rec->http_status != 0 &&
             (rec->http_status < 100 || rec->http_status > 599))) {
            return -1;
        }
        if (rec->outcome >= SG_OUTCOME_COUNT_ || rec->phase >= SG_PHASE_COUNT_ ||
            (rec->flags & ~(SG__LATT_SENT | SG__LATT_UNKNOWN)) != 0) {
            newer = true; /* an outcome, phase or flag added since */
        }
        break;
    case SG__LREC_RESOLVE:
        rec->resolution = take_u8(&r);
        rec->outcome = take_u8(&r);
        if (r.bad || rec->resolution < SG_LEDGER_DONE) {
            return -1;
        }
        if (rec->resolution > SG_LEDGER_UNKNOWN || rec->outcome >= SG_OUTCOME_COUNT_) {
            newer = true; /* a resolution or outcome added since */
        }
        break;
    case SG__LREC_RECONCILE:
        rec->note_len = take_u16(&r);
        rec->note = take_str(&r, rec->note_len);
        if (r.bad || sg__ledger_check_note(rec->note, rec->note_len) != 0) {
            return -1;
        }
        break;
    case SG__LREC_USAGE:
        if (decode_usage(&r, rec) != 0) {
            return -1;
        }
        newer = rec->usage_source > SG_USAGE_ESTIMATE; /* a source added since */
        break;
    default:
        return -1;
    }
    /* Trailing bytes would mean a writer we do not understand: refuse. */
    if (r.at != len) {
        return -1;
    }
    if (newer) {
        /* A later version's values in a record whose checksum held: skipped
         * whole, as an unknown type is - not corrupt bytes, which at the
         * end of the file the next writer would cut off. */
        memset(rec, 0, sizeof(*rec));
    }
    return 0;
}

int sg__ledger_decode(const uint8_t *p, size_t avail, sg__ledger_rec *rec) {
    if (avail < SG__LEDGER_HDR) {
        return 0;
    }
    if (p[0] != SG__LEDGER_MAGIC0 || p[1] != 'S' || p[2] != 'G' || p[3] != 'L' ||
        p[4] != SG__LEDGER_VERSION || p[6] != 0 || p[7] != 0 || p[5] == 0) {
        return -1;
    }
    uint32_t len = get_u32(p + 8);
    if (len > SG__LEDGER_PAYLOAD_MAX) {
        return -1;
    }
    if (avail - SG__LEDGER_HDR < len) {
        return 0;
    }
    uint32_t crc = sg__crc32c(0, p, 12);
    crc = sg__crc32c(crc, p + SG__LEDGER_HDR, len);
    if (crc != get_u32(p + 12)) {
        return -1;
    }
    if (decode_payload(p[5], p + SG__LEDGER_HDR, len, rec) != 0) {
        return -1;
    }
    return (int)(SG__LEDGER_HDR + len);
}

/* ----------------------------------------------------------------- scanner */

/* A window on the scanned bytes: the whole buffer in memory, or a chunk of
 * the file read with pread.  Memory stays bounded by the chunk size however
 * large the file is. */
#define SCAN_CHUNK ((size_t)64 * 1024)

typedef struct source {
    const uint8_t *mem; /* memory mode: the bytes, indexed by offset */
    int fd;             /* file mode */
    uint8_t *buf;
    uint64_t base; /* file offset of buf[0] */
    size_t len;    /* bytes valid in buf */
    uint64_t size; /* end of the scanned range */
    int err;
} source;

/* Points *@p at the bytes from @pos: returns how many are available, at
 * least min(@need, size - pos) unless a read failed (then 0 and err set). */
static size_t view(source *s, uint64_t pos, size_t need, const uint8_t **p) {
    uint64_t left = s->size - pos;
    size_t want = left < need ? (size_t)left : need;
    if (s->mem != NULL) {
        *p = s->mem + pos;
        return (size_t)left;
    }
    if (pos >= s->base && pos - s->base + want <= s->len) {
        *p = s->buf + (pos - s->base);
        return s->len - (size_t)(pos - s->base);
    }
    size_t fill = left < SCAN_CHUNK ? (size_t)left : SCAN_CHUNK;
    size_t got = 0;
    while (got < fill) {
        ssize_t r = pread(s->fd, s->buf + got, fill - got, (off_t)(pos + got));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            /* Shorter than fstat said: the file shrank under us, which only
             * a writer outside the lock protocol can do. */
            s->err = SG_EIO;
            s->len = 0;
            return 0;
        }
        got += (size_t)r;
    }
    s->base = pos;
    s->len = got;
    *p = s->buf;
    return got;
}

static int scan(source *s, uint64_t from, sg__ledger_rec_cb cb, void *ud,
                sg__ledger_scan *out) {
    memset(out, 0, sizeof(*out));
    out->end = from;
    uint64_t pos = from;
    while (pos < s->size) {
        const uint8_t *p;
        sg__ledger_rec rec;
        size_t avail = view(s, pos, SG__LEDGER_REC_MAX, &p);
        if (s->err != 0) {
            return s->err;
        }
        int n = sg__ledger_decode(p, avail, &rec);
        if (n > 0) {
            int rv = cb != NULL ? cb(&rec, pos, (size_t)n, ud) : 0;
            if (rv < 0) {
                return rv;
            }
            out->records++;
            pos += (uint64_t)n;
            out->end = pos;
            continue;
        }
        /* Not a valid record here: resynchronise on the next magic byte
         * that starts a valid record.  Whatever lies between is skipped;
         * when no valid record follows, the rest is the tail. */
        uint64_t j = pos + 1;
        bool found = false;
        while (j < s->size && !found) {
            const uint8_t *q;
            size_t a = view(s, j, SG__LEDGER_REC_MAX, &q);
            if (s->err != 0) {
                return s->err;
            }
            const uint8_t *m = memchr(q, SG__LEDGER_MAGIC0, a);
            if (m == NULL) {
                j += a;
                continue;
            }
            j += (uint64_t)(m - q);
            a = view(s, j, SG__LEDGER_REC_MAX, &q);
            if (s->err != 0) {
                return s->err;
            }
            if (sg__ledger_decode(q, a, &rec) > 0) {
                found = true;
            } else {
                j++;
            }
        }
        if (!found) {
            out->tail_bytes = s->size - pos;
            return 0;
        }
        out->corrupt_regions++;
        out->corrupt_bytes += j - pos;
        pos = j;
        out->end = pos;
    }
    return 0;
}

int sg__ledger_scan_fd(int fd, uint64_t from, uint64_t size, sg__ledger_rec_cb cb,
                       void *user_data, sg__ledger_scan *out) {
    source s = {.fd = fd, .size = size};
    if (from > size) {
        memset(out, 0, sizeof(*out));
        out->end = from;
        return SG_EIO;
    }
    s.buf = malloc(SCAN_CHUNK);
    if (s.buf == NULL) {
        memset(out, 0, sizeof(*out));
        out->end = from;
        return SG_ENOMEM;
    }
    int rv = scan(&s, from, cb, user_data, out);
    free(s.buf);
    return rv;
}

int sg__ledger_scan_mem(const uint8_t *buf, size_t len, sg__ledger_rec_cb cb,
                        void *user_data, sg__ledger_scan *out) {
    static const uint8_t empty[1] = {0};
    source s = {
        .mem = buf != NULL ? buf : empty, .fd = -1, .size = buf != NULL ? len : 0};
    return scan(&s, 0, cb, user_data, out);
}
