/*
 * The mem transport: devices of one process. A SEND is executed by the
 * sender's engine, which copies the payload straight into the RECV at the
 * head of the peer's RQ (one copy) and completes both sides.
 *
 * mem_lock guards the registry of devices and every QP's mem_peer: engines
 * hold it for reading during a whole pass over a mem device; connect and
 * detach take it for writing (writers preferred, so they cannot starve).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inec/providers/soft/soft.h"

static pthread_rwlock_t mem_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static struct soft_device **registry;
static int nregistry;

void soft_mem_lock(bool on)
{
    if (on)
        pthread_rwlock_rdlock(&mem_lock);
    else
        pthread_rwlock_unlock(&mem_lock);
}

static int mem_init(struct soft_device *dev, const char *options)
{
    char val[8];
    if (soft_opt(options, "listen", val, sizeof(val)) ||
        soft_opt(options, "timeout_ms", val, sizeof(val)))
        return inec_fail(-EINVAL, "soft: listen and timeout_ms need transport=tcp");
    pthread_rwlock_wrlock(&mem_lock);
    int id = 0;
    while (id < nregistry && registry[id])
        id++;
    if (id == nregistry) {
        struct soft_device **r = realloc(registry, (size_t)(nregistry + 16) * sizeof(*r));
        if (!r) {
            pthread_rwlock_unlock(&mem_lock);
            return inec_fail(-ENOMEM, "soft: out of memory");
        }
        memset(r + nregistry, 0, 16 * sizeof(*r));
        registry = r;
        nregistry += 16;
    }
    registry[id] = dev;
    snprintf(dev->base.addr, sizeof(dev->base.addr), "mem:%d", id);
    pthread_rwlock_unlock(&mem_lock);
    return 0;
}

static void mem_fini(struct soft_device *dev)
{
    pthread_rwlock_wrlock(&mem_lock);
    for (int i = 0; i < nregistry; i++)
        if (registry[i] == dev)
            registry[i] = NULL;
    bool empty = true;
    for (int i = 0; i < nregistry; i++)
        empty &= registry[i] == NULL;
    if (empty) {
        free(registry);
        registry = NULL;
        nregistry = 0;
    }
    pthread_rwlock_unlock(&mem_lock);
}

static int mem_connect(struct soft_qp *qp, const char *addr, uint32_t rqpn)
{
    int id;
    char tail;
    if (sscanf(addr, "mem:%d%c", &id, &tail) != 1)
        return inec_fail(-EINVAL, "mem transport: address '%s' is not mem:N", addr);
    pthread_rwlock_wrlock(&mem_lock);
    int rc = 0;
    struct soft_qp *peer = NULL;
    if (id < 0 || id >= nregistry || !registry[id])
        rc = inec_fail(-ENOENT, "mem transport: no device at %s", addr);
    else if (!(peer = soft_qp_lookup(registry[id], rqpn)) || peer->base.type != INEC_QP_RC)
        rc = inec_fail(-ENOENT, "mem transport: no RC qp %u at %s", rqpn, addr);
    else if (qp->mem_peer)
        rc = inec_fail(-EISCONN, "qp %u is already connected", qp->base.qpn);
    else
        qp->mem_peer = peer;
    pthread_rwlock_unlock(&mem_lock);
    return rc;
}

static void mem_detach(struct soft_qp *qp)
{
    pthread_rwlock_wrlock(&mem_lock);
    /* Whoever points at qp loses its peer: it goes to error. */
    for (int i = 0; i < nregistry; i++) {
        struct soft_device *d = registry[i];
        if (!d)
            continue;
        pthread_mutex_lock(&d->lock);
        for (uint32_t j = 0; j < d->nqps; j++)
            if (d->qps[j] && d->qps[j]->mem_peer == qp) {
                d->qps[j]->mem_peer = NULL;
                soft_qp_set_error(d->qps[j]);
            }
        pthread_mutex_unlock(&d->lock);
    }
    qp->mem_peer = NULL;
    pthread_rwlock_unlock(&mem_lock);
}

