/*
 * fallback.c - each fallback's own headers, model and profile
 * (docs/sg-proxy.md, "FALLBACKS"): a route may send a fallback - another
 * deployment, or another provider of the same API - with its own
 * credential, its own model name and its own stream semantics.  The
 * operation's endpoints carry them (the library's per-endpoint headers,
 * body and framing: sg_curl_options_add_endpoint,
 * sg_curl_options_set_endpoint_framing); the report line names the model
 * each attempt asked for, and the report the profile that judged it.
 *
 * A fallback's header lines replace the client's lines of the same names
 * (compared without case) and are never logged; a fallback with its own
 * credential header gets none of the client's credential headers.  Its model replaces the
 * body's top-level "model" string and nothing else (include_usage.c's
 * reader finds it); a body that is not JSON cannot be rewritten without
 * mangling it, so on such a route it is refused before anything is sent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "conn.h"
#include "../common/include_usage.h"
#include "sgx/json.h"

int fallback_read_body(struct conn *c, const char *body, size_t len) {
    c->up_body = body;
    c->up_len = len;
    c->model_len = 0;
    if (len == 0) {
        return 0; /* no body: nothing to rewrite */
    }
    struct iu_edit e;
    int rv = body_model(body, len, &e);
    if (rv == 1) {
        c->model_at = e.at;
        c->model_len = e.cut;
    }
    return rv < 0 && c->route->any_model ? -1 : 0;
}

/* Whether the header line @line ("Name: value") is named by one of
 * @lines. */
static bool named_in(const char *line, const char *const *lines, int n) {
    const char *colon = strchr(line, ':');
    size_t len = colon != NULL ? (size_t)(colon - line) : strlen(line);
    for (int i = 0; i < n; i++) {
        if (strncasecmp(lines[i], line, len) == 0 && lines[i][len] == ':') {
            return true;
        }
    }
    return false;
}

/* Whether @line is a credential header: the names endpoint health keys
 * an upstream's credential by (docs/sg-proxy.md, "ENDPOINT HEALTH"). */
static bool credential(const char *line) {
    static const char *const names[] = {
        "authorization:", "x-api-key:", "api-key:", "x-goog-api-key:"};
    return named_in(line, names, 4);
}

/* The client's lines less those fallback @i names (and less every
 * credential header, when it names one), then its own: a new list, or
 * NULL when the memory is not there. */
static struct curl_slist *fallback_headers(const struct conn *c, int i) {
    const struct route *r = c->route;
    /* a fallback with a credential of its own gets none of the client's,
     * under whatever name: another provider never sees the client's key */
    bool own_cred = false;
    for (int k = 0; k < r->fb_nheader[i]; k++) {
        own_cred = own_cred || credential(r->fb_header[i][k]);
    }
    struct curl_slist *out = NULL;
    for (const struct curl_slist *l = c->headers; l != NULL; l = l->next) {
        if (named_in(l->data, r->fb_header[i], r->fb_nheader[i]) ||
            (own_cred && credential(l->data))) {
            continue;
        }
        struct curl_slist *s = curl_slist_append(out, l->data);
        if (s == NULL) {
            curl_slist_free_all(out);
            return NULL;
        }
        out = s;
    }
    for (int k = 0; k < r->fb_nheader[i]; k++) {
        struct curl_slist *s = curl_slist_append(out, r->fb_header[i][k]);
        if (s == NULL) {
            curl_slist_free_all(out);
            return NULL;
        }
        out = s;
    }
    return out;
}

/* The body fallback @i sends: the primary's with its model literal
 * replaced (a new buffer in *@own, freed by the caller), or the primary's
 * as it is.  0, or SG_ENOMEM. */
static int fallback_body(const struct conn *c, int i, const char **body, size_t *len,
                         char **own) {
    const char *model = c->route->fb_model[i];
    *own = NULL;
    *body = c->up_body;
    *len = c->up_len;
    if (model == NULL || c->model_len == 0) {
        return 0;
    }
    size_t ml = strlen(model); /* at most FB_MODEL_MAX (config.c) */
    char lit[SGX_JSON_ESCAPE_MAX(FB_MODEL_MAX)];
    size_t ll = sgx_json_escape(lit, sizeof(lit), model, ml);
    char text[sizeof(lit) + 1];
    memcpy(text, lit, ll);
    text[ll] = '\0';
    struct iu_edit e = {.at = c->model_at, .cut = c->model_len, .text = text};
    *own = include_usage_apply(c->up_body, c->up_len, &e, len);
    *body = *own;
    return *own != NULL ? 0 : SG_ENOMEM;
}

