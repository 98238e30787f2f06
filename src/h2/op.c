/*
 * Guarded operations as streams of one HTTP/2 connection: the HTTP/2 glue
 * of the shared attempt lifecycle (src/transport/lifecycle.h).
 *
 * nghttp2 has no stream timers of its own: each stream's clocks live in its
 * operation's lifecycle, and the connection keeps its operations in the
 * lazy deadline heap (src/transport/dheap.h) keyed by their next deadline -
 * the one instant sg_h2_conn_next_deadline reports.
 *
 * Decisions taken inside nghttp2 callbacks (a clock refused an item, a
 * stream closed) put the operation on a queue; the policy and the user
 * callbacks that may free things (on_discard, on_attempt, on_done) run
 * from that queue after nghttp2 returned.
 */
#include "h2/internal.h"
#include "core/internal.h"
#include "sgx/fields.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ heap */

#define OP_OF_NODE(n) ((sg_h2_op *)((char *)(n)-offsetof(sg_h2_op, node)))

int64_t sg__h2_op_deadline(const sg__dheap_node *n) {
    const sg_h2_op *op = (const sg_h2_op *)((const char *)n - offsetof(sg_h2_op, node));
    return sg__lc_next_deadline(&op->lc); /* the next hedge too */
}

/* The deadline moved: only an earlier one needs the heap (lazy keys). */
void sg__h2_reschedule(sg_h2_op *op) {
    sg__dheap_reschedule(&SG__H2_CONN_OF(op)->heap, &op->node);
}

/* ----------------------------------------------------- attempt decisions */

void sg__h2_detach_stream(sg_h2_op *op) {
    sg__h2_link *l = op->link;
    if (l == NULL) {
        return;
    }
    if (op->waiting) {
        op->waiting = false;
        l->waiting--;
    }
    if (op->stream_id > 0) {
        if (l->session != NULL) {
            nghttp2_session_set_stream_user_data(l->session, op->stream_id, NULL);
        }
        op->stream_id = 0;
        l->active--;
    }
    op->link = NULL;
}

static void reset_stream(sg_h2_op *op, int rst_code) {
    sg__h2_link *l = op->link;
    if (l != NULL && op->stream_id > 0 && rst_code >= 0 && l->session != NULL) {
        nghttp2_submit_rst_stream(l->session, NGHTTP2_FLAG_NONE, op->stream_id,
                                  (uint32_t)rst_code);
    }
    sg__h2_detach_stream(op);
}

static void queue_decided(sg_h2_op *op) {
    sg_h2_conn *c = SG__H2_CONN_OF(op);
    if (op->queued) {
        return;
    }
    op->queued = true;
    op->done_next = NULL;
    if (c->done_tail != NULL) {
        c->done_tail->done_next = op;
    } else {
        c->done_head = op;
    }
    c->done_tail = op;
}

void sg__h2_decide(sg_h2_op *op, int64_t now, sg_outcome how, int rst_code) {
    reset_stream(op, rst_code);
    sg__lc_decide(&op->lc, now, how);
    queue_decided(op);
}

/* After a settle that did not end the op: its deadline moved either way. */
static void settled(sg_h2_op *op, int ended) {
    if (!ended) {
        sg__dheap_rekey(&SG__H2_CONN_OF(op)->heap, &op->node);
    }
}

void sg__h2_process_decided(sg_h2_conn *c) {
    while (c->done_head != NULL) {
        sg_h2_op *op = c->done_head;
        c->done_head = op->done_next;
        if (c->done_head == NULL) {
            c->done_tail = NULL;
        }
        op->queued = false;
        settled(op, sg__lc_settle(&op->lc, sg__h2_now(c)));
    }
}

void sg__h2_run_intents(sg_h2_conn *c, int64_t now) {
    sg__lifecycle *lc;
    while ((lc = sg__watch_next(&c->intents)) != NULL) {
        sg_h2_op *op = SG__H2_OP_OF(lc);
        settled(op, sg__lc_intent_ready(lc, now));
        sg__h2_process_decided(c);
    }
}

