/*
 * streamguard stream config: the items a stream delivers (sg_item, what a
 * classifier says each one is), how a response body is framed into them
 * (sg_stream_config: format, sentinels, limits, skipped types, classifier)
 * and the built-in provider profiles that set both.  What a caller
 * describes once and hands to sg_stream_init, sg_curl_options_set_framing
 * or sg_h2_request_set_framing; the stream that runs it is
 * <streamguard/stream.h>, which includes this file.  Sans-I/O and libc
 * only.
 *
 * Thread-safety: plain data owned by the caller; reentrant functions that
 * touch only what they are given (sg_stream_config_classify calls the
 * config's classifier on the calling thread).
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_STREAM_CONFIG_H
#define STREAMGUARD_STREAM_CONFIG_H

#include <streamguard/core.h>
#include <streamguard/framing.h>

#ifdef __cplusplus
extern "C" {
#endif

/** How a response body is framed into items. */
typedef enum sg_format {
    SG_FORMAT_SSE = 0,    ///< text/event-stream: one item per dispatched event
    SG_FORMAT_NDJSON = 1, ///< one item per non-empty line
    /** application/vnd.amazon.eventstream (AWS Bedrock): one item per
     *  event message; exception and error messages end the attempt as
     *  provider_error. */
    SG_FORMAT_EVENTSTREAM = 2,
} sg_format;

/**
 * sg_item - one item as the consumer receives it.  Views are valid only
 * during the callback and are not NUL-terminated.
 */
typedef struct sg_item {
    const char *event; ///< SSE event type ("message" by default); NDJSON: "";
                       ///< event stream: the :event-type header ("" without)
    size_t event_len;
    const char *data; ///< SSE data (lines joined by LF); NDJSON: the line;
                      ///< event stream: the message's payload
    size_t data_len;
    const char *id; ///< SSE last event id in effect; NDJSON, event stream: ""
    size_t id_len;
    uint32_t attempt; ///< 1-based attempt that delivered it
    uint64_t index;   ///< 0-based item number within the attempt
    /** What the stream's classifier (a provider profile) said it is, an
     *  sg_item_kind: SG_ITEM_TOKEN, SG_ITEM_META (metadata; held before the
     *  first token and delivered with it), SG_ITEM_END (the clean end,
     *  delivered) or SG_ITEM_END_TOKEN (content that is the end too).
     *  Always SG_ITEM_TOKEN without a classifier.  A consumer that prints
     *  only content keeps SG_ITEM_TOKEN and SG_ITEM_END_TOKEN. */
    uint8_t kind;
} sg_item;

/**
 * sg_item_cb - receives each item, from inside sg_stream_feed on the
 * thread that calls it.  @item and its views are valid only during the
 * call.  Do not call sg_stream_feed, sg_stream_begin or sg_stream_end on
 * the same stream from here.
 *
 * Returns 0 to go on; any other value stops the stream: sg_stream_feed
 * returns SG_ECANCELED and the attempt's outcome is cancelled.
 */
typedef int (*sg_item_cb)(const sg_item *item, void *user_data);

/**
 * sg_item_kind - what an item is to the clocks, as a classifier (a provider
 * profile) says.  Without a classifier every item is SG_ITEM_TOKEN.
 */
