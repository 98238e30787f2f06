/* Private pieces of the ledger: the record codec and the file scanner,
 * shared by the ledger, its unit tests, the crash test and the fuzz target;
 * then the handle itself, shared by the files that implement it.
 * docs/ledger.md describes the format these implement. */
#ifndef SG_LEDGER_INTERNAL_H
#define SG_LEDGER_INTERNAL_H

#include <streamguard/ledger.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The options (opaque to callers; options.c sets them, each checked as it
 * is set).  Zero is every default; sg_ledger_open applies them. */
struct sg_ledger_options {
    sg_ledger_fsync fsync;
    const sg_clock *wall_clock; /* borrowed */
    size_t max_live;
    int64_t lock_timeout_ns;
    int64_t timeout_ns;
    size_t intent_connections;
    int64_t close_timeout_ns;
};

/* Record header, 16 bytes, integers little-endian:
 *   0  magic    1E 53 47 4C  ("\x1eSGL")
 *   4  version  1
 *   5  type     1 intent, 2 attempt, 3 resolve, 4 reconcile
 *   6  reserved 0, 0
 *   8  length   u32, payload bytes, at most SG__LEDGER_PAYLOAD_MAX
 *  12  crc      u32, CRC32C (Castagnoli) of bytes 0..11 then the payload
 * The magic starts with 0x1E, a control byte no string field may hold, so a
 * record can never be forged from inside a URL, key or note. */
#define SG__LEDGER_HDR 16
#define SG__LEDGER_VERSION 1
#define SG__LEDGER_PAYLOAD_MAX 16384
#define SG__LEDGER_REC_MAX (SG__LEDGER_HDR + SG__LEDGER_PAYLOAD_MAX)
#define SG__LEDGER_MAGIC0 0x1E

enum sg__ledger_type {
    SG__LREC_INTENT = 1,
    SG__LREC_ATTEMPT = 2,
    SG__LREC_RESOLVE = 3,
    SG__LREC_RECONCILE = 4,
    /* an attempt's usage, written right after its attempt record: a
     * reader that does not know it skips it, the attempt stays whole */
    SG__LREC_USAGE = 5,
};

#define SG__LATT_SENT 0x01
#define SG__LATT_UNKNOWN 0x02

/* A decoded record: the strings point into the decoder's input and are not
 * NUL-terminated. */
typedef struct sg__ledger_rec {
    uint8_t type;
    int64_t wall_ns;
    const char *key;
    size_t key_len;
    /* intent */
    int32_t pid;
    const char *method;
    size_t method_len;
    const char *url;
    size_t url_len;
    /* attempt */
    uint32_t n;
    uint8_t phase;
    uint8_t flags;
    uint16_t http_status;
    /* attempt (then a usage record follows it) and usage: an sg_usage_source
     * (0: none, no usage record), and input, output, cached input and
     * reasoning tokens, -1 unknown */
    uint8_t usage_source;
    int64_t usage[4];
    /* attempt and resolve */
    uint8_t outcome;
    /* resolve */
    uint8_t resolution;
    /* reconcile */
    const char *note;
    size_t note_len;
} sg__ledger_rec;

uint32_t sg__crc32c(uint32_t crc, const void *p, size_t n);

/* Field checks shared by the API and the decoder. */
int sg__ledger_check_key(const char *s, size_t len);
int sg__ledger_check_method(const char *s, size_t len);
int sg__ledger_check_url(const char *s, size_t len);
int sg__ledger_check_note(const char *s, size_t len);

/* @u (NULL: nothing) as @r's usage: a source of provider or estimate, its
 * counts; else none, no usage record. */
void sg__ledger_rec_usage(sg__ledger_rec *r, const sg_op_usage *u);

/* Encodes @rec into @buf (at least SG__LEDGER_REC_MAX bytes): an attempt
 * with a usage source is two records, the attempt and its usage.  Returns
 * the bytes written, or SG_EINVAL / SG_ERANGE when a field is invalid. */
int sg__ledger_encode(const sg__ledger_rec *rec, uint8_t *buf, size_t cap);

/* Decodes the record at @p.  Returns its size (> 0) when a whole valid
 * record is there; 0 when @avail is too short to tell (fewer than 16 bytes,
 * or a plausible header whose record runs past @avail); -1 when the bytes
 * are not a valid record (bad magic, version, length, checksum or field).
 * A record of an unknown type with a good checksum decodes with its type
 * set and no other field; an attempt or a resolution carrying a value this
 * version does not know (an outcome, phase, flag or resolution added
 * since) decodes as type 0 and no field: both are skipped, never taken for
 * corrupt bytes. */
