/*
 * RPC endpoints over inec RC QPs: fragmentation, reassembly, RECV buffers.
 *
 * Completions carry no pointers: a RECV's wr_id is (endpoint serial << 8 |
 * buffer) and a send's is a serial looked up among the endpoint's pending
 * sends, so a completion that outlives its endpoint (a shared CQ still holds
 * it when a broken connection is closed and its QP number reused) is
 * recognised and ignored.
 */
#include "node/rpc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "node/client.h"

#define RPC_MAGIC     0x50524e49u /* "INRP" */
#define RPC_HDR_BYTES 32
#define FRAG_PAYLOAD  (NODE_RPC_FRAG - RPC_HDR_BYTES)
#define CHAIN_MAX     128
/* Send buffers registered once per endpoint: a message whose headers, head
 * and data fit in one is copied there, a larger one's headers and head go in
 * one while its data is sent in place. So an RPC costs no registration (on
 * verbs ibv_reg_mr is a system call that pins pages); only data outside
 * every registered pool does (verbs.c), and messages sent while all 16
 * slots are in flight. */
#define SLOTS      16
#define SLOT_BYTES 4096

struct rpc_out {
    struct rpc_out *next;
    uint64_t serial;
    int slot;      /* the endpoint's send buffer holding meta, or -1: meta is its own */
    uint8_t *meta; /* fragment headers, then the head (then the data, in a slot) */
    struct inec_mr *meta_mr, *data_mr; /* registered for this send only (NULL: none) */
    void (*done)(void *arg);
    void *arg;
};

struct rpc_ep {
    struct inec_device *dev;
    struct inec_qp *qp;
    uint64_t serial;
    uint8_t *rbuf;
    struct inec_mr *rmr;
    uint8_t *sbuf; /* SLOTS send buffers of SLOT_BYTES */
    struct inec_mr *smr;
    pthread_mutex_t lock; /* pending sends, free slots */
    struct rpc_out *pending;
    uint32_t free_slots; /* bit i: slot i is free */
    bool broken;
    struct rpc_rx rx; /* reassembly (one completing thread at a time) */
};

static _Atomic uint64_t serials = 1;

static void hdr_encode(uint8_t *p, const struct rpc_msg *m, uint32_t total, uint32_t offset)
{
    memset(p, 0, RPC_HDR_BYTES);
    uint32_t v[2] = {RPC_MAGIC, (uint32_t)m->type | (uint32_t)m->flags << 16};
    memcpy(p, v, 8);
    rpc_put64(p + 8, m->req_id);
    rpc_put64(p + 16, (uint64_t)total | (uint64_t)offset << 32);
    rpc_put64(p + 24, (uint32_t)m->status);
}

static int hdr_decode(const uint8_t *p, struct rpc_msg *m, uint32_t *total, uint32_t *offset)
{
    uint32_t v[2];
    memcpy(v, p, 8);
    if (v[0] != RPC_MAGIC)
        return -EPROTO;
    m->type = (uint16_t)v[1];
    m->flags = (uint16_t)(v[1] >> 16);
    m->req_id = rpc_get64(p + 8);
    uint64_t to = rpc_get64(p + 16);
    *total = (uint32_t)to;
    *offset = (uint32_t)(to >> 32);
    m->status = (int32_t)(uint32_t)rpc_get64(p + 24);
    return 0;
}

static int post_recv(struct rpc_ep *ep, int i)
{
    struct inec_sge sge = {ep->rbuf + (size_t)i * NODE_RPC_FRAG, NODE_RPC_FRAG, ep->rmr};
    struct inec_wr wr = {.wr_id = ep->serial << 8 | (uint64_t)i,
                         .opcode = INEC_WR_RECV,
                         .sg_list = &sge,
                         .num_sge = 1};
    return inec_post_recv(ep->qp, &wr, NULL);
}

