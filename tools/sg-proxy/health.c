/*
 * health.c - the process's one endpoint health (docs/sg-proxy.md,
 * "ENDPOINT HEALTH"): the library's sg_health, made once at start and
 * shared by every route through the managed multi, so that one request's
 * 429 or failures hold back the next ones to the same upstream (with the
 * same credential) instead of sending them to be refused again.  A reload
 * applies its settings to the same object: what was learned stays.
 *
 * A request the library refuses with nothing sent (outcome refused,
 * reason rate_limited, circuit_open or endpoint_busy) is answered here,
 * at once: 429 or 503, when the upstream frees (Retry-After,
 * retry-after-ms), and the provider's error body - so that the client's
 * SDK raises its rate-limit or server error and, since nothing went
 * upstream, retries after the wait it was given.
 */
#include <stdio.h>
#include <string.h>

#include "conn.h"

void health_settings_init(struct health_settings *hs) {
    hs->on = true;
    hs->failures = SG_HEALTH_DEFAULT_BREAKER_FAILURES;
    hs->cooldown = SG_HEALTH_DEFAULT_BREAKER_COOLDOWN;
    hs->max_inflight = 0;
}

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

int health_option(struct health_settings *hs, const char *name, const char *arg,
                  char *err, size_t errlen) {
    uint64_t n;
    const char *v = arg != NULL ? arg : "";
    if (strcmp(name, "health") == 0) {
        if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0) {
            return ERR("health takes on or off, not '%s'", v);
        }
        hs->on = v[1] == 'n';
    } else if (strcmp(name, "breaker-failures") == 0) {
        if (parse_count(v, HEALTH_MAX_COUNT, &n) != 0) {
            return ERR("breaker-failures takes 0 (no breaker) to %d, not '%s'",
                       HEALTH_MAX_COUNT, v);
        }
        hs->failures = (uint32_t)n;
    } else if (strcmp(name, "breaker-cooldown") == 0) {
        if (parse_duration(v, &hs->cooldown) != 0) {
            return ERR("breaker-cooldown takes a positive duration like 300ms or 5s, "
                       "not '%s'",
                       v);
        }
    } else if (strcmp(name, "max-inflight") == 0) {
        if (parse_count(v, HEALTH_MAX_COUNT, &n) != 0) {
            return ERR("max-inflight takes 0 (no limit) to %d, not '%s'",
                       HEALTH_MAX_COUNT, v);
        }
        hs->max_inflight = (uint32_t)n;
    } else {
        return 1;
    }
    return 0;
}

int health_new(struct proxy *p) {
    return sg_health_new(&p->health) == 0 ? 0 : -1;
}

int health_apply(struct proxy *p, const struct health_settings *hs) {
    sg_health *h = p->health;
    /* the doubling's cap: the library's 60 s, or the cooldown when longer
     * (a cap below it would cut the first one short) */
    const int64_t cap = hs->cooldown > SG_HEALTH_DEFAULT_BREAKER_COOLDOWN_MAX
                            ? hs->cooldown
                            : SG_HEALTH_DEFAULT_BREAKER_COOLDOWN_MAX;
    if (sg_health_set_breaker_failures(h, hs->failures) != 0 ||
        sg_health_set_breaker_cooldown(h, hs->cooldown) != 0 ||
        sg_health_set_breaker_cooldown_max(h, cap) != 0 ||
        sg_health_set_max_inflight(h, hs->max_inflight) != 0) {
        return -1;
    }
    /* off: new operations share nothing (those in flight keep theirs);
     * the object and what it learned stay for when it is on again */
    p->health_on = hs->on;
    return sg_curl_multi_set_health(p->multi, hs->on ? h : NULL) == 0 ? 0 : -1;
}

#ifndef SG_HAVE_OTEL
/* A build without OpenTelemetry (SG_WITH_OTEL=OFF): trace.c is not built,
 * and --otlp says so. */
int trace_start(struct proxy *p, const char *url, char *err, size_t errlen) {
    p->otel = NULL;
    if (url != NULL) {
        snprintf(err, errlen, "--otlp: this sg-proxy was built without OpenTelemetry");
        return SG_EINVAL;
    }
    return 0;
}

void trace_stop(struct proxy *p) {
    (void)p;
}

int trace_request(struct conn *c, sg_op_options *po) {
    (void)c;
    (void)po;
    return 0;
}

void trace_free(struct conn *c) {
    (void)c;
}

bool trace_owns(const struct proxy *p, const char *line) {
    (void)p;
    (void)line;
    return false;
}
#endif

#ifndef SG_HAVE_POSTGRESQL
/* A library without its PostgreSQL part shares nothing
 * (health_share.c is not built). */
int health_share_start(struct proxy *p, const char *uri, const char *key_file, char *err,
                       size_t errlen) {
    (void)p;
    (void)key_file;
    return uri == NULL ? 0
                       : ERR("--health-share: this sg-proxy was built without PostgreSQL "
                             "(SG_WITH_POSTGRESQL)");
}

void health_share_free(struct proxy *p) {
    (void)p;
}

bool health_share_figures(const struct proxy *p, struct health_share_figures *out) {
    (void)p;
    (void)out;
    return false;
}
#endif

sg_health *health_in_force(const struct proxy *p) {
    return p->health_on ? p->health : NULL;
}

/* ---------------------------------------------------------- a refusal */

/* Whole units of @unit in @ns, rounded up, at least 1. */
static long long up_to(int64_t ns, int64_t unit) {
    long long n = ns > 0 ? (long long)((ns + unit - 1) / unit) : 0;
    return n > 0 ? n : 1;
}

/* Bedrock's SDK names an error by its x-amzn-ErrorType header. */
static const char *bedrock_type(int status) {
    return status == 429 ? "ThrottlingException" : "ServiceUnavailableException";
}

bool health_answer_refused(struct conn *c) {
    const sg_op *pol = sg_curl_op_policy(c->op);
    const sg_op_reason why = sg_op_final_reason(pol);
    const int64_t free_at = sg_op_endpoint_free_at(pol);
    if (sg_op_outcome(pol) != SG_OUTCOME_REFUSED || free_at < 0 || upstream_sent(c) ||
        (why != SG_OP_REASON_RATE_LIMITED && why != SG_OP_REASON_CIRCUIT_OPEN &&
         why != SG_OP_REASON_ENDPOINT_BUSY)) {
        return false;
    }
    const int status = why == SG_OP_REASON_RATE_LIMITED ? 429 : 503;
    const int64_t left = free_at - now_ns();
    const long long secs = up_to(left, SG_SEC(1));
    const enum answer_style style = answer_style_of(c->route->profile);
    char detail[96];
    snprintf(detail, sizeof(detail), "%s: nothing was sent upstream; it frees in %lld s",
             sg_op_reason_name(why), secs);
    char body[1024];
    answer_refused_body(style, why, status, detail, body, sizeof(body));
    char extra[320];
    snprintf(extra, sizeof(extra),
             "Retry-After: %lld\r\nretry-after-ms: %lld\r\nX-SG-Outcome: refused\r\n"
             "X-SG-Reason: %s\r\n%s%s%s",
             secs, up_to(left, SG_MS(1)), sg_op_reason_name(why),
             style == STYLE_BEDROCK ? "x-amzn-ErrorType: " : "",
             style == STYLE_BEDROCK ? bedrock_type(status) : "",
             style == STYLE_BEDROCK ? "\r\n" : "");
    reply(c, status, sg_fm_h1_status_text(status), extra, body);
    return true;
}
