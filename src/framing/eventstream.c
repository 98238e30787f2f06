/*
 * Incremental AWS event-stream decoder (application/vnd.amazon.eventstream),
 * sans-I/O and allocation-free; CRC32 is zlib's.  A library built without
 * event-stream framing (SG_WITH_EVENTSTREAM=OFF: no zlib) makes no
 * decoder: sg_es_init says SG_EUNSUPPORTED, so nothing reaches a CRC.
 *
 * A message whose prelude starts a feed and whose last byte is in the same
 * feed is checked and delivered in place: one crc32() pass over it, one walk
 * of its header block, no copy.  Otherwise the prelude gathers in the
 * decoder itself (12 bytes) and the rest of the message in the caller's
 * buffer, each byte copied once and hashed once, as it arrives; so a message
 * split into any number of reads costs what its length costs.
 */
#include <stdint.h>
#include <string.h>

#ifdef SG_HAVE_EVENTSTREAM
#    include <zlib.h>
#endif

#include <streamguard/framing.h>

#include "core/internal.h"
#include "framing/mem.h"

#define SG__ES_MAGIC 0x45533031u /* "ES01" */

/* The fixed part around the headers and payload: prelude and message CRC. */
#define ES_OVERHEAD (SG_ES_PRELUDE_SIZE + 4)

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           (uint32_t)p[3];
}

/* zlib's crc32 takes a uInt length; a message is at most 16 MiB. */
static unsigned long es_crc(unsigned long crc, const unsigned char *p, size_t n) {
#ifdef SG_HAVE_EVENTSTREAM
    return crc32(crc, p, (uInt)n);
#else
    (void)p;
    (void)n;
    return crc; /* never called: without zlib no decoder is made (es_init) */
#endif
}

static int es_limits(const sg_es_config *cfg, size_t *max_message, size_t *max_headers) {
    size_t mm = cfg != NULL ? cfg->max_message_ : 0;
    size_t mh = cfg != NULL ? cfg->max_headers_ : 0;
    if (mm == 0) {
        mm = SG_ES_MAX_MESSAGE;
    }
    if (mh == 0) {
        mh = SG_ES_MAX_HEADERS;
    }
    if (mm < SG_ES_MIN_MESSAGE || mm > SG_ES_MAX_MESSAGE || mh > SG_ES_MAX_HEADERS) {
        return SG_ERANGE;
    }
    *max_message = mm;
    *max_headers = mh;
    return 0;
}

size_t sg_es_buffer_size(const sg_es_config *cfg) {
    size_t mm;
    size_t mh;
    if (es_limits(cfg, &mm, &mh) != 0) {
        return 0;
    }
    return SG_ES_BUFFER_SIZE(mm);
}

static bool es_valid(const sg_es_decoder *d) {
    return d != NULL && d->magic_ == SG__ES_MAGIC;
}

/* Either a lent @buf of @buf_size bytes, or (@buf NULL) a buffer that
 * grows from @mem as a message that spans feeds needs it. */
static int es_init(sg_es_decoder *dec, const sg_es_config *cfg, void *user_data,
                   void *buf, size_t buf_size, const sg_mem *mem) {
#ifndef SG_HAVE_EVENTSTREAM
    return SG_EUNSUPPORTED; /* built without event-stream framing */
#endif
    size_t mm;
    size_t mh;
    int rc = es_limits(cfg, &mm, &mh);
    if (rc != 0) {
        return rc;
    }
    if (buf != NULL && buf_size < SG_ES_BUFFER_SIZE(mm)) {
        return SG_ENOBUFS;
    }
    memset(dec, 0, sizeof(*dec));
    dec->buf_ = buf;
    dec->room_ = buf != NULL ? SG_ES_BUFFER_SIZE(mm) : 0;
    dec->mem_ = buf != NULL ? NULL : mem;
    dec->max_message_ = mm;
    dec->max_headers_ = mh;
    dec->on_message_ = cfg != NULL ? cfg->on_message_ : NULL;
    dec->user_data_ = user_data;
    dec->magic_ = SG__ES_MAGIC;
    return 0;
}

int sg_es_init(sg_es_decoder *dec, const sg_es_config *cfg, void *user_data, void *buf,
               size_t buf_size) {
    if (dec == NULL || buf == NULL) {
        return SG_EINVAL;
    }
    return es_init(dec, cfg, user_data, buf, buf_size, NULL);
}

