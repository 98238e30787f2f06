/*
 * anthropic_messages - an Anthropic-style Messages stream, guarded.
 *
 *   anthropic_messages URL [FIRST_TOKEN_MS]
 *
 * The stream is named SSE events: message_start, content_block_start, one
 * content_block_delta per token, content_block_stop, message_delta and
 * message_stop.  The "anthropic" provider profile (docs/profiles.md) knows
 * what each one means:
 *
 *   - message_start and content_block_start are metadata: held back and
 *     delivered just before the first content_block_delta, so the
 *     first-item clock (FIRST_TOKEN_MS, default 15 s) is the time to first
 *     token, and an attempt that fails before it has shown nothing;
 *   - `event: ping` is a keepalive: never delivered, resets no clock;
 *   - message_stop is the clean end (delivered); a body that ends without
 *     it is truncated, even when the connection closed politely;
 *   - `event: error` is the server giving up: the outcome is
 *     provider_error with its type (overloaded_error, ...).  Before the
 *     first token a transient type is retried, as the request carries an
 *     idempotency key.
 *
 * Each event is printed by name and each text delta as it arrives.
 *
 * Set ANTHROPIC_API_KEY to send it (x-api-key) to a real endpoint.
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
    unsigned long events;
    int mid_line; /* text printed since the last newline */
};

/* true when the view p[0..len) equals the C string s. */
static int view_is(const char *p, size_t len, const char *s) {
    return strlen(s) == len && memcmp(p, s, len) == 0;
}

/* The first occurrence of @needle in hay[0..len), or NULL (a view is not a
 * C string, so strstr cannot be used). */
static const char *find(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; n <= len && i <= len - n; i++) {
        if (memcmp(hay + i, needle, n) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

/* Prints a JSON string body up to its closing quote; a tiny scan, not a
 * JSON parser (a real client parses the event with its JSON library). */
static void print_json_string(const char *p, const char *end) {
    while (p < end && *p != '"') {
        char c = *p++;
        if (c == '\\' && p < end) {
            c = *p++;
            if (c == 'n') {
                c = '\n';
            } else if (c == 'u') {
                p = end - p > 4 ? p + 4 : end; /* \uXXXX shown as '?' */
                c = '?';
            }
        }
        putchar(c);
    }
}

static void end_line(struct app *app) {
    if (app->mid_line) {
        putchar('\n');
        app->mid_line = 0;
    }
}

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    struct app *app = user_data;
    (void)op;
    app->events++;
    if (view_is(item->event, item->event_len, "content_block_delta")) {
        static const char key[] = "\"text\":\"";
        const char *v = find(item->data, item->data_len, key);
        if (v != NULL) {
            print_json_string(v + sizeof(key) - 1, item->data + item->data_len);
            fflush(stdout);
            app->mid_line = 1;
        }
        return 0;
    }
    end_line(app);
    printf("[%.*s]\n", (int)item->event_len, item->event);
    return 0;
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome,
                       void *user_data) {
    (void)op;
    end_line(user_data);
    printf("discard: attempt %u ended %s after delivering events\n", attempt,
           sg_outcome_name(outcome));
}

static void on_attempt(sg_curl_op *op, const sg_op_attempt *rec, void *user_data) {
    (void)op;
    end_line(user_data);
    example_print_attempt(rec);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s URL [FIRST_TOKEN_MS]\n", argv[0]);
        return 2;
    }
    long first_ms = argc == 3 ? strtol(argv[2], NULL, 10) : 15000;
    if (first_ms <= 0 || first_ms > 60000) {
        fprintf(stderr, "anthropic_messages: FIRST_TOKEN_MS must be 1 .. 60000\n");
        return 2;
    }

    char key[64];
    snprintf(key, sizeof(key), "anthropic-%ld-%lld", (long)getpid(),
             (long long)sg_clock_now(NULL));
    sg_op_options *policy = NULL;
    if (sg_op_options_new(&policy) != 0) {
        return 2;
    }
    sg_op_options_set_budget(policy, SG_SEC(60));
    sg_op_options_set_connect_timeout(policy, SG_SEC(3));
    sg_op_options_set_first_item_timeout(policy, SG_MS(first_ms));
    sg_op_options_set_idle_timeout(policy, SG_SEC(10));
    sg_op_options_set_stream_timeout(policy, SG_SEC(45));
    sg_op_options_set_idempotency_key(policy, key);
    sg_op_options_set_label(policy, "anthropic messages");

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return 2;
    }
    static const char body[] = "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":256,"
                               "\"stream\":true,\"messages\":[{\"role\":\"user\","
                               "\"content\":\"Hello\"}]}";
    CURL *easy = curl_easy_init();
    struct curl_slist *headers =
        curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "anthropic-version: 2023-06-01");
    char auth[512];
    const char *api_key = getenv("ANTHROPIC_API_KEY");
    if (api_key != NULL && api_key[0] != '\0') {
        snprintf(auth, sizeof(auth), "x-api-key: %s", api_key);
        headers = curl_slist_append(headers, auth);
    }
    curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);

    /* The stream's semantics: the "anthropic" profile. */
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    sg_curl_options *opts = NULL;
    if (sg_profile_framing("anthropic", &framing) != 0 ||
        sg_curl_options_new(&opts) != 0 ||
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
        rv = sg_curl_perform(op);
    }
    int status = 2;
    if (rv != 0) {
        fprintf(stderr, "anthropic_messages: %s\n", sg_strerror(rv));
    } else {
        const sg_op *pol = sg_curl_op_policy(op);
        end_line(&app);
        example_print_summary(pol, "events", app.events);
        example_print_end(pol);
        status = sg_curl_op_outcome(op) == SG_OUTCOME_OK ? 0 : 1;
    }
    sg_curl_op_free(op);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return status;
}
