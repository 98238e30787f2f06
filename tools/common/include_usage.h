/*
 * include_usage.h - the route option include-usage (docs/sg-proxy.md,
 * "Usage and cost"): an OpenAI Chat Completions request body that streams
 * and does not say whether it wants its usage gets
 * "stream_options":{"include_usage":true}, so that the upstream sends the
 * usage chunk the report reads.  Every other body goes as the client
 * wrote it.  And the reader of a request body's top-level "model" that
 * sg-proxy (a fallback's model, the spans' model) and sg-stream (its
 * spans' model) share.  libc only, no socket: the unit test and the fuzz
 * targets include include_usage.c.
 */
#ifndef SG_PROXY_INCLUDE_USAGE_H
#define SG_PROXY_INCLUDE_USAGE_H

#include <stdbool.h>
#include <stddef.h>

/* The deepest nesting read; a deeper body goes as it is. */
#define IU_MAX_DEPTH 256

/* One edit of a body: @cut bytes at @at replaced by @text. */
struct iu_edit {
    size_t at;
    size_t cut;
    const char *text; /* NUL-ended, outlives the edit's apply */
};

/*
 * Whether @body[0..@len) gets the field, and where: true with *@e when it
 * is one whole JSON text (RFC 8259: UTF-8, nothing after it but
 * whitespace, at most IU_MAX_DEPTH deep) whose value is an object, whose
 * top-level "stream" is the literal true, and whose top-level
 * "stream_options" (the last of repeated keys counts, as JSON.parse has
 * it; keys are compared decoded) is absent, null, or an object without
 * "include_usage".  The edit then adds the field after the last member
 * (of the body, or of stream_options), or replaces the null.  false for
 * everything else: not JSON, not streaming, include_usage already there
 * (true or false: the client's choice), stream_options not an object.
 */
bool include_usage_edit(const char *body, size_t len, struct iu_edit *e);

/*
 * A fallback's model override (docs/sg-proxy.md, "FALLBACKS"): where the
 * top-level "model" of @body[0..@len) is.  1 with @e->at and @e->cut the
 * last top-level "model"'s string literal, quotes included (the last of
 * repeated keys counts, as JSON.parse has it; keys are compared decoded),
 * @e->text NULL for the caller to set; 0 when the body is one JSON text
 * (as include_usage_edit reads one) with no such string - not an object,
 * no "model", or one that is not a string; -1 when it is not JSON.  A
 * "model" nested deeper or inside a string is never the top-level one.
 */
int body_model(const char *body, size_t len, struct iu_edit *e);

/*
 * The text of the JSON string literal @lit[0..@n) (quotes included, as
 * body_model finds one), decoded into @out: its length, or 0 when it does
 * not fit @cap - 1 bytes, holds a NUL or an escape that does not decode
 * (a lone surrogate).
 */
size_t body_json_text(const char *lit, size_t n, char *out, size_t cap);

/*
 * The model a request body asks for: the text of @body[0..@len)'s
 * top-level "model" string (body_model), decoded into @out - its length,
 * or 0 when there is none, the body is not JSON, or the name does not fit
 * @cap - 1 bytes (body_json_text).  What sg-proxy and sg-stream name the
 * spans' gen_ai.request.model by.
 */
size_t body_model_name(const char *body, size_t len, char *out, size_t cap);

/* @body with @e applied, in a new buffer of *@out_len bytes (the caller
 * frees it); NULL when the memory is not there. */
char *include_usage_apply(const char *body, size_t len, const struct iu_edit *e,
                          size_t *out_len);

#endif
