/* A tiny program that uses an installed streamguard, built by the install
 * test: it includes every public header - the unstable one too - and calls
 * into the core, the policy, an operation and the HTTP field parsers.  The
 * headers of a part the build may leave out (README, "Build options") are
 * included when installed: the test checks that exactly those are not. */
#include <stdio.h>
#include <string.h>

#include <streamguard/core.h>
#if __has_include(<streamguard/curl.h>)
#    include <streamguard/curl.h>
#endif
#if __has_include(<streamguard/curl_multi.h>)
#    include <streamguard/curl_multi.h>
#endif
#if __has_include(<streamguard/easy.h>)
#    include <streamguard/easy.h>
#endif
#include <streamguard/eventstream.h>
#include <streamguard/framing.h>
#include <streamguard/guard.h>
#if __has_include(<streamguard/h2.h>)
#    include <streamguard/h2.h>
#endif
#include <streamguard/health.h>
#if __has_include(<streamguard/health_pg.h>)
#    include <streamguard/health_pg.h>
#endif
#include <streamguard/http.h>
#if __has_include(<streamguard/ledger.h>)
#    include <streamguard/ledger.h>
#endif
#if __has_include(<streamguard/ledger_record.h>)
#    include <streamguard/ledger_record.h>
#endif
#include <streamguard/op.h>
#if __has_include(<streamguard/otel.h>)
#    include <streamguard/otel.h>
#endif
#if __has_include(<streamguard/otel_trace.h>)
#    include <streamguard/otel_trace.h>
#endif
#include <streamguard/policy.h>
#include <streamguard/retry.h>
#include <streamguard/stream.h>
#include <streamguard/stream_config.h>
#include <streamguard/streamguard.h>
#include <streamguard/unstable/op.h>

static int guard_outcome(void) {
    sg_budget budget;
    sg_guard_config cfg;
    sg_guard guard;
    sg_guard_result result;
    int64_t now = SG_SEC(1);

    if (sg_budget_start(&budget, now, SG_MS(500), SG_MS(10)) != 0) {
        return -1;
    }
    sg_guard_config_init(&cfg);
    if (sg_guard_config_set_first_item_timeout(&cfg, SG_MS(100)) != 0 ||
        sg_guard_start(&guard, &cfg, &budget, now) != 0) {
        return -1;
    }
    if (sg_guard_finish(&guard, now + SG_MS(150), false, &result) != 0) {
        return -1;
    }
    return (int)result.outcome;
}

/* An operation refused at once (its floor is its whole budget): no
 * attempt, outcome refused. */
static int refused_outcome(void) {
    sg_op_options *o = NULL;
    sg_op *op = NULL;
    sg_op_plan plan;
    int rv = -1;
    if (sg_op_options_new(&o) == 0 && sg_op_options_set_budget(o, SG_MS(100)) == 0 &&
        sg_op_options_set_floor(o, SG_MS(100)) == 0 && sg_op_new(&op) == 0 &&
        sg_op_start(op, o, SG_SEC(1)) == 0 &&
        sg_op_next_attempt(op, SG_SEC(1), &plan) == SG_EREFUSED) {
        rv = (int)sg_op_outcome(op);
    }
    sg_op_free(op);
    sg_op_options_free(o);
    sg_health *h = NULL; /* endpoint health links too */
    if (sg_health_new(&h) != 0 || sg_health_set_breaker_failures(h, 3) != 0) {
        rv = -1;
    }
    sg_health_free(h);
#if __has_include(<streamguard/health_pg.h>)
    sg_health_pg_options *po = NULL; /* and sharing it, with PostgreSQL */
    if (sg_health_pg_options_new(&po) != 0) {
        rv = -1;
    }
    sg_health_pg_options_free(po);
#endif
#if __has_include(<streamguard/easy.h>)
    if (sg_easy_outcome(NULL) != SG_OUTCOME_NONE) {
        rv = -1;
    }
#endif
    return rv;
}

int main(void) {
    int64_t ms = 0;
    int g = guard_outcome();
    int r = refused_outcome();
    if (g < 0 || r < 0 || sg_deadline_ms_parse("4213", 4, &ms) != 0 ||
        sg_op_outcome(NULL) != SG_OUTCOME_NONE) {
        return 1;
    }
    printf("%s %s %s %lld\n", sg_version(), sg_outcome_name((sg_outcome)g),
           sg_outcome_name((sg_outcome)r), (long long)(ms / SG_MS(1)));
    return strcmp(sg_outcome_name((sg_outcome)g), "first_item_timeout") == 0 &&
                   strcmp(sg_outcome_name((sg_outcome)r), "refused") == 0 &&
                   ms == SG_MS(4213)
               ? 0
               : 1;
}
