/* The attempt lifecycle shared by every transport (see lifecycle.h); what
 * it takes in of a response is in response.c. */
#include "transport/lifecycle.h"

#include "framing/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SG__LC_DEFAULT_DRAIN SG_MS(200)

sg__lc_more *sg__lc_more_get(sg__lifecycle *lc) {
    if (lc->more == NULL) {
        lc->more = calloc(1, sizeof(*lc->more));
    }
    return lc->more;
}

void sg__lc_error(sg__lifecycle *lc, const char *fmt, ...) {
    sg__lc_more *m = sg__lc_more_get(lc);
    if (m == NULL) {
        return; /* the outcome still says what happened */
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->errbuf, sizeof(m->errbuf), fmt, ap);
    va_end(ap);
}

int sg__lc_init(sg__lifecycle *lc, const sg__transport *tp, sg__lifecycle *primary,
                const sg_op_options *popts, const sg_stream_config *framing,
                int64_t drain_ns, sg_item_cb on_item, void *item_ud) {
    if (drain_ns < 0) {
        return SG_EINVAL;
    }
    memset(lc, 0, sizeof(*lc));
    /* the body's buffers grow as bytes must be kept and are freed as they
     * empty: an operation reserves nothing for the framing's limits */
    int rv = sg__stream_init_mem(&lc->stream, framing, on_item, item_ud);
    if (rv != 0) {
        return rv;
    }
    lc->tp = tp;
    lc->framing_op = framing;
    lc->framing_now = framing;
    lc->drain_ns = drain_ns > 0 ? drain_ns : SG__LC_DEFAULT_DRAIN;
    lc->intent_fd = -1;
    if (primary != NULL) {
        /* a hedge slot: no policy of its own (a hedge is one attempt of
         * its primary's operation), idle until a hedge falls due */
        lc->pol = primary->pol;
        lc->primary = primary;
        lc->hedging = primary->hedging;
        lc->state = SG__LC_IDLE;
        return 0;
    }
    rv = sg__op_options_take(&lc->popts, popts);
    if (rv == 0) {
        rv = sg_op_new(&lc->policy);
    }
    if (rv != 0) {
        sg__op_options_drop(lc->popts);
        sg__stream_release(&lc->stream);
        return rv;
    }
    lc->pol = lc->policy;
    lc->hedging = sg__op_options_hedge_after(lc->popts) > 0;
    lc->state = SG__LC_NEW;
    return 0;
}

void sg__lc_drop_intent(sg__lifecycle *lc) {
    if (lc->state == SG__LC_INTENT) {
        /* freed with its intent pending: the observer is told (no clock
         * is read here; the instant is the budget's end, which nobody
         * reads of an operation being freed), and records the end itself
         * if the intent lands */
        lc->tp->unwatch(lc, lc->intent_fd);
        lc->intent_fd = -1;
        (void)sg_op_cancel(lc->pol, sg_budget_deadline(sg_op_budget(lc->pol)));
        lc->state = SG__LC_DONE;
    }
}

void sg__lc_release(sg__lifecycle *lc) {
    sg__lc_drop_intent(lc);
    sg__stream_release(&lc->stream);
    sg_op_headers_free(lc->obs_headers);
    lc->obs_headers = NULL;
    free(lc->ebody);
    lc->ebody = NULL;
    lc->ebody_len = 0;
    free(lc->more);
    lc->more = NULL;
    free(lc->slots); /* (the transport freed the slots in it) */
    lc->slots = NULL;
    sg_op_free(lc->policy); /* NULL in a hedge slot */
    lc->policy = NULL;
    lc->pol = NULL;
    sg__op_options_drop(lc->popts);
    lc->popts = NULL;
}

/* ------------------------------------------------------------ the end */

/* The operation ended: the transport leaves its driver, then on_done.
 * After this returns the lifecycle may have been freed. */
static bool in_flight(const sg__lifecycle *lc);
static int stop_now(sg__lifecycle *lc, int64_t now);

