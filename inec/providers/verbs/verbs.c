/*
 * The verbs provider: inec's objects on an RDMA NIC through rdma-core.
 *
 *   inec_device  an ibv_context + one protection domain + a progress thread
 *   inec_mr      an ibv_mr, or a window into one already registered (pools)
 *   inec_cq      an ibv_cq drained into inec's ring, which keeps the
 *                produced-completion count WAITs compare against
 *   inec_qp RC   an ibv RC QP, INIT at creation, RTR + RTS at connect
 *   inec_qp CALC no hardware queue: the progress thread runs its CALCs
 *
 * Execution (chain.h): SENDs/WRITEs/RECVs go to the hardware; a run of them
 * between WAITs is one ibv_post_send. A WAIT is a gate the host checks: the
 * posting thread goes as far as it can (a chain without WAITs reaches the
 * NIC without any other thread), the progress thread continues each queue
 * when the awaited count is reached and runs CALC with ISA-L. So upstream
 * verbs give offload level "none": the host advances every WAIT. Where a
 * device could run WAIT itself (mlx5 CORE-Direct, see mlx5_wait.h) the
 * provider finds out at open (probe_cross_channel) and says so.
 *
 * Every hardware request is signaled to the hardware, whatever inec's flag:
 * each slot learns its own end, completions retire in posting order, and the
 * count stays exact (vsq_retire surfaces only what inec's rules say).
 *
 * Locks: device.lock (the QP and CQ lists) > qp.lock > cq.lock.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#ifdef INEC_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>
#endif

#include "codecs/gf.h"
#include "inec/cq_ring.h"
#include "inec/log.h"
#include "inec/provider.h"
#include "inec/providers/verbs/addr.h"
#include "inec/providers/verbs/chain.h"
#include "inec/providers/verbs/wr.h"

#define HW_BATCH      32 /* requests per ibv_post_send / CQEs per ibv_poll_cq */
#define IDLE_POLL_MS  100
#define CALC_QPN_BASE 0x1000000u /* above the 24-bit hardware QPN space */
#define WANT_INLINE   64
/* The kernel's IB_QP_CREATE_CROSS_CHANNEL (include/rdma/ib_verbs.h). */
#define KERNEL_QP_CREATE_CROSS_CHANNEL (1u << 2)

struct verbs_cq;
struct verbs_qp;

struct verbs_device {
    struct inec_device base;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *chan;
    uint8_t port;
    uint8_t gid_index;
    struct verbs_addr me;
    int efd; /* wakes the progress thread */
    pthread_t thread;
    _Atomic bool stop;
    pthread_mutex_t lock;
    struct verbs_qp *qps;
    struct verbs_cq *cqs;
    uint32_t next_calc_qpn;
    pthread_mutex_t mr_lock;
    struct verbs_mr *mrs;                          /* whole registrations, for windows into them */
    _Atomic uint64_t doorbells, wrs_posted, wakes; /* as inec_device_stats: per posted chain */
    _Atomic uint64_t registrations;                /* inec_device_stats.registrations */
};

struct verbs_mr {
    struct inec_mr base;
    struct ibv_mr *mr;
    struct verbs_mr *parent; /* a window: parent's ibv_mr, no registration of its own */
    int refs;                /* windows into this registration, plus itself */
    struct verbs_mr *next;
};

struct verbs_cq {
    struct inec_cq base;
    struct inec_cq_ring r;
    struct ibv_cq *cq;
    int hw_depth, attached; /* hardware CQEs it holds, and what its QPs may have in flight */
    struct verbs_cq *next;
};

struct verbs_qp {
    struct inec_qp base;
    struct ibv_qp *qp; /* NULL: the CALC QP */
    pthread_mutex_t lock;
    struct vsq sq, rq;
    struct verbs_qp *next;
};

INEC_RING_CQ_LAYOUT(struct verbs_cq);

static struct verbs_device *vdev(struct inec_device *d)
{
    return (struct verbs_device *)d;
}
static struct verbs_cq *vcq(struct inec_cq *c)
{
    return (struct verbs_cq *)c;
}
static struct verbs_qp *vqp(struct inec_qp *q)
{
    return (struct verbs_qp *)q;
}

static void wake(struct verbs_device *dev)
{
    uint64_t one = 1;
    ssize_t rc = write(dev->efd, &one, sizeof(one));
    (void)rc; /* a full counter is a pending wake-up already */
}

/* ---- options --------------------------------------------------------- */

static int opt_int(const char *options, const char *key, int def, int min, int max, int *out)
{
    char val[32], *end;
    *out = def;
    if (!inec_opt(options, key, val, sizeof(val)))
        return 0;
    long v = strtol(val, &end, 10);
    if (*end || v < min || v > max)
        return inec_fail(-EINVAL, "verbs: %s must be %d..%d, not '%s'", key, min, max, val);
    *out = (int)v;
    return 0;
}

/* ---- completion queues ----------------------------------------------- */

static void cq_push(struct verbs_cq *cq, const struct inec_wc *wc)
{
    inec_cq_ring_push(&cq->base, &cq->r, wc, false);
}

