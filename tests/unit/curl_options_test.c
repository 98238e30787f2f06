/*
 * The options an operation over libcurl takes (sg_curl_op_new): operations
 * made from the same options share one read-only copy of them, a setter
 * gives the operations made after it a copy of its own, and an operation
 * keeps reading what it was made with after its options changed or were
 * freed.  No network: operations are made and freed without a perform.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdint.h>

#include "curl/internal.h"

static void done_a(sg_curl_op *op, void *ud) {
    (void)op;
    (void)ud;
}

static void done_b(sg_curl_op *op, void *ud) {
    (void)op;
    (void)ud;
}

static sg_curl_op *op_from(CURL *easy, const sg_curl_options *co) {
    sg_curl_op *op = NULL;
    assert_int_equal(sg_curl_op_new(&op, easy, NULL, co, NULL), 0);
    return op;
}

static void operations_share_their_options_until_a_setter(void **state) {
    (void)state;
    CURL *easy = curl_easy_init();
    assert_non_null(easy);
    struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer one");
    sg_curl_options *co = NULL;
    assert_int_equal(sg_curl_options_new(&co), 0);
    assert_int_equal(sg_curl_options_set_headers(co, h), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, done_a), 0);
    curl_slist_free_all(h);

    sg_curl_op *a = op_from(easy, co), *b = op_from(easy, co);
    assert_ptr_equal(a->opts, b->opts); /* one copy for both */
    assert_ptr_not_equal(a->opts, co);
    assert_int_equal(atomic_load(&a->opts->refs), 3); /* a, b and co's */

    /* a setter: the operations made before keep what they were made with */
    assert_int_equal(sg_curl_options_set_on_done(co, done_b), 0);
    h = curl_slist_append(NULL, "Authorization: Bearer two");
    assert_int_equal(sg_curl_options_set_headers(co, h), 0);
    curl_slist_free_all(h);
    sg_curl_op *c = op_from(easy, co);
    assert_ptr_not_equal(c->opts, a->opts);
    assert_int_equal(atomic_load(&a->opts->refs), 2);
    assert_ptr_equal(a->opts->on_done, done_a);
    assert_string_equal(a->opts->headers->data, "Authorization: Bearer one");
    assert_ptr_equal(c->opts->on_done, done_b);
    assert_string_equal(c->opts->headers->data, "Authorization: Bearer two");

    /* the options freed: each operation still holds its copy */
    sg_curl_options_free(co);
    assert_int_equal(atomic_load(&a->opts->refs), 2);
    assert_int_equal(atomic_load(&c->opts->refs), 1);
    sg_curl_op_free(a);
    assert_string_equal(b->opts->headers->data, "Authorization: Bearer one");
    sg_curl_op_free(b);
    assert_string_equal(c->opts->headers->data, "Authorization: Bearer two");
    sg_curl_op_free(c);
    curl_easy_cleanup(easy);
}

static void every_setter_gives_later_operations_a_new_copy(void **state) {
    (void)state;
    CURL *easy = curl_easy_init();
    assert_non_null(easy);
    sg_curl_options *co = NULL;
    assert_int_equal(sg_curl_options_new(&co), 0);
    sg_stream_config f;
    sg_stream_config_init(&f);
    struct curl_slist *h = curl_slist_append(NULL, "X-A: 1");
    int steps = 0;
    for (;; steps++) {
        sg_curl_op *before = op_from(easy, co);
        int rv;
        switch (steps) {
        case 0:
            rv = sg_curl_options_set_framing(co, &f);
            break;
        case 1:
            rv = sg_curl_options_set_headers(co, h);
            break;
        case 2:
            rv = sg_curl_options_set_cafile(co, "/tmp/ca.pem");
            break;
        case 3:
            rv = sg_curl_options_set_deadline_header(co, true);
            break;
        case 4:
            rv = sg_curl_options_set_grpc_timeout(co, true);
            break;
        case 5:
            rv = sg_curl_options_set_drain_timeout(co, SG_MS(5));
            break;
        case 6:
            rv = sg_curl_options_set_clock(co, NULL);
            break;
        case 7:
            rv = sg_curl_options_add_endpoint(co, "http://127.0.0.1:9/", NULL, NULL, 0);
            break;
        case 8:
            rv = sg_curl_options_set_endpoint_framing(co, 0, &f);
            break;
        case 9:
            rv = sg_curl_options_set_on_item(co, NULL);
            break;
        case 10:
            rv = sg_curl_options_set_on_discard(co, NULL);
            break;
        case 11:
            rv = sg_curl_options_set_on_attempt(co, NULL);
            break;
        case 12:
            rv = sg_curl_options_set_on_done(co, NULL);
            break;
        case 13:
            rv = sg_curl_options_set_on_bytes(co, NULL);
            break;
        default:
            rv = -1;
            break;
        }
        if (rv == -1) {
            sg_curl_op_free(before);
            break;
        }
        assert_int_equal(rv, 0);
        sg_curl_op *after = op_from(easy, co);
        assert_ptr_not_equal(before->opts, after->opts);
        sg_curl_op_free(before);
        sg_curl_op_free(after);
    }
    assert_int_equal(steps, 14);
    curl_slist_free_all(h);
    sg_curl_options_free(co);
    curl_easy_cleanup(easy);
}

int main(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(operations_share_their_options_until_a_setter),
        cmocka_unit_test(every_setter_gives_later_operations_a_new_copy),
    };
    int rv = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rv;
}
