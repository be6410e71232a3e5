/*
 * The verbs provider's pure parts, which run everywhere (no NIC needed):
 * the raw mlx5 WAIT WQE's bytes against the PRM's field offsets, the
 * address exchange codec, the WAIT gate, the chain splitter and the
 * in-order completion bookkeeping; where libibverbs' headers are, the QP
 * attributes and work requests handed to it; and provider selection with
 * its fallback to soft.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "inec/inec.h"
#include "inec/providers/verbs/addr.h"
#include "inec/providers/verbs/chain.h"
#include "inec/providers/verbs/mlx5_wait.h"
#ifdef INEC_HAVE_MLX5DV
#include <endian.h>
#include <infiniband/mlx5dv.h>
#endif
#ifdef INEC_HAVE_VERBS
#include <arpa/inet.h>

#include "inec/providers/verbs/wr.h"
#endif

static uint32_t be32_at(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- the raw WAIT WQE ------------------------------------------------ */

static void test_wait_wqe_layout(void **state)
{
    (void)state;
    uint8_t w[MLX5_WAIT_WQE_BYTES];
    memset(w, 0xee, sizeof(w));
    mlx5_wait_wqe_encode(w, 0x00abcdef, 0x1234, 0x00456789, 0x1122334455667788ull, 1);
    /* Control segment (PRM "Send WQE Control Segment"): DWORD 0 at byte 0 is
     * opc_mod[31:24] | wqe_index[23:8] | opcode[7:0]. */
    assert_int_equal(be32_at(w + 0), 0x00123400u | MLX5_CD_OPCODE_CQE_WAIT);
    assert_int_equal(w[3], 0x0f);
    /* DWORD 1 at byte 4: qpn[31:8] | ds[5:0], ds in 16-byte units: 2. */
    assert_int_equal(be32_at(w + 4), 0xabcdef00u | 2);
    /* Byte 8 signature and 9..10 stream id: 0 (the driver sets the signature). */
    assert_int_equal(w[8], 0);
    assert_int_equal(w[9], 0);
    assert_int_equal(w[10], 0);
    /* Byte 11 fm_ce_se: CE = 2 (bits 3:2), a CQE always; no fence, no SE. */
    assert_int_equal(w[11], 0x08);
    assert_int_equal(be32_at(w + 12), 0); /* imm */
    /* Wait segment: 8 reserved bytes, then pi and the CQ number, big-endian. */
    for (int i = 16; i < 24; i++)
        assert_int_equal(w[i], 0);
    assert_int_equal(be32_at(w + 24), 0x55667788u); /* the low 32 bits of the count */
    assert_int_equal(be32_at(w + 28), 0x00456789u);

    mlx5_wait_wqe_encode(w, 7, 0, 0xff123456, 5, 0);
    assert_int_equal(w[11], 0);                     /* unsignaled: no CQE */
    assert_int_equal(be32_at(w + 28), 0x00123456u); /* CQNs are 24 bits */
    assert_int_equal(be32_at(w + 4), 7u << 8 | 2);

    mlx5_enable_wqe_encode(w, MLX5_CD_OPCODE_SEND_ENABLE, 9, 3, 0x000abc, 40, 0);
    assert_int_equal(be32_at(w + 0), 3u << 8 | 0x17);
    assert_int_equal(be32_at(w + 24), 40);
    assert_int_equal(be32_at(w + 28), 0xabc);
    mlx5_enable_wqe_encode(w, MLX5_CD_OPCODE_RECV_ENABLE, 9, 3, 1, 1, 1);
    assert_int_equal(w[3], 0x16);
}

/* Where rdma-core is installed, its own transcription of the PRM agrees:
 * mlx5_wr_raw_wqe() reads ds from qpn_ds and copies ds * 16 bytes. */
