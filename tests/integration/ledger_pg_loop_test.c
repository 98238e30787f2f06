/*
 * The PostgreSQL ledger inside the transports' own event loops: an
 * operation whose intent waits for the database (a row held by another
 * transaction) never holds up the other streams on the same loop - neither
 * the managed libcurl multi nor an HTTP/2 connection - and starts as soon
 * as its intent lands.  An operation whose budget runs out, or that is
 * cancelled, while its intent waits ends with that outcome and sends
 * nothing; an intent refused by the database ends it as refused.  Against
 * a real PostgreSQL (tests/integration/ledger_pg.sh) and a real
 * sg-fakemodel, on real sockets; times are measured, never slept for.
 * Usage: ledger_pg_loop_test URI PATH/TO/sg-fakemodel
 */
#define _GNU_SOURCE
#include <streamguard/curl.h>
#include <streamguard/h2.h>
#include <streamguard/ledger.h>

#include <libpq-fe.h>

#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "pg_test.h"

#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

static fm_server server;

static int64_t now_ns(void) {
    return sg_clock_now(NULL);
}

/* The row of @key's state ("" when there is none). */
static void row_state(PGconn *c, const char *key, char *out, size_t cap) {
    const char *vals[1] = {key};
    PGresult *r = PQexecParams(c,
                               "SELECT state || '/' || COALESCE(final_outcome, '') "
                               "FROM streamguard_ledger_ops WHERE key = $1",
                               1, NULL, vals, NULL, NULL, 0);
    snprintf(out, cap, "%s", PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
}

/* @key's row, settled (done) so that the next intent updates it: a row
 * another transaction can then hold. */
static void settled_row(sg_ledger *l, const char *key) {
    CHECK(sg_ledger_intent(l, key, "GET", "http://127.0.0.1/seed") == 0);
    CHECK(sg_ledger_resolve(l, key, SG_LEDGER_DONE, SG_OUTCOME_OK) == 0);
    CHECK(sg_ledger_sync(l, -1) == 0);
}

/* Holds @key's row in an open transaction of @c (until ROLLBACK): an
 * intent of that key waits for it. */
static void hold_row(PGconn *c, const char *key) {
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT 1 FROM streamguard_ledger_ops WHERE key = '%s' FOR UPDATE", key);
    sql(c, "BEGIN");
    sql(c, q);
}

/* A ledger in *@l (@o: its options, NULL for the defaults), @key's row
 * settled and held by the connection returned (ROLLBACK lets it go). */
static PGconn *row_held(const char *key, const sg_ledger_options *o, sg_ledger **l) {
    *l = NULL;
    CHECK(sg_ledger_open(l, uri, o) == 0);
    if (*l == NULL) {
        exit(1);
    }
    PGconn *c = admin();
    settled_row(*l, key);
    hold_row(c, key);
    return c;
}

/* ------------------------------------------------------------ the stream */

typedef struct watch {
    int64_t start;
    int64_t last;    /* the last item's instant */
    int64_t max_gap; /* the longest wait between two items (or start, first) */
    int items;
    bool done;
    sg_outcome outcome;
    sg_op_reason reason;
    uint32_t attempts;
    int64_t first_attempt_at; /* since start, -1 none */
    int64_t ended_at;         /* since start */
    int observer_error;
    char error[256];
} watch;

static void seen_item(watch *w) {
    int64_t t = now_ns();
    int64_t from = w->items == 0 ? w->start : w->last;
    if (t - from > w->max_gap) {
        w->max_gap = t - from;
    }
    w->last = t;
    w->items++;
}

static void seen_end(watch *w, const sg_op *pol, const char *err) {
    w->done = true;
    w->outcome = sg_op_outcome(pol);
    w->reason = sg_op_final_reason(pol);
    w->attempts = sg_op_attempt_count(pol);
    const sg_op_attempt *a = sg_op_attempt_at(pol, 0);
    w->first_attempt_at = a != NULL ? a->started_at - w->start : -1;
    w->ended_at = now_ns() - w->start;
    w->observer_error = sg_op_observer_error(pol);
    snprintf(w->error, sizeof(w->error), "%s", err != NULL ? err : "");
}

static int curl_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    seen_item(ud);
    return 0;
}

static void curl_done(sg_curl_op *op, void *ud) {
    seen_end(ud, sg_curl_op_policy(op), sg_curl_op_error(op));
}

static int h2_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    seen_item(ud);
    return 0;
}

