/* Retry-After and HTTP-date parsing (RFC 9110 §10.2.3, §5.6.7). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/http.h>

/* 2026-11-29 15:00:00 UTC, a Sunday: the wall clock of these tests. */
#define WALL INT64_C(1795964400)
/* Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example instant. */
#define RFC_EXAMPLE INT64_C(784111777)

static int date(const char *s, int64_t wall, int64_t *out) {
    return sg_http_date_parse(s, strlen(s), wall, out);
}

static int ra(const char *s, int64_t wall, int64_t *out) {
    return sg_retry_after_parse(s, strlen(s), wall, out);
}

static void delta_seconds_become_a_delay(void **state) {
    (void)state;
    int64_t d = -1;
    assert_int_equal(ra("120", WALL, &d), 0);
    assert_int_equal(d, SG_SEC(120));
    assert_int_equal(ra("007", 0, &d), 0);
    assert_int_equal(d, SG_SEC(7));
}

static void delta_seconds_zero_means_retry_now(void **state) {
    (void)state;
    int64_t d = -1;
    assert_int_equal(ra("0", WALL, &d), 0);
    assert_int_equal(d, 0);
}

static void huge_delta_seconds_saturate_at_the_duration_max(void **state) {
    (void)state;
    int64_t d = -1;
    assert_int_equal(ra("99999999999999999999999999999", WALL, &d), 0);
    assert_int_equal(d, SG_DURATION_MAX);
    assert_int_equal(ra("31622401", WALL, &d), 0);
    assert_int_equal(d, SG_DURATION_MAX);
}

static void all_three_date_formats_name_the_same_instant(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Sun, 06 Nov 1994 08:49:37 GMT", WALL, &t), 0);
    assert_int_equal(t, RFC_EXAMPLE);
    t = 0;
    assert_int_equal(date("Sunday, 06-Nov-94 08:49:37 GMT", WALL, &t), 0);
    assert_int_equal(t, RFC_EXAMPLE);
    t = 0;
    assert_int_equal(date("Sun Nov  6 08:49:37 1994", WALL, &t), 0);
    assert_int_equal(t, RFC_EXAMPLE);
}

static void asctime_accepts_a_two_digit_day_too(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Sun Nov 06 08:49:37 1994", WALL, &t), 0);
    assert_int_equal(t, RFC_EXAMPLE);
}

static void asctime_rejects_an_unpadded_or_misplaced_day(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Sun Nov 6 08:49:37 1994", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Sun Nov   6 08:49:37 1994", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Sun Nov  6 08:49:37 94", WALL, &t), SG_EMALFORMED);
}

static void imf_fixdate_in_the_future_is_the_difference(void **state) {
    (void)state;
    int64_t d = -1;
    assert_int_equal(ra("Sun, 29 Nov 2026 15:00:30 GMT", WALL, &d), 0);
    assert_int_equal(d, SG_SEC(30));
}

static void date_in_the_past_is_no_delay(void **state) {
    (void)state;
    int64_t d = -1;
    assert_int_equal(ra("Sun, 06 Nov 1994 08:49:37 GMT", WALL, &d), 0);
    assert_int_equal(d, 0);
    assert_int_equal(ra("Sun, 29 Nov 2026 15:00:00 GMT", WALL, &d), 0);
    assert_int_equal(d, 0);
}

static void http_date_without_a_wall_clock_is_rejected(void **state) {
    (void)state;
    int64_t d = -1;
    assert_int_equal(ra("Sun, 29 Nov 2026 15:00:30 GMT", 0, &d), SG_EINVAL);
    assert_int_equal(ra("Sun Nov 29 15:00:30 2026", -5, &d), SG_EINVAL);
    int64_t t = 0;
    assert_int_equal(date("Sunday, 06-Nov-94 08:49:37 GMT", 0, &t), SG_EINVAL);
    /* The fixed-year formats need no wall clock to parse. */
    assert_int_equal(date("Sun, 06 Nov 1994 08:49:37 GMT", 0, &t), 0);
}

static void leap_days_exist_only_in_leap_years(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Thu, 29 Feb 2024 00:00:00 GMT", WALL, &t), 0);
    assert_int_equal(t, INT64_C(1709164800));
    assert_int_equal(date("Tue, 29 Feb 2000 12:00:00 GMT", WALL, &t), 0);
    assert_int_equal(t, INT64_C(951825600));
    /* 2023 is not a leap year; 1900 and 2100 are centuries not divisible
     * by 400. Weekday names are right for 1 March in each case. */
    assert_int_equal(date("Wed, 29 Feb 2023 00:00:00 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Thu, 29 Feb 1900 00:00:00 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Mon, 29 Feb 2100 00:00:00 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Fri, 30 Feb 2024 00:00:00 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Thu, 31 Apr 2026 00:00:00 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Thu Feb 29 00:00:00 2024", WALL, &t), 0);
    assert_int_equal(t, INT64_C(1709164800));
}

