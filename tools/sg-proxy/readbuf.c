/*
 * libcurl's read buffers given back while their streams are quiet.
 *
 * libcurl before 8.0 gives every easy handle a read buffer of
 * CURLOPT_BUFFERSIZE + 1 bytes (16,385 by default) when its first transfer
 * starts, and keeps it for the handle's life (8.7 and later keep one per
 * multi).  Reads write only its first bytes on a slow stream, so of its
 * four pages one is resident: about 4 KiB of every open stream, a fifth of
 * what sg-proxy holds per stream, for bytes that are dead as soon as the
 * read that wrote them has been handed on.  A smaller buffer costs CPU per
 * item on a fast stream (measured: bench/RESULTS.md); instead, each read
 * buffer is placed on pages of its own (libcurl is given allocators,
 * curl_global_init_mem, that do so for allocations of exactly that size
 * and no other), and a stream whose upstream has been quiet for
 * READBUF_QUIET_NS gives its pages back (MADV_DONTNEED): they read as
 * zeros, and the next read into them faults them in again.
 *
 * Why that is safe: over HTTP/1.1 libcurl 7.x hands on (or copies, when a
 * transfer is paused) everything a read wrote before the call that read it
 * returns, so between calls the buffer holds nothing it will read again;
 * sg-proxy gives a buffer back only between calls (its loop), only on a
 * route whose every endpoint is plain http:// (no HTTP/2 over TLS, where
 * libcurl 7.88 may write another stream's DATA into its buffer and leave it
 * there until that stream reads), and only a buffer still registered here
 * (a handle freed since is not touched).  Registered are the blocks libcurl
 * asks malloc for at exactly the read buffer's size; the pointer a write
 * callback got finds its block.
 */
#ifndef _GNU_SOURCE
#    define _GNU_SOURCE /* madvise, MADV_DONTNEED (the unit test builds it alone) */
#endif
#include "readbuf.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE 4096u
/* CURLOPT_BUFFERSIZE's default, and the + 1 libcurl allocates */
#define RB_BYTES (CURL_MAX_WRITE_SIZE + 1)
/* its whole pages (the last byte shares a page with what follows) */
#define RB_PAGES_BYTES ((size_t)CURL_MAX_WRITE_SIZE / PAGE * PAGE)

static bool enabled;

/* The registered blocks: an open-addressed set of page-aligned addresses
 * (0 empty), its own allocations through plain malloc.  libcurl may
 * allocate and free from its resolver threads: the set is locked, and only
 * page-aligned pointers (few but ours) are looked up on free. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *set;
static size_t cap, used;

static size_t slot_of(uintptr_t a, size_t mask) {
    return (size_t)((a >> 12) * 0x9E3779B97F4A7C15ull >> 20) & mask;
}

static bool set_has(uintptr_t a) {
    if (cap == 0 || a == 0) {
        return false;
    }
    for (size_t i = slot_of(a, cap - 1);; i = (i + 1) & (cap - 1)) {
        if (set[i] == a) {
            return true;
        }
        if (set[i] == 0) {
            return false;
        }
    }
}

static bool set_add(uintptr_t a) {
    if ((used + 1) * 2 > cap) {
        size_t ncap = cap == 0 ? 256 : cap * 2;
        uintptr_t *n = calloc(ncap, sizeof(*n));
        if (n == NULL) {
            return false;
        }
        for (size_t k = 0; k < cap; k++) {
            if (set[k] != 0) {
                size_t i = slot_of(set[k], ncap - 1);
                while (n[i] != 0) {
                    i = (i + 1) & (ncap - 1);
                }
                n[i] = set[k];
            }
        }
        free(set);
        set = n;
        cap = ncap;
    }
    size_t i = slot_of(a, cap - 1);
    while (set[i] != 0) {
        i = (i + 1) & (cap - 1);
    }
    set[i] = a;
    used++;
    return true;
}

/* Removes @a (present) and moves up what probed past it. */
static void set_del(uintptr_t a) {
    size_t mask = cap - 1, i = slot_of(a, mask);
    while (set[i] != a) {
        i = (i + 1) & mask;
    }
    set[i] = 0;
    used--;
    for (size_t j = (i + 1) & mask; set[j] != 0; j = (j + 1) & mask) {
        uintptr_t v = set[j];
        size_t home = slot_of(v, mask);
        /* v stays unless its home is cyclically outside (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            set[i] = v;
            set[j] = 0;
            i = j;
        }
    }
}

static bool is_ours(void *p) {
    if (((uintptr_t)p & (PAGE - 1)) != 0) {
        return false;
    }
    pthread_mutex_lock(&lock);
    bool ours = set_has((uintptr_t)p);
    pthread_mutex_unlock(&lock);
    return ours;
}

static void *rb_malloc(size_t n) {
    if (n != RB_BYTES) {
        return malloc(n);
    }
    void *p = NULL;
    if (posix_memalign(&p, PAGE, n) != 0) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    bool added = set_add((uintptr_t)p);
    pthread_mutex_unlock(&lock);
    if (!added) {
        free(p);
        return NULL;
    }
    return p;
}

static void rb_free(void *p) {
    if (p != NULL && ((uintptr_t)p & (PAGE - 1)) == 0) {
        pthread_mutex_lock(&lock);
        if (set_has((uintptr_t)p)) {
            set_del((uintptr_t)p);
        }
        pthread_mutex_unlock(&lock);
    }
    free(p);
}

static void *rb_realloc(void *p, size_t n) {
    if (!is_ours(p)) {
        return realloc(p, n); /* a block grown to the size is not one */
    }
    void *q = malloc(n);
    if (q != NULL) {
        memcpy(q, p, n < RB_BYTES ? n : RB_BYTES);
        rb_free(p);
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
    if (v->version_num >= 0x080000) {
        return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
    }
    if (curl_global_init_mem(CURL_GLOBAL_DEFAULT, rb_malloc, rb_free, rb_realloc,
                             rb_strdup, rb_calloc) != CURLE_OK) {
        return -1;
    }
    enabled = true;
    return 0;
}

void readbuf_cleanup(void) {
    curl_global_cleanup();
    pthread_mutex_lock(&lock);
    free(set);
    set = NULL;
    cap = used = 0;
    enabled = false;
    pthread_mutex_unlock(&lock);
}

bool readbuf_enabled(void) {
    return enabled;
}

void *readbuf_of(const void *p, size_t len) {
    if (!enabled || len == 0) {
        return NULL;
    }
    uintptr_t at = (uintptr_t)p, page = at & ~(uintptr_t)(PAGE - 1);
    void *found = NULL;
    pthread_mutex_lock(&lock);
    for (uintptr_t k = 0; k * PAGE <= CURL_MAX_WRITE_SIZE && page >= k * PAGE; k++) {
        uintptr_t b = page - k * PAGE;
        if (set_has(b)) {
            if (at + len <= b + RB_BYTES) {
                found = (void *)b;
            }
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void readbuf_give_back(void *buf) {
    pthread_mutex_lock(&lock);
    if (set_has((uintptr_t)buf)) {
        (void)madvise(buf, RB_PAGES_BYTES, MADV_DONTNEED);
    }
    pthread_mutex_unlock(&lock);
}
