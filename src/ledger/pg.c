/*
 * The ledger on PostgreSQL (libpq): the same calls as the file ledger, for
 * workers on several machines.  One row per idempotency key under its
 * primary key is the whole ownership protocol: an intent is one INSERT ...
 * ON CONFLICT that takes a key only when it is new or settled, so of any
 * number of workers racing for a key exactly one gets a row back, and the
 * others get SG_EEXIST - as the file ledger refuses them.  A worker that
 * dies leaves its row pending: the key stays owned until reconciled.  The
 * row's generation fences the owner: its later records of the key carry
 * it, so a late owner cannot record onto the key's next operation.
 *
 * An intent is one statement in its own implicit transaction, committed
 * before the call returns (the schema: sql/ledger_schema_v1.sql, embedded
 * at build time), on one of the handle's intent connections
 * (opts.intent_connections, lent one to an intent), so an intent waiting
 * for a row holds up no intent of another key.  Attempts and resolutions are queued, in
 * call order, to a writer thread with a connection of its own, which commits those queued
 * together in one transaction: the caller (an event loop, through the
 * observer) never waits for the database for them.  A record it could not
 * commit fails the next intent and the next sg_ledger_sync (SG_EIO); reads
 * and reconciles of the handle wait for its queue first.
 *
 * Every call is bounded: libpq's non-blocking API with poll(2) on our own
 * deadline, and the server's statement_timeout set to a little less than
 * what remains in the same round trip (a pipeline), so the server gives up
 * first and the connection survives.  A connection lost, or a deadline
 * passed on our side, drops the connection (the next call connects again,
 * within its own bound) and fails the call: an intent whose commit was not
 * seen refuses the operation - it may still have committed, and is then
 * listed as pending, never sent unrecorded.
 */
#define _GNU_SOURCE
#include "ledger/pg.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* Rows a listing holds at a time (each at most one URL of 8 KiB). */
#define LIST_CHUNK "256"

static const char schema_sql[] = {
#include "pg_schema_v1.inc"
};

static pg_ledger *state(sg_ledger *l) {
    return l->state;
}

/* -------------------------------------------------------------- fences */

static fence **fence_slot(pg_ledger *p, const char *key) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *c = key; *c != '\0'; c++) {
        h = (h ^ (uint8_t)*c) * 16777619u;
    }
    fence **f = &p->fences[h % FENCE_BUCKETS];
    while (*f != NULL && strcmp((*f)->key, key) != 0) {
        f = &(*f)->next;
    }
    return f;
}

static void fence_drop(pg_ledger *p, const char *key) {
    fence **slot = fence_slot(p, key);
    fence *f = *slot;
    if (f != NULL) {
        *slot = f->next;
        p->ended -= f->ended != 0;
        free(f);
    }
}

/* @f (allocated by the caller for @key) now says @generation. */
static void fence_set(pg_ledger *p, fence *f, int64_t generation) {
    fence_drop(p, f->key);
    fence **slot = fence_slot(p, f->key);
    f->generation = generation;
    f->ended = 0;
    f->next = NULL;
    *slot = f;
}

static void fence_clear(pg_ledger *p) {
    for (size_t i = 0; i < FENCE_BUCKETS; i++) {
        while (p->fences[i] != NULL) {
            fence *f = p->fences[i];
            p->fences[i] = f->next;
            free(f);
        }
    }
}

/* Everything this handle queued is settled (by the handle's bound): what
 * a read, a reconcile or a compaction of this handle must see first. */
static int flush_queue(pg_ledger *p) {
    pthread_mutex_lock(&p->w->mu);
    uint64_t through = p->w->queued;
    pthread_mutex_unlock(&p->w->mu);
    return sg__pg_writer_wait(p->w, through, sg__pg_bound(p, SG_TIME_NEVER));
}

typedef struct after_queue_call {
    int (*fn)(pg_ledger *p, void *arg);
    void *arg;
} after_queue_call;

static int after_queue_locked(sg_ledger *l, void *arg) {
    const after_queue_call *c = arg;
    int rv = flush_queue(state(l));
    return rv != 0 ? rv : c->fn(state(l), c->arg);
}

