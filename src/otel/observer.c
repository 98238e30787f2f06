/*
 * The OpenTelemetry observer (<streamguard/otel_trace.h>): an operation's
 * policy callbacks become one span for the operation and one per attempt,
 * handed to the exporter as each ends (span.h).  It reads the operation
 * only through the public readers (<streamguard/op.h>), as any observer
 * may; the policy and the transports never name it.
 *
 * Ids: a trace id, the operation's span id and a 64-bit seed come from
 * a process-wide generator keyed by getrandom(2) (id64); attempt n's span
 * id is a bijective mix of the seed and n (splitmix64's finaliser), so no
 * state is kept per attempt and the traceparent stamped on a request
 * names the span the attempt's end builds.
 *
 * Times: the policy's instants are CLOCK_MONOTONIC; a span's are unix
 * nanoseconds, the monotonic instant moved by one offset read as the
 * operation begins (or set by hand: sg_otel_trace_set_clock).
 *
 * The spans themselves, their attributes and events: trace_spans.c.
 */
#include <streamguard/health.h>
#include <streamguard/otel_trace.h>

#include "otel/span.h"
#include "otel/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ------------------------------------------------------------------ ids */

static void put64(uint8_t *out, uint64_t v) {
    for (int i = 7; i >= 0; i--) {
        out[i] = (uint8_t)v;
        v >>= 8;
    }
}

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* splitmix64's finaliser: a bijection of 64-bit values. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Attempt @n's span id: splitmix64's finaliser of seed + n * golden - a
 * bijection of n for one seed, so the attempts of an operation never
 * share an id; never zero. */
void sg__otel_attempt_span_id(const sg_otel_trace *t, uint32_t n, uint8_t *out) {
    const uint64_t z = mix64(t->seed + (uint64_t)n * UINT64_C(0x9e3779b97f4a7c15));
    put64(out, z != 0 ? z : 1);
}

/* Ids: a counter in a process-wide state, keyed at first use (and in
 * a forked child again) from getrandom(2), each value mixed by
 * splitmix64's finaliser - a bijection, so no two draws of one key are
 * equal - so that an operation costs a few atomic additions, not a
 * system call.  A getrandom that fails (no entropy yet, a seccomp filter)
 * leaves the key to the clocks and an address: ids stay distinct, only
 * less unpredictable. */
static uint64_t id_key;
static _Atomic uint64_t id_next;
static pthread_once_t id_once = PTHREAD_ONCE_INIT;

static void id_rekey(void) {
    uint64_t k[2];
    size_t got = 0;
    while (got < sizeof(k)) {
        ssize_t r = getrandom((uint8_t *)k + got, sizeof(k) - got, GRND_NONBLOCK);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    if (got < sizeof(k)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        k[0] = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30));
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k[1] = mix64((uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&id_key);
    }
    id_key = k[0];
    atomic_store(&id_next, k[1]);
}

static void id_init(void) {
    id_rekey();
    (void)pthread_atfork(NULL, NULL, id_rekey); /* a child draws its own */
}

/* 64 random-looking bits, never 0. */
static uint64_t id64(void) {
    pthread_once(&id_once, id_init);
    uint64_t z =
        mix64((atomic_fetch_add(&id_next, 1) + id_key) * UINT64_C(0x9e3779b97f4a7c15));
    return z != 0 ? z : 1;
}

static const char hexd[] = "0123456789abcdef";

static char *hex(char *out, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        *out++ = hexd[p[i] >> 4];
        *out++ = hexd[p[i] & 15];
    }
    return out;
}

/* Lowercase hex only (W3C Trace Context §3.2.2). */
static bool unhex(const char *s, uint8_t *out, size_t n) {
    for (size_t i = 0; i < 2 * n; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) {
            return false;
        }
        if (i % 2 == 0) {
            out[i / 2] = (uint8_t)(v << 4);
        } else {
            out[i / 2] |= (uint8_t)v;
        }
    }
    return true;
}

/* "00-" trace "-" span "-" flags, NUL: 56 bytes */
#define TRACEPARENT_LEN 55

static void format_traceparent(char *out, const uint8_t *trace, const uint8_t *span,
                               uint8_t flags) {
    char *p = out;
    *p++ = '0';
    *p++ = '0';
    *p++ = '-';
    p = hex(p, trace, SG__OTEL_TRACE_ID_LEN);
    *p++ = '-';
    p = hex(p, span, SG__OTEL_SPAN_ID_LEN);
    *p++ = '-';
    p = hex(p, &flags, 1);
    *p = '\0';
}

/* ------------------------------------------------------------- the API */

static int on_intent(const sg_op *op, const sg_op_intent *intent, void *ud);
static int on_attempt_start(const sg_op *op, const sg_op_attempt *a, void *ud);
static int on_attempt_headers(const sg_op *op, const sg_op_attempt *a, sg_op_headers *h,
                              void *ud);
