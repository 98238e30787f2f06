/*
 * The attempt lifecycle every transport shares: one state machine for one
 * guarded operation, from its intent to its resolution.
 *
 * It owns what is the same whatever carries the bytes: the policy (sg_op:
 * leases, retry decisions, the observer), the body (sg_stream: framing and
 * the attempt's three clocks), the request headers stamped on every
 * attempt (Idempotency-Key, the deadline header, grpc-timeout), what the
 * response said so far (status, Retry-After, sent or not), and the hand-off
 * of a finished attempt to the policy with its callbacks.
 *
 * A transport keeps only its I/O and says so through sg__transport:
 * launch one attempt's request, abort it, and hear of discards, attempt
 * records and the end.  It reports what it sees (status, header end, body
 * bytes, the instant a request was written) through the sg__lc_* calls
 * below, decides an attempt with sg__lc_decide when its stream ends, and
 * hands the decided attempt to the policy with sg__lc_settle from a place
 * where user callbacks may free things (never inside a library callback).
 *
 * Nothing here waits, arms a timer or reads the clock, with one exception:
 * the wall clock (time(2)) turns a Retry-After HTTP-date into a delay.
 */
#ifndef SG_TRANSPORT_LIFECYCLE_H
#define SG_TRANSPORT_LIFECYCLE_H

#include <streamguard/policy.h>
#include <streamguard/stream.h>

#include "framing/body.h"
#include "policy/internal.h"

/** The bytes hook's "not now": sg__lc_feed took nothing, and returns it. */
#define SG__LC_PAUSE 2

/** Room for an operation's message (libcurl's CURL_ERROR_SIZE fits). */
#define SG__LC_ERROR_SIZE 256
/** Room for a grpc-timeout value, NUL included: sg_grpc_timeout_format
 *  writes at most 8 digits and a unit (less than SG_DEADLINE_VALUE_MAX,
 *  which an X-Deadline-Ms value needs). */
#define SG__LC_GRPC_VALUE_MAX 16
/** Headers stamped on every attempt: idempotency key, deadline, grpc. */
#define SG__LC_STAMP_MAX 3
/** And after them those the observers add (on_attempt_headers, at most
 *  SG_OP_HEADERS_MAX), whose names are lowercase already. */
#define SG__LC_STAMP_ALL (SG__LC_STAMP_MAX + SG_OP_HEADERS_MAX)

/* One state enum for every transport. */
enum sg__lc_state {
    SG__LC_NEW = 0,  /* created, not started */
    SG__LC_RUNNING,  /* an attempt's request is in flight */
    SG__LC_DRAINING, /* terminal seen: decided ok, waiting for the body end;
                      * or an error response's head: decided http_error,
                      * its body read (error_body) */
    SG__LC_ENDING,   /* attempt decided; sg__lc_settle hands it over */
    SG__LC_SLEEPING, /* backoff before the next attempt */
    SG__LC_DONE,
    SG__LC_IDLE,   /* its attempt ended; the operation goes on in another
                    * lifecycle (hedging: the attempts beside it) */
    SG__LC_INTENT, /* started; the observer records the intent off the
                    * loop: nothing is sent until it lands */
};

/* How a final header block classifies the response. */
enum sg__lc_headers {
    SG__LC_INTERIM = 0, /* 1xx: the final block follows */
    SG__LC_STREAM,      /* 2xx: the body is parsed into items */
    SG__LC_OTHER,       /* 3xx: no stream; the transport may follow it */
    SG__LC_ERROR,       /* 4xx, 5xx, or no status: the answer is in */
};

/* One request header to add to an attempt; both strings NUL-terminated
 * and valid until the next attempt begins.  Names in canonical case
 * (HTTP/2 lowercases them). */
typedef struct sg__lc_header {
    const char *name;
    const char *value;
} sg__lc_header;

typedef struct sg__lc_stamp {
    sg__lc_header h[SG__LC_STAMP_ALL];
    size_t n;
    size_t n_lib; /* the first n_lib are the library's (SG__LC_STAMP_MAX) */
} sg__lc_stamp;

