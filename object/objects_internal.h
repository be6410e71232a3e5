/*
 * Shared between the files of the object layer (object/) and the volume
 * layer over it (volume/); nothing else includes it but the layer's tests.
 */
#ifndef INEC_OBJECT_OBJECTS_INTERNAL_H
#define INEC_OBJECT_OBJECTS_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <jansson.h>
#include "codecs/codec.h"
#include "object/objects.h"
#include "node/client.h"
#include "placement/placement.h"

#define GW_MAX_POOLS          32
#define GW_NODE_CLIENTS       16 /* idle clients kept per node */
#define GW_ALIGN              64 /* chunk length alignment of a short last stripe */
#define GW_META_BUCKET        "." /* the store bucket of bucket records (no S3 name starts with '.') */
#define GW_META_ACL           ".acl" /* object ACLs set after the write: "<bucket>/<key>" */
#define GW_META_MPU           ".mpu" /* multipart uploads and parts: "<bucket>/..." (multipart.c) */
#define GW_MPU_UPLOADS        "%s/U/" /* of a bucket's uploads in progress in GW_META_MPU */
#define GW_CHUNK_VERSION      1 /* chunks are unique per upload (object id), never overwritten */
#define GW_GC_PENDING_STRIPES 200000  /* of replaced versions waiting for their delay, in memory */
#define GW_MAX_GET_MS         3600000 /* default bound of one GET's stream (max_get_ms) */
#define GW_GC_MARGIN_MS       10000   /* default gc_delay_ms = max_get_ms + this */
#define GW_BUCKET_CACHE_MS    1000    /* default bucket_cache_ms (bucket_cache.c) */

struct gw_node {
    char id[PLACE_ID_MAX];
    char address[PLACE_ADDRESS_MAX];
    struct node_service *svc; /* embedded: the in-process service, NULL when stopped */
    pthread_mutex_t lock;
    int opening;           /* embedded: connects to svc under way; a stop waits for them */
    pthread_cond_t opened; /* opening went to 0 */
    struct node_client *idle[GW_NODE_CLIENTS];
    int nidle;
    /* The failure detector's evidence (detector.c). */
    _Atomic int64_t last_seen_ms;   /* its last answer to a call or a probe */
    _Atomic int64_t refused_ms;     /* its last refused connection */
    _Atomic int64_t probe_since_ms; /* a probe out since then; 0: none */
    _Atomic int misses;             /* failed calls and probes since its last answer */
    _Atomic int verdict;            /* the last one logged (enum gw_peer_state) */
    _Atomic uint64_t failures, suspicions, downs;
    _Atomic int late_sinks; /* chunk writes left behind by a quorum, running (session_pool.c) */
    _Atomic int admin;      /* enum place_state set through the control API (repair_admin.c) */
    _Atomic bool meta_out;  /* holds no metadata: its records moved (repair_admin.c) */
};

enum gw_peer_state { GW_PEER_UP, GW_PEER_SUSPECT, GW_PEER_DOWN };

/* What a pool holds, as the repair scanner's last complete walk counted it. */
struct gw_pool_usage {
    uint64_t objects, logical_bytes; /* objects clients see, and their sizes */
    uint64_t stored_bytes;           /* chunks, parity included (uploads in progress too) */
    uint64_t degraded_stripes;       /* stripes lacking a chunk */
};

struct gw_pool {
    struct place_pool p;
    struct codec *codec;
    struct gw_pool_usage usage; /* pool_lock */
};

struct gw_fanout;

struct gw_fetcher;

struct gw_decoder;

/* Used by session_pool.c, sessions.c and decode_sessions.c: a DEG session
 * kept open over its nodes' clients, the first member of an encode or
 * decode session (whose own key follows). */
struct gw_pooled_session {
    struct gw_pooled_session *next;
    const struct gw_pool *pool;
    int n, nodes[PLACE_MAX_CHUNKS]; /* the nodes it runs on, sorted */
    struct node_client *cl[PLACE_MAX_CHUNKS];
    struct node_deg_session *s;
    int64_t idle_since_ms;
};