/* @fn under the handle's mutex, once the handle's queue is settled: its
 * reads, reconciles and compactions come after its own records. */
static int after_queue(sg_ledger *l, int (*fn)(pg_ledger *p, void *arg), void *arg) {
    after_queue_call c = {fn, arg};
    return sg__ledger_with_handle(l, after_queue_locked, &c);
}

/* Ended fences whose resolution is settled go, once as many are ended as
 * were left by the last sweep (O(buckets + fences), amortised O(1) per
 * resolution): the handle keeps one per operation in flight, not one per
 * key it ever used. */
static void fence_sweep(pg_ledger *p) {
    if (p->ended < p->sweep_at) {
        return;
    }
    uint64_t settled = sg__pg_writer_settled(p->w);
    for (size_t i = 0; i < FENCE_BUCKETS; i++) {
        fence **f = &p->fences[i];
        while (*f != NULL) {
            if ((*f)->ended != 0 && (*f)->ended <= settled) {
                fence *gone = *f;
                *f = gone->next;
                p->ended--;
                free(gone);
            } else {
                f = &(*f)->next;
            }
        }
    }
    p->sweep_at = p->ended * 2 > 64 ? p->ended * 2 : 64;
}

/* -------------------------------------------------------------- records */

/* A record's key as a NUL-terminated string (the record's is not). */
static void key_of(const sg__ledger_rec *r, char out[SG_LEDGER_KEY_MAX + 1]) {
    memcpy(out, r->key, r->key_len);
    out[r->key_len] = '\0';
}

/* Without the handle's mutex (it guards only the fences here): an intent
 * holds no lock of the handle while the database answers, so the records
 * of other operations (queued under that mutex) never wait for it.  Each
 * intent has an intent connection to itself: one that waits for a row
 * holds up no intent of another key. */
static int pg_intent(sg_ledger *l, sg__ledger_rec *r, int64_t until) {
    pg_ledger *p = state(l);
    char key[SG_LEDGER_KEY_MAX + 1];
    char pid[16];
    key_of(r, key);
    snprintf(pid, sizeof(pid), "%" PRId32, r->pid);
    until = sg__pg_bound(p, until);
    /* This handle's resolution of the key, still queued: the row is
     * pending until it commits, and the intent would be refused. */
    if (sg__ledger_mutex_lock_until(&l->mu, until) != 0) {
        return SG_ETIMEDOUT; /* a listing held the handle past the bound */
    }
    fence *prev = *fence_slot(p, key);
    uint64_t ended = prev != NULL ? prev->ended : 0;
    pthread_mutex_unlock(&l->mu);
    int rv = ended != 0 ? sg__pg_writer_wait(p->w, ended, until) : 0;
    /* A queued record that failed says the database is failing this
     * handle: refuse this intent (nothing is sent) rather than promise. */
    if (rv == 0) {
        rv = sg__pg_take_failure(p->w);
    }
    if (rv != 0) {
        return rv;
    }
    /* r->method and r->url are the caller's NUL-terminated strings. */
    const char *vals[5] = {key, r->method, r->url, p->host, pid};
    /* Allocated first: an intent that committed always has its fence. */
    fence *f = malloc(sizeof(*f) + r->key_len + 1);
    if (f == NULL) {
        return SG_ENOMEM;
    }
    memcpy(f->key, key, r->key_len + 1);
    PGresult *res;
    /* All of them lent to other intents: one coming back is waited for
     * within this intent's bound, as its statement would be. */
    pg_ledger *c;
    rv = sg__pg_pool_take(p, until, &c);
    if (rv != 0) {
        free(f);
        return rv;
    }
    rv = sg__pg_exec(
        c,
        "INSERT INTO streamguard_ledger_ops AS o (key, method, url, state, host, pid) "
        "VALUES ($1, $2, $3, 'pending', $4, $5) "
        "ON CONFLICT (key) DO UPDATE SET method = EXCLUDED.method, url = EXCLUDED.url, "
        "state = 'pending', generation = o.generation + 1, "
        "intent_seq = nextval('streamguard_ledger_intent_seq'), host = EXCLUDED.host, "
        "pid = EXCLUDED.pid, first_seen = now(), updated = now(), attempts = 0, "
        "last_outcome = NULL, last_phase = NULL, last_http_status = NULL, "
        "last_sent = NULL, last_outcome_unknown = NULL, final_outcome = NULL, "
        "resolved_at = NULL, note = NULL "
        "WHERE o.state IN ('done', 'failed', 'reconciled') RETURNING generation",
        5, vals, until, &res);
    sg__pg_pool_give(p, c);
    if (rv == 0 && PQntuples(res) != 1) {
        rv = SG_EEXIST; /* another worker's intent owns the key */
    }
    if (rv == 0) {
        int64_t gen = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
        pthread_mutex_lock(&l->mu);
        fence_set(p, f, gen);
        pthread_mutex_unlock(&l->mu);
    } else {
        free(f);
    }
    PQclear(res);
    return rv;
}

