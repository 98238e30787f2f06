/*
 * What the endpoint-health unit tests share: a table, options on it, and
 * operations driven through the policy by hand as a transport drives
 * them.  Include after <cmocka.h>.
 */
#ifndef SG_TEST_HEALTH_RUN_H
#define SG_TEST_HEALTH_RUN_H

#include <stdio.h>
#include <string.h>

#include <streamguard/health.h>
#include <streamguard/unstable/op.h>

#define T0 SG_SEC(1000)
#define URL "https://api.example.com/v1/chat/completions"
#define URL2 "https://backup.example.com/v1/chat/completions"
#define NAME "https://api.example.com:443/v1/chat/completions"

static sg_health *new_health(void) {
    sg_health *h = NULL;
    assert_int_equal(sg_health_new(&h), 0);
    return h;
}

/* Options on @h: one endpoint (URL), a POST, @budget. */
static sg_op_options *options(sg_health *h, int64_t budget) {
    sg_op_options *o = NULL;
    assert_int_equal(sg_op_options_new(&o), 0);
    assert_int_equal(sg_op_options_set_target(o, URL), 0);
    assert_int_equal(sg_op_options_set_budget(o, budget), 0);
    assert_int_equal(sg_op_options_set_health(o, h), 0);
    assert_int_equal(sg_op_options_set_seed(o, 7), 0);
    return o;
}

static sg_op *start(const sg_op_options *o, int64_t now) {
    sg_op *op = NULL;
    assert_int_equal(sg_op_new(&op), 0);
    assert_int_equal(sg_op_start(op, o, now), 0);
    return op;
}

/* An attempt's result: @oc in @ph, with @status (0: no response). */
static sg_op_result res(sg_outcome oc, sg_phase ph, int status) {
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.outcome = oc;
    r.phase = ph;
    r.http_status = status;
    r.headers_received = status > 0;
    r.sent = ph >= SG_PHASE_SEND;
    r.first_item_ns = -1;
    return r;
}

static sg_op_result status(int code) {
    return res(code < 400 ? SG_OUTCOME_OK : SG_OUTCOME_HTTP_ERROR, SG_PHASE_WAIT_HEADERS,
               code);
}

static sg_op_result with_retry_after(sg_op_result r, const char *ra) {
    r.retry_after = ra;
    r.retry_after_len = strlen(ra);
    return r;
}

/* Plans the next attempt at @now: it must go. */
static sg_op_plan go(sg_op *op, int64_t now) {
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, now, &p), 0);
    return p;
}

static sg_op_verdict end(sg_op *op, int64_t now, sg_op_result r) {
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    return v;
}

/* A new operation with @o that asks once at @now and ends with @r. */
static void one(const sg_op_options *o, int64_t now, sg_op_result r) {
    sg_op *op = start(o, now);
    (void)go(op, now);
    (void)end(op, now, r);
    sg_op_free(op);
}

typedef struct seen {
    int n;
    sg_health_entry e[4];
    char names[4][SG_HEALTH_ENDPOINT_MAX + 1];
} seen;

static int collect(const sg_health_entry *e, void *ud) {
    seen *s = ud;
    if (s->n < 4) {
        s->e[s->n] = *e;
        snprintf(s->names[s->n], sizeof(s->names[0]), "%s", e->endpoint);
        s->e[s->n].endpoint = NULL; /* (read names: the view is the call's) */
    }
    s->n++;
    return 0;
}

static seen look(sg_health *h, int64_t now) {
    seen s;
    memset(&s, 0, sizeof(s));
    assert_int_equal(sg_health_foreach(h, now, collect, &s), 0);
    return s;
}

/* The state of @h's only endpoint at @now. */
static sg_health_state state_at(sg_health *h, int64_t now) {
    seen s = look(h, now);
    assert_int_equal(s.n, 1);
    return s.e[0].state;
}

#endif
