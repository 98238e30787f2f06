/*
 * streamguard stream: one attempt's response body, framed into items and
 * timed by a guard - the piece every transport shares, and the one to use
 * when you own the socket and the event loop yourself.
 *
 *   bytes ──▶ sg_stream_feed ──▶ framing (SSE / NDJSON) ──item──▶ guard ──▶ your callback
 *
 * An sg_stream joins an SSE or NDJSON parser to an sg_guard: every body
 * byte counts toward the byte cap (never toward the idle clock), every item
 * is checked against the clocks before it is delivered, and the terminal
 * sentinel ends the attempt cleanly the instant it arrives.  Sans-I/O and
 * libc only.  With sg_stream_init nothing is allocated: the caller lends
 * one buffer sized for the limits (sg_stream_buffer_size).  With
 * sg_stream_init_mem the stream's buffers grow from an allocator as bytes
 * must be kept and are freed as they empty, so a quiet stream holds none.
 * The items it delivers, the config that frames them (sg_stream_config)
 * and the provider profiles are in <streamguard/stream_config.h>, which
 * this file includes.
 *
 * Thread-safety: plain data owned by the caller; reentrant functions that
 * touch only the stream they are given (and call its callbacks on the
 * calling thread).
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_STREAM_H
#define STREAMGUARD_STREAM_H

#include <streamguard/core.h>
#include <streamguard/framing.h>
#include <streamguard/stream_config.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * sg_stream - one attempt's body: a parser joined to a guard.  Embed it;
 * initialise it with sg_stream_init() (a zero-initialised sg_stream is
 * refused by every other call with SG_EINVAL).  Fields are private.
 */
typedef struct sg_stream {
    /* private: storage the library keeps its state in, in a form of its
     * own (src/framing/body.h); the fields below fix its size and
     * alignment for the ABI, not what each byte holds */
    sg_guard guard_;
    union {
        sg_sse_parser sse;
        sg_ndjson_parser nd;
        sg_es_decoder es;
    } parser_;
    sg_item_cb on_item_;
    const char *const *skip_types_;
    void *user_data_;
    int64_t now_;
    uint64_t index_;
    uint32_t attempt_, magic_;
    uint8_t format_, state_;
    bool cancelled_, guard_stop_;
    int error_;
    int64_t stop_at_;
    const char *nd_terminal_;
    bool nd_terminal_seen_;
    sg_guard_result result_;
    sg_classify_cb classify_;
    void *classify_data_;
    bool meta_at_once_, end_required_, got_token_;
    char *hold_;
    size_t hold_cap_, hold_room_, hold_len_;
    uint32_t hold_n_;
    uint64_t released_;
    const char *error_text_;
    bool end_at_eof_, end_seen_;
    char *other_;
    size_t other_cap_, other_len_, other_room_;
    sg_mem mem_;
    bool grows_, provider_error_, provider_retryable_;
    char provider_type_[SG_STREAM_ERROR_TYPE_MAX + 1];
    char provider_message_[SG_STREAM_ERROR_MESSAGE_MAX + 1];
    union {
        void *reserved_[8]; /* private: room to grow */
        /* private: the attempt's usage as a provider profile reads it
         * (src/framing/usage.h) */
        uint32_t usage_[8];
    };
} sg_stream;

/**
 * sg_stream_buffer_size - the buffer sg_stream_init needs for @cfg.
 *
 * @cfg: the framing; NULL means defaults.  Only format, max_line,
 *   max_event and classify matter (a classifier adds room for the items
 *   held before the first token: max_event bytes and their records).
 *
 * Returns the size in bytes (SG_SSE_BUFFER_SIZE, SG_NDJSON_BUFFER_SIZE or
 * SG_ES_BUFFER_SIZE of the effective limits), or 0 when a limit is out of
 * range or the format is unknown.
 * Thread-safety: pure function.
 */
SG_EXTERN size_t sg_stream_buffer_size(const sg_stream_config *cfg);

