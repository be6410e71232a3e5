/*
 * The tcp transport: devices in different processes, over TCP sockets driven
 * by the engine's io_uring. One connection per pair of devices carries all
 * their QPs as frames: a fixed header (struct frame), then `len` payload bytes.
 *
 * Reliable-connected semantics over a byte stream:
 *   - Receiver not ready: a QP announces how many RECVs it has posted
 *     (F_CREDIT, absolute count); a SEND or WRITE_IMM only goes out while the
 *     peer has an unused one, so a SEND always finds its RECV and the stream
 *     never stalls on one QP.
 *   - Completion: a SEND/WRITE completes when the peer has placed it
 *     (F_ACK, cumulative count of placed messages) or failed it (F_NAK with a
 *     status: RECV too small, bad rkey, unknown QP, QP in error).
 *   - Fewer control frames, each of which wakes the peer's engine: a message
 *     asks for its F_ACK at once (FR_ACK_NOW) only when the sender needs it
 *     (signaled, or no message follows it in the queue, or 16 went out
 *     without one); the others are acknowledged by that one's cumulative
 *     F_ACK (or within half a heartbeat). Credit for reposted RECVs goes out
 *     once the peer holds at most a quarter of the RQ's depth (so a peer
 *     never runs dry while RECVs wait to be announced) instead of one
 *     F_CREDIT per repost. An RPC answer of 5 fragments cost the answering
 *     engine up to 10 of those wake-ups.
 *   - A QP that goes to error tells its peer (F_NAK), which goes to error too.
 *   - A connection that fails (EOF, reset, keepalive/user timeout, or a peer
 *     silent for timeout_ms: see "failure detector" below) moves every QP
 *     using it to error and completes its unacknowledged requests with
 *     INEC_WC_REMOTE_ERR: nothing waits for a dead or hung peer.
 * Payload is gathered straight from the request's buffers by sendmsg; on the
 * receiving side small frames are parsed out of a staging buffer and large
 * payloads are read by recvmsg straight into the RECV's (or the region's)
 * memory, so big messages cost no copy beyond the kernel's. The staging
 * buffer is small (RXBUF) so that a frame's header read into it brings at
 * most that much of a large payload along: the rest goes straight into place
 * (a buffer as large as a message would stage the whole message and copy it
 * once more). A direct read in flight writes into its QP's memory outside
 * the engine's lock, so detaching that QP waits until it has ended (see
 * tcp_detach).
 * All of it runs under engine.lock: on the device's engine thread, but for
 * the connect of a posting thread and its transmit of a small chain
 * (tcp_transmit_here). Frames are in host byte order: peers share
 * an architecture. Listen on an address peers can reach: it is the device's
 * address.
 *
 * Between processes of one host large payloads are pulled instead: the
 * frame lists where they lie in the sender's memory and the receiver copies
 * them from there (tcp_pull.h).
 *
 * Every connection starts with the mutual HMAC handshake of inec/auth.h
 * (ctx "tcp", names = device addresses) under the device's cluster secret
 * (option secret=PATH, else a per-process random one): the dialer runs it
 * before the engine owns the socket, the acceptor on the engine thread,
 * which reads nothing but the handshake until the peer proved the secret
 * (the peer's address is the one it proved). A passive device (passive=1)
 * never dials: its QPs wait for the peer's authenticated connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inec/auth.h"
#include "inec/hostport.h"
#include "inec/log.h"
#include "inec/providers/soft/soft.h"
#include "inec/providers/soft/tcp_pull.h"

#define RXBUF           (16u << 10) /* staging: headers, small frames, a payload's start */
#define DIRECT_MIN      RXBUF       /* read payload left this large straight into place */
#define TX_BATCH_IOV    256
#define DEFAULT_TIMEOUT 5000
#define SUSPECT_BEATS   2 /* heartbeats without a word from the peer before suspicion */

enum frame_op {
    F_SEND = 2,
    F_WRITE,
    F_WRITE_IMM,
    F_CREDIT, /* addr: RECVs posted by src_qpn so far */
    F_ACK,    /* addr: messages of dst_qpn placed so far */
    F_NAK,    /* status: why the next message (or the QP) failed */
    F_PING,   /* nothing (but a hello): asks for an F_PONG */
    F_PONG,   /* the answer to F_PING, proves the peer's engine is alive */
};

struct frame {
    uint32_t dst_qpn, src_qpn;
    uint8_t op, has_imm;
    uint16_t status;
    uint32_t imm;
    uint32_t rkey, flags; /* FR_* */
    uint64_t len;
    uint64_t addr;
};

#define FR_ACK_NOW 1u /* acknowledge at once: the sender waits for it */
/* A message whose payload stays in the sender: a pull list of `status`
 * segments (tcp_pull.h) comes instead. */
#define FR_PULL 2u
/* The hello (tcp_pull.h). F_PING: len = a challenge; a peer of an older
 * build answers it as any ping. F_PONG: the answer, imm = the pid, addr =
 * the word of its memory that holds the challenge. */
#define FR_HELLO 4u
#define FR_PULLS 8u /* F_PONG: the answer passed, send me pulls */

struct txi {
    struct txi *next;
    struct frame hdr;
    int niov;
    struct iovec iov[SOFT_MAX_SGE];
    uint64_t pull[PULL_LIST_WORDS(SOFT_MAX_SGE)]; /* an FR_PULL frame's list */
};

enum rx_state { RX_HDR, RX_PAYLOAD };

struct tcp_conn {
    struct tcp_conn *next;
    struct soft_device *dev;
    int fd;
    char peer[128]; /* the peer device's address ("" until it proved it) */
    bool dead, started;
    bool lost_frame; /* a frame could not be queued: the stream is broken, the pass fails it */
    /* acceptor: the handshake (inec/auth.h) before anything else */
    bool authed;
    uint64_t born;    /* ns: the handshake must end within timeout_ms */
    char from_ip[64]; /* who connected, for the log */
    struct inec_auth_m1 m1;
    struct inec_auth_m2 m2;
    uint8_t key[INEC_SECRET_BYTES];
    int ops;                     /* io_uring requests in flight */
    uint64_t last_rx, last_ping; /* ns: the failure detector's clock */
    bool suspect;                /* silent for SUSPECT_BEATS heartbeats (logged once) */
    /* pulls (tcp_pull.h) */
    uint64_t challenge;      /* ours, 0 until sent */
    struct pull_word *proof; /* holds the peer's challenge, for it to read */
    bool we_pull;            /* its answer passed: we read its pulls' payloads */
    bool peer_pulls;         /* it reads ours: large messages go as pulls */
    pid_t peer_pid;
    /* receive */
    struct io_op rx_op;
    uint8_t *rxbuf;
    size_t rx_off, rx_len;
    enum rx_state state;
    struct frame cur;
    uint64_t left;         /* payload bytes of `cur` still to come */
    struct soft_qp *rx_qp; /* RECV being filled (rq head marked busy) */
    enum inec_wc_status rx_status;
    struct iovec dst[SOFT_MAX_SGE]; /* where the payload goes; niov 0 = discard */
    int ndst;
    bool rx_direct;
    struct soft_qp *rx_dst;     /* the QP `cur` is for, when its payload has a place */
    struct soft_qp *direct_for; /* whose memory the direct read in flight fills */
    uint64_t pull_list[PULL_LIST_WORDS(SOFT_MAX_SGE)]; /* of `cur`, an FR_PULL frame */
    struct iovec pull_dst[SOFT_MAX_SGE];               /* where its payload goes */
    int npull_dst;
    struct msghdr rx_msg;
    /* transmit */
    struct io_op tx_op;
    struct txi *tx_head, *tx_tail; /* queued, the first tx_batch of them in flight */
    int tx_batch;
    bool tx_resume; /* the batch's rest is the engine's to send (tcp_transmit_here) */
    struct iovec tx_iov[TX_BATCH_IOV];
    int tx_niov, tx_first;
    struct msghdr tx_msg;
};

