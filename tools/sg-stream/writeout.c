/*
 * writeout.c - everything a run writes.
 *
 * Items join stdout's batch as they arrive (output.c), written before the
 * run waits again; a partial attempt is flagged on stderr so its output can
 * be discarded.  At the end, whatever the transport, conclude() writes the JSON
 * execution report (--report), the curl-style -w line and the one-line
 * diagnostic, and maps the outcome to the exit status of its family;
 * run_failed() is the end of a run that never reached an outcome.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_stream.h"

/* true when @p[0..@n) is the cached type (@n <= EVENT_CACHE), compared
 * 8 bytes at a time: it runs per item, mostly on "message". */
static bool same_event(const struct run *r, const char *p, size_t n) {
    if (n != r->event_raw_len) {
        return false;
    }
    uint64_t a;
    uint64_t b;
    if (n < 8) {
        if (n < 4) {
            return memcmp(p, r->event_raw, n) == 0;
        }
        uint32_t x;
        uint32_t y;
        uint32_t z;
        uint32_t w;
        /* the first 4 and the last 4 ("message": 0-3 and 3-6) */
        memcpy(&x, p, 4);
        memcpy(&y, r->event_raw, 4);
        memcpy(&z, p + n - 4, 4);
        memcpy(&w, r->event_raw + n - 4, 4);
        return x == y && z == w;
    }
    for (size_t i = 0; i + 8 < n; i += 8) {
        memcpy(&a, p + i, 8);
        memcpy(&b, r->event_raw + i, 8);
        if (a != b) {
            return false;
        }
    }
    /* the last 8, overlapping what came before */
    memcpy(&a, p + n - 8, 8);
    memcpy(&b, r->event_raw + n - 8, 8);
    return a == b;
}

/* The line's head, `{"event":` the event type's literal `,"data":`, at
 * @dst, from the cache while the type is the one before; returns the end
 * of what it wrote. */
static char *line_head(struct run *r, char *dst, const sg_item *item) {
    if (same_event(r, item->event, item->event_len)) {
        if (r->head_len <= 32) {
            /* 32 bytes at once: the line's room (32 bytes beyond the
             * fields' worst cases) covers the excess, and what follows
             * writes over it */
            memcpy(dst, r->head, 32);
        } else {
            memcpy(dst, r->head, r->head_len);
        }
        return dst + r->head_len;
    }
    char *d = dst;
    memcpy(d, "{\"event\":", 9);
    d += 9;
    d += r->escape(d, item->event, item->event_len);
    memcpy(d, ",\"data\":", 8);
    d += 8;
    if (item->event_len > EVENT_CACHE) {
        r->event_raw_len = SIZE_MAX; /* too long to keep: never matches */
        return d;
    }
    memcpy(r->event_raw, item->event, item->event_len);
    r->event_raw_len = item->event_len;
    r->head_len = (size_t)(d - dst);
    memcpy(r->head, dst, r->head_len);
    return d;
}

/* The item joins stdout's batch (output.c): it goes out before the run
 * waits again.  Non-zero (stdout broke, or fell too far behind) cancels the
 * operation.  Not called with --output none (run_curl.c, run_h2.c). */
int print_item(struct run *r, const sg_item *item) {
    struct out *o = &r->out;
    if (r->output == OUT_DATA) {
        char *dst = out_reserve(o, item->data_len + 1);
        if (dst == NULL) {
            return 1;
        }
        memcpy(dst, item->data, item->data_len);
        dst[item->data_len] = '\n';
        o->len += item->data_len + 1;
    } else if (r->output == OUT_JSONL) {
        /* one line, all of it or none: room for the worst case at once */
        size_t need = 32 + SGX_JSON_ESCAPE_MAX(item->event_len) +
                      SGX_JSON_ESCAPE_MAX(item->data_len) +
                      SGX_JSON_ESCAPE_MAX(item->id_len);
        char *start = out_reserve(o, need);
        if (start == NULL) {
            return 1;
        }
        char *d = line_head(r, start, item);
        d += r->escape(d, item->data, item->data_len);
        if (item->id_len == 0) {
            memcpy(d, ",\"id\":\"\"}\n", 10); /* most streams have none */
            d += 10;
        } else {
            memcpy(d, ",\"id\":", 6);
            d += 6;
            d += r->escape(d, item->id, item->id_len);
            memcpy(d, "}\n", 2);
            d += 2;
        }
        o->len += (size_t)(d - start);
    }
    if (o->len >= OUT_BATCH) {
        /* one step may read many times: do not wait for its end */
        out_flush(o);
    }
    return 0;
}

