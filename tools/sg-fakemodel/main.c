/*
 * sg-fakemodel: a scripted streaming server that plays the faults
 * streamguard exists for.  Options here; the loop is in loop.c.  The
 * manual is docs/sg-fakemodel.md.
 */
#include "fakemodel.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage[] =
    "usage: sg-fakemodel [options]\n"
    "\n"
    "A scripted fault server for AI token streams: HTTP/1.1 (chunked), h2c and\n"
    "TLS (ALPN h2, http/1.1) on one loopback port.  The first line on stdout is\n"
    "the port number.  Scenarios are chosen by path and query, e.g.\n"
    "  /v1/chat/completions?n=20&gap=50&stall_after=5&stall=forever\n"
    "The log is at GET /_log (POST /_log/reset clears it).  See docs/sg-fakemodel.md.\n"
    "\n"
    "options:\n"
    "  -p, --port N            port on 127.0.0.1 (default 0: any free port)\n"
    "  -6, --ipv6              also listen on [::1], same port\n"
    "      --no-tls            do not accept TLS (cleartext HTTP/1.1 and h2c only)\n"
    "      --no-h2             TLS offers http/1.1 only (h2c still works)\n"
    "      --cert FILE         PEM certificate chain instead of a generated one\n"
    "      --key FILE          PEM private key for --cert\n"
    "      --write-ca FILE     write the certificate clients should trust\n"
    "      --cert-cn-only NAME the generated certificate names NAME in its CN\n"
    "                          only, with no subject alternative name\n"
    "      --log-cap N         events kept in the log ring (default 100000)\n"
    "      --log-file FILE     also append every event as a JSON line to FILE\n"
    "      --h2-max-streams N  SETTINGS_MAX_CONCURRENT_STREAMS (default 10000)\n"
    "      --max-body BYTES    largest request body accepted (default 16777216)\n"
    "      --sigv4-key AKID:SECRET  model paths need an AWS SigV4 signature by this\n"
    "                          key, else 403 (a test key: it shows in ps)\n"
    "      --record DIR        every request's bytes as they arrived, one file each:\n"
    "                          DIR/<id>.req\n"
    "  -q, --quiet             no banner on stderr\n"
    "  -h, --help              this text\n"
    "  -V, --version           print the version\n";

enum {
    OPT_NO_TLS = 256,
    OPT_NO_H2,
    OPT_CERT,
    OPT_KEY,
    OPT_WRITE_CA,
    OPT_CERT_CN_ONLY,
    OPT_LOG_CAP,
    OPT_LOG_FILE,
    OPT_H2_MAX_STREAMS,
    OPT_MAX_BODY,
    OPT_SIGV4_KEY,
    OPT_RECORD
};

