/*
 * The easy handle: one guarded operation in a few calls, above the libcurl
 * transport, as curl_easy_perform runs above a private multi.  It keeps
 * copies of the caller's values and, at each perform, makes one easy
 * handle and one sg_curl_op from them and runs it with sg_curl_perform (a
 * managed multi of its own).  Everything it does goes through the public
 * API of <streamguard/curl.h> and <streamguard/policy.h>, so the transport
 * may change beneath it without touching it.
 */
#include <streamguard/curl.h>
#include <streamguard/easy.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sg_easy {
    sg_op_options *policy;      /* budget, clocks, attempts, key */
    sg_curl_options *opts;      /* framing (the profile's), CA file, callbacks */
    char *url;                  /* NULL: none yet */
    char *body;                 /* NULL: a GET */
    size_t body_len;            /* bytes of body */
    struct curl_slist *headers; /* the caller's lines, in order */
    sg_item_cb on_item;
    void *on_item_ud;
    sg_easy_discard_cb on_discard;
    void *on_discard_ud;
    int failed;      /* the first setter that failed: perform refuses */
    bool performing; /* inside sg_curl_perform: the callbacks run */
    CURL *curl;      /* the last perform's handle, NULL none */
    sg_curl_op *op;  /* the last perform's operation, NULL: no outcome */
    char error[256]; /* sg_easy_error */
};

int sg_easy_new(sg_easy **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_easy *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return SG_ENOMEM;
    }
    /* libcurl counts its inits: each handle holds one, so the caller never
     * has to know libcurl is there, and one that uses it too is unharmed. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        free(e);
        return SG_ECURL;
    }
    int rv = sg_op_options_new(&e->policy);
    if (rv == 0) {
        rv = sg_curl_options_new(&e->opts);
    }
    if (rv != 0) {
        sg_easy_free(e); /* its global init undone there */
        return rv;
    }
    *out = e;
    return 0;
}

/* Forgets the last perform's operation and handle (the transport's first:
 * it takes its callbacks off the handle). */
static void drop_results(sg_easy *e) {
    sg_curl_op_free(e->op);
    e->op = NULL;
    if (e->curl != NULL) {
        curl_easy_cleanup(e->curl);
        e->curl = NULL;
    }
    e->error[0] = '\0';
}

void sg_easy_free(sg_easy *e) {
    if (e == NULL) {
        return;
    }
    drop_results(e);
    curl_slist_free_all(e->headers);
    free(e->url);
    free(e->body);
    sg_op_options_free(e->policy);
    sg_curl_options_free(e->opts);
    free(e);
    curl_global_cleanup();
}

/* ------------------------------------------------------------ setters */

/* Every setter ends here: the first failure is kept, so that perform
 * refuses a configuration the caller did not get. */
static int settled(sg_easy *e, int rv) {
    if (rv != 0 && e->failed == 0) {
        e->failed = rv;
    }
    return rv;
}

/* The guard at the top of every setter: SG_EINVAL for NULL, SG_ESTATE
 * (remembered) from inside a callback; 0 to go on. */
static int may_set(sg_easy *e) {
    if (e == NULL) {
        return SG_EINVAL;
    }
    return e->performing ? settled(e, SG_ESTATE) : 0;
}

/* Replaces *@slot with a copy of @s (NULL: none). */
static int set_string(sg_easy *e, char **slot, const char *s) {
    char *copy = NULL;
    if (s != NULL && (copy = strdup(s)) == NULL) {
        return settled(e, SG_ENOMEM);
    }
    free(*slot);
    *slot = copy;
    return 0;
}

/* An absolute URL libcurl parses, whose scheme is http or https. */
static int check_url(const char *url) {
    CURLU *u = curl_url();
    if (u == NULL) {
        return SG_ENOMEM;
    }
    char *scheme = NULL;
    int rv = SG_EINVAL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0)) {
        rv = 0;
    }
    curl_free(scheme);
    curl_url_cleanup(u);
    return rv;
}

int sg_easy_set_url(sg_easy *e, const char *url) {
    int rv = may_set(e);
    if (rv != 0) {
        return rv;
    }
    if (url == NULL) {
        return settled(e, SG_EINVAL);
    }
    rv = check_url(url);
    return rv != 0 ? settled(e, rv) : set_string(e, &e->url, url);
}

int sg_easy_set_profile(sg_easy *e, const char *name) {
    int rv = may_set(e);
    if (rv != 0) {
        return rv;
    }
    sg_stream_config cfg;
    sg_stream_config_init(&cfg);
    if (name != NULL && sg_profile_framing(name, &cfg) != 0) {
        return settled(e, SG_EINVAL); /* a typo must not stream unguarded */
    }
    return settled(e, sg_curl_options_set_framing(e->opts, &cfg));
}

