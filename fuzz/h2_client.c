/*
 * Fuzz target for the HTTP/2 client: whatever a hostile server sends, on a
 * connection carrying three guarded streams (ids 1, 3, 5), must end every
 * operation with an outcome, leak nothing and never crash.
 *
 * Real loopback socket, deterministic time: the connection reads a manual
 * clock.  Input: byte 0 picks the framing and clocks; then chunks of
 * [u8 length][u8 milliseconds to advance][length bytes], each written by
 * the "server" and followed by one step at the advanced instant.  A valid
 * empty SETTINGS frame (the server preface) is sent first.  At the end the
 * clock jumps past every budget.
 *
 * Invariants (abort on failure, also in the replay binary): every operation
 * ends; the connection reports none running.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <streamguard/h2.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int g_listen = -1;
static int g_port;

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "fuzz/h2_client invariant failed: %s\n", what);
        abort();
    }
}

static void listen_once(void) {
    if (g_listen >= 0) {
        return;
    }
    g_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    check(bind(g_listen, (struct sockaddr *)&a, sizeof(a)) == 0, "bind");
    check(listen(g_listen, 16) == 0, "listen");
    check(getsockname(g_listen, (struct sockaddr *)&a, &len) == 0, "getsockname");
    g_port = ntohs(a.sin_port);
}

/* Reads and drops what the client wrote, so its socket never fills. */
static void drain(int fd) {
    char buf[65536];
    while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
    }
}

static int on_item(sg_h2_op *op, const sg_item *item, void *ud) {
    (void)op;
    (void)ud;
    /* Cancel on an item that says so: exercises the consumer's stop. */
    return item->data_len == 6 && memcmp(item->data, "cancel", 6) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) {
        return 0;
    }
    listen_once();
    uint8_t cfg = data[0];
    data++;
    size--;

    sg_manual_clock mc;
    sg_manual_clock_init(&mc, SG_SEC(1000));
    sg_clock clock = sg_manual_clock_as(&mc);
    sg_h2_conn_options *o = NULL;
    check(sg_h2_conn_options_new(&o) == 0 &&
              sg_h2_conn_options_set_host(o, "127.0.0.1") == 0 &&
              sg_h2_conn_options_set_port(o, g_port) == 0 &&
              sg_h2_conn_options_set_clock(o, &clock) == 0 &&
              sg_h2_conn_options_set_max_header_list(o, (cfg & 0x40) ? 256 : 0) == 0,
          "conn options");
    sg_h2_conn *c = NULL;
    check(sg_h2_conn_new(&c, o) == 0, "connect");
    sg_h2_conn_options_free(o);
    int srv = accept(g_listen, NULL, NULL);
    check(srv >= 0, "accept");
    int one = 1;
    /* Every chunk must leave at once, not wait for Nagle. */
    setsockopt(srv, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));

    sg_stream_config framing;
    sg_stream_config_init(&framing);
    check(sg_stream_config_set_format(&framing, (cfg & 1) ? SG_FORMAT_NDJSON
                                                          : SG_FORMAT_SSE) == 0 &&
              sg_stream_config_set_terminal_data(&framing, (cfg & 1) ? NULL : "[DONE]") ==
                  0 &&
              sg_stream_config_set_max_line(&framing, 256) == 0 &&
              sg_stream_config_set_max_event(&framing, 1024) == 0,
          "framing");
    sg_h2_request *req = NULL;
    check(sg_h2_request_new(&req) == 0 && sg_h2_request_set_path(req, "/fuzz") == 0 &&
              sg_h2_request_set_method(req, (cfg & 0x10) ? "GET" : NULL) == 0 &&
              sg_h2_request_set_body(req, "{}", (cfg & 0x10) ? 0 : 2) == 0 &&
              sg_h2_request_set_drain_timeout(req, SG_MS(20)) == 0 &&
              sg_h2_request_set_framing(req, &framing) == 0 &&
              sg_h2_request_set_on_item(req, on_item) == 0,
          "request");
    sg_h2_op *ops[3];
    for (int i = 0; i < 3; i++) {
        sg_op_options *po = NULL;
        sg_op_options_new(&po);
        sg_op_options_set_budget(po, SG_SEC(5));
        sg_op_options_set_max_attempts(po, 1); /* a retry would reconnect */
        if (cfg & 2) {
            sg_op_options_set_first_item_timeout(po, SG_MS(100 * (i + 1)));
        }
        if (cfg & 4) {
            sg_op_options_set_idle_timeout(po, SG_MS(50 * (i + 1)));
        }
        if (cfg & 8) {
            sg_op_options_set_max_items(po, 3);
        }
        check(sg_h2_op_new(&ops[i], c, po, req, NULL) == 0, "sg_h2_op_new");
        sg_op_options_free(po);
    }
    sg_h2_request_free(req);
    sg_h2_conn_step(c, sg_manual_clock_now(&mc), false,
                    true); /* preface, SETTINGS, requests */
    drain(srv);
    static const uint8_t settings[9] = {0, 0, 0, 4, 0, 0, 0, 0, 0};
    (void)!send(srv, settings, sizeof(settings), MSG_NOSIGNAL);
    struct pollfd pf = {sg_h2_conn_fd(c), POLLIN, 0};
    (void)poll(&pf, 1, 100);

    size_t i = 0;
    while (i + 2 <= size && sg_h2_conn_running(c) > 0) {
        size_t n = data[i];
        int64_t dt = SG_MS(data[i + 1]);
        i += 2;
        if (n > size - i) {
            n = size - i;
        }
        if (n > 0 && sg_h2_conn_fd(c) >= 0 &&
            send(srv, data + i, n, MSG_NOSIGNAL) == (ssize_t)n) {
            /* Loopback delivers within send() as a rule; wait briefly in
             * case it did not, so each step sees its chunk. */
            struct pollfd p = {sg_h2_conn_fd(c), POLLIN, 0};
            (void)poll(&p, 1, 100);
        }
        i += n;
        sg_manual_clock_advance(&mc, dt);
        sg_h2_conn_step(c, sg_manual_clock_now(&mc), true, true);
        drain(srv);
    }
    /* Past every budget: whatever is left must end now. */
    for (int k = 0; k < 4 && sg_h2_conn_running(c) > 0; k++) {
        sg_manual_clock_advance(&mc, SG_SEC(3));
        sg_h2_conn_step(c, sg_manual_clock_now(&mc), true, true);
        drain(srv);
    }
    check(sg_h2_conn_running(c) == 0, "every operation ended");
    for (int k = 0; k < 3; k++) {
        check(sg_h2_op_done(ops[k]), "op done");
        check(sg_op_finished(sg_h2_op_policy(ops[k])), "policy finished");
#ifdef SG_FUZZ_VERBOSE
        fprintf(stderr, "op %d: %s (%s)\n", k, sg_outcome_name(sg_h2_op_outcome(ops[k])),
                sg_h2_op_error(ops[k]));
#endif
    }
    sg_h2_conn_free(c);
    close(srv);
    return 0;
}
