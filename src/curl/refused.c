/*
 * HTTP/2 refusals through libcurl: whether a request the server refused
 * unprocessed (RST_STREAM(REFUSED_STREAM), or a stream above a GOAWAY's
 * last stream id - RFC 9113 §8.7) is what libcurl is resending, or what
 * ended its transfer.  libcurl has no code for either; what it does is
 * read instead, as libcurl 7.88 (Debian 12's) does it (lib/http2.c,
 * lib/transfer.c Curl_retry_request, lib/multi.c), checked against
 * sg-fakemodel's refuse=1 and goaway=1 (tests/integration/
 * refused_stream_test.c).  docs/design.md, retry rule 1, says what it
 * cannot tell.
 */
#include "curl/internal.h"

#include <openssl/ssl.h>

#include <pthread.h>
#include <string.h>

/* Whether the connection @easy's request is about to go on chose HTTP/2
 * in its TLS handshake (ALPN).  Over cleartext HTTP/2 (prior knowledge)
 * libcurl shows a callback no sign of the protocol: false. */
bool sg__curl_speaks_h2(CURL *easy) {
    struct curl_tlssessioninfo *tls = NULL;
    if (curl_easy_getinfo(easy, CURLINFO_TLS_SSL_PTR, &tls) != CURLE_OK || tls == NULL ||
        tls->backend != CURLSSLBACKEND_OPENSSL || tls->internals == NULL) {
        return false;
    }
    const unsigned char *alpn = NULL;
    unsigned int len = 0;
    SSL_get0_alpn_selected(tls->internals, &alpn, &len);
    return len == 2 && memcmp(alpn, "h2", 2) == 0;
}

/*
 * Whether libcurl's resend of a request it sent on an HTTP/2 connection
 * with no answer since is its retry of a refused stream.  libcurl resends
 * on a new connection (lib/transfer.c Curl_retry_request) after
 * REFUSED_STREAM - and, with another stream running on the connection, a
 * stream above a GOAWAY's last stream id, which nghttp2 closes as
 * REFUSED_STREAM - without writing an error; its resend after a reused
 * connection died always follows an error it wrote ("Recv failure:
 * Connection reset by peer", "Send failure: ..."; a dead HTTP/2
 * connection that ended cleanly is not resent, and an HTTP/1.1 one, which
 * says nothing, is no HTTP/2 stream).  One case libcurl 7.88 resends as
 * silently: a reused connection whose session nghttp2 ended over a
 * protocol error of the server before any answer (later libcurl writes an
 * error for it) - judged refused too (docs/design.md, retry rule 1).
 */
bool sg__curl_refused_resend(const sg_curl_op *op) {
    return op->at.h2 && op->cerr[0] == '\0';
}

static pthread_once_t goaway_once = PTHREAD_ONCE_INIT;
static bool goaway_silent; /* set once, by goaway_probe */

/* libcurl 7.88 (Debian 12's) ends with CURLE_HTTP2 and no error written,
 * and does not resend, a stream that nghttp2 closed with an error code of
 * its own once the session had nothing left to do (lib/http2.c,
 * h2_process_pending_input): a stream above a GOAWAY's last stream id
 * that left no other stream on the connection - nghttp2 closes it as
 * REFUSED_STREAM - and, not to be told from it, a stream whose response
 * nghttp2 rejected after a GOAWAY that kept it, judged never processed
 * too (docs/design.md, retry rule 1).  Its other CURLE_HTTP2 come with an
 * error written, or before the request could go.  Later versions end a
 * connection that closed under a stream the same way, so elsewhere
 * CURLE_HTTP2 proves nothing. */
static void goaway_probe(void) {
    unsigned v = curl_version_info(CURLVERSION_NOW)->version_num;
    goaway_silent = v >= 0x075800 && v <= 0x0758ff;
}

/* Whether a transfer that ended with @result was an HTTP/2 stream above a
 * GOAWAY's last stream id, never processed: see goaway_probe. */
bool sg__curl_goaway_refused(const sg_curl_op *op, CURLcode result) {
    if (result != CURLE_HTTP2 || !op->at.h2 || op->at.answered || !op->lc.sent ||
        op->cerr[0] != '\0') {
        return false;
    }
    pthread_once(&goaway_once, goaway_probe);
    return goaway_silent;
}
