/*
 * streamguard ledger: durable intent records and stable idempotency keys.
 *
 * A POST that timed out after it was sent may already have charged a card or
 * created something.  The ledger records the intent BEFORE the first
 * attempt, each attempt's result, and how the operation ended (done, failed,
 * or outcome unknown).  Whatever was never resolved - the outcome is
 * unknown, or the process died mid-operation - can be listed and reconciled
 * later, by this process or any other.  Two backends, chosen by the
 * location given to sg_ledger_open: an append-only file in a directory,
 * shared by the processes of one machine (flock(2); local file systems
 * only), or PostgreSQL ("postgresql://..."), shared by every machine (one
 * row per key: exactly one worker anywhere owns an unresolved key).
 *
 * The ledger plugs into an operation as its policy observer; no transport
 * knows of it (docs/ledger.md has the whole workflow):
 *
 *   sg_ledger *l;  sg_ledger_open(&l, "/var/lib/app/ledger", NULL);
 *   char key[SG_LEDGER_KEY_SIZE];
 *   sg_ledger_key_derive("POST", url, body, body_len, key);
 *   sg_ledger_binding b = {l, key};  // key: used without an idempotency key
 *   sg_op_options_set_target(policy, url);
 *   sg_op_options_set_observer(policy, sg_ledger_observer(), &b);
 *   ... run the operation on any transport: the intent is recorded before
 *   ... the first request (or the operation is refused), then each attempt
 *   ... and the resolution.
 *   sg_ledger_close(l);
 *
 * Your own loop may call sg_ledger_op_intent / _attempt / _resolve instead:
 * the records, the observer and reconciling are <streamguard/ledger_record.h>,
 * which this file includes.
 * Durability, memory and the PostgreSQL backend: docs/ledger.md.  In
 * short: an intent is durable when its call returns 0; the other records
 * reach stable storage by the handle's own thread soon after (an event loop
 * never waits for the disk); the file ledger's memory is bounded by the
 * unresolved operations (sg_ledger_options_set_max_live), never by the
 * file's length.
 *
 * Thread-safety: an sg_ledger has an internal mutex; any function may be
 * called on one handle from several threads.  A handle starts threads of
 * its own (sync, writer, intents), with every signal blocked, as records
 * need them; sg_ledger_close joins them.  A handle must not be used, not
 * even closed, in a child after fork(): the child has no such thread and
 * shares the parent's lock.  Functions that take no sg_ledger are
 * reentrant.
 */
#ifndef STREAMGUARD_LEDGER_H
#define STREAMGUARD_LEDGER_H

#include <streamguard/core.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Bounds
 * ------------------------------------------------------------------------ */

/** Room for a derived key: "sg1-" + 64 hex digits + NUL. */
#define SG_LEDGER_KEY_SIZE 69
/** Longest key, not counting the NUL (the same as an idempotency key). */
#define SG_LEDGER_KEY_MAX SG_OP_IDEMPOTENCY_KEY_MAX
/** Longest method, not counting the NUL. */
#define SG_LEDGER_METHOD_MAX SG_OP_METHOD_MAX
/** Longest URL kept in a record, not counting the NUL. */
#define SG_LEDGER_URL_MAX 8192
/** Longest reconciliation note, not counting the NUL. */
#define SG_LEDGER_NOTE_MAX 1024
/** Most intent connections a PostgreSQL handle may have
 *  (sg_ledger_options_set_intent_connections). */
#define SG_LEDGER_INTENT_CONNECTIONS_MAX 64

/* ------------------------------------------------------------------------
 * Options
 * ------------------------------------------------------------------------ */

/** When records are flushed to stable storage with fdatasync(2).  Whatever
 *  the policy, a record is in the file (safe from a process crash) when its
 *  call returns. */
typedef enum sg_ledger_fsync {
    /** Intents on the caller's thread, before sg_ledger_intent returns;
     *  attempts, resolutions and reconciliations by the handle's sync
     *  thread, soon after they return (default). */
    SG_LEDGER_FSYNC_DEFAULT = 0,
    /** Every record on the caller's thread, before its call returns: an
     *  acknowledged resolution survives a power loss too, and every
     *  record costs the caller an fdatasync.  No thread. */
    SG_LEDGER_FSYNC_ALWAYS,
    /** Never, not even around compaction's rename: records survive a
     *  process crash, not a power loss.  For tests and benchmarks. */
    SG_LEDGER_FSYNC_NEVER
} sg_ledger_fsync;