void sg__h2_run_due(sg_h2_conn *c, int64_t now) {
    sg__dheap_node *top;
    while (sg__dheap_earliest(&c->heap, &top) <= now) {
        sg_h2_op *op = OP_OF_NODE(top);
        settled(op, sg__lc_tick(&op->lc, now));
        sg__h2_process_decided(c);
        /* op may be freed now; re-key whatever sits on top instead. */
        sg__dheap_node *again;
        if (sg__dheap_earliest(&c->heap, &again) <= now && again == top) {
            /* due yet unchanged (nothing to do at this instant): look
             * again shortly rather than spin */
            sg__dheap_set_key(&c->heap, top, sg_time_add(now, SG_MS(1)));
        }
    }
}

/* ------------------------------------------------------ transport glue */

static nghttp2_nv make_nv(const char *name, const char *value) {
    nghttp2_nv nv;
    nv.name = (uint8_t *)(uintptr_t)name;
    nv.value = (uint8_t *)(uintptr_t)value;
    nv.namelen = strlen(name);
    nv.valuelen = strlen(value);
    nv.flags = NGHTTP2_NV_FLAG_NONE;
    return nv;
}

static void lowercase(char *s) {
    for (; *s != '\0'; s++) {
        *s = (char)tolower((unsigned char)*s);
    }
}

/* Submits the request on the op's READY link with the lifecycle's stamp.
 * 0, or a negative code (the message in the lifecycle; never sent). */
static int submit(sg_h2_op *op, int64_t now) {
    sg__h2_link *l = op->link;
    sg__lifecycle *lc = &op->lc;
    sg_guard_set_phase(sg__lc_guard(lc), SG_PHASE_SEND, now);
    /* The stamp goes into the shared request's room after its fixed part:
     * nghttp2 copies every field before it returns, and nothing else runs
     * on the connection meanwhile. */
    char names[SG__LC_STAMP_MAX][SG_OP_HEADER_NAME_MAX + 1];
    sg__lc_header lib[SG__LC_STAMP_MAX];
    const size_t n_lib = sg__lc_stamp_lib(lc, lib);
    nghttp2_nv *nva = op->req->nva;
    size_t n = op->req->nfixed;
    for (size_t i = 0; i < n_lib; i++) {
        snprintf(names[i], sizeof(names[i]), "%s", lib[i].name);
        lowercase(names[i]);
        nva[n++] = make_nv(names[i], lib[i].value);
    }
    for (size_t i = 0; i < op->stamp_obs; i++) {
        nva[n++] = make_nv(sg_op_headers_name(lc->obs_headers, i),
                           sg_op_headers_value(lc->obs_headers, i));
    }
    nghttp2_data_provider prd;
    prd.source.ptr = NULL;
    prd.read_callback = sg__h2_body_read;
    int32_t id = nghttp2_submit_request(l->session, NULL, nva, n,
                                        op->req->body_len > 0 ? &prd : NULL, op);
    if (id < 0) {
        sg__lc_error(lc, "cannot submit the request: %s", nghttp2_strerror(id));
        if (id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE) {
            l->usable = false; /* ids exhausted: the next attempt takes a new link */
        }
        return SG_EH2;
    }
    op->stream_id = id;
    l->active++;
    sg__h2_reschedule(op);
    return 0;
}

