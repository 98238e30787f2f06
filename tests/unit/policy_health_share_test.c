/*
 * Endpoint health shared with other processes (<streamguard/health.h>,
 * "Sharing with other processes"; docs/health.md): the listener told of
 * what attempts teach, facts from elsewhere applied - held to their cap,
 * never told back, a close from elsewhere closing only what elsewhere
 * opened - and the credential key two processes must share.  Time is
 * driven by hand; operations are driven through the policy as a
 * transport drives them.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "health_run.h"
#include "policy/sha256.h"

#define KEY_A "0123456789abcdef-shared-by-the-fleet"
#define CRED "Bearer sk-test-0001"

/* ------------------------------------------------------------- helpers */

typedef struct heard {
    int n;
    sg_health_fact f[8];
    char names[8][SG_HEALTH_ENDPOINT_MAX + 1];
} heard;

static void hear(const sg_health_fact *f, void *ud) {
    heard *h = ud;
    if (h->n < 8) {
        h->f[h->n] = *f;
        snprintf(h->names[h->n], sizeof(h->names[0]), "%s", f->endpoint);
        h->f[h->n].endpoint = h->names[h->n];
    }
    h->n++;
}

/* A table keyed by KEY_A, telling @heard. */
static sg_health *shared(heard *hd) {
    sg_health *h = new_health();
    assert_int_equal(sg_health_set_credential_key(h, KEY_A, strlen(KEY_A)), 0);
    if (hd != NULL) {
        memset(hd, 0, sizeof(*hd));
        assert_int_equal(sg_health_set_listener(h, hear, hd), 0);
    }
    return h;
}

/* An operation of @o started at @now, asking with credential CRED. */
static sg_op *start_as(const sg_op_options *o, int64_t now, const char *url) {
    sg_op *op = start(o, now);
    assert_int_equal(sg_op_set_endpoint_identity(op, 0, url, CRED, strlen(CRED)), 0);
    return op;
}

/* The breaker of @o's endpoint opened at @now by its default count of
 * unhealthy ends. */
static void open_it(const sg_op_options *o, int64_t now) {
    for (int i = 0; i < SG_HEALTH_DEFAULT_BREAKER_FAILURES; i++) {
        sg_op *op = start_as(o, now, URL);
        (void)go(op, now);
        (void)end(op, now, status(503));
        sg_op_free(op);
    }
}

static const uint8_t KEY1[SG_HEALTH_KEY_SIZE] = {1, 2,  3,  4,  5,  6,  7,  8,
                                                 9, 10, 11, 12, 13, 14, 15, 16};

/* ------------------------------------------------------------- listener */

/* A 429's cooling is told when it starts and when it moves markedly
 * later, not for each answer in flight that moves it a little; the
 * breaker is told when it opens and when it closes. */
