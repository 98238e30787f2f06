/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for the keyed hash
 * endpoint health keeps of a credential (health_op.c).  The policy layer
 * depends on libc alone (docs/design.md, "Layers"), so it has its own;
 * checked against the FIPS 180-4 examples and RFC 4231's vectors
 * (tests/unit/policy_health_test.c).
 */
#ifndef STREAMGUARD_POLICY_SHA256_H
#define STREAMGUARD_POLICY_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SG__SHA256_LEN 32

typedef struct sg__sha256 {
    uint32_t h[8];
    uint64_t len; /* bytes hashed */
    uint8_t buf[64];
    size_t fill;
} sg__sha256;

void sg__sha256_init(sg__sha256 *c);
void sg__sha256_update(sg__sha256 *c, const void *data, size_t len);
void sg__sha256_final(sg__sha256 *c, uint8_t out[SG__SHA256_LEN]);

/* HMAC-SHA-256 of the @n parts @msg[i] (@len[i] bytes each, hashed one
 * after the other) under @key. */
void sg__hmac_sha256(const uint8_t *key, size_t key_len, const void *const *msg,
                     const size_t *len, size_t n, uint8_t out[SG__SHA256_LEN]);

#endif /* STREAMGUARD_POLICY_SHA256_H */
