/*
 * inec: the offload engine. A verbs-shaped API (devices, memory regions,
 * completion queues, queue pairs, chains of work requests) executed by a
 * provider, plus the three INEC primitives built from it.
 *
 * Objects (create in this order, destroy in reverse; *_destroy(NULL) is a no-op):
 *   device  one NIC, opened by provider name ("soft" by default).
 *   mr      registered memory; every buffer a request touches lies in one.
 *   cq      completion queue: a ring of completions plus `count`, the number of
 *           completions ever produced (monotonic, 64-bit; polling does not
 *           change it). WAIT requests compare against `count`.
 *   qp      queue pair: send queue + receive queue connected to one remote QP,
 *           or a CALC QP (no peer): the EC calculator of its device.
 *
 * Execution rules (what a WAIT chain may rely on):
 *   - Each SQ and each RQ is FIFO with one execution context; completions of
 *     one queue are produced in posting order.
 *   - WAIT{cq, count} at the head of a SQ holds that SQ only, until
 *     inec_count_reached(cq.count, count). If the CQ produced an error
 *     completion after the WAIT was posted, the WAIT fails instead
 *     (INEC_WC_DEP_ERR), so errors propagate along chains instead of letting
 *     a SEND go out with data that was never computed.
 *   - Only SIGNALED requests and errors produce completions. RECVs always do.
 *   - inec_post_send/inec_post_recv post a whole linked chain with one doorbell.
 *   - A SEND finding no posted RECV at the peer waits for one (receiver not
 *     ready); a RECV smaller than the SEND fails both with INEC_WC_LEN_ERR.
 *   - A failed request completes with an error status and moves its QP to the
 *     error state: everything after it (SQ and RQ) completes with
 *     INEC_WC_FLUSH_ERR. Posting to a QP in error is allowed and flushes.
 *     Its peer goes to error too; a peer that dies or closes completes
 *     everything waiting on it with INEC_WC_REMOTE_ERR or FLUSH_ERR.
 *   - CALC runs on the engine thread, never on the posting thread.
 *   - Any thread may post, poll or wait; posts to one queue are serialized.
 *
 * Counts. A chain is built before anything completes, so WAIT counts are
 * absolute: the builder takes inec_cq_expected(cq), the number of completions
 * that everything posted so far will produce on that CQ (signaled send-queue
 * requests plus all RECVs), right after posting the requests it waits for.
 * (After an error, flushed unsignaled requests complete too, so count may
 * pass expected; the failed WAITs report it.)
 *
 * Errors: functions return 0 (or a count) or a negative errno; inec_errmsg()
 * explains the last failure of the calling thread.
 */
#ifndef INEC_INEC_H
#define INEC_INEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct inec_device;
struct inec_mr;
struct inec_cq;
struct inec_qp;

/* Message of the last failed inec call of this thread ("" if none). */
const char *inec_errmsg(void);

/* Wrap-safe: has a monotonic counter reached `target`? */
static inline bool inec_count_reached(uint64_t count, uint64_t target)
{
    return (int64_t)(count - target) >= 0;
}

/* ---- device ---------------------------------------------------------- */

struct inec_device_attr {
    uint32_t max_qp_wr;    /* entries of one SQ or RQ (outstanding requests) */
    uint32_t max_cqe;      /* entries of one CQ ring */
    uint32_t max_chain;    /* requests in one posted chain */
    uint32_t max_wait;     /* WAIT requests in one posted chain */
    uint32_t max_sge;      /* SGEs of one request; for CALC, sources + destinations */
    uint32_t max_inline;   /* bytes of an INLINE payload */
    uint64_t max_msg_size; /* bytes of one SEND/WRITE/CALC */
};

