/*
 * One guarded operation over libcurl: attempts leased from the policy, each
 * transfer's bytes framed into items and timed by an sg_guard.
 *
 * Nothing here waits or arms timers: a driver (the managed multi in
 * multi.c, or the caller's own loop) asks sg_curl_op_next_deadline() and
 * calls tick at that instant, and reports finished transfers.  User
 * callbacks that may free the operation (on_attempt, on_discard, on_done)
 * run only from those driver calls, never from inside a libcurl callback.
 *
 * What a finished transfer was is decided in classify.c; which server
 * names TLS accepts, in tls_name.c.
 */
#include "curl/internal.h"

#include "curl/readbuf.h"
#include "curl/tls_name.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stddef.h>

/* libcurl's own timeouts back ours up; they sit this far behind the lease
 * so the guard, which knows the phase, always fires first. */
#define SG__CURL_MARGIN_MS 250

#define OP_OF(l) ((sg_curl_op *)((char *)(l)-offsetof(sg_curl_op, lc)))

static int64_t op_now(const sg_curl_op *op) {
    return sg_clock_now(op->opts->clock);
}

static sg_guard *guard_of(sg_curl_op *op) {
    return sg__lc_guard(&op->lc);
}

/* ------------------------------------------------------------------ items */

/* The operation an attempt runner belongs to (itself, or a hedge slot's
 * root): the consumer only ever sees that one. */
static sg_curl_op *root_of(sg_curl_op *op) {
    return op->root != NULL ? op->root : op;
}

static int on_item(const sg_item *item, void *user_data) {
    sg_curl_op *op = user_data;
    if (sg__lc_item_gate(&op->lc) != 0) {
        return 1; /* it lost a hedge: stop it, nothing reaches the consumer */
    }
    sg_curl_op *root = root_of(op);
    if (root->opts->on_item != NULL) {
        return root->opts->on_item(root, item, root->user_data);
    }
    return 0;
}

static int tp_bytes(sg__lifecycle *lc, const void *data, size_t len) {
    sg_curl_op *op = OP_OF(lc);
    sg_curl_op *root = root_of(op);
    if (root->opts->on_bytes != NULL) {
        int rv = root->opts->on_bytes(root, lc->attempt, data, len, root->user_data);
        return rv == SG_CURL_BYTES_PAUSE ? SG__LC_PAUSE : rv;
    }
    return 0;
}

/* ------------------------------------------------------- libcurl callbacks */

/* A read of @n bytes at @p for @op's transfer, at @now: under a managed
 * multi, with libcurl's read buffers placed (sg_curl_global_init) and an
 * HTTP/1.x response, the transfer goes last in the multi's list of those
 * whose buffer goes back when quiet.  Its buffer is looked up once per
 * attempt (a miss too: the application's own CURLOPT_BUFFERSIZE, or
 * decoded bytes, are not looked up at every read under the lock); after
 * that a read costs a few stores. */
static void note_read(sg_curl_op *op, const void *p, size_t n, int64_t now) {
    if (op->owner == NULL || !op->at.h1 || op->at.h2 || op->at.rbuf_missed ||
        !sg__curl_readbuf_on()) {
        return;
    }
    if (op->at.rbuf == NULL && (op->at.rbuf = sg__curl_readbuf_of(p, n)) == NULL) {
        op->at.rbuf_missed = true; /* not looked up again this attempt */
        return;
    }
    sg__curl_multi_touch(op->owner, op, now);
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *user_data) {
    sg_curl_op *op = user_data;
    size_t n = size * nmemb;
    if (op->detach_pending) {
        return 0; /* decided: libcurl ends it, nothing reaches the attempt */
    }
    const int64_t now = op_now(op);
    note_read(op, ptr, n, now);
    int rv = sg__lc_feed(&op->lc, ptr, n, now);
    if (rv == SG__LC_PAUSE) {
        op->at.paused = true; /* libcurl keeps the bytes until resumed */
        return CURL_WRITEFUNC_PAUSE;
    }
    if (rv < 0) {
        op->at.write_abort = true;
        return 0; /* expired, capped, cancelled or malformed: abort */
    }
    if (op->owner != NULL) {
        sg__curl_multi_reschedule(op->owner, op);
    }
    return n;
}

