/*
 * libcurl's read buffers placed on pages of their own, so that a managed
 * multi can give a quiet transfer's pages back (multi.c, give_back).
 *
 * libcurl before 8.0 gives every easy handle a read buffer of
 * CURLOPT_BUFFERSIZE + 1 bytes (16,385 by default) when its first
 * transfer starts and keeps it for the handle's life.  A slow stream's
 * reads write only its first bytes: of its four pages one is resident,
 * about 4 KiB of the ~19 an open stream holds, for bytes that are dead as
 * soon as the read that wrote them was handed on.  sg_curl_global_init
 * gives libcurl allocators (curl_global_init_mem) that place blocks of
 * exactly that size on pages of their own (posix_memalign) and remember
 * them; every other block goes to the application's allocators (or
 * malloc's) unchanged.
 *
 * Why giving the pages back is sound: over HTTP/1.x libcurl 7.x hands on
 * (or, for a paused transfer, copies aside) everything a read wrote before
 * the call that read it returns, so between calls into libcurl the buffer
 * holds nothing it will read again; MADV_DONTNEED makes the pages read as
 * zeros, and the next read faults one in again.  The multi gives back only
 * between its calls into libcurl, only the buffer of a transfer still in
 * libcurl whose response is HTTP/1.x (libcurl 7.88 may leave another
 * HTTP/2 stream's DATA in a buffer until that stream reads), and only a
 * block still registered here.
 */
#define _GNU_SOURCE
#include "curl/readbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define PAGE ((uintptr_t)4096)
/* CURLOPT_BUFFERSIZE's default, and the byte libcurl allocates beyond */
#define RB_BYTES ((size_t)CURL_MAX_WRITE_SIZE + 1)
/* its whole pages (the last byte shares a page with what follows) */
#define RB_PAGES ((size_t)CURL_MAX_WRITE_SIZE / PAGE * PAGE)

static atomic_bool enabled;
static unsigned inits; /* sg_curl_global_init calls not yet cleaned up */

/* The application's allocators (curl_global_init_mem), or libc's. */
static curl_malloc_callback base_malloc = malloc;
static curl_free_callback base_free = free;
static curl_realloc_callback base_realloc = realloc;
static curl_strdup_callback base_strdup = strdup;
static curl_calloc_callback base_calloc = calloc;

/* The placed blocks' addresses, an open-addressed table (0: empty) of its
 * own allocations (libc's).
 * libcurl may allocate and free from its resolver threads: locked; a free
 * looks only page-aligned pointers up. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *set;
static size_t cap, used;

static size_t slot_of(uintptr_t a, size_t mask) {
    return (size_t)((a >> 12) * 0x9E3779B97F4A7C15ull >> 20) & mask;
}

/* The slot holding @a, or the empty one where it would go (cap > 0). */
static size_t find(uintptr_t a) {
    size_t i = slot_of(a, cap - 1);
    while (set[i] != 0 && set[i] != a) {
        i = (i + 1) & (cap - 1);
    }
    return i;
}

static bool has(uintptr_t a) {
    return cap > 0 && a != 0 && set[find(a)] == a;
}

static bool add(uintptr_t a) {
    if ((used + 1) * 2 > cap) {
        size_t ncap = cap == 0 ? 256 : cap * 2;
        uintptr_t *n = calloc(ncap, sizeof(*n));
        if (n == NULL) {
            return false;
        }
        uintptr_t *old = set;
        size_t ocap = cap;
        set = n;
        cap = ncap;
        for (size_t k = 0; k < ocap; k++) {
            if (old[k] != 0) {
                set[find(old[k])] = old[k];
            }
        }
        free(old);
    }
    set[find(a)] = a;
    used++;
    return true;
}

/* Takes @a (present) out, moving up what probed past it. */
static void del(uintptr_t a) {
    const size_t mask = cap - 1;
    size_t i = find(a);
    set[i] = 0;
    used--;
    for (size_t j = (i + 1) & mask; set[j] != 0; j = (j + 1) & mask) {
        size_t home = slot_of(set[j], mask);
        /* it stays unless its home is cyclically outside (i, j] */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            set[i] = set[j];
            set[j] = 0;
            i = j;
        }
    }
}

/* Whether @p was placed here; it is not any more. */
static bool unplace(void *p) {
    if (((uintptr_t)p & (PAGE - 1)) != 0 || p == NULL) {
        return false;
    }
    pthread_mutex_lock(&lock);
    bool ours = has((uintptr_t)p);
    if (ours) {
        del((uintptr_t)p);
    }
    pthread_mutex_unlock(&lock);
    return ours;
}

