/*
 * Fuzz target for sg-proxy's include-usage (tools/common/include_usage.c),
 * which adds "stream_options":{"include_usage":true} to a Chat Completions
 * body that streams without it.  The input is the body.
 *
 * Invariants (abort on failure, also in the replay binary), checked
 * against sg-fakemodel's own reader of the same question
 * (tools/sg-fakemodel/reqbody.c, written apart, byte by byte):
 *   - the answer is the same twice, and the same, moved, with whitespace
 *     around the body; a byte JSON does not allow after it means no edit;
 *   - an edit stays inside the body, replaces nothing but a null, and
 *     makes a body that sg-fakemodel reads as asking for usage, and that
 *     a second pass leaves alone;
 *   - a body sg-fakemodel reads as asking already is never edited.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/sg-fakemodel/reqbody.c"
#include "../tools/common/include_usage.c"
#include "around.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/proxy_include_usage invariant failed: %s\n", what);
        abort();
    }
}

static int asks(const char *b, size_t n) {
    sg_fm_body_scan s;
    memset(&s, 0, sizeof(s));
    sg_fm_body_scan_feed(&s, b, n);
    return sg_fm_body_asks_usage(&s);
}

static void edited(const char *b, size_t n, const struct iu_edit *e) {
    check(e->at + e->cut <= n, "the edit is inside the body");
    check(e->cut == 0 || (e->cut == 4 && memcmp(b + e->at, "null", 4) == 0),
          "only a null is replaced");
    size_t len = 0;
    char *out = include_usage_apply(b, n, e, &len);
    check(out != NULL && len == n - e->cut + strlen(e->text), "the edited length");
    check(memcmp(out, b, e->at) == 0, "the bytes before the edit are kept");
    check(memcmp(out + len - (n - e->at - e->cut), b + e->at + e->cut,
                 n - e->at - e->cut) == 0,
          "the bytes after the edit are kept");
    struct iu_edit again;
    check(!include_usage_edit(out, len, &again), "a second pass leaves it");
    check(asks(out, len), "sg-fakemodel reads the edited body as asking for usage");
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *b = (const char *)data;
    struct iu_edit e;
    struct iu_edit e2;
    bool yes = include_usage_edit(b, size, &e);
    check(include_usage_edit(b, size, &e2) == yes, "the same answer twice");
    if (yes) {
        check(e.at == e2.at && e.cut == e2.cut && e.text == e2.text,
              "the same edit twice");
        edited(b, size, &e);
    }
    check(!(yes && asks(b, size)), "a body that asks already is left as it is");
    size_t len;
    char *w = around(" \n", b, size, "\t\r\n ", &len);
    check(include_usage_edit(w, len, &e2) == yes, "whitespace around changes nothing");
    if (yes) {
        check(e2.at == e.at + 2 && e2.cut == e.cut && e2.text == e.text,
              "whitespace around moves the edit");
    }
    free(w);
    w = around("", b, size, " x", &len);
    check(!include_usage_edit(w, len, &e2), "a byte after the body: no JSON, no edit");
    free(w);
    return 0;
}
