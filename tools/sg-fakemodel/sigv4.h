/*
 * AWS Signature Version 4 verification for sg-fakemodel (--sigv4-key): the
 * server recomputes the signature a request claims, as AWS's "Create a
 * signed AWS API request" describes it (canonical request, string to sign,
 * signing key derived from the secret, HMAC-SHA256 by OpenSSL), and
 * compares.  libc and OpenSSL's libcrypto only, so that a unit test can
 * include sigv4.c and check it against AWS's published test-suite vectors.
 *
 * What it verifies: the Authorization header form (AWS4-HMAC-SHA256 with
 * Credential, SignedHeaders, Signature), the access key id, the scope's
 * date against X-Amz-Date, that X-Amz-Date is within the allowed skew of
 * the server's clock, that `host` is signed, and the signature over the
 * method, the path (each byte outside the unreserved set percent-encoded
 * once more, as AWS requires for every service but S3), the sorted query,
 * the signed headers (values trimmed, inner runs of spaces collapsed,
 * repeats joined with commas) and the SHA-256 of the body (or
 * x-amz-content-sha256, which must then match the body unless it says
 * UNSIGNED-PAYLOAD).  Not done: path normalisation (dot segments, double
 * slashes), presigned URLs (the signature in the query) and chunked
 * "STREAMING-" payload signatures.
 */
#ifndef SG_FAKEMODEL_SIGV4_H
#define SG_FAKEMODEL_SIGV4_H

#include <stddef.h>
#include <stdint.h>

/* One request header, name in any case (HTTP/2's ":authority" is `host`). */
typedef struct {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} sg_fm_sigv4_header;

typedef struct {
    const char *method;
    const char *path; /* as received, still percent-encoded */
    size_t path_len;
    const char *query; /* without the '?'; NULL or "" for none */
    size_t query_len;
    const sg_fm_sigv4_header *headers;
    size_t n_headers;
    const char *body_sha256_hex; /* 64 lowercase hex digits: the body received */
} sg_fm_sigv4_request;

/* Why a request is refused; each is answered 403. */
typedef enum {
    SG_FM_SIGV4_OK = 0,
    SG_FM_SIGV4_MISSING,     /* no Authorization header */
    SG_FM_SIGV4_MALFORMED,   /* not an AWS4-HMAC-SHA256 header we can read */
    SG_FM_SIGV4_UNKNOWN_KEY, /* another access key id */
    SG_FM_SIGV4_SKEWED,      /* X-Amz-Date too far from the server's clock */
    SG_FM_SIGV4_MISMATCH     /* the signature (or the body's hash) differs */
} sg_fm_sigv4_result;

/* Minutes of clock skew AWS allows either way. */
#define SG_FM_SIGV4_MAX_SKEW_S (15 * 60)

/*
 * Verifies @r for the key (@akid, @secret).  @now is the server's unix
 * time, or a negative value to skip the clock check (test vectors from
 * 2015).  Returns SG_FM_SIGV4_OK or the reason it does not hold, with a
 * one-line explanation in @why that names no secret and no signature.
 */
sg_fm_sigv4_result sg_fm_sigv4_verify(const sg_fm_sigv4_request *r, const char *akid,
                                      const char *secret, int64_t now, char *why,
                                      size_t whylen);

/* The name of a result ("ok", "missing", ...), for the log. */
const char *sg_fm_sigv4_result_name(sg_fm_sigv4_result res);

/* Lowercase hex of SHA-256 over @len bytes; @out holds 65 bytes. */
void sg_fm_sha256_hex(const void *data, size_t len, char out[65]);

#endif
