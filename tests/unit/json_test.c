/*
 * sgx_json_escape against a plain byte-at-a-time reference written here from
 * RFC 8259 §7 and RFC 3629 §4 (the UTF-8 syntax): every length from 0 to
 * 200 (so the 16-byte blocks meet every alignment and tail), inputs dense
 * in quotes (JSON inside JSON), control characters, DEL, valid and invalid
 * UTF-8 - written whole (and nothing past the literal, though the room
 * allows more) and into every smaller buffer, and into the report through
 * sgx_json_fwrite_string.  The run takes every path the CPU has, each in
 * turn (SSE2 and bytes, SSSE3, AVX-512), and the bounded one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <streamguard/core.h>
#include <streamguard/op.h>

#include "sgx/json.h"

/* RFC 3629 §4: the length of the well-formed sequence at @p, else 0. */
static size_t ref_utf8(const unsigned char *p, size_t n) {
    unsigned c = p[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c == 0xE0) {
        len = 3, lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        len = 3;
    } else if (c == 0xED) {
        len = 3, hi = 0x9F;
    } else if (c == 0xF0) {
        len = 4, lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
        len = 4;
    } else if (c == 0xF4) {
        len = 4, hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (p[i] < 0x80 || p[i] > 0xBF) {
            return 0;
        }
    }
    return len;
}

static size_t ref_escape(char *out, const unsigned char *p, size_t n) {
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c >= 0x80) {
            size_t l = ref_utf8(p + i, n - i);
            if (l == 0) {
                o += (size_t)sprintf(out + o, "\\ufffd");
                i++;
            } else {
                memcpy(out + o, p + i, l);
                o += l;
                i += l;
            }
            continue;
        }
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c == '\n') {
            o += (size_t)sprintf(out + o, "\\n");
        } else if (c == '\r') {
            o += (size_t)sprintf(out + o, "\\r");
        } else if (c == '\t') {
            o += (size_t)sprintf(out + o, "\\t");
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)sprintf(out + o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
        i++;
    }
    out[o++] = '"';
    return o;
}

static uint64_t g_rng = 0x9e3779b97f4a7c15u;
static unsigned rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (unsigned)(g_rng >> 32);
}

/* Bytes of the kind @mix favours. */
static void fill(unsigned char *p, size_t n, int mix) {
    static const unsigned char utf8[][4] = {
        {0xC3, 0xA9},       {0xE2, 0x82, 0xAC}, {0xF0, 0x9F, 0x98, 0x80},
        {0xED, 0xA0, 0x80}, {0xC0, 0xAF},       {0xF4, 0x90, 0x80, 0x80},
        {0xE0, 0x80, 0x80}};
    for (size_t i = 0; i < n; i++) {
        unsigned r = rnd() % 100;
        if (mix == 0) {
            p[i] = (unsigned char)(0x20 + rnd() % 95);
        } else if (mix == 1) {
            p[i] = r < 20 ? '"' : r < 25 ? '\\' : (unsigned char)('a' + rnd() % 26);
        } else if (mix == 2) {
            p[i] = r < 10   ? (unsigned char)(rnd() % 0x20)
                   : r < 13 ? 0x7f
                            : (unsigned char)('a' + r % 26);
        } else if (mix == 3 && r < 30) {
            const unsigned char *s = utf8[rnd() % 7];
            size_t l = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
            for (size_t k = 0; k < l && i < n; k++) {
                p[i++] = s[k];
            }
            i--;
        } else {
            p[i] = (unsigned char)rnd();
        }
    }
}

static void check_one(const unsigned char *in, size_t n) {
    char want[SGX_JSON_ESCAPE_MAX(256)];
    char got[SGX_JSON_ESCAPE_MAX(256) + 16];
    size_t wl = ref_escape(want, in, n);
    memset(got, 0x55, sizeof(got));
    size_t gl = sgx_json_escape(got, SGX_JSON_ESCAPE_MAX(n), (const char *)in, n);
    assert_int_equal(gl, wl);
    assert_memory_equal(got, want, wl);
    for (size_t k = wl; k < sizeof(got); k++) {
        assert_int_equal((unsigned char)got[k], 0x55); /* nothing past the literal */
    }
    /* the escaper for the path in use: the same bytes, nothing past them */
    memset(got, 0x55, sizeof(got));
    assert_int_equal(sgx_json_escaper()(got, (const char *)in, n), wl);
    assert_memory_equal(got, want, wl);
    for (size_t k = wl; k < sizeof(got); k++) {
        assert_int_equal((unsigned char)got[k], 0x55);
    }
    /* a bounded buffer: the same bytes as far as they fit, the full length */
    for (size_t cap = 0; cap < wl; cap += 1 + cap / 4) {
        memset(got, 0x55, sizeof(got));
        assert_int_equal(sgx_json_escape(got, cap, (const char *)in, n), wl);
        if (cap > 0) {
            assert_memory_equal(got, want, cap);
        }
        assert_int_equal((unsigned char)got[cap], 0x55); /* nothing beyond */
    }
}

static void escapes_as_the_reference_does(void **state) {
    (void)state;
    unsigned char in[256];
    /* every path this CPU has, from the plain one up to its best */
    int best = sgx_json_escape_path(0);
    for (int path = 1; path <= best; path++) {
        assert_int_equal(sgx_json_escape_path(path), path);
        for (int mix = 0; mix < 5; mix++) {
            for (size_t n = 0; n <= 200; n++) {
                for (int rep = 0; rep < 8; rep++) {
                    fill(in, n, mix);
                    check_one(in, n);
                }
            }
        }
    }
    sgx_json_escape_path(0);
}

static void json_inside_json(void **state) {
    (void)state;
    const char *chunk =
        "{\"id\":\"chatcmpl-1\",\"choices\":[{\"delta\":{\"content\":\"a\\\\b\"}}]}";
    char out[SGX_JSON_ESCAPE_MAX(128)];
    size_t n = sgx_json_escape(out, sizeof(out), chunk, strlen(chunk));
    const char *want = "\"{\\\"id\\\":\\\"chatcmpl-1\\\",\\\"choices\\\":[{\\\"delta\\\":"
                       "{\\\"content\\\":"
                       "\\\"a\\\\\\\\b\\\"}}]}\"";
    assert_int_equal(n, strlen(want));
    assert_memory_equal(out, want, n);
    /* the report writes strings the same way */
    char buf[512];
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    assert_int_equal(sgx_json_fwrite_string(f, chunk, strlen(chunk)), 0);
    long len = ftell(f);
    fclose(f);
    assert_int_equal((size_t)len, n);
    assert_memory_equal(buf, want, n);
}

static void empty_and_null(void **state) {
    (void)state;
    char out[2];
    assert_int_equal(sgx_json_escape(out, 2, NULL, 0), 2);
    assert_memory_equal(out, "\"\"", 2);
    assert_int_equal(sgx_json_escape(NULL, 0, "abc", 3), 5); /* just the length */
    assert_int_equal(sgx_json_escaper()(out, NULL, 0), 2);
    assert_memory_equal(out, "\"\"", 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(escapes_as_the_reference_does),
        cmocka_unit_test(json_inside_json),
        cmocka_unit_test(empty_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