int sg__es_init_mem(sg_es_decoder *dec, const sg_es_config *cfg, void *user_data,
                    const sg_mem *mem) {
    if (dec == NULL || mem == NULL) {
        return SG_EINVAL;
    }
    return es_init(dec, cfg, user_data, NULL, 0, mem);
}

/* A growing buffer is freed when no message is held (a lent one stays). */
static void es_trim(sg_es_decoder *d) {
    if (d->mem_ != NULL && d->buf_ != NULL) {
        d->buf_ = sg__mem_free(d->mem_, d->buf_, &d->room_);
    }
}

/* Room for the first @need bytes after the prelude: 0, or SG_ENOMEM. */
static int es_room(sg_es_decoder *d, size_t need) {
    if (need <= d->room_) {
        return 0;
    }
    unsigned char *b = sg__mem_grow(d->mem_, d->buf_, &d->room_, need,
                                    SG_ES_BUFFER_SIZE(d->max_message_));
    if (b == NULL) {
        return SG_ENOMEM;
    }
    d->buf_ = b;
    return 0;
}

/*
 * Reads the header at @b[*@pos..@len) into *@out and moves *@pos past it.
 * Returns 1, or SG_EHEADER when it runs past @len or has an unknown type.
 */
static int es_header_at(const unsigned char *b, size_t len, size_t *pos,
                        sg_es_header *out) {
    size_t p = *pos;
    size_t name_len = b[p++];
    if (name_len >= len - p) {
        /* The name, and at least the type byte after it, must fit. */
        return SG_EHEADER;
    }
    out->name = (const char *)(b + p);
    out->name_len = name_len;
    p += name_len;
    unsigned type = b[p++];
    size_t width;
    size_t skip = 0;
    switch (type) {
    case SG_ES_BOOL_TRUE:
    case SG_ES_BOOL_FALSE:
        width = 0;
        break;
    case SG_ES_BYTE:
        width = 1;
        break;
    case SG_ES_SHORT:
        width = 2;
        break;
    case SG_ES_INTEGER:
        width = 4;
        break;
    case SG_ES_LONG:
    case SG_ES_TIMESTAMP:
        width = 8;
        break;
    case SG_ES_UUID:
        width = 16;
        break;
    case SG_ES_BYTES:
    case SG_ES_STRING:
        if (len - p < 2) {
            return SG_EHEADER;
        }
        width = (size_t)b[p] << 8 | b[p + 1];
        skip = 2;
        break;
    default:
        return SG_EHEADER;
    }
    if (width > len - p - skip) {
        return SG_EHEADER;
    }
    out->type = (sg_es_header_type)type;
    out->value = b + p + skip;
    out->value_len = width;
    out->integer = type == SG_ES_BOOL_TRUE ? 1 : 0;
    if (type != SG_ES_BYTES && type != SG_ES_STRING && type != SG_ES_UUID && width > 0) {
        uint64_t v = 0;
        for (size_t i = 0; i < width; i++) {
            v = v << 8 | b[p + i];
        }
        uint64_t mask = width == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * width)) - 1;
        uint64_t sign = (uint64_t)1 << (8 * width - 1);
        /* Two's complement without a signed overflow or an
         * implementation-defined conversion: v - 2^bits = -(~v & mask) - 1. */
        out->integer = (v & sign) ? -(int64_t)(~v & mask) - 1 : (int64_t)v;
    }
    *pos = p + skip + width;
    return 1;
}

static bool es_is(const sg_es_header *h, const char *lit, size_t n) {
    return h->name_len == n && memcmp(h->name, lit, n) == 0;
}

/*
 * Walks the block of @m once: counts the headers, finds the four a profile
 * reads (the last of a name counts) and checks that each is a string.
 */
