/*
 * streamguard framing: incremental SSE and NDJSON parsers, and the AWS
 * event-stream decoder, that turn the bytes of a response body into items.
 *
 * The SSE and NDJSON parsers are sans-I/O, libc only, and never allocate (the
 * event-stream decoder, at the end of this file, keeps the same contract and
 * uses zlib's crc32() inside the library): the caller embeds
 * a zero-initialisable parser struct and lends it one buffer of fixed size,
 * used only for what spans reads (a partial line, an event whose lines arrive
 * in different reads, the last event id).  Items are (pointer, length) views
 * into the caller's bytes or into that buffer; a view is valid only during
 * the callback that receives it.
 *
 * Cost: linear in the input for any chunking.  Each byte is searched once
 * for LF and once for CR (memchr, or a 16-byte SSE2 scan for short reads);
 * the buffered tail of a line is never rescanned.  A data byte is copied at
 * most twice: once when its line spans reads, once when its event spans
 * reads or has several data lines.  An event within one read is not copied.
 *
 * Errors: when a feed call returns an error (a limit exceeded, a callback
 * cancelled), the pending line and event are dropped and the parser is
 * failed: every later feed returns the same code until reset.  There is no
 * resynchronisation: an item stream that lost bytes cannot be trusted.
 *
 * Bytes are never decoded: invalid UTF-8 passes through unchanged, and the
 * consumer (typically a JSON parser) validates what it needs.
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

/*
 * The line splitter shared by both parsers.  Every field is private; it is
 * declared here only so the parsers can be embedded by value.
 */
typedef struct sg__lines {
    char *buf_;         /* private: the caller's buffer, partial line first */
    size_t cap_;        /* private: maximum line size */
    size_t len_;        /* private: bytes of the partial line held in buf_ */
    size_t room_;       /* private: bytes buf_ holds (cap_ for a lent buffer) */
    const sg_mem *mem_; /* private: the allocator of a growing buf_, or NULL */
    unsigned char bom_; /* private: leading BOM bytes matched so far (3 = done) */
    bool skip_lf_;      /* private: last read ended in CR; drop one leading LF */
} sg__lines;

/* ------------------------------------------------------------------------
 * Server-sent events (WHATWG HTML, "event stream interpretation")
 * ------------------------------------------------------------------------ */

/**
 * sg_sse_event - one dispatched event, handed to sg_sse_callbacks.on_event.
 *
 * Every view is valid only during the callback.  None is NUL-terminated.
 */
typedef struct sg_sse_event {
    const char *type; /* the event type; "message" when none was set */
    size_t type_len;
    const char *data; /* the data lines joined by LF, final LF removed */
    size_t data_len;
    const char *id; /* the last event id (persists across events); may be "" */
    size_t id_len;
    bool terminal; /* true when this event's type is the terminal type */
} sg_sse_event;

/**
 * sg_sse_callbacks - what the parser reports.  Any pointer may be NULL.
 *
 * Each callback returns 0 to go on; any other value stops the parse, and the
 * feed call that made it returns SG_ECANCELED (the parser is then failed).
 *
 * on_event:   one item.  Comments, retry fields and the data terminal
 *             sentinel are never items.
 * on_comment: one comment line; @text is everything after the colon (a
 *             leading space is kept).  Keepalives arrive here.
 * on_retry:   a retry field whose value is all ASCII digits (at least one),
 *             in milliseconds; values past UINT64_MAX saturate.
 * on_other:   a non-empty line that is neither a comment nor a field this
 *             parser knows (the standard ignores it, and so does the
 *             parser): for a caller that wants what a server wrote outside
 *             SSE, such as a JSON error object written bare into the
 *             stream; also, from sg_sse_end, such a line the body ended
 *             in without its line end (its return value is then
 *             ignored).  The view is valid during the call only.
 */
typedef struct sg_sse_callbacks {
    int (*on_event)(const sg_sse_event *event, void *user_data);
    int (*on_comment)(const char *text, size_t len, void *user_data);
    int (*on_retry)(uint64_t retry_ms, void *user_data);
    int (*on_other)(const char *line, size_t len, void *user_data);
} sg_sse_callbacks;