static void test_wait_wqe_against_mlx5dv(void **state)
{
    (void)state;
#ifdef INEC_HAVE_MLX5DV
    assert_int_equal(sizeof(struct mlx5_wqe_ctrl_seg), 16);
    assert_int_equal(offsetof(struct mlx5_wqe_ctrl_seg, opmod_idx_opcode), 0);
    assert_int_equal(offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds), 4);
    assert_int_equal(offsetof(struct mlx5_wqe_ctrl_seg, signature), 8);
    assert_int_equal(offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se), 11);
    assert_int_equal(offsetof(struct mlx5_wqe_ctrl_seg, imm), 12);
    assert_int_equal(MLX5_CD_CE_ALWAYS, MLX5_WQE_CTRL_CQ_UPDATE);
    uint8_t w[MLX5_WAIT_WQE_BYTES];
    mlx5_wait_wqe_encode(w, 0x123, 77, 0x456, 1000, 1);
    struct mlx5_wqe_ctrl_seg ctrl;
    memcpy(&ctrl, w, sizeof(ctrl));
    assert_int_equal(be32toh(ctrl.opmod_idx_opcode) & 0xff, 0x0f);
    assert_int_equal((be32toh(ctrl.opmod_idx_opcode) >> 8) & 0xffff, 77);
    assert_int_equal(be32toh(ctrl.qpn_ds) & 0x3f, MLX5_WAIT_WQE_DS);
    assert_int_equal(be32toh(ctrl.qpn_ds) >> 8, 0x123);
    assert_int_equal(ctrl.fm_ce_se, MLX5_WQE_CTRL_CQ_UPDATE);
    assert_true(MLX5_WAIT_WQE_BYTES <= MLX5_SEND_WQE_BB); /* one basic block */
#else
    skip();
#endif
}

/* ---- address exchange ------------------------------------------------ */

static void test_addr_roundtrip(void **state)
{
    (void)state;
    struct verbs_addr a = {.lid = 0xbeef, .port = 2, .mtu = 5, .psn_seed = 0xa1b2c3};
    for (int i = 0; i < 16; i++)
        a.gid[i] = (uint8_t)(0xf0 + i);
    char text[VERBS_ADDR_MAX];
    int n = verbs_addr_format(&a, text, sizeof(text));
    assert_true(n > 0);
    assert_string_equal(text, "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:48879:2:5:a1b2c3");
    struct verbs_addr b;
    char err[128];
    assert_int_equal(verbs_addr_parse(text, &b, err, sizeof(err)), 0);
    assert_memory_equal(&a, &b, sizeof(a));
    assert_false(verbs_gid_is_zero(b.gid));
    /* A LID-routed InfiniBand port: GID zero, no GRH. */
    assert_int_equal(verbs_addr_parse("verbs:00000000000000000000000000000000:1:1:3:000000", &b,
                                      err, sizeof(err)),
                     0);
    assert_true(verbs_gid_is_zero(b.gid));
    assert_int_equal(verbs_addr_format(&a, text, 20), -ENOSPC);
}

static void test_addr_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "tcp:127.0.0.1:7000",
        "mem:3",
        "verbs:",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfe:1:1:3:000000",    /* GID too short */
        "verbs:g0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:1:1:3:000000",  /* not hex */
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff1:1:1:3:000000", /* GID too long */
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:65536:1:3:000000",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:1:0:3:000000",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:1:1:6:000000",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:1:1:0:000000",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:1:1:3:00000",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:1:1:3:0000000",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:1:1:3:000000x",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff:-1:1:3:000000",
        "verbs:f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff::1:3:000000",
        NULL,
    };
    for (int i = 0; bad[i]; i++) {
        struct verbs_addr a;
        char err[160] = "";
        if (verbs_addr_parse(bad[i], &a, err, sizeof(err)) != -EINVAL)
            fail_msg("accepted '%s'", bad[i]);
        assert_true(strstr(err, "verbs") != NULL);
    }
    struct verbs_addr a;
    char err[160];
    assert_int_equal(verbs_addr_parse(NULL, &a, err, sizeof(err)), -EINVAL);
}

static void test_psn(void **state)
{
    (void)state;
    /* 24 bits, a function of (seed, qpn) both sides compute alike, and
     * QPs of one device start apart. */
    for (uint32_t q = 0; q < 5000; q++) {
        uint32_t p = verbs_psn(0xabcdef, q);
        assert_true(p <= 0xffffff);
        assert_int_equal(p, verbs_psn(0xabcdef, q));
    }
    assert_int_not_equal(verbs_psn(0xabcdef, 0x100), verbs_psn(0xabcdef, 0x101));
    assert_int_not_equal(verbs_psn(1, 0x100), verbs_psn(2, 0x100));
}

/* ---- WAIT gate ------------------------------------------------------- */