int sg__ledger_decode(const uint8_t *p, size_t avail, sg__ledger_rec *rec);

/* Called for each valid record with its offset and size.  A negative return
 * stops the scan; that record counts as not consumed. */
typedef int (*sg__ledger_rec_cb)(const sg__ledger_rec *rec, uint64_t off, size_t size,
                                 void *user_data);

typedef struct sg__ledger_scan {
    uint64_t end;             /* offset after the last record consumed */
    uint64_t records;         /* valid records passed to the callback */
    uint64_t corrupt_regions; /* invalid runs followed by a valid record */
    uint64_t corrupt_bytes;
    uint64_t tail_bytes; /* invalid or incomplete bytes up to the end */
} sg__ledger_scan;

/* Scans [@from, @size) of @fd (or @buf[0..@len)): every valid record goes to
 * @cb; an invalid run followed by a valid record is skipped (resync on the
 * next magic whose record checks); an invalid or incomplete run reaching the
 * end is the tail, left unconsumed.  Returns 0, the callback's negative
 * code, or SG_EIO / SG_ENOMEM.  @out is filled in every case. */
int sg__ledger_scan_fd(int fd, uint64_t from, uint64_t size, sg__ledger_rec_cb cb,
                       void *user_data, sg__ledger_scan *out);
int sg__ledger_scan_mem(const uint8_t *buf, size_t len, sg__ledger_rec_cb cb,
                        void *user_data, sg__ledger_scan *out);

/* File names inside the ledger directory. */
#define SG__LEDGER_DATA "ledger.sgl"
#define SG__LEDGER_LOCK "ledger.lock"
#define SG__LEDGER_TMP "ledger.sgl.compact"

/* ------------------------------------------------------------- the handle
 * ledger.c holds the public calls and dispatches them to the handle's
 * backend.  The file backend is split by concern: file.c opens and closes
 * it and holds its operations, log.c the index and the file under the
 * lock, compact.c the rewrite, sync.c the group commit and its thread.
 * Only those files (and the unit tests) touch the file's state. */

/* One unresolved operation in the handle's index. */
typedef struct sg__ledger_ent {
    struct sg__ledger_ent *hnext; /* hash chain */
    struct sg__ledger_ent *prev;  /* insertion order, oldest first */
    struct sg__ledger_ent *next;
    uint32_t hash;
    uint8_t state; /* SG_LEDGER_PENDING or SG_LEDGER_UNRESOLVED_UNKNOWN */
    bool has_last;
    uint8_t last_outcome;
    uint8_t last_phase;
    uint8_t last_flags;
    uint8_t final_outcome;
    uint16_t last_status;
    uint32_t attempts;
    int32_t pid;
    int64_t first_seen_ns;
    int64_t last_attempt_ns;
    int64_t resolved_ns;
    int64_t last_update_ns;
    size_t key_len;
    char key[SG_LEDGER_KEY_MAX + 1];
    char method[SG_LEDGER_METHOD_MAX + 1];
    char url[]; /* NUL-terminated */
} sg__ledger_ent;

/* How a record reaches stable storage, from opts.fsync and its type. */
typedef enum sg__ledger_sync_mode {
    SG__LSYNC_NONE,     /* FSYNC_NEVER: never */
    SG__LSYNC_INLINE,   /* fdatasync on the caller's thread, before it returns */
    SG__LSYNC_DEFERRED, /* by the sync thread, soon after (group commit) */
} sg__ledger_sync_mode;

/* The group commit (sync.c).  Records are counted as they are written; a
 * fdatasync that starts after the first N were written makes those N
 * durable, whichever thread runs it.  Everything here is under @mu, which
 * is taken after the handle's mutex, never before it.  data_fd changes
 * only with both held (sg__ledger_sync_swap_fd), so the thread reads it
 * under this one alone. */
