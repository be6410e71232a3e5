/* The verbs provider's queue bookkeeping (see chain.h). */
#include "inec/providers/verbs/chain.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int vsq_init(struct vsq *q, uint32_t depth)
{
    memset(q, 0, sizeof(*q));
    q->depth = depth ? depth : 256;
    q->s = calloc(q->depth, sizeof(*q->s));
    return q->s ? 0 : -ENOMEM;
}

void vsq_fini(struct vsq *q)
{
    free(q->s);
    q->s = NULL;
}

static void gather(const struct inec_sge *sg, int n, uint8_t *out)
{
    for (int i = 0; i < n; i++) {
        memcpy(out, sg[i].addr, sg[i].length);
        out += sg[i].length;
    }
}

static void copy_wr(struct vslot *s, const struct inec_wr *wr)
{
    memset(s, 0, sizeof(*s));
    s->wr = *wr;
    s->wr.next = NULL;
    int n = wr->num_sge;
    for (int i = 0; i < n; i++) {
        s->sge[i] = wr->sg_list[i];
        s->len += wr->sg_list[i].length;
    }
    s->wr.sg_list = s->sge;
    switch (wr->opcode) {
    case INEC_WR_WAIT:
        s->wait_errors = atomic_load(&wr->wait.cq->errors);
        break;
    case INEC_WR_RECV:
        s->wc_opcode = INEC_WC_RECV; /* until the hardware says WRITE_IMM */
        break;
    case INEC_WR_CALC:
        for (int i = 0; i < wr->calc.ndst; i++)
            s->sge[n + i] = wr->calc.dsts[i];
        s->wr.calc.dsts = s->sge + n;
        s->len = n ? wr->sg_list[0].length : 0;
        break;
    default:
        break;
    }
    if ((wr->flags & INEC_INLINE) && wr->opcode != INEC_WR_CALC) {
        /* The caller may reuse its buffer as soon as the post returns. */
        gather(wr->sg_list, n, s->inl);
        s->sge[0] = (struct inec_sge){s->inl, s->len, NULL};
        s->wr.num_sge = s->len ? 1 : 0;
    }
    s->state = VSLOT_QUEUED;
    s->status = INEC_WC_SUCCESS;
}

int vsq_push(struct vsq *q, const struct inec_wr *chain, int nwr)
{
    if (vsq_used(q) + (uint64_t)nwr > q->depth)
        return -ENOMEM;
    for (const struct inec_wr *wr = chain; wr; wr = wr->next)
        copy_wr(vsq_slot(q, q->tail++), wr);
    return 0;
}

enum verbs_gate verbs_gate(uint64_t count, uint64_t errors, uint64_t target,
                           uint64_t errors_at_post)
{
    if (!inec_count_reached(count, target))
        return VERBS_GATE_BLOCKED;
    return errors != errors_at_post ? VERBS_GATE_DEP_ERR : VERBS_GATE_OPEN;
}

static bool on_hardware(enum inec_wr_opcode op)
{
    return op == INEC_WR_SEND || op == INEC_WR_SEND_IMM || op == INEC_WR_WRITE ||
           op == INEC_WR_WRITE_IMM || op == INEC_WR_RECV;
}

struct vstep vsq_step(const struct vsq *q)
{
    struct vstep st = {VSTEP_IDLE, q->head, q->head};
    if (q->head == q->tail)
        return st;
    enum inec_wr_opcode op = vsq_slot(q, q->head)->wr.opcode;
    st.end = q->head + 1;
    if (op == INEC_WR_WAIT) {
        st.kind = VSTEP_WAIT;
    } else if (!on_hardware(op)) {
        st.kind = VSTEP_HOST;
    } else {
        st.kind = VSTEP_HW;
        while (st.end != q->tail && on_hardware(vsq_slot(q, st.end)->wr.opcode))
            st.end++;
    }
    return st;
}

void vsq_flush_queued(struct vsq *q)
{
    for (; q->head != q->tail; q->head++) {
        struct vslot *s = vsq_slot(q, q->head);
        s->state = VSLOT_DONE;
        s->status = INEC_WC_FLUSH_ERR;
    }
}

int vsq_retire(struct vsq *q, uint32_t qpn, struct inec_wc *wc, int max)
{
    int n = 0;
    while (n < max && q->retire != q->head) {
        struct vslot *s = vsq_slot(q, q->retire);
        if (s->state != VSLOT_DONE)
            break;
        enum inec_wc_status st = q->flushing ? INEC_WC_FLUSH_ERR : s->status;
        q->flushing |= st != INEC_WC_SUCCESS;
        bool recv = s->wr.opcode == INEC_WR_RECV;
        if (recv || st != INEC_WC_SUCCESS || (s->wr.flags & INEC_SIGNALED))
            wc[n++] = (struct inec_wc){
                .wr_id = s->wr.wr_id,
                .status = st,
                .opcode = recv ? s->wc_opcode : inec_wc_opcode_of(s->wr.opcode),
                .qp_num = qpn,
                .byte_len = recv ? s->byte_len : (uint32_t)s->len,
                .imm = s->imm,
                .has_imm = s->has_imm,
            };
        q->retire++;
    }
    return n;
}
