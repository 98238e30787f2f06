/*
 * The ledger on a real PostgreSQL server (tests/integration/ledger_pg.sh
 * starts one and passes its URI): the schema applied twice, the whole
 * lifecycle through the public API, ownership between handles and between
 * processes, every call bounded (a row held by another transaction, an
 * operation's budget), attempts and resolutions that do not wait for the
 * database (committed by the handle's writer thread, waited for by
 * sg_ledger_sync, flushed by close), a connection killed under the handle.
 * Usage: ledger_pg_test URI
 */
#define _GNU_SOURCE
#include <streamguard/ledger.h>

#include "sgx/ledger_line.h"

#include <libpq-fe.h>

#include <arpa/inet.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pg_test.h"

#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

typedef struct listing {
    int n;
    char keys[16][64];
    char lines[16][512];
    sg_ledger_entry last;
} listing;

static int collect(const sg_ledger_entry *e, void *user_data) {
    listing *ls = user_data;
    if (ls->n < 16) {
        snprintf(ls->keys[ls->n], sizeof(ls->keys[0]), "%s", e->key);
        CHECK(sgx_ledger_format_unresolved_line(e, ls->lines[ls->n],
                                                sizeof(ls->lines[0])) > 0);
    }
    ls->last = *e;
    ls->last.key = ls->last.method = ls->last.url = NULL; /* not valid after */
    ls->n++;
    return 0;
}

static listing list(sg_ledger *l) {
    listing ls;
    memset(&ls, 0, sizeof(ls));
    CHECK_RV(sg_ledger_list_unresolved(l, collect, &ls), 0);
    return ls;
}

static sg_ledger *open_ledger(int64_t timeout) {
    SG_AUTO_LEDGER_OPTIONS(o);
    sg_ledger_options_set_timeout(o, timeout);
    sg_ledger *l = NULL;
    CHECK_RV(sg_ledger_open(&l, uri, o), 0);
    if (l == NULL) {
        fprintf(stderr, "cannot go on without a ledger\n");
        exit(1);
    }
    return l;
}

static void schema_is_explicit_and_idempotent(void) {
    sg_ledger *l = NULL;
    CHECK_RV(sg_ledger_open(&l, uri, NULL), SG_ESTATE); /* never a side effect */
    CHECK(l == NULL);
    CHECK_RV(sg_ledger_init_schema(uri, NULL), 0);
    CHECK_RV(sg_ledger_init_schema(uri, NULL), 0);
    CHECK_RV(sg_ledger_open(&l, uri, NULL), 0);
    sg_ledger_close(l);
}

