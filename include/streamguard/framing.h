/*
 * streamguard framing: incremental SSE and NDJSON parsers, and the AWS
 * event-stream decoder (<streamguard/eventstream.h>, which this header
 * includes), that turn the bytes of a response body into items.
 *
 * Sans-I/O, libc only, and no allocation (the event-stream decoder uses
 * zlib's crc32() inside the library): the caller embeds a parser and lends
 * it one buffer of fixed size, used only for what spans reads (a partial
 * line, an event whose lines arrive in different reads, the last event
 * id).  Items are (pointer, length) views into the caller's bytes or into
 * that buffer, valid only during the callback that receives them.
 *
 * Configuration: each parser has a config the caller embeds - private
 * fields, an _init that sets every default, one setter per limit, sentinel
 * and callback - and reserved room, so that it and the parser keep their
 * sizes for 1.x (the library pins them).  A config keeps the sentinel
 * strings it is given, not copies (the core's exception to
 * docs/design.md, "Ownership"): they must outlive the parser (literals
 * do).  The parser copies the config; the user_data given to _init goes
 * to every callback.
 *
 * Cost: linear in the input for any chunking.  Each byte is searched once
 * for LF and once for CR (memchr, or a 16-byte SSE2 scan for short reads);
 * the buffered tail of a line is never rescanned.  A data byte is copied at
 * most twice: once when its line spans reads, once when its event spans
 * reads or has several data lines.
 *
 * Errors: when a feed returns an error (a limit exceeded, a callback
 * cancelled), the pending line and event are dropped and the parser is
 * failed: every later feed returns the same code until reset.  There is no
 * resynchronisation: an item stream that lost bytes cannot be trusted.
 * Bytes are never decoded: invalid UTF-8 passes through unchanged.
 *
 * Statistics structs are the caller's and begin with their size: set it
 * with the _STATS_INIT macro; the library fills only what fits.
 *
 * Thread-safety: a parser is plain data owned by the caller; the functions
 * are reentrant and concurrent calls on one parser need the caller's lock.
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_FRAMING_H
#define STREAMGUARD_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <streamguard/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Default maximum line size (bytes, terminator excluded): 64 KiB. */
#define SG_FRAMING_DEFAULT_MAX_LINE ((size_t)64 * 1024)
/** Default maximum SSE event size (bytes of assembled data): 1 MiB. */
#define SG_FRAMING_DEFAULT_MAX_EVENT ((size_t)1024 * 1024)
/** The smallest accepted maximum line size. */
#define SG_FRAMING_MIN_LINE ((size_t)16)
/** The largest accepted maximum line or event size: 1 GiB. */
#define SG_FRAMING_MAX_LIMIT ((size_t)1 << 30)

/**
 * The buffer an SSE parser needs for limits @max_line and @max_event (both
 * non-zero): the partial line, the event type, the pending and the last
 * event id (each at most one line), and the assembled data.
 */
#define SG_SSE_BUFFER_SIZE(max_line, max_event) \
    (4 * (size_t)(max_line) + (size_t)(max_event))
/** The buffer an NDJSON parser needs for limit @max_line: the partial line,
 *  plus one byte for a CR whose LF is still to come. */
#define SG_NDJSON_BUFFER_SIZE(max_line) ((size_t)(max_line) + 1)

/* The line splitter shared by the parsers; private, declared here only so
 * that they can be embedded by value (src/framing/lines.h). */
typedef struct sg__lines {
    char *buf_;
    size_t cap_, len_, room_;
    const sg_mem *mem_;
    unsigned char bom_;
    bool skip_lf_;
} sg__lines;

/* ------------------------------------------------------------------------
 * Server-sent events (WHATWG HTML, "event stream interpretation")
 * ------------------------------------------------------------------------ */

/**
 * sg_sse_event - one dispatched event, handed to the on_event callback (a
 * record: read it through the pointer).  Every view is valid only during
 * the callback.  None is NUL-terminated.
 */
typedef struct sg_sse_event {
    const char *type; ///< the event type; "message" when none was set
    size_t type_len;
    const char *data; ///< the data lines joined by LF, final LF removed
    size_t data_len;
    const char *id; ///< the last event id (persists across events); may be ""
    size_t id_len;
    bool terminal; ///< this event's type is the terminal type
} sg_sse_event;

