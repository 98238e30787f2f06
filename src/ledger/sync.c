/*
 * The group commit: how records other than intents leave the caller's
 * thread on their way to the disk.
 *
 * Every record is written to the file on the caller's thread, under the
 * lock, as before: once the call returns a process crash cannot lose it.
 * What costs is the fdatasync (~0.4 ms on the development VM's disk), and
 * an event loop that resolves 1,000 operations at once would pay it 1,000
 * times in a row.  So with the default policy only an intent is synced on
 * the caller's thread (nothing may be sent before it is durable); the
 * other records are counted and left to one thread per handle, which runs
 * one fdatasync for everything written before it started.  While it syncs,
 * the next records pile up for its next fdatasync: a burst costs a few
 * syncs, not one per record (the group commit of ext4's journal and of
 * PostgreSQL's WAL).  An inline sync (an intent's) covers the records
 * written before it too, so the thread may find nothing left to do.
 *
 * The thread starts with the first deferred record, so a handle that only
 * lists, or runs with FSYNC_ALWAYS or FSYNC_NEVER, never has one; if it
 * cannot be started the records are synced inline as before.  It blocks
 * every signal (they are the application's) and is joined by
 * sg_ledger_close after its last fdatasync.
 *
 * A failed fdatasync is never retried: Linux may have dropped the pages it
 * could not write, and a second fdatasync would succeed without writing
 * them.  The records it covered are settled as "not known to be durable",
 * counted, and reported to the next intent and the next sg_ledger_sync.
 */
#define _GNU_SOURCE
#include "ledger/internal.h"

#include <errno.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

int sg__ledger_datasync(int fd, void *user_data) {
    (void)user_data;
    while (fdatasync(fd) != 0) {
        if (errno != EINTR) {
            return SG_EIO;
        }
    }
    return 0;
}

int sg__ledger_dirsync(int fd, void *user_data) {
    (void)user_data;
    return sg__ledger_fsync(fd);
}

int sg__ledger_sync_dir(sg_ledger *l) {
    sg__ledger_syncer *s = &l->sync;
    int rv = s->dirsync(l->dir_fd, s->datasync_ud);
    if (rv != 0) {
        pthread_mutex_lock(&s->mu);
        s->failures++; /* told to the next intent and sg_ledger_sync */
        pthread_mutex_unlock(&s->mu);
    }
    return rv;
}

int sg__ledger_sync_init(sg_ledger *l) {
    sg__ledger_syncer *s = &l->sync;
    s->datasync = sg__ledger_datasync;
    s->dirsync = sg__ledger_dirsync;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        return SG_ENOMEM;
    }
    if (pthread_cond_init(&s->work, NULL) != 0) {
        pthread_mutex_destroy(&s->mu);
        return SG_ENOMEM;
    }
    if (sg__ledger_cond_init(&s->done) != 0) {
        pthread_cond_destroy(&s->work);
        pthread_mutex_destroy(&s->mu);
        return SG_ENOMEM;
    }
    return 0;
}

/* Under s->mu: the first @through records are settled by an fdatasync that
 * returned @rv. */
static void settle(sg__ledger_syncer *s, uint64_t through, int rv) {
    if (through > s->synced) {
        s->synced = through;
    }
    if (rv != 0) {
        s->failures++;
    }
    pthread_cond_broadcast(&s->done);
}

static void *sync_main(void *arg) {
    sg_ledger *l = arg;
    sg__ledger_syncer *s = &l->sync;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->synced >= s->wanted && !s->stop) {
            pthread_cond_wait(&s->work, &s->mu);
        }
        if (s->synced >= s->wanted) {
            break; /* stopping, and nothing is left */
        }
        /* Everything counted was written before this fdatasync starts,
         * intents included: it covers them all. */
        uint64_t through = s->written;
        int fd = l->data_fd;
        s->busy = true;
        pthread_mutex_unlock(&s->mu);
        int rv = s->datasync(fd, s->datasync_ud);
        pthread_mutex_lock(&s->mu);
        s->busy = false;
        settle(s, through, rv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int sg__ledger_spawn(pthread_t *thread, void *(*fn)(void *), void *arg) {
    sigset_t all;
    sigset_t old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rv = pthread_create(thread, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rv == 0 ? 0 : SG_ESYS;
}

/* Under s->mu. */
static int start_thread(sg_ledger *l) {
    l->sync.started = sg__ledger_spawn(&l->sync.thread, sync_main, l) == 0;
    return l->sync.started ? 0 : SG_ESYS;
}

int sg__ledger_wait_until(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t deadline) {
    if (deadline == SG_TIME_NEVER) {
        pthread_cond_wait(cond, mu);
        return 0;
    }
    if (sg_clock_monotonic_now(NULL) >= deadline) {
        return SG_ETIMEDOUT;
    }
    struct timespec ts = {(time_t)(deadline / SG_SEC(1)), (long)(deadline % SG_SEC(1))};
    pthread_cond_timedwait(cond, mu, &ts);
    return 0;
}

int sg__ledger_mutex_lock_until(pthread_mutex_t *mu, int64_t deadline) {
    if (deadline == SG_TIME_NEVER) {
        pthread_mutex_lock(mu);
        return 0;
    }
    struct timespec ts = {(time_t)(deadline / SG_SEC(1)), (long)(deadline % SG_SEC(1))};
    if (deadline < 0) {
        ts = (struct timespec){0, 0}; /* long past: one try, no wait */
    }
    return pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &ts) == 0 ? 0 : SG_ETIMEDOUT;
}

int sg__ledger_cond_init(pthread_cond_t *cond) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        return SG_ENOMEM;
    }
    /* Deadlines are monotonic, like every other one. */
    bool ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
              pthread_cond_init(cond, &ca) == 0;
    pthread_condattr_destroy(&ca);
    return ok ? 0 : SG_ENOMEM;
}

