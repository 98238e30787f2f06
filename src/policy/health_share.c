/*
 * Endpoint health shared with other processes: the seam (health.h,
 * "Sharing with other processes"; docs/design.md, "Endpoint health",
 * "Several processes").  The credential key processes must hold alike;
 * the listener, told by health.c of what attempts teach; a fact from
 * elsewhere, applied under the table's mutex - only ever holding an
 * endpoint back, for at most shared_max, never told back.
 */
#define _GNU_SOURCE
#include "health_table.h"
#include "sha256.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

int sg_health_set_credential_key(sg_health *h, const void *key, size_t len) {
    if (h == NULL || key == NULL || len < SG_HEALTH_CREDENTIAL_KEY_MIN) {
        return SG_EINVAL;
    }
    if (len > SG_HEALTH_CREDENTIAL_KEY_MAX) {
        return SG_ERANGE;
    }
    int rc = 0;
    pthread_mutex_lock(&h->mu);
    if (h->n > 0) {
        rc = SG_ESTATE; /* entries keyed already: they would never match again */
    } else if (len > sizeof(h->secret)) {
        /* what HMAC does with a key longer than its block (RFC 2104) */
        sg__sha256 c;
        sg__sha256_init(&c);
        sg__sha256_update(&c, key, len);
        sg__sha256_final(&c, h->secret);
        h->secret_len = SG__SHA256_LEN;
    } else {
        memcpy(h->secret, key, len);
        h->secret_len = len;
    }
    if (rc == 0) {
        atomic_store(&h->key_gen, sg__health_next_gen()); /* keys made before: stale */
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int sg_health_set_listener(sg_health *h, sg_health_listener fn, void *user_data) {
    if (h == NULL) {
        return SG_EINVAL;
    }
    struct listener *l = NULL;
    if (fn != NULL) {
        l = malloc(sizeof(*l));
        if (l == NULL) {
            return SG_ENOMEM;
        }
        l->fn = fn;
        l->user_data = user_data;
    }
    struct listener *old = atomic_exchange(&h->listener, l);
    /* a call that read the old one is counted before it read it: once the
     * count is seen at zero, none still holds it */
    while (atomic_load(&h->telling) != 0) {
        sched_yield();
    }
    free(old);
    return 0;
}

/* An endpoint's name as another process sends it: 1 to
 * SG_HEALTH_ENDPOINT_MAX bytes, no control byte. */
static bool valid_name(const char *s) {
    const size_t n = strnlen(s, SG_HEALTH_ENDPOINT_MAX + 1);
    if (n == 0 || n > SG_HEALTH_ENDPOINT_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            return false;
        }
    }
    return true;
}

static int64_t earlier(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* Opens @e until @until from elsewhere, unless it is open longer already
 * (this process's own doubling stays its own). */
static void open_from_elsewhere(sg__hentry *e, int64_t until) {
    int64_t cur = atomic_load(&e->open_until);
    while (cur == NONE || cur < until) {
        if (atomic_compare_exchange_weak(&e->open_until, &cur, until)) {
            if (cur == NONE) {
                /* only a breaker it opened is one a close from elsewhere
                 * may close */
                atomic_store(&e->open_remote, 1);
            }
            uint32_t none = 0;
            (void)atomic_compare_exchange_strong(&e->opens, &none, 1);
            return;
        }
    }
}

/* Under @h's mutex: @e learns @state until @until (as of @now) from
 * elsewhere - never for longer than shared_max. */
static void apply_fact(sg_health *h, sg__hentry *e, sg_health_state state, int64_t until,
                       int64_t now) {
    const int64_t cap = atomic_load(&h->shared_max);
    int64_t was;
    switch (state) {
    case SG_HEALTH_COOLING:
        (void)sg__hentry_raise_cooling(e, earlier(until, sg_time_add(now, cap)), &was);
        break;
    case SG_HEALTH_OPEN:
        open_from_elsewhere(
            e, earlier(until,
                       sg_time_add(now, earlier(cap, atomic_load(&h->cooldown_max)))));
        break;
    case SG_HEALTH_CLOSED:
        if (atomic_exchange(&e->open_remote, 0) != 0) {
            atomic_store(&e->open_until, NONE);
            atomic_store(&e->opens, 0);
        }
        break;
    default:
        break;
    }
}

int sg_health_apply(sg_health *h, const char *endpoint,
                    const uint8_t key[SG_HEALTH_KEY_SIZE], sg_health_state state,
                    int64_t until, int64_t now) {
    if (h == NULL || endpoint == NULL || key == NULL || !valid_name(endpoint) ||
        (state != SG_HEALTH_COOLING && state != SG_HEALTH_OPEN &&
         state != SG_HEALTH_CLOSED)) {
        return SG_EINVAL;
    }
    if ((state != SG_HEALTH_CLOSED && until <= now) ||
        (state == SG_HEALTH_OPEN && atomic_load(&h->breaker_failures) == 0)) {
        return 0; /* over already; or no breaker here to open */
    }
    int rc = 0;
    pthread_mutex_lock(&h->mu);
    sg__hentry *e = sg__health_find(h, key);
    if (e == NULL && state != SG_HEALTH_CLOSED) {
        e = sg__health_make(h, key, endpoint, now);
        rc = e == NULL ? SG_ETOOMANY : 0;
    }
    if (e != NULL) {
        apply_fact(h, e, state, until, now);
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}
