/*
 * The ledger's public API: keys, intents, attempts, resolutions, the
 * unresolved list, reconciliation, compaction, reopening, locking, and the
 * errors each call documents.  Every test works in its own fresh directory
 * and drives the wall clock by hand.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include <streamguard/ledger.h>
#include <streamguard/unstable/op.h>

#include "../sg_auto.h"

#include "ledger/internal.h"
#include "sgx/ledger_line.h"
#include "ledger_test_dir.h"

/* ------------------------------------------------------------------ helpers */

typedef struct fixture {
    ledger_test_dir d;
    sg_manual_clock clock;
    sg_clock wall;
    sg_ledger_options *opts;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof(*f));
    if (f == NULL || ledger_test_dir_make(&f->d) != 0) {
        free(f);
        return -1;
    }
    /* 2026-11-29T15:20:40.123Z */
    sg_manual_clock_set(&f->clock, INT64_C(1795965640123000000));
    f->wall = sg_manual_clock_as(&f->clock);
    if (sg_ledger_options_new(&f->opts) != 0 ||
        sg_ledger_options_set_wall_clock(f->opts, &f->wall) != 0 ||
        /* speed; durability has its own test */
        sg_ledger_options_set_fsync(f->opts, SG_LEDGER_FSYNC_NEVER) != 0) {
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    ledger_test_dir_remove(&f->d);
    sg_ledger_options_free(f->opts);
    free(f);
    return 0;
}

static sg_ledger *open_ledger(fixture *f) {
    sg_ledger *l = NULL;
    assert_int_equal(sg_ledger_open(&l, f->d.ledger, f->opts), 0);
    assert_non_null(l);
    return l;
}

typedef struct listing {
    size_t n;
    char lines[64][512];
    sg_ledger_entry first;
    char first_key[SG_LEDGER_KEY_MAX + 1];
    char first_url[256];
} listing;

static int collect(const sg_ledger_entry *e, void *ud) {
    listing *ls = ud;
    if (ls->n == 0) {
        ls->first = *e;
        snprintf(ls->first_key, sizeof(ls->first_key), "%s", e->key);
        snprintf(ls->first_url, sizeof(ls->first_url), "%s", e->url);
    }
    if (ls->n < 64) {
        int n = sgx_ledger_format_unresolved_line(e, ls->lines[ls->n], 512);
        assert_true(n > 0 || n == SG_ENOBUFS); /* long URLs are cut in tests */
    }
    ls->n++;
    return 0;
}

static listing *list(sg_ledger *l) {
    static listing ls;
    memset(&ls, 0, sizeof(ls));
    assert_int_equal(sg_ledger_list_unresolved(l, collect, &ls), 0);
    return &ls;
}

static size_t count_unresolved(sg_ledger *l) {
    return list(l)->n;
}

static off_t file_size(const fixture *f) {
    return ledger_test_data_stat(&f->d).st_size;
}

/* --------------------------------------------------------------------- keys */

static void key_derive_matches_the_documented_encoding(void **state) {
    (void)state;
    char key[SG_LEDGER_KEY_SIZE];
    const char *body = "{\"prompt\":\"hi\"}";
    /* Expected values computed independently (Python hashlib) over
     * u64be(len) || bytes for method, URL and body. */
    assert_int_equal(sg_ledger_key_derive("POST", "https://api.example.com/v1/chat", body,
                                          strlen(body), key),
                     0);
    assert_string_equal(
        key, "sg1-401dba18ae57aad29d2f93495a61cd5357d5ba16422996fa41ff95dffa95bb3b");
    assert_int_equal(sg_ledger_key_derive("GET", "/", NULL, 0, key), 0);
    assert_string_equal(
        key, "sg1-975d4d6b1234968642ee96c943739619291e4381c6eda0c73db4a6d4d1c4c88e");
}

