/*
 * The ledger's group commit (src/ledger/sync.c): which thread runs each
 * fdatasync, what sg_ledger_sync and sg_ledger_close wait for, how a failed
 * fdatasync is reported, and compaction while a sync is pending or running.
 *
 * Real files in a fresh directory; the only seam is the handle's datasync
 * function, which a probe wraps: it counts the calls per thread, can hold
 * the sync thread inside its call, and can make a call fail.  No assertion
 * depends on timing.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <streamguard/ledger.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#include "ledger/internal.h"
#include "ledger_test_dir.h"

/* ------------------------------------------------------------------- probe */

typedef struct probe {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t caller; /* the test's own thread */
    int on_caller;    /* fdatasyncs run on it */
    int on_thread;    /* fdatasyncs run on any other thread */
    int fail_caller;  /* the next so many on the caller's thread fail */
    int fail_thread;  /* the next so many on other threads fail */
    bool hold;        /* calls from other threads wait inside while set */
    int held;         /* calls waiting now */
    int finished;     /* calls that returned */
    int closed_fd;    /* calls whose descriptor was no longer open */
    off_t last;       /* file size the latest finished call started with */
} probe;

/* The size of the file @fd names, or -1 when @fd is not open. */
static off_t fd_size(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_size : -1;
}

static int probe_datasync(int fd, void *ud) {
    probe *p = ud;
    bool mine = pthread_equal(pthread_self(), p->caller);
    /* Before the hold: what this call covers is what was written by now. */
    off_t size = fd_size(fd);
    pthread_mutex_lock(&p->mu);
    if (mine) {
        p->on_caller++;
    } else {
        p->on_thread++;
    }
    while (!mine && p->hold) {
        p->held++;
        pthread_cond_broadcast(&p->cv);
        pthread_cond_wait(&p->cv, &p->mu);
        p->held--;
    }
    int *fail = mine ? &p->fail_caller : &p->fail_thread;
    bool failing = *fail > 0;
    if (failing) {
        (*fail)--;
    }
    pthread_mutex_unlock(&p->mu);
    /* After the hold: the descriptor must still be open to be synced. */
    bool open = fd_size(fd) >= 0;
    int rv = open && !failing ? sg__ledger_datasync(fd, NULL) : SG_EIO;
    pthread_mutex_lock(&p->mu);
    if (!open) {
        p->closed_fd++;
    }
    p->last = size;
    p->finished++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return rv;
}

static void probe_hold(probe *p, bool hold) {
    pthread_mutex_lock(&p->mu);
    p->hold = hold;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static bool is_held(const probe *p) {
    return p->held > 0;
}

static bool is_idle(const probe *p) {
    return p->finished == p->on_caller + p->on_thread;
}

/* Waits until @cond holds, for 10 s at most (a test fails rather than
 * hangs).  Returns whether it holds. */
static bool probe_wait(probe *p, bool (*cond)(const probe *)) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&p->mu);
    int rv = 0;
    while (!cond(p) && rv == 0) {
        rv = pthread_cond_timedwait(&p->cv, &p->mu, &until);
    }
    bool ok = cond(p);
    pthread_mutex_unlock(&p->mu);
    return ok;
}

/* Waits until the sync thread is held inside an fdatasync. */
static void probe_wait_held(probe *p) {
    if (!probe_wait(p, is_held)) {
        probe_hold(p, false); /* the test ends here: let anything held go */
        fail_msg("no fdatasync reached the sync thread");
    }
}

static int probe_get(probe *p, const int *field) {
    pthread_mutex_lock(&p->mu);
    int v = *field;
    pthread_mutex_unlock(&p->mu);
    return v;
}

static off_t probe_last(probe *p) {
    pthread_mutex_lock(&p->mu);
    off_t v = p->last;
    pthread_mutex_unlock(&p->mu);
    return v;
}

/* ---------------------------------------------------------------- fixture */