typedef struct sg__lifecycle sg__lifecycle;

/* Endpoint health's key of an endpoint, kept by a transport for the
 * operations it makes from one request (transport.key_cache). */
typedef struct sg__lc_key {
    uint64_t gen; /* the generation of the health secret it was made under */
    uint8_t key[16];
    bool set;
} sg__lc_key;

/* What a lifecycle holds only once it has it: allocated at its first use
 * (sg__lc_more), kept until the lifecycle is released.  An attempt that
 * runs without an error and whose response says nothing of when to come
 * back never needs it. */
typedef struct sg__lc_more {
    char errbuf[SG__LC_ERROR_SIZE]; /* the transport's message */
    char retry_after[64];           /* raw Retry-After of the final response */
    size_t retry_after_len;
    char retry_after_ms[32]; /* raw retry-after-ms (OpenAI, Azure) of it */
    size_t retry_after_ms_len;
    sg_op_ratelimit ratelimit; /* the final response's rate-limit headers */
} sg__lc_more;

/* What a transport provides.  Every function receives the lifecycle it
 * embeds; container-of gives the transport's own operation. */
typedef struct sg__transport {
    /* Send the attempt's request with @stamp's headers added to the
     * caller's.  Returns 0 when it is in flight; otherwise a negative code
     * with *@fail the outcome (connect_timeout or transport_error) and the
     * message set with sg__lc_error: the request was never sent.  May move *@now
     * forward (a blocking reconnect took real time). */
    int (*launch)(sg__lifecycle *lc, const sg_op_plan *plan, const sg__lc_stamp *stamp,
                  int64_t *now, sg_outcome *fail);
    /* Drop the running attempt's request at once (an expired clock, a
     * cancel, the drain ran out): no more bytes of it reach the lifecycle. */
    void (*abort)(sg__lifecycle *lc);
    /* Optional: bring the phase up to date before an attempt is judged - a
     * clock's expiry, a cancel, a lost hedge (the curl transport learns
     * only on demand that the request was written). */
    void (*sync)(sg__lifecycle *lc, int64_t now);
    /* The user's callbacks, with the transport's operation type. */
    void (*discard)(sg__lifecycle *lc, uint32_t attempt, sg_outcome outcome);
    void (*attempt_ended)(sg__lifecycle *lc, const sg_op_attempt *rec);
    /* The operation ended: leave the driver's structures, then call the
     * user's on_done (which may free the operation). */
    void (*finished)(sg__lifecycle *lc);
    /* The transport's clock, read again after work that may have blocked
     * (an observer's durable intent: an fsync), so the first lease and its
     * deadline header are measured from when the request really goes. */
    int64_t (*now)(sg__lifecycle *lc);
    /* Optional (hedging): @lc's next deadline moved while another
     * lifecycle was being run; re-key it in the driver. */
    void (*reschedule)(sg__lifecycle *lc);
    /* Optional (hedging): a new hedge slot of @root - the transport's
     * attempt runner with its lifecycle made a slot (sg__lc_make_slot)
     * and in the driver; NULL when out of memory.  Without it, no hedge. */
    sg__lifecycle *(*new_slot)(sg__lifecycle *root);
    /* Optional (an observer that records intents off the loop): watch
     * @fd for readability and call sg__lc_intent_ready when it is - 0, or
     * a negative code when it cannot; unwatch stops it.  Without them an
     * intent is recorded inside sg__lc_start, waiting. */
    int (*watch)(sg__lifecycle *lc, int fd);
    void (*unwatch)(sg__lifecycle *lc, int fd);
    /* Optional: a streaming body's bytes as received, before they are cut
     * into items (the user's on_bytes).  SG__LC_PAUSE: not taken (the
     * transport gives them again later); any other non-zero cancels. */
    int (*bytes)(sg__lifecycle *lc, const void *data, size_t len);
    /* Optional (endpoint health): the URL of the operation's endpoint @i
     * and the value of the credential header its request carries
     * (sg__credential_rank picks which; NULL, 0: none), both valid during
     * the call.  Without it, or a NULL URL, the policy names the endpoint
     * by its own URL. */
    void (*identity)(sg__lifecycle *lc, uint32_t i, const char **url, const char **cred,
                     size_t *cred_len);
    /* Optional (a provider profile per endpoint): the framing of the
     * operation's endpoint @i, valid as long as the operation, or NULL
     * for the operation's own (the one sg__lc_init took).  Asked as each
     * attempt is set up: its stream is made again when the answer differs
     * from the last attempt's.  Without it, every attempt has the
     * operation's. */
    const sg_stream_config *(*framing)(sg__lifecycle *lc, uint32_t i);
    /* Optional (endpoint health): where the transport keeps the key of
     * endpoint @i for every operation whose identity callback gives the
     * same URL and credential (the HTTP/2 transport: one per request copy),
     * or NULL.  The key is an HMAC: made once, not once per operation. */
    sg__lc_key *(*key_cache)(sg__lifecycle *lc, uint32_t i);
} sg__transport;

