/*
 * openai_chat - an OpenAI-style chat completion stream, guarded.
 *
 *   openai_chat URL [FIRST_TOKEN_MS [IDLE_MS]]
 *
 * POSTs a chat request with "stream": true through the libcurl transport
 * and prints each token the moment its event arrives.  The framing is the
 * "openai" provider profile (docs/profiles.md), which knows the stream's
 * semantics so this program does not have to:
 *
 *   - `data: [DONE]` is the clean end; a body that stops without it is
 *     truncated, not ok;
 *   - the role-only first chunk, and any chunk without content, is
 *     metadata: it is held back and handed over just before the first
 *     token, so the first-item clock measures the time to first TOKEN;
 *   - `data: {"error": {...}}` is the server giving up mid-stream: the
 *     outcome is provider_error, with the error's type and message (even
 *     when `[DONE]` follows it, as some servers send).
 *
 * The operation runs under one budget (30 s) with the three clocks: first
 * token FIRST_TOKEN_MS (default 10 s), idle IDLE_MS (default 5 s; token to
 * token - keepalive comments do not reset it) and stream total 20 s.  A POST
 * is not idempotent, so the example sends an idempotency key: with it a
 * failed attempt that never delivered a token may be retried.  At the end it
 * prints what happened and the execution report (docs/report.md).
 *
 * Set OPENAI_API_KEY to send it as a bearer token to a real endpoint.
 *
 * Exit status: 0 when the operation ended ok, 1 when it ended with any other
 * outcome (printed), 2 on a usage or setup error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <streamguard/curl.h>

#include "example_report.h"

struct app {
    unsigned long tokens; /* non-empty content values printed */
    int mid_line;         /* tokens printed since the last newline */
};

/*
 * The start of the first occurrence of @needle in hay[0..len), or NULL.
 * Item data is a view, not a C string, so strstr cannot be used.
 */
static const char *find(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; n <= len && i <= len - n; i++) {
        if (memcmp(hay + i, needle, n) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

/*
 * Prints the JSON string that starts at p (just after its opening quote),
 * undoing the common escapes.  A tiny scan, not a JSON parser: a real
 * client would parse the chunk with its JSON library of choice.
 */
static void print_json_string(const char *p, const char *end) {
    while (p < end && *p != '"') {
        char c = *p++;
        if (c == '\\' && p < end) {
            c = *p++;
            switch (c) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'u':
                /* \uXXXX: shown as '?' to stay short; skip the hex digits. */
                p = end - p > 4 ? p + 4 : end;
                c = '?';
                break;
            default:
                break; /* \" \\ \/ stand for themselves */
            }
        }
        putchar(c);
    }
}

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    struct app *app = user_data;
    (void)op;
    /* choices[0].delta.content: "" in the role-only chunk (which the
     * profile holds back and delivers just before the first token), absent
     * in the final chunk. */
    static const char key[] = "\"content\":\"";
    const char *end = item->data + item->data_len;
    const char *v = find(item->data, item->data_len, key);
    if (v != NULL && v + sizeof(key) - 1 < end && v[sizeof(key) - 1] != '"') {
        print_json_string(v + sizeof(key) - 1, end);
        fflush(stdout); /* show each token as it arrives */
        app->tokens++;
        app->mid_line = 1;
    }
    return 0; /* non-zero would cancel the operation */
}

static void end_line(struct app *app) {
    if (app->mid_line) {
        putchar('\n');
        app->mid_line = 0;
    }
}

/* The attempt delivered tokens, then broke: they cannot be completed or
 * resumed, so the caller must throw away what it showed. */
static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome,
                       void *user_data) {
    (void)op;
    end_line(user_data);
    printf("discard: attempt %u ended %s after delivering tokens\n", attempt,
           sg_outcome_name(outcome));
}

static void on_attempt(sg_curl_op *op, const sg_op_attempt *rec, void *user_data) {
    (void)op;
    end_line(user_data);
    example_print_attempt(rec);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s URL [FIRST_TOKEN_MS [IDLE_MS]]\n", argv[0]);
        return 2;
    }
    long first_ms = argc >= 3 ? strtol(argv[2], NULL, 10) : 10000;
    long idle_ms = argc == 4 ? strtol(argv[3], NULL, 10) : 5000;
    if (first_ms <= 0 || idle_ms <= 0) {
        fprintf(stderr, "openai_chat: FIRST_TOKEN_MS and IDLE_MS must be positive\n");
        return 2;
    }

    /* The policy: one budget, three clocks, retries only when safe. */
    char key[64];
    snprintf(key, sizeof(key), "openai-chat-%ld-%lld", (long)getpid(),
             (long long)sg_clock_now(NULL));
    sg_op_options *policy = NULL;
    if (sg_op_options_new(&policy) != 0) {
        return 2;
    }
    if (sg_op_options_set_budget(policy, SG_SEC(30)) != 0 ||
        sg_op_options_set_connect_timeout(policy, SG_SEC(3)) != 0 ||
        sg_op_options_set_first_item_timeout(policy, SG_MS(first_ms)) != 0 ||
        sg_op_options_set_idle_timeout(policy, SG_MS(idle_ms)) != 0 ||
        sg_op_options_set_stream_timeout(policy, SG_SEC(20)) != 0 ||
        sg_op_options_set_idempotency_key(policy, key) != 0 ||
        sg_op_options_set_label(policy, "openai chat") != 0) {
        fprintf(stderr, "openai_chat: FIRST_TOKEN_MS or IDLE_MS out of range\n");
        return 2;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return 2;
    }
    /* The easy handle is ours: URL, method, body.  Request headers go
     * through the operation's options so the deadline/idempotency headers
     * join them. */
    static const char body[] =
        "{\"model\":\"gpt-4o-mini\",\"stream\":true,"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}";
    CURL *easy = curl_easy_init();
    struct curl_slist *headers =
        curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Accept: text/event-stream");
    char auth[512];
    const char *api_key = getenv("OPENAI_API_KEY");
    if (api_key != NULL && api_key[0] != '\0') {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", api_key);
        headers = curl_slist_append(headers, auth);
    }
    curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);

    /* The stream's semantics: the "openai" profile (a typo is SG_ENOTFOUND). */
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    sg_curl_options *opts = NULL;
    if (sg_profile_framing("openai", &framing) != 0 || sg_curl_options_new(&opts) != 0 ||
        sg_curl_options_set_framing(opts, &framing) != 0 ||
        sg_curl_options_set_headers(opts, headers) != 0 ||
        sg_curl_options_set_on_item(opts, on_item) != 0 ||
        sg_curl_options_set_on_discard(opts, on_discard) != 0 ||
        sg_curl_options_set_on_attempt(opts, on_attempt) != 0) {
        return 2;
    }
    struct app app = {0, 0};

    sg_curl_op *op = NULL;
    int rv = sg_curl_op_new(&op, easy, policy, opts, &app);
    sg_op_options_free(policy); /* the operation has its own copies */
    sg_curl_options_free(opts);
    if (rv == 0) {
        rv = sg_curl_perform(op); /* blocks until the operation has an outcome */
    }
    int status = 2;
    if (rv != 0) {
        fprintf(stderr, "openai_chat: %s\n", sg_strerror(rv));
    } else {
        const sg_op *pol = sg_curl_op_policy(op);
        end_line(&app);
        example_print_summary(pol, "tokens", app.tokens);
        example_print_end(pol);
        status = sg_curl_op_outcome(op) == SG_OUTCOME_OK ? 0 : 1;
    }
    sg_curl_op_free(op);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return status;
}