static void test_gate(void **state)
{
    (void)state;
    assert_int_equal(verbs_gate(4, 0, 5, 0), VERBS_GATE_BLOCKED);
    assert_int_equal(verbs_gate(5, 0, 5, 0), VERBS_GATE_OPEN);
    assert_int_equal(verbs_gate(9, 0, 5, 0), VERBS_GATE_OPEN);
    /* An error on the CQ after the WAIT was posted fails it... */
    assert_int_equal(verbs_gate(5, 1, 5, 0), VERBS_GATE_DEP_ERR);
    /* ...but one from before does not; and a blocked gate stays blocked. */
    assert_int_equal(verbs_gate(5, 1, 5, 1), VERBS_GATE_OPEN);
    assert_int_equal(verbs_gate(4, 3, 5, 0), VERBS_GATE_BLOCKED);
    /* Counts are wrap-safe. */
    assert_int_equal(verbs_gate(UINT64_MAX, 0, 2, 0), VERBS_GATE_BLOCKED);
    assert_int_equal(verbs_gate(3, 0, UINT64_MAX - 1, 0), VERBS_GATE_OPEN);
}

/* ---- splitter and bookkeeping ---------------------------------------- */

struct bufs {
    uint8_t a[64], b[64];
    struct inec_mr mr;
    struct inec_sge sa, sb;
    struct inec_cq cq;
};

static void bufs_init(struct bufs *x)
{
    memset(x, 0, sizeof(*x));
    x->mr = (struct inec_mr){.addr = x->a, .len = sizeof(x->a)};
    x->sa = (struct inec_sge){x->a, 16, &x->mr};
    x->sb = (struct inec_sge){x->b, 16, &x->mr};
}

static struct inec_wr wr_of(enum inec_wr_opcode op, uint64_t id, unsigned flags,
                            struct inec_sge *sge, struct inec_wr *next)
{
    return (struct inec_wr){.next = next,
                            .wr_id = id,
                            .opcode = op,
                            .flags = flags,
                            .sg_list = sge,
                            .num_sge = sge ? 1 : 0};
}

static void test_splitter(void **state)
{
    (void)state;
    struct bufs x;
    bufs_init(&x);
    struct vsq q;
    assert_int_equal(vsq_init(&q, 16), 0);
    struct inec_wr w[7];
    w[6] = wr_of(INEC_WR_SEND, 7, 0, &x.sa, NULL);
    w[5] = wr_of(INEC_WR_NOP, 6, 0, NULL, &w[6]);
    w[4] = wr_of(INEC_WR_SEND_IMM, 5, 0, &x.sa, &w[5]);
    w[3] = wr_of(INEC_WR_WAIT, 4, 0, NULL, &w[4]);
    w[3].wait.cq = &x.cq;
    w[3].wait.count = 3;
    w[2] = wr_of(INEC_WR_WRITE, 3, 0, &x.sb, &w[3]);
    w[1] = wr_of(INEC_WR_SEND, 2, 0, &x.sa, &w[2]);
    w[0] = wr_of(INEC_WR_WAIT, 1, 0, NULL, &w[1]);
    w[0].wait.cq = &x.cq;
    w[0].wait.count = 1;
    atomic_store(&x.cq.errors, 2);
    assert_int_equal(vsq_push(&q, w, 7), 0);
    /* WAIT | SEND WRITE (one doorbell) | WAIT | SEND_IMM | NOP | SEND */
    static const struct {
        enum vstep_kind kind;
        uint64_t first, end;
    } want[] = {{VSTEP_WAIT, 0, 1}, {VSTEP_HW, 1, 3},   {VSTEP_WAIT, 3, 4},
                {VSTEP_HW, 4, 5},   {VSTEP_HOST, 5, 6}, {VSTEP_HW, 6, 7}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct vstep st = vsq_step(&q);
        assert_int_equal(st.kind, want[i].kind);
        assert_int_equal(st.first, want[i].first);
        assert_int_equal(st.end, want[i].end);
        q.head = st.end;
    }
    assert_int_equal(vsq_step(&q).kind, VSTEP_IDLE);
    /* WAITs keep their target and the CQ's error count at post time. */
    assert_int_equal(vsq_slot(&q, 3)->wr.wait.count, 3);
    assert_int_equal(vsq_slot(&q, 3)->wait_errors, 2);
    assert_null(vsq_slot(&q, 2)->wr.next);
    assert_ptr_equal(vsq_slot(&q, 2)->wr.sg_list, vsq_slot(&q, 2)->sge);
    vsq_fini(&q);
}

