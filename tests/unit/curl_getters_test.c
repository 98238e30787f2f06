/*
 * Nothing is never something, on the libcurl transport: for NULL and for
 * an operation made but never run, every getter of <streamguard/curl.h>
 * answers "none" - SG_OUTCOME_NONE, false, NULL, "", -1 - never ok or 0.
 * No network: the operation is made and freed without a perform.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>

#include <streamguard/curl.h>

static void null_is_none(void **state) {
    (void)state;
    size_t len = 7;
    char buf[64];
    assert_int_equal(sg_curl_op_outcome(NULL), SG_OUTCOME_NONE);
    assert_false(sg_curl_op_done(NULL));
    assert_null(sg_curl_op_policy(NULL));
    assert_null(sg_curl_op_easy(NULL));
    assert_null(sg_curl_op_user_data(NULL));
    assert_string_equal(sg_curl_op_error(NULL), "");
    assert_null(sg_curl_op_error_body(NULL, &len));
    assert_int_equal(len, 0);
    assert_int_equal(sg_curl_op_report(NULL, buf, sizeof(buf), NULL), SG_EINVAL);
    assert_int_equal(sg_curl_op_next_deadline(NULL), -1);
    assert_false(sg_curl_op_paused(NULL));
    assert_int_equal(sg_curl_multi_running(NULL), SG_EINVAL);
    assert_int_equal(sg_curl_multi_fd(NULL), -1);
}

static void an_operation_never_run_is_none(void **state) {
    (void)state;
    assert_int_equal(curl_global_init(CURL_GLOBAL_DEFAULT), CURLE_OK);
    CURL *easy = curl_easy_init();
    assert_non_null(easy);
    assert_int_equal(curl_easy_setopt(easy, CURLOPT_URL, "http://127.0.0.1:9/"),
                     CURLE_OK);
    sg_op_options *policy = NULL;
    assert_int_equal(sg_op_options_new(&policy), 0);
    int ud = 0;
    sg_curl_op *op = NULL;
    assert_int_equal(sg_curl_op_new(&op, easy, policy, NULL, &ud), 0);
    sg_op_options_free(policy); /* the operation has a copy */

    size_t len = 7;
    char buf[64];
    assert_int_equal(sg_curl_op_outcome(op), SG_OUTCOME_NONE);
    assert_false(sg_curl_op_done(op));
    assert_null(sg_curl_op_policy(op));
    assert_ptr_equal(sg_curl_op_easy(op), easy);
    assert_ptr_equal(sg_curl_op_user_data(op), &ud);
    assert_string_equal(sg_curl_op_error(op), "");
    assert_null(sg_curl_op_error_body(op, &len));
    assert_int_equal(len, 0);
    assert_int_equal(sg_curl_op_report(op, buf, sizeof(buf), NULL), SG_EINVAL);
    assert_int_equal(sg_curl_op_next_deadline(op), -1);
    assert_false(sg_curl_op_paused(op));
    sg_curl_op_free(op);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(null_is_none),
        cmocka_unit_test(an_operation_never_run_is_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
