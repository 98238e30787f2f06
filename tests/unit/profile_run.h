/*
 * What the profile tests record of one attempt's stream: the items the
 * consumer got (by sg_item.kind) and how the stream concluded; and the
 * stream they play it through.  Include after <cmocka.h>.
 */
#ifndef SG_TEST_PROFILE_RUN_H
#define SG_TEST_PROFILE_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/streamguard.h>

typedef struct run {
    int items;
    int tokens, metas, ends, end_tokens; /* by sg_item.kind */
    sg_outcome outcome;
    int feed_rc;
    char type[64];     /* the in-band error's type, "" none */
    char message[128]; /* and its message */
    bool retryable;
    int64_t ttft; /* the guard's first_item_ns */
    bool partial;
} run;

/* The sg_item_cb: counts each item by its kind. */
static int on_item(const sg_item *item, void *ud) {
    run *r = ud;
    r->items++;
    r->tokens += item->kind == SG_ITEM_TOKEN;
    r->metas += item->kind == SG_ITEM_META;
    r->ends += item->kind == SG_ITEM_END;
    r->end_tokens += item->kind == SG_ITEM_END_TOKEN;
    return 0;
}

/* A stream framed by @profile (its framing in *@cfg), begun at @t0 and
 * waiting for its first token, recording into @r.  Returns its buffer,
 * for play_end. */
static char *play_begin(sg_stream *s, sg_stream_config *cfg, const char *profile, run *r,
                        int64_t t0) {
    memset(r, 0, sizeof(*r));
    memset(cfg, 0, sizeof(*cfg));
    assert_int_equal(sg_profile_framing(profile, cfg), 0);
    size_t n = sg_stream_buffer_size(cfg);
    assert_true(n > 0);
    char *buf = malloc(n);
    assert_int_equal(sg_stream_init(s, cfg, on_item, r, buf, n), 0);
    sg_guard_config g;
    sg_guard_config_init(&g);
    assert_int_equal(sg_stream_begin(s, &g, NULL, 1, t0), 0);
    sg_guard_set_phase(sg_stream_guard(s), SG_PHASE_WAIT_FIRST_ITEM, t0);
    return buf;
}

/* The body ends at @at: how the stream concluded, into @r; frees @buf. */
static void play_end(sg_stream *s, char *buf, run *r, int64_t at) {
    sg_guard_result gr;
    assert_int_equal(sg_stream_end(s, at, SG_OUTCOME_OK, &gr), 0);
    r->outcome = gr.outcome;
    r->ttft = gr.first_item_ns;
    r->partial = gr.partial;
    const char *type = NULL; /* (a bare error is judged at the body's end) */
    const char *message = NULL;
    if (sg_stream_provider_error(s, &type, &message, &r->retryable)) {
        snprintf(r->type, sizeof(r->type), "%s", type);
        snprintf(r->message, sizeof(r->message), "%s", message);
    }
    free(buf);
}

#endif
