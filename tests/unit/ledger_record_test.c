/*
 * The ledger's record codec and scanner, on bytes in memory: round trips,
 * every single-bit flip detected, every truncation point, resynchronisation
 * after corruption, and records of an unknown type skipped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ledger/internal.h"

static uint8_t file[8 * SG__LEDGER_REC_MAX];

static sg__ledger_rec intent(const char *key, const char *url) {
    sg__ledger_rec r = {.type = SG__LREC_INTENT};
    r.wall_ns = INT64_C(1795965640123000000);
    r.key = key;
    r.key_len = strlen(key);
    r.pid = 4242;
    r.method = "POST";
    r.method_len = 4;
    r.url = url;
    r.url_len = strlen(url);
    return r;
}

static size_t append(size_t at, const sg__ledger_rec *r) {
    uint8_t buf[SG__LEDGER_REC_MAX];
    int n = sg__ledger_encode(r, buf, sizeof(buf));
    assert_true(n > 0);
    assert_true(at + (size_t)n <= sizeof(file));
    memcpy(file + at, buf, (size_t)n);
    return at + (size_t)n;
}

typedef struct seen {
    size_t n;
    char keys[16][32];
    uint64_t offs[16];
} seen;

static int on_rec(const sg__ledger_rec *r, uint64_t off, size_t size, void *ud) {
    seen *s = ud;
    (void)size;
    if (s->n < 16) {
        snprintf(s->keys[s->n], sizeof(s->keys[0]), "%.*s", (int)r->key_len,
                 r->key ? r->key : "");
        s->offs[s->n] = off;
    }
    s->n++;
    return 0;
}

static void crc32c_matches_the_standard_check_value(void **state) {
    (void)state;
    /* RFC 3720 / the "123456789" check value of CRC-32C */
    assert_int_equal(sg__crc32c(0, "123456789", 9), 0xE3069283u);
    uint8_t zeros[32] = {0};
    assert_int_equal(sg__crc32c(0, zeros, sizeof(zeros)), 0x8A9136AAu);
}

