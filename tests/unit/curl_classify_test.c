/*
 * The libcurl transport's verdict on a finished transfer
 * (src/curl/classify.c), as a table: a row per CURLcode the transport
 * tells apart, in the phase it ended in and with or without the request
 * sent, and per abort of its own callbacks.  Each row asserts the outcome,
 * whether the server did no processing, whether the server broke HTTP,
 * and whether libcurl's own words are kept.  The codes and libcurl's
 * messages are libcurl's own; no libcurl handle is involved.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "curl/classify.h"

/* Where an attempt ended (the facts the rows share). */
#define UNSENT .phase = SG_PHASE_CONNECT
#define SENDING .phase = SG_PHASE_SEND, .sent = true
#define WAITING .phase = SG_PHASE_WAIT_HEADERS, .sent = true
/* a status line came, its head still being read */
#define IN_HEAD(status) \
    .phase = SG_PHASE_WAIT_FIRST_ITEM, .sent = true, .http_status = status
/* a final head with @status ended: no stream */
#define ANSWERED(status) IN_HEAD(status), .headers_done = true
#define STREAMING                                                                        \
    .phase = SG_PHASE_STREAMING, .sent = true, .http_status = 200, .headers_done = true, \
    .body_is_stream = true

typedef struct row {
    const char *name;
    sg__curl_ended in; /* errbuf NULL: libcurl wrote nothing */
    sg_outcome want;
    bool not_processed, broken, native;
} row;

static void check(const row *rows, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const row *r = &rows[i];
        sg__curl_ended e = r->in;
        if (e.errbuf == NULL) {
            e.errbuf = "";
        }
        sg__curl_verdict v = sg__curl_classify(&e);
        if (v.outcome != r->want || v.not_processed != r->not_processed ||
            v.broken != r->broken || v.keep_native != r->native) {
            fail_msg("%s (curl %d): %s np=%d broken=%d native=%d, want %s np=%d "
                     "broken=%d native=%d",
                     r->name, (int)e.result, sg_outcome_name(v.outcome), v.not_processed,
                     v.broken, v.keep_native, sg_outcome_name(r->want), r->not_processed,
                     r->broken, r->native);
        }
    }
}

#define CHECK(rows) check(rows, sizeof(rows) / sizeof(rows[0]))

static void ok_is_a_stream_and_nothing_else(void **state) {
    (void)state;
    static const row rows[] = {
        {"a 2xx stream read to its end",
         {.result = CURLE_OK, STREAMING},
         .want = SG_OUTCOME_OK},
        {"a final 3xx: a redirect not followed",
         {.result = CURLE_OK, ANSWERED(301)},
         .want = SG_OUTCOME_HTTP_ERROR},
        {"no status at all",
         {.result = CURLE_OK, WAITING},
         .want = SG_OUTCOME_HTTP_ERROR},
    };
    CHECK(rows);
}

static void a_libcurl_timeout_is_named_by_the_phase(void **state) {
    (void)state;
    static const row rows[] = {
        {"while connecting",
         {.result = CURLE_OPERATION_TIMEDOUT, UNSENT},
         .want = SG_OUTCOME_CONNECT_TIMEOUT,
         .native = true},
        {"while sending",
         {.result = CURLE_OPERATION_TIMEDOUT, SENDING},
         .want = SG_OUTCOME_ATTEMPT_TIMEOUT,
         .native = true},
        {"waiting for the status",
         {.result = CURLE_OPERATION_TIMEDOUT, WAITING},
         .want = SG_OUTCOME_ATTEMPT_TIMEOUT,
         .native = true},
        {"mid-stream: a timeout, not a truncation",
         {.result = CURLE_OPERATION_TIMEDOUT, STREAMING},
         .want = SG_OUTCOME_ATTEMPT_TIMEOUT,
         .native = true},
    };
    CHECK(rows);
}

static void a_request_libcurl_cannot_make_is_refused_only_unsent(void **state) {
    (void)state;
    static const row rows[] = {
        {"malformed URL",
         {.result = CURLE_URL_MALFORMAT, UNSENT},
         .want = SG_OUTCOME_REFUSED,
         .native = true},
        {"a scheme libcurl does not speak",
         {.result = CURLE_UNSUPPORTED_PROTOCOL, UNSENT},
         .want = SG_OUTCOME_REFUSED,
         .native = true},
        {"a scheme libcurl was built without",
         {.result = CURLE_NOT_BUILT_IN, UNSENT},
         .want = SG_OUTCOME_REFUSED,
         .native = true},
        {"after the request went: a Location libcurl cannot follow",
         {.result = CURLE_UNSUPPORTED_PROTOCOL, ANSWERED(302)},
         .want = SG_OUTCOME_PROTOCOL_ERROR,
         .native = true},
        {"after the request went: a reply that is not HTTP",
         {.result = CURLE_UNSUPPORTED_PROTOCOL, WAITING},
         .want = SG_OUTCOME_PROTOCOL_ERROR,
         .native = true},
    };
    CHECK(rows);
}