/**
 * sg_ledger_options - a ledger's configuration (opaque), every option at
 * its default when made; sg_ledger_open and sg_ledger_init_schema copy it
 * (docs/design.md, "Ownership"; free or change it right after; NULL there
 * means every default).  The
 * file ledger ignores timeout, intent_connections and close_timeout;
 * PostgreSQL ignores fsync, wall_clock and max_live.  Each setter returns
 * 0, or SG_EINVAL (@o NULL, or a value it names) or SG_ERANGE (a value
 * past its range); then @o is unchanged.
 */
typedef struct sg_ledger_options sg_ledger_options;

/** sg_ledger_options_new - options at their defaults into *@out (NULL on
 *  failure): 0, SG_EINVAL (@out NULL) or SG_ENOMEM. */
SG_EXTERN int sg_ledger_options_new(sg_ledger_options **out);

/** sg_ledger_options_free - frees @o (NULL is fine). */
SG_EXTERN void sg_ledger_options_free(sg_ledger_options *o);

/** sg_ledger_options_set_fsync - see sg_ledger_fsync; SG_EINVAL for a value
 *  it does not name.  Default SG_LEDGER_FSYNC_DEFAULT. */
SG_EXTERN int sg_ledger_options_set_fsync(sg_ledger_options *o, sg_ledger_fsync policy);

/** sg_ledger_options_set_wall_clock - stamps records ("first seen"): unix
 *  time in nanoseconds.  Borrowed: it must outlive the handle.  Wall time
 *  is only displayed, never used as a duration.  NULL (the default):
 *  clock_gettime(CLOCK_REALTIME). */
SG_EXTERN int sg_ledger_options_set_wall_clock(sg_ledger_options *o,
                                               const sg_clock *clock);

/** sg_ledger_options_set_max_live - the most unresolved operations the
 *  index holds: an intent beyond it, or a file that once held more (by a
 *  handle with a larger one, until such a handle compacts it), is refused
 *  with SG_ETOOMANY.  Give every handle on one directory the same.  0
 *  restores the default, 1048576. */
SG_EXTERN int sg_ledger_options_set_max_live(sg_ledger_options *o, size_t n);

/** sg_ledger_options_set_lock_timeout - how long a call waits for another
 *  process's lock, or for the handle while another thread uses it, before
 *  SG_ELOCKED (PostgreSQL: its lock_timeout, for another worker's
 *  transaction on the row).  @ns 0 .. SG_DURATION_MAX; 0 (the default):
 *  as long as it takes. */
SG_EXTERN int sg_ledger_options_set_lock_timeout(sg_ledger_options *o, int64_t ns);

/** sg_ledger_options_set_timeout - PostgreSQL: the bound of connecting (at
 *  open, and after a lost connection) and of every call no operation's
 *  budget bounds (sg_ledger_op_intent); past it, SG_ETIMEDOUT.  @ns 0 ..
 *  SG_DURATION_MAX; 0 restores the default, 10 s. */
SG_EXTERN int sg_ledger_options_set_timeout(sg_ledger_options *o, int64_t ns);

/** sg_ledger_options_set_intent_connections - PostgreSQL: how many intents
 *  the handle records at once, each on a connection (and an intent thread)
 *  of its own, so an intent waiting for a row held elsewhere delays no
 *  intent of another key; with that many waiting, the next waits within
 *  its own bound.  @n 0 .. SG_LEDGER_INTENT_CONNECTIONS_MAX; 0 restores
 *  the default, 4. */
SG_EXTERN int sg_ledger_options_set_intent_connections(sg_ledger_options *o, size_t n);

/** sg_ledger_options_set_close_timeout - PostgreSQL: the most
 *  sg_ledger_close waits for the records still queued to commit; then
 *  every statement still running is given up (its connection closed: the
 *  server rolls it back) and those operations stay pending until
 *  reconciled.  To end by a deadline, call sg_ledger_sync with the time
 *  left first.  @ns 0 .. SG_DURATION_MAX; 0 (the default): the timeout. */
