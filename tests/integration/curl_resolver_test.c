/*
 * The libcurl transport while libcurl's threaded resolver is busy: a
 * budget that ends during a DNS query must end the operation on time -
 * removing the transfer must not wait for the resolver thread (libcurl
 * joins it unless CURLOPT_QUICK_EXIT is set, and a DNS query that gets no
 * answer takes glibc 5 s per try).
 *
 * The DNS server that never answers is real: in a private mount and
 * network namespace (unshare(2); skipped where that is not allowed) the
 * test binds UDP 127.0.0.1:53, reads nothing, and mounts a resolv.conf
 * that points there.  glibc's getaddrinfo in libcurl's resolver thread
 * then waits for its timeout, exactly as behind a dead resolver.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include <streamguard/curl.h>

#include "../sg_auto.h"

enum { SKIP = 77 };

/* The namespace, loopback up, a silent DNS server, its resolv.conf. */
static int isolate(void) {
    if (unshare(CLONE_NEWNS | CLONE_NEWNET) != 0) {
        return SKIP;
    }
    /* keep our mounts private to this namespace */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        return SKIP;
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
        return SKIP;
    }
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
        return SKIP;
    }
    close(s);
    int dns = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons(53);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(dns, (struct sockaddr *)&a, sizeof(a)) != 0) {
        return SKIP;
    }
    /* dns stays open and unread for the life of the process */
    char conf[] = "/tmp/sg-resolv-XXXXXX";
    int fd = mkstemp(conf);
    if (fd < 0) {
        return SKIP;
    }
    static const char text[] = "nameserver 127.0.0.1\noptions timeout:5 attempts:2\n";
    if (write(fd, text, sizeof(text) - 1) != (ssize_t)(sizeof(text) - 1)) {
        return SKIP;
    }
    close(fd);
    int rv = mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL);
    unlink(conf);
    return rv == 0 ? 0 : SKIP;
}

/* In the namespace: one operation with a 600 ms budget on a name nobody
 * answers for.  Exit code 0: it ended in time, as the parent checks. */
static int child(void) {
    int rv = isolate();
    if (rv != 0) {
        return rv;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, "http://model.invalid-tld-for-tests:8080/v1/x");
    SG_AUTO_OPTIONS(po);
    sg_op_options_set_budget(po, SG_MS(600));
    sg_op_options_set_max_attempts(po, 1);
    sg_op_options_set_method(po, "GET");
    sg_curl_op *op = NULL;
    if (sg_curl_op_new(&op, e, po, NULL, NULL) != 0) {
        return 2;
    }
    int64_t t0 = sg_clock_monotonic_now(NULL);
    if (sg_curl_perform(op) != 0) {
        return 3;
    }
    int64_t ended = sg_clock_monotonic_now(NULL) - t0;
    const sg_op_attempt *at = sg_op_attempt_at(sg_curl_op_policy(op), 0);
    sg_outcome out = sg_curl_op_outcome(op);
    sg_phase phase = at != NULL ? at->phase : SG_PHASE_CONNECT;
    sg_curl_op_free(op);
    curl_easy_cleanup(e);
    int64_t freed = sg_clock_monotonic_now(NULL) - t0;
    printf("budget 600 ms: %s in phase %s after %.1f ms; freed after %.1f ms\n",
           sg_outcome_name(out), sg_phase_name(phase), (double)ended / 1e6,
           (double)freed / 1e6);
    fflush(stdout);
    if (out != SG_OUTCOME_BUDGET_EXHAUSTED || phase != SG_PHASE_CONNECT) {
        return 4;
    }
    /* a joined resolver thread would have cost its DNS timeout (5 s) */
    if (ended < SG_MS(600) || ended > SG_MS(800) || freed > SG_MS(900)) {
        return 5;
    }
    _exit(0); /* the resolver thread is still waiting: leave it behind */
}

static void a_budget_that_ends_during_dns_is_not_held_up_by_the_resolver(void **state) {
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        _exit(child());
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == SKIP) {
        print_message("skipped: no private mount and network namespace here\n");
        skip();
    }
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_budget_that_ends_during_dns_is_not_held_up_by_the_resolver),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