/**
 * sg_sse_config - limits and the terminal sentinel.  Zero-initialise it;
 * every zero field takes its default.  The parser keeps the sentinel
 * pointers, not copies: the strings must outlive the parser (literals do).
 *
 * max_line:      longest line, terminator excluded.  Default
 *                SG_FRAMING_DEFAULT_MAX_LINE; SG_FRAMING_MIN_LINE ..
 *                SG_FRAMING_MAX_LIMIT.  Exceeding it is SG_ELINE_TOO_LONG.
 * max_event:     longest assembled data of one event (data lines joined by
 *                LF).  Default SG_FRAMING_DEFAULT_MAX_EVENT; 1 ..
 *                SG_FRAMING_MAX_LIMIT.  Exceeding it is SG_EEVENT_TOO_LARGE.
 * terminal_data: NUL-terminated; an event whose data equals it exactly (any
 *                type), e.g. "[DONE]", ends the stream cleanly and is NOT
 *                delivered.  Default NULL: none.
 * terminal_type: NUL-terminated; an event whose type equals it, e.g.
 *                "message_stop", ends the stream cleanly and IS delivered
 *                (with sg_sse_event.terminal set), because it carries data.
 *                Default NULL: none.
 */
typedef struct sg_sse_config {
    size_t max_line;
    size_t max_event;
    const char *terminal_data;
    const char *terminal_type;
} sg_sse_config;

/** sg_sse_stats - counters since init or reset. */
typedef struct sg_sse_stats {
    uint64_t bytes;                /* every byte fed, including ignored ones */
    uint64_t lines;                /* complete lines, blank ones included */
    uint64_t items;                /* events delivered to on_event */
    uint64_t comments;             /* comment lines */
    uint64_t bytes_after_terminal; /* bytes fed after the terminal event */
} sg_sse_stats;

/**
 * sg_sse_parser - an SSE parser the caller embeds.  Initialise it with
 * sg_sse_init(); every field is private.
 */
typedef struct sg_sse_parser {
    sg__lines lines_;        /* private: line splitter and partial line */
    sg_sse_callbacks cbs_;   /* private */
    void *user_data_;        /* private */
    const char *term_data_;  /* private: terminal data sentinel or NULL */
    size_t term_data_len_;   /* private */
    const char *term_type_;  /* private: terminal type or NULL */
    size_t term_type_len_;   /* private */
    size_t max_event_;       /* private */
    char *type_store_;       /* private: event type that spans reads */
    char *id_pending_store_; /* private: id field not yet dispatched */
    char *id_last_store_;    /* private: last event id string */
    char *data_store_;       /* private: data that spans reads or lines */
    size_t type_room_;       /* private: each store's size (growing stores) */
    size_t id_pending_room_; /* private */
    size_t id_last_room_;    /* private */
    size_t data_room_;       /* private */
    const char *type_;       /* private: event type view */
    size_t type_len_;        /* private */
    const char *id_pending_; /* private: last event id buffer view */
    size_t id_pending_len_;  /* private */
    size_t id_last_len_;     /* private */
    const char *data_;       /* private: data view (no trailing LF) */
    size_t data_len_;        /* private */
    bool has_data_;          /* private: at least one data line pending */
    bool id_dirty_;          /* private: id field seen since last dispatch */
    bool terminal_seen_;     /* private */
    bool ended_;             /* private: sg_sse_end was called */
    bool clean_;             /* private: sg_sse_end's verdict */
    int error_;              /* private: sticky error, 0 if none */
    uint32_t magic_;         /* private: set by sg_sse_init */
    sg_sse_stats stats_;     /* private */
} sg_sse_parser;

/**
 * sg_sse_buffer_size - the buffer sg_sse_init needs for @cfg (NULL or zero
 * fields mean the defaults): SG_SSE_BUFFER_SIZE(max_line, max_event).
 *
 * Returns the size in bytes, or 0 when @cfg holds an out-of-range limit.
 * Thread-safety: pure function.
 */
SG_EXTERN size_t sg_sse_buffer_size(const sg_sse_config *cfg);

/**
 * sg_sse_init - prepare @parser to read one event stream from its start.
 *
 * @parser: the caller's parser; any previous content is overwritten.
 * @cfg: limits and sentinel; NULL means all defaults.  Copied, except the
 *   sentinel strings, which must outlive the parser.
 * @cbs: callbacks; NULL means none.  Copied.
 * @user_data: passed to every callback.
 * @buf, @buf_size: the caller's buffer, at least sg_sse_buffer_size(@cfg)
 *   bytes, owned by the parser until the caller stops using it.  Never freed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @parser or @buf is NULL, or a sentinel string is empty;
 *   SG_ERANGE   a limit in @cfg is out of range;
 *   SG_ENOBUFS  @buf_size is smaller than sg_sse_buffer_size(@cfg).
 * Thread-safety: touches only @parser.
 */
