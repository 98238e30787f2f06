/* Deadline propagation: X-Deadline-Ms and grpc-timeout, out and in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/http.h>

#define T0 SG_SEC(1000)

static int ms_parse(const char *s, int64_t *ns) {
    return sg_deadline_ms_parse(s, strlen(s), ns);
}

static int grpc_parse(const char *s, int64_t *ns) {
    return sg_grpc_timeout_parse(s, strlen(s), ns);
}

static void deadline_ms_is_written_in_whole_ms_rounded_down(void **state) {
    (void)state;
    char buf[SG_DEADLINE_VALUE_MAX];
    assert_int_equal(sg_deadline_ms_format(SG_MS(4213) + 999999, buf, sizeof(buf)), 4);
    assert_string_equal(buf, "4213");
    assert_int_equal(sg_deadline_ms_format(999999, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "0");
    assert_int_equal(sg_deadline_ms_format(INT64_MAX, buf, sizeof(buf)), 13);
    assert_string_equal(buf, "9223372036854");
}

static void deadline_ms_format_reports_a_short_buffer(void **state) {
    (void)state;
    char buf[5];
    assert_int_equal(sg_deadline_ms_format(SG_MS(4213), buf, 4), SG_ENOBUFS);
    assert_int_equal(sg_deadline_ms_format(SG_MS(4213), buf, 5), 4);
    assert_int_equal(sg_deadline_ms_format(-1, buf, 5), SG_EINVAL);
    assert_int_equal(sg_deadline_ms_format(1, NULL, 5), SG_EINVAL);
}

static void deadline_ms_round_trips(void **state) {
    (void)state;
    const int64_t values[] = {0, SG_MS(1), SG_MS(4213), SG_SEC(3600), SG_DURATION_MAX};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char buf[SG_DEADLINE_VALUE_MAX];
        int64_t back = -1;
        assert_true(sg_deadline_ms_format(values[i], buf, sizeof(buf)) > 0);
        assert_int_equal(ms_parse(buf, &back), 0);
        assert_int_equal(back, values[i]);
    }
}

static void deadline_ms_beyond_the_duration_max_saturates(void **state) {
    (void)state;
    int64_t ns = 0;
    assert_int_equal(ms_parse("9223372036854775807", &ns), 0);
    assert_int_equal(ns, SG_DURATION_MAX);
    assert_int_equal(ms_parse("00000000000000000000000042", &ns), 0);
    assert_int_equal(ns, SG_MS(42));
}

static void malformed_deadline_ms_values_are_rejected(void **state) {
    (void)state;
    static const char *const bad[] = {"",    " 1",  "1 ",    "-1",
                                      "+1",  "1.5", "1e3",   "0x1",
                                      "12a", "１",  "1,000", "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ns = 777;
        int rc = ms_parse(bad[i], &ns);
        if (rc != SG_EMALFORMED) {
            fail_msg("\"%s\" gave %d, want SG_EMALFORMED", bad[i], rc);
        }
        assert_int_equal(ns, 777);
    }
    int64_t ns = 0;
    assert_int_equal(sg_deadline_ms_parse(NULL, 0, &ns), SG_EINVAL);
    assert_int_equal(sg_deadline_ms_parse("1", 1, NULL), SG_EINVAL);
}

static void grpc_timeout_uses_the_finest_unit_that_fits_8_digits(void **state) {
    (void)state;
    static const struct {
        int64_t ns;
        const char *want;
    } cases[] = {
        {0, "0n"},
        {99999999, "99999999n"},
        {100000000, "100000u"},
        {SG_MS(4213), "4213000u"},
        {SG_MS(99999) + 999999, "99999999u"},
        {SG_MS(100000), "100000m"},
        {SG_SEC(100000), "100000S"},
        {SG_SEC(100000000), "1666666M"},
        {SG_SEC(60) * 100000000, "1666666H"},
        {INT64_MAX, "2562047H"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[SG_DEADLINE_VALUE_MAX];
        int n = sg_grpc_timeout_format(cases[i].ns, buf, sizeof(buf));
        assert_int_equal(n, (int)strlen(cases[i].want));
        assert_string_equal(buf, cases[i].want);
    }
}

static void grpc_timeout_round_trip_loses_less_than_one_unit(void **state) {
    (void)state;
    const int64_t values[] = {
        1, 12345, SG_MS(4213) + 17, SG_SEC(7), SG_SEC(86400) + 5, SG_DURATION_MAX};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char buf[SG_DEADLINE_VALUE_MAX];
        int64_t back = -1;
        int n = sg_grpc_timeout_format(values[i], buf, sizeof(buf));
        assert_true(n >= 2 && n <= 9);
        assert_int_equal(grpc_parse(buf, &back), 0);
        assert_true(back <= values[i]);
        /* Less than one unit is lost; a coarser unit is only chosen when
         * the value is >= 1e8 of the finer one, and units grow <= 1000x. */
        assert_true(values[i] - back <= values[i] / 100000);
    }
}

