/*
 * bench_profile - what a provider profile costs per item over the plain
 * parser (issue 16: at most 50 ns per 240-byte item).
 *
 * For each built-in profile, one body in that provider's own shape: what
 * comes before the first token (OpenAI's role chunk, the Responses API's
 * response.created ..., Anthropic's message_start and content_block_start),
 * ITEMS token items whose JSON data is 240 bytes, and the
 * provider's end.  Each body is fed in 16 KiB reads (libcurl's buffer)
 * through an sg_stream twice: (a) the plain parser, the profile's framing
 * with classify = NULL, and (b) the profile itself, from
 * sg_profile_framing().  Both deliver the same items to the same callback
 * under the same guard; the difference is the classifier.  Runs alternate
 * a, b, a, b ... (RUNS of each) so drift and noise fall on both sides, and
 * the medians are compared.  Time is the process's CPU time
 * (CLOCK_PROCESS_CPUTIME_ID), so other work on the machine does not count
 * as ours; the program is single-threaded.
 *
 * Every run is checked: the same number of items both ways, and outcome ok
 * under the profile (a shape the classifier misread would end otherwise).
 *
 * Usage: bench_profile [ITEMS [RUNS]]   (default 100000 items, 9 runs)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <streamguard/streamguard.h>

/* The JSON data of each token item, in bytes. */
#define ITEM_DATA 240
#define READ_SIZE 16384

/*
 * One provider's stream: the token item is event_type (SSE only, NULL for
 * none) and data head + padding + tail, the padding in a field the
 * provider fills with text (a token, or the Responses API's obfuscation
 * string).  prelude and end are wire bytes as the provider sends them.
 */
typedef struct shape {
    const char *profile;
    const char *event_type;
    const char *head;
    const char *tail;
    const char *prelude;
    const char *end;
} shape;

static const shape shapes[] = {
    {"openai", NULL,
     /* Chat Completions chunk (Create chat completion, streaming) */
     "{\"id\":\"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG\",\"object\":\"chat.completion."
     "chunk\",\"created\":1741570283,\"model\":\"gpt-4o-2024-08-06\",\"system_"
     "fingerprint\":\"fp_eb9dce56a8\",\"choices\":[{\"index\":0,\"delta\":{\"content\":"
     "\"",
     "\"},\"finish_reason\":null}]}",
     "data: {\"id\":\"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG\",\"object\":\"chat."
     "completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o-2024-08-06\","
     "\"system_fingerprint\":\"fp_eb9dce56a8\",\"choices\":[{\"index\":0,\"delta\":{"
     "\"role\":\"assistant\",\"content\":\"\",\"refusal\":null},\"logprobs\":null,"
     "\"finish_reason\":null}]}\n\n",
     "data: {\"id\":\"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG\",\"object\":\"chat."
     "completion.chunk\",\"created\":1741570283,\"model\":\"gpt-4o-2024-08-06\","
     "\"system_fingerprint\":\"fp_eb9dce56a8\",\"choices\":[{\"index\":0,\"delta\":{},"
     "\"logprobs\":null,\"finish_reason\":\"stop\"}]}\n\n"
     "data: [DONE]\n\n"},
    {"openai-responses", "response.output_text.delta",
     "{\"type\":\"response.output_text.delta\",\"sequence_number\":42,\"item_id\":"
     "\"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654\",\"output_index\":0,"
     "\"content_index\":0,\"delta\":\" streaming\",\"logprobs\":[],\"obfuscation\":\"",
     "\"}",
     "event: response.created\n"
     "data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":"
     "\"resp_67c9fdcecf488190\",\"object\":\"response\",\"created_at\":1741290958,"
     "\"status\":\"in_progress\",\"error\":null,\"incomplete_details\":null,\"model\":"
     "\"gpt-4.1-2025-04-14\",\"output\":[],\"usage\":null}}\n\n"
     "event: response.in_progress\n"
     "data: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{"
     "\"id\":\"resp_67c9fdcecf488190\",\"object\":\"response\",\"created_at\":"
     "1741290958,\"status\":\"in_progress\",\"error\":null,\"model\":\"gpt-4.1-2025-"
     "04-14\",\"output\":[],\"usage\":null}}\n\n"
     "event: response.output_item.added\n"
     "data: {\"type\":\"response.output_item.added\",\"sequence_number\":2,\"output_"
     "index\":0,\"item\":{\"id\":\"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654"
     "\",\"type\":\"message\",\"status\":\"in_progress\",\"content\":[],\"role\":"
     "\"assistant\"}}\n\n"
     "event: response.content_part.added\n"
     "data: {\"type\":\"response.content_part.added\",\"sequence_number\":3,\"item_id\":"
     "\"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654\",\"output_index\":0,"
     "\"content_index\":0,\"part\":{\"type\":\"output_text\",\"annotations\":[],"
     "\"text\":\"\"}}\n\n",
     "event: response.output_text.done\n"
     "data: {\"type\":\"response.output_text.done\",\"sequence_number\":97,\"item_id\":"
     "\"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654\",\"output_index\":0,"
     "\"content_index\":0,\"text\":\"...\"}\n\n"
     "event: response.output_item.done\n"
     "data: {\"type\":\"response.output_item.done\",\"sequence_number\":98,\"output_"
     "index\":0,\"item\":{\"id\":\"msg_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654"
     "\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\"}}\n\n"
     "event: response.completed\n"
     "data: {\"type\":\"response.completed\",\"sequence_number\":99,\"response\":{\"id\":"
     "\"resp_67c9fdcecf488190\",\"object\":\"response\",\"status\":\"completed\","
     "\"error\":null,\"usage\":{\"input_tokens\":36,\"output_tokens\":87}}}\n\n"},
    {"anthropic", "content_block_delta",
     "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
     "\"text\":\"",
     "\"}}",
     "event: message_start\n"
     "data: "
     "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_1nZdL29xx5MUA1yADyHTEsnR8"
     "uuvGzszyY\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":"
     "\"claude-sonnet-4-5\",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{"
     "\"input_tokens\":25,\"output_tokens\":1}}}\n\n"
     "event: content_block_start\n"
     "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":"
     "\"text\",\"text\":\"\"}}\n\n",
     "event: content_block_stop\n"
     "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
     "event: message_delta\n"
     "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
     "\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n"
     "event: message_stop\n"
     "data: {\"type\":\"message_stop\"}\n\n"},
    {"gemini", NULL,
     /* streamGenerateContent?alt=sse: spaces after the colons, as sent */
     "{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"",
     "\"}],\"role\": \"model\"},\"index\": 0}],\"usageMetadata\": {\"promptTokenCount\": "
     "9,\"totalTokenCount\": 9},\"modelVersion\": \"gemini-2.0-flash\",\"responseId\": "
     "\"oN0ZaJ3GNJuMqtsP9LuG8Ak\"}",
     "",
     "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \".\"}],\"role\": "
     "\"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"usageMetadata\": {"
     "\"promptTokenCount\": 9,\"candidatesTokenCount\": 80,\"totalTokenCount\": 89},"
     "\"modelVersion\": \"gemini-2.0-flash\",\"responseId\": \"oN0ZaJ3GNJuMqtsP9LuG8Ak"
     "\"}\n\n"},
    {"ollama", NULL,
     /* /api/chat, one JSON object per line */
     "{\"model\":\"llama3.2\",\"created_at\":\"2023-08-04T08:52:19.385406455-07:00\","
     "\"message\":{\"role\":\"assistant\",\"content\":\"",
     "\"},\"done\":false}", "",
     "{\"model\":\"llama3.2\",\"created_at\":\"2023-08-04T19:22:45.499127Z\",\"message\":"
     "{\"role\":\"assistant\",\"content\":\"\"},\"done_reason\":\"stop\",\"done\":true,"
     "\"total_duration\":4883583458,\"load_duration\":1334875,\"prompt_eval_count\":26,"
     "\"prompt_eval_duration\":342546000,\"eval_count\":282,\"eval_duration\":"
     "4535599000}\n"},
};

