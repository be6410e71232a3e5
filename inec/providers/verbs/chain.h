/*
 * How the verbs provider keeps a queue's work requests between the post and
 * their completion. Pure (no libibverbs): the chain splitter, the WAIT gate,
 * and the in-order completion bookkeeping are tested everywhere.
 *
 * A posted chain is copied into a ring of slots. The progress engine (and a
 * posting thread, for what needs no host step) walks the ring from `head`
 * with vsq_step(): a WAIT is a gate checked against its CQ's produced count;
 * a run of consecutive SEND/WRITE requests up to the next WAIT or host step
 * is one segment, posted to the hardware with one ibv_post_send (one
 * doorbell); CALC and NOP are host steps. Every request the hardware runs is
 * signaled there (inec's SIGNALED flag is kept in the slot), so each slot
 * learns its own end, and vsq_retire() turns the slots into inec
 * completions in posting order with inec's rules: only SIGNALED requests
 * and errors surface, RECVs always do, and after the first error every
 * later request reports FLUSH_ERR.
 */
#ifndef INEC_VERBS_CHAIN_H
#define INEC_VERBS_CHAIN_H

#include <stdbool.h>
#include <stdint.h>

#include "inec/provider.h"

#define VERBS_MAX_SGE    32
#define VERBS_MAX_INLINE 128

enum vslot_state {
    VSLOT_QUEUED, /* not started */
    VSLOT_POSTED, /* on the hardware, its CQE not seen yet */
    VSLOT_DONE,
};

struct vslot {
    struct inec_wr wr; /* a copy; sg_list points into sge[], calc.dsts after the sources */
    struct inec_sge sge[VERBS_MAX_SGE];
    uint8_t inl[VERBS_MAX_INLINE]; /* INLINE payload, copied at post time */
    uint64_t wait_errors;          /* WAIT: its CQ's error count when posted */
    uint64_t len;                  /* bytes (CALC: per buffer) */
    enum vslot_state state;
    enum inec_wc_status status;
    /* set from the hardware completion of a RECV */
    enum inec_wc_opcode wc_opcode;
    uint32_t byte_len, imm;
    bool has_imm;
};

struct vsq {
    struct vslot *s;
    uint32_t depth;
    uint64_t tail;   /* next free slot */
    uint64_t head;   /* next to start */
    uint64_t retire; /* next to complete */
    bool flushing;   /* an error was retired: the rest reports FLUSH_ERR */
};

int vsq_init(struct vsq *q, uint32_t depth);
void vsq_fini(struct vsq *q);
/* Copies a chain of nwr requests; -ENOMEM (nothing copied) if it does not fit. */
int vsq_push(struct vsq *q, const struct inec_wr *chain, int nwr);
static inline struct vslot *vsq_slot(const struct vsq *q, uint64_t seq)
{
    return &q->s[seq % q->depth];
}

/* A WAIT's gate: may the queue go past it? */
enum verbs_gate {
    VERBS_GATE_BLOCKED, /* count not reached */
    VERBS_GATE_OPEN,    /* reached, no error on the CQ since the post */
    VERBS_GATE_DEP_ERR, /* reached, and the CQ produced an error meanwhile */
};
enum verbs_gate verbs_gate(uint64_t count, uint64_t errors, uint64_t target,
                           uint64_t errors_at_post);

/* What the head of the queue needs next. */
enum vstep_kind {
    VSTEP_IDLE, /* nothing queued */
    VSTEP_WAIT, /* slot `first` is a WAIT: check verbs_gate */
    VSTEP_HW,   /* slots [first, end) go to the hardware with one doorbell */
    VSTEP_HOST, /* slot `first` is a CALC or NOP: the host runs it */
};
struct vstep {
    enum vstep_kind kind;
    uint64_t first, end;
};
/* The splitter: the next segment from head (does not move head). */
struct vstep vsq_step(const struct vsq *q);

/* Marks every slot not yet started DONE with FLUSH_ERR (the QP is in error). */
void vsq_flush_queued(struct vsq *q);

/* Completions of DONE slots from `retire` on, in order, at most max; stops
 * at the first slot not DONE. Returns how many were written to wc. */
int vsq_retire(struct vsq *q, uint32_t qpn, struct inec_wc *wc, int max);
/* Slots posted and not yet retired. */
static inline uint64_t vsq_used(const struct vsq *q)
{
    return q->tail - q->retire;
}

#endif
