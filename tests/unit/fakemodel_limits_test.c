/*
 * sg-fakemodel's rate limiter (tools/sg-fakemodel/ratelimit.c), driven by
 * hand: every judgement takes the time, so a window's edges are tested to
 * the nanosecond without a clock; the providers' headers it writes, to the
 * byte; its bounded name map (namemap.c); and the scenario knobs that set
 * it, with the failures fail_first heals (scenario.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../tools/sg-fakemodel/namemap.c"
#include "../../tools/sg-fakemodel/ratelimit.c"
#include "../../tools/sg-fakemodel/scenario.c"

#define MS 1000000LL
/* An arbitrary monotonic instant, as CLOCK_MONOTONIC reads on a box up for
 * a few hours. */
#define T0 (16797182LL * MS)

/* The scenario of query @q (on the OpenAI path), checked as the server
 * checks it. */
static sg_fm_scenario scenario_of(const char *q, sg_fm_format format) {
    sg_fm_scenario s;
    char err[160];
    sg_fm_scenario_init(&s, format);
    assert_int_equal(sg_fm_scenario_parse(&s, q, strlen(q), err, sizeof(err)), 0);
    sg_fm_scenario_set_body(&s, 0);
    assert_int_equal(sg_fm_scenario_check(&s, err, sizeof(err)), 0);
    return s;
}

/* 0, or -1 with the reason in @err, for query @q. */
static int refused_query(const char *q, sg_fm_format format, char *err, size_t errlen) {
    sg_fm_scenario s;
    sg_fm_scenario_init(&s, format);
    if (sg_fm_scenario_parse(&s, q, strlen(q), err, errlen) != 0) {
        return -1;
    }
    sg_fm_scenario_set_body(&s, 0);
    return sg_fm_scenario_check(&s, err, errlen);
}

typedef struct {
    sg_fm_map limiters;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    f->limiters = (sg_fm_map)SG_FM_RL_MAP_INIT;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    sg_fm_map_clear(&f->limiters);
    free(f);
    return 0;
}

static sg_fm_rl_verdict judge(fixture *f, const char *key, const sg_fm_scenario *s,
                              int64_t now) {
    sg_fm_rl_verdict v;
    assert_int_equal(sg_fm_rl_judge(&f->limiters, key, s, now, &v), 0);
    return v;
}

static void a_window_admits_its_limit_then_refuses_until_it_ends(void **state) {
    fixture *f = *state;
    sg_fm_scenario s = scenario_of("rl_requests=2&rl_window=1000", SG_FM_FMT_SSE);
    sg_fm_rl_verdict v = judge(f, "", &s, T0);
    assert_true(v.admitted);
    assert_int_equal(v.used[SG_FM_RL_REQUESTS], 1);
    assert_int_equal(v.reset_ns, 1000 * MS); /* the window opened now */
    v = judge(f, "", &s, T0 + 100 * MS);
    assert_true(v.admitted);
    assert_int_equal(v.used[SG_FM_RL_REQUESTS], 2);
    assert_int_equal(v.reset_ns, 900 * MS);
    v = judge(f, "", &s, T0 + 200 * MS);
    assert_false(v.admitted);
    assert_int_equal(v.over, SG_FM_RL_REQUESTS);
    assert_int_equal(v.used[SG_FM_RL_REQUESTS], 2); /* a refusal spends nothing */
    assert_int_equal(v.reset_ns, 800 * MS);
    /* one nanosecond before the end: still that window */
    v = judge(f, "", &s, T0 + 1000 * MS - 1);
    assert_false(v.admitted);
    assert_int_equal(v.reset_ns, 1);
    /* at the end a new window opens, with everything free */
    v = judge(f, "", &s, T0 + 1000 * MS);
    assert_true(v.admitted);
    assert_int_equal(v.used[SG_FM_RL_REQUESTS], 1);
    assert_int_equal(v.reset_ns, 1000 * MS);
}

