/*
 * The gateway's side of the node RPCs (node/service.h serves them).
 *
 * A client is one RC QP on a device the caller owns (one device can carry
 * clients to many nodes). Calls are synchronous; calls on one client are
 * serialised, so use one client per node per thread for parallelism.
 *
 * Every call is bounded by timeout_ms. Errors (negative errno):
 *   -ETIMEDOUT     no answer in time (the client reconnects on the next call)
 *   -EHOSTDOWN     the connection to the node broke (node died or restarted);
 *                  the next call reconnects (tcp) or fails again (in-process)
 *   -ECONNREFUSED  nobody listens there
 *   -EMSGSIZE      a request or response larger than NODE_RPC_MAX_MSG
 *   -EOPNOTSUPP    the node does not know the request type
 *   -EPROTO        a malformed message
 *   -ESHUTDOWN     the node is shutting down
 * and the store's errors as the node's store returned them: -ENOENT, -ESTALE,
 * -ENOSPC, -EBADMSG (the chunk is corrupt on the node, now on its repair
 * list), -ENAMETOOLONG, ... node_client_errmsg() says more.
 */
#ifndef INEC_NODE_CLIENT_H
#define INEC_NODE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deg/deg.h"
#include "node/service.h"
#include "node/store.h"

struct inec_device;
struct node_client;

#define NODE_RPC_FRAG    (256u << 10) /* bytes of one RECV buffer (a fragment) */
#define NODE_RPC_MAX_MSG (NODE_CHUNK_MAX + (64u << 10))

struct node_client_opts {
    int timeout_ms;          /* bound of each call; 0 = 5000 */
    const char *secret_file; /* the cluster secret (inec/auth.h); NULL: this process's */
    const char *name;        /* who we are, as the node logs it; NULL: "client" */
    const char *node_id;     /* the node we expect at addr (the map's); NULL: any */
};

/* To the node whose connection manager listens on addr ("host:port"); dev
 * must use the tcp transport, with the same cluster secret. Both sides prove
 * the secret first (-EACCES if the node does not, or refuses our proof); the
 * node's device is then dialed at addr's host, never at a host the node
 * names. */
int node_client_connect(struct inec_device *dev, const char *addr,
                        const struct node_client_opts *opts, struct node_client **out, char *err,
                        size_t errlen);
/* To a node of this process; dev must use the mem transport. */
int node_client_connect_local(struct inec_device *dev, struct node_service *svc,
                              const struct node_client_opts *opts, struct node_client **out,
                              char *err, size_t errlen);
void node_client_close(struct node_client *c); /* NULL is a no-op */
/* What the last failed call of this client was about ("" if none). */
const char *node_client_errmsg(const struct node_client *c);

/* --- chunks ------------------------------------------------------------- */

/* Durable on the node when this returns 0. */
int node_client_put_chunk(struct node_client *c, const struct node_chunk_id *id, uint64_t version,
                          const void *data, size_t len);
/* *data is malloc'ed (caller frees); version may be NULL.
 * node_client_get_chunk_to (below) reads into the caller's memory. */
int node_client_get_chunk(struct node_client *c, const struct node_chunk_id *id, void **data,
                          size_t *len, uint64_t *version);
int node_client_delete_chunk(struct node_client *c, const struct node_chunk_id *id,
                             uint64_t version);

/* --- object metadata (node_store_*_meta semantics) ---------------------- */

/* A compare-and-set write (node_store_put_meta); on -ESTALE or -EEXIST
 * *stored (may be NULL) is the version the node holds. */
int node_client_put_meta(struct node_client *c, const char *bucket, const char *key,
                         uint64_t version, unsigned flags, const void *blob, size_t len,
                         uint64_t *stored);
/* The same, answering in *old (malloc'ed, NULL when none) the record the
 * write replaced (NODE_META_OLD). */
int node_client_put_meta_old(struct node_client *c, const char *bucket, const char *key,
                             uint64_t version, unsigned flags, const void *blob, size_t len,
                             uint64_t *stored, void **old, size_t *old_len);

/*
 * A call in steps, so one thread can have calls out to several nodes at once
 * and go on at the first answers (a metadata round waits for W of them):
 * a start sends the request (0: it left, and the client takes no other
 * call until the call ends), node_call_poll takes what arrived without
 * sleeping, node_calls_wait sleeps until one of several may have moved on,
 * and the call's end (any thread may run it) waits for the rest, bounded by
 * the client's timeout. The fields are the client's.
 */
