/*
 * Internal to node/: the RPC wire and one endpoint (an RC QP with its RECV
 * buffers), shared by the service (server side) and the client.
 *
 * A message is a request or a response: type, request id, status (responses:
 * 0 or -errno) and a payload of up to NODE_RPC_MAX_MSG bytes. It travels as
 * fragments, each one SEND of at most NODE_RPC_FRAG bytes: a 32-byte header
 * (magic, type, flags, request id, total payload bytes, this fragment's
 * offset, status) then a slice of the payload. SENDs of one QP arrive in
 * order, so fragments of a message are contiguous; a fragment at offset 0
 * starts a new message and discards any unfinished one.
 *
 * The payload of a send is a small `head` (copied) followed by `data`:
 * copied too when the message fits one of the endpoint's send buffers
 * (registered once, 4 KiB), else sent in place, so a 64 MiB chunk is not
 * copied.
 */
#ifndef INEC_NODE_RPC_H
#define INEC_NODE_RPC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inec/inec.h"

enum node_rpc_type {
    NODE_RPC_PUT_CHUNK = 1,
    NODE_RPC_GET_CHUNK,
    NODE_RPC_DELETE_CHUNK,
    NODE_RPC_PUT_META,
    NODE_RPC_GET_META,
    NODE_RPC_DELETE_META,
    NODE_RPC_LIST_META,
    NODE_RPC_STATS,
    NODE_RPC_HEALTH,
    NODE_RPC_SCRUB,
    NODE_RPC_VERTEX_SETUP,
    NODE_RPC_VERTEX_CONNECT,
    NODE_RPC_VERTEX_RUN,
    NODE_RPC_VERTEX_CLOSE,
    NODE_RPC_LIST_CHUNKS,
    NODE_RPC_LIST_REPAIR,
    NODE_RPC_GET_CHUNK_TO, /* a chunk read whose bytes the node WRITEs to the reader */
    NODE_RPC_NTYPES,
};

#define RPC_F_RESPONSE 1
#define RPC_RECVS      16 /* RECV buffers posted per endpoint */

struct rpc_msg {
    uint16_t type, flags;
    uint64_t req_id;
    int32_t status;
    uint8_t *data; /* malloc'ed payload (NULL when len is 0) */
    size_t len;
};

/*
 * Reassembly of fragments into messages, apart from any QP (fuzzed on its
 * own: fuzz/fuzz_rpc_frame.c). rpc_rx_feed takes one received fragment (header
 * and payload slice, as one SEND delivered it) and returns 1 with a whole
 * message in *msg (the caller frees msg->data), 0 when more is needed or the
 * fragment was garbage (dropped with the message it claimed to continue),
 * -EMSGSIZE with msg's header filled (no data) for a message over
 * NODE_RPC_MAX_MSG (its other fragments are then dropped).
 */
struct rpc_rx {
    struct rpc_msg msg;
    size_t got;
    bool receiving, skipping;
};
int rpc_rx_feed(struct rpc_rx *rx, const uint8_t *frag, size_t len, struct rpc_msg *msg);
void rpc_rx_clear(struct rpc_rx *rx); /* frees a message half received */

struct rpc_ep;

/* A QP on dev whose send completions go to send_cq and receive completions
 * to recv_cq (the same CQ, or one its owner polls without sleeping on it). */
int rpc_ep_open(struct inec_device *dev, struct inec_cq *send_cq, struct inec_cq *recv_cq,
                struct rpc_ep **out);
void rpc_ep_close(struct rpc_ep *ep); /* destroys the QP, then frees pending sends */
int rpc_ep_connect(struct rpc_ep *ep, const char *addr, uint32_t qpn);
uint32_t rpc_ep_qpn(const struct rpc_ep *ep);
bool rpc_ep_broken(const struct rpc_ep *ep);

/*
 * Feeds one completion of this endpoint. Returns 1 with a whole message in
 * *msg (caller frees msg->data), 0 when nothing completed, -EMSGSIZE with
 * msg's header filled (no data) for a message too large to take (its other
 * fragments are then dropped), -EHOSTDOWN when the QP failed.
 */
int rpc_ep_complete(struct rpc_ep *ep, const struct inec_wc *wc, struct rpc_msg *msg);
/* A send of ep still in flight reads its caller's data (sent in place: too
 * large for a send buffer, or none was free); the others were copied. */
bool rpc_ep_sending_in_place(struct rpc_ep *ep);
/* Is this completion (from a shared CQ) one of ep's? */
bool rpc_ep_owns(const struct rpc_ep *ep, const struct inec_wc *wc);

/* Sends a message (thread-safe). data sent in place (rpc_ep_sending_in_place)
 * must stay valid until the send's last fragment completes or the endpoint
 * is closed; copied data is free at once. done(arg) (may be NULL) is called
 * at that completion or close, on the completing or closing thread. */
int rpc_ep_send(struct rpc_ep *ep, const struct rpc_msg *hdr, const void *head, size_t hlen,
                const void *data, size_t dlen, void (*done)(void *arg), void *arg);

/* Sends a message after its data: one WRITE of data into the peer's memory
 * at `to`, then the message with the head alone (RC order: the data has
 * landed when the message arrives). As rpc_ep_send otherwise. */
struct rpc_write_to {
    uint64_t addr;
    uint32_t rkey;
};
int rpc_ep_send_write(struct rpc_ep *ep, const struct rpc_msg *hdr, const void *head, size_t hlen,
                      const void *data, size_t dlen, const struct rpc_write_to *to,
                      void (*done)(void *arg), void *arg);

/* A chunk request's head: object id, stripe, index, version. */
#define RPC_CHUNK_HEAD 36
/* NODE_RPC_GET_CHUNK_TO's: a chunk head, then where the reader's memory is
 * (address u64, rkey u32) and its size (u64). The answer's head is the
 * chunk's version and length (u64 each); its bytes went ahead by WRITE. A
 * chunk larger than that memory is refused (-EMSGSIZE) with nothing
 * written. */
#define RPC_CHUNK_TO_HEAD (RPC_CHUNK_HEAD + 20)

/* A metadata write's head after "bucket\0key\0": version (u64), flags (u32,
 * NODE_META_*); the record follows. A refusal (-ESTALE, -EEXIST) answers
 * RPC_META_STORED and the version the node holds, in decimal; with
 * NODE_META_OLD a write that replaced a record answers that record's blob. */
#define RPC_META_HEAD   12
#define RPC_META_STORED "stored version "

struct node_chunk_id;
void rpc_chunk_head_encode(uint8_t *p, const struct node_chunk_id *id, uint64_t version);
void rpc_chunk_head_decode(const uint8_t *p, struct node_chunk_id *id, uint64_t *version);

/* The server side of connection setup: a QP of the service's device connected
 * to (addr, qpn); returns its QP number and the device's address. */
struct node_service;
int node_service_accept(struct node_service *s, const char *addr, uint32_t qpn, uint32_t *out_qpn,
                        const char **dev_addr);

/* Little-endian fields of fixed request heads. */
static inline void rpc_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint64_t rpc_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}
static inline uint32_t rpc_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void rpc_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

#endif