static void a_server_that_breaks_http_is_a_protocol_error(void **state) {
    (void)state;
    static const row rows[] = {
        {"a status line libcurl cannot read",
         {.result = CURLE_WEIRD_SERVER_REPLY, WAITING},
         .want = SG_OUTCOME_PROTOCOL_ERROR,
         .broken = true,
         .native = true},
        {"a body it cannot decode",
         {.result = CURLE_BAD_CONTENT_ENCODING, STREAMING},
         .want = SG_OUTCOME_PROTOCOL_ERROR,
         .broken = true,
         .native = true},
        {"a malformed chunk size (said only in the message)",
         {.result = CURLE_RECV_ERROR,
          .errbuf = "Illegal or missing hexadecimal sequence in chunked-encoding",
          STREAMING},
         .want = SG_OUTCOME_PROTOCOL_ERROR,
         .broken = true,
         .native = true},
        {"a header line over libcurl's limit (out of memory mid-head)",
         {.result = CURLE_OUT_OF_MEMORY, IN_HEAD(200)},
         .want = SG_OUTCOME_PROTOCOL_ERROR,
         .broken = true,
         .native = true},
    };
    CHECK(rows);
}

static void other_failures_truncate_a_stream_or_fail_the_transport(void **state) {
    (void)state;
    static const row rows[] = {
        {"connection refused",
         {.result = CURLE_COULDNT_CONNECT, UNSENT},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"name not resolved",
         {.result = CURLE_COULDNT_RESOLVE_HOST, UNSENT},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"a certificate refused (a CN-only name, too)",
         {.result = CURLE_PEER_FAILED_VERIFICATION, UNSENT},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"the send failed",
         {.result = CURLE_SEND_ERROR, SENDING},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"the connection closed with no answer",
         {.result = CURLE_GOT_NOTHING, WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"reset before the status",
         {.result = CURLE_RECV_ERROR, .errbuf = "Connection reset by peer", WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"reset mid-stream",
         {.result = CURLE_RECV_ERROR, .errbuf = "Connection reset by peer", STREAMING},
         .want = SG_OUTCOME_TRUNCATED,
         .native = true},
        {"the body shorter than its length",
         {.result = CURLE_PARTIAL_FILE, STREAMING},
         .want = SG_OUTCOME_TRUNCATED,
         .native = true},
        {"an HTTP/2 stream that ended in error mid-body",
         {.result = CURLE_HTTP2_STREAM, STREAMING},
         .want = SG_OUTCOME_TRUNCATED,
         .native = true},
        {"an HTTP/2 error before any answer, written",
         {.result = CURLE_HTTP2, WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"out of memory before any status",
         {.result = CURLE_OUT_OF_MEMORY, WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .native = true},
        {"out of memory past the head",
         {.result = CURLE_OUT_OF_MEMORY, STREAMING},
         .want = SG_OUTCOME_TRUNCATED,
         .native = true},
    };
    CHECK(rows);
}

static void an_http2_refusal_was_never_processed(void **state) {
    (void)state;
    static const row rows[] = {
        {"libcurl set out to resend a refused stream: stopped",
         {.result = CURLE_ABORTED_BY_CALLBACK, .refused = true, WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .not_processed = true},
        {"a stream above GOAWAY's last stream id",
         {.result = CURLE_HTTP2, .goaway_refused = true, WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR,
         .not_processed = true},
    };
    CHECK(rows);
}

static void our_own_aborts_win_and_drop_libcurls_words(void **state) {
    (void)state;
    static const row rows[] = {
        {"the wire method is not the policy's",
         {.result = CURLE_ABORTED_BY_CALLBACK, .method_mismatch = true, UNSENT},
         .want = SG_OUTCOME_REFUSED},
        {"a dead connection's resend of a request not safe to repeat",
         {.result = CURLE_ABORTED_BY_CALLBACK, .resent = true, WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR},
        {"an error status, stopped at its head",
         {.result = CURLE_WRITE_ERROR, .http_abort = true, ANSWERED(500)},
         .want = SG_OUTCOME_HTTP_ERROR},
        {"a response head over our bound",
         {.result = CURLE_WRITE_ERROR, .header_overflow = true, IN_HEAD(200)},
         .want = SG_OUTCOME_PROTOCOL_ERROR,
         .broken = true},
        /* the cause latched in the stream (expiry, cap, cancel, bad
         * framing) is what the lifecycle then records */
        {"the write callback stopped a stream",
         {.result = CURLE_WRITE_ERROR, .write_abort = true, STREAMING},
         .want = SG_OUTCOME_TRUNCATED},
        {"the write callback stopped before the stream",
         {.result = CURLE_WRITE_ERROR, .write_abort = true, WAITING},
         .want = SG_OUTCOME_TRANSPORT_ERROR},
        {"an error status beats a reply libcurl calls weird",
         {.result = CURLE_WEIRD_SERVER_REPLY, .http_abort = true, ANSWERED(500)},
         .want = SG_OUTCOME_HTTP_ERROR,
         .broken = true},
        {"a refused wire method is no refusal of the server's",
         {.result = CURLE_ABORTED_BY_CALLBACK,
          .method_mismatch = true,
          .refused = true,
          UNSENT},
         .want = SG_OUTCOME_REFUSED},
    };
    CHECK(rows);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ok_is_a_stream_and_nothing_else),
        cmocka_unit_test(a_libcurl_timeout_is_named_by_the_phase),
        cmocka_unit_test(a_request_libcurl_cannot_make_is_refused_only_unsent),
        cmocka_unit_test(a_server_that_breaks_http_is_a_protocol_error),
        cmocka_unit_test(other_failures_truncate_a_stream_or_fail_the_transport),
        cmocka_unit_test(an_http2_refusal_was_never_processed),
        cmocka_unit_test(our_own_aborts_win_and_drop_libcurls_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
