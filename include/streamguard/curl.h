/*
 * streamguard over libcurl: guarded streaming operations on easy handles
 * the caller configures.
 *
 * libcurl cannot guard a stream by itself: its only idle mechanism
 * (CURLOPT_LOW_SPEED_LIMIT/TIME) averages speed over seconds, and keepalive
 * bytes defeat it.  Here every attempt runs under an sg_guard whose earliest
 * deadline arms exactly one timer (a timerfd, nanosecond resolution); on
 * expiry the transfer is removed from its multi handle at once.  Retries,
 * backoff sleeps, Retry-After and the deadline header all go through the
 * policy layer (<streamguard/policy.h>), leased from one budget.
 *
 * Three ways to run an operation:
 *   1. blocking:  sg_curl_perform(op);
 *   2. many at once on one thread, on a multi handle the library manages:
 *      sg_curl_multi_new(), sg_curl_multi_add() per operation, then
 *      sg_curl_multi_run() - or sg_curl_multi_fd() + sg_curl_multi_step()
 *      from the caller's own event loop;
 *   3. on the caller's own CURLM: sg_curl_op_attach(), then after each of
 *      the caller's curl_multi_* calls, sg_curl_op_complete() for the
 *      op's finished transfer (curl_multi_info_read) and sg_curl_op_tick()
 *      whenever sg_curl_op_next_deadline() has passed.
 * The multi handles, 2 and 3, are <streamguard/curl_multi.h>, which this
 * file includes.
 *
 * The easy handle stays the caller's (URL, method, body, TLS, proxy, ...),
 * except for the options an operation sets on every attempt and that the
 * caller must not touch while it runs: CURLOPT_WRITEFUNCTION, WRITEDATA,
 * HEADERFUNCTION, HEADERDATA, PREREQFUNCTION, PREREQDATA, HTTPHEADER (pass
 * request headers with sg_curl_options_set_headers instead), CONNECTTIMEOUT_MS,
 * TIMEOUT_MS, PRIVATE, ERRORBUFFER, NOSIGNAL, SUPPRESS_CONNECT_HEADERS (a
 * proxy's CONNECT response is not the server's answer), QUICK_EXIT (an
 * aborted transfer never waits for the threaded resolver), and CAINFO when
 * sg_curl_options_set_cafile is used, and SSL_CTX_FUNCTION; and
 * FORBID_REUSE, which a transfer the guard stops mid-way is removed with
 * (its connection closes when no other transfer uses it, so the server
 * sees its stream end: libcurl 7.88 holds an HTTP/2 RST_STREAM until the
 * connection's next I/O) and which is 0 again after.  Under the managed
 * multi, an HTTP/2 connection that lost a stream and still carries others
 * has one of them paused and unpaused at once after the step's removals,
 * which sends the RST_STREAM; a caller's own multi gets no such nudge.  TLS
 * verification is libcurl's default (on); nothing here turns it off, and
 * the server is identified by its certificate's subject alternative names
 * only (RFC 9525): a certificate that names it only in the subject's CN is
 * refused, as the HTTP/2 transport refuses it.
 *
 * One method for retry safety, the report and the ledger: the one on the
 * wire.  The easy handle decides what libcurl sends (POSTFIELDS makes a
 * POST, CUSTOMREQUEST, NOBODY...); the policy's method
 * (sg_op_options_set_method, default POST) must be the same.  Each
 * attempt's first request is checked just before it is written
 * (CURLINFO_EFFECTIVE_METHOD): when they differ, nothing is sent and the
 * attempt ends refused, not retried, with both methods in
 * sg_curl_op_error().  So does an attempt libcurl cannot begin at all - a
 * malformed URL, a scheme it does not speak or was not built with
 * (CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL, CURLE_NOT_BUILT_IN):
 * refused, nothing sent, libcurl's message kept.  Which schemes an easy
 * handle may use is the caller's choice (CURLOPT_PROTOCOLS_STR).
 *
 * libcurl's own resends are judged as docs/design.md (retry rule 1) says:
 * a stream an HTTP/2 server refused was never processed (recorded not
 * sent, retried by the policy as a new attempt, whatever the method); a
 * dead connection's resend is stopped for a request not safe to repeat.
 *
 * Call curl_global_init() once before creating operations (libcurl's rule),
 * or sg_curl_global_init() for many quiet streams (libcurl's read buffers
 * given back while their transfers are quiet; below).
 *
 * Thread-safety: an operation or a multi belongs to one thread at a time
 * (the functions taking one run on the thread that owns it, unless said
 * otherwise); distinct operations and multis may run on distinct threads.
 */
