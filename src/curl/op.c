/*
 * One guarded operation over libcurl: attempts leased from the policy, each
 * transfer's bytes framed into items and timed by an sg_guard.
 *
 * Nothing here waits or arms timers: a driver (the managed multi in
 * multi.c, or the caller's own loop) asks sg_curl_op_next_deadline() and
 * calls tick at that instant, and reports finished transfers.  User
 * callbacks that may free the operation (on_attempt, on_discard, on_done)
 * run only from those driver calls, never from inside a libcurl callback.
 */
#include "curl/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define SG__DEFAULT_DRAIN SG_MS(200)
/* libcurl's own timeouts back ours up; they sit this far behind the lease
 * so the guard, which knows the phase, always fires first. */
#define SG__CURL_MARGIN_MS 250

static int64_t op_now(const sg_curl_op *op) {
    return sg_clock_now(op->opts.clock);
}

/* ------------------------------------------------------------------ items */

static int on_item(const sg_item *item, void *user_data) {
    sg_curl_op *op = user_data;
    if (op->cbs.on_item != NULL) {
        return op->cbs.on_item(op, item, op->user_data);
    }
    return 0;
}

static sg_guard *guard_of(sg_curl_op *op) {
    return sg_stream_guard(&op->stream);
}

/* ------------------------------------------------------- libcurl callbacks */

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *user_data) {
    sg_curl_op *op = user_data;
    size_t n = size * nmemb;
    if (op->state != SG__OP_RUNNING || !op->body_is_stream) {
        return n; /* draining after the terminal, or a redirect's body */
    }
    int64_t now = op_now(op);
    int rv = sg_stream_feed(&op->stream, ptr, n, now);
    if (rv < 0) {
        op->feed_rc = rv;
        return 0; /* expired, capped, cancelled or malformed: abort */
    }
    if (rv == 1) {
        /* Decided at the instant the terminal arrived; the rest of the
         * body is only drained so the connection can be reused. */
        op->state = SG__OP_DRAINING;
        op->drain_until = sg_time_add(now, op->opts.drain_ns);
    }
    if (op->owner != NULL) {
        sg__curl_multi_reschedule(op->owner, op);
    }
    return n;
}

static bool header_is(const char *line, size_t len, const char *name) {
    size_t nlen = strlen(name);
    return len > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *user_data) {
    sg_curl_op *op = user_data;
    size_t n = size * nitems;
    int64_t now = op_now(op);

    if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* A status line: the request reached the server. */
        const char *sp = memchr(buf, ' ', n);
        int status = 0;
        if (sp != NULL && (size_t)(sp - buf) + 4 <= n) {
            for (int i = 1; i <= 3; i++) {
                char c = sp[i];
                status = c >= '0' && c <= '9' ? status * 10 + (c - '0') : -1000;
            }
        }
        op->http_status = status > 0 ? status : 0;
        op->headers_done = false;
        op->body_is_stream = false;
        op->retry_after_len = 0;
        if (sg_guard_phase(guard_of(op)) < SG_PHASE_WAIT_HEADERS) {
            sg_guard_set_phase(guard_of(op), SG_PHASE_WAIT_HEADERS, now);
        }
        return n;
    }
    if (n <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
        /* The end of a header block. */
        if (op->http_status >= 100 && op->http_status < 200) {
            return n; /* interim response */
        }
        op->headers_done = true;
        if (op->http_status >= 200 && op->http_status < 300) {
            op->body_is_stream = true;
            sg_guard_set_phase(guard_of(op), SG_PHASE_WAIT_FIRST_ITEM, now);
        } else if (op->http_status >= 400 || op->http_status == 0) {
            /* The answer is in: no need to read an error body. */
            op->http_abort = true;
            return 0;
        }
        return n;
    }
    if (header_is(buf, n, "retry-after")) {
        const char *v = buf + sizeof("retry-after:") - 1;
        const char *end = buf + n;
        while (v < end && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' ||
                           end[-1] == '\t')) {
            end--;
        }
        size_t len = (size_t)(end - v);
        if (len < sizeof(op->retry_after)) {
            memcpy(op->retry_after, v, len);
            op->retry_after_len = len;
        }
    }
    return n;
}

static int on_prereq(void *clientp, char *primary_ip, char *local_ip, int primary_port,
                     int local_port) {
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    sg_curl_op *op = clientp;
    /* Connected; the request is about to be written. */
    sg_guard_set_phase(guard_of(op), SG_PHASE_SEND, op_now(op));
    return CURL_PREREQFUNC_OK;
}