SG_EXTERN int sg_ledger_options_set_close_timeout(sg_ledger_options *o, int64_t ns);

typedef struct sg_ledger sg_ledger;

/**
 * sg_ledger_open - open the ledger at @dir: a directory (the file ledger,
 * created when missing), or a PostgreSQL database when @dir starts with
 * "postgresql://" or "postgres://" (a libpq connection URI; what it leaves
 * out libpq takes from the PG* environment variables and ~/.pgpass).  @opts
 * is copied; NULL means every default.
 *
 * The file ledger creates @dir (one level, mode 0700) and its files (mode
 * 0600: URLs may carry secrets), then replays the file under a shared lock
 * to build the index of unresolved operations.  A torn tail (a record a
 * crashed writer left half-written) is ignored and cut off by the next
 * append; a corrupt record in the middle is skipped, the valid records
 * after it kept (sg_ledger_get_stats counts both).
 *
 * PostgreSQL connects, within the timeout, and checks the database has
 * the ledger's schema (applied by sg_ledger_init_schema, never here).  Up
 * to intent_connections + 2 connections per handle, each opened when first
 * needed, again after a loss (docs/ledger.md, "The PostgreSQL backend").
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (and *@out is NULL):
 *   SG_EINVAL    @out or @dir is NULL, or @dir is empty;
 *   SG_ERANGE    @dir is longer than PATH_MAX allows;
 *   SG_ENOMEM    out of memory;
 *   SG_ESYS      creating or opening the directory or a file failed (errno
 *                says why, e.g. EACCES, ENOTDIR); PostgreSQL: the handle's
 *                eventfd could not be made;
 *   SG_EIO       reading the file failed, or syncing the directory entry of
 *                a newly created file failed;
 *   SG_ELOCKED   another process held the lock past the lock timeout;
 *   SG_ETOOMANY  the file holds (or held, before a compaction yet to come)
 *                more than max_live unresolved operations at once;
 *   PostgreSQL:  SG_ECONNECT (could not connect), SG_ETIMEDOUT (not within
 *                the timeout), SG_ESTATE (no ledger schema), SG_EUNSUPPORTED
 *                (its schema is newer than this library's, or the library
 *                was built without PostgreSQL: SG_WITH_POSTGRESQL=OFF).
 */
SG_EXTERN int sg_ledger_open(sg_ledger **out, const char *dir,
                             const sg_ledger_options *opts);

/**
 * sg_ledger_init_schema - make @location ready for sg_ledger_open.  For a
 * PostgreSQL URI: apply the ledger's schema, version 1
 * (sql/ledger_schema_v1.sql: CREATE ... IF NOT EXISTS in one transaction,
 * under an advisory lock), within @opts' timeout.  Idempotent, and safe
 * while other workers use the ledger or apply it too.  For a directory:
 * sg_ledger_open and sg_ledger_close (it creates the files).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL        @location is NULL or empty;
 *   SG_EUNSUPPORTED  the database has a newer schema (left as it is), or
 *                    the library was built without PostgreSQL
 *                    (SG_WITH_POSTGRESQL=OFF);
 *   SG_ECONNECT, SG_ECONNRESET, SG_ETIMEDOUT, SG_EIO  the database could
 *                    not be reached, went away, took too long, or refused
 *                    (e.g. no privilege to create tables): nothing applied;
 *   any error of sg_ledger_open() for a directory.
 */
SG_EXTERN int sg_ledger_init_schema(const char *location, const sg_ledger_options *opts);

/**
 * sg_ledger_close - close @l and free it (NULL is fine).  Every record an
 * sg_ledger_* call acknowledged is already in the file; with the default
 * fsync policy closing first waits for the sync thread to fdatasync the
 * ones not yet synced (one fdatasync at most, usually), then joins it.
 * Whether that last fdatasync worked is not returned: call sg_ledger_sync
 * first to know.  PostgreSQL: commits the attempts and resolutions still
 * queued, and lets the intent threads finish, for at most the close
 * timeout (sg_ledger_options_set_close_timeout), then gives up what is
 * still running and returns, within a few milliseconds of that.  No other
 * call on @l may run or follow.
 */