static void every_record_type_round_trips(void **state) {
    (void)state;
    uint8_t buf[SG__LEDGER_REC_MAX];
    sg__ledger_rec out;
    sg__ledger_rec r = intent("key-1", "https://h/v1?q=%20");
    int n = sg__ledger_encode(&r, buf, sizeof(buf));
    assert_int_equal(n, SG__LEDGER_HDR + 8 + 1 + 5 + 4 + 1 + 4 + 2 + 18);
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
    assert_int_equal(out.type, SG__LREC_INTENT);
    assert_int_equal(out.wall_ns, r.wall_ns);
    assert_int_equal(out.pid, 4242);
    assert_memory_equal(out.key, "key-1", 5);
    assert_memory_equal(out.method, "POST", 4);
    assert_int_equal(out.url_len, 18);

    sg__ledger_rec a = {.type = SG__LREC_ATTEMPT,
                        .key = "k",
                        .key_len = 1,
                        .n = 7,
                        .outcome = SG_OUTCOME_IDLE_TIMEOUT,
                        .phase = SG_PHASE_STREAMING,
                        .flags = SG__LATT_SENT | SG__LATT_UNKNOWN,
                        .http_status = 503,
                        .wall_ns = -5};
    n = sg__ledger_encode(&a, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
    assert_int_equal(out.n, 7);
    assert_int_equal(out.outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_int_equal(out.phase, SG_PHASE_STREAMING);
    assert_int_equal(out.flags, SG__LATT_SENT | SG__LATT_UNKNOWN);
    assert_int_equal(out.http_status, 503);
    assert_int_equal(out.wall_ns, -5);

    sg__ledger_rec s = {.type = SG__LREC_RESOLVE,
                        .key = "k",
                        .key_len = 1,
                        .resolution = SG_LEDGER_UNKNOWN,
                        .outcome = SG_OUTCOME_TRUNCATED};
    n = sg__ledger_encode(&s, buf, sizeof(buf));
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
    assert_int_equal(out.resolution, SG_LEDGER_UNKNOWN);
    assert_int_equal(out.outcome, SG_OUTCOME_TRUNCATED);

    sg__ledger_rec c = {.type = SG__LREC_RECONCILE,
                        .key = "k",
                        .key_len = 1,
                        .note = "refunded",
                        .note_len = 8};
    n = sg__ledger_encode(&c, buf, sizeof(buf));
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
    assert_memory_equal(out.note, "refunded", 8);
}

static void encoder_refuses_invalid_fields(void **state) {
    (void)state;
    uint8_t buf[SG__LEDGER_REC_MAX];
    sg__ledger_rec r = intent("bad key", "/");
    assert_int_equal(sg__ledger_encode(&r, buf, sizeof(buf)), SG_EINVAL);
    r = intent("k", "/with\x1e"
                    "magic");
    assert_int_equal(sg__ledger_encode(&r, buf, sizeof(buf)), SG_EINVAL);
    sg__ledger_rec c = {.type = SG__LREC_RECONCILE,
                        .key = "k",
                        .key_len = 1,
                        .note = "\x1eSGL",
                        .note_len = 4};
    assert_int_equal(sg__ledger_encode(&c, buf, sizeof(buf)), SG_EINVAL);
    r = intent("k", "/");
    r.type = 99;
    assert_int_equal(sg__ledger_encode(&r, buf, sizeof(buf)), SG_EINVAL);
    r = intent("k", "/");
    assert_int_equal(sg__ledger_encode(&r, buf, 100), SG_ENOBUFS);
}

/* Sets byte @at of the encoded record @buf (@n bytes) and its checksum
 * again, as a later version's writer would have written it. */
static void rewrite(uint8_t *buf, int n, size_t at, uint8_t v) {
    buf[at] = v;
    uint32_t crc = sg__crc32c(0, buf, 12);
    crc = sg__crc32c(crc, buf + SG__LEDGER_HDR, (size_t)n - SG__LEDGER_HDR);
    for (int i = 0; i < 4; i++) {
        buf[12 + i] = (uint8_t)(crc >> (8 * i)); /* little-endian, as written */
    }
}

/* A later version may add outcomes, phases, attempt flags or resolutions:
 * its attempt or resolution, checksum intact, is a record this version
 * skips whole (as an unknown type) - never corrupt bytes, which at the end
 * of the file the next writer would cut off, destroying it. */
static void a_later_versions_values_are_skipped_not_corrupt(void **state) {
    (void)state;
    uint8_t buf[SG__LEDGER_REC_MAX];
    sg__ledger_rec out;
    sg__ledger_rec a = {.type = SG__LREC_ATTEMPT,
                        .key = "k",
                        .key_len = 1,
                        .n = 2,
                        .outcome = SG_OUTCOME_OK,
                        .phase = SG_PHASE_STREAMING,
                        .http_status = 200};
    const size_t at = SG__LEDGER_HDR + 8 + 1 + 1 + 4; /* wall, key, n */
    const uint8_t attempt_values[][2] = {
        {0, SG_OUTCOME_COUNT_ + 3}, /* outcome */
        {1, SG_PHASE_COUNT_},       /* phase */
        {2, 0x80},                  /* a flag */
    };
    for (size_t i = 0; i < 3; i++) {
        int n = sg__ledger_encode(&a, buf, sizeof(buf));
        assert_true(n > 0);
        rewrite(buf, n, at + attempt_values[i][0], attempt_values[i][1]);
        assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
        assert_int_equal(out.type, 0); /* skipped: not applied */
    }
    sg__ledger_rec s = {.type = SG__LREC_RESOLVE,
                        .key = "k",
                        .key_len = 1,
                        .resolution = SG_LEDGER_DONE,
                        .outcome = SG_OUTCOME_OK};
    for (size_t i = 0; i < 2; i++) {
        int n = sg__ledger_encode(&s, buf, sizeof(buf));
        rewrite(buf, n, SG__LEDGER_HDR + 8 + 1 + 1 + i, i == 0 ? 9 : SG_OUTCOME_COUNT_);
        assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
        assert_int_equal(out.type, 0);
    }
    /* a malformed one is still refused: a status out of range */
    int n = sg__ledger_encode(&a, buf, sizeof(buf));
    rewrite(buf, n, at + 3, 0xff);
    rewrite(buf, n, at + 4, 0xff);
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), -1);
}