bool sg__h2_link_has_room(const sg__h2_link *l) {
    uint32_t max = nghttp2_session_get_remote_settings(
        l->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
    return (uint32_t)l->active < max;
}

/* Takes the link new streams go on: a READY one with a stream to spare
 * gets the request now; one still connecting makes the op wait (phase
 * connect, under the attempt's own clocks) until link.c sends it or fails
 * it; one at the server's MAX_CONCURRENT_STREAMS makes it wait for a slot
 * (phase send), so its deadline is stamped when it goes, not now. */
static int tp_launch(sg__lifecycle *lc, const sg_op_plan *plan, const sg__lc_stamp *st,
                     int64_t *now, sg_outcome *fail) {
    sg_h2_op *op = SG__H2_OP_OF(lc);
    sg_h2_conn *c = SG__H2_CONN_OF(op);
    (void)plan;
    op->stream_id = 0;
    op->body_off = 0;
    op->header_bytes = 0;
    op->end_stream = false;
    /* the library's are made again when it goes (submit) */
    op->stamp_obs = (uint8_t)(st->n - st->n_lib);
    *fail = SG_OUTCOME_TRANSPORT_ERROR;
    sg__h2_link *l = sg__h2_link_for_streams(c, *now);
    if (l == NULL) {
        sg__lc_error(lc, "%s", c->errbuf);
        return SG_ENOMEM;
    }
    op->link = l;
    if (l->state != SG__H2L_READY || !sg__h2_link_has_room(l)) {
        if (l->state == SG__H2L_READY) {
            sg_guard_set_phase(sg__lc_guard(lc), SG_PHASE_SEND, *now);
        }
        op->waiting = true;
        l->waiting++;
        sg__h2_reschedule(op);
        return 0;
    }
    int rv = submit(op, *now);
    if (rv != 0) {
        op->link = NULL;
    }
    return rv;
}

void sg__h2_submit_waiting(sg_h2_op *op, int64_t now) {
    op->waiting = false;
    op->link->waiting--;
    /* the connection, or a slot, took time: the stamp says what is left */
    sg__lc_restamp(&op->lc, now);
    if (submit(op, now) != 0) {
        op->lc.not_processed = true;
        sg__h2_decide(op, now, SG_OUTCOME_TRANSPORT_ERROR, -1);
    }
}

static void tp_abort(sg__lifecycle *lc) {
    /* this stream alone: the server learns at once that nobody listens */
    reset_stream(SG__H2_OP_OF(lc), NGHTTP2_CANCEL);
}

/* The operation an attempt runner belongs to: the consumer only ever
 * sees that one. */
static sg_h2_op *root_of(sg_h2_op *op) {
    return op->lc.primary != NULL ? SG__H2_OP_OF(op->lc.primary) : op;
}

#define ROOT_OF(l) root_of(SG__H2_OP_OF(l))
#define CBS_OF(op) (&(op)->req->cbs)
SG__LC_CALLBACK_SHIMS(sg_h2_op, ROOT_OF, CBS_OF)

/* The operation ended: leave the heap, then tell the consumer.  After this
 * returns the op may have been freed by on_done. */
static void tp_finished(sg__lifecycle *lc) {
    sg_h2_op *op = SG__H2_OP_OF(lc);
    sg_h2_conn *c = SG__H2_CONN_OF(op);
    sg__lc_settle_losers(&op->lc, sg__h2_now(c)); /* recorded before on_done */
    for (size_t i = 0; i < SG_OP_MAX_HEDGES; i++) {
        sg__lifecycle *sl = sg__lc_slot(&op->lc, i);
        if (sl != NULL && SG__H2_OP_OF(sl)->node.in_heap) {
            sg__dheap_remove(&c->heap, &SG__H2_OP_OF(sl)->node); /* never counted */
        }
    }
    if (op->node.in_heap) {
        sg__dheap_remove(&c->heap, &op->node);
        c->running--;
    }
    if (c->in_recv > 0) {
        /* ended inside an nghttp2 callback (started from on_item and
         * refused at once): on_done once nghttp2 has returned */
        op->ended_next = NULL;
        if (c->ended_tail != NULL) {
            c->ended_tail->ended_next = op;
        } else {
            c->ended_head = op;
        }
        c->ended_tail = op;
        return;
    }
    if (op->req->cbs.on_done != NULL) {
        op->req->cbs.on_done(op, op->user_data);
    }
}

void sg__h2_run_ended(sg_h2_conn *c) {
    while (c->ended_head != NULL && c->in_recv == 0) {
        sg_h2_op *op = c->ended_head;
        c->ended_head = op->ended_next;
        if (c->ended_head == NULL) {
            c->ended_tail = NULL;
        }
        if (op->req->cbs.on_done != NULL) {
            op->req->cbs.on_done(op, op->user_data); /* (it may free op) */
        }
    }
}

static int64_t tp_now(sg__lifecycle *lc) {
    return sg__h2_now(SG__H2_CONN_OF(SG__H2_OP_OF(lc)));
}

static sg__lifecycle *tp_new_slot(sg__lifecycle *root);

static void tp_reschedule(sg__lifecycle *lc) {
    sg_h2_op *op = SG__H2_OP_OF(lc);
    if (op->node.in_heap) {
        sg__dheap_rekey(&SG__H2_CONN_OF(op)->heap, &op->node);
    }
}

static int tp_bytes(sg__lifecycle *lc, const void *data, size_t len) {
    sg_h2_op *root = root_of(SG__H2_OP_OF(lc));
    if (root->req->cbs.on_bytes != NULL) {
        /* no pause on HTTP/2 here: any non-zero value cancels */
        return root->req->cbs.on_bytes(root, lc->attempt, data, len, root->user_data) !=
               0;
    }
    return 0;
}

static int tp_watch(sg__lifecycle *lc, int fd) {
    sg_h2_conn *c = SG__H2_CONN_OF(SG__H2_OP_OF(lc));
    return sg__watch_add(&c->intents, c->epfd, fd, lc);
}

static void tp_unwatch(sg__lifecycle *lc, int fd) {
    sg__watch_del(&SG__H2_CONN_OF(SG__H2_OP_OF(lc))->intents, fd);
}

/* The connection's one endpoint, scheme://authority/path as requested,
 * and the credential header among the request's (sg__credential_rank's
 * first). */
static void tp_identity(sg__lifecycle *lc, uint32_t i, const char **url,
                        const char **cred, size_t *cred_len) {
    (void)i;
    const sg__h2_req *req = SG__H2_OP_OF(lc)->req;
    *url = req->target;
    int best = 4;
    for (size_t k = 4; k < req->nfixed; k++) { /* after the pseudo-headers */
        const nghttp2_nv *nv = &req->nva[k];
        const int rank = sg__credential_rank((const char *)nv->name, nv->namelen);
        if (rank >= 0 && rank < best) {
            best = rank;
            *cred = (const char *)nv->value;
            *cred_len = nv->valuelen;
        }
    }
}

/* One endpoint, one credential per request copy: its key is made once. */
static sg__lc_key *tp_key_cache(sg__lifecycle *lc, uint32_t i) {
    return i == 0 ? &SG__H2_OP_OF(lc)->req->key : NULL;
}

static const sg__transport h2_transport = {
    .launch = tp_launch,
    .abort = tp_abort,
    .discard = sg__lc_shim_discard,
    .attempt_ended = sg__lc_shim_attempt,
    .finished = tp_finished,
    .now = tp_now,
    .reschedule = tp_reschedule,
    .new_slot = tp_new_slot,
    .watch = tp_watch,
    .unwatch = tp_unwatch,
    .bytes = tp_bytes,
    .identity = tp_identity,
    .key_cache = tp_key_cache,
};

static int on_item(const sg_item *item, void *user_data) {
    sg_h2_op *op = user_data;
    if (sg__lc_item_gate(&op->lc) != 0) {
        return 1; /* another stream delivered first: nothing of this one */
    }
    sg_h2_op *root = root_of(op);
    if (root->req->cbs.on_item != NULL) {
        return root->req->cbs.on_item(root, item, root->user_data);
    }
    return 0;
}

/* ---------------------------------------------------------- operations */

/* Copies the request into one block: the shared part, the nva array
 * (with room for the headers stamped per attempt), then every string - the
 * observer's target scheme://authority/path among them - then the body.
 * NULL when out of memory. */
static sg__h2_req *copy_request(sg_h2_conn *c, const sg_h2_request *req,
                                const char *method) {
    const char *authority = req->authority != NULL ? req->authority : c->authority;
    const char *scheme = c->opts.tls ? "https" : "http";
    size_t nva_n = 4 + req->nheaders + SG__LC_STAMP_ALL;
    size_t size = sizeof(sg__h2_req) + nva_n * sizeof(nghttp2_nv);
    size += strlen(method) + strlen(req->path) + strlen(authority) + 3;
    size += strlen(scheme) + 3 + strlen(authority) + strlen(req->path) + 1;
    for (size_t i = 0; i < req->nheaders; i++) {
        size += strlen(req->headers[i].name) + strlen(req->headers[i].value) + 2;
    }
    size += req->body_len;
    sg__h2_req *r = malloc(size);
    if (r == NULL) {
        return NULL;
    }
    memset(r, 0, sizeof(*r));
    if (sg__stream_config_copy(&r->framing, &req->framing, &r->framing_block) != 0) {
        free(r);
        return NULL;
    }
    r->refs = 0;
    r->version = req->version;
    r->conn = c;
    r->cbs = req->cbs;
    r->drain_ns = req->drain_ns;
    r->deadline_header = req->deadline_header;
    r->grpc_timeout = req->grpc_timeout;
    r->nva = (nghttp2_nv *)(void *)(r + 1);
    char *p = (char *)(r->nva + nva_n);
#define SG__COPY(dst, src)           \
    do {                             \
        size_t l_ = strlen(src) + 1; \
        memcpy(p, (src), l_);        \
        (dst) = p;                   \
        p += l_;                     \
    } while (0)
    const char *m, *pa, *au;
    SG__COPY(m, method);
    SG__COPY(pa, req->path);
    SG__COPY(au, authority);
    r->target = p;
    p += sprintf(p, "%s://%s%s", scheme, authority, req->path) + 1;
    size_t n = 0;
    r->nva[n++] = make_nv(":method", m);
    r->nva[n++] = make_nv(":scheme", scheme);
    r->nva[n++] = make_nv(":authority", au);
    r->nva[n++] = make_nv(":path", pa);
    for (size_t i = 0; i < req->nheaders; i++) {
        char *name;
        const char *value;
        SG__COPY(name, req->headers[i].name);
        lowercase(name);
        SG__COPY(value, req->headers[i].value);
        r->nva[n++] = make_nv(name, value);
    }
#undef SG__COPY
    r->nfixed = n;
    r->body = (const uint8_t *)p;
    r->body_len = req->body_len;
    if (req->body_len > 0) {
        memcpy(p, req->body, req->body_len);
    }
    return r;
}

/* The connection's copy of @req sending @method: the one made last when
 * it is of the same version and method, else a new one (the connection's
 * last from now on).  A reference is the caller's.  NULL when out of
 * memory. */
static sg__h2_req *share_request(sg_h2_conn *c, const sg_h2_request *req,
                                 const char *method) {
    sg__h2_req *r = c->req_cache;
    if (r == NULL || r->version != req->version ||
        strcmp((const char *)r->nva[0].value, method) != 0) {
        if ((r = copy_request(c, req, method)) == NULL) {
            return NULL;
        }
        c->req_cache = r; /* the one before stays with its operations */
    }
    r->refs++;
    return r;
}

static void unshare_request(sg__h2_req *r) {
    if (r == NULL || --r->refs > 0) {
        return;
    }
    if (r->conn != NULL && r->conn->req_cache == r) {
        r->conn->req_cache = NULL;
    }
    sg__op_options_unhold(r->opts);
    free(r->framing_block);
    free(r);
}

/* The policy's options for an operation made from @policy with request
 * copy @r on @c, frozen and shared: the copy made last for @r when @policy
 * is the same version (every sg_op_options setter makes a new one) and the
 * connection's retry budget and health are the same, else a new one kept
 * in @r.  The operation's lifecycle holds it.  0, SG_EINVAL (the request's
 * method is no token) or SG_ENOMEM. */
static int share_options(sg_h2_conn *c, sg__h2_req *r, const sg_h2_request *req,
                         const sg_op_options *policy, const sg_op_options **out) {
    const uint64_t v = sg__op_options_version(policy);
    /* the connection's health, for options that name none */
    sg_health *health =
        sg__op_options_health(policy) == NULL ? sg__health_slot_get(&c->health) : NULL;
    if (r->opts != NULL && r->opts_version == v && r->opts_budget == c->retry_budget &&
        r->opts_health == health) {
        *out = r->opts;
        return 0;
    }
    sg_op_options *po = NULL;
    int rv = policy != NULL ? sg_op_options_dup(&po, policy) : sg_op_options_new(&po);
    if (rv != 0) {
        return rv;
    }
    if (sg__op_options_retry_budget(po) == NULL) {
        /* the connection's, if any */
        (void)sg_op_options_set_retry_budget(po, c->retry_budget);
    }
    if (health != NULL) {
        /* the connection's: the caller's, or its own */
        (void)sg_op_options_set_health(po, health);
    }
    if (req->method != NULL && sg_op_options_set_method(po, req->method) != 0) {
        rv = SG_EINVAL;
    }
    if (rv == 0 && sg_op_options_target(po) == NULL) {
        rv = sg_op_options_set_target(po, r->target);
    }
    const sg_op_options *f = rv == 0 ? sg__op_options_hold(po) : NULL;
    sg_op_options_free(po);
    if (f == NULL) {
        return rv != 0 ? rv : SG_ENOMEM;
    }
    sg__op_options_unhold(r->opts); /* the operations holding it keep it */
    r->opts = f;
    r->opts_version = v;
    r->opts_budget = c->retry_budget;
    r->opts_health = health;
    *out = f;
    return 0;
}

void sg__h2_op_release(sg_h2_op *op) {
    sg__lc_release(&op->lc);
    unshare_request(op->req); /* after the stream that reads its framing */
    free(op);
}

static void link_op(sg_h2_conn *c, sg_h2_op *op) {
    op->next = c->ops;
    if (c->ops != NULL) {
        c->ops->prev = op;
    }
    c->ops = op;
}

int sg_h2_op_new(sg_h2_op **out, sg_h2_conn *c, const sg_op_options *policy,
                 const sg_h2_request *req, void *user_data) {
    if (out != NULL) {
        *out = NULL;
    }
    if (c == NULL || req == NULL || req->path == NULL) {
        return SG_EINVAL; /* (the request's setters checked the rest) */
    }
    if (sg__op_options_endpoint_count(policy) > 1) {
        /* one connection serves one origin: falling back across
         * endpoints is the libcurl transport's (sg_curl_options) */
        return SG_EUNSUPPORTED;
    }
    sg_h2_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return SG_ENOMEM;
    }
    /* Without a method of its own the request sends the policy's, so retry
     * safety always follows what went on the wire. */
    const char *method = req->method != NULL ? req->method : sg_op_options_method(policy);
    if (method == NULL) {
        method = SG__DEFAULT_METHOD; /* no options: the policy's default */
    }
    op->req = share_request(c, req, method);
    int rv = op->req != NULL ? 0 : SG_ENOMEM;
    const sg_op_options *po = NULL;
    if (rv == 0) {
        rv = share_options(c, op->req, req, policy, &po);
    }
    if (rv == 0) {
        rv = sg__lc_init(&op->lc, &h2_transport, NULL, po, &op->req->framing,
                         req->drain_ns, on_item, op);
    }
    if (rv != 0) {
        unshare_request(op->req);
        free(op);
        return rv;
    }
    rv = sg__dheap_push(&c->heap, &op->node);
    if (rv != 0) {
        sg__h2_op_release(op);
        return rv;
    }
    op->lc.deadline_header = req->deadline_header;
    op->lc.grpc_timeout = req->grpc_timeout;
    op->user_data = user_data;
    link_op(c, op);
    c->running++;
    if (out != NULL) {
        *out = op;
    }
    op->lc.async_intent = true; /* the connection watches a pending intent */
    rv = sg__lc_start(&op->lc, sg__h2_now(c));
    if (rv < 0) {
        /* the observer refused: nothing was sent, nothing to drive */
        if (out != NULL) {
            *out = NULL;
        }
        sg_h2_op_free(op);
        return rv;
    }
    if (c->in_recv == 0) {
        /* (started from on_item, inside nghttp2: the step that called it
         * processes what was decided once nghttp2 has returned) */
        sg__h2_process_decided(c);
    }
    return 0;
}