static void key_derive_is_stable_and_distinct(void **state) {
    (void)state;
    char a[SG_LEDGER_KEY_SIZE], b[SG_LEDGER_KEY_SIZE];
    assert_int_equal(sg_ledger_key_derive("POST", "/ab", "c", 1, a), 0);
    assert_int_equal(sg_ledger_key_derive("POST", "/ab", "c", 1, b), 0);
    assert_string_equal(a, b);
    /* the same bytes split differently between fields */
    assert_int_equal(sg_ledger_key_derive("POST", "/a", "bc", 2, b), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(sg_ledger_key_derive("PUT", "/ab", "c", 1, b), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(sg_ledger_key_derive("POST", "/ab", "d", 1, b), 0);
    assert_string_not_equal(a, b);
    /* an empty body is an empty body, however it is passed */
    assert_int_equal(sg_ledger_key_derive("POST", "/", NULL, 0, a), 0);
    assert_int_equal(sg_ledger_key_derive("POST", "/", "", 0, b), 0);
    assert_string_equal(a, b);
}

static void derived_key_is_a_valid_idempotency_key(void **state) {
    (void)state;
    char key[SG_LEDGER_KEY_SIZE];
    assert_int_equal(sg_ledger_key_derive("POST", "/x", "y", 1, key), 0);
    assert_int_equal(strlen(key), SG_LEDGER_KEY_SIZE - 1);
    assert_true(strlen(key) <= SG_OP_IDEMPOTENCY_KEY_MAX);
    assert_int_equal(sg_ledger_key_check(key), 0);
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_idempotency_key(o, key), 0);
}

static void key_derive_rejects_bad_arguments(void **state) {
    (void)state;
    char key[SG_LEDGER_KEY_SIZE];
    assert_int_equal(sg_ledger_key_derive(NULL, "/", NULL, 0, key), SG_EINVAL);
    assert_int_equal(sg_ledger_key_derive("GET", NULL, NULL, 0, key), SG_EINVAL);
    assert_int_equal(sg_ledger_key_derive("GET", "/", NULL, 1, key), SG_EINVAL);
    assert_int_equal(sg_ledger_key_derive("GET", "/", NULL, 0, NULL), SG_EINVAL);
}

static void key_check_accepts_what_the_policy_accepts(void **state) {
    (void)state;
    char long_key[SG_LEDGER_KEY_MAX + 2];
    memset(long_key, 'k', sizeof(long_key) - 1);
    long_key[sizeof(long_key) - 1] = '\0';
    assert_int_equal(sg_ledger_key_check(long_key), SG_ERANGE);
    long_key[SG_LEDGER_KEY_MAX] = '\0';
    assert_int_equal(sg_ledger_key_check(long_key), 0);
    assert_int_equal(sg_ledger_key_check("order-42"), 0);
    assert_int_equal(sg_ledger_key_check("!~"), 0);
    assert_int_equal(sg_ledger_key_check(""), SG_EINVAL);
    assert_int_equal(sg_ledger_key_check("has space"), SG_EINVAL);
    assert_int_equal(sg_ledger_key_check("tab\there"), SG_EINVAL);
    assert_int_equal(sg_ledger_key_check("caf\xc3\xa9"), SG_EINVAL);
    assert_int_equal(sg_ledger_key_check(NULL), SG_EINVAL);
}

/* --------------------------------------------------------------------- open */

static void open_creates_the_directory_and_rejects_bad_arguments(void **state) {
    fixture *f = *state;
    sg_ledger *l = NULL;
    assert_int_equal(sg_ledger_open(NULL, f->d.ledger, NULL), SG_EINVAL);
    assert_int_equal(sg_ledger_open(&l, NULL, NULL), SG_EINVAL);
    assert_int_equal(sg_ledger_open(&l, "", NULL), SG_EINVAL);
    assert_null(l);
    /* a bad option is refused as it is set, and changes nothing */
    SG_AUTO_LEDGER_OPTIONS(o);
    assert_int_equal(sg_ledger_options_set_fsync(o, (sg_ledger_fsync)7), SG_EINVAL);
    assert_int_equal(sg_ledger_options_set_lock_timeout(o, -1), SG_EINVAL);
    assert_int_equal(sg_ledger_options_set_lock_timeout(o, SG_DURATION_MAX + 1),
                     SG_ERANGE);
    assert_int_equal(sg_ledger_options_set_fsync(NULL, SG_LEDGER_FSYNC_NEVER), SG_EINVAL);
    assert_int_equal(sg_ledger_options_new(NULL), SG_EINVAL);
    sg_ledger_options_free(NULL);
    /* a caller that never said how large its stats struct is gets nothing */
    assert_int_equal(sg_ledger_open(&l, f->d.ledger, o), 0);
    sg_ledger_stats unsized;
    memset(&unsized, 0, sizeof(unsized));
    assert_int_equal(sg_ledger_get_stats(l, &unsized), SG_EINVAL);
    sg_ledger_close(l);
    l = NULL;

    /* a regular file where the directory should be */
    char path[400];
    snprintf(path, sizeof(path), "%s/file", f->d.dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sg_ledger_open(&l, path, NULL), SG_ESYS);
    snprintf(path, sizeof(path), "%s/missing/deeper", f->d.dir);
    assert_int_equal(sg_ledger_open(&l, path, NULL), SG_ESYS);
    assert_int_equal(errno, ENOENT);

    l = open_ledger(f);
    struct stat st;
    assert_int_equal(stat(f->d.ledger, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_int_equal(file_size(f), 0);
    assert_int_equal(count_unresolved(l), 0);
    sg_ledger_close(l);
    sg_ledger_close(NULL);
}

/* ---------------------------------------------------------------- lifecycle */

static void intent_then_done_is_no_longer_unresolved(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "op-1", "POST", "https://h/v1/chat"), 0);
    assert_int_equal(count_unresolved(l), 1);
    assert_int_equal(sg_ledger_attempt(l, "op-1", 1, SG_OUTCOME_OK, SG_PHASE_STREAMING,
                                       true, 200, false),
                     0);
    assert_int_equal(sg_ledger_resolve(l, "op-1", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(count_unresolved(l), 0);
    /* gone from the index: further updates are refused */
    assert_int_equal(sg_ledger_resolve(l, "op-1", SG_LEDGER_DONE, SG_OUTCOME_OK),
                     SG_ENOTFOUND);
    assert_int_equal(sg_ledger_attempt(l, "op-1", 2, SG_OUTCOME_OK, SG_PHASE_STREAMING,
                                       true, 200, false),
                     SG_ENOTFOUND);
    sg_ledger_close(l);
}

static void intent_then_failed_is_no_longer_unresolved(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "op-2", "POST", "https://h/x"), 0);
    assert_int_equal(sg_ledger_attempt(l, "op-2", 1, SG_OUTCOME_HTTP_ERROR,
                                       SG_PHASE_WAIT_HEADERS, true, 400, false),
                     0);
    assert_int_equal(
        sg_ledger_resolve(l, "op-2", SG_LEDGER_FAILED, SG_OUTCOME_HTTP_ERROR), 0);
    assert_int_equal(count_unresolved(l), 0);
    sg_ledger_close(l);
}

static void pending_intent_is_listed_with_its_fields(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "op-3", "POST", "https://h/v1/chat?x=1"), 0);
    sg_manual_clock_advance(&f->clock, SG_SEC(2));
    assert_int_equal(sg_ledger_attempt(l, "op-3", 1, SG_OUTCOME_CONNECT_TIMEOUT,
                                       SG_PHASE_CONNECT, false, 0, false),
                     0);
    assert_int_equal(sg_ledger_attempt(l, "op-3", 2, SG_OUTCOME_IDLE_TIMEOUT,
                                       SG_PHASE_STREAMING, true, 200, false),
                     0);
    listing *ls = list(l);
    assert_int_equal(ls->n, 1);
    assert_string_equal(ls->first_key, "op-3");
    assert_string_equal(ls->first_url, "https://h/v1/chat?x=1");
    assert_int_equal(ls->first.state, SG_LEDGER_PENDING);
    assert_int_equal(ls->first.attempts, 2);
    assert_true(ls->first.has_last);
    assert_int_equal(ls->first.last_outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_int_equal(ls->first.last_phase, SG_PHASE_STREAMING);
    assert_int_equal(ls->first.last_http_status, 200);
    assert_true(ls->first.last_sent);
    assert_false(ls->first.last_outcome_unknown);
    assert_int_equal(ls->first.pid, (int32_t)getpid());
    assert_int_equal(ls->first.first_seen_ns, INT64_C(1795965640123000000));
    assert_int_equal(ls->first.last_update_ns, INT64_C(1795965642123000000));
    assert_string_equal(ls->lines[0], "op-3 POST https://h/v1/chat?x=1 "
                                      "2026-11-29T15:20:40.123Z 2 idle_timeout pending");
    sg_ledger_close(l);
}

static void unknown_is_listed_until_reconciled(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "op-4", "POST", "https://h/pay"), 0);
    assert_int_equal(sg_ledger_attempt(l, "op-4", 1, SG_OUTCOME_FIRST_ITEM_TIMEOUT,
                                       SG_PHASE_WAIT_FIRST_ITEM, true, 200, true),
                     0);
    assert_int_equal(
        sg_ledger_resolve(l, "op-4", SG_LEDGER_UNKNOWN, SG_OUTCOME_FIRST_ITEM_TIMEOUT),
        0);
    listing *ls = list(l);
    assert_int_equal(ls->n, 1);
    assert_int_equal(ls->first.state, SG_LEDGER_UNRESOLVED_UNKNOWN);
    assert_int_equal(ls->first.final_outcome, SG_OUTCOME_FIRST_ITEM_TIMEOUT);
    assert_true(ls->first.last_outcome_unknown);
    assert_string_equal(ls->lines[0], "op-4 POST https://h/pay 2026-11-29T15:20:40.123Z "
                                      "1 first_item_timeout unknown");
    /* an unknown is settled only by reconciliation */
    assert_int_equal(sg_ledger_resolve(l, "op-4", SG_LEDGER_DONE, SG_OUTCOME_OK),
                     SG_ESTATE);
    assert_int_equal(sg_ledger_attempt(l, "op-4", 2, SG_OUTCOME_OK, SG_PHASE_STREAMING,
                                       true, 200, false),
                     SG_ESTATE);
    assert_int_equal(count_unresolved(l), 1);
    assert_int_equal(sg_ledger_reconcile(l, "op-4", "charged once, order 991 (ops)"), 0);
    assert_int_equal(count_unresolved(l), 0);
    assert_int_equal(sg_ledger_reconcile(l, "op-4", NULL), SG_ENOTFOUND);
    sg_ledger_close(l);
}

