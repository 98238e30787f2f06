/*
 * sg-stream - stream one guarded operation from the command line.
 *
 * A curl-like client built on the public streamguard API only: it sets up
 * the policy (budget, clocks, retries), runs the operation over libcurl,
 * prints each item as it arrives (flushed one by one, so a pipe sees it at
 * once), and writes the execution report.  The exit status says which
 * family of outcomes ended it (see usage()).  docs/sg-stream.md is the
 * manual.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/curl.h>
#include <streamguard/ledger.h>
#ifdef SG_HAVE_H2
#    include <streamguard/h2.h>
#endif

enum exit_code {
    EXIT_OK = 0,
    EXIT_INTERNAL = 1,  /* could not run at all (setup failure) */
    EXIT_USAGE = 2,     /* bad arguments */
    EXIT_TIMEOUT = 3,   /* connect/first-item/idle/stream/attempt timeout */
    EXIT_BUDGET = 4,    /* budget_exhausted or refused */
    EXIT_STOPPED = 5,   /* cancelled or cap_exceeded */
    EXIT_TRUNCATED = 6, /* truncated */
    EXIT_HTTP = 7,      /* http_error */
    EXIT_TRANSPORT = 8, /* transport_error or protocol_error */
};

#define DEFAULT_MAX_EVENT ((size_t)1024 * 1024)

static const char *prog = "sg-stream";

static void usage(FILE *f) {
    fprintf(
        f,
        "Usage: sg-stream [options] URL\n"
        "Stream one guarded operation and print its items.\n"
        "\n"
        "Clocks (durations like 250ms, 2s, 1.5s, 1m, 1h; a bare number is seconds;\n"
        "absent = off):\n"
        "  --budget D            operation budget for all attempts and sleeps (60s)\n"
        "  --first-item D        attempt start -> first item\n"
        "  --idle D              item -> next item (keepalives do not count)\n"
        "  --stream-total D      attempt start -> end of stream\n"
        "  --connect-timeout D   connection establishment\n"
        "  --attempt-timeout D   per-attempt ceiling\n"
        "  --floor D             budget reserve never leased (0)\n"
        "Retries:\n"
        "  --attempts N          attempts including the first, 1..16 (1)\n"
        "  --backoff-base D      backoff base (100ms)   --backoff-max D  cap (10s)\n"
        "  --idempotency-key KEY sent as Idempotency-Key on every attempt\n"
        "  --idempotent          declare the request safe to repeat\n"
        "Request:\n"
        "  -X, --request METHOD  method (GET; POST when -d is given)\n"
        "  -H, --header 'N: v'   request header (repeatable)\n"
        "  -d, --data DATA|@FILE request body (implies POST)\n"
        "  --cacert FILE         trust the CA certificates in FILE\n"
        "  --http1.1             HTTP/1.1 through libcurl\n"
        "  --http2               streamguard's own HTTP/2 transport (h2c for http://);\n"
        "                        https:// uses it whenever the server negotiates h2\n"
        "Propagation:\n"
        "  --deadline-header NAME  stamp the remaining budget in whole ms\n"
        "  --grpc-timeout        also stamp grpc-timeout\n"
        "Stream:\n"
        "  --format sse|ndjson   framing (sse)\n"
        "  --done DATA           terminal sentinel ([DONE] for sse)\n"
        "  --done-event TYPE     terminal event type (e.g. message_stop)\n"
        "  --no-done             no sentinel: a complete body is a clean end\n"
        "  --max-items N         cap on items (runaway guard)\n"
        "  --max-bytes N         cap on body bytes\n"
        "  --max-event-bytes N   largest line or event accepted (1048576);\n"
        "                        exceeding it is protocol_error\n"
        "Output:\n"
        "  --output data|jsonl|none  items as data lines, JSON lines, or not at all\n"
        "  --report FILE         the JSON execution report (- for stderr)\n"
        "  -w, --write-out FMT   print FMT at the end; %%{outcome} %%{phase}\n"
        "                        %%{attempts} %%{first_item_ms} %%{elapsed_ms}\n"
        "                        %%{items} %%{http_status} %%{partial}\n"
        "                        %%{outcome_unknown} %%{reason} %%{remaining_ms}, \\n\n"
        "  -q, --quiet           no diagnostics on stderr\n"
        "  -h, --help            this help    -V, --version  the version\n"
        "\n"
        "Exit status: 0 ok; 1 internal error; 2 usage error; 3 a stream clock\n"
        "timed out (connect, first item, idle, stream, attempt); 4 budget exhausted\n"
        "or refused; 5 cancelled or cap exceeded; 6 truncated; 7 HTTP error;\n"
        "8 transport or protocol error.\n");
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see --help)\n");
    va_end(ap);
    return EXIT_USAGE;
}

