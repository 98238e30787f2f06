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
 * at build time).  Attempts and resolutions are queued, in call order, to
 * a writer thread with a connection of its own, which commits those queued
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
#include <unistd.h>

#define DEFAULT_TIMEOUT SG_SEC(10)
/* Rows a listing holds at a time (each at most one URL of 8 KiB). */
#define LIST_CHUNK "256"
/* Records the writer commits in one transaction, at most. */
#define BATCH_MAX 256
/* Records queued and not committed, at most: beyond, SG_ETOOMANY. */
#define QUEUE_MAX 65536

static const char schema_sql[] = {
#include "pg_schema_v1.inc"
};

bool sg__ledger_is_pg(const char *location) {
    return strncmp(location, "postgresql://", 13) == 0 ||
           strncmp(location, "postgres://", 11) == 0;
}

static pg_ledger *state(sg_ledger *l) {
    return l->db_state;
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

/* -------------------------------------------------------------- writer */

static void free_jobs(job *j) {
    while (j != NULL) {
        job *next = j->next;
        free(j);
        j = next;
    }
}

static int pg_attempt(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
                      int64_t until);
static int pg_resolve(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
                      int64_t until);

/* Commits @batch (in queue order) in one transaction by @stop_by (and the
 * handle's bound).  Returns how many of its records failed: all of them
 * when the transaction did not commit (or its commit was not seen), else
 * those the database refused (fenced off, resolved, unknown key), which
 * change nothing. */
/* Opens a transaction with @sql ("BEGIN ...") by @until.  A connection
 * that died while idle (a server restarted, a backend terminated) fails
 * the BEGIN, which did nothing: one more connection may take it. */
static int begin_tx(pg_ledger *p, const char *sql, int64_t until) {
    PGresult *res;
    int rv = sg__pg_exec(p, sql, 0, NULL, until, &res);
    PQclear(res);
    if (rv == SG_ECONNRESET) {
        rv = sg__pg_exec(p, sql, 0, NULL, until, &res);
        PQclear(res);
    }
    return rv;
}

static uint64_t commit_batch(pg_ledger *b, job *batch, int64_t stop_by) {
    int64_t until = sg__pg_bound(b, stop_by);
    uint64_t n = 0;
    uint64_t refused = 0;
    PGresult *res;
    int rv = begin_tx(b, "BEGIN", until);
    bool open = rv == 0;
    for (job *j = batch; j != NULL; j = j->next) {
        n++;
        if (rv != 0) {
            continue;
        }
        int r = j->rec.type == SG__LREC_ATTEMPT
                    ? pg_attempt(b, j->key, &j->rec, j->generation, until)
                    : pg_resolve(b, j->key, &j->rec, j->generation, until);
        if (r == SG_ESTATE || r == SG_ENOTFOUND) {
            refused++; /* the statement ran and changed nothing */
        } else if (r != 0) {
            rv = r; /* the transaction is aborted, or the connection gone */
        }
    }
    if (open && b->conn != NULL) {
        int end = sg__pg_run(b, rv == 0 ? "COMMIT" : "ROLLBACK", 0, NULL, until, &res);
        PQclear(res);
        if (rv == 0) {
            rv = end;
        }
    }
    return rv == 0 ? refused : n;
}

static void *writer_main(void *arg) {
    writer *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->head == NULL && !w->stop) {
            pthread_cond_wait(&w->work, &w->mu);
        }
        if (w->head == NULL) {
            break; /* stopping, and nothing is left */
        }
        job *batch = w->head;
        job *last = batch;
        for (int i = 1; i < BATCH_MAX && last->next != NULL; i++) {
            last = last->next;
        }
        w->head = last->next;
        if (w->head == NULL) {
            w->tail = NULL;
        }
        last->next = NULL;
        int64_t stop_by = w->stop ? w->stop_by : SG_TIME_NEVER;
        pthread_mutex_unlock(&w->mu);
        uint64_t failed = commit_batch(w->conn, batch, stop_by);
        uint64_t through = last->seq;
        free_jobs(batch);
        pthread_mutex_lock(&w->mu);
        w->settled = through;
        w->failures += failed;
        pthread_cond_broadcast(&w->done);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Queues @r (fenced by @gen) for the writer: 0 and its number in *@seq;
 * 1 when the thread cannot be started (the caller records it itself, as
 * before); SG_ENOMEM, or SG_ETOOMANY when QUEUE_MAX records wait. */
static int enqueue(writer *w, const sg__ledger_rec *r, int64_t gen, uint64_t *seq) {
    job *j = malloc(sizeof(*j));
    if (j == NULL) {
        return SG_ENOMEM;
    }
    memcpy(j->key, r->key, r->key_len);
    j->key[r->key_len] = '\0';
    j->rec = *r;
    j->rec.key = j->key;
    j->generation = gen;
    j->next = NULL;
    int rv = 0;
    pthread_mutex_lock(&w->mu);
    if (w->queued - w->settled >= QUEUE_MAX) {
        rv = SG_ETOOMANY;
    } else if (!w->started) {
        w->started = sg__ledger_spawn(&w->thread, writer_main, w) == 0;
        rv = w->started ? 0 : 1;
    }
    if (rv == 0) {
        j->seq = *seq = ++w->queued;
        if (w->tail != NULL) {
            w->tail->next = j;
        } else {
            w->head = j;
        }
        w->tail = j;
        pthread_cond_signal(&w->work);
    }
    pthread_mutex_unlock(&w->mu);
    if (rv != 0) {
        free(j);
    }
    return rv;
}

/* Waits until the first @seq records are settled, by @until: 0 or
 * SG_ETIMEDOUT. */
static int writer_wait(writer *w, uint64_t seq, int64_t until) {
    int rv = 0;
    pthread_mutex_lock(&w->mu);
    while (w->settled < seq && rv == 0) {
        rv = sg__ledger_wait_until(&w->done, &w->mu, until);
    }
    pthread_mutex_unlock(&w->mu);
    return rv;
}

/* Everything this handle queued is settled (by the handle's bound): what
 * a read, a reconcile or a compaction of this handle must see first. */
static int flush_queue(pg_ledger *p) {
    pthread_mutex_lock(&p->w->mu);
    uint64_t through = p->w->queued;
    pthread_mutex_unlock(&p->w->mu);
    return writer_wait(p->w, through, sg__pg_bound(p, SG_TIME_NEVER));
}

static uint64_t writer_settled(writer *w) {
    pthread_mutex_lock(&w->mu);
    uint64_t settled = w->settled;
    pthread_mutex_unlock(&w->mu);
    return settled;
}

/* Ended fences whose resolution is settled go, once as many are ended as
 * were left by the last sweep (O(buckets + fences), amortised O(1) per
 * resolution): the handle keeps one per operation in flight, not one per
 * key it ever used. */
static void fence_sweep(pg_ledger *p) {
    if (p->ended < p->sweep_at) {
        return;
    }
    uint64_t settled = writer_settled(p->w);
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

static int writer_init(pg_ledger *p) {
    writer *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return SG_ENOMEM;
    }
    if (pthread_mutex_init(&w->mu, NULL) != 0) {
        free(w);
        return SG_ENOMEM;
    }
    if (pthread_cond_init(&w->work, NULL) != 0) {
        pthread_mutex_destroy(&w->mu);
        free(w);
        return SG_ENOMEM;
    }
    if (sg__ledger_cond_init(&w->done) != 0) {
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return SG_ENOMEM;
    }
    p->w = w;
    return 0;
}

static void pg_free(pg_ledger *p);

/* Commits what is queued by the handle's bound from now (what the thread
 * has not committed by then fails and is lost: the operations stay
 * pending), then joins the thread. */
static void writer_close(pg_ledger *p) {
    writer *w = p->w;
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    w->stop_by = sg__pg_bound(p, SG_TIME_NEVER);
    pthread_cond_signal(&w->work);
    bool started = w->started;
    pthread_mutex_unlock(&w->mu);
    if (started) {
        pthread_join(w->thread, NULL);
    }
    free_jobs(w->head);
    pg_free(w->conn);
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->mu);
    free(w);
    p->w = NULL;
}

