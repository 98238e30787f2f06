/*
 * own_loop - the sans-I/O core driven from the caller's own poll() loop.
 *
 *   own_loop PORT [PATH]
 *
 * No transport of ours is used: this program owns the socket and the loop.
 * It connects to 127.0.0.1:PORT without blocking, writes a minimal HTTP/1.0
 * GET (so the body is raw bytes ended by the server closing, no chunked
 * coding to undo), skips the response headers by hand, and feeds every body
 * byte into an sg_stream (SSE framing joined to a guard).
 *
 * The only timer is poll()'s timeout, computed from the guard's one next
 * deadline - never a fixed tick.  When poll returns, the guard is asked
 * first; if a clock has expired the socket is closed at once, which is how
 * the server learns that nobody listens any more.  Progress is reported to
 * the guard as phases (connect, send, wait_headers, wait_first_item), so a
 * timeout says where it happened.
 *
 * Only <streamguard/streamguard.h> is needed: it includes no third-party
 * header, and the library's core reads no clock - this program passes `now`.
 *
 * Exit status: 0 when the stream ended ok (its `data: [DONE]` arrived), 1
 * for any other outcome (printed), 2 on a usage or setup error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <streamguard/streamguard.h>

enum state { CONNECTING, SENDING, HEADERS, BODY };

struct app {
    unsigned long items;
};

static int on_item(const sg_item *item, void *user_data) {
    struct app *app = user_data;
    app->items++;
    /* The view is valid only during this call and is not NUL-terminated. */
    int shown = item->data_len > 72 ? 72 : (int)item->data_len;
    printf("item %llu: %.*s%s\n", (unsigned long long)item->index, shown, item->data,
           item->data_len > 72 ? "..." : "");
    fflush(stdout);
    return 0;
}

/* poll()'s timeout for an absolute deadline: rounded UP to whole ms so the
 * loop never wakes just before the deadline and spins; -1 for none. */
