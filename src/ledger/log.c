/*
 * The ledger handle's in-memory index of unresolved operations and the data
 * file under it: replaying records into the index, the flock(2) protocol,
 * catching up with appends and compactions done by other processes, and
 * appending this handle's own records.  file.c and compact.c build on it.
 */
#define _GNU_SOURCE
#include "ledger/internal.h"
#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ index */

static uint32_t hash_key(const char *k, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (unsigned char)k[i]) * 16777619u;
    }
    return h;
}

sg__ledger_ent *sg__ledger_find(const sg_ledger *l, const char *key, size_t len) {
    uint32_t h = hash_key(key, len);
    for (sg__ledger_ent *e = l->buckets[h & (l->nbuckets - 1)]; e != NULL; e = e->hnext) {
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
    sg__ledger_ent **b = calloc(n, sizeof(*b));
    if (b == NULL) {
        return;
    }
    for (sg__ledger_ent *e = l->head; e != NULL; e = e->next) {
        e->hnext = b[e->hash & (n - 1)];
        b[e->hash & (n - 1)] = e;
    }
    free(l->buckets);
    l->buckets = b;
    l->nbuckets = n;
}

static void insert(sg_ledger *l, sg__ledger_ent *e) {
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

static void remove_entry(sg_ledger *l, sg__ledger_ent *e) {
    sg__ledger_ent **pp = &l->buckets[e->hash & (l->nbuckets - 1)];
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

void sg__ledger_clear_index(sg_ledger *l) {
    sg__ledger_ent *e = l->head;
    while (e != NULL) {
        sg__ledger_ent *n = e->next;
        free(e);
        e = n;
    }
    memset(l->buckets, 0, l->nbuckets * sizeof(*l->buckets));
    l->head = l->tail = NULL;
    l->live = 0;
}

sg__ledger_ent *sg__ledger_new_ent(size_t url_len) {
    return calloc(1, sizeof(sg__ledger_ent) + url_len + 1);
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
    sg__ledger_ent *e = sg__ledger_find(l, r->key, r->key_len);
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
            e = sg__ledger_new_ent(r->url_len);
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

int64_t sg__wall_clock_now(const sg_clock *wall) {
    if (sg__clock_custom(wall)) {
        return sg_clock_now(wall);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * SG_SEC(1) + ts.tv_nsec;
}

int64_t sg__ledger_wall_now(const sg_ledger *l) {
    return sg__wall_clock_now(l->opts.wall_clock);
}

static int64_t mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * SG_SEC(1) + ts.tv_nsec;
}

/* flock, not fcntl: fcntl locks belong to the process, so two handles in
 * one process would not exclude each other, and closing any descriptor of
 * the file would drop them. */
int sg__ledger_lock(sg_ledger *l, int how) {
    return sg__ledger_lock_until(l, how, SG_TIME_NEVER);
}

int64_t sg__ledger_lock_deadline(const sg_ledger *l, int64_t until) {
    return l->opts.lock_timeout_ns == 0
               ? until
               : sg_time_min(sg_time_add(mono_now(), l->opts.lock_timeout_ns), until);
}

int sg__ledger_lock_handle(sg_ledger *l) {
    int64_t deadline = sg__ledger_lock_deadline(l, SG_TIME_NEVER);
    return sg__ledger_mutex_lock_until(&l->mu, deadline) == 0 ? 0 : SG_ELOCKED;
}

int sg__ledger_lock_until(sg_ledger *l, int how, int64_t until) {
    if (l->opts.lock_timeout_ns == 0 && until == SG_TIME_NEVER) {
        while (flock(l->lock_fd, how) != 0) {
            if (errno != EINTR) {
                return SG_ESYS;
            }
        }
        return 0;
    }
    int64_t deadline = sg__ledger_lock_deadline(l, until);
    for (bool waited = false;; waited = true) {
        if (flock(l->lock_fd, how | LOCK_NB) == 0) {
            if (waited && mono_now() >= deadline) {
                /* it came, but at the deadline: refused rather than late */
                sg__ledger_unlock(l);
                return SG_ELOCKED;
            }
            return 0;
        }
        if (errno != EWOULDBLOCK && errno != EINTR) {
            return SG_ESYS;
        }
        int64_t left = deadline - mono_now();
        if (left <= 0) {
            return SG_ELOCKED;
        }
        /* 1 ms at a time (locks are held for µs..ms), never past the
         * deadline */
        struct timespec ts = {0, left < SG_MS(1) ? (long)left : 1000000L};
        nanosleep(&ts, NULL);
    }
}

void sg__ledger_unlock(sg_ledger *l) {
    int saved = errno;
    flock(l->lock_fd, LOCK_UN);
    errno = saved;
}

int sg__ledger_fsync(int fd) {
    while (fsync(fd) != 0) {
        if (errno != EINTR) {
            return SG_EIO;
        }
    }
    return 0;
}

/* Opens the data file, creating it (and making its name durable) when it
 * does not exist yet. */
int sg__ledger_open_data(sg_ledger *l, int *fd_out) {
    int fd = openat(l->dir_fd, SG__LEDGER_DATA, O_RDWR | O_APPEND | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        fd = openat(l->dir_fd, SG__LEDGER_DATA, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC,
                    0600);
        if (fd >= 0 && sg__ledger_fsync(l->dir_fd) != 0) {
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
int sg__ledger_refresh(sg_ledger *l, int64_t deadline) {
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
            int rv = sg__ledger_open_data(l, &fd);
            if (rv != 0) {
                return rv;
            }
            if (sg__ledger_sync_swap_fd(l, fd, false, deadline) != 0) {
                close(fd); /* the next call follows it */
                return SG_ELOCKED;
            }
            if (fstat(fd, &fs) != 0) {
                return SG_ESYS;
            }
            /* A compactor running with FSYNC_NEVER synced neither its file
             * nor its rename: our durable records, now only there, must not
             * sit in unwritten pages or under a name a power loss could
             * take back. */
            if (l->opts.fsync != SG_LEDGER_FSYNC_NEVER &&
                (l->sync.datasync(fd, l->sync.datasync_ud) != 0 ||
                 sg__ledger_sync_dir(l) != 0)) {
                return SG_EIO;
            }
        }
        sg__ledger_clear_index(l);
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

int sg__ledger_write_all(int fd, const uint8_t *p, size_t n) {
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
int sg__ledger_append(sg_ledger *l, const sg__ledger_rec *rec,
                      sg__ledger_sync_mode mode) {
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
    int rv = sg__ledger_write_all(l->data_fd, l->recbuf, (size_t)n);
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
    /* (an attempt with its usage is two records, as a replay counts them) */
    l->stats.records += rec->type == SG__LREC_ATTEMPT && rec->usage_source != 0 ? 2 : 1;
    l->stats.file_bytes = l->size;
    int arv = apply(rec, l->off - (uint64_t)n, (size_t)n, l);
    rv = sg__ledger_sync_written(l, mode);
    return rv != 0 ? rv : arv;
}

sg__ledger_sync_mode sg__ledger_sync_for(const sg_ledger *l, uint8_t type) {
    switch (l->opts.fsync) {
    case SG_LEDGER_FSYNC_ALWAYS:
        return SG__LSYNC_INLINE;
    case SG_LEDGER_FSYNC_NEVER:
        return SG__LSYNC_NONE;
    case SG_LEDGER_FSYNC_DEFAULT:
    default:
        /* Nothing may be sent before its intent is durable; everything
         * else may reach the disk a moment later (sync.c). */
        return type == SG__LREC_INTENT ? SG__LSYNC_INLINE : SG__LSYNC_DEFERRED;
    }
}

int sg__ledger_with_handle(sg_ledger *l, sg__ledger_locked_fn fn, void *arg) {
    int rv = sg__ledger_lock_handle(l);
    if (rv != 0) {
        return rv;
    }
    rv = fn(l, arg);
    pthread_mutex_unlock(&l->mu);
    return rv;
}

/* Runs @fn under the handle's mutex and the file lock (@how), after a
 * refresh.  Every call of the file backend that reads or writes the file
 * goes through here. */
int sg__ledger_with_lock(sg_ledger *l, int how, sg__ledger_locked_fn fn, void *arg) {
    return sg__ledger_with_lock_until(l, how, fn, arg, SG_TIME_NEVER);
}

int sg__ledger_with_lock_until(sg_ledger *l, int how, sg__ledger_locked_fn fn, void *arg,
                               int64_t until) {
    /* One bound for both waits: another thread of this process holding the
     * handle is waited for no longer than another process holding the file
     * (lock_timeout_ns, and @until). */
    int64_t deadline = sg__ledger_lock_deadline(l, until);
    if (sg__ledger_mutex_lock_until(&l->mu, deadline) != 0) {
        return SG_ELOCKED;
    }
    int rv = sg__ledger_lock_until(l, how, deadline);
    if (rv == 0) {
        rv = sg__ledger_refresh(l, deadline);
        if (rv == 0) {
            rv = fn(l, arg);
        }
        sg__ledger_unlock(l);
    }
    pthread_mutex_unlock(&l->mu);
    return rv;
}
