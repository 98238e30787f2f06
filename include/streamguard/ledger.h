/*
 * streamguard ledger: durable intent records and stable idempotency keys.
 *
 * A POST that timed out after it was sent may already have charged a card or
 * created something.  The ledger lets the caller record the intent BEFORE the
 * first attempt, each attempt's result, and how the operation ended (done,
 * failed, or outcome unknown), in an append-only file inside a directory.
 * Whatever was never resolved - because the outcome is unknown, or because
 * the process died mid-operation - can be listed and reconciled later, by
 * this process or by any other one on the same machine.
 *
 * The ledger plugs into an operation as its policy observer (docs/ledger.md
 * has the full workflow); no transport knows of it:
 *
 *   sg_ledger *l;  sg_ledger_open(&l, "/var/lib/app/ledger", NULL);
 *   char key[SG_LEDGER_KEY_SIZE];
 *   sg_ledger_key_derive("POST", url, body, body_len, key);
 *   sg_ledger_binding b = {l, key};  // key: used without an idempotency key
 *   sg_op_options_set_target(&policy, url);
 *   sg_op_options_set_observer(&policy, sg_ledger_observer(), &b);
 *   ... run the operation on any transport: the intent is recorded before
 *   ... the first request (or the operation is refused), then each attempt
 *   ... and the resolution.
 *   sg_ledger_close(l);
 *
 * Your own loop may call sg_ledger_op_intent / _attempt / _resolve instead.
 *
 * Durability: every record carries a CRC32C and is in the file when its
 * call returns 0, so a process crash cannot lose it.  When sg_ledger_intent
 * returns 0 its record has also been fdatasync'ed on the caller's thread
 * (with the default fsync policy), so it survives a power loss too.  The
 * other records (attempts, resolutions, reconciliations) are fdatasync'ed by
 * the handle's sync thread soon after, one fdatasync for all the records
 * written before it (group commit), so an event loop never waits for the
 * disk to end an operation.  A resolution written but not yet synced when the
 * power is lost is gone after the restart: its operation is listed as
 * pending again and is reconciled - the conservative side, never a lost
 * intent.  sg_ledger_sync waits until every written record is durable;
 * sg_ledger_close does so before it returns.  On open the file is replayed;
 * a torn or corrupt record is never read as a valid one and never costs a
 * valid record before or after it.
 *
 * Sharing: several processes on one machine may open the same directory.
 * Appends, reads and compaction are serialised by flock(2) on a lock file in
 * the directory; local file systems only (flock is not reliable over NFS).
 *
 * Several machines: the same calls on PostgreSQL, chosen by the location
 * given to sg_ledger_open ("postgresql://..." instead of a directory): one
 * row per key under a unique constraint, so exactly one worker anywhere
 * owns an unresolved key and the others get SG_EEXIST (and an owner whose
 * key was reconciled and taken again is fenced off); the intent is
 * committed before its call returns, attempts and resolutions by the
 * handle's writer thread right after (sg_ledger_sync waits for them); every
 * call is bounded, and a lost connection refuses the operation.  The schema is applied
 * explicitly (sg_ledger_init_schema).  The durability, sync-thread and memory notes below
 * are the file ledger's; docs/ledger.md ("The PostgreSQL backend") and
 * docs/ledger-multi-machine.md have the database's.
 *
 * Memory: the handle keeps an index of the unresolved operations only; it is
 * bounded by their number (at most sg_ledger_options.max_live) and by the
 * size caps below, never by the length of the file.
 *
 * Thread-safety: an sg_ledger has an internal mutex; any function may be
 * called on one handle from several threads.  With the default fsync policy
 * a handle starts one thread of its own, with every signal blocked, at its
 * first record other than an intent (when it cannot, records are synced on
 * the caller's thread instead); sg_ledger_close joins it.  A handle
 * must not be used, not even closed, in a child after fork(): the child has
 * no such thread and shares the parent's lock.  Functions that take no
 * sg_ledger are reentrant.
 */
#ifndef STREAMGUARD_LEDGER_H
#define STREAMGUARD_LEDGER_H