typedef struct fixture {
    ledger_test_dir d;
    sg_ledger_options *opts;
    probe p;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || ledger_test_dir_make(&f->d) != 0) {
        free(f);
        return -1;
    }
    if (sg_ledger_options_new(&f->opts) != 0) { /* the default policy: under test */
        return -1;
    }
    pthread_mutex_init(&f->p.mu, NULL);
    pthread_cond_init(&f->p.cv, NULL);
    f->p.caller = pthread_self();
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    ledger_test_dir_remove(&f->d);
    sg_ledger_options_free(f->opts);
    pthread_cond_destroy(&f->p.cv);
    pthread_mutex_destroy(&f->p.mu);
    free(f);
    return 0;
}

/* A handle whose fdatasyncs go through the probe (set before any record,
 * so before the sync thread exists). */
static sg_ledger *open_probed(fixture *f) {
    sg_ledger *l = NULL;
    assert_int_equal(sg_ledger_open(&l, f->d.ledger, f->opts), 0);
    l->sync.datasync = probe_datasync;
    l->sync.datasync_ud = &f->p;
    return l;
}

static off_t data_size(const fixture *f) {
    return ledger_test_data_stat(&f->d).st_size;
}

static ino_t data_inode(const fixture *f) {
    return ledger_test_data_stat(&f->d).st_ino;
}

/* A descriptor of this process open on inode @ino, or -1. */
static int fd_of_inode(ino_t ino) {
    struct stat st;
    for (int fd = 0; fd < 1024; fd++) {
        if (fstat(fd, &st) == 0 && st.st_ino == ino && S_ISREG(st.st_mode)) {
            return fd;
        }
    }
    return -1;
}

static int count_one(const sg_ledger_entry *e, void *ud) {
    (void)e;
    (*(size_t *)ud)++;
    return 0;
}

static size_t count_unresolved(sg_ledger *l) {
    size_t n = 0;
    assert_int_equal(sg_ledger_list_unresolved(l, count_one, &n), 0);
    return n;
}

static void record_attempt(sg_ledger *l, const char *key) {
    assert_int_equal(sg_ledger_attempt(l, key, 1, SG_OUTCOME_IDLE_TIMEOUT,
                                       SG_PHASE_STREAMING, true, 200, false),
                     0);
}

static sg_ledger_stats stats_of(sg_ledger *l) {
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    assert_int_equal(sg_ledger_get_stats(l, &st), 0);
    return st;
}

/* ------------------------------------------------------- who syncs what */

/* The event loop's view: an operation with the ledger as its observer.
 * Its intent is fdatasync'ed before sg_op_start returns, on the caller's
 * thread; its attempt and resolution are not, and the sync thread makes
 * them durable after. */
static void only_the_intent_is_synced_on_the_callers_thread(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_probed(f);
    sg_ledger_binding b = {l, NULL};
    SG_AUTO_OPTIONS(o);
    sg_op_options_set_max_attempts(o, 1);
    sg_op_options_set_idempotency_key(o, "loop-op");
    sg_op_options_set_target(o, "https://h/v1/chat");
    sg_op_options_set_observer(o, sg_ledger_observer(), &b);
    SG_AUTO_OP(op);
    assert_int_equal(sg_op_start(op, o, SG_SEC(1)), 0);
    /* durable before it returned: one fdatasync, here, of the whole file */
    assert_int_equal(probe_get(&f->p, &f->p.on_caller), 1);
    assert_int_equal(probe_last(&f->p), data_size(f));

    sg_op_plan plan;
    sg_op_verdict v;
    sg_op_result r = {.outcome = SG_OUTCOME_CONNECT_TIMEOUT, .phase = SG_PHASE_CONNECT};
    assert_int_equal(sg_op_next_attempt(op, SG_SEC(1), &plan), 0);
    assert_int_equal(sg_op_attempt_done(op, SG_SEC(2), &r, &v), 0);
    assert_true(sg_op_finished(op));
    assert_int_equal(sg_op_observer_error(op), 0);
    assert_int_equal(count_unresolved(l), 0); /* resolved failed */
    /* the attempt and the resolution: nothing more on this thread */
    assert_int_equal(probe_get(&f->p, &f->p.on_caller), 1);

    assert_int_equal(sg_ledger_sync(l, -1), 0);
    assert_true(probe_get(&f->p, &f->p.on_thread) >= 1);
    assert_int_equal(probe_get(&f->p, &f->p.on_caller), 1);
    assert_int_equal(probe_last(&f->p), data_size(f)); /* begun after the last */
    assert_int_equal(stats_of(l).unsynced, 0);
    sg_ledger_close(l);
}

