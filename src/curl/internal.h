/* Private state shared by the libcurl transport's translation units. */
#ifndef SG_CURL_INTERNAL_H
#define SG_CURL_INTERNAL_H

#include <streamguard/curl.h>

#include <stdatomic.h>

#include "curl/teardown.h"
#include "policy/internal.h"
#include "transport/dheap.h"
#include "transport/lifecycle.h"
#include "transport/watch.h"

/* How long a transfer reads nothing before its read buffer goes back,
 * by default (sg_curl_multi_set_read_buffer_release). */
#define SG__CURL_QUIET_DEFAULT SG_MS(500)

/* The largest response head accepted, as the HTTP/2 transport's default
 * max_header_list (RFC 9113 §6.5.2 counts alike, near enough). */
#define SG__CURL_MAX_HEADER_BYTES (64u << 10)

/* One fallback endpoint, owned copies. */
typedef struct sg__curl_endpoint {
    char *url;
    struct curl_slist *headers; /* NULL: the options' own */
    char *body;                 /* NULL: the easy handle's own */
    size_t body_len;
    /* its own framing (a provider profile), its strings in framing_block;
     * without one (own_framing false) the options' framing */
    sg_stream_config framing;
    void *framing_block;
    bool own_framing;
} sg__curl_endpoint;

/* sg_curl_options: everything it holds is its own (options.c). */
struct sg_curl_options {
    sg_stream_config framing; /* its strings in framing_block */
    void *framing_block;
    struct curl_slist *headers;
    char *cafile;
    bool deadline_header;
    bool grpc_timeout;
    int64_t drain_ns;
    const sg_clock *clock; /* borrowed */
    /* n_endpoints of them (at most SG_OP_MAX_ENDPOINTS), on the heap: an
     * operation's copy of options without fallbacks holds none (inline,
     * all 16 were 512 bytes in every operation) */
    sg__curl_endpoint *endpoints;
    uint32_t n_endpoints;
    sg_curl_item_cb on_item;
    sg_curl_discard_cb on_discard;
    sg_curl_attempt_cb on_attempt;
    sg_curl_done_cb on_done;
    sg_curl_bytes_cb on_bytes;
    /* Operations share one read-only copy (options.c, sg__curl_options_take):
     * a caller's options keep the copy their operations took (snap, made
     * by the first, dropped by any setter); a copy counts the operations
     * holding it, and its owner's reference (refs). */
    _Atomic(struct sg_curl_options *) snap;
    atomic_uint refs;
};

/* The read-only copy of @o for one more operation (made at the first
 * call, and again after a setter changed @o): 0 or SG_ENOMEM.  Several
 * threads may take from the same @o at once; a setter must not run
 * meanwhile (as for every reader of @o).  Each take is given back with
 * sg__curl_options_drop. */
int sg__curl_options_take(const sg_curl_options *o, sg_curl_options **out);
void sg__curl_options_drop(sg_curl_options *copy);

/* A managed multi's transfers whose read buffer goes back after @ns
 * without a read (SG_TIME_NEVER: never), in the order of their last read
 * (quiet.c). */
typedef struct sg__curl_quiet {
    struct sg_curl_op *head, *tail; /* quiet longest; read last */
    int64_t ns;
    bool yield; /* the head is due, and waits for the next clock */
} sg__curl_quiet;

void sg__curl_quiet_init(sg__curl_quiet *q);
/* @ns from now on (SG_TIME_NEVER empties @q). */
void sg__curl_quiet_set(sg__curl_quiet *q, int64_t ns);
/* @op read at @now: to the tail of @q; true when it is the head now (the
 * timer may need to wake earlier). */
bool sg__curl_quiet_touch(sg__curl_quiet *q, struct sg_curl_op *op, int64_t now);
void sg__curl_quiet_remove(sg__curl_quiet *q, struct sg_curl_op *op);
/* When the loop wakes for @q, given its next clock @clocks. */
int64_t sg__curl_quiet_wake(const sg__curl_quiet *q, int64_t clocks);
/* Gives back the read buffer of every transfer of @q due at the time of
 * @clock, in the room before the next deadline of @heap (multi.c runs it
 * at the end of a step, between calls into libcurl). */
void sg__curl_quiet_give_back(sg__curl_quiet *q, const sg_clock *clock, sg__dheap *heap);

