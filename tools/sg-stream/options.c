/*
 * options.c - the command line, into a struct config.
 *
 * getopt_long over the option table; apply() checks and applies one option
 * (policy setters for the clocks, retries and caps, the request and framing
 * settings for the transports), and config_parse() then checks what only
 * the whole line can tell: a ledger subcommand has no URL, a run has exactly
 * one, the backoff range, the method (POST when -d is given), and the
 * default terminal sentinel ([DONE] for sse unless --done-event, --done or
 * --no-done says otherwise).  Every mistake is one usage_error() line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <openssl/crypto.h>

#include "sg_stream.h"

#define DEFAULT_MAX_EVENT ((size_t)1024 * 1024)

enum {
    OPT_BUDGET = 256,
    OPT_FIRST_ITEM,
    OPT_IDLE,
    OPT_STREAM_TOTAL,
    OPT_CONNECT_TIMEOUT,
    OPT_ATTEMPT_TIMEOUT,
    OPT_FLOOR,
    OPT_ATTEMPTS,
    OPT_BACKOFF_BASE,
    OPT_BACKOFF_MAX,
    OPT_IDEMPOTENCY_KEY,
    OPT_IDEMPOTENT,
    OPT_CACERT,
    OPT_HTTP11,
    OPT_HTTP2,
    OPT_DEADLINE_HEADER,
    OPT_GRPC_TIMEOUT,
    OPT_FORMAT,
    OPT_DONE,
    OPT_DONE_EVENT,
    OPT_NO_DONE,
    OPT_SKIP_EVENT,
    OPT_PROFILE,
    OPT_FALLBACK,
    OPT_HEDGE_AFTER,
    OPT_MAX_HEDGES,
    OPT_ORDER,
    OPT_MAX_ITEMS,
    OPT_MAX_BYTES,
    OPT_MAX_EVENT_BYTES,
    OPT_OUTPUT,
    OPT_REPORT,
    OPT_LEDGER,
    OPT_UNRESOLVED,
    OPT_RECONCILE,
    OPT_LEDGER_INIT,
    OPT_OTLP,
    OPT_AWS_SIGV4,
    OPT_PRICE_IN,
    OPT_PRICE_OUT,
    OPT_PRICE_CACHED,
};

static const struct option long_opts[] = {
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
    {"idempotency-key", required_argument, NULL, OPT_IDEMPOTENCY_KEY},
    {"idempotent", no_argument, NULL, OPT_IDEMPOTENT},
    {"request", required_argument, NULL, 'X'},
    {"header", required_argument, NULL, 'H'},
    {"data", required_argument, NULL, 'd'},
    {"cacert", required_argument, NULL, OPT_CACERT},
    {"aws-sigv4", required_argument, NULL, OPT_AWS_SIGV4},
    {"http1.1", no_argument, NULL, OPT_HTTP11},
    {"http2", no_argument, NULL, OPT_HTTP2},
    {"deadline-header", required_argument, NULL, OPT_DEADLINE_HEADER},
    {"grpc-timeout", no_argument, NULL, OPT_GRPC_TIMEOUT},
    {"format", required_argument, NULL, OPT_FORMAT},
    {"done", required_argument, NULL, OPT_DONE},
    {"done-event", required_argument, NULL, OPT_DONE_EVENT},
    {"no-done", no_argument, NULL, OPT_NO_DONE},
    {"skip-event", required_argument, NULL, OPT_SKIP_EVENT},
    {"profile", required_argument, NULL, OPT_PROFILE},
    {"fallback", required_argument, NULL, OPT_FALLBACK},
    {"hedge-after", required_argument, NULL, OPT_HEDGE_AFTER},
    {"max-hedges", required_argument, NULL, OPT_MAX_HEDGES},
    {"order", required_argument, NULL, OPT_ORDER},
    {"max-items", required_argument, NULL, OPT_MAX_ITEMS},
    {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
    {"max-event-bytes", required_argument, NULL, OPT_MAX_EVENT_BYTES},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"report", required_argument, NULL, OPT_REPORT},
    {"ledger", required_argument, NULL, OPT_LEDGER},
    {"unresolved", no_argument, NULL, OPT_UNRESOLVED},
    {"reconcile", required_argument, NULL, OPT_RECONCILE},
    {"ledger-init", no_argument, NULL, OPT_LEDGER_INIT},
    {"otlp", required_argument, NULL, OPT_OTLP},
    {"price-in", required_argument, NULL, OPT_PRICE_IN},
    {"price-out", required_argument, NULL, OPT_PRICE_OUT},
    {"price-cached", required_argument, NULL, OPT_PRICE_CACHED},
    {"write-out", required_argument, NULL, 'w'},
    {"quiet", no_argument, NULL, 'q'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static bool takes_duration(int opt) {
    switch (opt) {
    case OPT_BUDGET:
    case OPT_FIRST_ITEM:
    case OPT_IDLE:
    case OPT_STREAM_TOTAL:
    case OPT_CONNECT_TIMEOUT:
    case OPT_ATTEMPT_TIMEOUT:
    case OPT_FLOOR:
    case OPT_BACKOFF_BASE:
    case OPT_BACKOFF_MAX:
        return true;
    default:
        return false;
    }
}

/* libcurl's CURLOPT_AWS_SIGV4 form: one to four ':'-separated parts of
 * letters, digits, '-', '_' and '.', none empty. */
