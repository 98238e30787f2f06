/*
 * streamguard over HTTP/2 (nghttp2 + OpenSSL): many guarded operations as
 * streams of one connection, each cancelled alone when its clock expires.
 *
 * One sg_h2_conn is one TCP connection: TLS with ALPN "h2" (certificate and
 * hostname verification on by default), or cleartext "h2c" with prior
 * knowledge.  Each sg_h2_op is a full operation (<streamguard/policy.h>):
 * its attempts run as streams on the connection, every attempt under its
 * own sg_stream (framing + the three clocks) leased from the operation's
 * budget.  When a clock expires, that stream alone is reset with
 * RST_STREAM(CANCEL) - the server learns at once that nobody listens - and
 * every other stream goes on.
 *
 * What the peer's signals become (docs/h2.md has the full table):
 *   - RST_STREAM(REFUSED_STREAM), or a stream above GOAWAY's last stream
 *     id: never processed.  The attempt is recorded as not sent
 *     (transport_error, phase send), so the policy retries it when the
 *     budget allows - even for a POST without an idempotency key.
 *   - any other RST_STREAM (NO_ERROR too, before the response's
 *     END_STREAM): truncated after the response headers, transport_error
 *     before them.
 *   - connection lost (EOF, reset, TLS failure): every running stream ends
 *     the same way (truncated / transport_error, the phase it was in,
 *     partial when items were delivered).  The server breaking HTTP/2 on
 *     the connection instead ends every request it saw protocol_error
 *     (never retried); the ones still queued, unsent, transport_error.
 *   A retry that needs a stream after the connection was lost opens a new
 *   connection; after a GOAWAY new streams go on a new connection at once
 *   while the old one drains its streams.  A connection that cannot be made
 *   ends the attempts waiting for it in phase connect (never sent).
 *
 * Connecting: sg_h2_conn_new connects and completes the TLS handshake
 * within the connect timeout, blocking (unless connect_on_demand).  Every
 * later connection is made inside the loop without blocking it: DNS with
 * c-ares, the connect race over the addresses (Happy Eyeballs, RFC 8305),
 * the TLS handshake, each moved on by the step.  Everything is
 * non-blocking and sans-timer: the connection gives one fd to watch (an
 * epoll instance over all of its sockets) and the one instant it next
 * needs a call (sg_h2_conn_next_deadline); sg_h2_conn_step does the rest.
 * sg_h2_conn_run is that loop on ppoll(2).
 *
 * Callbacks: on_item runs inside the step that read its bytes and must not
 * free the operation or the connection (return non-zero to cancel); it may
 * start new operations (their callbacks, even an at-once refusal's
 * on_done, come after nghttp2 has returned).
 * on_discard, on_attempt and on_done run from the step after nghttp2 has
 * returned, never from inside an nghttp2 callback; on_done may free its
 * own operation or start new ones.  No callback may free the connection.
 *
 * Memory: per operation, two allocations when it starts - the operation
 * (about 5 KiB) and its request copy - plus nghttp2's stream state.  The
 * framing's buffers grow as a line or event spans reads and are freed once
 * it is whole (sg_stream_init_mem): nothing is reserved for its limits.
 * Nothing is allocated per item that arrives whole.
 *
 * Thread-safety: a connection and its operations belong to one thread at a
 * time; distinct connections may run on distinct threads.
 */
#ifndef STREAMGUARD_H2_H
#define STREAMGUARD_H2_H

#include <streamguard/core.h>
#include <streamguard/health.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_h2_conn sg_h2_conn;
typedef struct sg_h2_op sg_h2_op;

/** Room for the messages sg_h2_conn_error / sg_h2_op_error return. */
#define SG_H2_ERROR_SIZE 256

/* ------------------------------------------------------------------------
 * Connection options
 * ------------------------------------------------------------------------ */

