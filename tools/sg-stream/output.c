/*
 * output.c - stdout, batched.
 *
 * Items are appended to one buffer as they are parsed and the buffer goes
 * out in one write(2) before the run waits again, so a fast stream costs
 * one system call per transport read, not one per item, and each item is
 * still visible the moment the read that carried it has been processed.
 *
 * stdout must never stall the clocks: a pipe or a socket is made
 * non-blocking (and put back at the end), and what it does not take waits
 * in the buffer: up to OUT_MAX bytes, and then the one item that passes
 * it (an item is never cut: one larger than OUT_MAX, --max-event-bytes
 * allowing, still goes out whole).  A reader that falls further behind
 * than that, or one that has gone (EPIPE), cancels the operation.
 * A terminal or a file is written as it is: neither blocks for long.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sg_stream.h"

void out_init(struct out *o) {
    memset(o, 0, sizeof(*o));
    o->max = OUT_MAX;
    struct stat st;
    if (fstat(STDOUT_FILENO, &st) == 0 &&
        (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
        int fl = fcntl(STDOUT_FILENO, F_GETFL);
        if (fl >= 0 && !(fl & O_NONBLOCK) &&
            fcntl(STDOUT_FILENO, F_SETFL, fl | O_NONBLOCK) == 0) {
            o->nonblock = true;
            o->flags = fl;
        }
    }
}

void out_free(struct out *o) {
    if (o->nonblock) {
        fcntl(STDOUT_FILENO, F_SETFL, o->flags);
        o->nonblock = false;
    }
    free(o->buf);
    o->buf = NULL;
    o->len = o->cap = 0;
}

char *out_grow(struct out *o, size_t n) {
    if (o->broken || o->overflow) {
        return NULL;
    }
    if (o->len > o->max) {
        o->overflow = true; /* the reader fell o->max bytes behind */
        return NULL;
    }
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 65536;
        while (cap < o->len + n) {
            cap *= 2;
        }
        char *p = realloc(o->buf, cap);
        if (p == NULL) {
            o->overflow = true;
            return NULL;
        }
        o->buf = p;
        o->cap = cap;
    }
    return o->buf + o->len;
}

void out_flush(struct out *o) {
    if (o->len == 0) {
        return; /* (and o->buf may be NULL) */
    }
    size_t off = 0;
    while (off < o->len) {
        ssize_t w = write(STDOUT_FILENO, o->buf + off, o->len - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break; /* the reader is slow: the rest waits */
        }
        o->broken = true; /* EPIPE, or stdout unusable: nobody reads */
        off = o->len;
    }
    memmove(o->buf, o->buf + off, o->len - off);
    o->len -= off;
}

bool out_waiting(const struct out *o) {
    return o->len > 0 && o->nonblock && !o->broken;
}

int out_drain(struct out *o, int64_t deadline) {
    for (;;) {
        out_flush(o);
        if (o->len == 0 || o->broken) {
            return o->broken ? -1 : 0;
        }
        if (signals_first() != 0 || deadline - sg_clock_now(NULL) <= 0) {
            return -1; /* Ctrl-C: the operator waits no longer */
        }
        wait_stdout(deadline);
    }
}