static bool aws_sigv4_valid(const char *s) {
    int parts = 1;
    size_t run = 0;
    for (const char *p = s;; p++) {
        if (*p == ':' || *p == '\0') {
            if (run == 0) {
                return false;
            }
            if (*p == '\0') {
                return true;
            }
            if (++parts > 4) {
                return false;
            }
            run = 0;
            continue;
        }
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.';
        if (!ok) {
            return false;
        }
        run++;
    }
}

/* --aws-sigv4: the credentials from the environment, and the session
 * token (temporary credentials) as the header AWS reads it from.  Returns
 * 0 or an exit code. */
static int aws_credentials(struct config *c) {
    if (c->http2) {
        return usage_error("--aws-sigv4 signs through libcurl; streamguard's own HTTP/2 "
                           "transport does not sign: drop --http2%s",
                           "");
    }
    /* CURLOPT_AWS_SIGV4 came with libcurl 7.75.0: asked of the library run,
     * which may be older than the one built against */
    const curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    if (v->version_num < 0x074b00) {
        return usage_error("--aws-sigv4 needs libcurl 7.75 or later, this is %s",
                           v->version);
    }
    const char *id = getenv("AWS_ACCESS_KEY_ID");
    const char *secret = getenv("AWS_SECRET_ACCESS_KEY");
    if (id == NULL || *id == '\0' || secret == NULL || *secret == '\0') {
        return usage_error("--aws-sigv4 needs AWS_ACCESS_KEY_ID and "
                           "AWS_SECRET_ACCESS_KEY in the environment%s",
                           "");
    }
    if (strchr(id, ':') != NULL) {
        return usage_error("AWS_ACCESS_KEY_ID must not contain ':'%s", "");
    }
    c->aws_key_id = id;
    c->aws_secret = secret;
    const char *token = getenv("AWS_SESSION_TOKEN");
    if (token != NULL && *token != '\0') {
        if (strpbrk(token, "\r\n") != NULL) {
            return usage_error("AWS_SESSION_TOKEN must be one line%s", "");
        }
        size_t n = strlen("x-amz-security-token: ") + strlen(token) + 1;
        char *h = malloc(n);
        if (h == NULL) {
            return EXIT_INTERNAL;
        }
        snprintf(h, n, "x-amz-security-token: %s", token);
        struct curl_slist *l = curl_slist_append(c->headers, h);
        OPENSSL_cleanse(h, n);
        free(h);
        if (l == NULL) {
            return EXIT_INTERNAL;
        }
        c->headers = l;
    }
    return 0;
}

/* An http:// or https:// URL that libcurl parses (its own URL parser, so
 * what passes here is what it would dial): 0, else the usage error, before
 * anything is sent - a URL it cannot use is the operator's mistake, not a
 * network failure to retry. */
static int check_url(const char *what, const char *url) {
    CURLU *u = curl_url();
    if (u == NULL) {
        return usage_error("out of memory checking %s", what);
    }
    char *scheme = NULL;
    CURLUcode rc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (rc == CURLUE_OK) {
        rc = curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    }
    int code = 0;
    char shown[512]; /* its password and query values masked */
    if (rc != CURLUE_OK) {
        masked_url(shown, sizeof(shown), url, true);
#if LIBCURL_VERSION_NUM >= 0x075000
        code = usage_error("%s: '%s' is not a URL libcurl can use: %s", what, shown,
                           curl_url_strerror(rc));
#else
        code = usage_error("%s: '%s' is not a URL libcurl can use", what, shown);
#endif
    } else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        masked_url(shown, sizeof(shown), url, true);
        code = usage_error("%s: '%s' is not an http:// or https:// URL", what, shown);
    }
    curl_free(scheme);
    curl_url_cleanup(u);
    return code;
}