static int parse_num(const char *opt, const char *v, unsigned long long min,
                     unsigned long long max, unsigned long long *out) {
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (v[0] == '\0' || v[0] == '-' || *end != '\0' || errno != 0 || x < min || x > max) {
        fprintf(stderr, "sg-fakemodel: %s: expected a number %llu..%llu, got '%s'\n", opt,
                min, max, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* Thousands of client sockets need thousands of descriptors. */
static void raise_nofile(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv) {
    sg_fm_options o;
    memset(&o, 0, sizeof(o));
    o.tls = 1;
    o.log_cap = 100000;
    o.h2_max_streams = 10000;
    o.max_body = 16u * 1024 * 1024;
    static const struct option longopts[] = {
        {"port", required_argument, NULL, 'p'},
        {"ipv6", no_argument, NULL, '6'},
        {"no-tls", no_argument, NULL, OPT_NO_TLS},
        {"no-h2", no_argument, NULL, OPT_NO_H2},
        {"cert", required_argument, NULL, OPT_CERT},
        {"key", required_argument, NULL, OPT_KEY},
        {"write-ca", required_argument, NULL, OPT_WRITE_CA},
        {"cert-cn-only", required_argument, NULL, OPT_CERT_CN_ONLY},
        {"log-cap", required_argument, NULL, OPT_LOG_CAP},
        {"log-file", required_argument, NULL, OPT_LOG_FILE},
        {"h2-max-streams", required_argument, NULL, OPT_H2_MAX_STREAMS},
        {"max-body", required_argument, NULL, OPT_MAX_BODY},
        {"sigv4-key", required_argument, NULL, OPT_SIGV4_KEY},
        {"record", required_argument, NULL, OPT_RECORD},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int ch;
    unsigned long long x;
    char sigv4_akid[129];
    while ((ch = getopt_long(argc, argv, ":p:6qhV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'p':
            if (parse_num("--port", optarg, 0, 65535, &x) != 0) {
                return 2;
            }
            o.port = (int)x;
            break;
        case '6':
            o.ipv6 = 1;
            break;
        case OPT_NO_TLS:
            o.tls = 0;
            break;
        case OPT_NO_H2:
            o.no_h2 = 1;
            o.tls_opts.no_h2 = 1;
            break;
        case OPT_CERT:
            o.tls_opts.cert_file = optarg;
            break;
        case OPT_KEY:
            o.tls_opts.key_file = optarg;
            break;
        case OPT_WRITE_CA:
            o.tls_opts.write_ca = optarg;
            break;
        case OPT_CERT_CN_ONLY:
            o.tls_opts.cn_only = optarg;
            break;
        case OPT_LOG_CAP:
            if (parse_num("--log-cap", optarg, 1, 100000000, &x) != 0) {
                return 2;
            }
            o.log_cap = (size_t)x;
            break;
        case OPT_LOG_FILE:
            o.log_file = optarg;
            break;
        case OPT_H2_MAX_STREAMS:
            if (parse_num("--h2-max-streams", optarg, 1, 1000000, &x) != 0) {
                return 2;
            }
            o.h2_max_streams = (uint32_t)x;
            break;
        case OPT_MAX_BODY:
            if (parse_num("--max-body", optarg, 0, 1ULL << 40, &x) != 0) {
                return 2;
            }
            o.max_body = (size_t)x;
            break;
        case OPT_SIGV4_KEY: {
            const char *colon = strchr(optarg, ':');
            if (colon == NULL || colon == optarg || colon[1] == '\0' ||
                (size_t)(colon - optarg) >= sizeof(sigv4_akid)) {
                fprintf(stderr, "sg-fakemodel: --sigv4-key takes ACCESS_KEY_ID:SECRET\n");
                return 2;
            }
            memcpy(sigv4_akid, optarg, (size_t)(colon - optarg));
            sigv4_akid[colon - optarg] = '\0';
            o.sigv4_akid = sigv4_akid;
            o.sigv4_secret = colon + 1;
            break;
        }
        case OPT_RECORD:
            o.record_dir = optarg;
            break;
        case 'q':
            o.quiet = 1;
            break;
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'V':
            printf("sg-fakemodel %s (nghttp2 %s, %s)\n", SG_FM_VERSION,
                   nghttp2_version(0)->version_str, OpenSSL_version(OPENSSL_VERSION));
            return 0;
        case ':':
            fprintf(stderr, "sg-fakemodel: %s needs a value (try --help)\n",
                    argv[optind - 1]);
            return 2;
        case '?':
        default:
            fprintf(stderr, "sg-fakemodel: unknown option '%s' (try --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "sg-fakemodel: unexpected argument '%s' (try --help)\n",
                argv[optind]);
        return 2;
    }
    if ((o.tls_opts.cert_file == NULL) != (o.tls_opts.key_file == NULL)) {
        fprintf(stderr, "sg-fakemodel: --cert and --key go together\n");
        return 2;
    }
    struct stat st;
    if (o.record_dir != NULL && (stat(o.record_dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
                                 access(o.record_dir, W_OK | X_OK) != 0)) {
        fprintf(stderr, "sg-fakemodel: --record %s: not a directory it can write in\n",
                o.record_dir);
        return 2;
    }
    if (!o.tls && (o.tls_opts.cert_file != NULL || o.tls_opts.write_ca != NULL)) {
        fprintf(stderr, "sg-fakemodel: --cert/--write-ca make no sense with --no-tls\n");
        return 2;
    }
    raise_nofile();
    /* Writes to a vanished peer must fail with EPIPE, not kill the server. */
    signal(SIGPIPE, SIG_IGN);
    return sg_fm_serve(&o);
}