static bool name_is(const char *name, size_t len, const char *want) {
    return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* A header line's value, without the whitespace around it (and the CRLF
 * of a response's): [*@v, *@end). */
static void field_value(const char *colon, const char *line_end, const char **v,
                        const char **end) {
    const char *p = colon + 1, *e = line_end;
    while (p < e && (*p == ' ' || *p == '\t')) {
        p++;
    }
    while (e > p && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t')) {
        e--;
    }
    *v = p;
    *end = e;
}

static size_t on_header(char *buf, size_t size, size_t nitems, void *user_data) {
    sg_curl_op *op = user_data;
    size_t n = size * nitems;
    if (op->detach_pending) {
        return 0; /* decided (on_write) */
    }

    /* The same bound as the HTTP/2 transport's max_header_list, over the
     * whole response head: a server that sends more breaks the protocol. */
    op->at.header_bytes += n;
    if (op->at.header_bytes > SG__CURL_MAX_HEADER_BYTES) {
        op->at.header_overflow = true;
        return 0;
    }

    if (n >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
        /* A status line: the request reached the server.  Each response
         * head (an interim one, a redirect's) has its own bound. */
        op->at.header_bytes = n;
        const char *sp = memchr(buf, ' ', n);
        int status = 0;
        if (sp != NULL && (size_t)(sp - buf) + 4 <= n) {
            for (int i = 1; i <= 3; i++) {
                char c = sp[i];
                status = c >= '0' && c <= '9' ? status * 10 + (c - '0') : -1000;
            }
        }
        op->at.answered = true;
        op->at.h1 = n >= 7 && memcmp(buf, "HTTP/1.", 7) == 0;
        sg__lc_status(&op->lc, status > 0 ? status : 0, op_now(op));
        return n;
    }
    if (n <= 2 && (buf[0] == '\r' || buf[0] == '\n')) {
        /* The end of a header block: what follows may be a long wait for
         * the first byte of the body. */
        int64_t now = op_now(op);
        if (op->at.rbuf != NULL) {
            note_read(op, buf, n, now); /* trailers: a head's own bytes are
                                         * libcurl's header buffer's */
        }
        if (sg__lc_headers_end(&op->lc, now) == SG__LC_ERROR) {
            /* The answer is in (http_error, now); what the server said
             * comes with the body, read while it drains (when the
             * lifecycle wants it). */
            if (!sg__lc_error_response(&op->lc, now)) {
                op->at.http_abort = true;
                return 0;
            }
            if (op->owner != NULL) {
                sg__curl_multi_reschedule(op->owner, op);
            }
        }
        return n; /* interim, a stream, or a redirect libcurl may follow */
    }
    const char *colon = memchr(buf, ':', n);
    if (colon == NULL) {
        return n;
    }
    const size_t nlen = (size_t)(colon - buf);
    const char *v, *end;
    field_value(colon, buf + n, &v, &end);
    if (name_is(buf, nlen, "retry-after")) {
        sg__lc_retry_after(&op->lc, v, (size_t)(end - v));
    } else if (name_is(buf, nlen, "retry-after-ms")) {
        sg__lc_retry_after_ms(&op->lc, v, (size_t)(end - v));
    } else if (name_is(buf, nlen, "date")) {
        sg__lc_date(&op->lc, v, (size_t)(end - v));
    } else {
        sg__lc_ratelimit(&op->lc, buf, nlen, v, (size_t)(end - v));
    }
    return n;
}

static int on_prereq(void *clientp, char *primary_ip, char *local_ip, int primary_port,
                     int local_port) {
    sg_curl_op *op = clientp;
    if (op->detach_pending) {
        return CURL_PREREQFUNC_ABORT; /* decided (on_write): nothing goes */
    }
    if (sg__lc_error_draining(&op->lc)) {
        /* libcurl would answer an error response itself (an auth
         * challenge with CURLOPT_HTTPAUTH): that response is the
         * attempt's answer, and no request leaves but the policy's */
        return CURL_PREREQFUNC_ABORT;
    }
    if (!op->at.method_checked) {
        /* One method for safety, the report and the ledger: the one on the
         * wire.  The easy handle decides what libcurl sends (POSTFIELDS,
         * CUSTOMREQUEST, NOBODY...); the policy judged retry safety by its
         * own.  When they differ, nothing is sent. */
        op->at.method_checked = true;
        const char *wire = NULL;
        const char *declared = sg_op_method(op->lc.pol);
        if (curl_easy_getinfo(op->easy, CURLINFO_EFFECTIVE_METHOD, &wire) == CURLE_OK &&
            wire != NULL && declared != NULL && strcmp(wire, declared) != 0) {
            op->at.method_mismatch = true; /* its message: classify.c */
            return CURL_PREREQFUNC_ABORT;
        }
    }
    if (op->lc.sent && !op->at.answered) {
        /* Sent already in this attempt, and no answer since: libcurl is
         * about to send it again on a new connection (Curl_retry_request),
         * either because an HTTP/2 server refused the stream, or because
         * a reused connection died before any response byte. */
        if (sg__curl_refused_resend(op)) {
            /* never processed (RFC 9113 §8.7): the attempt ends unsent,
             * and a retry is the policy's - a new attempt in the report */
            op->at.refused = true;
            return CURL_PREREQFUNC_ABORT;
        }
        const sg_curl_op *root = op->root != NULL ? op->root : op;
        if (!sg_op_options_repeatable(sg__lc_options(&root->lc))) {
            /* A request not safe to repeat goes once - the attempt ends
             * here, sent (outcome unknown), for the policy to judge. */
            op->at.resent = true;
            return CURL_PREREQFUNC_ABORT;
        }
    }
    op->at.answered = false;
    op->at.h2 = sg__curl_speaks_h2(op->easy);
    if (op->at.h2 && op->owner != NULL) {
        sg__curl_multi_join_conn(op->owner, op, primary_ip, local_ip, primary_port,
                                 local_port);
    }
    /* Connected; the request is about to be written, with what is left
     * of the lease now (the connection took part of it). */
    sg__lc_restamp(&op->lc, op_now(op));
    sg__curl_restamp(op->dl_line, op->lc.dl_value);
    sg__curl_restamp(op->grpc_line, op->lc.grpc_value);
    op->lc.sent = true;
    sg_guard_set_phase(guard_of(op), SG_PHASE_SEND, op_now(op));
    return CURL_PREREQFUNC_OK;
}

/* ------------------------------------------------------ transport glue */

static void detach_transfer(sg_curl_op *op, bool stopped) {
    sg__curl_multi_unquiet(op);
    sg__curl_op_detach_pending(op);
    if (op->in_multi) {
        sg__curl_remove(op, stopped);
        op->in_multi = false;
    }
}

/* A stopped attempt (detach_transfer's @stopped: sg__curl_remove): under
 * the managed multi its transfer leaves libcurl later, when no clock is
 * about to come due (removing a transfer mid-body closes its connection,
 * ~12 us each, that would make each later stream of a thousand expiring
 * together that much later); an HTTP/1.x connection is shut down now, so
 * the server sees it end at the decision.  Should libcurl run the
 * transfer meanwhile, our callbacks end it and pass nothing on. */
static void stop_transfer(sg_curl_op *op) {
    op->at.paused = false; /* its read waits for nothing now */
    sg__curl_multi_unquiet(op);
    if (op->in_multi && op->owner != NULL) {
        op->in_multi = false;
        sg__curl_multi_defer_detach(op->owner, op);
        return;
    }
    detach_transfer(op, true);
}

static long ms_ceil(int64_t ns) {
    return (long)((ns + SG_MS(1) - 1) / SG_MS(1));
}

static int tp_launch(sg__lifecycle *lc, const sg_op_plan *plan, const sg__lc_stamp *st,
                     int64_t *now, sg_outcome *fail) {
    (void)now;
    sg_curl_op *op = OP_OF(lc);
    sg__curl_op_detach_pending(op); /* the handle goes in again */
    sg__curl_multi_unquiet(op);
    memset(&op->at, 0, sizeof(op->at));
    op->at.sock = CURL_SOCKET_BAD;
    if (op->root != NULL) {
        /* a hedge goes on a connection of its own, even to the same
         * endpoint: one that is stuck (or a backend behind it that is)
         * must not hold the hedge too */
        curl_easy_setopt(op->easy, CURLOPT_FRESH_CONNECT, 1L);
    }
    CURL *e = op->easy;
    const struct curl_slist *given = op->opts->headers;
    if (op->opts->n_endpoints > 0 && plan->endpoint < op->opts->n_endpoints) {
        /* this attempt's endpoint: its URL, headers and body */
        const sg__curl_endpoint *ep = &op->opts->endpoints[plan->endpoint];
        curl_easy_setopt(e, CURLOPT_URL, ep->url);
        if (ep->headers != NULL) {
            given = ep->headers;
        }
        if (ep->body != NULL) {
            curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)ep->body_len);
            curl_easy_setopt(e, CURLOPT_POSTFIELDS, ep->body);
        }
    }
    int rv = sg__curl_build_headers(op, given, st);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, op);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, op);
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, op);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, op->req_headers);
    curl_easy_setopt(e, CURLOPT_PRIVATE, op);
    op->cerr[0] = '\0';
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, op->cerr);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    /* Through a CONNECT proxy (https_proxy, which libcurl honours by
     * default) the proxy's "200 Connection established" is not the
     * server's answer: keep it out of the header callback, or the phase
     * would jump to wait_first_item before the request is even sent. */
    curl_easy_setopt(e, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    /* An expired clock removes the transfer at once, even while libcurl's
     * threaded resolver is still busy: let it leave that thread behind
     * instead of joining it (which would wait out the DNS query). */
    curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
    /* OpenSSL backends only (libcurl answers NOT_BUILT_IN elsewhere) */
    curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, sg__curl_on_ssl_ctx);
    int64_t connect_ns = sg_guard_config_connect_timeout(&plan->guard_config);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     ms_ceil(connect_ns > 0 ? connect_ns : plan->attempt_timeout_ns) +
                         SG__CURL_MARGIN_MS);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                     ms_ceil(plan->attempt_timeout_ns) + SG__CURL_MARGIN_MS);
    if (op->opts->cafile != NULL) {
        curl_easy_setopt(e, CURLOPT_CAINFO, op->opts->cafile);
    }
    if (rv == 0 && curl_multi_add_handle(op->multi, e) != CURLM_OK) {
        rv = SG_ECURL;
    }
    if (rv != 0) {
        *fail = SG_OUTCOME_TRANSPORT_ERROR;
        sg__lc_error(lc, "could not start the transfer: %s", sg_strerror(rv));
        return rv;
    }
    op->in_multi = true;
    return 0;
}

