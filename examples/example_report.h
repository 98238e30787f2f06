/*
 * example_report.h - what the provider examples print about an operation,
 * in one place: a line per attempt, the time to first token, the
 * provider's own error, and the execution report (docs/report.md).
 * Header-only: each example stays one file to build.
 */
#ifndef SG_EXAMPLE_REPORT_H
#define SG_EXAMPLE_REPORT_H

#include <stdio.h>

#include <streamguard/curl.h>

/* One line per attempt, as the policy recorded it. */
static inline void example_print_attempt(const sg_op_attempt *rec) {
    printf("attempt %u: outcome=%s phase=%s status=%d items=%llu decision=%s reason=%s",
           rec->n, sg_outcome_name(rec->outcome), sg_phase_name(rec->phase),
           rec->http_status, (unsigned long long)rec->items,
           sg_op_decision_name(rec->decision), sg_op_reason_name(rec->reason));
    if (rec->outcome == SG_OUTCOME_PROVIDER_ERROR) {
        printf(" type=%s", rec->provider_error_type);
    }
    putchar('\n');
}

/*
 * The summary line: the outcome, the phase the deciding attempt (the
 * winner, with hedges) ended in, how many attempts ran, how many of
 * @what the example counted (tokens, events), whether it was partial, and
 * why the operation stopped.
 */
static inline void example_print_summary(const sg_op *pol, const char *what,
                                         unsigned long count) {
    const sg_op_attempt *last = sg_op_deciding_attempt(pol);
    printf("outcome=%s phase=%s attempts=%u %s=%lu partial=%s reason=%s\n",
           sg_outcome_name(sg_op_outcome(pol)),
           last ? sg_phase_name(last->phase) : "none", sg_op_attempt_count(pol), what,
           count, last && last->partial ? "true" : "false",
           sg_op_reason_name(sg_op_final_reason(pol)));
}

/*
 * After the summary line: the time to first token (under a profile the
 * first item is the first token: metadata before it does not count), the
 * provider's own words when it failed inside the stream (its type; the
 * message is the attempt's error), and the report, frozen at the
 * operation's end whatever `now` is.
 */
static inline void example_print_end(const sg_op *pol) {
    const sg_op_attempt *last = sg_op_deciding_attempt(pol);
    if (last != NULL && last->time_to_first_item_ns >= 0) {
        printf("first_token_ms=%lld\n",
               (long long)(last->time_to_first_item_ns / 1000000));
    } else {
        printf("first_token_ms=none (no token arrived)\n");
    }
    if (sg_op_outcome(pol) == SG_OUTCOME_PROVIDER_ERROR && last != NULL) {
        printf("provider error: type=%s message=\"%s\"\n", last->provider_error_type,
               last->error);
    }
    fputs("report: ", stdout);
    if (sg_op_report_fwrite(pol, sg_clock_now(NULL), stdout) == 0) {
        putchar('\n');
    }
}

#endif