int sg__ledger_sync_written(sg_ledger *l, sg__ledger_sync_mode mode) {
    sg__ledger_syncer *s = &l->sync;
    if (mode == SG__LSYNC_NONE) {
        return 0;
    }
    pthread_mutex_lock(&s->mu);
    uint64_t seq = ++s->written;
    if (mode == SG__LSYNC_DEFERRED && (s->started || start_thread(l) == 0)) {
        s->wanted = seq;
        pthread_cond_signal(&s->work);
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    pthread_mutex_unlock(&s->mu);
    /* The caller holds the handle's mutex: data_fd cannot change. */
    int rv = s->datasync(l->data_fd, s->datasync_ud);
    pthread_mutex_lock(&s->mu);
    settle(s, seq, rv);
    if (rv != 0) {
        s->told_intent = s->failures; /* this call reports it */
    }
    pthread_mutex_unlock(&s->mu);
    return rv;
}

int sg__ledger_sync_swap_fd(sg_ledger *l, int fd, bool covered, int64_t deadline) {
    sg__ledger_syncer *s = &l->sync;
    pthread_mutex_lock(&s->mu);
    /* The fdatasync in progress (the thread holds the old descriptor, and
     * a closed number could be reused by then for another file), waited
     * for no later than @deadline. */
    while (s->busy) {
        if (sg__ledger_wait_until(&s->done, &s->mu, deadline) != 0) {
            pthread_mutex_unlock(&s->mu);
            return SG_ETIMEDOUT;
        }
    }
    close(l->data_fd);
    l->data_fd = fd;
    /* Not covered (another process's compaction): the records are in the
     * new file, and the thread's next fdatasync, of the new descriptor,
     * makes them durable there. */
    if (covered) {
        settle(s, s->written, 0);
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int sg__ledger_sync_take_failure(sg_ledger *l) {
    sg__ledger_syncer *s = &l->sync;
    pthread_mutex_lock(&s->mu);
    int rv = s->told_intent < s->failures ? SG_EIO : 0;
    s->told_intent = s->failures;
    pthread_mutex_unlock(&s->mu);
    return rv;
}

void sg__ledger_sync_stats(sg_ledger *l, sg_ledger_stats *out) {
    sg__ledger_syncer *s = &l->sync;
    pthread_mutex_lock(&s->mu);
    out->unsynced = s->written - s->synced;
    out->sync_failures = s->failures;
    pthread_mutex_unlock(&s->mu);
}

void sg__ledger_sync_close(sg_ledger *l) {
    sg__ledger_syncer *s = &l->sync;
    pthread_mutex_lock(&s->mu);
    s->stop = true;
    pthread_cond_signal(&s->work);
    bool started = s->started;
    pthread_mutex_unlock(&s->mu);
    if (started) {
        pthread_join(s->thread, NULL);
    }
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->mu);
}

int sg__ledger_file_sync(sg_ledger *l, int64_t until) {
    sg__ledger_syncer *s = &l->sync;
    int rv = 0;
    pthread_mutex_lock(&s->mu);
    uint64_t through = s->written;
    while (s->synced < through && rv == 0) {
        rv = sg__ledger_wait_until(&s->done, &s->mu, until);
    }
    if (s->told_sync < s->failures) {
        s->told_sync = s->failures;
        rv = SG_EIO;
    }
    pthread_mutex_unlock(&s->mu);
    return rv;
}