static void the_listener_hears_what_attempts_teach(void **state) {
    (void)state;
    heard hd;
    sg_health *h = shared(&hd);
    sg_op_options *o = options(h, SG_SEC(30));
    sg_op *ops[3];
    for (int i = 0; i < 3; i++) {
        ops[i] = start_as(o, T0, URL);
        (void)go(ops[i], T0);
    }
    (void)end(ops[0], T0, with_retry_after(status(429), "5"));
    assert_int_equal(hd.n, 1);
    assert_int_equal(hd.f[0].state, SG_HEALTH_COOLING);
    assert_int_equal(hd.f[0].at, T0);
    assert_int_equal(hd.f[0].until, T0 + SG_SEC(5));
    assert_string_equal(hd.f[0].endpoint, NAME);
    (void)end(ops[1], T0 + SG_MS(50), with_retry_after(status(429), "5"));
    assert_int_equal(hd.n, 1); /* 50 ms later: not told */
    (void)end(ops[2], T0 + SG_MS(200), with_retry_after(status(429), "5"));
    assert_int_equal(hd.n, 2); /* 150 ms later than the last: told */
    assert_int_equal(hd.f[1].until, T0 + SG_MS(5200));
    assert_memory_equal(hd.f[1].key, hd.f[0].key, SG_HEALTH_KEY_SIZE);
    for (int i = 0; i < 3; i++) {
        sg_op_free(ops[i]);
    }
    sg_op_options_free(o);
    sg_health_free(h);

    h = shared(&hd);
    o = options(h, SG_SEC(30));
    open_it(o, T0);
    assert_int_equal(hd.n, 1);
    assert_int_equal(hd.f[0].state, SG_HEALTH_OPEN);
    assert_int_equal(hd.f[0].until, T0 + SG_HEALTH_DEFAULT_BREAKER_COOLDOWN);
    const int64_t t1 = T0 + SG_HEALTH_DEFAULT_BREAKER_COOLDOWN;
    sg_op *probe = start_as(o, t1, URL);
    (void)go(probe, t1);
    (void)end(probe, t1, status(200));
    sg_op_free(probe);
    assert_int_equal(hd.n, 2);
    assert_int_equal(hd.f[1].state, SG_HEALTH_CLOSED);
    assert_int_equal(hd.f[1].until, -1);
    assert_int_equal(hd.f[1].at, t1);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* ----------------------------------------------------- facts from elsewhere */

/* What one table learned, applied to another keyed alike, holds the same
 * endpoint asked with the same credential there - and is not told back;
 * a table with another key never matches it. */
static void a_fact_from_elsewhere_holds_the_endpoint_and_is_not_told_back(void **state) {
    (void)state;
    heard ha, hb;
    sg_health *a = shared(&ha), *b = shared(&hb);
    sg_op_options *oa = options(a, SG_SEC(30));
    sg_op *op = start_as(oa, T0, URL);
    (void)go(op, T0);
    (void)end(op, T0, with_retry_after(status(429), "5"));
    sg_op_free(op);
    assert_int_equal(ha.n, 1);
    const sg_health_fact *f = &ha.f[0];
    assert_int_equal(sg_health_apply(b, f->endpoint, f->key, f->state, f->until, f->at),
                     0);
    assert_int_equal(hb.n, 0);

    sg_op_options *ob = options(b, SG_SEC(2)); /* no room to wait 5 s */
    op = start_as(ob, T0 + SG_MS(1), URL);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(op, T0 + SG_MS(1), &p), SG_EREFUSED);
    assert_int_equal(sg_op_outcome(op), SG_OUTCOME_REFUSED);
    assert_int_equal(sg_op_final_reason(op), SG_OP_REASON_RATE_LIMITED);
    assert_int_equal(sg_op_endpoint_free_at(op), T0 + SG_SEC(5));
    sg_op_free(op);
    op = start(ob, T0 + SG_MS(1)); /* another credential: its own limits */
    const char *other = "Bearer sk-test-0002";
    assert_int_equal(sg_op_set_endpoint_identity(op, 0, URL, other, strlen(other)), 0);
    (void)go(op, T0 + SG_MS(1));
    sg_op_free(op);
    assert_int_equal(hb.n, 0);

    sg_health *c = new_health(); /* its own random key */
    sg_op_options *oc = options(c, SG_SEC(2));
    assert_int_equal(sg_health_apply(c, f->endpoint, f->key, f->state, f->until, f->at),
                     0);
    op = start_as(oc, T0 + SG_MS(1), URL);
    (void)go(op, T0 + SG_MS(1));
    sg_op_free(op);

    sg_op_options_free(oa);
    sg_op_options_free(ob);
    sg_op_options_free(oc);
    sg_health_free(a);
    sg_health_free(b);
    sg_health_free(c);
}

/* A fact from elsewhere holds an endpoint at most shared_max (an open
 * breaker at most breaker_cooldown_max too); one that is over, or an open
 * where the breaker is off, changes nothing. */