static void an_operation_is_recorded_through_the_op_helpers(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    SG_AUTO_OPTIONS(o);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    sg_op_result r;
    sg_op_verdict v;
    sg_op_options_set_max_attempts(o, 3);
    assert_int_equal(sg_op_start(op, o, SG_SEC(1)), 0);
    /* no idempotency key: the fallback names it */
    assert_null(sg_ledger_op_key(op, NULL));
    const char *key = sg_ledger_op_key(op, "op-helpers");
    assert_string_equal(key, "op-helpers");
    assert_int_equal(sg_ledger_op_intent(l, NULL, op, "https://h/pay"), SG_EINVAL);
    assert_int_equal(sg_ledger_op_attempt(l, key, op), SG_EINVAL); /* no attempt yet */
    assert_int_equal(sg_ledger_op_intent(l, key, op, "https://h/pay"), 0);
    assert_int_equal(sg_ledger_op_intent(l, key, op, "https://h/pay"), SG_EEXIST);
    /* an unsafe POST sent, then timed out: outcome unknown */
    assert_int_equal(sg_op_next_attempt(op, SG_SEC(1), &plan), 0);
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_FIRST_ITEM_TIMEOUT;
    r.phase = SG_PHASE_WAIT_HEADERS;
    r.sent = true;
    assert_int_equal(sg_op_attempt_done(op, SG_SEC(2), &r, &v), 0);
    assert_true(v.outcome_unknown);
    assert_int_equal(sg_ledger_op_attempt(l, key, op), 0);
    assert_int_equal(sg_ledger_op_resolve(l, key, op), 0);
    listing *ls = list(l);
    assert_int_equal(ls->n, 1);
    assert_int_equal(ls->first.state, SG_LEDGER_UNRESOLVED_UNKNOWN);
    assert_string_equal(ls->first.method, "POST");
    assert_int_equal(ls->first.attempts, 1);
    assert_int_equal(sg_ledger_op_resolve(l, key, NULL), SG_EINVAL);
    sg_ledger_close(l);
}

/* The observer records the attempt that ended, not the latest started:
 * attempt 1 fails (500) while its hedge, attempt 2, still runs - the
 * ledger holds attempt 1's result, and attempt 2's once it ends. */
static void the_observer_records_the_attempt_that_ended(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    sg_ledger_binding b = {l, NULL};
    SG_AUTO_OPTIONS(o);
    assert_int_equal(sg_op_options_set_method(o, "GET"), 0);
    assert_int_equal(sg_op_options_set_idempotency_key(o, "hedged-key"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(o, 3), 0);
    assert_int_equal(sg_op_options_set_hedging(o, SG_MS(200), 1), 0);
    assert_int_equal(sg_op_options_set_target(o, "https://h/hedged"), 0);
    assert_int_equal(sg_op_options_set_observer(o, sg_ledger_observer(), &b), 0);
    const int64_t t0 = sg_clock_now(NULL);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    assert_int_equal(sg_op_start(op, o, t0), 0);
    assert_int_equal(sg_op_next_attempt(op, t0, &plan), 0);
    assert_int_equal(sg_op_hedge(op, t0 + SG_MS(200), &plan), 0);
    sg_op_result r;
    memset(&r, 0, sizeof(r));
    r.attempt = 1;
    r.outcome = SG_OUTCOME_HTTP_ERROR;
    r.phase = SG_PHASE_WAIT_HEADERS;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 500;
    r.first_item_ns = -1;
    sg_op_verdict v;
    assert_int_equal(sg_op_attempt_done(op, t0 + SG_MS(250), &r, &v), 0);
    listing *ls = list(l);
    assert_int_equal(ls->n, 1);
    assert_int_equal(ls->first.attempts, 1);
    assert_true(ls->first.has_last);
    assert_int_equal(ls->first.last_outcome, SG_OUTCOME_HTTP_ERROR);
    assert_int_equal(ls->first.last_http_status, 500);
    assert_true(ls->first.last_sent);
    /* sg_ledger_op_attempt, called by hand, takes the same one */
    assert_int_equal(sg_ledger_op_attempt(l, "hedged-key", op), 0);
    ls = list(l);
    assert_int_equal(ls->first.attempts, 1);
    assert_int_equal(ls->first.last_http_status, 500);
    /* the hedge ends ok: its own record, then the resolution */
    memset(&r, 0, sizeof(r));
    r.attempt = 2;
    r.outcome = SG_OUTCOME_OK;
    r.phase = SG_PHASE_STREAMING;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    r.items = 3;
    r.first_item_ns = SG_MS(20);
    assert_int_equal(sg_op_attempt_done(op, t0 + SG_MS(400), &r, &v), 0);
    assert_int_equal(count_unresolved(l), 0);
    sg_ledger_close(l);
}

/* Another process holds the file lock (a second open file description's
 * flock conflicts like one): the intent of an operation with a 200 ms
 * budget waits no longer than its budget, then refuses - it never waits
 * out the other process with the default unlimited lock_timeout_ns. */
static void an_intent_waits_for_the_lock_no_longer_than_the_budget(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    char path[512];
    snprintf(path, sizeof(path), "%s/ledger.lock", f->d.ledger);
    int other = open(path, O_RDWR | O_CLOEXEC);
    assert_true(other >= 0);
    assert_int_equal(flock(other, LOCK_EX), 0);
    SG_AUTO_OPTIONS(o);
    sg_op_options_set_budget(o, SG_MS(200));
    SG_AUTO_OP(op);
    int64_t t0 = sg_clock_now(NULL);
    assert_int_equal(sg_op_start(op, o, t0), 0);
    int rv = sg_ledger_op_intent(l, "busy-key", op, "https://h/busy");
    int64_t waited = sg_clock_now(NULL) - t0;
    assert_int_equal(rv, SG_ELOCKED);
    assert_true(waited >= SG_MS(200));
    assert_true(waited < SG_MS(200) + SG_MS(500));
    /* once the other process lets go, the same intent goes through */
    flock(other, LOCK_UN);
    close(other);
    assert_int_equal(sg_op_start(op, o, sg_clock_now(NULL)), 0);
    assert_int_equal(sg_ledger_op_intent(l, "busy-key", op, "https://h/busy"), 0);
    sg_ledger_close(l);
}

/* Another thread holds the handle (a listing whose callback is slow: the
 * handle's mutex is held while it runs).  The intent of an operation with a
 * 200 ms budget waits for it no longer than for another process's lock:
 * it refuses at the budget, not when the other thread lets go (1.5 s). */
typedef struct holder {
    sg_ledger *l;
    int entered; /* atomic: the callback runs, the mutex is held */
    int release; /* atomic: the callback may return */
} holder;

static int hold_cb(const sg_ledger_entry *e, void *ud) {
    (void)e;
    holder *h = ud;
    __atomic_store_n(&h->entered, 1, __ATOMIC_SEQ_CST);
    int64_t until = sg_clock_now(NULL) + SG_MS(1500);
    while (!__atomic_load_n(&h->release, __ATOMIC_SEQ_CST) &&
           sg_clock_now(NULL) < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static void *hold_main(void *arg) {
    holder *h = arg;
    (void)sg_ledger_list_unresolved(h->l, hold_cb, h);
    return NULL;
}

static void an_intent_waits_for_another_thread_no_longer_than_the_budget(void **state) {
    fixture *f = *state;
    for (int pass = 0; pass < 2; pass++) {
        /* the operation's budget; then lock_timeout_ns alone */
        sg_ledger_options_set_lock_timeout(f->opts, pass == 0 ? 0 : SG_MS(200));
        sg_ledger *l = open_ledger(f);
        assert_int_equal(sg_ledger_intent(l, "listed", "POST", "https://h/l"), 0);
        holder h = {l, 0, 0};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, hold_main, &h), 0);
        while (!__atomic_load_n(&h.entered, __ATOMIC_SEQ_CST)) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        int64_t t0 = sg_clock_now(NULL);
        int rv;
        if (pass == 0) {
            SG_AUTO_OPTIONS(o);
            sg_op_options_set_budget(o, SG_MS(200));
            SG_AUTO_OP(op);
            assert_int_equal(sg_op_start(op, o, t0), 0);
            rv = sg_ledger_op_intent(l, "busy-key", op, "https://h/busy");
        } else {
            rv = sg_ledger_intent(l, "busy-key", "POST", "https://h/busy");
            /* every call that waits for the handle: the same bound */
            sg_ledger_stats st = SG_LEDGER_STATS_INIT;
            assert_int_equal(sg_ledger_get_stats(l, &st), SG_ELOCKED);
            assert_int_equal(
                sg_ledger_resolve(l, "listed", SG_LEDGER_DONE, SG_OUTCOME_OK),
                SG_ELOCKED);
            assert_int_equal(sg_ledger_compact(l), SG_ELOCKED);
        }
        int64_t waited = sg_clock_now(NULL) - t0;
        __atomic_store_n(&h.release, 1, __ATOMIC_SEQ_CST);
        pthread_join(th, NULL);
        assert_int_equal(rv, SG_ELOCKED);
        assert_true(waited >= SG_MS(pass == 0 ? 200 : 800));
        assert_true(waited < SG_MS(pass == 0 ? 200 : 800) + SG_MS(500));
        /* once the other thread lets go, the same intent goes through */
        assert_int_equal(sg_ledger_intent(l, "busy-key", "POST", "https://h/busy"), 0);
        assert_int_equal(sg_ledger_resolve(l, "busy-key", SG_LEDGER_DONE, SG_OUTCOME_OK),
                         0);
        assert_int_equal(sg_ledger_resolve(l, "listed", SG_LEDGER_DONE, SG_OUTCOME_OK),
                         0);
        sg_ledger_close(l);
    }
}

/* Another process holds the lock and the intent's bound is 200 us away:
 * refused at the bound, not after a whole 1 ms poll past it (tried three
 * times: one of them at least ends within 950 us; each used to take 1 ms
 * or more, every time).  Once the lock is free, it goes through. */
static void an_intent_never_sleeps_past_its_bound(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    char path[512];
    snprintf(path, sizeof(path), "%s/ledger.lock", f->d.ledger);
    int other = open(path, O_RDWR | O_CLOEXEC);
    assert_true(other >= 0);
    assert_int_equal(flock(other, LOCK_EX), 0);
    int64_t best = INT64_MAX;
    for (int i = 0; i < 3; i++) {
        int64_t t0 = sg_clock_monotonic_now(NULL);
        assert_int_equal(
            sg__ledger_intent_until(l, "late", "POST", "https://h/late", t0 + SG_US(200)),
            SG_ELOCKED);
        int64_t took = sg_clock_monotonic_now(NULL) - t0;
        assert_true(took >= SG_US(200));
        best = took < best ? took : best;
    }
    assert_true(best < SG_US(950));
    flock(other, LOCK_UN);
    close(other);
    assert_int_equal(count_unresolved(l), 0);
    assert_int_equal(sg__ledger_intent_until(l, "late", "POST", "https://h/late",
                                             sg_clock_monotonic_now(NULL) + SG_SEC(5)),
                     0);
    assert_int_equal(count_unresolved(l), 1);
    sg_ledger_close(l);
}

static void pending_intent_of_a_dead_process_can_be_reconciled(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "op-5", "POST", "https://h/x"), 0);
    sg_ledger_close(l); /* the process "died" without resolving */
    l = open_ledger(f);
    assert_int_equal(count_unresolved(l), 1);
    assert_int_equal(sg_ledger_reconcile(l, "op-5", ""), 0);
    assert_int_equal(count_unresolved(l), 0);
    sg_ledger_close(l);
}