static int finish(sg__lifecycle *lc) {
    if (lc->primary != NULL) {
        /* a hedge slot ended the operation: its primary says so - and if
         * the primary's own attempt is still in flight (the winner ended
         * before that loser's cancel ran), it is stopped and recorded
         * first */
        sg__lifecycle *p = lc->primary;
        lc->state = SG__LC_IDLE;
        if (in_flight(p)) {
            p->lost = true;
            (void)stop_now(p, p->tp->now(p));
        } else if (p->state == SG__LC_ENDING) {
            (void)sg__lc_settle(p, p->tp->now(p)); /* decided, not yet settled */
        }
        return finish(p);
    }
    lc->state = SG__LC_DONE;
    int orc = sg_op_observer_error(lc->pol);
    if (orc != 0 && !sg__lc_has_error(lc)) {
        /* never changes the outcome; kept as the message when there is
         * no other */
        sg__lc_error(lc, "observer: %s", sg_strerror(orc));
    }
    lc->tp->finished(lc);
    return 1;
}

/* ------------------------------------------------------------ attempts */

/* The deadline values for @left nanoseconds of lease (whole ms, rounded
 * down, as sg_op_plan.deadline_ms).  false when grpc-timeout cannot say it. */
static void format_deadlines(sg__lifecycle *lc, int64_t left) {
    left = left > 0 ? left : 0;
    snprintf(lc->dl_value, sizeof(lc->dl_value), "%lld", (long long)(left / SG_MS(1)));
    if (sg_grpc_timeout_format(left, lc->grpc_value, sizeof(lc->grpc_value)) <= 0) {
        lc->grpc_value[0] = '\0'; /* none that grpc-timeout can say: not sent */
    }
}

size_t sg__lc_stamp_lib(const sg__lifecycle *lc, sg__lc_header *h) {
    size_t n = 0;
    const char *key = sg_op_idempotency_key(lc->pol);
    if (key != NULL) {
        h[n++] = (sg__lc_header){"Idempotency-Key", key};
    }
    if (lc->deadline_header) {
        h[n++] =
            (sg__lc_header){sg__opt_deadline_header(sg__lc_options(lc)), lc->dl_value};
    }
    if (lc->grpc_timeout && lc->grpc_value[0] != '\0') {
        h[n++] = (sg__lc_header){"grpc-timeout", lc->grpc_value};
    }
    return n;
}

static void stamp_headers(sg__lifecycle *lc, const sg_op_plan *plan, sg__lc_stamp *st) {
    format_deadlines(lc, plan->attempt_timeout_ns);
    st->n = sg__lc_stamp_lib(lc, st->h);
    st->n_lib = st->n;
    /* then the observers' (a trace's traceparent naming this attempt) */
    const sg_op_headers *oh =
        sg__op_headers_for(lc->pol, plan->attempt, &lc->obs_headers);
    for (size_t i = 0; oh != NULL && i < oh->n; i++) {
        st->h[st->n++] = (sg__lc_header){oh->h[i].name, oh->h[i].value};
    }
}

void sg__lc_restamp(sg__lifecycle *lc, int64_t now) {
    format_deadlines(lc, lc->attempt_end - now);
}

/* The stream made again with @cfg (nothing is allocated: its buffers grow
 * as bytes come); 0, or the code of sg_stream_init_mem - then it is made
 * with the operation's framing, which it was made with before. */
static int reframe(sg__lifecycle *lc, const sg_stream_config *cfg) {
    const sg_item_cb on_item = lc->stream.on_item_; /* (the stream holds the consumer) */
    void *const item_ud = lc->stream.user_data_;
    sg__stream_release(&lc->stream);
    int rv = sg__stream_init_mem(&lc->stream, cfg, on_item, item_ud);
    if (rv != 0) {
        cfg = lc->framing_op;
        (void)sg__stream_init_mem(&lc->stream, cfg, on_item, item_ud);
    }
    lc->framing_now = cfg;
    return rv;
}

/* The attempt @plan leased is framed by its endpoint's framing (a
 * provider profile per endpoint): the stream is made again when that is
 * not the last attempt's, and the record names its profile.  0, or the
 * negative code of a framing that cannot be used (the transport's setter
 * checked it: never in practice). */