/**
 * sg_h2_conn_options - how to reach the server.  Opaque:
 * sg_h2_conn_options_new (every option at its default), one setter per
 * option, sg_h2_conn_options_free.  Ownership (docs/design.md,
 * "Ownership"): strings are copied; the clock is copied, its user_data
 * borrowed; the error buffer is borrowed.
 * sg_h2_conn_new reads it: it may be changed or freed right after.
 *
 * Each setter returns 0 if it succeeds, or one of the following negative
 * error codes (and then @o is unchanged):
 *   SG_EINVAL  @o is NULL, or a value said on the setter;
 *   SG_ERANGE  a value out of its range;
 *   SG_ENOMEM  no memory for a copy.
 */
typedef struct sg_h2_conn_options sg_h2_conn_options;

/** sg_h2_conn_options_new - options at their defaults into *@out (NULL on
 *  failure): 0, SG_EINVAL (@out NULL) or SG_ENOMEM. */
SG_EXTERN int sg_h2_conn_options_new(sg_h2_conn_options **out);

/** sg_h2_conn_options_free - frees @o (NULL is fine). */
SG_EXTERN void sg_h2_conn_options_free(sg_h2_conn_options *o);

/** sg_h2_conn_options_set_host - the name or address to connect to
 *  (required; "" is SG_EINVAL).  Also the TLS server name (SNI) and the
 *  name the certificate must carry, unless a server name is set. */
SG_EXTERN int sg_h2_conn_options_set_host(sg_h2_conn_options *o, const char *host);

/** sg_h2_conn_options_set_port - the TCP port (required), 1 .. 65535. */
SG_EXTERN int sg_h2_conn_options_set_port(sg_h2_conn_options *o, int port);

/** sg_h2_conn_options_set_tls - true: TLS, ALPN "h2" required.  false (the
 *  default): h2c with prior knowledge (cleartext, no Upgrade). */
SG_EXTERN int sg_h2_conn_options_set_tls(sg_h2_conn_options *o, bool on);

/** sg_h2_conn_options_set_cafile - a PEM file of CA certificates to trust
 *  (a test server's).  NULL (the default): OpenSSL's default store. */
SG_EXTERN int sg_h2_conn_options_set_cafile(sg_h2_conn_options *o, const char *path);

/** sg_h2_conn_options_set_insecure - true turns certificate and hostname
 *  verification off.  Default false (verification on). */
SG_EXTERN int sg_h2_conn_options_set_insecure(sg_h2_conn_options *o, bool on);

/** sg_h2_conn_options_set_server_name - the name for SNI and the hostname
 *  check ("" is SG_EINVAL).  NULL (the default): the host. */
SG_EXTERN int sg_h2_conn_options_set_server_name(sg_h2_conn_options *o, const char *name);

/**
 * sg_h2_conn_options_set_connect_timeout - for DNS + TCP connect + TLS
 * handshake, for each connection made (the attempts waiting for one are
 * also bounded by their own clocks); and, once connected, the longest the
 * server may leave what was sent unacknowledged, or unsent behind a zero
 * window (TCP_USER_TIMEOUT): past it the connection is lost and retries
 * and new streams go on a new one.  @ns 0 .. SG_DURATION_MAX; 0 restores
 * the default, 10 s.
 */
SG_EXTERN int sg_h2_conn_options_set_connect_timeout(sg_h2_conn_options *o, int64_t ns);

/** sg_h2_conn_options_set_stream_window - each stream's receive window
 *  (SETTINGS_INITIAL_WINDOW_SIZE), 65535 .. 2^31-1; 0 restores the
 *  default, 4 MiB: a long generation never waits for a WINDOW_UPDATE. */
SG_EXTERN int sg_h2_conn_options_set_stream_window(sg_h2_conn_options *o, uint32_t n);

/** sg_h2_conn_options_set_conn_window - the connection's receive window,
 *  65535 .. 2^31-1; 0 restores the default, 16 MiB. */
SG_EXTERN int sg_h2_conn_options_set_conn_window(sg_h2_conn_options *o, uint32_t n);

/** sg_h2_conn_options_set_max_header_list - the largest response header
 *  list accepted (advertised as SETTINGS_MAX_HEADER_LIST_SIZE and enforced
 *  per stream: the stream is reset with PROTOCOL_ERROR and the attempt is
 *  protocol_error), 128 .. 2^31-1; 0 restores the default, 64 KiB. */
