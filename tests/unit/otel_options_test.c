/*
 * The exporter's options (otel.h): the specification's defaults, the
 * setters' bounds, and the OTEL_* environment read all at once or not at
 * all, with a message that names the variable and never a header's value.
 * Also the retry rules of an export (429, 502, 503, 504; Retry-After; the
 * backoff's bounds).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "otel/internal.h"

static const char *const vars[] = {
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_HEADERS",  "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",  "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_BSP_MAX_QUEUE_SIZE",     "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY",     "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
};

static int clean_env(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        unsetenv(vars[i]);
    }
    return 0;
}

static sg_otel_options *fresh(void) {
    sg_otel_options *o = NULL;
    assert_int_equal(sg_otel_options_new(&o), 0);
    assert_non_null(o);
    return o;
}

static void defaults_are_the_specifications(void **state) {
    (void)state;
    sg_otel_options *o = fresh();
    assert_string_equal(o->endpoint, "http://localhost:4318/v1/traces");
    assert_string_equal(o->service_name, "unknown_service");
    assert_int_equal(o->nheaders, 0);
    assert_int_equal(o->max_queue, 2048);
    assert_int_equal(o->max_batch, 512);
    assert_int_equal(o->schedule_delay_ns, 5000 * SG__OTEL_MS);
    assert_int_equal(o->export_timeout_ns, 10000 * SG__OTEL_MS);
    /* nothing set: from_env changes nothing */
    char err[128] = "x";
    assert_int_equal(sg_otel_options_from_env(o, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_string_equal(o->endpoint, "http://localhost:4318/v1/traces");
    sg_otel_options_free(o);
    sg_otel_options_free(NULL);
}

static void setters_check_their_bounds(void **state) {
    (void)state;
    sg_otel_options *o = fresh();
    assert_int_equal(sg_otel_options_set_endpoint(o, "ftp://x/v1/traces"), SG_EINVAL);
    assert_int_equal(sg_otel_options_set_endpoint(o, "http://a b/"), SG_EINVAL);
    assert_int_equal(sg_otel_options_set_endpoint(NULL, "http://x/"), SG_EINVAL);
    assert_int_equal(sg_otel_options_set_endpoint(o, "https://c.example/v1/traces"), 0);
    assert_string_equal(o->endpoint, "https://c.example/v1/traces");
    assert_int_equal(sg_otel_options_add_header(o, "no colon"), SG_EINVAL);
    assert_int_equal(sg_otel_options_add_header(o, ": empty name"), SG_EINVAL);
    assert_int_equal(sg_otel_options_add_header(o, "X-A: b\r\nX-Injected: c"), SG_EINVAL);
    for (int i = 0; i < SG_OTEL_MAX_HEADERS; i++) {
        assert_int_equal(sg_otel_options_add_header(o, "X-Key: v"), 0);
    }
    assert_int_equal(sg_otel_options_add_header(o, "X-Key: v"), SG_ETOOMANY);
    assert_int_equal(sg_otel_options_set_service_name(o, ""), SG_EINVAL);
    assert_int_equal(sg_otel_options_set_max_queue_size(o, 0), SG_ERANGE);
    assert_int_equal(sg_otel_options_set_max_queue_size(o, (1 << 20) + 1), SG_ERANGE);
    assert_int_equal(sg_otel_options_set_max_export_batch_size(o, 0), SG_ERANGE);
    assert_int_equal(sg_otel_options_set_schedule_delay(o, 999999), SG_ERANGE);
    assert_int_equal(sg_otel_options_set_export_timeout(o, 3601 * 1000 * SG__OTEL_MS),
                     SG_ERANGE);
    assert_int_equal(sg_otel_options_set_export_timeout(o, 250 * SG__OTEL_MS), 0);
    assert_int_equal(o->export_timeout_ns, 250 * SG__OTEL_MS);
    char *big = malloc(SG_OTEL_MAX_VALUE + 16);
    assert_non_null(big);
    memset(big, 'a', SG_OTEL_MAX_VALUE + 15);
    big[SG_OTEL_MAX_VALUE + 15] = '\0';
    assert_int_equal(sg_otel_options_set_service_name(o, big), SG_ERANGE);
    free(big);
    sg_otel_options_free(o);
}

static void a_base_endpoint_gains_the_traces_path(void **state) {
    (void)state;
    sg_otel_options *o = fresh();
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/", 1);
    assert_int_equal(sg_otel_options_from_env(o, NULL, 0), 0);
    assert_string_equal(o->endpoint, "http://collector:4318/v1/traces");
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://gw.example/otlp", 1);
    assert_int_equal(sg_otel_options_from_env(o, NULL, 0), 0);
    assert_string_equal(o->endpoint, "https://gw.example/otlp/v1/traces");
    /* the per-signal variable is used as is, and wins */
    setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t.example:9/custom", 1);
    assert_int_equal(sg_otel_options_from_env(o, NULL, 0), 0);
    assert_string_equal(o->endpoint, "http://t.example:9/custom");
    sg_otel_options_free(o);
}

static void headers_are_baggage_lists_percent_decoded(void **state) {
    (void)state;
    sg_otel_options *o = fresh();
    setenv("OTEL_EXPORTER_OTLP_HEADERS",
           " api-key = secret%20value%2C1 ,, x-tenant=a%3Db ,", 1);
    assert_int_equal(sg_otel_options_from_env(o, NULL, 0), 0);
    assert_int_equal(o->nheaders, 2);
    assert_string_equal(o->headers[0], "api-key: secret value,1");
    assert_string_equal(o->headers[1], "x-tenant: a=b");
    sg_otel_options_free(o);

    o = fresh();
    setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "authorization=Bearer%20t", 1);
    assert_int_equal(sg_otel_options_from_env(o, NULL, 0), 0);
    assert_int_equal(o->nheaders, 1);
    assert_string_equal(o->headers[0], "authorization: Bearer t");
    sg_otel_options_free(o);
}

