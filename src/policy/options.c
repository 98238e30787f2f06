/*
 * Operation options: one setter per option, validated where it is set, and
 * the resolved values (defaults applied) the state machine reads.  An
 * sg_op_options owns copies of its strings; every sg_op gets a copy of
 * the whole (sg__op_options_copy).
 */
#include "internal.h"
#include "core/internal.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ options */

/* Validates a token and copies it into @dst (room for max + NUL). */
static int sg__copy_token(char *dst, size_t max, const char *src) {
    if (src == NULL || src[0] == '\0') {
        return SG_EINVAL;
    }
    size_t n = strlen(src);
    for (size_t i = 0; i < n; i++) {
        if (!sg__tchar((unsigned char)src[i])) {
            return SG_EINVAL;
        }
    }
    if (n > max) {
        return SG_ERANGE;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

static int sg__check_duration(int64_t ns, bool zero_ok) {
    if (ns < 0 || (ns == 0 && !zero_ok)) {
        return SG_EINVAL;
    }
    if (ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    return 0;
}

/* ------------------------------------------------------------------ life */

/* A copy of @s, or NULL for NULL; *@failed is set when memory ran out. */
static char *dup_str(const char *s, bool *failed) {
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d == NULL) {
        *failed = true;
        return NULL;
    }
    return memcpy(d, s, n);
}

/* Copies of @n URLs (NULL for none); NULL with *@failed on no memory. */
static char **dup_urls(const char *const *urls, uint32_t n, bool *failed) {
    if (n == 0) {
        return NULL;
    }
    char **v = calloc(n, sizeof(*v));
    bool bad = v == NULL;
    for (uint32_t i = 0; !bad && i < n; i++) {
        v[i] = dup_str(urls[i], &bad);
    }
    if (bad) {
        for (uint32_t i = 0; v != NULL && i < n; i++) {
            free(v[i]);
        }
        free(v);
        *failed = true;
        return NULL;
    }
    return v;
}

static void free_urls(char **v, uint32_t n) {
    for (uint32_t i = 0; v != NULL && i < n; i++) {
        free(v[i]);
    }
    free(v);
}

void sg__op_options_clear(sg_op_options *o) {
    free(o->idempotency_key_);
    free(o->label_);
    free(o->deadline_header_);
    free(o->observers_more_);
    free(o->target_);
    free(o->probe_error_);
    free(o->prices_);
    free_urls(o->endpoints_, o->n_endpoints_);
    memset(o, 0, sizeof(*o));
}

int sg__op_options_copy(sg_op_options *dst, const sg_op_options *src) {
    *dst = *src;
    dst->refs_ = 0; /* a copy is never frozen unless sg__op_options_hold says */
    bool failed = false;
    dst->observers_more_ = NULL; /* its own, below: never src's */
    if (src->observers_more_ != NULL) {
        size_t size = (SG_OP_MAX_OBSERVERS - 1) * sizeof(sg__observer_ref);
        dst->observers_more_ = malloc(size);
        if (dst->observers_more_ != NULL) {
            memcpy(dst->observers_more_, src->observers_more_, size);
        } else {
            failed = true;
        }
    }
    dst->idempotency_key_ = dup_str(src->idempotency_key_, &failed);
    dst->label_ = dup_str(src->label_, &failed);
    dst->deadline_header_ = dup_str(src->deadline_header_, &failed);
    dst->target_ = dup_str(src->target_, &failed);
    dst->probe_error_ = dup_str(src->probe_error_, &failed);
    dst->endpoints_ =
        dup_urls((const char *const *)src->endpoints_, src->n_endpoints_, &failed);
    failed = sg__op_options_copy_prices(dst, src) != 0 || failed;
    if (failed) {
        sg__op_options_clear(dst);
        return SG_ENOMEM;
    }
    return 0;
}

const sg_op_options sg__op_options_defaults; /* zero: every option at its default */

/* Versions come from one counter for every object of the process: two
 * objects never have the same, even one made where another was freed. */
static uint64_t new_version(void) {
    static _Atomic uint64_t next = 1;
    return atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
}

bool sg__opt_touch(sg_op_options *o) {
    if (o == NULL || o->refs_ > 0) {
        return false; /* (a frozen copy never changes) */
    }
    o->version_ = new_version();
    return true;
}

uint64_t sg__op_options_version(const sg_op_options *o) {
    return o != NULL ? o->version_ : 0;
}

/* A frozen copy to write its count in: every one was malloc'd by
 * sg__op_options_hold, never defined const, so writing is defined. */
static sg_op_options *frozen_w(const sg_op_options *o) {
    return (sg_op_options *)(uintptr_t)o;
}

const sg_op_options *sg__op_options_hold(const sg_op_options *o) {
    if (sg__op_options_frozen(o)) {
        frozen_w(o)->refs_++;
        return o;
    }
    sg_op_options *f = malloc(sizeof(*f));
    if (f == NULL ||
        sg__op_options_copy(f, o != NULL ? o : &sg__op_options_defaults) != 0) {
        free(f);
        return NULL;
    }
    f->refs_ = 1;
    return f;
}

void sg__op_options_unhold(const sg_op_options *o) {
    if (o == NULL) {
        return;
    }
    sg_op_options *f = frozen_w(o);
    if (--f->refs_ == 0) {
        sg__op_options_clear(f);
        free(f);
    }
}

int sg__op_options_take(sg_op_options **out, const sg_op_options *src) {
    if (sg__op_options_frozen(src)) {
        *out = frozen_w(sg__op_options_hold(src));
        return 0;
    }
    return src != NULL ? sg_op_options_dup(out, src) : sg_op_options_new(out);
}

void sg__op_options_drop(sg_op_options *o) {
    if (sg__op_options_frozen(o)) {
        sg__op_options_unhold(o);
    } else {
        sg_op_options_free(o);
    }
}

int sg_op_options_new(sg_op_options **out) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = calloc(1, sizeof(**out)); /* zero: every option at its default */
    if (*out == NULL) {
        return SG_ENOMEM;
    }
    (*out)->version_ = new_version();
    return 0;
}

int sg_op_options_dup(sg_op_options **out, const sg_op_options *src) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    if (src == NULL) {
        return SG_EINVAL;
    }
    sg_op_options *o = malloc(sizeof(*o));
    if (o == NULL || sg__op_options_copy(o, src) != 0) {
        free(o);
        return SG_ENOMEM;
    }
    o->version_ = new_version(); /* its own: its setters change it alone */
    *out = o;
    return 0;
}

