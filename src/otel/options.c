/*
 * The exporter's options (otel.h): setters with the OpenTelemetry
 * specification's defaults, and the OTEL_* environment variables read
 * all at once or not at all - a variable that does not parse changes
 * nothing and says which it was, never what a header held.
 */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sg_otel_options_new(sg_otel_options **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_otel_options *o = calloc(1, sizeof *o);
    if (o == NULL) {
        return SG_ENOMEM;
    }
    o->endpoint = strdup(SG__OTEL_DEFAULT_ENDPOINT);
    o->service_name = strdup(SG__OTEL_DEFAULT_SERVICE);
    if (o->endpoint == NULL || o->service_name == NULL) {
        sg_otel_options_free(o);
        return SG_ENOMEM;
    }
    o->max_queue = 2048;
    o->max_batch = 512;
    o->schedule_delay_ns = 5000 * SG__OTEL_MS;
    o->export_timeout_ns = 10000 * SG__OTEL_MS;
    *out = o;
    return 0;
}

void sg_otel_options_free(sg_otel_options *o) {
    if (o == NULL) {
        return;
    }
    free(o->endpoint);
    for (size_t i = 0; i < o->nheaders; i++) {
        free(o->headers[i]);
    }
    free(o->service_name);
    free(o);
}

int sg__otel_options_copy(const sg_otel_options *src, sg_otel_options **dst) {
    sg_otel_options *o = calloc(1, sizeof *o);
    *dst = NULL;
    if (o == NULL) {
        return SG_ENOMEM;
    }
    *o = *src;
    o->endpoint = strdup(src->endpoint);
    o->service_name = strdup(src->service_name);
    bool ok = o->endpoint != NULL && o->service_name != NULL;
    for (size_t i = 0; i < src->nheaders; i++) {
        o->headers[i] = strdup(src->headers[i]);
        ok = ok && o->headers[i] != NULL;
    }
    if (!ok) {
        sg_otel_options_free(o);
        return SG_ENOMEM;
    }
    *dst = o;
    return 0;
}

/* Replaces *@slot by a copy of @value (checked by the caller). */
static int replace(char **slot, const char *value) {
    char *copy = strdup(value);
    if (copy == NULL) {
        return SG_ENOMEM;
    }
    free(*slot);
    *slot = copy;
    return 0;
}

static bool is_http_url(const char *url) {
    return strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0;
}

int sg_otel_options_set_endpoint(sg_otel_options *o, const char *url) {
    if (o == NULL || url == NULL) {
        return SG_EINVAL;
    }
    if (strlen(url) > SG_OTEL_MAX_VALUE) {
        return SG_ERANGE;
    }
    if (!is_http_url(url) || strpbrk(url, " \t\r\n") != NULL) {
        return SG_EINVAL;
    }
    return replace(&o->endpoint, url);
}

/* An RFC 9110 token character. */
static bool is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int sg_otel_options_add_header(sg_otel_options *o, const char *line) {
    if (o == NULL || line == NULL) {
        return SG_EINVAL;
    }
    size_t len = strlen(line);
    if (len > SG_OTEL_MAX_VALUE) {
        return SG_ERANGE;
    }
    size_t name = 0;
    while (is_tchar((unsigned char)line[name])) {
        name++;
    }
    if (name == 0 || line[name] != ':' || strpbrk(line, "\r\n") != NULL) {
        return SG_EINVAL;
    }
    if (o->nheaders == SG_OTEL_MAX_HEADERS) {
        return SG_ETOOMANY;
    }
    char *copy = strdup(line);
    if (copy == NULL) {
        return SG_ENOMEM;
    }
    o->headers[o->nheaders++] = copy;
    return 0;
}

int sg_otel_options_set_service_name(sg_otel_options *o, const char *name) {
    if (o == NULL || name == NULL || name[0] == '\0') {
        return SG_EINVAL;
    }
    if (strlen(name) > SG_OTEL_MAX_VALUE) {
        return SG_ERANGE;
    }
    return replace(&o->service_name, name);
}

int sg_otel_options_set_max_queue_size(sg_otel_options *o, size_t n) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    if (n < 1 || n > SG__OTEL_MAX_SPANS) {
        return SG_ERANGE;
    }
    o->max_queue = n;
    return 0;
}

int sg_otel_options_set_max_export_batch_size(sg_otel_options *o, size_t n) {
    if (o == NULL) {
        return SG_EINVAL;
    }
    if (n < 1 || n > SG__OTEL_MAX_SPANS) {
        return SG_ERANGE;
    }
    o->max_batch = n;
    return 0;
}

static int set_duration(int64_t *slot, int64_t ns) {
    if (ns < SG__OTEL_MS || ns > SG__OTEL_MAX_DURATION) {
        return SG_ERANGE;
    }
    *slot = ns;
    return 0;
}

int sg_otel_options_set_schedule_delay(sg_otel_options *o, int64_t ns) {
    return o == NULL ? SG_EINVAL : set_duration(&o->schedule_delay_ns, ns);
}

