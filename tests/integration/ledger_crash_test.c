/*
 * Crash test for the ledger: a child process drives a ledger (intents,
 * attempts, resolutions, reconciliations, the odd compaction) and tells
 * the parent through a pipe before each call ("begin") and after each call
 * that returned 0 ("ack").  The parent SIGKILLs it at a random moment,
 * reopens the ledger, and checks:
 *
 *   - every acknowledged change is there (an acked intent is listed, an
 *     acked resolution or reconciliation took its key off the list, acked
 *     attempt counts are exact), except that the one call in flight at the
 *     kill may or may not have landed;
 *   - nothing else is listed (no phantom or duplicated operation);
 *   - no corrupt record is read: every record the scanner returns is
 *     re-checked against an independent bitwise CRC32C, and a kill never
 *     leaves corruption in the middle of the file (only a torn tail).
 *
 * Now and then the parent also appends a torn prefix of a valid record, as
 * a writer killed mid-write(2) would: it must be ignored, and cut off by
 * the next writer.
 *
 * Usage: ledger_crash_test DIR_PARENT [ITERATIONS]; the seed comes from
 * SG_LEDGER_CRASH_SEED (default: the time) and is printed, so a failure
 * can be replayed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <streamguard/ledger.h>

#include "ledger/internal.h"

#include "../sg_auto.h"

#define FAIL(...)                                                     \
    do {                                                              \
        fprintf(stderr, "ledger_crash_test: iteration %d: ", g_iter); \
        fprintf(stderr, __VA_ARGS__);                                 \
        fprintf(stderr, " (seed %" PRIu64 ")\n", g_seed);             \
        exit(1);                                                      \
    } while (0)

static int g_iter;
static uint64_t g_seed;

static uint64_t rnd(uint64_t *s) {
    /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * UINT64_C(2685821657736338717);
}

/* ------------------------------------------------------------- the protocol */

enum { OP_INTENT = 1, OP_ATTEMPT, OP_RESOLVE, OP_RECONCILE, OP_COMPACT, OP_READY };

typedef struct msg {
    uint8_t ack; /* 0 begin, 1 ack */
    uint8_t op;
    uint8_t res;
    uint8_t pad;
    uint32_t key;
    uint32_t n;
} msg;

static void send_msg(int fd, const msg *m) {
    /* sizeof(msg) < PIPE_BUF: each write is atomic */
    if (write(fd, m, sizeof(*m)) != (ssize_t)sizeof(*m)) {
        _exit(3);
    }
}

static void key_name(uint32_t id, char *buf, size_t len) {
    snprintf(buf, len, "crash-%08" PRIu32, id);
}

/* ---------------------------------------------------------------- the child */

typedef struct ckey {
    uint32_t id;
    uint32_t attempts;
    uint8_t state; /* 'P' pending, 'U' unknown */
} ckey;

typedef struct leftovers {
    size_t n;
    uint32_t ids[64];
} leftovers;

static int collect_leftover(const sg_ledger_entry *e, void *ud) {
    leftovers *lo = ud;
    if (lo->n < 64) {
        lo->ids[lo->n++] = (uint32_t)strtoul(e->key + 6, NULL, 10);
    }
    return 0;
}

