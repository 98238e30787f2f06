/*
 * The execution report: one JSON document per operation, written into a
 * caller buffer (no allocation) or to a FILE.  Schema: docs/report.md.
 */
#include "health_internal.h"
#include "sgx/json.h"

#include <string.h>

void sg__sink_put(sg__sink *s, const char *p, size_t n) {
    if (s->f != NULL) {
        if (!s->failed && n > 0 && fwrite(p, 1, n, s->f) != n) {
            s->failed = true;
        }
    } else if (s->pos < s->cap) {
        /* Keep one byte for the NUL; count what does not fit. */
        const size_t room = s->cap - 1 - s->pos;
        memcpy(s->buf + s->pos, p, n < room ? n : room);
    }
    s->pos = s->pos > SIZE_MAX - n ? SIZE_MAX : s->pos + n;
}

void sg__sink_puts(sg__sink *s, const char *p) {
    sg__sink_put(s, p, strlen(p));
}

void sg__sink_u64(sg__sink *s, uint64_t v) {
    char tmp[24];
    size_t n = sizeof(tmp);
    do {
        tmp[--n] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0);
    sg__sink_put(s, tmp + n, sizeof(tmp) - n);
}

void sg__sink_i64(sg__sink *s, int64_t v) {
    if (v < 0) {
        sg__sink_put(s, "-", 1);
        /* -(v + 1) + 1 avoids overflowing on INT64_MIN. */
        sg__sink_u64(s, (uint64_t)(-(v + 1)) + 1u);
        return;
    }
    sg__sink_u64(s, (uint64_t)v);
}

/* A JSON string literal (sgx_json_escape, the one escaping every writer
 * shares): straight into the caller's buffer, or to a FILE
 * (sgx_json_fwrite_string; a FILE sink counts no length). */
void sg__sink_json_string(sg__sink *s, const char *p, size_t n) {
    if (s->f == NULL) {
        /* Keep one byte for the NUL; count what does not fit. */
        size_t room = s->buf != NULL && s->pos + 1 < s->cap ? s->cap - 1 - s->pos : 0;
        size_t len = sgx_json_escape(room > 0 ? s->buf + s->pos : NULL, room, p, n);
        s->pos = s->pos > SIZE_MAX - len ? SIZE_MAX : s->pos + len;
        return;
    }
    if (!s->failed && sgx_json_fwrite_string(s->f, p, n) != 0) {
        s->failed = true;
    }
}

/* ------------------------------------------------------------------ fields */

void sg__sink_key(sg__sink *s, const char *key, bool *first) {
    if (!*first) {
        sg__sink_put(s, ",", 1);
    }
    *first = false;
    sg__sink_put(s, "\"", 1);
    sg__sink_puts(s, key);
    sg__sink_put(s, "\":", 2);
}

static void sg__f_bool(sg__sink *s, const char *key, bool v, bool *first) {
    sg__sink_key(s, key, first);
    sg__sink_puts(s, v ? "true" : "false");
}

static void sg__f_name(sg__sink *s, const char *key, const char *name, bool *first) {
    sg__sink_key(s, key, first);
    if (name == NULL) {
        sg__sink_puts(s, "null");
    } else {
        sg__sink_json_string(s, name, strlen(name));
    }
}

static void sg__f_u64(sg__sink *s, const char *key, uint64_t v, bool *first) {
    sg__sink_key(s, key, first);
    sg__sink_u64(s, v);
}

/* Whole milliseconds, rounded down; null when @ns < 0 or (@zero_null) 0. */
static void sg__f_ms(sg__sink *s, const char *key, int64_t ns, bool zero_null,
                     bool *first) {
    sg__sink_key(s, key, first);
    if (ns < 0 || (zero_null && ns == 0)) {
        sg__sink_puts(s, "null");
    } else {
        sg__sink_i64(s, ns / SG_MS(1));
    }
}

/* "provider_error": {"type": ..., "message": ...} or null. */
static void sg__write_provider_error(sg__sink *s, const sg_op_attempt *a, bool *first) {
    sg__sink_key(s, "provider_error", first);
    if (a == NULL || a->running || a->outcome != SG_OUTCOME_PROVIDER_ERROR) {
        sg__sink_puts(s, "null");
        return;
    }
    sg__sink_puts(s, "{\"type\":");
    sg__sink_json_string(s, a->provider_error_type, strlen(a->provider_error_type));
    sg__sink_puts(s, ",\"message\":");
    sg__sink_json_string(s, a->error, strlen(a->error));
    sg__sink_put(s, "}", 1);
}

