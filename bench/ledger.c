/*
 * Ledger throughput: records per second appended by one process under each
 * fsync policy, the cost of one guarded operation's records (intent, one
 * attempt, resolve), replay speed on open, and compaction time.
 *
 * Usage: bench_ledger [DIR_PARENT] [OPS]   (default /tmp, 20000)
 * The synced policies do OPS / 10 operations: each intent is an fdatasync.
 * The time includes sg_ledger_sync at the end: with the default policy the
 * sync thread's last fdatasync counts too.
 * It measures and prints; it never fails because a machine is slow.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <streamguard/ledger.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rm_one(const char *p, const struct stat *s, int f, struct FTW *w) {
    (void)s;
    (void)f;
    (void)w;
    return remove(p);
}

static void die(const char *what, int rv) {
    fprintf(stderr, "bench_ledger: %s: %s\n", what, sg_strerror(rv));
    exit(1);
}

/* sg_ledger_open of @dir under @policy. */
static int open_with(const char *dir, sg_ledger_fsync policy, sg_ledger **l) {
    sg_ledger_options *o = NULL;
    int rv = sg_ledger_options_new(&o);
    if (rv == 0 && (rv = sg_ledger_options_set_fsync(o, policy)) == 0) {
        rv = sg_ledger_open(l, dir, o);
    }
    sg_ledger_options_free(o);
    return rv;
}

/* @ops operations of three records each; every other one stays unknown. */
static double run(const char *dir, sg_ledger_fsync policy, int ops) {
    sg_ledger *l;
    int rv = open_with(dir, policy, &l);
    if (rv != 0) {
        die("open", rv);
    }
    char key[SG_LEDGER_KEY_SIZE];
    char body[64];
    double t0 = now_s();
    for (int i = 0; i < ops; i++) {
        snprintf(body, sizeof(body), "{\"prompt\":\"bench %d %d\"}", (int)policy, i);
        if ((rv = sg_ledger_key_derive("POST", "https://api.example.com/v1/chat", body,
                                       strlen(body), key)) != 0 ||
            (rv = sg_ledger_intent(l, key, "POST", "https://api.example.com/v1/chat")) !=
                0 ||
            (rv = sg_ledger_attempt(l, key, 1, SG_OUTCOME_IDLE_TIMEOUT,
                                    SG_PHASE_STREAMING, true, 200, i % 2 == 0)) != 0 ||
            (rv = sg_ledger_resolve(l, key, i % 2 ? SG_LEDGER_DONE : SG_LEDGER_UNKNOWN,
                                    SG_OUTCOME_IDLE_TIMEOUT)) != 0) {
            die("append", rv);
        }
    }
    if ((rv = sg_ledger_sync(l, -1)) != 0) {
        die("sync", rv);
    }
    double dt = now_s() - t0;
    sg_ledger_close(l);
    return dt;
}

int main(int argc, char **argv) {
    const char *parent = argc > 1 ? argv[1] : "/tmp";
    int ops = argc > 2 ? atoi(argv[2]) : 20000;
    char base[512];
    snprintf(base, sizeof(base), "%s/sg-bench-ledger-XXXXXX", parent);
    if (mkdtemp(base) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    char dir[600];
    static const struct {
        sg_ledger_fsync policy;
        const char *name;
        int div;
    } runs[] = {{SG_LEDGER_FSYNC_NEVER, "never", 1},
                {SG_LEDGER_FSYNC_DEFAULT, "default (sync thread)", 10},
                {SG_LEDGER_FSYNC_ALWAYS, "always", 10}};
    printf("ledger append, one process, in %s (3 records per operation)\n", parent);
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        snprintf(dir, sizeof(dir), "%s/%zu", base, i);
        int n = ops / runs[i].div;
        double dt = run(dir, runs[i].policy, n);
        printf("  fsync %-26s %7d ops in %6.3f s: %9.0f records/s, %8.0f ops/s, "
               "%7.1f us/op\n",
               runs[i].name, n, dt, 3.0 * n / dt, n / dt, dt * 1e6 / n);
    }

    /* replay and compaction on the "never" run's file */
    snprintf(dir, sizeof(dir), "%s/0", base);
    sg_ledger *l;
    double t0 = now_s();
    int rv = open_with(dir, SG_LEDGER_FSYNC_DEFAULT, &l);
    double dt = now_s() - t0;
    if (rv != 0) {
        die("reopen", rv);
    }
    sg_ledger_stats st = SG_LEDGER_STATS_INIT;
    sg_ledger_get_stats(l, &st);
    printf("  replay on open: %llu records (%llu bytes) in %.3f s: %.0f records/s, "
           "%zu live\n",
           (unsigned long long)st.records, (unsigned long long)st.file_bytes, dt,
           (double)st.records / dt, st.live);
    t0 = now_s();
    rv = sg_ledger_compact(l);
    dt = now_s() - t0;
    if (rv != 0) {
        die("compact", rv);
    }
    sg_ledger_stats st2 = SG_LEDGER_STATS_INIT;
    sg_ledger_get_stats(l, &st2);
    printf("  compaction: %llu -> %llu bytes, %zu live, in %.3f s (synced)\n",
           (unsigned long long)st.file_bytes, (unsigned long long)st2.file_bytes,
           st2.live, dt);
    sg_ledger_close(l);
    nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