void sg_op_options_free(sg_op_options *o) {
    if (o != NULL) {
        sg__op_options_clear(o);
        free(o);
    }
}

/* ------------------------------------------------------------------ setters */

int sg_op_options_set_budget(sg_op_options *o, int64_t ns) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    int rc = sg__check_duration(ns, false);
    if (rc == 0) {
        o->budget_ns_ = ns;
        o->set_ |= SG__OPT_BUDGET;
    }
    return rc;
}

int sg_op_options_set_deadline(sg_op_options *o, int64_t deadline) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->deadline_ = deadline;
    o->set_ |= SG__OPT_DEADLINE;
    return 0;
}

int sg_op_options_set_started_at(sg_op_options *o, int64_t at) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->started_at_ = at;
    o->set_ |= SG__OPT_STARTED_AT;
    return 0;
}

int sg_op_options_set_probe(sg_op_options *o, int64_t ended_at, int64_t connect_ns,
                            bool timed_out, const char *error) {
    if (!sg__opt_touch(o) || connect_ns < 0) {
        return SG_EINVAL;
    }
    if (connect_ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    bool failed = false;
    char *copy = dup_str(error, &failed);
    if (failed) {
        return SG_ENOMEM;
    }
    free(o->probe_error_);
    o->probe_error_ = copy;
    o->probe_end_ = ended_at;
    o->probe_connect_ns_ = connect_ns;
    o->set_ |= SG__OPT_PROBE;
    if (timed_out) {
        o->set_ |= SG__OPT_PROBE_TIMED_OUT;
    } else {
        o->set_ &= ~(uint32_t)SG__OPT_PROBE_TIMED_OUT;
    }
    return 0;
}

int sg_op_options_set_floor(sg_op_options *o, int64_t ns) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    int rc = sg__check_duration(ns, true);
    if (rc == 0) {
        o->floor_ns_ = ns;
        o->set_ |= SG__OPT_FLOOR;
    }
    return rc;
}

