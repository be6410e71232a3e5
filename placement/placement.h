/*
 * Cluster map and stripe placement. Pure: no I/O, no threads, no global state.
 *
 * The map is JSON:
 *
 *   {"epoch": 7, "heartbeat_ms": 500, "peer_timeout_ms": 5000,
 *    "nodes": [{"id": "n1", "address": "10.0.0.1:7001", "domain": "rack1",
 *               "weight": 1.0, "state": "up", "device": "mlx5_0"}, ...],
 *    "pools": [{"name": "default", "profile": "rs:k=6,m=3",
 *               "chunk_size": 4194304, "write_quorum": 9}, ...]}
 *
 * heartbeat_ms and peer_timeout_ms are the one source of every peer link's
 * failure detector (gateway <-> node, node <-> node): each side pings every
 * heartbeat_ms whatever the traffic, a peer silent for 2 heartbeats is
 * suspect, one silent for peer_timeout_ms is down, and a call to a node is
 * bounded by peer_timeout_ms. Defaults 500 and 5000; heartbeat_ms in
 * [10, peer_timeout_ms / 2], peer_timeout_ms in [100, 3600000].
 *
 * device: the offload device the node's process opens: "soft", or an RDMA
 * device name for the verbs provider (`inec devices` lists them; the node
 * falls back to soft, saying so, when it has none). Absent: the process's
 * INEC_PROVIDER, else soft.
 *
 * Defaults: epoch 0, domain = the node id (every node its own failure domain),
 * weight 1, state "up", chunk_size 4 MiB (PLACE_CHUNK_SIZE), write_quorum min(k + 1, n). Unknown
 * fields are errors, so a misspelt key never silently becomes a default.
 *
 * write_quorum (k..n) is the number of a stripe's chunks that must be durable
 * before a write is acknowledged; the others are recorded as missing and
 * queued for repair. The default k + 1 (Ceph's min_size for EC pools) keeps
 * writes available with up to m - 1 nodes of a stripe down while every
 * acknowledged stripe still survives one more loss; n - 1 would keep two
 * spare chunks but refuse writes once two nodes are down, n refuses them
 * with one.
 *
 * Placement is weighted rendezvous (highest-random-weight) hashing: node i
 * scores -w_i / ln(u_i), u_i a uniform hash of (object, stripe, node id), and
 * a stripe goes to the n best-scoring nodes, taking at most one node per
 * failure domain while the up nodes span at least n domains. Otherwise it
 * spreads as evenly as it can (first the best node of each domain, then the
 * second best, ...) and says so through max_per_domain. Down, draining and
 * out nodes take no new stripes; an out node (removed for good) is not even
 * a stripe's home.
 *
 * A map change therefore moves only the stripes that involved the node that
 * joined or left. The chunk index of a chosen node is its rank, so a change can
 * also renumber the surviving chunks of a moved stripe: no stateless scheme
 * can both pick n distinct nodes and keep every survivor's index under every
 * change, so the gateway records each stripe's nodes in the object's metadata
 * and reads follow that record, not a recomputation.
 */
#ifndef INEC_PLACEMENT_PLACEMENT_H
#define INEC_PLACEMENT_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "codecs/codec.h"

#define PLACE_ID_MAX      64 /* node ids, domains, pool names and profiles, with the NUL */
#define PLACE_ADDRESS_MAX 262
#define PLACE_MAX_CHUNKS  CODEC_MAX_CHUNKS

enum place_state {
    PLACE_UP,
    PLACE_DOWN,
    PLACE_DRAINING,
    PLACE_OUT, /* gone for good: holds nothing, its chunks are rebuilt elsewhere */
};

struct place_node {
    char id[PLACE_ID_MAX];
    char address[PLACE_ADDRESS_MAX]; /* "host:port", "[v6]:port" */
    char domain[PLACE_ID_MAX];
    char device[PLACE_ID_MAX]; /* "" = not set (see above) */
    double weight;             /* > 0 */
    enum place_state state;
    int domain_index; /* into place_map.domains */
    uint64_t hash;    /* of the id: placement depends on ids, never on array order */
};