static void test_push_copies_and_limits(void **state)
{
    (void)state;
    struct bufs x;
    bufs_init(&x);
    struct vsq q;
    assert_int_equal(vsq_init(&q, 4), 0);
    memset(x.a, 'A', 16);
    struct inec_wr inl = wr_of(INEC_WR_SEND, 1, INEC_INLINE, &x.sa, NULL);
    assert_int_equal(vsq_push(&q, &inl, 1), 0);
    memset(x.a, 'B', 16); /* the caller reuses its buffer at once */
    const struct vslot *s = vsq_slot(&q, 0);
    assert_int_equal(s->wr.num_sge, 1);
    assert_int_equal(s->sge[0].length, 16);
    assert_int_equal(((const uint8_t *)s->sge[0].addr)[0], 'A');
    /* A CALC's destinations follow its sources in the slot. */
    struct inec_sge dst = x.sb;
    struct inec_wr calc = wr_of(INEC_WR_CALC, 2, INEC_SIGNALED, &x.sa, NULL);
    calc.calc.kind = INEC_CALC_XOR;
    calc.calc.dsts = &dst;
    calc.calc.ndst = 1;
    assert_int_equal(vsq_push(&q, &calc, 1), 0);
    s = vsq_slot(&q, 1);
    assert_ptr_equal(s->wr.calc.dsts, &s->sge[1]);
    assert_ptr_equal(s->sge[1].addr, x.b);
    assert_int_equal(s->len, 16);
    /* Two more fit, a third does not, and a refused chain leaves nothing. */
    struct inec_wr two[3];
    two[2] = wr_of(INEC_WR_NOP, 5, 0, NULL, NULL);
    two[1] = wr_of(INEC_WR_NOP, 4, 0, NULL, &two[2]);
    two[0] = wr_of(INEC_WR_NOP, 3, 0, NULL, &two[1]);
    assert_int_equal(vsq_push(&q, two, 3), -ENOMEM);
    assert_int_equal(vsq_used(&q), 2);
    assert_int_equal(vsq_push(&q, &two[1], 2), 0);
    assert_int_equal(vsq_used(&q), 4);
    vsq_fini(&q);
}

static void test_retire_in_order(void **state)
{
    (void)state;
    struct bufs x;
    bufs_init(&x);
    struct vsq q;
    assert_int_equal(vsq_init(&q, 8), 0);
    struct inec_wr w[4];
    w[3] = wr_of(INEC_WR_SEND, 40, INEC_SIGNALED, &x.sa, NULL);
    w[2] = wr_of(INEC_WR_NOP, 30, INEC_SIGNALED, NULL, &w[3]);
    w[1] = wr_of(INEC_WR_SEND, 20, 0, &x.sa, &w[2]); /* unsignaled */
    w[0] = wr_of(INEC_WR_WRITE, 10, INEC_SIGNALED, &x.sa, &w[1]);
    assert_int_equal(vsq_push(&q, w, 4), 0);
    for (uint64_t i = 0; i < 4; i++)
        vsq_slot(&q, i)->state = VSLOT_POSTED;
    q.head = 4;
    struct inec_wc wc[8];
    assert_int_equal(vsq_retire(&q, 77, wc, 8), 0);
    /* The hardware finishes 1 and 3 first: nothing surfaces before 0. */
    vsq_slot(&q, 1)->state = VSLOT_DONE;
    vsq_slot(&q, 3)->state = VSLOT_DONE;
    assert_int_equal(vsq_retire(&q, 77, wc, 8), 0);
    vsq_slot(&q, 0)->state = VSLOT_DONE;
    int n = vsq_retire(&q, 77, wc, 8);
    assert_int_equal(n, 1); /* 0 signaled, 1 unsignaled and retired silently, 2 not done */
    assert_int_equal(wc[0].wr_id, 10);
    assert_int_equal(wc[0].opcode, INEC_WC_WRITE);
    assert_int_equal(wc[0].qp_num, 77);
    assert_int_equal(wc[0].byte_len, 16);
    assert_int_equal(q.retire, 2);
    vsq_slot(&q, 2)->state = VSLOT_DONE;
    n = vsq_retire(&q, 77, wc, 1); /* at most max */
    assert_int_equal(n, 1);
    assert_int_equal(wc[0].wr_id, 30);
    assert_int_equal(wc[0].opcode, INEC_WC_NOP);
    n = vsq_retire(&q, 77, wc, 8);
    assert_int_equal(n, 1);
    assert_int_equal(wc[0].wr_id, 40);
    assert_int_equal(vsq_used(&q), 0);
    vsq_fini(&q);
}