#ifndef STREAMGUARD_CURL_H
#define STREAMGUARD_CURL_H

#include <curl/curl.h>

#include <streamguard/core.h>
#include <streamguard/health.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * sg_curl_op - one guarded streaming operation on a caller's easy handle:
 * its policy (attempts leased from one budget), the framing of the body and
 * the current attempt's guard.  Opaque; create it with sg_curl_op_new, run
 * it once (sg_curl_perform, sg_curl_multi_add or sg_curl_op_attach), free
 * it with sg_curl_op_free.  An operation cannot be restarted.
 */
typedef struct sg_curl_op sg_curl_op;

/* ------------------------------------------------------------------------
 * libcurl's global set-up, for many quiet streams in one process
 * ------------------------------------------------------------------------ */

/**
 * sg_curl_global_init - curl_global_init(@flags) for a process that keeps
 * many slow or quiet streams open at once: with libcurl before 8.0, every
 * easy handle's read buffer is placed on pages of its own, so that a
 * managed multi (sg_curl_multi) can give those pages back to the system
 * while its transfer is quiet.
 *
 * Why: libcurl before 8.0 gives each easy handle a read buffer of
 * CURLOPT_BUFFERSIZE + 1 bytes (16,385 by default) when its first
 * transfer starts, and keeps it as long as the handle.  A token stream's
 * reads write only its first bytes, so one of its pages stays resident:
 * about 4 KiB of the ~19 KiB an open stream costs (bench/RESULTS.md, issue
 * 37).  A smaller CURLOPT_BUFFERSIZE, set by the application on its easy
 * handles, saves as much on a slow stream, but costs CPU per item on a
 * fast one; this costs nothing while bytes flow.
 *
 * What it does: libcurl is given allocators (curl_global_init_mem) that
 * place each block of exactly the default read buffer's size on pages of
 * its own (posix_memalign: the room around it goes back to malloc for
 * small blocks) and remember it; every other block goes to malloc
 * unchanged (sg_curl_global_init_mem: to the application's allocators).
 * A managed multi then gives back (madvise MADV_DONTNEED) the buffer's
 * four whole pages once its transfer has read nothing for
 * sg_curl_multi_set_read_buffer_release's time, 500 ms by default: they
 * read as zeros, and the next read faults a page in again.  Only for a
 * response over HTTP/1.x (libcurl 7.x hands on, or copies aside when
 * paused, everything a read wrote before the call that read it returns;
 * over HTTP/2 it may leave another stream's bytes in a buffer), only
 * between the multi's calls into libcurl, and only a buffer still in use
 * by a transfer still running.  An easy handle with a CURLOPT_BUFFERSIZE
 * of its own, a caller's own multi handle (sg_curl_op_attach) and libcurl
 * 8.0 or later (where this is plain curl_global_init) give nothing back.
 *
 * Call it instead of curl_global_init, before any other libcurl call and
 * before any other thread runs (libcurl's rule for curl_global_init_mem);
 * pair each call with sg_curl_global_cleanup.  A later call while one is
 * in effect is curl_global_init(@flags): the first call's allocators stay.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  some of the allocators given, not all (the _mem form);
 *   SG_ECURL   libcurl's global init failed.
 * Thread-safety: not thread-safe (as curl_global_init).
 */
SG_EXTERN int sg_curl_global_init(long flags);

