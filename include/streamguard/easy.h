/*
 * streamguard easy: one guarded streaming operation in a few calls.
 *
 *   sg_easy *e;
 *   sg_easy_new(&e);
 *   sg_easy_set_url(e, "https://api.example.com/v1/chat/completions");
 *   sg_easy_set_profile(e, "openai");            // the stream's semantics
 *   sg_easy_set_body(e, body, body_len);         // a POST
 *   sg_easy_set_first_item_timeout(e, SG_SEC(10));
 *   sg_easy_set_on_item(e, on_token, NULL);
 *   sg_easy_perform(e);                          // 0: it ran to an outcome
 *   sg_easy_outcome(e);                          // ok, idle_timeout, ...
 *   sg_easy_free(e);
 *
 * The handle holds everything one operation needs: where to send it, the
 * provider profile that says what the stream means (its clean end, its
 * keepalives, its first token, its in-band errors), the request body and
 * headers, the budget shared by every attempt and backoff sleep, the clocks
 * of each attempt (connect, first item, idle between items, stream total),
 * how many attempts, the idempotency key that makes a POST safe to retry,
 * and what to call with each item.  sg_easy_perform() runs the operation
 * to its end on the calling thread, on a libcurl multi handle of its own
 * (the libcurl transport's, <streamguard/curl.h>: one timer armed for the
 * earliest deadline, no polling), then the outcome, the execution report
 * (JSON, docs/report.md) and the attempt records can be read until the
 * handle is freed or performs again.  What each outcome lets a caller
 * conclude: docs/outcomes.md.
 *
 * Conventions.  Every function that can fail returns 0 or a negative
 * SG_E* code (sg_strerror() words it).  Each setter validates its value at
 * once; one that fails changes nothing, and the handle remembers the first
 * failure: sg_easy_perform() then refuses to run with that code, so a
 * configuration the caller did not get is never sent.  Start over with a
 * new handle.  Durations are int64_t nanoseconds (SG_MS(), SG_SEC()); a
 * clock set to 0 is off.  Values are copied: the URL, body, headers, key,
 * CA file and profile name may be freed or reused once the setter returns.
 * Handles are borrowed: a callback's user_data must outlive the perform.
 *
 * Security.  TLS verification is on and cannot be turned off here: the
 * server must prove its name with a certificate its subject alternative
 * names cover, signed by a CA libcurl trusts (or one sg_easy_set_ca_file()
 * names, for a test server's CA).  Only http:// and
 * https:// URLs are accepted; redirects are not followed.  The report
 * never holds the idempotency key, a header value or a body.
 *
 * libcurl.  This header includes no libcurl header and a caller needs
 * none: sg_easy_new() calls curl_global_init() and sg_easy_free()
 * curl_global_cleanup() (libcurl counts them), so a program that uses
 * libcurl itself keeps working as before.
 *
 * Thread-safety: a handle belongs to one thread at a time; distinct handles
 * may perform on distinct threads at once (each perform has its own multi
 * handle).  sg_easy_new() and sg_easy_free() call libcurl's global init
 * and cleanup, which are thread-safe only when libcurl says so
 * (CURL_VERSION_THREADSAFE in curl_version_info(), libcurl 7.84 and later
 * built with atomics - Debian 12's is); with an older libcurl make the
 * first handle before starting threads and free the last after joining
 * them.  The callbacks run on the thread that called sg_easy_perform(),
 * from inside it.
 *
 * Needs the libcurl transport (a build without it has no easy handle).
 */
#ifndef STREAMGUARD_EASY_H
#define STREAMGUARD_EASY_H

#include <streamguard/core.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * sg_easy - one guarded streaming operation and its settings.  Opaque;
 * made by sg_easy_new, freed by sg_easy_free.
 */
typedef struct sg_easy sg_easy;

/**
 * sg_easy_discard_cb - attempt @attempt (1-based) delivered items and then
 * did not end cleanly (@outcome: idle_timeout, truncated, provider_error,
 * ...): a partial stream.  Throw away everything its items gave you; it is
 * never retried or resumed, and the operation ends with @outcome.  Called
 * once per partial attempt, from inside sg_easy_perform().
 */
typedef void (*sg_easy_discard_cb)(uint32_t attempt, sg_outcome outcome, void *user_data);