/* Idle sessions, newest first, at most max_idle. */
struct gw_session_pool {
    pthread_mutex_t lock;
    struct gw_pooled_session *idle;
    int max_idle;
};

struct gw_objects {
    struct place_map *map; /* nodes never change after open; pools live in `pools` */
    int nnodes;
    struct gw_node *nodes;
    pthread_mutex_t pool_lock;
    struct gw_pool pools[GW_MAX_POOLS]; /* append-only: a pointer stays valid until close */
    _Atomic int npools;
    int64_t usage_ns; /* pool_lock: wall clock of the scan the pools' usage is from, 0: none */
    int clock_skew_warn_ms; /* a node's clock further off is a CLOCK_SKEW warning (health.c) */

    bool embedded;
    char dir[4096];           /* embedded: DATA; cluster.json lives there */
    char node_devopts[128];   /* embedded node services */
    uint64_t node_direct_min; /* their stores' O_DIRECT threshold (node_service_config) */
    struct inec_device *dev;  /* carries every RPC client */
    char deg_options[600];    /* devices of gateway DEG vertices */
    char secret[256];         /* the cluster secret's file (inec/auth.h), "" = none */
    int timeout_ms;           /* RPC bound and peer timeout (the map's peer_timeout_ms) */
    int heartbeat_ms;         /* the map's: tcp pings, node probes */
    int gc_delay_ms;          /* old versions' chunks are deleted this long after a commit */
    int max_get_ms;           /* a GET streaming longer is cut: gc_delay_ms must exceed it */
    bool degraded_read_deg;   /* "degraded_read": "deg": star decodes through the DEG too */
    int64_t mpu_expire_ms;    /* multipart uploads older are aborted (0: never), lifecycle.c */
    int64_t lifecycle_day_ms; /* a lifecycle rule's day (shorter only for tests) */
    uint32_t gw_id;           /* version tiebreak between gateways */
    _Atomic uint64_t hlc;     /* the version clock (version_clock.c), without gw_id */

    int meta_copies, meta_wq, meta_rq; /* metadata replication (meta_*.c) */
    size_t inline_max; /* bodies up to this many bytes go inline in their records (inline.c) */
    _Atomic uint64_t meta_repairs;    /* copies rewritten by read repair */
    _Atomic uint64_t meta_read_calls; /* homes asked by reads */

    struct gw_fanout *fan;
    struct gw_fanout *put_fan;  /* PUTs' stripe writers (put.c) */
    struct gw_fetcher *fetcher; /* GET's chunk reads (stripe_fetch.c) */
    struct gw_decoder *decoder; /* GET's decode graphs and sessions (decode_sessions.c) */

    /* The failure detector (detector.c): probes on their own threads. */
    struct gw_fanout *det_fan;
    pthread_mutex_t det_lock;
    pthread_cond_t det_cond;
    pthread_t det_thread;
    bool det_started, det_stop;

    struct gw_session_pool sessions; /* idle encode sessions (sessions.c) */

    _Atomic uint64_t degraded_reads, corrupt_chunks, missing_chunks, failed_reads;
    _Atomic uint64_t sessions_opened, degraded_writes;
    _Atomic uint64_t hedged_reads, read_retries; /* GET stripes (stripe_fetch.c) */

    struct gw_repair *rep; /* the repair service (repair_service.c), NULL when not running */

    /* Bucket records read recently (bucket_cache.c). */
    int bucket_cache_ms; /* how long an entry is trusted; 0: no cache */
    pthread_mutex_t bucket_lock;
    json_t *buckets; /* name -> {"rec": record, "until": gw_now_ms} */

    /* Keys some home may lack the newest record of (meta_heal.c). */
    pthread_mutex_t heal_lock;
    pthread_cond_t heal_cond;
    json_t *heal;                  /* heal key -> {"due": ms, "tries": n} */
    int heal_max;                  /* keys noted at most ("heal_max") */
    _Atomic uint64_t heal_dropped; /* past the bound */
    /* Non-zero while a home may lack a record no note names (the gateway
     * started, or dropped notes): reads ask every home until a sweep. */
    _Atomic uint64_t heal_doubt;
    uint64_t heal_doubts; /* doubts raised so far: each its own value */
    int64_t sweep_due;    /* ms: the next sweep while in doubt */
    int sweep_tries;      /* sweeps that did not settle it, in a row */
    bool heal_stop, heal_started;
    pthread_t heal_thread;

