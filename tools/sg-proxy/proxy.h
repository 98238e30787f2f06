/*
 * sg-proxy: the three clocks and the one budget for any HTTP client, by
 * changing its base URL (docs/sg-proxy.md).  One thread, one epoll loop:
 * the listening socket, the clients' sockets, a signalfd, and the managed
 * libcurl multi that carries every upstream operation (its fd wakes for
 * every socket, clock, backoff and hedge of the library).
 *
 * A client connection reads one request (head within the header timeout,
 * bounded head, header count and body), becomes one guarded operation
 * upstream, and is answered when an attempt delivers its first token
 * (commit): the status and headers then, the upstream's bytes of that
 * attempt after them, byte for byte.  Before the commit a failure is an
 * HTTP error in the provider's format; after it an in-band error in the
 * provider's stream format, then the end.  Connection: close after each
 * response.
 *
 * Files: main.c (options, listening, the loop, signals), config.c (the
 * routes, from flags or the config file), conn.c (one client: its
 * request, its answer's bytes, its limits; conn.h), request.c (a
 * request from bytes: parsed, checked, routed; request.h), upstream.c
 * (its operation and the commit), include_usage.c (include-usage's
 * field in a Chat Completions body), relay.c (the committed attempt's
 * bytes, released event by event as the library accepts their items, and
 * sent from there once per pass of the loop; relay.h), answer.c (what
 * the client is told, in each provider's format), metrics.c (GET
 * /metrics), health.c (the process's endpoint health, and the answer to a
 * request it refused), health_share.c (that health shared with the other
 * proxies of a fleet through PostgreSQL), trace.c (each operation as
 * OpenTelemetry spans).
 */
#ifndef SG_PROXY_H
#define SG_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <streamguard/curl.h>

#include <streamguard/streamguard.h>

#include "../common/http1.h"
#include "../common/values.h"
#include "sgx/json.h"

/* The OpenTelemetry exporter and a request's trace (trace.c), opaque
 * here: a build without them has neither. */
typedef struct sg_otel sg_otel;
typedef struct sg_otel_trace sg_otel_trace;

#define MAX_FALLBACKS 15
#define FB_MAX_HEADERS 8 /* header lines of one fallback, at most */
#define FB_MODEL_MAX 256 /* a fallback's model, bytes at most */
#define MAX_ROUTES 64
#define PROXY_MAX_HEAD SG_FM_H1_MAX_HEAD

/* A route's retry budget (the library's sg_retry_budget): counted, as a
 * reload that keeps the route (its name and the budget's settings) keeps
 * its bucket, shared by both sets while streams of the old one run. */
struct route_budget {
    int refs;
    sg_retry_budget *b;
};

/* A route: where requests under its prefix go and how they are guarded.
 * Its strings live in argv or in its set's config text. */
struct route {
    const char *name;   /* "default" in the one-route mode */
    const char *prefix; /* "" (everything) or "/path" */
    size_t prefix_len;
    const char *upstream; /* scheme://host[:port][/path], no trailing '/' kept */
    size_t upstream_len;
    const char *fallback[MAX_FALLBACKS];
    size_t fallback_len[MAX_FALLBACKS];
    int nfallback;
    /* each fallback's own: header lines ("Name: value", replacing the
     * client's of that name) and model (NULL: the client's) */
    const char *fb_header[MAX_FALLBACKS][FB_MAX_HEADERS];
    int fb_nheader[MAX_FALLBACKS];
    const char *fb_model[MAX_FALLBACKS];
    bool any_model; /* some fallback has a model: bodies must be JSON */
    /* and its profile (NULL: the route's), framing its attempts */
    const char *fb_profile[MAX_FALLBACKS];
    sg_stream_config fb_framing[MAX_FALLBACKS];
    const char *profile;
    sg_stream_config framing;
    sg_op_options *policy; /* the route's (owned); a request's is a copy */
    bool idempotent;
    /* the HTTP versions its answers came in (upstream.c): a TLS route
     * whose upstreams have answered over HTTP/1.x only goes through the
     * shards of plain routes (pool.h) */
    bool seen_h1, seen_h2;
    bool plain; /* every endpoint plain http:// (route_finish) */
    const char *cafile;
    int64_t backoff_base, backoff_max, hedge_after; /* 0: unset */
    int64_t budget, floor; /* as given (0: not given), to check them together */
    uint32_t max_hedges;
    /* include-usage: OpenAI Chat Completions streams ask for their usage
     * chunk (include_usage.c) */
    bool include_usage;
    /* prices per million tokens, each for the endpoint named before it:
     * [0] the upstream, [i] fallback i; price_for is where the next goes
     * (-1: no endpoint named yet) */
    struct price price[1 + MAX_FALLBACKS];
    int price_for;
    /* the retry budget's settings (tokens 0: none) and the bucket, made
     * by route_finish */
    uint32_t rb_tokens;
    double rb_ratio;
    struct route_budget *rb;
};