static void numbers_and_the_service_name(void **state) {
    (void)state;
    sg_otel_options *o = fresh();
    setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2500", 1);
    setenv("OTEL_BSP_SCHEDULE_DELAY", "100", 1);
    setenv("OTEL_BSP_MAX_QUEUE_SIZE", "64", 1);
    setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "16", 1);
    setenv("OTEL_RESOURCE_ATTRIBUTES",
           "deployment.environment=prod,service.name=from%20attrs", 1);
    assert_int_equal(sg_otel_options_from_env(o, NULL, 0), 0);
    assert_int_equal(o->export_timeout_ns, 2500 * SG__OTEL_MS);
    assert_int_equal(o->schedule_delay_ns, 100 * SG__OTEL_MS);
    assert_int_equal(o->max_queue, 64);
    assert_int_equal(o->max_batch, 16);
    assert_string_equal(o->service_name, "from attrs");
    setenv("OTEL_SERVICE_NAME", "checkout", 1);
    setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "700", 1);
    assert_int_equal(sg_otel_options_from_env(o, NULL, 0), 0);
    assert_string_equal(o->service_name, "checkout");
    assert_int_equal(o->export_timeout_ns, 700 * SG__OTEL_MS);
    sg_otel_options_free(o);
}

/* A bad variable: its code, a message naming it and not the secret, and
 * the options as they were. */
static void expect_refused(const char *var, const char *value, int code,
                           const char *secret) {
    clean_env(NULL);
    sg_otel_options *o = fresh();
    setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://fine:4318", 1);
    setenv(var, value, 1);
    char err[256];
    assert_int_equal(sg_otel_options_from_env(o, err, sizeof err), code);
    if (strstr(err, var) == NULL) {
        fail_msg("%s=%s: the message does not name it: %s", var, value, err);
    }
    if (secret != NULL && strstr(err, secret) != NULL) {
        fail_msg("the message shows a header's value: %s", err);
    }
    assert_string_equal(o->endpoint, "http://localhost:4318/v1/traces");
    assert_int_equal(o->nheaders, 0);
    sg_otel_options_free(o);
}