static void intent_for_an_unresolved_key_is_refused(void **state) {
    fixture *f = *state;
    sg_ledger *a = open_ledger(f);
    sg_ledger *b = open_ledger(f);
    assert_int_equal(sg_ledger_intent(a, "op-6", "POST", "https://h/x"), 0);
    /* the same handle, and another handle (as another process would) */
    assert_int_equal(sg_ledger_intent(a, "op-6", "POST", "https://h/x"), SG_EEXIST);
    assert_int_equal(sg_ledger_intent(b, "op-6", "POST", "https://h/x"), SG_EEXIST);
    assert_int_equal(
        sg_ledger_resolve(a, "op-6", SG_LEDGER_UNKNOWN, SG_OUTCOME_TRUNCATED), 0);
    assert_int_equal(sg_ledger_intent(b, "op-6", "POST", "https://h/x"), SG_EEXIST);
    assert_int_equal(sg_ledger_reconcile(b, "op-6", "not charged"), 0);
    /* settled: the key may be used again */
    assert_int_equal(sg_ledger_intent(a, "op-6", "POST", "https://h/x"), 0);
    assert_int_equal(sg_ledger_resolve(b, "op-6", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(sg_ledger_intent(a, "op-6", "POST", "https://h/x"), 0);
    assert_int_equal(count_unresolved(a), 1);
    assert_int_equal(count_unresolved(b), 1);
    sg_ledger_close(a);
    sg_ledger_close(b);
}

static void record_arguments_are_checked(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    static char url[SG_LEDGER_URL_MAX + 2];
    memset(url, 'u', sizeof(url) - 1);
    url[sizeof(url) - 1] = '\0';
    assert_int_equal(sg_ledger_intent(l, "k", "POST", url), SG_ERANGE);
    url[SG_LEDGER_URL_MAX] = '\0';
    assert_int_equal(sg_ledger_intent(l, "k-max-url", "POST", url), 0);
    assert_int_equal(sg_ledger_intent(NULL, "k", "POST", "/"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, NULL, "POST", "/"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", NULL, "/"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "POST", NULL), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "", "/"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "PO ST", "/"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "POSTPOSTPOSTPOSTPOSTPOSTPOSTPOSTX", "/"),
                     SG_ERANGE);
    assert_int_equal(sg_ledger_intent(l, "k", "POST", ""), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "POST", "/a b"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "POST", "/a\x1eSGL"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "POST", "/a\n"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "bad key", "POST", "/"), SG_EINVAL);
    assert_int_equal(sg_ledger_intent(l, "k", "POST", "/caf\xc3\xa9"), 0);

    assert_int_equal(
        sg_ledger_attempt(l, "k", 0, SG_OUTCOME_OK, SG_PHASE_SEND, true, 0, false),
        SG_EINVAL);
    assert_int_equal(
        sg_ledger_attempt(l, "k", 1, SG_OUTCOME_COUNT_, SG_PHASE_SEND, true, 0, false),
        SG_EINVAL);
    assert_int_equal(
        sg_ledger_attempt(l, "k", 1, SG_OUTCOME_OK, SG_PHASE_COUNT_, true, 0, false),
        SG_EINVAL);
    assert_int_equal(
        sg_ledger_attempt(l, "k", 1, SG_OUTCOME_OK, SG_PHASE_SEND, true, 99, false),
        SG_EINVAL);
    assert_int_equal(
        sg_ledger_attempt(l, "k", 1, SG_OUTCOME_OK, SG_PHASE_SEND, true, 600, false),
        SG_EINVAL);
    assert_int_equal(
        sg_ledger_attempt(l, "nope", 1, SG_OUTCOME_OK, SG_PHASE_SEND, true, 200, false),
        SG_ENOTFOUND);
    assert_int_equal(sg_ledger_attempt_record(l, "k", NULL), SG_EINVAL);
    assert_int_equal(sg_ledger_resolve(l, "k", (sg_ledger_resolution)0, SG_OUTCOME_OK),
                     SG_EINVAL);
    assert_int_equal(sg_ledger_resolve(l, "k", SG_LEDGER_DONE, SG_OUTCOME_COUNT_),
                     SG_EINVAL);
    assert_int_equal(sg_ledger_resolve(l, "nope", SG_LEDGER_DONE, SG_OUTCOME_OK),
                     SG_ENOTFOUND);
    assert_int_equal(sg_ledger_reconcile(l, "k", "line\nbreak"), SG_EINVAL);
    static char note[SG_LEDGER_NOTE_MAX + 2];
    memset(note, 'n', sizeof(note) - 1);
    assert_int_equal(sg_ledger_reconcile(l, "k", note), SG_ERANGE);
    assert_int_equal(sg_ledger_reconcile(NULL, "k", NULL), SG_EINVAL);
    assert_int_equal(sg_ledger_list_unresolved(l, NULL, NULL), SG_EINVAL);
    assert_int_equal(sg_ledger_list_unresolved(NULL, collect, NULL), SG_EINVAL);
    assert_int_equal(sg_ledger_compact(NULL), SG_EINVAL);
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    assert_int_equal(sg_ledger_get_stats(NULL, &st), SG_EINVAL);
    assert_int_equal(sg_ledger_get_stats(l, NULL), SG_EINVAL);
    /* the failures wrote nothing: two intents are live */
    assert_int_equal(count_unresolved(l), 2);
    sg_ledger_close(l);
}

static void attempt_record_copies_the_policy_record(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "op-7", "POST", "/x"), 0);
    sg_op_attempt rec;
    memset(&rec, 0, sizeof(rec));
    rec.n = 3;
    rec.outcome = SG_OUTCOME_TRUNCATED;
    rec.phase = SG_PHASE_STREAMING;
    rec.sent = true;
    rec.http_status = 200;
    rec.outcome_unknown = true;
    assert_int_equal(sg_ledger_attempt_record(l, "op-7", &rec), 0);
    listing *ls = list(l);
    assert_int_equal(ls->first.attempts, 3);
    assert_int_equal(ls->first.last_outcome, SG_OUTCOME_TRUNCATED);
    assert_true(ls->first.last_outcome_unknown);
    sg_ledger_close(l);
}

