/* sg-proxy: what has been quiet longest, first (the read buffers
 * readbuf.c gives back).
 *
 * An intrusive list kept in the order of each entry's last touch: a touch
 * moves its entry to the tail, stamped with the time of the touch, so with
 * a clock that never goes back the head is always the entry quiet longest.
 * Touching, removing and taking the next entry quiet long enough are O(1):
 * a loop that gives back every buffer quiet for 500 ms visits only those,
 * never every open stream.  Not thread-safe: one loop owns a list. */
#ifndef SG_PROXY_QUIET_H
#define SG_PROXY_QUIET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <streamguard/streamguard.h> /* SG_TIME_NEVER, sg_time_add */

struct quiet_link {
    struct quiet_link *prev, *next;
    int64_t at; /* the last touch */
    bool in;    /* in a list */
};

struct quiet_list {
    struct quiet_link *head, *tail; /* quiet longest; touched last */
};

/* Takes @e out of @l (nothing when it is in none). */
static inline void quiet_remove(struct quiet_list *l, struct quiet_link *e) {
    if (!e->in) {
        return;
    }
    if (e->prev != NULL) {
        e->prev->next = e->next;
    } else {
        l->head = e->next;
    }
    if (e->next != NULL) {
        e->next->prev = e->prev;
    } else {
        l->tail = e->prev;
    }
    e->prev = e->next = NULL;
    e->in = false;
}

/* @e was active at @now: to the tail of @l.  A @now before the tail's
 * (a clock read earlier, on the same loop) counts as the tail's, so the
 * order holds. */
static inline void quiet_touch(struct quiet_list *l, struct quiet_link *e, int64_t now) {
    quiet_remove(l, e);
    if (l->tail != NULL && now < l->tail->at) {
        now = l->tail->at;
    }
    e->at = now;
    e->prev = l->tail;
    e->next = NULL;
    if (l->tail != NULL) {
        l->tail->next = e;
    } else {
        l->head = e;
    }
    l->tail = e;
    e->in = true;
}

/* The entry of @l quiet for at least @quiet at @now, taken out of @l; NULL
 * when none is. */
static inline struct quiet_link *quiet_take_due(struct quiet_list *l, int64_t now,
                                                int64_t quiet) {
    struct quiet_link *e = l->head;
    if (e == NULL || now < sg_time_add(e->at, quiet)) {
        return NULL;
    }
    quiet_remove(l, e);
    return e;
}

/* When the next entry of @l will have been quiet for @quiet
 * (SG_TIME_NEVER: none is in it). */
static inline int64_t quiet_next(const struct quiet_list *l, int64_t quiet) {
    return l->head != NULL ? sg_time_add(l->head->at, quiet) : SG_TIME_NEVER;
}

#endif
