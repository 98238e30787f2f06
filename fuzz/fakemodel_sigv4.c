/*
 * Fuzz target for sg-fakemodel's SigV4 verifier: the Authorization header
 * parser (algorithm, Credential scope, SignedHeaders, Signature), the
 * canonical request (path, query sorted and encoded, headers trimmed and
 * joined) and the date checks, on requests whose fields all come from the
 * input.
 *
 * Layout: the input is split at NUL bytes into fields: method, path,
 * query, then (name, value) header pairs; a field "A" in the name slot
 * makes the value an Authorization header with the known key's scope in
 * front of it, so that most inputs get past the key check.
 *
 * Invariants (abort on failure, also in the replay binary): the verifier
 * returns one of its results, a reason for any refusal, and the same
 * answer twice; no input with another access key id verifies.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/sg-fakemodel/sigv4.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/fakemodel_sigv4 invariant failed: %s\n", what);
        abort();
    }
}

#define MAX_FIELDS 24

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *field[MAX_FIELDS];
    size_t len[MAX_FIELDS];
    size_t n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && n < MAX_FIELDS; i++) {
        if (i == size || data[i] == 0) {
            field[n] = (const char *)data + start;
            len[n] = i - start;
            n++;
            start = i + 1;
        }
    }
    if (n < 3) {
        return 0;
    }
    static const char scope[] = "AWS4-HMAC-SHA256 Credential=AKIDFUZZ/";
    char auth[4096];
    sg_fm_sigv4_header h[MAX_FIELDS / 2];
    size_t nh = 0;
    for (size_t i = 3; i + 1 < n; i += 2) {
        if (len[i] == 1 && field[i][0] == 'A' &&
            len[i + 1] < sizeof(auth) - sizeof(scope)) {
            memcpy(auth, scope, sizeof(scope) - 1);
            memcpy(auth + sizeof(scope) - 1, field[i + 1], len[i + 1]);
            h[nh++] = (sg_fm_sigv4_header){"Authorization", 13, auth,
                                           sizeof(scope) - 1 + len[i + 1]};
        } else {
            h[nh++] = (sg_fm_sigv4_header){field[i], len[i], field[i + 1], len[i + 1]};
        }
    }
    char method[16];
    size_t ml = len[0] < sizeof(method) - 1 ? len[0] : sizeof(method) - 1;
    memcpy(method, field[0], ml);
    method[ml] = '\0';
    char body_hash[65];
    sg_fm_sha256_hex(data, size, body_hash);
    sg_fm_sigv4_request r = {method, field[1], len[1], field[2],
                             len[2], h,        nh,     body_hash};
    char why[160];
    why[0] = '\0';
    int64_t now = 1440938160; /* 2015-08-30T12:36:00Z */
    sg_fm_sigv4_result a =
        sg_fm_sigv4_verify(&r, "AKIDFUZZ", "secret", now, why, sizeof(why));
    check(a >= SG_FM_SIGV4_OK && a <= SG_FM_SIGV4_MISMATCH, "a known result");
    check(a == SG_FM_SIGV4_OK || why[0] != '\0', "a refusal says why");
    check(sg_fm_sigv4_result_name(a) != NULL, "the result has a name");
    sg_fm_sigv4_result b =
        sg_fm_sigv4_verify(&r, "AKIDFUZZ", "secret", now, why, sizeof(why));
    check(a == b, "the same answer twice");
    check(sg_fm_sigv4_verify(&r, "AKIDOTHER", "secret", now, why, sizeof(why)) !=
              SG_FM_SIGV4_OK,
          "another key id never verifies");
    return 0;
}
