/*
 * The three INEC primitives as chain builders. build() turns the
 * descriptors into one chain per QP (the calculator's first); run() either
 * posts each chain with one doorbell (coherent: the engine advances them) or
 * walks them on the calling thread (incoherent: the host performs each WAIT
 * by sleeping on the CQ and posts every other request by itself).
 */
#include <errno.h>
#include <stdlib.h>

#include "inec/provider.h"

#define DEFAULT_TIMEOUT_MS 30000

struct chain {
    struct inec_qp *qp;
    struct inec_wr *head, *tail;
};

struct plan {
    struct chain *chains;
    int nchains;
    struct inec_wr *wrs;
    int nwrs;
};

static struct inec_wr *append(struct plan *p, struct chain *c, enum inec_wr_opcode op)
{
    struct inec_wr *wr = &p->wrs[p->nwrs++];
    *wr = (struct inec_wr){.opcode = op};
    if (c->tail)
        c->tail->next = wr;
    else
        c->head = wr;
    c->tail = wr;
    return wr;
}

static int check(const struct inec_wait_desc *wait, const struct inec_calc_desc *calc,
                 const struct inec_mem_desc *mem, const struct inec_stripe_desc *stripe)
{
    if (!calc || !mem || !calc->qp || calc->qp->type != INEC_QP_CALC)
        return inec_fail(-EINVAL, "primitive: calc->qp must be a CALC QP");
    if (mem->nin < 1 || mem->nout < 1 || !mem->in || !mem->out)
        return inec_fail(-EINVAL, "primitive: needs inputs and outputs");
    const struct inec_device *dev = calc->qp->dev;
    if (wait) {
        if (wait->n < 0 || (wait->n > 0 && (!wait->cqs || !wait->counts)))
            return inec_fail(-EINVAL, "primitive: bad wait descriptor");
        for (int i = 0; i < wait->n; i++)
            if (!wait->cqs[i] || wait->cqs[i]->dev != dev)
                return inec_fail(-EINVAL, "primitive: wait CQ %d is not of the calculator's device",
                                 i);
    }
    if (stripe) {
        if (stripe->n < 0 || (stripe->n > 0 && !stripe->sends))
            return inec_fail(-EINVAL, "primitive: bad stripe descriptor");
        for (int i = 0; i < stripe->n; i++) {
            const struct inec_qp *qp = stripe->sends[i].qp;
            if (!qp || qp->type != INEC_QP_RC || qp->dev != dev)
                return inec_fail(
                    -EINVAL, "primitive: stripe %d needs an RC QP of the calculator's device", i);
        }
    }
    return 0;
}

static int build(struct plan *p, const struct inec_wait_desc *wait, struct inec_calc_desc *calc,
                 const struct inec_mem_desc *mem, const struct inec_stripe_desc *stripe)
{
    int nwait = wait ? wait->n : 0, nsend = stripe ? stripe->n : 0;
    p->chains = calloc((size_t)(1 + nsend), sizeof(*p->chains));
    p->wrs = calloc((size_t)(nwait + 1 + 2 * nsend), sizeof(*p->wrs));
    if (!p->chains || !p->wrs)
        return inec_fail(-ENOMEM, "primitive: out of memory");

    struct chain *c = &p->chains[p->nchains++];
    c->qp = calc->qp;
    for (int i = 0; i < nwait; i++) {
        struct inec_wr *wr = append(p, c, INEC_WR_WAIT);
        wr->wait.cq = wait->cqs[i];
        wr->wait.count = wait->counts[i];
    }
    struct inec_wr *wr = append(p, c, INEC_WR_CALC);
    wr->wr_id = calc->wr_id;
    wr->flags = INEC_SIGNALED; /* the stripe WAITs and the caller count it */
    wr->sg_list = mem->in;
    wr->num_sge = mem->nin;
    wr->calc.kind = calc->kind;
    wr->calc.tables = calc->tables;
    wr->calc.dsts = mem->out;
    wr->calc.ndst = mem->nout;
    struct inec_cq *calc_cq = calc->qp->send_cq;
    calc->done_count = inec_cq_expected(calc_cq) + 1;

    for (int i = 0; i < nsend; i++) {
        struct inec_stripe_send *s = &stripe->sends[i];
        /* Sends on one QP share its chain (one doorbell) and its WAIT. */
        c = NULL;
        bool waited = false;
        for (int j = 1; j < p->nchains && !c; j++)
            if (p->chains[j].qp == s->qp)
                c = &p->chains[j];
        for (struct inec_wr *x = c ? c->head : NULL; x; x = x->next)
            waited |= x->opcode == INEC_WR_WAIT;
        if (!c) {
            c = &p->chains[p->nchains++];
            c->qp = s->qp;
        }
        if (!(s->flags & INEC_STRIPE_NOWAIT) && !waited) {
            wr = append(p, c, INEC_WR_WAIT);
            wr->wait.cq = calc_cq;
            wr->wait.count = calc->done_count;
        }
        wr = append(p, c, s->has_imm ? INEC_WR_SEND_IMM : INEC_WR_SEND);
        wr->wr_id = s->wr_id;
        wr->flags = s->send_flags;
        wr->sg_list = &s->buf;
        wr->num_sge = 1;
        wr->imm = s->imm;
    }
    return 0;
}