int sg_h2_op_cancel(sg_h2_op *op) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    sg__lc_cancel_all(&op->lc); /* every stream in flight, due at once */
    return 0;
}

/* A hedge slot of @root: its request shared, a lifecycle on its policy,
 * in the connection's heap and list.  NULL when out of memory. */
static sg__lifecycle *tp_new_slot(sg__lifecycle *root_lc) {
    sg_h2_op *root = SG__H2_OP_OF(root_lc);
    sg_h2_conn *c = SG__H2_CONN_OF(root);
    sg_h2_op *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    if (sg__lc_init(&s->lc, &h2_transport, &root->lc, NULL, &root->req->framing,
                    root->req->drain_ns, on_item, s) != 0) {
        free(s);
        return NULL;
    }
    s->req = root->req;
    s->req->refs++;
    s->user_data = root->user_data;
    s->lc.deadline_header = root->lc.deadline_header;
    s->lc.grpc_timeout = root->lc.grpc_timeout;
    if (sg__dheap_push(&c->heap, &s->node) != 0) {
        sg__h2_op_release(s);
        return NULL;
    }
    link_op(c, s);
    return &s->lc;
}

static void unqueue(sg_h2_conn *c, sg_h2_op *op) {
    sg_h2_op **pp = &c->done_head;
    sg_h2_op *prev = NULL;
    while (*pp != NULL && *pp != op) {
        prev = *pp;
        pp = &(*pp)->done_next;
    }
    if (*pp == op) {
        *pp = op->done_next;
        if (c->done_tail == op) {
            c->done_tail = prev;
        }
    }
}

