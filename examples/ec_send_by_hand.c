/*
 * The ec-send primitive written out by hand: device A encodes k data chunks
 * into m parities on its calculator and sends them to device B, as one chain
 * the engine runs on its own:
 *
 *   A's calculator QP:  CALC(parities = G x data), signaled
 *   A's QP to B:        WAIT(calculator CQ reaches that CALC) -> SEND p0 -> ... -> SEND pm-1
 *   B's QP from A:      RECV p0 ... RECV pm-1
 *
 * inec_ec_send() builds exactly this; deg/ picks it for every vertex with
 * indegree 0. B checks the parities against codec_encode.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codecs/codec.h"
#include "codecs/gf.h"
#include "inec/inec.h"

#define K   4
#define M   2
#define LEN 4096

static int check(int rc, const char *what)
{
    if (rc < 0)
        fprintf(stderr, "ec_send_by_hand: %s: %s\n", what, inec_errmsg());
    return rc;
}

int main(void)
{
    struct codec_profile prof;
    struct codec *codec;
    char err[128];
    if (codec_profile_parse("rs:k=4,m=2", &prof, err, sizeof(err)) ||
        codec_create(&prof, &codec, err, sizeof(err))) {
        fprintf(stderr, "ec_send_by_hand: %s\n", err);
        return 1;
    }
    static uint8_t data[K + M][LEN], parity_at_b[M][LEN];
    uint8_t *stripe[K + M];
    for (int i = 0; i < K + M; i++) {
        for (int b = 0; b < LEN; b++)
            data[i][b] = (uint8_t)(i * 37 + b * 11);
        stripe[i] = data[i];
    }
    codec_encode(codec, LEN, stripe); /* the reference parities, in data[K..] */

    struct inec_device *a, *b;
    struct inec_cq *calc_cq, *a_cq, *b_cq;
    struct inec_qp *calc_qp, *a_qp, *b_qp;
    struct inec_mr *data_mr, *a_mr, *b_mr;
    static uint8_t a_parity[M][LEN];
    if (check(inec_device_open(NULL, "transport=mem", &a), "open A") ||
        check(inec_device_open(NULL, "transport=mem", &b), "open B") ||
        check(inec_cq_create(a, 0, &calc_cq), "cq") || check(inec_cq_create(a, 0, &a_cq), "cq") ||
        check(inec_cq_create(b, 0, &b_cq), "cq"))
        return 1;
    struct inec_qp_attr calc_attr = {.type = INEC_QP_CALC, .send_cq = calc_cq};
    struct inec_qp_attr rc_a = {.type = INEC_QP_RC, .send_cq = a_cq, .recv_cq = a_cq};
    struct inec_qp_attr rc_b = {.type = INEC_QP_RC, .send_cq = b_cq, .recv_cq = b_cq};
    if (check(inec_qp_create(a, &calc_attr, &calc_qp), "calc qp") ||
        check(inec_qp_create(a, &rc_a, &a_qp), "qp") ||
        check(inec_qp_create(b, &rc_b, &b_qp), "qp") ||
        check(inec_qp_connect(a_qp, inec_device_addr(b), inec_qp_num(b_qp)), "connect") ||
        check(inec_qp_connect(b_qp, inec_device_addr(a), inec_qp_num(a_qp)), "connect") ||
        check(inec_mr_reg(a, data, sizeof(data), &data_mr), "mr") ||
        check(inec_mr_reg(a, a_parity, sizeof(a_parity), &a_mr), "mr") ||
        check(inec_mr_reg(b, parity_at_b, sizeof(parity_at_b), &b_mr), "mr"))
        return 1;

    /* B: one RECV per parity. */
    struct inec_sge rsge[M];
    struct inec_wr recv[M];
    for (int j = 0; j < M; j++) {
        rsge[j] = (struct inec_sge){parity_at_b[j], LEN, b_mr};
        recv[j] = (struct inec_wr){.next = j + 1 < M ? &recv[j + 1] : NULL,
                                   .wr_id = (uint64_t)j,
                                   .opcode = INEC_WR_RECV,
                                   .sg_list = &rsge[j],
                                   .num_sge = 1};
    }
    uint64_t b_target = inec_cq_expected(b_cq) + M;
    if (check(inec_post_recv(b_qp, recv, NULL), "post recv"))
        return 1;

    /* A: the CALC on the calculator... */
    uint8_t tables[M * K * CODEC_GF_TABLE_BYTES];
    codec_gf_init_tables(M, K, codec_generator(codec) + K * K, tables);
    struct inec_sge srcs[K], dsts[M];
    for (int i = 0; i < K; i++)
        srcs[i] = (struct inec_sge){data[i], LEN, data_mr};
    for (int j = 0; j < M; j++)
        dsts[j] = (struct inec_sge){a_parity[j], LEN, a_mr};
    struct inec_wr calc = {.opcode = INEC_WR_CALC,
                           .flags = INEC_SIGNALED,
                           .sg_list = srcs,
                           .num_sge = K,
                           .calc = {INEC_CALC_EC, tables, dsts, M}};
    /* ...and the WAIT that holds A's sends until that CALC has completed:
     * its target is what the calculator CQ will count once the CALC is in. */
    struct inec_wr chain[1 + M];
    chain[0] = (struct inec_wr){.next = &chain[1], .opcode = INEC_WR_WAIT};
    for (int j = 0; j < M; j++)
        chain[1 + j] = (struct inec_wr){.next = j + 1 < M ? &chain[2 + j] : NULL,
                                        .wr_id = (uint64_t)j,
                                        .opcode = INEC_WR_SEND,
                                        .flags = j + 1 == M ? INEC_SIGNALED : 0,
                                        .sg_list = &dsts[j],
                                        .num_sge = 1};
    if (check(inec_post_send(calc_qp, &calc, NULL), "post CALC"))
        return 1;
    chain[0].wait.cq = calc_cq;
    chain[0].wait.count = inec_cq_expected(calc_cq);
    /* One doorbell for the WAIT and both SENDs; from here the host is idle. */
    if (check(inec_post_send(a_qp, chain, NULL), "post WAIT+SENDs"))
        return 1;

    if (check(inec_cq_wait_count(b_cq, b_target, 5000), "B waiting for the parities"))
        return 1;
    int bad = inec_cq_errors(b_cq) != 0;
    for (int j = 0; j < M; j++)
        bad |= memcmp(parity_at_b[j], data[K + j], LEN) != 0;
    printf("ec_send_by_hand: B received %d parities of %d bytes from one chain: %s\n", M, LEN,
           bad ? "WRONG" : "equal to codec_encode");

    inec_qp_destroy(a_qp);
    inec_qp_destroy(b_qp);
    inec_qp_destroy(calc_qp);
    inec_mr_dereg(data_mr);
    inec_mr_dereg(a_mr);
    inec_mr_dereg(b_mr);
    inec_cq_destroy(calc_cq);
    inec_cq_destroy(a_cq);
    inec_cq_destroy(b_cq);
    inec_device_close(a);
    inec_device_close(b);
    codec_destroy(codec);
    return bad;
}
