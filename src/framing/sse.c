/*
 * Incremental server-sent events parser (WHATWG HTML, "event stream
 * interpretation"), sans-I/O and allocation-free.
 *
 * Event fields are kept as views for as long as possible: a field whose line
 * lies in the current read points into the caller's bytes, and an event that
 * starts and ends in one read is delivered without a copy (the OpenAI shape:
 * one data line, then a blank line).  Only at the end of a feed call are the
 * views of a still-pending event copied into the caller's buffer ("spill"),
 * because the caller's bytes and the partial-line buffer are about to change.
 */
#include <stdint.h>
#include <string.h>

#include "sgx/simd.h"
#include "core/internal.h"
#include "framing/lines.h"
#include "framing/mem.h"
#include "framing/sse_state.h"

#define SG__SSE_MAGIC 0x53534531u /* "SSE1" */

/* Counts @n into field @f of @p's counts, when it keeps them. */
#define SSE_COUNT(p, f, n)                   \
    do {                                     \
        if ((p)->stats_ != NULL) {           \
            (p)->stats_->f += (uint64_t)(n); \
        }                                    \
    } while (0)

static int sse_limits(const sg_sse_config *cfg, size_t *max_line, size_t *max_event) {
    size_t ml = cfg != NULL ? cfg->max_line_ : 0;
    size_t me = cfg != NULL ? cfg->max_event_ : 0;
    if (ml == 0) {
        ml = SG_FRAMING_DEFAULT_MAX_LINE;
    }
    if (me == 0) {
        me = SG_FRAMING_DEFAULT_MAX_EVENT;
    }
    if (ml < SG_FRAMING_MIN_LINE || ml > SG_FRAMING_MAX_LIMIT ||
        me > SG_FRAMING_MAX_LIMIT) {
        return SG_ERANGE;
    }
    /* 4 * 1 GiB + 1 GiB overflows a 32-bit size_t. */
    if (ml > (SIZE_MAX - me) / 4) {
        return SG_ERANGE;
    }
    *max_line = ml;
    *max_event = me;
    return 0;
}

size_t sg_sse_buffer_size(const sg_sse_config *cfg) {
    size_t ml;
    size_t me;
    if (sse_limits(cfg, &ml, &me) != 0) {
        return 0;
    }
    return SG_SSE_BUFFER_SIZE(ml, me);
}

static bool sse_valid(const sg__sse *p) {
    return p != NULL && p->magic_ == SG__SSE_MAGIC;
}

/* Forgets the event being assembled; the last event id string survives. */
static void sse_clear_event(sg__sse *p) {
    p->has_data_ = false;
    p->data_len_ = 0;
    p->type_len_ = 0;
    p->id_dirty_ = false;
    p->id_pending_ = p->id_last_len_ > 0 ? p->id_last_store_ : "";
    p->id_pending_len_ = p->id_last_len_;
}

/* Either a lent @buf of @buf_size bytes, carved into the stores, or (@buf
 * NULL) stores that grow from @mem as used. */
static int sse_init(sg__sse *parser, const sg_sse_config *cfg, const sg__sse_cbs *cbs,
                    void *user_data, void *buf, size_t buf_size, const sg_mem *mem) {
    size_t ml;
    size_t me;
    int rc = sse_limits(cfg, &ml, &me);
    if (rc != 0) {
        return rc;
    }
    const char *td = cfg != NULL ? cfg->terminal_data_ : NULL;
    const char *tt = cfg != NULL ? cfg->terminal_type_ : NULL;
    if ((td != NULL && td[0] == '\0') || (tt != NULL && tt[0] == '\0')) {
        /* An empty sentinel would match every "data:" event or no type. */
        return SG_EINVAL;
    }
    if (buf != NULL && buf_size < SG_SSE_BUFFER_SIZE(ml, me)) {
        return SG_ENOBUFS;
    }
    memset(parser, 0, sizeof(*parser));
    if (buf != NULL) {
        char *b = buf;
        sg__lines_init(&parser->lines_, b, ml);
        parser->type_store_ = b + ml;
        parser->id_pending_store_ = b + 2 * ml;
        parser->id_last_store_ = b + 3 * ml;
        parser->data_store_ = b + 4 * ml;
        parser->type_room_ = ml;
        parser->id_pending_room_ = ml;
        parser->id_last_room_ = ml;
        parser->data_room_ = me;
    } else {
        sg__lines_init_mem(&parser->lines_, mem, ml); /* the stores start empty */
    }
    parser->cbs_ = cbs;
    parser->user_data_ = user_data;
    parser->term_data_ = td;
    parser->term_data_len_ = td != NULL ? strlen(td) : 0;
    parser->term_type_ = tt;
    parser->term_type_len_ = tt != NULL ? strlen(tt) : 0;
    parser->max_event_ = me;
    sse_clear_event(parser);
    parser->magic_ = SG__SSE_MAGIC;
    return 0;
}