/**
 * sg_curl_global_init_mem - sg_curl_global_init for an application that
 * gives libcurl its own allocators (curl_global_init_mem's five): every
 * block libcurl asks for is made and freed by them, but for the read
 * buffers placed on pages of their own, which come from posix_memalign
 * and go back to free.  All five, or none (then it is sg_curl_global_init).
 *
 * Returns and thread-safety as sg_curl_global_init.
 */
SG_EXTERN int sg_curl_global_init_mem(long flags, curl_malloc_callback m,
                                      curl_free_callback f, curl_realloc_callback r,
                                      curl_strdup_callback s, curl_calloc_callback c);

/**
 * sg_curl_global_cleanup - curl_global_cleanup, paired with
 * sg_curl_global_init or sg_curl_global_init_mem; after the last, what
 * they made is freed.  Call it after every easy and multi handle is gone
 * (libcurl's rule).  Nothing when no init is in effect.
 *
 * Returns nothing.
 * Thread-safety: not thread-safe (as curl_global_cleanup).
 */
SG_EXTERN void sg_curl_global_cleanup(void);

/* ------------------------------------------------------------------------
 * Options: framing, transport settings and the callbacks of an operation
 * ------------------------------------------------------------------------ */

/**
 * sg_curl_options - how an operation frames its body, what it adds to each
 * attempt's request, and what it reports.  Opaque: sg_curl_options_new
 * (every option at its default), one setter per option, sg_curl_options_free.
 * Ownership (docs/design.md): values are copied - the framing config and
 * its strings, header lists, the CA file path, the endpoints' URLs,
 * headers and bodies - so the caller may free its own at once; the clock
 * and the callbacks' user_data (given to sg_curl_op_new) are borrowed.
 * An operation takes a copy (sg_curl_op_new): the options may be changed
 * or freed right after.
 *
 * Each setter returns 0 if it succeeds, or one of the following negative
 * error codes (and then @o is unchanged):
 *   SG_EINVAL  @o is NULL, or a value said on the setter;
 *   SG_ERANGE  a value out of its range;
 *   SG_ENOMEM  no memory for a copy.
 */
typedef struct sg_curl_options sg_curl_options;

/** sg_curl_options_new - options at their defaults into *@out (NULL on
 *  failure): 0, SG_EINVAL (@out NULL) or SG_ENOMEM. */
SG_EXTERN int sg_curl_options_new(sg_curl_options **out);

/** sg_curl_options_dup - a copy of @src (its copies copied) into *@out
 *  (NULL on failure): 0, SG_EINVAL (@out or @src NULL) or SG_ENOMEM. */
SG_EXTERN int sg_curl_options_dup(sg_curl_options **out, const sg_curl_options *src);

/** sg_curl_options_free - frees @o (NULL is fine); operations made from it
 *  keep their own copy. */
SG_EXTERN void sg_curl_options_free(sg_curl_options *o);

/**
 * sg_curl_options_set_framing - how the body is cut into items
 * (<streamguard/stream.h>: format, sentinels, skip_types, limits,
 * classifier - or a provider profile, sg_profile_framing).  Copied, its
 * strings and list too; the classifier's user_data is borrowed.  NULL
 * restores the default: SSE, no sentinel, the default limits.  The
 * framing's memory grows as a line or event spans reads and is freed
 * once it is whole (sg_stream_init_mem): nothing is reserved for the
 * limits.
 */
SG_EXTERN int sg_curl_options_set_framing(sg_curl_options *o,
                                          const sg_stream_config *cfg);

/** sg_curl_options_set_headers - request headers (curl_slist lines, "Name:
 *  value"), copied, sent on every attempt together with Idempotency-Key
 *  (when the policy has a key) and the deadline header.  NULL (the
 *  default): none. */
SG_EXTERN int sg_curl_options_set_headers(sg_curl_options *o,
                                          const struct curl_slist *headers);

/** sg_curl_options_set_cafile - a PEM file of CA certificates to trust
 *  (CURLOPT_CAINFO), e.g. a test server's; the path is copied.  NULL (the
 *  default): libcurl's store. */
