/* The soft provider: devices, engine threads, queues, and WR execution. */
#include "inec/providers/soft/soft.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "codecs/gf.h"
#include "inec/log.h"

/* An idle engine spins this long before it sleeps, a waiting host thread
 * polls the count this long before it sleeps: a wake-up costs more. Not on
 * a device opened spin=0, for machines with more engines than cores, where
 * the spin takes a core the thread making the work wants (the 9 node
 * processes and the gateway of the tcp cluster on 2 cores: a node engine's
 * spins found work 1 in 20 times). */
#define ENGINE_SPIN_NS 10000
#define HOST_SPIN_NS   5000

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct soft_mr {
    struct inec_mr base;
};

static const struct inec_device_attr soft_attr = {
    .max_qp_wr = 4096,
    .max_cqe = 65536,
    .max_chain = 256,
    .max_wait = 64,
    .max_sge = SOFT_MAX_SGE,
    .max_inline = SOFT_MAX_INLINE,
    .max_msg_size = 1ull << 30,
};

/* Set on engine threads: they never run a posted SEND in place (post()). */
static _Thread_local bool on_engine;

static int32_t my_tid(void)
{
    static _Thread_local int32_t tid;
    if (!tid)
        tid = (int32_t)gettid();
    return tid;
}

/* ---- options --------------------------------------------------------- */

bool soft_opt(const char *options, const char *key, char *buf, size_t len)
{
    return inec_opt(options, key, buf, len);
}

static int check_options(const char *options)
{
    static const char *const known[] = {"transport",  "listen",       "engine_threads",
                                        "timeout_ms", "heartbeat_ms", "secret",
                                        "passive",    "spin",         "pull"};
    for (const char *p = options; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        bool ok = false;
        for (size_t i = 0; eq && i < sizeof(known) / sizeof(known[0]); i++)
            ok |= strlen(known[i]) == (size_t)(eq - p) && strncmp(p, known[i], eq - p) == 0;
        if (!ok)
            return inec_fail(-EINVAL, "soft: unknown option '%.*s'", (int)n, p);
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* ---- engine ---------------------------------------------------------- */

/* Bumps gen (an engine awake makes another pass), and wakes a sleeping one
 * only if it has something to do there. */
static void engine_wake_if(struct engine *eng, bool work)
{
    atomic_fetch_add(&eng->gen, 1);
    if (work && atomic_load(&eng->sleeping)) {
        uint64_t one = 1;
        ssize_t rc = write(eng->efd, &one, sizeof(one));
        (void)rc; /* the counter cannot overflow in practice; a lost write means it is set */
    }
}

void engine_wake(struct engine *eng)
{
    engine_wake_if(eng, true);
}

struct io_uring_sqe *engine_sqe(struct engine *eng)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&eng->ring);
    if (!sqe) {
        io_uring_submit(&eng->ring);
        sqe = io_uring_get_sqe(&eng->ring);
    }
    return sqe;
}

static void arm_efd(struct engine *eng);

static void efd_done(struct io_op *op, int res, uint32_t flags)
{
    (void)res;
    (void)flags;
    arm_efd((struct engine *)((char *)op - offsetof(struct engine, efd_op)));
}

static void arm_efd(struct engine *eng)
{
    struct io_uring_sqe *sqe = engine_sqe(eng);
    io_uring_prep_read(sqe, eng->efd, &eng->efd_buf, sizeof(eng->efd_buf), 0);
    io_uring_sqe_set_data(sqe, &eng->efd_op);
}

static bool reap(struct engine *eng)
{
    struct io_uring_cqe *cqe;
    unsigned head, n = 0;
    /* Deferred task work (completions of sockets that became ready) runs
     * only when the engine asks: the kernel flags that there is some. */
    if (eng->defer && (IO_URING_READ_ONCE(*eng->ring.sq.kflags) & IORING_SQ_TASKRUN))
        io_uring_get_events(&eng->ring);
    io_uring_for_each_cqe(&eng->ring, head, cqe)
    {
        struct io_op *op = io_uring_cqe_get_data(cqe);
        int res = cqe->res;
        uint32_t flags = cqe->flags;
        /* Mark seen first: the callback may submit. */
        io_uring_cqe_seen(&eng->ring, cqe);
        op->cb(op, res, flags);
        n++;
    }
    return n > 0;
}

static bool run_device(struct soft_device *dev);
static void run_notifies(void);

