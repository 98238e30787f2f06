/*
 * upstream.c - a client's request as one guarded operation upstream, and
 * what reaches the client of it.
 *
 * The request goes to its route's upstream (the client's path less the
 * route's prefix, after the upstream's path) with the client's headers
 * less the hop-by-hop ones, under the route's policy, its budget the
 * tighter of the route's and the client's inbound deadline.  Each
 * attempt's body bytes wait in a buffer of their own (on_bytes) until one
 * of its items comes.  The first item (the first token: a profile holds
 * metadata until it) commits the answer: status and headers, then that
 * attempt's bytes; the others' are dropped, and hedges lose.  After the
 * commit the attempt's SSE events and NDJSON lines go to the client as
 * the library delivers the items they carry, found by their bytes in the
 * relay however the reads fell (relay.c; an event stream's messages as
 * each is whole), and leave in one send for all a pass released
 * (conn.c).  The end: ok closes the connection; anything else appends
 * the provider's in-band error first.  A failure before the commit is an
 * HTTP error in the provider's format.
 *
 * A client slower than the stream: once client_buffer bytes wait for it,
 * the upstream read is paused (SG_CURL_BYTES_PAUSE: TCP then pushes back
 * on the upstream) and resumed when the client has read half of them, so
 * memory never grows with a slow reader.  The stream's clocks run on
 * while it waits: a client slower than the idle clock ends the stream as
 * idle_timeout.  Before the commit, what an attempt holds is bounded by
 * client_buffer too (past it the operation is cancelled).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conn.h"
#include "readbuf.h"
#include "../common/include_usage.h"

/* ------------------------------------------------------ the operation */

static struct pending *pending_of(struct conn *c, uint32_t attempt, bool make) {
    struct pending *free_slot = NULL;
    if (c->pend == NULL) {
        if (!make) {
            return NULL;
        }
        c->pend = calloc(1 + SG_OP_MAX_HEDGES, sizeof(*c->pend));
        if (c->pend == NULL) {
            return NULL;
        }
    }
    for (size_t i = 0; i < 1 + SG_OP_MAX_HEDGES; i++) {
        if (c->pend[i].attempt == attempt) {
            return &c->pend[i];
        }
        if (c->pend[i].attempt == 0 && free_slot == NULL) {
            free_slot = &c->pend[i];
        }
    }
    if (make && free_slot != NULL) {
        free_slot->attempt = attempt;
        free_slot->n = 0;
    }
    return make ? free_slot : NULL;
}

/* Every attempt's bytes go, and the slots: a stream holds nothing for
 * the attempts that did not commit. */
void pending_release(struct conn *c) {
    if (c->pend != NULL) {
        for (size_t i = 0; i < 1 + SG_OP_MAX_HEDGES; i++) {
            free(c->pend[i].p);
        }
        free(c->pend);
        c->pend = NULL;
    }
}

static void too_slow(struct conn *c) {
    c->too_slow = !c->client_gone;
    conn_wake(c); /* cancelled at the next pass, should the library not */
}

/* A failure of the proxy's own - out of memory (503), a limit of its own
 * (500) - ends the operation (returned from a callback: cancelled), and
 * the client is told it was the proxy's, not its request's or the
 * upstream's. */
static int own_failure(struct conn *c, int status, const char *what) {
    if (c->own_status == 0) {
        c->own_status = status;
        c->own_what = what;
    }
    return 1;
}

#define HOLD_LIMIT \
    "more bytes without an item than it holds (--client-buffer + the largest event)"

/* The relay's first @n held bytes, released to the client: they go when
 * the loop's pass ends, with every other event its reads released (one
 * send, not one per event).  A client more than client_buffer behind
 * that the read which crossed it would put twice that behind is too slow
 * (as put()). */
static int pass_on(struct conn *c, size_t n) {
    if (n == 0) {
        return 0;
    }
    const size_t waiting = client_waiting(c);
    const size_t cb = c->proxy->client_buffer;
    if (waiting + n > 2 * cb && waiting > cb) {
        too_slow(c);
        return 1;
    }
    relay_release(&c->relay, n);
    conn_dirty(c);
    return 0;
}

/* Gives the client @item's event (and what precedes it: comments,
 * keepalives, held metadata). */
static int release(struct conn *c, const sg_item *item) {
    return pass_on(c, relay_item(&c->relay, item));
}

