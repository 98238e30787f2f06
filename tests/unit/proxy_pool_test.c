/*
 * sg-proxy's upstream connection shards (tools/sg-proxy/pool.h), driven
 * by hand beside a model of libcurl 7.88's connection cache as far as the
 * choice depends on it: a request takes an idle connection of its shard
 * when there is one (walking the shard's connections to find it - all of
 * them when none is idle, as ConnectionExists does over HTTP/1.1) or opens
 * one; a finished request leaves its connection idle in that shard; a
 * shard that goes closes its idle connections.
 *
 * Checked: sequential requests reuse one connection; however requests
 * come and go, no shard holds more than POOL_SHARD_STREAMS requests or
 * connections (so no walk is longer), shards are no more than the peak
 * needs, and the empty top ones go.  With one cache for everything the
 * same opening of 8,900 streams walks ~40 million connections; sharded,
 * under 600,000.  HTTP/2 shards (POOL_H2_SHARD_STREAMS a shard, a
 * connection each): no read of a connection runs more than a shard's
 * streams, where one cache put 10,000 on one connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pool.h"

#define K POOL_SHARD_STREAMS
#define MAXN 10000u
#define SHARDS ((MAXN + K - 1) / K + 1)

/* The model: per shard its requests (busy) and connections (live, of
 * which busy are in use), and what requests walked and opened. */
struct model {
    uint32_t busy[SHARDS];
    uint32_t live[SHARDS];
    uint32_t n;    /* shards made */
    uint32_t per;  /* requests per shard (K; MAXN: one cache) */
    uint64_t walk; /* connections walked, in all */
    uint64_t opened;
    uint32_t in_flight, peak;
};

static void model_init(struct model *m, uint32_t per) {
    *m = (struct model){.n = 1, .per = per}; /* shard 0 stays */
}

/* A request arrives: its shard. */
static uint32_t take(struct model *m) {
    uint32_t i = pool_pick(m->busy, m->n, m->per);
    for (uint32_t j = 0; j < i; j++) {
        assert_true(m->busy[j] >= m->per); /* the lowest with room */
    }
    if (i == m->n) {
        assert_true(m->n < SHARDS);
        m->busy[i] = m->live[i] = 0;
        m->n++;
    } else {
        assert_true(m->busy[i] < m->per);
    }
    /* the busy come first in the walk (the worst case), then the idle */
    if (m->live[i] > m->busy[i]) {
        m->walk += m->busy[i] + 1;
    } else {
        m->walk += m->live[i];
        m->live[i]++;
        m->opened++;
    }
    m->busy[i]++;
    m->in_flight++;
    m->peak = m->in_flight > m->peak ? m->in_flight : m->peak;
    assert_true(m->busy[i] <= m->per);
    assert_true(m->live[i] <= m->per);
    return i;
}

/* A request in shard @i ends, its connection left idle. */
static void give(struct model *m, uint32_t i) {
    assert_true(i < m->n && m->busy[i] > 0);
    m->busy[i]--;
    m->in_flight--;
    uint32_t keep = pool_keep(m->busy, m->n);
    assert_true(keep >= 1);
    for (uint32_t j = keep; j < m->n; j++) {
        assert_int_equal(m->busy[j], 0); /* only empty shards go */
    }
    assert_true(keep == m->n || m->busy[keep - 1] > 0 || keep == 1);
    m->n = keep;
}

static void sequential_requests_reuse_one_connection(void **state) {
    (void)state;
    struct model m;
    model_init(&m, K);
    for (int r = 0; r < 1000; r++) {
        uint32_t i = take(&m);
        assert_int_equal(i, 0);
        give(&m, i);
        assert_int_equal(m.n, 1);
    }
    assert_int_equal(m.opened, 1);
    /* and under K at once: still one shard, K connections at most */
    uint32_t at[K - 1];
    for (int r = 0; r < 100; r++) {
        for (uint32_t j = 0; j < K - 1; j++) {
            at[j] = take(&m);
            assert_int_equal(at[j], 0);
        }
        for (uint32_t j = 0; j < K - 1; j++) {
            give(&m, at[j]);
        }
    }
    assert_int_equal(m.opened, K - 1);
}

/* Opening @n streams at once, then ending them: what was walked. */
static uint64_t burst_walk(uint32_t per, uint32_t n, uint32_t *shards) {
    static struct model m;
    static uint32_t at[MAXN];
    model_init(&m, per);
    for (uint32_t j = 0; j < n; j++) {
        at[j] = take(&m);
    }
    *shards = m.n;
    for (uint32_t j = 0; j < n; j++) {
        give(&m, at[j]);
    }
    assert_int_equal(m.n, 1); /* the burst over: shard 0 alone */
    return m.walk;
}

