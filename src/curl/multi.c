/*
 * The managed multi: libcurl's multi_socket API on epoll, with exactly one
 * timer (a timerfd on CLOCK_MONOTONIC, absolute, nanosecond resolution)
 * armed for the earliest of libcurl's own timeout and every operation's
 * next deadline.  No fixed tick: the loop sleeps until something is due.
 *
 * Operations sit in a binary min-heap keyed by their next deadline.  Keys
 * are lazy: an item moves an operation's idle deadline later without
 * touching the heap (a timestamp per item, no re-arm); the key is corrected
 * when the operation reaches the top.  Only a deadline that moves earlier
 * (the first item swapping a long first-item clock for a short idle clock)
 * sifts up, O(log n).
 */
#define _GNU_SOURCE
#include "curl/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

struct sg_curl_multi {
    CURLM *multi;
    int epfd;
    int tfd;
    sg_clock clock;
    const sg_clock *clk;   /* &clock, or NULL: the system's */
    int64_t curl_timer_at; /* libcurl's requested timeout, absolute */
    int64_t armed_at;      /* the timerfd's: never after a deadline */
    sg__dheap heap;        /* every running operation, by next deadline */
    int running;
    sg_retry_budget *retry_budget; /* for operations without their own */
    sg__watch intents;             /* operations waiting for their intent */
    sg__health_slot health;        /* for operations without their own */
    sg_curl_op *detach_head;       /* stopped transfers to remove (op.c) */
    sg_curl_op *detach_tail;
    sg_curl_op *detach_untold; /* the first whose server is not told yet */
    /* HTTP/2 transfers by their connection's local port, and the
     * connections that hold a stopped stream's RST_STREAM (nudge_conns) */
    struct conn_list *conns;
    size_t nconns;
    struct nudge *nudge;
    size_t nnudge, nudge_cap;
    bool stepping;        /* inside sg_curl_multi_step: its run_due nudges */
    sg__curl_quiet quiet; /* transfers whose read buffer goes when quiet */
};

struct conn_list {
    sg__curl_conn_link *head;
    uint64_t queued_key; /* the connection queued in nudge, if queued */
    bool queued;
};

struct nudge {
    uint64_t key;
    uint16_t port;
};

static int64_t multi_now(const sg_curl_multi *m) {
    return sg_clock_now(m->clk);
}

static void rearm(sg_curl_multi *m);
static void arm_timer(sg_curl_multi *m, int64_t at);

static int64_t wake_after(const sg_curl_multi *m, int64_t due) { /* work to do */
    int64_t clocks = sg_time_min(m->curl_timer_at, due);
    return sg_time_min(clocks, sg__curl_quiet_wake(&m->quiet, clocks));
}

/* ------------------------------------------------------------------ heap */

#define OP_OF(n) ((sg_curl_op *)((char *)(n)-offsetof(sg_curl_op, node)))

static int64_t node_deadline(const sg__dheap_node *n) {
    return sg_curl_op_next_deadline(
        (const sg_curl_op *)((const char *)n - offsetof(sg_curl_op, node)));
}

void sg__curl_multi_reschedule(sg_curl_multi *m, sg_curl_op *op) {
    sg__dheap_reschedule(&m->heap, &op->node);
    if (op->node.in_heap && op->node.key < m->armed_at) {
        /* An earlier deadline must wake a caller's loop too.  The key is
         * never later than the real deadline, so at worst this wakes early
         * and the step re-arms; a deadline that moved later costs nothing. */
        rearm(m);
    }
}

void sg__curl_multi_forget(sg_curl_multi *m, sg_curl_op *op) {
    sg__curl_multi_unquiet(op);
    if (op->node.in_heap) {
        sg__dheap_remove(&m->heap, &op->node);
        if (op->root == NULL) {
            m->running--; /* hedge slots were never counted */
        }
    }
    op->owner = NULL;
}

/* The list is FIFO: the server is told, and connections close, in the
 * order the streams were decided.  The ops from detach_untold on have not
 * been told yet (teardown tells them after the step's decisions). */
