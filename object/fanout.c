/*
 * The fan-out: threads that run batches of jobs, so the gateway calls
 * several nodes at once; the pool grows (up to FAN_MAX) while calls hang on a
 * node, so a hung node never stalls the calls to the others.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "inec/log.h"
#include "object/objects_internal.h"

#define FAN_MAX 64 /* a pool grows to this when every thread waits on a hung node */

struct fan_job {
    void (*fn)(void *arg, int i);
    void *arg;
    int i;
    int *left;
    pthread_cond_t *done;
    struct fan_job *next;
    char ctx[INEC_LOG_CONTEXT_MAX]; /* the log context of who queued it: its request */
};

struct gw_fanout {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct fan_job *head, *tail;
    bool stop;
    int nthreads, idle, queued, starting; /* starting: created, not waiting yet */
    pthread_t threads[FAN_MAX];
};

static void *fan_main(void *arg)
{
    pthread_setname_np(pthread_self(), "fanout");
    struct gw_fanout *f = arg;
    pthread_mutex_lock(&f->lock);
    f->starting--;
    for (;;) {
        f->idle++;
        while (!f->head && !f->stop)
            pthread_cond_wait(&f->cond, &f->lock);
        f->idle--;
        if (!f->head)
            break;
        struct fan_job *j = f->head;
        f->queued--;
        f->head = j->next;
        if (!f->head)
            f->tail = NULL;
        pthread_mutex_unlock(&f->lock);
        inec_log_context_set(j->ctx);
        j->fn(j->arg, j->i);
        inec_log_context_set(NULL);
        pthread_mutex_lock(&f->lock);
        if (!j->left) /* posted: nobody waits for it */
            free(j);
        else if (--*j->left == 0)
            pthread_cond_broadcast(j->done);
    }
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

/* More threads when the jobs queued outnumber the idle ones: a call to a hung
 * node holds its thread for the peer timeout, and must not hold up the rest
 * (f->lock held). */
static void fan_grow(struct gw_fanout *f)
{
    while (f->queued > f->idle + f->starting && f->nthreads < FAN_MAX &&
           pthread_create(&f->threads[f->nthreads], NULL, fan_main, f) == 0) {
        f->nthreads++;
        f->starting++;
    }
}

void gw_fanout_run(struct gw_objects *o, int n, void (*fn)(void *arg, int i), void *arg)
{
    struct gw_fanout *f = o->fan;
    if (n <= 0)
        return;
    /* Jobs 0..n-2 go to the pool, the last runs here: the caller waits for
     * all of them anyway, and so costs no thread a wake-up for its share. */
    int queued = n - 1;
    struct fan_job *jobs = queued ? calloc((size_t)queued, sizeof(*jobs)) : NULL;
    if (queued && !jobs) { /* degrade to running them here */
        for (int i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    pthread_cond_t done;
    pthread_cond_init(&done, NULL);
    int left = queued;
    pthread_mutex_lock(&f->lock);
    for (int i = 0; i < queued; i++) {
        jobs[i] = (struct fan_job){fn, arg, i, &left, &done, NULL, ""};
        snprintf(jobs[i].ctx, sizeof(jobs[i].ctx), "%s", inec_log_context());
        if (f->tail)
            f->tail->next = &jobs[i];
        else
            f->head = &jobs[i];
        f->tail = &jobs[i];
        /* One thread per job: a broadcast would wake every idle one. */
        pthread_cond_signal(&f->cond);
    }
    f->queued += queued;
    fan_grow(f);
    pthread_mutex_unlock(&f->lock);
    fn(arg, n - 1);
    /* Every job is an RPC bounded by the client timeout, so this wait is bounded. */
    pthread_mutex_lock(&f->lock);
    while (left > 0)
        pthread_cond_wait(&done, &f->lock);
    pthread_mutex_unlock(&f->lock);
    pthread_cond_destroy(&done);
    free(jobs);
}

int gw_fanout_post(struct gw_fanout *f, void (*fn)(void *arg, int i), void *arg, int i)
{
    struct fan_job *j = calloc(1, sizeof(*j));
    if (!j)
        return -ENOMEM;
    *j = (struct fan_job){fn, arg, i, NULL, NULL, NULL, ""};
    snprintf(j->ctx, sizeof(j->ctx), "%s", inec_log_context());
    pthread_mutex_lock(&f->lock);
    if (f->tail)
        f->tail->next = j;
    else
        f->head = j;
    f->tail = j;
    f->queued++;
    fan_grow(f);
    pthread_cond_signal(&f->cond);
    pthread_mutex_unlock(&f->lock);
    return 0;
}

int gw_fanout_create(int nthreads, struct gw_fanout **out)
{
    struct gw_fanout *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    if (nthreads > GW_FAN_THREADS)
        nthreads = GW_FAN_THREADS;
    pthread_mutex_lock(&f->lock);
    for (; f->nthreads < nthreads; f->nthreads++, f->starting++)
        if (pthread_create(&f->threads[f->nthreads], NULL, fan_main, f))
            break;
    pthread_mutex_unlock(&f->lock);
    *out = f;
    return f->nthreads ? 0 : -EAGAIN;
}

void gw_fanout_destroy(struct gw_fanout *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->stop = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    for (int i = 0; i < f->nthreads; i++)
        pthread_join(f->threads[i], NULL);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
}
