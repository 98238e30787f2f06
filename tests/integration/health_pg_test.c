/*
 * Endpoint health shared by processes through a real PostgreSQL server
 * (health_pg.h; docs/health.md).  tests/integration/health_pg.sh starts a
 * scratch server and passes its URI, and a command that stops, starts,
 * freezes and thaws it.  Two processes (this one and a child forked per
 * case), each with its own sg_health keyed alike and its own share:
 *
 *   - what one learns (a 429's Retry-After, a breaker opened, closed) the
 *     other honours - measured: learned in A -> an operation held back in
 *     B, median and max over rounds;
 *   - a process that starts later learns what still holds from the table;
 *   - the database stopped mid-run: both go on with their own state (an
 *     operation never waits), each says it once to its log, reconnects
 *     after the restart, and what was learned meanwhile is shared then;
 *   - the database frozen: the queue fills, drops and counts, an attempt's
 *     end never waits, freeing the share is bounded;
 *   - wall clocks apart: an instant moves by the skew, held to the cap.
 *
 * Operations are driven through the policy by hand (no upstream is
 * asked); their clock is CLOCK_MONOTONIC, one for every process of the
 * machine, so an instant in A is compared with one in B directly.
 * Usage: health_pg_test URI CTL   (CTL stop|start|freeze|thaw: a command)
 */
#define _GNU_SOURCE
#include <streamguard/health_pg.h>
#include <streamguard/unstable/op.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pg_test.h"

static const char *ctl;
static const char *role = "A";

#define CRED "Bearer sk-test-health-share"
#define SHARED_KEY "the fleet's credential key, 32+ bytes"
#define ROUNDS 40
#define OPEN_ROUNDS 10
#define POLL_NS SG_US(100)

static int64_t mono(void) {
    return sg_clock_monotonic_now(NULL);
}

static void pause_ns(int64_t ns) {
    if (ns <= 0) {
        return;
    }
    const struct timespec ts = {(time_t)(ns / SG_SEC(1)), (long)(ns % SG_SEC(1))};
    nanosleep(&ts, NULL);
}

static void db(const char *what) {
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "%s %s", ctl, what);
    if (system(cmd) != 0) {
        fprintf(stderr, "FAIL: %s\n", cmd);
        exit(1);
    }
}

/* ------------------------------------------------------------- the log */

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];

static void on_log(const char *message, void *user_data) {
    (void)user_data;
    fprintf(stderr, "[%s] %s\n", role, message);
    pthread_mutex_lock(&log_mu);
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof(log_text) - n, "%s\n", message);
    pthread_mutex_unlock(&log_mu);
}

/* Lines of this process's log that hold @what. */
static int logged(const char *what) {
    int n = 0;
    pthread_mutex_lock(&log_mu);
    for (const char *p = log_text; (p = strstr(p, what)) != NULL; p++) {
        n++;
    }
    pthread_mutex_unlock(&log_mu);
    return n;
}

/* ---------------------------------------------------------- one process */

typedef struct proc {
    sg_health *h;
    sg_health_pg *share;
} proc;

/* A table keyed like every other process's, shared through the server.
 * @wall: its wall clock (NULL: the system's); @queue_max 0: the default. */
static proc share(int64_t cooldown, const sg_clock *wall, uint32_t queue_max,
                  int64_t shared_max) {
    proc p;
    CHECK_RV(sg_health_new(&p.h), 0);
    CHECK_RV(sg_health_set_credential_key(p.h, SHARED_KEY, strlen(SHARED_KEY)), 0);
    CHECK_RV(sg_health_set_breaker_cooldown(p.h, cooldown), 0);
    if (shared_max > 0) {
        CHECK_RV(sg_health_set_shared_max(p.h, shared_max), 0);
    }
    sg_health_pg_options *o;
    CHECK_RV(sg_health_pg_options_new(&o), 0);
    CHECK_RV(sg_health_pg_options_set_log(o, on_log, NULL), 0);
    CHECK_RV(sg_health_pg_options_set_timeout(o, SG_SEC(1)), 0);
    CHECK_RV(sg_health_pg_options_set_reconnect_max(o, SG_MS(400)), 0);
    CHECK_RV(sg_health_pg_options_set_wall_clock(o, wall), 0);
    if (queue_max > 0) {
        CHECK_RV(sg_health_pg_options_set_queue_max(o, queue_max), 0);
    }
    CHECK_RV(sg_health_pg_new(&p.share, p.h, uri, o), 0);
    sg_health_pg_options_free(o);
    return p;
}