int sg__sse_init(sg__sse *parser, const sg_sse_config *cfg, const sg__sse_cbs *cbs,
                 void *user_data, void *buf, size_t buf_size) {
    if (parser == NULL || buf == NULL) {
        return SG_EINVAL;
    }
    return sse_init(parser, cfg, cbs, user_data, buf, buf_size, NULL);
}

int sg__sse_init_mem(sg__sse *parser, const sg_sse_config *cfg, const sg__sse_cbs *cbs,
                     void *user_data, const sg_mem *mem) {
    if (parser == NULL || mem == NULL) {
        return SG_EINVAL;
    }
    return sse_init(parser, cfg, cbs, user_data, NULL, 0, mem);
}

/* Room for @need bytes in the store *@store of *@room bytes, at most
 * @limit (checked by the caller): 0, or SG_ENOMEM.  A view into the store
 * must follow it (it may move). */
static int sse_room(const sg__sse *p, char **store, size_t *room, size_t need,
                    size_t limit) {
    if (need <= *room) {
        return 0;
    }
    char *s = sg__mem_grow(p->lines_.mem_, *store, room, need, limit);
    if (s == NULL) {
        return SG_ENOMEM;
    }
    *store = s;
    return 0;
}

/* Growing stores that hold nothing are freed (a lent buffer's stay): all
 * but the partial line's, which sg__lines_trim frees. */
static void sse_trim(sg__sse *p) {
    const sg_mem *m = p->lines_.mem_;
    if (m == NULL) {
        return;
    }
    if (!p->has_data_ && p->data_store_ != NULL) {
        p->data_store_ = sg__mem_free(m, p->data_store_, &p->data_room_);
    }
    if (p->type_len_ == 0 && p->type_store_ != NULL) {
        p->type_store_ = sg__mem_free(m, p->type_store_, &p->type_room_);
    }
    if (!p->id_dirty_ && p->id_pending_store_ != NULL) {
        p->id_pending_store_ =
            sg__mem_free(m, p->id_pending_store_, &p->id_pending_room_);
    }
    if (p->id_last_len_ == 0 && p->id_last_store_ != NULL) {
        p->id_last_store_ = sg__mem_free(m, p->id_last_store_, &p->id_last_room_);
        p->id_pending_ = p->id_dirty_ ? p->id_pending_ : "";
    }
    sg__lines_trim(&p->lines_);
}

void sg__sse_free(sg__sse *parser) {
    if (sse_valid(parser)) {
        parser->id_last_len_ = 0;
        sse_clear_event(parser);
        sg__lines_drop(&parser->lines_);
        sse_trim(parser);
    }
}

/* The last event id, as a view: "" when none (a growing store may be
 * NULL then). */
static const char *sse_id(const sg__sse *p) {
    return p->id_last_len_ > 0 ? p->id_last_store_ : "";
}

static int sse_data(sg__sse *p, const char *v, size_t vlen) {
    if (!p->has_data_) {
        if (vlen > p->max_event_) {
            return SG_EEVENT_TOO_LARGE;
        }
        /* The first data line stays a view: most events have only one. */
        p->data_ = v;
        p->data_len_ = vlen;
        p->has_data_ = true;
        return 0;
    }
    /* data_len + LF + vlen > max_event, without overflow. */
    if (vlen >= p->max_event_ - p->data_len_) {
        return SG_EEVENT_TOO_LARGE;
    }
    const bool stored = p->data_ == p->data_store_;
    if (sse_room(p, &p->data_store_, &p->data_room_, p->data_len_ + 1 + vlen,
                 p->max_event_) != 0) {
        return SG_ENOMEM;
    }
    if (!stored && p->data_len_ > 0) {
        memcpy(p->data_store_, p->data_, p->data_len_);
    }
    p->data_ = p->data_store_;
    /* The standard appends value + LF and strips one final LF at dispatch;
     * storing LF only between values gives the same bytes. */
    p->data_store_[p->data_len_] = '\n';
    memcpy(p->data_store_ + p->data_len_ + 1, v, vlen);
    p->data_len_ += 1 + vlen;
    return 0;
}

