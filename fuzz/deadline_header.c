/*
 * Fuzz target: the deadline headers (X-Deadline-Ms and grpc-timeout).
 *
 * Input: 8 bytes read as a duration, then a field value.  Deterministic.
 * Invariants (abort on violation):
 *   - a parsed value is in 0 .. SG_DURATION_MAX, and parsing is pure;
 *   - format -> parse round-trips: X-Deadline-Ms loses only the sub-ms
 *     part; grpc-timeout has 1..8 digits and one unit and loses less than
 *     one unit;
 *   - a parsed value written back and parsed again is unchanged (a fixed
 *     point after one trip);
 *   - an inbound deadline is never before now and never wraps.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/http.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
    if (!ok) {
        abort();
    }
}

static const int64_t units[6] = {1,         SG_US(1),   SG_MS(1),
                                 SG_SEC(1), SG_SEC(60), SG_SEC(3600)};

static int64_t unit_of(char c) {
    switch (c) {
    case 'n':
        return units[0];
    case 'u':
        return units[1];
    case 'm':
        return units[2];
    case 'S':
        return units[3];
    case 'M':
        return units[4];
    case 'H':
        return units[5];
    default:
        return 0;
    }
}

static void round_trip(int64_t ns) {
    char buf[SG_DEADLINE_VALUE_MAX];
    int n = sg_deadline_ms_format(ns, buf, sizeof(buf));
    check(n > 0);
    int64_t back = -1;
    check(sg_deadline_ms_parse(buf, (size_t)n, &back) == 0);
    const int64_t want = ns - ns % SG_MS(1);
    check(back == (want > SG_DURATION_MAX ? SG_DURATION_MAX : want));

    n = sg_grpc_timeout_format(ns, buf, sizeof(buf));
    check(n >= 2 && n <= 9);
    const int64_t unit = unit_of(buf[n - 1]);
    check(unit != 0);
    back = -1;
    check(sg_grpc_timeout_parse(buf, (size_t)n, &back) == 0);
    if (ns <= SG_DURATION_MAX) {
        check(back <= ns && ns - back < unit);
    } else {
        check(back == SG_DURATION_MAX);
    }
    /* Shorter buffers fail cleanly, never overflow. */
    check(sg_grpc_timeout_format(ns, buf, (size_t)n) == SG_ENOBUFS);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int64_t ns = 0;
    if (size >= 8) {
        uint64_t w = 0;
        for (int i = 7; i >= 0; i--) {
            w = (w << 8) | data[i];
        }
        ns = (int64_t)(w >> 1);
        data += 8;
        size -= 8;
    }
    round_trip(ns);
    round_trip(ns % (SG_DURATION_MAX + 1));

    const char *v = (const char *)data;
    int64_t a = -1;
    int64_t b = -1;
    int rc = sg_deadline_ms_parse(v, size, &a);
    check(sg_deadline_ms_parse(v, size, &b) == rc);
    if (rc == 0) {
        check(a >= 0 && a <= SG_DURATION_MAX && a == b);
        check(a % SG_MS(1) == 0);
        round_trip(a);
    } else {
        check(rc == SG_EMALFORMED);
    }

    rc = sg_grpc_timeout_parse(v, size, &a);
    check(sg_grpc_timeout_parse(v, size, &b) == rc);
    if (rc == 0) {
        check(a >= 0 && a <= SG_DURATION_MAX && a == b);
        check(size >= 2 && size <= 9);
        round_trip(a);
        int64_t dl = 0;
        const int64_t now = ns;
        check(sg_deadline_from_timeout(now, a, SG_MS(5), &dl) == 0);
        check(dl >= now);
        check(dl == SG_TIME_NEVER || dl - now <= a);
    } else {
        check(rc == SG_EMALFORMED);
    }
    return 0;
}
