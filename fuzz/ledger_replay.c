/*
 * Fuzz target for ledger replay.  Deterministic: no clock, no randomness;
 * the files live in one directory per process.
 *
 * Two modes, chosen by the first byte:
 *   even (the seed files start with 0x1E): the input is the content of a
 *     ledger file, replayed as is;
 *   odd: the input is a program of 4-byte operations [type key p1 p2] on 8
 *     keys, encoded as valid records, some of them then corrupted (type bit
 *     0x80: flip byte p1 of the record) or torn (bit 0x40: keep p2 bytes of
 *     it and stop).  A model applies the intact records with the documented
 *     rules, and the ledger's unresolved list must match it exactly.
 *
 * Invariants (abort on failure, also in the replay binary):
 *   - every record the scanner returns passes an independent bitwise
 *     CRC32C and starts with the magic; records come in file order without
 *     overlapping, and records + skipped bytes + tail add up to the input;
 *   - scanning the bytes in memory and through a file (pread in 64 KiB
 *     windows) returns the same records at the same offsets;
 *   - sg_ledger_open replays the file without crashing, and the unresolved
 *     list is the same after compaction, from a handle opened before the
 *     compaction, and after reopening.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <streamguard/ledger.h>

#include "ledger/internal.h"
#include "sgx/ledger_line.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/ledger_replay invariant failed: %s\n", what);
        abort();
    }
}

static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) {
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        }
    }
    return ~crc;
}

typedef struct trace {
    const uint8_t *data;
    size_t size;
    uint64_t next_min; /* records must not overlap */
    uint64_t bytes;    /* sum of record sizes */
    uint64_t hash;
    uint64_t count;
} trace;

static int on_rec(const sg__ledger_rec *r, uint64_t off, size_t n, void *ud) {
    trace *t = ud;
    check(off >= t->next_min && off + n <= t->size, "records in order, within input");
    check(n >= SG__LEDGER_HDR && n <= SG__LEDGER_REC_MAX, "record size in range");
    const uint8_t *p = t->data + off;
    check(p[0] == 0x1E && p[1] == 'S' && p[2] == 'G' && p[3] == 'L', "magic");
    uint32_t want = (uint32_t)p[12] | (uint32_t)p[13] << 8 | (uint32_t)p[14] << 16 |
                    (uint32_t)p[15] << 24;
    check(crc32c_bitwise(crc32c_bitwise(0, p, 12), p + 16, n - 16) == want,
          "no record with a failing checksum");
    if (r->type >= SG__LREC_INTENT && r->type <= SG__LREC_RECONCILE) {
        check(r->key_len >= 1 && r->key_len <= SG_LEDGER_KEY_MAX, "key length");
        check(sg__ledger_check_key(r->key, r->key_len) == 0, "valid key");
    }
    t->next_min = off + n;
    t->bytes += n;
    t->hash = (t->hash ^ off) * 0x100000001b3ULL;
    t->count++;
    return 0;
}

typedef struct listing {
    uint64_t hash;
    size_t n;
} listing;

static int on_entry(const sg_ledger_entry *e, void *ud) {
    listing *ls = ud;
    char line[SGX_LEDGER_LINE_MAX];
    int n = sgx_ledger_format_unresolved_line(e, line, sizeof(line));
    check(n > 0, "every entry formats");
    for (int i = 0; i < n; i++) {
        ls->hash = (ls->hash ^ (unsigned char)line[i]) * 0x100000001b3ULL;
    }
    uint64_t extra[] = {(uint64_t)e->state,
                        e->has_last,
                        (uint64_t)e->last_phase,
                        (uint64_t)e->last_http_status,
                        (uint64_t)e->final_outcome,
                        (uint64_t)e->last_update_ns,
                        (uint64_t)e->pid};
    for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        ls->hash = (ls->hash ^ extra[i]) * 0x100000001b3ULL;
    }
    ls->n++;
    return 0;
}

static listing list_of(sg_ledger *l) {
    listing ls = {0xcbf29ce484222325ULL, 0};
    check(sg_ledger_list_unresolved(l, on_entry, &ls) == 0, "list");
    return ls;
}

static char g_dir[256];

static void remove_dir(void) {
    char path[400];
    const char *names[] = {SG__LEDGER_DATA, SG__LEDGER_LOCK, SG__LEDGER_TMP};
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", g_dir, names[i]);
        unlink(path);
    }
    rmdir(g_dir);
}

