/*
 * JSON string literals (RFC 8259 §7), as the execution report writes them
 * and the programs print items, reports and diagnostics: json.c into a
 * buffer, json_fwrite.c to a FILE.  Part of src/sgx/: code the library and
 * its programs share, compiled into both and never exported
 * (docs/design.md, Layers).
 */
#ifndef SGX_JSON_H
#define SGX_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Room that always suffices for sgx_json_escape of @len bytes. */
#define SGX_JSON_ESCAPE_MAX(len) (6 * (size_t)(len) + 2)

/*
 * sgx_json_escape - @p[0..@len) as a JSON string literal, quotes included,
 * into @dst: '"', '\\' and control characters (and DEL) escaped, valid
 * UTF-8 passed through, each byte of an invalid UTF-8 sequence (overlong
 * forms, surrogates, code points above U+10FFFF) written as `\ufffd`.  Not
 * NUL-terminated.
 *
 * @dst: at most @cap bytes are written, and never a byte past the literal;
 *   SGX_JSON_ESCAPE_MAX(@len) always suffices.  @p may be NULL when @len
 *   is 0.
 *
 * With room for the worst case it escapes straight into @dst, 32 bytes at
 * a time where the CPU has AVX-512 VBMI2, 16 where it has SSSE3 (chosen at
 * run time), else 16 bytes at a time for runs that need no escape.  With
 * AVX-512 or SSSE3, a block of valid UTF-8 (text in any script) goes as
 * fast as ASCII; else a run of valid sequences is checked byte by byte and
 * copied at once.
 *
 * Returns the length of the whole literal.  When it is larger than @cap
 * the literal was cut at @cap bytes (call again with more room).
 * Thread-safety: reentrant.
 */
size_t sgx_json_escape(char *dst, size_t cap, const char *p, size_t len);

/*
 * sgx_json_escaper - sgx_json_escape for a caller that always has room
 * for the worst case, without the per-call checks and path choice: the
 * function for the path in use now (sgx_json_escape_path), to be asked
 * once and called per string.  The function writes @p[0..@len) as a JSON
 * string literal, quotes included, byte for byte what sgx_json_escape
 * writes, at @dst, which must have room for SGX_JSON_ESCAPE_MAX(@len)
 * bytes (@p may be NULL when @len is 0), and returns its length.
 * Thread-safety: reentrant (the returned function too).
 */
typedef size_t (*sgx_json_escape_fn)(char *dst, const char *p, size_t len);
sgx_json_escape_fn sgx_json_escaper(void);

/* The sgx_json_escape path in use: 1 SSE2 (and bytes), 2 SSSE3, 3 AVX-512.
 * @max > 0 limits it to that one at most (for tests and benchmarks, set
 * while nothing escapes); 0 lifts the limit.  Returns the path now used. */
int sgx_json_escape_path(int max);

/*
 * sgx_json_fwrite_string - sgx_json_escape's literal of @p[0..@len),
 * written to @f.  A literal longer than 1 KiB is built in a buffer
 * allocated for the call.
 *
 * Returns 0 if it succeeds, or one of the following negative error codes:
 *   SG_EINVAL  @f is NULL, or @p is NULL while @len > 0;
 *   SG_EIO     writing to @f failed (now or before: its error indicator
 *              is set), or no memory for a long literal.
 * Thread-safety: as stdio's for @f.
 */
int sgx_json_fwrite_string(FILE *f, const char *p, size_t len);

#endif
