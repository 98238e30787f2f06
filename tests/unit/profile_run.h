/*
 * What the profile tests record of one attempt's stream: the items the
 * consumer got (by sg_item.kind) and how the stream concluded.
 */
#ifndef SG_TEST_PROFILE_RUN_H
#define SG_TEST_PROFILE_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include <streamguard/streamguard.h>

typedef struct run {
    int items;
    int tokens, metas, ends; /* by sg_item.kind */
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
    return 0;
}

#endif
