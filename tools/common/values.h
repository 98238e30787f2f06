/*
 * The values the programs' options take (values.c), shared by sg-stream
 * and sg-proxy: durations, counts, @FILE bodies, the backoff pair, and
 * what a message may show of what the operator typed.  Each parser is
 * strict and says only yes or no; the caller, which knows the option,
 * words the usage error.  Uses the public streamguard API only.
 */
#ifndef SG_TOOLS_VALUES_H
#define SG_TOOLS_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <streamguard/health.h>
#include <streamguard/policy.h>

/* The exit status of a usage error, the same in every program. */
#define SG_TOOLS_EXIT_USAGE 2

/* The prefix of every diagnostic: each program defines its own. */
extern const char *const prog;

/* Prints "PROG: ... (see --help)" on one line and returns
 * SG_TOOLS_EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) int usage_error(const char *fmt, ...);

/* "250ms", "2s", "1.5s", "1m", "1h", "500us"; a bare number is seconds. */
int parse_duration(const char *s, int64_t *out);
int parse_count(const char *s, uint64_t max, uint64_t *out);

/* The most a price per million tokens may be: past it, a typo. */
#define SG_TOOLS_PRICE_MAX 1e9
/* A price per million tokens: a decimal number (digits with at most one
 * point) from 0 to SG_TOOLS_PRICE_MAX. */
int parse_price(const char *s, double *out);
/* An endpoint's prices per million tokens (--price-in, --price-out,
 * --price-cached, for sg_op_options_set_price): each -1 until given. */
struct price {
    double in, out, cached;
};
#define PRICE_NONE ((struct price){-1, -1, -1})
/* Option @name ("price-in", "price-out", "price-cached": no "--") with
 * @arg into @p: 0, 1 when @name is none of them, or -1 with the reason,
 * starting with @name, in @err. */
int price_option(struct price *p, const char *name, const char *arg, char *err,
                 size_t errlen);
/* Whether @p holds what a price needs - nothing, or both price-in and
 * price-out (price-cached is the input's unless given): 0, or -1 with
 * what is missing in @err, each option named with @dashes before it. */
int price_check(const struct price *p, const char *dashes, char *err, size_t errlen);
/* @p (when given: price-in set) as endpoint @endpoint's prices in @o:
 * 0, or sg_op_options_set_price's code. */
int price_apply(sg_op_options *o, uint32_t endpoint, const struct price *p);
/* A cost @v as the report writes one: to 9 decimal places at most, no
 * zeros at the end, no exponent ("0.00026", "3", "0" for none or less);
 * into @buf (@cap bytes: 64 hold any cost of int64_t counts at prices
 * up to SG_TOOLS_PRICE_MAX), which it returns. */
const char *money(char *buf, size_t cap, double v);
char *read_file(const char *path, size_t *len);

/* The fixed delay --hedge-after auto falls back to when it names none. */
#define SG_TOOLS_HEDGE_FALLBACK SG_SEC(1)
/* A hedge delay as --hedge-after (and a route's hedge-after) takes it: a
 * duration (fixed), or "auto[:Q][,D]" - learned from the endpoint's first
 * tokens at quantile Q (0.5 to 0.999; SG_HEDGE_DEFAULT_QUANTILE when not
 * given), falling back to D (SG_TOOLS_HEDGE_FALLBACK when not given). */
struct hedge_after {
    int64_t fixed; /* the fixed delay, or the learned one's fallback */
    bool learned;
    double q;
};
int parse_hedge_after(const char *s, struct hedge_after *out);
/* @h into @o, with @max_hedges (0: 1): hedging, and the learned delay.
 * sg_op_options_set_hedging's result. */
int hedge_apply(sg_op_options *o, const struct hedge_after *h, uint32_t max_hedges);
/* "configured" or "first_token" (--order, a route's order). */
int parse_order(const char *s, sg_endpoint_order *out);
/* --backoff-base @base and --backoff-max @cap (0: not given) into @o: an
 * end not given is the library's default (base 100 ms, cap 10 s), or the
 * given end where the default would not fit beside it; neither given
 * leaves @o as it is.  sg_op_options_set_backoff's result (SG_EINVAL: both
 * given, @cap below @base). */
int set_backoff(sg_op_options *o, int64_t base, int64_t cap);
/* @url as a message may show it, written into @buf (@size bytes, cut to
 * fit): a password in its user information masked (user:***@), and the
 * value of every query parameter and the fragment (@every_value: an API
 * key may be any of them) or only the parameters whose names end in
 * "password" (libpq's password and sslpassword); returns @buf. */
const char *masked_url(char *buf, size_t size, const char *url, bool every_value);
/* How much of the header @h a message may show: its name (up to ':',
 * a space or a control byte; 64 bytes at most), never its value. */
size_t header_name_len(const char *h);

/* OpenTelemetry's gen_ai.provider.name and gen_ai.operation.name for the
 * built-in provider profile @profile (Ollama has no well-known name: its
 * own), for the spans and the metrics alike; false (both NULL) for NULL
 * or a name that is no built-in profile's. */
bool genai_names(const char *profile, const char **provider, const char **operation);

#endif
