/*
 * config.c - routes: from flags (the one-route mode) or from a config file
 * (docs/sg-proxy.md, "CONFIGURATION"), read at start and again on SIGHUP.
 *
 * The file: lines "key = value"; "#" starts a comment; a section
 * "[route NAME]" starts a route.  The keys are the flags' names without
 * "--", with the same values ("idempotent = true" for a flag without
 * one); a route adds "prefix = /path".  Keys before the first route are
 * the proxy's own (listen, max-connections, ...), read at start only.
 *
 * A set of routes is counted: each request holds the set it was routed
 * by, so a reload that replaces the set never frees a route a stream in
 * flight still uses.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "proxy.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

int route_init(struct route *r, const char *name) {
    memset(r, 0, sizeof(*r));
    r->name = name;
    r->prefix = "";
    if (sg_op_options_new(&r->policy) != 0) {
        return -1;
    }
    sg_op_options_set_budget(r->policy, SG_SEC(60));
    sg_op_options_set_max_attempts(r->policy, 3);
    /* no retry budget unless asked for (as the library's default): its
     * ratio, when one is, the library's suggested one */
    r->rb_ratio = SG_RETRY_BUDGET_DEFAULT_TOKEN_RATIO;
    for (int i = 0; i <= MAX_FALLBACKS; i++) {
        r->price[i] = PRICE_NONE;
    }
    r->price_for = -1;
    return 0;
}

static void budget_unref(struct route_budget *rb) {
    if (rb != NULL && --rb->refs == 0) {
        sg_retry_budget_free(rb->b);
        free(rb);
    }
}

/* The route's bucket, full, into its policy: 0, or -1 out of memory. */
static int budget_new(struct route *r) {
    if (r->rb_tokens == 0) {
        return 0; /* none (retry-budget = off, or not given) */
    }
    r->rb = calloc(1, sizeof(*r->rb));
    if (r->rb == NULL || sg_retry_budget_new(&r->rb->b, r->rb_tokens, r->rb_ratio) != 0) {
        free(r->rb);
        r->rb = NULL;
        return -1;
    }
    r->rb->refs = 1;
    sg_op_options_set_retry_budget(r->policy, r->rb->b);
    return 0;
}

/* retry-budget (tokens, or off) and retry-budget-ratio: 0, 1 when @name is
 * neither, -1 with the reason in @err. */
static int budget_option(struct route *r, const char *name, const char *arg, char *err,
                         size_t errlen) {
    if (strcmp(name, "retry-budget") == 0) {
        uint64_t n;
        if (arg != NULL && strcmp(arg, "off") == 0) {
            r->rb_tokens = 0;
            return 0;
        }
        if (arg == NULL || parse_count(arg, SG_RETRY_BUDGET_MAX_TOKENS, &n) != 0 ||
            n == 0) {
            return ERR("retry-budget takes 1 to %d tokens or off, not '%s'",
                       SG_RETRY_BUDGET_MAX_TOKENS, arg ? arg : "");
        }
        r->rb_tokens = (uint32_t)n;
        return 0;
    }
    if (strcmp(name, "retry-budget-ratio") == 0) {
        char *end = NULL;
        double v = arg != NULL ? strtod(arg, &end) : 0;
        if (arg == NULL || end == arg || *end != '\0' || !(v >= 0.001 && v <= 1.0)) {
            return ERR("retry-budget-ratio takes 0.001 to 1, not '%s'", arg ? arg : "");
        }
        r->rb_ratio = v;
        return 0;
    }
    return 1;
}

/* price-in, price-out, price-cached: for the endpoint named before it
 * (the upstream, or the fallback just above).  0, 1 when @name is none of
 * them, -1 with the reason in @err. */
static int route_price(struct route *r, const char *name, const char *arg, char *err,
                       size_t errlen) {
    struct price scratch = PRICE_NONE;
    int rv = price_option(r->price_for >= 0 ? &r->price[r->price_for] : &scratch, name,
                          arg, err, errlen);
    if (rv == 0 && r->price_for < 0) {
        return ERR("%s is the price of the upstream or fallback named before it: give "
                   "upstream (or fallback) first",
                   name);
    }
    return rv;
}