/* Applies one option; returns 0 or an exit code. */
static int apply(struct config *c, int opt, const char *arg) {
    int64_t d = 0;
    uint64_t n = 0;
    int rv = 0;
    /* the floor alone may be 0: it is a reserve, not a clock */
    bool zero_floor = opt == OPT_FLOOR && strcmp(arg, "0") == 0;
    if (takes_duration(opt) && !zero_floor && parse_duration(arg, &d) != 0) {
        return usage_error("invalid duration '%s'", arg);
    }
    switch (opt) {
    case OPT_BUDGET:
        c->budget_ns = d;
        rv = sg_op_options_set_budget(c->policy, d);
        break;
    case OPT_FIRST_ITEM:
        rv = sg_op_options_set_first_item_timeout(c->policy, d);
        break;
    case OPT_IDLE:
        rv = sg_op_options_set_idle_timeout(c->policy, d);
        break;
    case OPT_STREAM_TOTAL:
        rv = sg_op_options_set_stream_timeout(c->policy, d);
        break;
    case OPT_CONNECT_TIMEOUT:
        c->connect_ns = d;
        rv = sg_op_options_set_connect_timeout(c->policy, d);
        break;
    case OPT_ATTEMPT_TIMEOUT:
        rv = sg_op_options_set_attempt_timeout(c->policy, d);
        break;
    case OPT_FLOOR:
        c->floor_ns = d;
        rv = sg_op_options_set_floor(c->policy, d);
        break;
    case OPT_BACKOFF_BASE:
        c->backoff_base = d;
        break;
    case OPT_BACKOFF_MAX:
        c->backoff_max = d;
        break;
    case OPT_ATTEMPTS:
        if (parse_count(arg, SG_OP_MAX_ATTEMPTS, &n) != 0 || n == 0) {
            return usage_error("--attempts takes a number from 1 to %d, not '%s'",
                               SG_OP_MAX_ATTEMPTS, arg);
        }
        rv = sg_op_options_set_max_attempts(c->policy, (uint32_t)n);
        c->attempts_set = true;
        break;
    case OPT_IDEMPOTENCY_KEY:
        c->idem_key = arg;
        rv = sg_op_options_set_idempotency_key(c->policy, arg);
        if (rv != 0) {
            return usage_error(
                "invalid idempotency key '%s' (1 to 127 characters from '!' "
                "to '~': no spaces)",
                arg);
        }
        break;
    case OPT_IDEMPOTENT:
        rv = sg_op_options_set_idempotent(c->policy, true);
        break;
    case 'X':
        c->method = arg;
        break;
    case 'H': {
        /* named, never shown whole: its value may be a key */
        int nl = (int)header_name_len(arg);
        if (strpbrk(arg, "\r\n") != NULL) {
            return usage_error("header '%.*s' has a CR or LF in it (a value read from a "
                               "file with a line ending?)",
                               nl, arg);
        }
        if (strchr(arg, ':') == NULL) {
            /* a name and a space ("Authorization Bearer ..."): the name;
             * one bare word may be the key itself: nothing of it */
            if (arg[nl] == ' ' || arg[nl] == '\t') {
                return usage_error("invalid header '%.*s...' (expected 'Name: value')",
                                   nl, arg);
            }
            return usage_error("invalid header of %zu bytes with no ':' (expected 'Name: "
                               "value')",
                               strlen(arg));
        }
        struct curl_slist *l = curl_slist_append(c->headers, arg);
        if (l == NULL) {
            return EXIT_INTERNAL;
        }
        c->headers = l;
        break;
    }
    case 'd':
        free(c->body);
        if (arg[0] == '@') {
            c->body = read_file(arg + 1, &c->body_len);
            if (c->body == NULL) {
                fprintf(stderr, "%s: cannot read '%s': %s\n", prog, arg + 1,
                        strerror(errno));
                return EXIT_USAGE;
            }
        } else {
            c->body_len = strlen(arg);
            c->body = malloc(c->body_len + 1);
            if (c->body == NULL) {
                return EXIT_INTERNAL;
            }
            memcpy(c->body, arg, c->body_len + 1);
        }
        break;
    case OPT_CACERT:
        c->cafile = arg;
        break;
    case OPT_AWS_SIGV4:
        if (!aws_sigv4_valid(arg)) {
            return usage_error(
                "--aws-sigv4 takes PROVIDER1[:PROVIDER2[:REGION[:SERVICE]]] "
                "as libcurl does, e.g. aws:amz:us-east-1:bedrock, not '%s'",
                arg);
        }
        c->aws_sigv4 = arg;
        break;
    case OPT_HTTP11: /* the later of --http1.1 and --http2 wins, as in curl */
        c->http_version = CURL_HTTP_VERSION_1_1;
        c->http11 = true;
        c->http2 = false;
        break;
    case OPT_HTTP2:
        c->http_version = CURL_HTTP_VERSION_2_0;
        c->http2 = true;
        c->http11 = false;
        break;
    case OPT_DEADLINE_HEADER:
        rv = sg_op_options_set_deadline_header(c->policy, arg);
        if (rv != 0) {
            return usage_error("invalid header name '%s'", arg);
        }
        c->deadline_header = true;
        break;
    case OPT_GRPC_TIMEOUT:
        c->grpc_timeout = true;
        break;
    case OPT_HEDGE_AFTER:
        if (parse_hedge_after(arg, &c->hedge) != 0) {
            return usage_error("--hedge-after takes a duration or auto[:Q][,D] (Q from "
                               "0.5 to 0.999), not '%s'",
                               arg);
        }
        break;
    case OPT_ORDER: {
        sg_endpoint_order order;
        if (parse_order(arg, &order) != 0) {
            return usage_error("--order takes configured or first_token, not '%s'", arg);
        }
        (void)sg_op_options_set_endpoint_order(c->policy, order);
        break;
    }
    case OPT_MAX_HEDGES:
        if (parse_count(arg, SG_OP_MAX_HEDGES, &n) != 0 || n == 0) {
            return usage_error("--max-hedges takes a number from 1 to %d, not '%s'",
                               SG_OP_MAX_HEDGES, arg);
        }
        c->max_hedges = (uint32_t)n;
        break;
    case OPT_FALLBACK:
        if (c->nfallback == MAX_FALLBACKS) {
            return usage_error("--fallback is given at most %d times", MAX_FALLBACKS);
        }
        if (check_url("--fallback", arg) != 0) {
            return EXIT_USAGE;
        }
        c->fallback[c->nfallback++] = arg;
        break;
    case OPT_PROFILE: {
        sg_stream_config scratch;
        sg_stream_config_init(&scratch);
        if (sg_profile_framing(arg, &scratch) != 0) {
            return usage_error(
                "--profile takes openai, openai-responses, anthropic, gemini, "
                "ollama, bedrock-converse or bedrock-invoke, not '%s'",
                arg);
        }
        c->profile = arg;
        break;
    }
    case OPT_FORMAT:
        c->format_set = true;
        if (strcmp(arg, "sse") == 0) {
            c->format = SG_FORMAT_SSE;
        } else if (strcmp(arg, "ndjson") == 0) {
            c->format = SG_FORMAT_NDJSON;
        } else if (strcmp(arg, "eventstream") == 0) {
            c->format = SG_FORMAT_EVENTSTREAM;
        } else {
            return usage_error("--format takes sse, ndjson or eventstream, not '%s'",
                               arg);
        }
        break;
    case OPT_DONE:
        if (*arg == '\0') {
            return usage_error("--done needs a non-empty sentinel%s", "");
        }
        c->done = arg;
        c->done_set = true;
        break;
    case OPT_DONE_EVENT:
        if (*arg == '\0') {
            return usage_error("--done-event needs a non-empty event type%s", "");
        }
        c->done_event = arg;
        c->done_event_set = true;
        break;
    case OPT_NO_DONE:
        c->no_done = true;
        break;
    case OPT_SKIP_EVENT:
        if (*arg == '\0' || c->nskip == 16) {
            return usage_error("--skip-event takes a non-empty type, at most 16 times%s",
                               "");
        }
        c->skip[c->nskip++] = arg;
        break;
    case OPT_MAX_ITEMS:
    case OPT_MAX_BYTES:
        if (parse_count(arg, UINT64_MAX, &n) != 0 || n == 0) {
            return usage_error("expected a positive count, not '%s'", arg);
        }
        rv = opt == OPT_MAX_ITEMS ? sg_op_options_set_max_items(c->policy, n)
                                  : sg_op_options_set_max_bytes(c->policy, n);
        break;
    case OPT_MAX_EVENT_BYTES:
        if (parse_count(arg, (uint64_t)1 << 30, &n) != 0 || n < 16) {
            return usage_error("--max-event-bytes takes 16 .. 1073741824, not '%s'", arg);
        }
        c->max_event = (size_t)n;
        break;
    case OPT_OUTPUT:
        if (strcmp(arg, "data") == 0) {
            c->run.output = OUT_DATA;
        } else if (strcmp(arg, "jsonl") == 0) {
            c->run.output = OUT_JSONL;
        } else if (strcmp(arg, "none") == 0) {
            c->run.output = OUT_NONE;
        } else {
            return usage_error("--output takes data, jsonl or none, not '%s'", arg);
        }
        break;
    case OPT_REPORT:
        c->report = arg;
        break;
    case OPT_LEDGER:
        c->ledger_dir = arg;
        break;
    case OPT_OTLP:
        c->otlp = arg;
        break;
    case OPT_UNRESOLVED:
        c->unresolved = true;
        break;
    case OPT_RECONCILE:
        c->reconcile = arg;
        break;
    case OPT_LEDGER_INIT:
        c->ledger_init = true;
        break;
    case OPT_PRICE_IN:
    case OPT_PRICE_OUT:
    case OPT_PRICE_CACHED: {
        char err[256];
        const char *name = opt == OPT_PRICE_IN    ? "price-in"
                           : opt == OPT_PRICE_OUT ? "price-out"
                                                  : "price-cached";
        if (price_option(&c->price, name, arg, err, sizeof(err)) != 0) {
            return usage_error("--%s", err);
        }
        break;
    }
    case 'w':
        c->write_out = arg;
        break;
    case 'q':
        c->run.quiet = true;
        break;
    default:
        return EXIT_USAGE;
    }
    if (rv != 0) {
        fprintf(stderr, "%s: %s for option near '%s' (see --help)\n", prog,
                sg_strerror(rv), arg ? arg : "");
        return EXIT_USAGE;
    }
    return 0;
}

