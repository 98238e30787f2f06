/*
 * Endpoint health: the table an sg_health keeps and each endpoint's state
 * machine (docs/design.md, "Endpoint health").
 *
 *   CLOSED --Retry-After / nothing remains--> COOLING --the instant--> CLOSED
 *   CLOSED --breaker_failures unhealthy ends--> OPEN --cooldown--> HALF_OPEN
 *   HALF_OPEN --one probe ok--> CLOSED;  --probe unhealthy--> OPEN (cooldown x2)
 *
 * Hot paths take no lock: an attempt's admission and its end read and
 * change one entry's C11 atomics (an entry is never freed or reused while
 * an operation holds it).  The mutex guards the table itself - finding or
 * making an entry when an operation first asks an endpoint, letting one go,
 * walking them (sg_health_foreach), applying a fact from elsewhere
 * (sg_health_apply).  What attempts teach - a cooling started, a breaker
 * opened or closed - goes to the listener, if any, on the attempt's
 * thread (sg_health_set_listener: a replaced one is freed once no call of
 * it runs).  Memory: SG_HEALTH_MAX_ENTRIES entries of
 * 9,320 bytes at most (9.1 MiB; 8,840 of them the first-token sketch),
 * grown as endpoints come.
 */
#define _GNU_SOURCE
#include "health_table.h"
#include "sha256.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

/* ------------------------------------------------------------ the object */

int sg_health_new(sg_health **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_health *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return SG_ENOMEM;
    }
    /* the credential's keyed hash: a key no one else has (research A3:
     * a leaked hash confirms no candidate secret without it) */
    h->secret_len = 32;
    size_t got = 0;
    while (got < h->secret_len) {
        ssize_t r = getrandom(h->secret + got, h->secret_len - got, 0);
        if (r < 0 && errno != EINTR) {
            free(h);
            return SG_ESYS;
        }
        got += r > 0 ? (size_t)r : 0;
    }
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h);
        return SG_ENOMEM;
    }
    atomic_init(&h->holds, 1);
    atomic_init(&h->key_gen, sg__health_next_gen());
    atomic_init(&h->breaker_failures, SG_HEALTH_DEFAULT_BREAKER_FAILURES);
    atomic_init(&h->max_inflight, 0);
    atomic_init(&h->cooldown, SG_HEALTH_DEFAULT_BREAKER_COOLDOWN);
    atomic_init(&h->cooldown_max, SG_HEALTH_DEFAULT_BREAKER_COOLDOWN_MAX);
    atomic_init(&h->ttft_window, SG_HEALTH_DEFAULT_FIRST_TOKEN_WINDOW);
    atomic_init(&h->shared_max, SG_HEALTH_DEFAULT_SHARED_MAX);
    atomic_init(&h->listener, NULL);
    atomic_init(&h->telling, 0);
    *out = h;
    return 0;
}

void sg__health_hold(sg_health *h) {
    atomic_fetch_add(&h->holds, 1);
}

void sg__health_release(sg_health *h) {
    if (h == NULL || atomic_fetch_sub(&h->holds, 1) != 1) {
        return;
    }
    for (uint32_t i = 0; i < h->n; i++) {
        free(h->ents[i]);
    }
    free(h->ents);
    free(h->bucket);
    free(atomic_load(&h->listener));
    pthread_mutex_destroy(&h->mu);
    memset(h->secret, 0, sizeof(h->secret));
    free(h);
}

void sg_health_free(sg_health *h) {
    sg__health_release(h);
}

sg_health *sg__health_slot_get(sg__health_slot *s) {
    if (!s->chosen) {
        s->chosen = true;
        s->own = sg_health_new(&s->h) == 0;
    }
    return s->h;
}

void sg__health_slot_set(sg__health_slot *s, sg_health *h) {
    sg__health_slot_free(s);
    s->h = h;
    s->chosen = true;
}

void sg__health_slot_free(sg__health_slot *s) {
    if (s->own) {
        sg_health_free(s->h);
    }
    s->h = NULL;
    s->own = false;
}

int sg_health_set_breaker_failures(sg_health *h, uint32_t n) {
    if (h == NULL) {
        return SG_EINVAL;
    }
    atomic_store(&h->breaker_failures, n);
    return 0;
}

