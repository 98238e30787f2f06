/*
 * The JSON path scanner against documents this test builds as trees and
 * writes out itself (random nesting, keys, escapes, whitespace), so the
 * answer for every path is known from the tree; and against the shapes the
 * providers' streams carry (OpenAI, Anthropic, Gemini, Ollama).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "framing/jscan.h"

static uint64_t g_rng = 0x2545f4914f6cdd1du;
static unsigned rnd(unsigned n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (unsigned)(g_rng >> 33) % n;
}

static const char *const g_keys[] = {"a",       "b",     "content", "delta",
                                     "choices", "error", "type"};
#define NKEYS 7

typedef struct node {
    int type; /* sg__jtype */
    int nkids;
    int key[6]; /* objects: index into g_keys */
    struct node *kid[6];
    size_t start, end; /* where it was written (strings: between quotes) */
    size_t dlen;       /* strings: the bytes it decodes to */
} node;

static node *gen(int depth) {
    node *n = calloc(1, sizeof(*n));
    unsigned r = rnd(depth > 4 ? 5 : 8);
    n->type = r == 0   ? SG__JSTRING
              : r == 1 ? SG__JNUMBER
              : r == 2 ? SG__JTRUE
              : r == 3 ? SG__JNULL
              : r == 4 ? SG__JFALSE
              : r < 7  ? SG__JOBJECT
                       : SG__JARRAY;
    if (n->type == SG__JOBJECT || n->type == SG__JARRAY) {
        n->nkids = (int)rnd(6);
        for (int i = 0; i < n->nkids; i++) {
            n->key[i] = (int)rnd(NKEYS);
            n->kid[i] = gen(depth + 1);
        }
    }
    return n;
}

static void drop(node *n) {
    for (int i = 0; i < n->nkids; i++) {
        drop(n->kid[i]);
    }
    free(n);
}

static void ws(char *b, size_t *o) {
    static const char w[] = " \n\t\r";
    for (unsigned k = rnd(3); k > 0; k--) {
        b[(*o)++] = w[rnd(4)];
    }
}

static void put(char *b, size_t *o, const char *s) {
    size_t l = strlen(s);
    memcpy(b + *o, s, l);
    *o += l;
}

/* Strings that look like JSON inside: quotes, brackets, backslashes. */
static void put_string(char *b, size_t *o, node *n) {
    static const char *const bits[] = {"x",    "{", "}", "[",   "]",   "\\\"",
                                       "\\\\", ":", ",", "tok", "\\n", "\\u00e9"};
    static const size_t decoded[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 2};
    b[(*o)++] = '"';
    n->start = *o;
    n->dlen = 0;
    for (unsigned k = rnd(20); k > 0; k--) {
        unsigned i = rnd(12);
        put(b, o, bits[i]);
        n->dlen += decoded[i];
    }
    n->end = *o;
    b[(*o)++] = '"';
}

static void write_node(char *b, size_t *o, node *n) {
    ws(b, o);
    switch (n->type) {
    case SG__JSTRING:
        put_string(b, o, n);
        break;
    case SG__JNUMBER:
        n->start = *o;
        put(b, o, rnd(2) ? "-12.5e3" : "7");
        n->end = *o;
        break;
    case SG__JTRUE:
    case SG__JFALSE:
    case SG__JNULL:
        n->start = *o;
        put(b, o,
            n->type == SG__JTRUE    ? "true"
            : n->type == SG__JFALSE ? "false"
                                    : "null");
        n->end = *o;
        break;
    default:
        n->start = *o;
        b[(*o)++] = n->type == SG__JOBJECT ? '{' : '[';
        for (int i = 0; i < n->nkids; i++) {
            if (i > 0) {
                ws(b, o);
                b[(*o)++] = ',';
            }
            if (n->type == SG__JOBJECT) {
                ws(b, o);
                b[(*o)++] = '"';
                put(b, o, g_keys[n->key[i]]);
                b[(*o)++] = '"';
                ws(b, o);
                b[(*o)++] = ':';
            }
            write_node(b, o, n->kid[i]);
        }
        ws(b, o);
        b[(*o)++] = n->type == SG__JOBJECT ? '}' : ']';
        n->end = *o;
        break;
    }
    ws(b, o);
}

