/*
 * What each unit a parser produces becomes, for sg_stream (stream.c): an
 * SSE event, an NDJSON line or an event-stream message is turned into an
 * item for the consumer, a keepalive dropped, metadata held, a provider
 * error that ends the attempt, or the clean end.  The three formats meet
 * a provider profile's classifier here, at one point (take), because
 * that is where "progress" is decided:
 *
 *  - Without a classifier every event, line or message is content: each
 *    is an item, and the guard counts it (its first-item and idle clocks).
 *  - Under a profile the classifier names the kind.  A keepalive is not
 *    progress: dropped, no clock sees it.  Metadata before the first
 *    token (a role chunk, message_start) is held, unseen by the clock -
 *    time to first token is the first *token* - and handed over, in order,
 *    just before that token, or at the clean end if none came: nothing the
 *    server sent is lost.  What is held is bounded by
 *    SG_STREAM_HOLD_MAX_ITEMS items and max_event bytes, fixed up front
 *    (sg_stream_buffer_size): past that the attempt ends protocol_error.
 *    An error item (the provider's in-band error) ends the attempt
 *    provider_error; an end item is the clean end (under end_at_eof, the
 *    clean end if the body ends next).
 *  - SSE: events of a skip type are no items.  Lines outside any event
 *    (other_json: Gemini writes an error object bare) are gathered, up to
 *    max_event bytes, and classified as one item at the next event or at
 *    the body's end; anything but an error is dropped, as SSE drops them.
 *  - AWS event-stream: a message of :message-type exception (the name in
 *    :exception-type, a JSON "message" in the payload) or error
 *    (:error-code, :error-message) ends the attempt provider_error, with
 *    or without a classifier; throttling and service-unavailable ones are
 *    transient, worth a retry before the first token.
 *
 * Tested through sg_stream by tests/unit/stream_classify_test.c (held
 * metadata, keepalives, end and error items), stream_test.c (skip types),
 * profile_test.c (lines outside SSE) and bedrock_profile_test.c
 * (exceptions and error messages).
 */
#include "framing/stream_items.h"
#include "framing/usage.h"

#include <string.h>

#include "framing/jscan.h"
#include "framing/mem.h"

/* Hands @item to the consumer (the guard has counted it already), with
 * its index: the item is the caller's own copy, numbered in place. */
static int to_consumer(sg__stream *s, sg_item *item) {
    item->index = s->index_;
    if (s->on_item_ != NULL && s->on_item_(item, s->user_data_) != 0) {
        s->cancelled_ = true;
        s->stop_at_ = s->now_;
        return 1;
    }
    s->index_++;
    return 0;
}

static int deliver(sg__stream *s, sg_item *item) {
    int rv = sg_guard_on_item(&s->guard_, s->now_);
    if (rv != 0) {
        s->guard_stop_ = true; /* late or over the cap: latched in the guard */
        return 1;
    }
    return to_consumer(s, item);
}

/* --------------------------------------- items before the first token */

/* A held item: its three lengths, then its bytes (event, data, id). */
typedef struct held {
    uint32_t event_len, data_len, id_len;
} held;

/* A framing limit passed, or no memory for what must be kept: the
 * attempt ends here (protocol_error, or transport_error for SG_ENOMEM). */
static int stream_error(sg__stream *s, int code, const char *text) {
    s->error_ = code;
    s->error_text_ = text;
    s->stop_at_ = s->now_;
    return 1;
}

/* Room for @need bytes in a growing store (@need within its bound): 0, or
 * 1 with the attempt ended out of memory. */
static int stream_room(sg__stream *s, char **store, size_t *room, size_t need,
                       size_t limit) {
    if (need <= *room) {
        return 0;
    }
    char *p = sg__mem_grow(s->grows_ ? s->mem_ : NULL, *store, room, need, limit);
    if (p == NULL) {
        return stream_error(s, SG_ENOMEM, NULL);
    }
    *store = p;
    return 0;
}

/* A growing store that holds nothing is freed (a lent buffer's part stays). */
void sg__stream_store_free(sg__stream *s, char **store, size_t *room) {
    if (s->grows_) {
        *store = sg__mem_free(s->mem_, *store, room);
    }
}