SG_EXTERN int sg_curl_options_set_cafile(sg_curl_options *o, const char *path);

/** sg_curl_options_set_deadline_header - stamp each attempt's lease in
 *  whole milliseconds under the policy's deadline header name (default
 *  "X-Deadline-Ms").  Default false. */
SG_EXTERN int sg_curl_options_set_deadline_header(sg_curl_options *o, bool on);

/** sg_curl_options_set_grpc_timeout - also stamp "grpc-timeout" with the
 *  lease.  Default false. */
SG_EXTERN int sg_curl_options_set_grpc_timeout(sg_curl_options *o, bool on);

/**
 * sg_curl_options_set_drain_timeout - after the terminal sentinel, how long
 * to wait for the body to end (so the connection can be reused) before the
 * transfer is dropped; the outcome is ok either way.  The same after an
 * error response's head, while its body is read (sg_curl_op_error_body),
 * within the attempt's lease; the outcome is http_error either way.  @ns
 * 0 .. SG_DURATION_MAX; 0 restores the default, 200 ms.
 */
SG_EXTERN int sg_curl_options_set_drain_timeout(sg_curl_options *o, int64_t ns);

/** sg_curl_options_set_clock - the clock the operation reads; NULL (the
 *  default) is CLOCK_MONOTONIC.  Borrowed: it must outlive the operation.
 *  The managed multi waits on real time, so inject a clock only for
 *  reads. */
SG_EXTERN int sg_curl_options_set_clock(sg_curl_options *o, const sg_clock *clock);

/**
 * sg_curl_options_add_endpoint - one more endpoint to fall back across (at
 * most SG_OP_MAX_ENDPOINTS, SG_ERANGE past it), in order: attempt k goes
 * to the endpoint the policy chose (sg_op_options_set_endpoints, which
 * the operation sets from this list), with its URL, its @headers (instead
 * of sg_curl_options_set_headers', when not NULL) and its @body of
 * @body_len bytes (instead of the easy handle's, when not NULL: then every
 * endpoint must have one, so that no attempt inherits another's -
 * SG_EINVAL otherwise).  All copied.  Put the primary first, usually the
 * easy handle's own URL; the method stays the easy handle's.  Default
 * none: every attempt goes where the easy handle says.  SG_EINVAL for a
 * NULL @url.
 */
SG_EXTERN int sg_curl_options_add_endpoint(sg_curl_options *o, const char *url,
                                           const struct curl_slist *headers,
                                           const void *body, size_t body_len);

/**
 * sg_curl_options_set_endpoint_framing - endpoint @endpoint's own framing:
 * a provider profile (sg_profile_framing) or any sg_stream_config, used
 * instead of sg_curl_options_set_framing's for every attempt that goes to
 * that endpoint - a fallback to another provider, or to another
 * deployment whose stream differs, is framed and judged by its own rules:
 * its format, its clean end, its in-band errors and which are transient,
 * its first token, its usage, and what its error responses' bodies say.
 * The report names each attempt's profile (docs/report.md, "profile").
 *
 * @endpoint: 0-based, in the order of sg_curl_options_add_endpoint; it
 *   must have been added already.
 * @cfg: copied, its strings and list too (the classifier's user_data is
 *   borrowed); NULL gives the endpoint the operation's framing back.
 *
 * Default: none - every endpoint is framed by the operation's framing.
 * The stream's buffers are made again only when an attempt goes to an
 * endpoint framed otherwise than the attempt before it (no allocation:
 * they grow as bytes come).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes
 * (then nothing changed):
 *   SG_EINVAL  @o is NULL;
 *   SG_ERANGE  no endpoint @endpoint was added yet, or the limits of @cfg
 *              together need more than a size_t holds;
 *   SG_EUNSUPPORTED  SG_FORMAT_EVENTSTREAM in a library built without it;
 *   SG_ENOMEM  out of memory.
 * Thread-safety: touches only @o.
 */
SG_EXTERN int sg_curl_options_set_endpoint_framing(sg_curl_options *o, uint32_t endpoint,
                                                   const sg_stream_config *cfg);