static void test_retire_error_flushes(void **state)
{
    (void)state;
    struct bufs x;
    bufs_init(&x);
    struct vsq q;
    assert_int_equal(vsq_init(&q, 8), 0);
    struct inec_wr w[4];
    w[3] = wr_of(INEC_WR_SEND, 4, INEC_SIGNALED, &x.sa, NULL);
    w[2] = wr_of(INEC_WR_SEND, 3, 0, &x.sa, &w[3]);
    w[1] = wr_of(INEC_WR_WAIT, 2, 0, NULL, &w[2]);
    w[1].wait.cq = &x.cq;
    w[0] = wr_of(INEC_WR_SEND, 1, 0, &x.sa, &w[1]);
    assert_int_equal(vsq_push(&q, w, 4), 0);
    /* The unsignaled SEND succeeded, the WAIT saw an error: it surfaces, and
     * every later request reports FLUSH_ERR, signaled or not. */
    vsq_slot(&q, 0)->state = VSLOT_DONE;
    vsq_slot(&q, 1)->state = VSLOT_DONE;
    vsq_slot(&q, 1)->status = INEC_WC_DEP_ERR;
    q.head = 2;
    vsq_flush_queued(&q);
    assert_int_equal(q.head, 4);
    struct inec_wc wc[8];
    int n = vsq_retire(&q, 5, wc, 8);
    assert_int_equal(n, 3);
    assert_int_equal(wc[0].wr_id, 2);
    assert_int_equal(wc[0].status, INEC_WC_DEP_ERR);
    assert_int_equal(wc[0].opcode, INEC_WC_WAIT);
    assert_int_equal(wc[1].wr_id, 3);
    assert_int_equal(wc[1].status, INEC_WC_FLUSH_ERR);
    assert_int_equal(wc[2].wr_id, 4);
    assert_int_equal(wc[2].status, INEC_WC_FLUSH_ERR);
    /* After an error even a success that comes later reports flushed. */
    struct inec_wr late = wr_of(INEC_WR_SEND, 9, INEC_SIGNALED, &x.sa, NULL);
    assert_int_equal(vsq_push(&q, &late, 1), 0);
    q.head++;
    vsq_slot(&q, 4)->state = VSLOT_DONE;
    assert_int_equal(vsq_retire(&q, 5, wc, 8), 1);
    assert_int_equal(wc[0].status, INEC_WC_FLUSH_ERR);
    vsq_fini(&q);
}

static void test_retire_recv(void **state)
{
    (void)state;
    struct bufs x;
    bufs_init(&x);
    struct vsq q;
    assert_int_equal(vsq_init(&q, 4), 0);
    struct inec_wr r[2];
    r[1] = wr_of(INEC_WR_RECV, 2, 0, &x.sb, NULL);
    r[0] = wr_of(INEC_WR_RECV, 1, 0, &x.sa, &r[1]);
    assert_int_equal(vsq_push(&q, r, 2), 0);
    assert_int_equal(vsq_step(&q).kind, VSTEP_HW);
    assert_int_equal(vsq_step(&q).end, 2);
    q.head = 2;
    struct vslot *s = vsq_slot(&q, 0);
    s->state = VSLOT_DONE;
    s->byte_len = 7;
    s->wc_opcode = INEC_WC_RECV_WRITE_IMM;
    s->has_imm = true;
    s->imm = 0xfeed;
    vsq_slot(&q, 1)->state = VSLOT_DONE;
    vsq_slot(&q, 1)->status = INEC_WC_FLUSH_ERR;
    struct inec_wc wc[4];
    /* RECVs always complete (unsignaled as they are), with what arrived. */
    assert_int_equal(vsq_retire(&q, 3, wc, 4), 2);
    assert_int_equal(wc[0].opcode, INEC_WC_RECV_WRITE_IMM);
    assert_int_equal(wc[0].byte_len, 7);
    assert_true(wc[0].has_imm);
    assert_int_equal(wc[0].imm, 0xfeed);
    assert_int_equal(wc[1].opcode, INEC_WC_RECV);
    assert_int_equal(wc[1].status, INEC_WC_FLUSH_ERR);
    vsq_fini(&q);
}