/* ------------------------------------------------------------ life cycle */

int sg_curl_op_new(sg_curl_op **out, CURL *easy, const sg_op_options *policy,
                   const sg_curl_options *opts, const sg_curl_callbacks *cbs,
                   void *user_data) {
    if (out == NULL || easy == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_curl_options o;
    if (opts != NULL) {
        o = *opts;
    } else {
        memset(&o, 0, sizeof(o));
    }
    if ((o.format != SG_FORMAT_SSE && o.format != SG_FORMAT_NDJSON) || o.drain_ns < 0) {
        return SG_EINVAL;
    }
    if (o.ledger != NULL && o.url == NULL) {
        return SG_EINVAL; /* the ledger must say what was asked for */
    }
    if (o.drain_ns == 0) {
        o.drain_ns = SG__DEFAULT_DRAIN;
    }
    sg_stream_config scfg = {o.format,   o.terminal_data, o.terminal_type,
                             o.max_line, o.max_event,     o.skip_types};
    size_t buf_size = sg_stream_buffer_size(&scfg);
    if (buf_size == 0) {
        return SG_ERANGE;
    }

    sg_curl_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return SG_ENOMEM;
    }
    op->parser_buf = malloc(buf_size);
    if (op->parser_buf == NULL) {
        free(op);
        return SG_ENOMEM;
    }
    int rv = sg_stream_init(&op->stream, &scfg, on_item, op, op->parser_buf, buf_size);
    if (rv != 0) {
        free(op->parser_buf);
        free(op);
        return rv;
    }
    op->easy = easy;
    op->opts = o;
    if (policy != NULL) {
        op->popts = *policy;
    } else {
        sg_op_options_init(&op->popts);
    }
    if (cbs != NULL) {
        op->cbs = *cbs;
    }
    op->user_data = user_data;
    op->state = SG__OP_NEW;
    *out = op;
    return 0;
}

static void detach_transfer(sg_curl_op *op) {
    if (op->in_multi) {
        curl_multi_remove_handle(op->multi, op->easy);
        op->in_multi = false;
    }
}

