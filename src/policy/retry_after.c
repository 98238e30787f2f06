/*
 * Retry-After (RFC 9110 §10.2.3) and HTTP-date (§5.6.7): delta-seconds or
 * one of three date formats.  Pure, allocation-free, strict: a value that is
 * not exactly one of the grammars is malformed, and the caller then falls
 * back to its own backoff (RFC 9110 tells recipients to ignore what they
 * cannot parse).
 */
#include "internal.h"

#include <string.h>

static const char *const sg__day_short[7] = {"Sun", "Mon", "Tue", "Wed",
                                             "Thu", "Fri", "Sat"};
static const char *const sg__day_long[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                            "Thursday", "Friday", "Saturday"};
static const char *const sg__month[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                          "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

int64_t sg__days_from_civil(int64_t y, unsigned m, unsigned d) {
    /* Howard Hinnant's days_from_civil: exact for the proleptic Gregorian
     * calendar, no tables, no loops. */
    y -= m <= 2 ? 1 : 0;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t mp = (int64_t)(m > 2 ? m - 3 : m + 9);
    const int64_t doy = (153 * mp + 2) / 5 + (int64_t)d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static bool sg__leap(int64_t y) {
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned sg__days_in_month(int64_t y, unsigned m) {
    static const unsigned days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && sg__leap(y)) {
        return 29;
    }
    return days[m - 1];
}

/* A tiny cursor over the input: every match advances or fails. */
typedef struct sg__cur {
    const char *p;
    size_t n;
} sg__cur;

static bool sg__lit(sg__cur *c, const char *lit) {
    size_t k = strlen(lit);
    if (c->n < k || memcmp(c->p, lit, k) != 0) {
        return false;
    }
    c->p += k;
    c->n -= k;
    return true;
}

static bool sg__digits(sg__cur *c, unsigned count, unsigned *out) {
    unsigned v = 0;
    if (c->n < count) {
        return false;
    }
    for (unsigned i = 0; i < count; i++) {
        if (c->p[i] < '0' || c->p[i] > '9') {
            return false;
        }
        v = v * 10u + (unsigned)(c->p[i] - '0');
    }
    c->p += count;
    c->n -= count;
    *out = v;
    return true;
}

/* Matches one name of @names exactly; returns its index or -1. */
static int sg__name(sg__cur *c, const char *const *names, int count) {
    for (int i = 0; i < count; i++) {
        sg__cur t = *c;
        if (sg__lit(&t, names[i])) {
            *c = t;
            return i;
        }
    }
    return -1;
}

/* time-of-day = hour ":" minute ":" second */
static bool sg__time(sg__cur *c, unsigned *h, unsigned *mi, unsigned *s) {
    return sg__digits(c, 2, h) && sg__lit(c, ":") && sg__digits(c, 2, mi) &&
           sg__lit(c, ":") && sg__digits(c, 2, s) && *h <= 23 && *mi <= 59 && *s <= 60;
}

static int sg__finish_date(int wday, int64_t y, unsigned mon, unsigned day, unsigned h,
                           unsigned mi, unsigned s, int64_t *unix_s) {
    if (y < 1 || y > 9999 || day < 1 || day > sg__days_in_month(y, mon)) {
        return SG_EMALFORMED;
    }
    const int64_t days = sg__days_from_civil(y, mon, day);
    /* 1970-01-01 was a Thursday (4). */
    int64_t w = (days + 4) % 7;
    if (w < 0) {
        w += 7;
    }
    if (w != wday) {
        /* A weekday that contradicts the date means a broken generator;
         * trusting either half would be a guess. */
        return SG_EMALFORMED;
    }
    *unix_s = days * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + (int64_t)s;
    return 0;
}

int sg_http_date_parse(const char *value, size_t len, int64_t wall_now_s,
                       int64_t *unix_s) {
    if (value == NULL || unix_s == NULL) {
        return SG_EINVAL;
    }
    unsigned day = 0;
    unsigned y4 = 0;
    unsigned h = 0;
    unsigned mi = 0;
    unsigned s = 0;
    sg__cur c = {value, len};
    sg__cur t = c;

    /* IMF-fixdate: day-name "," SP date1 SP time-of-day SP GMT */
    int wday = sg__name(&t, sg__day_short, 7);
    if (wday >= 0 && sg__lit(&t, ", ")) {
        int mon = -1;
        if (!sg__digits(&t, 2, &day) || !sg__lit(&t, " ") ||
            (mon = sg__name(&t, sg__month, 12)) < 0 || !sg__lit(&t, " ") ||
            !sg__digits(&t, 4, &y4) || !sg__lit(&t, " ") || !sg__time(&t, &h, &mi, &s) ||
            !sg__lit(&t, " GMT") || t.n != 0) {
            return SG_EMALFORMED;
        }
        return sg__finish_date(wday, (int64_t)y4, (unsigned)mon + 1, day, h, mi, s,
                               unix_s);
    }

    /* asctime-date: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP
     * time-of-day SP year */
    t = c;
    wday = sg__name(&t, sg__day_short, 7);
    if (wday >= 0 && sg__lit(&t, " ")) {
        int mon = sg__name(&t, sg__month, 12);
        if (mon < 0 || !sg__lit(&t, " ")) {
            return SG_EMALFORMED;
        }
        if (sg__lit(&t, " ")) {
            if (!sg__digits(&t, 1, &day)) {
                return SG_EMALFORMED;
            }
        } else if (!sg__digits(&t, 2, &day)) {
            return SG_EMALFORMED;
        }
        if (!sg__lit(&t, " ") || !sg__time(&t, &h, &mi, &s) || !sg__lit(&t, " ") ||
            !sg__digits(&t, 4, &y4) || t.n != 0) {
            return SG_EMALFORMED;
        }
        return sg__finish_date(wday, (int64_t)y4, (unsigned)mon + 1, day, h, mi, s,
                               unix_s);
    }

    /* rfc850-date: day-name-l "," SP date2 SP time-of-day SP GMT, where
     * date2 = day "-" month "-" 2DIGIT */
    t = c;
    wday = sg__name(&t, sg__day_long, 7);
    if (wday >= 0 && sg__lit(&t, ", ")) {
        unsigned y2 = 0;
        int mon = -1;
        if (!sg__digits(&t, 2, &day) || !sg__lit(&t, "-") ||
            (mon = sg__name(&t, sg__month, 12)) < 0 || !sg__lit(&t, "-") ||
            !sg__digits(&t, 2, &y2) || !sg__lit(&t, " ") || !sg__time(&t, &h, &mi, &s) ||
            !sg__lit(&t, " GMT") || t.n != 0) {
            return SG_EMALFORMED;
        }
        if (wall_now_s <= 0) {
            /* The century comes from the current year; without a wall
             * clock it cannot be chosen. */
            return SG_EINVAL;
        }
        /* The current UTC year, from the civil date of wall_now_s. */
        int64_t now_days = wall_now_s / 86400;
        int64_t lo = 1970;
        int64_t hi = 1970 + now_days / 365 + 1;
        while (lo < hi) {
            /* The last year whose 1 January is <= now_days. */
            int64_t mid = lo + (hi - lo + 1) / 2;
            if (sg__days_from_civil(mid, 1, 1) <= now_days) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        const int64_t cur = lo;
        /* RFC 9110 §5.6.7: a year that appears more than 50 years in the
         * future is the most recent past year with the same two digits. */
        int64_t year = cur - cur % 100 + (int64_t)y2;
        if (year - cur > 50) {
            year -= 100;
        }
        return sg__finish_date(wday, year, (unsigned)mon + 1, day, h, mi, s, unix_s);
    }
    return SG_EMALFORMED;
}

int sg_retry_after_parse(const char *value, size_t len, int64_t wall_now_s,
                         int64_t *delay_ns) {
    if (value == NULL || delay_ns == NULL) {
        return SG_EINVAL;
    }
    if (len > 0 && value[0] >= '0' && value[0] <= '9') {
        /* delta-seconds = 1*DIGIT; a huge value saturates (RFC 9111 §1.2.2
         * does the same for caches) and then exceeds any maximum. */
        const int64_t max_s = SG_DURATION_MAX / SG_SEC(1);
        int64_t v = 0;
        for (size_t i = 0; i < len; i++) {
            if (value[i] < '0' || value[i] > '9') {
                return SG_EMALFORMED;
            }
            if (v <= max_s) {
                v = v * 10 + (value[i] - '0');
            }
        }
        *delay_ns = v > max_s ? SG_DURATION_MAX : SG_SEC(v);
        return 0;
    }
    int64_t when = 0;
    /* Only RFC 850 dates need the wall clock to parse; every date needs it
     * to become a delay. */
    int rc = sg_http_date_parse(value, len, wall_now_s > 0 ? wall_now_s : 1, &when);
    if (rc != 0) {
        return rc;
    }
    if (wall_now_s <= 0) {
        return SG_EINVAL;
    }
    if (when <= wall_now_s) {
        *delay_ns = 0;
        return 0;
    }
    const int64_t d = when - wall_now_s;
    *delay_ns = d > SG_DURATION_MAX / SG_SEC(1) ? SG_DURATION_MAX : SG_SEC(d);
    return 0;
}

size_t sg__decimal(const char *v, size_t len, int64_t unit, int64_t *out) {
    /* whole units, saturating past the longest duration */
    const int64_t max_whole = SG_DURATION_MAX / unit;
    int64_t whole = 0;
    size_t i = 0;
    for (; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
        if (whole <= max_whole) {
            whole = whole * 10 + (v[i] - '0');
        }
    }
    if (i == 0) {
        return 0;
    }
    /* a fraction, to the nanosecond (the digits past it dropped) */
    int64_t frac = 0;
    if (i < len && v[i] == '.') {
        size_t first = ++i;
        int64_t u = unit;
        for (; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
            u /= 10;
            frac += u * (v[i] - '0');
        }
        if (i == first) {
            return 0;
        }
    }
    int64_t d = whole > max_whole ? SG_DURATION_MAX : sg_time_add(whole * unit, frac);
    *out = d > SG_DURATION_MAX ? SG_DURATION_MAX : d;
    return i;
}

int sg_retry_after_ms_parse(const char *value, size_t len, int64_t *delay_ns) {
    if (value == NULL || delay_ns == NULL) {
        return SG_EINVAL;
    }
    int64_t d = 0;
    if (len == 0 || sg__decimal(value, len, SG_MS(1), &d) != len) {
        return SG_EMALFORMED;
    }
    *delay_ns = d;
    return 0;
}

int sg__rfc3339_parse(const char *value, size_t len, int64_t *unix_ms) {
    unsigned y = 0, mon = 0, day = 0, h = 0, mi = 0, s = 0, oh = 0, om = 0;
    sg__cur c = {value, len};
    /* date-time = full-date "T" partial-time time-offset (RFC 3339 §5.6;
     * "t" and "z" allowed as its note says) */
    if (!sg__digits(&c, 4, &y) || !sg__lit(&c, "-") || !sg__digits(&c, 2, &mon) ||
        !sg__lit(&c, "-") || !sg__digits(&c, 2, &day) || c.n == 0 ||
        (c.p[0] != 'T' && c.p[0] != 't')) {
        return SG_EMALFORMED;
    }
    c.p++;
    c.n--;
    if (!sg__time(&c, &h, &mi, &s) || mon < 1 || mon > 12 || day < 1 ||
        day > sg__days_in_month(y, mon)) {
        return SG_EMALFORMED;
    }
    int64_t ms = 0;
    if (c.n > 0 && c.p[0] == '.') {
        /* a fraction of a second: its first three digits, milliseconds */
        size_t i = 1;
        int64_t unit = 100;
        for (; i < c.n && c.p[i] >= '0' && c.p[i] <= '9'; i++) {
            ms += unit * (c.p[i] - '0');
            unit /= 10;
        }
        if (i == 1) {
            return SG_EMALFORMED;
        }
        c.p += i;
        c.n -= i;
    }
    int sign = 0;
    if (c.n == 1 && (c.p[0] == 'Z' || c.p[0] == 'z')) {
        c.n = 0;
    } else if (c.n > 0 && (c.p[0] == '+' || c.p[0] == '-')) {
        sign = c.p[0] == '+' ? 1 : -1;
        c.p++;
        c.n--;
        if (!sg__digits(&c, 2, &oh) || !sg__lit(&c, ":") || !sg__digits(&c, 2, &om) ||
            oh > 23 || om > 59) {
            return SG_EMALFORMED;
        }
    } else {
        return SG_EMALFORMED;
    }
    if (c.n != 0) {
        return SG_EMALFORMED;
    }
    const int64_t secs = sg__days_from_civil(y, mon, day) * 86400 + (int64_t)h * 3600 +
                         (int64_t)mi * 60 + (int64_t)s -
                         sign * ((int64_t)oh * 3600 + (int64_t)om * 60);
    *unix_ms = secs * 1000 + ms;
    return 0;
}
