/*
 * streamguard over libcurl, on a multi handle: many guarded operations on
 * one thread.  Two ways (the third, blocking, is sg_curl_perform in
 * <streamguard/curl.h>):
 *   - a multi handle the library manages (sg_curl_multi: epoll plus one
 *     timerfd armed for the earliest deadline of libcurl and of every
 *     operation): sg_curl_multi_new(), sg_curl_multi_add() per operation,
 *     then sg_curl_multi_run() - or sg_curl_multi_fd() +
 *     sg_curl_multi_step() from the caller's own event loop;
 *   - the caller's own CURLM: sg_curl_op_attach(), then after each of the
 *     caller's curl_multi_* calls, sg_curl_op_complete() for the op's
 *     finished transfer (curl_multi_info_read) and sg_curl_op_tick()
 *     whenever sg_curl_op_next_deadline() has passed.
 * The operations themselves, their options and callbacks are in
 * <streamguard/curl.h>, which includes this file.
 *
 * Thread-safety: an operation or a multi belongs to one thread at a time
 * (the functions taking one run on the thread that owns it, unless said
 * otherwise); distinct operations and multis may run on distinct threads.
 *
 * Include <streamguard/curl.h> rather than this file directly.
 */
#ifndef STREAMGUARD_CURL_MULTI_H
#define STREAMGUARD_CURL_MULTI_H

#include <streamguard/core.h>
#include <streamguard/curl.h>
#include <streamguard/health.h>
#include <streamguard/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * sg_curl_multi - a managed libcurl multi handle: epoll plus one timerfd,
 * running many sg_curl_op on one thread.  Opaque; create it with
 * sg_curl_multi_new, free it with sg_curl_multi_free.
 */
typedef struct sg_curl_multi sg_curl_multi;

/* ------------------------------------------------------------------------
 * The caller's own multi handle
 * ------------------------------------------------------------------------ */

/**
 * sg_curl_op_attach - start @op on the caller's @multi at @now: starts the
 * budget and adds the first attempt's transfer (or ends the operation at
 * once when nothing can be leased - then on_done has been called, and may
 * have freed @op).
 *
 * A transfer that cannot be started (curl_multi_add_handle or building the
 * request headers failed) is not an error of this call: the attempt is
 * recorded as transport_error in phase connect, and the policy retries it
 * after a backoff (sg_curl_op_next_deadline) or ends the operation.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op or @multi is NULL;
 *   SG_ESTATE  @op was already started;
 *   SG_EUNSUPPORTED  the policy hedges (sg_op_options_set_hedging): hedges
 *              run only on a managed multi (sg_curl_multi_add), which
 *              drives the attempts beside the first;
 *   the observer's on_intent code when it refused the operation: nothing
 *              was sent and @op was not added (it stays unstarted).
 * Thread-safety: only on the thread that owns @op and @multi.
 */
SG_EXTERN int sg_curl_op_attach(sg_curl_op *op, CURLM *multi, int64_t now);

/**
 * sg_curl_op_complete - the caller saw CURLMSG_DONE for sg_curl_op_easy(op)
 * with @result; @now is read after the curl_multi_* call that finished it
 * (an attempt that a clock stopped inside that call is never judged
 * before the clock's instant).  Removes the transfer from the multi, classifies the
 * attempt and either schedules a retry (see sg_curl_op_next_deadline) or ends the
 * operation.
 *
 * When the operation ends here on_done is called, and may free @op.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @op is NULL;
 *   SG_ESTATE  no transfer of @op is in the multi (not started, sleeping
 *              before a retry, removed by sg_curl_op_tick, or ended).
 * Thread-safety: only on the thread that owns @op and its multi; never
 * from inside a libcurl callback.
 */
SG_EXTERN int sg_curl_op_complete(sg_curl_op *op, CURLcode result, int64_t now);

/**
 * sg_curl_op_next_deadline - when @op next needs sg_curl_op_tick.
 *
 * Returns an absolute instant on the operation's clock: the running
 * attempt's earliest guard deadline (sg_guard_next_deadline), the end of
 * the drain after a terminal sentinel, or the end of a backoff sleep;
 * SG_TIME_NEVER once it has ended; -1 when @op is NULL or not started.
 * The value moves
 * as items arrive: read it again after each libcurl call.
 */
SG_EXTERN int64_t sg_curl_op_next_deadline(const sg_curl_op *op);