/* A duration option of @h (at @field): checked, then set. */
static int set_duration(sg_health *h, _Atomic int64_t *field, int64_t ns) {
    if (h == NULL || ns <= 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    atomic_store(field, ns);
    return 0;
}

int sg_health_set_breaker_cooldown(sg_health *h, int64_t ns) {
    return set_duration(h, h != NULL ? &h->cooldown : NULL, ns);
}

int sg_health_set_breaker_cooldown_max(sg_health *h, int64_t ns) {
    return set_duration(h, h != NULL ? &h->cooldown_max : NULL, ns);
}

int sg_health_set_max_inflight(sg_health *h, uint32_t n) {
    if (h == NULL) {
        return SG_EINVAL;
    }
    atomic_store(&h->max_inflight, n);
    return 0;
}

const char *sg_health_state_name(sg_health_state s) {
    static const char *const names[] = {"closed", "cooling", "open", "half_open"};
    return (unsigned)s < (unsigned)SG_HEALTH_STATE_COUNT_ ? names[s] : NULL;
}

uint64_t sg__health_next_gen(void) {
    static _Atomic uint64_t next = 1;
    return atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
}

void sg__health_key(const sg_health *h, const char *name, const void *cred,
                    size_t cred_len, uint8_t key[SG__HEALTH_KEY]) {
    static const char domain[] = "sg-endpoint-v1"; /* with its NUL */
    const void *parts[] = {domain, name, "", cred != NULL ? cred : ""};
    const size_t lens[] = {sizeof(domain), strlen(name), 1, cred != NULL ? cred_len : 0};
    uint8_t mac[SG__SHA256_LEN];
    sg__hmac_sha256(h->secret, h->secret_len, parts, lens, 4, mac);
    memcpy(key, mac, SG__HEALTH_KEY);
}

/* ------------------------------------------------------------- the table */

static uint32_t bucket_of(const sg_health *h, const uint8_t *key) {
    uint32_t v;
    memcpy(&v, key, sizeof(v)); /* a keyed hash: uniform already */
    return v & (2 * h->cap - 1);
}

sg__hentry *sg__health_find(const sg_health *h, const uint8_t *key) {
    if (h->cap == 0) {
        return NULL;
    }
    for (uint32_t i = h->bucket[bucket_of(h, key)]; i != NO_ENTRY; i = h->ents[i]->next) {
        if (memcmp(h->ents[i]->key, key, SG__HEALTH_KEY) == 0) {
            return h->ents[i];
        }
    }
    return NULL;
}

static void link_entry(sg_health *h, sg__hentry *e) {
    uint32_t *head = &h->bucket[bucket_of(h, e->key)];
    e->next = *head;
    *head = e->index;
}

static void unlink_entry(sg_health *h, sg__hentry *e) {
    uint32_t *p = &h->bucket[bucket_of(h, e->key)];
    while (*p != e->index) {
        p = &h->ents[*p]->next;
    }
    *p = e->next;
}

/* Room for one more entry: the table grows (to SG_HEALTH_MAX_ENTRIES). */
static bool grow(sg_health *h) {
    if (h->n < h->cap) {
        return true;
    }
    if (h->cap >= SG_HEALTH_MAX_ENTRIES) {
        return false;
    }
    uint32_t cap = h->cap == 0 ? 8 : h->cap * 2;
    sg__hentry **ents = realloc(h->ents, cap * sizeof(*ents));
    if (ents == NULL) {
        return false;
    }
    h->ents = ents;
    uint32_t *bucket = malloc(2 * (size_t)cap * sizeof(*bucket));
    if (bucket == NULL) {
        return false;
    }
    free(h->bucket);
    h->bucket = bucket;
    h->cap = cap;
    for (uint32_t i = 0; i < 2 * cap; i++) {
        bucket[i] = NO_ENTRY;
    }
    for (uint32_t i = 0; i < h->n; i++) {
        link_entry(h, h->ents[i]);
    }
    return true;
}

/* Whether @e is closed and idle at @now: no operation holds it, nothing
 * in flight, its breaker closed (or opened from elsewhere, and that over:
 * no probe of ours will ever close it), not cooling. */
static bool idle(const sg__hentry *e, int64_t now) {
    const int64_t open = atomic_load(&e->open_until);
    return e->refs == 0 && atomic_load(&e->inflight) == 0 &&
           (open == NONE || (atomic_load(&e->open_remote) && open <= now)) &&
           atomic_load(&e->cool_until) <= now;
}

/* The least recently used idle entry, unlinked for reuse; NULL when none
 * is idle.  O(entries): only when the table is full. */
static sg__hentry *evict(sg_health *h, int64_t now) {
    sg__hentry *lru = NULL;
    for (uint32_t i = 0; i < h->n; i++) {
        sg__hentry *e = h->ents[i];
        if (idle(e, now) &&
            (lru == NULL || atomic_load(&e->used_at) < atomic_load(&lru->used_at))) {
            lru = e;
        }
    }
    if (lru != NULL) {
        unlink_entry(h, lru);
    }
    return lru;
}

static void entry_reset(sg__hentry *e, const uint8_t *key, const char *name,
                        int64_t now) {
    memcpy(e->key, key, SG__HEALTH_KEY);
    size_t n = strnlen(name, SG_HEALTH_ENDPOINT_MAX);
    memcpy(e->name, name, n);
    e->name[n] = '\0';
    e->refs = 0;
    atomic_store(&e->used_at, now);
    atomic_store(&e->cool_until, NONE);
    atomic_store(&e->open_until, NONE);
    atomic_store(&e->fails, 0);
    atomic_store(&e->opens, 0);
    atomic_store(&e->probe, 0);
    atomic_store(&e->open_remote, 0);
    atomic_store(&e->inflight, 0);
    for (int f = 0; f < FAMILIES; f++) {
        atomic_store(&e->tok_left[f], -1);
        atomic_store(&e->tok_reset[f], NONE);
    }
    for (int a = 0; a < 3; a++) {
        for (int w = 0; w < SG_HEALTH_WHY_COUNT_; w++) {
            atomic_store(&e->counts[a][w], 0);
        }
    }
    sg__ttft_init(&e->ttft);
    atomic_store(&e->req_seq, 0);
    atomic_store(&e->req_exhaust, 0);
    atomic_store(&e->req_reset, NONE);
    atomic_store(&e->req_limit, -1);
}

/* A new entry for @key: a fresh one while the table has room, else the
 * least recently used idle one; NULL when neither. */
sg__hentry *sg__health_make(sg_health *h, const uint8_t *key, const char *name,
                            int64_t now) {
    sg__hentry *e = NULL;
    if (grow(h)) {
        e = malloc(sizeof(*e));
        if (e != NULL) {
            e->index = h->n;
            h->ents[h->n++] = e;
        }
    }
    if (e == NULL) {
        e = evict(h, now);
    }
    if (e != NULL) {
        entry_reset(e, key, name, now);
        link_entry(h, e);
    }
    return e;
}

sg__hentry *sg__health_bind(sg_health *h, const uint8_t key[SG__HEALTH_KEY],
                            const char *name, int64_t now) {
    pthread_mutex_lock(&h->mu);
    sg__hentry *e = sg__health_find(h, key);
    if (e == NULL) {
        e = sg__health_make(h, key, name, now);
    }
    if (e != NULL) {
        e->refs++;
    }
    pthread_mutex_unlock(&h->mu);
    return e;
}

void sg__health_unbind(sg_health *h, sg__hentry *e) {
    pthread_mutex_lock(&h->mu);
    e->refs--;
    pthread_mutex_unlock(&h->mu);
}

/* ----------------------------------------------------- the state machine */

/* The cooldown of the @k-th open in a row (k >= 1): doubling, capped. */
static int64_t cooldown(const sg_health *h, uint32_t k) {
    int64_t d = atomic_load(&h->cooldown);
    const int64_t cap = atomic_load(&h->cooldown_max);
    for (uint32_t i = 1; i < k && d < cap; i++) {
        d = d > SG_DURATION_MAX / 2 ? SG_DURATION_MAX : d * 2;
    }
    return d < cap ? d : cap;
}

/* The latest instant a known token count below @need holds @e back. */
static int64_t tokens_until(const sg__hentry *e, int64_t now, const uint64_t need[3]) {
    int64_t until = NONE;
    for (int f = 0; f < FAMILIES; f++) {
        const int64_t left = atomic_load_explicit(&e->tok_left[f], memory_order_relaxed);
        const int64_t reset =
            atomic_load_explicit(&e->tok_reset[f], memory_order_relaxed);
        if (need[f] > 0 && left >= 0 && (uint64_t)left < need[f] && reset > now &&
            reset > until) {
            until = reset;
        }
    }
    return until;
}

/* The end of @e's request window when its requests are spent at @now
 * (NONE otherwise, and for a window assumed: its end is not known). */
static int64_t window_until(const sg__hentry *e, int64_t now) {
    const int64_t reset = atomic_load(&e->req_reset);
    if (reset == NONE || reset == ASSUMED || reset <= now) {
        return NONE;
    }
    return atomic_load(&e->req_seq) >= atomic_load(&e->req_exhaust) ? reset : NONE;
}

/* One more request of @e's window at @now, for an attempt that holds an
 * in-flight slot already: SG_OP_REASON_NONE and its number in *@seq, or
 * rate_limited until *@free_at when the window's requests are spent.  A
 * window that ended becomes one of the limit the provider named, whose end
 * the next answer names - so that the operations that waited for the
 * reset do not all go at once - and, while that is unknown, spent requests
 * are looked at again every SG_HEALTH_RECHECK_NS, as long as an attempt
 * in flight may answer for the window (docs/design.md, "Endpoint
 * health"). */
static sg_op_reason take_request(sg__hentry *e, int64_t now, int64_t *free_at,
                                 uint64_t *seq) {
    for (;;) {
        int64_t reset = atomic_load(&e->req_reset);
        uint64_t s = atomic_load(&e->req_seq);
        const int64_t lim = atomic_load(&e->req_limit);
        if (reset != NONE && reset != ASSUMED && reset <= now) {
            if (atomic_compare_exchange_strong(&e->req_reset, &reset,
                                               lim > 0 ? ASSUMED : NONE) &&
                lim > 0) {
                atomic_store(&e->req_exhaust, s + (uint64_t)lim);
            }
            continue;
        }
        if (reset != NONE && s >= atomic_load(&e->req_exhaust)) {
            if (reset != ASSUMED) {
                *free_at = reset;
                return SG_OP_REASON_RATE_LIMITED;
            }
            if (atomic_load(&e->inflight) > 1 || lim <= 0) {
                *free_at = sg_time_add(now, SG_HEALTH_RECHECK_NS);
                return SG_OP_REASON_RATE_LIMITED;
            }
            /* nothing in flight will name the window assumed: another */
            atomic_store(&e->req_exhaust, s + (uint64_t)lim);
            continue;
        }
        if (atomic_compare_exchange_weak(&e->req_seq, &s, s + 1)) {
            *seq = s + 1;
            return SG_OP_REASON_NONE;
        }
    }
}

sg_op_reason sg__hentry_admit(const sg_health *h, sg__hentry *e, int64_t now,
                              const uint64_t need[3], int64_t *free_at, bool *probe,
                              uint64_t *seq) {
    *probe = false;
    *seq = 0;
    int64_t cool = atomic_load(&e->cool_until);
    const int64_t tok = tokens_until(e, now, need);
    cool = tok > cool ? tok : cool;
    const bool breaker = atomic_load(&h->breaker_failures) > 0;
    const int64_t open = breaker ? atomic_load(&e->open_until) : NONE;
    if (open != NONE && now < open) {
        *free_at = cool > open ? cool : open;
        return SG_OP_REASON_CIRCUIT_OPEN;
    }
    if (cool > now) {
        *free_at = cool;
        return SG_OP_REASON_RATE_LIMITED;
    }
    if (open != NONE) {
        /* half-open: one probe at a time */
        uint32_t none = 0;
        if (!atomic_compare_exchange_strong(&e->probe, &none, 1)) {
            *free_at = sg_time_add(now, SG_HEALTH_RECHECK_NS);
            return SG_OP_REASON_CIRCUIT_OPEN;
        }
        *probe = true;
    }
    const uint32_t max = atomic_load(&h->max_inflight);
    const uint32_t before = atomic_fetch_add(&e->inflight, 1);
    if (max > 0 && before >= max) {
        sg__hentry_unadmit(e, *probe);
        *probe = false;
        *free_at = sg_time_add(now, SG_HEALTH_RECHECK_NS);
        return SG_OP_REASON_ENDPOINT_BUSY;
    }
    if (take_request(e, now, free_at, seq) != SG_OP_REASON_NONE) {
        sg__hentry_unadmit(e, *probe);
        *probe = false;
        return SG_OP_REASON_RATE_LIMITED;
    }
    atomic_store_explicit(&e->used_at, now, memory_order_relaxed);
    return SG_OP_REASON_NONE;
}

void sg__hentry_unadmit(sg__hentry *e, bool probe) {
    atomic_fetch_sub(&e->inflight, 1);
    if (probe) {
        atomic_store(&e->probe, 0);
    }
}

/* Tells @h's listener, if any, that @e is @state until @until as of @now
 * (lock-free: a replaced listener is freed once no call of it runs). */
static void tell(sg_health *h, const sg__hentry *e, sg_health_state state, int64_t now,
                 int64_t until) {
    atomic_fetch_add(&h->telling, 1);
    const struct listener *l = atomic_load(&h->listener);
    if (l != NULL) {
        sg_health_fact f = {
            .endpoint = e->name, .state = state, .at = now, .until = until};
        memcpy(f.key, e->key, sizeof(f.key));
        l->fn(&f, l->user_data);
    }
    atomic_fetch_sub(&h->telling, 1);
}

/* Opens @e's breaker at @now, the @k-th time in a row. */
static void open_breaker(sg_health *h, sg__hentry *e, int64_t now, uint32_t k) {
    const int64_t until = sg_time_add(now, cooldown(h, k));
    atomic_store(&e->opens, k);
    atomic_store(&e->fails, 0);
    atomic_store(&e->open_remote, 0);
    atomic_store(&e->open_until, until);
    tell(h, e, SG_HEALTH_OPEN, now, until);
}

/* @e served at @now: whatever counted against it is over - its breaker
 * closes, the count and the doubling start again. */
static void served(sg_health *h, sg__hentry *e, int64_t now) {
    atomic_store(&e->fails, 0);
    if (atomic_exchange(&e->open_until, NONE) != NONE) {
        atomic_store(&e->opens, 0);
        atomic_store(&e->open_remote, 0);
        tell(h, e, SG_HEALTH_CLOSED, now, -1);
    }
}

void sg__hentry_probe_answered(sg_health *h, sg__hentry *e, int64_t now) {
    served(h, e, now);
    atomic_store(&e->probe, 0); /* after the breaker closed: no probe sneaks in */
}

void sg__hentry_end(sg_health *h, sg__hentry *e, int64_t now, sg__hkind kind,
                    bool probe) {
    switch (kind) {
    case SG__H_OK:
        served(h, e, now);
        break;
    case SG__H_UNHEALTHY:
        if (probe) {
            /* the probe failed: open again, for twice as long */
            open_breaker(h, e, now, atomic_load(&e->opens) + 1);
        } else if (atomic_load(&e->open_until) == NONE) {
            const uint32_t n = atomic_load(&h->breaker_failures);
            if (n > 0 && atomic_fetch_add(&e->fails, 1) + 1 >= n) {
                int64_t closed = NONE;
                /* the first to reach the count opens it; the others see
                 * it open (a failure while open or half-open that is not
                 * the probe's says nothing new) */
                const int64_t until = sg_time_add(now, cooldown(h, 1));
                if (atomic_compare_exchange_strong(&e->open_until, &closed, until)) {
                    atomic_store(&e->opens, 1);
                    atomic_store(&e->fails, 0);
                    tell(h, e, SG_HEALTH_OPEN, now, until);
                }
            }
        }
        break;
    default:
        break; /* neutral: nothing learned */
    }
    sg__hentry_unadmit(e, probe); /* after the breaker moved: no probe sneaks in */
}

/* Raises @e's cooling to @until: whether it did, and from what in *@was. */
bool sg__hentry_raise_cooling(sg__hentry *e, int64_t until, int64_t *was) {
    *was = atomic_load(&e->cool_until);
    while (until > *was) {
        if (atomic_compare_exchange_weak(&e->cool_until, was, until)) {
            return true;
        }
    }
    return false;
}

void sg__hentry_cool(sg_health *h, sg__hentry *e, int64_t now, int64_t until) {
    int64_t was;
    /* told when it starts, or moves markedly: not for each answer in
     * flight that pushes it a little */
    if (sg__hentry_raise_cooling(e, until, &was) &&
        (was <= now || until - was >= SG_HEALTH_FACT_EXTEND_NS)) {
        tell(h, e, SG_HEALTH_COOLING, now, until);
    }
}

void sg__hentry_requests(sg__hentry *e, int64_t now, uint64_t seq, int64_t left,
                         int64_t reset, int64_t limit) {
    if (limit > 0) {
        atomic_store(&e->req_limit, limit);
    }
    if (seq == 0 || left < 0 || reset <= now) {
        return; /* not admitted through @e, or a window already over */
    }
    /* the window's end: the latest its answers name */
    int64_t cur = atomic_load(&e->req_reset);
    int64_t next;
    do {
        next = cur == NONE || cur == ASSUMED || cur <= now || reset > cur ? reset : cur;
    } while (!atomic_compare_exchange_weak(&e->req_reset, &cur, next));
    const uint64_t spent =
        (uint64_t)left > UINT64_MAX - seq ? UINT64_MAX : seq + (uint64_t)left;
    atomic_store(&e->req_exhaust, spent);
}

void sg__hentry_tokens(sg__hentry *e, int f, int64_t left, int64_t reset) {
    atomic_store_explicit(&e->tok_left[f], left, memory_order_relaxed);
    atomic_store_explicit(&e->tok_reset[f], reset, memory_order_relaxed);
}

int sg_health_set_first_token_window(sg_health *h, int64_t ns) {
    if (h == NULL || ns < 2) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    atomic_store(&h->ttft_window, ns);
    return 0;
}

sg__ttft_sketch *sg__hentry_ttft(sg__hentry *e, const sg_health *h, int64_t *half) {
    *half = atomic_load_explicit(&h->ttft_window, memory_order_relaxed) / 2;
    return &e->ttft;
}

void sg__hentry_count(sg__hentry *e, sg_op_health_action action, sg_op_reason why) {
    const int w = why == SG_OP_REASON_RATE_LIMITED   ? SG_HEALTH_RATE_LIMITED
                  : why == SG_OP_REASON_CIRCUIT_OPEN ? SG_HEALTH_CIRCUIT_OPEN
                                                     : SG_HEALTH_ENDPOINT_BUSY;
    atomic_fetch_add_explicit(&e->counts[action][w], 1, memory_order_relaxed);
}

int sg_health_set_shared_max(sg_health *h, int64_t ns) {
    return set_duration(h, h != NULL ? &h->shared_max : NULL, ns);
}

/* ----------------------------------------------------------- reading it */

static void describe(const sg_health *h, const sg__hentry *e, int64_t now,
                     sg_health_entry *out) {
    memset(out, 0, sizeof(*out));
    out->endpoint = e->name;
    memcpy(&out->key_id, e->key, sizeof(out->key_id));
    int64_t cool = atomic_load(&e->cool_until);
    const int64_t spent = window_until(e, now);
    cool = spent > cool ? spent : cool;
    const int64_t open =
        atomic_load(&h->breaker_failures) > 0 ? atomic_load(&e->open_until) : NONE;
    out->free_at = -1;
    if (open != NONE && now < open) {
        out->state = SG_HEALTH_OPEN;
        out->free_at = cool > open ? cool : open;
    } else if (cool > now) {
        out->state = SG_HEALTH_COOLING;
        out->free_at = cool;
    } else if (open != NONE) {
        out->state = SG_HEALTH_HALF_OPEN;
    }
    out->inflight = atomic_load(&e->inflight);
    out->failures = atomic_load(&e->fails);
    out->opens = atomic_load(&e->opens);
    out->operations = e->refs;
    for (int w = 0; w < SG_HEALTH_WHY_COUNT_; w++) {
        out->skipped[w] = atomic_load(&e->counts[SG_OP_HEALTH_SKIPPED][w]);
        out->waited[w] = atomic_load(&e->counts[SG_OP_HEALTH_WAITED][w]);
        out->refused[w] = atomic_load(&e->counts[SG_OP_HEALTH_REFUSED][w]);
    }
    sg__ttft_describe(&e->ttft, atomic_load(&h->ttft_window) / 2, now, out);
}

int sg_health_foreach(sg_health *h, int64_t now,
                      int (*cb)(const sg_health_entry *e, void *user_data),
                      void *user_data) {
    if (h == NULL || cb == NULL) {
        return SG_EINVAL;
    }
    int rc = 0;
    pthread_mutex_lock(&h->mu);
    for (uint32_t i = 0; i < h->n && rc == 0; i++) {
        sg_health_entry view;
        describe(h, h->ents[i], now, &view);
        rc = cb(&view, user_data);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}
