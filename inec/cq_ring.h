/*
 * The ring and counts behind every provider's CQ: completions pushed by
 * whoever produces them (an engine, a progress thread), taken by pollers,
 * waited for by sleeping threads. A full ring overwrites its oldest entry;
 * the counts (struct inec_cq) stay exact. Internal to inec/.
 */
#ifndef INEC_CQ_RING_H
#define INEC_CQ_RING_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "inec/provider.h"

struct inec_cq_watch; /* a thread in inec_cq_wait_any, watching this ring among others */

struct inec_cq_ring {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    int waiters;
    struct inec_cq_watch *watches;
    struct inec_wc *ring;
    uint32_t depth;
    uint64_t head, tail;
};

/* -ENOMEM (with inec_errmsg set) if the ring cannot be allocated. */
int inec_cq_ring_init(struct inec_cq_ring *r, uint32_t depth);
void inec_cq_ring_fini(struct inec_cq_ring *r);
/* Adds wc and counts it in cq: errors first, so a WAIT that sees the count
 * also sees the error. Wakes the threads waiting on the ring unless `quiet`
 * (someone else will take wc: inec_cq_set_notify). */
void inec_cq_ring_push(struct inec_cq *cq, struct inec_cq_ring *r, const struct inec_wc *wc,
                       bool quiet);
/* Wakes the threads waiting on the ring, to look again. */
void inec_cq_ring_wake(struct inec_cq_ring *r);
int inec_cq_ring_poll(struct inec_cq_ring *r, int n, struct inec_wc *wc);
/* inec_cq_wait and inec_cq_wait_count, sleeping on the ring's condition. */
int inec_cq_ring_wait(struct inec_cq_ring *r, int n, struct inec_wc *wc, int timeout_ms);
int inec_cq_ring_wait_count(struct inec_cq *cq, struct inec_cq_ring *r, uint64_t target,
                            int timeout_ms);

/* A provider's CQ that starts like this (checked with INEC_RING_CQ_LAYOUT)
 * can use the three ops below as they are. */
struct inec_ring_cq {
    struct inec_cq base;
    struct inec_cq_ring r;
};
#define INEC_RING_CQ_LAYOUT(type)                                                                  \
    _Static_assert(offsetof(type, base) == 0 &&                                                    \
                       offsetof(type, r) == offsetof(struct inec_ring_cq, r),                      \
                   #type " must start with base, then r")
int inec_ring_cq_poll(struct inec_cq *cq, int n, struct inec_wc *wc);
int inec_ring_cq_wait(struct inec_cq *cq, int n, struct inec_wc *wc, int timeout_ms);
int inec_ring_cq_wait_count(struct inec_cq *cq, uint64_t target, int timeout_ms);
/* inec_cq_wait_any over CQs that all start like this. */
int inec_ring_cq_wait_any(struct inec_cq *const *cqs, int n, int timeout_ms);

#endif