static void facts_from_elsewhere_are_capped(void **state) {
    (void)state;
    sg_health *h = shared(NULL);
    assert_int_equal(
        sg_health_apply(h, NAME, KEY1, SG_HEALTH_COOLING, T0 + SG_SEC(3600), T0), 0);
    seen s = look(h, T0);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.e[0].state, SG_HEALTH_COOLING);
    assert_int_equal(s.e[0].free_at, T0 + SG_HEALTH_DEFAULT_SHARED_MAX);
    assert_string_equal(s.names[0], NAME);
    sg_health_free(h);

    h = shared(NULL);
    assert_int_equal(
        sg_health_apply(h, NAME, KEY1, SG_HEALTH_OPEN, T0 + SG_SEC(3600), T0), 0);
    s = look(h, T0);
    assert_int_equal(s.e[0].state, SG_HEALTH_OPEN);
    assert_int_equal(s.e[0].free_at, T0 + SG_HEALTH_DEFAULT_BREAKER_COOLDOWN_MAX);
    assert_int_equal(state_at(h, T0 + SG_HEALTH_DEFAULT_BREAKER_COOLDOWN_MAX),
                     SG_HEALTH_HALF_OPEN);
    sg_health_free(h);

    h = shared(NULL);
    assert_int_equal(sg_health_set_shared_max(h, SG_SEC(10)), 0);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_OPEN, T0 + SG_SEC(30), T0),
                     0);
    assert_int_equal(look(h, T0).e[0].free_at, T0 + SG_SEC(10));
    /* a later fact never shortens it: it only ever makes it less free */
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_OPEN, T0 + SG_SEC(2), T0),
                     0);
    assert_int_equal(look(h, T0).e[0].free_at, T0 + SG_SEC(10));
    sg_health_free(h);

    h = shared(NULL);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_COOLING, T0, T0), 0);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_OPEN, T0 - 1, T0), 0);
    assert_int_equal(look(h, T0).n, 0); /* over already: nothing made */
    assert_int_equal(sg_health_set_breaker_failures(h, 0), 0);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_OPEN, T0 + SG_SEC(5), T0),
                     0);
    assert_int_equal(look(h, T0).n, 0); /* no breaker here */
    sg_health_free(h);
}

/* A close from elsewhere undoes an open from elsewhere, never a breaker
 * this table opened itself; after an open from elsewhere this table
 * sends its own probe. */
static void a_close_from_elsewhere_closes_only_what_elsewhere_opened(void **state) {
    (void)state;
    sg_health *h = shared(NULL);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_OPEN, T0 + SG_SEC(5), T0),
                     0);
    assert_int_equal(state_at(h, T0), SG_HEALTH_OPEN);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_CLOSED, -1, T0 + 1), 0);
    assert_int_equal(state_at(h, T0 + 1), SG_HEALTH_CLOSED);
    sg_health_free(h);

    heard hd;
    h = shared(&hd);
    sg_op_options *o = options(h, SG_SEC(30));
    open_it(o, T0);
    assert_int_equal(hd.n, 1);
    uint8_t key[SG_HEALTH_KEY_SIZE];
    memcpy(key, hd.f[0].key, sizeof(key));
    assert_int_equal(sg_health_apply(h, NAME, key, SG_HEALTH_CLOSED, -1, T0 + 1), 0);
    assert_int_equal(state_at(h, T0 + 1), SG_HEALTH_OPEN);
    /* longer from elsewhere: held longer, and still this table's own */
    assert_int_equal(
        sg_health_apply(h, NAME, key, SG_HEALTH_OPEN, T0 + SG_SEC(20), T0 + 1), 0);
    assert_int_equal(look(h, T0 + 1).e[0].free_at, T0 + SG_SEC(20));
    assert_int_equal(sg_health_apply(h, NAME, key, SG_HEALTH_CLOSED, -1, T0 + 2), 0);
    assert_int_equal(state_at(h, T0 + 2), SG_HEALTH_OPEN);
    assert_int_equal(hd.n, 1); /* none of it told back */
    sg_op_options_free(o);
    sg_health_free(h);

    /* opened from elsewhere, then half-open here: one probe of ours */
    h = shared(&hd);
    o = options(h, SG_SEC(30));
    sg_op *first = start_as(o, T0, URL); /* learns the key */
    (void)go(first, T0);
    (void)end(first, T0, status(200));
    sg_op_free(first);
    assert_int_equal(hd.n, 0);
    seen s = look(h, T0);
    assert_int_equal(s.n, 1);
    sg_health *other = shared(&hd);
    sg_op_options *oo = options(other, SG_SEC(30));
    open_it(oo, T0);
    assert_int_equal(hd.n, 1);
    const sg_health_fact *f = &hd.f[0];
    assert_int_equal(sg_health_apply(h, f->endpoint, f->key, f->state, f->until, f->at),
                     0);
    const int64_t t1 = T0 + SG_HEALTH_DEFAULT_BREAKER_COOLDOWN;
    assert_int_equal(state_at(h, t1 - 1), SG_HEALTH_OPEN);
    sg_op *probe = start_as(o, t1, URL);
    (void)go(probe, t1);
    sg_op *second = start_as(o, t1, URL);
    sg_op_plan p;
    assert_int_equal(sg_op_next_attempt(second, t1, &p), SG_EINPROGRESS);
    assert_int_equal(p.reason, SG_OP_REASON_CIRCUIT_OPEN);
    (void)end(probe, t1, status(503)); /* re-opens, for twice as long */
    assert_int_equal(look(h, t1).e[0].free_at,
                     t1 + 2 * SG_HEALTH_DEFAULT_BREAKER_COOLDOWN);
    sg_op_free(probe);
    sg_op_free(second);
    sg_op_options_free(o);
    sg_op_options_free(oo);
    sg_health_free(h);
    sg_health_free(other);
}

