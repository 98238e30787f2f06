/*
 * TLS for sg-fakemodel: a throwaway CA and a localhost leaf certificate made
 * at start (or files from --cert/--key), and ALPN that picks h2 before
 * http/1.1.  A separate CA and leaf, rather than one self-signed leaf, so
 * that strict verifiers which refuse a CA certificate as the server's own
 * accept the chain too.
 */
#include "fakemodel.h"

#include <stdbool.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

static void tls_error(const char *what) {
    unsigned long e = ERR_get_error();
    char msg[256] = "unknown error";
    if (e != 0) {
        ERR_error_string_n(e, msg, sizeof(msg));
    }
    fprintf(stderr, "sg-fakemodel: %s: %s\n", what, msg);
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
    X509_EXTENSION *ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (ext == NULL) {
        return -1;
    }
    int ok = X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
    return ok ? 0 : -1;
}

/* A certificate for key, named cn, signed by (issuer, issuer_key) or self;
 * a leaf names localhost, 127.0.0.1 and ::1 in its subject alternative
 * names unless @san is false (a CN-only certificate, for clients that must
 * refuse it: RFC 9525 has no CN fallback). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
                       bool san) {
    X509 *c = X509_new();
    BIGNUM *bn = BN_new();
    if (c == NULL || bn == NULL || !X509_set_version(c, 2) || !BN_rand(bn, 63, 0, 0) ||
        BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) == NULL) {
        goto fail;
    }
    /* Back-dated an hour so a client with a slightly slow clock agrees. */
    if (X509_gmtime_adj(X509_getm_notBefore(c), -3600) == NULL ||
        X509_gmtime_adj(X509_getm_notAfter(c), 30L * 86400) == NULL) {
        goto fail;
    }
    X509_NAME *name = X509_get_subject_name(c);
    if (!X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                    (const unsigned char *)"streamguard sg-fakemodel", -1,
                                    -1, 0) ||
        !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn,
                                    -1, -1, 0) ||
        !X509_set_issuer_name(c, issuer != NULL ? X509_get_subject_name(issuer) : name) ||
        !X509_set_pubkey(c, key)) {
        goto fail;
    }
    X509 *iss = issuer != NULL ? issuer : c;
    if (add_ext(c, iss, NID_subject_key_identifier, "hash") != 0) {
        goto fail;
    }
    if (issuer == NULL) {
        if (add_ext(c, iss, NID_basic_constraints, "critical,CA:TRUE") != 0 ||
            add_ext(c, iss, NID_key_usage, "critical,keyCertSign,cRLSign") != 0) {
            goto fail;
        }
    } else {
        if (add_ext(c, iss, NID_authority_key_identifier, "keyid:always") != 0 ||
            add_ext(c, iss, NID_basic_constraints, "critical,CA:FALSE") != 0 ||
            add_ext(c, iss, NID_key_usage, "critical,digitalSignature,keyEncipherment") !=
                0 ||
            add_ext(c, iss, NID_ext_key_usage, "serverAuth") != 0 ||
            (san && add_ext(c, iss, NID_subject_alt_name,
                            "DNS:localhost,IP:127.0.0.1,IP:::1") != 0)) {
            goto fail;
        }
    }
    if (X509_sign(c, issuer_key != NULL ? issuer_key : key, EVP_sha256()) == 0) {
        goto fail;
    }
    BN_free(bn);
    return c;
fail:
    BN_free(bn);
    X509_free(c);
    return NULL;
}

static int write_pem(const char *path, X509 *cert) {
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "sg-fakemodel: --write-ca %s: cannot open for writing\n", path);
        return -1;
    }
    int ok = PEM_write_X509(f, cert);
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "sg-fakemodel: --write-ca %s: write failed\n", path);
        return -1;
    }
    return 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg) {
    (void)ssl;
    const int *no_h2 = arg;
    static const char *const prefs[] = {"h2", "http/1.1"};
    for (size_t p = *no_h2 ? 1 : 0; p < 2; p++) {
        size_t want = strlen(prefs[p]);
        for (unsigned int i = 0; i < inlen;) {
            unsigned int n = in[i];
            if (i + 1 + n > inlen) {
                break;
            }
            if (n == want && memcmp(in + i + 1, prefs[p], n) == 0) {
                *out = in + i + 1;
                *outlen = (unsigned char)n;
                return SSL_TLSEXT_ERR_OK;
            }
            i += 1 + n;
        }
    }
    /* No common protocol: carry on without ALPN, which means HTTP/1.1. */
    return SSL_TLSEXT_ERR_NOACK;
}

/* The ALPN callback's argument must outlive the SSL_CTX; the options are the
 * caller's and const, so the one flag it needs is kept here. */
static int g_no_h2;

SSL_CTX *sg_fm_tls_new(const sg_fm_tls_options *o) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    EVP_PKEY *ca_key = NULL;
    EVP_PKEY *leaf_key = NULL;
    X509 *ca = NULL;
    X509 *leaf = NULL;
    if (ctx == NULL) {
        tls_error("SSL_CTX_new");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_NO_SESSION_RESUMPTION_ON_RENEGOTIATION);
    /* RFC 9113 §9.2.2: TLS 1.2 under h2 needs ephemeral AEAD suites. */
    if (!SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20")) {
        tls_error("cipher list");
        goto fail;
    }
    /* Partial writes: a full socket must not make SSL_write wait for all. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    if (o->cert_file != NULL) {
        if (SSL_CTX_use_certificate_chain_file(ctx, o->cert_file) != 1) {
            tls_error(o->cert_file);
            goto fail;
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, o->key_file, SSL_FILETYPE_PEM) != 1 ||
            SSL_CTX_check_private_key(ctx) != 1) {
            tls_error(o->key_file);
            goto fail;
        }
        if (o->write_ca != NULL) {
            /* The last certificate of the chain file is the one to trust. */
            FILE *f = fopen(o->cert_file, "r");
            X509 *c;
            while (f != NULL && (c = PEM_read_X509(f, NULL, NULL, NULL)) != NULL) {
                X509_free(ca);
                ca = c;
            }
            if (f != NULL) {
                fclose(f);
            }
            ERR_clear_error();
            if (ca == NULL || write_pem(o->write_ca, ca) != 0) {
                goto fail;
            }
        }
    } else {
        ca_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        leaf_key = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        if (ca_key == NULL || leaf_key == NULL) {
            tls_error("key generation");
            goto fail;
        }
        ca = make_cert(ca_key, "sg-fakemodel test CA", NULL, NULL, false);
        leaf = ca != NULL ? make_cert(leaf_key, o->cn_only ? o->cn_only : "localhost", ca,
                                      ca_key, o->cn_only == NULL)
                          : NULL;
        if (leaf == NULL) {
            tls_error("certificate generation");
            goto fail;
        }
        if (SSL_CTX_use_certificate(ctx, leaf) != 1 ||
            SSL_CTX_use_PrivateKey(ctx, leaf_key) != 1 ||
            SSL_CTX_add1_chain_cert(ctx, ca) != 1) {
            tls_error("SSL_CTX_use_certificate");
            goto fail;
        }
        if (o->write_ca != NULL && write_pem(o->write_ca, ca) != 0) {
            goto fail;
        }
    }
    g_no_h2 = o->no_h2;
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, &g_no_h2);
    X509_free(ca);
    X509_free(leaf);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(leaf_key);
    return ctx;
fail:
    X509_free(ca);
    X509_free(leaf);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(leaf_key);
    SSL_CTX_free(ctx);
    return NULL;
}