static int es_check_headers(sg_es_message *m) {
    struct {
        const char *name;
        size_t len;
        const char **view;
        size_t *view_len;
    } reserved[4] = {
        {":message-type", 13, &m->message_type, &m->message_type_len},
        {":event-type", 11, &m->event_type, &m->event_type_len},
        {":exception-type", 15, &m->exception_type, &m->exception_type_len},
        {":content-type", 13, &m->content_type, &m->content_type_len},
    };
    size_t pos = 0;
    size_t count = 0;
    sg_es_header h;
    while (pos < m->headers_len) {
        int rc = es_header_at(m->headers, m->headers_len, &pos, &h);
        if (rc < 0) {
            return rc;
        }
        count++;
        if (h.name_len == 0 || h.name[0] != ':') {
            continue;
        }
        for (size_t i = 0; i < 4; i++) {
            if (!es_is(&h, reserved[i].name, reserved[i].len)) {
                continue;
            }
            if (h.type != SG_ES_STRING) {
                /* A profile could not read it: not a stream it can
                 * classify, so not one to pass on. */
                return SG_EHEADER;
            }
            *reserved[i].view = (const char *)h.value;
            *reserved[i].view_len = h.value_len;
        }
    }
    m->header_count = count;
    return 0;
}

/*
 * The prelude @pre is complete: checks its CRC, then the lengths, and
 * starts the message CRC (over the first 8 bytes).
 */
static int es_prelude(sg_es_decoder *d, const unsigned char *pre) {
    unsigned long c8 = es_crc(0, pre, 8);
    if ((uint32_t)c8 != be32(pre + 8)) {
        return SG_EPRELUDE_CRC;
    }
    uint32_t total = be32(pre);
    uint32_t hlen = be32(pre + 4);
    if (total < SG_ES_MIN_MESSAGE || total > d->max_message_ || hlen > d->max_headers_ ||
        hlen > total - ES_OVERHEAD) {
        return SG_EMESSAGE_LENGTH;
    }
    d->total_ = total;
    d->headers_len_ = hlen;
    /* The message CRC goes on from here, over the prelude CRC's 4 bytes
     * first: the caller hashes them, with the body when it can (one call
     * fewer per message; zlib's per-call cost shows on short messages). */
    d->crc_ = c8;
    return 0;
}

/*
 * The message is complete: @body is its bytes after the prelude (in the
 * caller's bytes or the buffer), its running CRC covers everything before
 * the trailing CRC.  Checks the CRC, then the headers, then delivers.
 */
static int es_finish(sg_es_decoder *d, const unsigned char *body) {
    uint32_t total = d->total_;
    uint32_t want = be32(body + total - SG_ES_PRELUDE_SIZE - 4);
    if ((uint32_t)d->crc_ != want) {
        return SG_EMESSAGE_CRC;
    }
    sg_es_message m;
    memset(&m, 0, sizeof(m));
    m.headers = body;
    m.headers_len = d->headers_len_;
    m.payload = body + d->headers_len_;
    m.payload_len = total - ES_OVERHEAD - d->headers_len_;
    m.total_len = total;
    m.message_crc = want;
    int rc = es_check_headers(&m);
    if (rc < 0) {
        return rc;
    }
    d->stats_.messages++;
    if (d->on_message_ != NULL && d->on_message_(&m, d->user_data_) != 0) {
        return SG_ECANCELED;
    }
    return 0;
}

static ptrdiff_t es_fail(sg_es_decoder *d, int rc) {
    d->have_ = 0;
    d->error_ = rc;
    es_trim(d);
    return rc;
}