static void a_burst_walks_a_shard_not_every_connection(void **state) {
    (void)state;
    uint32_t shards;
    uint64_t one = burst_walk(MAXN, 8900, &shards);
    assert_int_equal(shards, 1);
    assert_int_equal(one, 8900ull * 8899 / 2); /* O(N^2): 39.6 million */
    uint64_t sharded = burst_walk(K, 8900, &shards);
    assert_int_equal(shards, (8900 + K - 1) / K);
    assert_true(sharded <= 8900ull * (K - 1));
    assert_true(sharded * 60 < one);
}

/* Requests come and go in a pseudo-random order (fixed seed), up to MAXN
 * at once: every bound holds at every step. */
static void bounds_hold_however_requests_come_and_go(void **state) {
    (void)state;
    static struct model m;
    static uint32_t at[MAXN];
    uint32_t open = 0;
    uint64_t x = 0x9E3779B97F4A7C15ull;
    model_init(&m, K);
    for (int step = 0; step < 400000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        /* phases: mostly arriving, then mostly leaving */
        bool arrive = (step / 50000) % 2 == 0 ? x % 100 < 70 : x % 100 < 30;
        if (open == 0 || (arrive && open < MAXN)) {
            at[open++] = take(&m);
        } else {
            uint32_t k = (uint32_t)(x >> 32) % open;
            give(&m, at[k]);
            at[k] = at[--open];
        }
        uint32_t need = (m.peak + K - 1) / K;
        assert_true(m.n <= (need > 1 ? need : 1));
        for (uint32_t j = 0; j < m.n; j++) {
            assert_true(m.busy[j] <= K);
            assert_true(m.live[j] <= K); /* no walk is longer */
        }
    }
}

/* HTTP/2: a shard's streams share its one connection, and libcurl 7.88
 * runs every transfer of a connection at each read of it (multi_socket):
 * the most one read runs is the fullest shard's streams.  Opening @n at
 * once with @per a shard: that most, and the shards (connections). */
static uint32_t h2_most_a_read_runs(uint32_t per, uint32_t n, uint32_t *shards) {
    static struct model m;
    static uint32_t at[MAXN];
    model_init(&m, per);
    for (uint32_t j = 0; j < n; j++) {
        at[j] = take(&m);
    }
    uint32_t most = 0;
    for (uint32_t i = 0; i < m.n; i++) {
        most = m.busy[i] > most ? m.busy[i] : most;
    }
    *shards = m.n;
    for (uint32_t j = 0; j < n; j++) {
        give(&m, at[j]);
    }
    assert_int_equal(m.n, 1);
    return most;
}

static void h2_a_read_runs_a_shard_not_every_stream(void **state) {
    (void)state;
    const uint32_t H = POOL_H2_SHARD_STREAMS;
    uint32_t shards;
    /* one cache: 10,000 streams on one connection, each read runs them all */
    assert_int_equal(h2_most_a_read_runs(MAXN, MAXN, &shards), MAXN);
    assert_int_equal(shards, 1);
    /* sharded: a read runs H at most, over ceil(N / H) connections */
    assert_int_equal(h2_most_a_read_runs(H, MAXN, &shards), H);
    assert_int_equal(shards, (MAXN + H - 1) / H);
    /* and a load a shard holds keeps one connection */
    assert_int_equal(h2_most_a_read_runs(H, H, &shards), H);
    assert_int_equal(shards, 1);
}

/* A shard in the middle that empties stays (its idle connections are
 * the next requests'); the top ones go once empty, shard 0 never. */
static void empty_top_shards_go(void **state) {
    (void)state;
    static struct model m;
    static uint32_t at[3 * K];
    model_init(&m, K);
    for (uint32_t j = 0; j < 3 * K; j++) {
        at[j] = take(&m);
    }
    assert_int_equal(m.n, 3);
    for (uint32_t j = K; j < 2 * K; j++) {
        give(&m, at[j]); /* shard 1 empty, shard 2 busy */
    }
    assert_int_equal(m.n, 3);
    assert_int_equal(take(&m), 1); /* the lowest with room, its idle reused */
    assert_int_equal(m.opened, 3 * K);
    give(&m, 1);
    for (uint32_t j = 2 * K; j < 3 * K; j++) {
        give(&m, at[j]);
    }
    assert_int_equal(m.n, 1); /* 2 and then 1 went */
    for (uint32_t j = 0; j < K; j++) {
        give(&m, at[j]);
    }
    assert_int_equal(m.n, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sequential_requests_reuse_one_connection),
        cmocka_unit_test(a_burst_walks_a_shard_not_every_connection),
        cmocka_unit_test(bounds_hold_however_requests_come_and_go),
        cmocka_unit_test(empty_top_shards_go),
        cmocka_unit_test(h2_a_read_runs_a_shard_not_every_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
