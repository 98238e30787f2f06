/*
 * bench_curl_transport - the libcurl transport against sg-fakemodel, side by
 * side with plain libcurl, in one run.
 *
 *   1. Stall detection: a stream flows, then stalls.  streamguard with a 1 s
 *      idle clock vs libcurl's CURLOPT_LOW_SPEED_LIMIT=1 / LOW_SPEED_TIME=1.
 *      Lateness is measured from the server's own "stall_started" log
 *      timestamp (same machine, same CLOCK_MONOTONIC).
 *   2. Keepalive trickle: the same stall with ": keepalive" every 100 ms.
 *   3. CPU per item: one 1,000,000-event stream, guarded vs a plain libcurl
 *      write callback that only counts bytes.
 *   4. 1,000 concurrent guarded streams on one thread, each stalling after
 *      2 items under a 200 ms idle clock: CPU, RSS, expiry lateness p50/p99;
 *      and beside it the machine's floor: how late a bare timerfd wakes
 *      this thread, nothing else running on it.
 *   5. Single-stream expiry lateness, 50 runs (p50/p99/max).
 *
 *   6. Stall lateness of 1 and 1,000 streams, managed multi and a caller's
 *      poll loop, with and without the file ledger.
 *   7. Its 1,000-stream rows without a ledger alone (not in the default).
 *
 * Usage: bench_curl_transport PATH/TO/sg-fakemodel [events-for-cpu-test]
 *            [sections, e.g. 46; default all]
 * An "r" among the sections (e.g. 47r): libcurl set up with
 * sg_curl_global_init instead of curl_global_init - its read buffers on
 * pages of their own - and section 4's multi gives them back after 100 ms
 * without a read (sg_curl_multi_set_read_buffer_release; its default is
 * 500 ms), as an application may choose.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <signal.h>
#include <spawn.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <streamguard/curl.h>
#include <streamguard/ledger.h>

#include "harness.h"
#include "timing.h"

extern char **environ;

static char base[64];
static pid_t server_pid;
static bool readbuf; /* "r": sg_curl_global_init */

static int64_t now_ns(void) {
    return sg_clock_now(NULL);
}

static int start_server(const char *bin) {
    static fm_server server;
    if (fm_start(&server, bin) != 0) {
        return -1;
    }
    server_pid = server.pid;
    snprintf(base, sizeof(base), "%s", server.base);
    return 0;
}

struct buf {
    char *p;
    size_t n;
};

static size_t collect(char *p, size_t s, size_t n, void *ud) {
    struct buf *b = ud;
    char *np = realloc(b->p, b->n + s * n + 1);
    if (np == NULL) {
        return 0;
    }
    memcpy(np + b->n, p, s * n);
    b->p = np;
    b->n += s * n;
    b->p[b->n] = '\0';
    return s * n;
}

/* GET /_log?QUERY from the server: a malloc'ed body, or NULL. */
static char *fetch_log(const char *query) {
    char url[256];
    struct buf b = {NULL, 0};
    snprintf(url, sizeof(url), "%s/_log?%s", base, query);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_perform(e);
    curl_easy_cleanup(e);
    return b.p;
}

/* The numeric field `name` of the first log line holding `needle`, or -1. */
static int64_t log_field(const char *log, const char *needle, const char *name) {
    const char *line = log != NULL ? strstr(log, needle) : NULL;
    if (line == NULL) {
        return -1;
    }
    while (line > log && line[-1] != '\n') {
        line--;
    }
    const char *f = strstr(line, name);
    return f != NULL ? atoll(f + strlen(name)) : -1;
}

/* When the server started the stall of the request tagged `tag`, on its
 * monotonic clock (the same as ours): events carry the request id. */
static int64_t stall_started_ns(const char *tag) {
    char *received = fetch_log("event=received");
    int64_t id = log_field(received, tag, "\"id\":");
    free(received);
    if (id < 0) {
        return -1;
    }
    char needle[64];
    snprintf(needle, sizeof(needle), "\"id\":%lld,", (long long)id);
    char *stalls = fetch_log("event=stall_started");
    int64_t t = log_field(stalls, needle, "\"t_ns\":");
    free(stalls);
    return t;
}