static void grpc_timeout_parses_every_unit(void **state) {
    (void)state;
    int64_t ns = 0;
    assert_int_equal(grpc_parse("1n", &ns), 0);
    assert_int_equal(ns, 1);
    assert_int_equal(grpc_parse("1u", &ns), 0);
    assert_int_equal(ns, SG_US(1));
    assert_int_equal(grpc_parse("4213m", &ns), 0);
    assert_int_equal(ns, SG_MS(4213));
    assert_int_equal(grpc_parse("2S", &ns), 0);
    assert_int_equal(ns, SG_SEC(2));
    assert_int_equal(grpc_parse("3M", &ns), 0);
    assert_int_equal(ns, SG_SEC(180));
    assert_int_equal(grpc_parse("1H", &ns), 0);
    assert_int_equal(ns, SG_SEC(3600));
    assert_int_equal(grpc_parse("00000001S", &ns), 0);
    assert_int_equal(ns, SG_SEC(1));
    /* 8 nines of hours is far beyond the duration max: saturate. */
    assert_int_equal(grpc_parse("99999999H", &ns), 0);
    assert_int_equal(ns, SG_DURATION_MAX);
}

static void malformed_grpc_timeouts_are_rejected(void **state) {
    (void)state;
    static const char *const bad[] = {"",    "m",   "1",    "10",   "123456789m", "-1m",
                                      "+1m", " 1m", "1m ",  "1 m",  "1s",         "1h",
                                      "1x",  "1mm", "1.5S", "1e3m", "m1",         "0x1m"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t ns = 777;
        int rc = grpc_parse(bad[i], &ns);
        if (rc != SG_EMALFORMED) {
            fail_msg("\"%s\" gave %d, want SG_EMALFORMED", bad[i], rc);
        }
        assert_int_equal(ns, 777);
    }
    int64_t ns = 0;
    assert_int_equal(sg_grpc_timeout_parse(NULL, 0, &ns), SG_EINVAL);
    assert_int_equal(sg_grpc_timeout_parse("1m", 2, NULL), SG_EINVAL);
}

static void grpc_timeout_format_reports_a_short_buffer(void **state) {
    (void)state;
    char buf[8];
    assert_int_equal(sg_grpc_timeout_format(SG_MS(4213), buf, 8), SG_ENOBUFS);
    assert_int_equal(sg_grpc_timeout_format(SG_US(42), buf, 8), 6); /* "42000n" */
    assert_string_equal(buf, "42000n");
    assert_int_equal(sg_grpc_timeout_format(-1, buf, 8), SG_EINVAL);
}

static void inbound_deadline_is_now_plus_value_less_allowance(void **state) {
    (void)state;
    int64_t ns = 0;
    int64_t dl = 0;
    assert_int_equal(ms_parse("4213", &ns), 0);
    assert_int_equal(sg_deadline_from_timeout(T0, ns, SG_MS(13), &dl), 0);
    assert_int_equal(dl, T0 + SG_MS(4200));
    assert_int_equal(grpc_parse("4213m", &ns), 0);
    assert_int_equal(sg_deadline_from_timeout(T0, ns, SG_MS(13), &dl), 0);
    assert_int_equal(dl, T0 + SG_MS(4200));
}

static void allowance_larger_than_the_timeout_leaves_a_deadline_of_now(void **state) {
    (void)state;
    int64_t dl = 0;
    assert_int_equal(sg_deadline_from_timeout(T0, SG_MS(5), SG_MS(50), &dl), 0);
    assert_int_equal(dl, T0);
}

static void inbound_deadline_saturates_instead_of_wrapping(void **state) {
    (void)state;
    int64_t dl = 0;
    assert_int_equal(sg_deadline_from_timeout(INT64_MAX - 5, SG_DURATION_MAX, 0, &dl), 0);
    assert_int_equal(dl, SG_TIME_NEVER);
    assert_int_equal(sg_deadline_from_timeout(T0, -1, 0, &dl), SG_EINVAL);
    assert_int_equal(sg_deadline_from_timeout(T0, 1, -1, &dl), SG_EINVAL);
    assert_int_equal(sg_deadline_from_timeout(T0, 1, 0, NULL), SG_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(deadline_ms_is_written_in_whole_ms_rounded_down),
        cmocka_unit_test(deadline_ms_format_reports_a_short_buffer),
        cmocka_unit_test(deadline_ms_round_trips),
        cmocka_unit_test(deadline_ms_beyond_the_duration_max_saturates),
        cmocka_unit_test(malformed_deadline_ms_values_are_rejected),
        cmocka_unit_test(grpc_timeout_uses_the_finest_unit_that_fits_8_digits),
        cmocka_unit_test(grpc_timeout_round_trip_loses_less_than_one_unit),
        cmocka_unit_test(grpc_timeout_parses_every_unit),
        cmocka_unit_test(malformed_grpc_timeouts_are_rejected),
        cmocka_unit_test(grpc_timeout_format_reports_a_short_buffer),
        cmocka_unit_test(inbound_deadline_is_now_plus_value_less_allowance),
        cmocka_unit_test(allowance_larger_than_the_timeout_leaves_a_deadline_of_now),
        cmocka_unit_test(inbound_deadline_saturates_instead_of_wrapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