static void h2_done(sg_h2_op *op, void *ud) {
    seen_end(ud, sg_h2_op_policy(op), sg_h2_op_error(op));
}

static void policy(sg_op_options *po, const char *key, const sg_ledger_binding *b,
                   int64_t budget) {
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 1);
    sg_op_options_set_budget(po, budget);
    if (key != NULL) {
        sg_op_options_set_idempotency_key(po, key);
        sg_op_options_set_observer(po, sg_ledger_observer(), (void *)(uintptr_t)b);
    }
}

/* A loop: a steady stream beside operations whose intents @keys wait
 * for the row @c holds. */
typedef struct scenario {
    const char *keys[2];
    int64_t budget;
    /* The row goes (ROLLBACK on @c) this long after the start - or, with
     * cancel_on_wait, after the cancel. */
    int64_t release_at;
    /* The waiting operations are cancelled once their intent is in the
     * database, waiting for the row: an intent still queued for an intent
     * thread when its operation ends is never recorded (async.c), which is
     * not what this case is about. */
    bool cancel_on_wait;
} scenario;

/* How long a test waits for an intent to be in the database. */
#define WAITER_WITHIN SG_SEC(5)

/* true when a session of the ledger waits for a row lock, asked on @w, a
 * connection outside any transaction: a session's view of
 * pg_stat_activity is fixed for the length of its transaction. */
static bool lock_waiter(PGconn *w) {
    PGresult *r = PQexec(w, "SELECT count(*) FROM pg_stat_activity "
                            "WHERE application_name = 'streamguard' "
                            "AND wait_event_type = 'Lock'");
    bool waiting = PQntuples(r) == 1 && atoi(PQgetvalue(r, 0, 0)) > 0;
    PQclear(r);
    return waiting;
}

/* What a scenario does as the loop runs: lets the row go at release_at,
 * and says once, when the intent waits in the database, that the waiting
 * operations are to be cancelled (true). */
typedef struct timeline {
    bool released;
    bool cancelled;
    int64_t cancelled_at; /* since the start */
    PGconn *watch;        /* cancel_on_wait: asks for the lock waiter */
} timeline;

static void timeline_init(timeline *tl, const scenario *sc) {
    memset(tl, 0, sizeof(*tl));
    if (sc->cancel_on_wait) {
        tl->watch = admin();
    }
}

static bool timeline_step(timeline *tl, const scenario *sc, PGconn *c, int64_t start) {
    int64_t t = now_ns() - start;
    bool cancel = false;
    if (sc->cancel_on_wait && !tl->cancelled) {
        bool waiting = lock_waiter(tl->watch);
        if (waiting || t >= WAITER_WITHIN) {
            CHECK(waiting); /* else cancelled all the same: the loop ends */
            tl->cancelled = true;
            tl->cancelled_at = t;
            cancel = true;
        }
    }
    int64_t release_at =
        sc->cancel_on_wait
            ? (tl->cancelled ? tl->cancelled_at + sc->release_at : INT64_MAX)
            : sc->release_at;
    /* never in the step that cancels: the cancel is taken first */
    if (!tl->released && !cancel && t >= release_at) {
        sql(c, "ROLLBACK");
        tl->released = true;
    }
    return cancel;
}

static void timeline_end(timeline *tl, PGconn *c) {
    if (!tl->released) {
        sql(c, "ROLLBACK");
    }
    if (tl->watch != NULL) {
        PQfinish(tl->watch);
    }
}

