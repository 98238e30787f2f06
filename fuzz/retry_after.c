/*
 * Fuzz target: Retry-After and HTTP-date parsing.
 *
 * Input: 8 bytes of wall clock (little-endian unix seconds, folded into a
 * sane range) then the field value.  Deterministic: nothing but the input
 * decides the run.  Invariants (abort on violation):
 *   - a parsed delay is in 0 .. SG_DURATION_MAX;
 *   - parsing is pure: the same input gives the same answer twice;
 *   - a parsed HTTP-date, written back as IMF-fixdate, parses to the same
 *     instant, and delta-seconds of the same delay parse to it too;
 *   - an all-digit value always parses;
 *   - retry-after-ms: a parsed delay is in 0 .. SG_DURATION_MAX, the same
 *     twice; an all-digit value parses, to that many milliseconds when it
 *     fits, and the whole milliseconds written back parse to the delay
 *     less its fraction.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <streamguard/http.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
    if (!ok) {
        abort();
    }
}

/* Howard Hinnant's civil_from_days. */
static void civil(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    *d = (unsigned)(doy - (153 * mp + 2) / 5 + 1);
    *m = (unsigned)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2 ? 1 : 0);
}

static int imf_fixdate(int64_t t, char *buf, size_t len) {
    static const char *const days[7] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
    static const char *const months[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    int64_t day = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    int64_t sec = t - day * 86400;
    int64_t y = 0;
    unsigned m = 0;
    unsigned d = 0;
    civil(day, &y, &m, &d);
    int64_t w = day % 7;
    if (w < 0) {
        w += 7;
    }
    return snprintf(buf, len, "%s, %02u %s %04lld %02lld:%02lld:%02lld GMT", days[w], d,
                    months[m - 1], (long long)y, (long long)(sec / 3600),
                    (long long)(sec / 60 % 60), (long long)(sec % 60));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int64_t wall = 0;
    if (size >= 8) {
        uint64_t w = 0;
        for (int i = 7; i >= 0; i--) {
            w = (w << 8) | data[i];
        }
        /* 0 (unknown) .. year 2200: both branches of the wall-clock rule. */
        wall = (int64_t)(w % UINT64_C(7258118400));
        data += 8;
        size -= 8;
    }
    const char *v = (const char *)data;

    int64_t delay = -1;
    int rc = sg_retry_after_parse(v, size, wall, &delay);
    int64_t delay2 = -1;
    check(sg_retry_after_parse(v, size, wall, &delay2) == rc);
    if (rc == 0) {
        check(delay >= 0 && delay <= SG_DURATION_MAX && delay == delay2);
    } else {
        check(rc == SG_EMALFORMED || rc == SG_EINVAL);
    }

    bool digits = size > 0;
    for (size_t i = 0; i < size; i++) {
        digits = digits && v[i] >= '0' && v[i] <= '9';
    }
    if (digits) {
        check(rc == 0);
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%lld", (long long)(delay / SG_SEC(1)));
        int64_t again = -1;
        check(sg_retry_after_parse(buf, (size_t)n, wall, &again) == 0 && again == delay);
    }

    /* retry-after-ms (OpenAI, Azure): milliseconds, a fraction allowed */
    int64_t ms = -1;
    rc = sg_retry_after_ms_parse(v, size, &ms);
    int64_t ms2 = -1;
    check(sg_retry_after_ms_parse(v, size, &ms2) == rc);
    if (rc == 0) {
        check(ms >= 0 && ms <= SG_DURATION_MAX && ms == ms2);
        if (ms < SG_DURATION_MAX) {
            char buf[32];
            int n = snprintf(buf, sizeof(buf), "%lld", (long long)(ms / SG_MS(1)));
            int64_t whole = -1;
            check(sg_retry_after_ms_parse(buf, (size_t)n, &whole) == 0 &&
                  whole == ms - ms % SG_MS(1));
        }
    } else {
        check(rc == SG_EMALFORMED && !digits);
    }

    int64_t t = 0;
    rc = sg_http_date_parse(v, size, wall, &t);
    if (rc == 0) {
        char buf[64];
        int n = imf_fixdate(t, buf, sizeof(buf));
        check(n == 29);
        int64_t back = 0;
        check(sg_http_date_parse(buf, (size_t)n, wall, &back) == 0 && back == t);
        if (wall > 0) {
            int64_t d = -1;
            check(sg_retry_after_parse(v, size, wall, &d) == 0);
            if (t <= wall) {
                check(d == 0);
            } else if (t - wall > SG_DURATION_MAX / SG_SEC(1)) {
                check(d == SG_DURATION_MAX); /* saturated, never wrapped */
            } else {
                check(d == SG_SEC(t - wall));
            }
        }
    } else {
        check(rc == SG_EMALFORMED || rc == SG_EINVAL);
    }
    return 0;
}