/* ---- what libibverbs is handed (needs its headers, not a NIC) --------- */

#ifdef INEC_HAVE_VERBS
static void test_rtr_rts_attrs(void **state)
{
    (void)state;
    struct verbs_addr me = {.lid = 3, .port = 2, .mtu = 5, .psn_seed = 0x123456};
    struct verbs_addr peer = {.lid = 7, .port = 1, .mtu = 3, .psn_seed = 0xabcdef};
    for (int i = 0; i < 16; i++)
        peer.gid[i] = (uint8_t)(i + 1);
    struct ibv_qp_attr a;
    int mask;
    verbs_rtr_attr(&me, &peer, 0x4321, 3, &a, &mask);
    assert_int_equal(a.qp_state, IBV_QPS_RTR);
    assert_int_equal(a.path_mtu, IBV_MTU_1024); /* the smaller of 4096 and 1024 */
    assert_int_equal(a.dest_qp_num, 0x4321);
    assert_int_equal(a.rq_psn, verbs_psn(0xabcdef, 0x4321));
    assert_int_equal(a.ah_attr.dlid, 7);
    assert_int_equal(a.ah_attr.port_num, 2); /* our port */
    assert_int_equal(a.ah_attr.is_global, 1);
    assert_memory_equal(a.ah_attr.grh.dgid.raw, peer.gid, 16);
    assert_int_equal(a.ah_attr.grh.sgid_index, 3);
    assert_int_equal(a.ah_attr.grh.hop_limit, 64);
    assert_int_equal(a.max_dest_rd_atomic, 1);
    assert_int_equal(a.min_rnr_timer, 12);
    assert_int_equal(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    memset(peer.gid, 0, 16); /* InfiniBand by LID: no GRH */
    verbs_rtr_attr(&me, &peer, 0x4321, 3, &a, &mask);
    assert_int_equal(a.ah_attr.is_global, 0);

    verbs_rts_attr(&me, 0x99, &a, &mask);
    assert_int_equal(a.qp_state, IBV_QPS_RTS);
    assert_int_equal(a.rnr_retry, 7); /* a SEND waits for its RECV forever */
    assert_int_equal(a.retry_cnt, 7);
    assert_int_equal(a.timeout, 14);
    assert_int_equal(a.sq_psn, verbs_psn(0x123456, 0x99));
    assert_int_equal(a.max_rd_atomic, 1);
    assert_int_equal(mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);

    /* Both sides agree: what the peer expects of our QP is where it starts,
     * from nothing but our device address and QP number. */
    char text[VERBS_ADDR_MAX], err[128];
    assert_true(verbs_addr_format(&me, text, sizeof(text)) > 0);
    struct verbs_addr seen;
    assert_int_equal(verbs_addr_parse(text, &seen, err, sizeof(err)), 0);
    struct ibv_qp_attr theirs, ours;
    verbs_rtr_attr(&peer, &seen, 0x99, 0, &theirs, &mask);
    verbs_rts_attr(&me, 0x99, &ours, &mask);
    assert_int_equal(theirs.rq_psn, ours.sq_psn);
}

static uint32_t key_of(const struct inec_sge *sge)
{
    return sge->mr ? sge->mr->rkey : 0;
}

static void test_work_requests(void **state)
{
    (void)state;
    struct bufs x;
    bufs_init(&x);
    x.mr.rkey = 0x77;
    struct vsq q;
    assert_int_equal(vsq_init(&q, 8), 0);
    struct inec_sge three[3] = {x.sa, {x.b, 0, &x.mr}, x.sb};
    struct inec_wr w[5];
    w[4] = wr_of(INEC_WR_SEND, 5, INEC_INLINE, &x.sa, NULL);
    w[3] = wr_of(INEC_WR_WRITE_IMM, 4, 0, &x.sa, &w[4]);
    w[3].imm = 0xdeadbeef;
    w[3].rdma.remote_addr = 0x1000;
    w[3].rdma.rkey = 9;
    w[2] = wr_of(INEC_WR_WRITE, 3, 0, &x.sa, &w[3]);
    w[2].rdma.remote_addr = 0x2000;
    w[2].rdma.rkey = 8;
    w[1] = wr_of(INEC_WR_SEND_IMM, 2, 0, &x.sa, &w[2]);
    w[1].imm = 0x01020304;
    w[0] = wr_of(INEC_WR_SEND, 1, 0, three, &w[1]);
    w[0].num_sge = 3;
    assert_int_equal(vsq_push(&q, w, 5), 0);
    struct ibv_sge sge[VERBS_MAX_SGE];
    struct ibv_send_wr wr;
    /* Every request is signaled to the NIC (inec's flag stays in the slot);
     * the empty middle SGE is left out. */
    verbs_send_wr(vsq_slot(&q, 0), 40, key_of, sge, &wr);
    assert_int_equal(wr.wr_id, 40);
    assert_int_equal(wr.opcode, IBV_WR_SEND);
    assert_int_equal(wr.send_flags, IBV_SEND_SIGNALED);
    assert_int_equal(wr.num_sge, 2);
    assert_ptr_equal(wr.sg_list, sge);
    assert_int_equal(sge[0].addr, (uintptr_t)x.a);
    assert_int_equal(sge[0].length, 16);
    assert_int_equal(sge[0].lkey, 0x77);
    assert_int_equal(sge[1].addr, (uintptr_t)x.b);
    verbs_send_wr(vsq_slot(&q, 1), 41, key_of, sge, &wr);
    assert_int_equal(wr.opcode, IBV_WR_SEND_WITH_IMM);
    assert_int_equal(wr.imm_data, htonl(0x01020304)); /* big-endian on the wire */
    verbs_send_wr(vsq_slot(&q, 2), 42, key_of, sge, &wr);
    assert_int_equal(wr.opcode, IBV_WR_RDMA_WRITE);
    assert_int_equal(wr.wr.rdma.remote_addr, 0x2000);
    assert_int_equal(wr.wr.rdma.rkey, 8);
    assert_int_equal(wr.imm_data, 0);
    verbs_send_wr(vsq_slot(&q, 3), 43, key_of, sge, &wr);
    assert_int_equal(wr.opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
    assert_int_equal(wr.imm_data, htonl(0xdeadbeef));
    assert_int_equal(wr.wr.rdma.remote_addr, 0x1000);
    assert_int_equal(wr.wr.rdma.rkey, 9);
    /* INLINE: the NIC copies from the slot's own copy, no key needed. */
    verbs_send_wr(vsq_slot(&q, 4), 44, key_of, sge, &wr);
    assert_int_equal(wr.send_flags, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
    assert_int_equal(wr.num_sge, 1);
    assert_int_equal(sge[0].addr, (uintptr_t)vsq_slot(&q, 4)->inl);
    assert_int_equal(sge[0].lkey, 0);

    struct inec_wr r = wr_of(INEC_WR_RECV, 6, 0, &x.sb, NULL);
    assert_int_equal(vsq_push(&q, &r, 1), 0);
    struct ibv_recv_wr rwr;
    verbs_recv_wr(vsq_slot(&q, 5), 45, key_of, sge, &rwr);
    assert_int_equal(rwr.wr_id, VERBS_RECV_BIT | 45);
    assert_int_equal(rwr.num_sge, 1);
    assert_int_equal(sge[0].addr, (uintptr_t)x.b);
    vsq_fini(&q);
}

static void test_wc_status(void **state)
{
    (void)state;
    assert_int_equal(verbs_wc_status(IBV_WC_SUCCESS), INEC_WC_SUCCESS);
    assert_int_equal(verbs_wc_status(IBV_WC_LOC_LEN_ERR), INEC_WC_LEN_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_REM_INV_REQ_ERR), INEC_WC_LEN_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_LOC_PROT_ERR), INEC_WC_PROT_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_REM_ACCESS_ERR), INEC_WC_PROT_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_WR_FLUSH_ERR), INEC_WC_FLUSH_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_RETRY_EXC_ERR), INEC_WC_REMOTE_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_RNR_RETRY_EXC_ERR), INEC_WC_REMOTE_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_REM_OP_ERR), INEC_WC_REMOTE_ERR);
    assert_int_equal(verbs_wc_status(IBV_WC_FATAL_ERR), INEC_WC_REMOTE_ERR);
}
#else
static void test_rtr_rts_attrs(void **state)
{
    (void)state;
    skip(); /* built without libibverbs */
}
static void test_work_requests(void **state)
{
    (void)state;
    skip();
}
static void test_wc_status(void **state)
{
    (void)state;
    skip();
}
#endif