/* After the options: the checks only the whole command line can make. */

/* The framing the flags say: a profile's semantics (flags given explicitly
 * still win), or SSE ending at "[DONE]" unless told otherwise.  Every
 * value was checked when its flag was read, so the setters cannot fail. */
static void framing_from_flags(struct config *c) {
    sg_stream_config *f = &c->framing;
    sg_stream_config_init(f);
    (void)sg_stream_config_set_max_line(f, c->max_event);
    (void)sg_stream_config_set_max_event(f, c->max_event);
    if (c->nskip > 0) {
        (void)sg_stream_config_set_skip_types(f, c->skip);
    }
    if (c->profile != NULL) {
        (void)sg_profile_framing(c->profile, f);
    }
    if (c->format_set) {
        (void)sg_stream_config_set_format(f, c->format);
    }
    if (c->done_set) {
        (void)sg_stream_config_set_terminal_data(f, c->done);
    }
    if (c->done_event_set) {
        (void)sg_stream_config_set_terminal_type(f, c->done_event);
    }
    if (c->profile == NULL && sg_stream_config_format(f) == SG_FORMAT_SSE &&
        !c->no_done && !c->done_set && !c->done_event_set) {
        (void)sg_stream_config_set_terminal_data(f, "[DONE]");
    }
    if (c->no_done) {
        (void)sg_stream_config_set_terminal_data(f, NULL);
        (void)sg_stream_config_set_terminal_type(f, NULL);
        (void)sg_stream_config_set_end_required(f, false);
        (void)sg_stream_config_set_end_at_eof(f, false);
    }
}

