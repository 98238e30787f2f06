/*
 * ollama_ndjson - an Ollama /api/chat stream (NDJSON), guarded.
 *
 *   ollama_ndjson URL [FIRST_TOKEN_MS [MAX_ITEMS]]
 *
 * The body is one JSON object per line,
 * {"model":...,"message":{"role":"assistant","content":"..."},"done":false},
 * ending with a line that says "done":true.  The "ollama" provider profile
 * (docs/profiles.md) knows what each line means:
 *
 *   - the "done":true line is the clean end (delivered: it may carry the
 *     last text); a body that ends without it is truncated, even when the
 *     connection closed politely on a line boundary;
 *   - a line without content before the first token is metadata, held
 *     back, so the first-item clock (FIRST_TOKEN_MS, default 60 s: a local
 *     model may need a while to load) is the time to first token; empty
 *     keepalive lines are never items and reset no clock;
 *   - {"error":"..."} is the server giving up: the outcome is
 *     provider_error.  Ollama's error names no type, only a message.
 *
 * MAX_ITEMS (default 4096) caps the lines: a runaway generation that never
 * stops is cut there with cap_exceeded instead of running up the bill.
 *
 * Exit status: 0 when the operation ended ok, 1 when it ended with any other
 * outcome (printed), 2 on a usage or setup error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <streamguard/curl.h>

#include "example_report.h"

struct app {
    unsigned long lines;
    int mid_line;
};

static const char *find(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; n <= len && i <= len - n; i++) {
        if (memcmp(hay + i, needle, n) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    struct app *app = user_data;
    (void)op;
    app->lines++;
    /* message.content (/api/generate calls it "response").  A tiny scan, not
     * a JSON parser: escapes are printed as they are. */
    static const char key[] = "\"content\":\"";
    const char *v = find(item->data, item->data_len, key);
    if (v != NULL) {
        const char *end = item->data + item->data_len;
        v += sizeof(key) - 1;
        const char *q = v;
        while (q < end && *q != '"') {
            q += (*q == '\\' && q + 1 < end) ? 2 : 1;
        }
        if (q > v) { /* the done line's content is "" */
            fwrite(v, 1, (size_t)(q - v), stdout);
            fflush(stdout);
            app->mid_line = 1;
        }
    }
    return 0;
}

static void end_line(struct app *app) {
    if (app->mid_line) {
        putchar('\n');
        app->mid_line = 0;
    }
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome,
                       void *user_data) {
    (void)op;
    end_line(user_data);
    printf("discard: attempt %u ended %s after delivering lines\n", attempt,
           sg_outcome_name(outcome));
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: %s URL [FIRST_TOKEN_MS [MAX_ITEMS]]\n", argv[0]);
        return 2;
    }
    long first_ms = argc >= 3 ? strtol(argv[2], NULL, 10) : 60000;
    long max_items = argc == 4 ? strtol(argv[3], NULL, 10) : 4096;
    if (first_ms <= 0 || first_ms > 120000 || max_items <= 0) {
        fprintf(stderr, "ollama_ndjson: FIRST_TOKEN_MS must be 1 .. 120000 and "
                        "MAX_ITEMS positive\n");
        return 2;
    }

    sg_op_options *policy = NULL;

    if (sg_op_options_new(&policy) != 0) {

        return 2;
    }
    sg_op_options_set_budget(policy, SG_SEC(120));
    sg_op_options_set_connect_timeout(policy, SG_SEC(2));
    sg_op_options_set_first_item_timeout(policy, SG_MS(first_ms));
    sg_op_options_set_idle_timeout(policy, SG_SEC(5));
    sg_op_options_set_max_items(policy, (uint64_t)max_items);
    sg_op_options_set_label(policy, "ollama chat");

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return 2;
    }
    static const char body[] =
        "{\"model\":\"llama3.2\",\"stream\":true,"
        "\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}";
    CURL *easy = curl_easy_init();
    struct curl_slist *headers =
        curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
    curl_easy_setopt(easy, CURLOPT_POSTFIELDS, body);

    /* The stream's semantics: the "ollama" profile (NDJSON, "done":true). */
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    sg_curl_options *opts = NULL;
    if (sg_profile_framing("ollama", &framing) != 0 || sg_curl_options_new(&opts) != 0 ||
        sg_curl_options_set_framing(opts, &framing) != 0 ||
        sg_curl_options_set_headers(opts, headers) != 0 ||
        sg_curl_options_set_on_item(opts, on_item) != 0 ||
        sg_curl_options_set_on_discard(opts, on_discard) != 0) {
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
        fprintf(stderr, "ollama_ndjson: %s\n", sg_strerror(rv));
    } else {
        const sg_op *pol = sg_curl_op_policy(op);
        uint32_t n = sg_op_attempt_count(pol);
        const sg_op_attempt *last =
            sg_op_deciding_attempt(pol); /* the winner, with hedges */
        sg_outcome outcome = sg_curl_op_outcome(op);
        end_line(&app);
        printf("outcome=%s phase=%s attempts=%u lines=%lu partial=%s\n",
               sg_outcome_name(outcome), last ? sg_phase_name(last->phase) : "none", n,
               app.lines, last && last->partial ? "true" : "false");
        example_print_end(pol);
        status = outcome == SG_OUTCOME_OK ? 0 : 1;
    }
    sg_curl_op_free(op);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return status;
}
