/*
 * The mlx5 cross-channel (CORE-Direct) WQEs as raw bytes, for
 * mlx5dv_wr_raw_wqe(). Pure: no libibverbs needed, so the byte layout is
 * tested everywhere.
 *
 * A WAIT WQE is two 16-byte data segments (DS = 2):
 *   bytes  0..15  control segment (PRM "Send WQE Control Segment", the
 *                 layout of struct mlx5_wqe_ctrl_seg in rdma-core's mlx5dv.h)
 *     0..3   opmod_idx_opcode  big-endian: opc_mod[31:24] wqe_index[23:8] opcode[7:0]
 *     4..7   qpn_ds            big-endian: qpn[31:8] ds[5:0] (16-byte units)
 *     8      signature
 *     9..10  dci_stream_channel_id (0 for RC)
 *     11     fm_ce_se          fence[7:5] ce[3:2] se[1] (ce = 2: CQE always)
 *     12..15 imm
 *   bytes 16..31  wait segment (MLNX_OFED libmlx5's struct mlx5_wqe_wait_en_seg;
 *                 the public PRM documents the opcode, not this segment)
 *     16..23 reserved
 *     24..27 pi       big-endian: the CQ's completion index to wait for
 *     28..31 obj_num  big-endian: the CQ number (WAIT) or QP number (SEND_EN/RECV_EN)
 * Opcodes (MLNX_OFED libmlx5 4.x, and MLX5_OPCODE_WAIT in DPDK's mlx5 PMD):
 * CQE_WAIT 0x0f, RECV_ENABLE 0x16, SEND_ENABLE 0x17.
 *
 * The hardware executes such a WQE only on a QP created cross-channel
 * (QPC cd_master); see docs/DESIGN.md for why upstream verbs cannot create one.
 */
#ifndef INEC_VERBS_MLX5_WAIT_H
#define INEC_VERBS_MLX5_WAIT_H

#include <stdint.h>

#define MLX5_WAIT_WQE_BYTES 32
#define MLX5_WAIT_WQE_DS    2

enum mlx5_cd_opcode {
    MLX5_CD_OPCODE_CQE_WAIT = 0x0f,
    MLX5_CD_OPCODE_RECV_ENABLE = 0x16,
    MLX5_CD_OPCODE_SEND_ENABLE = 0x17,
};

/* fm_ce_se: a CQE for this WQE always (the WAIT itself is SIGNALED). */
#define MLX5_CD_CE_ALWAYS (2u << 2)

/*
 * Encodes a WAIT WQE into out[32]: wait on CQ `cqn` until its completion
 * index reaches `count` (low 32 bits of inec's absolute count; the hardware
 * compares wrap-safe within 2^31). qpn: the QP that posts it; wqe_index: its
 * SQ producer index (mlx5dv_wr_raw_wqe overwrites it with the real one).
 */
void mlx5_wait_wqe_encode(uint8_t out[MLX5_WAIT_WQE_BYTES], uint32_t qpn, uint16_t wqe_index,
                          uint32_t cqn, uint64_t count, int signaled);

/* The same for SEND_ENABLE / RECV_ENABLE of QP `target_qpn` up to `index`. */
void mlx5_enable_wqe_encode(uint8_t out[MLX5_WAIT_WQE_BYTES], enum mlx5_cd_opcode opcode,
                            uint32_t qpn, uint16_t wqe_index, uint32_t target_qpn, uint32_t index,
                            int signaled);

#endif