int rpc_ep_open(struct inec_device *dev, struct inec_cq *send_cq, struct inec_cq *recv_cq,
                struct rpc_ep **out)
{
    struct rpc_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return -ENOMEM;
    ep->dev = dev;
    ep->serial = atomic_fetch_add(&serials, 1) & ((1ull << 56) - 1);
    pthread_mutex_init(&ep->lock, NULL);
    struct inec_qp_attr qa = {.type = INEC_QP_RC,
                              .send_cq = send_cq,
                              .recv_cq = recv_cq,
                              .sq_depth = 1024,
                              .rq_depth = RPC_RECVS};
    int rc = -ENOMEM;
    if (!(ep->rbuf = malloc((size_t)RPC_RECVS * NODE_RPC_FRAG)))
        goto fail;
    if ((rc = inec_mr_reg(dev, ep->rbuf, (size_t)RPC_RECVS * NODE_RPC_FRAG, &ep->rmr)))
        goto fail;
    rc = -ENOMEM;
    if (!(ep->sbuf = malloc((size_t)SLOTS * SLOT_BYTES)))
        goto fail;
    if ((rc = inec_mr_reg(dev, ep->sbuf, (size_t)SLOTS * SLOT_BYTES, &ep->smr)))
        goto fail;
    ep->free_slots = (uint32_t)((1ull << SLOTS) - 1);
    if ((rc = inec_qp_create(dev, &qa, &ep->qp)))
        goto fail;
    for (int i = 0; i < RPC_RECVS && rc == 0; i++)
        rc = post_recv(ep, i);
    if (rc)
        goto fail;
    *out = ep;
    return 0;
fail:
    rpc_ep_close(ep);
    return rc;
}

/* Frees a send whose slot (if any) the endpoint has back. */
static void out_free(struct rpc_out *o)
{
    inec_mr_dereg(o->data_mr);
    if (o->slot < 0) {
        inec_mr_dereg(o->meta_mr);
        free(o->meta);
    }
    if (o->done)
        o->done(o->arg);
    free(o);
}

void rpc_ep_close(struct rpc_ep *ep)
{
    if (!ep)
        return;
    inec_qp_destroy(ep->qp); /* after this the engine touches none of our buffers */
    for (struct rpc_out *o = ep->pending, *n; o; o = n) {
        n = o->next;
        out_free(o);
    }
    inec_mr_dereg(ep->rmr);
    free(ep->rbuf);
    inec_mr_dereg(ep->smr);
    free(ep->sbuf);
    rpc_rx_clear(&ep->rx);
    pthread_mutex_destroy(&ep->lock);
    free(ep);
}

int rpc_ep_connect(struct rpc_ep *ep, const char *addr, uint32_t qpn)
{
    return inec_qp_connect(ep->qp, addr, qpn);
}

uint32_t rpc_ep_qpn(const struct rpc_ep *ep)
{
    return inec_qp_num(ep->qp);
}

bool rpc_ep_broken(const struct rpc_ep *ep)
{
    return ep->broken || inec_qp_in_error(ep->qp);
}

bool rpc_ep_sending_in_place(struct rpc_ep *ep)
{
    pthread_mutex_lock(&ep->lock);
    const struct rpc_out *o = ep->pending;
    while (o && !o->data_mr)
        o = o->next;
    pthread_mutex_unlock(&ep->lock);
    return o != NULL;
}

bool rpc_ep_owns(const struct rpc_ep *ep, const struct inec_wc *wc)
{
    if (wc->qp_num != inec_qp_num(ep->qp))
        return false;
    if (wc->opcode == INEC_WC_RECV)
        return wc->wr_id >> 8 == ep->serial;
    return true; /* sends: matched by serial in rpc_ep_complete */
}

static void send_done(struct rpc_ep *ep, uint64_t serial)
{
    pthread_mutex_lock(&ep->lock);
    struct rpc_out **pp = &ep->pending;
    while (*pp && (*pp)->serial != serial)
        pp = &(*pp)->next;
    struct rpc_out *o = *pp;
    if (o) {
        *pp = o->next;
        if (o->slot >= 0)
            ep->free_slots |= 1u << o->slot;
    }
    pthread_mutex_unlock(&ep->lock);
    if (o)
        out_free(o);
}

