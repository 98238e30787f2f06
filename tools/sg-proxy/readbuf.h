/* sg-proxy: libcurl's read buffers given back while their streams are
 * quiet (readbuf.c). */
#ifndef SG_PROXY_READBUF_H
#define SG_PROXY_READBUF_H

#include <stdbool.h>
#include <stddef.h>

/* How long a stream's upstream is quiet before its read buffer's pages go
 * back to the system. */
#define READBUF_QUIET_NS (500 * 1000 * 1000LL)

/* curl_global_init(CURL_GLOBAL_DEFAULT), with libcurl's read buffers
 * placed on pages of their own where libcurl keeps one per easy handle
 * (before 8.0); 0 when libcurl is set up. */
int readbuf_init(void);
/* curl_global_cleanup, and what readbuf_init made. */
void readbuf_cleanup(void);
/* Whether libcurl's read buffers are placed so (readbuf_init). */
bool readbuf_enabled(void);
/* The read buffer holding @p, one of @len bytes libcurl just gave (its
 * write callback's), or NULL when it is none of them. */
void *readbuf_of(const void *p, size_t len);
/* Gives back the pages of read buffer @buf (readbuf_of's): they read as
 * zeros, and are faulted in again by the next read into them.  Only
 * between calls into libcurl, which holds nothing in it then. */
void readbuf_give_back(void *buf);

#endif