/* Counts the entries, and those named NAME with one failure counted. */
static int count_all(const sg_health_entry *e, void *ud) {
    int *n = ud;
    n[0]++;
    n[1] += strcmp(e->endpoint, NAME) == 0 && e->failures == 1;
    return 0;
}

/* Entries opened from elsewhere fill the table; once their time is over
 * they make room (no probe of this process will ever close them). */
static void facts_from_elsewhere_that_are_over_make_room(void **state) {
    (void)state;
    sg_health *h = shared(NULL);
    uint8_t key[SG_HEALTH_KEY_SIZE] = {0};
    char name[64];
    for (uint32_t i = 0; i <= SG_HEALTH_MAX_ENTRIES; i++) {
        memcpy(key, &i, sizeof(i));
        snprintf(name, sizeof(name), "https://host-%u.example:443/", i);
        assert_int_equal(
            sg_health_apply(h, name, key, SG_HEALTH_OPEN, T0 + SG_SEC(1), T0),
            i < SG_HEALTH_MAX_ENTRIES ? 0 : SG_ETOOMANY);
    }
    sg_op_options *o = options(h, SG_SEC(30));
    one(o, T0 + SG_SEC(1) - 1, status(503)); /* not tracked: nothing is over */
    int n[2] = {0, 0};
    assert_int_equal(sg_health_foreach(h, T0, count_all, n), 0);
    assert_int_equal(n[0], SG_HEALTH_MAX_ENTRIES);
    assert_int_equal(n[1], 0);
    one(o, T0 + SG_SEC(1), status(503)); /* tracked: one made room */
    n[0] = n[1] = 0;
    assert_int_equal(sg_health_foreach(h, T0, count_all, n), 0);
    assert_int_equal(n[0], SG_HEALTH_MAX_ENTRIES);
    assert_int_equal(n[1], 1);
    sg_op_options_free(o);
    sg_health_free(h);
}

/* ---------------------------------------------------------------- bounds */

static void bad_facts_and_keys_are_refused(void **state) {
    (void)state;
    sg_health *h = new_health();
    char long_name[SG_HEALTH_ENDPOINT_MAX + 2];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    const int64_t u = T0 + SG_SEC(1);
    assert_int_equal(sg_health_apply(NULL, NAME, KEY1, SG_HEALTH_OPEN, u, T0), SG_EINVAL);
    assert_int_equal(sg_health_apply(h, NULL, KEY1, SG_HEALTH_OPEN, u, T0), SG_EINVAL);
    assert_int_equal(sg_health_apply(h, NAME, NULL, SG_HEALTH_OPEN, u, T0), SG_EINVAL);
    assert_int_equal(sg_health_apply(h, "", KEY1, SG_HEALTH_OPEN, u, T0), SG_EINVAL);
    assert_int_equal(sg_health_apply(h, "https://a:443/\n", KEY1, SG_HEALTH_OPEN, u, T0),
                     SG_EINVAL);
    assert_int_equal(sg_health_apply(h, long_name, KEY1, SG_HEALTH_OPEN, u, T0),
                     SG_EINVAL);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_HALF_OPEN, u, T0),
                     SG_EINVAL);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, (sg_health_state)9, u, T0),
                     SG_EINVAL);
    assert_int_equal(look(h, T0).n, 0);

    uint8_t k[SG_HEALTH_CREDENTIAL_KEY_MAX + 1] = {0};
    assert_int_equal(sg_health_set_credential_key(NULL, k, 16), SG_EINVAL);
    assert_int_equal(sg_health_set_credential_key(h, NULL, 16), SG_EINVAL);
    assert_int_equal(sg_health_set_credential_key(h, k, 15), SG_EINVAL);
    assert_int_equal(sg_health_set_credential_key(h, k, sizeof(k)), SG_ERANGE);
    assert_int_equal(sg_health_set_shared_max(h, 0), SG_EINVAL);
    assert_int_equal(sg_health_set_shared_max(NULL, SG_SEC(1)), SG_EINVAL);
    assert_int_equal(sg_health_set_shared_max(h, SG_DURATION_MAX + 1), SG_ERANGE);
    assert_int_equal(sg_health_set_listener(NULL, hear, NULL), SG_EINVAL);
    assert_int_equal(sg_health_apply(h, NAME, KEY1, SG_HEALTH_COOLING, u, T0), 0);
    /* keys made already would never match again */
    assert_int_equal(sg_health_set_credential_key(h, k, 16), SG_ESTATE);
    sg_health_free(h);
}

