/* The fds of pending intents (see watch.h). */
#include "transport/watch.h"

#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

void sg__watch_init(sg__watch *w) {
    w->epfd = -1;
    w->n = 0;
}

int sg__watch_add(sg__watch *w, int loop_epfd, int fd, sg__lifecycle *lc) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    if (w->epfd < 0) {
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (w->epfd < 0) {
            return SG_ESYS;
        }
        ev.events = EPOLLIN;
        ev.data.fd = w->epfd;
        if (epoll_ctl(loop_epfd, EPOLL_CTL_ADD, w->epfd, &ev) != 0) {
            close(w->epfd);
            w->epfd = -1;
            return SG_ESYS;
        }
    }
    ev.events = EPOLLIN;
    ev.data.ptr = lc;
    if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
        return SG_ESYS;
    }
    w->n++;
    return 0;
}

void sg__watch_del(sg__watch *w, int fd) {
    if (w->epfd >= 0 && epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL) == 0) {
        w->n--;
    }
}

sg__lifecycle *sg__watch_next(sg__watch *w) {
    if (w->n == 0) {
        return NULL;
    }
    struct epoll_event ev;
    return epoll_wait(w->epfd, &ev, 1, 0) == 1 ? ev.data.ptr : NULL;
}

void sg__watch_close(sg__watch *w) {
    if (w->epfd >= 0) {
        close(w->epfd); /* leaves the loop's epoll by itself */
        w->epfd = -1;
    }
    w->n = 0;
}