static void sg__write_attempt(sg__sink *s, const sg_op *op, const sg_op_attempt *a) {
    bool first = true;
    sg__sink_put(s, "{", 1);
    sg__f_u64(s, "n", a->n, &first);
    sg__f_bool(s, "running", a->running, &first);
    sg__f_name(s, "outcome", a->running ? NULL : sg_outcome_name(a->outcome), &first);
    sg__f_name(s, "phase", a->running ? NULL : sg_phase_name(a->phase), &first);
    sg__f_bool(s, "sent", a->sent, &first);
    sg__f_bool(s, "headers_received", a->headers_received, &first);
    sg__sink_key(s, "http_status", &first);
    if (a->http_status == 0) {
        sg__sink_puts(s, "null");
    } else {
        sg__sink_i64(s, a->http_status);
    }
    sg__f_bool(s, "partial", a->partial, &first);
    sg__f_bool(s, "retryable", a->retryable, &first);
    sg__f_bool(s, "outcome_unknown", a->outcome_unknown, &first);
    sg__f_ms(s, "start_ms",
             sg_time_since(a->started_at, sg_budget_started_at(&op->budget_)), false,
             &first);
    sg__f_ms(s, "remaining_ms", a->remaining_ns, false, &first);
    sg__sink_key(s, "granted_ms", &first);
    bool g = true;
    sg__sink_put(s, "{", 1);
    sg__f_ms(s, "connect", a->connect_timeout_ns, true, &g);
    sg__f_ms(s, "attempt", a->attempt_timeout_ns, true, &g);
    sg__f_ms(s, "first_item", a->first_item_timeout_ns, true, &g);
    sg__f_ms(s, "idle", a->idle_timeout_ns, true, &g);
    sg__f_ms(s, "stream_total", a->stream_timeout_ns, true, &g);
    sg__sink_put(s, "}", 1);
    /* who set the lease the clocks above were clamped to (attribution.c) */
    sg__f_name(s, "lease_by", sg__attempt_lease_by(a), &first);
    sg__f_ms(s, "elapsed_ms", a->running ? -1 : a->elapsed_ns, false, &first);
    sg__f_ms(s, "first_item_ms", a->time_to_first_item_ns, false, &first);
    /* the same instant: under a profile the first item is the first token
     * (metadata before it is held), and without one every item is a token */
    sg__f_ms(s, "first_token_ms", a->time_to_first_item_ns, false, &first);
    sg__f_u64(s, "items", a->items, &first);
    sg__f_u64(s, "bytes", a->bytes, &first);
    sg__sink_key(s, "retry_after", &first);
    const sg__rec *rec = sg__rec_c(a);
    if (rec->retry_after_raw != NULL) {
        /* The server's bytes, verbatim up to SG__OP_RETRY_AFTER_RAW_MAX:
         * anything may be in them, hence the escaping. */
        size_t len;
        const char *raw = sg__rec_retry_after_raw(rec, &len);
        sg__sink_json_string(s, raw, len);
    } else {
        sg__sink_puts(s, "null");
    }
    sg__f_ms(s, "retry_after_ms", a->retry_after_ns, false, &first);
    sg__f_bool(s, "retry_after_malformed", a->retry_after_malformed, &first);
    sg__f_name(s, "retry_after_source",
               a->retry_after_ns < 0                       ? NULL
               : (rec->retry_after_flags & SG__RA_FROM_MS) ? "retry-after-ms"
                                                           : "retry-after",
               &first);
    sg__f_name(s, "decision", sg_op_decision_name(a->decision), &first);
    sg__f_name(s, "reason", sg_op_reason_name(a->reason), &first);
    sg__f_ms(s, "backoff_ms", a->backoff_ns, false, &first);
    sg__sink_key(s, "error", &first);
    if (a->error[0] != '\0') {
        sg__sink_json_string(s, a->error, strlen(a->error));
    } else {
        sg__sink_puts(s, "null");
    }
    sg__write_provider_error(s, a, &first);
    sg__report_attempt_usage(s, a, &first);
    /* the stream semantics it was judged by: with endpoints of several
     * providers, each attempt's own (a built-in name, no escaping needed) */
    sg__f_name(s, "profile", sg__rec_c(a)->profile, &first);
    const sg_op_options *o = sg__op_opts(op);
    if (o->hedge_after_ns_ > 0) {
        sg__f_bool(s, "hedge", a->hedge, &first);
        sg__ttft_report_attempt(s, op, a, &first); /* the delay beside it */
    }
    if (o->set_ & SG__OPT_PROBE) {
        /* the caller's failed probe is attempt 1 (probe.c) */
        sg__f_bool(s, "probe", a->n == 1, &first);
    }
    if (o->n_endpoints_ > 0 && a->endpoint < o->n_endpoints_) {
        char name[256];
        size_t n = sg__endpoint_name(o->endpoints_[a->endpoint], name, sizeof(name));
        sg__sink_key(s, "endpoint", &first);
        sg__sink_json_string(s, name, n);
    }
    sg__sink_put(s, "}", 1);
}

