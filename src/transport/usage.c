/*
 * The hand-off of an attempt's usage from its stream to the policy: what
 * the stream's profile read (src/framing/usage.h) becomes the result's
 * usage, and the policy records it or estimates (src/policy/usage.c).
 */
#include "transport/lifecycle.h"

#include "framing/usage.h"

void sg__lc_usage(const sg__lifecycle *lc, sg_op_result *r, sg_op_usage *u) {
    sg__usage_read read;
    if (sg__stream_usage(&lc->stream, &read)) {
        *u = (sg_op_usage){read.input, read.output, read.cached, read.reasoning,
                           SG_USAGE_PROVIDER};
        r->usage = u;
        r->text_bytes = read.text_bytes;
    }
}
