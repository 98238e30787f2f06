/*
 * sg_stream.h - what the files of sg-stream share, and nothing else.
 *
 * sg-stream is one program split by concern: options.c turns argv into a
 * struct config (with usage.c for the help text and the usage errors and
 * ../common/values.c, shared with sg-proxy, for durations, counts and @FILE
 * bodies), run_curl.c and run_h2.c run the operation over libcurl or
 * streamguard's own HTTP/2 transport, each in its own loop, writeout.c
 * writes what a run prints (items, -w, the report, the closing diagnostic)
 * through output.c (stdout, batched and never blocking), signals.c turns
 * Ctrl-C into a cancel and holds the loops' wait, and ledger_cmd.c holds
 * everything about --ledger.  main.c only parses, dispatches and returns
 * the exit status.  Like the whole program, this header uses the public
 * streamguard API only, and src/sgx/, the helpers the library shares with
 * its programs (JSON strings, HTTP/2 fields, the ledger's listing line).
 */
#ifndef SG_STREAM_H
#define SG_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <streamguard/curl.h>
#include <streamguard/h2.h>
#include <streamguard/ledger.h>

#include "../common/values.h"

/* The OpenTelemetry exporter and trace (<streamguard/otel.h>,
 * <streamguard/otel_trace.h>; otel.c), opaque here: a build without
 * them has neither. */
typedef struct sg_otel sg_otel;
typedef struct sg_otel_trace sg_otel_trace;
#include "sgx/fields.h"
#include "sgx/json.h"
#include "sgx/ledger_line.h"

/* The exit status says which family of outcomes ended the run. */
enum exit_code {
    EXIT_OK = 0,
    EXIT_INTERNAL = 1,  /* could not run at all (setup failure) */
    EXIT_USAGE = 2,     /* bad arguments (SG_TOOLS_EXIT_USAGE, values.h) */
    EXIT_TIMEOUT = 3,   /* connect/first-item/idle/stream/attempt timeout */
    EXIT_BUDGET = 4,    /* budget_exhausted or refused */
    EXIT_STOPPED = 5,   /* cancelled or cap_exceeded */
    EXIT_TRUNCATED = 6, /* truncated */
    EXIT_HTTP = 7,      /* http_error or provider_error */
    EXIT_TRANSPORT = 8, /* transport_error or protocol_error */
};

enum output { OUT_DATA, OUT_JSONL, OUT_NONE };

/* The most bytes of items held for a stdout that does not take them (a
 * pipe whose reader is slow or stopped), and then the one item that passes
 * it: an item past it when more is still waiting cancels the run. */
#define OUT_MAX (8u << 20)
/* A batch this large goes out at once, without waiting for the step's end
 * (one step of libcurl may read many times). */
#define OUT_BATCH (256u << 10)

/* stdout, batched: items wait here until the run's next wait. */
struct out {
    char *buf;
    size_t len, cap;
    size_t max;    /* OUT_MAX */
    bool nonblock; /* stdout is a pipe or socket, made non-blocking */
    int flags;     /* its file status flags before, restored by out_free */
    bool broken;   /* EPIPE (or another write error): nobody reads */
    bool overflow; /* the reader fell max bytes behind */
    bool lost;     /* bytes were dropped at the end (output_end) */
};

/* The item callbacks' user_data, whatever the transport. */
/* --fallback URLs at most: with the URL itself, SG_OP_MAX_ENDPOINTS. */
#define MAX_FALLBACKS (SG_OP_MAX_ENDPOINTS - 1)

/* Event types up to this long keep their JSON literal (struct run). */
#define EVENT_CACHE 32
/* The jsonl line's head for a cached type: `{"event":` (9 bytes), the
 * type's literal, `,"data":` (8). */
#define HEAD_MAX (9 + SGX_JSON_ESCAPE_MAX(EVENT_CACHE) + 8)

struct run {
    enum output output;
    bool quiet;
    struct out out;
    bool interrupted; /* a signal or stdout ended the operation */
    /* --output jsonl: the last event type and the line's head for it,
     * `{"event":` its JSON literal `,"data":`, reused while the type stays
     * the same (it nearly always does); the escaper, asked once */
    char event_raw[EVENT_CACHE];
    size_t event_raw_len;
    char head[HEAD_MAX];
    size_t head_len;
    sgx_json_escape_fn escape;
};

