/* libcurl's read buffers on pages of their own, given back while their
 * transfers are quiet (readbuf.c; the public part is sg_curl_global_init
 * in <streamguard/curl.h>). */
#ifndef SG_CURL_READBUF_H
#define SG_CURL_READBUF_H

#include <stdbool.h>
#include <stddef.h>

#include <streamguard/curl.h>

/* Whether libcurl's read buffers are placed (sg_curl_global_init, libcurl
 * before 8.0). */
bool sg__curl_readbuf_on(void);
/* The placed read buffer holding the @len bytes at @p (a write or header
 * callback's), or NULL when they are in none. */
void *sg__curl_readbuf_of(const void *p, size_t len);
/* Gives the whole pages of read buffer @buf back to the system, if it is
 * still placed: they read as zeros until written again.  Only between
 * calls into libcurl, and only for an HTTP/1.x transfer's (readbuf.c). */
void sg__curl_readbuf_give_back(void *buf);

#endif
