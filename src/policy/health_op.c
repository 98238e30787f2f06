/*
 * What one operation holds of the endpoint health it shares (health.h):
 * each endpoint's key, the consult before every attempt (go, go to the
 * next free endpoint, wait in the budget, or end with nothing sent), the
 * feed at every end, and the events the report names
 * (docs/design.md, "Endpoint health"; retry rule 6).
 */
#include "health_internal.h"
#include "health_table.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One endpoint of the operation, as its health knows it. */
typedef struct sg__op_hep {
    sg__hentry *e; /* its entry once bound; NULL before, or not tracked */
    bool bound;    /* the table was asked */
    bool named;    /* it has a name: tracked */
    bool keyed;    /* key holds its key (else computed at the first bind) */
    bool waited;   /* the operation waited for it: first when it frees */
    uint8_t key[SG__HEALTH_KEY];
    /* its name, exactly as long as it is, until it is bound: its entry
     * holds the same name then (hep_name), and an operation per
     * open stream need not (NULL: not named, or bound to an entry) */
    char *name;
} sg__op_hep;

/* The name of endpoint @p: its entry's once bound, else its own ("" for
 * none). */
static const char *hep_name(const sg__op_hep *p) {
    return p->e != NULL ? p->e->name : p->name != NULL ? p->name : "";
}

typedef struct sg__op_health {
    /* (packed: one per open stream) */
    sg_health *h;               /* held */
    int64_t free_at;            /* ended by health: when its endpoint frees; else -1 */
    uint64_t pend_seq;          /* the consult's number in the request window count */
    sg_op_health_event *events; /* SG_OP_MAX_HEALTH_EVENTS, at the first */
    uint32_t n;                 /* endpoints */
    int32_t pend_ep;            /* the slot taken by the consult, until the plan; -1 */
    uint32_t dropped;
    uint16_t n_events; /* at most SG_OP_MAX_HEALTH_EVENTS */
    bool pend_probe;   /* the consult took the probe */
    sg__op_hep ep[];   /* n */
} sg__op_health;

/* ------------------------------------------------------------- options */

int sg_op_options_set_health(sg_op_options *o, sg_health *h) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->health_ = h;
    return 0;
}

sg_health *sg__op_options_health(const sg_op_options *o) {
    return o != NULL ? o->health_ : NULL;
}

int sg__credential_rank(const char *name, size_t len) {
    static const char *const names[] = {"authorization", "x-api-key", "api-key",
                                        "x-goog-api-key"};
    for (int i = 0; i < 4; i++) {
        if (strlen(names[i]) == len && strncasecmp(names[i], name, len) == 0) {
            return i;
        }
    }
    return -1;
}

int sg_op_options_set_token_estimate(sg_op_options *o, uint64_t input_tokens,
                                     uint64_t output_tokens) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->tokens_in_ = input_tokens;
    o->tokens_out_ = output_tokens;
    return 0;
}

/* ---------------------------------------------------------- identities */

_Static_assert(SG__HEALTH_KEY == 16, "sg__op_endpoint_key's key is 16 bytes");
_Static_assert(SG_OP_MAX_HEALTH_EVENTS <= UINT16_MAX, "n_events holds the most");

/* Names endpoint @i by @url.  The name is kept exactly as long as it is
 * (an operation holds one per endpoint); without memory for it the
 * endpoint is not tracked.  Not keyed yet. */
static bool name_it(sg__op_hep *p, const char *url) {
    char name[SG_HEALTH_ENDPOINT_MAX + 1];
    size_t len = sg__endpoint_name(url, name, sizeof(name));
    len = len < sizeof(name) ? len : sizeof(name) - 1;
    free(p->name);
    p->named = false;
    p->keyed = false;
    if ((p->name = malloc(len + 1)) == NULL) {
        return false;
    }
    memcpy(p->name, name, len);
    p->name[len] = '\0';
    p->named = true;
    return true;
}