int rpc_rx_feed(struct rpc_rx *rx, const uint8_t *p, size_t len, struct rpc_msg *msg)
{
    struct rpc_msg h;
    uint32_t total, offset;
    if (len < RPC_HDR_BYTES || hdr_decode(p, &h, &total, &offset) ||
        offset + (uint64_t)(len - RPC_HDR_BYTES) > total) {
        rx->receiving = rx->skipping = false; /* garbage: drop it and what it belonged to */
        return 0;
    }
    size_t flen = len - RPC_HDR_BYTES;
    if (offset == 0) {
        free(rx->msg.data);
        rx->msg = h;
        rx->msg.data = NULL;
        rx->msg.len = total;
        rx->got = 0;
        rx->receiving = true;
        rx->skipping = total > NODE_RPC_MAX_MSG;
        if (rx->skipping) {
            *msg = h;
            msg->data = NULL;
            msg->len = total;
            return -EMSGSIZE;
        }
        if (total && !(rx->msg.data = malloc(total))) {
            rx->skipping = true; /* the sender learns it by timeout; the node lives on */
            return 0;
        }
    } else if (!rx->receiving || rx->skipping || h.req_id != rx->msg.req_id || offset != rx->got ||
               total != rx->msg.len) {
        /* total too: the buffer was sized by the first fragment's, and a later
         * one claiming more would write past it */
        return 0;
    }
    if (flen)
        memcpy(rx->msg.data + offset, p + RPC_HDR_BYTES, flen);
    rx->got += flen;
    if (rx->got < rx->msg.len)
        return 0;
    *msg = rx->msg;
    rx->msg.data = NULL;
    rx->receiving = false;
    return 1;
}

void rpc_rx_clear(struct rpc_rx *rx)
{
    free(rx->msg.data);
    *rx = (struct rpc_rx){0};
}

int rpc_ep_complete(struct rpc_ep *ep, const struct inec_wc *wc, struct rpc_msg *msg)
{
    if (wc->opcode != INEC_WC_RECV) {
        if (wc->wr_id)
            send_done(ep, wc->wr_id);
        if (wc->status != INEC_WC_SUCCESS) {
            ep->broken = true;
            return -EHOSTDOWN;
        }
        return 0;
    }
    if (wc->status != INEC_WC_SUCCESS) {
        ep->broken = true;
        return -EHOSTDOWN;
    }
    int i = (int)(wc->wr_id & 0xff);
    int rc = rpc_rx_feed(&ep->rx, ep->rbuf + (size_t)i * NODE_RPC_FRAG, wc->byte_len, msg);
    if (post_recv(ep, i))
        ep->broken = true;
    return rc;
}

/* rpc_ep_send, and with `to` rpc_ep_send_write: the data then goes ahead
 * of the message as one WRITE, and the message carries the head alone. */
