/*
 * run_curl.c - the operation over libcurl.
 *
 * Every run that streamguard's own HTTP/2 transport does not take: http://
 * without --http2, --http1.1, and https:// whose server does not negotiate
 * h2.  One easy handle is set up from the config (URL, body, method, HTTP
 * version; h2 prior knowledge for http:// with an explicit HTTP/2 version)
 * and driven on a managed multi from our own loop (its fd wakes for every
 * attempt, sleep and clock of the policy), so that items leave in one write
 * per step and a signal or a broken stdout cancels the operation.  All that
 * the run holds is released in one place, out:.
 */
#include <stdio.h>
#include <stdbool.h>
#include <string.h>

#include "sg_stream.h"

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    (void)op;
    return print_item(user_data, item);
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome,
                       void *user_data) {
    (void)op;
    note_discard(user_data, attempt, outcome);
}

/* The request as libcurl is to send it.  Returns false when libcurl
 * refuses an option a run cannot do without. */
static bool setup_easy(CURL *easy, struct config *c) {
    curl_easy_setopt(easy, CURLOPT_URL, c->url);
    /* what the options allowed (options.c) is all libcurl may speak, on
     * this URL and on any it is sent to */
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(easy, CURLOPT_REDIR_PROTOCOLS,
                     (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(easy, CURLOPT_USERAGENT, "sg-stream/" SG_VERSION_STRING);
    /* curl's own tool reads 100 KiB at a time: a fast stream then costs a
     * sixth of the reads (and of the batched writes) of libcurl's 16 KiB. */
    curl_easy_setopt(easy, CURLOPT_BUFFERSIZE, 102400L);
    if (c->body != NULL) {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, c->body);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
    }
    /* The method on the wire is the policy's (the transport refuses a
     * mismatch): libcurl sends GET without a body and POST with one, and
     * anything else only when told. */
    bool plain = strcmp(c->method, c->body != NULL ? "POST" : "GET") == 0;
    if (!plain) {
        curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, c->method);
    }
    if (c->http_version == CURL_HTTP_VERSION_2_0 && strncmp(c->url, "http://", 7) == 0) {
        c->http_version = CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE;
    }
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, c->http_version);
    if (c->aws_sigv4 != NULL) {
        /* libcurl signs every request it sends (retries, fallbacks, and
         * the hedges, whose handles are duplicates of this one) */
        if (curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, c->aws_sigv4) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_USERNAME, c->aws_key_id) != CURLE_OK ||
            curl_easy_setopt(easy, CURLOPT_PASSWORD, c->aws_secret) != CURLE_OK) {
            fprintf(stderr, "%s: libcurl refused --aws-sigv4 '%s'\n", prog, c->aws_sigv4);
            return false;
        }
    }
    return true;
}

/* The operation's options: the flags' framing, headers and stamps, the
 * URL then each --fallback (the same method, headers and body).  0, or
 * the code of the setter that failed (no memory). */
static int curl_options(const struct config *c, sg_curl_options **out) {
    sg_curl_options *o = NULL;
    int rv = sg_curl_options_new(&o);
    if (rv == 0) {
        /* --output none prints nothing: no call per item */
        (void)sg_curl_options_set_on_item(o, c->run.output == OUT_NONE ? NULL : on_item);
        (void)sg_curl_options_set_on_discard(o, on_discard);
        (void)sg_curl_options_set_deadline_header(o, c->deadline_header);
        (void)sg_curl_options_set_grpc_timeout(o, c->grpc_timeout);
        rv = sg_curl_options_set_framing(o, &c->framing);
    }
    if (rv == 0) {
        rv = sg_curl_options_set_headers(o, c->headers);
    }
    if (rv == 0) {
        rv = sg_curl_options_set_cafile(o, c->cafile);
    }
    for (int i = -1; rv == 0 && c->nfallback > 0 && i < c->nfallback; i++) {
        rv = sg_curl_options_add_endpoint(o, i < 0 ? c->url : c->fallback[i], NULL, NULL,
                                          0);
    }
    if (rv != 0) {
        sg_curl_options_free(o);
        o = NULL;
    }
    *out = o;
    return rv;
}

int run_curl(struct config *c) {
    sg_curl_options *copts = NULL;
    sg_curl_op *op = NULL;
    sg_curl_multi *m = NULL;
    int code = EXIT_INTERNAL;
    int rv;
    bool global = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
    CURL *easy = global ? curl_easy_init() : NULL;
    if (easy == NULL) {
        fprintf(stderr, "%s: libcurl initialisation failed\n", prog);
        goto out;
    }
    if (!setup_easy(easy, c)) {
        goto out;
    }
    code = ledger_open_for_run(c);
    if (code != 0) {
        goto out;
    }
    rv = curl_options(c, &copts);
    if (rv == 0) {
        rv = sg_curl_op_new(&op, easy, c->policy, copts, &c->run);
    }
    sg_curl_options_free(copts); /* the operation has its own copy */
    if (rv == 0) {
        rv = sg_curl_multi_new(&m, NULL);
    }
    if (rv == 0) {
        /* one operation: no endpoint health to share, and its own
         * retries keep to --attempts and its backoff */
        rv = sg_curl_multi_set_health(m, NULL);
    }
    if (rv == 0) {
        rv = sg_curl_multi_add(m, op);
        while (rv == 0) {
            int running = sg_curl_multi_step(m, 0);
            out_flush(&c->run.out);
            if (running <= 0) {
                rv = running < 0 ? running : 0;
                break;
            }
            if (run_interrupted(&c->run)) {
                sg_curl_op_cancel(op); /* ends at the next step */
                continue;
            }
            /* the multi's fd also wakes for every clock (its timerfd) */
            run_wait(&c->run, sg_curl_multi_fd(m), SG_TIME_NEVER);
        }
        if (rv == 0) {
            output_end(c);
            ledger_settle(c); /* before the report, which says if its end was recorded */
            size_t said_len = 0;
            const char *said = sg_curl_op_error_body(op, &said_len);
            code =
                conclude(c, sg_curl_op_policy(op), sg_curl_op_error(op), said, said_len);
        }
    }
    if (rv != 0) {
        code = run_failed(c, rv, op != NULL ? sg_curl_op_error(op) : NULL);
    }
out:
    sg_curl_op_free(op);
    sg_curl_multi_free(m);
    ledger_close_for_run(c);
    curl_easy_cleanup(easy);
    if (global) {
        curl_global_cleanup();
    }
    return code;
}