/* Names endpoint @i by @url and keys it with @cred (which is not kept). */
static void identify(sg__op_health *oh, uint32_t i, const char *url, const void *cred,
                     size_t cred_len) {
    sg__op_hep *p = &oh->ep[i];
    if (name_it(p, url)) {
        sg__health_key(oh->h, p->name, cred, cred_len, p->key);
        p->keyed = true;
    }
}

int sg__health_op_start(sg_op *op) {
    sg_health *h = sg__op_opts(op)->health_;
    if (h == NULL) {
        return 0;
    }
    const sg_op_options *o = sg__op_opts(op);
    const uint32_t n = sg__op_n_endpoints(op);
    sg__op_health *oh = calloc(1, sizeof(*oh) + n * sizeof(oh->ep[0]));
    if (oh == NULL) {
        return SG_ENOMEM;
    }
    sg__health_hold(h);
    oh->h = h;
    oh->n = n;
    oh->free_at = -1;
    oh->pend_ep = -1;
    for (uint32_t i = 0; i < n; i++) {
        const char *url = o->n_endpoints_ > 0 ? o->endpoints_[i] : o->target_;
        if (url != NULL) {
            (void)name_it(&oh->ep[i], url); /* keyed when first asked */
        }
    }
    op->health_ = oh;
    return 0;
}

/* The credential an AWS SigV4 Authorization stands for: its access key id
 * (the header itself changes with every request). */
static void sigv4_key_id(const char **cred, size_t *len) {
    static const char scheme[] = "AWS4-HMAC-SHA256 ";
    static const char tag[] = "Credential=";
    const size_t sl = sizeof(scheme) - 1, tl = sizeof(tag) - 1;
    if (*len < sl || memcmp(*cred, scheme, sl) != 0) {
        return;
    }
    for (size_t i = sl; i + tl <= *len; i++) {
        if (memcmp(*cred + i, tag, tl) == 0) {
            const char *id = *cred + i + tl;
            size_t n = 0;
            while (i + tl + n < *len && id[n] != '/' && id[n] != ',') {
                n++;
            }
            *cred = id;
            *len = n;
            return;
        }
    }
}

int sg_op_set_endpoint_identity(sg_op *op, uint32_t endpoint, const char *url,
                                const char *credential, size_t credential_len) {
    if (!sg__op_started(op) || url == NULL) {
        return SG_EINVAL;
    }
    const uint32_t n = sg__op_n_endpoints(op);
    if (endpoint >= n) {
        return SG_EINVAL;
    }
    sg__op_health *oh = op->health_;
    if (oh == NULL) {
        return 0;
    }
    if (op->count_ > 0) {
        return SG_ESTATE;
    }
    sg__op_hep *p = &oh->ep[endpoint];
    if (p->e != NULL) {
        sg__health_unbind(oh->h, p->e);
    }
    p->e = NULL;
    p->bound = false;
    sigv4_key_id(&credential, &credential_len);
    identify(oh, endpoint, url, credential, credential != NULL ? credential_len : 0);
    return 0;
}

int sg__op_endpoint_key(const sg_op *op, uint32_t i, uint64_t *gen, uint8_t key[16]) {
    const sg__op_health *oh = op != NULL ? op->health_ : NULL;
    if (oh == NULL || i >= oh->n || !oh->ep[i].keyed) {
        return SG_ESTATE;
    }
    *gen = atomic_load(&oh->h->key_gen);
    memcpy(key, oh->ep[i].key, SG__HEALTH_KEY);
    return 0;
}

