/*
 * sg__sse: an SSE parser's state as the library keeps it (sse.c).  The
 * public sg_sse_parser is storage of a fixed size (its ABI, with room to
 * grow); the library keeps an sg__sse at its start.  A stream (body.h),
 * one per open stream of a transport, embeds an sg__sse directly, without
 * the public struct's reserved room.  Every sg_sse_* call on a parser is
 * an sg__sse_* call on its storage.
 */
#ifndef SG_FRAMING_SSE_STATE_H
#define SG_FRAMING_SSE_STATE_H

#include <streamguard/framing.h>

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>

/* A parser's callbacks (sg_sse_config's). */
typedef struct sg__sse_cbs {
    sg_sse_event_cb on_event;
    sg_sse_comment_cb on_comment;
    sg_sse_retry_cb on_retry;
    sg_sse_other_cb on_other;
} sg__sse_cbs;

typedef struct sg__sse {
    sg__lines lines_;
    const struct sg__sse_cbs *cbs_; /* a public parser's: in its storage */
    void *user_data_;
    const char *term_data_, *term_type_;
    size_t term_data_len_, term_type_len_, max_event_;
    char *type_store_, *id_pending_store_, *id_last_store_, *data_store_;
    size_t type_room_, id_pending_room_, id_last_room_, data_room_;
    const char *type_, *id_pending_, *data_;
    size_t type_len_, id_pending_len_, id_last_len_, data_len_;
    bool has_data_, id_dirty_, terminal_seen_, ended_, clean_;
    int error_;
    uint32_t magic_;
    /* the counts (sg_sse_get_stats): a public parser's, in its storage;
     * NULL for one a stream embeds, which nobody asks */
    sg_sse_stats *stats_;
} sg__sse;

_Static_assert(sizeof(sg__sse) + sizeof(sg__sse_cbs) + sizeof(sg_sse_stats) <=
                   sizeof(sg_sse_parser),
               "a public parser holds one, its callbacks and its counts");
_Static_assert(alignof(sg__sse) <= alignof(sg_sse_parser), "and is aligned for it");

/* As sg_sse_init, sg_sse_feed, ... (framing.h) on an sg__sse, with the
 * callbacks @cbs (which must outlive it; @cfg's are not read) and no
 * counts. */
int sg__sse_init(sg__sse *p, const sg_sse_config *cfg, const sg__sse_cbs *cbs,
                 void *user_data, void *buf, size_t buf_size);
ptrdiff_t sg__sse_feed(sg__sse *p, const void *data, size_t len);
int sg__sse_end(sg__sse *p, bool *clean);
int sg__sse_reset(sg__sse *p);
bool sg__sse_terminal_seen(const sg__sse *p);

#endif
