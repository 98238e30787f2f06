/*
 * The PostgreSQL ledger's private types and its connection layer
 * (pg_conn.c): libpq's non-blocking API bounded by our own deadline and by
 * the server's statement_timeout.  The backend itself is pg.c, its writer
 * thread pg_writer.c.
 */
#ifndef SG_LEDGER_PG_H
#define SG_LEDGER_PG_H

#include "ledger/internal.h"

#include <libpq-fe.h>

#include <pthread.h>

#define SCHEMA_VERSION 1

/* The generation of a key this handle's intent took: its later records of
 * that key are fenced by it. */
typedef struct fence {
    struct fence *next;
    int64_t generation;
    /* 0: the operation is live; else the queue number of its resolution,
     * which this handle's later records of the key are refused against
     * (as the file ledger's index refuses them) until it is swept, once
     * it is settled. */
    uint64_t ended;
    uint8_t resolution;
    char key[]; /* NUL-terminated */
} fence;

/* An attempt or a resolution on its way to the writer thread. */
typedef struct job {
    struct job *next;
    uint64_t seq;
    int64_t generation; /* the fence it is recorded with, or -1 */
    sg__ledger_rec rec; /* .key points at @key */
    char key[SG_LEDGER_KEY_MAX + 1];
} job;

/* The writer thread: attempts and resolutions are queued here in the
 * order of their calls and committed by the thread on a connection of its
 * own, those queued together in one transaction.  Everything here is
 * under @mu, taken after the handle's mutex, never before it; the thread
 * takes only @mu. */
typedef struct writer {
    pthread_mutex_t mu;
    pthread_cond_t work; /* the thread waits here for records or stop */
    pthread_cond_t done; /* settled moved */
    pthread_t thread;
    bool started; /* by the first record queued */
    bool stop;    /* sg_ledger_close: commit what is left by stop_by */
    int64_t stop_by;
    job *head; /* queued, not yet taken by the thread */
    job *tail;
    uint64_t queued;   /* records queued since open */
    uint64_t settled;  /* the first @settled are committed, or failed */
    uint64_t failures; /* records that failed, since open */
    uint64_t told_intent;
    uint64_t told_sync;
    struct pg_ledger *conn; /* the thread's own connection and bound */
} writer;

#define FENCE_BUCKETS 1024

/* The intents' connections (pg_conn.c): up to @max, each lent to one
 * intent at a time; made when an intent finds none idle, kept until the
 * handle closes.  Under @mu. */
typedef struct pg_pool {
    pthread_mutex_t mu;
    pthread_cond_t freed; /* one went back (timed waits: monotonic) */
    size_t max;
    size_t made;  /* lent or idle */
    size_t nidle; /* idle[0 .. nidle): the last returned is lent first */
    struct pg_ledger *idle[SG_LEDGER_INTENT_CONNECTIONS_MAX];
} pg_pool;

typedef struct pg_ledger {
    PGconn *conn;
    /* The handle's eventfd, readable once it gives up what runs (close):
     * every wait for the database ends then (-1: none).  The handle's own
     * state owns it; its connections' share it. */
    int stop_fd;
    bool stop_owned;
    char *location;
    sg_ledger_options opts;
    char host[256];
    /* Keys owned by this handle's intents, until their resolution: a few
     * dozen bytes each, as many as its operations in flight.  O(n / 1024). */
    fence *fences[FENCE_BUCKETS];
    size_t ended;    /* fences whose resolution is queued or done */
    size_t sweep_at; /* ... the count at which they are swept */
    writer *w;       /* NULL on the writer's own connection */
    /* The attempts table has the usage columns (the schema file's ALTER
     * applied): read when the connection's schema was checked. */
    bool usage_columns;
    /* The intents' connections (NULL on the writer's and on those
     * themselves). */
    pg_pool *pool;
    /* What libpq said last when the connection was dropped, on one line
     * ("" when nothing): for a log line (pg_health.c). */
    char last_error[256];
} pg_ledger;