static int frame(sg__lifecycle *lc, const sg_op_plan *plan) {
    const sg_stream_config *want = NULL;
    if (lc->tp->framing != NULL) {
        want = lc->tp->framing(lc, plan->endpoint);
    }
    if (want == NULL) {
        want = lc->framing_op;
    }
    int rv = want != lc->framing_now ? reframe(lc, want) : 0;
    sg__op_attempt_set_profile(lc->pol, plan->attempt, sg__profile_name(lc->framing_now));
    return rv;
}

/* Launches the attempt @plan leased.  Returns 1 when the operation ended
 * (the launch failed for good). */
static int launch(sg__lifecycle *lc, int64_t now, const sg_op_plan *plan) {
    int framed = frame(lc, plan);
    sg__stream_begin(&lc->stream, &plan->guard_config, sg_op_budget(lc->pol),
                     plan->attempt, now);
    lc->attempt = plan->attempt;
    lc->attempt_end = sg_time_add(now, plan->attempt_timeout_ns);
    lc->http_status = 0;
    lc->sent = false;
    lc->headers_done = false;
    lc->body_is_stream = false;
    lc->error_body = false;
    free(lc->ebody); /* the last attempt's error body: this one has none yet */
    lc->ebody = NULL;
    lc->ebody_len = 0;
    lc->not_processed = false;
    lc->lost = false;
    lc->breaker_probe = sg__op_probe_out(lc->pol, plan->attempt);
    if (lc->primary == NULL && !plan->hedge) {
        lc->won = false; /* a new line of attempts: nothing delivered */
        lc->hedge_off = false;
    }
    lc->feed_error = 0;
    lc->date_s = 0;
    if (lc->more != NULL) {
        lc->more->retry_after_len = 0;
        lc->more->retry_after_ms_len = 0;
        lc->more->errbuf[0] = '\0';
    }
    lc->state = SG__LC_RUNNING;

    sg__lc_stamp st;
    stamp_headers(lc, plan, &st);
    sg_outcome fail = SG_OUTCOME_TRANSPORT_ERROR;
    if (framed != 0) {
        sg__lc_error(lc, "the endpoint's framing: %s", sg_strerror(framed));
    }
    if (framed != 0 || lc->tp->launch(lc, plan, &st, &now, &fail) != 0) {
        /* Nothing was sent: the policy may retry it. */
        lc->not_processed = true;
        sg__lc_decide(lc, now, fail);
        return sg__lc_settle(lc, now);
    }
    return 0;
}

/* Lease and launch the next attempt.  Returns 1 when the operation ended
 * (nothing could be leased, or the launch failed for good). */
static void reschedule(sg__lifecycle *lc);

static int begin(sg__lifecycle *lc, int64_t now) {
    sg_op_plan plan;
    int rc = sg_op_next_attempt(lc->pol, now, &plan);
    if (rc == SG_EINPROGRESS) {
        /* its endpoint is not free yet (endpoint health): a wait leased
         * from the budget, as a backoff */
        lc->state = SG__LC_SLEEPING;
        lc->wake_at = plan.free_at;
        reschedule(lc);
        return 0;
    }
    if (rc != 0) {
        return finish(lc);
    }
    return launch(lc, now, &plan);
}

/* ------------------------------------------------------------ hedging */

/* The transport's own account of the phase, before an attempt is judged. */
static void sync_phase(sg__lifecycle *lc, int64_t now) {
    if (lc->tp->sync != NULL) {
        lc->tp->sync(lc, now);
    }
}

/* A cancel, or a lost hedge: the attempt in flight is dropped and
 * settled cancelled at @now, whatever it drained.  Returns 1 when the
 * operation ended. */