/* ---- 1 and 2: stall detection ------------------------------------------ */

static size_t discard(char *p, size_t s, size_t n, void *ud) {
    (void)p;
    (void)ud;
    return s * n;
}

static double plain_low_speed(const char *tag, bool keepalive, double cap_s) {
    char url[256];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?n=100&gap=10&stall_after=20&stall=forever%s&_t=%s",
             base, keepalive ? "&keepalive=100" : "", tag);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(cap_s * 1000));
    curl_easy_perform(e);
    int64_t end = now_ns();
    curl_easy_cleanup(e);
    int64_t stall = stall_started_ns(tag);
    return stall > 0 ? (double)(end - stall) / 1e6 : -1;
}

/* Options that frame SSE ending at "[DONE]" (lines and events at most
 * @max bytes; 0: the defaults) with @on_item and @on_done (NULL: none);
 * exits when they cannot be made.  sg_curl_op_new copies them. */
static sg_curl_options *bench_options(size_t max, sg_curl_item_cb on_item,
                                      sg_curl_done_cb on_done) {
    sg_stream_config f;
    sg_stream_config_init(&f);
    sg_curl_options *co = NULL;
    if (sg_stream_config_set_terminal_data(&f, "[DONE]") != 0 ||
        sg_stream_config_set_max_line(&f, max) != 0 ||
        sg_stream_config_set_max_event(&f, max) != 0 || sg_curl_options_new(&co) != 0 ||
        sg_curl_options_set_framing(co, &f) != 0 ||
        sg_curl_options_set_on_item(co, on_item) != 0 ||
        sg_curl_options_set_on_done(co, on_done) != 0) {
        fprintf(stderr, "bench_curl_transport: cannot make the options\n");
        exit(1);
    }
    return co;
}

static double guarded_idle(const char *tag, bool keepalive, int64_t idle) {
    char url[256];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?n=100&gap=10&stall_after=20&stall=forever%s&_t=%s",
             base, keepalive ? "&keepalive=100" : "", tag);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    sg_op_options *po = NULL;
    sg_op_options_new(&po);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 1);
    sg_op_options_set_idle_timeout(po, idle);
    sg_curl_options *co = bench_options(0, NULL, NULL);
    sg_curl_op *op;
    sg_curl_op_new(&op, e, po, co, NULL);
    sg_curl_options_free(co);
    sg_op_options_free(po);
    sg_curl_perform(op);
    int64_t end = now_ns();
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    int64_t stall = stall_started_ns(tag);
    return stall > 0 ? (double)(end - stall) / 1e6 : -1;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- 3: CPU per item ------------------------------------------------------ */

static int count_items(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    (*(uint64_t *)ud)++;
    return 0;
}

static size_t count_bytes(char *p, size_t s, size_t n, void *ud) {
    (void)p;
    *(uint64_t *)ud += s * n;
    return s * n;
}

/* The same SSE framing in a plain write callback: no guard, no policy. */
struct framed {
    sg_sse_parser p;
    char buf[SG_SSE_BUFFER_SIZE(65536, 1048576)];
    uint64_t items;
};

static int framed_event(const sg_sse_event *ev, void *ud) {
    (void)ev;
    ((struct framed *)ud)->items++;
    return 0;
}

static size_t framed_write(char *p, size_t s, size_t n, void *ud) {
    struct framed *f = ud;
    return sg_sse_feed(&f->p, p, s * n) < 0 ? 0 : s * n;
}

/* CPU ns per item of one plain libcurl transfer with this write callback. */
static double plain_cpu_ns(const char *url, curl_write_callback write, void *data,
                           long events) {
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, data);
    double c0 = cpu_seconds();
    curl_easy_perform(e);
    double ns = (cpu_seconds() - c0) * 1e9 / (double)events;
    curl_easy_cleanup(e);
    return ns;
}

