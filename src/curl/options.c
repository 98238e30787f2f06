/*
 * sg_curl_options: an operation's framing, transport settings and
 * callbacks.  Every value a setter is given is copied (header lists, the
 * CA path, endpoints, the framing config and its strings), so a caller
 * may free its own at once; the clock is borrowed.
 *
 * Operations made from the same options share one read-only copy of them
 * (sg__curl_options_take): a thousand streams made from one options object
 * hold one copy, not a thousand (~250 bytes and two blocks each, more
 * with header lines and endpoints).  A setter drops the copy its options
 * keep; operations holding it keep it until they are freed.
 */
#include "core/internal.h"
#include "curl/internal.h"

#include "framing/internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

int sg_curl_options_new(sg_curl_options **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out)); /* zero: every option at its default */
    return *out != NULL ? 0 : SG_ENOMEM;
}

/* A copy of @list (NULL for NULL); NULL with *@failed on no memory.  One
 * block holds its nodes and their lines (every operation keeps a copy:
 * one allocation, not two per line); freed with free(), never
 * curl_slist_free_all. */
static struct curl_slist *dup_list(const struct curl_slist *list, bool *failed) {
    size_t n = 0, text = 0;
    for (const struct curl_slist *l = list; l != NULL; l = l->next) {
        n++;
        text += strlen(l->data) + 1;
    }
    if (n == 0) {
        return NULL;
    }
    struct curl_slist *nodes = malloc(n * sizeof(*nodes) + text);
    if (nodes == NULL) {
        *failed = true;
        return NULL;
    }
    char *at = (char *)(nodes + n);
    size_t k = 0;
    for (const struct curl_slist *l = list; l != NULL; l = l->next, k++) {
        size_t len = strlen(l->data) + 1;
        memcpy(at, l->data, len);
        nodes[k].data = at;
        nodes[k].next = k + 1 < n ? &nodes[k + 1] : NULL;
        at += len;
    }
    return nodes;
}

/* A copy of @len bytes of @p with a NUL after them (NULL for NULL). */
static char *dup_bytes(const void *p, size_t len, bool *failed) {
    if (p == NULL) {
        return NULL;
    }
    char *d = malloc(len + 1);
    if (d == NULL) {
        *failed = true;
        return NULL;
    }
    memcpy(d, p, len);
    d[len] = '\0';
    return d;
}

static char *dup_str(const char *s, bool *failed) {
    return s != NULL ? dup_bytes(s, strlen(s), failed) : NULL;
}

static void endpoint_clear(sg__curl_endpoint *e) {
    free(e->url);
    free(e->headers); /* dup_list's one block */
    free(e->body);
    free(e->framing_block);
    memset(e, 0, sizeof(*e));
}

/* Drops the copy @o keeps for its operations (a setter changes @o). */
static void unshare(sg_curl_options *o) {
    sg__curl_options_drop(atomic_exchange(&o->snap, NULL));
}

/* A setter of one plain field: the copy goes first. */
#define CURL_SET(o, field, value) \
    do {                          \
        if ((o) != NULL) {        \
            unshare(o);           \
        }                         \
        SG__SET(o, field, value); \
    } while (0)

void sg_curl_options_free(sg_curl_options *o) {
    if (o == NULL) {
        return;
    }
    unshare(o);
    free(o->framing_block);
    free(o->headers); /* dup_list's one block */
    free(o->cafile);
    for (uint32_t i = 0; i < o->n_endpoints; i++) {
        endpoint_clear(&o->endpoints[i]);
    }
    free(o->endpoints);
    free(o);
}

/* Copies an endpoint into @dst (zeroed): false on no memory (then what
 * @dst holds is for endpoint_clear). */
static bool endpoint_copy(sg__curl_endpoint *dst, const char *url,
                          const struct curl_slist *headers, const void *body,
                          size_t body_len) {
    bool failed = false;
    dst->url = dup_str(url, &failed);
    dst->headers = dup_list(headers, &failed);
    dst->body = dup_bytes(body, body_len, &failed);
    dst->body_len = body_len;
    return !failed;
}