/* The tree's answer: the first node at path[k..] in document order. */
static node *lookup(node *n, const int *path, int len, int k) {
    if (k == len) {
        return n;
    }
    bool any = path[k] < 0;
    if (n->type != (any ? SG__JARRAY : SG__JOBJECT)) {
        return NULL;
    }
    for (int i = 0; i < n->nkids; i++) {
        if (any || n->key[i] == path[k]) {
            node *r = lookup(n->kid[i], path, len, k + 1);
            if (r != NULL) {
                return r;
            }
        }
    }
    return NULL;
}

static void random_documents_agree_with_their_trees(void **state) {
    (void)state;
    static char buf[1 << 20];
    int checked = 0, hits = 0;
    for (int doc = 0; doc < 3000; doc++) {
        node *root = gen(0);
        while (root->nkids == 0) { /* a container with something inside */
            drop(root);
            root = gen(0);
        }
        size_t len = 0;
        write_node(buf, &len, root);
        for (int q = 0; q < 20; q++) {
            int path[4];
            int plen = 1 + (int)rnd(4);
            char text[128] = "";
            node *at = root;
            for (int k = 0; k < plen; k++) {
                if (q % 2 == 0 && at != NULL && at->nkids > 0) {
                    /* half the paths walk the tree: they exist */
                    int i = (int)rnd((unsigned)at->nkids);
                    path[k] = at->type == SG__JARRAY ? -1 : at->key[i];
                    at = at->kid[i];
                } else {
                    path[k] = rnd(4) == 0 ? -1 : (int)rnd(NKEYS);
                    at = NULL;
                }
                if (k > 0 && path[k] >= 0) {
                    strcat(text, ".");
                }
                strcat(text, path[k] < 0 ? "[]" : g_keys[path[k]]);
            }
            sg__jpath jp;
            assert_int_equal(sg__jpath_parse(&jp, text), 0);
            sg__jval v;
            bool found = sg__jscan_find(buf, len, &jp, &v);
            node *want = lookup(root, path, plen, 0);
            checked++;
            if (want == NULL) {
                assert_false(found);
                continue;
            }
            hits++;
            assert_true(found);
            assert_int_equal(v.type, want->type);
            assert_ptr_equal(v.p, buf + want->start);
            assert_int_equal(v.n, want->end - want->start);
        }
        drop(root);
    }
    print_message("%d paths checked, %d found\n", checked, hits);
    assert_true(hits > checked / 5); /* the walked half mostly exists */
}

static void found(const char *json, const char *path, int type, const char *want) {
    sg__jpath jp;
    assert_int_equal(sg__jpath_parse(&jp, path), 0);
    sg__jval v;
    bool ok = sg__jscan_find(json, strlen(json), &jp, &v);
    if (want == NULL) {
        assert_false(ok);
        return;
    }
    assert_true(ok);
    assert_int_equal(v.type, type);
    assert_int_equal(v.n, strlen(want));
    assert_memory_equal(v.p, want, v.n);
}