/* A key longer than HMAC's block counts as its SHA-256 (RFC 2104): two
 * tables, one given the long key and one its hash, key alike. */
static void a_long_credential_key_keys_as_its_hash(void **state) {
    (void)state;
    uint8_t longkey[200];
    for (size_t i = 0; i < sizeof(longkey); i++) {
        longkey[i] = (uint8_t)(i * 7);
    }
    uint8_t digest[SG__SHA256_LEN];
    sg__sha256 c;
    sg__sha256_init(&c);
    sg__sha256_update(&c, longkey, sizeof(longkey));
    sg__sha256_final(&c, digest);
    heard ha, hb;
    sg_health *a = new_health(), *b = new_health();
    assert_int_equal(sg_health_set_credential_key(a, longkey, sizeof(longkey)), 0);
    assert_int_equal(sg_health_set_credential_key(b, digest, sizeof(digest)), 0);
    memset(&ha, 0, sizeof(ha));
    memset(&hb, 0, sizeof(hb));
    assert_int_equal(sg_health_set_listener(a, hear, &ha), 0);
    assert_int_equal(sg_health_set_listener(b, hear, &hb), 0);
    sg_op_options *oa = options(a, SG_SEC(30)), *ob = options(b, SG_SEC(30));
    sg_op *x = start_as(oa, T0, URL), *y = start_as(ob, T0, URL);
    (void)go(x, T0);
    (void)go(y, T0);
    (void)end(x, T0, with_retry_after(status(429), "1"));
    (void)end(y, T0, with_retry_after(status(429), "1"));
    assert_int_equal(ha.n, 1);
    assert_int_equal(hb.n, 1);
    assert_memory_equal(ha.f[0].key, hb.f[0].key, SG_HEALTH_KEY_SIZE);
    sg_op_free(x);
    sg_op_free(y);
    sg_op_options_free(oa);
    sg_op_options_free(ob);
    sg_health_free(a);
    sg_health_free(b);
}

/* -------------------------------------------------------------- threads */

typedef struct slow {
    atomic_int inside;
    atomic_int calls;
} slow;

static void slow_hear(const sg_health_fact *f, void *ud) {
    (void)f;
    slow *s = ud;
    atomic_store(&s->inside, 1);
    atomic_fetch_add(&s->calls, 1);
    const struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL); /* a listener still running when it is replaced */
    atomic_store(&s->inside, 0);
}

static void *teach(void *ud) {
    const sg_op_options *o = ud;
    sg_op *op = start_as(o, T0, URL);
    (void)go(op, T0);
    (void)end(op, T0, with_retry_after(status(429), "5"));
    sg_op_free(op);
    return NULL;
}

/* When sg_health_set_listener returns, the listener it replaced is not
 * running: its user data may go. */
static void a_replaced_listener_has_returned(void **state) {
    (void)state;
    slow s = {0};
    sg_health *h = shared(NULL);
    assert_int_equal(sg_health_set_listener(h, slow_hear, &s), 0);
    sg_op_options *o = options(h, SG_SEC(30));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, teach, o), 0);
    while (atomic_load(&s.calls) == 0) {
        sched_yield();
    }
    assert_int_equal(sg_health_set_listener(h, NULL, NULL), 0);
    assert_int_equal(atomic_load(&s.inside), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(atomic_load(&s.calls), 1);
    sg_op_options_free(o);
    sg_health_free(h);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(the_listener_hears_what_attempts_teach),
        cmocka_unit_test(a_fact_from_elsewhere_holds_the_endpoint_and_is_not_told_back),
        cmocka_unit_test(facts_from_elsewhere_are_capped),
        cmocka_unit_test(a_close_from_elsewhere_closes_only_what_elsewhere_opened),
        cmocka_unit_test(facts_from_elsewhere_that_are_over_make_room),
        cmocka_unit_test(bad_facts_and_keys_are_refused),
        cmocka_unit_test(a_long_credential_key_keys_as_its_hash),
        cmocka_unit_test(a_replaced_listener_has_returned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