void sg__curl_multi_defer_detach(sg_curl_multi *m, sg_curl_op *op) {
    op->detach_pending = true;
    op->detach_at = multi_now(m);
    op->detacher = m;
    op->detach_next = NULL;
    op->detach_prev = m->detach_tail;
    if (m->detach_tail != NULL) {
        m->detach_tail->detach_next = op;
    } else {
        m->detach_head = op;
    }
    m->detach_tail = op;
    if (m->detach_untold == NULL) {
        m->detach_untold = op;
    }
}

void sg__curl_multi_undefer(sg_curl_multi *m, sg_curl_op *op) {
    if (m->detach_untold == op) {
        m->detach_untold = op->detach_next;
    }
    if (op->detach_prev != NULL) {
        op->detach_prev->detach_next = op->detach_next;
    } else {
        m->detach_head = op->detach_next;
    }
    if (op->detach_next != NULL) {
        op->detach_next->detach_prev = op->detach_prev;
    } else {
        m->detach_tail = op->detach_prev;
    }
    op->detach_next = NULL;
    op->detach_prev = NULL;
    op->detacher = NULL;
}

void sg__curl_multi_unquiet(sg_curl_op *op) {
    if (op->quiet_in) {
        sg__curl_quiet_remove(&op->owner->quiet, op); /* owner set while in */
    }
}

void sg__curl_multi_touch(sg_curl_multi *m, sg_curl_op *op, int64_t now) {
    if (sg__curl_quiet_touch(&m->quiet, op, now)) {
        rearm(m); /* the first: it is next */
    }
}

/* ------------------------------------- HTTP/2 transfers by connection */

/* libcurl shows a running transfer's connection only through its prereq
 * callback (CURLINFO_ACTIVESOCKET answers once the transfer is done): the
 * two ends of the TCP connection, which name it.  The lists are indexed
 * by the local port (24 bytes per port up to the highest seen); the key,
 * a hash of both ends, tells apart connections to other servers from the
 * same port. */
static uint64_t conn_key(const char *primary_ip, const char *local_ip, int primary_port,
                         int local_port) {
    uint64_t h = 14695981039346656037ULL; /* FNV-1a */
    for (const char *p = primary_ip; p != NULL && *p != '\0'; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    }
    h = (h ^ '|') * 1099511628211ULL;
    for (const char *p = local_ip; p != NULL && *p != '\0'; p++) {
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    }
    h = (h ^ (uint64_t)(uint32_t)primary_port) * 1099511628211ULL;
    return (h ^ (uint64_t)(uint32_t)local_port) * 1099511628211ULL;
}

void sg__curl_multi_leave_conn(sg_curl_op *op) {
    sg__curl_conn_link *l = op->conn;
    if (l == NULL) {
        return;
    }
    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else {
        l->m->conns[l->port].head = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    }
    free(l);
    op->conn = NULL;
}

/* O(1) but for an allocation.  Without memory the transfer joins no list:
 * a stopped neighbour's RST_STREAM then waits for the connection's next
 * I/O, as it would without this. */
void sg__curl_multi_join_conn(sg_curl_multi *m, sg_curl_op *op, const char *primary_ip,
                              const char *local_ip, int primary_port, int local_port) {
    sg__curl_multi_leave_conn(op);
    if (local_port <= 0 || local_port > 65535) {
        return;
    }
    const size_t port = (size_t)local_port;
    if (port >= m->nconns) {
        size_t n = m->nconns > 0 ? m->nconns : 1024;
        while (n <= port) {
            n *= 2;
        }
        n = n > 65536 ? 65536 : n;
        struct conn_list *cl = realloc(m->conns, n * sizeof(*cl));
        if (cl == NULL) {
            return;
        }
        memset(cl + m->nconns, 0, (n - m->nconns) * sizeof(*cl));
        m->conns = cl;
        m->nconns = n;
    }
    sg__curl_conn_link *l = malloc(sizeof(*l));
    if (l == NULL) {
        return;
    }
    l->m = m;
    l->op = op;
    l->key = conn_key(primary_ip, local_ip, primary_port, local_port);
    l->port = (uint16_t)port;
    l->prev = NULL;
    l->next = m->conns[port].head;
    if (l->next != NULL) {
        l->next->prev = l;
    }
    m->conns[port].head = l;
    op->conn = l;
}