static void stop_sharing(proc *p) {
    sg_health_pg_free(p->share);
    sg_health_free(p->h);
}

static sg_health_pg_stats stats(const proc *p) {
    sg_health_pg_stats st = SG_HEALTH_PG_STATS_INIT;
    CHECK_RV(sg_health_pg_get_stats(p->share, &st), 0);
    return st;
}

static bool connected(const proc *p) {
    return stats(p).connected;
}

/* Waits up to @max_ns for the share to be @on. */
static bool await_connected(const proc *p, bool on, int64_t max_ns) {
    const int64_t until = mono() + max_ns;
    while (connected(p) != on) {
        if (mono() > until) {
            return false;
        }
        pause_ns(SG_MS(1));
    }
    return true;
}

static sg_op_options *options(sg_health *h, const char *url, int64_t budget) {
    sg_op_options *o = NULL;
    CHECK_RV(sg_op_options_new(&o), 0);
    CHECK_RV(sg_op_options_set_target(o, url), 0);
    CHECK_RV(sg_op_options_set_budget(o, budget), 0);
    CHECK_RV(sg_op_options_set_health(o, h), 0);
    return o;
}

static sg_op *begin(const sg_op_options *o, const char *url, int64_t now) {
    sg_op *op = NULL;
    CHECK_RV(sg_op_new(&op), 0);
    CHECK_RV(sg_op_start(op, o, now), 0);
    CHECK_RV(sg_op_set_endpoint_identity(op, 0, url, CRED, strlen(CRED)), 0);
    return op;
}

/* An attempt to @url at @now that ends with HTTP @status (Retry-After @ra,
 * NULL: none) - what it teaches goes to @h.  Returns how long the end
 * took (the listener runs inside it). */
static int64_t teach(sg_health *h, const char *url, int status, const char *ra,
                     int64_t now) {
    sg_op_options *o = options(h, url, SG_SEC(60));
    sg_op *op = begin(o, url, now);
    sg_op_plan plan;
    int64_t took = -1;
    if (sg_op_next_attempt(op, now, &plan) == 0) {
        sg_op_result r;
        memset(&r, 0, sizeof(r));
        r.outcome = status < 400 ? SG_OUTCOME_OK : SG_OUTCOME_HTTP_ERROR;
        r.phase = SG_PHASE_WAIT_HEADERS;
        r.http_status = status;
        r.headers_received = true;
        r.sent = true;
        r.first_item_ns = -1;
        r.retry_after = ra;
        r.retry_after_len = ra != NULL ? strlen(ra) : 0;
        sg_op_verdict v;
        const int64_t t0 = mono();
        CHECK_RV(sg_op_attempt_done(op, now, &r, &v), 0);
        took = mono() - t0;
    }
    sg_op_free(op);
    sg_op_options_free(o);
    return took;
}

/* Whether an operation asking @url at @now is held back by @h (waits, or
 * is refused, with nothing sent); its reason in *@why. */
static bool held(sg_health *h, const char *url, int64_t now, sg_op_reason *why) {
    sg_op_options *o = options(h, url, SG_SEC(1));
    sg_op *op = begin(o, url, now);
    sg_op_plan plan;
    memset(&plan, 0, sizeof(plan));
    const int rc = sg_op_next_attempt(op, now, &plan);
    if (why != NULL) {
        *why = rc != 0 ? plan.reason : SG_OP_REASON_NONE;
    }
    sg_op_free(op);
    sg_op_options_free(o);
    return rc != 0;
}

typedef struct look_for {
    const char *name;
    sg_health_state state;
    int64_t free_at;
    bool found;
} look_for;

static int find_entry(const sg_health_entry *e, void *ud) {
    look_for *l = ud;
    if (strcmp(e->endpoint, l->name) == 0) {
        l->state = e->state;
        l->free_at = e->free_at;
        l->found = true;
    }
    return 0;
}