#define N_SHAPES (sizeof(shapes) / sizeof(shapes[0]))

/* Text for the padding: words, no byte that JSON would escape. */
static const char words[] = "Streaming keeps the user reading while the model is "
                            "still writing the rest of the answer, token by token. ";

typedef struct body {
    char *p;
    size_t len;
    size_t item_wire; /* one token item on the wire, framing included */
} body;

/* The body of @sh with @items token items; 0, or -1 when out of memory. */
static int build(const shape *sh, size_t items, body *b) {
    bool sse = strcmp(sh->profile, "ollama") != 0;
    char item[1024];
    size_t n = 0;
    if (sse && sh->event_type != NULL) {
        n += (size_t)snprintf(item + n, sizeof(item) - n, "event: %s\n", sh->event_type);
    }
    if (sse) {
        n += (size_t)snprintf(item + n, sizeof(item) - n, "data: ");
    }
    size_t head = strlen(sh->head), tail = strlen(sh->tail);
    size_t pad = ITEM_DATA > head + tail ? ITEM_DATA - head - tail : 0;
    memcpy(item + n, sh->head, head);
    n += head;
    for (size_t i = 0; i < pad; i++) {
        item[n++] = words[i % (sizeof(words) - 1)];
    }
    memcpy(item + n, sh->tail, tail);
    n += tail;
    n += (size_t)snprintf(item + n, sizeof(item) - n, sse ? "\n\n" : "\n");

    size_t pre = strlen(sh->prelude), end = strlen(sh->end);
    b->len = pre + items * n + end;
    b->item_wire = n;
    b->p = malloc(b->len);
    if (b->p == NULL) {
        return -1;
    }
    memcpy(b->p, sh->prelude, pre);
    for (size_t i = 0; i < items; i++) {
        memcpy(b->p + pre + i * n, item, n);
    }
    memcpy(b->p + pre + items * n, sh->end, end);
    return 0;
}

static uint64_t delivered, sink;

static int on_item(const sg_item *item, void *ud) {
    (void)ud;
    delivered++;
    sink += item->data_len;
    return 0;
}