/* Before an intent: SG_EIO when a queued record failed since an intent
 * last heard of it (then it has), else 0. */
static int take_failure(writer *w) {
    pthread_mutex_lock(&w->mu);
    int rv = w->told_intent < w->failures ? SG_EIO : 0;
    w->told_intent = w->failures;
    pthread_mutex_unlock(&w->mu);
    return rv;
}

static int pg_sync(sg_ledger *l, int64_t until) {
    writer *w = ((pg_ledger *)l->db_state)->w;
    int rv = 0;
    pthread_mutex_lock(&w->mu);
    uint64_t through = w->queued;
    while (w->settled < through && rv == 0) {
        rv = sg__ledger_wait_until(&w->done, &w->mu, until);
    }
    if (w->told_sync < w->failures) {
        w->told_sync = w->failures;
        rv = SG_EIO;
    }
    pthread_mutex_unlock(&w->mu);
    return rv;
}

static void pg_stats(sg_ledger *l, sg_ledger_stats *out) {
    writer *w = ((pg_ledger *)l->db_state)->w;
    pthread_mutex_lock(&w->mu);
    out->unsynced = w->queued - w->settled;
    out->sync_failures = w->failures;
    pthread_mutex_unlock(&w->mu);
}

/* -------------------------------------------------------------- records */