static int cq_create(struct inec_device *d, uint32_t depth, struct inec_cq **out)
{
    struct verbs_device *dev = vdev(d);
    struct verbs_cq *cq = calloc(1, sizeof(*cq));
    if (!cq || inec_cq_ring_init(&cq->r, depth)) {
        free(cq);
        return inec_fail(-ENOMEM, "verbs: out of memory for a CQ of %u", depth);
    }
    /* The hardware CQ only buffers until the progress thread drains it; it
     * grows with the QPs attached (qp_create). */
    cq->hw_depth = 256;
    cq->cq = ibv_create_cq(dev->ctx, cq->hw_depth, cq, dev->chan, 0);
    if (!cq->cq) {
        int err = errno;
        inec_cq_ring_fini(&cq->r);
        free(cq);
        return inec_fail(-err, "verbs: ibv_create_cq: %s", strerror(err));
    }
    ibv_req_notify_cq(cq->cq, 0);
    cq->base.dev = d;
    pthread_mutex_lock(&dev->lock);
    cq->next = dev->cqs;
    dev->cqs = cq;
    pthread_mutex_unlock(&dev->lock);
    *out = &cq->base;
    return 0;
}

static void cq_destroy(struct inec_cq *c)
{
    struct verbs_cq *cq = vcq(c);
    struct verbs_device *dev = vdev(c->dev);
    pthread_mutex_lock(&dev->lock);
    for (struct verbs_cq **p = &dev->cqs; *p; p = &(*p)->next)
        if (*p == cq) {
            *p = cq->next;
            break;
        }
    pthread_mutex_unlock(&dev->lock);
    ibv_destroy_cq(cq->cq);
    inec_cq_ring_fini(&cq->r);
    free(cq);
}

/* ---- memory regions -------------------------------------------------- */

/*
 * A range inside a live registration of this device becomes a window into
 * it: no ibv_reg_mr, no pinning, no page-table walk. So a buffer pool
 * registered once serves every stripe cut from it; only memory outside
 * every pool pays for a registration. A window has the registration's keys:
 * the NIC bounds a peer's WRITE by the registration, not by the window.
 */
static int mr_reg(struct inec_device *d, void *addr, size_t len, struct inec_mr **out)
{
    struct verbs_device *dev = vdev(d);
    struct verbs_mr *mr = calloc(1, sizeof(*mr));
    if (!mr)
        return inec_fail(-ENOMEM, "verbs: out of memory");
    mr->base.dev = d;
    mr->base.addr = addr;
    mr->base.len = len;
    mr->refs = 1;
    const uint8_t *a = addr;
    pthread_mutex_lock(&dev->mr_lock);
    for (struct verbs_mr *p = dev->mrs; p && len; p = p->next)
        if (a >= p->base.addr && len <= p->base.len &&
            (size_t)(a - p->base.addr) <= p->base.len - len) {
            mr->parent = p;
            p->refs++;
            break;
        }
    pthread_mutex_unlock(&dev->mr_lock);
    if (mr->parent) {
        mr->base.rkey = mr->parent->mr->rkey;
        *out = &mr->base;
        return 0;
    }
    /* ibv_reg_mr refuses length 0; a 1-byte registration of a valid address
     * (or of this object) stands in, as no request may touch it anyway. */
    void *reg = len ? addr : (void *)mr;
    mr->mr = ibv_reg_mr(dev->pd, reg, len ? len : 1,
                        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!mr->mr) {
        int err = errno;
        free(mr);
        return inec_fail(-err, "verbs: ibv_reg_mr of %zu bytes: %s", len, strerror(err));
    }
    mr->base.rkey = mr->mr->rkey;
    atomic_fetch_add_explicit(&dev->registrations, 1, memory_order_relaxed);
    pthread_mutex_lock(&dev->mr_lock);
    mr->next = dev->mrs;
    dev->mrs = mr;
    pthread_mutex_unlock(&dev->mr_lock);
    *out = &mr->base;
    return 0;
}

static void mr_unref(struct verbs_mr *mr)
{
    struct verbs_device *dev = vdev(mr->base.dev);
    pthread_mutex_lock(&dev->mr_lock);
    bool last = --mr->refs == 0;
    pthread_mutex_unlock(&dev->mr_lock);
    if (last) {
        ibv_dereg_mr(mr->mr);
        free(mr);
    }
}

static void mr_dereg(struct inec_mr *m)
{
    struct verbs_mr *mr = (struct verbs_mr *)m;
    struct verbs_device *dev = vdev(m->dev);
    if (mr->parent) {
        mr_unref(mr->parent);
        free(mr);
        return;
    }
    /* No new windows into memory its owner may free now; the windows cut
     * already keep the registration until they go. */
    pthread_mutex_lock(&dev->mr_lock);
    for (struct verbs_mr **p = &dev->mrs; *p; p = &(*p)->next)
        if (*p == mr) {
            *p = mr->next;
            break;
        }
    pthread_mutex_unlock(&dev->mr_lock);
    mr_unref(mr);
}

static uint32_t lkey(const struct inec_sge *sge)
{
    const struct verbs_mr *mr = (const struct verbs_mr *)sge->mr;
    if (!mr)
        return 0;
    return mr->parent ? mr->parent->mr->lkey : mr->mr->lkey;
}

/* ---- queue pairs ----------------------------------------------------- */

