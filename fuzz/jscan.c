/*
 * Fuzz target: the JSON path scanner (src/framing/jscan.h) that provider
 * profiles run over every item.
 *
 * Input: one byte choosing a path, then the JSON text.  Invariants (abort
 * on violation):
 *   - a value found lies inside the input, and is what its type says: a
 *     string is followed by its closing quote, a container starts with its
 *     bracket, a literal is spelled out;
 *   - the answer is the same twice (no state), and the same when the text
 *     is followed by more bytes only if the value ended before them;
 *   - a value found at "k" is also found when the text is looked at as the
 *     value of a wrapping object {"w": TEXT} with the path w.k;
 *   - the quick rejects (sg__jscan_may_have_key, sg__jscan_may_have with
 *     several keys and a value's first byte) never reject a key found;
 *   - the keys scan (sg__jscan_keys) finds what sg__jscan_may_have finds
 *     for keys that ask for a value's first byte; the values it points at
 *     lie inside the input and start as asked; the text it counts is at
 *     most the input's length, and a string's decoded length at most its
 *     raw one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "framing/jscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok) {
    if (!ok) {
        abort();
    }
}

static const char *const g_paths[] = {
    "error",
    "error.type",
    "choices[].delta.content",
    "candidates[].content.parts[].text",
    "done",
    "message.content",
    "type",
    "[]",
    "[].a",
    "a.b.c",
};
static const char *const g_wrapped[] = {
    "w.error",
    "w.error.type",
    "w.choices[].delta.content",
    "w.candidates[].content.parts[].text",
    "w.done",
    "w.message.content",
    "w.type",
    "w[]",
    "w[].a",
    "w.a.b.c",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 65536) {
        return 0;
    }
    size_t which = data[0] % (sizeof(g_paths) / sizeof(g_paths[0]));
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    char *copy = malloc(n + 1); /* exactly the bytes: ASan sees an over-read */
    check(copy != NULL);
    memcpy(copy, text, n);
    sg__jpath path;
    check(sg__jpath_parse(&path, g_paths[which]) == 0);
    sg__jval v, again;
    bool found = sg__jscan_find(copy, n, &path, &v);
    check(sg__jscan_find(copy, n, &path, &again) == found);
    if (found) {
        check(v.p >= copy && v.n <= n && v.p + v.n <= copy + n);
        check(again.p == v.p && again.n == v.n && again.type == v.type);
        switch (v.type) {
        case SG__JSTRING:
            check(v.p + v.n < copy + n && v.p[v.n] == '"' && v.p > copy &&
                  v.p[-1] == '"');
            break;
        case SG__JOBJECT:
            check(v.n >= 1 && v.p[0] == '{');
            break;
        case SG__JARRAY:
            check(v.n >= 1 && v.p[0] == '[');
            break;
        case SG__JTRUE:
            check(v.n == 4 && memcmp(v.p, "true", 4) == 0);
            break;
        case SG__JNULL:
            check(v.n == 4 && memcmp(v.p, "null", 4) == 0);
            break;
        case SG__JFALSE:
            check(v.n == 5 && memcmp(v.p, "false", 5) == 0);
            break;
        case SG__JNUMBER:
            check(v.n >= 1);
            break;
        default:
            check(0);
        }
    }
    /* the quick reject never rejects a key the scanner finds */
    if (which == 0 && found) {
        check(sg__jscan_may_have_key(copy, n, "error", 5));
    }
    static const sg__jkey keys[] = {{"error", 5, 0}, {"done", 4, 't'}, {"type", 4, 0}};
    unsigned may = sg__jscan_may_have(copy, n, keys, 3);
    check(!(which == 0 && found) || (may & 1));
    check(!(which == 4 && found && v.type == SG__JTRUE) || (may & 2));
    check(!(which == 6 && found) || (may & 4));
    /* the keys scan: the same keys as the quick reject when it asks for
     * a value's first byte, positions inside, text no longer than the
     * input */
    static const sg__jkey vkeys[] = {
        {"done", 4, 't'}, {"usage", 5, '{'}, {"error", 5, '{'}};
    sg__jfound f;
    sg__jscan_keys(copy, n, vkeys, 3, 0, &f);
    check(f.mask == sg__jscan_may_have(copy, n, vkeys, 3));
    static const sg__jkey tkeys[] = {
        {"content", 7, '"'}, {"error", 5, 0}, {"usage", 5, '{'}, {"n", 1, '#'}};
    sg__jscan_keys(copy, n, tkeys, 4, 1, &f);
    check(f.text <= n);
    for (unsigned k = 0; k < 4; k++) {
        if (f.mask >> k & 1) {
            check(f.at[k] >= copy && f.at[k] < copy + n);
            check(tkeys[k].value == 0 || tkeys[k].value == '#' ||
                  *f.at[k] == tkeys[k].value);
        }
    }
    check(sg__jstr_decoded_len(copy, n) <= n);
    /* the same text as the value of {"w": ...} */
    char *wrap = malloc(n + 8);
    check(wrap != NULL);
    memcpy(wrap, "{\"w\":", 5);
    memcpy(wrap + 5, text, n);
    wrap[n + 5] = '}';
    sg__jpath wp;
    check(sg__jpath_parse(&wp, g_wrapped[which]) == 0);
    sg__jval w;
    bool wfound = sg__jscan_find(wrap, n + 6, &wp, &w);
    if (found && v.type != SG__JOBJECT && v.type != SG__JARRAY && v.type != SG__JNUMBER) {
        /* a closed value found in the text is found the same way inside */
        check(wfound && w.type == v.type && w.n == v.n &&
              (size_t)(w.p - wrap) == (size_t)(v.p - copy) + 5);
    }
    free(wrap);
    free(copy);
    return 0;
}