void note_discard(const struct run *r, uint32_t attempt, sg_outcome outcome) {
    if (!r->quiet && !r->out.broken) { /* | head: the reader has gone */
        fprintf(stderr,
                "%s: attempt %" PRIu32 " ended partial (%s): discard its output\n", prog,
                attempt, sg_outcome_name(outcome));
    }
}

/* ------------------------------------------------------------ the end */

/* The attempt the -w variables and the diagnostic speak of, if any. */
static const sg_op_attempt *last_attempt(const sg_op *op) {
    return sg_op_deciding_attempt(op); /* with hedging, the winner */
}

static int exit_code_for(sg_outcome o) {
    switch (o) {
    case SG_OUTCOME_OK:
        return EXIT_OK;
    case SG_OUTCOME_CONNECT_TIMEOUT:
    case SG_OUTCOME_FIRST_ITEM_TIMEOUT:
    case SG_OUTCOME_IDLE_TIMEOUT:
    case SG_OUTCOME_STREAM_TIMEOUT:
    case SG_OUTCOME_ATTEMPT_TIMEOUT:
        return EXIT_TIMEOUT;
    case SG_OUTCOME_BUDGET_EXHAUSTED:
    case SG_OUTCOME_REFUSED:
        return EXIT_BUDGET;
    case SG_OUTCOME_CANCELLED:
    case SG_OUTCOME_CAP_EXCEEDED:
        return EXIT_STOPPED;
    case SG_OUTCOME_TRUNCATED:
        return EXIT_TRUNCATED;
    case SG_OUTCOME_HTTP_ERROR:
    case SG_OUTCOME_PROVIDER_ERROR: /* the server's failure, in-band */
        return EXIT_HTTP;
    case SG_OUTCOME_TRANSPORT_ERROR:
    case SG_OUTCOME_PROTOCOL_ERROR:
        return EXIT_TRANSPORT;
    default:
        return EXIT_INTERNAL;
    }
}

static int64_t ms(int64_t ns) {
    return ns / SG_MS(1);
}

/* A count of tokens, or '-' where the report has null (none kept, none
 * known). */
static void put_tokens(int64_t n) {
    if (n >= 0) {
        printf("%" PRId64, n);
    } else {
        fputc('-', stdout);
    }
}

/* What the operation cost, kept and discarded together (docs/report.md,
 * "Usage and cost"), as the report writes a cost; '-' without a price. */
static void put_cost(const sg_op *op) {
    double kept = sg_op_cost(op, SG_USAGE_KEPT);
    double discarded = sg_op_cost(op, SG_USAGE_DISCARDED);
    if (kept < 0 || discarded < 0) {
        fputc('-', stdout);
        return;
    }
    char buf[64];
    fputs(money(buf, sizeof(buf), kept + discarded), stdout);
}