static void lifecycle_round_trip(void) {
    sg_ledger *l = open_ledger(0);
    sg_ledger *other = open_ledger(0);
    CHECK_RV(sg_ledger_intent(l, "pg-op-1", "POST", "https://h/v1/chat"), 0);
    CHECK_RV(sg_ledger_intent(l, "pg-op-1", "POST", "https://h/v1/chat"), SG_EEXIST);
    CHECK_RV(sg_ledger_intent(other, "pg-op-1", "POST", "https://h/v1/chat"), SG_EEXIST);
    CHECK_RV(sg_ledger_attempt(l, "pg-op-1", 1, SG_OUTCOME_FIRST_ITEM_TIMEOUT,
                               SG_PHASE_WAIT_FIRST_ITEM, true, 0, true),
             0);
    /* another handle sees it once it is committed */
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
    listing ls = list(other);
    CHECK(ls.n == 1);
    CHECK(strcmp(ls.keys[0], "pg-op-1") == 0);
    CHECK(ls.last.state == SG_LEDGER_PENDING && ls.last.attempts == 1 &&
          ls.last.has_last);
    CHECK(ls.last.last_outcome == SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    CHECK(ls.last.last_phase == SG_PHASE_WAIT_FIRST_ITEM);
    CHECK(ls.last.last_sent && ls.last.last_outcome_unknown);
    CHECK(ls.last.pid == (int32_t)getpid());
    CHECK(ls.last.first_seen_ns > 1700000000LL * 1000000000LL);
    CHECK(strstr(ls.lines[0], "pg-op-1 POST https://h/v1/chat ") == ls.lines[0]);
    CHECK(strstr(ls.lines[0], " 1 first_item_timeout pending") != NULL);

    CHECK_RV(
        sg_ledger_resolve(l, "pg-op-1", SG_LEDGER_UNKNOWN, SG_OUTCOME_FIRST_ITEM_TIMEOUT),
        0);
    CHECK_RV(sg_ledger_resolve(l, "pg-op-1", SG_LEDGER_DONE, SG_OUTCOME_OK), SG_ESTATE);
    CHECK_RV(sg_ledger_attempt(l, "pg-op-1", 2, SG_OUTCOME_OK, SG_PHASE_STREAMING, true,
                               200, false),
             SG_ESTATE);
    ls = list(l);
    CHECK(ls.n == 1 && ls.last.state == SG_LEDGER_UNRESOLVED_UNKNOWN);
    CHECK(ls.last.final_outcome == SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    CHECK(strstr(ls.lines[0], " unknown") != NULL);
    CHECK_RV(sg_ledger_intent(other, "pg-op-1", "POST", "https://h/v1/chat"), SG_EEXIST);

    CHECK_RV(sg_ledger_reconcile(other, "pg-op-1", "refunded by hand"), 0);
    CHECK_RV(sg_ledger_reconcile(other, "pg-op-1", NULL), SG_ENOTFOUND);
    CHECK(list(l).n == 0);

    /* a settled key starts a new operation; done and failed settle it */
    CHECK_RV(sg_ledger_intent(other, "pg-op-1", "POST", "https://h/v1/chat"), 0);
    CHECK_RV(sg_ledger_resolve(other, "pg-op-1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK_RV(sg_ledger_resolve(other, "pg-op-1", SG_LEDGER_DONE, SG_OUTCOME_OK),
             SG_ENOTFOUND);
    CHECK_RV(sg_ledger_sync(other, SG_SEC(5)), 0);
    CHECK_RV(sg_ledger_intent(l, "pg-op-1", "GET", "https://h/again"), 0);
    CHECK_RV(sg_ledger_resolve(l, "pg-op-1", SG_LEDGER_FAILED, SG_OUTCOME_HTTP_ERROR), 0);
    CHECK(list(l).n == 0);

    /* oldest intent first; a dead owner's pending intent stays until reconciled */
    CHECK_RV(sg_ledger_intent(l, "pg-b", "POST", "https://h/b"), 0);
    CHECK_RV(sg_ledger_intent(other, "pg-a", "POST", "https://h/a"), 0);
    CHECK_RV(sg_ledger_intent(l, "pg-c", "POST", "https://h/c"), 0);
    sg_ledger_close(l); /* "dies" without resolving */
    ls = list(other);
    CHECK(ls.n == 3);
    CHECK(strcmp(ls.keys[0], "pg-b") == 0 && strcmp(ls.keys[1], "pg-a") == 0 &&
          strcmp(ls.keys[2], "pg-c") == 0);
    for (int i = 0; i < 3; i++) {
        CHECK_RV(sg_ledger_reconcile(other, ls.keys[i], "owner died"), 0);
    }
    CHECK_RV(sg_ledger_compact(other), 0);
    CHECK_RV(sg_ledger_sync(other, 0), 0);
    CHECK(list(other).n == 0);
    sg_ledger_close(other);
}

/* An owner whose operation was reconciled and whose key another worker
 * took again is fenced off: its late records fail instead of landing on
 * the new owner's operation. */
static void a_late_owner_is_fenced_off(void) {
    sg_ledger *zombie = open_ledger(0);
    sg_ledger *ops = open_ledger(0);
    CHECK_RV(sg_ledger_intent(zombie, "pg-fenced", "POST", "https://h/f"), 0);
    CHECK_RV(sg_ledger_reconcile(ops, "pg-fenced", "owner presumed dead"), 0);
    CHECK_RV(sg_ledger_intent(ops, "pg-fenced", "POST", "https://h/f"), 0);
    /* queued at once; refused by the database, which the next sync and
     * the next intent report */
    CHECK_RV(sg_ledger_attempt(zombie, "pg-fenced", 1, SG_OUTCOME_OK, SG_PHASE_STREAMING,
                               true, 200, false),
             0);
    CHECK_RV(sg_ledger_sync(zombie, SG_SEC(5)), SG_EIO);
    CHECK_RV(sg_ledger_sync(zombie, SG_SEC(5)), 0); /* reported once */
    listing ls = list(ops);
    CHECK(ls.n == 1 && ls.last.state == SG_LEDGER_PENDING && ls.last.attempts == 0);
    /* a resolution is fenced off too; the new owner records as usual, and
     * so may any other handle (unfenced, as on the file ledger) */
    CHECK_RV(sg_ledger_resolve(zombie, "pg-fenced", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK_RV(sg_ledger_sync(zombie, SG_SEC(5)), SG_EIO);
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    CHECK_RV(sg_ledger_get_stats(zombie, &st), 0);
    CHECK(st.sync_failures == 2 && st.unsynced == 0);
    CHECK(list(ops).n == 1);
    CHECK_RV(sg_ledger_attempt(ops, "pg-fenced", 1, SG_OUTCOME_OK, SG_PHASE_STREAMING,
                               true, 200, false),
             0);
    sg_ledger *third = open_ledger(0);
    CHECK_RV(sg_ledger_resolve(third, "pg-fenced", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK_RV(sg_ledger_sync(third, SG_SEC(5)), 0);
    CHECK(list(ops).n == 0);
    /* the zombie's next intent hears of the failures (once), refused; its
     * own new intent then fences it with the key's new generation */
    CHECK_RV(sg_ledger_intent(zombie, "pg-fenced", "POST", "https://h/f"), SG_EIO);
    CHECK_RV(sg_ledger_intent(zombie, "pg-fenced", "POST", "https://h/f"), 0);
    CHECK_RV(sg_ledger_resolve(zombie, "pg-fenced", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK_RV(sg_ledger_sync(zombie, SG_SEC(5)), 0);
    CHECK(list(ops).n == 0);
    sg_ledger_close(third);
    sg_ledger_close(zombie);
    sg_ledger_close(ops);
}

/* A row held by another transaction: the call ends at its bound. */
static void every_call_is_bounded(void) {
    sg_ledger *l = open_ledger(SG_MS(300));
    CHECK_RV(sg_ledger_intent(l, "pg-held", "POST", "https://h/held"), 0);
    CHECK_RV(sg_ledger_resolve(l, "pg-held", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
    PGconn *c = admin();
    sql(c, "BEGIN");
    sql(c, "SELECT * FROM streamguard_ledger_ops WHERE key = 'pg-held' FOR UPDATE");
    int64_t t0 = sg_clock_now(NULL);
    CHECK_RV(sg_ledger_intent(l, "pg-held", "POST", "https://h/held"), SG_ETIMEDOUT);
    int64_t took = sg_clock_now(NULL) - t0;
    CHECK(took >= SG_MS(150) && took < SG_MS(300) + SG_MS(300));

    /* an operation's intent: bounded by its budget, less its floor */
    SG_AUTO_OPTIONS(o);
    sg_op_options_set_budget(o, SG_MS(200));
    sg_op_options_set_method(o, "POST");
    SG_AUTO_OP(op);
    t0 = sg_clock_now(NULL);
    CHECK_RV(sg_op_start(op, o, t0), 0);
    CHECK_RV(sg_ledger_op_intent(l, "pg-held", op, "https://h/held"), SG_ETIMEDOUT);
    took = sg_clock_now(NULL) - t0;
    CHECK(took < SG_MS(200) + SG_MS(100));
    sql(c, "ROLLBACK");
    /* the connection survived the server's statement_timeout */
    CHECK_RV(sg_ledger_intent(l, "pg-held", "POST", "https://h/held"), 0);
    CHECK_RV(sg_ledger_reconcile(l, "pg-held", NULL), 0);
    PQfinish(c);
    sg_ledger_close(l);

    /* the longest bounds the API takes are more than the server's settings
     * hold (INT_MAX ms): clamped, not refused */
    SG_AUTO_LEDGER_OPTIONS(o2);
    sg_ledger_options_set_timeout(o2, SG_DURATION_MAX);
    sg_ledger_options_set_lock_timeout(o2, SG_DURATION_MAX);
    CHECK_RV(sg_ledger_open(&l, uri, o2), 0);
    CHECK_RV(sg_ledger_intent(l, "pg-long", "POST", "https://h/long"), 0);
    CHECK_RV(sg_ledger_reconcile(l, "pg-long", NULL), 0);
    sg_ledger_close(l);
}

/* Intents of different keys go on side by side, each on an intent
 * connection of its own.  One thread's intent waits on a row another
 * transaction holds (up to the handle's 2 s timeout); another thread's
 * operation, on a free key with a 200 ms budget, is recorded at once -
 * the wait for the row is the first intent's alone. */
typedef struct blocked_intent {
    sg_ledger *l;
    const char *key;
    int rv;
} blocked_intent;

static void *blocked_main(void *arg) {
    blocked_intent *b = arg;
    b->rv = sg_ledger_intent(b->l, b->key, "POST", "https://h/held");
    return NULL;
}

static long long count(PGconn *c, const char *q);

/* @key's row settled, so that an intent of it updates the row: one
 * another transaction can hold. */
static void settle_row(sg_ledger *l, const char *key) {
    CHECK_RV(sg_ledger_intent(l, key, "POST", "https://h/held"), 0);
    CHECK_RV(sg_ledger_resolve(l, key, SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
}

/* @key's row held by the transaction open on @c (ROLLBACK frees it). */
static void lock_row(PGconn *c, const char *key) {
    char q[160];
    snprintf(q, sizeof(q),
             "SELECT * FROM streamguard_ledger_ops WHERE key = '%s' FOR UPDATE", key);
    sql(c, q);
}

/* true once @n of the ledger's sessions wait for a row lock (within 2 s). */
static bool lock_waiters(long long n) {
    PGconn *w = admin();
    int64_t until = sg_clock_now(NULL) + SG_SEC(2);
    long long seen = -1;
    while ((seen = count(w, "SELECT count(*) FROM pg_stat_activity "
                            "WHERE application_name = 'streamguard' "
                            "AND wait_event_type = 'Lock'")) < n &&
           sg_clock_now(NULL) < until) {
        usleep(5000);
    }
    PQfinish(w);
    return seen == n;
}

/* An operation's intent of @key with a @budget: its answer, and in *@took
 * how long it took. */
static int op_intent(sg_ledger *l, const char *key, int64_t budget, int64_t *took) {
    SG_AUTO_OPTIONS(o);
    sg_op_options_set_budget(o, budget);
    sg_op_options_set_method(o, "POST");
    SG_AUTO_OP(op);
    int64_t t0 = sg_clock_now(NULL);
    CHECK_RV(sg_op_start(op, o, t0), 0);
    int rv = sg_ledger_op_intent(l, key, op, "https://h/free");
    *took = sg_clock_now(NULL) - t0;
    return rv;
}

static void an_intent_waits_for_no_other_key(void) {
    sg_ledger *l = open_ledger(SG_SEC(2));
    PGconn *c = admin();
    settle_row(l, "pg-side-held");
    sql(c, "BEGIN");
    lock_row(c, "pg-side-held");
    blocked_intent b = {l, "pg-side-held", 1};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, blocked_main, &b) == 0);
    CHECK(lock_waiters(1)); /* the first intent's statement waits on the row */
    int64_t took;
    CHECK_RV(op_intent(l, "pg-side-free", SG_MS(200), &took), 0);
    printf("an intent beside one waiting on a held row: %.1f ms\n", (double)took / 1e6);
    CHECK(took < SG_MS(100));
    sql(c, "ROLLBACK");
    pthread_join(th, NULL);
    /* the first one landed once the row was free */
    CHECK_RV(b.rv, 0);
    CHECK_RV(sg_ledger_reconcile(l, "pg-side-held", NULL), 0);
    CHECK_RV(sg_ledger_reconcile(l, "pg-side-free", NULL), 0);
    PQfinish(c);
    sg_ledger_close(l);
}

/* The intent connections are bounded: with intent_connections 2, both
 * waiting on held rows, a third intent (of a free key) waits for one to
 * come free no longer than its budget - no third connection is opened -
 * and goes on once one is back. */
static void intent_connections_are_bounded(void) {
    SG_AUTO_LEDGER_OPTIONS(o);
    CHECK_RV(
        sg_ledger_options_set_intent_connections(o, SG_LEDGER_INTENT_CONNECTIONS_MAX + 1),
        SG_ERANGE);
    sg_ledger *l = NULL;
    sg_ledger_options_set_timeout(o, SG_SEC(2));
    CHECK_RV(sg_ledger_options_set_intent_connections(o, 2), 0);
    CHECK_RV(sg_ledger_open(&l, uri, o), 0);
    if (l == NULL) {
        exit(1);
    }
    PGconn *c = admin();
    settle_row(l, "pg-bound-1");
    settle_row(l, "pg-bound-2");
    sql(c, "BEGIN");
    lock_row(c, "pg-bound-1");
    lock_row(c, "pg-bound-2");
    blocked_intent b[2] = {{l, "pg-bound-1", 1}, {l, "pg-bound-2", 1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&th[i], NULL, blocked_main, &b[i]) == 0);
    }
    CHECK(lock_waiters(2));
    int64_t took;
    CHECK_RV(op_intent(l, "pg-bound-free", SG_MS(200), &took), SG_ETIMEDOUT);
    CHECK(took >= SG_MS(150) && took < SG_MS(200) + SG_MS(300));
    sql(c, "ROLLBACK");
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK_RV(b[i].rv, 0);
    }
    CHECK_RV(op_intent(l, "pg-bound-free", SG_MS(500), &took), 0);
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_ops "
                   "WHERE key LIKE 'pg-bound-%' AND state = 'pending'") == 3);
    sql(c, "UPDATE streamguard_ledger_ops SET state = 'reconciled' "
           "WHERE key LIKE 'pg-bound-%'");
    PQfinish(c);
    sg_ledger_close(l);
}

static int64_t since(int64_t t0) {
    return sg_clock_monotonic_now(NULL) - t0;
}

static long long count(PGconn *c, const char *q) {
    PGresult *r = PQexec(c, q);
    long long n = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1
                      ? strtoll(PQgetvalue(r, 0, 0), NULL, 10)
                      : -1;
    PQclear(r);
    return n;
}

/* Another transaction holds a row the records need: the attempts and
 * resolutions (the observer's calls, on the event loop) return at once;
 * sg_ledger_sync waits for them, bounded; once the row is free every
 * record is committed, in order, none lost. */
static void records_do_not_wait_for_the_database(void) {
    enum { KEYS = 50 };
    sg_ledger *l = open_ledger(SG_SEC(10));
    char key[KEYS][32];
    for (int i = 0; i < KEYS; i++) {
        snprintf(key[i], sizeof(key[i]), "pg-slow-%d", i);
        CHECK_RV(sg_ledger_intent(l, key[i], "POST", "https://h/slow"), 0);
    }
    PGconn *c = admin();
    sql(c, "BEGIN");
    sql(c, "SELECT * FROM streamguard_ledger_ops WHERE key = 'pg-slow-0' FOR UPDATE");
    int64_t worst = 0;
    for (int i = 0; i < KEYS; i++) {
        int64_t t0 = sg_clock_monotonic_now(NULL);
        CHECK_RV(sg_ledger_attempt(l, key[i], 1, SG_OUTCOME_OK, SG_PHASE_STREAMING, true,
                                   200, false),
                 0);
        CHECK_RV(sg_ledger_resolve(l, key[i], SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
        int64_t took = since(t0);
        worst = took > worst ? took : worst;
    }
    fprintf(stderr, "attempt+resolve with the row held: worst %.3f ms\n",
            (double)worst / 1e6);
    CHECK(worst < SG_MS(20));
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    CHECK_RV(sg_ledger_get_stats(l, &st), 0);
    CHECK(st.unsynced == 2 * KEYS && st.sync_failures == 0);
    int64_t t0 = sg_clock_monotonic_now(NULL);
    CHECK_RV(sg_ledger_sync(l, SG_MS(100)), SG_ETIMEDOUT);
    CHECK(since(t0) >= SG_MS(100) && since(t0) < SG_MS(100) + SG_MS(400));
    CHECK_RV(sg_ledger_sync(l, 0), SG_ETIMEDOUT);
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_ops "
                   "WHERE key LIKE 'pg-slow-%' AND state = 'pending' AND attempts = 0") ==
          KEYS);
    sql(c, "ROLLBACK");
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
    CHECK_RV(sg_ledger_get_stats(l, &st), 0);
    CHECK(st.unsynced == 0 && st.sync_failures == 0);
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_ops "
                   "WHERE key LIKE 'pg-slow-%' AND state = 'done' AND attempts = 1") ==
          KEYS);
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_attempts "
                   "WHERE key LIKE 'pg-slow-%'") == KEYS);

    /* a record the database refuses (no such key) is reported by the next
     * sync and, separately, by the next intent, which records nothing */
    CHECK_RV(sg_ledger_attempt(l, "no-such", 1, SG_OUTCOME_OK, SG_PHASE_STREAMING, true,
                               200, false),
             0);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), SG_EIO);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
    CHECK_RV(sg_ledger_intent(l, "pg-slow-0", "POST", "https://h/slow"), SG_EIO);
    CHECK_RV(sg_ledger_intent(l, "pg-slow-0", "POST", "https://h/slow"), 0);
    /* this handle's own listing and reconcile see its queued records */
    CHECK_RV(sg_ledger_attempt(l, "pg-slow-0", 1, SG_OUTCOME_HTTP_ERROR,
                               SG_PHASE_WAIT_HEADERS, true, 503, false),
             0);
    listing ls = list(l);
    CHECK(ls.n == 1 && ls.last.attempts == 1 && ls.last.last_http_status == 503);
    CHECK_RV(sg_ledger_resolve(l, "pg-slow-0", SG_LEDGER_UNKNOWN, SG_OUTCOME_HTTP_ERROR),
             0);
    CHECK_RV(sg_ledger_reconcile(l, "pg-slow-0", "checked"), 0);
    CHECK(list(l).n == 0);
    PQfinish(c);
    sg_ledger_close(l);
}

/* A batch the server cancels (its statement_timeout, behind a row another
 * transaction holds) is rolled back, and the writer's connection stays
 * usable: the next batch commits.  (The ROLLBACK used to follow the
 * statement_timeout's own set_config in one pipeline, which an aborted
 * transaction refuses: the transaction never ended, and no record after
 * it was ever committed.) */
static void a_cancelled_batch_leaves_the_writer_usable(void) {
    sg_ledger *l = open_ledger(SG_MS(400));
    CHECK_RV(sg_ledger_intent(l, "pg-cx-1", "POST", "https://h/cx"), 0);
    CHECK_RV(sg_ledger_intent(l, "pg-cx-2", "POST", "https://h/cx"), 0);
    PGconn *c = admin();
    sql(c, "BEGIN");
    sql(c, "SELECT * FROM streamguard_ledger_ops WHERE key = 'pg-cx-1' FOR UPDATE");
    CHECK_RV(sg_ledger_resolve(l, "pg-cx-1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    (void)sg_ledger_sync(l, SG_SEC(1)); /* the server cancels the batch */
    sql(c, "ROLLBACK");
    CHECK_RV(sg_ledger_resolve(l, "pg-cx-2", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(3)), 0);
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_ops "
                   "WHERE key = 'pg-cx-2' AND state = 'done'") == 1);
    /* the cancelled one stays pending: listed, to reconcile - never lost */
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_ops "
                   "WHERE key = 'pg-cx-1' AND state = 'pending'") == 1);
    CHECK_RV(sg_ledger_reconcile(l, "pg-cx-1", NULL), 0);
    PQfinish(c);
    sg_ledger_close(l);
}