struct sg__lifecycle {
    /* (its fields grouped by size: one lives per open stream) */
    const sg__transport *tp;
    /* The operation's options and policy, owned by its own lifecycle; a
     * hedge slot has neither (NULL): it runs attempts on its primary's.
     * The options are the transport's to set until the start, which
     * gives the policy a copy of its own and frees these (NULL after):
     * read them with sg__lc_options. */
    sg_op_options *popts;
    sg_op *policy;
    /* The policy this lifecycle's attempts belong to: its own, or - for a
     * hedge slot - its primary's, shared by every attempt in flight. */
    sg_op *pol;
    /* Hedging: the lifecycle of the operation (NULL: this one is); a hedge
     * slot runs one attempt at a time beside it and never a retry. */
    struct sg__lifecycle *primary;
    /* The operation's own lifecycle (primary NULL): its hedge slots, made
     * by the transport as needed and freed with it; the array itself
     * (SG_OP_MAX_HEDGES) allocated at the first hedge, NULL before: read
     * it with sg__lc_slot */
    struct sg__lifecycle **slots;
    /* the body: framing + the attempt's guard; its buffers grow as used
     * (sg__stream_init_mem).  Its result_ is the decided attempt's (ENDING:
     * sg__stream_end wrote it there; the next attempt's begin keeps it) */
    sg__stream stream;
    /* the operation's framing (sg__lc_init's, the transport's to keep) and
     * the one the stream was made with (an endpoint's: tp->framing); the
     * stream is made again with the consumer it holds */
    const sg_stream_config *framing_op, *framing_now;
    int64_t drain_ns; /* after the terminal, how long the body may go on */

    /* the running attempt */
    int64_t attempt_end; /* the end of the attempt's lease */
    int64_t drain_until; /* DRAINING: drop the request at this instant */
    int64_t wake_at;     /* SLEEPING: begin the next attempt at this instant */
    sg__lc_more *more;   /* NULL until needed: the message, Retry-After... */
    /* the running attempt's error response body (SG_ERROR_BODY_MAX,
     * allocated at its first byte; freed when an attempt launches) */
    char *ebody; /* ebody_len bytes */
    /* what the observers add to the running attempt's request: allocated
     * at the first attempt of an operation whose observers add headers
     * (sg__op_wants_headers), NULL otherwise */
    sg_op_headers *obs_headers;
    /* the Date of the final response (Unix seconds, 0: none or no
     * HTTP-date), the origin of its Retry-After HTTP-date and rate-limit
     * instants: read as it arrives */
    int64_t date_s;
    uint32_t attempt;
    int state;
    int intent_fd;      /* INTENT: the fd watched for the observer's answer */
    int http_status;    /* last status seen, 0 none, -1 malformed */
    int feed_error;     /* framing error that stopped the body, 0 none */
    uint32_t ebody_len; /* (at most SG_ERROR_BODY_MAX) */
    /* (bit-fields: a lifecycle lives per open stream) */
    bool lost : 1; /* another attempt delivered first: abort, settle (hedge_lost) */
    bool breaker_probe : 1;  /* the attempt is a half-open breaker's probe, no item yet */
    bool hedging : 1;        /* the policy hedges (sg_op_options_set_hedging) */
    bool won : 1;            /* an attempt of this line delivered the first item */
    bool hedge_off : 1;      /* a hedge was refused: none more in this line */
    bool async_intent : 1;   /* the transport can watch it (tp->watch works) */
    bool cancel : 1;         /* cancelled: due at once */
    bool sent : 1;           /* the request may have reached the server */
    bool headers_done : 1;   /* a final (non-1xx) header block ended */
    bool body_is_stream : 1; /* 2xx: the body is parsed into items */
    bool error_body : 1;     /* DRAINING an error response: its body is kept */
    bool not_processed : 1;  /* the server did no processing: never sent */
    bool deadline_header : 1; /* stamp the policy's deadline header */
    bool grpc_timeout : 1;    /* stamp grpc-timeout */
    char dl_value[SG_DEADLINE_VALUE_MAX];
    char grpc_value[SG__LC_GRPC_VALUE_MAX];
};