static void child(const char *dir, int fd, uint64_t seed, uint32_t first_id,
                  sg_ledger_fsync policy) {
    SG_AUTO_LEDGER_OPTIONS(o);
    sg_ledger_options_set_fsync(o, policy);
    sg_ledger *l;
    if (sg_ledger_open(&l, dir, o) != 0) {
        _exit(2);
    }
    leftovers lo = {0};
    if (sg_ledger_list_unresolved(l, collect_leftover, &lo) != 0) {
        _exit(2);
    }
    msg ready = {.ack = 1, .op = OP_READY};
    send_msg(fd, &ready);
    ckey mine[8];
    size_t nopen = 0;
    uint32_t next = first_id;
    char key[64];
    for (;;) {
        uint64_t r = rnd(&seed) % 1000;
        msg m = {0};
        int rv;
        if (r < 300 && nopen < 8) {
            m.op = OP_INTENT;
            m.key = next++;
        } else if (r < 600 && nopen > 0) {
            m.op = OP_ATTEMPT;
        } else if (r < 850 && nopen > 0) {
            m.op = OP_RESOLVE;
        } else if (r < 995 && lo.n > 0) {
            m.op = OP_RECONCILE;
        } else if (r >= 995) {
            m.op = OP_COMPACT;
        } else {
            continue;
        }
        size_t pick = nopen > 0 ? (size_t)(rnd(&seed) % nopen) : 0;
        switch (m.op) {
        case OP_INTENT:
            key_name(m.key, key, sizeof(key));
            send_msg(fd, &m);
            rv = sg_ledger_intent(l, key, "POST", "https://api.example.com/v1/charge");
            if (rv == 0) {
                mine[nopen++] = (ckey){m.key, 0, 'P'};
            }
            break;
        case OP_ATTEMPT:
            m.key = mine[pick].id;
            m.n = mine[pick].attempts + 1;
            key_name(m.key, key, sizeof(key));
            send_msg(fd, &m);
            rv = sg_ledger_attempt(l, key, m.n, SG_OUTCOME_IDLE_TIMEOUT,
                                   SG_PHASE_STREAMING, true, 200, false);
            if (rv == 0) {
                mine[pick].attempts = m.n;
            }
            break;
        case OP_RESOLVE:
            m.key = mine[pick].id;
            m.res = (uint8_t)(1 + rnd(&seed) % 3);
            key_name(m.key, key, sizeof(key));
            send_msg(fd, &m);
            rv = sg_ledger_resolve(l, key, (sg_ledger_resolution)m.res,
                                   SG_OUTCOME_TRUNCATED);
            if (rv == 0) {
                if (m.res == SG_LEDGER_UNKNOWN && lo.n < 64) {
                    lo.ids[lo.n++] = m.key;
                }
                mine[pick] = mine[--nopen];
            }
            break;
        case OP_RECONCILE:
            m.key = lo.ids[--lo.n];
            key_name(m.key, key, sizeof(key));
            send_msg(fd, &m);
            rv = sg_ledger_reconcile(l, key, "checked with the provider");
            break;
        case OP_COMPACT:
        default:
            send_msg(fd, &m);
            rv = sg_ledger_compact(l);
            break;
        }
        if (rv != 0) {
            fprintf(stderr, "child: op %d key %u: %s\n", m.op, m.key, sg_strerror(rv));
            _exit(4);
        }
        m.ack = 1;
        send_msg(fd, &m);
    }
}

/* --------------------------------------------------------------- the model */

typedef struct mkey {
    uint32_t id;
    uint32_t attempts;
    uint8_t state; /* 'P', 'U', or 0 = not live */
} mkey;

typedef struct model {
    mkey *keys;
    size_t n;
    size_t cap;
} model;

static mkey *model_find(model *m, uint32_t id) {
    for (size_t i = 0; i < m->n; i++) {
        if (m->keys[i].id == id) {
            return &m->keys[i];
        }
    }
    return NULL;
}

static void model_set(model *m, mkey k) {
    mkey *e = model_find(m, k.id);
    if (k.state == 0) {
        if (e != NULL) {
            *e = m->keys[--m->n];
        }
        return;
    }
    if (e != NULL) {
        *e = k;
        return;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 256;
        m->keys = realloc(m->keys, m->cap * sizeof(*m->keys));
        if (m->keys == NULL) {
            abort();
        }
    }
    m->keys[m->n++] = k;
}

static mkey model_get(model *m, uint32_t id) {
    mkey *e = model_find(m, id);
    return e != NULL ? *e : (mkey){id, 0, 0};
}

/* What op @x does to key state @k. */
static mkey after(mkey k, const msg *x) {
    switch (x->op) {
    case OP_INTENT:
        return (mkey){x->key, 0, 'P'};
    case OP_ATTEMPT:
        k.attempts = x->n;
        return k;
    case OP_RESOLVE:
        if (x->res == SG_LEDGER_UNKNOWN) {
            k.state = 'U';
        } else {
            k = (mkey){x->key, 0, 0};
        }
        return k;
    case OP_RECONCILE:
        return (mkey){x->key, 0, 0};
    default:
        return k;
    }
}

static bool same(mkey a, mkey b) {
    if (a.state == 0 || b.state == 0) {
        return a.state == b.state;
    }
    return a.state == b.state && a.attempts == b.attempts;
}

/* ------------------------------------------------------------ verification */

typedef struct observed {
    model live;
    uint64_t dup;
} observed;

