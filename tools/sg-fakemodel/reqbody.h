/*
 * What sg-fakemodel reads in a request body, which it otherwise discards:
 * whether an OpenAI Chat Completions request asks for the usage chunk
 * (`"stream_options": {"include_usage": true}`).  The body arrives in
 * pieces of any size (HTTP/1.1 chunks, HTTP/2 DATA frames), so the reader
 * is an incremental JSON scanner with a fixed state: nothing is kept of
 * the body, nothing is allocated.  libc only; the fuzz target and the unit
 * test include reqbody.c.
 */
#ifndef SG_FAKEMODEL_REQBODY_H
#define SG_FAKEMODEL_REQBODY_H

#include <stddef.h>
#include <stdint.h>

/* The deepest nesting followed; a deeper body asks for nothing. */
#define SG_FM_BODY_MAX_DEPTH 256
/* The longest object key compared (the keys sought are shorter). */
#define SG_FM_BODY_KEY_MAX 16

/* All zeroes is a fresh scanner.  Fields are private. */
typedef struct {
    uint8_t objects[SG_FM_BODY_MAX_DEPTH / 8]; /* bit per level: 1 object, 0 array */
    uint16_t depth;
    uint8_t state;
    uint8_t pending;    /* what the value about to start belongs to */
    uint8_t in_str;     /* 1 value string, 2 key string */
    uint8_t escape;     /* 0; 1 after '\'; 2..5 reading \u's hex digits */
    uint8_t key_len;    /* SG_FM_BODY_KEY_MAX + 1: longer, or not ASCII */
    uint8_t lit_len;    /* bytes of the literal (true, false, null, a number) */
    uint8_t lit_wants;  /* the literal is include_usage's value */
    uint8_t in_options; /* inside the stream_options object */
    uint8_t asks;       /* include_usage: true, as seen so far */
    uint16_t uhex;      /* the \u escape's code so far */
    char key[SG_FM_BODY_KEY_MAX];
    char lit[6];
} sg_fm_body_scan;

/* Feeds the next @n bytes of the body. */
void sg_fm_body_scan_feed(sg_fm_body_scan *s, const char *p, size_t n);

/*
 * 1 if the body fed so far is one whole JSON object whose top-level
 * "stream_options" is an object whose "include_usage" is the literal
 * true (the last of repeated keys counts, as JSON.parse has it); else 0 -
 * a body that is not JSON, not an object, cut short, or nested deeper
 * than SG_FM_BODY_MAX_DEPTH asks for nothing.
 */
int sg_fm_body_asks_usage(const sg_fm_body_scan *s);

#endif