static int sse_retry(sg__sse *p, const char *v, size_t vlen) {
    uint64_t ms = 0;
    if (vlen == 0) {
        /* "retry" alone is not "only ASCII digits" in any browser. */
        return 0;
    }
    for (size_t i = 0; i < vlen; i++) {
        unsigned d = (unsigned)((unsigned char)v[i] - '0');
        if (d > 9) {
            return 0;
        }
        if (ms > (UINT64_MAX - d) / 10) {
            ms = UINT64_MAX;
        } else {
            ms = ms * 10 + d;
        }
    }
    if (p->cbs_->on_retry != NULL && p->cbs_->on_retry(ms, p->user_data_) != 0) {
        return SG_ECANCELED;
    }
    return 0;
}

static int sse_dispatch(sg__sse *p) {
    if (p->id_dirty_) {
        /* Step 1 of dispatch runs even when no event follows: an "id:" block
         * without data still moves the last event id. */
        if (sse_room(p, &p->id_last_store_, &p->id_last_room_, p->id_pending_len_,
                     p->lines_.cap_) != 0) {
            return SG_ENOMEM;
        }
        if (p->id_pending_len_ > 0) {
            memcpy(p->id_last_store_, p->id_pending_, p->id_pending_len_);
        }
        p->id_last_len_ = p->id_pending_len_;
        p->id_pending_ = sse_id(p);
        p->id_dirty_ = false;
    }
    if (!p->has_data_) {
        p->type_len_ = 0;
        return 0;
    }
    sg_sse_event ev;
    if (p->type_len_ > 0) {
        ev.type = p->type_;
        ev.type_len = p->type_len_;
    } else {
        ev.type = "message";
        ev.type_len = 7;
    }
    ev.data = p->data_;
    ev.data_len = p->data_len_;
    ev.id = sse_id(p);
    ev.id_len = p->id_last_len_;
    ev.terminal = false;
    /* The views stay valid through the callback: nothing writes the stores
     * until the next line. */
    p->has_data_ = false;
    p->type_len_ = 0;
    if (p->term_data_ != NULL && ev.data_len == p->term_data_len_ &&
        memcmp(ev.data, p->term_data_, ev.data_len) == 0) {
        /* "[DONE]" is a marker, not content: never an item. */
        p->terminal_seen_ = true;
        return SG__LINES_STOP;
    }
    if (p->term_type_ != NULL && ev.type_len == p->term_type_len_ &&
        memcmp(ev.type, p->term_type_, ev.type_len) == 0) {
        /* A typed terminal ("message_stop") carries data the consumer may
         * need, so it is delivered, flagged. */
        ev.terminal = true;
        p->terminal_seen_ = true;
    }
    SSE_COUNT(p, items, 1);
    if (p->cbs_->on_event != NULL && p->cbs_->on_event(&ev, p->user_data_) != 0) {
        return SG_ECANCELED;
    }
    /* A new event starts: back to the fast path, if the chunk allows it. */
    return ev.terminal ? SG__LINES_STOP : SG__LINES_YIELD;
}

/* A line the standard ignores: to on_other, if the caller wants it. */
static int sse_other(sg__sse *p, const char *line, size_t n) {
    if (p->cbs_->on_other != NULL && p->cbs_->on_other(line, n, p->user_data_) != 0) {
        return SG_ECANCELED;
    }
    return 0;
}

/* Whether @line names a field this parser acts on (data, event, id,
 * retry), as sse_line would take it; a comment is none. */
static bool sse_field_line(const char *line, size_t n) {
    static const char *const fields[] = {"data", "event", "id", "retry"};
    for (size_t i = 0; i < 4; i++) {
        size_t l = strlen(fields[i]);
        if (n >= l && memcmp(line, fields[i], l) == 0 && (n == l || line[l] == ':')) {
            return true;
        }
    }
    return false;
}