static int sg__set_clock(sg_op_options *o, int64_t *field, int64_t ns) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    int rc = sg__check_duration(ns, true);
    if (rc == 0) {
        *field = ns;
    }
    return rc;
}

int sg_op_options_set_connect_timeout(sg_op_options *o, int64_t ns) {
    return sg__set_clock(o, o != NULL ? &o->connect_ns_ : NULL, ns);
}

int sg_op_options_set_attempt_timeout(sg_op_options *o, int64_t ns) {
    return sg__set_clock(o, o != NULL ? &o->attempt_ns_ : NULL, ns);
}

int sg_op_options_set_first_item_timeout(sg_op_options *o, int64_t ns) {
    return sg__set_clock(o, o != NULL ? &o->first_item_ns_ : NULL, ns);
}

int sg_op_options_set_idle_timeout(sg_op_options *o, int64_t ns) {
    return sg__set_clock(o, o != NULL ? &o->idle_ns_ : NULL, ns);
}

int sg_op_options_set_stream_timeout(sg_op_options *o, int64_t ns) {
    return sg__set_clock(o, o != NULL ? &o->stream_total_ns_ : NULL, ns);
}

int sg_op_options_set_max_items(sg_op_options *o, uint64_t n) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->max_items_ = n;
    return 0;
}

int sg_op_options_set_max_bytes(sg_op_options *o, uint64_t n) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->max_bytes_ = n;
    return 0;
}

int sg_op_options_set_max_attempts(sg_op_options *o, uint32_t n) {
    if (!sg__opt_touch(o) || n == 0) {
        return SG_EINVAL;
    }
    if (n > SG_OP_MAX_ATTEMPTS) {
        return SG_ERANGE;
    }
    o->max_attempts_ = n;
    o->set_ |= SG__OPT_MAX_ATTEMPTS;
    return 0;
}

int sg_op_options_set_backoff(sg_op_options *o, int64_t base_ns, int64_t cap_ns) {
    if (!sg__opt_touch(o) || base_ns <= 0 || cap_ns < base_ns) {
        return SG_EINVAL;
    }
    if (cap_ns > SG_DURATION_MAX) {
        return SG_ERANGE;
    }
    o->backoff_base_ns_ = base_ns;
    o->backoff_cap_ns_ = cap_ns;
    o->set_ |= SG__OPT_BACKOFF;
    return 0;
}

int sg_op_options_set_max_retry_after(sg_op_options *o, int64_t ns) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    int rc = sg__check_duration(ns, true);
    if (rc == 0) {
        o->max_retry_after_ns_ = ns;
        o->set_ |= SG__OPT_MAX_RETRY_AFTER;
    }
    return rc;
}

int sg_op_options_set_min_attempt(sg_op_options *o, int64_t ns) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    int rc = sg__check_duration(ns, true);
    if (rc == 0) {
        o->min_attempt_ns_ = ns;
        o->set_ |= SG__OPT_MIN_ATTEMPT;
    }
    return rc;
}