/* A header line a fallback sends instead of the client's: "Name: value",
 * a token name (not one of the connection's own), a value of printable
 * bytes.  True when it is one. */
static bool header_line_ok(const char *line) {
    static const char *const own[] = {
        "host",    "content-length", "transfer-encoding", "connection", "te",
        "upgrade", "keep-alive",     "proxy-connection",  "expect"};
    size_t n = 0;
    while (line[n] != '\0' && line[n] != ':') {
        unsigned char ch = (unsigned char)line[n];
        if (ch <= ' ' || ch >= 0x7f || strchr("\"(),/;<=>?@[\\]{}", ch) != NULL) {
            return false;
        }
        n++;
    }
    if (n == 0 || line[n] != ':') {
        return false;
    }
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        if (strlen(own[i]) == n && strncasecmp(line, own[i], n) == 0) {
            return false;
        }
    }
    for (const char *v = line + n + 1; *v != '\0'; v++) {
        if (((unsigned char)*v < ' ' && *v != '\t') || *v == 0x7f) {
            return false;
        }
    }
    return true;
}

static int route_profile(const char *arg, const char **profile, sg_stream_config *framing,
                         char *err, size_t errlen) {
    sg_stream_config f;
    sg_stream_config_init(&f);
    if (arg == NULL || sg_profile_framing(arg, &f) != 0) {
        return ERR("profile takes openai, openai-responses, anthropic, gemini, "
                   "ollama, bedrock-converse or bedrock-invoke, not '%s'",
                   arg != NULL ? arg : "");
    }
    *profile = arg;
    *framing = f;
    return 0;
}

/* header, model and profile: the fallback's named just before
 * (docs/sg-proxy.md, "FALLBACKS") - a profile only once the route has its
 * own (a route's profile given after its fallbacks is the route's, as it
 * always was).  0, 1 when @name is none of them, -1 with the reason in
 * @err; the error never repeats a header's value (a credential). */
static int fallback_option(struct route *r, const char *name, const char *arg, char *err,
                           size_t errlen) {
    bool after = r->nfallback > 0 && r->price_for == r->nfallback;
    if (strcmp(name, "profile") == 0) {
        if (!after || r->profile == NULL) {
            return 1; /* the route's */
        }
        int i = r->nfallback - 1;
        return route_profile(arg, &r->fb_profile[i], &r->fb_framing[i], err, errlen);
    }
    bool header = strcmp(name, "header") == 0;
    if (!header && strcmp(name, "model") != 0) {
        return 1;
    }
    if (!after) {
        return ERR("%s is the fallback's named before it: give fallback first", name);
    }
    int i = r->nfallback - 1;
    if (arg == NULL) {
        return ERR("%s takes a value", name);
    }
    if (header) {
        if (!header_line_ok(arg)) {
            return ERR("header takes \"Name: value\" (a token name, not the "
                       "connection's own; printable value)");
        }
        if (r->fb_nheader[i] == FB_MAX_HEADERS) {
            return ERR("at most %d header lines a fallback", FB_MAX_HEADERS);
        }
        r->fb_header[i][r->fb_nheader[i]++] = arg;
        return 0;
    }
    size_t n = strlen(arg);
    for (size_t k = 0; k < n; k++) {
        if ((unsigned char)arg[k] < ' ' || arg[k] == 0x7f) {
            n = 0; /* a control character: refused below */
        }
    }
    if (n == 0 || n > FB_MODEL_MAX) {
        return ERR("model takes 1 to %d bytes, no control character", FB_MODEL_MAX);
    }
    r->fb_model[i] = arg;
    r->any_model = true;
    return 0;
}

/* Each endpoint's prices hold what a price needs, and go to the route's
 * policy (endpoint 0 the upstream, i fallback i, as upstream.c adds
 * them): 0, or -1 with the reason in @err. */