int sg__op_set_endpoint_key(sg_op *op, uint32_t i, const char *url, uint64_t gen,
                            const uint8_t key[16]) {
    if (!sg__op_started(op) || url == NULL) {
        return SG_EINVAL;
    }
    sg__op_health *oh = op->health_;
    if (oh == NULL || i >= oh->n || gen != atomic_load(&oh->h->key_gen)) {
        return SG_ESTATE; /* (no health: identify it, which does nothing) */
    }
    if (op->count_ > 0) {
        return SG_ESTATE;
    }
    sg__op_hep *p = &oh->ep[i];
    if (p->e != NULL) {
        sg__health_unbind(oh->h, p->e);
    }
    p->e = NULL;
    p->bound = false;
    if (name_it(p, url)) {
        memcpy(p->key, key, SG__HEALTH_KEY);
        p->keyed = true;
    }
    return 0;
}

/* Endpoint @i's entry, bound at its first use (NULL: not tracked). */
static sg__hentry *entry_of(sg__op_health *oh, uint32_t i, int64_t now) {
    sg__op_hep *p = &oh->ep[i];
    if (!p->bound) {
        p->bound = true;
        if (p->named && !p->keyed) {
            sg__health_key(oh->h, p->name, NULL, 0, p->key); /* no credential */
            p->keyed = true;
        }
        p->e = p->named ? sg__health_bind(oh->h, p->key, p->name, now) : NULL;
        if (p->e != NULL) {
            free(p->name); /* the entry's is the same */
            p->name = NULL;
        }
    }
    return p->e;
}

sg__hentry *sg__health_entry(sg_op *op, uint32_t i, int64_t now) {
    return op->health_ != NULL && i < op->health_->n ? entry_of(op->health_, i, now)
                                                     : NULL;
}

void sg__health_op_reset(sg_op *op) {
    sg__op_health *oh = op->health_;
    if (oh == NULL) {
        return;
    }
    /* freed or started anew while attempts ran: their slots go back */
    for (uint32_t i = 0; i < op->count_; i++) {
        sg__rec *rec = sg__rec_w(sg__record_w(op, i));
        if (rec != NULL && (rec->health & SG__HREC_HELD)) {
            sg__hentry_unadmit(oh->ep[rec->pub.endpoint].e,
                               (rec->health & SG__HREC_PROBE) != 0);
        }
    }
    if (oh->pend_ep >= 0) {
        sg__hentry_unadmit(oh->ep[oh->pend_ep].e, oh->pend_probe);
    }
    for (uint32_t i = 0; i < oh->n; i++) {
        if (oh->ep[i].e != NULL) {
            sg__health_unbind(oh->h, oh->ep[i].e);
        }
        free(oh->ep[i].name);
    }
    sg__health_release(oh->h);
    free(oh->events);
    free(oh);
    op->health_ = NULL;
}

/* -------------------------------------------------------------- events */

/* An event: endpoint @ep frees at @free_at; a wait lasts until @wake. */
static void note(sg_op *op, sg_op_health_action action, uint32_t ep, sg_op_reason why,
                 int64_t now, int64_t free_at, int64_t wake, bool hedge) {
    sg__op_health *oh = op->health_;
    sg_op_health_event *last = oh->n_events > 0 ? &oh->events[oh->n_events - 1] : NULL;
    const int64_t wait = action == SG_OP_HEALTH_WAITED ? wake - now : 0;
    if (last != NULL && action == SG_OP_HEALTH_WAITED && last->action == action &&
        last->endpoint == ep && last->reason == why &&
        last->before_attempt == op->count_ + 1) {
        /* waiting on (a busy endpoint looked at again): one wait */
        last->waited_ns = sg_time_add(last->waited_ns, wait);
        last->free_at = free_at;
        return;
    }
    if (oh->ep[ep].e != NULL) {
        sg__hentry_count(oh->ep[ep].e, action, why);
    }
    if (oh->events == NULL) {
        /* most operations never meet a held-back endpoint: room only for
         * those that do (none when it cannot be had: counted, not kept) */
        oh->events = malloc(SG_OP_MAX_HEALTH_EVENTS * sizeof(*oh->events));
    }
    if (oh->events == NULL || oh->n_events == SG_OP_MAX_HEALTH_EVENTS) {
        oh->dropped++;
        return;
    }
    oh->events[oh->n_events++] = (sg_op_health_event){
        .before_attempt = op->count_ + 1,
        .endpoint = ep,
        .action = action,
        .reason = why,
        .hedge = hedge,
        .at = now,
        .free_at = free_at,
        .waited_ns = wait,
    };
}

