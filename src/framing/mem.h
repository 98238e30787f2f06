/*
 * Buffers that grow as they are used: the framing's stores (a partial
 * line, an event's fields, a message that spans reads, the items held
 * before the first token) when the layer above gives an allocator
 * (sg_stream_init_mem) instead of lending one buffer sized for the worst
 * case.
 *
 * A store is (pointer, room).  With an allocator it starts empty (NULL, 0),
 * grows as bytes must be kept - never past the limit its caller checks
 * first, so the limits stay the bound and the same clear error - and is
 * freed as soon as it holds nothing.  Without one (mem NULL) it is a fixed
 * part of the caller's buffer whose room is its limit: it never grows and
 * is never freed, so the lent-buffer path allocates nothing.
 */
#ifndef SG_FRAMING_MEM_H
#define SG_FRAMING_MEM_H

#include <stddef.h>

#include <streamguard/framing.h>

#include "framing/sse_state.h"

/* The store @buf of *@room bytes, made at least @need bytes (@need <=
 * @limit): doubled, at least SG__MEM_MIN, at most @limit.  Returns the
 * store (moved, perhaps: views into it must follow), or NULL when the
 * allocator had no memory - or @mem is NULL (a lent buffer cannot grow) -
 * and then nothing changed.  Call it only when @need > *@room. */
void *sg__mem_grow(const sg_mem *mem, void *buf, size_t *room, size_t need, size_t limit);

/* Frees the store @buf (NULL is fine) and returns NULL; *@room becomes 0.
 * With @mem NULL (a lent buffer) it does nothing and returns @buf. */
void *sg__mem_free(const sg_mem *mem, void *buf, size_t *room);

/* The smallest store: a short line or a token's event. */
#define SG__MEM_MIN ((size_t)256)

/* realloc and free, as an sg_mem's resize (its default). */
void *sg__mem_std(void *ptr, size_t size, void *user_data);

/* The parsers' init with growing stores from @mem (which must outlive the
 * parser) instead of a lent buffer: as sg_sse_init, sg_ndjson_init and
 * sg_es_init otherwise; SG_EINVAL for a NULL @mem.  A parser so made frees
 * its stores as they empty, and all of them at its end, its failure or its
 * reset; sg__sse_free frees the last event id too (the only store that
 * outlives an event). */
int sg__sse_init_mem(sg__sse *parser, const sg_sse_config *cfg, const sg__sse_cbs *cbs,
                     void *user_data, const sg_mem *mem);
void sg__sse_free(sg__sse *parser);
int sg__ndjson_init_mem(sg_ndjson_parser *parser, const sg_ndjson_config *cfg,
                        void *user_data, const sg_mem *mem);
int sg__es_init_mem(sg_es_decoder *dec, const sg_es_config *cfg, void *user_data,
                    const sg_mem *mem);

#endif /* SG_FRAMING_MEM_H */