/* "250ms", "2s", "1.5s", "1m", "1h", "500us"; a bare number is seconds. */
static int parse_duration(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    if (*s == '\0' || *s == '-' || *s == '+' || *s == ' ') {
        return -1;
    }
    double v = strtod(s, &end);
    if (errno != 0 || end == s || !(v > 0)) {
        return -1;
    }
    double scale;
    if (strcmp(end, "ms") == 0) {
        scale = 1e6;
    } else if (strcmp(end, "s") == 0 || *end == '\0') {
        scale = 1e9;
    } else if (strcmp(end, "m") == 0) {
        scale = 60e9;
    } else if (strcmp(end, "h") == 0) {
        scale = 3600e9;
    } else if (strcmp(end, "us") == 0) {
        scale = 1e3;
    } else {
        return -1;
    }
    double ns = v * scale;
    if (ns < 1 || ns > (double)SG_DURATION_MAX) {
        return -1;
    }
    *out = (int64_t)ns;
    return 0;
}

static int parse_count(const char *s, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') {
        return -1;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (f != stdin) {
        fclose(f);
    }
    *len = n;
    return buf;
}

/* ----------------------------------------------------------- item output */

enum output { OUT_DATA, OUT_JSONL, OUT_NONE };

struct run {
    enum output output;
    bool quiet;
    uint64_t printed;
};

static int print_item(struct run *r, const sg_item *item) {
    if (r->output == OUT_DATA) {
        fwrite(item->data, 1, item->data_len, stdout);
        fputc('\n', stdout);
    } else if (r->output == OUT_JSONL) {
        fputs("{\"event\":", stdout);
        sg_json_fwrite_string(stdout, item->event, item->event_len);
        fputs(",\"data\":", stdout);
        sg_json_fwrite_string(stdout, item->data, item->data_len);
        fputs(",\"id\":", stdout);
        sg_json_fwrite_string(stdout, item->id, item->id_len);
        fputs("}\n", stdout);
    }
    if (r->output != OUT_NONE) {
        fflush(stdout); /* one by one: a pipe sees each item as it arrives */
    }
    r->printed++;
    return 0;
}