SG_EXTERN int sg_h2_conn_options_set_max_header_list(sg_h2_conn_options *o, uint32_t n);

/** sg_h2_conn_options_set_clock - the clock; NULL (the default) is
 *  CLOCK_MONOTONIC.  Copied (its user_data borrowed).  sg_h2_conn_run waits
 *  on real time, so inject a clock only for reads. */
SG_EXTERN int sg_h2_conn_options_set_clock(sg_h2_conn_options *o, const sg_clock *clock);

/** sg_h2_conn_options_set_errbuf - SG_H2_ERROR_SIZE bytes that receive a
 *  message when sg_h2_conn_new fails.  Borrowed.  NULL (the default):
 *  none. */
SG_EXTERN int sg_h2_conn_options_set_errbuf(sg_h2_conn_options *o, char *buf);

/** sg_h2_conn_options_set_dns_servers - the DNS servers to ask,
 *  "addr[:port],..." as c-ares reads them (IPv6 in brackets with a port;
 *  "" is SG_EINVAL).  NULL (the default): /etc/resolv.conf.  An IP
 *  literal host asks no one. */
SG_EXTERN int sg_h2_conn_options_set_dns_servers(sg_h2_conn_options *o,
                                                 const char *servers);

/** sg_h2_conn_options_set_connect_on_demand - true: sg_h2_conn_new does not
 *  connect; the first operation's attempt does, inside its lease (phase
 *  connect: bounded by the lease and the connect timeout, reported,
 *  retried when the policy allows - a connection that cannot be made is an
 *  attempt like any other).  Default false: connect now. */
SG_EXTERN int sg_h2_conn_options_set_connect_on_demand(sg_h2_conn_options *o, bool on);

/* ------------------------------------------------------------------------
 * Requests: what each attempt of an operation sends, and its callbacks
 * ------------------------------------------------------------------------ */

/**
 * sg_h2_request - what each attempt sends, how its body is framed, and
 * what the operation reports.  Opaque: sg_h2_request_new, one setter per
 * option, sg_h2_request_free.  Everything is copied (docs/design.md,
 * "Ownership": strings, headers,
 * the body, the framing config and its strings); an operation takes a
 * copy (sg_h2_op_new), so the request may be reused or freed right after.
 * Each setter returns as the connection options' do.
 */
typedef struct sg_h2_request sg_h2_request;

/** sg_h2_request_new - an empty request into *@out (NULL on failure): 0,
 *  SG_EINVAL (@out NULL) or SG_ENOMEM.  It needs a path. */
SG_EXTERN int sg_h2_request_new(sg_h2_request **out);

/** sg_h2_request_free - frees @r (NULL is fine). */
SG_EXTERN void sg_h2_request_free(sg_h2_request *r);

/** sg_h2_request_set_framing - how the body is cut into items (SSE, NDJSON
 *  or an event stream, sentinels, skip_types, limits, a profile's
 *  classifier: <streamguard/stream.h>).  Copied with its strings.  NULL
 *  (the default): SSE, default limits. */
SG_EXTERN int sg_h2_request_set_framing(sg_h2_request *r, const sg_stream_config *cfg);

/** sg_h2_request_set_method - the :method (a token, SG_EINVAL otherwise);
 *  it also becomes the policy's method, so retry safety follows the
 *  method actually sent.  NULL (the default): the policy's ("POST"). */
SG_EXTERN int sg_h2_request_set_method(sg_h2_request *r, const char *method);

/** sg_h2_request_set_path - the :path (required): absolute, or "*", with
 *  no space or control byte (SG_EINVAL otherwise), e.g.
 *  "/v1/chat/completions". */
SG_EXTERN int sg_h2_request_set_path(sg_h2_request *r, const char *path);

/** sg_h2_request_set_authority - the :authority, non-empty without space
 *  or control byte (SG_EINVAL otherwise).  NULL (the default): the host,
 *  or host:port when the port is not the scheme's default. */
SG_EXTERN int sg_h2_request_set_authority(sg_h2_request *r, const char *authority);