static int stop_now(sg__lifecycle *lc, int64_t now) {
    if (lc->lost) {
        sg__lc_error(lc, "lost a hedge: another attempt delivered first");
    }
    /* the phase it stops in, as a clock's expiry works it out: a request
     * sent whole is waiting for headers, whatever the transport last said */
    sync_phase(lc, now);
    lc->tp->abort(lc);
    lc->state = SG__LC_RUNNING;
    sg__lc_decide(lc, now, SG_OUTCOME_CANCELLED);
    return sg__lc_settle(lc, now);
}

static bool in_flight(const sg__lifecycle *lc) {
    return lc->state == SG__LC_RUNNING || lc->state == SG__LC_DRAINING;
}

static void reschedule(sg__lifecycle *lc) {
    if (lc->tp->reschedule != NULL) {
        lc->tp->reschedule(lc);
    }
}

/* The attempt runners of the operation @root: itself, then its slots. */
static size_t runners(sg__lifecycle *root, sg__lifecycle **out) {
    size_t n = 0;
    out[n++] = root;
    for (size_t i = 0; i < SG_OP_MAX_HEDGES; i++) {
        if (sg__lc_slot(root, i) != NULL) {
            out[n++] = root->slots[i];
        }
    }
    return n;
}

/* When the operation's next hedge is due (SG_TIME_NEVER: none). */
static int64_t hedge_due(const sg__lifecycle *lc) {
    if (lc->primary != NULL || lc->hedge_off || lc->tp->new_slot == NULL ||
        !lc->hedging || lc->state == SG__LC_NEW || lc->state == SG__LC_DONE) {
        return SG_TIME_NEVER;
    }
    return sg_op_hedge_at(lc->pol);
}

/* When a hedge is due, a free slot (made when none is) leases and
 * launches it.  Returns 1 when the operation ended. */
static int maybe_hedge(sg__lifecycle *root, int64_t now) {
    if (hedge_due(root) > now) {
        return 0;
    }
    /* the table, at the first hedge */
    if (root->slots == NULL &&
        (root->slots = calloc(SG_OP_MAX_HEDGES, sizeof(*root->slots))) == NULL) {
        root->hedge_off = true; /* no memory: the original goes on alone */
        return 0;
    }
    sg__lifecycle *slot = NULL;
    for (size_t i = 0; i < SG_OP_MAX_HEDGES && slot == NULL; i++) {
        if (root->slots[i] == NULL &&
            (root->slots[i] = root->tp->new_slot(root)) == NULL) {
            root->hedge_off = true; /* no memory: the original goes on alone */
            return 0;
        }
        if (root->slots[i]->state == SG__LC_IDLE) {
            slot = root->slots[i];
        }
    }
    if (slot == NULL) {
        return 0;
    }
    sg_op_plan plan;
    if (sg_op_hedge(root->pol, now, &plan) != 0) {
        root->hedge_off = true; /* refused (throttled, no budget): say no more */
        return 0;
    }
    int rv = launch(slot, now, &plan);
    if (rv == 0) {
        reschedule(slot);
    }
    return rv;
}

int sg__lc_item_gate_slow(sg__lifecycle *lc) {
    if (lc->breaker_probe) {
        /* its endpoint answered, whatever becomes of this item */
        lc->breaker_probe = false;
        sg__op_first_item(lc->pol, lc->attempt, lc->tp->now(lc));
    }
    if (lc->lost) {
        /* another attempt delivered first (in the same step, before its
         * cancel ran): nothing of this one reaches the consumer */
        return 1;
    }
    sg__lifecycle *root = lc->primary != NULL ? lc->primary : lc;
    if (root->won || !root->hedging) {
        return 0;
    }
    root->won = true; /* the operation's first item: this attempt wins */
    if (sg_op_hedge_won(root->pol, lc->attempt) > 0) {
        sg__lifecycle *all[1 + SG_OP_MAX_HEDGES];
        size_t n = runners(root, all);
        for (size_t i = 0; i < n; i++) {
            if (all[i] != lc && in_flight(all[i])) {
                all[i]->lost = true;
                reschedule(all[i]);
            }
        }
    }
    return 0;
}