int sg_otel_options_set_export_timeout(sg_otel_options *o, int64_t ns) {
    return o == NULL ? SG_EINVAL : set_duration(&o->export_timeout_ns, ns);
}

/* ------------------------------------------------------------ environment */

struct env_err {
    char *buf;
    size_t len;
};

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(struct env_err *e, int code, const char *fmt, ...) {
    if (e->buf != NULL && e->len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->buf, e->len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* The first of @a and @b set and not empty (its name in *@which). */
static const char *env_either(const char *a, const char *b, const char **which) {
    const char *v = getenv(a);
    if (v != NULL && v[0] != '\0') {
        *which = a;
        return v;
    }
    v = b != NULL ? getenv(b) : NULL;
    if (v != NULL && v[0] != '\0') {
        *which = b;
        return v;
    }
    return NULL;
}

/* A whole non-negative decimal number, or -1. */
static int64_t parse_count(const char *s) {
    if (s[0] < '0' || s[0] > '9') {
        return -1;
    }
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0) {
        return -1;
    }
    return (int64_t)v;
}

static int env_number(struct env_err *e, const char *a, const char *b, int64_t *out,
                      bool *set) {
    const char *which = NULL;
    const char *v = env_either(a, b, &which);
    *set = false;
    if (v == NULL) {
        return 0;
    }
    *out = parse_count(v);
    if (*out < 0) {
        return fail(e, SG_EINVAL, "%s: not a whole number of %s", which,
                    strstr(which, "SIZE") != NULL ? "spans" : "milliseconds");
    }
    *set = true;
    return 0;
}

static int hex(int c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* Percent-decodes @s[0..@n) without its surrounding blanks into @out
 * (SG_OTEL_MAX_VALUE + 1 bytes); SG_EINVAL on a bad escape, a NUL, CR or
 * LF decoded, SG_ERANGE when too long. */
static int decode(const char *s, size_t n, char *out) {
    while (n > 0 && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        n--;
    }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
        n--;
    }
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            int hi = i + 2 < n ? hex(s[i + 1]) : -1;
            int lo = hi >= 0 ? hex(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                return SG_EINVAL;
            }
            c = hi * 16 + lo;
            i += 2;
        }
        if (c == 0 || c == '\r' || c == '\n') {
            return SG_EINVAL;
        }
        if (w == SG_OTEL_MAX_VALUE) {
            return SG_ERANGE;
        }
        out[w++] = (char)c;
    }
    out[w] = '\0';
    return 0;
}

/* Calls @member for each "key=value" of a W3C-baggage-like list, keys and
 * values percent-decoded; an empty member is skipped. */
typedef int (*member_fn)(struct env_err *e, const char *var, unsigned index,
                         const char *key, const char *value, void *user_data);

static int each_member(struct env_err *e, const char *var, const char *list,
                       member_fn member, void *user_data) {
    char *key = malloc(2 * (SG_OTEL_MAX_VALUE + 1));
    if (key == NULL) {
        return SG_ENOMEM;
    }
    char *value = key + SG_OTEL_MAX_VALUE + 1;
    int rc = 0;
    unsigned index = 0;
    for (const char *p = list; rc == 0 && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        index++;
        const char *eq = memchr(p, '=', n);
        if (strspn(p, " \t") >= n) {
            /* an empty member: skipped */
        } else if (eq == NULL) {
            rc = fail(e, SG_EINVAL, "%s: member %u is not key=value", var, index);
        } else if ((rc = decode(p, (size_t)(eq - p), key)) != 0 ||
                   (rc = decode(eq + 1, n - (size_t)(eq - p) - 1, value)) != 0) {
            rc = fail(e, rc, "%s: member %u: %s", var, index,
                      rc == SG_ERANGE ? "longer than SG_OTEL_MAX_VALUE bytes"
                                      : "bad percent-encoding, or a NUL, CR or LF");
        } else if (key[0] == '\0') {
            rc = fail(e, SG_EINVAL, "%s: member %u has an empty key", var, index);
        } else {
            rc = member(e, var, index, key, value, user_data);
        }
        p += n;
        if (*p == ',') {
            p++;
        }
    }
    free(key);
    return rc;
}

static int header_member(struct env_err *e, const char *var, unsigned index,
                         const char *key, const char *value, void *user_data) {
    sg_otel_options *o = user_data;
    size_t kn = strlen(key), vn = strlen(value);
    char *line = malloc(kn + vn + 3);
    if (line == NULL) {
        return SG_ENOMEM;
    }
    memcpy(line, key, kn);
    memcpy(line + kn, ": ", 2);
    memcpy(line + kn + 2, value, vn + 1);
    int rc = sg_otel_options_add_header(o, line);
    free(line);
    if (rc == SG_ETOOMANY) {
        return fail(e, rc, "%s: more than %d headers", var, SG_OTEL_MAX_HEADERS);
    }
    if (rc != 0) {
        return fail(e, rc, "%s: member %u: the key is not an HTTP header name%s", var,
                    index, rc == SG_ERANGE ? ", or the line is too long" : "");
    }
    return 0;
}

