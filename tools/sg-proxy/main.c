/*
 * main.c - sg-proxy's options, its listening socket, the loop, signals.
 *
 * Routes: one from the flags (every request goes to --upstream, its path
 * first, then the client's path and query, guarded by the flags sg-stream
 * has for the same things), or those of --config FILE (config.c), read
 * again on SIGHUP.  One endpoint health for the process (health.c), kept
 * across reloads, which apply its settings anew.  SIGTERM or SIGINT drains: no new
 * connections, the streams in flight have --drain to finish, then they are cancelled
 * (their reports written), and sg-proxy exits 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"
#include "heap.h"
#include "readbuf.h"

char sg_proxy_tag_listen, sg_proxy_tag_multi, sg_proxy_tag_signal;

const char *const prog = "sg-proxy"; /* usage_error names it */

static void usage(FILE *f) {
    fprintf(
        f,
        "Usage: sg-proxy --upstream URL --profile NAME [options]\n"
        "       sg-proxy --config FILE [options]   (routes by path prefix; SIGHUP\n"
        "                                           reads the file again)\n"
        "Guard every stream that passes: first token, idle and total clocks under\n"
        "one budget, retries only when safe, an error in the provider's own format\n"
        "when a committed stream breaks.\n"
        "\n"
        "  --listen ADDR:PORT     where clients connect (127.0.0.1:8787; port 0: any,\n"
        "                         printed alone as the first line of stdout)\n"
        "  --allow-remote         allow a --listen address other than loopback\n"
        "  --upstream URL         where requests go: URL's path, then the client's\n"
        "  --profile NAME         the upstream's stream semantics: openai,\n"
        "                         openai-responses, anthropic, gemini, ollama,\n"
        "                         bedrock-converse, bedrock-invoke\n"
        "  --fallback URL         another upstream, in order (repeatable, 15)\n"
        "  --header 'Name: value' the --fallback just before sends it instead of\n"
        "                         the client's header of that name (repeatable, 8)\n"
        "  --model NAME           the --fallback just before asks for NAME: the\n"
        "                         JSON body's top-level \"model\" replaced\n"
        "  --profile NAME         again after a --fallback: that fallback's own\n"
        "                         stream semantics (its attempts judged by it)\n"
        "  --cacert FILE          CA certificates for https:// upstreams\n");
    fputs(
        "Clocks, retries, hedging (as sg-stream's):\n"
        "  --budget D             the whole operation (60s); an inbound X-Deadline-Ms,\n"
        "                         grpc-timeout or X-Stainless-Timeout shrinks it\n"
        "  --first-item D         time to first token per attempt\n"
        "  --idle D               longest gap between items\n"
        "  --stream-total D       longest stream per attempt\n"
        "  --connect-timeout D    --attempt-timeout D    --floor D\n"
        "  --attempts N           at most N attempts (1..1000; 3)\n"
        "  --backoff-base D       --backoff-max D\n"
        "  --idempotent           every request is safe to repeat (else only with\n"
        "                         an Idempotency-Key or an idempotent method)\n"
        "  --hedge-after D        --max-hedges N\n"
        "                         D: a duration, or auto[:Q][,D] (the upstream's\n"
        "                         Q-quantile of first tokens, 0.95, once learned)\n"
        "  --order configured|first_token  first attempts to the fastest starter\n"
        "  --max-items N          --max-bytes N\n"
        "  --retry-budget N|off   the route's retry budget: N tokens (off); a retry\n"
        "                         only while more than half remain\n"
        "  --retry-budget-ratio R tokens a success gives back (0.1)\n"
        "Usage and cost:\n"
        "  --include-usage        add stream_options.include_usage to OpenAI Chat\n"
        "                         Completions streams that lack it (profile openai)\n"
        "  --price-in X           --price-out Y   --price-cached Z\n"
        "                         prices per million tokens of the --upstream or\n"
        "                         --fallback given just before them\n"
        "Endpoint health (one for the process, every route; kept on SIGHUP):\n"
        "  --health on|off        share what requests learn of each upstream: a\n"
        "                         429's Retry-After, rate-limit headers, failures (on)\n"
        "  --breaker-failures N   consecutive failures that open an upstream's\n"
        "                         breaker (5; 0: no breaker)\n"
        "  --breaker-cooldown D   how long it stays open the first time (5s)\n"
        "  --max-inflight N       attempts in flight per upstream (0: no limit)\n"
        "  --health-share URI     share it with the other proxies of a fleet\n"
        "                         through PostgreSQL (postgresql://...; at start)\n"
        "  --health-key-file PATH the key every proxy of the fleet holds (16+ bytes;\n"
        "                         else the environment's SG_PROXY_HEALTH_KEY)\n"
        "Tracing (docs/otel.md; at start):\n"
        "  --otlp URL             each request's operation and attempts as\n"
        "                         OpenTelemetry spans, over OTLP/HTTP to URL (also\n"
        "                         with OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT); a\n"
        "                         client's traceparent is their parent\n"
        "Clients:\n"
        "  --max-connections N    open at once (256); more are closed at once\n"
        "  --header-timeout D     a request head within D, a body's reads at most D\n"
        "                         apart (10s): 408; an unread answer dropped after D\n"
        "  --max-body BYTES       largest request body (8388608): 413\n"
        "  --client-buffer BYTES  most bytes waiting for a slow client (1048576)\n"
        "  --transit-allowance D  taken off an inbound deadline (5ms)\n"
        "  --drain D              on SIGTERM, how long streams may finish (10s)\n"
        "  --log FILE             report lines there (default: stdout)\n"
        "  -h, --help             -V, --version\n",
        f);
}

