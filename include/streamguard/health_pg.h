/*
 * streamguard health_pg: endpoint health shared by processes through
 * PostgreSQL (docs/health.md).  Processes that share a database - the
 * ledger's, or any - share what their sg_health learns: a cooldown or an
 * open breaker learned by one is honoured by the others within
 * milliseconds (LISTEN/NOTIFY), and a process that starts later reads
 * what still holds from a table.  The database is never in an
 * operation's way: what is learned goes through a bounded queue to a
 * thread of the share's own, with a connection of its own; a full queue
 * drops (and counts); a lost database is said once to the log, the share
 * reconnects with backoff, and every process goes on with what it knows
 * itself.
 *
 *   sg_health *h;                 sg_health_new(&h);
 *   sg_health_set_credential_key(h, key, key_len);  // the same everywhere
 *   sg_health_pg_options *o;      sg_health_pg_options_new(&o);
 *   sg_health_pg_options_set_log(o, my_log, NULL);
 *   sg_health_pg *share;
 *   sg_health_pg_new(&share, h, "postgresql://app@db/app", o);
 *   sg_health_pg_options_free(o);
 *   ... operations with sg_op_options_set_health(policy, h) ...
 *   sg_health_pg_free(share);     // before h
 *   sg_health_free(h);
 *
 * Built with the ledger's PostgreSQL part (libpq); without it this header
 * is not installed.  Thread-safety: sg_health_pg_get_stats may be called
 * from any thread; sg_health_pg_new and _free once each, from one thread.
 */
#ifndef STREAMGUARD_HEALTH_PG_H
#define STREAMGUARD_HEALTH_PG_H

#include <streamguard/core.h>
#include <streamguard/health.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The channel the share notifies and listens on, and its table (in the
 *  connection's current schema; docs/health.md, "The table"). */
#define SG_HEALTH_PG_CHANNEL "streamguard_health"
#define SG_HEALTH_PG_TABLE "streamguard_health"

#define SG_HEALTH_PG_DEFAULT_QUEUE_MAX 256
#define SG_HEALTH_PG_QUEUE_MAX_LIMIT 65536
#define SG_HEALTH_PG_DEFAULT_TIMEOUT SG_SEC(2)
#define SG_HEALTH_PG_DEFAULT_RECONNECT_MAX SG_SEC(5)

/* ------------------------------------------------------------------------
 * Options - opaque, one setter each; copied by sg_health_pg_new, so free
 * or change them right after.  Each setter returns 0, or SG_EINVAL (@o
 * NULL, or a value it names) or SG_ERANGE (a value past its range); then
 * @o is unchanged.
 * ------------------------------------------------------------------------ */

typedef struct sg_health_pg_options sg_health_pg_options;

/** sg_health_pg_options_new - options at their defaults into *@out (NULL
 *  on failure): 0, SG_EINVAL (@out NULL) or SG_ENOMEM. */
SG_EXTERN int sg_health_pg_options_new(sg_health_pg_options **out);

/** sg_health_pg_options_free - frees @o (NULL is fine). */
SG_EXTERN void sg_health_pg_options_free(sg_health_pg_options *o);

/** sg_health_pg_log - one line for the operator (no newline): the
 *  database lost, reached again, a fact dropped.  Called on the share's
 *  thread; never with a credential, a URI or a password. */
typedef void (*sg_health_pg_log)(const char *message, void *user_data);

/** sg_health_pg_options_set_log - where the share says what happened to
 *  its database: once when it is lost (or cannot be reached), once when it
 *  is back - never per operation.  @user_data is borrowed.  Default: NULL,
 *  nothing said (a library writes nothing to stderr). */
SG_EXTERN int sg_health_pg_options_set_log(sg_health_pg_options *o, sg_health_pg_log fn,
                                           void *user_data);

/** sg_health_pg_options_set_queue_max - facts learned here that may wait
 *  for the database: 1 .. SG_HEALTH_PG_QUEUE_MAX_LIMIT (about 300 bytes
 *  each, allocated up front).  Beyond it a fact is dropped and counted
 *  (sg_health_pg_stats.dropped): the operation that taught it never waits.
 *  Default: SG_HEALTH_PG_DEFAULT_QUEUE_MAX (256). */
SG_EXTERN int sg_health_pg_options_set_queue_max(sg_health_pg_options *o, uint32_t n);

/** sg_health_pg_options_set_timeout - the bound of connecting and of each
 *  statement (the server's statement_timeout a little less): past it the
 *  database counts as lost.  > 0.  Default: SG_HEALTH_PG_DEFAULT_TIMEOUT
 *  (2 s). */
SG_EXTERN int sg_health_pg_options_set_timeout(sg_health_pg_options *o, int64_t ns);

