/*
 * sg_stream: framing joined to a guard.  The one place where body bytes
 * become timed items, shared by every transport.
 */
#include <streamguard/stream.h>

#include <string.h>

#define SG__STREAM_MAGIC 0x53475374u /* "SGSt" */

enum {
    STREAM_IDLE = 0, /* initialised, no attempt */
    STREAM_RUNNING,
    STREAM_TERMINAL, /* the sentinel came: decided ok, result_ kept */
    STREAM_ENDED,
};

static bool valid(const sg_stream *s) {
    return s != NULL && s->magic_ == SG__STREAM_MAGIC;
}

static int deliver(sg_stream *s, const sg_item *item) {
    int rv = sg_guard_on_item(&s->guard_, s->now_);
    if (rv != 0) {
        s->guard_stop_ = true; /* late or over the cap: latched in the guard */
        return 1;
    }
    if (s->on_item_ != NULL && s->on_item_(item, s->user_data_) != 0) {
        s->cancelled_ = true;
        s->stop_at_ = s->now_;
        return 1;
    }
    s->index_++;
    return 0;
}

/* An event type the caller declared "not an item" (a keepalive event). */
static bool skipped(const sg_stream *s, const char *type, size_t len) {
    for (const char *const *t = s->skip_types_; t != NULL && *t != NULL; t++) {
        if (strlen(*t) == len && memcmp(*t, type, len) == 0) {
            return true;
        }
    }
    return false;
}

static int on_sse_event(const sg_sse_event *ev, void *user_data) {
    sg_stream *s = user_data;
    if (s->skip_types_ != NULL && skipped(s, ev->type, ev->type_len)) {
        return 0;
    }
    sg_item item = {ev->type, ev->type_len, ev->data,    ev->data_len,
                    ev->id,   ev->id_len,   s->attempt_, s->index_};
    return deliver(s, &item);
}

static int on_ndjson_line(const char *line, size_t len, void *user_data) {
    sg_stream *s = user_data;
    const char *t = s->nd_terminal_;
    if (t != NULL && strlen(t) == len && memcmp(t, line, len) == 0) {
        /* The terminal line: the clean end, not delivered (as SSE's
         * terminal_data).  Stop here: what follows is ignored. */
        s->nd_terminal_seen_ = true;
        return 1;
    }
    sg_item item = {"", 0, line, len, "", 0, s->attempt_, s->index_};
    return deliver(s, &item);
}

size_t sg_stream_buffer_size(const sg_stream_config *cfg) {
    sg_stream_config c;
    if (cfg != NULL) {
        c = *cfg;
    } else {
        memset(&c, 0, sizeof(c));
    }
    if (c.format == SG_FORMAT_SSE) {
        sg_sse_config sc = {c.max_line, c.max_event, c.terminal_data, c.terminal_type};
        return sg_sse_buffer_size(&sc);
    }
    if (c.format == SG_FORMAT_NDJSON) {
        sg_ndjson_config nc = {c.max_line};
        return sg_ndjson_buffer_size(&nc);
    }
    return 0;
}

int sg_stream_init(sg_stream *s, const sg_stream_config *cfg, sg_item_cb on_item,
                   void *user_data, void *buf, size_t buf_size) {
    sg_stream_config c;
    if (cfg != NULL) {
        c = *cfg;
    } else {
        memset(&c, 0, sizeof(c));
    }
    if (s == NULL || buf == NULL ||
        (c.format != SG_FORMAT_SSE && c.format != SG_FORMAT_NDJSON)) {
        return SG_EINVAL;
    }
    memset(s, 0, sizeof(*s));
    int rv;
    if (c.format == SG_FORMAT_SSE) {
        static const sg_sse_callbacks cbs = {on_sse_event, NULL, NULL};
        sg_sse_config sc = {c.max_line, c.max_event, c.terminal_data, c.terminal_type};
        rv = sg_sse_init(&s->parser_.sse, &sc, &cbs, s, buf, buf_size);
    } else {
        sg_ndjson_config nc = {c.max_line};
        rv = sg_ndjson_init(&s->parser_.nd, &nc, on_ndjson_line, s, buf, buf_size);
    }
    if (rv != 0) {
        return rv;
    }
    s->format_ = (uint8_t)c.format;
    s->nd_terminal_ = c.format == SG_FORMAT_NDJSON ? c.terminal_data : NULL;
    s->on_item_ = on_item;
    s->skip_types_ = c.skip_types;
    s->user_data_ = user_data;
    s->state_ = STREAM_IDLE;
    s->magic_ = SG__STREAM_MAGIC;
    return 0;
}

