/*
 * The ledger's options: an opaque object, each option checked as it is
 * set, so sg_ledger_open only applies the defaults.
 */
#include "core/internal.h"
#include "ledger/internal.h"

#include <stdlib.h>

int sg_ledger_options_new(sg_ledger_options **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? 0 : SG_ENOMEM;
}

void sg_ledger_options_free(sg_ledger_options *o) {
    free(o);
}

int sg_ledger_options_set_fsync(sg_ledger_options *o, sg_ledger_fsync policy) {
    if (policy != SG_LEDGER_FSYNC_DEFAULT && policy != SG_LEDGER_FSYNC_ALWAYS &&
        policy != SG_LEDGER_FSYNC_NEVER) {
        return SG_EINVAL;
    }
    SG__SET(o, fsync, policy);
}

int sg_ledger_options_set_wall_clock(sg_ledger_options *o, const sg_clock *clock) {
    SG__SET(o, wall_clock, clock);
}

int sg_ledger_options_set_max_live(sg_ledger_options *o, size_t n) {
    SG__SET(o, max_live, n);
}

/* A duration option: 0 .. SG_DURATION_MAX into *@field (in @o). */
static int set_duration(const sg_ledger_options *o, int64_t *field, int64_t ns) {
    if (o == NULL || ns < 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    *field = ns;
    return 0;
}

int sg_ledger_options_set_lock_timeout(sg_ledger_options *o, int64_t ns) {
    return set_duration(o, o != NULL ? &o->lock_timeout_ns : NULL, ns);
}

int sg_ledger_options_set_timeout(sg_ledger_options *o, int64_t ns) {
    return set_duration(o, o != NULL ? &o->timeout_ns : NULL, ns);
}

int sg_ledger_options_set_close_timeout(sg_ledger_options *o, int64_t ns) {
    return set_duration(o, o != NULL ? &o->close_timeout_ns : NULL, ns);
}

int sg_ledger_options_set_intent_connections(sg_ledger_options *o, size_t n) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    if (n > SG_LEDGER_INTENT_CONNECTIONS_MAX) {
        return SG_ERANGE;
    }
    o->intent_connections = n;
    return 0;
}
