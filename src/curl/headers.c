/* The request headers of an attempt over libcurl: the caller's lines and
 * the lifecycle's stamp in one block (build), the stamped deadlines
 * written again as the request goes (restamp). */
#include "curl/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A stamped deadline's line is written with this many value bytes (the
 * longest value either header has, a lease of milliseconds or a
 * grpc-timeout), so the value written when the request goes (restamp)
 * always fits in place. */
#define STAMP_ROOM (SG_DEADLINE_VALUE_MAX - 1)

/* Writes @value (shorter than SG_DEADLINE_VALUE_MAX) over the value of
 * the stamped @line, in place: its allocation has STAMP_ROOM bytes for it
 * whatever was written there since. */
void sg__curl_restamp(struct curl_slist *line, const char *value) {
    if (line != NULL) {
        char *v = strchr(line->data, ':') + 2;
        snprintf(v, STAMP_ROOM + 1, "%s", value);
    }
}

/* The length of stamp line @i of @st (its NUL apart), a deadline's with
 * its room. */
static size_t stamp_len(const sg_curl_op *op, const sg__lc_stamp *st, size_t i) {
    const char *v = st->h[i].value;
    bool room = v == op->lc.dl_value || v == op->lc.grpc_value;
    size_t vl = strlen(v);
    return strlen(st->h[i].name) + 2 + (room && vl < STAMP_ROOM ? STAMP_ROOM : vl);
}

/* The request headers of one attempt: the caller's, then the lifecycle's
 * stamp (idempotency key, the lease).  One block holds the list's nodes
 * and the stamp's lines; the caller's lines are not copied again - their
 * nodes point at @given's, which the operation's options keep as long as
 * it (libcurl only reads the list).  Freed with free(), not
 * curl_slist_free_all. */
int sg__curl_build_headers(sg_curl_op *op, const struct curl_slist *given,
                           const sg__lc_stamp *st) {
    free(op->req_headers);
    op->req_headers = NULL;
    op->dl_line = op->grpc_line = NULL;
    size_t n = st->n, text = 0;
    for (const struct curl_slist *h = given; h != NULL; h = h->next) {
        n++;
    }
    for (size_t i = 0; i < st->n; i++) {
        text += stamp_len(op, st, i) + 1;
    }
    if (n == 0) {
        return 0;
    }
    struct curl_slist *nodes = malloc(n * sizeof(*nodes) + text);
    if (nodes == NULL) {
        return SG_ENOMEM;
    }
    char *at = (char *)(nodes + n);
    size_t k = 0;
    for (const struct curl_slist *h = given; h != NULL; h = h->next, k++) {
        nodes[k].data = h->data;
    }
    for (size_t i = 0; i < st->n; i++, k++) {
        const char *v = st->h[i].value;
        bool dl = v == op->lc.dl_value;
        bool grpc = v == op->lc.grpc_value;
        size_t len = stamp_len(op, st, i);
        /* a deadline's room is padding until on_prereq writes the value
         * again, before anything is sent */
        snprintf(at, len + 1, "%s: %-*s", st->h[i].name, dl || grpc ? STAMP_ROOM : 0, v);
        nodes[k].data = at;
        at += len + 1;
        if (dl) {
            op->dl_line = &nodes[k];
        } else if (grpc) {
            op->grpc_line = &nodes[k];
        }
    }
    for (k = 0; k < n; k++) {
        nodes[k].next = k + 1 < n ? &nodes[k + 1] : NULL;
    }
    op->req_headers = nodes;
    return 0;
}
