/*
 * The fds of pending intents, watched for a transport's event loop: an
 * epoll instance of their own, itself watched inside the loop's epoll, so
 * the loop's own dispatch (libcurl's sockets, the HTTP/2 links) never sees
 * them.  Each fd carries the lifecycle that waits on it.
 */
#ifndef SG_TRANSPORT_WATCH_H
#define SG_TRANSPORT_WATCH_H

#include "transport/lifecycle.h"

typedef struct sg__watch {
    int epfd;   /* -1 until the first fd is watched */
    unsigned n; /* fds watched */
} sg__watch;

void sg__watch_init(sg__watch *w);
/* Watches @fd for readability on behalf of @lc; the first one creates the
 * instance and adds it to @loop_epfd.  0, or SG_ESYS. */
int sg__watch_add(sg__watch *w, int loop_epfd, int fd, sg__lifecycle *lc);
void sg__watch_del(sg__watch *w, int fd);
/* The lifecycle of one fd readable now (without waiting), or NULL: one at
 * a time, since what it runs may free any other. */
sg__lifecycle *sg__watch_next(sg__watch *w);
/* Closes the instance (the fds are their observers'). */
void sg__watch_close(sg__watch *w);

#endif