static void provider_shapes(void **state) {
    (void)state;
    const char *role =
        "{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
        "\"content\":\"\"},\"finish_reason\":null}]}";
    found(role, "choices[].delta.content", SG__JSTRING, "");
    const char *tok =
        "{\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\\\"lo\"},"
        "\"finish_reason\":null}]}";
    found(tok, "choices[].delta.content", SG__JSTRING, "Hel\\\"lo");
    found(tok, "error", 0, NULL);
    const char *err = "{\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}";
    found(err, "error.type", SG__JSTRING, "server_error");
    const char *ant =
        "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
        "\"Overloaded\"}}";
    found(ant, "error.type", SG__JSTRING, "overloaded_error");
    found(ant, "type", SG__JSTRING, "error");
    const char *gem =
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Hi\"}],\"role\":"
        "\"model\"},\"finishReason\":\"STOP\"}]}";
    found(gem, "candidates[].content.parts[].text", SG__JSTRING, "Hi");
    found(gem, "candidates[].finishReason", SG__JSTRING, "STOP");
    const char *oll =
        "{\"model\":\"m\",\"message\":{\"role\":\"assistant\",\"content\":\"x\"},"
        "\"done\":true}";
    found(oll, "done", SG__JTRUE, "true");
    found(oll, "message.content", SG__JSTRING, "x");
    /* keys inside strings are not keys */
    found("{\"a\":\"\\\"error\\\":1\",\"b\":2}", "error", 0, NULL);
    found("{\"a\":{\"error\":1}}", "error", 0, NULL); /* not at the top */
}

static void malformed_input_stays_inside(void **state) {
    (void)state;
    static const char *const bad[] = {
        "", "{", "{\"error\"", "{\"error\":", "{\"error\":\"x", "[[[[[[", "{\"a\":[1,2",
        "\"\\", "{\"error\" 1}", "}}}", "{\"error\":tru",
        /* a stray ':' in an array: once looped forever */
        "[\x84\"content\":{\"a\":1}]"};
    sg__jpath jp;
    static const char *const paths[] = {"error", "[].content", "a[].b"};
    for (size_t k = 0; k < 3; k++) {
        assert_int_equal(sg__jpath_parse(&jp, paths[k]), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            size_t n = strlen(bad[i]);
            char *copy = malloc(n + 1); /* exactly the bytes: ASan sees any over-read */
            memcpy(copy, bad[i], n);
            sg__jval v;
            if (sg__jscan_find(copy, n, &jp, &v)) {
                assert_true(v.p >= copy && v.p + v.n <= copy + n);
            }
            free(copy);
        }
    }
    assert_int_equal(sg__jpath_parse(&jp, ""), -1);
    assert_int_equal(sg__jpath_parse(&jp, "a..b"), -1);
    assert_int_equal(sg__jpath_parse(&jp, "a.b.c.d.e.f.g.h.i"), -1);
}

/* The quick reject against a plain search, at every length and offset. */
static void may_have_key_is_a_plain_search(void **state) {
    (void)state;
    static const char alphabet[] = "\"errorx:{}";
    char buf[200];
    for (int rep = 0; rep < 20000; rep++) {
        size_t n = rnd(sizeof(buf));
        for (size_t i = 0; i < n; i++) {
            buf[i] = alphabet[rnd(sizeof(alphabet) - 1)];
        }
        if (n > 10 && rnd(3) == 0) {
            memcpy(buf + rnd((unsigned)(n - 7)), "\"error\"", 7);
        }
        char *copy = malloc(n + 1); /* exactly the bytes */
        memcpy(copy, buf, n);
        bool want = false;
        for (size_t i = 0; i + 7 <= n; i++) {
            want = want || memcmp(copy + i, "\"error\"", 7) == 0;
        }
        assert_int_equal(sg__jscan_may_have_key(copy, n, "error", 5), want);
        free(copy);
    }
    /* and it never misses what the scanner finds */
    sg__jpath jp;
    assert_int_equal(sg__jpath_parse(&jp, "error"), 0);
    const char *err = "{\"id\":\"x\",\"error\":{\"type\":\"e\"}}";
    sg__jval v;
    assert_true(sg__jscan_find(err, strlen(err), &jp, &v));
    assert_true(sg__jscan_may_have_key(err, strlen(err), "error", 5));
}

/* The reference: "key", then (when asked) whitespace, a colon,
 * whitespace and the value's first byte. */
