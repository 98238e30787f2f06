/*
 * The providers' rate-limit headers, read into an sg_op_ratelimit for
 * endpoint health (health_op.c): OpenAI's and Azure's x-ratelimit-*
 * (limits, remaining counts, resets as Go durations or bare seconds) and
 * Anthropic's anthropic-ratelimit-* (resets as RFC 3339 instants).
 * Sources: docs/design.md, "Endpoint health"; the spellings are the
 * providers' documented ones (tests/unit/policy_ratelimit_test.c).
 */
#include "internal.h"

#include <string.h>
#include <strings.h>

/* What a header says of its family. */
typedef enum rl_kind { RL_REMAINING, RL_RESET, RL_LIMIT } rl_kind;

/* One header name: its family and what it says. */
typedef struct rl_name {
    const char *name;
    int family;
    rl_kind kind;
} rl_name;

static const rl_name names[] = {
    {"x-ratelimit-remaining-requests", SG_RATELIMIT_REQUESTS, RL_REMAINING},
    {"x-ratelimit-reset-requests", SG_RATELIMIT_REQUESTS, RL_RESET},
    {"x-ratelimit-limit-requests", SG_RATELIMIT_REQUESTS, RL_LIMIT},
    {"x-ratelimit-remaining-tokens", SG_RATELIMIT_TOKENS, RL_REMAINING},
    {"x-ratelimit-reset-tokens", SG_RATELIMIT_TOKENS, RL_RESET},
    {"x-ratelimit-limit-tokens", SG_RATELIMIT_TOKENS, RL_LIMIT},
    {"anthropic-ratelimit-requests-remaining", SG_RATELIMIT_REQUESTS, RL_REMAINING},
    {"anthropic-ratelimit-requests-reset", SG_RATELIMIT_REQUESTS, RL_RESET},
    {"anthropic-ratelimit-requests-limit", SG_RATELIMIT_REQUESTS, RL_LIMIT},
    {"anthropic-ratelimit-tokens-remaining", SG_RATELIMIT_TOKENS, RL_REMAINING},
    {"anthropic-ratelimit-tokens-reset", SG_RATELIMIT_TOKENS, RL_RESET},
    {"anthropic-ratelimit-tokens-limit", SG_RATELIMIT_TOKENS, RL_LIMIT},
    {"anthropic-ratelimit-input-tokens-remaining", SG_RATELIMIT_INPUT_TOKENS,
     RL_REMAINING},
    {"anthropic-ratelimit-input-tokens-reset", SG_RATELIMIT_INPUT_TOKENS, RL_RESET},
    {"anthropic-ratelimit-input-tokens-limit", SG_RATELIMIT_INPUT_TOKENS, RL_LIMIT},
    {"anthropic-ratelimit-output-tokens-remaining", SG_RATELIMIT_OUTPUT_TOKENS,
     RL_REMAINING},
    {"anthropic-ratelimit-output-tokens-reset", SG_RATELIMIT_OUTPUT_TOKENS, RL_RESET},
    {"anthropic-ratelimit-output-tokens-limit", SG_RATELIMIT_OUTPUT_TOKENS, RL_LIMIT},
};

/* The unit at @v (ns per unit) and its length in *@n; 0 when none.  Go's
 * time.ParseDuration units: "µs" is U+00B5 (what Go prints) or U+03BC. */
static int64_t unit_at(const char *v, size_t len, size_t *n) {
    static const struct {
        const char *u;
        int64_t ns;
    } units[] = {
        {"ns", 1},
        {"us", SG_US(1)},
        {"\xc2\xb5s", SG_US(1)},
        {"\xce\xbcs", SG_US(1)},
        {"ms", SG_MS(1)},
        {"s", SG_SEC(1)},
        {"m", SG_SEC(60)},
        {"h", SG_SEC(3600)},
    };
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t k = strlen(units[i].u);
        if (len >= k && memcmp(v, units[i].u, k) == 0) {
            *n = k;
            return units[i].ns;
        }
    }
    return 0;
}

int sg__reset_duration_parse(const char *value, size_t len, int64_t *ns) {
    int64_t d = 0;
    if (len > 0 && sg__decimal(value, len, SG_SEC(1), &d) == len) {
        *ns = d; /* a bare number: seconds (Azure's "64") */
        return 0;
    }
    int64_t total = 0;
    size_t i = 0;
    while (i < len) {
        /* number unit: the number's extent first, then its unit */
        size_t j = i;
        while (j < len && ((value[j] >= '0' && value[j] <= '9') || value[j] == '.')) {
            j++;
        }
        size_t ulen = 0;
        const int64_t unit = j > i ? unit_at(value + j, len - j, &ulen) : 0;
        if (unit == 0 || sg__decimal(value + i, j - i, unit, &d) != j - i) {
            return SG_EMALFORMED;
        }
        total = sg_time_add(total, d);
        i = j + ulen;
    }
    if (len == 0) {
        return SG_EMALFORMED;
    }
    *ns = total > SG_DURATION_MAX ? SG_DURATION_MAX : total;
    return 0;
}

/* A remaining count or a limit: an integer, saturating; a negative one
 * says nothing (Azure's -1): 1 taken, 0 nothing to keep, SG_EMALFORMED. */
static int count_parse(const char *v, size_t len, int64_t *out) {
    bool neg = len > 0 && v[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == len) {
        return SG_EMALFORMED;
    }
    int64_t n = 0;
    for (; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') {
            return SG_EMALFORMED;
        }
        n = n > (INT64_MAX - 9) / 10 ? INT64_MAX : n * 10 + (v[i] - '0');
    }
    if (neg) {
        return 0;
    }
    *out = n;
    return 1;
}

int sg_op_ratelimit_header(sg_op_ratelimit *rl, const char *name, size_t name_len,
                           const char *value, size_t value_len) {
    if (rl == NULL || name == NULL || value == NULL) {
        return SG_EINVAL;
    }
    const rl_name *hit = NULL;
    const char c = (char)(name_len > 0 ? name[0] | 0x20 : 0);
    if (name_len < 24 || (c != 'x' && c != 'a')) {
        return 0; /* any other header, at once (the shortest of these: 24) */
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && hit == NULL; i++) {
        if (strlen(names[i].name) == name_len &&
            strncasecmp(names[i].name, name, name_len) == 0) {
            hit = &names[i];
        }
    }
    if (hit == NULL) {
        return 0;
    }
    const int f = hit->family;
    int64_t v = 0;
    if (hit->kind != RL_RESET) {
        int rc = count_parse(value, value_len, &v);
        if (rc == 1 && hit->kind == RL_LIMIT) {
            rl->limit[f] = v;
            rl->known |= SG_RATELIMIT_LIMIT(f);
        } else if (rc == 1) {
            rl->remaining[f] = v;
            rl->known |= SG_RATELIMIT_REMAINING(f);
        }
        return rc < 0 ? rc : 1;
    }
    /* an instant (it has a date: "YYYY-") or a duration */
    if (value_len > 4 && value[4] == '-') {
        if (sg__rfc3339_parse(value, value_len, &v) != 0) {
            return SG_EMALFORMED;
        }
        rl->reset_at_ms[f] = v;
        rl->known |= SG_RATELIMIT_RESET_AT(f);
        return 1;
    }
    if (sg__reset_duration_parse(value, value_len, &v) != 0) {
        return SG_EMALFORMED;
    }
    rl->reset_ns[f] = v;
    rl->known |= SG_RATELIMIT_RESET(f);
    return 1;
}
