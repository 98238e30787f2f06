/*
 * ledger_cmd.c - everything sg-stream does with --ledger LOCATION: a
 * directory (the file ledger) or a postgresql:// URI (the library picks
 * the backend from the location; nothing here depends on which).
 *
 * Two uses.  With --ledger-init, --unresolved or --reconcile KEY, no
 * request is made: the schema is applied, the ledger is listed (one line
 * an unresolved operation) or one operation is marked reconciled.  For a run, the ledger
 * is opened before the operation and becomes its policy observer, so the intent is
 * recorded before anything is sent, each attempt after it, and the end; an operation that
 * is still unresolved from an earlier run is refused, and ledger_refused() says so.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <streamguard/unstable/op.h>
#include <sys/stat.h>

#include "sg_stream.h"

/* The location as messages show it: a URI's password (user:PASSWORD@ or
 * password=...) is masked.  Points into a static buffer. */
static const char *shown(const char *loc) {
    static char buf[1024];
    return masked_url(buf, sizeof(buf), loc, false);
}

/* The one wording of a ledger failure. */
static void ledger_error(const struct config *c, int rv) {
    const char *hint = "";
    if (rv == SG_ESTATE && strstr(c->ledger_dir, "://") != NULL) {
        hint = ": the database has no ledger schema: run sg-stream --ledger URI "
               "--ledger-init";
    }
    fprintf(stderr, "%s: ledger %s: %s%s\n", prog, shown(c->ledger_dir), sg_strerror(rv),
            hint);
}

/* After the operation, its last records (on PostgreSQL, queued to the
 * handle's writer thread) are waited for until the budget's end, or for
 * this grace when less is left (docs/sg-stream.md). */
#define CLOSE_GRACE SG_MS(250)

/* PostgreSQL: connecting and each statement no operation bounds take at
 * most the run's budget, when it has one (10 s otherwise).  Closing waits
 * for nothing more (a millisecond): the wait for the last records is
 * ledger_close_for_run's sg_ledger_sync, bounded by the budget. */
static int ledger_options(const struct config *c, sg_ledger_options **out) {
    int rv = sg_ledger_options_new(out);
    if (rv == 0 && ((rv = sg_ledger_options_set_timeout(*out, c->budget_ns)) != 0 ||
                    (rv = sg_ledger_options_set_close_timeout(*out, SG_MS(1))) != 0)) {
        sg_ledger_options_free(*out);
        *out = NULL;
    }
    return rv;
}

static int print_unresolved(const sg_ledger_entry *e, void *user_data) {
    (void)user_data;
    char line[SGX_LEDGER_LINE_MAX];
    if (sgx_ledger_format_unresolved_line(e, line, sizeof(line)) >= 0) {
        puts(line);
    }
    return 0;
}

/* --ledger LOCATION --ledger-init | --unresolved | --reconcile KEY: no
 * request is made. */
int ledger_command(const struct config *c) {
    sg_ledger *l = NULL;
    sg_ledger_options *o = NULL;
    int rv = ledger_options(c, &o);
    if (rv == 0 && c->ledger_init) {
        rv = sg_ledger_init_schema(c->ledger_dir, o);
    }
    struct stat st;
    if (!c->ledger_init && strstr(c->ledger_dir, "://") == NULL &&
        stat(c->ledger_dir, &st) != 0 && errno == ENOENT) {
        /* opening would create it: a mistyped directory is no all-clear */
        if (!c->run.quiet) {
            fprintf(stderr, "%s: ledger %s: not found (--ledger-init creates one)\n",
                    prog, shown(c->ledger_dir));
        }
        sg_ledger_options_free(o);
        return EXIT_USAGE;
    }
    if (rv == 0 && (c->unresolved || c->reconcile != NULL)) {
        rv = sg_ledger_open(&l, c->ledger_dir, o);
    }
    sg_ledger_options_free(o);
    if (rv == 0 && c->unresolved) {
        rv = sg_ledger_list_unresolved(l, print_unresolved, NULL);
    }
    if (rv == 0 && c->reconcile != NULL) {
        rv = sg_ledger_reconcile(l, c->reconcile, "sg-stream --reconcile");
    }
    sg_ledger_close(l);
    fflush(stdout);
    if (rv != 0) {
        ledger_error(c, rv);
        return rv == SG_ENOTFOUND || rv == SG_EINVAL ? EXIT_USAGE : EXIT_INTERNAL;
    }
    return EXIT_OK;
}