static int prices_set(struct route *r, char *err, size_t errlen) {
    for (int i = 0; i <= r->nfallback; i++) {
        char why[128];
        char url[160];
        if (price_check(&r->price[i], "", why, sizeof(why)) != 0) {
            masked_url(url, sizeof(url), i == 0 ? r->upstream : r->fallback[i - 1], true);
            return ERR("route %s: %s %s: %s", r->name, i == 0 ? "upstream" : "fallback",
                       url, why);
        }
        if (price_apply(r->policy, (uint32_t)i, &r->price[i]) != 0) {
            return ERR("route %s: out of memory for its prices", r->name);
        }
    }
    return 0;
}

/* scheme://host[:port][/path] without a trailing '/', and nothing after
 * the path: the client's target is appended to it. */
static int upstream_url(const char *u, size_t *len) {
    if (strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
        return -1;
    }
    if (strchr(u, '?') != NULL || strchr(u, '#') != NULL) {
        return -1;
    }
    size_t n = strlen(u);
    while (n > 0 && u[n - 1] == '/') {
        n--;
    }
    *len = n;
    return 0;
}

static bool is_true(const char *v) {
    return v == NULL || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0 ||
           strcmp(v, "1") == 0;
}

/* The duration options of a route: their setters. */
static int set_clock(struct route *r, const char *name, int64_t d) {
    sg_op_options *po = r->policy;
    if (strcmp(name, "budget") == 0) {
        r->budget = d;
        return sg_op_options_set_budget(po, d);
    }
    if (strcmp(name, "first-item") == 0) {
        return sg_op_options_set_first_item_timeout(po, d);
    }
    if (strcmp(name, "idle") == 0) {
        return sg_op_options_set_idle_timeout(po, d);
    }
    if (strcmp(name, "stream-total") == 0) {
        return sg_op_options_set_stream_timeout(po, d);
    }
    if (strcmp(name, "connect-timeout") == 0) {
        return sg_op_options_set_connect_timeout(po, d);
    }
    if (strcmp(name, "attempt-timeout") == 0) {
        return sg_op_options_set_attempt_timeout(po, d);
    }
    if (strcmp(name, "floor") == 0) {
        r->floor = d;
        return sg_op_options_set_floor(po, d);
    }
    if (strcmp(name, "backoff-base") == 0) {
        r->backoff_base = d;
        return 0;
    }
    if (strcmp(name, "backoff-max") == 0) {
        r->backoff_max = d;
        return 0;
    }
    return 1;
}

/* hedge-after (a duration, or auto[:Q][,D]: learned from first tokens)
 * and order: 0, 1 when @name is neither, -1 with the reason in @err. */
static int first_token_option(struct route *r, const char *name, const char *arg,
                              char *err, size_t errlen) {
    if (strcmp(name, "hedge-after") == 0) {
        struct hedge_after h;
        if (arg == NULL || parse_hedge_after(arg, &h) != 0) {
            return ERR("hedge-after takes a duration or auto[:Q][,D] (Q from 0.5 to "
                       "0.999), not '%s'",
                       arg ? arg : "");
        }
        r->hedge_after = h.fixed;
        (void)sg_op_options_set_hedge_auto(r->policy, h.learned);
        (void)sg_op_options_set_hedge_quantile(r->policy, h.q);
        return 0;
    }
    if (strcmp(name, "order") == 0) {
        sg_endpoint_order order;
        if (arg == NULL || parse_order(arg, &order) != 0) {
            return ERR("order takes configured or first_token, not '%s'", arg ? arg : "");
        }
        (void)sg_op_options_set_endpoint_order(r->policy, order);
        return 0;
    }
    return 1;
}