struct tcp_dev {
    struct soft_device *dev;
    int lfd;
    int timeout_ms, heartbeat_ms;
    char secret[256]; /* the cluster secret's file, "" = this process's random one */
    bool passive;     /* never dial: QPs wait for the peer's connection */
    bool pull;        /* pulls with peers of this host (option pull, default 1) */
    struct io_op accept_op, cancel_op;
    bool accepting, closing, cancelling, leak;
    struct tcp_conn *conns;
    struct txi *free_txi;
};

static struct tcp_dev *td(struct soft_device *dev)
{
    return dev->tr_state;
}

/* ---- set-up ---------------------------------------------------------- */

/* A silent or dead peer must surface within the timeout: keepalive probes
 * for an idle connection, TCP_USER_TIMEOUT for unacknowledged data. */
static void sock_opts(int fd, int timeout_ms)
{
    int one = 1, idle = timeout_ms / 3000 > 0 ? timeout_ms / 3000 : 1, cnt = 3;
    unsigned user = (unsigned)timeout_ms;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof(user));
}

static struct tcp_conn *conn_new(struct soft_device *dev, int fd, const char *peer)
{
    struct tcp_conn *c = calloc(1, sizeof(*c));
    if (!c || !(c->rxbuf = malloc(RXBUF))) {
        free(c);
        return NULL;
    }
    c->dev = dev;
    c->fd = fd;
    c->last_rx = c->last_ping = c->born = now_ns();
    c->authed = peer[0] != '\0'; /* a dialed connection authenticated before */
    snprintf(c->peer, sizeof(c->peer), "%s", peer);
    sock_opts(fd, td(dev)->timeout_ms);
    return c;
}

static struct txi *txi_get(struct tcp_dev *t)
{
    struct txi *x = t->free_txi;
    if (x)
        t->free_txi = x->next;
    else
        x = malloc(sizeof(*x));
    if (x)
        x->next = NULL;
    return x;
}

static void txi_put(struct tcp_dev *t, struct txi *x)
{
    x->next = t->free_txi;
    t->free_txi = x;
}

static void conn_fail(struct tcp_conn *c, const char *why);

/* Callers may hold dev->lock, which conn_fail takes: a frame that cannot be
 * queued (out of memory) breaks the stream, so nothing more is queued, and
 * the engine's next pass fails the connection. The frame queued, or NULL. */
static struct txi *queue_frame(struct tcp_conn *c, const struct frame *h, const struct inec_sge *sg,
                               int nsg)
{
    if (c->dead || c->lost_frame)
        return NULL;
    struct txi *x = txi_get(td(c->dev));
    if (!x) {
        c->lost_frame = true;
        engine_wake(c->dev->eng);
        return NULL;
    }
    x->hdr = *h;
    x->niov = 0;
    for (int i = 0; i < nsg; i++)
        if (sg[i].length)
            x->iov[x->niov++] = (struct iovec){sg[i].addr, sg[i].length};
    if (c->tx_tail)
        c->tx_tail->next = x;
    else
        c->tx_head = x;
    c->tx_tail = x;
    return x;
}

/* A message whose payload the peer pulls: its list goes instead (h->status
 * = the segments). */
static void queue_pull(struct tcp_conn *c, struct frame *h, const struct pull_word *gate,
                       const struct inec_sge *sg, int nsg)
{
    uint16_t nseg = 0;
    for (int i = 0; i < nsg; i++)
        nseg += sg[i].length > 0;
    h->status = nseg;
    struct txi *x = queue_frame(c, h, NULL, 0);
    if (!x)
        return;
    x->pull[0] = pull_word_addr(gate);
    x->pull[1] = pull_word_value(gate);
    for (int i = 0, j = 2; i < nsg; i++) {
        if (sg[i].length) {
            x->pull[j++] = (uint64_t)(uintptr_t)sg[i].addr;
            x->pull[j++] = sg[i].length;
        }
    }
    x->iov[0] = (struct iovec){x->pull, PULL_LIST_WORDS(nseg) * sizeof(uint64_t)};
    x->niov = 1;
}

static void control(struct tcp_conn *c, uint8_t op, uint32_t dst, uint32_t src, uint64_t addr,
                    uint16_t status)
{
    struct frame h = {.dst_qpn = dst, .src_qpn = src, .op = op, .addr = addr, .status = status};
    if (op == F_ACK || op == F_CREDIT || op == F_NAK)
        atomic_fetch_add_explicit(&c->dev->control_frames, 1, memory_order_relaxed);
    queue_frame(c, &h, NULL, 0);
}

static bool is_msg(const struct wqe *e)
{
    return e->opcode == INEC_WR_SEND || e->opcode == INEC_WR_SEND_IMM ||
           e->opcode == INEC_WR_WRITE || e->opcode == INEC_WR_WRITE_IMM;
}

/* Complete the next `n` unacknowledged messages of qp with `status`. */
static void ack(struct soft_qp *qp, uint64_t n, enum inec_wc_status status)
{
    for (; n > 0 && qp->ack_cursor != qp->sq.head; qp->ack_cursor++) {
        struct wqe *e = &qp->sq.e[qp->ack_cursor % qp->sq.depth];
        if (!is_msg(e) || e->done)
            continue;
        e->status = status;
        e->done = true;
        qp->acked++;
        n--;
    }
}

/* Hands the unacknowledged messages back to their owner: a peer must no
 * longer pull them. */
static void fail_inflight(struct soft_qp *qp, enum inec_wc_status status)
{
    if (qp->acked < qp->pull_until)
        pull_word_move(qp->gate);
    ack(qp, UINT64_MAX, status);
}

/* ---- transmit -------------------------------------------------------- */

static void tx_submit(struct tcp_conn *c)
{
    struct io_uring_sqe *sqe = engine_sqe(c->dev->eng);
    c->tx_msg = (struct msghdr){.msg_iov = c->tx_iov + c->tx_first,
                                .msg_iovlen = (size_t)(c->tx_niov - c->tx_first)};
    io_uring_prep_sendmsg(sqe, c->fd, &c->tx_msg, MSG_NOSIGNAL | MSG_WAITALL);
    io_uring_sqe_set_data(sqe, &c->tx_op);
    c->ops++;
}

/* Gather as many queued frames as fit into one sendmsg: the batch. */
static void tx_gather(struct tcp_conn *c)
{
    int n = 0;
    for (struct txi *x = c->tx_head; x && n + 1 + x->niov <= TX_BATCH_IOV; x = x->next) {
        c->tx_iov[n++] = (struct iovec){&x->hdr, sizeof(x->hdr)};
        for (int i = 0; i < x->niov; i++)
            c->tx_iov[n++] = x->iov[i];
        c->tx_batch++;
    }
    c->tx_niov = n;
    c->tx_first = 0;
}

