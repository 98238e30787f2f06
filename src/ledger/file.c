/*
 * The file backend, the embedded default: one append-only file of records
 * in a directory, shared by every process on the machine through flock(2)
 * on a separate lock file (the data file itself is replaced by compaction,
 * so it cannot carry the lock), and an in-memory index of the unresolved
 * operations.
 *
 * Every call that reads or writes first takes the lock, notices a file
 * replaced by another process's compaction, and catches up with the records
 * appended since this handle last looked.  So each handle's index always
 * reflects a prefix of the file that ends at a record boundary, and every
 * decision (is this key live?) is taken on the whole file under the lock.
 *
 * This file opens and closes the handle and holds its operations, behind
 * the backend table (sg__ledger_file_backend); log.c holds the index and
 * the file protocol, compact.c the compaction, sync.c the group commit.
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
#include <unistd.h>

#define DEFAULT_MAX_LIVE ((size_t)1 << 20)
#define INITIAL_BUCKETS 64

/* ------------------------------------------------------------ open, close */

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
        sg__ledger_fsync(fd);
        close(fd);
    }
}

static void file_close(sg_ledger *l) {
    /* First: the intent threads record through the handle.  The file's
     * fdatasyncs cannot be given up: they are waited for, however long. */
    sg__ledger_intents_close(l, SG_TIME_NEVER);
    /* Then the sync thread: its last fdatasync needs the data file open. */
    sg__ledger_sync_close(l);
    sg__ledger_clear_index(l);
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
}

/* The directory (made when missing), its lock file and its data file,
 * then the index caught up with the file. */
static int open_dir(sg_ledger *l, const char *dir) {
    if (mkdir(dir, 0700) == 0) {
        fsync_parent(dir);
    } else if (errno != EEXIST) {
        return SG_ESYS;
    }
    l->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->dir_fd < 0) {
        return SG_ESYS;
    }
    l->lock_fd = openat(l->dir_fd, SG__LEDGER_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (l->lock_fd < 0) {
        return SG_ESYS;
    }
    int rv = sg__ledger_open_data(l, &l->data_fd);
    if (rv != 0) {
        return rv;
    }
    rv = sg__ledger_lock(l, LOCK_SH);
    if (rv == 0) {
        rv = sg__ledger_refresh(l, SG_TIME_NEVER);
        sg__ledger_unlock(l);
    }
    return rv;
}

static int file_open(sg_ledger *l, const char *dir) {
    if (strlen(dir) >= PATH_MAX) {
        return SG_ERANGE;
    }
    l->dir_fd = l->lock_fd = l->data_fd = -1;
    if (l->opts.max_live == 0) {
        l->opts.max_live = DEFAULT_MAX_LIVE;
    }
    l->nbuckets = INITIAL_BUCKETS;
    l->buckets = calloc(l->nbuckets, sizeof(*l->buckets));
    if (l->buckets == NULL) {
        return SG_ENOMEM;
    }
    if (sg__ledger_sync_init(l) != 0) {
        free(l->buckets);
        return SG_ENOMEM;
    }
    /* From here file_close takes down what is set up.  One intent thread:
     * the file's intents take turns on its lock anyway. */
    int rv = sg__ledger_intents_init(l, 1) != 0 ? SG_ENOMEM : open_dir(l, dir);
    if (rv != 0) {
        int saved = errno;
        file_close(l);
        errno = saved;
    }
    return rv;
}

static int file_init_schema(const char *dir, const sg_ledger_options *opts) {
    /* The file has no schema: opening it makes the directory and files. */
    sg_ledger *l = NULL;
    int rv = sg_ledger_open(&l, dir, opts);
    sg_ledger_close(l);
    return rv;
}

/* Nothing to give up: file_close waits for the intents (SG_TIME_NEVER),
 * so sg__ledger_intents_close never gets here. */
static void file_interrupt(sg_ledger *l) {
    (void)l;
}