SG_EXTERN int sg_sse_init(sg_sse_parser *parser, const sg_sse_config *cfg,
                          const sg_sse_callbacks *cbs, void *user_data, void *buf,
                          size_t buf_size);

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
 * Thread-safety: touches only @parser.
 */
SG_EXTERN int sg_sse_end(sg_sse_parser *parser, bool *clean);

/**
 * sg_sse_reset - make @parser ready for a new stream (a new attempt) with the
 * same configuration, callbacks and buffer: clears the pending line and
 * event, the last event id, the terminal flag, a sticky error and the stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised.
 * Thread-safety: touches only @parser.
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
 * Thread-safety: reads only @parser.
 */
SG_EXTERN int sg_sse_last_event_id(const sg_sse_parser *parser, const char **id,
                                   size_t *len);

/**
 * sg_sse_terminal_seen - true once the terminal event (data or type) was
 * parsed; false for NULL or an uninitialised parser.
 * Thread-safety: reads only @parser.
 */
SG_EXTERN bool sg_sse_terminal_seen(const sg_sse_parser *parser);

/**
 * sg_sse_get_stats - copy the counters into *@stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised or @stats is NULL.
 * Thread-safety: reads only @parser.
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
 * sg_ndjson_config - zero-initialise it for the defaults.
 *
 * max_line: longest line, terminator excluded.  Default
 *           SG_FRAMING_DEFAULT_MAX_LINE; SG_FRAMING_MIN_LINE ..
 *           SG_FRAMING_MAX_LIMIT.  Exceeding it is SG_ELINE_TOO_LONG.
 */
typedef struct sg_ndjson_config {
    size_t max_line;
} sg_ndjson_config;

/** sg_ndjson_stats - counters since init or reset. */
typedef struct sg_ndjson_stats {
    uint64_t bytes; /* every byte fed */
    uint64_t lines; /* complete lines within max_line, empty ones included */
    uint64_t items; /* non-empty lines delivered */
} sg_ndjson_stats;

/** sg_ndjson_parser - embed it, initialise with sg_ndjson_init(). */
typedef struct sg_ndjson_parser {
    sg__lines lines_;           /* private */
    sg_ndjson_item_cb on_item_; /* private */
    void *user_data_;           /* private */
    bool ended_;                /* private */
    bool clean_;                /* private: sg_ndjson_end's verdict */
    int error_;                 /* private: sticky error, 0 if none */
    uint32_t magic_;            /* private */
    sg_ndjson_stats stats_;     /* private */
} sg_ndjson_parser;

/**
 * sg_ndjson_buffer_size - the buffer sg_ndjson_init needs for @cfg (NULL or
 * zero fields mean the defaults).
 *
 * Returns the size in bytes, or 0 when @cfg holds an out-of-range limit.
 * Thread-safety: pure function.
 */
SG_EXTERN size_t sg_ndjson_buffer_size(const sg_ndjson_config *cfg);

/**
 * sg_ndjson_init - prepare @parser to read one NDJSON body from its start.
 *
 * @cfg: NULL means defaults.  @on_item may be NULL (lines are only counted).
 * @buf, @buf_size: at least sg_ndjson_buffer_size(@cfg) bytes; holds a line
 *   that spans reads.  Never freed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @parser or @buf is NULL;
 *   SG_ERANGE   max_line is out of range;
 *   SG_ENOBUFS  @buf_size is too small.
 * Thread-safety: touches only @parser.
 */
SG_EXTERN int sg_ndjson_init(sg_ndjson_parser *parser, const sg_ndjson_config *cfg,
                             sg_ndjson_item_cb on_item, void *user_data, void *buf,
                             size_t buf_size);

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
 * Thread-safety: touches only @parser.
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
 * Thread-safety: touches only @parser.
 */
SG_EXTERN int sg_ndjson_end(sg_ndjson_parser *parser, bool *clean);

/**
 * sg_ndjson_reset - ready @parser for a new body with the same settings;
 * clears the partial line, a sticky error and the stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised.
 * Thread-safety: touches only @parser.
 */
SG_EXTERN int sg_ndjson_reset(sg_ndjson_parser *parser);

/**
 * sg_ndjson_get_stats - copy the counters into *@stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @parser not initialised or @stats is NULL.
 * Thread-safety: reads only @parser.
 */