size_t sg_op_endpoint_name(const sg_op *op, uint32_t i, char *out, size_t cap) {
    if (out == NULL || cap == 0) {
        return 0;
    }
    out[0] = '\0';
    if (!sg__op_started(op)) {
        return 0;
    }
    const sg_op_options *o = sg__op_opts(op);
    const char *url = o->n_endpoints_ > 0
                          ? (i < o->n_endpoints_ ? o->endpoints_[i] : NULL)
                          : (i == 0 ? o->target_ : NULL);
    return url != NULL ? sg__endpoint_name(url, out, cap) : 0;
}

/* @url as the report names an endpoint: scheme://host:port/path - the
 * userinfo (credentials), the query and the fragment left out, the port
 * the scheme's own when none is given.  Into @out (NUL-terminated, cut
 * at @cap); returns its length. */
size_t sg__endpoint_name(const char *url, char *out, size_t cap) {
    size_t o = 0;
#define SG__PUTS(p, n)            \
    do {                          \
        size_t n_ = (n);          \
        if (n_ > cap - 1 - o) {   \
            n_ = cap - 1 - o;     \
        }                         \
        memcpy(out + o, (p), n_); \
        o += n_;                  \
    } while (0)
    if (cap == 0) {
        return 0;
    }
    const char *sep = strstr(url, "://");
    const char *auth = sep != NULL ? sep + 3 : url;
    if (sep != NULL) {
        SG__PUTS(url, (size_t)(auth - url));
    }
    size_t alen = strcspn(auth, "/?#");
    const char *host = auth; /* after the last '@': the userinfo ends there */
    for (const char *q = auth; q < auth + alen; q++) {
        if (*q == '@') {
            host = q + 1;
        }
    }
    size_t hlen = (size_t)(auth + alen - host);
    SG__PUTS(host, hlen);
    /* a port: after the last ':' outside an IPv6 literal's brackets */
    const char *colon = NULL;
    for (const char *q = host; q < host + hlen; q++) {
        if (*q == ':') {
            colon = q;
        } else if (*q == ']') {
            colon = NULL;
        }
    }
    if (colon == NULL && sep != NULL) {
        size_t sl = (size_t)(sep - url);
        if (sl == 5 && strncmp(url, "https", 5) == 0) {
            SG__PUTS(":443", 4);
        } else if (sl == 4 && strncmp(url, "http", 4) == 0) {
            SG__PUTS(":80", 3);
        }
    }
    const char *path = auth + alen;
    size_t plen = *path == '/' ? strcspn(path, "?#") : 0;
    if (plen > 0) {
        SG__PUTS(path, plen);
    } else {
        SG__PUTS("/", 1);
    }
#undef SG__PUTS
    out[o] = '\0';
    return o;
}