static void tx_kick(struct tcp_conn *c)
{
    if (c->dead)
        return;
    if (c->tx_resume) { /* a batch the posting thread began */
        c->tx_resume = false;
        tx_submit(c);
        return;
    }
    if (c->tx_batch || !c->tx_head)
        return;
    tx_gather(c);
    tx_submit(c);
}

/* `n` more bytes of the batch went out: true once all of it did (then its
 * frames are released). */
static bool tx_advance(struct tcp_conn *c, size_t n)
{
    while (c->tx_first < c->tx_niov && n >= c->tx_iov[c->tx_first].iov_len)
        n -= c->tx_iov[c->tx_first++].iov_len;
    if (c->tx_first < c->tx_niov) {
        struct iovec *v = &c->tx_iov[c->tx_first];
        v->iov_base = (uint8_t *)v->iov_base + n;
        v->iov_len -= n;
        return false;
    }
    for (; c->tx_batch > 0; c->tx_batch--) {
        struct txi *x = c->tx_head;
        c->tx_head = x->next;
        if (!c->tx_head)
            c->tx_tail = NULL;
        txi_put(td(c->dev), x);
    }
    return true;
}

static void tx_done(struct io_op *op, int res, uint32_t flags)
{
    (void)flags;
    struct tcp_conn *c = (struct tcp_conn *)((char *)op - offsetof(struct tcp_conn, tx_op));
    c->ops--;
    if (res <= 0) {
        conn_fail(c, res < 0 ? strerror(-res) : "short send");
        return;
    }
    if (!tx_advance(c, (size_t)res)) { /* short write: send the rest */
        if (!c->dead)
            tx_submit(c);
        return;
    }
    tx_kick(c);
}

/* ---- receive --------------------------------------------------------- */

static void rx_arm(struct tcp_conn *c)
{
    if (c->dead)
        return;
    struct io_uring_sqe *sqe = engine_sqe(c->dev->eng);
    if (c->rx_direct) {
        /* Straight into place, never past this frame's payload: trim the
         * destination list to `left` bytes (in place, n <= i). */
        int n = 0;
        uint64_t want = c->left;
        for (int i = 0; i < c->ndst && want; i++) {
            size_t l = c->dst[i].iov_len < want ? c->dst[i].iov_len : want;
            if (l)
                c->dst[n++] = (struct iovec){c->dst[i].iov_base, l};
            want -= l;
        }
        c->ndst = n;
        c->rx_msg = (struct msghdr){.msg_iov = c->dst, .msg_iovlen = (size_t)n};
        io_uring_prep_recvmsg(sqe, c->fd, &c->rx_msg, MSG_WAITALL);
        c->direct_for = c->rx_dst;
    } else {
        io_uring_prep_recv(sqe, c->fd, c->rxbuf + c->rx_len, RXBUF - c->rx_len, 0);
    }
    io_uring_sqe_set_data(sqe, &c->rx_op);
    c->ops++;
}

/* Move `n` payload bytes from src (NULL: already in place) to the destination. */
static void rx_place(struct tcp_conn *c, const uint8_t *src, size_t n)
{
    c->left -= n;
    while (n > 0 && c->ndst > 0) {
        size_t l = c->dst[0].iov_len < n ? c->dst[0].iov_len : n;
        if (src) {
            memcpy(c->dst[0].iov_base, src, l);
            src += l;
            if (!(c->cur.flags & FR_PULL)) /* a pull list is not payload */
                atomic_fetch_add_explicit(&c->dev->rx_staged, l, memory_order_relaxed);
        }
        c->dst[0].iov_base = (uint8_t *)c->dst[0].iov_base + l;
        c->dst[0].iov_len -= l;
        n -= l;
        if (c->dst[0].iov_len == 0) {
            memmove(c->dst, c->dst + 1, (size_t)(c->ndst - 1) * sizeof(c->dst[0]));
            c->ndst--;
        }
    }
}

/* Handles a frame header; true if payload (maybe none) follows for
 * placement (c->dst, or nowhere when c->ndst is 0). */
static bool rx_target(struct tcp_conn *c)
{
    struct soft_device *dev = c->dev;
    const struct frame *h = &c->cur;
    struct soft_qp *qp = soft_qp_lookup(dev, h->dst_qpn);
    c->ndst = 0;
    c->rx_qp = NULL;
    c->rx_dst = qp;
    c->rx_status = INEC_WC_SUCCESS;
    c->left = 0;
    switch (h->op) {
    case F_CREDIT:
        if (qp && h->addr > qp->peer_posted)
            qp->peer_posted = h->addr;
        return false;
    case F_ACK:
        if (qp && h->addr > qp->acked)
            ack(qp, h->addr - qp->acked, INEC_WC_SUCCESS);
        return false;
    case F_PING: {
        struct frame pong = {.op = F_PONG};
        if ((h->flags & FR_HELLO) && td(dev)->pull && (c->proof || (c->proof = pull_word_get()))) {
            pull_word_set(c->proof, h->len);
            pong = (struct frame){.op = F_PONG,
                                  .flags = FR_HELLO,
                                  .imm = (uint32_t)getpid(),
                                  .addr = pull_word_addr(c->proof)};
        }
        queue_frame(c, &pong, NULL, 0);
        return false;
    }
    case F_PONG:
        if ((h->flags & FR_HELLO) && c->challenge && !c->we_pull) {
            c->peer_pid = (pid_t)h->imm;
            c->we_pull = pull_peer_check(c->peer_pid, h->addr, c->challenge);
            inec_log(INEC_LOG_DEBUG, "inec", "tcp peer=%s pid=%d pulls=%d", c->peer,
                     (int)c->peer_pid, c->we_pull);
            if (c->we_pull) {
                struct frame ok = {.op = F_PONG, .flags = FR_PULLS};
                queue_frame(c, &ok, NULL, 0);
            }
        }
        if ((h->flags & FR_PULLS) && td(dev)->pull && !c->peer_pulls) {
            c->peer_pulls = true;
            atomic_fetch_add_explicit(&dev->pull_peers, 1, memory_order_relaxed);
        }
        return false;
    case F_NAK:
        if (qp) {
            ack(qp, 1, h->status ? (enum inec_wc_status)h->status : INEC_WC_REMOTE_ERR);
            qp->err_sent = true; /* the peer knows */
            soft_qp_set_error(qp);
        }
        return false;
    case F_SEND:
    case F_WRITE:
    case F_WRITE_IMM:
        break;
    default:
        conn_fail(c, "bad frame");
        return false;
    }
    c->left = h->len;
    if (!qp || qp->base.type != INEC_QP_RC || atomic_load(&qp->base.error)) {
        c->rx_status = INEC_WC_REMOTE_ERR;
        return true;
    }
    if (h->op != F_SEND) {
        pthread_rwlock_rdlock(&dev->mr_lock);
        uint8_t *p = soft_mr_range(dev, h->rkey, h->addr, h->len);
        pthread_rwlock_unlock(&dev->mr_lock);
        if (!p && h->len)
            c->rx_status = INEC_WC_PROT_ERR;
        else if (h->len)
            c->dst[c->ndst++] = (struct iovec){p, h->len};
        if (h->op == F_WRITE)
            return true;
    }
    pthread_mutex_lock(&qp->rq.lock);
    uint64_t r = atomic_load_explicit(&qp->rq.retire, memory_order_relaxed);
    if (r == atomic_load_explicit(&qp->rq.tail, memory_order_acquire)) {
        c->rx_status = INEC_WC_REMOTE_ERR; /* no credit was given: a broken peer */
        c->ndst = 0;
    } else {
        struct wqe *recv = &qp->rq.e[r % qp->rq.depth];
        recv->busy = true;
        c->rx_qp = qp;
        if (h->op == F_SEND && h->len > recv->len) {
            c->rx_status = INEC_WC_LEN_ERR;
        } else if (h->op == F_SEND) {
            for (int i = 0; i < recv->nsge; i++)
                if (recv->sge[i].length)
                    c->dst[c->ndst++] = (struct iovec){recv->sge[i].addr, recv->sge[i].length};
        }
    }
    pthread_mutex_unlock(&qp->rq.lock);
    if (c->rx_status != INEC_WC_SUCCESS)
        c->ndst = 0; /* discard the payload */
    return true;
}

