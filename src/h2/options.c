/*
 * The HTTP/2 transport's options: how to reach the server
 * (sg_h2_conn_options) and what each attempt of an operation sends
 * (sg_h2_request).  Every value a setter is given is validated at once
 * and copied.
 */
#include "h2/internal.h"
#include "core/internal.h"
#include "sgx/fields.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- helpers */

/* Replaces *@dst by a copy of @src (NULL: none): 0 or SG_ENOMEM (then
 * *@dst is unchanged). */
static int replace_str(char **dst, const char *src) {
    char *copy = NULL;
    if (src != NULL && (copy = sg__h2_strdup(src)) == NULL) {
        return SG_ENOMEM;
    }
    free(*dst);
    *dst = copy;
    return 0;
}

/* No control byte, DEL or space: a :path, an authority. */
static bool visible_ok(const char *s) {
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s <= 0x20 || *s == 0x7f) {
            return false;
        }
    }
    return true;
}

/* A field name: one or more tchar (RFC 9110 §5.6.2); capitals allowed,
 * they go lowercased (RFC 9113 §8.2.1). */
static bool name_ok(const char *s) {
    if (*s == '\0') {
        return false;
    }
    for (; *s != '\0'; s++) {
        if (!sg__tchar((unsigned char)*s)) {
            return false;
        }
    }
    return true;
}

/* A field value HTTP/2 can carry (RFC 9113 §8.2.1, RFC 9110 §5.5): no
 * NUL, CR, LF, nor another control byte or DEL (a tab inside is fine),
 * and no space or tab at either end. */
static bool value_ok(const char *s) {
    size_t n = strlen(s);
    if (n > 0 && (s[0] == ' ' || s[0] == '\t' || s[n - 1] == ' ' || s[n - 1] == '\t')) {
        return false;
    }
    for (; *s != '\0'; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            return false;
        }
    }
    return true;
}

/* ---------------------------------------------------------- connection */

int sg_h2_conn_options_new(sg_h2_conn_options **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out)); /* zero: every option at its default */
    return *out != NULL ? 0 : SG_ENOMEM;
}

void sg_h2_conn_options_free(sg_h2_conn_options *o) {
    if (o != NULL) {
        free(o->host);
        free(o->cafile);
        free(o->server_name);
        free(o->dns_servers);
        free(o);
    }
}

int sg_h2_conn_options_set_host(sg_h2_conn_options *o, const char *host) {
    if (o == NULL || host == NULL || host[0] == '\0') {
        return SG_EINVAL;
    }
    return replace_str(&o->host, host);
}

int sg_h2_conn_options_set_port(sg_h2_conn_options *o, int port) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    if (port < 1 || port > 65535) {
        return SG_ERANGE;
    }
    o->port = port;
    return 0;
}

int sg_h2_conn_options_set_tls(sg_h2_conn_options *o, bool on) {
    SG__SET(o, tls, on);
}

int sg_h2_conn_options_set_cafile(sg_h2_conn_options *o, const char *path) {
    return o != NULL ? replace_str(&o->cafile, path) : SG_EINVAL;
}

int sg_h2_conn_options_set_insecure(sg_h2_conn_options *o, bool on) {
    SG__SET(o, insecure, on);
}

int sg_h2_conn_options_set_server_name(sg_h2_conn_options *o, const char *name) {
    if (o == NULL || (name != NULL && name[0] == '\0')) {
        return SG_EINVAL;
    }
    return replace_str(&o->server_name, name);
}

int sg_h2_conn_options_set_connect_timeout(sg_h2_conn_options *o, int64_t ns) {
    if (o == NULL || ns < 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    o->connect_timeout = ns;
    return 0;
}

/* A window or header-list bound: 0 (the default) or @min .. 2^31-1. */
static int set_bound(sg_h2_conn_options *o, uint32_t *field, uint32_t n, uint32_t min) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    if (n != 0 && (n < min || n > 0x7fffffffu)) {
        return SG_ERANGE;
    }
    *field = n;
    return 0;
}

int sg_h2_conn_options_set_stream_window(sg_h2_conn_options *o, uint32_t n) {
    return set_bound(o, o != NULL ? &o->stream_window : NULL, n, 65535);
}

int sg_h2_conn_options_set_conn_window(sg_h2_conn_options *o, uint32_t n) {
    return set_bound(o, o != NULL ? &o->conn_window : NULL, n, 65535);
}

int sg_h2_conn_options_set_max_header_list(sg_h2_conn_options *o, uint32_t n) {
    /* a head smaller than 128 bytes holds little beyond :status */
    return set_bound(o, o != NULL ? &o->max_header_list : NULL, n, 128);
}

int sg_h2_conn_options_set_clock(sg_h2_conn_options *o, const sg_clock *clock) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    o->has_clock = clock != NULL;
    if (clock != NULL) {
        o->clock = *clock;
    }
    return 0;
}

int sg_h2_conn_options_set_errbuf(sg_h2_conn_options *o, char *buf) {
    SG__SET(o, errbuf, buf);
}

int sg_h2_conn_options_set_dns_servers(sg_h2_conn_options *o, const char *servers) {
    if (o == NULL || (servers != NULL && servers[0] == '\0')) {
        return SG_EINVAL;
    }
    return replace_str(&o->dns_servers, servers);
}

int sg_h2_conn_options_set_connect_on_demand(sg_h2_conn_options *o, bool on) {
    SG__SET(o, connect_on_demand, on);
}

