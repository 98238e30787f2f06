/*
 * The PostgreSQL ledger's writer thread (pg.h): attempts and resolutions
 * queued in call order by pg.c, committed on a connection of the thread's
 * own, those queued together in one transaction, so the caller (an event
 * loop, through the observer) never waits for the database for them; and
 * the statements that record them.
 */
#define _GNU_SOURCE
#include "ledger/pg.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Records the writer commits in one transaction, at most. */
#define BATCH_MAX 256
/* Records queued and not committed, at most: beyond, SG_ETOOMANY. */
#define QUEUE_MAX 65536

/* ------------------------------------------------------------ statements */

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

/* The attempt statement, with @cols and @vals (its usage's, from $8 on,
 * the fence after them) when the table has the usage columns. */
#define ATTEMPT_SQL(cols, vals, fence)                                      \
    "WITH cur AS (SELECT state, generation FROM streamguard_ledger_ops "    \
    "WHERE key = $1), "                                                     \
    "up AS (UPDATE streamguard_ledger_ops SET "                             \
    "attempts = GREATEST(attempts, $2::integer), last_outcome = $3, "       \
    "last_phase = $4, last_sent = $5::boolean, "                            \
    "last_http_status = NULLIF($6::integer, 0), "                           \
    "last_outcome_unknown = $7::boolean, updated = now() "                  \
    "WHERE key = $1 AND state = 'pending' "                                 \
    "AND (" fence "::bigint IS NULL OR generation = " fence "::bigint) "    \
    "RETURNING generation), "                                               \
    "ins AS (INSERT INTO streamguard_ledger_attempts (key, generation, n, " \
    "outcome, phase, sent, http_status, outcome_unknown" cols ") "          \
    "SELECT $1, generation, $2::integer, $3, $4, $5::boolean, "             \
    "NULLIF($6::integer, 0), $7::boolean" vals " FROM up RETURNING 1) "     \
    "SELECT (SELECT count(*) FROM ins), (SELECT state FROM cur), "          \
    "(SELECT generation FROM cur)"

int sg__pg_attempt(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
                   int64_t until) {
    char n[16], status[8], counts[4][24];
    snprintf(n, sizeof(n), "%" PRIu32, r->n);
    snprintf(status, sizeof(status), "%u", (unsigned)r->http_status);
    const char *vals[13] = {
        key,
        n,
        sg_outcome_name((sg_outcome)r->outcome),
        sg_phase_name((sg_phase)r->phase),
        (r->flags & SG__LATT_SENT) != 0 ? "true" : "false",
        status,
        (r->flags & SG__LATT_UNKNOWN) != 0 ? "true" : "false",
        NULL,
    };
    if (!p->usage_columns) {
        /* a schema applied before them: the attempt without its usage */
        return exec_update(p, ATTEMPT_SQL("", "", "$8"), 8, vals, gen, until);
    }
    for (int k = 0; k < 4; k++) {
        snprintf(counts[k], sizeof(counts[k]), "%" PRId64, r->usage[k]);
        vals[7 + k] = r->usage_source != 0 && r->usage[k] >= 0 ? counts[k] : NULL;
    }
    vals[11] = r->usage_source == SG_USAGE_PROVIDER   ? "provider"
               : r->usage_source == SG_USAGE_ESTIMATE ? "estimate"
                                                      : NULL;
    return exec_update(
        p,
        ATTEMPT_SQL(", input_tokens, output_tokens, cached_input_tokens, "
                    "reasoning_tokens, usage_source",
                    ", $8::bigint, $9::bigint, $10::bigint, $11::bigint, $12", "$13"),
        13, vals, gen, until);
}

int sg__pg_resolve(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
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

/* ---------------------------------------------------------------- thread */

static void free_jobs(job *j) {
    while (j != NULL) {
        job *next = j->next;
        free(j);
        j = next;
    }
}

/* Commits @batch (in queue order) in one transaction by @stop_by (and the
 * handle's bound).  Returns how many of its records failed: all of them
 * when the transaction did not commit (or its commit was not seen), else
 * those the database refused (fenced off, resolved, unknown key), which
 * change nothing. */
static uint64_t commit_batch(pg_ledger *b, job *batch, int64_t stop_by) {
    int64_t until = sg__pg_bound(b, stop_by);
    uint64_t n = 0;
    uint64_t refused = 0;
    PGresult *res;
    int rv = sg__pg_begin(b, "BEGIN", until);
    bool open = rv == 0;
    for (job *j = batch; j != NULL; j = j->next) {
        n++;
        if (rv != 0) {
            continue;
        }
        int r = j->rec.type == SG__LREC_ATTEMPT
                    ? sg__pg_attempt(b, j->key, &j->rec, j->generation, until)
                    : sg__pg_resolve(b, j->key, &j->rec, j->generation, until);
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

int sg__pg_enqueue(writer *w, const sg__ledger_rec *r, int64_t gen, uint64_t *seq) {
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

int sg__pg_writer_wait(writer *w, uint64_t seq, int64_t until) {
    int rv = 0;
    pthread_mutex_lock(&w->mu);
    while (w->settled < seq && rv == 0) {
        rv = sg__ledger_wait_until(&w->done, &w->mu, until);
    }
    pthread_mutex_unlock(&w->mu);
    return rv;
}

uint64_t sg__pg_writer_settled(writer *w) {
    pthread_mutex_lock(&w->mu);
    uint64_t settled = w->settled;
    pthread_mutex_unlock(&w->mu);
    return settled;
}

int sg__pg_writer_init(pg_ledger *p) {
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

void sg__pg_writer_close(pg_ledger *p, int64_t until) {
    writer *w = p->w;
    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    w->stop_by = until; /* for the batches taken from now on */
    pthread_cond_signal(&w->work);
    bool started = w->started;
    /* The batch under way was bounded when it was taken, by timeout_ns:
     * given up at @until, not waited for past it. */
    while (started && w->settled < w->queued &&
           sg__ledger_wait_until(&w->done, &w->mu, until) == 0) {
    }
    bool late = w->settled < w->queued;
    pthread_mutex_unlock(&w->mu);
    if (late) {
        sg__pg_interrupt(p);
    }
    if (started) {
        pthread_join(w->thread, NULL);
    }
    free_jobs(w->head);
    sg__pg_free(w->conn);
    pthread_cond_destroy(&w->done);
    pthread_cond_destroy(&w->work);
    pthread_mutex_destroy(&w->mu);
    free(w);
    p->w = NULL;
}

int sg__pg_take_failure(writer *w) {
    pthread_mutex_lock(&w->mu);
    int rv = w->told_intent < w->failures ? SG_EIO : 0;
    w->told_intent = w->failures;
    pthread_mutex_unlock(&w->mu);
    return rv;
}

int sg__pg_sync(sg_ledger *l, int64_t until) {
    writer *w = ((pg_ledger *)l->state)->w;
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

void sg__pg_stats(sg_ledger *l, sg_ledger_stats *out) {
    writer *w = ((pg_ledger *)l->state)->w;
    pthread_mutex_lock(&w->mu);
    out->unsynced = w->queued - w->settled;
    out->sync_failures = w->failures;
    pthread_mutex_unlock(&w->mu);
}