/* rx_target; a pull's list then comes instead of its payload. */
static bool rx_header(struct tcp_conn *c)
{
    if (!rx_target(c))
        return false;
    if (!(c->cur.flags & FR_PULL))
        return true;
    if (c->cur.status > SOFT_MAX_SGE || !c->we_pull) {
        conn_fail(c, "a pull this side did not agree to");
        return false;
    }
    memcpy(c->pull_dst, c->dst, (size_t)c->ndst * sizeof(c->dst[0]));
    c->npull_dst = c->ndst;
    c->left = PULL_LIST_WORDS(c->cur.status) * sizeof(uint64_t);
    c->ndst = 0;
    if (c->rx_status == INEC_WC_SUCCESS)
        c->dst[c->ndst++] = (struct iovec){c->pull_list, (size_t)c->left};
    return true;
}

static void rx_payload_done(struct tcp_conn *c)
{
    const struct frame *h = &c->cur;
    struct soft_qp *qp = soft_qp_lookup(c->dev, h->dst_qpn);
    enum inec_wc_status st = c->rx_status;
    if ((h->flags & FR_PULL) && st == INEC_WC_SUCCESS) {
        if (pull_read(c->peer_pid, c->pull_dst, c->npull_dst, c->pull_list, h->status, h->len))
            atomic_fetch_add_explicit(&c->dev->rx_pulled, h->len, memory_order_relaxed);
        else /* the sender gave the memory back (its gate moved), or died */
            st = INEC_WC_REMOTE_ERR;
    }
    if (st == INEC_WC_SUCCESS && qp)
        inec_note_bytes_moved(h->len); /* before the RECV's completion says it landed */
    if (c->rx_qp) {
        struct soft_qp *rq = c->rx_qp;
        pthread_mutex_lock(&rq->rq.lock);
        rq->rq.e[atomic_load(&rq->rq.retire) % rq->rq.depth].busy = false;
        soft_rq_complete(rq, st, h->len, h->op == F_SEND ? INEC_WC_RECV : INEC_WC_RECV_WRITE_IMM,
                         h->has_imm, h->imm);
        pthread_mutex_unlock(&rq->rq.lock);
        c->rx_qp = NULL;
    }
    if (st == INEC_WC_SUCCESS && qp) {
        if (qp->placed++ == qp->acked_sent)
            qp->ack_since = now_ns();
        qp->ack_now |= (h->flags & FR_ACK_NOW) != 0;
        return;
    }
    /* Fail the sender's request and, for a QP of ours, the QP. */
    control(c, F_NAK, h->src_qpn, h->dst_qpn, 0, (uint16_t)st);
    if (qp && st != INEC_WC_REMOTE_ERR) {
        qp->err_sent = true;
        soft_qp_set_error(qp);
    }
}

/* The acceptor's side of the handshake: true once the peer proved the
 * secret (or the connection failed); false while bytes are missing. */
static bool rx_auth(struct tcp_conn *c)
{
    struct tcp_dev *t = td(c->dev);
    size_t avail = c->rx_len - c->rx_off;
    char err[256] = "";
    int rc = 0;
    if (c->m1.magic[0] == 0) {
        if (avail < sizeof(c->m1))
            return false;
        memcpy(&c->m1, c->rxbuf + c->rx_off, sizeof(c->m1));
        c->rx_off += sizeof(c->m1);
        if (c->m1.magic[0] == 0)
            c->m1.magic[0] = 1; /* garbage: fails below, never read again */
        struct inec_keyring kr;
        const uint8_t *key = NULL;
        rc = inec_keyring_get(t->secret, &kr, err, sizeof(err));
        if (!rc)
            rc = inec_auth_m2_make(&kr, "tcp", c->dev->base.addr, c->dev->base.addr, &c->m1, &c->m2,
                                   &key, err, sizeof(err));
        if (!rc)
            memcpy(c->key, key, sizeof(c->key));
        /* A fresh socket's send buffer takes these bytes at once. */
        if (!rc && send(c->fd, &c->m2, sizeof(c->m2), MSG_NOSIGNAL | MSG_DONTWAIT) !=
                       (ssize_t)sizeof(c->m2))
            rc = -EIO, snprintf(err, sizeof(err), "could not answer the handshake");
        inec_keyring_clear(&kr);
        avail = c->rx_len - c->rx_off;
    }
    if (!rc) {
        struct inec_auth_m3 m3;
        if (avail < sizeof(m3))
            return false;
        memcpy(&m3, c->rxbuf + c->rx_off, sizeof(m3));
        c->rx_off += sizeof(m3);
        rc = inec_auth_m3_check(c->key, "tcp", &c->m1, &c->m2, &m3, err, sizeof(err));
    }
    memset(c->key, 0, sizeof(c->key));
    if (rc) {
        conn_fail(c, err);
        return true;
    }
    c->authed = true;
    snprintf(c->peer, sizeof(c->peer), "%s", c->m1.from);
    inec_log(INEC_LOG_DEBUG, "inec", "tcp peer authenticated peer=%s from=%s", c->peer, c->from_ip);
    /* QPs of a passive device waiting for this peer start using it. */
    struct soft_device *dev = c->dev;
    pthread_mutex_lock(&dev->lock);
    for (uint32_t i = 0; i < dev->nqps; i++) {
        struct soft_qp *qp = dev->qps[i];
        if (qp && !qp->conn && qp->await_peer[0] && strcmp(qp->await_peer, c->peer) == 0) {
            qp->conn = c;
            qp->await_peer[0] = '\0';
        }
    }
    pthread_mutex_unlock(&dev->lock);
    return true;
}