static void cpu_per_item(long events) {
    char url[256];
    snprintf(url, sizeof(url), "%s/v1/chat/completions?n=%ld&gap=0&_t=cpu", base, events);
    double plain[3], guarded[3], framed_ns[3];
    uint64_t items = 0;
    static struct framed fr;
    for (int r = 0; r < 3; r++) {
        sg_sse_config sc;
        sg_sse_config_init(&sc);
        sg_sse_config_set_max_line(&sc, 65536);
        sg_sse_config_set_max_event(&sc, 1048576);
        sg_sse_config_set_terminal_data(&sc, "[DONE]");
        sg_sse_config_set_on_event(&sc, framed_event);
        sg_sse_init(&fr.p, &sc, &fr, fr.buf, sizeof(fr.buf));
        fr.items = 0;
        framed_ns[r] = plain_cpu_ns(url, framed_write, &fr, events);
        uint64_t bytes = 0;
        plain[r] = plain_cpu_ns(url, count_bytes, &bytes, events);

        items = 0;
        CURL *e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url);
        sg_op_options *po = NULL;
        sg_op_options_new(&po);
        sg_op_options_set_method(po, "GET");
        sg_op_options_set_max_attempts(po, 1);
        sg_op_options_set_budget(po, SG_SEC(300));
        sg_op_options_set_first_item_timeout(po, SG_SEC(10));
        sg_op_options_set_idle_timeout(po, SG_SEC(5));
        sg_op_options_set_stream_timeout(po, SG_SEC(300));
        sg_curl_options *co = bench_options(0, count_items, NULL);
        sg_curl_op *op;
        sg_curl_op_new(&op, e, po, co, &items);
        sg_curl_options_free(co);
        sg_op_options_free(po);
        double c0 = cpu_seconds();
        sg_curl_perform(op);
        guarded[r] = (cpu_seconds() - c0) * 1e9 / (double)events;
        if (sg_curl_op_outcome(op) != SG_OUTCOME_OK) {
            printf("  (guarded run ended %s)\n", sg_outcome_name(sg_curl_op_outcome(op)));
        }
        sg_curl_op_free(op);
        curl_easy_cleanup(e);
    }
    qsort(plain, 3, sizeof(double), cmpd);
    qsort(guarded, 3, sizeof(double), cmpd);
    qsort(framed_ns, 3, sizeof(double), cmpd);
    printf(
        "3. CPU per item over one %ld-event stream (median of 3, client process only):\n"
        "   plain libcurl write callback counting bytes    %4.0f ns/item\n"
        "   plain libcurl + the same SSE parser, no guard  %4.0f ns/item\n"
        "   guarded operation (3 clocks, budget, policy)   %4.0f ns/item\n"
        "   guarded vs parsed-unguarded: %+.1f%%; guarded vs bytes only: %+.1f%% "
        "(items delivered: %llu)\n",
        events, plain[1], framed_ns[1], guarded[1], (guarded[1] / framed_ns[1] - 1) * 100,
        (guarded[1] / plain[1] - 1) * 100, (unsigned long long)items);
}

/* ---- 4 and 5: concurrent streams and lateness ------------------------------- */

struct conc {
    int64_t last_item;
    int64_t done_at;
    sg_outcome outcome;
    int items;
};

/* streams with two items or more, streams ended (section 4's RSS) */
static int conc_two, conc_ended;

static int conc_item(sg_curl_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)item;
    struct conc *c = ud;
    c->last_item = now_ns();
    conc_two += ++c->items == 2;
    return 0;
}

static void conc_done(sg_curl_op *op, void *ud) {
    struct conc *c = ud;
    c->done_at = now_ns();
    c->outcome = sg_curl_op_outcome(op);
    conc_ended++;
}

/* Every event named @event in the server's log from request id @min_id on:
 * its t_ns at v[id - min_id] (room for @n). */
static void event_times(const char *event, int64_t min_id, int n, int64_t *v) {
    char q[64];
    snprintf(q, sizeof(q), "event=%s", event);
    char *log = fetch_log(q);
    for (const char *p = log != NULL ? strstr(log, "\"id\":") : NULL; p != NULL;
         p = strstr(p + 1, "\"id\":")) {
        int64_t id = atoll(p + 5);
        const char *t = strstr(p, "\"t_ns\":");
        if (t != NULL && id >= min_id && id < min_id + n) {
            v[id - min_id] = atoll(t + 7);
        }
    }
    free(log);
}

