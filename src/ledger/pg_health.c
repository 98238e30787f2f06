/*
 * Endpoint health shared through PostgreSQL (health_pg.h; docs/health.md).
 *
 * The sg_health's listener runs on the attempt that taught a fact: it
 * turns the fact's instant into wall-clock time, puts it in a bounded ring
 * and wakes the share's thread (an eventfd) - a mutex held for a copy, no
 * I/O; a full ring drops the fact and counts it.  The thread, with a
 * connection of its own (pg_conn.c: libpq's non-blocking API bounded by
 * our deadline and the server's statement_timeout), writes each fact to
 * the table and notifies it in one statement, LISTENs on the channel, and
 * gives what other processes notify to sg_health_apply (their instants
 * back on the operations' clock).  A process that connects (or reconnects)
 * reads what still holds from the table after its LISTEN, so nothing
 * notified in between is missed.  A lost database is said once to the
 * log; the thread tries again after 100 ms, twice as long each time up to
 * reconnect_max, and facts learned meanwhile wait in the ring (those over
 * by then are not sent).
 */
#define _GNU_SOURCE
#include "ledger/pg.h"
#include "core/internal.h" /* sg__stats_copy */

#include <streamguard/health_pg.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#define BACKOFF_MIN SG_MS(100)
#define SWEEP_EVERY SG_SEC(60)
/* Rows over for this long are deleted (by any share). */
#define SWEEP_AFTER_US 60000000
#define PAYLOAD_MAX 512
#define PAYLOAD_VERSION '1'

static const char health_schema_sql[] = {
#include "pg_health_schema_v1.inc"
};

struct sg_health_pg_options {
    sg_health_pg_log log;
    void *log_user_data;
    uint32_t queue_max;
    int64_t timeout_ns;
    int64_t reconnect_max_ns;
    const sg_clock *clock; /* borrowed */
    const sg_clock *wall;  /* borrowed */
};

/* A fact on its way to the database, its instant on the wall clock. */
typedef struct qfact {
    uint8_t key[SG_HEALTH_KEY_SIZE];
    sg_health_state state;
    int64_t free_at_us; /* unix µs; 0 for a close */
    char endpoint[SG_HEALTH_ENDPOINT_MAX + 1];
} qfact;

struct sg_health_pg {
    sg_health *h; /* borrowed */
    sg_health_pg_options o;
    uint64_t origin; /* this share, among those notifying */
    char origin_dec[24];
    int wake_fd; /* readable: facts queued */
    int stop_fd; /* readable: free; ends every wait for the database */
    pthread_t thread;
    pg_ledger *c;       /* the thread's connection */
    pthread_mutex_t mu; /* the ring and the stats */
    qfact *ring;        /* o.queue_max */
    uint32_t head;
    sg_health_pg_stats st;
    /* the thread's alone */
    bool down_said;      /* the log was told it is lost */
    int64_t down_since;  /* monotonic */
    uint64_t drops_said; /* dropped, as the log was last told */
    int64_t backoff;     /* the last wait before a retry; 0: none */
    int64_t retry_at;    /* monotonic */
    int64_t sweep_at;    /* monotonic */
};

/* ------------------------------------------------------------- options */

static void defaults(sg_health_pg_options *o) {
    memset(o, 0, sizeof(*o));
    o->queue_max = SG_HEALTH_PG_DEFAULT_QUEUE_MAX;
    o->timeout_ns = SG_HEALTH_PG_DEFAULT_TIMEOUT;
    o->reconnect_max_ns = SG_HEALTH_PG_DEFAULT_RECONNECT_MAX;
}

int sg_health_pg_options_new(sg_health_pg_options **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = malloc(sizeof(**out));
    if (*out == NULL) {
        return SG_ENOMEM;
    }
    defaults(*out);
    return 0;
}

void sg_health_pg_options_free(sg_health_pg_options *o) {
    free(o);
}

int sg_health_pg_options_set_log(sg_health_pg_options *o, sg_health_pg_log fn,
                                 void *user_data) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    o->log = fn;
    o->log_user_data = user_data;
    return 0;
}

int sg_health_pg_options_set_queue_max(sg_health_pg_options *o, uint32_t n) {
    if (o == NULL || n == 0) {
        return SG_EINVAL;
    }
    if (n > SG_HEALTH_PG_QUEUE_MAX_LIMIT) {
        return SG_ERANGE;
    }
    o->queue_max = n;
    return 0;
}