enum {
    OPT_ROUTE = 256, /* a route's option: its name says which */
    OPT_GLOBAL,      /* the proxy's own: its name says which */
    OPT_CONFIG,
};

static const struct option longopts[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"listen", required_argument, NULL, OPT_GLOBAL},
    {"allow-remote", no_argument, NULL, OPT_GLOBAL},
    {"max-connections", required_argument, NULL, OPT_GLOBAL},
    {"header-timeout", required_argument, NULL, OPT_GLOBAL},
    {"max-body", required_argument, NULL, OPT_GLOBAL},
    {"client-buffer", required_argument, NULL, OPT_GLOBAL},
    {"transit-allowance", required_argument, NULL, OPT_GLOBAL},
    {"drain", required_argument, NULL, OPT_GLOBAL},
    {"log", required_argument, NULL, OPT_GLOBAL},
    {"health", required_argument, NULL, OPT_GLOBAL},
    {"health-share", required_argument, NULL, OPT_GLOBAL},
    {"health-key-file", required_argument, NULL, OPT_GLOBAL},
    {"otlp", required_argument, NULL, OPT_GLOBAL},
    {"breaker-failures", required_argument, NULL, OPT_GLOBAL},
    {"breaker-cooldown", required_argument, NULL, OPT_GLOBAL},
    {"max-inflight", required_argument, NULL, OPT_GLOBAL},
    {"upstream", required_argument, NULL, OPT_ROUTE},
    {"profile", required_argument, NULL, OPT_ROUTE},
    {"fallback", required_argument, NULL, OPT_ROUTE},
    {"header", required_argument, NULL, OPT_ROUTE},
    {"model", required_argument, NULL, OPT_ROUTE},
    {"cacert", required_argument, NULL, OPT_ROUTE},
    {"budget", required_argument, NULL, OPT_ROUTE},
    {"first-item", required_argument, NULL, OPT_ROUTE},
    {"idle", required_argument, NULL, OPT_ROUTE},
    {"stream-total", required_argument, NULL, OPT_ROUTE},
    {"connect-timeout", required_argument, NULL, OPT_ROUTE},
    {"attempt-timeout", required_argument, NULL, OPT_ROUTE},
    {"floor", required_argument, NULL, OPT_ROUTE},
    {"attempts", required_argument, NULL, OPT_ROUTE},
    {"backoff-base", required_argument, NULL, OPT_ROUTE},
    {"backoff-max", required_argument, NULL, OPT_ROUTE},
    {"idempotent", no_argument, NULL, OPT_ROUTE},
    {"hedge-after", required_argument, NULL, OPT_ROUTE},
    {"max-hedges", required_argument, NULL, OPT_ROUTE},
    {"order", required_argument, NULL, OPT_ROUTE},
    {"max-items", required_argument, NULL, OPT_ROUTE},
    {"max-bytes", required_argument, NULL, OPT_ROUTE},
    {"retry-budget", required_argument, NULL, OPT_ROUTE},
    {"retry-budget-ratio", required_argument, NULL, OPT_ROUTE},
    {"include-usage", no_argument, NULL, OPT_ROUTE},
    {"price-in", required_argument, NULL, OPT_ROUTE},
    {"price-out", required_argument, NULL, OPT_ROUTE},
    {"price-cached", required_argument, NULL, OPT_ROUTE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

#define MAX_GLOBAL_FLAGS 64

struct settings {
    struct proxy *p;
    const char *listen;
    bool allow_remote;
    const char *log;
    bool at_start;               /* globals apply at start only; a reload ignores them */
    const char *health_share;    /* health-share: the database's URI */
    const char *health_key_file; /* health-key-file */
    const char *otlp;            /* otlp: the OTLP/HTTP traces URL */
    /* endpoint health's: the file's and the flags', at start and on each
     * reload */
    struct health_settings health;
    /* globals given as flags: applied again after the file's, at start
     * and on each reload, so that a flag wins */
    int gflag[MAX_GLOBAL_FLAGS];
    const char *garg[MAX_GLOBAL_FLAGS];
    int ng;
};

/* The proxy's own options, from a flag or the config file's top: 0, 1
 * when @name is not one, or -1 with the reason in @err. */
static int global_option(void *ud, const char *name, const char *arg, char *err,
                         size_t errlen) {
    struct settings *s = ud;
    struct proxy *p = s->p;
    int64_t d;
    uint64_t n;
    int rv = health_option(&s->health, name, arg, err, errlen);
    if (rv != 1) {
        return rv; /* endpoint health's: read again on a reload */
    }
    if (!s->at_start) {
        return 0; /* a reload changes routes and endpoint health only */
    }
    if (strcmp(name, "listen") == 0) {
        s->listen = arg;
    } else if (strcmp(name, "health-share") == 0) {
        if (arg == NULL || (strncmp(arg, "postgresql://", 13) != 0 &&
                            strncmp(arg, "postgres://", 11) != 0)) {
            snprintf(err, errlen, "health-share takes a postgresql:// URI");
            return -1;
        }
        s->health_share = arg;
    } else if (strcmp(name, "health-key-file") == 0) {
        s->health_key_file = arg;
    } else if (strcmp(name, "otlp") == 0) {
        s->otlp = arg;
    } else if (strcmp(name, "allow-remote") == 0) {
        s->allow_remote = arg == NULL || strcmp(arg, "true") == 0;
    } else if (strcmp(name, "log") == 0) {
        s->log = arg;
    } else if (strcmp(name, "max-connections") == 0) {
        if (arg == NULL || parse_count(arg, 100000, &n) != 0 || n == 0) {
            snprintf(err, errlen, "max-connections takes 1 to 100000, not '%s'",
                     arg ? arg : "");
            return -1;
        }
        p->max_conns = (int)n;
    } else if (strcmp(name, "max-body") == 0 || strcmp(name, "client-buffer") == 0) {
        if (arg == NULL || parse_count(arg, (uint64_t)1 << 30, &n) != 0 || n == 0) {
            snprintf(err, errlen, "%s takes a size in bytes up to 1 GiB, not '%s'", name,
                     arg ? arg : "");
            return -1;
        }
        *(name[4] == 'b' ? &p->max_body : &p->client_buffer) = (size_t)n;
    } else if (strcmp(name, "header-timeout") == 0 ||
               strcmp(name, "transit-allowance") == 0 || strcmp(name, "drain") == 0) {
        if (arg == NULL || parse_duration(arg, &d) != 0) {
            snprintf(err, errlen,
                     "%s takes a positive duration like 300ms or 2s, not '%s'", name,
                     arg ? arg : "");
            return -1;
        }
        *(name[0] == 'h'   ? &p->header_timeout
          : name[0] == 't' ? &p->transit_allowance
                           : &p->drain) = d;
    } else {
        return 1;
    }
    return 0;
}

/* The globals given as flags, again: after the file's, a flag wins. */
static void flags_again(struct settings *s) {
    char err[320];
    for (int i = 0; i < s->ng; i++) {
        (void)global_option(s, longopts[s->gflag[i]].name, s->garg[i], err, sizeof(err));
    }
}

static int parse_args(int argc, char **argv, struct proxy *p, struct settings *s) {
    static struct route one; /* static: what it holds stays reachable */
    if (route_init(&one, "default") != 0) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    bool route_flags = false;
    const char *config = NULL;
    int opt;
    int idx;
    char err[320];
    while ((opt = getopt_long(argc, argv, "hV", longopts, &idx)) != -1) {
        const char *name = opt >= OPT_ROUTE ? longopts[idx].name : NULL;
        int rv;
        switch (opt) {
        case OPT_CONFIG:
            config = optarg;
            break;
        case OPT_GLOBAL:
            if (s->ng < MAX_GLOBAL_FLAGS) {
                s->gflag[s->ng] = idx;
                s->garg[s->ng++] = optarg;
            }
            if (global_option(s, name, optarg, err, sizeof(err)) != 0) {
                return usage_error("--%s", err);
            }
            break;
        case OPT_ROUTE:
            route_flags = true;
            rv = route_option(&one, name, optarg, err, sizeof(err));
            if (rv != 0) {
                return usage_error("--%s", rv < 0 ? err : name);
            }
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("sg-proxy %s\nstreamguard %s\nlibcurl %s\n", SG_VERSION_STRING,
                   sg_version(), curl_version_info(CURLVERSION_NOW)->version);
            exit(0);
        default:
            fprintf(stderr, "%s: see --help\n", prog);
            return 2;
        }
    }
    if (optind < argc) {
        return usage_error("unexpected argument '%s'", argv[optind]);
    }
    if (config != NULL) {
        if (route_flags) {
            return usage_error("with --config, a route's options go in the file");
        }
        err[0] = '\0';
        p->routes = routes_load(config, global_option, s, err, sizeof(err));
        if (p->routes == NULL) {
            fprintf(stderr, "%s: %s\n", prog, err);
            return 2;
        }
        p->config = config;
        flags_again(s);
        return 0;
    }
    if (one.upstream == NULL || one.profile == NULL) {
        return usage_error("--upstream and --profile are required (or --config FILE)");
    }
    if (route_finish(&one, err, sizeof(err)) != 0) {
        return usage_error("%s", err);
    }
    p->routes = routes_new();
    if (p->routes == NULL) {
        return 1;
    }
    p->routes->r[0] = one;
    p->routes->n = 1;
    return 0;
}

/* SIGHUP: the config file again; new requests take the new routes, the
 * streams in flight keep theirs; endpoint health keeps what it learned
 * and takes the file's settings (a flag still wins).  A file that does
 * not load changes nothing. */
static void reload(struct proxy *p, struct settings *s) {
    if (p->config == NULL) {
        fprintf(stderr, "%s: SIGHUP without --config: nothing to reload\n", prog);
        return;
    }
    char err[320] = "";
    s->at_start = false;
    const struct health_settings was = s->health;
    health_settings_init(&s->health); /* a key the file no longer has: its default */
    struct routes *n = routes_load(p->config, global_option, s, err, sizeof(err));
    if (n == NULL) {
        s->health = was;
        fprintf(stderr, "%s: reload failed, the routes in force stay: %s\n", prog, err);
        return;
    }
    flags_again(s);
    if (health_apply(p, &s->health) != 0) {
        fprintf(stderr, "%s: reload: endpoint health keeps its settings\n", prog);
    }
    routes_keep_budgets(n, p->routes); /* a route kept keeps its bucket */
    routes_unref(p->routes);
    p->routes = n;
    fprintf(stderr, "%s: reloaded %d route(s) from %s\n", prog, n->n, p->config);
}

/* ADDR:PORT (IPv4, or [IPv6]:PORT).  Loopback only, unless allowed. */
static int listen_on(struct proxy *p, const char *spec, bool allow_remote) {
    char host[128];
    const char *colon = strrchr(spec, ':');
    if (colon == NULL || (size_t)(colon - spec) >= sizeof(host)) {
        return usage_error("--listen takes ADDR:PORT, not '%s'", spec);
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    uint64_t port;
    if (parse_count(colon + 1, 65535, &port) != 0) {
        return usage_error("--listen: not a port: '%s'", colon + 1);
    }
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t sl;
    bool loopback;
    char *h = host;
    size_t hl = strlen(h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h[hl - 1] = '\0';
        h++;
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET6, h, &a->sin6_addr) != 1) {
            return usage_error("--listen: not an address: '%s'", h);
        }
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
        sl = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        if (strcmp(h, "localhost") == 0) {
            h = "127.0.0.1";
        }
        if (inet_pton(AF_INET, h, &a->sin_addr) != 1) {
            return usage_error("--listen: not an IPv4 address: '%s'", h);
        }
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
        sl = sizeof(*a);
    }
    if (!loopback && !allow_remote) {
        return usage_error("--listen %s is not a loopback address: add --allow-remote to "
                           "serve other machines",
                           spec);
    }
    p->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (p->lfd < 0 ||
        setsockopt(p->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(p->lfd, (struct sockaddr *)&ss, sl) != 0 || listen(p->lfd, 512) != 0) {
        fprintf(stderr, "%s: cannot listen on %s: %s\n", prog, spec, strerror(errno));
        return 1;
    }
    if (port == 0) {
        socklen_t l = sizeof(ss);
        getsockname(p->lfd, (struct sockaddr *)&ss, &l);
        int bound = ss.ss_family == AF_INET
                        ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                        : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        printf("%d\n", bound);
        fflush(stdout);
    }
    return 0;
}

static void add_fd(struct proxy *p, int fd, void *tag) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.ptr = tag;
    epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void start_drain(struct proxy *p) {
    if (p->draining) {
        return;
    }
    p->draining = true;
    p->drain_deadline = sg_time_add(sg_clock_now(NULL), p->drain);
    if (p->lfd >= 0) {
        close(p->lfd); /* no new connections */
        p->lfd = -1;
    }
}

/* After a burst of streams has ended, the C library's free memory goes
 * back to the system.  glibc keeps what is freed inside its heap, and the
 * main heap shrinks only from its top: a block still in use near the top
 * (libcurl's connection cache, a stream that outlived the burst) pins
 * every free page below it.  malloc_trim(0) gives back every whole free
 * page anywhere in the heap (madvise), once the cache's blocks have gone
 * back to it (heap.c; also once at start, before the loop).  Measured
 * after bursts of 100 and 1,000 streams: RSS within 0.2 % of the start,
 * against +2.6-3.3 % with the cache swapped for fresh blocks and +21-27 %
 * before that (a trim at a quarter of the peak, the cache's blocks left
 * where they were).
 *
 * When: once the open connections have fallen to at most half of their
 * most since the last trim, by TRIM_DROP at least, and then none has
 * opened or closed for TRIM_SETTLE - a burst that ends is trimmed once,
 * after its last stream went, not in the middle of a thousand streams
 * ending together (where the trim's milliseconds would make the later
 * ones that much later) - or, under a load that never settles, TRIM_WAIT
 * after it fell; never twice within TRIM_GAP.  A steady load, whose freed
 * memory the next streams reuse, is never trimmed.  A trim costs 0.3 ms
 * after 100 streams, 1.0-1.6 ms after 1,000, never paid per request or
 * item.  Returns
 * when the loop must wake for a trim it put off (SG_TIME_NEVER: none). */
#define TRIM_DROP 32
#define TRIM_SETTLE SG_MS(100)
#define TRIM_WAIT SG_SEC(5)
#define TRIM_GAP SG_SEC(1)
struct trim {
    int peak;        /* the most connections open since the last trim */
    int seen;        /* the count at the last look */
    int64_t changed; /* when the count last changed */
    int64_t fell;    /* when it fell far enough (SG_TIME_NEVER: it has not) */
    int64_t last;    /* when the last trim ran (SG_TIME_NEVER: never) */
};

static int64_t trim_after_burst(const struct proxy *p, struct trim *t, int64_t now) {
    if (p->nconns != t->seen) {
        t->seen = p->nconns;
        t->changed = now;
    }
    if (p->nconns > t->peak) {
        t->peak = p->nconns;
    }
    if (t->peak - p->nconns < TRIM_DROP || p->nconns > t->peak / 2) {
        t->fell = SG_TIME_NEVER;
        return SG_TIME_NEVER;
    }
    if (t->fell == SG_TIME_NEVER) {
        t->fell = now;
    }
    int64_t at = sg_time_min(sg_time_add(t->changed, TRIM_SETTLE),
                             sg_time_add(t->fell, TRIM_WAIT));
    if (t->last != SG_TIME_NEVER && at < sg_time_add(t->last, TRIM_GAP)) {
        at = sg_time_add(t->last, TRIM_GAP);
    }
    if (now < at) {
        return at;
    }
    heap_give_back();
    t->peak = p->nconns;
    t->fell = SG_TIME_NEVER;
    t->last = now;
    return SG_TIME_NEVER;
}

/* How long a pass spends on the ends of operations (conns_finish) before
 * it looks at its sockets and clocks again: about ten ends. */
#define FINISH_SLICE SG_US(200)

static int run(struct proxy *p, struct settings *s) {
    struct epoll_event ev[64];
    struct trim trim = {0, 0, 0, SG_TIME_NEVER, SG_TIME_NEVER};
    for (;;) {
        int64_t now = sg_clock_now(NULL);
        int64_t next = sg_time_min(conns_expire(p, now), trim_after_burst(p, &trim, now));
        if (p->draining) {
            if (p->conns == NULL) {
                return 0;
            }
            if (now >= p->drain_deadline) {
                /* every pass from here: a stream is cancelled (its report
                 * written as it ends) and what it says in-band has a
                 * second to go out; then every connection is closed */
                p->cancelled_all = true;
                conns_cancel_all(p);
                conns_close_idle(p);
                sg_curl_multi_step(p->multi, 0);
                conns_flush(p);
                if (now >= sg_time_add(p->drain_deadline, SG_SEC(1))) {
                    conns_free(p);
                    return 0;
                }
            }
            next = sg_time_min(next, p->cancelled_all ? sg_time_add(now, SG_MS(100))
                                                      : p->drain_deadline);
        }
        int timeout = -1;
        if (next != SG_TIME_NEVER) {
            int64_t ms = next > now ? (next - now + SG_MS(1) - 1) / SG_MS(1) : 0;
            timeout = ms > 60000 ? 60000 : (int)ms;
        }
        if (p->finish_head != NULL) {
            timeout = 0; /* ended operations wait for their next slice */
        }
        int n = epoll_wait(p->epfd, ev, 64, timeout);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "%s: epoll_wait: %s\n", prog, strerror(errno));
            return 1;
        }
        bool step = false;
        for (int i = 0; i < n; i++) {
            void *tag = ev[i].data.ptr;
            if (tag == &sg_proxy_tag_listen) {
                if (p->lfd >= 0) {
                    conn_accept(p);
                }
            } else if (tag == &sg_proxy_tag_multi) {
                step = true;
            } else if (tag == &sg_proxy_tag_signal) {
                struct signalfd_siginfo si;
                while (read(p->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                    if (si.ssi_signo == SIGHUP) {
                        reload(p, s);
                    } else {
                        start_drain(p);
                    }
                }
            } else {
                conn_ready(p, tag, ev[i].events);
                step = true; /* a new operation, or a cancel */
            }
        }
        if (step || n == 0) {
            if (sg_curl_multi_step(p->multi, 0) < 0) {
                fprintf(stderr, "%s: the upstream loop failed\n", prog);
                return 1;
            }
            conns_flush(p); /* what the pass's reads released */
        }
        /* what ended operations leave to do, a slice a pass: a clock due
         * meanwhile is decided (its client told) at the next pass, not
         * after every report line, free and close of the others */
        conns_finish(p, FINISH_SLICE);
    }
}

