/*
 * The sizes of the structs a caller embeds are part of the ABI: each ends
 * with reserved room so that it can grow inside it, and the library pins
 * each size with a _Static_assert.  This test prints them (the figures
 * docs/api.md states) and holds them on LP64.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

typedef struct size_row {
    const char *name;
    size_t size;
    size_t lp64;
} size_row;

#define ROW(type, lp64) \
    { #type, sizeof(type), lp64 }

static void embedded_structs_keep_their_sizes(void **state) {
    (void)state;
    static const size_row rows[] = {
        ROW(sg_clock, 32),          ROW(sg_manual_clock, 24), ROW(sg_mem, 32),
        ROW(sg_budget, 48),         ROW(sg_guard_config, 88), ROW(sg_guard, 160),
        ROW(sg_sse_config, 96),     ROW(sg_sse_parser, 344),  ROW(sg_ndjson_config, 48),
        ROW(sg_ndjson_parser, 144), ROW(sg_es_config, 56),    ROW(sg_es_decoder, 176),
        ROW(sg_stream_config, 104), ROW(sg_stream, 1048),
    };
    const bool lp64 = sizeof(void *) == 8 && sizeof(long) == 8;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        print_message("%-18s %5zu bytes\n", rows[i].name, rows[i].size);
        if (lp64) {
            assert_int_equal(rows[i].size, rows[i].lp64);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(embedded_structs_keep_their_sizes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