static int sse_line(void *ctx, const char *line, size_t n) {
    sg__sse *p = ctx;
    SSE_COUNT(p, lines, 1);
    if (n == 0) {
        return sse_dispatch(p);
    }
    if (line[0] == ':') {
        SSE_COUNT(p, comments, 1);
        if (p->cbs_->on_comment != NULL &&
            p->cbs_->on_comment(line + 1, n - 1, p->user_data_) != 0) {
            return SG_ECANCELED;
        }
        return 0;
    }
    /* Every field this parser knows is at most 5 bytes long ("data",
     * "event", "retry", "id"): a colon is looked for in the first 6 bytes
     * only, and a line without one there names a field to ignore - no scan
     * of the whole line for it. */
    const char *colon = NULL;
    for (size_t i = 0; i < n && i < 6; i++) {
        if (line[i] == ':') {
            colon = line + i;
            break;
        }
    }
    if (colon == NULL && n > 5) {
        return sse_other(p, line, n); /* its name has 6 bytes or more */
    }
    size_t flen = colon != NULL ? (size_t)(colon - line) : n;
    const char *v = colon != NULL ? colon + 1 : line + n;
    size_t vlen = n - (size_t)(v - line);
    if (vlen > 0 && v[0] == ' ') {
        v++;
        vlen--;
    }
    /* Field names are case-sensitive: "Data" is an unknown field. */
    switch (flen) {
    case 4:
        if (memcmp(line, "data", 4) == 0) {
            return sse_data(p, v, vlen);
        }
        break;
    case 5:
        if (memcmp(line, "event", 5) == 0) {
            p->type_ = v;
            p->type_len_ = vlen;
            return 0;
        }
        if (memcmp(line, "retry", 5) == 0) {
            return sse_retry(p, v, vlen);
        }
        break;
    case 2:
        if (memcmp(line, "id", 2) == 0) {
            if (memchr(v, '\0', vlen) == NULL) {
                p->id_pending_ = v;
                p->id_pending_len_ = vlen;
                p->id_dirty_ = true;
            }
            return 0;
        }
        break;
    default:
        break;
    }
    /* Unknown fields are ignored, as the standard requires. */
    return sse_other(p, line, n);
}

/* Copies the pending event's views into the caller's buffer before the
 * bytes they point at go away (end of feed). */
static int sse_spill(sg__sse *p) {
    const size_t ml = p->lines_.cap_;
    if (p->has_data_ && p->data_ != p->data_store_) {
        if (p->data_len_ == 0) {
            p->data_ = ""; /* nothing to keep: no store needed */
        } else if (sse_room(p, &p->data_store_, &p->data_room_, p->data_len_,
                            p->max_event_) != 0) {
            return SG_ENOMEM;
        } else {
            memcpy(p->data_store_, p->data_, p->data_len_);
            p->data_ = p->data_store_;
        }
    }
    if (p->type_len_ > 0 && p->type_ != p->type_store_) {
        if (sse_room(p, &p->type_store_, &p->type_room_, p->type_len_, ml) != 0) {
            return SG_ENOMEM;
        }
        memcpy(p->type_store_, p->type_, p->type_len_);
        p->type_ = p->type_store_;
    }
    if (p->id_dirty_ && p->id_pending_ != p->id_pending_store_) {
        if (p->id_pending_len_ == 0) {
            p->id_pending_ = "";
        } else if (sse_room(p, &p->id_pending_store_, &p->id_pending_room_,
                            p->id_pending_len_, ml) != 0) {
            return SG_ENOMEM;
        } else {
            memcpy(p->id_pending_store_, p->id_pending_, p->id_pending_len_);
            p->id_pending_ = p->id_pending_store_;
        }
    }
    return 0;
}

static ptrdiff_t sse_fail(sg__sse *p, int rc) {
    sse_clear_event(p);
    sg__lines_drop(&p->lines_);
    sse_trim(p);
    p->error_ = rc;
    return rc;
}

/* After the terminal: bytes are consumed unparsed and counted. */
static ptrdiff_t sse_after_terminal(sg__sse *p, const char *d, size_t len) {
    size_t skip = 0;
    if (p->lines_.skip_lf_) {
        /* The LF of the terminal's own CRLF is not "after" it. */
        p->lines_.skip_lf_ = false;
        if (d[0] == '\n') {
            skip = 1;
        }
    }
    SSE_COUNT(p, bytes_after_terminal, len - skip);
    return (ptrdiff_t)len;
}

#if defined(__GNUC__)
#    define SG__NOINLINE __attribute__((noinline))
#    define SG__ALWAYS_INLINE __attribute__((always_inline))
#else
#    define SG__NOINLINE
#    define SG__ALWAYS_INLINE
#endif

