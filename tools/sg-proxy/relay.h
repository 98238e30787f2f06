/*
 * relay.h - the committed attempt's bytes on their way to the client.
 *
 * SSE events and NDJSON lines wait here until the library delivers the
 * item each one carries (upstream.c's on_item), so that the client gets
 * exactly the items the clocks and caps accepted, each whole, however the
 * upstream's reads fell; an event stream goes on message by message.  No
 * sockets and no libcurl: upstream.c feeds it, and so does
 * tests/unit/proxy_relay_test.c, at every split of a recorded stream.
 *
 * Released bytes wait here too until they are handed to the client (one
 * send for every event a read released: conn.c's flush_out), so an event
 * is copied once, as it is read, and never again on its way out.
 *
 * Memory: the bytes held and released (the caller bounds them), in a
 * buffer freed whenever all of it has been handed over (a stream that
 * waits for its upstream holds none), and for an SSE event of several
 * data lines a copy of its data, grown as used.
 */
#ifndef SG_PROXY_RELAY_H
#define SG_PROXY_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <streamguard/streamguard.h>

struct relay {
    sg_format format;
    /* buf[off, rel): released, not yet handed to the client; buf[rel, len):
     * held until their items come.  What was handed over stays before off
     * until an add needs the room (moved then, once per read, not per
     * event). */
    char *buf;
    size_t off, rel, len, cap;
    char *data; /* an SSE event's data lines joined, when it has several */
    size_t data_cap;
    bool token_seen; /* held metadata comes with the first token */
    /* the line state where the held bytes start */
    bool bom_done; /* past the stream's first bytes (a byte order mark) */
    bool skip_lf;  /* the last line went with a CR: an LF first is its */
};

void relay_init(struct relay *r, sg_format format);
void relay_free(struct relay *r);
/* One read of the attempt's body, appended to the held bytes: false when
 * memory ran out. */
bool relay_add(struct relay *r, const void *p, size_t n);
/* The held bytes (not yet released): their start, and their count in *@n. */
const char *relay_held(const struct relay *r, size_t *n);
/* The library delivered @item: how many of the first held bytes go to the
 * client now (its event and what precedes it: comments, keepalives, held
 * metadata), 0 when none yet (metadata held before the first token goes
 * with it; an event stream goes by relay_messages).  relay_release() that
 * many. */
size_t relay_item(struct relay *r, const sg_item *item);
/* The stream ended with an in-band error the library found (outcome
 * provider_error) under the framing @cfg: how many of the first held
 * bytes reach the end of the upstream's own error event (what precedes it
 * is no item), to go to the client as the upstream wrote it; 0 when it is
 * not among them (then the proxy says it in its own words). */
size_t relay_error_end(struct relay *r, const sg_stream_config *cfg);
/* An event stream: how many of the first held bytes are whole messages. */
size_t relay_messages(const struct relay *r);
/* The first @n held bytes are released: the client's, in order. */
void relay_release(struct relay *r, size_t n);
/* The held bytes go nowhere (a stream cut inside an event). */
void relay_discard(struct relay *r);
/* The released bytes not yet handed over: their start, their count in *@n.
 * One send takes them all, however many events they are. */
const char *relay_out(const struct relay *r, size_t *n);
/* The first @n released bytes were handed over (or nowhere). */
void relay_drop(struct relay *r, size_t n);

#endif
