/*
 * When the managed multi removes a stopped transfer from libcurl
 * (teardown.c): the rule, apart from the loop that applies it (multi.c),
 * so that it is tested alone on instants chosen by hand.
 */
#ifndef SG_CURL_TEARDOWN_H
#define SG_CURL_TEARDOWN_H

#include <stdbool.h>
#include <stdint.h>

#include <streamguard/core.h>

/* Removals yield to a clock due this soon... */
#define SG__CURL_TEARDOWN_SLACK SG_MS(1)
/* ...and wait this long at most after their attempt stopped. */
#define SG__CURL_TEARDOWN_MAX_WAIT SG_MS(20)

/* Whether a stopped transfer whose server was told already (its HTTP/1.x
 * connection shut down), stopped at @stopped_at, may leave libcurl at
 * @now, when the next clock comes due at @next (SG_TIME_NEVER: none):
 * when no clock comes due within SG__CURL_TEARDOWN_SLACK of @now, or when
 * it has waited SG__CURL_TEARDOWN_MAX_WAIT. */
bool sg__curl_teardown_may_run(int64_t now, int64_t next, int64_t stopped_at);

#endif
