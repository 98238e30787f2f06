/*
 * signals.c - Ctrl-C that reports, and the run's waits.
 *
 * The first SIGINT or SIGTERM only says so - through a pipe the run's poll
 * watches - and the run cancels its operation: the stream is aborted
 * (HTTP/2: RST_STREAM(CANCEL)), the report and the -w line are written and
 * the exit status is the cancelled one.  A second one exits at once, from
 * the handler (128 + the signal number, as a shell reports it).  SIGPIPE
 * is ignored: a reader that has gone is seen as EPIPE on write, and ends
 * the operation as cancelled, quietly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sg_stream.h"

static int g_pipe[2] = {-1, -1};
static volatile sig_atomic_t g_signal; /* the first one, 0: none */

static void on_signal(int signo) {
    if (g_signal != 0) {
        _exit(128 + signo); /* the second: at once */
    }
    g_signal = signo;
    int saved = errno;
    (void)!write(g_pipe[1], "", 1);
    errno = saved;
}

int signals_install(void) {
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
        return -1;
    }
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int signals_first(void) {
    return g_signal;
}

bool run_interrupted(struct run *r) {
    if (r->interrupted) {
        return false; /* once */
    }
    if (g_signal != 0 || r->out.broken || r->out.overflow) {
        r->interrupted = true;
        return true;
    }
    return false;
}

/* ppoll on @p[0..@n) - the signal pipe is p[1] - until @until
 * (SG_TIME_NEVER: no limit); the signal pipe is emptied.  How many are
 * ready (0 at @until, -1 on EINTR). */
static int wait_until(struct pollfd *p, nfds_t n, int64_t until) {
    struct timespec ts;
    struct timespec *tsp = NULL;
    if (until != SG_TIME_NEVER) {
        int64_t now = sg_clock_now(NULL);
        int64_t left = until > now ? until - now : 0; /* INT64_MIN: at once */
        ts.tv_sec = (time_t)(left / SG_SEC(1));
        ts.tv_nsec = (long)(left % SG_SEC(1));
        tsp = &ts;
    }
    int got = ppoll(p, n, tsp, NULL);
    if (got > 0 && (p[1].revents & POLLIN)) {
        char drain[16];
        while (read(g_pipe[0], drain, sizeof(drain)) > 0) {
        }
    }
    return got;
}

bool run_wait(struct run *r, int fd, int64_t until) {
    struct pollfd p[3] = {
        {fd, POLLIN, 0}, {g_pipe[0], POLLIN, 0}, {STDOUT_FILENO, POLLOUT, 0}};
    int got = wait_until(p, out_waiting(&r->out) ? 3 : 2, until);
    return got > 0 && p[0].revents != 0;
}

void wait_stdout(int64_t until) {
    struct pollfd p[3] = {
        {-1, 0, 0}, {g_pipe[0], POLLIN, 0}, {STDOUT_FILENO, POLLOUT, 0}};
    (void)wait_until(p, 3, until);
}