void sg_curl_op_free(sg_curl_op *op) {
    if (op == NULL) {
        return;
    }
    detach_transfer(op);
    if (op->owner != NULL) {
        sg__curl_multi_forget(op->owner, op);
    }
    /* The easy handle may outlive us: leave no pointer into freed memory. */
    curl_easy_setopt(op->easy, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(op->easy, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(op->req_headers);
    free(op->parser_buf);
    free(op);
}

/* The operation ended: leave the driver, then tell the consumer.  After
 * this returns the op may have been freed by on_done. */
/* The ledger's view of the operation; its errors never change the outcome
 * but are kept for sg_curl_op_error (only when no transfer error is). */
static void ledger_note(sg_curl_op *op, int rv, const char *what) {
    if (rv != 0 && op->errbuf[0] == '\0') {
        snprintf(op->errbuf, sizeof(op->errbuf), "ledger %s: %s", what, sg_strerror(rv));
    }
}

static int op_end(sg_curl_op *op) {
    op->state = SG__OP_DONE;
    if (op->intent_recorded) {
        ledger_note(op,
                    sg_ledger_op_resolve(op->opts.ledger, op->ledger_key, &op->policy),
                    "resolve");
        op->intent_recorded = false;
    }
    if (op->owner != NULL) {
        sg__curl_multi_forget(op->owner, op);
    }
    if (op->cbs.on_done != NULL) {
        op->cbs.on_done(op, op->user_data);
    }
    return 1;
}

static int append_header(sg_curl_op *op, const char *line) {
    struct curl_slist *l = curl_slist_append(op->req_headers, line);
    if (l == NULL) {
        return SG_ENOMEM;
    }
    op->req_headers = l;
    return 0;
}

/* The request headers of one attempt: the caller's, then the idempotency
 * key (the same on every attempt) and the lease, stamped fresh. */
static int build_headers(sg_curl_op *op, const sg_op_plan *plan) {
    char line[256];
    curl_slist_free_all(op->req_headers);
    op->req_headers = NULL;
    for (const struct curl_slist *h = op->opts.headers; h != NULL; h = h->next) {
        if (append_header(op, h->data) != 0) {
            return SG_ENOMEM;
        }
    }
    const char *key = sg_op_idempotency_key(&op->policy);
    if (key != NULL) {
        snprintf(line, sizeof(line), "Idempotency-Key: %s", key);
        if (append_header(op, line) != 0) {
            return SG_ENOMEM;
        }
    }
    if (op->opts.deadline_header) {
        snprintf(line, sizeof(line), "%s: %lld", plan->deadline_header,
                 (long long)plan->deadline_ms);
        if (append_header(op, line) != 0) {
            return SG_ENOMEM;
        }
    }
    if (op->opts.grpc_timeout) {
        char v[SG_DEADLINE_VALUE_MAX];
        if (sg_grpc_timeout_format(plan->attempt_ns, v, sizeof(v)) > 0) {
            snprintf(line, sizeof(line), "grpc-timeout: %s", v);
            if (append_header(op, line) != 0) {
                return SG_ENOMEM;
            }
        }
    }
    return 0;
}

static long ms_ceil(int64_t ns) {
    return (long)((ns + SG_MS(1) - 1) / SG_MS(1));
}

static void end_attempt(sg_curl_op *op, int64_t now, const sg_guard_result *gr);

/* Lease and launch the next attempt.  Returns 1 when the operation ended
 * (nothing could be leased), 0 when a transfer runs, or a negative code
 * after recording a failed launch. */
static int begin_attempt(sg_curl_op *op, int64_t now) {
    sg_op_plan plan;
    if (sg_op_next_attempt(&op->policy, now, &plan) != 0) {
        return op_end(op);
    }
    sg_stream_begin(&op->stream, &plan.guard_config, sg_op_budget(&op->policy),
                    plan.attempt, now);
    op->attempt = plan.attempt;
    op->http_status = 0;
    op->headers_done = false;
    op->body_is_stream = false;
    op->http_abort = false;
    op->feed_rc = 0;
    op->retry_after_len = 0;
    op->errbuf[0] = '\0';

    int rv = build_headers(op, &plan);
    CURL *e = op->easy;
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, op);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, op);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, op);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, op->req_headers);
    curl_easy_setopt(e, CURLOPT_PRIVATE, op);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, op->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    int64_t connect_ns = sg_guard_config_connect(&plan.guard_config);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     ms_ceil(connect_ns > 0 ? connect_ns : plan.attempt_ns) +
                         SG__CURL_MARGIN_MS);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                     ms_ceil(plan.attempt_ns) + SG__CURL_MARGIN_MS);
    if (op->opts.cafile != NULL) {
        curl_easy_setopt(e, CURLOPT_CAINFO, op->opts.cafile);
    }
    if (rv == 0 && curl_multi_add_handle(op->multi, e) != CURLM_OK) {
        rv = SG_ECURL;
    }
    if (rv != 0) {
        /* Nothing was sent: record it as a transport failure, which the
         * policy may retry. */
        sg_guard_result gr;
        snprintf(op->errbuf, sizeof(op->errbuf), "could not start the transfer: %s",
                 sg_strerror(rv));
        sg_stream_end(&op->stream, now, SG_OUTCOME_TRANSPORT_ERROR, &gr);
        op->state = SG__OP_RUNNING;
        end_attempt(op, now, &gr);
        return op->state == SG__OP_DONE ? op_end(op) : rv;
    }
    op->in_multi = true;
    op->state = SG__OP_RUNNING;
    return 0;
}

/* A request counts as sent once libcurl wrote all of it; until then the
 * phase stays "send".  Worked out only when an attempt ends. */
static void settle_send_phase(sg_curl_op *op, int64_t now) {
    if (sg_guard_phase(guard_of(op)) != SG_PHASE_SEND) {
        return;
    }
    long request_size = 0;
    curl_off_t uploaded = 0;
    curl_off_t upload_len = -1;
    curl_easy_getinfo(op->easy, CURLINFO_REQUEST_SIZE, &request_size);
    curl_easy_getinfo(op->easy, CURLINFO_SIZE_UPLOAD_T, &uploaded);
    curl_easy_getinfo(op->easy, CURLINFO_CONTENT_LENGTH_UPLOAD_T, &upload_len);
    if (request_size > 0 && (upload_len <= 0 || uploaded >= upload_len)) {
        sg_guard_set_phase(guard_of(op), SG_PHASE_WAIT_HEADERS, now);
    }
}