static int observe(const sg_ledger_entry *e, void *ud) {
    observed *o = ud;
    if (strncmp(e->key, "crash-", 6) != 0) {
        o->dup++;
        return 0;
    }
    uint32_t id = (uint32_t)strtoul(e->key + 6, NULL, 10);
    if (model_find(&o->live, id) != NULL) {
        o->dup++;
    }
    model_set(&o->live,
              (mkey){id, e->attempts, e->state == SG_LEDGER_PENDING ? 'P' : 'U'});
    return 0;
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

typedef struct recheck {
    int fd;
    uint64_t records;
} recheck;

static int recheck_record(const sg__ledger_rec *r, uint64_t off, size_t size, void *ud) {
    recheck *rc = ud;
    uint8_t buf[SG__LEDGER_REC_MAX];
    (void)r;
    if (size > sizeof(buf) || pread(rc->fd, buf, size, (off_t)off) != (ssize_t)size) {
        FAIL("cannot re-read record at %" PRIu64, off);
    }
    uint32_t want = (uint32_t)buf[12] | (uint32_t)buf[13] << 8 | (uint32_t)buf[14] << 16 |
                    (uint32_t)buf[15] << 24;
    uint32_t crc = crc32c_bitwise(crc32c_bitwise(0, buf, 12), buf + 16, size - 16);
    if (crc != want || buf[0] != 0x1E) {
        FAIL("the scanner returned a record whose checksum fails at %" PRIu64, off);
    }
    rc->records++;
    return 0;
}

static uint64_t scan_whole_file(const char *dir, uint64_t *tail) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, SG__LEDGER_DATA);
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        return 0; /* killed before the file existed */
    }
    struct stat st;
    fstat(fd, &st);
    recheck rc = {fd, 0};
    sg__ledger_scan sc;
    if (sg__ledger_scan_fd(fd, 0, (uint64_t)st.st_size, recheck_record, &rc, &sc) != 0) {
        FAIL("scan failed");
    }
    if (sc.corrupt_regions != 0) {
        FAIL("%" PRIu64 " corrupt regions in the middle of the file", sc.corrupt_regions);
    }
    close(fd);
    *tail = sc.tail_bytes;
    return rc.records;
}

/* A writer killed inside write(2) leaves a prefix of its record. */
static void inject_torn_tail(const char *dir, uint64_t *seed) {
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, SG__LEDGER_DATA);
    int fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0) {
        return;
    }
    uint8_t buf[SG__LEDGER_REC_MAX];
    sg__ledger_rec r = {.type = SG__LREC_INTENT,
                        .key = "torn-never-acked",
                        .key_len = 16,
                        .method = "POST",
                        .method_len = 4,
                        .url = "https://torn/x",
                        .url_len = 14};
    int n = sg__ledger_encode(&r, buf, sizeof(buf));
    size_t cut = 1 + (size_t)(rnd(seed) % (uint64_t)(n - 1));
    if (write(fd, buf, cut) != (ssize_t)cut) {
        FAIL("inject");
    }
    close(fd);
}