SG_EXTERN int sg_ndjson_get_stats(const sg_ndjson_parser *parser, sg_ndjson_stats *stats);

/* ------------------------------------------------------------------------
 * AWS event stream (application/vnd.amazon.eventstream; smithy.io "Amazon
 * Event Stream"), the framing of AWS Bedrock's model streams.
 *
 * A message is: total length (u32 BE), headers length (u32 BE), prelude
 * CRC32 (of those 8 bytes), the headers, the payload, and the message CRC32
 * (of every byte before it).  A header is: name length (u8), name, type
 * (u8, sg_es_header_type), value.  Integers are big-endian, two's
 * complement.  CRC32 is zlib's (ISO-HDLC), computed incrementally, so every
 * byte is hashed once however the message is split.
 *
 * Same contract as the parsers above: any chunking, cost linear in the
 * input, no allocation, and one buffer lent by the caller that holds only a
 * message split across feeds.  A message that lies whole inside one feed is
 * delivered as views into the caller's bytes, without a copy.
 *
 * Checks, in stream order, each ending the stream (a transport that reads
 * through it reports protocol_error): the prelude CRC (SG_EPRELUDE_CRC), then the lengths
 * (SG_EMESSAGE_LENGTH), then - once the whole message is in - the message
 * CRC (SG_EMESSAGE_CRC), then the header block (SG_EHEADER).  A callback
 * sees only messages that passed all four.
 * ------------------------------------------------------------------------ */

/** The prelude: total length, headers length, prelude CRC32. */
#define SG_ES_PRELUDE_SIZE ((size_t)12)
/** The smallest message: a prelude and a message CRC, nothing between. */
#define SG_ES_MIN_MESSAGE ((size_t)16)
/** The largest message AWS allows, and the default and hard maximum of
 *  sg_es_config.max_message: 16 MiB. */
#define SG_ES_MAX_MESSAGE ((size_t)16 * 1024 * 1024)
/** The largest header block AWS allows, and the default and hard maximum
 *  of sg_es_config.max_headers: 128 KiB. */
#define SG_ES_MAX_HEADERS ((size_t)128 * 1024)
/** The buffer a decoder needs for limit @max_message: the part of a message
 *  after its prelude, when the message spans feeds. */
#define SG_ES_BUFFER_SIZE(max_message) ((size_t)(max_message)-SG_ES_PRELUDE_SIZE)

/** sg_es_header_type - the value type byte of a header. */
typedef enum sg_es_header_type {
    SG_ES_BOOL_TRUE = 0,  /* no value bytes; integer 1 */
    SG_ES_BOOL_FALSE = 1, /* no value bytes; integer 0 */
    SG_ES_BYTE = 2,       /* 1 byte, signed */
    SG_ES_SHORT = 3,      /* 2 bytes, signed */
    SG_ES_INTEGER = 4,    /* 4 bytes, signed */
    SG_ES_LONG = 5,       /* 8 bytes, signed */
    SG_ES_BYTES = 6,      /* u16 length, then that many bytes */
    SG_ES_STRING = 7,     /* u16 length, then that many bytes (UTF-8, unchecked) */
    SG_ES_TIMESTAMP = 8,  /* 8 bytes, signed milliseconds since the epoch */
    SG_ES_UUID = 9        /* 16 bytes */
} sg_es_header_type;

/**
 * sg_es_header - one decoded header.  Views point into the message and are
 * valid as long as the sg_es_message they came from.  None is
 * NUL-terminated.
 *
 * name, name_len: the name (0 to 255 bytes; not checked as UTF-8).
 * type:           an sg_es_header_type.
 * integer:        the value of BOOL_TRUE (1), BOOL_FALSE (0), BYTE, SHORT,
 *                 INTEGER, LONG and TIMESTAMP, sign-extended; 0 otherwise.
 * value, value_len: the value bytes on the wire - for BYTES and STRING the
 *                 bytes after the u16 length, for UUID the 16 bytes, for the
 *                 integer types their big-endian bytes, for booleans none.
 */
typedef struct sg_es_header {
    const char *name;
    size_t name_len;
    sg_es_header_type type;
    int64_t integer;
    const unsigned char *value;
    size_t value_len;
} sg_es_header;