/* true between events: no field of one seen, no partial line held, no
 * CR or BOM decision pending. */
static bool sse_between(const sg__sse *p) {
    return !p->has_data_ && p->type_len_ == 0 && !p->id_dirty_ && p->lines_.len_ == 0 &&
           p->lines_.bom_ == 3 && !p->lines_.skip_lf_;
}

/*
 * The fast path, for the shape nearly every model stream has: events of
 * one "data: " line and a blank line, LF-ended, whole in this chunk.  From
 * d + *off, between events, it dispatches each such event straight from
 * the chunk - no field parsing - and stops before the first that is
 * anything else (another field, a comment, a CR, a line over a limit, a
 * typed terminal, an event the chunk cuts), leaving it to the general
 * path, which gives the same events, counters and errors.  Returns 0,
 * SG__LINES_STOP (the terminal) or SG_ECANCELED, with *off past what it
 * consumed.  One copy per vector level (sse_fast_for), each with its
 * CR-or-LF masks inline.
 *
 * The line ends are found by walking the chunk's 64-byte blocks in order,
 * each block's CR-or-LF mask made once (sg__lines_mask_fn): an event's
 * line end is the first bit at or after its "data: " in the mask at hand,
 * or in the next blocks'.  Which block comes next does not depend on where
 * the event before ended, so the CPU makes the masks ahead while the
 * events before are dispatched; a search per line would start only once
 * the previous line's end was known.
 */
static inline SG__ALWAYS_INLINE int sse_fast_with(sg__sse *p, const char *d, size_t len,
                                                  size_t *off, sg__lines_mask_fn mask) {
    const char *q = d + *off;
    const char *end = d + len;
    int rc = 0;
    /* the block [blk, blk + 64) and its mask (bits for bytes before end) */
    const char *blk = q;
    uint64_t bm = end - q >= 8 ? mask(blk, end) : 0;
    while (end - q >= 8 && memcmp(q, "data: ", 6) == 0) {
        /* "data: " holds neither: the first CR or LF at or after q + 6 */
        const char *from = q + 6;
        while (from - blk >= 64) {
            blk += 64; /* from < end: so is blk */
            bm = mask(blk, end);
        }
        uint64_t m = bm & (~(uint64_t)0 << (unsigned)(from - blk));
        while (m == 0 && end - blk > 64) {
            blk += 64;
            bm = mask(blk, end);
            m = bm;
        }
        if (m == 0) {
            break; /* cut by the chunk: the general path's */
        }
        const char *lf = blk + __builtin_ctzll(m);
        if (*lf == '\r') {
            break; /* a CR: the general path's */
        }
        if (end - lf < 2 || lf[1] != '\n') {
            break; /* cut by the chunk, or more lines to the event */
        }
        size_t n = (size_t)(lf - q);
        if (n > p->lines_.cap_ || n - 6 > p->max_event_) {
            break; /* an error the general path reports */
        }
        sg_sse_event ev = {"message", 7, q + 6, n - 6, sse_id(p), p->id_last_len_, false};
        q = lf + 2;
        SSE_COUNT(p, lines, 2);
        if (p->term_data_ != NULL && ev.data_len == p->term_data_len_ &&
            memcmp(ev.data, p->term_data_, ev.data_len) == 0) {
            p->terminal_seen_ = true;
            rc = SG__LINES_STOP;
            break;
        }
        SSE_COUNT(p, items, 1);
        if (p->cbs_->on_event != NULL && p->cbs_->on_event(&ev, p->user_data_) != 0) {
            rc = SG_ECANCELED;
            break;
        }
    }
    *off = (size_t)(q - d);
    return rc;
}

typedef int (*sse_fast_fn)(sg__sse *p, const char *d, size_t len, size_t *off);

static int sse_fast_sse2(sg__sse *p, const char *d, size_t len, size_t *off) {
#ifdef SG__LINES_SSE2
    return sse_fast_with(p, d, len, off, sg__eolmask_sse2);
#else
    return sse_fast_with(p, d, len, off, sg__eolmask_bytes);
#endif
}

#ifdef SG__LINES_WIDE
__attribute__((target("avx2,bmi2"))) static int sse_fast_avx2(sg__sse *p, const char *d,
                                                              size_t len, size_t *off) {
    return sse_fast_with(p, d, len, off, sg__eolmask_avx2);
}