typedef struct sg__ledger_syncer {
    pthread_mutex_t mu;
    pthread_cond_t work; /* the thread waits here for records or stop */
    pthread_cond_t done; /* synced moved, or the thread put its fd down */
    pthread_t thread;
    bool started;         /* the thread runs (started by the first deferred record) */
    bool stop;            /* sg_ledger_close: sync what is left, then exit */
    bool busy;            /* the thread is in an fdatasync of data_fd */
    uint64_t written;     /* records written under a syncing policy */
    uint64_t wanted;      /* the thread is to sync through this one */
    uint64_t synced;      /* records settled: durable, or their sync failed */
    uint64_t failures;    /* fdatasyncs (and directory syncs) that failed */
    uint64_t told_intent; /* failures an intent (or a record's caller) saw */
    uint64_t told_sync;   /* failures sg_ledger_sync reported */
    /* The fdatasync itself: sg__ledger_datasync unless a unit test puts its
     * own here before the first record.  Returns 0 or SG_EIO. */
    int (*datasync)(int fd, void *user_data);
    void *datasync_ud;
    /* The directory's fsync after a rename (a compaction, ours or one we
     * follow): sg__ledger_dirsync unless a unit test puts its own here.
     * Same user data; 0 or SG_EIO. */
    int (*dirsync)(int fd, void *user_data);
} sg__ledger_syncer;

/* ----------------------------------------------------------- the backends
 * One table of functions per backend: the file's (file.c, over log.c,
 * sync.c and compact.c), the embedded default, and PostgreSQL's (pg.c, in
 * a build with it).  The public calls (ledger.c) check their arguments
 * once, then call through the handle's table and never name a backend.
 * Every entry takes what it needs of the handle's mutex itself, waiting
 * for it no longer than lock_timeout_ns (SG_ELOCKED): the file's with its
 * file lock, under one bound, a database's never while the database
 * answers.  @until is a CLOCK_MONOTONIC instant (SG_TIME_NEVER: the
 * backend's own bound).  A record's key and fields were checked. */
typedef struct sg__ledger_backend {
    const char *name;
    /* Makes @l a handle on @location: @l is zero but for its mutex
     * (initialised) and its options (checked, no default applied yet:
     * the backend applies its own).  Starts the intent threads
     * (sg__ledger_intents_init) with as many as it takes intents at once.
     * Returns 0, or an error with everything it set up taken down again
     * (the caller frees @l). */
    int (*open)(sg_ledger *l, const char *location);
    /* sg_ledger_init_schema on @location, @opts checked. */
    int (*init_schema)(const char *location, const sg_ledger_options *opts);
    /* Joins the intent threads (sg__ledger_intents_close), settles what is
     * queued within the backend's own bound, and frees what open set up;
     * the caller destroys the mutex and frees @l.  Never called after a
     * failed open, which undoes itself. */
    void (*close)(sg_ledger *l);
    /* From any thread: every statement running, or run from now on,
     * fails at once (SG_ECANCELED): what close gives up once its bound
     * has passed.  The file's does nothing: its fdatasyncs cannot be
     * given up, so its close waits for them. */
    void (*interrupt)(sg_ledger *l);
    /* The records: the backend may stamp @r's wall time.  Each returns
     * what the public call of its name documents (ledger.h). */
    int (*intent)(sg_ledger *l, sg__ledger_rec *r, int64_t until);
    int (*attempt)(sg_ledger *l, sg__ledger_rec *r);
    int (*resolve)(sg_ledger *l, sg__ledger_rec *r);
    int (*reconcile)(sg_ledger *l, sg__ledger_rec *r);
    int (*list)(sg_ledger *l, int (*cb)(const sg_ledger_entry *e, void *user_data),
                void *user_data);
    int (*compact)(sg_ledger *l);
    /* sg_ledger_sync: the records written or queued before it are settled
     * by @until; a failure since the last sync is told (SG_EIO). */
    int (*sync)(sg_ledger *l, int64_t until);
    /* The fields of sg_ledger_stats it keeps, into @out (zeroed). */
    int (*stats)(sg_ledger *l, sg_ledger_stats *out);
} sg__ledger_backend;

/* file.c: the file in a directory, the embedded default. */
extern const sg__ledger_backend sg__ledger_file_backend;
#ifdef SG_HAVE_POSTGRESQL
/* pg.c: PostgreSQL, for a postgresql:// or postgres:// URI.  A library
 * built without it (SG_WITH_POSTGRESQL=OFF: no libpq) has no such table,
 * and refuses such a location with SG_EUNSUPPORTED. */
extern const sg__ledger_backend sg__ledger_pg_backend;
#endif

/* The intent threads (async.c): intents recorded off the caller's thread
 * for sg_ledger_observer's start_intent, up to @max at once.  A thread is
 * started when an intent is queued and no started one is free to take
 * it, until there are @max. */