int sg_stream_begin(sg_stream *s, const sg_guard_config *gcfg, const sg_budget *budget,
                    uint32_t attempt, int64_t now) {
    if (!valid(s)) {
        return SG_EINVAL;
    }
    int rv = sg_guard_start(&s->guard_, gcfg, budget, now);
    if (rv != 0) {
        return rv;
    }
    if (s->format_ == SG_FORMAT_SSE) {
        sg_sse_reset(&s->parser_.sse);
    } else {
        sg_ndjson_reset(&s->parser_.nd);
    }
    s->attempt_ = attempt;
    s->index_ = 0;
    s->cancelled_ = false;
    s->guard_stop_ = false;
    s->nd_terminal_seen_ = false;
    s->error_ = 0;
    s->now_ = now;
    s->state_ = STREAM_RUNNING;
    return 0;
}

sg_guard *sg_stream_guard(sg_stream *s) {
    return valid(s) ? &s->guard_ : NULL;
}

int sg_stream_feed(sg_stream *s, const void *data, size_t len, int64_t now) {
    if (!valid(s) || (data == NULL && len > 0)) {
        return SG_EINVAL;
    }
    if (s->state_ == STREAM_TERMINAL) {
        return 1; /* decided: what follows the sentinel is ignored */
    }
    if (s->state_ != STREAM_RUNNING) {
        return SG_ESTATE;
    }
    if (s->cancelled_) {
        return SG_ECANCELED;
    }
    if (s->error_ != 0) {
        return s->error_;
    }
    s->now_ = now;
    int rv = sg_guard_on_bytes(&s->guard_, now, len);
    if (rv != 0) {
        s->guard_stop_ = true;
        return rv;
    }
    ptrdiff_t fed = s->format_ == SG_FORMAT_SSE
                        ? sg_sse_feed(&s->parser_.sse, data, len)
                        : sg_ndjson_feed(&s->parser_.nd, data, len);
    if (fed < 0 && s->nd_terminal_seen_) {
        /* Decided at the instant the terminal line arrived. */
        sg_guard_finish(&s->guard_, now, true, &s->result_);
        s->state_ = STREAM_TERMINAL;
        return 1;
    }
    if (fed < 0) {
        if (s->cancelled_) {
            return SG_ECANCELED;
        }
        if (s->guard_stop_) {
            sg_outcome o = SG_OUTCOME_OK;
            sg_guard_check(&s->guard_, now, &o);
            return o == SG_OUTCOME_CAP_EXCEEDED ? SG_ECAP : SG_ETIMEDOUT;
        }
        s->error_ = (int)fed;
        s->stop_at_ = now;
        return s->error_;
    }
    if (s->format_ == SG_FORMAT_SSE && sg_sse_terminal_seen(&s->parser_.sse)) {
        /* Decided at the instant the sentinel arrived. */
        sg_guard_finish(&s->guard_, now, true, &s->result_);
        s->state_ = STREAM_TERMINAL;
        return 1;
    }
    return 0;
}

int sg_stream_end(sg_stream *s, int64_t now, sg_outcome how, sg_guard_result *result) {
    if (!valid(s) || result == NULL || (unsigned)how >= (unsigned)SG_OUTCOME_COUNT_) {
        return SG_EINVAL;
    }
    if (s->state_ == STREAM_TERMINAL) {
        *result = s->result_;
        s->state_ = STREAM_ENDED;
        return 0;
    }
    if (s->state_ != STREAM_RUNNING) {
        return SG_ESTATE;
    }
    s->state_ = STREAM_ENDED;
    /* A cancel or a framing error ended the attempt when it happened: judge
     * the clocks at that instant, not when the transport got round to
     * reporting the end (a deadline passing in between is not the cause). */
    if (s->cancelled_) {
        return sg_guard_fail(&s->guard_, s->stop_at_, SG_OUTCOME_CANCELLED, result);
    }
    if (s->error_ != 0) {
        return sg_guard_fail(&s->guard_, s->stop_at_, SG_OUTCOME_PROTOCOL_ERROR, result);
    }
    if (how == SG_OUTCOME_OK) {
        bool clean = false;
        if (s->format_ == SG_FORMAT_SSE) {
            sg_sse_end(&s->parser_.sse, &clean);
        } else {
            sg_ndjson_end(&s->parser_.nd, &clean);
            /* with a terminal line configured, only it is a clean end */
            clean = clean && s->nd_terminal_ == NULL;
        }
        return sg_guard_finish(&s->guard_, now, clean, result);
    }
    return sg_guard_fail(&s->guard_, now, how, result);
}

bool sg_stream_terminal_seen(const sg_stream *s) {
    return valid(s) && (s->state_ == STREAM_TERMINAL ||
                        (s->format_ == SG_FORMAT_SSE && s->state_ != STREAM_IDLE &&
                         sg_sse_terminal_seen(&s->parser_.sse)));
}

bool sg_stream_active(const sg_stream *s) {
    return valid(s) && (s->state_ == STREAM_RUNNING || s->state_ == STREAM_TERMINAL);
}