/* Counters for tests and benchmarks. */
struct inec_device_stats {
    uint64_t doorbells;    /* posted chains */
    uint64_t wrs_posted;   /* requests in those chains */
    uint64_t engine_wakes; /* times an engine thread left its blocking sleep */
    /* Payload bytes the receiver copied out of a staging buffer instead of
     * reading them straight into the RECV's or region's memory (soft tcp;
     * 0 elsewhere). */
    uint64_t rx_staged_bytes;
    /* Payload bytes copied from the sender's memory straight into place
     * (soft tcp between processes of one host; 0 elsewhere). */
    uint64_t rx_pulled_bytes;
    /* Connections whose peer pulls this device's large payloads now (soft
     * tcp: agreed after the handshake, so a connection's first messages may
     * go through the socket). */
    uint64_t pull_peers;
    /* Acknowledgement, credit and error frames sent (soft tcp; 0 elsewhere). */
    uint64_t control_frames;
    /* Memory registrations made: every inec_mr_reg on soft; on verbs each
     * ibv_reg_mr (a window into a live registration costs none). */
    uint64_t registrations;
};

/*
 * provider: "soft" or "verbs"; NULL = "verbs" when options name a device
 * (device=NAME other than "soft"), else $INEC_PROVIDER ("soft", "verbs", or
 * "verbs:NAME" for device NAME), else "soft". A verbs device
 * asked for by NULL that cannot be opened (no RDMA device, provider not built)
 * falls back to soft with one log line; asked for by name it is an error.
 * options: comma-separated key=value, NULL ok. device=soft is dropped.
 * verbs provider options (soft's keys are ignored, so one option string
 * serves both):
 *   device=NAME         an ibv device name (default: the first one listed)
 *   port=N              its port (1)
 *   gid_index=N         the GID table entry to use (0)
 * soft provider options:
 *   transport=mem|tcp   mem (default): devices of this process;
 *                       tcp: devices in other processes over TCP + io_uring
 *   listen=HOST:PORT    tcp: address to accept connections on (port 0 = any)
 *   engine_threads=N    share a process-wide pool of N engine threads instead
 *                       of one engine thread per device
 *   timeout_ms=N        tcp: a silent peer is declared dead after N ms (5000)
 *   heartbeat_ms=N      tcp: each side pings every N ms whatever the traffic and
 *                       the peer answers at once; silent for 2 beats: suspect
 *                       (logged), for timeout_ms: dead (min(timeout/10, 1000))
 *   secret=PATH         tcp: the cluster secret file (inec/auth.h) every
 *                       connection proves in both directions before any frame;
 *                       without it, a random secret of this process
 *   passive=1           tcp: never dial; a QP waits (timeout_ms) for its peer's
 *                       authenticated connection (a node's RPC device)
 *   spin=0|1            1 (default): an idle engine, and a thread waiting on a
 *                       CQ, polls a few us before it sleeps (a wake-up costs
 *                       more); 0: they sleep at once, for machines with more
 *                       engines than cores
 */
int inec_device_open(const char *provider, const char *options, struct inec_device **out);
void inec_device_close(struct inec_device *dev);
void inec_device_query(const struct inec_device *dev, struct inec_device_attr *attr);
/* What `inec devices` shows: every device a provider built into this binary
 * sees, and how much of a chain it runs without a host step. */
enum inec_offload {
    INEC_OFFLOAD_NONE,      /* the host advances every WAIT and runs every CALC */
    INEC_OFFLOAD_WAIT,      /* WAITs trigger in the device; CALC on the host */
    INEC_OFFLOAD_WAIT_CALC, /* WAIT and CALC both run without the posting host */
};
const char *inec_offload_str(enum inec_offload offload);

struct inec_device_info {
    char provider[16];  /* "soft", "verbs" */
    char name[64];      /* what device=NAME selects: "soft", "mlx5_0" */
    char transport[48]; /* "software", "InfiniBand", "Ethernet (RoCE)" */
    char state[24];     /* port state */
    uint32_t max_sge;
    uint32_t max_inline;
    uint32_t max_qp_wr;
    bool atomics;       /* RDMA atomics */
    bool cross_channel; /* a WAIT can be a device work request (CORE-Direct) */
    bool ec_offload;    /* an EC calculation engine reachable through this stack */
    enum inec_offload offload;
    char note[320]; /* why, in plain words */
};
/* Fills up to max entries; returns how many devices there are (may be > max). */
int inec_devices(struct inec_device_info *out, int max);
/* Is the provider of this name built into this binary? */
bool inec_provider_built(const char *name);

/* Address that inec_qp_connect() of other devices uses to reach this one:
 * "mem:N" or "tcp:HOST:PORT". */