/* Hand the attempt to the policy.  Leaves the op SLEEPING (retry) or DONE
 * (without calling on_done: the caller does, outside any libcurl callback). */
static void end_attempt(sg_curl_op *op, int64_t now, const sg_guard_result *gr) {
    sg_op_result r;
    sg_op_verdict v;
    sg_op_result_from_guard(&r, gr);
    r.sent = gr->phase >= SG_PHASE_SEND;
    r.headers_received = op->headers_done;
    r.http_status = op->headers_done ? op->http_status : 0;
    if (op->retry_after_len > 0) {
        r.retry_after = op->retry_after;
        r.retry_after_len = op->retry_after_len;
        r.wall_now_s = (int64_t)time(NULL);
    }
    if (sg_op_attempt_done(&op->policy, now, &r, &v) != 0) {
        op->state = SG__OP_DONE;
        return;
    }
    if (op->intent_recorded) {
        ledger_note(op,
                    sg_ledger_op_attempt(op->opts.ledger, op->ledger_key, &op->policy),
                    "attempt");
    }
    if (v.partial && op->cbs.on_discard != NULL) {
        op->cbs.on_discard(op, op->attempt, v.outcome, op->user_data);
    }
    if (op->cbs.on_attempt != NULL) {
        const sg_op_attempt *rec =
            sg_op_attempt_at(&op->policy, sg_op_attempt_count(&op->policy) - 1);
        if (rec != NULL) {
            op->cbs.on_attempt(op, rec, op->user_data);
        }
    }
    if (v.decision == SG_OP_RETRY) {
        op->state = SG__OP_SLEEPING;
        op->wake_at = v.retry_at;
    } else {
        op->state = SG__OP_DONE;
    }
}

/* Classify a finished transfer from what libcurl and our callbacks saw;
 * sg_stream_end lets a first cause (expiry, cap, cancel, bad framing) win. */
static void classify(sg_curl_op *op, CURLcode result, int64_t now, sg_guard_result *gr) {
    sg_outcome how;
    settle_send_phase(op, now);
    if (op->http_abort) {
        how = SG_OUTCOME_HTTP_ERROR;
    } else if (result == CURLE_OK) {
        /* a final 3xx, or no status at all, is no stream */
        how = op->body_is_stream ? SG_OUTCOME_OK : SG_OUTCOME_HTTP_ERROR;
    } else if (result == CURLE_OPERATION_TIMEDOUT) {
        how = sg_guard_phase(guard_of(op)) == SG_PHASE_CONNECT
                  ? SG_OUTCOME_CONNECT_TIMEOUT
                  : SG_OUTCOME_ATTEMPT_TIMEOUT;
    } else if (op->body_is_stream) {
        how = SG_OUTCOME_TRUNCATED; /* the connection ended mid-body */
    } else {
        how = SG_OUTCOME_TRANSPORT_ERROR;
    }
    sg_stream_end(&op->stream, now, how, gr);
    /* libcurl's message describes our own abort ("failure writing
     * output"); say what really stopped the transfer instead. */
    if (gr->outcome == SG_OUTCOME_PROTOCOL_ERROR && op->feed_rc != 0) {
        snprintf(op->errbuf, sizeof(op->errbuf), "%s", sg_strerror(op->feed_rc));
    } else if (gr->outcome != SG_OUTCOME_TRANSPORT_ERROR &&
               gr->outcome != SG_OUTCOME_TRUNCATED) {
        op->errbuf[0] = '\0';
    }
}

/* ------------------------------------------------------- driver interface */

/* Records the intent, durably, before anything is sent: if that fails (or
 * the key is already unresolved), nothing goes out and the op stays new. */
static int record_intent(sg_curl_op *op) {
    op->ledger_key = sg_ledger_op_key(&op->policy, op->opts.ledger_key);
    int rv =
        sg_ledger_op_intent(op->opts.ledger, op->ledger_key, &op->policy, op->opts.url);
    if (rv != 0) {
        snprintf(op->errbuf, sizeof(op->errbuf), "ledger intent: %s", sg_strerror(rv));
        return rv;
    }
    op->intent_recorded = true;
    return 0;
}

int sg__curl_op_start(sg_curl_op *op, CURLM *multi, int64_t now) {
    op->multi = multi;
    if (sg_op_start(&op->policy, &op->popts, now) != 0) {
        return op_end(op);
    }
    if (op->opts.ledger != NULL) {
        int rv = record_intent(op);
        if (rv != 0) {
            return rv;
        }
    }
    int rv = begin_attempt(op, now);
    return rv == 1 ? 1 : 0;
}