static void a_window_opens_at_the_first_request_after_the_last_ended(void **state) {
    fixture *f = *state;
    sg_fm_scenario s = scenario_of("rl_requests=1&rl_window=500", SG_FM_FMT_SSE);
    assert_true(judge(f, "", &s, T0).admitted);
    /* long after: the window runs from this request, not from T0's grid */
    sg_fm_rl_verdict v = judge(f, "", &s, T0 + 1700 * MS);
    assert_true(v.admitted);
    assert_int_equal(v.reset_ns, 500 * MS);
    assert_false(judge(f, "", &s, T0 + 2199 * MS).admitted);
    assert_true(judge(f, "", &s, T0 + 2200 * MS).admitted);
    /* a window lasts as the request that opened it asked: a later
     * request's rl_window shapes the next one */
    sg_fm_scenario longer = scenario_of("rl_requests=1&rl_window=5000", SG_FM_FMT_SSE);
    sg_fm_rl_verdict v2 = judge(f, "", &longer, T0 + 2300 * MS);
    assert_false(v2.admitted);
    assert_int_equal(v2.window_ms, 500);
    assert_int_equal(v2.reset_ns, 400 * MS);
    v2 = judge(f, "", &longer, T0 + 2700 * MS);
    assert_true(v2.admitted);
    assert_int_equal(v2.window_ms, 5000);
    assert_int_equal(v2.reset_ns, 5000 * MS);
}

static void tokens_are_the_input_and_the_scripted_output(void **state) {
    fixture *f = *state;
    /* 10 in, 20 streamed + 5 reasoning out: 35 an answer */
    sg_fm_scenario s = scenario_of(
        "rl_tokens=100&prompt_tokens=10&n=20&reasoning_tokens=5&rl_window=60000",
        SG_FM_FMT_SSE);
    int64_t cost[SG_FM_RL_DIMS];
    sg_fm_rl_cost(&s, cost);
    assert_int_equal(cost[SG_FM_RL_REQUESTS], 1);
    assert_int_equal(cost[SG_FM_RL_INPUT], 10);
    assert_int_equal(cost[SG_FM_RL_OUTPUT], 25);
    assert_int_equal(cost[SG_FM_RL_TOKENS], 35);
    assert_int_equal(judge(f, "", &s, T0).used[SG_FM_RL_TOKENS], 35);
    assert_int_equal(judge(f, "", &s, T0 + 1).used[SG_FM_RL_TOKENS], 70);
    /* 70 + 35 > 100: refused although 30 remain */
    sg_fm_rl_verdict v = judge(f, "", &s, T0 + 2);
    assert_false(v.admitted);
    assert_int_equal(v.over, SG_FM_RL_TOKENS);
    assert_int_equal(v.used[SG_FM_RL_TOKENS], 70);
    assert_int_equal(v.requested[SG_FM_RL_TOKENS], 35);
    /* a smaller answer still fits */
    sg_fm_scenario small =
        scenario_of("rl_tokens=100&prompt_tokens=10&n=20", SG_FM_FMT_SSE);
    assert_true(judge(f, "", &small, T0 + 3).admitted);
}

static void an_answer_larger_than_the_limit_is_always_refused(void **state) {
    fixture *f = *state;
    sg_fm_scenario s = scenario_of("rl_tokens=10&n=11&rl_window=100", SG_FM_FMT_SSE);
    for (int64_t t = 0; t < 5; t++) {
        sg_fm_rl_verdict v = judge(f, "", &s, T0 + t * 100 * MS);
        assert_false(v.admitted);
        assert_int_equal(v.reset_ns, 100 * MS); /* each in a window of its own */
    }
}

static void the_first_limit_passed_is_the_one_named(void **state) {
    fixture *f = *state;
    sg_fm_scenario s = scenario_of("rl_requests=1&rl_tokens=5&n=3", SG_FM_FMT_SSE);
    assert_true(judge(f, "", &s, T0).admitted);
    sg_fm_rl_verdict v = judge(f, "", &s, T0 + 1);
    assert_false(v.admitted);
    assert_int_equal(v.over, SG_FM_RL_REQUESTS);
    sg_fm_scenario a = scenario_of("rl_input_tokens=100&rl_output_tokens=4&n=3&rl_key=x",
                                   SG_FM_FMT_ANTHROPIC);
    assert_true(judge(f, "x", &a, T0).admitted);
    v = judge(f, "x", &a, T0 + 1);
    assert_false(v.admitted);
    assert_int_equal(v.over, SG_FM_RL_OUTPUT);
}