static void tp_abort(sg__lifecycle *lc) {
    sg_curl_op *op = OP_OF(lc);
    sg_outcome why;
    if (!sg__lc_has_error(lc) && op->cerr[0] != '\0') {
        sg__lc_error(lc, "%s", op->cerr); /* what libcurl said by then */
    }
    if (!sg__lc_has_error(lc) && sg_guard_check(guard_of(op), op_now(op), &why) == 1 &&
        why == SG_OUTCOME_CONNECT_TIMEOUT) {
        /* libcurl never says it (its transfer is ours to stop): in the HTTP/2
         * transport's words, how far the connection got */
        curl_off_t tcp = 0;
        curl_easy_getinfo(op->easy, CURLINFO_CONNECT_TIME_T, &tcp);
        sg__lc_error(lc, "connect timed out (%s)",
                     tcp > 0 ? "after the TCP connect: TLS or a proxy" : "TCP connect");
    }
    stop_transfer(op);
}

/* A request counts as sent once libcurl wrote all of it; until then the
 * phase stays "send".  Worked out only when an attempt is judged. */
static void tp_sync(sg__lifecycle *lc, int64_t now) {
    sg_curl_op *op = OP_OF(lc);
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

#define ROOT_OF(l) root_of(OP_OF(l))
#define OPTS_OF(op) ((op)->opts)
SG__LC_CALLBACK_SHIMS(sg_curl_op, ROOT_OF, OPTS_OF)

/* The operation ended: leave the driver, then tell the consumer.  After
 * this returns the op may have been freed by on_done. */
static void tp_finished(sg__lifecycle *lc) {
    sg_curl_op *op = OP_OF(lc);
    sg__lc_settle_losers(&op->lc, op_now(op)); /* recorded before on_done */
    for (size_t i = 0; i < SG_OP_MAX_HEDGES; i++) {
        if (sg__lc_slot(&op->lc, i) != NULL) {
            sg_curl_op *s = OP_OF(op->lc.slots[i]);
            if (s->owner != NULL) {
                sg__curl_multi_forget(s->owner, s);
            }
        }
    }
    if (op->owner != NULL) {
        sg__curl_multi_forget(op->owner, op);
    }
    if (op->opts->on_done != NULL) {
        op->opts->on_done(op, op->user_data);
    }
}

static int64_t tp_now(sg__lifecycle *lc) {
    return op_now(OP_OF(lc));
}

static sg__lifecycle *tp_new_slot(sg__lifecycle *root);

static void tp_reschedule(sg__lifecycle *lc) {
    sg_curl_op *op = OP_OF(lc);
    if (op->owner != NULL) {
        sg__curl_multi_reschedule(op->owner, op);
    }
}

static int tp_watch(sg__lifecycle *lc, int fd) {
    sg_curl_op *op = OP_OF(lc);
    return op->owner != NULL ? sg__curl_multi_watch(op->owner, op, fd) : SG_ESTATE;
}

/* Endpoint @i's URL and the credential header among the request headers
 * it is sent with (sg__credential_rank's first). */
static void tp_identity(sg__lifecycle *lc, uint32_t i, const char **url,
                        const char **cred, size_t *cred_len) {
    const sg_curl_options *o = OP_OF(lc)->opts;
    const struct curl_slist *given = o->headers;
    if (i < o->n_endpoints) {
        *url = o->endpoints[i].url;
        given = o->endpoints[i].headers != NULL ? o->endpoints[i].headers : given;
    } else {
        /* the operation's target, else the URL set on the easy handle
         * (libcurl gives it back before a transfer) */
        *url = sg_op_options_target(sg__lc_options(lc));
        char *set = NULL;
        if (*url == NULL && curl_easy_getinfo(OP_OF(lc)->easy, CURLINFO_EFFECTIVE_URL,
                                              &set) == CURLE_OK) {
            *url = set;
        }
    }
    int best = 4;
    for (const struct curl_slist *h = given; h != NULL; h = h->next) {
        const char *colon = strchr(h->data, ':');
        const int rank =
            colon != NULL ? sg__credential_rank(h->data, (size_t)(colon - h->data)) : -1;
        if (rank >= 0 && rank < best) {
            const char *v, *end;
            field_value(colon, colon + strlen(colon), &v, &end);
            best = rank;
            *cred = v;
            *cred_len = (size_t)(end - v);
        }
    }
}

static void tp_unwatch(sg__lifecycle *lc, int fd) {
    sg_curl_op *op = OP_OF(lc);
    if (op->owner != NULL) { /* else its multi is gone, and its watch too */
        sg__curl_multi_unwatch(op->owner, fd);
    }
}

static const sg__transport curl_transport = {
    .launch = tp_launch,
    .abort = tp_abort,
    .sync = tp_sync,
    .discard = sg__lc_shim_discard,
    .attempt_ended = sg__lc_shim_attempt,
    .finished = tp_finished,
    .now = tp_now,
    .reschedule = tp_reschedule,
    .new_slot = tp_new_slot,
    .watch = tp_watch,
    .unwatch = tp_unwatch,
    .bytes = tp_bytes,
    .identity = tp_identity,
    .framing = sg__curl_endpoint_framing,
};

/* ------------------------------------------------------------ life cycle */

int sg_curl_op_new(sg_curl_op **out, CURL *easy, const sg_op_options *policy,
                   const sg_curl_options *opts, void *user_data) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL; /* on every error */
    const uint32_t n_ep = opts != NULL ? opts->n_endpoints : 0;
    if (easy == NULL || (sg__op_options_endpoint_count(policy) > 0 && n_ep == 0)) {
        return SG_EINVAL; /* (endpoints the transport would not follow) */
    }
    sg_curl_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return SG_ENOMEM;
    }
    /* the options' read-only copy, shared with every operation made from
     * the same options (options.c) */
    int rv = 0;
    if (opts != NULL) {
        rv = sg__curl_options_take(opts, &op->opts);
    } else if ((rv = sg_curl_options_new(&op->opts)) == 0) {
        atomic_store_explicit(&op->opts->refs, 1, memory_order_relaxed);
    }
    if (rv == 0) {
        rv = sg__lc_init(&op->lc, &curl_transport, NULL, policy, &op->opts->framing,
                         op->opts->drain_ns, on_item, op);
        if (rv != 0) {
            sg__curl_options_drop(op->opts);
        }
    }
    if (rv == 0 && n_ep > 0) {
        /* the policy's endpoints are this list's URLs (copied) */
        const char *urls[SG_OP_MAX_ENDPOINTS];
        for (uint32_t i = 0; i < n_ep; i++) {
            urls[i] = op->opts->endpoints[i].url;
        }
        rv = sg_op_options_set_endpoints(op->lc.popts, urls, n_ep);
        if (rv != 0) {
            sg__lc_release(&op->lc);
            sg__curl_options_drop(op->opts);
        }
    }
    if (rv != 0) {
        free(op);
        return rv;
    }
    op->lc.deadline_header = op->opts->deadline_header;
    op->lc.grpc_timeout = op->opts->grpc_timeout;
    op->easy = easy;
    op->user_data = user_data;
    *out = op;
    return 0;
}