static bool ref_has(const char *p, size_t n, const sg__jkey *k) {
    for (size_t i = 0; i + k->len + 2 <= n; i++) {
        if (p[i] != '"' || memcmp(p + i + 1, k->key, k->len) != 0 ||
            p[i + k->len + 1] != '"') {
            continue;
        }
        if (k->value == 0) {
            return true;
        }
        size_t j = i + k->len + 2;
        while (j < n && strchr(" \t\r\n", p[j]) != NULL && p[j] != '\0') {
            j++;
        }
        if (j >= n || p[j] != ':') {
            continue;
        }
        j++;
        while (j < n && strchr(" \t\r\n", p[j]) != NULL && p[j] != '\0') {
            j++;
        }
        if (j < n && p[j] == k->value) {
            return true;
        }
    }
    return false;
}

/* Several keys in one pass, each as a search for it alone would say, at
 * every length (the 64- and 16-byte blocks and the overlapping last one
 * meet every alignment), in buffers of exactly the bytes. */
static void may_have_keys_in_one_pass(void **state) {
    (void)state;
    static const char alphabet[] = "\"errordonefinishtb: \n:{}";
    static const sg__jkey keys[] = {
        {"error", 5, 0}, {"done", 4, 't'}, {"finishReason", 12, 0}, {"b", 1, '{'}};
    static const char *const plant[] = {"\"error\"", "\"done\" :\n true",
                                        "\"finishReason\"", "\"b\":{", "\"done\":false"};
    char buf[300];
    for (int rep = 0; rep < 20000; rep++) {
        size_t n = rnd(sizeof(buf));
        for (size_t i = 0; i < n; i++) {
            buf[i] = alphabet[rnd(sizeof(alphabet) - 1)];
        }
        for (int k = 0; k < 2; k++) {
            const char *w = plant[rnd(5)];
            size_t wl = strlen(w);
            if (n > wl && rnd(2) == 0) {
                memcpy(buf + rnd((unsigned)(n - wl)), w, wl);
            }
        }
        char *copy = malloc(n + 1);
        memcpy(copy, buf, n);
        for (unsigned nk = 1; nk <= 4; nk++) {
            unsigned want = 0;
            for (unsigned k = 0; k < nk; k++) {
                want |= ref_has(copy, n, &keys[k]) ? 1u << k : 0;
            }
            assert_int_equal(sg__jscan_may_have(copy, n, keys, nk), want);
        }
        free(copy);
    }
}

/* The keys scan's answer from the tree: every member, in document order,
 * whose key is one of @keys with a value of the kind it asks for. */
typedef struct want_keys {
    unsigned mask;
    size_t at[8];
    uint64_t text;
} want_keys;

static bool kind_fits(char value, const node *n) {
    switch (value) {
    case 0:
        return true;
    case '"':
        return n->type == SG__JSTRING;
    case '{':
        return n->type == SG__JOBJECT;
    case '#':
        return n->type == SG__JNUMBER;
    default:
        return false;
    }
}

static void walk_keys(const node *n, const sg__jkey *keys, unsigned nk, unsigned text,
                      want_keys *w) {
    for (int i = 0; i < n->nkids; i++) {
        const node *kid = n->kid[i];
        for (unsigned k = 0; n->type == SG__JOBJECT && k < nk; k++) {
            if (strcmp(g_keys[n->key[i]], keys[k].key) != 0 ||
                !kind_fits(keys[k].value, kid)) {
                continue;
            }
            if (!(w->mask >> k & 1)) {
                w->mask |= 1u << k;
                w->at[k] = kid->type == SG__JSTRING ? kid->start - 1 : kid->start;
            }
            if (text >> k & 1) {
                w->text += kid->dlen;
            }
        }
        walk_keys(kid, keys, nk, text, w);
    }
}

/* sg__jscan_keys against the trees: which keys, where the first value of
 * each begins, and the decoded bytes of every text key's string - however
 * the strings and nesting fall against the 16-byte blocks. */