/**
 * sg_h2_request_add_header - one more request header (the name a token,
 * lowercased on the wire; no pseudo-header; no value with a control byte
 * but tab, nor a space or tab at either end, RFC 9113 §8.2; none of the
 * connection-specific fields HTTP/2 forbids - connection, keep-alive,
 * proxy-connection, transfer-encoding, upgrade, te other than
 * "trailers": each SG_EINVAL).  Sent on every attempt together with
 * idempotency-key (when the policy has a key) and the deadline header(s).
 */
SG_EXTERN int sg_h2_request_add_header(sg_h2_request *r, const char *name,
                                       const char *value);

/** sg_h2_request_set_body - the request body, @len bytes, copied (@body
 *  NULL with @len > 0 is SG_EINVAL; @len 0 is none).  Default: none. */
SG_EXTERN int sg_h2_request_set_body(sg_h2_request *r, const void *body, size_t len);

/** sg_h2_request_set_deadline_header - stamp the attempt's lease in whole
 *  milliseconds under the policy's deadline header name, fresh per
 *  attempt.  Default false. */
SG_EXTERN int sg_h2_request_set_deadline_header(sg_h2_request *r, bool on);

/** sg_h2_request_set_grpc_timeout - also stamp "grpc-timeout" with the
 *  lease.  Default false. */
SG_EXTERN int sg_h2_request_set_grpc_timeout(sg_h2_request *r, bool on);

/** sg_h2_request_set_drain_timeout - after the terminal sentinel, how long
 *  to wait for the stream's END_STREAM before resetting it with CANCEL
 *  (the outcome is ok either way); the same after an error response's
 *  head, while its body is read (sg_h2_op_error_body).  @ns 0 ..
 *  SG_DURATION_MAX; 0 restores the default, 200 ms. */
SG_EXTERN int sg_h2_request_set_drain_timeout(sg_h2_request *r, int64_t ns);

/*
 * The callbacks, as curl.h's (each NULL by default; NULL removes one),
 * with the user_data given to sg_h2_op_new.  The item and bytes callbacks
 * run inside the step that read their bytes: they must not free anything
 * (return non-zero to cancel: the stream is reset with CANCEL); there is
 * no pause on this transport.  The discard, attempt and done callbacks
 * run after nghttp2 has returned; the done callback may free its own
 * operation.
 */
typedef int (*sg_h2_item_cb)(sg_h2_op *op, const sg_item *item, void *user_data);
typedef void (*sg_h2_discard_cb)(sg_h2_op *op, uint32_t attempt, sg_outcome outcome,
                                 void *user_data);
typedef void (*sg_h2_attempt_cb)(sg_h2_op *op, const sg_op_attempt *rec, void *user_data);
typedef void (*sg_h2_done_cb)(sg_h2_op *op, void *user_data);
typedef int (*sg_h2_bytes_cb)(sg_h2_op *op, uint32_t attempt, const void *data,
                              size_t len, void *user_data);

/** sg_h2_request_set_on_item - each item, as it arrives. */
SG_EXTERN int sg_h2_request_set_on_item(sg_h2_request *r, sg_h2_item_cb fn);
/** sg_h2_request_set_on_discard - a partial attempt: discard what it
 *  delivered (never retried). */
SG_EXTERN int sg_h2_request_set_on_discard(sg_h2_request *r, sg_h2_discard_cb fn);
/** sg_h2_request_set_on_attempt - an attempt ended, with its record. */
SG_EXTERN int sg_h2_request_set_on_attempt(sg_h2_request *r, sg_h2_attempt_cb fn);
/** sg_h2_request_set_on_done - the operation ended (sg_h2_op_outcome). */
SG_EXTERN int sg_h2_request_set_on_done(sg_h2_request *r, sg_h2_done_cb fn);
/** sg_h2_request_set_on_bytes - an attempt's streaming body bytes as they
 *  arrived, before the items they complete (as curl.h's). */
SG_EXTERN int sg_h2_request_set_on_bytes(sg_h2_request *r, sg_h2_bytes_cb fn);

/* ------------------------------------------------------------------------
 * The connection
 * ------------------------------------------------------------------------ */