typedef struct sg__intent_job sg__intent_job;
typedef struct sg__ledger_intents {
    pthread_mutex_t mu; /* taken alone, or after nothing of the handle */
    pthread_cond_t work;
    pthread_cond_t done; /* a job ended (close waits here; monotonic) */
    pthread_t threads[SG_LEDGER_INTENT_CONNECTIONS_MAX];
    size_t max;      /* threads at most */
    size_t nthreads; /* started */
    size_t idle;     /* started, waiting for a job */
    size_t queued;   /* jobs in the queue */
    size_t running;  /* jobs being recorded */
    bool ready;      /* mu and work are initialised */
    bool stop;
    sg__intent_job *head; /* queued, in order */
    sg__intent_job *tail;
} sg__ledger_intents;

/* @max: how many intents are recorded at once (1 .. the threads' room). */
int sg__ledger_intents_init(sg_ledger *l, size_t max);
/* Frees the queue and joins the threads after the intents they record,
 * if any: waiting for those no later than @until, then giving them up
 * through the backend's interrupt (the file's cannot be: SG_TIME_NEVER). */
void sg__ledger_intents_close(sg_ledger *l, int64_t until);
/* Queues an intent of @key for the thread, bounded by @until: 0 and the
 * job in *@out, or SG_EINVAL (a bad field), SG_ENOMEM, SG_ESYS. */
int sg__ledger_intent_start(sg_ledger *l, const char *key, const char *method,
                            const char *url, int64_t until, sg__intent_job **out);
/* The eventfd readable once the job's answer is in. */
int sg__ledger_intent_fd(const sg__intent_job *j);
/* SG_EINPROGRESS, or the intent's answer (then the job is freed). */
int sg__ledger_intent_poll(sg_ledger *l, sg__intent_job *j);
/* The operation ended at @outcome before the answer was taken: the job is
 * freed (now or by the thread), and an intent that lands is resolved. */
void sg__ledger_intent_abandon(sg_ledger *l, sg__intent_job *j, sg_outcome outcome);

struct sg_ledger {
    /* The backend its location named, and that backend's own state when
     * it keeps it apart (PostgreSQL's; NULL for the file, whose state is
     * the part below). */
    const sg__ledger_backend *backend;
    void *state;
    /* Every backend's: */
    pthread_mutex_t mu;
    sg_ledger_options opts; /* its defaults applied by the backend's open */
    sg__ledger_intents intents;
    /* The file backend's (file.c, log.c, sync.c, compact.c), embedded in
     * the handle: zero in a handle of another backend. */
    struct {
        int dir_fd;
        int lock_fd;
        int data_fd;
        uint64_t off;  /* end of the last record (or skipped run) consumed */
        uint64_t size; /* file size as last seen; > off means a tail */
        sg_ledger_stats stats;
        sg__ledger_ent **buckets;
        size_t nbuckets;
        size_t live;
        sg__ledger_ent *head;
        sg__ledger_ent *tail;
        /* an intent's entry, allocated before its record is written */
        sg__ledger_ent *spare;
        size_t spare_url_cap;
        sg__ledger_syncer sync;
        uint8_t recbuf[SG__LEDGER_REC_MAX];
    };
};

/* log.c: the index of the live operations. */
sg__ledger_ent *sg__ledger_find(const sg_ledger *l, const char *key, size_t len);
sg__ledger_ent *sg__ledger_new_ent(size_t url_len);
void sg__ledger_clear_index(sg_ledger *l);

/* log.c: the clock, the lock and the data file. */
/* Unix time in ns: @wall's, or CLOCK_REALTIME's when it is none. */
int64_t sg__wall_clock_now(const sg_clock *wall);
int64_t sg__ledger_wall_now(const sg_ledger *l);
/* flock(@how) on the lock file, waiting at most opts.lock_timeout_ns. */
int sg__ledger_lock(sg_ledger *l, int how);
/* The same, waiting for the file lock no later than @until (monotonic;
 * SG_TIME_NEVER: only lock_timeout_ns bounds it): SG_ELOCKED after. */
int sg__ledger_lock_until(sg_ledger *l, int how, int64_t until);
/* The instant a wait for the ledger that starts now ends: @until, or
 * lock_timeout_ns from now when that is sooner. */
int64_t sg__ledger_lock_deadline(const sg_ledger *l, int64_t until);
/* The handle's mutex, waited for at most lock_timeout_ns: 0, or
 * SG_ELOCKED (another thread held it longer). */
int sg__ledger_lock_handle(sg_ledger *l);
void sg__ledger_unlock(sg_ledger *l);
int sg__ledger_fsync(int fd);
int sg__ledger_open_data(sg_ledger *l, int *fd_out);
/* Under the lock: catch up with the file (and its replacement), waiting
 * for the sync thread's fdatasync in progress no later than @deadline
 * (SG_ELOCKED then; SG_TIME_NEVER: no bound). */
