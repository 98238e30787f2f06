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

/* Text cycled from @pat (@plen bytes) from @from on, @n bytes, at @in. */
static void cycle(unsigned char *in, const char *pat, size_t plen, size_t from,
                  size_t n) {
    for (size_t i = 0; i < n; i++) {
        in[i] = (unsigned char)pat[(from + i) % plen];
    }
}

/* Patterns of model text: multibyte sequences in every script, with
 * quotes, backslashes and control characters among them, and invalid
 * bytes among valid sequences. */
static const char *const patterns[] = {
    "你好，世界。",
    "Ça été déjà",
    "😀🚀x🎉",
    "{\"content\":\"日本語\\n\"}\n",
    "é€😀\"\\\tÿ",
    "한국어\x80 \xC3\xA9\xC0\xAF",
    "ab\xE2\x82"
    "cd\xF0\x9F\x98"
    "e\xED\xA0\x80\xF4\x90\x80\x80\xF5\xFF",
    "\xE0\x80\x80\xE0\xA0\x80\xF0\x80\x80\x80\xF0\x90\x80\x80\xC2\x80\xDF\xBF",
};

/* Every length 0..100 of every pattern from each of its bytes, on every
 * path: the 8-, 16- and 32-byte blocks and the tails meet every sequence
 * at every offset. */
static void multibyte_at_every_length(void **state) {
    (void)state;
    unsigned char in[128];
    int best = sgx_json_escape_path(0);
    for (int path = 1; path <= best; path++) {
        assert_int_equal(sgx_json_escape_path(path), path);
        for (size_t p = 0; p < sizeof(patterns) / sizeof(patterns[0]); p++) {
            const size_t plen = strlen(patterns[p]);
            for (size_t from = 0; from < plen; from++) {
                for (size_t n = 0; n <= 100; n++) {
                    cycle(in, patterns[p], plen, from, n);
                    check_one(in, n);
                }
            }
        }
    }
    sgx_json_escape_path(0);
}

/* One sequence, valid or not, at every offset 0..72 of valid multibyte
 * text (or ASCII), with text after it or the end right after it: split at
 * each 8-, 16- and 32-byte block boundary, at each of its bytes. */
static void sequence_across_block_boundaries(void **state) {
    (void)state;
    static const char *const seqs[] = {
        "\xC3\xA9",             /* U+00E9 */
        "\xE4\xBD\xA0",         /* U+4F60 */
        "\xF0\x9F\x98\x80",     /* U+1F600 */
        "\xEF\xBF\xBF",         /* U+FFFF */
        "\xF4\x8F\xBF\xBF",     /* U+10FFFF */
        "\x80",                 /* a continuation byte alone */
        "\xBF\xBF",             /* two */
        "\xC0\xAF",             /* overlong '/' */
        "\xC1\xBF",             /* overlong */
        "\xE0\x80\xAF",         /* overlong, 3 bytes */
        "\xE0\x9F\xBF",         /* overlong, 3 bytes */
        "\xF0\x80\x80\xAF",     /* overlong, 4 bytes */
        "\xF0\x8F\xBF\xBF",     /* overlong, 4 bytes */
        "\xED\xA0\x80",         /* U+D800, a surrogate */
        "\xED\xBF\xBF",         /* U+DFFF */
        "\xF4\x90\x80\x80",     /* U+110000 */
        "\xF5\x80\x80\x80",     /* no lead byte */
        "\xF8\x88\x80\x80\x80", /* 5 bytes */
        "\xFE\xFF",
        "\xC3",             /* cut short: 2 of 1 */
        "\xE4\xBD",         /* 3 of 2 */
        "\xE4",             /* 3 of 1 */
        "\xF0\x9F\x98",     /* 4 of 3 */
        "\xF0\x9F",         /* 4 of 2 */
        "\xF0",             /* 4 of 1 */
        "\xC3\xA9\xA9",     /* one continuation too many */
        "\xE4\xBD\xA0\x80", /* one too many */
        "\xE4\"\xA0",       /* a quote inside */
        "\xF0\x9F\n\x80",   /* a control character inside */
    };
    static const char *const fills[] = {"a", "\xC3\xA9", "\xE4\xBD\xA0",
                                        "\xF0\x9F\x98\x80", "\"x\xE4\xBD\xA0\\"};
    unsigned char in[160];
    int best = sgx_json_escape_path(0);
    for (int path = 1; path <= best; path++) {
        assert_int_equal(sgx_json_escape_path(path), path);
        for (size_t s = 0; s < sizeof(seqs) / sizeof(seqs[0]); s++) {
            const size_t slen = strlen(seqs[s]);
            for (size_t f = 0; f < sizeof(fills) / sizeof(fills[0]); f++) {
                const size_t flen = strlen(fills[f]);
                for (size_t at = 0; at <= 72; at++) {
                    /* @at bytes of fill (the last character may be cut:
                     * more invalid bytes, as they come), the sequence,
                     * then none or 40 bytes of fill */
                    for (size_t after = 0; after <= 40; after += 40) {
                        cycle(in, fills[f], flen, 0, at);
                        memcpy(in + at, seqs[s], slen);
                        cycle(in + at + slen, fills[f], flen, 0, after);
                        check_one(in, at + slen + after);
                        /* and with the fill whole before it */
                        const size_t whole = at - at % flen;
                        cycle(in, fills[f], flen, 0, whole);
                        memcpy(in + whole, seqs[s], slen);
                        cycle(in + whole + slen, fills[f], flen, 0, after);
                        check_one(in, whole + slen + after);
                    }
                }
            }
        }
    }
    sgx_json_escape_path(0);
}

