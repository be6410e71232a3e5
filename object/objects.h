/*
 * The object layer: buckets and objects over the cluster's nodes. The S3
 * front end (gateway/s3_*.c) and the control API speak only to this interface;
 * it in turn places stripes (placement/), moves and computes them through the
 * pool's DEGs (deg/), and keeps every byte and every metadata record on the
 * nodes (node/), so any gateway can serve any object.
 *
 * Contract:
 * - A PUT is streamed: gw_put_write() takes the body piece by piece and may
 *   block while full stripes are written; nothing is visible until
 *   gw_put_commit() returns 0, which means the data and the metadata record
 *   are durable on the write quorum: of each stripe at least the pool's
 *   write_quorum chunks (placement/placement.h), the others (nodes down)
 *   recorded as missing and queued for repair. An aborted or failed PUT
 *   leaves the previous version (if any) untouched.
 * - Concurrent PUTs to one key: the last acknowledged commit wins; readers see
 *   one whole version, never a mix.
 * - A GET is streamed: gw_get_read() returns bytes in order; a missing or
 *   corrupt chunk turns its stripe into a degraded read (counted, and queued
 *   for repair); more lost chunks than the code tolerates fail with -EIO,
 *   never wrong bytes.
 * - All calls are thread-safe; handles (gw_put, gw_get) belong to one thread
 *   at a time.
 *
 * Errors (negative errno), mapped by the front end to S3 codes:
 *   -ENOENT   NoSuchBucket / NoSuchKey       -EEXIST  BucketAlreadyOwnedByYou
 *   -ENOTEMPTY BucketNotEmpty                -EINVAL  InvalidBucketName / InvalidArgument
 *   -ENAMETOOLONG KeyTooLong                 -EFBIG   EntityTooLarge
 *   -EIO, and every peer failure (gw_transport_error: -EHOSTDOWN, -ETIMEDOUT,
 *   -ECONNREFUSED, -ECONNRESET, -ESHUTDOWN, ...)  ServiceUnavailable (503,
 *   with Retry-After): not enough nodes answered, a transient condition
 *   -ENOSPC   the cluster is full (507/InsufficientStorage-like, as S3's 503)
 */
#ifndef INEC_OBJECT_OBJECTS_H
#define INEC_OBJECT_OBJECTS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#define GW_BUCKET_MAX 63
#define GW_KEY_MAX    1024

struct gw_objects;
struct gw_put;
struct gw_get;

#define GW_ACL_MAX 32 /* bytes of a canned ACL's name, NUL included */

struct gw_bucket_info {
    char name[GW_BUCKET_MAX + 1];
    int64_t created_ns;   /* CLOCK_REALTIME */
    char acl[GW_ACL_MAX]; /* canned ACL ("" = private); names are the front end's */
};

struct gw_object_info {
    uint64_t size;
    char etag[48];    /* hex MD5 of the body; multipart: MD5 of the parts' MD5s + "-N" */
    int64_t mtime_ns; /* CLOCK_REALTIME of the commit */
    uint64_t version; /* grows with every overwrite */
    char content_type[256];
    json_t *user_meta;    /* {"name": "value"} from x-amz-meta-*; owned by the info */
    json_t *headers;      /* {"Cache-Control": "value", ...}: response headers kept with the
                             object (the front end names them); owned, NULL when none */
    char acl[GW_ACL_MAX]; /* the canned ACL the object was written with ("" = private) */
};

/* Frees info->user_meta and headers; the struct itself is the caller's. */
void gw_object_info_clear(struct gw_object_info *info);
/* True for an errno that says a peer failed (down, refused, reset, timed out,
 * shutting down, unreachable): a transient condition of the cluster. */
bool gw_transport_error(int rc);

/* Buckets. Names follow S3's rules (3..63 of [a-z0-9.-], ...). */
int gw_bucket_create(struct gw_objects *o, const char *name);
int gw_bucket_delete(struct gw_objects *o, const char *name); /* only when empty */
int gw_bucket_head(struct gw_objects *o, const char *name, struct gw_bucket_info *out);
/* Calls cb for each bucket in name order; a non-zero return stops the walk. */
int gw_bucket_list(struct gw_objects *o, int (*cb)(const struct gw_bucket_info *b, void *arg),
                   void *arg);
/* Replaces the bucket's canned ACL ("" or "private": private). */
int gw_bucket_acl_set(struct gw_objects *o, const char *name, const char *acl);

/* PUT. `attrs` gives content_type, user_meta, headers and acl (borrowed); may be NULL. */
int gw_put_begin(struct gw_objects *o, const char *bucket, const char *key,
                 const struct gw_object_info *attrs, struct gw_put **out);
