/*
 * The attempt lifecycle's hedge slots with a transport of the test's own
 * (no I/O, a hand-driven clock): a hedge starts when due, the first item
 * names the winner, and every loser is recorded - even one still in
 * flight when the winner ends the operation before its cancel ran.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "transport/lifecycle.h"

#include "../sg_auto.h"

#define T0 SG_SEC(100)

static int64_t g_now;
static int g_aborts, g_finished, g_items;
static sg__lifecycle *g_slots[SG_OP_MAX_HEDGES];
static int g_nslots;
static sg__lifecycle *g_root;
static uint32_t g_cancel_at; /* the attempt whose end cancels (on_attempt) */

static int tp_launch(sg__lifecycle *lc, const sg_op_plan *plan, const sg__lc_stamp *st,
                     int64_t *now, sg_outcome *fail) {
    (void)lc, (void)plan, (void)st, (void)now, (void)fail;
    return 0;
}
static void tp_abort(sg__lifecycle *lc) {
    (void)lc;
    g_aborts++;
}
static void tp_discard(sg__lifecycle *lc, uint32_t attempt, sg_outcome outcome) {
    (void)lc, (void)attempt, (void)outcome;
}
static void tp_attempt(sg__lifecycle *lc, const sg_op_attempt *rec) {
    (void)lc;
    if (rec->n == g_cancel_at) {
        sg__lc_cancel_all(g_root); /* what sg_*_op_cancel does from on_attempt */
    }
}
static int g_unrecorded_at_done; /* attempts still running when on_done ran */
static void tp_finished(sg__lifecycle *lc) {
    sg__lc_settle_losers(lc, g_now);
    g_finished++;
    g_unrecorded_at_done = (int)sg_op_running(lc->pol); /* what on_done would see */
}
static int64_t tp_now(sg__lifecycle *lc) {
    (void)lc;
    return g_now;
}
static sg__lifecycle *tp_new_slot(sg__lifecycle *root);

static int on_item(const sg_item *item, void *ud) {
    (void)item;
    if (sg__lc_item_gate(ud) != 0) {
        return 1;
    }
    g_items++;
    return 0;
}

static const sg__transport g_tp = {.launch = tp_launch,
                                   .abort = tp_abort,
                                   .discard = tp_discard,
                                   .attempt_ended = tp_attempt,
                                   .finished = tp_finished,
                                   .now = tp_now,
                                   .new_slot = tp_new_slot};
static sg_stream_config g_sse; /* SSE ending at [DONE] (main sets it) */

static sg__lifecycle *tp_new_slot(sg__lifecycle *root) {
    sg__lifecycle *s = malloc(sizeof(*s));
    assert_non_null(s);
    assert_int_equal(sg__lc_init(s, &g_tp, root, NULL, &g_sse, 0, on_item, s), 0);
    g_slots[g_nslots++] = s;
    return s;
}

/* A response of @n items and the terminal, in one read, to @lc. */
static void respond(sg__lifecycle *lc, int n) {
    sg__lc_status(lc, 200, g_now);
    sg__lc_headers_end(lc, g_now);
    for (int i = 0; i < n; i++) {
        assert_int_equal(sg__lc_feed(lc, "data: x\n\n", 9, g_now), 0);
    }
    assert_int_equal(sg__lc_feed(lc, "data: [DONE]\n\n", 14, g_now), 1);
}

static void setup_op(sg__lifecycle *root, sg_op_options *po) {
    g_now = T0;
    g_aborts = g_finished = g_items = g_nslots = 0;
    g_root = root;
    g_cancel_at = 0;
    memset(g_slots, 0, sizeof(g_slots));
    sg_op_options_set_budget(po, SG_SEC(10));
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 3);
    assert_int_equal(sg_op_options_set_hedging(po, SG_MS(200), 1), 0);
    assert_int_equal(sg__lc_init(root, &g_tp, NULL, po, &g_sse, 0, on_item, root), 0);
    assert_null(sg__lc_slot(root, 0)); /* the slots come with the first hedge */
    assert_int_equal(sg__lc_start(root, g_now), 0);
    /* no hedge before its time; one at it */
    assert_int_equal(sg__lc_next_deadline(root), T0 + SG_MS(200));
    g_now = T0 + SG_MS(199);
    assert_int_equal(sg__lc_tick(root, g_now), 0);
    assert_int_equal(g_nslots, 0);
    g_now = T0 + SG_MS(200);
    assert_int_equal(sg__lc_tick(root, g_now), 0);
    assert_int_equal(g_nslots, 1);
    assert_int_equal(g_slots[0]->state, SG__LC_RUNNING);
    assert_int_equal(sg_op_running(root->pol), 2);
}

static void teardown_op(sg__lifecycle *root) {
    for (int i = 0; i < g_nslots; i++) {
        sg__lc_release(g_slots[i]);
        free(g_slots[i]);
    }
    sg__lc_release(root);
}

/* The hedge's whole response arrives and ends the operation before the
 * original's cancel ran: the original is stopped and recorded first. */
