/*
 * The soft provider: a software NIC. Internal to inec/providers/soft/.
 *
 * Threads. Every device is served by exactly one engine thread (its own, or
 * one of a shared pool). The engine consumes the device's send queues: it
 * executes each SQ in order, retires completed entries in order, and moves
 * bytes over the device's transport, always under device.lock. Posting
 * threads are the producers: they fill entries under the queue's lock and
 * publish them with one release-store of `tail` (the doorbell) followed by
 * engine_wake(). A small SEND or WRITE chain posted to an idle SQ is
 * executed by its posting thread instead, holding what an engine pass holds
 * (see post()): on mem the engine would only copy it, on tcp only hand it to
 * the socket (the poster then tries engine.lock, and leaves the chain to a
 * pass that holds it), at the price of a wake-up.
 *
 * A receive queue is consumed by whoever delivers into it: the peer's engine
 * (mem transport) or this device's engine (tcp). Consumers and posters of an
 * RQ serialize on rq.lock; so do flushes. Lock order:
 *   engine.lock > mem_lock (read) > device.lock > sq.lock, rq.lock > mr_lock >
 *   cq.lock.
 *
 * Sleeping. An engine with nothing to do spins briefly, then sets `sleeping`
 * and blocks in io_uring on an eventfd read (and its sockets). engine_wake()
 * bumps `gen` and writes the eventfd only if the engine sleeps; the engine
 * re-checks `gen` after setting `sleeping` (seq_cst on both sides), so no
 * wake-up is lost and an idle device costs no CPU. A wake-up costs two
 * context switches, so nothing wakes an engine that would find nothing to
 * do: a completion wakes it only while a WAIT holds one of its queues
 * (`waits`), a RECV posted on mem only when a SEND of the peer found the RQ
 * empty (`rq_starved`), on tcp only when the peer is due a credit.
 */
#ifndef INEC_SOFT_H
#define INEC_SOFT_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>

#include "inec/cq_ring.h"
#include "inec/provider.h"

#define SOFT_MAX_SGE    32
#define SOFT_MAX_INLINE 128

/* What executing the head of a send queue did. */
enum exec_result {
    EXEC_DONE,     /* finished (e->status says how) */
    EXEC_BLOCKED,  /* cannot start yet: the queue stops here */
    EXEC_INFLIGHT, /* started; the transport sets e->done later */
};

struct wqe {
    uint64_t wr_id;
    uint64_t len; /* payload bytes (RECV: capacity; CALC: per buffer) */
    uint8_t opcode, flags, nsge, ndst, calc_kind;
    bool has_imm;
    bool done; /* send queue: ready to retire */
    bool busy; /* receive queue: being filled by the tcp receiver */
    uint32_t imm;
    enum inec_wc_status status;
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
        } rdma;
        struct {
            struct soft_cq *cq;
            uint64_t count;
            uint64_t errors; /* the CQ's error count when posted */
        } wait;
        const uint8_t *tables;
    };
    struct inec_sge sge[SOFT_MAX_SGE]; /* CALC: sources, then destinations */
    uint8_t inline_data[SOFT_MAX_INLINE];
};

struct wq {
    struct wqe *e;
    uint32_t depth;
    _Atomic uint64_t tail;   /* producer: posted */
    uint64_t head;           /* SQ: next to execute (engine only) */
    _Atomic uint64_t retire; /* next to complete; SQ: engine only, RQ: under lock */
    pthread_mutex_t lock;    /* producers; for an RQ also its consumers */
};

struct soft_cq {
    struct inec_cq base;
    struct inec_cq_ring r;
    /* inec_cq_set_notify: an engine thread that pushed queues the CQ on its
     * own list (notify_next) and calls notify after its pass; `notifying`
     * counts such calls under way, so unsetting can wait for them. */
    _Atomic(void (*)(void *)) notify;
    void *notify_arg;
    atomic_bool notify_queued;
    atomic_int notifying;
    struct soft_cq *notify_next;
};

struct tcp_conn;
struct pull_word;

struct soft_qp {
    struct inec_qp base;
    struct wq sq, rq;
    /* mem transport: the connected QP, read under mem_lock. */
    struct soft_qp *mem_peer;
    bool rq_starved; /* mem: a peer's SEND found our RQ empty (under rq.lock) */
    bool flushing;   /* under device.lock: an error was retired, the rest reports flushed */
    /* tcp transport: engine-owned (changed under engine.lock). */
    struct tcp_conn *conn;
    uint32_t rqpn;
    uint64_t peer_posted;       /* RECVs the peer announced (absolute) */
    uint64_t consumed;          /* of those, used by our SEND/WRITE_IMM */
    _Atomic uint64_t announced; /* our RECVs announced to the peer (read by posters) */
    uint64_t placed;            /* peer messages we placed (acknowledged cumulatively) */
    uint64_t acked_sent;        /* `placed` as last sent to the peer */
    bool ack_now;               /* a placed message asked for its F_ACK at once */
    uint64_t ack_since;         /* ns: when the oldest placed, unacknowledged message came */
    uint32_t unflagged;         /* messages sent since the last one that asked for an ACK */
    uint64_t acked;             /* our messages the peer acknowledged */
    uint64_t ack_cursor;        /* SQ index from which to look for unacknowledged messages */
    bool err_sent;              /* the peer was told we are in error */
    uint64_t sent;              /* our messages sent */
    uint64_t pull_until;        /* `sent` after the last one sent as a pull */
    struct pull_word *gate;     /* what our pulls name (tcp_pull.h); NULL until one */
    /* A passive device's QP waits for its peer's authenticated connection
     * (the address it will come from, since when in ns) instead of dialing. */
    char await_peer[96];
    uint64_t await_since;
};