int fallback_endpoints(struct conn *c, sg_curl_options *o, const char *target,
                       size_t target_len) {
    const struct route *r = c->route;
    if (r->nfallback == 0) {
        return 0;
    }
    /* with a model to put in, every endpoint gets its body (the library
     * then takes none from the easy handle) */
    bool bodies = r->any_model && c->up_body != NULL;
    int rv = sg_curl_options_add_endpoint(o, c->url, NULL, bodies ? c->up_body : NULL,
                                          bodies ? c->up_len : 0);
    for (int i = 0; rv == 0 && i < r->nfallback; i++) {
        char *url = url_join(r->fallback[i], r->fallback_len[i], target, target_len);
        struct curl_slist *h = r->fb_nheader[i] > 0 ? fallback_headers(c, i) : NULL;
        const char *body = NULL;
        size_t len = 0;
        char *own = NULL;
        rv = url == NULL || (r->fb_nheader[i] > 0 && h == NULL) ? SG_ENOMEM : 0;
        if (rv == 0 && bodies) {
            rv = fallback_body(c, i, &body, &len, &own);
        }
        if (rv == 0) {
            rv = sg_curl_options_add_endpoint(o, url, h, body, len);
        }
        if (rv == 0 && r->fb_profile[i] != NULL) {
            /* its attempts framed and judged by its own profile */
            rv = sg_curl_options_set_endpoint_framing(o, (uint32_t)i + 1,
                                                      &r->fb_framing[i]);
        }
        free(own);
        curl_slist_free_all(h);
        free(url);
    }
    return rv;
}

/* The fallback whose own profile frames endpoint @ep of @r (0 the
 * upstream, i fallback i): its index, or -1 for the route's. */
static int own_profile(const struct route *r, uint32_t ep) {
    return ep > 0 && (int)ep <= r->nfallback && r->fb_profile[ep - 1] != NULL
               ? (int)ep - 1
               : -1;
}

void fallback_framing(const struct conn *c, uint32_t attempt,
                      const sg_stream_config **framing, const char **profile) {
    const struct route *r = c->route;
    const sg_op *pol = c->op != NULL ? sg_curl_op_policy(c->op) : NULL;
    const sg_op_attempt *a = attempt > 0 ? sg_op_attempt_at(pol, attempt - 1) : NULL;
    int own = own_profile(r, a != NULL ? a->endpoint : 0);
    *framing = own >= 0 ? &r->fb_framing[own] : &r->framing;
    *profile = own >= 0 ? r->fb_profile[own] : r->profile;
}

const char *endpoint_profile(const struct route *r, uint32_t ep) {
    int own = own_profile(r, ep);
    return own >= 0 ? r->fb_profile[own] : r->profile;
}

/* The model endpoint @ep (0 the primary, i fallback i) asks for, as
 * fallback_body sends it: the fallback's own, or the client's literal as
 * read (*@literal: JSON, quotes included); NULL when the body named none. */
static const char *endpoint_model(const struct conn *c, uint32_t ep, size_t *len,
                                  bool *literal) {
    if (c->model_len == 0) {
        return NULL; /* nothing to replace: every endpoint gets the body as is */
    }
    const char *model =
        ep > 0 && (int)ep <= c->route->nfallback ? c->route->fb_model[ep - 1] : NULL;
    *literal = model == NULL;
    if (model != NULL) {
        *len = strlen(model);
        return model;
    }
    *len = c->model_len;
    return c->up_body + c->model_at;
}

void fallback_models_fwrite(FILE *f, const struct conn *c) {
    const sg_op *pol = c->op != NULL ? sg_curl_op_policy(c->op) : NULL;
    uint32_t n = pol != NULL ? sg_op_attempt_count(pol) : 0;
    fputc('[', f);
    for (uint32_t i = 0; i < n; i++) {
        const sg_op_attempt *a = sg_op_attempt_at(pol, i);
        size_t len = 0;
        bool literal = false;
        const char *model =
            endpoint_model(c, a != NULL ? a->endpoint : 0, &len, &literal);
        if (i > 0) {
            fputc(',', f);
        }
        if (model == NULL) {
            fputs("null", f);
        } else if (literal) {
            fwrite(model, 1, len, f); /* the client's, as it was read: JSON already */
        } else {
            (void)sgx_json_fwrite_string(f, model, len);
        }
    }
    fputc(']', f);
}

size_t fallback_model(const struct conn *c, uint32_t ep, char *out, size_t cap) {
    size_t len = 0;
    bool literal = false;
    const char *model = endpoint_model(c, ep, &len, &literal);
    if (model == NULL || cap == 0) {
        return 0;
    }
    if (literal) {
        return body_json_text(model, len, out, cap);
    }
    if (len >= cap) {
        return 0;
    }
    memcpy(out, model, len + 1);
    return len;
}