/**
 * sg_easy_new - a handle with every option at its default.
 *
 * Calls curl_global_init(CURL_GLOBAL_DEFAULT) (see "Thread-safety" above).
 *
 * Returns 0 and sets *@out if it succeeds, or one of the following negative
 * error codes (then *@out, when @out is not NULL, is NULL):
 *   SG_EINVAL  @out is NULL;
 *   SG_ENOMEM  out of memory;
 *   SG_ECURL   curl_global_init() failed.
 * Thread-safety: see the top of this header.
 */
SG_EXTERN int sg_easy_new(sg_easy **out);

/**
 * sg_easy_free - frees @e (NULL is fine): its settings, its operation's
 * results and records, and its libcurl handle; calls curl_global_cleanup().
 * Never from inside one of @e's callbacks.
 *
 * Returns nothing.
 * Thread-safety: on the thread that owns @e.
 */
SG_EXTERN void sg_easy_free(sg_easy *e);

/* ------------------------------------------------------------------------
 * The request
 * ------------------------------------------------------------------------ */

/**
 * sg_easy_set_url - where the request goes: an absolute http:// or https://
 * URL (RFC 3986, as libcurl parses it), copied.  Put credentials in a
 * header, not in the URL: the report names no URL, but logs often do.
 * Default: none; sg_easy_perform() needs one.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e or @url is NULL, or @url does not parse or its scheme is
 *              neither http nor https;
 *   SG_ENOMEM  out of memory.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_url(sg_easy *e, const char *url);

/**
 * sg_easy_set_profile - the stream's semantics, from a built-in provider
 * profile (docs/profiles.md): "openai" (Chat Completions, and vLLM,
 * llama.cpp, Mistral, OpenRouter), "openai-responses", "anthropic",
 * "gemini", "ollama", "bedrock-converse", "bedrock-invoke"
 * (sg_profile_names() lists them).  A profile says how the body is framed,
 * which item is the clean end (a body without it is truncated), which are
 * keepalives (never items) and metadata (held until the first token), and
 * how an in-band error looks (the outcome provider_error, with the
 * provider's type and message).  Under a profile the first-item clock is
 * the time to the first token.  NULL removes the profile.
 * Default: none - the body is SSE, every event is an item, and the body's
 * end is the clean end.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL, or no built-in profile has the name @name.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_profile(sg_easy *e, const char *name);

/**
 * sg_easy_set_body - the request body, @len bytes at @body (any bytes),
 * copied; with a body the request is a POST.  NULL with @len 0 removes it.
 * Set the Content-Type with sg_easy_add_header().
 * Default: none - the request is a GET.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL, or @body is NULL while @len > 0;
 *   SG_ENOMEM  out of memory.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_body(sg_easy *e, const void *body, size_t len);

/**
 * sg_easy_add_header - adds one request header line, "Name: value",
 * copied, sent on every attempt in the order added (after them the
 * library's own: Idempotency-Key when a key is set).  The name is an HTTP
 * token; the value holds no control character but tab (so no CR or LF:
 * no header can be smuggled in).
 * libcurl sends Host, Accept, and for a body Content-Length and
 * Content-Type: an added header of the same name replaces libcurl's, and
 * "Name:" with nothing after the colon removes it.
 * Default: none.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e or @line is NULL, or @line is not "Name: value" with a
 *              token for a name and no control character but tab;
 *   SG_ENOMEM  out of memory.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_add_header(sg_easy *e, const char *line);

/**
 * sg_easy_set_ca_file - a PEM file of CA certificates to trust in place of
 * libcurl's CA bundle (CURLOPT_CAINFO), e.g. a test server's CA; the path
 * is copied, the file read when a connection is made.  Verification stays
 * on: the server must present a certificate such a CA signed, for its
 * name.  NULL restores the default.  Default: libcurl's CA bundle.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL, or @path is "";
 *   SG_ENOMEM  out of memory.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_ca_file(sg_easy *e, const char *path);

/* ------------------------------------------------------------------------
 * The budget, the clocks, the attempts
 * ------------------------------------------------------------------------ */