/* pg.c: frees @p, its writer and its intents' connections (NULL is fine). */
void sg__pg_free(pg_ledger *p);

/* The writer (pg_writer.c).  Init and close bracket the handle's life:
 * close commits what is queued by @until (then gives up the commit under
 * way, sg__pg_interrupt: what the thread has not committed fails and is
 * lost, the operations stay pending), then joins the thread. */
int sg__pg_writer_init(pg_ledger *p);
void sg__pg_writer_close(pg_ledger *p, int64_t until);
/* Queues @r (fenced by @gen) for the writer: 0 and its number in *@seq;
 * 1 when the thread cannot be started (the caller records it itself, as
 * before); SG_ENOMEM, or SG_ETOOMANY when too many records wait. */
int sg__pg_enqueue(writer *w, const sg__ledger_rec *r, int64_t gen, uint64_t *seq);
/* Waits until the first @seq records are settled, by @until: 0 or
 * SG_ETIMEDOUT. */
int sg__pg_writer_wait(writer *w, uint64_t seq, int64_t until);
uint64_t sg__pg_writer_settled(writer *w);
/* Before an intent: SG_EIO when a queued record failed since an intent
 * last heard of it (then it has), else 0. */
int sg__pg_take_failure(writer *w);
/* The backend's sync (sg__ledger_backend), and its stats' fields, taken
 * under the handle's mutex (pg.c). */
int sg__pg_sync(sg_ledger *l, int64_t until);
void sg__pg_stats(sg_ledger *l, sg_ledger_stats *out);
/* An attempt's or a resolution's statement on @p, fenced by @gen (-1:
 * unfenced), by @until: 0, SG_ESTATE or SG_ENOTFOUND (it ran and changed
 * nothing), or the connection layer's error. */
int sg__pg_attempt(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
                   int64_t until);
int sg__pg_resolve(pg_ledger *p, const char *key, const sg__ledger_rec *r, int64_t gen,
                   int64_t until);

/* Connection layer (pg_conn.c). */
/* A handle's state for @location, without a connection (NULL: out of
 * memory); defaults applied to its options. */
pg_ledger *sg__pg_new(const char *location, const sg_ledger_options *opts);
/* @p's pool of opts.intent_connections, whose first is @p's connection
 * (moved there): 0 or SG_ENOMEM. */
int sg__pg_pool_init(pg_ledger *p);
void sg__pg_pool_free(pg_ledger *p);
/* One of @p's intent connections, waiting for one to come back no later
 * than @until: 0 and it in *@out, SG_ETIMEDOUT, or SG_ENOMEM. */
int sg__pg_pool_take(pg_ledger *p, int64_t until, pg_ledger **out);
/* @c goes back to @p's pool. */
void sg__pg_pool_give(pg_ledger *p, pg_ledger *c);
/* Every wait for the database on @p's connections, now and from now on,
 * ends with SG_ECANCELED, dropping its connection.  Any thread. */
void sg__pg_interrupt(pg_ledger *p);
/* Closes @p's connection (if any), keeping what libpq said last in
 * p->last_error. */
void sg__pg_drop(pg_ledger *p);
int sg__pg_run(pg_ledger *p, const char *sql, int n, const char *const *vals,
               int64_t until, PGresult **out);
int sg__pg_run_script(pg_ledger *p, const char *sql, int64_t until);
int sg__pg_connect(pg_ledger *p, int64_t until, bool check);
int64_t sg__pg_bound(const pg_ledger *p, int64_t until);
int sg__pg_exec(pg_ledger *p, const char *sql, int n, const char *const *vals,
                int64_t until, PGresult **out);
/* Opens a transaction with @sql ("BEGIN ...") by @until, once more on a
 * new connection when the one it had was found dead. */
int sg__pg_begin(pg_ledger *p, const char *sql, int64_t until);

#endif