struct node_call {
    struct node_client *c;
    uint64_t req_id;
    int64_t deadline; /* CLOCK_MONOTONIC ms */
    int timeout_ms;
    bool got, done; /* got: the node answered */
    int rc;         /* once done: 0, the node's status, or a transport error */
    uint8_t *data;  /* the answer's payload (malloc'ed, may be NULL) */
    size_t len;
    /* A chunk read into the caller's memory (node_client_get_chunk_to_start). */
    struct node_chunk_id chunk;
    uint8_t *dst;
    size_t cap;
    bool plain; /* sent as a GET_CHUNK: its answer is copied to dst */
};
/* true once k's call is over (its end then does not wait). */
bool node_call_poll(struct node_call *k);
/* Sleeps until a call of ks not over yet may have moved on, or the first of
 * their deadlines, or timeout_ms (< 0: none) passed; 0, or -errno. */
int node_calls_wait(struct node_call *const *ks, int n, int timeout_ms);
/* node_client_put_meta_old in steps. A client without a connection answers
 * -ENOTCONN rather than dial: a start never blocks. */
int node_client_put_meta_start(struct node_client *c, const char *bucket, const char *key,
                               uint64_t version, unsigned flags, const void *blob, size_t len,
                               struct node_call *k);
int node_client_put_meta_end(struct node_call *k, uint64_t *stored, void **old, size_t *old_len);
/* node_client_get_meta in steps, likewise. */
int node_client_get_meta_start(struct node_client *c, const char *bucket, const char *key,
                               struct node_call *k);
int node_client_get_meta_end(struct node_call *k, void **blob, size_t *len);
/* A chunk read into the caller's memory: dst (cap bytes) lies in a region
 * registered on the client's device under rkey, and the node WRITEs the
 * bytes there before it answers, so nothing is reassembled or copied here.
 * *len gets the chunk's length; version may be NULL. A chunk over cap is
 * -EMSGSIZE. A node that predates this read (it answers -EOPNOTSUPP) gets
 * plain reads from then on, their answers copied to dst. In steps too,
 * likewise. */
int node_client_get_chunk_to(struct node_client *c, const struct node_chunk_id *id, void *dst,
                             size_t cap, uint32_t rkey, size_t *len, uint64_t *version);
int node_client_get_chunk_to_start(struct node_client *c, const struct node_chunk_id *id, void *dst,
                                   size_t cap, uint32_t rkey, struct node_call *k);
int node_client_get_chunk_to_end(struct node_call *k, size_t *len, uint64_t *version);
int node_client_get_meta(struct node_client *c, const char *bucket, const char *key, void **blob,
                         size_t *len);
int node_client_delete_meta(struct node_client *c, const char *bucket, const char *key);
/* Only while the node's record is still expect[len] (a non-empty blob):
 * -ESTALE when it is another one now, -ENOENT when there is none. */
int node_client_delete_meta_if(struct node_client *c, const char *bucket, const char *key,
                               const void *expect, size_t len);
/* One page: limit 0 means as many as fit one response (at most 1000). cb gets
 * each key and blob in order; returns the number listed or -errno. */
int node_client_list_meta(struct node_client *c, const char *bucket, const char *prefix,
                          const char *start_after, size_t limit, node_meta_cb cb, void *arg,
                          int *more);

/* --- chunk inventory (the repair scanner's view of a node) ------------------ */

#define NODE_INVENTORY_PAGE  4096 /* chunks of one page, at most */
#define NODE_INVENTORY_ENTRY 40   /* bytes of one chunk on the wire: head + u32 length */

/* Chunks stored on the node in id order (object bytes, then stripe, then
 * index) after `after` (NULL: from the first), at most `limit` (0 or more
 * than NODE_INVENTORY_PAGE: a page). cb returns non-zero to stop. Returns the
 * number listed or -errno; *more says whether chunks follow the page. */
int node_client_list_chunks(struct node_client *c, const struct node_chunk_id *after, size_t limit,
                            node_chunk_cb cb, void *arg, int *more);
/* The node's repair list (chunks found corrupt by reads or scrub), at most
 * NODE_INVENTORY_PAGE of them; *more when the list is longer. */
int node_client_list_repair(struct node_client *c, node_repair_cb cb, void *arg, int *more);

/* --- node state ------------------------------------------------------------ */

struct node_health {
    char id[NODE_ID_MAX];
    char domain[NODE_ID_MAX];
    uint64_t uptime_ms;
    bool stopping;
    int64_t time_ns;  /* the node's wall clock (ns since the epoch) as it answered; 0: not sent */
    uint64_t workers; /* its worker threads now (busy or idle) */
    uint64_t workers_started; /* worker threads it has started since it started */
    /* Requests its device's engine fed to the handlers, and its loop did
     * (node/service.c: over tcp the engine, on mem mostly the loop). */
    uint64_t requests_engine, requests_loop;
};
int node_client_health(struct node_client *c, struct node_health *h);
int node_client_stats(struct node_client *c, struct node_store_stats *st);
/* Verifies every chunk on the node (may take long: give a large timeout). */
int node_client_scrub(struct node_client *c, struct node_scrub_result *res);

/* --- DEG vertices ------------------------------------------------------------ */

/* The stripe a graph works on: node vertices load local chunk i as
 * {object, stripe, i} and store each whole-chunk result c as {object,
 * stripe, c} at `version`. */
