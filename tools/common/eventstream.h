/*
 * The AWS event-stream encoder the programs share (eventstream.c): the
 * messages sg-fakemodel plays and the in-band errors sg-proxy writes in
 * Bedrock's framing.  zlib's crc32.
 */
#ifndef SG_TOOLS_EVENTSTREAM_H
#define SG_TOOLS_EVENTSTREAM_H

#include <stddef.h>

#include "buf.h"

/* One string header (type 7) of an AWS event-stream message. */
typedef struct {
    const char *name;  /* at most 255 bytes */
    const char *value; /* at most 65535 bytes */
} sg_fm_es_header;

/* A fault to put in a message on purpose (bad_crc_at). */
typedef enum {
    SG_FM_ES_INTACT = 0,
    SG_FM_ES_BAD_PRELUDE_CRC,
    SG_FM_ES_BAD_MESSAGE_CRC
} sg_fm_es_damage;

/* The bytes the headers take, and the whole message (eventstream.c). */
size_t sg_fm_es_headers_len(const sg_fm_es_header *h, size_t n);
size_t sg_fm_es_message_len(const sg_fm_es_header *h, size_t n, size_t payload_len);
/* Appends one message to out.  Returns 0, or -1 when out of memory or the
 * message would exceed 4 GiB. */
int sg_fm_es_message(sg_fm_buf *out, const sg_fm_es_header *h, size_t n,
                     const char *payload, size_t payload_len, sg_fm_es_damage damage);

#endif
