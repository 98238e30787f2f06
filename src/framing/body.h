/*
 * sg__stream: the state of an sg_stream as the library keeps it - framing
 * joined to a guard (stream.c, stream_items.c, usage.c).
 *
 * The public sg_stream is storage of a fixed size (its ABI); the library
 * keeps an sg__stream at its start and the provider's error texts after
 * it.  The shared attempt lifecycle, which lives per open stream, embeds
 * an sg__stream directly: some 240 bytes smaller, its provider texts
 * allocated when an attempt first has one and kept for the next.  Every
 * sg_stream_* call is an sg__stream_* call on the storage.
 */
#ifndef SG_FRAMING_BODY_H
#define SG_FRAMING_BODY_H

#include <streamguard/stream.h>

#include "framing/sse_state.h"

#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>

/* The provider's error texts: its type, then its message, NUL-terminated. */
#define SG__STREAM_PTYPE_SIZE (SG_STREAM_ERROR_TYPE_MAX + 1)
#define SG__STREAM_PTEXT_SIZE (SG__STREAM_PTYPE_SIZE + SG_STREAM_ERROR_MESSAGE_MAX + 1)

typedef struct sg__stream {
    sg_guard guard_;
    union {
        sg__sse sse; /* (without the public parser's reserved room) */
        sg_ndjson_parser nd;
        sg_es_decoder es;
    } parser_;
    sg_item_cb on_item_;
    const char *const *skip_types_;
    void *user_data_;
    int64_t now_;
    uint64_t index_;
    int64_t stop_at_;
    const char *nd_terminal_;
    sg_guard_result result_;
    sg_classify_cb classify_;
    void *classify_data_;
    /* the items held before the first token */
    char *hold_;
    size_t hold_cap_, hold_room_, hold_len_;
    uint64_t released_;
    const char *error_text_;
    /* the lines outside SSE (other_json) */
    char *other_;
    size_t other_cap_, other_len_, other_room_;
    /* the allocator of a growing stream (grows_): the caller's copy in a
     * public sg_stream's storage, or the library's realloc and free */
    const sg_mem *mem_;
    /* SG__STREAM_PTEXT_SIZE bytes: the provider's error type and message;
     * a public sg_stream's own storage after this struct, else allocated
     * at an attempt's first provider error (ptext_own_) or NULL */
    char *ptext_;
    /* the attempt's usage as a provider profile reads it (usage.h) */
    uint32_t usage_[8];
    uint32_t attempt_, magic_;
    uint32_t hold_n_;
    int error_;
    uint8_t format_, state_;
    bool cancelled_, guard_stop_, nd_terminal_seen_;
    bool meta_at_once_, end_required_, got_token_;
    bool end_at_eof_, end_seen_;
    bool grows_, provider_error_, provider_retryable_, ptext_own_;
} sg__stream;

_Static_assert(sizeof(sg__stream) + SG__STREAM_PTEXT_SIZE + sizeof(sg_mem) <=
                   sizeof(sg_stream),
               "a public sg_stream holds the state, its provider texts and allocator");
_Static_assert(alignof(sg__stream) <= alignof(sg_stream), "and is aligned for it");

/* The state a public sg_stream's storage holds (NULL for NULL). */
static inline sg__stream *sg__stream_of(sg_stream *s) {
    return (sg__stream *)(void *)s;
}
static inline const sg__stream *sg__stream_cof(const sg_stream *s) {
    return (const sg__stream *)(const void *)s;
}

/* As sg_stream_init_mem (with realloc and free), sg_stream_release, ...
 * (stream.h) on an sg__stream: the same contracts, but the provider texts
 * are allocated when needed (without memory for them the error is kept,
 * its texts empty). */
int sg__stream_init_mem(sg__stream *s, const sg_stream_config *cfg, sg_item_cb on_item,
                        void *user_data);
void sg__stream_release(sg__stream *s);
int sg__stream_begin(sg__stream *s, const sg_guard_config *gcfg, const sg_budget *budget,
                     uint32_t attempt, int64_t now);
sg_guard *sg__stream_guard(sg__stream *s);
int64_t sg__stream_next_deadline(const sg__stream *s);
int sg__stream_feed(sg__stream *s, const void *data, size_t len, int64_t now);
int sg__stream_end(sg__stream *s, int64_t now, sg_outcome how, sg_guard_result *result);
int sg__stream_cancel(sg__stream *s, int64_t now);
const char *sg__stream_error_text(const sg__stream *s);
bool sg__stream_active(const sg__stream *s);
bool sg__stream_provider_error(const sg__stream *s, const char **type,
                               const char **message, bool *retryable);
bool sg__stream_classify_error_body(const sg__stream *s, const char *body, size_t len,
                                    sg_item_error *err);

#endif