/* A duration option, at least @min, into *@field of @o. */
static int set_duration(sg_health_pg_options *o, int64_t *field, int64_t ns,
                        int64_t min) {
    if (o == NULL || ns < min || ns <= 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    *field = ns;
    return 0;
}

int sg_health_pg_options_set_timeout(sg_health_pg_options *o, int64_t ns) {
    return set_duration(o, o != NULL ? &o->timeout_ns : NULL, ns, 1);
}

int sg_health_pg_options_set_reconnect_max(sg_health_pg_options *o, int64_t ns) {
    return set_duration(o, o != NULL ? &o->reconnect_max_ns : NULL, ns, BACKOFF_MIN);
}

int sg_health_pg_options_set_clock(sg_health_pg_options *o, const sg_clock *clock) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    o->clock = clock;
    return 0;
}

int sg_health_pg_options_set_wall_clock(sg_health_pg_options *o, const sg_clock *clock) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    o->wall = clock;
    return 0;
}

/* --------------------------------------------------------------- clocks */

static int64_t wall_ns(const sg_health_pg *s) {
    return sg__wall_clock_now(s->o.wall);
}

static int64_t real_now(void) {
    return sg_clock_monotonic_now(NULL);
}

/* ------------------------------------------------------------ the ring */

static const char *kind_name(sg_health_state st) {
    return st == SG_HEALTH_OPEN ? "open" : "cooling";
}

/* The listener: on the attempt's thread, lock-free but for the ring's
 * mutex held for one copy. */
static void on_fact(const sg_health_fact *f, void *user_data) {
    sg_health_pg *s = user_data;
    qfact q;
    memcpy(q.key, f->key, sizeof(q.key));
    q.state = f->state;
    q.free_at_us = 0;
    if (f->state != SG_HEALTH_CLOSED) {
        /* the instant as far from the wall clock's now as it is from the
         * operations' (the instant the fact was learned) */
        q.free_at_us = sg_time_add(wall_ns(s), sg_time_since(f->until, f->at)) / 1000;
    }
    const size_t n = strnlen(f->endpoint, SG_HEALTH_ENDPOINT_MAX);
    memcpy(q.endpoint, f->endpoint, n);
    q.endpoint[n] = '\0';
    pthread_mutex_lock(&s->mu);
    s->st.learned++;
    if (s->st.queued == s->o.queue_max) {
        s->st.dropped++; /* the database is slow or gone: never wait for it */
    } else {
        s->ring[(s->head + s->st.queued) % s->o.queue_max] = q;
        s->st.queued++;
    }
    pthread_mutex_unlock(&s->mu);
    const uint64_t one = 1;
    (void)!write(s->wake_fd, &one, sizeof(one));
}

/* The oldest fact queued into *@out: false when none. */
static bool peek(sg_health_pg *s, qfact *out) {
    pthread_mutex_lock(&s->mu);
    const bool any = s->st.queued > 0;
    if (any) {
        *out = s->ring[s->head];
    }
    pthread_mutex_unlock(&s->mu);
    return any;
}

