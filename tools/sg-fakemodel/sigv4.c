/*
 * AWS Signature Version 4 verification (see sigv4.h for what it covers).
 * Everything is built in one growable string per request: a few hundred
 * bytes, freed before returning; nothing here keeps state between calls.
 */
#include "sigv4.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ strings */

typedef struct {
    char *p;
    size_t len;
    size_t cap;
    int oom;
} str;

static void str_add(str *s, const char *d, size_t n) {
    if (s->oom) {
        return;
    }
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 512;
        while (cap < s->len + n + 1) {
            cap *= 2;
        }
        char *np = realloc(s->p, cap);
        if (np == NULL) {
            s->oom = 1;
            return;
        }
        s->p = np;
        s->cap = cap;
    }
    memcpy(s->p + s->len, d, n);
    s->len += n;
    s->p[s->len] = '\0';
}

static void str_cstr(str *s, const char *d) {
    str_add(s, d, strlen(d));
}

static void str_ch(str *s, char c) {
    str_add(s, &c, 1);
}

static char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? (char)(c + ('a' - 'A')) : c;
}

static int iequal(const char *a, size_t al, const char *b, size_t bl) {
    if (al != bl) {
        return 0;
    }
    for (size_t i = 0; i < al; i++) {
        if (lower(a[i]) != lower(b[i])) {
            return 0;
        }
    }
    return 1;
}

static int is_unreserved(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

static void add_escaped(str *s, unsigned char c) {
    static const char hex[] = "0123456789ABCDEF";
    char e[3] = {'%', hex[c >> 4], hex[c & 15]};
    str_add(s, e, 3);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = lower(c);
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

/* RFC 3986 form of a query name or value: decoded, then every byte outside
 * the unreserved set escaped in uppercase hex. */
static void add_query_part(str *s, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '%' && i + 2 < n && hexval(p[i + 1]) >= 0 && hexval(p[i + 2]) >= 0) {
            c = (unsigned char)(hexval(p[i + 1]) * 16 + hexval(p[i + 2]));
            i += 2;
        }
        if (is_unreserved(c)) {
            str_ch(s, (char)c);
        } else {
            add_escaped(s, c);
        }
    }
}

/* ------------------------------------------------------------ hashing */

static void to_hex(const unsigned char *d, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = '\0';
}

void sg_fm_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL);
    to_hex(md, 32, out);
}

static void hmac(const unsigned char *key, size_t klen, const char *msg, size_t mlen,
                 unsigned char out[32]) {
    unsigned int olen = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, mlen, out, &olen);
}

/* ------------------------------------------------------------ the header */

typedef struct {
    const char *akid, *date, *region, *service; /* the credential scope */
    size_t akid_len, date_len, region_len, service_len;
    const char *signed_headers; /* "host;x-amz-date" */
    size_t signed_len;
    const char *signature;
    size_t signature_len;
} auth;

/* Splits "AKID/DATE/REGION/SERVICE/aws4_request". */
static int parse_credential(const char *p, size_t n, auth *a) {
    const char *parts[5];
    size_t lens[5];
    size_t k = 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '/') {
            if (k == 5) {
                return -1;
            }
            parts[k] = p + start;
            lens[k] = i - start;
            k++;
            start = i + 1;
        }
    }
    if (k != 5 || lens[4] != 12 || memcmp(parts[4], "aws4_request", 12) != 0) {
        return -1;
    }
    for (size_t i = 0; i < 4; i++) {
        if (lens[i] == 0) {
            return -1;
        }
    }
    a->akid = parts[0];
    a->akid_len = lens[0];
    a->date = parts[1];
    a->date_len = lens[1];
    a->region = parts[2];
    a->region_len = lens[2];
    a->service = parts[3];
    a->service_len = lens[3];
    return 0;
}