/* When the server saw each connection of the run whose stream i is tagged
 * "@tag<i>." end (its client_gone), after the consumer was told the
 * stream's outcome (@done_at[i], the same CLOCK_MONOTONIC): ms, sorted
 * into @out; returns how many. */
static int server_close_ms(const char *tag, int n, const int64_t *done_at, double *out) {
    char *received = fetch_log("event=received");
    int64_t *id_of = calloc((size_t)n, sizeof(int64_t));
    int64_t min_id = -1;
    size_t tl = strlen(tag);
    for (const char *p = received != NULL ? strstr(received, tag) : NULL;
         p != NULL && id_of != NULL; p = strstr(p + 1, tag)) {
        const char *line = p;
        while (line > received && line[-1] != '{') {
            line--;
        }
        const char *f = strstr(line, "\"id\":");
        long i = atol(p + tl);
        if (f != NULL && i >= 0 && i < n) {
            id_of[i] = atoll(f + 5);
            min_id = min_id < 0 || id_of[i] < min_id ? id_of[i] : min_id;
        }
    }
    free(received);
    int64_t *gone = calloc((size_t)n * 2, sizeof(int64_t));
    int k = 0;
    if (min_id >= 0 && gone != NULL) {
        event_times("client_gone", min_id, n * 2, gone);
        for (int i = 0; i < n; i++) {
            int64_t g = id_of[i] >= min_id ? gone[id_of[i] - min_id] : 0;
            if (g > 0 && done_at[i] > 0) {
                out[k++] = (double)(g - done_at[i]) / 1e6;
            }
        }
    }
    free(id_of);
    free(gone);
    qsort(out, (size_t)k, sizeof(double), cmpd);
    return k;
}

/* The machine's floor, for the lateness figures beside it: how late a
 * bare wake-up comes - a timerfd armed on CLOCK_MONOTONIC for an absolute
 * instant, waited for in epoll_wait, as the managed multi waits - with no
 * library work at all.  @n sleeps of 20 us to 1 ms; "p50 / p99 / max" ms
 * into @buf. */
static void wakeup_floor(int n, char *buf, size_t len) {
    double *late = calloc((size_t)n, sizeof(double));
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = tfd};
    snprintf(buf, len, "-");
    if (late != NULL && tfd >= 0 && ep >= 0 &&
        epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &ev) == 0) {
        unsigned seed = 1;
        for (int i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            int64_t at = now_ns() + SG_US(20) + (int64_t)(seed >> 8) % SG_US(980);
            struct itimerspec its = {{0, 0},
                                     {(time_t)(at / SG_SEC(1)), (long)(at % SG_SEC(1))}};
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
            struct epoll_event got;
            while (epoll_wait(ep, &got, 1, -1) != 1) {
            }
            late[i] = (double)(now_ns() - at) / 1e6;
            uint64_t x;
            (void)!read(tfd, &x, sizeof(x));
        }
        qsort(late, (size_t)n, sizeof(double), cmpd);
        snprintf(buf, len, "%.3f / %.3f / %.3f", late[n / 2], late[n * 99 / 100],
                 late[n - 1]);
    }
    if (tfd >= 0) {
        close(tfd);
    }
    if (ep >= 0) {
        close(ep);
    }
    free(late);
}