ptrdiff_t sg_es_feed(sg_es_decoder *dec, const void *data, size_t len) {
    if (!es_valid(dec) || (data == NULL && len > 0) || len > PTRDIFF_MAX) {
        return SG_EINVAL;
    }
    if (dec->error_ != 0) {
        return dec->error_;
    }
    if (dec->ended_) {
        return SG_EDONE;
    }
    dec->stats_.bytes += len;
    const unsigned char *p = data;
    size_t left = len;
    int rc;
    while (left > 0) {
        if (dec->have_ == 0 && left >= SG_ES_PRELUDE_SIZE) {
            /* A message starts here, its prelude whole in this feed. */
            rc = es_prelude(dec, p);
            if (rc < 0) {
                return es_fail(dec, rc);
            }
            size_t total = dec->total_;
            if (left >= total) {
                /* ... and its end too: checked and delivered in place. */
                dec->crc_ = es_crc(dec->crc_, p + 8, total - SG_ES_PRELUDE_SIZE);
                rc = es_finish(dec, p + SG_ES_PRELUDE_SIZE);
                if (rc < 0) {
                    return es_fail(dec, rc);
                }
                p += total;
                left -= total;
                continue;
            }
            dec->crc_ = es_crc(dec->crc_, p + 8, 4);
            dec->have_ = SG_ES_PRELUDE_SIZE;
            p += SG_ES_PRELUDE_SIZE;
            left -= SG_ES_PRELUDE_SIZE;
            continue;
        }
        if (dec->have_ < SG_ES_PRELUDE_SIZE) {
            size_t take = SG_ES_PRELUDE_SIZE - dec->have_;
            take = take < left ? take : left;
            memcpy(dec->prelude_ + dec->have_, p, take);
            dec->have_ += take;
            p += take;
            left -= take;
            if (dec->have_ < SG_ES_PRELUDE_SIZE) {
                break;
            }
            rc = es_prelude(dec, dec->prelude_);
            if (rc < 0) {
                return es_fail(dec, rc);
            }
            dec->crc_ = es_crc(dec->crc_, dec->prelude_ + 8, 4);
            continue;
        }
        /* The rest of a message that spans feeds, into the buffer at its
         * offset after the prelude; hashed up to the trailing CRC. */
        size_t need = dec->total_ - dec->have_;
        size_t take = need < left ? need : left;
        rc = es_room(dec, dec->have_ - SG_ES_PRELUDE_SIZE + take);
        if (rc < 0) {
            return es_fail(dec, rc);
        }
        memcpy(dec->buf_ + (dec->have_ - SG_ES_PRELUDE_SIZE), p, take);
        dec->stats_.copied += take;
        size_t crc_end = dec->total_ - 4;
        if (dec->have_ < crc_end) {
            size_t upto = dec->have_ + take < crc_end ? dec->have_ + take : crc_end;
            dec->crc_ = es_crc(dec->crc_, p, upto - dec->have_);
        }
        dec->have_ += take;
        p += take;
        left -= take;
        if (dec->have_ == dec->total_) {
            dec->have_ = 0;
            rc = es_finish(dec, dec->buf_);
            if (rc < 0) {
                return es_fail(dec, rc);
            }
            es_trim(dec); /* delivered: nothing held */
        }
    }
    return (ptrdiff_t)len;
}

int sg_es_end(sg_es_decoder *dec, bool *clean) {
    if (!es_valid(dec) || clean == NULL) {
        return SG_EINVAL;
    }
    if (!dec->ended_) {
        dec->clean_ = dec->error_ == 0 && dec->have_ == 0;
        dec->have_ = 0;
        dec->ended_ = true;
        es_trim(dec);
    }
    *clean = dec->clean_;
    return 0;
}

int sg_es_reset(sg_es_decoder *dec) {
    if (!es_valid(dec)) {
        return SG_EINVAL;
    }
    dec->have_ = 0;
    es_trim(dec);
    dec->total_ = 0;
    dec->headers_len_ = 0;
    dec->crc_ = 0;
    dec->ended_ = false;
    dec->clean_ = false;
    dec->error_ = 0;
    memset(&dec->stats_, 0, sizeof(dec->stats_));
    return 0;
}

int sg_es_get_stats(const sg_es_decoder *dec, sg_es_stats *stats) {
    if (!es_valid(dec)) {
        return SG_EINVAL;
    }
    return sg__stats_copy(stats, &dec->stats_, sizeof(dec->stats_));
}

int sg_es_header_next(const sg_es_message *msg, size_t *pos, sg_es_header *out) {
    if (msg == NULL || pos == NULL || out == NULL || *pos > msg->headers_len ||
        (msg->headers == NULL && msg->headers_len > 0)) {
        return SG_EINVAL;
    }
    if (*pos == msg->headers_len) {
        return 0;
    }
    return es_header_at(msg->headers, msg->headers_len, pos, out);
}

int sg_es_header_find(const sg_es_message *msg, const char *name, size_t name_len,
                      sg_es_header *out) {
    if (msg == NULL || out == NULL || (name == NULL && name_len > 0)) {
        return SG_EINVAL;
    }
    size_t pos = 0;
    sg_es_header h;
    int found = 0;
    int rc;
    while ((rc = sg_es_header_next(msg, &pos, &h)) == 1) {
        if (h.name_len == name_len &&
            (name_len == 0 || memcmp(h.name, name, name_len) == 0)) {
            *out = h;
            found = 1;
        }
    }
    return rc < 0 ? rc : found;
}