static void *engine_main(void *arg)
{
    pthread_setname_np(pthread_self(), "soft-engine");
    on_engine = true;
    struct engine *eng = arg;
    /* The one task that submits is this thread (liburing 2.3 declares
     * io_uring_enable_rings but does not export it). */
    if (eng->defer)
        syscall(__NR_io_uring_register, eng->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0);
    arm_efd(eng);
    uint64_t idle_since = 0;
    while (!atomic_load(&eng->stop)) {
        uint64_t gen = atomic_load(&eng->gen);
        bool progress = false;
        eng->pass_waits = false;
        /* Held for the pass and the I/O callbacks: destroy/close wait for it. */
        pthread_mutex_lock(&eng->lock);
        for (struct soft_device *d = eng->devs; d; d = d->next)
            progress |= run_device(d);
        if (io_uring_sq_ready(&eng->ring))
            io_uring_submit(&eng->ring); /* one submit per pass */
        progress |= reap(eng);
        pthread_mutex_unlock(&eng->lock);
        run_notifies();
        /* Before `sleeping` is set: a completion that sees the engine asleep
         * sees whether a WAIT of this pass needs it. */
        atomic_store(&eng->waits, eng->pass_waits);
        if (progress || atomic_load(&eng->gen) != gen) {
            idle_since = 0;
            continue;
        }
        if (!idle_since)
            idle_since = now_ns();
        if (!atomic_load(&eng->quiet) && now_ns() - idle_since < ENGINE_SPIN_NS)
            continue;
        atomic_store(&eng->sleeping, 1);
        if (atomic_load(&eng->gen) == gen && !atomic_load(&eng->stop)) {
            struct io_uring_cqe *cqe;
            int ms = 1000; /* a bound, though nothing needs it but transport ticks */
            pthread_mutex_lock(&eng->lock);
            for (struct soft_device *d = eng->devs; d; d = d->next)
                if (d->tick_ms > 0 && d->tick_ms < ms)
                    ms = d->tick_ms;
            pthread_mutex_unlock(&eng->lock);
            struct __kernel_timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
            io_uring_submit_and_wait_timeout(&eng->ring, &cqe, 1, &ts, NULL);
            atomic_fetch_add(&eng->wakes, 1);
        }
        atomic_store(&eng->sleeping, 0);
        idle_since = 0;
    }
    return NULL;
}

static int engine_start(struct engine **out)
{
    struct engine *eng = calloc(1, sizeof(*eng));
    if (!eng)
        return inec_fail(-ENOMEM, "soft: out of memory");
    eng->efd = eventfd(0, EFD_CLOEXEC);
    /* Only the engine thread touches the ring, so the kernel may defer the
     * task work of completions (a socket became ready) until the engine
     * asks for it, and run it in batches, instead of interrupting the
     * engine thread wherever it is (on the tcp cluster ~15% fewer context
     * switches per 16 MiB GET). Kernels before 6.1 lack it: a plain ring. */
    int rc = eng->efd < 0
                 ? -errno
                 : io_uring_queue_init(256, &eng->ring,
                                       IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                                           IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_R_DISABLED);
    eng->defer = rc == 0;
    if (rc == -EINVAL)
        rc = io_uring_queue_init(256, &eng->ring, 0);
    if (rc) {
        if (eng->efd >= 0)
            close(eng->efd);
        free(eng);
        return inec_fail(rc, "soft: engine set-up failed: %s", strerror(-rc));
    }
    eng->efd_op.cb = efd_done;
    pthread_mutex_init(&eng->lock, NULL);
    rc = pthread_create(&eng->thread, NULL, engine_main, eng);
    if (rc) {
        io_uring_queue_exit(&eng->ring);
        close(eng->efd);
        free(eng);
        return inec_fail(-rc, "soft: cannot start engine thread");
    }
    *out = eng;
    return 0;
}

static void engine_stop(struct engine *eng)
{
    atomic_store(&eng->stop, true);
    engine_wake(eng);
    pthread_join(eng->thread, NULL);
    io_uring_queue_exit(&eng->ring);
    close(eng->efd);
    pthread_mutex_destroy(&eng->lock);
    free(eng);
}

