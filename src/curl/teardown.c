/*
 * The managed multi's rule for removing a stopped transfer (teardown.h).
 *
 * A removal costs ~12 us (libcurl's bookkeeping and the close(2) of the
 * connection), more when the thread is preempted inside it; a loop busy
 * removing a thousand transfers also competes for the CPU with the
 * wake-ups the clocks need.  So a removal whose server was told already
 * waits while a clock is about to come due, and goes in the room between
 * clocks - but never later than SG__CURL_TEARDOWN_MAX_WAIT: a run of
 * clocks that never leaves room still sees its connections go.
 */
#include "curl/teardown.h"

bool sg__curl_teardown_may_run(int64_t now, int64_t next, int64_t stopped_at) {
    return sg_time_add(now, SG__CURL_TEARDOWN_SLACK) <= next ||
           sg_time_add(stopped_at, SG__CURL_TEARDOWN_MAX_WAIT) <= now;
}