/* @key is the one operation listed (a new handle's listing): it stays
 * pending, to reconcile - which this does. */
static void listed_alone_then_reconciled(const char *key) {
    sg_ledger *l = open_ledger(0);
    listing ls = list(l);
    CHECK(ls.n == 1 && strcmp(ls.keys[0], key) == 0);
    CHECK_RV(sg_ledger_reconcile(l, key, NULL), 0);
    sg_ledger_close(l);
}

/* sg_ledger_close commits what is queued; when the database cannot take
 * it, close still returns within the handle's timeout, and the operation
 * stays pending (listed, to reconcile): never lost silently. */
static void close_flushes_within_its_bound(void) {
    sg_ledger *l = open_ledger(SG_SEC(5));
    CHECK_RV(sg_ledger_intent(l, "pg-close-1", "POST", "https://h/c"), 0);
    CHECK_RV(sg_ledger_attempt(l, "pg-close-1", 1, SG_OUTCOME_OK, SG_PHASE_STREAMING,
                               true, 200, false),
             0);
    CHECK_RV(sg_ledger_resolve(l, "pg-close-1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    sg_ledger_close(l);
    PGconn *c = admin();
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_ops "
                   "WHERE key = 'pg-close-1' AND state = 'done' AND attempts = 1") == 1);

    l = open_ledger(SG_MS(300));
    CHECK_RV(sg_ledger_intent(l, "pg-close-2", "POST", "https://h/c"), 0);
    sql(c, "BEGIN");
    sql(c, "SELECT * FROM streamguard_ledger_ops WHERE key = 'pg-close-2' FOR UPDATE");
    CHECK_RV(sg_ledger_resolve(l, "pg-close-2", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    int64_t t0 = sg_clock_monotonic_now(NULL);
    sg_ledger_close(l);
    CHECK(since(t0) < SG_MS(300) + SG_MS(300));
    sql(c, "ROLLBACK");
    listed_alone_then_reconciled("pg-close-2");
    PQfinish(c);
}

/* close_timeout_ns bounds the close, however long the commit under way
 * was bounded when it began (timeout_ns, 5 s here): the writer's batch
 * waits on a row another transaction holds; the close gives it up at
 * 200 ms, and the operation stays pending - listed, to reconcile.  (The
 * close waited for the batch's own bound, 5 s from its start.) */
static void close_gives_up_at_close_timeout(void) {
    SG_AUTO_LEDGER_OPTIONS(o);
    CHECK_RV(sg_ledger_options_set_close_timeout(o, -1), SG_EINVAL);
    CHECK_RV(sg_ledger_options_set_close_timeout(o, SG_DURATION_MAX + 1), SG_ERANGE);
    sg_ledger *l = NULL;
    sg_ledger_options_set_timeout(o, SG_SEC(5));
    CHECK_RV(sg_ledger_options_set_close_timeout(o, SG_MS(200)), 0);
    CHECK_RV(sg_ledger_open(&l, uri, o), 0);
    if (l == NULL) {
        exit(1);
    }
    CHECK_RV(sg_ledger_intent(l, "pg-close-3", "POST", "https://h/c"), 0);
    PGconn *c = admin();
    sql(c, "BEGIN");
    lock_row(c, "pg-close-3");
    CHECK_RV(sg_ledger_resolve(l, "pg-close-3", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    CHECK(lock_waiters(1)); /* the writer's batch is under way, waiting */
    int64_t t0 = sg_clock_monotonic_now(NULL);
    sg_ledger_close(l);
    int64_t took = since(t0);
    printf("close with a commit waiting on a held row: %.1f ms (close_timeout_ns "
           "200 ms, timeout_ns 5 s)\n",
           (double)took / 1e6);
    CHECK(took >= SG_MS(150) && took < SG_MS(200) + SG_MS(250));
    sql(c, "ROLLBACK");
    listed_alone_then_reconciled("pg-close-3");
    PQfinish(c);
}

/* The server ends the handle's connection: the next call fails clearly
 * (nothing recorded, so the caller sends nothing), the one after connects
 * again. */
static void lost_connection_refuses_then_reconnects(void) {
    sg_ledger *l = open_ledger(SG_SEC(5));
    CHECK(list(l).n == 0);
    PGconn *c = admin();
    sql(c, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
           "WHERE application_name = 'streamguard' AND pid <> pg_backend_pid()");
    usleep(100 * 1000);
    int rv = sg_ledger_intent(l, "pg-lost", "POST", "https://h/lost");
    CHECK(rv == SG_ECONNRESET);
    CHECK_RV(sg_ledger_intent(l, "pg-after", "POST", "https://h/after"), 0);
    listing ls = list(l);
    CHECK(ls.n == 1 && strcmp(ls.keys[0], "pg-after") == 0);
    CHECK_RV(sg_ledger_reconcile(l, "pg-after", NULL), 0);
    PQfinish(c);
    sg_ledger_close(l);
}

/* Eight processes race for the same 40 keys: each is owned exactly once. */
static void processes_race_each_key_owned_once(void) {
    enum { PROCS = 8, KEYS = 40 };
    pid_t kids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            sg_ledger *l = NULL;
            if (sg_ledger_open(&l, uri, NULL) != 0) {
                _exit(255);
            }
            int won = 0;
            for (int k = 0; k < KEYS; k++) {
                char key[32];
                snprintf(key, sizeof(key), "race-%d", k);
                int rv = sg_ledger_intent(l, key, "POST", "https://h/race");
                if (rv == 0) {
                    won++;
                } else if (rv != SG_EEXIST) {
                    _exit(254);
                }
            }
            sg_ledger_close(l);
            _exit(won);
        }
    }
    int total = 0;
    for (int i = 0; i < PROCS; i++) {
        int st = 0;
        waitpid(kids[i], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) <= KEYS);
        total += WIFEXITED(st) ? WEXITSTATUS(st) : 1000;
    }
    CHECK(total == KEYS);
    sg_ledger *l = open_ledger(0);
    listing ls = list(l);
    CHECK(ls.n == KEYS);
    PGconn *c = admin();
    sql(c, "UPDATE streamguard_ledger_ops SET state = 'reconciled' "
           "WHERE key LIKE 'race-%'");
    PQfinish(c);
    sg_ledger_close(l);
}

/* Connecting is bounded too: a server that never answers, one that is not
 * there, and a schema newer than this library's. */
static void connecting_is_bounded_and_checked(void) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof(a)) == 0 &&
          listen(ls, 8) == 0 && getsockname(ls, (struct sockaddr *)&a, &alen) == 0);
    /* The kernel completes the handshake; nobody ever answers the startup. */
    char silent[128];
    snprintf(silent, sizeof(silent),
             "postgresql://sg@127.0.0.1:%d/sgtest?sslmode=disable", ntohs(a.sin_port));
    SG_AUTO_LEDGER_OPTIONS(o);
    sg_ledger_options_set_timeout(o, SG_MS(300));
    sg_ledger *l = NULL;
    int64_t t0 = sg_clock_now(NULL);
    CHECK_RV(sg_ledger_open(&l, silent, o), SG_ETIMEDOUT);
    int64_t took = sg_clock_now(NULL) - t0;
    CHECK(took >= SG_MS(250) && took < SG_MS(300) + SG_MS(300));
    CHECK_RV(sg_ledger_init_schema(silent, o), SG_ETIMEDOUT);
    close(ls);
    CHECK_RV(sg_ledger_open(&l, "postgresql://sg@/sgtest?host=/nonexistent-dir", o),
             SG_ECONNECT);
    CHECK(l == NULL);

    PGconn *c = admin();
    sql(c, "INSERT INTO streamguard_schema_version (version) VALUES (2)");
    CHECK_RV(sg_ledger_init_schema(uri, NULL), SG_EUNSUPPORTED);
    CHECK_RV(sg_ledger_open(&l, uri, NULL), SG_EUNSUPPORTED);
    sql(c, "DELETE FROM streamguard_schema_version WHERE version = 2");
    CHECK_RV(sg_ledger_init_schema(uri, NULL), 0);
    PQfinish(c);
}

