/* Outcome, phase and error names: the strings are a public contract. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

static void outcome_names_match_the_design_exactly(void **state) {
    (void)state;
    static const char *const expected[] = {"ok",
                                           "connect_timeout",
                                           "first_item_timeout",
                                           "idle_timeout",
                                           "stream_timeout",
                                           "attempt_timeout",
                                           "budget_exhausted",
                                           "refused",
                                           "cancelled",
                                           "cap_exceeded",
                                           "truncated",
                                           "http_error",
                                           "transport_error",
                                           "protocol_error",
                                           "provider_error"};
    assert_int_equal(SG_OUTCOME_COUNT_, sizeof(expected) / sizeof(expected[0]));
    for (int i = 0; i < SG_OUTCOME_COUNT_; i++) {
        sg_outcome back;
        assert_string_equal(sg_outcome_name((sg_outcome)i), expected[i]);
        assert_int_equal(sg_outcome_from_name(expected[i], &back), 0);
        assert_int_equal(back, i);
    }
    assert_null(sg_outcome_name(SG_OUTCOME_COUNT_));
    assert_null(sg_outcome_name((sg_outcome)-2));
    /* no outcome: what a getter answers before there is one; a name no
     * report or record ever holds, so it does not parse */
    assert_int_equal(SG_OUTCOME_NONE, -1);
    assert_string_equal(sg_outcome_name(SG_OUTCOME_NONE), "none");
    sg_outcome back = SG_OUTCOME_OK;
    assert_int_equal(sg_outcome_from_name("none", &back), SG_EINVAL);
    assert_false(sg_outcome_is_timeout(SG_OUTCOME_NONE));
}

static void phase_names_match_the_design_exactly(void **state) {
    (void)state;
    static const char *const expected[] = {"connect", "send", "wait_headers",
                                           "wait_first_item", "streaming"};
    assert_int_equal(SG_PHASE_COUNT_, 5);
    for (int i = 0; i < SG_PHASE_COUNT_; i++) {
        sg_phase back;
        assert_string_equal(sg_phase_name((sg_phase)i), expected[i]);
        assert_int_equal(sg_phase_from_name(expected[i], &back), 0);
        assert_int_equal(back, i);
    }
    assert_null(sg_phase_name(SG_PHASE_COUNT_));
}

static void unknown_names_are_rejected(void **state) {
    (void)state;
    sg_outcome o;
    sg_phase p;
    assert_int_equal(sg_outcome_from_name("OK", &o), SG_EINVAL);
    assert_int_equal(sg_outcome_from_name("", &o), SG_EINVAL);
    assert_int_equal(sg_outcome_from_name(NULL, &o), SG_EINVAL);
    assert_int_equal(sg_phase_from_name("Streaming", &p), SG_EINVAL);
}

static void every_error_code_has_a_distinct_name_and_text(void **state) {
    (void)state;
    static const int codes[] = {
#define X(name, value, text) SG_##name,
        SG_ERRNO_MAP(X)
#undef X
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);
    for (size_t i = 0; i < n; i++) {
        assert_true(codes[i] < 0);
        assert_string_not_equal(sg_strerror(codes[i]), "unknown error");
        assert_string_not_equal(sg_errname(codes[i]), "UNKNOWN");
        for (size_t j = i + 1; j < n; j++) {
            assert_int_not_equal(codes[i], codes[j]);
            assert_string_not_equal(sg_errname(codes[i]), sg_errname(codes[j]));
        }
    }
    assert_string_equal(sg_errname(SG_EREFUSED), "EREFUSED");
    assert_string_equal(sg_strerror(12345), "unknown error");
    assert_string_equal(sg_strerror(0), "success");
}

static void timeouts_are_classified(void **state) {
    (void)state;
    assert_true(sg_outcome_is_timeout(SG_OUTCOME_IDLE_TIMEOUT));
    assert_true(sg_outcome_is_timeout(SG_OUTCOME_BUDGET_EXHAUSTED));
    assert_false(sg_outcome_is_timeout(SG_OUTCOME_REFUSED));
    assert_false(sg_outcome_is_timeout(SG_OUTCOME_TRUNCATED));
    assert_false(sg_outcome_is_timeout(SG_OUTCOME_OK));
}

static void manual_clock_reads_what_the_test_sets(void **state) {
    (void)state;
    sg_manual_clock mc;
    sg_manual_clock_init(&mc, 0);
    sg_clock c = sg_manual_clock_as(&mc);
    assert_int_equal(sg_clock_now(&c), 0);
    sg_manual_clock_set(&mc, SG_MS(1234));
    assert_int_equal(sg_clock_now(&c), SG_MS(1234));
    /* the system clock is monotonic */
    int64_t a = sg_clock_now(NULL);
    int64_t b = sg_clock_now(NULL);
    assert_true(b >= a);
    assert_string_equal(sg_version(), SG_VERSION_STRING);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(outcome_names_match_the_design_exactly),
        cmocka_unit_test(phase_names_match_the_design_exactly),
        cmocka_unit_test(unknown_names_are_rejected),
        cmocka_unit_test(every_error_code_has_a_distinct_name_and_text),
        cmocka_unit_test(timeouts_are_classified),
        cmocka_unit_test(manual_clock_reads_what_the_test_sets),
    };
    return cmocka_run_group_tests_name("names", tests, NULL, NULL);
}
