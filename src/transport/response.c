/*
 * The response facts of the attempt lifecycle (lifecycle.h): what the
 * transport reads of a response - its status, Retry-After, retry-after-ms,
 * Date and rate-limit headers, the end of its header block, its body
 * bytes, and an error response's body kept for the profile to read -
 * taken into the lifecycle, where sg__lc_settle hands them to the policy.
 */
#include "transport/lifecycle.h"

_Static_assert(SG_ERROR_BODY_MAX <= UINT32_MAX, "an error body's length fits ebody_len");

#include <stdlib.h>
#include <string.h>
#include <time.h>

void sg__lc_status(sg__lifecycle *lc, int status, int64_t now) {
    lc->http_status = status;
    lc->headers_done = false;
    lc->body_is_stream = false;
    lc->date_s = 0;
    if (lc->more != NULL) {
        lc->more->retry_after_len = 0;
        lc->more->retry_after_ms_len = 0;
        lc->more->ratelimit.known = 0;
        lc->more->ratelimit.at = 0;
    }
    sg_guard *g = sg__lc_guard(lc);
    if (sg_guard_phase(g) < SG_PHASE_WAIT_HEADERS) {
        /* a status line: the request reached the server */
        sg_guard_set_phase(g, SG_PHASE_WAIT_HEADERS, now);
    }
}

/* A field value into @dst[@cap].  No valid Retry-After (an HTTP-date is
 * 29 bytes) nor retry-after-ms is as long as @cap: one that is is kept as
 * present and malformed - its first bytes for the report, then a byte no
 * field value may hold, so the policy's parse must fail - rather than
 * dropped and reported absent. */
static void keep_field(char *dst, size_t cap, size_t *dst_len, const char *value,
                       size_t len) {
    if (len < cap) {
        memcpy(dst, value, len);
        *dst_len = len;
        return;
    }
    memcpy(dst, value, cap - 1);
    dst[cap - 1] = '\x7f';
    *dst_len = cap;
}

/* Without memory for them, Retry-After and rate-limit headers are as if
 * absent: the policy's own backoff then. */
void sg__lc_retry_after(sg__lifecycle *lc, const char *value, size_t len) {
    sg__lc_more *m = sg__lc_more_get(lc);
    if (m != NULL) {
        keep_field(m->retry_after, sizeof(m->retry_after), &m->retry_after_len, value,
                   len);
    }
}

void sg__lc_retry_after_ms(sg__lifecycle *lc, const char *value, size_t len) {
    sg__lc_more *m = sg__lc_more_get(lc);
    if (m != NULL) {
        keep_field(m->retry_after_ms, sizeof(m->retry_after_ms), &m->retry_after_ms_len,
                   value, len);
    }
}

void sg__lc_date(sg__lifecycle *lc, const char *value, size_t len) {
    /* read now (8 bytes kept, not the raw field): a value that is no
     * HTTP-date leaves none, and the local clock is used instead */
    int64_t date = 0;
    if (sg_http_date_parse(value, len, (int64_t)time(NULL), &date) != 0 || date <= 0) {
        date = 0;
    }
    lc->date_s = date;
}

void sg__lc_ratelimit(sg__lifecycle *lc, const char *name, size_t name_len,
                      const char *value, size_t value_len) {
    /* a malformed value is the provider's slip: ignored, as if absent */
    if (lc->more != NULL) {
        (void)sg_op_ratelimit_header(&lc->more->ratelimit, name, name_len, value,
                                     value_len);
        return;
    }
    sg_op_ratelimit rl;
    memset(&rl, 0, sizeof(rl));
    if (sg_op_ratelimit_header(&rl, name, name_len, value, value_len) == 1) {
        sg__lc_more *m = sg__lc_more_get(lc); /* the first one it knows */
        if (m != NULL) {
            m->ratelimit = rl;
        }
    }
}

