/*
 * What a finished libcurl transfer was: the outcome its attempt gets,
 * decided from the CURLcode libcurl ended it with and from what the
 * transport's own callbacks saw (op.c).  One table, because libcurl's
 * codes do not map one to one onto outcomes:
 *
 *  - An abort of ours comes back as libcurl's code for an abort
 *    (CURLE_WRITE_ERROR when a write or header callback returns short,
 *    CURLE_ABORTED_BY_CALLBACK when the pre-request callback says
 *    CURL_PREREQFUNC_ABORT): our reason wins, and libcurl's words, which
 *    only describe the abort ("failure writing output"), are not kept.
 *  - CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_NOT_BUILT_IN
 *    before anything was sent: libcurl cannot make this request from this
 *    easy handle, and would fail the same way again - refused, never
 *    retried (so is a wire method that differs from the policy's).  After
 *    the request went (a reply that is not HTTP, HTTP/0.9; a Location
 *    libcurl cannot follow) they are the server's doing: protocol_error.
 *  - HTTP/2 streams the server refused unprocessed (RFC 9113 §8.7:
 *    REFUSED_STREAM, a stream above a GOAWAY's last stream id) have no
 *    code of their own; refused.c reads them.  transport_error, recorded
 *    as never processed whatever the method: the policy may retry it.
 *  - A connection that died after the request went, before any answer,
 *    which libcurl set out to resend, for a request not safe to repeat:
 *    stopped, transport_error with the request sent (outcome unknown).
 *  - The server broke HTTP: CURLE_WEIRD_SERVER_REPLY,
 *    CURLE_BAD_CONTENT_ENCODING, a malformed chunk size (libcurl says so
 *    only in its message: CURLE_RECV_ERROR, "chunked-encoding"), a header
 *    line over libcurl's limit (only CURLE_OUT_OF_MEMORY while the head is
 *    read), a head over our own bound: protocol_error, which the same
 *    server would earn again - never retried.
 *  - CURLE_OK is a success only for a stream (a 2xx body read as items): a
 *    final 3xx (a redirect not followed) or no status at all is http_error.
 *  - CURLE_OPERATION_TIMEDOUT: libcurl's own timeouts sit behind the lease
 *    (SG__CURL_MARGIN_MS, op.c), so the guard normally fires first; when
 *    libcurl's does, the guard's phase names the clock - connect_timeout
 *    while connecting, attempt_timeout after.
 *  - Anything else ended the transfer: truncated once the body stream had
 *    begun (the connection ended mid-body), transport_error before.
 *
 * The lifecycle (sg__lc_decide) still lets a first cause latched in the
 * stream win over this verdict: expiry, a cap, a cancel, bad framing.
 * Tested by tests/unit/curl_classify_test.c (the table, a row per case)
 * and end to end by the integration tests against sg-fakemodel.
 */
#include "curl/classify.h"
#include "curl/internal.h"

#include <stdio.h>
#include <string.h>

/* The server broke HTTP, as libcurl says it (see the top). */
static bool broke_http(const sg__curl_ended *e) {
    switch (e->result) {
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_BAD_CONTENT_ENCODING:
        return true;
    case CURLE_RECV_ERROR:
        return strstr(e->errbuf, "chunked-encoding") != NULL;
    case CURLE_OUT_OF_MEMORY:
        return e->http_status != 0 && !e->headers_done;
    default:
        return false;
    }
}

/* A request libcurl could not even begin to make from this easy handle
 * (a malformed URL, a scheme it does not speak or was not built with). */
static bool unusable_request(CURLcode result) {
    return result == CURLE_URL_MALFORMAT || result == CURLE_UNSUPPORTED_PROTOCOL ||
           result == CURLE_NOT_BUILT_IN;
}

/* The outcome, our own reasons first, then libcurl's code. */
static sg_outcome outcome_of(const sg__curl_ended *e, bool refused, bool broken) {
    if (e->method_mismatch || (unusable_request(e->result) && !e->sent)) {
        return SG_OUTCOME_REFUSED; /* never sent; the same request would be again */
    }
    if (unusable_request(e->result)) {
        return SG_OUTCOME_PROTOCOL_ERROR; /* after the request went */
    }
    if (refused || e->resent) {
        return SG_OUTCOME_TRANSPORT_ERROR; /* no answer came */
    }
    if (e->http_abort) {
        return SG_OUTCOME_HTTP_ERROR;
    }
    if (broken) {
        return SG_OUTCOME_PROTOCOL_ERROR;
    }
    if (e->result == CURLE_OK) {
        /* a final 3xx, or no status at all, is no stream */
        return e->body_is_stream ? SG_OUTCOME_OK : SG_OUTCOME_HTTP_ERROR;
    }
    if (e->result == CURLE_OPERATION_TIMEDOUT) {
        return e->phase == SG_PHASE_CONNECT ? SG_OUTCOME_CONNECT_TIMEOUT
                                            : SG_OUTCOME_ATTEMPT_TIMEOUT;
    }
    /* a stream: the connection ended mid-body */
    return e->body_is_stream ? SG_OUTCOME_TRUNCATED : SG_OUTCOME_TRANSPORT_ERROR;
}

