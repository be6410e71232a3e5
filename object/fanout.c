/*
 * The fan-out: threads that run batches of jobs, so the gateway calls
 * several nodes at once; the pool grows (up to FAN_MAX) while calls hang on a
 * node, so a hung node never stalls the calls to the others, and shrinks
 * back to the threads it keeps: the fewest threads idle at once over a
 * window of idle_ms were not needed then, and that many leave (a pool's
 * periodic jobs wake its threads in turn, so no one thread's idle time
 * says it). A thread that leaves is joined by the next that grows or
 * destroys the pool.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "inec/log.h"
#include "object/objects_internal.h"

#define FAN_MAX     64    /* a pool grows to this when every thread waits on a hung node */
#define FAN_IDLE_MS 10000 /* the window over which threads idle throughout leave */

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
    int keep, idle_ms;
    int64_t since; /* the window began (gw_now_ms) */
    int min_idle;  /* the fewest threads idle at once in it */
    int surplus;   /* threads to leave, from the window before */
    pthread_t threads[FAN_MAX];
    pthread_t left[FAN_MAX]; /* threads gone idle and leaving: to join */
    int nleft;
};

/* Leaves the pool, idle (f->lock held): its place goes to the last thread. */
static void fan_leave(struct gw_fanout *f)
{
    for (int i = 0; i < f->nthreads; i++) {
        if (!pthread_equal(f->threads[i], pthread_self()))
            continue;
        f->left[f->nleft++] = f->threads[i];
        f->threads[i] = f->threads[--f->nthreads];
        return;
    }
}

/* Should this idle thread leave the pool (f->lock held)? */
static bool fan_surplus(struct gw_fanout *f)
{
    int64_t now = gw_now_ms();
    if (now - f->since >= f->idle_ms) {
        f->surplus = f->min_idle;
        f->since = now;
        f->min_idle = f->idle;
    }
    if (f->head || f->stop || f->surplus <= 0 || f->nthreads <= f->keep)
        return false;
    f->surplus--;
    return true;
}

/* Joins the threads that left (f->lock held; they no longer take it). */
static void fan_join_left(struct gw_fanout *f)
{
    while (f->nleft > 0)
        pthread_join(f->left[--f->nleft], NULL);
}

static void *fan_main(void *arg)
{
    pthread_setname_np(pthread_self(), "fanout");
    struct gw_fanout *f = arg;
    pthread_mutex_lock(&f->lock);
    f->starting--;
    for (;;) {
        /* Here after each job and each timeout: a pool's jobs wake its
         * threads in turn, so a thread may never time out idle. */
        if (fan_surplus(f)) {
            fan_leave(f);
            break;
        }
        f->idle++;
        bool timed_out = false;
        while (!f->head && !f->stop && !timed_out) {
            struct timespec until = gw_deadline_in_ms(f->idle_ms);
            timed_out = pthread_cond_timedwait(&f->cond, &f->lock, &until) == ETIMEDOUT;
        }
        f->idle--;
        if (!f->head && !f->stop)
            continue; /* the top decides: leave, or wait again */
        if (!f->head)
            break;
        if (f->idle < f->min_idle)
            f->min_idle = f->idle;
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
    fan_join_left(f);
    while (f->queued > f->idle + f->starting && f->nthreads < FAN_MAX &&
           pthread_create(&f->threads[f->nthreads], NULL, fan_main, f) == 0) {
        f->nthreads++;
        f->starting++;
        f->surplus = 0; /* needed now: a new window */
        f->since = gw_now_ms();
        f->min_idle = f->idle;
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

int gw_fanout_create(int keep, struct gw_fanout **out)
{
    struct gw_fanout *f = calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->keep = keep < 1 ? 1 : keep > FAN_MAX ? FAN_MAX : keep;
    f->idle_ms = FAN_IDLE_MS;
    f->since = gw_now_ms();
    f->min_idle = f->keep;
    pthread_mutex_lock(&f->lock);
    for (; f->nthreads < f->keep; f->nthreads++, f->starting++)
        if (pthread_create(&f->threads[f->nthreads], NULL, fan_main, f))
            break;
    pthread_mutex_unlock(&f->lock);
    *out = f;
    return f->nthreads ? 0 : -EAGAIN;
}

void gw_fanout_idle_ms(struct gw_fanout *f, int ms)
{
    pthread_mutex_lock(&f->lock);
    f->idle_ms = ms;
    pthread_cond_broadcast(&f->cond); /* the idle ones wait again with it */
    pthread_mutex_unlock(&f->lock);
}

int gw_fanout_threads(struct gw_fanout *f)
{
    pthread_mutex_lock(&f->lock);
    fan_join_left(f);
    int n = f->nthreads;
    pthread_mutex_unlock(&f->lock);
    return n;
}

void gw_fanout_destroy(struct gw_fanout *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    f->stop = true; /* from now on no thread leaves the array */
    pthread_cond_broadcast(&f->cond);
    fan_join_left(f);
    pthread_mutex_unlock(&f->lock);
    for (int i = 0; i < f->nthreads; i++)
        pthread_join(f->threads[i], NULL);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
}
