/*
 * sg-proxy's relay (tools/sg-proxy/relay.c): the committed attempt's
 * bytes, given to the client event by event as the library accepts the
 * item each event carries.  Each provider's recorded stream is played
 * through the library's own sg_stream under its profile, the reads falling
 * at every split offset, one byte at a time, and in one piece; each read
 * goes to the relay first, then to the stream (as on_bytes, then on_item).
 * At every item the client must hold exactly the stream's bytes up to the
 * end of that item's event - never a byte of an event the library has not
 * accepted, never an accepted item held back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/streamguard.h>

#include "relay.h"

#define T0 SG_SEC(100)

/* One event of a recorded stream and what it is to the relay: 'i' an item
 * the client gets at once, 'h' metadata held until the first token, '-'
 * no item (a comment, a keepalive, the [DONE] marker), 'e' the upstream's
 * in-band error, which ends the stream. */
struct ev {
    char kind;
    const char *bytes;
};

struct shape {
    const char *name;
    const char *profile;
    const struct ev *ev;
    size_t n;
};

#define SHAPE(name, profile, evs) \
    { name, profile, evs, sizeof(evs) / sizeof(evs[0]) }

static const struct ev openai[] = {
    {'h',
     "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
     "\"content\":\"\"},\"finish_reason\":null}]}\n\n"},
    {'-', ": keepalive\n\n"},
    {'i',
     "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok0\"},"
     "\"finish_reason\":null}]}\n\n"},
    {'i',
     "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok1\"},"
     "\"finish_reason\":null}]}\n\n"},
    /* one event, several data lines: the library joins them in a copy */
    {'i', "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\n"
          "data: \"delta\":{\"content\":\"tok2\"},\n"
          "data: \"finish_reason\":null}]}\n\n"},
    {'-', ": keepalive\n\n"},
    {'i',
     "id: 7\nevent: message\ndata: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":"
     "{\"content\":\"tok3\"},\"finish_reason\":null}]}\n\n"},
    {'i', "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
          "\"stop\"}]}\n\n"},
    {'-', "data: [DONE]\n\n"},
};

/* The same with every line ended by a bare CR, and by CRLF */
static const struct ev openai_cr[] = {
    {'h',
     "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\r"},
    {'i', "data: {\"choices\":[{\"delta\":{\"content\":\"tok0\"}}]}\r\r"},
    {'-', ":\r\r"},
    {'i', "data: {\"choices\":[{\"delta\":\r"
          "data: {\"content\":\"tok1\"}}]}\r\r"},
    {'i', "data: {\"choices\":[{\"delta\":{\"content\":\"tok2\"}}]}\r\r"},
    {'-', "data: [DONE]\r\r"},
};

static const struct ev openai_crlf[] = {
    {'i', "\xEF\xBB\xBF" /* a byte order mark, which the stream's parser drops */
          "data: {\"choices\":[{\"delta\":{\"content\":\"tok0\"}}]}\r\n\r\n"},
    {'i', "data: {\"choices\":[{\"delta\":{\"content\":\"tok1\"}}]}\r\n\r\n"},
    {'-', ": ping\r\n\r\n"},
    {'i', "data:{\"choices\":[{\"delta\":{\"content\":\"tok2\"}}]}\r\n\r\n"},
    {'i', "data: {\"choices\":[{\"delta\":{\"content\":\"tok3\"}}]}\r\n\r\n"},
    {'-', "data: [DONE]\r\n\r\n"},
};