static int resource_member(struct env_err *e, const char *var, unsigned index,
                           const char *key, const char *value, void *user_data) {
    (void)index;
    if (strcmp(key, "service.name") != 0 || value[0] == '\0') {
        return 0;
    }
    int rc = sg_otel_options_set_service_name(user_data, value);
    return rc == 0 ? 0 : fail(e, rc, "%s: service.name could not be kept", var);
}

static int env_endpoint(struct env_err *e, sg_otel_options *o) {
    const char *var = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
    const char *v = getenv(var);
    char *url = NULL;
    if (v == NULL || v[0] == '\0') {
        var = "OTEL_EXPORTER_OTLP_ENDPOINT";
        v = getenv(var);
        if (v == NULL || v[0] == '\0') {
            return 0;
        }
        /* a base URL: the signal's path after it, one slash between */
        size_t n = strlen(v);
        while (n > 0 && v[n - 1] == '/') {
            n--;
        }
        url = malloc(n + sizeof "/v1/traces");
        if (url == NULL) {
            return SG_ENOMEM;
        }
        memcpy(url, v, n);
        memcpy(url + n, "/v1/traces", sizeof "/v1/traces");
        v = url;
    }
    int rc = sg_otel_options_set_endpoint(o, v);
    free(url);
    if (rc != 0 && rc != SG_ENOMEM) {
        return fail(e, rc, "%s: not an http:// or https:// URL%s", var,
                    rc == SG_ERANGE ? " (too long)" : "");
    }
    return rc;
}

static int env_read(struct env_err *e, sg_otel_options *o) {
    const char *which = NULL;
    const char *v = env_either("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                               "OTEL_EXPORTER_OTLP_PROTOCOL", &which);
    if (v != NULL && strcmp(v, "http/protobuf") != 0) {
        return fail(e, SG_EUNSUPPORTED, "%s: only http/protobuf is supported", which);
    }
    int rc = env_endpoint(e, o);
    if (rc != 0) {
        return rc;
    }
    v = env_either("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS",
                   &which);
    if (v != NULL && (rc = each_member(e, which, v, header_member, o)) != 0) {
        return rc;
    }
    v = getenv("OTEL_RESOURCE_ATTRIBUTES");
    if (v != NULL &&
        (rc = each_member(e, "OTEL_RESOURCE_ATTRIBUTES", v, resource_member, o)) != 0) {
        return rc;
    }
    v = getenv("OTEL_SERVICE_NAME");
    if (v != NULL && v[0] != '\0' && (rc = sg_otel_options_set_service_name(o, v)) != 0) {
        return fail(e, rc, "OTEL_SERVICE_NAME: %s",
                    rc == SG_ERANGE ? "too long" : "could not be kept");
    }
    static const struct {
        const char *a, *b;
        int kind; /* 0 timeout, 1 delay, 2 queue, 3 batch */
    } nums[] = {
        {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT", 0},
        {"OTEL_BSP_SCHEDULE_DELAY", NULL, 1},
        {"OTEL_BSP_MAX_QUEUE_SIZE", NULL, 2},
        {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE", NULL, 3},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        int64_t n;
        bool set;
        if ((rc = env_number(e, nums[i].a, nums[i].b, &n, &set)) != 0 || !set) {
            if (rc != 0) {
                return rc;
            }
            continue;
        }
        int64_t ms = n > SG__OTEL_MAX_DURATION / SG__OTEL_MS ? -1 : n * SG__OTEL_MS;
        size_t spans = n > (int64_t)SG__OTEL_MAX_SPANS ? 0 : (size_t)n;
        switch (nums[i].kind) {
        case 0:
            rc = sg_otel_options_set_export_timeout(o, ms);
            break;
        case 1:
            rc = sg_otel_options_set_schedule_delay(o, ms);
            break;
        case 2:
            rc = sg_otel_options_set_max_queue_size(o, spans);
            break;
        default:
            rc = sg_otel_options_set_max_export_batch_size(o, spans);
            break;
        }
        if (rc != 0) {
            const char *name = getenv(nums[i].a) != NULL && getenv(nums[i].a)[0] != '\0'
                                   ? nums[i].a
                                   : nums[i].b;
            return fail(e, rc, "%s: out of range (%s)", name,
                        nums[i].kind < 2 ? "1 .. 3600000 milliseconds"
                                         : "1 .. 1048576 spans");
        }
    }
    return 0;
}

int sg_otel_options_from_env(sg_otel_options *o, char *err, size_t errlen) {
    struct env_err e = {err, errlen};
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (o == NULL) {
        return fail(&e, SG_EINVAL, "no options");
    }
    /* read into a copy: all of it, or nothing */
    sg_otel_options *tmp;
    if (sg__otel_options_copy(o, &tmp) != 0) {
        return fail(&e, SG_ENOMEM, "out of memory");
    }
    int rc = env_read(&e, tmp);
    if (rc != 0) {
        if (rc == SG_ENOMEM) {
            fail(&e, rc, "out of memory");
        }
        sg_otel_options_free(tmp);
        return rc;
    }
    sg_otel_options old = *o;
    *o = *tmp;
    *tmp = old;
    sg_otel_options_free(tmp);
    return 0;
}
