/* Private state shared by the libcurl transport's translation units. */
#ifndef SG_CURL_INTERNAL_H
#define SG_CURL_INTERNAL_H

#include <streamguard/curl.h>

#include <streamguard/ledger.h>

#include "core/dheap.h"

enum sg__curl_state {
    SG__OP_NEW = 0,  /* created, not started */
    SG__OP_RUNNING,  /* an attempt's transfer is in the multi */
    SG__OP_DRAINING, /* terminal seen: decided ok, waiting for the body end */
    SG__OP_SLEEPING, /* backoff before the next attempt */
    SG__OP_DONE,
};

struct sg_curl_op {
    CURL *easy;
    CURLM *multi;         /* where the transfers run */
    sg_curl_multi *owner; /* the managed multi driving this op, or NULL */
    sg__dheap_node node;  /* in owner's deadline heap */
    bool in_multi;        /* the easy handle is added to `multi` */
    int state;

    sg_op_options popts;
    sg_op policy;
    sg_stream stream; /* the body: framing + the attempt's guard */
    sg_curl_options opts;
    sg_curl_callbacks cbs;
    void *user_data;

    /* the running attempt */
    uint32_t attempt;
    int64_t drain_until;  /* DRAINING: drop the transfer at this instant */
    int64_t wake_at;      /* SLEEPING: start the next attempt at this instant */
    int http_status;      /* last status line seen, 0 none */
    bool headers_done;    /* a final (non-1xx) header block ended */
    bool body_is_stream;  /* 2xx: the body is parsed into items */
    bool http_abort;      /* aborted on an error status */
    int feed_rc;          /* why sg_stream_feed stopped the body, 0 none */
    char retry_after[64]; /* raw Retry-After of the final response */
    size_t retry_after_len;
    struct curl_slist *req_headers;

    void *parser_buf;
    const char *ledger_key; /* the key the ledger records under */
    bool intent_recorded;   /* the ledger holds this operation's intent */
    char errbuf[CURL_ERROR_SIZE];
};

/* Hooks from an op into the managed multi that owns it. */
void sg__curl_multi_reschedule(sg_curl_multi *m, sg_curl_op *op);
void sg__curl_multi_forget(sg_curl_multi *m, sg_curl_op *op);

/* Operation steps used by the managed multi.  Each returns 1 when the op
 * ended during the call: on_done has run and the op may already be freed. */
int sg__curl_op_start(sg_curl_op *op, CURLM *multi, int64_t now);
int sg__curl_op_complete(sg_curl_op *op, CURLcode result, int64_t now);
int sg__curl_op_tick(sg_curl_op *op, int64_t now);

#endif