static int reconcile_row(pg_ledger *p, void *arg) {
    const sg__ledger_rec *r = arg;
    char key[SG_LEDGER_KEY_MAX + 1];
    key_of(r, key);
    char note[SG_LEDGER_NOTE_MAX + 1];
    memcpy(note, r->note, r->note_len);
    note[r->note_len] = '\0';
    const char *vals[2] = {key, note};
    PGresult *res;
    int rv =
        sg__pg_exec(p,
                    "UPDATE streamguard_ledger_ops SET state = 'reconciled', note = $2, "
                    "updated = now() WHERE key = $1 AND state IN ('pending', 'unknown') "
                    "RETURNING 1",
                    2, vals, sg__pg_bound(p, SG_TIME_NEVER), &res);
    if (rv == 0 && PQntuples(res) != 1) {
        rv = SG_ENOTFOUND;
    }
    PQclear(res);
    return rv;
}

/* After this handle's own records of the key. */
static int pg_reconcile(sg_ledger *l, sg__ledger_rec *r) {
    return after_queue(l, reconcile_row, r);
}

/* An attempt or a resolution, under the handle's mutex: refused here when
 * this handle's own resolution of the key is queued or done (as the file
 * ledger's index refuses it), else queued for the writer with the key's
 * fence, so the call returns without waiting for the database. */
static int queue_locked(sg_ledger *l, void *arg) {
    const sg__ledger_rec *r = arg;
    pg_ledger *p = state(l);
    char key[SG_LEDGER_KEY_MAX + 1];
    key_of(r, key);
    fence *f = *fence_slot(p, key);
    if (f != NULL && f->ended != 0) {
        return f->resolution == SG_LEDGER_UNKNOWN ? SG_ESTATE : SG_ENOTFOUND;
    }
    int64_t gen = f != NULL ? f->generation : -1;
    uint64_t seq = 0;
    int rv = sg__pg_enqueue(p->w, r, gen, &seq);
    if (rv == 1) {
        /* No thread: committed here, as before it existed. */
        int64_t until = sg__pg_bound(p, SG_TIME_NEVER);
        rv = r->type == SG__LREC_ATTEMPT ? sg__pg_attempt(p, key, r, gen, until)
                                         : sg__pg_resolve(p, key, r, gen, until);
        if (rv == 0 && f != NULL && r->type == SG__LREC_RESOLVE) {
            /* A failure keeps the fence: a retry must not land on a
             * later owner's operation. */
            fence_drop(p, key);
        }
        return rv;
    }
    if (rv == 0 && f != NULL && r->type == SG__LREC_RESOLVE) {
        /* The owner records nothing after its end. */
        f->ended = seq;
        f->resolution = r->resolution;
        p->ended++;
        fence_sweep(p);
    }
    return rv;
}

/* Attempt, resolve. */
static int pg_record(sg_ledger *l, sg__ledger_rec *r) {
    return sg__ledger_with_handle(l, queue_locked, r);
}

/* -------------------------------------------------------------- listing */