/* sgx_json_escape and the escaper of @n bytes at @in against the
 * reference (check_one without the bounded buffers). */
static void check_direct(const unsigned char *in, size_t n) {
    char want[SGX_JSON_ESCAPE_MAX(64)];
    char got[SGX_JSON_ESCAPE_MAX(64)];
    size_t wl = ref_escape(want, in, n);
    assert_int_equal(sgx_json_escape(got, sizeof(got), (const char *)in, n), wl);
    assert_memory_equal(got, want, wl);
    assert_int_equal(sgx_json_escaper()(got, (const char *)in, n), wl);
    assert_memory_equal(got, want, wl);
}

/* Every pair of bytes whose first is from 0x80, and every four bytes from
 * the edges of the ranges RFC 3629 §4 draws, amid valid 2-byte text, in a
 * block and across a block's end: each entry of the validation's tables
 * (json.c) against the reference. */
static void every_pair_and_edge(void **state) {
    (void)state;
    static const unsigned char edge[] = {
        0x00, 0x41, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc1, 0xc2, 0xdf,
        0xe0, 0xe1, 0xec, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf3, 0xf4, 0xf5, 0xff};
    const size_t ne = sizeof(edge);
    unsigned char in[48];
    int best = sgx_json_escape_path(0);
    for (int path = 1; path <= best; path++) {
        assert_int_equal(sgx_json_escape_path(path), path);
        for (size_t at = 14; at <= 30; at += 16) {
            for (unsigned a = 0x80; a <= 0xff; a++) {
                for (unsigned b = 0; b <= 0xff; b++) {
                    cycle(in, "\xC3\xA9", 2, 0, sizeof(in));
                    in[at] = (unsigned char)a;
                    in[at + 1] = (unsigned char)b;
                    check_direct(in, sizeof(in));
                }
            }
            for (size_t i = 0; i < ne * ne * ne * ne; i++) {
                cycle(in, "\xC3\xA9", 2, 0, sizeof(in));
                in[at] = edge[i % ne];
                in[at + 1] = edge[i / ne % ne];
                in[at + 2] = edge[i / ne / ne % ne];
                in[at + 3] = edge[i / ne / ne / ne];
                check_direct(in, sizeof(in));
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
        cmocka_unit_test(multibyte_at_every_length),
        cmocka_unit_test(sequence_across_block_boundaries),
        cmocka_unit_test(every_pair_and_edge),
        cmocka_unit_test(json_inside_json),
        cmocka_unit_test(empty_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
