/*
 * Several processes sharing one ledger directory.
 *
 *   1. appends: 4 writers x 500 operations (intent, 1..3 attempts, and a
 *      resolution for most), while a reader lists the unresolved set over
 *      and over.  Then every record is in the file exactly once, the file
 *      replays with no corruption and no tail, and the unresolved set is
 *      exactly what the writers left unresolved.  Every listing the reader
 *      saw had each key at most once.
 *   2. compaction under load: the same writers (leaving every operation
 *      unresolved) while another process compacts in a loop; afterwards all
 *      2000 operations are listed once with their exact attempt counts.
 *   3. ownership: 4 processes race to record intents for the same 300 keys;
 *      each key is owned by exactly one of them (the others get SG_EEXIST).
 *
 * Usage: ledger_multiproc_test DIR_PARENT.  Exits 0 when all hold.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <streamguard/ledger.h>

#include "ledger/internal.h"

#include "../sg_auto.h"

#define WRITERS 4
#define PER_WRITER 500
#define SHARED_KEYS 300

#define FAIL(...)                                   \
    do {                                            \
        fprintf(stderr, "ledger_multiproc_test: "); \
        fprintf(stderr, __VA_ARGS__);               \
        fprintf(stderr, "\n");                      \
        exit(1);                                    \
    } while (0)

static sg_ledger *open_or_die(const char *dir) {
    SG_AUTO_LEDGER_OPTIONS(o);
    sg_ledger_options_set_fsync(o, getenv("SG_LEDGER_TEST_FSYNC")
                                       ? SG_LEDGER_FSYNC_DEFAULT
                                       : SG_LEDGER_FSYNC_NEVER);
    sg_ledger *l;
    int rv = sg_ledger_open(&l, dir, o);
    if (rv != 0) {
        FAIL("open %s: %s", dir, sg_strerror(rv));
    }
    return l;
}

/* What writer @w does with operation @i: attempts, and how it resolves. */
static uint32_t attempts_of(int w, int i) {
    return (uint32_t)(1 + (w + i) % 3);
}

static int resolution_of(int w, int i) {
    int r = (w * 7 + i) % 5;
    return r == 0   ? 0
           : r == 1 ? SG_LEDGER_UNKNOWN
           : r == 2 ? SG_LEDGER_FAILED
                    : SG_LEDGER_DONE;
}

static void check(int rv, const char *what) {
    if (rv != 0) {
        fprintf(stderr, "ledger_multiproc_test: %s: %s\n", what, sg_strerror(rv));
        _exit(1);
    }
}

static void writer(const char *dir, int w, bool resolve) {
    sg_ledger *l = open_or_die(dir);
    char key[64];
    for (int i = 0; i < PER_WRITER; i++) {
        snprintf(key, sizeof(key), "w%d-%04d", w, i);
        check(sg_ledger_intent(l, key, "POST", "https://api.example.com/v1/x"), "intent");
        for (uint32_t n = 1; n <= attempts_of(w, i); n++) {
            check(sg_ledger_attempt(l, key, n, SG_OUTCOME_TRUNCATED, SG_PHASE_STREAMING,
                                    true, 200, false),
                  "attempt");
        }
        int res = resolution_of(w, i);
        if (resolve && res != 0) {
            check(sg_ledger_resolve(l, key, (sg_ledger_resolution)res,
                                    SG_OUTCOME_TRUNCATED),
                  "resolve");
        }
    }
    sg_ledger_close(l);
    _exit(0);
}

typedef struct dupcheck {
    char (*keys)[16];
    size_t n;
    size_t cap;
    int bad;
} dupcheck;

static int cmp_key(const void *a, const void *b) {
    return strcmp(a, b);
}

static int note_key(const sg_ledger_entry *e, void *ud) {
    dupcheck *d = ud;
    if (d->n < d->cap) {
        snprintf(d->keys[d->n++], 16, "%s", e->key);
    } else {
        d->bad = 1;
    }
    return 0;
}

/* Lists until @stop_flag is set; every listing must hold each key once. */
static void reader(const char *dir, volatile int *stop_flag, volatile int *listings) {
    sg_ledger *l = open_or_die(dir);
    dupcheck d = {.cap = WRITERS * PER_WRITER + 16};
    d.keys = malloc(d.cap * 16);
    while (!*stop_flag) {
        d.n = 0;
        check(sg_ledger_list_unresolved(l, note_key, &d), "list");
        qsort(d.keys, d.n, 16, cmp_key);
        for (size_t i = 1; i < d.n; i++) {
            if (strcmp(d.keys[i - 1], d.keys[i]) == 0) {
                d.bad = 1;
            }
        }
        if (d.bad) {
            fprintf(stderr, "ledger_multiproc_test: a listing held a key twice\n");
            _exit(1);
        }
        (*listings)++;
    }
    free(d.keys);
    sg_ledger_close(l);
    _exit(0);
}

