/*
 * The table an sg_health keeps and its entries (health.c), for the files
 * that change them: health.c (the table, the state machine) and
 * health_share.c (facts from elsewhere).  Nothing else reads an entry's
 * fields: the rest of the policy goes through health_internal.h.
 */
#ifndef STREAMGUARD_POLICY_HEALTH_TABLE_H
#define STREAMGUARD_POLICY_HEALTH_TABLE_H

#include "health_internal.h"

#include <pthread.h>
#include <stdatomic.h>

#define NO_ENTRY UINT32_MAX
#define NONE INT64_MIN /* no instant: not cooling, breaker closed */
/* req_reset: a window assumed after a reset, its end not yet named */
#define ASSUMED INT64_MAX
#define FAMILIES 3 /* tokens, input tokens, output tokens */
#define SG__SHA256_BLOCK 64

struct listener {
    sg_health_listener fn;
    void *user_data;
};

struct sg__hentry {
    uint8_t key[SG__HEALTH_KEY];
    uint32_t next;  /* in its bucket's chain (mutex) */
    uint32_t index; /* in the table (mutex) */
    uint32_t refs;  /* operations holding it (mutex) */
    /* its breaker was opened by a fact from elsewhere (in refs's padding) */
    _Atomic uint32_t open_remote;
    _Atomic int64_t used_at;
    _Atomic int64_t cool_until; /* NONE: not cooling */
    _Atomic int64_t open_until; /* NONE: breaker closed; then open, then half-open */
    _Atomic uint32_t fails;     /* consecutive unhealthy ends while closed */
    _Atomic uint32_t opens;     /* re-opens in a row: the cooldown's doubling */
    _Atomic uint32_t probe;     /* half-open: 1 while its probe is out */
    _Atomic uint32_t inflight;
    _Atomic int64_t tok_left[FAMILIES]; /* -1 unknown */
    _Atomic int64_t tok_reset[FAMILIES];
    _Atomic uint64_t counts[3][SG_HEALTH_WHY_COUNT_]; /* [action][why] */
    /* the provider's request window: attempts admitted ever (each one a
     * request sent), the count at which the window's are spent, its end
     * (NONE: no window known; ASSUMED), the most it holds (-1 unknown) */
    _Atomic uint64_t req_seq;
    _Atomic uint64_t req_exhaust;
    _Atomic int64_t req_reset;
    _Atomic int64_t req_limit;
    char name[SG_HEALTH_ENDPOINT_MAX + 1];
    sg__ttft_sketch ttft; /* its first tokens (ttft_sketch.h; ttft_op.c) */
};

struct sg_health {
    _Atomic uint32_t holds; /* the caller's, and one per operation */
    _Atomic uint32_t breaker_failures;
    _Atomic uint32_t max_inflight;
    _Atomic int64_t cooldown;
    _Atomic int64_t cooldown_max;
    _Atomic int64_t ttft_window; /* sg_health_set_first_token_window */
    _Atomic int64_t shared_max;
    /* the listener, replaced whole (set_listener), and the calls of it
     * running: a replaced one is freed once none runs */
    struct listener *_Atomic listener;
    _Atomic uint32_t telling;
    uint8_t secret[SG__SHA256_BLOCK]; /* the credential key (HMAC hashes a longer one) */
    /* new (process-wide) whenever the secret is set: a key computed with
     * it is valid while this stays (sg__op_endpoint_key) */
    _Atomic uint64_t key_gen;
    size_t secret_len;
    pthread_mutex_t mu;
    sg__hentry **ents; /* n of cap, each allocated once, never moved */
    uint32_t n, cap;
    uint32_t *bucket; /* cap * 2 chains, NO_ENTRY ended */
};

/* Under the mutex: the entry of @key, or NULL. */
sg__hentry *sg__health_find(const sg_health *h, const uint8_t *key);
/* Under the mutex: a new entry for @key (named @name) - a fresh one while
 * the table has room, else the least recently used idle one; NULL when
 * neither. */
sg__hentry *sg__health_make(sg_health *h, const uint8_t *key, const char *name,
                            int64_t now);
/* Raises @e's cooling to @until: whether it did, and from what in *@was. */
bool sg__hentry_raise_cooling(sg__hentry *e, int64_t until, int64_t *was);

#endif /* STREAMGUARD_POLICY_HEALTH_TABLE_H */