/* A hedge slot of @root: a duplicate of its easy handle, a lifecycle on
 * its policy, in its driver's heap.  NULL when out of memory. */
static sg__lifecycle *tp_new_slot(sg__lifecycle *root_lc) {
    sg_curl_op *root = OP_OF(root_lc);
    sg_curl_op *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    c->easy = curl_easy_duphandle(root->easy);
    if (c->easy == NULL ||
        sg__lc_init(&c->lc, root->lc.tp, &root->lc, NULL, &root->opts->framing,
                    root->opts->drain_ns, on_item, c) != 0) {
        if (c->easy != NULL) {
            curl_easy_cleanup(c->easy);
        }
        free(c);
        return NULL;
    }
    c->lc.deadline_header = root->lc.deadline_header;
    c->lc.grpc_timeout = root->lc.grpc_timeout;
    c->opts = root->opts; /* the root's: freed with it */
    c->user_data = root->user_data;
    c->root = root;
    c->multi = root->multi;
    if (sg__curl_multi_adopt(root->owner, c) != 0) {
        curl_easy_cleanup(c->easy);
        sg__lc_release(&c->lc);
        free(c);
        return NULL;
    }
    return &c->lc;
}

static void free_slot(sg_curl_op *c) {
    detach_transfer(c, true);
    sg__curl_multi_leave_conn(c);
    if (c->owner != NULL) {
        sg__curl_multi_forget(c->owner, c);
    }
    free(c->req_headers);
    curl_easy_cleanup(c->easy); /* the slot's own duplicate */
    sg__lc_release(&c->lc);
    free(c);
}