/*
 * The callbacks.  Each runs on the thread that drives the operation, with
 * the user_data given to sg_curl_op_new.  Every one is NULL by default
 * (NULL removes one).
 */

/** One item, as it arrives.  Return 0 to go on; any other value cancels
 *  the operation (outcome cancelled, never retried).  Called from inside
 *  libcurl's write callback: do not free the operation or call
 *  curl_multi_* / sg_curl_* functions that drive it from here. */
typedef int (*sg_curl_item_cb)(sg_curl_op *op, const sg_item *item, void *user_data);
/** Attempt @attempt delivered items and then did not end cleanly (a
 *  partial stream, ended with @outcome): discard everything it delivered.
 *  A partial stream is never retried. */
typedef void (*sg_curl_discard_cb)(sg_curl_op *op, uint32_t attempt, sg_outcome outcome,
                                   void *user_data);
/** An attempt ended; @rec is its record with the decision taken (valid
 *  during the call). */
typedef void (*sg_curl_attempt_cb)(sg_curl_op *op, const sg_op_attempt *rec,
                                   void *user_data);
/** The operation ended (sg_curl_op_outcome has the answer).  Called from
 *  the loop, never from inside libcurl; the operation may be freed from
 *  here when a managed multi drove it (it has left the multi already). */
typedef void (*sg_curl_done_cb)(sg_curl_op *op, void *user_data);
/**
 * The body bytes of attempt @attempt's streaming (2xx) response exactly
 * as they arrived, before they are cut into items: called first, then the
 * item callback for the items they complete.  For a consumer that passes
 * the stream on byte for byte (a proxy): it keeps each attempt's bytes
 * until one of its items comes (hedges run several attempts at once; a
 * failed attempt's bytes are the discard callback's to drop).  Bytes past
 * the clean end are not given.  Return 0 to go on; SG_CURL_BYTES_PAUSE to
 * take none of them now: the read is paused (CURL_WRITEFUNC_PAUSE) and the
 * same bytes come again after sg_curl_op_resume(); any other value
 * cancels, as from the item callback.  While paused the attempt's clocks
 * run on.  Same context as the item callback.
 */
typedef int (*sg_curl_bytes_cb)(sg_curl_op *op, uint32_t attempt, const void *data,
                                size_t len, void *user_data);
/** The bytes callback's "not now": pause the read until sg_curl_op_resume(). */
#define SG_CURL_BYTES_PAUSE 2

/** sg_curl_options_set_on_item - see sg_curl_item_cb. */
SG_EXTERN int sg_curl_options_set_on_item(sg_curl_options *o, sg_curl_item_cb fn);
/** sg_curl_options_set_on_discard - see sg_curl_discard_cb. */
SG_EXTERN int sg_curl_options_set_on_discard(sg_curl_options *o, sg_curl_discard_cb fn);
/** sg_curl_options_set_on_attempt - see sg_curl_attempt_cb. */
SG_EXTERN int sg_curl_options_set_on_attempt(sg_curl_options *o, sg_curl_attempt_cb fn);
/** sg_curl_options_set_on_done - see sg_curl_done_cb. */
SG_EXTERN int sg_curl_options_set_on_done(sg_curl_options *o, sg_curl_done_cb fn);
/** sg_curl_options_set_on_bytes - see sg_curl_bytes_cb. */
SG_EXTERN int sg_curl_options_set_on_bytes(sg_curl_options *o, sg_curl_bytes_cb fn);

/* ------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------ */

