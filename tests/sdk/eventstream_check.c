/*
 * The cross-check against the reference codec: reads what
 * tests/sdk/eventstream_gen.mjs wrote with @smithy/eventstream-codec -
 * messages.bin and its description messages.jsonl - and decodes it with
 * streamguard's decoder in every way a transport could deliver it:
 *
 *   1. the whole stream in one feed;
 *   2. the whole stream one byte at a time;
 *   3. the whole stream in reads of seeded random sizes (1 byte to 64 KiB);
 *   4. each message alone, cut at every offset when it is at most 4 KiB,
 *      else at its first and last 40 offsets and 64 seeded random ones.
 *
 * Each run must deliver exactly the described messages - headers in wire
 * order with the same names, types and values, the same payloads, the same
 * reserved-header views - and end clean.
 *
 * Usage: eventstream_check DIR        (prints "N passed, M failed")
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/framing.h>

#include "es_desc.h"

static int passed;
static int failed;

static void verdict(int ok, const char *what, const char *why) {
    if (ok) {
        passed++;
        printf("ok: %s\n", what);
    } else {
        failed++;
        printf("FAIL: %s: %s\n", what, why);
    }
}

/* xorshift64*, seeded: the same cuts on every run. */
static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dULL;
}

typedef struct run {
    sg_es_decoder dec;
    es_check check;
} run;

/* One buffer for the default limits (16 MiB), lent to every run in turn. */
static unsigned char *shared_buf;

static void run_start(run *r, const es_want *want, size_t n_want) {
    size_t need = sg_es_buffer_size(NULL);
    memset(&r->check, 0, sizeof(r->check));
    r->check.want = want;
    r->check.n_want = n_want;
    sg_es_config cfg;
    sg_es_config_init(&cfg);
    (void)sg_es_config_set_on_message(&cfg, es_check_cb);
    if (sg_es_init(&r->dec, &cfg, &r->check, shared_buf, need) != 0) {
        fprintf(stderr, "sg_es_init failed\n");
        exit(1);
    }
}

/* Ends a run; returns NULL when it delivered exactly @n_want matching
 * messages and ended clean, else why not (in @why). */
static const char *run_finish(run *r, ptrdiff_t rc, char *why, size_t cap) {
    bool clean = false;
    sg_es_end(&r->dec, &clean);
    if (rc < 0) {
        snprintf(why, cap, "feed failed: %s after %zu messages", sg_errname((int)rc),
                 r->check.got);
    } else if (r->check.why[0] != '\0') {
        snprintf(why, cap, "%s", r->check.why);
    } else if (r->check.got != r->check.n_want) {
        snprintf(why, cap, "%zu messages, want %zu", r->check.got, r->check.n_want);
    } else if (!clean) {
        snprintf(why, cap, "not a clean end");
    } else {
        return NULL;
    }
    return why;
}

/* Feeds @b[0..@n) in reads of sizes from @size_of (called per read). */
static ptrdiff_t feed_by(sg_es_decoder *d, const unsigned char *b, size_t n,
                         size_t (*size_of)(void)) {
    size_t off = 0;
    while (off < n) {
        size_t len = size_of();
        len = len < n - off ? len : n - off;
        ptrdiff_t rc = sg_es_feed(d, b + off, len);
        if (rc < 0) {
            return rc;
        }
        off += len;
    }
    return 0;
}

static size_t one_byte(void) {
    return 1;
}