/* What a stream may hold of one event while it waits for the event's end:
 * the client buffer, and room for one whole event of the largest the
 * framing takes (its max_event: a route keeps the default) - an event is
 * never the client's fault. */
static size_t hold_bound(const struct conn *c) {
    return c->proxy->client_buffer + SG_FRAMING_DEFAULT_MAX_EVENT;
}

/* The committed attempt's bytes, into the relay: an event stream goes on
 * from there message by message; SSE and NDJSON wait for their items. */
static int forward(struct conn *c, const char *p, size_t n) {
    size_t held;
    (void)relay_held(&c->relay, &held);
    if (held + n > hold_bound(c)) {
        return own_failure(c, 500, "the upstream sent " HOLD_LIMIT);
    }
    if (!relay_add(&c->relay, p, n)) {
        return own_failure(c, 503, "out of memory");
    }
    if (sg_stream_config_format(c->up_framing) != SG_FORMAT_EVENTSTREAM) {
        return 0; /* each event goes with its item (release) */
    }
    return pass_on(c, relay_messages(&c->relay));
}

static int on_bytes(sg_curl_op *op, uint32_t attempt, const void *data, size_t len,
                    void *ud) {
    (void)op;
    struct conn *c = ud;
    if (c->client_gone) {
        return 1; /* nobody to stream to */
    }
    if (c->committed) {
        if (attempt != c->committed_attempt) {
            return 0;
        }
        if (client_waiting(c) >= c->proxy->client_buffer) {
            /* the client is a buffer behind: the upstream read waits, and
             * libcurl gives these bytes again once it has caught up */
            return SG_CURL_BYTES_PAUSE;
        }
        return forward(c, data, len);
    }
    struct pending *pd = pending_of(c, attempt, true);
    if (pd == NULL && c->pend == NULL) {
        return own_failure(c, 503, "out of memory");
    }
    if (pd == NULL) {
        return own_failure(c, 500, "more attempts at once than it holds");
    }
    if (pd->n + len > hold_bound(c)) {
        return own_failure(c, 500, "the upstream sent " HOLD_LIMIT);
    }
    if (!grow(&pd->p, &pd->cap, pd->n + len)) {
        return own_failure(c, 503, "out of memory");
    }
    memcpy(pd->p + pd->n, data, len);
    pd->n += len;
    return 0;
}

/* The HTTP version @c's upstream answered in, learned for its route:
 * whether later requests go through the shards (start_operation).  Read
 * at the commit (the first burst to a cold route learns it as its first
 * token comes) and at the end. */
static void learn_version(struct conn *c) {
    long v = 0;
    if (c->easy == NULL || c->route->seen_h2 ||
        curl_easy_getinfo(c->easy, CURLINFO_HTTP_VERSION, &v) != CURLE_OK) {
        return;
    }
    /* c->route is c->set's own (conn.c sets both), here writable */
    struct route *r = &c->set->r[c->route - c->set->r];
    if (v >= CURL_HTTP_VERSION_2_0) {
        r->seen_h2 = true;
    } else if (v == CURL_HTTP_VERSION_1_0 || v == CURL_HTTP_VERSION_1_1) {
        r->seen_h1 = true;
    }
}

/* The first token: the answer's head, and what its attempt sent so far. */
static int commit(struct conn *c, uint32_t attempt) {
    char head[512];
    /* its bytes are its endpoint's profile's (a fallback may have its own) */
    fallback_framing(c, attempt, &c->up_framing, &c->up_profile);
    snprintf(head, sizeof(head),
             "HTTP/1.1 200 OK\r\nContent-Type: %s\r\nCache-Control: no-cache\r\n"
             "Connection: close\r\nX-SG-Attempt: %u\r\n\r\n",
             answer_content_type(c->up_framing), attempt);
    learn_version(c);
    c->committed = true;
    c->committed_attempt = attempt;
    c->committed_at = now_ns();
    c->state = C_STREAMING;
    put_str(c, head);
    struct pending *pd = pending_of(c, attempt, false);
    int rv = 0;
    relay_init(&c->relay, sg_stream_config_format(c->up_framing));
    if (pd != NULL && pd->n > 0) {
        rv = forward(c, pd->p, pd->n);
    }
    flush_out(c);
    pending_release(c); /* every other attempt's bytes go, and their slots */
    return rv;
}

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    struct conn *c = ud;
    if (!c->committed && commit(c, item->attempt) != 0) {
        return 1;
    }
    if (c->client_gone || item->attempt != c->committed_attempt) {
        return c->client_gone ? 1 : 0;
    }
    return release(c, item);
}

