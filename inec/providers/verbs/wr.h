/*
 * What the verbs provider hands libibverbs, built without touching a
 * device: the QP attributes of the address exchange (RTR, RTS), a send or
 * receive work request from a slot, and the completion status back. Pure
 * functions over rdma-core's structs, so they are unit-tested wherever
 * libibverbs-dev is installed, NIC or not.
 */
#ifndef INEC_VERBS_WR_H
#define INEC_VERBS_WR_H

#include <infiniband/verbs.h>

#include "inec/providers/verbs/addr.h"
#include "inec/providers/verbs/chain.h"

/* Fills the INIT -> RTR attributes and mask for a QP of device `me` (port,
 * gid_index) that connects to QP rqpn of `peer`. */
void verbs_rtr_attr(const struct verbs_addr *me, const struct verbs_addr *peer, uint32_t rqpn,
                    uint8_t gid_index, struct ibv_qp_attr *a, int *mask);
/* Fills the RTR -> RTS attributes and mask for QP qpn of device `me`. */
void verbs_rts_attr(const struct verbs_addr *me, uint32_t qpn, struct ibv_qp_attr *a, int *mask);

/* A send-queue slot as an ibv_send_wr: wr_id = seq, always signaled (see
 * chain.h), empty SGEs left out (to mlx5 a byte count of 0 means 2 GiB).
 * lkey(sge) names each buffer's key; sge must hold VERBS_MAX_SGE entries. */
void verbs_send_wr(const struct vslot *s, uint64_t seq, uint32_t (*lkey)(const struct inec_sge *),
                   struct ibv_sge *sge, struct ibv_send_wr *wr);
/* A RECV slot: wr_id = VERBS_RECV_BIT | seq. */
#define VERBS_RECV_BIT (1ull << 63)
void verbs_recv_wr(const struct vslot *s, uint64_t seq, uint32_t (*lkey)(const struct inec_sge *),
                   struct ibv_sge *sge, struct ibv_recv_wr *wr);

enum inec_wc_status verbs_wc_status(enum ibv_wc_status status);

#endif