/* Every open stream holds the client's socket and, over HTTP/1.1, an
 * upstream socket of its own (HTTP/2 upstreams share one connection per
 * host among their streams), so N connections need about 2N + 64 file
 * descriptors.  The usual soft limit (1024) would refuse connections near
 * 500 streams: it is raised to the hard limit, and both are said on
 * stderr; so is a limit too low for --max-connections. */
static void raise_nofile(const struct proxy *p) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        const rlim_t was = rl.rlim_cur;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
            fprintf(
                stderr,
                "%s: open files: soft limit raised from %llu to the hard limit %llu\n",
                prog, (unsigned long long)was, (unsigned long long)rl.rlim_max);
        } else {
            fprintf(stderr, "%s: open files: cannot raise the soft limit %llu: %s\n",
                    prog, (unsigned long long)was, strerror(errno));
            rl.rlim_cur = was;
        }
    }
    const unsigned long long need = 2ULL * (unsigned long long)p->max_conns + 64;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        fprintf(
            stderr,
            "%s: open files: --max-connections %d needs about %llu, the limit is %llu: "
            "past it connections and upstream requests fail\n",
            prog, p->max_conns, need, (unsigned long long)rl.rlim_cur);
    }
}

int main(int argc, char **argv) {
    heap_init(); /* one arena */
    struct proxy p;
    memset(&p, 0, sizeof(p));
    p.lfd = -1;
    p.sigfd = -1;
    p.max_conns = 256;
    p.header_timeout = SG_SEC(10);
    p.max_body = (size_t)8 << 20;
    p.client_buffer = (size_t)1 << 20;
    p.transit_allowance = SG_MS(5);
    p.drain = SG_SEC(10);
    p.drain_deadline = SG_TIME_NEVER;
    pool_init(&p);
    struct settings s;
    memset(&s, 0, sizeof(s));
    s.p = &p;
    s.at_start = true;
    s.listen = "127.0.0.1:8787";
    health_settings_init(&s.health);
    int rv = parse_args(argc, argv, &p, &s);
    char err[320];
    if (rv != 0) {
        return rv;
    }
    p.log = stdout;
    if (s.log != NULL && (p.log = fopen(s.log, "a")) == NULL) {
        fprintf(stderr, "%s: cannot open --log %s: %s\n", prog, s.log, strerror(errno));
        routes_unref(p.routes);
        return 1;
    }
    raise_nofile(&p);
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    p.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    p.epfd = epoll_create1(EPOLL_CLOEXEC);
    bool curl = readbuf_init() == 0; /* curl_global_init, read buffers placed */
    if (p.sigfd < 0 || p.epfd < 0 || !curl || sg_curl_multi_new(&p.multi, NULL) != 0 ||
        health_new(&p) != 0 || health_apply(&p, &s.health) != 0) {
        fprintf(stderr, "%s: cannot set up: %s\n", prog, strerror(errno));
        rv = 1;
    } else if (health_share_start(&p, s.health_share, s.health_key_file, err,
                                  sizeof(err)) != 0 ||
               trace_start(&p, s.otlp, err, sizeof(err)) != 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        rv = 2;
    } else {
        rv = listen_on(&p, s.listen, s.allow_remote);
    }
    if (rv == 0) {
        add_fd(&p, p.lfd, &sg_proxy_tag_listen);
        add_fd(&p, sg_curl_multi_fd(p.multi), &sg_proxy_tag_multi);
        add_fd(&p, p.sigfd, &sg_proxy_tag_signal);
        heap_give_back(); /* what setting up freed; the trim's first cost */
        rv = run(&p, &s);
    }
    /* every way out frees what was set up */
    if (p.lfd >= 0) {
        close(p.lfd);
    }
    conns_free(&p);
    routes_unref(p.routes);
    sg_curl_multi_free(p.multi);
    pool_free(&p);  /* after every handle that used a shard */
    trace_stop(&p); /* after the operations: their spans go */
    health_share_free(&p);
    sg_health_free(p.health); /* after the operations, the multi and the share */
    if (curl) {
        readbuf_cleanup();
    }
    if (p.log != stdout) {
        fclose(p.log);
    }
    close(p.epfd);
    close(p.sigfd);
    return rv;
}