const char *ledger_failure(int rv) {
    /* the wait for a record is bounded by the run's budget: its timeout is
     * no stream clock (sg_strerror's general word for SG_ETIMEDOUT) */
    return rv == SG_ETIMEDOUT ? "timed out: not committed by the end of the budget"
                              : sg_strerror(rv);
}

/* The ledger's records, as the library's ledger observer makes them (the
 * by-hand calls of ledger.h, under the run's key), and a word on stderr
 * when a record fails
 * for another reason than ownership: the intent (nothing is sent, and the
 * transport's refusal follows), or the end (the operation stays listed,
 * whatever its outcome, until reconciled).  user_data is the config. */
static void record_failed(struct config *c, const char *what, int rv, const char *then) {
    if (!c->run.quiet && !c->ledger_warned) {
        fprintf(stderr, "%s: ledger %s: %s not recorded: %s: %s\n", prog,
                shown(c->ledger_dir), what, ledger_failure(rv), then);
    }
    c->ledger_warned = true;
}

static int obs_intent(const sg_op *op, const sg_op_intent *intent, void *user_data) {
    struct config *c = user_data;
    int rv = sg_ledger_op_intent(c->ledger, sg_ledger_op_key(op, c->derived), op,
                                 intent->target);
    if (rv != 0 && rv != SG_EEXIST) {
        record_failed(c, "the intent", rv, "nothing was sent");
    }
    return rv;
}

static int obs_attempt_end(const sg_op *op, const sg_op_attempt *rec, void *user_data) {
    struct config *c = user_data;
    return sg_ledger_attempt_record(c->ledger, sg_ledger_op_key(op, c->derived), rec);
}

static int obs_resolve(const sg_op *op, void *user_data) {
    struct config *c = user_data;
    int rv = sg_ledger_op_resolve(c->ledger, sg_ledger_op_key(op, c->derived), op);
    if (rv != 0) {
        record_failed(c, "the end of the operation", rv,
                      "it stays listed as unresolved until reconciled");
    }
    return rv;
}

/* --ledger DIR for a run (a no-op without it): without an idempotency key,
 * the operation is named by a key derived from method, URL and body
 * (recorded, not sent).  Returns 0, or EXIT_INTERNAL having said why. */
int ledger_open_for_run(struct config *c) {
    if (c->ledger_dir == NULL) {
        return 0;
    }
    sg_ledger_options *o = NULL;
    int rv = ledger_options(c, &o);
    if (rv == 0) {
        rv = sg_ledger_open(&c->ledger, c->ledger_dir, o);
    }
    sg_ledger_options_free(o);
    if (rv == 0) {
        rv = sg_ledger_key_derive(c->method, c->url, c->body, c->body_len, c->derived);
    }
    if (rv != 0) {
        ledger_error(c, rv);
        ledger_close_for_run(c);
        return EXIT_INTERNAL;
    }
    /* The ledger is the operation's observer: it records the intent before
     * anything is sent (or refuses the operation), each attempt, the end. */
    rv = sg_op_observer_new(&c->observer);
    if (rv == 0) {
        (void)sg_op_observer_set_on_intent(c->observer, obs_intent);
        (void)sg_op_observer_set_on_attempt_end(c->observer, obs_attempt_end);
        (void)sg_op_observer_set_on_resolve(c->observer, obs_resolve);
        rv = sg_op_options_set_target(c->policy, c->url);
    }
    if (rv != 0) {
        ledger_error(c, rv);
        ledger_close_for_run(c);
        return EXIT_INTERNAL;
    }
    /* beside the run's trace, when it traces (otel.c) */
    rv = sg_op_options_add_observer(c->policy, c->observer, c);
    if (rv != 0) {
        ledger_error(c, rv);
        ledger_close_for_run(c);
        return EXIT_INTERNAL;
    }
    return 0;
}