const char *inec_device_addr(const struct inec_device *dev);
void inec_device_stats(const struct inec_device *dev, struct inec_device_stats *stats);
/* Payload bytes of SEND/WRITE requests delivered from one device to another
 * in this process since it started: process-wide, all devices, counted once
 * where the payload lands (the receiving device; on the mem transport the
 * sender's engine delivers). Failed deliveries and CALCs (local) do not count.
 * The soft provider counts; verbs does not (its NIC moves the bytes): 0. For
 * benchmarks: take the difference around a job (relaxed, so approximate while
 * transfers run). */
uint64_t inec_bytes_moved(void);

/* ---- memory ---------------------------------------------------------- */

int inec_mr_reg(struct inec_device *dev, void *addr, size_t len, struct inec_mr **out);
void inec_mr_dereg(struct inec_mr *mr);
/* Key a remote peer names this region by in WRITE requests. */
uint32_t inec_mr_rkey(const struct inec_mr *mr);

/* A buffer: addr .. addr+length inside mr (mr may be NULL when length is 0). */
struct inec_sge {
    void *addr;
    size_t length;
    struct inec_mr *mr;
};

/* ---- completion queue ------------------------------------------------ */

enum inec_wc_status {
    INEC_WC_SUCCESS = 0,
    INEC_WC_LEN_ERR,    /* RECV smaller than the SEND (both sides) */
    INEC_WC_PROT_ERR,   /* WRITE outside the remote region, unknown rkey */
    INEC_WC_FLUSH_ERR,  /* flushed: the QP went to error before this ran */
    INEC_WC_DEP_ERR,    /* a WAIT saw an error completion on its CQ */
    INEC_WC_REMOTE_ERR, /* the peer is gone or failed the request */
};
const char *inec_wc_status_str(enum inec_wc_status status);

enum inec_wc_opcode {
    INEC_WC_SEND,
    INEC_WC_WRITE,
    INEC_WC_RECV,
    INEC_WC_RECV_WRITE_IMM, /* a RECV consumed by a peer's WRITE_IMM */
    INEC_WC_WAIT,
    INEC_WC_CALC,
    INEC_WC_NOP,
};

struct inec_wc {
    uint64_t wr_id;
    enum inec_wc_status status;
    enum inec_wc_opcode opcode;
    uint32_t qp_num;
    uint32_t byte_len; /* RECV: bytes received */
    uint32_t imm;      /* RECV of SEND_IMM / WRITE_IMM */
    bool has_imm;
    int32_t tid; /* thread that executed the request (diagnostics) */
};

/* A ring of `depth` completions (0 = max_cqe). When the ring is full the
 * oldest entry is overwritten, so a CQ used only as a WAIT trigger need never
 * be polled; `count` stays exact. */
int inec_cq_create(struct inec_device *dev, uint32_t depth, struct inec_cq **out);
void inec_cq_destroy(struct inec_cq *cq);
/* Completions produced so far (successes and errors). */
uint64_t inec_cq_count(const struct inec_cq *cq);
/* Error completions produced so far. */
uint64_t inec_cq_errors(const struct inec_cq *cq);
/* Completions that everything posted so far will produce; see "Counts". */
uint64_t inec_cq_expected(const struct inec_cq *cq);
/* Take up to n completions; returns how many (0 if none). */
int inec_poll_cq(struct inec_cq *cq, int n, struct inec_wc *wc);
/* As inec_poll_cq, sleeping (not spinning) until at least one completion is
 * there; -ETIMEDOUT after timeout_ms (< 0: no bound). */
int inec_cq_wait(struct inec_cq *cq, int n, struct inec_wc *wc, int timeout_ms);
/* Sleep until inec_count_reached(count, target); -ETIMEDOUT after timeout_ms.
 * Errors count too: compare inec_cq_errors() before and after. */
int inec_cq_wait_count(struct inec_cq *cq, uint64_t target, int timeout_ms);
/* Sleep until one of n CQs (of one provider, at most INEC_WAIT_ANY_MAX)
 * holds a completion, and return its index (verbs: CQs sharing a completion
 * channel); -ETIMEDOUT after timeout_ms (< 0: no bound). Takes none: poll
 * that CQ. So one thread can wait for requests out on several QPs. */