static void write_file(const char *path, const uint8_t *data, size_t size) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    check(fd >= 0, "create the ledger file");
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        check(w > 0, "write the ledger file");
        done += (size_t)w;
    }
    close(fd);
}

/* ------------------------------------------------------- structured mode */

#define NKEYS 8

typedef struct mstate {
    uint8_t state; /* 0 settled, 1 pending, 2 unknown */
    uint32_t attempts;
    bool has_last;
    uint8_t last_outcome;
} mstate;

typedef struct program {
    uint8_t buf[64 * 1024];
    size_t len;
    mstate model[NKEYS];
} program;

static void model_apply(mstate *m, const sg__ledger_rec *r) {
    switch (r->type) {
    case SG__LREC_INTENT:
        if (m->state == 0) {
            *m = (mstate){1, 0, false, 0};
        }
        break;
    case SG__LREC_ATTEMPT:
        if (m->state == 1) {
            m->attempts = r->n > m->attempts ? r->n : m->attempts;
            m->has_last = true;
            m->last_outcome = r->outcome;
        }
        break;
    case SG__LREC_RESOLVE:
        if (m->state == 1) {
            m->state = r->resolution == SG_LEDGER_UNKNOWN ? 2 : 0;
        }
        break;
    case SG__LREC_RECONCILE:
        m->state = 0;
        break;
    default:
        break;
    }
}

static void build_program(const uint8_t *data, size_t size, program *p) {
    static const char *methods[] = {"POST", "GET", "PUT", "X-CUSTOM"};
    static const uint16_t statuses[] = {0, 200, 429, 503};
    static const char notes[] = "reconciled by the fuzzer!";
    memset(p->model, 0, sizeof(p->model));
    p->len = 0;
    for (size_t i = 1; i + 4 <= size; i += 4) {
        uint8_t t = data[i], k = data[i + 1] % NKEYS, p1 = data[i + 2], p2 = data[i + 3];
        char key[8];
        char url[16];
        snprintf(key, sizeof(key), "key-%u", k);
        snprintf(url, sizeof(url), "/u%u", p1);
        sg__ledger_rec r = {.type = (uint8_t)(1 + (t & 3)), .key = key, .key_len = 5};
        r.wall_ns = (int64_t)(i * 1000);
        switch (r.type) {
        case SG__LREC_INTENT:
            r.method = methods[p2 & 3];
            r.method_len = strlen(r.method);
            r.url = url;
            r.url_len = strlen(url);
            r.pid = p2;
            break;
        case SG__LREC_ATTEMPT:
            r.n = (uint32_t)(p1 % 20) + 1;
            r.outcome = (uint8_t)(p2 % SG_OUTCOME_COUNT_);
            r.phase = (uint8_t)(p1 % SG_PHASE_COUNT_);
            r.flags = (uint8_t)((p2 >> 6) & 3);
            r.http_status = statuses[(p1 >> 5) & 3];
            break;
        case SG__LREC_RESOLVE:
            r.resolution = (uint8_t)(1 + p1 % 3);
            r.outcome = (uint8_t)(p2 % SG_OUTCOME_COUNT_);
            break;
        default:
            r.note = notes;
            r.note_len = p1 % (sizeof(notes) - 1);
            break;
        }
        if (p->len + SG__LEDGER_REC_MAX > sizeof(p->buf)) {
            break;
        }
        int n = sg__ledger_encode(&r, p->buf + p->len, SG__LEDGER_REC_MAX);
        check(n > 0, "the program encodes");
        if (t & 0x40) {
            p->len += (size_t)p2 % (size_t)n; /* torn: the end of the file */
            break;
        }
        if (t & 0x80) {
            p->buf[p->len + p1 % (size_t)n] ^= (uint8_t)(p2 | 1);
        } else {
            model_apply(&p->model[k], &r);
        }
        p->len += (size_t)n;
    }
}

typedef struct mcheck {
    const mstate *model;
    size_t n;
} mcheck;