static int on_attempt_end(const sg_op *op, const sg_op_attempt *a, void *ud);
static int on_resolve(const sg_op *op, void *ud);

int sg_otel_trace_new(sg_otel_trace **out, sg_otel *otel) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    if (otel == NULL) {
        return SG_EINVAL;
    }
    sg_otel_trace *t = calloc(1, sizeof(*t));
    if (t == NULL || sg_op_observer_new(&t->obs) != 0) {
        free(t);
        return SG_ENOMEM;
    }
    (void)sg_op_observer_set_on_intent(t->obs, on_intent);
    (void)sg_op_observer_set_on_attempt_start(t->obs, on_attempt_start);
    (void)sg_op_observer_set_on_attempt_headers(t->obs, on_attempt_headers);
    (void)sg_op_observer_set_on_attempt_end(t->obs, on_attempt_end);
    (void)sg_op_observer_set_on_resolve(t->obs, on_resolve);
    t->otel = otel;
    *out = t;
    return 0;
}

void sg_otel_trace_free(sg_otel_trace *t) {
    if (t == NULL) {
        return;
    }
    sg_op_observer_free(t->obs);
    for (size_t i = 0; i < SG_OP_MAX_ENDPOINTS; i++) {
        free(t->endpoint_model[i]);
    }
    free(t);
}

const sg_op_observer *sg_otel_observer(const sg_otel_trace *t) {
    return t != NULL ? t->obs : NULL;
}

/* A tracestate value: printable ASCII and spaces (list-members and OWS). */
static bool tracestate_ok(const char *s) {
    for (; *s != '\0'; s++) {
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) {
            return false;
        }
    }
    return true;
}

int sg_otel_trace_set_parent(sg_otel_trace *t, const char *traceparent,
                             const char *tracestate) {
    if (t == NULL) {
        return SG_EINVAL;
    }
    if (traceparent == NULL) {
        t->has_parent = false;
        t->tracestate[0] = '\0';
        return 0;
    }
    /* version "-" trace-id "-" parent-id "-" flags; a version above 00
     * may add fields after a '-' (§3.2.4), version ff is invalid */
    size_t n = strlen(traceparent);
    uint8_t version, trace[SG__OTEL_TRACE_ID_LEN], span[SG__OTEL_SPAN_ID_LEN], flags;
    if (n < TRACEPARENT_LEN || !unhex(traceparent, &version, 1) || version == 0xff ||
        (version == 0 && n != TRACEPARENT_LEN) ||
        (n > TRACEPARENT_LEN && traceparent[TRACEPARENT_LEN] != '-') ||
        traceparent[2] != '-' || traceparent[35] != '-' || traceparent[52] != '-' ||
        !unhex(traceparent + 3, trace, sizeof(trace)) ||
        !unhex(traceparent + 36, span, sizeof(span)) ||
        !unhex(traceparent + 53, &flags, 1) || all_zero(trace, sizeof(trace)) ||
        all_zero(span, sizeof(span))) {
        return SG_EINVAL;
    }
    size_t sl = 0;
    if (tracestate != NULL) {
        if (!tracestate_ok(tracestate)) {
            return SG_EINVAL;
        }
        sl = strlen(tracestate);
        if (sl > SG_OTEL_TRACESTATE_MAX) {
            return SG_ERANGE;
        }
    }
    memcpy(t->parent_trace, trace, sizeof(trace));
    memcpy(t->parent_span, span, sizeof(span));
    t->parent_flags = flags;
    t->has_parent = true;
    memcpy(t->tracestate, sl > 0 ? tracestate : "", sl + 1);
    return 0;
}

/* @src (at most SG_OTEL_NAME_MAX bytes, checked) into @dst; NULL: "". */
static void copy_name(char *dst, const char *src) {
    const char *from = src != NULL ? src : "";
    memcpy(dst, from, strlen(from) + 1);
}

int sg_otel_trace_set_genai(sg_otel_trace *t, const char *provider, const char *operation,
                            const char *model) {
    if (t == NULL) {
        return SG_EINVAL;
    }
    const char *names[] = {provider, operation, model};
    for (size_t i = 0; i < 3; i++) {
        if (names[i] != NULL && strlen(names[i]) > SG_OTEL_NAME_MAX) {
            return SG_ERANGE;
        }
    }
    copy_name(t->provider, provider);
    copy_name(t->operation, operation);
    copy_name(t->model, model);
    return 0;
}