int sg__curl_op_complete(sg_curl_op *op, CURLcode result, int64_t now) {
    detach_transfer(op);
    if (op->state == SG__OP_DRAINING) {
        sg_guard_result gr;
        sg_stream_end(&op->stream, now, SG_OUTCOME_OK, &gr);
        end_attempt(op, now, &gr);
    } else if (op->state == SG__OP_RUNNING) {
        sg_guard_result gr;
        classify(op, result, now, &gr);
        end_attempt(op, now, &gr);
    }
    if (op->state == SG__OP_DONE) {
        return op_end(op);
    }
    return 0;
}

int sg__curl_op_tick(sg_curl_op *op, int64_t now) {
    sg_guard_result gr;
    switch (op->state) {
    case SG__OP_RUNNING:
        if (now < sg_guard_next_deadline(guard_of(op))) {
            return 0;
        }
        settle_send_phase(op, now);
        if (sg_guard_check(guard_of(op), now, NULL) != 1) {
            return 0;
        }
        /* A clock expired: the transfer goes now, not at libcurl's pace. */
        detach_transfer(op);
        sg_stream_end(&op->stream, now, SG_OUTCOME_TRANSPORT_ERROR, &gr);
        end_attempt(op, now, &gr);
        break;
    case SG__OP_DRAINING:
        if (now < op->drain_until) {
            return 0;
        }
        detach_transfer(op);
        sg_stream_end(&op->stream, now, SG_OUTCOME_OK, &gr);
        end_attempt(op, now, &gr);
        break;
    case SG__OP_SLEEPING:
        if (now < op->wake_at) {
            return 0;
        }
        return begin_attempt(op, now) == 1 ? 1 : 0;
    default:
        return 0;
    }
    return op->state == SG__OP_DONE ? op_end(op) : 0;
}

/* ------------------------------------------------------------ public API */

int sg_curl_op_attach(sg_curl_op *op, CURLM *multi, int64_t now) {
    if (op == NULL || multi == NULL) {
        return SG_EINVAL;
    }
    if (op->state != SG__OP_NEW) {
        return SG_ESTATE;
    }
    int rv = sg__curl_op_start(op, multi, now);
    return rv < 0 ? rv : 0;
}

int sg_curl_op_complete(sg_curl_op *op, CURLcode result, int64_t now) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    if (!op->in_multi) {
        return SG_ESTATE;
    }
    sg__curl_op_complete(op, result, now);
    return 0;
}

int sg_curl_op_tick(sg_curl_op *op, int64_t now) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    sg__curl_op_tick(op, now);
    return 0;
}

int64_t sg_curl_op_next_deadline(const sg_curl_op *op) {
    if (op == NULL) {
        return SG_TIME_NEVER;
    }
    switch (op->state) {
    case SG__OP_RUNNING:
        return sg_guard_next_deadline(&op->stream.guard_);
    case SG__OP_DRAINING:
        return op->drain_until;
    case SG__OP_SLEEPING:
        return op->wake_at;
    default:
        return SG_TIME_NEVER;
    }
}

sg_outcome sg_curl_op_outcome(const sg_curl_op *op) {
    return op != NULL ? sg_op_outcome(&op->policy) : SG_OUTCOME_TRANSPORT_ERROR;
}

bool sg_curl_op_done(const sg_curl_op *op) {
    return op != NULL && op->state == SG__OP_DONE;
}

const sg_op *sg_curl_op_policy(const sg_curl_op *op) {
    return op != NULL ? &op->policy : NULL;
}

CURL *sg_curl_op_easy(const sg_curl_op *op) {
    return op != NULL ? op->easy : NULL;
}

void *sg_curl_op_user_data(const sg_curl_op *op) {
    return op != NULL ? op->user_data : NULL;
}

const char *sg_curl_op_error(const sg_curl_op *op) {
    return op != NULL ? op->errbuf : "";
}

int sg_curl_op_report(const sg_curl_op *op, char *buf, size_t len, size_t *needed) {
    if (op == NULL || op->state == SG__OP_NEW) {
        return SG_EINVAL;
    }
    return sg_op_report_write(&op->policy, op_now(op), buf, len, needed);
}
