/*
 * An upstream's limits, applied to one request (docs/sg-fakemodel.md,
 * "Rate limits" and "Failing first"): the rate limiter's verdict and its
 * 429, the headers that say the limiter's state on every answer, which
 * requests of a counter fail (fail_first, pass_first) or wait (tail_first),
 * and what /_stats counts of it all.  The limiter itself is ratelimit.c's.
 */
#include "server.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

bool limits_admit(exchange *ex) {
    if (!sg_fm_scenario_rate_limited(&ex->sc)) {
        return true;
    }
    sg_fm_server *srv = ex->c->srv;
    if (sg_fm_rl_judge(&srv->limiters, ex->sc.rl_key, &ex->sc, ex->t_received, &ex->rl) !=
        0) {
        /* out of memory: served unlimited, without headers */
        return true;
    }
    ex->rl_judged = true;
    if (ex->rl.admitted) {
        return true;
    }
    srv->rate_limited++;
    char msg[256];
    sg_fm_rl_message(&ex->rl, msg, sizeof(msg));
    error_answer a = {.status = 429,
                      .message = msg,
                      .code = "",
                      .rl_type = sg_fm_rl_dim_name(ex->rl.over),
                      .reason = "rate_limited"};
    ex_respond_error(ex, &a);
    return false;
}

void limits_count(exchange *ex) {
    sg_fm_scenario *sc = &ex->sc;
    bool fails = sg_fm_scenario_fails(sc);
    /* Counted once: a request that fails and names how many may (fail_first,
     * pass_first), one that waits its turn (tail_first) - and, as ever, a
     * scripted status, refuse or goaway, whose counts later requests of
     * the key see. */
    bool counted = sc->tail_first > 0 ||
                   (fails && (sc->fail_first >= 0 || sc->pass_first > 0)) ||
                   (sc->status > 0 && sc->status != 200) || sc->refuse || sc->goaway;
    if (!counted) {
        return;
    }
    uint64_t count = sg_fm_key_count(sc->fail_key[0] != '\0' ? sc->fail_key : ex->key);
    /* pass_first: the first K of a counter are served; fail_first counts
     * the ones after them */
    uint64_t pass = (uint64_t)sc->pass_first;
    if (count <= pass ||
        (sc->fail_first >= 0 && count - pass > (uint64_t)sc->fail_first)) {
        sg_fm_scenario_heal(sc); /* this one is served */
    }
    ex->tail = count <= (uint64_t)sc->tail_first;
}

size_t limits_headers(const exchange *ex, sg_fm_rl_header *out) {
    if (!ex->rl_judged) {
        return 0;
    }
    /* the server's wall clock, as skewed as its Date header (date_offset) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t unix_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    if (ex->sc.has_date) {
        unix_ns += ex->sc.date_offset_s * 1000000000;
    }
    return sg_fm_rl_headers(&ex->rl, unix_ns, out);
}

void limits_count_status(exchange *ex, int status) {
    if (!ex->nolog && status >= 0 && status < 600) {
        ex->c->srv->statuses[status]++;
    }
}

void limits_reset(sg_fm_server *srv) {
    sg_fm_keys_reset();
    sg_fm_map_clear(&srv->limiters);
    srv->received = 0;
    srv->rate_limited = 0;
    memset(srv->statuses, 0, sizeof(srv->statuses));
}

void limits_stats(const sg_fm_server *srv, sg_fm_buf *b) {
    sg_fm_buf_printf(b, ",\"received\":%llu,\"rate_limited\":%llu,\"statuses\":{",
                     (unsigned long long)srv->received,
                     (unsigned long long)srv->rate_limited);
    const char *sep = "";
    for (int st = 0; st < 600; st++) {
        if (srv->statuses[st] > 0) {
            sg_fm_buf_printf(b, "%s\"%d\":%llu", sep, st,
                             (unsigned long long)srv->statuses[st]);
            sep = ",";
        }
    }
    sg_fm_buf_append(b, "}", 1);
}
