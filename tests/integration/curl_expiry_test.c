/*
 * Streams whose clocks expire together under the managed multi: every one
 * is decided and told before any of their connections is closed, and every
 * connection is closed within the same step when no clock is left; a close
 * yields to a clock about to come due, while the server is told at once.  The operations
 * read a hand-driven clock; closing a socket moves it 5 ms on (a teardown that costs
 * time), so a stream told after a close would be told late.  A clock that
 * comes due while a step reads its ready sockets is decided between one
 * socket's read and the next.  Real sockets against sg-fakemodel over
 * loopback.
 *
 * Usage: curl_expiry_test PATH/TO/sg-fakemodel
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#include <streamguard/curl.h>

#include "../sg_auto.h"

enum { STREAMS = 3 };

static sg_manual_clock mc;
static int closes; /* sockets libcurl closed */

typedef struct stream {
    int items;
    bool done;
    int64_t done_at;   /* the operation's clock when on_done ran */
    int64_t done_real; /* the real clock then */
    int closes_before; /* sockets closed by then */
    sg_outcome outcome;
} stream;

static int close_socket(void *clientp, curl_socket_t fd) {
    (void)clientp;
    closes++;
    sg_manual_clock_advance(&mc, SG_MS(5));
    return close(fd);
}

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    ((stream *)ud)->items++;
    return 0;
}

static void on_done(sg_curl_op *op, void *ud) {
    stream *s = ud;
    s->done = true;
    s->done_at = sg_manual_clock_now(&mc);
    s->done_real = sg_clock_now(NULL);
    s->closes_before = closes;
    s->outcome = sg_curl_op_outcome(op);
}

static sg_curl_options *options(const sg_clock *clock) {
    sg_curl_options *co = NULL;
    assert_int_equal(sg_curl_options_new(&co), 0);
    sg_test_curl_done(co);
    assert_int_equal(sg_curl_options_set_clock(co, clock), 0);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, on_done), 0);
    return co;
}

static bool all_have_items(const stream *s) {
    for (int i = 0; i < STREAMS; i++) {
        if (s[i].items < 2) {
            return false;
        }
    }
    return true;
}

/* Three streams stall after two items each; their 200 ms idle clocks
 * expire at one instant of the hand-driven clock. */
static void streams_expiring_together_are_all_told_before_any_close(void **state) {
    (void)state;
    sg_manual_clock_init(&mc, sg_clock_now(NULL));
    closes = 0;
    sg_clock clock = sg_manual_clock_as(&mc);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, &clock), 0);
    sg_op_options *po = NULL;
    assert_int_equal(sg_op_options_new(&po), 0);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(po, SG_SEC(10)), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(po, SG_MS(200)), 0);
    sg_curl_options *co = options(&clock);
    stream s[STREAMS] = {{0}};
    CURL *easy[STREAMS];
    sg_curl_op *ops[STREAMS];
    char url[512];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?n=10&gap=5&stall_after=2&stall=forever&_t=together.",
             fm_group()->base);
    for (int i = 0; i < STREAMS; i++) {
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_CLOSESOCKETFUNCTION, close_socket);
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &s[i]), 0);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    sg_op_options_free(po);
    sg_curl_options_free(co);
    /* the hand-driven clock stands still: no clock can expire here */
    int64_t until = sg_clock_now(NULL) + SG_SEC(10);
    while (!all_have_items(s) && sg_clock_now(NULL) < until) {
        sg_curl_multi_step(m, SG_MS(20));
    }
    assert_true(all_have_items(s));
    assert_int_equal(closes, 0);

    sg_manual_clock_advance(&mc, SG_MS(200));
    int64_t expiry = sg_manual_clock_now(&mc);
    assert_int_equal(sg_curl_multi_step(m, 0), 0); /* one step ends them all */
    for (int i = 0; i < STREAMS; i++) {
        assert_true(s[i].done);
        assert_int_equal(s[i].outcome, SG_OUTCOME_IDLE_TIMEOUT);
        assert_int_equal(s[i].closes_before, 0);
        assert_int_equal(s[i].done_at, expiry);
    }
    /* and the server saw every connection end in that same step */
    assert_int_equal(closes, STREAMS);
    for (int i = 0; i < STREAMS; i++) {
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
}

/* The server's request id of the stream tagged @tag, or -1. */
static long long request_id(const char *tag) {
    char *log = fm_fetch(fm_group(), "/_log?event=received", 0);
    long long id = -1;
    const char *p = log != NULL ? strstr(log, tag) : NULL;
    if (p != NULL) {
        while (p > log && p[-1] != '{') {
            p--;
        }
        const char *f = strstr(p, "\"id\":");
        id = f != NULL ? atoll(f + 5) : -1;
    }
    free(log);
    return id;
}

