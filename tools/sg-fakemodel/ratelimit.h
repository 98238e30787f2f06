/*
 * The rate-limited upstream sg-fakemodel plays (docs/sg-fakemodel.md, "Rate
 * limits"): limiters of requests and tokens per fixed window, each a
 * record of a bounded name map, judged on every request that sets an rl_*
 * knob; and the providers' headers that say a limiter's state, OpenAI's
 * (x-ratelimit-*, durations as Go prints them) or Anthropic's
 * (anthropic-ratelimit-*, RFC 3339 instants).  libc only, and no clock:
 * every call takes the time, so the unit tests drive it by hand.
 *
 * One thread: the server's loop is the only caller, whatever the
 * connection or protocol, so the state is shared by all and locked by none.
 */
#ifndef SG_FAKEMODEL_RATELIMIT_H
#define SG_FAKEMODEL_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "namemap.h"
#include "scenario.h"

/* One limiter: its current window and what was spent in it. */
typedef struct {
    int64_t window_end; /* CLOCK_MONOTONIC ns; 0: none opened yet */
    int64_t window_ms;  /* its length: the rl_window of the request that opened it */
    int64_t used[SG_FM_RL_DIMS];
} sg_fm_rl_window;

/* The limiters of one process; rl_key names them. */
#define SG_FM_RL_MAP_INIT \
    { .record = sizeof(sg_fm_rl_window), .max = 10000 }

/* What a limiter made of one request, and what its headers say. */
typedef struct {
    int admitted;
    sg_fm_rl_dim over; /* refused: the first limit the request would pass */
    sg_fm_rl_style style;
    int64_t window_ms;                /* the window's length */
    int64_t limit[SG_FM_RL_DIMS];     /* the request's limits; 0: none */
    int64_t used[SG_FM_RL_DIMS];      /* spent in the window, this one included */
    int64_t requested[SG_FM_RL_DIMS]; /* what this request costs */
    int64_t reset_ns;                 /* from now until the window ends (> 0) */
} sg_fm_rl_verdict;

/*
 * What an answer to @s costs: 1 request; its input (prompt_tokens) and
 * output (n + reasoning_tokens) tokens, and their sum.
 */
void sg_fm_rl_cost(const sg_fm_scenario *s, int64_t cost[SG_FM_RL_DIMS]);

/*
 * Judges a request of scenario @s against the limiter @key of @limiters at
 * @now (CLOCK_MONOTONIC ns).  A window opens at the first request after
 * the last one ended and lasts that request's rl_window; the request is
 * admitted when,
 * for every limit it sets, what the window spent plus its cost stays
 * within the limit, and only then is its cost spent.  Returns 0, or -1
 * when out of memory (nothing judged).
 */
int sg_fm_rl_judge(sg_fm_map *limiters, const char *key, const sg_fm_scenario *s,
                   int64_t now, sg_fm_rl_verdict *v);

/* The most headers sg_fm_rl_headers writes. */
#define SG_FM_RL_MAX_HEADERS 14

typedef struct {
    const char *name; /* lowercase, a literal */
    char value[40];
} sg_fm_rl_header;

/*
 * The headers of verdict @v in its style, for each limit it sets (limit,
 * remaining, reset), and when it refused `retry-after` (whole seconds
 * until the window ends, rounded up) with, in OpenAI's style,
 * `retry-after-ms` (the milliseconds, rounded up).  @unix_now_ns is the
 * server's wall clock (Anthropic's resets are instants on it).  Returns
 * how many it wrote to @out (room for SG_FM_RL_MAX_HEADERS).
 */
size_t sg_fm_rl_headers(const sg_fm_rl_verdict *v, int64_t unix_now_ns,
                        sg_fm_rl_header *out);

/* The refusal's message, e.g. "Rate limit reached for sg-fakemodel on
 * requests per 1000 ms: Limit 2, Used 2, Requested 1. Please try again in
 * 734ms." (NUL-terminated, cut to @cap). */
void sg_fm_rl_message(const sg_fm_rl_verdict *v, char *out, size_t cap);

/* "requests", "tokens", "input_tokens", "output_tokens" */
const char *sg_fm_rl_dim_name(sg_fm_rl_dim d);

/* @ms as Go's time.Duration prints it ("0s", "20ms", "1s", "1.5s",
 * "6m0s", "2m52.8s", "1h0m0s"), what OpenAI's reset headers carry.
 * Returns the length written to @out (NUL-terminated, cap >= 32). */
size_t sg_fm_go_duration(int64_t ms, char *out, size_t cap);

/* @unix_s as RFC 3339 in UTC to the second ("2025-08-21T12:40:59Z"), what
 * Anthropic's reset headers carry.  Returns the length (cap >= 21). */
size_t sg_fm_rfc3339(int64_t unix_s, char *out, size_t cap);

#endif