static int stop(const sg_ledger_entry *e, void *ud) {
    (void)e;
    (*(size_t *)ud)++;
    return 1;
}

static void list_callback_can_stop_the_listing(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "a", "POST", "/a"), 0);
    assert_int_equal(sg_ledger_intent(l, "b", "POST", "/b"), 0);
    size_t seen = 0;
    assert_int_equal(sg_ledger_list_unresolved(l, stop, &seen), SG_ECANCELED);
    assert_int_equal(seen, 1);
    sg_ledger_close(l);
}

static void list_is_oldest_first(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "first", "POST", "/1"), 0);
    assert_int_equal(sg_ledger_intent(l, "second", "POST", "/2"), 0);
    assert_int_equal(sg_ledger_intent(l, "third", "GET", "/3"), 0);
    assert_int_equal(sg_ledger_resolve(l, "second", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    listing *ls = list(l);
    assert_int_equal(ls->n, 2);
    assert_true(strncmp(ls->lines[0], "first POST /1 ", 14) == 0);
    assert_true(strncmp(ls->lines[1], "third GET /3 ", 13) == 0);
    sg_ledger_close(l);
}

static void max_live_bounds_the_index(void **state) {
    fixture *f = *state;
    sg_ledger_options_set_max_live(f->opts, 3);
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "a", "POST", "/"), 0);
    assert_int_equal(sg_ledger_intent(l, "b", "POST", "/"), 0);
    assert_int_equal(sg_ledger_intent(l, "c", "POST", "/"), 0);
    assert_int_equal(sg_ledger_intent(l, "d", "POST", "/"), SG_ETOOMANY);
    assert_int_equal(sg_ledger_resolve(l, "a", SG_LEDGER_FAILED, SG_OUTCOME_REFUSED), 0);
    assert_int_equal(sg_ledger_intent(l, "d", "POST", "/"), 0);
    sg_ledger_close(l);
    /* a file holding more than the cap cannot be opened with it */
    sg_ledger_options_set_max_live(f->opts, 2);
    sg_ledger *l2 = NULL;
    assert_int_equal(sg_ledger_open(&l2, f->d.ledger, f->opts), SG_ETOOMANY);
    assert_null(l2);
}

/* -------------------------------------------------------- reopen, compaction */

static void reopen_after_close_sees_everything(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof(key), "k%02d", i);
        assert_int_equal(sg_ledger_intent(l, key, "POST", "/x"), 0);
        assert_int_equal(sg_ledger_attempt(l, key, 1, SG_OUTCOME_IDLE_TIMEOUT,
                                           SG_PHASE_STREAMING, true, 200, i % 3 == 0),
                         0);
        if (i % 3 == 0) {
            assert_int_equal(
                sg_ledger_resolve(l, key, SG_LEDGER_UNKNOWN, SG_OUTCOME_IDLE_TIMEOUT), 0);
        } else if (i % 3 == 1) {
            assert_int_equal(sg_ledger_resolve(l, key, SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
        }
    }
    listing before = *list(l);
    sg_ledger_close(l);
    l = open_ledger(f);
    listing *after = list(l);
    assert_int_equal(after->n, before.n);
    assert_int_equal(after->n, 33); /* 17 unknown + 16 pending */
    assert_memory_equal(after->lines, before.lines, sizeof(before.lines));
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    assert_int_equal(sg_ledger_get_stats(l, &st), 0);
    assert_int_equal(st.records, 50 * 2 + 34);
    assert_int_equal(st.corrupt_regions, 0);
    assert_int_equal(st.tail_bytes, 0);
    assert_int_equal(st.live, 33);
    sg_ledger_close(l);
}