int sg_easy_set_body(sg_easy *e, const void *body, size_t len) {
    int rv = may_set(e);
    if (rv != 0) {
        return rv;
    }
    if (body == NULL && len > 0) {
        return settled(e, SG_EINVAL);
    }
    char *copy = NULL;
    if (body != NULL) {
        if ((copy = malloc(len > 0 ? len : 1)) == NULL) {
            return settled(e, SG_ENOMEM);
        }
        memcpy(copy, body, len);
    }
    free(e->body);
    e->body = copy;
    e->body_len = len;
    return 0;
}

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* "Name: value": a token, a colon, then a field value (RFC 9110 5.5: no
 * control character but tab - so no CR or LF to end the line early). */
static bool header_line_ok(const char *line) {
    size_t name = 0;
    while (is_tchar((unsigned char)line[name])) {
        name++;
    }
    if (name == 0 || line[name] != ':') {
        return false;
    }
    for (const unsigned char *p = (const unsigned char *)line + name + 1; *p != '\0';
         p++) {
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
            return false;
        }
    }
    return true;
}

int sg_easy_add_header(sg_easy *e, const char *line) {
    int rv = may_set(e);
    if (rv != 0) {
        return rv;
    }
    if (line == NULL || !header_line_ok(line)) {
        return settled(e, SG_EINVAL);
    }
    struct curl_slist *l = curl_slist_append(e->headers, line);
    if (l == NULL) {
        return settled(e, SG_ENOMEM);
    }
    e->headers = l;
    return 0;
}

int sg_easy_set_ca_file(sg_easy *e, const char *path) {
    int rv = may_set(e);
    if (rv != 0) {
        return rv;
    }
    if (path != NULL && path[0] == '\0') {
        return settled(e, SG_EINVAL);
    }
    return settled(e, sg_curl_options_set_cafile(e->opts, path));
}

/* The policy's setters validate; a failure leaves the option as it was. */
#define SG__EASY_POLICY_SETTER(name, policy_fn, type)              \
    int name(sg_easy *e, type v) {                                 \
        int rv = may_set(e);                                       \
        return rv != 0 ? rv : settled(e, policy_fn(e->policy, v)); \
    }

SG__EASY_POLICY_SETTER(sg_easy_set_budget, sg_op_options_set_budget, int64_t)
SG__EASY_POLICY_SETTER(sg_easy_set_connect_timeout, sg_op_options_set_connect_timeout,
                       int64_t)
SG__EASY_POLICY_SETTER(sg_easy_set_first_item_timeout,
                       sg_op_options_set_first_item_timeout, int64_t)
SG__EASY_POLICY_SETTER(sg_easy_set_idle_timeout, sg_op_options_set_idle_timeout, int64_t)
SG__EASY_POLICY_SETTER(sg_easy_set_stream_timeout, sg_op_options_set_stream_timeout,
                       int64_t)
SG__EASY_POLICY_SETTER(sg_easy_set_attempts, sg_op_options_set_max_attempts, uint32_t)
SG__EASY_POLICY_SETTER(sg_easy_set_idempotency_key, sg_op_options_set_idempotency_key,
                       const char *)

int sg_easy_set_on_item(sg_easy *e, sg_item_cb fn, void *user_data) {
    int rv = may_set(e);
    if (rv == 0) {
        e->on_item = fn;
        e->on_item_ud = user_data;
    }
    return rv;
}

int sg_easy_set_on_discard(sg_easy *e, sg_easy_discard_cb fn, void *user_data) {
    int rv = may_set(e);
    if (rv == 0) {
        e->on_discard = fn;
        e->on_discard_ud = user_data;
    }
    return rv;
}

/* ------------------------------------------------------------ perform */

static int on_item(sg_curl_op *op, const sg_item *item, void *user_data) {
    sg_easy *e = user_data;
    (void)op;
    return e->on_item(item, e->on_item_ud);
}

static void on_discard(sg_curl_op *op, uint32_t attempt, sg_outcome outcome,
                       void *user_data) {
    sg_easy *e = user_data;
    (void)op;
    e->on_discard(attempt, outcome, e->on_discard_ud);
}

/* The libcurl handle of one perform: the URL, http(s) only, the body. */
static int make_handle(sg_easy *e, CURL **out) {
    CURL *c = curl_easy_init();
    if (c == NULL) {
        return SG_ECURL;
    }
    bool ok = curl_easy_setopt(c, CURLOPT_URL, e->url) == CURLE_OK &&
              curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
    if (ok && e->body != NULL) {
        /* borrowed from @e, which outlives the handle */
        ok = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)e->body_len) ==
                 CURLE_OK &&
             curl_easy_setopt(c, CURLOPT_POSTFIELDS, e->body) == CURLE_OK;
    }
    if (!ok) {
        curl_easy_cleanup(c);
        return SG_ECURL;
    }
    *out = c;
    return 0;
}