int sg_otel_trace_set_endpoint_model(sg_otel_trace *t, uint32_t endpoint,
                                     const char *model) {
    if (t == NULL) {
        return SG_EINVAL;
    }
    if (endpoint >= SG_OP_MAX_ENDPOINTS ||
        (model != NULL && strlen(model) > SG_OTEL_NAME_MAX)) {
        return SG_ERANGE;
    }
    char *copy = NULL;
    if (model != NULL && (copy = strdup(model)) == NULL) {
        return SG_ENOMEM;
    }
    free(t->endpoint_model[endpoint]);
    t->endpoint_model[endpoint] = copy;
    return 0;
}

int sg_otel_trace_set_clock(sg_otel_trace *t, int64_t mono_ns, int64_t unix_ns) {
    if (t == NULL || unix_ns < 0) {
        return SG_EINVAL;
    }
    t->offset = unix_ns - mono_ns;
    t->clock_set = true;
    return 0;
}

int sg_otel_trace_traceparent(const sg_otel_trace *t, char *buf, size_t len) {
    if (t == NULL || buf == NULL || !t->active) {
        return SG_EINVAL;
    }
    if (len < TRACEPARENT_LEN + 1) {
        return SG_ENOBUFS;
    }
    format_traceparent(buf, t->trace_id, t->op_span, t->sampled ? 1 : 0);
    return 0;
}

/* ------------------------------------------------------- the callbacks */

static int on_intent(const sg_op *op, const sg_op_intent *intent, void *ud) {
    (void)op;
    (void)intent;
    sg_otel_trace *t = ud;
    if (t->has_parent) {
        memcpy(t->trace_id, t->parent_trace, sizeof(t->trace_id));
        t->sampled = (t->parent_flags & 1) != 0;
    } else {
        put64(t->trace_id, id64());
        put64(t->trace_id + 8, id64());
        t->sampled = true;
    }
    put64(t->op_span, id64());
    t->seed = id64();
    if (!t->clock_set) {
        struct timespec m, w;
        clock_gettime(CLOCK_MONOTONIC, &m);
        clock_gettime(CLOCK_REALTIME, &w);
        t->offset = ((int64_t)w.tv_sec - (int64_t)m.tv_sec) * SG_SEC(1) +
                    ((int64_t)w.tv_nsec - (int64_t)m.tv_nsec);
    }
    t->active = true;
    t->probe_spanned = false;
    return 0;
}

/* The span of the caller's probe (sg_op_attempt_probe): its record is
 * made as the operation starts and never ends as an attempt does, so its
 * span goes once its record is final - as the operation's own first
 * attempt starts, or with the operation's span when none did. */
static int probe_span(sg_otel_trace *t, const sg_op *op) {
    if (t->probe_spanned || !t->active || !t->sampled || !sg_op_attempt_probe(op, 0)) {
        return 0;
    }
    t->probe_spanned = true;
    sg__otel_span *s = sg__otel_attempt_span(t, op, sg_op_attempt_at(op, 0));
    if (s == NULL) {
        return SG_ENOMEM;
    }
    sg__otel_submit(t->otel, s);
    return 0;
}

static int on_attempt_start(const sg_op *op, const sg_op_attempt *a, void *ud) {
    (void)a;
    /* the attempt's span id is its number's: nothing to keep */
    return probe_span(ud, op);
}

static int on_attempt_headers(const sg_op *op, const sg_op_attempt *a, sg_op_headers *h,
                              void *ud) {
    (void)op;
    sg_otel_trace *t = ud;
    if (!t->active) {
        return 0;
    }
    uint8_t span[SG__OTEL_SPAN_ID_LEN];
    sg__otel_attempt_span_id(t, a->n, span);
    char tp[TRACEPARENT_LEN + 1];
    format_traceparent(tp, t->trace_id, span, t->sampled ? 1 : 0);
    int rc = sg_op_headers_add(h, "traceparent", tp);
    if (rc == 0 && t->tracestate[0] != '\0') {
        rc = sg_op_headers_add(h, "tracestate", t->tracestate);
    }
    return rc;
}

static int on_attempt_end(const sg_op *op, const sg_op_attempt *a, void *ud) {
    sg_otel_trace *t = ud;
    if (!t->active || !t->sampled) {
        return 0;
    }
    sg__otel_span *s = sg__otel_attempt_span(t, op, a);
    if (s == NULL) {
        return SG_ENOMEM;
    }
    sg__otel_submit(t->otel, s);
    return 0;
}

static int on_resolve(const sg_op *op, void *ud) {
    sg_otel_trace *t = ud;
    if (!t->active || !t->sampled) {
        return 0;
    }
    int rc = probe_span(t, op);
    if (rc != 0) {
        return rc;
    }
    sg__otel_span *s = sg__otel_op_span(t, op);
    if (s == NULL) {
        return SG_ENOMEM;
    }
    sg__otel_submit(t->otel, s);
    return 0;
}
