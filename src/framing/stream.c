/*
 * sg_stream: framing joined to a guard.  The one place where body bytes
 * become timed items, shared by every transport.
 *
 * Here, the stream's life cycle: its buffer's size and parts, the parser
 * it drives, an attempt's begin, feed and end, and the verdict at the
 * end.  What each parsed event, line or message becomes (an item, held
 * metadata, a keepalive, a provider error, the clean end) is
 * stream_items.c's.
 */
#include <streamguard/stream.h>

#include <string.h>

#include "core/internal.h"
#include "framing/body.h"
#include "framing/mem.h"
#include "framing/stream_items.h"
#include "framing/usage.h"

#define SG__STREAM_MAGIC 0x53475374u /* "SGSt" */

enum {
    STREAM_IDLE = 0, /* initialised, no attempt */
    STREAM_RUNNING,
    STREAM_TERMINAL, /* the sentinel came: decided ok, result_ kept */
    STREAM_ENDED,
};

static bool valid(const sg__stream *s) {
    return s != NULL && s->magic_ == SG__STREAM_MAGIC;
}

/* The clean end (the terminal sentinel or line, or a profile's end item):
 * decided ok at the instant it arrived.  What was held for a first token
 * that never came goes to the consumer now, as an end item delivers it
 * (a content filter's end, usage): nothing the server sent is lost. */
static int at_terminal(sg__stream *s, int64_t now) {
    if (s->hold_n_ > 0 && sg__stream_release_held(s) != 0) {
        return SG_ECANCELED; /* the consumer stopped */
    }
    sg_guard_finish(&s->guard_, now, true, &s->result_);
    s->state_ = STREAM_TERMINAL;
    return 1;
}

/* Room for the lines outside SSE (other_json; after the held items'). */
static size_t other_size(const sg_stream_config *c) {
    if (c->classify_ == NULL || !c->other_json_ || c->format_ != SG_FORMAT_SSE) {
        return 0;
    }
    return c->max_event_ != 0 ? c->max_event_ : SG_FRAMING_DEFAULT_MAX_EVENT;
}

/* The line limit in effect: the caller's; under a classifier (a provider
 * profile) left at 0, an event's (at least the plain default), since one
 * line may carry a whole output (Responses' response.completed repeats the
 * answer; Ollama's last line its context; an inline image). */
static size_t line_limit(const sg_stream_config *c) {
    if (c->max_line_ != 0 || c->classify_ == NULL) {
        return c->max_line_;
    }
    size_t ev = c->max_event_ != 0 ? c->max_event_ : SG_FRAMING_DEFAULT_MAX_EVENT;
    return ev > SG_FRAMING_DEFAULT_MAX_LINE ? ev : SG_FRAMING_DEFAULT_MAX_LINE;
}

/* The parsers' configs for @c (its line limit resolved): the largest
 * event-stream message from max_event (its default 1 MiB), within what
 * AWS allows, its header block at most AWS's limit and the message. */
static sg_es_config es_config(const sg_stream_config *c) {
    size_t ev = c->max_event_ != 0 ? c->max_event_ : SG_FRAMING_DEFAULT_MAX_EVENT;
    return (sg_es_config){.max_message_ = ev,
                          .max_headers_ = ev < SG_ES_MAX_HEADERS ? ev : SG_ES_MAX_HEADERS,
                          .on_message_ = sg__stream_on_es_message};
}

static sg_sse_config sse_config(const sg_stream_config *c) {
    return (sg_sse_config){
        c->max_line_,      c->max_event_,           c->terminal_data_,
        c->terminal_type_, sg__stream_on_sse_event, .on_other_ = sg__stream_on_sse_other};
}

size_t sg_stream_buffer_size(const sg_stream_config *cfg) {
    sg_stream_config c;
    if (cfg != NULL) {
        c = *cfg;
    } else {
        memset(&c, 0, sizeof(c));
    }
    c.max_line_ = line_limit(&c);
    size_t n = 0;
    if (c.format_ == SG_FORMAT_SSE) {
        sg_sse_config sc = sse_config(&c);
        n = sg_sse_buffer_size(&sc);
    } else if (c.format_ == SG_FORMAT_NDJSON) {
        n = sg_ndjson_buffer_size(
            &(sg_ndjson_config){c.max_line_, sg__stream_on_ndjson_line, {0}});
    } else if (c.format_ == SG_FORMAT_EVENTSTREAM) {
        sg_es_config ec = es_config(&c);
        n = sg_es_buffer_size(&ec);
    }
    if (n == 0 || c.classify_ == NULL) {
        return n;
    }
    /* (a 32-bit size_t could wrap on the largest limits: refused instead) */
    size_t hold = sg__stream_hold_size(&c);
    size_t other = other_size(&c);
    if (hold > SIZE_MAX - n || other > SIZE_MAX - n - hold) {
        return 0;
    }
    return n + hold + other;
}

