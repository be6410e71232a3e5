/* Raw mlx5 cross-channel WQEs, byte by byte (layout in mlx5_wait.h). */
#include "inec/providers/verbs/mlx5_wait.h"

#include <string.h>

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void encode(uint8_t out[MLX5_WAIT_WQE_BYTES], uint8_t opcode, uint32_t qpn,
                   uint16_t wqe_index, uint32_t obj_num, uint32_t pi, int signaled)
{
    memset(out, 0, MLX5_WAIT_WQE_BYTES);
    put_be32(out + 0, (uint32_t)wqe_index << 8 | opcode); /* opc_mod 0 */
    put_be32(out + 4, (qpn & 0xffffffu) << 8 | MLX5_WAIT_WQE_DS);
    out[11] = signaled ? MLX5_CD_CE_ALWAYS : 0;
    put_be32(out + 24, pi);
    put_be32(out + 28, obj_num);
}

void mlx5_wait_wqe_encode(uint8_t out[MLX5_WAIT_WQE_BYTES], uint32_t qpn, uint16_t wqe_index,
                          uint32_t cqn, uint64_t count, int signaled)
{
    encode(out, MLX5_CD_OPCODE_CQE_WAIT, qpn, wqe_index, cqn & 0xffffffu, (uint32_t)count,
           signaled);
}

void mlx5_enable_wqe_encode(uint8_t out[MLX5_WAIT_WQE_BYTES], enum mlx5_cd_opcode opcode,
                            uint32_t qpn, uint16_t wqe_index, uint32_t target_qpn, uint32_t index,
                            int signaled)
{
    encode(out, (uint8_t)opcode, qpn, wqe_index, target_qpn & 0xffffffu, index, signaled);
}