SG_EXTERN void sg_ledger_close(sg_ledger *l);

/* ------------------------------------------------------------------------
 * Keys
 * ------------------------------------------------------------------------ */

/**
 * sg_ledger_key_derive - a stable idempotency key for a request: "sg1-"
 * followed by the lowercase hex SHA-256 of the length-prefixed encoding
 *   u64be(len(method)) method u64be(len(url)) url u64be(body_len) body
 * so that no two different (method, URL, body) triples share an input.  The
 * same request always gets the same key, on every machine; the key is a
 * valid idempotency key (sg_op_options_set_idempotency_key).
 *
 * @body may be NULL when @body_len is 0.  @out receives 68 characters and
 * a NUL.
 *
 * Returns 0, or SG_EINVAL (@method, @url or @out NULL, or @body NULL while
 * @body_len > 0), SG_ENOMEM (no digest context) or SG_EUNSUPPORTED
 * (OpenSSL has no usable SHA-256, e.g. FIPS without its provider).
 * Thread-safety: reentrant.
 */
SG_EXTERN int sg_ledger_key_derive(const char *method, const char *url, const void *body,
                                   size_t body_len, char out[SG_LEDGER_KEY_SIZE]);

/**
 * sg_ledger_key_check - is @key a usable caller-supplied key: 1 ..
 * SG_LEDGER_KEY_MAX characters, each printable ASCII without space (0x21 ..
 * 0x7E), exactly what sg_op_options_set_idempotency_key accepts?
 *
 * Returns 0 if it is, SG_EINVAL (NULL, empty, or another character) or
 * SG_ERANGE (longer than SG_LEDGER_KEY_MAX).  Thread-safety: reentrant.
 */
SG_EXTERN int sg_ledger_key_check(const char *key);

/* ------------------------------------------------------------------------
 * Listing
 * ------------------------------------------------------------------------ */

/** Why an operation is listed. */
typedef enum sg_ledger_state {
    /** Intent recorded, never resolved: still running, or its process died. */
    SG_LEDGER_PENDING = 1,
    /** Resolved as unknown: it may have taken effect. */
    SG_LEDGER_UNRESOLVED_UNKNOWN = 2
} sg_ledger_state;

/** "pending", "unknown", or NULL when out of range. */
SG_EXTERN const char *sg_ledger_state_name(sg_ledger_state s);

/** sg_ledger_entry - one unresolved operation, read through the pointer
 *  the listing's callback receives (it may grow at the end: never copy one
 *  by sizeof); the strings are valid only during that callback. */
typedef struct sg_ledger_entry {
    const char *key;
    const char *method;
    const char *url;
    int64_t first_seen_ns;  /* wall clock of the intent, unix ns */
    int64_t last_update_ns; /* wall clock of its latest record */
    int32_t pid;            /* process that recorded the intent */
    sg_ledger_state state;
    uint32_t attempts;       /* largest attempt number recorded, 0 none */
    bool has_last;           /* an attempt was recorded: last_* are set */
    sg_outcome last_outcome; /* the latest attempt's outcome */
    sg_phase last_phase;
    int last_http_status; /* 0 when none */
    bool last_sent;
    bool last_outcome_unknown;
    sg_outcome final_outcome; /* state UNKNOWN: the outcome resolved with */
} sg_ledger_entry;

/**
 * sg_ledger_list_unresolved - call @cb once per unresolved operation (intent
 * without resolution, or resolved unknown and not reconciled), oldest intent
 * first.  It first catches up with what other processes appended, so the
 * list is a consistent snapshot of the file at one instant.  @cb returns 0
 * to go on, anything else to stop.  @cb must not call into @l (the handle's
 * mutex is held).  When this returns an error other than SG_ECANCELED, @cb
 * was never called.
 *
 * Returns 0, or SG_EINVAL (@l or @cb NULL), SG_ECANCELED (@cb returned
 * non-zero), or a record call's error from catching up (the common ones,
 * <streamguard/ledger_record.h>, "Records").
 */
