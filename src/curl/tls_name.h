/*
 * The libcurl transport's TLS name policy (tls_name.c): a server is
 * identified by its certificate's subject alternative names only.
 */
#ifndef SG_CURL_TLS_NAME_H
#define SG_CURL_TLS_NAME_H

#include <curl/curl.h>
#include <openssl/x509.h>

/* An OpenSSL verify callback: @preverify as OpenSSL judged the chain,
 * except that a leaf certificate (depth 0) with no DNS or IP subject
 * alternative name fails, X509_V_ERR_HOSTNAME_MISMATCH recorded in
 * @store.  1 to accept, 0 to refuse. */
int sg__curl_san_only_verify(int preverify, X509_STORE_CTX *store);

/* CURLOPT_SSL_CTX_FUNCTION: puts sg__curl_san_only_verify on @ssl_ctx (an
 * SSL_CTX *), keeping libcurl's verify mode.  Always CURLE_OK. */
CURLcode sg__curl_on_ssl_ctx(CURL *easy, void *ssl_ctx, void *user_data);

#endif
