/*
 * Ledger helpers without a handle: stable idempotency keys (SHA-256 through
 * OpenSSL's EVP interface), key checks and names.  What reads an
 * operation (sg_op) is in observer.c.
 */
#include "ledger/internal.h"

#include <string.h>

#include <openssl/evp.h>

static void be64(uint64_t v, unsigned char out[8]) {
    for (int i = 7; i >= 0; i--) {
        out[i] = (unsigned char)(v & 0xFFu);
        v >>= 8;
    }
}

/* Length prefixes make the encoding injective: ("POST", "/ab", "c") and
 * ("POST", "/a", "bc") must not collide, whatever bytes the fields hold. */
static int digest_field(EVP_MD_CTX *ctx, const void *p, size_t len) {
    unsigned char n[8];
    be64((uint64_t)len, n);
    if (EVP_DigestUpdate(ctx, n, sizeof(n)) != 1) {
        return -1;
    }
    if (len > 0 && EVP_DigestUpdate(ctx, p, len) != 1) {
        return -1;
    }
    return 0;
}

int sg_ledger_key_derive(const char *method, const char *url, const void *body,
                         size_t body_len, char out[SG_LEDGER_KEY_SIZE]) {
    static const char hex[] = "0123456789abcdef";
    if (method == NULL || url == NULL || out == NULL || (body == NULL && body_len > 0)) {
        return SG_EINVAL;
    }
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL) {
        return SG_ENOMEM;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    int ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             digest_field(ctx, method, strlen(method)) == 0 &&
             digest_field(ctx, url, strlen(url)) == 0 &&
             digest_field(ctx, body, body_len) == 0 &&
             EVP_DigestFinal_ex(ctx, md, &md_len) == 1 && md_len == 32;
    EVP_MD_CTX_free(ctx);
    if (!ok) {
        return SG_EUNSUPPORTED;
    }
    memcpy(out, "sg1-", 4);
    for (unsigned int i = 0; i < 32; i++) {
        out[4 + 2 * i] = hex[md[i] >> 4];
        out[5 + 2 * i] = hex[md[i] & 0x0F];
    }
    out[SG_LEDGER_KEY_SIZE - 1] = '\0';
    return 0;
}

int sg_ledger_key_check(const char *key) {
    if (key == NULL) {
        return SG_EINVAL;
    }
    /* strnlen bounds the walk; one past the maximum is enough to say ERANGE. */
    size_t len = strnlen(key, SG_LEDGER_KEY_MAX + 1);
    return sg__ledger_check_key(key, len);
}

const char *sg_ledger_resolution_name(sg_ledger_resolution r) {
    switch (r) {
    case SG_LEDGER_DONE:
        return "done";
    case SG_LEDGER_FAILED:
        return "failed";
    case SG_LEDGER_UNKNOWN:
        return "unknown";
    default:
        return NULL;
    }
}

const char *sg_ledger_state_name(sg_ledger_state s) {
    switch (s) {
    case SG_LEDGER_PENDING:
        return "pending";
    case SG_LEDGER_UNRESOLVED_UNKNOWN:
        return "unknown";
    default:
        return NULL;
    }
}