static void rx_process(struct tcp_conn *c)
{
    if (!c->authed && (!rx_auth(c) || c->dead)) {
        if (!c->dead) { /* keep the partial message */
            size_t avail = c->rx_len - c->rx_off;
            memmove(c->rxbuf, c->rxbuf + c->rx_off, avail);
            c->rx_len = avail;
            c->rx_off = 0;
        }
        return;
    }
    for (;;) {
        size_t avail = c->rx_len - c->rx_off;
        if (c->state == RX_PAYLOAD) {
            size_t n = avail < c->left ? avail : (size_t)c->left;
            rx_place(c, c->rxbuf + c->rx_off, n);
            c->rx_off += n;
            if (c->left == 0) {
                rx_payload_done(c);
                c->state = RX_HDR;
                continue;
            }
            c->rx_off = c->rx_len = 0;
            c->rx_direct = c->left >= DIRECT_MIN && c->ndst > 0;
            return;
        }
        if (avail >= sizeof(struct frame)) {
            struct frame h;
            memcpy(&h, c->rxbuf + c->rx_off, sizeof(h));
            c->cur = h;
            c->rx_off += sizeof(h);
            if (rx_header(c))
                c->state = RX_PAYLOAD;
            if (c->dead)
                return;
            continue;
        }
        /* Need more: keep the partial frame at the start of the buffer. */
        memmove(c->rxbuf, c->rxbuf + c->rx_off, avail);
        c->rx_len = avail;
        c->rx_off = 0;
        return;
    }
}

static void rx_done(struct io_op *op, int res, uint32_t flags)
{
    (void)flags;
    struct tcp_conn *c = (struct tcp_conn *)((char *)op - offsetof(struct tcp_conn, rx_op));
    c->ops--;
    c->direct_for = NULL; /* the kernel is done with that memory */
    if (c->dead)
        return;
    if (res <= 0) {
        conn_fail(c, res < 0     ? strerror(-res)
                     : c->authed ? "closed by peer"
                                 : "closed before proving the cluster secret");
        return;
    }
    c->last_rx = now_ns();
    if (c->rx_direct) {
        c->rx_direct = false;
        rx_place(c, NULL, (size_t)res);
    } else {
        c->rx_len += (size_t)res;
    }
    rx_process(c);
    rx_arm(c);
}

static void conn_start(struct tcp_conn *c)
{
    c->rx_op.cb = rx_done;
    c->tx_op.cb = tx_done;
    c->started = true;
    rx_arm(c);
}

/* Under engine.lock. */
static void conn_fail(struct tcp_conn *c, const char *why)
{
    if (c->dead)
        return;
    c->dead = true;
    struct soft_device *dev = c->dev;
    if (!td(dev)->closing && !c->authed) /* one line per refused peer */
        inec_log(INEC_LOG_WARN, "inec", "tcp connection refused from=%s dev=%s why=%s", c->from_ip,
                 dev->base.addr, why);
    else if (!td(dev)->closing)
        inec_log(INEC_LOG_INFO, "inec", "tcp connection closed peer=%s why=%s", c->peer, why);
    shutdown(c->fd, SHUT_RDWR);
    if (c->rx_qp) {
        struct soft_qp *rq = c->rx_qp;
        pthread_mutex_lock(&rq->rq.lock);
        rq->rq.e[atomic_load(&rq->rq.retire) % rq->rq.depth].busy = false;
        soft_rq_complete(rq, INEC_WC_REMOTE_ERR, 0, INEC_WC_RECV, false, 0);
        pthread_mutex_unlock(&rq->rq.lock);
        c->rx_qp = NULL;
    }
    pthread_mutex_lock(&dev->lock);
    for (uint32_t i = 0; i < dev->nqps; i++) {
        struct soft_qp *qp = dev->qps[i];
        if (qp && qp->conn == c) {
            qp->conn = NULL;
            soft_qp_set_error(qp);
            fail_inflight(qp, INEC_WC_REMOTE_ERR);
        }
    }
    pthread_mutex_unlock(&dev->lock);
    /* Frames not yet handed to the kernel are dropped. */
    struct txi **p = &c->tx_head;
    for (int i = 0; i < c->tx_batch && *p; i++)
        p = &(*p)->next;
    while (*p) {
        struct txi *x = *p;
        *p = x->next;
        txi_put(td(dev), x);
    }
    c->tx_tail = NULL;
}

static void conn_free(struct tcp_conn *c)
{
    close(c->fd);
    pull_word_put(c->proof);
    if (c->peer_pulls)
        atomic_fetch_sub_explicit(&c->dev->pull_peers, 1, memory_order_relaxed);
    for (struct txi *x = c->tx_head, *n; x; x = n) {
        n = x->next;
        txi_put(td(c->dev), x);
    }
    free(c->rxbuf);
    free(c);
}

/* ---- accept and connect ---------------------------------------------- */

static void accept_done(struct io_op *op, int res, uint32_t flags)
{
    (void)flags;
    struct tcp_dev *t = (struct tcp_dev *)((char *)op - offsetof(struct tcp_dev, accept_op));
    t->accepting = false;
    if (res < 0) {
        if (!t->closing && res != -ECANCELED)
            inec_log(INEC_LOG_WARN, "inec", "tcp accept failed err=%s", strerror(-res));
        return;
    }
    if (t->closing) {
        close(res);
        return;
    }
    struct tcp_conn *c = conn_new(t->dev, res, "");
    if (!c) {
        close(res);
        return;
    }
    struct sockaddr_storage sa = {0};
    socklen_t sl = sizeof(sa);
    getpeername(res, (struct sockaddr *)&sa, &sl);
    inec_sockaddr_str((struct sockaddr *)&sa, true, c->from_ip, sizeof(c->from_ip));
    c->next = t->conns;
    t->conns = c;
    conn_start(c);
}

static int dial(const char *hostport, int timeout_ms, int *out)
{
    struct sockaddr_storage sa;
    socklen_t sl;
    int rc = inec_hostport_resolve(hostport, false, &sa, &sl);
    if (rc)
        return inec_fail(rc, "tcp: address '%s' is not HOST:PORT of a known host", hostport);
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return inec_fail(-errno, "tcp: socket: %s", strerror(errno));
    rc = connect(fd, (struct sockaddr *)&sa, sl) ? -errno : 0;
    if (rc == -EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t l = sizeof(err);
        rc = poll(&p, 1, timeout_ms);
        if (rc == 0)
            rc = -ETIMEDOUT;
        else if (rc < 0)
            rc = -errno;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) || err)
            rc = -(err ? err : errno);
        else
            rc = 0;
    }
    if (rc) {
        close(fd);
        return inec_fail(rc, "tcp: cannot connect to %s: %s", hostport, strerror(-rc));
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *out = fd;
    return 0;
}

static struct tcp_conn *find_conn(struct tcp_dev *t, const char *addr)
{
    for (struct tcp_conn *c = t->conns; c; c = c->next)
        if (!c->dead && strcmp(c->peer, addr) == 0)
            return c;
    return NULL;
}

/* The peer learns we are in error; what we placed before still succeeds. */
static void tell_error(struct soft_qp *qp)
{
    if (qp->placed != qp->acked_sent)
        control(qp->conn, F_ACK, qp->rqpn, qp->base.qpn, qp->placed, 0);
    qp->acked_sent = qp->placed;
    control(qp->conn, F_NAK, qp->rqpn, qp->base.qpn, 0, INEC_WC_REMOTE_ERR);
    qp->err_sent = true;
}