void sg__lc_cancel_all(sg__lifecycle *lc) {
    sg__lifecycle *all[1 + SG_OP_MAX_HEDGES];
    size_t n = runners(lc, all);
    for (size_t i = 0; i < n; i++) {
        sg__lc_cancel(all[i]);
        reschedule(all[i]);
    }
}

void sg__lc_settle_losers(sg__lifecycle *lc, int64_t now) {
    for (size_t i = 0; i < SG_OP_MAX_HEDGES; i++) {
        sg__lifecycle *s = sg__lc_slot(lc, i);
        if (s != NULL && in_flight(s)) {
            s->lost = true;
            (void)stop_now(s, now);
        } else if (s != NULL && s->state == SG__LC_ENDING) {
            /* decided, its settle still queued by the transport (HTTP/2
             * settles in order what its callbacks decided): recorded now,
             * and the queued settle finds nothing left to do */
            (void)sg__lc_settle(s, now);
        }
    }
}

/* The policy has its own copy of the options once started: the
 * lifecycle's goes, so an operation holds one (sg__lc_options reads the
 * policy's from now on). */
static void drop_options(sg__lifecycle *lc) {
    sg__op_options_drop(lc->popts);
    lc->popts = NULL;
}

/* Endpoint health keys each endpoint by what the transport sends it: its
 * URL and the credential header of its request (only a keyed hash of it
 * is kept). */
static void identify(sg__lifecycle *lc) {
    const sg_op_options *o = sg__lc_options(lc);
    if (lc->tp->identity == NULL || sg__op_options_health(o) == NULL) {
        return;
    }
    const uint32_t n = sg__op_options_endpoint_count(o);
    for (uint32_t i = 0; i < (n > 0 ? n : 1); i++) {
        const char *url = NULL, *cred = NULL;
        size_t len = 0;
        lc->tp->identity(lc, i, &url, &cred, &len);
        if (url == NULL) {
            continue;
        }
        sg__lc_key *k = lc->tp->key_cache != NULL ? lc->tp->key_cache(lc, i) : NULL;
        if (k != NULL && k->set &&
            sg__op_set_endpoint_key(lc->policy, i, url, k->gen, k->key) == 0) {
            continue;
        }
        (void)sg_op_set_endpoint_identity(lc->policy, i, url, cred, len);
        if (k != NULL) {
            k->set = sg__op_endpoint_key(lc->policy, i, &k->gen, k->key) == 0;
        }
    }
}

int sg__lc_start(sg__lifecycle *lc, int64_t now) {
    int fd = -1;
    bool async = lc->async_intent && lc->tp->watch != NULL;
    int rv = async ? sg_op_start_async(lc->policy, lc->popts, now, &fd)
                   : sg_op_start(lc->policy, lc->popts, now);
    if (rv == SG_EINPROGRESS) {
        identify(lc);
        rv = lc->tp->watch(lc, fd);
        if (rv == 0) {
            /* The loop runs the other operations while the observer
             * records this one's intent. */
            lc->intent_fd = fd;
            lc->state = SG__LC_INTENT;
            drop_options(lc);
            return 0;
        }
        /* Nothing can tell us when it lands: give it up (the observer
         * records the end if it does), as a refusal - nothing is sent. */
        (void)sg_op_cancel(lc->policy, now);
        sg__op_reset(lc->policy); /* not started: a refusal */
    }
    if (rv != 0) {
        sg__lc_error(lc, "operation refused by its observer: %s", sg_strerror(rv));
        return rv;
    }
    identify(lc);
    bool observed = sg__op_options_has_observer(lc->popts);
    drop_options(lc);
    if (observed) {
        /* The intent may have waited for a lock and a disk: that time was
         * spent from the budget (it started at @now), and the first lease
         * must not claim it again. */
        int64_t after = lc->tp->now(lc);
        now = after > now ? after : now;
    }
    return begin(lc, now);
}

