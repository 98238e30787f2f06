/*
 * What a finished libcurl transfer was (classify.c): the facts, and the
 * outcome they make.  No libcurl handle is needed to ask: the facts are
 * plain values, so the table can be read - and tested - on its own.
 */
#ifndef SG_CURL_CLASSIFY_H
#define SG_CURL_CLASSIFY_H

#include <streamguard/core.h>

#include <curl/curl.h>

#include <stdbool.h>

/* What libcurl and the transport's callbacks saw of one attempt. */
typedef struct sg__curl_ended {
    CURLcode result;      /* what libcurl ended the transfer with */
    const char *errbuf;   /* libcurl's words (CURLOPT_ERRORBUFFER), "" none */
    sg_phase phase;       /* the guard's, the request's sending worked out */
    int http_status;      /* the last status line's, 0 none, -1 malformed */
    bool sent;            /* the request may have reached the server */
    bool headers_done;    /* a final (non-1xx) header block ended */
    bool body_is_stream;  /* a 2xx: the body was read as items */
    bool http_abort;      /* aborted on an error status */
    bool method_mismatch; /* the wire method differs from the policy's */
    bool write_abort;     /* the write callback stopped the transfer */
    bool header_overflow; /* the response head exceeded our bound */
    bool resent;          /* libcurl set out to send it again: stopped */
    bool refused;         /* HTTP/2: libcurl set out to resend a refused stream */
    bool goaway_refused;  /* HTTP/2: a stream above GOAWAY's last stream id */
} sg__curl_ended;

/* What it was. */
typedef struct sg__curl_verdict {
    sg_outcome outcome;
    bool not_processed; /* the server did no processing: never sent */
    bool broken;        /* the server broke HTTP (never worth a retry) */
    bool keep_native;   /* libcurl's own words say what failed: keep them */
} sg__curl_verdict;

/* The verdict on @e (never SG_OUTCOME_NONE).  Pure: thread-safe. */
sg__curl_verdict sg__curl_classify(const sg__curl_ended *e);

#endif
