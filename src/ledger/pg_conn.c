/*
 * The PostgreSQL ledger's connection layer (pg.h): connecting and running
 * statements, every one bounded by poll(2) on our own deadline and by the
 * server's statement_timeout sent in the same round trip.
 */
#define _GNU_SOURCE
#include "ledger/pg.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT SG_SEC(10)
#define DEFAULT_INTENT_CONNECTIONS 4

static int64_t now_ns(void) {
    return sg_clock_monotonic_now(NULL);
}

pg_ledger *sg__pg_new(const char *location, const sg_ledger_options *opts) {
    pg_ledger *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return NULL;
    }
    p->location = strdup(location);
    if (p->location == NULL) {
        free(p);
        return NULL;
    }
    p->stop_fd = -1;
    p->opts = *opts;
    if (p->opts.timeout_ns == 0) {
        p->opts.timeout_ns = DEFAULT_TIMEOUT;
    }
    if (p->opts.close_timeout_ns == 0) {
        p->opts.close_timeout_ns = p->opts.timeout_ns;
    }
    if (p->opts.intent_connections == 0) {
        p->opts.intent_connections = DEFAULT_INTENT_CONNECTIONS;
    }
    if (gethostname(p->host, sizeof(p->host)) != 0) {
        p->host[0] = '\0';
    }
    p->host[sizeof(p->host) - 1] = '\0';
    return p;
}

/* ------------------------------------------------------------ the pool */

int sg__pg_pool_init(pg_ledger *p) {
    pg_pool *pool = calloc(1, sizeof(*pool));
    pg_ledger *first = sg__pg_new(p->location, &p->opts);
    if (pool == NULL || first == NULL || pthread_mutex_init(&pool->mu, NULL) != 0) {
        free(pool);
        sg__pg_free(first);
        return SG_ENOMEM;
    }
    if (sg__ledger_cond_init(&pool->freed) != 0) {
        pthread_mutex_destroy(&pool->mu);
        free(pool);
        sg__pg_free(first);
        return SG_ENOMEM;
    }
    pool->max = p->opts.intent_connections;
    first->conn = p->conn; /* checked by the open */
    first->stop_fd = p->stop_fd;
    p->conn = NULL;
    pool->idle[pool->nidle++] = first;
    pool->made = 1;
    p->pool = pool;
    return 0;
}

/* Every connection is idle: no intent runs while the handle closes. */
void sg__pg_pool_free(pg_ledger *p) {
    pg_pool *pool = p->pool;
    if (pool == NULL) {
        return;
    }
    for (size_t i = 0; i < pool->nidle; i++) {
        sg__pg_free(pool->idle[i]);
    }
    pthread_cond_destroy(&pool->freed);
    pthread_mutex_destroy(&pool->mu);
    free(pool);
    p->pool = NULL;
}

int sg__pg_pool_take(pg_ledger *p, int64_t until, pg_ledger **out) {
    pg_pool *pool = p->pool;
    *out = NULL;
    pthread_mutex_lock(&pool->mu);
    while (pool->nidle == 0 && pool->made >= pool->max) {
        if (sg__ledger_wait_until(&pool->freed, &pool->mu, until) != 0) {
            pthread_mutex_unlock(&pool->mu);
            return SG_ETIMEDOUT;
        }
    }
    if (pool->nidle > 0) {
        *out = pool->idle[--pool->nidle];
        pthread_mutex_unlock(&pool->mu);
        return 0;
    }
    pool->made++; /* its slot, while it is made without the mutex */
    pthread_mutex_unlock(&pool->mu);
    /* Not connected: the intent's statement connects, within its bound. */
    *out = sg__pg_new(p->location, &p->opts);
    if (*out == NULL) {
        pthread_mutex_lock(&pool->mu);
        pool->made--;
        pthread_cond_signal(&pool->freed);
        pthread_mutex_unlock(&pool->mu);
        return SG_ENOMEM;
    }
    (*out)->stop_fd = p->stop_fd;
    return 0;
}

void sg__pg_pool_give(pg_ledger *p, pg_ledger *c) {
    pg_pool *pool = p->pool;
    pthread_mutex_lock(&pool->mu);
    pool->idle[pool->nidle++] = c;
    pthread_cond_signal(&pool->freed);
    pthread_mutex_unlock(&pool->mu);
}

/* ------------------------------------------------------------ connection */

void sg__pg_interrupt(pg_ledger *p) {
    uint64_t one = 1;
    (void)!write(p->stop_fd, &one, sizeof(one));
}

