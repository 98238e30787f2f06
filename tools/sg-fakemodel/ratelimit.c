/*
 * The rate limiter and its headers (ratelimit.h).  A fixed window rather
 * than a token bucket: its reset is the one instant every figure frees
 * at, so a header that says "reset in 734ms" is exactly true, and a test
 * can hold a client to it.
 */
#include "ratelimit.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define NS_PER_MS 1000000LL
/* Spent figures saturate here: a dimension without a limit adds up forever. */
#define USED_MAX (INT64_MAX / 4)

const char *sg_fm_rl_dim_name(sg_fm_rl_dim d) {
    switch (d) {
    case SG_FM_RL_REQUESTS:
        return "requests";
    case SG_FM_RL_TOKENS:
        return "tokens";
    case SG_FM_RL_INPUT:
        return "input_tokens";
    case SG_FM_RL_OUTPUT:
        return "output_tokens";
    case SG_FM_RL_DIMS:
    default:
        return "unknown";
    }
}

void sg_fm_rl_cost(const sg_fm_scenario *s, int64_t cost[SG_FM_RL_DIMS]) {
    cost[SG_FM_RL_REQUESTS] = 1;
    cost[SG_FM_RL_INPUT] = s->prompt_tokens > 0 ? s->prompt_tokens : 0;
    cost[SG_FM_RL_OUTPUT] = s->n + s->reasoning_tokens;
    cost[SG_FM_RL_TOKENS] = cost[SG_FM_RL_INPUT] + cost[SG_FM_RL_OUTPUT];
}

int sg_fm_rl_judge(sg_fm_map *limiters, const char *key, const sg_fm_scenario *s,
                   int64_t now, sg_fm_rl_verdict *v) {
    sg_fm_rl_window *w = sg_fm_map_get(limiters, key);
    if (w == NULL) {
        return -1;
    }
    if (w->window_end <= now) {
        /* the last window is over: everything frees at once */
        memset(w, 0, sizeof(*w));
        w->window_ms = s->rl_window_ms;
        w->window_end = now + s->rl_window_ms * NS_PER_MS;
    }
    memset(v, 0, sizeof(*v));
    v->style = sg_fm_scenario_rl_style(s);
    v->window_ms = w->window_ms;
    v->reset_ns = w->window_end - now;
    v->admitted = 1;
    sg_fm_rl_cost(s, v->requested);
    for (int d = SG_FM_RL_DIMS - 1; d >= 0; d--) {
        v->limit[d] = s->rl_limit[d];
        if (v->limit[d] > 0 && w->used[d] + v->requested[d] > v->limit[d]) {
            v->admitted = 0;
            v->over = (sg_fm_rl_dim)d; /* the first one, as d counts down */
        }
    }
    for (int d = 0; d < SG_FM_RL_DIMS; d++) {
        if (v->admitted) {
            w->used[d] = w->used[d] > USED_MAX - v->requested[d]
                             ? USED_MAX
                             : w->used[d] + v->requested[d];
        }
        v->used[d] = w->used[d];
    }
    return 0;
}

size_t sg_fm_go_duration(int64_t ms, char *out, size_t cap) {
    if (ms < 1000) {
        /* Go: "0s" for zero, else the largest unit below a second */
        return (size_t)snprintf(out, cap, ms <= 0 ? "0s" : "%lldms", (long long)ms);
    }
    long long h = ms / 3600000;
    long long m = ms / 60000 % 60;
    long long sec = ms / 1000 % 60;
    char frac[8] = "";
    if (ms % 1000 != 0) {
        /* ".fff" without its trailing zeros: 52.8s, 33.023s */
        snprintf(frac, sizeof(frac), ".%03lld", (long long)(ms % 1000));
        for (size_t i = strlen(frac) - 1; frac[i] == '0'; i--) {
            frac[i] = '\0';
        }
    }
    if (h > 0) {
        return (size_t)snprintf(out, cap, "%lldh%lldm%lld%ss", h, m, sec, frac);
    }
    if (m > 0) {
        return (size_t)snprintf(out, cap, "%lldm%lld%ss", m, sec, frac);
    }
    return (size_t)snprintf(out, cap, "%lld%ss", sec, frac);
}