/* @name's entry in @h at @now (found false when it is not tracked). */
static look_for entry(sg_health *h, const char *name, int64_t now) {
    look_for l = {name, SG_HEALTH_CLOSED, -1, false};
    CHECK_RV(sg_health_foreach(h, now, find_entry, &l), 0);
    return l;
}

/* ------------------------------------------------------------ the pipe */

typedef struct link {
    int rd, wr;
} link_t;

static void put(link_t l, int64_t v) {
    if (write(l.wr, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
        fprintf(stderr, "FAIL [%s]: pipe write\n", role);
        exit(1);
    }
}

static int64_t get(link_t l) {
    int64_t v;
    if (read(l.rd, &v, sizeof(v)) != (ssize_t)sizeof(v)) {
        fprintf(stderr, "FAIL [%s]: pipe read\n", role);
        exit(1);
    }
    return v;
}

/* Runs @child(@arg) in process B, linked to this one (A) both ways; A gets
 * its end in *@a.  B exits with its failure count. */
static pid_t fork_b(void (*child)(link_t, void *), void *arg, link_t *a) {
    int ab[2], ba[2];
    if (pipe(ab) != 0 || pipe(ba) != 0) {
        exit(1);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        role = "B";
        failures = 0; /* its own, not A's so far */
        log_text[0] = '\0';
        close(ab[1]);
        close(ba[0]);
        child((link_t){ab[0], ba[1]}, arg);
        _exit(failures > 100 ? 100 : failures);
    }
    close(ab[0]);
    close(ba[1]);
    *a = (link_t){ba[0], ab[1]};
    return pid;
}

static void join_b(pid_t pid, link_t a) {
    int st = 0;
    waitpid(pid, &st, 0);
    close(a.rd);
    close(a.wr);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "FAIL: process B: %s %d\n", WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        failures++;
    }
}

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Says the median, 90th percentile and max of @n latencies; checks them
 * against the promise (100 ms; the max only against 1 s: a machine under
 * load may stall one process once). */
static void figures(const char *what, int64_t *lat, int n) {
    qsort(lat, (size_t)n, sizeof(*lat), cmp_i64);
    const int64_t med = lat[n / 2], p90 = lat[(n * 9) / 10], max = lat[n - 1];
    printf("health_pg: %s: n=%d median=%.2f ms p90=%.2f ms max=%.2f ms\n", what, n,
           (double)med / 1e6, (double)p90 / 1e6, (double)max / 1e6);
    CHECK(med <= SG_MS(100));
    CHECK(p90 <= SG_MS(100));
    CHECK(max <= SG_SEC(1));
}

/* ---------------------------------------------------------- propagation */

static void url_of(int i, char *url, size_t cap) {
    snprintf(url, cap, "http://api.test:8080/%s/%d", i < ROUNDS ? "round" : "open", i);
}

/* Until @h holds @url back (reason @want), or @max_ns: the instant it did,
 * or -1. */
static int64_t until_held(sg_health *h, const char *url, sg_op_reason want,
                          int64_t max_ns) {
    const int64_t give_up = mono() + max_ns;
    for (;;) {
        const int64_t now = mono();
        sg_op_reason why;
        if (held(h, url, now, &why)) {
            CHECK(why == want);
            return now;
        }
        if (now > give_up) {
            return -1;
        }
        pause_ns(POLL_NS);
    }
}

/* Until @name's entry in @h is closed again: the instant, or -1. */
static int64_t until_closed(sg_health *h, const char *name, int64_t max_ns) {
    const int64_t give_up = mono() + max_ns;
    for (;;) {
        const int64_t now = mono();
        const look_for e = entry(h, name, now);
        if (e.found && e.state == SG_HEALTH_CLOSED) {
            return now;
        }
        if (now > give_up) {
            return -1;
        }
        pause_ns(POLL_NS);
    }
}

/* B: for each round, looks until what A names is held back here, and
 * compares the instant with A's. */