/* Adds a header kept with the object (its headers) known only once the body
 * was read, e.g. a verified x-amz-checksum-*; before gw_put_commit. */
int gw_put_set_header(struct gw_put *p, const char *name, const char *value);
int gw_put_write(struct gw_put *p, const void *buf, size_t len);
/* The body's MD5 must be md5 (a client's Content-MD5): else the commit (or
 * a part's seal) fails with GW_PUT_BAD_DIGEST and stores nothing. The check
 * uses the MD5 the put takes anyway for the ETag, so the body is hashed once. */
void gw_put_expect_md5(struct gw_put *p, const uint8_t md5[16]);
#define GW_PUT_BAD_DIGEST (-EBADE)
/* The body's SHA-256 must be sha256 (a SigV4 signed payload's
 * x-amz-content-sha256), checked like gw_put_expect_md5 (GW_PUT_BAD_SHA256),
 * the hashing placed off the receive where it can be (put.c). Before the
 * first gw_put_write. */
int gw_put_expect_sha256(struct gw_put *p, const uint8_t sha256[32]);
#define GW_PUT_BAD_SHA256 (-EBADR)
/* The body goes into stripes whatever its size, never inline in its record:
 * for callers that later address its chunks (a volume's delta updates). */
void gw_put_striped(struct gw_put *p);
/* The commit stores the object only if a condition holds then: the key holds
 * no object (S3's If-None-Match: *), or the object there has this ETag
 * (If-Match; "*": any object; -ENOENT where none is). GW_PUT_PRECONDITION
 * when it does not, or when another conditional write of the key won the
 * race; GW_PUT_CONFLICT when the race is undecided, or another conditional
 * write may be committing (try again). Nothing is stored but on success. */
void gw_put_create_only(struct gw_put *p);
int gw_put_if_match(struct gw_put *p, const char *etag); /* -EINVAL: not an ETag */
#define GW_PUT_PRECONDITION (-ENOTUNIQ)
#define GW_PUT_CONFLICT     (-EDEADLK)
/* Durable on the write quorum, then visible; fills `out` (may be NULL).
 * Frees the handle whatever it returns. GW_PUT_BUCKET_GONE: the bucket was
 * deleted (maybe created again) since gw_put_begin; nothing is stored. */
int gw_put_commit(struct gw_put *p, struct gw_object_info *out);
#define GW_PUT_BUCKET_GONE (-EIDRM)
void gw_put_abort(struct gw_put *p);

/* GET of bytes [off, off + len) (len UINT64_MAX: to the end), clamped to
 * the size of the version it read (in `info`). */
int gw_get_begin(struct gw_objects *o, const char *bucket, const char *key, uint64_t off,
                 uint64_t len, struct gw_object_info *info, struct gw_get **out);
/* Before the first gw_get_read: only bytes [off, off + len) of the version
 * gw_get_begin read (a range parsed against its size, without a second
 * read of the record that an overwrite could change). */
void gw_get_narrow(struct gw_get *g, uint64_t off, uint64_t len);
/* Part `part` (1..GW_PART_MAX) of the version gw_get_begin read: its bytes
 * [*off, *off + *len) and the object's part count (*parts; 0 for an object not
 * uploaded in parts, whose one part is the whole). -ERANGE: no such part. */
int gw_get_part(const struct gw_get *g, int part, uint64_t *off, uint64_t *len, int *parts);
/* Returns bytes read (0 at the end) or a negative errno. */
ssize_t gw_get_read(struct gw_get *g, void *buf, size_t len);
void gw_get_end(struct gw_get *g);

int gw_object_head(struct gw_objects *o, const char *bucket, const char *key,
                   struct gw_object_info *out);
int gw_object_delete(struct gw_objects *o, const char *bucket, const char *key);
/* Only if the object there has this ETag (S3's If-Match; "*": any object),
 * decided as gw_put_if_match's: GW_PUT_PRECONDITION, GW_PUT_CONFLICT, -ENOENT
 * where no object is. */
int gw_object_delete_if(struct gw_objects *o, const char *bucket, const char *key,
                        const char *if_match);
/*
 * Object ACLs. gw_object_acl_set gives the object as it is now (its upload,
 * whatever repair later rewrites in its record) a canned ACL: it is kept
 * beside the object's record (never a rewrite of it, so it cannot race an
 * overwrite into pointing at freed chunks) and applies to that upload only; a
 * later PUT brings its own. gw_object_acl_get: the object's ACL now.
 */