SG_EXTERN int sg_ledger_list_unresolved(
    sg_ledger *l, int (*cb)(const sg_ledger_entry *e, void *user_data), void *user_data);

/* ------------------------------------------------------------------------
 * Maintenance
 * ------------------------------------------------------------------------ */

/**
 * sg_ledger_compact - rewrite the file keeping only the unresolved
 * operations (one intent, the latest attempt and an unknown resolution
 * each), atomically: the new file is written beside the old one, synced,
 * renamed over it, and the directory is synced.  Other processes notice
 * the new file at their next call and replay it.  A crash at any point
 * leaves the old file or the new one, never a mix.  Cost: O(live) writes
 * under the exclusive lock, which appends from every process wait for.
 * Once it succeeds every record this handle wrote before it is durable.
 *
 * Returns 0, or SG_EINVAL (@l NULL), or a record call's error (the common
 * ones, <streamguard/ledger_record.h>; the old file is then left as it
 * was).
 */
SG_EXTERN int sg_ledger_compact(sg_ledger *l);

/** What replaying the file found, since open or the last compaction; and
 *  how this handle's own records reached the disk, since open.  The
 *  caller's, size first (SG_LEDGER_STATS_INIT): the library fills only
 *  what that size holds, so a caller built against 1.0 keeps working when
 *  counters are added at the end. */
typedef struct sg_ledger_stats {
    size_t size;              /* sizeof(sg_ledger_stats): SG_LEDGER_STATS_INIT */
    uint64_t records;         /* valid records read or written */
    uint64_t corrupt_regions; /* runs of bytes skipped between valid records */
    uint64_t corrupt_bytes;   /* their total size */
    uint64_t tail_bytes;      /* torn or corrupt bytes at the end, ignored */
    uint64_t file_bytes;      /* size of the file as last seen */
    size_t live;              /* unresolved operations in the index */
    uint64_t unsynced;        /* records written, their fdatasync not done yet */
    uint64_t sync_failures;   /* fdatasyncs of records (or directory syncs after
                               * a compaction's rename) that failed, since open */
} sg_ledger_stats;
/** An sg_ledger_stats ready for sg_ledger_get_stats. */
#define SG_LEDGER_STATS_INIT \
    { sizeof(sg_ledger_stats), 0, 0, 0, 0, 0, 0, 0, 0 }

/**
 * sg_ledger_sync - wait until every record @l had written when it was
 * called is on stable storage, for at most @max_wait_ns (< 0: as long as
 * it takes; 0: do not wait, only tell): the sync thread's next fdatasync
 * (PostgreSQL: the writer thread's commits); with SG_LEDGER_FSYNC_ALWAYS
 * or _NEVER it returns at once.  It never syncs on its own, nor takes the
 * handle's mutex or the file lock: a graceful shutdown, a test or a health
 * check calls it, and an event loop never needs to.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL     @l is NULL;
 *   SG_ETIMEDOUT  @max_wait_ns passed first: some records are still being
 *                 synced (sg_ledger_get_stats counts them);
 *   SG_EIO        an fdatasync (or commit) of this handle's records failed
 *                 since the last sg_ledger_sync that said so: the records
 *                 before it are not known to be durable, and never will be
 *                 (a failed fdatasync is not retried).  Each failure is
 *                 reported once here and once to the next intent; it comes
 *                 before SG_ETIMEDOUT.
 * Thread-safety: may run while other threads use @l.
 */
SG_EXTERN int sg_ledger_sync(sg_ledger *l, int64_t max_wait_ns);

/**
 * sg_ledger_get_stats - what the handle has seen (it does not catch up).
 *
 * @out's size says how much of it to fill (SG_LEDGER_STATS_INIT).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @l or @out is NULL, or @out->size is not set;
 *   SG_ELOCKED another thread held the handle past the lock timeout.
 */
SG_EXTERN int sg_ledger_get_stats(sg_ledger *l, sg_ledger_stats *out);

#ifdef __cplusplus
}
#endif

/* Recording an operation - by hand or as its observer - and reconciling
 * it, in a header of its own. */
#include <streamguard/ledger_record.h>

#endif /* STREAMGUARD_LEDGER_H */
