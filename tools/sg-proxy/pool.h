/* sg-proxy: which of libcurl's connection caches a plain HTTP/1.1
 * upstream request goes through (pool.c keeps the caches).
 *
 * Why more than one: libcurl 7.88 looks for a connection to reuse by
 * walking every connection its cache holds to the request's host
 * (url.c, ConnectionExists), and HTTP/1.1 connections in use cannot be
 * reused, so with one cache for the whole multi the N-th concurrent
 * stream to a host walks the N - 1 busy before it: opening N streams
 * costs O(N^2) (~4 s of a core at 8,900 streams, the loop held that
 * long).  Removing a transfer that left its connection open walks the
 * whole cache too (multi.c, close_connect_only).
 *
 * So plain HTTP/1.1 requests are spread over shards of at most
 * POOL_SHARD_STREAMS requests each, each shard a libcurl share of its own
 * connection cache (CURL_LOCK_DATA_CONNECT).  A request goes to the
 * lowest shard with room: sequential requests, and every request while
 * fewer than POOL_SHARD_STREAMS are in flight, go to shard 0, where the
 * idle connection the last one left is found and reused.  A shard opens a
 * connection only when all of its connections to that host are busy, so
 * it never holds more than POOL_SHARD_STREAMS live connections to a host:
 * a walk is of POOL_SHARD_STREAMS at most, whatever N.  Shards are made as
 * the load needs them (n <= ceil(peak in flight / POOL_SHARD_STREAMS))
 * and the highest ones go once empty (closing their idle connections),
 * shard 0 excepted: after a burst the idle connections kept are shard 0's.
 *
 * What is here is the choice alone, on counts: no libcurl, one loop owns
 * the counts, tested by hand (tests/unit/proxy_pool_test.c). */
#ifndef SG_PROXY_POOL_H
#define SG_PROXY_POOL_H

#include <stdint.h>

/* Requests in one shard at most: each opening request walks this many of
 * its shard's connections at most (~0.1 us each). */
#define POOL_SHARD_STREAMS 64u

/* The shard for a new request, given each of the @n shards' requests in
 * @busy: the lowest with fewer than @per; @n when every one is full (a
 * shard is to be made).  O(n), n <= peak / @per. */
static inline uint32_t pool_pick(const uint32_t *busy, uint32_t n, uint32_t per) {
    for (uint32_t i = 0; i < n; i++) {
        if (busy[i] < per) {
            return i;
        }
    }
    return n;
}

/* How many of the @n shards to keep once a request has left one: the
 * empty ones at the top go (none past a shard in use), shard 0 stays. */
static inline uint32_t pool_keep(const uint32_t *busy, uint32_t n) {
    while (n > 1 && busy[n - 1] == 0) {
        n--;
    }
    return n;
}

#endif
