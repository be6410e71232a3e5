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

void inec_cq_ring_push(struct inec_cq *cq, struct inec_cq_ring *r, const struct inec_wc *wc)
{
    pthread_mutex_lock(&r->lock);
    if (r->tail - r->head == r->depth)
        r->head++; /* overwrite the oldest, see inec_cq_create */
    r->ring[r->tail++ % r->depth] = *wc;
    if (wc->status != INEC_WC_SUCCESS)
        atomic_fetch_add_explicit(&cq->errors, 1, memory_order_release);
    atomic_fetch_add_explicit(&cq->count, 1, memory_order_release);
    if (r->waiters)
        pthread_cond_broadcast(&r->cond);
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