typedef enum sg_item_kind {
    /** Content.  The first one is the first token: it satisfies the
     *  first-item clock (time to first token), starts the idle clock, and
     *  delivers the metadata held before it. */
    SG_ITEM_TOKEN = 0,
    /** Metadata.  Before the first token it is held - not delivered, no
     *  clock - and delivered just before the first token; so an attempt
     *  that fails before its first token has delivered nothing and may be
     *  retried.  After the first token it is an item like a token. */
    SG_ITEM_META,
    /** A keepalive: never delivered, no clock, not counted. */
    SG_ITEM_KEEPALIVE,
    /** The clean end, delivered; no content, so never a token.  An end
     *  before any token is the first item the clocks see (a late one is
     *  too late; what follows it runs on the idle clock) and delivers the
     *  held metadata before it, but the result reports no first token
     *  (first_item_ns -1): none came.  The attempt is decided ok at its
     *  arrival; what follows is ignored (see end_at_eof).  Content that
     *  ends the stream is SG_ITEM_END_TOKEN. */
    SG_ITEM_END,
    /** A failure the server reports inside the stream: not delivered; the
     *  attempt ends provider_error (sg_stream_feed returns SG_EPROVIDER),
     *  with the type and message the classifier gives. */
    SG_ITEM_ERROR,
    /** Content that is also the clean end (Gemini's last chunk, text and
     *  its finishReason; an Ollama "done": true line that carries text): a
     *  token - the first token when none came before it - and then the end,
     *  as SG_ITEM_END. */
    SG_ITEM_END_TOKEN,
} sg_item_kind;

/** The most bytes kept of an in-band error's type and message. */
#define SG_STREAM_ERROR_TYPE_MAX 63
#define SG_STREAM_ERROR_MESSAGE_MAX 127

/**
 * sg_item_error - what a classifier says of an SG_ITEM_ERROR: the
 * provider's own type ("overloaded_error") and message, views into the
 * item (copied, cut at the maximums above), whether the type is a
 * transient one worth a retry before the first token (overload, rate
 * limit, unavailable), and whether the provider said the same request
 * cannot succeed until something outside it changes (final: Anthropic's
 * spend limits, a rate_limit_error whose error.details.error_code ends in
 * _spend_limit_reached) - never retried, in the stream or as an HTTP
 * error's body whatever its status (sg_stream_classify_error_body).  A
 * final error is never retryable.
 */
typedef struct sg_item_error {
    const char *type;
    size_t type_len;
    const char *message;
    size_t message_len;
    bool retryable;
    bool final;
} sg_item_error;

/**
 * sg_classify_cb - says what @item is, from inside sg_stream_feed (before
 * the item is delivered); for SG_ITEM_ERROR it fills @err (zeroed before
 * the call).  Must not keep @item's views or call back into the stream.
 */
typedef sg_item_kind (*sg_classify_cb)(const sg_item *item, sg_item_error *err,
                                       void *user_data);

/** Items held before the first token, at most (see sg_stream_config): as
 *  many as a tool-heavy start sends (a Responses stream's web searches, five
 *  events each); their bytes are bounded by max_event, their records take
 *  12 bytes each. */
#define SG_STREAM_HOLD_MAX_ITEMS 1024

/**
 * sg_stream_config - how a body is framed into items.  Embed it;
 * sg_stream_config_init sets every default (zero-initialised is the
 * same), each setter below changes one option, and sg_profile_framing()
 * sets a provider profile's.  It keeps the strings and the list it is
 * given (sentinels, skip_types), not copies (the core's exception to
 * docs/design.md, "Ownership"): they must outlive every stream made from
 * it (literals do).  A transport that takes one
 * (sg_curl_options_set_framing, sg_h2_request_set_framing) copies them.
 *
 * Each setter returns 0 if it succeeds, or SG_EINVAL (@cfg NULL, or a
 * value said below) or SG_ERANGE (a limit out of range); the config is
 * then unchanged.
 */
typedef struct sg_stream_config {
    /* private (src/framing/stream.c reads them) */
    sg_format format_;
    const char *terminal_data_, *terminal_type_;
    size_t max_line_, max_event_; /* 0 = default */
    const char *const *skip_types_;
    sg_classify_cb classify_;
    void *classify_data_;
    bool meta_at_once_, end_required_, end_at_eof_, other_json_;
    union {
        void *reserved_[4]; /* private: room to grow */
        /* private: the classifier again when it is a provider profile's,
         * which also reads the stream's usage (src/framing/usage.h) */
        sg_classify_cb usage_classify_;
    };
} sg_stream_config;

/** sg_stream_config_init - every default: SSE, no sentinel, the default
 *  limits, no skipped type, no classifier (NULL: nothing). */
SG_EXTERN void sg_stream_config_init(sg_stream_config *cfg);

