/*
 * Shared by the files of the node client (node/client*.c): a client's state
 * and one call. Nothing outside them includes it; the API is node/client.h.
 *
 *   client.c        connecting, and a call: send, wait for its answer
 *   client_store.c  the store's calls: chunks, metadata, node state
 *   client_deg.c    DEG vertices run on their nodes (node_deg_run, sessions)
 */
#ifndef INEC_NODE_CLIENT_INTERNAL_H
#define INEC_NODE_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "inec/auth.h"
#include "node/client.h"
#include "node/rpc.h"

struct node_client {
    struct inec_device *dev;
    struct inec_cq *cq;  /* answers (waited on) */
    struct inec_cq *scq; /* send completions (polled; see node_call_step) */
    struct rpc_ep *ep;
    struct node_service *local; /* in-process node, or NULL */
    char addr[300];
    char secret[256], name[INEC_AUTH_NAME], node_id[NODE_ID_MAX]; /* see node_client_opts */
    int timeout_ms;
    uint64_t seq;
    pthread_mutex_t lock; /* busy */
    pthread_cond_t idle;
    bool busy;        /* a call is out (client_take) */
    bool plain_reads; /* the node predates NODE_RPC_GET_CHUNK_TO */
    char err[512];
};

/* Sets c's message (node_client_errmsg) and returns rc. */
int node_client_fail(struct node_client *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Sends a request: 0 when it left (k is then out until node_call_step ends
 * it), else the error (the client free again). Without `connect` a client
 * whose connection is gone answers -ENOTCONN rather than dial (which may
 * block). */
int node_call_start(struct node_client *c, int type, const void *head, size_t hlen,
                    const void *data, size_t dlen, int timeout_ms, bool connect,
                    struct node_call *k);

/* Takes what arrived for k; with `block`, sleeps until the call is over.
 * Returns true once it is: k->rc is 0 or the node's status (< 0) with
 * k->got and the answer in k->data (the caller frees it), or a transport
 * failure (-ETIMEDOUT, -EHOSTDOWN, ...). */
bool node_call_step(struct node_call *k, bool block);

/* One RPC: *resp gets the response (caller frees resp->data) when it returns
 * 0 or the node's status (< 0, resp filled); transport failures return
 * -ETIMEDOUT / -EHOSTDOWN / ... with resp untouched. */
int node_call_timeout(struct node_client *c, int type, const void *head, size_t hlen,
                      const void *data, size_t dlen, struct rpc_msg *resp, int timeout_ms);
/* The same within the client's timeout. */
int node_call(struct node_client *c, int type, const void *head, size_t hlen, const void *data,
              size_t dlen, struct rpc_msg *resp);
/* A call whose response carries nothing the caller needs. */
int node_call0(struct node_client *c, int type, const void *head, size_t hlen, const void *data,
               size_t dlen);

static inline int64_t node_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