/* Row @row, column @col of @q's answer ("NULL" for a null, "?" when there
 * is none) into @out. */
static void value(PGconn *c, const char *q, int row, int col, char *out, size_t cap) {
    PGresult *r = PQexec(c, q);
    const char *v = "?";
    if (PQresultStatus(r) == PGRES_TUPLES_OK && row < PQntuples(r) &&
        col < PQnfields(r)) {
        v = PQgetisnull(r, row, col) ? "NULL" : PQgetvalue(r, row, col);
    }
    snprintf(out, cap, "%s", v);
    PQclear(r);
}

/* The attempts carry their usage (the columns the schema file adds to
 * version 1): the provider's figures, an estimate's with its unknowns
 * NULL, none at all for an attempt without.  On a database whose schema
 * was applied before the columns, attempts are recorded as before, and
 * once the file is applied again with their usage. */
static void attempts_carry_their_usage(void) {
    static const char q[] =
        "SELECT n, input_tokens, output_tokens, cached_input_tokens, reasoning_tokens, "
        "usage_source FROM streamguard_ledger_attempts WHERE key = 'pg-usage' ORDER BY n";
    PGconn *c = admin();
    sg_ledger *l = open_ledger(0);
    CHECK_RV(sg_ledger_intent(l, "pg-usage", "POST", "https://h/u"), 0);
    sg_op_attempt rec =
        sg_test_attempt(1, SG_OUTCOME_FIRST_ITEM_TIMEOUT, SG_PHASE_WAIT_FIRST_ITEM, 0,
                        (sg_op_usage){1000, 0, -1, -1, SG_USAGE_ESTIMATE});
    CHECK_RV(sg_ledger_attempt_record(l, "pg-usage", &rec), 0);
    rec = sg_test_attempt(2, SG_OUTCOME_OK, SG_PHASE_STREAMING, 200,
                          (sg_op_usage){1000, 35, 200, 30, SG_USAGE_PROVIDER});
    CHECK_RV(sg_ledger_attempt_record(l, "pg-usage", &rec), 0);
    CHECK_RV(sg_ledger_attempt(l, "pg-usage", 3, SG_OUTCOME_OK, SG_PHASE_STREAMING, true,
                               200, false),
             0);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
    static const char *const want[3][6] = {
        {"1", "1000", "0", "NULL", "NULL", "estimate"},
        {"2", "1000", "35", "200", "30", "provider"},
        {"3", "NULL", "NULL", "NULL", "NULL", "NULL"},
    };
    char got[64];
    for (int row = 0; row < 3; row++) {
        for (int col = 0; col < 6; col++) {
            value(c, q, row, col, got, sizeof(got));
            if (strcmp(got, want[row][col]) != 0) {
                fprintf(stderr, "FAIL row %d column %d: %s, want %s\n", row, col, got,
                        want[row][col]);
                failures++;
            }
        }
    }
    CHECK_RV(sg_ledger_resolve(l, "pg-usage", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    sg_ledger_close(l);
    /* a schema from before the usage columns */
    sql(c, "DELETE FROM streamguard_ledger_attempts WHERE key = 'pg-usage'");
    sql(c, "ALTER TABLE streamguard_ledger_attempts DROP COLUMN input_tokens, "
           "DROP COLUMN output_tokens, DROP COLUMN cached_input_tokens, "
           "DROP COLUMN reasoning_tokens, DROP COLUMN usage_source");
    l = open_ledger(0);
    CHECK_RV(sg_ledger_intent(l, "pg-usage", "POST", "https://h/u"), 0);
    rec.n = 1;
    CHECK_RV(sg_ledger_attempt_record(l, "pg-usage", &rec), 0);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
    CHECK(count(c, "SELECT count(*) FROM streamguard_ledger_attempts "
                   "WHERE key = 'pg-usage'") == 1);
    sg_ledger_close(l);
    CHECK_RV(sg_ledger_init_schema(uri, NULL), 0); /* the columns again */
    l = open_ledger(0);
    rec.n = 2;
    CHECK_RV(sg_ledger_attempt_record(l, "pg-usage", &rec), 0);
    CHECK_RV(sg_ledger_sync(l, SG_SEC(5)), 0);
    value(c, q, 0, 5, got, sizeof(got));
    CHECK(strcmp(got, "NULL") == 0); /* recorded without them */
    value(c, q, 1, 2, got, sizeof(got));
    CHECK(strcmp(got, "35") == 0);
    CHECK_RV(sg_ledger_resolve(l, "pg-usage", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    sg_ledger_close(l);
    PQfinish(c);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s URI\n", argv[0]);
        return 2;
    }
    uri = argv[1];
    schema_is_explicit_and_idempotent();
    lifecycle_round_trip();
    a_late_owner_is_fenced_off();
    every_call_is_bounded();
    an_intent_waits_for_no_other_key();
    intent_connections_are_bounded();
    records_do_not_wait_for_the_database();
    a_cancelled_batch_leaves_the_writer_usable();
    close_flushes_within_its_bound();
    close_gives_up_at_close_timeout();
    lost_connection_refuses_then_reconnects();
    processes_race_each_key_owned_once();
    attempts_carry_their_usage();
    connecting_is_bounded_and_checked();
    if (failures != 0) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("ledger_pg_test: all passed\n");
    return 0;
}
