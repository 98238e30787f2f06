/*
 * Intents off the caller's thread: the ledger observer's start_intent,
 * poll_intent and abandon_intent.  An event loop that drives many
 * operations hands each intent to the handle's intent threads and goes on
 * with the others; a thread records one intent at a time
 * (sg__ledger_intent_until, bounded by its operation's budget) and makes
 * its eventfd readable when the answer is in.  Up to intents.max threads
 * take the queue in order, so an intent that waits (on PostgreSQL, for a
 * row another transaction holds) holds up no intent queued after it while
 * a thread is free.  An operation that ends first (cancelled, or its
 * budget spent) abandons its intent: if it lands after all, the thread
 * resolves it at once - failed, with the operation's outcome - since
 * nothing was or will be sent for it.
 */
#define _GNU_SOURCE
#include "ledger/internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

struct sg__intent_job {
    struct sg__intent_job *next;
    int fd;    /* eventfd: readable once state is JOB_DONE */
    int state; /* under the queue's mutex */
    int rc;    /* JOB_DONE: the intent's answer */
    bool abandoned;
    uint8_t outcome; /* abandoned: the operation's outcome */
    int64_t until;
    char key[SG_LEDGER_KEY_MAX + 1];
    char method[SG_LEDGER_METHOD_MAX + 1];
    char url[]; /* NUL-terminated */
};

static void job_free(sg__intent_job *j) {
    if (j != NULL) {
        close(j->fd);
        free(j);
    }
}

/* Resolves an intent that landed after its operation ended. */
static void resolve_abandoned(sg_ledger *l, const sg__intent_job *j) {
    (void)sg_ledger_resolve(l, j->key, SG_LEDGER_FAILED, (sg_outcome)j->outcome);
}

static void *intent_main(void *arg) {
    sg_ledger *l = arg;
    sg__ledger_intents *q = &l->intents;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->head == NULL && !q->stop) {
            q->idle++;
            pthread_cond_wait(&q->work, &q->mu);
            q->idle--;
        }
        if (q->head == NULL) {
            break;
        }
        sg__intent_job *j = q->head;
        q->head = j->next;
        if (q->head == NULL) {
            q->tail = NULL;
        }
        q->queued--;
        if (j->abandoned) {
            job_free(j); /* never recorded, never to be */
            continue;
        }
        j->state = JOB_RUNNING;
        q->running++;
        pthread_mutex_unlock(&q->mu);
        int rc = sg__ledger_intent_until(l, j->key, j->method, j->url, j->until);
        pthread_mutex_lock(&q->mu);
        j->rc = rc;
        j->state = JOB_DONE;
        if (j->abandoned) {
            pthread_mutex_unlock(&q->mu);
            if (rc == 0) {
                resolve_abandoned(l, j);
            }
            job_free(j);
            pthread_mutex_lock(&q->mu);
        } else {
            uint64_t one = 1;
            (void)!write(j->fd, &one, sizeof(one));
        }
        q->running--;
        pthread_cond_broadcast(&q->done);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int sg__ledger_intents_init(sg_ledger *l, size_t max) {
    sg__ledger_intents *q = &l->intents;
    /* the options were checked: the clamp only keeps threads[] safe */
    q->max =
        max > SG_LEDGER_INTENT_CONNECTIONS_MAX ? SG_LEDGER_INTENT_CONNECTIONS_MAX : max;
    q->max = q->max < 1 ? 1 : q->max;
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        return SG_ENOMEM;
    }
    if (pthread_cond_init(&q->work, NULL) != 0) {
        pthread_mutex_destroy(&q->mu);
        return SG_ENOMEM;
    }
    if (sg__ledger_cond_init(&q->done) != 0) {
        pthread_cond_destroy(&q->work);
        pthread_mutex_destroy(&q->mu);
        return SG_ENOMEM;
    }
    q->ready = true;
    return 0;
}