/* A stopped transfer has left connection @key (from local @port): one of
 * the others on it takes its RST_STREAM out at the end of the step. */
static void queue_nudge(sg_curl_multi *m, uint16_t port, uint64_t key) {
    struct conn_list *l = &m->conns[port];
    if (l->head == NULL || (l->queued && l->queued_key == key)) {
        return; /* none left on it (its connection closes), or queued */
    }
    if (m->nnudge == m->nudge_cap) {
        size_t n = m->nudge_cap > 0 ? 2 * m->nudge_cap : 16;
        struct nudge *q = realloc(m->nudge, n * sizeof(*q));
        if (q == NULL) {
            return; /* it waits for the connection's next I/O */
        }
        m->nudge = q;
        m->nudge_cap = n;
    }
    m->nudge[m->nnudge].port = port;
    m->nudge[m->nnudge].key = key;
    m->nnudge++;
    l->queued = true;
    l->queued_key = key;
    if (!m->stepping) {
        /* removed from the caller's code (an operation freed): the next
         * step, now */
        arm_timer(m, multi_now(m));
    }
}

/* libcurl 7.88 writes the RST_STREAM of an HTTP/2 stream removed mid-way
 * into its connection's output buffer (a frame under 1 KiB is not sent at
 * once: lib/http2.c send_callback), sent only with the connection's next
 * read or write: with its streams all quiet (a slow first token, a stall
 * not due, tokens seconds apart) for seconds, while the server generates
 * for a client that is gone.  Unpausing a transfer sends the buffer
 * (http2_data_pause calls h2_session_send), and curl_easy_pause does
 * nothing unless the state changes: so one running, unpaused transfer on
 * each connection that lost a stream in this step is paused and unpaused
 * at once (none of its bytes held).  One nudge per connection per step,
 * O(1) but for the transfers passed over (paused by their reader, or on
 * another connection from the same port); a connection whose every
 * transfer is paused keeps the RST_STREAM until one resumes. */
static void nudge_conns(sg_curl_multi *m) {
    for (size_t i = 0; i < m->nnudge; i++) {
        const struct nudge *n = &m->nudge[i];
        m->conns[n->port].queued = false;
        for (sg__curl_conn_link *l = m->conns[n->port].head; l != NULL; l = l->next) {
            sg_curl_op *op = l->op;
            if (op->in_multi && !op->at.paused && l->key == n->key) {
                curl_easy_pause(op->easy, CURLPAUSE_RECV);
                curl_easy_pause(op->easy, CURLPAUSE_CONT);
                break;
            }
        }
    }
    m->nnudge = 0;
}

/* A stopped transfer is removed with reuse forbidden: its connection
 * closes when this transfer was its last (HTTP/1.1 closes a transfer
 * stopped mid-body anyway); while others use it, one of them takes the
 * RST_STREAM out (nudge_conns).  The option is 0 (libcurl's default)
 * again for the handle's next attempt (include/streamguard/curl.h names
 * it among the options the operation sets).  A finished transfer leaves
 * its connection to be reused. */
void sg__curl_remove(sg_curl_op *op, bool stopped) {
    sg_curl_multi *m = op->conn != NULL ? op->conn->m : NULL;
    const uint16_t port = op->conn != NULL ? op->conn->port : 0;
    const uint64_t key = op->conn != NULL ? op->conn->key : 0;
    sg__curl_multi_leave_conn(op);
    if (stopped) {
        curl_easy_setopt(op->easy, CURLOPT_FORBID_REUSE, 1L);
    }
    curl_multi_remove_handle(op->multi, op->easy);
    if (stopped) {
        curl_easy_setopt(op->easy, CURLOPT_FORBID_REUSE, 0L);
        if (m != NULL) {
            queue_nudge(m, port, key);
        }
    }
}

void sg__curl_op_detach_pending(sg_curl_op *op) {
    if (!op->detach_pending) {
        return;
    }
    sg__curl_multi_undefer(op->detacher, op);
    op->detach_pending = false;
    sg__curl_remove(op, true);
}

int sg__curl_multi_watch(sg_curl_multi *m, sg_curl_op *op, int fd) {
    return sg__watch_add(&m->intents, m->epfd, fd, &op->lc);
}

