/*
 * The exporter (otel.h): a bounded queue that sg__otel_submit fills
 * without waiting, and a thread of its own that takes batches from it,
 * encodes them (encode.c) and POSTs them to the collector with libcurl -
 * the OpenTelemetry SDKs' batch span processor, in C.
 *
 * What a caller pays: one short mutex hold to put a pointer in a ring
 * allocated up front (or, when the ring is full, to count the drop; the
 * span is then freed after the lock).  The thread holds the lock only to
 * take pointers out; encoding, the request and any retry run without it.
 * A collector that blackholes costs the thread its export timeout and the
 * callers the spans that no longer fit - nothing else.
 *
 * The request runs on a private curl multi handle so that sg_otel_free can
 * interrupt it (curl_multi_wakeup) once its own deadline - the export
 * timeout, from the call - has passed.
 */
#include "internal.h"

#include <curl/curl.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define NS_PER_S ((int64_t)1000000000)
#define POLL_MAX_MS 1000 /* a wait of curl's, at most: stop is checked between */

struct sg_otel {
    sg_otel_options *o;
    sg__otel_attr resource[3];
    CURLM *multi;
    CURL *easy;
    struct curl_slist *headers;
    int64_t retry_after_s; /* of the last response, or -1 */
    uint64_t rng;

    pthread_mutex_t mu;
    pthread_cond_t wake; /* the thread waits on it */
    pthread_cond_t done; /* flushers wait on it */
    sg__otel_span **ring;
    size_t cap, head, count;
    sg__otel_span **batch; /* the thread's, outside the lock */
    size_t batch_cap;
    uint64_t accepted; /* spans ever queued */
    uint64_t finished; /* of those, the thread is done with (in order) */
    uint64_t flush_to; /* export at once until finished reaches it */
    bool stop;
    atomic_int_fast64_t stop_deadline; /* INT64_MAX until sg_otel_free */
    sg_otel_stats st;
    pthread_t thread;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static struct timespec at(int64_t ns) {
    struct timespec ts = {(time_t)(ns / NS_PER_S), (long)(ns % NS_PER_S)};
    return ts;
}

static int64_t min64(int64_t a, int64_t b) {
    return a < b ? a : b;
}

/* Waits on @cond until @deadline (monotonic ns); the caller holds mu. */
static void wait_until(sg_otel *x, pthread_cond_t *cond, int64_t deadline) {
    if (deadline == INT64_MAX) {
        pthread_cond_wait(cond, &x->mu);
        return;
    }
    struct timespec ts = at(deadline);
    pthread_cond_timedwait(cond, &x->mu, &ts);
}

/* ------------------------------------------------------------ retry rules */

bool sg__otel_status_retryable(long status) {
    return status == 429 || status == 502 || status == 503 || status == 504;
}

int64_t sg__otel_backoff(unsigned retry, int64_t retry_after_s, uint64_t random) {
    if (retry_after_s >= 0) {
        return retry_after_s > 3600 ? 3600 * NS_PER_S : retry_after_s * NS_PER_S;
    }
    int64_t d = NS_PER_S;
    for (unsigned i = 0; i < retry && d < 5 * NS_PER_S; i++) {
        d += d / 2;
    }
    d = min64(d, 5 * NS_PER_S);
    /* jitter: 50 % .. 100 % of it */
    return d / 2 + (int64_t)(random % (uint64_t)(d / 2 + 1));
}

int64_t sg__otel_retry_after(const char *value, size_t len) {
    while (len > 0 && (value[0] == ' ' || value[0] == '\t')) {
        value++;
        len--;
    }
    while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t' ||
                       value[len - 1] == '\r' || value[len - 1] == '\n')) {
        len--;
    }
    if (len == 0 || len > 9) {
        return -1; /* an HTTP-date, or nothing: the computed backoff */
    }
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (value[i] < '0' || value[i] > '9') {
            return -1;
        }
        v = v * 10 + (value[i] - '0');
    }
    return v;
}

/* xorshift64*: jitter, nothing more */
static uint64_t next_random(sg_otel *x) {
    x->rng ^= x->rng >> 12;
    x->rng ^= x->rng << 25;
    x->rng ^= x->rng >> 27;
    return x->rng * 2685821657736338717ULL;
}