static const struct ev anthropic[] = {
    {'h',
     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
     "\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":"
     "\"m\",\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}"
     "\n\n"},
    {'h',
     "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
     "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"},
    {'-', "event: ping\ndata: {\"type\": \"ping\"}\n\n"},
    {'i',
     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
     "\"delta\":{\"type\":\"text_delta\",\"text\":\"tok0\"}}\n\n"},
    {'-', "event: ping\ndata: {\"type\": \"ping\"}\n\n"},
    {'i',
     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
     "\"delta\":{\"type\":\"text_delta\",\"text\":\"tok1\"}}\n\n"},
    {'i',
     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
     "\"delta\":{\"type\":\"text_delta\",\"text\":\"tok2\"}}\n\n"},
    {'i', "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}"
          "\n\n"},
    {'i',
     "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
     "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n"},
    {'i', "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
};

static const struct ev responses[] = {
    {'h',
     "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":"
     "\"resp_1\",\"status\":\"in_progress\"},\"sequence_number\":0}\n\n"},
    {'h',
     "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"response\":"
     "{\"id\":\"resp_1\",\"status\":\"in_progress\"},\"sequence_number\":1}\n\n"},
    {'h',
     "event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\","
     "\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\"},"
     "\"sequence_number\":2}\n\n"},
    {'-', ": keepalive\n\n"},
    {'i',
     "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
     "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"tok0\","
     "\"sequence_number\":3}\n\n"},
    {'i',
     "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
     "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"tok1\","
     "\"sequence_number\":4}\n\n"},
    {'i',
     "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\","
     "\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"text\":\"tok0tok1\","
     "\"sequence_number\":5}\n\n"},
    {'i',
     "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{"
     "\"id\":\"resp_1\",\"status\":\"completed\"},\"sequence_number\":6}\n\n"},
};

static const struct ev gemini[] = {
    {'i',
     "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"tok0\"}],\"role\": "
     "\"model\"},\"index\": 0}],\"modelVersion\": \"m\"}\r\n\r\n"},
    {'i',
     "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"tok1\"}],\"role\": "
     "\"model\"},\"index\": 0}],\"modelVersion\": \"m\"}\r\n\r\n"},
    {'i',
     "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"tok2\"}],\"role\": "
     "\"model\"},\"index\": 0}],\"modelVersion\": \"m\"}\r\n\r\n"},
    {'i',
     "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"\"}],\"role\": "
     "\"model\"},\"finishReason\": \"STOP\",\"index\": 0}],\"modelVersion\": \"m\"}"
     "\r\n\r\n"},
};

static const struct ev ollama[] = {
    {'i', "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"tok0\"},"
          "\"done\":false}\n"},
    {'-', "\n"},
    {'i', "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"tok1\"},"
          "\"done\":false}\r\n"},
    {'i', "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"tok2\"},"
          "\"done\":false}\n"},
    {'i', "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
          "\"done\":true,\"done_reason\":\"stop\"}\n"},
};

/* Each provider's in-band error after two tokens, as it writes it */
static const struct ev openai_error[] = {
    {'i', "data: {\"choices\":[{\"delta\":{\"content\":\"tok0\"}}]}\n\n"},
    {'i', "data: {\"choices\":[{\"delta\":{\"content\":\"tok1\"}}]}\n\n"},
    {'-', ": keepalive\n\n"},
    {'e', "data: {\"error\":{\"message\":\"scripted failure\",\"type\":\"server_error\","
          "\"param\":null,\"code\":\"e42\"}}\n\n"},
    {'-', "data: [DONE]\n\n"}, /* vLLM's: after the error, ignored */
};

static const struct ev anthropic_error[] = {
    {'h', "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":"
          "\"msg_1\",\"content\":[]}}\n\n"},
    {'i',
     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
     "\"delta\":{\"type\":\"text_delta\",\"text\":\"tok0\"}}\n\n"},
    {'i',
     "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
     "\"delta\":{\"type\":\"text_delta\",\"text\":\"tok1\"}}\n\n"},
    {'-', "event: ping\ndata: {\"type\": \"ping\"}\n\n"},
    {'e',
     "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
     "\"message\":\"Overloaded\"}}\n\n"},
};

static const struct ev responses_error[] = {
    {'i',
     "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
     "\"delta\":\"tok0\",\"sequence_number\":1}\n\n"},
    {'i',
     "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\","
     "\"delta\":\"tok1\",\"sequence_number\":2}\n\n"},
    {'e', "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\","
          "\"message\":\"scripted failure\",\"param\":null,\"sequence_number\":3}\n\n"},
};

/* Gemini's first two tokens, before its errors */
#define GEMINI_TOK(i)                                                                 \
    {                                                                                 \
        'i', "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"tok" #i \
             "\"}],\"role\": \"model\"},\"index\": 0}]}\r\n\r\n"                      \
    }

static const struct ev gemini_error[] = {
    GEMINI_TOK(0),
    GEMINI_TOK(1),
    {'e',
     "data: {\"error\": {\"code\": 503,\"message\": \"scripted failure\",\"status\": "
     "\"UNAVAILABLE\"}}\r\n\r\n"},
};

/* Gemini's error as live streams were seen to send it: a bare object on
 * lines of its own, outside any data line */
static const struct ev gemini_bare_error[] = {
    GEMINI_TOK(0),
    GEMINI_TOK(1),
    {'e',
     "{\n  \"error\": {\n    \"code\": 429,\n    \"message\": \"scripted failure\",\n"
     "    \"status\": \"RESOURCE_EXHAUSTED\"\n  }\n}\n\n"},
};

static const struct ev ollama_error[] = {
    {'i', "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"tok0\"},"
          "\"done\":false}\n"},
    {'i', "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"tok1\"},"
          "\"done\":false}\n"},
    {'e', "{\"error\":\"server_error: scripted failure\"}\n"},
};

static const struct shape error_shapes[] = {
    SHAPE("openai", "openai", openai_error),
    SHAPE("anthropic", "anthropic", anthropic_error),
    SHAPE("openai-responses", "openai-responses", responses_error),
    SHAPE("gemini", "gemini", gemini_error),
    SHAPE("gemini, a bare error object", "gemini", gemini_bare_error),
    SHAPE("ollama", "ollama", ollama_error),
};

static const struct shape shapes[] = {
    SHAPE("openai", "openai", openai),
    SHAPE("openai, CR line ends", "openai", openai_cr),
    SHAPE("openai, CRLF line ends and a BOM", "openai", openai_crlf),
    SHAPE("anthropic", "anthropic", anthropic),
    SHAPE("openai-responses", "openai-responses", responses),
    SHAPE("gemini", "gemini", gemini),
    SHAPE("ollama", "ollama", ollama),
};

/* One play of a shape: the stream, the relay, what the client got. */
struct play {
    const struct shape *sh;
    char *whole; /* the recorded stream */
    size_t len;
    size_t ends[16]; /* where each 'i' event ends in it */
    size_t nends;
    size_t err_end; /* where the 'e' event ends in it, 0: none */
    sg_stream_config cfg;
    sg_outcome outcome; /* how the stream concluded */
    struct relay relay;
    char *out; /* what the client got */
    size_t out_len;
    size_t items;  /* items that released bytes, or should have */
    char why[512]; /* the first wrong thing seen, "" none */
};

static void play_init(struct play *p, const struct shape *sh) {
    memset(p, 0, sizeof(*p));
    p->sh = sh;
    for (size_t i = 0; i < sh->n; i++) {
        p->len += strlen(sh->ev[i].bytes);
    }
    p->whole = malloc(p->len);
    p->out = malloc(p->len);
    assert_non_null(p->whole);
    assert_non_null(p->out);
    size_t at = 0;
    for (size_t i = 0; i < sh->n; i++) {
        size_t n = strlen(sh->ev[i].bytes);
        memcpy(p->whole + at, sh->ev[i].bytes, n);
        at += n;
        if (sh->ev[i].kind == 'i') {
            assert_true(p->nends < 16);
            p->ends[p->nends++] = at;
        }
        p->err_end = sh->ev[i].kind == 'e' ? at : p->err_end;
    }
}

static void play_free(struct play *p) {
    free(p->whole);
    free(p->out);
    relay_free(&p->relay);
}

static void wrong(struct play *p, const char *fmt, ...) {
    if (p->why[0] != '\0') {
        return; /* the first is the one to read */
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof(p->why), fmt, ap);
    va_end(ap);
}

/* What the proxy's on_item does with the relay, then the check: the
 * client holds the stream up to the end of this item's event. */
static int on_item(const sg_item *item, void *ud) {
    struct play *p = ud;
    size_t n = relay_item(&p->relay, item);
    size_t held;
    (void)relay_held(&p->relay, &held);
    if (n > held) {
        wrong(p, "item %zu: %zu bytes released, %zu held", p->items, n, held);
        return 1;
    }
    relay_release(&p->relay, n);
    /* released: they go to the client with the rest of this read's */
    size_t out;
    const char *o = relay_out(&p->relay, &out);
    (void)relay_held(&p->relay, &held);
    if (n == 0 && item->kind == SG_ITEM_META && p->items == 0) {
        return 0; /* metadata held before the first token: it goes with it */
    }
    size_t want = p->items < p->nends ? p->ends[p->items] : SIZE_MAX;
    /* the library ends a line at a CR last in a read; its LF, when it
     * comes, goes with the next event */
    const size_t has = p->out_len + out;
    bool lf_to_come = want != SIZE_MAX && held == 0 && has + 1 == want &&
                      p->whole[want - 2] == '\r' && p->whole[want - 1] == '\n';
    if ((has != want && !lf_to_come) || memcmp(p->out, p->whole, p->out_len) != 0 ||
        memcmp(o, p->whole + p->out_len, out) != 0) {
        wrong(p, "after item %zu (\"%.*s\"): the client has %zu bytes, %zu wanted",
              p->items, (int)(item->data_len < 60 ? item->data_len : 60), item->data, has,
              want);
    }
    p->items++;
    return 0;
}

/* What the read released goes to the client at once, in one piece (the
 * proxy's one send per read). */
static void hand_over(struct play *p) {
    size_t out;
    const char *o = relay_out(&p->relay, &out);
    memcpy(p->out + p->out_len, o, out);
    p->out_len += out;
    relay_drop(&p->relay, out);
}

/* Plays the stream in the reads @cuts[0..@ncuts) ends (the last is the
 * stream's length) under @max_items (0: none): each read from a buffer of
 * its own, to the relay, then to the stream.  Returns the last feed's
 * code. */
static int play_reads(struct play *p, const size_t *cuts, size_t ncuts,
                      uint64_t max_items) {
    sg_stream_config *cfg = &p->cfg;
    memset(cfg, 0, sizeof(*cfg));
    assert_int_equal(sg_profile_framing(p->sh->profile, cfg), 0);
    size_t bn = sg_stream_buffer_size(cfg);
    char *sbuf = malloc(bn);
    sg_stream s;
    assert_int_equal(sg_stream_init(&s, cfg, on_item, p, sbuf, bn), 0);
    sg_guard_config g;
    sg_guard_config_init(&g);
    if (max_items > 0) {
        assert_int_equal(sg_guard_config_set_max_items(&g, max_items), 0);
    }
    assert_int_equal(sg_stream_begin(&s, &g, NULL, 1, T0), 0);
    sg_guard_set_phase(sg_stream_guard(&s), SG_PHASE_WAIT_FIRST_ITEM, T0);
    relay_free(&p->relay); /* the play before's */
    relay_init(&p->relay, sg_stream_config_format(cfg));
    p->out_len = 0;
    p->items = 0;
    p->why[0] = '\0';
    int rc = 0;
    size_t from = 0;
    for (size_t i = 0; i < ncuts && rc == 0; i++) {
        size_t n = cuts[i] - from;
        /* a buffer of its own, gone after the read: as libcurl's */
        char *rd = malloc(n > 0 ? n : 1);
        memcpy(rd, p->whole + from, n);
        assert_true(relay_add(&p->relay, rd, n));
        rc = sg_stream_feed(&s, rd, n, T0 + (int64_t)i);
        free(rd);
        hand_over(p);
        from = cuts[i];
    }
    sg_guard_result gr;
    assert_int_equal(sg_stream_end(&s, T0 + (int64_t)ncuts, SG_OUTCOME_OK, &gr), 0);
    p->outcome = gr.outcome;
    free(sbuf);
    return rc;
}

/* Every way the reads may fall: in one piece, at each split offset, one
 * byte per read.  @check runs after each play. */
static void every_split(struct play *p, uint64_t max_items,
                        void (*check)(struct play *p, int rc, const char *how)) {
    char how[64];
    size_t cuts[2] = {p->len, p->len};
    check(p, play_reads(p, cuts, 1, max_items), "in one read");
    for (size_t k = 1; k < p->len; k++) {
        cuts[0] = k;
        snprintf(how, sizeof(how), "split at %zu of %zu", k, p->len);
        check(p, play_reads(p, cuts, 2, max_items), how);
    }
    size_t *one = malloc(p->len * sizeof(*one));
    for (size_t k = 0; k < p->len; k++) {
        one[k] = k + 1;
    }
    check(p, play_reads(p, one, p->len, max_items), "one byte per read");
    free(one);
}

/* The whole stream ended cleanly: every item released at its event, and
 * the rest (the [DONE] marker, nothing else) is what remains to send. */
static void check_whole(struct play *p, int rc, const char *how) {
    if (p->why[0] == '\0' && p->items != p->nends) {
        wrong(p, "%zu items released, %zu in the stream", p->items, p->nends);
    }
    /* (an LF after the terminal's CR, in a read of its own, comes after
     * the clean end: it is not the stream's) */
    size_t held;
    const char *h = relay_held(&p->relay, &held);
    size_t got = p->out_len + held;
    bool lf_after =
        got + 1 == p->len && p->whole[got - 1] == '\r' && p->whole[got] == '\n';
    if (p->why[0] == '\0' &&
        ((got != p->len && !lf_after) ||
         (held != 0 && memcmp(h, p->whole + p->out_len, held) != 0))) {
        wrong(p, "the client's bytes and the rest held are not the stream");
    }
    if (p->why[0] != '\0' || rc < 0) {
        fail_msg("%s, %s: %s (feed %d)", p->sh->name, how, p->why, rc);
    }
}

/* Every shape of @tab[0..@n), every split, under @max_items (0: none). */
static void every_shape(const struct shape *tab, size_t n, uint64_t max_items,
                        void (*check)(struct play *p, int rc, const char *how)) {
    for (size_t i = 0; i < n; i++) {
        struct play p;
        play_init(&p, &tab[i]);
        every_split(&p, max_items, check);
        play_free(&p);
    }
}

static void every_shape_every_split_releases_each_item_at_its_event(void **state) {
    (void)state;
    every_shape(shapes, sizeof(shapes) / sizeof(shapes[0]), 0, check_whole);
}

/* Under --max-items 2 the third item is refused: the client has the
 * first two items' events and not a byte more. */
static void check_capped(struct play *p, int rc, const char *how) {
    if (rc != SG_ECAP) {
        wrong(p, "the feed ended %d, not the cap", rc);
    }
    if (p->why[0] == '\0' &&
        (p->items != 2 || p->out_len > p->ends[1] || p->out_len + 1 < p->ends[1])) {
        wrong(p, "%zu items and %zu bytes released, 2 items and %zu bytes wanted",
              p->items, p->out_len, p->ends[1]);
    }
    if (p->why[0] != '\0') {
        fail_msg("%s, --max-items 2, %s: %s", p->sh->name, how, p->why);
    }
}

static void a_cap_releases_the_accepted_items_and_nothing_more(void **state) {
    (void)state;
    every_shape(shapes, sizeof(shapes) / sizeof(shapes[0]), 2, check_capped);
}

/* An in-band error from the upstream ends the stream provider_error: the
 * client has the tokens before it, and the relay finds the upstream's own
 * error event, to pass it on as written (with the keepalives before it,
 * nothing after it). */
static void check_error(struct play *p, int rc, const char *how) {
    (void)rc;
    size_t end = relay_error_end(&p->relay, &p->cfg);
    size_t held;
    (void)relay_held(&p->relay, &held);
    size_t want = p->err_end - p->out_len;
    /* an error event's last LF in a read of its own comes after the end */
    bool lf_after = want > 1 && end + 1 == want && held == end &&
                    p->whole[p->err_end - 2] == '\r' && p->whole[p->err_end - 1] == '\n';
    if (p->outcome != SG_OUTCOME_PROVIDER_ERROR) {
        wrong(p, "the stream ended %s, not provider_error", sg_outcome_name(p->outcome));
    } else if (p->why[0] == '\0' && p->items != p->nends) {
        wrong(p, "%zu items released, %zu before the error", p->items, p->nends);
    } else if (p->why[0] == '\0' && end != want && !lf_after) {
        wrong(p, "the error found to end at %zu of the %zu bytes held, %zu wanted", end,
              held, want);
    }
    if (p->why[0] != '\0') {
        fail_msg("%s error, %s: %s", p->sh->name, how, p->why);
    }
}

static void an_upstream_error_is_found_as_written(void **state) {
    (void)state;
    every_shape(error_shapes, sizeof(error_shapes) / sizeof(error_shapes[0]), 0,
                check_error);
}

/* An event stream goes on by whole messages (their preludes' lengths),
 * however the reads fall: never half a message. */
static void an_event_stream_goes_by_whole_messages(void **state) {
    (void)state;
    unsigned char s[3 * 40];
    size_t sizes[3] = {24, 40, 56};
    size_t len = 0;
    for (size_t m = 0; m < 3; m++) {
        unsigned char *q = s + len;
        memset(q, (int)('a' + m), sizes[m]);
        q[0] = q[1] = q[2] = 0;
        q[3] = (unsigned char)sizes[m];
        len += sizes[m];
    }
    for (size_t k = 0; k <= len; k++) {
        struct relay r;
        relay_init(&r, SG_FORMAT_EVENTSTREAM);
        size_t out = 0;
        size_t pieces[2][2] = {{0, k}, {k, len}};
        for (size_t i = 0; i < 2; i++) {
            assert_true(relay_add(&r, s + pieces[i][0], pieces[i][1] - pieces[i][0]));
            size_t n = relay_messages(&r);
            size_t held;
            assert_memory_equal(relay_held(&r, &held), s + out, n);
            relay_release(&r, n);
            size_t o;
            assert_memory_equal(relay_out(&r, &o), s + out, n);
            assert_int_equal(o, n);
            out += n;
            relay_drop(&r, n);
            size_t whole = 0;
            for (size_t m = 0; m < 3 && whole + sizes[m] <= pieces[i][1]; m++) {
                whole += sizes[m];
            }
            assert_int_equal(out, whole);
        }
        relay_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_shape_every_split_releases_each_item_at_its_event),
        cmocka_unit_test(a_cap_releases_the_accepted_items_and_nothing_more),
        cmocka_unit_test(an_upstream_error_is_found_as_written),
        cmocka_unit_test(an_event_stream_goes_by_whole_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