/* What attempt @attempt held before the commit goes: it can never be
 * the answer now. */
static void release_pending(struct conn *c, uint32_t attempt) {
    struct pending *pd = pending_of(c, attempt, false);
    if (pd == NULL) {
        return;
    }
    free(pd->p);
    *pd = (struct pending){0, NULL, 0, 0};
    for (size_t i = 0; i < 1 + SG_OP_MAX_HEDGES; i++) {
        if (c->pend[i].attempt != 0) {
            return;
        }
    }
    pending_release(c); /* none held: nor their slots */
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome, void *ud) {
    (void)op;
    (void)outcome;
    release_pending(ud, attempt);
}

/* Every attempt that ends uncommitted frees its slot - not only a partial
 * one (on_discard): one that got bytes and no first token holds them too,
 * and the slots are as many as the attempts that may run at once. */
static void on_attempt(sg_curl_op *op, const sg_op_attempt *rec, void *ud) {
    (void)op;
    struct conn *c = ud;
    if (!c->committed || rec->n != c->committed_attempt) {
        release_pending(c, rec->n);
    }
}

/* The report line: the library's report, the route and the client. */
static void log_report(struct conn *c) {
    struct proxy *p = c->proxy;
    size_t need = 0;
    char small[16384];
    char *buf = small;
    int rv = sg_curl_op_report(c->op, buf, sizeof(small), &need);
    if (rv == SG_ENOBUFS && (buf = malloc(need)) != NULL) {
        rv = sg_curl_op_report(c->op, buf, need, NULL);
    }
    if (rv == 0) {
        fprintf(p->log, "{\"route\":\"%s\",\"client\":\"%s\",\"models\":", c->route->name,
                c->peer);
        fallback_models_fwrite(p->log, c);
        fprintf(p->log, ",\"report\":%s}\n", buf);
        fflush(p->log);
    }
    if (buf != small) {
        free(buf);
    }
}

/* When the upstream will take requests again, for a 429, 503 or 529 passed
 * through ("" when it did not say): Retry-After in whole seconds, rounded
 * up, and retry-after-ms (what the OpenAI and Anthropic SDKs read first)
 * in milliseconds, from whichever of the two the upstream sent. */
static void retry_after_of(const sg_op_attempt *a, char *out, size_t cap) {
    out[0] = '\0';
    if (a != NULL && a->retry_after_ns >= 0) {
        long long s = (long long)((a->retry_after_ns + SG_SEC(1) - 1) / SG_SEC(1));
        long long ms = (long long)((a->retry_after_ns + SG_MS(1) - 1) / SG_MS(1));
        snprintf(out, cap, "Retry-After: %lld\r\nretry-after-ms: %lld\r\n", s, ms);
    }
}

/* The type of an upstream error body passed through: the upstream's own
 * Content-Type when it is a plain header value, else JSON when it looks
 * like JSON (provider errors are), else text. */