/* An attempt with its usage is two records in one write: the attempt, as
 * any reader decodes it, then its usage (input, output, cached input,
 * reasoning, -1 unknown, and the source) - a record of a type a reader
 * before usage skips, so that reader keeps the attempt whole. */
/* Attempt @n of key "k" with usage @u (NULL: none). */
static sg__ledger_rec attempt_with(uint32_t n, const sg_op_usage *u) {
    sg__ledger_rec a = {.type = SG__LREC_ATTEMPT, .key = "k", .key_len = 1, .n = n};
    sg__ledger_rec_usage(&a, u);
    return a;
}

static void an_attempts_usage_follows_it_in_a_record_of_its_own(void **state) {
    (void)state;
    uint8_t buf[SG__LEDGER_REC_MAX];
    const sg_op_usage u = {1000, 3, 200, -1, SG_USAGE_ESTIMATE};
    sg__ledger_rec a = attempt_with(3, &u);
    int n = sg__ledger_encode(&a, buf, sizeof(buf));
    const int attempt = SG__LEDGER_HDR + 8 + 1 + 1 + 4 + 1 + 1 + 1 + 2;
    assert_int_equal(n, attempt + SG__LEDGER_HDR + 8 + 1 + 1 + 4 + 1 + 4 * 8);
    sg__ledger_rec out;
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), attempt);
    assert_int_equal(out.type, SG__LREC_ATTEMPT);
    assert_int_equal(out.n, 3);
    assert_int_equal(sg__ledger_decode(buf + attempt, (size_t)(n - attempt), &out),
                     n - attempt);
    assert_int_equal(out.type, SG__LREC_USAGE);
    assert_memory_equal(out.key, "k", 1);
    assert_int_equal(out.n, 3);
    assert_int_equal(out.usage_source, SG_USAGE_ESTIMATE);
    assert_int_equal(out.usage[0], 1000);
    assert_int_equal(out.usage[1], 3);
    assert_int_equal(out.usage[2], 200);
    assert_int_equal(out.usage[3], -1);
    /* a scan sees both */
    seen sn;
    memset(&sn, 0, sizeof(sn));
    sg__ledger_scan sc;
    assert_int_equal(sg__ledger_scan_mem(buf, (size_t)n, on_rec, &sn, &sc), 0);
    assert_int_equal(sc.records, 2);
    assert_int_equal(sc.tail_bytes, 0);
    /* nothing known: the attempt alone, as before usage */
    sg__ledger_rec_usage(&a, NULL);
    assert_int_equal(sg__ledger_encode(&a, buf, sizeof(buf)), attempt);
    const sg_op_usage none = {-1, -1, -1, -1, SG_USAGE_NONE};
    sg__ledger_rec_usage(&a, &none);
    assert_int_equal(sg__ledger_encode(&a, buf, sizeof(buf)), attempt);
    /* a usage record is written only after its attempt */
    a.type = SG__LREC_USAGE;
    assert_int_equal(sg__ledger_encode(&a, buf, sizeof(buf)), SG_EINVAL);
}

/* A usage record of a source added since is skipped whole; one with a
 * count below -1, or a source of none, is not one the API writes:
 * refused. */
static void a_usage_record_is_checked_as_written(void **state) {
    (void)state;
    uint8_t buf[SG__LEDGER_REC_MAX];
    const sg_op_usage u = {5, 6, 7, 8, SG_USAGE_PROVIDER};
    sg__ledger_rec a = attempt_with(1, &u);
    const size_t attempt = SG__LEDGER_HDR + 8 + 1 + 1 + 4 + 1 + 1 + 1 + 2;
    const size_t source = attempt + SG__LEDGER_HDR + 8 + 1 + 1 + 4;
    sg__ledger_rec out;
    int n = sg__ledger_encode(&a, buf, sizeof(buf));
    int m = n - (int)attempt;
    rewrite(buf + attempt, m, source - attempt, 3); /* a later source */
    assert_int_equal(sg__ledger_decode(buf + attempt, (size_t)m, &out), m);
    assert_int_equal(out.type, 0);
    rewrite(buf + attempt, m, source - attempt, 0); /* none: never written */
    assert_int_equal(sg__ledger_decode(buf + attempt, (size_t)m, &out), -1);
    n = sg__ledger_encode(&a, buf, sizeof(buf));
    rewrite(buf + attempt, m, source - attempt + 1 + 7, 0xfe); /* input < -1 */
    assert_int_equal(sg__ledger_decode(buf + attempt, (size_t)m, &out), -1);
}

