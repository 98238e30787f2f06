/*
 * Fuzz target for sg-fakemodel's request body scanner (reqbody.c), which
 * reads whether a body asks for OpenAI's usage chunk.
 *
 * Layout: the first byte chooses where the body is cut in two and the
 * size of the pieces of a third feeding; the rest is the body.
 *
 * Invariants (abort on failure, also in the replay binary): the answer is
 * the same fed whole, cut in two, and in pieces; and a body that asks
 * still asks with whitespace after it, and no longer asks with a byte
 * after it that JSON does not allow there.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/sg-fakemodel/reqbody.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/fakemodel_body invariant failed: %s\n", what);
        abort();
    }
}

static int feed(const char *b, size_t n, size_t cut, size_t piece) {
    sg_fm_body_scan s;
    memset(&s, 0, sizeof(s));
    if (piece == 0) {
        sg_fm_body_scan_feed(&s, b, cut);
        sg_fm_body_scan_feed(&s, b + cut, n - cut);
    } else {
        for (size_t i = 0; i < n; i += piece) {
            sg_fm_body_scan_feed(&s, b + i, n - i < piece ? n - i : piece);
        }
    }
    return sg_fm_body_asks_usage(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) {
        return 0;
    }
    const char *b = (const char *)data + 1;
    size_t n = size - 1;
    size_t cut = n > 0 ? data[0] % (n + 1) : 0;
    size_t piece = 1 + (data[0] >> 5);
    int whole = feed(b, n, n, 0);
    check(feed(b, n, cut, 0) == whole, "the same answer cut in two");
    check(feed(b, n, 0, piece) == whole, "the same answer in pieces");
    if (whole) {
        sg_fm_body_scan s;
        memset(&s, 0, sizeof(s));
        sg_fm_body_scan_feed(&s, b, n);
        sg_fm_body_scan_feed(&s, " \n", 2);
        check(sg_fm_body_asks_usage(&s), "whitespace after the object changes nothing");
        sg_fm_body_scan_feed(&s, "x", 1);
        check(!sg_fm_body_asks_usage(&s), "a byte after the object is not JSON");
    }
    return 0;
}