void sg__pg_drop(pg_ledger *p) {
    if (p->conn != NULL) {
        /* libpq's message spans lines ("...failed: ...\n\tIs the server
         * running...?"): one line of it, white space folded */
        const char *m = PQerrorMessage(p->conn);
        size_t o = 0;
        bool space = false;
        for (; *m != '\0' && o + 1 < sizeof(p->last_error); m++) {
            const bool ws = *m == '\n' || *m == '\t' || *m == '\r' || *m == ' ';
            if (ws) {
                space = o > 0;
                continue;
            }
            if (space && o + 2 < sizeof(p->last_error)) {
                p->last_error[o++] = ' ';
            }
            space = false;
            p->last_error[o++] = *m;
        }
        p->last_error[o] = '\0';
    }
    PQfinish(p->conn);
    p->conn = NULL;
}

/* Waits until @p's socket is ready for @events or @until passes, or its
 * handle is closing and gives it up (sg__pg_interrupt: SG_ECANCELED). */
static int wait_socket(pg_ledger *p, short events, int64_t until) {
    for (;;) {
        int fd = PQsocket(p->conn);
        if (fd < 0) {
            return SG_ECONNRESET;
        }
        int64_t left = until - now_ns();
        if (left <= 0) {
            return SG_ETIMEDOUT;
        }
        int64_t ms = (left + SG_MS(1) - 1) / SG_MS(1);
        struct pollfd pfd[2] = {{.fd = fd, .events = events},
                                {.fd = p->stop_fd, .events = POLLIN}};
        int n = poll(pfd, p->stop_fd >= 0 ? 2 : 1, ms > INT32_MAX ? INT32_MAX : (int)ms);
        if (n > 0 && p->stop_fd >= 0 && (pfd[1].revents & POLLIN) != 0) {
            return SG_ECANCELED;
        }
        if (n > 0) {
            return 0;
        }
        if (n < 0 && errno != EINTR) {
            return SG_ESYS;
        }
    }
}

/* What a failed result or connection means for the caller. */
static int pg_error(PGconn *c, const PGresult *res) {
    if (PQstatus(c) != CONNECTION_OK) {
        return SG_ECONNRESET;
    }
    const char *state = res != NULL ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    if (state == NULL) {
        return SG_EIO;
    }
    if (strcmp(state, "57014") == 0) { /* query_canceled: statement_timeout */
        return SG_ETIMEDOUT;
    }
    if (strcmp(state, "55P03") == 0) { /* lock_not_available: lock_timeout */
        return SG_ELOCKED;
    }
    if (strcmp(state, "42P01") == 0) { /* undefined_table: no schema */
        return SG_ESTATE;
    }
    if (strcmp(state, "0A000") == 0) { /* feature_not_supported: newer schema */
        return SG_EUNSUPPORTED;
    }
    if (strncmp(state, "22", 2) == 0) { /* data exception: e.g. bad encoding */
        return SG_EINVAL;
    }
    if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0) {
        return SG_ECONNRESET; /* connection exception, server shutting down */
    }
    return SG_EIO;
}

/* Reads every result up to the end of the pipeline (or of a simple query),
 * keeping the one of statement @want (0-based; -1: the last) in *@out.
 * Returns 0, or the first error.  On a timeout or a lost connection the
 * connection is dropped. */
static int collect(pg_ledger *p, int want, bool pipeline, int64_t until, PGresult **out) {
    int rv = 0;
    int index = 0;
    *out = NULL;
    for (;;) {
        while (PQisBusy(p->conn)) {
            int w = wait_socket(p, POLLIN, until);
            if (w == 0 && PQconsumeInput(p->conn) == 0) {
                w = SG_ECONNRESET;
            }
            if (w != 0) {
                PQclear(*out);
                *out = NULL;
                sg__pg_drop(p);
                return w;
            }
        }
        PGresult *res = PQgetResult(p->conn);
        if (res == NULL) {
            if (!pipeline) {
                break; /* a simple query: every statement's result is in */
            }
            index++; /* the end of one statement's results */
            continue;
        }
        ExecStatusType st = PQresultStatus(res);
        if (st == PGRES_PIPELINE_SYNC) {
            PQclear(res);
            break;
        }
        if (st == PGRES_FATAL_ERROR || st == PGRES_PIPELINE_ABORTED ||
            st == PGRES_BAD_RESPONSE || st == PGRES_NONFATAL_ERROR) {
            if (rv == 0 && st != PGRES_PIPELINE_ABORTED) {
                rv = pg_error(p->conn, res);
            }
            PQclear(res);
            if (PQstatus(p->conn) != CONNECTION_OK) {
                PQclear(*out);
                *out = NULL;
                sg__pg_drop(p);
                return rv != 0 ? rv : SG_ECONNRESET;
            }
            continue;
        }
        if (want < 0 || index == want) {
            PQclear(*out);
            *out = res;
        } else {
            PQclear(res);
        }
    }
    if (pipeline && PQexitPipelineMode(p->conn) == 0) {
        sg__pg_drop(p);
        rv = rv != 0 ? rv : SG_EIO;
    }
    if (rv != 0) {
        PQclear(*out);
        *out = NULL;
    }
    return rv;
}