size_t sg_fm_rfc3339(int64_t unix_s, char *out, size_t cap) {
    time_t t = (time_t)unix_s;
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL) {
        return (size_t)snprintf(out, cap, "1970-01-01T00:00:00Z");
    }
    return (size_t)snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                            tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

/* Milliseconds until the window ends, rounded up: a client that waits them
 * out comes back when the window has ended, never before. */
static int64_t reset_ms(const sg_fm_rl_verdict *v) {
    return (v->reset_ns + NS_PER_MS - 1) / NS_PER_MS;
}

/* OpenAI's and Anthropic's header names, by dimension: limit, remaining,
 * reset. */
static const char *const openai_names[SG_FM_RL_DIMS][3] = {
    {"x-ratelimit-limit-requests", "x-ratelimit-remaining-requests",
     "x-ratelimit-reset-requests"},
    {"x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens",
     "x-ratelimit-reset-tokens"},
    {NULL, NULL, NULL}, /* OpenAI has no input or output limits of their own */
    {NULL, NULL, NULL},
};
static const char *const anthropic_names[SG_FM_RL_DIMS][3] = {
    {"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
     "anthropic-ratelimit-requests-reset"},
    {"anthropic-ratelimit-tokens-limit", "anthropic-ratelimit-tokens-remaining",
     "anthropic-ratelimit-tokens-reset"},
    {"anthropic-ratelimit-input-tokens-limit",
     "anthropic-ratelimit-input-tokens-remaining",
     "anthropic-ratelimit-input-tokens-reset"},
    {"anthropic-ratelimit-output-tokens-limit",
     "anthropic-ratelimit-output-tokens-remaining",
     "anthropic-ratelimit-output-tokens-reset"},
};

size_t sg_fm_rl_headers(const sg_fm_rl_verdict *v, int64_t unix_now_ns,
                        sg_fm_rl_header *out) {
    const int openai = v->style != SG_FM_RL_STYLE_ANTHROPIC;
    const char *const(*names)[3] = openai ? openai_names : anthropic_names;
    int64_t ms = reset_ms(v);
    /* the reset: a duration (OpenAI) or the window's end, rounded up to
     * the second, on the server's wall clock (Anthropic) */
    char reset[40];
    if (openai) {
        sg_fm_go_duration(ms, reset, sizeof(reset));
    } else {
        int64_t end_ns = unix_now_ns + v->reset_ns;
        int64_t end_s = end_ns / 1000000000 + (end_ns % 1000000000 != 0);
        sg_fm_rfc3339(end_s, reset, sizeof(reset));
    }
    size_t n = 0;
    for (int d = 0; d < SG_FM_RL_DIMS; d++) {
        if (v->limit[d] <= 0 || names[d][0] == NULL) {
            continue;
        }
        int64_t left = v->limit[d] - v->used[d];
        out[n].name = names[d][0];
        snprintf(out[n++].value, sizeof(out->value), "%lld", (long long)v->limit[d]);
        out[n].name = names[d][1];
        snprintf(out[n++].value, sizeof(out->value), "%lld",
                 (long long)(left > 0 ? left : 0));
        out[n].name = names[d][2];
        snprintf(out[n++].value, sizeof(out->value), "%s", reset);
    }
    if (!v->admitted) {
        out[n].name = "retry-after";
        snprintf(out[n++].value, sizeof(out->value), "%lld",
                 (long long)((ms + 999) / 1000));
        if (openai) {
            out[n].name = "retry-after-ms";
            snprintf(out[n++].value, sizeof(out->value), "%lld", (long long)ms);
        }
    }
    return n;
}

void sg_fm_rl_message(const sg_fm_rl_verdict *v, char *out, size_t cap) {
    char again[40];
    sg_fm_go_duration(reset_ms(v), again, sizeof(again));
    int64_t used_before = v->used[v->over]; /* a refusal spends nothing */
    snprintf(out, cap,
             "Rate limit reached for sg-fakemodel on %s per %lld ms: Limit %lld, Used "
             "%lld, Requested %lld. Please try again in %s.",
             sg_fm_rl_dim_name(v->over), (long long)v->window_ms,
             (long long)v->limit[v->over], (long long)used_before,
             (long long)v->requested[v->over], again);
}