static int64_t col_i64(const PGresult *res, int row, int col) {
    return PQgetisnull(res, row, col) ? 0 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* Calls @cb for each row of one chunk; SG_ECANCELED when it stops. */
static int list_rows(const PGresult *res,
                     int (*cb)(const sg_ledger_entry *e, void *user_data),
                     void *user_data) {
    for (int i = 0; i < PQntuples(res); i++) {
        sg_ledger_entry e = {
            .key = PQgetvalue(res, i, 0),
            .method = PQgetvalue(res, i, 1),
            .url = PQgetvalue(res, i, 2),
            .first_seen_ns = col_i64(res, i, 3) * 1000,
            .last_update_ns = col_i64(res, i, 4) * 1000,
            .pid = (int32_t)col_i64(res, i, 5),
            .state = strcmp(PQgetvalue(res, i, 6), "unknown") == 0
                         ? SG_LEDGER_UNRESOLVED_UNKNOWN
                         : SG_LEDGER_PENDING,
            .attempts = (uint32_t)col_i64(res, i, 7),
            .last_http_status = (int)col_i64(res, i, 10),
            .last_sent = strcmp(PQgetvalue(res, i, 11), "t") == 0,
            .last_outcome_unknown = strcmp(PQgetvalue(res, i, 12), "t") == 0,
        };
        e.has_last = !PQgetisnull(res, i, 8) &&
                     sg_outcome_from_name(PQgetvalue(res, i, 8), &e.last_outcome) == 0 &&
                     sg_phase_from_name(PQgetvalue(res, i, 9), &e.last_phase) == 0;
        if (!PQgetisnull(res, i, 13)) {
            (void)sg_outcome_from_name(PQgetvalue(res, i, 13), &e.final_outcome);
        }
        if (cb(&e, user_data) != 0) {
            return SG_ECANCELED;
        }
    }
    return 0;
}

typedef struct list_args {
    int (*cb)(const sg_ledger_entry *e, void *user_data);
    void *user_data;
} list_args;

/* One snapshot (a cursor in a read-only transaction), read a chunk at a
 * time so memory stays bounded however many rows are unresolved. */
static int list_snapshot(pg_ledger *p, void *arg) {
    const list_args *a = arg;
    int64_t until = sg__pg_bound(p, SG_TIME_NEVER);
    PGresult *res;
    int rv = sg__pg_begin(p, "BEGIN READ ONLY", until);
    if (rv == 0) {
        rv = sg__pg_run(
            p,
            "DECLARE sg_unresolved NO SCROLL CURSOR FOR "
            "SELECT key, method, url, "
            "(extract(epoch FROM first_seen) * 1000000)::bigint, "
            "(extract(epoch FROM updated) * 1000000)::bigint, pid, state, attempts, "
            "last_outcome, last_phase, COALESCE(last_http_status, 0), "
            "COALESCE(last_sent, false), COALESCE(last_outcome_unknown, false), "
            "final_outcome FROM streamguard_ledger_ops "
            "WHERE state IN ('pending', 'unknown') ORDER BY intent_seq",
            0, NULL, until, &res);
        PQclear(res);
    }
    while (rv == 0) {
        rv = sg__pg_run(p, "FETCH " LIST_CHUNK " FROM sg_unresolved", 0, NULL, until,
                        &res);
        if (rv == 0) {
            int rows = PQntuples(res);
            rv = list_rows(res, a->cb, a->user_data);
            if (rv == 0 && rows == 0) {
                PQclear(res);
                break;
            }
        }
        PQclear(res);
    }
    if (p->conn != NULL) {
        int end = sg__pg_run(p, rv == 0 ? "COMMIT" : "ROLLBACK", 0, NULL, until, &res);
        PQclear(res);
        if (rv == 0) {
            rv = end;
        }
    }
    return rv;
}

static int pg_list(sg_ledger *l, int (*cb)(const sg_ledger_entry *e, void *user_data),
                   void *user_data) {
    /* What this handle recorded is listed: its queue is committed first. */
    list_args a = {cb, user_data};
    return after_queue(l, list_snapshot, &a);
}

/* Settled rows go, with their attempts: what file compaction drops. */
static int delete_settled(pg_ledger *p, void *arg) {
    (void)arg;
    PGresult *res;
    int rv = sg__pg_exec(p,
                         "DELETE FROM streamguard_ledger_ops "
                         "WHERE state IN ('done', 'failed', 'reconciled')",
                         0, NULL, sg__pg_bound(p, SG_TIME_NEVER), &res);
    PQclear(res);
    return rv;
}

static int pg_compact(sg_ledger *l) {
    return after_queue(l, delete_settled, NULL);
}

static int stats_locked(sg_ledger *l, void *arg) {
    sg__pg_stats(l, arg);
    return 0;
}

/* Nothing is replayed; unsynced: the records queued, not committed. */
static int pg_stats(sg_ledger *l, sg_ledger_stats *out) {
    return sg__ledger_with_handle(l, stats_locked, out);
}

/* ------------------------------------------------------------ open, close */

void sg__pg_free(pg_ledger *p) {
    if (p != NULL) {
        sg__pg_writer_close(p, 0); /* pg_close closed it; else nothing queued */
        sg__pg_pool_free(p);
        fence_clear(p);
        sg__pg_drop(p);
        if (p->stop_owned) {
            close(p->stop_fd);
        }
        free(p->location);
        free(p);
    }
}

/* The intent threads are joined first (they record through the handle),
 * then the writer commits what is queued; neither is waited for longer
 * than close_timeout_ns (its default applied at open): what is under way
 * then is given up. */
static void pg_close(sg_ledger *l) {
    int64_t until = sg_time_add(sg_clock_monotonic_now(NULL), l->opts.close_timeout_ns);
    sg__ledger_intents_close(l, until);
    pg_ledger *p = state(l);
    sg__pg_writer_close(p, until);
    sg__pg_free(p);
    l->state = NULL;
}

static void pg_interrupt(sg_ledger *l) {
    sg__pg_interrupt(state(l));
}

/* The handle's state apart from @l: its connection (checked), its writer
 * and the writer's connection (opened by its first batch), its intents'
 * connections. */
static int pg_connect_all(pg_ledger *p, const char *location) {
    p->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    p->stop_owned = p->stop_fd >= 0;
    int rv = p->stop_owned ? 0 : SG_ESYS;
    if (rv == 0) {
        rv = sg__pg_connect(p, sg__pg_bound(p, SG_TIME_NEVER), true);
    }
    if (rv == 0) {
        rv = sg__pg_writer_init(p);
    }
    if (rv == 0) {
        p->w->conn = sg__pg_new(location, &p->opts);
        rv = p->w->conn != NULL ? 0 : SG_ENOMEM;
    }
    if (rv == 0) {
        p->w->conn->stop_fd = p->stop_fd;
        /* The intents' first connection: the one already made (checked);
         * reads, reconciles and compactions get one of their own when
         * they first need it. */
        rv = sg__pg_pool_init(p);
    }
    return rv;
}

static int pg_open(sg_ledger *l, const char *location) {
    pg_ledger *p = sg__pg_new(location, &l->opts);
    if (p == NULL) {
        return SG_ENOMEM;
    }
    int rv = pg_connect_all(p, location);
    if (rv == 0 && sg__ledger_intents_init(l, p->opts.intent_connections) != 0) {
        rv = SG_ENOMEM;
    }
    if (rv != 0) {
        sg__pg_free(p);
        return rv;
    }
    /* Of the handle, only the mutex, the options and the intent threads
     * are used here; the rest is the file's. */
    l->state = p;
    l->opts = p->opts;
    return 0;
}

static int pg_init_schema(const char *location, const sg_ledger_options *opts) {
    pg_ledger *p = sg__pg_new(location, opts);
    if (p == NULL) {
        return SG_ENOMEM;
    }
    int64_t until = sg__pg_bound(p, SG_TIME_NEVER);
    int rv = sg__pg_connect(p, until, false);
    if (rv == 0) {
        rv = sg__pg_run_script(p, schema_sql, until);
    }
    sg__pg_free(p);
    return rv;
}

const sg__ledger_backend sg__ledger_pg_backend = {
    .name = "postgresql",
    .open = pg_open,
    .init_schema = pg_init_schema,
    .close = pg_close,
    .interrupt = pg_interrupt,
    .intent = pg_intent,
    .attempt = pg_record,
    .resolve = pg_record,
    .reconcile = pg_reconcile,
    .list = pg_list,
    .compact = pg_compact,
    .sync = sg__pg_sync,
    .stats = pg_stats,
};