__attribute__((target("avx512f,avx512bw,bmi2"))) static int
sse_fast_avx512(sg__sse *p, const char *d, size_t len, size_t *off) {
    return sse_fast_with(p, d, len, off, sg__eolmask_avx512);
}
#endif

/* The fast path for the CPU's vector level (sgx_simd_level). */
static sse_fast_fn sse_fast_for(int level) {
#ifdef SG__LINES_WIDE
    if (level >= SGX_SIMD_AVX512BW) {
        return sse_fast_avx512;
    }
    if (level >= SGX_SIMD_AVX2) {
        return sse_fast_avx2;
    }
#endif
    (void)level;
    return sse_fast_sse2;
}

/* The general path: lines, fields, dispatch, spill, keep; the fast path
 * between events.  Never inlined, so that sg_sse_feed's small-read path
 * needs no register saves. */
static SG__NOINLINE ptrdiff_t sse_feed_lines(sg__sse *parser, const char *d, size_t len) {
    const int level = sgx_simd_level();
    const sg__lines_eol_fn eol = sg__lines_eol_at(level);
    const sse_fast_fn sse_fast = sse_fast_for(level);
    size_t done = 0;
    int rc;
    /* With "message" the typed terminal, every untyped event would be it. */
    const bool fast = parser->term_type_ == NULL || parser->term_type_len_ != 7 ||
                      memcmp(parser->term_type_, "message", 7) != 0;
    for (;;) {
        if (fast && sse_between(parser)) {
            rc = sse_fast(parser, d, len, &done);
            if (rc != 0 || done == len) {
                break;
            }
        }
        size_t used = 0;
        rc = sg__lines_scan(&parser->lines_, d + done, len - done, true, sse_line, parser,
                            &used, eol);
        done += used;
        if (rc != SG__LINES_YIELD) {
            break;
        }
    }
    if (rc == SG__LINES_STOP) {
        bool skip_lf = parser->lines_.skip_lf_;
        sse_clear_event(parser);
        sg__lines_drop(&parser->lines_);
        sse_trim(parser);
        parser->lines_.skip_lf_ = skip_lf;
        if (done < len) {
            (void)sse_after_terminal(parser, d + done, len - done);
        }
        return (ptrdiff_t)len;
    }
    if (rc < 0) {
        return sse_fail(parser, rc);
    }
    rc = sse_spill(parser);
    if (rc == 0) {
        rc = sg__lines_keep(&parser->lines_, d + done, len - done);
    }
    if (rc < 0) {
        return sse_fail(parser, rc);
    }
    sse_trim(parser);
    return (ptrdiff_t)len;
}

ptrdiff_t sg__sse_feed(sg__sse *parser, const void *data, size_t len) {
    if (!sse_valid(parser) || (data == NULL && len > 0) || len > PTRDIFF_MAX) {
        return SG_EINVAL;
    }
    if (parser->error_ != 0) {
        return parser->error_;
    }
    if (parser->ended_) {
        return SG_EDONE;
    }
    if (len == 0) {
        return 0;
    }
    const char *d = data;
    SSE_COUNT(parser, bytes, len);
    if (parser->terminal_seen_) {
        return sse_after_terminal(parser, d, len);
    }
    if (sg__lines_append_small(&parser->lines_, d, len, true)) {
        /* A read inside a line: nothing to parse.  Views of a pending event
         * were all copied out at the end of the previous feed, and the
         * partial line is only appended to, so nothing needs spilling.
         * Kept apart from sse_feed_lines so this path stays a leaf. */
        return (ptrdiff_t)len;
    }
    return sse_feed_lines(parser, d, len);
}

int sg__sse_end(sg__sse *parser, bool *clean) {
    if (!sse_valid(parser) || clean == NULL) {
        return SG_EINVAL;
    }
    if (!parser->ended_) {
        if (parser->error_ != 0) {
            parser->clean_ = false;
        } else if (parser->term_data_ != NULL || parser->term_type_ != NULL) {
            parser->clean_ = parser->terminal_seen_;
        } else {
            parser->clean_ = !parser->has_data_ && !sg__lines_partial(&parser->lines_);
        }
        /* An unterminated last line no field takes (a JSON error written
         * bare, its LF never sent) goes where a terminated one would: to
         * on_other.  A field's, like the pending event, is discarded. */
        if (parser->error_ == 0 && parser->cbs_->on_other != NULL &&
            parser->lines_.len_ > 0 && parser->lines_.buf_[0] != ':' &&
            !sse_field_line(parser->lines_.buf_, parser->lines_.len_)) {
            (void)sse_other(parser, parser->lines_.buf_, parser->lines_.len_);
        }
        /* A pending event is discarded, never dispatched. */
        sse_clear_event(parser);
        sg__lines_drop(&parser->lines_);
        sse_trim(parser);
        parser->ended_ = true;
    }
    *clean = parser->clean_;
    return 0;
}

