/* The verbs provider's requests and attributes for libibverbs (see wr.h). */
#include "inec/providers/verbs/wr.h"

#include <arpa/inet.h>
#include <string.h>

void verbs_rtr_attr(const struct verbs_addr *me, const struct verbs_addr *peer, uint32_t rqpn,
                    uint8_t gid_index, struct ibv_qp_attr *a, int *mask)
{
    *a = (struct ibv_qp_attr){
        .qp_state = IBV_QPS_RTR,
        .path_mtu = (enum ibv_mtu)(peer->mtu < me->mtu ? peer->mtu : me->mtu),
        .dest_qp_num = rqpn,
        .rq_psn = verbs_psn(peer->psn_seed, rqpn), /* where the peer's SQ starts */
        .max_dest_rd_atomic = 1,
        .min_rnr_timer = 12, /* 0.64 ms between receiver-not-ready retries */
        .ah_attr = {.dlid = peer->lid, .port_num = me->port},
    };
    if (!verbs_gid_is_zero(peer->gid)) { /* RoCE, or IB across subnets: a GRH */
        a->ah_attr.is_global = 1;
        memcpy(a->ah_attr.grh.dgid.raw, peer->gid, 16);
        a->ah_attr.grh.sgid_index = gid_index;
        a->ah_attr.grh.hop_limit = 64;
    }
    *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

void verbs_rts_attr(const struct verbs_addr *me, uint32_t qpn, struct ibv_qp_attr *a, int *mask)
{
    *a = (struct ibv_qp_attr){
        .qp_state = IBV_QPS_RTS,
        .timeout = 14, /* 4.096 us * 2^14 = 67 ms per try */
        .retry_cnt = 7,
        .rnr_retry = 7, /* infinite: a SEND waits for its RECV, as inec.h says */
        .sq_psn = verbs_psn(me->psn_seed, qpn),
        .max_rd_atomic = 1,
    };
    *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
            IBV_QP_MAX_QP_RD_ATOMIC;
}

static int gather(const struct vslot *s, uint32_t (*lkey)(const struct inec_sge *),
                  struct ibv_sge *sge)
{
    int n = 0;
    for (int j = 0; j < s->wr.num_sge; j++)
        if (s->sge[j].length)
            sge[n++] = (struct ibv_sge){(uintptr_t)s->sge[j].addr, (uint32_t)s->sge[j].length,
                                        lkey(&s->sge[j])};
    return n;
}

void verbs_send_wr(const struct vslot *s, uint64_t seq, uint32_t (*lkey)(const struct inec_sge *),
                   struct ibv_sge *sge, struct ibv_send_wr *wr)
{
    *wr = (struct ibv_send_wr){
        .wr_id = seq,
        .sg_list = sge,
        .num_sge = gather(s, lkey, sge),
        .opcode = IBV_WR_SEND,
        .send_flags = IBV_SEND_SIGNALED,
    };
    switch (s->wr.opcode) {
    case INEC_WR_SEND_IMM:
        wr->opcode = IBV_WR_SEND_WITH_IMM;
        break;
    case INEC_WR_WRITE:
        wr->opcode = IBV_WR_RDMA_WRITE;
        break;
    case INEC_WR_WRITE_IMM:
        wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        break;
    default:
        break;
    }
    if (s->wr.opcode == INEC_WR_SEND_IMM || s->wr.opcode == INEC_WR_WRITE_IMM)
        wr->imm_data = htonl(s->wr.imm); /* the wire is big-endian; ntohl at the receiver */
    if (s->wr.opcode == INEC_WR_WRITE || s->wr.opcode == INEC_WR_WRITE_IMM) {
        wr->wr.rdma.remote_addr = s->wr.rdma.remote_addr;
        wr->wr.rdma.rkey = s->wr.rdma.rkey;
    }
    if (s->wr.flags & INEC_INLINE)
        wr->send_flags |= IBV_SEND_INLINE;
}

void verbs_recv_wr(const struct vslot *s, uint64_t seq, uint32_t (*lkey)(const struct inec_sge *),
                   struct ibv_sge *sge, struct ibv_recv_wr *wr)
{
    *wr = (struct ibv_recv_wr){
        .wr_id = VERBS_RECV_BIT | seq, .sg_list = sge, .num_sge = gather(s, lkey, sge)};
}

enum inec_wc_status verbs_wc_status(enum ibv_wc_status status)
{
    switch (status) {
    case IBV_WC_SUCCESS:
        return INEC_WC_SUCCESS;
    case IBV_WC_LOC_LEN_ERR:     /* our RECV was too small */
    case IBV_WC_REM_INV_REQ_ERR: /* the peer's RECV was too small */
        return INEC_WC_LEN_ERR;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_REM_ACCESS_ERR:
        return INEC_WC_PROT_ERR;
    case IBV_WC_WR_FLUSH_ERR:
        return INEC_WC_FLUSH_ERR;
    default: /* retries exhausted, remote operation error, fatal */
        return INEC_WC_REMOTE_ERR;
    }
}
