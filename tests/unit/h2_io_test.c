/*
 * The HTTP/2 transport's connect race (Happy Eyeballs, RFC 8305) against
 * real loopback sockets: an address whose listener never accepts (its
 * backlog full, the kernel drops the SYN) must cost one attempt delay, not
 * the whole connect timeout; a refused address costs nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "h2/internal.h"

typedef struct hole {
    int lfd;
    int fillers[8];
    struct sockaddr_in addr;
} hole;

/* A listener on 127.0.0.1 that never accepts, its backlog filled. */
static void hole_open(hole *h) {
    h->lfd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&h->addr, 0, sizeof(h->addr));
    h->addr.sin_family = AF_INET;
    h->addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(h->addr);
    assert_int_equal(bind(h->lfd, (struct sockaddr *)&h->addr, sizeof(h->addr)), 0);
    assert_int_equal(listen(h->lfd, 0), 0);
    getsockname(h->lfd, (struct sockaddr *)&h->addr, &len);
    for (int i = 0; i < 8; i++) {
        h->fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(h->fillers[i], (struct sockaddr *)&h->addr, sizeof(h->addr));
    }
}

static void hole_close(hole *h) {
    for (int i = 0; i < 8; i++) {
        close(h->fillers[i]);
    }
    close(h->lfd);
}

/* A listener that accepts (the kernel completes the handshake). */
static int listener(struct sockaddr_in *a) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(*a);
    assert_int_equal(bind(fd, (struct sockaddr *)a, sizeof(*a)), 0);
    assert_int_equal(listen(fd, 8), 0);
    getsockname(fd, (struct sockaddr *)a, &len);
    return fd;
}

/* A port nothing listens on: connect is refused at once. */
static void refused(struct sockaddr_in *a) {
    int fd = listener(a);
    close(fd);
}

static void an_address_that_never_answers_costs_one_attempt_delay(void **state) {
    (void)state;
    hole h;
    hole_open(&h);
    struct sockaddr_in good;
    int lfd = listener(&good);
    const struct sockaddr *addrs[2] = {(struct sockaddr *)&h.addr,
                                       (struct sockaddr *)&good};
    socklen_t lens[2] = {sizeof(h.addr), sizeof(good)};
    int64_t t0 = sg_clock_monotonic_now(NULL);
    int fd = -1, err = 0;
    assert_int_equal(sg__h2_race(addrs, lens, 2, t0 + SG_SEC(3), &fd, &err), 0);
    int64_t took = sg_clock_monotonic_now(NULL) - t0;
    /* the second address started after the 250 ms attempt delay */
    assert_true(took >= SG_MS(240));
    assert_true(took < SG_MS(1000));
    struct sockaddr_in peer;
    socklen_t plen = sizeof(peer);
    assert_int_equal(getpeername(fd, (struct sockaddr *)&peer, &plen), 0);
    assert_int_equal(peer.sin_port, good.sin_port);
    close(fd);
    close(lfd);
    hole_close(&h);
}

static void a_refused_address_moves_on_at_once(void **state) {
    (void)state;
    struct sockaddr_in bad, good;
    refused(&bad);
    int lfd = listener(&good);
    const struct sockaddr *addrs[2] = {(struct sockaddr *)&bad, (struct sockaddr *)&good};
    socklen_t lens[2] = {sizeof(bad), sizeof(good)};
    int64_t t0 = sg_clock_monotonic_now(NULL);
    int fd = -1, err = 0;
    assert_int_equal(sg__h2_race(addrs, lens, 2, t0 + SG_SEC(3), &fd, &err), 0);
    assert_true(sg_clock_monotonic_now(NULL) - t0 < SG_MS(200));
    close(fd);
    close(lfd);
}

static void every_address_down_is_connect_error_or_timeout(void **state) {
    (void)state;
    struct sockaddr_in bad1, bad2;
    refused(&bad1);
    refused(&bad2);
    const struct sockaddr *addrs[2] = {(struct sockaddr *)&bad1,
                                       (struct sockaddr *)&bad2};
    socklen_t lens[2] = {sizeof(bad1), sizeof(bad2)};
    int fd = -1, err = 0;
    int64_t now = sg_clock_monotonic_now(NULL);
    assert_int_equal(sg__h2_race(addrs, lens, 2, now + SG_SEC(3), &fd, &err),
                     SG_ECONNECT);
    assert_int_equal(err, ECONNREFUSED);
    /* only holes: the deadline ends it, never later */
    hole h1, h2;
    hole_open(&h1);
    hole_open(&h2);
    const struct sockaddr *holes[2] = {(struct sockaddr *)&h1.addr,
                                       (struct sockaddr *)&h2.addr};
    socklen_t hl[2] = {sizeof(h1.addr), sizeof(h2.addr)};
    now = sg_clock_monotonic_now(NULL);
    assert_int_equal(sg__h2_race(holes, hl, 2, now + SG_MS(400), &fd, &err),
                     SG_ETIMEDOUT);
    int64_t took = sg_clock_monotonic_now(NULL) - now;
    assert_true(took >= SG_MS(400));
    assert_true(took < SG_MS(900));
    hole_close(&h1);
    hole_close(&h2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_address_that_never_answers_costs_one_attempt_delay),
        cmocka_unit_test(a_refused_address_moves_on_at_once),
        cmocka_unit_test(every_address_down_is_connect_error_or_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