static int64_t cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/*
 * One pass of @b through a stream framed by @cfg; the CPU time of the
 * feeding alone (init and begin are outside it).  *@items: items
 * delivered; *@outcome: how the attempt ended.  -1 on a setup failure.
 */
static int64_t run(const sg_stream_config *cfg, const body *b, void *buf, size_t buf_size,
                   uint64_t *items, sg_outcome *outcome) {
    sg_stream s;
    sg_guard_config g;
    sg_guard_config_init(&g);
    sg_guard_config_set_first_item_timeout(&g, SG_SEC(10));
    sg_guard_config_set_idle_timeout(&g, SG_SEC(5));
    sg_guard_config_set_stream_timeout(&g, SG_SEC(300));
    if (sg_stream_init(&s, cfg, on_item, NULL, buf, buf_size) != 0 ||
        sg_stream_begin(&s, &g, NULL, 1, 1) != 0) {
        return -1;
    }
    delivered = 0;
    int64_t t = 2; /* stream time: 1 us per read, far inside the clocks */
    int64_t t0 = cpu_ns();
    for (size_t off = 0; off < b->len; off += READ_SIZE, t += 1000) {
        size_t len = b->len - off < READ_SIZE ? b->len - off : READ_SIZE;
        if (sg_stream_feed(&s, b->p + off, len, t) != 0) {
            break; /* the end (1) or a failure, judged below */
        }
    }
    int64_t t1 = cpu_ns();
    sg_guard_result r;
    if (sg_stream_end(&s, t, SG_OUTCOME_OK, &r) != 0) {
        return -1;
    }
    *items = delivered;
    *outcome = r.outcome;
    return t1 - t0;
}

static int cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double median(int64_t *v, int n, uint64_t items) {
    qsort(v, (size_t)n, sizeof(*v), cmp);
    double m = n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2;
    return m / (double)items;
}

int main(int argc, char **argv) {
    size_t items = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    int runs = argc > 2 ? atoi(argv[2]) : 9;
    if (items == 0 || runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: %s [ITEMS [RUNS]]\n", argv[0]);
        return 2;
    }
    int64_t *plain = malloc(sizeof(int64_t) * (size_t)runs);
    int64_t *prof = malloc(sizeof(int64_t) * (size_t)runs);
    if (plain == NULL || prof == NULL) {
        return 1;
    }
    printf("bench_profile: %zu token items of %d bytes of JSON per profile, %d-byte "
           "reads,\n%d runs of each alternating plain/profile, CPU time "
           "(CLOCK_PROCESS_CPUTIME_ID), medians\n\n",
           items, ITEM_DATA, READ_SIZE, runs);
    printf("| profile | item on the wire | plain parser | with the profile | "
           "difference | ratio |\n| --- | --- | --- | --- | --- | --- |\n");
    int status = 0;
    for (size_t k = 0; k < N_SHAPES; k++) {
        const shape *sh = &shapes[k];
        sg_stream_config with, without;
        sg_stream_config_init(&with); /* the profile leaves the limits as they are */
        if (sg_profile_framing(sh->profile, &with) != 0) {
            fprintf(stderr, "%s: no such profile\n", sh->profile);
            return 1;
        }
        without = with;
        /* the same framing, every item a token */
        sg_stream_config_set_classifier(&without, NULL, NULL);
        body b;
        size_t size = sg_stream_buffer_size(&with); /* the larger of the two */
        void *buf = malloc(size);
        if (build(sh, items, &b) != 0 || buf == NULL) {
            return 1;
        }
        uint64_t total = 0;
        for (int r = 0; r < runs; r++) {
            uint64_t na = 0, nb = 0;
            sg_outcome oa = SG_OUTCOME_OK, ob = SG_OUTCOME_OK;
            plain[r] = run(&without, &b, buf, size, &na, &oa);
            prof[r] = run(&with, &b, buf, size, &nb, &ob);
            if (plain[r] < 0 || prof[r] < 0 || na != nb || nb < items ||
                ob != SG_OUTCOME_OK) {
                fprintf(stderr,
                        "%s: plain %llu items (%s), profile %llu items (%s): the "
                        "body is not what the profile expects\n",
                        sh->profile, (unsigned long long)na, sg_outcome_name(oa),
                        (unsigned long long)nb, sg_outcome_name(ob));
                return 1;
            }
            total = nb;
        }
        double a = median(plain, runs, total), p = median(prof, runs, total);
        printf("| %s | %zu B | %.1f ns/item | %.1f ns/item | %+.1f ns/item | %.2fx |\n",
               sh->profile, b.item_wire, a, p, p - a, p / a);
        if (p - a > 50.0) {
            status = 3; /* reported, not a failure of the program */
        }
        free(b.p);
        free(buf);
    }
    printf("\ntarget (issue 16): at most +50 ns per 240-byte item over the plain "
           "parser%s\n(sink %llu)\n",
           status ? " - NOT met by every profile" : " - met by every profile",
           (unsigned long long)(sink & 0xff));
    free(plain);
    free(prof);
    return 0;
}