static void run_curl(sg_ledger *l, PGconn *c, const scenario *sc, watch *steady,
                     watch *w) {
    sg_curl_multi *m;
    CHECK(sg_curl_multi_new(&m, NULL) == 0);
    sg_ledger_binding b = {l, NULL};
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    CHECK(sg_curl_options_set_on_item(co, curl_item) == 0);
    CHECK(sg_curl_options_set_on_done(co, curl_done) == 0);
    char url[2][256];
    snprintf(url[0], sizeof(url[0]), "%s/v1/chat/completions?n=60&gap=10", server.base);
    snprintf(url[1], sizeof(url[1]), "%s/v1/chat/completions?n=3", server.base);
    CURL *easy[3];
    sg_curl_op *ops[3];
    SG_AUTO_OPTIONS(po);
    int n = 1;
    memset(steady, 0, sizeof(*steady));
    steady->start = now_ns();
    policy(po, NULL, NULL, SG_SEC(10));
    easy[0] = curl_easy_init();
    curl_easy_setopt(easy[0], CURLOPT_URL, url[0]);
    CHECK(sg_curl_op_new(&ops[0], easy[0], po, co, steady) == 0);
    CHECK(sg_curl_multi_add(m, ops[0]) == 0);
    for (int i = 0; i < 2 && sc->keys[i] != NULL; i++, n++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].start = now_ns();
        policy(po, sc->keys[i], &b, sc->budget);
        sg_op_options_set_target(po, url[1]); /* what the ledger records */
        easy[n] = curl_easy_init();
        curl_easy_setopt(easy[n], CURLOPT_URL, url[1]);
        CHECK(sg_curl_op_new(&ops[n], easy[n], po, co, &w[i]) == 0);
        /* returns at once: the intent waits for the row off the loop */
        int64_t t0 = now_ns();
        CHECK(sg_curl_multi_add(m, ops[n]) == 0);
        CHECK(now_ns() - t0 < SG_MS(50));
    }
    timeline tl;
    timeline_init(&tl, sc);
    while (sg_curl_multi_running(m) > 0) {
        if (timeline_step(&tl, sc, c, steady->start)) {
            for (int i = 1; i < n; i++) {
                sg_curl_op_cancel(ops[i]);
            }
        }
        CHECK(sg_curl_multi_step(m, SG_MS(5)) >= 0);
    }
    timeline_end(&tl, c);
    for (int i = 0; i < n; i++) {
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
}

static void run_h2(sg_ledger *l, PGconn *c, const scenario *sc, watch *steady, watch *w) {
    SG_AUTO_H2_CONN_OPTIONS(co);
    CHECK(sg_h2_conn_options_set_host(co, "127.0.0.1") == 0);
    CHECK(sg_h2_conn_options_set_port(co, server.port) == 0);
    sg_h2_conn *conn;
    CHECK(sg_h2_conn_new(&conn, co) == 0);
    sg_ledger_binding b = {l, NULL};
    sg_test_h2_req rq;
    memset(&rq, 0, sizeof(rq));
    sg_stream_config sse = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    rq.method = "GET";
    sg_test_h2_cbs cbs = {.on_item = h2_item, .on_done = h2_done};
    SG_AUTO_OPTIONS(po);
    sg_h2_op *ops[3];
    int n = 1;
    memset(steady, 0, sizeof(*steady));
    steady->start = now_ns();
    policy(po, NULL, NULL, SG_SEC(10));
    rq.path = "/v1/chat/completions?n=60&gap=10";
    CHECK(sg_test_h2_start(conn, &rq, &sse, po, &cbs, steady, &ops[0]) == 0);
    rq.path = "/v1/chat/completions?n=3";
    for (int i = 0; i < 2 && sc->keys[i] != NULL; i++, n++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].start = now_ns();
        policy(po, sc->keys[i], &b, sc->budget);
        int64_t t0 = now_ns();
        CHECK(sg_test_h2_start(conn, &rq, &sse, po, &cbs, &w[i], &ops[n]) == 0);
        CHECK(now_ns() - t0 < SG_MS(50));
    }
    timeline tl;
    timeline_init(&tl, sc);
    struct pollfd p = {sg_h2_conn_fd(conn), POLLIN, 0};
    while (sg_h2_conn_running(conn) > 0) {
        if (timeline_step(&tl, sc, c, steady->start)) {
            for (int i = 1; i < n; i++) {
                sg_h2_op_cancel(ops[i]);
            }
        }
        /* the caller's own loop: the connection's fd, at most 5 ms */
        int ready = poll(&p, 1, 5);
        CHECK(sg_h2_conn_step(conn, now_ns(), ready > 0, false) >= 0);
    }
    timeline_end(&tl, c);
    for (int i = 0; i < n; i++) {
        sg_h2_op_free(ops[i]);
    }
    sg_h2_conn_free(conn);
}

typedef void (*runner)(sg_ledger *l, PGconn *c, const scenario *sc, watch *steady,
                       watch *w);

/* The steady stream went on at its own pace: 60 items 10 ms apart, none
 * held up by the intent waiting for the row. */
static void steady_ok(const char *what, const watch *s) {
    CHECK(s->done && s->outcome == SG_OUTCOME_OK && s->items == 60);
    printf("%s: steady stream's longest gap %.1f ms\n", what, (double)s->max_gap / 1e6);
    CHECK(s->max_gap < SG_MS(150));
}

