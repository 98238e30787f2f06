/*
 * bench_curl_memory - what one open stream over the libcurl transport
 * holds, by whose it is: libcurl's blocks, the library's, malloc's
 * headers, and how much of that is resident.
 *
 * N guarded streams at once on one managed multi, against sg-fakemodel
 * over loopback, each a GET framed as SSE that delivers two items and
 * then stalls (section 4 of bench_curl_transport, with an idle clock long
 * enough that every stream stays open).  Each configuration runs in a
 * child process of its own, so that libcurl is given that child's
 * allocators (curl_global_init_mem, which must come first) and its heap
 * starts alike:
 *
 *   plain        libcurl's defaults, as an application gets them
 *   buffer=N     the application sets CURLOPT_BUFFERSIZE N on its handles
 *   noca         plain http: the application clears libcurl's default CA
 *                paths on its handles (CURLOPT_CAINFO / CAPATH NULL)
 *   readbuf      sg_curl_global_init_mem instead of curl_global_init_mem:
 *                read buffers on pages of their own, given back by the
 *                managed multi after 500 ms without a read (its default;
 *                readbuf100: 100 ms);
 *                they come from posix_memalign, not the counting
 *                allocators: counted as libcurl's, 16,385 bytes a stream,
 *                and missing from the list of its blocks
 *
 * Counted: libcurl's live blocks through the allocators it is given (each
 * block by the size libcurl asked for), the library's through malloc,
 * calloc, realloc, strdup and free wrapped at link time (-Wl,--wrap: the
 * calls from the static library's objects and this program's, not
 * libcurl's or libc's own), the heap in use (mallinfo2) and VmRSS.  Read
 * once every stream has its two items ("open"), then again after
 * QUIET_MS more with every stream quiet ("quiet").  RSS is VmRSS less the
 * pages of this program's own table of the blocks.  Per stream: the
 * difference from before the first handle was made, over N.
 *
 * A configuration ending in "/slow" (plain/slow, readbuf100/slow) measures
 * CPU instead: N streams of ten items 150 ms apart (longer than the 100 ms
 * after which readbuf100 gives a quiet read buffer back: every item costs
 * a give-back and a page fault), run to their end; the client's CPU (user
 * + system) per item.
 *
 * Usage: bench_curl_memory PATH/TO/sg-fakemodel [N] [config...]
 *        (default 1000 streams, configs "plain")
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <streamguard/curl.h>

#include "curl/internal.h"
#include "harness.h"
#include "timing.h"

#define QUIET_MS 1000

/* ---- the blocks: pointer -> size and whose ------------------------------ */

enum { LIBCURL = 1, LIBRARY = 2 };

typedef struct blk {
    uintptr_t p; /* 0: empty */
    uint32_t size;
    uint32_t who;
} blk;

#define TABLE_BITS 20
#define TABLE_SIZE ((size_t)1 << TABLE_BITS)
static blk *table; /* TABLE_SIZE entries, from mmap-backed calloc */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t s);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
char *__real_strdup(const char *s);

static size_t slot_of(uintptr_t p) {
    return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull >> (64 - TABLE_BITS));
}

static void table_add(void *p, size_t size, uint32_t who) {
    if (p == NULL || table == NULL) {
        return;
    }
    pthread_mutex_lock(&table_lock);
    size_t i = slot_of((uintptr_t)p);
    while (table[i].p != 0 && table[i].p != (uintptr_t)p) {
        i = (i + 1) & (TABLE_SIZE - 1);
    }
    table[i].p = (uintptr_t)p;
    table[i].size = (uint32_t)size;
    table[i].who = who;
    pthread_mutex_unlock(&table_lock);
}

static void table_del(void *p) {
    if (p == NULL || table == NULL) {
        return;
    }
    pthread_mutex_lock(&table_lock);
    const size_t mask = TABLE_SIZE - 1;
    size_t i = slot_of((uintptr_t)p);
    while (table[i].p != 0 && table[i].p != (uintptr_t)p) {
        i = (i + 1) & mask;
    }
    if (table[i].p != 0) {
        table[i].p = 0;
        for (size_t j = (i + 1) & mask; table[j].p != 0; j = (j + 1) & mask) {
            size_t home = slot_of(table[j].p);
            bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
            if (!stays) {
                table[i] = table[j];
                table[j].p = 0;
                i = j;
            }
        }
    }
    pthread_mutex_unlock(&table_lock);
}