int route_option(struct route *r, const char *name, const char *arg, char *err,
                 size_t errlen) {
    int64_t d;
    uint64_t n;
    int taken = budget_option(r, name, arg, err, errlen);
    if (taken == 1) {
        taken = first_token_option(r, name, arg, err, errlen);
    }
    if (taken != 1) {
        return taken;
    }
    if (strncmp(name, "price-", 6) == 0) {
        return route_price(r, name, arg, err, errlen);
    }
    taken = fallback_option(r, name, arg, err, errlen);
    if (taken != 1) {
        return taken;
    }
    if (strcmp(name, "upstream") == 0) {
        r->price_for = 0;
        r->upstream = arg;
        if (upstream_url(arg, &r->upstream_len) != 0) {
            return ERR("upstream takes http(s)://host[:port][/path], not '%s'", arg);
        }
        return 0;
    }
    if (strcmp(name, "fallback") == 0) {
        if (r->nfallback == MAX_FALLBACKS) {
            return ERR("at most %d fallbacks", MAX_FALLBACKS);
        }
        if (upstream_url(arg, &r->fallback_len[r->nfallback]) != 0) {
            return ERR("fallback takes http(s)://host[:port][/path], not '%s'", arg);
        }
        r->fallback[r->nfallback++] = arg;
        r->price_for = r->nfallback;
        return 0;
    }
    if (strcmp(name, "profile") == 0) {
        return route_profile(arg, &r->profile, &r->framing, err, errlen);
    }
    if (strcmp(name, "prefix") == 0) {
        if (arg[0] != '/' || strchr(arg, '?') != NULL) {
            return ERR("prefix takes a path starting with '/', not '%s'", arg);
        }
        r->prefix = arg;
        size_t l = strlen(arg);
        while (l > 0 && arg[l - 1] == '/') {
            l--; /* "/openai/" is "/openai"; "/" matches everything */
        }
        r->prefix_len = l;
        return 0;
    }
    if (strcmp(name, "cacert") == 0) {
        if (access(arg, R_OK) != 0) {
            return ERR("cacert: cannot read '%s': %s", arg, strerror(errno));
        }
        r->cafile = arg;
        return 0;
    }
    if (strcmp(name, "include-usage") == 0) {
        r->include_usage = is_true(arg);
        return 0;
    }
    if (strcmp(name, "idempotent") == 0) {
        r->idempotent = is_true(arg);
        sg_op_options_set_idempotent(r->policy, r->idempotent);
        return 0;
    }
    if (strcmp(name, "attempts") == 0) {
        if (arg == NULL || parse_count(arg, 1000, &n) != 0 || n == 0 ||
            sg_op_options_set_max_attempts(r->policy, (uint32_t)n) != 0) {
            return ERR("attempts takes a number from 1 to 1000, not '%s'",
                       arg ? arg : "");
        }
        return 0;
    }
    if (strcmp(name, "max-hedges") == 0) {
        if (arg == NULL || parse_count(arg, SG_OP_MAX_HEDGES, &n) != 0 || n == 0) {
            return ERR("max-hedges takes 1 to %d, not '%s'", SG_OP_MAX_HEDGES,
                       arg ? arg : "");
        }
        r->max_hedges = (uint32_t)n;
        return 0;
    }
    if (strcmp(name, "max-items") == 0 || strcmp(name, "max-bytes") == 0) {
        if (arg == NULL || parse_count(arg, UINT64_MAX, &n) != 0 || n == 0) {
            return ERR("%s takes a count, not '%s'", name, arg ? arg : "");
        }
        return name[4] == 'i' ? sg_op_options_set_max_items(r->policy, n)
                              : sg_op_options_set_max_bytes(r->policy, n);
    }
    if (arg != NULL && parse_duration(arg, &d) == 0) {
        int rv = set_clock(r, name, d);
        if (rv <= 0) {
            return rv == 0 ? 0 : ERR("%s: a duration out of range: '%s'", name, arg);
        }
    } else if (set_clock(r, name, 1) == 0) {
        return ERR("%s takes a positive duration like 300ms or 2s, not '%s'", name,
                   arg ? arg : "");
    }
    return 1; /* not a route's option */
}