void sg__curl_multi_unwatch(sg_curl_multi *m, int fd) {
    sg__watch_del(&m->intents, fd);
}

/* Every operation whose intent's answer is in: its first attempt goes, or
 * it ends. */
static void run_intents(sg_curl_multi *m) {
    sg__lifecycle *lc;
    while ((lc = sg__watch_next(&m->intents)) != NULL) {
        sg_curl_op *op = (sg_curl_op *)((char *)lc - offsetof(sg_curl_op, lc));
        if (sg__lc_intent_ready(lc, multi_now(m)) == 0) {
            sg__curl_multi_reschedule(m, op);
        }
    }
}

int sg__curl_multi_adopt(sg_curl_multi *m, sg_curl_op *slot) {
    slot->owner = m;
    if (sg__dheap_push(&m->heap, &slot->node) != 0) {
        slot->owner = NULL;
        return SG_ENOMEM;
    }
    return 0;
}

/* Arms the one timer for `at` unless it is already armed no later: a
 * deadline that moved later (every item moves the idle deadline) costs no
 * syscall; the early wake-up finds nothing due and re-arms once. */
static void arm_timer(sg_curl_multi *m, int64_t at) {
    if (at >= m->armed_at) {
        return;
    }
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    if (at != SG_TIME_NEVER) {
        int64_t t = at > 0 ? at : 1; /* 0 would disarm */
        its.it_value.tv_sec = (time_t)(t / SG_SEC(1));
        its.it_value.tv_nsec = (long)(t % SG_SEC(1));
    }
    timerfd_settime(m->tfd, TFD_TIMER_ABSTIME, &its, NULL);
    m->armed_at = at;
}

/* The one timer, for the earliest of libcurl's timeout and every
 * operation's deadline, and the quiet read buffers' wake-up (quiet.c).
 * Cheap when nothing moved earlier (no syscall). */
static void rearm(sg_curl_multi *m) {
    if (m->tfd < 0) {
        return;
    }
    arm_timer(m, wake_after(m, sg__dheap_earliest(&m->heap, NULL)));
}

/* ------------------------------------------------------ libcurl callbacks */

/* The socket libcurl waits on for @easy's transfer, kept in its operation
 * (a stopped HTTP/1.x attempt's connection is shut down by it); a socket
 * that transfer has stopped waiting on is forgotten. */
static void note_socket(CURL *easy, curl_socket_t s, int what) {
    sg_curl_op *op = NULL;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&op);
    if (op == NULL) {
        return;
    }
    if (what != CURL_POLL_REMOVE) {
        op->at.sock = s;
    } else if (op->at.sock == s) {
        op->at.sock = CURL_SOCKET_BAD;
    }
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
    sg_curl_multi *m = userp;
    note_socket(easy, s, what);
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.data.fd = s;
    if (what == CURL_POLL_REMOVE) {
        if (socketp != NULL) {
            epoll_ctl(m->epfd, EPOLL_CTL_DEL, s, NULL);
            curl_multi_assign(m->multi, s, NULL);
        }
        return 0;
    }
    ev.events =
        ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
    if (socketp == NULL) {
        if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, s, &ev) != 0 && errno == EEXIST) {
            epoll_ctl(m->epfd, EPOLL_CTL_MOD, s, &ev);
        }
        curl_multi_assign(m->multi, s, m); /* any non-NULL marks "registered" */
    } else {
        epoll_ctl(m->epfd, EPOLL_CTL_MOD, s, &ev);
    }
    return 0;
}

static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
    (void)multi;
    sg_curl_multi *m = userp;
    m->curl_timer_at =
        timeout_ms < 0 ? SG_TIME_NEVER : sg_time_add(multi_now(m), SG_MS(timeout_ms));
    rearm(m);
    return 0;
}

/* ------------------------------------------------------------ life cycle */