struct node_stripe {
    uint8_t object[NODE_OBJECT_ID_BYTES];
    uint64_t stripe;
    uint64_t version;
};

/*
 * Runs graph g: each node vertex on its node (set up, connected and run over
 * RPCs through nodes[node id], nnodes entries, NULL for a node that is down),
 * each gateway vertex in this process on a device opened with opts->options
 * (it must reach the nodes' devices: "transport=tcp,listen=HOST:0" or
 * "transport=mem"), with its local chunk i read from chunks[i]. Gateway
 * results go to result(); node results are durable in their stores when this
 * returns 0. Data moves device to device; the RPCs carry only control.
 * Bounded by opts->timeout_ms (0 = 10 s); a failure names vertex and edge.
 */
int node_deg_run(const struct deg_graph *g, size_t len, uint8_t *const *chunks,
                 struct node_client *const *nodes, int nnodes, const struct node_stripe *stripe,
                 const struct deg_run_opts *opts, deg_result_fn result, void *arg, char *err,
                 size_t errlen);

/*
 * A persistent session (INEC-Cache's shape: the write DEG is set up once,
 * then run stripe after stripe). Open sets up and connects every vertex of g
 * once, node vertices persistent on their nodes; each run then costs one RUN
 * message per node plus the data. Two shapes fit (node_deg_session_fits):
 * the gateway the one source and every node vertex a sink fed by it (the
 * RS/LRC/PPR/ECPipe encodes, run by node_deg_session_run), or the gateway
 * the one sink and every node vertex a source sending it one chunk (the RS
 * and LRC decodes, run by node_deg_session_decode); other graphs (TriEC,
 * PPR and ECPipe decodes) go through node_deg_run.
 *
 * A run takes a graph of the same shape over the same nodes in any order of
 * chunks (the same encode for another placement of the stripe on those
 * nodes): the gateway reads chunks[] of len bytes (len <= the open length),
 * node vertices store their chunk of `stripe` durably before this returns 0.
 * The clients in nodes[] serve the session until it is closed (RPCs on them
 * must not run concurrently with a run). A failed run (node down, timeout)
 * breaks the session, with a message naming vertex and edge: close it and
 * open a new one. Bounded by opts->timeout_ms as node_deg_run.
 */
struct node_deg_session;

/* An encode run that need not wait for every sink: once the gateway's
 * vertex has sent every chunk and enough(arg, s) says the sinks that stored
 * theirs so far (node_deg_session_sink_rc) suffice, the others get as long
 * again as the run took until then, at least grace_min_ms; the run then
 * returns 0 without them. Their sink_rc is -EINPROGRESS, and the session
 * must be closed (the close waits for their answers): a sink whose disk
 * stalls holds its stripe for a grace, not for the peer timeout. */
struct node_deg_quorum {
    bool (*enough)(void *arg, const struct node_deg_session *s); /* called under a lock */
    void *arg;
    int grace_min_ms;
    /* When set: called once on the caller's thread when the gateway's vertex
     * has sent every chunk, before the wait for the sinks, so the caller's
     * own work (a PUT's MD5) overlaps their disk writes, not follows them. */
    void (*sent)(void *sent_arg);
    void *sent_arg;
};

bool node_deg_session_fits(const struct deg_graph *g);
int node_deg_session_open(const struct deg_graph *g, size_t len, struct node_client *const *nodes,
                          int nnodes, const struct deg_run_opts *opts,
                          struct node_deg_session **out, char *err, size_t errlen);
int node_deg_session_run(struct node_deg_session *s, const struct deg_graph *g, size_t len,
                         uint8_t *const *chunks, const struct node_stripe *stripe,
                         const struct node_deg_quorum *quorum, char *err, size_t errlen);
/* A decode run: g is a decode of the session's shape (the same number of
 * sources and rows) whose sources are on the session's nodes in any order,
 * reading any chunks of `stripe`; its node participants are node_of[p]
 * (NULL: the ids themselves). The gateway's results (its rows as g labels
 * them, and its inputs, labelled with the chunk each source read) go to
 * result() before this returns 0. It returns once the gateway's vertex has
 * them; the nodes' RUN answers are collected before the session's next run
 * (or its close), and one that failed fails that run. */
int node_deg_session_decode(struct node_deg_session *s, const struct deg_graph *g,
                            const int *node_of, size_t len, const struct node_stripe *stripe,
                            deg_result_fn result, void *arg, char *err, size_t errlen);
void node_deg_session_close(struct node_deg_session *s); /* NULL is a no-op */
/* After a run, failed ones too: 0 when the sink on node `node` stored its
 * chunk durably, else its error (-ENOENT: no sink there; -EINPROGRESS: left
 * behind by a quorum). Lets a writer count what a partly failed run did
 * store. */
int node_deg_session_sink_rc(const struct node_deg_session *s, int node);

#endif
