/*
 * HTTP fields, as the HTTP/2 transport checks a request's and sg-stream
 * turns its -H fields into HTTP/2 ones (fields.c).  Part of src/sgx/: code
 * the library and its programs share, compiled into both and never
 * exported (docs/design.md, Layers).
 */
#ifndef SGX_FIELDS_H
#define SGX_FIELDS_H

#include <stdbool.h>

/*
 * sgx_h2_connection_specific - whether the request field @name: @value is
 * one HTTP/2 does not carry (RFC 9113 §8.2.2): connection, keep-alive,
 * proxy-connection, transfer-encoding, upgrade, or a te other than
 * "trailers" (names and that value compared without regard to case).
 * The HTTP/2 transport refuses such a field; a caller turning HTTP/1.1
 * headers into HTTP/2 ones leaves them out.  NULL is never one.
 * Thread-safety: any thread.
 */
bool sgx_h2_connection_specific(const char *name, const char *value);

#endif