/**
 * sg_es_message - one message that passed every check, handed to the
 * sg_es_message_cb.  Every view is valid only during the callback.
 *
 * headers, headers_len: the raw header block, already validated: walk it
 *                 with sg_es_header_next() or search it with
 *                 sg_es_header_find().
 * header_count:   the number of headers in it.
 * payload, payload_len: the payload (may be empty).
 * message_type, event_type, exception_type, content_type (with their
 *                 _len): the string values of the headers ":message-type"
 *                 ("event", "exception", "error"), ":event-type",
 *                 ":exception-type" and ":content-type"; NULL and 0 when the
 *                 header is absent.  When a name appears more than once the
 *                 last one counts, as in the reference codec.
 * total_len:      the message's length on the wire, prelude and CRC included.
 * message_crc:    its CRC32, as checked.
 */
typedef struct sg_es_message {
    const unsigned char *headers;
    size_t headers_len;
    size_t header_count;
    const unsigned char *payload;
    size_t payload_len;
    const char *message_type;
    size_t message_type_len;
    const char *event_type;
    size_t event_type_len;
    const char *exception_type;
    size_t exception_type_len;
    const char *content_type;
    size_t content_type_len;
    uint32_t total_len;
    uint32_t message_crc;
} sg_es_message;

/**
 * sg_es_message_cb - one message.  Return 0 to go on; anything else stops
 * the decode, and the feed call that made it returns SG_ECANCELED (the
 * decoder is then failed).
 */
typedef int (*sg_es_message_cb)(const sg_es_message *msg, void *user_data);

/**
 * sg_es_config - limits.  Zero-initialise it; every zero field takes its
 * default.
 *
 * max_message: the longest message, prelude and CRC included.  Default and
 *              maximum SG_ES_MAX_MESSAGE; at least SG_ES_MIN_MESSAGE.  A
 *              total length under SG_ES_MIN_MESSAGE or over it is
 *              SG_EMESSAGE_LENGTH.  It sizes the buffer.
 * max_headers: the longest header block.  Default and maximum
 *              SG_ES_MAX_HEADERS.  A headers length over it, or over what
 *              the total length leaves, is SG_EMESSAGE_LENGTH.
 */
typedef struct sg_es_config {
    size_t max_message;
    size_t max_headers;
} sg_es_config;

/** sg_es_stats - counters since init or reset. */
typedef struct sg_es_stats {
    uint64_t bytes;    /* every byte fed */
    uint64_t messages; /* messages delivered to the callback */
    uint64_t copied;   /* bytes copied into the buffer (messages that span feeds) */
} sg_es_stats;

/**
 * sg_es_decoder - an event-stream decoder the caller embeds.  Initialise it
 * with sg_es_init(); every field is private.
 */
typedef struct sg_es_decoder {
    unsigned char *buf_;          /* private: the caller's buffer */
    size_t room_;                 /* private: its size (growing: as used) */
    const sg_mem *mem_;           /* private: the allocator that grows it, or NULL */
    size_t max_message_;          /* private */
    size_t max_headers_;          /* private */
    sg_es_message_cb on_message_; /* private */
    void *user_data_;             /* private */
    unsigned char prelude_[12];   /* private: the prelude, as it arrives */
    size_t have_;                 /* private: bytes of the current message so far */
    uint32_t total_;              /* private: its total length, once known */
    uint32_t headers_len_;        /* private */
    unsigned long crc_;           /* private: running CRC32 of its bytes so far */
    bool ended_;                  /* private: sg_es_end was called */
    bool clean_;                  /* private: sg_es_end's verdict */
    int error_;                   /* private: sticky error, 0 if none */
    uint32_t magic_;              /* private: set by sg_es_init */
    sg_es_stats stats_;           /* private */
} sg_es_decoder;

/**
 * sg_es_buffer_size - the buffer sg_es_init needs for @cfg (NULL or zero
 * fields mean the defaults): SG_ES_BUFFER_SIZE(max_message).
 *
 * Returns the size in bytes, or 0 when @cfg holds an out-of-range limit.
 * Thread-safety: pure function.
 */
SG_EXTERN size_t sg_es_buffer_size(const sg_es_config *cfg);

/**
 * sg_es_init - prepare @dec to read one event stream from its start.
 *
 * @dec: the caller's decoder; any previous content is overwritten.
 * @cfg: limits; NULL means the defaults.  Copied.
 * @on_message: called once per message; may be NULL (messages are only
 *   checked and counted).
 * @user_data: passed to @on_message.
 * @buf, @buf_size: the caller's buffer, at least sg_es_buffer_size(@cfg)
 *   bytes, owned by the decoder until the caller stops using it.  Never
 *   freed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @dec or @buf is NULL;
 *   SG_ERANGE   a limit in @cfg is out of range;
 *   SG_ENOBUFS  @buf_size is smaller than sg_es_buffer_size(@cfg);
 *   SG_EUNSUPPORTED  the library was built without event-stream framing
 *               (SG_WITH_EVENTSTREAM=OFF).
 * Thread-safety: touches only @dec.
 */
