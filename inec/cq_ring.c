/* The completion ring and counts of a CQ, shared by the providers. */
#include "inec/cq_ring.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int inec_cq_ring_init(struct inec_cq_ring *r, uint32_t depth)
{
    /* Not zeroed: only entries already pushed are ever read, and a ring of
     * max_cqe is megabytes that calloc would clear on every CQ created. */
    r->ring = malloc((size_t)depth * sizeof(*r->ring));
    if (!r->ring)
        return inec_fail(-ENOMEM, "out of memory for a CQ of %u", depth);
    r->depth = depth;
    r->head = r->tail = 0;
    r->waiters = 0;
    r->watches = NULL;
    pthread_mutex_init(&r->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cond, &ca);
    pthread_condattr_destroy(&ca);
    return 0;
}

void inec_cq_ring_fini(struct inec_cq_ring *r)
{
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r->ring);
}

/* A thread in inec_cq_wait_any sleeps on one condition of its own, and
 * hangs one watch on each ring it waits for: a push to any of them wakes it.
 * Lock order: a ring's lock, then the watcher's. */
struct inec_cq_watcher {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    bool woken;
};

struct inec_cq_watch {
    struct inec_cq_watcher *by;
    struct inec_cq_watch *next;
};

static void watcher_wake(struct inec_cq_watcher *w)
{
    pthread_mutex_lock(&w->lock);
    w->woken = true;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void inec_cq_ring_wake(struct inec_cq_ring *r)
{
    pthread_mutex_lock(&r->lock);
    pthread_cond_broadcast(&r->cond);
    for (struct inec_cq_watch *w = r->watches; w; w = w->next)
        watcher_wake(w->by);
    pthread_mutex_unlock(&r->lock);
}

void inec_cq_ring_push(struct inec_cq *cq, struct inec_cq_ring *r, const struct inec_wc *wc,
                       bool quiet)
{
    pthread_mutex_lock(&r->lock);
    if (r->tail - r->head == r->depth)
        r->head++; /* overwrite the oldest, see inec_cq_create */
    r->ring[r->tail++ % r->depth] = *wc;
    if (wc->status != INEC_WC_SUCCESS)
        atomic_fetch_add_explicit(&cq->errors, 1, memory_order_release);
    atomic_fetch_add_explicit(&cq->count, 1, memory_order_release);
    if (r->waiters && !quiet)
        pthread_cond_broadcast(&r->cond);
    for (struct inec_cq_watch *w = r->watches; w && !quiet; w = w->next)
        watcher_wake(w->by);
    pthread_mutex_unlock(&r->lock);
}

static int poll_locked(struct inec_cq_ring *r, int n, struct inec_wc *wc)
{
    int got = 0;
    while (got < n && r->head != r->tail)
        wc[got++] = r->ring[r->head++ % r->depth];
    return got;
}

int inec_cq_ring_poll(struct inec_cq_ring *r, int n, struct inec_wc *wc)
{
    pthread_mutex_lock(&r->lock);
    int got = poll_locked(r, n, wc);
    pthread_mutex_unlock(&r->lock);
    return got;
}

static void deadline(struct timespec *ts, int timeout_ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += timeout_ms / 1000;
    ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

struct cond {
    const struct inec_cq *cq; /* count_reached */
    uint64_t target;
};

static bool has_entries(const struct inec_cq_ring *r, const struct cond *c)
{
    (void)c;
    return r->head != r->tail;
}

static bool count_reached(const struct inec_cq_ring *r, const struct cond *c)
{
    (void)r;
    return inec_count_reached(atomic_load(&c->cq->count), c->target);
}

/* Sleep on r->cond until ready(); the caller holds r->lock. */
static int sleep_until(struct inec_cq_ring *r, int timeout_ms,
                       bool (*ready)(const struct inec_cq_ring *, const struct cond *),
                       const struct cond *c)
{
    struct timespec ts;
    if (timeout_ms >= 0)
        deadline(&ts, timeout_ms);
    int rc = 0;
    r->waiters++;
    while (!ready(r, c) && rc == 0)
        rc = timeout_ms < 0 ? pthread_cond_wait(&r->cond, &r->lock)
                            : pthread_cond_timedwait(&r->cond, &r->lock, &ts);
    r->waiters--;
    return ready(r, c) ? 0 : -ETIMEDOUT;
}

int inec_cq_ring_wait(struct inec_cq_ring *r, int n, struct inec_wc *wc, int timeout_ms)
{
    pthread_mutex_lock(&r->lock);
    int rc = sleep_until(r, timeout_ms, has_entries, NULL);
    if (rc == 0)
        rc = poll_locked(r, n, wc);
    pthread_mutex_unlock(&r->lock);
    return rc == -ETIMEDOUT ? inec_fail(rc, "no completion within %d ms", timeout_ms) : rc;
}

int inec_cq_ring_wait_count(struct inec_cq *cq, struct inec_cq_ring *r, uint64_t target,
                            int timeout_ms)
{
    const struct cond c = {cq, target};
    pthread_mutex_lock(&r->lock);
    int rc = sleep_until(r, timeout_ms, count_reached, &c);
    pthread_mutex_unlock(&r->lock);
    return rc ? inec_fail(rc, "CQ count did not reach %llu within %d ms",
                          (unsigned long long)target, timeout_ms)
              : 0;
}

static struct inec_cq_ring *ring_of(struct inec_cq *cq)
{
    return &((struct inec_ring_cq *)cq)->r;
}

/* The first of the rings holding a completion, or -1. */
static int first_ready(struct inec_cq *const *cqs, int n)
{
    for (int i = 0; i < n; i++) {
        struct inec_cq_ring *r = ring_of(cqs[i]);
        pthread_mutex_lock(&r->lock);
        bool ready = r->head != r->tail;
        pthread_mutex_unlock(&r->lock);
        if (ready)
            return i;
    }
    return -1;
}

int inec_ring_cq_wait_any(struct inec_cq *const *cqs, int n, int timeout_ms)
{
    int ready = first_ready(cqs, n);
    if (ready >= 0)
        return ready;
    struct inec_cq_watcher w = {.woken = false};
    struct inec_cq_watch watch[INEC_WAIT_ANY_MAX];
    pthread_mutex_init(&w.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w.cond, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < n; i++) {
        struct inec_cq_ring *r = ring_of(cqs[i]);
        pthread_mutex_lock(&r->lock);
        watch[i] = (struct inec_cq_watch){&w, r->watches};
        r->watches = &watch[i];
        w.woken |= r->head != r->tail; /* pushed before the watch hung there */
        pthread_mutex_unlock(&r->lock);
    }
    struct timespec ts;
    if (timeout_ms >= 0)
        deadline(&ts, timeout_ms);
    pthread_mutex_lock(&w.lock);
    for (int rc = 0; !w.woken && rc == 0;)
        rc = timeout_ms < 0 ? pthread_cond_wait(&w.cond, &w.lock)
                            : pthread_cond_timedwait(&w.cond, &w.lock, &ts);
    pthread_mutex_unlock(&w.lock);
    for (int i = 0; i < n; i++) {
        struct inec_cq_ring *r = ring_of(cqs[i]);
        pthread_mutex_lock(&r->lock);
        struct inec_cq_watch **p = &r->watches;
        while (*p != &watch[i])
            p = &(*p)->next;
        *p = watch[i].next;
        pthread_mutex_unlock(&r->lock);
    }
    /* No push reaches w now: every ring has let go of it. */
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
    ready = first_ready(cqs, n);
    return ready >= 0 ? ready : inec_fail(-ETIMEDOUT, "no completion within %d ms", timeout_ms);
}

int inec_ring_cq_poll(struct inec_cq *cq, int n, struct inec_wc *wc)
{
    return inec_cq_ring_poll(ring_of(cq), n, wc);
}

int inec_ring_cq_wait(struct inec_cq *cq, int n, struct inec_wc *wc, int timeout_ms)
{
    return inec_cq_ring_wait(ring_of(cq), n, wc, timeout_ms);
}

int inec_ring_cq_wait_count(struct inec_cq *cq, uint64_t target, int timeout_ms)
{
    return inec_cq_ring_wait_count(cq, ring_of(cq), target, timeout_ms);
}