/* The parser, with a lent @buf of @parser_size bytes or (@buf NULL)
 * growing stores from the stream's allocator. */
static int parser_init(sg__stream *s, const sg_stream_config *c, void *buf,
                       size_t parser_size) {
    const sg_mem *m = s->mem_;
    if (c->format_ == SG_FORMAT_SSE) {
        /* the stream's callbacks, the same for every stream */
        static const sg__sse_cbs cbs = {.on_event = sg__stream_on_sse_event,
                                        .on_other = sg__stream_on_sse_other};
        sg_sse_config sc = sse_config(c);
        return buf != NULL ? sg__sse_init(&s->parser_.sse, &sc, &cbs, s, buf, parser_size)
                           : sg__sse_init_mem(&s->parser_.sse, &sc, &cbs, s, m);
    }
    if (c->format_ == SG_FORMAT_NDJSON) {
        sg_ndjson_config nc = {c->max_line_, sg__stream_on_ndjson_line, {0}};
        return buf != NULL ? sg_ndjson_init(&s->parser_.nd, &nc, s, buf, parser_size)
                           : sg__ndjson_init_mem(&s->parser_.nd, &nc, s, m);
    }
    sg_es_config ec = es_config(c);
    return buf != NULL ? sg_es_init(&s->parser_.es, &ec, s, buf, parser_size)
                       : sg__es_init_mem(&s->parser_.es, &ec, s, m);
}

/* sg_stream_init with a lent @buf, or (@buf NULL) sg_stream_init_mem. */
static int stream_init(sg__stream *s, const sg_stream_config *cfg, sg_item_cb on_item,
                       void *user_data, void *buf, size_t buf_size, const sg_mem *mem) {
    static const sg_stream_config defaults; /* zero: every default */
    sg_stream_config c = cfg != NULL ? *cfg : defaults;
    if (s == NULL) {
        return SG_EINVAL; /* (the setters refused anything else already) */
    }
    memset(s, 0, sizeof(*s));
    int rv;
    c.max_line_ = line_limit(&c);
    size_t need = sg_stream_buffer_size(&c);
    if (need == 0) {
        return SG_ERANGE;
    }
    if (buf != NULL && buf_size < need) {
        return SG_ENOBUFS;
    }
    if (buf == NULL) {
        s->grows_ = true;
        s->mem_ = mem;
    }
    /* the parser's part first, the held items' after it, then the lines
     * outside SSE */
    size_t parser_size =
        c.classify_ != NULL ? need - sg__stream_hold_size(&c) - other_size(&c) : need;
    rv = parser_init(s, &c, buf, parser_size);
    if (rv != 0) {
        return rv;
    }
    if (c.classify_ != NULL) {
        s->hold_cap_ = sg__stream_hold_size(&c);
        s->other_cap_ = other_size(&c);
        if (buf != NULL) {
            s->hold_ = (char *)buf + parser_size;
            s->other_ = s->hold_ + s->hold_cap_;
            s->hold_room_ = s->hold_cap_;
            s->other_room_ = s->other_cap_;
        }
    }
    s->classify_ = c.classify_;
    s->classify_data_ = c.classify_data_;
    sg__usage_init(s, c.classify_ != NULL && c.usage_classify_ == c.classify_);
    s->meta_at_once_ = c.meta_at_once_;
    s->end_required_ = c.end_required_;
    s->end_at_eof_ = c.classify_ != NULL && c.end_at_eof_;
    s->format_ = (uint8_t)c.format_;
    s->nd_terminal_ = c.format_ == SG_FORMAT_NDJSON ? c.terminal_data_ : NULL;
    s->on_item_ = on_item;
    s->skip_types_ = c.skip_types_;
    s->user_data_ = user_data;
    s->state_ = STREAM_IDLE;
    s->magic_ = SG__STREAM_MAGIC;
    return 0;
}

/* realloc and free */
static const sg_mem k_std_mem = {.resize_ = sg__mem_std};

int sg__stream_init_mem(sg__stream *s, const sg_stream_config *cfg, sg_item_cb on_item,
                        void *user_data) {
    return stream_init(s, cfg, on_item, user_data, NULL, 0, &k_std_mem);
}

/* A public stream's provider texts and allocator: its own storage, after
 * the state. */