static void propagation_b(link_t l, void *arg) {
    (void)arg;
    proc p = share(SG_SEC(5), NULL, 0, 0);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    put(l, 0);
    int64_t lat[ROUNDS + OPEN_ROUNDS], closes[OPEN_ROUNDS];
    for (int i = 0; i < ROUNDS + OPEN_ROUNDS; i++) {
        char url[128];
        url_of(i, url, sizeof(url));
        put(l, i); /* looking */
        const int64_t t1 = until_held(
            p.h, url, i < ROUNDS ? SG_OP_REASON_RATE_LIMITED : SG_OP_REASON_CIRCUIT_OPEN,
            SG_SEC(5));
        const int64_t t0 = get(l);
        CHECK(t1 >= 0);
        lat[i] = t1 >= 0 ? t1 - t0 : SG_SEC(5);
        if (i >= ROUNDS) {
            put(l, i); /* looking for the close */
            const int64_t c1 = until_closed(p.h, url, SG_SEC(5));
            const int64_t c0 = get(l);
            CHECK(c1 >= 0);
            closes[i - ROUNDS] = c1 >= 0 ? c1 - c0 : SG_SEC(5);
        }
    }
    figures("429 Retry-After learned in A -> held back in B", lat, ROUNDS);
    figures("breaker opened in A -> held back in B", lat + ROUNDS, OPEN_ROUNDS);
    figures("breaker closed in A -> closed in B", closes, OPEN_ROUNDS);
    const sg_health_pg_stats st = stats(&p);
    CHECK(st.applied >= ROUNDS + 2 * OPEN_ROUNDS);
    CHECK(st.learned == 0); /* what came from A is not told back */
    stop_sharing(&p);
}

static void what_one_learns_the_other_honours(void) {
    printf("-- what one learns the other honours\n");
    link_t l;
    const pid_t pid = fork_b(propagation_b, NULL, &l);
    proc p = share(SG_MS(300), NULL, 0, 0);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    (void)get(l);
    for (int i = 0; i < ROUNDS + OPEN_ROUNDS; i++) {
        char url[128];
        url_of(i, url, sizeof(url));
        (void)get(l); /* B is looking */
        const int64_t t0 = mono();
        for (int k = 0; k < (i < ROUNDS ? 1 : SG_HEALTH_DEFAULT_BREAKER_FAILURES); k++) {
            (void)teach(p.h, url, i < ROUNDS ? 429 : 503, i < ROUNDS ? "30" : NULL, t0);
        }
        put(l, t0);
        if (i >= ROUNDS) {
            (void)get(l);
            pause_ns(t0 + SG_MS(300) - mono()); /* the cooldown: then the probe */
            const int64_t c0 = mono();
            (void)teach(p.h, url, 200, NULL, c0);
            put(l, c0);
        }
    }
    join_b(pid, l);
    /* the last close may still be on its way (B saw it from the table's
     * notification; A's stats count it once the statement returned) */
    const int64_t give_up = mono() + SG_SEC(5);
    while (stats(&p).queued > 0 && mono() < give_up) {
        pause_ns(SG_MS(1));
    }
    const sg_health_pg_stats st = stats(&p);
    printf("health_pg: A learned %" PRIu64 ", published %" PRIu64 ", dropped %" PRIu64
           "\n",
           st.learned, st.published, st.dropped);
    CHECK(st.learned == ROUNDS + 2 * OPEN_ROUNDS);
    CHECK(st.published == st.learned);
    CHECK(st.dropped == 0);
    stop_sharing(&p);
}

/* ------------------------------------------------------- a late starter */

#define LATE_URL "http://api.test:8080/late/cooling"
#define LATE_OPEN_URL "http://api.test:8080/late/open"

static void late_b(link_t l, void *arg) {
    (void)arg;
    proc p = share(SG_SEC(5), NULL, 0, 0);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    /* connected means caught up: at once, no notification in between */
    sg_op_reason why;
    CHECK(held(p.h, LATE_URL, mono(), &why) && why == SG_OP_REASON_RATE_LIMITED);
    CHECK(held(p.h, LATE_OPEN_URL, mono(), &why) && why == SG_OP_REASON_CIRCUIT_OPEN);
    CHECK(stats(&p).received >= 2);
    put(l, 1);
    stop_sharing(&p);
}