/* Whether the server logged request @id's client gone; waits up to 5 s
 * (of real time: the server's loop is its own) for it when @wait. */
static bool server_saw_end(long long id, bool wait) {
    char path[96];
    snprintf(path, sizeof(path), "/_log?event=client_gone&id=%lld", id);
    int64_t until = sg_clock_now(NULL) + SG_SEC(5);
    for (;;) {
        char *log = fm_fetch(fm_group(), path, 0);
        bool seen = log != NULL && strstr(log, "client_gone") != NULL;
        free(log);
        if (seen || !wait || sg_clock_now(NULL) >= until) {
            return seen;
        }
    }
}

/* Two streams stall after two items each; A's idle clock (200 ms) expires
 * half a millisecond before B's (200.5 ms), both on the hand-driven clock.
 * At A's instant A is decided and its server told (its HTTP/1.1
 * connection shut down), while its removal from libcurl - the close -
 * waits: B's clock comes due within the slack.  At B's instant, no clock
 * left, both transfers go. */
static void removal_yields_to_a_clock_due_within_the_slack(void **state) {
    (void)state;
    sg_manual_clock_init(&mc, sg_clock_now(NULL));
    closes = 0;
    sg_clock clock = sg_manual_clock_as(&mc);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, &clock), 0);
    sg_curl_options *co = options(&clock);
    static const char *const tags[2] = {"_t=yield_a.", "_t=yield_b."};
    const int64_t idle[2] = {SG_MS(200), SG_MS(200) + SG_US(500)};
    stream s[2] = {{0}};
    CURL *easy[2];
    sg_curl_op *ops[2];
    for (int i = 0; i < 2; i++) {
        sg_op_options *po = NULL;
        assert_int_equal(sg_op_options_new(&po), 0);
        assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
        assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
        assert_int_equal(sg_op_options_set_first_item_timeout(po, SG_SEC(10)), 0);
        assert_int_equal(sg_op_options_set_idle_timeout(po, idle[i]), 0);
        char url[512];
        snprintf(url, sizeof(url),
                 "%s/v1/chat/completions?n=10&gap=5&stall_after=2&stall=forever&%s",
                 fm_group()->base, tags[i]);
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        curl_easy_setopt(easy[i], CURLOPT_CLOSESOCKETFUNCTION, close_socket);
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &s[i]), 0);
        sg_op_options_free(po);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    sg_curl_options_free(co);
    int64_t until = sg_clock_now(NULL) + SG_SEC(10);
    while ((s[0].items < 2 || s[1].items < 2) && sg_clock_now(NULL) < until) {
        sg_curl_multi_step(m, SG_MS(20));
    }
    assert_true(s[0].items >= 2 && s[1].items >= 2);
    long long id[2] = {request_id(tags[0]), request_id(tags[1])};
    assert_true(id[0] >= 0 && id[1] >= 0);

    int64_t t0 = sg_manual_clock_now(&mc);
    sg_manual_clock_advance(&mc, idle[0]);
    assert_int_equal(sg_curl_multi_step(m, 0), 1); /* B still runs */
    assert_true(s[0].done);
    assert_int_equal(s[0].done_at, t0 + idle[0]);
    assert_int_equal(s[0].outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_false(s[1].done);
    assert_int_equal(closes, 0);              /* A's removal waits for B's clock */
    assert_true(server_saw_end(id[0], true)); /* yet the server saw A end */
    assert_false(server_saw_end(id[1], false));

    sg_manual_clock_advance(&mc, idle[1] - idle[0]);
    assert_int_equal(sg_curl_multi_step(m, 0), 0);
    assert_true(s[1].done);
    assert_int_equal(s[1].outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_int_equal(s[1].done_at, t0 + idle[1]); /* told at its instant */
    assert_int_equal(closes, 2); /* no clock left: both went in that step */
    assert_true(server_saw_end(id[1], true));
    for (int i = 0; i < 2; i++) {
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
}

/* A stream stalls after two items under a 30 s idle clock on the
 * hand-driven clock (the real timer, armed for that instant of real time,
 * is far off).  Once the hand clock passes the deadline, a step that may
 * wait 5 s decides the stream before its wait: the step skips its first
 * look only while the clock is before the instant the timer is armed
 * for, never on the timer's word alone. */
static void a_step_decides_what_is_due_before_it_waits(void **state) {
    (void)state;
    sg_manual_clock_init(&mc, sg_clock_now(NULL));
    closes = 0;
    sg_clock clock = sg_manual_clock_as(&mc);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, &clock), 0);
    /* no read buffer given back: the timer is the clocks' alone */
    assert_int_equal(sg_curl_multi_set_read_buffer_release(m, SG_TIME_NEVER), 0);
    sg_op_options *po = NULL;
    assert_int_equal(sg_op_options_new(&po), 0);
    assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
    assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
    assert_int_equal(sg_op_options_set_first_item_timeout(po, SG_SEC(60)), 0);
    assert_int_equal(sg_op_options_set_idle_timeout(po, SG_SEC(30)), 0);
    sg_curl_options *co = options(&clock);
    stream s = {0};
    char url[512];
    snprintf(
        url, sizeof(url),
        "%s/v1/chat/completions?n=10&gap=5&stall_after=2&stall=forever&_t=before_wait.",
        fm_group()->base);
    CURL *easy = curl_easy_init();
    curl_easy_setopt(easy, CURLOPT_URL, url);
    sg_curl_op *op;
    assert_int_equal(sg_curl_op_new(&op, easy, po, co, &s), 0);
    sg_op_options_free(po);
    sg_curl_options_free(co);
    assert_int_equal(sg_curl_multi_add(m, op), 0);
    int64_t until = sg_clock_now(NULL) + SG_SEC(10);
    while (s.items < 2 && sg_clock_now(NULL) < until) {
        sg_curl_multi_step(m, SG_MS(20));
    }
    assert_int_equal(s.items, 2);
    /* a step with nothing due waits (the stream stalls), and is no
     * reason to decide anything */
    assert_int_equal(sg_curl_multi_step(m, SG_MS(1)), 1);
    assert_false(s.done);

    sg_manual_clock_advance(&mc, SG_SEC(30));
    int64_t expiry = sg_manual_clock_now(&mc);
    int64_t t0 = sg_clock_now(NULL);
    assert_int_equal(sg_curl_multi_step(m, SG_SEC(5)), 0);
    assert_true(s.done);
    /* decided before the wait, not after it (the wait ends when something
     * real wakes the loop: libcurl's own timer, ~200 ms here) */
    assert_true(s.done_real - t0 < SG_MS(100));
    assert_int_equal(s.outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_int_equal(s.done_at, expiry);
    sg_curl_op_free(op);
    curl_easy_cleanup(easy);
    sg_curl_multi_free(m);
}

/* What the between-reads test saw, in order: 'A' or 'B' for a third item
 * of that stream, 'C' for C's end. */
static char seen[8];
static int nseen;
static stream *between_c;
static int64_t between_due; /* C's deadline on the hand-driven clock */

static int on_item_between(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    stream *s = ud;
    s->items++;
    if (s != between_c && s->items == 3 && nseen < (int)sizeof(seen)) {
        seen[nseen++] = (char)s->done_real; /* its letter, set by the test */
        /* this read took time: C's clock comes due during it */
        if (sg_manual_clock_now(&mc) < between_due) {
            sg_manual_clock_advance(&mc, between_due - sg_manual_clock_now(&mc));
        }
    }
    return 0;
}

static void on_done_between(sg_curl_op *op, void *ud) {
    on_done(op, ud);
    if (ud == between_c && nseen < (int)sizeof(seen)) {
        seen[nseen++] = 'C';
    }
}

/* Whether the server logged request @id finished (its last byte handed
 * to the connection); waits up to 5 s of real time. */
static bool server_finished(long long id) {
    char path[96];
    snprintf(path, sizeof(path), "/_log?event=finished&id=%lld", id);
    int64_t until = sg_clock_now(NULL) + SG_SEC(5);
    for (;;) {
        char *log = fm_fetch(fm_group(), path, 0);
        bool seen_it = log != NULL && strstr(log, "\"finished\"") != NULL;
        free(log);
        if (seen_it || sg_clock_now(NULL) >= until) {
            return seen_it;
        }
        (void)poll(NULL, 0, 10); /* the server's log again in 10 ms */
    }
}

/* C stalls after two items under a 200 ms idle clock; A and B each send a
 * third item and end after a 300 ms (real) stall.  Once the server has
 * written both, one step finds both sockets readable; reading the first
 * of them moves the hand-driven clock to C's deadline (a read that took
 * time: over HTTP/2 a read runs every transfer of its connection).  C is
 * decided then, before the second socket's read - not after every ready
 * socket of the step. */
static void a_clock_due_during_a_read_is_decided_before_the_next(void **state) {
    (void)state;
    sg_manual_clock_init(&mc, sg_clock_now(NULL));
    closes = 0;
    nseen = 0;
    sg_clock clock = sg_manual_clock_as(&mc);
    sg_curl_multi *m;
    assert_int_equal(sg_curl_multi_new(&m, &clock), 0);
    sg_curl_options *co = options(&clock);
    assert_int_equal(sg_curl_options_set_on_item(co, on_item_between), 0);
    assert_int_equal(sg_curl_options_set_on_done(co, on_done_between), 0);
    static const char *const query[3] = {
        "n=3&gap=5&stall_after=2&stall=300&_t=between_a.",
        "n=3&gap=5&stall_after=2&stall=300&_t=between_b.",
        "n=10&gap=5&stall_after=2&stall=forever&_t=between_c.",
    };
    stream s[3] = {{0}};
    s[0].done_real = 'A'; /* the letter on_item_between records */
    s[1].done_real = 'B';
    between_c = &s[2];
    CURL *easy[3];
    sg_curl_op *ops[3];
    for (int i = 0; i < 3; i++) {
        sg_op_options *po = NULL;
        assert_int_equal(sg_op_options_new(&po), 0);
        assert_int_equal(sg_op_options_set_method(po, "GET"), 0);
        assert_int_equal(sg_op_options_set_max_attempts(po, 1), 0);
        assert_int_equal(sg_op_options_set_first_item_timeout(po, SG_SEC(10)), 0);
        assert_int_equal(
            sg_op_options_set_idle_timeout(po, i == 2 ? SG_MS(200) : SG_SEC(10)), 0);
        char url[512];
        snprintf(url, sizeof(url), "%s/v1/chat/completions?%s", fm_group()->base,
                 query[i]);
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        /* libcurl's happy-eyeballs timer (200 ms) would otherwise run
         * every transfer inside whichever socket is read first */
        curl_easy_setopt(easy[i], CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, 10000L);
        assert_int_equal(sg_curl_op_new(&ops[i], easy[i], po, co, &s[i]), 0);
        sg_op_options_free(po);
        assert_int_equal(sg_curl_multi_add(m, ops[i]), 0);
    }
    sg_curl_options_free(co);
    int64_t until = sg_clock_now(NULL) + SG_SEC(10);
    while ((s[0].items < 2 || s[1].items < 2 || s[2].items < 2) &&
           sg_clock_now(NULL) < until) {
        sg_curl_multi_step(m, SG_MS(20));
    }
    assert_true(s[0].items == 2 && s[1].items == 2 && s[2].items == 2);
    between_due = sg_manual_clock_now(&mc) + SG_MS(200);
    sg_manual_clock_advance(&mc, SG_MS(199)); /* C not due yet */
    /* libcurl's own timer, set by this clock, runs out here while the
     * third items are not sent yet: at the step below it is far off */
    assert_int_equal(sg_curl_multi_step(m, 0), 3);
    assert_int_equal(nseen, 0);
    /* both third items and ends written by the server: both sockets
     * readable at the next step */
    long long a = request_id("_t=between_a."), b = request_id("_t=between_b.");
    assert_true(a >= 0 && b >= 0);
    assert_true(server_finished(a));
    assert_true(server_finished(b));
    assert_int_equal(nseen, 0);
    assert_int_equal(sg_curl_multi_step(m, 0), 0); /* all three end in it */
    assert_int_equal(nseen, 3);
    assert_true(seen[0] == 'A' || seen[0] == 'B');
    assert_int_equal(seen[1], 'C'); /* before the other read */
    assert_int_equal(seen[2], seen[0] == 'A' ? 'B' : 'A');
    assert_int_equal(s[2].outcome, SG_OUTCOME_IDLE_TIMEOUT);
    assert_int_equal(s[2].done_at, between_due);
    assert_int_equal(s[0].outcome, SG_OUTCOME_OK);
    assert_int_equal(s[1].outcome, SG_OUTCOME_OK);
    for (int i = 0; i < 3; i++) {
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
}

int main(int argc, char **argv) {
    if (fm_group_args(argc, argv) != 0) {
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(streams_expiring_together_are_all_told_before_any_close),
        cmocka_unit_test(removal_yields_to_a_clock_due_within_the_slack),
        cmocka_unit_test(a_step_decides_what_is_due_before_it_waits),
        cmocka_unit_test(a_clock_due_during_a_read_is_decided_before_the_next),
    };
    int rv = cmocka_run_group_tests(tests, fm_group_start, fm_group_stop);
    curl_global_cleanup();
    return rv;
}