/* The library's (and this program's) allocations, wrapped at link time. */
void *__wrap_malloc(size_t n) {
    void *p = __real_malloc(n);
    table_add(p, n, LIBRARY);
    return p;
}
void *__wrap_calloc(size_t n, size_t s) {
    void *p = __real_calloc(n, s);
    table_add(p, n * s, LIBRARY);
    return p;
}
void *__wrap_realloc(void *p, size_t n) {
    void *q = __real_realloc(p, n);
    if (q != NULL || n == 0) {
        table_del(p);
        table_add(q, n, LIBRARY);
    }
    return q;
}
void __wrap_free(void *p) {
    table_del(p);
    __real_free(p);
}
char *__wrap_strdup(const char *s) {
    char *p = __real_strdup(s);
    table_add(p, p != NULL ? strlen(p) + 1 : 0, LIBRARY);
    return p;
}

/* libcurl's, through curl_global_init_mem. */
static size_t buffer_size; /* the configuration's CURLOPT_BUFFERSIZE, or 0 */

static void *c_malloc(size_t n) {
    void *p = __real_malloc(n);
    table_add(p, n, LIBCURL);
    return p;
}
static void c_free(void *p) {
    table_del(p);
    __real_free(p);
}
static void *c_realloc(void *p, size_t n) {
    void *q = __real_realloc(p, n);
    if (q != NULL || n == 0) {
        table_del(p);
        table_add(q, n, LIBCURL);
    }
    return q;
}
static char *c_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = c_malloc(n);
    if (p != NULL) {
        memcpy(p, s, n);
    }
    return p;
}
static void *c_calloc(size_t n, size_t s) {
    void *p = __real_calloc(n, s);
    table_add(p, n * s, LIBCURL);
    return p;
}

/* ---- snapshots ------------------------------------------------------------ */

typedef struct census {
    size_t n;
    uint64_t *keys; /* who << 32 | size, sorted */
    size_t bytes[3];
    size_t heap; /* mallinfo2: in use */
    long rss_kib;
} census;

static int cmpu64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The table's own resident pages (KiB), its mapping's Rss in smaps (the
 * zero page its reads map is not counted there, nor in VmRSS). */
static long table_kib(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[256];
    long k = 0;
    bool in = false;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
            strchr(line, '-') < strchr(line, ' ')) {
            in = lo == (unsigned long)(uintptr_t)table;
        } else if (in && strncmp(line, "Rss:", 4) == 0) {
            k = atol(line + 4);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return k;
}

static void take(census *c) {
    struct mallinfo2 mi = mallinfo2();
    c->heap = mi.uordblks + mi.hblkhd;
    c->rss_kib = rss_kib() - table_kib();
    pthread_mutex_lock(&table_lock);
    size_t live = 0;
    for (size_t i = 0; i < TABLE_SIZE; i++) {
        live += table[i].p != 0;
    }
    c->keys = __real_malloc((live + 1) * sizeof(uint64_t));
    c->n = 0;
    memset(c->bytes, 0, sizeof(c->bytes));
    for (size_t i = 0; i < TABLE_SIZE && c->keys != NULL; i++) {
        if (table[i].p != 0) {
            c->keys[c->n++] = (uint64_t)table[i].who << 32 | table[i].size;
            c->bytes[table[i].who] += table[i].size;
        }
    }
    pthread_mutex_unlock(&table_lock);
    qsort(c->keys, c->n, sizeof(uint64_t), cmpu64);
}

/* Blocks of @who that @after holds more (or fewer) of than @before, per
 * stream: those at least half the streams have one of, each, the rest
 * summed. */
static void print_blocks(const census *before, const census *after, uint32_t who,
                         int streams) {
    size_t i = 0, j = 0;
    long other_bytes = 0, other_n = 0;
    while (i < before->n || j < after->n) {
        uint64_t k = i < before->n && (j >= after->n || before->keys[i] <= after->keys[j])
                         ? before->keys[i]
                         : after->keys[j];
        long d = 0;
        while (i < before->n && before->keys[i] == k) {
            d--, i++;
        }
        while (j < after->n && after->keys[j] == k) {
            d++, j++;
        }
        if ((uint32_t)(k >> 32) != who || d == 0) {
            continue;
        }
        long size = (long)(uint32_t)k;
        if (labs(d) * 2 >= streams) {
            printf("      %6ld bytes x %.2f = %7.0f\n", size, (double)d / streams,
                   (double)d * (double)size / streams);
        } else {
            other_n += d;
            other_bytes += d * size;
        }
    }
    printf("      others: %.1f blocks, %.0f bytes\n", (double)other_n / streams,
           (double)other_bytes / streams);
}

/* ---- the streams -------------------------------------------------------- */

typedef struct slot {
    int items;
    bool done;
} slot;

static int on_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    ((slot *)ud)->items++;
    return 0;
}

