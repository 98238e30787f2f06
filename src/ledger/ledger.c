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
 *
 * This file opens and closes the handle and holds its operations; log.c
 * holds the index and the file protocol, compact.c the compaction.
 */
#define _GNU_SOURCE
#include "core/internal.h"
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

void sg_ledger_close(sg_ledger *l) {
    if (l == NULL) {
        return;
    }
    /* A database backend waits no longer than close_timeout_ns (its
     * default applied at open) for what is under way, then gives it up;
     * the file's fdatasyncs cannot be given up. */
    int64_t until = l->db != NULL ? sg_time_add(sg_clock_monotonic_now(NULL),
                                                l->opts.close_timeout_ns)
                                  : SG_TIME_NEVER;
    /* First: the intent threads record through the handle. */
    sg__ledger_intents_close(l, until);
    if (l->db != NULL) {
        l->db->close(l, until);
        pthread_mutex_destroy(&l->mu);
        free(l);
        return;
    }
    /* First: the thread's last fdatasync needs the data file open. */
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
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* The options every backend takes alike, into @o (each was checked as it
 * was set); the location checked. */
static int check_options(const char *location, const sg_ledger_options *opts,
                         sg_ledger_options *o) {
    if (location == NULL || location[0] == '\0') {
        return SG_EINVAL;
    }
    static const sg_ledger_options defaults;
    *o = opts != NULL ? *opts : defaults;
    return 0;
}

int sg_ledger_init_schema(const char *location, const sg_ledger_options *opts) {
    sg_ledger_options o;
    int rv = check_options(location, opts, &o);
    if (rv != 0) {
        return rv;
    }
    if (sg__ledger_is_pg(location)) {
        return sg__ledger_pg_init_schema(location, &o);
    }
    sg_ledger *l = NULL;
    rv = sg_ledger_open(&l, location, &o);
    sg_ledger_close(l);
    return rv;
}

int sg_ledger_open(sg_ledger **out, const char *dir, const sg_ledger_options *opts) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_ledger_options o;
    int rv = check_options(dir, opts, &o);
    if (rv != 0) {
        return rv;
    }
    if (sg__ledger_is_pg(dir)) {
        return sg__ledger_pg_open(out, dir, &o);
    }
    if (strlen(dir) >= PATH_MAX) {
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
    if (sg__ledger_sync_init(l) != 0) {
        pthread_mutex_destroy(&l->mu);
        free(l->buckets);
        free(l);
        return SG_ENOMEM;
    }
    /* One intent thread: the file's intents take turns on its lock anyway. */
    if (sg__ledger_intents_init(l, 1) != 0) {
        sg_ledger_close(l); /* the group commit is set up: close takes it down */
        return SG_ENOMEM;
    }
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
        rv = sg__ledger_open_data(l, &l->data_fd);
    }
    if (rv == 0) {
        rv = sg__ledger_lock(l, LOCK_SH);
        if (rv == 0) {
            rv = sg__ledger_refresh(l, SG_TIME_NEVER);
            sg__ledger_unlock(l);
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

/* Every record names a key: each operation starts its record here, so the
 * key is checked, before any other field, in one place. */
static int rec_start(sg__ledger_rec *r, uint8_t type, const char *key) {
    *r = (sg__ledger_rec){.type = type, .key = key};
    int rv = sg_ledger_key_check(key);
    r->key_len = rv == 0 ? strlen(key) : 0;
    return rv;
}

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

int sg_ledger_intent(sg_ledger *l, const char *key, const char *method, const char *url) {
    return sg__ledger_intent_until(l, key, method, url, SG_TIME_NEVER);
}

int sg__ledger_intent_until(sg_ledger *l, const char *key, const char *method,
                            const char *url, int64_t until) {
    if (l == NULL || method == NULL || url == NULL) {
        return SG_EINVAL;
    }
    sg__ledger_rec r;
    int rv = rec_start(&r, SG__LREC_INTENT, key);
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
    if (l->db != NULL) {
        return l->db->intent(l, &r, until); /* it locks what it needs */
    }
    return sg__ledger_with_lock_until(l, LOCK_EX, do_intent, &r, until);
}

/* Attempt, resolve: the key must be live and still pending. */
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

/* Attempt, resolve, reconcile: through the backend, or appended to the file. */
static int update(sg_ledger *l, sg__ledger_rec *r) {
    if (l->db == NULL) {
        return sg__ledger_with_lock(l, LOCK_EX, do_update, r);
    }
    int rv = sg__ledger_lock_handle(l);
    if (rv != 0) {
        return rv;
    }
    rv = l->db->update(l, r);
    pthread_mutex_unlock(&l->mu);
    return rv;
}

int sg_ledger_attempt(sg_ledger *l, const char *key, uint32_t n, sg_outcome outcome,
                      sg_phase phase, bool sent, int http_status, bool outcome_unknown) {
    if (l == NULL || n == 0 || (unsigned)outcome >= SG_OUTCOME_COUNT_ ||
        (unsigned)phase >= SG_PHASE_COUNT_ ||
        (http_status != 0 && (http_status < 100 || http_status > 599))) {
        return SG_EINVAL;
    }
    sg__ledger_rec r;
    int rv = rec_start(&r, SG__LREC_ATTEMPT, key);
    if (rv != 0) {
        return rv;
    }
    r.n = n;
    r.outcome = (uint8_t)outcome;
    r.phase = (uint8_t)phase;
    r.flags =
        (uint8_t)((sent ? SG__LATT_SENT : 0) | (outcome_unknown ? SG__LATT_UNKNOWN : 0));
    r.http_status = (uint16_t)http_status;
    return update(l, &r);
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
    sg__ledger_rec r;
    int rv = rec_start(&r, SG__LREC_RESOLVE, key);
    if (rv != 0) {
        return rv;
    }
    r.resolution = (uint8_t)res;
    r.outcome = (uint8_t)outcome;
    return update(l, &r);
}

int sg_ledger_reconcile(sg_ledger *l, const char *key, const char *note) {
    if (l == NULL) {
        return SG_EINVAL;
    }
    sg__ledger_rec r;
    int rv = rec_start(&r, SG__LREC_RECONCILE, key);
    if (rv != 0) {
        return rv;
    }
    r.note = note != NULL ? note : "";
    r.note_len = strnlen(r.note, SG_LEDGER_NOTE_MAX + 1);
    if ((rv = sg__ledger_check_note(r.note, r.note_len)) != 0) {
        return rv;
    }
    return update(l, &r);
}

/* ----------------------------------------------------------------- listing */

int sg_ledger_list_unresolved(sg_ledger *l,
                              int (*cb)(const sg_ledger_entry *e, void *user_data),
                              void *user_data) {
    if (l == NULL || cb == NULL) {
        return SG_EINVAL;
    }
    if (l->db != NULL) {
        int rv = sg__ledger_lock_handle(l);
        if (rv != 0) {
            return rv;
        }
        rv = l->db->list(l, cb, user_data);
        pthread_mutex_unlock(&l->mu);
        return rv;
    }
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

int sg_ledger_get_stats(sg_ledger *l, sg_ledger_stats *out) {
    if (l == NULL || out == NULL || out->size < sizeof(out->size)) {
        return SG_EINVAL;
    }
    int rv = sg__ledger_lock_handle(l);
    if (rv != 0) {
        return rv;
    }
    sg_ledger_stats all;
    if (l->db != NULL) {
        /* Nothing is replayed; unsynced: the records queued, not committed. */
        memset(&all, 0, sizeof(all));
        l->db->stats(l, &all);
    } else {
        all = l->stats;
        all.live = l->live;
        sg__ledger_sync_stats(l, &all);
    }
    pthread_mutex_unlock(&l->mu);
    all.size = sizeof(all);
    return sg__stats_copy(out, &all, sizeof(all));
}
