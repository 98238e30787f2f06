/* The lazy deadline heap (see dheap.h). */
#include "transport/dheap.h"

#include <stdlib.h>

#include <streamguard/core.h>

static void place(sg__dheap *h, size_t i, sg__dheap_node *n) {
    h->a[i] = n;
    n->idx = (uint32_t)i; /* (i < len <= UINT32_MAX: sg__dheap_push) */
}

static void sift_up(sg__dheap *h, size_t i) {
    sg__dheap_node *n = h->a[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->a[parent]->key <= n->key) {
            break;
        }
        place(h, i, h->a[parent]);
        i = parent;
    }
    place(h, i, n);
}

static void sift_down(sg__dheap *h, size_t i) {
    sg__dheap_node *n = h->a[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len) {
            break;
        }
        if (c + 1 < h->len && h->a[c + 1]->key < h->a[c]->key) {
            c++;
        }
        if (n->key <= h->a[c]->key) {
            break;
        }
        place(h, i, h->a[c]);
        i = c;
    }
    place(h, i, n);
}

void sg__dheap_init(sg__dheap *h, sg__dheap_deadline_fn deadline) {
    h->a = NULL;
    h->len = 0;
    h->cap = 0;
    h->deadline = deadline;
}

void sg__dheap_free(sg__dheap *h) {
    /* The nodes are not touched: their objects may already be gone. */
    free(h->a);
    h->a = NULL;
    h->len = 0;
    h->cap = 0;
}

int sg__dheap_push(sg__dheap *h, sg__dheap_node *n) {
    if (h->len == UINT32_MAX) {
        return SG_ENOMEM; /* (idx is 32 bits) */
    }
    if (h->len == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        sg__dheap_node **a = realloc(h->a, cap * sizeof(*a));
        if (a == NULL) {
            return SG_ENOMEM;
        }
        h->a = a;
        h->cap = cap;
    }
    n->key = h->deadline(n);
    n->in_heap = true;
    place(h, h->len++, n);
    sift_up(h, n->idx);
    return 0;
}

void sg__dheap_remove(sg__dheap *h, sg__dheap_node *n) {
    if (!n->in_heap) {
        return;
    }
    size_t i = n->idx;
    n->in_heap = false;
    sg__dheap_node *last = h->a[--h->len];
    if (i == h->len) {
        return;
    }
    place(h, i, last);
    sift_down(h, i);
    sift_up(h, last->idx);
}

void sg__dheap_set_key(sg__dheap *h, sg__dheap_node *n, int64_t key) {
    if (!n->in_heap) {
        return;
    }
    int64_t old = n->key;
    n->key = key;
    if (key < old) {
        sift_up(h, n->idx);
    } else {
        sift_down(h, n->idx);
    }
}

void sg__dheap_reschedule(sg__dheap *h, sg__dheap_node *n) {
    if (n->in_heap) {
        int64_t actual = h->deadline(n);
        if (actual < n->key) {
            n->key = actual;
            sift_up(h, n->idx);
        }
    }
}

void sg__dheap_rekey(sg__dheap *h, sg__dheap_node *n) {
    if (n->in_heap) {
        sg__dheap_set_key(h, n, h->deadline(n));
    }
}

int64_t sg__dheap_earliest(sg__dheap *h, sg__dheap_node **top) {
    while (h->len > 0) {
        sg__dheap_node *n = h->a[0];
        int64_t actual = h->deadline(n);
        if (actual <= n->key) {
            if (top != NULL) {
                *top = n;
            }
            return actual;
        }
        n->key = actual; /* stale: it moved later; sink it and look again */
        sift_down(h, 0);
    }
    if (top != NULL) {
        *top = NULL;
    }
    return SG_TIME_NEVER;
}
