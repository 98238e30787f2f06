/*
 * usage.c - what sg-stream says about its own use.
 *
 * The --help text (the one place the flags and the exit statuses are listed
 * for the user; docs/sg-stream.md is the long form), the --version lines, and
 * usage_error(), which gives every bad argument the same one-line shape
 * "sg-stream: ... (see --help)" and the usage exit status, so a script can
 * tell a mistake in the command line from a failed operation.
 */
#include <stdio.h>

/* ares.h counts on <sys/types.h> for fd_set, which strict POSIX keeps out */
#include <sys/select.h>

#include <ares.h>
#include <nghttp2/nghttp2.h>
#include <openssl/crypto.h>

#include "sg_stream.h"

const char *const prog = "sg-stream";

void usage(FILE *f) {
    /* two calls: one literal would pass the 4095 bytes C compilers must take */
    fprintf(
        f,
        "Usage: sg-stream [options] URL\n"
        "Stream one guarded operation and print its items.\n"
        "\n"
        "Clocks (durations like 250ms, 2s, 1.5s, 1m, 1h; a bare number is seconds;\n"
        "absent = off):\n"
        "  --budget D            operation budget for all attempts and sleeps (60s)\n"
        "  --first-item D        attempt start -> first item\n"
        "  --idle D              item -> next item (keepalives do not count)\n"
        "  --stream-total D      attempt start -> end of stream\n"
        "  --connect-timeout D   connection establishment\n"
        "  --attempt-timeout D   per-attempt ceiling\n"
        "  --floor D             budget reserve never leased (0)\n"
        "Retries:\n"
        "  --attempts N          attempts including the first, 1..1000 (1)\n"
        "  --backoff-base D      backoff base (100ms)   --backoff-max D  cap (10s)\n"
        "  --idempotency-key KEY sent as Idempotency-Key on every attempt\n"
        "  --idempotent          declare the request safe to repeat\n"
        "  --fallback URL        next endpoint after a retryable failure (repeatable,\n"
        "                        15; same method, headers and body; one budget)\n"
        "  --hedge-after D       no first item after D: a second attempt beside it (on\n"
        "                        the next --fallback); the first to deliver wins;\n"
        "                        auto[:Q][,D]: after the endpoint's Q-quantile (0.95)\n"
        "                        of first tokens once learned, else D (1s)\n"
        "  --max-hedges N        hedges in flight beside the first, 1..4 (1)\n"
        "  --order configured|first_token  the first attempt to the fastest starter\n"
        "Request:\n"
        "  -X, --request METHOD  method (GET; POST when -d is given)\n"
        "  -H, --header 'N: v'   request header (repeatable)\n"
        "  -d, --data DATA|@FILE request body (implies POST)\n"
        "  --cacert FILE         trust the CA certificates in FILE\n"
        "  --aws-sigv4 PROVIDER  sign with AWS Signature V4 through libcurl, e.g.\n"
        "                        aws:amz:us-east-1:bedrock; credentials from\n"
        "                        AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and\n"
        "                        AWS_SESSION_TOKEN); not with --http2\n"
        "  --http1.1             HTTP/1.1 through libcurl\n"
        "  --http2               streamguard's own HTTP/2 transport (h2c for http://);\n"
        "                        https:// uses it whenever the server negotiates h2\n");
    fprintf(
        f,
        "Propagation:\n"
        "  --deadline-header NAME  stamp each attempt's lease in whole ms: how long\n"
        "                        this client will wait for it, min(--attempt-timeout,\n"
        "                        remaining budget - floor)\n"
        "  --grpc-timeout        also stamp grpc-timeout with the same lease\n"
        "Cost (prices per million tokens, the same for every endpoint; decimals):\n"
        "  --price-in X          input tokens (needs --price-out)\n"
        "  --price-out Y         output tokens, reasoning included\n"
        "  --price-cached Z      cached input tokens (the input price)\n");
    /* in two parts: one string literal is at most 4095 bytes in C11 */
    fprintf(
        f,
        "Stream:\n"
        "  --format sse|ndjson|eventstream\n"
        "                        framing (sse; eventstream: AWS's binary messages)\n"
        "  --done DATA           terminal sentinel: SSE data, or an NDJSON line ([DONE] "
        "for sse)\n"
        "  --done-event TYPE     terminal event type (e.g. message_stop)\n"
        "  --no-done             no sentinel: a complete body is a clean end\n"
        "  --skip-event TYPE     SSE event type that is not an item (repeatable, 16)\n"
        "  --profile NAME        a provider's stream semantics: openai, "
        "openai-responses,\n"
        "                        anthropic, gemini, ollama, bedrock-converse,\n"
        "                        bedrock-invoke (first-item clock = first token)\n"
        "  --max-items N         cap on items (runaway guard)\n"
        "  --max-bytes N         cap on body bytes\n"
        "  --max-event-bytes N   largest line or event accepted (1048576);\n"
        "                        exceeding it is protocol_error\n"
        "Intent ledger (docs/ledger.md):\n"
        "  --ledger LOCATION     record intent, attempts and resolution; refuse a run\n"
        "                        while the same operation is unresolved.  A directory,\n"
        "                        or postgresql://... (libpq URI; PG* variables)\n"
        "  --ledger-init         with --ledger, no URL: apply the ledger's schema\n"
        "                        (idempotent; a directory is created)\n"
        "  --unresolved          with --ledger, no URL: list what needs reconciling\n"
        "  --reconcile KEY       with --ledger, no URL: mark KEY reconciled\n"
        "Tracing (docs/otel.md):\n"
        "  --otlp URL            the operation and each attempt as OpenTelemetry\n"
        "                        spans, sent over OTLP/HTTP to URL (.../v1/traces);\n"
        "                        also on with OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT.\n"
        "                        Each attempt sends a traceparent; TRACEPARENT and\n"
        "                        TRACESTATE in the environment name a parent\n"
        "Output:\n"
        "  --output data|jsonl|none  items as data lines, JSON lines, or not at all\n"
        "  --report FILE         the JSON execution report (- for stderr)\n"
        "  -w, --write-out FMT   print FMT at the end; %%{outcome} %%{phase}\n"
        "                        %%{attempts} %%{first_item_ms} %%{first_token_ms}\n"
        "                        %%{elapsed_ms} %%{items} %%{http_status}\n"
        "                        %%{partial} %%{outcome_unknown} %%{reason}\n"
        "                        %%{remaining_ms} %%{provider_error}\n"
        "                        %%{input_tokens} %%{output_tokens} (the kept\n"
        "                        stream's) %%{discarded_output_tokens} %%{cost};\n"
        "                        \\n \\t;\n"
        "                        - where the report has null\n"
        "  -q, --quiet           no diagnostics on stderr\n"
        "  -h, --help            this help    -V, --version  the versions\n"
        "\n"
        "Exit status: 0 ok; 1 internal error; 2 usage error; 3 a stream clock\n"
        "timed out (connect, first item, idle, stream, attempt); 4 budget exhausted\n"
        "or refused; 5 cancelled or cap exceeded; 6 truncated; 7 HTTP or provider "
        "error;\n"
        "8 transport or protocol error.\n");
}

void print_version(void) {
    /* The first line is what sg-stream was built as; the others are asked of
     * each library at run time, so a shared library swapped under the program
     * shows here. */
    printf("sg-stream %s\n", SG_VERSION_STRING);
    printf("streamguard %s\n", sg_version());
    printf("libcurl %s\n", curl_version_info(CURLVERSION_NOW)->version);
    printf("nghttp2 %s\n", nghttp2_version(0)->version_str);
    printf("%s\n", OpenSSL_version(OPENSSL_VERSION));
    printf("c-ares %s\n", ares_version(NULL));
}