static void on_done(sg_curl_op *op, void *ud) {
    (void)op;
    ((slot *)ud)->done = true;
}

static int count_at(const slot *s, int n, int items) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        k += s[i].items >= items;
    }
    return k;
}

/* With sg_curl_global_init_mem the read buffers come from posix_memalign,
 * not from the allocators given: counted here as libcurl's, 16,385 each. */
static bool readbuf;

static void report(const char *what, const census *c0, const census *c, int n) {
    double rss = (double)(c->rss_kib - c0->rss_kib) / n;
    double heap = ((double)c->heap - (double)c0->heap) / n;
    double lc = ((double)c->bytes[LIBCURL] - (double)c0->bytes[LIBCURL]) / n +
                (readbuf ? CURL_MAX_WRITE_SIZE + 1 : 0);
    double lib = ((double)c->bytes[LIBRARY] - (double)c0->bytes[LIBRARY]) / n;
    printf("   %-6s RSS %.2f KiB/stream; heap %.0f B: libcurl %.0f, the library %.0f, "
           "malloc's headers and rounding %.0f\n",
           what, rss, heap, lc, lib, heap - lc - lib);
}

static void run_config(const char *base, const char *config, int n) {
    /* a mapping of its own, found by its start in smaps: the pages on
     * either side have no access, so that no other mapping merges with it */
    char *map = mmap(NULL, TABLE_SIZE * sizeof(blk) + 8192, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED ||
        mprotect(map + 4096, TABLE_SIZE * sizeof(blk), PROT_READ | PROT_WRITE) != 0) {
        return;
    }
    table = (blk *)(void *)(map + 4096);
    bool noca = strcmp(config, "noca") == 0;
    readbuf = strncmp(config, "readbuf", 7) == 0;
    if (strncmp(config, "buffer=", 7) == 0) {
        buffer_size = (size_t)atol(config + 7);
    }
    if (readbuf) {
        sg_curl_global_init_mem(CURL_GLOBAL_DEFAULT, c_malloc, c_free, c_realloc,
                                c_strdup, c_calloc);
    } else {
        curl_global_init_mem(CURL_GLOBAL_DEFAULT, c_malloc, c_free, c_realloc, c_strdup,
                             c_calloc);
    }
    slot *slots = __real_calloc((size_t)n, sizeof(*slots));
    CURL **easy = __real_calloc((size_t)n, sizeof(*easy));
    sg_curl_op **ops = __real_calloc((size_t)n, sizeof(*ops));
    bool slow = strstr(config, "/slow") != NULL;
    sg_curl_multi *m = NULL;
    sg_stream_config f;
    sg_stream_config_init(&f);
    sg_curl_options *co = NULL;
    sg_op_options *po = NULL;
    if (slots == NULL || easy == NULL || ops == NULL ||
        sg_curl_multi_new(&m, NULL) != 0 ||
        sg_stream_config_set_terminal_data(&f, "[DONE]") != 0 ||
        sg_stream_config_set_max_line(&f, 4096) != 0 ||
        sg_stream_config_set_max_event(&f, 4096) != 0 || sg_curl_options_new(&co) != 0 ||
        sg_curl_options_set_framing(co, &f) != 0 ||
        sg_curl_options_set_on_item(co, on_item) != 0 ||
        sg_curl_options_set_on_done(co, on_done) != 0 || sg_op_options_new(&po) != 0 ||
        sg_op_options_set_method(po, "GET") != 0 ||
        sg_op_options_set_max_attempts(po, 1) != 0 ||
        sg_op_options_set_first_item_timeout(po, SG_SEC(10)) != 0 ||
        sg_op_options_set_idle_timeout(po, SG_SEC(30)) != 0) {
        fprintf(stderr, "bench_curl_memory: setup failed\n");
        exit(1);
    }
    if (strncmp(config, "readbuf100", 10) == 0) {
        sg_curl_multi_set_read_buffer_release(m, SG_MS(100));
    }
    char url[256];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?n=10&gap=20&stall_after=2&stall=forever&_t=mem",
             base);
    if (slow) {
        snprintf(url, sizeof(url), "%s/v1/chat/completions?n=10&gap=150&_t=slow", base);
        for (int i = 0; i < n; i++) {
            easy[i] = curl_easy_init();
            curl_easy_setopt(easy[i], CURLOPT_URL, url);
            if (sg_curl_op_new(&ops[i], easy[i], po, co, &slots[i]) != 0 ||
                sg_curl_multi_add(m, ops[i]) != 0) {
                exit(1);
            }
        }
        double c0 = cpu_seconds();
        while (sg_curl_multi_running(m) > 0) {
            sg_curl_multi_step(m, SG_MS(100));
        }
        double cpu = cpu_seconds() - c0;
        long items = 0;
        for (int i = 0; i < n; i++) {
            items += slots[i].items;
            sg_curl_op_free(ops[i]);
            curl_easy_cleanup(easy[i]);
        }
        printf("%s, %d streams of 10 items 150 ms apart: client CPU %.3f s, %.2f us per "
               "item (%ld items)\n",
               config, n, cpu, cpu * 1e6 / (double)items, items);
    }
    /* one stream first: the multi's and the connection cache's growth */
    for (int warm = 0; warm < 2 && !slow; warm++) {
        int k = warm == 0 ? 1 : n;
        census c0, c1, c2;
        memset(slots, 0, (size_t)n * sizeof(*slots));
        take(&c0);
        for (int i = 0; i < k; i++) {
            easy[i] = curl_easy_init();
            curl_easy_setopt(easy[i], CURLOPT_URL, url);
            if (buffer_size > 0) {
                curl_easy_setopt(easy[i], CURLOPT_BUFFERSIZE, (long)buffer_size);
            }
            if (noca) {
                curl_easy_setopt(easy[i], CURLOPT_CAINFO, NULL);
                curl_easy_setopt(easy[i], CURLOPT_CAPATH, NULL);
                curl_easy_setopt(easy[i], CURLOPT_PROXY_CAINFO, NULL);
                curl_easy_setopt(easy[i], CURLOPT_PROXY_CAPATH, NULL);
            }
            if (sg_curl_op_new(&ops[i], easy[i], po, co, &slots[i]) != 0 ||
                sg_curl_multi_add(m, ops[i]) != 0) {
                fprintf(stderr, "bench_curl_memory: could not start stream %d\n", i);
                exit(1);
            }
        }
        while (count_at(slots, k, 2) < k) {
            sg_curl_multi_step(m, SG_MS(100));
        }
        take(&c1);
        int64_t until = sg_clock_now(NULL) + SG_MS(QUIET_MS);
        while (sg_clock_now(NULL) < until) {
            sg_curl_multi_step(m, SG_MS(50));
        }
        take(&c2);
        for (int i = 0; i < k; i++) {
            sg_curl_op_cancel(ops[i]);
        }
        int done = 0;
        while (done < k) {
            sg_curl_multi_step(m, SG_MS(100));
            done = 0;
            for (int i = 0; i < k; i++) {
                done += slots[i].done;
            }
        }
        for (int i = 0; i < k; i++) {
            sg_curl_op_free(ops[i]);
            curl_easy_cleanup(easy[i]);
        }
        if (warm == 1) {
            printf("%s, %d streams open (two items each, then quiet):\n", config, n);
            report("open", &c0, &c1, n);
            report("quiet", &c0, &c2, n);
            printf("   libcurl's blocks per stream, open (bytes asked x blocks):\n");
            print_blocks(&c0, &c1, LIBCURL, n);
            printf("   the library's blocks per stream, open:\n");
            print_blocks(&c0, &c1, LIBRARY, n);
        }
        __real_free(c0.keys);
        __real_free(c1.keys);
        __real_free(c2.keys);
    }
    sg_curl_multi_free(m);
    sg_curl_options_free(co);
    sg_op_options_free(po);
    if (readbuf) {
        sg_curl_global_cleanup();
    } else {
        curl_global_cleanup();
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel [N] [config...]\n", argv[0]);
        return 2;
    }
    int n = argc > 2 ? atoi(argv[2]) : 1000;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    fm_server server;
    if (fm_start(&server, argv[1]) != 0) {
        fprintf(stderr, "could not start %s\n", argv[1]);
        return 1;
    }
    char load[64] = "?";
    FILE *lf = fopen("/proc/loadavg", "r");
    if (lf != NULL) {
        if (fgets(load, sizeof(load), lf) == NULL) {
            snprintf(load, sizeof(load), "?");
        }
        fclose(lf);
    }
    load[strcspn(load, "\n")] = '\0';
    printf("bench_curl_memory: libcurl %s, %d streams; load average %s\n",
           curl_version_info(CURLVERSION_NOW)->version, n, load);
    int first = 3;
    static const char *const plain[] = {"plain"};
    const char *const *configs = argc > first ? (const char *const *)argv + first : plain;
    int nconfigs = argc > first ? argc - first : 1;
    for (int c = 0; c < nconfigs; c++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            run_config(server.base, configs[c], n);
            fflush(stdout);
            _exit(0);
        }
        waitpid(pid, NULL, 0);
    }
    fm_stop(&server);
    return 0;
}