static void a_winner_that_ends_first_leaves_no_loser_unrecorded(void **state) {
    (void)state;
    sg__lifecycle root;
    SG_AUTO_OPTIONS(po);
    setup_op(&root, po);
    sg__lifecycle *slot = g_slots[0];
    g_now = T0 + SG_MS(250);
    respond(slot, 2);
    assert_true(root.lost); /* marked at the winner's first item */
    assert_int_equal(g_items, 2);
    sg__lc_decide(slot, g_now, SG_OUTCOME_OK);
    assert_int_equal(sg__lc_settle(slot, g_now), 1); /* the operation ended */
    assert_int_equal(g_finished, 1);
    assert_int_equal(root.state, SG__LC_DONE);
    assert_int_equal(g_aborts, 1); /* the original's request dropped */
    const sg_op *op = root.pol;
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_OK);
    assert_int_equal(sg_op_running(op), 0);
    const sg_op_attempt *a1 = sg_op_attempt_at(op, 0), *a2 = sg_op_attempt_at(op, 1);
    assert_false(a1->running);
    assert_int_equal(a1->outcome, SG_OUTCOME_CANCELLED);
    assert_int_equal(a1->reason, SG_OP_REASON_HEDGE_LOST);
    assert_true(a2->hedge);
    assert_int_equal(a2->outcome, SG_OUTCOME_OK);
    teardown_op(&root);
}

/* The original wins and ends first: the hedge in flight is recorded by
 * the end itself (sg__lc_settle_losers), and nothing of it was delivered. */
static void the_original_wins_and_the_hedge_is_recorded(void **state) {
    (void)state;
    sg__lifecycle root;
    SG_AUTO_OPTIONS(po);
    setup_op(&root, po);
    sg__lifecycle *slot = g_slots[0];
    g_now = T0 + SG_MS(260);
    respond(&root, 3);
    assert_true(slot->lost);
    /* the loser's bytes in the same step: nothing reaches the consumer */
    sg__lc_status(slot, 200, g_now);
    sg__lc_headers_end(slot, g_now);
    assert_true(sg__lc_feed(slot, "data: y\n\n", 9, g_now) < 0);
    assert_int_equal(g_items, 3);
    sg__lc_decide(&root, g_now, SG_OUTCOME_OK);
    assert_int_equal(sg__lc_settle(&root, g_now), 1);
    const sg_op *op = root.pol;
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_OK);
    assert_int_equal(sg_op_running(op), 0);
    const sg_op_attempt *a2 = sg_op_attempt_at(op, 1);
    assert_false(a2->running);
    assert_int_equal(a2->reason, SG_OP_REASON_HEDGE_LOST);
    assert_int_equal(a2->items, 0);
    assert_false(a2->partial); /* nothing of it reached the consumer */
    teardown_op(&root);
}

/* The original fails while the hedge runs; the hedge's failure then
 * decides a retry, and on_attempt cancels the operation there: no third
 * attempt is sent, and the slot keeps no cancel for a later hedge. */
static void a_cancel_from_on_attempt_stops_the_retry_a_hedge_decides(void **state) {
    (void)state;
    sg__lifecycle root;
    SG_AUTO_OPTIONS(po);
    setup_op(&root, po);
    sg__lifecycle *slot = g_slots[0];
    g_now = T0 + SG_MS(300);
    sg__lc_decide(&root, g_now, SG_OUTCOME_TRANSPORT_ERROR);
    assert_int_equal(sg__lc_settle(&root, g_now), 0);
    assert_int_equal(sg_op_attempt_at(root.pol, 0)->reason, SG_OP_REASON_HEDGE_RUNNING);
    g_cancel_at = 2;
    g_now = T0 + SG_MS(400);
    sg__lc_decide(slot, g_now, SG_OUTCOME_TRANSPORT_ERROR);
    assert_int_equal(sg__lc_settle(slot, g_now), 1); /* the operation ended */
    assert_int_equal(g_finished, 1);
    assert_int_equal(root.state, SG__LC_DONE);
    assert_false(slot->cancel);
    const sg_op *op = root.pol;
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_CANCELLED);
    assert_int_equal(sg_op_attempt_count(op), 2); /* no third attempt */
    teardown_op(&root);
}

/* The original ends the operation while the hedge's end is already
 * decided but not yet settled (HTTP/2 queues what its callbacks decide
 * and settles in order): that loser is recorded before on_done too. */
static void a_decided_loser_is_recorded_before_on_done(void **state) {
    (void)state;
    sg__lifecycle root;
    SG_AUTO_OPTIONS(po);
    setup_op(&root, po);
    sg__lifecycle *slot = g_slots[0];
    g_now = T0 + SG_MS(260);
    respond(&root, 2);
    sg__lc_decide(&root, g_now, SG_OUTCOME_OK); /* queued first */
    sg__lc_status(slot, 200, g_now);
    sg__lc_headers_end(slot, g_now);
    assert_true(sg__lc_feed(slot, "data: y\n\n", 9, g_now) < 0);
    sg__lc_decide(slot, g_now, SG_OUTCOME_CANCELLED); /* queued second */
    assert_int_equal(sg__lc_settle(&root, g_now), 1);
    assert_int_equal(g_finished, 1);
    assert_int_equal(g_unrecorded_at_done, 0);
    const sg_op_attempt *a2 = sg_op_attempt_at(root.pol, 1);
    assert_false(a2->running);
    assert_int_equal(a2->reason, SG_OP_REASON_HEDGE_LOST);
    /* the transport's queue then settles it again: nothing more */
    assert_int_equal(sg__lc_settle(slot, g_now), 0);
    assert_int_equal(sg_op_attempt_count(root.pol), 2);
    teardown_op(&root);
}

int main(void) {
    g_sse = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_winner_that_ends_first_leaves_no_loser_unrecorded),
        cmocka_unit_test(the_original_wins_and_the_hedge_is_recorded),
        cmocka_unit_test(a_cancel_from_on_attempt_stops_the_retry_a_hedge_decides),
        cmocka_unit_test(a_decided_loser_is_recorded_before_on_done),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