int sg__lc_intent_ready(sg__lifecycle *lc, int64_t now) {
    if (lc->state != SG__LC_INTENT) {
        return 0;
    }
    /* Unwatched before the observer answers: after an answer the fd is
     * its own again (closed, or reused for another intent). */
    lc->tp->unwatch(lc, lc->intent_fd);
    /* A cancel asked for first wins over an answer in since. */
    int rv = lc->cancel ? 1 : sg_op_intent_poll(lc->pol, now);
    if (rv == SG_EINPROGRESS && lc->tp->watch(lc, lc->intent_fd) == 0) {
        return 0; /* not yet (woken early): the fd says when */
    }
    if (lc->cancel || rv == SG_EINPROGRESS) {
        /* Cancelled, or cannot be told when it lands: given up. */
        (void)sg_op_cancel(lc->pol, now); /* abandons the intent */
        rv = 1;
    }
    lc->intent_fd = -1;
    lc->state = SG__LC_NEW;
    if (rv == 0) {
        /* The intent waited for a lock, a disk or a database: that time
         * was spent from the budget, and the first lease starts now. */
        int64_t after = lc->tp->now(lc);
        return begin(lc, after > now ? after : now);
    }
    int orc = sg_op_observer_error(lc->pol);
    if (sg_op_outcome(lc->pol) == SG_OUTCOME_CANCELLED) {
        sg__lc_error(lc, "cancelled while the intent was being recorded");
    } else if (orc != 0 && orc != SG_ETIMEDOUT) {
        sg__lc_error(lc, "operation refused by its observer: %s", sg_strerror(orc));
    } else {
        sg__lc_error(lc, "the budget ran out while the intent was being recorded");
    }
    return finish(lc);
}

void sg__lc_decide(sg__lifecycle *lc, int64_t now, sg_outcome how) {
    if (lc->state == SG__LC_DRAINING) {
        /* the terminal already decided it, or the error response's head
         * (whose stream ended there: its result stands) */
        how = lc->error_body ? SG_OUTCOME_HTTP_ERROR : SG_OUTCOME_OK;
        if (lc->error_body) {
            /* how the body's reading ended (a lost connection, libcurl's
             * abort) says nothing: the status does */
            sg__lc_error_clear(lc);
        }
    }
    if (sg__stream_active(&lc->stream)) {
        sg__stream_end(&lc->stream, now, how, &lc->stream.result_);
    }
    if ((lc->stream.result_.outcome == SG_OUTCOME_PROTOCOL_ERROR ||
         lc->stream.result_.outcome == SG_OUTCOME_TRANSPORT_ERROR) &&
        lc->feed_error != 0) {
        /* say what stopped the body, not how the transport noticed */
        const char *why = sg__stream_error_text(&lc->stream);
        sg__lc_error(lc, "%s", why != NULL ? why : sg_strerror(lc->feed_error));
    }
    lc->state = SG__LC_ENDING;
}

/* What a Retry-After HTTP-date is measured from: the response's own Date
 * when it has a valid one (the server's clock, so a skewed local clock
 * neither hammers the server nor gives up early), else the local wall
 * clock. */
static int64_t wall_origin(const sg__lifecycle *lc) {
    return lc->date_s > 0 ? lc->date_s : (int64_t)time(NULL);
}

/* What the final response's fields say of when to come back: its
 * Retry-After, retry-after-ms and rate-limit headers. */
static void answer_fields(const sg__lifecycle *lc, sg_op_result *r) {
    if (!lc->headers_done) {
        return;
    }
    const sg__lc_more *m = lc->more;
    if (m == NULL) {
        return; /* none of them came */
    }
    if (m->retry_after_len > 0) {
        r->retry_after = m->retry_after;
        r->retry_after_len = m->retry_after_len;
        r->wall_now_s = wall_origin(lc);
    }
    if (m->retry_after_ms_len > 0) {
        r->retry_after_ms_field = m->retry_after_ms;
        r->retry_after_ms_field_len = m->retry_after_ms_len;
    }
    if (m->ratelimit.known != 0) {
        r->ratelimit = &m->ratelimit; /* an instant in it is against the Date too */
        r->wall_now_s = wall_origin(lc);
    }
}

