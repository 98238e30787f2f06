/*
 * sg_stream's item path (stream_items.c), for the stream's life cycle
 * (stream.c): the parsers' callbacks, and what the life cycle asks of
 * the held items and the lines gathered outside SSE.
 */
#ifndef SG_FRAMING_STREAM_ITEMS_H
#define SG_FRAMING_STREAM_ITEMS_H

#include <streamguard/stream.h>

#include "framing/body.h"

/* The parsers' callbacks; @user_data is the sg__stream.  Each returns 0 to
 * read on, non-zero to stop the parser (the stream says why). */
int sg__stream_on_sse_event(const sg_sse_event *ev, void *user_data);
int sg__stream_on_sse_other(const char *line, size_t len, void *user_data);
int sg__stream_on_ndjson_line(const char *line, size_t len, void *user_data);
int sg__stream_on_es_message(const sg_es_message *m, void *user_data);

/* Room for the items held before the first token under @c (a classifier
 * set), in bytes: max_event and a record per item. */
size_t sg__stream_hold_size(const sg_stream_config *c);

/* What was held goes to the consumer, in order.  Non-zero when the
 * consumer stopped. */
int sg__stream_release_held(sg__stream *s);

/* The lines gathered outside SSE, classified as one item: 1 when it was
 * an error (the attempt ends provider_error), 0 otherwise. */
int sg__stream_settle_other(sg__stream *s);

/* Frees a growing stream's @store that holds nothing (*@room 0 after);
 * a lent buffer's part stays. */
void sg__stream_store_free(sg__stream *s, char **store, size_t *room);

#endif
