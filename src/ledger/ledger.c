/*
 * The ledger handle: one append-only file of records in a directory, shared
 * by every process on the machine through flock(2) on a separate lock file
 * (the data file itself is replaced by compaction, so it cannot carry the
 * lock), and an in-memory index of the unresolved operations.
 *
 * Every call that reads or writes first takes the lock, notices a file
 * replaced by another process's compaction, and catches up with the records
 * appended since this handle last looked.  So each handle's index always
 * reflects a prefix of the file that ends at a record boundary, and every
 * decision (is this key live?) is taken on the whole file under the lock.
 */
#define _GNU_SOURCE
#include "ledger/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_MAX_LIVE ((size_t)1 << 20)
#define INITIAL_BUCKETS 64

typedef struct entry {
    struct entry *hnext; /* hash chain */
    struct entry *prev;  /* insertion order, oldest first */
    struct entry *next;
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
} entry;

struct sg_ledger {
    pthread_mutex_t mu;
    sg_ledger_options opts;
    int dir_fd;
    int lock_fd;
    int data_fd;
    uint64_t off;  /* end of the last record (or skipped run) consumed */
    uint64_t size; /* file size as last seen; > off means a tail */
    sg_ledger_stats stats;
    entry **buckets;
    size_t nbuckets;
    size_t live;
    entry *head;
    entry *tail;
    entry *spare; /* an intent's entry, allocated before its record is written */
    size_t spare_url_cap;
    uint8_t recbuf[SG__LEDGER_REC_MAX];
};

/* ------------------------------------------------------------------ index */

static uint32_t hash_key(const char *k, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    }
    return h;
}

static entry *find(const sg_ledger *l, const char *key, size_t len) {
    uint32_t h = hash_key(key, len);
    for (entry *e = l->buckets[h & (l->nbuckets - 1)]; e != NULL; e = e->hnext) {
        if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0) {
            return e;
        }
    }
    return NULL;
}

/* Doubling keeps chains short; a failed allocation only keeps them longer,
 * so insertion itself never fails. */
static void maybe_grow(sg_ledger *l) {
    if (l->live < l->nbuckets * 2) {
        return;
    }
    size_t n = l->nbuckets * 2;
    entry **b = calloc(n, sizeof(*b));
    if (b == NULL) {
        return;
    }
    for (entry *e = l->head; e != NULL; e = e->next) {
        e->hnext = b[e->hash & (n - 1)];
        b[e->hash & (n - 1)] = e;
    }
    free(l->buckets);
    l->buckets = b;
    l->nbuckets = n;
}

static void insert(sg_ledger *l, entry *e) {
    e->hash = hash_key(e->key, e->key_len);
    e->hnext = l->buckets[e->hash & (l->nbuckets - 1)];
    l->buckets[e->hash & (l->nbuckets - 1)] = e;
    e->prev = l->tail;
    e->next = NULL;
    if (l->tail != NULL) {
        l->tail->next = e;
    } else {
        l->head = e;
    }
    l->tail = e;
    l->live++;
    maybe_grow(l);
}

static void remove_entry(sg_ledger *l, entry *e) {
    entry **pp = &l->buckets[e->hash & (l->nbuckets - 1)];
    while (*pp != e) {
        pp = &(*pp)->hnext;
    }
    *pp = e->hnext;
    if (e->prev != NULL) {
        e->prev->next = e->next;
    } else {
        l->head = e->next;
    }
    if (e->next != NULL) {
        e->next->prev = e->prev;
    } else {
        l->tail = e->prev;
    }
    l->live--;
    free(e);
}

static void clear_index(sg_ledger *l) {
    entry *e = l->head;
    while (e != NULL) {
        entry *n = e->next;
        free(e);
        e = n;
    }
    memset(l->buckets, 0, l->nbuckets * sizeof(*l->buckets));
    l->head = l->tail = NULL;
    l->live = 0;
}

static entry *new_entry(size_t url_len) {
    return calloc(1, sizeof(entry) + url_len + 1);
}

/* The one place records change the index, for replay and for our own
 * appends alike, so both always agree.  Records about keys that are not
 * live (resolved, reconciled, or dropped by compaction) are ignored. */