void sg_curl_op_free(sg_curl_op *op) {
    if (op == NULL) {
        return;
    }
    for (size_t i = 0; i < SG_OP_MAX_HEDGES; i++) {
        if (sg__lc_slot(&op->lc, i) != NULL) {
            free_slot(OP_OF(op->lc.slots[i]));
            sg__lc_slot_clear(&op->lc, i);
        }
    }
    sg__lc_drop_intent(&op->lc); /* unwatched while the multi holds it */
    detach_transfer(op, true);
    sg__curl_multi_leave_conn(op);
    if (op->owner != NULL) {
        sg__curl_multi_forget(op->owner, op);
    }
    /* The easy handle may outlive us: leave no pointer into freed memory,
     * and none of our callbacks to run on it - it is a plain handle again
     * (its other options, the caller's, as they were set). */
    curl_easy_setopt(op->easy, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(op->easy, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(op->easy, CURLOPT_WRITEFUNCTION, NULL);
    curl_easy_setopt(op->easy, CURLOPT_WRITEDATA, NULL);
    curl_easy_setopt(op->easy, CURLOPT_HEADERFUNCTION, NULL);
    curl_easy_setopt(op->easy, CURLOPT_HEADERDATA, NULL);
    curl_easy_setopt(op->easy, CURLOPT_PREREQFUNCTION, NULL);
    curl_easy_setopt(op->easy, CURLOPT_PREREQDATA, NULL);
    curl_easy_setopt(op->easy, CURLOPT_PRIVATE, NULL);
    curl_easy_setopt(op->easy, CURLOPT_SSL_CTX_FUNCTION, NULL);
    curl_easy_setopt(op->easy, CURLOPT_SSL_CTX_DATA, NULL);
    free(op->req_headers);
    sg__lc_release(&op->lc);
    sg__curl_options_drop(op->opts);
    free(op);
}

/* ------------------------------------------------------- driver interface */

int sg__curl_op_start(sg_curl_op *op, CURLM *multi, int64_t now) {
    op->multi = multi;
    return sg__lc_start(&op->lc, now);
}

int sg__curl_op_complete(sg_curl_op *op, CURLcode result, int64_t now) {
    detach_transfer(op, false);
    if (op->lc.state == SG__LC_DRAINING) {
        sg__lc_decide(&op->lc, now, SG_OUTCOME_OK);
    } else if (op->lc.state == SG__LC_RUNNING) {
        tp_sync(&op->lc, now); /* (the phase the verdict reads) */
        sg__curl_decide(op, result, now);
    }
    return sg__lc_settle(&op->lc, now);
}

int sg__curl_op_tick(sg_curl_op *op, int64_t now) {
    return sg__lc_tick(&op->lc, now); /* hedges too, when due */
}

/* ------------------------------------------------------------ public API */

int sg_curl_op_attach(sg_curl_op *op, CURLM *multi, int64_t now) {
    if (op == NULL || multi == NULL) {
        return SG_EINVAL;
    }
    if (op->lc.state != SG__LC_NEW) {
        return SG_ESTATE;
    }
    if (op->lc.hedging) {
        return SG_EUNSUPPORTED; /* hedges need the managed multi to run them */
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
    return sg__curl_op_tick(op, now);
}

int64_t sg_curl_op_next_deadline(const sg_curl_op *op) {
    if (op == NULL || op->lc.state == SG__LC_NEW) {
        return -1; /* nothing to drive yet */
    }
    return sg__lc_next_deadline(&op->lc); /* the next hedge too */
}

/* Unpauses @op's read if on_bytes paused it (libcurl may give the bytes
 * again from inside this call). */
static void resume_one(sg_curl_op *op) {
    if (op != NULL && op->at.paused) {
        op->at.paused = false;
        curl_easy_pause(op->easy, CURLPAUSE_CONT);
        if (op->owner != NULL) {
            sg__curl_multi_reschedule(op->owner, op);
        }
    }
}

int sg_curl_op_resume(sg_curl_op *op) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    resume_one(op);
    for (size_t i = 0; i < SG_OP_MAX_HEDGES; i++) {
        if (sg__lc_slot(&op->lc, i) != NULL) {
            resume_one(OP_OF(op->lc.slots[i]));
        }
    }
    return 0;
}

bool sg_curl_op_paused(const sg_curl_op *op) {
    if (op == NULL || sg_curl_op_done(op)) {
        return false; /* a read held by an ended attempt waits for nothing */
    }
    bool any = op->at.paused;
    for (size_t i = 0; i < SG_OP_MAX_HEDGES && !any; i++) {
        any = sg__lc_slot(&op->lc, i) != NULL && OP_OF(op->lc.slots[i])->at.paused;
    }
    return any;
}

int sg_curl_op_cancel(sg_curl_op *op) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    sg__lc_cancel_all(&op->lc); /* every attempt in flight, due at once */
    return 0;
}

sg_outcome sg_curl_op_outcome(const sg_curl_op *op) {
    return op != NULL ? sg_op_outcome(op->lc.pol) : SG_OUTCOME_NONE;
}

bool sg_curl_op_done(const sg_curl_op *op) {
    return op != NULL && op->lc.state == SG__LC_DONE;
}

const sg_op *sg_curl_op_policy(const sg_curl_op *op) {
    /* never started (or refused by its observer): nothing to read */
    return op != NULL && sg__op_started(op->lc.pol) ? op->lc.pol : NULL;
}

CURL *sg_curl_op_easy(const sg_curl_op *op) {
    return op != NULL ? op->easy : NULL;
}

void *sg_curl_op_user_data(const sg_curl_op *op) {
    return op != NULL ? op->user_data : NULL;
}

const char *sg_curl_op_error(const sg_curl_op *op) {
    return op != NULL ? sg__lc_errmsg(&op->lc) : "";
}

const char *sg_curl_op_error_body(const sg_curl_op *op, size_t *len) {
    return sg__lc_error_body(op != NULL ? &op->lc : NULL, len);
}

int sg_curl_op_report(const sg_curl_op *op, char *buf, size_t len, size_t *needed) {
    if (op == NULL || op->lc.state == SG__LC_NEW) {
        return SG_EINVAL;
    }
    return sg_op_report_write(op->lc.pol, op_now(op), buf, len, needed);
}