typedef struct key_set {
    size_t n;
    char keys[256][16];
    uint8_t types[256];
} key_set;

static int collect_records(const sg__ledger_rec *r, uint64_t off, size_t size, void *ud) {
    key_set *ks = ud;
    (void)off;
    (void)size;
    if (ks->n < 256) {
        snprintf(ks->keys[ks->n], sizeof(ks->keys[0]), "%.*s", (int)r->key_len, r->key);
        ks->types[ks->n] = r->type;
    }
    ks->n++;
    return 0;
}

static void scan_file(const fixture *f, key_set *ks, sg__ledger_scan *sc) {
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", f->d.ledger, SG__LEDGER_DATA);
    int fd = open(path, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    memset(ks, 0, sizeof(*ks));
    assert_int_equal(
        sg__ledger_scan_fd(fd, 0, (uint64_t)st.st_size, collect_records, ks, sc), 0);
    close(fd);
}

/* The policy record's usage is written after its attempt, in the same
 * append: the file holds the intent, the attempt and its usage, and the
 * handle counts the three as a replay does. */
static void attempt_record_writes_its_usage_after_it(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "op-8", "POST", "/x"), 0);
    sg_op_attempt rec =
        sg_test_attempt(1, SG_OUTCOME_OK, SG_PHASE_STREAMING, 200,
                        (sg_op_usage){2006, 300, 1920, 256, SG_USAGE_PROVIDER});
    assert_int_equal(sg_ledger_attempt_record(l, "op-8", &rec), 0);
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    assert_int_equal(sg_ledger_get_stats(l, &st), 0);
    assert_int_equal(st.records, 3);
    sg_ledger_close(l);
    key_set ks;
    sg__ledger_scan sc;
    scan_file(f, &ks, &sc);
    assert_int_equal(ks.n, 3);
    assert_int_equal(ks.types[1], SG__LREC_ATTEMPT);
    assert_int_equal(ks.types[2], SG__LREC_USAGE);
    assert_string_equal(ks.keys[2], "op-8");
    l = open_ledger(f);
    assert_int_equal(sg_ledger_get_stats(l, &st), 0);
    assert_int_equal(st.records, 3);
    listing *ls = list(l);
    assert_int_equal(ls->first.attempts, 1); /* the attempt, applied whole */
    sg_ledger_close(l);
}

static void compaction_keeps_exactly_the_live_records(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    sg_ledger *other = open_ledger(f); /* opened before: must follow the new file */
    char key[32];
    for (int i = 0; i < 40; i++) {
        snprintf(key, sizeof(key), "c%02d", i);
        assert_int_equal(sg_ledger_intent(l, key, "POST", "/x"), 0);
        sg_manual_clock_advance(&f->clock, SG_MS(1));
        assert_int_equal(sg_ledger_attempt(l, key, 1, SG_OUTCOME_CONNECT_TIMEOUT,
                                           SG_PHASE_CONNECT, false, 0, false),
                         0);
        assert_int_equal(sg_ledger_attempt(l, key, 2, SG_OUTCOME_TRUNCATED,
                                           SG_PHASE_STREAMING, true, 200, i % 4 == 0),
                         0);
        switch (i % 4) {
        case 0:
            assert_int_equal(
                sg_ledger_resolve(l, key, SG_LEDGER_UNKNOWN, SG_OUTCOME_TRUNCATED), 0);
            break;
        case 1:
            assert_int_equal(sg_ledger_resolve(l, key, SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
            break;
        case 2:
            assert_int_equal(
                sg_ledger_resolve(l, key, SG_LEDGER_FAILED, SG_OUTCOME_HTTP_ERROR), 0);
            break;
        default:
            break; /* pending */
        }
    }
    /* reconcile some unknowns */
    assert_int_equal(sg_ledger_reconcile(l, "c00", "done by hand"), 0);
    assert_int_equal(sg_ledger_reconcile(l, "c04", NULL), 0);
    listing before = *list(l);
    assert_int_equal(before.n, 18); /* 8 unknown + 10 pending */
    off_t size_before = file_size(f);

    assert_int_equal(sg_ledger_compact(l), 0);
    assert_true(file_size(f) < size_before);
    assert_memory_equal(list(l)->lines, before.lines, sizeof(before.lines));
    assert_int_equal(list(l)->n, 18);

    /* the file holds one intent and one attempt per live key, plus one
     * resolution per unknown, and nothing about settled keys */
    key_set ks;
    sg__ledger_scan sc;
    scan_file(f, &ks, &sc);
    assert_int_equal(ks.n, 18 * 2 + 8);
    assert_int_equal(sc.corrupt_regions + sc.tail_bytes, 0);
    for (size_t i = 0; i < ks.n; i++) {
        int k = atoi(ks.keys[i] + 1);
        assert_true(k % 4 == 0 || k % 4 == 3);
        assert_true(k != 0 && k != 4);
    }

    /* the other handle follows the new file, and can append to it */
    assert_memory_equal(list(other)->lines, before.lines, sizeof(before.lines));
    assert_int_equal(sg_ledger_intent(other, "after", "POST", "/y"), 0);
    assert_int_equal(sg_ledger_resolve(other, "c03", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(count_unresolved(l), 18);
    sg_ledger_close(other);

    /* and a fresh open sees the same */
    sg_ledger_close(l);
    l = open_ledger(f);
    listing *ls = list(l);
    assert_int_equal(ls->n, 18);
    assert_true(strncmp(ls->lines[17], "after POST /y ", 14) == 0);
    /* compacting twice in a row is harmless; an empty ledger compacts too */
    assert_int_equal(sg_ledger_compact(l), 0);
    assert_int_equal(sg_ledger_compact(l), 0);
    assert_int_equal(count_unresolved(l), 18);
    sg_ledger_close(l);
}

static void compaction_of_an_empty_ledger_leaves_an_empty_file(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "x", "POST", "/"), 0);
    assert_int_equal(sg_ledger_resolve(l, "x", SG_LEDGER_DONE, SG_OUTCOME_OK), 0);
    assert_int_equal(sg_ledger_compact(l), 0);
    assert_int_equal(file_size(f), 0);
    assert_int_equal(count_unresolved(l), 0);
    sg_ledger_close(l);
}

/* ------------------------------------------------ corruption through the API */

static void write_at(const fixture *f, off_t off, const void *p, size_t n) {
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", f->d.ledger, SG__LEDGER_DATA);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, p, n, off), (ssize_t)n);
    close(fd);
}

static void truncate_to(const fixture *f, off_t len) {
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", f->d.ledger, SG__LEDGER_DATA);
    assert_int_equal(truncate(path, len), 0);
}

static void torn_tail_is_ignored_and_cut_off_by_the_next_append(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "keep-1", "POST", "/1"), 0);
    assert_int_equal(sg_ledger_intent(l, "keep-2", "POST", "/2"), 0);
    off_t good = file_size(f);
    assert_int_equal(sg_ledger_intent(l, "torn", "POST", "/3"), 0);
    off_t full = file_size(f);
    sg_ledger_close(l);
    /* every possible tear of the last record */
    for (off_t cut = good; cut < full; cut++) {
        truncate_to(f, cut);
        l = open_ledger(f);
        listing *ls = list(l);
        assert_int_equal(ls->n, 2);
        sg_ledger_stats st = SG_LEDGER_STATS_INIT;
        sg_ledger_get_stats(l, &st);
        assert_int_equal(st.tail_bytes, (uint64_t)(cut - good));
        assert_int_equal(st.corrupt_regions, 0);
        sg_ledger_close(l);
    }
    l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "next", "POST", "/4"), 0);
    sg_ledger_close(l);
    key_set ks;
    sg__ledger_scan sc;
    scan_file(f, &ks, &sc);
    assert_int_equal(ks.n, 3);
    assert_string_equal(ks.keys[2], "next");
    assert_int_equal(sc.tail_bytes, 0);
    assert_int_equal(sc.corrupt_regions, 0);
}