/*
 * The parser's callbacks.  Each returns 0 to go on; any other value stops
 * the parse, and the feed call that made it returns SG_ECANCELED (the
 * parser is then failed).
 */
/** One item.  Comments, retry fields and the data sentinel never are. */
typedef int (*sg_sse_event_cb)(const sg_sse_event *event, void *user_data);
/** One comment line: everything after the colon (a leading space kept).
 *  Keepalives arrive here. */
typedef int (*sg_sse_comment_cb)(const char *text, size_t len, void *user_data);
/** A retry field whose value is all ASCII digits, in milliseconds (values
 *  past UINT64_MAX saturate). */
typedef int (*sg_sse_retry_cb)(uint64_t retry_ms, void *user_data);
/** A non-empty line that is neither a comment nor a field this parser
 *  knows (the standard ignores it): what a server wrote outside SSE, such
 *  as a JSON error object written bare into the stream; also, from
 *  sg_sse_end, such a line the body ended in without its line end (its
 *  return value is then ignored). */
typedef int (*sg_sse_other_cb)(const char *line, size_t len, void *user_data);

/**
 * sg_sse_config - an SSE parser's limits, sentinels and callbacks.  Embed
 * it; sg_sse_config_init sets every default (zero-initialised is the same).
 */
typedef struct sg_sse_config {
    size_t max_line_, max_event_;                /* private: 0 = default */
    const char *terminal_data_, *terminal_type_; /* private: kept, not copied */
    sg_sse_event_cb on_event_;                   /* private */
    sg_sse_comment_cb on_comment_;               /* private */
    sg_sse_retry_cb on_retry_;                   /* private */
    sg_sse_other_cb on_other_;                   /* private */
    void *reserved_[4];                          /* private: room to grow */
} sg_sse_config;

/** sg_sse_config_init - every default: the limits below, no sentinel, no
 *  callback (NULL: nothing). */
SG_EXTERN void sg_sse_config_init(sg_sse_config *cfg);

/*
 * The setters of a framing config return 0 if they succeed, or
 * SG_EINVAL when the config is NULL or a value is not valid (said on each)
 * and SG_ERANGE when a limit is out of range; the config is then
 * unchanged.  A limit of 0 restores its default.
 */

/** sg_sse_config_set_max_line - the longest line, terminator excluded:
 *  SG_FRAMING_MIN_LINE .. SG_FRAMING_MAX_LIMIT (SG_ERANGE), 0 the default
 *  SG_FRAMING_DEFAULT_MAX_LINE.  Exceeding it is SG_ELINE_TOO_LONG. */
SG_EXTERN int sg_sse_config_set_max_line(sg_sse_config *cfg, size_t n);

/** sg_sse_config_set_max_event - the longest assembled data of one event
 *  (data lines joined by LF): 1 .. SG_FRAMING_MAX_LIMIT (SG_ERANGE), 0 the
 *  default SG_FRAMING_DEFAULT_MAX_EVENT.  Exceeding it is
 *  SG_EEVENT_TOO_LARGE. */
SG_EXTERN int sg_sse_config_set_max_event(sg_sse_config *cfg, size_t n);

/** sg_sse_config_set_terminal_data - an event whose data equals @data
 *  exactly (any type), e.g. "[DONE]", ends the stream cleanly and is NOT
 *  delivered.  Kept, not copied; "" is SG_EINVAL, NULL removes it.
 *  Default: none. */
SG_EXTERN int sg_sse_config_set_terminal_data(sg_sse_config *cfg, const char *data);

/** sg_sse_config_set_terminal_type - an event whose type equals @type,
 *  e.g. "message_stop", ends the stream cleanly and IS delivered (with
 *  terminal set), because it carries data.  Kept, not copied; "" is
 *  SG_EINVAL, NULL removes it.  Default: none. */
SG_EXTERN int sg_sse_config_set_terminal_type(sg_sse_config *cfg, const char *type);