static int apply(const sg__ledger_rec *r, uint64_t off, size_t size, void *ud) {
    sg_ledger *l = ud;
    (void)off;
    (void)size;
    if (r->type < SG__LREC_INTENT || r->type > SG__LREC_RECONCILE) {
        return 0; /* a newer writer's record type */
    }
    entry *e = find(l, r->key, r->key_len);
    switch (r->type) {
    case SG__LREC_INTENT:
        if (e != NULL) {
            return 0; /* the first owner stays; writers never produce this */
        }
        if (l->live >= l->opts.max_live) {
            return SG_ETOOMANY;
        }
        /* Our own intent's entry was allocated before the write, so that
         * applying it cannot fail once the record is in the file. */
        e = NULL;
        if (l->spare != NULL && r->url_len <= l->spare_url_cap) {
            e = l->spare;
            l->spare = NULL;
        }
        if (e == NULL) {
            e = new_entry(r->url_len);
            if (e == NULL) {
                return SG_ENOMEM;
            }
        }
        e->state = SG_LEDGER_PENDING;
        e->pid = r->pid;
        e->first_seen_ns = r->wall_ns;
        e->last_update_ns = r->wall_ns;
        e->key_len = r->key_len;
        memcpy(e->key, r->key, r->key_len);
        e->key[r->key_len] = '\0';
        memcpy(e->method, r->method, r->method_len);
        e->method[r->method_len] = '\0';
        memcpy(e->url, r->url, r->url_len);
        e->url[r->url_len] = '\0';
        insert(l, e);
        return 0;
    case SG__LREC_ATTEMPT:
        if (e == NULL || e->state != SG_LEDGER_PENDING) {
            return 0;
        }
        if (r->n > e->attempts) {
            e->attempts = r->n;
        }
        e->has_last = true;
        e->last_outcome = r->outcome;
        e->last_phase = r->phase;
        e->last_flags = r->flags;
        e->last_status = r->http_status;
        e->last_attempt_ns = r->wall_ns;
        e->last_update_ns = r->wall_ns;
        return 0;
    case SG__LREC_RESOLVE:
        if (e == NULL || e->state != SG_LEDGER_PENDING) {
            return 0;
        }
        if (r->resolution != SG_LEDGER_UNKNOWN) {
            remove_entry(l, e);
            return 0;
        }
        e->state = SG_LEDGER_UNRESOLVED_UNKNOWN;
        e->final_outcome = r->outcome;
        e->resolved_ns = r->wall_ns;
        e->last_update_ns = r->wall_ns;
        return 0;
    case SG__LREC_RECONCILE:
        if (e != NULL) {
            remove_entry(l, e);
        }
        return 0;
    default:
        return 0;
    }
}

/* ----------------------------------------------------------- file and lock */

static int64_t wall_now(const sg_ledger *l) {
    if (l->opts.wall_clock != NULL && l->opts.wall_clock->now != NULL) {
        return l->opts.wall_clock->now(l->opts.wall_clock->user_data);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * SG_SEC(1) + ts.tv_nsec;
}

static int64_t mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SG_SEC(1) + ts.tv_nsec;
}

/* flock, not fcntl: fcntl locks belong to the process, so two handles in
 * one process would not exclude each other, and closing any descriptor of
 * the file would drop them. */
static int take_lock(sg_ledger *l, int how) {
    if (l->opts.lock_timeout_ns == 0) {
        while (flock(l->lock_fd, how) != 0) {
            if (errno != EINTR) {
                return SG_ESYS;
            }
        }
        return 0;
    }
    int64_t deadline = sg_time_add(mono_now(), l->opts.lock_timeout_ns);
    for (;;) {
        if (flock(l->lock_fd, how | LOCK_NB) == 0) {
            return 0;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) {
            return SG_ESYS;
        }
        if (mono_now() >= deadline) {
            return SG_ELOCKED;
        }
        struct timespec ts = {0, 1000000}; /* 1 ms: locks are held for µs..ms */
        nanosleep(&ts, NULL);
    }
}

static void drop_lock(sg_ledger *l) {
    int saved = errno;
    flock(l->lock_fd, LOCK_UN);
    errno = saved;
}