int sg_op_options_set_retryable_statuses(sg_op_options *o, const int *statuses,
                                         size_t n) {
    if (!sg__opt_touch(o) || (statuses == NULL && n > 0)) {
        return SG_EINVAL;
    }
    uint64_t bits[8] = {0};
    for (size_t i = 0; i < n; i++) {
        if (statuses[i] < 100 || statuses[i] > 599) {
            return SG_ERANGE;
        }
        const unsigned k = (unsigned)(statuses[i] - 100);
        bits[k / 64u] |= UINT64_C(1) << (k % 64u);
    }
    memcpy(o->statuses_, bits, sizeof(bits));
    o->set_ |= SG__OPT_STATUSES;
    return 0;
}

int sg_op_options_set_retry_rejections(sg_op_options *o, bool enable) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    if (enable) {
        o->set_ &= ~(uint32_t)SG__OPT_NO_REJECTION_RETRY;
    } else {
        o->set_ |= SG__OPT_NO_REJECTION_RETRY;
    }
    return 0;
}

int sg_op_options_set_method(sg_op_options *o, const char *method) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    return sg__copy_token(o->method_, SG_OP_METHOD_MAX, method);
}

int sg_op_options_set_idempotency_key(sg_op_options *o, const char *key) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    if (key == NULL) {
        free(o->idempotency_key_);
        o->idempotency_key_ = NULL;
        return 0;
    }
    size_t n = strlen(key);
    if (n == 0) {
        return SG_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (key[i] < 0x21 || key[i] > 0x7e) {
            return SG_EINVAL;
        }
    }
    if (n > SG_OP_IDEMPOTENCY_KEY_MAX) {
        return SG_ERANGE;
    }
    bool failed = false;
    char *copy = dup_str(key, &failed);
    if (failed) {
        return SG_ENOMEM;
    }
    free(o->idempotency_key_);
    o->idempotency_key_ = copy;
    return 0;
}

int sg_op_options_set_idempotent(sg_op_options *o, bool idempotent) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    if (idempotent) {
        o->set_ |= SG__OPT_IDEMPOTENT;
    } else {
        o->set_ &= ~(uint32_t)SG__OPT_IDEMPOTENT;
    }
    return 0;
}

int sg_op_options_set_random(sg_op_options *o, sg_random_fn fn, void *user_data) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->random_ = fn;
    o->random_ud_ = fn != NULL ? user_data : NULL;
    return 0;
}

int sg_op_options_set_seed(sg_op_options *o, uint64_t seed) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->seed_ = seed;
    o->set_ |= SG__OPT_SEED;
    return 0;
}

int sg_op_options_set_deadline_header(sg_op_options *o, const char *name) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    char token[SG_OP_HEADER_NAME_MAX + 1];
    int rc = sg__copy_token(token, SG_OP_HEADER_NAME_MAX, name);
    bool failed = false;
    char *copy = rc == 0 ? dup_str(token, &failed) : NULL;
    if (rc == 0 && failed) {
        rc = SG_ENOMEM;
    }
    if (rc == 0) {
        free(o->deadline_header_);
        o->deadline_header_ = copy;
    }
    return rc;
}

int sg_op_options_set_target(sg_op_options *o, const char *target) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    bool failed = false;
    char *copy = dup_str(target, &failed);
    if (failed) {
        return SG_ENOMEM;
    }
    free(o->target_);
    o->target_ = copy;
    return 0;
}

int sg_op_options_set_endpoints(sg_op_options *o, const char *const *urls, uint32_t n) {
    if (!sg__opt_touch(o) || (urls == NULL && n > 0)) {
        return SG_EINVAL;
    }
    if (n > SG_OP_MAX_ENDPOINTS) {
        return SG_ERANGE;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (urls[i] == NULL) {
            return SG_EINVAL;
        }
    }
    bool failed = false;
    char **copy = dup_urls(urls, n, &failed);
    if (failed) {
        return SG_ENOMEM;
    }
    free_urls(o->endpoints_, o->n_endpoints_);
    o->endpoints_ = copy;
    o->n_endpoints_ = n;
    return 0;
}