static int ep_send(struct rpc_ep *ep, const struct rpc_msg *hdr, const void *head, size_t hlen,
                   const void *data, size_t dlen, const struct rpc_write_to *to,
                   void (*done)(void *arg), void *arg)
{
    size_t total = hlen + (to ? 0 : dlen);
    if (total > NODE_RPC_MAX_MSG)
        return -EMSGSIZE;
    size_t nfrag = total ? (total + FRAG_PAYLOAD - 1) / FRAG_PAYLOAD : 1;
    size_t hdrs = nfrag * RPC_HDR_BYTES;
    struct rpc_out *o = calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;
    o->slot = -1;
    bool copy = hdrs + hlen + dlen <= SLOT_BYTES; /* the data too */
    if (hdrs + hlen <= SLOT_BYTES) {
        pthread_mutex_lock(&ep->lock);
        if (ep->free_slots) {
            o->slot = __builtin_ctz(ep->free_slots);
            ep->free_slots &= ~(1u << o->slot);
        }
        pthread_mutex_unlock(&ep->lock);
    }
    int rc = 0;
    const uint8_t *dp = data;
    struct inec_mr *dmr = NULL;
    if (o->slot >= 0) {
        o->meta = ep->sbuf + (size_t)o->slot * SLOT_BYTES;
        o->meta_mr = ep->smr;
        if (copy && dlen) {
            memcpy(o->meta + hdrs + hlen, data, dlen);
            dp = o->meta + hdrs + hlen;
            dmr = ep->smr;
        }
    } else if (!(o->meta = malloc(hdrs + hlen + 1))) {
        free(o);
        return -ENOMEM;
    } else if ((rc = inec_mr_reg(ep->dev, o->meta, hdrs + hlen + 1, &o->meta_mr))) {
        goto fail;
    }
    o->serial = atomic_fetch_add(&serials, 1);
    if (hlen)
        memcpy(o->meta + hdrs, head, hlen);
    if (dlen && !dmr && (rc = inec_mr_reg(ep->dev, (void *)data, dlen, &o->data_mr)))
        goto fail;
    dmr = dmr ? dmr : o->data_mr;
    o->done = done;
    o->arg = arg;
    pthread_mutex_lock(&ep->lock);
    o->next = ep->pending;
    ep->pending = o;
    struct inec_wr wr[CHAIN_MAX];
    struct inec_sge sge[CHAIN_MAX][3];
    size_t f = 0, n = 0;
    int chains = 0;
    if (to && dlen) { /* RC order: it has landed when the message arrives */
        sge[0][0] = (struct inec_sge){(uint8_t *)dp, dlen, dmr};
        wr[n++] = (struct inec_wr){
            .opcode = INEC_WR_WRITE, .sg_list = sge[0], .num_sge = 1, .rdma = {to->addr, to->rkey}};
    }
    rc = 0;
    while (f < nfrag && rc == 0) {
        for (; n < CHAIN_MAX && f < nfrag; n++, f++) {
            size_t off = f * FRAG_PAYLOAD,
                   end = off + FRAG_PAYLOAD < total ? off + FRAG_PAYLOAD : total;
            uint8_t *h = o->meta + f * RPC_HDR_BYTES;
            hdr_encode(h, hdr, (uint32_t)total, (uint32_t)off);
            int ns = 0;
            sge[n][ns++] = (struct inec_sge){h, RPC_HDR_BYTES, o->meta_mr};
            if (off < hlen)
                sge[n][ns++] = (struct inec_sge){o->meta + hdrs + off,
                                                 (end < hlen ? end : hlen) - off, o->meta_mr};
            if (end > hlen) {
                size_t d0 = off > hlen ? off - hlen : 0;
                sge[n][ns++] = (struct inec_sge){(uint8_t *)dp + d0, end - hlen - d0, dmr};
            }
            bool last = f + 1 == nfrag;
            wr[n] = (struct inec_wr){.wr_id = last ? o->serial : 0,
                                     .opcode = INEC_WR_SEND,
                                     .flags = last ? INEC_SIGNALED : 0,
                                     .sg_list = sge[n],
                                     .num_sge = ns};
            if (n)
                wr[n - 1].next = &wr[n];
        }
        rc = inec_post_send(ep->qp, wr, NULL);
        chains += rc == 0;
        n = 0;
    }
    if (rc && chains == 0) { /* nothing posted: take it back */
        ep->pending = o->next;
        pthread_mutex_unlock(&ep->lock);
        goto fail;
    }
    /* A failure after some chains were posted breaks the connection: the
     * receiver drops the partial message and rpc_ep_close frees this send
     * (calling done then), so to the caller it is a send that will fail. */
    if (rc)
        ep->broken = true;
    pthread_mutex_unlock(&ep->lock);
    return 0;
fail:
    if (o->slot >= 0) {
        pthread_mutex_lock(&ep->lock);
        ep->free_slots |= 1u << o->slot;
        pthread_mutex_unlock(&ep->lock);
    }
    o->done = NULL;
    out_free(o);
    return rc;
}

int rpc_ep_send(struct rpc_ep *ep, const struct rpc_msg *hdr, const void *head, size_t hlen,
                const void *data, size_t dlen, void (*done)(void *arg), void *arg)
{
    return ep_send(ep, hdr, head, hlen, data, dlen, NULL, done, arg);
}

int rpc_ep_send_write(struct rpc_ep *ep, const struct rpc_msg *hdr, const void *head, size_t hlen,
                      const void *data, size_t dlen, const struct rpc_write_to *to,
                      void (*done)(void *arg), void *arg)
{
    return ep_send(ep, hdr, head, hlen, data, dlen, to, done, arg);
}

void rpc_chunk_head_encode(uint8_t *p, const struct node_chunk_id *id, uint64_t version)
{
    memcpy(p, id->object, NODE_OBJECT_ID_BYTES);
    rpc_put64(p + 16, id->stripe);
    rpc_put64(p + 24, version);
    uint8_t idx[8];
    rpc_put64(idx, id->index);
    memcpy(p + 32, idx, 4);
}

void rpc_chunk_head_decode(const uint8_t *p, struct node_chunk_id *id, uint64_t *version)
{
    memcpy(id->object, p, NODE_OBJECT_ID_BYTES);
    id->stripe = rpc_get64(p + 16);
    *version = rpc_get64(p + 24);
    uint8_t idx[8] = {0};
    memcpy(idx, p + 32, 4);
    id->index = (uint32_t)rpc_get64(idx);
}