static int fsync_fd(int fd) {
    while (fsync(fd) != 0) {
        if (errno != EINTR) {
            return SG_EIO;
        }
    }
    return 0;
}

static int datasync_fd(int fd) {
    while (fdatasync(fd) != 0) {
        if (errno != EINTR) {
            return SG_EIO;
        }
    }
    return 0;
}

/* Opens the data file, creating it (and making its name durable) when it
 * does not exist yet. */
static int open_data(sg_ledger *l, int *fd_out) {
    int fd = openat(l->dir_fd, SG__LEDGER_DATA, O_RDWR | O_APPEND | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        fd = openat(l->dir_fd, SG__LEDGER_DATA, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC,
                    0600);
        if (fd >= 0 && fsync_fd(l->dir_fd) != 0) {
            close(fd);
            return SG_EIO;
        }
    }
    if (fd < 0) {
        return SG_ESYS;
    }
    *fd_out = fd;
    return 0;
}

/* Under the lock: follow a compaction done elsewhere, then read what was
 * appended since this handle last looked. */
static int refresh(sg_ledger *l) {
    struct stat fs;
    struct stat ps;
    if (fstat(l->data_fd, &fs) != 0) {
        return SG_ESYS;
    }
    bool replaced = fs.st_nlink == 0;
    if (!replaced) {
        if (fstatat(l->dir_fd, SG__LEDGER_DATA, &ps, 0) == 0) {
            replaced = ps.st_dev != fs.st_dev || ps.st_ino != fs.st_ino;
        } else if (errno == ENOENT) {
            replaced = true; /* removed by hand: start a new file */
        } else {
            return SG_ESYS;
        }
    }
    /* A file shorter than what we consumed was rewritten outside the lock
     * protocol: the only safe view is a fresh one. */
    if (replaced || (uint64_t)fs.st_size < l->off) {
        if (replaced) {
            int fd;
            int rv = open_data(l, &fd);
            if (rv != 0) {
                return rv;
            }
            close(l->data_fd);
            l->data_fd = fd;
            if (fstat(fd, &fs) != 0) {
                return SG_ESYS;
            }
            /* A compactor running with FSYNC_NEVER may not have synced its
             * rename: our synced records must not land in a file whose name
             * a power loss could take back. */
            if (l->opts.fsync != SG_LEDGER_FSYNC_NEVER && fsync_fd(l->dir_fd) != 0) {
                return SG_EIO;
            }
        }
        clear_index(l);
        l->off = 0;
        memset(&l->stats, 0, sizeof(l->stats));
    }
    l->size = (uint64_t)fs.st_size;
    sg__ledger_scan sc;
    int rv = sg__ledger_scan_fd(l->data_fd, l->off, l->size, apply, l, &sc);
    l->off = sc.end;
    l->stats.records += sc.records;
    l->stats.corrupt_regions += sc.corrupt_regions;
    l->stats.corrupt_bytes += sc.corrupt_bytes;
    l->stats.tail_bytes = sc.tail_bytes;
    l->stats.file_bytes = l->size;
    return rv;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return SG_EIO;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Under the exclusive lock, after refresh: append one record and apply it.
 * Once the record is in the file it is applied even when the sync fails:
 * other processes will read it, so must we. */
static int append(sg_ledger *l, const sg__ledger_rec *rec, bool sync) {
    int n = sg__ledger_encode(rec, l->recbuf, sizeof(l->recbuf));
    if (n < 0) {
        return n;
    }
    if (l->size > l->off) {
        /* A torn tail left by a writer that died mid-record: cut it off, or
         * our record would sit behind garbage (still found by the resync,
         * but the file would grow a corrupt region with every crash). */
        if (ftruncate(l->data_fd, (off_t)l->off) != 0) {
            return SG_ESYS;
        }
        l->size = l->off;
        l->stats.tail_bytes = 0;
    }
    int rv = write_all(l->data_fd, l->recbuf, (size_t)n);
    if (rv != 0) {
        /* Best effort: a failure here only leaves a tail the next writer
         * cuts off. */
        if (ftruncate(l->data_fd, (off_t)l->off) == 0) {
            l->size = l->off;
        }
        return rv;
    }
    l->off += (uint64_t)n;
    l->size = l->off;
    l->stats.records++;
    l->stats.file_bytes = l->size;
    int arv = apply(rec, l->off - (uint64_t)n, (size_t)n, l);
    if (sync) {
        rv = datasync_fd(l->data_fd);
    }
    return rv != 0 ? rv : arv;
}

static bool sync_for(const sg_ledger *l, uint8_t type) {
    switch (l->opts.fsync) {
    case SG_LEDGER_FSYNC_ALWAYS:
        return true;
    case SG_LEDGER_FSYNC_NEVER:
        return false;
    case SG_LEDGER_FSYNC_DEFAULT:
    default:
        return type != SG__LREC_ATTEMPT;
    }
}

/* ------------------------------------------------------------ open, close */

void sg_ledger_options_init(sg_ledger_options *o) {
    if (o != NULL) {
        memset(o, 0, sizeof(*o));
    }
}

static void fsync_parent(const char *dir) {
    char parent[PATH_MAX];
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') {
        len--;
    }
    while (len > 0 && dir[len - 1] != '/') {
        len--;
    }
    if (len == 0) {
        memcpy(parent, ".", 2);
    } else {
        memcpy(parent, dir, len);
        parent[len] = '\0';
    }
    int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync_fd(fd);
        close(fd);
    }
}

