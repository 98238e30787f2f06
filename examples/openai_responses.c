/*
 * openai_responses - an OpenAI Responses API stream, guarded.
 *
 *   openai_responses URL [FIRST_TOKEN_MS]
 *
 * POSTs to /v1/responses with "stream": true through the libcurl transport
 * and prints the text of each `response.output_text.delta` event the
 * moment it arrives.  The stream is named SSE events whose data's "type"
 * repeats the event name; the "openai-responses" provider profile
 * (docs/profiles.md) knows what each one means, so this program does not
 * have to:
 *
 *   - response.created, response.in_progress and the *.added events
 *     (output_item, content_part) are metadata: held back and delivered
 *     just before the first token, so the first-item clock
 *     (FIRST_TOKEN_MS, default 20 s) measures the time to first TOKEN, and
 *     an attempt that fails before it has shown nothing;
 *   - the first token is the first event whose type ends in ".delta"
 *     (output text here; a reasoning summary or function-call arguments
 *     delta counts too, though this program prints only output text);
 *   - response.completed, or response.incomplete (the model stopped early:
 *     max_output_tokens, a content filter), is the clean end and is
 *     delivered; a body that ends without one of them is truncated, even
 *     when the connection closed politely (the three *.done events before
 *     the end are not enough);
 *   - response.failed (its response.error) and the flat `event: error`
 *     are the server giving up: the outcome is provider_error, with the
 *     error's code as its type (server_error, rate_limit_exceeded, ...).
 *
 * The operation runs under one budget (60 s) with the three clocks: first
 * token FIRST_TOKEN_MS, idle 10 s (token to token) and stream total 45 s.
 * A POST is not idempotent, so the example sends an idempotency key: with
 * it a failed attempt that never delivered a token - a transient
 * provider_error, a first-token timeout - may be retried (3 attempts at
 * most).  An attempt that failed after its first token is never retried:
 * the text it showed must be thrown away (the discard line).  At the end
 * it prints what happened and the execution report (docs/report.md).
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
    unsigned long tokens; /* output_text.delta events printed */
    int mid_line;         /* text printed since the last newline */
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

/* p past any JSON white space, up to end. */
static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
        p++;
    }
    return p;
}

/*
 * The start of the value of the first member named @key in p[0..end), or
 * NULL.  @key is given with its quotes ("\"delta\""); an occurrence not
 * followed by a colon is a string value, not the member, and is skipped;
 * JSON allows white space around the colon.  A tiny scan, not a JSON
 * parser: a real client would parse the event with its JSON library.
 */
static const char *member(const char *p, const char *end, const char *key) {
    size_t n = strlen(key);
    const char *k;
    while ((k = find(p, (size_t)(end - p), key)) != NULL) {
        const char *v = skip_ws(k + n, end);
        if (v < end && *v == ':') {
            return skip_ws(v + 1, end);
        }
        p = k + n;
    }
    return NULL;
}

/* The body of member @key's string value, just past its opening quote, or
 * NULL when there is no such member or its value is not a string. */
static const char *string_value(const char *p, const char *end, const char *key) {
    const char *v = member(p, end, key);
    return v != NULL && v < end && *v == '"' ? v + 1 : NULL;
}