static size_t random_read(void) {
    /* Mostly small reads, sometimes large: a network's mix. */
    uint64_t r = next_rand();
    return (r & 3) == 0 ? (size_t)(r >> 8) % 65536 + 1 : (size_t)(r >> 8) % 512 + 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: eventstream_check DIR\n");
        return 2;
    }
    shared_buf = malloc(sg_es_buffer_size(NULL));
    if (shared_buf == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    char path[4096];
    size_t n_bin;
    size_t n_desc;
    snprintf(path, sizeof(path), "%s/messages.bin", argv[1]);
    unsigned char *bin = es_read_file(path, &n_bin);
    snprintf(path, sizeof(path), "%s/messages.jsonl", argv[1]);
    unsigned char *desc = es_read_file(path, &n_desc);
    if (bin == NULL || desc == NULL) {
        fprintf(stderr, "cannot read %s/messages.{bin,jsonl}\n", argv[1]);
        return 1;
    }

    /* The descriptions, one a line, and where each message starts. */
    size_t cap = 64;
    size_t n_want = 0;
    es_want *want = malloc(cap * sizeof(*want));
    size_t *start = malloc((cap + 1) * sizeof(*start));
    const char *p = (const char *)desc;
    const char *end = p + n_desc;
    size_t off = 0;
    while (want != NULL && start != NULL && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
        if (n_want == cap) {
            cap *= 2;
            es_want *nw = realloc(want, cap * sizeof(*want));
            size_t *ns = realloc(start, (cap + 1) * sizeof(*start));
            if (nw == NULL || ns == NULL) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            want = nw;
            start = ns;
        }
        if (es_want_parse(p, len, &want[n_want]) != 0) {
            fprintf(stderr, "description %zu does not parse\n", n_want);
            return 1;
        }
        start[n_want] = off;
        off += want[n_want].total;
        n_want++;
        p += len + 1;
    }
    if (want == NULL || start == NULL || n_want == 0 || off != n_bin) {
        fprintf(stderr,
                "the descriptions (%zu messages, %zu bytes) do not frame the %zu "
                "bytes of messages.bin\n",
                n_want, off, n_bin);
        return 1;
    }
    start[n_want] = off;
    printf("%zu messages, %zu bytes, from the reference codec\n", n_want, n_bin);

    char why[256];
    run r;
    const char *bad;

    run_start(&r, want, n_want);
    bad = run_finish(&r, sg_es_feed(&r.dec, bin, n_bin), why, sizeof(why));
    verdict(bad == NULL, "the whole stream in one feed", bad);

    run_start(&r, want, n_want);
    bad = run_finish(&r, feed_by(&r.dec, bin, n_bin, one_byte), why, sizeof(why));
    verdict(bad == NULL, "the whole stream one byte at a time", bad);

    run_start(&r, want, n_want);
    bad = run_finish(&r, feed_by(&r.dec, bin, n_bin, random_read), why, sizeof(why));
    verdict(bad == NULL, "the whole stream in random reads", bad);

    /* Each message alone, split. */
    size_t splits = 0;
    const char *split_bad = NULL;
    char split_why[320] = "";
    for (size_t i = 0; i < n_want && split_bad == NULL; i++) {
        const unsigned char *m = bin + start[i];
        size_t n = want[i].total;
        size_t n_cuts = n <= 4096 ? n - 1 : 40 + 40 + 64;
        for (size_t k = 0; k < n_cuts && split_bad == NULL; k++) {
            size_t cut;
            if (n <= 4096) {
                cut = k + 1;
            } else if (k < 40) {
                cut = k + 1;
            } else if (k < 80) {
                cut = n - (k - 39);
            } else {
                cut = (size_t)(next_rand() % (n - 1)) + 1;
            }
            run_start(&r, &want[i], 1);
            split_bad =
                run_finish(&r, es_feed_cuts(&r.dec, m, n, &cut, 1), why, sizeof(why));
            if (split_bad != NULL) {
                snprintf(split_why, sizeof(split_why), "message %zu cut at %zu: %s", i,
                         cut, split_bad);
            }
            splits++;
        }
    }
    char what[96];
    snprintf(what, sizeof(what), "each message split (%zu splits)", splits);
    verdict(split_bad == NULL, what, split_why);

    for (size_t i = 0; i < n_want; i++) {
        es_want_free(&want[i]);
    }
    free(want);
    free(start);
    free(bin);
    free(desc);
    free(shared_buf);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
