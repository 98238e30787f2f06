/*
 * The ledger's public calls: each checks its arguments once, then calls
 * through the handle's backend table (internal.h, "the backends"): the
 * file's (file.c), the embedded default, or PostgreSQL's (pg.c) for a
 * postgresql:// location.  Nothing here names a backend but the choice of
 * one by its location, at open.
 */
#define _GNU_SOURCE
#include "core/internal.h"
#include "ledger/internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ open, close */

/* The backend @location names: PostgreSQL's for a postgresql:// or
 * postgres:// URI, else the file's (a directory).  NULL: a backend this
 * build left out. */
static const sg__ledger_backend *backend_for(const char *location) {
    if (strncmp(location, "postgresql://", 13) != 0 &&
        strncmp(location, "postgres://", 11) != 0) {
        return &sg__ledger_file_backend;
    }
#ifdef SG_HAVE_POSTGRESQL
    return &sg__ledger_pg_backend;
#else
    return NULL;
#endif
}

/* The options every backend takes alike, into @o (each was checked as it
 * was set); the location checked, and its backend in *@be. */
static int check_options(const char *location, const sg_ledger_options *opts,
                         sg_ledger_options *o, const sg__ledger_backend **be) {
    if (location == NULL || location[0] == '\0') {
        return SG_EINVAL;
    }
    *be = backend_for(location);
    if (*be == NULL) {
        return SG_EUNSUPPORTED;
    }
    static const sg_ledger_options defaults;
    *o = opts != NULL ? *opts : defaults;
    return 0;
}

void sg_ledger_close(sg_ledger *l) {
    if (l == NULL) {
        return;
    }
    l->backend->close(l);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

int sg_ledger_init_schema(const char *location, const sg_ledger_options *opts) {
    sg_ledger_options o;
    const sg__ledger_backend *be;
    int rv = check_options(location, opts, &o, &be);
    if (rv != 0) {
        return rv;
    }
    return be->init_schema(location, &o);
}

int sg_ledger_open(sg_ledger **out, const char *location, const sg_ledger_options *opts) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_ledger_options o;
    const sg__ledger_backend *be;
    int rv = check_options(location, opts, &o, &be);
    if (rv != 0) {
        return rv;
    }
    sg_ledger *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return SG_ENOMEM;
    }
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l);
        return SG_ENOMEM;
    }
    l->backend = be;
    l->opts = o;
    rv = be->open(l, location);
    if (rv != 0) {
        int saved = errno; /* what the backend's failure left, for the caller */
        pthread_mutex_destroy(&l->mu);
        free(l);
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
    return l->backend->intent(l, &r, until);
}

/* sg_ledger_attempt, with the attempt's usage when @usage says something
 * (NULL: nothing). */
static int attempt(sg_ledger *l, const char *key, uint32_t n, sg_outcome outcome,
                   sg_phase phase, bool sent, int http_status, bool outcome_unknown,
                   const sg_op_usage *usage) {
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
    sg__ledger_rec_usage(&r, usage);
    return l->backend->attempt(l, &r);
}

int sg_ledger_attempt(sg_ledger *l, const char *key, uint32_t n, sg_outcome outcome,
                      sg_phase phase, bool sent, int http_status, bool outcome_unknown) {
    return attempt(l, key, n, outcome, phase, sent, http_status, outcome_unknown, NULL);
}

int sg_ledger_attempt_record(sg_ledger *l, const char *key, const sg_op_attempt *rec) {
    if (rec == NULL) {
        return SG_EINVAL;
    }
    return attempt(l, key, rec->n, rec->outcome, rec->phase, rec->sent, rec->http_status,
                   rec->outcome_unknown, &rec->usage);
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
    return l->backend->resolve(l, &r);
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
    return l->backend->reconcile(l, &r);
}

/* ------------------------------------------------ listing, upkeep, figures */

int sg_ledger_list_unresolved(sg_ledger *l,
                              int (*cb)(const sg_ledger_entry *e, void *user_data),
                              void *user_data) {
    if (l == NULL || cb == NULL) {
        return SG_EINVAL;
    }
    return l->backend->list(l, cb, user_data);
}

int sg_ledger_compact(sg_ledger *l) {
    if (l == NULL) {
        return SG_EINVAL;
    }
    return l->backend->compact(l);
}

int sg_ledger_sync(sg_ledger *l, int64_t max_wait_ns) {
    if (l == NULL) {
        return SG_EINVAL;
    }
    int64_t until = max_wait_ns < 0
                        ? SG_TIME_NEVER
                        : sg_time_add(sg_clock_monotonic_now(NULL), max_wait_ns);
    return l->backend->sync(l, until);
}

int sg_ledger_get_stats(sg_ledger *l, sg_ledger_stats *out) {
    if (l == NULL || out == NULL || out->size < sizeof(out->size)) {
        return SG_EINVAL;
    }
    sg_ledger_stats all;
    memset(&all, 0, sizeof(all));
    int rv = l->backend->stats(l, &all);
    if (rv != 0) {
        return rv;
    }
    all.size = sizeof(all);
    return sg__stats_copy(out, &all, sizeof(all));
}
