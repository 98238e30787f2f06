/*
 * Test helpers: streamguard objects made for one scope and freed when it
 * ends (the compiler's cleanup attribute), so a test reads as its steps.
 * A failed assertion leaves the scope by longjmp and leaks them: the test
 * has failed already.
 */
#ifndef SG_TESTS_AUTO_H
#define SG_TESTS_AUTO_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/policy.h>
#include <streamguard/stream.h>

static inline sg_op_options *sg_auto_options_new(void) {
    sg_op_options *o = NULL;
    if (sg_op_options_new(&o) != 0) {
        fprintf(stderr, "sg_op_options_new failed\n");
        abort();
    }
    return o;
}
static inline void sg_auto_options_free(sg_op_options **o) {
    sg_op_options_free(*o);
}
/* sg_op_options *NAME, every option at its default, freed at scope end. */
#define SG_AUTO_OPTIONS(name)                                            \
    sg_op_options *name __attribute__((cleanup(sg_auto_options_free))) = \
        sg_auto_options_new()

#ifdef STREAMGUARD_UNSTABLE_OP_H
static inline sg_op *sg_auto_op_new(void) {
    sg_op *op = NULL;
    if (sg_op_new(&op) != 0) {
        fprintf(stderr, "sg_op_new failed\n");
        abort();
    }
    return op;
}
static inline void sg_auto_op_free(sg_op **op) {
    sg_op_free(*op);
}
/* sg_op *NAME, never started, freed at scope end. */
#    define SG_AUTO_OP(name) \
        sg_op *name __attribute__((cleanup(sg_auto_op_free))) = sg_auto_op_new()
#endif

#ifdef STREAMGUARD_OP_H
/* An attempt's record as the policy hands it to an observer: attempt @n,
 * sent, ended @outcome in @phase with @status, and @usage. */
static inline sg_op_attempt sg_test_attempt(uint32_t n, sg_outcome outcome,
                                            sg_phase phase, int status,
                                            sg_op_usage usage) {
    sg_op_attempt rec;
    memset(&rec, 0, sizeof(rec));
    rec.n = n;
    rec.outcome = outcome;
    rec.phase = phase;
    rec.sent = true;
    rec.http_status = status;
    rec.usage = usage;
    return rec;
}
#endif

/* A framing config: @format, ending at @done (NULL: no sentinel). */
static inline sg_stream_config sg_test_framing(sg_format format, const char *done) {
    sg_stream_config f;
    sg_stream_config_init(&f);
    if (sg_stream_config_set_format(&f, format) != 0 ||
        sg_stream_config_set_terminal_data(&f, done) != 0) {
        fprintf(stderr, "sg_test_framing: bad format or sentinel\n");
        abort();
    }
    return f;
}

#ifdef STREAMGUARD_CURL_H
static inline sg_curl_options *sg_auto_curl_options_new(void) {
    sg_curl_options *o = NULL;
    if (sg_curl_options_new(&o) != 0) {
        fprintf(stderr, "sg_curl_options_new failed\n");
        abort();
    }
    return o;
}
static inline void sg_auto_curl_options_free(sg_curl_options **o) {
    sg_curl_options_free(*o);
}
/* sg_curl_options *NAME, every option at its default, freed at scope end. */
#    define SG_AUTO_CURL_OPTIONS(name)                                              \
        sg_curl_options *name __attribute__((cleanup(sg_auto_curl_options_free))) = \
            sg_auto_curl_options_new()
/* @o frames SSE ending at "[DONE]". */
static inline void sg_test_curl_done(sg_curl_options *o) {
    sg_stream_config f = sg_test_framing(SG_FORMAT_SSE, "[DONE]");
    if (sg_curl_options_set_framing(o, &f) != 0) {
        abort();
    }
}
#endif

#ifdef STREAMGUARD_H2_H
static inline sg_h2_request *sg_auto_h2_request_new(void) {
    sg_h2_request *r = NULL;
    if (sg_h2_request_new(&r) != 0) {
        fprintf(stderr, "sg_h2_request_new failed\n");
        abort();
    }
    return r;
}
static inline void sg_auto_h2_request_free(sg_h2_request **r) {
    sg_h2_request_free(*r);
}
/* sg_h2_request *NAME, empty, freed at scope end. */
#    define SG_AUTO_H2_REQUEST(name)                                            \
        sg_h2_request *name __attribute__((cleanup(sg_auto_h2_request_free))) = \
            sg_auto_h2_request_new()