static void sg__write_report(sg__sink *s, const sg_op *op, int64_t now) {
    const sg_op_options *o = sg__op_opts(op);
    const bool finished = sg_op_finished(op);
    const int64_t end = finished ? op->finished_at_ : now;
    const int64_t start = sg_budget_started_at(&op->budget_);
    const sg_op_attempt *last = sg_op_deciding_attempt(op); /* with hedging, the winner */
    bool first = true;

    sg__sink_put(s, "{", 1);
    sg__f_u64(s, "version", 1, &first);
    sg__sink_key(s, "label", &first);
    if (o->label_ != NULL) {
        sg__sink_json_string(s, o->label_, strlen(o->label_));
    } else {
        sg__sink_puts(s, "null");
    }
    sg__f_bool(s, "finished", finished, &first);
    /* until the operation ends, its last finished attempt's outcome (as
     * with the phase): never "ok" for one that has not succeeded yet */
    const char *outcome = NULL;
    if (finished) {
        outcome = sg_outcome_name(sg_op_outcome(op));
    } else if (last != NULL && !last->running) {
        outcome = sg_outcome_name(last->outcome);
    }
    sg__f_name(s, "outcome", outcome, &first);
    sg__f_name(s, "phase",
               (last != NULL && !last->running) ? sg_phase_name(last->phase) : NULL,
               &first);
    sg__f_name(s, "decision", sg_op_decision_name(sg_op_final_decision(op)), &first);
    sg__f_name(s, "reason", sg_op_reason_name(sg_op_final_reason(op)), &first);
    sg__f_bool(s, "partial", last != NULL && last->partial, &first);
    sg__f_bool(s, "retryable", last != NULL && last->retryable, &first);
    sg__f_bool(s, "outcome_unknown", last != NULL && last->outcome_unknown, &first);
    sg__write_provider_error(s, last, &first);
    sg__f_name(s, "method", sg__opt_method(o), &first);
    sg__f_bool(s, "idempotency_key", o->idempotency_key_ != NULL, &first);
    sg__f_bool(s, "declared_idempotent", (o->set_ & SG__OPT_IDEMPOTENT) != 0, &first);
    sg__f_ms(s, "budget_ms", sg_time_since(sg_budget_deadline(&op->budget_), start),
             false, &first);
    sg__f_ms(s, "floor_ms", sg_budget_floor(&op->budget_), false, &first);
    sg__f_ms(s, "elapsed_ms", sg_time_since(end, start), false, &first);
    sg__f_ms(s, "remaining_ms", sg_budget_remaining(&op->budget_, end), false, &first);
    sg__f_u64(s, "max_attempts", sg__opt_max_attempts(o), &first);
    if (o->hedge_after_ns_ > 0) {
        sg__f_ms(s, "hedge_after_ms", o->hedge_after_ns_, false, &first);
        sg__f_u64(s, "max_hedges", o->max_hedges_, &first);
        sg__f_u64(s, "hedges_throttled", op->hedges_throttled_, &first);
        sg__f_u64(s, "hedges_no_free_endpoint", op->hedges_no_free_, &first);
    }
    sg__ttft_report(s, op, &first); /* a learned delay, the first-token order */
    sg__report_usage(s, op, &first);
    sg__health_report(s, op); /* with endpoint health */
    sg__sink_key(s, "attempts", &first);
    sg__sink_put(s, "[", 1);
    for (uint32_t i = 0; i < op->count_; i++) {
        if (i > 0) {
            sg__sink_put(s, ",", 1);
        }
        sg__write_attempt(s, op, sg_op_attempt_at(op, i));
    }
    sg__sink_put(s, "]}", 2);
}

int sg_op_report_write(const sg_op *op, int64_t now, char *buf, size_t len,
                       size_t *needed) {
    if (!sg__op_started(op) || (buf == NULL && len > 0)) {
        return SG_EINVAL;
    }
    sg__sink s = {buf, len, 0, NULL, false};
    sg__write_report(&s, op, now);
    const size_t need = s.pos == SIZE_MAX ? SIZE_MAX : s.pos + 1;
    if (needed != NULL) {
        *needed = need;
    }
    if (need > len) {
        if (len > 0) {
            buf[len - 1] = '\0';
        }
        return SG_ENOBUFS;
    }
    buf[s.pos] = '\0';
    return 0;
}

int sg_op_report_fwrite(const sg_op *op, int64_t now, FILE *f) {
    if (!sg__op_started(op) || f == NULL) {
        return SG_EINVAL;
    }
    sg__sink s = {NULL, 0, 0, f, false};
    sg__write_report(&s, op, now);
    if (s.failed || ferror(f)) {
        return SG_EIO;
    }
    return 0;
}