int sg_curl_options_dup(sg_curl_options **out, const sg_curl_options *src) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    if (src == NULL) {
        return SG_EINVAL;
    }
    sg_curl_options *o = calloc(1, sizeof(*o));
    if (o == NULL) {
        return SG_ENOMEM;
    }
    *o = *src;
    atomic_init(&o->snap, NULL);
    atomic_init(&o->refs, 0);
    o->framing_block = NULL;
    o->headers = NULL;
    o->cafile = NULL;
    o->endpoints = NULL;
    o->n_endpoints = 0;
    bool failed =
        sg__stream_config_copy(&o->framing, &src->framing, &o->framing_block) != 0;
    o->headers = dup_list(src->headers, &failed);
    o->cafile = dup_str(src->cafile, &failed);
    if (!failed && src->n_endpoints > 0) {
        o->endpoints = calloc(src->n_endpoints, sizeof(*o->endpoints));
        failed = o->endpoints == NULL;
    }
    for (uint32_t i = 0; i < src->n_endpoints && !failed; i++) {
        o->n_endpoints = i + 1; /* freed with o when the copy fails */
        const sg__curl_endpoint *e = &src->endpoints[i];
        failed =
            !endpoint_copy(&o->endpoints[i], e->url, e->headers, e->body, e->body_len);
        if (!failed && e->own_framing) {
            sg__curl_endpoint *d = &o->endpoints[i];
            failed =
                sg__stream_config_copy(&d->framing, &e->framing, &d->framing_block) != 0;
            d->own_framing = !failed;
        }
    }
    if (failed) {
        sg_curl_options_free(o);
        return SG_ENOMEM;
    }
    *out = o;
    return 0;
}

int sg_curl_options_set_framing(sg_curl_options *o, const sg_stream_config *cfg) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    sg_stream_config copy;
    void *block = NULL;
    if (sg__stream_config_copy(&copy, cfg, &block) != 0) {
        return SG_ENOMEM;
    }
    unshare(o);
    free(o->framing_block);
    o->framing = copy;
    o->framing_block = block;
    return 0;
}

int sg_curl_options_set_headers(sg_curl_options *o, const struct curl_slist *headers) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    bool failed = false;
    struct curl_slist *copy = dup_list(headers, &failed);
    if (failed) {
        return SG_ENOMEM;
    }
    unshare(o);
    free(o->headers);
    o->headers = copy;
    return 0;
}

int sg_curl_options_set_cafile(sg_curl_options *o, const char *path) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    bool failed = false;
    char *copy = dup_str(path, &failed);
    if (failed) {
        return SG_ENOMEM;
    }
    unshare(o);
    free(o->cafile);
    o->cafile = copy;
    return 0;
}

int sg_curl_options_set_deadline_header(sg_curl_options *o, bool on) {
    CURL_SET(o, deadline_header, on);
}

int sg_curl_options_set_grpc_timeout(sg_curl_options *o, bool on) {
    CURL_SET(o, grpc_timeout, on);
}