int route_finish(struct route *r, char *err, size_t errlen) {
    if (r->upstream == NULL || r->profile == NULL) {
        return ERR("route %s: upstream and profile are required", r->name);
    }
    /* no TLS on any endpoint (upstream.c: no CA paths, the shared read
     * buffer, the shards from the first request) */
    r->plain = strncasecmp(r->upstream, "http://", 7) == 0;
    for (int i = 0; r->plain && i < r->nfallback; i++) {
        r->plain = strncasecmp(r->fallback[i], "http://", 7) == 0;
    }
    if (set_backoff(r->policy, r->backoff_base, r->backoff_max) != 0) {
        return ERR("route %s: backoff-max must be at least backoff-base", r->name);
    }
    if (r->floor > 0 && r->floor >= (r->budget > 0 ? r->budget : SG_SEC(60))) {
        return ERR("route %s: floor must be below the budget (every request would be "
                   "refused)",
                   r->name);
    }
    if (prices_set(r, err, errlen) != 0) {
        return -1;
    }
    if (r->include_usage && strcmp(r->profile, "openai") != 0) {
        return ERR("route %s: include-usage asks OpenAI Chat Completions for its usage "
                   "chunk: it needs profile openai, not %s",
                   r->name, r->profile);
    }
    for (int i = 0; r->include_usage && i < r->nfallback; i++) {
        if (r->fb_profile[i] != NULL && strcmp(r->fb_profile[i], "openai") != 0) {
            return ERR("route %s: include-usage asks every endpoint for OpenAI's usage "
                       "chunk: fallback %d needs profile openai, not %s",
                       r->name, i + 1, r->fb_profile[i]);
        }
    }
    if (r->max_hedges > 0 && r->hedge_after == 0) {
        return ERR("route %s: max-hedges needs hedge-after", r->name);
    }
    if (r->hedge_after > 0) {
        if (!r->idempotent) {
            return ERR("route %s: hedge-after repeats requests: it needs idempotent",
                       r->name);
        }
        if (sg_op_options_set_hedging(r->policy, r->hedge_after,
                                      r->max_hedges ? r->max_hedges : 1) != 0) {
            return ERR("route %s: hedge-after/max-hedges out of range", r->name);
        }
    }
    if (budget_new(r) != 0) {
        return ERR("route %s: out of memory for its retry budget", r->name);
    }
    return 0;
}

/* ------------------------------------------------------------- a set */

struct routes *routes_new(void) {
    struct routes *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        s->refs = 1; /* the proxy's */
    }
    return s;
}

void routes_unref(struct routes *s) {
    if (s != NULL && --s->refs == 0) {
        for (int i = 0; i < s->n; i++) {
            budget_unref(s->r[i].rb);
            sg_op_options_free(s->r[i].policy);
        }
        free(s->text);
        free(s);
    }
}

void routes_keep_budgets(struct routes *next, const struct routes *prev) {
    for (int i = 0; i < next->n; i++) {
        struct route *r = &next->r[i];
        for (int k = 0; k < prev->n && r->rb != NULL; k++) {
            const struct route *o = &prev->r[k];
            if (strcmp(o->name, r->name) == 0 && o->rb != NULL &&
                o->rb_tokens == r->rb_tokens && o->rb_ratio == r->rb_ratio) {
                budget_unref(r->rb);
                r->rb = o->rb;
                r->rb->refs++;
                sg_op_options_set_retry_budget(r->policy, r->rb->b);
            }
        }
    }
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') {
        s++;
    }
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) {
        *--e = '\0';
    }
    return s;
}