/* Hedge slot @i (< SG_OP_MAX_HEDGES) of the operation @lc, or NULL. */
static inline sg__lifecycle *sg__lc_slot(const sg__lifecycle *lc, size_t i) {
    return lc->slots != NULL ? lc->slots[i] : NULL;
}
/* Slot @i is gone (the transport freed it). */
static inline void sg__lc_slot_clear(sg__lifecycle *lc, size_t i) {
    if (lc->slots != NULL) {
        lc->slots[i] = NULL;
    }
}

/* @lc's lazily allocated part, allocated now if it was not (zeroed), or
 * NULL when out of memory. */
sg__lc_more *sg__lc_more_get(sg__lifecycle *lc);
/* The transport's message about the last attempt ("" when none). */
static inline const char *sg__lc_errmsg(const sg__lifecycle *lc) {
    return lc->more != NULL ? lc->more->errbuf : "";
}
static inline bool sg__lc_has_error(const sg__lifecycle *lc) {
    return lc->more != NULL && lc->more->errbuf[0] != '\0';
}
static inline void sg__lc_error_clear(sg__lifecycle *lc) {
    if (lc->more != NULL) {
        lc->more->errbuf[0] = '\0';
    }
}

/* Sets @lc up: validates @framing (NULL: defaults; kept, not copied: it
 * must outlive @lc) and, for an operation
 * (@primary NULL), copies @popts (NULL: defaults) and makes its policy;
 * the body's buffers grow as used.  With @primary, @lc is a hedge slot of
 * it: its attempts belong to @primary's policy (@popts is not read), and
 * the lifecycle leases and launches them as hedges fall due (sg__lc_tick
 * on the primary).  @on_item gets @item_ud.  0, SG_EINVAL, SG_ERANGE or
 * SG_ENOMEM. */
int sg__lc_init(sg__lifecycle *lc, const sg__transport *tp, sg__lifecycle *primary,
                const sg_op_options *popts, const sg_stream_config *framing,
                int64_t drain_ns, sg_item_cb on_item, void *item_ud);
/* Frees what sg__lc_init allocated: the options, the policy and its
 * records (the lifecycle itself is the caller's).  A pending intent is
 * dropped first (sg__lc_drop_intent). */
void sg__lc_release(sg__lifecycle *lc);
/* An operation freed with its intent pending: unwatched, and abandoned
 * (cancelled) to its observer.  Call it while the driver still holds the
 * operation (before it forgets it); harmless otherwise. */
void sg__lc_drop_intent(sg__lifecycle *lc);

/* Starts the operation at @now: its budget, the observer's intent, then
 * the first attempt.  Returns 1 when the operation ended during the call
 * (finished ran: it may be freed), 0 when an attempt runs or the intent
 * is pending (INTENT: the transport watches lc->intent_fd), or the
 * observer's negative code when it refused (nothing sent; still NEW). */
