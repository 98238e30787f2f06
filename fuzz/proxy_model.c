/*
 * Fuzz target for sg-proxy's model override (body_model in
 * tools/common/include_usage.c), which finds the top-level "model"
 * string of a request body that a fallback's `model` replaces.  The input
 * is the body.
 *
 * Invariants (abort on failure, also in the replay binary):
 *   - the answer is the same twice, and the same, moved, with whitespace
 *     around the body; a byte JSON does not allow after it makes it -1;
 *   - a body include-usage would edit is JSON (never -1);
 *   - a found model is a string literal inside the body; replaced, the
 *     body changes there alone, is JSON still, and its model is the new
 *     literal, at the same place.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/common/include_usage.c"
#include "around.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/proxy_model invariant failed: %s\n", what);
        abort();
    }
}

static void replaced(const char *b, size_t n, const struct iu_edit *e) {
    static const char lit[] = "\"m\\\"odel\"";
    check(e->at + e->cut <= n && e->cut >= 2, "the literal is inside the body");
    check(b[e->at] == '"' && b[e->at + e->cut - 1] == '"', "it is a string literal");
    struct iu_edit r = *e;
    r.text = lit;
    size_t m = 0;
    char *out = include_usage_apply(b, n, &r, &m);
    if (out == NULL) {
        abort();
    }
    size_t ll = sizeof(lit) - 1;
    check(m == n - e->cut + ll, "the new length");
    check(memcmp(out, b, e->at) == 0, "nothing before it changes");
    check(memcmp(out + e->at + ll, b + e->at + e->cut, n - e->at - e->cut) == 0,
          "nothing after it changes");
    struct iu_edit again;
    check(body_model(out, m, &again) == 1, "the new body has a model");
    check(again.at == e->at && again.cut == ll, "the new model where the old one was");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *b = (const char *)data;
    struct iu_edit e, e2;
    int rv = body_model(b, size, &e);
    check(body_model(b, size, &e2) == rv, "the same answer twice");
    struct iu_edit u;
    if (include_usage_edit(b, size, &u)) {
        check(rv != -1, "a body include-usage edits is JSON");
    }
    size_t wl;
    char *w = around(" \n\t", b, size, "\r\n ", &wl);
    struct iu_edit we;
    int wrv = body_model(w, wl, &we);
    check(wrv == rv, "the same answer with whitespace around");
    if (rv == 1) {
        check(we.at == e.at + 3 && we.cut == e.cut, "the same model, moved");
        replaced(b, size, &e);
    }
    free(w);
    char *x = around("", b, size, "x", &wl);
    check(body_model(x, wl, &we) == -1, "a byte after the JSON text");
    free(x);
    return 0;
}
