/*
 * A look inside an item's JSON without a parse: one pass over the text,
 * no allocation, bounded depth, that finds the value at a path such as
 * choices[].delta.content or error.type.  Provider profiles use it to tell
 * a token from metadata and to see an in-band error (docs/profiles.md).
 *
 * What it promises: on well-formed JSON (RFC 8259) the value it returns is
 * the one a parser would find first at that path, in document order.  On
 * malformed input it returns "not found" or a span inside the input, never
 * reads outside it, and never takes more than one pass: a hostile item
 * costs what its length costs.  It does not validate: numbers and literals
 * are taken as the bytes up to the next delimiter, and a string's escapes
 * are not decoded (the span is the raw text between the quotes; `escaped`
 * says whether it holds a backslash).
 */
#ifndef SG_FRAMING_JSCAN_H
#define SG_FRAMING_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most steps in a path (the only recursion: values off the path are
 * skipped by counting brackets, however deep they nest). */
#define SG__JSCAN_MAX_PATH 8

enum sg__jtype {
    SG__JNONE = 0, /* not found */
    SG__JSTRING,   /* p, n: the raw bytes between the quotes */
    SG__JNUMBER,   /* p, n: the bytes of the number */
    SG__JTRUE,
    SG__JFALSE,
    SG__JNULL,
    SG__JOBJECT, /* p, n: from '{' to its '}' inclusive */
    SG__JARRAY,  /* p, n: from '[' to its ']' inclusive */
};

typedef struct sg__jval {
    const char *p;
    size_t n;
    uint8_t type;
    bool escaped; /* a string holding a backslash */
} sg__jval;

/*
 * A path: each step is a key of an object, or "[]" for any element of an
 * array (the first that has the rest of the path).  At most
 * SG__JSCAN_MAX_PATH steps.
 */
typedef struct sg__jpath {
    const char *step[SG__JSCAN_MAX_PATH];
    uint8_t len[SG__JSCAN_MAX_PATH];
    uint8_t n;
} sg__jpath;

/* A path written out at compile time, one step per argument ("[]" for any
 * element): SG__JPATH3("choices", "[]", "delta") - no parse at run time. */
#define SG__JP_LEN(s) ((uint8_t)(sizeof(s) - 1))
#define SG__JPATH1(a) \
    { {a}, {SG__JP_LEN(a)}, 1 }
#define SG__JPATH2(a, b) \
    { {a, b}, {SG__JP_LEN(a), SG__JP_LEN(b)}, 2 }
#define SG__JPATH3(a, b, c) \
    { {a, b, c}, {SG__JP_LEN(a), SG__JP_LEN(b), SG__JP_LEN(c)}, 3 }
#define SG__JPATH4(a, b, c, d) \
    { {a, b, c, d}, {SG__JP_LEN(a), SG__JP_LEN(b), SG__JP_LEN(c), SG__JP_LEN(d)}, 4 }
#define SG__JPATH6(a, b, c, d, e, f)                                       \
    {                                                                      \
        {a, b, c, d, e, f}, {SG__JP_LEN(a), SG__JP_LEN(b), SG__JP_LEN(c),  \
                             SG__JP_LEN(d), SG__JP_LEN(e), SG__JP_LEN(f)}, \
            6                                                              \
    }

/* Builds @path from "a.b[].c" ("[]" may follow a key or stand alone).
 * Returns 0, or -1 when the text has too many steps or an empty key. */
int sg__jpath_parse(sg__jpath *path, const char *text);

/* Finds the first value at @path in [p, p + n).  Returns true and fills
 * *@out when found; false (and out->type SG__JNONE) otherwise. */
bool sg__jscan_find(const char *p, size_t n, const sg__jpath *path, sg__jval *out);

/* A quick reject before a scan: false proves that no key @key (unescaped,
 * as the scanner matches keys) is in [p, p + n) at any depth - the bytes
 * "key" in quotes do not occur.  true says only that they do.  16 bytes at
 * a time (a per-item check after the first token costs this, not a scan). */
bool sg__jscan_may_have_key(const char *p, size_t n, const char *key, size_t klen);

/* true for a value that says "something": a non-empty string, a non-empty
 * array or object, a number, true.  (Empty content is not a token.) */
bool sg__jval_present(const sg__jval *v);

#endif