static void concurrent(int n, int64_t idle, const char *label) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);

    struct conc *cs = calloc((size_t)n, sizeof(*cs));
    CURL **easy = calloc((size_t)n, sizeof(*easy));
    sg_curl_op **ops = calloc((size_t)n, sizeof(*ops));
    char url[256];
    sg_curl_multi *m;
    sg_curl_multi_new(&m, NULL);
    if (readbuf) {
        sg_curl_multi_set_read_buffer_release(m, SG_MS(100));
    }
    sg_op_options *po = NULL;
    sg_op_options_new(&po);
    sg_op_options_set_method(po, "GET");
    sg_op_options_set_max_attempts(po, 1);
    sg_op_options_set_first_item_timeout(po, SG_SEC(10));
    sg_op_options_set_idle_timeout(po, idle);
    sg_curl_options *co = bench_options(4096, conc_item, conc_done);
    long rss0 = rss_kib();
    double c0 = cpu_seconds();
    for (int i = 0; i < n; i++) {
        easy[i] = curl_easy_init();
        snprintf(url, sizeof(url),
                 "%s/v1/chat/completions?n=10&gap=20&stall_after=2&stall=forever"
                 "&_t=conc.%d.",
                 base, i);
        curl_easy_setopt(easy[i], CURLOPT_URL, url);
        sg_curl_op_new(&ops[i], easy[i], po, co, &cs[i]);
        sg_curl_multi_add(m, ops[i]);
    }
    sg_op_options_free(po);
    sg_curl_options_free(co);
    long rss_peak = rss0, rss_quiet = -1;
    conc_two = conc_ended = 0;
    while (sg_curl_multi_running(m) > 0) {
        sg_curl_multi_step(m, SG_MS(100));
        long r = rss_kib();
        rss_peak = r > rss_peak ? r : rss_peak;
        if (conc_two == n && conc_ended == 0) {
            rss_quiet = r; /* every stream in its stall, none cut yet */
        }
    }
    double cpu = cpu_seconds() - c0;
    double *late = calloc((size_t)n, sizeof(double));
    int idle_ok = 0;
    for (int i = 0; i < n; i++) {
        if (cs[i].outcome == SG_OUTCOME_IDLE_TIMEOUT) {
            late[idle_ok++] = (double)(cs[i].done_at - (cs[i].last_item + idle)) / 1e6;
        }
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
    qsort(late, (size_t)idle_ok, sizeof(double), cmpd);
    if (idle_ok == 0) {
        printf("%s: no stream reached its idle timeout\n", label);
    } else {
        printf(
            "%s %d streams (%d idle_timeout): expiry lateness p50 %.3f ms, p99 %.3f ms, "
            "max %.3f ms; client CPU %.3f s (%.0f us/stream); RSS +%ld KiB "
            "(%.1f KiB/stream; %.1f KiB/stream just before the first expiry)\n",
            label, n, idle_ok, late[idle_ok / 2], late[(idle_ok * 99) / 100],
            late[idle_ok - 1], cpu, cpu * 1e6 / n, rss_peak - rss0,
            (double)(rss_peak - rss0) / n, (double)(rss_quiet - rss0) / n);
    }
    double *closed = calloc((size_t)n, sizeof(double));
    int64_t *done_at = calloc((size_t)n, sizeof(int64_t));
    for (int i = 0; i < n && done_at != NULL; i++) {
        done_at[i] = cs[i].done_at;
    }
    int nc = closed != NULL && done_at != NULL
                 ? server_close_ms("_t=conc.", n, done_at, closed)
                 : 0;
    if (nc > 0) {
        printf("   the server saw %d connections end after their outcome was told: p50 "
               "%.3f ms, p99 %.3f ms, max %.3f ms (its client_gone)\n",
               nc, closed[nc / 2], closed[(nc * 99) / 100], closed[nc - 1]);
    }
    char floor[64];
    wakeup_floor(1000, floor, sizeof(floor));
    printf("   the machine's floor: a bare timerfd wake-up on this thread, 1000 sleeps "
           "of 20-1000 us, comes late by p50 / p99 / max %s ms\n",
           floor);
    free(closed);
    free(done_at);
    free(late);
    free(cs);
    free(easy);
    free(ops);
}

/* ---- 6: stall lateness side by side: managed / embedded, ledger or not ---- */