/* After the operation ended, before it is reported: its last records are
 * waited for until the budget's end, or CLOSE_GRACE when less is left, so
 * the report can say whether its end was recorded (and a record that
 * failed, or was not committed by then, is said on stderr).  Once per run;
 * a no-op without --ledger. */
void ledger_settle(struct config *c) {
    if (c->ledger == NULL || c->ledger_settled) {
        return;
    }
    int64_t left = c->deadline - sg_clock_now(NULL);
    c->ledger_sync_rv =
        sg_ledger_sync(c->ledger, left > CLOSE_GRACE ? left : CLOSE_GRACE);
    c->ledger_settled = true;
    if (c->ledger_sync_rv != 0) {
        record_failed(c, "the end of the operation", c->ledger_sync_rv,
                      "it stays listed as unresolved until reconciled");
    }
}

/* After the operation is freed: nothing observes through the ledger now.
 * The last records were waited for (ledger_settle, here when the run ended
 * without a report); the close then gives up what is left at once, so the
 * process ends when the budget says. */
void ledger_close_for_run(struct config *c) {
    if (c->ledger == NULL) {
        return;
    }
    ledger_settle(c);
    sg_ledger_close(c->ledger);
    c->ledger = NULL;
}

/* The ledger refused the operation at its intent (the same operation is
 * unresolved), so nothing was started and there is no operation to report.
 * The end is told as the library tells a refused intent: the run's own
 * options, the refusal replayed through an intent that answers "refused",
 * concluded like any other run - the report, the -w line, the diagnostic
 * (unless -q), exit 4. */
static int replay_start(const sg_op *op, const sg_op_intent *intent, void *user_data,
                        sg_op_intent_wait *wait) {
    (void)op;
    (void)intent;
    (void)user_data;
    wait->fd = -1; /* never watched: it is polled at once */
    wait->handle = NULL;
    return SG_EINPROGRESS;
}

static int replay_poll(const sg_op *op, void *handle, void *user_data) {
    (void)op;
    (void)handle;
    (void)user_data;
    return SG_EEXIST; /* what the ledger answered */
}

static void replay_abandon(const sg_op *op, void *handle, sg_outcome outcome,
                           void *user_data) {
    (void)op;
    (void)handle;
    (void)outcome;
    (void)user_data;
}

int ledger_refused(const struct config *c) {
    char why[512];
    snprintf(why, sizeof(why), "%s is unresolved in %s: reconcile it first",
             c->idem_key != NULL ? c->idem_key : c->derived, shown(c->ledger_dir));
    sg_op_observer *refusal = NULL;
    sg_op_options *o = NULL;
    sg_op *op = NULL;
    int code = EXIT_BUDGET;
    if (sg_op_observer_new(&refusal) != 0 || sg_op_options_dup(&o, c->policy) != 0 ||
        sg_op_new(&op) != 0) {
        fprintf(stderr, "%s: refused: %s (and out of memory)\n", prog, why);
    } else {
        (void)sg_op_observer_set_async_intent(refusal, replay_start, replay_poll,
                                              replay_abandon);
        sg_op_options_set_observer(o, refusal, NULL);
        int fd = -1;
        int64_t now = sg_clock_now(NULL);
        bool started = sg_op_start_async(op, o, now, &fd) == SG_EINPROGRESS;
        if (started && sg_op_intent_poll(op, now) == 1) {
            code = conclude(c, op, why, NULL, 0);
        } else if (!c->run.quiet) {
            fprintf(stderr, "%s: refused: %s\n", prog, why); /* no operation to report */
        }
    }
    sg_op_free(op);
    sg_op_options_free(o);
    sg_op_observer_free(refusal);
    return code;
}