    pthread_mutex_t gc_lock;
    pthread_cond_t gc_cond;
    json_t *gc;                  /* array of {"due": ms, "rec": record} */
    size_t gc_stripes;           /* theirs and those being deleted, at most GW_GC_PENDING_STRIPES */
    _Atomic uint64_t gc_dropped; /* records left to the scanner (orphans) past that */
    bool gc_stop;
    pthread_t gc_thread;
    bool gc_started;
};

/* Used by open.c: the metadata fan-out's threads kept (it grows while calls wait). */
#define GW_FAN_THREADS 4
/* Used by open.c: stripe writers kept, for four large PUTs at once (each has up
 * to two stripes on them: put.c's window, less the one its own thread writes). */
#define GW_PUT_THREADS 8

/* Used by open.c and sessions.c. */
#define GW_SESSIONS_IDLE 12 /* idle encode sessions kept */

/* Used by put.c: how long a stripe write waits for the chunks still out
 * once a write quorum is durable, at least (as long again as the quorum
 * took, if that is longer); those left out are degraded and repaired. Well
 * above a healthy disk's slowest fdatasync under load, so that only a
 * stalled one is written around, and far below the peer timeout. */
#define GW_WRITE_GRACE_MS 2000

/* Used by put.c and sessions.c. */
struct gw_session {
    struct gw_pooled_session base;  /* over the nodes written to */
    bool missing[PLACE_MAX_CHUNKS]; /* chunk indices not written */
};

/* Used by meta_decide.c and meta_write.c. */
struct gw_meta_round {
    int ok;       /* homes that hold the record (or a newer one) */
    int held;     /* homes that answered they hold this very record */
    int landed;   /* homes that may hold this very record (still out included) */
    int refused;  /* homes holding a newer version (or this one with other bytes) */
    int newer;    /* homes holding a newer version: -ESTALE */
    uint64_t max; /* the newest version a refusal named */
    int err;      /* the most telling failure */
};

/* clock.c: The gateway's clocks */

int64_t gw_now_ms(void);
int64_t gw_realtime_ns(void);
/* The absolute CLOCK_REALTIME time ms from now, for pthread_cond_timedwait. */
struct timespec gw_deadline_in_ms(int64_t ms);

/* fanout.c: The fan-out */

/* Runs fn(arg, i) for i in [0, n) on the fan-out threads; returns when all are done. */
void gw_fanout_run(struct gw_objects *o, int n, void (*fn)(void *arg, int i), void *arg);

/* A pool that keeps `keep` threads and grows while jobs wait (see fanout.c). */
int gw_fanout_create(int keep, struct gw_fanout **out);
void gw_fanout_destroy(struct gw_fanout *f); /* after the jobs queued have run */
/* The window (10 s) over which threads beyond those kept that were idle throughout leave. */
void gw_fanout_idle_ms(struct gw_fanout *f, int ms);
int gw_fanout_threads(struct gw_fanout *f); /* threads in the pool now */

/* Queues fn(arg, i) on f's threads and returns at once (0, or -ENOMEM). */
int gw_fanout_post(struct gw_fanout *f, void (*fn)(void *arg, int i), void *arg, int i);

/* peer_state.c: What the gateway believes of each node */

enum gw_peer_state gw_peer_state(struct gw_objects *o, int node);
const char *gw_peer_state_name(enum gw_peer_state s);
bool gw_node_is_down(struct gw_objects *o, int node);
/* Up, in service (not set out or draining) and with no chunk write left
 * behind still running: new chunks may go there. */
bool gw_node_takes_chunks(struct gw_objects *o, int node);
void gw_peer_answered(struct gw_objects *o, int node);

/* A call failed at the transport; connecting: while setting up a connection. */
void gw_peer_failed(struct gw_objects *o, int node, int rc, bool connecting);

/* The suspect and down verdicts on every node so far: it moves whenever a
 * node failed a call, restarted or went silent. */
uint64_t gw_peer_troubles(struct gw_objects *o);