/* ------------------------------------------------------------- consult */

/* Whether endpoint @i is free for an attempt at @now; when it is, its
 * slot is held (pending the plan), else *@why and *@free_at say why not
 * and until when. */
static bool admit(sg_op *op, uint32_t i, int64_t now, sg_op_reason *why,
                  int64_t *free_at) {
    sg__op_health *oh = op->health_;
    sg__hentry *e = entry_of(oh, i, now);
    if (e == NULL) {
        return true; /* not tracked: asked as if free */
    }
    const uint64_t in = sg__op_opts(op)->tokens_in_, out = sg__op_opts(op)->tokens_out_;
    const uint64_t need[3] = {in > UINT64_MAX - out ? UINT64_MAX : in + out, in, out};
    bool probe = false;
    uint64_t seq = 0;
    *why = sg__hentry_admit(oh->h, e, now, need, free_at, &probe, &seq);
    if (*why != SG_OP_REASON_NONE) {
        return false;
    }
    oh->pend_ep = (int32_t)i;
    oh->pend_probe = probe;
    oh->pend_seq = seq;
    return true;
}

/* Whether a wait until @at leaves, after it, at least the minimum attempt
 * above the floor (the sleep-fit rule of a backoff). */
static bool wait_fits(const sg_op *op, int64_t now, int64_t at) {
    const int64_t avail =
        sg_budget_remaining(&op->budget_, now) - sg_budget_floor(&op->budget_);
    const int64_t after = avail - (at - now);
    return after > 0 && after >= sg__op_min_attempt(op);
}

int sg__health_plan(sg_op *op, int64_t now, sg_op_plan *plan, uint32_t *ep) {
    sg__op_health *oh = op->health_;
    const uint32_t first = sg__ttft_rank(op, now); /* with the first-token order */
    *ep = first;
    if (oh == NULL) {
        return 0;
    }
    uint32_t blocked[SG_OP_MAX_ENDPOINTS];
    sg_op_reason whys[SG_OP_MAX_ENDPOINTS];
    int64_t ats[SG_OP_MAX_ENDPOINTS];
    uint32_t nb = 0, best = 0;
    for (uint32_t k = 0; k < oh->n; k++) {
        const uint32_t e = sg__ep_after(op, first, k);
        if (k > 0 && op->ep_back_[e] > now) {
            continue; /* a fallback still backing off from its own failure */
        }
        if (admit(op, e, now, &whys[nb], &ats[nb])) {
            for (uint32_t j = 0; j < nb; j++) {
                note(op, SG_OP_HEALTH_SKIPPED, blocked[j], whys[j], now, ats[j], ats[j],
                     false);
            }
            sg__ttft_chosen(op, e, now);
            *ep = e;
            return 0;
        }
        blocked[nb] = e;
        best = ats[nb] < ats[best] ? nb : best;
        nb++;
    }
    /* nothing free: wait for the first to free when that fits the budget -
     * and for a rate limit, those already waiting for it go first when it
     * frees: an operation that comes while it cools wakes a recheck after
     * them, so that its next window's requests are not drawn by lot
     * between them and the newcomers (docs/design.md, "Endpoint health") */
    const bool newcomer =
        whys[best] == SG_OP_REASON_RATE_LIMITED && !oh->ep[blocked[best]].waited;
    const int64_t wake =
        newcomer ? sg_time_add(ats[best], SG_HEALTH_RECHECK_NS) : ats[best];
    plan->free_at = ats[best];
    plan->reason = whys[best];
    if (wait_fits(op, now, wake)) {
        plan->free_at = wake;
        note(op, SG_OP_HEALTH_WAITED, blocked[best], whys[best], now, ats[best], wake,
             false);
        oh->ep[blocked[best]].waited = true;
        op->state_ = SG__OP_BACKOFF;
        op->retry_at_ = wake;
        op->ep_next_ = blocked[best];
        return SG_EINPROGRESS;
    }
    note(op, SG_OP_HEALTH_REFUSED, blocked[best], whys[best], now, ats[best], ats[best],
         false);
    oh->free_at = ats[best];
    plan->outcome = SG_OUTCOME_REFUSED;
    sg__op_end_refused(op, now, plan);
    return SG_EREFUSED;
}