/** The callbacks, each NULL by default (NULL removes one). */
SG_EXTERN int sg_sse_config_set_on_event(sg_sse_config *cfg, sg_sse_event_cb fn);
/** See sg_sse_config_set_on_event. */
SG_EXTERN int sg_sse_config_set_on_comment(sg_sse_config *cfg, sg_sse_comment_cb fn);
/** See sg_sse_config_set_on_event. */
SG_EXTERN int sg_sse_config_set_on_retry(sg_sse_config *cfg, sg_sse_retry_cb fn);
/** See sg_sse_config_set_on_event. */
SG_EXTERN int sg_sse_config_set_on_other(sg_sse_config *cfg, sg_sse_other_cb fn);

/** sg_sse_stats - counters since init or reset (caller's; size first). */
typedef struct sg_sse_stats {
    size_t size;                   ///< sizeof(sg_sse_stats): SG_SSE_STATS_INIT
    uint64_t bytes;                ///< every byte fed, ignored ones included
    uint64_t lines;                ///< complete lines, blank ones included
    uint64_t items;                ///< events delivered to on_event
    uint64_t comments;             ///< comment lines
    uint64_t bytes_after_terminal; ///< bytes fed after the terminal event
} sg_sse_stats;
/** An sg_sse_stats ready for sg_sse_get_stats. */
#define SG_SSE_STATS_INIT \
    { sizeof(sg_sse_stats), 0, 0, 0, 0, 0 }

/**
 * sg_sse_parser - an SSE parser the caller embeds.  Initialise it with
 * sg_sse_init(); every field is private (src/framing/sse.c says what each
 * holds).
 */
typedef struct sg_sse_parser {
    sg__lines lines_; /* private */
    struct {
        sg_sse_event_cb on_event;
        sg_sse_comment_cb on_comment;
        sg_sse_retry_cb on_retry;
        sg_sse_other_cb on_other;
    } cbs_; /* private */
    void *user_data_;
    const char *term_data_, *term_type_;
    size_t term_data_len_, term_type_len_, max_event_;
    char *type_store_, *id_pending_store_, *id_last_store_, *data_store_;
    size_t type_room_, id_pending_room_, id_last_room_, data_room_;
    const char *type_, *id_pending_, *data_;
    size_t type_len_, id_pending_len_, id_last_len_, data_len_;
    bool has_data_, id_dirty_, terminal_seen_, ended_, clean_;
    int error_;          /* private: sticky error, 0 if none */
    uint32_t magic_;     /* private: set by sg_sse_init */
    sg_sse_stats stats_; /* private */
    void *reserved_[4];  /* private: room to grow */
} sg_sse_parser;

/**
 * sg_sse_buffer_size - the buffer sg_sse_init needs for @cfg (NULL means
 * the defaults): SG_SSE_BUFFER_SIZE(max_line, max_event).
 */
SG_EXTERN size_t sg_sse_buffer_size(const sg_sse_config *cfg);

/**
 * sg_sse_init - prepare @parser to read one event stream from its start.
 *
 * @cfg: NULL means all defaults (and no callback).  Copied.
 * @user_data: passed to every callback.
 * @buf, @buf_size: the caller's buffer, at least sg_sse_buffer_size(@cfg)
 *   bytes, the parser's until the caller stops using it.  Never freed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @parser or @buf is NULL;
 *   SG_ENOBUFS  @buf_size is smaller than sg_sse_buffer_size(@cfg).
 */
SG_EXTERN int sg_sse_init(sg_sse_parser *parser, const sg_sse_config *cfg,
                          void *user_data, void *buf, size_t buf_size);

/**
 * sg_sse_feed - parse the next @len bytes of the stream.
 *
 * Any split is fine: a line, a CRLF pair or a BOM may be cut anywhere.  One
 * leading UTF-8 BOM is stripped; a second is kept (it makes the first field
 * name unknown).  Callbacks run before this returns, in stream order.  After
 * the terminal event every further byte is consumed, ignored and counted in
 * bytes_after_terminal (the LF of a CRLF split after the terminal's blank line
 * excepted).  @data need not stay valid after the call.
 *
 * Returns the number of bytes consumed (always @len) if it succeeds, or one
 * of the following negative error codes:
 *   SG_EINVAL            @parser not initialised, @data NULL with @len > 0,
 *                        or @len > PTRDIFF_MAX;
 *   SG_ELINE_TOO_LONG    a line is longer than max_line;
 *   SG_EEVENT_TOO_LARGE  an event's data is longer than max_event;
 *   SG_ECANCELED         a callback returned non-zero;
 *   SG_EDONE             sg_sse_end was already called.
 * After an error the parser is failed: it returns that code again until
 * sg_sse_reset().  Nothing half-parsed is kept.
 * Thread-safety: touches only @parser; callbacks run on the calling thread.
 */