static const char *error_body_type(const struct conn *c, const char *body, size_t len) {
    const char *ct = NULL;
    CURL *easy = sg_curl_op_easy(c->op);
    if (easy != NULL && curl_easy_getinfo(easy, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK &&
        ct != NULL && ct[0] != '\0' && strlen(ct) < 128) {
        bool plain = true;
        for (const char *q = ct; *q != '\0'; q++) {
            plain = plain && (unsigned char)*q >= 0x20 && (unsigned char)*q < 0x7f;
        }
        if (plain) {
            return ct;
        }
    }
    size_t i = 0;
    while (i < len &&
           (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n')) {
        i++;
    }
    return i < len && (body[i] == '{' || body[i] == '[') ? "application/json"
                                                         : "text/plain; charset=utf-8";
}

static void answer_failure(struct conn *c, sg_outcome o) {
    const sg_op *pol = sg_curl_op_policy(c->op);
    const sg_op_attempt *a = sg_op_deciding_attempt(pol);
    if (a == NULL) {
        uint32_t n = sg_op_attempt_count(pol);
        a = n > 0 ? sg_op_attempt_at(pol, n - 1) : NULL;
    }
    int upstream = a != NULL ? a->http_status : 0;
    int status = answer_status(o, upstream);
    enum answer_style style = answer_style_of(c->route->profile);
    char body[1400];
    const char *detail = sg_curl_op_error(c->op);
    if (a != NULL && a->provider_error_type[0] != '\0') {
        detail = a->provider_error_type;
    }
    answer_error_body(style, o, status, detail, body, sizeof(body));
    char extra[224];
    char ra[96] = "";
    if (status == 429 || status == 503 || status == 529) {
        retry_after_of(a, ra, sizeof(ra));
    }
    /* a request that may have taken effect: said, for reconciliation (and
     * x-should-retry: false, as on every answer to a request that went
     * upstream, keeps the client's own retries from sending it again) */
    const bool unknown = a != NULL && a->outcome_unknown;
    snprintf(extra, sizeof(extra), "X-SG-Outcome: %s\r\n%s%s", sg_outcome_name(o), ra,
             unknown ? "X-SG-Outcome-Unknown: true\r\n" : "");
    /* the upstream's status passed through: so is what it said (the
     * reason an SDK shows: "invalid api key", "model not found") */
    size_t ulen = 0;
    const char *said = NULL;
    uint32_t n = sg_op_attempt_count(pol);
    if (o == SG_OUTCOME_HTTP_ERROR && status == upstream && n > 0 &&
        a == sg_op_attempt_at(pol, n - 1)) {
        said = sg_curl_op_error_body(c->op, &ulen);
        if (ulen >= SG_ERROR_BODY_MAX) {
            said = NULL; /* it may have been cut: no half a JSON text */
        }
    }
    if (said != NULL) {
        reply_bytes(c, status, sg_fm_h1_status_text(status), extra,
                    error_body_type(c, said, ulen), said, ulen);
        return;
    }
    reply(c, status, sg_fm_h1_status_text(status), extra, body);
}

/* The upstream's own in-band error (provider_error), passed on as the
 * upstream wrote it - its type, message and code are the provider's, and
 * the client's SDK raises them as such: true when it went. */
static bool pass_upstream_error(struct conn *c) {
    if (sg_stream_config_format(c->up_framing) == SG_FORMAT_EVENTSTREAM) {
        /* its exception message went on as it came, a whole message */
        relay_discard(&c->relay);
        return true;
    }
    size_t end = relay_error_end(&c->relay, c->up_framing);
    if (end == 0) {
        return false;
    }
    relay_release(&c->relay, end);
    relay_discard(&c->relay); /* what followed it, unread */
    return true;
}

static void answer_in_band_error(struct conn *c, sg_outcome o) {
    if (o == SG_OUTCOME_PROVIDER_ERROR && pass_upstream_error(c)) {
        return;
    }
    /* in the format of the stream the client is reading: the committed
     * attempt's */
    enum answer_style style = answer_style_of(c->up_profile);
    /* what the client got ends on a whole event or line (the rest of a cut
     * one is dropped): the error is an event of its own */
    relay_discard(&c->relay);
    char buf[1600];
    const char *detail = sg_curl_op_error(c->op);
    const sg_op_attempt *a = sg_op_deciding_attempt(sg_curl_op_policy(c->op));
    if (a != NULL && a->provider_error_type[0] != '\0') {
        detail = a->provider_error_type; /* the upstream's, when not found as written */
    }
    size_t n = c->own_status != 0
                   ? answer_own_in_band(style, c->own_what, buf, sizeof(buf))
                   : answer_in_band(style, o, detail, buf, sizeof(buf));
    /* no room for it (out of memory): a reset, not a clean short answer */
    c->cut = n == 0 || !put(c, buf, n);
}

/* The operation ended: the client is told now - the in-band error or the
 * stream's last bytes, or the failure's answer - and nothing else.  Its
 * report line, metrics, memory and connection wait for the end of the
 * pass (conns_finish): on_done runs inside the library's step, where the
 * clocks due beside this one are still to be decided, and with a thousand
 * streams stalling together the last of them would otherwise wait for
 * every report line, free and close before it (tens of microseconds
 * each).  The stopped transfer itself leaves libcurl (closing its upstream
 * connection) after every due clock of the step is decided: that is the
 * library's, as long as the operation is not freed here. */
static void on_done(sg_curl_op *op, void *ud) {
    struct conn *c = ud;
    sg_outcome o = sg_curl_op_outcome(op);
    c->ended_at = now_ns();
    if (!c->client_gone) {
        if (c->committed) {
            c->state = C_CLOSING;
            if (o != SG_OUTCOME_OK) {
                answer_in_band_error(c, o);
            } else {
                /* a clean end after bytes with no event end (a terminal
                 * without its blank line): they are the stream's too */
                size_t held;
                (void)relay_held(&c->relay, &held);
                relay_release(&c->relay, held);
            }
            flush_out(c);
        } else if (c->own_status != 0) {
            reply_error(c, c->own_status, c->own_what);
        } else if (!health_answer_refused(c)) {
            answer_failure(c, o);
        }
    }
    c->state = C_CLOSING;
    /* what is left for the client: --header-timeout at a time, renewed
     * while the client takes any of it (conn.c) */
    conn_deadline(c, sg_time_add(c->ended_at, c->proxy->header_timeout));
    conn_finish_later(c);
}

void finish_operation(struct conn *c) {
    learn_version(c);
    log_report(c);
    metrics_observe(c->route, sg_curl_op_policy(c->op),
                    (double)(c->ended_at - c->arrived) / 1e9,
                    c->committed ? (double)(c->committed_at - c->arrived) / 1e9 : -1.0);
    (void)client_took(c); /* what it took so far: the next look's start */
    /* the multi has let go of it: freed here, as the library allows */
    free_op(c);
    c->finishing = false;
    if (c->client_gone || client_waiting(c) == 0) {
        conn_free(c);
    }
}

/* ------------------------------------------------------ the request */

/* One line for the upstream request's headers (request.c's
 * preq_line_fn): 0, or -1 when the memory is not there. */
static int add_line(void *ud, const char *line) {
    struct conn *c = ud;
    if (trace_owns(c->proxy, line)) {
        return 0; /* each attempt sends its own span's (trace.c) */
    }
    struct curl_slist *s = curl_slist_append(c->headers, line); /* copies it */
    if (s == NULL) {
        return -1;
    }
    c->headers = s;
    return 0;
}

char *url_join(const char *base, size_t base_len, const char *target, size_t tlen) {
    char *u = malloc(base_len + tlen + 1);
    if (u != NULL) {
        memcpy(u, base, base_len);
        memcpy(u + base_len, target, tlen);
        u[base_len + tlen] = '\0';
    }
    return u;
}

bool upstream_sent(const struct conn *c) {
    const sg_op *pol = c->op != NULL ? sg_curl_op_policy(c->op) : NULL;
    uint32_t n = pol != NULL ? sg_op_attempt_count(pol) : 0;
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(pol, i);
        if (a != NULL && a->sent) {
            return true;
        }
    }
    return false;
}

/* The client's own deadline, by the header that carries it: its
 * parser, and how many of the parsed unit make one (X-Stainless-Timeout,
 * which the OpenAI and Anthropic SDKs send with each request, is their
 * timeout in whole seconds, cut down: read as milliseconds, times 1000). */
static const struct {
    const char *name;
    int (*parse)(const char *value, size_t len, int64_t *ns);
    int64_t times;
} inbound[] = {
    {"x-deadline-ms", sg_deadline_ms_parse, 1},
    {"grpc-timeout", sg_grpc_timeout_parse, 1},
    {"x-stainless-timeout", sg_deadline_ms_parse, 1000},
};

/* The inbound budget - the tightest of X-Deadline-Ms, grpc-timeout and
 * X-Stainless-Timeout - as a deadline.  X-Stainless-Timeout: 0 (a timeout
 * under a second, cut down to none) bounds nothing: no answer could come
 * before it. */
static bool inbound_deadline(struct conn *c, int64_t *deadline) {
    int64_t ns = -1;
    for (size_t i = 0; i < sizeof(inbound) / sizeof(inbound[0]); i++) {
        const sg_fm_h1_header *h = sg_fm_h1_find_header(&c->rq->req, inbound[i].name);
        int64_t v;
        if (h == NULL || inbound[i].parse(h->value, h->value_len, &v) != 0 ||
            (inbound[i].times > 1 && v == 0)) {
            continue;
        }
        v = v > SG_DURATION_MAX / inbound[i].times ? SG_DURATION_MAX
                                                   : v * inbound[i].times;
        if (ns < 0 || v < ns) {
            ns = v;
        }
    }
    if (ns < 0) {
        return false;
    }
    return sg_deadline_from_timeout(c->arrived, ns, c->proxy->transit_allowance,
                                    deadline) == 0;
}

/* The operation's options: the route's framing and CA, the request's
 * headers, the deadline stamp, and the URL then each fallback (joined to
 * the same target, with its own headers and model: fallback.c).  0, or a negative code
 * (no memory). */
static int upstream_options(struct conn *c, const char *target, size_t target_len,
                            sg_curl_options **out) {
    const struct route *r = c->route;
    sg_curl_options *o = NULL;
    int rv = sg_curl_options_new(&o);
    if (rv == 0) {
        (void)sg_curl_options_set_on_item(o, on_item);
        (void)sg_curl_options_set_on_discard(o, on_discard);
        (void)sg_curl_options_set_on_attempt(o, on_attempt);
        (void)sg_curl_options_set_on_done(o, on_done);
        (void)sg_curl_options_set_on_bytes(o, on_bytes);
        (void)sg_curl_options_set_deadline_header(o, true);
        rv = sg_curl_options_set_framing(o, &r->framing);
    }
    if (rv == 0) {
        rv = sg_curl_options_set_headers(o, c->headers);
    }
    if (rv == 0) {
        rv = sg_curl_options_set_cafile(o, r->cafile);
    }
    if (rv == 0) {
        rv = fallback_endpoints(c, o, target, target_len);
    }
    if (rv != 0) {
        sg_curl_options_free(o);
        o = NULL;
    }
    *out = o;
    return rv;
}

/* include-usage: a Chat Completions request (a POST to a path ending in
 * /chat/completions) whose body streams without saying whether it wants
 * its usage gets the field (include_usage.h); *@body and *@len then name
 * the new body, which the connection keeps.  0, or -1 out of memory. */
static int with_usage(struct conn *c, const char *target, size_t target_len,
                      const char **body, size_t *len) {
    static const char chat[] = "/chat/completions";
    const size_t cl = sizeof(chat) - 1;
    size_t path_len = 0;
    while (path_len < target_len && target[path_len] != '?') {
        path_len++;
    }
    struct iu_edit ed;
    if (!c->route->include_usage || strcmp(c->rq->method, "POST") != 0 || path_len < cl ||
        memcmp(target + path_len - cl, chat, cl) != 0 ||
        !include_usage_edit(*body, *len, &ed)) {
        return 0;
    }
    c->body = include_usage_apply(*body, *len, &ed, len);
    if (c->body == NULL) {
        return -1;
    }
    *body = c->body;
    return 0;
}

/* Whether the environment names a proxy libcurl may go through (one
 * reached over TLS needs its CA paths); read once. */
static bool proxy_in_env(void) {
    static int known = -1;
    if (known < 0) {
        static const char *const vars[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
                                           "HTTPS_PROXY", "all_proxy",  "ALL_PROXY"};
        known = 0;
        for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
            const char *v = getenv(vars[i]);
            known |= v != NULL && v[0] != '\0';
        }
    }
    return known != 0;
}

