/*
 * What an operation allocates when it starts, on both transports: no
 * buffer sized for the worst case (the framing's limits), only what it
 * uses.  The library's own calls to malloc, calloc and realloc are counted
 * through the linker's --wrap (tests/CMakeLists.txt): libcurl's and
 * nghttp2's are not, since they are other libraries; the figure is ours.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <malloc.h>

#include <cmocka.h>
#include <curl/curl.h>

#include <streamguard/curl.h>
#include <streamguard/h2.h>

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void __real_free(void *p);

/* Bytes asked for since the count was reset, and the largest one ask;
 * the bytes allocated (malloc_usable_size of each); and the bytes held
 * (what was allocated, less what was freed since). */
static size_t asked;
static size_t largest;
static long long allocated;
static long long held;

static void count(size_t n) {
    asked += n;
    largest = n > largest ? n : largest;
}

static void *hold(void *p) {
    const long long n = p != NULL ? (long long)malloc_usable_size(p) : 0;
    held += n;
    allocated += n;
    return p;
}

void *__wrap_malloc(size_t size) {
    count(size);
    return hold(__real_malloc(size));
}

void *__wrap_calloc(size_t n, size_t size) {
    count(n * size);
    return hold(__real_calloc(n, size));
}

void *__wrap_realloc(void *p, size_t size) {
    count(size);
    size_t before = p != NULL ? malloc_usable_size(p) : 0;
    void *q = __real_realloc(p, size);
    if (q != NULL || size == 0) {
        held -= (long long)before;
    }
    return hold(q);
}

void __wrap_free(void *p) {
    held -= p != NULL ? (long long)malloc_usable_size(p) : 0;
    __real_free(p);
}

static void reset_count(void) {
    asked = 0;
    largest = 0;
    allocated = 0;
    held = 0;
}

/* An operation under a provider profile (max_event 1 MiB, a line as long,
 * items held before the first token): the case that reserved 6 MiB. */
static const size_t MAX_START = 16 * 1024;

static void curl_op_start_reserves_no_framing_buffer(void **state) {
    (void)state;
    CURL *easy = curl_easy_init();
    assert_non_null(easy);
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    assert_int_equal(sg_profile_framing("openai", &framing), 0);
    sg_curl_options *o = NULL;
    assert_int_equal(sg_curl_options_new(&o), 0);
    assert_int_equal(sg_curl_options_set_framing(o, &framing), 0);
    sg_curl_op *op = NULL;
    reset_count();
    assert_int_equal(sg_curl_op_new(&op, easy, NULL, o, NULL), 0);
    size_t got = asked;
    size_t big = largest;
    sg_curl_op_free(op);
    sg_curl_options_free(o);
    curl_easy_cleanup(easy);
    print_message("sg_curl_op_new: %zu bytes asked, the largest %zu\n", got, big);
    assert_true(got <= MAX_START);
}

static void h2_op_start_reserves_no_framing_buffer(void **state) {
    (void)state;
    sg_h2_conn_options *co = NULL;
    assert_int_equal(sg_h2_conn_options_new(&co), 0);
    assert_int_equal(sg_h2_conn_options_set_host(co, "127.0.0.1"), 0);
    assert_int_equal(sg_h2_conn_options_set_port(co, 9), 0);
    /* never dialled: nothing steps it */
    assert_int_equal(sg_h2_conn_options_set_connect_on_demand(co, true), 0);
    sg_h2_conn *c = NULL;
    assert_int_equal(sg_h2_conn_new(&c, co), 0);
    sg_h2_conn_options_free(co);
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    assert_int_equal(sg_profile_framing("anthropic", &framing), 0);
    sg_h2_request *req = NULL;
    assert_int_equal(sg_h2_request_new(&req), 0);
    assert_int_equal(sg_h2_request_set_framing(req, &framing), 0);
    assert_int_equal(sg_h2_request_set_method(req, "POST"), 0);
    assert_int_equal(sg_h2_request_set_path(req, "/v1/messages"), 0);
    assert_int_equal(sg_h2_request_set_body(req, "{}", 2), 0);
    /* what one options object holds, to tell one copy from two */
    sg_op_options *po = NULL;
    reset_count();
    assert_int_equal(sg_op_options_new(&po), 0);
    long long one_options = held;
    sg_op_options_free(po);

    /* the connection's endpoint health makes its entry for an endpoint
     * (9,320 bytes, with its first-token sketch) when the first operation
     * asks it: the table's, once per endpoint, not an operation's */
    sg_h2_op *op = NULL;
    assert_int_equal(sg_h2_op_new(&op, c, NULL, req, NULL), 0);
    sg_h2_op_free(op);
    reset_count();
    assert_int_equal(sg_h2_op_new(&op, c, NULL, req, NULL), 0);
    size_t got = asked;
    size_t big = largest;
    long long kept = held;
    long long made = allocated;
    sg_h2_request_free(req);
    sg_h2_conn_free(c);
    print_message("sg_h2_op_new: %zu bytes asked, the largest %zu; %lld held "
                  "(an options object: %lld)\n",
                  got, big, kept, one_options);
    assert_true(got <= MAX_START);
    /* started, the operation holds its options once - the policy's copy;
     * the one it was made with is given back (both counted as the
     * allocator rounds them) */
    assert_true(kept <= made - one_options);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(curl_op_start_reserves_no_framing_buffer),
        cmocka_unit_test(h2_op_start_reserves_no_framing_buffer),
    };
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