int sg__lc_headers_end(sg__lifecycle *lc, int64_t now) {
    int st = lc->http_status;
    if (st >= 100 && st < 200) {
        return SG__LC_INTERIM;
    }
    lc->headers_done = true;
    if (lc->more != NULL) {
        lc->more->ratelimit.at = now; /* a relative reset counts from here */
    }
    if (st >= 200 && st < 300) {
        lc->body_is_stream = true;
        sg_guard_set_phase(sg__lc_guard(lc), SG_PHASE_WAIT_FIRST_ITEM, now);
        return SG__LC_STREAM;
    }
    if (st >= 300 && st < 400) {
        return SG__LC_OTHER;
    }
    return SG__LC_ERROR;
}

bool sg__lc_error_response(sg__lifecycle *lc, int64_t now) {
    const sg__lifecycle *root = lc->primary != NULL ? lc->primary : lc;
    if (lc->http_status < 400 || root->hedging) {
        /* no status (nothing worth reading); or hedges, where every
         * attempt is judged the instant it ends, beside the others: the
         * head is the answer, its body is not read */
        return false;
    }
    if (sg__stream_active(&lc->stream)) {
        sg__stream_end(&lc->stream, now, SG_OUTCOME_HTTP_ERROR, &lc->stream.result_);
    }
    lc->error_body = true;
    lc->state = SG__LC_DRAINING;
    lc->drain_until = sg_time_min(sg_time_add(now, lc->drain_ns), lc->attempt_end);
    return true;
}

const char *sg__lc_error_body(const sg__lifecycle *lc, size_t *len) {
    const size_t n = lc != NULL ? lc->ebody_len : 0;
    if (len != NULL) {
        *len = n;
    }
    return n > 0 ? lc->ebody : NULL;
}

/* An error response's body: the first SG_ERROR_BODY_MAX bytes are kept
 * (none when the memory is not there: the outcome does not depend on
 * them), the rest drained. */
static void keep_error_body(sg__lifecycle *lc, const void *data, size_t len) {
    if (lc->ebody_len >= SG_ERROR_BODY_MAX || len == 0) {
        return;
    }
    if (lc->ebody == NULL && (lc->ebody = malloc(SG_ERROR_BODY_MAX)) == NULL) {
        return;
    }
    size_t n = SG_ERROR_BODY_MAX - lc->ebody_len;
    n = len < n ? len : n;
    memcpy(lc->ebody + lc->ebody_len, data, n);
    lc->ebody_len += (uint32_t)n;
}

int sg__lc_feed(sg__lifecycle *lc, const void *data, size_t len, int64_t now) {
    if (sg__lc_error_draining(lc)) {
        keep_error_body(lc, data, len);
        return 0;
    }
    if (lc->state != SG__LC_RUNNING || !lc->body_is_stream) {
        return 0; /* draining after the terminal, or a body that is no stream */
    }
    if (lc->tp->bytes != NULL && !lc->lost && len > 0) {
        int b = lc->tp->bytes(lc, data, len);
        if (b == SG__LC_PAUSE) {
            return SG__LC_PAUSE; /* nothing taken: the same bytes come again */
        }
        if (b != 0) {
            /* the consumer stopped it: as a cancel from on_item */
            sg__stream_cancel(&lc->stream, now);
            return SG_ECANCELED;
        }
    }
    int rv = sg__stream_feed(&lc->stream, data, len, now);
    if (rv < 0) {
        if (rv != SG_ETIMEDOUT && rv != SG_ECAP && rv != SG_ECANCELED) {
            lc->feed_error = rv;
        }
        return rv;
    }
    if (rv == 1) {
        /* Decided at the instant the terminal arrived; the rest of the body
         * is only drained so the connection can be reused - within the
         * lease: the operation never ends past its budget for it. */
        lc->state = SG__LC_DRAINING;
        lc->drain_until = sg_time_min(sg_time_add(now, lc->drain_ns), lc->attempt_end);
    }
    return rv;
}
