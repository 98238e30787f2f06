/*
 * values.c - the values that options take.
 *
 * Durations ("250ms", "2s", "1.5s", "1m", "1h", "500us"; a bare number is
 * seconds), counts (digits only, bounded), and the body of -d @FILE (or
 * @- for stdin).  Each parser is strict and says only yes or no: the
 * caller, which knows the option, words the usage error (usage_error).
 * And what a message may show of what the operator typed: a URL with its
 * secrets masked, a header by its name alone.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "values.h"

/* Every bad argument in one shape, "PROG: ... (see --help)", and the usage
 * exit status (shared with sg-proxy, which names its own prog). */
int usage_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one line whatever the argument held: control bytes are shown as '?' */
    for (char *p = msg; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = '?';
        }
    }
    fprintf(stderr, "%s: %s (see --help)\n", prog, msg);
    return SG_TOOLS_EXIT_USAGE;
}

/* The decimal number @s starts with - digits with at most one point: no
 * sign, no exponent, no hex, no inf or nan (which strtod would take) -
 * into *@v; returns its length, 0 when @s starts with none. */
static size_t decimal(const char *s, double *v) {
    size_t digits = strspn(s, "0123456789");
    size_t len = digits;
    if (s[len] == '.') {
        size_t frac = strspn(s + len + 1, "0123456789");
        len += 1 + frac;
        digits += frac;
    }
    if (digits == 0) {
        return 0;
    }
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end == s + len && errno == 0 ? len : 0;
}

/* "250ms", "2s", "1.5s", "1m", "1h", "500us"; a bare number is seconds. */
int parse_duration(const char *s, int64_t *out) {
    double v;
    size_t len = decimal(s, &v);
    const char *end = s + len;
    if (len == 0 || (*end != '\0' && (*end < 'a' || *end > 'z')) || !(v > 0)) {
        return -1;
    }
    double scale;
    if (strcmp(end, "ms") == 0) {
        scale = 1e6;
    } else if (strcmp(end, "s") == 0 || *end == '\0') {
        scale = 1e9;
    } else if (strcmp(end, "m") == 0) {
        scale = 60e9;
    } else if (strcmp(end, "h") == 0) {
        scale = 3600e9;
    } else if (strcmp(end, "us") == 0) {
        scale = 1e3;
    } else {
        return -1;
    }
    double ns = v * scale;
    if (ns < 1 || ns > (double)SG_DURATION_MAX) {
        return -1;
    }
    *out = (int64_t)ns;
    return 0;
}

int parse_hedge_after(const char *s, struct hedge_after *out) {
    *out = (struct hedge_after){0, false, SG_HEDGE_DEFAULT_QUANTILE};
    if (strncmp(s, "auto", 4) != 0) {
        return parse_duration(s, &out->fixed);
    }
    out->learned = true;
    out->fixed = SG_TOOLS_HEDGE_FALLBACK;
    const char *p = s + 4;
    if (*p == ':') {
        size_t len = decimal(p + 1, &out->q);
        if (len == 0 || !(out->q >= 0.5 && out->q <= 0.999)) {
            return -1;
        }
        p += 1 + len;
    }
    if (*p == ',') {
        return parse_duration(p + 1, &out->fixed);
    }
    return *p == '\0' ? 0 : -1;
}

int hedge_apply(sg_op_options *o, const struct hedge_after *h, uint32_t max_hedges) {
    int rv = sg_op_options_set_hedging(o, h->fixed, max_hedges > 0 ? max_hedges : 1);
    if (rv == 0 && h->learned) {
        /* the quantile was checked when parsed: these cannot fail */
        (void)sg_op_options_set_hedge_auto(o, true);
        (void)sg_op_options_set_hedge_quantile(o, h->q);
    }
    return rv;
}

int parse_order(const char *s, sg_endpoint_order *out) {
    for (int i = 0; i < SG_ENDPOINT_ORDER_COUNT_; i++) {
        if (strcmp(s, sg_endpoint_order_name((sg_endpoint_order)i)) == 0) {
            *out = (sg_endpoint_order)i;
            return 0;
        }
    }
    return -1;
}

int parse_price(const char *s, double *out) {
    double v;
    size_t len = decimal(s, &v);
    if (len == 0 || s[len] != '\0' || !(v >= 0 && v <= SG_TOOLS_PRICE_MAX)) {
        return -1;
    }
    *out = v;
    return 0;
}

int price_option(struct price *p, const char *name, const char *arg, char *err,
                 size_t errlen) {
    double *slot = strcmp(name, "price-in") == 0       ? &p->in
                   : strcmp(name, "price-out") == 0    ? &p->out
                   : strcmp(name, "price-cached") == 0 ? &p->cached
                                                       : NULL;
    if (slot == NULL) {
        return 1;
    }
    if (arg == NULL || parse_price(arg, slot) != 0) {
        snprintf(err, errlen,
                 "%s takes a price per million tokens, a decimal number from 0 to "
                 "%.0f (digits with at most one point: 2.5, 0.075), not '%s'",
                 name, SG_TOOLS_PRICE_MAX, arg != NULL ? arg : "");
        return -1;
    }
    return 0;
}

int price_check(const struct price *p, const char *dashes, char *err, size_t errlen) {
    bool in = p->in >= 0;
    bool out = p->out >= 0;
    if (in == out && (in || p->cached < 0)) {
        return 0; /* none, or both */
    }
    if (!in && !out) {
        snprintf(err, errlen, "%sprice-cached needs %sprice-in and %sprice-out", dashes,
                 dashes, dashes);
    } else {
        snprintf(err, errlen, "%sprice-%s needs %sprice-%s", dashes, in ? "in" : "out",
                 dashes, in ? "out" : "in");
    }
    return -1;
}