static void a_process_that_starts_later_reads_what_holds(void) {
    printf("-- a process that starts later reads what holds\n");
    proc p = share(SG_SEC(30), NULL, 0, 0);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    const int64_t now = mono();
    (void)teach(p.h, LATE_URL, 429, "30", now);
    for (int k = 0; k < SG_HEALTH_DEFAULT_BREAKER_FAILURES; k++) {
        (void)teach(p.h, LATE_OPEN_URL, 503, NULL, now);
    }
    const int64_t give_up = mono() + SG_SEC(5);
    while (stats(&p).published < 2 && mono() < give_up) {
        pause_ns(SG_MS(1));
    }
    link_t l;
    const pid_t pid = fork_b(late_b, NULL, &l);
    CHECK(get(l) == 1);
    join_b(pid, l);
    /* the table holds names and keyed hashes, never a credential */
    PGconn *c = admin();
    PGresult *r = PQexec(c, "SELECT count(*) FILTER (WHERE endpoint LIKE '%sk-%' OR "
                            "length(key) <> 32), count(*) FROM " SG_HEALTH_PG_TABLE);
    CHECK(PQresultStatus(r) == PGRES_TUPLES_OK);
    if (PQresultStatus(r) == PGRES_TUPLES_OK) {
        CHECK(strcmp(PQgetvalue(r, 0, 0), "0") == 0);
        CHECK(atoi(PQgetvalue(r, 0, 1)) >= 2);
    }
    PQclear(r);
    PQfinish(c);
    stop_sharing(&p);
}

/* ------------------------------------------------------ the database lost */

#define LOST_URL "http://api.test:8080/lost/a"
#define LOST_B_URL "http://api.test:8080/lost/b"

/* While the database is gone @p learns @url alone: the attempt's end does
 * not wait for it, and the endpoint is held back here at once. */
static void learn_alone(proc *p, const char *url) {
    const int64_t took = teach(p->h, url, 429, "30", mono());
    printf("health_pg: [%s] an attempt's end with the database down took %.3f ms\n", role,
           (double)took / 1e6);
    CHECK(took >= 0 && took < SG_MS(50));
    CHECK(held(p->h, url, mono(), NULL));
}

/* What either says of it: once lost, once back, whatever the retries. */
static void said_once(void) {
    CHECK(logged("health share: database lost (") == 1);
    CHECK(logged("endpoint health is this process's own until it is back") == 1);
    CHECK(logged("health share: database reachable again after") == 1);
}

static void lost_b(link_t l, void *arg) {
    (void)arg;
    proc p = share(SG_SEC(5), NULL, 0, 0);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    put(l, 1);
    (void)get(l); /* A stopped it */
    CHECK(await_connected(&p, false, SG_SEC(10)));
    learn_alone(&p, LOST_B_URL);
    put(l, 2);
    (void)get(l); /* A started it again */
    CHECK(await_connected(&p, true, SG_SEC(10)));
    CHECK(until_held(p.h, LOST_URL, SG_OP_REASON_RATE_LIMITED, SG_SEC(5)) >= 0);
    said_once();
    put(l, 3);
    (void)get(l);
    stop_sharing(&p);
}

static void a_lost_database_leaves_each_its_own(void) {
    printf("-- a lost database leaves each process its own health\n");
    log_text[0] = '\0';
    link_t l;
    const pid_t pid = fork_b(lost_b, NULL, &l);
    proc p = share(SG_SEC(5), NULL, 0, 0);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    CHECK(get(l) == 1);
    db("stop");
    put(l, 1);
    CHECK(await_connected(&p, false, SG_SEC(10)));
    learn_alone(&p, LOST_URL);
    CHECK(get(l) == 2);
    /* a share made while it is down: made at once, said once, unreachable */
    const char *before = log_text + strlen(log_text);
    const int64_t t0 = mono();
    proc late = share(SG_SEC(5), NULL, 0, 0);
    CHECK(mono() - t0 < SG_MS(50));
    /* down long enough for several tries, each failing unsaid */
    pause_ns(SG_MS(1500));
    CHECK(strstr(before, "health share: database unreachable (") != NULL);
    CHECK(logged("health share: database unreachable (") == 1);
    CHECK(stats(&p).queued == 1);
    CHECK(stats(&late).losses == 1 && stats(&late).connects == 0);
    db("start");
    put(l, 2);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    /* what B learned while it was down reaches A now */
    CHECK(until_held(p.h, LOST_B_URL, SG_OP_REASON_RATE_LIMITED, SG_SEC(5)) >= 0);
    CHECK(get(l) == 3);
    put(l, 4);
    join_b(pid, l);
    CHECK(await_connected(&late, true, SG_SEC(10)));
    stop_sharing(&late);
    CHECK(logged("health share: database lost (") == 1);
    CHECK(logged("health share: database reachable again after") == 2);
    const sg_health_pg_stats st = stats(&p);
    CHECK(st.losses == 1);
    CHECK(st.connects == 2);
    CHECK(st.queued == 0);
    stop_sharing(&p);
}

