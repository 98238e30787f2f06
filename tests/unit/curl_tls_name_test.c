/*
 * The libcurl transport's TLS name policy (src/curl/tls_name.c): a leaf
 * certificate that names its server in no DNS or IP subject alternative
 * name is refused, so libcurl never falls back to the subject's CN.
 * Certificates are made here, with OpenSSL, and verified by OpenSSL's own
 * chain verification with the policy as its callback - as a handshake
 * verifies them - and the callback is put on a real SSL_CTX as libcurl's
 * CURLOPT_SSL_CTX_FUNCTION would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "curl/tls_name.h"

typedef struct pki {
    EVP_PKEY *ca_key, *other_key;
    X509 *ca, *other_ca;
} pki;

static EVP_PKEY *new_key(void) {
    EVP_PKEY *k = EVP_EC_gen("P-256");
    assert_non_null(k);
    return k;
}

static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
    assert_non_null(ext);
    assert_int_equal(X509_add_ext(cert, ext, -1), 1);
    X509_EXTENSION_free(ext);
}

/* A certificate for @cn signed by @issuer_key (@issuer NULL: self-signed,
 * a CA), with @san (OpenSSL's "DNS:...,IP:..." form) or none (NULL). */
static X509 *new_cert(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key,
                      const char *san) {
    static long serial = 1;
    X509 *c = X509_new();
    assert_non_null(c);
    X509_set_version(c, 2); /* v3 */
    ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
    X509_gmtime_adj(X509_getm_notBefore(c), -3600);
    X509_gmtime_adj(X509_getm_notAfter(c), 3600);
    X509_NAME *name = X509_get_subject_name(c);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
                               -1, 0);
    X509_set_issuer_name(c, issuer != NULL ? X509_get_subject_name(issuer) : name);
    X509_set_pubkey(c, key);
    X509 *signer = issuer != NULL ? issuer : c;
    if (issuer == NULL) {
        add_ext(c, signer, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(c, signer, NID_key_usage, "critical,keyCertSign,cRLSign");
    }
    if (san != NULL) {
        add_ext(c, signer, NID_subject_alt_name, san);
    }
    assert_true(X509_sign(c, issuer_key, EVP_sha256()) > 0);
    return c;
}

static int setup(void **state) {
    pki *p = calloc(1, sizeof(*p));
    assert_non_null(p);
    p->ca_key = new_key();
    p->other_key = new_key();
    p->ca = new_cert("test CA", p->ca_key, NULL, p->ca_key, NULL);
    p->other_ca = new_cert("other CA", p->other_key, NULL, p->other_key, NULL);
    *state = p;
    return 0;
}

static int teardown(void **state) {
    pki *p = *state;
    X509_free(p->ca);
    X509_free(p->other_ca);
    EVP_PKEY_free(p->ca_key);
    EVP_PKEY_free(p->other_key);
    free(p);
    return 0;
}

/* Verifies @leaf against @p's CA with the policy as the verify callback:
 * 1 or 0, with OpenSSL's error code and the depth it was found at. */
static int verify(const pki *p, X509 *leaf, int *error, int *depth) {
    X509_STORE *store = X509_STORE_new();
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    assert_non_null(store);
    assert_non_null(ctx);
    assert_int_equal(X509_STORE_add_cert(store, p->ca), 1);
    assert_int_equal(X509_STORE_CTX_init(ctx, store, leaf, NULL), 1);
    X509_STORE_CTX_set_verify_cb(ctx, sg__curl_san_only_verify);
    int ok = X509_verify_cert(ctx);
    *error = X509_STORE_CTX_get_error(ctx);
    *depth = X509_STORE_CTX_get_error_depth(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(store);
    return ok;
}

/* A leaf for "localhost" with @san, signed by @p's CA (or the other CA). */
static int verify_leaf(const pki *p, const char *san, bool other_ca, int *error,
                       int *depth) {
    EVP_PKEY *key = new_key();
    X509 *leaf = new_cert("localhost", key, other_ca ? p->other_ca : p->ca,
                          other_ca ? p->other_key : p->ca_key, san);
    int ok = verify(p, leaf, error, depth);
    X509_free(leaf);
    EVP_PKEY_free(key);
    return ok;
}

static void a_name_only_in_the_cn_is_refused(void **state) {
    int error = 0, depth = -1;
    assert_int_equal(verify_leaf(*state, NULL, false, &error, &depth), 0);
    assert_int_equal(error, X509_V_ERR_HOSTNAME_MISMATCH);
    assert_int_equal(depth, 0); /* the leaf's, not the CA's */
}

static void alternative_names_of_another_kind_do_not_count(void **state) {
    /* libcurl falls back to the CN when no DNS or IP name is there */
    int error = 0, depth = -1;
    assert_int_equal(verify_leaf(*state, "email:ops@localhost,URI:https://localhost/",
                                 false, &error, &depth),
                     0);
    assert_int_equal(error, X509_V_ERR_HOSTNAME_MISMATCH);
}

static void a_dns_name_is_accepted(void **state) {
    int error = -1, depth = -1;
    assert_int_equal(verify_leaf(*state, "DNS:localhost", false, &error, &depth), 1);
    assert_int_equal(error, X509_V_OK);
}

static void an_ip_address_is_accepted(void **state) {
    int error = -1, depth = -1;
    assert_int_equal(verify_leaf(*state, "IP:127.0.0.1", false, &error, &depth), 1);
    assert_int_equal(error, X509_V_OK);
}

static void one_dns_name_among_others_is_enough(void **state) {
    int error = -1, depth = -1;
    assert_int_equal(
        verify_leaf(*state, "email:ops@localhost,DNS:localhost", false, &error, &depth),
        1);
    assert_int_equal(error, X509_V_OK);
}

static void a_chain_openssl_refused_keeps_its_reason(void **state) {
    /* signed by a CA the store does not trust: OpenSSL's error stands,
     * not replaced by the name policy's */
    int error = 0, depth = -1;
    assert_int_equal(verify_leaf(*state, "DNS:localhost", true, &error, &depth), 0);
    assert_int_equal(error, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    error = 0;
    assert_int_equal(verify_leaf(*state, NULL, true, &error, &depth), 0);
    assert_int_equal(error, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
}

static void the_ssl_ctx_gets_the_policy_and_keeps_its_mode(void **state) {
    (void)state;
    static const int modes[] = {SSL_VERIFY_NONE, SSL_VERIFY_PEER};
    for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
        SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
        assert_non_null(ctx);
        SSL_CTX_set_verify(ctx, modes[i], NULL);
        assert_int_equal(sg__curl_on_ssl_ctx(NULL, ctx, NULL), CURLE_OK);
        assert_ptr_equal(SSL_CTX_get_verify_callback(ctx), sg__curl_san_only_verify);
        assert_int_equal(SSL_CTX_get_verify_mode(ctx), modes[i]);
        SSL_CTX_free(ctx);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_name_only_in_the_cn_is_refused),
        cmocka_unit_test(alternative_names_of_another_kind_do_not_count),
        cmocka_unit_test(a_dns_name_is_accepted),
        cmocka_unit_test(an_ip_address_is_accepted),
        cmocka_unit_test(one_dns_name_among_others_is_enough),
        cmocka_unit_test(a_chain_openssl_refused_keeps_its_reason),
        cmocka_unit_test(the_ssl_ctx_gets_the_policy_and_keeps_its_mode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