static int tcp_connect(struct soft_qp *qp, const char *addr, uint32_t rqpn)
{
    struct soft_device *dev = soft_dev(qp->base.dev);
    struct tcp_dev *t = td(dev);
    if (strncmp(addr, "tcp:", 4) != 0)
        return inec_fail(-EINVAL, "tcp transport: address '%s' is not tcp:HOST:PORT", addr);
    /* A connection the peer just opened to us is reused once it proved who
     * it is; wait a little for unidentified ones (one connection per pair
     * unless both sides dial at the same moment). */
    struct tcp_conn *c = NULL;
    bool connected = false, unknown = true;
    for (int i = 0; i < (t->passive ? 1 : 100) && !c && !connected && unknown; i++) {
        if (i)
            usleep(1000);
        pthread_mutex_lock(&dev->eng->lock);
        connected = qp->conn != NULL;
        c = find_conn(t, addr);
        unknown = false;
        for (struct tcp_conn *x = t->conns; x; x = x->next)
            unknown |= !x->dead && x->peer[0] == '\0';
        pthread_mutex_unlock(&dev->eng->lock);
    }
    if (connected)
        return inec_fail(-EISCONN, "qp %u is already connected", qp->base.qpn);
    if (!c && t->passive) {
        if (strlen(addr) >= sizeof(qp->await_peer))
            return inec_fail(-EINVAL, "tcp: address '%s' is too long", addr);
        pthread_mutex_lock(&dev->eng->lock);
        pthread_mutex_lock(&dev->lock);
        c = find_conn(t, addr); /* it may have come meanwhile */
        if (!c) {
            snprintf(qp->await_peer, sizeof(qp->await_peer), "%s", addr);
            qp->await_since = now_ns();
        }
        qp->conn = c;
        qp->rqpn = rqpn;
        pthread_mutex_unlock(&dev->lock);
        pthread_mutex_unlock(&dev->eng->lock);
        engine_wake(dev->eng);
        return 0;
    }
    if (!c) {
        int fd = -1;
        int rc = dial(addr + 4, t->timeout_ms, &fd);
        if (rc)
            return rc;
        /* The handshake goes first, before the engine owns the socket. */
        struct inec_keyring kr;
        char err[256], name[INEC_AUTH_NAME];
        rc = inec_keyring_get(t->secret, &kr, err, sizeof(err));
        if (!rc)
            rc = inec_auth_initiate(fd, &kr, "tcp", dev->base.addr, addr, name, t->timeout_ms, err,
                                    sizeof(err));
        inec_keyring_clear(&kr);
        if (rc) {
            close(fd);
            inec_log(INEC_LOG_WARN, "inec", "tcp connection to %s not made: %s", addr, err);
            return inec_fail(rc, "tcp: %s", err);
        }
        c = conn_new(dev, fd, addr);
        if (!c) {
            close(fd);
            return inec_fail(-ENOMEM, "tcp: out of memory");
        }
        pthread_mutex_lock(&dev->eng->lock);
        c->next = t->conns;
        t->conns = c;
        pthread_mutex_unlock(&dev->eng->lock);
    }
    pthread_mutex_lock(&dev->eng->lock);
    qp->conn = c;
    qp->rqpn = rqpn;
    pthread_mutex_unlock(&dev->eng->lock);
    engine_wake(dev->eng);
    return 0;
}

/* Is a direct read into qp's memory still in flight? Under engine.lock. */
static bool reading_into(struct tcp_dev *t, const struct soft_qp *qp)
{
    for (struct tcp_conn *c = t->conns; c; c = c->next)
        if (c->direct_for == qp)
            return true;
    return false;
}

/* A connection whose queue holds a message of qp's that a send may still
 * read (every queued frame but those of a dead connection with no request
 * in flight). */
static struct tcp_conn *sending_from(struct tcp_dev *t, const struct soft_qp *qp)
{
    for (struct tcp_conn *c = t->conns; c; c = c->next) {
        if (c->dead && c->ops == 0)
            continue;
        for (struct txi *x = c->tx_head; x; x = x->next)
            if (x->niov && x->hdr.src_qpn == qp->base.qpn)
                return c;
    }
    return NULL;
}

static void tcp_detach(struct soft_qp *qp)
{
    struct soft_device *dev = soft_dev(qp->base.dev);
    pthread_mutex_lock(&dev->eng->lock);
    struct tcp_dev *t = td(dev);
    /* In error, the receiver no longer places anything into it. */
    if (!atomic_exchange(&qp->base.error, 1) && qp->conn)
        tell_error(qp);
    for (struct tcp_conn *c = t->conns; c; c = c->next) {
        if (c->rx_qp == qp || c->rx_dst == qp) {
            c->rx_qp = NULL;
            c->rx_dst = NULL;
            c->ndst = 0;
            c->npull_dst = 0; /* a pull still to come fails */
        }
        /* The kernel fills that memory until the read ends, and the rest of
         * the message may never come (a hung peer): failing the connection
         * ends the read at once (the stream cannot resume mid-message). */
        if (c->direct_for == qp)
            conn_fail(c, "a reader closed in the middle of a message");
    }
    /* A message not all handed to the kernel still reads the QP's memory:
     * its peer stopped taking data (a frozen process) and the caller gave up
     * on it. Failing the connection drops what is queued and ends a send in
     * flight (a stream cannot skip a message). */
    struct tcp_conn *sc = sending_from(t, qp);
    if (sc)
        conn_fail(sc, "a sender closed with a message not sent");
    qp->conn = NULL;
    qp->await_peer[0] = '\0';
    /* Its messages' memory goes back to the caller: no peer may pull them. */
    pull_word_put(qp->gate);
    qp->gate = NULL;
    /* Only then may the caller free the QP's buffers: wait for the engine
     * to reap the read or the send (microseconds; bounded like tcp_fini). */
    bool busy = reading_into(t, qp) || sending_from(t, qp);
    for (uint64_t t0 = now_ns(), pause = 10; busy && now_ns() - t0 < 5000000000u;) {
        pthread_mutex_unlock(&dev->eng->lock);
        engine_wake(dev->eng);
        usleep((useconds_t)pause);
        pause = pause < 1000 ? pause * 2 : 1000;
        pthread_mutex_lock(&dev->eng->lock);
        busy = reading_into(t, qp) || sending_from(t, qp);
    }
    if (busy)
        inec_log(INEC_LOG_ERROR, "inec", "tcp qp %u: a read into it or a send from it did not end",
                 qp->base.qpn);
    pthread_mutex_unlock(&dev->eng->lock);
    engine_wake(dev->eng);
}

/* ---- failure detector ------------------------------------------------ */

/* Every heartbeat_ms each side sends F_PING, whatever the traffic, and the
 * other answers every F_PING with an F_PONG at once. So a live peer is heard
 * from within a heartbeat and a round trip whatever its own settings (its
 * timeout, its idleness), and each side judges by its own clock: silent for
 * SUSPECT_BEATS heartbeats it is suspect (logged, nothing else happens: a
 * busy machine may delay a beat), silent for timeout_ms it is dead and the
 * connection fails. Any frame from the peer clears a suspicion at once.
 * True when the connection failed. */