SG_EXTERN ptrdiff_t sg_sse_feed(sg_sse_parser *parser, const void *data, size_t len);

/**
 * sg_sse_end - the body ended (the transport saw end of input).
 *
 * A pending event is discarded, never dispatched, as the standard says.
 * *@clean is set to true when the stream ended as the protocol requires:
 * with a terminal configured, iff it was seen; without one, iff no partial
 * line and no undispatched data line remain.  It is false after an error.
 * Later feeds return SG_EDONE; calling sg_sse_end again gives the same
 * answer.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised or @clean is NULL.
 */
SG_EXTERN int sg_sse_end(sg_sse_parser *parser, bool *clean);

/**
 * sg_sse_reset - make @parser ready for a new stream (a new attempt) with the
 * same configuration, callbacks and buffer: clears the pending line and
 * event, the last event id, the terminal flag, a sticky error and the stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised.
 */
SG_EXTERN int sg_sse_reset(sg_sse_parser *parser);

/**
 * sg_sse_last_event_id - the last event id string: the id buffer as of the
 * last dispatch (a blank line), as a browser sends it in Last-Event-ID.
 * An id field with a NUL byte is ignored; "id" with no value clears it.
 *
 * @id, @len: set to a view valid until the next feed or reset; "" and 0
 *   when none.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised, or @id or @len is NULL.
 */
SG_EXTERN int sg_sse_last_event_id(const sg_sse_parser *parser, const char **id,
                                   size_t *len);

/**
 * sg_sse_terminal_seen - true once the terminal event (data or type) was
 * parsed; false for NULL or an uninitialised parser.
 */
SG_EXTERN bool sg_sse_terminal_seen(const sg_sse_parser *parser);

/**
 * sg_sse_get_stats - copies the counters into *@stats, as many as its size
 * (set by SG_SSE_STATS_INIT) holds.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised or @stats is NULL or its size is smaller than
 *              its first member.
 */
SG_EXTERN int sg_sse_get_stats(const sg_sse_parser *parser, sg_sse_stats *stats);

/* ------------------------------------------------------------------------
 * NDJSON (newline-delimited JSON; one item per non-empty line)
 * ------------------------------------------------------------------------ */

/**
 * sg_ndjson_item_cb - one item: a non-empty line without its LF or CRLF.
 * The view is valid only during the call.  Return 0 to go on; anything else
 * stops the parse and the feed returns SG_ECANCELED.  The line is not
 * validated as JSON.
 */
typedef int (*sg_ndjson_item_cb)(const char *line, size_t len, void *user_data);

/**
 * sg_ndjson_config - an NDJSON parser's limit and callback.  Embed it;
 * sg_ndjson_config_init sets the defaults (zero-initialised is the same).
 */
typedef struct sg_ndjson_config {
    size_t max_line_;           /* private: 0 = default */
    sg_ndjson_item_cb on_item_; /* private */
    void *reserved_[4];         /* private: room to grow */
} sg_ndjson_config;

/** sg_ndjson_config_init - every default (NULL: nothing). */
SG_EXTERN void sg_ndjson_config_init(sg_ndjson_config *cfg);

/** sg_ndjson_config_set_max_line - the longest line, terminator excluded:
 *  SG_FRAMING_MIN_LINE .. SG_FRAMING_MAX_LIMIT (SG_ERANGE), 0 the default
 *  SG_FRAMING_DEFAULT_MAX_LINE.  Exceeding it is SG_ELINE_TOO_LONG. */
SG_EXTERN int sg_ndjson_config_set_max_line(sg_ndjson_config *cfg, size_t n);

/** sg_ndjson_config_set_on_item - called with each item; NULL (the default):
 *  lines are only counted.  0, or SG_EINVAL when @cfg is NULL. */
SG_EXTERN int sg_ndjson_config_set_on_item(sg_ndjson_config *cfg, sg_ndjson_item_cb fn);