static char *public_texts(sg_stream *s) {
    return (char *)s + sizeof(sg__stream);
}
static sg_mem *public_mem(sg_stream *s) {
    return (sg_mem *)(void *)(public_texts(s) + SG__STREAM_PTEXT_SIZE);
}
static void public_init(sg_stream *s) {
    sg__stream *st = sg__stream_of(s);
    st->ptext_ = public_texts(s);
    st->ptext_[0] = '\0';
    st->ptext_[SG__STREAM_PTYPE_SIZE] = '\0';
}

int sg_stream_init(sg_stream *s, const sg_stream_config *cfg, sg_item_cb on_item,
                   void *user_data, void *buf, size_t buf_size) {
    if (buf == NULL) {
        return SG_EINVAL;
    }
    int rv = stream_init(sg__stream_of(s), cfg, on_item, user_data, buf, buf_size, NULL);
    if (rv == 0) {
        public_init(s);
    }
    return rv;
}

int sg_stream_init_mem(sg_stream *s, const sg_stream_config *cfg, sg_item_cb on_item,
                       void *user_data, const sg_mem *mem) {
    const sg_mem *m = &k_std_mem;
    if (s != NULL && mem != NULL && mem->resize_ != NULL) {
        *public_mem(s) = *mem; /* copied: the caller's may go */
        m = public_mem(s);
    }
    int rv = stream_init(sg__stream_of(s), cfg, on_item, user_data, NULL, 0, m);
    if (rv == 0) {
        public_init(s);
    }
    return rv;
}

/* Everything a growing stream holds is freed (the attempt is over, or the
 * stream is): the parser's stores, the held items, the lines outside SSE. */
static void stream_drop(sg__stream *s) {
    if (!s->grows_) {
        return;
    }
    bool clean;
    if (s->format_ == SG_FORMAT_SSE) {
        sg__sse_free(&s->parser_.sse);
    } else if (s->format_ == SG_FORMAT_NDJSON) {
        (void)sg_ndjson_end(&s->parser_.nd, &clean);
    } else {
        (void)sg_es_end(&s->parser_.es, &clean);
    }
    s->hold_n_ = 0;
    s->hold_len_ = 0;
    s->other_len_ = 0;
    sg__stream_store_free(s, &s->hold_, &s->hold_room_);
    sg__stream_store_free(s, &s->other_, &s->other_room_);
}

void sg__stream_release(sg__stream *s) {
    if (valid(s)) {
        stream_drop(s);
        if (s->ptext_own_) {
            size_t room = SG__STREAM_PTEXT_SIZE;
            (void)sg__mem_free(s->mem_, s->ptext_, &room);
            s->ptext_ = NULL;
            s->ptext_own_ = false;
        }
        s->magic_ = 0;
    }
}

int sg__stream_begin(sg__stream *s, const sg_guard_config *gcfg, const sg_budget *budget,
                     uint32_t attempt, int64_t now) {
    if (!valid(s)) {
        return SG_EINVAL;
    }
    int rv = sg_guard_start(&s->guard_, gcfg, budget, now);
    if (rv != 0) {
        return rv;
    }
    if (s->format_ == SG_FORMAT_SSE) {
        sg__sse_reset(&s->parser_.sse);
    } else if (s->format_ == SG_FORMAT_NDJSON) {
        sg_ndjson_reset(&s->parser_.nd);
    } else {
        sg_es_reset(&s->parser_.es);
    }
    s->attempt_ = attempt;
    s->index_ = 0;
    s->cancelled_ = false;
    s->guard_stop_ = false;
    s->nd_terminal_seen_ = false;
    s->got_token_ = false;
    s->provider_error_ = false;
    s->provider_retryable_ = false;
    if (s->ptext_ != NULL) {
        s->ptext_[0] = '\0';
        s->ptext_[SG__STREAM_PTYPE_SIZE] = '\0';
    }
    s->hold_n_ = 0;
    s->hold_len_ = 0;
    s->released_ = 0;
    s->error_text_ = NULL;
    s->end_seen_ = false;
    s->other_len_ = 0;
    sg__usage_init(s, sg__usage_reader(s));              /* nothing read yet */
    sg__stream_store_free(s, &s->hold_, &s->hold_room_); /* an abandoned attempt's */
    sg__stream_store_free(s, &s->other_, &s->other_room_);
    s->error_ = 0;
    s->now_ = now;
    s->state_ = STREAM_RUNNING;
    return 0;
}

sg_guard *sg__stream_guard(sg__stream *s) {
    return valid(s) ? &s->guard_ : NULL;
}