/* ---------------------------------------------------------- request */

uint64_t sg__h2_request_version(void) {
    static _Atomic uint64_t next = 1;
    return atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
}

/* Every setter, whatever it changes: a connection shares the copy it made
 * of a request only with operations made from the same version. */
static void touch(sg_h2_request *r) {
    if (r != NULL) {
        r->version = sg__h2_request_version();
    }
}

int sg_h2_request_new(sg_h2_request **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out));
    touch(*out);
    return *out != NULL ? 0 : SG_ENOMEM;
}

void sg_h2_request_free(sg_h2_request *r) {
    if (r == NULL) {
        return;
    }
    free(r->framing_block);
    free(r->method);
    free(r->path);
    free(r->authority);
    for (size_t i = 0; i < r->nheaders; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    free(r);
}

int sg_h2_request_set_framing(sg_h2_request *r, const sg_stream_config *cfg) {
    touch(r);
    if (r == NULL) {
        return SG_EINVAL;
    }
    sg_stream_config copy;
    void *block = NULL;
    if (sg__stream_config_copy(&copy, cfg, &block) != 0) {
        return SG_ENOMEM;
    }
    free(r->framing_block);
    r->framing = copy;
    r->framing_block = block;
    return 0;
}

int sg_h2_request_set_method(sg_h2_request *r, const char *method) {
    touch(r);
    if (r == NULL || (method != NULL && !name_ok(method))) {
        return SG_EINVAL; /* a method is a token (RFC 9110 §9.1) */
    }
    return replace_str(&r->method, method);
}

int sg_h2_request_set_path(sg_h2_request *r, const char *path) {
    touch(r);
    /* an absolute path, or "*" (OPTIONS), as :path must be (§8.3.1) */
    if (r == NULL || path == NULL || (path[0] != '/' && strcmp(path, "*") != 0) ||
        !visible_ok(path)) {
        return SG_EINVAL;
    }
    return replace_str(&r->path, path);
}

int sg_h2_request_set_authority(sg_h2_request *r, const char *authority) {
    touch(r);
    if (r == NULL ||
        (authority != NULL && (authority[0] == '\0' || !visible_ok(authority)))) {
        return SG_EINVAL;
    }
    return replace_str(&r->authority, authority);
}

int sg_h2_request_add_header(sg_h2_request *r, const char *name, const char *value) {
    touch(r);
    if (r == NULL || name == NULL || value == NULL || !name_ok(name) ||
        !value_ok(value) || sgx_h2_connection_specific(name, value)) {
        return SG_EINVAL;
    }
    if (r->nheaders == r->cap) {
        size_t cap = r->cap == 0 ? 8 : 2 * r->cap;
        sg__h2_field *h = realloc(r->headers, cap * sizeof(*h));
        if (h == NULL) {
            return SG_ENOMEM;
        }
        r->headers = h;
        r->cap = cap;
    }
    sg__h2_field f = {sg__h2_strdup(name), sg__h2_strdup(value)};
    if (f.name == NULL || f.value == NULL) {
        free(f.name);
        free(f.value);
        return SG_ENOMEM;
    }
    r->headers[r->nheaders++] = f;
    return 0;
}

int sg_h2_request_set_body(sg_h2_request *r, const void *body, size_t len) {
    touch(r);
    if (r == NULL || (body == NULL && len > 0)) {
        return SG_EINVAL;
    }
    void *copy = NULL;
    if (len > 0 && (copy = malloc(len)) == NULL) {
        return SG_ENOMEM;
    }
    if (len > 0) {
        memcpy(copy, body, len);
    }
    free(r->body);
    r->body = copy;
    r->body_len = len;
    return 0;
}

int sg_h2_request_set_deadline_header(sg_h2_request *r, bool on) {
    touch(r);
    SG__SET(r, deadline_header, on);
}

int sg_h2_request_set_grpc_timeout(sg_h2_request *r, bool on) {
    touch(r);
    SG__SET(r, grpc_timeout, on);
}

int sg_h2_request_set_drain_timeout(sg_h2_request *r, int64_t ns) {
    touch(r);
    if (r == NULL || ns < 0) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    r->drain_ns = ns;
    return 0;
}

int sg_h2_request_set_on_item(sg_h2_request *r, sg_h2_item_cb fn) {
    touch(r);
    if (r == NULL) {
        return SG_EINVAL;
    }
    r->cbs.on_item = fn;
    return 0;
}

int sg_h2_request_set_on_discard(sg_h2_request *r, sg_h2_discard_cb fn) {
    touch(r);
    if (r == NULL) {
        return SG_EINVAL;
    }
    r->cbs.on_discard = fn;
    return 0;
}

int sg_h2_request_set_on_attempt(sg_h2_request *r, sg_h2_attempt_cb fn) {
    touch(r);
    if (r == NULL) {
        return SG_EINVAL;
    }
    r->cbs.on_attempt = fn;
    return 0;
}

int sg_h2_request_set_on_done(sg_h2_request *r, sg_h2_done_cb fn) {
    touch(r);
    if (r == NULL) {
        return SG_EINVAL;
    }
    r->cbs.on_done = fn;
    return 0;
}

int sg_h2_request_set_on_bytes(sg_h2_request *r, sg_h2_bytes_cb fn) {
    touch(r);
    if (r == NULL) {
        return SG_EINVAL;
    }
    r->cbs.on_bytes = fn;
    return 0;
}