#include <streamguard/core.h>
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
 *  (sg_ledger_options.intent_connections). */
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
 * sg_ledger_options - a ledger's configuration.  Zero-initialise it or call
 * sg_ledger_options_init(); every zero field takes its default.
 *
 * fsync:           see sg_ledger_fsync.  Default SG_LEDGER_FSYNC_DEFAULT.
 * wall_clock:      stamps records ("first seen"); must return unix time in
 *                  nanoseconds.  Default NULL: clock_gettime(CLOCK_REALTIME).
 *                  Wall time is only displayed, never used as a duration.
 * max_live:        most unresolved operations the index holds; an intent
 *                  beyond it is refused with SG_ETOOMANY.  Replaying the
 *                  file is bounded by it too: a file that, at some point of
 *                  its history, held more unresolved at once (written by a
 *                  handle with a larger max_live) is refused with
 *                  SG_ETOOMANY by every call until a handle that can hold
 *                  it compacts the file.  Give every handle on one
 *                  directory the same max_live.  Default 1048576.
 * lock_timeout_ns: how long a call waits for another process's lock, or
 *                  for the handle while another thread of this process uses
 *                  it (a sync, a compaction, a listing's callbacks), before
 *                  failing with SG_ELOCKED (PostgreSQL: its lock_timeout, for
 *                  another worker's transaction on the same row).  Default
 *                  0: wait as long as it takes.  At most SG_DURATION_MAX.
 * timeout_ns:      PostgreSQL only: the bound of connecting (in
 *                  sg_ledger_open, and again after a lost connection) and
 *                  of every call that no operation's budget bounds; an
 *                  operation's intent is bounded by its budget instead (see
 *                  sg_ledger_op_intent).  Past it: SG_ETIMEDOUT.  Default 0:
 *                  10 s.  At most SG_DURATION_MAX.
 * intent_connections: PostgreSQL only: how many intents the handle records
 *                  at once, each on a connection of its own.  An intent
 *                  waiting for a row another transaction holds keeps its
 *                  connection; intents of other keys go on, on the others,
 *                  so the wait is charged to that operation alone.  With
 *                  this many waiting at once, the next waits for one to
 *                  come free, within its own bound.  The first is the
 *                  connection sg_ledger_open makes; the others are opened
 *                  by an intent that finds none free (its bound pays for
 *                  connecting) and kept until close.  sg_ledger_observer's
 *                  intent threads are as many.  Default 0: 4.  At most
 *                  SG_LEDGER_INTENT_CONNECTIONS_MAX.
 * close_timeout_ns: PostgreSQL only: the most sg_ledger_close waits,
 *                  counted from the close, for the attempts and resolutions
 *                  still queued to commit (and for intents still being
 *                  recorded for operations already gone).  When it passes,
 *                  every statement still running is given up at once - its
 *                  connection closed, so the server rolls back what it had
 *                  not committed - and what was not committed is dropped:
 *                  those operations stay listed pending until reconciled.
 *                  A caller that must end by a deadline calls sg_ledger_sync
 *                  with the time it has left first (its answer says
 *                  whether every record was committed), with a short
 *                  close_timeout_ns.  Default 0: timeout_ns.  At most
 *                  SG_DURATION_MAX.
 * The file ledger ignores timeout_ns, intent_connections and
 * close_timeout_ns (its intents
 * take turns on the file lock whatever their keys), and PostgreSQL ignores
 * fsync, wall_clock and max_live (the intent is committed before its call
 * returns and the rest by the writer thread, the database's clock stamps
 * them, and the handle holds no index).
 */
typedef struct sg_ledger_options {
    sg_ledger_fsync fsync;
    const sg_clock *wall_clock;
    size_t max_live;
    int64_t lock_timeout_ns;
    int64_t timeout_ns;
    size_t intent_connections;
    int64_t close_timeout_ns;
} sg_ledger_options;

/** Resets @o to every default (the same as zero-initialising it). */
SG_EXTERN void sg_ledger_options_init(sg_ledger_options *o);

typedef struct sg_ledger sg_ledger;

/**
 * sg_ledger_open - open the ledger at @dir: a directory (the file ledger,
 * created when missing), or a PostgreSQL database when @dir starts with
 * "postgresql://" or "postgres://" (a libpq connection URI; what it leaves
 * out - host, user, password, database - libpq takes from the PG*
 * environment variables and ~/.pgpass as usual).
 *
 * PostgreSQL: connects, bounded by opts.timeout_ns, and checks that the
 * database has the ledger's schema (sql/ledger_schema_v1.sql, applied by
 * sg_ledger_init_schema, never by this call).  Up to
 * intent_connections + 2 connections per handle: the intents' (the first
 * is the one this call makes, the others are opened as intents wait side
 * by side), the writer thread's (opened with the first attempt or
 * resolution) and one for reads, reconciles and compaction (opened by the
 * first); a call that finds its connection lost connects again, bounded
 * as that call is.  The intent is committed
 * (synchronous_commit as the server has it; a session with it off turns
 * it on) before its call returns; attempts and resolutions are queued to
 * the writer thread, which commits them in call order - sg_ledger_sync
 * waits for them, and a record it could not commit fails the next intent
 * and the next sg_ledger_sync with SG_EIO.  Besides the
 * codes below: SG_ECONNECT (could not connect), SG_ETIMEDOUT (not within
 * timeout_ns), SG_ESTATE (the database has no ledger schema),
 * SG_EUNSUPPORTED (its schema is newer than this library's, or the
 * library was built without PostgreSQL: SG_WITH_POSTGRESQL=OFF).
 *
 * The file ledger:
 * Creates @dir (one level, mode 0700) and its files (mode 0600: URLs may
 * carry secrets), then replays the file under a shared lock to build the
 * index of unresolved operations.  A torn tail (a record a crashed writer
 * left half-written) is ignored, and cut off by the next append; a corrupt
 * record in the middle is skipped and the valid records after it are kept
 * (sg_ledger_get_stats counts both).  @opts is copied; NULL means defaults.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes:
 *   SG_EINVAL    @out or @dir is NULL, @dir is empty, or @opts has an
 *                unknown fsync policy or a negative lock_timeout_ns,
 *                timeout_ns or close_timeout_ns;
 *   SG_ERANGE    @dir is longer than PATH_MAX allows, lock_timeout_ns,
 *                timeout_ns or close_timeout_ns > SG_DURATION_MAX, or
 *                intent_connections > SG_LEDGER_INTENT_CONNECTIONS_MAX;
 *   SG_ENOMEM    out of memory;
 *   SG_ESYS      creating or opening the directory or a file failed (errno
 *                says why, e.g. EACCES, ENOTDIR); PostgreSQL: the handle's
 *                eventfd could not be made;
 *   SG_EIO       reading the file failed, or syncing the directory entry of
 *                a newly created file failed;
 *   SG_ELOCKED   another process held the lock longer than lock_timeout_ns;
 *   SG_ETOOMANY  the file holds (or held, before a compaction yet to come)
 *                more than max_live unresolved operations at once.
 */
SG_EXTERN int sg_ledger_open(sg_ledger **out, const char *dir,
                             const sg_ledger_options *opts);

/**
 * sg_ledger_init_schema - make @location ready for sg_ledger_open.  For a
 * PostgreSQL URI: apply the ledger's schema, version 1
 * (sql/ledger_schema_v1.sql: CREATE ... IF NOT EXISTS in one transaction,
 * under an advisory lock), bounded by opts.timeout_ns.  Idempotent, and
 * safe while other workers use the ledger or apply it too.  For a
 * directory: sg_ledger_open and sg_ledger_close (it creates the files).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL        @location is NULL or empty, or @opts is invalid (as
 *                    sg_ledger_open);
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
 * policy closing first waits for the sync thread to fdatasync the ones not
 * yet synced (one fdatasync at most, usually), then joins it.  Whether that
 * last fdatasync worked is not returned: call sg_ledger_sync first to know.
 * PostgreSQL: commits the attempts and resolutions still queued, and lets
 * the intent threads finish the intents they record, for at most
 * opts.close_timeout_ns from the call; then gives up what is still running
 * (see sg_ledger_options) and returns, within a few milliseconds of that.
 * No other call on @l may run or follow.
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
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL        @method, @url or @out is NULL, or @body is NULL while
 *                    @body_len > 0;
 *   SG_ENOMEM        OpenSSL could not allocate a digest context;
 *   SG_EUNSUPPORTED  OpenSSL has no usable SHA-256 (e.g. a FIPS
 *                    configuration without its provider).
 * Thread-safety: reentrant.
 */
SG_EXTERN int sg_ledger_key_derive(const char *method, const char *url, const void *body,
                                   size_t body_len, char out[SG_LEDGER_KEY_SIZE]);

/**
 * sg_ledger_key_check - is @key a usable caller-supplied key: 1 ..
 * SG_LEDGER_KEY_MAX characters, each printable ASCII without space (0x21 ..
 * 0x7E), exactly what sg_op_options_set_idempotency_key accepts?
 *
 * Returns 0 if it is, or one of the following negative error codes:
 *   SG_EINVAL  @key is NULL, empty, or holds another character;
 *   SG_ERANGE  @key is longer than SG_LEDGER_KEY_MAX.
 * Thread-safety: reentrant.
 */
SG_EXTERN int sg_ledger_key_check(const char *key);

/* ------------------------------------------------------------------------
 * Records
 * ------------------------------------------------------------------------ */

/**
 * sg_ledger_intent - record that the operation @key is about to send its
 * first request: @method to @url.  Call it BEFORE the first attempt.  With
 * the default fsync policy, when it returns 0 the record is on stable
 * storage and survives a crash; when it fails, do not send the request.
 * Its fdatasync runs on the caller's thread and also makes durable every
 * record written before it.
 *
 * A key can be owned by one operation at a time on this ledger: an intent
 * for a key that is still unresolved (here or in another process) fails
 * with SG_EEXIST - the earlier operation may have taken effect, reconcile it
 * first.  A key whose operation was resolved done or failed, or reconciled,
 * may be used again.
 *
 * @method: a token of 1 .. SG_LEDGER_METHOD_MAX characters.
 * @url: 1 .. SG_LEDGER_URL_MAX bytes, none of them a control character or
 *   a space (0x00 .. 0x20, 0x7F); bytes from 0x80 are kept as they are.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    a NULL argument, a bad key (see sg_ledger_key_check), or
 *                @method / @url empty or holding a forbidden character;
 *   SG_ERANGE    @key, @method or @url is longer than its maximum;
 *   SG_EEXIST    @key is unresolved in the ledger;
 *   SG_ETOOMANY  max_live unresolved operations are already recorded (or
 *                catching up with other processes' records found more);
 *   SG_ENOMEM    out of memory;
 *   SG_ELOCKED   another process held the lock (or another thread the
 *                handle) longer than lock_timeout_ns;
 *   SG_ESYS      a lock, stat, truncate or reopen call failed (errno says
 *                why);
 *   SG_EIO       reading or writing the file failed, or fdatasync failed:
 *                the record is not known to be durable; or the sync
 *                thread's fdatasync failed since the last intent (nothing
 *                was written: the disk may be failing; the next intent
 *                tries again).
 */
SG_EXTERN int sg_ledger_intent(sg_ledger *l, const char *key, const char *method,
                               const char *url);

/**
 * sg_ledger_attempt - record how attempt @n (1-based) of the unresolved
 * operation @key ended: its outcome, the phase it ended in, whether any of
 * the request may have been sent, the HTTP status (0 for none) and whether
 * its outcome is unknown.  The operation's attempt count becomes the
 * largest @n recorded; "last outcome" becomes @outcome.  With the default
 * policy it is synced by the sync thread, after it returns (a process crash
 * cannot lose it once it returned; a power loss before that sync can).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @l or @key is NULL, a bad key, @n == 0, @outcome or
 *                @phase out of range, or @http_status outside 0 and
 *                100 .. 599;
 *   SG_ERANGE    @key is longer than SG_LEDGER_KEY_MAX;
 *   SG_ENOTFOUND @key is not an unresolved operation;
 *   SG_ESTATE    @key was already resolved as unknown (PostgreSQL: or
 *                this handle's intent of @key was reconciled and another
 *                intent took the key since: fenced off);
 *   SG_ENOMEM, SG_ELOCKED, SG_ESYS, SG_EIO  as sg_ledger_intent;
 *   SG_ETOOMANY  catching up with other processes' records found more than
 *                max_live unresolved operations.
 */
SG_EXTERN int sg_ledger_attempt(sg_ledger *l, const char *key, uint32_t n,
                                sg_outcome outcome, sg_phase phase, bool sent,
                                int http_status, bool outcome_unknown);

/**
 * sg_ledger_attempt_record - sg_ledger_attempt with the fields of a policy
 * attempt record (the one sg_curl_callbacks.on_attempt receives).
 *
 * Returns 0 if it succeeds, or the negative error codes of
 * sg_ledger_attempt (SG_EINVAL also when @rec is NULL).
 */
SG_EXTERN int sg_ledger_attempt_record(sg_ledger *l, const char *key,
                                       const sg_op_attempt *rec);

/** How an operation ended, as far as the ledger is concerned. */
typedef enum sg_ledger_resolution {
    /** It has its answer (outcome ok): nothing to reconcile. */
    SG_LEDGER_DONE = 1,
    /** It did not take effect, or the server said how it ended (an HTTP
     *  error status, never sent, refused): nothing to reconcile. */
    SG_LEDGER_FAILED = 2,
    /** It may have taken effect (an attempt was outcome_unknown): it stays
     *  listed until sg_ledger_reconcile. */
    SG_LEDGER_UNKNOWN = 3
} sg_ledger_resolution;

/** "done", "failed", "unknown", or NULL when out of range. */
SG_EXTERN const char *sg_ledger_resolution_name(sg_ledger_resolution r);

/**
 * sg_ledger_resolution_of - the resolution for a finished operation:
 * SG_LEDGER_UNKNOWN when any of its attempts was outcome_unknown, else
 * SG_LEDGER_DONE when its outcome is ok, else SG_LEDGER_FAILED.  Returns
 * SG_LEDGER_UNKNOWN for NULL (the safe answer).  Thread-safety: reentrant.
 */
SG_EXTERN sg_ledger_resolution sg_ledger_resolution_of(const sg_op *op);

/**
 * sg_ledger_resolve - record how the unresolved operation @key ended, with
 * the operation's final @outcome.  DONE and FAILED remove it from the
 * unresolved list; UNKNOWN keeps it there until sg_ledger_reconcile.
 * With the default policy it is synced by the sync thread, after it
 * returns, so an event loop never waits for the disk here; should the power
 * fail before that sync, the operation is listed again as pending after the
 * restart (and reconciled), never lost.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @l or @key is NULL, a bad key, or @res or @outcome out of
 *                range;
 *   SG_ERANGE    @key is longer than SG_LEDGER_KEY_MAX;
 *   SG_ENOTFOUND @key is not an unresolved operation (never recorded,
 *                already resolved, or reconciled meanwhile by an operator);
 *   SG_ESTATE    @key was already resolved as unknown (PostgreSQL: or
 *                fenced off, as for sg_ledger_attempt);
 *   SG_ENOMEM, SG_ELOCKED, SG_ESYS, SG_EIO  as sg_ledger_intent;
 *   SG_ETOOMANY  catching up with other processes' records found more than
 *                max_live unresolved operations.
 */
SG_EXTERN int sg_ledger_resolve(sg_ledger *l, const char *key, sg_ledger_resolution res,
                                sg_outcome outcome);

/* ------------------------------------------------------------------------
 * Recording an operation: the ledger as a policy observer, or by hand
 * ------------------------------------------------------------------------ */

/**
 * sg_ledger_binding - the user_data of sg_ledger_observer(): which ledger
 * records the operation, and the key to record it under when its policy
 * has no idempotency key (e.g. from sg_ledger_key_derive; NULL: none, and
 * an operation without an idempotency key is then refused with SG_EINVAL).
 * Borrowed by the operation: keep it, the ledger and the key alive until
 * the operation has ended or been freed.  One binding per operation, or
 * one for many when they all carry idempotency keys.
 */
typedef struct sg_ledger_binding {
    sg_ledger *ledger;
    const char *fallback_key;
} sg_ledger_binding;

/**
 * sg_ledger_observer - the intent ledger as a policy observer
 * (sg_op_options_set_observer with an sg_ledger_binding as user_data):
 *   on_intent      sg_ledger_op_intent with the policy's target as the URL:
 *                  the record is durable before anything is sent, and its
 *                  error (SG_EEXIST while the key is unresolved, SG_EINVAL
 *                  without a key or a target, any I/O error) refuses the
 *                  operation;
 *   on_attempt_end sg_ledger_op_attempt;
 *   on_resolve     sg_ledger_op_resolve;
 *   start_intent, poll_intent, abandon_intent
 *                  the same intent, recorded off the caller's thread:
 *                  the transports' own event loops (sg_curl_multi,
 *                  sg_h2_conn) use these, so an operation waiting for its
 *                  intent never holds up the others on the loop.  The
 *                  handle's intent threads (started as intents arrive)
 *                  record them in order, each bounded by its operation's
 *                  budget, and make an eventfd (one per pending intent)
 *                  readable when the answer is in.  An intent that lands
 *                  after its operation ended (cancelled, budget spent) is
 *                  resolved at once as failed with that outcome: nothing
 *                  was sent.  On PostgreSQL there are up to
 *                  intent_connections threads, each intent on a connection
 *                  of its own: one waiting for a row another transaction
 *                  holds delays no intent of another key (with that many
 *                  waiting at once, the next waits for a thread, within
 *                  its budget); none holds the handle's locks while the
 *                  database answers, so the loop's attempt and resolution
 *                  records (queued to the writer thread) never wait for
 *                  it.  The file ledger has one thread, its intents taking
 *                  turns as they do on the file lock; each holds the
 *                  handle through its write and fdatasync, which a record
 *                  of another operation may wait for.
 * Errors after the intent never change the outcome; the operation keeps
 * the first (sg_op_observer_error) and its transport reports it.
 *
 * Returns a pointer to an immutable table with static storage.
 * Thread-safety: reentrant; the calls it makes are as the ledger's.
 */
SG_EXTERN const sg_op_observer *sg_ledger_observer(void);

/**
 * sg_ledger_op_key - the key an operation is recorded under: its policy's
 * idempotency key when it has one (it names the operation everywhere),
 * else @fallback (e.g. from sg_ledger_key_derive).
 *
 * Returns the key, or NULL when @op has no idempotency key and @fallback is
 * NULL (then sg_ledger_op_intent fails with SG_EINVAL).
 * Thread-safety: reads only @op.
 */
SG_EXTERN const char *sg_ledger_op_key(const sg_op *op, const char *fallback);

/**
 * sg_ledger_op_intent - sg_ledger_intent for a started operation, with its
 * method: call it before the first request; if it fails, send nothing.
 * Waiting for another process's lock, or for the handle while another
 * thread uses it, ends when the operation's budget could lease nothing
 * more (its deadline less its floor, on CLOCK_MONOTONIC), or after
 * lock_timeout_ns, whichever is first: then SG_ELOCKED, and the operation
 * is refused rather than late.  PostgreSQL: the whole intent - waiting for
 * a free intent connection when intent_connections intents are in flight,
 * connecting (a new connection, or again after one was lost), and the
 * statement (its server-side statement_timeout too) - ends by the same
 * instant or by timeout_ns, whichever is first: then SG_ETIMEDOUT.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op never started, or @key or @url is NULL;
 *   any error of sg_ledger_intent() (e.g. SG_EEXIST while @key is
 *              unresolved).
 * Thread-safety: as sg_ledger_intent.
 */
SG_EXTERN int sg_ledger_op_intent(sg_ledger *l, const char *key, const sg_op *op,
                                  const char *url);

/**
 * sg_ledger_op_attempt - records @op's latest attempt that has ended (call
 * it after sg_op_attempt_done: the attempt it settled, unless a later
 * attempt - a hedge beside it - has ended since; one still running is
 * never recorded).  The observer (sg_ledger_observer) records each attempt
 * exactly as it ends.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL or has no attempt that has ended;
 *   any error of sg_ledger_attempt_record().
 * Thread-safety: as sg_ledger_attempt.
 */
SG_EXTERN int sg_ledger_op_attempt(sg_ledger *l, const char *key, const sg_op *op);

/**
 * sg_ledger_op_resolve - records how @op ended: unknown when any attempt's
 * outcome was unknown, done when ok, failed otherwise
 * (sg_ledger_resolution_of), with the operation's outcome.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL;
 *   any error of sg_ledger_resolve().
 * Thread-safety: as sg_ledger_resolve.
 */
SG_EXTERN int sg_ledger_op_resolve(sg_ledger *l, const char *key, const sg_op *op);

/**
 * sg_ledger_reconcile - an operator (or a reconciliation job) settled the
 * unresolved operation @key - resolved as unknown, or never resolved because
 * its process died: it is no longer listed.  @note (NULL for none) is kept
 * in the record for the audit trail: at most SG_LEDGER_NOTE_MAX bytes, no
 * control characters (spaces are fine).  With the default policy synced by
 * the sync thread, after it returns (as sg_ledger_resolve).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @l or @key is NULL, a bad key, or @note holds a control
 *                character;
 *   SG_ERANGE    @key or @note is longer than its maximum;
 *   SG_ENOTFOUND @key is not an unresolved operation;
 *   SG_ENOMEM, SG_ELOCKED, SG_ESYS, SG_EIO  as sg_ledger_intent;
 *   SG_ETOOMANY  catching up with other processes' records found more than
 *                max_live unresolved operations.
 */
SG_EXTERN int sg_ledger_reconcile(sg_ledger *l, const char *key, const char *note);

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

/**
 * sg_ledger_entry - one unresolved operation.  The strings are valid only
 * during the callback that receives it.
 */
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
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL    @l or @cb is NULL;
 *   SG_ECANCELED @cb returned non-zero;
 *   SG_ENOMEM, SG_ELOCKED, SG_ESYS, SG_EIO, SG_ETOOMANY  catching up failed
 *                (as sg_ledger_open).
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
 * leaves the old file or the new one, never a mix.  Cost: O(live) writes,
 * under the exclusive lock, so appends from every process wait for it (and
 * it waits for an fdatasync the sync thread is running).  Once it succeeds
 * every record this handle wrote before it is durable.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @l is NULL;
 *   SG_ENOMEM, SG_ELOCKED, SG_ESYS, SG_EIO, SG_ETOOMANY  as sg_ledger_intent
 *               (the old file is then left as it was).
 */
SG_EXTERN int sg_ledger_compact(sg_ledger *l);

/** What replaying the file found, since open or the last compaction; and
 *  how this handle's own records reached the disk, since open. */
typedef struct sg_ledger_stats {
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

/**
 * sg_ledger_sync - wait until every record @l had written when it was
 * called is on stable storage, for at most @max_wait_ns (< 0: as long as
 * it takes; 0: do not wait, only tell).  With the default policy that is
 * the sync thread's next fdatasync (or the one it is running, when it
 * started after the last record); with SG_LEDGER_FSYNC_ALWAYS every record
 * is durable when its call returns, and with SG_LEDGER_FSYNC_NEVER nothing
 * is ever synced: both return at once.  It never syncs on its own, nor
 * takes the handle's mutex, nor the file lock: a graceful shutdown, a test
 * or a health check calls it, and an event loop never needs to.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL     @l is NULL;
 *   SG_ETIMEDOUT  @max_wait_ns passed first: some records are still being
 *                 synced (sg_ledger_get_stats counts them);
 *   SG_EIO        an fdatasync of this handle's records failed since the
 *                 last sg_ledger_sync that said so: the records written
 *                 before it are not known to be durable, and never will be
 *                 (a failed fdatasync is not retried: the kernel may have
 *                 dropped what it could not write).  Each failure is
 *                 reported once here, and once to the next intent.  It
 *                 comes before SG_ETIMEDOUT when both apply.
 * Thread-safety: may run while other threads use @l.
 */
SG_EXTERN int sg_ledger_sync(sg_ledger *l, int64_t max_wait_ns);

/**
 * sg_ledger_get_stats - what the handle has seen (it does not catch up).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @l or @out is NULL;
 *   SG_ELOCKED another thread held the handle longer than lock_timeout_ns.
 */
SG_EXTERN int sg_ledger_get_stats(sg_ledger *l, sg_ledger_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_LEDGER_H */