int64_t sg__stream_next_deadline(const sg__stream *s) {
    if (!valid(s) || !sg__guard_started(&s->guard_)) {
        return -1;
    }
    return sg_guard_running(&s->guard_) ? sg_guard_next_deadline(&s->guard_)
                                        : SG_TIME_NEVER;
}

int sg__stream_feed(sg__stream *s, const void *data, size_t len, int64_t now) {
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
    if (s->provider_error_) {
        return SG_EPROVIDER;
    }
    s->now_ = now;
    if (len > PTRDIFF_MAX) {
        /* as the parser would refuse it, before any byte is counted */
        s->error_ = SG_EINVAL;
        s->stop_at_ = now;
        return s->error_;
    }
    int rv = sg_guard_on_bytes(&s->guard_, now, len);
    if (rv != 0) {
        s->guard_stop_ = true;
        return rv;
    }
    ptrdiff_t fed = s->format_ == SG_FORMAT_SSE ? sg__sse_feed(&s->parser_.sse, data, len)
                    : s->format_ == SG_FORMAT_NDJSON
                        ? sg_ndjson_feed(&s->parser_.nd, data, len)
                        : sg_es_feed(&s->parser_.es, data, len);
    if (fed < 0 && s->nd_terminal_seen_) {
        return at_terminal(s, now); /* the terminal line, or a profile's end */
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
        if (s->error_ != 0) {
            return s->error_; /* set by the stream itself (held items) */
        }
        if (s->provider_error_) {
            return SG_EPROVIDER;
        }
        s->error_ = (int)fed;
        s->stop_at_ = now;
        return s->error_;
    }
    if (s->format_ == SG_FORMAT_SSE && sg__sse_terminal_seen(&s->parser_.sse)) {
        return at_terminal(s, now);
    }
    return 0;
}

static int stream_end(sg__stream *s, int64_t now, sg_outcome how,
                      sg_guard_result *result) {
    if (s->state_ == STREAM_TERMINAL) {
        if (result != &s->result_) { /* (a lifecycle reads it in place) */
            *result = s->result_;
        }
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
        /* the peer passed a limit; or memory ran out here, no fault of it */
        return sg_guard_fail(&s->guard_, s->stop_at_,
                             s->error_ == SG_ENOMEM ? SG_OUTCOME_TRANSPORT_ERROR
                                                    : SG_OUTCOME_PROTOCOL_ERROR,
                             result);
    }
    if (s->provider_error_) {
        return sg_guard_fail(&s->guard_, s->stop_at_, SG_OUTCOME_PROVIDER_ERROR, result);
    }
    if (how == SG_OUTCOME_OK) {
        bool clean = false;
        if (s->format_ == SG_FORMAT_SSE) {
            sg__sse_end(&s->parser_.sse, &clean);
            if (s->other_len_ > 0 && !s->cancelled_ && !s->guard_stop_) {
                /* its last line, unterminated, outside SSE: an error? */
                s->now_ = now;
                if (sg__stream_settle_other(s) != 0) {
                    return sg_guard_fail(&s->guard_, s->stop_at_,
                                         SG_OUTCOME_PROVIDER_ERROR, result);
                }
            }
        } else if (s->format_ == SG_FORMAT_NDJSON) {
            sg_ndjson_end(&s->parser_.nd, &clean);
            /* with a terminal line configured, only it is a clean end */
            clean = clean && s->nd_terminal_ == NULL;
        } else {
            sg_es_end(&s->parser_.es, &clean); /* a message cut short: not */
        }
        if (s->end_at_eof_) {
            clean = clean && s->end_seen_; /* the end item, then the body's end */
        } else if (s->end_required_ && s->classify_ != NULL) {
            clean = false; /* an SG_ITEM_END would have decided it already */
        }
        return sg_guard_finish(&s->guard_, now, clean, result);
    }
    return sg_guard_fail(&s->guard_, now, how, result);
}

int sg__stream_end(sg__stream *s, int64_t now, sg_outcome how, sg_guard_result *result) {
    if (!valid(s) || result == NULL || (unsigned)how >= (unsigned)SG_OUTCOME_COUNT_) {
        return SG_EINVAL;
    }
    if (s->state_ == STREAM_RUNNING && s->other_len_ > 0 && !s->cancelled_ &&
        s->error_ == 0 && !s->provider_error_ && !s->guard_stop_) {
        /* the body ended after lines outside SSE: an error written bare */
        s->now_ = now;
        sg__stream_settle_other(s);
    }
    int rv = stream_end(s, now, how, result);
    stream_drop(s); /* nothing of the body is needed past its end */
    if (rv == 0) {
        /* the items the consumer got: the guard's, and the metadata held
         * before the first item and delivered with it */
        result->items += s->released_;
        if (s->classify_ != NULL && !s->got_token_) {
            result->first_item_ns = -1; /* an end, and what followed it: no token */
        }
    }
    return rv;
}