int sg__lc_start(sg__lifecycle *lc, int64_t now);
/* The watched intent fd is readable: asks the observer, and on its answer
 * runs the first attempt or ends the operation.  Returns 1 when the
 * operation ended (it may be freed), else 0. */
int sg__lc_intent_ready(sg__lifecycle *lc, int64_t now);

/* The operation's options: the lifecycle's own until the start, then the
 * policy's copy (a hedge slot: its primary's). */
static inline const sg_op_options *sg__lc_options(const sg__lifecycle *lc) {
    return lc->popts != NULL ? lc->popts : sg__op_options_of(lc->pol);
}

/* The item gate every transport's item callback passes first: returns 1
 * when the item must not reach the consumer (its attempt lost a hedge:
 * stop the stream), 0 to deliver it.  The operation's first item names its
 * attempt the winner and marks every other running attempt lost (due at
 * once: the driver cancels it after the library callback returned).  A
 * half-open endpoint's probe has answered at its first item: the policy
 * closes the breaker then (sg__op_first_item), not when the stream ends. */
int sg__lc_item_gate_slow(sg__lifecycle *lc);
static inline int sg__lc_item_gate(sg__lifecycle *lc) {
    const sg__lifecycle *root = lc->primary != NULL ? lc->primary : lc;
    if (!lc->lost && !lc->breaker_probe && (root->won || !root->hedging)) {
        return 0; /* per item: no hedge to settle */
    }
    return sg__lc_item_gate_slow(lc);
}
/* Cancels the operation and every hedge in flight (sg__lc_cancel each). */
void sg__lc_cancel_all(sg__lifecycle *lc);
/* The operation ended while hedges still ran (a winner faster than their
 * cancels): each is aborted and recorded now, before on_done. */
void sg__lc_settle_losers(sg__lifecycle *lc, int64_t now);

/* The library's headers for the running attempt, as stamped (the
 * idempotency key, the deadline header, grpc-timeout), into @h (room for
 * SG__LC_STAMP_MAX); returns how many.  Valid until the next attempt: a
 * transport that sends the request later asks again then. */
size_t sg__lc_stamp_lib(const sg__lifecycle *lc, sg__lc_header *h);
/* The stamped deadline values (lc->dl_value, lc->grpc_value) say what is
 * left of the attempt's lease at @now: for a transport that sends the
 * request later than it launched it (after a connection was made). */
void sg__lc_restamp(sg__lifecycle *lc, int64_t now);

/* The next instant the lifecycle must be ticked (INT64_MIN: at once);
 * for an operation that hedges, its next hedge too. */
int64_t sg__lc_next_deadline(const sg__lifecycle *lc);
/* What is due at @now: an expired clock or a cancel aborts and settles
 * the attempt, the end of the drain settles it ok, the end of a sleep
 * begins the next attempt.  Returns 1 when the operation ended. */
int sg__lc_tick(sg__lifecycle *lc, int64_t now);
/* Cancels a running or sleeping operation; it is due at once. */
void sg__lc_cancel(sg__lifecycle *lc);

/* Response facts, as the transport reads them (response.c).  A status
 * begins a header block (interim or final) and moves the phase to
 * wait_headers. */
void sg__lc_status(sg__lifecycle *lc, int status, int64_t now);
void sg__lc_retry_after(sg__lifecycle *lc, const char *value, size_t len);
/* retry-after-ms (milliseconds: OpenAI, Azure), read beside Retry-After;
 * the policy says which wins (sg_op_attempt_done). */
void sg__lc_retry_after_ms(sg__lifecycle *lc, const char *value, size_t len);
/* The response's Date (RFC 9110 §6.6.1): a Retry-After HTTP-date is
 * measured from it, not from the local wall clock. */
void sg__lc_date(sg__lifecycle *lc, const char *value, size_t len);
/* Any other response header: a provider's rate-limit header is kept for
 * endpoint health (sg_op_ratelimit_header), the rest ignored. */
void sg__lc_ratelimit(sg__lifecycle *lc, const char *name, size_t name_len,
                      const char *value, size_t value_len);