static void unlink_op(sg_h2_conn *c, sg_h2_op *op);

void sg_h2_op_free(sg_h2_op *op) {
    if (op == NULL) {
        return;
    }
    sg_h2_conn *c = SG__H2_CONN_OF(op);
    for (size_t i = 0; i < SG_OP_MAX_HEDGES; i++) {
        if (sg__lc_slot(&op->lc, i) == NULL) {
            continue;
        }
        sg_h2_op *s = SG__H2_OP_OF(op->lc.slots[i]);
        reset_stream(s, NGHTTP2_CANCEL);
        if (s->node.in_heap) {
            sg__dheap_remove(&c->heap, &s->node);
        }
        if (s->queued) {
            unqueue(c, s);
        }
        unlink_op(c, s);
        sg__h2_op_release(s);
        sg__lc_slot_clear(&op->lc, i);
    }
    reset_stream(op, NGHTTP2_CANCEL);
    if (op->node.in_heap) {
        sg__dheap_remove(&c->heap, &op->node);
        c->running--;
    }
    if (op->queued) {
        unqueue(c, op);
    }
    unlink_op(c, op);
    sg__h2_op_release(op);
}

static void unlink_op(sg_h2_conn *c, sg_h2_op *op) {
    if (op->prev != NULL) {
        op->prev->next = op->next;
    } else if (c->ops == op) {
        c->ops = op->next;
    }
    if (op->next != NULL) {
        op->next->prev = op->prev;
    }
    op->prev = op->next = NULL;
}