static void keys_scan_agrees_with_the_trees(void **state) {
    (void)state;
    static char buf[1 << 20];
    static const sg__jkey keys[] = {
        {"content", 7, '"'}, {"error", 5, 0}, {"delta", 5, '{'},
        {"type", 4, '#'},    {"a", 1, '"'},   {"choices", 7, '"'},
    };
    const unsigned text = 1u | 1u << 4;
    uint64_t texts = 0;
    for (int doc = 0; doc < 3000; doc++) {
        node *root = gen(0);
        size_t len = 0;
        write_node(buf, &len, root);
        char *copy = malloc(len + 1); /* exactly the bytes: ASan sees any over-read */
        memcpy(copy, buf, len);
        for (unsigned nk = 1; nk <= 6; nk++) {
            want_keys w;
            memset(&w, 0, sizeof(w));
            walk_keys(root, keys, nk, text, &w);
            sg__jfound f;
            sg__jscan_keys(copy, len, keys, nk, text, &f);
            assert_int_equal(f.mask, w.mask);
            assert_int_equal(f.text, w.text);
            for (unsigned k = 0; k < nk; k++) {
                if (w.mask >> k & 1) {
                    assert_ptr_equal(f.at[k], copy + w.at[k]);
                }
            }
            texts += f.text;
        }
        free(copy);
        drop(root);
    }
    assert_true(texts > 1000); /* the text keys had strings to count */
}

/* What an escaped string decodes to, in UTF-8 bytes. */
static void decoded_lengths(void **state) {
    (void)state;
    static const struct {
        const char *s;
        size_t n;
    } cases[] = {
        {"plain", 5},
        {"a\\nb", 3},
        {"\\\"\\\\\\/", 3},
        {"\\u0041", 1},
        {"\\u00e9", 2},
        {"\\u20ac", 3},
        {"\\ud83d\\ude00", 4}, /* a pair: one code point, 4 bytes */
        {"\\ud83dx", 4},       /* a lone high surrogate: 3, then x */
        {"\\u12", 4},          /* malformed: \u, then "12" */
        {"\\uZZZZ", 6},
        {"x\\", 2},                     /* a backslash at the end */
        {"C\\u00f3mo est\\u00e1s", 12}, /* 10 characters, 2 of them 2 bytes */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(sg__jstr_decoded_len(cases[i].s, strlen(cases[i].s)),
                         cases[i].n);
    }
    /* the scan counts them so, and never reads past an unterminated one */
    static const sg__jkey k[] = {{"text", 4, '"'}};
    sg__jfound f;
    const char *j = "{\"text\":\"\\u00e9\\n\",\"text\":\"ab\"}";
    sg__jscan_keys(j, strlen(j), k, 1, 1, &f);
    assert_int_equal(f.text, 3 + 2);
    const char *cut = "{\"text\":\"abc";
    char *copy = malloc(strlen(cut));
    memcpy(copy, cut, strlen(cut));
    sg__jscan_keys(copy, strlen(cut), k, 1, 1, &f);
    assert_int_equal(f.text, 3);
    free(copy);
}

static void presence(void **state) {
    (void)state;
    sg__jval v = {"", 0, SG__JSTRING, false};
    assert_false(sg__jval_present(&v));
    v.n = 1;
    assert_true(sg__jval_present(&v));
    sg__jval a = {"[]", 2, SG__JARRAY, false};
    assert_false(sg__jval_present(&a));
    sg__jval nul = {"null", 4, SG__JNULL, false};
    assert_false(sg__jval_present(&nul));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(random_documents_agree_with_their_trees),
        cmocka_unit_test(provider_shapes),
        cmocka_unit_test(malformed_input_stays_inside),
        cmocka_unit_test(may_have_key_is_a_plain_search),
        cmocka_unit_test(may_have_keys_in_one_pass),
        cmocka_unit_test(presence),
        cmocka_unit_test(keys_scan_agrees_with_the_trees),
        cmocka_unit_test(decoded_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
