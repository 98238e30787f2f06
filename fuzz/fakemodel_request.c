/*
 * Fuzz target for sg-fakemodel's HTTP/1.1 request parsing: the head scanner
 * fed in two deterministic pieces (the split comes from the input), the
 * request parser, the scenario query parser on the request target, and the
 * chunked body decoder fed in pieces whose sizes come from the input.
 *
 * The parser files are included directly: they are libc only, and the
 * program itself is not a library target.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/common/http1.c"
#include "../tools/sg-fakemodel/scenario.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) {
        return 0;
    }
    /* First byte: where the head arrives split, and the body chunk size. */
    size_t split = size > 1 ? data[0] % size : 0;
    size_t piece = 1 + (data[0] >> 4);
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;

    size_t scanned = 0;
    size_t head = sg_fm_h1_find_head_end(buf, split < len ? split : len, &scanned);
    if (head == 0) {
        head = sg_fm_h1_find_head_end(buf, len, &scanned);
    }
    if (head == 0) {
        return 0;
    }
    /* The incremental scan must agree with a scan from scratch. */
    size_t fresh = 0;
    if (sg_fm_h1_find_head_end(buf, len, &fresh) != head) {
        abort();
    }
    sg_fm_h1_request req;
    int rc = sg_fm_h1_parse_request(buf, head, &req);
    if (rc < 0) {
        if (sg_fm_h1_error_status(rc) < 400) {
            abort();
        }
        return 0;
    }
    if ((size_t)rc != head || req.target_len == 0 || req.target[0] != '/') {
        abort();
    }
    (void)sg_fm_h1_find_header(&req, "idempotency-key");
    const char *q = memchr(req.target, '?', req.target_len);
    if (q != NULL) {
        sg_fm_scenario sc;
        char err[128];
        sg_fm_scenario_init(&sc, SG_FM_FMT_SSE);
        (void)sg_fm_scenario_parse(
            &sc, q + 1, req.target_len - (size_t)(q + 1 - req.target), err, sizeof(err));
        char dec[64];
        (void)sg_fm_url_decode(q + 1, req.target_len - (size_t)(q + 1 - req.target), dec,
                               sizeof(dec));
    }
    if (req.chunked) {
        sg_fm_h1_chunked d;
        memset(&d, 0, sizeof(d));
        size_t off = head;
        while (off < len && !d.done) {
            size_t n = len - off < piece ? len - off : piece;
            long r = sg_fm_h1_chunked_consume(&d, buf + off, n);
            if (r < 0) {
                break;
            }
            if ((size_t)r > n || ((size_t)r < n && !d.done)) {
                abort();
            }
            off += (size_t)r;
        }
    }
    return 0;
}