/* Sends what libpq has buffered, within @until. */
static int flush(pg_ledger *p, int64_t until) {
    int f;
    while ((f = PQflush(p->conn)) == 1) {
        int w = wait_socket(p, POLLIN | POLLOUT, until);
        if (w == 0 && PQconsumeInput(p->conn) == 0) {
            w = SG_ECONNRESET;
        }
        if (w != 0) {
            sg__pg_drop(p);
            return w;
        }
    }
    if (f < 0) {
        sg__pg_drop(p);
        return SG_ECONNRESET;
    }
    return 0;
}

/* A duration setting in ms as the server takes it: at most INT_MAX (24.8
 * days; our durations go up to a year). */
static int64_t ms_setting(int64_t ms) {
    return ms > INT32_MAX ? INT32_MAX : ms;
}

/* The server's statement_timeout for a call that must end by @until: a
 * tenth less (at most 100 ms less), so the server cancels first and the
 * connection stays usable. */
static void server_timeout(int64_t until, char buf[32]) {
    int64_t left = until - now_ns();
    int64_t margin = left / 10 < SG_MS(100) ? left / 10 : SG_MS(100);
    int64_t ms = (left - margin) / SG_MS(1);
    snprintf(buf, 32, "%" PRId64 "ms", ms < 1 ? (int64_t)1 : ms_setting(ms));
}

/* One statement with parameters, by @until: in one round trip, a pipeline
 * of the statement_timeout and the statement, committed together at the
 * pipeline's sync.  *@out gets the statement's result (PQclear it). */
int sg__pg_run(pg_ledger *p, const char *sql, int n, const char *const *vals,
               int64_t until, PGresult **out) {
    *out = NULL;
    if (p->conn == NULL) {
        return SG_ECONNRESET;
    }
    /* an aborted transaction runs nothing but its end (ROLLBACK, or a
     * COMMIT that rolls back): the statement_timeout before it would fail,
     * and the pipeline's abort skip the end itself - the transaction would
     * never end */
    const bool aborted = PQtransactionStatus(p->conn) == PQTRANS_INERROR;
    char tmo[32];
    server_timeout(until, tmo);
    const char *tv[1] = {tmo};
    if (PQenterPipelineMode(p->conn) == 0 ||
        (!aborted &&
         PQsendQueryParams(p->conn, "SELECT set_config('statement_timeout', $1, false)",
                           1, NULL, tv, NULL, NULL, 0) == 0) ||
        PQsendQueryParams(p->conn, sql, n, NULL, vals, NULL, NULL, 0) == 0 ||
        PQpipelineSync(p->conn) == 0) {
        sg__pg_drop(p);
        return SG_ECONNRESET;
    }
    int rv = flush(p, until);
    return rv != 0 ? rv : collect(p, aborted ? 0 : 1, true, until, out);
}

