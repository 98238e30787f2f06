/*
 * The clock and the timer heap: one binary min-heap of deadlines, so the
 * loop has no fixed tick and epoll_wait sleeps exactly until the earliest
 * timer.  The heap is a value the server owns and passes in; nothing here
 * knows about connections.
 */
#include "fakemodel.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>

int64_t sg_fm_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t sg_fm_add_ms(int64_t t, int64_t ms) {
    if (ms == SG_FM_FOREVER || ms > (INT64_MAX - t) / SG_FM_NS_PER_MS) {
        return SG_FM_FOREVER;
    }
    return t + ms * SG_FM_NS_PER_MS;
}

void sg_fm_timer_init(sg_fm_timer *t, void (*cb)(sg_fm_timer *t)) {
    t->due = 0;
    t->seq = 0;
    t->idx = SIZE_MAX;
    t->cb = cb;
}

static int timer_less(const sg_fm_timer *a, const sg_fm_timer *b) {
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_set(sg_fm_timers *ts, size_t i, sg_fm_timer *t) {
    ts->heap[i] = t;
    t->idx = i;
}

static void heap_up(sg_fm_timers *ts, size_t i) {
    sg_fm_timer *t = ts->heap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!timer_less(t, ts->heap[p])) {
            break;
        }
        heap_set(ts, i, ts->heap[p]);
        i = p;
    }
    heap_set(ts, i, t);
}

static void heap_down(sg_fm_timers *ts, size_t i) {
    sg_fm_timer *t = ts->heap[i];
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= ts->len) {
            break;
        }
        size_t m = l;
        if (l + 1 < ts->len && timer_less(ts->heap[l + 1], ts->heap[l])) {
            m = l + 1;
        }
        if (!timer_less(ts->heap[m], t)) {
            break;
        }
        heap_set(ts, i, ts->heap[m]);
        i = m;
    }
    heap_set(ts, i, t);
}

void sg_fm_timer_disarm(sg_fm_timers *ts, sg_fm_timer *t) {
    if (t->idx == SIZE_MAX) {
        return;
    }
    size_t i = t->idx;
    t->idx = SIZE_MAX;
    ts->len--;
    if (i == ts->len) {
        return;
    }
    heap_set(ts, i, ts->heap[ts->len]);
    heap_up(ts, i);
    heap_down(ts, ts->heap[i]->idx);
}

/* O(log n); a timer already armed is moved, never duplicated. */
int sg_fm_timer_arm(sg_fm_timers *ts, sg_fm_timer *t, int64_t due) {
    sg_fm_timer_disarm(ts, t);
    if (due == SG_FM_FOREVER) {
        return 0;
    }
    if (ts->len == ts->cap) {
        size_t cap = ts->cap ? ts->cap * 2 : 256;
        sg_fm_timer **nh = realloc(ts->heap, cap * sizeof(*nh));
        if (nh == NULL) {
            return -1;
        }
        ts->heap = nh;
        ts->cap = cap;
    }
    t->due = due;
    t->seq = ts->seq++;
    heap_set(ts, ts->len++, t);
    heap_up(ts, t->idx);
    return 0;
}

/*
 * Runs the timers due now, but only those armed before this pass began: a
 * callback that re-arms itself for "now" (a runaway stream yielding) runs on
 * the next loop turn, after epoll has had its say.
 */
void sg_fm_timers_run(sg_fm_timers *ts) {
    int64_t now = sg_fm_now();
    uint64_t snapshot = ts->seq;
    while (ts->len > 0 && ts->heap[0]->due <= now && ts->heap[0]->seq < snapshot) {
        sg_fm_timer *t = ts->heap[0];
        sg_fm_timer_disarm(ts, t);
        t->cb(t);
    }
}

int sg_fm_timers_timeout_ms(const sg_fm_timers *ts) {
    if (ts->len == 0) {
        return -1;
    }
    int64_t d = ts->heap[0]->due - sg_fm_now();
    if (d <= 0) {
        return 0;
    }
    /* Rounded up: waking early would only spin. */
    int64_t ms = (d + SG_FM_NS_PER_MS - 1) / SG_FM_NS_PER_MS;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

void sg_fm_timers_free(sg_fm_timers *ts) {
    free(ts->heap);
    ts->heap = NULL;
    ts->len = 0;
    ts->cap = 0;
}