void sg_ledger_close(sg_ledger *l) {
    if (l == NULL) {
        return;
    }
    clear_index(l);
    free(l->buckets);
    free(l->spare);
    if (l->data_fd >= 0) {
        close(l->data_fd);
    }
    if (l->lock_fd >= 0) {
        close(l->lock_fd);
    }
    if (l->dir_fd >= 0) {
        close(l->dir_fd);
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int sg_ledger_open(sg_ledger **out, const char *dir, const sg_ledger_options *opts) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    if (dir == NULL || dir[0] == '\0') {
        return SG_EINVAL;
    }
    sg_ledger_options o;
    sg_ledger_options_init(&o);
    if (opts != NULL) {
        o = *opts;
    }
    if (o.fsync != SG_LEDGER_FSYNC_DEFAULT && o.fsync != SG_LEDGER_FSYNC_ALWAYS &&
        o.fsync != SG_LEDGER_FSYNC_NEVER) {
        return SG_EINVAL;
    }
    if (o.lock_timeout_ns < 0) {
        return SG_EINVAL;
    }
    if (o.lock_timeout_ns > SG_DURATION_MAX || strlen(dir) >= PATH_MAX) {
        return SG_ERANGE;
    }
    if (o.max_live == 0) {
        o.max_live = DEFAULT_MAX_LIVE;
    }
    sg_ledger *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return SG_ENOMEM;
    }
    l->dir_fd = l->lock_fd = l->data_fd = -1;
    l->opts = o;
    l->nbuckets = INITIAL_BUCKETS;
    l->buckets = calloc(l->nbuckets, sizeof(*l->buckets));
    if (l->buckets == NULL || pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l->buckets);
        free(l);
        return SG_ENOMEM;
    }
    int rv = 0;
    if (mkdir(dir, 0700) == 0) {
        fsync_parent(dir);
    } else if (errno != EEXIST) {
        rv = SG_ESYS;
    }
    if (rv == 0) {
        l->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (l->dir_fd < 0) {
            rv = SG_ESYS;
        }
    }
    if (rv == 0) {
        l->lock_fd =
            openat(l->dir_fd, SG__LEDGER_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (l->lock_fd < 0) {
            rv = SG_ESYS;
        }
    }
    if (rv == 0) {
        rv = open_data(l, &l->data_fd);
    }
    if (rv == 0) {
        rv = take_lock(l, LOCK_SH);
        if (rv == 0) {
            rv = refresh(l);
            drop_lock(l);
        }
    }
    if (rv != 0) {
        int saved = errno;
        sg_ledger_close(l);
        errno = saved;
        return rv;
    }
    *out = l;
    return 0;
}

/* ----------------------------------------------------------------- records */

/* Runs @fn under the handle's mutex and the file lock (@how), after a
 * refresh.  Every public entry point goes through here. */
typedef int (*locked_fn)(sg_ledger *l, void *arg);