/**
 * sg_curl_op_tick - enforce @op's deadlines at @now: abort the running
 * transfer when a clock expired (it is removed from the multi at once), or
 * start the next attempt when a backoff sleep is over.  Harmless when
 * nothing is due.  Never call it from inside a libcurl callback.
 *
 * When the operation ends here on_done is called, and may free @op.  A
 * retry whose transfer cannot be started is recorded as a transport_error
 * attempt (as in sg_curl_op_attach), not returned.
 *
 * Returns 1 when the operation ended during this call (on_done has run:
 * do not touch @op again unless you know on_done kept it), 0 when it goes
 * on (nothing was due, or the next attempt started), or one of the
 * following negative error codes:
 *   SG_EINVAL  @op is NULL.
 * Thread-safety: only on the thread that owns @op and its multi.
 */
SG_EXTERN int sg_curl_op_tick(sg_curl_op *op, int64_t now);

/* ------------------------------------------------------------------------
 * The managed multi: many operations, one thread, one timer
 * ------------------------------------------------------------------------ */

/**
 * sg_curl_multi_new - a libcurl multi handle driven by epoll and one
 * timerfd, armed for the earliest deadline among libcurl's own timer and
 * every operation's clocks and backoff sleeps.  @clock: NULL = monotonic;
 * the struct is copied, its user_data is borrowed.  The timerfd runs on
 * CLOCK_MONOTONIC, so an injected clock must read that time base.  An
 * HTTP/2 connection it opens carries as many streams as the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS allows: libcurl's own cap of 100
 * (CURLMOPT_MAX_CONCURRENT_STREAMS) is lifted, since past it libcurl 7.88
 * opens a new connection for each waiting transfer.
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes:
 *   SG_EINVAL  @out is NULL;
 *   SG_ENOMEM  out of memory;
 *   SG_ESYS    epoll or timerfd could not be created (errno says why);
 *   SG_ECURL   curl_multi_init failed.
 * Thread-safety: safe from any thread; the new multi belongs to the
 * calling thread.
 */
SG_EXTERN int sg_curl_multi_new(sg_curl_multi **out, const sg_clock *clock);

/**
 * sg_curl_multi_free - frees @m (NULL is fine).  Operations still in it are
 * detached, not freed and not ended: their transfers are removed, on_done
 * is not called, and they can only be freed (sg_curl_op_free).
 *
 * Returns nothing.
 * Never from a callback it runs.
 */
SG_EXTERN void sg_curl_multi_free(sg_curl_multi *m);

/**
 * sg_curl_multi_add - start @op in @m now (on @m's clock).  on_done is
 * called from sg_curl_multi_step/run when it ends (possibly at once, from
 * inside this call, when nothing can be leased).  A transfer libcurl
 * refuses is not an error of this call: it is recorded as a transport_error
 * attempt and retried or ended by the policy (as in sg_curl_op_attach).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @m or @op is NULL;
 *   SG_ESTATE  @op was already started;
 *   SG_ENOMEM  out of memory (@op was not started);
 *   the observer's on_intent code when it refused the operation: nothing
 *              was sent and @op was not added.
 * Thread-safety: only on the thread that owns @m and @op.
 */
SG_EXTERN int sg_curl_multi_add(sg_curl_multi *m, sg_curl_op *op);

/**
 * sg_curl_multi_set_retry_budget - operations added to @m from now on
 * whose policy names no retry budget (sg_op_options_set_retry_budget)
 * take their retries from @b, shared by all of them (and by anything
 * else the caller gives @b to: it is thread-safe).  Borrowed: @b must
 * outlive those operations.  NULL: none (the default).
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @m is NULL.
 * Thread-safety: the thread that drives @m.
 */
SG_EXTERN int sg_curl_multi_set_retry_budget(sg_curl_multi *m, sg_retry_budget *b);

/**
 * sg_curl_multi_set_health - operations added to @m from now on whose
 * policy names no endpoint health (sg_op_options_set_health) share @h
 * (<streamguard/health.h>).  Borrowed: @h must outlive them.  NULL: none.
 * Default: one of @m's own, made at the first sg_curl_multi_add and freed
 * with @m (sg_curl_perform's multi has none: the options' health or
 * nothing).
 *
 * Returns 0 if it succeeds, or SG_EINVAL when @m is NULL.
 * Thread-safety: the thread that drives @m.
 */
SG_EXTERN int sg_curl_multi_set_health(sg_curl_multi *m, sg_health *h);

