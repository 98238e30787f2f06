/*
 * Helpers shared by the HTTP/2 transport's integration tests: start
 * sg-fakemodel with extra arguments, drive a connection, read the server's
 * log per request tag (each request carries "_tag=K" in its query, which
 * the server ignores but logs).
 */
#ifndef SG_H2_TEST_UTIL_H
#define SG_H2_TEST_UTIL_H

#include "harness.h"

#include <errno.h>
#include <poll.h>
#include <time.h>

#include <streamguard/h2.h>

/* Servers started and not yet stopped, so that a test whose assertion
 * failed (cmocka jumps out of it) still leaves nothing running. */
static struct {
    pid_t pid;
    char ca_path[256];
} h2t_live[16];

static void h2t_track(const fm_server *s, bool on) {
    for (size_t i = 0; i < sizeof(h2t_live) / sizeof(h2t_live[0]); i++) {
        if (on ? h2t_live[i].pid == 0 : h2t_live[i].pid == s->pid) {
            h2t_live[i].pid = on ? s->pid : 0;
            snprintf(h2t_live[i].ca_path, sizeof(h2t_live[i].ca_path), "%s", s->ca_path);
            return;
        }
    }
}

/* Stops @s (see fm_stop) and forgets it. */
static void h2t_stop(fm_server *s) {
    h2t_track(s, false);
    fm_stop(s);
}

/* cmocka teardown: kills whatever a failed test left running. */
static int h2t_teardown(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof(h2t_live) / sizeof(h2t_live[0]); i++) {
        if (h2t_live[i].pid > 0) {
            kill(h2t_live[i].pid, SIGKILL);
            waitpid(h2t_live[i].pid, NULL, 0);
            unlink(h2t_live[i].ca_path);
            h2t_live[i].pid = 0;
        }
    }
    return 0;
}

/* fm_start_with, tracked so a failed test's teardown still stops it. */
static int h2t_start(fm_server *s, const char *binary, const char *const *extra) {
    if (fm_start_with(s, binary, extra) != 0) {
        return -1;
    }
    h2t_track(s, true);
    return 0;
}

static int64_t h2t_now(void) {
    return sg_clock_monotonic_now(NULL);
}

/* Opens a connection to the fake model, h2c or TLS (trusting its CA). */
static int h2t_connect(const fm_server *s, bool tls, sg_h2_conn **out, char *err) {
    sg_h2_conn_options *o = NULL;
    int rv = sg_h2_conn_options_new(&o);
    if (rv == 0) {
        (void)sg_h2_conn_options_set_tls(o, tls);
        (void)sg_h2_conn_options_set_errbuf(o, err);
        (void)sg_h2_conn_options_set_connect_timeout(o, SG_SEC(5));
        rv = sg_h2_conn_options_set_host(o, tls ? "localhost" : "127.0.0.1");
    }
    if (rv == 0) {
        rv = sg_h2_conn_options_set_port(o, s->port);
    }
    if (rv == 0) {
        rv = sg_h2_conn_options_set_cafile(o, tls ? s->ca_path : NULL);
    }
    if (rv == 0) {
        rv = sg_h2_conn_new(out, o);
    }
    sg_h2_conn_options_free(o);
    return rv;
}

/* The server's log once it holds at least @count occurrences of @needle
 * (polled for up to 5 s: the server handles our last frames on its own
 * time), or the last log fetched. */
static char *h2t_log_when(const fm_server *s, const char *needle, int count) {
    char *log = NULL;
    for (int i = 0; i < 100; i++) {
        free(log);
        log = fm_fetch(s, "/_log", 0);
        if (log != NULL && fm_count(log, needle) >= count) {
            break;
        }
        usleep(50 * 1000);
    }
    return log;
}

/*
 * Scans the log for the request tagged _tag=@tag: its exchange id.  Returns
 * -1 when absent.  Lines are one event each.
 */
static long h2t_log_id_of_tag(const char *log, int tag) {
    char want[32];
    snprintf(want, sizeof(want), "_tag=%d\"", tag);
    char want2[32];
    snprintf(want2, sizeof(want2), "_tag=%d&", tag);
    for (const char *line = log; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
        char buf[2048];
        size_t n = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
        memcpy(buf, line, n);
        buf[n] = '\0';
        if (strstr(buf, "\"event\":\"received\"") != NULL &&
            (strstr(buf, want) != NULL || strstr(buf, want2) != NULL)) {
            const char *id = strstr(buf, "\"id\":");
            if (id != NULL) {
                return atol(id + 5);
            }
        }
        line = end != NULL ? end + 1 : NULL;
    }
    return -1;
}

/* The h2_error_code of the client_gone event of exchange @id; -1 when the
 * exchange has no client_gone event, -2 when it has one without a code. */
static int h2t_log_gone_code(const char *log, long id) {
    char want[48];
    snprintf(want, sizeof(want), "\"id\":%ld,\"event\":\"client_gone\"", id);
    const char *p = strstr(log, want);
    if (p == NULL) {
        return -1;
    }
    const char *end = strchr(p, '\n');
    const char *code = strstr(p, "\"h2_error_code\":");
    if (code == NULL || (end != NULL && code > end)) {
        return -2;
    }
    return atoi(code + 16);
}

/* Whether exchange @id logged @event. */
static bool h2t_log_has(const char *log, long id, const char *event) {
    char want[96];
    snprintf(want, sizeof(want), "\"id\":%ld,\"event\":\"%s\"", id, event);
    return strstr(log, want) != NULL;
}

#endif
