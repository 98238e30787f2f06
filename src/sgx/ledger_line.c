/* The listing line of an unresolved operation (ledger_line.h). */
#include "sgx/ledger_line.h"

#include <stdio.h>
#include <time.h>

int sgx_ledger_format_unresolved_line(const sg_ledger_entry *e, char *buf, size_t len) {
    if (e == NULL || buf == NULL) {
        return SG_EINVAL;
    }
    char when[40];
    int64_t s = e->first_seen_ns / SG_SEC(1);
    int64_t ms = (e->first_seen_ns % SG_SEC(1)) / SG_MS(1);
    if (ms < 0) {
        s -= 1;
        ms += 1000;
    }
    time_t t = (time_t)s;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL ||
        snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                 tm.tm_sec, (int)ms) >= (int)sizeof(when)) {
        snprintf(when, sizeof(when), "@%lld", (long long)e->first_seen_ns);
    }
    const char *last = e->has_last ? sg_outcome_name(e->last_outcome) : "none";
    const char *state = sg_ledger_state_name(e->state);
    int n = snprintf(buf, len, "%s %s %s %s %u %s %s", e->key ? e->key : "-",
                     e->method ? e->method : "-", e->url ? e->url : "-", when,
                     (unsigned)e->attempts, last ? last : "?", state ? state : "?");
    if (n < 0) {
        return SG_EINVAL;
    }
    if ((size_t)n >= len) {
        return SG_ENOBUFS;
    }
    return n;
}