/* Lateness samples (ms) of @n concurrent streams that stall under a 200 ms
 * idle clock, over @runs runs, appended to @out (room for n * runs).  The
 * loop is sg_curl_multi_run's own (@embedded false) or a caller's poll()
 * on sg_curl_multi_fd with no timeout of its own, stepping with 0
 * (@embedded true).  With @ledger every operation has the file ledger as
 * its observer: the intent is fdatasync'ed on the loop before the request
 * goes out; the attempt and the resolution are written on the loop and,
 * with the default policy, fdatasync'ed by the ledger's sync thread (with
 * SG_LEDGER_FSYNC_ALWAYS, on the loop). */
static size_t lateness(int n, int runs, bool embedded, sg_ledger *ledger, double *out) {
    size_t k = 0;
    struct conc *cs = calloc((size_t)n, sizeof(*cs));
    CURL **easy = calloc((size_t)n, sizeof(*easy));
    sg_curl_op **ops = calloc((size_t)n, sizeof(*ops));
    sg_ledger_binding binding = {ledger, NULL};
    char url[256];
    snprintf(url, sizeof(url),
             "%s/v1/chat/completions?n=10&gap=20&stall_after=2&stall=forever&_t=lat",
             base);
    static unsigned long serial;
    for (int r = 0; r < runs; r++) {
        sg_curl_multi *m;
        sg_curl_multi_new(&m, NULL);
        sg_curl_options *co = bench_options(4096, conc_item, conc_done);
        for (int i = 0; i < n; i++) {
            memset(&cs[i], 0, sizeof(cs[i]));
            sg_op_options *po = NULL;
            sg_op_options_new(&po);
            sg_op_options_set_method(po, "GET");
            sg_op_options_set_max_attempts(po, 1);
            sg_op_options_set_first_item_timeout(po, SG_SEC(10));
            sg_op_options_set_idle_timeout(po, SG_MS(200));
            if (ledger != NULL) {
                char key[64];
                snprintf(key, sizeof(key), "lat-%d-%lu", (int)getpid(), serial++);
                sg_op_options_set_idempotency_key(po, key);
                sg_op_options_set_target(po, url);
                sg_op_options_set_observer(po, sg_ledger_observer(), &binding);
            }
            easy[i] = curl_easy_init();
            curl_easy_setopt(easy[i], CURLOPT_URL, url);
            sg_curl_op_new(&ops[i], easy[i], po, co, &cs[i]);
            sg_op_options_free(po); /* the operation has its own copy */
            sg_curl_multi_add(m, ops[i]);
        }
        sg_curl_options_free(co);
        if (embedded) {
            struct pollfd p = {sg_curl_multi_fd(m), POLLIN, 0};
            while (sg_curl_multi_running(m) > 0) {
                poll(&p, 1, -1);
                sg_curl_multi_step(m, 0);
            }
        } else {
            sg_curl_multi_run(m);
        }
        for (int i = 0; i < n; i++) {
            if (cs[i].outcome == SG_OUTCOME_IDLE_TIMEOUT) {
                out[k++] = (double)(cs[i].done_at - (cs[i].last_item + SG_MS(200))) / 1e6;
            }
            sg_curl_op_free(ops[i]);
            curl_easy_cleanup(easy[i]);
        }
        sg_curl_multi_free(m);
    }
    free(cs);
    free(easy);
    free(ops);
    qsort(out, k, sizeof(double), cmpd);
    return k;
}

/* "p50 / p99 / max" of @n sorted samples, or "-". */
static void format_lateness(char *buf, size_t len, const double *v, size_t n) {
    snprintf(buf, len, "-");
    if (n > 0) {
        snprintf(buf, len, "%.3f / %.3f / %.3f", v[n / 2], v[n * 99 / 100], v[n - 1]);
    }
}

