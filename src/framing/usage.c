/*
 * Usage figures read from a stream (usage.h): counts into the stream's
 * figures, Anthropic's usage object (shared by two profiles), the sampled
 * text, and the normalised reading the transports hand to the policy.
 */
#define _GNU_SOURCE /* memrchr */
#include "framing/usage.h"

#include <string.h>

void sg__usage_set(uint32_t *u, unsigned f, uint64_t v) {
    u[f] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
    u[SG__U_SDATA] |= SG__U_KNOWN << f;
}

void sg__usage_sampled(uint32_t *u, size_t len, uint64_t text) {
    uint64_t t = (uint64_t)u[SG__U_TEXT] + text;
    u[SG__U_TEXT] = t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
    uint64_t s = (u[SG__U_SDATA] & SG__U_SDATA_MAX) + (uint64_t)len;
    u[SG__U_SDATA] = (u[SG__U_SDATA] & ~(uint32_t)SG__U_SDATA_MAX) |
                     (uint32_t)(s < SG__U_SDATA_MAX ? s : SG__U_SDATA_MAX);
}

void sg__usage_text_of(uint32_t *u, const sg_item *item, const sg__jkey *keys,
                       unsigned nkeys) {
    sg__jfound f;
    sg__jscan_keys(item->data, item->data_len, keys, nkeys, (1u << nkeys) - 1, &f);
    sg__usage_sampled(u, item->data_len, f.text);
}

bool sg__usage_count(const char *p, size_t n, uint64_t *v) {
    if (n == 0 || n > 19) {
        return false; /* (20 digits may not fit: no provider counts so far) */
    }
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        x = x * 10 + (uint64_t)(p[i] - '0');
    }
    *v = x;
    return true;
}

bool sg__usage_count_at(const char *p, const char *end, uint64_t *v) {
    const char *q = p;
    while (q < end && *q >= '0' && *q <= '9') {
        q++;
    }
    if (q < end && (*q == '.' || *q == 'e' || *q == 'E')) {
        return false; /* a fraction or an exponent: no count */
    }
    return sg__usage_count(p, (size_t)(q - p), v);
}

bool sg__usage_last_count(const char *p, size_t n, const char *key, size_t klen,
                          uint64_t *v) {
    /* from each 'T' backwards: rarer in JSON than any lower-case letter */
    const size_t t = 10; /* "candidates|T|okenCount" */
    const char *end = p + n;
    const char *q = end;
    while ((q = memrchr(p, key[t], (size_t)(q - p))) != NULL) {
        const char *k = q - t;
        if (k > p && (size_t)(end - k) > klen + 1 && k[-1] == '"' &&
            memcmp(k, key, klen) == 0 && k[klen] == '"') {
            const char *c = sg__jcolon(k + klen + 1, end);
            return c != NULL && sg__usage_count_at(c, end, v);
        }
    }
    return false;
}

void sg__usage_fields(uint32_t *u, const char *p, size_t n, const sg__ufield *fields,
                      size_t nfields, unsigned mode) {
    for (size_t i = 0; i < nfields; i++) {
        const unsigned f = fields[i].f;
        if ((mode & SG__UF_FILL) && sg__usage_known(u, f)) {
            continue;
        }
        sg__jval v;
        uint64_t c = 0;
        if (sg__jscan_find(p, n, &fields[i].path, &v) && v.type == SG__JNUMBER) {
            if (sg__usage_count(v.p, v.n, &c)) {
                sg__usage_set(u, f, c);
            }
        } else if (mode & SG__UF_ABSENT_ZERO) {
            sg__usage_set(u, f, 0);
        }
    }
}

void sg__usage_anthropic(uint32_t *u, const char *p, size_t n, bool start) {
    /* Cumulative totals of the whole message: each given one overwrites
     * (the SDK's MessageStream does the same), none is ever added. */
    static const sg__ufield fields[] = {
        {SG__JPATH1("input_tokens"), SG__U_IN},
        {SG__JPATH1("cache_read_input_tokens"), SG__U_CREAD},
        {SG__JPATH1("cache_creation_input_tokens"), SG__U_CWRITE},
        {SG__JPATH2("output_tokens_details", "thinking_tokens"), SG__U_REASON},
        {SG__JPATH1("output_tokens"), SG__U_OUT},
    };
    u[SG__U_SDATA] |= SG__U_IN_EXCL;
    /* message_start's output_tokens is a placeholder (1 to 4), not a
     * count: a stream cut after it has its output estimated instead */
    sg__usage_fields(u, p, n, fields, start ? 4 : 5, 0);
}

/* Figure @f, or -1 when unknown. */
static int64_t figure(const uint32_t *u, unsigned f) {
    return sg__usage_known(u, f) ? (int64_t)u[f] : -1;
}

bool sg__stream_usage(const sg__stream *s, sg__usage_read *out) {
    out->input = out->output = out->cached = out->reasoning = -1;
    out->text_bytes = 0;
    if (s == NULL || !sg__usage_reader(s)) {
        return false;
    }
    const uint32_t *u = s->usage_;
    const uint32_t sdata = u[SG__U_SDATA] & SG__U_SDATA_MAX;
    /* the sample's text, in the proportion of all the data to its data */
    if (sdata > 0) {
        out->text_bytes = (uint64_t)u[SG__U_TEXT] * u[SG__U_DATA] / sdata;
    }
    out->cached = figure(u, SG__U_CREAD);
    out->reasoning = figure(u, SG__U_REASON);
    out->input = figure(u, SG__U_IN);
    if (out->input >= 0 && (u[SG__U_SDATA] & SG__U_IN_EXCL)) {
        int64_t cw = figure(u, SG__U_CWRITE);
        out->input += (out->cached > 0 ? out->cached : 0) + (cw > 0 ? cw : 0);
    }
    out->output = figure(u, SG__U_OUT);
    if (out->output >= 0 && (u[SG__U_SDATA] & SG__U_OUT_EXCL) && out->reasoning > 0) {
        out->output += out->reasoning;
    }
    return true;
}
