/*
 * pool.c - sg-proxy's upstream connections in shards of libcurl's
 * connection cache (pool.h says why and how one is chosen).
 */
#include <stdlib.h>

#include "conn.h"
#include "pool.h"

/* Two sets of shards, a share each (pool.h says why and how one is
 * chosen): p->pool for HTTP/1.x - a plain http:// route's requests from
 * the start, a TLS route's once its upstreams have answered over HTTP/1.x
 * and never over h2 (learn_version) - of POOL_SHARD_STREAMS requests, and
 * p->pool_h2 for every other TLS route, of POOL_H2_SHARD_STREAMS: its
 * requests wait (CURLOPT_PIPEWAIT) for a connection of their shard that
 * may multiplex (ALPN h2) and share it. */

void pool_init(struct proxy *p) {
    p->pool.per = POOL_SHARD_STREAMS;
    p->pool_h2.per = POOL_H2_SHARD_STREAMS;
}

/* Shard @i of @pl made: a share of a connection cache alone (names, TLS
 * sessions and the rest stay the multi's and each handle's).  false when
 * out of memory. */
static bool shard_make(struct pool *pl, uint32_t i) {
    if (i == pl->cap) {
        uint32_t cap = pl->cap == 0 ? 4 : 2 * pl->cap;
        CURLSH **sh = realloc(pl->share, cap * sizeof(*sh));
        if (sh != NULL) {
            pl->share = sh;
        }
        uint32_t *busy = sh != NULL ? realloc(pl->busy, cap * sizeof(*busy)) : NULL;
        if (busy == NULL) {
            return false;
        }
        pl->busy = busy;
        pl->cap = cap;
    }
    CURLSH *s = curl_share_init();
    if (s == NULL ||
        curl_share_setopt(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
        curl_share_cleanup(s);
        return false;
    }
    pl->share[i] = s;
    pl->busy[i] = 0;
    pl->n = i + 1;
    return true;
}

void pool_join(struct conn *c, CURL *e, struct pool *pl) {
    uint32_t i = pool_pick(pl->busy, pl->n, pl->per);
    if ((i < pl->n || shard_make(pl, i)) &&
        curl_easy_setopt(e, CURLOPT_SHARE, pl->share[i]) == CURLE_OK) {
        pl->busy[i]++;
        c->pool = pl;
        c->pool_shard = i;
    }
}

/* The shards of @pl above the lowest @keep closed, from the top, with the
 * idle connections they kept.  No handle uses them: their requests'
 * handles are gone, and a hedge's duplicate (curl_easy_duphandle) does not
 * take the share in libcurl 7.88 to 8.10 - nor outlives its root's
 * operation. */
static void shards_close_to(struct pool *pl, uint32_t keep) {
    while (pl->n > keep && curl_share_cleanup(pl->share[pl->n - 1]) == CURLSHE_OK) {
        pl->n--;
    }
}

/* @c's handle has been cleaned up (a share must outlive its handles):
 * its shard has one request fewer, and the empty shards at the top go,
 * closing the idle connections they kept. */
void pool_leave(struct conn *c) {
    struct pool *pl = c->pool;
    if (pl == NULL) {
        return;
    }
    pl->busy[c->pool_shard]--;
    c->pool = NULL;
    c->pool_shard = 0;
    shards_close_to(pl, pool_keep(pl->busy, pl->n));
}

static void pool_close(struct pool *pl) {
    shards_close_to(pl, 0);
    if (pl->n == 0) {
        free(pl->share);
        free(pl->busy);
        pl->share = NULL;
        pl->busy = NULL;
        pl->cap = 0;
    }
}

void pool_free(struct proxy *p) {
    pool_close(&p->pool);
    pool_close(&p->pool_h2);
}