static enum inec_wc_status mem_write(struct soft_qp *peer, const struct wqe *e)
{
    struct soft_device *pd = soft_dev(peer->base.dev);
    pthread_rwlock_rdlock(&pd->mr_lock); /* WRITEs from many peers place at once */
    uint8_t *dst = soft_mr_range(pd, e->rdma.rkey, e->rdma.remote_addr, e->len);
    if (dst) {
        struct inec_sge one = {dst, e->len, NULL};
        soft_copy_sg(e->sge, e->nsge, &one, 1);
    }
    pthread_rwlock_unlock(&pd->mr_lock);
    if (!dst && e->len)
        return INEC_WC_PROT_ERR;
    inec_note_bytes_moved(e->len); /* before any completion says it landed */
    return INEC_WC_SUCCESS;
}

/* Called by the sender's engine during a pass (mem_lock held for reading). */
static enum exec_result mem_send(struct soft_qp *qp, struct wqe *e)
{
    struct soft_qp *peer = qp->mem_peer;
    if (!peer) {
        e->status = INEC_WC_REMOTE_ERR;
        return EXEC_DONE;
    }
    if (e->opcode == INEC_WR_WRITE) {
        e->status = mem_write(peer, e);
        return EXEC_DONE;
    }
    pthread_mutex_lock(&peer->rq.lock);
    if (atomic_load(&peer->base.error)) {
        pthread_mutex_unlock(&peer->rq.lock);
        e->status = INEC_WC_REMOTE_ERR;
        return EXEC_DONE;
    }
    uint64_t r = atomic_load_explicit(&peer->rq.retire, memory_order_relaxed);
    if (r == atomic_load_explicit(&peer->rq.tail, memory_order_acquire)) {
        peer->rq_starved = true; /* its next RECV wakes us */
        pthread_mutex_unlock(&peer->rq.lock);
        return EXEC_BLOCKED; /* receiver not ready: retried when a RECV is posted */
    }
    const struct wqe *recv = &peer->rq.e[r % peer->rq.depth];
    enum inec_wc_opcode op = INEC_WC_RECV;
    if (e->opcode == INEC_WR_WRITE_IMM) {
        e->status = mem_write(peer, e);
        op = INEC_WC_RECV_WRITE_IMM;
    } else if (e->len > recv->len) {
        e->status = INEC_WC_LEN_ERR;
    } else {
        soft_copy_sg(e->sge, e->nsge, recv->sge, recv->nsge);
        inec_note_bytes_moved(e->len);
    }
    soft_rq_complete(peer, e->status, e->len, op, e->has_imm, e->imm);
    pthread_mutex_unlock(&peer->rq.lock);
    if (e->status != INEC_WC_SUCCESS)
        soft_qp_set_error(peer);
    return EXEC_DONE;
}

static void mem_recv_posted(struct soft_qp *qp)
{
    /* A sender blocked on us runs on its own engine: usually our peer's.
     * In error, our own engine flushes the new RECVs. */
    if (atomic_load(&qp->base.error)) {
        engine_wake(soft_dev(qp->base.dev)->eng);
        return;
    }
    /* A SEND found our RQ empty before this RECV was published, or it will
     * find this RECV (both under rq.lock): only the first needs a wake-up. */
    pthread_mutex_lock(&qp->rq.lock);
    bool starved = qp->rq_starved;
    qp->rq_starved = false;
    pthread_mutex_unlock(&qp->rq.lock);
    if (!starved)
        return;
    pthread_rwlock_rdlock(&mem_lock);
    if (qp->mem_peer)
        engine_wake(soft_dev(qp->mem_peer->base.dev)->eng);
    else
        for (int i = 0; i < nregistry; i++)
            if (registry[i])
                engine_wake(registry[i]->eng);
    pthread_rwlock_unlock(&mem_lock);
}

const struct soft_transport soft_mem_transport = {
    .init = mem_init,
    .fini = mem_fini,
    .connect = mem_connect,
    .qp_detach = mem_detach,
    .send = mem_send,
    .recv_posted = mem_recv_posted,
};
