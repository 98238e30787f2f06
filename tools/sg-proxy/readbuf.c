/*
 * One read buffer for every plain HTTP/1.1 transfer.
 *
 * libcurl before 8.0 gives every running transfer a read buffer of its own
 * (CURLOPT_BUFFERSIZE + 1 bytes, 16,385 by default) and frees it when the
 * transfer ends.  A slow stream's reads write its first bytes: a page of
 * it stays resident for the stream's life - 4 KiB of every open stream, a
 * fifth of what sg-proxy holds per stream - for bytes that are dead as
 * soon as the read that wrote them has been handed on.  libcurl 8.7 and
 * later keep one read buffer per multi, borrowed by each transfer for
 * the length of a read.  This does the same with libcurl 7.x: sg-proxy's
 * transfers on plain-http routes ask for reads of READBUF_SHARED_SIZE, and
 * the allocators libcurl is given (curl_global_init_mem) answer every
 * allocation of that size + 1 with the one shared buffer (and never free
 * it); every other allocation is plain malloc.  A stream then holds no
 * read buffer at all, receiving or quiet, and a read costs nothing more.
 *
 * Why that is safe: over HTTP/1.1 on a plain socket libcurl 7.x hands on
 * (or copies aside, when a transfer is paused: pausewrite) everything a
 * read wrote before it goes on to another transfer - the head's lines are
 * copied into their own buffer, the body goes to the write callback, a
 * chunked body is decoded piece by piece to it, and the loop reads again
 * only once it has - so between two transfers' reads the buffer holds
 * nothing either will read again.  One thread runs every transfer that
 * shares it (sg-proxy's loop; libcurl refuses a call into a multi from
 * its own callbacks).  Not shared: HTTP/2 (libcurl 7.88 writes a stream's
 * DATA into that stream's buffer and leaves it there until it reads), a
 * proxy (SOCKS keeps its handshake in the buffer between calls), TLS
 * (which may negotiate HTTP/2) - the caller shares only transfers that
 * have none of them, and readbuf_share pins HTTP/1.1.
 */
#ifndef _GNU_SOURCE
#    define _GNU_SOURCE /* MAP_ANONYMOUS (the unit test builds it alone) */
#endif
#include "readbuf.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* what libcurl allocates for a read of READBUF_SHARED_SIZE */
#define RB_BYTES ((size_t)READBUF_SHARED_SIZE + 1)

/* The buffer, its own mapping (its pages resident only once a read has
 * reached them); set once before libcurl is, never changed while it runs,
 * so libcurl's resolver threads read it without a lock. */
static void *shared;

static void *rb_malloc(size_t n) {
    return n == RB_BYTES ? shared : malloc(n);
}

static void rb_free(void *p) {
    if (p != shared) {
        free(p);
    }
}

static void *rb_realloc(void *p, size_t n) {
    if (p != shared) {
        return realloc(p, n); /* shared is set while these are libcurl's */
    }
    void *q = malloc(n); /* libcurl resizes no read buffer; kept whole if so */
    if (q != NULL) {
        memcpy(q, p, n < RB_BYTES ? n : RB_BYTES);
    }
    return q;
}

static char *rb_strdup(const char *s) {
    return strdup(s);
}

static void *rb_calloc(size_t n, size_t size) {
    return calloc(n, size);
}

int readbuf_init(void) {
    curl_version_info_data *v = curl_version_info(CURLVERSION_NOW);
    void *b = v->version_num < 0x080000 ? mmap(NULL, RB_BYTES, PROT_READ | PROT_WRITE,
                                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                        : MAP_FAILED;
    if (b == MAP_FAILED) { /* libcurl 8 reads otherwise; or no mapping */
        return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
    }
    shared = b;
    if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, rb_malloc, rb_free, rb_realloc,
                             rb_strdup, rb_calloc) != CURLE_OK) {
        munmap(shared, RB_BYTES);
        shared = NULL;
        return -1;
    }
    return 0;
}

void readbuf_cleanup(void) {
    curl_global_cleanup();
    if (shared != NULL) {
        munmap(shared, RB_BYTES);
    }
    shared = NULL;
}

bool readbuf_enabled(void) {
    return shared != NULL;
}

bool readbuf_share(CURL *e, const char *url) {
    if (shared == NULL || strlen(url) >= READBUF_SHARED_SIZE / 2) {
        return false;
    }
    if (curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1) !=
        CURLE_OK) {
        return false;
    }
    if (curl_easy_setopt(e, CURLOPT_BUFFERSIZE, (long)READBUF_SHARED_SIZE) != CURLE_OK) {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_NONE);
        return false;
    }
    return true;
}

const void *readbuf_shared(void) {
    return shared;
}