bool sg__health_hedge_try(sg_op *op, uint32_t e, int64_t now, sg_op_reason *why) {
    if (op->health_ == NULL) {
        return true;
    }
    int64_t at = 0;
    if (admit(op, e, now, why, &at)) {
        return true;
    }
    note(op, SG_OP_HEALTH_SKIPPED, e, *why, now, at, at, true);
    return false;
}

void sg__health_planned(sg_op *op, int rc, const sg_op_plan *plan) {
    sg__op_health *oh = op->health_;
    if (oh == NULL || oh->pend_ep < 0) {
        return;
    }
    if (rc == 0) {
        sg__rec *rec = sg__rec_w(sg__record_w(op, plan->attempt - 1));
        rec->health = (uint8_t)(SG__HREC_HELD | (oh->pend_probe ? SG__HREC_PROBE : 0));
        rec->hseq = oh->pend_seq;
    } else {
        sg__hentry_unadmit(oh->ep[oh->pend_ep].e, oh->pend_probe);
    }
    oh->pend_ep = -1;
    oh->pend_probe = false;
}

/* ---------------------------------------------------------------- feed */

/* An in-band error type that is a rate limit (not an overload). */
static bool rate_limit_type(const char *t) {
    return t != NULL &&
           (strstr(t, "rate_limit") != NULL || strcmp(t, "RESOURCE_EXHAUSTED") == 0);
}

/* What the end of @e says of its endpoint's health (docs/design.md,
 * "Endpoint health": what counts toward the breaker). */
static sg__hkind kind_of(const sg__end *e) {
    const sg_op_result *r = e->r;
    if (e->lost) {
        return SG__H_NEUTRAL;
    }
    switch (e->outcome) {
    case SG_OUTCOME_OK:
        return SG__H_OK;
    case SG_OUTCOME_CONNECT_TIMEOUT:
    case SG_OUTCOME_FIRST_ITEM_TIMEOUT:
    case SG_OUTCOME_IDLE_TIMEOUT: /* a stall after the headers */
        return SG__H_UNHEALTHY;
    case SG_OUTCOME_ATTEMPT_TIMEOUT:
    case SG_OUTCOME_STREAM_TIMEOUT:
        /* nothing at all within the caller's ceiling: as a first-item
         * timeout; after items, the caller's length limit */
        return r->items == 0 ? SG__H_UNHEALTHY : SG__H_NEUTRAL;
    case SG_OUTCOME_TRANSPORT_ERROR:
        /* no connection, or lost before any answer */
        return r->headers_received ? SG__H_NEUTRAL : SG__H_UNHEALTHY;
    case SG_OUTCOME_HTTP_ERROR:
        return r->http_status == 0 || r->http_status >= 500 ? SG__H_UNHEALTHY
                                                            : SG__H_NEUTRAL;
    case SG_OUTCOME_PROVIDER_ERROR:
        /* an overload in the provider's own words; a rate limit is a
         * cooldown, not a failure */
        return r->provider_retryable && !rate_limit_type(r->provider_type)
                   ? SG__H_UNHEALTHY
                   : SG__H_NEUTRAL;
    default:
        /* cancelled, cap_exceeded, budget_exhausted, refused, truncated,
         * protocol_error: the caller's or the stream's, not the
         * endpoint's health */
        return SG__H_NEUTRAL;
    }
}