int sg_curl_multi_new(sg_curl_multi **out, const sg_clock *clock) {
    if (out == NULL) {
        return SG_EINVAL;
    }
    *out = NULL;
    sg_curl_multi *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return SG_ENOMEM;
    }
    if (clock != NULL) {
        m->clock = *clock;
        m->clk = &m->clock;
    }
    m->curl_timer_at = SG_TIME_NEVER;
    m->armed_at = SG_TIME_NEVER;
    sg__curl_quiet_init(&m->quiet);
    sg__watch_init(&m->intents);
    sg__dheap_init(&m->heap, node_deadline);
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    m->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = m->tfd};
    if (m->epfd < 0 || m->tfd < 0 ||
        epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->tfd, &ev) != 0) {
        int saved = errno;
        sg_curl_multi_free(m);
        errno = saved;
        return SG_ESYS;
    }
    m->multi = curl_multi_init();
    if (m->multi == NULL) {
        sg_curl_multi_free(m);
        return SG_ECURL;
    }
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
    /* h2: the server's stream limit alone, not libcurl's 100 too (sg-proxy.md) */
    curl_multi_setopt(m->multi, CURLMOPT_MAX_CONCURRENT_STREAMS, (long)INT32_MAX);
    *out = m;
    return 0;
}

void sg_curl_multi_free(sg_curl_multi *m) {
    if (m == NULL) {
        return;
    }
    while (m->detach_head != NULL) {
        sg__curl_op_detach_pending(m->detach_head); /* unlinks it */
    }
    sg__dheap_node *top;
    while (sg__dheap_earliest(&m->heap, &top), top != NULL) {
        sg_curl_op *op = OP_OF(top);
        if (op->in_multi) {
            sg__curl_remove(op, false);
            op->in_multi = false;
        }
        sg__curl_multi_forget(m, op);
    }
    /* what still names this multi (ended operations not yet freed) */
    for (size_t i = 0; i < m->nconns; i++) {
        while (m->conns[i].head != NULL) {
            sg__curl_multi_leave_conn(m->conns[i].head->op);
        }
    }
    free(m->conns);
    free(m->nudge);
    sg__watch_close(&m->intents);
    if (m->multi != NULL) {
        curl_multi_cleanup(m->multi);
    }
    if (m->tfd >= 0) {
        close(m->tfd);
    }
    if (m->epfd >= 0) {
        close(m->epfd);
    }
    sg__dheap_free(&m->heap);
    sg__health_slot_free(&m->health); /* operations still holding it keep it */
    free(m);
}

/* ----------------------------------------------------------------- loop */

/* Finished transfers, judged at the instant they are read: the clock is
 * read here, after the libcurl call that finished them, so an attempt
 * that a clock stopped inside that call is never judged before it. */
static void drain_messages(sg_curl_multi *m) {
    int64_t now = multi_now(m);
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        sg_curl_op *op = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&op);
        CURLcode result = msg->data.result;
        if (op == NULL || !op->in_multi) {
            continue;
        }
        if (sg__curl_op_complete(op, result, now) == 0) {
            sg__curl_multi_reschedule(m, op);
        }
    }
}

/* Each operation whose deadline has come at `now` (expiry, end of drain,
 * end of backoff), decided and told.  Returns the earliest one left. */
static int64_t decide_due(sg_curl_multi *m, int64_t now) {
    sg__dheap_node *top;
    int64_t earliest;
    while ((earliest = sg__dheap_earliest(&m->heap, &top)) <= now) {
        sg_curl_op *op = OP_OF(top);
        if (sg__curl_op_tick(op, now) == 0) {
            /* Still running: its deadline moved on; re-key it.  Due yet
             * unchanged (libcurl is still tearing the transfer down): look
             * again shortly, never spin. */
            int64_t next = sg_curl_op_next_deadline(op);
            sg__dheap_set_key(&m->heap, &op->node,
                              next > now ? next : sg_time_add(now, SG_MS(1)));
        }
        drain_messages(m);
    }
    return earliest;
}

/* Tells the server of @op's stopped attempt.  An HTTP/1.x connection
 * carries only this transfer: it is shut down (one syscall, the FIN the
 * server reads as the end, what close() would send) and leaves the loop's
 * epoll set so that libcurl is not woken for it; libcurl closes the
 * descriptor when the transfer is removed.  A connection that may carry
 * other streams (HTTP/2, or no status line yet to tell) is told by the
 * removal itself, done now. */