int sg__lc_settle(sg__lifecycle *lc, int64_t now) {
    if (lc->state != SG__LC_ENDING) {
        return lc->state == SG__LC_DONE;
    }
    const sg_guard_result *gr = &lc->stream.result_;
    sg_op_result r;
    sg_op_verdict v;
    sg_op_usage usage;
    sg_op_result_from_guard(&r, gr);
    sg__lc_usage(lc, &r, &usage);
    r.sent = lc->sent;
    r.headers_received = lc->headers_done;
    r.http_status = lc->headers_done && lc->http_status > 0 ? lc->http_status : 0;
    if (lc->not_processed) {
        /* Never processed by the server: not sent, whatever the phase our
         * side reached, so the policy may retry it. */
        r.sent = false;
        if (r.phase > SG_PHASE_SEND) {
            r.phase = SG_PHASE_SEND;
        }
    }
    const char *ptype = NULL, *pmsg = NULL;
    if (gr->outcome == SG_OUTCOME_PROVIDER_ERROR &&
        sg__stream_provider_error(&lc->stream, &ptype, &pmsg, &r.provider_retryable)) {
        /* the server's own words; the transport saw nothing wrong */
        r.provider_type = ptype;
        sg__lc_error(lc, "%s", pmsg);
    }
    sg_item_error body_err;
    if (gr->outcome == SG_OUTCOME_HTTP_ERROR && lc->ebody_len > 0 &&
        sg__stream_classify_error_body(&lc->stream, lc->ebody, lc->ebody_len,
                                       &body_err)) {
        /* the profile reads the error's body: a refusal it calls final
         * (a spend limit) is not retried whatever the status */
        r.provider_final = body_err.final;
    }
    if (gr->outcome != SG_OUTCOME_OK && sg__lc_has_error(lc)) {
        r.error = lc->more->errbuf; /* the transport's own words, beside the outcome */
    }
    answer_fields(lc, &r);
    if (lc->lost) {
        /* a loser delivers nothing: it had no item when the winner was
         * named, and the gate dropped every one after (the guard counted
         * them) */
        r.items = 0;
        r.partial = false;
        r.first_item_ns = -1;
    }
    r.attempt = lc->attempt;
    if (sg_op_attempt_done(lc->pol, now, &r, &v) != 0) {
        /* Cannot happen with the checks above; still, the policy must
         * record an end, so hand it a result it always accepts. */
        r.http_status = 0;
        r.retry_after = NULL;
        r.retry_after_ms_field = NULL;
        r.outcome = SG_OUTCOME_PROTOCOL_ERROR;
        r.attempt = lc->attempt;
        if (sg_op_attempt_done(lc->pol, now, &r, &v) != 0) {
            return finish(lc);
        }
    }
    /* The message names the outcome as recorded (after the policy said who
     * set the limit), never the guard's raw verdict. */
    if (v.outcome == SG_OUTCOME_OK) {
        sg__lc_error_clear(lc);
    } else if (v.outcome != SG_OUTCOME_HTTP_ERROR && !sg__lc_has_error(lc)) {
        sg__lc_error(lc, "%s", sg_outcome_name(v.outcome));
    }
    if (v.partial) {
        lc->tp->discard(lc, lc->attempt, v.outcome);
    }
    const sg_op_attempt *rec = sg_op_attempt_at(lc->pol, lc->attempt - 1);
    if (rec != NULL) {
        lc->tp->attempt_ended(lc, rec);
    }
    if (v.reason == SG_OP_REASON_HEDGE_LOST || v.reason == SG_OP_REASON_HEDGE_RUNNING) {
        /* this line stops; the operation goes on with the attempts beside
         * it (or, a late loser, has already ended) */
        lc->state =
            lc->primary == NULL && sg_op_finished(lc->pol) ? SG__LC_DONE : SG__LC_IDLE;
        return 0;
    }
    if (v.decision == SG_OP_RETRY && lc->primary != NULL) {
        /* a hedge slot runs no retry: the primary sleeps and runs it */
        sg__lifecycle *p = lc->primary;
        if (lc->cancel || p->cancel) {
            /* cancelled while this attempt ended (on_attempt): the flag
             * is this slot's, the primary idle - no retry, and nothing
             * left for the slot's next hedge */
            lc->cancel = false;
            sg_op_cancel(lc->pol, now);
            return finish(lc);
        }
        lc->state = SG__LC_IDLE;
        p->state = SG__LC_SLEEPING;
        p->wake_at = v.retry_at;
        if (p->tp->reschedule != NULL) {
            p->tp->reschedule(p);
        }
        return 0;
    }
    if (v.decision == SG_OP_RETRY) {
        lc->state = SG__LC_SLEEPING;
        lc->wake_at = v.retry_at;
        if (lc->cancel) {
            /* cancelled while this attempt ended: no further attempt */
            sg_op_cancel(lc->pol, now);
            return finish(lc);
        }
        return 0;
    }
    return finish(lc);
}