static void note_discard(const struct run *r, uint32_t attempt, sg_outcome outcome) {
    if (!r->quiet) {
        fprintf(stderr,
                "%s: attempt %" PRIu32 " ended partial (%s): discard its output\n", prog,
                attempt, sg_outcome_name(outcome));
    }
}

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    (void)op;
    return print_item(user_data, item);
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome,
                       void *user_data) {
    (void)op;
    note_discard(user_data, attempt, outcome);
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

/* curl-style -w: %{name} variables and \n escapes. */
static void write_out(const char *fmt, const sg_op *op, int64_t elapsed_ns) {
    uint32_t n = sg_op_attempt_count(op);
    const sg_op_attempt *last = n > 0 ? sg_op_attempt_at(op, n - 1) : NULL;
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
            fputs(last ? sg_phase_name(last->phase) : "connect", stdout);
        } else if (IS("attempts")) {
            printf("%" PRIu32, n);
        } else if (IS("first_item_ms")) {
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
            printf("%d", last ? last->http_status : 0);
        } else if (IS("partial")) {
            fputs(last && last->partial ? "true" : "false", stdout);
        } else if (IS("outcome_unknown")) {
            fputs(last && last->outcome_unknown ? "true" : "false", stdout);
        } else if (IS("reason")) {
            fputs(sg_op_reason_name(sg_op_final_reason(op)), stdout);
        } else if (IS("remaining_ms")) {
            const sg_budget *b = sg_op_budget(op);
            int64_t end = sg_budget_started_at(b) + elapsed_ns;
            printf("%" PRId64, ms(sg_budget_remaining(b, end)));
        } else {
            fwrite(p, 1, (size_t)(close - p + 1), stdout);
        }
#undef IS
        p = close;
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ main */

enum {
    OPT_BUDGET = 256,
    OPT_FIRST_ITEM,
    OPT_IDLE,
    OPT_STREAM_TOTAL,
    OPT_CONNECT_TIMEOUT,
    OPT_ATTEMPT_TIMEOUT,
    OPT_FLOOR,
    OPT_ATTEMPTS,
    OPT_BACKOFF_BASE,
    OPT_BACKOFF_MAX,
    OPT_IDEMPOTENCY_KEY,
    OPT_IDEMPOTENT,
    OPT_CACERT,
    OPT_HTTP11,
    OPT_HTTP2,
    OPT_DEADLINE_HEADER,
    OPT_GRPC_TIMEOUT,
    OPT_FORMAT,
    OPT_DONE,
    OPT_DONE_EVENT,
    OPT_NO_DONE,
    OPT_SKIP_EVENT,
    OPT_MAX_ITEMS,
    OPT_MAX_BYTES,
    OPT_MAX_EVENT_BYTES,
    OPT_OUTPUT,
    OPT_REPORT,
    OPT_LEDGER,
    OPT_UNRESOLVED,
    OPT_RECONCILE,
};

static const struct option long_opts[] = {
    {"budget", required_argument, NULL, OPT_BUDGET},
    {"first-item", required_argument, NULL, OPT_FIRST_ITEM},
    {"idle", required_argument, NULL, OPT_IDLE},
    {"stream-total", required_argument, NULL, OPT_STREAM_TOTAL},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"attempt-timeout", required_argument, NULL, OPT_ATTEMPT_TIMEOUT},
    {"floor", required_argument, NULL, OPT_FLOOR},
    {"attempts", required_argument, NULL, OPT_ATTEMPTS},
    {"backoff-base", required_argument, NULL, OPT_BACKOFF_BASE},
    {"backoff-max", required_argument, NULL, OPT_BACKOFF_MAX},
    {"idempotency-key", required_argument, NULL, OPT_IDEMPOTENCY_KEY},
    {"idempotent", no_argument, NULL, OPT_IDEMPOTENT},
    {"request", required_argument, NULL, 'X'},
    {"header", required_argument, NULL, 'H'},
    {"data", required_argument, NULL, 'd'},
    {"cacert", required_argument, NULL, OPT_CACERT},
    {"http1.1", no_argument, NULL, OPT_HTTP11},
    {"http2", no_argument, NULL, OPT_HTTP2},
    {"deadline-header", required_argument, NULL, OPT_DEADLINE_HEADER},
    {"grpc-timeout", no_argument, NULL, OPT_GRPC_TIMEOUT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"done", required_argument, NULL, OPT_DONE},
    {"done-event", required_argument, NULL, OPT_DONE_EVENT},
    {"no-done", no_argument, NULL, OPT_NO_DONE},
    {"skip-event", required_argument, NULL, OPT_SKIP_EVENT},
    {"max-items", required_argument, NULL, OPT_MAX_ITEMS},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"max-event-bytes", required_argument, NULL, OPT_MAX_EVENT_BYTES},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"report", required_argument, NULL, OPT_REPORT},
    {"ledger", required_argument, NULL, OPT_LEDGER},
    {"unresolved", no_argument, NULL, OPT_UNRESOLVED},
    {"reconcile", required_argument, NULL, OPT_RECONCILE},
    {"write-out", required_argument, NULL, 'w'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

struct config {
    sg_op_options policy;
    sg_curl_options copts;
    struct curl_slist *headers;
    const char *method;
    char *body;
    size_t body_len;
    long http_version;
    const char *report;
    const char *write_out;
    const char *ledger_dir;
    sg_ledger_binding binding; /* --ledger: the policy observer's user_data */
    const char *idem_key;
    bool http2;         /* --http2: streamguard's own HTTP/2 transport */
    bool http11;        /* --http1.1: libcurl, HTTP/1.1 */
    int64_t connect_ns; /* --connect-timeout, 0 when not given */
    int64_t budget_ns;  /* --budget, 0 when not given */
    const char *reconcile;
    bool unresolved;
    const char *url;
    int64_t backoff_base;
    int64_t backoff_max;
    bool no_done;
    bool done_set;
    const char *skip[17]; /* NULL-terminated */
    size_t nskip;
    struct run run;
};

/* Applies one option; returns 0 or an exit code. */
static int apply(struct config *c, int opt, const char *arg) {
    int64_t d = 0;
    uint64_t n = 0;
    int rv = 0;
    switch (opt) {
    case OPT_BUDGET:
    case OPT_FIRST_ITEM:
    case OPT_IDLE:
    case OPT_STREAM_TOTAL:
    case OPT_CONNECT_TIMEOUT:
    case OPT_ATTEMPT_TIMEOUT:
    case OPT_BACKOFF_BASE:
    case OPT_BACKOFF_MAX:
        if (parse_duration(arg, &d) != 0) {
            return usage_error("invalid duration '%s'", arg);
        }
        break;
    case OPT_FLOOR:
        if (strcmp(arg, "0") != 0 && parse_duration(arg, &d) != 0) {
            return usage_error("invalid duration '%s'", arg);
        }
        break;
    default:
        break;
    }
    switch (opt) {
    case OPT_BUDGET:
        c->budget_ns = d;
        rv = sg_op_options_set_budget(&c->policy, d);
        break;
    case OPT_FIRST_ITEM:
        rv = sg_op_options_set_first_item_timeout(&c->policy, d);
        break;
    case OPT_IDLE:
        rv = sg_op_options_set_idle_timeout(&c->policy, d);
        break;
    case OPT_STREAM_TOTAL:
        rv = sg_op_options_set_stream_timeout(&c->policy, d);
        break;
    case OPT_CONNECT_TIMEOUT:
        c->connect_ns = d;
        rv = sg_op_options_set_connect_timeout(&c->policy, d);
        break;
    case OPT_ATTEMPT_TIMEOUT:
        rv = sg_op_options_set_attempt_timeout(&c->policy, d);
        break;
    case OPT_FLOOR:
        rv = sg_op_options_set_floor(&c->policy, d);
        break;
    case OPT_BACKOFF_BASE:
        c->backoff_base = d;
        break;
    case OPT_BACKOFF_MAX:
        c->backoff_max = d;
        break;
    case OPT_ATTEMPTS:
        if (parse_count(arg, SG_OP_MAX_ATTEMPTS, &n) != 0 || n == 0) {
            return usage_error("--attempts takes a number from 1 to 16, not '%s'", arg);
        }
        rv = sg_op_options_set_max_attempts(&c->policy, (uint32_t)n);
        break;
    case OPT_IDEMPOTENCY_KEY:
        c->idem_key = arg;
        rv = sg_op_options_set_idempotency_key(&c->policy, arg);
        if (rv != 0) {
            return usage_error("invalid idempotency key '%s' (printable ASCII, at most "
                               "127 characters)",
                               arg);
        }
        break;
    case OPT_IDEMPOTENT:
        rv = sg_op_options_set_idempotent(&c->policy, true);
        break;
    case 'X':
        c->method = arg;
        break;
    case 'H': {
        if (strchr(arg, ':') == NULL || strpbrk(arg, "\r\n") != NULL) {
            return usage_error("invalid header '%s' (expected 'Name: value')", arg);
        }
        struct curl_slist *l = curl_slist_append(c->headers, arg);
        if (l == NULL) {
            return EXIT_INTERNAL;
        }
        c->headers = l;
        break;
    }
    case 'd':
        free(c->body);
        if (arg[0] == '@') {
            c->body = read_file(arg + 1, &c->body_len);
            if (c->body == NULL) {
                fprintf(stderr, "%s: cannot read '%s': %s\n", prog, arg + 1,
                        strerror(errno));
                return EXIT_USAGE;
            }
        } else {
            c->body_len = strlen(arg);
            c->body = malloc(c->body_len + 1);
            if (c->body == NULL) {
                return EXIT_INTERNAL;
            }
            memcpy(c->body, arg, c->body_len + 1);
        }
        break;
    case OPT_CACERT:
        c->copts.cafile = arg;
        break;
    case OPT_HTTP11:
        c->http_version = CURL_HTTP_VERSION_1_1;
        c->http11 = true;
        break;
    case OPT_HTTP2:
        c->http_version = CURL_HTTP_VERSION_2_0;
        c->http2 = true;
        break;
    case OPT_DEADLINE_HEADER:
        rv = sg_op_options_set_deadline_header(&c->policy, arg);
        if (rv != 0) {
            return usage_error("invalid header name '%s'", arg);
        }
        c->copts.deadline_header = true;
        break;
    case OPT_GRPC_TIMEOUT:
        c->copts.grpc_timeout = true;
        break;
    case OPT_FORMAT:
        if (strcmp(arg, "sse") == 0) {
            c->copts.framing.format = SG_FORMAT_SSE;
        } else if (strcmp(arg, "ndjson") == 0) {
            c->copts.framing.format = SG_FORMAT_NDJSON;
        } else {
            return usage_error("--format takes sse or ndjson, not '%s'", arg);
        }
        break;
    case OPT_DONE:
        if (*arg == '\0') {
            return usage_error("--done needs a non-empty sentinel%s", "");
        }
        c->copts.framing.terminal_data = arg;
        c->done_set = true;
        break;
    case OPT_DONE_EVENT:
        if (*arg == '\0') {
            return usage_error("--done-event needs a non-empty event type%s", "");
        }
        c->copts.framing.terminal_type = arg;
        break;
    case OPT_NO_DONE:
        c->no_done = true;
        break;
    case OPT_SKIP_EVENT:
        if (*arg == '\0' || c->nskip == 16) {
            return usage_error("--skip-event takes a non-empty type, at most 16 times%s",
                               "");
        }
        c->skip[c->nskip++] = arg;
        c->copts.framing.skip_types = c->skip;
        break;
    case OPT_MAX_ITEMS:
    case OPT_MAX_BYTES:
        if (parse_count(arg, UINT64_MAX, &n) != 0 || n == 0) {
            return usage_error("expected a positive count, not '%s'", arg);
        }
        rv = opt == OPT_MAX_ITEMS ? sg_op_options_set_max_items(&c->policy, n)
                                  : sg_op_options_set_max_bytes(&c->policy, n);
        break;
    case OPT_MAX_EVENT_BYTES:
        if (parse_count(arg, (uint64_t)1 << 30, &n) != 0 || n < 16) {
            return usage_error("--max-event-bytes takes 16 .. 1073741824, not '%s'", arg);
        }
        c->copts.framing.max_line = (size_t)n;
        c->copts.framing.max_event = (size_t)n;
        break;
    case OPT_OUTPUT:
        if (strcmp(arg, "data") == 0) {
            c->run.output = OUT_DATA;
        } else if (strcmp(arg, "jsonl") == 0) {
            c->run.output = OUT_JSONL;
        } else if (strcmp(arg, "none") == 0) {
            c->run.output = OUT_NONE;
        } else {
            return usage_error("--output takes data, jsonl or none, not '%s'", arg);
        }
        break;
    case OPT_REPORT:
        c->report = arg;
        break;
    case OPT_LEDGER:
        c->ledger_dir = arg;
        break;
    case OPT_UNRESOLVED:
        c->unresolved = true;
        break;
    case OPT_RECONCILE:
        c->reconcile = arg;
        break;
    case 'w':
        c->write_out = arg;
        break;
    case 'q':
        c->run.quiet = true;
        break;
    default:
        return EXIT_USAGE;
    }
    if (rv != 0) {
        fprintf(stderr, "%s: %s for option near '%s' (see --help)\n", prog,
                sg_strerror(rv), arg ? arg : "");
        return EXIT_USAGE;
    }
    return 0;
}

/* --ledger DIR for a run: without an idempotency key, the operation is
 * named by a key derived from method, URL and body (recorded, not sent). */
static int open_ledger(struct config *c, sg_ledger **ledger,
                       char derived[SG_LEDGER_KEY_SIZE]) {
    int rv = sg_ledger_open(ledger, c->ledger_dir, NULL);
    if (rv == 0) {
        rv = sg_ledger_key_derive(c->method, c->url, c->body, c->body_len, derived);
    }
    if (rv != 0) {
        fprintf(stderr, "%s: ledger %s: %s\n", prog, c->ledger_dir, sg_strerror(rv));
        sg_ledger_close(*ledger);
        *ledger = NULL;
        return rv;
    }
    /* The ledger is the operation's observer: it records the intent before
     * anything is sent (or refuses the operation), each attempt, the end. */
    c->binding.ledger = *ledger;
    c->binding.fallback_key = derived;
    sg_op_options_set_target(&c->policy, c->url);
    sg_op_options_set_observer(&c->policy, sg_ledger_observer(), &c->binding);
    return 0;
}

/* The message for an operation the ledger refused to start. */
static int ledger_refused(const struct config *c, const char *derived) {
    fprintf(stderr, "%s: refused: %s is unresolved in %s: reconcile it first\n", prog,
            c->idem_key != NULL ? c->idem_key : derived, c->ledger_dir);
    return EXIT_BUDGET;
}

static int print_unresolved(const sg_ledger_entry *e, void *user_data) {
    (void)user_data;
    char line[SG_LEDGER_LINE_MAX];
    if (sg_ledger_format_unresolved_line(e, line, sizeof(line)) >= 0) {
        puts(line);
    }
    return 0;
}

/* --ledger DIR --unresolved | --reconcile KEY: no request is made. */
static int ledger_command(const struct config *c) {
    sg_ledger *l = NULL;
    int rv = sg_ledger_open(&l, c->ledger_dir, NULL);
    if (rv == 0 && c->unresolved) {
        rv = sg_ledger_list_unresolved(l, print_unresolved, NULL);
    }
    if (rv == 0 && c->reconcile != NULL) {
        rv = sg_ledger_reconcile(l, c->reconcile, "sg-stream --reconcile");
    }
    sg_ledger_close(l);
    fflush(stdout);
    if (rv != 0) {
        fprintf(stderr, "%s: ledger %s: %s\n", prog, c->ledger_dir, sg_strerror(rv));
        return rv == SG_ENOTFOUND || rv == SG_EINVAL ? EXIT_USAGE : EXIT_INTERNAL;
    }
    return EXIT_OK;
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
            fputs(buf, f);
            fputc('\n', f);
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

/* The end of a run, whatever the transport: report, -w, diagnostics, and
 * the exit status of the outcome's family. */
static int conclude(const struct config *c, const sg_op *pol, int64_t elapsed,
                    const char *error) {
    sg_outcome o = sg_op_outcome(pol);
    int code = exit_code_for(o);
    if (c->report != NULL && write_report(c, pol) != 0) {
        code = code == EXIT_OK ? EXIT_INTERNAL : code;
    }
    if (c->write_out != NULL) {
        write_out(c->write_out, pol, elapsed);
    }
    if (strcmp(error, sg_outcome_name(o)) == 0) {
        error = ""; /* says nothing the outcome does not */
    }
    if (!c->run.quiet && o != SG_OUTCOME_OK) {
        uint32_t n = sg_op_attempt_count(pol);
        const sg_op_attempt *last = n ? sg_op_attempt_at(pol, n - 1) : NULL;
        fprintf(stderr, "%s: %s in %s after %" PRIu32 " attempt%s (%s)%s%s%s\n", prog,
                sg_outcome_name(o), last ? sg_phase_name(last->phase) : "connect", n,
                n == 1 ? "" : "s", sg_op_reason_name(sg_op_final_reason(pol)),
                last && last->outcome_unknown ? "; outcome unknown: reconcile" : "",
                error[0] ? ": " : "", error);
    }
    return code;
}

#ifdef SG_HAVE_H2
/* --http2: the operation runs as one stream of streamguard's own HTTP/2
 * connection (nghttp2): h2c with prior knowledge for http://, TLS with ALPN
 * h2 for https://.  An expired clock resets only that stream. */

static int h2_on_item(sg_h2_op *op, const sg_item *item, void *user_data) {
    (void)op;
    return print_item(user_data, item);
}

static void h2_on_discard(sg_h2_op *op, uint32_t attempt, sg_outcome outcome,
                          void *user_data) {
    (void)op;
    note_discard(user_data, attempt, outcome);
}

/* Splits an http(s) URL into host, port and path (with its query). */
static int split_url(const char *url, bool *tls, char *host, size_t host_len, int *port,
                     const char **path) {
    const char *p;
    if (strncmp(url, "https://", 8) == 0) {
        *tls = true;
        p = url + 8;
    } else if (strncmp(url, "http://", 7) == 0) {
        *tls = false;
        p = url + 7;
    } else {
        return -1;
    }
    const char *end = p + strcspn(p, "/?#");
    const char *colon = NULL;
    const char *h = p;
    const char *he;
    if (*p == '[') { /* [v6 address] */
        const char *close = memchr(p, ']', (size_t)(end - p));
        if (close == NULL) {
            return -1;
        }
        h = p + 1;
        he = close;
        colon = close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        he = colon != NULL ? colon : end;
    }
    if (he == h || (size_t)(he - h) >= host_len) {
        return -1;
    }
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = '\0';
    *port = *tls ? 443 : 80;
    if (colon != NULL) {
        char *pe;
        long v = strtol(colon + 1, &pe, 10);
        if (pe != end || v < 1 || v > 65535) {
            return -1;
        }
        *port = (int)v;
    }
    *path = *end == '\0' ? "/" : end;
    return (*path)[0] == '/' || (*path)[0] == '?' ? 0 : -1;
}

/* Runs the operation on streamguard's HTTP/2 transport.  With @probe (an
 * https:// URL and no version flag), a server that does not negotiate h2,
 * or any connect failure, returns -1 without a word: libcurl takes over. */
static int run_h2(struct config *c, bool probe) {
    char host[256];
    char errbuf[SG_H2_ERROR_SIZE] = "";
    bool tls = false;
    int port = 0;
    const char *path = NULL;
    if (split_url(c->url, &tls, host, sizeof(host), &port, &path) != 0) {
        return usage_error("--http2 needs an http:// or https:// URL, not '%s'", c->url);
    }
    /* Request headers: "Name: value" -> lowercase name, trimmed value. */
    sg_h2_header hdrs[64];
    char names[64][128];
    size_t nh = 0;
    for (const struct curl_slist *h = c->headers; h != NULL; h = h->next) {
        const char *colon = strchr(h->data, ':');
        size_t nlen = (size_t)(colon - h->data);
        if (nh == 64 || nlen == 0 || nlen >= sizeof(names[0])) {
            return usage_error("header '%s' not usable over HTTP/2", h->data);
        }
        for (size_t k = 0; k < nlen; k++) {
            char ch = h->data[k];
            names[nh][k] = ch >= 'A' && ch <= 'Z' ? (char)(ch - 'A' + 'a') : ch;
        }
        names[nh][nlen] = '\0';
        const char *v = colon + 1;
        while (*v == ' ' || *v == '\t') {
            v++;
        }
        hdrs[nh].name = names[nh];
        hdrs[nh].value = v;
        nh++;
    }
    /* the connection is made before the operation starts: bound it by the
     * connect timeout, else by the budget, else 10 s */
    int64_t connect =
        c->connect_ns ? c->connect_ns : (c->budget_ns ? c->budget_ns : SG_SEC(10));
    if (connect > SG_SEC(10) && c->connect_ns == 0) {
        connect = SG_SEC(10);
    }
    sg_h2_conn_options co = {.host = host,
                             .port = port,
                             .tls = tls,
                             .cafile = c->copts.cafile,
                             .connect_timeout = connect,
                             .errbuf = errbuf};
    int64_t t0 = sg_clock_now(NULL);
    sg_h2_conn *conn = NULL;
    int rv = sg_h2_conn_new(&conn, &co);
    if (rv != 0 && probe) {
        return -1;
    }
    if (rv != 0) {
        fprintf(stderr, "%s: transport_error in connect: %s\n", prog,
                errbuf[0] ? errbuf : sg_strerror(rv));
        return rv == SG_ETIMEDOUT ? EXIT_TIMEOUT : EXIT_TRANSPORT;
    }
    sg_ledger *ledger = NULL;
    char derived[SG_LEDGER_KEY_SIZE];
    if (c->ledger_dir != NULL && open_ledger(c, &ledger, derived) != 0) {
        sg_h2_conn_free(conn);
        return EXIT_INTERNAL;
    }
    sg_h2_request req = {.method = c->method,
                         .path = path,
                         .headers = hdrs,
                         .nheaders = nh,
                         .body = c->body,
                         .body_len = c->body_len,
                         .deadline_header = c->copts.deadline_header,
                         .grpc_timeout = c->copts.grpc_timeout,
                         .framing = c->copts.framing};
    sg_h2_callbacks cbs = {h2_on_item, h2_on_discard, NULL, NULL};
    sg_h2_op *op = NULL;
    int code = EXIT_INTERNAL;
    rv = sg_h2_stream_start(conn, &req, &c->policy, &cbs, &c->run, &op);
    if (rv == 0) {
        rv = sg_h2_conn_run(conn);
    }
    if (rv == 0 && op != NULL) {
        code =
            conclude(c, sg_h2_op_policy(op), sg_clock_now(NULL) - t0, sg_h2_op_error(op));
    } else if (rv == SG_EEXIST && ledger != NULL) {
        code = ledger_refused(c, derived); /* the same operation is unresolved */
    } else {
        fprintf(stderr, "%s: %s\n", prog, sg_strerror(rv));
        code = rv == SG_EINVAL || rv == SG_ERANGE ? EXIT_USAGE : EXIT_INTERNAL;
    }
    sg_h2_op_free(op);
    sg_h2_conn_free(conn);
    sg_ledger_close(ledger);
    return code;
}
#endif

int main(int argc, char **argv) {
    struct config c;
    memset(&c, 0, sizeof(c));
    sg_op_options_init(&c.policy);
    sg_op_options_set_max_attempts(&c.policy, 1);
    c.copts.framing.max_line = DEFAULT_MAX_EVENT;
    c.copts.framing.max_event = DEFAULT_MAX_EVENT;
    c.http_version = CURL_HTTP_VERSION_NONE;

    int opt;
    int code = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":X:H:d:w:qhV", long_opts, NULL)) != -1) {
        if (opt == 'h') {
            usage(stdout);
            code = -1;
            break;
        }
        if (opt == 'V') {
            printf("sg-stream %s (libcurl %s%s)\n", sg_version(),
                   curl_version_info(CURLVERSION_NOW)->version,
#ifdef SG_HAVE_H2
                   "; --http2: nghttp2"
#else
                   ""
#endif
            );
            code = -1;
            break;
        }
        if (opt == '?') {
            code = usage_error("unknown option '%s'", argv[optind - 1]);
            break;
        }
        if (opt == ':') {
            code = usage_error("option '%s' needs a value", argv[optind - 1]);
            break;
        }
        code = apply(&c, opt, optarg);
        if (code != 0) {
            break;
        }
    }
    if (code == 0 && (c.unresolved || c.reconcile != NULL)) {
        if (c.ledger_dir == NULL) {
            code = usage_error("--unresolved and --reconcile need --ledger DIR%s", "");
        } else if (optind != argc) {
            code = usage_error("unexpected argument '%s'", argv[optind]);
        } else {
            code = ledger_command(&c);
            curl_slist_free_all(c.headers);
            free(c.body);
            return code;
        }
    }
    if (code == 0) {
        if (optind + 1 != argc) {
            code =
                usage_error(optind == argc ? "missing URL%s" : "unexpected argument '%s'",
                            optind == argc ? "" : argv[optind + 1]);
        } else {
            c.url = argv[optind];
        }
    }
    if (code == 0 && (c.backoff_base || c.backoff_max)) {
        int64_t base = c.backoff_base ? c.backoff_base : SG_MS(100);
        int64_t cap =
            c.backoff_max ? c.backoff_max : (base > SG_SEC(10) ? base : SG_SEC(10));
        if (sg_op_options_set_backoff(&c.policy, base, cap) != 0) {
            code = usage_error("--backoff-max must not be below --backoff-base%s", "");
        }
    }
    if (code == 0) {
        const char *method = c.method ? c.method : (c.body ? "POST" : "GET");
        if (sg_op_options_set_method(&c.policy, method) != 0) {
            code = usage_error("invalid method '%s'", method);
        } else {
            c.method = method;
        }
    }
    if (code == 0 && c.copts.framing.format == SG_FORMAT_SSE && !c.no_done &&
        !c.done_set && c.copts.framing.terminal_type == NULL) {
        c.copts.framing.terminal_data = "[DONE]";
    }
    if (code == 0 && c.no_done) {
        c.copts.framing.terminal_data = NULL;
        c.copts.framing.terminal_type = NULL;
    }
    if (code != 0) {
        curl_slist_free_all(c.headers);
        free(c.body);
        return code < 0 ? EXIT_OK : code;
    }