void start_operation(struct conn *c) {
    struct proxy *p = c->proxy;
    if (p->draining) {
        /* a request that came after SIGTERM, on a connection from before
         * it: no new work while the proxy drains */
        reply_error(c, 503, "shutting down");
        return;
    }
    /* routed and checked as the head came (request.c) */
    const struct preq *q = c->rq;
    const struct route *r = c->route;
    const char *target = q->req.target + r->prefix_len;
    size_t target_len = q->req.target_len - r->prefix_len;
    c->state = C_UPSTREAM;
    c->url = url_join(r->upstream, r->upstream_len, target, target_len);
    c->easy = curl_easy_init();
    if (c->url == NULL || c->easy == NULL) {
        reply_error(c, 503, "out of memory");
        return;
    }
    /* the method whole, as the client wrote it (at most
     * PREQ_METHOD_MAX: request.c refuses a longer one) */
    const char *method = q->method;
    CURL *e = c->easy;
    curl_easy_setopt(e, CURLOPT_URL, c->url);
    curl_easy_setopt(e, CURLOPT_USERAGENT, NULL); /* the client's, forwarded */
    if (q->has_body) {
        /* the body as read, in place (it outlives the operation), or with
         * include-usage's field */
        const char *body = q->in + q->head_len;
        size_t len = q->body_len;
        if (with_usage(c, target, target_len, &body, &len) != 0) {
            reply_error(c, 503, "out of memory");
            return;
        }
        if (fallback_read_body(c, body, len) != 0) {
            reply_error(c, 400,
                        "the request body is not JSON: the route's fallbacks replace "
                        "its \"model\"");
            return;
        }
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (strcmp(method, q->has_body ? "POST" : "GET") != 0) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    }
    if (r->cafile != NULL) {
        curl_easy_setopt(e, CURLOPT_CAINFO, r->cafile);
    } else if (r->plain) {
        /* no TLS on any endpoint: libcurl's default CA paths would be
         * copied into the handle and again into its connection for
         * nothing (four strings, ~160 bytes a stream) */
        curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
        if (!proxy_in_env()) {
            curl_easy_setopt(e, CURLOPT_PROXY_CAINFO, NULL);
            curl_easy_setopt(e, CURLOPT_PROXY_CAPATH, NULL);
            (void)readbuf_share(e, c->url); /* no read buffer per stream: readbuf.c */
        }
    }
    if (r->plain || (r->seen_h1 && !r->seen_h2)) {
        pool_join(c, e, &p->pool); /* HTTP/1.x: pool.h */
    } else if (strncmp(c->url, "https://", 8) == 0) {
        /* wait for a connection being made to say whether it multiplexes
         * (ALPN h2) rather than open one more beside it: concurrent
         * requests of a shard then share one HTTP/2 connection, and no
         * connection carries more than a shard's (pool.h) */
        curl_easy_setopt(e, CURLOPT_PIPEWAIT, 1L);
        pool_join(c, e, &p->pool_h2);
    }
    /* the client's headers, less what is the proxy's to decide, each one
     * whole whatever its size (the head's limit bounds them), and nothing
     * libcurl would add */
    if (preq_header_lines(q, add_line, c) != 0) {
        reply_error(c, 503, "out of memory");
        return;
    }

    /* the request's own policy: the route's, with what this request says */
    sg_op_options *po = NULL;
    if (sg_op_options_dup(&po, r->policy) != 0 ||
        sg_op_options_set_target(po, c->url) != 0) {
        sg_op_options_free(po);
        reply_error(c, 503, "out of memory");
        return;
    }
    if (sg_op_options_set_method(po, method) != 0) {
        sg_op_options_free(po);
        reply_error(c, 501, "a method the library does not take");
        return;
    }
    const sg_fm_h1_header *key = sg_fm_h1_find_header(&q->req, "idempotency-key");
    bool key_taken = false;
    if (key != NULL && key->value_len > 0 &&
        key->value_len <= SG_OP_IDEMPOTENCY_KEY_MAX) {
        char k[SG_OP_IDEMPOTENCY_KEY_MAX + 1];
        memcpy(k, key->value, key->value_len);
        k[key->value_len] = '\0';
        key_taken = sg_op_options_set_idempotency_key(po, k) == 0;
    }
    if (key != NULL && !key_taken && preq_header_line(key, add_line, c) != 0) {
        /* a key the library does not take (longer than it keeps, or not
         * printable ASCII) is still the upstream's: forwarded as sent, and
         * the request is retried as one without a key */
        sg_op_options_free(po);
        reply_error(c, 503, "out of memory");
        return;
    }
    int64_t deadline;
    if (inbound_deadline(c, &deadline)) {
        sg_op_options_set_deadline(po, deadline); /* the tighter of the two */
    }
    sg_curl_options *co = NULL;
    int rv = trace_request(c, po);
    if (rv == 0) {
        rv = upstream_options(c, target, target_len, &co);
    }
    if (rv == 0) {
        rv = sg_curl_op_new(&c->op, e, po, co, c);
    }
    sg_curl_options_free(co); /* the operation has copies of both */
    sg_op_options_free(po);
    if (rv == 0) {
        /* and of the header lines and the URL (libcurl has its own of the
         * URL too): the stream keeps one copy of them, not two */
        curl_slist_free_all(c->headers);
        c->headers = NULL;
        free(c->url);
        c->url = NULL;
    }
    if (rv == 0) {
        rv = sg_curl_multi_add(p->multi, c->op); /* on_done may run in here */
    }
    if (rv != 0) {
        char what[128];
        snprintf(what, sizeof(what), "cannot start the operation (%s)", sg_strerror(rv));
        free_op(c);
        reply_error(c, rv == SG_ENOMEM ? 503 : 500, what);
    }
}