int sg_op_options_set_hedging(sg_op_options *o, int64_t after_ns, uint32_t max_hedges) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    if (after_ns < 0 || after_ns > SG_DURATION_MAX ||
        (after_ns > 0 && (max_hedges == 0 || max_hedges > SG_OP_MAX_HEDGES))) {
        return SG_ERANGE;
    }
    o->hedge_after_ns_ = after_ns;
    o->max_hedges_ = after_ns > 0 ? max_hedges : 0;
    return 0;
}

int sg_op_options_set_retry_budget(sg_op_options *o, sg_retry_budget *b) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    o->retry_budget_ = b;
    return 0;
}

const char *sg_op_options_method(const sg_op_options *o) {
    return o != NULL ? sg__opt_method(o) : NULL;
}

const char *sg_op_options_target(const sg_op_options *o) {
    return o != NULL ? o->target_ : NULL;
}

int64_t sg__op_options_hedge_after(const sg_op_options *o) {
    return o != NULL ? o->hedge_after_ns_ : 0;
}

uint32_t sg__op_options_endpoint_count(const sg_op_options *o) {
    return o != NULL ? o->n_endpoints_ : 0;
}

sg_retry_budget *sg__op_options_retry_budget(const sg_op_options *o) {
    return o != NULL ? o->retry_budget_ : NULL;
}

bool sg__op_options_has_observer(const sg_op_options *o) {
    return o != NULL && o->n_observers_ > 0;
}

static bool records_async(const sg_op_observer *obs) {
    return obs->start_intent != NULL && obs->poll_intent != NULL &&
           obs->abandon_intent != NULL;
}

const sg__observer_ref *sg__op_async_observer(const sg_op_options *o) {
    for (uint32_t i = 0; i < o->n_observers_; i++) {
        if (records_async(sg__observer_at(o, i)->obs)) {
            return sg__observer_at(o, i);
        }
    }
    return NULL;
}

int sg_op_options_set_observer(sg_op_options *o, const sg_op_observer *obs,
                               void *user_data) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    (void)sg_op_options_clear_observers(o);
    return obs != NULL ? sg_op_options_add_observer(o, obs, user_data) : 0;
}

int sg_op_options_add_observer(sg_op_options *o, const sg_op_observer *obs,
                               void *user_data) {
    if (!sg__opt_touch(o) || obs == NULL ||
        (records_async(obs) && sg__op_async_observer(o) != NULL)) {
        return SG_EINVAL;
    }
    if (o->n_observers_ == SG_OP_MAX_OBSERVERS) {
        return SG_ERANGE;
    }
    if (o->n_observers_ == 1 && o->observers_more_ == NULL &&
        (o->observers_more_ =
             calloc(SG_OP_MAX_OBSERVERS - 1, sizeof(sg__observer_ref))) == NULL) {
        return SG_ENOMEM;
    }
    sg__observer_ref *slot =
        o->n_observers_ == 0 ? &o->observer_ : &o->observers_more_[o->n_observers_ - 1];
    *slot = (sg__observer_ref){obs, user_data};
    o->n_observers_++;
    return 0;
}

int sg_op_options_clear_observers(sg_op_options *o) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    free(o->observers_more_);
    o->observers_more_ = NULL;
    o->observer_ = (sg__observer_ref){NULL, NULL};
    o->n_observers_ = 0;
    return 0;
}

int sg_op_options_set_label(sg_op_options *o, const char *label) {
    if (!sg__opt_touch(o)) {
        return SG_EINVAL;
    }
    size_t n = label != NULL ? strlen(label) : 0;
    if (n > SG_OP_LABEL_MAX) {
        return SG_ERANGE;
    }
    bool failed = false;
    char *copy = n > 0 ? dup_str(label, &failed) : NULL; /* "": none */
    if (failed) {
        return SG_ENOMEM;
    }
    free(o->label_);
    o->label_ = copy;
    return 0;
}