/**
 * sg_easy_set_budget - the operation's one budget: every attempt and every
 * backoff sleep is leased from it, and it is never extended.  When it is
 * the limit that stops an attempt, the outcome is budget_exhausted.
 * Default: 60 s.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL or @ns <= 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_budget(sg_easy *e, int64_t ns);

/**
 * sg_easy_set_connect_timeout - each attempt's connect clock: from its
 * start until the connection is made (TLS included); outcome
 * connect_timeout.  @ns 0 turns it off.  Default: 0 (off: the budget
 * bounds it).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_connect_timeout(sg_easy *e, int64_t ns);

/**
 * sg_easy_set_first_item_timeout - each attempt's first-item clock: from
 * its start to its first item - under a profile, its first token (time to
 * first token); outcome first_item_timeout.  An attempt that failed before
 * its first item delivered nothing and is retried when safe.  @ns 0 turns
 * it off.  Default: 0 (off).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_first_item_timeout(sg_easy *e, int64_t ns);

/**
 * sg_easy_set_idle_timeout - each attempt's idle clock: from each item to
 * the next, starting at the first; keepalive comments and events never
 * reset it; outcome idle_timeout (a partial stream: see
 * sg_easy_set_on_discard).  @ns 0 turns it off.  Default: 0 (off).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_idle_timeout(sg_easy *e, int64_t ns);

/**
 * sg_easy_set_stream_timeout - each attempt's stream-total clock: from its
 * start to the end of its stream; outcome stream_timeout.  @ns 0 turns it
 * off.  Default: 0 (off).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL or @ns < 0;
 *   SG_ERANGE  @ns > SG_DURATION_MAX.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_stream_timeout(sg_easy *e, int64_t ns);

/**
 * sg_easy_set_attempts - how many attempts the operation may make, the
 * first included (1: never retry).  A failed attempt is retried only when
 * that is safe (docs/design.md, "Retry rules"): it delivered nothing, and
 * the request cannot have taken effect or may be repeated - a GET, a
 * request with an idempotency key, or one the server refused before
 * processing it (429, or 503 with Retry-After).  Each retry waits a capped
 * exponential backoff with jitter, or the server's Retry-After, leased
 * from the budget.  Default: 3.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL or @n == 0;
 *   SG_ERANGE  @n > SG_OP_MAX_ATTEMPTS.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_attempts(sg_easy *e, uint32_t n);

/**
 * sg_easy_set_idempotency_key - the Idempotency-Key header sent, the same,
 * on every attempt: it makes a POST safe to retry after it was sent (the
 * server answers a repeat with the first answer).  Use one key per
 * business operation, never the same for two.  Printable ASCII
 * (0x21 .. 0x7E), 1 .. SG_OP_IDEMPOTENCY_KEY_MAX characters, copied; the
 * report says only whether there was one.  NULL removes it.
 * Default: none - a POST that may have taken effect is not retried; it
 * ends outcome_unknown (sg_op_attempt_at(sg_easy_op(e), i)->outcome_unknown)
 * for the caller to reconcile.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL, or @key is empty or holds other characters;
 *   SG_ERANGE  @key is longer than SG_OP_IDEMPOTENCY_KEY_MAX.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_idempotency_key(sg_easy *e, const char *key);

/* ------------------------------------------------------------------------
 * Callbacks
 * ------------------------------------------------------------------------ */

/**
 * sg_easy_set_on_item - @fn is called with each item as it arrives (an SSE
 * event, an NDJSON line; never a keepalive), from inside sg_easy_perform(),
 * with @user_data (borrowed).  Under a profile item->kind says what it is:
 * SG_ITEM_TOKEN and SG_ITEM_END_TOKEN carry generated output, SG_ITEM_META
 * is metadata (held until the first token, then delivered just before it),
 * SG_ITEM_END the clean end.  The item and its views are valid during the
 * call only.  Return 0 to go on; any other value cancels the operation
 * (outcome cancelled, never retried).  Do not call @e's functions from
 * @fn.  NULL removes it (items are counted, not delivered).
 * Default: none.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_on_item(sg_easy *e, sg_item_cb fn, void *user_data);

/**
 * sg_easy_set_on_discard - @fn is called when an attempt that delivered
 * items did not end cleanly (see sg_easy_discard_cb), with @user_data
 * (borrowed).  A caller that shows or keeps items as they arrive sets one:
 * what a partial stream delivered is not an answer.  NULL removes it.
 * Default: none (the outcome and the report still say partial).
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @e is NULL.
 * Thread-safety: on the thread that owns @e, never while it performs.
 */
SG_EXTERN int sg_easy_set_on_discard(sg_easy *e, sg_easy_discard_cb fn, void *user_data);

/* ------------------------------------------------------------------------
 * Running it, and what happened
 * ------------------------------------------------------------------------ */