/* ---------------------------------------------------- a frozen database */

static void a_frozen_database_never_holds_an_attempt(void) {
    printf("-- a frozen database never holds an attempt\n");
    log_text[0] = '\0';
    proc p = share(SG_SEC(5), NULL, 4, 0);
    CHECK(await_connected(&p, true, SG_SEC(10)));
    db("freeze");
    int64_t worst = 0;
    char url[128];
    for (int i = 0; i < 40; i++) {
        snprintf(url, sizeof(url), "http://api.test:8080/frozen/%d", i);
        const int64_t took = teach(p.h, url, 429, "30", mono());
        worst = took > worst ? took : worst;
    }
    printf("health_pg: 40 attempts' ends with the database frozen: the slowest %.3f ms\n",
           (double)worst / 1e6);
    CHECK(worst < SG_MS(50));
    sg_health_pg_stats st = stats(&p);
    CHECK(st.learned == 40);
    CHECK(st.queued <= 4);
    CHECK(st.dropped >= 36);
    /* the statement under way gives up at the timeout: lost, said */
    const int64_t give_up = mono() + SG_SEC(10);
    while ((logged("facts dropped") == 0 || logged("database lost") == 0) &&
           mono() < give_up) {
        pause_ns(SG_MS(5));
    }
    CHECK(logged("facts dropped so far (queue of 4 full)") >= 1);
    CHECK(logged("health share: database lost (") == 1);
    db("thaw");
    CHECK(await_connected(&p, true, SG_SEC(10)));
    const int64_t give_up2 = mono() + SG_SEC(5);
    while (stats(&p).queued > 0 && mono() < give_up2) {
        pause_ns(SG_MS(1));
    }
    st = stats(&p);
    CHECK(st.queued == 0);
    CHECK(st.published + st.dropped + st.expired == 40);
    /* freed while a statement waits on a frozen server: bounded */
    db("freeze");
    (void)teach(p.h, "http://api.test:8080/frozen/last", 429, "30", mono());
    pause_ns(SG_MS(50));
    const int64_t t0 = mono();
    stop_sharing(&p);
    const int64_t took = mono() - t0;
    printf("health_pg: freeing the share with the database frozen took %.3f ms\n",
           (double)took / 1e6);
    CHECK(took < SG_MS(500));
    db("thaw");
}

/* ------------------------------------------------------------ the clocks */

static int64_t skewed(void *user_data) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * SG_SEC(1) + ts.tv_nsec + *(const int64_t *)user_data;
}

/* B, its wall clock @arg ns ahead: how long from now what A learned holds
 * here, to A. */
static void skew_b(link_t l, void *arg) {
    sg_clock wall;
    CHECK_RV(sg_clock_init(&wall, skewed, arg), 0);
    proc p = share(SG_SEC(5), &wall, 0, SG_SEC(20));
    CHECK(await_connected(&p, true, SG_SEC(10)));
    put(l, 1);
    char url[128];
    snprintf(url, sizeof(url), "http://api.test:8080/skew/%" PRId64, get(l));
    CHECK(until_held(p.h, url, SG_OP_REASON_RATE_LIMITED, SG_SEC(5)) >= 0);
    /* the fact may land between until_held's clock read and its look, so
     * its cap counts from a later instant than that read: measure what is
     * left from an instant after the look, which is after the landing */
    const int64_t t1 = mono();
    const look_for e = entry(p.h, url, t1);
    CHECK(e.found && e.state == SG_HEALTH_COOLING);
    put(l, e.free_at - t1);
    stop_sharing(&p);
}