SG_EXTERN int sg_es_init(sg_es_decoder *dec, const sg_es_config *cfg,
                         sg_es_message_cb on_message, void *user_data, void *buf,
                         size_t buf_size);

/**
 * sg_es_feed - decode the next @len bytes of the stream.
 *
 * Any split is fine: a prelude, a header or a CRC may be cut anywhere.
 * Callbacks run before this returns, in stream order.  @data need not stay
 * valid after the call.
 *
 * Returns the number of bytes consumed (always @len) if it succeeds, or one
 * of the following negative error codes:
 *   SG_EINVAL           @dec not initialised, @data NULL with @len > 0, or
 *                       @len > PTRDIFF_MAX;
 *   SG_EPRELUDE_CRC     a prelude's CRC32 does not match its first 8 bytes;
 *   SG_EMESSAGE_LENGTH  a total length under SG_ES_MIN_MESSAGE or over
 *                       max_message, or a headers length over max_headers
 *                       or over total length - 16;
 *   SG_EMESSAGE_CRC     a message's CRC32 does not match its bytes;
 *   SG_EHEADER          the header block does not parse: a header runs past
 *                       the block, an unknown type, or ":message-type",
 *                       ":event-type", ":exception-type" or ":content-type"
 *                       not of type string;
 *   SG_ECANCELED        the callback returned non-zero;
 *   SG_EDONE            sg_es_end was already called.
 * After an error the decoder is failed: it returns that code again until
 * sg_es_reset().  Nothing half-decoded is kept, and there is no
 * resynchronisation.
 * Thread-safety: touches only @dec; the callback runs on the calling thread.
 */
SG_EXTERN ptrdiff_t sg_es_feed(sg_es_decoder *dec, const void *data, size_t len);

/**
 * sg_es_end - the body ended.  A partial message is discarded and makes the
 * end unclean.  *@clean is true iff no partial message remains and no error
 * occurred.  Later feeds return SG_EDONE; calling sg_es_end again gives the
 * same answer.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @dec not initialised or @clean is NULL.
 * Thread-safety: touches only @dec.
 */
SG_EXTERN int sg_es_end(sg_es_decoder *dec, bool *clean);

/**
 * sg_es_reset - ready @dec for a new stream (a new attempt) with the same
 * limits, callback and buffer; clears a partial message, a sticky error and
 * the stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @dec not initialised.
 * Thread-safety: touches only @dec.
 */
SG_EXTERN int sg_es_reset(sg_es_decoder *dec);

/**
 * sg_es_get_stats - copy the counters into *@stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @dec not initialised or @stats is NULL.
 * Thread-safety: reads only @dec.
 */
SG_EXTERN int sg_es_get_stats(const sg_es_decoder *dec, sg_es_stats *stats);

/**
 * sg_es_header_next - walk the headers of @msg in wire order.
 *
 * @pos: the cursor; set *@pos to 0 before the first call, then leave it to
 *   this function (a value it did not set may read garbage as a header).
 * @out: set to the next header.
 *
 * Returns 1 and fills *@out when there was a next header, 0 at the end of
 * the block, or one of the following negative error codes:
 *   SG_EINVAL   @msg, @pos or @out is NULL, or *@pos is past the block;
 *   SG_EHEADER  the block does not parse from *@pos (never for a message
 *               handed to a callback: its block was checked).
 * Cost: O(1) per header.
 * Thread-safety: reads only @msg.
 */
SG_EXTERN int sg_es_header_next(const sg_es_message *msg, size_t *pos, sg_es_header *out);

/**
 * sg_es_header_find - the last header of @msg named exactly @name (@name_len
 * bytes), as the reference codec's map keeps it.
 *
 * Returns 1 and fills *@out when found, 0 when absent, or one of the
 * following negative error codes:
 *   SG_EINVAL   @msg or @out is NULL, or @name is NULL with @name_len > 0;
 *   SG_EHEADER  the block does not parse (never for a checked message).
 * Cost: O(number of headers).
 * Thread-safety: reads only @msg.
 */
SG_EXTERN int sg_es_header_find(const sg_es_message *msg, const char *name,
                                size_t name_len, sg_es_header *out);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_FRAMING_H */