static void bad_input_is_a_clear_error_and_changes_nothing(void **state) {
    (void)state;
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", "api-key", SG_EINVAL, NULL);
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", "ok=1,api-key=s3cr%zz", SG_EINVAL,
                   "s3cr");
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", "=s3cret", SG_EINVAL, "s3cret");
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", "bad key=s3cret", SG_EINVAL, "s3cret");
    expect_refused("OTEL_EXPORTER_OTLP_HEADERS", "k=line%0Abreak", SG_EINVAL, "break");
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "k=s3cret%", SG_EINVAL, "s3cret");
    expect_refused("OTEL_EXPORTER_OTLP_TIMEOUT", "10s", SG_EINVAL, NULL);
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "-5", SG_EINVAL, NULL);
    expect_refused("OTEL_EXPORTER_OTLP_TIMEOUT", "0", SG_ERANGE, NULL);
    expect_refused("OTEL_BSP_MAX_QUEUE_SIZE", "0", SG_ERANGE, NULL);
    expect_refused("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "99999999999999999999", SG_EINVAL,
                   NULL);
    expect_refused("OTEL_BSP_SCHEDULE_DELAY", "5000000", SG_ERANGE, NULL);
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "localhost:4318", SG_EINVAL,
                   NULL);
    expect_refused("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", SG_EUNSUPPORTED, NULL);
    expect_refused("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json", SG_EUNSUPPORTED,
                   NULL);
    assert_int_equal(sg_otel_options_from_env(NULL, NULL, 0), SG_EINVAL);
}

static void only_429_502_503_504_are_retried(void **state) {
    (void)state;
    const long yes[] = {429, 502, 503, 504};
    const long no[] = {200, 400, 401, 403, 404, 408, 413, 500, 501, 505};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        assert_true(sg__otel_status_retryable(yes[i]));
    }
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        assert_false(sg__otel_status_retryable(no[i]));
    }
}

static void retry_after_and_backoff(void **state) {
    (void)state;
    assert_int_equal(sg__otel_retry_after(" 3\r\n", 4), 3);
    assert_int_equal(sg__otel_retry_after("0", 1), 0);
    assert_int_equal(sg__otel_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", 29), -1);
    assert_int_equal(sg__otel_retry_after("", 0), -1);
    assert_int_equal(sg__otel_retry_after("1.5", 3), -1);
    const int64_t s = 1000000000;
    assert_int_equal(sg__otel_backoff(0, 2, 12345), 2 * s);
    assert_int_equal(sg__otel_backoff(3, 999999, 0), 3600 * s);
    /* computed: 1 s, 1.5 s, 2.25 s, ... at most 5 s, jittered to 50 .. 100 % */
    const int64_t base[] = {s, 3 * s / 2, 9 * s / 4, 27 * s / 8, 5 * s, 5 * s, 5 * s};
    for (unsigned r = 0; r < sizeof base / sizeof base[0]; r++) {
        int64_t lo = sg__otel_backoff(r, -1, 0);
        int64_t hi = sg__otel_backoff(r, -1, (uint64_t)(base[r] / 2));
        assert_int_equal(lo, base[r] / 2);
        assert_int_equal(hi, base[r]);
        for (uint64_t k = 1; k < 1000; k++) {
            int64_t d = sg__otel_backoff(r, -1, k * 0x9e3779b97f4a7c15ULL);
            assert_true(d >= base[r] / 2 && d <= base[r]);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(defaults_are_the_specifications, clean_env),
        cmocka_unit_test_setup(setters_check_their_bounds, clean_env),
        cmocka_unit_test_setup(a_base_endpoint_gains_the_traces_path, clean_env),
        cmocka_unit_test_setup(headers_are_baggage_lists_percent_decoded, clean_env),
        cmocka_unit_test_setup(numbers_and_the_service_name, clean_env),
        cmocka_unit_test_setup(bad_input_is_a_clear_error_and_changes_nothing, clean_env),
        cmocka_unit_test(only_429_502_503_504_are_retried),
        cmocka_unit_test(retry_after_and_backoff),
    };
    return cmocka_run_group_tests_name("otel_options", tests, NULL, NULL);
}
