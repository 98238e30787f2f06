/*
 * The observer object: a table of the functions the policy calls as an
 * operation forms its intent, starts and ends each attempt, and resolves
 * (op.c calls them).  Opaque so that a function can be added without
 * breaking a caller built against an older table.
 */
#include "core/internal.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int sg_op_observer_new(sg_op_observer **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out)); /* zero: calls nothing */
    return *out != NULL ? 0 : SG_ENOMEM;
}

void sg_op_observer_free(sg_op_observer *obs) {
    free(obs);
}

int sg_op_observer_set_on_intent(sg_op_observer *obs, sg_op_intent_cb fn) {
    SG__SET(obs, on_intent, fn);
}

int sg_op_observer_set_on_attempt_start(sg_op_observer *obs, sg_op_attempt_cb fn) {
    SG__SET(obs, on_attempt_start, fn);
}

int sg_op_observer_set_on_attempt_end(sg_op_observer *obs, sg_op_attempt_cb fn) {
    SG__SET(obs, on_attempt_end, fn);
}

int sg_op_observer_set_on_attempt_headers(sg_op_observer *obs, sg_op_headers_cb fn) {
    SG__SET(obs, on_attempt_headers, fn);
}

int sg_op_observer_set_on_resolve(sg_op_observer *obs, sg_op_resolve_cb fn) {
    SG__SET(obs, on_resolve, fn);
}

int sg_op_observer_set_async_intent(sg_op_observer *obs, sg_op_start_intent_cb start,
                                    sg_op_poll_intent_cb poll,
                                    sg_op_abandon_intent_cb abandon) {
    /* all three or none: an intent started off the loop must be polled,
     * and given back when the operation ends first */
    bool some = start != NULL || poll != NULL || abandon != NULL;
    bool all = start != NULL && poll != NULL && abandon != NULL;
    if (obs == NULL || some != all) {
        return SG_EINVAL;
    }
    obs->start_intent = start;
    obs->poll_intent = poll;
    obs->abandon_intent = abandon;
    return 0;
}

/* ------------------------------------------------------ attempt headers */

/* field-content (RFC 9110 §5.5) without obs-text: visible ASCII, SP, HTAB */
static bool field_value_ok(const char *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if ((c < 0x20 && c != '\t') || c > 0x7e) {
            return false;
        }
    }
    return true;
}

int sg_op_headers_add(sg_op_headers *h, const char *name, const char *value) {
    if (h == NULL || name == NULL || value == NULL || name[0] == '\0') {
        return SG_EINVAL;
    }
    size_t nl = strlen(name);
    size_t vl = strlen(value);
    for (size_t i = 0; i < nl; i++) {
        if (!sg__tchar((unsigned char)name[i])) {
            return SG_EINVAL;
        }
    }
    if (!field_value_ok(value, vl)) {
        return SG_EINVAL;
    }
    if (nl > SG_OP_HEADER_NAME_MAX) {
        return SG_ERANGE;
    }
    if (h->n == SG_OP_HEADERS_MAX || SG_OP_HEADERS_BYTES - h->used < nl + vl + 2) {
        return SG_ENOBUFS;
    }
    if (h->buf == NULL && (h->buf = malloc(SG_OP_HEADERS_BYTES)) == NULL) {
        return SG_ENOMEM;
    }
    char *p = h->buf + h->used;
    for (size_t i = 0; i <= nl; i++) {
        char c = name[i];
        p[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    memcpy(p + nl + 1, value, vl + 1);
    h->h[h->n].name = p;
    h->h[h->n].value = p + nl + 1;
    h->n++;
    h->used += nl + vl + 2;
    return 0;
}

int sg_op_headers_new(sg_op_headers **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? 0 : SG_ENOMEM;
}

void sg_op_headers_free(sg_op_headers *h) {
    if (h != NULL) {
        sg__op_headers_release(h);
        free(h);
    }
}

const char *sg_op_headers_name(const sg_op_headers *h, size_t i) {
    return h != NULL && i < h->n ? h->h[i].name : NULL;
}

const char *sg_op_headers_value(const sg_op_headers *h, size_t i) {
    return h != NULL && i < h->n ? h->h[i].value : NULL;
}

void sg__op_headers_release(sg_op_headers *h) {
    free(h->buf);
    memset(h, 0, sizeof(*h));
}