/* ALWAYS keeps every fdatasync on the caller's thread, NEVER runs none;
 * neither starts a thread, and sg_ledger_sync returns at once. */
static void always_and_never_keep_their_meaning(void **state) {
    fixture *f = *state;
    static const sg_ledger_fsync policies[] = {SG_LEDGER_FSYNC_ALWAYS,
                                               SG_LEDGER_FSYNC_NEVER};
    for (int i = 0; i < 2; i++) {
        sg_ledger_options_set_fsync(f->opts, policies[i]);
        f->p.on_caller = f->p.on_thread = 0;
        sg_ledger *l = open_probed(f);
        assert_int_equal(sg_ledger_intent(l, "k", "POST", "/x"), 0);
        record_attempt(l, "k");
        assert_int_equal(sg_ledger_resolve(l, "k", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
        assert_int_equal(sg_ledger_reconcile(l, "k", NULL), SG_ENOTFOUND);
        assert_int_equal(sg_ledger_sync(l, 0), 0);
        assert_false(l->sync.started);
        assert_int_equal(f->p.on_caller, i == 0 ? 3 : 0);
        assert_int_equal(f->p.on_thread, 0);
        sg_ledger_close(l);
    }
}

/* An intent's own fdatasync covers the records written before it: the
 * thread may find nothing left to do. */
static void an_intents_sync_covers_earlier_records(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_probed(f);
    assert_int_equal(sg_ledger_intent(l, "a", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_sync(l, -1), 0);
    probe_hold(&f->p, true);
    record_attempt(l, "a");
    probe_wait_held(&f->p); /* the thread took the attempt, and waits */
    assert_int_equal(sg_ledger_resolve(l, "a", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(stats_of(l).unsynced, 2);
    assert_int_equal(sg_ledger_intent(l, "b", "POST", "/x"), 0);
    /* settled by the intent's fdatasync, while the thread is still held */
    assert_int_equal(stats_of(l).unsynced, 0);
    assert_int_equal(sg_ledger_sync(l, 0), 0);
    probe_hold(&f->p, false);
    sg_ledger_close(l);
}

/* ------------------------------------------------------ waiting and close */

static void sync_waits_no_longer_than_asked(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_probed(f);
    assert_int_equal(sg_ledger_sync(NULL, 0), SG_EINVAL);
    assert_int_equal(sg_ledger_sync(l, 0), 0); /* nothing written yet */
    assert_int_equal(sg_ledger_intent(l, "k", "POST", "/x"), 0);
    probe_hold(&f->p, true);
    assert_int_equal(sg_ledger_resolve(l, "k", SG_LEDGER_UNKNOWN, SG_OUTCOME_OK), 0);
    probe_wait_held(&f->p);
    assert_int_equal(sg_ledger_sync(l, 0), SG_ETIMEDOUT);
    assert_int_equal(sg_ledger_sync(l, SG_MS(5)), SG_ETIMEDOUT);
    assert_int_equal(stats_of(l).unsynced, 1);
    /* the handle stays usable while its thread syncs: listing, records */
    assert_int_equal(count_unresolved(l), 1);
    assert_int_equal(sg_ledger_reconcile(l, "k", "checked"), 0);
    probe_hold(&f->p, false);
    assert_int_equal(sg_ledger_sync(l, -1), 0);
    assert_int_equal(stats_of(l).unsynced, 0);
    assert_int_equal(stats_of(l).sync_failures, 0);
    sg_ledger_close(l);
}

/* Records written while the thread is inside an fdatasync need one more;
 * close waits for it.  The first fdatasync started before they were
 * written, so only a later one can have started with the whole file. */
static void close_makes_every_written_record_durable(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_probed(f);
    char key[32];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "c%02d", i);
        assert_int_equal(sg_ledger_intent(l, key, "POST", "/x"), 0);
    }
    probe_hold(&f->p, true);
    record_attempt(l, "c00");
    probe_wait_held(&f->p);
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "c%02d", i);
        if (i > 0) {
            record_attempt(l, key);
        }
        assert_int_equal(sg_ledger_resolve(l, key, SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    }
    off_t written = data_size(f);
    probe_hold(&f->p, false);
    sg_ledger_close(l);
    assert_int_equal(f->p.last, written);
    assert_true(f->p.on_thread >= 2);
    assert_int_equal(f->p.on_caller, 20); /* the intents, nothing else */
}

/* ----------------------------------------------------------------- errors */

/* The thread's fdatasync fails: the resolution's call had returned 0 long
 * before, so the failure goes to the next sg_ledger_sync and, separately,
 * to the next intent, which refuses without writing anything. */
static void
a_failed_background_sync_is_reported_to_the_next_intent_and_sync(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_probed(f);
    assert_int_equal(sg_ledger_intent(l, "k1", "POST", "/x"), 0);
    f->p.fail_thread = 1;
    assert_int_equal(sg_ledger_resolve(l, "k1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(sg_ledger_sync(l, -1), SG_EIO);
    assert_int_equal(sg_ledger_sync(l, -1), 0); /* once */
    assert_int_equal(stats_of(l).sync_failures, 1);
    assert_int_equal(stats_of(l).unsynced, 0); /* settled: never retried */
    off_t size = data_size(f);
    assert_int_equal(sg_ledger_intent(l, "k2", "POST", "/x"), SG_EIO);
    assert_int_equal(data_size(f), size); /* nothing written */
    assert_int_equal(count_unresolved(l), 0);
    assert_int_equal(sg_ledger_intent(l, "k2", "POST", "/x"), 0); /* once */
    assert_int_equal(count_unresolved(l), 1);
    /* the two cursors are independent: a failure no sync was asked about
     * yet still fails the next intent, and the next sync */
    pthread_mutex_lock(&f->p.mu);
    f->p.fail_thread = 1;
    pthread_mutex_unlock(&f->p.mu);
    record_attempt(l, "k2");
    for (int i = 0; i < 5000 && stats_of(l).sync_failures < 2; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(stats_of(l).sync_failures, 2);
    assert_int_equal(sg_ledger_intent(l, "k3", "POST", "/x"), SG_EIO);
    assert_int_equal(sg_ledger_sync(l, -1), SG_EIO);
    assert_int_equal(sg_ledger_intent(l, "k3", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_sync(l, -1), 0);
    assert_int_equal(stats_of(l).sync_failures, 2);
    sg_ledger_close(l);
}

/* An intent's own fdatasync fails: that intent says so (its record is in
 * the file, not known to be durable), the next one is not refused for it,
 * and sg_ledger_sync reports it once. */
static void an_intents_own_sync_failure_is_its_own_error(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_probed(f);
    f->p.fail_caller = 1;
    assert_int_equal(sg_ledger_intent(l, "k1", "POST", "/x"), SG_EIO);
    assert_int_equal(count_unresolved(l), 1); /* other processes see it too */
    assert_int_equal(sg_ledger_intent(l, "k2", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_sync(l, 0), SG_EIO);
    assert_int_equal(sg_ledger_sync(l, 0), 0);
    assert_int_equal(stats_of(l).sync_failures, 1);
    sg_ledger_close(l);
}

/* ------------------------------------------------------------- compaction */

static void *compact_main(void *arg) {
    intptr_t rv = sg_ledger_compact(arg);
    return (void *)rv;
}

/* The thread is inside an fdatasync of the data file when this handle
 * compacts: the compaction renames its new file over the old one but does
 * not close the old descriptor until the fdatasync is done; then every
 * record is durable through the new file, synced by the compaction. */
static void compaction_waits_for_the_fdatasync_in_progress(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_probed(f);
    assert_int_equal(sg_ledger_intent(l, "live", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_intent(l, "gone", "POST", "/x"), 0);
    probe_hold(&f->p, true);
    assert_int_equal(sg_ledger_resolve(l, "gone", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    probe_wait_held(&f->p);
    record_attempt(l, "live"); /* pending behind the held fdatasync */
    ino_t old = data_inode(f);
    pthread_t c;
    assert_int_equal(pthread_create(&c, NULL, compact_main, l), 0);
    /* Let the compaction get past its rename and open the new file, the
     * last step before it puts the old descriptor down: were it to close
     * that one now, the probe, once released, would find it closed. */
    bool opened = false;
    for (int i = 0; i < 10000 && !opened; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        ino_t now = data_inode(f);
        opened = now != old && fd_of_inode(now) >= 0;
    }
    assert_true(opened);
    struct timespec settle = {0, 10000000};
    nanosleep(&settle, NULL);
    probe_hold(&f->p, false);
    void *rv;
    pthread_join(c, &rv);
    assert_int_equal((intptr_t)rv, 0);
    assert_true(probe_wait(&f->p, is_idle)); /* every call has returned */
    assert_int_equal(probe_get(&f->p, &f->p.closed_fd), 0);
    assert_int_equal(stats_of(l).unsynced, 0); /* covered by the compaction */
    assert_int_equal(sg_ledger_sync(l, -1), 0);
    assert_int_equal(count_unresolved(l), 1);
    sg_ledger_close(l);
    l = open_probed(f);
    assert_int_equal(count_unresolved(l), 1);
    sg_ledger_close(l);
}

/* Another handle (as another process would) compacts while this one has
 * records waiting for their fdatasync: they are in the new file, and this
 * handle's thread syncs that one, never the replaced descriptor. */
static void another_handles_compaction_moves_pending_syncs_to_the_new_file(void **state) {
    fixture *f = *state;
    sg_ledger *a = open_probed(f);
    sg_ledger *b = NULL;
    assert_int_equal(sg_ledger_open(&b, f->d.ledger, f->opts), 0);
    assert_int_equal(sg_ledger_intent(a, "k1", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_intent(a, "k2", "POST", "/x"), 0);
    probe_hold(&f->p, true);
    assert_int_equal(sg_ledger_resolve(a, "k1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    probe_wait_held(&f->p);
    assert_int_equal(sg_ledger_compact(b), 0);
    probe_hold(&f->p, false);
    record_attempt(a, "k2"); /* a follows the new file, then appends to it */
    assert_int_equal(sg_ledger_sync(a, -1), 0);
    assert_int_equal(probe_get(&f->p, &f->p.closed_fd), 0);
    assert_int_equal(probe_last(&f->p), data_size(f)); /* the new file */
    assert_int_equal(count_unresolved(b), 1);
    sg_ledger_close(b);
    sg_ledger_close(a);
}

/* Another handle, running with FSYNC_NEVER, compacts: its new file was
 * never synced, and this handle's durable records now live only there.
 * Following it, this handle syncs the new file before it goes on - its
 * acknowledged records stay durable - not only the directory's rename. */
static void following_an_unsynced_compaction_syncs_the_new_file(void **state) {
    fixture *f = *state;
    sg_ledger *a = open_probed(f);
    assert_int_equal(sg_ledger_intent(a, "k1", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_intent(a, "k2", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_resolve(a, "k1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(sg_ledger_sync(a, -1), 0); /* all of it durable */
    SG_AUTO_LEDGER_OPTIONS(never);
    assert_int_equal(sg_ledger_options_set_fsync(never, SG_LEDGER_FSYNC_NEVER), 0);
    sg_ledger *b = NULL;
    assert_int_equal(sg_ledger_open(&b, f->d.ledger, never), 0);
    assert_int_equal(sg_ledger_compact(b), 0);
    int before = probe_get(&f->p, &f->p.on_caller);
    assert_int_equal(count_unresolved(a), 1); /* a follows the new file */
    assert_int_equal(probe_get(&f->p, &f->p.on_caller), before + 1);
    assert_int_equal(probe_last(&f->p), data_size(f)); /* the new file, whole */
    assert_int_equal(sg_ledger_sync(a, -1), 0);
    sg_ledger_close(b);
    sg_ledger_close(a);
}

static void *release_later(void *arg) {
    probe *p = arg;
    struct timespec ts = {2, 0};
    nanosleep(&ts, NULL);
    probe_hold(p, false);
    return NULL;
}

/* The sync thread is inside an fdatasync when another handle compacts:
 * following the new file waits for that fdatasync (the thread holds the
 * old descriptor) - an operation's intent no longer than its budget. */
static void following_a_compaction_waits_no_longer_than_the_budget(void **state) {
    fixture *f = *state;
    sg_ledger *a = open_probed(f);
    sg_ledger *b = NULL;
    assert_int_equal(sg_ledger_open(&b, f->d.ledger, f->opts), 0);
    assert_int_equal(sg_ledger_intent(a, "k1", "POST", "/x"), 0);
    probe_hold(&f->p, true);
    assert_int_equal(sg_ledger_resolve(a, "k1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    probe_wait_held(&f->p);
    assert_int_equal(sg_ledger_compact(b), 0);
    pthread_t th; /* lets the fdatasync go after 2 s, whatever happens here */
    assert_int_equal(pthread_create(&th, NULL, release_later, &f->p), 0);
    SG_AUTO_OPTIONS(o);
    sg_op_options_set_budget(o, SG_MS(100));
    sg_op_options_set_method(o, "POST");
    SG_AUTO_OP(op);
    int64_t t0 = sg_clock_now(NULL);
    assert_int_equal(sg_op_start(op, o, t0), 0);
    int rv = sg_ledger_op_intent(a, "k2", op, "https://h/x");
    int64_t took = sg_clock_now(NULL) - t0;
    pthread_join(th, NULL);
    assert_int_equal(rv, SG_ELOCKED);
    assert_true(took < SG_MS(100) + SG_MS(500));
    /* the fdatasync done, the handle follows the new file */
    assert_int_equal(sg_ledger_intent(a, "k2", "POST", "/x"), 0);
    assert_int_equal(count_unresolved(a), 1);
    assert_int_equal(count_unresolved(b), 1);
    assert_int_equal(probe_get(&f->p, &f->p.closed_fd), 0);
    sg_ledger_close(b);
    sg_ledger_close(a);
}

static int failing_dirsync(int fd, void *ud) {
    (void)fd;
    (void)ud;
    return SG_EIO;
}

/* The directory's fsync after a compaction's rename fails: the compaction
 * says so, and so does the next intent (and sg_ledger_sync) - its record
 * is in a file whose name a power loss could take back - rather than call
 * it durable; after that, as after a failed fdatasync, calls go on. */
static void a_failed_directory_sync_is_told_to_the_next_intent(void **state) {
    fixture *f = *state;
    sg_ledger *a = open_probed(f);
    assert_int_equal(sg_ledger_intent(a, "k1", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_resolve(a, "k1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(sg_ledger_sync(a, -1), 0);
    a->sync.dirsync = failing_dirsync;
    assert_int_equal(sg_ledger_compact(a), SG_EIO);
    assert_int_equal(sg_ledger_intent(a, "k2", "POST", "/x"), SG_EIO);
    assert_int_equal(sg_ledger_sync(a, -1), SG_EIO);
    a->sync.dirsync = sg__ledger_dirsync;
    assert_int_equal(sg_ledger_intent(a, "k3", "POST", "/x"), 0);
    assert_int_equal(sg_ledger_sync(a, -1), 0);
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    assert_int_equal(sg_ledger_get_stats(a, &st), 0);
    assert_int_equal(st.sync_failures, 1);
    sg_ledger_close(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(only_the_intent_is_synced_on_the_callers_thread,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(always_and_never_keep_their_meaning, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(an_intents_sync_covers_earlier_records, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(sync_waits_no_longer_than_asked, setup, teardown),
        cmocka_unit_test_setup_teardown(close_makes_every_written_record_durable, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            a_failed_background_sync_is_reported_to_the_next_intent_and_sync, setup,
            teardown),
        cmocka_unit_test_setup_teardown(an_intents_own_sync_failure_is_its_own_error,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(compaction_waits_for_the_fdatasync_in_progress,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            another_handles_compaction_moves_pending_syncs_to_the_new_file, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            following_an_unsynced_compaction_syncs_the_new_file, setup, teardown),
        cmocka_unit_test_setup_teardown(
            following_a_compaction_waits_no_longer_than_the_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(
            a_failed_directory_sync_is_told_to_the_next_intent, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