/* The instant family @f of @rl resets, -1 when unknown: counted from when
 * the headers were read (the attempt's end @now when not said: a reset
 * the head of a long stream named would otherwise end a stream late). */
static int64_t reset_at(const sg_op_ratelimit *rl, int f, const sg_op_result *r,
                        int64_t now) {
    if (rl->at > 0 && rl->at <= now) {
        now = rl->at;
    }
    if (rl->known & SG_RATELIMIT_RESET(f)) {
        return sg_time_add(now, rl->reset_ns[f]);
    }
    if ((rl->known & SG_RATELIMIT_RESET_AT(f)) && r->wall_now_s > 0) {
        /* an absolute reset, against the server's Date when it sent one */
        const int64_t ms = rl->reset_at_ms[f] - r->wall_now_s * 1000;
        const int64_t max_ms = SG_DURATION_MAX / SG_MS(1);
        return sg_time_add(now, ms <= 0 ? 0 : SG_MS(ms < max_ms ? ms : max_ms));
    }
    return -1;
}

/* A provider's own words on when to come back, into @ent of @h. */
static void learn(sg_health *h, sg__hentry *ent, const sg__end *e) {
    const sg_op_result *r = e->r;
    if (!r->headers_received || r->provider_final) {
        return; /* no answer; or a refusal waiting does not fix (a spend limit) */
    }
    const int st = r->http_status;
    if (e->ra_valid && (st == 429 || st == 503 || st == 529 ||
                        (e->outcome == SG_OUTCOME_PROVIDER_ERROR &&
                         rate_limit_type(r->provider_type)))) {
        sg__hentry_cool(h, ent, e->now, sg_time_add(e->now, e->ra_ns));
    }
    const sg_op_ratelimit *rl = r->ratelimit;
    if (rl != NULL) {
        /* the request window: what remains, counted from this attempt's
         * own number (the ones sent after it are not in the count yet) */
        const int f = SG_RATELIMIT_REQUESTS;
        const sg__rec *rec = sg__rec_c(e->a);
        sg__hentry_requests(ent, e->now, (rec->health & SG__HREC_HELD) ? rec->hseq : 0,
                            (rl->known & SG_RATELIMIT_REMAINING(f)) ? rl->remaining[f]
                                                                    : -1,
                            reset_at(rl, f, r, e->now),
                            (rl->known & SG_RATELIMIT_LIMIT(f)) ? rl->limit[f] : -1);
    }
    for (int f = 0; rl != NULL && f < SG_RATELIMIT_COUNT_; f++) {
        if (!(rl->known & SG_RATELIMIT_REMAINING(f))) {
            continue;
        }
        const int64_t at = reset_at(rl, f, r, e->now);
        if (rl->remaining[f] == 0 && at > e->now) {
            sg__hentry_cool(h, ent, e->now, at); /* nothing remains until the reset */
        }
        if (f != SG_RATELIMIT_REQUESTS) {
            sg__hentry_tokens(ent, f - SG_RATELIMIT_TOKENS, rl->remaining[f],
                              at > e->now ? at : INT64_MIN);
        }
    }
}

void sg__health_feed(sg_op *op, const sg__end *e) {
    sg__op_health *oh = op->health_;
    if (oh == NULL) {
        return;
    }
    sg__rec *rec = sg__rec_w(e->a);
    sg__hentry *ent = oh->ep[e->a->endpoint].e;
    if (ent == NULL) {
        return;
    }
    learn(oh->h, ent, e);
    sg__ttft_feed(oh->h, ent, e);
    if (rec->health & SG__HREC_HELD) {
        sg__hentry_end(oh->h, ent, e->now, kind_of(e),
                       (rec->health & SG__HREC_PROBE) != 0);
        rec->health = 0;
    }
}