#define INEC_WAIT_ANY_MAX 64
int inec_cq_wait_any(struct inec_cq *const *cqs, int n, int timeout_ms);
/* Asks the provider's progress thread to call fn(arg) right after it added
 * completions to cq, with none of its own locks held, instead of waking the
 * threads waiting on cq: a consumer whose work per completion is short does
 * it there and saves a thread switch per message (the soft provider's tcp
 * engine). fn polls cq itself; it may post, but must not block, wait on a CQ
 * or destroy a QP, CQ or device. Completions made on other threads (a
 * posting thread on mem, a QP's teardown) still wake waiters, so a consumer
 * keeps waiting on cq as before and serialises its polls with fn. fn NULL
 * turns it off and returns once no call is running; inec_cq_destroy does so
 * too. -EOPNOTSUPP where completions have no progress thread (verbs). */
int inec_cq_set_notify(struct inec_cq *cq, void (*fn)(void *arg), void *arg);

/* ---- queue pair ------------------------------------------------------ */

enum inec_qp_type {
    INEC_QP_RC,   /* reliable connected: SEND/WRITE/RECV/WAIT/NOP */
    INEC_QP_CALC, /* the calculator: CALC/WAIT/NOP, no peer, no RQ */
};

struct inec_qp_attr {
    enum inec_qp_type type;
    struct inec_cq *send_cq;
    struct inec_cq *recv_cq; /* RC only */
    uint32_t sq_depth;       /* 0 = 256 */
    uint32_t rq_depth;       /* 0 = 256 */
};

int inec_qp_create(struct inec_device *dev, const struct inec_qp_attr *attr, struct inec_qp **out);
void inec_qp_destroy(struct inec_qp *qp);
uint32_t inec_qp_num(const struct inec_qp *qp);
/* Connect an RC QP to QP `remote_qpn` of the device at `addr` (its
 * inec_device_addr()). Both sides connect, each naming the other; the caller
 * exchanges QP numbers (as in verbs). mem: the
 * remote QP must exist already; tcp: the first connect to a device opens its
 * connection (shared by all QPs of the pair), later ones reuse it. */
int inec_qp_connect(struct inec_qp *qp, const char *addr, uint32_t remote_qpn);
/* True once the QP is in the error state. */
bool inec_qp_in_error(const struct inec_qp *qp);

/* ---- work requests --------------------------------------------------- */

enum inec_wr_opcode {
    INEC_WR_SEND,
    INEC_WR_SEND_IMM,
    INEC_WR_WRITE,
    INEC_WR_WRITE_IMM, /* WRITE that also consumes a RECV carrying imm */
    INEC_WR_RECV,      /* inec_post_recv only */
    INEC_WR_WAIT,
    INEC_WR_CALC,
    INEC_WR_NOP,
};

enum inec_wr_flags {
    INEC_SIGNALED = 1 << 0,
    INEC_INLINE = 1 << 1, /* payload copied at post time: buffer reusable at once */
};

enum inec_calc_kind {
    INEC_CALC_EC,  /* dsts = GF matrix x srcs (codec_gf_encode) */
    INEC_CALC_XOR, /* dsts[0] = srcs[0] ^ srcs[1] ^ ... */
};

struct inec_wr {
    struct inec_wr *next; /* the chain */
    uint64_t wr_id;
    enum inec_wr_opcode opcode;
    unsigned flags;
    /* SEND/WRITE: gathered payload; RECV: scattered buffer; CALC: sources. */
    struct inec_sge *sg_list;
    int num_sge;
    uint32_t imm;
    union {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
        } rdma;
        struct {
            struct inec_cq *cq; /* a CQ of the same device */
            uint64_t count;     /* absolute */
        } wait;
        struct {
            enum inec_calc_kind kind;
            /* EC: codec_gf_init_tables(ndst, num_sge, coeffs) output; must
             * live until the CALC completes. */
            const uint8_t *tables;
            struct inec_sge *dsts; /* every src and dst has the same length */
            int ndst;
        } calc;
    };
};

/* Post a chain with one doorbell. All or nothing: on error nothing is posted,
 * *bad_wr (may be NULL) names the offending request, inec_errmsg() says why:
 * -EINVAL bad request or limit (chain, WAITs, SGEs, size), -ENOMEM queue full. */