/**
 * sg_stream_config_set_format - SG_FORMAT_SSE (the default),
 * SG_FORMAT_NDJSON or SG_FORMAT_EVENTSTREAM (SG_EINVAL for another).  An
 * event stream's messages are checked as sg_es_feed checks them (CRCs,
 * lengths, headers: any failure is protocol_error); a message of
 * :message-type "event" is an item (its :event-type and payload);
 * "exception" and "error" end the attempt as provider_error, with or
 * without a classifier - the type from :exception-type (or :error-code),
 * the message from the payload's "message" (or :error-message), retryable
 * before the first token for throttlingException and
 * serviceUnavailableException.  There max_event bounds a whole message
 * (at most SG_ES_MAX_MESSAGE) and its headers are at most
 * SG_ES_MAX_HEADERS; terminal_data, max_line and other_json do not apply.
 */
SG_EXTERN int sg_stream_config_set_format(sg_stream_config *cfg, sg_format format);

/**
 * sg_stream_config_set_terminal_data - the clean end, not delivered: for
 * SSE an event whose data equals @data ("[DONE]"); for NDJSON a line equal
 * to it, byte for byte (after the line end and a CR before it are cut).
 * With it set, a stream that ends without it is truncated; what follows it
 * is ignored.  Kept, not copied; "" is SG_EINVAL; NULL (the default)
 * removes it.
 */
SG_EXTERN int sg_stream_config_set_terminal_data(sg_stream_config *cfg, const char *data);

/** sg_stream_config_set_terminal_type - the SSE event type marking the
 *  clean end, delivered ("message_stop").  Kept, not copied; "" is
 *  SG_EINVAL; NULL (the default) removes it. */
SG_EXTERN int sg_stream_config_set_terminal_type(sg_stream_config *cfg, const char *type);

/**
 * sg_stream_config_set_max_line - the longest line, SG_FRAMING_MIN_LINE ..
 * SG_FRAMING_MAX_LIMIT; 0 (the default) is SG_FRAMING_DEFAULT_MAX_LINE,
 * or with a classifier max_event when larger (one line may carry a whole
 * output, as Responses' response.completed does).
 */
SG_EXTERN int sg_stream_config_set_max_line(sg_stream_config *cfg, size_t n);

/** sg_stream_config_set_max_event - the largest SSE event (or event-stream
 *  message), 1 .. SG_FRAMING_MAX_LIMIT; 0 (the default) is
 *  SG_FRAMING_DEFAULT_MAX_EVENT. */
SG_EXTERN int sg_stream_config_set_max_event(sg_stream_config *cfg, size_t n);

/**
 * sg_stream_config_set_skip_types - a NULL-terminated list of SSE event
 * types that are not items, e.g. {"ping", NULL} for Anthropic's keepalive
 * events: never delivered, never counted toward the item cap, never reset
 * the idle clock - like comments.  Kept, not copied (the list and its
 * strings); compared with each event's type, so keep it short.  NULL (the
 * default): every event is an item.
 */
SG_EXTERN int sg_stream_config_set_skip_types(sg_stream_config *cfg,
                                              const char *const *types);

/**
 * sg_stream_config_set_classifier - what each item is (sg_item_kind), e.g.
 * a provider profile's classifier, with @user_data (borrowed).  Items
 * before the first token are held in the stream's buffer: at most
 * SG_STREAM_HOLD_MAX_ITEMS items and max_event bytes of them (their event
 * types, data and ids together); more is a protocol error
 * (SG_EEVENT_TOO_LARGE), so memory stays bounded.  NULL (the default):
 * every item is a token, delivered at once.
 */
SG_EXTERN int sg_stream_config_set_classifier(sg_stream_config *cfg, sg_classify_cb fn,
                                              void *user_data);

/** sg_stream_config_set_meta_at_once - with a classifier: deliver metadata
 *  at once, as tokens (the first item, metadata or not, satisfies the
 *  first-item clock, and a failure after it is partial).  Default false. */
