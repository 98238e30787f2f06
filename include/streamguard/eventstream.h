/*
 * streamguard eventstream: the AWS event stream decoder
 * (application/vnd.amazon.eventstream; smithy.io "Amazon Event Stream"),
 * the framing of AWS Bedrock's model streams.  Part of the framing
 * (<streamguard/framing.h> includes it), on the same contract as its
 * parsers: any chunking, cost linear in the input, no allocation, one
 * buffer lent by the caller, a config embedded with setters.
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_EVENTSTREAM_H
#define STREAMGUARD_EVENTSTREAM_H

#include <streamguard/framing.h>

#ifdef __cplusplus
extern "C" {
#endif

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
 * sg_es_config - a decoder's limits and callback.  Embed it;
 * sg_es_config_init sets the defaults (zero-initialised is the same).  Its
 * setters return 0, SG_EINVAL (@cfg NULL) or SG_ERANGE (out of range: @cfg
 * unchanged); a limit of 0 restores its default.
 */
typedef struct sg_es_config {
    size_t max_message_, max_headers_; /* private: 0 = default */
    sg_es_message_cb on_message_;      /* private */
    void *reserved_[4];                /* private: room to grow */
} sg_es_config;

/** sg_es_config_init - every default (NULL: nothing). */
SG_EXTERN void sg_es_config_init(sg_es_config *cfg);

/** sg_es_config_set_max_message - the longest message, prelude and CRC
 *  included: SG_ES_MIN_MESSAGE .. SG_ES_MAX_MESSAGE; 0 (the default) is
 *  SG_ES_MAX_MESSAGE.  A total length outside it is SG_EMESSAGE_LENGTH.
 *  It sizes the buffer. */
SG_EXTERN int sg_es_config_set_max_message(sg_es_config *cfg, size_t n);

/** sg_es_config_set_max_headers - the longest header block: 1 ..
 *  SG_ES_MAX_HEADERS; 0 (the default) is SG_ES_MAX_HEADERS.  A headers
 *  length over it, or over what the total length leaves, is
 *  SG_EMESSAGE_LENGTH. */
SG_EXTERN int sg_es_config_set_max_headers(sg_es_config *cfg, size_t n);

/** sg_es_config_set_on_message - called once per message that passed every
 *  check; NULL (the default): messages are only checked and counted. */
SG_EXTERN int sg_es_config_set_on_message(sg_es_config *cfg, sg_es_message_cb fn);

/** sg_es_stats - counters since init or reset (caller's; size first). */
typedef struct sg_es_stats {
    size_t size;       ///< sizeof(sg_es_stats): SG_ES_STATS_INIT
    uint64_t bytes;    ///< every byte fed
    uint64_t messages; ///< messages delivered to the callback
    uint64_t copied;   ///< bytes copied into the buffer (messages that span feeds)
} sg_es_stats;
/** An sg_es_stats ready for sg_es_get_stats. */
#define SG_ES_STATS_INIT \
    { sizeof(sg_es_stats), 0, 0, 0 }

/**
 * sg_es_decoder - an event-stream decoder the caller embeds.  Initialise it
 * with sg_es_init(); every field is private.
 */
typedef struct sg_es_decoder {
    /* private (src/framing/eventstream.c says what each holds) */
    unsigned char *buf_;
    size_t room_;
    const sg_mem *mem_;
    size_t max_message_, max_headers_;
    sg_es_message_cb on_message_;
    void *user_data_;
    unsigned char prelude_[12];
    size_t have_;
    uint32_t total_, headers_len_;
    unsigned long crc_;
    bool ended_, clean_;
    int error_;
    uint32_t magic_;
    sg_es_stats stats_;
    void *reserved_[4]; /* private: room to grow */
} sg_es_decoder;

/**
 * sg_es_buffer_size - the buffer sg_es_init needs for @cfg (NULL means the
 * defaults): SG_ES_BUFFER_SIZE(max_message).
 *
 * Returns the size in bytes, or 0 when @cfg holds an out-of-range limit.
 * Thread-safety: pure function.
 */
SG_EXTERN size_t sg_es_buffer_size(const sg_es_config *cfg);

/**
 * sg_es_init - prepare @dec to read one event stream from its start.
 *
 * @dec: the caller's decoder; any previous content is overwritten.
 * @cfg: limits and callback; NULL means the defaults.  Copied.
 * @user_data: passed to the callback.
 * @buf, @buf_size: the caller's buffer, at least sg_es_buffer_size(@cfg)
 *   bytes, owned by the decoder until the caller stops using it.  Never
 *   freed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @dec or @buf is NULL;
 *   SG_ENOBUFS  @buf_size is smaller than sg_es_buffer_size(@cfg);
 *   SG_EUNSUPPORTED  the library was built without event-stream framing
 *               (SG_WITH_EVENTSTREAM=OFF).
 */
SG_EXTERN int sg_es_init(sg_es_decoder *dec, const sg_es_config *cfg, void *user_data,
                         void *buf, size_t buf_size);

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
 */
SG_EXTERN int sg_es_end(sg_es_decoder *dec, bool *clean);

/**
 * sg_es_reset - ready @dec for a new stream (a new attempt) with the same
 * limits, callback and buffer; clears a partial message, a sticky error and
 * the stats.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @dec not initialised.
 */
SG_EXTERN int sg_es_reset(sg_es_decoder *dec);

/**
 * sg_es_get_stats - copies the counters into *@stats, as many as its size
 * (set by SG_ES_STATS_INIT) holds.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @dec not initialised, or @stats is NULL or its size is
 *              smaller than its first member.
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
 */
SG_EXTERN int sg_es_header_find(const sg_es_message *msg, const char *name,
                                size_t name_len, sg_es_header *out);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_EVENTSTREAM_H */
