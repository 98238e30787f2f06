/*
 * The test OTLP/HTTP collector (otel_collector.h): HTTP/1.1 on loopback,
 * one connection at a time, keep-alive, Content-Length bodies - what an
 * OTLP/HTTP exporter sends.  The bodies are decoded with protobuf-c's
 * unpack of the code protoc-c generated from the pinned definitions.
 */
#define _GNU_SOURCE /* strcasestr */
#include "otel_collector.h"

#include <opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HEAD_MAX 16384
#define BODY_MAX (64u << 20)
#define SPANS_MAX 200000
#define HELD_MAX 64
#define SCRIPT_MAX 16

struct otel_collector {
    enum oc_mode mode;
    int lfd;
    uint16_t port;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    int script[SCRIPT_MAX];
    size_t nscript, used;
    char retry_after[32];
    size_t requests;
    oc_span *spans;
    size_t nspans;
    char head[HEAD_MAX + 1];
    int held[HELD_MAX];
    size_t nheld;
};

static bool stopping(otel_collector *c) {
    pthread_mutex_lock(&c->mu);
    bool s = c->stop;
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* Waits until @fd is readable: 1, 0 on stop, -1 on error. */
static int wait_readable(otel_collector *c, int fd) {
    for (;;) {
        if (stopping(c)) {
            return 0;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, 20);
        if (r > 0) {
            return 1;
        }
        if (r < 0) {
            return -1;
        }
    }
}

/* Reads one request head into @head (NUL-terminated) and what came after it
 * into @extra; returns its length, 0 on EOF or stop, -1 on error. */
static ssize_t read_head(otel_collector *c, int fd, char *head, size_t *have) {
    for (;;) {
        head[*have] = '\0';
        char *end = strstr(head, "\r\n\r\n");
        if (end != NULL) {
            return end + 4 - head;
        }
        if (*have == HEAD_MAX || wait_readable(c, fd) <= 0) {
            return *have == HEAD_MAX ? -1 : 0;
        }
        ssize_t n = recv(fd, head + *have, HEAD_MAX - *have, 0);
        if (n <= 0) {
            return n == 0 ? 0 : -1;
        }
        *have += (size_t)n;
    }
}

static void keep_spans(otel_collector *c, const uint8_t *body, size_t len) {
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            NULL, len, body);
    if (req == NULL) {
        fprintf(stderr, "collector: a body of %zu bytes does not decode\n", len);
        return;
    }
    for (size_t r = 0; r < req->n_resource_spans; r++) {
        for (size_t s = 0; s < req->resource_spans[r]->n_scope_spans; s++) {
            Opentelemetry__Proto__Trace__V1__ScopeSpans *ss =
                req->resource_spans[r]->scope_spans[s];
            for (size_t i = 0; i < ss->n_spans && c->nspans < SPANS_MAX; i++) {
                Opentelemetry__Proto__Trace__V1__Span *p = ss->spans[i];
                oc_span *o = &c->spans[c->nspans++];
                memset(o, 0, sizeof *o);
                snprintf(o->name, sizeof o->name, "%s", p->name);
                if (p->trace_id.len == 16) {
                    memcpy(o->trace_id, p->trace_id.data, 16);
                }
                if (p->span_id.len == 8) {
                    memcpy(o->span_id, p->span_id.data, 8);
                }
                o->has_parent = p->parent_span_id.len == 8;
                if (o->has_parent) {
                    memcpy(o->parent_span_id, p->parent_span_id.data, 8);
                }
                o->start_unix_nano = p->start_time_unix_nano;
                o->end_unix_nano = p->end_time_unix_nano;
                o->nattrs = p->n_attributes;
                o->nevents = p->n_events;
            }
        }
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
        req, NULL);
}

/* One connection: its requests in turn, until EOF or stop.  Returns true
 * when the connection is to be kept open (the blackhole holds it). */