/* A record's key as a NUL-terminated string (the record's is not). */
static void key_of(const sg__ledger_rec *r, char out[SG_LEDGER_KEY_MAX + 1]) {
    memcpy(out, r->key, r->key_len);
    out[r->key_len] = '\0';
}

/* Without the handle's mutex (it guards only the fences here): an intent
 * holds no lock of the handle while the database answers, so the records
 * of other operations (queued under that mutex) never wait for it.
 * Intents take turns on the intent connection instead. */
static int pg_intent(sg_ledger *l, const sg__ledger_rec *r, int64_t until) {
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
    int rv = ended != 0 ? writer_wait(p->w, ended, until) : 0;
    /* A queued record that failed says the database is failing this
     * handle: refuse this intent (nothing is sent) rather than promise. */
    if (rv == 0) {
        rv = take_failure(p->w);
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
    /* Another thread's intent has the connection: its turn is waited for
     * within this intent's bound, as its statement would be. */
    if (sg__ledger_mutex_lock_until(&p->ic_mu, until) != 0) {
        free(f);
        return SG_ETIMEDOUT;
    }
    rv = sg__pg_exec(
        p->ic,
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
    pthread_mutex_unlock(&p->ic_mu);
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

/* 0 rows changed: SG_ESTATE when the key is resolved unknown, or when a
 * later intent took it (its generation is not @gen); else SG_ENOTFOUND.
 * @res: (changed count, state, generation). */
static int changed(const PGresult *res, int64_t gen) {
    if (PQntuples(res) != 1) {
        return SG_EIO;
    }
    if (atoi(PQgetvalue(res, 0, 0)) > 0) {
        return 0;
    }
    if (PQgetisnull(res, 0, 1)) {
        return SG_ENOTFOUND;
    }
    const char *st = PQgetvalue(res, 0, 1);
    bool live = strcmp(st, "pending") == 0 || strcmp(st, "unknown") == 0;
    if (live && gen >= 0 && strtoll(PQgetvalue(res, 0, 2), NULL, 10) != gen) {
        return SG_ESTATE;
    }
    return strcmp(st, "unknown") == 0 ? SG_ESTATE : SG_ENOTFOUND;
}

/* An attempt's or a resolution's statement, fenced by $@n (the generation
 * this handle owns the key with, or NULL: another handle's key, unfenced,
 * as the file ledger's); its result is (changed count, state, generation). */
static int exec_update(pg_ledger *p, const char *sql, int n, const char **vals, int64_t g,
                       int64_t until) {
    char gen[24];
    snprintf(gen, sizeof(gen), "%" PRId64, g);
    vals[n - 1] = g >= 0 ? gen : NULL;
    PGresult *res;
    int rv = sg__pg_exec(p, sql, n, vals, until, &res);
    if (rv == 0) {
        rv = changed(res, g);
    }
    PQclear(res);
    return rv;
}

static int pg_attempt(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
                      int64_t until) {
    char n[16], status[8];
    snprintf(n, sizeof(n), "%" PRIu32, r->n);
    snprintf(status, sizeof(status), "%u", (unsigned)r->http_status);
    const char *vals[8] = {
        key,
        n,
        sg_outcome_name((sg_outcome)r->outcome),
        sg_phase_name((sg_phase)r->phase),
        (r->flags & SG__LATT_SENT) != 0 ? "true" : "false",
        status,
        (r->flags & SG__LATT_UNKNOWN) != 0 ? "true" : "false",
        NULL,
    };
    return exec_update(
        p,
        "WITH cur AS (SELECT state, generation FROM streamguard_ledger_ops "
        "WHERE key = $1), "
        "up AS (UPDATE streamguard_ledger_ops SET "
        "attempts = GREATEST(attempts, $2::integer), last_outcome = $3, "
        "last_phase = $4, last_sent = $5::boolean, "
        "last_http_status = NULLIF($6::integer, 0), "
        "last_outcome_unknown = $7::boolean, updated = now() "
        "WHERE key = $1 AND state = 'pending' "
        "AND ($8::bigint IS NULL OR generation = $8::bigint) RETURNING generation), "
        "ins AS (INSERT INTO streamguard_ledger_attempts (key, generation, n, "
        "outcome, phase, sent, http_status, outcome_unknown) "
        "SELECT $1, generation, $2::integer, $3, $4, $5::boolean, "
        "NULLIF($6::integer, 0), $7::boolean FROM up RETURNING 1) "
        "SELECT (SELECT count(*) FROM ins), (SELECT state FROM cur), "
        "(SELECT generation FROM cur)",
        8, vals, gen, until);
}

static int pg_resolve(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
                      int64_t until) {
    const char *vals[4] = {
        key,
        sg_ledger_resolution_name((sg_ledger_resolution)r->resolution),
        sg_outcome_name((sg_outcome)r->outcome),
        NULL,
    };
    return exec_update(
        p,
        "WITH cur AS (SELECT state, generation FROM streamguard_ledger_ops "
        "WHERE key = $1), "
        "up AS (UPDATE streamguard_ledger_ops SET state = $2, "
        "final_outcome = $3, resolved_at = now(), updated = now() "
        "WHERE key = $1 AND state = 'pending' "
        "AND ($4::bigint IS NULL OR generation = $4::bigint) RETURNING 1) "
        "SELECT (SELECT count(*) FROM up), (SELECT state FROM cur), "
        "(SELECT generation FROM cur)",
        4, vals, gen, until);
}

static int pg_reconcile(pg_ledger *p, const char *key, const sg__ledger_rec *r) {
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

/* An attempt or a resolution: refused here when this handle's own
 * resolution of the key is queued or done (as the file ledger's index
 * refuses it), else queued for the writer with the key's fence, so the
 * call returns without waiting for the database. */
static int queue_update(pg_ledger *p, const char *key, const sg__ledger_rec *r) {
    fence *f = *fence_slot(p, key);
    if (f != NULL && f->ended != 0) {
        return f->resolution == SG_LEDGER_UNKNOWN ? SG_ESTATE : SG_ENOTFOUND;
    }
    int64_t gen = f != NULL ? f->generation : -1;
    uint64_t seq = 0;
    int rv = enqueue(p->w, r, gen, &seq);
    if (rv == 1) {
        /* No thread: committed here, as before it existed. */
        int64_t until = sg__pg_bound(p, SG_TIME_NEVER);
        rv = r->type == SG__LREC_ATTEMPT ? pg_attempt(p, key, r, gen, until)
                                         : pg_resolve(p, key, r, gen, until);
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

static int pg_update(sg_ledger *l, const sg__ledger_rec *r) {
    pg_ledger *p = state(l);
    char key[SG_LEDGER_KEY_MAX + 1];
    key_of(r, key);
    switch (r->type) {
    case SG__LREC_ATTEMPT:
    case SG__LREC_RESOLVE:
        return queue_update(p, key, r);
    case SG__LREC_RECONCILE: {
        /* After this handle's own records of the key. */
        int rv = flush_queue(p);
        return rv != 0 ? rv : pg_reconcile(p, key, r);
    }
    default:
        return SG_EINVAL;
    }
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

/* One snapshot (a cursor in a read-only transaction), read a chunk at a
 * time so memory stays bounded however many rows are unresolved. */
static int pg_list(sg_ledger *l, int (*cb)(const sg_ledger_entry *e, void *user_data),
                   void *user_data) {
    pg_ledger *p = state(l);
    /* What this handle recorded is listed: its queue is committed first. */
    int rv = flush_queue(p);
    if (rv != 0) {
        return rv;
    }
    int64_t until = sg__pg_bound(p, SG_TIME_NEVER);
    PGresult *res;
    rv = begin_tx(p, "BEGIN READ ONLY", until);
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
            rv = list_rows(res, cb, user_data);
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

/* Settled rows go, with their attempts: what file compaction drops. */
static int pg_compact(sg_ledger *l) {
    pg_ledger *p = state(l);
    int rv = flush_queue(p);
    if (rv != 0) {
        return rv;
    }
    PGresult *res;
    rv = sg__pg_exec(p,
                     "DELETE FROM streamguard_ledger_ops "
                     "WHERE state IN ('done', 'failed', 'reconciled')",
                     0, NULL, sg__pg_bound(p, SG_TIME_NEVER), &res);
    PQclear(res);
    return rv;
}

/* ------------------------------------------------------------ open, close */

static void pg_free(pg_ledger *p) {
    if (p != NULL) {
        writer_close(p);
        if (p->ic != NULL) {
            pg_free(p->ic);
            pthread_mutex_destroy(&p->ic_mu);
        }
        fence_clear(p);
        sg__pg_drop(p);
        free(p->location);
        free(p);
    }
}

static void pg_close(sg_ledger *l) {
    pg_free(state(l));
    l->db_state = NULL;
}

static const sg__ledger_backend pg_backend = {
    "postgresql", pg_close, pg_intent, pg_update, pg_list, pg_compact, pg_sync, pg_stats,
};

static pg_ledger *pg_new(const char *location, const sg_ledger_options *opts) {
    pg_ledger *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    p->location = strdup(location);
    if (p->location == NULL) {
        free(p);
        return NULL;
    }
    p->opts = *opts;
    if (p->opts.timeout_ns == 0) {
        p->opts.timeout_ns = DEFAULT_TIMEOUT;
    }
    if (gethostname(p->host, sizeof(p->host)) != 0) {
        p->host[0] = '\0';
    }
    p->host[sizeof(p->host) - 1] = '\0';
    return p;
}

int sg__ledger_pg_open(sg_ledger **out, const char *location,
                       const sg_ledger_options *opts) {
    pg_ledger *p = pg_new(location, opts);
    if (p == NULL) {
        return SG_ENOMEM;
    }
    int rv = sg__pg_connect(p, sg__pg_bound(p, SG_TIME_NEVER), true);
    if (rv == 0) {
        rv = writer_init(p);
    }
    if (rv == 0) {
        /* The writer's connection: opened by its first batch. */
        p->w->conn = pg_new(location, &p->opts);
        rv = p->w->conn != NULL ? 0 : SG_ENOMEM;
    }
    if (rv == 0) {
        /* The intents' connection: the one already made (checked); reads,
         * reconciles and compactions get one of their own when they first
         * need it. */
        p->ic = pg_new(location, &p->opts);
        if (p->ic == NULL || pthread_mutex_init(&p->ic_mu, NULL) != 0) {
            free(p->ic != NULL ? p->ic->location : NULL);
            free(p->ic);
            p->ic = NULL;
            rv = SG_ENOMEM;
        } else {
            p->ic->conn = p->conn;
            p->conn = NULL;
        }
    }
    if (rv != 0) {
        pg_free(p);
        return rv;
    }
    /* The struct is the file ledger's too; only db and mu are used here. */
    sg_ledger *l = calloc(1, sizeof(*l));
    if (l == NULL || pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        pg_free(p);
        return SG_ENOMEM;
    }
    if (sg__ledger_intents_init(l) != 0) {
        pthread_mutex_destroy(&l->mu);
        free(l);
        pg_free(p);
        return SG_ENOMEM;
    }
    l->db = &pg_backend;
    l->db_state = p;
    l->dir_fd = l->lock_fd = l->data_fd = -1;
    l->opts = p->opts;
    *out = l;
    return 0;
}

int sg__ledger_pg_init_schema(const char *location, const sg_ledger_options *opts) {
    pg_ledger *p = pg_new(location, opts);
    if (p == NULL) {
        return SG_ENOMEM;
    }
    int64_t until = sg__pg_bound(p, SG_TIME_NEVER);
    int rv = sg__pg_connect(p, until, false);
    if (rv == 0) {
        rv = sg__pg_run_script(p, schema_sql, until);
    }
    pg_free(p);
    return rv;
}