struct config {
    sg_op_options *policy;    /* the run's (owned) */
    sg_op_observer *observer; /* --ledger: the run's, over the ledger (owned) */
    sg_stream_config framing; /* built by config_parse from the flags below */
    sg_format format;         /* --format (format_set) */
    const char *done;         /* --done (done_set) */
    const char *done_event;   /* --done-event (done_event_set) */
    size_t max_event;         /* --max-event-bytes, or DEFAULT_MAX_EVENT */
    const char *cafile;       /* --cacert */
    bool deadline_header;     /* --deadline-header */
    bool grpc_timeout;        /* --grpc-timeout */
    struct curl_slist *headers;
    const char *method;
    char *body;
    size_t body_len;
    long http_version;
    const char *report;
    const char *write_out;
    const char *ledger_dir;           /* --ledger: a directory or a postgresql:// URI */
    const char *otlp;                 /* --otlp: the OTLP/HTTP traces URL */
    sg_otel *otel;                    /* tracing: the exporter, while the run lasts */
    sg_otel_trace *trace;             /* and the run's operation's spans */
    sg_ledger *ledger;                /* --ledger, for a run: open while it runs */
    char derived[SG_LEDGER_KEY_SIZE]; /* the key named without --idempotency-key */
    const char *idem_key;
    bool http2;            /* --http2: streamguard's own HTTP/2 transport */
    bool http11;           /* --http1.1: libcurl, HTTP/1.1 */
    int64_t connect_ns;    /* --connect-timeout, 0 when not given */
    int64_t budget_ns;     /* --budget, 0 when not given */
    int64_t floor_ns;      /* --floor, 0 when not given */
    int64_t deadline;      /* the budget's end, fixed when the command starts */
    int64_t probe_ns;      /* what a failed HTTP/2 probe spent (0: none) ... */
    char probe_error[160]; /* ... and why it failed */
    const char *reconcile;
    bool unresolved;
    bool ledger_init;    /* --ledger-init: apply the ledger's schema */
    bool ledger_warned;  /* a ledger record of this run failed: said once */
    bool ledger_settled; /* the run's last records were waited for ... */
    int ledger_sync_rv;  /* ... and this is what the wait answered */
    const char *url;
    int64_t backoff_base;
    int64_t backoff_max;
    bool no_done;
    bool done_set;
    bool done_event_set;
    bool format_set;
    const char *profile;  /* --profile: a built-in provider profile */
    const char *skip[17]; /* NULL-terminated */
    size_t nskip;
    const char *fallback[MAX_FALLBACKS]; /* --fallback, in order */
    int nfallback;
    struct hedge_after hedge; /* --hedge-after: fixed 0 when not given */
    uint32_t max_hedges;      /* --max-hedges, 0 when not given */
    bool attempts_set;        /* --attempts was given */
    struct price price; /* --price-in, --price-out, --price-cached: every endpoint's */
    /* --aws-sigv4: libcurl's CURLOPT_AWS_SIGV4 string, and the credentials
     * from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (the environment's
     * strings: never copied, printed or reported) */
    const char *aws_sigv4;
    const char *aws_key_id;
    const char *aws_secret;
    struct run run;
};

/* usage.c */
void usage(FILE *f);
void print_version(void);

/* options.c: 0 to go on, < 0 when done without error (--help, --version),
 * else the exit status.  Call config_free() after it, whatever it returns. */
int config_parse(struct config *c, int argc, char **argv);
bool config_is_ledger_command(const struct config *c);
void config_free(struct config *c);

/* otel.c: tracing for a run - with --otlp, or the OTEL_EXPORTER_OTLP_*
 * endpoint variables - the exporter made and the trace added to the
 * policy's observers (a no-op otherwise).  0, or an exit status having
 * said why.  otel_stop, after the operation is freed: its spans sent
 * (within the export timeout) and both freed. */
int otel_start(struct config *c);
void otel_stop(struct config *c);

/* writeout.c */
int print_item(struct run *r, const sg_item *item);
void note_discard(const struct run *r, uint32_t attempt, sg_outcome outcome);
/* Writes the items still waiting (until the budget's end at most) and puts
 * stdout back as it was; before conclude(). */
void output_end(struct config *c);
/* @said (@said_len bytes, NULL for none): what the server said with the
 * error response that ended the last attempt, quoted after an http_error. */
int conclude(const struct config *c, const sg_op *pol, const char *error,
             const char *said, size_t said_len);
int run_failed(const struct config *c, int rv, const char *detail);

/* output.c */
void out_init(struct out *o);
void out_free(struct out *o);
/* Room for @n more bytes at the end of the buffer (commit with o->len +=),
 * or NULL when stdout is broken or too far behind.  Inline while the room
 * is there already (per item); out_grow() else. */
char *out_grow(struct out *o, size_t n);
static inline char *out_reserve(struct out *o, size_t n) {
    if (!o->broken && !o->overflow && o->len <= o->max && n <= o->cap - o->len) {
        return o->buf + o->len;
    }
    return out_grow(o, n);
}
/* Writes what stdout takes now, never blocking on a pipe or socket. */
void out_flush(struct out *o);
/* Bytes wait for a non-blocking stdout. */
bool out_waiting(const struct out *o);
/* Writes everything, waiting until @deadline at most, and not past a
 * signal: 0, or -1. */
int out_drain(struct out *o, int64_t deadline);

/* signals.c */
int signals_install(void);
/* The first SIGINT/SIGTERM received, 0 when none. */
int signals_first(void);
/* true once when the operation must be cancelled: a signal arrived, or
 * stdout broke or fell too far behind. */
bool run_interrupted(struct run *r);
/* Waits for @fd to be readable, a signal, stdout to take bytes, or
 * @until (SG_TIME_NEVER: no limit).  true when @fd is readable. */
bool run_wait(struct run *r, int fd, int64_t until);
/* Waits for stdout to take bytes, a signal, or @until. */
void wait_stdout(int64_t until);

/* ledger_cmd.c */
int ledger_command(const struct config *c);
int ledger_open_for_run(struct config *c);
void ledger_settle(struct config *c);
/* What a failed ledger record's code means to the run, in words. */
const char *ledger_failure(int rv);
void ledger_close_for_run(struct config *c);
int ledger_refused(const struct config *c);

/* run_h2.c, run_curl.c: the exit status; run_h2() with @probe returns -1
 * when libcurl should take over. */
int run_h2(struct config *c, bool probe);
int run_curl(struct config *c);

#endif