static bool heartbeat(struct tcp_conn *c, uint64_t now)
{
    struct tcp_dev *t = td(c->dev);
    if (c->dead || !c->started)
        return false;
    if (!c->authed) { /* no pings before the handshake, and a bound on it */
        if (now - c->born > (uint64_t)t->timeout_ms * 1000000u) {
            conn_fail(c, "no proof of the cluster secret in time");
            return true;
        }
        return false;
    }
    uint64_t beat = (uint64_t)t->heartbeat_ms * 1000000u;
    uint64_t silent = now > c->last_rx ? now - c->last_rx : 0;
    if (silent > (uint64_t)t->timeout_ms * 1000000u) {
        conn_fail(c, "peer silent");
        return true;
    }
    bool suspect = silent > SUSPECT_BEATS * beat;
    if (suspect != c->suspect && !t->closing)
        inec_log(INEC_LOG_INFO, "inec", "tcp peer=%s %s silent_ms=%llu", c->peer,
                 suspect ? "suspect" : "heard again", (unsigned long long)(silent / 1000000u));
    c->suspect = suspect;
    if (now - c->last_ping >= beat) {
        control(c, F_PING, 0, 0, 0, 0);
        c->last_ping = now;
    }
    return false;
}

/* ---- the engine's part ----------------------------------------------- */

static bool tcp_pulled(const struct soft_qp *qp, uint64_t len)
{
    return len >= PULL_MIN && qp->conn && !qp->conn->dead && qp->conn->peer_pulls;
}

static enum exec_result tcp_send(struct soft_qp *qp, struct wqe *e)
{
    struct tcp_conn *c = qp->conn;
    if (!c || c->dead) {
        e->status = INEC_WC_REMOTE_ERR;
        return EXEC_DONE;
    }
    bool consumes = e->opcode != INEC_WR_WRITE;
    if (consumes && qp->consumed == qp->peer_posted)
        return EXEC_BLOCKED; /* receiver not ready: retried when its credit arrives */
    qp->consumed += consumes;
    static const uint8_t ops[] = {[INEC_WR_SEND] = F_SEND,
                                  [INEC_WR_SEND_IMM] = F_SEND,
                                  [INEC_WR_WRITE] = F_WRITE,
                                  [INEC_WR_WRITE_IMM] = F_WRITE_IMM};
    struct frame h = {.dst_qpn = qp->rqpn,
                      .src_qpn = qp->base.qpn,
                      .op = ops[e->opcode],
                      .has_imm = e->has_imm,
                      .imm = e->imm,
                      .rkey = e->rdma.rkey,
                      .len = e->len,
                      .addr = e->rdma.remote_addr};
    if (e->opcode == INEC_WR_SEND || e->opcode == INEC_WR_SEND_IMM)
        h.rkey = 0, h.addr = 0;
    /* e is the queue's head: a message right behind it acknowledges it too
     * (ACKs are cumulative), unless 16 went without one. */
    uint64_t next = qp->sq.head + 1;
    bool followed = next != atomic_load_explicit(&qp->sq.tail, memory_order_acquire) &&
                    is_msg(&qp->sq.e[next % qp->sq.depth]);
    if ((e->flags & INEC_SIGNALED) || !followed || ++qp->unflagged >= 16) {
        h.flags = FR_ACK_NOW;
        qp->unflagged = 0;
    }
    qp->sent++;
    if (tcp_pulled(qp, e->len) && (qp->gate || (qp->gate = pull_word_get()))) {
        h.flags |= FR_PULL;
        qp->pull_until = qp->sent;
        queue_pull(c, &h, qp->gate, e->sge, e->nsge);
    } else {
        queue_frame(c, &h, e->sge, e->nsge);
    }
    return EXEC_INFLIGHT; /* done when acknowledged */
}

/*
 * The posting thread's transmit (post(), under engine.lock): what its chain
 * queued on qp's connection goes out in one non-blocking sendmsg from this
 * thread, when no sendmsg of the engine is in flight there; only the peer's
 * acknowledgement wakes this device's engine. Per small RPC over tcp that
 * saves a wake-up, two context switches, of the engine of the request's
 * sender and of the answer's. What the socket does not take (or an error,
 * which the engine's own sendmsg then meets and fails the connection on) is
 * the engine's to send: false.
 */