static void tell_server(sg_curl_multi *m, sg_curl_op *op) {
    if (op->at.h1 && !op->at.h2 && op->at.sock != CURL_SOCKET_BAD) {
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, op->at.sock, NULL);
        shutdown(op->at.sock, SHUT_RDWR);
        return;
    }
    sg__curl_op_detach_pending(op); /* unlinks it */
}

/* After the step's decisions: first each stopped attempt's server is
 * told, in decision order, then the transfers leave libcurl, each only
 * when sg__curl_teardown_may_run says so (teardown.c).  The clock is read
 * again before each: a deadline due meanwhile is decided first.  What
 * waits goes in a later step, the timer armed for the clock it yields to.
 * @next and the return: the heap's earliest deadline. */
static int64_t teardown(sg_curl_multi *m, int64_t next) {
    for (;; next = sg__dheap_earliest(&m->heap, NULL)) {
        int64_t t = multi_now(m);
        if (next <= t) {
            decide_due(m, t);
            continue;
        }
        sg_curl_op *op = m->detach_untold;
        if (op != NULL) {
            m->detach_untold = op->detach_next;
            tell_server(m, op);
            continue;
        }
        op = m->detach_head;
        if (op == NULL || !sg__curl_teardown_may_run(t, next, op->detach_at)) {
            return next;
        }
        sg__curl_op_detach_pending(op); /* unlinks it */
    }
}

/* Everything due at `now`: libcurl's timeout, then each operation whose
 * deadline has come, each decided and told before any stopped transfer
 * leaves libcurl (teardown): the last of a thousand streams expiring
 * together does not wait for 999 closes.  Returns the earliest left. */
static int64_t run_due(sg_curl_multi *m, int64_t now) {
    int still;
    if (m->curl_timer_at <= now) {
        m->curl_timer_at = SG_TIME_NEVER;
        curl_multi_socket_action(m->multi, CURL_SOCKET_TIMEOUT, 0, &still);
        drain_messages(m);
    }
    int64_t next = teardown(m, decide_due(m, now));
    bool nudged = m->nnudge > 0; /* then libcurl runs: the heap is asked again */
    nudge_conns(m);              /* the RST_STREAMs of the HTTP/2 streams removed */
    return nudged ? sg__dheap_earliest(&m->heap, NULL) : next;
}

static int step(sg_curl_multi *m, int64_t max_wait_ns) {
    int64_t now = multi_now(m), next = m->armed_at;
    if (now >= next || m->detach_head != NULL || m->nnudge > 0) { /* see armed_at */
        next = wake_after(m, run_due(m, now));
    }
    if (m->running == 0 && max_wait_ns < 0) {
        return 0; /* everything ended in run_due: nothing would wake us */
    }
    int timeout_ms = -1; /* the timerfd wakes us; epoll needs no timeout */
    if (next <= now) {
        timeout_ms = 0;
    } else {
        arm_timer(m, next);
    }
    if (max_wait_ns >= 0) {
        int64_t ms = (max_wait_ns + SG_MS(1) - 1) / SG_MS(1);
        if (timeout_ms < 0 || ms < timeout_ms) {
            timeout_ms = ms > 0x7fffffff ? 0x7fffffff : (int)ms;
        }
    }
    struct epoll_event events[64];
    int n = epoll_wait(m->epfd, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
        return SG_ESYS;
    }
    int still;
    for (int i = 0; i < n; i++) {
        int fd = events[i].data.fd;
        if (fd == m->tfd) {
            uint64_t expirations;
            (void)!read(m->tfd, &expirations, sizeof(expirations));
            m->armed_at = SG_TIME_NEVER; /* fired: a one-shot timer */
            continue;
        }
        if (fd == m->intents.epfd) {
            run_intents(m);
            continue;
        }
        int flags = 0;
        if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            flags |= CURL_CSELECT_IN;
        }
        if (events[i].events & EPOLLOUT) {
            flags |= CURL_CSELECT_OUT;
        }
        if (events[i].events & EPOLLERR) {
            flags |= CURL_CSELECT_ERR;
        }
        curl_multi_socket_action(m->multi, fd, flags, &still);
        if (sg__dheap_earliest(&m->heap, NULL) <= multi_now(m)) {
            drain_messages(m); /* due during that read: told before the next */
            decide_due(m, multi_now(m));
        }
    }
    drain_messages(m);
    int64_t due = run_due(m, multi_now(m));
    sg__curl_quiet_give_back(&m->quiet, m->clk, &m->heap);
    /* armed for what is due next: a caller's loop has nothing else to wake it */
    arm_timer(m, wake_after(m, due));
    return m->running;
}

