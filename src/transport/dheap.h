/*
 * A min-heap of deadlines with lazy keys, shared by the event loops (the
 * libcurl multi, the HTTP/2 connection).  Nodes are embedded in the
 * caller's objects, so tracking an object allocates nothing beyond the
 * heap's array, which grows by doubling.
 *
 * Lazy keys: a node's key may be EARLIER than its object's real deadline
 * (an item moved the idle deadline later without touching the heap: a
 * timestamp per item, no re-arm).  The real deadline is asked for only when
 * the node reaches the top.  A deadline that moves EARLIER must be reported
 * with sg__dheap_reschedule (O(log n)).
 */
#ifndef SG_TRANSPORT_DHEAP_H
#define SG_TRANSPORT_DHEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sg__dheap_node {
    int64_t key;  /* <= the object's real deadline while in the heap */
    uint32_t idx; /* (a heap holds at most UINT32_MAX: one node per open stream) */
    bool in_heap;
} sg__dheap_node;

/* The object's real next deadline (SG_TIME_NEVER for none). */
typedef int64_t (*sg__dheap_deadline_fn)(const sg__dheap_node *node);

typedef struct sg__dheap {
    sg__dheap_node **a;
    size_t len;
    size_t cap;
    sg__dheap_deadline_fn deadline;
} sg__dheap;

void sg__dheap_init(sg__dheap *h, sg__dheap_deadline_fn deadline);
/* Frees the array; the nodes (possibly freed already) are not touched. */
void sg__dheap_free(sg__dheap *h);
/* Adds @n keyed by its real deadline.  0, or SG_ENOMEM. */
int sg__dheap_push(sg__dheap *h, sg__dheap_node *n);
/* Removes @n if it is in the heap. */
void sg__dheap_remove(sg__dheap *h, sg__dheap_node *n);
/* @n's deadline may have moved earlier: re-key it if so. */
void sg__dheap_reschedule(sg__dheap *h, sg__dheap_node *n);
/* Sets @n's key to its real deadline, whichever way it moved. */
void sg__dheap_rekey(sg__dheap *h, sg__dheap_node *n);
/* Sets @n's key explicitly (e.g. "look again at t"), either direction. */
void sg__dheap_set_key(sg__dheap *h, sg__dheap_node *n, int64_t key);
/* The earliest real deadline (stale keys on top corrected first), and its
 * node in *@top (NULL when empty: then SG_TIME_NEVER). */
int64_t sg__dheap_earliest(sg__dheap *h, sg__dheap_node **top);

#endif