/**
 * sg_curl_multi_set_read_buffer_release - after how long without a read a
 * running transfer's read buffer goes back to the system, when libcurl's
 * read buffers are placed for it (sg_curl_global_init; HTTP/1.x
 * responses only - see there).  The pages go back at the end of a step
 * of the multi once @quiet_ns has passed - a step that runs anyway, or one
 * the timer runs for every buffer due within half of @quiet_ns - in the
 * room between the multi's clocks (never in front of a clock due within a
 * millisecond), at most once per quiet spell.  Each costs a madvise and,
 * at the next read, a page fault: a few microseconds per item on streams
 * whose items come further apart than @quiet_ns (bench/RESULTS.md),
 * nothing while they come closer together.
 *
 * @quiet_ns: 0 .. SG_DURATION_MAX (0: at the end of every step that read),
 *   or SG_TIME_NEVER: never.  Default 500 ms.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @m is NULL, or @quiet_ns is negative;
 *   SG_ERANGE  @quiet_ns is above SG_DURATION_MAX and not SG_TIME_NEVER.
 * Thread-safety: only on the thread that owns @m.
 */
SG_EXTERN int sg_curl_multi_set_read_buffer_release(sg_curl_multi *m, int64_t quiet_ns);

/**
 * sg_curl_multi_step - wait at most @max_wait_ns (< 0: until something is
 * due; 0: do not wait; rounded up to whole ms, though the timer wakes it
 * at a clock's nanosecond) for sockets or the timer, then run what is
 * due.  The operations' callbacks run from inside this call.  A clock
 * that comes due while the sockets found ready are read is decided (and
 * told) between one socket's read and the next, not after all of them (a
 * read of an HTTP/2 connection runs every transfer on it in libcurl
 * 7.88).  Operations whose clocks are due together are all decided, and
 * told (on_done, on_attempt), before the server of any of them is: then
 * each stopped attempt's HTTP/1.x connection is shut down (the server
 * reads its end), and a transfer on any other connection is removed from
 * libcurl (an HTTP/2 stream is reset).  Removing a transfer whose connection was shut
 * down (libcurl's bookkeeping and the close, ~12 us each) waits while
 * another clock comes due within 1 ms, and goes in the room between
 * clocks, 20 ms after its attempt stopped at the latest: such removals
 * may outlast this call, and a later step (the timer is armed for the
 * clock they wait for), sg_curl_multi_run, sg_curl_op_free or
 * sg_curl_multi_free completes them.  With @max_wait_ns < 0 and nothing
 * running it removes what is left and returns at once.
 *
 * Returns the number of operations still running (>= 0), or one of the
 * following negative error codes:
 *   SG_EINVAL  @m is NULL;
 *   SG_ESYS    epoll_wait failed (not EINTR; errno says why).
 * Never from a callback it runs.
 */
SG_EXTERN int sg_curl_multi_step(sg_curl_multi *m, int64_t max_wait_ns);

/**
 * sg_curl_multi_run - step until no operation is running and every
 * stopped transfer has left libcurl; returns at once when none is.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @m is NULL;
 *   SG_ESYS    epoll_wait failed (not EINTR; errno says why): the
 *              operations still running stay in @m.
 * Never from a callback it runs.
 */
SG_EXTERN int sg_curl_multi_run(sg_curl_multi *m);

/**
 * sg_curl_multi_fd - a file descriptor that polls readable whenever
 * sg_curl_multi_step(m, 0) has work (an epoll fd), for embedding @m in
 * another event loop: poll it with no timeout of your own and call
 * sg_curl_multi_step(m, 0) after each wake-up.  @m keeps its one timer (a
 * timerfd in the epoll set) armed for the earliest deadline of libcurl
 * and every operation, so the fd also wakes the loop when a clock is due
 * (examples/curl_poll_loop.c); a wake-up with nothing due re-arms.
 *
 * Returns the epoll fd, owned by @m (do not close it; valid until
 * sg_curl_multi_free), or -1 when @m is NULL.
 */
SG_EXTERN int sg_curl_multi_fd(const sg_curl_multi *m);

/**
 * sg_curl_multi_running - the number of operations @m is running.
 *
 * Returns how many operations were added and have not ended (sleeping
 * before a retry included; freed or detached ones excluded), or SG_EINVAL
 * when @m is NULL.
 */
SG_EXTERN int sg_curl_multi_running(const sg_curl_multi *m);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_CURL_MULTI_H */