/* "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..." */
static int parse_auth(const char *v, size_t n, auth *a) {
    static const char alg[] = "AWS4-HMAC-SHA256 ";
    if (n < sizeof(alg) - 1 || memcmp(v, alg, sizeof(alg) - 1) != 0) {
        return -1;
    }
    memset(a, 0, sizeof(*a));
    size_t i = sizeof(alg) - 1;
    int have_cred = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == ',')) {
            i++;
        }
        size_t s = i;
        while (i < n && v[i] != ',') {
            i++;
        }
        size_t e = i;
        while (e > s && v[e - 1] == ' ') {
            e--;
        }
        const char *f = v + s;
        size_t fl = e - s;
        if (fl > 11 && memcmp(f, "Credential=", 11) == 0) {
            if (parse_credential(f + 11, fl - 11, a) != 0) {
                return -1;
            }
            have_cred = 1;
        } else if (fl > 14 && memcmp(f, "SignedHeaders=", 14) == 0) {
            a->signed_headers = f + 14;
            a->signed_len = fl - 14;
        } else if (fl > 10 && memcmp(f, "Signature=", 10) == 0) {
            a->signature = f + 10;
            a->signature_len = fl - 10;
        } else if (fl > 0) {
            return -1;
        }
    }
    return have_cred && a->signed_headers != NULL && a->signature != NULL ? 0 : -1;
}

static const sg_fm_sigv4_header *find(const sg_fm_sigv4_request *r, const char *name,
                                      size_t len, size_t from) {
    for (size_t i = from; i < r->n_headers; i++) {
        if (iequal(r->headers[i].name, r->headers[i].name_len, name, len)) {
            return &r->headers[i];
        }
    }
    return NULL;
}

/* A header's value as canonical headers want it: trimmed, runs of spaces
 * (and tabs) inside collapsed to one space. */
static void add_trimmed(str *s, const char *v, size_t n) {
    size_t a = 0;
    while (a < n && (v[a] == ' ' || v[a] == '\t')) {
        a++;
    }
    while (n > a && (v[n - 1] == ' ' || v[n - 1] == '\t')) {
        n--;
    }
    int space = 0;
    for (size_t i = a; i < n; i++) {
        if (v[i] == ' ' || v[i] == '\t') {
            space = 1;
            continue;
        }
        if (space) {
            str_ch(s, ' ');
            space = 0;
        }
        str_ch(s, v[i]);
    }
}

/* The values of every header named @name, comma-joined; "host" and
 * ":authority" both name the request's authority, and each stands in for
 * the other when the request lacks it (HTTP/2 carries :authority, HTTP/1.1
 * Host; the AWS SDK for JavaScript signs ":authority" on both).  Returns -1
 * when there is none. */
static int add_header_values(str *s, const sg_fm_sigv4_request *r, const char *name,
                             size_t len) {
    int found = 0;
    for (const sg_fm_sigv4_header *h = find(r, name, len, 0); h != NULL;
         h = find(r, name, len, (size_t)(h - r->headers) + 1)) {
        if (found) {
            str_ch(s, ',');
        }
        add_trimmed(s, h->value, h->value_len);
        found = 1;
    }
    int host = iequal(name, len, "host", 4);
    if (!found && (host || iequal(name, len, ":authority", 10))) {
        const sg_fm_sigv4_header *h =
            host ? find(r, ":authority", 10, 0) : find(r, "host", 4, 0);
        if (h != NULL) {
            add_trimmed(s, h->value, h->value_len);
            found = 1;
        }
    }
    return found ? 0 : -1;
}

/* ------------------------------------------------------------ canonical form */

typedef struct {
    const char *name, *value;
    size_t name_len, value_len;
} qparam;

static int qparam_cmp(const void *a, const void *b) {
    const qparam *x = a;
    const qparam *y = b;
    size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    if (c != 0 || x->name_len != y->name_len) {
        return c != 0 ? c : (x->name_len < y->name_len ? -1 : 1);
    }
    n = x->value_len < y->value_len ? x->value_len : y->value_len;
    c = memcmp(x->value, y->value, n);
    if (c != 0 || x->value_len == y->value_len) {
        return c;
    }
    return x->value_len < y->value_len ? -1 : 1;
}

