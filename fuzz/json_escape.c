/*
 * Fuzz target: sgx_json_escape, the JSON string writer of the report and of
 * `sg-stream --output jsonl`.
 *
 * Input: any bytes.  Invariants (abort on violation):
 *   - the literal fits SGX_JSON_ESCAPE_MAX and is written exactly where it
 *     says (the bytes after it untouched);
 *   - into every smaller buffer, the same bytes as far as they fit and the
 *     same length returned (the bounded path agrees with the direct one);
 *   - the literal is a JSON string: it starts and ends with a quote, holds
 *     no raw control character, no unescaped quote, and only well-formed
 *     UTF-8 (RFC 8259 §7, §8.1);
 *   - every escape path the CPU has (SSE2 and bytes, SSSE3, AVX-512)
 *     writes the same literal.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/core.h>

#include "sgx/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
    if (!ok) {
        abort();
    }
}

static size_t utf8_ok(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (c < 0xC2 || c > 0xF4 || n < len) {
        return 0;
    }
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80) {
            return 0;
        }
    }
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) {
        return 0;
    }
    size_t max = SGX_JSON_ESCAPE_MAX(size);
    char *out = malloc(max + 8);
    char *cut = malloc(max + 8);
    check(out != NULL && cut != NULL);
    memset(out, 0x5a, max + 8);
    size_t n = sgx_json_escape(out, max, (const char *)data, size);
    check(n >= size + 2 && n <= max);
    for (size_t i = n; i < max + 8; i++) {
        check((unsigned char)out[i] == 0x5a);
    }
    const unsigned char *u = (const unsigned char *)out;
    check(u[0] == '"' && u[n - 1] == '"');
    for (size_t i = 1; i + 1 < n;) {
        if (u[i] == '\\') {
            i += 2; /* an escape: its next byte is never a delimiter */
            continue;
        }
        check(u[i] >= 0x20 && u[i] != '"');
        if (u[i] >= 0x80) {
            size_t l = utf8_ok(u + i, n - 1 - i);
            check(l > 0);
            i += l;
            continue;
        }
        i++;
    }
    for (size_t cap = 0; cap < n; cap = cap * 2 + 1) {
        memset(cut, 0x5a, max + 8);
        check(sgx_json_escape(cut, cap, (const char *)data, size) == n);
        check(memcmp(cut, out, cap) == 0);
        check((unsigned char)cut[cap] == 0x5a);
    }
    int best = sgx_json_escape_path(0);
    for (int path = 1; path < best; path++) {
        sgx_json_escape_path(path);
        memset(cut, 0x5a, max + 8);
        check(sgx_json_escape(cut, max, (const char *)data, size) == n);
        check(memcmp(cut, out, max + 8) == 0);
    }
    sgx_json_escape_path(0);
    free(out);
    free(cut);
    return 0;
}
