/* sg-proxy: the C library's free memory given back after a burst of
 * streams (heap.c). */
#ifndef SG_PROXY_HEAP_H
#define SG_PROXY_HEAP_H

/* At start, before any other thread: one arena for the process (glibc's
 * M_ARENA_MAX 1) - one loop allocates, and what other threads allocate
 * (libcurl's resolver, heap_give_back's) comes from the same arena, not
 * from arenas of their own with 64 MB of address space each. */
void heap_init(void);
/* Gives back to the system every whole page the heap holds free,
 * wherever it is (malloc_trim), the blocks glibc's per-thread cache of
 * the calling thread holds among them. */
void heap_give_back(void);

#endif
