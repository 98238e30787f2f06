/*
 * pool.c - sg-proxy's HTTP/1.x upstream connections, in shards of
 * libcurl's connection cache (pool.h says why and how one is chosen).
 */
#include <stdlib.h>

#include "conn.h"
#include "pool.h"

/* HTTP/1.x upstream connections live in shards of libcurl's connection
 * cache, a share each (pool.h says why and how one is chosen): a plain
 * http:// route's from the start, a TLS route's once its upstreams have
 * answered over HTTP/1.x and never over h2 (learn_version).  Any other
 * TLS route keeps the multi's one cache: its requests wait
 * (CURLOPT_PIPEWAIT) for a connection that may multiplex (ALPN h2), and
 * concurrent streams share one only within one cache - sharded, each
 * shard would open an h2 connection of its own. */

/* Shard @i made: a share of a connection cache alone (names, TLS
 * sessions and the rest stay the multi's and each handle's).  false when
 * out of memory. */
static bool shard_make(struct proxy *p, uint32_t i) {
    if (i == p->pool.cap) {
        uint32_t cap = p->pool.cap == 0 ? 4 : 2 * p->pool.cap;
        CURLSH **sh = realloc(p->pool.share, cap * sizeof(*sh));
        if (sh != NULL) {
            p->pool.share = sh;
        }
        uint32_t *busy = sh != NULL ? realloc(p->pool.busy, cap * sizeof(*busy)) : NULL;
        if (busy == NULL) {
            return false;
        }
        p->pool.busy = busy;
        p->pool.cap = cap;
    }
    CURLSH *s = curl_share_init();
    if (s == NULL ||
        curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
        curl_share_cleanup(s);
        return false;
    }
    p->pool.share[i] = s;
    p->pool.busy[i] = 0;
    p->pool.n = i + 1;
    return true;
}

/* @c's request to an HTTP/1.x route: its handle goes through the lowest
 * shard with room.  Out of memory, the multi's cache does. */
void pool_join(struct conn *c, CURL *e) {
    struct proxy *p = c->proxy;
    uint32_t i = pool_pick(p->pool.busy, p->pool.n, POOL_SHARD_STREAMS);
    if ((i < p->pool.n || shard_make(p, i)) &&
        curl_easy_setopt(e, CURLOPT_SHARE, p->pool.share[i]) == CURLE_OK) {
        p->pool.busy[i]++;
        c->pool_shard = i + 1;
    }
}

/* The shards above the lowest @keep closed, from the top, with the idle
 * connections they kept.  No handle uses them: their requests' handles
 * are gone, and a hedge's duplicate (curl_easy_duphandle) does not take
 * the share in libcurl 7.88 to 8.10 - nor outlives its root's operation. */
static void shards_close_to(struct proxy *p, uint32_t keep) {
    while (p->pool.n > keep &&
           curl_share_cleanup(p->pool.share[p->pool.n - 1]) == CURLSHE_OK) {
        p->pool.n--;
    }
}

/* @c's handle has been cleaned up (a share must outlive its handles):
 * its shard has one request fewer, and the empty shards at the top go,
 * closing the idle connections they kept. */
void pool_leave(struct conn *c) {
    struct proxy *p = c->proxy;
    if (c->pool_shard == 0) {
        return;
    }
    p->pool.busy[c->pool_shard - 1]--;
    c->pool_shard = 0;
    shards_close_to(p, pool_keep(p->pool.busy, p->pool.n));
}

void pool_free(struct proxy *p) {
    shards_close_to(p, 0);
    if (p->pool.n == 0) {
        free(p->pool.share);
        free(p->pool.busy);
        p->pool.share = NULL;
        p->pool.busy = NULL;
        p->pool.cap = 0;
    }
}