/* The routes in force: counted, so that a reload never frees a route a
 * request in flight still uses. */
struct routes {
    int refs;
    int n;
    struct route r[MAX_ROUTES];
    char *text; /* the config file's text, its strings cut out in place */
};

/* config.c */
/* A route with the defaults: 0, or -1 out of memory. */
int route_init(struct route *r, const char *name);
/* Applies option @name ("budget", no "--") with @arg (NULL for a flag
 * without a value): 0, 1 when it is not a route's option, or -1 with the
 * reason in @err. */
int route_option(struct route *r, const char *name, const char *arg, char *err,
                 size_t errlen);
/* After the last option: 0, or -1 with the reason in @err. */
int route_finish(struct route *r, char *err, size_t errlen);
struct routes *routes_new(void);
void routes_unref(struct routes *s);
/* A reload: each route of @next with a route of @prev of the same name and
 * the same retry budget settings takes over that route's bucket. */
void routes_keep_budgets(struct routes *next, const struct routes *prev);
/* A key before the first route (the proxy's own options): 0, or -1 with
 * the reason in @err. */
typedef int (*global_option_fn)(void *ud, const char *name, const char *arg, char *err,
                                size_t errlen);
/* Reads the config file at @path: its routes, its globals given to
 * @global.  NULL with the reason (file:line: ...) in @err. */
struct routes *routes_load(const char *path, global_option_fn global, void *ud, char *err,
                           size_t errlen);

/* health.c: the process's one endpoint health (the library's sg_health),
 * shared by every route through the managed multi and kept across
 * reloads (docs/sg-proxy.md, "ENDPOINT HEALTH"). */
struct health_settings {
    bool on;               /* health: off shares nothing (new operations) */
    uint32_t failures;     /* breaker-failures (0: no breaker) */
    int64_t cooldown;      /* breaker-cooldown */
    uint32_t max_inflight; /* max-inflight, per upstream (0: none) */
};
#define HEALTH_MAX_COUNT 1000000
/* The library's defaults: on, 5 failures, 5 s, no in-flight limit. */
void health_settings_init(struct health_settings *hs);
/* Option @name ("breaker-failures", no "--") with @arg: 0, 1 when it is
 * not one of health's, or -1 with the reason in @err. */
int health_option(struct health_settings *hs, const char *name, const char *arg,
                  char *err, size_t errlen);

/* Shards of libcurl's connection cache, a share each, and each one's
 * requests (pool.h, pool.c). */
struct pool {
    CURLSH **share;
    uint32_t *busy;
    uint32_t n, cap; /* shards made; room for */
    uint32_t per;    /* requests a shard takes at most */
};

