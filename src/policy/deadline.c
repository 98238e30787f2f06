/*
 * Deadline propagation: only a duration crosses a process boundary.  Out:
 * the attempt's lease in whole milliseconds (X-Deadline-Ms) or as a gRPC
 * grpc-timeout.  In: either one back into a local monotonic deadline, less
 * an allowance for transit and skew.  Pure functions, easy to fuzz.
 */
#include "internal.h"

#include <string.h>

/* Writes the decimal digits of @v (>= 0) and @suffix into @buf. */
static int sg__format_u(uint64_t v, const char *suffix, char *buf, size_t len) {
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + (int)(v % 10u));
        v /= 10u;
    } while (v != 0);
    const size_t slen = strlen(suffix);
    if (len < n + slen + 1) {
        return SG_ENOBUFS;
    }
    for (size_t i = 0; i < n; i++) {
        buf[i] = tmp[n - 1 - i];
    }
    memcpy(buf + n, suffix, slen);
    buf[n + slen] = '\0';
    return (int)(n + slen);
}

int sg_deadline_ms_format(int64_t ns, char *buf, size_t len) {
    if (buf == NULL || ns < 0) {
        return SG_EINVAL;
    }
    /* Rounded down: telling the server it has more time than this client
     * will wait would make it work for nothing. */
    return sg__format_u((uint64_t)(ns / SG_MS(1)), "", buf, len);
}

/* Parses 1*DIGIT, at most @max_digits (0 = unbounded), into *@out with no
 * wrap; SG_EMALFORMED on anything else. */
static int sg__parse_digits(const char *p, size_t n, size_t max_digits, uint64_t *out) {
    if (n == 0 || (max_digits != 0 && n > max_digits)) {
        return SG_EMALFORMED;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return SG_EMALFORMED;
        }
        const uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10u) {
            return SG_EMALFORMED;
        }
        v = v * 10u + d;
    }
    *out = v;
    return 0;
}

/* @v units of @unit_ns, saturated at SG_DURATION_MAX. */
static int64_t sg__scale(uint64_t v, int64_t unit_ns) {
    const uint64_t max_units = (uint64_t)(SG_DURATION_MAX / unit_ns);
    if (v > max_units) {
        return SG_DURATION_MAX;
    }
    return (int64_t)v * unit_ns;
}

int sg_deadline_ms_parse(const char *value, size_t len, int64_t *ns) {
    if (value == NULL || ns == NULL) {
        return SG_EINVAL;
    }
    uint64_t v = 0;
    int rc = sg__parse_digits(value, len, 0, &v);
    if (rc != 0) {
        return rc;
    }
    *ns = sg__scale(v, SG_MS(1));
    return 0;
}

/* grpc-timeout units, finest first. */
static const struct {
    char unit;
    int64_t ns;
} sg__grpc_units[6] = {{'n', 1},         {'u', SG_US(1)},   {'m', SG_MS(1)},
                       {'S', SG_SEC(1)}, {'M', SG_SEC(60)}, {'H', SG_SEC(3600)}};

#define SG__GRPC_MAX_VALUE 99999999

int sg_grpc_timeout_format(int64_t ns, char *buf, size_t len) {
    if (buf == NULL || ns < 0) {
        return SG_EINVAL;
    }
    /* The finest unit whose value fits in 8 digits keeps the most
     * precision; rounding down never promises more than is left.  INT64_MAX
     * ns is about 2.56 million hours, so "H" always fits. */
    for (size_t i = 0; i < 6; i++) {
        const int64_t v = ns / sg__grpc_units[i].ns;
        if (v <= SG__GRPC_MAX_VALUE) {
            char suffix[2] = {sg__grpc_units[i].unit, '\0'};
            return sg__format_u((uint64_t)v, suffix, buf, len);
        }
    }
    return SG_EINVAL; /* unreachable: see above */
}

int sg_grpc_timeout_parse(const char *value, size_t len, int64_t *ns) {
    if (value == NULL || ns == NULL) {
        return SG_EINVAL;
    }
    /* TimeoutValue = 1*8 DIGIT; TimeoutUnit = H / M / S / m / u / n */
    if (len < 2) {
        return SG_EMALFORMED;
    }
    int64_t unit_ns = 0;
    for (size_t i = 0; i < 6; i++) {
        if (value[len - 1] == sg__grpc_units[i].unit) {
            unit_ns = sg__grpc_units[i].ns;
        }
    }
    if (unit_ns == 0) {
        return SG_EMALFORMED;
    }
    uint64_t v = 0;
    int rc = sg__parse_digits(value, len - 1, 8, &v);
    if (rc != 0) {
        return rc;
    }
    *ns = sg__scale(v, unit_ns);
    return 0;
}

int sg_deadline_from_timeout(int64_t now, int64_t timeout_ns, int64_t allowance_ns,
                             int64_t *deadline) {
    if (deadline == NULL || timeout_ns < 0 || allowance_ns < 0) {
        return SG_EINVAL;
    }
    /* An allowance larger than the timeout leaves nothing: the deadline is
     * now, so the work is refused rather than started late. */
    const int64_t left = timeout_ns > allowance_ns ? timeout_ns - allowance_ns : 0;
    *deadline = sg_time_add(now, left);
    return 0;
}