/* The header block ended: its class (and for 2xx, phase wait_first_item). */
int sg__lc_headers_end(sg__lifecycle *lc, int64_t now);
/* An error response's head ended at @now (sg__lc_headers_end said
 * SG__LC_ERROR): with a status of 400 or more the attempt is decided
 * http_error at this instant, and the lifecycle drains its body, keeping
 * SG_ERROR_BODY_MAX bytes of it (sg__lc_error_body), until the body ends
 * or for the drain time at most, within the attempt's lease.  The
 * transport then decides (the outcome stays http_error) and settles.
 * false, with nothing changed, for no status or a malformed one, and when
 * the operation hedges: the transport then decides http_error at once,
 * as for a response with no body. */
bool sg__lc_error_response(sg__lifecycle *lc, int64_t now);
/* Draining an error response's body (sg__lc_error_response). */
static inline bool sg__lc_error_draining(const sg__lifecycle *lc) {
    return lc->state == SG__LC_DRAINING && lc->error_body;
}
/* What the error response that ended @lc's last attempt said (hedging
 * keeps none), or NULL; its length in *@len when @len is not NULL (0
 * with NULL).  @lc may be NULL. */
const char *sg__lc_error_body(const sg__lifecycle *lc, size_t *len);
/* Body bytes at @now.  Returns 0 when taken (or ignored: not a stream,
 * draining), 1 when the terminal arrived (draining now), or the negative
 * code of sg_stream_feed (the attempt must stop: abort and decide). */
int sg__lc_feed(sg__lifecycle *lc, const void *data, size_t len, int64_t now);

/* The attempt is decided at @now: @how is what the transport saw; a cause
 * latched in the stream (expiry, cap, cancel, framing) wins, and an
 * attempt that was draining is ok (after its terminal) or http_error
 * (after an error response's head).  Leaves the lifecycle ENDING. */
void sg__lc_decide(sg__lifecycle *lc, int64_t now, sg_outcome how);
/* Hands the ENDING attempt to the policy at @now and runs the callbacks:
 * leaves SLEEPING (a retry) or ends the operation.  Returns 1 when it
 * ended (finished ran: it may be freed), 0 otherwise. */
int sg__lc_settle(sg__lifecycle *lc, int64_t now);

/* What the attempt's stream said it consumed, for the policy (usage.c):
 * @r->usage points at @u, which holds its profile's reading, and
 * @r->text_bytes the text it counted; without a profile nothing. */
void sg__lc_usage(const sg__lifecycle *lc, sg_op_result *r, sg_op_usage *u);

static inline sg_guard *sg__lc_guard(sg__lifecycle *lc) {
    return sg__stream_guard(&lc->stream);
}

/*
 * The shims from the lifecycle's discard / attempt_ended to the user's
 * typed callbacks, written once for every transport: @type is the
 * transport's operation (a field `user_data`), @of(lc) maps the lifecycle
 * to it, @cbs(op) to what holds its callbacks (fields `on_discard`,
 * `on_attempt`).  Defines the static functions sg__lc_shim_discard and
 * sg__lc_shim_attempt.
 */
#define SG__LC_CALLBACK_SHIMS(type, of, cbs)                                       \
    static void sg__lc_shim_discard(sg__lifecycle *lc, uint32_t attempt,           \
                                    sg_outcome outcome) {                          \
        type *op_ = of(lc);                                                        \
        if (cbs(op_)->on_discard != NULL) {                                        \
            cbs(op_)->on_discard(op_, attempt, outcome, op_->user_data);           \
        }                                                                          \
    }                                                                              \
    static void sg__lc_shim_attempt(sg__lifecycle *lc, const sg_op_attempt *rec) { \
        type *op_ = of(lc);                                                        \
        if (cbs(op_)->on_attempt != NULL) {                                        \
            cbs(op_)->on_attempt(op_, rec, op_->user_data);                        \
        }                                                                          \
    }

/* Formats into the lifecycle's message (sg__lc_errmsg); dropped when no
 * memory can be had for it. */
void sg__lc_error(sg__lifecycle *lc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