static void limiters_by_key_are_apart_and_a_clear_frees_them(void **state) {
    fixture *f = *state;
    sg_fm_scenario s = scenario_of("rl_requests=1", SG_FM_FMT_SSE);
    assert_true(judge(f, "a", &s, T0).admitted);
    assert_true(judge(f, "b", &s, T0).admitted);
    assert_false(judge(f, "a", &s, T0 + 1).admitted);
    assert_false(judge(f, "b", &s, T0 + 1).admitted);
    sg_fm_map_clear(&f->limiters);
    assert_true(judge(f, "a", &s, T0 + 2).admitted);
}

static void openai_headers_say_the_state_as_openai_does(void **state) {
    fixture *f = *state;
    sg_fm_scenario s =
        scenario_of("rl_requests=3&rl_tokens=1000&n=5&rl_window=360000", SG_FM_FMT_SSE);
    sg_fm_rl_header h[SG_FM_RL_MAX_HEADERS];
    sg_fm_rl_verdict v = judge(f, "", &s, T0);
    assert_int_equal(sg_fm_rl_headers(&v, 0, h), 6);
    const char *want[6][2] = {
        {"x-ratelimit-limit-requests", "3"},     {"x-ratelimit-remaining-requests", "2"},
        {"x-ratelimit-reset-requests", "6m0s"},  {"x-ratelimit-limit-tokens", "1000"},
        {"x-ratelimit-remaining-tokens", "995"}, {"x-ratelimit-reset-tokens", "6m0s"},
    };
    for (int i = 0; i < 6; i++) {
        assert_string_equal(h[i].name, want[i][0]);
        assert_string_equal(h[i].value, want[i][1]);
    }
    judge(f, "", &s, T0 + 1);
    judge(f, "", &s, T0 + 2);
    /* refused 734.2 ms before the end: milliseconds rounded up, so a
     * client waiting them comes back after the end; seconds likewise */
    v = judge(f, "", &s, T0 + 360000 * MS - 734200000);
    assert_false(v.admitted);
    assert_int_equal(sg_fm_rl_headers(&v, 0, h), 8);
    assert_string_equal(h[1].value, "0");
    assert_string_equal(h[2].value, "735ms");
    assert_string_equal(h[4].value, "985");
    assert_string_equal(h[6].name, "retry-after");
    assert_string_equal(h[6].value, "1");
    assert_string_equal(h[7].name, "retry-after-ms");
    assert_string_equal(h[7].value, "735");
    char msg[256];
    sg_fm_rl_message(&v, msg, sizeof(msg));
    assert_string_equal(msg, "Rate limit reached for sg-fakemodel on requests per 360000 "
                             "ms: Limit 3, Used 3, Requested 1. Please try again in "
                             "735ms.");
}