/**
 * sg_h2_conn_new - connect to the host and port of @opts, blocking for at
 * most the connect timeout: TCP connect, then (with TLS) the TLS handshake
 * with SNI, certificate and hostname verification and ALPN "h2".  The
 * client preface and SETTINGS are queued; they go out on the first step.
 * With connect_on_demand nothing is dialled here: the first attempt that
 * needs the connection makes it.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (and *@out is NULL; the options' error buffer says more):
 *   SG_EINVAL       @out or @opts is NULL, or no host or port was set;
 *   SG_ENOMEM       out of memory;
 *   SG_ECONNECT     the name did not resolve or no address accepted;
 *   SG_ETIMEDOUT    connect or handshake did not finish in time;
 *   SG_ETLS         the TLS handshake failed (or the CA file is unreadable);
 *   SG_ETLS_VERIFY  the server's certificate or name did not verify;
 *   SG_EH2          the server did not select ALPN "h2", or nghttp2 setup
 *                   failed.
 */
SG_EXTERN int sg_h2_conn_new(sg_h2_conn **out, const sg_h2_conn_options *opts);

/**
 * sg_h2_conn_free - close the connection and free it with every operation
 * still attached (NULL is fine).  Running operations are dropped without
 * callbacks; their streams are reset with CANCEL and a GOAWAY is queued,
 * and whatever the socket takes at once is sent (never blocks, never
 * waits for the server).
 */
SG_EXTERN void sg_h2_conn_free(sg_h2_conn *conn);

/**
 * sg_h2_conn_fd - the fd to watch for readability: an epoll instance over
 * every socket of the connection (its TCP connections - the current one
 * and any draining after GOAWAY - and the resolver's), readable whenever
 * one of them needs a step; writability is watched inside it.  The same fd
 * for the connection's life.  -1 when @conn is NULL.
 */
SG_EXTERN int sg_h2_conn_fd(const sg_h2_conn *conn);

/**
 * sg_h2_conn_set_retry_budget - streams started on @conn from now on whose
 * policy names no retry budget (sg_op_options_set_retry_budget) take their
 * retries from @b, shared by all of them (and by anything else the caller
 * gives @b to: it is thread-safe).  Borrowed: @b must outlive them.  NULL:
 * none (the default).
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @conn is NULL.
 * Thread-safety: the thread that drives @conn.
 */
SG_EXTERN int sg_h2_conn_set_retry_budget(sg_h2_conn *conn, sg_retry_budget *b);

/**
 * sg_h2_conn_set_health - streams started on @conn from now on whose
 * policy names no endpoint health (sg_op_options_set_health) share @h
 * (<streamguard/health.h>).  Borrowed: @h must outlive them.  NULL: none.
 * Default: one of @conn's own, made at its first stream and freed with it.
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @conn is NULL.
 * Thread-safety: the thread that drives @conn.
 */
SG_EXTERN int sg_h2_conn_set_health(sg_h2_conn *conn, sg_health *h);

/** true when bytes wait for a socket (informational: sg_h2_conn_fd
 *  already becomes readable when the socket can take them). */
SG_EXTERN bool sg_h2_conn_want_write(const sg_h2_conn *conn);

/**
 * sg_h2_conn_next_deadline - the one instant at which sg_h2_conn_step must
 * be called even if the fd stays quiet: the earliest clock of any running
 * stream, end of a drain, end of a backoff sleep, or what a connection
 * being made waits for (an instant in the past means "step now").  SG_TIME_NEVER when
 * nothing is armed; -1 when @conn is NULL.  Amortised O(1): keys are lazy,
 * an item never touches the heap.
 */
SG_EXTERN int64_t sg_h2_conn_next_deadline(sg_h2_conn *conn);