/* The table's rows: no ledger, then one column per ledger of @ledgers. */
static void lateness_rows(sg_ledger *const ledgers[2]) {
    static const struct {
        int n, runs;
        bool embedded;
        const char *label;
    } rows[] = {
        {1, 50, false, "1 stream x 50, managed multi"},
        {1, 50, true, "1 stream x 50, caller's poll loop"},
        {1000, 1, false, "1000 streams, managed multi"},
        {1000, 1, true, "1000 streams, caller's poll loop"},
    };
    printf("6. Stall lateness under a 200 ms idle clock (ms after the clock; p50 / p99 / "
           "max):\n   %-34s %-26s %-26s %-26s\n",
           "", "no ledger", "ledger, default fsync", "ledger, FSYNC_ALWAYS");
    double *v = calloc(1000, sizeof(double));
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char cell[3][64];
        for (size_t j = 0; j < 3; j++) {
            sg_ledger *ledger = j == 0 ? NULL : ledgers[j - 1];
            size_t n = lateness(rows[i].n, rows[i].runs, rows[i].embedded, ledger, v);
            format_lateness(cell[j], sizeof(cell[j]), v, n);
        }
        printf("   %-34s %-26s %-26s %-26s\n", rows[i].label, cell[0], cell[1], cell[2]);
    }
    char floor[64];
    wakeup_floor(1000, floor, sizeof(floor));
    printf("   %-34s %-26s\n", "machine floor (bare timerfd wake)", floor);
    free(v);
}

/* 7: section 6's rows of 1,000 streams, without a ledger (quick to repeat:
 * bench/curl_expiry_ab.sh runs it beside another build). */
static void lateness_burst(void) {
    double *v = calloc(1000, sizeof(double));
    char cell[2][64];
    for (int embedded = 0; embedded < 2 && v != NULL; embedded++) {
        size_t n = lateness(1000, 1, embedded == 1, NULL, v);
        format_lateness(cell[embedded], sizeof(cell[embedded]), v, n);
    }
    char floor[64];
    wakeup_floor(1000, floor, sizeof(floor));
    if (v != NULL) {
        printf(
            "7. 1000 streams stalling under a 200 ms idle clock, no ledger (ms after the "
            "clock; p50 / p99 / max):\n   managed multi: %s\n   caller's poll loop: %s\n"
            "   machine floor (bare timerfd wake): %s\n",
            cell[0], cell[1], floor);
    }
    free(v);
}

static void lateness_table(void) {
    static const sg_ledger_fsync policies[2] = {SG_LEDGER_FSYNC_DEFAULT,
                                                SG_LEDGER_FSYNC_ALWAYS};
    char dirs[2][32];
    sg_ledger *ledgers[2] = {NULL, NULL};
    size_t opened = 0;
    for (; opened < 2; opened++) {
        snprintf(dirs[opened], sizeof(dirs[opened]), "/tmp/sg-bench-lateness-XXXXXX");
        sg_ledger_options *lo = NULL;
        bool ok = mkdtemp(dirs[opened]) != NULL && sg_ledger_options_new(&lo) == 0 &&
                  sg_ledger_options_set_fsync(lo, policies[opened]) == 0 &&
                  sg_ledger_open(&ledgers[opened], dirs[opened], lo) == 0;
        sg_ledger_options_free(lo);
        if (!ok) {
            printf("6. (no ledger directory: skipped)\n");
            break;
        }
    }
    if (opened == 2) {
        lateness_rows(ledgers);
    }
    for (size_t j = 0; j < opened; j++) {
        int rv = sg_ledger_sync(ledgers[j], -1);
        if (rv != 0) {
            printf("   (ledger %zu: sg_ledger_sync: %s)\n", j, sg_strerror(rv));
        }
        sg_ledger_close(ledgers[j]);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dirs[j]);
        if (system(cmd) != 0) {
            fprintf(stderr, "could not remove %s\n", dirs[j]);
        }
    }
}

/* ---- 1, 2, 5 ---------------------------------------------------------- */

static void stall_detection(void) {
    /* 1. stall detection, 3 runs each */
    double sg[3], lc[3];
    char tag[32];
    for (int r = 0; r < 3; r++) {
        snprintf(tag, sizeof(tag), "sg_stall%d.", r);
        sg[r] = guarded_idle(tag, false, SG_SEC(1));
        snprintf(tag, sizeof(tag), "lc_stall%d.", r);
        lc[r] = plain_low_speed(tag, false, 30);
    }
    qsort(sg, 3, sizeof(double), cmpd);
    qsort(lc, 3, sizeof(double), cmpd);
    printf("1. Stall after flowing data, 1 s configured (median of 3, from the server's "
           "stall_started):\n   streamguard idle=1s aborts %.1f ms after the stall "
           "(%.1f ms late); libcurl LOW_SPEED 1/1 aborts %.1f ms after it; ratio %.1fx\n",
           sg[1], sg[1] - 1000, lc[1], lc[1] / sg[1]);
}