static int finish(struct config *c, int argc, char **argv) {
    if (config_is_ledger_command(c)) {
        if (c->ledger_dir == NULL) {
            return usage_error(
                "--unresolved, --reconcile and --ledger-init need --ledger LOCATION%s",
                "");
        }
        if (optind != argc) {
            return usage_error("unexpected argument '%s'", argv[optind]);
        }
        return 0; /* no request: nothing else applies */
    }
    if (optind + 1 != argc) {
        return usage_error(optind == argc ? "missing URL%s" : "unexpected argument '%s'",
                           optind == argc ? "" : argv[optind + 1]);
    }
    c->url = argv[optind];
    if (check_url("URL", c->url) != 0) {
        return EXIT_USAGE;
    }
    if (c->max_hedges > 0 && c->hedge.fixed == 0) {
        return usage_error("--max-hedges needs --hedge-after%s", "");
    }
    if (c->hedge.fixed > 0) {
        uint32_t hedges = c->max_hedges > 0 ? c->max_hedges : 1;
        (void)hedge_apply(c->policy, &c->hedge, hedges);
        if (!c->attempts_set) {
            /* hedges are attempts: room for them, unless --attempts says */
            (void)sg_op_options_set_max_attempts(c->policy, 1 + hedges);
        }
    }
    if (c->nfallback > 0 && c->http2) {
        return usage_error("--fallback goes through libcurl (which negotiates HTTP/2 "
                           "itself): drop --http2%s",
                           "");
    }
    if (set_backoff(c->policy, c->backoff_base, c->backoff_max) != 0) {
        return usage_error("--backoff-max must not be below --backoff-base%s", "");
    }
    char missing[128];
    if (price_check(&c->price, "--", missing, sizeof(missing)) != 0) {
        return usage_error("%s", missing);
    }
    /* the same prices for the URL and every fallback */
    for (int i = 0; i <= c->nfallback; i++) {
        int rv = price_apply(c->policy, (uint32_t)i, &c->price);
        if (rv != 0) {
            fprintf(stderr, "%s: the prices: %s\n", prog, sg_strerror(rv));
            return EXIT_INTERNAL;
        }
    }
    if (c->aws_sigv4 != NULL) {
        int code = aws_credentials(c);
        if (code != 0) {
            return code;
        }
    }
    const char *method = c->method ? c->method : (c->body ? "POST" : "GET");
    if (sg_op_options_set_method(c->policy, method) != 0) {
        return usage_error("invalid method '%s'", method);
    }
    c->method = method;
    if (c->hedge.fixed > 0 && !sg_op_options_repeatable(c->policy)) {
        return usage_error("--hedge-after repeats the request: a %s needs "
                           "--idempotency-key or --idempotent",
                           method);
    }
    framing_from_flags(c);
    return 0;
}