/* The process-wide pool behind engine_threads=N. */
static struct {
    pthread_mutex_t lock;
    struct engine **engines;
    int n, refs, next;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int pool_get(int want, struct engine **out)
{
    pthread_mutex_lock(&pool.lock);
    int rc = 0;
    if (pool.refs == 0) {
        pool.engines = calloc((size_t)want, sizeof(*pool.engines));
        rc = pool.engines ? 0 : -ENOMEM;
        for (pool.n = 0; rc == 0 && pool.n < want; pool.n++)
            rc = engine_start(&pool.engines[pool.n]);
        if (rc) {
            for (int i = 0; i < pool.n; i++)
                if (pool.engines[i])
                    engine_stop(pool.engines[i]);
            free(pool.engines);
            pool.engines = NULL;
            pool.n = 0;
        }
    } else if (want != pool.n) {
        inec_log(INEC_LOG_WARN, "inec", "engine pool already has threads=%d, asked=%d", pool.n,
                 want);
    }
    if (rc == 0) {
        pool.refs++;
        *out = pool.engines[pool.next++ % pool.n];
    }
    pthread_mutex_unlock(&pool.lock);
    return rc;
}

static void pool_put(void)
{
    pthread_mutex_lock(&pool.lock);
    if (--pool.refs == 0) {
        for (int i = 0; i < pool.n; i++)
            engine_stop(pool.engines[i]);
        free(pool.engines);
        pool.engines = NULL;
        pool.n = pool.next = 0;
    }
    pthread_mutex_unlock(&pool.lock);
}

/* ---- completion queues ----------------------------------------------- */

INEC_RING_CQ_LAYOUT(struct soft_cq);

static struct soft_cq *soft_cq(struct inec_cq *c)
{
    return (struct soft_cq *)c;
}

/* The CQs this engine thread pushed to that want a notify (soft_cq). */
static _Thread_local struct soft_cq *notify_list;

void soft_cq_push(struct soft_cq *cq, const struct inec_wc *wc)
{
    struct inec_wc w = *wc;
    w.tid = my_tid();
    bool notify = on_engine && atomic_load(&cq->notify);
    inec_cq_ring_push(&cq->base, &cq->r, &w, notify);
    if (notify && !atomic_exchange(&cq->notify_queued, true)) {
        cq->notify_next = notify_list;
        notify_list = cq;
    }
    /* Only a WAIT (on a queue of the CQ's own device) can be held for it. */
    struct engine *eng = soft_dev(cq->base.dev)->eng;
    engine_wake_if(eng, atomic_load(&eng->waits));
}

static int cq_create(struct inec_device *dev, uint32_t depth, struct inec_cq **out)
{
    struct soft_cq *cq = calloc(1, sizeof(*cq));
    if (!cq || inec_cq_ring_init(&cq->r, depth)) {
        free(cq);
        return inec_fail(-ENOMEM, "soft: out of memory for a CQ of %u", depth);
    }
    cq->base.dev = dev;
    *out = &cq->base;
    return 0;
}

/* After the engine's pass, with no lock held: the consumers' own work. */
static void run_notifies(void)
{
    while (notify_list) {
        struct soft_cq *cq = notify_list;
        notify_list = cq->notify_next;
        atomic_fetch_add(&cq->notifying, 1);
        atomic_store(&cq->notify_queued, false); /* a push from now on queues it again */
        void (*fn)(void *) = atomic_load(&cq->notify);
        if (fn)
            fn(cq->notify_arg);
        atomic_fetch_sub(&cq->notifying, 1);
    }
}

static int cq_set_notify(struct inec_cq *c, void (*fn)(void *), void *arg)
{
    struct soft_cq *cq = soft_cq(c);
    if (fn) {
        cq->notify_arg = arg;
        atomic_store(&cq->notify, fn);
        return 0;
    }
    if (!atomic_load(&cq->notify))
        return 0;
    atomic_store(&cq->notify, NULL);
    while (atomic_load(&cq->notify_queued) || atomic_load(&cq->notifying))
        sched_yield();
    /* What was pushed for the notify woke nobody: the waiters look now. */
    inec_cq_ring_wake(&cq->r);
    return 0;
}

static void cq_destroy(struct inec_cq *c)
{
    struct soft_cq *cq = soft_cq(c);
    cq_set_notify(c, NULL, NULL);
    inec_cq_ring_fini(&cq->r);
    free(cq);
}

static int cq_wait_count(struct inec_cq *c, uint64_t target, int timeout_ms)
{
    for (uint64_t t0 = now_ns(); soft_dev(c->dev)->spin && now_ns() - t0 < HOST_SPIN_NS;)
        if (inec_count_reached(atomic_load(&c->count), target))
            return 0;
    return inec_ring_cq_wait_count(c, target, timeout_ms);
}

/* ---- memory regions -------------------------------------------------- */

static int mr_reg(struct inec_device *d, void *addr, size_t len, struct inec_mr **out)
{
    struct soft_device *dev = soft_dev(d);
    struct soft_mr *mr = calloc(1, sizeof(*mr));
    if (!mr)
        return inec_fail(-ENOMEM, "soft: out of memory");
    mr->base.dev = d;
    mr->base.addr = addr;
    mr->base.len = len;
    pthread_rwlock_wrlock(&dev->mr_lock);
    uint32_t i = 0;
    while (i < dev->nmrs && dev->mrs[i])
        i++;
    if (i == dev->nmrs) {
        uint32_t n = dev->nmrs ? dev->nmrs * 2 : 16;
        struct soft_mr **m = realloc(dev->mrs, n * sizeof(*m));
        if (!m) {
            pthread_rwlock_unlock(&dev->mr_lock);
            free(mr);
            return inec_fail(-ENOMEM, "soft: out of memory");
        }
        memset(m + dev->nmrs, 0, (n - dev->nmrs) * sizeof(*m));
        dev->mrs = m;
        dev->nmrs = n;
    }
    dev->mrs[i] = mr;
    mr->base.rkey = i + 1;
    pthread_rwlock_unlock(&dev->mr_lock);
    atomic_fetch_add_explicit(&dev->registrations, 1, memory_order_relaxed);
    *out = &mr->base;
    return 0;
}

static void mr_dereg(struct inec_mr *m)
{
    struct soft_device *dev = soft_dev(m->dev);
    pthread_rwlock_wrlock(&dev->mr_lock);
    dev->mrs[m->rkey - 1] = NULL;
    pthread_rwlock_unlock(&dev->mr_lock);
    free(m);
}

uint8_t *soft_mr_range(struct soft_device *dev, uint32_t rkey, uint64_t addr, uint64_t len)
{
    if (rkey == 0 || rkey > dev->nmrs || !dev->mrs[rkey - 1])
        return NULL;
    const struct inec_mr *mr = &dev->mrs[rkey - 1]->base;
    uint64_t base = (uint64_t)(uintptr_t)mr->addr;
    if (addr < base || len > mr->len || addr - base > mr->len - len)
        return NULL;
    return mr->addr + (addr - base);
}

/* ---- queue pairs ----------------------------------------------------- */

static int wq_init(struct wq *q, uint32_t depth)
{
    q->depth = depth ? depth : 256;
    q->e = calloc(q->depth, sizeof(*q->e));
    pthread_mutex_init(&q->lock, NULL);
    return q->e ? 0 : -ENOMEM;
}

static void wq_fini(struct wq *q)
{
    free(q->e);
    pthread_mutex_destroy(&q->lock);
}

struct soft_qp *soft_qp_lookup(struct soft_device *dev, uint32_t qpn)
{
    struct soft_qp *qp = NULL;
    pthread_mutex_lock(&dev->lock);
    if (qpn >= 1 && qpn <= dev->nqps)
        qp = dev->qps[qpn - 1];
    pthread_mutex_unlock(&dev->lock);
    return qp;
}

static int qp_create(struct inec_device *d, const struct inec_qp_attr *attr, struct inec_qp **out)
{
    struct soft_device *dev = soft_dev(d);
    struct soft_qp *qp = calloc(1, sizeof(*qp));
    if (!qp)
        return inec_fail(-ENOMEM, "soft: out of memory");
    qp->base.dev = d;
    qp->base.type = attr->type;
    qp->base.send_cq = attr->send_cq;
    qp->base.recv_cq = attr->recv_cq;
    int rc = wq_init(&qp->sq, attr->sq_depth);
    if (rc == 0)
        rc = wq_init(&qp->rq, attr->type == INEC_QP_RC ? attr->rq_depth : 1);
    pthread_mutex_lock(&dev->lock);
    uint32_t i = 0;
    while (i < dev->nqps && dev->qps[i])
        i++;
    if (rc == 0 && i == dev->nqps) {
        uint32_t n = dev->nqps ? dev->nqps * 2 : 16;
        struct soft_qp **q = realloc(dev->qps, n * sizeof(*q));
        if (q) {
            memset(q + dev->nqps, 0, (n - dev->nqps) * sizeof(*q));
            dev->qps = q;
            dev->nqps = n;
        } else {
            rc = -ENOMEM;
        }
    }
    if (rc == 0) {
        qp->base.qpn = i + 1;
        dev->qps[i] = qp;
    }
    pthread_mutex_unlock(&dev->lock);
    if (rc) {
        wq_fini(&qp->sq);
        wq_fini(&qp->rq);
        free(qp);
        return inec_fail(rc, "soft: out of memory for a QP");
    }
    *out = &qp->base;
    return 0;
}

static void qp_destroy(struct inec_qp *q)
{
    struct soft_qp *qp = soft_qp(q);
    struct soft_device *dev = soft_dev(q->dev);
    dev->tr->qp_detach(qp);
    /* Once out of the table under the engine's lock, no pass can see it. */
    pthread_mutex_lock(&dev->eng->lock);
    pthread_mutex_lock(&dev->lock);
    dev->qps[q->qpn - 1] = NULL;
    pthread_mutex_unlock(&dev->lock);
    pthread_mutex_unlock(&dev->eng->lock);
    wq_fini(&qp->sq);
    wq_fini(&qp->rq);
    free(qp);
}

static int qp_connect(struct inec_qp *q, const char *addr, uint32_t rqpn)
{
    return soft_dev(q->dev)->tr->connect(soft_qp(q), addr, rqpn);
}

void soft_qp_set_error(struct soft_qp *qp)
{
    if (!atomic_exchange(&qp->base.error, 1))
        inec_log(INEC_LOG_DEBUG, "inec", "qp to error qpn=%u", qp->base.qpn);
    engine_wake(soft_dev(qp->base.dev)->eng);
}

/* ---- posting --------------------------------------------------------- */

static void fill_wqe(struct wqe *e, const struct inec_wr *wr)
{
    e->wr_id = wr->wr_id;
    e->opcode = (uint8_t)wr->opcode;
    e->flags = (uint8_t)wr->flags;
    e->has_imm = wr->opcode == INEC_WR_SEND_IMM || wr->opcode == INEC_WR_WRITE_IMM;
    e->imm = wr->imm;
    e->done = e->busy = false;
    e->status = INEC_WC_SUCCESS;
    e->nsge = (uint8_t)wr->num_sge;
    e->ndst = 0;
    e->len = 0;
    for (int i = 0; i < wr->num_sge; i++) {
        e->sge[i] = wr->sg_list[i];
        e->len += wr->sg_list[i].length;
    }
    switch (wr->opcode) {
    case INEC_WR_WAIT:
        e->wait.cq = soft_cq(wr->wait.cq);
        e->wait.count = wr->wait.count;
        e->wait.errors = atomic_load(&wr->wait.cq->errors);
        break;
    case INEC_WR_CALC:
        e->calc_kind = (uint8_t)wr->calc.kind;
        e->tables = wr->calc.tables;
        e->ndst = (uint8_t)wr->calc.ndst;
        for (int i = 0; i < wr->calc.ndst; i++)
            e->sge[wr->num_sge + i] = wr->calc.dsts[i];
        e->len = wr->sg_list[0].length;
        break;
    case INEC_WR_WRITE:
    case INEC_WR_WRITE_IMM:
        e->rdma.remote_addr = wr->rdma.remote_addr;
        e->rdma.rkey = wr->rdma.rkey;
        break;
    default:
        break;
    }
    if ((wr->flags & INEC_INLINE) && wr->opcode != INEC_WR_CALC) {
        struct inec_sge one = {e->inline_data, e->len, NULL};
        soft_copy_sg(wr->sg_list, wr->num_sge, &one, 1);
        e->sge[0] = one;
        e->nsge = 1;
    }
}

static bool runs_here(struct soft_device *dev, struct soft_qp *qp, const struct inec_wr *chain);
static bool poster_hold(struct soft_device *dev, bool on);
static bool run_qp(struct soft_device *dev, struct soft_qp *qp, uint64_t end);

static int post(struct soft_qp *qp, struct wq *q, struct inec_wr *chain, int nwr, const char *name)
{
    struct soft_device *dev = soft_dev(qp->base.dev);
    /* A chain this thread may run holds the device, as an engine pass does,
     * from before its doorbell: no pass can take it first. */
    bool here = q == &qp->sq && runs_here(dev, qp, chain);
    pthread_mutex_lock(&q->lock);
    uint64_t tail = atomic_load_explicit(&q->tail, memory_order_relaxed);
    uint64_t used = tail - atomic_load_explicit(&q->retire, memory_order_acquire);
    if (used + (uint64_t)nwr > q->depth) {
        pthread_mutex_unlock(&q->lock);
        if (here)
            poster_hold(dev, false);
        return inec_fail(-ENOMEM, "%s full: %llu outstanding + %d > depth %u", name,
                         (unsigned long long)used, nwr, q->depth);
    }
    uint64_t i = tail;
    for (struct inec_wr *wr = chain; wr; wr = wr->next)
        fill_wqe(&q->e[i++ % q->depth], wr);
    /* The doorbell: one release-store for the whole chain, one wake-up. */
    atomic_store_explicit(&q->tail, i, memory_order_release);
    pthread_mutex_unlock(&q->lock);
    atomic_fetch_add_explicit(&dev->doorbells, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&dev->wrs_posted, (uint64_t)nwr, memory_order_relaxed);
    if (here) {
        if (q->head == tail) /* nothing posted before it waits to run */
            run_qp(dev, qp, i);
        here = q->head == i; /* not when the peer's RQ was empty, or it lacks credit */
        if (dev->tr->transmit_here)
            here = dev->tr->transmit_here(qp) && here;
        poster_hold(dev, false);
    }
    if (q == &qp->sq) {
        if (!here)
            engine_wake(dev->eng);
    } else {
        dev->tr->recv_posted(qp); /* wakes whichever engine consumes the RQ */
    }
    return 0;
}

static int post_send(struct inec_qp *q, struct inec_wr *chain, int nwr)
{
    return post(soft_qp(q), &soft_qp(q)->sq, chain, nwr, "send queue");
}

static int post_recv(struct inec_qp *q, struct inec_wr *chain, int nwr)
{
    return post(soft_qp(q), &soft_qp(q)->rq, chain, nwr, "receive queue");
}

/* ---- execution (engine thread) --------------------------------------- */

void soft_copy_sg(const struct inec_sge *src, int nsrc, const struct inec_sge *dst, int ndst)
{
    size_t doff = 0;
    int d = 0;
    for (int s = 0; s < nsrc; s++) {
        size_t soff = 0;
        while (soff < src[s].length) {
            while (d < ndst && doff == dst[d].length) {
                d++;
                doff = 0;
            }
            size_t n = src[s].length - soff;
            if (n > dst[d].length - doff)
                n = dst[d].length - doff;
            memcpy((uint8_t *)dst[d].addr + doff, (const uint8_t *)src[s].addr + soff, n);
            soff += n;
            doff += n;
        }
    }
}

void soft_rq_complete(struct soft_qp *qp, enum inec_wc_status status, uint64_t byte_len,
                      enum inec_wc_opcode opcode, bool has_imm, uint32_t imm)
{
    uint64_t r = atomic_load_explicit(&qp->rq.retire, memory_order_relaxed);
    const struct wqe *e = &qp->rq.e[r % qp->rq.depth];
    struct inec_wc wc = {
        .wr_id = e->wr_id,
        .status = status,
        .opcode = opcode,
        .qp_num = qp->base.qpn,
        .byte_len = (uint32_t)byte_len,
        .imm = imm,
        .has_imm = has_imm,
    };
    soft_cq_push(soft_cq(qp->base.recv_cq), &wc);
    atomic_store_explicit(&qp->rq.retire, r + 1, memory_order_release);
}

static void run_calc(struct wqe *e)
{
    uint8_t *srcs[SOFT_MAX_SGE], *dsts[SOFT_MAX_SGE];
    for (int i = 0; i < e->nsge; i++)
        srcs[i] = e->sge[i].addr;
    for (int i = 0; i < e->ndst; i++)
        dsts[i] = e->sge[e->nsge + i].addr;
    if (e->len == 0)
        return;
    if (e->calc_kind == INEC_CALC_EC)
        codec_gf_encode(e->len, e->ndst, e->nsge, e->tables, srcs, dsts);
    else
        codec_xor(e->len, e->nsge, srcs, dsts[0]);
}

static enum exec_result exec(struct soft_device *dev, struct soft_qp *qp, struct wqe *e)
{
    switch (e->opcode) {
    case INEC_WR_WAIT: {
        struct inec_cq *cq = &e->wait.cq->base;
        if (!inec_count_reached(atomic_load_explicit(&cq->count, memory_order_acquire),
                                e->wait.count)) {
            dev->eng->pass_waits = true; /* a WAIT only ever runs on the engine */
            return EXEC_BLOCKED;
        }
        if (atomic_load_explicit(&cq->errors, memory_order_acquire) != e->wait.errors)
            e->status = INEC_WC_DEP_ERR;
        return EXEC_DONE;
    }
    case INEC_WR_CALC:
        run_calc(e);
        return EXEC_DONE;
    case INEC_WR_NOP:
        return EXEC_DONE;
    default:
        return dev->tr->send(qp, e);
    }
}

static bool flush_rq(struct soft_qp *qp)
{
    bool progress = false;
    pthread_mutex_lock(&qp->rq.lock);
    uint64_t tail = atomic_load_explicit(&qp->rq.tail, memory_order_acquire);
    while (atomic_load_explicit(&qp->rq.retire, memory_order_relaxed) != tail) {
        const struct wqe *e = &qp->rq.e[qp->rq.retire % qp->rq.depth];
        if (e->busy)
            break; /* the tcp receiver completes it */
        soft_rq_complete(qp, INEC_WC_FLUSH_ERR, 0, INEC_WC_RECV, false, 0);
        progress = true;
    }
    pthread_mutex_unlock(&qp->rq.lock);
    return progress;
}

/* Executes qp's send queue up to `end` (at most its tail), then retires what
 * finished; under device.lock. */
static bool run_qp(struct soft_device *dev, struct soft_qp *qp, uint64_t end)
{
    bool progress = false;
    struct wq *q = &qp->sq;
    while (q->head != end) {
        struct wqe *e = &q->e[q->head % q->depth];
        if (atomic_load(&qp->base.error)) {
            e->status = INEC_WC_FLUSH_ERR;
            e->done = true;
        } else {
            enum exec_result r = exec(dev, qp, e);
            if (r == EXEC_BLOCKED)
                break;
            if (r == EXEC_DONE)
                e->done = true;
            if (r == EXEC_DONE && e->status != INEC_WC_SUCCESS)
                soft_qp_set_error(qp);
        }
        q->head++;
        progress = true;
    }
    uint64_t r = atomic_load_explicit(&q->retire, memory_order_relaxed);
    for (; r != q->head && q->e[r % q->depth].done; r++) {
        const struct wqe *e = &q->e[r % q->depth];
        /* After an error everything reports flushed, even what already ran. */
        enum inec_wc_status st = qp->flushing ? INEC_WC_FLUSH_ERR : e->status;
        qp->flushing |= st != INEC_WC_SUCCESS;
        if (st != INEC_WC_SUCCESS || (e->flags & INEC_SIGNALED)) {
            struct inec_wc wc = {
                .wr_id = e->wr_id,
                .status = st,
                .opcode = inec_wc_opcode_of((enum inec_wr_opcode)e->opcode),
                .qp_num = qp->base.qpn,
                .byte_len = (uint32_t)e->len,
            };
            soft_cq_push(soft_cq(qp->base.send_cq), &wc);
        }
        atomic_store_explicit(&q->retire, r + 1, memory_order_release);
        progress = true;
    }
    if (atomic_load(&qp->base.error) && qp->base.type == INEC_QP_RC)
        progress |= flush_rq(qp);
    return progress;
}

/*
 * A small SEND or WRITE chain posted to an idle send queue: all the engine
 * would do is copy it into the peer and complete both sides (mem), or hand
 * it to the socket (tcp), at the price of a wake-up, two context switches,
 * per message (a metadata RPC is two messages). The posting thread runs it
 * instead (post()), holding what an engine pass holds, so order and
 * completions are the engine's. Larger payloads, WAIT and CALC stay on the
 * engine: they are its work to overlap with the host's; but a chain whose
 * payloads the peer pulls (tcp between processes of one host) is small on
 * the wire whatever its payload, so it leaves from here too.
 */
#define RUN_HERE_MAX 65536

static uint64_t wr_bytes(const struct inec_wr *wr)
{
    uint64_t len = 0;
    for (int i = 0; i < wr->num_sge; i++)
        len += wr->sg_list[i].length;
    return len;
}

/* The chain's payload bytes that cross the wire: all but those the peer
 * pulls. Under the hold (poster_hold). */
static uint64_t wire_bytes(struct soft_device *dev, const struct soft_qp *qp,
                           const struct inec_wr *chain)
{
    uint64_t len = 0;
    for (const struct inec_wr *wr = chain; wr; wr = wr->next)
        if (!dev->tr->pulled(qp, wr_bytes(wr)))
            len += wr_bytes(wr);
    return len;
}

/* Whether the posting thread runs the chain; if so, it holds the device
 * (poster_hold). */
static bool runs_here(struct soft_device *dev, struct soft_qp *qp, const struct inec_wr *chain)
{
    if (on_engine)
        return false;
    uint64_t len = 0;
    for (const struct inec_wr *wr = chain; wr; wr = wr->next) {
        if (wr->opcode != INEC_WR_SEND && wr->opcode != INEC_WR_SEND_IMM &&
            wr->opcode != INEC_WR_WRITE && wr->opcode != INEC_WR_WRITE_IMM)
            return false;
        len += wr_bytes(wr);
    }
    if (len > RUN_HERE_MAX && !dev->tr->pulled)
        return false;
    if (!poster_hold(dev, true))
        return false;
    if (len > RUN_HERE_MAX && wire_bytes(dev, qp, chain) > RUN_HERE_MAX) {
        poster_hold(dev, false);
        return false;
    }
    return true;
}

/* What running a device's queues holds: its lock, and on mem the peers. */
static void device_hold(struct soft_device *dev, bool on)
{
    const bool mem = dev->tr == &soft_mem_transport;
    if (on && mem)
        soft_mem_lock(true);
    if (on)
        pthread_mutex_lock(&dev->lock);
    else
        pthread_mutex_unlock(&dev->lock);
    if (!on && mem)
        soft_mem_lock(false);
}

/* A poster's hold: the device, and where the transport's state is the
 * engine's (transmit_here) the engine too, only tried: false while a pass
 * holds it, and that engine runs the chain. */
static bool poster_hold(struct soft_device *dev, bool on)
{
    const bool engine = dev->tr->transmit_here != NULL;
    if (on && engine && pthread_mutex_trylock(&dev->eng->lock))
        return false;
    device_hold(dev, on);
    if (!on && engine)
        pthread_mutex_unlock(&dev->eng->lock);
    return true;
}

static bool run_device(struct soft_device *dev)
{
    bool progress = false;
    device_hold(dev, true);
    for (uint32_t i = 0; i < dev->nqps; i++)
        if (dev->qps[i])
            progress |= run_qp(dev, dev->qps[i],
                               atomic_load_explicit(&dev->qps[i]->sq.tail, memory_order_acquire));
    device_hold(dev, false);
    if (dev->tr->pass)
        progress |= dev->tr->pass(dev);
    return progress;
}

/* ---- devices --------------------------------------------------------- */

static void device_stats(const struct inec_device *d, struct inec_device_stats *s)
{
    const struct soft_device *dev = (const struct soft_device *)d;
    s->doorbells = atomic_load(&dev->doorbells);
    s->wrs_posted = atomic_load(&dev->wrs_posted);
    s->engine_wakes = atomic_load(&dev->eng->wakes);
    s->rx_staged_bytes = atomic_load_explicit(&dev->rx_staged, memory_order_relaxed);
    s->rx_pulled_bytes = atomic_load_explicit(&dev->rx_pulled, memory_order_relaxed);
    s->pull_peers = atomic_load_explicit(&dev->pull_peers, memory_order_relaxed);
    s->control_frames = atomic_load_explicit(&dev->control_frames, memory_order_relaxed);
    s->registrations = atomic_load_explicit(&dev->registrations, memory_order_relaxed);
}

static int device_open(const char *options, struct inec_device **out)
{
    int rc = check_options(options);
    if (rc)
        return rc;
    char val[128];
    const struct soft_transport *tr = &soft_mem_transport;
    if (soft_opt(options, "transport", val, sizeof(val))) {
        if (strcmp(val, "tcp") == 0)
            tr = &soft_tcp_transport;
        else if (strcmp(val, "mem") != 0)
            return inec_fail(-EINVAL, "soft: transport must be mem or tcp, not '%s'", val);
    }
    int threads = 0;
    if (soft_opt(options, "engine_threads", val, sizeof(val))) {
        char *end;
        long n = strtol(val, &end, 10);
        if (*end || n < 1 || n > 64)
            return inec_fail(-EINVAL, "soft: engine_threads must be 1..64, not '%s'", val);
        threads = (int)n;
    }
    bool spin = true;
    if (soft_opt(options, "spin", val, sizeof(val))) {
        if (strcmp(val, "0") && strcmp(val, "1"))
            return inec_fail(-EINVAL, "soft: spin must be 0 or 1, not '%s'", val);
        spin = val[0] == '1';
    }
    struct soft_device *dev = calloc(1, sizeof(*dev));
    if (!dev)
        return inec_fail(-ENOMEM, "soft: out of memory");
    dev->base.ops = &inec_soft_provider;
    dev->base.attr = soft_attr;
    dev->tr = tr;
    pthread_mutex_init(&dev->lock, NULL);
    /* Registering waits for the WRITEs placing bytes now, not for later ones. */
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&dev->mr_lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    dev->pooled = threads > 0;
    dev->spin = spin;
    rc = dev->pooled ? pool_get(threads, &dev->eng) : engine_start(&dev->eng);
    if (rc == 0) {
        rc = tr->init(dev, options);
        if (rc) {
            if (dev->pooled)
                pool_put();
            else
                engine_stop(dev->eng);
        }
    }
    if (rc) {
        pthread_mutex_destroy(&dev->lock);
        pthread_rwlock_destroy(&dev->mr_lock);
        free(dev);
        return rc;
    }
    if (!dev->spin)
        atomic_fetch_add(&dev->eng->quiet, 1);
    pthread_mutex_lock(&dev->eng->lock);
    dev->next = dev->eng->devs;
    dev->eng->devs = dev;
    pthread_mutex_unlock(&dev->eng->lock);
    engine_wake(dev->eng);
    *out = &dev->base;
    return 0;
}

static void device_close(struct inec_device *d)
{
    struct soft_device *dev = soft_dev(d);
    /* QPs left alive are destroyed, so no peer keeps pointing at them. */
    for (uint32_t i = 0; i < dev->nqps; i++) {
        pthread_mutex_lock(&dev->lock);
        struct soft_qp *qp = dev->qps[i];
        pthread_mutex_unlock(&dev->lock);
        if (qp) {
            inec_log(INEC_LOG_WARN, "inec", "device closed with qp=%u alive: destroyed", i + 1);
            qp_destroy(&qp->base);
        }
    }
    dev->tr->fini(dev);
    pthread_mutex_lock(&dev->eng->lock);
    for (struct soft_device **p = &dev->eng->devs; *p; p = &(*p)->next)
        if (*p == dev) {
            *p = dev->next;
            break;
        }
    pthread_mutex_unlock(&dev->eng->lock);
    if (!dev->spin)
        atomic_fetch_sub(&dev->eng->quiet, 1);
    if (dev->pooled)
        pool_put();
    else
        engine_stop(dev->eng);
    if (dev->tr->release)
        dev->tr->release(dev);
    free(dev->qps);
    free(dev->mrs);
    pthread_mutex_destroy(&dev->lock);
    pthread_rwlock_destroy(&dev->mr_lock);
    free(dev);
}

/* One entry: soft is a NIC in software, as many devices as are opened. */
static int list_devices(struct inec_device_info *out, int max)
{
    if (max < 1)
        return 1;
    *out = (struct inec_device_info){
        .provider = "soft",
        .name = "soft",
        .transport = "software (mem, tcp)",
        .state = "active",
        .max_sge = soft_attr.max_sge,
        .max_inline = soft_attr.max_inline,
        .max_qp_wr = soft_attr.max_qp_wr,
        .cross_channel = true, /* its engine holds a queue at a WAIT */
        .offload = INEC_OFFLOAD_WAIT_CALC,
        .note = "engine threads run WAIT, CALC (ISA-L) and the transfers (on mem a small "
                "SEND to an idle queue runs on its posting thread): host CPU all the same",
    };
    return 1;
}

const struct inec_provider_ops inec_soft_provider = {
    .name = "soft",
    .device_open = device_open,
    .device_close = device_close,
    .device_stats = device_stats,
    .mr_reg = mr_reg,
    .mr_dereg = mr_dereg,
    .cq_create = cq_create,
    .cq_destroy = cq_destroy,
    .poll_cq = inec_ring_cq_poll,
    .cq_wait = inec_ring_cq_wait,
    .cq_wait_count = cq_wait_count,
    .cq_wait_any = inec_ring_cq_wait_any,
    .cq_set_notify = cq_set_notify,
    .qp_create = qp_create,
    .qp_destroy = qp_destroy,
    .qp_connect = qp_connect,
    .post_send = post_send,
    .post_recv = post_recv,
    .list_devices = list_devices,
};