/* ---- selection and listing ------------------------------------------- */

static bool verbs_device_present(void)
{
    struct inec_device_info d[16];
    int n = inec_devices(d, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(d[i].provider, "verbs") == 0)
            return true;
    return false;
}

static void test_devices_list_soft(void **state)
{
    (void)state;
    struct inec_device_info d[16];
    int n = inec_devices(d, 16);
    assert_true(n >= 1);
    assert_string_equal(d[0].provider, "soft");
    assert_string_equal(d[0].name, "soft");
    assert_int_equal(d[0].offload, INEC_OFFLOAD_WAIT_CALC);
    assert_int_equal(d[0].max_sge, 32);
    assert_string_equal(inec_offload_str(INEC_OFFLOAD_NONE), "none");
    assert_string_equal(inec_offload_str(INEC_OFFLOAD_WAIT), "wait");
    assert_string_equal(inec_offload_str(INEC_OFFLOAD_WAIT_CALC), "wait+calc");
    assert_int_equal(inec_devices(NULL, 0), n); /* counting only */
    assert_true(inec_provider_built("soft"));
    assert_false(inec_provider_built("nosuch"));
#ifdef INEC_HAVE_VERBS
    assert_true(inec_provider_built("verbs"));
#else
    assert_false(inec_provider_built("verbs"));
#endif
}