/* The host's WAIT: sleep until the count, fail if the CQ saw an error. */
static int host_wait(const struct inec_wr *wr, uint64_t errors, int timeout_ms)
{
    int rc = inec_cq_wait_count(wr->wait.cq, wr->wait.count, timeout_ms);
    if (rc)
        return rc;
    if (inec_cq_errors(wr->wait.cq) != errors)
        return inec_fail(-EIO, "primitive: a waited-for request failed");
    return 0;
}

static int run(struct plan *p, const struct inec_calc_desc *calc)
{
    if (!(calc->flags & INEC_PRIM_INCOHERENT)) {
        for (int i = 0; i < p->nchains; i++) {
            int rc = inec_post_send(p->chains[i].qp, p->chains[i].head, NULL);
            if (rc)
                return rc;
        }
        return 0;
    }
    int timeout = calc->timeout_ms > 0 ? calc->timeout_ms : DEFAULT_TIMEOUT_MS;
    /* Error counts as of now, as the engine records them when a WAIT is posted. */
    uint64_t *errors = calloc((size_t)p->nwrs, sizeof(*errors));
    if (!errors)
        return inec_fail(-ENOMEM, "primitive: out of memory");
    for (int i = 0; i < p->nwrs; i++)
        if (p->wrs[i].opcode == INEC_WR_WAIT)
            errors[i] = inec_cq_errors(p->wrs[i].wait.cq);
    int rc = 0;
    for (int i = 0; i < p->nchains && rc == 0; i++) {
        struct inec_wr *next;
        for (struct inec_wr *wr = p->chains[i].head; wr && rc == 0; wr = next) {
            next = wr->next;
            if (wr->opcode == INEC_WR_WAIT) {
                rc = host_wait(wr, errors[wr - p->wrs], timeout);
            } else {
                wr->next = NULL;
                rc = inec_post_send(p->chains[i].qp, wr, NULL);
            }
        }
    }
    free(errors);
    return rc;
}

static int primitive(struct inec_wait_desc *wait, struct inec_calc_desc *calc,
                     struct inec_mem_desc *mem, struct inec_stripe_desc *stripe)
{
    int rc = check(wait, calc, mem, stripe);
    if (rc)
        return rc;
    struct plan p = {0};
    rc = build(&p, wait, calc, mem, stripe);
    if (rc == 0)
        rc = run(&p, calc);
    free(p.chains);
    free(p.wrs);
    return rc;
}

int inec_ec_send(struct inec_calc_desc *calc, struct inec_mem_desc *mem,
                 struct inec_stripe_desc *stripe)
{
    return primitive(NULL, calc, mem, stripe);
}

int inec_recv_ec_send(struct inec_wait_desc *wait, struct inec_calc_desc *calc,
                      struct inec_mem_desc *mem, struct inec_stripe_desc *stripe)
{
    return primitive(wait, calc, mem, stripe);
}

int inec_recv_ec(struct inec_wait_desc *wait, struct inec_calc_desc *calc,
                 struct inec_mem_desc *mem)
{
    return primitive(wait, calc, mem, NULL);
}