int config_parse(struct config *c, int argc, char **argv) {
    memset(c, 0, sizeof(*c));
    if (sg_op_options_new(&c->policy) != 0) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return EXIT_INTERNAL;
    }
    sg_op_options_set_max_attempts(c->policy, 1);
    c->price = PRICE_NONE;
    c->max_event = DEFAULT_MAX_EVENT;
    c->http_version = CURL_HTTP_VERSION_NONE;

    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":X:H:d:w:qhV", long_opts, NULL)) != -1) {
        int code;
        switch (opt) {
        case 'h':
            usage(stdout);
            return -1;
        case 'V':
            print_version();
            return -1;
        case '?':
        case ':': {
            /* a short one by its letter (in a group, argv[optind - 1] may be
             * another argument), a long one without what follows its '=' */
            char name[64];
            const char *a = argv[optind - 1];
            const char *g = optind < argc ? argv[optind] : "";
            /* an unknown letter before the end of its group: optind is
             * still on the group */
            bool in_group = optopt > 0 && optopt < 128 && g[0] == '-' && g[1] != '-' &&
                            strchr(g + 1, optopt) != NULL;
            bool is_long = !in_group && strncmp(a, "--", 2) == 0;
            if (is_long) {
                snprintf(name, sizeof(name), "%.*s", (int)strcspn(a, "="), a);
            } else {
                snprintf(name, sizeof(name), "-%c", optopt);
            }
            if (opt == ':') {
                return usage_error("option '%s' needs a value", name);
            }
            return is_long && optopt != 0
                       ? usage_error("option '%s' takes no value", name)
                       : usage_error("unknown option '%s'", name);
        }
        default:
            code = apply(c, opt, optarg);
            if (code != 0) {
                return code;
            }
            break;
        }
    }
    return finish(c, argc, argv);
}

/* --unresolved, --reconcile or --ledger-init: a ledger subcommand, not a run. */
bool config_is_ledger_command(const struct config *c) {
    return c->unresolved || c->reconcile != NULL || c->ledger_init;
}

void config_free(struct config *c) {
    sg_op_options_free(c->policy);
    c->policy = NULL;
    sg_op_observer_free(c->observer);
    c->observer = NULL;
    curl_slist_free_all(c->headers);
    c->headers = NULL;
    free(c->body);
    c->body = NULL;
}