static bool tcp_transmit_here(struct soft_qp *qp)
{
    struct tcp_conn *c = qp->conn;
    if (!c || c->dead || !c->started || !c->authed || c->tx_batch || !c->tx_head)
        return false;
    tx_gather(c);
    struct msghdr m = {.msg_iov = c->tx_iov, .msg_iovlen = (size_t)c->tx_niov};
    ssize_t n = sendmsg(c->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (tx_advance(c, n > 0 ? (size_t)n : 0))
        return !c->tx_head;
    c->tx_resume = true;
    return false;
}

/* The engine announces reposted RECVs once the peer holds at most a quarter
 * of the RQ (tcp_pass): wake it only then, not for every repost. A
 * repost that sees more held needs no wake-up: the peer can only use them
 * up through this device's engine, whose pass after placing them sees this
 * tail (the fences: one of the two sides sees the other's store). */
static void tcp_recv_posted(struct soft_qp *qp)
{
    atomic_thread_fence(memory_order_seq_cst);
    uint64_t used = atomic_load_explicit(&qp->rq.retire, memory_order_relaxed);
    uint64_t announced = atomic_load_explicit(&qp->announced, memory_order_relaxed);
    if (announced <= used || announced - used <= qp->rq.depth / 4)
        engine_wake(soft_dev(qp->base.dev)->eng);
}

static bool tcp_pass(struct soft_device *dev)
{
    struct tcp_dev *t = td(dev);
    bool progress = false;
    pthread_mutex_lock(&dev->lock);
    uint64_t now = now_ns();
    for (uint32_t i = 0; i < dev->nqps; i++) {
        struct soft_qp *qp = dev->qps[i];
        if (qp && qp->await_peer[0] && now - qp->await_since > (uint64_t)t->timeout_ms * 1000000u) {
            inec_log(INEC_LOG_INFO, "inec", "tcp qp %u: peer %s never connected", qp->base.qpn,
                     qp->await_peer);
            qp->await_peer[0] = '\0';
            soft_qp_set_error(qp);
        }
        if (!qp || !qp->conn)
            continue;
        if (atomic_load(&qp->base.error)) {
            if (!qp->err_sent)
                tell_error(qp);
            fail_inflight(qp, INEC_WC_FLUSH_ERR);
            continue;
        }
        /* Credit once the peer is down to a quarter of the RQ (RECVs it
         * used but we have not placed yet count as held: they arrive and
         * bring it lower); an ACK when asked, along with a credit, or half
         * a heartbeat late at most. */
        atomic_thread_fence(memory_order_seq_cst); /* see tcp_recv_posted */
        uint64_t posted = atomic_load_explicit(&qp->rq.tail, memory_order_acquire);
        uint64_t used = atomic_load_explicit(&qp->rq.retire, memory_order_acquire);
        uint64_t held = qp->announced > used ? qp->announced - used : 0; /* a peer may overrun */
        bool credit = posted != qp->announced && held <= qp->rq.depth / 4;
        if (credit) {
            control(qp->conn, F_CREDIT, qp->rqpn, qp->base.qpn, posted, 0);
            qp->announced = posted;
        }
        if (qp->placed != qp->acked_sent &&
            (qp->ack_now || credit || now - qp->ack_since >= (uint64_t)t->heartbeat_ms * 500000u)) {
            control(qp->conn, F_ACK, qp->rqpn, qp->base.qpn, qp->placed, 0);
            qp->acked_sent = qp->placed;
            qp->ack_now = false;
        }
    }
    pthread_mutex_unlock(&dev->lock);
    for (struct tcp_conn **p = &t->conns; *p;) {
        struct tcp_conn *c = *p;
        if (c->dead && c->ops == 0) {
            *p = c->next;
            conn_free(c);
            progress = true;
            continue;
        }
        if (c->lost_frame && !c->dead) {
            conn_fail(c, "out of memory");
            progress = true;
        }
        if (!c->started) {
            conn_start(c);
            progress = true;
        }
        if (c->authed && !c->dead && !c->challenge && t->pull) {
            struct frame hello = {.op = F_PING, .flags = FR_HELLO, .len = pull_challenge() | 1};
            c->challenge = hello.len;
            queue_frame(c, &hello, NULL, 0);
        }
        progress |= heartbeat(c, now_ns());
        tx_kick(c);
        p = &c->next;
    }
    if (!t->accepting && !t->closing) {
        struct io_uring_sqe *sqe = engine_sqe(dev->eng);
        io_uring_prep_accept(sqe, t->lfd, NULL, NULL, SOCK_CLOEXEC);
        io_uring_sqe_set_data(sqe, &t->accept_op);
        t->accepting = true;
    } else if (t->accepting && t->closing && !t->cancelling) {
        struct io_uring_sqe *sqe = engine_sqe(dev->eng);
        io_uring_prep_cancel(sqe, &t->accept_op, 0);
        io_uring_sqe_set_data(sqe, &t->cancel_op);
        t->cancelling = true;
    }
    return progress;
}

static void cancel_done(struct io_op *op, int res, uint32_t flags)
{
    (void)res;
    (void)flags;
    ((struct tcp_dev *)((char *)op - offsetof(struct tcp_dev, cancel_op)))->cancelling = false;
}

static int tcp_init(struct soft_device *dev, const char *options)
{
    char val[128] = "127.0.0.1:0";
    soft_opt(options, "listen", val, sizeof(val));
    struct tcp_dev *t = calloc(1, sizeof(*t));
    if (!t)
        return inec_fail(-ENOMEM, "tcp: out of memory");
    t->timeout_ms = DEFAULT_TIMEOUT;
    char tmo[32];
    if (soft_opt(options, "timeout_ms", tmo, sizeof(tmo))) {
        char *end;
        long v = strtol(tmo, &end, 10);
        if (*end || v < 100 || v > 3600000) {
            free(t);
            return inec_fail(-EINVAL, "tcp: timeout_ms must be 100..3600000, not '%s'", tmo);
        }
        t->timeout_ms = (int)v;
    }
    /* Default: ten beats per timeout, at most a second apart. */
    t->heartbeat_ms = t->timeout_ms / 10 < 1000 ? t->timeout_ms / 10 : 1000;
    if (soft_opt(options, "heartbeat_ms", tmo, sizeof(tmo))) {
        char *end;
        long v = strtol(tmo, &end, 10);
        if (*end || v < 10 || v * SUSPECT_BEATS > t->timeout_ms) {
            free(t);
            return inec_fail(-EINVAL, "tcp: heartbeat_ms must be 10..timeout_ms/%d, not '%s'",
                             SUSPECT_BEATS, tmo);
        }
        t->heartbeat_ms = (int)v;
    }
    if (soft_opt(options, "secret", t->secret, sizeof(t->secret))) {
        struct inec_keyring kr;
        char err[300];
        int rc = inec_secret_load(t->secret, &kr, err, sizeof(err));
        inec_keyring_clear(&kr);
        if (rc) {
            free(t);
            return inec_fail(rc, "tcp: %s", err);
        }
    }
    char pv[8];
    t->passive = soft_opt(options, "passive", pv, sizeof(pv)) && strcmp(pv, "1") == 0;
    t->pull = !soft_opt(options, "pull", pv, sizeof(pv)) || strcmp(pv, "0") != 0;
    struct sockaddr_storage sa;
    socklen_t sl = sizeof(sa);
    t->lfd = inec_tcp_listen(val, 128);
    if (t->lfd < 0 || getsockname(t->lfd, (struct sockaddr *)&sa, &sl)) {
        int err = t->lfd < 0 ? t->lfd : -errno;
        if (t->lfd >= 0)
            close(t->lfd);
        free(t);
        return inec_fail(err, "tcp: cannot listen on %s: %s", val,
                         err == -EINVAL ? "not HOST:PORT" : strerror(-err));
    }
    char bound[INET6_ADDRSTRLEN + 8];
    inec_sockaddr_str((struct sockaddr *)&sa, true, bound, sizeof(bound));
    snprintf(dev->base.addr, sizeof(dev->base.addr), "tcp:%s", bound);
    dev->tr_state = t;
    dev->tick_ms = t->heartbeat_ms / 2; /* beats go out at most half a beat late */
    t->dev = dev;
    t->accept_op.cb = accept_done;
    t->cancel_op.cb = cancel_done;
    return 0;
}

static void tcp_fini(struct soft_device *dev)
{
    struct tcp_dev *t = td(dev);
    pthread_mutex_lock(&dev->eng->lock);
    t->closing = true; /* the engine cancels the accept: only it touches the ring */
    for (struct tcp_conn *c = t->conns; c; c = c->next)
        conn_fail(c, "device closed");
    pthread_mutex_unlock(&dev->eng->lock);
    /* The engine reaps what is in flight and frees the connections, usually
     * within microseconds: poll with a growing pause (10 us .. 1 ms), so a
     * close costs that, not a fixed millisecond; give up after 5 s. */
    bool done = false;
    for (uint64_t t0 = now_ns(), pause = 10; !done && now_ns() - t0 < 5000000000u;) {
        pthread_mutex_lock(&dev->eng->lock);
        done = !t->accepting && !t->conns && !t->cancelling;
        pthread_mutex_unlock(&dev->eng->lock);
        if (!done) {
            engine_wake(dev->eng);
            usleep((useconds_t)pause);
            pause = pause < 1000 ? pause * 2 : 1000;
        }
    }
    if (!done)
        inec_log(INEC_LOG_WARN, "inec", "tcp close: I/O still in flight, leaking its state");
    t->leak = !done;
}

/* After the device left its engine: nothing can reach `t` any more. */
static void tcp_release(struct soft_device *dev)
{
    struct tcp_dev *t = td(dev);
    close(t->lfd);
    for (struct txi *x = t->free_txi, *n; x; x = n) {
        n = x->next;
        free(x);
    }
    if (!t->leak)
        free(t);
}

const struct soft_transport soft_tcp_transport = {
    .init = tcp_init,
    .fini = tcp_fini,
    .release = tcp_release,
    .connect = tcp_connect,
    .qp_detach = tcp_detach,
    .send = tcp_send,
    .transmit_here = tcp_transmit_here,
    .pulled = tcp_pulled,
    .recv_posted = tcp_recv_posted,
    .pass = tcp_pass,
};