struct routes *routes_load(const char *path, global_option_fn global, void *ud, char *err,
                           size_t errlen) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct routes *s = routes_new();
    size_t cap = 0;
    size_t len = 0;
    char chunk[4096];
    size_t got;
    while (s != NULL && (got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (len + got + 1 > (size_t)1 << 20) {
            snprintf(err, errlen, "%s: larger than 1 MiB", path);
            routes_unref(s);
            s = NULL;
            break;
        }
        if (len + got + 1 > cap) {
            cap = (len + got + 1) * 2;
            char *t = realloc(s->text, cap);
            if (t == NULL) {
                routes_unref(s);
                s = NULL;
                break;
            }
            s->text = t;
        }
        memcpy(s->text + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (s == NULL) {
        if (err[0] == '\0') {
            snprintf(err, errlen, "%s: out of memory", path);
        }
        return NULL;
    }
    if (s->text == NULL) {
        s->text = calloc(1, 1);
    } else {
        s->text[len] = '\0';
    }
    struct route *cur = NULL;
    int lineno = 0;
    /* line by line, empty ones counted too (strtok would skip them and the
     * error would name the wrong line) */
    for (char *line = s->text, *next = NULL; line != NULL; line = next) {
        char *eol = strchr(line, '\n');
        next = eol != NULL ? eol + 1 : NULL;
        if (eol != NULL) {
            *eol = '\0';
        }
        if (next == NULL && *line == '\0') {
            break; /* after the last newline */
        }
        lineno++;
        char *hash = strchr(line, '#');
        if (hash != NULL) {
            *hash = '\0';
        }
        line = trim(line);
        if (*line == '\0') {
            continue;
        }
        char msg[300] = "";
        int rv = 0;
        if (line[0] == '[') {
            char *end = strchr(line, ']');
            if (end == NULL || strncmp(line, "[route ", 7) != 0 || end[1] != '\0') {
                snprintf(msg, sizeof(msg), "a section is [route NAME]");
                rv = -1;
            } else if (cur != NULL && route_finish(cur, msg, sizeof(msg)) != 0) {
                rv = -1;
            } else if (s->n == MAX_ROUTES) {
                snprintf(msg, sizeof(msg), "at most %d routes", MAX_ROUTES);
                rv = -1;
            } else {
                *end = '\0';
                char *name = trim(line + 7);
                size_t nl = strlen(name);
                bool ok = nl > 0 && nl < 64;
                for (size_t k = 0; k < nl && ok; k++) {
                    char ch = name[k];
                    ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                         (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.';
                }
                for (int k = 0; k < s->n && ok; k++) {
                    ok = strcmp(s->r[k].name, name) != 0;
                }
                if (!ok) {
                    snprintf(msg, sizeof(msg),
                             "a route's name is 1 to 63 of A-Z a-z 0-9 _ - ., once");
                    rv = -1;
                } else {
                    cur = &s->r[s->n++];
                    if (route_init(cur, name) != 0) {
                        snprintf(msg, sizeof(msg), "out of memory");
                        rv = -1;
                    }
                }
            }
        } else {
            char *eq = strchr(line, '=');
            char *key = line;
            char *val = NULL;
            if (eq != NULL) {
                *eq = '\0';
                val = trim(eq + 1);
                key = trim(key);
            }
            /* only a flag may stand alone: every other key takes a value */
            if (val == NULL && strcmp(key, "idempotent") != 0 &&
                strcmp(key, "include-usage") != 0 && strcmp(key, "allow-remote") != 0) {
                snprintf(msg, sizeof(msg), "'%s' takes a value: %s = VALUE", key, key);
                rv = -1;
            } else if (cur != NULL) {
                rv = route_option(cur, key, val, msg, sizeof(msg));
                if (rv == 1) {
                    snprintf(msg, sizeof(msg), "'%s' is not an option of a route", key);
                    rv = -1;
                }
            } else {
                rv = global != NULL ? global(ud, key, val, msg, sizeof(msg)) : 0;
                if (rv == 1) {
                    snprintf(msg, sizeof(msg),
                             "'%s' is not an option (before the first [route NAME])",
                             key);
                    rv = -1;
                }
            }
        }
        if (rv != 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, msg);
            routes_unref(s);
            return NULL;
        }
    }
    char msg[300] = "";
    if (cur != NULL && route_finish(cur, msg, sizeof(msg)) != 0) {
        snprintf(err, errlen, "%s: %s", path, msg);
        routes_unref(s);
        return NULL;
    }
    if (s->n == 0) {
        snprintf(err, errlen, "%s: no [route NAME]", path);
        routes_unref(s);
        return NULL;
    }
    return s;
}