static int hold(sg__stream *s, const sg_item *item) {
    size_t bytes = item->event_len + item->data_len + item->id_len;
    size_t need = sizeof(held) + bytes;
    /* the items' bytes at most max_event, their records aside */
    size_t max_bytes = s->hold_cap_ - SG_STREAM_HOLD_MAX_ITEMS * sizeof(held);
    size_t held_bytes = s->hold_len_ - s->hold_n_ * sizeof(held);
    if (s->hold_n_ == SG_STREAM_HOLD_MAX_ITEMS || bytes > max_bytes - held_bytes ||
        need > s->hold_cap_ - s->hold_len_) {
        /* metadata beyond the framing's bound: a protocol error */
        return stream_error(s, SG_EEVENT_TOO_LARGE,
                            "more metadata than can be held before the first token "
                            "(1024 items or max_event bytes): no token came - is the "
                            "profile the right one for this stream?");
    }
    if (stream_room(s, &s->hold_, &s->hold_room_, s->hold_len_ + need, s->hold_cap_) !=
        0) {
        return 1;
    }
    held h = {(uint32_t)item->event_len, (uint32_t)item->data_len,
              (uint32_t)item->id_len};
    char *p = s->hold_ + s->hold_len_;
    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    memcpy(p, item->event, item->event_len);
    memcpy(p + item->event_len, item->data, item->data_len);
    memcpy(p + item->event_len + item->data_len, item->id, item->id_len);
    s->hold_len_ += need;
    s->hold_n_++;
    return 0;
}

/* What was held goes to the consumer, in order (the guard counted none of
 * it).  Non-zero when the consumer stopped. */
int sg__stream_release_held(sg__stream *s) {
    size_t off = 0;
    for (uint32_t k = 0; k < s->hold_n_; k++) {
        held h;
        memcpy(&h, s->hold_ + off, sizeof(h));
        const char *p = s->hold_ + off + sizeof(h);
        sg_item it = {p,
                      h.event_len,
                      p + h.event_len,
                      h.data_len,
                      p + h.event_len + h.data_len,
                      h.id_len,
                      s->attempt_,
                      0,
                      SG_ITEM_META};
        off += sizeof(h) + h.event_len + h.data_len + h.id_len;
        s->released_++; /* the guard counted none of them */
        if (to_consumer(s, &it) != 0) {
            return 1;
        }
    }
    s->hold_n_ = 0;
    s->hold_len_ = 0;
    sg__stream_store_free(s, &s->hold_, &s->hold_room_);
    return 0;
}

/* The first item the consumer gets, with what was held before it: the
 * clocks see it (a late one is too late; the idle clock starts).  It is
 * the first token unless it is an end (@token false): an end before any
 * token, or what follows it (end_at_eof), is no content, and the result
 * then says no token came (sg_stream_end). */
static int first_item(sg__stream *s, sg_item *item, bool token) {
    int rv = sg_guard_on_item(&s->guard_, s->now_);
    if (rv != 0) {
        s->guard_stop_ = true;
        return 1;
    }
    s->got_token_ = token;
    return sg__stream_release_held(s) != 0 ? 1 : to_consumer(s, item);
}

/* A bounded, NUL-terminated copy of a view (NULL: ""). */
static void copy_cut(char *dst, size_t cap, const char *p, size_t n) {
    n = p == NULL ? 0 : n < cap - 1 ? n : cap - 1;
    if (n > 0) {
        memcpy(dst, p, n);
    }
    dst[n] = '\0';
}

/* The server reported a failure in the stream: the attempt ends here.
 * Its texts go where the stream keeps them, allocated at the first
 * (a stream embedded in a transport's operation holds none before). */
static void provider_failed(sg__stream *s, const sg_item_error *err) {
    if (s->ptext_ == NULL && s->grows_) {
        size_t room = 0;
        s->ptext_ = sg__mem_grow(s->mem_, NULL, &room, SG__STREAM_PTEXT_SIZE,
                                 SG__STREAM_PTEXT_SIZE);
        s->ptext_own_ = s->ptext_ != NULL;
    }
    if (s->ptext_ != NULL) { /* (else no memory: the error stays, its texts "") */
        copy_cut(s->ptext_, SG__STREAM_PTYPE_SIZE, err->type, err->type_len);
        copy_cut(s->ptext_ + SG__STREAM_PTYPE_SIZE,
                 SG__STREAM_PTEXT_SIZE - SG__STREAM_PTYPE_SIZE, err->message,
                 err->message_len);
    }
    s->provider_retryable_ = err->retryable && !err->final; /* final: never */
    s->provider_error_ = true;
    s->stop_at_ = s->now_;
}