SG_EXTERN int sg_stream_config_set_meta_at_once(sg_stream_config *cfg, bool on);

/** sg_stream_config_set_end_required - with a classifier: only an
 *  SG_ITEM_END is a clean end; a body that ends without one is truncated
 *  (a stream without "done": true).  Default false. */
SG_EXTERN int sg_stream_config_set_end_required(sg_stream_config *cfg, bool on);

/** sg_stream_config_set_end_at_eof - with a classifier: an SG_ITEM_END is
 *  the clean end only once the body then ends - the stream reads on, and
 *  what comes after it is still classified (an error after it ends the
 *  attempt as provider_error: Gemini's finishReason chunk may be followed
 *  by an error).  Default false: the end item decides at once and the rest
 *  is ignored. */
SG_EXTERN int sg_stream_config_set_end_at_eof(sg_stream_config *cfg, bool on);

/**
 * sg_stream_config_set_other_json - with a classifier and SSE: lines
 * outside any SSE field (a JSON object a server wrote bare into the
 * stream, as Gemini may for an error) are gathered - at most max_event
 * bytes, the rest dropped - and classified as one item (its data the
 * lines joined by LF, no event type) when an event follows them or the
 * body ends.  Only an SG_ITEM_ERROR counts (the attempt ends
 * provider_error); anything else is dropped, as SSE drops such lines.
 * The stream's buffer grows by max_event.  Default false.
 */
SG_EXTERN int sg_stream_config_set_other_json(sg_stream_config *cfg, bool on);

/*
 * What a config says, for a caller that frames some bytes itself the way a
 * stream of it would (a proxy relaying a body).  For NULL: the defaults.
 */

/** sg_stream_config_format - the format @cfg frames with. */
SG_EXTERN sg_format sg_stream_config_format(const sg_stream_config *cfg);

/** sg_stream_config_skips - whether an SSE event of type @type (@len
 *  bytes) is one of @cfg's skip_types: not an item. */
SG_EXTERN bool sg_stream_config_skips(const sg_stream_config *cfg, const char *type,
                                      size_t len);

/** sg_stream_config_other_json - whether @cfg gathers lines outside SSE
 *  for its classifier (sg_stream_config_set_other_json, with SSE). */
SG_EXTERN bool sg_stream_config_other_json(const sg_stream_config *cfg);

/** sg_stream_config_classify - what @cfg's classifier says @item is (for
 *  SG_ITEM_ERROR, @err - zeroed first - says more); SG_ITEM_TOKEN without
 *  a classifier. */
SG_EXTERN sg_item_kind sg_stream_config_classify(const sg_stream_config *cfg,
                                                 const sg_item *item, sg_item_error *err);

/* ------------------------------------------------------------------------
 * Provider profiles (docs/profiles.md)
 * ------------------------------------------------------------------------ */

/**
 * sg_profile_framing - sets @cfg to a built-in provider profile's stream
 * semantics: its format, terminal signal and classifier (keepalives,
 * metadata before the first token, the first token, in-band errors and
 * which are transient, the clean end) - "openai" (Chat Completions, and
 * vLLM, llama.cpp, Mistral, OpenRouter), "openai-responses", "anthropic",
 * "gemini" (streamGenerateContent?alt=sse), "ollama", "bedrock-converse"
 * (ConverseStream) and "bedrock-invoke" (InvokeModelWithResponseStream;
 * the model's own JSON, base64 in each chunk's "bytes").  @cfg must be
 * initialised (sg_stream_config_init): the limits (max_line, max_event),
 * skip_types and meta_at_once are left as they are; set them after the
 * call to override the profile's (e.g. terminal_data).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @name or @cfg is NULL;
 *   SG_ENOTFOUND no built-in profile has that name (@cfg is unchanged).
 * Thread-safety: touches only @cfg.
 */
SG_EXTERN int sg_profile_framing(const char *name, sg_stream_config *cfg);

/** The built-in profiles' names, NULL-terminated. */
SG_EXTERN const char *const *sg_profile_names(void);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_STREAM_CONFIG_H */