static void corrupt_middle_record_is_skipped_and_later_ones_kept(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "one", "POST", "/1"), 0);
    off_t mid = file_size(f);
    assert_int_equal(sg_ledger_intent(l, "two", "POST", "/2"), 0);
    off_t end2 = file_size(f);
    assert_int_equal(sg_ledger_intent(l, "three", "POST", "/3"), 0);
    sg_ledger_close(l);
    /* one flipped byte anywhere in the middle record, header or payload */
    for (off_t at = mid; at < end2; at++) {
        char path[400];
        snprintf(path, sizeof(path), "%s/%s", f->d.ledger, SG__LEDGER_DATA);
        int fd = open(path, O_RDWR);
        unsigned char b;
        assert_int_equal(pread(fd, &b, 1, at), 1);
        unsigned char x = (unsigned char)(b ^ 0x5A);
        assert_int_equal(pwrite(fd, &x, 1, at), 1);
        l = open_ledger(f);
        listing *ls = list(l);
        assert_int_equal(ls->n, 2);
        assert_true(strncmp(ls->lines[0], "one ", 4) == 0);
        assert_true(strncmp(ls->lines[1], "three ", 6) == 0);
        sg_ledger_stats st = SG_LEDGER_STATS_INIT;
        sg_ledger_get_stats(l, &st);
        assert_int_equal(st.corrupt_regions, 1);
        assert_int_equal(st.corrupt_bytes, (uint64_t)(end2 - mid));
        assert_int_equal(st.records, 2);
        sg_ledger_close(l);
        assert_int_equal(pwrite(fd, &b, 1, at), 1);
        close(fd);
    }
}

static void garbage_appended_by_someone_else_is_never_a_record(void **state) {
    fixture *f = *state;
    sg_ledger *l = open_ledger(f);
    assert_int_equal(sg_ledger_intent(l, "one", "POST", "/1"), 0);
    off_t end = file_size(f);
    /* something that looks like a header: magic, version, type, huge length */
    const unsigned char junk[] = {0x1E, 'S',  'G',  'L', 1, 1, 0,
                                  0,    0xFF, 0xFF, 0,   0, 0, 0};
    write_at(f, end, junk, sizeof(junk));
    assert_int_equal(count_unresolved(l), 1); /* the handle catches up, ignores it */
    assert_int_equal(sg_ledger_intent(l, "two", "POST", "/2"), 0);
    sg_ledger_close(l);
    l = open_ledger(f);
    assert_int_equal(count_unresolved(l), 2);
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    sg_ledger_get_stats(l, &st);
    assert_int_equal(st.corrupt_regions + st.tail_bytes, 0); /* the junk was cut */
    sg_ledger_close(l);
}

/* -------------------------------------------------------- locking, fsync */

static void lock_held_elsewhere_times_out_with_elocked(void **state) {
    fixture *f = *state;
    sg_ledger_options_set_lock_timeout(f->opts, SG_MS(30));
    sg_ledger *l = open_ledger(f);
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", f->d.ledger, SG__LEDGER_LOCK);
    int fd = open(path, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    assert_int_equal(sg_ledger_intent(l, "x", "POST", "/"), SG_ELOCKED);
    static listing ls;
    assert_int_equal(sg_ledger_list_unresolved(l, collect, &ls), SG_ELOCKED);
    assert_int_equal(ls.n, 0);
    sg_ledger *l2 = NULL;
    assert_int_equal(sg_ledger_open(&l2, f->d.ledger, f->opts), SG_ELOCKED);
    /* a shared lock held elsewhere still lets readers in */
    assert_int_equal(flock(fd, LOCK_SH), 0);
    assert_int_equal(count_unresolved(l), 0);
    assert_int_equal(sg_ledger_intent(l, "x", "POST", "/"), SG_ELOCKED);
    assert_int_equal(flock(fd, LOCK_UN), 0);
    assert_int_equal(sg_ledger_intent(l, "x", "POST", "/"), 0);
    close(fd);
    sg_ledger_close(l);
}

static void every_fsync_policy_records_the_same(void **state) {
    fixture *f = *state;
    const sg_ledger_fsync policies[] = {SG_LEDGER_FSYNC_DEFAULT, SG_LEDGER_FSYNC_ALWAYS,
                                        SG_LEDGER_FSYNC_NEVER};
    for (size_t i = 0; i < 3; i++) {
        sg_ledger_options_set_fsync(f->opts, policies[i]);
        sg_ledger *l = open_ledger(f);
        char key[16];
        snprintf(key, sizeof(key), "p%zu", i);
        assert_int_equal(sg_ledger_intent(l, key, "POST", "/"), 0);
        assert_int_equal(sg_ledger_attempt(l, key, 1, SG_OUTCOME_OK, SG_PHASE_STREAMING,
                                           true, 200, false),
                         0);
        assert_int_equal(sg_ledger_resolve(l, key, SG_LEDGER_UNKNOWN, SG_OUTCOME_OK), 0);
        assert_int_equal(sg_ledger_reconcile(l, key, "x"), 0);
        assert_int_equal(sg_ledger_compact(l), 0);
        sg_ledger_close(l);
    }
    sg_ledger *l = open_ledger(f);
    assert_int_equal(count_unresolved(l), 0);
    sg_ledger_close(l);
}

typedef struct thread_arg {
    sg_ledger *l;
    int t;
    int failures;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    char key[32];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "t%d-%03d", a->t, i);
        if (sg_ledger_intent(a->l, key, "POST", "/t") != 0 ||
            sg_ledger_attempt(a->l, key, 1, SG_OUTCOME_TRUNCATED, SG_PHASE_STREAMING,
                              true, 200, true) != 0 ||
            (i % 2 == 0 &&
             sg_ledger_resolve(a->l, key, SG_LEDGER_DONE, SG_OUTCOME_OK) != 0)) {
            a->failures++;
        }
        if (i % 50 == 0 && sg_ledger_compact(a->l) != 0) {
            a->failures++;
        }
    }
    return NULL;
}

/* Without syncs, then with the default policy: the handle's sync thread
 * runs beside the four, across their compactions. */