/* The words for a clock that ended attempt @a, with what it was granted;
 * NULL for any other outcome. */
static const char *clock_words(sg_outcome outcome, const sg_op_attempt *a, int64_t *ns) {
    switch (outcome) {
    case SG_OUTCOME_FIRST_ITEM_TIMEOUT:
        *ns = a->first_item_timeout_ns;
        return "no first item in";
    case SG_OUTCOME_IDLE_TIMEOUT:
        *ns = a->idle_timeout_ns;
        return "no next item in";
    case SG_OUTCOME_STREAM_TIMEOUT:
        *ns = a->stream_timeout_ns;
        return "stream not over in";
    case SG_OUTCOME_ATTEMPT_TIMEOUT:
        *ns = a->attempt_timeout_ns;
        return "attempt not over in";
    default:
        return NULL;
    }
}

/* sg_easy_error's words for the operation's end. */
static void describe(sg_easy *e) {
    const sg_op *pol = sg_curl_op_policy(e->op);
    uint32_t n = sg_op_attempt_count(pol);
    const sg_op_attempt *last = n > 0 ? sg_op_attempt_at(pol, n - 1) : NULL;
    sg_outcome outcome = sg_curl_op_outcome(e->op);
    const char *said = sg_curl_op_error(e->op);
    switch (outcome) {
    case SG_OUTCOME_OK:
        e->error[0] = '\0';
        break;
    case SG_OUTCOME_HTTP_ERROR:
        snprintf(e->error, sizeof(e->error), "HTTP %d",
                 last != NULL ? last->http_status : 0);
        break;
    case SG_OUTCOME_PROVIDER_ERROR:
        snprintf(e->error, sizeof(e->error), "%s: %s",
                 last != NULL ? last->provider_error_type : "error", said);
        break;
    default: {
        int64_t ns = 0;
        const char *clock = last != NULL ? clock_words(outcome, last, &ns) : NULL;
        if (clock != NULL && strcmp(said, sg_outcome_name(outcome)) == 0) {
            snprintf(e->error, sizeof(e->error), "%s %lld ms", clock,
                     (long long)(ns / SG_MS(1)));
        } else {
            snprintf(e->error, sizeof(e->error), "%s",
                     said[0] != '\0' ? said : sg_outcome_name(outcome));
        }
        break;
    }
    }
}

int sg_easy_perform(sg_easy *e) {
    if (e == NULL) {
        return SG_EINVAL;
    }
    if (e->performing) {
        return SG_ESTATE; /* its results are in use: touch nothing */
    }
    drop_results(e);
    if (e->failed != 0) {
        return e->failed;
    }
    if (e->url == NULL) {
        return SG_EINVAL;
    }
    /* The method the policy judges retries by is the one on the wire. */
    int rv = sg_op_options_set_method(e->policy, e->body != NULL ? "POST" : "GET");
    if (rv == 0) {
        rv = sg_curl_options_set_headers(e->opts, e->headers);
    }
    if (rv == 0) {
        rv = sg_curl_options_set_on_item(e->opts, e->on_item != NULL ? on_item : NULL);
    }
    if (rv == 0) {
        rv = sg_curl_options_set_on_discard(e->opts,
                                            e->on_discard != NULL ? on_discard : NULL);
    }
    if (rv == 0) {
        rv = make_handle(e, &e->curl);
    }
    if (rv == 0) {
        rv = sg_curl_op_new(&e->op, e->curl, e->policy, e->opts, e);
    }
    if (rv == 0) {
        e->performing = true;
        rv = sg_curl_perform(e->op);
        e->performing = false;
    }
    if (rv != 0) {
        drop_results(e); /* no outcome: none to mistake for one */
        return rv;
    }
    describe(e);
    return 0;
}

/* ------------------------------------------------------------ results */

sg_outcome sg_easy_outcome(const sg_easy *e) {
    return e != NULL && e->op != NULL ? sg_curl_op_outcome(e->op) : SG_OUTCOME_NONE;
}

const char *sg_easy_error(const sg_easy *e) {
    return e != NULL ? e->error : "";
}

const char *sg_easy_error_body(const sg_easy *e, size_t *len) {
    if (e == NULL || e->op == NULL) {
        if (len != NULL) {
            *len = 0;
        }
        return NULL;
    }
    return sg_curl_op_error_body(e->op, len);
}

int sg_easy_report(const sg_easy *e, char *buf, size_t len, size_t *needed) {
    if (e == NULL || (buf == NULL && len > 0)) {
        return SG_EINVAL;
    }
    if (e->op == NULL) {
        return SG_ESTATE;
    }
    return sg_curl_op_report(e->op, buf, len, needed);
}

const sg_op *sg_easy_op(const sg_easy *e) {
    return e != NULL && e->op != NULL ? sg_curl_op_policy(e->op) : NULL;
}