/* The query, each name and value in RFC 3986 form, sorted by name then
 * value (byte order), joined with '&'.  Returns -1 when out of memory. */
static int add_canonical_query(str *out, const char *q, size_t n) {
    if (q == NULL || n == 0) {
        return 0;
    }
    /* each parameter encoded into one scratch string, then sorted as views */
    str enc = {0};
    size_t count = 1;
    for (size_t i = 0; i < n; i++) {
        count += q[i] == '&';
    }
    qparam *ps = calloc(count, sizeof(*ps));
    size_t *offs = calloc(count * 4, sizeof(*offs));
    if (ps == NULL || offs == NULL) {
        free(ps);
        free(offs);
        return -1;
    }
    size_t k = 0;
    size_t s = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && q[i] != '&') {
            continue;
        }
        if (i > s) {
            const char *eq = memchr(q + s, '=', i - s);
            size_t nl = eq != NULL ? (size_t)(eq - (q + s)) : i - s;
            offs[4 * k] = enc.len;
            add_query_part(&enc, q + s, nl);
            offs[4 * k + 1] = enc.len;
            offs[4 * k + 2] = enc.len;
            if (eq != NULL) {
                add_query_part(&enc, eq + 1, (size_t)(q + i - eq - 1));
            }
            offs[4 * k + 3] = enc.len;
            k++;
        }
        s = i + 1;
    }
    int rc = enc.oom ? -1 : 0;
    /* only empty names and values ("=&&"): nothing was encoded, and the
     * views are empty ones of a string that exists */
    const char *base = enc.p != NULL ? enc.p : "";
    if (rc == 0) {
        for (size_t j = 0; j < k; j++) {
            ps[j].name = base + offs[4 * j];
            ps[j].name_len = offs[4 * j + 1] - offs[4 * j];
            ps[j].value = base + offs[4 * j + 2];
            ps[j].value_len = offs[4 * j + 3] - offs[4 * j + 2];
        }
        qsort(ps, k, sizeof(*ps), qparam_cmp);
        for (size_t j = 0; j < k; j++) {
            if (j > 0) {
                str_ch(out, '&');
            }
            str_add(out, ps[j].name, ps[j].name_len);
            str_ch(out, '=');
            str_add(out, ps[j].value, ps[j].value_len);
        }
    }
    free(enc.p);
    free(ps);
    free(offs);
    return rc;
}

/* The path, every byte outside the unreserved set (and '/') escaped: the
 * received (once-encoded) path encoded again, as AWS signs it for every
 * service but S3, whose path is signed as it is. */