/**
 * sg_curl_op_new - create an operation on @easy.
 *
 * @easy: a configured easy handle (URL, method, body...); the caller keeps
 *   ownership and must not free or reuse it until the operation is freed.
 *   Then it is the caller's plain handle again: the operation's callbacks,
 *   their data, its header list and error buffer are taken off it (the
 *   options it sets for each attempt - timeouts, NOSIGNAL and the like -
 *   stay as they were last set).
 * @policy: budget, clocks, retries (<streamguard/policy.h>); NULL means the
 *   policy defaults.  Copied.  The budget starts when the operation is run
 *   or attached, not here.
 * @opts: framing, transport settings, callbacks; NULL means defaults.
 *   Copied: operations made from the same @opts share one read-only copy
 *   (made by the first of them, again after a setter changed @opts), so
 *   a thousand operations from one options object hold one copy of its
 *   framing, headers and endpoints.  Several threads may make operations
 *   from the same @opts at once, while no setter runs on it.
 * @user_data: handed to every callback.
 *
 * An intent ledger, or any other record of what the operation did, plugs
 * into the policy as an observer (sg_op_options_set_observer), not here.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is set to NULL):
 *   SG_EINVAL  @out or @easy is NULL, or endpoints in @policy
 *              (sg_op_options_set_endpoints) but none in @opts;
 *   SG_ENOMEM  out of memory.
 * Thread-safety: touches only the new operation; @easy is only stored.
 */
SG_EXTERN int sg_curl_op_new(sg_curl_op **out, CURL *easy, const sg_op_options *policy,
                             const sg_curl_options *opts, void *user_data);

/**
 * sg_curl_op_free - free @op (NULL is fine).  A running operation is first
 * removed from its multi handle (and from its managed multi), without an
 * outcome and without on_done.  The easy handle is left to the caller, with
 * CURLOPT_HTTPHEADER and CURLOPT_ERRORBUFFER reset to NULL.  Never call it
 * from on_item (inside a libcurl callback).
 *
 * Returns nothing.
 * Thread-safety: only on the thread that owns @op (and its multi).
 */
SG_EXTERN void sg_curl_op_free(sg_curl_op *op);

/**
 * sg_curl_perform - run @op to its end, blocking the calling thread.
 *
 * It runs @op on a private managed multi (sg_curl_multi_new with @op's
 * clock) and frees that multi before returning.
 *
 * Returns 0 when the operation ran to an outcome - which may be any
 * outcome, read it with sg_curl_op_outcome() - or one of the following
 * negative error codes:
 *   SG_EINVAL  @op is NULL;
 *   SG_ESTATE  @op was already started;
 *   SG_ENOMEM  out of memory (it did not run);
 *   SG_ESYS    epoll or timerfd could not be created (it did not run), or
 *              epoll_wait failed mid-run (the transfer was removed and the
 *              operation left unfinished: free it); errno says why;
 *   SG_ECURL   curl_multi_init failed (it did not run);
 *   the negative code of the policy observer's on_intent when it refused
 *              the operation (it did not run; nothing was sent), e.g. the
 *              intent ledger's SG_EEXIST while the same key is unresolved.
 * Thread-safety: blocks the calling thread, which must own @op.
 */
SG_EXTERN int sg_curl_perform(sg_curl_op *op);

/**
 * sg_curl_op_outcome - the operation's outcome, once it has ended
 * (sg_curl_op_done).
 *
 * Returns sg_op_outcome() of its policy: the last attempt's outcome (or
 * refused / budget_exhausted when no attempt ran, cancelled when it was
 * cancelled between attempts); SG_OUTCOME_NONE before it has ended and
 * when @op is NULL.
 */
SG_EXTERN sg_outcome sg_curl_op_outcome(const sg_curl_op *op);

/**
 * sg_curl_op_done - has the operation ended?
 *
 * Returns true once it has ended (on_done has been called); false while it
 * is new, running or sleeping before a retry, and when @op is NULL.
 */
SG_EXTERN bool sg_curl_op_done(const sg_curl_op *op);

/**
 * sg_curl_op_policy - the policy state: attempts, records, decisions, for
 * the sg_op_* readers.
 *
 * Returns a pointer into @op, valid until it is freed; NULL when @op is
 * NULL or has not started (or its observer refused it).
 */
SG_EXTERN const sg_op *sg_curl_op_policy(const sg_curl_op *op);

/**
 * sg_curl_op_easy - the easy handle the operation runs on.
 *
 * Returns the @easy given to sg_curl_op_new (still the caller's), or NULL
 * when @op is NULL.
 */