static void compactor(const char *dir, volatile int *stop_flag, volatile int *count) {
    sg_ledger *l = open_or_die(dir);
    while (!*stop_flag) {
        check(sg_ledger_compact(l), "compact");
        (*count)++;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    sg_ledger_close(l);
    _exit(0);
}

static void owner(const char *dir, int w, volatile int *owned) {
    sg_ledger *l = open_or_die(dir);
    char key[64];
    for (int i = 0; i < SHARED_KEYS; i++) {
        snprintf(key, sizeof(key), "shared-%04d", i);
        int rv = sg_ledger_intent(l, key, "POST", "https://api.example.com/v1/pay");
        if (rv == 0) {
            owned[i * WRITERS + w] = 1;
        } else if (rv != SG_EEXIST) {
            check(rv, "shared intent");
        }
    }
    sg_ledger_close(l);
    _exit(0);
}

static void wait_all(pid_t *pids, int n) {
    for (int i = 0; i < n; i++) {
        int status;
        if (waitpid(pids[i], &status, 0) != pids[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            FAIL("child %d failed", i);
        }
    }
}

/* ------------------------------------------------------------------ checks */

typedef struct counts {
    /* [writer][op]: intents, attempts by n, resolves */
    uint16_t intent[WRITERS][PER_WRITER];
    uint16_t attempt[WRITERS][PER_WRITER][4];
    uint16_t resolve[WRITERS][PER_WRITER];
    uint64_t other;
} counts;

static int count_rec(const sg__ledger_rec *r, uint64_t off, size_t size, void *ud) {
    counts *c = ud;
    int w, i;
    char key[32];
    (void)off;
    (void)size;
    snprintf(key, sizeof(key), "%.*s", (int)r->key_len, r->key);
    if (sscanf(key, "w%d-%d", &w, &i) != 2 || w < 0 || w >= WRITERS || i < 0 ||
        i >= PER_WRITER) {
        c->other++;
        return 0;
    }
    switch (r->type) {
    case SG__LREC_INTENT:
        c->intent[w][i]++;
        break;
    case SG__LREC_ATTEMPT:
        c->attempt[w][i][r->n < 4 ? r->n : 0]++;
        break;
    case SG__LREC_RESOLVE:
        c->resolve[w][i]++;
        break;
    default:
        c->other++;
        break;
    }
    return 0;
}

static void scan_file(const char *dir, counts *c, sg__ledger_scan *sc) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", dir, SG__LEDGER_DATA);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        FAIL("open %s", path);
    }
    memset(c, 0, sizeof(*c));
    if (sg__ledger_scan_fd(fd, 0, (uint64_t)st.st_size, count_rec, c, sc) != 0) {
        FAIL("scan");
    }
    close(fd);
}

typedef struct live_check {
    uint8_t seen[WRITERS][PER_WRITER];
    uint32_t attempts[WRITERS][PER_WRITER];
    uint8_t state[WRITERS][PER_WRITER];
    uint64_t strangers;
} live_check;

static int note_live(const sg_ledger_entry *e, void *ud) {
    live_check *lc = ud;
    int w, i;
    if (sscanf(e->key, "w%d-%d", &w, &i) != 2 || w < 0 || w >= WRITERS || i < 0 ||
        i >= PER_WRITER) {
        lc->strangers++;
        return 0;
    }
    lc->seen[w][i]++;
    lc->attempts[w][i] = e->attempts;
    lc->state[w][i] = (uint8_t)e->state;
    return 0;
}

static void check_live(const char *dir, bool resolved) {
    sg_ledger *l = open_or_die(dir);
    static live_check lc;
    memset(&lc, 0, sizeof(lc));
    if (sg_ledger_list_unresolved(l, note_live, &lc) != 0) {
        FAIL("list");
    }
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    sg_ledger_get_stats(l, &st);
    if (st.corrupt_regions != 0 || st.tail_bytes != 0) {
        FAIL("replay found corruption (%" PRIu64 " regions, %" PRIu64 " tail bytes)",
             st.corrupt_regions, st.tail_bytes);
    }
    sg_ledger_close(l);
    if (lc.strangers != 0) {
        FAIL("unknown keys listed");
    }
    for (int w = 0; w < WRITERS; w++) {
        for (int i = 0; i < PER_WRITER; i++) {
            int res = resolved ? resolution_of(w, i) : 0;
            int want_seen = res == 0 || res == SG_LEDGER_UNKNOWN;
            if (lc.seen[w][i] != want_seen) {
                FAIL("w%d-%04d listed %d times, want %d", w, i, lc.seen[w][i], want_seen);
            }
            if (want_seen && lc.attempts[w][i] != attempts_of(w, i)) {
                FAIL("w%d-%04d has %u attempts, want %u", w, i, lc.attempts[w][i],
                     attempts_of(w, i));
            }
            if (want_seen &&
                lc.state[w][i] !=
                    (res == 0 ? SG_LEDGER_PENDING : SG_LEDGER_UNRESOLVED_UNKNOWN)) {
                FAIL("w%d-%04d in the wrong state", w, i);
            }
        }
    }
}