int gw_object_acl_set(struct gw_objects *o, const char *bucket, const char *key, const char *acl);
int gw_object_acl_get(struct gw_objects *o, const char *bucket, const char *key,
                      char acl[GW_ACL_MAX]);
/* Keys of `bucket` after `start_after` (may be NULL or "") that begin with
 * `prefix`, in byte order; a non-zero return from cb stops the walk. want:
 * how many keys the caller expects to take (a LIST's max-keys + 1; 0: no
 * idea), so the nodes are not asked for pages larger than that first. */
int gw_object_list(struct gw_objects *o, const char *bucket, const char *prefix,
                   const char *start_after, size_t want,
                   int (*cb)(const char *key, const struct gw_object_info *info, void *arg),
                   void *arg);

/*
 * Multipart uploads (multipart.c). An upload and each of its parts are
 * metadata records on the nodes under an internal namespace that object
 * listings never show, so any gateway can continue, list, complete or abort
 * an upload another one began. A part is written like a PUT (its own chunks);
 * nothing is visible at bucket/key until gw_mpu_complete writes the object's
 * one record, whose stripes are the chosen parts' stripes in order. Parts not
 * chosen, and all parts of an aborted upload, are freed. A gateway that dies
 * mid-upload leaves the upload and its parts in place (listed by
 * gw_mpu_list) until an abort frees them, or gw_mpu_expire (the scanner's)
 * once it is older than the bucket's lifecycle rule or multipart_expire_ms:
 * that also finishes a Complete whose gateway died once it was decided.
 *
 * Errors beyond the object layer's: -ESRCH NoSuchUpload, -EPROTO InvalidPart
 * (unknown part or wrong ETag), -EDOM InvalidPartOrder, -ERANGE
 * EntityTooSmall (a part but the last under GW_PART_MIN_SIZE), -EFBIG the
 * object has more stripes than one record holds.
 */
#define GW_UPLOAD_ID_LEN 32 /* hex characters */
#define GW_PART_MAX      10000
#define GW_PART_MIN_SIZE (5u << 20)

struct gw_part_info {
    int number; /* 1..GW_PART_MAX */
    uint64_t size;
    char etag[33]; /* hex MD5 of the part, without quotes */
    int64_t mtime_ns;
};

/* attrs (content_type, user_meta; may be NULL) go to the completed object. */
int gw_mpu_create(struct gw_objects *o, const char *bucket, const char *key,
                  const struct gw_object_info *attrs, char upload_id[GW_UPLOAD_ID_LEN + 1]);
/* A part is a PUT: gw_put_write() the body, then gw_mpu_part_commit (which
 * frees the handle whatever it returns), or gw_put_abort(). Uploading a part
 * number again replaces the part. */
int gw_mpu_part_begin(struct gw_objects *o, const char *bucket, const char *key,
                      const char *upload_id, struct gw_put **out);
int gw_mpu_part_commit(struct gw_objects *o, struct gw_put *p, const char *bucket, const char *key,
                       const char *upload_id, int number, struct gw_part_info *out);
/* parts: number and etag of each part, in the order the client gives them.
 * create_only: as gw_put_create_only, decided before the upload's own end
 * (GW_PUT_PRECONDITION, GW_PUT_CONFLICT: the upload stays open). */
int gw_mpu_complete(struct gw_objects *o, const char *bucket, const char *key,
                    const char *upload_id, const struct gw_part_info *parts, size_t n,
                    bool create_only, struct gw_object_info *out);
int gw_mpu_abort(struct gw_objects *o, const char *bucket, const char *key, const char *upload_id);
/* Ends an abandoned upload (gw_mpu_expire's): aborts it, or, when a Complete
 * was decided on it that did not end it (its gateway died, its client never
 * sent it again), finishes that Complete (*completed): the object is written
 * as that Complete would have, unless the key was written since the upload
 * began, which then replaces it. */
int gw_mpu_end_abandoned(struct gw_objects *o, const char *bucket, const char *key,
                         const char *upload_id, bool *completed);
/* Parts numbered above `after`, in number order; cb returns non-zero to stop. */
int gw_mpu_list_parts(struct gw_objects *o, const char *bucket, const char *key,
                      const char *upload_id, int after,
                      int (*cb)(const struct gw_part_info *part, void *arg), void *arg);
/* Uploads in progress in `bucket` whose key begins with prefix (NULL: all),
 * ordered by key, then upload id. */
int gw_mpu_list(struct gw_objects *o, const char *bucket, const char *prefix,
                int (*cb)(const char *key, const char *upload_id, int64_t initiated_ns, void *arg),
                void *arg);

