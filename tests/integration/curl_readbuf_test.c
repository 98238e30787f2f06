/*
 * libcurl's read buffers given back while their transfers are quiet
 * (sg_curl_global_init, sg_curl_multi_set_read_buffer_release), against
 * the real sg-fakemodel over loopback: a quiet HTTP/1.1 stream's buffer
 * is found, placed on pages of its own, resident while it reads, not
 * resident (mincore) once quiet, and the stream then reads on to its end
 * with every item whole; an HTTP/2 stream's buffer and one of a handle
 * with its own CURLOPT_BUFFERSIZE are never given back.
 *
 * Usage: curl_readbuf_test PATH-TO-sg-fakemodel
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "curl/internal.h"
#include "harness.h"

#include "../sg_auto.h"

enum { STREAMS = 20, ITEMS = 6 };

typedef struct slot {
    int items;
    int bad; /* items whose data is not the server's JSON */
    bool done;
} slot;

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    slot *s = ud;
    s->items++;
    /* a page given back too soon reads as zeros: no item would be whole */
    if (item->data_len < 2 || item->data[0] != '{' ||
        memchr(item->data, '\0', item->data_len) != NULL) {
        s->bad++;
    }
    return 0;
}

static void on_done(sg_curl_op *op, void *ud) {
    (void)op;
    ((slot *)ud)->done = true;
}

static bool resident(const void *page) {
    unsigned char v = 0;
    assert_int_equal(mincore((void *)(uintptr_t)page, 4096, &v), 0);
    return (v & 1) != 0;
}

static sg_curl_options *options(void) {
    sg_curl_options *co = NULL;
    assert_int_equal(sg_curl_options_new(&co), 0);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, on_done), 0);
    assert_int_equal(sg_curl_options_set_cafile(co, fm_group()->ca_path), 0);
    return co;
}

static int count(const slot *s, int n, int items) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        k += s[i].items >= items;
    }
    return k;
}

/* Steps @m for @ns. */
static void step_for(sg_curl_multi *m, int64_t ns) {
    int64_t until = sg_clock_now(NULL) + ns;
    while (sg_clock_now(NULL) < until) {
        assert_true(sg_curl_multi_step(m, SG_MS(10)) >= 0);
    }
}

/* @n streams from @url (HTTP/2 over TLS with @h2; CURLOPT_BUFFERSIZE
 * @bufsize unless 0), two items, a 400 ms stall, then the rest: after
 * the two items each buffer is checked with @check_open, 200 ms into the
 * stall with @check_quiet; then every stream must end ok, every item
 * whole. */
static void run(int n, bool h2, long bufsize, void (*check_open)(sg_curl_op *),
                void (*check_quiet)(sg_curl_op *)) {
    slot s[STREAMS];
    CURL *easy[STREAMS];
    sg_curl_op *ops[STREAMS];
    memset(s, 0, sizeof(s));
    sg_curl_multi *m = NULL;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);
    assert_int_equal(sg_curl_multi_set_read_buffer_release(m, SG_MS(50)), 0);
    sg_curl_options *co = options();
    sg_op_options *po = NULL;
    assert_int_equal(sg_op_options_new(&po), 0);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(po, SG_SEC(5)), 0);
    char url[512];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?n=%d&gap=5&stall_after=2&stall=400",
             h2 ? fm_group()->tls_base : fm_group()->base, ITEMS);
    for (int i = 0; i < n; i++) {
        easy[i] = curl_easy_init();
        assert_non_null(easy[i]);
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        if (h2) {
            curl_easy_setopt(easy[i], CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
            curl_easy_setopt(easy[i], CURLOPT_PIPEWAIT, 1L);
        }
        if (bufsize > 0) {
            curl_easy_setopt(easy[i], CURLOPT_BUFFERSIZE, bufsize);
        }
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &s[i]), 0);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    sg_op_options_free(po);
    sg_curl_options_free(co);
    while (count(s, n, 2) < n) {
        assert_true(sg_curl_multi_step(m, SG_MS(100)) >= 0);
    }
    for (int i = 0; i < n; i++) {
        check_open(ops[i]);
    }
    step_for(m, SG_MS(200)); /* 50 ms quiet, and room */
    for (int i = 0; i < n; i++) {
        assert_int_equal(s[i].items, 2); /* still in the stall */
        check_quiet(ops[i]);
    }
    while (sg_curl_multi_running(m) > 0) {
        assert_true(sg_curl_multi_step(m, SG_MS(100)) >= 0);
    }
    for (int i = 0; i < n; i++) {
        assert_true(s[i].done);
        assert_int_equal(sg_curl_op_outcome(ops[i]), SG_OUTCOME_OK);
        assert_int_equal(s[i].items, ITEMS);
        assert_int_equal(s[i].bad, 0);
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
}

static void placed_and_resident(sg_curl_op *op) {
    assert_non_null(op->at.rbuf);
    assert_int_equal((uintptr_t)op->at.rbuf % 4096, 0);
    assert_true(resident(op->at.rbuf));
}

static void given_back(sg_curl_op *op) {
    assert_non_null(op->at.rbuf);
    assert_false(resident(op->at.rbuf));
    assert_false(op->quiet_in); /* out of the list until its next read */
}

static void never_placed(sg_curl_op *op) {
    assert_null(op->at.rbuf);
    assert_false(op->quiet_in);
}

static void h2_never_placed(sg_curl_op *op) {
    assert_true(op->at.h2); /* ALPN chose h2 */
    never_placed(op);
}

/* HTTP/1.1: the buffer goes while the stream is quiet, and comes back
 * for the reads after the stall. */
static void quiet_http1_stream_gives_back_its_read_buffer_and_reads_on(void **state) {
    (void)state;
    run(STREAMS, false, 0, placed_and_resident, given_back);
}

/* HTTP/2 (libcurl may leave another stream's bytes in a buffer): never. */
static void http2_stream_keeps_its_read_buffer(void **state) {
    (void)state;
    run(4, true, 0, h2_never_placed, h2_never_placed);
}

/* A handle with a read buffer of its own size: not placed, never given. */
static void own_buffer_size_is_never_given_back(void **state) {
    (void)state;
    run(4, false, 4096, never_placed, never_placed);
}

int main(int argc, char **argv) {
    if (fm_group_args(argc, argv) != 0) {
        return 2;
    }
    if (curl_version_info(CURLVERSION_NOW)->version_num >= 0x080000) {
        printf("libcurl 8 or later: nothing is placed; skipped\n");
        return 0;
    }
    assert_int_equal(sg_curl_global_init(CURL_GLOBAL_DEFAULT), 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(quiet_http1_stream_gives_back_its_read_buffer_and_reads_on),
        cmocka_unit_test(http2_stream_keeps_its_read_buffer),
        cmocka_unit_test(own_buffer_size_is_never_given_back),
    };
    int rv = cmocka_run_group_tests(tests, fm_group_start, fm_group_stop);
    sg_curl_global_cleanup();
    return rv;
}