struct proxy {
    struct routes *routes; /* in force for new requests */
    const char *config;    /* the file they came from, NULL: flags */
    int epfd;
    int lfd;   /* the listening socket, -1 once draining */
    int sigfd; /* SIGTERM, SIGINT, SIGHUP */
    sg_curl_multi *multi;
    /* upstream connections in shards of libcurl's connection cache
     * (pool.h): HTTP/1.x ones, and those of TLS routes that may multiplex */
    struct pool pool, pool_h2;
    sg_health *health;          /* the process's, made at start, kept across reloads */
    bool health_on;             /* given to the multi (health = on) */
    struct sg_health_pg *share; /* --health-share: NULL when not shared */
    sg_otel *otel;              /* --otlp: NULL when not tracing */
    FILE *log;                  /* one report line per operation */
    int max_conns;              /* connections open at most */
    int nconns;
    int64_t header_timeout;
    size_t max_body;
    size_t client_buffer; /* bytes waiting for a client, at most */
    int64_t transit_allowance;
    int64_t drain;          /* how long in-flight streams may finish */
    int64_t drain_deadline; /* SG_TIME_NEVER until SIGTERM */
    bool draining;
    bool cancelled_all; /* the drain ran out: every operation cancelled */
    struct conn *conns; /* every open connection */
    /* when conns_expire must walk the connections next: no later than
     * the earliest deadline of theirs at its last walk, lowered as one is
     * set (conn_deadline) or a stream must be cancelled (conn_wake) */
    int64_t expire_at;
    struct conn *dirty; /* those with bytes released in this pass */
    /* operations ended, their clients told: the rest of their end waits
     * here, oldest first (conns_finish) */
    struct conn *finish_head, *finish_tail;
    uint64_t next_id;
};

/* pool.c: each set's bound per shard, before the first request. */
void pool_init(struct proxy *p);
/* pool.c: the shards of both sets closed, their idle connections with
 * them (after every handle, after the multi). */
void pool_free(struct proxy *p);

/* Tags for epoll: a connection's pointer, or one of these. */
extern char sg_proxy_tag_listen, sg_proxy_tag_multi, sg_proxy_tag_signal;

/* conn.c */
struct conn;
void conn_accept(struct proxy *p);
/* Readiness of @c's socket. */
void conn_ready(struct proxy *p, struct conn *c, uint32_t events);
/* The earliest header deadline of the connections (SG_TIME_NEVER none),
 * after closing those whose deadline has passed at @now, and cancelling
 * the operations of clients gone or too slow.  O(1) while nothing is
 * due (p->expire_at); a walk of every connection when something is. */
int64_t conns_expire(struct proxy *p, int64_t now);
/* After the upstream loop's pass: what its reads released goes to each
 * client, one send per connection. */
void conns_flush(struct proxy *p);
/* The ends of operations that on_done queued (their clients already
 * told): report, metrics, the operation freed, the connection closed when
 * nothing waits for its client - oldest first, until @slice ns have
 * passed (at least one each call).  What is left waits in the queue: the
 * loop then looks at its sockets and clocks without sleeping, and comes
 * back. */
void conns_finish(struct proxy *p, int64_t slice);
/* SIGTERM ran out of drain time: cancel every operation. */
void conns_cancel_all(struct proxy *p);
void conns_close_idle(struct proxy *p); /* no request being answered: closed */
void conns_free(struct proxy *p);

/* answer.c: what a client is told, in the provider's own format. */
enum answer_style {
    STYLE_OPENAI,    /* {"error": {"message","type","code"}} */
    STYLE_ANTHROPIC, /* {"type":"error","error":{"type","message"}} */
    STYLE_RESPONSES, /* event: error, {"type":"error","code","message"} */
    STYLE_GEMINI,    /* {"error": {"code","message","status"}} */
    STYLE_OLLAMA,    /* {"error": "..."} */
    STYLE_BEDROCK,   /* an exception message; before commit {"message"} */
};
enum answer_style answer_style_of(const char *profile);
const char *answer_content_type(const sg_stream_config *framing);
/* The status a failure before the commit is answered with. */
int answer_status(sg_outcome outcome, int upstream_status);
/* The error body of a failure before the commit, into @buf (NUL-ended);
 * returns its length. */
size_t answer_error_body(enum answer_style style, sg_outcome outcome, int status,
                         const char *detail, char *buf, size_t cap);
/* The in-band error after the commit (a whole SSE event, NDJSON line or
 * event-stream message), into @buf; returns its length. */
size_t answer_in_band(enum answer_style style, sg_outcome outcome, const char *detail,
                      char *buf, size_t cap);
/* sg-proxy's own failure (out of memory, a limit of its own: not the
 * client's request, not the upstream's answer) before the commit: the
 * body of a @status (500 or 503) in @style, of the provider's type for a
 * server's failure (server_error, Anthropic's api_error, Gemini's INTERNAL
 * or UNAVAILABLE), its message "sg-proxy: @what"; returns its length. */