int sg__stream_cancel(sg__stream *s, int64_t now) {
    if (!valid(s)) {
        return SG_EINVAL;
    }
    if (s->state_ != STREAM_RUNNING) {
        return SG_ESTATE;
    }
    if (!s->cancelled_) {
        s->cancelled_ = true;
        s->stop_at_ = now;
    }
    return 0;
}

const char *sg__stream_error_text(const sg__stream *s) {
    return valid(s) ? s->error_text_ : NULL;
}

static bool stream_terminal_seen(const sg__stream *s) {
    /* (end_seen_: a classifier's end item under end_at_eof, which reads on
     * to the body's end) */
    return valid(s) &&
           (s->state_ == STREAM_TERMINAL || (s->state_ != STREAM_IDLE && s->end_seen_) ||
            (s->format_ == SG_FORMAT_SSE && s->state_ != STREAM_IDLE &&
             sg__sse_terminal_seen(&s->parser_.sse)));
}

bool sg__stream_active(const sg__stream *s) {
    return valid(s) && (s->state_ == STREAM_RUNNING || s->state_ == STREAM_TERMINAL);
}

bool sg__stream_provider_error(const sg__stream *s, const char **type,
                               const char **message, bool *retryable) {
    if (!valid(s) || !s->provider_error_) {
        return false;
    }
    /* (no texts: there was no memory for them) */
    if (type != NULL) {
        *type = s->ptext_ != NULL ? s->ptext_ : "";
    }
    if (message != NULL) {
        *message = s->ptext_ != NULL ? s->ptext_ + SG__STREAM_PTYPE_SIZE : "";
    }
    if (retryable != NULL) {
        *retryable = s->provider_retryable_;
    }
    return true;
}

bool sg__stream_classify_error_body(const sg__stream *s, const char *body, size_t len,
                                    sg_item_error *err) {
    if (err != NULL) {
        memset(err, 0, sizeof(*err));
    }
    if (!valid(s) || s->classify_ == NULL || body == NULL || err == NULL) {
        return false;
    }
    /* an error event, as the providers' in-band errors are named */
    sg_item it = {"error", 5, body, len, "", 0, s->attempt_, 0, 0};
    if (s->classify_(&it, err, s->classify_data_) != SG_ITEM_ERROR) {
        memset(err, 0, sizeof(*err));
        return false;
    }
    if (err->final) {
        err->retryable = false;
    }
    return true;
}

/* ------------------------------------------------ the public sg_stream */

void sg_stream_release(sg_stream *s) {
    sg__stream_release(sg__stream_of(s));
}

int sg_stream_begin(sg_stream *s, const sg_guard_config *gcfg, const sg_budget *budget,
                    uint32_t attempt, int64_t now) {
    return sg__stream_begin(sg__stream_of(s), gcfg, budget, attempt, now);
}

sg_guard *sg_stream_guard(sg_stream *s) {
    return sg__stream_guard(sg__stream_of(s));
}

int64_t sg_stream_next_deadline(const sg_stream *s) {
    return sg__stream_next_deadline(sg__stream_cof(s));
}

int sg_stream_feed(sg_stream *s, const void *data, size_t len, int64_t now) {
    return sg__stream_feed(sg__stream_of(s), data, len, now);
}

int sg_stream_end(sg_stream *s, int64_t now, sg_outcome how, sg_guard_result *result) {
    return sg__stream_end(sg__stream_of(s), now, how, result);
}

int sg_stream_cancel(sg_stream *s, int64_t now) {
    return sg__stream_cancel(sg__stream_of(s), now);
}

const char *sg_stream_error_text(const sg_stream *s) {
    return sg__stream_error_text(sg__stream_cof(s));
}

bool sg_stream_terminal_seen(const sg_stream *s) {
    return stream_terminal_seen(sg__stream_cof(s));
}

bool sg_stream_active(const sg_stream *s) {
    return sg__stream_active(sg__stream_cof(s));
}

bool sg_stream_provider_error(const sg_stream *s, const char **type, const char **message,
                              bool *retryable) {
    return sg__stream_provider_error(sg__stream_cof(s), type, message, retryable);
}

bool sg_stream_classify_error_body(const sg_stream *s, const char *body, size_t len,
                                   sg_item_error *err) {
    return sg__stream_classify_error_body(sg__stream_cof(s), body, len, err);
}