static void every_single_bit_flip_is_detected(void **state) {
    (void)state;
    uint8_t buf[SG__LEDGER_REC_MAX];
    sg__ledger_rec out;
    sg__ledger_rec r = intent("flip", "https://h/x");
    int n = sg__ledger_encode(&r, buf, sizeof(buf));
    for (int i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (uint8_t)(1u << bit);
            /* never a valid record; at most "need more" when the length
             * grew past the buffer */
            assert_true(sg__ledger_decode(buf, (size_t)n, &out) <= 0);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
}

static void decoder_wants_more_for_a_partial_record(void **state) {
    (void)state;
    uint8_t buf[SG__LEDGER_REC_MAX];
    sg__ledger_rec out;
    sg__ledger_rec r = intent("part", "/p");
    int n = sg__ledger_encode(&r, buf, sizeof(buf));
    for (int i = 0; i < n; i++) {
        assert_int_equal(sg__ledger_decode(buf, (size_t)i, &out), 0);
    }
    assert_int_equal(sg__ledger_decode(buf, (size_t)n, &out), n);
}

static void scan_of_every_truncation_keeps_exactly_the_whole_records(void **state) {
    (void)state;
    size_t ends[4];
    size_t at = 0;
    const char *keys[] = {"a", "bb", "ccc", "dddd"};
    for (int i = 0; i < 4; i++) {
        sg__ledger_rec r = intent(keys[i], "https://h/some/path");
        ends[i] = at = append(at, &r);
    }
    for (size_t len = 0; len <= at; len++) {
        seen s = {0};
        sg__ledger_scan sc;
        assert_int_equal(sg__ledger_scan_mem(file, len, on_rec, &s, &sc), 0);
        size_t whole = 0;
        while (whole < 4 && ends[whole] <= len) {
            whole++;
        }
        assert_int_equal(s.n, whole);
        for (size_t i = 0; i < whole; i++) {
            assert_string_equal(s.keys[i], keys[i]);
        }
        size_t good = whole > 0 ? ends[whole - 1] : 0;
        assert_int_equal(sc.end, good);
        assert_int_equal(sc.tail_bytes, len - good);
        assert_int_equal(sc.corrupt_regions, 0);
    }
}

static void scan_resyncs_after_a_corrupt_length(void **state) {
    (void)state;
    size_t at = 0;
    sg__ledger_rec r1 = intent("one", "/1");
    sg__ledger_rec r2 = intent("two", "/2");
    sg__ledger_rec r3 = intent("three", "/3");
    size_t e1 = append(at, &r1);
    size_t e2 = append(e1, &r2);
    size_t e3 = append(e2, &r3);
    /* the middle record claims to run past the end of the file */
    file[e1 + 8] = 0xFF;
    file[e1 + 9] = 0x3F;
    seen s = {0};
    sg__ledger_scan sc;
    assert_int_equal(sg__ledger_scan_mem(file, e3, on_rec, &s, &sc), 0);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.keys[0], "one");
    assert_string_equal(s.keys[1], "three");
    assert_int_equal(s.offs[1], e2);
    assert_int_equal(sc.corrupt_regions, 1);
    assert_int_equal(sc.corrupt_bytes, e2 - e1);
    assert_int_equal(sc.end, e3);
}