/* curl-style -w: %{name} variables, %% and the \n and \t escapes. */
static void write_out(const char *fmt, const sg_op *op) {
    uint32_t n = sg_op_attempt_count(op);
    const sg_op_attempt *last = last_attempt(op);
    /* the report's span: from the budget's start (the command's) to the
     * operation's end */
    const sg_budget *b = sg_op_budget(op);
    int64_t end = sg_op_finished_at(op);
    if (end == SG_TIME_NEVER) {
        end = sg_clock_now(NULL);
    }
    const int64_t elapsed_ns =
        sg_time_since(end, sg_budget_started_at(b)); /* as the report */
    for (const char *p = fmt; *p != '\0'; p++) {
        if (p[0] == '\\' && p[1] == 'n') {
            fputc('\n', stdout);
            p++;
            continue;
        }
        if (p[0] == '\\' && p[1] == 't') {
            fputc('\t', stdout);
            p++;
            continue;
        }
        if (p[0] == '%' && p[1] == '%') {
            fputc('%', stdout);
            p++;
            continue;
        }
        if (p[0] != '%' || p[1] != '{') {
            fputc(*p, stdout);
            continue;
        }
        const char *close = strchr(p, '}');
        if (close == NULL) {
            fputs(p, stdout);
            break;
        }
        size_t len = (size_t)(close - p - 2);
        const char *name = p + 2;
#define IS(s) (len == sizeof(s) - 1 && memcmp(name, s, len) == 0)
        if (IS("outcome")) {
            fputs(sg_outcome_name(sg_op_outcome(op)), stdout);
        } else if (IS("phase")) {
            fputs(last ? sg_phase_name(last->phase) : "-", stdout); /* none: null */
        } else if (IS("attempts")) {
            printf("%" PRIu32, n);
        } else if (IS("provider_error")) {
            if (last != NULL && last->outcome == SG_OUTCOME_PROVIDER_ERROR) {
                fputs(last->provider_error_type, stdout);
            }
        } else if (IS("first_item_ms") || IS("first_token_ms")) {
            /* under a profile the first item is the first token */
            if (last != NULL && last->time_to_first_item_ns >= 0) {
                printf("%" PRId64, ms(last->time_to_first_item_ns));
            } else {
                fputc('-', stdout);
            }
        } else if (IS("elapsed_ms")) {
            printf("%" PRId64, ms(elapsed_ns));
        } else if (IS("items")) {
            printf("%" PRIu64, last ? last->items : 0);
        } else if (IS("http_status")) {
            if (last != NULL && last->http_status != 0) {
                printf("%d", last->http_status);
            } else {
                fputc('-', stdout); /* no response: the report's null */
            }
        } else if (IS("partial")) {
            fputs(last && last->partial ? "true" : "false", stdout);
        } else if (IS("outcome_unknown")) {
            fputs(last && last->outcome_unknown ? "true" : "false", stdout);
        } else if (IS("reason")) {
            fputs(sg_op_reason_name(sg_op_final_reason(op)), stdout);
        } else if (IS("remaining_ms")) {
            printf("%" PRId64, ms(sg_budget_remaining(b, end)));
        } else if (IS("input_tokens")) {
            put_tokens(sg_op_tokens(op, SG_USAGE_KEPT, SG_TOKENS_INPUT));
        } else if (IS("output_tokens")) {
            put_tokens(sg_op_tokens(op, SG_USAGE_KEPT, SG_TOKENS_OUTPUT));
        } else if (IS("discarded_output_tokens")) {
            put_tokens(sg_op_tokens(op, SG_USAGE_DISCARDED, SG_TOKENS_OUTPUT));
        } else if (IS("cost")) {
            put_cost(op);
        } else {
            fwrite(p, 1, (size_t)(close - p + 1), stdout);
        }
#undef IS
        p = close;
    }
    fflush(stdout);
}

/* The library's report, and with --ledger what became of the run's last
 * records: "ledger": {"end_recorded": BOOL, "error": TEXT|null} as the
 * report object's last member (docs/sg-stream.md). */
static void write_report_line(const struct config *c, const char *report, FILE *f) {
    size_t len = strlen(report);
    if (!c->ledger_settled || len == 0 || report[len - 1] != '}') {
        fputs(report, f);
        fputc('\n', f);
        return;
    }
    fwrite(report, 1, len - 1, f);
    fprintf(f, ",\"ledger\":{\"end_recorded\":%s,\"error\":",
            c->ledger_sync_rv == 0 ? "true" : "false");
    if (c->ledger_sync_rv == 0) {
        fputs("null", f);
    } else {
        const char *why = ledger_failure(c->ledger_sync_rv);
        sgx_json_fwrite_string(f, why, strlen(why));
    }
    fputs("}}\n", f);
}

static int write_report(const struct config *c, const sg_op *pol) {
    char stack[16384];
    size_t needed = 0;
    char *buf = stack;
    int64_t now = sg_clock_now(NULL);
    int rv = sg_op_report_write(pol, now, buf, sizeof(stack), &needed);
    if (rv == SG_ENOBUFS) {
        buf = malloc(needed);
        if (buf == NULL) {
            return -1;
        }
        rv = sg_op_report_write(pol, now, buf, needed, NULL);
    }
    if (rv == 0) {
        FILE *f = strcmp(c->report, "-") == 0 ? stderr : fopen(c->report, "w");
        if (f == NULL) {
            fprintf(stderr, "%s: cannot write report '%s': %s\n", prog, c->report,
                    strerror(errno));
            rv = -1;
        } else {
            write_report_line(c, buf, f);
            if (f != stderr && fclose(f) != 0) {
                rv = -1;
            }
        }
    }
    if (buf != stack) {
        free(buf);
    }
    return rv;
}

void output_end(struct config *c) {
    struct out *o = &c->run.out;
    if (o->overflow && !c->run.quiet) {
        fprintf(stderr, "%s: stdout fell %zu MiB behind the stream: cancelled\n", prog,
                o->max >> 20);
    }
    if (out_drain(o, c->deadline) != 0 && !o->broken) {
        if (!c->run.quiet) {
            fprintf(stderr, "%s: stdout did not take %zu bytes of items by %s: dropped\n",
                    prog, o->len,
                    signals_first() != 0 ? "the signal" : "the budget's end");
        }
        o->broken = true;
        o->lost = true;
    }
    out_free(o); /* blocking again, for the -w line */
}

