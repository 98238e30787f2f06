/*
 * What an open stream over the libcurl transport costs the library: the
 * heap streamguard holds per guarded stream (its operation, its copies of
 * the options, its request headers), apart from libcurl's own, while many
 * are open on the managed multi, against the real sg-fakemodel over
 * loopback.
 *
 * libcurl is given counting allocators (curl_global_init_mem), so its live
 * bytes are known at every instant; the library's share is the heap in use
 * (glibc's mallinfo2) grown while every stream is open, less what libcurl
 * grew.  Each stream is a POST with a chat-sized JSON body, an
 * Authorization and a Content-Type header and an SSE framing; the server
 * sends one item and then stalls, so every stream is open, past its first
 * item and quiet when the heap is read.
 *
 * Usage: curl_memory_test PATH-TO-sg-fakemodel
 */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "harness.h"

#include <streamguard/curl.h>
#include <streamguard/curl_multi.h>

/* The heap per open stream over libcurl, libcurl's and the library's
 * together, at most: what they hold today with a little room.  Before:
 * 32,522 bytes, with a 528-byte block for the transport's messages made
 * with every operation and every request header line copied again for
 * each attempt; then 32,112, and 32,060 with the options' header lines in
 * one block; 31,659 since operations made from the same options share one
 * read-only copy of them (32,058 before: a copy of the options, their
 * framing and their header lines in every operation); 31,248 once the
 * framing state in each operation shrank (b4ce0ec).  Most of it is
 * libcurl's own: its read buffer (CURLOPT_BUFFERSIZE, 16 KiB, of which a
 * page is resident), its easy handle (5.2 KiB), its connection and
 * request state. */
#define HEAP_PER_STREAM_MAX 31296

enum { STREAMS = 300 };

/* libcurl's live heap bytes (its allocators count them). */
static size_t curl_live;

static void *count_malloc(size_t n) {
    void *p = malloc(n);
    curl_live += p != NULL ? malloc_usable_size(p) : 0;
    return p;
}
static void count_free(void *p) {
    curl_live -= p != NULL ? malloc_usable_size(p) : 0;
    free(p);
}
static void *count_realloc(void *p, size_t n) {
    size_t was = p != NULL ? malloc_usable_size(p) : 0;
    void *q = realloc(p, n);
    if (q != NULL || n == 0) {
        curl_live -= was;
        curl_live += q != NULL ? malloc_usable_size(q) : 0;
    }
    return q;
}
static char *count_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = count_malloc(n);
    if (p != NULL) {
        memcpy(p, s, n);
    }
    return p;
}
static void *count_calloc(size_t n, size_t size) {
    void *p = calloc(n, size);
    curl_live += p != NULL ? malloc_usable_size(p) : 0;
    return p;
}

static size_t heap_in_use(void) {
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

typedef struct run {
    int first; /* streams that delivered their first item */
    int done;
} run;

typedef struct slot {
    run *r;
    bool got_first;
} slot;

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    slot *s = ud;
    if (!s->got_first) {
        s->got_first = true;
        s->r->first++;
    }
    return 0;
}

static void on_done(sg_curl_op *op, void *ud) {
    (void)op;
    ((slot *)ud)->r->done++;
}

/* A chat request as an SDK sends it. */
static const char k_body[] =
    "{\"model\":\"gpt-4o-mini\",\"stream\":true,\"stream_options\":{\"include_usage\":"
    "true},\"messages\":[{\"role\":\"system\",\"content\":\"You are a helpful "
    "assistant. Answer briefly.\"},{\"role\":\"user\",\"content\":\"Write one "
    "sentence about the sea, then one about the mountains, and then stop.\"}],"
    "\"temperature\":0.2,\"max_tokens\":256}";

/* Runs @n streams at once, each one item then a stall; returns the heap
 * bytes per stream while all were open, and prints libcurl's share (its
 * allocators': the library's header lists, made by curl_slist_append,
 * among them) and the rest, the library's. */
