/*
 * Incremental NDJSON framing: one item per non-empty line.  It shares the
 * SSE parser's line splitter (lines.h) with the LF-only line-end rule.
 */
#include <stdint.h>
#include <string.h>

#include "framing/lines.h"
#include "core/internal.h"
#include "framing/mem.h"

#define SG__NDJSON_MAGIC 0x4E444A31u /* "NDJ1" */

static int ndjson_limit(const sg_ndjson_config *cfg, size_t *max_line) {
    size_t ml = cfg != NULL ? cfg->max_line_ : 0;
    if (ml == 0) {
        ml = SG_FRAMING_DEFAULT_MAX_LINE;
    }
    if (ml < SG_FRAMING_MIN_LINE || ml > SG_FRAMING_MAX_LIMIT) {
        return SG_ERANGE;
    }
    *max_line = ml;
    return 0;
}

size_t sg_ndjson_buffer_size(const sg_ndjson_config *cfg) {
    size_t ml;
    if (ndjson_limit(cfg, &ml) != 0) {
        return 0;
    }
    /* One more byte than the line: the CR of a CRLF split across reads is
     * held before it is known to be a terminator. */
    return SG_NDJSON_BUFFER_SIZE(ml);
}

static bool ndjson_valid(const sg_ndjson_parser *p) {
    return p != NULL && p->magic_ == SG__NDJSON_MAGIC;
}

/* Either a lent @buf of @buf_size bytes, or (@buf NULL) a buffer that
 * grows from @mem as used. */
static int ndjson_init(sg_ndjson_parser *parser, const sg_ndjson_config *cfg,
                       void *user_data, void *buf, size_t buf_size, const sg_mem *mem) {
    size_t ml;
    int rc = ndjson_limit(cfg, &ml);
    if (rc != 0) {
        return rc;
    }
    if (buf != NULL && buf_size < SG_NDJSON_BUFFER_SIZE(ml)) {
        return SG_ENOBUFS;
    }
    memset(parser, 0, sizeof(*parser));
    if (buf != NULL) {
        sg__lines_init(&parser->lines_, buf, ml + 1);
    } else {
        sg__lines_init_mem(&parser->lines_, mem, ml + 1);
    }
    parser->on_item_ = cfg != NULL ? cfg->on_item_ : NULL;
    parser->user_data_ = user_data;
    parser->magic_ = SG__NDJSON_MAGIC;
    return 0;
}

int sg_ndjson_init(sg_ndjson_parser *parser, const sg_ndjson_config *cfg, void *user_data,
                   void *buf, size_t buf_size) {
    if (parser == NULL || buf == NULL) {
        return SG_EINVAL;
    }
    return ndjson_init(parser, cfg, user_data, buf, buf_size, NULL);
}

int sg__ndjson_init_mem(sg_ndjson_parser *parser, const sg_ndjson_config *cfg,
                        void *user_data, const sg_mem *mem) {
    if (parser == NULL || mem == NULL) {
        return SG_EINVAL;
    }
    return ndjson_init(parser, cfg, user_data, NULL, 0, mem);
}

/* The partial line fills the splitter's room, whose last byte is for a CR
 * before its LF only: anything else there is past max_line. */
static bool past_max_line(const sg_ndjson_parser *p) {
    return p->lines_.len_ == p->lines_.cap_ && p->lines_.buf_[p->lines_.len_ - 1] != '\r';
}

static int ndjson_line(void *ctx, const char *line, size_t n) {
    sg_ndjson_parser *p = ctx;
    if (n > 0 && line[n - 1] == '\r') {
        n--;
    }
    /* The splitter's cap has one byte of room for that CR.  A line past it
     * is not counted: a partial one is refused as soon as it passes, and
     * the count must not depend on where the reads fell. */
    if (n + 1 > p->lines_.cap_) {
        return SG_ELINE_TOO_LONG;
    }
    p->stats_.lines++;
    if (n == 0) {
        return 0;
    }
    p->stats_.items++;
    if (p->on_item_ != NULL && p->on_item_(line, n, p->user_data_) != 0) {
        return SG_ECANCELED;
    }
    return 0;
}

static ptrdiff_t ndjson_fail(sg_ndjson_parser *p, int rc) {
    sg__lines_drop(&p->lines_);
    p->error_ = rc;
    return rc;
}

#if defined(__GNUC__)
#    define SG__NOINLINE __attribute__((noinline))
#else
#    define SG__NOINLINE
#endif

/* The general path; kept out of line so the small-read path stays a leaf. */
static SG__NOINLINE ptrdiff_t ndjson_feed_lines(sg_ndjson_parser *parser, const char *d,
                                                size_t len) {
    size_t done = 0;
    int rc =
        sg__lines_scan(&parser->lines_, d, len, false, ndjson_line, parser, &done, NULL);
    if (rc < 0) {
        return ndjson_fail(parser, rc);
    }
    rc = sg__lines_keep(&parser->lines_, d + done, len - done);
    if (rc == 0 && past_max_line(parser)) {
        rc = SG_ELINE_TOO_LONG;
    }
    if (rc < 0) {
        return ndjson_fail(parser, rc);
    }
    sg__lines_trim(&parser->lines_); /* a growing buffer: freed when empty */
    return (ptrdiff_t)len;
}

ptrdiff_t sg_ndjson_feed(sg_ndjson_parser *parser, const void *data, size_t len) {
    if (!ndjson_valid(parser) || (data == NULL && len > 0) || len > PTRDIFF_MAX) {
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
    parser->stats_.bytes += len;
    if (sg__lines_append_small(&parser->lines_, d, len, false)) {
        /* A short read inside a line: nothing to deliver yet. */
        return past_max_line(parser) ? ndjson_fail(parser, SG_ELINE_TOO_LONG)
                                     : (ptrdiff_t)len;
    }
    return ndjson_feed_lines(parser, d, len);
}

int sg_ndjson_end(sg_ndjson_parser *parser, bool *clean) {
    if (!ndjson_valid(parser) || clean == NULL) {
        return SG_EINVAL;
    }
    if (!parser->ended_) {
        parser->clean_ = parser->error_ == 0 && !sg__lines_partial(&parser->lines_);
        sg__lines_drop(&parser->lines_);
        parser->ended_ = true;
    }
    *clean = parser->clean_;
    return 0;
}

int sg_ndjson_reset(sg_ndjson_parser *parser) {
    if (!ndjson_valid(parser)) {
        return SG_EINVAL;
    }
    sg__lines_reset(&parser->lines_);
    parser->ended_ = false;
    parser->clean_ = false;
    parser->error_ = 0;
    memset(&parser->stats_, 0, sizeof(parser->stats_));
    return 0;
}

int sg_ndjson_get_stats(const sg_ndjson_parser *parser, sg_ndjson_stats *stats) {
    if (!ndjson_valid(parser)) {
        return SG_EINVAL;
    }
    return sg__stats_copy(stats, &parser->stats_, sizeof(parser->stats_));
}