/* Whether record @attempt of @op runs and holds its endpoint's probe. */
bool sg__op_probe_out(const sg_op *op, uint32_t attempt) {
    if (op == NULL || op->health_ == NULL || attempt == 0 || attempt > op->count_) {
        return false;
    }
    const sg__rec *rec = sg__rec_c(sg__record(op, attempt - 1));
    return rec != NULL && rec->pub.running && (rec->health & SG__HREC_PROBE);
}

void sg__op_first_item(sg_op *op, uint32_t attempt, int64_t now) {
    if (!sg__op_probe_out(op, attempt)) {
        return;
    }
    sg__rec *rec = sg__rec_w(sg__record_w(op, attempt - 1));
    sg__hentry_probe_answered(op->health_->h, op->health_->ep[rec->pub.endpoint].e, now);
    rec->health &= (uint8_t)~SG__HREC_PROBE; /* its end: as any attempt's */
}

/* ------------------------------------------------------------- readers */

uint32_t sg_op_health_event_count(const sg_op *op) {
    return sg__op_started(op) && op->health_ != NULL ? op->health_->n_events : 0;
}

uint32_t sg_op_health_events_dropped(const sg_op *op) {
    return sg__op_started(op) && op->health_ != NULL ? op->health_->dropped : 0;
}

const sg_op_health_event *sg_op_health_event_at(const sg_op *op, uint32_t i) {
    return i < sg_op_health_event_count(op) ? &op->health_->events[i] : NULL;
}

int64_t sg_op_endpoint_free_at(const sg_op *op) {
    return sg__op_started(op) && op->health_ != NULL ? op->health_->free_at : -1;
}

/* -------------------------------------------------------------- report */

static const char *action_name(sg_op_health_action a) {
    return a == SG_OP_HEALTH_SKIPPED  ? "skipped"
           : a == SG_OP_HEALTH_WAITED ? "waited"
                                      : "refused";
}

/* ,"key": whole ms of @ns (null when @ns < 0) */
static void put_ms(sg__sink *s, const char *key, int64_t ns) {
    sg__sink_puts(s, key);
    if (ns < 0) {
        sg__sink_puts(s, "null");
    } else {
        sg__sink_i64(s, ns / SG_MS(1));
    }
}

static void put_event(sg__sink *s, const sg_op *op, const sg_op_health_event *ev) {
    const char *name = hep_name(&op->health_->ep[ev->endpoint]);
    sg__sink_puts(s, "{\"endpoint\":");
    sg__sink_json_string(s, name, strlen(name));
    sg__sink_puts(s, ",\"action\":\"");
    sg__sink_puts(s, action_name(ev->action));
    sg__sink_puts(s, "\",\"reason\":\"");
    sg__sink_puts(s, sg_op_reason_name(ev->reason));
    sg__sink_puts(s, "\",\"before_attempt\":");
    sg__sink_u64(s, ev->before_attempt);
    sg__sink_puts(s, ev->hedge ? ",\"hedge\":true" : ",\"hedge\":false");
    put_ms(s, ",\"at_ms\":", sg_time_since(ev->at, sg_budget_started_at(&op->budget_)));
    put_ms(s, ",\"free_in_ms\":", sg_time_since(ev->free_at, ev->at));
    put_ms(s, ",\"waited_ms\":", ev->action == SG_OP_HEALTH_WAITED ? ev->waited_ns : -1);
    sg__sink_puts(s, "}");
}

void sg__health_report(sg__sink *s, const sg_op *op) {
    const sg__op_health *oh = op->health_;
    if (oh == NULL) {
        return;
    }
    sg__sink_puts(s, ",\"endpoint_health\":[");
    for (uint32_t i = 0; i < oh->n_events; i++) {
        if (i > 0) {
            sg__sink_puts(s, ",");
        }
        put_event(s, op, &oh->events[i]);
    }
    sg__sink_puts(s, "],\"endpoint_health_dropped\":");
    sg__sink_u64(s, oh->dropped);
    put_ms(s, ",\"endpoint_free_in_ms\":",
           oh->free_at < 0 ? -1 : sg_time_since(oh->free_at, op->finished_at_));
}