/**
 * sg_stream_init - prepare @s; call sg_stream_begin for each attempt.
 *
 * @cfg: framing (NULL = defaults), copied except the sentinel strings.
 * @on_item, @user_data: the consumer; @on_item may be NULL.
 * @buf, @buf_size: at least sg_stream_buffer_size(@cfg) bytes, lent to the
 *   stream until the caller stops using it; never freed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @s or @buf is NULL;
 *   SG_ERANGE   the limits of @cfg together need more than a size_t holds
 *               (a 32-bit system);
 *   SG_ENOBUFS  @buf_size is too small;
 *   SG_EUNSUPPORTED  SG_FORMAT_EVENTSTREAM in a library built without it
 *               (SG_WITH_EVENTSTREAM=OFF).
 * On success @s is reset: no attempt runs until sg_stream_begin.
 * Thread-safety: touches only @s and @buf.
 */
SG_EXTERN int sg_stream_init(sg_stream *s, const sg_stream_config *cfg,
                             sg_item_cb on_item, void *user_data, void *buf,
                             size_t buf_size);

/**
 * sg_stream_init_mem - as sg_stream_init, but no buffer is lent: the stream
 * keeps what spans reads - a partial line, an event whose lines arrive in
 * different reads, the last event id, a message that spans reads, the
 * items held before the first token, the lines outside SSE - in buffers
 * that grow from @mem as they are used and are freed as soon as they hold
 * nothing.  A quiet stream between items holds none (the last SSE event
 * id excepted, when the server sends one); a stream never holds more than
 * sg_stream_buffer_size(@cfg) bytes of them, so the limits stay the bound
 * and exceeding one is the same error.  This is what every transport uses.
 *
 * @mem: the allocator, copied; NULL or a NULL resize means realloc and
 *   free.  When it has no memory for bytes the stream must keep,
 *   sg_stream_feed returns SG_ENOMEM and the attempt ends transport_error
 *   (no fault of the peer; sg_stream_error_text is NULL).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @s is NULL;
 *   SG_ERANGE, SG_EUNSUPPORTED  as sg_stream_init.
 * Nothing is allocated here.  Free what the stream holds with
 * sg_stream_release once it is no longer used; sg_stream_end frees it too
 * (nothing of a body is kept past its end).  @s must not be moved or
 * copied while initialised (the parser points into it).
 * Thread-safety: touches only @s; @mem is called on the thread that feeds.
 */
SG_EXTERN int sg_stream_init_mem(sg_stream *s, const sg_stream_config *cfg,
                                 sg_item_cb on_item, void *user_data, const sg_mem *mem);

/**
 * sg_stream_release - free what a stream made by sg_stream_init_mem holds;
 * for one made by sg_stream_init it does nothing to the lent buffer.
 * Either way @s is no longer initialised afterwards (every call but
 * sg_stream_init* refuses it with SG_EINVAL).  NULL or an uninitialised
 * stream is fine.
 */
SG_EXTERN void sg_stream_release(sg_stream *s);

/**
 * sg_stream_begin - start attempt @attempt at @now: resets the parser (a new
 * body; the last event id starts empty) and starts the guard with @gcfg
 * under @budget (NULL for none), in phase "connect".  Report later phases
 * with sg_guard_set_phase(sg_stream_guard(s), ...).
 *
 * It may be called in any state of an initialised stream: an attempt that
 * was not ended with sg_stream_end is abandoned without a result.
 * @attempt: the 1-based number copied into each sg_item.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (and then @s is unchanged):
 *   SG_EINVAL  @s not initialised, or sg_guard_start refused @gcfg/@budget
 *              (@gcfg NULL or invalid, @budget never started).
 */
SG_EXTERN int sg_stream_begin(sg_stream *s, const sg_guard_config *gcfg,
                              const sg_budget *budget, uint32_t attempt, int64_t now);

