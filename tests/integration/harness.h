/*
 * Integration test harness: starts a real sg-fakemodel on a loopback port
 * chosen by the kernel, reads the port from its first stdout line, and
 * fetches its request log over HTTP.  Header-only so each integration test
 * executable can include it.
 */
#ifndef SG_TEST_HARNESS_H
#define SG_TEST_HARNESS_H

#define _GNU_SOURCE
#include <curl/curl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct fm_server {
    pid_t pid;
    int port;
    char base[64];     /* http://127.0.0.1:PORT */
    char tls_base[64]; /* https://localhost:PORT */
    char ca_path[256]; /* the CA certificate the server wrote */
} fm_server;

/* Starts `binary --port 0 --write-ca <tmp> --quiet [extra...]` (extra is
 * NULL or NULL-terminated, at most 8 entries); returns 0 or -1. */
static inline int fm_start_with(fm_server *s, const char *binary,
                                const char *const *extra) {
    static int started;
    int fds[2];
    memset(s, 0, sizeof(*s));
    snprintf(s->ca_path, sizeof(s->ca_path), "/tmp/sg-fm-ca-%d-%d.pem", (int)getpid(),
             ++started);
    if (pipe(fds) != 0) {
        return -1;
    }
    char *argv[16];
    int n = 0;
    argv[n++] = (char *)binary;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--write-ca";
    argv[n++] = s->ca_path;
    argv[n++] = "--quiet";
    for (int i = 0; extra != NULL && extra[i] != NULL && n < 15; i++) {
        argv[n++] = (char *)extra[i];
    }
    argv[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    int rv = posix_spawn(&s->pid, binary, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (rv != 0) {
        close(fds[0]);
        return -1;
    }
    char line[32];
    size_t len = 0;
    while (len < sizeof(line) - 1) {
        ssize_t got = read(fds[0], line + len, 1);
        if (got <= 0 || line[len] == '\n') {
            break;
        }
        len++;
    }
    line[len] = '\0';
    close(fds[0]); /* the server must not block on a full pipe later */
    s->port = atoi(line);
    if (s->port <= 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        return -1;
    }
    snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
    snprintf(s->tls_base, sizeof(s->tls_base), "https://localhost:%d", s->port);
    return 0;
}

static inline int fm_start(fm_server *s, const char *binary) {
    return fm_start_with(s, binary, NULL);
}

static inline void fm_stop(fm_server *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
    unlink(s->ca_path);
}

/* One server for a whole group of tests: the program's sg-fakemodel
 * (fm_group_binary) started by the group's setup, fm_group_start, and
 * stopped by its teardown, fm_group_stop. */
static inline const char **fm_group_binary(void) {
    static const char *binary;
    return &binary;
}
static inline fm_server *fm_group(void) {
    static fm_server server;
    return &server;
}
/* A test program's one argument, the sg-fakemodel to start: 0, or 2 after
 * printing the usage. */
static inline int fm_group_args(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/sg-fakemodel\n", argv[0]);
        return 2;
    }
    *fm_group_binary() = argv[1];
    return 0;
}
static inline int fm_group_start(void **state) {
    (void)state;
    return fm_start(fm_group(), *fm_group_binary());
}
static inline int fm_group_stop(void **state) {
    (void)state;
    fm_stop(fm_group());
    return 0;
}

struct fm_buf {
    char *p;
    size_t n;
};

static inline size_t fm_collect(char *ptr, size_t size, size_t nmemb, void *ud) {
    struct fm_buf *b = ud;
    size_t len = size * nmemb;
    char *np = realloc(b->p, b->n + len + 1);
    if (np == NULL) {
        return 0;
    }
    memcpy(np + b->n, ptr, len);
    b->p = np;
    b->n += len;
    b->p[b->n] = '\0';
    return len;
}

/* A plain GET (or POST when post is set) of base+path; returns a malloc'ed
 * NUL-terminated body or NULL. */
static inline char *fm_fetch(const fm_server *s, const char *path, int post) {
    char url[512];
    struct fm_buf b = {NULL, 0};
    snprintf(url, sizeof(url), "%s%s", s->base, path);
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, fm_collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    if (post) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
    }
    CURLcode rc = curl_easy_perform(e);
    curl_easy_cleanup(e);
    if (rc != CURLE_OK) {
        free(b.p);
        return NULL;
    }
    if (b.p == NULL) {
        b.p = calloc(1, 1);
    }
    return b.p;
}

/* How many times needle occurs in hay. */
static inline int fm_count(const char *hay, const char *needle) {
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += len) {
        n++;
    }
    return n;
}

#endif