/* An HTTP/2 transfer in its managed multi's list of those on its
 * connection (multi.c): the connection's local port (the list's index)
 * and a hash of both ends. */
typedef struct sg__curl_conn_link {
    sg_curl_multi *m;
    struct sg_curl_op *op;
    struct sg__curl_conn_link *next, *prev;
    uint64_t key;
    uint16_t port;
} sg__curl_conn_link;

struct sg_curl_op {
    sg__lifecycle lc; /* the operation: policy, body, attempt state */
    CURL *easy;
    CURLM *multi;         /* where the transfers run */
    sg_curl_multi *owner; /* the managed multi driving this op, or NULL */
    sg__dheap_node node;  /* in owner's deadline heap */
    bool in_multi;        /* the easy handle is added to `multi` */
    /* in its managed multi's list of the transfers whose read buffer may
     * go back when quiet (multi.c, give_back), read order */
    bool quiet_in;
    /* An attempt the managed multi stopped whose transfer libcurl still
     * holds (in_multi is already false): removed, its connection closed,
     * after every clock due meanwhile is decided (multi.c, teardown). */
    bool detach_pending;
    /* A transfer is in one of the two lists at most: a quiet one reads,
     * a stopped one is on its way out (stop_transfer takes it out of the
     * first before it joins the second; the callbacks of a stopped one
     * read nothing). */
    union {
        struct {
            int64_t quiet_at; /* its last read */
            struct sg_curl_op *quiet_prev, *quiet_next;
        };
        struct {
            int64_t detach_at;                            /* when it stopped */
            struct sg_curl_op *detach_next, *detach_prev; /* in decision order */
        };
    };
    sg_curl_multi *detacher; /* whose list it is on */
    /* libcurl's words for the running attempt (CURLOPT_ERRORBUFFER), read
     * when it ends; the lifecycle's message, ours, is allocated only when
     * there is one (sg__lc_more) */
    char cerr[CURL_ERROR_SIZE];
    /* Over HTTP/2 under a managed multi: its place in that multi's list
     * of the transfers on its connection (NULL: on none) - one of them
     * carries a stopped neighbour's RST_STREAM out (multi.c, nudge_conns).
     * Allocated when it joins: an HTTP/1.x operation pays a pointer. */
    struct sg__curl_conn_link *conn;
    struct {                  /* the running attempt, as libcurl ran it */
        bool http_abort;      /* aborted on an error status */
        bool method_checked;  /* this attempt's first request was checked */
        bool method_mismatch; /* the wire method differs from the policy's */
        bool write_abort;     /* our write callback stopped the transfer */
        bool header_overflow; /* the response head exceeded our bound */
        bool paused;          /* on_bytes paused the read (CURL_WRITEFUNC_PAUSE) */
        bool answered;        /* a status line came since the request went */
        bool resent;          /* libcurl was about to send it again: stopped */
        bool h2;              /* the request went on a TLS connection that chose h2 */
        bool refused;         /* the server refused it unprocessed (HTTP/2) */
        bool h1;              /* its response's status line said HTTP/1.x */
        bool rbuf_missed;     /* its reads come from no placed buffer */
        curl_socket_t sock;   /* what the managed multi watches for it, or -1 */
        size_t header_bytes;  /* of the current response head */
        void *rbuf;           /* libcurl's read buffer for it, once found
                               * (readbuf.c; HTTP/1.x only) */
    } at;
    /* the operation's own copy of its options (a hedge slot points at its
     * root's) */
    sg_curl_options *opts;
    void *user_data;
    /* the running attempt's request headers: one block, its nodes and its
     * stamped lines, the caller's lines borrowed from opts (op.c,
     * build_headers; freed with free()) */
    struct curl_slist *req_headers;
    /* the stamped deadline lines in req_headers (NULL: none), written with
     * room for any later value: restamped when the request goes */
    struct curl_slist *dl_line, *grpc_line;
    /* hedging: a hedge slot (an attempt runner with its own easy handle,
     * a duplicate of the root's, and a lifecycle on the root's policy)
     * points at its operation; the root's lifecycle keeps its slots */
    struct sg_curl_op *root;
};

/* The lifecycle's framing hook (sg__transport.framing): endpoint @i's
 * own framing (sg_curl_options_set_endpoint_framing) of the operation
 * whose lifecycle is @lc, or NULL for the operation's (options.c). */