void sg__ledger_intents_close(sg_ledger *l, int64_t until) {
    sg__ledger_intents *q = &l->intents;
    if (!q->ready) {
        return;
    }
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    /* Queued and not started: the operations are gone (the ledger outlives
     * them), so these are abandoned ones - never recorded. */
    sg__intent_job *j = q->head;
    q->head = q->tail = NULL;
    q->queued = 0;
    pthread_cond_broadcast(&q->work);
    size_t n = q->nthreads;
    /* Those being recorded (of operations gone too: an intent that lands
     * is resolved) have until @until; then they are given up. */
    while (q->running > 0 && sg__ledger_wait_until(&q->done, &q->mu, until) == 0) {
    }
    bool late = q->running > 0;
    pthread_mutex_unlock(&q->mu);
    if (late) {
        l->backend->interrupt(l);
    }
    while (j != NULL) {
        sg__intent_job *next = j->next;
        job_free(j);
        j = next;
    }
    for (size_t i = 0; i < n; i++) {
        pthread_join(q->threads[i], NULL);
    }
    pthread_cond_destroy(&q->done);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->mu);
    q->ready = false;
}

/* Under the queue's mutex, before @queued jobs wait: one more thread when
 * fewer are free than that and there is room.  SG_ESYS only when there is
 * no thread at all (the ones there take the queue in turn otherwise). */
static int spawn_for(sg_ledger *l, size_t queued) {
    sg__ledger_intents *q = &l->intents;
    if (q->idle >= queued || q->nthreads >= q->max) {
        return 0;
    }
    if (sg__ledger_spawn(&q->threads[q->nthreads], intent_main, l) == 0) {
        q->nthreads++;
    }
    return q->nthreads > 0 ? 0 : SG_ESYS;
}

int sg__ledger_intent_start(sg_ledger *l, const char *key, const char *method,
                            const char *url, int64_t until, sg__intent_job **out) {
    *out = NULL;
    size_t klen = strnlen(key, SG_LEDGER_KEY_MAX + 1);
    size_t mlen = strnlen(method, SG_LEDGER_METHOD_MAX + 1);
    size_t ulen = strnlen(url, SG_LEDGER_URL_MAX + 1);
    int rv;
    if ((rv = sg__ledger_check_key(key, klen)) != 0 ||
        (rv = sg__ledger_check_method(method, mlen)) != 0 ||
        (rv = sg__ledger_check_url(url, ulen)) != 0) {
        return rv;
    }
    sg__intent_job *j = calloc(1, sizeof(*j) + ulen + 1);
    if (j == NULL) {
        return SG_ENOMEM;
    }
    j->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (j->fd < 0) {
        free(j);
        return SG_ESYS;
    }
    memcpy(j->key, key, klen + 1);
    memcpy(j->method, method, mlen + 1);
    memcpy(j->url, url, ulen + 1);
    j->until = until;
    sg__ledger_intents *q = &l->intents;
    pthread_mutex_lock(&q->mu);
    rv = spawn_for(l, q->queued + 1);
    if (rv == 0) {
        if (q->tail != NULL) {
            q->tail->next = j;
        } else {
            q->head = j;
        }
        q->tail = j;
        q->queued++;
        pthread_cond_signal(&q->work);
    }
    pthread_mutex_unlock(&q->mu);
    if (rv != 0) {
        job_free(j);
        return rv;
    }
    *out = j;
    return 0;
}

int sg__ledger_intent_fd(const sg__intent_job *j) {
    return j->fd;
}

int sg__ledger_intent_poll(sg_ledger *l, sg__intent_job *j) {
    sg__ledger_intents *q = &l->intents;
    pthread_mutex_lock(&q->mu);
    bool done = j->state == JOB_DONE;
    pthread_mutex_unlock(&q->mu);
    if (!done) {
        return SG_EINPROGRESS;
    }
    int rc = j->rc;
    job_free(j);
    return rc;
}

void sg__ledger_intent_abandon(sg_ledger *l, sg__intent_job *j, sg_outcome outcome) {
    sg__ledger_intents *q = &l->intents;
    pthread_mutex_lock(&q->mu);
    bool done = j->state == JOB_DONE;
    if (!done) {
        /* queued or being recorded: the thread frees it (and resolves it
         * if it lands) */
        j->abandoned = true;
        j->outcome = (uint8_t)outcome;
    }
    pthread_mutex_unlock(&q->mu);
    if (done) {
        if (j->rc == 0) {
            j->outcome = (uint8_t)outcome;
            resolve_abandoned(l, j);
        }
        job_free(j);
    }
}