/* The oldest fact goes, counted in *@count. */
static void pop(sg_health_pg *s, uint64_t *count) {
    pthread_mutex_lock(&s->mu);
    s->head = (s->head + 1) % s->o.queue_max;
    s->st.queued--;
    (*count)++;
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------- the log */

__attribute__((format(printf, 2, 3))) static void say(const sg_health_pg *s,
                                                      const char *fmt, ...) {
    if (s->o.log == NULL) {
        return;
    }
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    s->o.log(line, s->o.log_user_data);
}

/* Lost (or never reached): said once, tried again after a backoff. */
static void down(sg_health_pg *s, int rc) {
    if (s->c->conn != NULL) {
        sg__pg_drop(s->c);
    }
    const int64_t now = real_now();
    if (!s->down_said) {
        char late[64];
        snprintf(late, sizeof(late), "no answer within %.1f s",
                 (double)s->o.timeout_ns / 1e9);
        const char *why = rc == SG_ETIMEDOUT            ? late
                          : s->c->last_error[0] != '\0' ? s->c->last_error
                                                        : sg_strerror(rc);
        say(s,
            "health share: database %s (%s); endpoint health is this process's own "
            "until it is back, reconnecting",
            s->st.connects > 0 ? "lost" : "unreachable", why);
        s->down_said = true;
        s->down_since = now;
        pthread_mutex_lock(&s->mu);
        s->st.losses++;
        s->st.connected = false;
        pthread_mutex_unlock(&s->mu);
    }
    s->backoff = s->backoff == 0 ? BACKOFF_MIN : s->backoff * 2;
    if (s->backoff > s->o.reconnect_max_ns) {
        s->backoff = s->o.reconnect_max_ns;
    }
    s->retry_at = sg_time_add(now, s->backoff);
}

static void up(sg_health_pg *s) {
    const int64_t now = real_now();
    if (s->down_said) {
        say(s, "health share: database reachable again after %.1f s; sharing resumes",
            (double)(now - s->down_since) / 1e9);
    }
    s->down_said = false;
    s->backoff = 0;
    s->sweep_at = now;
    pthread_mutex_lock(&s->mu);
    s->st.connects++;
    s->st.connected = true;
    pthread_mutex_unlock(&s->mu);
}

/* Facts dropped since the log was last told: said once per run of them. */
static void tell_drops(sg_health_pg *s) {
    pthread_mutex_lock(&s->mu);
    const uint64_t dropped = s->st.dropped;
    const uint32_t max = s->o.queue_max;
    pthread_mutex_unlock(&s->mu);
    if (dropped != s->drops_said) {
        say(s,
            "health share: %" PRIu64 " facts dropped so far (queue of %" PRIu32 " full)",
            dropped, max);
        s->drops_said = dropped;
    }
}

/* ------------------------------------------------------- facts received */

static int unhex(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* @n bytes from 2 @n lowercase hex digits at @p: false when they are not. */
static bool from_hex(const char *p, uint8_t *out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const int hi = unhex(p[2 * i]), lo = unhex(p[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static void to_hex(const uint8_t *p, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[p[i] >> 4];
        out[2 * i + 1] = digits[p[i] & 15];
    }
    out[2 * n] = '\0';
}

/* A fact from another process, its instant @free_at_us on the wall clock,
 * given to the sg_health on the operations' clock. */
static void apply_remote(sg_health_pg *s, const char *endpoint, const uint8_t *key,
                         sg_health_state state, int64_t free_at_us) {
    const int64_t now = sg_clock_now(s->o.clock);
    int64_t until = -1;
    bool over = false;
    if (state != SG_HEALTH_CLOSED) {
        const int64_t left = sg_time_since(free_at_us * 1000, wall_ns(s));
        over = left <= 0;
        until = sg_time_add(now, left);
    }
    const int rc =
        over ? SG_ETIMEDOUT : sg_health_apply(s->h, endpoint, key, state, until, now);
    pthread_mutex_lock(&s->mu);
    s->st.received++;
    if (rc == 0) {
        s->st.applied++;
    } else {
        s->st.ignored++;
    }
    pthread_mutex_unlock(&s->mu);
}

static void ignore_one(sg_health_pg *s) {
    pthread_mutex_lock(&s->mu);
    s->st.received++;
    s->st.ignored++;
    pthread_mutex_unlock(&s->mu);
}

/* The instant of a fact: unix µs, 0 .. what ns can hold. */
static bool parse_us(const char *p, char **end, int64_t *out) {
    if (*p < '0' || *p > '9') {
        return false;
    }
    errno = 0;
    const long long v = strtoll(p, end, 10);
    *out = v;
    return errno == 0 && v >= 0 && v <= INT64_MAX / 1000;
}

/* A notification: "1 ORIGIN16 KEY32 c|o|x FREE_AT_US ENDPOINT" (hex, the
 * instant in unix µs, 0 for a close). */
static void receive(sg_health_pg *s, const char *p) {
    uint8_t origin[8], key[SG_HEALTH_KEY_SIZE];
    if (strlen(p) < 55 || p[0] != PAYLOAD_VERSION || p[1] != ' ' || p[18] != ' ' ||
        p[51] != ' ' || p[53] != ' ' || !from_hex(p + 2, origin, sizeof(origin)) ||
        !from_hex(p + 19, key, sizeof(key))) {
        ignore_one(s);
        return;
    }
    uint64_t o = 0;
    for (size_t i = 0; i < sizeof(origin); i++) {
        o = o << 8 | origin[i];
    }
    if (o == s->origin) {
        return; /* our own, notified back to us too */
    }
    const sg_health_state st = p[52] == 'c'   ? SG_HEALTH_COOLING
                               : p[52] == 'o' ? SG_HEALTH_OPEN
                               : p[52] == 'x' ? SG_HEALTH_CLOSED
                                              : SG_HEALTH_STATE_COUNT_;
    char *end = NULL;
    int64_t us = 0;
    if (st == SG_HEALTH_STATE_COUNT_ || !parse_us(p + 54, &end, &us) || *end != ' ') {
        ignore_one(s);
        return;
    }
    apply_remote(s, end + 1, key, st, us);
}

/* ------------------------------------------------------- the statements */

static int64_t bound(const sg_health_pg *s) {
    return sg__pg_bound(s->c, SG_TIME_NEVER);
}

/* One statement, its result dropped. */
static int run(sg_health_pg *s, const char *sql, int n, const char *const *vals) {
    PGresult *res;
    const int rv = sg__pg_run(s->c, sql, n, vals, bound(s), &res);
    PQclear(res);
    return rv;
}

#define NOTIFY(param) "SELECT pg_notify('" SG_HEALTH_PG_CHANNEL "', " param ")"

/* A cooling never ends sooner than one written before; an open breaker
 * is as the latest fact says (it re-opened, or opened anew). */
static const char upsert_sql[] =
    "WITH up AS (INSERT INTO " SG_HEALTH_PG_TABLE " AS t "
    "(key, kind, endpoint, free_at_us, origin) "
    "VALUES ($1, $2, $3, $4::bigint, $5::bigint) "
    "ON CONFLICT (key, kind) DO UPDATE SET free_at_us = CASE WHEN t.kind = 'open' "
    "THEN EXCLUDED.free_at_us ELSE GREATEST(t.free_at_us, EXCLUDED.free_at_us) END, "
    "endpoint = EXCLUDED.endpoint, origin = EXCLUDED.origin, updated = now() "
    "RETURNING 1) " NOTIFY("$6");

/* A breaker closed: it served an attempt, whoever opened it. */
static const char close_sql[] =
    "WITH gone AS (DELETE FROM " SG_HEALTH_PG_TABLE
    " WHERE key = $1 AND kind = 'open' RETURNING 1) " NOTIFY("$2");

/* @f written and notified, in one statement (one round trip). */
static int publish(sg_health_pg *s, const qfact *f) {
    char key[2 * SG_HEALTH_KEY_SIZE + 1], at[24], payload[PAYLOAD_MAX];
    to_hex(f->key, sizeof(f->key), key);
    snprintf(at, sizeof(at), "%" PRId64, f->free_at_us);
    const char kind = f->state == SG_HEALTH_CLOSED ? 'x'
                      : f->state == SG_HEALTH_OPEN ? 'o'
                                                   : 'c';
    snprintf(payload, sizeof(payload), "%c %016" PRIx64 " %s %c %s %s", PAYLOAD_VERSION,
             s->origin, key, kind, at, f->endpoint);
    if (f->state == SG_HEALTH_CLOSED) {
        const char *vals[2] = {key, payload};
        return run(s, close_sql, 2, vals);
    }
    const char *vals[6] = {key, kind_name(f->state), f->endpoint,
                           at,  s->origin_dec,       payload};
    return run(s, upsert_sql, 6, vals);
}

/* Every fact queued, oldest first: 0, or the error that lost the
 * connection (the fact then stays queued). */
static int publish_all(sg_health_pg *s) {
    qfact f;
    while (peek(s, &f)) {
        if (f.state != SG_HEALTH_CLOSED && f.free_at_us <= wall_ns(s) / 1000) {
            pop(s, &s->st.expired); /* over while it waited: says nothing */
            continue;
        }
        const int rc = publish(s, &f);
        if (rc != 0 && (s->c->conn == NULL || PQstatus(s->c->conn) != CONNECTION_OK)) {
            return rc;
        }
        /* refused alone (an endpoint not in the database's encoding): it
         * goes, counted as dropped; the connection serves on */
        pop(s, rc == 0 ? &s->st.published : &s->st.dropped);
    }
    return 0;
}

/* What still holds, read after the LISTEN: a process starting (or coming
 * back) learns what others learned while it was not listening. */
static int catch_up(sg_health_pg *s) {
    char now_us[24];
    snprintf(now_us, sizeof(now_us), "%" PRId64, wall_ns(s) / 1000);
    const char *vals[1] = {now_us};
    PGresult *res;
    int rv = sg__pg_run(
        s->c,
        "SELECT key, kind, endpoint, free_at_us, origin::text FROM " SG_HEALTH_PG_TABLE
        " WHERE free_at_us > $1::bigint",
        1, vals, bound(s), &res);
    for (int i = 0; rv == 0 && i < PQntuples(res); i++) {
        uint8_t key[SG_HEALTH_KEY_SIZE];
        int64_t us = 0;
        char *end = NULL;
        const char *k = PQgetvalue(res, i, 0);
        if (strcmp(PQgetvalue(res, i, 4), s->origin_dec) == 0) {
            continue;
        }
        if (strlen(k) != 2 * SG_HEALTH_KEY_SIZE || !from_hex(k, key, sizeof(key)) ||
            !parse_us(PQgetvalue(res, i, 3), &end, &us)) {
            ignore_one(s);
            continue;
        }
        const bool open = strcmp(PQgetvalue(res, i, 1), "open") == 0;
        apply_remote(s, PQgetvalue(res, i, 2), key,
                     open ? SG_HEALTH_OPEN : SG_HEALTH_COOLING, us);
    }
    PQclear(res);
    return rv;
}

/* Rows over for a minute go (any share may: they say nothing). */
static int sweep(sg_health_pg *s) {
    char before[24];
    snprintf(before, sizeof(before), "%" PRId64, wall_ns(s) / 1000 - SWEEP_AFTER_US);
    const char *vals[1] = {before};
    s->sweep_at = sg_time_add(real_now(), SWEEP_EVERY);
    return run(s, "DELETE FROM " SG_HEALTH_PG_TABLE " WHERE free_at_us < $1::bigint", 1,
               vals);
}

/* Connects, makes the table when it is missing, listens, catches up. */
static int reach(sg_health_pg *s) {
    int rv = sg__pg_connect(s->c, bound(s), false);
    /* a fact lost in a crash costs one more 429: no wait for the disk */
    if (rv == 0) {
        rv = run(s, "SELECT set_config('synchronous_commit', 'off', false)", 0, NULL);
    }
    PGresult *res = NULL;
    if (rv == 0) {
        rv = sg__pg_run(s->c, "SELECT to_regclass('" SG_HEALTH_PG_TABLE "') IS NULL", 0,
                        NULL, bound(s), &res);
    }
    if (rv == 0 && strcmp(PQgetvalue(res, 0, 0), "t") == 0) {
        rv = sg__pg_run_script(s->c, health_schema_sql, bound(s));
    }
    PQclear(res);
    if (rv == 0) {
        rv = run(s, "LISTEN " SG_HEALTH_PG_CHANNEL, 0, NULL);
    }
    if (rv == 0) {
        rv = catch_up(s);
    }
    return rv;
}

/* What the server notified, given to the sg_health. */
static int drain(sg_health_pg *s) {
    PGconn *conn = s->c->conn;
    if (PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK) {
        return SG_ECONNRESET;
    }
    PGnotify *n;
    while ((n = PQnotifies(conn)) != NULL) {
        receive(s, n->extra);
        PQfreemem(n);
    }
    return 0;
}

/* ------------------------------------------------------------ the thread */

/* Waits for a fact, a notification, the next retry or sweep, or the stop:
 * true when stopping. */
static bool wait_work(sg_health_pg *s) {
    const bool on = s->c->conn != NULL;
    const int64_t left = sg_time_since(on ? s->sweep_at : s->retry_at, real_now());
    const int64_t ms = left <= 0 ? 0 : (left + SG_MS(1) - 1) / SG_MS(1);
    struct pollfd p[3] = {{.fd = s->stop_fd, .events = POLLIN},
                          {.fd = s->wake_fd, .events = POLLIN},
                          {.fd = on ? PQsocket(s->c->conn) : -1, .events = POLLIN}};
    if (poll(p, 3, ms > INT32_MAX ? INT32_MAX : (int)ms) < 0) {
        return false; /* EINTR: look again */
    }
    if (p[0].revents != 0) {
        return true;
    }
    if (p[1].revents != 0) {
        uint64_t n;
        (void)!read(s->wake_fd, &n, sizeof(n));
    }
    return false;
}

static void *share_main(void *arg) {
    sg_health_pg *s = arg;
    for (;;) {
        int rv = 0;
        if (s->c->conn == NULL && real_now() >= s->retry_at) {
            rv = reach(s);
            if (rv == 0) {
                up(s);
            }
        }
        if (rv == 0 && s->c->conn != NULL) {
            rv = publish_all(s);
            if (rv == 0 && real_now() >= s->sweep_at) {
                rv = sweep(s);
            }
            if (rv == 0) {
                rv = drain(s);
            }
        }
        if (rv == SG_ECANCELED) {
            break; /* freed while it waited for the database */
        }
        if (rv != 0) {
            down(s, rv);
        }
        tell_drops(s);
        if (wait_work(s)) {
            break;
        }
    }
    return NULL;
}

/* ------------------------------------------------------------ the share */

/* A libpq connection URI: postgresql:// or postgres://, parsed by libpq. */
static bool good_uri(const char *uri) {
    if (strncmp(uri, "postgresql://", 13) != 0 && strncmp(uri, "postgres://", 11) != 0) {
        return false;
    }
    char *err = NULL;
    PQconninfoOption *o = PQconninfoParse(uri, &err);
    PQfreemem(err);
    PQconninfoFree(o);
    return o != NULL;
}

static void share_free(sg_health_pg *s) {
    sg__pg_free(s->c);
    if (s->wake_fd >= 0) {
        close(s->wake_fd);
    }
    if (s->stop_fd >= 0) {
        close(s->stop_fd);
    }
    pthread_mutex_destroy(&s->mu);
    free(s->ring);
    free(s);
}

/* What the share needs but its thread: 0, SG_ENOMEM or SG_ESYS. */
static int share_init(sg_health_pg *s, const char *uri) {
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    while (s->origin == 0) {
        if (getrandom(&s->origin, sizeof(s->origin), 0) != sizeof(s->origin)) {
            return SG_ESYS;
        }
    }
    snprintf(s->origin_dec, sizeof(s->origin_dec), "%" PRId64, (int64_t)s->origin);
    if (s->wake_fd < 0 || s->stop_fd < 0) {
        return SG_ESYS;
    }
    s->ring = calloc(s->o.queue_max, sizeof(*s->ring));
    sg_ledger_options lo;
    memset(&lo, 0, sizeof(lo));
    lo.timeout_ns = s->o.timeout_ns;
    lo.lock_timeout_ns = s->o.timeout_ns;
    lo.close_timeout_ns = s->o.timeout_ns;
    lo.intent_connections = 1;
    s->c = sg__pg_new(uri, &lo);
    if (s->ring == NULL || s->c == NULL) {
        return SG_ENOMEM;
    }
    s->c->stop_fd = s->stop_fd;
    return 0;
}

int sg_health_pg_new(sg_health_pg **out, sg_health *h, const char *uri,
                     const sg_health_pg_options *opts) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    if (h == NULL || uri == NULL || !good_uri(uri)) {
        return SG_EINVAL;
    }
    sg_health_pg *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return SG_ENOMEM;
    }
    s->wake_fd = s->stop_fd = -1;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        free(s);
        return SG_ENOMEM;
    }
    s->h = h;
    if (opts != NULL) {
        s->o = *opts;
    } else {
        defaults(&s->o);
    }
    s->st.size = sizeof(s->st);
    int rv = share_init(s, uri);
    if (rv == 0) {
        rv = sg_health_set_listener(h, on_fact, s);
    }
    if (rv == 0 && sg__ledger_spawn(&s->thread, share_main, s) != 0) {
        sg_health_set_listener(h, NULL, NULL);
        rv = SG_ESYS;
    }
    if (rv != 0) {
        share_free(s);
        return rv;
    }
    *out = s;
    return 0;
}

void sg_health_pg_free(sg_health_pg *s) {
    if (s == NULL) {
        return;
    }
    /* no fact comes in once this returns; then the thread's waits end */
    sg_health_set_listener(s->h, NULL, NULL);
    sg__pg_interrupt(s->c);
    pthread_join(s->thread, NULL);
    share_free(s);
}

int sg_health_pg_get_stats(sg_health_pg *s, sg_health_pg_stats *out) {
    if (s == NULL || out == NULL || out->size < sizeof(out->size)) {
        return SG_EINVAL;
    }
    pthread_mutex_lock(&s->mu);
    sg_health_pg_stats all = s->st;
    pthread_mutex_unlock(&s->mu);
    all.size = sizeof(all);
    return sg__stats_copy(out, &all, sizeof(all));
}