static void scan_skips_garbage_between_records(void **state) {
    (void)state;
    sg__ledger_rec r1 = intent("one", "/1");
    size_t at = append(0, &r1);
    /* zeros, stray magic bytes, a fake header */
    memset(file + at, 0, 100);
    file[at + 10] = 0x1E;
    memcpy(file + at + 40, "\x1eSGL\x01\x01\x00\x00\x04\x00\x00\x00", 12);
    at += 100;
    sg__ledger_rec r2 = intent("two", "/2");
    size_t end = append(at, &r2);
    seen s = {0};
    sg__ledger_scan sc;
    assert_int_equal(sg__ledger_scan_mem(file, end, on_rec, &s, &sc), 0);
    assert_int_equal(s.n, 2);
    assert_int_equal(sc.corrupt_regions, 1);
    assert_int_equal(sc.corrupt_bytes, 100);
    /* a garbage-only file is all tail */
    memset(file, 0xAB, 500);
    memset(&s, 0, sizeof(s));
    assert_int_equal(sg__ledger_scan_mem(file, 500, on_rec, &s, &sc), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(sc.tail_bytes, 500);
    assert_int_equal(sc.end, 0);
    assert_int_equal(sg__ledger_scan_mem(NULL, 0, on_rec, &s, &sc), 0);
}

static void record_of_an_unknown_type_is_skipped_not_corrupt(void **state) {
    (void)state;
    sg__ledger_rec r = intent("one", "/1");
    size_t at = append(0, &r);
    /* a record from a newer writer: type 9, 3 payload bytes, good CRC */
    uint8_t rec[SG__LEDGER_HDR + 3] = {0x1E, 'S', 'G', 'L', 1, 9, 0, 0, 3, 0, 0, 0};
    rec[16] = 1;
    rec[17] = 2;
    rec[18] = 3;
    uint32_t crc = sg__crc32c(sg__crc32c(0, rec, 12), rec + 16, 3);
    rec[12] = (uint8_t)crc;
    rec[13] = (uint8_t)(crc >> 8);
    rec[14] = (uint8_t)(crc >> 16);
    rec[15] = (uint8_t)(crc >> 24);
    memcpy(file + at, rec, sizeof(rec));
    at += sizeof(rec);
    sg__ledger_rec r2 = intent("two", "/2");
    at = append(at, &r2);
    seen s = {0};
    sg__ledger_scan sc;
    assert_int_equal(sg__ledger_scan_mem(file, at, on_rec, &s, &sc), 0);
    assert_int_equal(s.n, 3);
    assert_int_equal(sc.corrupt_regions, 0);
    assert_string_equal(s.keys[2], "two");
}

static int fail_second(const sg__ledger_rec *r, uint64_t off, size_t size, void *ud) {
    (void)r;
    (void)size;
    (void)ud;
    return off > 0 ? SG_ENOMEM : 0;
}

static void callback_error_stops_before_the_record(void **state) {
    (void)state;
    sg__ledger_rec r1 = intent("one", "/1");
    sg__ledger_rec r2 = intent("two", "/2");
    size_t e1 = append(0, &r1);
    size_t e2 = append(e1, &r2);
    sg__ledger_scan sc;
    assert_int_equal(sg__ledger_scan_mem(file, e2, fail_second, NULL, &sc), SG_ENOMEM);
    assert_int_equal(sc.end, e1);
    assert_int_equal(sc.records, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(crc32c_matches_the_standard_check_value),
        cmocka_unit_test(every_record_type_round_trips),
        cmocka_unit_test(encoder_refuses_invalid_fields),
        cmocka_unit_test(a_later_versions_values_are_skipped_not_corrupt),
        cmocka_unit_test(an_attempts_usage_follows_it_in_a_record_of_its_own),
        cmocka_unit_test(a_usage_record_is_checked_as_written),
        cmocka_unit_test(every_single_bit_flip_is_detected),
        cmocka_unit_test(decoder_wants_more_for_a_partial_record),
        cmocka_unit_test(scan_of_every_truncation_keeps_exactly_the_whole_records),
        cmocka_unit_test(scan_resyncs_after_a_corrupt_length),
        cmocka_unit_test(scan_skips_garbage_between_records),
        cmocka_unit_test(record_of_an_unknown_type_is_skipped_not_corrupt),
        cmocka_unit_test(callback_error_stops_before_the_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