/* A script without parameters (the schema), by @until. */
int sg__pg_run_script(pg_ledger *p, const char *sql, int64_t until) {
    PGresult *res;
    char tmo[32];
    server_timeout(until, tmo);
    char set[64];
    snprintf(set, sizeof(set), "SET statement_timeout = '%s'", tmo);
    for (int i = 0; i < 2; i++) {
        if (PQsendQuery(p->conn, i == 0 ? set : sql) == 0) {
            sg__pg_drop(p);
            return SG_ECONNRESET;
        }
        int rv = flush(p, until);
        if (rv == 0) {
            rv = collect(p, -1, false, until, &res);
            PQclear(res);
        }
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

/* A library does not write to stderr: the server's notices ("relation
 * already exists, skipping" from the schema applied again) are dropped. */
static void no_notices(void *user_data, const char *message) {
    (void)user_data;
    (void)message;
}

/* Connects within @until; @check: and verifies the schema version. */
int sg__pg_connect(pg_ledger *p, int64_t until, bool check) {
    const char *const kw[] = {"dbname", "fallback_application_name", NULL};
    const char *const vals[] = {p->location, "streamguard", NULL};
    p->conn = PQconnectStartParams(kw, vals, 1);
    if (p->conn == NULL) {
        return SG_ENOMEM;
    }
    PQsetNoticeProcessor(p->conn, no_notices, NULL);
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
        if (st == PGRES_POLLING_FAILED || PQstatus(p->conn) == CONNECTION_BAD) {
            sg__pg_drop(p);
            return SG_ECONNECT;
        }
        int w = wait_socket(p, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, until);
        if (w != 0) {
            sg__pg_drop(p);
            return w == SG_ECONNRESET ? SG_ECONNECT : w;
        }
        st = PQconnectPoll(p->conn);
    }
    if (PQsetnonblocking(p->conn, 1) != 0) {
        sg__pg_drop(p);
        return SG_ECONNECT;
    }
    PGresult *res;
    char lock_tmo[32];
    snprintf(lock_tmo, sizeof(lock_tmo), "%" PRId64 "ms",
             ms_setting((p->opts.lock_timeout_ns + SG_MS(1) - 1) / SG_MS(1)));
    const char *lv[1] = {lock_tmo};
    /* A commit acknowledged before it is on the server's disk could lose an
     * intent: never with this session (local, on, remote_* are kept). */
    int rv = sg__pg_run(p,
                        "SELECT set_config('lock_timeout', $1, false), "
                        "CASE WHEN current_setting('synchronous_commit') = 'off' "
                        "THEN set_config('synchronous_commit', 'on', false) END",
                        1, lv, until, &res);
    PQclear(res);
    if (rv == 0 && check) {
        /* and whether the attempts carry usage: columns added to version 1
         * (a database its first schema made records attempts without) */
        rv = sg__pg_run(p,
                        "SELECT max(version), EXISTS (SELECT 1 FROM pg_attribute WHERE "
                        "attrelid = to_regclass('streamguard_ledger_attempts') AND "
                        "attname = 'usage_source' AND NOT attisdropped) "
                        "FROM streamguard_schema_version",
                        0, NULL, until, &res);
        if (rv == 0) {
            if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0)) {
                rv = SG_ESTATE;
            } else if (atoi(PQgetvalue(res, 0, 0)) != SCHEMA_VERSION) {
                rv = atoi(PQgetvalue(res, 0, 0)) > SCHEMA_VERSION ? SG_EUNSUPPORTED
                                                                  : SG_ESTATE;
            } else {
                p->usage_columns = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
            }
        }
        PQclear(res);
    }
    if (rv != 0 && p->conn != NULL) {
        sg__pg_drop(p);
    }
    return rv;
}

/* The deadline of a call: @until, or the handle's own bound from now. */
int64_t sg__pg_bound(const pg_ledger *p, int64_t until) {
    int64_t own = sg_time_add(now_ns(), p->opts.timeout_ns);
    return until == SG_TIME_NEVER || until > own ? own : until;
}

/* A connection that died while idle (a server restarted, a backend
 * terminated) fails the BEGIN, which did nothing: one more connection may
 * take it. */
int sg__pg_begin(pg_ledger *p, const char *sql, int64_t until) {
    PGresult *res;
    int rv = sg__pg_exec(p, sql, 0, NULL, until, &res);
    PQclear(res);
    if (rv == SG_ECONNRESET) {
        rv = sg__pg_exec(p, sql, 0, NULL, until, &res);
        PQclear(res);
    }
    return rv;
}

/* Runs one statement, connecting first when the connection was lost. */
int sg__pg_exec(pg_ledger *p, const char *sql, int n, const char *const *vals,
                int64_t until, PGresult **out) {
    *out = NULL;
    if (until - now_ns() <= 0) {
        return SG_ETIMEDOUT; /* nothing left to wait with: not even sent */
    }
    if (p->conn != NULL && PQstatus(p->conn) != CONNECTION_OK) {
        sg__pg_drop(p);
    }
    if (p->conn == NULL) {
        int rv = sg__pg_connect(p, until, true);
        if (rv != 0) {
            return rv;
        }
    }
    return sg__pg_run(p, sql, n, vals, until, out);
}
