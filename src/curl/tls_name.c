/*
 * The TLS name policy of the libcurl transport: whether a server's
 * certificate may identify it at all.  It decides one thing - a leaf
 * certificate that has no DNS or IP subject alternative name is refused -
 * so that both transports apply the same policy:
 *
 *  - RFC 9525 §6.3: a server is identified by its certificate's subject
 *    alternative names only, never by the subject's common name (the CN-ID
 *    fallback of RFC 6125 is gone).  The HTTP/2 transport gets this from
 *    OpenSSL itself (X509_CHECK_FLAG_NEVER_CHECK_SUBJECT, h2/io.c).
 *  - libcurl (its OpenSSL backend) matches the host name against the
 *    dNSName or iPAddress alternative names, but falls back to the
 *    subject's CN when the certificate has none of either kind; it offers
 *    no option to turn that off.  Refusing such a leaf before its check
 *    runs closes the fallback; a leaf with alternative names is left to
 *    libcurl's own match, which then never reads the CN.
 *  - libcurl sets SSL_VERIFY_NONE and reads the verdict afterwards from
 *    the session's verify result (SSL_get_verify_result): the refusal is
 *    recorded in the store with X509_STORE_CTX_set_error, where it finds
 *    it, and it fails the transfer with CURLE_PEER_FAILED_VERIFICATION
 *    ("hostname mismatch") before any request byte is written.
 *  - CURLOPT_SSL_CTX_FUNCTION is called for each new TLS connection with
 *    the backend's context; only OpenSSL-based backends have it (libcurl
 *    answers CURLE_NOT_BUILT_IN elsewhere, and the fallback stays there).
 *
 * Tested by tests/unit/curl_tls_name_test.c (certificates made in the
 * test) and end to end by tests/cli/sg_stream_test.sh (a CN-only server).
 */
#include "curl/tls_name.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <stdbool.h>

int sg__curl_san_only_verify(int preverify, X509_STORE_CTX *store) {
    if (!preverify || X509_STORE_CTX_get_error_depth(store) != 0) {
        return preverify;
    }
    X509 *leaf = X509_STORE_CTX_get_current_cert(store);
    GENERAL_NAMES *names =
        leaf != NULL ? X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL) : NULL;
    bool named = false;
    for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++) {
        int type = sk_GENERAL_NAME_value(names, i)->type;
        named = named || type == GEN_DNS || type == GEN_IPADD;
    }
    GENERAL_NAMES_free(names);
    if (!named) {
        X509_STORE_CTX_set_error(store, X509_V_ERR_HOSTNAME_MISMATCH);
        return 0;
    }
    return 1;
}

CURLcode sg__curl_on_ssl_ctx(CURL *easy, void *ssl_ctx, void *user_data) {
    (void)easy;
    (void)user_data;
    SSL_CTX *ctx = ssl_ctx;
    SSL_CTX_set_verify(ctx, SSL_CTX_get_verify_mode(ctx), sg__curl_san_only_verify);
    return CURLE_OK;
}