static void unknown_or_miscased_day_names_are_malformed(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Sun, 06 Nov 1994 08:49:37 GMT", WALL, &t), 0);
    assert_int_equal(date("Snu, 06 Nov 1994 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("sun, 06 Nov 1994 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("SUN, 06 Nov 1994 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
    /* A long name in the short-name format and the other way round. */
    assert_int_equal(date("Sunday, 06 Nov 1994 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Sun, 06-Nov-94 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Sunda, 06-Nov-94 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
}

static void a_weekday_that_contradicts_the_date_is_malformed(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Mon, 06 Nov 1994 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Monday, 06-Nov-94 08:49:37 GMT", WALL, &t), SG_EMALFORMED);
    assert_int_equal(date("Mon Nov  6 08:49:37 1994", WALL, &t), SG_EMALFORMED);
}

static void rfc850_year_more_than_50_years_ahead_is_last_century(void **state) {
    (void)state;
    int64_t t = 0;
    /* Wall year 2026: "76" is 2076 (exactly 50 ahead, not more). */
    assert_int_equal(date("Wednesday, 01-Jan-76 00:00:00 GMT", WALL, &t), 0);
    assert_int_equal(t, INT64_C(3345062400));
    /* "77" would be 2077, 51 years ahead: it is 1977. */
    assert_int_equal(date("Saturday, 01-Jan-77 00:00:00 GMT", WALL, &t), 0);
    assert_int_equal(t, INT64_C(220924800));
    /* "26" is this year; "94" is 1994. */
    assert_int_equal(date("Sunday, 29-Nov-26 15:00:00 GMT", WALL, &t), 0);
    assert_int_equal(t, WALL);
    assert_int_equal(date("Sunday, 06-Nov-94 08:49:37 GMT", WALL, &t), 0);
    assert_int_equal(t, RFC_EXAMPLE);
}

static void rfc850_century_follows_the_wall_clock(void **state) {
    (void)state;
    int64_t t = 0;
    /* In 1994 the two-digit "94" is 1994, and so is it in 2043 (49 years
     * later, "94" would be 2094: 51 years ahead of 2043). */
    assert_int_equal(date("Sunday, 06-Nov-94 08:49:37 GMT", RFC_EXAMPLE, &t), 0);
    assert_int_equal(t, RFC_EXAMPLE);
    const int64_t y2043 = INT64_C(2303683200); /* 2043-01-01 */
    assert_int_equal(date("Sunday, 06-Nov-94 08:49:37 GMT", y2043, &t), 0);
    assert_int_equal(t, RFC_EXAMPLE);
}

static void dates_at_the_edges_of_the_range(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Fri, 31 Dec 9999 23:59:59 GMT", WALL, &t), 0);
    assert_int_equal(t, INT64_C(253402300799));
    assert_int_equal(date("Wed, 31 Dec 1969 23:59:59 GMT", WALL, &t), 0);
    assert_int_equal(t, -1);
    assert_int_equal(date("Thu, 01 Jan 1970 00:00:00 GMT", WALL, &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(date("Mon, 01 Jan 0000 00:00:00 GMT", WALL, &t), SG_EMALFORMED);
}

static void leap_second_is_accepted_and_61_is_not(void **state) {
    (void)state;
    int64_t t = 0;
    assert_int_equal(date("Sun, 06 Nov 1994 23:59:60 GMT", WALL, &t), 0);
    assert_int_equal(date("Sun, 06 Nov 1994 23:59:61 GMT", WALL, &t), SG_EMALFORMED);
}

static void malformed_retry_after_values_are_rejected(void **state) {
    (void)state;
    static const char *const bad[] = {
        "",
        " ",
        " 120",
        "120 ",
        "-1",
        "+5",
        "1.5",
        "12a",
        "0x10",
        "1e3",
        "Sun, 06 Nov 1994 08:49:37 UTC",
        "Sun, 06 Nov 1994 08:49:37 gmt",
        "Sun, 06 Nov 1994 08:49:37 GMT ",
        "Sun, 06 Nov 1994 08:49:37GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT",
        "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 32 Nov 1994 08:49:37 GMT",
        "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, 06 Nov 1994 08:49 GMT",
        "Sun, 06 Nov 1994",
        "Sun,",
        "Sun",
        "Sunday, 06-Nov-1994 08:49:37 GMT",
        "Sun Nov  6 08:49:37 1994 GMT",
        "now",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t d = 12345;
        int rc = ra(bad[i], WALL, &d);
        if (rc != SG_EMALFORMED) {
            fail_msg("\"%s\" gave %d, want SG_EMALFORMED", bad[i], rc);
        }
        assert_int_equal(d, 12345);
    }
}

static void embedded_nul_is_malformed(void **state) {
    (void)state;
    int64_t d = 0;
    assert_int_equal(sg_retry_after_parse("12\0", 3, WALL, &d), SG_EMALFORMED);
    assert_int_equal(sg_retry_after_parse("12", 2, WALL, &d), 0);
}

static int ms(const char *s, int64_t *out) {
    return sg_retry_after_ms_parse(s, strlen(s), out);
}

/* retry-after-ms (OpenAI, Azure): milliseconds, a fraction to the
 * nanosecond, saturating; nothing else. */
static void retry_after_ms_is_milliseconds(void **state) {
    (void)state;
    int64_t d = -1;
    assert_int_equal(ms("1500", &d), 0);
    assert_int_equal(d, SG_MS(1500));
    assert_int_equal(ms("0", &d), 0);
    assert_int_equal(d, 0);
    assert_int_equal(ms("20.5", &d), 0);
    assert_int_equal(d, SG_MS(20) + SG_US(500));
    assert_int_equal(ms("1.0000019", &d), 0); /* past the nanosecond: dropped */
    assert_int_equal(d, SG_MS(1) + 1);
    assert_int_equal(ms("99999999999999999999999", &d), 0);
    assert_int_equal(d, SG_DURATION_MAX);
    assert_int_equal(ms("31622400000.5", &d), 0);
    assert_int_equal(d, SG_DURATION_MAX);
    static const char *const bad[] = {"",   " 1",  "1 ",  "-1",   "+1",    "1.",
                                      ".5", "1e3", "1,5", "0x10", "1.2.3", "soon"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        d = -7;
        assert_int_equal(ms(bad[i], &d), SG_EMALFORMED);
        assert_int_equal(d, -7); /* untouched */
    }
    assert_int_equal(sg_retry_after_ms_parse("1\0", 2, &d), SG_EMALFORMED);
    assert_int_equal(sg_retry_after_ms_parse(NULL, 0, &d), SG_EINVAL);
    assert_int_equal(sg_retry_after_ms_parse("1", 1, NULL), SG_EINVAL);
}

static void null_arguments_are_invalid(void **state) {
    (void)state;
    int64_t d = 0;
    assert_int_equal(sg_retry_after_parse(NULL, 0, WALL, &d), SG_EINVAL);
    assert_int_equal(sg_retry_after_parse("1", 1, WALL, NULL), SG_EINVAL);
    assert_int_equal(sg_http_date_parse(NULL, 0, WALL, &d), SG_EINVAL);
    assert_int_equal(sg_http_date_parse("x", 1, WALL, NULL), SG_EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(delta_seconds_become_a_delay),
        cmocka_unit_test(delta_seconds_zero_means_retry_now),
        cmocka_unit_test(huge_delta_seconds_saturate_at_the_duration_max),
        cmocka_unit_test(all_three_date_formats_name_the_same_instant),
        cmocka_unit_test(asctime_accepts_a_two_digit_day_too),
        cmocka_unit_test(asctime_rejects_an_unpadded_or_misplaced_day),
        cmocka_unit_test(imf_fixdate_in_the_future_is_the_difference),
        cmocka_unit_test(date_in_the_past_is_no_delay),
        cmocka_unit_test(http_date_without_a_wall_clock_is_rejected),
        cmocka_unit_test(leap_days_exist_only_in_leap_years),
        cmocka_unit_test(unknown_or_miscased_day_names_are_malformed),
        cmocka_unit_test(a_weekday_that_contradicts_the_date_is_malformed),
        cmocka_unit_test(rfc850_year_more_than_50_years_ahead_is_last_century),
        cmocka_unit_test(rfc850_century_follows_the_wall_clock),
        cmocka_unit_test(dates_at_the_edges_of_the_range),
        cmocka_unit_test(leap_second_is_accepted_and_61_is_not),
        cmocka_unit_test(malformed_retry_after_values_are_rejected),
        cmocka_unit_test(embedded_nul_is_malformed),
        cmocka_unit_test(retry_after_ms_is_milliseconds),
        cmocka_unit_test(null_arguments_are_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