/* {"peer_state", "suspect", "last_seen_age_seconds", "misses", "peer_failures",
 *  "suspicions", "down_verdicts"} for the control API. */
json_t *gw_peer_json(struct gw_objects *o, int node);

void gw_peer_note(struct gw_objects *o, int node, const char *why);

/* clients.c: RPC clients of the nodes */

/* A client of the node (an idle one, or a new connection); a failed connect
 * is the failure detector's evidence. */
int gw_client_get(struct gw_objects *o, int node, struct node_client **out);
/* An idle client of the node, never a new connection (connecting may
 * block): -EAGAIN when there is none. */
int gw_client_idle(struct gw_objects *o, int node, struct node_client **out);

/* A new connection of its own with another RPC bound (a scrub); the caller closes it. */
int gw_client_open(struct gw_objects *o, int node, int timeout_ms, struct node_client **out);

/* rc: the call's result, the detector's evidence (0: the node answered; a
 * transport failure: it did not, and its idle clients are dropped). */
void gw_client_put(struct gw_objects *o, int node, struct node_client *c, int rc);
/* A chunk read's result as evidence: a missing or corrupt chunk is an
 * answer, and so is one larger than the reader's room. */
static inline int gw_chunk_read_evidence(int rc)
{
    return rc == -ENOENT || rc == -EBADMSG || rc == -EMSGSIZE ? 0 : rc;
}

void gw_drop_clients(struct gw_node *nd);

/* A node's metadata blob of a key (node_client_get_meta) over one of its
 * clients: -EHOSTDOWN without a call if it is judged down; the outcome is
 * evidence, "none" (-ENOENT) an answer. */
int gw_node_get_meta(struct gw_objects *o, int node, const char *bucket, const char *key,
                     void **blob, size_t *len);

/* round_calls.c: The calls of a round its own thread has out */

struct gw_round_calls {
    struct node_call call[PLACE_MAX_CHUNKS];
    struct node_client *client[PLACE_MAX_CHUNKS];
    bool out[PLACE_MAX_CHUNKS];    /* call[i] is out: started, not ended */
    void (*end)(void *arg, int i); /* ends call i, on any thread */
    void *arg;
};
/* Ends the calls out that have their answers; the others go in out
 * (node_calls_wait's), their count returned. */
int gw_round_calls_reap(struct gw_round_calls *rc, int n, struct node_call **out);
/* The calls still out end on the fan-out fan. */
void gw_round_calls_hand_over(struct gw_fanout *fan, struct gw_round_calls *rc, int n);

/* detector.c: The failure detector's probes */

int gw_detector_start(struct gw_objects *o);
void gw_detector_stop(struct gw_objects *o);

/* A health call (retried once on a fresh connection); true if it answered. */
bool gw_probe_node(struct gw_objects *o, int node);

void gw_probe_nodes(struct gw_objects *o, const int *place, const bool *missing, int n, bool which);

/* pools.c: Pools */

const struct gw_pool *gw_pool_find(struct gw_objects *o, const char *name);

/* The scanner's counts of a complete walk, usage[i] for pool i (GW_MAX_POOLS). */
void gw_pools_usage_set(struct gw_objects *o, const struct gw_pool_usage *usage);

const struct gw_pool *gw_pool_default(struct gw_objects *o);

struct deg_graph;
/* The pool's decode DEG for a degraded read: erased chunks rebuilt at the
 * gateway, chunk c read on participant holder[c], chunks unavailable[c]
 * (NULL: none) not read. */
int gw_decode_graph(const struct gw_pool *p, const bool *erased, const bool *unavailable,
                    const int *holder, struct deg_graph **out, char *err, size_t errlen);

int gw_pool_add(struct gw_objects *o, const struct place_pool *pp, char *msg, size_t msglen);
json_t *gw_cluster_map_json(struct gw_objects *o);
int gw_save_embedded_map(struct gw_objects *o);

/* version_clock.c: Metadata records, versions */

/* The version clock: the next version of this gateway, and a version seen. */
uint64_t gw_hlc_next(struct gw_objects *o);

void gw_hlc_observe(struct gw_objects *o, uint64_t version);