static void *rb_malloc(size_t n) {
    if (n != RB_BYTES) {
        return base_malloc(n);
    }
    /* page-aligned, from libc whatever the application's allocators:
     * posix_memalign gives the room before and after the block back to
     * malloc's free lists, where small blocks use it (a block one page
     * larger, aligned inside, would leave ~4 KiB of every stream's
     * resident pages unused) */
    void *p = NULL;
    if (posix_memalign(&p, PAGE, RB_BYTES) != 0) {
        return NULL;
    }
    pthread_mutex_lock(&lock);
    bool added = add((uintptr_t)p);
    pthread_mutex_unlock(&lock);
    if (!added) {
        free(p);
        return NULL;
    }
    return p;
}

static void rb_free(void *p) {
    if (unplace(p)) {
        free(p); /* posix_memalign's */
    } else {
        base_free(p);
    }
}

static void *rb_realloc(void *p, size_t n) {
    if (p == NULL || ((uintptr_t)p & (PAGE - 1)) != 0) {
        return base_realloc(p, n);
    }
    pthread_mutex_lock(&lock);
    bool ours = has((uintptr_t)p);
    pthread_mutex_unlock(&lock);
    if (!ours) {
        return base_realloc(p, n); /* a block grown to the size is not placed */
    }
    void *q = n > 0 ? rb_malloc(n) : NULL;
    if (q != NULL || n == 0) {
        if (q != NULL) {
            memcpy(q, p, n < RB_BYTES ? n : RB_BYTES);
        }
        rb_free(p);
    }
    return q;
}

int sg_curl_global_init_mem(long flags, curl_malloc_callback m, curl_free_callback f,
                            curl_realloc_callback r, curl_strdup_callback s,
                            curl_calloc_callback c) {
    bool given = m != NULL || f != NULL || r != NULL || s != NULL || c != NULL;
    if (given && (m == NULL || f == NULL || r == NULL || s == NULL || c == NULL)) {
        return SG_EINVAL;
    }
    if (inits > 0) {
        /* libcurl counts its inits; the allocators stay the first's */
        if (curl_global_init(flags) != CURLE_OK) {
            return SG_ECURL;
        }
        inits++;
        return 0;
    }
    if (curl_version_info(CURLVERSION_NOW)->version_num >= 0x080000) {
        /* its read buffer is another matter there: nothing placed */
        CURLcode rc =
            given ? curl_global_init_mem(flags, m, f, r, s, c) : curl_global_init(flags);
        if (rc != CURLE_OK) {
            return SG_ECURL;
        }
        inits = 1;
        return 0;
    }
    base_malloc = given ? m : malloc;
    base_free = given ? f : free;
    base_realloc = given ? r : realloc;
    base_strdup = given ? s : strdup;
    base_calloc = given ? c : calloc;
    /* strings and zeroed blocks are never a read buffer: the base's own */
    if (curl_global_init_mem(flags, rb_malloc, rb_free, rb_realloc, base_strdup,
                             base_calloc) != CURLE_OK) {
        return SG_ECURL;
    }
    inits = 1;
    atomic_store(&enabled, true);
    return 0;
}

int sg_curl_global_init(long flags) {
    return sg_curl_global_init_mem(flags, NULL, NULL, NULL, NULL, NULL);
}

void sg_curl_global_cleanup(void) {
    if (inits == 0) {
        return;
    }
    curl_global_cleanup();
    if (--inits > 0) {
        return;
    }
    atomic_store(&enabled, false);
    pthread_mutex_lock(&lock);
    free(set);
    set = NULL;
    cap = used = 0;
    pthread_mutex_unlock(&lock);
}

bool sg__curl_readbuf_on(void) {
    return atomic_load_explicit(&enabled, memory_order_relaxed);
}

void *sg__curl_readbuf_of(const void *p, size_t len) {
    if (!sg__curl_readbuf_on() || len == 0) {
        return NULL;
    }
    uintptr_t at = (uintptr_t)p, page = at & ~(PAGE - 1);
    void *found = NULL;
    pthread_mutex_lock(&lock);
    for (uintptr_t k = 0; k * PAGE <= RB_PAGES && page >= k * PAGE; k++) {
        uintptr_t b = page - k * PAGE;
        if (has(b)) {
            if (at + len <= b + RB_BYTES) {
                found = (void *)b;
            }
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return found;
}

void sg__curl_readbuf_give_back(void *buf) {
    pthread_mutex_lock(&lock);
    if (has((uintptr_t)buf)) {
        (void)madvise(buf, RB_PAGES, MADV_DONTNEED);
    }
    pthread_mutex_unlock(&lock);
}
