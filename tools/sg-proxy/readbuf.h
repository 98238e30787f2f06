/* sg-proxy: one read buffer for every plain HTTP/1.1 transfer (readbuf.c). */
#ifndef SG_PROXY_READBUF_H
#define SG_PROXY_READBUF_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

/* The receive size of a transfer that reads into the shared buffer (its
 * CURLOPT_BUFFERSIZE): libcurl allocates one byte more for it, a size
 * none of its other allocations on such a transfer can have - every part
 * of a URL it copies is shorter than the URL (readbuf_share refuses one
 * over half this), every response header it keeps is under its cap of
 * 100 KiB, and its own fixed buffers are 16, 32 and 64 KiB. */
#define READBUF_SHARED_SIZE (128 * 1024)

/* curl_global_init(CURL_GLOBAL_DEFAULT), with libcurl given allocators
 * (before 8.0) that hand every transfer readbuf_share set up the one
 * shared read buffer; 0 when libcurl is set up. */
int readbuf_init(void);
/* curl_global_cleanup, and the shared buffer.  No transfer may run. */
void readbuf_cleanup(void);
/* Whether transfers can share the read buffer (readbuf_init, libcurl
 * before 8.0). */
bool readbuf_enabled(void);
/* Transfer @e (not started; @url the longest URL any of its attempts
 * goes to) reads into the shared buffer.  The caller sees to it that
 * every attempt goes to a plain http:// URL with no proxy between, and
 * that every transfer sharing the buffer runs on one thread (one loop's
 * multi); @e speaks HTTP/1.1 (set here).  False, @e left as it was, when
 * it does not share (readbuf_enabled false, or @url of half
 * READBUF_SHARED_SIZE or more). */
bool readbuf_share(CURL *e, const char *url);
/* The shared buffer (NULL before readbuf_init or when not enabled). */
const void *readbuf_shared(void);

#endif
