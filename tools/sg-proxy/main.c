/*
 * main.c - sg-proxy's options, its listening socket, the loop, signals.
 *
 * The one-route mode: every request goes to --upstream (its path first,
 * then the client's path and query), guarded by the flags sg-stream has
 * for the same things.  SIGTERM or SIGINT drains: no new connections, the
 * streams in flight have --drain to finish, then they are cancelled (their
 * reports written), and sg-proxy exits 0.
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
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"

char sg_proxy_tag_listen, sg_proxy_tag_multi, sg_proxy_tag_signal;

static const char *const prog = "sg-proxy";

static void usage(FILE *f) {
    fprintf(
        f,
        "Usage: sg-proxy --upstream URL --profile NAME [options]\n"
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
        "  --cacert FILE          CA certificates for https:// upstreams\n"
        "Clocks, retries, hedging (as sg-stream's):\n"
        "  --budget D             the whole operation (60s); an inbound X-Deadline-Ms\n"
        "                         or grpc-timeout shrinks it\n"
        "  --first-item D         time to first token per attempt\n"
        "  --idle D               longest gap between items\n"
        "  --stream-total D       longest stream per attempt\n"
        "  --connect-timeout D    --attempt-timeout D    --floor D\n"
        "  --attempts N           at most N attempts (1..1000; 3)\n"
        "  --backoff-base D       --backoff-max D\n"
        "  --idempotent           every request is safe to repeat (else only with\n"
        "                         an Idempotency-Key or an idempotent method)\n"
        "  --hedge-after D        --max-hedges N\n"
        "  --max-items N          --max-bytes N\n"
        "Clients:\n"
        "  --max-connections N    open at once (256); more are closed at once\n"
        "  --header-timeout D     a request head must arrive within D (10s): 408\n"
        "  --max-body BYTES       largest request body (8388608): 413\n"
        "  --client-buffer BYTES  most bytes waiting for a slow client (1048576)\n"
        "  --transit-allowance D  taken off an inbound deadline (5ms)\n"
        "  --drain D              on SIGTERM, how long streams may finish (10s)\n"
        "  --log FILE             report lines there (default: stdout)\n"
        "  -h, --help             -V, --version\n");
}

#include <stdarg.h>

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see --help)\n");
    va_end(ap);
    return 2;
}

enum {
    OPT_LISTEN = 256,
    OPT_ALLOW_REMOTE,
    OPT_UPSTREAM,
    OPT_PROFILE,
    OPT_FALLBACK,
    OPT_CACERT,
    OPT_BUDGET,
    OPT_FIRST_ITEM,
    OPT_IDLE,
    OPT_STREAM_TOTAL,
    OPT_CONNECT_TIMEOUT,
    OPT_ATTEMPT_TIMEOUT,
    OPT_FLOOR,
    OPT_ATTEMPTS,
    OPT_BACKOFF_BASE,
    OPT_BACKOFF_MAX,
    OPT_IDEMPOTENT,
    OPT_HEDGE_AFTER,
    OPT_MAX_HEDGES,
    OPT_MAX_ITEMS,
    OPT_MAX_BYTES,
    OPT_MAX_CONNECTIONS,
    OPT_HEADER_TIMEOUT,
    OPT_MAX_BODY,
    OPT_CLIENT_BUFFER,
    OPT_TRANSIT,
    OPT_DRAIN,
    OPT_LOG,
};

static const struct option longopts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"allow-remote", no_argument, NULL, OPT_ALLOW_REMOTE},
    {"upstream", required_argument, NULL, OPT_UPSTREAM},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"fallback", required_argument, NULL, OPT_FALLBACK},
    {"cacert", required_argument, NULL, OPT_CACERT},
    {"budget", required_argument, NULL, OPT_BUDGET},
    {"first-item", required_argument, NULL, OPT_FIRST_ITEM},
    {"idle", required_argument, NULL, OPT_IDLE},
    {"stream-total", required_argument, NULL, OPT_STREAM_TOTAL},
    {"connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT},
    {"attempt-timeout", required_argument, NULL, OPT_ATTEMPT_TIMEOUT},
    {"floor", required_argument, NULL, OPT_FLOOR},
    {"attempts", required_argument, NULL, OPT_ATTEMPTS},
    {"backoff-base", required_argument, NULL, OPT_BACKOFF_BASE},
    {"backoff-max", required_argument, NULL, OPT_BACKOFF_MAX},
    {"idempotent", no_argument, NULL, OPT_IDEMPOTENT},
    {"hedge-after", required_argument, NULL, OPT_HEDGE_AFTER},
    {"max-hedges", required_argument, NULL, OPT_MAX_HEDGES},
    {"max-items", required_argument, NULL, OPT_MAX_ITEMS},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"max-body", required_argument, NULL, OPT_MAX_BODY},
    {"client-buffer", required_argument, NULL, OPT_CLIENT_BUFFER},
    {"transit-allowance", required_argument, NULL, OPT_TRANSIT},
    {"drain", required_argument, NULL, OPT_DRAIN},
    {"log", required_argument, NULL, OPT_LOG},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

struct settings {
    const char *listen;
    bool allow_remote;
    const char *log;
    int64_t backoff_base, backoff_max, hedge_after;
    uint64_t max_hedges;
    bool backoff_set;
};

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

static int parse_args(int argc, char **argv, struct proxy *p, struct settings *s) {
    struct route *r = &p->route;
    sg_op_options_init(&r->policy);
    sg_op_options_set_budget(&r->policy, SG_SEC(60));
    sg_op_options_set_max_attempts(&r->policy, 3);
    int opt;
    int64_t d;
    uint64_t n;
    int rv;
    while ((opt = getopt_long(argc, argv, "hV", longopts, NULL)) != -1) {
        const char *arg = optarg;
        switch (opt) {
        case OPT_LISTEN:
            s->listen = arg;
            break;
        case OPT_ALLOW_REMOTE:
            s->allow_remote = true;
            break;
        case OPT_UPSTREAM:
            r->upstream = arg;
            if (upstream_url(arg, &r->upstream_len) != 0) {
                return usage_error(
                    "--upstream takes http(s)://host[:port][/path], not '%s'", arg);
            }
            break;
        case OPT_FALLBACK:
            if (r->nfallback == MAX_FALLBACKS) {
                return usage_error("at most 15 --fallback");
            }
            if (upstream_url(arg, &r->fallback_len[r->nfallback]) != 0) {
                return usage_error(
                    "--fallback takes http(s)://host[:port][/path], not '%s'", arg);
            }
            r->fallback[r->nfallback++] = arg;
            break;
        case OPT_PROFILE:
            r->profile = arg;
            memset(&r->framing, 0, sizeof(r->framing));
            if (sg_profile_framing(arg, &r->framing) != 0) {
                return usage_error("--profile: no profile '%s'", arg);
            }
            break;
        case OPT_CACERT:
            r->cafile = arg;
            break;
        case OPT_BUDGET:
        case OPT_FIRST_ITEM:
        case OPT_IDLE:
        case OPT_STREAM_TOTAL:
        case OPT_CONNECT_TIMEOUT:
        case OPT_ATTEMPT_TIMEOUT:
        case OPT_FLOOR:
        case OPT_BACKOFF_BASE:
        case OPT_BACKOFF_MAX:
        case OPT_HEDGE_AFTER:
        case OPT_HEADER_TIMEOUT:
        case OPT_TRANSIT:
        case OPT_DRAIN:
            if (parse_duration(arg, &d) != 0) {
                return usage_error("a duration like 300ms or 2s, not '%s'", arg);
            }
            rv = 0;
            if (opt == OPT_BUDGET) {
                rv = sg_op_options_set_budget(&r->policy, d);
            } else if (opt == OPT_FIRST_ITEM) {
                rv = sg_op_options_set_first_item_timeout(&r->policy, d);
            } else if (opt == OPT_IDLE) {
                rv = sg_op_options_set_idle_timeout(&r->policy, d);
            } else if (opt == OPT_STREAM_TOTAL) {
                rv = sg_op_options_set_stream_timeout(&r->policy, d);
            } else if (opt == OPT_CONNECT_TIMEOUT) {
                rv = sg_op_options_set_connect_timeout(&r->policy, d);
            } else if (opt == OPT_ATTEMPT_TIMEOUT) {
                rv = sg_op_options_set_attempt_timeout(&r->policy, d);
            } else if (opt == OPT_FLOOR) {
                rv = sg_op_options_set_floor(&r->policy, d);
            } else if (opt == OPT_BACKOFF_BASE) {
                s->backoff_base = d;
                s->backoff_set = true;
            } else if (opt == OPT_BACKOFF_MAX) {
                s->backoff_max = d;
                s->backoff_set = true;
            } else if (opt == OPT_HEDGE_AFTER) {
                s->hedge_after = d;
            } else if (opt == OPT_HEADER_TIMEOUT) {
                p->header_timeout = d;
            } else if (opt == OPT_TRANSIT) {
                p->transit_allowance = d;
            } else {
                p->drain = d;
            }
            if (rv != 0) {
                return usage_error("a duration out of range: '%s'", arg);
            }
            break;
        case OPT_ATTEMPTS:
            if (parse_count(arg, 1000, &n) != 0 || n == 0 ||
                sg_op_options_set_max_attempts(&r->policy, (uint32_t)n) != 0) {
                return usage_error("--attempts takes a number from 1 to 1000, not '%s'",
                                   arg);
            }
            break;
        case OPT_IDEMPOTENT:
            r->idempotent = true;
            sg_op_options_set_idempotent(&r->policy, true);
            break;
        case OPT_MAX_HEDGES:
            if (parse_count(arg, SG_OP_MAX_HEDGES, &n) != 0) {
                return usage_error("--max-hedges takes a small number, not '%s'", arg);
            }
            s->max_hedges = n;
            break;
        case OPT_MAX_ITEMS:
        case OPT_MAX_BYTES:
            if (parse_count(arg, UINT64_MAX, &n) != 0 || n == 0) {
                return usage_error("a count, not '%s'", arg);
            }
            if (opt == OPT_MAX_ITEMS) {
                sg_op_options_set_max_items(&r->policy, n);
            } else {
                sg_op_options_set_max_bytes(&r->policy, n);
            }
            break;
        case OPT_MAX_CONNECTIONS:
            if (parse_count(arg, 100000, &n) != 0 || n == 0) {
                return usage_error("--max-connections takes 1 to 100000, not '%s'", arg);
            }
            p->max_conns = (int)n;
            break;
        case OPT_MAX_BODY:
        case OPT_CLIENT_BUFFER:
            if (parse_count(arg, (uint64_t)1 << 30, &n) != 0 || n == 0) {
                return usage_error("a size in bytes up to 1 GiB, not '%s'", arg);
            }
            if (opt == OPT_MAX_BODY) {
                p->max_body = (size_t)n;
            } else {
                p->client_buffer = (size_t)n;
            }
            break;
        case OPT_LOG:
            s->log = arg;
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
    if (r->upstream == NULL || r->profile == NULL) {
        return usage_error("--upstream and --profile are required");
    }
    if (s->backoff_set && sg_op_options_set_backoff(
                              &r->policy, s->backoff_base ? s->backoff_base : SG_MS(100),
                              s->backoff_max ? s->backoff_max : SG_SEC(2)) != 0) {
        return usage_error("--backoff-max must be at least --backoff-base");
    }
    if (s->hedge_after > 0) {
        if (!r->idempotent) {
            return usage_error("--hedge-after repeats requests: it needs --idempotent");
        }
        if (sg_op_options_set_hedging(&r->policy, s->hedge_after,
                                      s->max_hedges ? (uint32_t)s->max_hedges : 1) != 0) {
            return usage_error("--hedge-after/--max-hedges out of range");
        }
    }
    r->name = "default";
    return 0;
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

static int run(struct proxy *p) {
    struct epoll_event ev[64];
    for (;;) {
        int64_t now = sg_clock_now(NULL);
        int64_t next = conns_expire(p, now);
        if (p->draining) {
            if (p->conns == NULL) {
                return 0;
            }
            if (now >= p->drain_deadline && !p->cancelled_all) {
                p->cancelled_all = true;
                conns_cancel_all(p); /* their reports are written as they end */
                sg_curl_multi_step(p->multi, 0);
            }
            next = sg_time_min(next, p->cancelled_all ? sg_time_add(now, SG_MS(100))
                                                      : p->drain_deadline);
        }
        int timeout = -1;
        if (next != SG_TIME_NEVER) {
            int64_t ms = next > now ? (next - now + SG_MS(1) - 1) / SG_MS(1) : 0;
            timeout = ms > 60000 ? 60000 : (int)ms;
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
                    start_drain(p);
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
        }
    }
}