static int with_lock(sg_ledger *l, int how, locked_fn fn, void *arg) {
    pthread_mutex_lock(&l->mu);
    int rv = take_lock(l, how);
    if (rv == 0) {
        rv = refresh(l);
        if (rv == 0) {
            rv = fn(l, arg);
        }
        drop_lock(l);
    }
    pthread_mutex_unlock(&l->mu);
    return rv;
}

static size_t key_len_checked(const char *key, int *rv) {
    *rv = sg_ledger_key_check(key);
    return *rv == 0 ? strlen(key) : 0;
}

static int do_intent(sg_ledger *l, void *arg) {
    sg__ledger_rec *r = arg;
    if (find(l, r->key, r->key_len) != NULL) {
        return SG_EEXIST;
    }
    if (l->live >= l->opts.max_live) {
        return SG_ETOOMANY;
    }
    free(l->spare);
    l->spare = new_entry(r->url_len);
    if (l->spare == NULL) {
        return SG_ENOMEM;
    }
    l->spare_url_cap = r->url_len;
    r->wall_ns = wall_now(l);
    int rv = append(l, r, sync_for(l, r->type));
    /* Unused when the write failed; never left for another record. */
    free(l->spare);
    l->spare = NULL;
    return rv;
}

int sg_ledger_intent(sg_ledger *l, const char *key, const char *method, const char *url) {
    if (l == NULL || method == NULL || url == NULL) {
        return SG_EINVAL;
    }
    int rv;
    sg__ledger_rec r = {.type = SG__LREC_INTENT};
    r.key = key;
    r.key_len = key_len_checked(key, &rv);
    if (rv != 0) {
        return rv;
    }
    r.method = method;
    r.method_len = strnlen(method, SG_LEDGER_METHOD_MAX + 1);
    r.url = url;
    r.url_len = strnlen(url, SG_LEDGER_URL_MAX + 1);
    if ((rv = sg__ledger_check_method(method, r.method_len)) != 0 ||
        (rv = sg__ledger_check_url(url, r.url_len)) != 0) {
        return rv;
    }
    r.pid = (int32_t)getpid();
    return with_lock(l, LOCK_EX, do_intent, &r);
}

/* Attempt, resolve: the key must be live and still pending. */
static int do_update(sg_ledger *l, void *arg) {
    sg__ledger_rec *r = arg;
    entry *e = find(l, r->key, r->key_len);
    if (e == NULL) {
        return SG_ENOTFOUND;
    }
    if (r->type != SG__LREC_RECONCILE && e->state != SG_LEDGER_PENDING) {
        return SG_ESTATE;
    }
    r->wall_ns = wall_now(l);
    return append(l, r, sync_for(l, r->type));
}

int sg_ledger_attempt(sg_ledger *l, const char *key, uint32_t n, sg_outcome outcome,
                      sg_phase phase, bool sent, int http_status, bool outcome_unknown) {
    if (l == NULL || n == 0 || (unsigned)outcome >= SG_OUTCOME_COUNT_ ||
        (unsigned)phase >= SG_PHASE_COUNT_ ||
        (http_status != 0 && (http_status < 100 || http_status > 599))) {
        return SG_EINVAL;
    }
    int rv;
    sg__ledger_rec r = {.type = SG__LREC_ATTEMPT};
    r.key = key;
    r.key_len = key_len_checked(key, &rv);
    if (rv != 0) {
        return rv;
    }
    r.n = n;
    r.outcome = (uint8_t)outcome;
    r.phase = (uint8_t)phase;
    r.flags =
        (uint8_t)((sent ? SG__LATT_SENT : 0) | (outcome_unknown ? SG__LATT_UNKNOWN : 0));
    r.http_status = (uint16_t)http_status;
    return with_lock(l, LOCK_EX, do_update, &r);
}

int sg_ledger_attempt_record(sg_ledger *l, const char *key, const sg_op_attempt *rec) {
    if (rec == NULL) {
        return SG_EINVAL;
    }
    return sg_ledger_attempt(l, key, rec->n, rec->outcome, rec->phase, rec->sent,
                             rec->http_status, rec->outcome_unknown);
}