struct place_pool {
    char name[PLACE_ID_MAX];
    char profile[PLACE_ID_MAX]; /* as written, e.g. "lrc:k=6,l=2,r=2" */
    struct codec_profile codec; /* parsed by codec_profile_parse */
    int k;                      /* data chunks */
    int n;                      /* chunks per stripe, k + m */
    uint32_t chunk_size;        /* bytes */
    int write_quorum;           /* chunks that must be durable before a PUT is acknowledged */
};

/* A pool's default chunk size. A stripe holds k chunks of at most this; an
 * object's chunks are ceil(size / k) bytes up to it (object/put.c), so objects
 * up to k x 4 MiB are one stripe and larger ones stripes of 4 MiB chunks:
 * fewer, larger chunk writes (one record, one flush each on a node). */
#define PLACE_CHUNK_SIZE      (4u << 20)
#define PLACE_HEARTBEAT_MS    500
#define PLACE_PEER_TIMEOUT_MS 5000

struct place_map {
    uint64_t epoch;
    int heartbeat_ms, peer_timeout_ms; /* the failure detector's clock (see above) */
    int nnodes;
    struct place_node *nodes;
    int npools;
    struct place_pool *pools;
    int ndomains;
    char (*domains)[PLACE_ID_MAX];
};

/* Parses a map; on error returns -EINVAL with a message naming the field,
 * e.g. "nodes[2].weight: must be a number > 0". */
int place_map_parse(const char *json, size_t len, struct place_map **out, char *err, size_t errlen);
void place_map_destroy(struct place_map *m);
/* The map as JSON text (malloc'd, caller frees), parseable by place_map_parse. */
char *place_map_format(const struct place_map *m);

const struct place_pool *place_map_pool(const struct place_map *m, const char *name);
/* Index of the node with this id, or -ENOENT. */
int place_map_node(const struct place_map *m, const char *id);
/* How many nodes of the map have their address on host (a bare host, or the
 * host of a "host:port" / "[v6]:port" address): the processes that share
 * that machine's cores. */
int place_map_nodes_on_host(const struct place_map *m, const char *host);
const char *place_state_name(enum place_state s);

/*
 * Chooses the nodes of one stripe: out[c] = index into m->nodes of chunk c,
 * for c < n. *max_per_domain (may be NULL) is 1 when every chunk is in its own
 * failure domain, larger when the map has too few domains.
 * Returns 0, -EINVAL (n out of range), or -ENOSPC (fewer than n up nodes).
 */
int place_stripe(const struct place_map *m, const void *object, size_t object_len, uint64_t stripe,
                 int n, int *out, int *max_per_domain);

/* The same over the nodes with use[i] only (whatever their state). */
int place_stripe_among(const struct place_map *m, const bool *use, const void *object,
                       size_t object_len, uint64_t stripe, int n, int *out, int *max_per_domain);

/*
 * Where a write puts stripe s when some nodes are down (down[i]: known down
 * to the caller, may be NULL; nodes in state down count too). Spare nodes
 * come first: the stripe goes to its n best up nodes, as place_stripe over
 * the up ones, when they give as good a domain spread as the stripe's home
 * placement (over every node that is not draining, as if all were up).
 * Otherwise, rather than doubling up a failure domain or failing, the stripe
 * keeps its home nodes and missing[c] is set for each chunk on a down node:
 * the writer stores the others (if its write quorum allows) and repair fills
 * the missing ones later. Returns 0, -EINVAL, -ENOMEM, or -ENOSPC (fewer
 * than n nodes that are not draining).
 */
int place_stripe_write(const struct place_map *m, const void *object, size_t object_len,
                       uint64_t stripe, int n, const bool *down, int *out, bool *missing);

/*
 * A new home for chunks of stripe s whose nodes are lost: the best-scoring
 * node (the stripe's own rendezvous order) with usable[i] that holds no chunk
 * of the stripe (taken[0..ntaken), entries < 0 ignored), in a failure domain
 * none of them uses when one is left. Returns the node index or -ENOSPC.
 */
int place_replacement(const struct place_map *m, const void *object, size_t object_len,
                      uint64_t stripe, const int *taken, int ntaken, const bool *usable);

/* The 64-bit hash placement uses, for callers that need the same spread. */
uint64_t place_hash(const void *data, size_t len, uint64_t seed);

#endif