/* ------------------------------------------------------------ the request */

static size_t on_body(char *data, size_t size, size_t n, void *user_data) {
    (void)data;
    (void)user_data;
    return size * n; /* the response body is not read (partial success) */
}

static size_t on_header(char *data, size_t size, size_t n, void *user_data) {
    sg_otel *x = user_data;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && strncasecmp(data, name, sizeof name - 1) == 0) {
        x->retry_after_s =
            sg__otel_retry_after(data + sizeof name - 1, len - (sizeof name - 1));
    }
    return len;
}

/* POSTs @body; 0 and the status in *@status, or -1 (no answer by
 * @deadline or by sg_otel_free's deadline, or a network error). */
static int post(sg_otel *x, const uint8_t *body, size_t len, int64_t deadline,
                long *status) {
    int64_t left = min64(deadline, atomic_load(&x->stop_deadline)) - now_ns();
    if (left <= 0) {
        return -1;
    }
    x->retry_after_s = -1;
    curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, (const char *)body);
    curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(x->easy, CURLOPT_TIMEOUT_MS, (long)(left / 1000000 + 1));
    if (curl_multi_add_handle(x->multi, x->easy) != CURLM_OK) {
        return -1;
    }
    int rc = -1;
    for (;;) {
        int running = 0;
        if (curl_multi_perform(x->multi, &running) != CURLM_OK) {
            break;
        }
        if (running == 0) {
            int queued;
            CURLMsg *m = curl_multi_info_read(x->multi, &queued);
            if (m != NULL && m->msg == CURLMSG_DONE && m->data.result == CURLE_OK) {
                curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, status);
                rc = 0;
            }
            break;
        }
        left = min64(deadline, atomic_load(&x->stop_deadline)) - now_ns();
        if (left <= 0) {
            break;
        }
        int ms = (int)min64(left / 1000000 + 1, POLL_MAX_MS);
        if (curl_multi_poll(x->multi, NULL, 0, ms, NULL) != CURLM_OK) {
            break;
        }
    }
    curl_multi_remove_handle(x->multi, x->easy);
    return rc;
}

/* Exports the @n spans of x->batch within the export timeout: true when the
 * collector took them.  A 429, 502, 503 or 504 is asked again after a
 * backoff (or its Retry-After) that fits before the deadline. */
static bool export_batch(sg_otel *x, size_t n) {
    uint8_t *body;
    size_t len;
    size_t nres = sizeof x->resource / sizeof x->resource[0];
    if (sg__otel_encode(x->resource, nres, x->batch, n, &body, &len) != 0) {
        return false;
    }
    int64_t deadline = now_ns() + x->o->export_timeout_ns;
    bool ok = false;
    for (unsigned retry = 0;; retry++) {
        long status = 0;
        if (post(x, body, len, deadline, &status) != 0) {
            break;
        }
        if (status >= 200 && status < 300) {
            ok = true;
            break;
        }
        if (!sg__otel_status_retryable(status)) {
            break;
        }
        int64_t until =
            now_ns() + sg__otel_backoff(retry, x->retry_after_s, next_random(x));
        pthread_mutex_lock(&x->mu);
        while (until < min64(deadline, atomic_load(&x->stop_deadline)) &&
               now_ns() < until) {
            wait_until(x, &x->wake, until);
        }
        bool go = until < min64(deadline, atomic_load(&x->stop_deadline));
        if (go) {
            x->st.retries++;
        }
        pthread_mutex_unlock(&x->mu);
        if (!go) {
            break;
        }
    }
    free(body);
    return ok;
}

/* ------------------------------------------------------------ the thread */

/* Takes up to a batch from the ring into x->batch (mu held). */
static size_t take(sg_otel *x) {
    size_t n = x->count < x->batch_cap ? x->count : x->batch_cap;
    for (size_t i = 0; i < n; i++) {
        x->batch[i] = x->ring[x->head];
        x->ring[x->head] = NULL;
        x->head = (x->head + 1) % x->cap;
    }
    x->count -= n;
    return n;
}