/* At most this much of what the server said with an error is quoted. */
#define SAID_MAX 400

/* The server's error body on its own line: control bytes and DEL as '?'
 * (line ends as spaces), cut at SAID_MAX with "..." when longer. */
static void quote_said(const char *said, size_t len) {
    while (len > 0 && (said[len - 1] == '\n' || said[len - 1] == '\r' ||
                       said[len - 1] == ' ' || said[len - 1] == '\t')) {
        len--;
    }
    if (len == 0) {
        return;
    }
    fprintf(stderr, "%s: the server said: ", prog);
    size_t n = len < SAID_MAX ? len : SAID_MAX;
    while (n < len && n > 0 && ((unsigned char)said[n] & 0xC0) == 0x80) {
        n--; /* cut before a UTF-8 sequence, not inside it */
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)said[i];
        fputc(b == '\n' || b == '\r' || b == '\t' ? ' '
              : b < 0x20 || b == 0x7f             ? '?'
                                                  : b,
              stderr);
    }
    fputs(len > n ? "...\n" : "\n", stderr);
}

/* The end of a run, whatever the transport: report, -w, diagnostics, and
 * the exit status of the outcome's family. */
int conclude(const struct config *c, const sg_op *pol, const char *error,
             const char *said, size_t said_len) {
    sg_outcome o = sg_op_outcome(pol);
    int code = exit_code_for(o);
    const struct out *out = &c->run.out;
    if (c->report != NULL && write_report(c, pol) != 0) {
        code = code == EXIT_OK ? EXIT_INTERNAL : code;
    }
    if (out->lost && code == EXIT_OK) {
        code = EXIT_INTERNAL; /* the stream was fine; its output did not arrive */
    }
    if (c->write_out != NULL && !out->broken) {
        write_out(c->write_out, pol);
    }
    if (out->broken && !out->lost && o == SG_OUTCOME_CANCELLED) {
        return code; /* the reader went away (| head): nothing to say */
    }
    if (strcmp(error, sg_outcome_name(o)) == 0) {
        error = ""; /* says nothing the outcome does not */
    }
    if (!c->run.quiet && o != SG_OUTCOME_OK) {
        uint32_t n = sg_op_attempt_count(pol);
        const sg_op_attempt *last = last_attempt(pol);
        const char *reason = sg_op_reason_name(sg_op_final_reason(pol));
        if (last == NULL) {
            fprintf(stderr, "%s: %s before any attempt (%s)", prog, sg_outcome_name(o),
                    reason);
        } else if (o == SG_OUTCOME_CANCELLED && last->decision == SG_OP_RETRY) {
            /* between attempts: the phase is the one the last ended in */
            fprintf(stderr,
                    "%s: cancelled while waiting to retry after %" PRIu32
                    " attempt%s (%s); it ended %s in %s",
                    prog, n, n == 1 ? "" : "s", reason, sg_outcome_name(last->outcome),
                    sg_phase_name(last->phase));
        } else {
            char status[24] = "";
            if (o == SG_OUTCOME_HTTP_ERROR && last->http_status > 0) {
                snprintf(status, sizeof(status), " (HTTP %d)", last->http_status);
            }
            fprintf(stderr, "%s: %s%s in %s after %" PRIu32 " attempt%s (%s)%s", prog,
                    sg_outcome_name(o), status, sg_phase_name(last->phase), n,
                    n == 1 ? "" : "s", reason,
                    last->outcome_unknown ? "; outcome unknown: reconcile" : "");
        }
        fprintf(stderr, "%s%s", error[0] ? ": " : "", error);
        if (c->probe_ns > 0) {
            fprintf(stderr,
                    "; the HTTP/2 probe spent %" PRId64 " ms of the budget first (%s)",
                    ms(c->probe_ns), c->probe_error);
        }
        fputc('\n', stderr);
        if (o == SG_OUTCOME_HTTP_ERROR && said != NULL) {
            quote_said(said, said_len);
        }
    }
    return code;
}

/* The end of a run that never reached an outcome: the ledger refused it (the
 * same operation is unresolved), or it could not be set up.  @detail, when
 * not NULL, is the transport's own word on it. */
int run_failed(const struct config *c, int rv, const char *detail) {
    if (rv == SG_EEXIST && c->ledger != NULL) {
        return ledger_refused(c);
    }
    if (!c->run.quiet) {
        fprintf(stderr, "%s: %s%s%s\n", prog, sg_strerror(rv), detail != NULL ? ": " : "",
                detail != NULL ? detail : "");
    }
    return rv == SG_EINVAL || rv == SG_ERANGE ? EXIT_USAGE : EXIT_INTERNAL;
}