#ifdef SG_HAVE_H2
    /* --http2, or https:// without a version flag and a server that
     * negotiates h2: streamguard's own HTTP/2 transport. */
    bool probe = !c.http2 && !c.http11 && strncmp(c.url, "https://", 8) == 0;
    if (c.http2 || probe) {
        code = run_h2(&c, probe);
        if (code >= 0) {
            curl_slist_free_all(c.headers);
            free(c.body);
            return code;
        }
        code = 0;
    }
#endif
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "%s: libcurl initialisation failed\n", prog);
        return EXIT_INTERNAL;
    }
    CURL *easy = curl_easy_init();
    if (easy == NULL) {
        fprintf(stderr, "%s: libcurl initialisation failed\n", prog);
        return EXIT_INTERNAL;
    }
    curl_easy_setopt(easy, CURLOPT_URL, c.url);
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "sg-stream/" SG_VERSION_STRING);
    if (c.body != NULL) {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, c.body);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c.body_len);
    }
    if (strcmp(c.method, "GET") != 0 && strcmp(c.method, "POST") != 0) {
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, c.method);
    } else if (strcmp(c.method, "GET") == 0 && c.body != NULL) {
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, "GET");
    }
    if (c.http_version == CURL_HTTP_VERSION_2_0 && strncmp(c.url, "http://", 7) == 0) {
        c.http_version = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    }
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, c.http_version);
    c.copts.headers = c.headers;

    sg_ledger *ledger = NULL;
    char derived[SG_LEDGER_KEY_SIZE];
    if (c.ledger_dir != NULL && open_ledger(&c, &ledger, derived) != 0) {
        curl_easy_cleanup(easy);
        curl_slist_free_all(c.headers);
        free(c.body);
        curl_global_cleanup();
        return EXIT_INTERNAL;
    }

    sg_curl_callbacks cbs = {on_item, on_discard, NULL, NULL};
    sg_curl_op *op = NULL;
    int rv = sg_curl_op_new(&op, easy, &c.policy, &c.copts, &cbs, &c.run);
    if (rv == 0) {
        int64_t t0 = sg_clock_now(NULL);
        rv = sg_curl_perform(op);
        int64_t elapsed = sg_clock_now(NULL) - t0;
        if (rv == 0) {
            code = conclude(&c, sg_curl_op_policy(op), elapsed, sg_curl_op_error(op));
        }
    }
    if (rv == SG_EEXIST && ledger != NULL) {
        code = ledger_refused(&c, derived); /* the same operation is unresolved */
    } else if (rv != 0) {
        fprintf(stderr, "%s: %s%s%s\n", prog, sg_strerror(rv), op ? ": " : "",
                op ? sg_curl_op_error(op) : "");
        code = rv == SG_ERANGE || rv == SG_EINVAL ? EXIT_USAGE : EXIT_INTERNAL;
    }
    sg_curl_op_free(op);
    sg_ledger_close(ledger);
    curl_easy_cleanup(easy);
    curl_slist_free_all(c.headers);
    free(c.body);
    curl_global_cleanup();
    return code;
}