/**
 * sg_h2_conn_step - do what is due at @now: read when @readable (until the
 * socket would block, or at most 256 KiB per call so that a peer sending
 * faster than we parse cannot starve the clocks - sg_h2_conn_next_deadline
 * then says "now" and the next step reads on, even without @readable),
 * hand bytes to nghttp2, expire clocks (RST_STREAM CANCEL per expired
 * stream), start retries whose backoff is over, run the callbacks, and
 * write what is queued (until the socket would block), and move a
 * connection being made on.  Never blocks.  The fd's epoll instance says
 * which socket is ready: pass true for @readable (false skips reading this
 * time - e.g. to write a first flight before the server's SETTINGS are
 * read); @writable is ignored.
 *
 * Returns the number of operations still running (>= 0), or one of the
 * following negative error codes:
 *   SG_EINVAL  @conn is NULL.
 * A lost connection is not an error here: its streams end and are reported.
 */
SG_EXTERN int sg_h2_conn_step(sg_h2_conn *conn, int64_t now, bool readable,
                              bool writable);

/**
 * sg_h2_conn_run - step until no operation is running, waiting with
 * ppoll(2) on sg_h2_conn_fd and the next deadline (nanosecond timeout).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @conn is NULL;
 *   SG_ESYS    ppoll failed (not EINTR);
 *   SG_ESTATE  operations run, yet nothing is connecting and none has a
 *              deadline (cannot happen: every operation has a budget).
 */
SG_EXTERN int sg_h2_conn_run(sg_h2_conn *conn);

/**
 * sg_h2_conn_connect - start making the connection now, without an
 * operation and without blocking (for a connection made with
 * connect_on_demand, e.g. to learn whether a server speaks h2 before
 * committing an operation to it).  sg_h2_conn_step moves it on, under the
 * connect timeout; sg_h2_conn_connecting() is true until it is made
 * (sg_h2_conn_usable()) or has failed (sg_h2_conn_error() says why).
 * Operations started meanwhile wait for it.  Harmless when a connection is
 * up or being made already.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @conn is NULL;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_h2_conn_connect(sg_h2_conn *conn);

/** true while the connection new streams go on is being made. */
SG_EXTERN bool sg_h2_conn_connecting(const sg_h2_conn *conn);

/** The number of operations running on @conn (started, not ended);
 *  SG_EINVAL when @conn is NULL. */
SG_EXTERN int sg_h2_conn_running(const sg_h2_conn *conn);

/** true while the current connection is up and may open new streams
 *  (false after a GOAWAY until the next stream makes a new one). */
SG_EXTERN bool sg_h2_conn_usable(const sg_h2_conn *conn);

/** Why the connection was last lost or refused ("" when it never was). */
SG_EXTERN const char *sg_h2_conn_error(const sg_h2_conn *conn);

/**
 * sg_h2_conn_failure - the code a connection of @conn was last refused
 * with, while it was being made (sg_h2_conn_error() has the words):
 * SG_ETIMEDOUT (the connect timeout ran out), SG_EH2 (the server was
 * reached but did not negotiate h2 - ALPN -, or the HTTP/2 session could
 * not be set up), SG_ETLS or SG_ETLS_VERIFY (the TLS handshake or the
 * certificate), SG_ECONNECT (the name did not resolve, or no TCP
 * connection), ...; 0 when none ever was, SG_EINVAL when @conn is NULL.  A
 * connection lost after it was made does not change it.
 */
SG_EXTERN int sg_h2_conn_failure(const sg_h2_conn *conn);

/* ------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------ */

/**
 * sg_h2_op_new - start an operation on @conn now: starts its budget and
 * submits the first attempt's stream (it goes out on the next step).
 *
 * @out: receives the operation, owned by @conn until sg_h2_op_free or
 *   sg_h2_conn_free; NULL when it is not wanted (the connection frees
 *   it).  *@out is NULL on failure.
 * @policy: budget, clocks, retries, observer (<streamguard/policy.h>);
 *   NULL means the policy defaults.  Copied.
 * @req: the request, its framing and callbacks.  Copied.
 * @user_data: handed to every callback.
 *
 * The operation may end during this call (nothing could be leased - a
 * floor at or above the budget too, as with sg_op_start: refused,
 * budget_below_floor): its done callback then runs before it returns.
 * When the connection is still being made the attempt waits for it
 * (phase connect) and is sent once it is.  An intent ledger, or any other
 * record of what the operation did, plugs into the policy as an observer
 * (sg_op_options_set_observer); its intent names the policy's target, or,
 * when it has none, scheme://authority + path.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (then no operation exists and no callback was called):
 *   SG_EINVAL  @conn or @req is NULL, @req has no path, or its method is
 *              longer than SG_OP_METHOD_MAX;
 *   SG_EUNSUPPORTED  the policy names more than one endpoint: a connection
 *              serves one origin (fallback is the libcurl transport's);
 *   SG_EUNSAFE the policy hedges (sg_op_options_set_hedging) a request
 *              not safe to repeat.  Hedges are new streams on this
 *              connection; a loser is reset with RST_STREAM(CANCEL);
 *   SG_ENOMEM  out of memory;
 *   the negative code of the policy observer's on_intent when it refused
 *              the operation (e.g. the intent ledger's SG_EEXIST while the
 *              key is unresolved, SG_EINVAL without any key): nothing was
 *              sent.
 */