static void test_selection_falls_back(void **state)
{
    (void)state;
    if (verbs_device_present())
        skip(); /* the fallback is for machines without a NIC */
    struct inec_device *dev = NULL;
    /* Named explicitly, a missing device is an error... */
    assert_int_equal(inec_device_open("verbs", NULL, &dev), -ENODEV);
    assert_null(dev);
    assert_true(strstr(inec_errmsg(), "verbs") != NULL);
    /* ...chosen by the environment or a device= setting it falls back. */
    setenv("INEC_PROVIDER", "verbs", 1);
    assert_int_equal(inec_device_open(NULL, "transport=mem", &dev), 0);
    assert_true(strncmp(inec_device_addr(dev), "mem:", 4) == 0);
    inec_device_close(dev);
    unsetenv("INEC_PROVIDER");
    assert_int_equal(inec_device_open(NULL, "device=mlx5_0,transport=mem", &dev), 0);
    assert_true(strncmp(inec_device_addr(dev), "mem:", 4) == 0);
    inec_device_close(dev);
    setenv("INEC_PROVIDER", "verbs:mlx5_9", 1); /* as `inec node` sets it from the map */
    assert_int_equal(inec_device_open(NULL, "transport=mem", &dev), 0);
    assert_true(strncmp(inec_device_addr(dev), "mem:", 4) == 0);
    inec_device_close(dev);
    /* device=soft is soft, whatever the environment says. */
    setenv("INEC_PROVIDER", "verbs", 1);
    assert_int_equal(inec_device_open(NULL, "transport=mem,device=soft", &dev), 0);
    assert_true(strncmp(inec_device_addr(dev), "mem:", 4) == 0);
    inec_device_close(dev);
    /* A provider nobody built is an error, not a fallback. */
    setenv("INEC_PROVIDER", "carrier-pigeon", 1);
    assert_int_equal(inec_device_open(NULL, NULL, &dev), -ENODEV);
    assert_true(strstr(inec_errmsg(), "carrier-pigeon") != NULL);
    unsetenv("INEC_PROVIDER");
    /* Soft still refuses what it does not know. */
    assert_int_equal(inec_device_open(NULL, "transport=mem,bogus=1", &dev), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_wqe_layout),
        cmocka_unit_test(test_wait_wqe_against_mlx5dv),
        cmocka_unit_test(test_addr_roundtrip),
        cmocka_unit_test(test_addr_rejects),
        cmocka_unit_test(test_psn),
        cmocka_unit_test(test_gate),
        cmocka_unit_test(test_splitter),
        cmocka_unit_test(test_push_copies_and_limits),
        cmocka_unit_test(test_retire_in_order),
        cmocka_unit_test(test_retire_error_flushes),
        cmocka_unit_test(test_retire_recv),
        cmocka_unit_test(test_rtr_rts_attrs),
        cmocka_unit_test(test_work_requests),
        cmocka_unit_test(test_wc_status),
        cmocka_unit_test(test_devices_list_soft),
        cmocka_unit_test(test_selection_falls_back),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
