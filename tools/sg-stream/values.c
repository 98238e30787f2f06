/*
 * values.c - the values that options take.
 *
 * Durations ("250ms", "2s", "1.5s", "1m", "1h", "500us"; a bare number is
 * seconds), counts (digits only, bounded), and the body of -d @FILE (or
 * @- for stdin).  Each parser is strict and says only yes or no: the
 * caller, which knows the option, words the usage error (usage_error).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg_stream.h"

/* Every bad argument in one shape, "PROG: ... (see --help)", and the usage
 * exit status (shared with sg-proxy, which names its own prog). */
int usage_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one line whatever the argument held: control bytes are shown as '?' */
    for (char *p = msg; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = '?';
        }
    }
    fprintf(stderr, "%s: %s (see --help)\n", prog, msg);
    return EXIT_USAGE;
}

/* "250ms", "2s", "1.5s", "1m", "1h", "500us"; a bare number is seconds. */
int parse_duration(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    /* decimal digits with at most one point, then the unit: no sign, no
     * exponent, no hex, no inf or nan (which strtod would take) */
    size_t digits = strspn(s, "0123456789");
    size_t len = digits;
    if (s[len] == '.') {
        size_t frac = strspn(s + len + 1, "0123456789");
        len += 1 + frac;
        digits += frac;
    }
    if (digits == 0 || (s[len] != '\0' && (s[len] < 'a' || s[len] > 'z'))) {
        return -1;
    }
    double v = strtod(s, &end);
    if (end != s + len) {
        return -1;
    }
    if (errno != 0 || end == s || !(v > 0)) {
        return -1;
    }
    double scale;
    if (strcmp(end, "ms") == 0) {
        scale = 1e6;
    } else if (strcmp(end, "s") == 0 || *end == '\0') {
        scale = 1e9;
    } else if (strcmp(end, "m") == 0) {
        scale = 60e9;
    } else if (strcmp(end, "h") == 0) {
        scale = 3600e9;
    } else if (strcmp(end, "us") == 0) {
        scale = 1e3;
    } else {
        return -1;
    }
    double ns = v * scale;
    if (ns < 1 || ns > (double)SG_DURATION_MAX) {
        return -1;
    }
    *out = (int64_t)ns;
    return 0;
}

int parse_count(const char *s, uint64_t max, uint64_t *out) {
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') {
        return -1;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

char *read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
        if (n == cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (f != stdin) {
        fclose(f);
    }
    *len = n;
    return buf;
}