/* records.c: One record's fields */

uint64_t gw_rec_version(const json_t *rec);
bool gw_rec_deleted(const json_t *rec);
/* The fields a conditional write's vote adds to the record it copies
 * (write_if.c): its upload, when it was cast. */
#define GW_VOTE_BY "vote_by"
#define GW_VOTE_AT "vote_at"
/* Equal but for those and the version when either is a vote: the votes of
 * writers racing on one object copy it, so each home's inline shard of the
 * object or of any vote is the same, and reads take them all for one. */
bool gw_rec_same(const json_t *a, const json_t *b);
int gw_oid_parse(const char *hex, uint8_t oid[NODE_OBJECT_ID_BYTES]);
int gw_check_key(const char *bucket, const char *key);
uint64_t gw_next_version(struct gw_objects *o, const json_t *prev);
void gw_rec_object_info(const json_t *rec, struct gw_object_info *out);

/* Stored headers and ACL of attrs (may be NULL) into a record, or copied from
 * one record to another (an upload's to its object's); -ENOMEM. */
int gw_rec_set_extras(json_t *rec, const struct gw_object_info *attrs);

int gw_rec_copy_extras(json_t *dst, const json_t *src);
void gw_hex_encode(const uint8_t *b, size_t n, char *out);
/* An ETag as a header carries it (quoted or not) into out, unquoted; -EINVAL
 * when empty or too long to be one. */
#define GW_ETAG_MAX 48
int gw_etag_unquote(const char *etag, char out[GW_ETAG_MAX]);
bool gw_valid_bucket(const char *b);
char *gw_rec_dump(const json_t *rec);

/* inline.c: Small objects inside their records (docs/DESIGN.md "Inline objects") */

#define GW_INLINE_BODY    "inline_body"    /* in memory only: a read record's decoded body */
#define GW_INLINE_REBUILT "inline_rebuilt" /* in memory only: true when it needed parity */
/* default inline_max: a body up to it costs one metadata round, not a
 * stripe round (n appends, each 2 flushes) and then that round: a 64 KiB PUT
 * 4.5 -> 1.5 ms p50 (README "S3 benchmark"); MinIO inlines up to 128 KiB too. */
#define GW_INLINE_MAX 131072
#define GW_INLINE_CAP 262144 /* the largest inline_max */

/* The JSON part of a stored blob (a tail after a NUL is not JSON). */
json_t *gw_rec_load(const void *blob, size_t len);

/* True when rec is an inline object's: RS(k, m) shards of a len-byte body. */
bool gw_rec_inline(const json_t *rec, int *k, int *m, size_t *len);

/* The decoded body of an inline record as read (NULL: not carried). */
const uint8_t *gw_rec_inline_body(const json_t *rec, size_t *len);
int gw_rec_set_inline_body(json_t *rec, const uint8_t *body, size_t len);

/* Bytes of one shard of a len-byte body (at least 1). */
size_t gw_inline_shard_len(size_t len, int k);

/* *shards: k + m shards of gw_inline_shard_len bytes each, contiguous (free()). */
int gw_inline_encode(int k, int m, const uint8_t *body, size_t len, uint8_t **shards);

/* shards[i] (NULL: absent) for i < k + m; *body holds the len bytes (free()).
 * -EIO with fewer than k shards. */
int gw_inline_decode(int k, int m, size_t len, const uint8_t *const *shards, uint8_t **body);

/* A home's blob: json, NUL, the tail holding shard `index` (free()). */
char *gw_inline_blob(const char *json, int index, const uint8_t *shard, size_t slen, size_t *len);

/* The tail of a stored blob: -ENODATA none, -EBADMSG malformed, -EILSEQ the
 * shard fails its crc32c (index and shard are set then too). */
int gw_inline_tail(const void *blob, size_t len, int *index, const uint8_t **shard, size_t *slen);

/* layout.c: Where an object's bytes are */

/* Where an object's bytes are. A record's "stripes" are in object
 * order; stripe s holds k * len bytes (its data chunks, the last one zero
 * padded) at object offset "off" (absent: right after stripe s - 1), and its
 * chunks are {"oid", "i", c} (absent: the record's "oid" and s). A multipart
 * object concatenates its parts' stripes, each with its part's oid, its
 * index in that part, and its offset. */
