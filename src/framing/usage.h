/*
 * What one attempt consumed, as its stream says: the usage figures a
 * provider profile reads from its events (docs/profiles.md, "Usage"), and
 * the bytes of generated text its items carried - what the policy
 * estimates from when the figures never came (docs/report.md).
 *
 * The figures live in the stream (sg__stream usage_[], reset by
 * sg_stream_begin) as the provider gives them; sg__stream_usage
 * normalises them: input includes cached input, output includes reasoning
 * (OpenTelemetry's convention).  A profile's classifier reads them when
 * the stream calls it with its figures as the user_data (the config's
 * usage_classify_ says the classifier is one that does); called as a
 * plain classifier (NULL user_data: sg_stream_config_classify, an error
 * body) it reads nothing and takes the path it took before usage.
 *
 * The text is counted exactly on a sample of the items that carry it -
 * the first SG__U_EXACT of an attempt's items, then one in SG__U_EVERY -
 * and the rest is extrapolated from their JSON data bytes: finding the
 * text in every item costs a scan of it (tens of nanoseconds; bench
 * bench_profile), counting its bytes an addition.
 */
#ifndef SG_FRAMING_USAGE_H
#define SG_FRAMING_USAGE_H

#include <streamguard/stream.h>

#include "framing/body.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "framing/jscan.h"

/* Items whose text is counted exactly: the first SG__U_EXACT of an
 * attempt (by sg_item.index), then one in SG__U_EVERY
 * (sg__usage_in_sample). */
#define SG__U_EXACT 32
#define SG__U_EVERY 32

/* The figures (sg__stream usage_[]), each a count the provider gave
 * (saturating at UINT32_MAX), and the text counts. */
enum {
    SG__U_IN = 0, /* input, as the provider counts it (see SG__U_IN_EXCL) */
    SG__U_CREAD,  /* input read from a cache */
    SG__U_CWRITE, /* input written to a cache (Anthropic, Bedrock) */
    SG__U_OUT,    /* output, as the provider counts it (see SG__U_OUT_EXCL) */
    SG__U_REASON, /* reasoning (hidden or summarised thinking) */
    SG__U_TEXT,   /* bytes of text of the sampled items (decoded) */
    SG__U_DATA,   /* JSON data bytes of every item that may carry text */
    SG__U_SDATA,  /* low 24 bits: those of the sampled items; high 8: bits */
    SG__U_COUNT
};
_Static_assert(SG__U_COUNT * sizeof(uint32_t) == sizeof(((sg__stream *)0)->usage_),
               "the stream holds every figure");

/* The high byte of usage_[SG__U_SDATA] (macros: 1 << 31 is no int). */
/* bit f (f < SG__U_TEXT): figure f is known */
#define SG__U_KNOWN (UINT32_C(1) << 24)
/* the provider's input leaves its cache reads and writes out (Anthropic,
 * Bedrock): input = in + cache read + cache write */
#define SG__U_IN_EXCL (UINT32_C(1) << 29)
/* its output leaves the reasoning out (Gemini's thoughtsTokenCount) */
#define SG__U_OUT_EXCL (UINT32_C(1) << 30)
/* the stream's classifier is a profile's that reads usage */
#define SG__U_READER (UINT32_C(1) << 31)
/* the low 24 bits: the sampled data, up to this (the sample is then big
 * enough) */
#define SG__U_SDATA_MAX ((UINT32_C(1) << 24) - 1)

static inline bool sg__usage_known(const uint32_t *u, unsigned f) {
    return (u[SG__U_SDATA] & SG__U_KNOWN << f) != 0;
}

/* Whether @s's classifier reads usage (sg__usage_init said so). */
static inline bool sg__usage_reader(const sg__stream *s) {
    return (s->usage_[SG__U_SDATA] & SG__U_READER) != 0;
}

/* Nothing read: the start of an attempt, or of a stream whose classifier
 * reads usage when @reader. */
static inline void sg__usage_init(sg__stream *s, bool reader) {
    memset(s->usage_, 0, sizeof(s->usage_));
    s->usage_[SG__U_SDATA] = reader ? SG__U_READER : 0;
}

/* Whether the item of index @index is one of the sample past the first
 * SG__U_EXACT: the top bits of @index times 2^64 / phi (Fibonacci
 * hashing), below 2^64 / SG__U_EVERY for one item in SG__U_EVERY - spread
 * evenly over the stream (the golden ratio's multiples), never every
 * SG__U_EVERY-th, so that texts that repeat with a short period do not
 * all fall on the same beat.  One multiply: it runs for every item. */