/**
 * sg_stream_guard - the attempt's guard, for sg_guard_set_phase,
 * sg_guard_next_deadline, sg_guard_check and the getters.  End the attempt
 * with sg_stream_end, not sg_guard_finish or sg_guard_fail (sg_stream_end
 * would then fail with SG_ESTATE).
 *
 * Returns a pointer into @s, valid as long as @s; NULL when @s is NULL or
 * not initialised.  Before the first sg_stream_begin the guard was never
 * started (sg_guard_running is false).
 */
SG_EXTERN sg_guard *sg_stream_guard(sg_stream *s);

/**
 * sg_stream_next_deadline - the instant the running attempt's earliest
 * clock (or its budget) expires: sg_guard_next_deadline of its guard, the
 * one instant to arm a timer for.
 *
 * Returns it while an attempt's guard runs; SG_TIME_NEVER when no clock
 * is armed (none configured, or the attempt has stopped or ended); -1
 * when @s is NULL, not initialised, or has never begun an attempt.
 */
SG_EXTERN int64_t sg_stream_next_deadline(const sg_stream *s);

/**
 * sg_stream_feed - @len body bytes arrived at @now.
 *
 * Counts them on the guard (byte cap; the idle clock is NOT reset), frames
 * them, checks each item against the clocks and the item cap, and delivers
 * it.  When the terminal sentinel arrives the attempt is decided: the guard
 * finishes ok at @now and the result is kept for sg_stream_end; later bytes
 * are ignored.
 *
 * Returns 0 while the stream goes on, 1 once the terminal sentinel has been
 * seen (the attempt is ok; stop reading when convenient), or one of the
 * following negative error codes (the attempt must end: call sg_stream_end
 * with the transport's view, which reports the right outcome):
 *   SG_ETIMEDOUT         a clock or the budget had expired by @now;
 *   SG_ECAP              the item or byte cap is exceeded;
 *   SG_ECANCELED         the consumer returned non-zero (returned again
 *                        by every later call of the attempt);
 *   SG_ELINE_TOO_LONG, SG_EEVENT_TOO_LARGE  the peer exceeded a limit
 *                        (outcome protocol_error; returned again by every
 *                        later call of the attempt);
 *   SG_ENOMEM            (sg_stream_init_mem) no memory for bytes the
 *                        stream must keep: outcome transport_error,
 *                        returned again by every later call of the
 *                        attempt;
 *   SG_EPROVIDER         the classifier found an in-band error
 *                        (SG_ITEM_ERROR: outcome provider_error; returned
 *                        again by every later call of the attempt);
 *   the event-stream decoder's codes (SG_EPRELUDE_CRC and the others of
 *                        framing.h) for SG_FORMAT_EVENTSTREAM: outcome
 *                        protocol_error, returned again likewise;
 *   SG_ESTATE            the attempt already ended (or never began), or an
 *                        earlier call returned SG_ETIMEDOUT or SG_ECAP;
 *   SG_EINVAL            @s is not initialised, or @data is NULL with @len
 *                        > 0.  (A @len above PTRDIFF_MAX is refused by the
 *                        parser: SG_EINVAL, kept as the attempt's framing
 *                        error, so it ends as protocol_error.)
 * For NDJSON the sentinel is a terminal_data line or a classifier's
 * SG_ITEM_END; without either it never returns 1.
 * Thread-safety: touches only @s; the item callback runs on the calling
 * thread, inside this call.
 */
SG_EXTERN int sg_stream_feed(sg_stream *s, const void *data, size_t len, int64_t now);

/**
 * sg_stream_end - the attempt ended at @now; @how is what the transport saw:
 *   SG_OUTCOME_OK         the body ended normally (end of data);
 *   SG_OUTCOME_TRUNCATED  the connection or stream broke mid-body;
 *   anything else         that outcome (http_error, transport_error,
 *                         connect_timeout from the OS...).
 *
 * The first cause wins, in this order: a terminal already seen → ok (the
 * result decided when it arrived; @how is ignored); a clock expiry or a cap
 * latched while feeding → that outcome; the consumer's cancel → cancelled,
 * and a framing error → protocol_error, each judged at the instant it
 * happened (a deadline passing between it and this call is not the cause);
 * a deadline that passed by @now → that clock's outcome (so call this at
 * the instant the attempt ended).  Otherwise @how decides; for SG_OUTCOME_OK the end is
 * clean when the sentinel was seen (or, with none configured, when no partial line or
 * event remains), else the outcome is truncated.
 *
 * @result->items counts the items the consumer was given: under a
 * classifier, the metadata held before the first token and delivered with
 * it too (the guard's own count, for the clocks and the cap, leaves them
 * out); keepalives never.
 *
 * Returns 0 and fills *@result if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL  @s not initialised, @result NULL or @how out of range;
 *   SG_ESTATE  the attempt already ended, or never began (or its guard was
 *              finished directly).
 * Thread-safety: touches only @s and @result.
 */