int price_apply(sg_op_options *o, uint32_t endpoint, const struct price *p) {
    if (p->in < 0) {
        return 0; /* no price: no cost */
    }
    return sg_op_options_set_price(o, endpoint, p->in, p->out, p->cached);
}

const char *money(char *buf, size_t cap, double v) {
    /* to the nanounit, as the report writes a cost: 9 places, then the
     * zeros at the end (and a point left alone) taken off */
    int n = snprintf(buf, cap, "%.9f", v > 0 ? v : 0.0);
    if (n <= 0 || (size_t)n >= cap) {
        return buf;
    }
    char *e = buf + n;
    while (e[-1] == '0') {
        *--e = '\0';
    }
    if (e[-1] == '.') {
        e[-1] = '\0';
    }
    return buf;
}

int parse_count(const char *s, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') {
        return -1;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

/* NULL with errno set when the file cannot be opened or read whole (a
 * directory, an I/O error): never a body cut short. */
char *read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf != NULL && ferror(f)) {
        int saved = errno; /* fread's own (EISDIR, EIO) */
        free(buf);
        buf = NULL;
        errno = saved != 0 ? saved : EIO;
    }
    if (f != stdin) {
        int saved = errno;
        fclose(f);
        errno = saved;
    }
    *len = n;
    return buf;
}

/* Appends @p[0..@n) at *@d, within @end (one byte kept for the NUL). */
static void put(char **d, const char *end, const char *p, size_t n) {
    size_t room = (size_t)(end - *d) - 1;
    n = n < room ? n : room;
    memcpy(*d, p, n);
    *d += n;
}

const char *masked_url(char *buf, size_t size, const char *url, bool every_value) {
    char *d = buf;
    const char *end = buf + size;
    const char *p = url;
    /* the authority: after "scheme://" (a "://" before any '/', '?' or
     * '#'), else from the start (a URL without its scheme); it ends at the
     * first '/' - a password may hold '?' or '#' (libpq reads it to '@') */
    const char *auth = strstr(url, "://");
    auth = auth != NULL && (size_t)(auth - url) <= strcspn(url, "/?#") ? auth + 3 : url;
    size_t alen = strcspn(auth, "/");
    const char *at = NULL;
    for (const char *q = auth; q < auth + alen; q++) {
        at = *q == '@' ? q : at; /* the last one: a password may hold '@' */
    }
    const char *colon = at != NULL ? memchr(auth, ':', (size_t)(at - auth)) : NULL;
    if (colon != NULL) {
        put(&d, end, url, (size_t)(colon - url));
        put(&d, end, ":***", 4);
        p = at;
    }
    size_t plen = strcspn(p, "?#");
    put(&d, end, p, plen);
    p += plen;
    while (*p == '?' || *p == '&') { /* each parameter: its name, its value masked */
        put(&d, end, p, 1);
        p++;
        size_t nlen = strcspn(p, "=&#");
        /* password=, and libpq's sslpassword= too: any name ending so */
        bool secret =
            every_value || (nlen >= 8 && strncmp(p + nlen - 8, "password", 8) == 0);
        if (every_value && p[nlen] != '=' && nlen > 0) {
            put(&d, end, "***", 3); /* a bare value ("?sk-..."): no name to show */
        } else {
            put(&d, end, p, nlen);
        }
        p += nlen;
        if (*p == '=') {
            size_t vlen = strcspn(p + 1, "&#");
            if (secret) {
                put(&d, end, "=***", 4);
            } else {
                put(&d, end, p, vlen + 1);
            }
            p += vlen + 1;
        }
    }
    if (*p == '#') {
        put(&d, end, every_value ? "#***" : p, every_value ? 4 : strlen(p));
    }
    *d = '\0';
    return buf;
}

size_t header_name_len(const char *h) {
    size_t n = 0;
    while (n < 64 && h[n] != '\0' && h[n] != ':' && (unsigned char)h[n] > 0x20 &&
           h[n] != 0x7f) {
        n++;
    }
    return n;
}

int set_backoff(sg_op_options *o, int64_t base, int64_t cap) {
    if (base == 0 && cap == 0) {
        return 0; /* neither given: the library's own */
    }
    if (base == 0) {
        base = cap < SG_MS(100) ? cap : SG_MS(100);
    }
    if (cap == 0) {
        cap = base > SG_SEC(10) ? base : SG_SEC(10);
    }
    return sg_op_options_set_backoff(o, base, cap);
}

bool genai_names(const char *profile, const char **provider, const char **operation) {
    static const struct {
        const char *profile, *provider, *operation;
    } names[] = {
        {"openai", "openai", "chat"},
        {"openai-responses", "openai", "chat"},
        {"anthropic", "anthropic", "chat"},
        {"gemini", "gcp.gemini", "generate_content"},
        {"ollama", "ollama", "chat"},
        {"bedrock-converse", "aws.bedrock", "chat"},
        {"bedrock-invoke", "aws.bedrock", "chat"},
    };
    *provider = *operation = NULL;
    for (size_t i = 0; profile != NULL && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(profile, names[i].profile) == 0) {
            *provider = names[i].provider;
            *operation = names[i].operation;
            return true;
        }
    }
    return false;
}