struct soft_device;

struct soft_transport {
    int (*init)(struct soft_device *dev, const char *options);
    /* Device close: fini while the engine still serves the device (to drain
     * I/O), release (may be NULL) once it no longer does. */
    void (*fini)(struct soft_device *dev);
    void (*release)(struct soft_device *dev);
    int (*connect)(struct soft_qp *qp, const char *addr, uint32_t rqpn);
    void (*qp_detach)(struct soft_qp *qp);
    enum exec_result (*send)(struct soft_qp *qp, struct wqe *e);
    /* After a poster ran a chain (post()), under engine.lock and
     * device.lock: sends what it queued from the posting thread; false if
     * the engine must finish. NULL: send() itself delivers (mem), and the
     * poster holds the device only. */
    bool (*transmit_here)(struct soft_qp *qp);
    /* Under the engine's lock: a message of len payload bytes on qp is
     * pulled by its peer, not sent (may be NULL: never). */
    bool (*pulled)(const struct soft_qp *qp, uint64_t len);
    /* The RQ doorbell's wake-up: of the engine that consumes the RQ. */
    void (*recv_posted)(struct soft_qp *qp);
    /* Once per engine pass, on the engine thread; true if it made progress. */
    bool (*pass)(struct soft_device *dev);
};

extern const struct soft_transport soft_mem_transport;
extern const struct soft_transport soft_tcp_transport;

/* mem_lock for reading around an engine pass over a mem device. */
void soft_mem_lock(bool on);

struct io_op;
typedef void (*io_cb)(struct io_op *op, int res, uint32_t cqe_flags);
/* Every io_uring request carries one of these as user_data. */
struct io_op {
    io_cb cb;
};

struct engine {
    pthread_t thread;
    _Atomic uint64_t gen;
    _Atomic int sleeping;
    _Atomic bool stop;
    _Atomic uint64_t wakes;
    /* A WAIT held a queue in the last pass, so a CQ's completion must wake
     * the engine (pass_waits: this pass's, engine thread only). */
    _Atomic bool waits;
    bool pass_waits;
    _Atomic int quiet; /* its devices opened spin=0: while any, it sleeps once idle */
    int efd;
    uint64_t efd_buf;
    struct io_op efd_op;
    struct io_uring ring;
    bool defer;           /* the ring defers task work to this thread (see engine_start) */
    pthread_mutex_t lock; /* the device list */
    struct soft_device *devs;
};

struct soft_device {
    struct inec_device base;
    struct engine *eng;
    bool pooled;
    bool spin; /* its engine and the host threads waiting on its CQs spin before they sleep */
    const struct soft_transport *tr;
    void *tr_state;
    struct soft_device *next; /* the engine's device list */
    pthread_mutex_t lock;     /* qps[] */
    struct soft_qp **qps;     /* by qpn - 1 */
    uint32_t nqps;
    pthread_rwlock_t mr_lock; /* read: a WRITE placing bytes; write: (de)registering */
    struct soft_mr **mrs;     /* by rkey - 1 */
    uint32_t nmrs;
    _Atomic uint64_t doorbells, wrs_posted;
    _Atomic uint64_t rx_staged;      /* inec_device_stats.rx_staged_bytes */
    _Atomic uint64_t rx_pulled;      /* inec_device_stats.rx_pulled_bytes */
    _Atomic uint64_t pull_peers;     /* inec_device_stats.pull_peers */
    _Atomic uint64_t registrations;  /* inec_device_stats.registrations */
    _Atomic uint64_t control_frames; /* inec_device_stats.control_frames */
    int tick_ms; /* the transport's passes must not be further apart (0: none) */
};

/* The value of `key` in "k=v,k=v" options; false if absent. */
bool soft_opt(const char *options, const char *key, char *buf, size_t len);

void engine_wake(struct engine *eng);
/* Get an SQE of the engine's ring, submitting first if it is full. */
struct io_uring_sqe *engine_sqe(struct engine *eng);

uint64_t now_ns(void);
void soft_cq_push(struct soft_cq *cq, const struct inec_wc *wc);
/* Move a QP to the error state; its engine flushes it. */
void soft_qp_set_error(struct soft_qp *qp);
struct soft_qp *soft_qp_lookup(struct soft_device *dev, uint32_t qpn);
/* The registered range [addr, addr+len) of rkey, or NULL; call under mr_lock
 * (read), held while the bytes are placed: deregistering waits for them. */
uint8_t *soft_mr_range(struct soft_device *dev, uint32_t rkey, uint64_t addr, uint64_t len);
/* Complete the RECV at the head of qp's RQ (caller holds rq.lock). */
void soft_rq_complete(struct soft_qp *qp, enum inec_wc_status status, uint64_t byte_len,
                      enum inec_wc_opcode opcode, bool has_imm, uint32_t imm);
/* Copy a gather list into a scatter list of enough capacity. */
void soft_copy_sg(const struct inec_sge *src, int nsrc, const struct inec_sge *dst, int ndst);

static inline struct soft_device *soft_dev(struct inec_device *d)
{
    return (struct soft_device *)d;
}

static inline struct soft_qp *soft_qp(struct inec_qp *q)
{
    return (struct soft_qp *)q;
}

#endif