static void *run(void *arg) {
    sg_otel *x = arg;
    pthread_mutex_lock(&x->mu);
    int64_t next = now_ns() + x->o->schedule_delay_ns;
    for (;;) {
        while (!x->stop && x->count < x->batch_cap && x->flush_to <= x->finished &&
               now_ns() < next) {
            wait_until(x, &x->wake, next);
        }
        if (x->count == 0) {
            if (x->stop) {
                break;
            }
            next = now_ns() + x->o->schedule_delay_ns;
            continue;
        }
        if (x->stop && now_ns() >= atomic_load(&x->stop_deadline)) {
            break;
        }
        size_t n = take(x);
        pthread_mutex_unlock(&x->mu);
        bool ok = export_batch(x, n);
        for (size_t i = 0; i < n; i++) {
            sg__otel_span_free(x->batch[i]);
            x->batch[i] = NULL;
        }
        pthread_mutex_lock(&x->mu);
        if (ok) {
            x->st.exported += n;
            x->st.exports++;
        } else {
            x->st.dropped_failed += n;
            x->st.failed_exports++;
        }
        x->finished += n;
        pthread_cond_broadcast(&x->done);
        if (x->count < x->batch_cap) {
            next = now_ns() + x->o->schedule_delay_ns;
        }
    }
    /* stopping, and out of time: what is left is dropped */
    while (x->count > 0) {
        size_t n = take(x);
        for (size_t i = 0; i < n; i++) {
            sg__otel_span_free(x->batch[i]);
        }
        x->st.dropped_shutdown += n;
        x->finished += n;
    }
    pthread_cond_broadcast(&x->done);
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* ------------------------------------------------------------ the API */

void sg__otel_submit(sg_otel *otel, sg__otel_span *span) {
    if (span == NULL) {
        return;
    }
    if (otel == NULL) {
        sg__otel_span_free(span);
        return;
    }
    pthread_mutex_lock(&otel->mu);
    otel->st.submitted++;
    if (otel->stop || otel->count == otel->cap) {
        otel->st.dropped_queue_full += otel->stop ? 0 : 1;
        otel->st.dropped_shutdown += otel->stop ? 1 : 0;
        pthread_mutex_unlock(&otel->mu);
        sg__otel_span_free(span);
        return;
    }
    otel->ring[(otel->head + otel->count) % otel->cap] = span;
    otel->count++;
    otel->accepted++;
    if (otel->count == otel->batch_cap) {
        pthread_cond_signal(&otel->wake);
    }
    pthread_mutex_unlock(&otel->mu);
}

static int curl_setup(sg_otel *x) {
    x->multi = curl_multi_init();
    x->easy = curl_easy_init();
    if (x->multi == NULL || x->easy == NULL) {
        return SG_ECURL;
    }
    struct curl_slist *h =
        curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    x->headers = h;
    /* no "Expect: 100-continue" round trip before a large batch */
    h = h != NULL ? curl_slist_append(x->headers, "Expect:") : NULL;
    for (size_t i = 0; h != NULL && i < x->o->nheaders; i++) {
        h = curl_slist_append(x->headers, x->o->headers[i]);
    }
    if (h == NULL) {
        return SG_ENOMEM;
    }
    CURL *e = x->easy;
    bool ok = curl_easy_setopt(e, CURLOPT_URL, x->o->endpoint) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_USERAGENT,
                               "streamguard-otel/" SG_OTEL_VERSION) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_HEADERDATA, x) == CURLE_OK &&
              curl_easy_setopt(e, CURLOPT_POST, 1L) == CURLE_OK;
    return ok ? 0 : SG_ECURL;
}

static void destroy(sg_otel *x) {
    if (x->easy != NULL) {
        curl_easy_cleanup(x->easy);
    }
    if (x->multi != NULL) {
        curl_multi_cleanup(x->multi);
    }
    curl_slist_free_all(x->headers);
    free(x->ring);
    free(x->batch);
    sg_otel_options_free(x->o);
    pthread_cond_destroy(&x->wake);
    pthread_cond_destroy(&x->done);
    pthread_mutex_destroy(&x->mu);
    free(x);
    curl_global_cleanup();
}

