/*
 * What the PostgreSQL ledger tests share: the failure count and its CHECK
 * macros, and a connection of the test's own beside the ledger's.  The
 * test defines `uri` (the scratch server's, from ledger_pg.sh).
 * Header-only: each test executable includes it once.
 */
#ifndef SG_TEST_PG_H
#define SG_TEST_PG_H

#include <streamguard/core.h>

#include <libpq-fe.h>

#include <stdio.h>
#include <stdlib.h>

static int failures;
static const char *uri;

#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                     \
        }                                                                   \
    } while (0)
#define CHECK_RV(expr, want)                                                        \
    do {                                                                            \
        int rv_ = (expr);                                                           \
        if (rv_ != (want)) {                                                        \
            fprintf(stderr, "FAIL %s:%d: %s = %s, wanted %s\n", __FILE__, __LINE__, \
                    #expr, sg_errname(rv_), sg_errname(want));                      \
            failures++;                                                             \
        }                                                                           \
    } while (0)

/* A connection of the test's own, beside the ledger's. */
static PGconn *admin(void) {
    PGconn *c = PQconnectdb(uri);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "admin connection: %s", PQerrorMessage(c));
        exit(1);
    }
    return c;
}

/* Runs @q on @c; a failure counts (and is said). */
static void sql(PGconn *c, const char *q) {
    PGresult *r = PQexec(c, q);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "FAIL: %s: %s", q, PQerrorMessage(c));
        failures++;
    }
    PQclear(r);
}

#endif
