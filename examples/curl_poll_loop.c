/*
 * curl_poll_loop - the libcurl transport inside the caller's own poll()
 * loop, next to the caller's other file descriptors.
 *
 *   curl_poll_loop URL [URL...]
 *
 * Each URL is one guarded streaming GET (SSE, `data: [DONE]` ends it), all
 * of them on one managed multi (sg_curl_multi).  The program's loop polls
 * two things and nothing else: the multi's fd (sg_curl_multi_fd) and a
 * timerfd of its own that ticks once a second to print progress - standing
 * in for whatever else a real program waits on.  It never passes poll() a
 * timeout derived from the streams: the multi arms its own timer for the
 * earliest of its streams' deadlines, and its fd becomes readable when that
 * timer fires, so a stalled stream is cut on time even though this loop
 * knows nothing about clocks.  After every wake-up it calls
 * sg_curl_multi_step(m, 0), which never blocks.
 *
 * Policy: first item within 5 s, at most 300 ms between items, budget 30 s,
 * one attempt.  Exit status: 0 when every stream ended ok, 1 otherwise
 * (each outcome is printed), 2 on a usage or setup error.
 */
#define _POSIX_C_SOURCE 200809L
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <streamguard/curl.h>

#define MAX_STREAMS 8

struct stream {
    const char *url;
    unsigned long items;
    int64_t last_item;
    bool done;
};

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    (void)op;
    (void)item;
    struct stream *s = user_data;
    s->items++;
    s->last_item = sg_clock_now(NULL);
    return 0;
}

static void on_done(sg_curl_op *op, void *user_data) {
    struct stream *s = user_data;
    s->done = true;
    int64_t quiet = sg_clock_now(NULL) - s->last_item;
    printf("%s: outcome=%s items=%lu", s->url, sg_outcome_name(sg_curl_op_outcome(op)),
           s->items);
    if (s->items > 0 && sg_curl_op_outcome(op) == SG_OUTCOME_IDLE_TIMEOUT) {
        printf(" cut %.1f ms after its last item", (double)quiet / 1e6);
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc - 1 > MAX_STREAMS) {
        fprintf(stderr, "usage: curl_poll_loop URL [URL...] (at most %d)\n", MAX_STREAMS);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    sg_curl_multi *m;
    if (sg_curl_multi_new(&m, NULL) != 0) {
        fprintf(stderr, "curl_poll_loop: cannot create the multi\n");
        return 2;
    }
    sg_op_options *policy = NULL;
    if (sg_op_options_new(&policy) != 0) {
        return 2;
    }
    sg_op_options_set_method(policy, "GET");
    sg_op_options_set_budget(policy, SG_SEC(30));
    sg_op_options_set_first_item_timeout(policy, SG_SEC(5));
    sg_op_options_set_idle_timeout(policy, SG_MS(300));
    sg_op_options_set_max_attempts(policy, 1);
    sg_stream_config framing; /* SSE ending at [DONE] */
    sg_stream_config_init(&framing);
    sg_curl_options *opts = NULL;
    if (sg_stream_config_set_terminal_data(&framing, "[DONE]") != 0 ||
        sg_curl_options_new(&opts) != 0 ||
        sg_curl_options_set_framing(opts, &framing) != 0 ||
        sg_curl_options_set_on_item(opts, on_item) != 0 ||
        sg_curl_options_set_on_done(opts, on_done) != 0) {
        return 2;
    }

    int n = argc - 1;
    struct stream streams[MAX_STREAMS];
    CURL *easy[MAX_STREAMS];
    sg_curl_op *ops[MAX_STREAMS];
    memset(streams, 0, sizeof(streams));
    for (int i = 0; i < n; i++) {
        streams[i].url = argv[i + 1];
        easy[i] = curl_easy_init();
        curl_easy_setopt(easy[i], CURLOPT_URL, argv[i + 1]);
        if (easy[i] == NULL ||
            sg_curl_op_new(&ops[i], easy[i], policy, opts, &streams[i]) != 0 ||
            sg_curl_multi_add(m, ops[i]) != 0) {
            fprintf(stderr, "curl_poll_loop: cannot start %s\n", argv[i + 1]);
            return 2;
        }
    }
    sg_op_options_free(policy); /* each operation has its own copies */
    sg_curl_options_free(opts);

    /* The program's own business: a 1 s ticker. */
    int tick = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its = {{1, 0}, {1, 0}};
    timerfd_settime(tick, 0, &its, NULL);

    struct pollfd fds[2] = {{sg_curl_multi_fd(m), POLLIN, 0}, {tick, POLLIN, 0}};
    while (sg_curl_multi_running(m) > 0) {
        if (poll(fds, 2, -1) < 0) { /* no timeout: the fds say when */
            perror("poll");
            return 2;
        }
        if (fds[1].revents & POLLIN) {
            uint64_t ticks;
            (void)!read(tick, &ticks, sizeof(ticks));
            printf("tick: %d stream(s) running\n", sg_curl_multi_running(m));
        }
        if (sg_curl_multi_step(m, 0) < 0) {
            perror("sg_curl_multi_step");
            return 2;
        }
    }

    int status = 0;
    for (int i = 0; i < n; i++) {
        if (sg_curl_op_outcome(ops[i]) != SG_OUTCOME_OK) {
            status = 1;
        }
        sg_curl_op_free(ops[i]);
        curl_easy_cleanup(easy[i]);
    }
    sg_curl_multi_free(m);
    close(tick);
    curl_global_cleanup();
    return status;
}