int sg_curl_multi_step(sg_curl_multi *m, int64_t max_wait_ns) {
    if (m == NULL) {
        return SG_EINVAL;
    }
    m->stepping = true;
    int rv = step(m, max_wait_ns);
    m->stepping = false;
    return rv;
}

int sg_curl_multi_run(sg_curl_multi *m) {
    if (m == NULL) {
        return SG_EINVAL;
    }
    while (m->running > 0 || m->detach_head != NULL) {
        int rv = sg_curl_multi_step(m, -1);
        if (rv < 0) {
            return rv;
        }
    }
    return 0;
}

int sg_curl_multi_set_health(sg_curl_multi *m, sg_health *h) {
    if (m == NULL) {
        return SG_EINVAL;
    }
    sg__health_slot_set(&m->health, h);
    return 0;
}

int sg_curl_multi_set_read_buffer_release(sg_curl_multi *m, int64_t quiet_ns) {
    if (m == NULL || quiet_ns < 0) {
        return SG_EINVAL;
    }
    if (quiet_ns > SG_DURATION_MAX && quiet_ns != SG_TIME_NEVER) {
        return SG_ERANGE;
    }
    sg__curl_quiet_set(&m->quiet, quiet_ns);
    rearm(m);
    return 0;
}

int sg_curl_multi_set_retry_budget(sg_curl_multi *m, sg_retry_budget *b) {
    if (m == NULL) {
        return SG_EINVAL;
    }
    m->retry_budget = b;
    return 0;
}

int sg_curl_multi_add(sg_curl_multi *m, sg_curl_op *op) {
    if (m == NULL || op == NULL) {
        return SG_EINVAL;
    }
    if (op->lc.state != SG__LC_NEW) {
        return SG_ESTATE;
    }
    if (sg__op_options_retry_budget(op->lc.popts) == NULL) {
        /* the multi's, if any */
        (void)sg_op_options_set_retry_budget(op->lc.popts, m->retry_budget);
    }
    if (sg__op_options_health(op->lc.popts) == NULL) {
        /* the multi's: the caller's, or its own */
        (void)sg_op_options_set_health(op->lc.popts, sg__health_slot_get(&m->health));
    }
    op->owner = m;
    op->lc.async_intent = true; /* the multi watches a pending intent */
    if (sg__dheap_push(&m->heap, &op->node) != 0) {
        op->owner = NULL;
        return SG_ENOMEM;
    }
    m->running++;
    int rv = sg__curl_op_start(op, m->multi, multi_now(m));
    if (rv < 0) {
        /* it never started (the ledger refused): nothing to drive */
        sg__curl_multi_forget(m, op);
        return rv;
    }
    if (rv == 0) {
        /* pushed with no deadline; now that an attempt runs, it has one */
        sg__curl_multi_reschedule(m, op);
    }
    rearm(m);
    return 0;
}

int sg_curl_multi_fd(const sg_curl_multi *m) {
    return m != NULL ? m->epfd : -1;
}

int sg_curl_multi_running(const sg_curl_multi *m) {
    return m != NULL ? m->running : SG_EINVAL;
}

int sg_curl_perform(sg_curl_op *op) {
    if (op == NULL) {
        return SG_EINVAL;
    }
    if (op->lc.state != SG__LC_NEW) {
        return SG_ESTATE;
    }
    sg_curl_multi *m;
    int rv = sg_curl_multi_new(&m, op->opts->clock);
    if (rv != 0) {
        return rv;
    }
    sg__health_slot_set(&m->health, NULL); /* the operation's own health, or none */
    rv = sg_curl_multi_add(m, op);
    if (rv == 0) {
        rv = sg_curl_multi_run(m);
    }
    sg_curl_multi_free(m);
    return rv;
}