static void anthropic_headers_say_the_state_as_anthropic_does(void **state) {
    fixture *f = *state;
    sg_fm_scenario s = scenario_of("rl_requests=50&rl_tokens=96000&rl_input_tokens=80000&"
                                   "rl_output_tokens=16000&n=7&prompt_tokens=100&"
                                   "rl_window=60000",
                                   SG_FM_FMT_ANTHROPIC);
    sg_fm_rl_header h[SG_FM_RL_MAX_HEADERS];
    /* the wall clock at 2025-08-21T12:39:58.9Z: the window ends at
     * 12:40:58.9, said to the second above it */
    int64_t wall = 1755780059LL * 1000000000 - 61 * 1000000000LL + 900 * MS;
    sg_fm_rl_verdict v = judge(f, "", &s, T0);
    assert_int_equal(sg_fm_rl_headers(&v, wall, h), 12);
    const char *want[12][2] = {
        {"anthropic-ratelimit-requests-limit", "50"},
        {"anthropic-ratelimit-requests-remaining", "49"},
        {"anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z"},
        {"anthropic-ratelimit-tokens-limit", "96000"},
        {"anthropic-ratelimit-tokens-remaining", "95893"},
        {"anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z"},
        {"anthropic-ratelimit-input-tokens-limit", "80000"},
        {"anthropic-ratelimit-input-tokens-remaining", "79900"},
        {"anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:59Z"},
        {"anthropic-ratelimit-output-tokens-limit", "16000"},
        {"anthropic-ratelimit-output-tokens-remaining", "15993"},
        {"anthropic-ratelimit-output-tokens-reset", "2025-08-21T12:40:59Z"},
    };
    for (int i = 0; i < 12; i++) {
        assert_string_equal(h[i].name, want[i][0]);
        assert_string_equal(h[i].value, want[i][1]);
    }
    /* refused: retry-after in whole seconds, and no retry-after-ms */
    sg_fm_scenario one = scenario_of("rl_requests=1&rl_window=1500", SG_FM_FMT_ANTHROPIC);
    judge(f, "one", &one, T0);
    v = judge(f, "one", &one, T0 + 10 * MS);
    assert_int_equal(sg_fm_rl_headers(&v, 0, h), 4);
    assert_string_equal(h[2].value, "1970-01-01T00:00:02Z"); /* 1.49 s, up */
    assert_string_equal(h[3].name, "retry-after");
    assert_string_equal(h[3].value, "2");
}

static void the_style_follows_the_format_unless_named(void **state) {
    (void)state;
    assert_int_equal(
        sg_fm_scenario_rl_style(&(sg_fm_scenario){.format = SG_FM_FMT_ANTHROPIC}),
        SG_FM_RL_STYLE_ANTHROPIC);
    assert_int_equal(
        sg_fm_scenario_rl_style(&(sg_fm_scenario){.format = SG_FM_FMT_GEMINI}),
        SG_FM_RL_STYLE_OPENAI);
    sg_fm_scenario s = scenario_of("rl_requests=1&rl_style=anthropic", SG_FM_FMT_SSE);
    assert_int_equal(sg_fm_scenario_rl_style(&s), SG_FM_RL_STYLE_ANTHROPIC);
    s = scenario_of("rl_requests=1&rl_style=openai", SG_FM_FMT_ANTHROPIC);
    assert_int_equal(sg_fm_scenario_rl_style(&s), SG_FM_RL_STYLE_OPENAI);
}