/*
 * Bucket lifecycle (lifecycle.c). rules: [{"id", "prefix", "enabled",
 * "abort_days"}] (AbortIncompleteMultipartUpload, the one action honoured),
 * kept in the bucket's record; NULL removes them. get: -ENODATA when the
 * bucket has none.
 */
int gw_bucket_lifecycle_set(struct gw_objects *o, const char *bucket, const json_t *rules);
int gw_bucket_lifecycle_get(struct gw_objects *o, const char *bucket, json_t **rules);
/* Ends (gw_mpu_end_abandoned) every upload older than its bucket's matching
 * enabled rule (days x lifecycle_day_ms), or than multipart_expire_ms (0:
 * never) where no rule matches. Returns how many it ended. */
uint64_t gw_mpu_expire(struct gw_objects *o);

/*
 * Opening the object layer.
 *
 * gw_objects_open: nodes that run as their own processes (`inec node`, see
 * scripts/cluster.sh), over tcp. cfg is cluster.json:
 *   {"map": <cluster map, placement/placement.h>, "nodes": {...per-node data dirs...},
 *    "gateway": {"max_get_ms": 3600000, "gc_delay_ms": max_get_ms + 10000,
 *                "bucket_cache_ms": 1000, "inline_max": 131072, "heal_max": 65536,
 *                "degraded_read": "direct" (or "deg"),
 *                "multipart_expire_ms": 604800000, "lifecycle_day_ms": 86400000,
 *                "deg_listen": "127.0.0.1", "repair": {...}, ...}}
 * (other "gateway" fields belong to the S3 front end and are ignored here).
 * A PUT of at most inline_max bytes (0..262144, 0: never) goes inline in its
 * record instead of stripes (inline.c).
 * No GET streams longer than max_get_ms (it is cut), and a replaced or
 * deleted version's chunks go gc_delay_ms after the change: so never under a
 * GET that began before it, on any gateway that shares this configuration.
 *
 * gw_objects_open_embedded: the gateway and its nodes in this process over
 * the mem transport, sharing one engine-thread pool, node i's store in
 * DIR/node-i. The first open writes DIR/cluster.json (9 nodes, pool "default"
 * rs:k=6,m=3 with PLACE_CHUNK_SIZE chunks, or what `opts` says: {"nodes", "profile",
 * "chunk_size", "engine_threads", "timeout_ms", "heartbeat_ms", "gc_delay_ms"});
 * later opens and pools created through the control API keep to that file.
 *
 * gw_objects_close: closes; embedded, it first finishes pending garbage
 * collection (no other gateway can be reading), otherwise it leaves it to the
 * scanner's orphan collection. With nothing on the gateway but caches, a
 * closed gateway loses nothing.
 */
int gw_objects_open(const json_t *cfg, struct gw_objects **out, char *msg, size_t msglen);
int gw_objects_open_embedded(const char *dir, struct gw_objects **out, char *msg, size_t msglen);
int gw_objects_open_embedded_opts(const char *dir, const json_t *opts, struct gw_objects **out,
                                  char *msg, size_t msglen);
void gw_objects_close(struct gw_objects *o); /* NULL is a no-op */

/* Embedded only: stop (as if the node died) or restart node `id`. */
int gw_objects_node_set_running(struct gw_objects *o, const char *id, bool running);

/* Creates a bucket whose objects go to pool `pool` (gw_bucket_create: "default"). */
int gw_bucket_create_in_pool(struct gw_objects *o, const char *name, const char *pool);