sg__curl_verdict sg__curl_classify(const sg__curl_ended *e) {
    sg__curl_verdict v;
    bool refused = e->refused || e->goaway_refused;
    v.broken = e->header_overflow || broke_http(e);
    v.outcome = outcome_of(e, refused, v.broken);
    /* (a refused wire method, or a request libcurl could not make, was
     * decided before any refusal could count) */
    v.not_processed = refused && !e->method_mismatch && !unusable_request(e->result);
    bool ours = e->http_abort || e->method_mismatch || e->write_abort ||
                e->header_overflow || e->resent || refused;
    v.keep_native = e->result != CURLE_OK && !ours;
    return v;
}

/* The facts of @op's attempt that libcurl ended with @result. */
static sg__curl_ended ended_of(sg_curl_op *op, CURLcode result) {
    return (sg__curl_ended){
        .result = result,
        .errbuf = op->cerr,
        .phase = sg_guard_phase(sg__lc_guard(&op->lc)),
        .http_status = op->lc.http_status,
        .sent = op->lc.sent,
        .headers_done = op->lc.headers_done,
        .body_is_stream = op->lc.body_is_stream,
        .http_abort = op->at.http_abort,
        .method_mismatch = op->at.method_mismatch,
        .write_abort = op->at.write_abort,
        .header_overflow = op->at.header_overflow,
        .resent = op->at.resent,
        .refused = op->at.refused,
        .goaway_refused = sg__curl_goaway_refused(op, result),
    };
}

/* Our words for what we stopped; then libcurl's @native, where nothing
 * else was said. */
static void explain(sg_curl_op *op, const sg__curl_ended *e, const sg__curl_verdict *v,
                    const char *native) {
    if (e->method_mismatch) {
        const char *wire = NULL;
        curl_easy_getinfo(op->easy, CURLINFO_EFFECTIVE_METHOD, &wire);
        sg__lc_error(&op->lc,
                     "the easy handle sends %s but the policy's method is %s: set the "
                     "same method on both (sg_op_options_set_method); nothing was sent",
                     wire != NULL ? wire : "?", sg_op_method(op->lc.pol));
    }
    if (e->resent) {
        sg__lc_error(&op->lc, "%s",
                     "the connection closed before any answer, after the request was "
                     "sent; not sent again (the request is not safe to repeat)");
    } else if (e->refused) {
        sg__lc_error(&op->lc, "%s",
                     "HTTP/2 stream refused before any answer (libcurl set out to send "
                     "it again): never processed");
    } else if (e->goaway_refused) {
        sg__lc_error(&op->lc, "%s",
                     "HTTP/2 stream above GOAWAY's last stream id (curl 16): never "
                     "processed");
    }
    if (e->header_overflow) {
        sg__lc_error(&op->lc, "response header exceeds %u bytes",
                     (unsigned)SG__CURL_MAX_HEADER_BYTES);
    } else if (v->broken && e->result == CURLE_OUT_OF_MEMORY) {
        sg__lc_error(&op->lc, "%s: a response header line over libcurl's limit", native);
    }
    if (!sg__lc_has_error(&op->lc) && native[0] != '\0') {
        sg__lc_error(&op->lc, "%s", native);
    }
}

void sg__curl_decide(sg_curl_op *op, CURLcode result, int64_t now) {
    sg__curl_ended e = ended_of(op, result);
    sg__curl_verdict v = sg__curl_classify(&e);
    if (v.not_processed) {
        op->lc.not_processed = true; /* never sent, whatever the method */
    }
    /* libcurl's own words, kept beside the outcome with the CURLcode,
     * before anything of ours is written into the same buffer */
    char native[SG__LC_ERROR_SIZE] = "";
    if (v.keep_native) {
        /* cut: the report keeps SG_OP_ERROR_MAX bytes anyway */
        snprintf(native, sizeof(native), "curl %d %s%s%.160s", (int)result,
                 curl_easy_strerror(result), op->cerr[0] ? ": " : "", op->cerr);
    }
    sg__lc_error_clear(&op->lc);
    sg__lc_decide(&op->lc, now, v.outcome);
    explain(op, &e, &v, native);
}