/** sg_ndjson_stats - counters since init or reset (caller's; size first). */
typedef struct sg_ndjson_stats {
    size_t size;    ///< sizeof(sg_ndjson_stats): SG_NDJSON_STATS_INIT
    uint64_t bytes; ///< every byte fed
    uint64_t lines; ///< complete lines within max_line, empty ones included
    uint64_t items; ///< non-empty lines delivered
} sg_ndjson_stats;
/** An sg_ndjson_stats ready for sg_ndjson_get_stats. */
#define SG_NDJSON_STATS_INIT \
    { sizeof(sg_ndjson_stats), 0, 0, 0 }

/** sg_ndjson_parser - embed it, initialise with sg_ndjson_init(). */
typedef struct sg_ndjson_parser {
    sg__lines lines_;           /* private */
    sg_ndjson_item_cb on_item_; /* private */
    void *user_data_;           /* private */
    bool ended_, clean_;        /* private: sg_ndjson_end's verdict */
    int error_;                 /* private: sticky error, 0 if none */
    uint32_t magic_;            /* private */
    sg_ndjson_stats stats_;     /* private */
    void *reserved_[4];         /* private: room to grow */
} sg_ndjson_parser;

/** sg_ndjson_buffer_size - the buffer sg_ndjson_init needs for @cfg (NULL:
 *  the defaults): SG_NDJSON_BUFFER_SIZE(max_line). */
SG_EXTERN size_t sg_ndjson_buffer_size(const sg_ndjson_config *cfg);

/**
 * sg_ndjson_init - prepare @parser to read one NDJSON body from its start.
 *
 * @cfg: NULL means defaults (no callback).  Copied.
 * @user_data: passed to the callback.
 * @buf, @buf_size: at least sg_ndjson_buffer_size(@cfg) bytes; holds a line
 *   that spans reads.  Never freed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @parser or @buf is NULL;
 *   SG_ENOBUFS  @buf_size is too small.
 */
SG_EXTERN int sg_ndjson_init(sg_ndjson_parser *parser, const sg_ndjson_config *cfg,
                             void *user_data, void *buf, size_t buf_size);

/**
 * sg_ndjson_feed - parse the next @len bytes.  Lines end at LF; one CR
 * before the LF is removed; a lone CR is kept (JSON whitespace).  Empty lines
 * are skipped.  One leading UTF-8 BOM is stripped.
 *
 * Returns the number of bytes consumed (always @len) if it succeeds, or one
 * of the following negative error codes:
 *   SG_EINVAL          @parser not initialised, @data NULL with @len > 0,
 *                      or @len > PTRDIFF_MAX;
 *   SG_ELINE_TOO_LONG  a line is longer than max_line;
 *   SG_ECANCELED       the callback returned non-zero;
 *   SG_EDONE           sg_ndjson_end was already called.
 * After an error the parser is failed until sg_ndjson_reset().
 */
SG_EXTERN ptrdiff_t sg_ndjson_feed(sg_ndjson_parser *parser, const void *data,
                                   size_t len);

/**
 * sg_ndjson_end - the body ended.  A final line without LF is discarded (it
 * may be cut short) and makes the end unclean.  *@clean is true iff no
 * partial line remains and no error occurred.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised or @clean is NULL.
 */
SG_EXTERN int sg_ndjson_end(sg_ndjson_parser *parser, bool *clean);

/**
 * sg_ndjson_reset - ready @parser for a new body with the same settings;
 * clears the partial line, a sticky error and the stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised.
 */
SG_EXTERN int sg_ndjson_reset(sg_ndjson_parser *parser);

/**
 * sg_ndjson_get_stats - copies the counters into *@stats, as many as its size
 * (set by SG_NDJSON_STATS_INIT) holds.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised or @stats is NULL or its size is smaller than
 *              its first member.
 */
SG_EXTERN int sg_ndjson_get_stats(const sg_ndjson_parser *parser, sg_ndjson_stats *stats);

#ifdef __cplusplus
}
#endif

/* The AWS event-stream decoder, in a header of its own. */
#include <streamguard/eventstream.h>

#endif /* STREAMGUARD_FRAMING_H */