SG_EXTERN int sg_stream_end(sg_stream *s, int64_t now, sg_outcome how,
                            sg_guard_result *result);

/**
 * sg_stream_terminal_seen - did the current attempt's terminal sentinel
 * arrive?
 *
 * Returns true once it has (also after sg_stream_end, until the next
 * sg_stream_begin) - for NDJSON its terminal_data line or a classifier's
 * SG_ITEM_END; false before, and when @s is NULL,
 * not initialised, or has never begun an attempt.
 */
SG_EXTERN bool sg_stream_terminal_seen(const sg_stream *s);

/**
 * sg_stream_active - is an attempt in progress?
 *
 * Returns true from sg_stream_begin until sg_stream_end (also after the
 * sentinel or a feed error: the attempt still needs sg_stream_end); false
 * before the first begin, after sg_stream_end, and when @s is NULL or not
 * initialised.
 */
SG_EXTERN bool sg_stream_active(const sg_stream *s);

/**
 * sg_stream_provider_error - the in-band error that ended the attempt, if
 * one did: its type and message (NUL-terminated, "" when the classifier
 * gave none; valid until the next sg_stream_begin) and whether it is
 * worth a retry.
 *
 * Returns true when an SG_ITEM_ERROR ended the current (or last) attempt;
 * false otherwise (and the out-parameters are left alone).  Any
 * out-parameter may be NULL.
 */
SG_EXTERN bool sg_stream_provider_error(const sg_stream *s, const char **type,
                                        const char **message, bool *retryable);

/**
 * sg_stream_classify_error_body - what the stream's classifier (a provider
 * profile) says of an HTTP error response's body: the JSON error object a
 * provider sends with a 4xx or 5xx status, shown to the classifier as one
 * item - SSE event "error", the body as its data, index 0.  A policy reads
 * err->final from it: a status it would retry is not retried when the
 * body says the refusal is final (Anthropic's spend limits).  Needs no
 * attempt in progress; changes nothing in @s.
 * @err: zeroed, then filled with views into @body.
 *
 * Returns true when the classifier calls the body an error (SG_ITEM_ERROR);
 * false without a classifier, for any other body, or when an argument is
 * NULL.
 * Thread-safety: reads only @s; calls the classifier.
 */
SG_EXTERN bool sg_stream_classify_error_body(const sg_stream *s, const char *body,
                                             size_t len, sg_item_error *err);

/**
 * sg_stream_error_text - a sentence on why the stream itself stopped the
 * current (or last) attempt, when its error code alone would mislead:
 * today, metadata over the hold bound before the first token (the code
 * is SG_EEVENT_TOO_LARGE, though no single event was too large - most
 * often a profile that finds no token in this stream).  A static string;
 * NULL when there is nothing to add to sg_strerror of the feed's error.
 */
SG_EXTERN const char *sg_stream_error_text(const sg_stream *s);

/**
 * sg_stream_cancel - the consumer stops the running attempt at @now, as a
 * non-zero return from the item callback does: later feeds return
 * SG_ECANCELED and sg_stream_end concludes cancelled (judged at @now).
 * For a consumer that looks at the bytes before the items (a proxy).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @s was never initialised;
 *   SG_ESTATE  no attempt is running.
 */
SG_EXTERN int sg_stream_cancel(sg_stream *s, int64_t now);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_STREAM_H */