/* Grows a hardware CQ so the QPs attached can never overflow it. */
static int cq_attach(struct verbs_device *dev, struct verbs_cq *cq, int n)
{
    pthread_mutex_lock(&cq->r.lock);
    int want = cq->attached + n, rc = 0;
    if (want > cq->hw_depth) {
        int max = dev->base.attr.max_cqe;
        if (want > max)
            rc = inec_fail(-EINVAL, "verbs: %d requests in flight on one CQ > max_cqe %d", want,
                           max);
        else if ((rc = ibv_resize_cq(cq->cq, want)))
            rc = inec_fail(-rc, "verbs: ibv_resize_cq to %d: %s", want, strerror(rc));
        else
            cq->hw_depth = want;
    }
    if (rc == 0)
        cq->attached = want;
    pthread_mutex_unlock(&cq->r.lock);
    return rc;
}

static void cq_detach(struct verbs_cq *cq, int n)
{
    pthread_mutex_lock(&cq->r.lock);
    cq->attached -= n;
    pthread_mutex_unlock(&cq->r.lock);
}

static int to_init(struct verbs_device *dev, struct ibv_qp *qp)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = dev->port,
        .qp_access_flags =
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
    };
    return ibv_modify_qp(qp, &a,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static int qp_create(struct inec_device *d, const struct inec_qp_attr *attr, struct inec_qp **out)
{
    struct verbs_device *dev = vdev(d);
    struct verbs_qp *qp = calloc(1, sizeof(*qp));
    if (!qp)
        return inec_fail(-ENOMEM, "verbs: out of memory");
    qp->base.dev = d;
    qp->base.type = attr->type;
    qp->base.send_cq = attr->send_cq;
    qp->base.recv_cq = attr->recv_cq;
    pthread_mutex_init(&qp->lock, NULL);
    int rc = vsq_init(&qp->sq, attr->sq_depth);
    if (rc == 0)
        rc = vsq_init(&qp->rq, attr->type == INEC_QP_RC ? attr->rq_depth : 1);
    if (rc) {
        rc = inec_fail(-ENOMEM, "verbs: out of memory for a QP");
        goto fail;
    }
    if (attr->type == INEC_QP_RC) {
        struct verbs_cq *scq = vcq(attr->send_cq), *rcq = vcq(attr->recv_cq);
        if ((rc = cq_attach(dev, scq, (int)qp->sq.depth)))
            goto fail;
        if ((rc = cq_attach(dev, rcq, (int)qp->rq.depth))) {
            cq_detach(scq, (int)qp->sq.depth);
            goto fail;
        }
        struct ibv_qp_init_attr ia = {
            .send_cq = scq->cq,
            .recv_cq = rcq->cq,
            .cap = {.max_send_wr = qp->sq.depth,
                    .max_recv_wr = qp->rq.depth,
                    .max_send_sge = d->attr.max_sge,
                    .max_recv_sge = d->attr.max_sge,
                    .max_inline_data = d->attr.max_inline},
            .qp_type = IBV_QPT_RC,
            .sq_sig_all = 1, /* see the top of this file */
        };
        qp->qp = ibv_create_qp(dev->pd, &ia);
        if (!qp->qp || (rc = to_init(dev, qp->qp))) {
            int err = qp->qp ? rc : errno;
            rc = inec_fail(-err, "verbs: %s: %s", qp->qp ? "QP to INIT" : "ibv_create_qp",
                           strerror(err));
            cq_detach(scq, (int)qp->sq.depth);
            cq_detach(rcq, (int)qp->rq.depth);
            goto fail;
        }
        qp->base.qpn = qp->qp->qp_num;
    }
    pthread_mutex_lock(&dev->lock);
    if (!qp->qp)
        qp->base.qpn = CALC_QPN_BASE + dev->next_calc_qpn++;
    qp->next = dev->qps;
    dev->qps = qp;
    pthread_mutex_unlock(&dev->lock);
    *out = &qp->base;
    return 0;
fail:
    if (qp->qp)
        ibv_destroy_qp(qp->qp);
    vsq_fini(&qp->sq);
    vsq_fini(&qp->rq);
    pthread_mutex_destroy(&qp->lock);
    free(qp);
    return rc;
}

static void qp_destroy(struct inec_qp *q)
{
    struct verbs_qp *qp = vqp(q);
    struct verbs_device *dev = vdev(q->dev);
    /* Out of the list first, under the device lock the progress thread
     * holds for its pass: after this it never looks at the QP again. */
    pthread_mutex_lock(&dev->lock);
    for (struct verbs_qp **p = &dev->qps; *p; p = &(*p)->next)
        if (*p == qp) {
            *p = qp->next;
            break;
        }
    pthread_mutex_unlock(&dev->lock);
    if (qp->qp) {
        ibv_destroy_qp(qp->qp);
        cq_detach(vcq(q->send_cq), (int)qp->sq.depth);
        cq_detach(vcq(q->recv_cq), (int)qp->rq.depth);
    }
    vsq_fini(&qp->sq);
    vsq_fini(&qp->rq);
    pthread_mutex_destroy(&qp->lock);
    free(qp);
}

static int qp_connect(struct inec_qp *q, const char *addr, uint32_t rqpn)
{
    struct verbs_qp *qp = vqp(q);
    struct verbs_device *dev = vdev(q->dev);
    struct verbs_addr peer;
    char err[160];
    if (verbs_addr_parse(addr, &peer, err, sizeof(err)))
        return inec_fail(-EINVAL, "verbs: %s", err);
    struct ibv_qp_attr a;
    int mask;
    verbs_rtr_attr(&dev->me, &peer, rqpn, dev->gid_index, &a, &mask);
    int rc = ibv_modify_qp(qp->qp, &a, mask);
    if (rc)
        return inec_fail(-rc, "verbs: QP %u to RTR (peer %s qpn %u): %s", q->qpn, addr, rqpn,
                         strerror(rc));
    verbs_rts_attr(&dev->me, q->qpn, &a, &mask);
    rc = ibv_modify_qp(qp->qp, &a, mask);
    if (rc)
        return inec_fail(-rc, "verbs: QP %u to RTS: %s", q->qpn, strerror(rc));
    return 0;
}

static void qp_to_error(struct verbs_qp *qp)
{
    if (atomic_exchange(&qp->base.error, 1))
        return;
    inec_log(INEC_LOG_DEBUG, "inec", "verbs qp to error qpn=%u", qp->base.qpn);
    if (qp->qp) {
        /* The hardware flushes what it holds; vsq_flush_queued the rest. */
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
        ibv_modify_qp(qp->qp, &a, IBV_QP_STATE);
    }
}

/* ---- execution ------------------------------------------------------- */

/* Posts slots [first, end) of the SQ (or RQ) in batches; a refused request
 * and the rest complete as flushed, with the QP in error. Under qp->lock. */
static void post_hw(struct verbs_qp *qp, struct vsq *q, uint64_t first, uint64_t end, bool recv)
{
    while (first != end) {
        struct ibv_send_wr swr[HW_BATCH];
        struct ibv_recv_wr rwr[HW_BATCH];
        struct ibv_sge sge[HW_BATCH][VERBS_MAX_SGE];
        int n = 0;
        for (uint64_t i = first; i != end && n < HW_BATCH; i++, n++) {
            if (recv) {
                verbs_recv_wr(vsq_slot(q, i), i, lkey, sge[n], &rwr[n]);
                rwr[n].next = &rwr[n + 1];
            } else {
                verbs_send_wr(vsq_slot(q, i), i, lkey, sge[n], &swr[n]);
                swr[n].next = &swr[n + 1];
            }
        }
        int rc;
        uint64_t bad_seq = end;
        if (recv) {
            struct ibv_recv_wr *bad = NULL;
            rwr[n - 1].next = NULL;
            rc = ibv_post_recv(qp->qp, rwr, &bad);
            if (rc && bad)
                bad_seq = bad->wr_id & ~VERBS_RECV_BIT;
        } else {
            struct ibv_send_wr *bad = NULL;
            swr[n - 1].next = NULL;
            rc = ibv_post_send(qp->qp, swr, &bad);
            if (rc && bad)
                bad_seq = bad->wr_id;
        }
        uint64_t stop = rc ? (bad_seq != end ? bad_seq : first) : first + (uint64_t)n;
        for (uint64_t i = first; i != stop; i++)
            vsq_slot(q, i)->state = VSLOT_POSTED;
        if (rc) {
            inec_log(INEC_LOG_WARN, "inec", "verbs: ibv_post_%s on qpn=%u: %s",
                     recv ? "recv" : "send", qp->base.qpn, strerror(rc));
            for (uint64_t i = stop; i != end; i++) {
                vsq_slot(q, i)->state = VSLOT_DONE;
                vsq_slot(q, i)->status = INEC_WC_FLUSH_ERR;
            }
            qp_to_error(qp);
            return;
        }
        first += (uint64_t)n;
    }
}

static void run_calc(struct vslot *s)
{
    uint8_t *srcs[VERBS_MAX_SGE], *dsts[VERBS_MAX_SGE];
    int nsrc = s->wr.num_sge, ndst = s->wr.calc.ndst;
    for (int i = 0; i < nsrc; i++)
        srcs[i] = s->sge[i].addr;
    for (int i = 0; i < ndst; i++)
        dsts[i] = s->sge[nsrc + i].addr;
    if (s->len == 0)
        return;
    /*
     * The host's share. An EC-capable stack replaces exactly this call by
     * posting the CALC as a work request on the calculator QP: with
     * MLNX_OFED's experimental verbs it was ibv_exp_alloc_ec_calc() once per
     * matrix, then ibv_exp_ec_encode_async()/ibv_exp_ec_decode_async() (or
     * ibv_exp_post_send with IBV_EXP_WR_EC_*), its completion feeding the
     * CALC QP's CQ so the stripe WAITs trigger in the NIC. See docs/DESIGN.md.
     */
    if (s->wr.calc.kind == INEC_CALC_EC)
        codec_gf_encode(s->len, ndst, nsrc, s->wr.calc.tables, srcs, dsts);
    else
        codec_xor(s->len, nsrc, srcs, dsts[0]);
}

/*
 * Moves the SQ's head as far as it can go now. host: the progress thread
 * (runs CALC); a posting thread stops at a CALC. Under qp->lock.
 * Returns true if anything moved.
 */
static bool advance(struct verbs_qp *qp, bool host)
{
    bool progress = false;
    for (;;) {
        if (atomic_load(&qp->base.error)) {
            progress |= qp->sq.head != qp->sq.tail;
            vsq_flush_queued(&qp->sq);
            return progress;
        }
        struct vstep st = vsq_step(&qp->sq);
        struct vslot *s = vsq_slot(&qp->sq, st.first);
        switch (st.kind) {
        case VSTEP_IDLE:
            return progress;
        case VSTEP_WAIT: {
            struct inec_cq *cq = s->wr.wait.cq;
            enum verbs_gate g = verbs_gate(atomic_load_explicit(&cq->count, memory_order_acquire),
                                           atomic_load_explicit(&cq->errors, memory_order_acquire),
                                           s->wr.wait.count, s->wait_errors);
            if (g == VERBS_GATE_BLOCKED)
                return progress;
            s->state = VSLOT_DONE;
            s->status = g == VERBS_GATE_OPEN ? INEC_WC_SUCCESS : INEC_WC_DEP_ERR;
            qp->sq.head++;
            if (g == VERBS_GATE_DEP_ERR)
                qp_to_error(qp);
            break;
        }
        case VSTEP_HOST:
            if (s->wr.opcode == INEC_WR_CALC) {
                if (!host)
                    return progress;
                run_calc(s);
            }
            s->state = VSLOT_DONE;
            qp->sq.head++;
            break;
        case VSTEP_HW:
            qp->sq.head = st.end;
            post_hw(qp, &qp->sq, st.first, st.end, false);
            break;
        }
        progress = true;
    }
}

static void retire(struct verbs_qp *qp)
{
    struct inec_wc wc[HW_BATCH];
    int n;
    while ((n = vsq_retire(&qp->sq, qp->base.qpn, wc, HW_BATCH)) > 0)
        for (int i = 0; i < n; i++)
            cq_push(vcq(qp->base.send_cq), &wc[i]);
    if (!qp->qp)
        return;
    while ((n = vsq_retire(&qp->rq, qp->base.qpn, wc, HW_BATCH)) > 0)
        for (int i = 0; i < n; i++)
            cq_push(vcq(qp->base.recv_cq), &wc[i]);
}

static struct verbs_qp *find_qp(struct verbs_device *dev, uint32_t qpn)
{
    for (struct verbs_qp *qp = dev->qps; qp; qp = qp->next)
        if (qp->qp && qp->base.qpn == qpn)
            return qp;
    return NULL;
}

/* One hardware completion into its slot. Under dev->lock. */
static void hw_completion(struct verbs_device *dev, const struct ibv_wc *wc)
{
    struct verbs_qp *qp = find_qp(dev, wc->qp_num);
    if (!qp)
        return; /* destroyed meanwhile */
    pthread_mutex_lock(&qp->lock);
    bool recv = wc->wr_id & VERBS_RECV_BIT;
    struct vslot *s = vsq_slot(recv ? &qp->rq : &qp->sq, wc->wr_id & ~VERBS_RECV_BIT);
    s->state = VSLOT_DONE;
    s->status = verbs_wc_status(wc->status);
    if (recv && wc->status == IBV_WC_SUCCESS) {
        s->byte_len = wc->byte_len;
        s->wc_opcode =
            wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ? INEC_WC_RECV_WRITE_IMM : INEC_WC_RECV;
        s->has_imm = wc->wc_flags & IBV_WC_WITH_IMM;
        s->imm = s->has_imm ? ntohl(wc->imm_data) : 0;
    }
    if (s->status != INEC_WC_SUCCESS && s->status != INEC_WC_FLUSH_ERR)
        inec_log(INEC_LOG_DEBUG, "inec", "verbs qpn=%u: %s", qp->base.qpn,
                 ibv_wc_status_str(wc->status));
    if (wc->status != IBV_WC_SUCCESS)
        atomic_store(&qp->base.error, 1); /* the hardware moved it to error */
    pthread_mutex_unlock(&qp->lock);
}

/* ---- the progress thread --------------------------------------------- */

/* Drains every hardware CQ, then moves and retires every queue. */
static bool pass(struct verbs_device *dev)
{
    bool progress = false;
    pthread_mutex_lock(&dev->lock);
    for (struct verbs_cq *cq = dev->cqs; cq; cq = cq->next) {
        struct ibv_wc wc[HW_BATCH];
        int n;
        while ((n = ibv_poll_cq(cq->cq, HW_BATCH, wc)) > 0) {
            for (int i = 0; i < n; i++)
                hw_completion(dev, &wc[i]);
            progress = true;
        }
    }
    /* Retiring feeds the CQ counts the WAITs of other queues look at, so
     * go round until nothing moves. */
    for (bool again = true; again;) {
        again = false;
        for (struct verbs_qp *qp = dev->qps; qp; qp = qp->next) {
            pthread_mutex_lock(&qp->lock);
            uint64_t before = qp->sq.retire + qp->rq.retire;
            again |= advance(qp, true);
            retire(qp);
            again |= qp->sq.retire + qp->rq.retire != before;
            pthread_mutex_unlock(&qp->lock);
        }
        progress |= again;
    }
    pthread_mutex_unlock(&dev->lock);
    return progress;
}

/* Arms every CQ's event, then sleeps on the channel and the eventfd. */
static void sleep_until_event(struct verbs_device *dev)
{
    pthread_mutex_lock(&dev->lock);
    for (struct verbs_cq *cq = dev->cqs; cq; cq = cq->next)
        ibv_req_notify_cq(cq->cq, 0);
    pthread_mutex_unlock(&dev->lock);
    /* A completion between the last poll and the arming raises no event. */
    if (pass(dev))
        return;
    struct pollfd fds[2] = {{dev->chan->fd, POLLIN, 0}, {dev->efd, POLLIN, 0}};
    if (poll(fds, 2, IDLE_POLL_MS) <= 0)
        return;
    atomic_fetch_add(&dev->wakes, 1);
    if (fds[0].revents & POLLIN) {
        struct ibv_cq *cq;
        void *ctx;
        if (ibv_get_cq_event(dev->chan, &cq, &ctx) == 0)
            ibv_ack_cq_events(cq, 1);
    }
    if (fds[1].revents & POLLIN) {
        uint64_t v;
        ssize_t rc = read(dev->efd, &v, sizeof(v));
        (void)rc;
    }
}

static void *progress_main(void *arg)
{
    pthread_setname_np(pthread_self(), "verbs-progress");
    struct verbs_device *dev = arg;
    while (!atomic_load(&dev->stop))
        if (!pass(dev))
            sleep_until_event(dev);
    return NULL;
}

/* ---- posting --------------------------------------------------------- */

/* Copies a chain into q under qp->lock (taken here, held on success). */
static int push_locked(struct verbs_qp *qp, struct vsq *q, const struct inec_wr *chain, int nwr,
                       const char *name)
{
    struct verbs_device *dev = vdev(qp->base.dev);
    pthread_mutex_lock(&qp->lock);
    if (vsq_push(q, chain, nwr)) {
        uint64_t used = vsq_used(q);
        pthread_mutex_unlock(&qp->lock);
        return inec_fail(-ENOMEM, "%s full: %llu outstanding + %d > depth %u", name,
                         (unsigned long long)used, nwr, q->depth);
    }
    atomic_fetch_add_explicit(&dev->doorbells, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&dev->wrs_posted, (uint64_t)nwr, memory_order_relaxed);
    return 0;
}

static int post_send(struct inec_qp *q, struct inec_wr *chain, int nwr)
{
    struct verbs_qp *qp = vqp(q);
    int rc = push_locked(qp, &qp->sq, chain, nwr, "send queue");
    if (rc)
        return rc;
    /* The posting thread takes the chain as far as no host step is needed:
     * requests before the first unmet WAIT (or CALC) reach the NIC now. */
    uint64_t from = qp->sq.head;
    advance(qp, false);
    /* The progress thread must look if something waits, or if a slot ended
     * here (a met WAIT, a NOP) that only it retires; what went to the NIC
     * wakes it through its completion. */
    bool look = qp->sq.head != qp->sq.tail;
    for (uint64_t i = from; i != qp->sq.head && !look; i++)
        look = vsq_slot(&qp->sq, i)->state == VSLOT_DONE;
    pthread_mutex_unlock(&qp->lock);
    if (look)
        wake(vdev(q->dev));
    return 0;
}

static int post_recv(struct inec_qp *q, struct inec_wr *chain, int nwr)
{
    struct verbs_qp *qp = vqp(q);
    int rc = push_locked(qp, &qp->rq, chain, nwr, "receive queue");
    if (rc)
        return rc;
    uint64_t first = qp->rq.head;
    qp->rq.head = qp->rq.tail;
    bool flushed = atomic_load(&qp->base.error);
    if (flushed) /* a QP in error flushes what is posted to it (inec.h) */
        for (uint64_t i = first; i != qp->rq.tail; i++) {
            vsq_slot(&qp->rq, i)->state = VSLOT_DONE;
            vsq_slot(&qp->rq, i)->status = INEC_WC_FLUSH_ERR;
        }
    else
        post_hw(qp, &qp->rq, first, qp->rq.tail, true);
    pthread_mutex_unlock(&qp->lock);
    if (flushed)
        wake(vdev(q->dev)); /* only the progress thread retires them */
    return 0;
}

/* ---- devices --------------------------------------------------------- */

static void device_stats(const struct inec_device *d, struct inec_device_stats *s)
{
    const struct verbs_device *dev = (const struct verbs_device *)d;
    s->doorbells = atomic_load(&dev->doorbells);
    s->wrs_posted = atomic_load(&dev->wrs_posted);
    s->engine_wakes = atomic_load(&dev->wakes);
    s->registrations = atomic_load_explicit(&dev->registrations, memory_order_relaxed);
}

static uint32_t min_u32(uint64_t a, uint64_t b)
{
    return (uint32_t)(a < b ? a : b);
}

static enum ibv_mtu mtu_of(const struct ibv_port_attr *pa)
{
    return pa->active_mtu ? pa->active_mtu : IBV_MTU_1024;
}

/* Opens device `name` (NULL: the first); the message says why not. */
static struct ibv_context *open_by_name(const char *name, char *why, size_t len)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        snprintf(why, len, "no RDMA device (ibv_get_device_list found none)");
        if (list)
            ibv_free_device_list(list);
        return NULL;
    }
    struct ibv_context *ctx = NULL;
    for (int i = 0; i < n && !ctx; i++)
        if (!name || strcmp(ibv_get_device_name(list[i]), name) == 0) {
            ctx = ibv_open_device(list[i]);
            if (!ctx)
                snprintf(why, len, "ibv_open_device(%s): %s", ibv_get_device_name(list[i]),
                         strerror(errno));
            name = ibv_get_device_name(list[i]);
            break;
        }
    if (!ctx && why[0] == '\0')
        snprintf(why, len, "no RDMA device named '%s'", name);
    ibv_free_device_list(list);
    return ctx;
}