static void one_handle_is_shared_by_threads(void **state) {
    fixture *f = *state;
    for (int policy = 0; policy < 2; policy++) {
        sg_ledger_options_set_fsync(f->opts, policy == 0 ? SG_LEDGER_FSYNC_NEVER
                                                         : SG_LEDGER_FSYNC_DEFAULT);
        sg_ledger *l = open_ledger(f);
        pthread_t th[4];
        thread_arg args[4];
        for (int t = 0; t < 4; t++) {
            args[t] = (thread_arg){l, t + 4 * policy, 0};
            assert_int_equal(pthread_create(&th[t], NULL, thread_main, &args[t]), 0);
        }
        for (int t = 0; t < 4; t++) {
            pthread_join(th[t], NULL);
            assert_int_equal(args[t].failures, 0);
        }
        assert_int_equal(sg_ledger_sync(l, -1), 0);
        sg_ledger_stats st = SG_LEDGER_STATS_INIT;
        assert_int_equal(sg_ledger_get_stats(l, &st), 0);
        assert_int_equal(st.unsynced + st.sync_failures, 0);
        assert_int_equal(count_unresolved(l), 400 * (policy + 1));
        sg_ledger_close(l);
        l = open_ledger(f);
        assert_int_equal(count_unresolved(l), 400 * (policy + 1));
        sg_ledger_close(l);
    }
}

/* ----------------------------------------------------- names and resolution */

static void names_and_line_format(void **state) {
    (void)state;
    assert_string_equal(sg_ledger_resolution_name(SG_LEDGER_DONE), "done");
    assert_string_equal(sg_ledger_resolution_name(SG_LEDGER_FAILED), "failed");
    assert_string_equal(sg_ledger_resolution_name(SG_LEDGER_UNKNOWN), "unknown");
    assert_null(sg_ledger_resolution_name((sg_ledger_resolution)0));
    assert_string_equal(sg_ledger_state_name(SG_LEDGER_PENDING), "pending");
    assert_string_equal(sg_ledger_state_name(SG_LEDGER_UNRESOLVED_UNKNOWN), "unknown");
    assert_null(sg_ledger_state_name((sg_ledger_state)9));

    sg_ledger_entry e = {.key = "k",
                         .method = "GET",
                         .url = "/u",
                         .first_seen_ns = 0,
                         .state = SG_LEDGER_PENDING};
    char buf[SGX_LEDGER_LINE_MAX];
    assert_int_equal(sgx_ledger_format_unresolved_line(&e, buf, sizeof(buf)),
                     (int)strlen("k GET /u 1970-01-01T00:00:00.000Z 0 none pending"));
    assert_string_equal(buf, "k GET /u 1970-01-01T00:00:00.000Z 0 none pending");
    char small[8];
    assert_int_equal(sgx_ledger_format_unresolved_line(&e, small, sizeof(small)),
                     SG_ENOBUFS);
    assert_string_equal(small, "k GET /");
    assert_int_equal(sgx_ledger_format_unresolved_line(NULL, buf, sizeof(buf)),
                     SG_EINVAL);
    assert_int_equal(sgx_ledger_format_unresolved_line(&e, NULL, 0), SG_EINVAL);
}

static void resolution_of_follows_the_policy_flags(void **state) {
    (void)state;
    assert_int_equal(sg_ledger_resolution_of(NULL), SG_LEDGER_UNKNOWN);
    int64_t now = SG_SEC(100);
    SG_AUTO_OP(op);
    sg_op_plan plan;
    sg_op_verdict v;
    sg_op_result r;

    /* ok -> done */
    assert_int_equal(sg_op_start(op, NULL, now), 0);
    assert_int_equal(sg_op_next_attempt(op, now, &plan), 0);
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_OK;
    r.phase = SG_PHASE_STREAMING;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    r.items = 3;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    assert_int_equal(sg_ledger_resolution_of(op), SG_LEDGER_DONE);

    /* a POST that timed out waiting for its first item -> unknown */
    assert_int_equal(sg_op_start(op, NULL, now), 0);
    assert_int_equal(sg_op_next_attempt(op, now, &plan), 0);
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_FIRST_ITEM_TIMEOUT;
    r.phase = SG_PHASE_WAIT_FIRST_ITEM;
    r.sent = true;
    r.headers_received = true;
    r.http_status = 200;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    assert_true(v.outcome_unknown);
    assert_int_equal(sg_ledger_resolution_of(op), SG_LEDGER_UNKNOWN);

    /* never sent -> failed (max_attempts 1 so it stops) */
    SG_AUTO_OPTIONS(o);
    sg_op_options_set_max_attempts(o, 1);
    assert_int_equal(sg_op_start(op, o, now), 0);
    assert_int_equal(sg_op_next_attempt(op, now, &plan), 0);
    memset(&r, 0, sizeof(r));
    r.outcome = SG_OUTCOME_CONNECT_TIMEOUT;
    r.phase = SG_PHASE_CONNECT;
    assert_int_equal(sg_op_attempt_done(op, now, &r, &v), 0);
    assert_false(v.outcome_unknown);
    assert_int_equal(sg_ledger_resolution_of(op), SG_LEDGER_FAILED);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_derive_matches_the_documented_encoding),
        cmocka_unit_test(key_derive_is_stable_and_distinct),
        cmocka_unit_test(derived_key_is_a_valid_idempotency_key),
        cmocka_unit_test(key_derive_rejects_bad_arguments),
        cmocka_unit_test(key_check_accepts_what_the_policy_accepts),
        cmocka_unit_test_setup_teardown(
            open_creates_the_directory_and_rejects_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(intent_then_done_is_no_longer_unresolved, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(intent_then_failed_is_no_longer_unresolved, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(pending_intent_is_listed_with_its_fields, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(unknown_is_listed_until_reconciled, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            an_intent_waits_for_the_lock_no_longer_than_the_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(an_operation_is_recorded_through_the_op_helpers,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(the_observer_records_the_attempt_that_ended,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(an_intent_never_sleeps_past_its_bound, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            pending_intent_of_a_dead_process_can_be_reconciled, setup, teardown),
        cmocka_unit_test_setup_teardown(intent_for_an_unresolved_key_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(record_arguments_are_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(attempt_record_copies_the_policy_record, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(list_callback_can_stop_the_listing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(list_is_oldest_first, setup, teardown),
        cmocka_unit_test_setup_teardown(max_live_bounds_the_index, setup, teardown),
        cmocka_unit_test_setup_teardown(reopen_after_close_sees_everything, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(attempt_record_writes_its_usage_after_it, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(compaction_keeps_exactly_the_live_records, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            compaction_of_an_empty_ledger_leaves_an_empty_file, setup, teardown),
        cmocka_unit_test_setup_teardown(
            torn_tail_is_ignored_and_cut_off_by_the_next_append, setup, teardown),
        cmocka_unit_test_setup_teardown(
            corrupt_middle_record_is_skipped_and_later_ones_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(
            garbage_appended_by_someone_else_is_never_a_record, setup, teardown),
        cmocka_unit_test_setup_teardown(lock_held_elsewhere_times_out_with_elocked, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            an_intent_waits_for_another_thread_no_longer_than_the_budget, setup,
            teardown),
        cmocka_unit_test_setup_teardown(every_fsync_policy_records_the_same, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(one_handle_is_shared_by_threads, setup, teardown),
        cmocka_unit_test(names_and_line_format),
        cmocka_unit_test(resolution_of_follows_the_policy_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