/* A wall clock ahead shortens what a fact holds by as much; one behind
 * lengthens it, held to shared_max. */
static void wall_clocks_apart_move_an_instant_by_the_skew(void) {
    printf("-- wall clocks apart move an instant by the skew\n");
    const int64_t offsets[2] = {SG_SEC(2), -SG_SEC(600)};
    for (int k = 0; k < 2; k++) {
        link_t l;
        int64_t offset = offsets[k];
        const pid_t pid = fork_b(skew_b, &offset, &l);
        proc p = share(SG_SEC(5), NULL, 0, 0);
        CHECK(await_connected(&p, true, SG_SEC(10)));
        (void)get(l);
        char url[128];
        snprintf(url, sizeof(url), "http://api.test:8080/skew/%d", k);
        const int64_t t0 = mono();
        (void)teach(p.h, url, 429, "10", t0);
        put(l, k);
        const int64_t left = get(l);
        printf(
            "health_pg: B's wall clock %+.0f s off: a 10 s cooling holds %.3f s there\n",
            (double)offset / 1e9, (double)left / 1e9);
        const int64_t want = k == 0 ? SG_SEC(8) : SG_SEC(20);
        CHECK(left <= want && left > want - SG_MS(500));
        join_b(pid, l);
        stop_sharing(&p);
    }
}

/* ------------------------------------------------------------ arguments */

static void arguments_are_checked(void) {
    printf("-- arguments are checked\n");
    sg_health *h;
    CHECK_RV(sg_health_new(&h), 0);
    sg_health_pg *s = (sg_health_pg *)&s;
    CHECK_RV(sg_health_pg_new(&s, h, "/var/lib/ledger", NULL), SG_EINVAL);
    CHECK(s == NULL);
    CHECK_RV(sg_health_pg_new(&s, h, "postgresql://host:notaport/db?x", NULL), SG_EINVAL);
    CHECK_RV(sg_health_pg_new(&s, h, "postgresql://h/db?nosuchoption=1", NULL),
             SG_EINVAL);
    CHECK_RV(sg_health_pg_new(&s, NULL, uri, NULL), SG_EINVAL);
    CHECK_RV(sg_health_pg_new(NULL, h, uri, NULL), SG_EINVAL);
    CHECK_RV(sg_health_pg_new(&s, h, NULL, NULL), SG_EINVAL);
    sg_health_pg_options *o;
    CHECK_RV(sg_health_pg_options_new(&o), 0);
    CHECK_RV(sg_health_pg_options_set_queue_max(o, 0), SG_EINVAL);
    CHECK_RV(sg_health_pg_options_set_queue_max(o, SG_HEALTH_PG_QUEUE_MAX_LIMIT + 1),
             SG_ERANGE);
    CHECK_RV(sg_health_pg_options_set_timeout(o, 0), SG_EINVAL);
    CHECK_RV(sg_health_pg_options_set_timeout(o, SG_DURATION_MAX + 1), SG_ERANGE);
    CHECK_RV(sg_health_pg_options_set_reconnect_max(o, SG_MS(99)), SG_EINVAL);
    CHECK_RV(sg_health_pg_options_set_log(NULL, on_log, NULL), SG_EINVAL);
    CHECK_RV(sg_health_pg_options_set_clock(NULL, NULL), SG_EINVAL);
    CHECK_RV(sg_health_pg_options_set_wall_clock(NULL, NULL), SG_EINVAL);
    CHECK_RV(sg_health_pg_options_new(NULL), SG_EINVAL);
    sg_health_pg_options_free(o);
    CHECK_RV(sg_health_pg_get_stats(NULL, NULL), SG_EINVAL);
    sg_health_pg_free(NULL);
    sg_health_free(h);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s URI CTL\n", argv[0]);
        return 2;
    }
    uri = argv[1];
    ctl = argv[2];
    setvbuf(stdout, NULL, _IOLBF, 0);
    arguments_are_checked();
    what_one_learns_the_other_honours();
    a_process_that_starts_later_reads_what_holds();
    wall_clocks_apart_move_an_instant_by_the_skew();
    a_lost_database_leaves_each_its_own();
    a_frozen_database_never_holds_an_attempt();
    if (failures != 0) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("health_pg_test: all passed\n");
    return 0;
}
