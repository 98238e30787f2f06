/*
 * The line `sg-stream --ledger DIR --unresolved` prints for an unresolved
 * operation (ledger_line.c), which the ledger's tests compare listings by.
 * Part of src/sgx/: code the library and its programs share, compiled into
 * both and never exported (docs/design.md, Layers); this file with the
 * ledger only.
 */
#ifndef SGX_LEDGER_LINE_H
#define SGX_LEDGER_LINE_H

#include <stddef.h>

#include <streamguard/ledger.h>

/* Room for any line sgx_ledger_format_unresolved_line writes, NUL
 * included. */
#define SGX_LEDGER_LINE_MAX \
    (SG_LEDGER_KEY_MAX + SG_LEDGER_METHOD_MAX + SG_LEDGER_URL_MAX + 128)

/*
 * sgx_ledger_format_unresolved_line - the line for @e, NUL-terminated,
 * without a newline.  Fields are separated by one space and none contains
 * a space:
 *
 *   KEY METHOD URL FIRST_SEEN ATTEMPTS LAST_OUTCOME STATE
 *
 * FIRST_SEEN is RFC 3339 UTC with milliseconds (2026-11-29T15:20:40.123Z);
 * ATTEMPTS a decimal count; LAST_OUTCOME the latest attempt's outcome name,
 * or "none" when no attempt was recorded; STATE "pending" or "unknown".
 *
 * Returns the length written (NUL not counted) if it succeeds, or one of
 * the following negative error codes:
 *   SG_EINVAL   @e or @buf is NULL;
 *   SG_ENOBUFS  @len is too small (SGX_LEDGER_LINE_MAX always fits); @buf
 *               then holds a truncated, NUL-terminated prefix.
 * Thread-safety: reentrant.
 */
int sgx_ledger_format_unresolved_line(const sg_ledger_entry *e, char *buf, size_t len);

#endif