static int rm_one(const char *p, const struct stat *s, int f, struct FTW *w) {
    (void)s;
    (void)f;
    (void)w;
    return remove(p);
}

static double since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ledger_multiproc_test DIR_PARENT\n");
        return 2;
    }
    char base[512];
    snprintf(base, sizeof(base), "%s/sg-ledger-mp-XXXXXX", argv[1]);
    if (mkdtemp(base) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    volatile int *shared =
        mmap(NULL, 4096 * 4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    char dir[600];
    pid_t pids[WRITERS];
    struct timespec t0;

    /* 1. appends with a concurrent reader */
    snprintf(dir, sizeof(dir), "%s/appends", base);
    sg_ledger_close(open_or_die(dir));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    shared[0] = 0;
    shared[1] = 0;
    pid_t rd = fork();
    if (rd == 0) {
        reader(dir, &shared[0], &shared[1]);
    }
    for (int w = 0; w < WRITERS; w++) {
        if ((pids[w] = fork()) == 0) {
            writer(dir, w, true);
        }
    }
    wait_all(pids, WRITERS);
    shared[0] = 1;
    wait_all(&rd, 1);
    double secs = since(&t0);
    static counts c;
    sg__ledger_scan sc;
    scan_file(dir, &c, &sc);
    if (sc.corrupt_regions != 0 || sc.tail_bytes != 0 || c.other != 0) {
        FAIL("appends: the file does not replay cleanly");
    }
    uint64_t total = 0;
    for (int w = 0; w < WRITERS; w++) {
        for (int i = 0; i < PER_WRITER; i++) {
            if (c.intent[w][i] != 1) {
                FAIL("w%d-%04d: %u intents", w, i, c.intent[w][i]);
            }
            for (uint32_t n = 1; n <= 3; n++) {
                unsigned want = n <= attempts_of(w, i) ? 1 : 0;
                if (c.attempt[w][i][n] != want) {
                    FAIL("w%d-%04d: attempt %u recorded %u times", w, i, n,
                         c.attempt[w][i][n]);
                }
            }
            if (c.resolve[w][i] != (resolution_of(w, i) != 0 ? 1 : 0)) {
                FAIL("w%d-%04d: %u resolutions", w, i, c.resolve[w][i]);
            }
        }
    }
    total = sc.records;
    check_live(dir, true);
    printf("ledger_multiproc_test: appends: %d writers x %d operations, %" PRIu64
           " records, each exactly once, in %.2f s; %d consistent listings meanwhile\n",
           WRITERS, PER_WRITER, total, secs, shared[1]);

    /* 2. compaction under load */
    snprintf(dir, sizeof(dir), "%s/compaction", base);
    sg_ledger_close(open_or_die(dir));
    clock_gettime(CLOCK_MONOTONIC, &t0);
    shared[0] = 0;
    shared[2] = 0;
    pid_t cp = fork();
    if (cp == 0) {
        compactor(dir, &shared[0], &shared[2]);
    }
    for (int w = 0; w < WRITERS; w++) {
        if ((pids[w] = fork()) == 0) {
            writer(dir, w, false);
        }
    }
    wait_all(pids, WRITERS);
    shared[0] = 1;
    wait_all(&cp, 1);
    secs = since(&t0);
    check_live(dir, false);
    sg_ledger *l = open_or_die(dir);
    if (sg_ledger_compact(l) != 0) {
        FAIL("final compaction");
    }
    sg_ledger_close(l);
    scan_file(dir, &c, &sc);
    for (int w = 0; w < WRITERS; w++) {
        for (int i = 0; i < PER_WRITER; i++) {
            if (c.intent[w][i] != 1) {
                FAIL("compacted: w%d-%04d has %u intents", w, i, c.intent[w][i]);
            }
        }
    }
    check_live(dir, false);
    printf("ledger_multiproc_test: compaction: %d writers x %d operations while %d "
           "compactions ran, in %.2f s; all %d listed once with exact attempts\n",
           WRITERS, PER_WRITER, shared[2], secs, WRITERS * PER_WRITER);

    /* 3. ownership */
    snprintf(dir, sizeof(dir), "%s/ownership", base);
    sg_ledger_close(open_or_die(dir));
    volatile int *owned = &shared[16];
    for (int w = 0; w < WRITERS; w++) {
        if ((pids[w] = fork()) == 0) {
            owner(dir, w, owned);
        }
    }
    wait_all(pids, WRITERS);
    for (int i = 0; i < SHARED_KEYS; i++) {
        int owners = 0;
        for (int w = 0; w < WRITERS; w++) {
            owners += owned[i * WRITERS + w];
        }
        if (owners != 1) {
            FAIL("shared-%04d owned by %d processes", i, owners);
        }
    }
    printf("ledger_multiproc_test: ownership: %d processes raced for %d keys; each key "
           "owned by exactly one\n",
           WRITERS, SHARED_KEYS);
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
