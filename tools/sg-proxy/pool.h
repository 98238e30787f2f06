/* sg-proxy: which of libcurl's connection caches an upstream request
 * goes through (pool.c keeps the caches).  Two sets of shards, each shard
 * a libcurl share of its own connection cache (CURL_LOCK_DATA_CONNECT):
 * one for HTTP/1.x upstreams, one for TLS upstreams that may multiplex.
 *
 * HTTP/1.x, why more than one cache: libcurl 7.88 looks for a connection
 * to reuse by walking every connection its cache holds to the request's
 * host (url.c, ConnectionExists), and HTTP/1.1 connections in use cannot
 * be reused, so with one cache for the whole multi the N-th concurrent
 * stream to a host walks the N - 1 busy before it: opening N streams
 * costs O(N^2) (~4 s of a core at 8,900 streams, the loop held that
 * long).  Removing a transfer that left its connection open walks the
 * whole cache too (multi.c, close_connect_only).  So plain HTTP/1.1
 * requests are spread over shards of at most POOL_SHARD_STREAMS requests
 * each; a shard opens a connection only when all of its connections to
 * that host are busy, so it never holds more than POOL_SHARD_STREAMS
 * live connections to a host: a walk is of POOL_SHARD_STREAMS at most,
 * whatever N.
 *
 * HTTP/2, why more than one connection: every transfer on an HTTP/2
 * connection waits on its one socket, and libcurl 7.88 runs every one of
 * them whenever that socket is readable (multi.c, multi_socket: each
 * transfer of the socket is expired and run, 1-2 us each, whether or not
 * the bytes read were its own).  With 10,000 streams on one connection
 * every read of it held the loop 10-20 ms: an idle clock coming due
 * meanwhile was decided that much late, and the walk was most of the
 * proxy's CPU.  So these requests are spread over shards of at most
 * POOL_H2_SHARD_STREAMS, each shard's streams sharing its connection
 * (CURLOPT_PIPEWAIT waits for it within the shard): a read runs at most
 * POOL_H2_SHARD_STREAMS transfers, and N streams hold about
 * N / POOL_H2_SHARD_STREAMS connections (a TLS connection is ~100 KiB).
 *
 * Either set: a request goes to the lowest shard with room, so
 * sequential requests, and every request while fewer than a shard's
 * bound are in flight, go to shard 0, where the idle connection the last
 * one left is found and reused.  Shards are made as the load needs them
 * (n <= ceil(peak in flight / bound)) and the highest ones go once empty
 * (closing their idle connections), shard 0 excepted: after a burst the
 * idle connections kept are shard 0's.
 *
 * What is here is the choice alone, on counts: no libcurl, one loop owns
 * the counts, tested by hand (tests/unit/proxy_pool_test.c). */
#ifndef SG_PROXY_POOL_H
#define SG_PROXY_POOL_H

#include <stdint.h>

/* Requests in one shard at most: each opening request walks this many of
 * its shard's connections at most (~0.1 us each). */
#define POOL_SHARD_STREAMS 64u

/* Streams in one HTTP/2 shard at most, so on one upstream connection
 * (while the server's SETTINGS_MAX_CONCURRENT_STREAMS is not lower): each
 * read of the connection runs this many transfers at most, ~0.5-1 ms. */
#define POOL_H2_SHARD_STREAMS 500u

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