int sg_ledger_resolve(sg_ledger *l, const char *key, sg_ledger_resolution res,
                      sg_outcome outcome) {
    if (l == NULL || sg_ledger_resolution_name(res) == NULL ||
        (unsigned)outcome >= SG_OUTCOME_COUNT_) {
        return SG_EINVAL;
    }
    int rv;
    sg__ledger_rec r = {.type = SG__LREC_RESOLVE};
    r.key = key;
    r.key_len = key_len_checked(key, &rv);
    if (rv != 0) {
        return rv;
    }
    r.resolution = (uint8_t)res;
    r.outcome = (uint8_t)outcome;
    return with_lock(l, LOCK_EX, do_update, &r);
}

int sg_ledger_reconcile(sg_ledger *l, const char *key, const char *note) {
    if (l == NULL) {
        return SG_EINVAL;
    }
    int rv;
    sg__ledger_rec r = {.type = SG__LREC_RECONCILE};
    r.key = key;
    r.key_len = key_len_checked(key, &rv);
    if (rv != 0) {
        return rv;
    }
    r.note = note != NULL ? note : "";
    r.note_len = strnlen(r.note, SG_LEDGER_NOTE_MAX + 1);
    if ((rv = sg__ledger_check_note(r.note, r.note_len)) != 0) {
        return rv;
    }
    return with_lock(l, LOCK_EX, do_update, &r);
}

/* ----------------------------------------------------------------- listing */