static void add_canonical_path(str *out, const char *p, size_t n, int s3) {
    if (n == 0) {
        str_ch(out, '/');
        return;
    }
    if (s3) {
        str_add(out, p, n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (is_unreserved(c) || c == '/') {
            str_ch(out, (char)c);
        } else {
            add_escaped(out, c);
        }
    }
}

/* ------------------------------------------------------------ verification */

static int is_amz_date(const char *v, size_t n) {
    if (n != 16 || v[8] != 'T' || v[15] != 'Z') {
        return 0;
    }
    for (size_t i = 0; i < 15; i++) {
        if (i != 8 && (v[i] < '0' || v[i] > '9')) {
            return 0;
        }
    }
    return 1;
}

static int64_t digits(const char *v, int n) {
    int64_t x = 0;
    for (int i = 0; i < n; i++) {
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

/* YYYYMMDDTHHMMSSZ as unix time (days from the civil date, Howard
 * Hinnant's algorithm: no timegm, no time zone). */
static int64_t amz_date_unix(const char *v) {
    int64_t y = digits(v, 4);
    int64_t m = digits(v + 4, 2);
    int64_t d = digits(v + 6, 2);
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    return days * 86400 + digits(v + 9, 2) * 3600 + digits(v + 11, 2) * 60 +
           digits(v + 13, 2);
}

/* Is @name among the ';'-separated @list? */
static int in_list(const char *list, size_t n, const char *name) {
    size_t nl = strlen(name);
    size_t s = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || list[i] == ';') {
            if (i - s == nl && memcmp(list + s, name, nl) == 0) {
                return 1;
            }
            s = i + 1;
        }
    }
    return 0;
}

const char *sg_fm_sigv4_result_name(sg_fm_sigv4_result res) {
    switch (res) {
    case SG_FM_SIGV4_OK:
        return "ok";
    case SG_FM_SIGV4_MISSING:
        return "missing";
    case SG_FM_SIGV4_MALFORMED:
        return "malformed";
    case SG_FM_SIGV4_UNKNOWN_KEY:
        return "unknown_key";
    case SG_FM_SIGV4_SKEWED:
        return "skewed";
    case SG_FM_SIGV4_MISMATCH:
        return "mismatch";
    default:
        return "unknown";
    }
}

static sg_fm_sigv4_result refuse(sg_fm_sigv4_result res, char *why, size_t whylen,
                                 const char *msg) {
    snprintf(why, whylen, "%s", msg);
    return res;
}

/* The canonical request, without its last line (the payload hash). */
static int canonical_request(str *cr, const sg_fm_sigv4_request *r, const auth *a,
                             char *why, size_t whylen) {
    int s3 = a->service_len == 2 && memcmp(a->service, "s3", 2) == 0;
    str_cstr(cr, r->method);
    str_ch(cr, '\n');
    add_canonical_path(cr, r->path, r->path_len, s3);
    str_ch(cr, '\n');
    if (add_canonical_query(cr, r->query, r->query_len) != 0) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    str_ch(cr, '\n');
    size_t s = 0;
    for (size_t i = 0; i <= a->signed_len; i++) {
        if (i < a->signed_len && a->signed_headers[i] != ';') {
            continue;
        }
        const char *name = a->signed_headers + s;
        size_t nl = i - s;
        for (size_t j = 0; j < nl; j++) {
            if (name[j] != lower(name[j])) {
                snprintf(why, whylen, "SignedHeaders must be lowercase");
                return -1;
            }
        }
        str_add(cr, name, nl);
        str_ch(cr, ':');
        if (nl == 0 || add_header_values(cr, r, name, nl) != 0) {
            snprintf(why, whylen, "signed header '%.*s' is not in the request",
                     (int)(nl > 64 ? 64 : nl), name);
            return -1;
        }
        str_ch(cr, '\n');
        s = i + 1;
    }
    str_ch(cr, '\n');
    str_add(cr, a->signed_headers, a->signed_len);
    str_ch(cr, '\n');
    return 0;
}

sg_fm_sigv4_result sg_fm_sigv4_verify(const sg_fm_sigv4_request *r, const char *akid,
                                      const char *secret, int64_t now, char *why,
                                      size_t whylen) {
    const sg_fm_sigv4_header *h = find(r, "authorization", 13, 0);
    if (h == NULL) {
        return refuse(SG_FM_SIGV4_MISSING, why, whylen, "no Authorization header");
    }
    auth a;
    if (parse_auth(h->value, h->value_len, &a) != 0) {
        return refuse(SG_FM_SIGV4_MALFORMED, why, whylen,
                      "Authorization is not AWS4-HMAC-SHA256 Credential=..., "
                      "SignedHeaders=..., Signature=...");
    }
    if (a.akid_len != strlen(akid) || memcmp(a.akid, akid, a.akid_len) != 0) {
        return refuse(SG_FM_SIGV4_UNKNOWN_KEY, why, whylen, "unknown access key id");
    }
    const sg_fm_sigv4_header *d = find(r, "x-amz-date", 10, 0);
    if (d == NULL || !is_amz_date(d->value, d->value_len)) {
        return refuse(SG_FM_SIGV4_MALFORMED, why, whylen,
                      "no X-Amz-Date of the form YYYYMMDDTHHMMSSZ");
    }
    if (a.date_len != 8 || memcmp(a.date, d->value, 8) != 0) {
        return refuse(SG_FM_SIGV4_MALFORMED, why, whylen,
                      "the credential scope's date is not X-Amz-Date's");
    }
    if (!in_list(a.signed_headers, a.signed_len, "host") &&
        !in_list(a.signed_headers, a.signed_len, ":authority")) {
        return refuse(SG_FM_SIGV4_MALFORMED, why, whylen, "host is not signed");
    }
    if (now >= 0) {
        int64_t t = amz_date_unix(d->value);
        if (t > now + SG_FM_SIGV4_MAX_SKEW_S || t < now - SG_FM_SIGV4_MAX_SKEW_S) {
            return refuse(SG_FM_SIGV4_SKEWED, why, whylen,
                          "Signature expired: X-Amz-Date is more than 15 minutes from "
                          "the server's time");
        }
    }
    /* the payload: x-amz-content-sha256 when sent (it must be the body's,
     * unless UNSIGNED-PAYLOAD), else the body's hash */
    const char *payload = r->body_sha256_hex;
    size_t payload_len = 64;
    const sg_fm_sigv4_header *ph = find(r, "x-amz-content-sha256", 20, 0);
    if (ph != NULL) {
        int unsigned_payload =
            ph->value_len == 16 && memcmp(ph->value, "UNSIGNED-PAYLOAD", 16) == 0;
        if (!unsigned_payload && !iequal(ph->value, ph->value_len, payload, 64)) {
            return refuse(SG_FM_SIGV4_MISMATCH, why, whylen,
                          "x-amz-content-sha256 is not the SHA-256 of the body received");
        }
        payload = ph->value;
        payload_len = ph->value_len;
    }
    str cr = {0};
    sg_fm_sigv4_result res = SG_FM_SIGV4_OK;
    if (canonical_request(&cr, r, &a, why, whylen) != 0) {
        free(cr.p);
        return SG_FM_SIGV4_MALFORMED;
    }
    str_add(&cr, payload, payload_len);
    char cr_hash[65];
    sg_fm_sha256_hex(cr.p, cr.len, cr_hash);
    /* string to sign */
    str sts = {0};
    str_cstr(&sts, "AWS4-HMAC-SHA256\n");
    str_add(&sts, d->value, d->value_len);
    str_ch(&sts, '\n');
    str_add(&sts, a.date, a.date_len);
    str_ch(&sts, '/');
    str_add(&sts, a.region, a.region_len);
    str_ch(&sts, '/');
    str_add(&sts, a.service, a.service_len);
    str_cstr(&sts, "/aws4_request\n");
    str_cstr(&sts, cr_hash);
    /* signing key: HMAC chain from "AWS4" + secret */
    str k0 = {0};
    str_cstr(&k0, "AWS4");
    str_cstr(&k0, secret);
    if (cr.oom || sts.oom || k0.oom) {
        res = refuse(SG_FM_SIGV4_MALFORMED, why, whylen, "out of memory");
    } else {
        unsigned char k[32];
        unsigned char sig[32];
        char sig_hex[65];
        hmac((const unsigned char *)k0.p, k0.len, a.date, a.date_len, k);
        hmac(k, 32, a.region, a.region_len, k);
        hmac(k, 32, a.service, a.service_len, k);
        hmac(k, 32, "aws4_request", 12, k);
        hmac(k, 32, sts.p, sts.len, sig);
        to_hex(sig, 32, sig_hex);
        OPENSSL_cleanse(k, sizeof(k));
        if (a.signature_len != 64 || CRYPTO_memcmp(sig_hex, a.signature, 64) != 0) {
            res = refuse(SG_FM_SIGV4_MISMATCH, why, whylen,
                         "the request signature does not match the one calculated");
        }
    }
    OPENSSL_cleanse(k0.p, k0.cap);
    free(k0.p);
    free(cr.p);
    free(sts.p);
    return res;
}