int sg__sse_reset(sg__sse *parser) {
    if (!sse_valid(parser)) {
        return SG_EINVAL;
    }
    sg__lines_reset(&parser->lines_);
    parser->id_last_len_ = 0;
    sse_clear_event(parser);
    sse_trim(parser);
    parser->terminal_seen_ = false;
    parser->ended_ = false;
    parser->clean_ = false;
    parser->error_ = 0;
    if (parser->stats_ != NULL) {
        memset(parser->stats_, 0, sizeof(*parser->stats_));
    }
    return 0;
}

static int sse_last_event_id(const sg__sse *parser, const char **id, size_t *len) {
    if (!sse_valid(parser) || id == NULL || len == NULL) {
        return SG_EINVAL;
    }
    *id = sse_id(parser);
    *len = parser->id_last_len_;
    return 0;
}

bool sg__sse_terminal_seen(const sg__sse *parser) {
    return sse_valid(parser) && parser->terminal_seen_;
}

static int sse_get_stats(const sg__sse *parser, sg_sse_stats *stats) {
    if (!sse_valid(parser)) {
        return SG_EINVAL;
    }
    static const sg_sse_stats none; /* (a stream's parser keeps none) */
    return sg__stats_copy(stats, parser->stats_ != NULL ? parser->stats_ : &none,
                          sizeof(none));
}

/* ------------------------------------------- the public sg_sse_parser */

static sg__sse *sse_of(sg_sse_parser *p) {
    return (sg__sse *)(void *)p;
}
static const sg__sse *sse_cof(const sg_sse_parser *p) {
    return (const sg__sse *)(const void *)p;
}

/* A public parser's callbacks and counts, in its storage after its state. */
static sg__sse_cbs *public_cbs(sg_sse_parser *p) {
    return (sg__sse_cbs *)(void *)((char *)p + sizeof(sg__sse));
}
static sg_sse_stats *public_stats(sg_sse_parser *p) {
    return (sg_sse_stats *)(void *)((char *)public_cbs(p) + sizeof(sg__sse_cbs));
}

int sg_sse_init(sg_sse_parser *parser, const sg_sse_config *cfg, void *user_data,
                void *buf, size_t buf_size) {
    if (parser == NULL || buf == NULL) {
        return SG_EINVAL;
    }
    static const sg_sse_config none; /* no callback */
    const sg_sse_config *c = cfg != NULL ? cfg : &none;
    const sg__sse_cbs cbs = {c->on_event_, c->on_comment_, c->on_retry_, c->on_other_};
    int rv =
        sg__sse_init(sse_of(parser), cfg, public_cbs(parser), user_data, buf, buf_size);
    if (rv == 0) {
        *public_cbs(parser) = cbs;
        memset(public_stats(parser), 0, sizeof(sg_sse_stats));
        sse_of(parser)->stats_ = public_stats(parser);
    }
    return rv;
}

ptrdiff_t sg_sse_feed(sg_sse_parser *parser, const void *data, size_t len) {
    return sg__sse_feed(sse_of(parser), data, len);
}

int sg_sse_end(sg_sse_parser *parser, bool *clean) {
    return sg__sse_end(sse_of(parser), clean);
}

int sg_sse_reset(sg_sse_parser *parser) {
    return sg__sse_reset(sse_of(parser));
}

int sg_sse_last_event_id(const sg_sse_parser *parser, const char **id, size_t *len) {
    return sse_last_event_id(sse_cof(parser), id, len);
}

bool sg_sse_terminal_seen(const sg_sse_parser *parser) {
    return sg__sse_terminal_seen(sse_cof(parser));
}

int sg_sse_get_stats(const sg_sse_parser *parser, sg_sse_stats *stats) {
    return sse_get_stats(sse_cof(parser), stats);
}