int sg_ledger_list_unresolved(sg_ledger *l,
                              int (*cb)(const sg_ledger_entry *e, void *user_data),
                              void *user_data) {
    if (l == NULL || cb == NULL) {
        return SG_EINVAL;
    }
    pthread_mutex_lock(&l->mu);
    /* The shared lock is held only to catch up: the index is then a
     * snapshot of the file at one record boundary, and the callbacks run
     * without holding up writers in other processes. */
    int rv = take_lock(l, LOCK_SH);
    if (rv == 0) {
        rv = refresh(l);
        drop_lock(l);
    }
    for (const entry *e = rv == 0 ? l->head : NULL; e != NULL; e = e->next) {
        sg_ledger_entry x = {
            .key = e->key,
            .method = e->method,
            .url = e->url,
            .first_seen_ns = e->first_seen_ns,
            .last_update_ns = e->last_update_ns,
            .pid = e->pid,
            .state = (sg_ledger_state)e->state,
            .attempts = e->attempts,
            .has_last = e->has_last,
            .last_outcome = (sg_outcome)e->last_outcome,
            .last_phase = (sg_phase)e->last_phase,
            .last_http_status = e->last_status,
            .last_sent = (e->last_flags & SG__LATT_SENT) != 0,
            .last_outcome_unknown = (e->last_flags & SG__LATT_UNKNOWN) != 0,
            .final_outcome = (sg_outcome)e->final_outcome,
        };
        if (cb(&x, user_data) != 0) {
            rv = SG_ECANCELED;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return rv;
}

int sg_ledger_get_stats(sg_ledger *l, sg_ledger_stats *out) {
    if (l == NULL || out == NULL) {
        return SG_EINVAL;
    }
    pthread_mutex_lock(&l->mu);
    *out = l->stats;
    out->live = l->live;
    pthread_mutex_unlock(&l->mu);
    return 0;
}

/* -------------------------------------------------------------- compaction */

typedef struct cbuf {
    int fd;
    uint8_t *buf;
    size_t len;
    size_t cap;
    uint64_t total;
    uint64_t records;
    int rv;
} cbuf;

static void cbuf_flush(cbuf *c) {
    if (c->rv == 0 && c->len > 0) {
        c->rv = write_all(c->fd, c->buf, c->len);
    }
    c->len = 0;
}

static void cbuf_add(cbuf *c, const sg__ledger_rec *r, uint8_t *scratch) {
    if (c->rv != 0) {
        return;
    }
    int n = sg__ledger_encode(r, scratch, SG__LEDGER_REC_MAX);
    if (n < 0) {
        c->rv = n;
        return;
    }
    if (c->len + (size_t)n > c->cap) {
        cbuf_flush(c);
    }
    memcpy(c->buf + c->len, scratch, (size_t)n);
    c->len += (size_t)n;
    c->total += (uint64_t)n;
    c->records++;
}

/* Re-emits one live operation as the fewest records that replay to the
 * same entry. */
static void emit_entry(cbuf *c, const entry *e, uint8_t *scratch) {
    sg__ledger_rec r = {.type = SG__LREC_INTENT};
    r.wall_ns = e->first_seen_ns;
    r.key = e->key;
    r.key_len = e->key_len;
    r.pid = e->pid;
    r.method = e->method;
    r.method_len = strlen(e->method);
    r.url = e->url;
    r.url_len = strlen(e->url);
    cbuf_add(c, &r, scratch);
    if (e->has_last) {
        sg__ledger_rec a = {.type = SG__LREC_ATTEMPT};
        a.wall_ns = e->last_attempt_ns;
        a.key = e->key;
        a.key_len = e->key_len;
        a.n = e->attempts;
        a.outcome = e->last_outcome;
        a.phase = e->last_phase;
        a.flags = e->last_flags;
        a.http_status = e->last_status;
        cbuf_add(c, &a, scratch);
    }
    if (e->state == SG_LEDGER_UNRESOLVED_UNKNOWN) {
        sg__ledger_rec s = {.type = SG__LREC_RESOLVE};
        s.wall_ns = e->resolved_ns;
        s.key = e->key;
        s.key_len = e->key_len;
        s.resolution = SG_LEDGER_UNKNOWN;
        s.outcome = e->final_outcome;
        cbuf_add(c, &s, scratch);
    }
}

static int do_compact(sg_ledger *l, void *arg) {
    (void)arg;
    cbuf c = {.cap = (size_t)64 * 1024};
    c.buf = malloc(c.cap);
    if (c.buf == NULL) {
        return SG_ENOMEM;
    }
    /* A compactor that died left its temporary file: O_TRUNC reuses it.
     * The exclusive lock means no one else is writing it now. */
    c.fd =
        openat(l->dir_fd, SG__LEDGER_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (c.fd < 0) {
        free(c.buf);
        return SG_ESYS;
    }
    for (const entry *e = l->head; e != NULL && c.rv == 0; e = e->next) {
        emit_entry(&c, e, l->recbuf);
    }
    cbuf_flush(&c);
    free(c.buf);
    int rv = c.rv;
    /* The new file must be on disk before its name replaces the old one,
     * and the rename on disk before we say it happened.  FSYNC_NEVER skips
     * both: the swap stays atomic for a process crash, not a power loss. */
    bool sync = l->opts.fsync != SG_LEDGER_FSYNC_NEVER;
    if (rv == 0 && sync) {
        rv = fsync_fd(c.fd);
    }
    close(c.fd);
    if (rv == 0 && renameat(l->dir_fd, SG__LEDGER_TMP, l->dir_fd, SG__LEDGER_DATA) != 0) {
        rv = SG_ESYS;
    }
    if (rv != 0) {
        unlinkat(l->dir_fd, SG__LEDGER_TMP, 0);
        return rv;
    }
    rv = sync ? fsync_fd(l->dir_fd) : 0;
    /* From here the new file is the ledger whatever happens; follow it. */
    int fd = openat(l->dir_fd, SG__LEDGER_DATA, O_RDWR | O_APPEND | O_CLOEXEC);
    struct stat fs;
    if (fd < 0 || fstat(fd, &fs) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        /* The next call sees the old descriptor unlinked and reopens. */
        return rv != 0 ? rv : SG_ESYS;
    }
    close(l->data_fd);
    l->data_fd = fd;
    if ((uint64_t)fs.st_size == c.total) {
        l->off = l->size = c.total;
        memset(&l->stats, 0, sizeof(l->stats));
        l->stats.records = c.records;
        l->stats.file_bytes = c.total;
    } else {
        /* Not what we wrote: replay it rather than trust the index. */
        clear_index(l);
        l->off = 0;
        memset(&l->stats, 0, sizeof(l->stats));
        int r2 = refresh(l);
        if (rv == 0) {
            rv = r2;
        }
    }
    return rv;
}

int sg_ledger_compact(sg_ledger *l) {
    if (l == NULL) {
        return SG_EINVAL;
    }
    return with_lock(l, LOCK_EX, do_compact, NULL);
}