int sg_curl_options_set_drain_timeout(sg_curl_options *o, int64_t ns) {
    if (o == NULL || ns < 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    unshare(o);
    o->drain_ns = ns;
    return 0;
}

int sg_curl_options_set_clock(sg_curl_options *o, const sg_clock *clock) {
    CURL_SET(o, clock, clock);
}

int sg_curl_options_add_endpoint(sg_curl_options *o, const char *url,
                                 const struct curl_slist *headers, const void *body,
                                 size_t body_len) {
    if (o == NULL || url == NULL) {
        return SG_EINVAL;
    }
    if (o->n_endpoints == SG_OP_MAX_ENDPOINTS) {
        return SG_ERANGE;
    }
    if (o->n_endpoints > 0 && (o->endpoints[0].body != NULL) != (body != NULL)) {
        return SG_EINVAL; /* some would inherit another endpoint's body */
    }
    unshare(o);
    /* one more in place (a realloc per endpoint: 16 at most, as they are
     * configured, never per request of an operation) */
    sg__curl_endpoint *grown =
        realloc(o->endpoints, (o->n_endpoints + 1) * sizeof(*o->endpoints));
    if (grown == NULL) {
        return SG_ENOMEM;
    }
    o->endpoints = grown;
    sg__curl_endpoint *e = &o->endpoints[o->n_endpoints];
    memset(e, 0, sizeof(*e));
    if (!endpoint_copy(e, url, headers, body, body_len)) {
        endpoint_clear(e);
        return SG_ENOMEM;
    }
    o->n_endpoints++;
    return 0;
}

int sg_curl_options_set_endpoint_framing(sg_curl_options *o, uint32_t endpoint,
                                         const sg_stream_config *cfg) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    if (endpoint >= o->n_endpoints) {
        return SG_ERANGE; /* not added yet */
    }
    sg__curl_endpoint *e = &o->endpoints[endpoint];
    unshare(o);
    if (cfg == NULL) {
        free(e->framing_block);
        e->framing_block = NULL;
        sg_stream_config_init(&e->framing);
        e->own_framing = false;
        return 0;
    }
    /* refused here, not at the attempt that would use it: a stream made
     * of it (nothing is allocated until bytes come) */
    sg_stream trial;
    int rv = sg_stream_init_mem(&trial, cfg, NULL, NULL, NULL);
    if (rv != 0) {
        return rv;
    }
    sg_stream_release(&trial);
    sg_stream_config copy;
    void *block = NULL;
    if (sg__stream_config_copy(&copy, cfg, &block) != 0) {
        return SG_ENOMEM;
    }
    free(e->framing_block);
    e->framing = copy;
    e->framing_block = block;
    e->own_framing = true;
    return 0;
}

const sg_stream_config *sg__curl_endpoint_framing(sg__lifecycle *lc, uint32_t i) {
    const sg_curl_op *op = (const sg_curl_op *)((char *)lc - offsetof(sg_curl_op, lc));
    const sg_curl_options *o = op->opts;
    return i < o->n_endpoints && o->endpoints[i].own_framing ? &o->endpoints[i].framing
                                                             : NULL;
}

int sg_curl_options_set_on_item(sg_curl_options *o, sg_curl_item_cb fn) {
    CURL_SET(o, on_item, fn);
}

int sg_curl_options_set_on_discard(sg_curl_options *o, sg_curl_discard_cb fn) {
    CURL_SET(o, on_discard, fn);
}

int sg_curl_options_set_on_attempt(sg_curl_options *o, sg_curl_attempt_cb fn) {
    CURL_SET(o, on_attempt, fn);
}

int sg_curl_options_set_on_done(sg_curl_options *o, sg_curl_done_cb fn) {
    CURL_SET(o, on_done, fn);
}

int sg_curl_options_set_on_bytes(sg_curl_options *o, sg_curl_bytes_cb fn) {
    CURL_SET(o, on_bytes, fn);
}

int sg__curl_options_take(const sg_curl_options *o, sg_curl_options **out) {
    /* the copy @o keeps is part of its state, not of its value: @o stays
     * the same options (the cast is for the cache alone) */
    sg_curl_options *self = (sg_curl_options *)(uintptr_t)o;
    sg_curl_options *copy = atomic_load_explicit(&self->snap, memory_order_acquire);
    if (copy == NULL) {
        int rv = sg_curl_options_dup(&copy, o);
        if (rv != 0) {
            return rv;
        }
        atomic_store_explicit(&copy->refs, 1, memory_order_relaxed); /* @o's */
        sg_curl_options *none = NULL;
        if (!atomic_compare_exchange_strong_explicit(
                &self->snap, &none, copy, memory_order_acq_rel, memory_order_acquire)) {
            sg_curl_options_free(copy); /* another thread's came first */
            copy = none;
        }
    }
    atomic_fetch_add_explicit(&copy->refs, 1, memory_order_relaxed);
    *out = copy;
    return 0;
}

void sg__curl_options_drop(sg_curl_options *copy) {
    if (copy != NULL &&
        atomic_fetch_sub_explicit(&copy->refs, 1, memory_order_acq_rel) == 1) {
        sg_curl_options_free(copy);
    }
}