/* The row held for 400 ms: the loop streams on; the operation starts
 * once the intent lands and completes. */
static void waits_without_stalling(runner run, const char *what, const char *key) {
    sg_ledger *l;
    PGconn *c = row_held(key, NULL, &l);
    scenario sc = {{key, NULL}, SG_SEC(10), SG_MS(400), false};
    watch steady, w[2];
    run(l, c, &sc, &steady, w);
    steady_ok(what, &steady);
    CHECK(w[0].done && w[0].outcome == SG_OUTCOME_OK && w[0].items == 3);
    CHECK(w[0].attempts == 1);
    printf("%s: first attempt %.1f ms after the start (row held 400 ms)\n", what,
           (double)w[0].first_attempt_at / 1e6);
    CHECK(w[0].first_attempt_at >= SG_MS(350));
    CHECK(sg_ledger_sync(l, -1) == 0);
    char st[64];
    row_state(c, key, st, sizeof(st));
    CHECK(strcmp(st, "done/ok") == 0);
    sg_ledger_close(l);
    PQfinish(c);
}

/* The budget (300 ms) ends while the row is held: budget_exhausted, no
 * attempt, nothing recorded as owned. */
static void budget_ends_while_waiting(runner run, const char *what, const char *key) {
    sg_ledger *l;
    PGconn *c = row_held(key, NULL, &l);
    scenario sc = {{key, NULL}, SG_MS(300), SG_MS(700), false};
    watch steady, w[2];
    run(l, c, &sc, &steady, w);
    steady_ok(what, &steady);
    CHECK(w[0].done && w[0].outcome == SG_OUTCOME_BUDGET_EXHAUSTED);
    printf("%s: budget case: %s (%s), %s\n", what, sg_outcome_name(w[0].outcome),
           sg_op_reason_name(w[0].reason), w[0].error);
    CHECK(w[0].attempts == 0);
    CHECK(strstr(w[0].error, "budget ran out while the intent") != NULL);
    char st[64];
    row_state(c, key, st, sizeof(st));
    CHECK(strcmp(st, "done/ok") == 0); /* the intent never took the key */
    sg_ledger_close(l);
    PQfinish(c);
}

/* Cancelled once its intent waits in the database for the held row; the
 * row goes 100 ms later and the intent lands after its operation ended:
 * the ledger resolves it at once (failed, cancelled) - nothing was sent.
 * (Cancelled at a fixed 100 ms, a loaded machine's intent thread had not
 * yet taken the intent: never recorded, the row stayed done/ok.) */
static void cancelled_while_waiting(runner run, const char *what, const char *key) {
    sg_ledger *l;
    PGconn *c = row_held(key, NULL, &l);
    scenario sc = {{key, NULL}, SG_SEC(10), SG_MS(100), true};
    watch steady, w[2];
    run(l, c, &sc, &steady, w);
    steady_ok(what, &steady);
    CHECK(w[0].done && w[0].outcome == SG_OUTCOME_CANCELLED && w[0].attempts == 0);
    CHECK(w[0].first_attempt_at == -1);
    /* the intent landed after the row went (by the end of the steady
     * stream, 600 ms); its resolution is queued by the intent thread */
    sg_ledger_close(l); /* joins the intent thread, flushes the writer */
    char st[64];
    row_state(c, key, st, sizeof(st));
    CHECK(strcmp(st, "failed/cancelled") == 0);
    if (strcmp(st, "failed/cancelled") != 0) {
        fprintf(stderr, "%s: row %s is %s\n", what, key, st);
    }
    PQfinish(c);
}

/* ------------------------------------- cancelled with its answer in */

/* true once @fd (a loop's epoll instance, holding nothing but the intent
 * of the operation added) is readable: the intent has landed and its
 * answer waits for the loop (within 5 s). */
static bool answer_in(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 5000) == 1 && (p.revents & POLLIN) != 0;
}

/* A ledger on the scratch server, its own. */
static sg_ledger *fresh_ledger(void) {
    sg_ledger *l = NULL;
    CHECK(sg_ledger_open(&l, uri, NULL) == 0);
    if (l == NULL) {
        exit(1);
    }
    return l;
}

/* The end of a case below: the operation cancelled, nothing sent, and the
 * intent that landed resolved failed/cancelled. */