/* Every parsed item: as the classifier says (without one, a token). */
static int take(sg__stream *s, sg_item *item) {
    if (s->classify_ == NULL) {
        return deliver(s, item);
    }
    sg_item_error err;
    memset(&err, 0, sizeof(err));
    /* a profile's classifier reads the attempt's usage too (usage.h) */
    sg_item_kind k =
        s->classify_(item, &err, sg__usage_reader(s) ? s->usage_ : s->classify_data_);
    if (k == SG_ITEM_KEEPALIVE) {
        return 0;
    }
    if (k == SG_ITEM_ERROR) {
        provider_failed(s, &err);
        return 1;
    }
    if ((unsigned)k > (unsigned)SG_ITEM_END_TOKEN) {
        k = SG_ITEM_TOKEN; /* no kind at all: content, as without a classifier */
    }
    item->kind = (uint8_t)k;
    if (k == SG_ITEM_META && !s->got_token_ && !s->meta_at_once_ && !s->end_seen_) {
        return hold(s, item); /* (after the end nothing waits for a token) */
    }
    int rv = s->got_token_ ? deliver(s, item)
                           : first_item(s, item, k != SG_ITEM_END && !s->end_seen_);
    if (rv == 0 && (k == SG_ITEM_END || k == SG_ITEM_END_TOKEN)) {
        if (s->end_at_eof_) {
            s->end_seen_ = true; /* ok if the body ends now: read on */
            return 0;
        }
        s->nd_terminal_seen_ = true; /* decided ok: the rest is ignored */
        return 1;
    }
    return rv;
}

/* An event type the caller declared "not an item" (a keepalive event). */
static bool skipped(const sg__stream *s, const char *type, size_t len) {
    for (const char *const *t = s->skip_types_; t != NULL && *t != NULL; t++) {
        if (strlen(*t) == len && memcmp(*t, type, len) == 0) {
            return true;
        }
    }
    return false;
}

/* Lines outside SSE (other_json): gathered, LF-joined, up to other_cap_
 * bytes; past that the rest of them is dropped. */
int sg__stream_on_sse_other(const char *line, size_t len, void *user_data) {
    sg__stream *s = user_data;
    if (s->other_cap_ == 0) {
        return 0;
    }
    size_t room = s->other_cap_ - s->other_len_;
    size_t n = len + 1 <= room ? len : room > 0 ? room - 1 : 0;
    if (room > 0) {
        if (stream_room(s, &s->other_, &s->other_room_, s->other_len_ + n + 1,
                        s->other_cap_) != 0) {
            return 1;
        }
        memcpy(s->other_ + s->other_len_, line, n);
        s->other_[s->other_len_ + n] = '\n';
        s->other_len_ += n + 1;
    }
    return 0;
}

/* What was gathered outside SSE, classified as one item: an error ends
 * the attempt (returns 1); anything else is dropped. */
int sg__stream_settle_other(sg__stream *s) {
    if (s->other_len_ == 0) {
        return 0;
    }
    sg_item it = {"", 0, s->other_, s->other_len_, "", 0, s->attempt_, s->index_, 0};
    sg_item_error err;
    memset(&err, 0, sizeof(err));
    sg_item_kind k = s->classify_(&it, &err, s->classify_data_);
    s->other_len_ = 0;
    if (k == SG_ITEM_ERROR) {
        provider_failed(s, &err); /* (copies err's views, into other_) */
    }
    sg__stream_store_free(s, &s->other_, &s->other_room_);
    return k == SG_ITEM_ERROR ? 1 : 0;
}

int sg__stream_on_sse_event(const sg_sse_event *ev, void *user_data) {
    sg__stream *s = user_data;
    sg_item item = {ev->type,   ev->type_len, ev->data,  ev->data_len, ev->id,
                    ev->id_len, s->attempt_,  s->index_, SG_ITEM_TOKEN};
    if (s->classify_ == NULL && s->skip_types_ == NULL) {
        return deliver(s, &item); /* per event: every one a token */
    }
    if (s->other_len_ > 0 && sg__stream_settle_other(s) != 0) {
        return 1;
    }
    if (s->skip_types_ != NULL && skipped(s, ev->type, ev->type_len)) {
        return 0;
    }
    return take(s, &item);
}