/* Resolved values. */

int64_t sg__opt_budget(const sg_op_options *o) {
    return (o->set_ & SG__OPT_BUDGET) ? o->budget_ns_ : SG__DEFAULT_BUDGET_NS;
}

int64_t sg__opt_floor(const sg_op_options *o) {
    return (o->set_ & SG__OPT_FLOOR) ? o->floor_ns_ : 0;
}

int64_t sg__opt_backoff_base(const sg_op_options *o) {
    return (o->set_ & SG__OPT_BACKOFF) ? o->backoff_base_ns_
                                       : SG__DEFAULT_BACKOFF_BASE_NS;
}

int64_t sg__opt_backoff_cap(const sg_op_options *o) {
    return (o->set_ & SG__OPT_BACKOFF) ? o->backoff_cap_ns_ : SG__DEFAULT_BACKOFF_CAP_NS;
}

int64_t sg__opt_max_retry_after(const sg_op_options *o) {
    return (o->set_ & SG__OPT_MAX_RETRY_AFTER) ? o->max_retry_after_ns_
                                               : SG__DEFAULT_MAX_RETRY_AFTER_NS;
}

int64_t sg__opt_min_attempt(const sg_op_options *o) {
    int64_t m =
        (o->set_ & SG__OPT_MIN_ATTEMPT) ? o->min_attempt_ns_ : SG__DEFAULT_MIN_ATTEMPT_NS;
    /* An attempt timeout below the minimum must not refuse every attempt,
     * nor may a budget smaller than the minimum refuse its first one. */
    if (o->attempt_ns_ > 0 && o->attempt_ns_ < m) {
        m = o->attempt_ns_;
    }
    const int64_t leasable = sg__opt_budget(o) - sg__opt_floor(o);
    if (leasable > 0 && leasable < m) {
        m = leasable;
    }
    return m;
}

uint32_t sg__opt_max_attempts(const sg_op_options *o) {
    return (o->set_ & SG__OPT_MAX_ATTEMPTS) ? o->max_attempts_ : SG__DEFAULT_MAX_ATTEMPTS;
}

const char *sg__opt_method(const sg_op_options *o) {
    return o->method_[0] != '\0' ? o->method_ : SG__DEFAULT_METHOD;
}

const char *sg__opt_deadline_header(const sg_op_options *o) {
    return o->deadline_header_ != NULL ? o->deadline_header_
                                       : SG__DEFAULT_DEADLINE_HEADER;
}

bool sg__opt_status_retryable(const sg_op_options *o, int status) {
    if (status < 100 || status > 599) {
        return false;
    }
    if (!(o->set_ & SG__OPT_STATUSES)) {
        switch (status) {
        case 408:
        case 429:
        case 500:
        case 502:
        case 503:
        case 504:
        case 529: /* Anthropic's overloaded_error: an overloaded server */
            return true;
        default:
            return false;
        }
    }
    const unsigned k = (unsigned)(status - 100);
    return (o->statuses_[k / 64u] >> (k % 64u)) & 1u;
}

bool sg_op_options_repeatable(const sg_op_options *o) {
    return o != NULL && (sg__method_idempotent(sg__opt_method(o)) ||
                         o->idempotency_key_ != NULL || (o->set_ & SG__OPT_IDEMPOTENT));
}

bool sg__method_idempotent(const char *method) {
    /* RFC 9110 §9.2.2; method names are case-sensitive (§9.1). */
    static const char *const idempotent[] = {"GET",   "HEAD", "OPTIONS",
                                             "TRACE", "PUT",  "DELETE"};
    for (size_t i = 0; i < sizeof(idempotent) / sizeof(idempotent[0]); i++) {
        if (strcmp(method, idempotent[i]) == 0) {
            return true;
        }
    }
    return false;
}
