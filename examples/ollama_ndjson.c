/*
 * ollama_ndjson - an Ollama-style NDJSON stream, guarded.
 *
 *   ollama_ndjson URL [MAX_ITEMS]
 *
 * The body is one JSON object per line ({"content":"...","done":false}),
 * ending with a line that says "done":true.  Each line is one item: the
 * idle clock runs from line to line, and empty keepalive lines are not
 * items, so they never reset it.
 *
 * NDJSON has no framing-level sentinel, so the library can only say that
 * the body ended on a line boundary (ok) or not (truncated: a connection
 * that dropped, or a last line cut short).  Whether the model finished is
 * in the data, so this program also looks for the "done":true line, and
 * reports a body that ended cleanly without it.
 *
 * MAX_ITEMS (default 4096) caps the lines: a runaway generation that never
 * stops is cut there with cap_exceeded instead of running up the bill.
 *
 * Exit status: 0 when the operation ended ok and the done line arrived, 1
 * otherwise (printed), 2 on a usage or setup error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <streamguard/curl.h>

struct app {
    unsigned long lines;
    int done_seen;
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
    /* "content":"..." at the top level (/api/generate uses "response", and
     * /api/chat nests it in "message"; the scan finds it in all of them).
     * A tiny scan, not a JSON parser: escapes are printed as they are. */
    static const char key[] = "\"content\":\"";
    const char *v = find(item->data, item->data_len, key);
    if (v != NULL) {
        const char *end = item->data + item->data_len;
        v += sizeof(key) - 1;
        const char *q = v;
        while (q < end && *q != '"') {
            q += (*q == '\\' && q + 1 < end) ? 2 : 1;
        }
        fwrite(v, 1, (size_t)(q - v), stdout);
        fflush(stdout);
        app->mid_line = 1;
    }
    if (find(item->data, item->data_len, "\"done\":true") != NULL) {
        app->done_seen = 1;
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
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s URL [MAX_ITEMS]\n", argv[0]);
        return 2;
    }
    long max_items = argc == 3 ? strtol(argv[2], NULL, 10) : 4096;
    if (max_items <= 0) {
        fprintf(stderr, "ollama_ndjson: MAX_ITEMS must be a positive number\n");
        return 2;
    }

    sg_op_options policy;
    sg_op_options_init(&policy);
    sg_op_options_set_budget(&policy, SG_SEC(120));
    sg_op_options_set_connect_timeout(&policy, SG_SEC(2));
    /* A local model may need a while to load before its first line. */
    sg_op_options_set_first_item_timeout(&policy, SG_SEC(60));
    sg_op_options_set_idle_timeout(&policy, SG_SEC(5));
    sg_op_options_set_max_items(&policy, (uint64_t)max_items);
    sg_op_options_set_label(&policy, "ollama chat");

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

    sg_curl_options opts = {0};
    opts.framing.format = SG_FORMAT_NDJSON; /* one item per non-empty line */
    opts.headers = headers;
    sg_curl_callbacks cbs = {on_item, on_discard, NULL, NULL};
    struct app app = {0, 0, 0};

    sg_curl_op *op = NULL;
    int rv = sg_curl_op_new(&op, easy, &policy, &opts, &cbs, &app);
    if (rv == 0) {
        rv = sg_curl_perform(op);
    }
    int status = 2;
    if (rv != 0) {
        fprintf(stderr, "ollama_ndjson: %s\n", sg_strerror(rv));
    } else {
        const sg_op *pol = sg_curl_op_policy(op);
        uint32_t n = sg_op_attempt_count(pol);
        const sg_op_attempt *last = n > 0 ? sg_op_attempt_at(pol, n - 1) : NULL;
        sg_outcome outcome = sg_curl_op_outcome(op);
        end_line(&app);
        printf("outcome=%s phase=%s attempts=%u lines=%lu done_line=%s partial=%s\n",
               sg_outcome_name(outcome), last ? sg_phase_name(last->phase) : "none", n,
               app.lines, app.done_seen ? "true" : "false",
               last && last->partial ? "true" : "false");
        if (outcome == SG_OUTCOME_OK && !app.done_seen) {
            printf("warning: the body ended cleanly but without \"done\":true\n");
        }
        status = outcome == SG_OUTCOME_OK && app.done_seen ? 0 : 1;
    }
    sg_curl_op_free(op);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return status;
}