static void answered_then_cancelled_check(const char *what, sg_ledger *l, const char *key,
                                          const watch *w) {
    printf("%s: cancelled with its intent's answer in: %s, %" PRIu32
           " attempt(s), %d item(s)\n",
           what, sg_outcome_name(w->outcome), w->attempts, w->items);
    CHECK(w->done && w->outcome == SG_OUTCOME_CANCELLED);
    CHECK(w->attempts == 0 && w->first_attempt_at == -1 && w->items == 0);
    CHECK(strstr(w->error, "cancelled while the intent") != NULL);
    sg_ledger_close(l); /* flushes the resolution */
    PGconn *c = admin();
    char st[64];
    row_state(c, key, st, sizeof(st));
    CHECK(strcmp(st, "failed/cancelled") == 0);
    if (strcmp(st, "failed/cancelled") != 0) {
        fprintf(stderr, "%s: row %s is %s\n", what, key, st);
    }
    PQfinish(c);
}

/* Cancelled after its intent landed but before the loop took the answer
 * (one step sees both): the cancel, asked first, wins - nothing is sent.
 * The managed multi ticks deadlines (the cancel's) before it reads the
 * intents' fds; an HTTP/2 connection reads them first, and started the
 * attempt of an operation its caller had cancelled (1 attempt, then
 * stopped) before sg__lc_intent_ready looked at the cancel. */
static void answered_then_cancelled_curl(const char *key) {
    sg_ledger *l = fresh_ledger();
    sg_ledger_binding b = {l, NULL};
    sg_curl_multi *m;
    CHECK(sg_curl_multi_new(&m, NULL) == 0);
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    CHECK(sg_curl_options_set_on_item(co, curl_item) == 0);
    CHECK(sg_curl_options_set_on_done(co, curl_done) == 0);
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/chat/completions?n=3", server.base);
    SG_AUTO_OPTIONS(po);
    policy(po, key, &b, SG_SEC(10));
    sg_op_options_set_target(po, url);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    watch w;
    memset(&w, 0, sizeof(w));
    w.start = now_ns();
    sg_curl_op *op;
    CHECK(sg_curl_op_new(&op, e, po, co, &w) == 0);
    CHECK(sg_curl_multi_add(m, op) == 0);
    CHECK(sg_op_intent_pending(sg_curl_op_policy(op)));
    CHECK(answer_in(sg_curl_multi_fd(m)));
    CHECK(sg_curl_op_cancel(op) == 0);
    while (sg_curl_multi_running(m) > 0) {
        CHECK(sg_curl_multi_step(m, SG_MS(5)) >= 0);
    }
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    sg_curl_multi_free(m);
    answered_then_cancelled_check("curl", l, key, &w);
}

static void answered_then_cancelled_h2(const char *key) {
    sg_ledger *l = fresh_ledger();
    sg_ledger_binding b = {l, NULL};
    SG_AUTO_H2_CONN_OPTIONS(co);
    CHECK(sg_h2_conn_options_set_host(co, "127.0.0.1") == 0);
    CHECK(sg_h2_conn_options_set_port(co, server.port) == 0);
    /* no link until the attempt: the connection's epoll instance holds
     * only the intent's fd */
    CHECK(sg_h2_conn_options_set_connect_on_demand(co, true) == 0);
    sg_h2_conn *conn;
    CHECK(sg_h2_conn_new(&conn, co) == 0);
    sg_test_h2_req rq;
    memset(&rq, 0, sizeof(rq));
    rq.method = "GET";
    rq.path = "/v1/chat/completions?n=3";
    sg_stream_config sse = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    sg_test_h2_cbs cbs = {.on_item = h2_item, .on_done = h2_done};
    SG_AUTO_OPTIONS(po);
    policy(po, key, &b, SG_SEC(10));
    watch w;
    memset(&w, 0, sizeof(w));
    w.start = now_ns();
    sg_h2_op *op;
    CHECK(sg_test_h2_start(conn, &rq, &sse, po, &cbs, &w, &op) == 0);
    CHECK(sg_op_intent_pending(sg_h2_op_policy(op)));
    CHECK(answer_in(sg_h2_conn_fd(conn)));
    CHECK(sg_h2_op_cancel(op) == 0);
    struct pollfd p = {sg_h2_conn_fd(conn), POLLIN, 0};
    bool ready = true;
    while (sg_h2_conn_running(conn) > 0) {
        CHECK(sg_h2_conn_step(conn, now_ns(), ready, false) >= 0);
        ready = poll(&p, 1, 5) > 0;
    }
    sg_h2_op_free(op);
    sg_h2_conn_free(conn);
    answered_then_cancelled_check("h2", l, key, &w);
}

