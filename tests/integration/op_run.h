/*
 * What an integration test watches of one operation on the libcurl
 * transport: when it started, when its first item came, whether it ended
 * - and the callbacks that fill it in (sg_curl_options_set_on_item,
 * sg_curl_options_set_on_done).  Header-only, as harness.h.
 */
#ifndef SG_TEST_OP_RUN_H
#define SG_TEST_OP_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include <streamguard/curl.h>

typedef struct run {
    int64_t start;
    int64_t first_item; /* -1: none */
    bool done;
} run;

/* @r's first item came now (a later one changes nothing). */
static inline void run_item(run *r) {
    if (r->first_item < 0) {
        r->first_item = sg_clock_now(NULL);
    }
}

static inline int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    run_item(ud);
    return 0;
}

static inline void on_done(sg_curl_op *op, void *ud) {
    (void)op;
    ((run *)ud)->done = true;
}

#endif