struct gw_objects_stats {
    uint64_t degraded_reads;  /* stripes read through a decode DEG, and GETs of inline
                               * bodies rebuilt from parity shards */
    uint64_t corrupt_chunks;  /* chunks that failed a CRC check (node or gateway) */
    uint64_t missing_chunks;  /* chunks not found, or on a node that did not answer */
    uint64_t failed_reads;    /* stripes that could not be rebuilt (-EIO) */
    uint64_t repair_queue;    /* chunks waiting for repair */
    uint64_t sessions_opened; /* encode sessions set up (each then serves many stripes) */
    uint64_t degraded_writes; /* stripes committed with missing chunks (below n, >= write quorum) */
    uint64_t hedged_reads;    /* GET stripes that read other chunks because one was late */
    uint64_t read_retries;    /* GET stripes whose failed chunk reads were tried again */
    uint64_t decode_sessions; /* decode sessions set up (each then serves many stripes) */
    uint64_t decode_runs;     /* stripes rebuilt by a run of a decode session */
    uint64_t gc_pending;      /* stripes of replaced versions whose chunks are not deleted yet
                               * (waiting for gc_delay_ms or being deleted) */
};
int gw_objects_counters(struct gw_objects *o, struct gw_objects_stats *st);
/*
 * The repair service (repair.c, scanner.c; README "Repair"). Every open runs
 * it unless its options say otherwise; the "repair" section of the options
 * (cluster.json's "gateway", or the embedded opts):
 *   {"paused": false, "throttle_mbps": 0 (unlimited), "scan_interval_ms": 60000
 *    (0: scans only when asked or after a node state change),
 *    "down_out_ms": 600000, "orphan_grace_ms": 3600000,
 *    "scheme": "auto" | "ppr" | "ecpipe" | "rs", "schemes": {"pool": "..."}}
 * Pause and throttle set through gw_objects_repair_set, and node states, are
 * kept on the nodes and win over the options.
 *
 * gw_objects_repair_json: the queue, one element per lost chunk:
 *   [{"bucket", "key", "object", "stripe", "chunk", "node", "reason", "queued_ns"}],
 *   reason "missing", "corrupt", "slow", "node-down" (found by reads),
 *   "write-missing" (a degraded write could not store it) or "scan".
 * gw_objects_repair_status: {"state": "idle" | "running" | "paused",
 *   "throttle_mbps", "progress": {"stripes_done", "stripes_total", "bytes_done",
 *   "bytes_total", "rate_bytes_per_s", "eta_s" (-1: unknown), "elapsed_s"},
 *   "queue": {"stripes", "bytes", "waiting", "oldest_age_s"}, "totals": {...},
 *   "scan": {"scans", "stripes", "degraded_by_lost": {"1": N, ...}, ...}, "nodes": [...]}
 * gw_objects_repair_set: {"paused": bool, "throttle_mbps": MB/s (0 = unlimited),
 *   "scan": true (walk now)}; -EINVAL with msg.
 * gw_objects_node_state: state "out" (gone for good: every chunk rebuilt
 *   elsewhere, its metadata moved), "draining" (its chunks move, then it may
 *   leave) or "up"; -ENOENT unknown node, -EINVAL a state that would leave
 *   fewer nodes than a pool's stripe needs.
 */
int gw_objects_repair_json(struct gw_objects *o, json_t **out);
int gw_objects_repair_status(struct gw_objects *o, json_t **out);
int gw_objects_repair_set(struct gw_objects *o, const json_t *settings, char *msg, size_t msglen);
int gw_objects_node_state(struct gw_objects *o, const char *id, const char *state, char *msg,
                          size_t msglen);

/*
 * Queries for the control API (admin_server.c) and /metrics. Each returns 0
 * and a new JSON reference in *out, or a negative errno.
 *
 * gw_objects_cluster_json:
 *   {"nodes": [{"id": 0, "addr": "...", "domain": "...", "up": true,
 *               "capacity_bytes": N, "used_bytes": N}, ...],
 *    "pools": [...as gw_objects_pools_json...], "degraded_reads": N, "hedged_reads": N,
 *    "read_retries": N, ...}
 * gw_objects_pools_json: [{"name": "...", "profile": "rs:k=6,m=3", "nodes": [ids]}, ...]
 * gw_objects_pool_create: spec {"name", "profile", "nodes" (optional)}; -EEXIST,
 *   -EINVAL (msg says why); *out is the new pool.
 * gw_objects_object_json (-ENOENT):
 *   {"bucket", "key", "size", "etag", "version", "pool",
 *    "stripes": [{"index": i, "chunks": [{"index": c, "node": id,
 *                 "state": "ok" | "missing" | "corrupt" | "node-down"}]}]}
 * gw_objects_deg: the DEG the pool runs to encode a stripe, or to decode one
 *   with the chunk indices `lost` missing: JSON in *json, or, when dot is not
 *   NULL, Graphviz text in *dot (free()) instead. -ENOENT unknown pool,
 *   -EINVAL bad op or more losses than the code tolerates.
 */
int gw_objects_cluster_json(struct gw_objects *o, json_t **out);
int gw_objects_pools_json(struct gw_objects *o, json_t **out);
int gw_objects_pool_create(struct gw_objects *o, const json_t *spec, json_t **out, char *msg,
                           size_t msglen);
int gw_objects_object_json(struct gw_objects *o, const char *bucket, const char *key, json_t **out);
int gw_objects_deg(struct gw_objects *o, const char *pool, const char *op, const int *lost,
                   size_t nlost, json_t **json, char **dot);

#endif