static int rm_one(const char *p, const struct stat *s, int f, struct FTW *w) {
    (void)s;
    (void)f;
    (void)w;
    return remove(p);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ledger_crash_test DIR_PARENT [ITERATIONS]\n");
        return 2;
    }
    int iterations = argc > 2 ? atoi(argv[2]) : 300;
    const char *env = getenv("SG_LEDGER_CRASH_SEED");
    g_seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    if (g_seed == 0) {
        g_seed = 1;
    }
    printf("ledger_crash_test: seed %" PRIu64 " (SG_LEDGER_CRASH_SEED), %d iterations\n",
           g_seed, iterations);
    fflush(stdout);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/sg-ledger-crash-XXXXXX", argv[1]);
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    char ldir[600];
    snprintf(ldir, sizeof(ldir), "%s/l", dir);

    uint64_t rng = g_seed;
    model m = {0};
    uint64_t acks = 0, inflight_landed = 0, torn = 0, tails = 0, kills_before_ready = 0;
    uint64_t records = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);

    for (g_iter = 0; g_iter < iterations; g_iter++) {
        int p[2];
        if (pipe(p) != 0) {
            perror("pipe");
            return 2;
        }
        sg_ledger_fsync policy =
            g_iter % 4 == 0 ? SG_LEDGER_FSYNC_DEFAULT : SG_LEDGER_FSYNC_NEVER;
        uint64_t child_seed = rnd(&rng) | 1;
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            close(p[0]);
            child(ldir, p[1], child_seed, (uint32_t)g_iter * 100000u, policy);
            _exit(0);
        }
        close(p[1]);
        /* Wait until the child has opened the ledger (or died), then let it
         * run for a random 0 .. 3 ms. */
        msg first;
        ssize_t got = read(p[0], &first, sizeof(first));
        bool ready = got == (ssize_t)sizeof(first) && first.op == OP_READY;
        if (!ready) {
            kills_before_ready++;
        }
        struct timespec nap = {0, (long)(rnd(&rng) % 3000000)};
        nanosleep(&nap, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        if (!WIFSIGNALED(status)) {
            FAIL("child exited by itself (status %d)", WEXITSTATUS(status));
        }

        /* Replay the child's story into the model. */
        msg x, inflight = {0};
        bool have_inflight = false;
        while (read(p[0], &x, sizeof(x)) == (ssize_t)sizeof(x)) {
            if (x.ack == 0) {
                inflight = x;
                have_inflight = true;
                continue;
            }
            if (!have_inflight || x.op != inflight.op || x.key != inflight.key) {
                FAIL("ack without its begin");
            }
            model_set(&m, after(model_get(&m, x.key), &x));
            have_inflight = false;
            acks++;
        }
        close(p[0]);

        /* Reopen and compare. */
        sg_ledger *l;
        int rv = sg_ledger_open(&l, ldir, NULL);
        if (rv != 0) {
            FAIL("reopen: %s", sg_strerror(rv));
        }
        observed o = {0};
        if ((rv = sg_ledger_list_unresolved(l, observe, &o)) != 0) {
            FAIL("list: %s", sg_strerror(rv));
        }
        if (o.dup != 0) {
            FAIL("a key listed twice or a stranger listed");
        }
        sg_ledger_stats st = SG_LEDGER_STATS_INIT;
        sg_ledger_get_stats(l, &st);
        if (st.corrupt_regions != 0) {
            FAIL("corruption in the middle after a kill");
        }
        sg_ledger_close(l);
        for (size_t i = 0; i < m.n; i++) {
            mkey want = m.keys[i];
            mkey got_k = model_get(&o.live, want.id);
            if (have_inflight && inflight.key == want.id && inflight.op != OP_COMPACT) {
                continue; /* checked below */
            }
            if (!same(want, got_k)) {
                FAIL("key %u: acked state %c/%u, found %c/%u", want.id,
                     want.state ? want.state : '-', want.attempts,
                     got_k.state ? got_k.state : '-', got_k.attempts);
            }
        }
        for (size_t i = 0; i < o.live.n; i++) {
            mkey seen = o.live.keys[i];
            if (have_inflight && inflight.key == seen.id && inflight.op != OP_COMPACT) {
                continue;
            }
            if (model_find(&m, seen.id) == NULL) {
                FAIL("key %u listed but never acked", seen.id);
            }
        }
        if (have_inflight && inflight.op != OP_COMPACT) {
            mkey before = model_get(&m, inflight.key);
            mkey now = model_get(&o.live, inflight.key);
            mkey landed = after(before, &inflight);
            if (!same(now, before) && !same(now, landed)) {
                FAIL("in-flight op %d on key %u left an impossible state", inflight.op,
                     inflight.key);
            }
            if (!same(now, before)) {
                inflight_landed++;
            }
            model_set(&m, now);
        }
        free(o.live.keys);

        uint64_t tail = 0;
        records += scan_whole_file(ldir, &tail);
        if (tail > 0) {
            tails++;
        }
        if (rnd(&rng) % 6 == 0) {
            inject_torn_tail(ldir, &rng);
            torn++;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs =
        (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("ledger_crash_test: OK: %d kills in %.2f s; %" PRIu64 " acked changes, "
           "%" PRIu64 " in-flight changes landed, %" PRIu64 " kills before ready, "
           "%" PRIu64 " torn tails injected, %" PRIu64 " tails seen after a kill, "
           "%zu live at the end, %" PRIu64 " records re-checked\n",
           iterations, secs, acks, inflight_landed, kills_before_ready, torn, tails, m.n,
           records);
    free(m.keys);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