static int on_model_entry(const sg_ledger_entry *e, void *ud) {
    mcheck *c = ud;
    unsigned k = (unsigned)(e->key[4] - '0');
    check(strlen(e->key) == 5 && k < NKEYS, "a listed key from the program");
    const mstate *m = &c->model[k];
    check(m->state != 0, "listed keys are unresolved in the model");
    check(e->state == (m->state == 1 ? SG_LEDGER_PENDING : SG_LEDGER_UNRESOLVED_UNKNOWN),
          "state as the model");
    check(e->attempts == m->attempts, "attempts as the model");
    check(e->has_last == m->has_last, "has_last as the model");
    check(!m->has_last || e->last_outcome == m->last_outcome,
          "last outcome as the model");
    c->n++;
    return 0;
}

static int replay(const uint8_t *data, size_t size, const mstate *model);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 0 && (data[0] & 1)) {
        static program p;
        build_program(data, size, &p);
        return replay(p.buf, p.len, p.model);
    }
    return replay(data, size, NULL);
}

static int replay(const uint8_t *data, size_t size, const mstate *model) {
    /* 1. the scanner on memory */
    trace a = {.data = data, .size = size, .hash = 0xcbf29ce484222325ULL};
    sg__ledger_scan sa;
    check(sg__ledger_scan_mem(data, size, on_rec, &a, &sa) == 0, "memory scan");
    check(a.bytes + sa.corrupt_bytes + sa.tail_bytes == size, "bytes add up");
    check(sa.records == a.count, "record count");
    check(sa.end + sa.tail_bytes == size, "end + tail = size");

    /* 2. the same through a file, in pread windows */
    int fd = memfd_create("ledger", MFD_CLOEXEC);
    check(fd >= 0, "memfd");
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        check(w > 0, "memfd write");
        done += (size_t)w;
    }
    trace b = {.data = data, .size = size, .hash = 0xcbf29ce484222325ULL};
    sg__ledger_scan sb;
    check(sg__ledger_scan_fd(fd, 0, size, on_rec, &b, &sb) == 0, "file scan");
    close(fd);
    check(b.hash == a.hash && b.count == a.count, "file scan = memory scan");
    check(memcmp(&sa, &sb, sizeof(sa)) == 0, "same scan statistics");

    /* 3. the whole ledger: open, compact, reopen */
    if (g_dir[0] == '\0') {
        const char *tmp = getenv("TMPDIR");
        snprintf(g_dir, sizeof(g_dir), "%s/sg-fuzz-ledger-%ld", tmp ? tmp : "/tmp",
                 (long)getpid());
        atexit(remove_dir);
    }
    mkdir(g_dir, 0700);
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", g_dir, SG__LEDGER_DATA);
    write_file(path, data, size);
    sg_ledger_options *o = NULL;
    check(sg_ledger_options_new(&o) == 0 &&
              sg_ledger_options_set_fsync(o, SG_LEDGER_FSYNC_NEVER) == 0,
          "options");
    sg_ledger *l1 = NULL;
    sg_ledger *l2 = NULL;
    int rv = sg_ledger_open(&l1, g_dir, o);
    check(rv == 0, "open replays any bytes");
    check(sg_ledger_open(&l2, g_dir, o) == 0, "second open");
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    sg_ledger_get_stats(l1, &st);
    check(st.records == sa.records && st.corrupt_regions == sa.corrupt_regions &&
              st.tail_bytes == sa.tail_bytes,
          "open sees what the scanner sees");
    listing before = list_of(l1);
    check(sg_ledger_compact(l1) == 0, "compact");
    listing after = list_of(l1);
    listing other = list_of(l2);
    sg_ledger_close(l1);
    sg_ledger_close(l2);
    check(sg_ledger_open(&l1, g_dir, o) == 0, "reopen");
    sg_ledger_options_free(o);
    listing reopened = list_of(l1);
    if (model != NULL) {
        mcheck mc = {model, 0};
        size_t want = 0;
        for (size_t k = 0; k < NKEYS; k++) {
            want += model[k].state != 0;
        }
        check(sg_ledger_list_unresolved(l1, on_model_entry, &mc) == 0, "model list");
        check(mc.n == want, "as many unresolved as the model");
    }
    sg_ledger_get_stats(l1, &st);
    check(st.corrupt_regions == 0 && st.tail_bytes == 0, "a compacted file is clean");
    sg_ledger_close(l1);
    check(before.n == after.n && before.hash == after.hash, "compaction keeps the list");
    check(other.n == before.n && other.hash == before.hash, "other handle follows");
    check(reopened.n == before.n && reopened.hash == before.hash,
          "reopen keeps the list");
    return 0;
}