SG_EXTERN CURL *sg_curl_op_easy(const sg_curl_op *op);

/**
 * sg_curl_op_user_data - the user_data given to sg_curl_op_new.
 *
 * Returns it, or NULL when @op is NULL.
 */
SG_EXTERN void *sg_curl_op_user_data(const sg_curl_op *op);

/**
 * sg_curl_op_error - why the last attempt failed, in words.
 *
 * Returns a NUL-terminated string inside @op (rewritten when the next
 * attempt starts, valid until @op is freed): libcurl's message for
 * transport_error or truncated, the framing error's sg_strerror() text for
 * protocol_error, "connect timed out (...)" when the connect clock fired,
 * else the outcome's name ("idle_timeout"); "" after ok, after an
 * http_error (the status says it), before any attempt ended, and for
 * NULL.
 */
SG_EXTERN const char *sg_curl_op_error(const sg_curl_op *op);

/**
 * sg_curl_op_error_body - what the server said in the error response (a
 * final status of 400 or more) that ended the last attempt: its body,
 * read after the head decided the attempt http_error, until it ends or
 * for the drain time at most, within the lease (so the connection may be
 * reused).  The first SG_ERROR_BODY_MAX bytes, as they came (not
 * NUL-terminated; a Content-Encoding the easy handle asked for undone);
 * never in the report.  A cancel while it arrives stops the operation (no
 * retry).  None when libcurl answered the response itself (an auth
 * challenge) or with hedging (the head is the answer there).
 *
 * Returns the bytes inside @op (valid until the next attempt starts or
 * @op is freed) and their count in *@len (when @len is not NULL), or NULL
 * and 0: no attempt ended so, its body was empty, or @op is NULL.
 */
SG_EXTERN const char *sg_curl_op_error_body(const sg_curl_op *op, size_t *len);

/**
 * sg_curl_op_report - the execution report (JSON, docs/report.md) into
 * @buf, as of the operation clock's current time; see sg_op_report_write
 * for @buf, @len and @needed.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @op is NULL or was never started, or @buf is NULL while
 *               @len > 0;
 *   SG_ENOBUFS  @len is too small (a truncated, NUL-terminated prefix is in
 *               @buf when @len > 0).
 */
SG_EXTERN int sg_curl_op_report(const sg_curl_op *op, char *buf, size_t len,
                                size_t *needed);

/**
 * sg_curl_op_cancel - cancel @op: a running attempt's transfer is removed
 * at the next tick (outcome cancelled, never retried); an operation
 * sleeping before a retry ends there with outcome cancelled (reason
 * cancelled), and so does one whose intent its observer is recording
 * (nothing sent, even when the intent's answer came in before the step:
 * the cancel came first).  The operation is due at once: on a managed
 * multi the next sg_curl_multi_step ends it; on the caller's own multi,
 * sg_curl_op_next_deadline() says INT64_MIN, so call sg_curl_op_tick.
 * Harmless on an operation that is not running or has ended.  Never call
 * it from on_item (return non-zero there instead).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL.
 */
SG_EXTERN int sg_curl_op_cancel(sg_curl_op *op);

/**
 * sg_curl_op_resume - unpause the reads that on_bytes paused
 * (SG_CURL_BYTES_PAUSE), on every attempt of @op in flight.  libcurl may
 * give the held bytes again from inside this call, so on_bytes and on_item
 * may run before it returns: call it from the loop, never from inside one
 * of @op's callbacks.  Harmless when nothing is paused.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL.
 */
SG_EXTERN int sg_curl_op_resume(sg_curl_op *op);

/** true while on_bytes has paused a read of @op (sg_curl_op_resume);
 *  false once the attempt or the operation has ended. */
SG_EXTERN bool sg_curl_op_paused(const sg_curl_op *op);

#ifdef __cplusplus
}
#endif

/* Running operations on a multi handle - the managed one or your own -
 * in a header of its own. */
#include <streamguard/curl_multi.h>

#endif /* STREAMGUARD_CURL_H */
