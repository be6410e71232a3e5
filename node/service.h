/*
 * The node service: one storage node = a chunk store (node/store.h) + an inec
 * device + the RPC handlers + DEG vertex hosting.
 *
 * Control and small data travel as RPCs over SEND/RECV on RC QPs of the node's
 * device (eRPC's shape: a handler per request type, one event-loop thread,
 * responses matched to requests by id; see node/client.h for the calls).
 * Messages larger than one RECV buffer are fragmented (NODE_RPC_FRAG bytes a
 * fragment) and reassembled, so a whole chunk (NODE_CHUNK_MAX) fits one RPC;
 * the bulk path of encode and repair is the DEG data path, node to node.
 *
 * Hosting a DEG vertex: a vertex of a graph on this node gets a device of its
 * own (the runner's shape), its local chunks loaded from the store as
 * {object, stripe, chunk index}; every whole chunk it results in (a sink of an
 * encode, the new holder in a repair) is written to the store, durable,
 * before the vertex's run is reported done.
 *
 * Two ways to run:
 *   in-process  listen = NULL: the device uses the mem transport (pass
 *               device_options "transport=mem,engine_threads=N" to share an
 *               engine pool among N services); clients attach with
 *               node_client_connect_local().
 *   process     listen = "host:port": a small TCP connection manager there
 *               hands out QPs (exchange of device address and QP number, as
 *               rdma_cm does); RPCs then flow over the tcp transport. Both
 *               the manager and the devices serve only peers that proved the
 *               cluster secret (secret_file), and the node's RPC device never
 *               dials: the client's device connects to it.
 */
#ifndef INEC_NODE_SERVICE_H
#define INEC_NODE_SERVICE_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "node/compactor.h"
#include "node/store.h"

#define NODE_ID_MAX 64

struct node_service_config {
    const char *id;       /* node id, as in the cluster map */
    const char *domain;   /* failure domain label (reported by health) */
    const char *data_dir; /* the chunk store */
    const char *listen;   /* "host:port" (port 0 = any) or NULL: in-process */
    const char
        *device_options; /* inec soft options; NULL: "transport=mem" or tcp on listen's host */
    uint64_t capacity;   /* store capacity in bytes, 0 = unlimited */
    int timeout_ms;      /* bound of DEG vertex runs and of peers; 0 = 10000 */
    int heartbeat_ms;    /* tcp peers are pinged this often; 0 = the transport's default */
    struct node_compaction_config compaction; /* background compaction; {0}: the defaults */
    /* Chunks of at least this many bytes skip the page cache (O_DIRECT, see
     * node/store.h): faster large writes, but a read right after one goes to
     * the disk. 0: the default (NODE_DIRECT_MIN), NODE_DIRECT_NEVER: never. */
    uint64_t direct_min;
    /* The cluster secret's file (inec/auth.h): every connection to the
     * connection manager and to the node's devices must prove it. NULL: a
     * random secret of this process (only its own clients get in). */
    const char *secret_file;
    /* node_host_crowded (node/cpus.h): the node's devices do not spin (inec.h's spin=0). */
    bool crowded;
};

struct node_service;

/* cluster.json's "direct_min" j (absent: *out unchanged): -1 (never) or a
 * number of bytes in [NODE_RECORD_ALIGN, NODE_CHUNK_MAX]; -EINVAL with a
 * message otherwise. */
int node_direct_min_from_json(const json_t *j, uint64_t *out, char *err, size_t errlen);

/* Opens the store, the device and the event loop; on failure a message in err. */
int node_service_start(const struct node_service_config *cfg, struct node_service **out, char *err,
                       size_t errlen);
/*
 * Clean shutdown: new requests are refused (-ESHUTDOWN), in-flight ones
 * finish (writes are acknowledged only once durable) or fail, vertex runs end
 * (bounded by timeout_ms), then everything is closed. NULL is a no-op.
 */
void node_service_stop(struct node_service *s);

/* The bound "host:port" of the connection manager, or NULL in-process. */
const char *node_service_listen_addr(const struct node_service *s);
const char *node_service_id(const struct node_service *s);
/* The store, for tools and tests (all store calls are thread-safe). */
struct node_store *node_service_store(struct node_service *s);

#endif