/** sg_health_pg_options_set_reconnect_max - the longest wait between two
 *  tries to reach a lost database: the first after 100 ms, then twice as
 *  long each time up to this.  >= 100 ms.  Default:
 *  SG_HEALTH_PG_DEFAULT_RECONNECT_MAX (5 s). */
SG_EXTERN int sg_health_pg_options_set_reconnect_max(sg_health_pg_options *o, int64_t ns);

/** sg_health_pg_options_set_clock - the clock of the operations that share
 *  the sg_health (their `now`), which the share turns wall-clock instants
 *  into.  Borrowed: it must outlive the share.  NULL (the default):
 *  CLOCK_MONOTONIC, the transports' own. */
SG_EXTERN int sg_health_pg_options_set_clock(sg_health_pg_options *o,
                                             const sg_clock *clock);

/** sg_health_pg_options_set_wall_clock - the wall clock (unix time in
 *  nanoseconds) instants travel in between processes (docs/health.md,
 *  "Clocks").  Borrowed: it must outlive the share.  NULL (the default):
 *  clock_gettime(CLOCK_REALTIME). */
SG_EXTERN int sg_health_pg_options_set_wall_clock(sg_health_pg_options *o,
                                                  const sg_clock *clock);

/* ------------------------------------------------------------------------
 * The share
 * ------------------------------------------------------------------------ */

/** sg_health_pg - one sg_health shared through one database.  Opaque. */
typedef struct sg_health_pg sg_health_pg;

/**
 * sg_health_pg_new - shares @h through the PostgreSQL database @uri
 * ("postgresql://..." or "postgres://...": a libpq connection URI; what it
 * leaves out libpq takes from the PG* environment variables and
 * ~/.pgpass), with @opts (NULL: every default).  It becomes @h's listener
 * (sg_health_set_listener, replacing any: one share per sg_health) and
 * starts its thread, which connects - it does
 * not wait for the database: a database that is down is said to the log
 * and tried again, and @h works on alone meanwhile.  The first connection
 * makes the table when it is missing (docs/health.md, "The table").  @h
 * is borrowed: free the share before it.  Give every process the same
 * credential key first (sg_health_set_credential_key), or their keys never
 * match.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is NULL):
 *   SG_EINVAL  @out, @h or @uri is NULL, or @uri is no postgresql:// or
 *              postgres:// URI libpq can parse;
 *   SG_ENOMEM  out of memory;
 *   SG_ESYS    the system gave no eventfd, thread or random bytes.
 */
SG_EXTERN int sg_health_pg_new(sg_health_pg **out, sg_health *h, const char *uri,
                               const sg_health_pg_options *opts);

/**
 * sg_health_pg_free - stops sharing (NULL is fine): @h's listener is taken
 * away, the thread gives up what it waits for and is joined, facts still
 * queued are dropped.  @h keeps what it learned.  Bounded: it never waits
 * for the database.
 */
SG_EXTERN void sg_health_pg_free(sg_health_pg *s);

/** What a share did since sg_health_pg_new.  The caller's, size first
 *  (SG_HEALTH_PG_STATS_INIT): the library fills only what that size holds,
 *  so a caller built against 1.0 keeps working when counters are added at
 *  the end. */
typedef struct sg_health_pg_stats {
    size_t size;        /* sizeof(sg_health_pg_stats): SG_HEALTH_PG_STATS_INIT */
    uint64_t learned;   /* facts @h's listener was told (queued or dropped) */
    uint64_t published; /* written to the table and notified */
    uint64_t dropped;   /* not published: queue full, or refused */
    uint64_t expired;   /* not published: over before the database was back */
    uint64_t received;  /* facts read from other processes (notified or in the table) */
    uint64_t applied;   /* of those, given to @h (sg_health_apply) */
    uint64_t ignored;   /* of those, over already, malformed or not tracked */
    uint64_t connects;  /* connections made (the first, and each reconnection) */
    uint64_t losses;    /* times the database was lost, or could not be reached */
    uint32_t queued;    /* facts waiting now */
    bool connected;     /* connected now: listening, and caught up with the table */
} sg_health_pg_stats;
/** An sg_health_pg_stats ready for sg_health_pg_get_stats. */
#define SG_HEALTH_PG_STATS_INIT \
    { sizeof(sg_health_pg_stats), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, false }

/**
 * sg_health_pg_get_stats - what @s did so far.  @out's size says how much
 * of it to fill (SG_HEALTH_PG_STATS_INIT).
 *
 * Returns 0 if it succeeds, or SG_EINVAL (@s or @out NULL, or @out->size
 * not set).
 */
SG_EXTERN int sg_health_pg_get_stats(sg_health_pg *s, sg_health_pg_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_HEALTH_PG_H */