int inec_post_send(struct inec_qp *qp, struct inec_wr *chain, struct inec_wr **bad_wr);
int inec_post_recv(struct inec_qp *qp, struct inec_wr *chain, struct inec_wr **bad_wr);

/* ---- the INEC primitives (INEC paper, Listing 1) ----------------------
 *
 * Each builds WAIT chains and posts them; the engine runs them with no host
 * CPU in the loop. With INEC_PRIM_INCOHERENT in calc->flags the same chains
 * are advanced by the calling thread instead (the paper's baseline): it
 * performs every WAIT itself (sleeping on the CQ), posts each other request
 * with its own doorbell, and returns once the last one is posted.
 *
 * The caller's part:
 *   - One CALC QP per device (calc->qp); its send CQ counts calculations.
 *   - RECVs: for every input a peer sends, post a RECV (on the QP from that
 *     peer, into the buffer the calculation reads) before or while the peer
 *     sends; then wait->counts[i] = inec_cq_expected(wait->cqs[i]).
 *     One CQ may gather several inputs (count them all) or one CQ per input.
 *   - Outputs are ready when calc->qp's send CQ reaches the count this call
 *     stored in calc->done_count (the CALC is always signaled, wr_id
 *     calc->wr_id); sends complete on their QP's send CQ if send_flags say so.
 *   - Slices (ECPipe): any sge may be a sub-range of a registered buffer, so
 *     a chunk is processed slice by slice with one primitive call per slice.
 *   - Partial results (PPR, ECPipe, TriEC): a received partial is one more
 *     input with coefficient 1 (EC) or simply an input (XOR).
 *   - Descriptors are read during the call only; buffers and tables must
 *     live until the requests complete.
 */

enum inec_prim_flags {
    INEC_PRIM_INCOHERENT = 1 << 0,
};

struct inec_calc_desc {
    struct inec_qp *qp; /* the calculator (INEC_QP_CALC) */
    enum inec_calc_kind kind;
    const uint8_t *tables; /* EC: codec_gf_init_tables(mem->nout, mem->nin, ...) */
    uint64_t wr_id;
    unsigned flags;      /* enum inec_prim_flags */
    int timeout_ms;      /* incoherent form: bound of each host wait (0 = 30 s) */
    uint64_t done_count; /* out: calc->qp's send CQ count once the CALC is done */
};

struct inec_mem_desc {
    struct inec_sge *in; /* calculation inputs: local chunks, received buffers */
    int nin;
    struct inec_sge *out; /* calculation outputs */
    int nout;
};

enum inec_stripe_flags {
    INEC_STRIPE_NOWAIT = 1 << 0, /* does not depend on the CALC: send at once */
};

struct inec_stripe_send {
    struct inec_qp *qp;  /* RC QP to the destination */
    struct inec_sge buf; /* usually one of mem->out, or a local data chunk */
    uint64_t wr_id;
    unsigned send_flags; /* INEC_SIGNALED to learn when buf may be reused */
    unsigned flags;      /* enum inec_stripe_flags */
    bool has_imm;
    uint32_t imm;
};

struct inec_stripe_desc {
    struct inec_stripe_send *sends;
    int n;
};

struct inec_wait_desc {
    struct inec_cq **cqs; /* CQs of calc->qp's device */
    uint64_t *counts;     /* absolute, see "Counts" */
    int n;
};

/* CALC, then on each stripe QP WAIT(calc CQ) + SEND. */
int inec_ec_send(struct inec_calc_desc *calc, struct inec_mem_desc *mem,
                 struct inec_stripe_desc *stripe);
/* On the calculator one WAIT per input CQ, then CALC; then as inec_ec_send. */
int inec_recv_ec_send(struct inec_wait_desc *wait, struct inec_calc_desc *calc,
                      struct inec_mem_desc *mem, struct inec_stripe_desc *stripe);
/* On the calculator the WAITs, then CALC, signaled to the caller. */
int inec_recv_ec(struct inec_wait_desc *wait, struct inec_calc_desc *calc,
                 struct inec_mem_desc *mem);

#endif