sg_outcome sg_h2_op_outcome(const sg_h2_op *op) {
    return op != NULL ? sg_op_outcome(op->lc.pol) : SG_OUTCOME_NONE;
}

bool sg_h2_op_done(const sg_h2_op *op) {
    return op != NULL && op->lc.state == SG__LC_DONE;
}

const sg_op *sg_h2_op_policy(const sg_h2_op *op) {
    /* never started (or refused by its observer): nothing to read */
    return op != NULL && sg__op_started(op->lc.pol) ? op->lc.pol : NULL;
}

void *sg_h2_op_user_data(const sg_h2_op *op) {
    return op != NULL ? op->user_data : NULL;
}

int32_t sg_h2_op_stream_id(const sg_h2_op *op) {
    return op != NULL ? op->stream_id : 0;
}

int sg_h2_op_http_status(const sg_h2_op *op) {
    return op != NULL && op->lc.http_status > 0 ? op->lc.http_status : 0;
}

const char *sg_h2_op_error(const sg_h2_op *op) {
    return op != NULL ? sg__lc_errmsg(&op->lc) : "";
}

const char *sg_h2_op_error_body(const sg_h2_op *op, size_t *len) {
    return sg__lc_error_body(op != NULL ? &op->lc : NULL, len);
}

int sg_h2_op_report(const sg_h2_op *op, char *buf, size_t len, size_t *needed) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    return sg_op_report_write(op->lc.pol, sg__h2_now(SG__H2_CONN_OF(op)), buf, len,
                              needed);
}