static void durations_print_as_go_prints_them(void **state) {
    (void)state;
    static const struct {
        int64_t ms;
        const char *want;
    } cases[] = {
        {0, "0s"},
        {9, "9ms"},
        {547, "547ms"},
        {1000, "1s"},
        {1500, "1.5s"},
        {33023, "33.023s"},
        {60000, "1m0s"},
        {172800, "2m52.8s"},
        {360000, "6m0s"},
        {3600000, "1h0m0s"},
        {3723004, "1h2m3.004s"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[40];
        size_t n = sg_fm_go_duration(cases[i].ms, out, sizeof(out));
        assert_string_equal(out, cases[i].want);
        assert_int_equal(n, strlen(cases[i].want));
    }
}

static void instants_print_as_rfc3339_in_utc(void **state) {
    (void)state;
    char out[32];
    sg_fm_rfc3339(0, out, sizeof(out));
    assert_string_equal(out, "1970-01-01T00:00:00Z");
    sg_fm_rfc3339(1755780059, out, sizeof(out));
    assert_string_equal(out, "2025-08-21T12:40:59Z");
}

static void the_name_map_is_bounded_and_zero_fills(void **state) {
    (void)state;
    sg_fm_map m = {.record = sizeof(int64_t) * 3, .max = 3};
    int64_t *a = sg_fm_map_get(&m, "a");
    assert_non_null(a);
    assert_int_equal(a[0] + a[1] + a[2], 0);
    a[2] = 7;
    assert_ptr_equal(sg_fm_map_get(&m, "a"), a);
    sg_fm_map_get(&m, "b");
    sg_fm_map_get(&m, "");
    assert_int_equal(m.n, 3);
    assert_int_equal(((int64_t *)sg_fm_map_get(&m, "a"))[2], 7);
    /* a fourth name: everything restarts */
    int64_t *d = sg_fm_map_get(&m, "d");
    assert_non_null(d);
    assert_int_equal(d[2], 0);
    assert_int_equal(m.n, 1);
    assert_int_equal(((int64_t *)sg_fm_map_get(&m, "a"))[2], 0);
    sg_fm_map_clear(&m);
    assert_null(m.buckets);
}

static void knobs_that_cannot_play_are_refused(void **state) {
    (void)state;
    char err[160];
    static const char *const bad[] = {
        "rl_requests=0",
        "rl_tokens=x",
        "rl_window=0&rl_requests=1",
        "rl_style=gemini&rl_requests=1",
        "rl_key=a/b&rl_requests=1",
        "fail_key=a%20b",
        "reset=2",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(refused_query(bad[i], SG_FM_FMT_SSE, err, sizeof(err)), -1);
        assert_non_null(strstr(err, "bad value"));
    }
    /* shaping knobs without a limit would shape nothing */
    assert_int_equal(refused_query("rl_window=100", SG_FM_FMT_SSE, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "need a limit"));
    assert_int_equal(refused_query("rl_key=k", SG_FM_FMT_SSE, err, sizeof(err)), -1);
    /* OpenAI has no input and output limits of their own */
    assert_int_equal(refused_query("rl_input_tokens=5", SG_FM_FMT_SSE, err, sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "Anthropic"));
    assert_int_equal(refused_query("rl_output_tokens=5&rl_style=openai",
                                   SG_FM_FMT_ANTHROPIC, err, sizeof(err)),
                     -1);
    assert_int_equal(
        refused_query("rl_output_tokens=5", SG_FM_FMT_ANTHROPIC, err, sizeof(err)), 0);
}

static void every_failure_fail_first_counts_heals(void **state) {
    (void)state;
    static const char *const failures[] = {
        "status=503",
        "status=529",
        "refuse=1",
        "goaway=1",
        "reset=1",
        "hang=1",
        "stall_after=0",
        "drop_after=1",
        "error_at=0",
        "cut_at=1",
        "bad_crc_at=0&format=bedrock-converse",
        "keepalive_only=1",
        "no_done=1",
        "runaway=1",
    };
    for (size_t i = 0; i < sizeof(failures) / sizeof(failures[0]); i++) {
        sg_fm_scenario s = scenario_of(failures[i], SG_FM_FMT_SSE);
        assert_true(sg_fm_scenario_fails(&s));
        sg_fm_scenario_heal(&s);
        assert_false(sg_fm_scenario_fails(&s));
    }
    /* latency is not a failure: a slow first token stays slow */
    sg_fm_scenario slow = scenario_of("first_delay=500&status=200", SG_FM_FMT_SSE);
    assert_false(sg_fm_scenario_fails(&slow));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            a_window_admits_its_limit_then_refuses_until_it_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_window_opens_at_the_first_request_after_the_last_ended, setup, teardown),
        cmocka_unit_test_setup_teardown(tokens_are_the_input_and_the_scripted_output,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_answer_larger_than_the_limit_is_always_refused,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(the_first_limit_passed_is_the_one_named, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(limiters_by_key_are_apart_and_a_clear_frees_them,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(openai_headers_say_the_state_as_openai_does,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(anthropic_headers_say_the_state_as_anthropic_does,
                                        setup, teardown),
        cmocka_unit_test(the_style_follows_the_format_unless_named),
        cmocka_unit_test(durations_print_as_go_prints_them),
        cmocka_unit_test(instants_print_as_rfc3339_in_utc),
        cmocka_unit_test(the_name_map_is_bounded_and_zero_fills),
        cmocka_unit_test(knobs_that_cannot_play_are_refused),
        cmocka_unit_test(every_failure_fail_first_counts_heals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
