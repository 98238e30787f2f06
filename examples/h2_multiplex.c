/*
 * h2_multiplex - three generations on one HTTP/2 connection; one stalls and
 * is cancelled alone.
 *
 *   h2_multiplex HOST PORT
 *
 * Connects once (h2c with prior knowledge; set .tls = true and .cafile for
 * TLS with ALPN "h2") and starts three guarded operations as streams of that
 * connection:
 *
 *   fast  - 5 tokens, 20 ms apart;
 *   stall - 2 tokens, then silence hidden behind keepalive comments every
 *           50 ms (a generation that died but whose connection did not);
 *   long  - 30 tokens, 30 ms apart: it is still running when the stall is
 *           detected, and goes on.
 *
 * Each has its own budget and clocks (idle 300 ms).  Keepalives are not
 * items, so they do not reset the idle clock: 300 ms after its second token
 * the stalled stream alone is reset with RST_STREAM(CANCEL) - the server
 * learns at once that nobody listens - while the other two streams and the
 * connection carry on.  The stalled attempt delivered tokens, so it is a
 * partial stream: its tokens must be discarded, and it is never retried.
 *
 * The loop is sg_h2_conn_run (ppoll on the socket and the one next
 * deadline); sg_h2_conn_fd/_want_write/_next_deadline/_step let another
 * event loop drive the same connection instead.
 *
 * Exit status: 0 when the two healthy generations ended ok and the
 * connection is still usable, 1 otherwise, 2 on a usage or setup error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <streamguard/h2.h>

struct gen {
    const char *name;
    const char *path;
    unsigned long items;
    char key[64];
    sg_h2_op *op;
};

static int on_item(sg_h2_op *op, const sg_item *item, void *user_data) {
    struct gen *g = user_data;
    (void)op;
    (void)item;
    g->items++;
    printf("%s: token %lu\n", g->name, g->items);
    fflush(stdout);
    return 0;
}

static void on_discard(sg_h2_op *op, uint32_t attempt, sg_outcome outcome,
                       void *user_data) {
    struct gen *g = user_data;
    (void)op;
    printf("%s: discard the %lu tokens of attempt %u (%s)\n", g->name, g->items, attempt,
           sg_outcome_name(outcome));
}

static void on_done(sg_h2_op *op, void *user_data) {
    struct gen *g = user_data;
    const sg_op *pol = sg_h2_op_policy(op);
    uint32_t n = sg_op_attempt_count(pol);
    const sg_op_attempt *last = n > 0 ? sg_op_attempt_at(pol, n - 1) : NULL;
    printf("%s: outcome=%s phase=%s attempts=%u items=%lu partial=%s reason=%s\n",
           g->name, sg_outcome_name(sg_h2_op_outcome(op)),
           last ? sg_phase_name(last->phase) : "none", n, g->items,
           last && last->partial ? "true" : "false",
           sg_op_reason_name(sg_op_final_reason(pol)));
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s HOST PORT\n", argv[0]);
        return 2;
    }

    char errbuf[SG_H2_ERROR_SIZE] = "";
    sg_h2_conn_options *copts = NULL; /* h2c (cleartext) by default */
    int rv = sg_h2_conn_options_new(&copts);
    if (rv == 0) {
        (void)sg_h2_conn_options_set_errbuf(copts, errbuf);
        rv = sg_h2_conn_options_set_host(copts, argv[1]);
    }
    if (rv == 0) {
        rv = sg_h2_conn_options_set_port(copts, atoi(argv[2]));
    }
    if (rv == 0) {
        rv = sg_h2_conn_options_set_connect_timeout(copts, SG_SEC(2));
    }
    sg_h2_conn *conn = NULL;
    if (rv == 0) {
        rv = sg_h2_conn_new(&conn, copts); /* blocks for the connect only */
    }
    sg_h2_conn_options_free(copts);
    if (rv != 0) {
        fprintf(stderr, "h2_multiplex: %s: %s\n", sg_strerror(rv), errbuf);
        return 2;
    }

    struct gen gens[3] = {
        {"fast", "/v1/chat/completions?n=5&gap=20", 0, "", NULL},
        {"stall",
         "/v1/chat/completions?n=8&gap=20&stall_after=2&stall=forever&keepalive=50", 0,
         "", NULL},
        {"long", "/v1/chat/completions?n=30&gap=30", 0, "", NULL},
    };
    static const char body[] = "{\"model\":\"gpt-4o-mini\",\"stream\":true}";
    sg_stream_config framing; /* SSE ending at [DONE] */
    sg_stream_config_init(&framing);
    (void)sg_stream_config_set_terminal_data(&framing, "[DONE]");

    for (int i = 0; i < 3; i++) {
        struct gen *g = &gens[i];
        sg_op_options *policy = NULL;
        if (sg_op_options_new(&policy) != 0) {
            return 2;
        }
        sg_op_options_set_budget(policy, SG_SEC(10));
        sg_op_options_set_first_item_timeout(policy, SG_SEC(2));
        sg_op_options_set_idle_timeout(policy, SG_MS(300));
        snprintf(g->key, sizeof(g->key), "h2-%s-%ld", g->name, (long)getpid());
        sg_op_options_set_idempotency_key(policy, g->key);

        sg_h2_request *req = NULL;
        rv = sg_h2_request_new(&req);
        if (rv == 0) {
            (void)sg_h2_request_set_deadline_header(req, true);
            (void)sg_h2_request_set_on_item(req, on_item);
            (void)sg_h2_request_set_on_discard(req, on_discard);
            (void)sg_h2_request_set_on_done(req, on_done);
            rv = sg_h2_request_set_framing(req, &framing);
        }
        if (rv == 0) {
            rv = sg_h2_request_set_path(req, g->path);
        }
        if (rv == 0) {
            rv = sg_h2_request_add_header(req, "content-type", "application/json");
        }
        if (rv == 0) {
            rv = sg_h2_request_set_body(req, body, sizeof(body) - 1);
        }
        if (rv == 0) {
            rv = sg_h2_op_new(&g->op, conn, policy, req, g);
        }
        sg_op_options_free(policy); /* the operation has its own copies */
        sg_h2_request_free(req);
        if (rv != 0) {
            fprintf(stderr, "h2_multiplex: %s: %s\n", g->name, sg_strerror(rv));
            sg_h2_conn_free(conn);
            return 2;
        }
    }

    rv = sg_h2_conn_run(conn); /* until no operation is running */
    int ok = rv == 0 && sg_h2_op_outcome(gens[0].op) == SG_OUTCOME_OK &&
             sg_h2_op_outcome(gens[2].op) == SG_OUTCOME_OK && sg_h2_conn_usable(conn);
    printf("connection usable=%s\n", sg_h2_conn_usable(conn) ? "true" : "false");
    sg_h2_conn_free(conn); /* frees the operations too */
    return ok ? 0 : 1;
}
