/*
 * sg-fakemodel internals shared by its files.  One thread, one epoll loop:
 * nothing here is locked, and nothing may block.
 */
#ifndef SG_FAKEMODEL_H
#define SG_FAKEMODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#include "../common/buf.h"
#include "../common/eventstream.h"
#include "../common/http1.h"
#include "scenario.h"

#define SG_FM_VERSION "0.1.0"

/* ------------------------------------------------------------ timers */

#define SG_FM_NS_PER_MS 1000000LL

/*
 * A timer node lives inside its owner, so arming never allocates.  The heap
 * orders by (due, seq): equal deadlines fire in the order they were armed.
 */
typedef struct sg_fm_timer {
    int64_t due;
    uint64_t seq;
    size_t idx; /* position in the heap, SIZE_MAX when not armed */
    void (*cb)(struct sg_fm_timer *t);
} sg_fm_timer;

/* The min-heap of armed timers (timers.c).  All zeroes is an empty heap. */
typedef struct {
    sg_fm_timer **heap;
    size_t len;
    size_t cap;
    uint64_t seq; /* given to the next timer armed */
} sg_fm_timers;

int64_t sg_fm_now(void); /* CLOCK_MONOTONIC ns */
/* t plus ms milliseconds; SG_FM_FOREVER for "forever" and on overflow. */
int64_t sg_fm_add_ms(int64_t t, int64_t ms);
void sg_fm_timer_init(sg_fm_timer *t, void (*cb)(sg_fm_timer *t));
/* Arming at SG_FM_FOREVER only disarms.  Returns -1 when out of memory. */
int sg_fm_timer_arm(sg_fm_timers *ts, sg_fm_timer *t, int64_t due);
void sg_fm_timer_disarm(sg_fm_timers *ts, sg_fm_timer *t);
/* Fires the timers due now (see timers.c for which ones). */
void sg_fm_timers_run(sg_fm_timers *ts);
/* The epoll_wait timeout until the earliest timer: -1 for none. */
int sg_fm_timers_timeout_ms(const sg_fm_timers *ts);
void sg_fm_timers_free(sg_fm_timers *ts);

/* ------------------------------------------------------------ the log */

typedef enum {
    SG_FM_EV_RECEIVED = 0,
    SG_FM_EV_HEADERS_SENT,
    SG_FM_EV_FIRST_ITEM_SENT,
    SG_FM_EV_STALL_STARTED,
    SG_FM_EV_FINISHED,
    SG_FM_EV_CLIENT_GONE,
    SG_FM_EV_CONN_ERROR
} sg_fm_event_type;

int sg_fm_log_init(size_t cap, const char *jsonl_path);
void sg_fm_log_free(void);
void sg_fm_log_reset(void);
/*
 * Records one event.  `fields` is a JSON object body without braces
 * ("\"a\":1,\"b\":2") or NULL; key is the request's idempotency key or NULL.
 * t_received is the request's received time, 0 for none.
 */
void sg_fm_log_event(uint64_t req_id, sg_fm_event_type type, int64_t t,
                     int64_t t_received, const char *key, const char *fields);
/* Renders the log as JSON into out, filtered by the /_log query. */
int sg_fm_log_render(sg_fm_buf *out, const char *query, size_t query_len);
size_t sg_fm_log_count(void);
uint64_t sg_fm_log_dropped(void);

/* Idempotency-key counters for status=&fail_first=: returns the new count. */
uint64_t sg_fm_key_count(const char *key);
void sg_fm_keys_reset(void);

/* ------------------------------------------------------------ TLS */

typedef struct {
    const char *cert_file; /* NULL: generate */
    const char *key_file;
    const char *write_ca; /* NULL: don't */
    const char *cn_only;  /* generated leaf: CN only, no SAN (NULL: SANs) */
    int no_h2;
} sg_fm_tls_options;

/* Returns an SSL_CTX ready to accept, or NULL with a message on stderr. */
SSL_CTX *sg_fm_tls_new(const sg_fm_tls_options *o);

/* ------------------------------------------------------------ the server */

typedef struct {
    int port;
    int ipv6; /* also listen on ::1 */
    int tls;  /* accept TLS ClientHellos */
    int no_h2;
    size_t log_cap;
    const char *log_file;
    uint32_t h2_max_streams;
    size_t max_body;
    int quiet;
    /* --sigv4-key: requests to the model paths must carry an AWS SigV4
     * signature by this key (NULL: none is checked) */
    const char *sigv4_akid;
    const char *sigv4_secret;
    /* --record: every request's bytes as they arrived go to a file of
     * their own in this directory (NULL: none) */
    const char *record_dir;
    sg_fm_tls_options tls_opts;
} sg_fm_options;

/* Runs until SIGTERM/SIGINT.  Returns the process exit status. */
int sg_fm_serve(const sg_fm_options *o);

#endif