/* The value of four hex digits at p, or -1. */
static long hex4(const char *p, const char *end) {
    if (end - p < 4) {
        return -1;
    }
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) {
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

/* Writes code point @cp as UTF-8. */
static void put_utf8(unsigned long cp) {
    if (cp < 0x80) {
        putchar((int)cp);
    } else if (cp < 0x800) {
        putchar((int)(0xC0 | (cp >> 6)));
        putchar((int)(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        putchar((int)(0xE0 | (cp >> 12)));
        putchar((int)(0x80 | ((cp >> 6) & 0x3F)));
        putchar((int)(0x80 | (cp & 0x3F)));
    } else {
        putchar((int)(0xF0 | (cp >> 18)));
        putchar((int)(0x80 | ((cp >> 12) & 0x3F)));
        putchar((int)(0x80 | ((cp >> 6) & 0x3F)));
        putchar((int)(0x80 | (cp & 0x3F)));
    }
}

/*
 * Prints the JSON string body at p up to its closing quote, undoing every
 * escape JSON has: \uXXXX becomes UTF-8 (a surrogate pair one code point,
 * a lone surrogate U+FFFD), since non-ASCII text may arrive escaped.
 * Other bytes are UTF-8 already and pass through.
 */
static void print_json_string(const char *p, const char *end) {
    while (p < end && *p != '"') {
        char c = *p++;
        if (c != '\\' || p == end) {
            putchar(c);
            continue;
        }
        c = *p++;
        switch (c) {
        case 'b':
            putchar('\b');
            break;
        case 'f':
            putchar('\f');
            break;
        case 'n':
            putchar('\n');
            break;
        case 'r':
            putchar('\r');
            break;
        case 't':
            putchar('\t');
            break;
        case 'u': {
            long cp = hex4(p, end);
            if (cp < 0) {
                return; /* malformed: stop rather than guess */
            }
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' &&
                p[1] == 'u') {
                long lo = hex4(p + 2, end);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            put_utf8(cp >= 0xD800 && cp <= 0xDFFF ? 0xFFFD : (unsigned long)cp);
            break;
        }
        default:
            putchar(c); /* \" \\ \/ stand for themselves */
            break;
        }
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
    const char *end = item->data + item->data_len;
    if (view_is(item->event, item->event_len, "response.output_text.delta")) {
        const char *v = string_value(item->data, end, "\"delta\"");
        if (v != NULL) {
            print_json_string(v, end);
            fflush(stdout); /* show each token as it arrives */
            app->tokens++;
            app->mid_line = 1;
        }
    } else if (view_is(item->event, item->event_len, "response.incomplete")) {
        /* Still a clean end (outcome ok), but the answer is cut short:
         * say why, from response.incomplete_details.reason. */
        const char *d = member(item->data, end, "\"incomplete_details\"");
        const char *r = d != NULL ? string_value(d, end, "\"reason\"") : NULL;
        end_line(app);
        fputs("incomplete: ", stdout);
        if (r != NULL) {
            print_json_string(r, end);
        } else {
            fputs("(no reason given)", stdout);
        }
        putchar('\n');
    }
    /* The metadata, the *.done events and response.completed print
     * nothing here. */
    return 0; /* non-zero would cancel the operation */
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
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s URL [FIRST_TOKEN_MS]\n", argv[0]);
        return 2;
    }
    /* A reasoning model may think for a while before its first delta. */
    long first_ms = argc == 3 ? strtol(argv[2], NULL, 10) : 20000;
    if (first_ms <= 0 || first_ms > 60000) {
        fprintf(stderr, "openai_responses: FIRST_TOKEN_MS must be 1 .. 60000\n");
        return 2;
    }

    /* The policy: one budget, three clocks, retries only when safe. */
    char key[64];
    snprintf(key, sizeof(key), "openai-responses-%ld-%lld", (long)getpid(),
             (long long)sg_clock_now(NULL));
    sg_op_options *policy = NULL;
    if (sg_op_options_new(&policy) != 0) {
        return 2;
    }
    if (sg_op_options_set_budget(policy, SG_SEC(60)) != 0 ||
        sg_op_options_set_connect_timeout(policy, SG_SEC(3)) != 0 ||
        sg_op_options_set_first_item_timeout(policy, SG_MS(first_ms)) != 0 ||
        sg_op_options_set_idle_timeout(policy, SG_SEC(10)) != 0 ||
        sg_op_options_set_stream_timeout(policy, SG_SEC(45)) != 0 ||
        sg_op_options_set_idempotency_key(policy, key) != 0 ||
        sg_op_options_set_label(policy, "openai responses") != 0) {
        fprintf(stderr, "openai_responses: policy setup failed\n");
        return 2;
    }

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return 2;
    }
    /* The easy handle is ours: URL, method, body.  Request headers go
     * through the operation's options so the deadline/idempotency headers
     * join them. */
    static const char body[] =
        "{\"model\":\"gpt-4.1-mini\",\"stream\":true,\"input\":\"Hello\"}";
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

    /* The stream's semantics: the "openai-responses" profile. */
    sg_stream_config framing;
    sg_stream_config_init(&framing);
    sg_curl_options *opts = NULL;
    if (sg_profile_framing("openai-responses", &framing) != 0 ||
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
        rv = sg_curl_perform(op); /* blocks until the operation has an outcome */
    }
    int status = 2;
    if (rv != 0) {
        fprintf(stderr, "openai_responses: %s\n", sg_strerror(rv));
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