static int device_open(const char *options, struct inec_device **out)
{
    char name[64] = "";
    int port, gid_index, rc;
    bool named = inec_opt(options, "device", name, sizeof(name));
    if ((rc = opt_int(options, "port", 1, 1, 255, &port)) ||
        (rc = opt_int(options, "gid_index", 0, 0, 255, &gid_index)))
        return rc;
    char why[160] = "";
    struct ibv_context *ctx = open_by_name(named ? name : NULL, why, sizeof(why));
    if (!ctx)
        return inec_fail(-ENODEV, "verbs: %s", why);
    struct verbs_device *dev = calloc(1, sizeof(*dev));
    struct ibv_device_attr da;
    struct ibv_port_attr pa;
    union ibv_gid gid;
    const char *step = "out of memory";
    rc = -ENOMEM;
    if (!dev)
        goto fail;
    dev->ctx = ctx;
    dev->efd = -1;
    dev->port = (uint8_t)port;
    dev->gid_index = (uint8_t)gid_index;
    step = "ibv_query_device";
    if ((rc = -ibv_query_device(ctx, &da)))
        goto fail;
    step = "ibv_query_port";
    if ((rc = -ibv_query_port(ctx, dev->port, &pa)))
        goto fail;
    step = "ibv_query_gid";
    if ((rc = -ibv_query_gid(ctx, dev->port, gid_index, &gid)))
        goto fail;
    rc = -ENOMEM;
    step = "ibv_alloc_pd";
    if (!(dev->pd = ibv_alloc_pd(ctx)))
        goto fail;
    step = "ibv_create_comp_channel";
    if (!(dev->chan = ibv_create_comp_channel(ctx)))
        goto fail;
    step = "eventfd";
    if ((dev->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        goto fail;
    memcpy(dev->me.gid, gid.raw, 16);
    dev->me.lid = pa.lid;
    dev->me.port = dev->port;
    dev->me.mtu = (uint8_t)mtu_of(&pa);
    uint32_t seed = 0;
    if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
        seed = (uint32_t)time(NULL);
    dev->me.psn_seed = seed & 0xffffffu;
    dev->base.ops = &inec_verbs_provider;
    dev->base.attr = (struct inec_device_attr){
        .max_qp_wr = min_u32((uint64_t)da.max_qp_wr, 4096),
        .max_cqe = min_u32((uint64_t)da.max_cqe, 65536),
        .max_chain = 256,
        .max_wait = 64,
        .max_sge = min_u32((uint64_t)da.max_sge, VERBS_MAX_SGE),
        .max_inline = WANT_INLINE,
        .max_msg_size = pa.max_msg_sz ? pa.max_msg_sz : (1ull << 31),
    };
    verbs_addr_format(&dev->me, dev->base.addr, sizeof(dev->base.addr));
    pthread_mutex_init(&dev->lock, NULL);
    pthread_mutex_init(&dev->mr_lock, NULL);
    if ((rc = -pthread_create(&dev->thread, NULL, progress_main, dev))) {
        pthread_mutex_destroy(&dev->lock);
        pthread_mutex_destroy(&dev->mr_lock);
        step = "pthread_create";
        goto fail;
    }
    inec_log(INEC_LOG_INFO, "inec", "verbs device=%s port=%d addr=%s",
             ibv_get_device_name(ctx->device), port, dev->base.addr);
    *out = &dev->base;
    return 0;
fail:
    if (dev) {
        if (dev->efd >= 0)
            close(dev->efd);
        if (dev->chan)
            ibv_destroy_comp_channel(dev->chan);
        if (dev->pd)
            ibv_dealloc_pd(dev->pd);
        free(dev);
    }
    ibv_close_device(ctx);
    return inec_fail(rc ? rc : -EIO, "verbs: %s: %s", step, strerror(rc ? -rc : EIO));
}

static void device_close(struct inec_device *d)
{
    struct verbs_device *dev = vdev(d);
    atomic_store(&dev->stop, true);
    wake(dev);
    pthread_join(dev->thread, NULL);
    while (dev->qps) {
        inec_log(INEC_LOG_WARN, "inec", "device closed with qp=%u alive: destroyed",
                 dev->qps->base.qpn);
        qp_destroy(&dev->qps->base);
    }
    while (dev->cqs)
        cq_destroy(&dev->cqs->base);
    while (dev->mrs) {
        struct verbs_mr *mr = dev->mrs;
        dev->mrs = mr->next;
        ibv_dereg_mr(mr->mr);
        free(mr);
    }
    close(dev->efd);
    ibv_destroy_comp_channel(dev->chan);
    ibv_dealloc_pd(dev->pd);
    ibv_close_device(dev->ctx);
    pthread_mutex_destroy(&dev->lock);
    pthread_mutex_destroy(&dev->mr_lock);
    free(dev);
}

/* ---- what `inec devices` shows --------------------------------------- */

/*
 * Can this device run WAIT itself? The INEC paper's stack created its
 * calculator and sender QPs cross-channel (CORE-Direct) with MLNX_OFED's
 * ibv_exp_create_qp. Upstream has no such verb: rdma-core's libibverbs
 * passes only the create flags it knows and refuses the kernel's
 * IB_QP_CREATE_CROSS_CHANNEL with EINVAL. Asking is the honest test: a
 * stack that accepts it gets "yes".
 */
static bool probe_cross_channel(struct ibv_context *ctx, struct ibv_pd *pd, char *why, size_t len)
{
    struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    if (!cq) {
        snprintf(why, len, "ibv_create_cq: %s", strerror(errno));
        return false;
    }
    struct ibv_qp_init_attr_ex ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
        .pd = pd,
        .create_flags = KERNEL_QP_CREATE_CROSS_CHANNEL,
    };
    struct ibv_qp *qp = ibv_create_qp_ex(ctx, &ia);
    if (qp)
        ibv_destroy_qp(qp);
    else
        snprintf(why, len,
                 "a cross-channel QP was refused (%s): upstream libibverbs has no "
                 "CORE-Direct create flag",
                 strerror(errno));
    ibv_destroy_cq(cq);
    return qp != NULL;
}

/* The inline size a QP of this device really gets. */
static uint32_t probe_inline(struct ibv_context *ctx, struct ibv_pd *pd)
{
    struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
    if (!cq)
        return 0;
    struct ibv_qp_init_attr ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 4,
                .max_recv_wr = 4,
                .max_send_sge = 1,
                .max_recv_sge = 1,
                .max_inline_data = WANT_INLINE},
        .qp_type = IBV_QPT_RC,
    };
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    uint32_t n = qp ? ia.cap.max_inline_data : 0;
    if (qp)
        ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
    return n;
}