static int sync_init(sg_otel *x) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) {
        return SG_ESYS;
    }
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                     pthread_mutex_init(&x->mu, NULL) == 0 &&
                     pthread_cond_init(&x->wake, &ca) == 0 &&
                     pthread_cond_init(&x->done, &ca) == 0
                 ? 0
                 : SG_ESYS;
    pthread_condattr_destroy(&ca);
    return rc;
}

int sg_otel_new(sg_otel **out, const sg_otel_options *o) {
    if (out == NULL || o == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return SG_ECURL;
    }
    sg_otel *x = calloc(1, sizeof *x);
    if (x == NULL || sync_init(x) != 0) {
        free(x);
        curl_global_cleanup();
        return x == NULL ? SG_ENOMEM : SG_ESYS;
    }
    atomic_init(&x->stop_deadline, INT64_MAX);
    int rc = sg__otel_options_copy(o, &x->o);
    if (rc == 0) {
        x->cap = x->o->max_queue;
        x->batch_cap = x->o->max_batch < x->cap ? x->o->max_batch : x->cap;
        x->ring = calloc(x->cap, sizeof *x->ring);
        x->batch = calloc(x->batch_cap, sizeof *x->batch);
        rc = x->ring == NULL || x->batch == NULL ? SG_ENOMEM : curl_setup(x);
    }
    if (rc == 0) {
        x->resource[0] =
            (sg__otel_attr){"service.name", SG__OTEL_STRING, {.s = x->o->service_name}};
        x->resource[1] =
            (sg__otel_attr){"telemetry.sdk.name", SG__OTEL_STRING, {.s = "streamguard"}};
        x->resource[2] = (sg__otel_attr){
            "telemetry.sdk.version", SG__OTEL_STRING, {.s = SG_OTEL_VERSION}};
        x->rng = (uint64_t)now_ns() ^ (uint64_t)(uintptr_t)x ^ 0x9e3779b97f4a7c15ULL;
        x->st.size = sizeof x->st;
        rc = pthread_create(&x->thread, NULL, run, x) == 0 ? 0 : SG_ESYS;
    }
    if (rc != 0) {
        destroy(x);
        return rc;
    }
    *out = x;
    return 0;
}

int sg_otel_flush(sg_otel *otel, int64_t timeout_ns) {
    if (otel == NULL || timeout_ns < 0) {
        return SG_EINVAL;
    }
    int64_t deadline = now_ns() + min64(timeout_ns, INT64_MAX - now_ns());
    pthread_mutex_lock(&otel->mu);
    uint64_t target = otel->accepted;
    if (otel->flush_to < target) {
        otel->flush_to = target;
        pthread_cond_signal(&otel->wake);
    }
    int rc = 0;
    while (otel->finished < target) {
        if (now_ns() >= deadline) {
            rc = SG_ETIMEDOUT;
            break;
        }
        wait_until(otel, &otel->done, deadline);
    }
    pthread_mutex_unlock(&otel->mu);
    return rc;
}

void sg_otel_free(sg_otel *otel) {
    if (otel == NULL) {
        return;
    }
    pthread_mutex_lock(&otel->mu);
    otel->stop = true;
    atomic_store(&otel->stop_deadline, now_ns() + otel->o->export_timeout_ns);
    pthread_cond_broadcast(&otel->wake);
    pthread_mutex_unlock(&otel->mu);
    curl_multi_wakeup(otel->multi);
    pthread_join(otel->thread, NULL);
    destroy(otel);
}

int sg_otel_stats_get(const sg_otel *otel, sg_otel_stats *stats) {
    if (otel == NULL || stats == NULL || stats->size < offsetof(sg_otel_stats, queued)) {
        return SG_EINVAL;
    }
    sg_otel *x = (sg_otel *)(uintptr_t)otel; /* its lock, not its state */
    pthread_mutex_lock(&x->mu);
    sg_otel_stats now = x->st;
    now.queued = x->count;
    pthread_mutex_unlock(&x->mu);
    size_t n = stats->size < sizeof now ? stats->size : sizeof now;
    now.size = stats->size;
    memcpy(stats, &now, n);
    return 0;
}