int main(int argc, char **argv) {
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
    struct settings s;
    memset(&s, 0, sizeof(s));
    s.listen = "127.0.0.1:8787";
    int rv = parse_args(argc, argv, &p, &s);
    if (rv != 0) {
        return rv;
    }
    p.log = stdout;
    if (s.log != NULL && (p.log = fopen(s.log, "a")) == NULL) {
        fprintf(stderr, "%s: cannot open --log %s: %s\n", prog, s.log, strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigprocmask(SIG_BLOCK, &set, NULL);
    p.sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    p.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (p.sigfd < 0 || p.epfd < 0 || curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
        sg_curl_multi_new(&p.multi, NULL) != 0) {
        fprintf(stderr, "%s: cannot set up: %s\n", prog, strerror(errno));
        return 1;
    }
    rv = listen_on(&p, s.listen, s.allow_remote);
    if (rv != 0) {
        return rv;
    }
    add_fd(&p, p.lfd, &sg_proxy_tag_listen);
    add_fd(&p, sg_curl_multi_fd(p.multi), &sg_proxy_tag_multi);
    add_fd(&p, p.sigfd, &sg_proxy_tag_signal);
    rv = run(&p);
    conns_free(&p);
    sg_curl_multi_free(p.multi);
    curl_global_cleanup();
    if (p.log != stdout) {
        fclose(p.log);
    }
    close(p.epfd);
    close(p.sigfd);
    return rv;
}