size_t answer_own_body(enum answer_style style, int status, const char *what, char *buf,
                       size_t cap);
/* The same after the commit, in-band. */
size_t answer_own_in_band(enum answer_style style, const char *what, char *buf,
                          size_t cap);
/* A request endpoint health refused (nothing went upstream), reason @why
 * (rate_limited, circuit_open, endpoint_busy): the body of its @status
 * (429, 503) in @style, of the provider's type its SDK raises as a rate
 * limit (429) or an unavailable server (503), its message "sg-proxy:
 * refused (@detail)"; returns its length. */
size_t answer_refused_body(enum answer_style style, sg_op_reason why, int status,
                           const char *detail, char *buf, size_t cap);

/* health.c: the object, once at start (0, or -1: no memory, no random
 * bytes); @hs applied to it and to the multi, at start and on each reload
 * (0, or -1). */
int health_new(struct proxy *p);
int health_apply(struct proxy *p, const struct health_settings *hs);
/* trace.c (health.c without OpenTelemetry): at start, the exporter of
 * --otlp @url (NULL: none) or the OTEL_EXPORTER_OTLP_* variables, NULL
 * when neither says to trace: 0, or a negative code with @err saying why;
 * trace_stop after every operation is freed.  Per request: its trace,
 * a child of the client's traceparent, added to @po's observers (0, or a
 * negative code); trace_free after its operation is freed.  trace_owns:
 * a client's header @line ("Name: value") that the trace sends in its
 * place upstream. */
struct conn;
int trace_start(struct proxy *p, const char *url, char *err, size_t errlen);
void trace_stop(struct proxy *p);
int trace_request(struct conn *c, sg_op_options *po);
void trace_free(struct conn *c);
bool trace_owns(const struct proxy *p, const char *line);

/* health_share.c (health.c without PostgreSQL): at start, before any
 * operation, endpoint health shared through the database @uri (NULL:
 * not shared) under the key of @key_file (NULL: the environment's
 * SG_PROXY_HEALTH_KEY); 0, or -1 with the reason in @err.  Its messages
 * (the database lost, back) go to stderr. */
int health_share_start(struct proxy *p, const char *uri, const char *key_file, char *err,
                       size_t errlen);
/* Stops sharing (before the object goes). */
void health_share_free(struct proxy *p);
/* What the share did, for /metrics: false when not sharing. */
struct health_share_figures {
    bool connected;
    uint32_t queued;
    uint64_t learned, published, dropped, expired, received, applied, ignored, losses;
};
bool health_share_figures(const struct proxy *p, struct health_share_figures *out);
/* The object new operations share: NULL when health is off. */
sg_health *health_in_force(const struct proxy *p);
/* Answers the request of @c, when the library refused it for its
 * endpoint's health with nothing sent (outcome refused, reason
 * rate_limited, circuit_open or endpoint_busy): 429 or 503, Retry-After,
 * retry-after-ms, X-SG-Outcome, X-SG-Reason, the provider's body.  False,
 * having answered nothing, for any other end. */
bool health_answer_refused(struct conn *c);

/* fallback.c: the profile name endpoint @ep of @r is framed by (0 the
 * upstream, i fallback i): the fallback's own, else the route's. */
const char *endpoint_profile(const struct route *r, uint32_t ep);
/* metrics.c: counted once per operation as it ends, by @r's name (and
 * for the token histograms, the provider each attempt's endpoint's
 * profile names: endpoint_profile). */
void metrics_observe(const struct route *r, const sg_op *op, double duration_s,
                     double ttfc_s);
/* The Prometheus text into @b (NUL-ended) as far as @cap allows; returns
 * its whole length, as snprintf does: it is all in @b when less than @cap
 * (@b NULL and @cap 0: the length alone).  With @health (not NULL), each
 * upstream it tracks at @now too; with @share (not NULL), what sharing it
 * with other processes did. */
size_t metrics_text(sg_health *health, int64_t now,
                    const struct health_share_figures *share, char *b, size_t cap);

#endif