static int poll_timeout(int64_t deadline, int64_t now) {
    if (deadline == SG_TIME_NEVER) {
        return -1;
    }
    if (deadline <= now) {
        return 0;
    }
    int64_t ms = (deadline - now + SG_MS(1) - 1) / SG_MS(1);
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The status code of "HTTP/1.x NNN ...", or 0 when it is not one. */
static int status_code(const char *head) {
    if (strncmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ') {
        return 0;
    }
    return atoi(head + 9);
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s PORT [PATH]\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    const char *path = argc == 3 ? argv[2] : "/v1/chat/completions?n=5&gap=10";
    if (port <= 0 || port > 65535) {
        fprintf(stderr, "own_loop: bad port '%s'\n", argv[1]);
        return 2;
    }

    char request[1024];
    int req_len = snprintf(request, sizeof(request),
                           "GET %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n"
                           "Accept: text/event-stream\r\n\r\n",
                           path, port);
    if (req_len < 0 || (size_t)req_len >= sizeof(request)) {
        fprintf(stderr, "own_loop: path too long\n");
        return 2;
    }

    /* Framing: OpenAI-style SSE, `data: [DONE]` is the clean end.  The
     * parser's buffer is ours, sized once from the limits; nothing grows. */
    sg_stream_config scfg; /* SSE ending at [DONE], 16 KiB lines, 64 KiB events */
    sg_stream_config_init(&scfg);
    if (sg_stream_config_set_terminal_data(&scfg, "[DONE]") != 0 ||
        sg_stream_config_set_max_line(&scfg, 16 * 1024) != 0 ||
        sg_stream_config_set_max_event(&scfg, 64 * 1024) != 0) {
        return 2;
    }
    size_t buf_size = sg_stream_buffer_size(&scfg);
    void *framing_buf = malloc(buf_size);
    struct app app = {0};
    sg_stream s;
    if (framing_buf == NULL ||
        sg_stream_init(&s, &scfg, on_item, &app, framing_buf, buf_size) != 0) {
        fprintf(stderr, "own_loop: cannot set up the stream\n");
        free(framing_buf);
        return 2;
    }

    /* One budget and the clocks of the (single) attempt, nested under it. */
    int64_t now = sg_clock_now(NULL);
    sg_budget budget;
    sg_guard_config gcfg;
    sg_guard_config_init(&gcfg);
    sg_budget_start(&budget, now, SG_SEC(10), 0);
    sg_guard_config_set_connect_timeout(&gcfg, SG_SEC(1));
    sg_guard_config_set_first_item_timeout(&gcfg, SG_SEC(2));
    sg_guard_config_set_idle_timeout(&gcfg, SG_MS(500));
    sg_guard_config_set_stream_timeout(&gcfg, SG_SEC(8));
    sg_stream_begin(&s, &gcfg, &budget, 1, now);
    sg_guard *guard = sg_stream_guard(&s);

    /* A non-blocking connect, so the connect clock can fire too. */
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
        perror("own_loop: socket");
        if (fd >= 0) {
            close(fd);
        }
        free(framing_buf);
        return 2;
    }
    enum state st = CONNECTING;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        st = SENDING; /* loopback may connect at once */
        sg_guard_set_phase(guard, SG_PHASE_SEND, now);
    } else if (errno != EINPROGRESS) {
        st = BODY; /* refused at once: fails below */
    }

    size_t sent = 0;
    char head[8192]; /* response headers; a longer head is a protocol error */
    size_t head_len = 0;
    sg_outcome how = SG_OUTCOME_OK; /* what this loop saw when it ended */
    int http_status = 0;

    if (st == BODY) {
        how = SG_OUTCOME_TRANSPORT_ERROR; /* connect failed at once */
    }
    while (how == SG_OUTCOME_OK) {
        now = sg_clock_now(NULL);
        struct pollfd pfd = {fd, (short)(st <= SENDING ? POLLOUT : POLLIN), 0};
        int n = poll(&pfd, 1, poll_timeout(sg_guard_next_deadline(guard), now));
        if (n < 0 && errno != EINTR) {
            how = SG_OUTCOME_TRANSPORT_ERROR;
            break;
        }
        now = sg_clock_now(NULL);
        /* Deadlines first: bytes that arrive after a clock expired are late. */
        sg_outcome expired;
        if (sg_guard_check(guard, now, &expired) == 1) {
            printf("clock expired: %s (closing the socket)\n", sg_outcome_name(expired));
            how = expired; /* latched by the guard; sg_stream_end reports it */
            break;
        }
        if (n <= 0) {
            continue; /* woke for a deadline that is not due yet (EINTR) */
        }

        if (st == CONNECTING) {
            int err = 0;
            socklen_t len = sizeof(err);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
                how = SG_OUTCOME_TRANSPORT_ERROR;
                break;
            }
            st = SENDING;
            sg_guard_set_phase(guard, SG_PHASE_SEND, now);
        }
        if (st == SENDING) {
            ssize_t w = write(fd, request + sent, (size_t)req_len - sent);
            if (w < 0 && errno != EAGAIN && errno != EINTR) {
                how = SG_OUTCOME_TRANSPORT_ERROR;
                break;
            }
            sent += w > 0 ? (size_t)w : 0;
            if (sent == (size_t)req_len) {
                st = HEADERS;
                sg_guard_set_phase(guard, SG_PHASE_WAIT_HEADERS, now);
            }
            continue;
        }

        char in[16384];
        ssize_t r = read(fd, in, sizeof(in));
        if (r < 0) {
            if (errno != EAGAIN && errno != EINTR) {
                how = SG_OUTCOME_TRUNCATED; /* connection reset */
            }
            continue;
        }
        if (r == 0) {
            /* HTTP/1.0: the server closing IS the end of the body.  Clean
             * only if [DONE] came; sg_stream_end decides (truncated if not). */
            how = st == BODY ? SG_OUTCOME_OK : SG_OUTCOME_TRANSPORT_ERROR;
            break;
        }
        const char *body = in;
        size_t body_len = (size_t)r;
        if (st == HEADERS) {
            /* Collect the head until the blank line; what follows is body. */
            size_t take = (size_t)r < sizeof(head) - 1 - head_len
                              ? (size_t)r
                              : sizeof(head) - 1 - head_len;
            memcpy(head + head_len, in, take);
            size_t old = head_len;
            head_len += take;
            head[head_len] = '\0';
            char *blank = strstr(head, "\r\n\r\n");
            if (blank == NULL) {
                if (head_len == sizeof(head) - 1) {
                    how = SG_OUTCOME_PROTOCOL_ERROR;
                }
                continue;
            }
            size_t head_end = (size_t)(blank - head) + 4;
            http_status = status_code(head);
            if (http_status != 200) {
                how = SG_OUTCOME_HTTP_ERROR;
                break;
            }
            st = BODY;
            sg_guard_set_phase(guard, SG_PHASE_WAIT_FIRST_ITEM, now);
            body = in + (head_end - old);
            body_len = (size_t)r - (head_end - old);
        }
        int rv = sg_stream_feed(&s, body, body_len, now);
        if (rv == 1) {
            break; /* [DONE]: the attempt is ok; no need to read the rest */
        }
        if (rv < 0) {
            printf("stream stopped: %s\n", sg_errname(rv));
            how = SG_OUTCOME_TRUNCATED; /* the guard's own cause wins below */
            break;
        }
    }
    close(fd);

    sg_guard_result res;
    sg_stream_end(&s, sg_clock_now(NULL), how, &res);
    printf("outcome=%s phase=%s attempts=1 items=%llu bytes=%llu partial=%s "
           "http_status=%d first_item_ms=%lld elapsed_ms=%lld\n",
           sg_outcome_name(res.outcome), sg_phase_name(res.phase),
           (unsigned long long)res.items, (unsigned long long)res.bytes,
           res.partial ? "true" : "false", http_status,
           (long long)(res.first_item_ns < 0 ? -1 : res.first_item_ns / SG_MS(1)),
           (long long)(res.elapsed_ns / SG_MS(1)));
    if (res.partial) {
        printf("discard: %llu items were delivered before the stream broke\n",
               (unsigned long long)res.items);
    }
    free(framing_buf);
    return res.outcome == SG_OUTCOME_OK ? 0 : 1;
}
