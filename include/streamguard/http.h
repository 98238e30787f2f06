/*
 * streamguard http: the HTTP fields a guarded client reads and writes -
 * Retry-After (delta-seconds or HTTP-date), retry-after-ms, HTTP-date, and
 * the deadline a request carries across a process boundary (X-Deadline-Ms,
 * grpc-timeout) - as pure functions: no state, no clock read, no
 * allocation.  The policy uses them on every attempt; a server (sg-proxy)
 * or a caller's own transport uses them directly.
 *
 * Thread-safety: every function is pure.
 *
 * Include <streamguard/streamguard.h> rather than this file directly.
 */
#ifndef STREAMGUARD_HTTP_H
#define STREAMGUARD_HTTP_H

#include <streamguard/core.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * Retry-After and HTTP-date (RFC 9110 §10.2.3, §5.6.7).  Values are field
 * values as RFC 9110 defines them: without the leading or trailing
 * whitespace, which is therefore malformed here.
 * ------------------------------------------------------------------------ */

/**
 * sg_http_date_parse - parses an HTTP-date in any of the three formats:
 * IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", RFC 850
 * "Sunday, 06-Nov-94 08:49:37 GMT" and asctime "Sun Nov  6 08:49:37 1994".
 * Names are case-sensitive; the day name must be the date's weekday; the
 * day must exist in its month; seconds may be 60 (leap second).  A two-digit
 * RFC 850 year is placed in the century of @wall_now_s's year, less 100
 * when that is more than 50 years ahead (RFC 9110 §5.6.7).
 *
 * Returns 0 and sets *@unix_s if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL      @value or @unix_s is NULL, or an RFC 850 date is given
 *                  while @wall_now_s <= 0 (the century is unknown);
 *   SG_EMALFORMED  @value is not an HTTP-date.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_http_date_parse(const char *value, size_t len, int64_t wall_now_s,
                                 int64_t *unix_s);

/**
 * sg_retry_after_parse - parses a Retry-After value into a delay: delta
 * seconds (1*DIGIT; values beyond SG_DURATION_MAX saturate there), or an
 * HTTP-date minus @wall_now_s (a date in the past is a delay of 0).
 *
 * Returns 0 and sets *@delay_ns if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL      @value or @delay_ns is NULL, or the value is an HTTP-date
 *                  and @wall_now_s <= 0;
 *   SG_EMALFORMED  neither delta-seconds nor an HTTP-date.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_retry_after_parse(const char *value, size_t len, int64_t wall_now_s,
                                   int64_t *delay_ns);

/**
 * sg_retry_after_ms_parse - parses a retry-after-ms value (the milliseconds
 * OpenAI's and Azure's servers send beside Retry-After) into a delay:
 * 1*DIGIT, optionally "." 1*DIGIT (a fraction of a millisecond, kept to
 * the nanosecond; further digits are dropped).  Values beyond
 * SG_DURATION_MAX saturate there.  No sign, exponent or whitespace.
 *
 * Returns 0 and sets *@delay_ns if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL      @value or @delay_ns is NULL;
 *   SG_EMALFORMED  anything else.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_retry_after_ms_parse(const char *value, size_t len, int64_t *delay_ns);

/* ------------------------------------------------------------------------
 * Deadline propagation: X-Deadline-Ms and grpc-timeout.
 * ------------------------------------------------------------------------ */

/** Room for any sg_deadline_ms_format or sg_grpc_timeout_format output,
 *  NUL included. */
#define SG_DEADLINE_VALUE_MAX 24

/**
 * sg_deadline_ms_format - writes @ns as whole milliseconds, rounded down
 * (never promise more than is left), e.g. "4213", NUL-terminated.
 *
 * Returns the length written (NUL not counted) if it succeeds, or one of
 * the following negative error codes:
 *   SG_EINVAL   @buf is NULL or @ns < 0;
 *   SG_ENOBUFS  @len is too small (SG_DEADLINE_VALUE_MAX always fits).
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_deadline_ms_format(int64_t ns, char *buf, size_t len);

/**
 * sg_deadline_ms_parse - parses a whole-millisecond value (1*DIGIT, no sign,
 * no space) into nanoseconds; values beyond SG_DURATION_MAX saturate there.
 *
 * Returns 0 and sets *@ns if it succeeds, or one of the following negative
 * error codes:
 *   SG_EINVAL      @value or @ns is NULL;
 *   SG_EMALFORMED  empty, a non-digit (sign, space, dot), or a number too
 *                  large for 64 bits.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_deadline_ms_parse(const char *value, size_t len, int64_t *ns);

/**
 * sg_grpc_timeout_format - writes @ns as a grpc-timeout value: at most 8
 * digits and the finest unit that fits (n, u, m, S, M, H), rounded down.
 *
 * Returns the length written (NUL not counted) if it succeeds, or one of
 * the following negative error codes:
 *   SG_EINVAL   @buf is NULL or @ns < 0;
 *   SG_ENOBUFS  @len is too small (SG_DEADLINE_VALUE_MAX always fits).
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_grpc_timeout_format(int64_t ns, char *buf, size_t len);

/**
 * sg_grpc_timeout_parse - parses a grpc-timeout value (1 to 8 digits, then
 * one of H M S m u n) into nanoseconds; values beyond SG_DURATION_MAX
 * saturate there.
 *
 * Returns 0 and sets *@ns if it succeeds, or one of the following negative
 * error codes:
 *   SG_EINVAL      @value or @ns is NULL;
 *   SG_EMALFORMED  empty, no digits, more than 8 digits, a sign or space,
 *                  or a missing or unknown unit.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_grpc_timeout_parse(const char *value, size_t len, int64_t *ns);

/**
 * sg_deadline_from_timeout - turns an inbound timeout into a local
 * monotonic deadline: @now + @timeout_ns - @allowance_ns (transit and clock
 * skew), never before @now, saturating.
 *
 * Returns 0 and sets *@deadline if it succeeds, or one of the following
 * negative error codes:
 *   SG_EINVAL  @deadline is NULL, or @timeout_ns or @allowance_ns < 0.
 * Thread-safety: pure function.
 */
SG_EXTERN int sg_deadline_from_timeout(int64_t now, int64_t timeout_ns,
                                       int64_t allowance_ns, int64_t *deadline);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_HTTP_H */
