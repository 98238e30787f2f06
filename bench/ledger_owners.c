/*
 * Intents per second and intent latency (p50, p99) with 1, 4 and 16
 * concurrent worker processes on one ledger: a directory (the file ledger,
 * default fsync policy) or a postgresql:// URI (its schema applied first).
 * Each worker opens its own handle and runs OPS operations on keys of its
 * own: the intent (timed), then a resolve done, as a guarded operation that
 * ends well would.  Intents per second count every worker's intents over
 * the wall time of the whole run.
 *
 * Usage: bench_ledger_owners LOCATION [OPS]   (OPS per worker, default 2000)
 * It measures and prints; it never fails because a machine is slow.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <streamguard/ledger.h>

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* One worker: @ops operations, each intent's latency into @lat. */
static int worker(const char *loc, int run, int id, int ops, int64_t *lat) {
    sg_ledger *l;
    if (sg_ledger_open(&l, loc, NULL) != 0) {
        return 1;
    }
    for (int i = 0; i < ops; i++) {
        char key[64];
        snprintf(key, sizeof(key), "bench-%d-%d-%d-%d", (int)getppid(), run, id, i);
        int64_t t0 = now_ns();
        if (sg_ledger_intent(l, key, "POST", "https://api.example.com/v1/chat") != 0) {
            sg_ledger_close(l);
            return 1;
        }
        lat[i] = now_ns() - t0;
        if (sg_ledger_resolve(l, key, SG_LEDGER_DONE, SG_OUTCOME_OK) != 0) {
            sg_ledger_close(l);
            return 1;
        }
    }
    sg_ledger_close(l);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LOCATION [OPS]\n", argv[0]);
        return 2;
    }
    const char *loc = argv[1];
    int ops = argc > 2 ? atoi(argv[2]) : 2000;
    int rv = sg_ledger_init_schema(loc, NULL);
    if (rv != 0) {
        fprintf(stderr, "init %s: %s\n", loc, sg_strerror(rv));
        return 1;
    }
    static const int counts[] = {1, 4, 16};
    for (int c = 0; c < 3; c++) {
        int n = counts[c];
        size_t total = (size_t)n * (size_t)ops;
        int64_t *lat = mmap(NULL, total * sizeof(*lat), PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (lat == MAP_FAILED) {
            return 1;
        }
        int64_t t0 = now_ns();
        for (int w = 0; w < n; w++) {
            if (fork() == 0) {
                _exit(worker(loc, c, w, ops, lat + (size_t)w * (size_t)ops));
            }
        }
        int failed = 0;
        for (int w = 0; w < n; w++) {
            int st;
            wait(&st);
            failed += !WIFEXITED(st) || WEXITSTATUS(st) != 0;
        }
        double wall = (double)(now_ns() - t0) / 1e9;
        qsort(lat, total, sizeof(*lat), cmp_i64);
        printf("%-12s %2d worker%s %6zu intents in %6.2f s: %8.0f intents/s, "
               "p50 %7.3f ms, p99 %7.3f ms%s\n",
               strncmp(loc, "postgres", 8) == 0 ? "postgresql" : "file", n,
               n == 1 ? " " : "s", total, wall, (double)total / wall,
               (double)lat[total / 2] / 1e6, (double)lat[total * 99 / 100] / 1e6,
               failed ? " (some workers failed)" : "");
        munmap(lat, total * sizeof(*lat));
    }
    sg_ledger *l;
    if (sg_ledger_open(&l, loc, NULL) == 0) {
        sg_ledger_compact(l);
        sg_ledger_close(l);
    }
    return 0;
}
