/*
 * The providers' rate-limit headers as endpoint health reads them
 * (sg_op_ratelimit_header): OpenAI's and Azure's x-ratelimit-* with Go
 * durations and bare seconds, Anthropic's anthropic-ratelimit-* with RFC
 * 3339 instants - each with the providers' exact spellings and values
 * (docs/design.md, "Endpoint health"; captures cited there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/unstable/op.h>

#include "policy/internal.h"

static int hdr(sg_op_ratelimit *rl, const char *name, const char *value) {
    return sg_op_ratelimit_header(rl, name, strlen(name), value, strlen(value));
}

static int64_t dur(const char *v) {
    int64_t ns = -1;
    assert_int_equal(sg__reset_duration_parse(v, strlen(v), &ns), 0);
    return ns;
}

static void openai_headers_as_documented(void **state) {
    (void)state;
    sg_op_ratelimit rl;
    memset(&rl, 0, sizeof(rl));
    /* platform.openai.com/docs/guides/rate-limits, "rate limits in headers" */
    assert_int_equal(hdr(&rl, "x-ratelimit-limit-requests", "60"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-limit-tokens", "150000"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-remaining-requests", "59"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-reset-requests", "1s"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-remaining-tokens", "149984"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-reset-tokens", "6m0s"), 1);
    assert_true(rl.known & SG_RATELIMIT_REMAINING(SG_RATELIMIT_REQUESTS));
    assert_int_equal(rl.remaining[SG_RATELIMIT_REQUESTS], 59);
    assert_int_equal(rl.reset_ns[SG_RATELIMIT_REQUESTS], SG_SEC(1));
    assert_int_equal(rl.remaining[SG_RATELIMIT_TOKENS], 149984);
    assert_int_equal(rl.reset_ns[SG_RATELIMIT_TOKENS], SG_SEC(360));
    assert_false(rl.known & SG_RATELIMIT_RESET_AT(SG_RATELIMIT_TOKENS));
    assert_true(rl.known & SG_RATELIMIT_LIMIT(SG_RATELIMIT_REQUESTS));
    assert_int_equal(rl.limit[SG_RATELIMIT_REQUESTS], 60);
    assert_int_equal(rl.limit[SG_RATELIMIT_TOKENS], 150000);
    /* HTTP/1.1 spells them as it likes: names are case-insensitive */
    assert_int_equal(hdr(&rl, "X-RateLimit-Remaining-Requests", "0"), 1);
    assert_int_equal(rl.remaining[SG_RATELIMIT_REQUESTS], 0);
}

/* Go's time.Duration.String(), as captured from api.openai.com. */
static void go_durations_as_openai_sends_them(void **state) {
    (void)state;
    assert_int_equal(dur("12ms"), SG_MS(12));
    assert_int_equal(dur("9ms"), SG_MS(9));
    assert_int_equal(dur("547ms"), SG_MS(547));
    assert_int_equal(dur("1m0s"), SG_SEC(60));
    assert_int_equal(dur("33.023s"), SG_MS(33023));
    assert_int_equal(dur("2m52.8s"), SG_MS(172800));
    assert_int_equal(dur("0s"), 0);
    assert_int_equal(dur("1h2m3.5s"), SG_SEC(3723) + SG_MS(500));
    assert_int_equal(dur("1.5\xc2\xb5s"), 1500); /* U+00B5, what Go prints */
    assert_int_equal(dur("2\xce\xbcs"), 2000);   /* U+03BC, Go accepts it too */
    assert_int_equal(dur("3us"), 3000);
    assert_int_equal(dur("250ns"), 250);
    /* Azure: a bare number of seconds */
    assert_int_equal(dur("64"), SG_SEC(64));
    assert_int_equal(dur("0"), 0);
    assert_int_equal(dur("1.5"), SG_MS(1500));
    /* saturating, never wrapping */
    assert_int_equal(dur("99999999999h"), SG_DURATION_MAX);
    int64_t ns = 0;
    const char *bad[] = {"", "s", "1x", "-1s", "1.s", ".5s", "1 s", "1s ", "1m-1s"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(sg__reset_duration_parse(bad[i], strlen(bad[i]), &ns),
                         SG_EMALFORMED);
    }
}

static void azure_negative_remaining_says_nothing(void **state) {
    (void)state;
    sg_op_ratelimit rl;
    memset(&rl, 0, sizeof(rl));
    /* the Responses API's "no information" (openai-dotnet#838) */
    assert_int_equal(hdr(&rl, "x-ratelimit-remaining-tokens", "-1"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-remaining-requests", "-27689"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-reset-tokens", "0"), 1);
    assert_int_equal(hdr(&rl, "x-ratelimit-limit-tokens", "-1"), 1);
    assert_false(rl.known & SG_RATELIMIT_LIMIT(SG_RATELIMIT_TOKENS));
    assert_false(rl.known & SG_RATELIMIT_REMAINING(SG_RATELIMIT_TOKENS));
    assert_false(rl.known & SG_RATELIMIT_REMAINING(SG_RATELIMIT_REQUESTS));
    assert_int_equal(rl.reset_ns[SG_RATELIMIT_TOKENS], 0);
    /* malformed values are refused and change nothing */
    const uint32_t before = rl.known;
    assert_int_equal(hdr(&rl, "x-ratelimit-remaining-tokens", "12k"), SG_EMALFORMED);
    assert_int_equal(hdr(&rl, "x-ratelimit-remaining-tokens", "-"), SG_EMALFORMED);
    assert_int_equal(hdr(&rl, "x-ratelimit-remaining-tokens", ""), SG_EMALFORMED);
    assert_int_equal(hdr(&rl, "x-ratelimit-reset-requests", "soon"), SG_EMALFORMED);
    assert_int_equal(rl.known, before);
    assert_int_equal(sg_op_ratelimit_header(NULL, "a", 1, "b", 1), SG_EINVAL);
}

static void anthropic_headers_as_documented(void **state) {
    (void)state;
    sg_op_ratelimit rl;
    memset(&rl, 0, sizeof(rl));
    /* docs.anthropic.com .../api/rate-limits; a capture of 2025-08-21 */
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-requests-limit", "1000"), 1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-input-tokens-limit", "80000"), 1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-output-tokens-limit", "16000"), 1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-tokens-limit", "96000"), 1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-requests-remaining", "0"), 1);
    assert_int_equal(
        hdr(&rl, "anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z"), 1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-tokens-remaining", "96000"), 1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z"),
                     1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-input-tokens-remaining", "79000"), 1);
    assert_int_equal(
        hdr(&rl, "anthropic-ratelimit-input-tokens-reset", "2025-08-21T12:40:58.5Z"), 1);
    assert_int_equal(hdr(&rl, "anthropic-ratelimit-output-tokens-remaining", "0"), 1);
    assert_int_equal(
        hdr(&rl, "anthropic-ratelimit-output-tokens-reset", "2025-08-21T14:40:59+02:00"),
        1);
    /* 2025-08-21T12:40:59Z = 1755780059 */
    const int64_t t = INT64_C(1755780059) * 1000;
    assert_int_equal(rl.remaining[SG_RATELIMIT_REQUESTS], 0);
    assert_true(rl.known & SG_RATELIMIT_RESET_AT(SG_RATELIMIT_REQUESTS));
    assert_false(rl.known & SG_RATELIMIT_RESET(SG_RATELIMIT_REQUESTS));
    assert_int_equal(rl.reset_at_ms[SG_RATELIMIT_REQUESTS], t);
    assert_int_equal(rl.reset_at_ms[SG_RATELIMIT_TOKENS], t);
    assert_int_equal(rl.reset_at_ms[SG_RATELIMIT_INPUT_TOKENS], t - 500);
    assert_int_equal(rl.reset_at_ms[SG_RATELIMIT_OUTPUT_TOKENS], t);
    assert_int_equal(rl.remaining[SG_RATELIMIT_INPUT_TOKENS], 79000);
    assert_int_equal(rl.remaining[SG_RATELIMIT_OUTPUT_TOKENS], 0);
    assert_int_equal(rl.limit[SG_RATELIMIT_REQUESTS], 1000);
    assert_int_equal(rl.limit[SG_RATELIMIT_TOKENS], 96000);
    assert_int_equal(rl.limit[SG_RATELIMIT_INPUT_TOKENS], 80000);
    assert_int_equal(rl.limit[SG_RATELIMIT_OUTPUT_TOKENS], 16000);
    /* not instants */
    const char *bad[] = {"2025-08-21 12:40:59Z",  "2025-08-21T12:40:59",
                         "2025-02-30T00:00:00Z",  "2025-08-21T24:00:00Z",
                         "2025-08-21T12:40:59.Z", "2025-08-21T12:40:59+0200"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(hdr(&rl, "anthropic-ratelimit-requests-reset", bad[i]),
                         SG_EMALFORMED);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(openai_headers_as_documented),
        cmocka_unit_test(go_durations_as_openai_sends_them),
        cmocka_unit_test(azure_negative_remaining_says_nothing),
        cmocka_unit_test(anthropic_headers_as_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