const sg_stream_config *sg__curl_endpoint_framing(sg__lifecycle *lc, uint32_t i);

/* Hooks from an op into the managed multi that owns it. */
void sg__curl_multi_reschedule(sg_curl_multi *m, sg_curl_op *op);
void sg__curl_multi_forget(sg_curl_multi *m, sg_curl_op *op);
/* @op's transfer read into its placed read buffer at @now: the last in
 * @m's list of those to give back when quiet (multi.c).  unquiet takes it
 * out (its transfer stopped, ended or left). */
void sg__curl_multi_touch(sg_curl_multi *m, sg_curl_op *op, int64_t now);
void sg__curl_multi_unquiet(sg_curl_op *op);
/* A hedge slot joins @m's deadline heap (not counted as running). */
int sg__curl_multi_adopt(sg_curl_multi *m, sg_curl_op *slot);
/* @op's stopped transfer joins @m's list of removals, in decision order:
 * its server is told after the step's decisions (an HTTP/1.x connection
 * shut down, any other removed), its removal waits for room between the
 * clocks (multi.c, teardown).  sg__curl_multi_undefer takes it off. */
void sg__curl_multi_defer_detach(sg_curl_multi *m, sg_curl_op *op);
void sg__curl_multi_undefer(sg_curl_multi *m, sg_curl_op *op);
/* Removes @op's transfer from libcurl now if a removal is pending
 * (multi.c). */
void sg__curl_op_detach_pending(sg_curl_op *op);
/* Removes @op's transfer from its multi (multi.c); @stopped, one the
 * guard stopped mid-way: its connection closes when no other transfer
 * uses it, and otherwise (HTTP/2 under a managed multi) another transfer
 * on it takes the RST_STREAM out before the step ends, so the server sees
 * its stream end. */
void sg__curl_remove(sg_curl_op *op, bool stopped);
/* @op's HTTP/2 request is about to go on the connection between
 * @local_ip:@local_port and @primary_ip:@primary_port (its prereq
 * callback's arguments): it joins @m's list of the transfers on it (again,
 * if it moved). */
void sg__curl_multi_join_conn(sg_curl_multi *m, sg_curl_op *op, const char *primary_ip,
                              const char *local_ip, int primary_port, int local_port);
/* @op leaves the list it joined, if any (its transfer removed, or it is
 * freed). */
void sg__curl_multi_leave_conn(sg_curl_op *op);
/* A pending intent's fd, watched by @m's loop for @op (0 or SG_ESYS). */
int sg__curl_multi_watch(sg_curl_multi *m, sg_curl_op *op, int fd);
void sg__curl_multi_unwatch(sg_curl_multi *m, int fd);

/* HTTP/2 refusals (refused.c).  Whether the connection @easy's request is
 * about to go on chose h2 in its TLS handshake; whether libcurl, about to
 * send @op's request again with no answer since, is retrying a refused
 * stream; whether a transfer that ended with @result was a stream above a
 * GOAWAY's last stream id.  Never processed, either way. */
bool sg__curl_speaks_h2(CURL *easy);
bool sg__curl_refused_resend(const sg_curl_op *op);
bool sg__curl_goaway_refused(const sg_curl_op *op, CURLcode result);

/* Operation steps used by the managed multi.  Each returns 1 when the op
 * ended during the call: on_done has run and the op may already be freed. */
int sg__curl_op_start(sg_curl_op *op, CURLM *multi, int64_t now);
int sg__curl_op_complete(sg_curl_op *op, CURLcode result, int64_t now);
int sg__curl_op_tick(sg_curl_op *op, int64_t now);

/* The request headers of @op's attempt (headers.c): @given's lines, then
 * @st's, in op->req_headers; 0 or SG_ENOMEM.  sg__curl_restamp writes
 * @value over the value of stamped @line (NULL: none), in place. */
int sg__curl_build_headers(sg_curl_op *op, const struct curl_slist *given,
                           const sg__lc_stamp *st);
void sg__curl_restamp(struct curl_slist *line, const char *value);

/* Decides @op's running attempt, whose transfer libcurl ended with
 * @result, at @now (classify.c): the outcome from the CURLcode and what
 * the callbacks saw, and the message beside it.  The request's sending
 * must be worked out first (the guard's phase is read). */
void sg__curl_decide(sg_curl_op *op, CURLcode result, int64_t now);

#endif