static inline sg_h2_conn_options *sg_auto_h2_conn_options_new(void) {
    sg_h2_conn_options *o = NULL;
    if (sg_h2_conn_options_new(&o) != 0) {
        fprintf(stderr, "sg_h2_conn_options_new failed\n");
        abort();
    }
    return o;
}
static inline void sg_auto_h2_conn_options_free(sg_h2_conn_options **o) {
    sg_h2_conn_options_free(*o);
}
/* sg_h2_conn_options *NAME, every option at its default, freed at scope end. */
#    define SG_AUTO_H2_CONN_OPTIONS(name)                            \
        sg_h2_conn_options *name                                     \
            __attribute__((cleanup(sg_auto_h2_conn_options_free))) = \
                sg_auto_h2_conn_options_new()

/* One header of a test's HTTP/2 request. */
typedef struct sg_test_h2_header {
    const char *name;
    const char *value;
} sg_test_h2_header;

/* What a test asks of one HTTP/2 operation, field by field; made into an
 * sg_h2_request by sg_test_h2_start.  Zero is every default. */
typedef struct sg_test_h2_req {
    const char *method;
    const char *path;
    const char *authority;
    const sg_test_h2_header *headers;
    size_t nheaders;
    const void *body;
    size_t body_len;
    bool deadline_header;
    bool grpc_timeout;
    int64_t drain_ns;
} sg_test_h2_req;

/* A test operation's callbacks; NULL ones are not set. */
typedef struct sg_test_h2_cbs {
    sg_h2_item_cb on_item;
    sg_h2_discard_cb on_discard;
    sg_h2_attempt_cb on_attempt;
    sg_h2_done_cb on_done;
    sg_h2_bytes_cb on_bytes;
} sg_test_h2_cbs;

/* The request @t with @framing (NULL: the defaults) and @cbs, made and
 * set through the public setters. */
static inline int sg_test_h2_request(sg_h2_request **out, const sg_test_h2_req *t,
                                     const sg_stream_config *framing,
                                     const sg_test_h2_cbs *cbs) {
    sg_h2_request *r = NULL;
    int rv = sg_h2_request_new(&r);
    if (rv == 0) {
        rv = sg_h2_request_set_framing(r, framing);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_method(r, t->method);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_path(r, t->path);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_authority(r, t->authority);
    }
    for (size_t i = 0; rv == 0 && i < t->nheaders; i++) {
        rv = sg_h2_request_add_header(r, t->headers[i].name, t->headers[i].value);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_body(r, t->body, t->body_len);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_deadline_header(r, t->deadline_header);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_grpc_timeout(r, t->grpc_timeout);
    }
    if (rv == 0) {
        rv = sg_h2_request_set_drain_timeout(r, t->drain_ns);
    }
    if (rv == 0 && cbs != NULL) {
        (void)sg_h2_request_set_on_item(r, cbs->on_item);
        (void)sg_h2_request_set_on_discard(r, cbs->on_discard);
        (void)sg_h2_request_set_on_attempt(r, cbs->on_attempt);
        (void)sg_h2_request_set_on_done(r, cbs->on_done);
        (void)sg_h2_request_set_on_bytes(r, cbs->on_bytes);
    }
    if (rv != 0) {
        sg_h2_request_free(r);
        r = NULL;
    }
    *out = r;
    return rv;
}

/* sg_h2_op_new on @c for the request sg_test_h2_request makes (freed
 * before it returns: the operation holds its own copy). */
static inline int sg_test_h2_start(sg_h2_conn *c, const sg_test_h2_req *t,
                                   const sg_stream_config *framing,
                                   const sg_op_options *po, const sg_test_h2_cbs *cbs,
                                   void *ud, sg_h2_op **out) {
    sg_h2_request *r = NULL;
    int rv = sg_test_h2_request(&r, t, framing, cbs);
    if (rv == 0) {
        rv = sg_h2_op_new(out, c, po, r, ud);
    } else if (out != NULL) {
        *out = NULL;
    }
    sg_h2_request_free(r);
    return rv;
}
#endif

#ifdef STREAMGUARD_LEDGER_H
static inline sg_ledger_options *sg_auto_ledger_options_new(void) {
    sg_ledger_options *o = NULL;
    if (sg_ledger_options_new(&o) != 0) {
        fprintf(stderr, "sg_ledger_options_new failed\n");
        abort();
    }
    return o;
}
static inline void sg_auto_ledger_options_free(sg_ledger_options **o) {
    sg_ledger_options_free(*o);
}
/* sg_ledger_options *NAME, every option at its default, freed at scope end. */
#    define SG_AUTO_LEDGER_OPTIONS(name)                                                \
        sg_ledger_options *name __attribute__((cleanup(sg_auto_ledger_options_free))) = \
            sg_auto_ledger_options_new()
#endif

#endif