static void describe(struct ibv_device *d, struct inec_device_info *info)
{
    memset(info, 0, sizeof(*info));
    snprintf(info->provider, sizeof(info->provider), "verbs");
    snprintf(info->name, sizeof(info->name), "%s", ibv_get_device_name(d));
    info->offload = INEC_OFFLOAD_NONE;
    struct ibv_context *ctx = ibv_open_device(d);
    if (!ctx) {
        snprintf(info->state, sizeof(info->state), "unusable");
        snprintf(info->note, sizeof(info->note), "ibv_open_device: %s", strerror(errno));
        return;
    }
    struct ibv_device_attr da;
    struct ibv_port_attr pa;
    if (ibv_query_device(ctx, &da) == 0) {
        info->max_sge = (uint32_t)da.max_sge;
        info->max_qp_wr = (uint32_t)da.max_qp_wr;
        info->atomics = da.atomic_cap != IBV_ATOMIC_NONE;
    }
    if (ibv_query_port(ctx, 1, &pa) == 0) {
        snprintf(info->state, sizeof(info->state), "%s", ibv_port_state_str(pa.state));
        snprintf(info->transport, sizeof(info->transport), "%s",
                 pa.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet (RoCE)" : "InfiniBand");
    }
    char why[200] = "";
    struct ibv_pd *pd = ibv_alloc_pd(ctx);
    if (pd) {
        info->max_inline = probe_inline(ctx, pd);
        info->cross_channel = probe_cross_channel(ctx, pd, why, sizeof(why));
        ibv_dealloc_pd(pd);
    }
    bool mlx5 = false;
#ifdef INEC_HAVE_MLX5DV
    mlx5 = mlx5dv_is_supported(d);
#endif
    /* No upstream verb computes EC: CALC stays on the host either way. */
    info->ec_offload = false;
    snprintf(info->note, sizeof(info->note),
             "%s; WAIT and CALC run on the host progress thread (CALC with ISA-L), "
             "SEND/RECV/WRITE in the NIC%s",
             info->cross_channel ? "cross-channel QPs accepted, raw WAIT WQEs not posted yet" : why,
             mlx5 ? "; mlx5" : "");
    ibv_close_device(ctx);
}

static int list_devices(struct inec_device_info *out, int max)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list)
        return 0;
    for (int i = 0; i < n && i < max; i++)
        describe(list[i], &out[i]);
    ibv_free_device_list(list);
    return n;
}

const struct inec_provider_ops inec_verbs_provider = {
    .name = "verbs",
    .device_open = device_open,
    .device_close = device_close,
    .device_stats = device_stats,
    .mr_reg = mr_reg,
    .mr_dereg = mr_dereg,
    .cq_create = cq_create,
    .cq_destroy = cq_destroy,
    .poll_cq = inec_ring_cq_poll,
    .cq_wait = inec_ring_cq_wait,
    .cq_wait_count = inec_ring_cq_wait_count,
    .cq_wait_any = inec_ring_cq_wait_any,
    .qp_create = qp_create,
    .qp_destroy = qp_destroy,
    .qp_connect = qp_connect,
    .post_send = post_send,
    .post_recv = post_recv,
    .list_devices = list_devices,
};