/**
 * sg_easy_perform - runs the operation to its end, blocking the calling
 * thread: attempts, backoff sleeps and Retry-After waits, all within the
 * budget; the callbacks run from inside.  Each call runs a new operation
 * with the settings as they are then (a new budget; the same idempotency
 * key unless it was changed), and first frees the previous operation's
 * results and records.
 *
 * Returns 0 when the operation ran to an outcome - whatever the outcome: a
 * timeout, an HTTP 500 and a refusal are answers, read them with
 * sg_easy_outcome() - or one of the following negative error codes, when
 * it could not run (then there is no outcome, SG_OUTCOME_NONE, but
 * from inside a callback, where the call changes nothing):
 *   SG_EINVAL  @e is NULL, or no URL was set;
 *   SG_ESTATE  called from inside one of @e's callbacks;
 *   the code of the first setter that failed on @e (SG_EINVAL, SG_ERANGE,
 *              SG_ENOMEM; SG_ESTATE for one called from inside a
 *              callback): nothing was sent;
 *   SG_ENOMEM  out of memory;
 *   SG_ECURL   libcurl could not make or set up a handle;
 *   SG_ESYS    epoll or timerfd could not be created, or epoll_wait failed
 *              mid-run (the transfer was dropped); errno says why.
 * Thread-safety: blocks the calling thread, which must own @e.
 */
SG_EXTERN int sg_easy_perform(sg_easy *e);

/**
 * sg_easy_outcome - how the operation ended: its last attempt's outcome,
 * or refused / budget_exhausted when no attempt could run
 * (docs/outcomes.md says what each lets a caller conclude).
 *
 * Returns the outcome once sg_easy_perform() returned 0;
 * SG_OUTCOME_NONE before that, after a perform that returned a
 * negative code, and when @e is NULL.
 * Thread-safety: on the thread that owns @e.
 */
SG_EXTERN sg_outcome sg_easy_outcome(const sg_easy *e);

/**
 * sg_easy_error - why the operation did not end ok, in words, for a log or
 * a message: "HTTP 429" for http_error (the body is sg_easy_error_body's),
 * "TYPE: MESSAGE" for provider_error (the provider's own, e.g.
 * "overloaded_error: Overloaded"), what libcurl, TLS or the system said
 * for transport_error and truncated, the framing error for
 * protocol_error, and otherwise the outcome's name ("idle_timeout").
 * Never a header value or an idempotency key.
 *
 * Returns a NUL-terminated string inside @e, valid until the next perform
 * or sg_easy_free: "" after ok, before any outcome, and when @e is NULL.
 * Thread-safety: on the thread that owns @e.
 */
SG_EXTERN const char *sg_easy_error(const sg_easy *e);

/**
 * sg_easy_error_body - what the server said in the error response (a
 * status of 400 or more) that ended the last attempt: its first
 * SG_ERROR_BODY_MAX bytes, as they came (not NUL-terminated).  Never in
 * the report.
 *
 * Returns the bytes inside @e (valid until the next perform or
 * sg_easy_free) and their count in *@len (when @len is not NULL), or NULL
 * and 0 when the last attempt ended otherwise, its body was empty, there
 * is no outcome, or @e is NULL.
 * Thread-safety: on the thread that owns @e.
 */
SG_EXTERN const char *sg_easy_error_body(const sg_easy *e, size_t *len);

/**
 * sg_easy_report - the execution report of the operation (JSON,
 * docs/report.md: the outcome, phase, decision and reason, and for every
 * attempt its granted clocks, times, status, items and decision) into
 * @buf, NUL-terminated.  *@needed (when not NULL) receives the size the
 * document needs, NUL included, whether or not it fitted: ask with
 * (NULL, 0, &needed) first to size @buf.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL   @e is NULL, or @buf is NULL while @len > 0;
 *   SG_ESTATE   there is no outcome (no perform returned 0 yet);
 *   SG_ENOBUFS  @len is too small (a truncated, NUL-terminated prefix is
 *               in @buf when @len > 0).
 * Thread-safety: on the thread that owns @e.
 */
SG_EXTERN int sg_easy_report(const sg_easy *e, char *buf, size_t len, size_t *needed);

/**
 * sg_easy_op - the finished operation, for readers who want more than the
 * outcome: sg_op_final_reason(), sg_op_attempt_count() and
 * sg_op_attempt_at() (each attempt's outcome, phase, status, items, flags
 * partial / retryable / outcome_unknown, error, provider error type),
 * <streamguard/policy.h>.
 *
 * Returns a pointer inside @e, valid until the next perform or
 * sg_easy_free; NULL when there is no outcome or @e is NULL.
 * Thread-safety: on the thread that owns @e.
 */
SG_EXTERN const sg_op *sg_easy_op(const sg_easy *e);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_EASY_H */