/* ----------------------------------------------------------------- records */

static int do_intent(sg_ledger *l, void *arg) {
    sg__ledger_rec *r = arg;
    /* A record the sync thread could not make durable says the disk is
     * failing: refuse this intent (nothing written, so nothing is sent)
     * rather than promise. */
    int rv = sg__ledger_sync_take_failure(l);
    if (rv != 0) {
        return rv;
    }
    if (sg__ledger_find(l, r->key, r->key_len) != NULL) {
        return SG_EEXIST;
    }
    if (l->live >= l->opts.max_live) {
        return SG_ETOOMANY;
    }
    free(l->spare);
    l->spare = sg__ledger_new_ent(r->url_len);
    if (l->spare == NULL) {
        return SG_ENOMEM;
    }
    l->spare_url_cap = r->url_len;
    r->wall_ns = sg__ledger_wall_now(l);
    rv = sg__ledger_append(l, r, sg__ledger_sync_for(l, r->type));
    /* Unused when the write failed; never left for another record. */
    free(l->spare);
    l->spare = NULL;
    return rv;
}

static int file_intent(sg_ledger *l, sg__ledger_rec *r, int64_t until) {
    return sg__ledger_with_lock_until(l, LOCK_EX, do_intent, r, until);
}

/* Attempt, resolve: the key must be live and still pending; reconcile:
 * live. */
static int do_update(sg_ledger *l, void *arg) {
    sg__ledger_rec *r = arg;
    sg__ledger_ent *e = sg__ledger_find(l, r->key, r->key_len);
    if (e == NULL) {
        return SG_ENOTFOUND;
    }
    if (r->type != SG__LREC_RECONCILE && e->state != SG_LEDGER_PENDING) {
        return SG_ESTATE;
    }
    r->wall_ns = sg__ledger_wall_now(l);
    return sg__ledger_append(l, r, sg__ledger_sync_for(l, r->type));
}

/* Attempt, resolve, reconcile: appended to the file. */
static int file_update(sg_ledger *l, sg__ledger_rec *r) {
    return sg__ledger_with_lock(l, LOCK_EX, do_update, r);
}

/* ----------------------------------------------------------------- listing */

static int file_list(sg_ledger *l, int (*cb)(const sg_ledger_entry *e, void *user_data),
                     void *user_data) {
    /* The shared lock is held only to catch up: the index is then a
     * snapshot of the file at one record boundary, and the callbacks run
     * without holding up writers in other processes. */
    int64_t deadline = sg__ledger_lock_deadline(l, SG_TIME_NEVER);
    if (sg__ledger_mutex_lock_until(&l->mu, deadline) != 0) {
        return SG_ELOCKED; /* another thread held the handle */
    }
    int rv = sg__ledger_lock_until(l, LOCK_SH, deadline);
    if (rv == 0) {
        rv = sg__ledger_refresh(l, deadline);
        sg__ledger_unlock(l);
    }
    for (const sg__ledger_ent *e = rv == 0 ? l->head : NULL; e != NULL; e = e->next) {
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

static int stats_locked(sg_ledger *l, void *arg) {
    sg_ledger_stats *out = arg;
    *out = l->stats;
    out->live = l->live;
    sg__ledger_sync_stats(l, out);
    return 0;
}

static int file_stats(sg_ledger *l, sg_ledger_stats *out) {
    return sg__ledger_with_handle(l, stats_locked, out);
}

const sg__ledger_backend sg__ledger_file_backend = {
    .name = "file",
    .open = file_open,
    .init_schema = file_init_schema,
    .close = file_close,
    .interrupt = file_interrupt,
    .intent = file_intent,
    .attempt = file_update,
    .resolve = file_update,
    .reconcile = file_update,
    .list = file_list,
    .compact = sg__ledger_file_compact,
    .sync = sg__ledger_file_sync,
    .stats = file_stats,
};