/* start[s] for s in [0, ns], start[ns] = the record's size; malloc'd. -EIO
 * when the offsets do not describe the size (a damaged record). */
int gw_layout_starts(const json_t *rec, uint64_t **start);

/* The stripe holding byte `off`: the last s < ns with start[s] <= off. */
size_t gw_layout_find(const uint64_t *start, size_t ns, uint64_t off);

/* Stripe s's chunk identity. */
int gw_layout_chunk(const json_t *rec, size_t s, uint8_t oid[NODE_OBJECT_ID_BYTES],
                    uint64_t *stripe);

int gw_stripe_node(struct gw_objects *o, const json_t *stripe, int c);
bool gw_stripe_chunk_missing(const json_t *stripe, int c);

/* meta_homes.c: Which nodes are a record's homes */

/* Node i is a metadata member: not out, or out but its records not moved yet. */
bool gw_meta_member(struct gw_objects *o, int node);
int gw_meta_homes(struct gw_objects *o, const char *bucket, const char *key, int *out);
int gw_meta_homes_excl(struct gw_objects *o, const char *bucket, const char *key, const bool *excl,
                       int *out);

/* meta_write.c: Metadata records, writes */

/* The homes an inline record's round waits for: W + 1 where there are more
 * homes than W. Its shards decode from any W, so W alone would leave it no
 * spare (a stripe's write quorum keeps one too, k + 1). */
int gw_meta_inline_quorum(const struct gw_objects *o);

/* Commits rec on the key's metadata nodes in one round; 0 once meta_wq copies
 * are durable (or refused by meta_wq homes holding newer versions: superseded).
 * rec's version may be raised past a newer one a node holds. -EHOSTDOWN (or a
 * node's own error): no copy can have landed, nothing of rec can ever be read.
 * GW_META_IN_DOUBT: fewer than meta_wq took it but some may have; a later
 * read may return it, so what it names must be kept. */
#define GW_META_IN_DOUBT (-ETIMEDOUT)
int gw_meta_write(struct gw_objects *o, const char *bucket, const char *key, json_t *rec);

/* gw_meta_write that also says what it did to the records it replaced:
 * replaced (a JSON array) gets each distinct record a home answered it
 * replaced (committed only: their chunks are garbage once readers are done);
 * *lost: returned 0 but refused by W homes, so no read will ever return rec
 * (what it names is garbage). */
int gw_meta_commit(struct gw_objects *o, const char *bucket, const char *key, json_t *rec,
                   json_t *replaced, bool *lost);

/* As gw_meta_write at rec's own version: -ESTALE (nothing written) when a
 * node holds a newer one (a compare-and-set of a read record, e.g. repair's). */
int gw_meta_write_at(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec);

/* Writes rec to the key's homes among the nodes not excl[] (a membership
 * change: the records move before the members change); 0 once meta_wq hold
 * it or a newer version. */
int gw_meta_copy(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                 const bool *excl);

/* Removes the record from every copy, no tombstone: only for records whose
 * coming back is harmless (the repair queue's). 0 once meta_wq are gone. */
int gw_meta_remove(struct gw_objects *o, const char *bucket, const char *key);

/* The same, then every member's copy (a record some listing walks until it is gone). */
int gw_meta_remove_all(struct gw_objects *o, const char *bucket, const char *key);

int gw_meta_put_as_is(struct gw_objects *o, const char *bucket, const char *key, const json_t *rec,
                      const bool *excl, struct gw_meta_round *r);

/* meta_read.c: Metadata records, reads */

/* Newest record of bucket/key (tombstones included) in *out, or -ENOENT. */
int gw_meta_read(struct gw_objects *o, const char *bucket, const char *key, json_t **out);

/* The same, asking every home at once, so that each that lacks the record
 * gets it. whole NULL: returns once R answered, the rest repaired as they
 * answer; else waits for every home, and *whole says whether each answered
 * and now holds the record. */
int gw_meta_read_all(struct gw_objects *o, const char *bucket, const char *key, json_t **out,
                     bool *whole);

