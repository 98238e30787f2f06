/* The lazy deadline heap shared by the event loops. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include <streamguard/core.h>

#include "transport/dheap.h"

typedef struct item {
    sg__dheap_node node;
    int64_t deadline; /* the "real" deadline the heap asks for */
} item;

static int64_t item_deadline(const sg__dheap_node *n) {
    return ((const item *)((const char *)n - offsetof(item, node)))->deadline;
}

static item *top_item(sg__dheap *h, int64_t *when) {
    sg__dheap_node *n;
    *when = sg__dheap_earliest(h, &n);
    return n ? (item *)((char *)n - offsetof(item, node)) : NULL;
}

static void an_empty_heap_has_no_deadline(void **state) {
    (void)state;
    sg__dheap h;
    int64_t when;
    sg__dheap_init(&h, item_deadline);
    assert_null(top_item(&h, &when));
    assert_int_equal(when, SG_TIME_NEVER);
    sg__dheap_free(&h);
}

static void the_earliest_deadline_is_on_top(void **state) {
    (void)state;
    enum { N = 200 };
    item items[N];
    sg__dheap h;
    int64_t when;
    sg__dheap_init(&h, item_deadline);
    srand(7);
    for (int i = 0; i < N; i++) {
        items[i].deadline = rand() % 10000;
        assert_int_equal(sg__dheap_push(&h, &items[i].node), 0);
    }
    int64_t prev = -1;
    for (int i = 0; i < N; i++) {
        item *t = top_item(&h, &when);
        assert_non_null(t);
        assert_true(when >= prev);
        assert_int_equal(when, t->deadline);
        prev = when;
        sg__dheap_remove(&h, &t->node);
        assert_false(t->node.in_heap);
    }
    assert_null(top_item(&h, &when));
    sg__dheap_free(&h);
}

static void a_deadline_that_moved_later_is_corrected_lazily(void **state) {
    (void)state;
    item a = {.deadline = 100};
    item b = {.deadline = 200};
    sg__dheap h;
    int64_t when;
    sg__dheap_init(&h, item_deadline);
    sg__dheap_push(&h, &a.node);
    sg__dheap_push(&h, &b.node);
    a.deadline = 300; /* an item arrived: no heap call needed */
    assert_ptr_equal(top_item(&h, &when), &b);
    assert_int_equal(when, 200);
    sg__dheap_free(&h);
}

static void a_deadline_that_moved_earlier_needs_a_reschedule(void **state) {
    (void)state;
    item a = {.deadline = 100};
    item b = {.deadline = 200};
    sg__dheap h;
    int64_t when;
    sg__dheap_init(&h, item_deadline);
    sg__dheap_push(&h, &a.node);
    sg__dheap_push(&h, &b.node);
    b.deadline = 50;
    sg__dheap_reschedule(&h, &b.node);
    assert_ptr_equal(top_item(&h, &when), &b);
    assert_int_equal(when, 50);
    /* a later explicit key postpones a look (no spinning on a due node) */
    sg__dheap_set_key(&h, &b.node, 150);
    assert_ptr_equal(top_item(&h, &when), &a);
    sg__dheap_remove(&h, &a.node);
    sg__dheap_remove(&h, &a.node); /* twice is harmless */
    assert_false(a.node.in_heap);
    sg__dheap_free(&h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_empty_heap_has_no_deadline),
        cmocka_unit_test(the_earliest_deadline_is_on_top),
        cmocka_unit_test(a_deadline_that_moved_later_is_corrected_lazily),
        cmocka_unit_test(a_deadline_that_moved_earlier_needs_a_reschedule),
    };
    return cmocka_run_group_tests_name("dheap", tests, NULL, NULL);
}