int sg__stream_on_ndjson_line(const char *line, size_t len, void *user_data) {
    sg__stream *s = user_data;
    const char *t = s->nd_terminal_;
    if (t != NULL && strlen(t) == len && memcmp(t, line, len) == 0) {
        /* The terminal line: the clean end, not delivered (as SSE's
         * terminal_data).  Stop here: what follows is ignored. */
        s->nd_terminal_seen_ = true;
        return 1;
    }
    sg_item item = {"", 0, line, len, "", 0, s->attempt_, s->index_, SG_ITEM_TOKEN};
    return take(s, &item);
}

/* ------------------------------------------------------- event stream */

static bool view_is(const char *p, size_t n, const char *lit) {
    size_t l = strlen(lit);
    return p != NULL && n == l && memcmp(p, lit, l) == 0;
}

/* A string header's value, or nothing. */
static void es_string(const sg_es_message *m, const char *name, const char **p,
                      size_t *n) {
    sg_es_header h;
    if (sg_es_header_find(m, name, strlen(name), &h) == 1 && h.type == SG_ES_STRING) {
        *p = (const char *)h.value;
        *n = h.value_len;
    }
}

/* An exception or error message: the attempt ends provider_error.  AWS's
 * streaming APIs put the exception's name in :exception-type and a JSON
 * {"message": ...} in the payload; an error message carries :error-code
 * and :error-message headers instead. */
static int es_failed(sg__stream *s, const sg_es_message *m, bool exception) {
    static const sg__jpath p_message = SG__JPATH1("message");
    static const sg__jpath p_message_cap = SG__JPATH1("Message");
    sg_item_error err;
    memset(&err, 0, sizeof(err));
    if (exception) {
        err.type = m->exception_type;
        err.type_len = m->exception_type_len;
        sg__jval v;
        const char *pl = (const char *)m->payload;
        if ((sg__jscan_find(pl, m->payload_len, &p_message, &v) ||
             sg__jscan_find(pl, m->payload_len, &p_message_cap, &v)) &&
            v.type == SG__JSTRING) {
            err.message = v.p;
            err.message_len = v.n;
        }
    } else {
        es_string(m, ":error-code", &err.type, &err.type_len);
        es_string(m, ":error-message", &err.message, &err.message_len);
    }
    if (err.type == NULL || err.type_len == 0) {
        err.type = exception ? "exception" : "error";
        err.type_len = strlen(err.type);
    }
    /* transient: worth a retry before the first token */
    err.retryable = view_is(err.type, err.type_len, "throttlingException") ||
                    view_is(err.type, err.type_len, "serviceUnavailableException") ||
                    view_is(err.type, err.type_len, "ThrottlingException") ||
                    view_is(err.type, err.type_len, "ServiceUnavailableException");
    provider_failed(s, &err);
    return 1;
}

int sg__stream_on_es_message(const sg_es_message *m, void *user_data) {
    sg__stream *s = user_data;
    if (view_is(m->message_type, m->message_type_len, "exception")) {
        return es_failed(s, m, true);
    }
    if (view_is(m->message_type, m->message_type_len, "error")) {
        return es_failed(s, m, false);
    }
    const char *type = m->event_type != NULL ? m->event_type : "";
    if (s->skip_types_ != NULL && skipped(s, type, m->event_type_len)) {
        return 0;
    }
    sg_item item = {type,
                    m->event_type_len,
                    (const char *)m->payload,
                    m->payload_len,
                    "",
                    0,
                    s->attempt_,
                    s->index_,
                    SG_ITEM_TOKEN};
    return take(s, &item);
}

/* Room for the items held before the first token (after the parser's). */
size_t sg__stream_hold_size(const sg_stream_config *c) {
    size_t ev = c->max_event_ != 0 ? c->max_event_ : SG_FRAMING_DEFAULT_MAX_EVENT;
    return ev + SG_STREAM_HOLD_MAX_ITEMS * sizeof(held);
}