static bool serve(otel_collector *c, int fd) {
    char *head = malloc(HEAD_MAX + 1);
    size_t have = 0;
    bool hold = false;
    while (head != NULL && !hold) {
        ssize_t hl = read_head(c, fd, head, &have);
        if (hl <= 0) {
            break;
        }
        pthread_mutex_lock(&c->mu);
        memcpy(c->head, head, (size_t)hl);
        c->head[hl] = '\0';
        pthread_mutex_unlock(&c->mu);
        const char *cl = strcasestr(head, "\r\ncontent-length:");
        size_t len = cl != NULL ? strtoul(cl + 17, NULL, 10) : 0;
        if (len > BODY_MAX) {
            break;
        }
        uint8_t *body = malloc(len + 1);
        if (body == NULL) {
            break;
        }
        /* the body: what came with the head, then the socket */
        size_t avail = have - (size_t)hl;
        size_t got = avail < len ? avail : len;
        memcpy(body, head + hl, got);
        while (got < len && wait_readable(c, fd) > 0) {
            ssize_t n = recv(fd, body + got, len - got, 0);
            if (n <= 0) {
                break;
            }
            got += (size_t)n;
        }
        size_t used = avail < len ? avail : len;
        memmove(head, head + hl + used, avail - used); /* a pipelined next request */
        have = avail - used;
        pthread_mutex_lock(&c->mu);
        c->requests++;
        int status = c->used < c->nscript ? c->script[c->used++] : 200;
        if (c->mode == OC_BLACKHOLE) {
            hold = true;
        } else if (got == len && status == 200) {
            keep_spans(c, body, len);
        }
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        free(body);
        if (got < len) {
            break;
        }
        if (!hold) {
            char resp[256];
            int n = snprintf(
                resp, sizeof resp,
                "HTTP/1.1 %d Scripted\r\nContent-Type: application/x-protobuf\r\n"
                "Content-Length: 0\r\n%s%s%s\r\n",
                status, status != 200 && c->retry_after[0] ? "Retry-After: " : "",
                status != 200 ? c->retry_after : "",
                status != 200 && c->retry_after[0] ? "\r\n" : "");
            if (send(fd, resp, (size_t)n, MSG_NOSIGNAL) != n) {
                break;
            }
        }
    }
    free(head);
    return hold;
}

static void *run(void *arg) {
    otel_collector *c = arg;
    while (wait_readable(c, c->lfd) > 0) {
        int fd = accept(c->lfd, NULL, NULL);
        if (fd < 0) {
            continue;
        }
        if (!serve(c, fd)) {
            close(fd);
            continue;
        }
        pthread_mutex_lock(&c->mu);
        if (c->nheld == HELD_MAX) {
            close(c->held[0]);
            memmove(c->held, c->held + 1, (HELD_MAX - 1) * sizeof c->held[0]);
            c->nheld--;
        }
        c->held[c->nheld++] = fd;
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

otel_collector *oc_start(enum oc_mode mode) {
    otel_collector *c = calloc(1, sizeof *c);
    if (c == NULL || (c->spans = calloc(SPANS_MAX, sizeof *c->spans)) == NULL) {
        free(c);
        return NULL;
    }
    c->mode = mode;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    c->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(c->lfd, 64) != 0 || getsockname(c->lfd, (struct sockaddr *)&a, &al) != 0 ||
        pthread_create(&c->thread, NULL, run, c) != 0) {
        if (c->lfd >= 0) {
            close(c->lfd);
        }
        free(c->spans);
        free(c);
        return NULL;
    }
    c->port = ntohs(a.sin_port);
    return c;
}

void oc_script(otel_collector *c, const int *statuses, size_t n,
               const char *retry_after) {
    pthread_mutex_lock(&c->mu);
    c->nscript = n < SCRIPT_MAX ? n : SCRIPT_MAX;
    memcpy(c->script, statuses, c->nscript * sizeof *statuses);
    snprintf(c->retry_after, sizeof c->retry_after, "%s", retry_after ? retry_after : "");
    pthread_mutex_unlock(&c->mu);
}

uint16_t oc_port(const otel_collector *c) {
    return c->port;
}

size_t oc_wait_spans(otel_collector *c, size_t want, int timeout_ms) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&c->mu);
    while (c->nspans < want) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) != 0) {
            break;
        }
    }
    size_t n = c->nspans;
    pthread_mutex_unlock(&c->mu);
    return n;
}

size_t oc_requests(otel_collector *c) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->requests;
    pthread_mutex_unlock(&c->mu);
    return n;
}

oc_span *oc_spans(otel_collector *c, size_t *n) {
    pthread_mutex_lock(&c->mu);
    oc_span *copy = malloc((c->nspans + 1) * sizeof *copy);
    if (copy != NULL) {
        memcpy(copy, c->spans, c->nspans * sizeof *copy);
    }
    *n = c->nspans;
    pthread_mutex_unlock(&c->mu);
    return copy;
}

bool oc_last_head_has(otel_collector *c, const char *text) {
    pthread_mutex_lock(&c->mu);
    bool has = strstr(c->head, text) != NULL;
    pthread_mutex_unlock(&c->mu);
    return has;
}

void oc_stop(otel_collector *c) {
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_mutex_unlock(&c->mu);
    pthread_join(c->thread, NULL);
    for (size_t i = 0; i < c->nheld; i++) {
        close(c->held[i]);
    }
    close(c->lfd);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c->spans);
    free(c);
}