SG_EXTERN int sg_h2_op_new(sg_h2_op **out, sg_h2_conn *conn, const sg_op_options *policy,
                           const sg_h2_request *req, void *user_data);

/**
 * sg_h2_op_cancel - the caller gives up on @op at the next step: a running
 * stream is reset with CANCEL and the attempt is recorded as cancelled
 * (never retried); a sleeping operation ends, and so does one whose
 * intent its observer is recording (nothing sent, even when the intent's
 * answer came in before the step: the cancel came first).  on_done
 * follows from the step.  Harmless on an ended operation.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL.
 */
SG_EXTERN int sg_h2_op_cancel(sg_h2_op *op);

/**
 * sg_h2_op_free - free @op (NULL is fine).  A running stream is reset with
 * CANCEL first and no callback is called.  May be called from @op's own
 * on_done, never from on_item.
 */
SG_EXTERN void sg_h2_op_free(sg_h2_op *op);

/** The operation's outcome once it has ended (as sg_curl_op_outcome);
 *  SG_OUTCOME_NONE before, and for NULL. */
SG_EXTERN sg_outcome sg_h2_op_outcome(const sg_h2_op *op);
/** true once the operation has ended. */
SG_EXTERN bool sg_h2_op_done(const sg_h2_op *op);
/** The policy state: attempts, records, decisions (sg_op_* readers of
 *  <streamguard/op.h>); NULL for NULL or an operation not started. */
SG_EXTERN const sg_op *sg_h2_op_policy(const sg_h2_op *op);
/** The user_data given to sg_h2_op_new. */
SG_EXTERN void *sg_h2_op_user_data(const sg_h2_op *op);
/** The stream id of the running attempt, 0 when none. */
SG_EXTERN int32_t sg_h2_op_stream_id(const sg_h2_op *op);
/** The last attempt's HTTP status, 0 when none arrived. */
SG_EXTERN int sg_h2_op_http_status(const sg_h2_op *op);
/** What went wrong in the last failed attempt ("" when nothing did). */
SG_EXTERN const char *sg_h2_op_error(const sg_h2_op *op);
/**
 * sg_h2_op_error_body - what the server said in the error response that
 * ended the last attempt (a final status of 400 or more): the first
 * SG_ERROR_BODY_MAX bytes of its DATA, read after the head (the attempt is
 * http_error from the head's arrival) until END_STREAM, for drain_ns at
 * most within the attempt's lease; never in the report; not with hedging
 * (the head is the answer there).  As with
 * sg_curl_op_error_body: the bytes inside @op (valid until the next
 * attempt starts or @op is freed) and their count in *@len, or NULL and
 * 0.  Thread-safety: the thread that drives @op's connection.
 */
SG_EXTERN const char *sg_h2_op_error_body(const sg_h2_op *op, size_t *len);

/**
 * sg_h2_op_report - the execution report (JSON, docs/report.md) into @buf;
 * see sg_op_report_write for @needed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @op is NULL, or @buf is NULL while @len > 0;
 *   SG_ENOBUFS  @len is too small.
 */
SG_EXTERN int sg_h2_op_report(const sg_h2_op *op, char *buf, size_t len, size_t *needed);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_H2_H */