static void keepalive_trickle(void) {
    /* 2. keepalive trickle */
    double sgk = guarded_idle("sg_ka.", true, SG_SEC(1));
    double lck = plain_low_speed("lc_ka.", true, 15);
    printf(
        "2. Same stall with ': keepalive' every 100 ms:\n   streamguard aborts %.1f ms "
        "after the stall; libcurl LOW_SPEED 1/1 %s %.1f ms (capped by a 15 s "
        "CURLOPT_TIMEOUT)\n",
        sgk, lck >= 13000 ? "never aborts: still running at" : "aborts at", lck);
}

static void single_lateness(void) {
    /* 5. single stream lateness, 50 runs */
    enum { RUNS = 200 };
    double late[RUNS];
    for (int r = 0; r < RUNS; r++) {
        struct conc c = {0};
        char url[256];
        snprintf(url, sizeof(url),
                 "%s/v1/chat/completions?n=5&gap=5&stall_after=2&stall=forever&_t=late",
                 base);
        CURL *e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url);
        sg_op_options *po = NULL;
        sg_op_options_new(&po);
        sg_op_options_set_method(po, "GET");
        sg_op_options_set_max_attempts(po, 1);
        sg_op_options_set_idle_timeout(po, SG_MS(50));
        sg_curl_options *co = bench_options(0, conc_item, conc_done);
        sg_curl_op *op;
        sg_curl_op_new(&op, e, po, co, &c);
        sg_curl_options_free(co);
        sg_op_options_free(po);
        sg_curl_perform(op);
        late[r] = (double)(c.done_at - (c.last_item + SG_MS(50))) / 1e6;
        sg_curl_op_free(op);
        curl_easy_cleanup(e);
    }
    qsort(late, RUNS, sizeof(double), cmpd);
    printf(
        "5. Single stream, idle=50ms, %d runs: expiry lateness p50 %.3f ms, p99 %.3f ms, "
        "max %.3f ms\n",
        RUNS, late[RUNS / 2], late[RUNS * 99 / 100], late[RUNS - 1]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel [events] [sections]\n", argv[0]);
        return 2;
    }
    long events = argc > 2 ? atol(argv[2]) : 1000000;
    const char *sections = argc > 3 ? argv[3] : "123456";
    /* 7 only when named */
    readbuf = strchr(sections, 'r') != NULL;
    if (readbuf) {
        sg_curl_global_init(CURL_GLOBAL_DEFAULT);
    } else {
        curl_global_init(CURL_GLOBAL_DEFAULT);
    }
    if (start_server(argv[1]) != 0) {
        fprintf(stderr, "could not start %s\n", argv[1]);
        return 1;
    }
    printf("bench_curl_transport: libcurl %s, server %s%s\n\n",
           curl_version_info(CURLVERSION_NOW)->version, base,
           readbuf ? ", read buffers given back when quiet (sg_curl_global_init)" : "");

    if (strchr(sections, '1') != NULL) {
        stall_detection();
    }
    if (strchr(sections, '2') != NULL) {
        keepalive_trickle();
    }
    if (strchr(sections, '3') != NULL) {
        cpu_per_item(events);
    }
    if (strchr(sections, '4') != NULL) {
        concurrent(1000, SG_MS(200), "4. One thread,");
    }
    if (strchr(sections, '5') != NULL) {
        single_lateness();
    }
    if (strchr(sections, '6') != NULL) {
        lateness_table();
    }
    if (strchr(sections, '7') != NULL) {
        lateness_burst();
    }

    kill(server_pid, SIGTERM);
    waitpid(server_pid, NULL, 0);
    if (readbuf) {
        sg_curl_global_cleanup();
    } else {
        curl_global_cleanup();
    }
    return 0;
}