/* ------------------------------------------------------------ the loop */

static int64_t own_deadline(const sg__lifecycle *lc);

int64_t sg__lc_next_deadline(const sg__lifecycle *lc) {
    return sg_time_min(own_deadline(lc), hedge_due(lc));
}

static int64_t own_deadline(const sg__lifecycle *lc) {
    switch (lc->state) {
    case SG__LC_RUNNING:
        return lc->cancel || lc->lost ? INT64_MIN : sg__stream_next_deadline(&lc->stream);
    case SG__LC_DRAINING:
        return lc->cancel || lc->lost ? INT64_MIN : lc->drain_until;
    case SG__LC_SLEEPING:
        return lc->cancel ? INT64_MIN : lc->wake_at;
    case SG__LC_INTENT:
        return lc->cancel ? INT64_MIN : sg_op_intent_deadline(lc->pol);
    default:
        return SG_TIME_NEVER;
    }
}

void sg__lc_cancel(sg__lifecycle *lc) {
    /* ENDING too: a cancel from on_attempt stops the retry it announces */
    if (lc->state == SG__LC_RUNNING || lc->state == SG__LC_ENDING ||
        lc->state == SG__LC_SLEEPING || lc->state == SG__LC_INTENT ||
        sg__lc_error_draining(lc)) {
        /* (an error response's body: its attempt is decided, but the
         * retry it may earn is still to come) */
        lc->cancel = true;
    }
}

static int own_tick(sg__lifecycle *lc, int64_t now);

int sg__lc_tick(sg__lifecycle *lc, int64_t now) {
    int rv = own_tick(lc, now);
    return rv != 0 ? rv : maybe_hedge(lc, now);
}

static int own_tick(sg__lifecycle *lc, int64_t now) {
    switch (lc->state) {
    case SG__LC_RUNNING:
    case SG__LC_DRAINING:
        if (lc->cancel || lc->lost) {
            return stop_now(lc, now);
        }
        if (lc->state == SG__LC_DRAINING) {
            if (now < lc->drain_until) {
                return 0;
            }
            lc->tp->abort(lc);
            sg__lc_decide(lc, now, SG_OUTCOME_OK);
            return sg__lc_settle(lc, now);
        }
        if (now < sg_guard_next_deadline(sg__lc_guard(lc))) {
            return 0;
        }
        sync_phase(lc, now);
        if (sg_guard_check(sg__lc_guard(lc), now, NULL) != 1) {
            return 0;
        }
        /* A clock expired: the request goes now, not at the transport's
         * pace; the latched expiry is the outcome. */
        lc->tp->abort(lc);
        sg__lc_decide(lc, now, SG_OUTCOME_TRANSPORT_ERROR);
        return sg__lc_settle(lc, now);
    case SG__LC_SLEEPING:
        if (lc->cancel) {
            sg_op_cancel(lc->pol, now);
            return finish(lc);
        }
        if (now < lc->wake_at) {
            return 0;
        }
        return begin(lc, now);
    case SG__LC_INTENT:
        /* cancelled, or its deadline: its last chance, then the end */
        return lc->cancel || now >= sg_op_intent_deadline(lc->pol)
                   ? sg__lc_intent_ready(lc, now)
                   : 0;
    default:
        return 0;
    }
}