/* meta_heal.c: Metadata heal */

/* Some home of bucket/key may lack its newest record: read it from every
 * home once they are all up. */
void gw_meta_heal_note(struct gw_objects *o, const char *bucket, const char *key);
int gw_meta_heal_start(struct gw_objects *o);
void gw_meta_heal_stop(struct gw_objects *o);
size_t gw_meta_heal_pending(struct gw_objects *o); /* keys waiting */

/* True while this gateway cannot tell that every home lacking a record is
 * noted: reads then ask every home, repairing what they find. */
bool gw_meta_heal_doubt(struct gw_objects *o);

/* meta_decide.c: Metadata records, decisions */

/* A once-only decision at vote's version (see meta_decide.c): *out is the vote
 * held by W homes (maybe vote itself), or a newer record of the key (the
 * outcome, written after the decision); -EAGAIN while undecided. */
int gw_meta_decide(struct gw_objects *o, const char *bucket, const char *key, const json_t *vote,
                   json_t **out);

/* meta_list.c: Listing records */

/* Every record of `bucket`, tombstones too (what a migration copies). */
int gw_meta_list_all(struct gw_objects *o, const char *bucket,
                     int (*cb)(const char *key, json_t *rec, void *arg), void *arg);

/* Every live record of an object: of every live bucket, then of ".mpu"
 * (multipart parts), each as gw_meta_list gives it with the name it is under
 * (space). Non-zero if a listing failed or cb stopped the walk. */
int gw_meta_walk_objects(struct gw_objects *o,
                         int (*cb)(const char *space, const char *key, json_t *rec, void *arg),
                         void *arg);

/* Every live (not deleted) record of `bucket` in key order, newest version of
 * each, merged across the nodes. cb returns non-zero to stop. want: how many
 * records the caller expects to take (0: no idea), so that the first page
 * asked of each node is no larger than needed. */
int gw_meta_list(struct gw_objects *o, const char *bucket, const char *prefix,
                 const char *start_after, size_t want,
                 int (*cb)(const char *key, json_t *rec, void *arg), void *arg);

/* gc.c: Garbage */

void gw_gc_queue(struct gw_objects *o, json_t *rec, int delay_ms); /* borrows rec */
/* The records a commit replaced (gw_meta_commit), each upload once: a
 * conditional write's vote copies the object it replaces (write_if.c). */
void gw_gc_queue_replaced(struct gw_objects *o, const json_t *replaced, int delay_ms);
void gw_gc_run(struct gw_objects *o, bool all);
void *gw_gc_main(void *arg);

/* bucket_cache.c: Bucket records a gateway read recently, so a PUT does not read its buc */

/* The live record of a bucket, from this gateway's cache
 * when read less than bucket_cache_ms ago (-ENOENT: none, or deleted). */
int gw_bucket_cached(struct gw_objects *o, const char *name, json_t **rec);

/* Forgets the bucket (this gateway created, deleted or changed it). */
void gw_bucket_cache_drop(struct gw_objects *o, const char *name);

/* buckets.c: Buckets */

/* Sets (value NULL: removes) one field of the bucket's record, as a new version. */
int gw_bucket_set_field(struct gw_objects *o, const char *name, const char *field,
                        const json_t *value);

/* An object record carries the "created" of the bucket it was committed
 * into (0: none was there). A commit can outlive its bucket: through a
 * gateway whose cache still holds a bucket deleted elsewhere, or racing the
 * delete's emptiness check. Such a record belongs to no bucket: it stays out
 * of a bucket created again under the name, and is collected (tombstones.c).
 * Records written before the stamp existed have none and are never judged. */
#define GW_REC_BUCKET "bucket_created"

/* Stamps rec with its bucket's "created" as this gateway knows it (0: it
 * has none); -errno when the bucket's record cannot be read. */
int gw_bucket_stamp(struct gw_objects *o, const char *bucket, json_t *rec);

/* Whether rec was committed into another incarnation of its bucket than
 * created_ns's, the bucket's now; any record when the bucket is gone
 * (GW_BUCKET_GONE): DeleteBucket found it empty, so whatever is there since
 * came after. */