static double open_streams(int n) {
    run r = {0};
    slot *slots = calloc((size_t)n, sizeof(*slots));
    CURL **easy = calloc((size_t)n, sizeof(*easy));
    sg_curl_op **ops = calloc((size_t)n, sizeof(*ops));
    assert_non_null(slots);
    assert_non_null(easy);
    assert_non_null(ops);
    sg_curl_multi *m = NULL;
    assert_int_equal(sg_curl_multi_new(&m, NULL), 0);

    sg_stream_config f;
    sg_stream_config_init(&f);
    assert_int_equal(sg_stream_config_set_terminal_data(&f, "[DONE]"), 0);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(
        h, "Authorization: Bearer sk-test-0123456789abcdefghijklmnopqrstuvwxyz");
    sg_curl_options *co = NULL;
    assert_int_equal(sg_curl_options_new(&co), 0);
    assert_int_equal(sg_curl_options_set_framing(co, &f), 0);
    assert_int_equal(sg_curl_options_set_headers(co, h), 0);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, on_done), 0);
    curl_slist_free_all(h);
    sg_op_options *po = NULL;
    assert_int_equal(sg_op_options_new(&po), 0);
    assert_int_equal(sg_op_options_set_budget(po, SG_SEC(60)), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(po, SG_SEC(30)), 0);
    assert_int_equal(sg_op_options_set_method(po, "POST"), 0);
    /* a POST declared safe to repeat, up to three attempts: the policy
     * keeps room for retries it never makes */
    assert_int_equal(sg_op_options_set_idempotent(po, true), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 3), 0);

    char url[512];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?n=100&gap=10&stall_after=1&stall=forever",
             fm_group()->base);
    size_t heap0 = heap_in_use(), curl0 = curl_live;
    for (int i = 0; i < n; i++) {
        slots[i].r = &r;
        easy[i] = curl_easy_init();
        assert_non_null(easy[i]);
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_POSTFIELDS, k_body);
        curl_easy_setopt(easy[i], CURLOPT_POSTFIELDSIZE, (long)(sizeof(k_body) - 1));
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &slots[i]), 0);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    sg_op_options_free(po);
    sg_curl_options_free(co);
    while (r.first < n && r.done == 0) {
        assert_true(sg_curl_multi_step(m, SG_MS(100)) >= 0);
    }
    assert_int_equal(r.first, n);
    double all = (double)heap_in_use() - (double)heap0;
    double curl = (double)curl_live - (double)curl0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(sg_curl_op_cancel(ops[i]), 0);
    }
    while (r.done < n) {
        assert_true(sg_curl_multi_step(m, SG_MS(100)) >= 0);
    }
    for (int i = 0; i < n; i++) {
        assert_int_equal(sg_curl_op_outcome(ops[i]), SG_OUTCOME_CANCELLED);
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
    free(ops);
    free(easy);
    free(slots);
    printf("%d open streams: heap %+.0f bytes per stream: libcurl %.0f, the library "
           "%.0f\n",
           n, all / n, curl / n, (all - curl) / n);
    return all / n;
}

/* The heap an open, quiet stream holds over libcurl stays within
 * HEAP_PER_STREAM_MAX. */
static void open_stream_library_heap_is_bounded(void **state) {
    (void)state;
    (void)open_streams(1); /* the multi's and the connection cache's growth, once */
    double per = open_streams(STREAMS);
    assert_true(per <= HEAP_PER_STREAM_MAX);
}

int main(int argc, char **argv) {
    if (fm_group_args(argc, argv) != 0) {
        return 2;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    curl_global_init_mem(CURL_GLOBAL_DEFAULT, count_malloc, count_free, count_realloc,
                         count_strdup, count_calloc);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(open_stream_library_heap_is_bounded),
    };
    int rv = cmocka_run_group_tests(tests, fm_group_start, fm_group_stop);
    curl_global_cleanup();
    return rv;
}