/* Two operations on one loop, the first's key held by another
 * transaction past its whole budget (1 s), the second's key free: the
 * second's intent goes on beside the first's, so it starts at once and
 * completes ok, its row done; the first ends budget_exhausted with no
 * attempt.  The wait for a row is charged to its own operation alone. */
static void a_slow_intent_holds_up_no_other(runner run, const char *what,
                                            const char *held, const char *free_key) {
    sg_ledger *l;
    PGconn *c = row_held(held, NULL, &l);
    scenario sc = {{held, free_key}, SG_SEC(1), SG_MS(1500), false};
    watch steady, w[2];
    run(l, c, &sc, &steady, w);
    steady_ok(what, &steady);
    CHECK(w[0].done && w[0].outcome == SG_OUTCOME_BUDGET_EXHAUSTED && w[0].attempts == 0);
    printf("%s: beside a held key: free key %s after %.1f ms (first attempt at %.1f ms); "
           "held key %s after %.1f ms\n",
           what, sg_outcome_name(w[1].outcome), (double)w[1].ended_at / 1e6,
           (double)w[1].first_attempt_at / 1e6, sg_outcome_name(w[0].outcome),
           (double)w[0].ended_at / 1e6);
    CHECK(w[1].done && w[1].outcome == SG_OUTCOME_OK && w[1].items == 3);
    CHECK(w[1].attempts == 1 && w[1].first_attempt_at >= 0);
    CHECK(w[1].first_attempt_at < SG_MS(250));
    CHECK(sg_ledger_sync(l, SG_SEC(5)) == 0);
    char st[64];
    row_state(c, free_key, st, sizeof(st));
    CHECK(strcmp(st, "done/ok") == 0);
    row_state(c, held, st, sizeof(st));
    CHECK(strcmp(st, "done/ok") == 0); /* the held key was never taken */
    sg_ledger_close(l);
    PQfinish(c);
}

/* Another worker owns the key: the intent is refused off the loop, the
 * operation ends as refused (intent_refused, SG_EEXIST), nothing sent. */
static void refused_off_the_loop(runner run, const char *what, const char *key) {
    sg_ledger *owner = NULL;
    sg_ledger *l = NULL;
    CHECK(sg_ledger_open(&owner, uri, NULL) == 0);
    CHECK(sg_ledger_open(&l, uri, NULL) == 0);
    CHECK(sg_ledger_intent(owner, key, "GET", "http://127.0.0.1/owned") == 0);
    PGconn *c = admin();
    sql(c, "BEGIN"); /* run() ends it */
    scenario sc = {{key, NULL}, SG_SEC(10), 0, false};
    watch steady, w[2];
    run(l, c, &sc, &steady, w);
    steady_ok(what, &steady);
    CHECK(w[0].done && w[0].outcome == SG_OUTCOME_REFUSED);
    CHECK(w[0].reason == SG_OP_REASON_INTENT_REFUSED);
    CHECK(w[0].observer_error == SG_EEXIST && w[0].attempts == 0);
    CHECK(strstr(w[0].error, "refused by its observer: already exists") != NULL);
    CHECK(sg_ledger_reconcile(owner, key, NULL) == 0);
    sg_ledger_close(l);
    sg_ledger_close(owner);
    PQfinish(c);
}

/* true once a session of the ledger waits for a row lock (within
 * WAITER_WITHIN), asked every 10 ms on a connection of its own. */
static bool wait_for_lock_waiter(void) {
    PGconn *c = admin();
    int64_t t0 = now_ns();
    bool waiting = lock_waiter(c);
    while (!waiting && now_ns() - t0 < WAITER_WITHIN) {
        usleep(10 * 1000);
        waiting = lock_waiter(c);
    }
    PQfinish(c);
    return waiting;
}

/* An operation added to a multi whose intent waits for @key's row, freed
 * with its multi while it waits (a program shutting down): the intent is
 * abandoned as cancelled. */