int sg__ledger_refresh(sg_ledger *l, int64_t deadline);
int sg__ledger_write_all(int fd, const uint8_t *p, size_t n);
/* Under the exclusive lock, after a refresh: append @rec, apply it, and
 * sync it as @mode says. */
int sg__ledger_append(sg_ledger *l, const sg__ledger_rec *rec, sg__ledger_sync_mode mode);
/* How a record of @type is synced under opts.fsync. */
sg__ledger_sync_mode sg__ledger_sync_for(const sg_ledger *l, uint8_t type);

/* sync.c: the group commit.  Init and close bracket the handle's life
 * (close syncs what is pending and joins the thread). */
int sg__ledger_sync_init(sg_ledger *l);
void sg__ledger_sync_close(sg_ledger *l);
/* fdatasync(@fd), retried on EINTR: 0 or SG_EIO.  The default datasync. */
int sg__ledger_datasync(int fd, void *user_data);
/* fsync(@fd) of a directory, retried on EINTR: 0 or SG_EIO.  The default
 * dirsync. */
int sg__ledger_dirsync(int fd, void *user_data);
/* The ledger directory made durable (its entries: a rename) through the
 * dirsync.  A failure counts as a failed sync: the next intent and
 * sg_ledger_sync report it (SG_EIO), as they do a failed fdatasync - the
 * records after it may sit under a name a power loss takes back. */
int sg__ledger_sync_dir(sg_ledger *l);
/* Under the handle's mutex, right after a record was written: count it and
 * make it durable as @mode says.  Returns 0, or SG_EIO when an inline
 * fdatasync failed. */
int sg__ledger_sync_written(sg_ledger *l, sg__ledger_sync_mode mode);
/* Under the handle's mutex: close data_fd and put @fd in its place once the
 * thread is not syncing it, waiting for that no later than @deadline
 * (SG_ETIMEDOUT then, and nothing changed; SG_TIME_NEVER: no bound).
 * @covered: every record written so far is durable in @fd's file already
 * (a synced compaction). */
int sg__ledger_sync_swap_fd(sg_ledger *l, int fd, bool covered, int64_t deadline);
/* Before an intent is written: SG_EIO when a background sync failed since
 * an intent last heard of it (then it has), else 0. */
int sg__ledger_sync_take_failure(sg_ledger *l);
/* The sync fields of sg_ledger_stats. */
void sg__ledger_sync_stats(sg_ledger *l, sg_ledger_stats *out);
/* A thread for a handle (the sync thread, the PostgreSQL writer), which
 * blocks every signal (they are the application's): 0 or SG_ESYS. */
int sg__ledger_spawn(pthread_t *thread, void *(*fn)(void *), void *arg);
/* A condition variable whose timed waits take CLOCK_MONOTONIC instants. */
int sg__ledger_cond_init(pthread_cond_t *cond);
/* One wait on @cond (made by sg__ledger_cond_init) under @mu, at most until
 * @deadline (SG_TIME_NEVER: no bound): SG_ETIMEDOUT once it has passed,
 * else 0 (woken, or a spurious wakeup: the caller checks again). */
int sg__ledger_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline);

/* @mu, waited for at most until @deadline (CLOCK_MONOTONIC; SG_TIME_NEVER:
 * no bound): 0 once held, SG_ETIMEDOUT when @deadline passed first (another
 * thread of this process held it: a sync, a statement, a listing). */
int sg__ledger_mutex_lock_until(pthread_mutex_t *mu, int64_t deadline);

typedef int (*sg__ledger_locked_fn)(sg_ledger *l, void *arg);
int sg__ledger_with_lock(sg_ledger *l, int how, sg__ledger_locked_fn fn, void *arg);
int sg__ledger_with_lock_until(sg_ledger *l, int how, sg__ledger_locked_fn fn, void *arg,
                               int64_t until);
/* sg_ledger_intent whose lock wait ends at @until (see sg__ledger_lock_until). */
int sg__ledger_intent_until(sg_ledger *l, const char *key, const char *method,
                            const char *url, int64_t until);

/* sync.c, compact.c: the file backend's sync and compact. */
int sg__ledger_file_sync(sg_ledger *l, int64_t until);
int sg__ledger_file_compact(sg_ledger *l);

/* The handle's mutex (waited for as sg__ledger_lock_handle waits) around
 * @fn: for a backend whose call guards state of the handle but takes no
 * file lock. */
int sg__ledger_with_handle(sg_ledger *l, sg__ledger_locked_fn fn, void *arg);

#endif
