/*
 * The observer object: a table of the functions the policy calls as an
 * operation forms its intent, starts and ends each attempt, and resolves
 * (op.c calls them).  Opaque so that a function can be added without
 * breaking a caller built against an older table.
 */
#include "core/internal.h"
#include "internal.h"

#include <stdlib.h>

int sg_op_observer_new(sg_op_observer **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out)); /* zero: calls nothing */
    return *out != NULL ? 0 : SG_ENOMEM;
}

void sg_op_observer_free(sg_op_observer *obs) {
    free(obs);
}

int sg_op_observer_set_on_intent(sg_op_observer *obs, sg_op_intent_cb fn) {
    SG__SET(obs, on_intent, fn);
}

int sg_op_observer_set_on_attempt_start(sg_op_observer *obs, sg_op_attempt_cb fn) {
    SG__SET(obs, on_attempt_start, fn);
}

int sg_op_observer_set_on_attempt_end(sg_op_observer *obs, sg_op_attempt_cb fn) {
    SG__SET(obs, on_attempt_end, fn);
}

int sg_op_observer_set_on_resolve(sg_op_observer *obs, sg_op_resolve_cb fn) {
    SG__SET(obs, on_resolve, fn);
}

int sg_op_observer_set_async_intent(sg_op_observer *obs, sg_op_start_intent_cb start,
                                    sg_op_poll_intent_cb poll,
                                    sg_op_abandon_intent_cb abandon) {
    /* all three or none: an intent started off the loop must be polled,
     * and given back when the operation ends first */
    bool some = start != NULL || poll != NULL || abandon != NULL;
    bool all = start != NULL && poll != NULL && abandon != NULL;
    if (obs == NULL || some != all) {
        return SG_EINVAL;
    }
    obs->start_intent = start;
    obs->poll_intent = poll;
    obs->abandon_intent = abandon;
    return 0;
}