static void free_while_waiting(sg_ledger *l, const char *key) {
    sg_ledger_binding b = {l, NULL};
    SG_AUTO_OPTIONS(po);
    policy(po, key, &b, SG_SEC(10));
    sg_op_options_set_target(po, "http://127.0.0.1/freed");
    sg_curl_multi *m;
    CHECK(sg_curl_multi_new(&m, NULL) == 0);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, "http://127.0.0.1:1/never");
    sg_curl_op *op;
    SG_AUTO_CURL_OPTIONS(co);
    sg_test_curl_done(co);
    CHECK(sg_curl_op_new(&op, e, po, co, NULL) == 0);
    CHECK(sg_curl_multi_add(m, op) == 0);
    CHECK(sg_op_intent_pending(sg_curl_op_policy(op)));
    /* Freed once the intent is in the database, waiting for the row (an
     * intent still queued when its operation goes is never recorded:
     * the key stays as it was, which is right too, but not this case). */
    CHECK(wait_for_lock_waiter());
    sg_curl_multi_free(m); /* the multi first, then the op: both orders hold */
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
}

/* Freed while its intent waits: once the row goes and the intent lands,
 * it is resolved failed - never left pending by an operation that sent
 * nothing. */
static void freed_while_waiting(const char *key) {
    sg_ledger *l;
    PGconn *c = row_held(key, NULL, &l);
    free_while_waiting(l, key);
    sql(c, "ROLLBACK");
    sg_ledger_close(l); /* the intent lands, is resolved, is committed */
    char st[64];
    row_state(c, key, st, sizeof(st));
    CHECK(strcmp(st, "failed/cancelled") == 0);
    if (strcmp(st, "failed/cancelled") != 0) {
        fprintf(stderr, "freed: row %s is %s\n", key, st);
    }
    PQfinish(c);
}

/* Freed while its intent waits, and the ledger closed while the row is
 * still held: the close waits for the intent no longer than
 * close_timeout_ns (200 ms), not the operation's 10 s budget, then gives
 * it up. */
static void closed_while_an_intent_waits(const char *key) {
    SG_AUTO_LEDGER_OPTIONS(o);
    sg_ledger_options_set_close_timeout(o, SG_MS(200));
    sg_ledger *l;
    PGconn *c = row_held(key, o, &l);
    free_while_waiting(l, key);
    int64_t t0 = now_ns();
    sg_ledger_close(l);
    int64_t took = now_ns() - t0;
    printf("closed while an intent waits for a held row: %.1f ms (close_timeout_ns "
           "200 ms, budget 10 s)\n",
           (double)took / 1e6);
    CHECK(took >= SG_MS(150) && took < SG_MS(200) + SG_MS(250));
    /* The statement given up may still land once the row goes (its
     * backend sees the connection gone only when it answers): the row is
     * then pending, the conservative side, reconciled by hand. */
    sql(c, "ROLLBACK");
    PQfinish(c);
}

static void stop_server(void) {
    fm_stop(&server);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s URI PATH/TO/sg-fakemodel\n", argv[0]);
        return 2;
    }
    uri = argv[1];
    if (fm_start_with(&server, argv[2], NULL) != 0) {
        fprintf(stderr, "cannot start sg-fakemodel\n");
        return 1;
    }
    atexit(stop_server); /* a failed exit(1) must not leave it running */
    if (sg_ledger_init_schema(uri, NULL) != 0) {
        fprintf(stderr, "cannot apply the schema\n");
        return 1;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    waits_without_stalling(run_curl, "curl", "loop-curl-wait");
    waits_without_stalling(run_h2, "h2", "loop-h2-wait");
    budget_ends_while_waiting(run_curl, "curl", "loop-curl-budget");
    budget_ends_while_waiting(run_h2, "h2", "loop-h2-budget");
    cancelled_while_waiting(run_curl, "curl", "loop-curl-cancel");
    cancelled_while_waiting(run_h2, "h2", "loop-h2-cancel");
    answered_then_cancelled_curl("loop-curl-answered");
    answered_then_cancelled_h2("loop-h2-answered");
    a_slow_intent_holds_up_no_other(run_curl, "curl", "loop-curl-slow", "loop-curl-free");
    a_slow_intent_holds_up_no_other(run_h2, "h2", "loop-h2-slow", "loop-h2-free");
    refused_off_the_loop(run_curl, "curl", "loop-curl-refused");
    refused_off_the_loop(run_h2, "h2", "loop-h2-refused");
    freed_while_waiting("loop-curl-freed");
    closed_while_an_intent_waits("loop-closed");
    curl_global_cleanup();
    if (failures != 0) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ledger_pg_loop_test: all passed\n");
    return 0;
}