#define GW_BUCKET_GONE (-1)
bool gw_rec_outlived(const json_t *rec, int64_t created_ns);

/* The same against the bucket as this gateway knows it, read again when
 * the cached record disagrees (another gateway may have created it since). */
bool gw_bucket_outlived(struct gw_objects *o, const char *bucket, const json_t *rec);

/* object_records.c: The object calls that touch only its record */

int gw_object_rec(struct gw_objects *o, const char *bucket, const char *key, json_t **rec);
/* rec (may be NULL) is an object: not a tombstone, not outlived by its bucket. */
bool gw_object_live(struct gw_objects *o, const char *bucket, const json_t *rec);

/* session_pool.c: Idle DEG sessions */

void gw_session_pool_init(struct gw_session_pool *sp, int max_idle);

/* Closes the idle sessions (before the clients and nodes go). */
void gw_session_pool_destroy(struct gw_objects *o, struct gw_session_pool *sp);

/* What an idle session over the wanted pool and nodes is to its caller. */
enum gw_session_fit {
    GW_SESSION_OTHER, /* kept for another stripe */
    GW_SESSION_TAKE,  /* this one */
    GW_SESSION_DROP,  /* unsound: closed */
};
typedef enum gw_session_fit (*gw_session_fit_fn)(struct gw_objects *o,
                                                 const struct gw_pooled_session *ss,
                                                 const void *key);

/* Takes the newest idle session over pool and nodes (n, sorted) that fit
 * (o, ss, key) accepts, none when fresh; closes every idle one past the
 * peer timeout and every one fit drops on the way. NULL: none. */
struct gw_pooled_session *gw_session_pool_take(struct gw_objects *o, struct gw_session_pool *sp,
                                               const struct gw_pool *pool, const int *nodes, int n,
                                               bool fresh, gw_session_fit_fn fit, const void *key);

/* Connects ss (pool, n and nodes set; the first member of a zeroed
 * caller's session) to its nodes and opens g on them; on failure ss is
 * freed. */
int gw_pooled_session_open(struct gw_objects *o, struct gw_pooled_session *ss,
                           const struct deg_graph *g, char *err, size_t errlen);

/* Back to the idle list after a good run (the oldest beyond max_idle
 * closed); closed after a failed one (rc), its clients that failed too.
 * -EINPROGRESS: a run that left sinks running (node_deg_quorum): closed on
 * the fan-out (the close waits for them), their nodes taking no new chunks
 * until then. */
void gw_session_pool_release(struct gw_objects *o, struct gw_session_pool *sp,
                             struct gw_pooled_session *ss, int rc);

/* sessions.c: Encode sessions */

int gw_session_get(struct gw_objects *o, const struct gw_pool *pool, const struct deg_graph *g,
                   const int *place, const bool *missing, bool fresh, struct gw_session **out,
                   bool *reused, char *err, size_t errlen);
void gw_session_put(struct gw_objects *o, struct gw_session *ss, int rc);

/* write_if.c: Conditional writes */

/* The decision among the conditional writers of bucket/key (see write_if.c;
 * if_match NULL: only if absent, else the ETag to match, "*" any): 0 when this
 * one (upload oid) won, and its record must go above *slot, committed while
 * gw_write_if_in_time(*voted_ns); GW_PUT_PRECONDITION, GW_PUT_CONFLICT, -ENOENT
 * (If-Match, no object), -errno. */
int gw_write_if_decide(struct gw_objects *o, const char *bucket, const char *key, const char *oid,
                       const char *if_match, uint64_t *slot, int64_t *voted_ns);
bool gw_write_if_in_time(int64_t voted_ns);

/* put.c: PUT */

/* Ends a PUT without a record of its own (a multipart part): its stripes are
 * durable and *rec = {"oid", "size", "etag", "stripes", "pool", "k", "n",
 * "chunk_size"} names them, the caller owns them now. On failure they are
 * garbage. Frees the handle. */
int gw_put_seal(struct gw_put *p, json_t **rec);

/* repair_status.c: Repair status for the control API and metrics */

/* Stripes waiting in the repair queue (as last listed, and reports not flushed yet). */
uint64_t gw_repair_queue_length(struct gw_objects *o);

#endif