static inline bool sg__usage_in_sample(uint64_t index) {
    return index * UINT64_C(0x9E3779B97F4A7C15) < UINT64_MAX / SG__U_EVERY;
}

/* An item that may carry generated text, of @len data bytes: counted;
 * true when its text is to be counted too (sg__usage_sampled), the item
 * being one of the sample. */
static inline bool sg__usage_carrier(uint32_t *u, const sg_item *item) {
    /* (an item is at most max_event bytes: below 2^32) */
    uint32_t d = u[SG__U_DATA] + (uint32_t)item->data_len;
    u[SG__U_DATA] = d >= u[SG__U_DATA] ? d : UINT32_MAX;
    return (item->index < SG__U_EXACT || sg__usage_in_sample(item->index)) &&
           (u[SG__U_SDATA] & SG__U_SDATA_MAX) < SG__U_SDATA_MAX;
}

/* A sampled item (sg__usage_carrier) of @len data bytes carried @text
 * bytes of text. */
void sg__usage_sampled(uint32_t *u, size_t len, uint64_t text);

/* The text of a sampled @item (its data) under @keys (string values:
 * every key a text key), counted. */
void sg__usage_text_of(uint32_t *u, const sg_item *item, const sg__jkey *keys,
                       unsigned nkeys);

/* The text of @item when it is one of the sample (sg__usage_carrier),
 * under @keys (string values: every key a text key), counted. */
static inline void sg__usage_text(uint32_t *u, const sg_item *item, const sg__jkey *keys,
                                  unsigned nkeys) {
    if (sg__usage_carrier(u, item)) {
        sg__usage_text_of(u, item, keys, nkeys);
    }
}

/* Figure @f is no longer known. */
static inline void sg__usage_forget(uint32_t *u, unsigned f) {
    u[SG__U_SDATA] &= ~(SG__U_KNOWN << f);
}

/* Figure @f is @v (saturating), and known. */
void sg__usage_set(uint32_t *u, unsigned f, uint64_t v);

/* A JSON number that is a whole count (digits only; anything else - a
 * sign, a fraction, an exponent, null - is no count) into *@v. */
bool sg__usage_count(const char *p, size_t n, uint64_t *v);

/* The count whose digits begin at @p (before @end), as sg__usage_count. */
bool sg__usage_count_at(const char *p, const char *end, uint64_t *v);

/* The count of the last key @key (@klen bytes, its 11th byte an upper-case
 * 'T': "candidatesTokenCount") in @p[@n], searched from the end - where a
 * usage object that closes its item is found at once. */
bool sg__usage_last_count(const char *p, size_t n, const char *key, size_t klen,
                          uint64_t *v);

/* One figure of a usage object: where it is, and which it is. */
typedef struct sg__ufield {
    sg__jpath path;
    uint8_t f;
} sg__ufield;

/* How sg__usage_fields takes a figure. */
enum {
    /* one absent (or null) is 0: proto3's JSON and Go's omitempty leave
     * zeros out */
    SG__UF_ABSENT_ZERO = 1u << 0,
    /* only a figure not known yet is taken (a second source of the same
     * figures, read where the first said nothing) */
    SG__UF_FILL = 1u << 1,
};

/* Reads the figures @fields from the JSON @p[@n] (a usage object): each
 * one given as a count overwrites what was known (providers send running
 * or final totals, never deltas: never added); one absent or null is
 * left as it was; @mode (SG__UF_*) says otherwise. */
void sg__usage_fields(uint32_t *u, const char *p, size_t n, const sg__ufield *fields,
                      size_t nfields, unsigned mode);

/* Anthropic's usage object (message_start's message.usage, message_delta's
 * usage; Claude's inside Bedrock's chunks too): input without the cache,
 * the cache's reads and writes, output and thinking.  @start: it is
 * message_start's, whose output_tokens is a placeholder, not read. */
void sg__usage_anthropic(uint32_t *u, const char *p, size_t n, bool start);

/*
 * The usage of one attempt, normalised: input includes cached input,
 * output includes reasoning; -1 for a figure not known.
 */
typedef struct sg__usage_read {
    int64_t input, output, cached, reasoning;
    uint64_t text_bytes; /* generated text received (decoded), estimated */
} sg__usage_read;

/* The current (or last) attempt's usage as @s's profile read it.  Returns
 * false, *@out all unknown, when nothing reads it (no profile, or a
 * classifier of the caller's). */
bool sg__stream_usage(const sg__stream *s, sg__usage_read *out);

#endif
